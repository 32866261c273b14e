//! Parameterization of large constants (§6): `{ [i] : 0 <= i < 1024 }` becomes
//! `[P0] -> { [i] : 0 <= i < P0 }` with the context `P0 >= 1024`, one parameter for values
//! within ±spread of each other, because large constants blow up the scheduler's ILP.

use crate::islx::isl;
use crate::poly::matrix;
use crate::Error;
use isl_rs::{BasicSet, Context, DimType, Set, Space};

/// Replaces large constant terms of a family of polyhedra consistently (see
/// [`crate::poly::Polyhedra`], which asks it for each constraint's constant).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parameterizer {
    threshold: i64,
    spread: i64,
    /// Base value of each parameter `P<k>`.
    bases: Vec<i64>,
}

impl Parameterizer {
    pub fn new(threshold: i64, spread: i64) -> Parameterizer {
        Parameterizer {
            threshold,
            spread,
            bases: Vec::new(),
        }
    }

    fn param_for(&mut self, x: i64) -> (usize, i64) {
        if let Some(k) = self
            .bases
            .iter()
            .position(|&b| x.abs_diff(b) <= self.spread.unsigned_abs())
        {
            return (k, x - self.bases[k]);
        }
        self.bases.push(x);
        (self.bases.len() - 1, 0)
    }

    /// Never parameterizes: the constants stay as they are.
    pub fn none() -> Parameterizer {
        Parameterizer::new(i64::MAX, 0)
    }

    /// A constant term of a constraint, split when its magnitude reaches the threshold:
    /// `(k, sign, rest)` for `sign * P<k> + rest`; `None` when it stays a constant.
    pub fn split(&mut self, c: i64) -> Option<(usize, i64, i64)> {
        let magnitude = c.checked_abs()?;
        if magnitude < self.threshold {
            return None;
        }
        let (k, d) = self.param_for(magnitude);
        let sign = c.signum();
        Some((k, sign, sign * d))
    }

    /// Number of parameters introduced so far.
    pub fn count(&self) -> usize {
        self.bases.len()
    }

    /// The name of parameter `k`.
    pub fn name(k: usize) -> String {
        format!("P{k}")
    }

    /// The context: each parameter at least its base value, as an isl set of `ctx`.
    pub(crate) fn context(&self, ctx: &Context) -> Result<Set, Error> {
        self.bounds(ctx, false, &|_| true)
    }

    /// The context of the parameters named in `used` only (a problem without the others).
    pub(crate) fn context_of(&self, ctx: &Context, used: &[String]) -> Result<Set, Error> {
        self.bounds(ctx, false, &|k| used.contains(&Parameterizer::name(k)))
    }

    /// [`Self::fixed`] for the parameters named in `used`: the problem at the program's own
    /// sizes.
    pub(crate) fn fixed_of(&self, ctx: &Context, used: &[String]) -> Result<Set, Error> {
        self.bounds(ctx, true, &|k| used.contains(&Parameterizer::name(k)))
    }

    /// Each parameter fixed to its base value, to read a parameterized result back in the
    /// program's own numbers; `None` when there are no parameters.
    pub(crate) fn fixed(&self, ctx: &Context) -> Result<Option<Set>, Error> {
        match self.bases.is_empty() {
            true => Ok(None),
            false => self.bounds(ctx, true, &|_| true).map(Some),
        }
    }

    /// `P<k> - base_k` `= 0` (`equal`) or `>= 0` for every parameter `k` that `keep` keeps.
    fn bounds(
        &self,
        ctx: &Context,
        equal: bool,
        keep: &dyn Fn(usize) -> bool,
    ) -> Result<Set, Error> {
        let e = || isl("bounding parameters");
        let kept: Vec<usize> = (0..self.bases.len()).filter(|&k| keep(k)).collect();
        let n = kept.len();
        let mut space = Space::params_alloc(ctx, n as u32).map_err(e())?;
        for (col, &k) in kept.iter().enumerate() {
            space = space
                .set_dim_name(DimType::Param, col as u32, &Parameterizer::name(k))
                .map_err(e())?;
        }
        // Columns: [constant, parameters].
        let rows: Vec<Vec<i64>> = kept
            .iter()
            .enumerate()
            .map(|(col, &k)| {
                let mut r = vec![0; n + 1];
                r[0] = -self.bases[k];
                r[col + 1] = 1;
                r
            })
            .collect();
        let (eq, ineq) = match equal {
            true => (rows, Vec::new()),
            false => (Vec::new(), rows),
        };
        BasicSet::from_constraint_matrices(
            space,
            matrix(ctx, &eq, n + 1)?,
            matrix(ctx, &ineq, n + 1)?,
            DimType::Cst,
            DimType::Param,
            DimType::Set,
            DimType::Div,
        )
        .and_then(Set::from_basic_set)
        .map_err(e())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &Set) -> String {
        crate::islx::text(s).expect("printable")
    }

    #[test]
    fn large_constants_become_parameters_and_close_ones_share() {
        let mut p = Parameterizer::new(64, 20);
        assert_eq!(p.split(1023), Some((0, 1, 0)));
        assert_eq!(p.split(1025), Some((0, 1, 2)));
        assert_eq!(p.split(-1030), Some((0, -1, -7)));
        assert_eq!(p.split(4095), Some((1, 1, 0)));
        assert_eq!(p.split(15), None);
        assert_eq!(p.split(-63), None);
        assert_eq!(p.count(), 2);
        let ctx = Context::alloc();
        assert_eq!(
            text(&p.context(&ctx).unwrap()),
            "[P0, P1] -> {  : P0 >= 1023 and P1 >= 4095 }"
        );
        assert_eq!(
            text(&p.fixed(&ctx).unwrap().unwrap()),
            "[P0, P1] -> {  : P0 = 1023 and P1 = 4095 }"
        );
    }

    #[test]
    fn none_never_parameterizes() {
        let mut p = Parameterizer::none();
        assert_eq!(p.split(1 << 40), None);
        assert_eq!(p.split(i64::MIN), None);
        let ctx = Context::alloc();
        assert!(p.fixed(&ctx).unwrap().is_none());
        assert_eq!(text(&p.context(&ctx).unwrap()), "{  :  }");
    }
}
