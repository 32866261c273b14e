//! polyprof's pipeline, one function per stage:
//!
//! 1. [`trace::preflight`]: the program resolved and read (ELF, symbols, DWARF), where tracing
//!    starts, the output directory;
//! 2. [`trace::trace`]: the program run under the engine, its events recorded into the output
//!    directory (`ptrace-runner`), the analysis's first pass fed as it runs;
//! 3. [`analyse::analyse`]: the back end on the recording (`feedback::pipeline`: iteration
//!    vectors and dependences from `tracer`, folding from `folder`, regions, isl);
//! 4. [`output::of_trace`], [`output::of_analysis`] and [`output::write`]: report.json as
//!    `reports::Report`, then report.txt, report.html, the flame graph and folded stacks.
//!
//! `polyprof PROGRAM` runs all four ([`profile`]), `polyprof record` the first two,
//! `polyprof report DIR` the last two on a kept recording ([`report_again`]).

pub mod analyse;
pub mod output;
pub mod trace;

pub use trace::Recorded;

use crate::{recording, signals, traced, ReportArgs, RunArgs, RunInfo, Ui};
use anyhow::Context as _;
use ptrace_runner::record::Recording;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::Path;

/// Status for polyprof's own failures before the program starts (or reading a recording).
pub const EXIT_USAGE: i32 = 2;

/// A progress line saying `what`, on a terminal only (and not with `--quiet`).
fn progress_line(ui: Ui, what: &'static str) -> Option<indicatif::ProgressBar> {
    (!ui.quiet && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.set_style(
            indicatif::ProgressStyle::with_template("polyprof: {spinner} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(std::time::Duration::from_millis(200));
        bar.set_message(what);
        bar
    })
}

/// Stages 1 and 2. `Err(status)`: the program could not be traced (said why).
pub fn record(
    run: &RunArgs,
    first_pass: bool,
    ui: Ui,
    command: &[OsString],
) -> anyhow::Result<Result<Recorded, i32>> {
    match trace::preflight(run, ui, command) {
        Ok(p) => trace::trace(p, run, first_pass, ui),
        Err(code) => Ok(Err(code)),
    }
}

/// `polyprof [record] PROGRAM`: records, then (unless `report` is `None`) writes the reports.
pub fn profile(
    run: &RunArgs,
    report: Option<&ReportArgs>,
    ui: Ui,
    command: &[OsString],
) -> anyhow::Result<i32> {
    let rec = match record(run, report.is_some(), ui, command)? {
        Ok(r) => r,
        Err(code) => return Ok(code),
    };
    let Some(opts) = report else {
        say!(ui, "{}", traced(&rec.info.trace));
        say!(
            ui,
            "recording: {} ({} bytes of events); `polyprof report {}` writes the reports",
            recording::Paths::new(&rec.out_dir).dir.display(),
            rec.recording.bytes(),
            rec.out_dir.display()
        );
        return Ok(rec.info.exit_status);
    };
    let Recorded {
        info,
        exe,
        recording,
        first,
        out_dir,
    } = rec;
    let completes = completing_command(&out_dir, &out_dir);
    report_stages(
        &info, &exe, &recording, first, opts, &out_dir, &completes, ui,
    )?;
    // A signal during the analysis also says so in the exit status.
    Ok(signals::interrupted().map_or(info.exit_status, |s| 128 + s))
}

/// `polyprof report DIR`.
pub fn report_again(
    dir: &Path,
    output: Option<&Path>,
    opts: &ReportArgs,
    ui: Ui,
) -> anyhow::Result<i32> {
    // There is no tracing: a signal from the start skips (the rest of) the analysis.
    signals::install(ui.quiet).context("installing the signal handlers")?;
    signals::analysing();
    let loaded = match recording::load(dir) {
        Ok(l) => l,
        Err(e) => {
            error!(ui, "{e}");
            return Ok(EXIT_USAGE);
        }
    };
    let out = output.unwrap_or(dir);
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    report_stages(
        &loaded.info,
        &loaded.exe,
        &loaded.recording,
        None,
        opts,
        out,
        &completing_command(dir, out),
        ui,
    )?;
    Ok(signals::interrupted().map_or(0, |s| 128 + s))
}

/// The command that redoes the analysis of the recording in `dir` into `out`:
/// `polyprof report DIR` (`-o OUT` when they differ).
fn completing_command(dir: &Path, out: &Path) -> String {
    let mut cmd = format!("polyprof report {}", shell_word(&dir.display().to_string()));
    if out != dir {
        cmd.push_str(" -o ");
        cmd.push_str(&shell_word(&out.display().to_string()));
    }
    cmd
}

/// `s` as one word of a shell command line.
fn shell_word(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The `analysis` of a report whose analysis is in `state`, completed by `completes`.
fn analysis_state(state: reports::AnalysisState, completes: &str) -> reports::Analysis {
    reports::Analysis {
        state,
        // A failed analysis would fail again.
        complete_with: matches!(
            state,
            reports::AnalysisState::InProgress
                | reports::AnalysisState::Skipped
                | reports::AnalysisState::Partial
        )
        .then(|| completes.to_string()),
    }
}

/// Stages 3 and 4 on a recording, into `out`. `first`: the first pass, when it ran while the
/// program was traced. When the analysis fails or is skipped, the reports cover the trace;
/// `completes` is the command that redoes it (`polyprof report DIR`).
///
/// When polyprof was interrupted while it traced, the reports of the trace are written before
/// the analysis starts (said in progress), and when a signal skips the analysis, the watchdog
/// writes them at once: a SIGKILL during the analysis (`timeout -k`) then leaves a report, and
/// a complete recording that `completes` analyses.
#[allow(clippy::too_many_arguments)]
fn report_stages(
    info: &RunInfo,
    exe: &symbols::ElfFile,
    recording: &Recording,
    first: Option<feedback::pipeline::FirstPass>,
    opts: &ReportArgs,
    out: &Path,
    completes: &str,
    ui: Ui,
) -> anyhow::Result<()> {
    use reports::AnalysisState;
    signals::analysing();
    let mut report = output::of_trace(info, exe);
    if let Some(first) = &first {
        report.hot_functions = output::hot_functions(first.function_instructions(), info, exe);
    }
    // Interrupted while tracing: the user is waiting, and may not wait for the analysis.
    let hinted = signals::interrupted().is_some();
    if hinted {
        let mut early = report.clone();
        early.analysis = analysis_state(AnalysisState::InProgress, completes);
        output::write_trace_reports(&early, info, out, opts.format)?;
        say!(
            ui,
            "the analysis continues; if it is cut short, `{completes}` completes it"
        );
    }
    // What the watchdog writes once the analysis is skipped, and if it does not return in time.
    let watchdog = {
        let report = report.clone();
        let info = info.clone();
        let out = out.to_path_buf();
        let format = opts.format;
        let completes = completes.to_string();
        signals::Watchdog::start(Box::new(move |late| {
            let mut report = report.clone();
            report.analysis = analysis_state(AnalysisState::Skipped, &completes);
            report.trace.warnings.push(output::skipped_warning(if late {
                "the analysis did not stop in time; the reports cover the trace only"
            } else {
                "the analysis was skipped; the reports cover the trace only"
            }));
            if let Err(e) = output::write_trace_reports(&report, &info, &out, format) {
                eprintln!("polyprof: {e:#}");
            } else if !late && !hinted && !ui.quiet {
                eprintln!(
                    "polyprof: the reports of the trace are written; `{completes}` completes the \
                     analysis"
                );
            }
            128 + signals::interrupted().unwrap_or(0)
        }))
    };
    let mut source = analyse::Cancellable::new(recording);
    source.instructions = info.trace.instructions;
    let bin = symbols::Loaded::new(exe, info.load_bias);
    let cut_short = analyse::dumps(&source, bin, opts, out, ui)?;
    report.trace.warnings.extend(cut_short);
    let mut deps = opts.dump_deps.then(crate::depdump::DepDump::default);
    let profiled = analyse::analyse(&mut source, first, bin, opts, ui, deps.as_mut());
    if let Some(deps) = &deps {
        let cut_short = analyse::write_deps(deps, bin, out, ui)?;
        report.trace.warnings.extend(cut_short);
    }
    watchdog.writing();
    let profile = match profiled {
        Ok(p) => p,
        Err(why) => {
            // What was traced is still reported.
            say!(ui, "warning: {why}");
            report.trace.warnings.push(why);
            let state = if signals::skipping() {
                AnalysisState::Skipped
            } else {
                AnalysisState::Failed
            };
            report.analysis = analysis_state(state, completes);
            output::write_trace_reports(&report, info, out, opts.format)?;
            output::say_summary(&report, opts.format, out, false, ui);
            return Ok(());
        }
    };
    if signals::skipping() {
        let w = output::skipped_warning("regions after the last one reported were not analysed");
        say!(ui, "warning: {w}");
        report.trace.warnings.push(w);
        report.analysis = analysis_state(AnalysisState::Partial, completes);
    }
    output::of_analysis(&mut report, info, exe, &profile, ui);
    output::write(&report, info, exe, &profile, opts, out)?;
    output::say_summary(&report, opts.format, out, true, ui);
    Ok(())
}
