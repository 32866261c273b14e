//! Two sums accumulated in one loop (`tests/kernels/red_pair.c`, Rodinia particlefilter's
//! `xe` and `ye`): at every level the parallel advice names both in `reduction(+: xe, ye)`
//! and privatizes neither, whether the compiler keeps them in a stack frame (-O0: one
//! storage root for both), in registers (-O2), or vectorized in registers debug information
//! names no variable for (-O2 -ffast-math). A sum of calls that each return the same value,
//! which the trace folds into an evolution of the counter (no dependence shows it), is a
//! reduction too, never privatized. Each printed pragma, inserted as written before its loop,
//! keeps the program's output with two threads.

use serde_json::Value;
use tests::{compile, line_of, polyprof_bin, pragma_keeps_output, run_stdout};

const KERNEL: &str = "red_pair";

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

fn check(flags: &[&str]) {
    let k = compile(KERNEL, &[flags, &["-g"]].concat());
    let native = run_stdout(&k.path, false);
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
        pragma_keeps_output(KERNEL, line, &pragma, &native, &format!("{flags:?}"));
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
