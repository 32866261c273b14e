//! Scalar-evolution detection.
mod common;
use common::*;
use folder::FoldOptions;

#[test]
fn induction_variable_is_scev() {
    let base = 0x7fff_1234_5678;
    let pts: Pts = (0..1000).map(|i| (vec![i], vec![4 * i + base])).collect();
    let f = fold(&pts, 1, 1, &FoldOptions::default());
    assert!(f.is_scev());
    // 2-D: a pointer bumped in the inner loop and reset per row, a counter over a triangle.
    let mut pts = Pts::new();
    for i in 0..50 {
        for j in 0..=i {
            pts.push((vec![i, j], vec![base + 800 * i + 8 * j, j + 1]));
        }
    }
    assert!(fold(&pts, 2, 2, &FoldOptions::default()).is_scev());
}

#[test]
fn scev_over_several_pieces() {
    // The domain splits (peeled first row) but the value is one affine function.
    let mut pts = Pts::new();
    for i in 0..20 {
        for j in if i == 0 { 5 } else { 0 }..20 {
            pts.push((vec![i, j], vec![20 * i + j]));
        }
    }
    let f = fold(&pts, 2, 1, &FoldOptions::default());
    assert_eq!(f.pieces.len(), 2);
    assert!(f.is_scev());
    // A one-point piece (peeled, out of the rectangle) whose value is on the same function.
    let mut pts: Pts = vec![(vec![0, 7], vec![7])];
    pts.extend((1..10).flat_map(|i| (0..5).map(move |j| (vec![i, j], vec![i * 100 + j]))));
    let f = fold(&pts, 2, 1, &FoldOptions::default());
    assert_eq!(f.pieces.len(), 2);
    assert!(f.is_scev(), "{f:?}");
    // ... and one whose value is off it.
    pts[0].1[0] = 8;
    let f = fold(&pts, 2, 1, &FoldOptions::default());
    assert!(!f.is_scev(), "{f:?}");
}

#[test]
fn data_dependent_values_are_not_scev() {
    let mut r = Rng::new(5);
    let pts: Pts = (0..1000)
        .map(|i| (vec![i], vec![r.range(0, 1 << 20)]))
        .collect();
    assert!(!fold(&pts, 1, 1, &FoldOptions::default()).is_scev());
    // Affine per piece, different functions: not one SCEV.
    let pts: Pts = (0..100)
        .map(|i| (vec![i], vec![if i < 50 { i } else { 2 * i }]))
        .collect();
    let f = fold(&pts, 1, 1, &FoldOptions::default());
    assert!(f.is_exact());
    assert!(!f.is_scev());
    // No value at all.
    let pts: Pts = (0..10).map(|i| (vec![i], vec![])).collect();
    assert!(!fold(&pts, 1, 0, &FoldOptions::default()).is_scev());
}
