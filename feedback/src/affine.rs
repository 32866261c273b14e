//! Reading affine expressions back from isl's textual output.
//!
//! isl prints schedules as maps such as `[n] -> { S0[i, j] -> [i, 2i + j]; S1[i] -> [i, 0] }`.
//! Only linear integer expressions are read; anything else (floor, modulo) makes the row
//! non-affine, and transformations are then not named from it.

use std::collections::HashMap;

/// An affine expression over a statement's iterators: `sum(coeffs[d] * i_d) + constant`
/// (parameters are ignored: they shift, they do not reorder).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Affine {
    pub coeffs: Vec<i64>,
    pub constant: i64,
}

impl Affine {
    /// The one iterator this expression follows with coefficient ±1, if it is that simple.
    pub fn single_dim(&self) -> Option<usize> {
        let nz: Vec<usize> = (0..self.coeffs.len())
            .filter(|&d| self.coeffs[d] != 0)
            .collect();
        match nz.as_slice() {
            [d] if self.coeffs[*d].abs() == 1 => Some(*d),
            _ => None,
        }
    }

    /// Number of iterators with a nonzero coefficient.
    pub fn dims_used(&self) -> usize {
        self.coeffs.iter().filter(|&&c| c != 0).count()
    }
}

/// One statement's rows in a schedule map: `name[vars] -> [rows]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleRows {
    pub name: String,
    /// `None` for a row that is not a linear expression.
    pub rows: Vec<Option<Affine>>,
}

/// Parses the pieces of an isl union map from statements to a schedule space.
pub fn parse_schedule_map(text: &str) -> Vec<ScheduleRows> {
    let body = match (text.find('{'), text.rfind('}')) {
        (Some(a), Some(b)) if a < b => &text[a + 1..b],
        _ => return Vec::new(),
    };
    let mut out: Vec<ScheduleRows> = Vec::new();
    for piece in split_top(body, ';') {
        let piece = piece.trim();
        let Some(arrow) = piece.find("->") else {
            continue;
        };
        let (lhs, rhs) = (&piece[..arrow], &piece[arrow + 2..]);
        let Some(lb) = lhs.find('[') else { continue };
        let name = lhs[..lb].trim().to_string();
        let vars: Vec<String> = lhs[lb + 1..lhs.rfind(']').unwrap_or(lhs.len())]
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        let Some(rb) = rhs.find('[') else { continue };
        let close = matching_bracket(rhs, rb).unwrap_or(rhs.len());
        let exprs = &rhs[rb + 1..close];
        let rows: Vec<Option<Affine>> = split_top(exprs, ',')
            .into_iter()
            .filter(|e| !e.trim().is_empty())
            .map(|e| parse_linear(e, &vars))
            .collect();
        // A statement split into several pieces (by constraints) keeps its first rows.
        if !out.iter().any(|r| r.name == name) {
            out.push(ScheduleRows { name, rows });
        }
    }
    out
}

fn matching_bracket(s: &str, open: usize) -> Option<usize> {
    let mut depth = 0;
    for (i, c) in s.char_indices().skip_while(|(i, _)| *i < open) {
        match c {
            '[' | '(' => depth += 1,
            ']' | ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// The inside of an isl set or map: what lies between its outer braces.
pub(crate) fn strip_braces(s: &str) -> String {
    match (s.find('{'), s.rfind('}')) {
        (Some(a), Some(b)) if a < b => s[a + 1..b].trim().to_string(),
        _ => s.trim().to_string(),
    }
}

/// Splits at `sep` outside brackets and parentheses.
pub fn split_top(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth -= 1,
            _ if c == sep && depth == 0 => {
                parts.push(&s[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// Parses `2i - j + 3` (parentheses allowed) over `vars`; `None` if not linear.
pub fn parse_linear(expr: &str, vars: &[String]) -> Option<Affine> {
    let index: HashMap<&str, usize> = vars
        .iter()
        .enumerate()
        .map(|(i, v)| (v.as_str(), i))
        .collect();
    let mut aff = Affine {
        coeffs: vec![0; vars.len()],
        constant: 0,
    };
    let cleaned: String = expr.chars().filter(|c| *c != '(' && *c != ')').collect();
    if cleaned.contains("floor") || cleaned.contains("mod") || cleaned.contains('/') {
        return None;
    }
    let chars: Vec<char> = cleaned.chars().filter(|c| !c.is_whitespace()).collect();
    let mut i = 0;
    let mut sign = 1i64;
    let mut any = false;
    while i < chars.len() {
        match chars[i] {
            '+' => {
                i += 1;
                continue;
            }
            '-' => {
                sign = -sign;
                i += 1;
                continue;
            }
            _ => {}
        }
        // A term: [digits][*]?[identifier]?
        let mut num: Option<i64> = None;
        let start = i;
        while i < chars.len() && chars[i].is_ascii_digit() {
            i += 1;
        }
        if i > start {
            let s: String = chars[start..i].iter().collect();
            num = Some(s.parse().ok()?);
        }
        if i < chars.len() && chars[i] == '*' {
            i += 1;
        }
        let id_start = i;
        while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
            i += 1;
        }
        let ident: String = chars[id_start..i].iter().collect();
        if num.is_none() && ident.is_empty() {
            return None;
        }
        let coef = sign.checked_mul(num.unwrap_or(1))?;
        if ident.is_empty() {
            aff.constant = aff.constant.checked_add(coef)?;
        } else if let Some(&d) = index.get(ident.as_str()) {
            aff.coeffs[d] = aff.coeffs[d].checked_add(coef)?;
        }
        // Other identifiers are parameters: ignored.
        sign = 1;
        any = true;
    }
    any.then_some(aff)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn linear_expressions() {
        let vars = v(&["i", "j", "k"]);
        assert_eq!(
            parse_linear("(i)", &vars),
            Some(Affine {
                coeffs: vec![1, 0, 0],
                constant: 0
            })
        );
        assert_eq!(
            parse_linear("2i - j + 3", &vars),
            Some(Affine {
                coeffs: vec![2, -1, 0],
                constant: 3
            })
        );
        assert_eq!(
            parse_linear("-k + n", &vars),
            Some(Affine {
                coeffs: vec![0, 0, -1],
                constant: 0
            })
        );
        assert_eq!(parse_linear("floor((i)/32)", &vars), None);
        assert_eq!(
            parse_linear("t + i", &v(&["t", "i"])).unwrap().dims_used(),
            2
        );
    }

    #[test]
    fn schedule_maps() {
        let rows =
            parse_schedule_map("[n] -> { S0[i, j, k] -> [i, k, j]; S1[i] -> [i, 0, 1] : i >= 0 }");
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].name, "S0");
        assert_eq!(rows[0].rows[1].as_ref().unwrap().single_dim(), Some(2));
        assert_eq!(rows[1].rows[2].as_ref().unwrap().constant, 1);
    }
}
