//! Ranked advice: each suggestion's estimated gain under a named model, alternatives grouped,
//! and advice that would not pay at this size kept with the reason instead of dropped
//! silently.
//!
//! The legality checks decide what is suggested; this module only estimates, orders, groups
//! and marks. It never adds a suggestion, so ranking cannot surface one that legality
//! withheld.
//!
//! Models (each estimate is a speedup of the region: its time before over its time after):
//! - **Cache lines** (`interchange`, `tile`, `transpose_array`, `aos_to_soa`): the region's own
//!   accesses in its hottest nest, with their strides per loop from the folded access
//!   functions. An iteration of the innermost loop costs its instructions plus
//!   [`GainOptions::line_cost`] per cache line it brings from beyond the cache. A stream of
//!   accesses with stride `s` bytes along the innermost loop brings `min(1, |s| / 64)` new
//!   lines per iteration; one invariant in the innermost loop costs its line once per run of
//!   that loop. A stream the loop just outside reuses whole (the same addresses in each of
//!   its iterations) keeps its lines when one run of the innermost loop fits in
//!   [`GainOptions::cache_bytes`]; reuse carried further out is assumed lost: its distance
//!   grows with the data, so the estimate is for inputs whose data outgrows the cache (the
//!   basis says when this input's data fits). A tile keeps that reuse when every loop inside it is tiled or
//!   of fixed size and its footprint fits in [`GainOptions::cache_bytes`]: its lines are then
//!   brought once per tile.
//! - **Amdahl** (`parallelize`): the share of the region's instructions inside the loop runs
//!   on [`GainOptions::threads`] threads; each run of the loop pays
//!   [`GainOptions::fork_join_cost`] to start and join them.
//! - **SIMD** (`vectorize`): the same over the innermost loop, with as many lanes as a
//!   [`GainOptions::vector_bytes`] register holds of its widest element.
//!
//! Storage changes a transformation needs (`expand_scalar`, `map_scalar_to_array`),
//! skewing that makes a band tilable and data tiling that goes with a tiling (`tile_array`)
//! have no gain of their own: they rank right after the transformation they serve. `fuse`, `distribute`, `pad_array` and `contract_array` have no
//! model: they rank after the estimated advice, in the order found.

use crate::input::{Access, Region, Statement};
use crate::legality::Change;
use crate::{Feedback, LoopInfo, Suggestion, SuggestionKind};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Options of the gain models, with documented defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct GainOptions {
    /// Bytes per cache line. Default: 64 (x86-64).
    pub line_bytes: u64,
    /// The cache a tile's data must fit in to keep its reuse, in bytes. Default: 32 KiB, a
    /// level-1 data cache.
    pub cache_bytes: u64,
    /// Cycles to bring one cache line from beyond the cache. Default: 8. Hardware
    /// prefetching hides much of the latency of a regular stride, and lines a long stride
    /// walks often come from the level-2 cache: `gain_bench` compares the estimates with
    /// measurements (README, "Benchmarks").
    pub line_cost: f64,
    /// Instructions of loop control per iteration of the innermost loop (pointer increments,
    /// compare and branch: scalar evolutions and control, which are not statements).
    /// Default: 3.
    pub loop_overhead: f64,
    /// Instructions per cycle a core sustains on a loop body whose data is in the cache.
    /// Default: 3.
    pub ipc: f64,
    /// Cycles an iteration waits for the previous one's result when the innermost loop
    /// carries a dependence (an accumulator: a floating-point add's latency). Default: 4.
    pub chain_latency: f64,
    /// Threads a parallel loop runs on; `None`: this machine's cores, as OpenMP starts by
    /// default. Default: `None`.
    pub threads: Option<usize>,
    /// Starting and joining the threads of one run of a parallel loop, in instructions'
    /// time (an OpenMP `parallel for` costs a few microseconds). Default: 4,000.
    pub fork_join_cost: f64,
    /// Bytes of a vector register. Default: 16 (SSE2, which every x86-64 compiler may use
    /// without options).
    pub vector_bytes: u32,
    /// Least estimated speedup worth advising; advice below it is kept, marked skipped.
    /// Default: 1.1.
    pub min_gain: f64,
    /// Loops of at most this many iterations are taken to keep their size on larger inputs
    /// (colour channels, unrolled remainders); longer loops grow with the data. Default: 4.
    pub fixed_trips: u64,
}

impl Default for GainOptions {
    fn default() -> Self {
        GainOptions {
            line_bytes: 64,
            cache_bytes: 32 * 1024,
            line_cost: 8.0,
            loop_overhead: 3.0,
            ipc: 3.0,
            chain_latency: 4.0,
            threads: None,
            fork_join_cost: 4_000.0,
            vector_bytes: 16,
            min_gain: 1.1,
            fixed_trips: 4,
        }
    }
}

impl GainOptions {
    /// The threads of the parallel model, and where the number comes from.
    pub fn threads(&self) -> (usize, &'static str) {
        match self.threads {
            Some(n) => (n.max(1), "threads"),
            None => (
                std::thread::available_parallelism().map_or(1, |n| n.get()),
                "threads, this machine's cores",
            ),
        }
    }
}

/// The model an estimate comes from (report.json's names, shared with `reports`).
pub use reports::model::GainModel;

/// An estimated gain.
#[derive(Clone, Debug, PartialEq)]
pub struct Gain {
    pub model: GainModel,
    /// The region's time before over its time after (2.0: twice as fast).
    pub estimate: f64,
    /// The model's inputs and result, numbers included, in words.
    pub basis: String,
}

/// Why legal advice does not pay here (report.json's names, shared with `reports`).
pub use reports::model::SkipReason;

/// Legal advice that does not pay here, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Skip {
    pub reason: SkipReason,
    /// One sentence with the numbers.
    pub text: String,
}

/// A suggestion's place among the region's advice.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rating {
    /// Its estimated gain (`None`: no model for this kind, or an enabler).
    pub gain: Option<Gain>,
    /// 1 for the most beneficial advice of the region; skipped advice ranks last.
    pub rank: usize,
    /// Suggestions of one group are alternatives: do one of them. A storage change or skew
    /// shares the group of the transformation it enables. 1 is the best group.
    pub group: usize,
    /// The transformations this one makes legal (storage changes) or possible (skew).
    pub enables: Vec<SuggestionKind>,
    /// Set when the advice does not pay here.
    pub skipped: Option<Skip>,
}

/// Estimates, groups and ranks the suggestions of `fb`, reordering them best first.
/// `region` is the region as given to the feedback stage (one statement per instruction).
/// Instructions per run of a loop, in units of the cost of starting and joining threads,
/// past which threads on it pay for themselves: a parallelization that gains little then
/// does because the loop is a small part of the region, not for want of work per run.
const LOOP_WORTH_THREADS: f64 = 10.0;

pub fn rate(region: &Region, fb: &mut Feedback, opts: &GainOptions) {
    if fb.suggestions.is_empty() {
        return;
    }
    let model = Model::new(region, &fb.loops, opts);
    let interchange = fb
        .suggestions
        .iter()
        .find(|s| s.kind == SuggestionKind::Interchange)
        .cloned();
    for s in &mut fb.suggestions {
        let (gain, skip) = model.estimate(s, interchange.as_ref());
        s.rating.gain = gain;
        s.rating.skipped = skip;
    }
    rank(&mut fb.suggestions, &model, interchange.as_ref());
}

/// The work of one run of a loop for a sentence: `w` instructions over `runs` runs. Runs are
/// counted from the loops around it at their largest trip counts, which overcounts them
/// around a triangular loop: a share under one instruction is said as the total instead.
fn work_per_run(w: f64, runs: f64) -> String {
    let per = (w / runs.max(1.0)).round();
    match per {
        p if p >= 2.0 => format!("{p:.0} instructions of work"),
        p if p >= 1.0 => "1 instruction of work".to_string(),
        _ => format!("little work ({w:.0} instructions over up to {runs:.0} runs)"),
    }
}

/// Stores of at most this many bytes apart are taken to share cache lines.
fn same_line(a: Option<i64>, b: Option<i64>, line: u64) -> bool {
    matches!((a, b), (Some(a), Some(b)) if a.abs_diff(b) < line)
}

/// One side of a cache-lines comparison: per iteration of the innermost loop, the
/// instructions of its statements, the lines it brings (in all and per array), and whether it
/// waits for the previous iteration.
struct Side<'p> {
    instructions: f64,
    lines: f64,
    per: &'p BTreeMap<String, f64>,
    chained: bool,
}

/// A stream of accesses of the hottest nest: one access of one statement.
#[derive(Clone, Debug)]
struct Stream {
    array: Option<String>,
    /// Stride in bytes along each loop of the chain (`None`: not affine along it).
    strides: Vec<Option<i64>>,
    size: u32,
    base: Option<i64>,
    /// Executions per iteration of the innermost loop.
    weight: f64,
}

/// The region's hottest nest and what the models need of it.
struct Model<'a> {
    region: &'a Region,
    loops: &'a [LoopInfo],
    opts: &'a GainOptions,
    /// Region loops of the hottest nest, outermost first.
    chain: Vec<usize>,
    /// Iterations of the innermost loop in all (the most any of its statements ran).
    iterations: u64,
    /// Dynamic instructions of the region's statements.
    total: u64,
}

impl<'a> Model<'a> {
    fn new(region: &'a Region, loops: &'a [LoopInfo], opts: &'a GainOptions) -> Model<'a> {
        // The nest holding the most executions (as the feedback's hottest statement).
        let mut by_loops: BTreeMap<&[usize], u64> = BTreeMap::new();
        for s in &region.statements {
            *by_loops.entry(&s.loops).or_default() += s.ops;
        }
        let chain = by_loops
            .iter()
            .max_by_key(|(l, ops)| (**ops, l.len()))
            .map(|(l, _)| l.to_vec())
            .unwrap_or_default();
        let iterations = region
            .statements
            .iter()
            .filter(|s| s.loops == chain)
            .map(|s| s.ops)
            .max()
            .unwrap_or(0);
        Model {
            region,
            loops,
            opts,
            chain,
            iterations,
            total: region.statements.iter().map(|s| s.ops).sum(),
        }
    }

    fn loop_index(&self, id: &str) -> Option<usize> {
        self.region.loops.iter().position(|l| l.id == id)
    }

    fn label(&self, l: usize) -> String {
        self.region
            .loops
            .get(l)
            .map_or_else(|| format!("L{l}"), |lp| lp.label.clone())
    }

    /// Loop `l` and the loops around it, outermost first.
    fn around(&self, l: usize) -> Vec<usize> {
        self.region
            .statements
            .iter()
            .find_map(|s| {
                let d = s.loops.iter().position(|&x| x == l)?;
                Some(s.loops[..=d].to_vec())
            })
            .unwrap_or_else(|| vec![l])
    }

    fn trips(&self, l: usize) -> Option<u64> {
        self.region.trips.get(l).copied().flatten()
    }

    /// A loop that keeps its size on larger inputs.
    fn fixed(&self, l: usize) -> bool {
        self.trips(l).is_some_and(|t| t <= self.opts.fixed_trips)
    }

    /// Instructions run inside loop `l`: its answers' count, else its statements' (a loop
    /// without answers was said to do 0 instructions of work).
    fn ops_in(&self, l: usize) -> u64 {
        let id = &self.region.loops[l].id;
        match self.loops.iter().find(|i| &i.id == id).map(|i| i.ops) {
            Some(ops) if ops > 0 => ops,
            _ => self
                .region
                .statements
                .iter()
                .filter(|s| s.loops.contains(&l))
                .map(|s| s.ops)
                .sum(),
        }
    }

    /// The streams of statement `s`, with strides along the chain (zero along chain loops it
    /// is not in).
    fn streams_of(&self, s: &Statement, weight: f64) -> Vec<Stream> {
        s.accesses
            .iter()
            .map(|a: &Access| Stream {
                array: a.array.clone(),
                strides: self
                    .chain
                    .iter()
                    .map(|l| match s.loops.iter().position(|x| x == l) {
                        Some(d) => a.strides.get(d).copied().flatten(),
                        None => Some(0),
                    })
                    .collect(),
                size: a.size,
                base: a.base,
                weight,
            })
            .collect()
    }

    /// Statements of the innermost loop's body.
    fn body(&self) -> impl Iterator<Item = &'a Statement> + '_ {
        self.region
            .statements
            .iter()
            .filter(move |s| s.loops == self.chain)
    }

    /// The body's streams and its statements' instructions per iteration.
    fn body_streams(&self) -> (Vec<Stream>, f64) {
        let n = self.iterations.max(1) as f64;
        let mut streams = Vec::new();
        let mut instructions = 0.0;
        for s in self.body() {
            let w = s.ops as f64 / n;
            instructions += w;
            streams.extend(self.streams_of(s, w));
        }
        (streams, instructions)
    }

    /// Streams over the same array with the same strides whose addresses share lines are
    /// one stream (a load and a store of `C[i][j]`).
    fn dedup(&self, streams: Vec<Stream>) -> Vec<Stream> {
        let mut out: Vec<Stream> = Vec::new();
        for s in streams {
            let twin = out.iter_mut().find(|o| {
                s.array.is_some()
                    && o.array == s.array
                    && o.strides == s.strides
                    && same_line(o.base, s.base, self.opts.line_bytes)
            });
            match twin {
                Some(o) => o.weight = o.weight.max(s.weight),
                None => out.push(s),
            }
        }
        out
    }

    /// New lines a stream brings per iteration of the innermost loop of `order` (chain
    /// positions, outermost first), reuse carried by outer loops being lost.
    fn stream_lines(&self, s: &Stream, order: &[usize], run_fits: bool) -> f64 {
        let line = self.opts.line_bytes as f64;
        // Data the next loop out reuses whole (a row of `C` in `C[i][j] += A[i][k] *
        // B[k][j]`, the same for every `k`) stays in the cache when one run of the innermost
        // loop fits in it: its lines are brought once.
        let reused = order.len() >= 2
            && run_fits
            && s.strides.get(order[order.len() - 2]).copied().flatten() == Some(0);
        // Invariant in the innermost loops: one line per run of them.
        let mut runs = 1.0;
        for &k in order.iter().rev() {
            match s.strides.get(k).copied().flatten() {
                None => return s.weight / runs,
                Some(0) => {
                    let l = self.chain[k];
                    match self.trips(l) {
                        Some(t) if self.fixed(l) => runs *= t.max(1) as f64,
                        // It grows with the data: the line is brought once per a long run.
                        _ => return 0.0,
                    }
                }
                Some(_) if reused && runs == 1.0 => return 0.0,
                Some(st) => return s.weight * (st.unsigned_abs() as f64 / line).min(1.0) / runs,
            }
        }
        0.0
    }

    /// Lines per iteration of the innermost loop, in all and per array.
    fn lines(&self, streams: &[Stream], order: &[usize]) -> (f64, BTreeMap<String, f64>) {
        let mut per: BTreeMap<String, f64> = BTreeMap::new();
        let mut all = 0.0;
        let run_fits = self.run_bytes(streams, order) <= self.opts.cache_bytes;
        for s in streams {
            let l = self.stream_lines(s, order, run_fits);
            all += l;
            *per.entry(s.array.clone().unwrap_or_else(|| "unnamed memory".into()))
                .or_default() += l;
        }
        (all, per)
    }

    /// Bytes one run of the innermost loop of `order` touches, at this input's trip count.
    fn run_bytes(&self, streams: &[Stream], order: &[usize]) -> u64 {
        let Some(&k) = order.last() else {
            return 0;
        };
        let n = self.trips(self.chain[k]).unwrap_or(1).max(1);
        let lines: f64 = streams.iter().map(|s| self.tile_lines(s, &[(k, n)])).sum();
        (lines * self.opts.line_bytes as f64) as u64
    }

    /// Cycles per iteration of the innermost loop: its instructions at [`GainOptions::ipc`],
    /// or the latency of a dependence it carries, whichever is longer, plus its lines.
    fn time(&self, side: &Side<'_>) -> f64 {
        let issue = (side.instructions + self.opts.loop_overhead) / self.opts.ipc.max(1e-9);
        let wait = if side.chained {
            self.opts.chain_latency
        } else {
            0.0
        };
        issue.max(wait) + self.opts.line_cost * side.lines
    }

    /// Whether the loop at chain position `k` carries a dependence as written: each of its
    /// iterations then waits for the previous one.
    fn chained(&self, k: usize) -> bool {
        let id = &self.region.loops[self.chain[k]].id;
        self.loops
            .iter()
            .find(|i| &i.id == id)
            .is_some_and(|i| !i.parallel)
    }

    /// One side of a comparison.
    fn side<'p>(
        &self,
        instructions: f64,
        (lines, per): (f64, &'p BTreeMap<String, f64>),
        inner: usize,
    ) -> Side<'p> {
        Side {
            instructions,
            lines,
            per,
            chained: self.chained(inner),
        }
    }

    /// Bytes the region's accesses span at this input, per array summed.
    fn footprint(&self) -> u64 {
        let mut spans: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
        for s in &self.region.statements {
            for a in &s.accesses {
                let (Some(name), Some(base)) = (a.array.as_deref(), a.base) else {
                    continue;
                };
                let mut lo = base;
                let mut hi = base + i64::from(a.size);
                for (d, st) in a.strides.iter().enumerate() {
                    let t = s
                        .loops
                        .get(d)
                        .and_then(|&l| self.trips(l))
                        .unwrap_or(1)
                        .saturating_sub(1) as i64;
                    let reach = st.unwrap_or(0).saturating_mul(t);
                    if reach < 0 {
                        lo += reach;
                    } else {
                        hi += reach;
                    }
                }
                let e = spans.entry(name).or_insert((lo, hi));
                e.0 = e.0.min(lo);
                e.1 = e.1.max(hi);
            }
        }
        spans.values().map(|(lo, hi)| hi.abs_diff(*lo)).sum()
    }

    /// "at this input the region's data (6 KiB) fits in the 32 KiB cache: ..." or nothing.
    fn fits_note(&self) -> String {
        let bytes = self.footprint();
        if bytes > 0 && bytes <= self.opts.cache_bytes {
            format!(
                "; at this input the region's data ({}) fits in the {} cache, so the gain shows on larger inputs",
                kib(bytes),
                kib(self.opts.cache_bytes)
            )
        } else {
            String::new()
        }
    }

    fn positions(&self, ids: &[String]) -> Option<Vec<usize>> {
        ids.iter()
            .map(|id| {
                let l = self.loop_index(id)?;
                self.chain.iter().position(|&c| c == l)
            })
            .collect()
    }

    fn estimate(
        &self,
        s: &Suggestion,
        interchange: Option<&Suggestion>,
    ) -> (Option<Gain>, Option<Skip>) {
        if self.chain.is_empty() || self.iterations == 0 {
            return (None, None);
        }
        match s.kind {
            SuggestionKind::Interchange => self.interchange(s),
            SuggestionKind::Tile => self.tile(s),
            SuggestionKind::TransposeArray | SuggestionKind::AosToSoa => self.layout(s),
            SuggestionKind::Parallelize => self.parallel(s, interchange),
            SuggestionKind::Vectorize => self.vector(s),
            _ => (None, None),
        }
    }

    /// A cache-lines gain, or a skip when it is below the least worth advising.
    fn cache_gain(
        &self,
        before: Side<'_>,
        after: Side<'_>,
        what: &str,
    ) -> (Option<Gain>, Option<Skip>) {
        let (t0, t1) = (self.time(&before), self.time(&after));
        let estimate = t0 / t1.max(1e-9);
        let waits = |chained: bool| {
            if chained {
                format!(
                    ", waiting {:.0} cycles for the previous iteration",
                    self.opts.chain_latency
                )
            } else {
                String::new()
            }
        };
        let basis = format!(
            "cache lines from beyond the cache per iteration of the innermost loop: {:.2} now ({}), {:.2} {what} ({}); {:.0} instructions per iteration now{}, {:.0} {what}{}; at {:.0} instructions per cycle and {:.0} cycles per line: {:.1} cycles per iteration against {:.1}, {estimate:.2}x{}",
            before.lines,
            per_array(before.per),
            after.lines,
            per_array(after.per),
            before.instructions + self.opts.loop_overhead,
            waits(before.chained),
            after.instructions + self.opts.loop_overhead,
            waits(after.chained),
            self.opts.ipc,
            self.opts.line_cost,
            t0,
            t1,
            self.fits_note()
        );
        let gain = Gain {
            model: GainModel::CacheLines,
            estimate,
            basis,
        };
        let skip = (estimate < self.opts.min_gain).then(|| Skip {
            reason: SkipReason::NoGain,
            text: format!(
                "the cache model expects {estimate:.2}x, under the {:.2}x worth advising: {:.2} lines per iteration now, {:.2} {what}",
                self.opts.min_gain, before.lines, after.lines
            ),
        });
        (Some(gain), skip)
    }

    fn interchange(&self, s: &Suggestion) -> (Option<Gain>, Option<Skip>) {
        let Some(order) = self.positions(&s.loops) else {
            return (None, None);
        };
        if order.len() != self.chain.len() {
            return (None, None);
        }
        let identity: Vec<usize> = (0..self.chain.len()).collect();
        let (body, instructions) = self.body_streams();
        let before = self.dedup(body.clone());
        let (l0, p0) = self.lines(&before, &identity);
        // A value the nest kept in a register across the old innermost loop lives in memory
        // once that loop moves out (mapped onto an array element or expanded): the code
        // around the inner loop that loaded and stored it runs in every iteration.
        let mut after = body;
        let mut extra = 0.0;
        let moves_storage = s
            .requires
            .iter()
            .any(|r| matches!(r.change, Change::MapToArray | Change::Expand));
        if let (true, Some(&inner)) = (moves_storage, order.last()) {
            let moved = self.chain[inner];
            let n = self.iterations.max(1) as f64;
            for t in self.region.statements.iter().filter(|t| {
                t.loops.len() < self.chain.len()
                    && self.chain.starts_with(&t.loops)
                    && t.loops.contains(&moved)
            }) {
                // Its executions spread over the iterations of the loops it was outside of.
                let w = (t.ops as f64 / n) * self.outside_runs(t);
                extra += w;
                after.extend(self.streams_of(t, w));
            }
        }
        let after = self.dedup(after);
        let (l1, p1) = self.lines(&after, &order);
        let inner = self.chain.len() - 1;
        self.cache_gain(
            self.side(instructions, (l0, &p0), inner),
            self.side(instructions + extra, (l1, &p1), inner_of(&order)),
            "after",
        )
    }

    /// Iterations of the chain's loops a statement outside them skips: the factor by which
    /// it would run more often inside them.
    fn outside_runs(&self, t: &Statement) -> f64 {
        self.chain
            .iter()
            .filter(|l| !t.loops.contains(l))
            .map(|&l| self.trips(l).unwrap_or(1).max(1) as f64)
            .product()
    }

    fn tile(&self, s: &Suggestion) -> (Option<Gain>, Option<Skip>) {
        let size = u64::from(s.sizes.first().copied().unwrap_or(32).max(1));
        let Some(band) = self.positions(&s.loops) else {
            return (None, None);
        };
        // Too few iterations: the tile would hold the whole loop.
        for &k in &band {
            let l = self.chain[k];
            if let Some(t) = self.trips(l).filter(|&t| t < size) {
                return (
                    None,
                    Some(Skip {
                        reason: SkipReason::FewIterations,
                        text: format!(
                            "loop {} runs {t} iterations at this input, fewer than a tile of {size}: tiling would not change the order (profile a larger input for tiling advice)",
                            self.label(l)
                        ),
                    }),
                );
            }
        }
        let identity: Vec<usize> = (0..self.chain.len()).collect();
        let (body, instructions) = self.body_streams();
        let streams = self.dedup(body);
        let (l0, p0) = self.lines(&streams, &identity);
        let first = band.iter().copied().min().unwrap_or(0);
        // Extents of the loops inside a tile: the tile size along the band, the loop's own
        // size along a fixed loop; a loop that grows with the data leaves the tile unbounded.
        let mut extents: Vec<(usize, u64)> = Vec::new();
        for k in first..self.chain.len() {
            let l = self.chain[k];
            if band.contains(&k) {
                extents.push((k, size));
            } else if self.fixed(l) {
                extents.push((k, self.trips(l).unwrap_or(1).max(1)));
            } else {
                let why = format!(
                    "loop {} inside the tiles is not tiled and grows with the data, so a tile's data does too",
                    self.label(l)
                );
                return self.no_tile_gain(instructions, l0, &p0, &why);
            }
        }
        let points: f64 = extents.iter().map(|e| e.1 as f64).product();
        let mut per: BTreeMap<String, f64> = BTreeMap::new();
        let mut tile_lines = 0.0;
        for st in &streams {
            let l = self.tile_lines(st, &extents);
            tile_lines += l;
            *per.entry(st.array.clone().unwrap_or_else(|| "unnamed memory".into()))
                .or_default() += st.weight * l / points;
        }
        let bytes = (tile_lines * self.opts.line_bytes as f64) as u64;
        if bytes > self.opts.cache_bytes {
            let why = format!(
                "a tile's data ({}) exceeds the {} cache",
                kib(bytes),
                kib(self.opts.cache_bytes)
            );
            return self.no_tile_gain(instructions, l0, &p0, &why);
        }
        let l1: f64 = per.values().sum();
        let inner = self.chain.len() - 1;
        self.cache_gain(
            self.side(instructions, (l0, &p0), inner),
            self.side(instructions, (l1, &per), inner),
            &format!("with tiles of {size} ({} each)", kib(bytes)),
        )
    }

    /// Distinct lines one stream touches in a tile of these extents (chain position,
    /// iterations).
    fn tile_lines(&self, s: &Stream, extents: &[(usize, u64)]) -> f64 {
        let line = self.opts.line_bytes;
        let mut lines = 1.0;
        for &(k, n) in extents {
            lines *= match s.strides.get(k).copied().flatten() {
                Some(0) => 1.0,
                Some(st) if st.unsigned_abs() < line => {
                    ((n * st.unsigned_abs()).div_ceil(line)).max(1) as f64
                }
                _ => n as f64,
            };
        }
        let points: f64 = extents.iter().map(|e| e.1 as f64).product();
        lines.min(points)
    }

    fn no_tile_gain(
        &self,
        instructions: f64,
        lines: f64,
        per: &BTreeMap<String, f64>,
        why: &str,
    ) -> (Option<Gain>, Option<Skip>) {
        let gain = Gain {
            model: GainModel::CacheLines,
            estimate: 1.0,
            basis: format!(
                "cache lines from beyond the cache per iteration of the innermost loop: {lines:.2} ({}), the same with tiles: {why}",
                per_array(per)
            ),
        };
        let _ = instructions;
        (
            Some(gain),
            Some(Skip {
                reason: SkipReason::NoGain,
                text: format!("the cache model expects no gain: {why}"),
            }),
        )
    }

    /// Transposition and structure of arrays: the array's accesses in the body change
    /// strides; the loop order stays.
    fn layout(&self, s: &Suggestion) -> (Option<Gain>, Option<Skip>) {
        let Some(array) = s.array.as_deref() else {
            return (None, None);
        };
        let inner = self.chain.len() - 1;
        let identity: Vec<usize> = (0..self.chain.len()).collect();
        let (body, instructions) = self.body_streams();
        let before = self.dedup(body.clone());
        let (l0, p0) = self.lines(&before, &identity);
        let low = body
            .iter()
            .filter(|t| t.array.as_deref() == Some(array))
            .filter_map(|t| t.base)
            .min()
            .unwrap_or(0);
        let mut after = body;
        for t in after
            .iter_mut()
            .filter(|t| t.array.as_deref() == Some(array))
        {
            let size = i64::from(t.size);
            match s.kind {
                SuggestionKind::TransposeArray => {
                    // The dimension it walks contiguously trades places with the innermost.
                    if let Some(unit) = t
                        .strides
                        .iter()
                        .position(|x| x.is_some_and(|x| x.abs() == size))
                    {
                        t.strides.swap(unit, inner);
                    }
                }
                _ => {
                    // Each field becomes an array of its own, walked contiguously.
                    let record = t.strides[inner].unwrap_or(0).abs().max(1);
                    let field = t.base.map_or(0, |b| (b - low).rem_euclid(record));
                    t.strides[inner] = Some(size * t.strides[inner].unwrap_or(0).signum());
                    t.array = Some(format!("{array}.{field}"));
                }
            }
        }
        let after = self.dedup(after);
        let (l1, p1) = self.lines(&after, &identity);
        self.cache_gain(
            self.side(instructions, (l0, &p0), inner),
            self.side(instructions, (l1, &p1), inner),
            "after",
        )
    }

    fn parallel(
        &self,
        s: &Suggestion,
        interchange: Option<&Suggestion>,
    ) -> (Option<Gain>, Option<Skip>) {
        let Some(l) = s.loops.first().and_then(|id| self.loop_index(id)) else {
            return (None, None);
        };
        let (threads, whose) = self.opts.threads();
        let p = threads.min(self.trips(l).unwrap_or(u64::MAX).min(usize::MAX as u64) as usize);
        let w = self.ops_in(l) as f64;
        let t = self.total.max(1) as f64;
        // Runs of the loop: iterations of the loops around it, in the order it runs in (the
        // interchange's, when it moves this loop; else the program's own loops around it,
        // which for a loop off the hottest nest are not that nest's).
        let order: Vec<usize> = interchange
            .and_then(|i| i.loops.iter().map(|id| self.loop_index(id)).collect())
            .filter(|o: &Vec<usize>| o.contains(&l))
            .unwrap_or_else(|| self.around(l));
        let runs: f64 = order
            .iter()
            .take_while(|&&o| o != l)
            .map(|&o| self.trips(o).unwrap_or(1).max(1) as f64)
            .product();
        let after = (t - w) + w / p.max(1) as f64 + runs * self.opts.fork_join_cost;
        let estimate = t / after;
        let basis = format!(
            "Amdahl: {:.0}% of the region's instructions run in loop {}, split over {p} {whose}, plus {:.0} instructions to start and join them for each of its {runs:.0} run{}: {t:.0} instructions against {after:.0}, {estimate:.2}x",
            100.0 * w / t,
            self.label(l),
            self.opts.fork_join_cost,
            if runs == 1.0 { "" } else { "s" },
        );
        let skip = if p <= 1 {
            Some(Skip {
                reason: SkipReason::OneThread,
                text: format!("only one thread would run loop {}", self.label(l)),
            })
        } else if estimate < self.opts.min_gain
            && w / runs >= LOOP_WORTH_THREADS * self.opts.fork_join_cost
        {
            // Each run pays for its threads; the loop is too small a part of the region.
            Some(Skip {
                reason: SkipReason::NoGain,
                text: format!(
                    "loop {} runs {:.0}% of the region's instructions: {p} threads on it speed the region up {estimate:.2}x",
                    self.label(l),
                    100.0 * w / t
                ),
            })
        } else if estimate < self.opts.min_gain {
            Some(Skip {
                reason: SkipReason::LittleWork,
                text: format!(
                    "each run of loop {} does {}, against about {:.0} to start and join {p} threads: {estimate:.2}x",
                    self.label(l),
                    work_per_run(w, runs),
                    self.opts.fork_join_cost
                ),
            })
        } else {
            None
        };
        (
            Some(Gain {
                model: GainModel::Amdahl,
                estimate,
                basis,
            }),
            skip,
        )
    }

    fn vector(&self, s: &Suggestion) -> (Option<Gain>, Option<Skip>) {
        let Some(l) = s.loops.first().and_then(|id| self.loop_index(id)) else {
            return (None, None);
        };
        let inside: Vec<&Statement> = self
            .region
            .statements
            .iter()
            .filter(|st| st.loops.contains(&l))
            .collect();
        let widest = inside
            .iter()
            .flat_map(|st| st.accesses.iter().map(|a| a.size))
            .max()
            .unwrap_or(8)
            .max(1);
        let vb = self.opts.vector_bytes;
        if widest >= vb {
            return (
                None,
                Some(Skip {
                    reason: SkipReason::AlreadyVectorized,
                    text: format!(
                        "the compiler already vectorized loop {}: its accesses are {widest} bytes wide",
                        self.label(l)
                    ),
                }),
            );
        }
        let lanes = u64::from(vb / widest);
        if let Some(t) = self.trips(l).filter(|&t| t < 2 * lanes) {
            return (
                None,
                Some(Skip {
                    reason: SkipReason::FewIterations,
                    text: format!(
                        "loop {} runs {t} iterations at this input, fewer than two vectors of {lanes}",
                        self.label(l)
                    ),
                }),
            );
        }
        let w = self.ops_in(l) as f64;
        let t = self.total.max(1) as f64;
        let after = (t - w) + w / lanes as f64;
        let estimate = t / after;
        let gain = Gain {
            model: GainModel::Simd,
            estimate,
            basis: format!(
                "{:.0}% of the region's instructions run in loop {}, {lanes} lanes of {widest}-byte elements in a {vb}-byte vector register: {estimate:.2}x",
                100.0 * w / t,
                self.label(l),
            ),
        };
        let skip = (estimate < self.opts.min_gain).then(|| Skip {
            reason: SkipReason::NoGain,
            text: format!("the SIMD model expects {estimate:.2}x"),
        });
        (Some(gain), skip)
    }

    /// Whether the interchange `i` makes `array`'s accesses in the body stride 0 or 1 along
    /// its new innermost loop: transposing that array is then an alternative to it.
    fn fixes_array(&self, i: &Suggestion, array: &str) -> bool {
        let Some(&inner) = self.positions(&i.loops).as_ref().and_then(|o| o.last()) else {
            return false;
        };
        let (body, _) = self.body_streams();
        let mine: Vec<&Stream> = body
            .iter()
            .filter(|s| s.array.as_deref() == Some(array))
            .collect();
        !mine.is_empty()
            && mine.iter().all(|s| {
                s.strides
                    .get(inner)
                    .copied()
                    .flatten()
                    .is_some_and(|x| x == 0 || x.unsigned_abs() == u64::from(s.size))
            })
    }
}

/// The innermost position of an order.
fn inner_of(order: &[usize]) -> usize {
    order.last().copied().unwrap_or(0)
}

fn kib(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else if bytes < 1024 * 1024 {
        format!("{:.0} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    }
}

/// "B 1.00, A 0.12": lines per array, most first, none left out but zeros.
fn per_array(per: &BTreeMap<String, f64>) -> String {
    let mut v: Vec<(&String, &f64)> = per.iter().filter(|(_, &l)| l >= 0.005).collect();
    v.sort_by(|a, b| b.1.total_cmp(a.1));
    if v.is_empty() {
        return "none".to_string();
    }
    let mut out = String::new();
    for (k, (name, l)) in v.into_iter().enumerate() {
        if k > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{name} {l:.2}");
    }
    out
}

/// An enabler: advice whose worth is that of the transformation it serves.
fn enabler(s: &Suggestion) -> bool {
    !s.rating.enables.is_empty()
}

/// Orders the suggestions: groups of alternatives by their best estimate, estimated before
/// unestimated, skipped last; each enabler right after the best transformation it serves.
fn rank(suggestions: &mut Vec<Suggestion>, model: &Model<'_>, interchange: Option<&Suggestion>) {
    let n = suggestions.len();
    let score = |s: &Suggestion| s.rating.gain.as_ref().map(|g| g.estimate);
    // Group of each suggestion (an index of its group's first member).
    let mut group: Vec<usize> = (0..n).collect();
    if let Some(i) = interchange {
        let ic = suggestions
            .iter()
            .position(|s| s.kind == i.kind && s.loops == i.loops);
        if let Some(ic) = ic {
            for (k, s) in suggestions.iter().enumerate() {
                // A layout change for the same accesses: transposing the array, or padding
                // its rows against the cache-set conflicts of the walk the interchange ends.
                if matches!(
                    s.kind,
                    SuggestionKind::TransposeArray | SuggestionKind::PadArray
                ) && s.array.as_deref().is_some_and(|a| model.fixes_array(i, a))
                {
                    group[k] = group[ic];
                }
            }
        }
    }
    // Enablers: served by the best non-skipped suggestion of a kind they enable.
    let mut serves: Vec<Option<usize>> = vec![None; n];
    for k in 0..n {
        if !enabler(&suggestions[k]) {
            continue;
        }
        let beneficiaries: Vec<usize> = (0..n)
            .filter(|&j| j != k && suggestions[k].rating.enables.contains(&suggestions[j].kind))
            .collect();
        let best = beneficiaries
            .iter()
            .copied()
            .filter(|&j| suggestions[j].rating.skipped.is_none())
            .max_by(|&a, &b| {
                score(&suggestions[a])
                    .unwrap_or(0.0)
                    .total_cmp(&score(&suggestions[b]).unwrap_or(0.0))
            });
        match best {
            Some(j) => {
                serves[k] = Some(j);
                group[k] = group[j];
            }
            None if !beneficiaries.is_empty() => {
                let kinds: Vec<&str> = beneficiaries
                    .iter()
                    .map(|&j| suggestions[j].kind.as_str())
                    .collect();
                let (needs, pay) = if kinds.len() == 1 {
                    ("needs", "it does")
                } else {
                    ("need", "they do")
                };
                suggestions[k].rating.skipped = Some(Skip {
                    reason: SkipReason::OnlyForSkipped,
                    text: format!(
                        "only the {} {needs} it, and {pay} not pay here",
                        kinds.join(" and the ")
                    ),
                });
            }
            None => {}
        }
    }
    // Order of the members that stand on their own: (skipped, no estimate, -estimate,
    // index), groups by their best member.
    let key = |k: usize| {
        let s = &suggestions[k];
        (
            s.rating.skipped.is_some(),
            score(s).is_none(),
            -score(s).unwrap_or(0.0),
            k,
        )
    };
    let mut heads: Vec<usize> = (0..n).filter(|&k| serves[k].is_none()).collect();
    heads.sort_by(|&a, &b| {
        let (ka, kb) = (key(a), key(b));
        (ka.0, ka.1)
            .cmp(&(kb.0, kb.1))
            .then(ka.2.total_cmp(&kb.2))
            .then(ka.3.cmp(&kb.3))
    });
    let mut groups: Vec<usize> = Vec::new();
    for &h in &heads {
        if !groups.contains(&group[h]) {
            groups.push(group[h]);
        }
    }
    let mut order: Vec<usize> = Vec::with_capacity(n);
    for &g in &groups {
        for &h in heads.iter().filter(|&&h| group[h] == g) {
            order.push(h);
            // What it needs, right after it.
            order.extend((0..n).filter(|&k| serves[k] == Some(h)));
        }
    }
    // Enablers of enablers, or served by something not placed: keep them, at the end.
    for k in 0..n {
        if !order.contains(&k) {
            order.push(k);
        }
    }
    let group_no = |k: usize| {
        groups
            .iter()
            .position(|&g| g == group[k])
            .map_or(0, |p| p + 1)
    };
    let numbers: Vec<usize> = order.iter().map(|&k| group_no(k)).collect();
    let mut slots: Vec<Option<Suggestion>> =
        std::mem::take(suggestions).into_iter().map(Some).collect();
    let mut next_group = groups.len();
    for (pos, (&k, &g)) in order.iter().zip(&numbers).enumerate() {
        let Some(mut s) = slots[k].take() else {
            continue;
        };
        s.rating.rank = pos + 1;
        s.rating.group = if g == 0 {
            next_group += 1;
            next_group
        } else {
            g
        };
        suggestions.push(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{Loop, Statement};
    use crate::legality::Requirement;

    #[test]
    fn work_per_run_is_never_zero() {
        assert_eq!(
            work_per_run(4096.0 * 20.0, 20.0),
            "4096 instructions of work"
        );
        assert_eq!(work_per_run(25.0, 20.0), "1 instruction of work");
        assert!(work_per_run(30.0, 81920.0).starts_with("little work (30 instructions"));
    }

    fn access(strides: &[i64], array: &str, write: bool) -> Access {
        Access {
            strides: strides.iter().map(|&s| Some(s)).collect(),
            size: 8,
            write,
            base: Some(0),
            array: Some(array.into()),
        }
    }

    /// `C[i][j] += A[i][k] * B[k][j]` over 64^3, k innermost, the accumulator in a register.
    fn matmul() -> (Region, Vec<LoopInfo>) {
        let row = 8 * 64;
        let region = Region {
            loops: ["k.c:1", "k.c:2", "k.c:3"]
                .iter()
                .enumerate()
                .map(|(k, l)| Loop {
                    id: format!("L{k}"),
                    label: l.to_string(),
                })
                .collect(),
            statements: vec![
                Statement {
                    name: "S0".into(),
                    label: "k.c:4".into(),
                    loops: vec![0, 1, 2],
                    positions: vec![0, 0, 0, 0],
                    domain: crate::Polyhedra::empty_set("S0", 3),
                    ops: 64 * 64 * 64,
                    accesses: vec![
                        access(&[row, 0, 8], "A", false),
                        access(&[0, 8, row], "B", false),
                    ],
                    fp: true,
                    exact: true,
                    update: None,
                },
                Statement {
                    name: "S1".into(),
                    label: "k.c:2".into(),
                    loops: vec![0, 1],
                    positions: vec![0, 0, 1],
                    domain: crate::Polyhedra::empty_set("S1", 2),
                    ops: 64 * 64,
                    accesses: vec![access(&[row, 8], "C", true)],
                    fp: false,
                    exact: true,
                    update: None,
                },
            ],
            trips: vec![Some(64); 3],
            ..Region::default()
        };
        let loops = (0..3)
            .map(|k| LoopInfo {
                id: format!("L{k}"),
                label: format!("k.c:{}", k + 1),
                depth: k,
                parallel: k < 2,
                reduction: k == 2,
                permutable: true,
                stride01_percent: 50.0,
                ops: 64 * 64 * 64,
                why_not: None,
                carries: Vec::new(),
                by_distances: false,
                parallel_after: Vec::new(),
                openmp: None,
            })
            .collect();
        (region, loops)
    }

    fn suggestion(kind: SuggestionKind, loops: &[&str]) -> Suggestion {
        Suggestion::new(
            kind,
            loops.iter().map(|l| l.to_string()).collect(),
            kind.as_str().into(),
        )
    }

    #[test]
    fn ranking_orders_groups_and_never_adds() {
        let (region, loops) = matmul();
        let mut map = suggestion(SuggestionKind::MapScalarToArray, &["L1"]);
        map.rating.enables = vec![SuggestionKind::Interchange];
        let mut ic = suggestion(SuggestionKind::Interchange, &["L0", "L2", "L1"]);
        ic.requires = vec![Requirement {
            change: Change::MapToArray,
            storage: "register xmm1 onto C".into(),
            lines: vec![],
            step: None,
        }];
        let mut tr = suggestion(SuggestionKind::TransposeArray, &["L2"]);
        tr.array = Some("B".into());
        let mut fb = Feedback {
            loops,
            suggestions: vec![
                suggestion(SuggestionKind::Fuse, &["L0"]),
                map,
                tr,
                ic,
                suggestion(SuggestionKind::Tile, &["L0", "L1"]),
            ],
            ..Feedback::default()
        };
        let before: Vec<SuggestionKind> = fb.suggestions.iter().map(|s| s.kind).collect();
        rate(&region, &mut fb, &GainOptions::default());
        let mut after: Vec<SuggestionKind> = fb.suggestions.iter().map(|s| s.kind).collect();
        let order = after.clone();
        let mut sorted = before.clone();
        sorted.sort();
        after.sort();
        assert_eq!(sorted, after, "ranking adds or drops nothing");
        // The interchange, then what it needs, then its alternative; unestimated last.
        let ic = order
            .iter()
            .position(|&k| k == SuggestionKind::Interchange)
            .unwrap();
        assert_eq!(order[ic + 1], SuggestionKind::MapScalarToArray, "{order:?}");
        let s = |k: SuggestionKind| fb.suggestions.iter().find(|s| s.kind == k).unwrap();
        assert_eq!(
            s(SuggestionKind::TransposeArray).rating.group,
            s(SuggestionKind::Interchange).rating.group,
            "transposing B is an alternative to the interchange"
        );
        assert_eq!(
            s(SuggestionKind::MapScalarToArray).rating.group,
            s(SuggestionKind::Interchange).rating.group
        );
        // Unestimated advice after the estimated, skipped advice last.
        assert_eq!(
            order[3..],
            [SuggestionKind::Fuse, SuggestionKind::Tile],
            "{order:?}"
        );
        // The tile of the two outer loops leaves k untiled: the model expects nothing.
        let tile = s(SuggestionKind::Tile);
        assert_eq!(
            tile.rating.skipped.as_ref().map(|k| k.reason),
            Some(SkipReason::NoGain)
        );
        let ic = s(SuggestionKind::Interchange);
        assert_eq!(ic.rating.rank, 1);
        assert!(ic.rating.gain.as_ref().is_some_and(|g| g.estimate > 1.5));
    }

    #[test]
    fn a_stride_brings_lines_in_proportion() {
        let (region, loops) = matmul();
        let opts = GainOptions::default();
        let m = Model::new(&region, &loops, &opts);
        let (body, _) = m.body_streams();
        let (lines, per) = m.lines(&m.dedup(body), &[0, 1, 2]);
        // B: a new line per iteration of k; A's row is the same for every j (reused).
        assert!((lines - 1.0).abs() < 1e-9, "{lines} {per:?}");
        assert!((per["B"] - 1.0).abs() < 1e-9);
    }
}
