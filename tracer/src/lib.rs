//! The interprocedural control structure of a traced execution (sections 3 and 4 of the
//! POLY-PROF paper): dynamic control-flow graphs and call graph, loop-nesting forests
//! (Havlak), recursive components, loop events, dynamic interprocedural iteration vectors, and
//! the dynamic schedule tree.
//!
//! It works on a [`Recording`] in two replays: the first builds the control structure
//! ([`StructureBuilder`]), the second ([`Scheduler`]) turns transfers into loop events and gives
//! each instruction its iteration vector, building the schedule tree on the way.

pub mod havlak;
pub mod naming;
pub mod schedule;
pub mod structure;
pub mod walk;

pub use naming::Naming;
pub use schedule::{NodeId, NodeKind, ScheduleTree, Scheduler, Step};
pub use structure::{Component, FuncCfg, FuncId, RecRole, Structure, StructureBuilder};

use ptrace_runner::record::{Recording, ReplayError};
use ptrace_runner::{EventSink, OwnedEvent};

/// Errors of the tracer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

/// The control structure and schedule tree of one execution.
#[derive(Clone, Debug)]
pub struct Analysis {
    pub structure: Structure,
    pub tree: ScheduleTree,
}

/// Runtime start addresses of the executable's function symbols: jumps to them are tail calls.
pub fn function_entries(exe: &symbols::ElfFile, bias: u64) -> Vec<u64> {
    exe.functions()
        .iter()
        .map(|f| f.address.wrapping_add(bias))
        .collect()
}

/// Anything that can send the same events again, any number of times: a [`Recording`], or
/// events kept in memory (small runs, tests).
pub trait EventSource {
    fn replay_into(&self, sink: &mut dyn EventSink) -> Result<(), ReplayError>;
}

impl EventSource for Recording {
    fn replay_into(&self, sink: &mut dyn EventSink) -> Result<(), ReplayError> {
        Recording::replay_into(self, sink)
    }
}

impl EventSource for [OwnedEvent] {
    fn replay_into(&self, sink: &mut dyn EventSink) -> Result<(), ReplayError> {
        for e in self {
            sink.event(&e.as_event()).map_err(ReplayError::Sink)?;
        }
        Ok(())
    }
}

/// Replays `source` twice: builds the structure, then the schedule tree, calling `on_step`
/// with every instruction's context and coordinates.
pub fn analyze<F: FnMut(&Step<'_>)>(
    source: &(impl EventSource + ?Sized),
    entries: &[u64],
    on_step: F,
) -> Result<Analysis, Error> {
    let mut builder = StructureBuilder::new(entries.iter().copied());
    source.replay_into(&mut builder)?;
    let structure = builder.finish();
    let mut scheduler = Scheduler::new(&structure, entries.iter().copied(), on_step);
    source.replay_into(&mut scheduler)?;
    let tree = scheduler.finish();
    Ok(Analysis { structure, tree })
}
