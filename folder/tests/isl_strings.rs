//! isl strings: exact expected text for the shapes the report shows. (Each string below was
//! checked to parse in isl.)
mod common;
use common::*;
use folder::FoldOptions;

fn folded(pts: &Pts) -> folder::Folded {
    fold(pts, pts[0].0.len(), pts[0].1.len(), &FoldOptions::default())
}

/// `pts` fold into the set `set` of statement `stmt` and the map `map` to `target`.
fn assert_strings(pts: &Pts, stmt: &str, set: &str, target: &str, map: &str) {
    let f = folded(pts);
    assert_eq!(f.to_isl_set(stmt), set);
    assert_eq!(f.to_isl_map(stmt, target), map);
}

#[test]
fn rectangle() {
    let mut pts = Pts::new();
    for i in 0..16 {
        for j in 0..43 {
            pts.push((vec![i, j], vec![i, j - 1]));
        }
    }
    assert_strings(
        &pts,
        "S3",
        "{ S3[i0, i1] : 0 <= i0 <= 15 and 0 <= i1 <= 42 }",
        "S1",
        "{ S3[i0, i1] -> S1[i0, i1 - 1] : 0 <= i0 <= 15 and 0 <= i1 <= 42 }",
    );
}

#[test]
fn triangle() {
    let mut pts = Pts::new();
    for i in 0..16 {
        for j in 0..=i {
            pts.push((vec![i, j], vec![0x7fff_0000_0000 + 8 * j + 128 * i]));
        }
    }
    assert_strings(
        &pts,
        "S3",
        "{ S3[i0, i1] : 0 <= i0 <= 15 and 0 <= i1 <= i0 }",
        "A",
        "{ S3[i0, i1] -> A[128i0 + 8i1 + 140733193388032] : 0 <= i0 <= 15 and 0 <= i1 <= i0 }",
    );
}

#[test]
fn strided_1d() {
    let pts: Pts = (0..=10)
        .step_by(2)
        .map(|i| (vec![i], vec![100 - 2 * i]))
        .collect();
    assert_strings(
        &pts,
        "S",
        "{ S[i0] : 0 <= i0 <= 10 and i0 mod 2 = 0 }",
        "T",
        "{ S[i0] -> T[-2i0 + 100] : 0 <= i0 <= 10 and i0 mod 2 = 0 }",
    );
    let pts: Pts = (1..=11).step_by(2).map(|i| (vec![i], vec![])).collect();
    assert_eq!(
        folded(&pts).to_isl_set("S"),
        "{ S[i0] : 1 <= i0 <= 11 and (i0 - 1) mod 2 = 0 }"
    );
}

#[test]
fn strided_with_affine_offset() {
    // for i: for j = i; j <= i + 6; j += 2 (a guard on j - i even).
    let mut pts = Pts::new();
    for i in 0..4 {
        for j in (i..=i + 6).step_by(2) {
            pts.push((vec![i, j], vec![]));
        }
    }
    assert_eq!(
        folded(&pts).to_isl_set("S"),
        "{ S[i0, i1] : 0 <= i0 <= 3 and i0 <= i1 <= i0 + 6 and (-i0 + i1) mod 2 = 0 }"
    );
}

#[test]
fn union_of_pieces_and_ranges() {
    // A peeled first iteration, then a box with a range label.
    let mut pts: Pts = vec![(vec![0], vec![50])];
    pts.extend((1..10).map(|i| (vec![i], vec![3 * i])));
    assert_strings(
        &pts,
        "S",
        "{ S[i0] : i0 = 0; S[i0] : 1 <= i0 <= 9 }",
        "T",
        "{ S[i0] -> T[50] : i0 = 0; S[i0] -> T[3i0] : 1 <= i0 <= 9 }",
    );
    let opts = FoldOptions {
        max_pieces_per_slice: 1,
        max_pieces_per_stream: 1,
        ..FoldOptions::default()
    };
    let pts: Pts = [5, 1, 9, 2, 7]
        .iter()
        .enumerate()
        .map(|(i, v)| (vec![i as i64], vec![*v, 0]))
        .collect();
    let f = fold(&pts, 1, 2, &opts);
    assert!(!f.is_exact());
    assert_eq!(
        f.to_isl_map("S", "T"),
        "{ S[i0] -> T[o0, 0] : 0 <= i0 <= 4 and 1 <= o0 <= 9 }"
    );
}

#[test]
fn zero_dims_and_empty() {
    let f = fold(&vec![(vec![], vec![42])], 0, 1, &FoldOptions::default());
    assert_eq!(f.to_isl_set("S"), "{ S[] }");
    assert_eq!(f.to_isl_map("S", "T"), "{ S[] -> T[42] }");
    let f = fold(&Pts::new(), 2, 1, &FoldOptions::default());
    assert_eq!(f.to_isl_set("S"), "{  }");
    let f = fold(&vec![(vec![3, 5], vec![])], 2, 0, &FoldOptions::default());
    assert_eq!(f.to_isl_set("S"), "{ S[i0, i1] : i0 = 3 and i1 = 5 }");
    assert_eq!(
        f.to_isl_map("S", "T"),
        "{ S[i0, i1] -> T[] : i0 = 3 and i1 = 5 }"
    );
}
