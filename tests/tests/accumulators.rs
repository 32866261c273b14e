//! Two sums accumulated in one loop (`tests/kernels/red_pair.c`, Rodinia particlefilter's
//! `xe` and `ye`): at every level the parallel advice names both in `reduction(+: xe, ye)`
//! and privatizes neither, whether the compiler keeps them in a stack frame (-O0: one
//! storage root for both), in registers (-O2), or vectorized in registers debug information
//! names no variable for (-O2 -ffast-math). A sum of calls that each return the same value,
//! which the trace folds into an evolution of the counter (no dependence shows it), is a
//! reduction too, never privatized. Each printed pragma, inserted as written before its loop,
//! keeps the program's output with two threads.

use serde_json::Value;
use std::process::Command;
use std::time::Duration;
use tests::{compile, kernels_dir, line_of, polyprof_bin, run_with_timeout};

const KERNEL: &str = "red_pair";
/// Runs of the OpenMP build: a race shows only sometimes.
const OMP_RUNS: usize = 10;

/// The pragma the parallelize suggestion of the marked loop prints.
fn printed_pragma(report: &Value, line: u32) -> String {
    let label = format!("Run loop {KERNEL}.c:{line} ");
    let text = report["regions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["suggestions"].as_array().into_iter().flatten())
        .filter(|s| s["kind"] == "parallelize")
        .filter_map(|s| s["text"].as_str())
        .find(|t| t.starts_with(&label))
        .unwrap_or_else(|| panic!("no parallelize suggestion for line {line}: {report:#}"));
    let start = text
        .find("`#pragma omp parallel for")
        .unwrap_or_else(|| panic!("no pragma in: {text}"));
    let rest = &text[start + 1..];
    rest[..rest.find('`').unwrap_or(rest.len())].to_string()
}

/// Runs `path` (with two OpenMP threads when `omp`), returning its stdout.
fn run(path: &std::path::Path, omp: bool) -> String {
    let mut cmd = Command::new(path);
    if omp {
        cmd.env("OMP_NUM_THREADS", "2");
    }
    let out = run_with_timeout(cmd, b"", Duration::from_secs(20));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    out.stdout
}

fn check(flags: &[&str]) {
    let k = compile(KERNEL, &[flags, &["-g"]].concat());
    let native = run(&k.path, false);
    let path = k.path.to_string_lossy().into_owned();
    let r = tests::polyprof(
        polyprof_bin!(),
        &["--region-threshold", "1", path.as_str()],
        b"",
    );
    assert_eq!(r.output.code(), 0, "{}", r.output.stderr);
    let report = r.report();
    for (mark, clause) in [
        ("MARK pair", "reduction(+: xe, ye)"),
        ("MARK total", "reduction(+: total)"),
    ] {
        let line = line_of(KERNEL, mark);
        let pragma = printed_pragma(&report, line);
        assert!(
            pragma.contains(clause) && !pragma.contains("private"),
            "at {flags:?}: {pragma}"
        );
        applied_keeps_output(line, &pragma, &native, flags);
    }
}

/// The kernel with `pragma` inserted before `line`, built with -fopenmp, prints `native` in
/// every run with two threads.
fn applied_keeps_output(line: u32, pragma: &str, native: &str, flags: &[&str]) {
    let src = std::fs::read_to_string(kernels_dir().join(format!("{KERNEL}.c")))
        .expect("reading the kernel");
    let mut lines: Vec<&str> = src.lines().collect();
    lines.insert(line as usize - 1, pragma);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join(format!("{KERNEL}.c"));
    std::fs::write(&file, lines.join("\n") + "\n").expect("writing the variant");
    let exe = dir.path().join(KERNEL);
    let cc = Command::new("cc")
        .args(["-O2", "-fopenmp", "-o"])
        .arg(&exe)
        .arg(&file)
        .output()
        .expect("running cc");
    assert!(
        cc.status.success(),
        "{pragma}: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    for k in 0..OMP_RUNS {
        assert_eq!(run(&exe, true), native, "run {k} of `{pragma}` ({flags:?})");
    }
}

#[test]
fn two_sums_in_a_frame_at_o0() {
    check(&["-O0"]);
}

#[test]
fn two_sums_in_registers_at_o2() {
    check(&["-O2"]);
}

#[test]
fn two_sums_vectorized_in_one_register() {
    check(&["-O2", "-ffast-math"]);
}
