//! Which regions are analysed: the hottest outermost loops, then pairs of consecutive nests
//! that pass values from one to the other, analysed together for their fusion
//! ([`build_regions`]).

use super::region::build_region;
use super::{Code, Folded2, PipelineError, PipelineOptions, RegionReport};
use crate::input::Storage;
use std::collections::BTreeSet;
use tracer::{DepKind, NodeId, NodeKind, ScheduleTree};

/// The regions of the run: the hottest outermost loops, each built and analysed; then
/// consecutive nests that pass values from one to the other, scheduled together: the fusion
/// isl finds, when legal, goes to the first nest's region. Every region is built before any is
/// analysed, and the folded trace is dropped in between: the analyses need only the regions.
pub(super) fn build_regions(
    analysis: &tracer::Analysis,
    naming: &tracer::Naming<'_>,
    folded: Folded2,
    code: &Code,
    opts: &PipelineOptions,
) -> Result<Vec<RegionReport>, PipelineError> {
    let mut roots = select_regions(&analysis.tree, opts);
    roots.extend(openmp_roots(&analysis.tree, naming, &roots));
    let build = |i: usize, roots: &[NodeId], opts: &PipelineOptions| {
        build_region(i, roots, &analysis.tree, naming, &folded, code, opts)
    };
    let prepared = roots
        .iter()
        .enumerate()
        .take_while(|_| !opts.feedback.cancelled())
        .map(|(i, &root)| build(i, &[root], opts))
        .collect::<Result<Vec<_>, _>>()?;
    // Nests of different depths do not fuse into one nest: heat-3d's time-step loop (four
    // deep) with its initialization or its printing (three) cost 15 s of the kernel's
    // analysis for no fusion. Same-depth pairs stay, a nest that prints included (an in-place
    // shift fused with the loop printing its results).
    let depth = |root: NodeId| {
        roots
            .iter()
            .zip(&prepared)
            .find(|(&r, _)| r == root)
            .map(|(_, p)| p.input().loop_depth())
    };
    let pairs: Vec<(NodeId, NodeId)> = fusion_pairs(&analysis.tree, &roots, &folded)
        .into_iter()
        .filter(|&(a, b)| depth(a).is_some() && depth(a) == depth(b))
        .collect();
    // The fused group is a second look at regions already answered: a share of the budget.
    let group_opts = PipelineOptions {
        feedback: crate::Options {
            isl_max_seconds: opts.feedback.isl_max_seconds * FUSION_SHARE,
            isl_max_operations: (opts.feedback.isl_max_operations as f64 * FUSION_SHARE) as u64,
            ..opts.feedback.clone()
        },
        ..opts.clone()
    };
    let groups = pairs
        .into_iter()
        .map(|(a, b)| Ok((a, b, build(prepared.len(), &[a, b], &group_opts)?)))
        .collect::<Result<Vec<_>, PipelineError>>()?;
    drop(folded);
    (opts.feedback.release_memory)();
    let mut regions = Vec::with_capacity(prepared.len());
    for p in prepared {
        // Once cancelled, the regions analysed so far are what is reported.
        if opts.feedback.cancelled() {
            break;
        }
        regions.push(p.analyze(opts));
    }
    for (a, b, group) in groups {
        if opts.feedback.cancelled() {
            break;
        }
        let group = group.analyze(&group_opts);
        let fuse = group
            .feedback
            .suggestions
            .iter()
            .find(|s| s.kind == crate::SuggestionKind::Fuse);
        if std::env::var_os("POLYPROF_DEBUG_FUSION").is_some() {
            eprintln!(
                "fusion group {a}+{b}: {:?}\n{:?}\nwhy not: {:?}",
                group.feedback.schedule,
                group
                    .feedback
                    .suggestions
                    .iter()
                    .map(|s| s.kind)
                    .collect::<Vec<_>>(),
                group.feedback.why_not
            );
            for d in &group.input.dependences {
                eprintln!(
                    "  {} -> {} {:?} {:?} exact {} {}",
                    d.source,
                    d.sink,
                    d.kind,
                    d.storage,
                    d.exact,
                    d.relation.isl_text()
                );
            }
        }
        if let Some(fuse) = fuse {
            let mut fuse = fuse.clone();
            fuse.text = format!(
                "{} {}",
                fuse.text,
                passed_values(&group, a, b, &analysis.tree)
            );
            if let Some(r) = regions.iter_mut().find(|r| r.root == a) {
                r.feedback.suggestions.push(fuse);
                // Ranked among the region's own advice, not the group's.
                crate::gain::rate(&r.input, &mut r.feedback, &opts.feedback.gain);
            }
        }
    }
    Ok(regions)
}

/// The share of a region's isl budget that the analysis of two nests for their fusion gets.
const FUSION_SHARE: f64 = 0.4;

/// Pairs of region roots that are consecutive loops of one parent (no other loop between them
/// in the order they first ran) where the first produces values the second reads.
fn fusion_pairs(tree: &ScheduleTree, roots: &[NodeId], folded: &Folded2) -> Vec<(NodeId, NodeId)> {
    let is_loop = |n: NodeId| matches!(tree.nodes[n].kind, NodeKind::Loop { .. });
    let mut pairs = Vec::new();
    for &a in roots {
        let Some(parent) = tree.nodes[a].parent else {
            continue;
        };
        // Nodes are numbered as first entered: the next loop child of the parent.
        let next =
            (a + 1..tree.nodes.len()).find(|&n| tree.nodes[n].parent == Some(parent) && is_loop(n));
        let Some(b) = next.filter(|b| roots.contains(b)) else {
            continue;
        };
        let feeds = folded.deps.iter().any(|((cons, prod, kind, _, _), ..)| {
            *kind == DepKind::Flow
                && tree.is_within(prod.context, a)
                && tree.is_within(cons.context, b)
        });
        if is_loop(a) && feeds {
            pairs.push((a, b));
        }
    }
    pairs
}

/// How much data the second nest of a fused pair reads from the first: "About 32768 bytes of
/// `tmp` pass from one nest to the other; fused, each iteration of the outer loop reads the
/// 1024 bytes it wrote, while they are still in cache."
fn passed_values(group: &RegionReport, a: NodeId, b: NodeId, tree: &ScheduleTree) -> String {
    let input = &group.input;
    let stmt_in = |name: &str, root: NodeId| {
        group
            .statements
            .iter()
            .find(|s| s.name == name)
            .is_some_and(|s| tree.is_within(s.context, root))
    };
    let mut arrays: BTreeSet<String> = BTreeSet::new();
    let mut bytes: u64 = 0;
    for d in &input.dependences {
        if d.kind != DepKind::Flow || !stmt_in(&d.source, a) || !stmt_in(&d.sink, b) {
            continue;
        }
        if let Storage::Array { name } | Storage::Scalar { name, .. } = &d.storage {
            arrays.insert(name.clone());
        }
        // The distinct elements the producer writes: its trips along the dimensions its
        // address moves with (a store in a reduction loop rewrites one element).
        if let Some(p) = input.statements.iter().find(|s| s.name == d.source) {
            for w in p.accesses.iter().filter(|x| x.write) {
                let elements: Option<u64> = w
                    .strides
                    .iter()
                    .zip(&p.loops)
                    .filter(|(st, _)| **st != Some(0))
                    .map(|(_, &l)| input.trips.get(l).copied().flatten())
                    .product();
                if let Some(n) = elements {
                    bytes = bytes.max(n * u64::from(w.size));
                }
            }
        }
    }
    let outer = input.statements.iter().find_map(|s| {
        let l = *s.loops.first()?;
        input.trips.get(l).copied().flatten()
    });
    let per = outer.filter(|&t| t > 0).map(|t| bytes / t);
    let what = if arrays.is_empty() {
        "values".to_string()
    } else {
        arrays.into_iter().collect::<Vec<_>>().join(", ")
    };
    match per {
        Some(per) => format!(
            "About {bytes} bytes of {what} pass from one nest to the other; fused, each iteration of the outer loop reads the {per} bytes it wrote, while they are still in cache."
        ),
        None => format!("About {bytes} bytes of {what} pass from one nest to the other."),
    }
}

/// Most regions added for the program's own parallel loops outside the hot ones.
const MAX_OPENMP_REGIONS: usize = 16;

/// Regions for the program's own OpenMP loops that no hot region holds, whatever their share:
/// each is checked against its dependences ([`super::openmp`]). A region is the outermost
/// loop around such a loop, hottest first.
fn openmp_roots(tree: &ScheduleTree, naming: &tracer::Naming<'_>, hot: &[NodeId]) -> Vec<NodeId> {
    let is_loop = |n: NodeId| {
        matches!(
            tree.nodes[n].kind,
            NodeKind::Loop { .. } | NodeKind::Recursion { .. }
        )
    };
    let mut roots: Vec<NodeId> = Vec::new();
    for n in 0..tree.nodes.len() {
        if super::openmp::outlined_body(tree, naming, n).is_none()
            || hot.iter().any(|&h| tree.is_within(n, h))
        {
            continue;
        }
        let mut root = n;
        let mut p = tree.nodes[n].parent;
        while let Some(q) = p {
            if is_loop(q) {
                root = q;
            }
            p = tree.nodes[q].parent;
        }
        if !roots.contains(&root) {
            roots.push(root);
        }
    }
    let totals = tree.total_weights();
    roots.sort_by_key(|&n| std::cmp::Reverse(totals[n]));
    roots.truncate(MAX_OPENMP_REGIONS);
    roots
}

/// Outermost loop (or recursion) nodes holding at least the threshold share, hottest first.
fn select_regions(tree: &ScheduleTree, opts: &PipelineOptions) -> Vec<NodeId> {
    let totals = tree.total_weights();
    let all = totals[ScheduleTree::ROOT].max(1) as f64;
    let is_loop = |n: NodeId| {
        matches!(
            tree.nodes[n].kind,
            NodeKind::Loop { .. } | NodeKind::Recursion { .. }
        )
    };
    let fat = |n: NodeId| 100.0 * totals[n] as f64 / all >= opts.region_threshold;
    let mut roots: Vec<NodeId> = (0..tree.nodes.len())
        .filter(|&n| is_loop(n) && fat(n))
        .filter(|&n| {
            let mut p = tree.nodes[n].parent;
            while let Some(q) = p {
                if is_loop(q) && fat(q) {
                    return false;
                }
                p = tree.nodes[q].parent;
            }
            true
        })
        .collect();
    roots.sort_by_key(|&n| std::cmp::Reverse(totals[n]));
    roots.truncate(opts.max_regions);
    roots
}
