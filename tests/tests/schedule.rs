//! Every region gets an answer (issue 15): triangular, modulo, table-building and
//! data-dependent loops, compiled at test time and profiled end to end. isl may not fail on
//! them, triangular nests get loop-transformation advice within the default budget, and
//! regions whose addresses depend on data are reported not affine instead of scheduled.

use serde_json::Value;
use tests::{line_of, polyprof_bin};

fn profile(name: &str, flags: &[&str]) -> Value {
    tests::profile_report(polyprof_bin!(), name, flags, &[])
}

fn regions(r: &Value) -> &Vec<Value> {
    r["regions"].as_array().expect("regions")
}

/// The region whose loops include the one at source line `ln`.
fn region_with_loop(r: &Value, ln: u32) -> &Value {
    regions(r)
        .iter()
        .find(|reg| {
            reg["all_loops"].as_array().is_some_and(|ls| {
                ls.iter()
                    .any(|l| l["location"]["line"].as_u64() == Some(u64::from(ln)))
            })
        })
        .unwrap_or_else(|| panic!("no region with a loop at line {ln}: {r:#}"))
}

fn why_not(reg: &Value) -> &str {
    reg["why_not"].as_str().unwrap_or("")
}

fn kinds(reg: &Value) -> Vec<&str> {
    reg["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["kind"].as_str())
        .collect()
}

/// No region of the report carries an isl failure or a budget stop.
fn assert_no_isl_failure(r: &Value, what: &str) {
    for reg in regions(r) {
        let w = why_not(reg);
        for bad in [
            "isl failed",
            "unable to carry",
            "budget",
            "polyhedral analysis failed",
        ] {
            assert!(!w.contains(bad), "{what} {}: {w}", reg["id"]);
        }
    }
}

#[test]
fn triangular_nests_get_transformation_advice() {
    for (name, marker) in [
        ("sched_trmm", "TRMM_I"),
        ("sched_lu", "LU_I"),
        ("sched_nussinov", "NUSSINOV_I"),
    ] {
        for opt in ["-O0", "-O2"] {
            let r = profile(name, &["-g", opt]);
            assert_no_isl_failure(&r, &format!("{name} {opt}"));
            tests::assert_every_loop_answered(&r, &format!("{name} {opt}"));
            let reg = region_with_loop(&r, line_of(name, marker));
            let k = kinds(reg);
            assert!(
                k.iter()
                    .any(|k| ["tile", "interchange", "skew"].contains(k)),
                "{name} {opt}: no loop-transformation advice: {k:?}, why not: {}",
                why_not(reg)
            );
            let run = &reg["scheduler"];
            assert!(
                run["strategy"].is_string(),
                "{name} {opt}: the scheduler did not answer: {run}"
            );
        }
    }
}

#[test]
fn modulo_and_table_loops_schedule() {
    for opt in ["-O0", "-O2"] {
        let r = profile("sched_tables", &["-g", opt]);
        assert_no_isl_failure(&r, &format!("sched_tables {opt}"));
        tests::assert_every_loop_answered(&r, &format!("sched_tables {opt}"));
        // The table is built by independent iterations (the bit loop inside each is serial).
        let reg = region_with_loop(&r, line_of("sched_tables", "CRC_TABLE"));
        assert!(
            reg["scheduler"]["strategy"].is_string(),
            "{opt}: {:#}",
            reg["scheduler"]
        );
    }
}

#[test]
fn data_dependent_addresses_are_not_affine() {
    let r = profile("sched_hash", &["-g", "-O2"]);
    assert_no_isl_failure(&r, "sched_hash");
    let reg = region_with_loop(&r, line_of("sched_hash", "CHAIN"));
    let w = why_not(reg);
    assert!(w.contains("not affine"), "{w}");
    assert!(w.contains("sched_hash.c:"), "the lines are named: {w}");
    assert!(
        reg["scheduler"].is_null(),
        "a region that is not affine is not scheduled: {}",
        reg["scheduler"]
    );
    let k = kinds(reg);
    assert!(
        !k.iter()
            .any(|k| ["tile", "skew", "fuse", "distribute", "interchange"].contains(k)),
        "{k:?}"
    );
}
