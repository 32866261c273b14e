//! Parameterization of large constants (§6): `{ [i] : 0 <= i < 1024 }` becomes
//! `[P0] -> { [i] : 0 <= i < P0 }` with the context `P0 >= 1024`, one parameter for values
//! within ±spread of each other, because large constants blow up the scheduler's ILP.

/// Replaces large constant terms of a family of polyhedra consistently (see
/// [`crate::poly::Polyhedra`], which asks it for each constraint's constant).
#[derive(Clone, Debug, Default)]
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

    /// The parameter declaration to prefix rewritten strings with (`[P0, P1] -> `), or ""
    /// when nothing was replaced.
    pub fn prefix(&self) -> String {
        if self.bases.is_empty() {
            return String::new();
        }
        let names: Vec<String> = (0..self.bases.len()).map(|k| format!("P{k}")).collect();
        format!("[{}] -> ", names.join(", "))
    }

    /// Adds the parameter declaration to a rewritten set or map string.
    pub fn declare(&self, rewritten: &str) -> String {
        let body = match rewritten.find('{') {
            Some(i) => &rewritten[i..],
            None => rewritten,
        };
        format!("{}{body}", self.prefix())
    }

    /// Each parameter fixed to its base value, to read a parameterized result back in the
    /// program's own numbers; `None` when there are no parameters.
    pub fn fixed(&self) -> Option<String> {
        if self.bases.is_empty() {
            return None;
        }
        let cons: Vec<String> = self
            .bases
            .iter()
            .enumerate()
            .map(|(k, b)| format!("P{k} = {b}"))
            .collect();
        Some(format!("{}{{ : {} }}", self.prefix(), cons.join(" and ")))
    }

    /// The context: each parameter at least its base value.
    pub fn context(&self) -> String {
        let cons: Vec<String> = self
            .bases
            .iter()
            .enumerate()
            .map(|(k, b)| format!("P{k} >= {b}"))
            .collect();
        if cons.is_empty() {
            "{ : }".to_string()
        } else {
            format!("{}{{ : {} }}", self.prefix(), cons.join(" and "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(p.prefix(), "[P0, P1] -> ");
        assert_eq!(p.context(), "[P0, P1] -> { : P0 >= 1023 and P1 >= 4095 }");
        assert_eq!(
            p.fixed().as_deref(),
            Some("[P0, P1] -> { : P0 = 1023 and P1 = 4095 }")
        );
    }

    #[test]
    fn none_never_parameterizes() {
        let mut p = Parameterizer::none();
        assert_eq!(p.split(1 << 40), None);
        assert_eq!(p.split(i64::MIN), None);
        assert_eq!(p.prefix(), "");
        assert_eq!(p.context(), "{ : }");
    }
}
