//! A flag a loop only raises (`tests/kernels/flag_or.c`, Rodinia bfs's `stop = true;`, read
//! after the loop by `while (stop)`) or only lowers (`all = false;`): the parallel advice is
//! `reduction(||: stop)` / `reduction(&&: all)`, never `private`, which would lose the flag,
//! whether gcc stores the flag (-O0) or selects it with a conditional move that reads its old
//! value (-O2). Each printed directive (`parallel for`, and `simd` where printed), inserted as
//! written before its loop, keeps the program's output over 10 runs with two threads.
//! An integer flag set to one constant (`tests/kernels/flag_int.c`'s `found = 1;`, read
//! after the loop) is `lastprivate(conditional: found)`: `private(found)` lost it.

use serde_json::Value;
use tests::{compile, line_of, polyprof_bin, pragma_keeps_output, run_stdout};

const KERNEL: &str = "flag_or";

/// The directive the suggestion of `kernel`'s loop at `line` prints (`starts`: how its text
/// begins, `directive`: how the directive does), if there is one.
fn printed(
    report: &Value,
    kernel: &str,
    starts: &str,
    line: u32,
    directive: &str,
) -> Option<String> {
    let label = format!("{starts} {kernel}.c:{line} ");
    let text = report["regions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["suggestions"].as_array().into_iter().flatten())
        .filter_map(|s| s["text"].as_str())
        .find(|t| t.starts_with(&label))?;
    let start = text.find(&format!("`{directive}"))?;
    let rest = &text[start + 1..];
    Some(rest[..rest.find('`').unwrap_or(rest.len())].to_string())
}

/// `kernel` compiled with `flags` and run under polyprof: its native output and the report.
fn profiled(kernel: &str, flags: &[&str]) -> (String, Value) {
    let k = compile(kernel, &[flags, &["-g"]].concat());
    let native = run_stdout(&k.path, false);
    let path = k.path.to_string_lossy().into_owned();
    let r = tests::polyprof(
        polyprof_bin!(),
        &["--region-threshold", "1", path.as_str()],
        b"",
    );
    assert_eq!(r.output.code(), 0, "{}", r.output.stderr);
    (native, r.report())
}

fn check(flags: &[&str]) {
    let (native, report) = profiled(KERNEL, flags);
    for (mark, clause) in [
        ("MARK raise", "reduction(||: stop)"),
        ("MARK lower", "reduction(&&: all)"),
    ] {
        let line = line_of(KERNEL, mark);
        let pragma = printed(
            &report,
            KERNEL,
            "Run loop",
            line,
            "#pragma omp parallel for",
        )
        .unwrap_or_else(|| panic!("no parallelize suggestion for line {line}: {report:#}"));
        assert!(
            pragma.contains(clause) && !pragma.contains("private"),
            "at {flags:?}: {pragma}"
        );
        pragma_keeps_output(KERNEL, line, &pragma, &native, &format!("{flags:?}"));
        if let Some(simd) = printed(&report, KERNEL, "Vectorize loop", line, "#pragma omp simd") {
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

/// `flag_int.c`'s flags set to one integer constant, whatever the value before the loop
/// (`0`, `-5`, `42`, never set): `lastprivate(conditional: v)` in the printed `parallel for`
/// (and `simd`, where printed), never `private(v)`, each keeping the output. `seen`, which the
/// loop also reads (`if (!seen && ...)`), is no such flag: whatever is printed for its loop
/// keeps the output too.
fn check_int(flags: &[&str]) {
    const INT: &str = "flag_int";
    let (native, report) = profiled(INT, flags);
    let what = format!("{flags:?}");
    for (mark, var) in [
        ("MARK found", "found"),
        ("MARK mark", "mark"),
        ("MARK none", "none"),
    ] {
        let line = line_of(INT, mark);
        let clause = format!("lastprivate(conditional: {var})");
        let pragma = printed(&report, INT, "Run loop", line, "#pragma omp parallel for")
            .unwrap_or_else(|| panic!("no parallelize suggestion for line {line}: {report:#}"));
        assert!(
            pragma.contains(&clause) && !pragma.contains(&format!("private({var}")),
            "at {what}: {pragma}"
        );
        pragma_keeps_output(INT, line, &pragma, &native, &what);
        if let Some(simd) = printed(&report, INT, "Vectorize loop", line, "#pragma omp simd") {
            assert!(simd.contains(&clause), "at {what}: {simd}");
            pragma_keeps_output(INT, line, &simd, &native, &what);
        }
    }
    let line = line_of(INT, "MARK read");
    for (starts, directive) in [
        ("Run loop", "#pragma omp parallel for"),
        ("Vectorize loop", "#pragma omp simd"),
    ] {
        if let Some(p) = printed(&report, INT, starts, line, directive) {
            assert!(!p.contains("private(seen)"), "at {what}: {p}");
            pragma_keeps_output(INT, line, &p, &native, &what);
        }
    }
}

#[test]
fn integer_flags_in_memory_at_o0() {
    check_int(&["-O0"]);
}

#[test]
fn integer_flags_vectorized_at_o2() {
    check_int(&["-O2"]);
}

/// The loop table's entry of `kernel`'s loop at `line`.
fn loop_at(report: &Value, kernel: &str, line: u32) -> Value {
    report["regions"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["all_loops"].as_array().into_iter().flatten())
        .find(|l| {
            l["location"]["line"] == line
                && l["location"]["file"]
                    .as_str()
                    .is_some_and(|f| f.ends_with(&format!("{kernel}.c")))
        })
        .cloned()
        .unwrap_or_else(|| panic!("no loop at line {line}: {report:#}"))
}

/// A value read only by a comparison (`tests/kernels/cmp_carried.c`'s `if (x > 5)`, `x` set
/// by the previous iteration) is a flow carried by the loop, at -O0 (a compare of memory)
/// and -O2 (of a register): no parallel flag, no parallel or vectorize advice, not even
/// "after privatizing `x`". Both were advised. The control loop compares a value computed
/// earlier in the same iteration: it stays parallel. A sum whose partial value the loop
/// compares (`p += c[i]; if (p > 2000)`) is no reduction (it was advised as one at -O2, where
/// gcc compares the register the sum is added into).
#[test]
fn a_value_only_compared_is_carried() {
    let kernel = "cmp_carried";
    let line = line_of(kernel, "MARK carried");
    let control = line_of(kernel, "MARK control");
    let partial = line_of(kernel, "MARK partial");
    for opt in ["-O0", "-O2"] {
        let (_, report) = profiled(kernel, &[opt]);
        let l = loop_at(&report, kernel, line);
        assert_eq!(l["parallel"], false, "{opt}: {l:#}");
        assert_eq!(l["reduction"], false, "{opt}: {l:#}");
        let after = l["parallel_after"].as_array().cloned().unwrap_or_default();
        assert!(after.is_empty(), "{opt}: {l:#}");
        let carries = l["carries"].as_array().cloned().unwrap_or_default();
        assert!(carries.iter().any(|c| c == "flow"), "{opt}: {l:#}");
        let why = l["why_not"].as_str().unwrap_or("");
        assert!(
            why.contains("comparison") && why.contains("`x`") && why.len() < 300,
            "{opt}: {l:#}"
        );
        assert!(
            printed(&report, kernel, "Run loop", line, "#pragma").is_none()
                && printed(&report, kernel, "Vectorize loop", line, "#pragma").is_none(),
            "{opt}: parallel or vectorize advice for a loop carrying `x`: {report:#}"
        );
        let p = loop_at(&report, kernel, partial);
        assert!(
            p["parallel"] == false && p["reduction"] == false,
            "{opt}: {p:#}"
        );
        assert!(
            printed(&report, kernel, "Run loop", partial, "#pragma").is_none()
                && printed(&report, kernel, "Vectorize loop", partial, "#pragma").is_none(),
            "{opt}: parallel or vectorize advice for a loop comparing a partial sum: {report:#}"
        );
        let c = loop_at(&report, kernel, control);
        assert_eq!(c["parallel"], true, "{opt}: {c:#}");
        assert!(
            printed(
                &report,
                kernel,
                "Run loop",
                control,
                "#pragma omp parallel for"
            )
            .is_some(),
            "{opt}: no parallel advice for the control loop: {report:#}"
        );
    }
}
