//! `make bench`: polyprof at scale, side by side in one run on this machine.
//! - polyprof end to end (the command line: trace, dependences, folding, feedback, reports) on
//!   bench/kernels/bench_loop.c at two trace lengths 8 times apart: instructions per second and
//!   peak resident memory (the goal: at most 1.25 times the memory for 8 times the
//!   instructions);
//! - `valgrind --tool=lackey --trace-mem=yes` and `--tool=callgrind` on the longer run;
//! - microseconds per library call: bench/kernels/calls.c making 100,000 calls of `strlen` or
//!   `memchr` (performed by the emulate engine as listed functions), `atoi` or `strcmp`
//!   (libc's own instructions, glibc's AVX2 code for `strcmp`, run inside the engine), or
//!   10,000 of `getppid` (a system call: run natively, with a ptrace stop per call), against
//!   the same program making none.
//!
//! polyprof runs are repeated (3 by default) and the medians printed: this machine's speed
//! varies from run to run when other work runs beside it. Usage:
//! `cargo build --release -p polyprof && cargo run --release -p bench --bin scale_bench
//! [-- TIME_STEPS [REPEATS]]` (default 500 time steps, about 1.8 M instructions, and 8 times
//! that).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

/// What one run of a command cost.
#[derive(Clone, Copy, Debug)]
struct Cost {
    seconds: f64,
    /// Peak resident set of the command's own process, in KiB.
    peak_kib: u64,
}

/// Runs `cmd` to its end: wall-clock seconds and peak RSS (from `wait4`).
fn measure(cmd: &mut Command) -> Result<Cost> {
    let t0 = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting a benchmark command")?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value; wait4 fills it for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall on our own child, with valid pointers.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let seconds = t0.elapsed().as_secs_f64();
    if r != pid {
        bail!("waiting for a benchmark command failed");
    }
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        let mut err = String::new();
        if let Some(mut e) = child.stderr {
            use std::io::Read;
            let _ = e.read_to_string(&mut err);
        }
        bail!("a benchmark command failed (status {status}): {err}");
    }
    Ok(Cost {
        seconds,
        peak_kib: usage.ru_maxrss as u64,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Instructions polyprof traced and the seconds tracing took, from its report.
fn traced(out: &Path) -> Result<(u64, f64)> {
    let text = std::fs::read_to_string(out.join("report.json"))?;
    let trace = reports::read_json(&text)?.trace;
    Ok((trace.instructions, trace.seconds))
}

/// Medians of polyprof runs.
struct Run {
    instructions: u64,
    /// End to end.
    seconds: f64,
    /// Tracing alone (the engine, with the first pass beside it).
    tracing: f64,
    peak_kib: f64,
}

/// polyprof on `exe args`, `repeats` times.
fn polyprof(bin: &Path, exe: &Path, args: &[&str], dir: &Path, repeats: usize) -> Result<Run> {
    let out = dir.join("out");
    let (mut secs, mut tracing, mut kib) = (Vec::new(), Vec::new(), Vec::new());
    let mut instructions = 0;
    for _ in 0..repeats {
        let c = measure(Command::new(bin).arg("-o").arg(&out).arg(exe).args(args))?;
        secs.push(c.seconds);
        kib.push(c.peak_kib as f64);
        let (n, t) = traced(&out)?;
        instructions = n;
        tracing.push(t);
    }
    Ok(Run {
        instructions,
        seconds: median(secs),
        tracing: median(tracing),
        peak_kib: median(kib),
    })
}

/// Bytes per instruction of the event recording of `exe steps` (emulate engine).
fn recording_bytes(exe: &Path, steps: &str) -> Result<f64> {
    use ptrace_runner::{EmulateEngine, Engine};
    let mut o = bench::main_options(exe, &[steps])?;
    o.stdout = Some(PathBuf::from("/dev/null"));
    let mut engine = EmulateEngine::launch(o)?;
    let mut rec = ptrace_runner::record::Recorder::new_temp(None)?;
    let s = engine.run(&mut rec)?;
    let recording = rec.finish()?;
    Ok(recording.bytes() as f64 / s.instructions.max(1) as f64)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let steps: u64 = args.first().and_then(|s| s.parse().ok()).unwrap_or(500);
    let repeats: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3).max(1);
    let bin = bench::polyprof_binary()?;
    let dir = tempfile::tempdir()?;
    let exe = bench::compile_bench_loop(dir.path())?;
    let calls = dir.path().join("calls");
    bench::compile_c(
        &bench::kernel("calls.c"),
        &calls,
        &["-O1", "-g", "-fno-builtin"],
    )?;
    println!(
        "polyprof at scale: bench/kernels/bench_loop.c (-O1), {steps} and {} time steps; \
         medians of {repeats} runs; {} cores",
        8 * steps,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!();
    println!(
        "{:<46} {:>13} {:>9} {:>14} {:>10}",
        "", "instructions", "seconds", "instr/s", "peak RSS"
    );
    let short = steps.to_string();
    let long = (8 * steps).to_string();
    let r1 = polyprof(&bin, &exe, &[&short], dir.path(), repeats)?;
    let r8 = polyprof(&bin, &exe, &[&long], dir.path(), repeats)?;
    let (n1, s1, k1) = (r1.instructions, r1.seconds, r1.peak_kib);
    let (n8, s8, k8) = (r8.instructions, r8.seconds, r8.peak_kib);
    let row = |what: &str, n: u64, secs: f64, kib: Option<f64>| {
        let rss = kib.map_or(String::new(), |k| format!("{:.1} MB", k / 1024.0));
        println!(
            "{what:<46} {n:>13} {secs:>9.2} {:>14.0} {rss:>10}",
            n as f64 / secs.max(1e-9)
        );
    };
    row("polyprof end to end, 1x", n1, s1, Some(k1));
    row("polyprof end to end, 8x", n8, s8, Some(k8));
    row(
        "polyprof tracing alone (in that run), 8x",
        n8,
        r8.tracing,
        None,
    );

    // valgrind on the longer run, once each (they run the whole program, start-up included).
    let cg_out = dir.path().join("callgrind.out");
    let cg = measure(
        Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}", cg_out.display()))
            .arg(&exe)
            .arg(&long),
    );
    let cg_total = bench::callgrind_total(&cg_out);
    let lk = measure(
        Command::new("valgrind")
            .args(["--tool=lackey", "--trace-mem=yes", "--log-file=/dev/null"])
            .arg(&exe)
            .arg(&long),
    );
    let mut lackey_rate = None;
    match (&lk, cg_total) {
        (Ok(c), Some(n)) => {
            row("valgrind lackey --trace-mem=yes, 8x", n, c.seconds, None);
            lackey_rate = Some(n as f64 / c.seconds);
        }
        _ => println!("valgrind lackey: not run (valgrind missing or failed)"),
    }
    match (&cg, cg_total) {
        (Ok(c), Some(n)) => row("valgrind callgrind, 8x", n, c.seconds, None),
        _ => println!("valgrind callgrind: not run (valgrind missing or failed)"),
    }
    println!();
    println!(
        "peak RSS for 8x the instructions: {:.2}x (goal: at most 1.25x)",
        k8 / k1.max(1.0)
    );
    println!(
        "recording on disk at 8x: {:.3} bytes per instruction (goal: under 1)",
        recording_bytes(&exe, &long)?
    );
    if let Some(lr) = lackey_rate {
        println!(
            "polyprof end to end at 8x is {:.2}x lackey's rate (goal: at least 4x)",
            n8 as f64 / s8 / lr
        );
    }

    // Library calls: the cost of many calls over the same program making none.
    println!();
    let base = polyprof(&bin, &calls, &["0", "strlen"], dir.path(), repeats)?;
    for (func, how, count) in [
        ("strlen", "performed by the emulate engine", 100_000u64),
        ("memchr", "performed by the emulate engine", 100_000),
        ("atoi", "libc's code run inside the engine", 100_000),
        ("strcmp", "glibc's AVX2 code run inside the engine", 100_000),
        (
            "getppid",
            "a system call: run natively, a ptrace stop per call",
            10_000,
        ),
    ] {
        let n = count.to_string();
        let r = polyprof(&bin, &calls, &[&n, func], dir.path(), repeats)?;
        let per = |a: f64, b: f64| 1e6 * (a - b).max(0.0) / count as f64;
        println!(
            "library calls: {:>6.2} us per call of {func} while tracing ({how}; {:.2} us end to \
             end, with the analysis of the loop around it); goal: at most 5 us",
            per(r.tracing, base.tracing),
            per(r.seconds, base.seconds),
        );
    }
    Ok(())
}
