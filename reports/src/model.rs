//! The parts of a region in report.json, typed: its loops, statements, dependences,
//! suggestions and metrics. polyprof builds them, the text and HTML reports render them, and
//! the tests read report.json back through them, so a renamed or retyped field is a compile
//! error (or a failed read), not a silent default. Kinds are enums spelled as report.json
//! spells them (`snake_case`); docs/REPORT.md lists them.

use crate::Loc;
use serde::{Deserialize, Serialize};

/// A loop of a region.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LoopEntry {
    /// `L6`: suggestions name loops by it.
    pub id: String,
    pub location: Option<Loc>,
    /// Nesting depth in the region (0: outermost).
    pub depth: usize,
    /// No dependence of any kind is carried by it, once scalars are privatized.
    pub parallel: bool,
    /// Parallel only as a reduction.
    pub reduction: bool,
    /// It and the loops around it form a permutable band.
    pub permutable: bool,
    /// Share of the accesses inside it with stride 0 or 1 along it.
    pub stride01_percent: f64,
    /// Why no suggestion names it.
    pub why_not: Option<String>,
    /// Kinds of dependence it surely carries (`flow`, `anti`, `output`), before any storage
    /// change (anti and output dependences through registers left out: each thread has its
    /// own registers).
    #[serde(default)]
    pub carries: Vec<String>,
    /// Answered from the dependences' distances alone (isl stopped before it answered this
    /// loop): cautious, what they do not decide counts as carried.
    #[serde(default)]
    pub by_distances: bool,
    /// The source changes, besides OpenMP clauses, its parallel or reduction flag needs:
    /// `copy` (read an array from a copy made before the loop), `substitution` (compute an
    /// induction variable from the counters), `expansion`, `mapping`. Empty: the pragma alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parallel_after: Vec<String>,
    /// For a loop the program itself runs in parallel (an OpenMP worksharing loop): whether
    /// the dependences observed allow it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub openmp: Option<OmpCheck>,
}

/// What the observed dependences say of a loop the program already runs in parallel.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum OmpVerdict {
    /// No dependence is carried between its iterations through storage its threads share.
    Parallel,
    /// Its iterations reuse shared storage for values of their own: a `private` (or
    /// `firstprivate`, `lastprivate`) clause is missing.
    PrivateNeeded,
    /// Its iterations accumulate into shared storage: a `reduction` clause is missing.
    ReductionNeeded,
    /// A dependence is carried between its iterations that no clause removes: threads race.
    Race,
}

impl OmpVerdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            OmpVerdict::Parallel => "parallel",
            OmpVerdict::PrivateNeeded => "private_needed",
            OmpVerdict::ReductionNeeded => "reduction_needed",
            OmpVerdict::Race => "race",
        }
    }

    /// A few words for a table.
    pub fn brief(&self) -> &'static str {
        match self {
            OmpVerdict::Parallel => "parallel as written",
            OmpVerdict::PrivateNeeded => "private clause missing",
            OmpVerdict::ReductionNeeded => "reduction clause missing",
            OmpVerdict::Race => "RACE",
        }
    }
}

/// A program's own parallel loop checked against the dependences observed.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OmpCheck {
    /// The directive as the source writes it (`#pragma omp parallel for private(j)`), when
    /// the source could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directive: Option<String>,
    /// The parallel body the compiler outlined (`main._omp_fn.0`).
    pub body: String,
    pub verdict: OmpVerdict,
    /// The verdict in a sentence, with the storage and lines concerned.
    pub text: String,
    /// The clauses the directive lacks (`reduction(+: s)`, `private(t)`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// A statement: one instruction of the binary, with its iteration domain.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Statement {
    /// `S3`.
    pub id: String,
    /// The instruction's link-time address, in hexadecimal.
    pub address: String,
    pub location: Option<Loc>,
    /// In isl's notation: `{ S3[i0, i1] : 0 <= i0 <= 15 and 0 <= i1 <= i0 }`.
    pub domain: String,
    /// Times it ran.
    pub ops: u64,
    /// False when the domain over-approximates what ran.
    pub exact: bool,
}

/// Flow (read after write), anti (write after read) or output (write after write).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum DepKind {
    Flow,
    Anti,
    Output,
}

/// Whether a dependence goes through a register or through memory.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Through {
    Register,
    Memory,
}

/// A dependence between two statements' instances.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Dependence {
    pub source: String,
    pub sink: String,
    pub kind: DepKind,
    pub through: Through,
    /// The storage in source names (`` `A` (heap block allocated at 2mm.c:119) ``).
    pub storage: String,
    /// In isl's notation, sink to source: `{ S3[i0, i1] -> S3[i0, i1 - 1] : ... }`.
    pub relation: String,
    pub exact: bool,
}

/// What a suggestion transforms.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "snake_case")]
pub enum SuggestionKind {
    Interchange,
    Skew,
    Tile,
    Parallelize,
    Vectorize,
    Fuse,
    Distribute,
    ExpandScalar,
    MapScalarToArray,
    ContractArray,
    TransposeArray,
    AosToSoa,
    PadArray,
    /// Data tiling: an array stored tile by tile, with the tiling of a band.
    TileArray,
    ShareStorage,
}

impl SuggestionKind {
    /// Its name in report.json.
    pub fn as_str(self) -> &'static str {
        match self {
            SuggestionKind::Interchange => "interchange",
            SuggestionKind::Skew => "skew",
            SuggestionKind::Tile => "tile",
            SuggestionKind::Parallelize => "parallelize",
            SuggestionKind::Vectorize => "vectorize",
            SuggestionKind::Fuse => "fuse",
            SuggestionKind::Distribute => "distribute",
            SuggestionKind::ExpandScalar => "expand_scalar",
            SuggestionKind::MapScalarToArray => "map_scalar_to_array",
            SuggestionKind::ContractArray => "contract_array",
            SuggestionKind::TransposeArray => "transpose_array",
            SuggestionKind::AosToSoa => "aos_to_soa",
            SuggestionKind::PadArray => "pad_array",
            SuggestionKind::TileArray => "tile_array",
            SuggestionKind::ShareStorage => "share_storage",
        }
    }
}

impl std::fmt::Display for SuggestionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The model an estimated gain comes from.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum GainModel {
    /// Cache lines per iteration of the innermost loop, before and after.
    CacheLines,
    /// Amdahl's law over the region's share in the parallel loop, with thread start-up.
    Amdahl,
    /// Amdahl's law over the innermost loop, with the lanes of a vector register.
    Simd,
}

impl GainModel {
    /// Its name in report.json.
    pub fn as_str(self) -> &'static str {
        match self {
            GainModel::CacheLines => "cache_lines",
            GainModel::Amdahl => "amdahl",
            GainModel::Simd => "simd",
        }
    }
}

/// A suggestion's estimated gain.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Gain {
    pub model: GainModel,
    /// The region's time before over its time after (2.0: twice as fast).
    pub estimate: f64,
    /// The same for the whole run, by Amdahl's law over the region's share of the run.
    pub run_estimate: f64,
    /// The model's inputs and result, in words.
    pub basis: String,
}

/// The region's advice composed into one transformation: the loop order, tiling, parallel
/// loops and vectorized loop of its best-ranked suggestions, checked together as one schedule
/// against the region's dependences (a part the check refutes is left out).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Recommendation {
    /// What to do, in one sentence naming source lines.
    pub text: String,
    /// The ranks of the suggestions it composes, best first.
    pub ranks: Vec<usize>,
    /// The new order of the loops it reorders, outermost first (empty: as written).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order: Vec<String>,
    /// The tiled band, outermost first, and each loop's tile size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile: Option<Tiling>,
    /// The loops run in parallel (one per nest), with the directive to put before each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parallel: Vec<Directive>,
    /// The vectorized loop, with its directive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simd: Option<Directive>,
    /// The kind of the transformation heading it when that is isl's schedule (`skew`,
    /// `fuse`, `distribute`): its loops are isl's, shown in `code_after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<SuggestionKind>,
    /// Source changes it needs besides its directives' clauses, as phrases.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<String>,
    /// Parts of the ranked advice left out, and why (the check refuted them together).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
    /// The region's time before over its time after, the parts' estimates composed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<f64>,
    /// The same for the whole run, by Amdahl's law over the region's share of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_estimate: Option<f64>,
}

/// A tiled band.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Tiling {
    pub loops: Vec<String>,
    pub sizes: Vec<u32>,
}

/// A loop and the directive to put before it (`#pragma omp parallel for private(k)`; in
/// Fortran `!$omp parallel do`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Directive {
    #[serde(rename = "loop")]
    pub loop_id: String,
    pub directive: String,
}

/// Why legal advice does not pay here.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// A loop runs fewer iterations than a tile holds (or than a few vectors).
    FewIterations,
    /// Each run of the loop does too little work to pay for starting threads.
    LittleWork,
    /// The model expects less than the minimum gain.
    NoGain,
    /// The compiler already vectorized the loop.
    AlreadyVectorized,
    /// Only one thread would run it.
    OneThread,
    /// A storage change or skew that only skipped advice needs.
    OnlyForSkipped,
}

impl SkipReason {
    /// Its name in report.json.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::FewIterations => "few_iterations",
            SkipReason::LittleWork => "little_work",
            SkipReason::NoGain => "no_gain",
            SkipReason::AlreadyVectorized => "already_vectorized",
            SkipReason::OneThread => "one_thread",
            SkipReason::OnlyForSkipped => "only_for_skipped",
        }
    }
}

/// Legal advice that does not pay here.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Skipped {
    pub reason: SkipReason,
    pub text: String,
}

/// A storage change a suggestion needs to be legal.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StorageChange {
    Privatize,
    #[serde(rename = "firstprivate")]
    FirstPrivate,
    #[serde(rename = "lastprivate")]
    LastPrivate,
    /// A flag set to one constant: `lastprivate(conditional: found)` (OpenMP 5.0).
    #[serde(rename = "lastprivate_conditional")]
    LastPrivateConditional,
    CopyIn,
    Expand,
    MapToArray,
    /// An induction variable the source steps, computed from the loop counters instead.
    ClosedForm,
    /// Such a variable stepped as written, with OpenMP's `linear(var: step)` clause.
    Linear,
    /// An array reached through a pointer, replaced by one the loop's body declares.
    LocalArray,
    Reduction,
}

/// A storage change, with the storage it applies to.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Requirement {
    pub change: StorageChange,
    pub storage: String,
    /// Source lines of the accesses concerned.
    pub lines: Vec<String>,
    /// For a reduction: its operator as OpenMP spells it (`+`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    /// For a reduction: combining partial results reassociates floating-point operations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reassociates: Option<bool>,
    /// For `linear`: the variable's step per iteration of the loop, as C text
    /// (`(n2 + 1) * sizeof(float)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// A reduction a parallel loop performs: `reduction(+: s)`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Reduction {
    pub op: String,
    pub storage: String,
    pub lines: Vec<String>,
    pub reassociates: bool,
    /// The OpenMP clause, as the suggestion's text gives it: `reduction(+: s)`, or with an
    /// array section for an array reached through a pointer, `reduction(+: y[0:42])`.
    #[serde(default)]
    pub clause: String,
}

/// A mapping Φ of an array's elements to new places.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Mapping {
    /// In isl's notation: `{ A[i, j] -> [(i - j) mod 63] }`.
    pub isl: String,
    /// The same as a C access: `A[((i - j) % 63 + 63) % 63]`.
    pub c: String,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// A suggested transformation, rated.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Suggestion {
    pub kind: SuggestionKind,
    /// Loop ids; for `interchange`, the new order (outermost first).
    pub loops: Vec<String>,
    /// One sentence a person can act on, naming source lines.
    pub text: String,
    /// 1 for the most beneficial advice of the region; skipped advice ranks last.
    pub rank: usize,
    /// Suggestions of one group are alternatives: do one of them.
    pub group: usize,
    /// Ranks of the suggestions this one is an alternative to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gain: Option<Gain>,
    /// The transformations this one makes legal or possible.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub enables: Vec<SuggestionKind>,
    /// The array a storage or layout suggestion is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mapping: Option<Mapping>,
    /// Set when the advice does not pay here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<Skipped>,
    /// Tile sizes (`tile`); bytes now and bytes shared (`share_storage`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<u64>,
    /// Storage changes without which it is not legal.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<Requirement>,
    /// The reductions among `requires`, on their own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reduction: Vec<Reduction>,
}

impl Suggestion {
    /// Whether it is advised now (not skipped as not paying here).
    pub fn advised(&self) -> bool {
        self.skipped.is_none()
    }

    /// Whether it names loop `id`.
    pub fn names_loop(&self, id: &str) -> bool {
        self.loops.iter().any(|l| l == id)
    }
}

/// How an advised suggestion stands to the one before it in rank order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lead {
    /// It starts a group of alternatives.
    First,
    /// It is an alternative to the suggestion before it (the same group).
    Alternative,
    /// A storage change or skew that makes these kinds of transformations legal or possible.
    For(String),
}

/// The advised suggestions in rank order, each with its [`Lead`]: the one reading of groups
/// that report.txt and report.html share.
pub fn advised_with_leads(suggestions: &[Suggestion]) -> Vec<(&Suggestion, Lead)> {
    let mut last_group = None;
    suggestions
        .iter()
        .filter(|s| s.advised())
        .map(|s| {
            let lead = if !s.enables.is_empty() {
                let kinds: Vec<&str> = s.enables.iter().map(|k| k.as_str()).collect();
                Lead::For(kinds.join(", "))
            } else if last_group == Some(s.group) {
                Lead::Alternative
            } else {
                last_group = Some(s.group);
                Lead::First
            };
            (s, lead)
        })
        .collect()
}

/// The metrics of the POLY-PROF paper's Tables 3 and 5.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Metrics {
    pub parallel_ops_percent: f64,
    pub simd_ops_percent: f64,
    pub reuse_percent: f64,
    pub preuse_percent: f64,
    pub tile_depth: usize,
    pub tile_ops_percent: f64,
    pub components_before: usize,
    pub components_after: usize,
    pub skew: bool,
    pub mem_ops_percent: f64,
    pub fp_ops_percent: f64,
    pub loop_depth: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name<T: Serialize>(v: T) -> String {
        serde_json::to_value(v)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// `as_str` (what the text reports and the analysis print) and report.json agree.
    #[test]
    fn names_in_text_and_json_agree() {
        use SuggestionKind as K;
        for k in [
            K::Interchange,
            K::Skew,
            K::Tile,
            K::Parallelize,
            K::Vectorize,
            K::Fuse,
            K::Distribute,
            K::ExpandScalar,
            K::MapScalarToArray,
            K::ContractArray,
            K::TransposeArray,
            K::AosToSoa,
            K::PadArray,
            K::TileArray,
            K::ShareStorage,
        ] {
            assert_eq!(name(k), k.as_str());
        }
        for m in [GainModel::CacheLines, GainModel::Amdahl, GainModel::Simd] {
            assert_eq!(name(m), m.as_str());
        }
        use SkipReason as R;
        for r in [
            R::FewIterations,
            R::LittleWork,
            R::NoGain,
            R::AlreadyVectorized,
            R::OneThread,
            R::OnlyForSkipped,
        ] {
            assert_eq!(name(r), r.as_str());
        }
    }
}
