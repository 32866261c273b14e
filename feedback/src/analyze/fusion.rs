//! Whether the outermost loops are fused or distributed: the nests with a real share of the
//! work before and after isl's schedule; a distribution when isl's schedule has more of them
//! (each doing work the program sees), otherwise the producer-consumer fusion of two
//! outermost loops, checked against the dependences.

use super::schedule::{from_schedule, Scheduled};
use super::text::add_why_not;
use super::Nest;
use crate::input::{DepKind, Polyhedra, Region, Storage};
use crate::islx::{self, Tree};
use crate::legality::{pct, schedule_map, Ctx};
use crate::{Error, Feedback, Options, SuggestionKind};
use std::collections::{BTreeMap, BTreeSet};

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
pub(super) fn fusion(
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
            // A comparison in the second nest of a value the first computes reads, fused, the
            // value of the same iteration only: its relation is not checked, so no fusion.
            let compared = region.compared.iter().find(|c| {
                c.loops.first() == Some(&outer[1])
                    && region
                        .statements
                        .iter()
                        .any(|s| s.name == c.source && s.loops.first() == Some(&outer[0]))
            });
            let violated = match compared {
                Some(c) => Err(format!(
                    "fusing {named} could run the comparison at {} before the value it reads from {} is computed",
                    c.line, c.source_line
                )),
                None => Ok(cx.first_violated(binding, &fused)?),
            };
            match violated {
                Err(why) => {
                    fb.why_not.get_or_insert(why);
                }
                Ok(None) => {
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
                Ok(Some(i)) => {
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
