//! Which loop order the advice settles on: the interchange of the hottest nest that makes the
//! most accesses stride 0 or 1, when the dependences allow it, with the storage it needs; and
//! where each statement goes when the loops of a nest are permuted (an imperfect nest is
//! distributed first), which the parallel advice, the trees and the generated code share.

use super::text::phrases;
use super::Nest;
use crate::input::{Polyhedra, Region, Statement};
use crate::legality::{kelly_map, sched_len, schedule_map, Ctx, Requirement};
use crate::{Error, Feedback, Rating, Suggestion, SuggestionKind};
use std::collections::BTreeSet;

/// The loop order the advice settles on, and what its interchange needs.
pub(super) struct Interchanged {
    /// The nest's loops, outermost first: the program's, or the suggested interchange's.
    pub(super) order: Vec<usize>,
    /// Storage the interchange gives copies of its own: its anti and output dependences no
    /// longer constrain the loops.
    pub(super) renamed: BTreeSet<String>,
    /// The storage changes the interchange needs.
    pub(super) needs: Vec<Requirement>,
    /// The stride-0/1 share with the best loop innermost (the paper's Preuse).
    pub(super) preuse: f64,
}

/// Interchange: the loop of a fully permutable nest which, made innermost, gives the most
/// stride-0/1 accesses, when the dependences allow it (with the storage it needs).
pub(super) fn interchange(
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

/// The schedule where the statements running the whole `chain` of loops follow `order`. The
/// first loop that changes place is distributed first: the statements it holds besides the
/// chain's (code before or after the inner loops of an imperfect nest) go to nests of their
/// own, before or after the permuted one, as their position in the program says.
pub(super) fn permuted(region: &Region, chain: &[usize], order: &[usize]) -> Vec<Polyhedra> {
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
    let chain_pos: Vec<u32> = region
        .statements
        .iter()
        .find(|s| member(s))
        .map(|s| s.positions.get(f + 1..).unwrap_or_default().to_vec())
        .unwrap_or_default();
    let groups = region
        .statements
        .iter()
        .map(|s| {
            let shares = s.loops.len() > f && s.loops[..=f] == chain[..=f];
            // Before or after the chain's statements in the program's order, at the first
            // level where they part (code around a deeper inner loop too: Fortran's `c(i,
            // j)` loaded and stored around k, with i made innermost).
            let own = s.positions.get(f + 1..).unwrap_or_default();
            if member(s) || !shares {
                1
            } else if own > &chain_pos[..] {
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
                // The order's levels past this statement's own loops move none of them.
                for (lvl, l) in order.iter().enumerate().take(d.len()) {
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
