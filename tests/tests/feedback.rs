//! Folding and polyhedral feedback (issues 5 and 6), end to end: C kernels compiled at test
//! time, profiled by the polyprof binary, checked in report.json.

use serde_json::Value;
use tests::{line_of, polyprof_bin};

fn profile(name: &str, flags: &[&str], args: &[&str]) -> Value {
    tests::profile_report(polyprof_bin!(), name, flags, args)
}

fn region(r: &Value) -> &Value {
    let regions = r["regions"].as_array().expect("regions");
    assert!(!regions.is_empty(), "no region in {r:#}");
    &regions[0]
}

/// The region holding a statement at source line `ln`.
fn region_at(r: &Value, ln: u32) -> &Value {
    r["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|reg| {
            reg["statements"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| line(s) == u64::from(ln))
        })
        .unwrap_or_else(|| panic!("no region with a statement at line {ln}: {r:#}"))
}

fn line(v: &Value) -> u64 {
    v["location"]["line"].as_u64().unwrap_or(0)
}

fn loop_at(reg: &Value, ln: u32) -> &Value {
    reg["all_loops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| line(l) == u64::from(ln))
        .unwrap_or_else(|| panic!("no loop at line {ln}: {:#}", reg["all_loops"]))
}

fn suggestion<'a>(reg: &'a Value, kind: &str) -> Option<&'a Value> {
    reg["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == kind)
}

fn kinds(reg: &Value) -> Vec<String> {
    reg["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap().to_string())
        .collect()
}

fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn matmul_ijk() {
    let r = profile("dep_matmul", &["-O0", "-g"], &["8"]);
    let reg = region(&r);
    let loops = reg["loops"].as_array().unwrap();
    assert_eq!(loops.len(), 3, "{:#}", reg["loops"]);
    let par: Vec<bool> = loops.iter().map(|l| l["parallel"] == true).collect();
    assert_eq!(par, [true, true, false], "i and j parallel, k not");
    assert!(
        loops.iter().all(|l| l["permutable"] == true),
        "a permutable 3-D band"
    );
    let id = |k: usize| loops[k]["id"].as_str().unwrap().to_string();
    let ic = suggestion(reg, "interchange").expect("an interchange");
    assert_eq!(ids(&ic["loops"]), [id(0), id(2), id(1)], "k outside j");
    assert_eq!(reg["metrics"]["tile_depth"], 3);
    assert!(suggestion(reg, "tile").is_some());
    // Each suggestion names source lines.
    for s in reg["suggestions"].as_array().unwrap() {
        assert!(s["text"].as_str().unwrap().contains("dep_matmul.c:"), "{s}");
    }
    assert!(!reg["ast_before"].as_str().unwrap().is_empty());
    assert!(!reg["ast_after"].as_str().unwrap().is_empty());
}

#[test]
fn column_wise_traversal_gets_an_interchange() {
    let r = profile("fb_colwise", &["-O1", "-g"], &["16"]);
    let reg = region(&r);
    let (j, i) = (
        line_of("fb_colwise", "COL_J"),
        line_of("fb_colwise", "COL_I"),
    );
    let (lj, li) = (loop_at(reg, j), loop_at(reg, i));
    let ic = suggestion(reg, "interchange").expect("an interchange");
    assert_eq!(
        ids(&ic["loops"]),
        [li["id"].as_str().unwrap(), lj["id"].as_str().unwrap()]
    );
    assert!(reg["metrics"]["preuse_percent"].as_f64() > reg["metrics"]["reuse_percent"].as_f64());
}

#[test]
fn gauss_seidel_is_skewed_then_tiled() {
    let r = profile("fb_gauss", &["-O1", "-g"], &["32", "8"]);
    let reg = region(&r);
    let t = line_of("fb_gauss", "GS_T");
    let i = line_of("fb_gauss", "GS_I");
    assert_eq!(loop_at(reg, t)["parallel"], false);
    assert_eq!(
        loop_at(reg, i)["parallel"],
        false,
        "no parallel loop as written"
    );
    let k = kinds(reg);
    assert!(!k.contains(&"parallelize".to_string()), "{k:?}");
    assert!(
        k.contains(&"skew".to_string()) && k.contains(&"tile".to_string()),
        "{k:?}"
    );
    assert_eq!(reg["metrics"]["skew"], true);
}

/// Number parsers read their string and nothing hidden: Rodinia nn's distance loop, which
/// parses each record with `atof`, is parallel (it was serial while `atof` was unknown
/// library code, taken to have state of its own).
#[test]
fn a_loop_parsing_records_with_atof_is_parallel() {
    for opt in ["-O0", "-O2"] {
        let r = profile("fb_atof", &[opt, "-g"], &["64"]);
        let reg = region_at(&r, line_of("fb_atof", "NN_I") + 3);
        let l = loop_at(reg, line_of("fb_atof", "NN_I"));
        assert_eq!(l["parallel"], true, "{opt}: {l:#}");
        assert!(
            suggestion(reg, "parallelize").is_some(),
            "{opt}: {:#}",
            reg["suggestions"]
        );
    }
}

#[test]
fn jacobi_spatial_loops_are_parallel() {
    let r = profile("fb_jacobi", &["-O1", "-g"], &["32", "8"]);
    let reg = region(&r);
    assert_eq!(
        loop_at(reg, line_of("fb_jacobi", "JA_T"))["parallel"],
        false
    );
    assert_eq!(
        loop_at(reg, line_of("fb_jacobi", "JA_I1"))["parallel"],
        true
    );
    assert_eq!(
        loop_at(reg, line_of("fb_jacobi", "JA_I2"))["parallel"],
        true
    );
    assert!(suggestion(reg, "parallelize").is_some());
}

#[test]
fn backprop_layer_is_interprocedural_with_interchange_and_vectorize() {
    let r = profile("fb_backprop", &["-O1", "-g"], &["32", "16"]);
    let reg = region(&r);
    assert_eq!(reg["function"], "layerforward");
    assert_eq!(reg["interprocedural"], true, "it calls exp from libm");
    let k = kinds(reg);
    assert!(
        k.contains(&"interchange".to_string()) && k.contains(&"vectorize".to_string()),
        "{k:?}"
    );
    let (j, kk) = (
        line_of("fb_backprop", "BP_J"),
        line_of("fb_backprop", "BP_K"),
    );
    let ic = suggestion(reg, "interchange").unwrap();
    assert_eq!(
        ids(&ic["loops"]),
        [
            loop_at(reg, kk)["id"].as_str().unwrap(),
            loop_at(reg, j)["id"].as_str().unwrap()
        ]
    );
}

#[test]
fn a_recurrence_is_not_parallelized_and_why_not_names_the_dependence() {
    let r = profile("fb_recur", &["-O1", "-g"], &["64", "1.5"]);
    let reg = region(&r);
    assert!(
        suggestion(reg, "parallelize").is_none(),
        "{:#}",
        reg["suggestions"]
    );
    let why = reg["why_not"].as_str().expect("why_not");
    let body = line_of("fb_recur", "RC_BODY");
    assert!(why.contains("carries a flow dependence"), "{why}");
    assert!(why.contains(&format!("fb_recur.c:{body}")), "{why}");
    // isl's notation, as isl prints it.
    assert!(why.contains("-1 + i0"), "names the relation: {why}");
}

#[test]
fn triangular_solve_folds_to_an_exact_triangle() {
    let n = 12u64;
    let r = profile("fb_trisolve", &["-O1", "-g"], &["12"]);
    let body = line_of("fb_trisolve", "TRI_BODY");
    let reg = region_at(&r, body);
    let inner: Vec<&Value> = reg["statements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| line(s) == u64::from(body) && s["ops"].as_u64() == Some(n * (n - 1) / 2))
        .collect();
    assert!(
        !inner.is_empty(),
        "a statement runs sum(i<N) i times: {:#}",
        reg["statements"]
    );
    for s in inner {
        assert_eq!(s["exact"], true, "{s}");
        let d = s["domain"].as_str().unwrap();
        // One piece: the triangle `0 <= i1 <= i0` (or `< i0`, with the outer counter shifted).
        assert!(!d.contains(';'), "{d}");
        assert!(
            d.contains("i1 <= i0") || d.contains("i1 < i0") || d.contains("i1 <= -1 + i0"),
            "{d}"
        );
    }
}

#[test]
fn matmul_accumulation_folds_to_a_box_with_an_exact_k_minus_1_dependence() {
    let r = profile("dep_matmul", &["-O0", "-g"], &["8"]);
    let reg = region(&r);
    let acc = line_of("dep_matmul", "ACCUMULATE");
    let stmts: Vec<&Value> = reg["statements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| line(s) == u64::from(acc))
        .collect();
    assert!(!stmts.is_empty());
    for s in &stmts {
        assert_eq!(s["ops"], 512, "{s}");
        let d = s["domain"].as_str().unwrap();
        assert!(
            d.contains("0 <= i0 <= 7") && d.contains("0 <= i1 <= 7") && d.contains("0 <= i2 <= 7"),
            "the full 3-D box: {d}"
        );
    }
    let names: Vec<&str> = stmts.iter().map(|s| s["id"].as_str().unwrap()).collect();
    let carried: Vec<&Value> = reg["dependences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| {
            d["kind"] == "flow"
                && names.contains(&d["sink"].as_str().unwrap())
                && names.contains(&d["source"].as_str().unwrap())
                && d["relation"].as_str().unwrap().contains("-1 + i2")
        })
        .collect();
    assert!(!carried.is_empty(), "{:#}", reg["dependences"]);
    assert!(carried.iter().all(|d| d["exact"] == true), "{carried:#?}");
}

#[test]
fn a_gather_is_flagged_not_affine() {
    let r = profile("fb_gather", &["-O1", "-g"], &["64"]);
    let body = line_of("fb_gather", "GA_BODY");
    let reg = region_at(&r, body);
    let loads: Vec<&Value> = reg["statements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| line(s) == u64::from(body))
        .collect();
    assert!(!loads.is_empty(), "{:#}", reg["statements"]);
    assert!(loads.iter().any(|s| s["exact"] == false), "{loads:#?}");
    assert!(reg["affine_percent"].as_f64().unwrap() < 100.0);
}
