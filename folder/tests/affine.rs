//! Property tests, affine: random affine nests fold exactly, re-enumerate to the input, in few
//! pieces; and the named shapes of issue 5, each with its expected number of pieces.
mod common;
use common::*;
use folder::{FoldOptions, Label};

#[test]
fn random_affine_nests_fold_exactly() {
    let opts = FoldOptions::default();
    let mut hist = [0usize; 9];
    for seed in 0..3000 {
        let mut r = Rng::new(seed);
        let nest = Nest::random(&mut r);
        let pts = nest.points();
        let f = fold(&pts, nest.d, nest.lab_c.len(), &opts);
        let what = format!("seed {seed}: {nest:?}");
        assert_exact(&pts, &f, &what);
        let np = f.pieces.len();
        hist[np.min(8)] += 1;
        // Unit inner steps: at most the peeled slice, the two sides of a gap, and one split where
        // an inner zero-trip condition bends a bound (a min of two affine functions).
        let unit_inner = nest.stride[1..].iter().all(|s| *s == 1);
        let bound = if unit_inner { 3 } else { 6 };
        assert!(np <= bound, "{what}: {np} pieces: {}", f.to_isl_set("S"));
        // Plain nests (no peel, no gap, constant inner bounds) fold to one piece.
        let rectangular = nest
            .lo_a
            .iter()
            .chain(&nest.cnt_a)
            .flatten()
            .all(|a| *a == 0);
        if rectangular && nest.peel.is_none() && nest.gap.is_none() && !pts.is_empty() {
            assert_eq!(np, 1, "{what}: {}", f.to_isl_set("S"));
        }
    }
    assert!(hist[1] > 1500, "{hist:?}");
}

fn nest2(rows: impl Iterator<Item = i64> + Clone, cols: impl Fn(i64) -> Vec<i64>) -> Pts {
    let mut pts = Pts::new();
    for i in rows {
        for j in cols(i) {
            // A descending address near the top of the user address space, and the value 4*i+j.
            pts.push((
                vec![i, j],
                vec![0x7fff_0000_0000 - 8 * j - 1024 * i, 4 * i + j],
            ));
        }
    }
    pts
}

fn check(pts: &Pts, pieces: usize, what: &str) -> folder::Folded {
    let f = fold(pts, pts[0].0.len(), pts[0].1.len(), &FoldOptions::default());
    assert_exact(pts, &f, what);
    assert_eq!(f.pieces.len(), pieces, "{what}: {}", f.to_isl_set("S"));
    f
}

#[test]
fn named_shapes() {
    let n = 12;
    check(&nest2(0..n, |_| (0..n).collect()), 1, "rectangle");
    check(&nest2(0..n, |i| (0..=i).collect()), 1, "triangle j <= i");
    check(&nest2(0..n, |i| (i..n).collect()), 1, "triangle j >= i");
    check(
        &nest2(0..n, |i| (0..i).collect()),
        1,
        "j < i, zero-trip first row",
    );
    check(
        &nest2(0..n, |i| (i + 1..n).collect()),
        1,
        "j > i, zero-trip last row",
    );
    check(
        &nest2(0..n, |i| (i + 3..2 * n).collect()),
        1,
        "shifted start",
    );
    check(
        &nest2(0..n, |_| (0..n).step_by(2).collect()),
        1,
        "inner guard j % 2 == 0",
    );
    check(
        &nest2(0..n, |_| (1..n).step_by(2).collect()),
        1,
        "inner guard j % 2 == 1",
    );
    check(
        &nest2((1..n).step_by(2), |i| (0..=i).collect()),
        1,
        "outer guard, triangle",
    );
    check(
        &nest2(0..n, |i| (0..=2 * i).step_by(2).collect()),
        1,
        "strided triangle",
    );
    check(
        &nest2(0..n, |i| {
            if i == 0 {
                (3..n).collect()
            } else {
                (0..n).collect()
            }
        }),
        2,
        "peeled first row",
    );
    check(
        &nest2(0..n, |i| if i == 5 { vec![] } else { (0..n).collect() }),
        2,
        "zero-trip row in the middle",
    );
    check(
        &nest2(0..n, |i| if i == 1 { vec![] } else { (0..=i).collect() }),
        2,
        "gap after the first row",
    );
    let f = check(&nest2(0..1, |_| (0..n).collect()), 1, "one row");
    assert_eq!(
        f.to_isl_set("S"),
        "{ S[i0, i1] : i0 = 0 and 0 <= i1 <= 11 }"
    );
    // 1-D: peeled first iteration, gap after it, and a descending address.
    let one = |xs: &[i64]| -> Pts { xs.iter().map(|x| (vec![*x], vec![1000 - 4 * x])).collect() };
    check(&one(&[0, 1, 2, 3, 4]), 1, "1-D");
    check(&one(&[0, 2, 3, 4, 5]), 2, "1-D gap after the first point");
    check(&one(&[0, 1, 3, 4]), 2, "1-D gap in the middle");
    let mut peeled = one(&[0, 1, 2, 3, 4]);
    peeled[0].1[0] = 7;
    check(&peeled, 2, "1-D peeled first label");
}

#[test]
fn tetrahedron_3d() {
    let n = 9;
    let mut pts = Pts::new();
    for i in 0..n {
        for j in 0..=i {
            for k in j..=i {
                pts.push((vec![i, j, k], vec![8 * (k + n * j), i - 1, j, k - 1]));
            }
        }
    }
    let f = check(&pts, 1, "tetrahedron");
    assert_eq!(
        f.to_isl_map("S", "T"),
        "{ S[i0, i1, i2] -> T[8i1*9 + 8i2, i0 - 1, i1, i2 - 1] : 0 <= i0 <= 8 and 0 <= i1 <= i0 and i1 <= i2 <= i0 }"
            .replace("8i1*9", "72i1")
    );
}

#[test]
fn labels_of_a_dependence_stream() {
    // Consumer (i, j) for j >= 1 reads what (i, j - 1) wrote: label = producer coordinates.
    let mut pts = Pts::new();
    for i in 0..16 {
        for j in 1..43 {
            pts.push((vec![i, j], vec![i, j - 1]));
        }
    }
    let f = check(&pts, 1, "dependence");
    assert_eq!(
        f.pieces[0].labels,
        vec![
            Label::Affine {
                coeffs: vec![1, 0],
                constant: 0
            },
            Label::Affine {
                coeffs: vec![0, 1],
                constant: -1
            },
        ]
    );
    assert_eq!(
        f.to_isl_map("S4", "S4"),
        "{ S4[i0, i1] -> S4[i0, i1 - 1] : 0 <= i0 <= 15 and 1 <= i1 <= 42 }"
    );
}

#[test]
fn large_addresses_and_overflow_do_not_break_exactness() {
    // Labels at the ends of i64: differences overflow, the folder must not fold through them.
    let pts: Pts = vec![
        (vec![0], vec![i64::MIN]),
        (vec![1], vec![i64::MAX]),
        (vec![2], vec![i64::MIN]),
        (vec![3], vec![0]),
        (vec![4], vec![i64::MAX - 1]),
    ];
    let f = fold(&pts, 1, 1, &FoldOptions::default());
    assert_exact(&pts, &f, "extremes");
    let pts: Pts = (0..100)
        .map(|i| (vec![i], vec![i64::MAX - 100 + i]))
        .collect();
    let f = check(&pts, 1, "near i64::MAX");
    assert!(f.is_scev());
}
