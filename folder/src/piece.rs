//! The folder's output: pieces (a domain in nested-loop form, one label per component) and the
//! folded stream.

use crate::work::{Lay, Wp};

/// An affine function of the dims: `sum(coeffs[j] * x_j) + constant`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AffineExpr {
    /// One coefficient per dim.
    pub coeffs: Vec<i64>,
    pub constant: i64,
}

impl AffineExpr {
    /// The constant function `c` over `dims` dims.
    pub fn constant(dims: usize, c: i64) -> AffineExpr {
        AffineExpr {
            coeffs: vec![0; dims],
            constant: c,
        }
    }

    /// Value at `point` (missing coordinates count as 0), exact in i128.
    pub fn eval(&self, point: &[i64]) -> i128 {
        let mut v = i128::from(self.constant);
        for (c, x) in self.coeffs.iter().zip(point) {
            v += i128::from(*c) * i128::from(*x);
        }
        v
    }

    /// No coefficient is non-zero.
    pub fn is_constant(&self) -> bool {
        self.coeffs.iter().all(|c| *c == 0)
    }
}

/// Bounds of one dim of a [`Domain`]: `lower(x) <= x_j <= upper(x)` and, when `stride > 1`,
/// `x_j - lower(x) ≡ 0 (mod stride)`. `lower` and `upper` only use dims before j. A dim whose
/// `lower == upper` takes the single value `lower(x)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DimBound {
    pub lower: AffineExpr,
    pub upper: AffineExpr,
    /// At least 1.
    pub stride: u64,
}

/// A polyhedron (with strides) in nested-loop form: one [`DimBound`] per dim, outermost first.
/// The set is `{ x : for all j, x_j satisfies bounds[j] given x_0..x_{j-1} }`, exactly the
/// points a loop nest `for x_0 ... for x_{d-1}` with those bounds and steps enumerates.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Domain {
    pub bounds: Vec<DimBound>,
}

/// The kind of a [`Constraint`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConstraintKind {
    /// `expr == 0`
    Eq,
    /// `expr >= 0`
    Ge,
    /// `expr ≡ 0 (mod m)`
    Divisible(u64),
}

/// One constraint of a domain in flat form.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Constraint {
    pub expr: AffineExpr,
    pub kind: ConstraintKind,
}

impl Domain {
    /// Number of dims.
    pub fn dims(&self) -> usize {
        self.bounds.len()
    }

    /// Dim j takes one value for each value of the outer dims.
    pub fn is_single_valued(&self, j: usize) -> bool {
        self.bounds[j].lower == self.bounds[j].upper
    }

    /// Membership test.
    pub fn contains(&self, point: &[i64]) -> bool {
        if point.len() != self.dims() {
            return false;
        }
        self.bounds.iter().zip(point).all(|(b, x)| {
            let x = i128::from(*x);
            let lo = b.lower.eval(point);
            if b.lower == b.upper {
                return x == lo;
            }
            let hi = b.upper.eval(point);
            lo <= x && x <= hi && (x - lo) % i128::from(b.stride.max(1)) == 0
        })
    }

    /// The constraints in flat form: equalities, inequalities `>= 0`, divisibilities.
    pub fn constraints(&self) -> Vec<Constraint> {
        let d = self.dims();
        let mut out = Vec::new();
        for (j, b) in self.bounds.iter().enumerate() {
            // x_j - lower and upper - x_j.
            let mut minus_lo = b.lower.clone();
            for c in minus_lo.coeffs.iter_mut() {
                *c = c.saturating_neg();
            }
            minus_lo.constant = minus_lo.constant.saturating_neg();
            minus_lo.coeffs.resize(d, 0);
            minus_lo.coeffs[j] = 1;
            if b.lower == b.upper {
                out.push(Constraint {
                    expr: minus_lo,
                    kind: ConstraintKind::Eq,
                });
                continue;
            }
            let mut up = b.upper.clone();
            up.coeffs.resize(d, 0);
            up.coeffs[j] = -1;
            out.push(Constraint {
                expr: minus_lo.clone(),
                kind: ConstraintKind::Ge,
            });
            out.push(Constraint {
                expr: up,
                kind: ConstraintKind::Ge,
            });
            if b.stride > 1 {
                out.push(Constraint {
                    expr: minus_lo,
                    kind: ConstraintKind::Divisible(b.stride),
                });
            }
        }
        out
    }

    /// Calls `f` on every point, in lexicographic order, stopping after `limit` points.
    /// Returns false when the limit cut the enumeration short.
    pub fn for_each_point(&self, limit: u64, mut f: impl FnMut(&[i64])) -> bool {
        let mut pt = vec![0i64; self.dims()];
        let mut budget = limit;
        self.rec(0, &mut pt, &mut budget, &mut f)
    }

    fn rec(
        &self,
        j: usize,
        pt: &mut Vec<i64>,
        budget: &mut u64,
        f: &mut impl FnMut(&[i64]),
    ) -> bool {
        if j == pt.len() {
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            f(pt);
            return true;
        }
        let b = &self.bounds[j];
        let lo = b.lower.eval(pt);
        let hi = if b.lower == b.upper {
            lo
        } else {
            b.upper.eval(pt)
        };
        let step = i128::from(b.stride.max(1));
        let mut v = lo;
        while v <= hi {
            if let Ok(x) = i64::try_from(v) {
                pt[j] = x;
                if !self.rec(j + 1, pt, budget, f) {
                    return false;
                }
            }
            v += step;
        }
        for x in pt[j..].iter_mut() {
            *x = 0;
        }
        true
    }
}

/// One label component of a piece.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Label {
    /// The component equals this affine function of the dims on every point of the piece.
    Affine { coeffs: Vec<i64>, constant: i64 },
    /// No affine function fits: every observed value lies in `min..=max`.
    Range { min: i64, max: i64 },
}

impl Label {
    /// The value at `point`, when affine (and within i64).
    pub fn eval(&self, point: &[i64]) -> Option<i64> {
        match self {
            Label::Affine { coeffs, constant } => {
                let mut v = i128::from(*constant);
                for (c, x) in coeffs.iter().zip(point) {
                    v += i128::from(*c) * i128::from(*x);
                }
                i64::try_from(v).ok()
            }
            Label::Range { .. } => None,
        }
    }

    /// Is `value` a possible value at `point`?
    pub fn admits(&self, point: &[i64], value: i64) -> bool {
        match self {
            Label::Affine { .. } => self.eval(point) == Some(value),
            Label::Range { min, max } => *min <= value && value <= *max,
        }
    }

    /// Affine (not a range).
    pub fn is_affine(&self) -> bool {
        matches!(self, Label::Affine { .. })
    }
}

/// One piece of a folded stream.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Piece {
    /// The polyhedron. For an approximate piece, the bounding box of its points.
    pub domain: Domain,
    /// Per label component: an affine function valid on every point of the piece, or a range.
    pub labels: Vec<Label>,
    /// The domain is exactly the observed points and every label is affine. Otherwise the
    /// domain and the ranges over-approximate (every observed point and value is inside).
    pub exact: bool,
    /// The domain is exactly the observed points (some labels may still be ranges).
    pub domain_exact: bool,
    /// Number of observed points in this piece (exact even when the piece is approximate).
    pub points: u64,
}

impl Piece {
    /// Is `point` in the domain?
    pub fn contains(&self, point: &[i64]) -> bool {
        self.domain.contains(point)
    }

    /// Is `point` in the domain with every label component admitting `label`?
    pub fn covers(&self, point: &[i64], label: &[i64]) -> bool {
        self.contains(point)
            && label.len() == self.labels.len()
            && self
                .labels
                .iter()
                .zip(label)
                .all(|(l, v)| l.admits(point, *v))
    }

    /// Label values at `point`: `None` for range components.
    pub fn label_values(&self, point: &[i64]) -> Vec<Option<i64>> {
        self.labels.iter().map(|l| l.eval(point)).collect()
    }

    fn from_work(lay: &Lay, w: &Wp) -> Piece {
        let d = lay.d;
        let expr = |x: usize| {
            let f = w.expr(lay, x);
            AffineExpr {
                coeffs: f[..d].to_vec(),
                constant: f[d],
            }
        };
        let bounds = (0..d)
            .map(|j| {
                if w.exact {
                    let lower = expr(lay.lo(j));
                    let s = w.stride(lay, j);
                    let upper = if s == 0 {
                        lower.clone()
                    } else {
                        expr(lay.hi(j))
                    };
                    DimBound {
                        lower,
                        upper,
                        stride: s.max(1).unsigned_abs(),
                    }
                } else {
                    DimBound {
                        lower: AffineExpr::constant(d, w.bmin(lay, j)),
                        upper: AffineExpr::constant(d, w.bmax(lay, j)),
                        stride: 1,
                    }
                }
            })
            .collect();
        let labels = (0..lay.l)
            .map(|c| {
                if w.laff(lay, c) {
                    let f = w.expr(lay, lay.lab(c));
                    Label::Affine {
                        coeffs: f[..d].to_vec(),
                        constant: f[d],
                    }
                } else {
                    Label::Range {
                        min: w.b[lay.lmin_ix(c)],
                        max: w.b[lay.lmax_ix(c)],
                    }
                }
            })
            .collect::<Vec<_>>();
        let exact = w.exact && labels.iter().all(Label::is_affine);
        Piece {
            domain: Domain { bounds },
            labels,
            exact,
            domain_exact: w.exact,
            points: w.points,
        }
    }
}

/// One enumerated point: coordinates and label values (`None` for range components).
pub type LabelledPoint = (Vec<i64>, Vec<Option<i64>>);

/// A folded stream: a union of pieces.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Folded {
    pub dims: usize,
    pub labels: usize,
    /// Points accepted (the sum of the pieces' points).
    pub points: u64,
    /// Points ignored because their point or label had the wrong length.
    pub rejected: u64,
    /// Exact pieces first (sorted by their lowest corner), then at most one approximate box.
    pub pieces: Vec<Piece>,
}

impl Folded {
    pub(crate) fn from_work(lay: &Lay, points: u64, rejected: u64, ws: &[Wp]) -> Folded {
        Folded {
            dims: lay.d,
            labels: lay.l,
            points,
            rejected,
            pieces: ws.iter().map(|w| Piece::from_work(lay, w)).collect(),
        }
    }

    /// Every piece exact and no point rejected: the pieces re-enumerate the input exactly.
    pub fn is_exact(&self) -> bool {
        self.rejected == 0 && self.pieces.iter().all(|p| p.exact)
    }

    /// Points in exact pieces.
    pub fn exact_points(&self) -> u64 {
        self.pieces
            .iter()
            .filter(|p| p.exact)
            .map(|p| p.points)
            .sum()
    }

    /// Share of points in exact pieces (1 for an empty stream).
    pub fn exact_fraction(&self) -> f64 {
        if self.points == 0 {
            1.0
        } else {
            self.exact_points() as f64 / self.points as f64
        }
    }

    /// Scalar evolution: the stream has points and label components, and one affine function
    /// per component gives the label of every observed point (on every piece). The domain
    /// itself may be approximate: the labels are checked on every point all the same.
    pub fn is_scev(&self) -> bool {
        if self.points == 0 || self.labels == 0 || self.rejected != 0 || self.pieces.is_empty() {
            return false;
        }
        if !self
            .pieces
            .iter()
            .all(|p| p.labels.iter().all(Label::is_affine))
        {
            return false;
        }
        // The reference: the piece whose domain varies along the most dims (its functions are
        // the least free). Every other piece must agree with it on its own affine hull.
        let varying = |p: &Piece| {
            (0..self.dims)
                .filter(|j| !p.domain.is_single_valued(*j))
                .count()
        };
        let Some(reference) = self.pieces.iter().max_by_key(|p| varying(p)) else {
            return false;
        };
        self.pieces.iter().all(|p| {
            p.labels.iter().zip(&reference.labels).all(|(own, r)| {
                let (Label::Affine { coeffs, constant }, Label::Affine { .. }) = (r, own) else {
                    return false;
                };
                agrees_on(p, coeffs, *constant, own)
            })
        })
    }

    /// The domain in isl's notation, pieces joined with `;`, e.g.
    /// `{ S3[i0, i1] : 0 <= i0 <= 15 and 0 <= i1 <= i0 }`. Dims are named `i0, i1, ...`. For
    /// people (tests, benchmarks, messages): the analysis builds isl objects from the pieces
    /// themselves (`feedback::poly`), never from this text.
    pub fn to_isl_set(&self, name: &str) -> String {
        crate::isl::set(self, name)
    }

    /// The pieces as a map in isl's notation (for people, as [`Self::to_isl_set`]), from the
    /// domain to the labels read as a tuple `target`, e.g.
    /// `{ S3[i0, i1] -> S1[i0, i1 - 1] : ... }`. A range component becomes an output variable
    /// `oK` constrained by `min <= oK <= max` (the map then over-approximates: see
    /// [`Folded::is_exact`] and [`Piece::exact`]).
    pub fn to_isl_map(&self, name: &str, target: &str) -> String {
        crate::isl::map(self, name, target)
    }

    /// Every point of every piece with its label values (`None` for range components), sorted.
    /// Meant for tests and validation on small streams: an approximate piece enumerates its
    /// whole bounding box.
    pub fn enumerate(&self) -> Vec<LabelledPoint> {
        self.enumerate_bounded(u64::MAX).unwrap_or_default()
    }

    /// Like [`Folded::enumerate`], `None` when there are more than `limit` points.
    pub fn enumerate_bounded(&self, limit: u64) -> Option<Vec<LabelledPoint>> {
        let mut out = Vec::new();
        let mut left = limit;
        for p in &self.pieces {
            let before = out.len();
            let complete = p.domain.for_each_point(left, |pt| {
                out.push((pt.to_vec(), p.label_values(pt)));
            });
            if !complete {
                return None;
            }
            left -= (out.len() - before) as u64;
        }
        out.sort();
        Some(out)
    }

    /// Does some piece contain `point` with every label component admitting `label`?
    pub fn covers(&self, point: &[i64], label: &[i64]) -> bool {
        self.pieces.iter().any(|p| p.covers(point, label))
    }
}

/// Does the affine function `coeffs · x + constant` equal `own` on the affine hull of piece `p`?
/// The hull of a piece is `{ x_j = lower_j(x) for its single-valued dims }`: substitute those,
/// innermost first, in the difference, which must then vanish.
fn agrees_on(p: &Piece, coeffs: &[i64], constant: i64, own: &Label) -> bool {
    let Label::Affine {
        coeffs: oc,
        constant: ok,
    } = own
    else {
        return false;
    };
    let d = coeffs.len();
    let mut diff: Vec<i128> = (0..d)
        .map(|j| i128::from(coeffs[j]) - i128::from(oc[j]))
        .collect();
    let mut cst = i128::from(constant) - i128::from(*ok);
    for j in (0..d).rev() {
        if diff[j] == 0 || !p.domain.is_single_valued(j) {
            continue;
        }
        let f = diff[j];
        diff[j] = 0;
        let lo = &p.domain.bounds[j].lower;
        for (m, c) in lo.coeffs.iter().enumerate().take(j) {
            diff[m] += f * i128::from(*c);
        }
        cst += f * i128::from(lo.constant);
    }
    cst == 0 && diff.iter().all(|c| *c == 0)
}
