//! From a recorded execution to the feedback of its hottest regions: iteration vectors and
//! dependences (tracer), folding (folder), region selection, and [`analyze_region`].
//!
//! Statements are the instructions of a region that are not scalar evolutions: an instruction
//! that reads no memory and whose produced values fold into one affine function of its
//! iteration vector (loop counters, address arithmetic) leaves the statement set, and the
//! dependences out of it are dropped, since they would serialize every loop.
//!
//! The submodules, one per concern: `pipe`, the second pass's two threads and the messages
//! between them; `collect`, the streams they fold; `classify`, what an instruction does;
//! `naming`, storage named for a person; `region`, one region built from the folded trace;
//! `select`, which regions are built.
//!
//! [`analyze_region`]: crate::analyze_region

mod classify;
mod collect;
mod copies;
mod naming;
mod openmp;
mod pipe;
mod region;
mod runs;
mod select;

use crate::heap::HeapBlocks;
use crate::input::{Polyhedra, Region};
use crate::{Feedback, Options};
use collect::{finish_folding, DepKey};
use folder::{FoldOptions, Folded};
use iced_x86::{Decoder, DecoderOptions};
use pipe::second_pass;
use ptrace_runner::{Event, EventSink};
use rustc_hash::FxHashMap as HashMap;
use select::build_regions;
use symbols::Loaded;
use tracer::{DepKind, EventSource, NodeId, Through};

/// Options of the whole back end, with documented defaults.
#[derive(Clone, Debug)]
pub struct PipelineOptions {
    /// A region is a loop subtree holding at least this share of the traced instructions.
    /// Default: 5%.
    pub region_threshold: f64,
    /// At most this many regions are analysed, hottest first. Default: 8.
    pub max_regions: usize,
    pub fold: FoldOptions,
    pub feedback: Options,
    /// Send a dependence that repeats along an innermost loop to the folding thread as one
    /// run, not instance by instance (the same results, far fewer messages). Default: true;
    /// false is the reference the differential tests compare with.
    pub dep_runs: bool,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            region_threshold: 5.0,
            max_regions: 8,
            fold: FoldOptions::default(),
            feedback: Options::default(),
            dep_runs: true,
        }
    }
}

/// A statement of a region, as reported.
#[derive(Clone, Debug)]
pub struct StatementReport {
    pub name: String,
    pub pc: u64,
    pub context: NodeId,
    pub domain: Polyhedra,
    pub ops: u64,
    pub exact: bool,
}

/// A dependence of a region, as reported.
#[derive(Clone, Debug)]
pub struct DependenceReport {
    pub source: String,
    pub sink: String,
    pub kind: DepKind,
    pub through: Through,
    /// The storage, in source names where debug information has them (`` array `A` (heap
    /// block allocated at k.c:12) ``, `` `s` (register xmm0) ``).
    pub storage: String,
    /// Consumer instances → producer instances (shared with the region's input).
    pub relation: std::sync::Arc<Polyhedra>,
    pub exact: bool,
}

/// One analysed region.
#[derive(Clone, Debug)]
pub struct RegionReport {
    pub id: String,
    /// The schedule-tree node at the region's root.
    pub root: NodeId,
    /// Share of all traced instructions.
    pub ops_percent: f64,
    /// Spans several functions, or calls natively-run library code.
    pub interprocedural: bool,
    /// Share of the statements' executions in exactly folded pieces.
    pub affine_percent: f64,
    /// Schedule-tree node of each region loop (same order as `input.loops`).
    pub loop_nodes: Vec<NodeId>,
    pub statements: Vec<StatementReport>,
    pub dependences: Vec<DependenceReport>,
    pub input: Region,
    pub feedback: Feedback,
}

/// The analysis of a whole execution.
pub struct Profile {
    pub analysis: tracer::Analysis,
    pub regions: Vec<RegionReport>,
    /// Instruction streams and dependence streams folded.
    pub streams: (usize, usize),
}

/// Errors of the pipeline.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Tracer(#[from] tracer::Error),
    #[error(transparent)]
    Feedback(#[from] crate::Error),
    #[error("{0}")]
    Folding(String),
}

/// What the first pass keeps besides the structure: instruction bytes by address, and heap
/// blocks with the variables that receive them, to name statements and arrays.
#[derive(Default)]
struct Code {
    bytes: HashMap<u64, Vec<u8>>,
    heap: HeapBlocks,
}

impl EventSink for Code {
    fn event(&mut self, ev: &Event<'_>) -> std::io::Result<()> {
        if let Event::Code { addr, bytes } = *ev {
            self.bytes.insert(addr, bytes.to_vec());
        }
        self.heap.event(ev, &self.bytes);
        Ok(())
    }
}

struct Folded2 {
    insns: HashMap<(NodeId, u64), (InsnStream2, Folded)>,
    /// Instructions at either end of some dependence.
    dep_ends: rustc_hash::FxHashSet<(NodeId, u64)>,
    /// (key, folded stream, several producers per instance, first location, fixed location)
    deps: Vec<(DepKey, Folded, bool, u64, bool)>,
}

struct InsnStream2 {
    first: u64,
    naddr: usize,
    sizes: Vec<u32>,
    writes: Vec<bool>,
}

/// A debugging aid (`POLYPROF_DUMP_DEP_STREAMS=FILE`): every folded dependence stream, in
/// key order, to compare two ways of computing them (`POLYPROF_DEP_RUNS=0`) on a real program
/// without isl's time budgets in the way. Best effort: a file that cannot be written is not.
fn dump_dep_streams(folded: &Folded2, path: &std::path::Path) {
    let mut deps: Vec<_> = folded.deps.iter().collect();
    deps.sort_by_key(|d| d.0);
    let text: String = deps
        .iter()
        .map(|(k, f, multi, loc, fixed)| {
            format!("{k:?} multi={multi} loc={loc} fixed={fixed}\n  {f:?}\n")
        })
        .collect();
    let _ = std::fs::write(path, text);
}

/// The instruction at run-time address `pc`, if it ran.
fn insn_at(code: &Code, pc: u64) -> Option<iced_x86::Instruction> {
    let bytes = code.bytes.get(&pc)?;
    Some(Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE).decode())
}

/// The first pass over the events: the control structure, and the code bytes and heap blocks
/// that name statements and arrays. It can run while the program is traced (the consumer of
/// [`ptrace_runner::record::Recorder::spawn`]), so that only the second pass replays.
pub struct FirstPass {
    builder: tracer::StructureBuilder,
    code: Code,
}

impl FirstPass {
    /// A first pass over the events of executable `bin`.
    pub fn new(bin: Loaded<'_>) -> FirstPass {
        FirstPass {
            builder: tracer::StructureBuilder::new(tracer::function_entries(bin)),
            code: Code::default(),
        }
    }

    /// Each function seen so far: its entry (run-time address) and the instructions traced
    /// in its own code. Known before the second pass: the report of a trace not analysed.
    pub fn function_instructions(&self) -> Vec<(u64, u64)> {
        self.builder.function_instructions().collect()
    }
}

impl EventSink for FirstPass {
    fn event(&mut self, ev: &Event<'_>) -> std::io::Result<()> {
        self.builder.event(ev)?;
        self.code.event(ev)
    }
}

/// Runs the whole back end on a recording.
pub fn profile(
    source: &(impl EventSource + ?Sized),
    bin: Loaded<'_>,
    opts: &PipelineOptions,
) -> Result<Profile, PipelineError> {
    profile_with(source, None, bin, opts, None)
}

/// [`profile`], after `first` when the first pass ran as the program was traced (else it
/// replays `source` for it), showing `on_dep` (if any) every dynamic dependence as the
/// analysis finds it (for a dump of them, without a pass of its own).
pub fn profile_with(
    source: &(impl EventSource + ?Sized),
    first: Option<FirstPass>,
    bin: Loaded<'_>,
    opts: &PipelineOptions,
    on_dep: Option<&mut (dyn FnMut(&tracer::Dep<'_>) + Send)>,
) -> Result<Profile, PipelineError> {
    let first = match first {
        Some(first) => first,
        None => {
            let mut first = FirstPass::new(bin);
            source
                .replay_into(&mut first)
                .map_err(tracer::Error::from)?;
            first
        }
    };
    let entries = tracer::function_entries(bin);
    let FirstPass { builder, code } = first;
    let (analysis, insns, deps) = second_pass(
        source,
        builder.finish(),
        &entries,
        &opts.fold,
        &code,
        opts.dep_runs,
        on_dep,
    )?;
    let (folded, streams) = finish_folding(insns, deps);
    if let Some(path) = std::env::var_os("POLYPROF_DUMP_DEP_STREAMS") {
        dump_dep_streams(&folded, std::path::Path::new(&path));
    }
    (opts.feedback.release_memory)();
    let naming = tracer::Naming::new(bin, &analysis.structure);
    let regions = build_regions(&analysis, &naming, folded, &code, opts)?;
    Ok(Profile {
        analysis,
        regions,
        streams,
    })
}
