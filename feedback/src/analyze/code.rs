//! The loop trees shown with the feedback: the region as written, each loop with its
//! properties; the hottest nest in the advised order, each loop with what the suggestions say
//! of it; and, when isl's schedule skews, the tree of that schedule.

use super::interchange::layout;
use super::schedule::describe_row;
use super::Nest;
use crate::input::{Region, Statement};
use crate::islx::Tree;
use crate::{Feedback, LoopInfo, SuggestionKind};
use std::fmt::Write as _;

/// The nest's tree in the advised order, each loop flagged with what the suggestions say of
/// it (parallel, tiled, vectorized).
pub(super) fn ast_advised(nest: &Nest<'_>, order: &[usize], fb: &Feedback) -> String {
    let region = nest.region;
    // The best-ranked suggestion of each kind: one parallel loop per nest, as in the code.
    let loops_of = |kind: SuggestionKind| -> Vec<String> {
        fb.suggestions
            .iter()
            .find(|s| s.kind == kind)
            .map(|s| s.loops.clone())
            .unwrap_or_default()
    };
    let vectorized = loops_of(SuggestionKind::Vectorize);
    let parallel_suggested = loops_of(SuggestionKind::Parallelize)
        .into_iter()
        .take(1)
        .collect::<Vec<_>>();
    let tiled = loops_of(SuggestionKind::Tile);
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
pub(super) fn ast_before(region: &Region, loops: &[LoopInfo]) -> String {
    let f = |l: usize| {
        loops
            .iter()
            .find(|i| i.id == region.loops[l].id)
            .map_or(String::new(), flags)
    };
    ast_in_order(region, &[], &[], &f)
}

/// The loop structure after the schedule isl found.
pub(super) fn ast_after(region: &Region, tree: &Tree, loops: &[LoopInfo]) -> String {
    let mut out = String::new();
    render(
        region,
        tree,
        (loops, false),
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

/// `parallel_above`: a loop around this subtree is already the nest's parallel loop (the
/// outermost coincident one): the advice runs one parallel loop per nest, not nested ones.
fn render(
    region: &Region,
    t: &Tree,
    (loops, parallel_above): (&[LoopInfo], bool),
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
            let mut parallel_above = parallel_above;
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
                if m.coincident && !parallel_above {
                    f.push("parallel");
                    parallel_above = true;
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
            render(region, child, (loops, parallel_above), d, out, stmts);
        }
        Tree::Sequence(children) => {
            for (names, sub) in children {
                render(region, sub, (loops, parallel_above), depth, out, names);
            }
        }
        Tree::Leaf => {
            for s in region.statements.iter().filter(|s| stmts.contains(&s.name)) {
                let _ = writeln!(out, "{pad}{} {}  ({} ops)", s.name, s.label, s.ops);
            }
        }
    }
}
