//! Parameterization of large constants (§6): `{ [i] : 0 <= i < 1024 }` becomes
//! `[P0] -> { [i] : 0 <= i < P0 }` with the context `P0 >= 1024`, one parameter for values
//! within ±spread of each other, because large constants blow up the scheduler's ILP.

/// Replaces large constants in a family of isl strings consistently.
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
            .position(|&b| (x - b).abs() <= self.spread)
        {
            return (k, x - self.bases[k]);
        }
        self.bases.push(x);
        (self.bases.len() - 1, 0)
    }

    /// Rewrites `text`, replacing standalone integer literals of magnitude at least the
    /// threshold by `(P<k> + d)`. Coefficients (`1024i`) and digits inside names stay.
    pub fn rewrite(&mut self, text: &str) -> String {
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            let prev_ident = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
            if c.is_ascii_digit() && !prev_ident {
                let start = i;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
                let next_ident = i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_');
                let lit: String = chars[start..i].iter().collect();
                // A modulus or divisor must stay a constant for isl (`mod 1024`, `/1024`).
                let before = out.trim_end();
                let divisor = before.ends_with("mod") || before.ends_with('/');
                match lit.parse::<i64>() {
                    Ok(x) if !next_ident && !divisor && x >= self.threshold => {
                        let (k, d) = self.param_for(x);
                        match d {
                            0 => out.push_str(&format!("P{k}")),
                            d if d > 0 => out.push_str(&format!("(P{k} + {d})")),
                            d => out.push_str(&format!("(P{k} - {})", -d)),
                        }
                    }
                    _ => out.push_str(&lit),
                }
                continue;
            }
            out.push(c);
            i += 1;
        }
        out
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
    fn replaces_large_constants_and_groups_close_ones() {
        let mut p = Parameterizer::new(64, 20);
        let d = p.rewrite("{ S3[i0, i1] : 0 <= i0 <= 1023 and 0 <= i1 <= 1025 and i1 <= 3i0 + 8 }");
        assert_eq!(
            d,
            "{ S3[i0, i1] : 0 <= i0 <= P0 and 0 <= i1 <= (P0 + 2) and i1 <= 3i0 + 8 }"
        );
        let m = p.rewrite("{ S3[i] -> S1[i - 1] : 1 <= i <= 4095 }");
        assert_eq!(m, "{ S3[i] -> S1[i - 1] : 1 <= i <= P1 }");
        assert_eq!(p.prefix(), "[P0, P1] -> ");
        assert_eq!(p.context(), "[P0, P1] -> { : P0 >= 1023 and P1 >= 4095 }");
        assert!(p.declare(&d).starts_with("[P0, P1] -> { S3"));
    }

    #[test]
    fn small_constants_and_coefficients_stay() {
        let mut p = Parameterizer::new(64, 20);
        let s = "{ S0[i] : 0 <= i <= 15 and 128i >= 0 }";
        assert_eq!(p.rewrite(s), s);
        assert_eq!(p.prefix(), "");
    }

    /// isl takes only constant moduli and divisors: a parameter there is a syntax error.
    #[test]
    fn moduli_and_divisors_stay() {
        let mut p = Parameterizer::new(64, 20);
        let s = "{ S0[i] : 100 <= i <= 900 and (i - 100) mod 100 = 0 and floor((i)/128) >= 1 }";
        assert_eq!(
            p.rewrite(s),
            "{ S0[i] : P0 <= i <= P1 and (i - P0) mod 100 = 0 and floor((i)/128) >= 1 }"
        );
    }
}
