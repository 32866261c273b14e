//! Property tests, non-affine: random point sets and labels are covered (every point inside a
//! piece, every label value inside its component), approximate where not exact, with a bounded
//! number of pieces; exact pieces stay truthful.
mod common;
use common::*;
use folder::{FoldOptions, Folded, Label, StreamFolder};
use std::collections::HashMap;

/// Exact pieces contain only input points, with their labels.
fn assert_exact_pieces_truthful(points: &Pts, f: &Folded, what: &str) {
    let map: HashMap<&Vec<i64>, &Vec<i64>> = points.iter().map(|(p, l)| (p, l)).collect();
    for p in f.pieces.iter().filter(|p| p.exact) {
        let mut n = 0;
        p.domain.for_each_point(1_000_000, |pt| {
            n += 1;
            let l = map
                .get(&pt.to_vec())
                .unwrap_or_else(|| panic!("{what}: {pt:?} invented"));
            let vals: Vec<Option<i64>> = l.iter().map(|v| Some(*v)).collect();
            assert_eq!(p.label_values(pt), vals, "{what}: label at {pt:?}");
        });
        assert_eq!(n, p.points, "{what}");
    }
}

fn random_set(r: &mut Rng) -> (usize, usize, Pts) {
    let d = r.range(1, 3) as usize;
    let l = r.range(0, 3) as usize;
    let side = match d {
        1 => 400,
        2 => 24,
        _ => 9,
    };
    let keep = r.range(20, 100) as u64;
    let affine_comp = r.chance(50);
    let mut pts = Pts::new();
    let mut x = vec![0i64; d];
    loop {
        if r.chance(keep) {
            let lab = (0..l)
                .map(|c| {
                    if c == 0 && affine_comp {
                        0x7fff_0000_0000 + x.iter().map(|v| 8 * v).sum::<i64>()
                    } else {
                        r.range(-1 << 40, 1 << 40)
                    }
                })
                .collect();
            pts.push((x.clone(), lab));
        }
        // Next point of the box, lexicographically.
        let mut j = d;
        loop {
            if j == 0 {
                return (d, l, pts);
            }
            j -= 1;
            x[j] += 1;
            if x[j] < side {
                break;
            }
            x[j] = 0;
        }
    }
}

#[test]
fn random_sets_are_covered() {
    let tight = FoldOptions {
        max_pieces_per_slice: 2,
        max_pieces_per_stream: 3,
        ..FoldOptions::default()
    };
    for (opts, name) in [(FoldOptions::default(), "default"), (tight, "tight")] {
        let mut approx = 0;
        for seed in 0..300 {
            let mut r = Rng::new(1000 + seed);
            let (d, l, pts) = random_set(&mut r);
            let f = fold(&pts, d, l, &opts);
            let what = format!("{name} seed {seed}");
            assert_covers(&pts, &f, &what);
            assert_exact_pieces_truthful(&pts, &f, &what);
            // At most the stream's pieces plus one box.
            assert!(f.pieces.len() <= opts.max_pieces_per_stream + 1, "{what}");
            assert!(
                f.pieces.iter().filter(|p| !p.domain_exact).count() <= 1,
                "{what}"
            );
            if !f.is_exact() {
                approx += 1;
                assert!(f.exact_fraction() < 1.0, "{what}");
            }
        }
        assert!(approx > 200, "{name}: only {approx} approximate");
    }
}

#[test]
fn random_values_on_an_affine_domain_are_demoted_to_ranges() {
    // A full rectangle whose first label is an affine address and second a data value: the
    // value is demoted to a range early, the domain and the address keep folding exactly.
    let mut r = Rng::new(8);
    let mut pts = Pts::new();
    for i in 0..64 {
        for j in 0..64 {
            pts.push((vec![i, j], vec![4096 + 8 * j + 512 * i, r.range(0, 1000)]));
        }
    }
    let f = fold(&pts, 2, 2, &FoldOptions::default());
    assert_covers(&pts, &f, "rect");
    assert!(!f.is_exact());
    assert!(!f.is_scev());
    assert!(f.pieces.len() <= 3, "{}", f.to_isl_map("S", "T"));
    let big = f.pieces.iter().max_by_key(|p| p.points).expect("a piece");
    assert!(big.domain_exact && !big.exact);
    assert!(big.points >= 63 * 64);
    assert_eq!(
        big.labels[0],
        Label::Affine {
            coeffs: vec![512, 8],
            constant: 4096
        }
    );
    assert!(matches!(big.labels[1], Label::Range { min, max } if min >= 0 && max <= 1000));
    // Every piece keeps the address affine.
    assert!(f.pieces.iter().all(|p| p.labels[0].is_affine()));
    // Without demotion the value fragments the domain into a box. (Its address stays affine
    // for most value sequences; in about 1 in 100, values that happen to be affine on a few
    // points make pieces the box cannot align with, and it keeps the address as a range,
    // which still covers every point.)
    let opts = FoldOptions {
        demote_after_breaks: 0,
        ..FoldOptions::default()
    };
    let f = fold(&pts, 2, 2, &opts);
    assert_covers(&pts, &f, "rect, no demotion");
    let b = f.pieces.iter().find(|p| !p.domain_exact).expect("a box");
    assert!(b.points > 60 * 64);
    assert_eq!(
        b.labels[0],
        Label::Affine {
            coeffs: vec![512, 8],
            constant: 4096
        }
    );
}

#[test]
fn csr_like_rows_are_boxed() {
    // for i: for jc in 0..len(i): address = base + 8 * (rowptr[i] + jc), len data-dependent.
    let mut r = Rng::new(3);
    let mut pts = Pts::new();
    let mut rowptr = 0;
    for i in 0..500 {
        let len = r.range(0, 12);
        for jc in 0..len {
            pts.push((vec![i, jc], vec![0x5000 + 8 * (rowptr + jc), i, jc - 1]));
        }
        rowptr += len;
    }
    let f = fold(&pts, 2, 3, &FoldOptions::default());
    assert_covers(&pts, &f, "csr");
    assert!(f.exact_fraction() < 0.5, "{}", f.exact_fraction());
    assert!(f.pieces.len() <= 65);
    // The producer coordinates (i, jc - 1) stay affine across the irregular rows.
    let b = f.pieces.iter().find(|p| !p.exact).expect("a box");
    assert!(b.labels[1].is_affine() && b.labels[2].is_affine(), "{b:?}");
    assert!(!b.labels[0].is_affine());
}

#[test]
fn out_of_order_points_are_still_covered() {
    let pts: Pts = vec![
        (vec![0, 0], vec![1]),
        (vec![0, 1], vec![2]),
        (vec![0, 1], vec![3]),
        (vec![0, 0], vec![4]),
        (vec![1, 0], vec![5]),
    ];
    let f = fold(&pts, 2, 1, &FoldOptions::default());
    assert_covers(&pts, &f, "unordered");
    assert!(!f.is_exact());
}

#[test]
fn state_stays_bounded_on_long_streams() {
    let opts = FoldOptions::default();
    let mut r = Rng::new(11);
    let mut f = StreamFolder::new(2, 1, &opts);
    let mut most = 0;
    for i in 0..300 {
        for j in 0..1000 {
            if r.chance(60) {
                f.push(&[i, j], &[r.range(0, 1 << 30)]);
            }
        }
        most = most.max(f.live_pieces());
    }
    // Levels: open groups and a box each; the top: its exact pieces and a box.
    assert!(
        most <= opts.max_pieces_per_slice + 1 + opts.max_pieces_per_stream + 1 + 1,
        "{most}"
    );
    let folded = f.finish();
    assert!(folded.pieces.len() <= opts.max_pieces_per_stream + 1);
}

#[test]
fn extreme_values_never_panic_and_stay_covered() {
    let specials = [i64::MIN, i64::MIN + 1, -1, 0, 1, 2, i64::MAX - 1, i64::MAX];
    for seed in 0..300 {
        let mut r = Rng::new(50_000 + seed);
        let d = r.range(0, 3) as usize;
        let l = r.range(0, 2) as usize;
        let val = |r: &mut Rng| {
            if r.chance(50) {
                r.pick(&specials)
            } else {
                r.next_u64() as i64 >> r.range(0, 62)
            }
        };
        let mut pts: Pts = (0..r.range(0, 60))
            .map(|_| {
                let p = (0..d).map(|_| val(&mut r)).collect();
                let lab = (0..l).map(|_| val(&mut r)).collect();
                (p, lab)
            })
            .collect();
        if seed % 2 == 0 {
            pts.sort();
            pts.dedup_by(|a, b| a.0 == b.0);
        }
        let opts = FoldOptions {
            max_pieces_per_slice: r.range(1, 4) as usize,
            max_pieces_per_stream: r.range(1, 6) as usize,
            ..FoldOptions::default()
        };
        let f = fold(&pts, d, l, &opts);
        assert_covers(&pts, &f, &format!("seed {seed}"));
        let _ = (
            f.to_isl_set("S"),
            f.to_isl_map("S", "T"),
            f.is_scev(),
            f.exact_fraction(),
        );
    }
}

#[test]
fn labels_that_overflow_midway_are_split_not_wrapped() {
    // label = 2^59 * (i + j) wraps around i64 past a point: the folder must not fold through.
    let mut pts = Pts::new();
    for i in 0..12i64 {
        for j in 0..12i64 {
            pts.push((vec![i, j], vec![(i + j).wrapping_mul(1 << 59)]));
        }
    }
    let f = fold(&pts, 2, 1, &FoldOptions::default());
    assert_covers(&pts, &f, "wrap");
    if f.is_exact() {
        assert_exact(&pts, &f, "wrap");
    }
}

#[test]
fn rows_through_pointer_arrays_keep_an_exact_domain() {
    // for k: for j: load conn[k][j]: each row at its own (data-dependent) base address, affine in
    // j only. The domain is a rectangle; the address cannot be affine in k.
    let mut r = Rng::new(9);
    let mut pts = Pts::new();
    for k in 0..200 {
        let row = 0x6000_0000 + r.range(0, 1 << 20) * 64;
        for j in 0..50 {
            pts.push((vec![k, j], vec![row + 8 * j, k, j]));
        }
    }
    let f = fold(&pts, 2, 3, &FoldOptions::default());
    assert_covers(&pts, &f, "conn");
    let big = f.pieces.iter().max_by_key(|p| p.points).expect("a piece");
    assert!(big.domain_exact, "{}", f.to_isl_map("S", "T"));
    assert!(big.points > 150 * 50, "{}", f.to_isl_map("S", "T"));
    assert!(!big.labels[0].is_affine());
    assert!(big.labels[1].is_affine() && big.labels[2].is_affine());
    assert!(f.pieces.len() <= 5, "{}", f.to_isl_map("S", "T"));
}
