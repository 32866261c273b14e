//! Values comparisons read ([`crate::input::Compared`]): `if (x > 5)` on the `x` the previous
//! iteration computed makes the iteration depend on that one, though no dependence of the
//! region shows it (comparisons only set the flags of a branch, and are no statements: made
//! statements, they entered the scheduling problems, which lost advice). They are kept
//! beside the dependences, with the distances of their folded relation, and read by the
//! verdicts that order iterations: a loop that carries one is not parallel (no privatization
//! gives each iteration the value an earlier one computed), and an order that runs its
//! comparison before its producer is not legal.

use crate::distance::Tri;
use crate::input::{Compared, Region, Span};

impl Span {
    fn is_zero(&self) -> bool {
        self.lo == Some(0) && self.hi == Some(0)
    }

    fn excludes_zero(&self) -> bool {
        self.lo.is_some_and(|l| l > 0) || self.hi.is_some_and(|h| h < 0)
    }

    fn positive(&self) -> bool {
        self.lo.is_some_and(|l| l > 0)
    }
}

/// Whether comparison `c` reads a value an earlier iteration of loop `l` produced, within one
/// iteration of the loops around `l`. `as_written`: in the program's own order (the loops
/// around `l` are those around it in the source); otherwise in some other order, where no
/// loop is taken for one around `l` (more answers are `Maybe`).
pub(crate) fn carried(c: &Compared, l: usize, as_written: bool) -> Tri {
    let mut out = Tri::No;
    for piece in &c.distances {
        let Some(at) = piece.iter().position(|(x, _)| *x == l) else {
            // `l` is not around both ends: the value comes from before the loop, or goes
            // after it.
            continue;
        };
        let outer: &[(usize, Span)] = if as_written { &piece[..at] } else { &[] };
        let here = &piece[at].1;
        if outer.iter().any(|(_, s)| s.excludes_zero()) || here.is_zero() {
            continue;
        }
        if outer.iter().all(|(_, s)| s.is_zero()) && here.excludes_zero() {
            return Tri::Yes;
        }
        out = Tri::Maybe;
    }
    out
}

/// Whether the comparisons of `region` that loop `l` carries bind it: not those through a
/// variable declared in the loop's body (the compiler's reuse of its slot), a register that
/// holds one value along the loop, or a register mirroring an array no iteration writes
/// (each iteration can read the array itself). `None`: none does; else why the loop is
/// serial, under 300 characters.
pub(crate) fn blocking(region: &Region, l: usize, as_written: bool) -> Option<String> {
    let c = region
        .compared
        .iter()
        .find(|c| carried(c, l, as_written) != Tri::No && binds(region, c, l))?;
    Some(why(c, "an earlier iteration"))
}

/// Whether loop `l` surely carries a comparison that binds it (for the loop table's kinds
/// of carried dependences: a flow).
pub(crate) fn surely_carried(region: &Region, l: usize) -> bool {
    region
        .compared
        .iter()
        .any(|c| carried(c, l, true) == Tri::Yes && binds(region, c, l))
}

/// Whether comparison `c` orders the iterations of loop `l` at all: not through a variable
/// declared in the loop's body (the compiler's reuse of its slot), a register that holds one
/// value along the loop, or a register mirroring an array no iteration of the loop writes
/// (each iteration can read the array itself).
fn binds(region: &Region, c: &Compared, l: usize) -> bool {
    let id = &region.loops[l].id;
    !c.invariant_in.contains(id)
        && !region
            .declared_in
            .get(&c.storage.describe())
            .is_some_and(|ls| ls.contains(id))
        && !crate::legality::reloadable(region, l, c.reload.as_deref())
}

/// A comparison for a person: which value, produced where, compared where.
fn why(c: &Compared, by: &str) -> String {
    let mut storage = c.storage.describe();
    if storage.len() > 80 {
        storage = storage.chars().take(77).collect::<String>() + "...";
    }
    format!(
        "the comparison at {} reads {storage}, which {by} computed at {}: the branch depends on that iteration, and no private copy holds its value",
        c.line, c.source_line
    )
}

/// The first comparison of `region` whose value a schedule's bands (isl's, along one path:
/// per band, its members' rows by statement) may compare before it is computed, or that the
/// band at `tiled` (tiled: every member nonnegative) does not keep forward. Each piece's
/// distance along a row is read from the producer's row (the comparison runs in the same
/// iteration as some statement of the loops it is in, which isl places with the producer's
/// loops where they share them). `None`: none; else why not, in words.
pub(crate) fn against_bands(
    region: &Region,
    bands: &[Vec<&std::collections::BTreeMap<String, Option<crate::affine::Affine>>>],
    tiled: Option<usize>,
) -> Option<String> {
    let broken = |c: &Compared| -> bool {
        if c.loops.first().is_some_and(|&l| !binds(region, c, l)) {
            return false;
        }
        let Some(source) = region.statements.iter().find(|s| s.name == c.source) else {
            return false;
        };
        c.distances.iter().any(|piece| {
            // In one iteration of every loop both ends run in: placed as the program places
            // it, as the statements reading the value next to it are.
            if piece.iter().all(|(_, s)| s.is_zero()) {
                return false;
            }
            let span = |l: usize| piece.iter().find(|(x, _)| *x == l).map(|(_, s)| *s);
            // The row's value at the comparison minus at the producer, when known.
            let along = |row: &crate::affine::Affine| -> Option<Span> {
                let (mut lo, mut hi) = (Some(0i128), Some(0i128));
                for (d, &k) in row.coeffs.iter().enumerate() {
                    if k == 0 {
                        continue;
                    }
                    let s = span(*source.loops.get(d)?)?;
                    let k = i128::from(k);
                    let (a, b) = if k > 0 { (s.lo, s.hi) } else { (s.hi, s.lo) };
                    lo = lo.zip(a).map(|(x, y)| x + k * y);
                    hi = hi.zip(b).map(|(x, y)| x + k * y);
                }
                Some(Span { lo, hi })
            };
            for (b, members) in bands.iter().enumerate() {
                let mut ahead = false;
                for rows in members {
                    let Some(row) = rows.get(&c.source) else {
                        // Not in this band: placed apart by a sequence, in the program's
                        // order of its statements.
                        return false;
                    };
                    let Some(s) = row.as_ref().and_then(along) else {
                        return true;
                    };
                    if Some(b) == tiled {
                        if s.lo.is_none_or(|l| l < 0) {
                            return true;
                        }
                        ahead |= s.positive();
                    } else if s.positive() {
                        return false;
                    } else if !s.is_zero() {
                        return true;
                    }
                }
                if ahead {
                    return false;
                }
            }
            false
        })
    };
    let c = region.compared.iter().find(|c| broken(c))?;
    Some(format!(
        "the comparison at {} reads {}, computed at {} by an earlier iteration, and the new schedule may run it first",
        c.line,
        c.storage.describe(),
        c.source_line
    ))
}

/// Whether loop `l` is permutable with the loops around it for every comparison: each
/// distance along those loops and `l` is nonnegative.
pub(crate) fn permutable(region: &Region, l: usize) -> bool {
    region.compared.iter().all(|c| {
        !binds(region, c, l)
            || c.distances.iter().all(|piece| {
                let Some(at) = piece.iter().position(|(x, _)| *x == l) else {
                    return true;
                };
                piece[..=at]
                    .iter()
                    .all(|(_, s)| s.lo.is_some_and(|v| v >= 0))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{Loop, Storage};

    fn span(lo: i128, hi: i128) -> Span {
        Span {
            lo: Some(lo),
            hi: Some(hi),
        }
    }

    fn compared(distances: Vec<(usize, Span)>) -> Compared {
        Compared {
            source: "S1".into(),
            storage: Storage::Scalar {
                addr: 8,
                name: "`x` (stack of main)".into(),
            },
            line: "k.c:7".into(),
            source_line: "k.c:9".into(),
            loops: vec![0, 1],
            distances: vec![distances],
            reload: None,
            invariant_in: Vec::new(),
        }
    }

    fn region(c: Compared) -> Region {
        Region {
            loops: vec![
                Loop {
                    id: "L1".into(),
                    label: "k.c:5".into(),
                },
                Loop {
                    id: "L2".into(),
                    label: "k.c:6".into(),
                },
            ],
            compared: vec![c],
            ..Region::default()
        }
    }

    #[test]
    fn a_value_of_the_previous_iteration_binds_its_loop_only() {
        // Compared at (i, j), computed at (i, j - 1).
        let r = region(compared(vec![(0, span(0, 0)), (1, span(1, 1))]));
        assert_eq!(carried(&r.compared[0], 1, true), Tri::Yes);
        assert_eq!(carried(&r.compared[0], 0, true), Tri::No);
        let why = blocking(&r, 1, true).unwrap();
        assert!(why.contains("k.c:7") && why.contains("`x`"), "{why}");
        assert!(why.len() < 300);
        assert!(blocking(&r, 0, true).is_none());
        assert!(permutable(&r, 0) && permutable(&r, 1));
    }

    #[test]
    fn the_same_iteration_binds_nothing() {
        let r = region(compared(vec![(0, span(0, 0)), (1, span(0, 0))]));
        assert!(blocking(&r, 0, true).is_none() && blocking(&r, 1, true).is_none());
        assert!(permutable(&r, 1));
    }

    #[test]
    fn an_interchange_that_reverses_it_is_refused() {
        // Compared at (i, j), computed at (i - 1, j + 1): carried by i, backwards along j.
        let r = region(compared(vec![(0, span(1, 1)), (1, span(-1, -1))]));
        assert!(blocking(&r, 1, true).is_none());
        assert!(blocking(&r, 1, false).is_some());
        assert!(permutable(&r, 0));
        assert!(!permutable(&r, 1));
    }
}
