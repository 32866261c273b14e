//! Polyhedral feedback (sections 6-8 of the POLY-PROF paper): gives a region's statements,
//! domains and flow dependences to isl, schedules them, and turns the result into
//! suggestions (interchange, skew, tile, parallelize, vectorize, fuse, distribute), each
//! checked against the observed dependences before it is reported, with the metrics of the
//! paper's Tables 3 and 5 and annotated ASTs before and after.

mod accumulators;
pub mod affine;
mod analyze;
pub mod check;
mod coarsen;
mod codegen;
mod compared;
mod composed;
mod distance;
mod exits;
pub mod gain;
mod heap;
pub mod input;
mod islx;
pub mod legality;
mod linear;
mod mirror;
pub mod params;
pub mod pipeline;
pub mod poly;
mod reduction;
mod scopes;
mod smo;
mod storage;

pub use analyze::analyze_region;
pub use gain::{Gain, GainModel, GainOptions, Rating, Skip, SkipReason};
pub use input::{
    Access, Boundary, DepKind, Dependence, EqualPairs, Loop, Polyhedra, ReduceOp, Region,
    SharedVariable, Statement, Storage, Tuple, Update,
};
pub use islx::Strategy;
pub use reduction::Reduction;

/// Errors of the feedback stage.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// isl rejected an input or failed (the message names the operation).
    #[error("isl failed while {0}")]
    Isl(String),
    /// isl used up its operation budget ([`Options::isl_max_operations`]).
    #[error(
        "the region is too large for the polyhedral scheduler: isl stopped at its budget \
         (raise it with --isl-max-operations and --isl-max-seconds)"
    )]
    TooComplex,
    /// A transformation given to [`check`] is malformed or does not fit the region (the
    /// message is one sentence for the user).
    #[error("{0}")]
    Usage(String),
}

/// Options, with documented defaults.
#[derive(Clone, Debug)]
pub struct Options {
    /// Integer constants of at least this magnitude in domains and dependences are replaced by
    /// parameters before scheduling (§6); values within `param_spread` of each other share one.
    /// Default: 64.
    pub param_threshold: i64,
    /// Default: 20 (the paper's `s`).
    pub param_spread: i64,
    /// Tile size suggested for every tiled loop. Default: 32.
    pub tile_size: u32,
    /// Share of the region's operations above which an outermost loop is a component.
    /// Default: 5%.
    pub component_share: f64,
    /// Budget of isl operations per phase of a region's analysis (each loop's answers, the
    /// interchange, the parallel advice, the scheduler, tiling, fusion, storage), after which
    /// that phase is skipped and said to be: the loops keep their answers (from their
    /// dependences' distances where isl gave none). Default: 2,000,000 (matrix multiply
    /// takes about 150,000, in milliseconds; on the large relations of a region of
    /// `/bin/ls`, operations are so much slower that [`Self::isl_max_seconds`] stops it
    /// first).
    pub isl_max_operations: u64,
    /// Time budget of a region's isl computations as a whole, in seconds: the analysis,
    /// then its storage advice and code before and after within what is left (plus half a
    /// second each at least). Default: 10.
    pub isl_max_seconds: f64,
    /// The models that estimate each suggestion's gain and rank them (see [`gain`]).
    pub gain: GainOptions,
    /// Once this flag is set (polyprof was interrupted), the isl computation under way stops
    /// at its next operation, as at the time budget, and no further region is analysed.
    /// Default: none.
    pub cancel: Option<&'static std::sync::atomic::AtomicBool>,
    /// Called when a phase has freed much memory (after the second pass, after the folded
    /// trace is dropped, after a region's whole analysis), for allocators that keep freed
    /// memory a while to give it back then: isl allocates through the C library's `malloc`,
    /// the rest of polyprof maybe not, and neither reuses the other's. Default: nothing.
    pub release_memory: fn(),
}

impl Options {
    /// Whether [`Options::cancel`] is set.
    pub fn cancelled(&self) -> bool {
        self.cancel
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            param_threshold: 64,
            param_spread: 20,
            tile_size: 32,
            component_share: 5.0,
            isl_max_operations: 2_000_000,
            isl_max_seconds: 10.0,
            gain: GainOptions::default(),
            cancel: None,
            release_memory: || {},
        }
    }
}

/// Per-loop properties of the original program.
#[derive(Clone, Debug, PartialEq)]
pub struct LoopInfo {
    pub id: String,
    pub label: String,
    /// Nesting depth in the region (0: outermost).
    pub depth: usize,
    /// Its iterations can run in parallel: no dependence of any kind is carried by it, once
    /// scalars are privatized (see [`legality`]).
    pub parallel: bool,
    /// Its iterations can run in parallel only as a reduction: what it carries is partial
    /// results combined by one associative operator (see [`Reduction`]).
    pub reduction: bool,
    /// This loop and the loops around it form a permutable band.
    pub permutable: bool,
    /// Share of the memory accesses inside the loop (weighted by executions) with stride 0 or 1
    /// along it.
    pub stride01_percent: f64,
    /// Dynamic operations inside the loop.
    pub ops: u64,
    /// Why no suggestion names this loop (every loop gets a suggestion or a reason).
    pub why_not: Option<String>,
    /// The kinds of dependence (`flow`, `anti`, `output`) it surely carries, before any
    /// storage change, from the dependences' distances (a register reused for another value
    /// in the next iteration does not count: each thread has its own).
    pub carries: Vec<String>,
    /// Answered from the dependences' distances alone: the isl analysis stopped before it
    /// answered this loop (cautious: what the distances do not decide counts as carried).
    pub by_distances: bool,
    /// The source changes, besides OpenMP clauses, its parallel (or reduction) verdict needs:
    /// `copy`, `substitution`, `expansion`, `mapping` (empty: the pragma alone does).
    pub parallel_after: Vec<String>,
    /// For a loop the program itself runs in parallel (an OpenMP worksharing loop): what the
    /// dependences observed say of it.
    pub openmp: Option<reports::model::OmpCheck>,
}

/// What a suggestion transforms: report.json's vocabulary, shared with `reports`.
pub use reports::model::SuggestionKind;

/// A mapping Φ of an array's elements to new places (SMO's storage hyperplanes, Shirako and
/// Sarkar's layout maps).
#[derive(Clone, Debug, PartialEq)]
pub struct Mapping {
    /// In isl's notation: `{ A[i, j] -> [(i - j) mod 63] }`, `{ B[i, j] -> [j, i] }`.
    pub isl: String,
    /// The same as a C access: `A[((i - j) % 63 + 63) % 63]`, `B[j][i]`.
    pub c: String,
    /// Bytes of the array the region uses before and after (the same for a relayout that
    /// only moves elements: a transposition, a structure of arrays).
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// A suggested transformation.
#[derive(Clone, Debug, PartialEq)]
pub struct Suggestion {
    pub kind: SuggestionKind,
    /// Loop ids; for `interchange`, the new order (outermost first).
    pub loops: Vec<String>,
    /// One sentence a person can act on, naming source lines.
    pub text: String,
    /// Tile sizes (for `tile`).
    pub sizes: Vec<u32>,
    /// Storage changes without which the transformation is not legal.
    pub requires: Vec<legality::Requirement>,
    /// The array a layout or storage suggestion is about, as the accesses name it.
    pub array: Option<String>,
    /// The storage or layout mapping of `array`'s elements a storage or layout suggestion
    /// makes, when it has one.
    pub mapping: Option<Mapping>,
    /// Its estimated gain, rank and alternatives (set by [`gain::rate`]).
    pub rating: Rating,
}

impl Suggestion {
    /// A suggestion with no sizes, requirements, array or rating yet.
    pub fn new(kind: SuggestionKind, loops: Vec<String>, text: String) -> Suggestion {
        Suggestion {
            kind,
            loops,
            text,
            sizes: Vec::new(),
            requires: Vec::new(),
            array: None,
            mapping: None,
            rating: Rating::default(),
        }
    }
}

/// The metrics of the POLY-PROF paper's Tables 3 and 5: report.json's own type.
pub use reports::Metrics;

/// The feedback for one region.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Feedback {
    pub loops: Vec<LoopInfo>,
    pub suggestions: Vec<Suggestion>,
    /// Why nothing is suggested (a carried flow dependence, a non-affine access, ...).
    pub why_not: Option<String>,
    pub metrics: Metrics,
    pub ast_before: String,
    pub ast_after: String,
    /// The schedule isl computed, in isl's notation.
    pub schedule: String,
    /// How the schedule was found (`None`: no schedule).
    pub strategy: Option<Strategy>,
    /// Seconds spent in isl's scheduler, every attempt included (`None`: not run).
    pub schedule_seconds: Option<f64>,
    /// Seconds spent finding storage hyperplanes and shared buffers (`None`: not run).
    pub storage_seconds: Option<f64>,
    /// The region as written, as C-like code generated by isl from its original schedule:
    /// loops named by their source lines, statements by their names and lines (empty when
    /// the generation failed).
    pub code_before: String,
    /// The same after the advised transformations (not those skipped): the interchange's
    /// order, tile and point loops, `#pragma omp` marks, or isl's schedule where the advice
    /// follows it (skewing, fusion, distribution).
    pub code_after: String,
    /// The ranked advice composed into one transformation, checked as one schedule.
    pub recommended: Option<reports::model::Recommendation>,
    /// isl's schedule as maps, for generating the code after.
    pub(crate) isl_schedule: Option<IslSchedule>,
}

/// isl's schedule of a region as maps from statement instances to times, kept in isl's
/// notation as isl printed it (the scheduler and the code generator run on isl contexts of
/// their own).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct IslSchedule {
    /// The schedule isl computed.
    pub map: String,
    /// The same with its permutable bands tiled.
    pub tiled: String,
    /// The parameters large constants became, to fix them back to their values.
    pub params: params::Parameterizer,
}
