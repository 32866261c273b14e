//! Loops the source can leave early: a `break` in the body outside any loop or `switch`
//! nested in it, a `return` or a `goto`. OpenMP's `for` runs every iteration, and gcc rejects
//! a `break` under `#pragma omp parallel for`. The run may never take the exit (b+tree's
//! `find` looks for a key the tree does not hold yet), so the trace cannot tell: the source
//! does.

use crate::scopes::{code_of, LoopCode};
use std::collections::BTreeMap;
use symbols::SourceText;

/// Longest body searched, in lines.
const MAX_SPAN: u32 = 2000;

/// The line of the first statement that leaves the `for` loop on `line` of `file` early, if
/// any. `None` too when the line holds no `for` (a loop named by another line, a `while`).
pub(crate) fn early_exit(sources: &mut SourceText, file: &str, line: u32) -> Option<u32> {
    let mut scan = Scan::default();
    for n in line..line.saturating_add(MAX_SPAN) {
        let code = code_of(sources.line(file, n)?);
        match scan.line(&code) {
            Step::More => {}
            Step::Exit => return Some(n),
            Step::End => return None,
        }
    }
    None
}

/// Where the scan of the loop's text is.
#[derive(Default, PartialEq)]
enum Phase {
    /// Before its `for`.
    #[default]
    Keyword,
    /// In the `for (...)` header, at this parenthesis depth.
    Header(usize),
    /// Between the header and the body's first character.
    BeforeBody,
    /// In the body: `braced` when it is a block.
    Body { braced: bool },
}

#[derive(Default)]
struct Scan {
    phase: Phase,
    braces: usize,
    parens: usize,
    /// Brace depths of the blocks of loops and `switch`es nested in the body: a `break` in
    /// them is theirs.
    breakable: Vec<usize>,
    /// A nested loop or `switch` keyword was seen whose body has not started (or, without
    /// braces, not ended).
    pending: bool,
}

enum Step {
    More,
    Exit,
    End,
}

impl Scan {
    fn line(&mut self, code: &str) -> Step {
        let b = code.as_bytes();
        let mut k = 0;
        while k < b.len() {
            let c = b[k];
            if c.is_ascii_alphabetic() || c == b'_' {
                let start = k;
                while k < b.len() && (b[k].is_ascii_alphanumeric() || b[k] == b'_') {
                    k += 1;
                }
                if let Some(step) = self.word(&code[start..k]) {
                    return step;
                }
                continue;
            }
            if c.is_ascii_whitespace() {
                k += 1;
                continue;
            }
            if c == b'"' || c == b'\'' {
                // A literal: to its closing quote.
                k += 1;
                while k < b.len() && b[k] != c {
                    k += if b[k] == b'\\' { 2 } else { 1 };
                }
                k += 1;
                continue;
            }
            if let Some(step) = self.punct(c) {
                return step;
            }
            k += 1;
        }
        Step::More
    }

    fn word(&mut self, w: &str) -> Option<Step> {
        match self.phase {
            Phase::Keyword if w == "for" => self.phase = Phase::Header(0),
            // A first word other than `for`: no `for` on the loop's line.
            Phase::Keyword => return Some(Step::End),
            Phase::BeforeBody => {
                self.phase = Phase::Body { braced: false };
                return self.word(w);
            }
            Phase::Body { .. } => match w {
                "for" | "while" | "do" | "switch" => self.pending = true,
                "break" if self.breakable.is_empty() && !self.pending => return Some(Step::Exit),
                "return" | "goto" => return Some(Step::Exit),
                _ => {}
            },
            Phase::Header(_) => {}
        }
        None
    }

    fn punct(&mut self, c: u8) -> Option<Step> {
        match self.phase {
            Phase::Keyword => return Some(Step::End),
            Phase::Header(depth) => match c {
                b'(' => self.phase = Phase::Header(depth + 1),
                b')' if depth <= 1 => self.phase = Phase::BeforeBody,
                b')' => self.phase = Phase::Header(depth - 1),
                _ => {}
            },
            Phase::BeforeBody => {
                if c == b'{' {
                    self.phase = Phase::Body { braced: true };
                    self.braces = 1;
                } else if !c.is_ascii_whitespace() {
                    self.phase = Phase::Body { braced: false };
                    return self.punct(c);
                }
            }
            Phase::Body { braced } => match c {
                b'(' => self.parens += 1,
                b')' => self.parens = self.parens.saturating_sub(1),
                b'{' => {
                    self.braces += 1;
                    if self.pending {
                        self.breakable.push(self.braces);
                        self.pending = false;
                    }
                }
                b'}' => {
                    if self.breakable.last() == Some(&self.braces) {
                        self.breakable.pop();
                    }
                    self.braces = self.braces.saturating_sub(1);
                    if self.braces == 0 {
                        return Some(Step::End);
                    }
                }
                b';' if self.parens == 0 => {
                    // A nested loop's body without braces ends here; so does ours.
                    self.pending = false;
                    if !braced && self.braces == 0 {
                        return Some(Step::End);
                    }
                }
                _ => {}
            },
        }
        None
    }
}

/// The region's loops whose source body can leave them early, by id: the line that does.
pub(crate) fn early_exits(loop_code: &[LoopCode]) -> BTreeMap<String, String> {
    let mut sources = SourceText::default();
    let mut out = BTreeMap::new();
    for l in loop_code {
        let (id, Some((file, line))) = l.statement() else {
            continue;
        };
        if let Some(at) = early_exit(&mut sources, file, line) {
            let short = symbols::Loc {
                file: file.to_string(),
                line: at,
            }
            .short();
            out.insert(id.to_string(), short);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Scan;

    /// The 0-based line of `text` that leaves the loop on its first line early.
    fn exit_in(text: &str) -> Option<usize> {
        let mut scan = Scan::default();
        for (n, l) in text.lines().enumerate() {
            match scan.line(&crate::scopes::code_of(l)) {
                super::Step::More => {}
                super::Step::Exit => return Some(n),
                super::Step::End => return None,
            }
        }
        None
    }

    #[test]
    fn breaks_of_the_loop_itself() {
        assert_eq!(
            exit_in("for (i = 0; i < n; i++)\n  if (k[i] == key)\n    break;\nreturn 1;"),
            Some(2)
        );
        assert_eq!(
            exit_in("for (i = 0; i < n; i++) {\n  s += a[i];\n  if (s > 9) return s;\n}"),
            Some(2)
        );
        assert_eq!(
            exit_in("for (i = 0; i < n; i++) {\n  for (j = 0; j < m; j++) {\n    if (x) break;\n  }\n  if (y) break;\n}"),
            Some(4)
        );
    }

    #[test]
    fn breaks_of_nested_statements_and_code_after_the_loop() {
        assert_eq!(
            exit_in("for (i = 0; i < n; i++) {\n  for (j = 0; j < m; j++)\n    if (x) break;\n  switch (c) { case 1: break; }\n}\nbreak;"),
            None
        );
        assert_eq!(
            exit_in("for (i = 0; i < n; i++)\n  s += a[i];\nreturn s;"),
            None
        );
        assert_eq!(
            exit_in("for (i = 0; i < n; i++) { /* break */ s += 1; }"),
            None
        );
        assert_eq!(exit_in("s = 0; // for"), None);
    }
}
