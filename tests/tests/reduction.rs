//! Reductions (issue 18): associative updates carried by a loop are reported as reductions,
//! with their operator, and look-alikes (a prefix sum, a scan, Horner's rule, an alternating
//! difference, `s = s + s * a[i]`) are not. `tests/kernels/red_cases.c` marks each loop with
//! `MARK <case>`; every loop is its own region.

use serde_json::Value;
use tests::{polyprof_bin, profile_every_loop, region_at_mark};

const KERNEL: &str = "red_cases";

/// report.json of the kernel at `opt`, every loop a region.
fn profile(opt: &str) -> Value {
    profile_every_loop(polyprof_bin!(), KERNEL, &[opt, "-g"], &["-lm"]).report()
}

/// The region rooted at the loop marked `case`.
fn region<'r>(r: &'r Value, case: &str) -> &'r Value {
    region_at_mark(r, KERNEL, case)
}

/// The operators of the reductions the region's parallelize suggestion names, or `None`
/// when it has no parallelize suggestion.
fn parallel_reductions(reg: &Value) -> Option<Vec<String>> {
    let s = reg["suggestions"]
        .as_array()?
        .iter()
        .find(|s| s["kind"] == "parallelize")?;
    Some(
        s["reduction"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .map(|r| r["op"].as_str().unwrap_or("?").to_string())
                    .collect()
            })
            .unwrap_or_default(),
    )
}

fn check(opt: &str) {
    let r = profile(opt);
    tests::assert_every_loop_answered(&r, opt);
    let mut wrong = Vec::new();
    for (case, op) in [
        ("int_sum", "+"),
        ("fp_product", "*"),
        ("array_reduction", "+"),
    ] {
        let reg = region(&r, case);
        match parallel_reductions(reg) {
            Some(ops) if ops == [op] => {}
            other => wrong.push(format!(
                "{case}: expected parallel with reduction({op}: ...), got {other:?}; why not: {}",
                reg["why_not"]
            )),
        }
    }
    for case in ["prefix_sum", "scan", "horner", "alternating", "self_square"] {
        let reg = region(&r, case);
        if let Some(ops) = parallel_reductions(reg) {
            wrong.push(format!(
                "{case} is no reduction, yet called parallel (reductions {ops:?}): {:#}",
                reg["suggestions"]
            ));
        } else {
            let why = reg["why_not"].as_str().unwrap_or("");
            assert!(
                why.contains("carries a flow dependence"),
                "{case} at {opt}: the why-not should name the carried flow dependence: {why}"
            );
        }
    }
    // The floating-point reductions say they reassociate; the integer one does not.
    for (case, fp) in [
        ("int_sum", false),
        ("fp_product", true),
        ("array_reduction", true),
    ] {
        let reg = region(&r, case);
        let s = reg["suggestions"]
            .as_array()
            .and_then(|ss| ss.iter().find(|s| s["kind"] == "parallelize"));
        if let Some(s) = s {
            assert_eq!(
                s["reduction"][0]["reassociates"].as_bool(),
                Some(fp),
                "{case} at {opt}: {s:#}"
            );
            // The clause, or (for storage debug information does not name, which no clause
            // can spell) the clause to put on the variable it holds; never `<register ...>`.
            let text = s["text"].as_str().unwrap_or("");
            assert!(
                (text.contains("reduction(") || text.contains("a `reduction` clause on"))
                    && !text.contains("reduction(+: <"),
                "{case} at {opt}: the text should give the clause: {text}"
            );
        }
    }
    // The array reduction names the array, and the inner loop parallel without one.
    let s = &region(&r, "array_reduction")["suggestions"];
    let text = s
        .as_array()
        .and_then(|ss| ss.iter().find(|s| s["kind"] == "parallelize"))
        .and_then(|s| s["text"].as_str())
        .unwrap_or("");
    assert!(
        text.contains("reduction(+: y)") && text.contains("Alternatively"),
        "at {opt}: {text}"
    );
    assert!(wrong.is_empty(), "at {opt}:\n{}", wrong.join("\n"));
}

#[test]
fn reductions_at_o0() {
    check("-O0");
}

#[test]
fn reductions_at_o2() {
    check("-O2");
}
