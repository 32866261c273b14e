//! Streams with zero, one or two points; zero-dimensional streams; malformed input; fold_all.
mod common;
use common::*;
use folder::{fold_all, FoldOptions, StreamFolder};

#[test]
fn empty_stream() {
    let f = StreamFolder::new(3, 2, &FoldOptions::default()).finish();
    assert_eq!(f.points, 0);
    assert!(f.pieces.is_empty());
    assert!(f.is_exact());
    assert!(!f.is_scev());
    assert_eq!(f.exact_fraction(), 1.0);
}

#[test]
fn one_and_two_points() {
    for d in 0..4usize {
        for l in 0..3usize {
            let p1 = (vec![3; d], vec![-7; l]);
            let pts = vec![p1.clone()];
            let f = fold(&pts, d, l, &FoldOptions::default());
            assert_exact(&pts, &f, "one point");
            assert_eq!(f.pieces.len(), 1);
            assert_eq!(f.is_scev(), l > 0);
            if d == 0 {
                continue;
            }
            let mut p2 = p1.clone();
            p2.0[d - 1] = 9;
            p2.1.iter_mut().for_each(|v| *v = 23);
            let pts = vec![p1, p2];
            let f = fold(&pts, d, l, &FoldOptions::default());
            assert_exact(&pts, &f, "two points");
            assert_eq!(f.pieces.len(), 1);
            assert_eq!(f.is_scev(), l > 0);
        }
    }
    // Two points differing in an outer dim, and two whose label step is not a multiple of the
    // domain step (no integer slope: two pieces).
    let pts: Pts = vec![(vec![0, 5], vec![1]), (vec![4, 2], vec![2])];
    let f = fold(&pts, 2, 1, &FoldOptions::default());
    assert_exact(&pts, &f, "outer pair");
    let pts: Pts = vec![(vec![0], vec![0]), (vec![2], vec![1])];
    let f = fold(&pts, 1, 1, &FoldOptions::default());
    assert_exact(&pts, &f, "non-integral slope");
    assert_eq!(f.pieces.len(), 2);
}

#[test]
fn zero_dimensional_streams() {
    let pts: Pts = vec![(vec![], vec![1, 2])];
    let f = fold(&pts, 0, 2, &FoldOptions::default());
    assert_exact(&pts, &f, "0-d");
    // Repeats of the empty point are out of order: counted, covered, approximate.
    let pts: Pts = vec![(vec![], vec![1]), (vec![], vec![1]), (vec![], vec![5])];
    let f = fold(&pts, 0, 1, &FoldOptions::default());
    assert_covers(&pts, &f, "0-d repeats");
    assert!(!f.is_exact());
}

#[test]
fn malformed_points_are_rejected_not_fatal() {
    let mut f = StreamFolder::new(2, 1, &FoldOptions::default());
    f.push(&[0, 0], &[1]);
    f.push(&[0], &[1]);
    f.push(&[0, 1], &[]);
    f.push(&[0, 1], &[2]);
    let f = f.finish();
    assert_eq!(f.rejected, 2);
    assert_eq!(f.points, 2);
    assert!(!f.is_exact());
    assert_eq!(f.exact_fraction(), 1.0);
}

#[test]
fn fold_all_matches_sequential_folding() {
    let mut streams = Vec::new();
    for seed in 0..64u64 {
        let mut r = Rng::new(seed);
        let nest = Nest::random(&mut r);
        streams.push((seed, nest.points()));
    }
    let opts = FoldOptions::default();
    let par = fold_all(streams.clone(), &opts);
    assert_eq!(par.len(), streams.len());
    for ((k, f), (k2, pts)) in par.iter().zip(&streams) {
        assert_eq!(k, k2);
        assert_eq!(*f, folder::fold_points(pts, &opts));
        if !pts.is_empty() {
            assert_exact(pts, f, "fold_all");
        }
    }
}
