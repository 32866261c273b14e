//! Dependence distances without isl: for each piece of a dependence relation, the interval
//! of `sink - source` along each loop both ends run in, from the piece's own constraints.
//!
//! This is what lets every loop of every region get its answers (ARCHITECTURE, decision 11):
//! it costs a few passes over each piece's rows, linear in the region's dependences, and
//! needs no isl context, so no budget can stop it. It is sound and may be imprecise: a
//! question it cannot decide is answered [`Tri::Maybe`], which callers read conservatively
//! (or ask isl, when isl has the time).
//!
//! The folder's pieces are boxes of bounds (each dimension between affine functions of the
//! outer ones) with affine labels (the producer's coordinates as affine functions of the
//! consumer's): a label `j = i - 1` gives the distance 1 exactly. Bounds of every variable
//! come from propagating each row's bounds over the others' (interval constraint
//! propagation), which also proves a piece empty.

use crate::input::{Dependence, Region};
use crate::poly::Convex;
use std::collections::HashMap;

/// A three-valued answer: the relation's pairs all do (`Yes`), none does (`No`), or the
/// constraints do not tell (`Maybe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tri {
    No,
    Yes,
    Maybe,
}

/// A closed integer interval; `None` bounds are infinite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Interval {
    pub lo: Option<i128>,
    pub hi: Option<i128>,
}

impl Interval {
    const ANY: Interval = Interval { lo: None, hi: None };

    fn is_zero(&self) -> bool {
        self.lo == Some(0) && self.hi == Some(0)
    }

    /// Every value is nonzero.
    fn excludes_zero(&self) -> bool {
        self.lo.is_some_and(|l| l > 0) || self.hi.is_some_and(|h| h < 0)
    }

    fn nonnegative(&self) -> bool {
        self.lo.is_some_and(|l| l >= 0)
    }
}

/// Per level shared by the two ends (outermost first): the interval of the sink's coordinate
/// minus the source's, on one nonempty piece.
type PieceDistances = Vec<Interval>;

/// The distances of every dependence of a region.
#[derive(Clone)]
pub(crate) struct Distances {
    /// Per dependence (indices of [`Region::dependences`]): its nonempty pieces' distances
    /// over the levels both ends share.
    deps: Vec<Vec<PieceDistances>>,
}

impl Distances {
    pub fn new(region: &Region) -> Distances {
        let loops: HashMap<&str, &[usize]> = region
            .statements
            .iter()
            .map(|s| (s.name.as_str(), s.loops.as_slice()))
            .collect();
        let deps = region
            .dependences
            .iter()
            .map(|d| {
                let (Some(sink), Some(source)) =
                    (loops.get(d.sink.as_str()), loops.get(d.source.as_str()))
                else {
                    return Vec::new();
                };
                let common = sink.iter().zip(*source).take_while(|(a, b)| a == b).count();
                of_dependence(d, common)
            })
            .collect();
        Distances { deps }
    }

    /// Whether dependence `i` relates instances in different iterations of the loop at
    /// `depth` within one iteration of the loops around it (`depth` must be a level both of
    /// its ends run in).
    pub fn carried_at(&self, i: usize, depth: usize) -> Tri {
        let mut out = Tri::No;
        for p in &self.deps[i] {
            let Some(at) = p.get(depth) else {
                return Tri::Maybe;
            };
            let outer = &p[..depth];
            if outer.iter().any(Interval::excludes_zero) || at.is_zero() {
                continue;
            }
            if outer.iter().all(Interval::is_zero) && at.excludes_zero() {
                // Every pair of a nonempty piece is carried: so is the dependence.
                return Tri::Yes;
            }
            out = Tri::Maybe;
        }
        out
    }

    /// Whether dependence `i` surely relates only instances in the same iteration of the
    /// loops at levels `0..depth` (the loops around a loop at `depth`): its values then stay
    /// within one run of that loop. `false`: they may cross runs.
    pub fn within_runs(&self, i: usize, depth: usize) -> bool {
        self.deps[i].iter().all(|p| {
            p.get(..depth)
                .is_some_and(|o| o.iter().all(Interval::is_zero))
        })
    }

    /// Whether dependence `i` only relates instances of the same iteration of every loop
    /// around both of its ends.
    pub fn in_one_iteration(&self, i: usize) -> Tri {
        let mut out = Tri::Yes;
        for p in &self.deps[i] {
            if p.iter().all(Interval::is_zero) {
                continue;
            }
            if p.iter().any(Interval::excludes_zero) {
                // This piece never is; the dependence is not "only" in one iteration.
                return Tri::No;
            }
            out = Tri::Maybe;
        }
        out
    }

    /// Whether every pair of dependence `i` has a nonnegative distance along each of the
    /// levels `0..=depth` (the loops of a band starting at the region's outermost loop can
    /// then be permuted as far as this dependence goes).
    pub fn nonnegative_up_to(&self, i: usize, depth: usize) -> Tri {
        for p in &self.deps[i] {
            if p.len() <= depth {
                return Tri::Maybe;
            }
            if !p[..=depth].iter().all(Interval::nonnegative) {
                return Tri::Maybe;
            }
        }
        Tri::Yes
    }
}

/// The distances of one dependence's nonempty pieces along its first `common` levels.
fn of_dependence(d: &Dependence, common: usize) -> Vec<PieceDistances> {
    of_relation(&d.relation, common)
}

/// The distances of a relation's nonempty pieces (consumer to producer) along its first
/// `common` levels.
pub(crate) fn of_relation(relation: &crate::poly::Polyhedra, common: usize) -> Vec<Vec<Interval>> {
    let n_in = relation.input.dims;
    let Some(n_out) = relation.output.as_ref().map(|t| t.dims) else {
        return Vec::new();
    };
    let common = common.min(n_in).min(n_out);
    relation
        .pieces
        .iter()
        .filter_map(|p| piece_distances(p, n_in, n_out, common))
        .collect()
}

/// Per piece of `relation` (both ends over the same dimensions, as a statement's dependences
/// on itself), whether its pairs map an instance to itself: `Yes` when every distance is 0,
/// `No` when a distance excludes 0, `Maybe` when the constraints do not tell; `None` for a
/// piece that holds no integer point.
pub(crate) fn self_pairs(relation: &crate::input::Polyhedra) -> Vec<Option<Tri>> {
    let n_in = relation.input.dims;
    let n_out = relation.output.as_ref().map_or(0, |t| t.dims);
    relation
        .pieces
        .iter()
        .map(|p| {
            if n_in != n_out {
                return Some(Tri::Maybe);
            }
            let d = piece_distances(p, n_in, n_out, n_in)?;
            Some(if d.iter().any(Interval::excludes_zero) {
                Tri::No
            } else if d.iter().all(Interval::is_zero) {
                Tri::Yes
            } else {
                Tri::Maybe
            })
        })
        .collect()
}

/// `relation` without the pieces that another piece of it holds, decided without isl: a
/// piece goes when its variables' bounds (see [`bounds`]) satisfy every constraint of a piece
/// without existentials (floyd-warshall's initialization: each register relation held
/// `0 < i1 <= 59` beside dozens of data-shaped pieces inside it). The same pairs, in fewer
/// pieces: every isl question on the relation costs less. Empty pieces go too.
pub(crate) fn without_subsumed(relation: &crate::input::Polyhedra) -> crate::input::Polyhedra {
    let dims = relation.input.dims + relation.output.as_ref().map_or(0, |t| t.dims);
    let rows_of = |p: &Convex| -> Vec<(Vec<i128>, bool)> {
        let wide = |r: &Vec<i64>| r.iter().map(|&v| i128::from(v)).collect::<Vec<i128>>();
        p.inequalities
            .iter()
            .map(|r| (wide(r), false))
            .chain(p.equalities.iter().map(|r| (wide(r), true)))
            .collect()
    };
    let boxes: Vec<Option<Vec<Interval>>> = relation
        .pieces
        .iter()
        .map(|p| bounds(&rows_of(p), dims + p.exists))
        .collect();
    // Pieces without existentials, whose rows read the tuple's variables only.
    let simple: Vec<usize> = (0..relation.pieces.len())
        .filter(|&q| relation.pieces[q].exists == 0 && boxes[q].is_some())
        .collect();
    if simple.is_empty() && boxes.iter().all(Option::is_some) {
        return relation.clone();
    }
    // The least value of `row · x + c` over a box, `None` when unbounded.
    let least = |row: &[i128], b: &[Interval], sign: i128| -> Option<i128> {
        let mut sum = sign.checked_mul(*row.get(dims)?)?;
        for (u, iv) in b.iter().enumerate().take(dims) {
            let a = sign.checked_mul(row[u])?;
            let term = match a {
                0 => 0,
                a if a > 0 => a.checked_mul(iv.lo?)?,
                a => a.checked_mul(iv.hi?)?,
            };
            sum = sum.checked_add(term)?;
        }
        Some(sum)
    };
    // An equality of `p` over the tuple's variables only (its existentials' columns zero),
    // as a row of a piece without existentials.
    let plain_equalities = |p: &Convex| -> Vec<Vec<i64>> {
        p.equalities
            .iter()
            .filter(|r| r[dims..dims + p.exists].iter().all(|&v| v == 0))
            .map(|r| {
                let mut plain = r[..dims].to_vec();
                plain.push(r[dims + p.exists]);
                plain
            })
            .collect()
    };
    // Whether every constraint of piece `q` holds on piece `p`: an equality when `p` has it
    // too (a box loses the labels' correlations, `o0 = i0`), an inequality when it holds on
    // `p`'s box.
    let holds = |q: usize, p: usize, b: &[Interval]| -> bool {
        let q = &relation.pieces[q];
        let equal = plain_equalities(&relation.pieces[p]);
        let negated = |r: &Vec<i64>| {
            r.iter()
                .map(|v| v.checked_neg())
                .collect::<Option<Vec<i64>>>()
        };
        q.equalities
            .iter()
            .all(|r| equal.contains(r) || negated(r).is_some_and(|n| equal.contains(&n)))
            && q.inequalities.iter().all(|r| {
                let row: Vec<i128> = r.iter().map(|&v| i128::from(v)).collect();
                row.len() == dims + 1 && least(&row, b, 1).is_some_and(|v| v >= 0)
            })
    };
    let mut kept = vec![true; relation.pieces.len()];
    for p in 0..relation.pieces.len() {
        let Some(b) = &boxes[p] else {
            kept[p] = false;
            continue;
        };
        kept[p] = !simple.iter().any(|&q| q != p && kept[q] && holds(q, p, b));
    }
    crate::input::Polyhedra {
        input: relation.input.clone(),
        output: relation.output.clone(),
        pieces: relation
            .pieces
            .iter()
            .zip(&kept)
            .filter(|(_, &k)| k)
            .map(|(p, _)| p.clone())
            .collect(),
    }
}

/// Bounds of every variable of a piece (`[in, out, exists]`), or `None` when the piece holds
/// no integer point.
/// `rows` are `row · x + c >= 0`, or `= 0` where marked.
fn bounds(rows: &[(Vec<i128>, bool)], vars: usize) -> Option<Vec<Interval>> {
    let mut b = vec![Interval::ANY; vars];
    // Propagation converges fast on the folder's triangular boxes; a few rounds bound it on
    // anything else (the result stays sound, only looser).
    for _ in 0..vars.max(2) * 2 {
        let mut changed = false;
        for (row, eq) in rows {
            for sign in [1i128, -1] {
                if sign < 0 && !eq {
                    continue;
                }
                tighten(&mut b, row, sign, &mut changed)?;
            }
        }
        if !changed {
            break;
        }
    }
    Some(b)
}

/// Tightens the bounds `b` by the row `sign * (row · x + c) >= 0`; `None` when it proves
/// the row unsatisfiable.
fn tighten(b: &mut [Interval], row: &[i128], sign: i128, changed: &mut bool) -> Option<()> {
    let vars = b.len();
    let c = sign * row.get(vars).copied().unwrap_or(0);
    // The largest value of each term `a_u x_u`, and how many are unbounded.
    let mut max_sum: i128 = c;
    let mut unbounded = 0usize;
    let mut unbounded_var = 0usize;
    let term_max = |a: i128, iv: &Interval| -> Option<i128> {
        if a > 0 {
            iv.hi.map(|h| a.saturating_mul(h))
        } else {
            iv.lo.map(|l| a.saturating_mul(l))
        }
    };
    for u in 0..vars {
        let a = sign * row[u];
        if a == 0 {
            continue;
        }
        match term_max(a, &b[u]) {
            Some(m) => max_sum = max_sum.saturating_add(m),
            None => {
                unbounded += 1;
                unbounded_var = u;
            }
        }
    }
    if unbounded == 0 && max_sum < 0 {
        return None;
    }
    for v in 0..vars {
        let a = sign * row[v];
        if a == 0 {
            continue;
        }
        // The rest's largest value, without v's term.
        let rest = match (unbounded, term_max(a, &b[v])) {
            (0, Some(m)) => max_sum.saturating_sub(m),
            (1, None) if unbounded_var == v => max_sum,
            _ => continue,
        };
        // a * x_v + rest >= 0 for some rest <= max: a * x_v >= -rest.
        if rest.unsigned_abs() > (1u128 << 100) {
            continue;
        }
        if a > 0 {
            let lo = div_ceil(-rest, a);
            if b[v].lo.is_none_or(|l| lo > l) {
                b[v].lo = Some(lo);
                *changed = true;
            }
        } else {
            let hi = div_floor(rest, -a);
            if b[v].hi.is_none_or(|h| hi < h) {
                b[v].hi = Some(hi);
                *changed = true;
            }
        }
        if let (Some(l), Some(h)) = (b[v].lo, b[v].hi) {
            if l > h {
                return None;
            }
        }
    }
    Some(())
}

fn div_floor(a: i128, b: i128) -> i128 {
    let q = a / b;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q - 1
    } else {
        q
    }
}

fn div_ceil(a: i128, b: i128) -> i128 {
    -div_floor(-a, b)
}

/// The distances `in[k] - out[k]` for `k < common` on one piece, `None` for an empty piece.
/// Each `out[k]` is replaced by `in[k] - δ_k` in every row, so that the bounds found for
/// `δ_k` use every constraint relating the two ends (`j < i`, `j = i - 1`), not only each
/// end's own box.
fn piece_distances(p: &Convex, n_in: usize, n_out: usize, common: usize) -> Option<PieceDistances> {
    let vars = n_in + n_out + p.exists;
    let change = |r: &Vec<i64>| -> Vec<i128> {
        let mut r: Vec<i128> = r.iter().map(|&v| i128::from(v)).collect();
        for k in 0..common {
            let b = r[n_in + k];
            r[k] += b;
            r[n_in + k] = -b;
        }
        r
    };
    let rows: Vec<(Vec<i128>, bool)> = p
        .inequalities
        .iter()
        .map(|r| (change(r), false))
        .chain(p.equalities.iter().map(|r| (change(r), true)))
        .collect();
    let b = bounds(&rows, vars)?;
    Some(b[n_in..n_in + common].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{DepKind, EqualPairs, Polyhedra, Statement, Storage};

    fn region(loops: &[(&str, Vec<usize>)], deps: &[&str]) -> Region {
        let statements = loops
            .iter()
            .map(|(name, l)| Statement {
                name: name.to_string(),
                label: String::new(),
                loops: l.clone(),
                positions: vec![0; l.len() + 1],
                domain: Polyhedra::empty_set(name, l.len()),
                ops: 1,
                accesses: Vec::new(),
                fp: false,
                exact: true,
                update: None,
            })
            .collect();
        let dependences = deps
            .iter()
            .map(|text| {
                let relation = Polyhedra::parse(text).expect("a map");
                Dependence {
                    source: relation.output.as_ref().expect("a map").name.clone(),
                    sink: relation.input.name.clone(),
                    kind: DepKind::Flow,
                    storage: Storage::Array { name: "A".into() },
                    relation: relation.into(),
                    exact: true,
                    equal_pairs: EqualPairs::Unknown,
                    reload: None,
                    mirror: None,
                    invariant_in: Vec::new(),
                }
            })
            .collect();
        Region {
            statements,
            dependences,
            ..Region::default()
        }
    }

    #[test]
    fn a_constant_label_gives_the_distance() {
        // S1[i, j] reads what S0[i, j - 1] wrote: carried by j, not by i.
        let r = region(
            &[("S0", vec![0, 1]), ("S1", vec![0, 1])],
            &["{ S1[i, j] -> S0[i, j - 1] : 0 <= i <= 9 and 1 <= j <= 9 }"],
        );
        let d = Distances::new(&r);
        assert_eq!(d.carried_at(0, 0), Tri::No);
        assert_eq!(d.carried_at(0, 1), Tri::Yes);
        assert_eq!(d.in_one_iteration(0), Tri::No);
        assert_eq!(d.nonnegative_up_to(0, 1), Tri::Yes);
    }

    #[test]
    fn an_outer_distance_hides_the_inner_one() {
        // S1[i, j] -> S0[i - 1, j + 1]: carried by i; j's distance is negative.
        let r = region(
            &[("S0", vec![0, 1]), ("S1", vec![0, 1])],
            &["{ S1[i, j] -> S0[i - 1, j + 1] : 1 <= i <= 9 and 0 <= j <= 8 }"],
        );
        let d = Distances::new(&r);
        assert_eq!(d.carried_at(0, 0), Tri::Yes);
        assert_eq!(d.carried_at(0, 1), Tri::No);
        assert_eq!(d.nonnegative_up_to(0, 0), Tri::Yes);
        assert_eq!(d.nonnegative_up_to(0, 1), Tri::Maybe);
    }

    #[test]
    fn a_dependence_within_one_iteration() {
        let r = region(
            &[("S0", vec![0]), ("S1", vec![0])],
            &["{ S1[i] -> S0[i] : 0 <= i <= 9 }"],
        );
        let d = Distances::new(&r);
        assert_eq!(d.carried_at(0, 0), Tri::No);
        assert_eq!(d.in_one_iteration(0), Tri::Yes);
    }

    #[test]
    fn a_reduction_into_one_cell_is_carried() {
        // s += a[i]: every iteration reads the previous one's s, a label fixed at a range.
        let r = region(
            &[("S0", vec![0])],
            &["{ S0[i] -> S0[j] : 1 <= i <= 99 and 0 <= j <= 98 and j < i }"],
        );
        let d = Distances::new(&r);
        // No label is a function of i, but `j < i` bounds the distance: 1 <= i - j.
        assert_eq!(d.carried_at(0, 0), Tri::Yes);
        assert_eq!(d.in_one_iteration(0), Tri::No);
    }

    #[test]
    fn an_empty_piece_relates_nothing() {
        let mut r = region(
            &[("S0", vec![0])],
            &["{ S0[i] -> S0[i - 1] : 5 <= i <= 9 }"],
        );
        // And i <= 3: no integer point is left.
        let piece = &mut std::sync::Arc::make_mut(&mut r.dependences[0].relation).pieces[0];
        let width = 2 + piece.exists + 1;
        let mut row = vec![0; width];
        row[0] = -1;
        row[width - 1] = 3;
        piece.inequalities.push(row);
        let d = Distances::new(&r);
        assert_eq!(d.carried_at(0, 0), Tri::No);
        assert_eq!(d.in_one_iteration(0), Tri::Yes);
    }

    #[test]
    fn distances_across_different_nests_are_not_compared() {
        // S0 in loop 0, S1 in loop 1: no common level.
        let r = region(
            &[("S0", vec![0]), ("S1", vec![1])],
            &["{ S1[i] -> S0[i] : 0 <= i <= 9 }"],
        );
        let d = Distances::new(&r);
        assert_eq!(d.in_one_iteration(0), Tri::Yes);
        assert_eq!(d.carried_at(0, 0), Tri::Maybe);
    }

    /// One relation of the pieces of `texts` (one piece each), in that order.
    fn pieces_of(texts: &[&str]) -> Polyhedra {
        let mut out = Polyhedra::parse(texts[0]).expect("a map");
        out.pieces = texts
            .iter()
            .flat_map(|t| Polyhedra::parse(t).expect("a map").pieces)
            .collect();
        out
    }

    #[test]
    fn a_piece_inside_another_goes() {
        let r = pieces_of(&[
            "{ S0[i] -> S0[i - 1] : 10 <= i <= 20 }",
            "{ S0[i] -> S0[i - 1] : 0 < i <= 59 }",
            "{ S0[i] -> S0[i - 1] : 50 <= i <= 70 }",
            "{ S0[i] -> S0[i - 2] : 10 <= i <= 20 }",
        ]);
        let kept = without_subsumed(&r);
        assert_eq!(kept.pieces, r.pieces[1..].to_vec());
    }

    #[test]
    fn self_pairs_by_piece() {
        let r = pieces_of(&[
            "{ S0[i] -> S0[i] : 0 <= i <= 5 }",
            "{ S0[i] -> S0[i + 1] : 0 <= i <= 5 }",
            "{ S0[i] -> S0[o] : 0 <= i <= 5 and 0 <= o <= 5 }",
        ]);
        assert_eq!(
            self_pairs(&r),
            vec![Some(Tri::Yes), Some(Tri::No), Some(Tri::Maybe)]
        );
    }
}
