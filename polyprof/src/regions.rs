//! Regions in the report's terms: report.json entries, flame-graph styles, and the closing
//! summary.

use feedback::input::plain_storage;
use feedback::legality::Change;
use feedback::pipeline::RegionReport;
use reports::{
    Dependence, FrameStyle, Gain, LoopEntry, Mapping, Reduction, Region, Requirement, Skipped,
    Statement, Suggestion, GREY, HIGHLIGHT,
};
use std::collections::BTreeMap;
use tracer::{Naming, NodeKind, ScheduleTree};

fn loc_json(l: Option<symbols::Loc>) -> Option<reports::Loc> {
    l.map(|l| reports::Loc {
        file: l.file,
        line: l.line,
    })
}

/// The function holding `n`: its nearest function frame.
fn function_of(tree: &ScheduleTree, naming: &Naming<'_>, mut n: usize) -> String {
    loop {
        if let NodeKind::Func { entry, .. } = tree.nodes[n].kind {
            return naming.function(entry);
        }
        match tree.nodes[n].parent {
            Some(p) => n = p,
            None => return "?".to_string(),
        }
    }
}

/// Shares of the run's time (traced instructions plus native calls) per tree node.
pub struct RunShares {
    run: Vec<u64>,
    native: Vec<u64>,
}

impl RunShares {
    pub fn new(tree: &ScheduleTree) -> RunShares {
        RunShares {
            run: tree.total_run_weights(),
            native: tree.total_native_weights(),
        }
    }

    fn all(&self) -> f64 {
        self.run[ScheduleTree::ROOT].max(1) as f64
    }

    /// Share of the run's time spent under node `n`, native calls included.
    pub fn run_percent(&self, n: usize) -> f64 {
        100.0 * self.run[n] as f64 / self.all()
    }

    /// Share of the run's time spent in native calls under node `n`.
    pub fn native_percent(&self, n: usize) -> f64 {
        100.0 * self.native[n] as f64 / self.all()
    }
}

/// What the natively-run calls cost, as the runner measured them: the total and the method
/// (the per-function costs come from the tree: [`native_functions`]).
pub fn native_cost(summary: &ptrace_runner::RunSummary) -> reports::NativeCost {
    let total = summary.native_instructions;
    let all = (summary.instructions + total).max(1) as f64;
    let (instructions_per_second, stop_overhead_ns) = match summary.native_method {
        ptrace_runner::NativeCostMethod::CpuTime {
            instructions_per_second,
            stop_overhead_ns,
            syscall_stop_overhead_ns,
            page_fault_ns,
        } => (
            Some(instructions_per_second),
            Some((stop_overhead_ns, syscall_stop_overhead_ns, page_fault_ns)),
        ),
        _ => (None, None),
    };
    reports::NativeCost {
        method: summary.native_method.as_str().to_string(),
        instructions: total,
        run_percent: 100.0 * total as f64 / all,
        instructions_per_second,
        stop_overhead_ns: stop_overhead_ns.map(|s| s.0),
        syscall_stop_overhead_ns: stop_overhead_ns.map(|s| s.1),
        page_fault_ns: stop_overhead_ns.map(|s| s.2),
        functions: Vec::new(),
    }
}

/// `run`'s cost with the natively-run functions from the tree, costliest first.
///
/// The total and its parts are then shares of one whole, the run's time as the flame graph
/// and the regions' `run_percent` count it (the tree's traced instructions plus what its
/// native calls cost): the total is the sum of the functions' costs, so that every function's
/// share is at most the total's and the shares add up to it. (The runner's total, `run`'s,
/// also counts the calls whose return the tree could not pair with a call.)
pub fn native_functions(run: &reports::NativeCost, tree: &ScheduleTree) -> reports::NativeCost {
    let mut functions: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut tree_total = 0u64;
    for node in &tree.nodes {
        if let NodeKind::Native { name } = node.kind {
            let name = tree
                .native_names
                .get(name as usize)
                .cloned()
                .unwrap_or_default();
            let f = functions.entry(name).or_default();
            f.0 += node.native_calls;
            f.1 = f.1.saturating_add(node.native_weight);
            tree_total = tree_total.saturating_add(node.native_weight);
        }
    }
    if functions.is_empty() {
        // No call reached the tree: the runner's measure stays.
        return run.clone();
    }
    // Shares of the run as the flame graph draws it.
    let run_all =
        (tree.total_weights()[ScheduleTree::ROOT].saturating_add(tree_total)).max(1) as f64;
    let mut functions: Vec<reports::NativeFunction> = functions
        .into_iter()
        .map(|(name, (calls, instructions))| reports::NativeFunction {
            name,
            calls,
            instructions,
            run_percent: 100.0 * instructions as f64 / run_all,
        })
        .collect();
    functions.sort_by_key(|f| std::cmp::Reverse(f.instructions));
    reports::NativeCost {
        instructions: tree_total,
        run_percent: 100.0 * tree_total as f64 / run_all,
        functions,
        ..run.clone()
    }
}

/// One region of report.json.
pub fn region_json(
    r: &RegionReport,
    tree: &ScheduleTree,
    naming: &Naming<'_>,
    shares: &RunShares,
    printer: &mut feedback::poly::Printer,
) -> Region {
    let fb = &r.feedback;
    // The loops along the hottest statement's path, outermost first.
    let main = r.input.statements.iter().max_by_key(|s| s.ops);
    let chain: Vec<usize> = main.map(|s| s.loops.clone()).unwrap_or_default();
    let loop_entry = |li: usize| -> Option<LoopEntry> {
        let id = &r.input.loops[li].id;
        let info = fb.loops.iter().find(|l| &l.id == id)?;
        Some(LoopEntry {
            id: id.clone(),
            location: loc_json(naming.node_location(tree, r.loop_nodes[li])),
            depth: info.depth,
            parallel: info.parallel,
            reduction: info.reduction,
            permutable: info.permutable,
            stride01_percent: info.stride01_percent,
            why_not: info.why_not.as_deref().map(|w| plain_storage(w, &[])),
            carries: info.carries.clone(),
            by_distances: info.by_distances,
            parallel_after: info.parallel_after.clone(),
            openmp: info.openmp.clone(),
        })
    };
    let statements = r
        .statements
        .iter()
        .map(|s| Statement {
            id: s.name.clone(),
            address: naming.loaded().link(s.pc).to_string(),
            location: loc_json(naming.location(s.pc)),
            domain: printer.text(&s.domain),
            ops: s.ops,
            exact: s.exact,
        })
        .collect();
    let dependences = r
        .dependences
        .iter()
        .map(|d| Dependence {
            source: d.source.clone(),
            sink: d.sink.clone(),
            kind: kinds::dep(d.kind),
            through: kinds::through(d.through),
            storage: d.storage.clone(),
            relation: printer.text(&d.relation),
            exact: d.exact,
        })
        .collect();
    let run_share = shares.run_percent(r.root) / 100.0;
    let suggestions = fb
        .suggestions
        .iter()
        .map(|s| suggestion_json(s, &fb.suggestions, run_share))
        .collect();
    let metrics = fb.metrics.clone();
    Region {
        id: r.id.clone(),
        function: function_of(tree, naming, r.root),
        location: loc_json(naming.node_location(tree, r.root)),
        ops_percent: r.ops_percent,
        run_percent: shares.run_percent(r.root),
        native_percent: shares.native_percent(r.root),
        interprocedural: r.interprocedural,
        affine_percent: r.affine_percent,
        loops: chain.iter().filter_map(|&li| loop_entry(li)).collect(),
        all_loops: (0..r.input.loops.len()).filter_map(loop_entry).collect(),
        statements,
        dependences,
        suggestions,
        metrics,
        ast_before: fb.ast_before.clone(),
        ast_after: fb.ast_after.clone(),
        code_before: fb.code_before.clone(),
        code_after: fb.code_after.clone(),
        why_not: fb.why_not.as_deref().map(|w| plain_storage(w, &[])),
        scheduler: fb.schedule_seconds.map(|seconds| reports::SchedulerRun {
            strategy: fb.strategy.map(|s| s.as_str().to_string()),
            seconds,
        }),
        storage_seconds: fb.storage_seconds,
        recommended: fb.recommended.clone().map(|mut r| {
            r.run_estimate = r.estimate.map(|e| amdahl(run_share, e));
            r.text = plain_storage(&r.text, &[]);
            for t in r.needs.iter_mut().chain(r.left_out.iter_mut()) {
                *t = plain_storage(t, &[]);
            }
            for d in r.parallel.iter_mut().chain(r.simd.iter_mut()) {
                d.directive = plain_storage(&d.directive, &[]);
            }
            r
        }),
    }
}

/// A suggestion with its rank, group, alternatives, estimated gain (with the whole run's, by
/// Amdahl's law over the region's share `run` of the run), what it enables, why it is
/// skipped, and the storage changes it requires (the reductions among them again on their
/// own: "parallel with reduction(+: s)").
fn suggestion_json(s: &feedback::Suggestion, all: &[feedback::Suggestion], run: f64) -> Suggestion {
    let r = &s.rating;
    let alternatives = all
        .iter()
        .filter(|o| o.rating.group == r.group && o.rating.rank != r.rank)
        .filter(|o| o.rating.enables.is_empty() && r.enables.is_empty())
        .map(|o| o.rating.rank)
        .collect();
    let gain = r.gain.as_ref().map(|g| Gain {
        model: g.model,
        estimate: g.estimate,
        run_estimate: amdahl(run, g.estimate),
        basis: g.basis.clone(),
    });
    let mut clauses = Vec::new();
    let requires = s
        .requires
        .iter()
        .map(|q| {
            let reduction = match q.change {
                Change::Reduction { op, fp, .. } => Some((op.clause().to_string(), fp)),
                _ => None,
            };
            clauses.push(q.clause());
            Requirement {
                change: kinds::change(&q.change),
                storage: plain_storage(&q.storage, &q.lines),
                lines: q.lines.clone(),
                op: reduction.as_ref().map(|r| r.0.clone()),
                reassociates: reduction.map(|r| r.1),
                step: q.step.clone(),
            }
        })
        .collect::<Vec<_>>();
    let reduction = requires
        .iter()
        .zip(clauses)
        .filter_map(|(q, clause)| {
            let clause = clause.map(|c| plain_storage(&c, &q.lines));
            Some(Reduction {
                op: q.op.clone()?,
                storage: q.storage.clone(),
                lines: q.lines.clone(),
                reassociates: q.reassociates?,
                clause: clause?,
            })
        })
        .collect();
    Suggestion {
        kind: s.kind,
        loops: s.loops.clone(),
        text: plain_storage(&s.text, &[]),
        rank: r.rank,
        group: r.group,
        alternatives,
        gain,
        enables: r.enables.clone(),
        array: s.array.clone(),
        mapping: s.mapping.as_ref().map(|m| Mapping {
            isl: m.isl.clone(),
            c: m.c.clone(),
            bytes_before: m.bytes_before,
            bytes_after: m.bytes_after,
        }),
        skipped: r.skipped.as_ref().map(|k| Skipped {
            reason: k.reason,
            text: plain_storage(&k.text, &[]),
        }),
        sizes: s.sizes.iter().map(|&n| u64::from(n)).collect(),
        requires,
        reduction,
    }
}

/// The tracer's and the legality model's kinds as report.json spells them (suggestion kinds,
/// gain models and skip reasons are report.json's own types). The matches are exhaustive, so
/// a kind added to the analysis does not compile until the report's schema has it.
mod kinds {
    use feedback::legality::Change;
    use reports::model as out;

    pub fn dep(k: tracer::DepKind) -> out::DepKind {
        match k {
            tracer::DepKind::Flow => out::DepKind::Flow,
            tracer::DepKind::Anti => out::DepKind::Anti,
            tracer::DepKind::Output => out::DepKind::Output,
        }
    }

    pub fn through(t: tracer::Through) -> out::Through {
        match t {
            tracer::Through::Register => out::Through::Register,
            tracer::Through::Memory => out::Through::Memory,
        }
    }

    pub fn change(c: &Change) -> out::StorageChange {
        match c {
            Change::Privatize => out::StorageChange::Privatize,
            Change::FirstPrivate => out::StorageChange::FirstPrivate,
            Change::LastPrivate => out::StorageChange::LastPrivate,
            Change::LastConditional => out::StorageChange::LastPrivateConditional,
            Change::CopyIn => out::StorageChange::CopyIn,
            Change::Expand => out::StorageChange::Expand,
            Change::MapToArray => out::StorageChange::MapToArray,
            Change::ClosedForm => out::StorageChange::ClosedForm,
            Change::Linear => out::StorageChange::Linear,
            Change::LocalArray { .. } => out::StorageChange::LocalArray,
            Change::Reduction { .. } => out::StorageChange::Reduction,
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// The analysis' names (its text reports use them) and report.json's agree.
        #[test]
        fn names_agree_with_the_analysis() {
            let name = |v: serde_json::Value| v.as_str().unwrap_or_default().to_string();
            for k in [
                tracer::DepKind::Flow,
                tracer::DepKind::Anti,
                tracer::DepKind::Output,
            ] {
                assert_eq!(
                    name(serde_json::to_value(dep(k)).unwrap_or_default()),
                    k.as_str()
                );
            }
            for c in [
                Change::Privatize,
                Change::FirstPrivate,
                Change::LastPrivate,
                Change::LastConditional,
                Change::CopyIn,
                Change::Expand,
                Change::MapToArray,
                Change::ClosedForm,
                Change::Linear,
                Change::LocalArray { len: None },
            ] {
                let json = serde_json::to_value(change(&c)).unwrap_or_default();
                assert_eq!(name(json), c.as_str());
            }
        }
    }
}

/// Flame-graph styles: regions with suggestions highlighted, non-affine regions and library
/// calls greyed; each region's frames carry the region's and their own loop's facts, native
/// frames their calls and how they were measured.
pub fn frame_styles(
    regions: &[Region],
    reports: &[RegionReport],
    tree: &ScheduleTree,
    naming: &Naming<'_>,
    native: &reports::NativeCost,
) -> BTreeMap<String, FrameStyle> {
    let mut styles = BTreeMap::new();
    for (r, rep) in regions.iter().zip(reports) {
        let color = if r.affine_percent < 50.0 {
            GREY
        } else if !r.suggestions.is_empty() {
            HIGHLIGHT
        } else {
            (230, 160, 60)
        };
        for (k, &n) in std::iter::once(&rep.root)
            .chain(&rep.loop_nodes)
            .enumerate()
        {
            let mut facts = Vec::new();
            if k == 0 {
                facts.extend(region_facts(r));
            }
            let id = format!("L{n}");
            if let Some(l) = r.all_loops.iter().find(|l| l.id == id) {
                facts.push(loop_facts(l));
            }
            // Its own suggestions: those naming this loop (the region's frame also gets those
            // naming no loop, such as layout changes).
            let mut kinds: Vec<&str> = Vec::new();
            for s in &r.suggestions {
                let mine = s.names_loop(&id) || (k == 0 && s.loops.is_empty());
                if mine && s.advised() && !kinds.contains(&s.kind.as_str()) {
                    kinds.push(s.kind.as_str());
                }
            }
            if !kinds.is_empty() {
                facts.push(format!("suggests {}", kinds.join(", ")));
            } else if k == 0 {
                facts.push(format!("no suggestion, see region {} in report.txt", r.id));
            }
            styles.entry(naming.frame(tree, n)).or_insert(FrameStyle {
                color: Some(color),
                facts,
                unit: None,
            });
        }
    }
    // Native frames of one name (a function called from several contexts) share a title.
    let mut natives: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for n in 0..tree.nodes.len() {
        let node = &tree.nodes[n];
        match node.kind {
            NodeKind::Func { entry, .. } if naming.import(entry).is_some() => {
                styles
                    .entry(naming.frame(tree, n))
                    .or_insert_with(|| FrameStyle {
                        color: Some(GREY),
                        facts: vec![
                            "the way into a library call run natively, opaque to the analysis"
                                .to_string(),
                            "what the call cost is its [native] frame".to_string(),
                        ],
                        unit: None,
                    });
            }
            NodeKind::Native { .. } => {
                let e = natives.entry(naming.frame(tree, n)).or_default();
                e.0 += node.native_calls;
                e.1 += node.native_weight;
            }
            _ => {}
        }
    }
    for (name, (calls, weight)) in natives {
        styles.entry(name).or_insert_with(|| FrameStyle {
            color: Some(GREY),
            facts: vec![
                format!(
                    "{calls} call{} run natively, {} {} per call",
                    if calls == 1 { "" } else { "s" },
                    weight / calls.max(1),
                    native.unit()
                ),
                native.how_brief(),
            ],
            unit: Some(native.unit().to_string()),
        });
    }
    styles
}

/// A region's headline facts, for its outermost frame.
fn region_facts(r: &Region) -> Vec<String> {
    let m = &r.metrics;
    vec![
        format!(
            "region {}: {:.1}% of traced instructions, {:.1}% of the run's time with native calls counted",
            r.id, r.ops_percent, r.run_percent
        ),
        format!(
            "affine {:.0}%, parallel ops {:.0}%, SIMD ops {:.0}%, tile depth {}",
            r.affine_percent,
            m.parallel_ops_percent,
            m.simd_ops_percent,
            m.tile_depth
        ),
    ]
}

/// One loop's facts: `L6: parallel, permutable, stride 0/1 100%`.
fn loop_facts(l: &LoopEntry) -> String {
    format!(
        "{}: {}, {}, stride 0/1 {:.0}%",
        l.id,
        if l.parallel {
            "parallel"
        } else if l.reduction {
            "parallel as a reduction"
        } else {
            "not parallel"
        },
        if l.permutable {
            "permutable"
        } else {
            "not permutable"
        },
        l.stride01_percent
    )
}

/// CPU time per native call below which the CPU-time meter's error dominates: each stop
/// leaves the program's caches and TLB to refill after polyprof ran, about a microsecond per
/// call on the virtual machines measured (a 120-instruction `strtol` came out near 0.9 µs).
const SHORT_CALL_NS: f64 = 2_000.0;

/// Warnings for native functions whose calls are too short for the CPU-time meter.
pub fn native_warnings(native: &reports::NativeCost) -> Vec<String> {
    let Some(rate) = native
        .instructions_per_second
        .filter(|_| native.method == "cpu_time")
    else {
        return Vec::new();
    };
    native
        .functions
        .iter()
        .filter(|f| f.run_percent >= 1.0 && f.calls > 0)
        .filter_map(|f| {
            let ns = f.instructions as f64 / f.calls as f64 / rate as f64 * 1e9;
            (ns < SHORT_CALL_NS).then(|| {
                format!(
                    "{} calls to {} took {:.2} µs of CPU time each on average, near the error of \
                     the CPU-time meter (about 1 µs per call): their {:.1}% of the run's time is \
                     overstated; a machine with hardware performance counters counts their \
                     instructions exactly",
                    f.calls,
                    f.name,
                    ns / 1e3,
                    f.run_percent
                )
            })
        })
        .collect()
}

/// The line on native library calls: their share of the run's time and the costliest ones.
pub fn native_summary(native: &reports::NativeCost) -> Option<String> {
    if native.functions.is_empty() {
        return None;
    }
    let top: Vec<String> = native
        .functions
        .iter()
        .take(3)
        .map(|f| format!("{} {:.1}%", f.name, f.run_percent))
        .collect();
    Some(format!(
        "{:.1}% of the run's time in native library calls ({}; {})",
        native.run_percent,
        top.join(", "),
        native.how_brief()
    ))
}

/// The closing summary: the hottest regions and their headline suggestion.
pub fn summary(regions: &[Region]) -> Vec<String> {
    regions
        .iter()
        .take(3)
        .map(|r| {
            let at = r.location.as_ref().map_or(String::new(), |l| {
                format!(
                    " {}:{}",
                    l.file.rsplit('/').next().unwrap_or(&l.file),
                    l.line
                )
            });
            let headline = r
                .suggestions
                .iter()
                .find(|s| s.advised())
                .map(|s| match &s.gain {
                    Some(g) => format!("{} (estimated {:.1}x)", s.text, g.estimate),
                    None => s.text.clone(),
                })
                .or_else(|| {
                    r.suggestions.first().and_then(|s| {
                        Some(format!(
                            "no advice pays at this size: {} ({})",
                            s.kind,
                            s.skipped.as_ref()?.text
                        ))
                    })
                })
                .or_else(|| r.why_not.as_ref().map(|w| format!("no suggestion: {w}")))
                .unwrap_or_default();
            format!(
                "region {}{} in {} ({:.1}% of traced instructions; {:.1}% of the run's time, \
                 native calls counted): {}",
                r.id, at, r.function, r.ops_percent, r.run_percent, headline
            )
        })
        .collect()
}

/// The whole run's gain when a part `share` of it (0 to 1) gains `gain`.
fn amdahl(share: f64, gain: f64) -> f64 {
    1.0 / ((1.0 - share) + share / gain.max(1e-9))
}
