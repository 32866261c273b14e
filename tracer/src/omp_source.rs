//! OpenMP directives in the program's source. Read twice: to name the worksharing loop of an
//! outlined parallel body by its `for` statement, as the serial build's loop is named
//! ([`crate::naming`]), and to give that loop its directive for its verdict (feedback's
//! `pipeline::openmp`).

use symbols::SourceText;

/// Lines above a loop's own line searched for its directive: the pragma, its continuation
/// lines, the `for` line and the body's lines down to the one gcc names the loop by (its
/// latch's, often the body's last statement).
pub const DIRECTIVE_REACH: u32 = 16;

/// Directives of constructs inside a loop's body, passed over on the way up to the loop's
/// own.
const INNER_CONSTRUCTS: [&str; 8] = [
    "simd", "critical", "atomic", "single", "master", "barrier", "ordered", "flush",
];

/// Whether `name` is a parallel body the compiler outlined from an OpenMP construct.
pub fn is_outlined(name: &str) -> bool {
    name.contains("._omp_fn.") || name.contains("omp_outlined")
}

/// What a directive does to the loop below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Construct {
    /// `parallel for`, `for`, `do`, `loop`: its iterations are shared among the threads.
    Worksharing,
    /// A construct inside a loop's body (`simd`, `critical`, ...): not the loop's own.
    Inner,
    /// Any other (`parallel`, `single`): shares no loop.
    Other,
}

/// An OpenMP directive of the source.
#[derive(Debug, Clone)]
pub struct Directive {
    /// `#pragma omp ...` or `!$omp ...`, its continuation lines joined.
    pub text: String,
    /// The first line after it.
    pub next: u32,
    pub construct: Construct,
}

/// What follows `#pragma omp` (C, C++) or `!$omp` (Fortran, any case) on a line.
pub fn omp_directive(text: &str) -> Option<&str> {
    let t = text.trim_start();
    if let Some(rest) = t.strip_prefix('#') {
        let rest = rest.trim_start().strip_prefix("pragma")?.trim_start();
        return rest
            .strip_prefix("omp")
            .filter(|r| r.starts_with(char::is_whitespace));
    }
    let head = t.get(..5)?;
    head.eq_ignore_ascii_case("!$omp").then(|| &t[5..])
}

/// The directive that starts at line `at` of `file`, if one does.
pub fn directive_at(sources: &mut SourceText, file: &str, at: u32) -> Option<Directive> {
    let text = sources.line(file, at)?.to_string();
    let rest = omp_directive(&text)?;
    let mut whole = rest.trim_end_matches('\\').trim().to_string();
    let mut next = at + 1;
    let mut continued = text.trim_end().ends_with('\\') || text.trim_end().ends_with('&');
    while continued {
        let Some(more) = sources.line(file, next) else {
            break;
        };
        let more = more.trim();
        let more = more.strip_prefix("!$omp").unwrap_or(more);
        let more = more.strip_prefix("!$OMP").unwrap_or(more);
        let more = more.trim().trim_start_matches('&').trim();
        continued = more.ends_with('\\') || more.ends_with('&');
        whole.push(' ');
        whole.push_str(more.trim_end_matches(['\\', '&']).trim());
        next += 1;
    }
    let words: Vec<String> = whole
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    // The construct's own words come before its clauses (`parallel for simd`).
    let construct = if words
        .first()
        .is_some_and(|w| INNER_CONSTRUCTS.contains(&w.as_str()))
    {
        Construct::Inner
    } else if words
        .iter()
        .take(4)
        .any(|w| w == "for" || w == "do" || w == "loop")
    {
        Construct::Worksharing
    } else {
        Construct::Other
    };
    let prefix = if text.trim_start().starts_with('#') {
        "#pragma omp"
    } else {
        "!$omp"
    };
    Some(Directive {
        text: format!("{prefix} {whole}"),
        next,
        construct,
    })
}

/// The nearest directive on or above line `line` of `file` that is not an inner construct's
/// (`None`: none within [`DIRECTIVE_REACH`] lines).
pub fn directive_above(sources: &mut SourceText, file: &str, line: u32) -> Option<Directive> {
    (line.saturating_sub(DIRECTIVE_REACH).max(1)..=line)
        .rev()
        .filter_map(|at| directive_at(sources, file, at))
        .find(|d| d.construct != Construct::Inner)
}

/// Whether a source line starts a `for` or `while` loop (or ends a `do` loop).
pub fn starts_loop(text: &str) -> bool {
    let t = text.trim_start().trim_start_matches('}').trim_start();
    ["for", "while", "do"].iter().any(|k| {
        t.strip_prefix(k)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '(', '{']))
    })
}

/// The line of the loop statement a worksharing directive on or above `line` shares: the
/// first below the directive (preprocessor lines, srad's `#endif`, may come between).
pub fn worksharing_statement(sources: &mut SourceText, file: &str, line: u32) -> Option<u32> {
    let d = directive_above(sources, file, line)?;
    if d.construct != Construct::Worksharing {
        return None;
    }
    (d.next..d.next + DIRECTIVE_REACH).find(|&n| sources.line(file, n).is_some_and(starts_loop))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statement_below_a_worksharing_directive() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("k.c");
        std::fs::write(
            &c,
            "void f(void) {\n#pragma omp parallel for \\\n   private(j)\n#endif\n  for (i = 0; i < n; i++) {\n    int x = i;\n#pragma omp simd\n    for (j = 0; j < n; j++)\n      a[j] += x;\n  }\n#pragma omp parallel\n  for (;;) {}\n}\n",
        )
        .unwrap();
        let file = c.to_str().unwrap();
        let mut s = SourceText::default();
        // Named by the directive, by a body line, past an inner `simd`.
        for at in [2, 3, 5, 6, 9] {
            assert_eq!(worksharing_statement(&mut s, file, at), Some(5), "{at}");
        }
        assert_eq!(worksharing_statement(&mut s, file, 12), None);
        assert_eq!(worksharing_statement(&mut s, file, 1), None);
        let d = directive_above(&mut s, file, 5).unwrap();
        assert_eq!(d.text, "#pragma omp parallel for private(j)");
        assert_eq!(d.next, 4);
    }
}
