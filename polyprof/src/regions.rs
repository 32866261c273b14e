//! Regions in the report's terms: report.json entries, flame-graph styles, and the closing
//! summary.

use feedback::pipeline::RegionReport;
use reports::{FrameStyle, Region, GREY, HIGHLIGHT};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use tracer::{Naming, NodeKind, ScheduleTree};

fn loc_json(l: Option<symbols::Loc>) -> Option<reports::Loc> {
    l.map(|l| reports::Loc {
        file: l.file,
        line: l.line,
    })
}

fn loc_value(l: Option<symbols::Loc>) -> Value {
    match l {
        Some(l) => json!({ "file": l.file, "line": l.line }),
        None => Value::Null,
    }
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

/// One region of report.json.
pub fn region_json(
    r: &RegionReport,
    tree: &ScheduleTree,
    naming: &Naming<'_>,
    bias: u64,
) -> Region {
    let fb = &r.feedback;
    // The loops along the hottest statement's path, outermost first.
    let main = r.input.statements.iter().max_by_key(|s| s.ops);
    let chain: Vec<usize> = main.map(|s| s.loops.clone()).unwrap_or_default();
    let loop_value = |li: usize| -> Option<Value> {
        let id = &r.input.loops[li].id;
        let info = fb.loops.iter().find(|l| &l.id == id)?;
        Some(json!({
            "id": id,
            "location": loc_value(naming.node_location(tree, r.loop_nodes[li])),
            "depth": info.depth,
            "parallel": info.parallel,
            "permutable": info.permutable,
            "stride01_percent": info.stride01_percent,
        }))
    };
    let loops = chain.iter().filter_map(|&li| loop_value(li)).collect();
    let all_loops = (0..r.input.loops.len()).filter_map(loop_value).collect();
    let statements = r
        .statements
        .iter()
        .map(|s| {
            json!({
                "id": s.name,
                "address": format!("{:#x}", s.pc.wrapping_sub(bias)),
                "location": loc_value(naming.location(s.pc)),
                "domain": s.domain,
                "ops": s.ops,
                "exact": s.exact,
            })
        })
        .collect();
    let dependences = r
        .dependences
        .iter()
        .map(|d| {
            json!({
                "source": d.source,
                "sink": d.sink,
                "kind": d.kind.as_str(),
                "through": d.through.as_str(),
                "relation": d.relation,
                "exact": d.exact,
            })
        })
        .collect();
    let suggestions = fb
        .suggestions
        .iter()
        .map(|s| {
            let mut v = json!({ "kind": s.kind.as_str(), "loops": s.loops, "text": s.text });
            if !s.sizes.is_empty() {
                v["sizes"] = json!(s.sizes);
            }
            if !s.requires.is_empty() {
                v["requires"] = s
                    .requires
                    .iter()
                    .map(|r| {
                        json!({
                            "change": r.change.as_str(),
                            "storage": r.storage,
                            "lines": r.lines,
                        })
                    })
                    .collect();
            }
            v
        })
        .collect();
    let m = &fb.metrics;
    Region {
        id: r.id.clone(),
        function: function_of(tree, naming, r.root),
        location: loc_json(naming.node_location(tree, r.root)),
        ops_percent: r.ops_percent,
        interprocedural: r.interprocedural,
        affine_percent: r.affine_percent,
        loops,
        all_loops,
        statements,
        dependences,
        suggestions,
        metrics: json!({
            "parallel_ops_percent": m.parallel_ops_percent,
            "simd_ops_percent": m.simd_ops_percent,
            "reuse_percent": m.reuse_percent,
            "preuse_percent": m.preuse_percent,
            "tile_depth": m.tile_depth,
            "tile_ops_percent": m.tile_ops_percent,
            "components_before": m.components_before,
            "components_after": m.components_after,
            "skew": m.skew,
            "mem_ops_percent": m.mem_ops_percent,
            "fp_ops_percent": m.fp_ops_percent,
            "loop_depth": m.loop_depth,
        }),
        ast_before: fb.ast_before.clone(),
        ast_after: fb.ast_after.clone(),
        why_not: fb.why_not.clone(),
        scheduler: fb.schedule_seconds.map(|seconds| reports::SchedulerRun {
            strategy: fb.strategy.map(|s| s.as_str().to_string()),
            seconds,
        }),
    }
}

/// Flame-graph styles: regions with suggestions highlighted, non-affine regions and library
/// calls greyed, each region's frames carrying its headline metrics as a tooltip.
pub fn frame_styles(
    regions: &[Region],
    reports: &[RegionReport],
    tree: &ScheduleTree,
    naming: &Naming<'_>,
) -> BTreeMap<String, FrameStyle> {
    let mut styles = BTreeMap::new();
    for n in 0..tree.nodes.len() {
        if let NodeKind::Func { entry, .. } = tree.nodes[n].kind {
            if naming.import(entry).is_some() {
                styles.insert(
                    naming.frame(tree, n),
                    FrameStyle {
                        color: Some(GREY),
                        tooltip: Some(format!(
                            "{}: a library call run natively, opaque to the analysis",
                            naming.frame(tree, n)
                        )),
                    },
                );
            }
        }
    }
    for (r, rep) in regions.iter().zip(reports) {
        // Each kind once (two arrays to transpose are one "transpose_array").
        let mut kinds: Vec<&str> = Vec::new();
        for k in r.suggestions.iter().filter_map(|s| s["kind"].as_str()) {
            if !kinds.contains(&k) {
                kinds.push(k);
            }
        }
        let color = if r.affine_percent < 50.0 {
            GREY
        } else if !kinds.is_empty() {
            HIGHLIGHT
        } else {
            (230, 160, 60)
        };
        let m = &r.metrics;
        let tooltip = format!(
            "{} (region {}): {:.1}% of instructions, affine {:.0}%, parallel ops {:.0}%, SIMD ops {:.0}%, tile depth {}; {}",
            naming.frame(tree, rep.root),
            r.id,
            r.ops_percent,
            r.affine_percent,
            m["parallel_ops_percent"].as_f64().unwrap_or(0.0),
            m["simd_ops_percent"].as_f64().unwrap_or(0.0),
            m["tile_depth"].as_u64().unwrap_or(0),
            if kinds.is_empty() {
                format!("no suggestion: {}", r.why_not.as_deref().unwrap_or("-"))
            } else {
                format!("suggests {}", kinds.join(", "))
            }
        );
        for &n in std::iter::once(&rep.root).chain(&rep.loop_nodes) {
            styles.insert(
                naming.frame(tree, n),
                FrameStyle {
                    color: Some(color),
                    tooltip: Some(tooltip.clone()),
                },
            );
        }
    }
    styles
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
                .first()
                .and_then(|s| s["text"].as_str())
                .map(str::to_string)
                .or_else(|| r.why_not.as_ref().map(|w| format!("no suggestion: {w}")))
                .unwrap_or_default();
            format!(
                "region {}{} in {} ({:.1}% of instructions): {}",
                r.id, at, r.function, r.ops_percent, headline
            )
        })
        .collect()
}
