//! Storage and layout advice (issue 7), end to end on C kernels.

use serde_json::Value;
use tests::polyprof_bin;

fn profile(name: &str, flags: &[&str], args: &[&str]) -> Value {
    tests::profile_report(polyprof_bin!(), name, flags, args)
}

fn suggestions(r: &Value) -> Vec<&Value> {
    r["regions"][0]["suggestions"]
        .as_array()
        .unwrap()
        .iter()
        .collect()
}

fn find<'a>(r: &'a Value, kind: &str) -> Option<&'a Value> {
    suggestions(r).into_iter().find(|s| s["kind"] == kind)
}

fn text(s: &Value) -> &str {
    s["text"].as_str().unwrap()
}

#[test]
fn backprop_accumulator_is_expanded_or_mapped_and_the_interchange_says_so() {
    let r = profile("fb_backprop", &["-O1", "-g"], &["32", "16"]);
    let storage = find(&r, "expand_scalar").or_else(|| find(&r, "map_scalar_to_array"));
    let storage = storage.unwrap_or_else(|| panic!("{:#?}", suggestions(&r)));
    assert!(text(storage).contains("fb_backprop.c:"), "{storage}");
    let ic = find(&r, "interchange").expect("interchange");
    assert!(text(ic).contains("Legal after"), "{}", text(ic));
}

#[test]
fn stencil_over_time_is_contracted_to_two_rows() {
    let r = profile("st_stencil", &["-O1", "-g"], &["32", "8"]);
    let c = find(&r, "contract_array").unwrap_or_else(|| panic!("{:#?}", suggestions(&r)));
    assert!(text(c).contains("[t % 2]"), "{}", text(c));
    let sizes: Vec<u64> = c["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(sizes.len(), 2);
    assert!(sizes[1] * 4 <= sizes[0], "2 rows of 9 or fewer: {sizes:?}");
}

#[test]
fn array_of_structures_with_two_hot_fields_becomes_a_structure_of_arrays() {
    let r = profile("st_aos", &["-O1", "-g"], &["64", "4"]);
    let a = find(&r, "aos_to_soa").unwrap_or_else(|| panic!("{:#?}", suggestions(&r)));
    let t = text(a);
    assert!(t.contains("records of 56 bytes"), "{t}");
    assert!(t.contains("offsets 0 (8 bytes), 24 (8 bytes)"), "{t}");
}

#[test]
fn column_wise_traversal_gets_a_transposition_beside_the_interchange() {
    let r = profile("fb_colwise", &["-O1", "-g"], &["16"]);
    assert!(find(&r, "interchange").is_some());
    let t = find(&r, "transpose_array").unwrap_or_else(|| panic!("{:#?}", suggestions(&r)));
    assert!(text(t).contains("fb_colwise.c:"), "{t}");
}

#[test]
fn a_temporary_reused_every_iteration_is_privatized() {
    let r = profile("dep_scalar", &["-O0", "-g"], &["16"]);
    // The parallel loop names the privatization it needs, with the temporary's line.
    let par = find(&r, "parallelize").unwrap_or_else(|| panic!("{:#?}", suggestions(&r)));
    assert!(text(par).contains("privatizing"), "{}", text(par));
    let privatize = par["requires"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["change"] == "privatize"))
        .unwrap_or_else(|| panic!("{par}"));
    let lines = privatize["lines"].to_string();
    assert!(lines.contains("dep_scalar.c:"), "{privatize}");
}
