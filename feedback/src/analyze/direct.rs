//! Every loop's answers with no scheduler and no isl (ARCHITECTURE, decision 11): whether it
//! is parallel, a reduction, or which kinds of dependence it carries; its share of stride
//! 0/1 accesses; whether it is permutable with the loops around it. They come from the
//! dependences' distances ([`crate::distance`]), at a cost linear in the region's
//! dependences, so no budget stops them: they are what a region keeps when isl runs out on
//! it, and they fill in any loop the isl analysis left without an answer.
//!
//! They are cautious where the isl analysis is precise: a dependence whose distances do not
//! tell whether the loop carries it counts as carried; a scalar read after the loop, or
//! an array the loop carries an anti or output dependence on, keeps the loop serial (the
//! storage changes that would lift it are checked on relations, by isl).

use crate::distance::{Distances, Tri};
use crate::input::{DepKind, Dependence, Region, Statement, Storage};
use crate::legality::{line_of, pct, Change, Requirement};
use crate::reduction::Reductions;
use crate::{LoopInfo, Metrics};
use std::collections::{BTreeMap, BTreeSet};

/// What a loop carries, from the distances: the dependences it surely carries, and those it
/// may.
struct Carried {
    sure: Vec<usize>,
    maybe: Vec<usize>,
}

/// The answers of every loop of `region` that holds a statement, outermost loops first.
/// `why` says, for each, why it was answered this way (the isl analysis did not answer it).
pub(crate) fn loop_answers(region: &Region, why: &str) -> Vec<LoopInfo> {
    let distances = Distances::new(region);
    let reductions = Reductions::direct(region, &distances);
    let index = Index::with_roots(region);
    let mut out = Vec::new();
    for (l, lp) in region.loops.iter().enumerate() {
        let inside = region.statements_in(l);
        let Some(depth) = inside
            .first()
            .and_then(|s| s.loops.iter().position(|&x| x == l))
        else {
            continue;
        };
        let members = index.members(&inside);
        let mut within = index.deps_within(&members);
        // As the isl analysis leaves them out (`Ctx::parallel`): a register that holds one
        // value along the loop, and what an OpenMP loop's threads keep of their own (memory,
        // and registers but for the values they pass between iterations).
        let omp = region.omp_loops.get(&lp.id);
        within.retain(|&i| {
            let d = &region.dependences[i];
            let own = omp.is_some_and(|o| {
                o.keeps_to_itself(d, region)
                    || (d.kind != DepKind::Flow && matches!(d.storage, Storage::Register { .. }))
            });
            !d.invariant_in.contains(&lp.id) && !own
        });
        let carried = carried_by(&distances, &within, depth);
        let permutable = within
            .iter()
            .all(|&i| distances.nonnegative_up_to(i, depth) == Tri::Yes)
            && crate::compared::permutable(region, l);
        let verdict = verdict(region, l, &index, &members, &carried, &reductions);
        let mut kinds: BTreeSet<&'static str> = BTreeSet::new();
        for &i in &carried.sure {
            if counts(&region.dependences[i]) {
                kinds.insert(kind_word(region.dependences[i].kind));
            }
        }
        if crate::compared::surely_carried(region, l) {
            kinds.insert(kind_word(DepKind::Flow));
        }
        let after = match &verdict {
            Ok(needs) => super::loops::conditions_of(needs),
            Err(_) => Vec::new(),
        };
        let openmp = super::openmp::check(region, l, verdict.as_deref().map_err(String::as_str));
        let (parallel, reduction, text) = match verdict {
            Ok(needs) => {
                let reduced = needs
                    .iter()
                    .any(|n| matches!(n.change, Change::Reduction { .. }));
                let what = if needs.is_empty() {
                    "no dependence is carried by it".to_string()
                } else {
                    format!("parallel after {}", super::text::phrases(&needs))
                };
                (!reduced, reduced, what)
            }
            Err(why_serial) => (false, false, why_serial),
        };
        out.push(LoopInfo {
            id: lp.id.clone(),
            label: lp.label.clone(),
            depth,
            parallel,
            reduction,
            permutable,
            stride01_percent: stride01_share(&inside, l),
            ops: inside.iter().map(|s| s.ops).sum(),
            why_not: Some(format!("from its dependences alone ({why}): {text}")),
            carries: kinds.iter().map(|k| k.to_string()).collect(),
            by_distances: true,
            parallel_after: after,
            openmp,
        });
    }
    out
}

/// The share of the accesses of `inside` (weighted by executions) that are stride 0 or 1
/// along loop `l`.
pub(crate) fn stride01_share(inside: &[&Statement], l: usize) -> f64 {
    let (mut good, mut all) = (0u64, 0u64);
    for s in inside {
        let d = s.loops.iter().position(|&x| x == l).unwrap_or(0);
        for a in &s.accesses {
            all += s.ops;
            if a.stride01(d) {
                good += s.ops;
            }
        }
    }
    pct(good, all)
}

/// The kinds of dependence loop `l` (at `depth`) surely carries (anti and output ones
/// through registers left out: see [`counts`]), from the distances alone:
/// for the loop tables of regions isl did answer.
pub(crate) fn carried_kinds(
    region: &Region,
    distances: &Distances,
    l: usize,
    depth: usize,
) -> Vec<String> {
    let index = Index::new(region);
    let within = index.deps_within(&index.members(&region.statements_in(l)));
    let mut kinds: BTreeSet<&'static str> = BTreeSet::new();
    for i in within {
        if distances.carried_at(i, depth) == Tri::Yes && counts(&region.dependences[i]) {
            kinds.insert(kind_word(region.dependences[i].kind));
        }
    }
    if crate::compared::surely_carried(region, l) {
        kinds.insert(kind_word(DepKind::Flow));
    }
    kinds.iter().map(|k| k.to_string()).collect()
}

/// Whether a carried dependence is one of the program's: not the reuse of a register for
/// another value (each thread has its own registers; the compiler chose to reuse it).
fn counts(d: &Dependence) -> bool {
    d.kind == DepKind::Flow || !matches!(d.storage, Storage::Register { .. })
}

fn kind_word(k: DepKind) -> &'static str {
    match k {
        DepKind::Flow => "flow",
        DepKind::Anti => "anti",
        DepKind::Output => "output",
    }
}

/// The region's statements and dependences numbered for the per-loop scans: a statement's
/// name as a number, each dependence's ends and storage root (myocyte's region has 35 loops,
/// 35,000 statements and 96,000 dependences: comparing names per loop, and naming roots per
/// dependence and storage, took seconds).
struct Index<'a> {
    names: std::collections::HashMap<&'a str, usize>,
    /// Per dependence: its source's and its sink's name numbers.
    ends: Vec<(Option<usize>, Option<usize>)>,
    /// Per dependence: its storage's root.
    roots: Vec<String>,
    /// Per live-in and live-out value: its statement's name number and storage root.
    borders: Vec<(Option<usize>, String)>,
}

impl<'a> Index<'a> {
    /// Names and ends only: enough for [`Index::deps_within`].
    fn new(region: &'a Region) -> Index<'a> {
        let mut names = std::collections::HashMap::new();
        for s in &region.statements {
            let next = names.len();
            names.entry(s.name.as_str()).or_insert(next);
        }
        let ends = region
            .dependences
            .iter()
            .map(|d| {
                (
                    names.get(d.source.as_str()).copied(),
                    names.get(d.sink.as_str()).copied(),
                )
            })
            .collect();
        Index {
            names,
            ends,
            roots: Vec::new(),
            borders: Vec::new(),
        }
    }

    /// With the storage roots, for [`verdict`].
    fn with_roots(region: &'a Region) -> Index<'a> {
        let mut index = Index::new(region);
        index.roots = region
            .dependences
            .iter()
            .map(|d| d.storage.root())
            .collect();
        index.borders = region
            .live_in
            .iter()
            .chain(&region.live_out)
            .map(|b| (index.names.get(b.stmt.as_str()).copied(), b.storage.root()))
            .collect();
        index
    }

    /// Per name number: whether a statement of `inside` has the name.
    fn members(&self, inside: &[&Statement]) -> Vec<bool> {
        let mut members = vec![false; self.names.len()];
        for s in inside {
            if let Some(&i) = self.names.get(s.name.as_str()) {
                members[i] = true;
            }
        }
        members
    }

    /// Dependences (indices) between statements of `members`.
    fn deps_within(&self, members: &[bool]) -> Vec<usize> {
        let member = |n: Option<usize>| n.is_some_and(|i| members[i]);
        (0..self.ends.len())
            .filter(|&i| member(self.ends[i].0) && member(self.ends[i].1))
            .collect()
    }
}

fn carried_by(distances: &Distances, within: &[usize], depth: usize) -> Carried {
    let mut c = Carried {
        sure: Vec::new(),
        maybe: Vec::new(),
    };
    for &i in within {
        match distances.carried_at(i, depth) {
            Tri::Yes => c.sure.push(i),
            Tri::Maybe => c.maybe.push(i),
            Tri::No => {}
        }
    }
    c
}

/// Whether loop `l` may run in parallel, and after which storage changes; `Err`: why not,
/// in words.
fn verdict(
    region: &Region,
    l: usize,
    index: &Index<'_>,
    members: &[bool],
    carried: &Carried,
    reductions: &Reductions<'_>,
) -> Result<Vec<Requirement>, String> {
    let deps = &region.dependences;
    let id = &region.loops[l].id;
    if let Some(v) = region
        .shared_variables
        .iter()
        .find(|v| v.merged.iter().any(|(loop_id, _)| loop_id == id))
    {
        return Err(format!(
            "the compiler merged it with an enclosing loop (its code assigns `{}`)",
            v.name
        ));
    }
    if let Some(at) = region.early_exits.get(id) {
        return Err(crate::legality::early_exit(at));
    }
    // By storage: what the loop carries (surely or maybe) through it.
    let mut by_storage: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for &i in carried.sure.iter().chain(&carried.maybe) {
        by_storage
            .entry(index.roots[i].clone())
            .or_default()
            .push(i);
    }
    let mut needs: Vec<Requirement> = Vec::new();
    for (root, idx) in &by_storage {
        let first = &deps[idx[0]];
        let may = if idx.iter().all(|i| carried.maybe.contains(i)) {
            "may carry (its distances do not tell)"
        } else {
            "carries"
        };
        let flows: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| deps[i].kind == DepKind::Flow)
            .collect();
        if !flows.is_empty() {
            // A loop-carried flow is serial unless it is a reduction.
            match reductions.of(l, root).ok().flatten() {
                Some(r) => {
                    needs.extend(r.requirements(region));
                    continue;
                }
                None => return Err(describe(region, may, flows[0])),
            }
        }
        match &first.storage {
            Storage::Effect { .. } | Storage::Array { .. } => {
                return Err(describe(region, may, idx[0]));
            }
            Storage::Register { .. } | Storage::Scalar { .. } => {
                // Renamed per thread, unless a value crosses the loop's border.
                if crosses(region, index, root, members) {
                    return Err(format!(
                        "{}, and its value also crosses the loop's border: privatizing it is \
                         checked by isl only",
                        describe(region, may, idx[0]),
                    ));
                }
                if matches!(first.storage, Storage::Scalar { .. }) {
                    needs.push(Requirement {
                        change: Change::Privatize,
                        storage: first.storage.describe(),
                        lines: idx.iter().map(|&i| writer_line(region, i)).collect(),
                        step: None,
                    });
                }
            }
        }
    }
    crate::accumulators::name_register_reductions(region, id, &mut needs);
    // Source variables the loop assigns, declared outside it: private per thread.
    for v in &region.shared_variables {
        let reduced = needs.iter().any(|n| {
            matches!(n.change, Change::Reduction { .. })
                && (n.storage.contains(&format!("`{}`", v.name))
                    || n.lines.iter().any(|x| v.lines.contains(x)))
        });
        if !v.loops.contains(id) || reduced {
            continue;
        }
        if let Some(r) = crate::accumulators::folded_accumulation(v, id) {
            needs.push(r);
        } else {
            needs.push(Requirement {
                change: Change::Privatize,
                storage: v.describe(),
                lines: v.lines.clone(),
                step: None,
            });
        }
    }
    // A value an earlier iteration computed and this one only compares.
    if let Some(why) = crate::compared::blocking(region, l, true) {
        return Err(why);
    }
    needs.sort();
    needs.dedup();
    Ok(needs)
}

/// Whether a value of the storage `root` flows into the loop (its statements' name numbers
/// `members`) from outside it, or out of it to a reader outside, in the region or across
/// its border.
fn crosses(region: &Region, index: &Index<'_>, root: &str, members: &[bool]) -> bool {
    let member = |n: Option<usize>| n.is_some_and(|i| members[i]);
    let deps = region.dependences.iter().enumerate().any(|(i, d)| {
        let (source, sink) = index.ends[i];
        d.kind == DepKind::Flow && index.roots[i] == root && member(source) != member(sink)
    });
    let borders = index
        .borders
        .iter()
        .any(|(stmt, r)| r == root && member(*stmt));
    deps || borders
}

/// The line of the write of dependence `i` (an anti dependence's sink, the others' source).
fn writer_line(region: &Region, i: usize) -> String {
    let d = &region.dependences[i];
    let w = if d.kind == DepKind::Anti {
        &d.sink
    } else {
        &d.source
    };
    line_of(region, w)
}

/// "it carries a flow dependence through `s` from k.c:12 to k.c:14", short: no relation.
fn describe(region: &Region, verb: &str, i: usize) -> String {
    let d = &region.dependences[i];
    let kind = match d.kind {
        DepKind::Flow => "a flow",
        DepKind::Anti => "an anti",
        DepKind::Output => "an output",
    };
    format!(
        "it {verb} {kind} dependence through {} from {} to {}",
        d.storage.describe(),
        line_of(region, &d.source),
        line_of(region, &d.sink)
    )
}

/// The region's metrics from the loops' own answers (no schedule): parallel and SIMD
/// operations from the loops answered parallel (or a reduction), reuse along the hottest
/// statement's innermost loop (Preuse the same: no interchange was checked), and the tile
/// depth of the permutable band the program's own loops form, outermost first, along the
/// hottest statement's loops.
pub(crate) fn metrics(region: &Region, loops: &[LoopInfo], component_share: f64) -> Metrics {
    let total: u64 = region.statements.iter().map(|s| s.ops).sum();
    let ops_where = |f: &dyn Fn(&Statement) -> bool| -> u64 {
        region
            .statements
            .iter()
            .filter(|s| f(s))
            .map(|s| s.ops)
            .sum()
    };
    let answer = |l: usize| loops.iter().find(|i| i.id == region.loops[l].id);
    let parallel = |l: usize| answer(l).is_some_and(|i| i.parallel || i.reduction);
    let chain: Vec<usize> = region
        .statements
        .iter()
        .max_by_key(|s| s.ops)
        .map(|s| s.loops.clone())
        .unwrap_or_default();
    let band = chain
        .iter()
        .take_while(|&&l| answer(l).is_some_and(|i| i.permutable))
        .count();
    let reuse = chain.last().map_or(0.0, |&inner| {
        let hot: Vec<&Statement> = region
            .statements
            .iter()
            .filter(|s| s.loops.last() == Some(&inner))
            .collect();
        stride01_share(&hot, inner)
    });
    let mut outer: BTreeMap<usize, u64> = BTreeMap::new();
    for s in &region.statements {
        if let Some(&l) = s.loops.first() {
            *outer.entry(l).or_default() += s.ops;
        }
    }
    let components = outer
        .values()
        .filter(|&&ops| pct(ops, total) > component_share)
        .count();
    Metrics {
        mem_ops_percent: pct(ops_where(&|s| !s.accesses.is_empty()), total),
        fp_ops_percent: pct(ops_where(&|s| s.fp), total),
        parallel_ops_percent: pct(ops_where(&|s| s.loops.iter().any(|&l| parallel(l))), total),
        simd_ops_percent: pct(
            ops_where(&|s| s.loops.last().is_some_and(|&l| parallel(l))),
            total,
        ),
        reuse_percent: reuse,
        preuse_percent: reuse,
        tile_depth: if band >= 2 { band } else { 0 },
        tile_ops_percent: if band >= 2 {
            pct(ops_where(&|s| s.loops.contains(&chain[band - 1])), total)
        } else {
            0.0
        },
        components_before: components,
        components_after: components,
        skew: false,
        loop_depth: region.loop_depth(),
    }
}
