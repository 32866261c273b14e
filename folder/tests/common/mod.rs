//! Shared helpers of the folder's tests: a deterministic generator and checks.
#![allow(dead_code)]

use folder::{FoldOptions, Folded, StreamFolder};

/// A deterministic generator for test cases.
pub struct Rng(fastrand::Rng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(fastrand::Rng::with_seed(seed))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0.u64(..)
    }
    /// Uniform in lo..=hi.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        self.0.i64(lo..=hi)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.0.u64(..100) < percent
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.0.usize(..xs.len())]
    }
}

pub type Pts = Vec<(Vec<i64>, Vec<i64>)>;

pub fn fold(points: &Pts, dims: usize, labels: usize, opts: &FoldOptions) -> Folded {
    let mut f = StreamFolder::new(dims, labels, opts);
    for (p, l) in points {
        f.push(p, l);
    }
    f.finish()
}

/// The folded stream re-enumerates exactly `points` (points and labels), all pieces exact,
/// point counts consistent.
pub fn assert_exact(points: &Pts, f: &Folded, what: &str) {
    assert!(f.is_exact(), "{what}: not exact: {f:#?}");
    assert_eq!(f.points, points.len() as u64, "{what}");
    assert_eq!(
        f.pieces.iter().map(|p| p.points).sum::<u64>(),
        f.points,
        "{what}"
    );
    let got = f.enumerate();
    let mut want: Vec<(Vec<i64>, Vec<Option<i64>>)> = points
        .iter()
        .map(|(p, l)| (p.clone(), l.iter().map(|v| Some(*v)).collect()))
        .collect();
    want.sort();
    if got != want {
        let extra: Vec<_> = got.iter().filter(|g| !want.contains(g)).take(5).collect();
        let missing: Vec<_> = want.iter().filter(|w| !got.contains(w)).take(5).collect();
        panic!(
            "{what}: re-enumeration differs ({} vs {} points); extra {extra:?}, missing {missing:?}; {f:#?}",
            got.len(),
            want.len()
        );
    }
    // Exact pieces are disjoint and each counts its own points.
    for p in &f.pieces {
        let n = points.iter().filter(|(pt, _)| p.contains(pt)).count() as u64;
        assert_eq!(n, p.points, "{what}: piece point count");
    }
}

/// Every input point is covered with its label; the pieces' counts add up.
pub fn assert_covers(points: &Pts, f: &Folded, what: &str) {
    assert_eq!(f.points, points.len() as u64, "{what}");
    assert_eq!(
        f.pieces.iter().map(|p| p.points).sum::<u64>(),
        f.points,
        "{what}"
    );
    for (p, l) in points {
        assert!(f.covers(p, l), "{what}: {p:?} {l:?} not covered by {f:#?}");
    }
}

/// A random loop nest: dim j runs over `lo_j(x) + s_j * k` for `k in 0..cnt_j(x)`, where `lo_j`
/// and `cnt_j` are affine in the outer dims (triangles, shifted starts, zero-trip loops), with
/// optional peeled first outer iteration, a gap in the outer loop, and affine labels.
#[derive(Debug, Clone)]
pub struct Nest {
    pub d: usize,
    pub lo_c: Vec<i64>,
    pub lo_a: Vec<Vec<i64>>,
    pub cnt_c: Vec<i64>,
    pub cnt_a: Vec<Vec<i64>>,
    pub stride: Vec<i64>,
    /// For x0 == its first value: (dim-1 lo delta, dim-1 count delta, label delta).
    pub peel: Option<(i64, i64, i64)>,
    /// Skipped value of x0.
    pub gap: Option<i64>,
    pub lab_c: Vec<i64>,
    pub lab_a: Vec<Vec<i64>>,
}

impl Nest {
    pub fn random(r: &mut Rng) -> Nest {
        let d = r.range(1, 3) as usize;
        let l = r.range(0, 3) as usize;
        let mut n = Nest {
            d,
            lo_c: vec![],
            lo_a: vec![],
            cnt_c: vec![],
            cnt_a: vec![],
            stride: vec![],
            peel: None,
            gap: None,
            lab_c: vec![],
            lab_a: vec![],
        };
        for j in 0..d {
            let triangular = r.chance(50);
            n.lo_c.push(r.range(0, 4));
            n.lo_a.push(
                (0..j)
                    .map(|_| if triangular { r.range(-1, 1) } else { 0 })
                    .collect(),
            );
            n.cnt_c.push(if j == 0 {
                r.range(1, 9)
            } else {
                r.range(-2, 7)
            });
            n.cnt_a.push(
                (0..j)
                    .map(|_| if triangular { r.range(-1, 1) } else { 0 })
                    .collect(),
            );
            n.stride.push(r.pick(&[1, 1, 1, 1, 2, 3]));
        }
        if d >= 2 && r.chance(25) {
            n.peel = Some((r.range(-1, 2), r.range(-2, 2), r.pick(&[0, 0, 4096])));
        }
        if r.chance(20) {
            n.gap = Some(n.lo_c[0] + n.stride[0] * r.range(1, 4));
        }
        for _ in 0..l {
            let base = match r.range(0, 2) {
                0 => 0,
                1 => r.range(-1000, 1000),
                _ => 0x7fff_0000_0000 + r.range(0, 1 << 20) * 8,
            };
            n.lab_c.push(base);
            n.lab_a.push(
                (0..d)
                    .map(|_| r.pick(&[0, 1, -1, 8, -8, 4, 800, -4096, 3]))
                    .collect(),
            );
        }
        n
    }

    pub fn points(&self) -> Pts {
        let mut out = Pts::new();
        let mut x = vec![0i64; self.d];
        self.rec(0, &mut x, &mut out);
        out
    }

    fn rec(&self, j: usize, x: &mut Vec<i64>, out: &mut Pts) {
        if j == self.d {
            let first0 = x[0] == self.lo_c[0];
            let lab = (0..self.lab_c.len())
                .map(|c| {
                    let mut v = self.lab_c[c];
                    for (m, xm) in x.iter().enumerate() {
                        v += self.lab_a[c][m] * xm;
                    }
                    if first0 {
                        v += self.peel.map_or(0, |p| p.2);
                    }
                    v
                })
                .collect();
            out.push((x.clone(), lab));
            return;
        }
        let mut lo = self.lo_c[j];
        let mut cnt = self.cnt_c[j];
        for (m, xm) in x.iter().enumerate().take(j) {
            lo += self.lo_a[j][m] * xm;
            cnt += self.cnt_a[j][m] * xm;
        }
        if j == 1 && x[0] == self.lo_c[0] {
            if let Some((dl, dc, _)) = self.peel {
                lo += dl;
                cnt += dc;
            }
        }
        for k in 0..cnt.max(0) {
            x[j] = lo + self.stride[j] * k;
            if j == 0 && Some(x[0]) == self.gap {
                continue;
            }
            self.rec(j + 1, x, out);
        }
    }
}
