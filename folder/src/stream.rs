//! Online folding of one stream.
//!
//! Level structure, innermost first:
//! - the *run* folds the innermost dim: consecutive points at a constant step whose labels change
//!   by a constant vector per step (O(dims + labels) per point, no allocation);
//! - level `k` (for `k < d - 1`) folds dim `k`: it receives the pieces found for one value `t` of
//!   `x_k` (a *slice*, prefix `x_0..x_{k-1}` fixed) and groups pieces of consecutive slices into
//!   one piece when they have the same shape and their constants change affinely with `t`;
//! - the top collects the pieces of the whole stream.
//!
//! When the prefix of a level changes, the level closes its groups and hands them to the level
//! above as pieces of its current slice. Bounds (see [`FoldOptions`]) turn the excess into
//! bounding boxes at each level, so memory depends on the bounds, not on the stream length.

use crate::checked::{add, mul, sub};
use crate::piece::Folded;
use crate::work::{absorb, rewrite, Lay, Scratch, Wp};
use crate::FoldOptions;

/// A label component is demoted once it breaks runs at least once every this many points.
const DEMOTE_INTERVAL: u64 = 16;
/// At an outer level: after this many pieces that fit a group but for their labels, at least
/// one per this many slices.
const OUTER_DEMOTE_MIN: u64 = 4;
const OUTER_DEMOTE_INTERVAL: u64 = 4;

/// A sequence of pieces at `t0, t0 + sigma, ..., tm` (one per slice) folded into one piece.
#[derive(Debug)]
struct Group {
    wp: Wp,
    t0: i64,
    tm: i64,
    /// Step between slices; meaningless while `n == 1`.
    sigma: i64,
    n: u64,
    /// The pieces merged so far, kept while `n <= 2` so that a two-slice group can be split
    /// again (a peeled first iteration must not bend the bounds of the rest).
    snap: Vec<Wp>,
}

impl Group {
    fn new(item: Wp, t: i64) -> Group {
        Group {
            wp: item.clone(),
            t0: t,
            tm: t,
            sigma: 0,
            n: 1,
            snap: vec![item],
        }
    }

    fn merged(&mut self, item: Wp, s: &mut Scratch) {
        if self.n == 2 {
            self.snap.push(item);
        } else {
            for w in self.snap.drain(..) {
                s.recycle(w);
            }
            s.recycle(item);
        }
    }

    fn close(mut self, lay: &Lay, k: usize) -> Wp {
        let w = &mut self.wp;
        w.set_const_expr(lay, lay.lo(k), self.t0);
        w.set_const_expr(lay, lay.hi(k), self.tm);
        w.b[lay.stride_ix(k)] = if self.n == 1 { 0 } else { self.sigma };
        self.wp
    }

    fn expects(&self, t: i64) -> bool {
        self.n >= 2 && add(self.tm, self.sigma) == Some(t)
    }
}

/// Is expression `x` (ids as in [`Lay`]) one that may have a coefficient on dim `j`: a bound
/// of a dim inside `j`, or a label ([`Lay::ids_above`])?
#[inline(always)]
fn inside(x: usize, j: usize, d: usize) -> bool {
    x >= 2 * d || x % d > j
}

/// The same coefficients (a few), compared without a call to `memcmp`.
#[inline(always)]
fn same(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Tries to fold piece `q` (slice `x_k = t`) into group `g`; on success `g` covers `q` too.
/// On failure both may have been re-expressed (equivalently) but cover what they covered.
fn try_merge(g: &mut Group, q: &mut Wp, t: i64, k: usize, lay: &Lay, s: &mut Scratch) -> bool {
    s.ignore.fill(false);
    merge_inner(g, q, t, k, lay, s, false).is_some()
}

/// Would `q` fold into `g` if the label components flagged in `s.ignore` were ranges? (Both may
/// be re-expressed, equivalently; nothing else changes.)
fn would_merge(g: &mut Group, q: &mut Wp, t: i64, k: usize, lay: &Lay, s: &mut Scratch) -> bool {
    merge_inner(g, q, t, k, lay, s, true).is_some()
}

fn merge_inner(
    g: &mut Group,
    q: &mut Wp,
    t: i64,
    k: usize,
    lay: &Lay,
    s: &mut Scratch,
    dry: bool,
) -> Option<()> {
    let d = lay.d;
    if !q.exact || !g.wp.exact || t <= g.tm {
        return None;
    }
    let sigma = if g.n == 1 {
        sub(t, g.tm)?
    } else if add(g.tm, g.sigma) == Some(t) {
        g.sigma
    } else {
        return None;
    };
    // Strides of dims that vary on both sides must agree: checked before any rewriting, since
    // on irregular streams most attempts fail here.
    for j in k + 1..d {
        let (sg, sq) = (g.wp.stride(lay, j), q.stride(lay, j));
        if sg != 0 && sq != 0 && sg != sq {
            return None;
        }
    }
    // Label components that are a range on either side are not matched: they stay ranges.
    // The expressions matched (`ids`): those with a coefficient on a dim inside k
    // ([`Lay::ids_above`]), but the skipped.
    s.skip.clear();
    s.skip.resize(2 * d, false);
    s.ids.clear();
    s.ids.extend(k + 1..d);
    s.ids.extend(d + k + 1..2 * d);
    for c in 0..lay.l {
        let skip = s.ignore[c] || !(g.wp.laff(lay, c) && q.laff(lay, c));
        s.skip.push(skip);
        if !skip {
            s.ids.push(2 * d + c);
        }
    }
    // Make the free coefficients (those of single-valued dims) agree, innermost dim first: a
    // rewrite on dim j only touches coefficients of dims < j.
    for j in (k + 1..d).rev() {
        let (sg, sq) = (g.wp.stride(lay, j), q.stride(lay, j));
        if sq == 0 {
            q.pin(lay, j, &mut s.pin);
            for &x in s.ids.iter().filter(|x| inside(**x, j, d)) {
                let a = g.wp.b[lay.ex(x) + j];
                if !rewrite(q, lay, x, j, a, &s.pin, &mut s.tmp) {
                    return None;
                }
            }
        } else if sg == 0 {
            g.wp.pin(lay, j, &mut s.pin);
            for &x in s.ids.iter().filter(|x| inside(**x, j, d)) {
                let a = q.b[lay.ex(x) + j];
                if !rewrite(&mut g.wp, lay, x, j, a, &s.pin, &mut s.tmp) {
                    return None;
                }
            }
        } else if sg != sq {
            return None;
        }
    }
    for &x in &s.ids {
        let o = lay.ex(x);
        if !same(&g.wp.b[o + k + 1..o + d], &q.b[o + k + 1..o + d]) {
            return None;
        }
    }
    if g.n == 1 {
        s.vals.clear();
        for &x in &s.ids {
            let o = lay.ex(x);
            let (cg, cq) = (g.wp.b[o + d], q.b[o + d]);
            let delta = sub(cq, cg)?;
            if delta.checked_rem(sigma)? != 0 {
                return None;
            }
            let slope = delta.checked_div(sigma)?;
            let c0 = sub(cg, mul(slope, g.t0)?)?;
            s.vals.push(slope);
            s.vals.push(c0);
        }
        if dry {
            return Some(());
        }
        for (i, &x) in s.ids.iter().enumerate() {
            let o = lay.ex(x);
            g.wp.b[o + k] = s.vals[2 * i];
            g.wp.b[o + d] = s.vals[2 * i + 1];
        }
    } else {
        for &x in &s.ids {
            let o = lay.ex(x);
            let pred = add(g.wp.b[o + d], mul(g.wp.b[o + k], t)?)?;
            if pred != q.b[o + d] {
                return None;
            }
        }
        if dry {
            return Some(());
        }
    }
    for j in k + 1..d {
        if g.wp.stride(lay, j) == 0 {
            g.wp.b[lay.stride_ix(j)] = q.stride(lay, j);
        }
    }
    for c in 0..lay.l {
        if s.skip[2 * d + c] {
            g.wp.b[lay.laff_ix(c)] = 0;
        }
    }
    g.wp.merge_stats(lay, q);
    g.tm = t;
    g.sigma = sigma;
    g.n += 1;
    Some(())
}

/// Folds dim `k`.
#[derive(Debug)]
struct Level {
    k: usize,
    groups: Vec<Group>,
    cur_t: Option<i64>,
    boxp: Option<Wp>,
    /// Slices seen, and pieces that failed to continue a group because of labels only.
    slices: u64,
    label_breaks: u64,
}

impl Level {
    fn receive(
        &mut self,
        mut item: Wp,
        lay: &Lay,
        opts: &FoldOptions,
        s: &mut Scratch,
        out: &mut Vec<Wp>,
    ) {
        let k = self.k;
        let t = item.bmin(lay, k);
        if self.cur_t != Some(t) {
            if let Some(ct) = self.cur_t {
                // Close the groups that can no longer continue, in creation order.
                let mut i = 0;
                while i < self.groups.len() {
                    let g = &self.groups[i];
                    let dead = if g.n == 1 {
                        g.tm < ct
                    } else {
                        !matches!(add(g.tm, g.sigma), Some(next) if next >= t)
                    };
                    if dead {
                        out.push(self.groups.remove(i).close(lay, k));
                    } else {
                        i += 1;
                    }
                }
            }
            self.cur_t = Some(t);
            self.slices += 1;
        }
        if !item.exact {
            self.lift_absorb(item, t, lay, s);
            return;
        }
        // Continuations first, then one-slice groups, in creation order (the i-th piece of a
        // slice tends to continue the i-th track).
        for pass in 0..2 {
            for g in self.groups.iter_mut() {
                let candidate = if pass == 0 {
                    g.expects(t)
                } else {
                    g.n == 1 && g.tm < t
                };
                if candidate && try_merge(g, &mut item, t, k, lay, s) {
                    g.merged(item, s);
                    return;
                }
            }
        }
        if self.demote(&mut item, t, lay, opts, s) {
            return;
        }
        if self.groups.len() >= opts.max_pieces_per_slice.max(1) {
            self.lift_absorb(item, t, lay, s);
            return;
        }
        // A two-slice group that fails on its third slice: its first slice may be a peeled
        // iteration, or be followed by a gap. Re-split as {first}, {second, this one} when the
        // latter folds.
        for i in 0..self.groups.len() {
            let g = &self.groups[i];
            // It expected this slice, or a later one (a gap after its first slice).
            let missed =
                g.expects(t) || (g.tm < t && matches!(add(g.tm, g.sigma), Some(next) if t < next));
            if !(missed && g.n == 2 && g.snap.len() == 2) {
                continue;
            }
            let mut ng = Group::new(g.snap[1].clone(), g.tm);
            if try_merge(&mut ng, &mut item, t, k, lay, s) {
                ng.merged(item, s);
                let g = &mut self.groups[i];
                let first = g.snap.swap_remove(0);
                *g = Group::new(first, g.t0);
                self.groups.push(ng);
                return;
            }
        }
        self.groups.push(Group::new(item, t));
    }

    /// Outer-level label demotion: `item` continues a group but for its labels (rows of equal
    /// shape whose addresses jump: `conn[k][j]`). Once that happened often enough at this level,
    /// the components at fault become ranges for the rest of the stream and the item joins the
    /// group. True when it did.
    fn demote(
        &mut self,
        item: &mut Wp,
        t: i64,
        lay: &Lay,
        opts: &FoldOptions,
        s: &mut Scratch,
    ) -> bool {
        if opts.demote_after_breaks == 0 || lay.l == 0 {
            return false;
        }
        let k = self.k;
        let Some(gi) = self
            .groups
            .iter()
            .position(|g| g.expects(t) || (g.n == 1 && g.tm < t))
        else {
            return false;
        };
        let g = &mut self.groups[gi];
        s.ignore.fill(true);
        if !would_merge(g, item, t, k, lay, s) {
            return false;
        }
        self.label_breaks += 1;
        let b = self.label_breaks;
        if b < OUTER_DEMOTE_MIN || b.saturating_mul(OUTER_DEMOTE_INTERVAL) < self.slices {
            return false;
        }
        // The culprits: each component that alone prevents the merge.
        let mut any = false;
        for c in 0..lay.l {
            if !(item.laff(lay, c) && g.wp.laff(lay, c)) {
                continue;
            }
            s.ignore.fill(true);
            s.ignore[c] = false;
            if !would_merge(g, item, t, k, lay, s) {
                s.demoted[c] = true;
                s.any_demoted = true;
                item.b[lay.laff_ix(c)] = 0;
                any = true;
            }
        }
        if !any {
            // Only several components together fail: demote every affine one.
            for c in 0..lay.l {
                if item.laff(lay, c) {
                    s.demoted[c] = true;
                    s.any_demoted = true;
                    item.b[lay.laff_ix(c)] = 0;
                }
            }
        }
        let mut q = std::mem::replace(item, Wp::new(lay));
        if try_merge(g, &mut q, t, k, lay, s) {
            g.merged(q, s);
            true
        } else {
            *item = q;
            false
        }
    }

    fn lift_absorb(&mut self, mut item: Wp, t: i64, lay: &Lay, s: &mut Scratch) {
        if item.exact {
            item.set_const_expr(lay, lay.lo(self.k), t);
            item.set_const_expr(lay, lay.hi(self.k), t);
            item.b[lay.stride_ix(self.k)] = 0;
        }
        absorb(&mut self.boxp, item, self.k, lay, s);
    }

    fn flush(&mut self, lay: &Lay, out: &mut Vec<Wp>) {
        for g in self.groups.drain(..) {
            out.push(g.close(lay, self.k));
        }
        if let Some(mut b) = self.boxp.take() {
            b.seal_box(lay, self.k);
            out.push(b);
        }
        self.cur_t = None;
    }
}

/// The pieces of the whole stream.
#[derive(Debug, Default)]
struct Top {
    pieces: Vec<Wp>,
    boxp: Option<Wp>,
    largest_absorbed: u64,
}

impl Top {
    fn add(&mut self, item: Wp, lay: &Lay, opts: &FoldOptions, s: &mut Scratch) {
        if !item.exact {
            absorb(&mut self.boxp, item, 0, lay, s);
            return;
        }
        self.pieces.push(item);
        if self.pieces.len() > opts.max_pieces_per_stream.max(1) {
            // Evict the smallest piece (the newest among equals) into the box.
            let mut best = 0;
            for (i, p) in self.pieces.iter().enumerate() {
                if p.points <= self.pieces[best].points {
                    best = i;
                }
            }
            let w = self.pieces.remove(best);
            self.largest_absorbed = self.largest_absorbed.max(w.points);
            absorb(&mut self.boxp, w, 0, lay, s);
        }
    }
}

fn deliver(
    levels: &mut [Level],
    top: &mut Top,
    item: Wp,
    lay: &Lay,
    opts: &FoldOptions,
    s: &mut Scratch,
) {
    match levels.split_last_mut() {
        None => top.add(item, lay, opts, s),
        Some((lvl, rest)) => {
            let mut out = Vec::new();
            lvl.receive(item, lay, opts, s, &mut out);
            for o in out {
                deliver(rest, top, o, lay, opts, s);
            }
        }
    }
}

/// Folds one stream online.
///
/// Points must arrive in strictly increasing lexicographic order of `point`. A point that does
/// not (a repeat, or one smaller than its predecessor) is still covered: it goes to an
/// approximate bounding box. A point or label of the wrong length is counted in
/// [`Folded::rejected`] and otherwise ignored.
///
/// Memory is bounded by the options (pieces per slice, per stream), never by the stream length.
#[derive(Debug)]
pub struct StreamFolder {
    lay: Lay,
    opts: FoldOptions,
    prev: Vec<i64>,
    started: bool,
    run_n: u64,
    run_t0: i64,
    run_tm: i64,
    run_sigma: i64,
    run_first: Vec<i64>,
    run_last: Vec<i64>,
    /// Label change per step of `run_sigma`.
    run_delta: Vec<i64>,
    /// Observed label range of the run (kept for demoted components).
    run_lmin: Vec<i64>,
    run_lmax: Vec<i64>,
    /// How many runs each label component broke (see [`FoldOptions::demote_after_breaks`]).
    breaks: Vec<u64>,
    pair_tmp: Vec<i64>,
    slice_runs: usize,
    inner_box: Option<Wp>,
    levels: Vec<Level>,
    top: Top,
    s: Scratch,
    points: u64,
    rejected: u64,
    /// Scratch point and label of [`StreamFolder::push_run`].
    run_point: Vec<i64>,
    run_label: Vec<i64>,
}

/// The last point and label of a run of `n` points from `(p, l)`, if representable.
fn run_end(p: &[i64], l: &[i64], sigma: i64, delta: &[i64], n: u64) -> Option<(i64, Vec<i64>)> {
    let m = i64::try_from(n - 1).ok()?;
    let t = add(p[p.len() - 1], mul(sigma, m)?)?;
    let l_end = l
        .iter()
        .zip(delta)
        .map(|(v, dv)| add(*v, mul(*dv, m)?))
        .collect::<Option<Vec<i64>>>()?;
    Some((t, l_end))
}

impl StreamFolder {
    /// A folder for points of `dims` coordinates carrying `labels` label components.
    pub fn new(dims: usize, labels: usize, opts: &FoldOptions) -> StreamFolder {
        let lay = Lay::new(dims, labels);
        StreamFolder {
            lay,
            opts: opts.clone(),
            prev: vec![0; dims],
            started: false,
            run_n: 0,
            run_t0: 0,
            run_tm: 0,
            run_sigma: 0,
            run_first: vec![0; labels],
            run_last: vec![0; labels],
            run_delta: vec![0; labels],
            run_lmin: vec![0; labels],
            run_lmax: vec![0; labels],
            breaks: vec![0; labels],
            pair_tmp: vec![0; labels],
            slice_runs: 0,
            inner_box: None,
            levels: (0..dims.saturating_sub(1))
                .map(|k| Level {
                    k,
                    groups: Vec::new(),
                    cur_t: None,
                    boxp: None,
                    slices: 0,
                    label_breaks: 0,
                })
                .collect(),
            top: Top::default(),
            s: Scratch::new(&lay),
            points: 0,
            rejected: 0,
            run_point: Vec::new(),
            run_label: Vec::new(),
        }
    }

    /// The last point that extended the stream in order (none before the first, nor for a
    /// stream of 0 dims): a caller that keeps its points in order compares with it.
    pub fn last_point(&self) -> Option<&[i64]> {
        (self.started && self.lay.d > 0).then_some(&self.prev[..])
    }

    /// Number of points accepted so far.
    pub fn points(&self) -> u64 {
        self.points
    }

    /// Working pieces held right now (open groups, boxes, the stream's pieces): a diagnostic
    /// showing that the state depends on the bounds of [`FoldOptions`], not on the stream length.
    pub fn live_pieces(&self) -> usize {
        let levels: usize = self
            .levels
            .iter()
            .map(|l| l.groups.len() + usize::from(l.boxp.is_some()))
            .sum();
        levels
            + usize::from(self.inner_box.is_some())
            + self.top.pieces.len()
            + usize::from(self.top.boxp.is_some())
    }

    /// Adds one point with its label.
    #[inline]
    pub fn push(&mut self, point: &[i64], label: &[i64]) {
        let d = self.lay.d;
        if point.len() != d || label.len() != self.lay.l {
            self.rejected += 1;
            return;
        }
        if !self.started {
            self.started = true;
            self.points = 1;
            if d == 0 {
                let w = self.point_piece(point, label, true);
                self.top.add(w, &self.lay, &self.opts, &mut self.s);
            } else {
                self.prev.copy_from_slice(point);
                self.start_run(point[d - 1], label);
            }
            return;
        }
        let mut m = 0;
        while m < d && point[m] == self.prev[m] {
            m += 1;
        }
        if m == d || point[m] < self.prev[m] {
            self.points += 1;
            let w = self.point_piece(point, label, false);
            self.top.add(w, &self.lay, &self.opts, &mut self.s);
            return;
        }
        self.points += 1;
        let t = point[d - 1];
        if m == d - 1 {
            if self.run_n >= 2 && self.extends(t, label) {
                self.extend_run(t, label);
            } else {
                self.run_step(t, label);
            }
            self.prev[d - 1] = t;
            return;
        }
        self.close_run();
        self.close_inner_slice();
        for k in (m + 1..d - 1).rev() {
            self.flush_level(k);
        }
        self.prev.copy_from_slice(point);
        self.start_run(t, label);
    }

    /// Adds `count` points: `point`, then `point` with its last coordinate `sigma`, `2 sigma`,
    /// ... further, each with `label` plus as many times `delta`. The same as pushing them one
    /// by one, but once the stream's own run has this step and these label changes, the rest
    /// extend it at once: a dependence repeated along an innermost loop costs one call, not one
    /// per iteration.
    pub fn push_run(
        &mut self,
        point: &[i64],
        label: &[i64],
        sigma: i64,
        delta: &[i64],
        count: u64,
    ) {
        let d = self.lay.d;
        if point.len() != d || label.len() != self.lay.l || delta.len() != label.len() {
            // Malformed: each of its points is rejected.
            for _ in 0..count {
                self.push(point, label);
            }
            return;
        }
        if count == 1 {
            self.push(point, label);
            return;
        }
        // The folder's own buffers: a short run (the common case on irregular code) allocates
        // nothing.
        let (mut p, mut l) = (
            std::mem::take(&mut self.run_point),
            std::mem::take(&mut self.run_label),
        );
        p.clear();
        p.extend_from_slice(point);
        l.clear();
        l.extend_from_slice(label);
        self.push_run_from(&mut p, &mut l, sigma, delta, count);
        (self.run_point, self.run_label) = (p, l);
    }

    /// [`Self::push_run`] from `(p, l)`, which it steps in place.
    fn push_run_from(
        &mut self,
        p: &mut [i64],
        l: &mut [i64],
        sigma: i64,
        delta: &[i64],
        count: u64,
    ) {
        let d = self.lay.d;
        for k in 0..count {
            if k > 0 {
                // Zero dims: no coordinate to step, the labels still change.
                let t = if d == 0 {
                    Some(0)
                } else {
                    add(p[d - 1], sigma)
                };
                let moved = l.iter_mut().zip(delta).all(|(v, dv)| match add(*v, *dv) {
                    Some(n) => {
                        *v = n;
                        true
                    }
                    None => false,
                });
                let (Some(t), true) = (t, moved) else {
                    // Past i64: the rest are no points of this stream.
                    self.rejected += count - k;
                    return;
                };
                if d > 0 {
                    p[d - 1] = t;
                }
            }
            if d > 0 && count - k >= 2 && sigma > 0 && self.follows(p, l, sigma, delta) {
                if let Some((t_end, l_end)) = run_end(p, l, sigma, delta, count - k) {
                    let rest = count - k;
                    if self.s.any_demoted {
                        self.track_range(l);
                        self.track_range(&l_end);
                    }
                    self.run_tm = t_end;
                    self.run_last.copy_from_slice(&l_end);
                    self.run_n += rest;
                    self.points += rest;
                    self.prev[d - 1] = t_end;
                    return;
                }
            }
            self.push(p, l);
        }
    }

    /// Would `push` extend the stream's run with `(p, l)` and with every point after it at
    /// step `sigma` and label change `delta`? So when the point extends the run and the run's
    /// step and label changes are these (a demoted label component may change any way).
    fn follows(&self, p: &[i64], l: &[i64], sigma: i64, delta: &[i64]) -> bool {
        let d = self.lay.d;
        self.started
            && self.run_n >= 2
            && self.run_sigma == sigma
            && self.prev[..d - 1] == p[..d - 1]
            && self
                .run_delta
                .iter()
                .zip(delta)
                .zip(&self.s.demoted)
                .all(|((a, b), dem)| *dem || a == b)
            && self.extends(p[d - 1], l)
    }

    #[inline]
    fn extends(&self, t: i64, label: &[i64]) -> bool {
        if add(self.run_tm, self.run_sigma) != Some(t) {
            return false;
        }
        let fits = |((last, delta), v): ((&i64, &i64), &i64)| add(*last, *delta) == Some(*v);
        if self.s.any_demoted {
            self.run_last
                .iter()
                .zip(&self.run_delta)
                .zip(label)
                .zip(&self.s.demoted)
                .all(|(x, dem)| *dem || fits(x))
        } else {
            self.run_last
                .iter()
                .zip(&self.run_delta)
                .zip(label)
                .all(fits)
        }
    }

    #[inline]
    fn extend_run(&mut self, t: i64, label: &[i64]) {
        self.run_tm = t;
        self.run_last.copy_from_slice(label);
        self.run_n += 1;
        if self.s.any_demoted {
            self.track_range(label);
        }
    }

    fn track_range(&mut self, label: &[i64]) {
        for ((lo, hi), v) in self.run_lmin.iter_mut().zip(&mut self.run_lmax).zip(label) {
            *lo = (*lo).min(*v);
            *hi = (*hi).max(*v);
        }
    }

    /// The run broke although its domain step fit: count the label components that broke it;
    /// demote those that break runs all the time. True when the point now extends the run.
    fn label_break(&mut self, t: i64, label: &[i64]) -> bool {
        let min_breaks = self.opts.demote_after_breaks;
        if min_breaks == 0 || add(self.run_tm, self.run_sigma) != Some(t) {
            return false;
        }
        let mut demoted_now = false;
        for (c, v) in label.iter().enumerate() {
            if self.s.demoted[c] || add(self.run_last[c], self.run_delta[c]) == Some(*v) {
                continue;
            }
            self.breaks[c] += 1;
            let b = self.breaks[c];
            if b >= min_breaks && b.saturating_mul(DEMOTE_INTERVAL) >= self.points {
                self.s.demoted[c] = true;
                self.s.any_demoted = true;
                demoted_now = true;
            }
        }
        demoted_now && self.extends(t, label)
    }

    fn start_run(&mut self, t: i64, label: &[i64]) {
        self.run_n = 1;
        self.run_t0 = t;
        self.run_tm = t;
        self.run_sigma = 0;
        self.run_first.copy_from_slice(label);
        self.run_last.copy_from_slice(label);
        self.run_lmin.copy_from_slice(label);
        self.run_lmax.copy_from_slice(label);
    }

    /// Step and label deltas from the run's last point to `(t, label)` into `pair_tmp`, when
    /// every label changes by a multiple of the step and the line through both points has a
    /// representable constant.
    fn pair(&mut self, t: i64, label: &[i64]) -> Option<i64> {
        let sigma = sub(t, self.run_tm).filter(|s| *s > 0)?;
        for (((d, last), v), dem) in self
            .pair_tmp
            .iter_mut()
            .zip(&self.run_last)
            .zip(label)
            .zip(&self.s.demoted)
        {
            if *dem {
                *d = 0;
                continue;
            }
            let delta = sub(*v, *last)?;
            if delta % sigma != 0 {
                return None;
            }
            // The run's affine constant must be representable too.
            mul(delta / sigma, self.run_tm).and_then(|p| sub(*last, p))?;
            *d = delta;
        }
        Some(sigma)
    }

    /// The point `(t, label)` does not extend the run (or the run has one point).
    fn run_step(&mut self, t: i64, label: &[i64]) {
        if self.run_n >= 2 && self.label_break(t, label) {
            self.extend_run(t, label);
            return;
        }
        let Some(sigma) = self.pair(t, label) else {
            self.close_run();
            self.start_run(t, label);
            return;
        };
        if self.run_n == 1 {
            self.run_sigma = sigma;
            self.run_delta.copy_from_slice(&self.pair_tmp);
        } else if self.run_n == 2 && add(self.run_tm, self.run_sigma).is_some_and(|next| t <= next)
        {
            // Re-split: the first point alone, the second starts a run with this one (a peeled
            // first iteration, or a gap after it). Past the expected step, it is a gap after
            // the pair: keep the pair.
            let w = self.run_piece(self.run_t0, self.run_t0, 1, 0, true);
            self.emit(w, 1);
            self.run_t0 = self.run_tm;
            std::mem::swap(&mut self.run_first, &mut self.run_last);
            self.run_sigma = sigma;
            self.run_delta.copy_from_slice(&self.pair_tmp);
            self.run_lmin.copy_from_slice(&self.run_first);
            self.run_lmax.copy_from_slice(&self.run_first);
        } else {
            self.close_run();
            self.start_run(t, label);
            return;
        }
        self.run_n = 2;
        self.run_tm = t;
        self.run_last.copy_from_slice(label);
        self.track_range(label);
    }

    /// The run as a piece at depth d - 1. `first_only`: the one-point run of its first point.
    fn run_piece(&mut self, t0: i64, tm: i64, n: u64, sigma: i64, first_only: bool) -> Wp {
        let mut w = self.s.fresh(&self.lay);
        let lay = &self.lay;
        let d = lay.d;
        w.points = n;
        for j in 0..d - 1 {
            w.b[lay.bmin_ix(j)] = self.prev[j];
            w.b[lay.bmax_ix(j)] = self.prev[j];
        }
        w.b[lay.bmin_ix(d - 1)] = t0;
        w.b[lay.bmax_ix(d - 1)] = tm;
        w.set_const_expr(lay, lay.lo(d - 1), t0);
        w.set_const_expr(lay, lay.hi(d - 1), tm);
        w.b[lay.stride_ix(d - 1)] = if n >= 2 { sigma } else { 0 };
        let last = if first_only {
            &self.run_first
        } else {
            &self.run_last
        };
        for (c, lastc) in last.iter().enumerate() {
            let first = self.run_first[c];
            if self.s.demoted[c] {
                let (lo, hi) = if first_only {
                    (first, first)
                } else {
                    (self.run_lmin[c], self.run_lmax[c])
                };
                w.b[lay.lmin_ix(c)] = lo;
                w.b[lay.lmax_ix(c)] = hi;
                continue;
            }
            let slope = if n >= 2 { self.run_delta[c] / sigma } else { 0 };
            w.b[lay.lmin_ix(c)] = first.min(*lastc);
            w.b[lay.lmax_ix(c)] = first.max(*lastc);
            // `pair` checked the constant; a range is the safe answer all the same.
            if let Some(c0) = mul(slope, t0).and_then(|p| sub(first, p)) {
                let f = w.expr_mut(lay, lay.lab(c));
                f[d - 1] = slope;
                f[d] = c0;
                w.b[lay.laff_ix(c)] = 1;
            }
        }
        w
    }

    /// A lone point as a depth-0 piece (exact, or a box for out-of-order points).
    fn point_piece(&mut self, point: &[i64], label: &[i64], exact: bool) -> Wp {
        let mut w = self.s.fresh(&self.lay);
        let lay = &self.lay;
        w.points = 1;
        w.exact = exact;
        for (j, x) in point.iter().enumerate() {
            w.b[lay.bmin_ix(j)] = *x;
            w.b[lay.bmax_ix(j)] = *x;
            w.set_const_expr(lay, lay.lo(j), *x);
            w.set_const_expr(lay, lay.hi(j), *x);
        }
        for (c, v) in label.iter().enumerate() {
            w.b[lay.lmin_ix(c)] = *v;
            w.b[lay.lmax_ix(c)] = *v;
            w.set_const_expr(lay, lay.lab(c), *v);
            w.b[lay.laff_ix(c)] = 1;
        }
        w
    }

    fn close_run(&mut self) {
        if self.run_n == 0 {
            return;
        }
        let w = self.run_piece(self.run_t0, self.run_tm, self.run_n, self.run_sigma, false);
        let n = self.run_n;
        self.run_n = 0;
        self.emit(w, n);
    }

    /// Hands a run to the level above, or to the slice's box once the slice has its share of
    /// pieces and the run is short.
    fn emit(&mut self, w: Wp, n: u64) {
        let d = self.lay.d;
        if !w.exact
            || (self.slice_runs >= self.opts.max_pieces_per_slice.max(1)
                && n <= self.opts.noise_run_points)
        {
            absorb(&mut self.inner_box, w, d - 1, &self.lay, &mut self.s);
        } else {
            self.slice_runs += 1;
            self.deliver(w);
        }
    }

    fn close_inner_slice(&mut self) {
        self.slice_runs = 0;
        if let Some(mut b) = self.inner_box.take() {
            b.seal_box(&self.lay, self.lay.d - 1);
            self.deliver(b);
        }
    }

    /// Hands a closed piece to the innermost level (the top when there is none).
    fn deliver(&mut self, item: Wp) {
        deliver(
            &mut self.levels,
            &mut self.top,
            item,
            &self.lay,
            &self.opts,
            &mut self.s,
        );
    }

    fn flush_level(&mut self, k: usize) {
        let mut out = Vec::new();
        self.levels[k].flush(&self.lay, &mut out);
        for o in out {
            deliver(
                &mut self.levels[..k],
                &mut self.top,
                o,
                &self.lay,
                &self.opts,
                &mut self.s,
            );
        }
    }

    /// Closes every open run and group and returns the pieces.
    pub fn finish(mut self) -> Folded {
        let d = self.lay.d;
        if d > 0 && self.started {
            self.close_run();
            self.close_inner_slice();
            for k in (0..d - 1).rev() {
                self.flush_level(k);
            }
        }
        let lay = self.lay;
        let top = &mut self.top;
        let mut exact = std::mem::take(&mut top.pieces);
        if let Some(bp) = top.boxp.as_ref().map(|b| b.points) {
            // Pieces no larger than a piece already judged noise, tiny next to the box, or as
            // short as a noise run, join the box: a stream that overflowed becomes one box plus
            // its big pieces.
            let limit = self.opts.max_pieces_per_stream.max(1) as u128;
            let noise_len = self.opts.noise_run_points.max(top.largest_absorbed);
            let (keep, noise): (Vec<Wp>, Vec<Wp>) = exact.into_iter().partition(|p| {
                p.points > noise_len && u128::from(p.points) * limit >= u128::from(bp)
            });
            exact = keep;
            for p in noise {
                absorb(&mut top.boxp, p, 0, &lay, &mut self.s);
            }
        }
        for p in exact.iter_mut() {
            p.normalize(&lay);
        }
        exact.sort_by(|a, b| {
            let ka = (0..d).map(|j| a.bmin(&lay, j));
            let kb = (0..d).map(|j| b.bmin(&lay, j));
            ka.cmp(kb)
        });
        if let Some(mut b) = top.boxp.take() {
            b.seal_box(&lay, 0);
            b.normalize(&lay);
            exact.push(b);
        }
        Folded::from_work(&lay, self.points, self.rejected, &exact)
    }
}
