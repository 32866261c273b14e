//! Stage 3, the analysis of a recording: the optional dumps (events.txt, deps.txt), then the
//! back end (`feedback::pipeline`: iteration vectors, dependences, folding, regions, isl),
//! cancellable by a signal and with a progress line on a terminal.

use crate::{depdump, dump, signals, ReportArgs, Ui};
use anyhow::Context as _;
use ptrace_runner::record::Recording;
use ptrace_runner::{Event, EventSink};
use std::io;
use std::path::Path;

/// A recording whose replay stops once polyprof is interrupted during the analysis, and shows
/// how far it is on the analysis's progress line.
pub struct Cancellable<'a> {
    recording: &'a Recording,
    /// The progress line (on a terminal only) and the instructions one replay sends.
    progress: Option<indicatif::ProgressBar>,
    pub instructions: u64,
}

impl<'a> Cancellable<'a> {
    /// Without a progress line.
    pub fn new(recording: &'a Recording) -> Cancellable<'a> {
        Cancellable {
            recording,
            progress: None,
            instructions: 0,
        }
    }
}

/// Events between two looks at the interrupt flag.
const CHECK_EVERY: u32 = 1 << 12;
/// Instructions between two updates of the progress line.
const PROGRESS_EVERY: u64 = 1 << 16;

impl tracer::EventSource for Cancellable<'_> {
    fn replay_into(
        &self,
        sink: &mut dyn EventSink,
    ) -> Result<(), ptrace_runner::record::ReplayError> {
        struct Guard<'s> {
            sink: &'s mut dyn EventSink,
            n: u32,
            insns: u64,
            total: u64,
            progress: Option<&'s indicatif::ProgressBar>,
        }
        impl EventSink for Guard<'_> {
            fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
                self.n = self.n.wrapping_add(1);
                if self.n.is_multiple_of(CHECK_EVERY) && signals::skipping() {
                    return Err(io::Error::other("polyprof was interrupted"));
                }
                if let Event::Insn(_) = ev {
                    self.insns += 1;
                    if self.insns.is_multiple_of(PROGRESS_EVERY) {
                        if let Some(p) = self.progress {
                            p.set_message(format!(
                                "analysing: {:.0}% of {} instructions replayed (iteration \
                                 vectors, dependences, folding)",
                                100.0 * self.insns as f64 / self.total.max(1) as f64,
                                self.total
                            ));
                        }
                    }
                }
                self.sink.event(ev)
            }
        }
        let r = self.recording.replay_into(&mut Guard {
            sink,
            n: 0,
            insns: 0,
            total: self.instructions,
            progress: self.progress.as_ref(),
        });
        if let Some(p) = &self.progress {
            p.set_message("analysing: regions, schedules and feedback (isl)");
        }
        r
    }
}

/// The analysis's progress line, on a terminal only.
fn analysis_progress(ui: Ui) -> Option<indicatif::ProgressBar> {
    super::progress_line(ui, "analysing")
}

/// The dump `--dump-events` asks for, written into `out` (`--dump-deps` is written by
/// [`write_deps`] from what the analysis saw). A dump cut short by a signal is kept, and said
/// in the returned warnings.
pub fn dumps(
    source: &Cancellable<'_>,
    bin: symbols::Loaded<'_>,
    opts: &ReportArgs,
    out: &Path,
    ui: Ui,
) -> anyhow::Result<Vec<String>> {
    let mut warnings = Vec::new();
    let mut cut_short = |what: &Path| {
        let w = super::output::skipped_warning(&format!("{} is incomplete", what.display()));
        say!(ui, "warning: {w}");
        warnings.push(w);
    };
    if opts.dump_events {
        let path = out.join("events.txt");
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        let mut dump = dump::EventDump::new(io::BufWriter::new(file), bin);
        let replayed = tracer::EventSource::replay_into(source, &mut dump);
        let finished = dump.finish();
        match replayed {
            Err(_) if signals::skipping() => cut_short(&path),
            r => r
                .map_err(anyhow::Error::from)
                .and(finished.map(drop).map_err(anyhow::Error::from))
                .with_context(|| format!("writing {}", path.display()))?,
        }
        say!(ui, "events: {}", path.display());
    }
    Ok(warnings)
}

/// The back end on the recording `source` (after `first`, the first pass, when it ran while
/// the program was traced), showing `deps` every dependence it finds when a dump is asked
/// for. `Err`: why there is no analysis, in one sentence.
pub fn analyse(
    source: &mut Cancellable<'_>,
    first: Option<feedback::pipeline::FirstPass>,
    bin: symbols::Loaded<'_>,
    opts: &ReportArgs,
    ui: Ui,
    deps: Option<&mut depdump::DepDump>,
) -> Result<feedback::pipeline::Profile, String> {
    let popts = opts.analysis.pipeline_options(&signals::SKIP);
    // The progress line from here on: nothing else writes on stderr until it is cleared.
    let progress = analysis_progress(ui);
    source.progress = progress.clone();
    let mut dump = deps.map(|dump| move |d: &tracer::Dep<'_>| dump.add(d));
    let on_dep = dump
        .as_mut()
        .map(|f| f as &mut (dyn FnMut(&tracer::Dep<'_>) + Send));
    let profiled = feedback::pipeline::profile_with(&*source, first, bin, &popts, on_dep);
    source.progress = None;
    if let Some(p) = &progress {
        p.finish_and_clear();
    }
    profiled.map_err(|e| {
        if signals::skipping() {
            super::output::skipped_warning(
                "the analysis was skipped; the reports cover the trace only",
            )
        } else {
            format!("the analysis of the trace failed: {e}")
        }
    })
}

/// Writes `deps.txt` into `out`: every dependence the analysis found, aggregated per pair of
/// statements. One cut short by a signal is kept, and said in the returned warnings.
pub fn write_deps(
    deps: &depdump::DepDump,
    bin: symbols::Loaded<'_>,
    out: &Path,
    ui: Ui,
) -> anyhow::Result<Vec<String>> {
    let path = out.join("deps.txt");
    write_dep_dump(deps, bin, &path)?;
    say!(ui, "dependences: {}", path.display());
    let mut warnings = Vec::new();
    if signals::skipping() {
        let w = super::output::skipped_warning(&format!("{} is incomplete", path.display()));
        say!(ui, "warning: {w}");
        warnings.push(w);
    }
    Ok(warnings)
}

fn write_dep_dump(
    deps: &depdump::DepDump,
    bin: symbols::Loaded<'_>,
    path: &Path,
) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = io::BufWriter::new(file);
    let describe = |s: tracer::Stmt| {
        let loc = bin
            .location(s.pc)
            .map(|l| l.short())
            .unwrap_or_else(|| "?".to_string());
        format!("{loc} {}", bin.describe(s.pc))
    };
    deps.write(&mut w, describe)
        .and_then(|_| io::Write::flush(&mut w))
        .with_context(|| format!("writing {}", path.display()))
}
