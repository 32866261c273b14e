//! The program's own OpenMP loops among a region's loops: the worksharing loops of the
//! parallel bodies the compiler outlined (gcc's `main._omp_fn.0`, clang's `.omp_outlined.`),
//! which the runtime calls back and the engine traces as the program's code. Each gets the
//! directive its source writes and the frames whose stack variables its threads share, for
//! its verdict ([`crate::analyze`]).

use crate::input::{Loop, OmpLoop};
use std::collections::BTreeMap;
use symbols::SourceText;
use tracer::{NodeId, NodeKind, ScheduleTree};

/// Lines above a loop's own line searched for its directive: the pragma, its continuation
/// lines, and the `for` line when the loop is named by its body's first line.
const DIRECTIVE_REACH: u32 = 4;

/// Whether `name` is a parallel body the compiler outlined from an OpenMP construct.
pub(crate) fn is_outlined(name: &str) -> bool {
    name.contains("._omp_fn.") || name.contains("omp_outlined")
}

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
        let (directive, counter) = directive;
        out.insert(
            l.id.clone(),
            OmpLoop {
                directive,
                counter,
                body,
                shared_frames: frames_around(tree, naming, body_node),
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
    /// `#pragma omp parallel for ...`, continuation lines joined, and the counter of the
    /// loop statement below it.
    Worksharing(String, Option<String>),
    /// A directive that shares no loop (`#pragma omp parallel`, `single`).
    Other,
}

/// The OpenMP directive on or just above source line `line` of `file` (`None`: the file
/// cannot be read, or no directive is there).
fn directive_above(sources: &mut SourceText, file: &str, line: u32) -> Option<Option<Found>> {
    sources.line(file, line)?;
    for at in (line.saturating_sub(DIRECTIVE_REACH).max(1)..=line).rev() {
        let Some(text) = sources.line(file, at).map(str::to_string) else {
            continue;
        };
        let Some(rest) = omp_directive(&text) else {
            continue;
        };
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
            .map(str::to_ascii_lowercase)
            .collect();
        // The construct's own words come before its clauses (`parallel for simd`).
        let shares = words
            .iter()
            .filter(|w| !w.is_empty())
            .take(4)
            .any(|w| w == "for" || w == "do" || w == "loop");
        let prefix = if text.trim_start().starts_with('#') {
            "#pragma omp"
        } else {
            "!$omp"
        };
        return Some(Some(if shares {
            let counter =
                (next..next + DIRECTIVE_REACH).find_map(|at| loop_counter(sources.line(file, at)?));
            Found::Worksharing(format!("{prefix} {whole}"), counter)
        } else {
            Found::Other
        }));
    }
    Some(None)
}

/// The counter a loop statement assigns: `i` of `for (int i = 0; ...` or `do i = 1, n`.
fn loop_counter(text: &str) -> Option<String> {
    let t = text.trim_start();
    let head = t.get(..3)?;
    let init = if head.eq_ignore_ascii_case("for") {
        t[3..].trim_start().strip_prefix('(')?.split(';').next()?
    } else if head.get(..2)?.eq_ignore_ascii_case("do") && t[2..].starts_with(' ') {
        &t[2..]
    } else {
        return None;
    };
    let name = init.split('=').next()?.split_whitespace().last()?;
    let name = name.trim_start_matches('*');
    (!name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .then(|| name.to_string())
}

/// What follows `#pragma omp` (C, C++) or `!$omp` (Fortran, any case) on a line.
fn omp_directive(text: &str) -> Option<&str> {
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
                assert_eq!(c.as_deref(), Some("i"));
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
                assert_eq!(c.as_deref(), Some("i"));
            }
            _ => panic!("no Fortran directive"),
        }
        assert!(is_outlined("main._omp_fn.3"));
        assert!(is_outlined(".omp_outlined._debug__"));
        assert!(!is_outlined("main"));
    }
}
