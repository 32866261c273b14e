//! A flag a loop only raises (`tests/kernels/flag_or.c`, Rodinia bfs's `stop = true;`, read
//! after the loop by `while (stop)`) or only lowers (`all = false;`): the parallel advice is
//! `reduction(||: stop)` / `reduction(&&: all)`, never `private`, which would lose the flag,
//! whether gcc stores the flag (-O0) or selects it with a conditional move that reads its old
//! value (-O2). Each printed directive (`parallel for`, and `simd` where printed), inserted as
//! written before its loop, keeps the program's output over 10 runs with two threads.

use serde_json::Value;
use std::process::Command;
use std::time::Duration;
use tests::{compile, kernels_dir, line_of, polyprof_bin, run_with_timeout};

const KERNEL: &str = "flag_or";
/// Runs of the OpenMP build: a race shows only sometimes.
const OMP_RUNS: usize = 10;

/// The directive the `kind` suggestion of the loop at `line` prints (`starts`: how its text
/// begins, `directive`: how the directive does), if there is one.
fn printed(report: &Value, starts: &str, line: u32, directive: &str) -> Option<String> {
    let label = format!("{starts} {KERNEL}.c:{line} ");
    let text = report["regions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["suggestions"].as_array().into_iter().flatten())
        .filter_map(|s| s["text"].as_str())
        .find(|t| t.starts_with(&label))?;
    let start = text
        .find(&format!("`{directive}"))
        .unwrap_or_else(|| panic!("no directive in: {text}"));
    let rest = &text[start + 1..];
    Some(rest[..rest.find('`').unwrap_or(rest.len())].to_string())
}

/// Runs `path` with two OpenMP threads, returning its stdout.
fn run(path: &std::path::Path) -> String {
    let mut cmd = Command::new(path);
    cmd.env("OMP_NUM_THREADS", "2");
    let out = run_with_timeout(cmd, b"", Duration::from_secs(20));
    assert_eq!(out.code(), 0, "{}", out.stderr);
    out.stdout
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
        assert_eq!(run(&exe), native, "run {k} of `{pragma}` ({flags:?})");
    }
}

fn check(flags: &[&str]) {
    let k = compile(KERNEL, &[flags, &["-g"]].concat());
    let native = run(&k.path);
    let path = k.path.to_string_lossy().into_owned();
    let r = tests::polyprof(
        polyprof_bin!(),
        &["--region-threshold", "1", path.as_str()],
        b"",
    );
    assert_eq!(r.output.code(), 0, "{}", r.output.stderr);
    let report = r.report();
    for (mark, clause) in [
        ("MARK raise", "reduction(||: stop)"),
        ("MARK lower", "reduction(&&: all)"),
    ] {
        let line = line_of(KERNEL, mark);
        let pragma = printed(&report, "Run loop", line, "#pragma omp parallel for")
            .unwrap_or_else(|| panic!("no parallelize suggestion for line {line}: {report:#}"));
        assert!(
            pragma.contains(clause) && !pragma.contains("private"),
            "at {flags:?}: {pragma}"
        );
        applied_keeps_output(line, &pragma, &native, flags);
        if let Some(simd) = printed(&report, "Vectorize loop", line, "#pragma omp simd") {
            assert!(simd.contains(clause), "at {flags:?}: {simd}");
            applied_keeps_output(line, &simd, &native, flags);
        }
    }
}

#[test]
fn flags_in_memory_at_o0() {
    check(&["-O0"]);
}

#[test]
fn flags_selected_by_cmov_at_o2() {
    check(&["-O2"]);
}
