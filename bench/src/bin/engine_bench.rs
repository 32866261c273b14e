//! The engines side by side on one kernel of several million instructions, in one run:
//! - polyprof `emulate`, end to end through the on-disk event recording;
//! - polyprof `step` on a prefix (`max_instructions`, default 100 K);
//! - `valgrind --tool=lackey --trace-mem=yes` (its trace to /dev/null);
//! - `valgrind --tool=callgrind`.
//!
//! Prints instructions per second for each and the shares of instructions the emulator ran
//! itself and single-stepped. Usage:
//! `cargo run --release -p bench --bin engine_bench [-- TIME_STEPS [STEP_PREFIX]]`
//! (default 2500 time steps of bench/kernels/bench_loop.c at -O1, about 5.3 M instructions).
//!
//! The valgrind tools run the whole program (dynamic loader and libc start-up included), polyprof
//! traces from `main`: each rate divides the instructions that tool processed by its own time.

use anyhow::Result;
use ptrace_runner::record::Recorder;
use ptrace_runner::{EmulateEngine, Engine, NullSink, RunOptions, StepEngine};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// `exe steps` from `main`, its output discarded.
fn main_options(exe: &Path, steps: &str) -> Result<RunOptions> {
    let mut o = bench::main_options(exe, &[steps])?;
    o.stdout = Some(PathBuf::from("/dev/null"));
    Ok(o)
}

fn rate(n: u64, secs: f64) -> f64 {
    n as f64 / secs.max(1e-9)
}

/// Runs valgrind with `tool_args`; returns the wall-clock seconds, or `None` if valgrind is
/// missing or failed.
fn valgrind(tool_args: &[&str], exe: &Path, steps: &str) -> Option<f64> {
    let t0 = Instant::now();
    let status = Command::new("valgrind")
        .args(tool_args)
        .arg(exe)
        .arg(steps)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    status.success().then(|| t0.elapsed().as_secs_f64())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let steps = args.first().cloned().unwrap_or_else(|| "2500".into());
    let prefix: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let dir = tempfile::tempdir()?;
    let exe = bench::compile_bench_loop(dir.path())?;
    println!("polyprof engine benchmark: bench/kernels/bench_loop.c (-O1), {steps} time steps");

    // emulate, end to end through the recording.
    let t0 = Instant::now();
    let mut engine = EmulateEngine::launch(main_options(&exe, &steps)?)?;
    let mut rec = Recorder::new_temp(None)?;
    let s = engine.run(&mut rec)?;
    let recording = rec.finish()?;
    let emu_secs = t0.elapsed().as_secs_f64();
    // The rest of polyprof on that recording: control structure, dependences, folding,
    // regions and their isl feedback.
    let elf = symbols::ElfFile::open(&exe)?;
    let t1 = Instant::now();
    let profile = feedback::pipeline::profile(
        &recording,
        symbols::Loaded::new(&elf, s.load_bias),
        &feedback::pipeline::PipelineOptions::default(),
    )?;
    let analysis_secs = t1.elapsed().as_secs_f64();
    let mut per_region = Vec::new();
    for r in &profile.regions {
        let t = Instant::now();
        feedback::analyze_region(&r.input, &feedback::Options::default())?;
        per_region.push((
            r.id.clone(),
            r.input.statements.len(),
            t.elapsed().as_secs_f64(),
        ));
    }
    drop(recording);
    let (pages_now, pages_peak) = engine.executor().cache_pages();
    drop(engine);

    // emulate into a null sink: the engine alone.
    let t0 = Instant::now();
    let mut engine = EmulateEngine::launch(main_options(&exe, &steps)?)?;
    let s_null = engine.run(&mut NullSink)?;
    let null_secs = t0.elapsed().as_secs_f64();
    drop(engine);

    // step, on a prefix.
    let mut o = main_options(&exe, &steps)?;
    o.max_instructions = Some(prefix);
    let t0 = Instant::now();
    let mut engine = StepEngine::launch(o)?;
    let mut rec = Recorder::new_temp(None)?;
    let st = engine.run(&mut rec)?;
    let step_secs = t0.elapsed().as_secs_f64();
    drop(engine);

    // valgrind.
    let cg_out = dir.path().join("callgrind.out");
    let cg_arg = format!("--callgrind-out-file={}", cg_out.display());
    let cg_secs = valgrind(&["--tool=callgrind", &cg_arg], &exe, &steps);
    let cg_total = bench::callgrind_total(&cg_out);
    let lk_secs = valgrind(
        &["--tool=lackey", "--trace-mem=yes", "--log-file=/dev/null"],
        &exe,
        &steps,
    );

    println!();
    println!(
        "{:<52} {:>14} {:>9} {:>14}",
        "", "instructions", "seconds", "instr/s"
    );
    let row = |what: &str, n: u64, secs: f64| {
        println!("{what:<52} {n:>14} {secs:>9.2} {:>14.0}", rate(n, secs));
    };
    row(
        "polyprof end to end (emulate, deps, folding, feedback)",
        s.instructions,
        emu_secs + analysis_secs,
    );
    row(
        "polyprof emulate (engine + recording)",
        s.instructions,
        emu_secs,
    );
    row(
        "polyprof emulate (engine alone, null sink)",
        s_null.instructions,
        null_secs,
    );
    row(
        &format!("polyprof step (prefix of {prefix})"),
        st.instructions,
        step_secs,
    );
    match (lk_secs, cg_total) {
        (Some(t), Some(n)) => row("valgrind lackey --trace-mem=yes (whole program)", n, t),
        _ => println!("valgrind lackey: not run (valgrind missing or failed)"),
    }
    match (cg_secs, cg_total) {
        (Some(t), Some(n)) => row("valgrind callgrind (whole program)", n, t),
        _ => println!("valgrind callgrind: not run (valgrind missing or failed)"),
    }
    println!();
    let share = |k: u64| 100.0 * k as f64 / s.instructions.max(1) as f64;
    println!(
        "emulate: {:.3}% of instructions emulated, {:.3}% single-stepped ({} stepped); \
         page cache {} pages at the end, {} at most",
        share(s.emulated),
        share(s.instructions - s.emulated),
        s.instructions - s.emulated,
        pages_now,
        pages_peak
    );
    println!(
        "emulate end to end is {:.0}x the step engine",
        rate(s.instructions, emu_secs) / rate(st.instructions, step_secs)
    );
    if let (Some(t), Some(n)) = (lk_secs, cg_total) {
        println!(
            "polyprof end to end is {:.2}x lackey's rate (the engine and recording alone: {:.2}x)",
            rate(s.instructions, emu_secs + analysis_secs) / rate(n, t),
            rate(s.instructions, emu_secs) / rate(n, t)
        );
    }
    println!(
        "analysis after tracing: {analysis_secs:.2} s ({:.0} ns per instruction); {} instruction \
         streams and {} dependence streams folded",
        1e9 * analysis_secs / s.instructions.max(1) as f64,
        profile.streams.0,
        profile.streams.1
    );
    for (id, n, secs) in per_region {
        println!(
            "feedback stage, region {id}: {n} statements in {:.0} ms",
            secs * 1e3
        );
    }
    Ok(())
}
