//! `polyprof check`: a transformation the user proposes, checked against the observed
//! dependences of the region holding its loops (see `feedback::check`). The run comes from a
//! recording, or the program is recorded first. Exit status 0: legal; 1: illegal; 2: usage.

use crate::args::{CheckCmd, CheckFormat};
use crate::{recording, signals, Ui, EXIT_USAGE};
use anyhow::Context as _;
use feedback::check::{self as fcheck, Outcome, Step, Violation};
use feedback::legality::{Change, Requirement};
use feedback::pipeline::{Profile, RegionReport};
use serde_json::{json, Value};
use std::path::Path;

/// Exit status of an illegal transformation.
const EXIT_ILLEGAL: i32 = 1;

/// A usage error: one sentence on stderr (and a JSON object on stdout for `--format json`).
fn usage(cmd: &CheckCmd, ui: Ui, sentence: &str) -> i32 {
    ui.error(format_args!("{sentence}"));
    if cmd.format == CheckFormat::Json {
        println!(
            "{}",
            json!({ "verdict": "usage_error", "legal": Value::Null, "message": sentence })
        );
    }
    EXIT_USAGE
}

/// `polyprof check`.
pub(crate) fn check(cmd: &CheckCmd, ui: Ui) -> anyhow::Result<i32> {
    let text = match (&cmd.transform, &cmd.script) {
        (Some(t), _) => t.clone(),
        (None, Some(path)) => match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                let s = format!("cannot read the script {}: {e}", path.display());
                return Ok(usage(cmd, ui, &s));
            }
        },
        // clap requires one of them.
        (None, None) => return Ok(usage(cmd, ui, "give --transform or --script")),
    };
    let steps = match fcheck::parse(&text) {
        Ok(s) => s,
        Err(e) => return Ok(usage(cmd, ui, &e.to_string())),
    };
    let popts = cmd.analysis.pipeline_options(&signals::SKIP);
    let first = &cmd.target[0];
    let from_dir = cmd.target.len() == 1 && Path::new(first).is_dir();
    let profile = if from_dir {
        signals::install(ui.quiet).context("installing the signal handlers")?;
        signals::analysing();
        let loaded = match recording::load(Path::new(first)) {
            Ok(l) => l,
            Err(e) => return Ok(usage(cmd, ui, &e.to_string())),
        };
        let source = crate::pipeline::analyse::Cancellable::new(&loaded.recording);
        let bin = symbols::Loaded::new(&loaded.exe, loaded.info.load_bias);
        feedback::pipeline::profile(&source, bin, &popts)
            .map(|p| (p, loaded.exe, loaded.info.load_bias))
    } else {
        let rec = match crate::pipeline::record(&cmd.run, true, ui, &cmd.target)? {
            Ok(r) => r,
            Err(code) => return Ok(code),
        };
        signals::analysing();
        let source = crate::pipeline::analyse::Cancellable::new(&rec.recording);
        let bias = rec.info.load_bias;
        let bin = symbols::Loaded::new(&rec.exe, bias);
        let profiled = feedback::pipeline::profile_with(&source, rec.first, bin, &popts, None);
        profiled.map(|p| (p, rec.exe, bias))
    };
    let (profile, exe, bias) = match profile {
        Ok(p) => p,
        Err(e) => {
            let s = format!("the analysis of the run failed, so nothing can be checked: {e}");
            return Ok(usage(cmd, ui, &s));
        }
    };
    let only = match &cmd.region {
        Some(id) => match profile
            .regions
            .iter()
            .position(|r| r.id.eq_ignore_ascii_case(id))
        {
            Some(i) => Some(i),
            None => {
                let ids: Vec<&str> = profile.regions.iter().map(|r| r.id.as_str()).collect();
                let s = format!(
                    "there is no analysed region {id} (analysed: {})",
                    if ids.is_empty() {
                        "none".to_string()
                    } else {
                        ids.join(", ")
                    }
                );
                return Ok(usage(cmd, ui, &s));
            }
        },
        None => None,
    };
    let located = locate(
        &profile,
        symbols::Loaded::new(&exe, bias),
        &steps,
        only,
        cmd.analysis.region_threshold,
    );
    let (ri, names) = match located {
        Ok(x) => x,
        Err(s) => return Ok(usage(cmd, ui, &s)),
    };
    let region = &profile.regions[ri];
    let loop_of = |name: &str| names.iter().find(|(n, _)| n == name).map(|(_, l)| *l);
    let outcome = match fcheck::check(&region.input, &steps, &loop_of, &popts.feedback) {
        Ok(o) => o,
        Err(e @ feedback::Error::Usage(_)) => return Ok(usage(cmd, ui, &e.to_string())),
        Err(e) => {
            let s = format!("the check could not finish: {e}");
            return Ok(usage(cmd, ui, &s));
        }
    };
    match cmd.format {
        CheckFormat::Text => print!("{}", text_verdict(region, &steps, &outcome)),
        CheckFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&json_verdict(region, &steps, &outcome))?
        ),
    }
    Ok(if outcome.legal { 0 } else { EXIT_ILLEGAL })
}

/// `k.c:12` of a file path and line.
fn short(file: &str, line: u32) -> String {
    let base = file.rsplit('/').next().unwrap_or(file);
    format!("{base}:{line}")
}

/// Whether the user's `name` names the loop with report id `id` and location `label`.
fn names_loop(name: &str, id: &str, label: &str) -> bool {
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_string();
    name.eq_ignore_ascii_case(id) || base(name) == base(label)
}

/// The region holding every loop the transformation names, and each name's loop index in it.
/// `Err`: the sentence for the user.
fn locate(
    profile: &Profile,
    bin: symbols::Loaded<'_>,
    steps: &[Step],
    only: Option<usize>,
    threshold: f64,
) -> Result<(usize, Vec<(String, usize)>), String> {
    let mut names: Vec<&str> = steps.iter().flat_map(|s| s.op.loops()).collect();
    names.sort_unstable();
    names.dedup();
    let tree = &profile.analysis.tree;
    let naming = tracer::Naming::new(bin, &profile.analysis.structure);
    let label = |r: &RegionReport, l: usize| {
        naming.node_location(tree, r.loop_nodes[l]).map_or_else(
            || r.input.loops[l].label.clone(),
            |x| short(&x.file, x.line),
        )
    };
    // Per name: (region, loop) pairs it may mean.
    let mut found: Vec<(&str, Vec<(usize, usize)>)> = Vec::new();
    for &name in &names {
        let hits: Vec<(usize, usize)> = profile
            .regions
            .iter()
            .enumerate()
            .filter(|(ri, _)| only.is_none_or(|o| o == *ri))
            .flat_map(|(ri, r)| {
                (0..r.input.loops.len())
                    .filter(move |&l| names_loop(name, &r.input.loops[l].id, &label(r, l)))
                    .map(move |l| (ri, l))
            })
            .collect();
        if hits.is_empty() {
            if let Some(o) = only {
                return Err(format!(
                    "`{name}` is not a loop of region {} (its loops: {})",
                    profile.regions[o].id,
                    profile.regions[o]
                        .input
                        .loops
                        .iter()
                        .map(|l| format!("{} {}", l.id, l.label))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            return Err(not_in_region(profile, &naming, name, threshold));
        }
        found.push((name, hits));
    }
    if names.is_empty() {
        // `schedule` alone: the hottest region.
        return match profile.regions.is_empty() {
            true => Err(
                "no region was analysed (lower --region-threshold), so there is nothing to schedule"
                    .into(),
            ),
            false => Ok((only.unwrap_or(0), Vec::new())),
        };
    }
    let common: Vec<usize> = (0..profile.regions.len())
        .filter(|ri| found.iter().all(|(_, h)| h.iter().any(|(r, _)| r == ri)))
        .collect();
    let Some(&ri) = common.first() else {
        let places: Vec<String> = found
            .iter()
            .map(|(n, h)| format!("{n} in {}", profile.regions[h[0].0].id))
            .collect();
        return Err(format!(
            "the loops are in different regions ({}): a transformation works within one region",
            places.join(", ")
        ));
    };
    let mut out = Vec::new();
    for (name, hits) in found {
        let here: Vec<usize> = hits
            .iter()
            .filter(|(r, _)| *r == ri)
            .map(|(_, l)| *l)
            .collect();
        if here.len() > 1 {
            let ids: Vec<&str> = here
                .iter()
                .map(|&l| profile.regions[ri].input.loops[l].id.as_str())
                .collect();
            return Err(format!(
                "`{name}` names several loops of region {} ({}): name one by its report id",
                profile.regions[ri].id,
                ids.join(", ")
            ));
        }
        out.push((name.to_string(), here[0]));
    }
    Ok((ri, out))
}

/// Why `name` matches no loop of an analysed region.
fn not_in_region(
    profile: &Profile,
    naming: &tracer::Naming<'_>,
    name: &str,
    threshold: f64,
) -> String {
    let tree = &profile.analysis.tree;
    let totals = tree.total_weights();
    let all = totals[tracer::ScheduleTree::ROOT].max(1) as f64;
    let hit = (0..tree.nodes.len()).find(|&n| {
        matches!(tree.nodes[n].kind, tracer::NodeKind::Loop { .. })
            && naming
                .node_location(tree, n)
                .is_some_and(|l| names_loop(name, &format!("L{n}"), &short(&l.file, l.line)))
    });
    match hit {
        Some(n) => format!(
            "loop {name} ran ({:.2}% of the traced instructions) but is outside every analysed region: lower --region-threshold (now {threshold}%) or raise --max-regions",
            100.0 * totals[n] as f64 / all
        ),
        None => format!(
            "`{name}` names no loop of the run: name loops by file:line of their loop statement or by report id, as report.txt shows them"
        ),
    }
}

/// The operation a violation belongs to, for a person.
fn at_step(steps: &[Step], step: usize) -> String {
    match steps.get(step) {
        Some(s) => format!("`{}`", s.text),
        None => "the new schedule".to_string(),
    }
}

fn kind_article(v: &Violation) -> &'static str {
    match v.kind {
        tracer::DepKind::Flow => "a flow",
        tracer::DepKind::Anti => "an anti",
        tracer::DepKind::Output => "an output",
    }
}

/// One sentence per violation.
fn violation_text(region: &RegionReport, steps: &[Step], v: &Violation) -> String {
    let what = match steps.get(v.step).map(|s| &s.op) {
        Some(fcheck::Op::Tile { .. }) => {
            "makes the band not permutable: it has a negative distance along a tiled loop"
        }
        Some(_) => "is carried by the loop claimed free of dependences",
        None => "is broken",
    };
    let pair = match &v.pair {
        Some((src, snk)) => {
            let (a, b) = (
                fcheck::describe_instance(&region.input, src),
                fcheck::describe_instance(&region.input, snk),
            );
            match steps.get(v.step).map(|s| &s.op) {
                Some(fcheck::Op::Tile { .. }) | None => {
                    format!(" (e.g. source {a} would run after its sink {b})")
                }
                Some(_) => format!(" (e.g. source {a}, sink {b})"),
            }
        }
        None => String::new(),
    };
    let fix = match &v.fix {
        Some(r) => format!(" {} would remove it.", capitalized(&r.phrase())),
        None if v.kind == tracer::DepKind::Flow => {
            " No storage change removes a flow dependence.".to_string()
        }
        None => " No storage change removes it.".to_string(),
    };
    format!(
        "{}: {} dependence through {} from {} ({}) to {} ({}) {what}{pair}.{fix}",
        at_step(steps, v.step),
        kind_article(v),
        v.storage,
        v.source,
        v.source_line,
        v.sink,
        v.sink_line,
    )
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// A storage change for a person, with the reassociation of floating-point reductions said.
fn need_text(r: &Requirement) -> String {
    match r.change {
        Change::Reduction { fp: true, .. } => format!(
            "{} (floating point: reassociating it may change the result's last bits)",
            r.phrase()
        ),
        _ => r.phrase(),
    }
}

/// The verdict as sentences.
fn text_verdict(region: &RegionReport, steps: &[Step], o: &Outcome) -> String {
    let mut out = String::new();
    let loops: Vec<String> = region
        .input
        .loops
        .iter()
        .map(|l| format!("{} {}", l.id, l.label))
        .collect();
    out.push_str(&format!(
        "region {} (loops {})\ntransformation: {}\n",
        region.id,
        loops.join(", "),
        steps
            .iter()
            .map(|s| s.text.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    ));
    if o.legal {
        out.push_str(&format!(
            "legal: the new schedule is one-to-one and keeps the source of each of the {} observed dependences before its sink",
            o.dependences
        ));
        if o.renamable > 0 {
            out.push_str(&format!(
                " (and the values it moves through registers and scalars, {} anti and output dependences, still reach their readers)",
                o.renamable
            ));
        }
        let claims: Vec<String> = o.claims.iter().map(|c| c.loop_id.clone()).collect();
        if !claims.is_empty() {
            out.push_str(&format!(
                ", and {} carries no dependence where claimed",
                claims.join(", ")
            ));
        }
        out.push_str(".\n");
        return out;
    }
    out.push_str("illegal:\n");
    if let Some((a, b)) = &o.collision {
        out.push_str(&format!(
            "  - the new schedule is not one-to-one: it runs {} and {} at the same time.\n",
            fcheck::describe_instance(&region.input, a),
            fcheck::describe_instance(&region.input, b)
        ));
    }
    for c in o.claims.iter().filter(|c| !c.holds) {
        let why = match (&c.why, c.needs.is_empty()) {
            (Some(w), _) => format!("does not hold: {w}"),
            (None, false) => format!(
                "holds only after {}",
                c.needs.iter().map(need_text).collect::<Vec<_>>().join(", ")
            ),
            (None, true) => "does not hold".to_string(),
        };
        out.push_str(&format!("  - {} {why}.\n", at_step(steps, c.step)));
    }
    for v in &o.violations {
        out.push_str(&format!("  - {}\n", violation_text(region, steps, v)));
    }
    if let Some(why) = &o.storage_blocked {
        out.push_str(&format!("  - {why}.\n"));
    }
    if !o.storage_needs.is_empty() {
        out.push_str(&format!(
            "  - the new order reorders values of registers or scalars: it needs {}.\n",
            o.storage_needs
                .iter()
                .map(need_text)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    match &o.legal_after {
        Some(needs) => out.push_str(&format!(
            "It would be legal after {}.\n",
            needs.iter().map(need_text).collect::<Vec<_>>().join(", ")
        )),
        None => out.push_str("No storage change makes it legal.\n"),
    }
    out
}

fn requirement_json(r: &Requirement) -> Value {
    let (reduction_op, fp) = match r.change {
        Change::Reduction { op, fp, .. } => (Some(op.clause()), Some(fp)),
        _ => (None, None),
    };
    json!({
        "change": r.change.as_str(),
        "storage": r.storage,
        "lines": r.lines,
        "operator": reduction_op,
        "floating_point": fp,
        "text": need_text(r),
    })
}

fn instance_json(region: &RegionReport, inst: &(String, Vec<i64>)) -> Value {
    let s = region.input.statements.iter().find(|s| s.name == inst.0);
    let iteration: serde_json::Map<String, Value> = s
        .map(|s| {
            s.loops
                .iter()
                .zip(&inst.1)
                .map(|(&l, v)| (region.input.loops[l].id.clone(), json!(v)))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "statement": inst.0,
        "line": s.map(|s| feedback::check::statement_line(&region.input, &s.name)),
        "iteration": iteration,
    })
}

/// The verdict as one JSON object (docs/REPORT.md).
fn json_verdict(region: &RegionReport, steps: &[Step], o: &Outcome) -> Value {
    let step_text = |k: usize| steps.get(k).map(|s| s.text.clone());
    let violations: Vec<Value> = o
        .violations
        .iter()
        .map(|v| {
            json!({
                "operation": step_text(v.step),
                "kind": v.kind.as_str(),
                "storage": v.storage,
                "source": { "statement": v.source, "line": v.source_line },
                "sink": { "statement": v.sink, "line": v.sink_line },
                "instances": v.pair.as_ref().map(|(a, b)| json!({
                    "source": instance_json(region, a),
                    "sink": instance_json(region, b),
                })),
                "fix": v.fix.as_ref().map(requirement_json),
                "text": violation_text(region, steps, v),
            })
        })
        .collect();
    let claims: Vec<Value> = o
        .claims
        .iter()
        .map(|c| {
            json!({
                "operation": step_text(c.step),
                "loop": c.loop_id,
                "holds": c.holds,
                "needs": c.needs.iter().map(requirement_json).collect::<Vec<_>>(),
                "why": c.why,
            })
        })
        .collect();
    json!({
        "verdict": if o.legal { "legal" } else { "illegal" },
        "legal": o.legal,
        "region": region.id,
        "loops": region.input.loops.iter().map(|l| json!({ "id": l.id, "location": l.label })).collect::<Vec<_>>(),
        "transformation": steps.iter().map(|s| s.text.clone()).collect::<Vec<_>>(),
        "schedule": o.schedule,
        "dependences_checked": o.dependences,
        "renamable": o.renamable,
        "storage_needs": o.storage_needs.iter().map(requirement_json).collect::<Vec<_>>(),
        "storage_blocked": o.storage_blocked,
        "one_to_one": o.collision.is_none(),
        "collision": o.collision.as_ref().map(|(a, b)| json!([instance_json(region, a), instance_json(region, b)])),
        "violations": violations,
        "claims": claims,
        "legal_after": o.legal_after.as_ref().map(|n| n.iter().map(requirement_json).collect::<Vec<_>>()),
    })
}
