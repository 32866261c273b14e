//! Stage 4, the reports: report.json from the trace and the analysis (typed, see
//! `reports::Report`), then report.txt, report.html, the flame graph and the folded stacks, and
//! the closing lines on stderr.

use crate::{crash, regions, signal_name, signals, traced, Format, ReportArgs, RunInfo, Ui};
use std::path::Path;

/// Writes report.json (and report.txt unless `--format json`) of `report`.
pub fn write_summary_reports(
    report: &reports::Report,
    out: &Path,
    format: Format,
    flame: Option<&Path>,
) -> anyhow::Result<()> {
    reports::write_file(&out.join("report.json"), |w| reports::write_json(report, w))?;
    if format == Format::All {
        let sources = reports::Sources::load(report);
        reports::write_file(&out.join("report.txt"), |w| {
            reports::write_text(report, &sources, w)
        })?;
        // The page inlines the flame graph written by this run, when there is one.
        let flame = flame.and_then(|p| std::fs::read_to_string(p).ok());
        reports::write_file(&out.join("report.html"), |w| {
            reports::write_html(report, flame.as_deref(), &sources, w)
        })?;
    }
    Ok(())
}

/// Writes the reports of the trace alone (`report`, without the analysis): report.json, and
/// with `--format all` report.txt, report.html, and the flame graph and folded stacks of the
/// functions' own instructions when they are known (a flat graph: the analysis gives the
/// calls and loops). Each file is replaced whole (`reports::write_file`).
pub fn write_trace_reports(
    report: &reports::Report,
    info: &RunInfo,
    out: &Path,
    format: Format,
) -> anyhow::Result<()> {
    let svg = out.join("flamegraph.svg");
    let mut flame = None;
    if format == Format::All && !report.hot_functions.is_empty() {
        let folded: Vec<String> = report
            .hot_functions
            .iter()
            .map(|f| format!("{} {}", f.name.replace(';', ":"), f.instructions))
            .collect();
        reports::write_file(&out.join("stacks.folded"), |w| {
            reports::write_folded(&folded, w)
        })?;
        let subtitle = "Width: instructions traced in each function's own code (the analysis, \
                        not done, gives the calls and loops)";
        reports::write_file(&svg, |w| {
            reports::write_flamegraph(
                &folded,
                &flame_title(info),
                Some(subtitle),
                "instructions",
                &Default::default(),
                w,
            )
        })?;
        flame = Some(svg.as_path());
    }
    write_summary_reports(report, out, format, flame)
}

/// The flame graph's title: the command line.
fn flame_title(info: &RunInfo) -> String {
    let mut title = format!("polyprof: {}", info.argv0);
    for a in &info.program.args {
        title.push(' ');
        title.push_str(a);
    }
    title
}

/// The functions by the instructions traced in their own code, hottest first, from
/// `(entry, instructions)` pairs (the first pass's, or the analysis's structure).
pub fn hot_functions(
    functions: impl IntoIterator<Item = (u64, u64)>,
    info: &RunInfo,
    exe: &symbols::ElfFile,
) -> Vec<reports::HotFunction> {
    let bin = symbols::Loaded::new(exe, info.load_bias);
    let none = tracer::Structure::default();
    let naming = tracer::Naming::new(bin, &none);
    let functions: Vec<(u64, u64)> = functions.into_iter().filter(|f| f.1 > 0).collect();
    let all = functions.iter().map(|f| f.1).sum::<u64>().max(1) as f64;
    let mut hot: Vec<reports::HotFunction> = functions
        .into_iter()
        .map(|(entry, instructions)| reports::HotFunction {
            name: match naming.import(entry) {
                Some(name) => format!("call {name}"),
                None => naming.function(entry),
            },
            location: naming.location(entry).map(|l| reports::Loc {
                file: l.file,
                line: l.line,
            }),
            instructions,
            ops_percent: 100.0 * instructions as f64 / all,
        })
        .collect();
    hot.sort_by(|a, b| {
        b.instructions
            .cmp(&a.instructions)
            .then_with(|| a.name.cmp(&b.name))
    });
    hot
}

/// The warning of a report whose analysis a signal cut short.
pub fn skipped_warning(what: &str) -> String {
    format!(
        "polyprof was interrupted ({}) during its analysis: {what}",
        signals::interrupted().map_or_else(|| "?".to_string(), signal_name)
    )
}

/// The report of the trace alone: the program, the trace, and where it crashed.
pub fn of_trace(info: &RunInfo, exe: &symbols::ElfFile) -> reports::Report {
    let mut report = reports::Report::new(info.program.clone(), info.trace.clone());
    if let Some(fault) = &info.fault {
        let bin = symbols::Loaded::new(exe, info.load_bias);
        report.crash = Some(crash::describe(fault, bin, None));
    }
    report
}

/// Completes `report` (of the trace) with the analysis: regions, hot loops, the native calls'
/// costs per function, the crash in loop terms.
pub fn of_analysis(
    report: &mut reports::Report,
    info: &RunInfo,
    exe: &symbols::ElfFile,
    profile: &feedback::pipeline::Profile,
    ui: Ui,
) {
    let bin = symbols::Loaded::new(exe, info.load_bias);
    let analysis = &profile.analysis;
    let naming = tracer::Naming::new(bin, &analysis.structure);
    if let Some(fault) = &info.fault {
        let tree = Some((&analysis.tree, &naming));
        report.crash = Some(crash::describe(fault, bin, tree));
    }
    report.trace.native_cost = regions::native_functions(&info.trace.native_cost, &analysis.tree);
    for w in regions::native_warnings(&report.trace.native_cost) {
        say!(ui, "warning: {w}");
        report.trace.warnings.push(w);
    }
    report.hot_functions = hot_functions(
        analysis
            .structure
            .funcs
            .iter()
            .map(|f| (f.entry, f.instructions)),
        info,
        exe,
    );
    let shares = regions::RunShares::new(&analysis.tree);
    report.hot_loops = hot_loops(&analysis.tree, &naming, &shares);
    // Polyhedra of one shape are printed by isl once, for every region.
    let mut printer = feedback::poly::Printer::default();
    report.regions = profile
        .regions
        .iter()
        .map(|r| regions::region_json(r, &analysis.tree, &naming, &shares, &mut printer))
        .collect();
}

/// Writes every output of `report` into `out`: with `--format all`, the folded stacks and the
/// flame graph of the analysis (`profile`), which report.html inlines.
pub fn write(
    report: &reports::Report,
    info: &RunInfo,
    exe: &symbols::ElfFile,
    profile: &feedback::pipeline::Profile,
    opts: &ReportArgs,
    out: &Path,
) -> anyhow::Result<()> {
    let svg = out.join("flamegraph.svg");
    if opts.format == Format::All {
        let analysis = &profile.analysis;
        let naming = tracer::Naming::new(
            symbols::Loaded::new(exe, info.load_bias),
            &analysis.structure,
        );
        let native = &report.trace.native_cost;
        let styles = regions::frame_styles(
            &report.regions,
            &profile.regions,
            &analysis.tree,
            &naming,
            native,
        );
        let folded = naming.folded(&analysis.tree);
        reports::write_file(&out.join("stacks.folded"), |w| {
            reports::write_folded(&folded, w)
        })?;
        let title = flame_title(info);
        let subtitle = if native.functions.is_empty() {
            "Width: instructions traced".to_string()
        } else {
            format!(
                "Width: instructions traced; [native] frames: library calls run natively, {}",
                native.how_brief()
            )
        };
        reports::write_file(&svg, |w| {
            reports::write_flamegraph(&folded, &title, Some(&subtitle), "instructions", &styles, w)
        })?;
    }
    let flame = (opts.format == Format::All).then_some(svg.as_path());
    write_summary_reports(report, out, opts.format, flame)
}

/// The closing lines: the trace, native calls, the hottest regions' advice, the crash, where
/// each output is, and the command that completes an analysis cut short. `analysed`: the
/// analysis ran (there is a flame graph).
pub fn say_summary(report: &reports::Report, format: Format, out: &Path, analysed: bool, ui: Ui) {
    if analysed {
        say!(ui, "{}", traced(&report.trace));
        if let Some(line) = regions::native_summary(&report.trace.native_cost) {
            say!(ui, "{line}");
        }
        for line in regions::summary(&report.regions) {
            say!(ui, "{line}");
        }
    }
    if let Some(c) = &report.crash {
        say!(ui, "{}", c.sentence());
    }
    if let Some(cmd) = &report.analysis.complete_with {
        say!(ui, "the analysis was not completed: `{cmd}` completes it");
    }
    if format == Format::All {
        say!(ui, "HTML report: {}", out.join("report.html").display());
    }
    say!(ui, "JSON report: {}", out.join("report.json").display());
    if format == Format::All {
        if analysed {
            say!(ui, "flame graph: {}", out.join("flamegraph.svg").display());
        }
        say!(ui, "text report: {}", out.join("report.txt").display());
    }
}

/// The loop contexts of the schedule tree, hottest first.
fn hot_loops(
    tree: &tracer::ScheduleTree,
    naming: &tracer::Naming<'_>,
    shares: &regions::RunShares,
) -> Vec<reports::HotLoop> {
    let totals = tree.total_weights();
    let all = totals[tracer::ScheduleTree::ROOT].max(1) as f64;
    let mut loops: Vec<reports::HotLoop> = (0..tree.nodes.len())
        .filter(|&n| {
            matches!(
                tree.nodes[n].kind,
                tracer::NodeKind::Loop { .. } | tracer::NodeKind::Recursion { .. }
            ) && totals[n] > 0
        })
        .map(|n| reports::HotLoop {
            stack: tree
                .path(n)
                .into_iter()
                .map(|m| naming.frame(tree, m))
                .collect::<Vec<_>>()
                .join(";"),
            location: naming.node_location(tree, n).map(|l| reports::Loc {
                file: l.file,
                line: l.line,
            }),
            ops_percent: 100.0 * totals[n] as f64 / all,
            run_percent: shares.run_percent(n),
            depth: tree.nodes[n].depth,
        })
        .collect();
    loops.sort_by(|a, b| b.ops_percent.total_cmp(&a.ops_percent));
    loops
}
