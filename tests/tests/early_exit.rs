//! A loop the source can leave early (`tests/kernels/early_exit.c`, Rodinia b+tree's `find`):
//! the run never takes its `break`, yet the loop table does not call it parallel and no
//! parallel advice is given for it (gcc rejects a `break` under `#pragma omp parallel for`).

use tests::{line_of, polyprof_bin, profile_report};

const KERNEL: &str = "early_exit";

fn check(opt: &str) {
    let line = line_of(KERNEL, "MARK find");
    let r = profile_report(
        polyprof_bin!(),
        KERNEL,
        &[opt, "-g"],
        &["--region-threshold", "1"],
    );
    let at = |l: &serde_json::Value| l["location"]["line"].as_u64() == Some(u64::from(line));
    let regions = r["regions"].as_array().expect("regions");
    let loops: Vec<&serde_json::Value> = regions
        .iter()
        .flat_map(|g| g["all_loops"].as_array().into_iter().flatten())
        .filter(|l| at(l))
        .collect();
    assert!(!loops.is_empty(), "at {opt}: no loop at line {line}: {r:#}");
    for l in loops {
        // A why-not, where the loop has one (a loop with other advice, a tiling here, has
        // none), names the `break`.
        let why = l["why_not"].as_str();
        let exit = format!("leave it early (at {KERNEL}.c:{}", line + 2);
        assert!(
            l["parallel"] == false
                && l["reduction"] == false
                && why.is_none_or(|w| w.contains(&exit)),
            "at {opt}: {l:#}"
        );
    }
    let label = format!("loop {KERNEL}.c:{line} ");
    for s in regions
        .iter()
        .flat_map(|g| g["suggestions"].as_array().into_iter().flatten())
    {
        let text = s["text"].as_str().unwrap_or("");
        assert!(
            !(s["kind"] == "parallelize" && text.contains(&label)),
            "at {opt}: {text}"
        );
    }
}

#[test]
fn no_parallel_advice_for_a_loop_with_a_break_at_o0() {
    check("-O0");
}

#[test]
fn no_parallel_advice_for_a_loop_with_a_break_at_o2() {
    check("-O2");
}
