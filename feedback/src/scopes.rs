//! Where source variables are declared relative to a region's loops. A variable declared
//! before a loop and assigned in its iterations is one variable for all of them in the source,
//! shared by threads that run the loop in parallel unless it is made private, whatever the
//! compiler keeps it in (a register is each thread's own; the variable is not). One declared
//! in the loop's body is one per iteration already.

use crate::input::{Loop, ReduceOp};
use std::collections::BTreeSet;
use symbols::SourceText;
use tracer::{NodeId, NodeKind, ScheduleTree};

/// The code of one region loop, to tell where a variable is declared: the link-time addresses
/// of the instructions that ran in it and of those of its function that ran outside it, both
/// sorted.
pub(crate) struct LoopCode {
    id: String,
    node: NodeId,
    /// Its source line: a variable declared there is the loop's own counter (`for (int i`),
    /// which OpenMP makes private to each thread.
    line: Option<u32>,
    /// The (possibly inlined) function the loop statement is in.
    function: Option<String>,
    /// That function is inlined into the one whose code the loop's is: its variables' scope
    /// is the inlined copy, which may hold nothing but the loop (PolyBench's kernels).
    inlined: bool,
    /// The source file of the loop statement.
    file: Option<String>,
    /// The file of the loop's own line, [`LoopCode::line`] (its statement's, where the code
    /// on it is inlined library code: Rust's `Range::next`).
    header_file: Option<String>,
    inside: Vec<u64>,
    outside: Vec<u64>,
}

impl LoopCode {
    /// The loop's id (`L3`).
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// The step per iteration of this loop of the variable `name`, stepped by the statement on
    /// `at` (`file.c:12`, in the loop's own file), read from the source
    /// ([`crate::linear::per_iteration`]): the step as C text and the `file.c:N` lines of the
    /// `for` loops between.
    pub(crate) fn linear_step(
        &self,
        sources: &mut SourceText,
        at: &str,
        name: &str,
    ) -> Option<(String, Vec<String>)> {
        let (file, line) = (self.file.as_deref()?, self.line?);
        let (short, n) = at.rsplit_once(':')?;
        if file.rsplit('/').next() != Some(short) {
            return None;
        }
        let found = crate::linear::per_iteration(sources, file, line, n.parse().ok()?, name)?;
        let lines = found.inner.iter().map(|n| format!("{short}:{n}")).collect();
        Some((found.step, lines))
    }

    /// The loop statement's id and source text (`for i in 0..n {`), when its file can be
    /// read.
    pub(crate) fn header(&self, sources: &mut SourceText) -> Option<(String, String)> {
        let file = self.header_file.as_deref().or(self.file.as_deref())?;
        let text = sources.line(file, self.line?)?;
        Some((self.id.clone(), text.trim().to_string()))
    }

    pub(crate) fn of_region(
        loop_nodes: &[NodeId],
        loops: &[Loop],
        tree: &ScheduleTree,
        naming: &tracer::Naming<'_>,
    ) -> Vec<LoopCode> {
        let structure = naming.structure();
        let bin = naming.loaded();
        loop_nodes
            .iter()
            .zip(loops)
            .filter_map(|(&n, l)| {
                let NodeKind::Loop { func, lp } = tree.nodes[n].kind else {
                    return None;
                };
                let cfg = &structure.funcs[func];
                let (mut inside, mut outside) = (Vec::new(), Vec::new());
                for node in 1..cfg.addrs.len() {
                    let link = bin.link(cfg.addrs[node]).0;
                    if cfg.forest.contains(lp, node) {
                        inside.push(link);
                    } else {
                        outside.push(link);
                    }
                }
                inside.sort_unstable();
                outside.sort_unstable();
                let at = naming.loop_location(func, lp);
                let line = at.as_ref().map(|loc| loc.line);
                // The function of the loop statement: that of its instructions on the loop's
                // line (the header instruction can lie in the caller's range of an inlined
                // function).
                let statement = line.and_then(|line| {
                    inside.iter().find_map(|&link| {
                        let frames = bin.exe.frames(link);
                        let inlined = frames.len() > 1;
                        let f = frames.into_iter().next()?;
                        let loc = f.location?;
                        (loc.line == line).then_some((f.function, loc.file, inlined))
                    })
                });
                let (function, file, inlined) = match statement {
                    Some((function, file, inlined)) => (function, Some(file), inlined),
                    // No instruction on the loop's line: the function its code mostly runs
                    // in (particlefilter's loop at line 401, whose header gcc attributes to
                    // the `randn` inlined into it, is `main`'s).
                    None => (mostly_in(bin.exe, &inside), None, false),
                };
                Some(LoopCode {
                    id: l.id.clone(),
                    node: n,
                    line,
                    function,
                    inlined,
                    file,
                    header_file: at.map(|loc| loc.file),
                    inside,
                    outside,
                })
            })
            .collect()
    }

    /// The loop's id, and its statement's file and line where known.
    pub(crate) fn statement(&self) -> (&str, Option<(&str, u32)>) {
        let at = match (&self.file, self.line) {
            (Some(file), Some(line)) => Some((file.as_str(), line)),
            _ => None,
        };
        (&self.id, at)
    }

    /// The ids of the loops around `writer` (a context) that assign `var` while it is declared
    /// outside them: a variable of the loop's own function, declared on an earlier line than
    /// the loop statement's (a declaration on the loop's own line is its counter, `for (int
    /// i`, which OpenMP privatizes), in a scope that holds the loop's code. A scope holding
    /// none of the loop's code is a callee's, whose variables each call has afresh. "Holds
    /// the loop's code" is "most of it", since gcc's scopes take a few instructions of a
    /// neighbouring loop it shares code with, or hoisted out of the loop, and miss a few of
    /// their own.
    pub(crate) fn assigning(
        all: &[LoopCode],
        tree: &ScheduleTree,
        writer: NodeId,
        var: &symbols::Variable,
    ) -> Vec<String> {
        all.iter()
            .filter(|l| tree.is_within(writer, l.node) && l.declared_outside(var))
            .map(|l| l.id.clone())
            .collect()
    }

    /// Whether `var` is declared outside this loop, in a scope around it (see
    /// [`LoopCode::assigning`]).
    fn declared_outside(&self, var: &symbols::Variable) -> bool {
        let held = |addrs: &[u64]| held(&var.scope, addrs);
        // The loop's own function's variable, not an inlined callee's (one per call).
        let same_function = match (&var.function, &self.function) {
            (Some(v), Some(f)) => v == f,
            _ => true,
        };
        // Declared on an earlier line than the loop statement. Without lines, a scope that
        // reaches outside the loop (a function made of the loop alone has none outside).
        let before = match (var.decl_line, self.line) {
            (Some(decl), Some(line)) => decl < line,
            _ => held(&self.outside) > 0,
        };
        // A scope holding none of the function's code outside the loop is in its body (an
        // inlined callee's: particlefilter's `cosine`, `randn`'s, declared on an earlier line
        // of the file and placed in `main` by debug information). Not when the loop's own
        // function is the inlined one: its copy may be the loop alone (gemm's kernel inlined
        // into `main`, whose `int i, j, k;` went unprivatized).
        let within = !self.inlined && held(&self.outside) == 0 && !self.outside.is_empty();
        same_function && before && !within && 2 * held(&self.inside) > self.inside.len()
    }

    /// The ids of the loops in whose body `var` is declared: its scope holds some of the
    /// loop's code and none of its function's code outside the loop, or, declared on a later
    /// line than the loop statement in the loop's own function or in a function inlined into
    /// it, more of the loop's code than of the rest (gcc's scope of a block in the body takes
    /// a few instructions it hoisted out of the loop: hotspot3D's `int c, w, e, ...` at -O2).
    pub(crate) fn declaring(all: &[LoopCode], var: &symbols::Variable) -> Vec<String> {
        let held = |addrs: &[u64]| held(&var.scope, addrs);
        all.iter()
            .filter(|l| {
                let (inside, outside) = (held(&l.inside), held(&l.outside));
                let later = match (var.decl_line, l.line, &var.function, &l.function) {
                    (Some(decl), Some(line), Some(v), Some(f)) => decl > line && v == f,
                    _ => false,
                };
                // A local of a function inlined into the loop's body: each call has its own
                // (particlefilter's `cosine`, `randn`'s, at line 401).
                let callee = matches!((&var.function, &l.function), (Some(v), Some(f)) if v != f);
                inside > 0 && (outside == 0 || ((later || callee) && inside > outside))
            })
            .map(|l| l.id.clone())
            .collect()
    }
}

/// The function (outermost frame, out of line) most of the instructions at `pcs` are in.
fn mostly_in(exe: &symbols::ElfFile, pcs: &[u64]) -> Option<String> {
    let mut count: std::collections::BTreeMap<String, usize> = Default::default();
    for &pc in pcs {
        if let Some(f) = exe.frames(pc).into_iter().last().and_then(|f| f.function) {
            *count.entry(f).or_default() += 1;
        }
    }
    count.into_iter().max_by_key(|(_, n)| *n).map(|(f, _)| f)
}

/// How many of the sorted addresses `addrs` the ranges of `scope` hold.
fn held(scope: &[(u64, u64)], addrs: &[u64]) -> usize {
    scope
        .iter()
        .map(|&(b, e)| addrs.partition_point(|&a| a < e) - addrs.partition_point(|&a| a < b))
        .sum()
}

/// A variable declared outside a loop and assigned on one of the loop's source lines.
pub(crate) struct SourceAssignment {
    pub(crate) name: String,
    pub(crate) loop_id: String,
    /// `file.c:12`.
    pub(crate) line: String,
    /// The line is a `for` statement above the loop's own whose counter this is: the loop's
    /// code holds that enclosing loop's too (gcc merged them at -O3), and the loop is named by
    /// an inner loop's line. (An innermost loop named by a line of its body is its nearest `for`
    /// above.)
    pub(crate) encloses: bool,
    /// The assignment reads the variable's own value (`memcnt += 4`, `k++`, `x = x * 2`).
    pub(crate) steps: bool,
    /// The assignment combines the variable's value with data by this operator (`s += a[i]`).
    pub(crate) accumulates: Option<ReduceOp>,
    /// The literal the assignment stores (`stop = true;` gives `true`), when it stores one.
    pub(crate) constant: Option<String>,
    /// The line is outside the source span of the loop's own `for` statement (from it to its
    /// body's closing brace): code gcc placed in the loop with a line of before it (bfs's
    /// `stop=false;` on the jump back to the header of `for (tid ...)`).
    pub(crate) outside: bool,
    /// Some line of the loop's own source span (or of its code, where the span is not known)
    /// reads the variable other than by storing a constant into it (`if (!found && ...)`,
    /// `x = found + 1`): the loop does not only raise a flag. The first such line
    /// (`file.c:12`).
    pub(crate) read_in_loop: Option<String>,
}

/// The variables each loop of `all` assigns on its source lines (the lines of the
/// instructions that ran in it, but the loop statement's own, whose assignments are its
/// counter's) while they are declared outside it. Reads the program's source files: the
/// compiler may keep such a variable where debug information does not say (a vectorized
/// loop's lanes), so the instructions alone cannot tell. A file that cannot be read tells
/// nothing.
pub(crate) fn assigned_in_source(
    exe: &symbols::ElfFile,
    all: &[LoopCode],
    sources: &mut SourceText,
) -> Vec<SourceAssignment> {
    let mut out = Vec::new();
    for l in all {
        let mut lines: BTreeSet<(String, u32)> = l
            .inside
            .iter()
            .filter_map(|&pc| exe.location(pc))
            .filter(|loc| loc.line > 0 && Some(loc.line) != l.line)
            .map(|loc| (loc.file, loc.line))
            .collect();
        lines.extend(unrolled_loop_headers(exe, l, sources));
        // Every line of the body in the source: gcc -O2 leaves some assignments without an
        // instruction of their own line (heartwall's `temp = a[k]` folded into the `subsd`
        // of a later line), yet the variable is still written by each iteration.
        let mut span = None;
        if let (Some(file), Some(line)) = (&l.file, l.line) {
            if let Some(close) = body_end(sources, file, line) {
                lines.extend((line + 1..=close).map(|n| (file.clone(), n)));
                if sources.line(file, line).and_then(loop_counter).is_some() {
                    span = Some((file.clone(), line, close));
                }
            }
        }
        let mut seen = BTreeSet::new();
        let (Some(&lo), Some(&hi)) = (l.inside.first(), l.inside.last()) else {
            continue;
        };
        // The loop's own counter is private to each thread under `omp parallel for` already.
        let counter = match (&l.file, l.line) {
            (Some(file), Some(line)) => sources.line(file, line).and_then(loop_counter),
            _ => None,
        }
        .map(str::to_string);
        // The line of the loop's own `for`: its own line, or, when gcc names an innermost loop
        // by a line of its body (the last statement, which its latch shares at -O2), the
        // nearest `for` above that among its lines (with loops inside, that `for` may be
        // theirs). Only counters of loops above that one tell a merge.
        let innermost = !all.iter().any(|m| {
            m.id != l.id
                && !m.inside.is_empty()
                && m.inside.iter().all(|pc| l.inside.binary_search(pc).is_ok())
        });
        let own_for = match (&l.file, l.line) {
            (Some(file), Some(own)) if counter.is_none() && innermost => lines
                .iter()
                .filter(|(f, n)| f == file && *n < own)
                .map(|(_, n)| *n)
                .filter(|&n| sources.line(file, n).and_then(loop_counter).is_some())
                .max()
                .or(Some(own)),
            (_, own) => own,
        };
        for var in exe.locals_within(lo, hi + 1) {
            if !l.declared_outside(&var)
                || counter.as_deref() == Some(var.name.as_str())
                || !seen.insert(var.name.clone())
            {
                continue;
            }
            let in_span = |file: &String, line: u32| {
                span.as_ref()
                    .is_none_or(|(f, lo, hi)| f == file && *lo <= line && line <= *hi)
            };
            // The `for` statement's own line too: `i < n && !found` reads it.
            let own = l.file.clone().zip(l.line);
            let read_in_loop = own
                .iter()
                .chain(lines.iter())
                .find(|(file, line)| {
                    var.decl_line.is_none_or(|d| *line > d)
                        && in_span(file, *line)
                        && sources
                            .line(file, *line)
                            .is_some_and(|t| read_besides_constants(t, &var.name))
                })
                .map(|(file, line)| {
                    symbols::Loc {
                        file: file.clone(),
                        line: *line,
                    }
                    .short()
                });
            for (file, line) in &lines {
                // A line before the declaration names another variable of that name (gcc
                // shares code between nests, with the lines of either).
                if var.decl_line.is_some_and(|d| *line <= d) {
                    continue;
                }
                let text = sources.line(file, *line).map(str::to_string);
                // `float tmp_lat = atof(p);` declares another variable of that name, which
                // shadows it (Rodinia nn's body): no assignment to this one.
                if text.as_deref().is_some_and(|t| declares(t, &var.name)) {
                    continue;
                }
                if let Some(kind) = text.as_deref().and_then(|t| assignment(t, &var.name)) {
                    let encloses = l.file.as_ref() == Some(file)
                        && own_for.is_some_and(|own| *line < own)
                        && text.as_deref().and_then(loop_counter) == Some(var.name.as_str());
                    let short = symbols::Loc {
                        file: file.clone(),
                        line: *line,
                    }
                    .short();
                    out.push(SourceAssignment {
                        name: var.name.clone(),
                        loop_id: l.id.clone(),
                        line: short,
                        encloses,
                        steps: kind == Assignment::Steps,
                        accumulates: match kind {
                            Assignment::Accumulates(op) => Some(op),
                            _ => None,
                        },
                        constant: text.as_deref().and_then(|t| stored_constant(t, &var.name)),
                        outside: span
                            .as_ref()
                            .is_some_and(|(f, lo, hi)| f == file && (*line < *lo || *line > *hi)),
                        read_in_loop: read_in_loop.clone(),
                    });
                }
            }
        }
    }
    out
}

/// Longest source span of one loop searched for nested loop statements.
const MAX_SPAN: u32 = 2000;

/// The `for` statements nested in loop `l` in the source, by their lines: those between its
/// own statement and the last line of its own function's code in it. A nested loop the
/// compiler unrolled completely (a short inner loop at -O3) leaves no instruction on its line,
/// but its counter is still a variable the source loop assigns.
fn unrolled_loop_headers(
    exe: &symbols::ElfFile,
    l: &LoopCode,
    sources: &mut SourceText,
) -> Vec<(String, u32)> {
    let (Some(file), Some(line)) = (&l.file, l.line) else {
        return Vec::new();
    };
    // Lines of inlined callees (possibly further down the same file) do not count.
    let last = l
        .inside
        .iter()
        .filter_map(|&pc| {
            let f = exe.frames(pc).into_iter().next()?;
            let loc = f.location?;
            (f.function == l.function && &loc.file == file).then_some(loc.line)
        })
        .max();
    let Some(last) = last else {
        return Vec::new();
    };
    (line + 1..=last.min(line + MAX_SPAN))
        .filter(|&n| sources.line(file, n).and_then(loop_counter).is_some())
        .map(|n| (file.clone(), n))
        .collect()
}

/// The last line of the body of the loop statement at `line` of `file`, when its body is a
/// `{ ... }` block: braces counted from the statement's line on, outside comments and
/// literals. `None`: no block within [`MAX_SPAN`] lines.
pub(crate) fn body_end(sources: &mut SourceText, file: &str, line: u32) -> Option<u32> {
    let (mut depth, mut parens) = (0usize, 0usize);
    let mut opened = false;
    let mut comment = false;
    for n in line..line.saturating_add(MAX_SPAN) {
        let text = sources.line(file, n)?;
        let b = text.as_bytes();
        let mut k = 0;
        let mut quote: Option<u8> = None;
        while k < b.len() {
            let c = b[k];
            let next = b.get(k + 1).copied();
            if comment {
                if c == b'*' && next == Some(b'/') {
                    comment = false;
                    k += 1;
                }
            } else if let Some(q) = quote {
                if c == b'\\' {
                    k += 1;
                } else if c == q {
                    quote = None;
                }
            } else {
                match (c, next) {
                    (b'/', Some(b'/')) => break,
                    (b'/', Some(b'*')) => {
                        comment = true;
                        k += 1;
                    }
                    (b'"' | b'\'', _) => quote = Some(c),
                    (b'{', _) => {
                        depth += 1;
                        opened = true;
                    }
                    (b'}', _) => {
                        depth = depth.checked_sub(1)?;
                        if opened && depth == 0 {
                            return Some(n);
                        }
                    }
                    (b'(', _) => parens += 1,
                    (b')', _) => parens = parens.saturating_sub(1),
                    // A statement ended before any block opened: the body is one statement.
                    (b';', _) if !opened && parens == 0 => return None,
                    _ => {}
                }
            }
            k += 1;
        }
    }
    None
}

/// The counter a `for` statement's line initialises: `i` in `for (i = 0; ...` or
/// `for (int i = 0; ...`.
pub(crate) fn loop_counter(text: &str) -> Option<&str> {
    let k = text.find("for")?;
    let rest = text[k + 3..].trim_start().strip_prefix('(')?;
    let init = rest.split(';').next()?;
    let (left, _) = init.split_once('=')?;
    let name = left.split_whitespace().last()?.trim_start_matches('*');
    let plain = !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_');
    plain.then_some(name)
}

/// How a source line assigns a variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Assignment {
    /// `x = ...` without `x` on the right: the value before does not matter.
    Sets,
    /// `x += 1`, `x++`, `--x`, `x = x * 2`: the new value is computed from the old one.
    Steps,
    /// `x += a[i]`, `x *= f(y)`: the old value combined with data by an associative
    /// operator (a reduction in the source's own words). Sets it as far as stepping goes.
    Accumulates(ReduceOp),
}

/// Whether the C source line `text` assigns the variable `name` itself: `name = ...`,
/// `name += ...` (any compound assignment), `name++`, `--name`; not `name == ...`, an element
/// `name[i] = ...` or a member `p->name = ...`.
#[cfg(test)]
fn assigns(text: &str, name: &str) -> bool {
    assignment(text, name).is_some()
}

/// Each place the code `code` names the variable `name` as a whole word and not as a
/// member (`p->name`, `s.name`): the code before it (trimmed at its end) and after it
/// (trimmed at its start).
fn uses<'a>(code: &'a str, name: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
    let bytes = code.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    code.match_indices(name).filter_map(move |(start, _)| {
        let end = start + name.len();
        let joined = start > 0 && ident(bytes[start - 1]);
        let word = !(joined || bytes.get(end).copied().is_some_and(ident));
        let before = code[..start].trim_end();
        let member = before.ends_with('.') || before.ends_with("->");
        (word && !member && !name.is_empty()).then(|| (before, code[end..].trim_start()))
    })
}

/// How the C source line `text` assigns the variable `name`, if it does (see [`assigns`]):
/// a line that both sets and steps it (`for (j = 0; ...; j++)`) sets it.
pub(crate) fn assignment(text: &str, name: &str) -> Option<Assignment> {
    let code = code_of(text);
    let mut found = None;
    for (before, after) in uses(&code, name) {
        let compound = ["+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="];
        let kind = if before.ends_with("++")
            || before.ends_with("--")
            || after.starts_with("++")
            || after.starts_with("--")
        {
            Assignment::Steps
        } else if let Some(op) = compound.iter().find(|op| after.starts_with(**op)) {
            // Stepped by what does not vary (`memcnt += sizeof(float)`): an induction
            // variable. Stepped by data (`sum += a[i]`, `d += fabs(x)`): an accumulation,
            // which its dependences show; counted as set, as before.
            let rhs = after[op.len()..].split(';').next().unwrap_or("");
            if reads_data(rhs) {
                match *op {
                    "+=" | "-=" => Assignment::Accumulates(ReduceOp::Add),
                    "*=" => Assignment::Accumulates(ReduceOp::Mul),
                    "&=" => Assignment::Accumulates(ReduceOp::And),
                    "|=" => Assignment::Accumulates(ReduceOp::Or),
                    "^=" => Assignment::Accumulates(ReduceOp::Xor),
                    _ => Assignment::Sets,
                }
            } else {
                Assignment::Steps
            }
        } else if after.starts_with('=') && !after.starts_with("==") {
            // The right-hand side, to the end of the statement.
            let rhs = after[1..].split(';').next().unwrap_or("");
            if mentions(rhs, name) {
                Assignment::Steps
            } else {
                Assignment::Sets
            }
        } else {
            continue;
        };
        if kind == Assignment::Sets {
            return Some(kind);
        }
        // An accumulation sets the variable afresh as far as stepping goes: it wins over a step.
        if !matches!(found, Some(Assignment::Accumulates(_))) {
            found = Some(kind);
        }
    }
    found
}

/// Whether the C source line `text` declares a variable `name` (`float tmp_lat = ...;`,
/// `int i, name;`): a type's word just before the name (two words in a row only happen in a
/// declaration) or a declaration list's comma after one.
fn declares(text: &str, name: &str) -> bool {
    const NOT_TYPES: [&str; 6] = ["return", "else", "case", "sizeof", "goto", "do"];
    let code = code_of(text);
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let starts_with_type = |code: &str| {
        let first = code
            .trim_start()
            .split(|c: char| !ident(c))
            .next()
            .unwrap_or("");
        !first.is_empty() && !NOT_TYPES.contains(&first) && {
            let rest = code.trim_start()[first.len()..].trim_start();
            rest.starts_with(ident) || rest.starts_with('*')
        }
    };
    let found = uses(&code, name).any(|(before, after)| {
        let before = before.trim_end_matches('*').trim_end();
        let word = before.rsplit(|c: char| !ident(c)).next().unwrap_or("");
        // The statement so far holds only words (and pointer stars): a type.
        let statement = before.rsplit([';', '{', '}', '(']).next().unwrap_or("");
        let typed = !word.is_empty()
            && before.ends_with(word)
            && statement
                .chars()
                .all(|c| ident(c) || c == '*' || c.is_whitespace())
            && !NOT_TYPES.contains(&word)
            && !word.starts_with(|c: char| c.is_ascii_digit());
        let listed = before.ends_with(',') && !before.contains('(') && starts_with_type(before);
        let ends = after.starts_with('=') && !after.starts_with("==")
            || after.starts_with(';')
            || after.starts_with(',')
            || after.starts_with('[');
        (typed || listed) && ends
    });
    found
}

/// The literal the C source line `text` stores into the variable `name` when that is the
/// line's only assignment to it: `stop = true;` gives `true`, `found = 1;` gives `1`;
/// `stop = false || x;`, `n = m;` or a line assigning it twice give `None`.
fn stored_constant(text: &str, name: &str) -> Option<String> {
    let code = code_of(text);
    let mut found: Option<String> = None;
    for (before, after) in uses(&code, name) {
        let Some(rhs) = after.strip_prefix('=').filter(|r| !r.starts_with('=')) else {
            let compound = ["+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="];
            if compound.iter().any(|op| after.starts_with(op))
                || after.starts_with("++")
                || after.starts_with("--")
                || before.ends_with("++")
                || before.ends_with("--")
            {
                return None; // another kind of assignment to it on the line
            }
            continue;
        };
        let (value, _) = rhs.split_once(';')?;
        let value = value.trim();
        if !is_literal(value) || found.is_some() {
            return None;
        }
        found = Some(value.to_string());
    }
    found
}

/// Whether the C source line `text` names the variable `name` other than as the target of
/// a constant store (`found = 1;`): `if (!found && a[i] == k) found = 1;` and `x = found;`
/// read it, `found = 1;` and `p->found` do not.
fn read_besides_constants(text: &str, name: &str) -> bool {
    let code = code_of(text);
    for (_, after) in uses(&code, name) {
        let constant = after
            .strip_prefix('=')
            .filter(|r| !r.starts_with('='))
            .and_then(|r| r.split_once(';'))
            .is_some_and(|(value, _)| is_literal(value.trim()));
        if !constant {
            return true;
        }
    }
    false
}

/// `true`, `FALSE`, `1`, `-2.5f`, `0x10`: a literal a flag may be set to.
fn is_literal(value: &str) -> bool {
    let digits = value.trim_start_matches('-');
    matches!(value, "true" | "false" | "TRUE" | "FALSE")
        || (digits.starts_with(|c: char| c.is_ascii_digit())
            && digits
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.'))
}

/// The index of the parenthesis closing the one `s` starts with (`None` when `s` does not
/// start with one, or it is not closed).
pub(crate) fn matching_paren(s: &str) -> Option<usize> {
    let mut depth = 0i32;
    for (k, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(k);
                }
            }
            _ if depth == 0 => return None,
            _ => {}
        }
    }
    None
}

/// The code of a source line, without its comments (`// ...`, `/* ... */`); a line inside a
/// block comment (`* ...`) has none.
pub(crate) fn code_of(text: &str) -> String {
    if text.trim_start().starts_with('*') {
        return String::new();
    }
    let mut out = String::new();
    let mut rest = text;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                return out;
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                match rest[b + 2..].find("*/") {
                    Some(e) => rest = &rest[b + 2 + e + 2..],
                    None => return out,
                }
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

/// Whether an expression reads data that may vary: an element (`a[i]`, `p->x`) or a call
/// other than `sizeof`.
pub(crate) fn reads_data(expr: &str) -> bool {
    if expr.contains('[') || expr.contains("->") {
        return true;
    }
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    expr.match_indices('(').any(|(k, _)| {
        let head = expr[..k].trim_end();
        let start = head.bytes().rposition(|c| !ident(c)).map_or(0, |p| p + 1);
        let word = &head[start..];
        !word.is_empty() && !word.starts_with(|c: char| c.is_ascii_digit()) && word != "sizeof"
    })
}

/// Whether `text` names the identifier `name`.
pub(crate) fn mentions(text: &str, name: &str) -> bool {
    let bytes = text.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    text.match_indices(name).any(|(k, _)| {
        let end = k + name.len();
        let glued_before = k > 0 && ident(bytes[k - 1]);
        let glued_after = bytes.get(end).copied().is_some_and(ident);
        !glued_before && !glued_after
    })
}

#[cfg(test)]
mod tests {
    use super::{assigns, body_end, loop_counter};

    #[test]
    fn loop_bodies_end_at_their_closing_brace() {
        let dir = std::env::temp_dir().join(format!("polyprof-body-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("k.c");
        std::fs::write(
            &file,
            "int f(int n) {\n  for (int i = 0;\n       i < n; i++) { /* { */\n    s = \"}\";\n    if (i) { t = 1; }\n  }\n  for (int j = 0; j < n; j++)\n    u = j;\n}\n",
        )
        .unwrap();
        let mut sources = symbols::SourceText::default();
        let f = file.to_str().unwrap();
        assert_eq!(body_end(&mut sources, f, 2), Some(6));
        assert_eq!(body_end(&mut sources, f, 7), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn declarations_of_a_name() {
        use super::declares;
        assert!(declares(
            "            float tmp_lat = atof(rec_iter);",
            "tmp_lat"
        ));
        assert!(declares("  int i, n;", "n"));
        assert!(declares("  double *p = a;", "p"));
        assert!(declares("  char buf[64];", "buf"));
        assert!(!declares("  tmp_lat = atof(rec_iter);", "tmp_lat"));
        assert!(!declares("  return x;", "x"));
        assert!(!declares("  s = a * x;", "x"));
        assert!(!declares("  f(a, x);", "x"));
        assert!(!declares("  if (x == 1) y = 2;", "x"));
    }

    #[test]
    fn loop_counters() {
        assert_eq!(loop_counter("  for (i = 0; i < _PB_NI; i++)"), Some("i"));
        assert_eq!(loop_counter("for (int j = i + 1; j < n; j++) {"), Some("j"));
        assert_eq!(loop_counter("for (long *p = a; p < e; p++)"), Some("p"));
        assert_eq!(loop_counter("for (;;) {"), None);
        assert_eq!(loop_counter("while (x == 1)"), None);
    }

    #[test]
    fn assignments_to_the_variable_itself() {
        assert!(assigns("        t = a[i] * 3.0 + 0.5;", "t"));
        assert!(assigns("for (j = 0; j < n; j++) {", "j"));
        assert!(assigns("s += x;", "s"));
        assert!(assigns("x <<= 2;", "x"));
        assert!(assigns("--k;", "k"));
        assert!(!assigns("b[i] = t * t;", "t"));
        assert!(!assigns("if (t == 0)", "t"));
        assert!(!assigns("t[i] = 0;", "t"));
        assert!(!assigns("p->t = 1;", "t"));
        assert!(!assigns("st = 1;", "t"));
        assert!(!assigns("total = 1;", "t"));
    }

    #[test]
    fn constants_stored() {
        use super::stored_constant;
        assert_eq!(
            stored_constant("stop=true;", "stop").as_deref(),
            Some("true")
        );
        assert_eq!(
            stored_constant("    found = 1; // seen", "found").as_deref(),
            Some("1")
        );
        assert_eq!(stored_constant("x = -2.5f;", "x").as_deref(), Some("-2.5f"));
        assert_eq!(stored_constant("stop = a[i] > 0;", "stop"), None);
        assert_eq!(stored_constant("n = m;", "n"), None);
        assert_eq!(stored_constant("if (stop == true) x = 1;", "stop"), None);
        assert_eq!(stored_constant("k = 0; k++;", "k"), None);
        assert_eq!(stored_constant("for (j = 0; j < n; j++)", "j"), None);
    }

    #[test]
    fn flags_read_besides_their_stores() {
        use super::read_besides_constants as reads;
        assert!(!reads("            found = 1; /* found */", "found"));
        assert!(!reads("if (a[i] == k) stop = true;", "stop"));
        assert!(!reads("p->found = x; found2 = found_at;", "found"));
        assert!(reads("if (!found && a[i] == k) found = 1;", "found"));
        assert!(reads("x = found + 1;", "found"));
        assert!(reads("found = i;", "found"));
        assert!(reads("if (found == 1)", "found"));
    }

    #[test]
    fn steps_read_the_old_value() {
        use super::{assignment, Assignment::*};
        use crate::input::ReduceOp;
        assert_eq!(
            assignment("memcnt += sizeof(float);", "memcnt"),
            Some(Steps)
        );
        assert_eq!(assignment("b[k++] = a[i];", "k"), Some(Steps));
        assert_eq!(assignment("x = x * 2 + 1;", "x"), Some(Steps));
        assert_eq!(assignment("x = xs * 2;", "x"), Some(Sets));
        assert_eq!(assignment("for (j = 0; j <= n; j++) {", "j"), Some(Sets));
        assert_eq!(assignment("y = 3;", "x"), None);
        assert_eq!(
            assignment("sum += a[i] * b[i];", "sum"),
            Some(Accumulates(ReduceOp::Add))
        );
        assert_eq!(
            assignment("d += fabs(x - y);", "d"),
            Some(Accumulates(ReduceOp::Add))
        );
        assert_eq!(assignment("q /= a[i];", "q"), Some(Sets));
        assert_eq!(
            assignment("// Compute IMGVF += (mu / lambda)", "IMGVF"),
            None
        );
        assert_eq!(assignment("   * IMGVF += 1", "IMGVF"), None);
        assert_eq!(assignment("k += 2; /* k++ */", "k"), Some(Steps));
    }
}
