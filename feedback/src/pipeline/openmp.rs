//! The program's own OpenMP loops among a region's loops: the worksharing loops of the
//! parallel bodies the compiler outlined (gcc's `main._omp_fn.0`, clang's `.omp_outlined.`),
//! which the runtime calls back and the engine traces as the program's code. Each gets the
//! directive its source writes and the frames whose stack variables its threads share, for
//! its verdict ([`crate::analyze`]).

use crate::input::{Loop, OmpLoop, SharedWrite};
use crate::scopes::{body_end, code_of};
use std::collections::{BTreeMap, BTreeSet};
use symbols::SourceText;
use tracer::{NodeId, NodeKind, ScheduleTree};

pub(crate) use tracer::omp_source::is_outlined;
use tracer::omp_source::{directive_above as nearest_directive, Construct, DIRECTIVE_REACH};

/// The outlined parallel body (its node and name) of which loop node `n` is the outermost
/// loop: the loop the runtime's threads share.
pub(super) fn outlined_body(
    tree: &ScheduleTree,
    naming: &tracer::Naming<'_>,
    n: NodeId,
) -> Option<(NodeId, String)> {
    if !matches!(tree.nodes[n].kind, NodeKind::Loop { .. }) {
        return None;
    }
    let mut up = tree.nodes[n].parent;
    while let Some(p) = up {
        match tree.nodes[p].kind {
            NodeKind::Func { entry, .. } => {
                let name = naming.function(entry);
                return is_outlined(&name).then_some((p, name));
            }
            NodeKind::Loop { .. } | NodeKind::Recursion { .. } => return None,
            _ => up = tree.nodes[p].parent,
        }
    }
    None
}

/// The OpenMP worksharing loops among `loop_nodes` (named by `loops`), by loop id.
pub(super) fn omp_loops(
    loop_nodes: &[NodeId],
    loops: &[Loop],
    tree: &ScheduleTree,
    naming: &tracer::Naming<'_>,
) -> BTreeMap<String, OmpLoop> {
    let mut sources = SourceText::default();
    let mut out = BTreeMap::new();
    for (&n, l) in loop_nodes.iter().zip(loops) {
        let NodeKind::Loop { func, lp } = tree.nodes[n].kind else {
            continue;
        };
        let Some((body_node, body)) = outlined_body(tree, naming, n) else {
            continue;
        };
        let directive = naming
            .loop_location(func, lp)
            .and_then(|loc| directive_above(&mut sources, &loc.file, loc.line));
        let directive = match directive {
            // Read, and no worksharing directive: a loop every thread runs whole.
            Some(Some(Found::Other)) => continue,
            Some(Some(Found::Worksharing(d, c))) => (Some(d), c),
            // Unreadable source: the outermost loop of an outlined body.
            Some(None) | None => (None, None),
        };
        let (directive, statement) = directive;
        let declared = match &statement {
            Some((_, line)) => body_variables(naming, tree, body_node, *line),
            None => BTreeSet::new(),
        };
        let shared_writes = match (&statement, naming.loop_location(func, lp)) {
            (Some((counter, line)), Some(loc))
                if directive.as_deref().is_some_and(|d| d.starts_with('#')) =>
            {
                assigned_in_body(&mut sources, &loc.file, *line)
                    .into_iter()
                    .filter(|w| &w.name != counter && !declared.contains(&w.name))
                    .collect()
            }
            _ => Vec::new(),
        };
        let (thread_rows, thread_blocks) = match (&statement, naming.loop_location(func, lp)) {
            (Some((_, line)), Some(loc)) => thread_rows(&mut sources, &loc.file, *line),
            _ => Default::default(),
        };
        let line = statement.as_ref().map(|(_, l)| *l);
        let span = match (line, naming.loop_location(func, lp)) {
            (Some(line), Some(loc)) => {
                let last = last_line(&mut sources, &loc.file, line);
                let name = loc.file.rsplit('/').next().unwrap_or(&loc.file).to_string();
                Some((name, line, last))
            }
            _ => None,
        };
        let counter = statement.map(|(c, _)| c);
        let clauses = directive
            .as_deref()
            .map(|d| clause_variables(d).into_iter().collect())
            .unwrap_or_default();
        let reduced = directive
            .as_deref()
            .map(|d| variables_of(d, &["reduction"]).into_iter().collect())
            .unwrap_or_default();
        out.insert(
            l.id.clone(),
            OmpLoop {
                directive,
                counter,
                line,
                declared: declared.into_iter().collect(),
                clauses,
                reduced,
                span,
                body,
                shared_writes,
                shared_frames: frames_around(tree, naming, body_node),
                thread_rows,
                thread_blocks,
            },
        );
    }
    out
}

/// The program's functions whose calls enclose the parallel body's: their stack variables
/// are reached from the body through pointers, and shared by its threads.
fn frames_around(tree: &ScheduleTree, naming: &tracer::Naming<'_>, body: NodeId) -> Vec<String> {
    let mut frames = Vec::new();
    let mut up = tree.nodes[body].parent;
    while let Some(p) = up {
        if let NodeKind::Func { entry, .. } = tree.nodes[p].kind {
            if naming.import(entry).is_none() {
                frames.push(naming.function(entry));
            }
        }
        up = tree.nodes[p].parent;
    }
    frames
}

enum Found {
    /// `#pragma omp parallel for ...`, continuation lines joined, and the counter and line of
    /// the loop statement below it.
    Worksharing(String, Option<(String, u32)>),
    /// A directive that shares no loop (`#pragma omp parallel`, `single`).
    Other,
}

/// The OpenMP directive on or just above source line `line` of `file` (`None`: the file
/// cannot be read, or no directive is there).
fn directive_above(sources: &mut SourceText, file: &str, line: u32) -> Option<Option<Found>> {
    sources.line(file, line)?;
    let Some(d) = nearest_directive(sources, file, line) else {
        return Some(None);
    };
    Some(Some(match d.construct {
        Construct::Worksharing => {
            let counter = (d.next..d.next + DIRECTIVE_REACH)
                .find_map(|at| Some((loop_counter(sources.line(file, at)?)?, at)));
            Found::Worksharing(d.text, counter)
        }
        _ => Found::Other,
    }))
}

/// The names of the variables the loop statement at line `from` declares (in its header or
/// body), from the outlined body's debug information. (gcc describes the shared variables
/// the body reaches, and the directive's private copies, as the body's variables too, with
/// their declaration lines above the directive.)
fn body_variables(
    naming: &tracer::Naming<'_>,
    tree: &ScheduleTree,
    body: NodeId,
    from: u32,
) -> BTreeSet<String> {
    let NodeKind::Func { entry, .. } = tree.nodes[body].kind else {
        return Default::default();
    };
    let bin = naming.loaded();
    let Some(f) = bin.function_at(entry) else {
        return Default::default();
    };
    let hi = f.address + f.size.max(1);
    bin.exe
        .locals_within(f.address, hi)
        .into_iter()
        .filter(|v| v.decl_line.is_none_or(|d| d >= from))
        .map(|v| v.name)
        .collect()
}

/// Longest loop body read for its assignments.
const MAX_BODY: u32 = 2000;

/// The variables a C loop statement at `line` assigns in its header and body (not elements
/// or members): `u += x` (with its operator), `t = a[i]`, `j++`, `for (j = 0; ...`.
fn assigned_in_body(sources: &mut SourceText, file: &str, line: u32) -> Vec<SharedWrite> {
    let last = last_line(sources, file, line);
    let mut out: Vec<SharedWrite> = Vec::new();
    for n in line..=last {
        let Some(text) = sources.line(file, n) else {
            continue;
        };
        let code = code_of(text);
        for (name, op) in assignments(&code) {
            if !out.iter().any(|w| w.name == name) {
                out.push(SharedWrite {
                    name,
                    line: symbols::Loc {
                        file: file.to_string(),
                        line: n,
                    }
                    .short(),
                    op,
                });
            }
        }
    }
    out
}

/// The last line of the C loop statement at `line`: of its block body, or of the statements
/// down to the first that ends with `;`.
fn last_line(sources: &mut SourceText, file: &str, line: u32) -> u32 {
    let mut last = line;
    let mut at = line;
    while let Some(text) = sources.line(file, at) {
        let code = code_of(text);
        if code.contains('{') {
            return body_end(sources, file, at).unwrap_or(at);
        }
        last = at;
        if code.trim_end().ends_with(';') || at >= line + MAX_BODY {
            break;
        }
        at += 1;
    }
    last
}

/// Lines above a worksharing loop searched for the variable that holds the thread number
/// (`int tid = omp_get_thread_num();` opening the parallel region around an `omp for`).
const THREAD_NUMBER_REACH: u32 = 40;

/// Longest source file read for the allocations of the rows a thread owns.
const MAX_FILE: u32 = 100_000;

/// The arrays the C loop statement at `line` indexes by the thread number
/// (`partial[tid][k] += x`, `tid = omp_get_thread_num()`): each thread has a row of its own,
/// which is what its iterations pass values through, never another thread's. With the file's
/// lines that allocate their rows (`partial[i] = calloc(...)`), as heap blocks are named
/// (`file.c:12`).
fn thread_rows(sources: &mut SourceText, file: &str, line: u32) -> (Vec<String>, Vec<String>) {
    let last = last_line(sources, file, line);
    let mut numbers: Vec<String> = vec!["omp_get_thread_num()".to_string()];
    for n in line.saturating_sub(THREAD_NUMBER_REACH).max(1)..=last {
        let Some(code) = sources.line(file, n).map(code_of) else {
            continue;
        };
        let Some(at) = code.find("omp_get_thread_num") else {
            continue;
        };
        let Some(lhs) = code[..at].trim_end().strip_suffix('=') else {
            continue;
        };
        if let Some(v) = last_identifier(lhs).filter(|_| !lhs.ends_with(['=', '!', '<', '>'])) {
            numbers.push(v);
        }
    }
    let mut rows: Vec<String> = Vec::new();
    for n in line..=last {
        let Some(code) = sources.line(file, n).map(code_of) else {
            continue;
        };
        let squeezed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        for v in &numbers {
            let subscript = format!("[{v}]");
            let mut from = 0;
            while let Some(k) = squeezed[from..].find(&subscript) {
                if let Some(a) = last_identifier(&squeezed[..from + k]) {
                    if !rows.contains(&a) {
                        rows.push(a);
                    }
                }
                from += k + subscript.len();
            }
        }
    }
    let mut sites = Vec::new();
    if !rows.is_empty() {
        for n in 1..MAX_FILE {
            let Some(code) = sources.line(file, n).map(code_of) else {
                break;
            };
            let allocates = ["malloc(", "calloc(", "realloc(", "aligned_alloc(", "new "]
                .iter()
                .any(|f| code.contains(f));
            let Some((lhs, _)) = code.split_once('=').filter(|_| allocates) else {
                continue;
            };
            // `partial[i][j] = calloc(...)`: the array before the first subscript;
            // `float **p = malloc(...)`: the variable declared.
            let root = match lhs.split_once('[') {
                Some((before, _)) => last_identifier(before),
                None => last_identifier(lhs),
            };
            if root.is_some_and(|r| rows.contains(&r)) {
                sites.push(
                    symbols::Loc {
                        file: file.to_string(),
                        line: n,
                    }
                    .short(),
                );
            }
        }
    }
    (rows, sites)
}

/// The identifier that ends `text` (spaces and a closing `)` of a cast aside).
fn last_identifier(text: &str) -> Option<String> {
    let t = text.trim_end();
    let start = t
        .rfind(|c: char| !c.is_alphanumeric() && c != '_')
        .map_or(0, |i| i + 1);
    let name = &t[start..];
    (!name.is_empty() && !name.starts_with(|c: char| c.is_ascii_digit())).then(|| name.to_string())
}

/// The plain variables a line of C code assigns, each with its reduction operator when the
/// assignment steps it (`+=`, `++`, `x = x * y`).
fn assignments(code: &str) -> Vec<(String, Option<&'static str>)> {
    const KEYWORDS: [&str; 12] = [
        "for", "if", "while", "return", "sizeof", "else", "do", "switch", "case", "int", "double",
        "float",
    ];
    let b = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut k = 0;
    while k < b.len() {
        if !(b[k].is_ascii_alphabetic() || b[k] == b'_') || (k > 0 && ident(b[k - 1])) {
            k += 1;
            continue;
        }
        let start = k;
        while k < b.len() && ident(b[k]) {
            k += 1;
        }
        let name = &code[start..k];
        let before = code[..start].trim_end();
        let after = code[k..].trim_start();
        // A member, an element's index or a declaration (`double t = ...`: a type word
        // before the name) is not a plain assignment.
        let declared = before
            .rsplit(|c: char| !c.is_alphanumeric() && c != '_' && c != '*')
            .next()
            .is_some_and(|w| {
                let w = w.trim_matches('*');
                !w.is_empty()
                    && !KEYWORDS[..4].contains(&w)
                    && w.chars().all(|c| c.is_alphanumeric() || c == '_')
                    && before.ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '*')
            });
        if KEYWORDS.contains(&name) || before.ends_with('.') || before.ends_with("->") || declared {
            continue;
        }
        let op = if before.ends_with("++") || after.starts_with("++") {
            Some(Some("+"))
        } else if before.ends_with("--") || after.starts_with("--") {
            Some(Some("-"))
        } else if let Some(op) = ["+=", "-=", "*=", "&=", "|=", "^="]
            .iter()
            .find(|op| after.starts_with(**op))
        {
            Some(Some(&op[..1]))
        } else if after.starts_with("/=")
            || after.starts_with("%=")
            || after.starts_with("<<=")
            || after.starts_with(">>=")
        {
            Some(None)
        } else if after.starts_with('=') && !after.starts_with("==") {
            let rhs = after[1..].split(';').next().unwrap_or("");
            let own = rhs
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|w| w == name);
            let op = ["+", "*", "-"].into_iter().find(|o| rhs.contains(o));
            Some(if own { op.or(Some("+")) } else { None })
        } else {
            None
        };
        if let Some(op) = op {
            out.push((name.to_string(), op));
        }
    }
    out
}

/// The variables a directive's data-sharing clauses name, lowercase (Fortran's are any case):
/// `private(j, k)`, `reduction(+: s)`, `lastprivate(x)`, `linear(p:1)`.
pub(crate) fn clause_variables(directive: &str) -> BTreeSet<String> {
    variables_of(
        directive,
        &[
            "private",
            "firstprivate",
            "lastprivate",
            "reduction",
            "linear",
        ],
    )
}

/// The variables the directive's clauses among `clauses` name, lowercase.
fn variables_of(directive: &str, clauses: &[&str]) -> BTreeSet<String> {
    let lower = directive.to_ascii_lowercase();
    let mut out = BTreeSet::new();
    let mut rest = lower.as_str();
    while let Some(open) = rest.find('(') {
        // `private (i, thid)` (b+tree): the clause's word may stand apart from its list.
        let head = rest[..open].trim_end();
        let word_start = head
            .rfind(|c: char| !c.is_alphanumeric() && c != '_')
            .map_or(0, |i| i + 1);
        let word = &head[word_start..];
        let close = rest[open..].find(')').map_or(rest.len(), |c| open + c);
        let inside = &rest[open + 1..close];
        if clauses.contains(&word) {
            // `reduction(+: s)` and `linear(p: 1)`: the list is on one side of the colon.
            let list = match (word, inside.split_once(':')) {
                ("reduction", Some((_, vars))) => vars,
                ("linear", Some((vars, _))) => vars,
                _ => inside,
            };
            for v in list.split(',') {
                let v = v.trim();
                let v = v.split('[').next().unwrap_or(v).trim();
                if !v.is_empty() {
                    out.insert(v.to_string());
                }
            }
        }
        rest = &rest[(close + 1).min(rest.len())..];
    }
    out
}

/// The counter a loop statement assigns: `i` of `for (int i = 0; ...` (as the scopes read
/// it) or of Fortran's `do i = 1, n`.
fn loop_counter(text: &str) -> Option<String> {
    let t = text.trim_start();
    if let Some(c) = crate::scopes::loop_counter(t).filter(|_| t.starts_with("for")) {
        return Some(c.to_string());
    }
    let rest = t
        .get(..3)
        .filter(|h| h[..2].eq_ignore_ascii_case("do") && h.ends_with(' '))?;
    let name = t[rest.len()..].split('=').next()?.trim();
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_directive_and_its_clauses() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("k.c");
        std::fs::write(
            &c,
            "int main(void) {\n  #pragma omp parallel for \\\n     private(j) reduction(+:s)\n  for (i = 0; i < n; i++)\n    s += a[i];\n#pragma omp parallel\n  for (;;) {}\n}\n",
        )
        .unwrap();
        let f = dir.path().join("k.f90");
        std::fs::write(&f, "!$OMP PARALLEL DO PRIVATE(j)\ndo i = 1, n\n").unwrap();
        let mut s = SourceText::default();
        let file = c.to_str().unwrap();
        match directive_above(&mut s, file, 4) {
            Some(Some(Found::Worksharing(d, c))) => {
                assert_eq!(d, "#pragma omp parallel for private(j) reduction(+:s)");
                assert_eq!(c, Some(("i".to_string(), 4)));
            }
            _ => panic!("no directive"),
        }
        assert!(matches!(
            directive_above(&mut s, file, 7),
            Some(Some(Found::Other))
        ));
        assert!(matches!(directive_above(&mut s, file, 1), Some(None)));
        match directive_above(&mut s, f.to_str().unwrap(), 2) {
            Some(Some(Found::Worksharing(d, c))) => {
                assert_eq!(d, "!$omp PARALLEL DO PRIVATE(j)");
                assert_eq!(c, Some(("i".to_string(), 2)));
            }
            _ => panic!("no Fortran directive"),
        }
        let got = assignments("u += a[i] * b[i]; t = a[i] + 1.0; double w = 2; c[i] = t; p->x = 1; k++; for (j = 0; j < n; j++) s = s * 2;");
        let want: Vec<(String, Option<&str>)> = vec![
            ("u".into(), Some("+")),
            ("t".into(), None),
            ("k".into(), Some("+")),
            ("j".into(), None),
            ("j".into(), Some("+")),
            ("s".into(), Some("*")),
        ];
        assert_eq!(got, want);
        assert!(is_outlined("main._omp_fn.3"));
        let v = clause_variables(
            "#pragma omp parallel for private(j, k) reduction(+: s) lastprivate(x) schedule(static, 4)",
        );
        let want: std::collections::BTreeSet<String> =
            ["j", "k", "s", "x"].iter().map(|s| s.to_string()).collect();
        assert_eq!(v, want);
        let v = clause_variables("#pragma omp parallel for private (i, thid)");
        assert!(v.contains("i") && v.contains("thid"), "{v:?}");
        let f = clause_variables("!$omp PARALLEL DO PRIVATE(J) REDUCTION(+:Total)");
        assert!(f.contains("j") && f.contains("total"), "{f:?}");
        assert!(is_outlined(".omp_outlined._debug__"));
        assert!(!is_outlined("main"));
    }

    #[test]
    fn finds_the_rows_each_thread_owns() {
        let dir = tempfile::tempdir().unwrap();
        let c = dir.path().join("k.c");
        std::fs::write(
            &c,
            "void f(int n, float *x) {\n  float **p = malloc(n * sizeof *p);\n  for (int t = 0; t < n; t++)\n    p[t] = calloc(8, sizeof **p);\n  int *q = malloc(64);\n  #pragma omp parallel\n  {\n    int tid = omp_get_thread_num();\n    #pragma omp for\n    for (int i = 0; i < 64; i++) {\n      p[tid][i % 8] += x[i];\n      q[i % 8] += 1;\n    }\n  }\n}\n",
        )
        .unwrap();
        let mut s = SourceText::default();
        let (rows, sites) = thread_rows(&mut s, c.to_str().unwrap(), 10);
        assert_eq!(rows, vec!["p".to_string()]);
        assert_eq!(sites, vec!["k.c:2".to_string(), "k.c:4".to_string()]);
        let omp = OmpLoop {
            thread_rows: rows,
            thread_blocks: sites,
            ..OmpLoop::default()
        };
        assert!(omp.thread_row("the heap block allocated at k.c:4"));
        assert!(omp.thread_row("array the heap block allocated at k.c:4 (+8)"));
        assert!(!omp.thread_row("the heap block allocated at k.c:42"));
        assert!(!omp.thread_row("the heap block allocated at k.c:5"));
        assert!(omp.thread_row("array `p`"));
        assert!(!omp.thread_row("array `q`"));
    }
}
