//! Which loops of the chosen order may run in parallel: the outermost one whose iterations are
//! independent once the storage changes it names are made (reductions, privatizations), and
//! whether the innermost one vectorizes.

use super::interchange::{permuted, Interchanged};
use super::text::{parallel_text, phrases, split_reductions, vectorize_text};
use super::Nest;
use crate::legality::{schedule_map, Change, Ctx, Requirement, Verdict};
use crate::{Error, Feedback, Rating, Suggestion, SuggestionKind};
use std::collections::BTreeMap;

/// Which loops of the chosen order may run in parallel.
pub(super) struct ParallelLevels {
    /// Per level of the order.
    pub(super) levels: Vec<bool>,
    /// The outermost loop that may not, and why.
    pub(super) first_blocked: Option<(usize, String)>,
}

/// Parallelism in the chosen order: the outermost loop whose iterations are independent once
/// the storage changes it names are made; and vectorization of the innermost.
pub(super) fn parallel_advice(
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
    // An interchange that needs a value the compiler keeps in a register expanded along a
    // loop (deriche's `y2[i][j]` kept for the next iteration's `yp1`, symm's lines 98 and
    // 101) asks for a source change no source variable names: which variable, or which
    // expression, to expand is the compiler's choice, not a line of the source. A directive
    // printed with it would read as complete; none is (issue 36).
    let unnamed = order != chain
        && ic
            .needs
            .iter()
            .any(|r| r.change == Change::Expand && r.storage.starts_with("register "));
    let no_directive = |what: &str, needs: &[Requirement]| -> String {
        // A register's expansion names the line that computes its value (the report's text
        // says "the value computed at deriche.c:142" for "register xmm3 (at deriche.c:142)").
        let mut all: Vec<Requirement> = after_interchange(needs)
            .into_iter()
            .map(|mut r| {
                if r.change == Change::Expand && r.storage.starts_with("register ") {
                    if let Some((reg, along)) = r.storage.split_once(" along ") {
                        let at = if r.lines.is_empty() {
                            String::new()
                        } else {
                            format!(" (at {})", r.lines.join(", "))
                        };
                        r.storage = format!("{reg}{at} along {along}");
                        r.lines.clear();
                    }
                }
                r
            })
            .collect();
        // Two registers holding values of one line read the same.
        let mut seen = std::collections::BTreeSet::new();
        all.retain(|r| {
            let key = match r.storage.split_once(" (at ") {
                Some((reg, rest)) if reg.starts_with("register ") => rest.to_string(),
                _ => r.storage.clone(),
            };
            seen.insert((r.change, key))
        });
        format!(
            "{what} once the loops are interchanged as advised, after {}. No directive is printed: the interchange expands values the compiler keeps in registers, which no source variable names, so the source change cannot be named.",
            phrases(&all)
        )
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
        let mut text = if unnamed && !standalone {
            no_directive(
                &format!("Loop {} can run in parallel{inside}", nest.label(l)),
                needs,
            )
        } else if region.language == symbols::Language::Rust {
            super::rayon::parallel_text(region, l, &nest.label(l), &inside, needs)
        } else {
            parallel_text(&nest.label(l), &inside, needs, plain)
        };
        if !standalone && !unnamed {
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
                text: if unnamed {
                    no_directive(
                        &format!(
                            "Loop {} vectorizes ({share:.0}% of its accesses stride 0 or 1)",
                            nest.label(inner)
                        ),
                        needs,
                    )
                } else if region.language == symbols::Language::Rust {
                    super::rayon::vectorize_text(&nest.label(inner), needs, share) + holds_after
                } else {
                    vectorize_text(&nest.label(inner), needs, share) + holds_after
                },
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
