//! The step per iteration of a source variable a loop steps (`memcnt += sizeof(float)` in its
//! body, or in `for` loops inside it), read from the C source: what OpenMP's
//! `linear(memcnt: step)` clause needs for the loop to run in parallel with the variable
//! stepped as written (each iteration's copy starts at the value before the loop plus the
//! iteration's number times the step; OpenMP's examples step the variable in the body).
//!
//! Only what the source says plainly is read: one statement stepping the variable by an
//! expression that reads no data, run once by every iteration of the `for` loops around it
//! (no `if`, `while`, `switch`, `continue`, `break`, `goto` or `return` in the way), whose
//! trip counts (`j < n`, `j <= n2`, unit steps) depend on nothing the loop assigns. Anything
//! else gives `None`, and the advice asks for the closed form in words instead. Whether the
//! inner loops' trip counts were the same in every iteration is the analysis's check, on the
//! observed domains (`legality`).

use crate::scopes::{
    assignment, body_end, code_of, loop_counter, matching_paren, mentions, reads_data,
};
use symbols::SourceText;

/// A variable's step per iteration of a loop, in the source's terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LinearStep {
    /// `(n2 + 1) * sizeof(float)`.
    pub(crate) step: String,
    /// Lines of the `for` statements between the loop and the stepping statement, outermost
    /// first: their trip counts are factors of the step.
    pub(crate) inner: Vec<u32>,
}

/// Words that make a line control flow rather than a plain statement.
const CONTROL: [&str; 9] = [
    "if", "else", "while", "do", "switch", "case", "default", "for", "return",
];
/// Words that make some iterations skip the rest of the body.
const JUMPS: [&str; 4] = ["continue", "break", "goto", "return"];

/// The step per iteration of the loop whose `for` is on `file:line` of the variable `name`,
/// stepped on line `at` of its body (see the module's documentation).
pub(crate) fn per_iteration(
    sources: &mut SourceText,
    file: &str,
    line: u32,
    at: u32,
    name: &str,
) -> Option<LinearStep> {
    let counter = loop_counter(sources.line(file, line)?)?.to_string();
    let close = body_end(sources, file, line)?;
    if !(line < at && at < close) {
        return None;
    }
    let code = |sources: &mut SourceText, n: u32| sources.line(file, n).map(code_of);
    let increment = increment(&code(sources, at)?, name)?;
    let mut counters = vec![counter];
    let mut trips = Vec::new();
    let mut inner = Vec::new();
    for n in line + 1..close {
        let text = code(sources, n)?;
        if JUMPS.iter().any(|w| mentions(&text, w)) {
            return None;
        }
        if n >= at {
            continue;
        }
        let control = CONTROL.iter().any(|w| mentions(&text, w));
        match body_end(sources, file, n) {
            Some(end) if end >= at => {
                // A block around the statement: only a `for` with a plain trip count.
                let counter = loop_counter(&text)?.to_string();
                let trip = trip_count(&text, &counter)?;
                if counters.iter().any(|c| mentions(&trip, c)) || mentions(&trip, name) {
                    return None;
                }
                counters.push(counter);
                trips.push(trip);
                inner.push(n);
            }
            // A control statement whose body goes on below its line may hold `at`.
            None if control && !text.contains(';') && !text.contains('{') => return None,
            _ => {}
        }
    }
    // The trip counts hold for every iteration only if the loop assigns none of their names;
    // the step is the statement's only if no other line assigns the variable.
    for n in line + 1..close {
        let text = code(sources, n)?;
        if n != at && assignment(&text, name).is_some() {
            return None;
        }
        for trip in &trips {
            if identifiers(trip).any(|w| assignment(&text, w).is_some()) {
                return None;
            }
        }
    }
    Some(LinearStep {
        step: product(&trips, &increment),
        inner,
    })
}

/// What one run of the statement `code` adds to `name`: `name += E;` gives `E`, `name++;`
/// `1`, `name -= E;` `-(E)`, `name = name + E;` `E`. The statement must be alone on its line
/// and `E` must read no data and not the variable itself.
fn increment(code: &str, name: &str) -> Option<String> {
    let code = code.trim();
    let body = code.strip_suffix(';')?.trim();
    if body.contains(';') || CONTROL.iter().any(|w| mentions(body, w)) || body.contains('?') {
        return None;
    }
    let plain = |e: &str| -> Option<String> {
        let e = e.trim();
        (!e.is_empty() && !reads_data(e) && !mentions(e, name)).then(|| e.to_string())
    };
    if body == format!("{name}++") || body == format!("++{name}") {
        return Some("1".into());
    }
    if body == format!("{name}--") || body == format!("--{name}") {
        return Some("-1".into());
    }
    let rest = body.strip_prefix(name)?.trim_start();
    if let Some(e) = rest.strip_prefix("+=") {
        return plain(e);
    }
    if let Some(e) = rest.strip_prefix("-=") {
        return plain(e).map(|e| negate(&e));
    }
    let rhs = rest
        .strip_prefix('=')
        .filter(|r| !r.starts_with('='))?
        .trim();
    if let Some(e) = rhs.strip_prefix(name).map(str::trim_start) {
        if let Some(e) = e.strip_prefix('+') {
            return plain(e);
        }
        if let Some(e) = e.strip_prefix('-') {
            return plain(e).map(|e| negate(&e));
        }
        return None;
    }
    let e = rhs.strip_suffix(name)?.trim_end().strip_suffix('+')?;
    plain(e)
}

/// The number of iterations of the `for` statement on the line `code` with counter
/// `counter`: `for (j = 0; j <= n2; j++)` gives `n2 + 1`, `for (j = a; j < b; ++j)` gives
/// `b - a`. Unit steps and `<`, `<=` (or `>`, `>=` written the other way round) only.
fn trip_count(code: &str, counter: &str) -> Option<String> {
    let k = code.find("for")?;
    let open = code[k + 3..].trim_start();
    let header = open.get(1..matching_paren(open)?)?.to_string();
    let mut parts = header.split(';').map(str::trim);
    let (init, cond, incr) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let start = init.split_once('=')?.1.trim();
    let unit = [
        format!("{counter}++"),
        format!("++{counter}"),
        format!("{counter} += 1"),
        format!("{counter}+=1"),
    ];
    if !unit.iter().any(|u| incr == u) {
        return None;
    }
    let (bound, inclusive) = if let Some(b) = cond.strip_prefix(counter) {
        let b = b.trim_start();
        match b.strip_prefix("<=") {
            Some(e) => (e.trim(), true),
            None => (b.strip_prefix('<')?.trim(), false),
        }
    } else {
        let b = cond.strip_suffix(counter)?.trim_end();
        match b.strip_suffix(">=") {
            Some(e) => (e.trim(), true),
            None => (b.strip_suffix('>')?.trim(), false),
        }
    };
    let plain = |e: &str| !e.is_empty() && !reads_data_besides_members(e) && !e.contains(',');
    if !plain(bound) || !plain(start) || mentions(start, counter) || mentions(bound, counter) {
        return None;
    }
    let bound = grouped(bound);
    Some(match (start, inclusive) {
        ("0", true) => format!("{bound} + 1"),
        ("0", false) => bound,
        ("1", true) => bound,
        (s, true) => format!("{bound} - {} + 1", grouped(s)),
        (s, false) => format!("{bound} - {}", grouped(s)),
    })
}

/// Whether a bound reads data other than a structure's member (`net->hidden_n` is as
/// plain a bound as `n`; the loop must not assign it, which [`per_iteration`] checks by name).
fn reads_data_besides_members(e: &str) -> bool {
    reads_data(&e.replace("->", "."))
}

/// `e` as a factor of a product: in parentheses unless it is one name (`n`,
/// `net->hidden_n`), number or call (`sizeof(float)`).
fn grouped(e: &str) -> String {
    let e = e.trim();
    let ident = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_alphanumeric() || c == '_');
    let name = e.replace("->", ".").split('.').all(ident);
    let call = e.find('(').is_some_and(|k| {
        ident(e[..k].trim_end()) && matching_paren(&e[k..]) == Some(e.len() - k - 1)
    });
    if name || call {
        e.to_string()
    } else {
        format!("({e})")
    }
}

/// `e` without the parentheses around all of it.
fn ungrouped(e: &str) -> &str {
    if matching_paren(e) == Some(e.len() - 1) {
        &e[1..e.len() - 1]
    } else {
        e
    }
}

fn negate(e: &str) -> String {
    format!("-{}", grouped(e))
}

/// The names an expression mentions (not its numbers, nor `sizeof`).
fn identifiers(e: &str) -> impl Iterator<Item = &str> {
    e.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()))
        .filter(|w| *w != "sizeof")
}

/// The trip counts times the increment, as a C expression.
fn product(trips: &[String], increment: &str) -> String {
    let (negative, increment) = match increment.strip_prefix('-') {
        Some(rest) => (true, ungrouped(rest)),
        None => (false, increment),
    };
    let mut factors: Vec<String> = trips.iter().map(|t| grouped(t)).collect();
    if increment != "1" || factors.is_empty() {
        factors.push(grouped(increment));
    }
    let joined = factors.join(" * ");
    match (negative, factors.len()) {
        (false, _) => joined,
        (true, 1) => format!("-{joined}"),
        (true, _) => format!("-({joined})"),
    }
}

#[cfg(test)]
mod tests {
    use super::{increment, per_iteration, product, trip_count};

    #[test]
    fn increments() {
        assert_eq!(
            increment("memcnt += sizeof(float);", "memcnt").as_deref(),
            Some("sizeof(float)")
        );
        assert_eq!(increment("  k++;", "k").as_deref(), Some("1"));
        assert_eq!(increment("--k;", "k").as_deref(), Some("-1"));
        assert_eq!(increment("p = p + 2 * n;", "p").as_deref(), Some("2 * n"));
        assert_eq!(increment("p = 4 + p;", "p").as_deref(), Some("4"));
        assert_eq!(increment("p -= n + 1;", "p").as_deref(), Some("-(n + 1)"));
        assert_eq!(increment("p += a[i];", "p"), None);
        assert_eq!(increment("p += f(i);", "p"), None);
        assert_eq!(increment("if (x) p += 4;", "p"), None);
        assert_eq!(increment("p += 4; q = 1;", "p"), None);
        assert_eq!(increment("p = p * 2;", "p"), None);
    }

    #[test]
    fn trip_counts() {
        for (header, trips) in [
            ("for (j = 0; j <= n2; j++) {", Some("n2 + 1")),
            ("for (int j = 0; j < n; ++j)", Some("n")),
            ("for (j = 1; j <= n; j++)", Some("n")),
            ("for (j = a; j < b + 1; j++)", Some("(b + 1) - a")),
            ("for (j = 0; n > j; j++)", Some("n")),
            ("for (j = 0; j < net->hidden_n; j++)", Some("net->hidden_n")),
            ("for (j = 0; j < n; j += 2)", None),
            ("for (j = 0; j < a[i]; j++)", None),
            ("for (j = 0; j < len(s); j++)", None),
        ] {
            assert_eq!(trip_count(header, "j").as_deref(), trips, "{header}");
        }
    }

    #[test]
    fn products() {
        assert_eq!(
            product(&["n2 + 1".into()], "sizeof(float)"),
            "(n2 + 1) * sizeof(float)"
        );
        assert_eq!(product(&[], "4"), "4");
        assert_eq!(product(&["n".into()], "1"), "n");
        assert_eq!(product(&["n".into()], "-1"), "-n");
        assert_eq!(
            product(&["n".into(), "m".into()], "-(k + 1)"),
            "-(n * m * (k + 1))"
        );
    }

    #[test]
    fn steps_per_iteration_from_the_source() {
        let dir = std::env::temp_dir().join(format!("polyprof-linear-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("k.c");
        std::fs::write(
            &file,
            "void f(int n1, int n2, char *mem, float **w) {\n\
             \x20 int i, j, memcnt = 0;\n\
             \x20 for (i = 0; i <= n1; i++) {\n\
             \x20   for (j = 0; j <= n2; j++) {\n\
             \x20     mem[memcnt] = w[i][j];\n\
             \x20     memcnt += sizeof(float);\n\
             \x20   }\n\
             \x20 }\n\
             \x20 for (i = 0; i < n1; i++) {\n\
             \x20   for (j = 0; j < i; j++) {\n\
             \x20     memcnt++;\n\
             \x20   }\n\
             \x20 }\n\
             \x20 for (i = 0; i < n1; i++) {\n\
             \x20   if (w[i][0] > 0) {\n\
             \x20     memcnt++;\n\
             \x20   }\n\
             \x20 }\n\
             \x20 for (i = 0; i < n1; i++) {\n\
             \x20   for (j = 0; j < n2; j++) {\n\
             \x20     if (j == 3) continue;\n\
             \x20     memcnt++;\n\
             \x20   }\n\
             \x20 }\n\
             \x20 for (i = 0; i < n1; i++) {\n\
             \x20   memcnt += 2;\n\
             \x20   n2 = i;\n\
             \x20   for (j = 0; j < n2; j++) {\n\
             \x20     memcnt++;\n\
             \x20   }\n\
             \x20 }\n\
             }\n",
        )
        .unwrap();
        let mut sources = symbols::SourceText::default();
        let f = file.to_str().unwrap();
        let at = |line, step| {
            per_iteration(&mut symbols::SourceText::default(), f, line, step, "memcnt")
        };
        let outer = per_iteration(&mut sources, f, 3, 6, "memcnt").unwrap();
        assert_eq!(outer.step, "(n2 + 1) * sizeof(float)");
        assert_eq!(outer.inner, vec![4]);
        assert_eq!(at(4, 6).unwrap().step, "sizeof(float)");
        // A triangle, a condition, a `continue`, a bound the loop assigns.
        assert_eq!(at(9, 11), None);
        assert_eq!(at(14, 16), None);
        assert_eq!(at(19, 22), None);
        assert_eq!(at(25, 29), None);
        assert_eq!(at(25, 26).map(|s| s.step), None, "two statements step it");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
