//! isl's notation for folded streams, `{ S[i0, i1] : 0 <= i0 <= 15 and 0 <= i1 <= i0 }`, for
//! people: tests, benchmarks and messages show folded pieces in it.

use crate::piece::{AffineExpr, Folded, Label, Piece};
use std::fmt::Write;

/// Name of dim j.
pub(crate) fn dim_name(j: usize) -> String {
    format!("i{j}")
}

/// `2i0 - i1 + 3`, isl style (`0` for the zero function).
pub(crate) fn fmt_aff(coeffs: &[i64], constant: i64, name: &dyn Fn(usize) -> String) -> String {
    let mut s = String::new();
    for (j, c) in coeffs.iter().enumerate() {
        if *c == 0 {
            continue;
        }
        let mag = c.unsigned_abs();
        if s.is_empty() {
            if *c < 0 {
                s.push('-');
            }
        } else {
            s.push_str(if *c < 0 { " - " } else { " + " });
        }
        if mag != 1 {
            let _ = write!(s, "{mag}");
        }
        s.push_str(&name(j));
    }
    if constant != 0 || s.is_empty() {
        if s.is_empty() {
            let _ = write!(s, "{constant}");
        } else {
            let _ = write!(
                s,
                "{}{}",
                if constant < 0 { " - " } else { " + " },
                constant.unsigned_abs()
            );
        }
    }
    s
}

fn fmt_expr(e: &AffineExpr) -> String {
    fmt_aff(&e.coeffs, e.constant, &dim_name)
}

/// The constraints of a piece's domain, each an isl conjunct.
pub(crate) fn domain_constraints(p: &Piece) -> Vec<String> {
    let mut out = Vec::new();
    for (j, b) in p.domain.bounds.iter().enumerate() {
        let x = dim_name(j);
        if b.lower == b.upper {
            out.push(format!("{x} = {}", fmt_expr(&b.lower)));
            continue;
        }
        out.push(format!(
            "{} <= {x} <= {}",
            fmt_expr(&b.lower),
            fmt_expr(&b.upper)
        ));
        if b.stride > 1 {
            if b.lower.is_constant() && b.lower.constant == 0 {
                out.push(format!("{x} mod {} = 0", b.stride));
            } else {
                // x_j - lower, as one expression (wide arithmetic, then back to i64 if it fits).
                let mut coeffs: Vec<i128> =
                    b.lower.coeffs.iter().map(|c| -i128::from(*c)).collect();
                coeffs.resize(p.domain.bounds.len(), 0);
                coeffs[j] += 1;
                let cst = -i128::from(b.lower.constant);
                let fits: Option<Vec<i64>> =
                    coeffs.iter().map(|c| i64::try_from(*c).ok()).collect();
                match (fits, i64::try_from(cst)) {
                    (Some(cs), Ok(k)) => out.push(format!(
                        "({}) mod {} = 0",
                        fmt_aff(&cs, k, &dim_name),
                        b.stride
                    )),
                    _ => out.push(format!(
                        "({x} - ({})) mod {} = 0",
                        fmt_expr(&b.lower),
                        b.stride
                    )),
                }
            }
        }
    }
    out
}

fn tuple(name: &str, d: usize) -> String {
    let dims: Vec<String> = (0..d).map(dim_name).collect();
    format!("{name}[{}]", dims.join(", "))
}

fn with_constraints(head: String, cons: &[String]) -> String {
    if cons.is_empty() {
        head
    } else {
        format!("{head} : {}", cons.join(" and "))
    }
}

pub(crate) fn set(f: &Folded, name: &str) -> String {
    let parts: Vec<String> = f
        .pieces
        .iter()
        .map(|p| with_constraints(tuple(name, f.dims), &domain_constraints(p)))
        .collect();
    braces(&parts)
}

pub(crate) fn map(f: &Folded, name: &str, target: &str) -> String {
    let parts: Vec<String> = f
        .pieces
        .iter()
        .map(|p| {
            let mut cons = domain_constraints(p);
            let outs: Vec<String> = p
                .labels
                .iter()
                .enumerate()
                .map(|(c, l)| match l {
                    Label::Affine { coeffs, constant } => fmt_aff(coeffs, *constant, &dim_name),
                    Label::Range { min, max } if min == max => format!("{min}"),
                    Label::Range { min, max } => {
                        cons.push(format!("{min} <= o{c} <= {max}"));
                        format!("o{c}")
                    }
                })
                .collect();
            let head = format!("{} -> {target}[{}]", tuple(name, f.dims), outs.join(", "));
            with_constraints(head, &cons)
        })
        .collect();
    braces(&parts)
}

fn braces(parts: &[String]) -> String {
    if parts.is_empty() {
        "{  }".to_string()
    } else {
        format!("{{ {} }}", parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn affine_formatting() {
        assert_eq!(fmt_aff(&[0, 0], 0, &dim_name), "0");
        assert_eq!(fmt_aff(&[0, 0], -3, &dim_name), "-3");
        assert_eq!(fmt_aff(&[1, 0], 0, &dim_name), "i0");
        assert_eq!(fmt_aff(&[-1, 2], 0, &dim_name), "-i0 + 2i1");
        assert_eq!(fmt_aff(&[0, 1], -1, &dim_name), "i1 - 1");
        assert_eq!(fmt_aff(&[8, -8], 5, &dim_name), "8i0 - 8i1 + 5");
        assert_eq!(
            fmt_aff(&[i64::MIN], i64::MIN, &dim_name),
            "-9223372036854775808i0 - 9223372036854775808"
        );
    }
}
