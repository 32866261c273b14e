//! The feedback of one region: loop properties, suggestions checked against the observed
//! dependences, metrics and annotated ASTs.

use crate::input::{DepKind, Polyhedra, Region, Statement, Storage};
use crate::islx::{self, union_map, Tree};
use crate::legality::{
    kelly_map, negative_up_to, pct, sched_len, schedule_map, Change, Ctx, Requirement, Verdict,
};
use crate::params::Parameterizer;
use crate::{Error, Feedback, LoopInfo, Metrics, Options, Rating, Suggestion, SuggestionKind};
use isl_rs::{Context, UnionMap};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

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

/// Analyses one region.
pub fn analyze_region(region: &Region, opts: &Options) -> Result<Feedback, Error> {
    let mut fb = islx::limited(opts, |isl| analyze_in(region, opts, isl))?;
    storage_maps(region, opts, &mut fb);
    // The models read the region's instructions one by one (before they were grouped into
    // blocks): each statement's executions are then its iterations.
    crate::gain::rate(region, &mut fb, &opts.gain);
    // The code before and after, from the ranked advice; without it the loop trees remain.
    let code = islx::limited(opts, |isl| {
        let coarse = crate::coarsen::coarsen(region, isl);
        crate::codegen::region_code(&coarse, &fb, isl)
    });
    match code {
        Ok((before, after)) => {
            fb.code_before = before;
            fb.code_after = after;
        }
        Err(e) if std::env::var_os("POLYPROF_DEBUG_SCHEDULE").is_some() => {
            eprintln!("polyprof: no code for the region: {e}");
        }
        Err(_) => {}
    }
    Ok(fb)
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
    // A quarter of the region's isl time at most: this advice must not double a large
    // region's analysis.
    let mut budget = opts.clone();
    budget.isl_max_seconds = opts.isl_max_seconds / 4.0;
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

/// Share of a region's operations, in percent, at data-dependent addresses from which the
/// region is reported not affine instead of scheduled.
const NOT_AFFINE_SHARE: f64 = 50.0;

/// The stages of one region's analysis, each on the previous ones' results: the scheduler,
/// each loop's verdict, then the advice on the hottest nest (interchange, parallelism,
/// skewing and tiling, fusion, layout), why nothing more, the metrics and the trees.
fn analyze_in(region: &Region, opts: &Options, isl: &Context) -> Result<Feedback, Error> {
    let mut timing = Timing::new();
    let fine = region;
    let coarse = crate::coarsen::coarsen(region, isl);
    timing.mark("coarsen");
    islx::fresh_budget(isl);
    let region = &coarse;
    let mut fb = Feedback::default();
    let total: u64 = region.statements.iter().map(|s| s.ops).sum();
    if region.statements.is_empty() || total == 0 {
        fb.why_not = Some("the region has no statements left after scalar evolutions".into());
        return Ok(fb);
    }
    let params = Parameterizer::new(opts.param_threshold, opts.param_spread);
    let mut cx = Ctx::new(region, isl, params)?;
    timing.mark("parse");
    // Reductions are recognised on instructions, before they were grouped into blocks.
    cx.reductions = crate::reduction::Reductions::new(fine, isl);
    cx.keep_forward()?;
    timing.mark("forward");
    islx::fresh_budget(isl);
    // The scheduler respects flow dependences and whatever cannot be renamed; anti and output
    // dependences through scalars are the storage advice's business.
    let binding = cx.binding();
    let scheduled = schedule_region(&cx, &binding, opts, &mut fb)?;
    timing.mark("schedule");

    timing.mark("start-loops");
    islx::fresh_budget(isl);
    let original = cx.original()?;
    let own = loop_verdicts(&cx, &original, &mut fb)?;
    let nest = Nest::of(region);

    timing.mark("loops");
    islx::fresh_budget(isl);
    let ic = interchange(&cx, &nest, &binding, &mut fb)?;

    timing.mark("interchange");
    islx::fresh_budget(isl);
    let parallel = parallel_advice(&cx, &nest, &own, &ic, &mut fb)?;

    timing.mark("parallel");
    let skewed = has_skew(&scheduled.tree);
    let mut skipped: Vec<&'static str> = Vec::new();
    let tiling = skew_and_tile(&cx, &nest, &scheduled, opts, &mut fb, &mut skipped)?;
    let components = fusion(
        &cx,
        &nest,
        &scheduled,
        &binding,
        opts,
        &mut fb,
        &mut skipped,
    )?;

    timing.mark("tile");
    layout_advice(&nest, skewed, &mut fb);
    withhold_on_merged_loops(region, &mut fb);
    explain(
        &nest,
        parallel.first_blocked.as_ref(),
        &skipped,
        scheduled.failure.as_deref(),
        &mut fb,
    );
    answer_every_loop(region, &nest.chain, &own, &mut fb);

    timing.mark("layout");
    let parallel_loops: BTreeSet<usize> = ic
        .order
        .iter()
        .zip(&parallel.levels)
        .filter(|(_, &p)| p)
        .map(|(&l, _)| l)
        .collect();
    fb.metrics = metrics(&nest, &ic, &parallel_loops, &tiling, components, skewed);
    fb.ast_before = ast_before(region, &fb.loops);
    fb.ast_after = if skewed {
        ast_after(region, &scheduled.tree, &fb.loops)
    } else {
        ast_advised(&nest, &ic.order, &fb)
    };
    Ok(fb)
}

/// What the scheduler made of a region: its schedule tree and its maps (plain and tiled,
/// read into the region's context), or why there are none.
struct Scheduled {
    tree: Tree,
    maps: Option<(UnionMap, UnionMap)>,
    failure: Option<String>,
}

/// Why the region is not scheduled: most of its work at addresses that depend on data (a
/// hash chain, a table lookup), where a schedule of the over-approximated problem would say
/// nothing true about the program.
fn not_affine(region: &Region) -> Option<String> {
    let total: u64 = region.statements.iter().map(|s| s.ops).sum();
    let mut data_addressed: Vec<&Statement> = region
        .statements
        .iter()
        .filter(|s| {
            s.accesses
                .iter()
                .any(|a| a.strides.iter().any(Option::is_none))
        })
        .collect();
    data_addressed.sort_by_key(|s| std::cmp::Reverse(s.ops));
    let data_share = pct(data_addressed.iter().map(|s| s.ops).sum(), total);
    if data_share < NOT_AFFINE_SHARE {
        return None;
    }
    let mut lines: Vec<String> = Vec::new();
    for s in &data_addressed {
        let l = crate::legality::line_of(region, &s.name);
        if !lines.contains(&l) {
            lines.push(l);
        }
    }
    Some(format!(
        "the region is not affine: addresses depend on data at {} ({data_share:.0}% of its operations)",
        lines.join(", ")
    ))
}

/// Runs isl's scheduler on the region's binding dependences, within a budget of its own: when
/// it fails or runs out, the per-loop answers (parallel, vectorize, interchange), which need
/// only the dependences, still hold. Not affine is an answer too (see [`not_affine`]).
fn schedule_region(
    cx: &Ctx<'_>,
    binding: &[usize],
    opts: &Options,
    fb: &mut Feedback,
) -> Result<Scheduled, Error> {
    let isl = cx.isl;
    // The scheduler runs on contexts of its own: the problem goes there in isl's notation,
    // printed by isl.
    let domain = islx::text(&cx.domain()?)?;
    let validity = match cx.deps_map(binding)? {
        Some(m) => m,
        None => UnionMap::empty_ctx(isl).map_err(islx::isl("an empty map"))?,
    };
    let validity = islx::text(&validity)?;
    let scheduled = match not_affine(cx.region) {
        Some(why) => Err(why),
        None => {
            let started = std::time::Instant::now();
            let s = islx::schedule(opts, &domain, &validity, &cx.params).map_err(|e| e.to_string());
            fb.schedule_seconds = Some(started.elapsed().as_secs_f64());
            s
        }
    };
    Ok(match scheduled {
        Ok(s) => {
            fb.schedule = s.text;
            fb.strategy = Some(s.strategy);
            fb.isl_schedule = Some(crate::IslSchedule {
                map: s.map.clone(),
                tiled: s.tiled.clone(),
                params: cx.params.clone(),
            });
            Scheduled {
                tree: s.tree,
                maps: Some((union_map(isl, &s.map)?, union_map(isl, &s.tiled_check)?)),
                failure: None,
            }
        }
        // `islx::schedule` printed the problem under POLYPROF_DEBUG_SCHEDULE.
        Err(e) => Scheduled {
            tree: Tree::Leaf,
            maps: None,
            failure: Some(e),
        },
    })
}

/// Each loop's properties in the program as written (`fb.loops`), and its verdict, kept for
/// the parallel advice.
fn loop_verdicts(
    cx: &Ctx<'_>,
    original: &UnionMap,
    fb: &mut Feedback,
) -> Result<BTreeMap<usize, Verdict>, Error> {
    let region = cx.region;
    let no_renaming = BTreeSet::new();
    let depth_of = |l: usize| -> usize {
        region
            .statements
            .iter()
            .find_map(|s| s.loops.iter().position(|&x| x == l))
            .unwrap_or(0)
    };
    let mut own: BTreeMap<usize, Verdict> = BTreeMap::new();
    for (l, lp) in region.loops.iter().enumerate() {
        let inside: Vec<&Statement> = region
            .statements
            .iter()
            .filter(|s| s.loops.contains(&l))
            .collect();
        if inside.is_empty() {
            continue;
        }
        let depth = depth_of(l);
        let within: Vec<usize> = cx
            .deps_within(l)
            .into_iter()
            .filter(|&i| region.dependences[i].binding())
            .collect();
        let verdict = cx.parallel(l, depth, original, &no_renaming)?;
        own.insert(l, verdict.clone());
        let negative = cx.first_related(
            &within,
            original,
            &cx.relation(&negative_up_to(cx.n, depth))?,
        )?;
        let (mut good, mut all_acc) = (0u64, 0u64);
        for s in &inside {
            let d = s.loops.iter().position(|&x| x == l).unwrap_or(0);
            for a in &s.accesses {
                all_acc += s.ops;
                if a.stride01(d) {
                    good += s.ops;
                }
            }
        }
        fb.loops.push(LoopInfo {
            id: lp.id.clone(),
            label: lp.label.clone(),
            depth,
            parallel: matches!(&verdict, Verdict::Legal(n) if split_reductions(n).0.is_empty()),
            reduction: matches!(&verdict, Verdict::Legal(n) if !split_reductions(n).0.is_empty()),
            permutable: negative.is_none(),
            stride01_percent: pct(good, all_acc),
            ops: inside.iter().map(|s| s.ops).sum(),
            why_not: None,
        });
    }
    Ok(own)
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

/// The loop order the advice settles on, and what its interchange needs.
struct Interchanged {
    /// The nest's loops, outermost first: the program's, or the suggested interchange's.
    order: Vec<usize>,
    /// Storage the interchange gives copies of its own: its anti and output dependences no
    /// longer constrain the loops.
    renamed: BTreeSet<String>,
    /// The storage changes the interchange needs.
    needs: Vec<Requirement>,
    /// The stride-0/1 share with the best loop innermost (the paper's Preuse).
    preuse: f64,
}

/// Interchange: the loop of a fully permutable nest which, made innermost, gives the most
/// stride-0/1 accesses, when the dependences allow it (with the storage it needs).
fn interchange(
    cx: &Ctx<'_>,
    nest: &Nest<'_>,
    binding: &[usize],
    fb: &mut Feedback,
) -> Result<Interchanged, Error> {
    let region = nest.region;
    let chain = &nest.chain;
    let permutable = |l: usize| {
        fb.loops
            .iter()
            .any(|i| i.id == region.loops[l].id && i.permutable)
    };
    let current_inner = chain.last().copied();
    let reuse = current_inner.map_or(0.0, |l| nest.share_along(l));
    let mut best_inner = current_inner;
    if chain.iter().all(|&l| permutable(l)) && chain.len() >= 2 {
        for &l in chain {
            if best_inner.is_none_or(|b| nest.share_along(l) > nest.share_along(b)) {
                best_inner = Some(l);
            }
        }
    }
    let mut ic = Interchanged {
        order: chain.clone(),
        renamed: BTreeSet::new(),
        needs: Vec::new(),
        preuse: best_inner.map_or(reuse, |l| nest.share_along(l)).max(reuse),
    };
    let (Some(b), Some(c)) = (best_inner, current_inner) else {
        return Ok(ic);
    };
    if b == c || nest.share_along(b) <= nest.share_along(c) {
        return Ok(ic);
    }
    let mut new_order: Vec<usize> = chain.iter().copied().filter(|&l| l != b).collect();
    new_order.push(b);
    let theta = schedule_map(cx.isl, &permuted(region, chain, &new_order))?;
    if let Some(i) = cx.first_violated(binding, &theta)? {
        fb.why_not.get_or_insert(format!(
            "interchanging {} innermost would break {}",
            nest.label(b),
            cx.describe_dep(i)
        ));
        return Ok(ic);
    }
    // The storage the interchange needs (DeLICM): expansion or mapping.
    let fix = crate::storage::for_schedule(cx, &[b], &theta, "the interchange", true)?;
    let names: Vec<String> = new_order
        .iter()
        .map(|&l| region.loops[l].label.clone())
        .collect();
    let mut text = format!(
        "Interchange the loops to the order {} (outermost first): loop {} innermost makes {:.0}% of the accesses stride 0 or 1, against {:.0}% now.",
        names.join(", "),
        nest.label(b),
        nest.share_along(b),
        nest.share_along(c)
    );
    if let Some(first) = distributed_first(region, chain, &new_order) {
        text = format!("{text} {first}");
    }
    if !fix.needs.is_empty() {
        text = format!("{text} Legal after {}.", phrases(&fix.needs));
    }
    fb.suggestions.push(Suggestion {
        kind: SuggestionKind::Interchange,
        loops: new_order
            .iter()
            .map(|&l| region.loops[l].id.clone())
            .collect(),
        text,
        sizes: Vec::new(),
        requires: fix.needs.clone(),
        array: None,
        mapping: None,
        rating: Rating::default(),
    });
    fb.suggestions
        .extend(fix.suggestions.into_iter().map(|mut s| {
            s.rating.enables.push(SuggestionKind::Interchange);
            s
        }));
    ic.renamed = fix.renamed;
    ic.needs = fix.needs;
    ic.order = new_order;
    Ok(ic)
}

/// Which loops of the chosen order may run in parallel.
struct ParallelLevels {
    /// Per level of the order.
    levels: Vec<bool>,
    /// The outermost loop that may not, and why.
    first_blocked: Option<(usize, String)>,
}

/// Parallelism in the chosen order: the outermost loop whose iterations are independent once
/// the storage changes it names are made; and vectorization of the innermost.
fn parallel_advice(
    cx: &Ctx<'_>,
    nest: &Nest<'_>,
    own: &BTreeMap<usize, Verdict>,
    ic: &Interchanged,
    fb: &mut Feedback,
) -> Result<ParallelLevels, Error> {
    let region = nest.region;
    let (chain, order) = (&nest.chain, &ic.order);
    let theta_order = schedule_map(cx.isl, &permuted(region, chain, order))?;
    let mut verdicts: Vec<Verdict> = Vec::new();
    for (lvl, &l) in order.iter().enumerate() {
        // Without an interchange, the order is the program's: its verdicts are known.
        let known = if order == chain { own.get(&l) } else { None };
        verdicts.push(match known {
            Some(v) => v.clone(),
            None => cx.parallel(l, lvl, &theta_order, &ic.renamed)?,
        });
    }
    let levels: Vec<bool> = verdicts
        .iter()
        .map(|v| matches!(v, Verdict::Legal(_)))
        .collect();
    let first_blocked: Option<(usize, String)> =
        order.iter().zip(&verdicts).find_map(|(&l, v)| match v {
            Verdict::Blocked(why) => Some((l, why.clone())),
            Verdict::Legal(_) => None,
        });
    // Advice computed in the interchanged order holds only there: say so, since the loop it
    // names is also a loop of the program's order (where it may be outer).
    let holds_after = match (order == chain, ic.needs.is_empty()) {
        (true, _) => "",
        (false, true) => " This holds once the loops are interchanged as advised.",
        (false, false) => {
            " This holds once the loops are interchanged as advised, with the storage changes that needs."
        }
    };
    let after_interchange = |needs: &[Requirement]| -> Vec<Requirement> {
        let mut all = ic.needs.clone();
        all.extend(needs.iter().cloned());
        all.sort();
        all.dedup();
        all
    };
    if let Some(lvl) = levels.iter().position(|&p| p) {
        let l = order[lvl];
        let Verdict::Legal(mut needs) = verdicts[lvl].clone() else {
            unreachable!("a parallel level has a legal verdict")
        };
        // A loop that keeps its place and is parallel as written needs nothing of the
        // interchange: say so, with the program's own order's requirements.
        let mut standalone = false;
        if lvl < chain.len() && chain[lvl] == l && !ic.needs.is_empty() {
            if let Some(Verdict::Legal(mine)) = own.get(&l) {
                needs = mine.clone();
                standalone = true;
            }
        }
        let needs = &needs;
        let inside = if lvl > 0 {
            format!(
                " inside {}",
                order[..lvl]
                    .iter()
                    .map(|&o| nest.label(o))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        } else {
            String::new()
        };
        // An array reduction costs a copy of the array per thread: name a loop inside that
        // is parallel without one.
        let plain = order[lvl + 1..]
            .iter()
            .zip(&verdicts[lvl + 1..])
            .find(|(_, v)| matches!(v, Verdict::Legal(n) if split_reductions(n).0.is_empty()))
            .map(|(&inner, _)| nest.label(inner));
        let mut text = parallel_text(&nest.label(l), &inside, needs, plain);
        if !standalone {
            text.push_str(holds_after);
        }
        fb.suggestions.push(Suggestion {
            kind: SuggestionKind::Parallelize,
            loops: vec![region.loops[l].id.clone()],
            text,
            sizes: Vec::new(),
            requires: if standalone {
                needs.clone()
            } else {
                after_interchange(needs)
            },
            array: None,
            mapping: None,
            rating: Rating::default(),
        });
    }
    if let (Some(&inner), Some(Verdict::Legal(needs))) = (order.last(), verdicts.last()) {
        let share = nest.share_along(inner);
        if share >= 50.0 {
            fb.suggestions.push(Suggestion {
                kind: SuggestionKind::Vectorize,
                loops: vec![region.loops[inner].id.clone()],
                text: vectorize_text(&nest.label(inner), needs, share) + holds_after,
                sizes: Vec::new(),
                requires: after_interchange(needs),
                array: None,
                mapping: None,
                rating: Rating::default(),
            });
        }
    }
    Ok(ParallelLevels {
        levels,
        first_blocked,
    })
}

/// The deepest permutable band along the hottest statement's path.
#[derive(Default)]
struct Tiling {
    depth: usize,
    /// The band's statements.
    stmts: BTreeSet<String>,
}

/// Skewing and tiling, from isl's bands along the hottest statement's path. Their checks
/// under the tiled schedule can be the costliest of all: on a budget of their own, and
/// skipped (said in `why_not`, through `skipped`) when they stop at it; the answers before
/// them stand.
fn skew_and_tile(
    cx: &Ctx<'_>,
    nest: &Nest<'_>,
    scheduled: &Scheduled,
    opts: &Options,
    fb: &mut Feedback,
    skipped: &mut Vec<&'static str>,
) -> Result<Tiling, Error> {
    let region = nest.region;
    let (chain, maps) = (&nest.chain, &scheduled.maps);
    let skewed = has_skew(&scheduled.tree);
    let mut tiling = Tiling::default();
    islx::fresh_budget(cx.isl);
    let found = (|| -> Result<(), Error> {
        let all_names: Vec<String> = region.statements.iter().map(|s| s.name.clone()).collect();
        let bands = bands_of(&scheduled.tree, &nest.main.name, &all_names);
        for (permutable, members, stmts) in &bands {
            if *permutable && members.len() >= 2 && members.len() > tiling.depth {
                tiling.depth = members.len();
                tiling.stmts = stmts.iter().cloned().collect();
            }
        }
        if skewed {
            let rows = bands
                .iter()
                .flat_map(|(_, m, _)| m.iter())
                .filter_map(|m| m.rows.get(&nest.main.name).cloned().flatten())
                .filter(|r| r.dims_used() >= 2)
                .map(|r| describe_row(&r, chain, region))
                .collect::<Vec<_>>();
            let text = format!(
                "Skew the nest {}: iterate along {} so that the dependences point forward in every loop, which makes the nest tilable and exposes wavefront parallelism.",
                chain.iter().map(|&l| region.loops[l].label.clone()).collect::<Vec<_>>().join(", "),
                rows.join(" and ")
            );
            from_schedule(cx, fb, maps, SuggestionKind::Skew, chain, text, Vec::new())?;
        }
        if tiling.depth >= 2 {
            let tiled: Vec<usize> = chain.iter().copied().take(tiling.depth).collect();
            let text = format!(
                "Tile the {}-deep band {}{} with tiles of {} iterations per loop: it is fully permutable.",
                tiling.depth,
                tiled.iter().map(|&l| region.loops[l].label.clone()).collect::<Vec<_>>().join(", "),
                if skewed { " after skewing" } else { "" },
                opts.tile_size
            );
            let sizes = vec![opts.tile_size; tiling.depth];
            from_schedule(cx, fb, maps, SuggestionKind::Tile, &tiled, text, sizes)?;
            // Skewing is what makes such a band tilable: it serves the tiling.
            if skewed
                && fb
                    .suggestions
                    .iter()
                    .any(|s| s.kind == SuggestionKind::Tile)
            {
                for s in fb
                    .suggestions
                    .iter_mut()
                    .filter(|s| s.kind == SuggestionKind::Skew)
                {
                    s.rating.enables.push(SuggestionKind::Tile);
                }
            }
        }
        Ok(())
    })();
    islx::skip_over_budget(cx.isl, found, "skewing and tiling", skipped)?;
    Ok(tiling)
}

/// Whether statements `names` do work the program sees: write memory, act on a library's
/// hidden state (the output stream), leave a value read after the region, or produce a value
/// another statement of the region reads.
fn does_work(region: &Region, names: &[String]) -> bool {
    let inside = |s: &str| names.iter().any(|n| n == s);
    let writes = region
        .statements
        .iter()
        .filter(|s| inside(&s.name))
        .any(|s| s.accesses.iter().any(|a| a.write));
    let used = region.dependences.iter().any(|d| {
        inside(&d.source)
            && (matches!(d.storage, Storage::Effect { .. })
                || (d.kind == DepKind::Flow && !inside(&d.sink)))
    });
    writes || used || region.live_out.iter().any(|b| inside(&b.stmt))
}

/// Fusion and distribution of the outermost loops with a real share of the work: the number
/// of such nests before and after isl's schedule.
fn fusion(
    cx: &Ctx<'_>,
    nest: &Nest<'_>,
    scheduled: &Scheduled,
    binding: &[usize],
    opts: &Options,
    fb: &mut Feedback,
    skipped: &mut Vec<&'static str>,
) -> Result<(usize, usize), Error> {
    let region = nest.region;
    let share_min = |ops: u64| pct(ops, nest.total) > opts.component_share;
    let mut before: BTreeMap<Option<usize>, u64> = BTreeMap::new();
    for s in &region.statements {
        *before.entry(s.loops.first().copied()).or_default() += s.ops;
    }
    let components_before = before
        .iter()
        .filter(|(l, ops)| l.is_some() && share_min(**ops))
        .count();
    let (components_after, idle) = match &scheduled.tree {
        Tree::Sequence(children) => {
            let nests: Vec<&Vec<String>> = children
                .iter()
                .filter(|(names, sub)| {
                    matches!(sub, Tree::Band { .. })
                        && share_min(nest.ops_where(|s| names.contains(&s.name)))
                })
                .map(|(names, _)| names)
                .collect();
            let idle = nests.iter().find(|names| !does_work(region, names));
            let described = |names: &&Vec<String>| {
                let lines: BTreeSet<&str> = region
                    .statements
                    .iter()
                    .filter(|s| names.contains(&s.name))
                    .flat_map(|s| s.lines())
                    .collect();
                let lines: Vec<&str> = lines.into_iter().collect();
                format!("{} at {}", names.join(", "), lines.join(", "))
            };
            (nests.len(), idle.map(described))
        }
        Tree::Band { .. } => (1, None),
        Tree::Leaf => (0, None),
    };
    let outer: Vec<usize> = before.keys().flatten().copied().collect();
    let maps = &scheduled.maps;
    islx::fresh_budget(cx.isl);
    let found = (|| -> Result<(), Error> {
        // Fusion is suggested as a person applies it: the outermost loops fused, each iteration
        // running the first nest's body, then the second's. isl may find a fused schedule that
        // also reorders the loops inside; "fuse" would not say that, so its fusion is not taken.
        let distributes = components_after > components_before && components_before >= 1;
        if let (true, Some(idle)) = (distributes, &idle) {
            // Without control dependences, a branch's condition looks independent of what
            // the branch guards: isl may set it apart, in a nest of its own whose results
            // nothing reads. No source loop can be split so.
            add_why_not(
                fb,
                format!(
                    "isl's schedule distributes the loops, but one of the nests ({idle}) would \
                     only compute values no other statement reads (the conditions of branches, \
                     whose control dependences polyprof does not model): not advised"
                ),
            );
        } else if distributes {
            let text = format!(
                "Distribute the loop nest into {components_after} nests so that each can be optimised on its own."
            );
            from_schedule(
                cx,
                fb,
                maps,
                SuggestionKind::Distribute,
                &outer,
                text,
                Vec::new(),
            )?;
        } else if components_before == 2 && outer.len() == 2 {
            // isl keeps the nests apart (its fusion heuristics weigh more than legality): the
            // classic producer-consumer fusion of the outermost loops, checked directly.
            let fused = schedule_map(cx.isl, &fused_outer(region, &outer))?;
            let named = outer
                .iter()
                .map(|&l| nest.label(l))
                .collect::<Vec<_>>()
                .join(" and ");
            match cx.first_violated(binding, &fused)? {
                None => {
                    let text = format!(
                        "Fuse the loops {named} into one: each iteration runs the first nest's body, then the second's; the dependences allow it and it improves locality."
                    );
                    let copy = fused.copy().map_err(islx::isl("copying a schedule"))?;
                    let maps = Some((copy, fused));
                    from_schedule(
                        cx,
                        fb,
                        &maps,
                        SuggestionKind::Fuse,
                        &outer,
                        text,
                        Vec::new(),
                    )?;
                }
                Some(i) => {
                    fb.why_not.get_or_insert(format!(
                        "fusing {named} would break {}",
                        cx.describe_dep(i)
                    ));
                }
            }
        }
        Ok(())
    })();
    islx::skip_over_budget(cx.isl, found, "fusion and distribution", skipped)?;
    Ok((components_before, components_after))
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

/// Advice naming a loop the compiler merged with an enclosing one is withheld, as its
/// parallelization is ([`Ctx::parallel`]): the line the loop is named by is an inner loop's,
/// so the advice would be applied to the wrong source loop (trmm's `init_array` at -O3).
fn withhold_on_merged_loops(region: &Region, fb: &mut Feedback) {
    for v in &region.shared_variables {
        for (id, line) in &v.merged {
            let mut kinds: Vec<&str> = Vec::new();
            fb.suggestions.retain(|s| {
                let hit = s.loops.contains(id);
                if hit && !kinds.contains(&s.kind.as_str()) {
                    kinds.push(s.kind.as_str());
                }
                !hit
            });
            if kinds.is_empty() {
                continue;
            }
            let label = region
                .loops
                .iter()
                .find(|l| &l.id == id)
                .map_or(id.clone(), |l| format!("{} ({id})", l.label));
            let w = format!(
                "{} on loop {label} withheld: the compiler merged it with the loop at {line}",
                kinds.join(" and ")
            );
            add_why_not(fb, w);
            // And what only made the withheld advice legal ("expand ... for the interchange").
            let left: Vec<SuggestionKind> = fb.suggestions.iter().map(|s| s.kind).collect();
            fb.suggestions.retain(|s| {
                s.rating.enables.is_empty() || s.rating.enables.iter().any(|k| left.contains(k))
            });
        }
    }
}

/// Adds `reason` to what `fb.why_not` says.
fn add_why_not(fb: &mut Feedback, reason: String) {
    fb.why_not = Some(match fb.why_not.take() {
        Some(w) => format!("{w}; {reason}"),
        None => reason,
    });
}

/// Why nothing, or nothing more, could be done: `fb.why_not`.
fn explain(
    nest: &Nest<'_>,
    first_blocked: Option<&(usize, String)>,
    skipped: &[&'static str],
    schedule_failure: Option<&str>,
    fb: &mut Feedback,
) {
    if !fb
        .suggestions
        .iter()
        .any(|s| s.kind == SuggestionKind::Parallelize)
    {
        if let Some((l, why)) = first_blocked {
            let reason = format!("loop {} cannot run in parallel: {why}", nest.label(*l));
            fb.why_not = Some(match fb.why_not.take() {
                Some(w) if fb.suggestions.is_empty() => format!("{w}; {reason}"),
                Some(w) => format!("no parallel loop: {reason}; {w}"),
                None => format!("no parallel loop: {reason}"),
            });
        }
    }
    if !skipped.is_empty() {
        add_why_not(
            fb,
            format!(
                "the checks of {} stopped at isl's budget (raise it with --isl-max-operations)",
                skipped.join(" and ")
            ),
        );
    }
    if let Some(e) = schedule_failure {
        add_why_not(fb, format!("no tiling, skewing or fusion advice: {e}"));
    }
    let region = nest.region;
    if fb.suggestions.is_empty() && fb.why_not.is_none() {
        fb.why_not = Some(if !region.library_calls.is_empty() {
            format!(
                "the region calls {} natively, which hides its effects",
                region.library_calls.join(", ")
            )
        } else {
            "no transformation improves parallelism or locality here".to_string()
        });
    }
}

/// The POLY-PROF paper's metrics of the region.
fn metrics(
    nest: &Nest<'_>,
    ic: &Interchanged,
    parallel_loops: &BTreeSet<usize>,
    tiling: &Tiling,
    (components_before, components_after): (usize, usize),
    skewed: bool,
) -> Metrics {
    let (region, total) = (nest.region, nest.total);
    let inner_parallel = ic.order.last().is_some_and(|l| parallel_loops.contains(l));
    Metrics {
        mem_ops_percent: pct(nest.ops_where(|s| !s.accesses.is_empty()), total),
        fp_ops_percent: pct(nest.ops_where(|s| s.fp), total),
        parallel_ops_percent: pct(
            nest.ops_where(|s| s.loops.iter().any(|l| parallel_loops.contains(l))),
            total,
        ),
        simd_ops_percent: if inner_parallel {
            pct(
                nest.ops_where(|s| s.loops.last() == nest.chain.last()),
                total,
            )
        } else {
            0.0
        },
        reuse_percent: nest.chain.last().map_or(0.0, |&l| nest.share_along(l)),
        preuse_percent: ic.preuse,
        tile_depth: tiling.depth,
        tile_ops_percent: pct(nest.ops_where(|s| tiling.stmts.contains(&s.name)), total),
        components_before,
        components_after,
        skew: skewed,
        loop_depth: region
            .statements
            .iter()
            .map(|s| s.loops.len())
            .max()
            .unwrap_or(0),
    }
}

/// The nest's tree in the advised order, each loop flagged with what the suggestions say of
/// it (parallel, tiled, vectorized).
fn ast_advised(nest: &Nest<'_>, order: &[usize], fb: &Feedback) -> String {
    let region = nest.region;
    let loops_of = |kind: SuggestionKind, all: bool| -> Vec<String> {
        let mut of = fb.suggestions.iter().filter(|s| s.kind == kind);
        if all {
            of.flat_map(|s| s.loops.clone()).collect()
        } else {
            of.next().map(|s| s.loops.clone()).unwrap_or_default()
        }
    };
    let vectorized = loops_of(SuggestionKind::Vectorize, false);
    let parallel_suggested = loops_of(SuggestionKind::Parallelize, true);
    let tiled = loops_of(SuggestionKind::Tile, false);
    let after_flags = |l: usize| -> String {
        let id = &region.loops[l].id;
        let mut f = Vec::new();
        if parallel_suggested.contains(id) {
            f.push("parallel");
        }
        if tiled.contains(id) {
            f.push("tiled");
        }
        if vectorized.contains(id) {
            f.push("vectorized");
        }
        f.join(", ")
    };
    ast_in_order(region, &nest.chain, order, &after_flags)
}

/// Storage changes for a sentence: "privatizing `t` and reading `a` from a copy ...".
/// Adds a suggestion that follows isl's schedule (for tiling: after tiling its permutable
/// bands), with the storage changes that schedule needs for the dependences isl was not given
/// (anti and output dependences through registers and scalars), then those storage
/// suggestions (expansion, mapping) unless already there. When no storage change makes it
/// legal there is no suggestion, and the reason goes to the region's `why_not`.
fn from_schedule(
    cx: &Ctx<'_>,
    fb: &mut Feedback,
    maps: &Option<(UnionMap, UnionMap)>,
    kind: SuggestionKind,
    along: &[usize],
    text: String,
    sizes: Vec<u32>,
) -> Result<(), Error> {
    let Some((map, tiled_map)) = maps else {
        return Ok(());
    };
    let what = match kind {
        SuggestionKind::Tile => "tiling",
        SuggestionKind::Skew => "skewing",
        SuggestionKind::Fuse => "fusion",
        _ => "distribution",
    };
    let theta = if kind == SuggestionKind::Tile {
        tiled_map
    } else {
        map
    };
    // Tiles of a band every statement of which runs in all its loops keep each iteration's
    // body whole: temporaries that stay within one iteration rename freely.
    let region = cx.region;
    let whole = kind == SuggestionKind::Tile
        && region
            .statements
            .iter()
            .filter(|s| s.loops.contains(&along[0]))
            .all(|s| along.iter().all(|l| s.loops.contains(l)));
    let fix = crate::storage::for_schedule(cx, along, theta, what, whole)?;
    if let Some(why) = fix.blocked {
        fb.why_not.get_or_insert(format!("no {what} advice: {why}"));
        return Ok(());
    }
    let text = match fix.needs.is_empty() {
        true => text,
        false => format!("{text} Legal after {}.", phrases(&fix.needs)),
    };
    fb.suggestions.push(Suggestion {
        kind,
        loops: along.iter().map(|&l| region.loops[l].id.clone()).collect(),
        text,
        sizes,
        requires: fix.needs,
        array: None,
        mapping: None,
        rating: Rating::default(),
    });
    // The same storage change asked for by several transformations is one suggestion (its
    // first sentence names the storage and its home).
    let head = |t: &str| t.split(':').next().unwrap_or(t).to_string();
    for mut s in fix.suggestions {
        // Either way the storage change now also serves this transformation.
        match fb
            .suggestions
            .iter_mut()
            .find(|t| t.kind == s.kind && head(&t.text) == head(&s.text))
        {
            Some(t) => {
                if !t.rating.enables.contains(&kind) {
                    t.rating.enables.push(kind);
                }
            }
            None => {
                s.rating.enables.push(kind);
                fb.suggestions.push(s);
            }
        }
    }
    Ok(())
}

/// The reduction clauses among `needs`, and the other storage changes.
fn split_reductions(needs: &[Requirement]) -> (Vec<String>, Vec<Requirement>) {
    let clauses = needs.iter().filter_map(Requirement::clause).collect();
    let others = needs
        .iter()
        .filter(|r| r.clause().is_none())
        .cloned()
        .collect();
    (clauses, others)
}

/// The storage of the reductions among `needs`, with their lines: "`y` (at k.c:36)".
fn reduced_storage(needs: &[Requirement]) -> String {
    needs
        .iter()
        .filter(|r| r.clause().is_some())
        .map(|r| {
            if r.lines.is_empty() {
                r.storage.clone()
            } else {
                format!("{} (at {})", r.storage, r.lines.join(", "))
            }
        })
        .collect::<Vec<_>>()
        .join(" and ")
}

/// What a person must know before making a reduction parallel: floating point reassociates.
fn reduction_notes(needs: &[Requirement]) -> String {
    let fp = needs
        .iter()
        .any(|r| matches!(r.change, Change::Reduction { fp: true, .. }));
    if fp {
        " Combining partial results reassociates floating-point arithmetic: the result may differ in the last bits.".to_string()
    } else {
        String::new()
    }
}

/// The original schedule with the two outermost loops `outer` (first, then second in program
/// order) fused: iteration `i` of the first nest's body, then iteration `i` of the second's.
fn fused_outer(region: &Region, outer: &[usize]) -> Vec<Polyhedra> {
    let top = |l: usize| {
        region
            .statements
            .iter()
            .filter(|s| s.loops.first() == Some(&l))
            .filter_map(|s| s.positions.first().copied())
            .min()
            .unwrap_or(0)
    };
    let (first, second) = if top(outer[0]) <= top(outer[1]) {
        (outer[0], outer[1])
    } else {
        (outer[1], outer[0])
    };
    // Past every position under the first loop.
    let shift = region
        .statements
        .iter()
        .filter_map(|s| s.positions.get(1).copied())
        .max()
        .unwrap_or(0)
        + 1;
    let mut fused = region.clone();
    for s in &mut fused.statements {
        if s.loops.first() == Some(&second) && s.positions.len() >= 2 {
            s.positions[0] = top(first);
            s.positions[1] += shift;
        }
    }
    crate::legality::kelly(&fused, &|s| (0..s.loops.len()).collect())
}

/// Every loop of the region gets a suggestion that names it or a reason why none does. A
/// loop off the hottest nest that may run in parallel, inside no loop suggested parallel, gets
/// its own parallelize suggestion (in the program's order, with its own storage changes);
/// the others say what blocks them.
fn answer_every_loop(
    region: &Region,
    chain: &[usize],
    own: &BTreeMap<usize, Verdict>,
    fb: &mut Feedback,
) {
    let label = |l: usize| format!("{} ({})", region.loops[l].label, region.loops[l].id);
    // Each loop's enclosing loops, outermost first.
    let around = |l: usize| -> Vec<usize> {
        region
            .statements
            .iter()
            .find_map(|s| {
                let d = s.loops.iter().position(|&x| x == l)?;
                Some(s.loops[..d].to_vec())
            })
            .unwrap_or_default()
    };
    let index = |id: &str| region.loops.iter().position(|lp| lp.id == id);
    let mut parallel: BTreeSet<usize> = fb
        .suggestions
        .iter()
        .filter(|s| s.kind == SuggestionKind::Parallelize)
        .flat_map(|s| s.loops.iter().filter_map(|id| index(id)))
        .collect();
    let mut by_depth: Vec<usize> = own.keys().copied().collect();
    by_depth.sort_by_key(|&l| around(l).len());
    for l in by_depth {
        let id = region.loops[l].id.clone();
        if fb.suggestions.iter().any(|s| s.loops.contains(&id)) {
            continue;
        }
        let outer = around(l);
        let why = if let Some(&a) = outer.iter().find(|a| parallel.contains(a)) {
            format!(
                "it runs inside loop {}, which is suggested parallel",
                label(a)
            )
        } else {
            match &own[&l] {
                Verdict::Blocked(w) => format!("it cannot run in parallel: {w}"),
                Verdict::Legal(needs) if !chain.contains(&l) => {
                    let inside = if outer.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " inside {}",
                            outer.iter().map(|&o| label(o)).collect::<Vec<_>>().join(", ")
                        )
                    };
                    fb.suggestions.push(Suggestion {
                        kind: SuggestionKind::Parallelize,
                        loops: vec![id],
                        text: parallel_text(&label(l), &inside, needs, None),
                        sizes: Vec::new(),
                        requires: needs.clone(),
                        array: None,
                        mapping: None,
                        rating: Rating::default(),
                    });
                    parallel.insert(l);
                    continue;
                }
                Verdict::Legal(_) => "it may run in parallel as written, but the suggestions parallelize another loop of its nest in the order they choose".to_string(),
            }
        };
        if let Some(info) = fb.loops.iter_mut().find(|i| i.id == id) {
            info.why_not = Some(why);
        }
    }
}

/// The OpenMP data-sharing clauses of the privatizations among `needs` that name source
/// variables: `private(i, j)`, `firstprivate(t)`, `lastprivate(last)` (a variable given a
/// first or last value is not also in `private`).
fn sharing_clauses(needs: &[Requirement]) -> Vec<String> {
    let named = |change: Change| -> Vec<&str> {
        needs
            .iter()
            .filter(|r| r.change == change)
            .filter_map(Requirement::private_variable)
            .collect()
    };
    let (first, last) = (named(Change::FirstPrivate), named(Change::LastPrivate));
    let private: Vec<&str> = named(Change::Privatize)
        .into_iter()
        .filter(|v| !first.contains(v) && !last.contains(v))
        .collect();
    [
        ("private", private),
        ("firstprivate", first),
        ("lastprivate", last),
    ]
    .into_iter()
    .filter(|(_, vars)| !vars.is_empty())
    .map(|(clause, vars)| format!("{clause}({})", vars.join(", ")))
    .collect()
}

/// The parallelize suggestion's sentence for loop `label`, run `inside` other loops, legal
/// after `needs`; `plain`: a loop inside it that is parallel without a reduction. The pragma
/// it gives carries the clauses of the reductions and privatizations it names.
fn parallel_text(
    label: &str,
    inside: &str,
    needs: &[Requirement],
    plain: Option<String>,
) -> String {
    let (clauses, others) = split_reductions(needs);
    let pragma: String = std::iter::once("#pragma omp parallel for".to_string())
        .chain(sharing_clauses(needs))
        .chain(clauses.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    if clauses.is_empty() && others.is_empty() {
        return format!(
            "Run loop {label} in parallel (e.g. `{pragma}`){inside}: no dependence of any kind is carried by it."
        );
    }
    if clauses.is_empty() {
        return format!(
            "Run loop {label} in parallel (e.g. `{pragma}`){inside} after {}: then no dependence is carried by it.",
            phrases(needs)
        );
    }
    let mut text = format!(
        "Run loop {label} in parallel as a reduction (e.g. `{pragma}`){inside}: each thread accumulates {} in a copy of its own, combined after the loop",
        reduced_storage(needs)
    );
    if !others.is_empty() {
        let _ = write!(text, ", after {}", phrases(&others));
    }
    text.push('.');
    text.push_str(&reduction_notes(needs));
    let array = needs
        .iter()
        .any(|r| matches!(r.change, Change::Reduction { array: true, .. }));
    if let (true, Some(inner)) = (array, plain) {
        let _ = write!(
            text,
            " Alternatively, loop {inner} is parallel without a reduction, at the cost of a parallel region per iteration of the loops around it."
        );
    }
    text
}

/// The vectorize suggestion's sentence.
fn vectorize_text(label: &str, needs: &[Requirement], share: f64) -> String {
    let (clauses, others) = split_reductions(needs);
    let after = if others.is_empty() {
        String::new()
    } else {
        format!(" after {}", phrases(&others))
    };
    if clauses.is_empty() {
        format!(
            "Vectorize loop {label}: its iterations are independent{after} and {share:.0}% of its accesses are stride 0 or 1."
        )
    } else {
        format!(
            "Vectorize loop {label} as a reduction (e.g. `#pragma omp simd {}`){after}: each vector lane accumulates {}, and {share:.0}% of its accesses are stride 0 or 1.{}",
            clauses.join(" "),
            reduced_storage(needs),
            reduction_notes(needs)
        )
    }
}

fn phrases(needs: &[Requirement]) -> String {
    needs
        .iter()
        .map(Requirement::phrase)
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The schedule where the statements running the whole `chain` of loops follow `order`. The
/// first loop that changes place is distributed first: the statements it holds besides the
/// chain's (code before or after the inner loops of an imperfect nest) go to nests of their
/// own, before or after the permuted one, as their position in the program says.
fn permuted(region: &Region, chain: &[usize], order: &[usize]) -> Vec<Polyhedra> {
    let n = sched_len(region);
    region
        .statements
        .iter()
        .zip(layout(region, chain, order))
        .map(|(s, (positions, _, dims))| kelly_map(s, &dims, &|lvl| positions[lvl], n))
        .collect()
}

/// Whether statement `s` runs inside every loop of `chain` (outermost first).
fn runs_chain(s: &Statement, chain: &[usize]) -> bool {
    s.loops.starts_with(chain)
}

/// How an imperfect nest splits when the loops `chain` follow `order`: the first level whose
/// loop changes place, and per statement 1 for those running the whole chain (and those
/// outside that loop), 0 or 2 for the others that loop holds (code before or after the inner
/// loops), which go to copies of it before or after the permuted nest, as their position in
/// the program says. `None` when no loop changes place.
fn split_groups(region: &Region, chain: &[usize], order: &[usize]) -> Option<(usize, Vec<u32>)> {
    let f = (0..chain.len().min(order.len())).find(|&k| chain[k] != order[k])?;
    let member = |s: &Statement| runs_chain(s, chain);
    let chain_pos = region
        .statements
        .iter()
        .find(|s| member(s))
        .and_then(|s| s.positions.get(f + 1).copied());
    let groups = region
        .statements
        .iter()
        .map(|s| {
            let shares = s.loops.len() > f && s.loops[..=f] == chain[..=f];
            if member(s) || !shares {
                1
            } else if s.positions.get(f + 1).copied() > chain_pos {
                2
            } else {
                0
            }
        })
        .collect();
    Some((f, groups))
}

/// The source lines an interchange moves to loops of their own (an imperfect nest), in
/// words: the user distributes them first (see [`split_groups`]).
fn distributed_first(region: &Region, chain: &[usize], order: &[usize]) -> Option<String> {
    let (f, groups) = split_groups(region, chain, order)?;
    // A loop header's own code (its counter's start, its trip count) is not the user's to move,
    // nor a line that also runs inside the inner loops: its loads and stores outside them are
    // the compiler's (`x[i] += ...` kept in a register across j, stored after the j loop).
    let mut headers: BTreeSet<&str> = region.loops.iter().map(|l| l.label.as_str()).collect();
    for s in &region.statements {
        if runs_chain(s, chain) {
            headers.extend(s.lines());
        }
    }
    let lines = |g: u32| {
        let mut out: Vec<&str> = Vec::new();
        for (s, _) in region
            .statements
            .iter()
            .zip(&groups)
            .filter(|(_, &x)| x == g)
        {
            for l in s.lines() {
                if !out.contains(&l) && !headers.contains(l) {
                    out.push(l);
                }
            }
        }
        // By file, then line number.
        out.sort_by_key(|l| {
            let (file, line) = l.rsplit_once(':').unwrap_or((l, ""));
            (file, line.parse::<u64>().unwrap_or(u64::MAX))
        });
        out
    };
    let (before, after) = (lines(0), lines(2));
    let label = &region.loops[chain[f]].label;
    let place = match (before.is_empty(), after.is_empty()) {
        (true, true) => return None,
        (false, true) => format!("{} to a copy of loop {label} before it", before.join(", ")),
        (true, false) => format!("{} to a copy of loop {label} after it", after.join(", ")),
        (false, false) => format!(
            "{} to a copy of loop {label} before it and {} to one after it",
            before.join(", "),
            after.join(", ")
        ),
    };
    Some(format!("The nest is not perfect: first move {place}."))
}

/// Each statement's place once the statements running the whole `chain` follow `order`:
/// (static positions, loops, and which of its dimensions runs at each level). The first loop
/// that changes place is distributed first (see [`split_groups`]).
pub(crate) fn layout(
    region: &Region,
    chain: &[usize],
    order: &[usize],
) -> Vec<(Vec<u32>, Vec<usize>, Vec<usize>)> {
    let split = split_groups(region, chain, order);
    let member = |s: &Statement| runs_chain(s, chain);
    region
        .statements
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let identity: Vec<usize> = (0..s.loops.len()).collect();
            let Some((f, groups)) = &split else {
                let pos = (0..=s.loops.len())
                    .map(|l| s.positions.get(l).copied().unwrap_or(0))
                    .collect();
                return (pos, s.loops.clone(), identity);
            };
            let (dims, loops) = if member(s) {
                let mut d = identity.clone();
                let mut loops = s.loops.clone();
                for (lvl, l) in order.iter().enumerate() {
                    if let Some(x) = s.loops.iter().position(|y| y == l) {
                        d[lvl] = x;
                        loops[lvl] = *l;
                    }
                }
                (d, loops)
            } else {
                (identity, s.loops.clone())
            };
            let pos = (0..=s.loops.len())
                .map(|lvl| {
                    let p = s.positions.get(lvl).copied().unwrap_or(0);
                    if lvl == *f {
                        p * 3 + groups[k]
                    } else {
                        p * 3 + 1
                    }
                })
                .collect();
            (pos, loops, dims)
        })
        .collect()
}

fn has_skew(t: &Tree) -> bool {
    match t {
        Tree::Band { members, child, .. } => {
            members
                .iter()
                .any(|m| m.rows.values().flatten().any(|r| r.dims_used() >= 2))
                || has_skew(child)
        }
        Tree::Sequence(c) => c.iter().any(|(_, t)| has_skew(t)),
        Tree::Leaf => false,
    }
}

/// The bands on `stmt`'s path through the schedule tree: (permutable, members, statements).
fn bands_of(t: &Tree, stmt: &str, all: &[String]) -> Vec<(bool, Vec<islx::Member>, Vec<String>)> {
    let mut out = Vec::new();
    let mut cur = t;
    // The statements of the filter the walk is under.
    let mut names: Vec<String> = all.to_vec();
    loop {
        match cur {
            Tree::Band {
                permutable,
                members,
                child,
            } => {
                out.push((*permutable, members.clone(), child.statements(&names)));
                cur = child;
            }
            Tree::Sequence(children) => {
                match children.iter().find(|(n, _)| n.iter().any(|n| n == stmt)) {
                    Some((n, sub)) => {
                        names = n.clone();
                        cur = sub;
                    }
                    None => break,
                }
            }
            Tree::Leaf => break,
        }
    }
    out
}

fn describe_row(r: &crate::affine::Affine, chain: &[usize], region: &Region) -> String {
    let terms: Vec<String> = r
        .coeffs
        .iter()
        .enumerate()
        .filter(|(_, c)| **c != 0)
        .map(|(d, c)| {
            let name = chain
                .get(d)
                .map_or(format!("i{d}"), |&l| region.loops[l].label.clone());
            match c {
                1 => format!("({name})"),
                -1 => format!("-({name})"),
                c => format!("{c}*({name})"),
            }
        })
        .collect();
    terms.join(" + ")
}

fn flags(i: &LoopInfo) -> String {
    let mut f = Vec::new();
    if i.parallel {
        f.push("parallel".to_string());
    }
    if i.reduction {
        f.push("parallel as a reduction".to_string());
    }
    if i.permutable {
        f.push("permutable".to_string());
    }
    f.push(format!("stride 0/1 {:.0}%", i.stride01_percent));
    f.join(", ")
}

/// The loop structure with the statements running the whole `chain` following `order`; each
/// loop with its line and `flags`.
fn ast_in_order(
    region: &Region,
    chain: &[usize],
    order: &[usize],
    flags: &dyn Fn(usize) -> String,
) -> String {
    let mut stmts: Vec<(Vec<u32>, Vec<usize>, &Statement)> = layout(region, chain, order)
        .into_iter()
        .zip(&region.statements)
        .map(|((positions, loops, _), s)| (positions, loops, s))
        .collect();
    stmts.sort_by(|a, b| {
        let ka: Vec<(u32, usize)> =
            a.0.iter()
                .copied()
                .zip(a.1.iter().copied().chain([usize::MAX]))
                .collect();
        let kb: Vec<(u32, usize)> =
            b.0.iter()
                .copied()
                .zip(b.1.iter().copied().chain([usize::MAX]))
                .collect();
        ka.cmp(&kb)
    });
    let mut out = String::new();
    let mut open: Vec<usize> = Vec::new();
    for (_, loops, s) in stmts {
        let common = open.iter().zip(&loops).take_while(|(a, b)| a == b).count();
        open.truncate(common);
        for &l in &loops[common..] {
            let pad = "  ".repeat(open.len());
            let f = flags(l);
            let _ = writeln!(
                out,
                "{pad}for {} ({}){}",
                region.loops[l].id,
                region.loops[l].label,
                if f.is_empty() {
                    String::new()
                } else {
                    format!("  [{f}]")
                }
            );
            open.push(l);
        }
        let pad = "  ".repeat(open.len());
        let _ = writeln!(out, "{pad}{} {}  ({} ops)", s.name, s.label, s.ops);
    }
    out
}

/// The region's loop structure as written, each loop with its line and flags, each statement
/// with its line and executions.
fn ast_before(region: &Region, loops: &[LoopInfo]) -> String {
    let f = |l: usize| {
        loops
            .iter()
            .find(|i| i.id == region.loops[l].id)
            .map_or(String::new(), flags)
    };
    ast_in_order(region, &[], &[], &f)
}

/// The loop structure after the schedule isl found.
fn ast_after(region: &Region, tree: &Tree, loops: &[LoopInfo]) -> String {
    let mut out = String::new();
    render(
        region,
        tree,
        loops,
        0,
        &mut out,
        &region
            .statements
            .iter()
            .map(|s| s.name.clone())
            .collect::<Vec<_>>(),
    );
    out
}

fn render(
    region: &Region,
    t: &Tree,
    loops: &[LoopInfo],
    depth: usize,
    out: &mut String,
    stmts: &[String],
) {
    let pad = "  ".repeat(depth);
    match t {
        Tree::Band {
            permutable,
            members,
            child,
        } => {
            let mut d = depth;
            for (k, m) in members.iter().enumerate() {
                // Name the member by the original loop it follows for the first statement that
                // has a simple row.
                let name = m
                    .rows
                    .iter()
                    .filter(|(s, _)| stmts.contains(s))
                    .find_map(|(s, r)| {
                        let st = region.statements.iter().find(|x| &x.name == s)?;
                        let r = r.as_ref()?;
                        match r.single_dim() {
                            Some(dim) => st.loops.get(dim).map(|&l| {
                                format!("{} ({})", region.loops[l].id, region.loops[l].label)
                            }),
                            None if r.dims_used() >= 2 => {
                                Some(format!("skewed {}", describe_row(r, &st.loops, region)))
                            }
                            None => None,
                        }
                    })
                    .unwrap_or_else(|| format!("c{k}"));
                let mut f = Vec::new();
                if m.coincident {
                    f.push("parallel");
                }
                if *permutable && members.len() > 1 {
                    f.push("permutable");
                }
                let _ = writeln!(
                    out,
                    "{}for {name}{}",
                    "  ".repeat(d),
                    if f.is_empty() {
                        String::new()
                    } else {
                        format!("  [{}]", f.join(", "))
                    }
                );
                d += 1;
            }
            let _ = loops;
            render(region, child, loops, d, out, stmts);
        }
        Tree::Sequence(children) => {
            for (names, sub) in children {
                render(region, sub, loops, depth, out, names);
            }
        }
        Tree::Leaf => {
            for s in region.statements.iter().filter(|s| stmts.contains(&s.name)) {
                let _ = writeln!(out, "{pad}{} {}  ({} ops)", s.name, s.label, s.ops);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::Loop;

    fn stmt(name: &str, line: u32, loops: &[usize], positions: &[u32]) -> Statement {
        Statement {
            name: name.into(),
            label: format!("k.c:{line} movsd xmm0, [rax]"),
            loops: loops.to_vec(),
            positions: positions.to_vec(),
            domain: crate::Polyhedra::empty_set(name, loops.len()),
            ops: 1,
            accesses: Vec::new(),
            fp: true,
            exact: true,
            update: None,
        }
    }

    /// `for i (k.c:1) { for j (k.c:2) { S(k.c:3) ... } }`, with `statements`.
    fn nest(statements: Vec<Statement>) -> Region {
        Region {
            loops: (1..=2)
                .map(|n| Loop {
                    id: format!("L{n}"),
                    label: format!("k.c:{n}"),
                })
                .collect(),
            statements,
            ..Region::default()
        }
    }

    #[test]
    fn an_interchange_names_the_statements_it_moves() {
        // `for i { t[i] = 0 (k.c:3); for j { t[i] += ... (k.c:4) } ; u[i] = t[i] (k.c:6) }`
        let r = nest(vec![
            stmt("S0", 3, &[0], &[0, 0]),
            stmt("S1", 4, &[0, 1], &[0, 1, 0]),
            stmt("S2", 6, &[0], &[0, 2]),
        ]);
        assert_eq!(
            distributed_first(&r, &[0, 1], &[1, 0]).as_deref(),
            Some("The nest is not perfect: first move k.c:3 to a copy of loop k.c:1 before it and k.c:6 to one after it.")
        );
        assert_eq!(distributed_first(&r, &[0, 1], &[0, 1]), None);
    }

    #[test]
    fn a_line_inside_the_inner_loops_is_not_moved() {
        // gemver at -O2: `x[i] = x[i] + ...` (k.c:3) loaded before the j loop, kept in a
        // register and stored in it: the load is the compiler's, not a statement to move.
        let r = nest(vec![
            stmt("S0", 3, &[0], &[0, 0]),
            stmt("S1", 3, &[0, 1], &[0, 1, 0]),
        ]);
        assert_eq!(distributed_first(&r, &[0, 1], &[1, 0]), None);
    }
}
