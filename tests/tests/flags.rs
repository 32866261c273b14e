//! A flag a loop only raises (`tests/kernels/flag_or.c`, Rodinia bfs's `stop = true;`, read
//! after the loop by `while (stop)`) or only lowers (`all = false;`): the parallel advice is
//! `reduction(||: stop)` / `reduction(&&: all)`, never `private`, which would lose the flag,
//! whether gcc stores the flag (-O0) or selects it with a conditional move that reads its old
//! value (-O2). Each printed directive (`parallel for`, and `simd` where printed), inserted as
//! written before its loop, keeps the program's output over 10 runs with two threads.

use serde_json::Value;
use tests::{compile, line_of, polyprof_bin, pragma_keeps_output, run_stdout};

const KERNEL: &str = "flag_or";

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
        pragma_keeps_output(KERNEL, line, &pragma, &native, &format!("{flags:?}"));
        if let Some(simd) = printed(&report, "Vectorize loop", line, "#pragma omp simd") {
            assert!(simd.contains(clause), "at {flags:?}: {simd}");
            pragma_keeps_output(KERNEL, line, &simd, &native, &format!("{flags:?}"));
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
