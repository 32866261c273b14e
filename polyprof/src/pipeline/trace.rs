//! The first stages: preflight (is this a program polyprof can trace, where does tracing
//! start) and tracing (the program run under the engine, its events recorded into the output
//! directory, the analysis's first pass fed on the recording thread).

use super::EXIT_USAGE;
use crate::{
    preflight, recording, regions, signal_name, signals, EngineKind, RunArgs, RunInfo, Ui,
};
use anyhow::Context as _;
use ptrace_runner::record::{Recorder, Recording};
use ptrace_runner::{Engine, Event, EventSink, ExitStatus, RunOptions, StartAt, StepEngine, Tee};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Counts what the report summarises and shows progress on a terminal.
struct Counters {
    instructions: u64,
    native_calls: u64,
    syscalls: u64,
    signals: u64,
    progress: Option<indicatif::ProgressBar>,
    started: Instant,
}

impl Counters {
    fn new(ui: Ui) -> Counters {
        let progress = super::progress_line(ui, "running to the start point");
        Counters {
            instructions: 0,
            native_calls: 0,
            syscalls: 0,
            signals: 0,
            progress,
            started: Instant::now(),
        }
    }

    fn finish(&self) {
        if let Some(p) = &self.progress {
            p.finish_and_clear();
        }
    }
}

impl EventSink for Counters {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
        match ev {
            Event::Insn(_) => {
                self.instructions += 1;
                if self.instructions.is_multiple_of(1024) {
                    if let Some(p) = &self.progress {
                        let rate = self.instructions as f64
                            / self.started.elapsed().as_secs_f64().max(1e-9);
                        p.set_message(format!(
                            "{} instructions traced, {:.0} instructions/s",
                            self.instructions, rate
                        ));
                    }
                }
            }
            Event::LibCall(_) => self.native_calls += 1,
            Event::Syscall(_) => self.syscalls += 1,
            Event::Signal { .. } => self.signals += 1,
            _ => {}
        }
        Ok(())
    }
}

pub fn default_output_dir(program: &Path) -> PathBuf {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".into());
    Path::new("polyprof-out").join(name)
}

/// A program that passed preflight: resolved, its ELF read, where tracing starts, and the
/// warnings so far.
pub struct Prepared {
    given: OsString,
    program: PathBuf,
    program_args: Vec<OsString>,
    exe: symbols::ElfFile,
    start: StartAt,
    warnings: Vec<String>,
    out_dir: PathBuf,
    /// Set for the program (OpenMP's thread count).
    env: Vec<(OsString, OsString)>,
}

/// Stage 1, preflight. `Err(status)`: the program cannot be traced (said why).
pub fn preflight(run: &RunArgs, ui: Ui, command: &[OsString]) -> Result<Prepared, i32> {
    let given = &command[0];
    let program_args = &command[1..];
    let program = match preflight::resolve(given) {
        Ok(p) => p,
        Err(e) => {
            error!(ui, "{e}");
            return Err(EXIT_USAGE);
        }
    };
    let symbols_opts = symbols::OpenOptions {
        debug_root: run.debug_dir.clone(),
        debug_file: None,
    };
    let exe = match preflight::check(&program, &symbols_opts) {
        Ok(exe) => exe,
        Err(e) => {
            error!(ui, "{e}");
            return Err(EXIT_USAGE);
        }
    };
    let mut warnings = Vec::new();
    let start = match exe.symbol_address(&run.start_at) {
        Some(addr) => StartAt::Address {
            addr,
            name: run.start_at.clone(),
        },
        None if run.start_at == "main" => {
            let why = if exe.has_symtab() {
                "has no `main` symbol"
            } else {
                "is stripped (no symbol table)"
            };
            warnings.push(format!(
                "the program {why}: tracing starts at its ELF entry point (`main` is traced \
                 from the C runtime's call to it), and code is named by address"
            ));
            StartAt::Entry
        }
        None => {
            error!(
                ui,
                "{} has no function named `{}`; pick another --start-at",
                program.display(),
                run.start_at
            );
            return Err(EXIT_USAGE);
        }
    };
    if !exe.has_debug_info() {
        warnings.push(
            "the program has no debug information: code is named function+offset, not file:line \
             (compile with -g, or install its debug symbols: see --debug-dir)"
                .to_string(),
        );
    }
    let mut env = openmp_env(&exe, &mut warnings);
    env.extend(glibc_env());
    for w in &warnings {
        say!(ui, "warning: {w}");
    }

    let out_dir = run
        .output
        .clone()
        .unwrap_or_else(|| default_output_dir(&program));
    Ok(Prepared {
        given: given.clone(),
        program,
        program_args: program_args.to_vec(),
        exe,
        start,
        warnings,
        out_dir,
        env,
    })
}

/// An OpenMP program runs its parallel loops in a team of threads, and only the main thread
/// is traced: unless the user chose a thread count, it runs with one, which runs every
/// iteration in the main thread (the outlined bodies are traced as callbacks of the runtime).
/// The runtime is known by the functions the program imports from it.
fn openmp_env(exe: &symbols::ElfFile, warnings: &mut Vec<String>) -> Vec<(OsString, OsString)> {
    let imports = exe.got_imports();
    let runtime = if imports.values().any(|n| n.starts_with("GOMP_")) {
        "libgomp"
    } else if imports.values().any(|n| n.starts_with("__kmpc_")) {
        "libomp"
    } else {
        return Vec::new();
    };
    match std::env::var_os("OMP_NUM_THREADS") {
        Some(n) if n != "1" => {
            warnings.push(format!(
                "the program uses OpenMP ({runtime}) and OMP_NUM_THREADS is {}: its worker \
                 threads run natively and untraced, so each parallel loop is analysed on the \
                 main thread's share of its iterations (unset OMP_NUM_THREADS to trace them all)",
                n.to_string_lossy()
            ));
            Vec::new()
        }
        Some(_) => Vec::new(),
        None => {
            warnings.push(format!(
                "the program uses OpenMP ({runtime}): it ran with one OpenMP thread \
                 (OMP_NUM_THREADS=1 and OMP_THREAD_LIMIT=1, set by polyprof), so that every \
                 iteration of its parallel loops is traced; its own parallel loops are checked \
                 against the dependences observed"
            ));
            let mut env = vec![("OMP_NUM_THREADS".into(), "1".into())];
            // The thread limit caps the teams a program asks for itself too
            // (`omp_set_num_threads(8)`, a `num_threads(4)` clause), which OMP_NUM_THREADS
            // does not; a limit the user set stays.
            if std::env::var_os("OMP_THREAD_LIMIT").is_none() {
                env.push(("OMP_THREAD_LIMIT".into(), "1".into()));
            }
            env
        }
    }
}

/// glibc's AVX-512 (EVEX) features, masked for the traced program.
const NO_AVX512: &str =
    "glibc.cpu.hwcaps=-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-AVX512ER,-AVX512PF";

/// On a CPU with AVX-512, glibc picks EVEX-encoded string functions (`__strcmp_evex`,
/// `__memmove_avx512_unaligned_erms`), which the emulate engine does not run: each call would
/// stop the program and run natively (about 40 us against 3 us, `make bench`). Masking
/// AVX-512 in glibc's tunables makes it pick the AVX2 ones, with the same results. A user's
/// own GLIBC_TUNABLES stays as it is.
fn glibc_env() -> Option<(OsString, OsString)> {
    let avx512 = std::arch::is_x86_feature_detected!("avx512f");
    (avx512 && std::env::var_os("GLIBC_TUNABLES").is_none())
        .then(|| ("GLIBC_TUNABLES".into(), NO_AVX512.into()))
}

/// A run recorded: what the reports need, and the first pass when it ran during tracing.
pub struct Recorded {
    pub info: RunInfo,
    pub exe: symbols::ElfFile,
    pub recording: Recording,
    pub first: Option<feedback::pipeline::FirstPass>,
    pub out_dir: PathBuf,
}

/// The recording thread's consumer: the analysis's first pass, or nothing (`record`).
struct MaybeFirst(Option<feedback::pipeline::FirstPass>);

impl EventSink for MaybeFirst {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
        match &mut self.0 {
            Some(f) => f.event(ev),
            None => Ok(()),
        }
    }
}

/// Stage 2, tracing: runs the program under the engine and keeps the recording in the output
/// directory; `first_pass`: feeds the analysis's first pass on the recording thread.
/// `Err(status)`: polyprof could not start the program (said why).
pub fn trace(
    p: Prepared,
    run: &RunArgs,
    first_pass: bool,
    ui: Ui,
) -> anyhow::Result<Result<Recorded, i32>> {
    // A signal from here on ends the run with a report; before the handlers, it would kill
    // polyprof (the program, started under PTRACE_O_EXITKILL, with it).
    signals::install(ui.quiet).context("installing the signal handlers")?;

    let mut opts = RunOptions::new(p.program.clone(), p.program_args.clone(), p.start.clone());
    opts.argv0 = p.given.clone();
    opts.trace_libs = run.trace_libs;
    opts.max_instructions = run.max_instructions;
    opts.interrupt = Some(&signals::INTERRUPTED);
    opts.env = p.env.clone();
    let launched = match run.engine {
        EngineKind::Step => StepEngine::launch(opts).map(|e| Box::new(e) as Box<dyn Engine>),
        EngineKind::Emulate => {
            ptrace_runner::EmulateEngine::launch(opts).map(|e| Box::new(e) as Box<dyn Engine>)
        }
    };
    let mut engine = match launched {
        Ok(e) => e,
        Err(e) => {
            error!(ui, "{e}");
            return Ok(Err(EXIT_USAGE));
        }
    };
    // The program stands at its first instruction: nothing of it ran yet. The output
    // directory is touched only now that it can run. (On an early return, dropping the
    // engine kills the program.)
    match recording::prepare_output(&p.out_dir) {
        Ok(Some(old)) => say!(ui, "kept the earlier output as {}", old.display()),
        Ok(None) => {}
        Err(e) => {
            error!(ui, "{e}");
            return Ok(Err(EXIT_USAGE));
        }
    }
    let events_file = recording::start(&p.out_dir, &p.exe)?;
    signals::set_child(engine.pid());

    // The first pass of the analysis runs on the recording thread while the program is traced.
    let consumer = MaybeFirst(first_pass.then(|| {
        feedback::pipeline::FirstPass::new(symbols::Loaded::new(&p.exe, engine.load_bias()))
    }));
    let recorder = Recorder::spawn_into(events_file, consumer)
        .with_context(|| format!("creating the event recording in {}", p.out_dir.display()))?;
    let mut counters = Counters::new(ui);
    let t0 = Instant::now();
    let mut sink = Tee(&mut counters, recorder);
    let result = engine.run(&mut sink);
    let seconds = t0.elapsed().as_secs_f64();
    signals::set_child(0);
    let Tee(_, recorder) = sink;
    counters.finish();
    let summary = result.context("tracing the program")?;
    let (recording, MaybeFirst(first)) =
        recorder.finish().context("finishing the event recording")?;
    let run_end = RunEnd {
        summary: &summary,
        counters: &counters,
        seconds,
        events: recording.events(),
        bytes: recording.bytes() as u64,
        crc32: recording.crc32(),
        interrupted: signals::interrupted(),
    };
    let info = run_info(&p, run, &run_end, ui);
    recording::finish(&p.out_dir, &info)?;
    Ok(Ok(Recorded {
        info,
        exe: p.exe,
        recording,
        first,
        out_dir: p.out_dir,
    }))
}

/// How a traced run ended, as the engine and the counters saw it.
struct RunEnd<'a> {
    summary: &'a ptrace_runner::RunSummary,
    counters: &'a Counters,
    seconds: f64,
    /// Events recorded, their size in bytes and CRC-32.
    events: u64,
    bytes: u64,
    crc32: u32,
    /// The signal that interrupted polyprof, if one did.
    interrupted: Option<i32>,
}

/// What the recording keeps of a run: the program, the trace and its warnings, how it ended.
fn run_info(p: &Prepared, run: &RunArgs, end: &RunEnd<'_>, ui: Ui) -> RunInfo {
    let (summary, counters, interrupted) = (end.summary, end.counters, end.interrupted);
    let mut warnings = p.warnings.clone();
    warnings.extend(summary.warnings.iter().cloned());
    if let Some(sig) = interrupted {
        warnings.push(format!(
            "tracing was interrupted ({}); the program was killed and the trace covers what ran until then",
            signal_name(sig)
        ));
    }
    if !summary.complete
        && run
            .max_instructions
            .is_some_and(|m| summary.instructions >= m)
    {
        warnings.push(format!(
            "tracing stopped after {} instructions (--max-instructions); the program finished natively",
            summary.instructions
        ));
    }
    for w in &summary.warnings {
        say!(ui, "warning: {w}");
    }

    let (exit_code, signal) = match summary.exit {
        Some(ExitStatus::Code(c)) => (Some(c), None),
        Some(ExitStatus::Signal(s)) => (None, Some(signal_name(s))),
        None => (None, None),
    };
    // The signal that killed the program, unless polyprof killed it.
    let fault = match (summary.exit, summary.last_signal) {
        (Some(ExitStatus::Signal(s)), Some(last)) if last.signo == s && interrupted.is_none() => {
            Some(recording::Fault::from(last))
        }
        _ => None,
    };
    let exit_status = match interrupted {
        Some(sig) => 128 + sig,
        None => summary.exit.map_or(EXIT_USAGE, ExitStatus::shell_code),
    };
    RunInfo {
        format: recording::FORMAT,
        events_format: ptrace_runner::record::FORMAT,
        polyprof_version: env!("CARGO_PKG_VERSION").to_string(),
        events: end.events,
        events_bytes: Some(end.bytes),
        events_crc32: Some(end.crc32),
        argv0: p.given.to_string_lossy().into_owned(),
        program: reports::Program {
            path: p.program.display().to_string(),
            args: p
                .program_args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            exit_code,
            signal,
        },
        trace: reports::Trace {
            engine: summary.engine.to_string(),
            instructions: summary.instructions,
            emulated_percent: 100.0 * summary.emulated as f64 / summary.instructions.max(1) as f64,
            stepped_percent: if summary.instructions == 0 {
                0.0
            } else {
                100.0 * (summary.instructions - summary.emulated) as f64
                    / summary.instructions as f64
            },
            complete: summary.complete && interrupted.is_none(),
            warnings,
            start: match &p.start {
                StartAt::Address { name, .. } => name.clone(),
                StartAt::Entry => "entry point".to_string(),
            },
            trace_libs: run.trace_libs,
            native_calls: counters.native_calls,
            syscalls: counters.syscalls,
            signals: counters.signals,
            interrupted: interrupted.is_some(),
            seconds: end.seconds,
            native_cost: regions::native_cost(summary),
        },
        load_bias: summary.load_bias,
        fault,
        exit_status,
        build_id: p.exe.build_id(),
        debug_file: p.exe.debug_file().is_some(),
        program_crc32: recording::file_crc32(&recording::Paths::new(&p.out_dir).program()),
        debug_crc32: p
            .exe
            .debug_file()
            .and_then(|_| recording::file_crc32(&recording::Paths::new(&p.out_dir).debug())),
    }
}
