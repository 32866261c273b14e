//! Working pieces: the internal, flat representation the folder manipulates.
//!
//! A working piece ([`Wp`]) lives at a *depth* `k`: dims `k..d` are folded (they carry affine
//! bounds), dims `0..k` are fixed by the caller's prefix (their values are in the bounding box,
//! and every expression has a zero coefficient on them). Every expression is stored over all
//! `d` dims plus a constant, so folding one more outer dim only writes one more coefficient.
//!
//! Expressions, by id: `lo(j) = j`, `hi(j) = d + j` (bounds of dim j, affine in dims `< j`),
//! `lab(c) = 2d + c` (label component c, affine in all dims).
//!
//! Exact pieces: dim j takes the values `lo_j(x), lo_j(x) + s, ..., hi_j(x)` with `s =
//! stride(j)`; `stride(j) == 0` marks a *single-valued* dim (`x_j = lo_j(x)` on the whole piece),
//! whose coefficients in other expressions are free: they can be re-expressed at will with the
//! equality `x_j = lo_j(x)` (this is how one-point runs adopt their neighbours' slopes).
//! Boxes (approximate pieces): the domain is the bounding box; label components are an affine
//! function valid on every absorbed point, or a range; a dim is single-valued when `bmin == bmax`.

use crate::checked::{mul, sub};

#[derive(Clone, Copy, Debug)]
pub(crate) struct Lay {
    pub d: usize,
    pub l: usize,
    /// Length of one expression: d coefficients and a constant.
    pub e: usize,
    base: usize,
}

impl Lay {
    pub fn new(d: usize, l: usize) -> Lay {
        let e = d + 1;
        Lay {
            d,
            l,
            e,
            base: (2 * d + l) * e,
        }
    }
    pub fn len(&self) -> usize {
        self.base + 3 * self.d + 3 * self.l
    }
    pub fn lo(&self, j: usize) -> usize {
        j
    }
    pub fn hi(&self, j: usize) -> usize {
        self.d + j
    }
    pub fn lab(&self, c: usize) -> usize {
        2 * self.d + c
    }
    /// Start offset of expression `x` in the buffer.
    pub fn ex(&self, x: usize) -> usize {
        x * self.e
    }
    pub fn stride_ix(&self, j: usize) -> usize {
        self.base + j
    }
    pub fn bmin_ix(&self, j: usize) -> usize {
        self.base + self.d + j
    }
    pub fn bmax_ix(&self, j: usize) -> usize {
        self.base + 2 * self.d + j
    }
    pub fn lmin_ix(&self, c: usize) -> usize {
        self.base + 3 * self.d + c
    }
    pub fn lmax_ix(&self, c: usize) -> usize {
        self.base + 3 * self.d + self.l + c
    }
    pub fn laff_ix(&self, c: usize) -> usize {
        self.base + 3 * self.d + 2 * self.l + c
    }
    /// Ids of the expressions that may have a coefficient on dim j: bounds of the dims inside j,
    /// and the labels.
    pub fn ids_above(&self, j: usize) -> impl Iterator<Item = usize> {
        let (d, l) = (self.d, self.l);
        (j + 1..d).chain(d + j + 1..2 * d).chain(2 * d..2 * d + l)
    }
}

/// A working piece. See the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct Wp {
    pub b: Vec<i64>,
    pub exact: bool,
    pub points: u64,
}

impl Wp {
    pub fn new(lay: &Lay) -> Wp {
        Wp {
            b: vec![0; lay.len()],
            exact: true,
            points: 0,
        }
    }

    pub fn expr(&self, lay: &Lay, x: usize) -> &[i64] {
        let o = lay.ex(x);
        &self.b[o..o + lay.e]
    }
    pub fn expr_mut(&mut self, lay: &Lay, x: usize) -> &mut [i64] {
        let o = lay.ex(x);
        &mut self.b[o..o + lay.e]
    }
    pub fn set_const_expr(&mut self, lay: &Lay, x: usize, v: i64) {
        let d = lay.d;
        let f = self.expr_mut(lay, x);
        f.fill(0);
        f[d] = v;
    }
    pub fn stride(&self, lay: &Lay, j: usize) -> i64 {
        self.b[lay.stride_ix(j)]
    }
    pub fn bmin(&self, lay: &Lay, j: usize) -> i64 {
        self.b[lay.bmin_ix(j)]
    }
    pub fn bmax(&self, lay: &Lay, j: usize) -> i64 {
        self.b[lay.bmax_ix(j)]
    }
    pub fn laff(&self, lay: &Lay, c: usize) -> bool {
        self.b[lay.laff_ix(c)] != 0
    }

    /// Is dim j single-valued on this piece (so its coefficients are free)?
    pub fn single(&self, lay: &Lay, j: usize) -> bool {
        if self.exact {
            self.stride(lay, j) == 0
        } else {
            self.bmin(lay, j) == self.bmax(lay, j)
        }
    }

    /// The affine expression dim j equals on this piece, when single-valued, into `pin`.
    pub fn pin(&self, lay: &Lay, j: usize, pin: &mut [i64]) {
        if self.exact {
            pin.copy_from_slice(self.expr(lay, lay.lo(j)));
        } else {
            pin.fill(0);
            pin[lay.d] = self.bmin(lay, j);
        }
    }

    /// Merges the bounding boxes, label ranges and point counts of `o` into `self`.
    pub fn merge_stats(&mut self, lay: &Lay, o: &Wp) {
        // Contiguous blocks: bmin, bmax (d each), then lmin, lmax (l each).
        for (at, n) in [(lay.bmin_ix(0), lay.d), (lay.lmin_ix(0), lay.l)] {
            let (mine, theirs) = (&mut self.b[at..at + 2 * n], &o.b[at..at + 2 * n]);
            let (min, max) = mine.split_at_mut(n);
            let (omin, omax) = theirs.split_at(n);
            for (x, y) in min.iter_mut().zip(omin) {
                *x = (*x).min(*y);
            }
            for (x, y) in max.iter_mut().zip(omax) {
                *x = (*x).max(*y);
            }
        }
        self.points = self.points.saturating_add(o.points);
    }

    /// Rewrites into a box: bounds from the bounding box over dims `depth..d`, approximate.
    pub fn seal_box(&mut self, lay: &Lay, depth: usize) {
        self.exact = false;
        for j in depth..lay.d {
            let (lo, hi) = (self.bmin(lay, j), self.bmax(lay, j));
            self.set_const_expr(lay, lay.lo(j), lo);
            self.set_const_expr(lay, lay.hi(j), hi);
            self.b[lay.stride_ix(j)] = i64::from(lo != hi);
        }
    }

    /// Drops the coefficients of single-valued dims by substituting their pinned expression,
    /// innermost first, so that the printed expressions only use the dims that vary; then makes
    /// the upper bound of a single-valued dim identical to its lower bound. Expressions whose
    /// rewriting would overflow are left as they are (they stay valid).
    pub fn normalize(&mut self, lay: &Lay) {
        let d = lay.d;
        let mut pin = vec![0i64; lay.e];
        let mut tmp = vec![0i64; lay.e];
        for j in (0..d).rev() {
            if !self.single(lay, j) {
                continue;
            }
            self.pin(lay, j, &mut pin);
            for x in lay.ids_above(j) {
                if x >= 2 * d && !self.laff(lay, x - 2 * d) {
                    continue;
                }
                rewrite(self, lay, x, j, 0, &pin, &mut tmp);
            }
        }
        if self.exact {
            for j in 0..d {
                if self.stride(lay, j) == 0 {
                    let o_lo = lay.ex(lay.lo(j));
                    let o_hi = lay.ex(lay.hi(j));
                    self.b.copy_within(o_lo..o_lo + lay.e, o_hi);
                }
            }
        }
    }
}

/// Re-expresses expression `x` of `w` so that its coefficient on dim j becomes `a`, using the
/// equality `x_j = pin(x)` valid on every point of `w`: `f + (a - f_j) (x_j - pin)`. Atomic:
/// returns false (and leaves the expression untouched) on overflow.
pub(crate) fn rewrite(
    w: &mut Wp,
    lay: &Lay,
    x: usize,
    j: usize,
    a: i64,
    pin: &[i64],
    tmp: &mut [i64],
) -> bool {
    let d = lay.d;
    let o = lay.ex(x);
    let fj = w.b[o + j];
    if fj == a {
        return true;
    }
    let Some(delta) = sub(a, fj) else {
        return false;
    };
    tmp.copy_from_slice(&w.b[o..o + lay.e]);
    for m in 0..=d {
        if m == j {
            tmp[m] = a;
        } else if pin[m] != 0 {
            match mul(delta, pin[m]).and_then(|p| sub(tmp[m], p)) {
                Some(v) => tmp[m] = v,
                None => return false,
            }
        }
    }
    w.b[o..o + lay.e].copy_from_slice(tmp);
    true
}

/// Scratch buffers reused across merges, so that the common paths do not allocate.
#[derive(Debug)]
pub(crate) struct Scratch {
    pub pin: Vec<i64>,
    pub tmp: Vec<i64>,
    pub vals: Vec<i64>,
    pub skip: Vec<bool>,
    /// Expression ids a merge matches.
    pub ids: Vec<usize>,
    /// Label components to treat as ranges in the next merge.
    pub ignore: Vec<bool>,
    /// Label components demoted to ranges for the rest of the stream.
    pub demoted: Vec<bool>,
    pub any_demoted: bool,
    /// Buffers of pieces done with, for the next pieces: on irregular streams a piece is made
    /// and merged away every few points.
    pool: Vec<Vec<i64>>,
}

impl Scratch {
    pub fn new(lay: &Lay) -> Scratch {
        Scratch {
            pin: vec![0; lay.e],
            tmp: vec![0; lay.e],
            vals: Vec::with_capacity(2 * (2 * lay.d + lay.l)),
            skip: Vec::with_capacity(2 * lay.d + lay.l),
            ids: Vec::with_capacity(2 * lay.d + lay.l),
            ignore: vec![false; lay.l],
            demoted: vec![false; lay.l],
            any_demoted: false,
            pool: Vec::new(),
        }
    }

    /// A zeroed piece, from a recycled buffer when there is one.
    pub fn fresh(&mut self, lay: &Lay) -> Wp {
        match self.pool.pop() {
            Some(mut b) => {
                b.fill(0);
                Wp {
                    b,
                    exact: true,
                    points: 0,
                }
            }
            None => Wp::new(lay),
        }
    }

    /// Keeps `w`'s buffer for [`Self::fresh`].
    pub fn recycle(&mut self, w: Wp) {
        // Pieces are made and merged away one at a time; a stream keeps no more (a program
        // has a stream per instruction and per dependence: 130,000 on myocyte).
        if self.pool.len() < 2 {
            self.pool.push(w.b);
        }
    }
}

/// Absorbs `item` (a piece at depth `depth`, same prefix as the box) into the box `boxp`
/// (created from the item if absent). Label components stay affine when one affine function
/// fits every absorbed point; otherwise they become ranges. Every point of `item` stays covered.
///
/// Finding the common function: innermost dim first, a side that is single-valued on a dim takes
/// the other side's coefficient there. When both are single-valued on dim j at different
/// values (two rows), the coefficient on x_j is still free on the box: it is solved from the
/// difference of the constants, like the slope between two slices of a group.
pub(crate) fn absorb(
    boxp: &mut Option<Wp>,
    mut item: Wp,
    depth: usize,
    lay: &Lay,
    s: &mut Scratch,
) {
    let Some(bx) = boxp.as_mut() else {
        let mut b = item;
        b.exact = false;
        *boxp = Some(b);
        return;
    };
    let d = lay.d;
    // Dims single-valued on both sides at different values, with the item's constant value.
    s.vals.clear();
    for j in (depth..d).rev() {
        let box_single = bx.bmin(lay, j) == bx.bmax(lay, j);
        if item.single(lay, j) {
            item.pin(lay, j, &mut s.pin);
            if box_single && s.pin[..d].iter().all(|c| *c == 0) && s.pin[d] != bx.bmin(lay, j) {
                s.vals.push(j as i64);
                s.vals.push(s.pin[d]);
            }
            for c in 0..lay.l {
                if bx.laff(lay, c) && item.laff(lay, c) {
                    let a = bx.expr(lay, lay.lab(c))[j];
                    rewrite(&mut item, lay, lay.lab(c), j, a, &s.pin, &mut s.tmp);
                }
            }
        } else if box_single {
            // A box's pin is its constant value.
            s.pin.fill(0);
            s.pin[d] = bx.bmin(lay, j);
            for c in 0..lay.l {
                if bx.laff(lay, c) && item.laff(lay, c) {
                    let a = item.expr(lay, lay.lab(c))[j];
                    rewrite(bx, lay, lay.lab(c), j, a, &s.pin, &mut s.tmp);
                }
            }
        }
    }
    for c in 0..lay.l {
        let ix = lay.laff_ix(c);
        if bx.b[ix] == 0 {
            continue;
        }
        let o = lay.ex(lay.lab(c));
        let same_coeffs = item.laff(lay, c) && bx.b[o + depth..o + d] == item.b[o + depth..o + d];
        let fits = same_coeffs && {
            let k = sub(item.b[o + d], bx.b[o + d]);
            match k {
                Some(0) => true,
                Some(k) => solve_free(bx, lay, o, k, &s.vals),
                None => false,
            }
        };
        if !fits {
            bx.b[ix] = 0;
        }
    }
    bx.merge_stats(lay, &item);
    bx.exact = false;
    s.recycle(item);
}

/// The item's label exceeds the box's by `k` (same coefficients): spend it on a free dim (the
/// box single-valued at `v`, the item at `w`): the box's coefficient on x_j grows by
/// `k / (w - v)`, which keeps its values on its own points. `free` holds (j, w) pairs, innermost
/// first; the outermost is used.
fn solve_free(bx: &mut Wp, lay: &Lay, o: usize, k: i64, free: &[i64]) -> bool {
    let Some(pair) = free.chunks_exact(2).last() else {
        return false;
    };
    let Ok(j) = usize::try_from(pair[0]) else {
        return false;
    };
    let (w, v) = (pair[1], bx.bmin(lay, j));
    let step = (|| {
        let dw = sub(w, v)?;
        if k.checked_rem(dw)? != 0 {
            return None;
        }
        let da = k.checked_div(dw)?;
        let a = bx.b[o + j].checked_add(da)?;
        let c = sub(bx.b[o + lay.d], mul(da, v)?)?;
        Some((a, c))
    })();
    match step {
        Some((a, c)) => {
            bx.b[o + j] = a;
            bx.b[o + lay.d] = c;
            true
        }
        None => false,
    }
}

/// Evaluates expression `f` at `pt` in i128.
#[cfg(test)]
pub(crate) fn eval(f: &[i64], pt: &[i64]) -> i128 {
    let d = pt.len();
    let mut v = i128::from(f[d]);
    for (c, x) in f[..d].iter().zip(pt) {
        v += i128::from(*c) * i128::from(*x);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_disjoint() {
        let lay = Lay::new(3, 2);
        let mut seen = vec![false; lay.len()];
        let mut mark = |i: usize| {
            assert!(!seen[i]);
            seen[i] = true;
        };
        for x in 0..(2 * lay.d + lay.l) {
            for k in 0..lay.e {
                mark(lay.ex(x) + k);
            }
        }
        for j in 0..lay.d {
            mark(lay.stride_ix(j));
            mark(lay.bmin_ix(j));
            mark(lay.bmax_ix(j));
        }
        for c in 0..lay.l {
            mark(lay.lmin_ix(c));
            mark(lay.lmax_ix(c));
            mark(lay.laff_ix(c));
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn rewrite_keeps_values_on_the_pinned_set() {
        // d = 2; label f = 3 x0 + 5 x1 + 7 on the set x1 = x0 + 2.
        let lay = Lay::new(2, 1);
        let mut w = Wp::new(&lay);
        w.expr_mut(&lay, lay.lab(0)).copy_from_slice(&[3, 5, 7]);
        let pin = [1, 0, 2];
        let mut tmp = [0; 3];
        assert!(rewrite(&mut w, &lay, lay.lab(0), 1, -4, &pin, &mut tmp));
        let f = w.expr(&lay, lay.lab(0)).to_vec();
        assert_eq!(f[1], -4);
        for x0 in -5..5 {
            let pt = [x0, x0 + 2];
            assert_eq!(eval(&f, &pt), 3 * x0 as i128 + 5 * (x0 as i128 + 2) + 7);
        }
    }
}
