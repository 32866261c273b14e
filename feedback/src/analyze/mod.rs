//! The feedback of one region: loop properties, suggestions checked against the observed
//! dependences, metrics and annotated ASTs.
//!
//! This module runs the stages of the analysis in order (`analyze_in`) on the region's
//! hottest nest (`Nest`), and adds the metrics and the storage advice; each question has a
//! module of its own: `schedule` (what isl's scheduler makes of the region), `loops` (each
//! loop as written), `interchange`, `parallel`, `tiling` (skewing and tiling), `fusion`
//! (fusion and distribution), `text` (how the answers are said, and why nothing more) and
//! `code` (the loop trees before and after).

use crate::input::{Region, Statement};
use crate::islx;
use crate::legality::{pct, Ctx};
use crate::params::Parameterizer;
use crate::{Error, Feedback, Metrics, Options, Suggestion, SuggestionKind};
use isl_rs::Context;
use std::collections::BTreeSet;

mod code;
mod direct;
mod fusion;
mod interchange;
mod loops;
mod openmp;
mod parallel;
mod parts;
pub(crate) mod rayon;
mod schedule;
mod text;
mod tiling;

use code::{ast_advised, ast_after, ast_before};
use fusion::fusion;
pub(crate) use interchange::layout;
use interchange::{interchange, Interchanged};
use loops::{
    answer_every_loop, loop_verdicts, require_closed_forms, withhold_on_merged_loops,
    withhold_on_split_loops,
};
use parallel::parallel_advice;
use schedule::{has_skew, schedule_region};
use text::{add_why_not, explain};
use tiling::{skew_and_tile, Tiling};

/// Stage times, printed when `POLYPROF_TIMING` is set (for tuning).
struct Timing {
    on: bool,
    last: std::time::Instant,
}

impl Timing {
    fn new() -> Timing {
        Timing {
            on: std::env::var_os("POLYPROF_TIMING").is_some(),
            last: std::time::Instant::now(),
        }
    }

    fn mark(&mut self, what: &str) {
        if self.on {
            eprintln!(
                "polyprof: feedback {what}: {:.3} s",
                self.last.elapsed().as_secs_f64()
            );
            self.last = std::time::Instant::now();
        }
    }
}

/// Seconds of isl time the storage advice and the code generation each get at least, once
/// the region's analysis used up its budget: the "small constant" past `--isl-max-seconds`.
const LAST_STEPS: f64 = 0.5;

/// Statements (after blocks are formed) past which a region is scheduled by parts when the
/// whole does not fit in a third of its time: lud's main region has 141, PolyBench's hard
/// small nests (nussinov, with 20) need all the time there is.
const LARGE_REGION: usize = 60;

/// Statements (before blocks are formed) past which the whole region gets half of its isl
/// time, the other half going to its parts when it does not fit: myocyte's region has 35,051
/// (786 blocks), lud's 1,004.
const HUGE_REGION: usize = 200;

/// Analyses one region. Its answers degrade, they never vanish: what the isl analysis
/// answered before it stopped (at its budget, or on an error) stays, and every loop it left
/// without an answer gets the answers its dependences' distances give ([`direct`]).
///
/// `opts.isl_max_seconds` bounds the region's isl time as a whole: the storage advice and
/// the code before and after get what the analysis left of it (at least [`LAST_STEPS`]
/// seconds each, so that a region the analysis used up still gets its trees).
pub fn analyze_region(region: &Region, opts: &Options) -> Result<Feedback, Error> {
    let started = std::time::Instant::now();
    let left = |share: f64| -> Options {
        let rest = opts.isl_max_seconds - started.elapsed().as_secs_f64();
        Options {
            isl_max_seconds: (opts.isl_max_seconds * share).min(rest).max(LAST_STEPS),
            ..opts.clone()
        }
    };
    // A very large region gets half of the time: the other half goes to its parts when the
    // whole does not fit.
    let whole = if region.statements.len() > HUGE_REGION {
        Options {
            isl_max_seconds: opts.isl_max_seconds / 2.0,
            ..opts.clone()
        }
    } else {
        opts.clone()
    };
    let mut fb = Feedback::default();
    // The coarsened region, kept for the code after the advice: coarsening again cost
    // floyd-warshall's regions 0.5 s each.
    let mut coarse: Option<Region> = None;
    let mut unscheduled = false;
    let analysed = islx::limited(&whole, |isl| {
        analyze_in(
            region,
            &whole,
            isl,
            started,
            &mut fb,
            (&mut coarse, &mut unscheduled),
        )
    });
    // The whole region's isl memory is free: the parts need theirs (myocyte's peak).
    (opts.release_memory)();
    let mut analysed_part = None;
    let stopped = match analysed {
        Ok(()) => {
            // The other half of a very large region's time goes to its parts when isl's
            // scheduler stopped on the whole and no part was scheduled within its half
            // (myocyte: once its whole region was read in 1 s rather than 4, the scheduler
            // took the rest of that half, and no part was left any time).
            if unscheduled && region.statements.len() > HUGE_REGION && !opts.cancelled() {
                analysed_part = parts::analyze_parts(region, &left(1.0), |sub, o, isl, fb| {
                    let started = std::time::Instant::now();
                    analyze_in(sub, o, isl, started, fb, (&mut None, &mut false))
                });
                if let Some(p) = &analysed_part {
                    add_why_not(
                        &mut fb,
                        format!(
                            "the nest of loop {} was analysed on its own (for each iteration of the loops around it)",
                            region.loops[p.root].label
                        ),
                    );
                }
            }
            None
        }
        Err(e) => {
            let why = if opts.cancelled() {
                "the polyhedral analysis was interrupted".to_string()
            } else {
                format!("the polyhedral analysis stopped: {e}")
            };
            analysed_part = if opts.cancelled() {
                None
            } else {
                parts::analyze_parts(region, &left(1.0), |sub, o, isl, fb| {
                    let started = std::time::Instant::now();
                    analyze_in(sub, o, isl, started, fb, (&mut None, &mut false))
                })
            };
            match &analysed_part {
                Some(p) => add_why_not(
                    &mut fb,
                    format!(
                        "isl stopped on the whole region ({}); the nest of loop {} was analysed on its own (for each iteration of the loops around it), the other loops from their dependences alone",
                        whole_stop(&e),
                        region.loops[p.root].label
                    ),
                ),
                None => add_why_not(
                    &mut fb,
                    format!("{why}; each loop is answered from its dependences alone"),
                ),
            }
            Some(why)
        }
    };
    let mut timing = Timing::new();
    timing.mark("region");
    if let Some(p) = &analysed_part {
        take_part(&mut fb, &p.feedback);
    }
    answer_missing_loops(region, opts, stopped.as_deref(), &mut fb);
    timing.mark("direct answers");
    if let Some(p) = &analysed_part {
        part_metrics(region, p, &mut fb.metrics);
    }
    if opts.cancelled() {
        return Ok(fb);
    }
    // The storage advice and the code are the part's when only a part was analysed: the
    // whole is what isl could not take.
    let analysed_region = analysed_part.as_ref().map_or(region, |p| &p.region);
    // A quarter of the region's isl time at most: this advice must not double a large
    // region's analysis.
    storage_maps(analysed_region, &left(0.25), &mut fb);
    timing.mark("storage");
    // The models read the region's instructions one by one (before they were grouped into
    // blocks): each statement's executions are then its iterations.
    crate::gain::rate(region, &mut fb, &opts.gain);
    timing.mark("gain");
    // The code before and after, from the ranked advice; without it the loop trees remain.
    // The whole region's coarsening when it was analysed to the end (a budget stop in it
    // may have kept pairs a fresh budget removes).
    let coarse = coarse.filter(|_| analysed_part.is_none() && stopped.is_none());
    let code = islx::limited(&left(1.0), |isl| match &coarse {
        Some(coarse) => crate::codegen::region_code(coarse, &fb, isl),
        None => {
            let coarse = crate::coarsen::coarsen(analysed_region, isl);
            crate::codegen::region_code(&coarse, &fb, isl)
        }
    });
    timing.mark("code");
    match code {
        Ok((before, after, recommended)) => {
            fb.code_before = before;
            fb.code_after = after;
            fb.recommended = recommended;
        }
        Err(e) => {
            if std::env::var_os("POLYPROF_DEBUG_SCHEDULE").is_some() {
                eprintln!("polyprof: no code for the region: {e}");
            }
            fb.recommended = crate::composed::unchecked(&fb, analysed_region);
        }
    }
    Ok(fb)
}

/// Why isl stopped on a whole region whose parts were then analysed: the whole is not the
/// region's last word, so its budget is named as the budget of the whole.
fn whole_stop(e: &Error) -> String {
    match e {
        Error::TooComplex => {
            "at its budget, which --isl-max-operations and --isl-max-seconds raise".into()
        }
        e => e.to_string(),
    }
}

/// [`whole_stop`] of the scheduler's failure, kept as text.
fn whole_stop_text(e: &str) -> String {
    match e == Error::TooComplex.to_string() {
        true => whole_stop(&Error::TooComplex),
        false => e.to_string(),
    }
}

/// The answers of a part analysed on its own go to the region's: its suggestions (those the
/// whole did not give before it stopped), its loops' answers (where the whole gave none), its
/// reasons, its schedule and trees.
fn take_part(fb: &mut Feedback, part: &Feedback) {
    for s in &part.suggestions {
        if !fb
            .suggestions
            .iter()
            .any(|o| o.kind == s.kind && o.loops == s.loops)
        {
            fb.suggestions.push(s.clone());
        }
    }
    for l in &part.loops {
        if !fb.loops.iter().any(|o| o.id == l.id) {
            fb.loops.push(l.clone());
        }
    }
    if let Some(why) = &part.why_not {
        add_why_not(fb, why.clone());
    }
    fb.ast_before = part.ast_before.clone();
    fb.ast_after = part.ast_after.clone();
    fb.schedule = part.schedule.clone();
    fb.strategy = part.strategy;
    fb.schedule_seconds = part.schedule_seconds;
    fb.isl_schedule = part.isl_schedule.clone();
}

/// The region's metrics when only a part was analysed: those of its loops' answers
/// (`metrics`, from [`answer_missing_loops`]), with the part's tiling and skew, whose
/// operations are a share of the region's.
fn part_metrics(region: &Region, part: &parts::AnalysedPart, metrics: &mut Metrics) {
    let ops = |r: &Region| r.statements.iter().map(|s| s.ops).sum::<u64>();
    let share = ops(&part.region) as f64 / ops(region).max(1) as f64;
    let m = &part.feedback.metrics;
    if m.tile_depth > metrics.tile_depth {
        metrics.tile_depth = m.tile_depth;
        metrics.tile_ops_percent = m.tile_ops_percent * share;
    }
    metrics.skew |= m.skew;
    metrics.preuse_percent = metrics.preuse_percent.max(m.preuse_percent);
}

/// Storage hyperplanes and shared buffers (SMO) on the region's instructions, under the
/// original order and the suggested interchange. A hyperplane replaces the successive
/// modulo contraction of the same array when it needs fewer bytes. Within its own isl
/// budget: when that runs out, the region keeps its other advice.
fn storage_maps(region: &Region, opts: &Options, fb: &mut Feedback) {
    let order: Option<Vec<String>> = fb
        .suggestions
        .iter()
        .find(|s| s.kind == SuggestionKind::Interchange)
        .map(|s| s.loops.clone());
    let perm = |s: &Statement| -> Vec<usize> {
        let mut dims: Vec<usize> = (0..s.loops.len()).collect();
        if let Some(order) = &order {
            dims.sort_by_key(|&d| {
                order
                    .iter()
                    .position(|id| *id == region.loops[s.loops[d]].id)
                    .unwrap_or(d)
            });
        }
        dims
    };
    let under = crate::smo::Under {
        suggested: order.as_ref().map(|_| {
            (
                &perm as &dyn Fn(&Statement) -> Vec<usize>,
                "the interchange",
            )
        }),
    };
    let mut budget = opts.clone();
    budget.isl_max_operations = opts.isl_max_operations / 2;
    let started = std::time::Instant::now();
    let found = islx::limited(&budget, |isl| crate::smo::storage(isl, region, &under));
    fb.storage_seconds = Some(started.elapsed().as_secs_f64());
    let found = match found {
        Ok(found) => found,
        Err(e) => {
            if std::env::var_os("POLYPROF_DEBUG_SCHEDULE").is_some() {
                eprintln!("polyprof: no storage hyperplanes for the region: {e}");
            }
            return;
        }
    };
    let key = |a: &Option<String>| {
        a.as_deref()
            .map(|n| n.split(" (+").next().unwrap_or(n).to_string())
    };
    for s in found {
        let old = fb.suggestions.iter().position(|o| {
            o.kind == SuggestionKind::ContractArray
                && s.kind == SuggestionKind::ContractArray
                && key(&o.array) == key(&s.array)
        });
        match old {
            Some(i) if fb.suggestions[i].sizes.get(1) <= s.sizes.get(1) => {}
            Some(i) => fb.suggestions[i] = s,
            None => fb.suggestions.push(s),
        }
    }
}

/// The stages of one region's analysis, each on the previous ones' results: the scheduler,
/// each loop's verdict, then the advice on the hottest nest (interchange, parallelism,
/// skewing and tiling, fusion, layout), why nothing more, the metrics and the trees.
/// What it answered stays in `fb` when it stops; the coarsened region stays in `coarse`, and
/// `unscheduled` says whether isl's scheduler stopped on the whole with no part scheduled.
fn analyze_in(
    region: &Region,
    opts: &Options,
    isl: &Context,
    started: std::time::Instant,
    fb: &mut Feedback,
    (coarse, unscheduled): (&mut Option<Region>, &mut bool),
) -> Result<(), Error> {
    let mut timing = Timing::new();
    let fine = region;
    let coarse: &Region = coarse.insert(crate::coarsen::coarsen(region, isl));
    timing.mark("coarsen");
    if std::env::var_os("POLYPROF_DEBUG_SCHEDULE").is_some() {
        eprintln!(
            "polyprof: region {} statements, {} dependences; coarse {} statements, {} dependences, {} pieces",
            fine.statements.len(),
            fine.dependences.len(),
            coarse.statements.len(),
            coarse.dependences.len(),
            coarse.dependences.iter().map(|d| d.relation.pieces.len()).sum::<usize>()
        );
    }
    islx::fresh_budget(isl);
    let region = coarse;
    let total: u64 = region.statements.iter().map(|s| s.ops).sum();
    if region.statements.is_empty() || total == 0 {
        fb.why_not = Some("the region has no statements left after scalar evolutions".into());
        return Ok(());
    }
    let params = Parameterizer::new(opts.param_threshold, opts.param_spread);
    let mut cx = Ctx::new(region, isl, params)?;
    timing.mark("parse");
    // Reductions are recognised on instructions, before they were grouped into blocks.
    cx.reductions = crate::reduction::Reductions::new(fine, isl);
    cx.keep_forward()?;
    timing.mark("forward");
    // Each loop's own answers first: they need no scheduler, and a budget stop later keeps
    // them.
    islx::fresh_budget(isl);
    let original = cx.original()?;
    let own = loop_verdicts(&cx, &original, fb)?;
    let nest = Nest::of(region);
    timing.mark("loops");

    // The scheduler respects flow dependences and whatever cannot be renamed; anti and output
    // dependences through scalars are the storage advice's business.
    let binding = cx.binding();
    islx::fresh_budget(isl);
    let ic = interchange(&cx, &nest, &binding, fb)?;
    timing.mark("interchange");

    islx::fresh_budget(isl);
    let parallel = parallel_advice(&cx, &nest, &own, &ic, fb)?;
    timing.mark("parallel");

    // A large region gets a third of the time left, and the parts of its hottest nest the
    // rest when it does not fit; a small one (nussinov's nest needs 5 s) all of it.
    let left = |share: f64| -> Options {
        let rest = opts.isl_max_seconds - started.elapsed().as_secs_f64();
        Options {
            isl_max_seconds: (rest * share).max(0.0),
            ..opts.clone()
        }
    };
    islx::fresh_budget(isl);
    let whole_share = if region.statements.len() > LARGE_REGION {
        1.0 / 3.0
    } else {
        1.0
    };
    let scheduled = schedule_region(&cx, &binding, &left(whole_share), fb, true)?;
    timing.mark("schedule");
    let mut skipped: Vec<&'static str> = Vec::new();
    let part = match &scheduled.failure {
        Some(_) if !scheduled.settled => {
            parts::schedule_parts(region, &nest, &left(1.0), isl, fb, &mut skipped)?
        }
        _ => None,
    };
    let (tiling, components, skewed, schedule_note) = match (&part, &scheduled.failure) {
        (Some(p), Some(e)) => (
            p.tiling.clone(),
            p.components,
            p.skewed,
            Some(format!(
                "isl's scheduler stopped on the whole region ({}); the nest of loop {} was scheduled on its own, for each iteration of the loops around it",
                whole_stop_text(e),
                region.loops[p.root].label
            )),
        ),
        _ => {
            timing.mark("parts");
            let tiling = skew_and_tile(&cx, &nest, &scheduled, opts, fb, &mut skipped)?;
            timing.mark("skew and tile");
            let components = fusion(&cx, &nest, &scheduled, &binding, opts, fb, &mut skipped)?;
            timing.mark("fusion");
            (
                tiling,
                components,
                has_skew(&scheduled.tree),
                scheduled
                    .failure
                    .as_ref()
                    .map(|e| format!("no tiling, skewing or fusion advice: {e}")),
            )
        }
    };
    *unscheduled = scheduled.failure.is_some() && !scheduled.settled && part.is_none();
    // No schedule proposes no other structure: the components stay the program's.
    let components = match (&part, &scheduled.failure) {
        (None, Some(_)) => (components.0, components.0),
        _ => components,
    };
    timing.mark("parts");

    timing.mark("tile");
    layout_advice(&nest, skewed, fb);
    withhold_on_merged_loops(region, fb);
    explain(
        &nest,
        parallel.first_blocked.as_ref(),
        &skipped,
        schedule_note.as_deref(),
        fb,
    );
    answer_every_loop(region, &nest.chain, &own, fb);
    withhold_on_split_loops(region, fb);
    require_closed_forms(region, fb);
    for s in &mut fb.suggestions {
        s.text = text::in_language(&s.text, region.language);
    }

    timing.mark("layout");
    let parallel_loops: BTreeSet<usize> = ic
        .order
        .iter()
        .zip(&parallel.levels)
        .filter(|(_, &p)| p)
        .map(|(&l, _)| l)
        .collect();
    // Every loop of the region counts, not only the hottest nest's: the loops the table
    // answers parallel (or parallel as a reduction) as written.
    let as_written: BTreeSet<usize> = region
        .loops
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            fb.loops
                .iter()
                .any(|i| i.id == l.id && (i.parallel || i.reduction))
        })
        .map(|(k, _)| k)
        .collect();
    fb.metrics = metrics(
        &nest,
        &ic,
        (&parallel_loops, &as_written),
        &tiling,
        components,
        skewed,
    );
    fb.ast_before = ast_before(region, &fb.loops);
    fb.ast_after = if skewed && part.is_none() {
        ast_after(region, &scheduled.tree, &fb.loops)
    } else {
        ast_advised(&nest, &ic.order, fb)
    };
    Ok(())
}

/// Every loop the isl analysis did not answer (it stopped at its budget, on the whole region
/// or on that loop) gets the answers of its dependences' distances; a region the analysis
/// stopped on gets its metrics from them too.
fn answer_missing_loops(region: &Region, opts: &Options, stopped: Option<&str>, fb: &mut Feedback) {
    let missing = region
        .loops
        .iter()
        .any(|l| !fb.loops.iter().any(|i| i.id == l.id));
    if missing {
        let why = match stopped {
            Some(_) => "isl stopped on the region",
            None => "isl stopped at its budget on this loop",
        };
        for info in direct::loop_answers(region, why) {
            if !fb.loops.iter().any(|i| i.id == info.id) {
                fb.loops.push(info);
            }
        }
        fb.loops
            .sort_by_key(|i| region.loops.iter().position(|l| l.id == i.id));
    }
    if stopped.is_some() {
        fb.metrics = direct::metrics(region, &fb.loops, opts.component_share);
    }
}

/// The hottest statement's loop nest: the one the suggestions are about.
struct Nest<'a> {
    region: &'a Region,
    /// The hottest statement.
    main: &'a Statement,
    /// Its loops, outermost first.
    chain: Vec<usize>,
    /// The statements of the nest's innermost loop.
    hot: Vec<&'a Statement>,
    /// All the region's operations.
    total: u64,
}

impl<'a> Nest<'a> {
    fn of(region: &'a Region) -> Nest<'a> {
        let main = region
            .statements
            .iter()
            .max_by_key(|s| s.ops)
            .expect("statements are not empty");
        let chain = main.loops.clone();
        let hot = match chain.last() {
            Some(&inner) => region
                .statements
                .iter()
                .filter(|s| s.loops.last() == Some(&inner))
                .collect(),
            None => Vec::new(),
        };
        Nest {
            region,
            main,
            chain,
            hot,
            total: region.statements.iter().map(|s| s.ops).sum(),
        }
    }

    /// `k.c:12 (L3)`.
    fn label(&self, l: usize) -> String {
        format!(
            "{} ({})",
            self.region.loops[l].label, self.region.loops[l].id
        )
    }

    /// Locality: the share of the innermost loop's accesses that are stride 0 or 1 along
    /// loop `l`, were it made innermost.
    fn share_along(&self, l: usize) -> f64 {
        let (mut good, mut all_acc) = (0u64, 0u64);
        for s in &self.hot {
            if let Some(d) = s.loops.iter().position(|&x| x == l) {
                for a in &s.accesses {
                    all_acc += s.ops;
                    if a.stride01(d) {
                        good += s.ops;
                    }
                }
            }
        }
        pct(good, all_acc)
    }

    /// The operations of the statements `f` holds for.
    fn ops_where(&self, f: impl Fn(&Statement) -> bool) -> u64 {
        self.region
            .statements
            .iter()
            .filter(|s| f(s))
            .map(|s| s.ops)
            .sum()
    }
}

/// Layout and contraction of the arrays of the hottest nest; data tiling with the tiling of
/// an unskewed band (tiles after a skew are parallelograms of the array, not the blocks data
/// tiling stores).
fn layout_advice(nest: &Nest<'_>, skewed: bool, fb: &mut Feedback) {
    let (region, chain) = (nest.region, &nest.chain);
    fb.suggestions.extend(crate::storage::layout(region, chain));
    let tiled: Vec<Suggestion> = fb
        .suggestions
        .iter()
        .filter(|s| s.kind == SuggestionKind::Tile && !skewed)
        .flat_map(|t| crate::storage::data_tiling(region, t))
        .collect();
    fb.suggestions.extend(tiled);
    fb.suggestions
        .extend(crate::storage::contraction(region, chain));
}

/// The POLY-PROF paper's metrics of the region.
///
/// Parallel operations run in a loop that is parallel once the nest is interchanged
/// (`parallel_loops`, of the hottest nest) or as written (`as_written`, any loop of the
/// region); SIMD operations, in such an innermost loop.
fn metrics(
    nest: &Nest<'_>,
    ic: &Interchanged,
    (parallel_loops, as_written): (&BTreeSet<usize>, &BTreeSet<usize>),
    tiling: &Tiling,
    (components_before, components_after): (usize, usize),
    skewed: bool,
) -> Metrics {
    let (region, total) = (nest.region, nest.total);
    let inner_parallel = ic.order.last().is_some_and(|l| parallel_loops.contains(l));
    let simd = |s: &Statement| {
        (inner_parallel && s.loops.last() == nest.chain.last())
            || s.loops.last().is_some_and(|l| as_written.contains(l))
    };
    Metrics {
        mem_ops_percent: pct(nest.ops_where(|s| !s.accesses.is_empty()), total),
        fp_ops_percent: pct(nest.ops_where(|s| s.fp), total),
        parallel_ops_percent: pct(
            nest.ops_where(|s| {
                s.loops
                    .iter()
                    .any(|l| parallel_loops.contains(l) || as_written.contains(l))
            }),
            total,
        ),
        simd_ops_percent: pct(nest.ops_where(simd), total),
        reuse_percent: nest.chain.last().map_or(0.0, |&l| nest.share_along(l)),
        preuse_percent: ic.preuse,
        tile_depth: tiling.depth,
        tile_ops_percent: pct(nest.ops_where(|s| tiling.stmts.contains(&s.name)), total),
        components_before,
        components_after,
        skew: skewed,
        loop_depth: region.loop_depth(),
    }
}
