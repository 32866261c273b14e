//! The interprocedural control structure of a traced execution (sections 3 and 4 of the
//! POLY-PROF paper): dynamic control-flow graphs and call graph, loop-nesting forests
//! (Havlak), recursive components, loop events, dynamic interprocedural iteration vectors, and
//! the dynamic schedule tree.
//!
//! It works on a [`Recording`] in two replays: the first builds the control structure
//! ([`StructureBuilder`]), the second ([`Scheduler`]) turns transfers into loop events and gives
//! each instruction its iteration vector, building the schedule tree on the way.

pub mod deps;
pub mod havlak;
pub(crate) mod libcall;
pub mod naming;
pub mod omp_source;
pub mod schedule;
mod shadow;
pub mod structure;
pub mod walk;

pub use deps::{Dep, DepKind, DepOptions, DepTracker, Effect, Stmt, Through};
pub use naming::Naming;
pub use schedule::{NodeId, NodeKind, ScheduleTree, Scheduler, SchedulerSink, SignalPoint, Step};
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
pub fn function_entries(bin: symbols::Loaded<'_>) -> Vec<u64> {
    bin.exe
        .functions()
        .iter()
        .map(|f| bin.runtime(symbols::LinkAddr(f.address)))
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
    let structure = build_structure(source, entries)?;
    let mut sink = SchedulerSink {
        scheduler: Scheduler::new(&structure, entries.iter().copied()),
        on_step,
    };
    source.replay_into(&mut sink)?;
    let tree = sink.scheduler.finish();
    Ok(Analysis { structure, tree })
}

/// The second pass's schedule half, on a structure built beforehand: `on_event` sees every
/// event, then `on_step` every instruction the event holds with its iteration vector. The
/// dependence stage ([`DepTracker`]) can then run elsewhere, fed the same two streams in the
/// same order (as [`analyze_with_deps_on`] feeds it).
pub fn analyze_steps_on<E: FnMut(&ptrace_runner::Event<'_>), F: FnMut(&Step<'_>)>(
    source: &(impl EventSource + ?Sized),
    structure: Structure,
    entries: &[u64],
    mut on_event: E,
    on_step: F,
) -> Result<Analysis, Error> {
    struct Steps<'s, E, F> {
        scheduler: Scheduler<'s>,
        on_event: E,
        on_step: F,
    }
    impl<E: FnMut(&ptrace_runner::Event<'_>), F: FnMut(&Step<'_>)> EventSink for Steps<'_, E, F> {
        fn event(&mut self, ev: &ptrace_runner::Event<'_>) -> std::io::Result<()> {
            (self.on_event)(ev);
            self.scheduler.process(ev, &mut self.on_step);
            Ok(())
        }
    }
    let mut pass = Steps {
        scheduler: Scheduler::new(&structure, entries.iter().copied()),
        on_event: &mut on_event,
        on_step,
    };
    source.replay_into(&mut pass)?;
    let tree = pass.scheduler.finish();
    Ok(Analysis { structure, tree })
}

/// The first replay alone: the control structure.
pub fn build_structure(
    source: &(impl EventSource + ?Sized),
    entries: &[u64],
) -> Result<Structure, Error> {
    let mut builder = StructureBuilder::new(entries.iter().copied());
    source.replay_into(&mut builder)?;
    Ok(builder.finish())
}

/// Like [`analyze`], and also runs the dependence stage: `on_dep` receives every dynamic
/// dependence, `on_step` every instruction, in execution order.
pub fn analyze_with_deps<F: FnMut(&Step<'_>), G: FnMut(&Dep<'_>)>(
    source: &(impl EventSource + ?Sized),
    entries: &[u64],
    opts: DepOptions,
    on_step: F,
    on_dep: G,
) -> Result<(Analysis, DepTracker), Error> {
    let structure = build_structure(source, entries)?;
    analyze_with_deps_on(source, structure, entries, opts, on_step, on_dep)
}

/// The second pass of [`analyze_with_deps`], on a structure built beforehand.
pub fn analyze_with_deps_on<F: FnMut(&Step<'_>), G: FnMut(&Dep<'_>)>(
    source: &(impl EventSource + ?Sized),
    structure: Structure,
    entries: &[u64],
    opts: DepOptions,
    mut on_step: F,
    mut on_dep: G,
) -> Result<(Analysis, DepTracker), Error> {
    struct Pass2<'s, F, G> {
        scheduler: Scheduler<'s>,
        deps: DepTracker,
        on_step: F,
        on_dep: G,
    }
    impl<F: FnMut(&Step<'_>), G: FnMut(&Dep<'_>)> EventSink for Pass2<'_, F, G> {
        fn event(&mut self, ev: &ptrace_runner::Event<'_>) -> std::io::Result<()> {
            // A library call's dependences: its arguments at `LibCall`, the rest at `LibReturn`
            // (the `call` instruction's own step came before, with its `Insn`). Instructions,
            // almost every event, go to `step` alone.
            if !matches!(ev, ptrace_runner::Event::Insn(_)) {
                self.deps.event(ev, &mut self.on_dep);
            }
            let (deps, on_step, on_dep) = (&mut self.deps, &mut self.on_step, &mut self.on_dep);
            self.scheduler.process(ev, &mut |step| {
                on_step(step);
                deps.step(step, on_dep);
            });
            Ok(())
        }
    }
    let mut pass = Pass2 {
        scheduler: Scheduler::new(&structure, entries.iter().copied()),
        deps: DepTracker::new(opts),
        on_step: &mut on_step,
        on_dep: &mut on_dep,
    };
    source.replay_into(&mut pass)?;
    let deps = pass.deps;
    let tree = pass.scheduler.finish();
    Ok((Analysis { structure, tree }, deps))
}
