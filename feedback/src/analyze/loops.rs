//! Each loop of the program as written: its properties (`fb.loops`) and whether it may run in
//! parallel (the verdicts the parallel advice starts from); for every loop the advice on the
//! hottest nest leaves out, a suggestion of its own or why there is none; and the advice
//! withheld on loops the compiler merged with an enclosing one.

use super::direct::{carried_kinds, stride01_share};
use super::text::{add_why_not, parallel_text, split_reductions};
use crate::input::Region;
use crate::islx;
use crate::legality::{Change, Ctx, Requirement, Verdict};
use crate::{Error, Feedback, LoopInfo, Rating, Suggestion, SuggestionKind};
use isl_rs::UnionMap;
use std::collections::{BTreeMap, BTreeSet};

/// Each loop's properties in the program as written (`fb.loops`), and its verdict, kept for
/// the parallel advice.
pub(super) fn loop_verdicts(
    cx: &Ctx<'_>,
    original: &UnionMap,
    fb: &mut Feedback,
) -> Result<BTreeMap<usize, Verdict>, Error> {
    let region = cx.region;
    let depth_of = |l: usize| -> usize {
        region
            .statements
            .iter()
            .find_map(|s| s.loops.iter().position(|&x| x == l))
            .unwrap_or(0)
    };
    let mut own: BTreeMap<usize, Verdict> = BTreeMap::new();
    for (l, lp) in region.loops.iter().enumerate() {
        let inside = region.statements_in(l);
        if inside.is_empty() {
            continue;
        }
        let depth = depth_of(l);
        let within: Vec<usize> = cx
            .deps_within(l)
            .into_iter()
            .filter(|&i| region.dependences[i].binding())
            .collect();
        // Each loop on a budget of its own: one that stops at it is left to the answers of
        // its distances (`direct`), and the next loop is asked.
        islx::fresh_budget(cx.isl);
        let answered = cx
            .parallel_as_written(l, depth, original)
            .and_then(|verdict| Ok((verdict, cx.first_negative(&within, original, depth)?)));
        let (verdict, negative) = match answered {
            Ok(v) => v,
            Err(Error::TooComplex) => continue,
            Err(e) => return Err(e),
        };
        own.insert(l, verdict.clone());
        fb.loops.push(LoopInfo {
            id: lp.id.clone(),
            label: lp.label.clone(),
            depth,
            parallel: matches!(&verdict, Verdict::Legal(n) if split_reductions(n).0.is_empty()),
            reduction: matches!(&verdict, Verdict::Legal(n) if !split_reductions(n).0.is_empty()),
            permutable: negative.is_none() && crate::compared::permutable(region, l),
            stride01_percent: stride01_share(&inside, l),
            ops: inside.iter().map(|s| s.ops).sum(),
            why_not: None,
            carries: carried_kinds(region, cx.distances(), l, depth),
            by_distances: false,
            parallel_after: conditions(&verdict),
            openmp: super::openmp::check(
                region,
                l,
                match &verdict {
                    Verdict::Legal(needs) => Ok(needs),
                    Verdict::Blocked(why) => Err(why),
                },
            ),
        });
    }
    Ok(own)
}

/// The source changes (besides clauses) a legal verdict needs, for the loop table's flag.
pub(super) fn conditions(verdict: &Verdict) -> Vec<String> {
    match verdict {
        Verdict::Legal(needs) => conditions_of(needs),
        Verdict::Blocked(_) => Vec::new(),
    }
}

/// The source changes (besides clauses) among `needs`, once each, sorted.
pub(super) fn conditions_of(needs: &[Requirement]) -> Vec<String> {
    let mut out: Vec<String> = needs
        .iter()
        .filter_map(|r| r.change.condition())
        .map(str::to_string)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Advice naming a loop the compiler merged with an enclosing one is withheld, as its
/// parallelization is ([`Ctx::parallel`]): the line the loop is named by is an inner loop's,
/// so the advice would be applied to the wrong source loop (trmm's `init_array` at -O3).
pub(super) fn withhold_on_merged_loops(region: &Region, fb: &mut Feedback) {
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

/// Parallel or vector advice on a loop nested directly in a loop named by the same source
/// line is withheld: the compiler made two loops of one source loop (hotspot's line 81, its
/// iterations split by a test on the counter), the pragma would go on that line, over both,
/// and what the inner loop's verdict says does not hold for the source loop.
pub(super) fn withhold_on_split_loops(region: &Region, fb: &mut Feedback) {
    let mut split: BTreeSet<usize> = BTreeSet::new();
    for s in &region.statements {
        for w in s.loops.windows(2) {
            let (outer, inner) = (w[0], w[1]);
            if region.loops[outer].label == region.loops[inner].label {
                split.insert(inner);
            }
        }
    }
    for l in split {
        let id = &region.loops[l].id;
        let before = fb.suggestions.len();
        fb.suggestions.retain(|s| {
            !(matches!(
                s.kind,
                SuggestionKind::Parallelize | SuggestionKind::Vectorize
            ) && s.loops.contains(id))
        });
        if fb.suggestions.len() < before {
            let label = &region.loops[l].label;
            let why = format!(
                "parallel advice on loop {label} ({id}) withheld: the compiler made two nested loops of the source loop at {label}, and a pragma there would cover both"
            );
            if let Some(info) = fb.loops.iter_mut().find(|i| &i.id == id) {
                info.why_not.get_or_insert_with(|| why.clone());
            }
            add_why_not(fb, why);
        }
    }
}

/// A source variable stepped by a loop's iterations (`memcnt += 4`) folds into an evolution of
/// the counters, so no dependence carries it; but the values it steps through follow the
/// iterations' order. Advice that reorders that loop's iterations (parallel, vectorized,
/// interchanged, tiled, skewed, fused, distributed) holds only once the variable is computed
/// from the counters: each such suggestion requires it and says so.
pub(super) fn require_closed_forms(region: &Region, fb: &mut Feedback) {
    use SuggestionKind as K;
    for s in &mut fb.suggestions {
        if !matches!(
            s.kind,
            K::Interchange
                | K::Skew
                | K::Tile
                | K::Parallelize
                | K::Vectorize
                | K::Fuse
                | K::Distribute
        ) {
            continue;
        }
        for v in &region.shared_variables {
            let lines: Vec<String> = v
                .steps
                .iter()
                .filter(|(l, _)| s.loops.contains(l))
                .map(|(_, line)| line.clone())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let quoted = format!("`{}`", v.name);
            let has = s.requires.iter().any(|r| {
                matches!(r.change, Change::ClosedForm | Change::Linear)
                    && r.storage.contains(&quoted)
            });
            // An accumulation the suggestion reduces is the reduction's (named, or by line
            // when the compiler left it no name).
            let reduced = s.requires.iter().any(|r| {
                matches!(r.change, Change::Reduction { .. })
                    && (r.storage.contains(&quoted) || r.lines.iter().any(|x| v.lines.contains(x)))
            });
            if lines.is_empty() || has || reduced {
                continue;
            }
            s.text.push_str(&format!(
                " First compute {quoted} from the loop counters at the top of each iteration instead of stepping it (at {}): the new order would step it through other values.",
                lines.join(", ")
            ));
            s.requires.push(Requirement {
                change: Change::ClosedForm,
                storage: quoted,
                lines,
                step: None,
            });
        }
    }
}

/// Every loop of the region gets a suggestion that names it or a reason why none does. A
/// loop off the hottest nest that may run in parallel, inside no loop suggested parallel, gets
/// its own parallelize suggestion (in the program's order, with its own storage changes);
/// the others say what blocks them.
pub(super) fn answer_every_loop(
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
                        text: if region.language == symbols::Language::Rust {
                            super::rayon::parallel_text(region, l, &label(l), &inside, needs)
                        } else {
                            parallel_text(&label(l), &inside, needs, None)
                        },
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
