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
    report_stages(&info, &exe, &recording, first, opts, &out_dir, ui)?;
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
        ui,
    )?;
    Ok(signals::interrupted().map_or(0, |s| 128 + s))
}

/// Stages 3 and 4 on a recording, into `out`. `first`: the first pass, when it ran while the
/// program was traced. When the analysis fails or is skipped, the reports cover the trace.
fn report_stages(
    info: &RunInfo,
    exe: &symbols::ElfFile,
    recording: &Recording,
    first: Option<feedback::pipeline::FirstPass>,
    opts: &ReportArgs,
    out: &Path,
    ui: Ui,
) -> anyhow::Result<()> {
    signals::analysing();
    let mut report = output::of_trace(info, exe);
    // What the watchdog writes if the analysis, once interrupted, does not return in time.
    let watchdog = {
        let mut report = report.clone();
        let out = out.to_path_buf();
        let format = opts.format;
        signals::Watchdog::start(Box::new(move || {
            report.trace.warnings.push(output::skipped_warning(
                "the analysis did not stop in time; the reports cover the trace only",
            ));
            if let Err(e) = output::write_summary_reports(&report, &out, format, None) {
                eprintln!("polyprof: {e:#}");
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
            output::write_summary_reports(&report, out, opts.format, None)?;
            output::say_summary(&report, opts.format, out, false, ui);
            return Ok(());
        }
    };
    if signals::skipping() {
        let w = output::skipped_warning("regions after the last one reported were not analysed");
        say!(ui, "warning: {w}");
        report.trace.warnings.push(w);
    }
    output::of_analysis(&mut report, info, exe, &profile, ui);
    output::write(&report, info, exe, &profile, opts, out)?;
    output::say_summary(&report, opts.format, out, true, ui);
    Ok(())
}
