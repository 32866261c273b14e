//! Estimated gains against measured speedups. For each kernel: polyprof profiles it at a small
//! size, the benchmark reads the estimated gain of the advice from report.json, then runs the
//! kernel and the hand-written variant that applies the advice (`-DVARIANT=n` of the same C
//! file) natively at a larger size, and prints the estimate beside the measured speedup of the
//! kernel (the C programs time their kernel themselves and print `seconds S` on stderr).
//!
//! Usage: `cargo build --release -p polyprof && cargo run --release -p bench --bin gain_bench
//! [-- REPS]` (default 5 runs per variant; the fastest counts, as other work on the machine
//! only ever slows a run down).

use anyhow::{bail, Context, Result};
use reports::{Report, SuggestionKind};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One piece of advice to check on a kernel: its kind in report.json and the variant of the C
/// file that applies it.
struct Advice {
    kind: SuggestionKind,
    variant: u32,
}

struct Case {
    name: &'static str,
    source: &'static str,
    flags: &'static [&'static str],
    profile_args: &'static [&'static str],
    /// Arguments of the native runs: one row per size.
    measure_args: &'static [&'static [&'static str]],
    advice: &'static [Advice],
}

const CASES: [Case; 3] = [
    Case {
        name: "matmul i-j-k",
        source: "gain_matmul.c",
        flags: &["-O2", "-g"],
        profile_args: &["32"],
        measure_args: &[&["1000"]],
        advice: &[
            Advice {
                kind: SuggestionKind::Interchange,
                variant: 1,
            },
            Advice {
                kind: SuggestionKind::TransposeArray,
                variant: 2,
            },
        ],
    },
    Case {
        name: "independent rows",
        source: "gain_parallel.c",
        flags: &["-O2", "-g", "-fopenmp"],
        profile_args: &["256", "64"],
        measure_args: &[&["1000000", "200"]],
        advice: &[Advice {
            kind: SuggestionKind::Parallelize,
            variant: 1,
        }],
    },
    Case {
        name: "transpose B = A^T",
        source: "gain_tile.c",
        flags: &["-O2", "-g"],
        profile_args: &["64", "1"],
        // At 1000 the rows a column walk touches fit in the level-2 cache and TLB of the
        // machine measured; at 4000 they do not.
        measure_args: &[&["4000", "3"], &["1000", "48"]],
        advice: &[Advice {
            kind: SuggestionKind::Tile,
            variant: 1,
        }],
    },
];

/// What report.json says of one piece of advice.
struct Estimate {
    rank: u64,
    model: String,
    estimate: Option<f64>,
    skipped: Option<String>,
}

fn main() -> Result<()> {
    let reps: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().context("REPS must be a number")?,
        None => 5,
    };
    let bin = bench::polyprof_binary()?;
    let dir = tempfile::tempdir()?;
    println!(
        "estimated gain of polyprof's advice (profiled small) against the speedup measured natively (large), fastest of {reps} runs"
    );
    println!(
        "{:<20} {:<16} {:>4} {:<12} {:>9} {:>9}  {:<18} {:<18} baseline",
        "kernel", "advice", "rank", "model", "estimate", "measured", "profiled", "measured at"
    );
    for case in &CASES {
        let base = compile(dir.path(), case, 0)?;
        let report = profile(&bin, &base, case, dir.path())?;
        let line = kernel_line(case.source)?;
        for args in case.measure_args {
            let t0 = fastest(&base, args, reps)?;
            for advice in case.advice {
                let est = estimate(&report, advice.kind, line);
                let variant = compile(dir.path(), case, advice.variant)?;
                let t1 = fastest(&variant, args, reps)?;
                row(case, advice, est.as_ref(), args, t0, t1);
            }
        }
    }
    println!(
        "(estimate in parentheses: advice polyprof marked as not paying at the profiled size)"
    );
    Ok(())
}

/// One line of the table, and why polyprof skipped the advice when it did.
fn row(case: &Case, advice: &Advice, est: Option<&Estimate>, args: &[&str], t0: f64, t1: f64) {
    let (rank, model, shown) = match est {
        Some(e) => (
            e.rank.to_string(),
            e.model.clone(),
            match (e.estimate, &e.skipped) {
                (Some(x), None) => format!("{x:.2}x"),
                (Some(x), Some(_)) => format!("({x:.2}x)"),
                (None, _) => "-".to_string(),
            },
        ),
        None => ("-".into(), "not advised".into(), "-".into()),
    };
    println!(
        "{:<20} {:<16} {:>4} {:<12} {:>9} {:>8.2}x  {:<18} {:<18} {:.3} s",
        case.name,
        advice.kind,
        rank,
        model,
        shown,
        t0 / t1,
        case.profile_args.join(" "),
        args.join(" "),
        t0
    );
    if let Some(why) = est.and_then(|e| e.skipped.as_deref()) {
        println!("{:<20} skipped by polyprof: {why}", "");
    }
}

fn compile(dir: &Path, case: &Case, variant: u32) -> Result<PathBuf> {
    let stem = case.source.trim_end_matches(".c");
    let exe = dir.join(format!("{stem}-v{variant}"));
    let define = format!("-DVARIANT={variant}");
    let mut flags: Vec<&str> = case.flags.to_vec();
    flags.push(&define);
    bench::compile_c(&bench::kernel(case.source), &exe, &flags)?;
    Ok(exe)
}

fn profile(bin: &Path, exe: &Path, case: &Case, dir: &Path) -> Result<Report> {
    let out = dir.join(format!("{}.out", case.source));
    let run = Command::new(bin)
        .arg("-o")
        .arg(&out)
        .arg(exe)
        .args(case.profile_args)
        .output()?;
    if !run.status.success() {
        bail!(
            "polyprof failed on {}: {}",
            case.source,
            String::from_utf8_lossy(&run.stderr)
        );
    }
    let text = std::fs::read_to_string(out.join("report.json"))
        .with_context(|| format!("reading the report of {}", case.source))?;
    Ok(reports::read_json(&text)?)
}

/// The line of the kernel's outermost loop, marked `/* KERNEL */` in its source.
fn kernel_line(source: &str) -> Result<u64> {
    let text = std::fs::read_to_string(bench::kernel(source))?;
    let at = text
        .lines()
        .position(|l| l.contains("/* KERNEL */"))
        .with_context(|| format!("no /* KERNEL */ marker in {source}"))?;
    Ok(at as u64 + 1)
}

/// The advice of `kind` in the region of the kernel's loop nest (at `line`).
fn estimate(report: &Report, kind: SuggestionKind, line: u64) -> Option<Estimate> {
    report
        .regions
        .iter()
        .filter(|r| r.location.as_ref().map(|l| u64::from(l.line)) == Some(line))
        .flat_map(|r| &r.suggestions)
        .find(|s| s.kind == kind)
        .map(|s| Estimate {
            rank: s.rank as u64,
            model: s
                .gain
                .as_ref()
                .map_or("none", |g| g.model.as_str())
                .to_string(),
            estimate: s.gain.as_ref().map(|g| g.estimate),
            skipped: s.skipped.as_ref().map(|k| k.text.clone()),
        })
}

/// The fastest of `reps` runs of the kernel, in seconds, as the program reports it.
fn fastest(exe: &Path, args: &[&str], reps: usize) -> Result<f64> {
    let mut best = f64::INFINITY;
    for _ in 0..reps.max(1) {
        let out = Command::new(exe).args(args).output()?;
        if !out.status.success() {
            bail!("{} failed", exe.display());
        }
        let err = String::from_utf8_lossy(&out.stderr);
        let s: f64 = err
            .lines()
            .find_map(|l| l.strip_prefix("seconds "))
            .context("the kernel printed no `seconds` line")?
            .trim()
            .parse()?;
        best = best.min(s);
    }
    Ok(best)
}
