//! Apply-and-run legality suite. polyprof profiles the small C kernels `tests/kernels/legal_*.c`
//! at -O0 and -O2; every suggestion it makes is applied to the C source (string rewriting of
//! the loop headers), the program is recompiled and run, and its output must equal the
//! original's byte for byte: a difference is advice that would burn a user.
//!
//! How a suggestion is applied:
//! - `parallelize`, `vectorize` on loop L: L's header is rewritten to run backwards; for
//!   `parallelize`, L also gets `#pragma omp parallel for` (then `schedule(static, 1)`) and the
//!   program, built with `-fopenmp`, runs [`OMP_RUNS`] times with two threads. When the
//!   region's interchange puts other loops around L than the source does (the suggestion was
//!   computed in the interchanged order), the interchange is applied first.
//! - `interchange`: the headers of its loops are permuted into the new order, when the nest
//!   (once the statements its text says to move first are moved to copies of their loop)
//!   between them is perfect at source level and no bound depends on another permuted loop.
//! - `tile`: the band is fully permutable, so its reversed order is checked as an interchange
//!   (not after a skew, which is not applied).
//! - A `parallelize` gets the pragma its text prints, as written (the clauses a user copies;
//!   with `lastprivate` it is not run reversed), when its `requires` privatize named scalars;
//!   a suggestion requiring another storage change first is counted as "needs storage
//!   change"; one with a floating-point `reduction` reassociates and is not checked; other
//!   kinds (skew, privatize, layouts, fusion, ...) are counted as unchecked.
//!
//! The kernels are written in a strict style: every `for` header on its own line, in the form
//! `for (int v = LO; v < HI; v++) {` (or `<=`; `for (v = LO; ...` for a counter declared
//! before, C89 style). A report loop is mapped to the innermost
//! header whose braces enclose its `location.line`; two loops of a region with different lines
//! on one header are ambiguous and left unchecked.
//!
//! The `apply_and_run_*` tests (one per kernel, both levels) do the above. The `hazard_*` tests
//! assert what polyprof must not suggest on the classic traps, the `legal_*` tests that the
//! advice that is legal keeps coming, and `precision_*` that no spurious storage change hides
//! legal advice from this suite. Kernels are profiled with `--region-threshold 1`, once per
//! level, shared by the tests. `cargo test -p tests --test legality -- --nocapture` shows the
//! coverage table of each kernel.

use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tests::{kernels_dir, polyprof_bin, run_with_timeout};

/// Optimisation levels every kernel is profiled and checked at (`-g` always).
const OPT_LEVELS: [&str; 2] = ["-O0", "-O2"];
/// Runs of each OpenMP build (half with the default schedule, half with `schedule(static, 1)`):
/// races show only sometimes.
const OMP_RUNS: usize = 10;
/// Time limit of one run of a kernel (native, original or transformed).
const RUN_LIMIT: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------------
// The source model: strict-style `for` headers and their brace spans.

#[derive(Clone, Copy, Debug, PartialEq)]
enum Cmp {
    Lt,
    Le,
}

#[derive(Clone, Debug)]
struct Header {
    /// 0-based line of the header.
    line: usize,
    /// 0-based line of its closing brace.
    close: usize,
    var: String,
    /// `for (int v = ...`: the header declares its counter (C89 style does not).
    declares: bool,
    lo: String,
    cmp: Cmp,
    hi: String,
}

impl Header {
    fn render(&self, indent: &str) -> String {
        let op = match self.cmp {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
        };
        format!(
            "{indent}for ({int}{v} = {lo}; {v} {op} {hi}; {v}++) {{",
            int = if self.declares { "int " } else { "" },
            v = self.var,
            lo = self.lo,
            hi = self.hi
        )
    }

    fn render_reversed(&self, indent: &str) -> String {
        let start = match self.cmp {
            Cmp::Lt => format!("({}) - 1", self.hi),
            Cmp::Le => self.hi.clone(),
        };
        format!(
            "{indent}for ({int}{v} = {start}; {v} >= ({lo}); {v}--) {{",
            int = if self.declares { "int " } else { "" },
            v = self.var,
            lo = self.lo
        )
    }

    /// Identifiers in the bounds.
    fn bound_identifiers(&self) -> Vec<String> {
        let mut out = Vec::new();
        for text in [&self.lo, &self.hi] {
            let mut cur = String::new();
            for c in text.chars().chain(std::iter::once(' ')) {
                if c.is_ascii_alphanumeric() || c == '_' {
                    cur.push(c);
                } else {
                    if cur.chars().next().is_some_and(|c| !c.is_ascii_digit()) {
                        out.push(cur.clone());
                    }
                    cur.clear();
                }
            }
        }
        out
    }
}

struct Source {
    /// The kernel's file name (`legal_x.c`).
    file: String,
    lines: Vec<String>,
    headers: Vec<Header>,
}

/// Net brace depth change of each line, ignoring strings, characters and comments.
fn brace_deltas(lines: &[String]) -> Vec<i32> {
    let mut in_block = false;
    lines
        .iter()
        .map(|l| {
            let b = l.as_bytes();
            let (mut d, mut i) = (0, 0);
            while i < b.len() {
                if in_block {
                    if b[i..].starts_with(b"*/") {
                        in_block = false;
                        i += 1;
                    }
                } else if b[i..].starts_with(b"/*") {
                    in_block = true;
                    i += 1;
                } else if b[i..].starts_with(b"//") {
                    break;
                } else if b[i] == b'"' || b[i] == b'\'' {
                    let q = b[i];
                    i += 1;
                    while i < b.len() && b[i] != q {
                        i += if b[i] == b'\\' { 2 } else { 1 };
                    }
                } else if b[i] == b'{' {
                    d += 1;
                } else if b[i] == b'}' {
                    d -= 1;
                }
                i += 1;
            }
            d
        })
        .collect()
}

fn parse_header(line: &str) -> Option<(String, bool, String, Cmp, String)> {
    let header = line.trim().strip_prefix("for (")?;
    let declares = header.starts_with("int ");
    let rest = header.strip_prefix("int ").unwrap_or(header);
    let mut parts = rest.splitn(3, "; ");
    let (init, cond, incr) = (parts.next()?, parts.next()?, parts.next()?);
    let (var, lo) = init.split_once(" = ")?;
    let (cmp, hi) = if let Some(h) = cond.strip_prefix(&format!("{var} <= ")) {
        (Cmp::Le, h)
    } else {
        (Cmp::Lt, cond.strip_prefix(&format!("{var} < "))?)
    };
    (incr == format!("{var}++) {{")).then(|| {
        (
            var.to_string(),
            declares,
            lo.to_string(),
            cmp,
            hi.to_string(),
        )
    })
}

impl Source {
    fn parse(path: &Path) -> Result<Source, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        let deltas = brace_deltas(&lines);
        let mut headers = Vec::new();
        for (n, l) in lines.iter().enumerate() {
            let t = l.trim_start();
            if !(t.starts_with("for ") || t.starts_with("for(")) {
                continue;
            }
            let what = format!("{}:{}: `{}`", path.display(), n + 1, l.trim());
            let (var, declares, lo, cmp, hi) = parse_header(l).ok_or_else(|| {
                format!("{what}: not a strict `for (int v = LO; v < HI; v++) {{` header")
            })?;
            if deltas[n] != 1 {
                return Err(format!("{what}: a header opens exactly one brace"));
            }
            let mut depth = 0;
            let close = (n..lines.len())
                .find(|&k| {
                    depth += deltas[k];
                    depth == 0
                })
                .ok_or_else(|| format!("{what}: no closing brace"))?;
            headers.push(Header {
                line: n,
                close,
                var,
                declares,
                lo,
                cmp,
                hi,
            });
        }
        Ok(Source {
            file: path.file_name().unwrap().to_string_lossy().into_owned(),
            lines,
            headers,
        })
    }

    /// The innermost header whose span holds 0-based line `line`.
    fn enclosing(&self, line: usize) -> Option<usize> {
        self.headers
            .iter()
            .enumerate()
            .filter(|(_, h)| h.line <= line && line <= h.close)
            .max_by_key(|(_, h)| h.line)
            .map(|(k, _)| k)
    }

    fn contains(&self, outer: usize, inner: usize) -> bool {
        let (o, i) = (&self.headers[outer], &self.headers[inner]);
        o.line < i.line && i.close < o.close
    }

    /// The header of the strict loop that encloses the first line holding `snippet`.
    fn header_enclosing(&self, snippet: &str) -> usize {
        let n = self
            .lines
            .iter()
            .position(|l| l.contains(snippet))
            .unwrap_or_else(|| panic!("no `{snippet}` in {}", self.file));
        self.enclosing(n)
            .unwrap_or_else(|| panic!("`{snippet}` is in no loop of {}", self.file))
    }

    fn header_line(&self, h: usize) -> usize {
        self.headers[h].line + 1
    }
}

/// A source being rewritten; `pos[h]` is the line where header `h` is now.
struct Edit<'a> {
    src: &'a Source,
    lines: Vec<String>,
    pos: Vec<usize>,
    /// Statement lines moved out of their loop by a distribution (now empty).
    moved: BTreeSet<usize>,
    /// Code appended to a line (the loops a distribution creates), kept when the line itself
    /// is rewritten; line numbers stay those of the source.
    suffix: Vec<String>,
}

impl<'a> Edit<'a> {
    fn new(src: &'a Source) -> Self {
        Edit {
            src,
            lines: src.lines.clone(),
            pos: src.headers.iter().map(|h| h.line).collect(),
            moved: BTreeSet::new(),
            suffix: vec![String::new(); src.lines.len()],
        }
    }

    /// Applies the distribution an interchange's text asks for first ("The nest is not
    /// perfect: first move k.c:12 to a copy of loop k.c:11 before it [and k.c:15 to one after
    /// it]."): the statements, each on its own line directly in that loop, go to copies of it
    /// placed just before its header and just after its closing brace.
    fn distribute(&mut self, text: &str) -> Result<(), String> {
        let Some((_, rest)) = text.split_once("The nest is not perfect: first move ") else {
            return Ok(());
        };
        let (first, rest) = rest
            .split_once(" to a copy of loop ")
            .ok_or("a distribution not understood")?;
        let (label, rest) = rest
            .split_once(' ')
            .ok_or("a distribution not understood")?;
        let (before, after) = if let Some(r) = rest.strip_prefix("before it and ") {
            (first, r.split_once(" to one after it").map_or("", |x| x.0))
        } else if rest.starts_with("after it") {
            ("", first)
        } else {
            (first, "")
        };
        let src = self.src;
        let line_of = |l: &str| -> Result<usize, String> {
            match l.rsplit_once(':') {
                Some((file, n)) if file == src.file => n
                    .parse::<usize>()
                    .map(|n| n - 1)
                    .map_err(|_| format!("no line in `{l}`")),
                _ => Err(format!("`{l}` is not in {}", src.file)),
            }
        };
        let x = src
            .enclosing(line_of(label)?)
            .ok_or_else(|| format!("no loop at {label}"))?;
        let header = &src.headers[x];
        let deltas = brace_deltas(&src.lines);
        for (lines, at) in [(before, header.line - 1), (after, header.close)] {
            if lines.is_empty() {
                continue;
            }
            let mut body = Vec::new();
            for l in lines.split(", ") {
                let n = line_of(l)?;
                if src.enclosing(n) != Some(x)
                    || src.headers.iter().any(|h| h.line == n)
                    || deltas[n] != 0
                {
                    return Err(format!(
                        "{l} is not a statement line directly in loop {label}"
                    ));
                }
                body.push(src.lines[n].trim().to_string());
                self.lines[n].clear();
                self.moved.insert(n);
            }
            self.suffix[at] += &format!(" {} {} }}", header.render(""), body.join(" "));
        }
        Ok(())
    }

    /// Permutes the headers of `order` (the new order, outermost first) into the places they
    /// hold now. They must lie on one perfect nest with bounds independent of each other.
    fn permute(&mut self, order: &[usize]) -> Result<(), String> {
        let src = self.src;
        let mut cur: Vec<usize> = order.to_vec();
        cur.sort_by_key(|&h| src.headers[h].line);
        if cur == order {
            return Err("the order is unchanged".into());
        }
        for w in cur.windows(2) {
            if !src.contains(w[0], w[1]) {
                return Err(format!(
                    "loops at lines {} and {} are not nested",
                    src.header_line(w[0]),
                    src.header_line(w[1])
                ));
            }
        }
        // Every header from the outermost to the innermost, each directly in the previous one
        // with nothing else around it.
        let (outer, inner) = (cur[0], *cur.last().unwrap());
        let mut chain = vec![outer];
        while *chain.last().unwrap() != inner {
            let h = &src.headers[*chain.last().unwrap()];
            // Lines a distribution emptied may lie between the two.
            let gap = |a: usize, b: usize| (a..b).all(|n| self.moved.contains(&n));
            let next = src
                .headers
                .iter()
                .position(|g| g.line > h.line && gap(h.line + 1, g.line))
                .filter(|&g| {
                    src.headers[g].close < h.close && gap(src.headers[g].close + 1, h.close)
                })
                .ok_or_else(|| {
                    format!(
                        "the nest at line {} is not perfect at source level",
                        h.line + 1
                    )
                })?;
            if src.lines[h.close].trim() != "}" {
                return Err(format!("line {} holds more than a brace", h.close + 1));
            }
            chain.push(next);
        }
        let vars: Vec<&str> = chain.iter().map(|&h| src.headers[h].var.as_str()).collect();
        for &h in &chain {
            if let Some(v) = src.headers[h]
                .bound_identifiers()
                .into_iter()
                .find(|v| vars.contains(&v.as_str()))
            {
                return Err(format!(
                    "the bounds of line {} depend on `{v}`",
                    src.header_line(h)
                ));
            }
        }
        let places: Vec<usize> = cur.iter().map(|&h| self.pos[h]).collect();
        for (&p, &h) in places.iter().zip(order) {
            let indent =
                src.lines[p][..src.lines[p].len() - src.lines[p].trim_start().len()].to_string();
            self.lines[p] = src.headers[h].render(&indent);
            self.pos[h] = p;
        }
        Ok(())
    }

    fn reverse(&mut self, h: usize) {
        let p = self.pos[h];
        let indent =
            self.lines[p][..self.lines[p].len() - self.lines[p].trim_start().len()].to_string();
        self.lines[p] = self.src.headers[h].render_reversed(&indent);
    }

    fn text_with_pragma(&self, h: usize, pragma: &str) -> String {
        let mut lines = self.with_suffixes();
        lines.insert(self.pos[h], pragma.to_string());
        lines.join("\n") + "\n"
    }

    fn text(&self) -> String {
        self.with_suffixes().join("\n") + "\n"
    }

    fn with_suffixes(&self) -> Vec<String> {
        self.lines
            .iter()
            .zip(&self.suffix)
            .map(|(l, s)| format!("{l}{s}"))
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Profiles: each kernel compiled and profiled once per optimisation level, shared by the tests.

struct Profile {
    kernel: String,
    opt: &'static str,
    source: Source,
    report: Value,
    /// The original program's stdout.
    baseline: String,
}

type Slot = Arc<OnceLock<Arc<Profile>>>;

fn profile(kernel: &str, opt: &'static str) -> Arc<Profile> {
    static CACHE: OnceLock<Mutex<HashMap<(String, &'static str), Slot>>> = OnceLock::new();
    let slot = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry((kernel.to_string(), opt))
        .or_default()
        .clone();
    slot.get_or_init(|| Arc::new(make_profile(kernel, opt)))
        .clone()
}

fn make_profile(kernel: &str, opt: &'static str) -> Profile {
    let source =
        Source::parse(&kernels_dir().join(format!("{kernel}.c"))).unwrap_or_else(|e| panic!("{e}"));
    let mut flags = vec!["-g"];
    flags.extend(opt.split_whitespace());
    let k = tests::compile(kernel, &flags);
    let base = run_program(&k.path, false);
    assert!(
        base.1.success(),
        "{kernel} {opt} failed natively: {:?}",
        base.1
    );
    let path = k.path.to_string_lossy().into_owned();
    let run = tests::polyprof(
        polyprof_bin!(),
        &["--region-threshold", "1", path.as_str()],
        b"",
    );
    assert!(
        run.output.status.success(),
        "polyprof failed on {kernel} {opt} ({}):\n{}",
        run.output.status,
        run.output.stderr
    );
    Profile {
        kernel: kernel.to_string(),
        opt,
        source,
        report: run.report(),
        baseline: base.0,
    }
}

fn run_program(path: &Path, omp: bool) -> (String, std::process::ExitStatus) {
    let mut cmd = Command::new(path);
    if omp {
        cmd.env("OMP_NUM_THREADS", "2");
    }
    let out = run_with_timeout(cmd, b"", RUN_LIMIT);
    (out.stdout, out.status)
}

fn regions(p: &Profile) -> &[Value] {
    p.report["regions"].as_array().map_or(&[], Vec::as_slice)
}

fn suggestions(reg: &Value) -> &[Value] {
    reg["suggestions"].as_array().map_or(&[], Vec::as_slice)
}

/// Ids of the region's loops named after source line `line`.
fn loops_on_line(reg: &Value, line: u64) -> Vec<&str> {
    reg["all_loops"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["location"]["line"].as_u64() == Some(line))
        .filter_map(|l| l["id"].as_str())
        .collect()
}

fn loop_ids(s: &Value) -> Vec<String> {
    s["loops"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A storage change other than a reduction is needed first.
fn requires(s: &Value) -> bool {
    s["requires"]
        .as_array()
        .is_some_and(|a| a.iter().any(|r| r["change"] != "reduction"))
}

fn requires_change(s: &Value, change: &str) -> bool {
    s["requires"]
        .as_array()
        .is_some_and(|a| a.iter().any(|r| r["change"] == change))
}

/// The OpenMP data-sharing clauses (` private(t) lastprivate(last)`) that make the storage
/// changes a `parallelize` suggestion requires, when each is the privatization of a named
/// scalar variable; `None` when one is another change (an expansion, a copy) or names no
/// variable of the source (a register without a name, an element of an array).
fn privatization_clauses(s: &Value) -> Option<String> {
    let mut wanted: Vec<(&str, String)> = Vec::new();
    for r in s["requires"].as_array().map_or(&[][..], Vec::as_slice) {
        let clause = match r["change"].as_str()? {
            "reduction" => continue,
            "privatize" => "private",
            "firstprivate" => "firstprivate",
            "lastprivate" => "lastprivate",
            // A variable stepped as written: the printed pragma's `linear(var: step)`.
            "linear" => "linear",
            _ => return None,
        };
        // `` `t` (register xmm0) `` or `` `t` (stack of main) ``.
        let storage = r["storage"].as_str()?;
        let name = storage.strip_prefix('`')?.split('`').next()?;
        if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
            return None;
        }
        wanted.push((clause, name.to_string()));
    }
    // `firstprivate` and `lastprivate` privatize already: a variable is in one clause only.
    let mut clauses = String::new();
    for (clause, name) in &wanted {
        let stronger =
            *clause == "private" && wanted.iter().any(|(c, n)| n == name && *c != "private");
        let text = format!(" {clause}({name})");
        if !stronger && !clauses.contains(&text) {
            clauses.push_str(&text);
        }
    }
    Some(clauses)
}

/// The pragma a suggestion's text prints in backquotes (`` `#pragma omp parallel for
/// private(j)` ``).
fn printed_pragma(text: &str) -> Option<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .find(|t| t.starts_with("#pragma omp parallel for"))
}

fn has_reduction(s: &Value) -> bool {
    s.get("reduction").is_some_and(|r| !r.is_null())
}

/// The OpenMP clauses that apply the suggestion's reductions to the source (empty without
/// any; [`apply`] inserts the printed pragma and asks only whether they can be checked), or
/// why they cannot be checked: the clause report.json gives (`reduction(+: y[0:16])`
/// for an array reached through a pointer), or, when it names storage without a source name
/// (`<register rax>`), the variable the reduction's source line updates with a compound
/// assignment (`t += ...`). Integers only: a floating-point reduction reassociates, so its
/// output may differ legitimately.
fn reduction_clauses(src: &Source, s: &Value) -> Result<String, String> {
    let Some(rs) = s["reduction"].as_array() else {
        return Ok(String::new());
    };
    let mut clauses = String::new();
    for r in rs {
        if r["reassociates"].as_bool() != Some(false) {
            return Err("a floating-point reduction (reassociates)".into());
        }
        if let Some(clause) = r["clause"].as_str().filter(|c| !c.contains('<')) {
            clauses.push(' ');
            clauses.push_str(clause);
            continue;
        }
        let op = r["op"].as_str().unwrap_or("?");
        let lines: Vec<usize> = r["lines"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|l| l.as_str()?.rsplit(':').next()?.parse().ok())
            .collect();
        let [line] = lines[..] else {
            return Err(format!("a reduction over lines {lines:?}"));
        };
        let text = src.lines.get(line - 1).map_or("", String::as_str);
        let var = ["+=", "-=", "*=", "&=", "|=", "^="].iter().find_map(|a| {
            let before = text[..text.find(a)?].trim_end();
            if before.ends_with(']') {
                return None;
            }
            let start = before
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |k| k + 1);
            Some(before[start..].to_string())
        });
        let Some(var) = var.filter(|v| !v.is_empty()) else {
            return Err(format!(
                "no scalar compound assignment on line {line}: {text}"
            ));
        };
        clauses.push_str(&format!(" reduction({op}: {var})"));
    }
    Ok(clauses)
}

/// The region's loops mapped to source headers: id -> header, or why not.
fn loop_map(p: &Profile, reg: &Value) -> HashMap<String, Result<usize, String>> {
    let mut lines: HashMap<String, Option<(String, u64)>> = HashMap::new();
    for key in ["all_loops", "loops"] {
        for l in reg[key].as_array().map_or(&[][..], Vec::as_slice) {
            let Some(id) = l["id"].as_str() else { continue };
            let loc = l["location"]["file"]
                .as_str()
                .zip(l["location"]["line"].as_u64())
                .map(|(f, n)| (f.to_string(), n));
            lines.entry(id.to_string()).or_insert(loc);
        }
    }
    let mut map: HashMap<String, Result<usize, String>> = lines
        .iter()
        .map(|(id, loc)| {
            let h = match loc {
                None => Err(format!("{id} has no source location")),
                Some((f, _))
                    if Path::new(f).file_name().and_then(|n| n.to_str())
                        != Some(p.source.file.as_str()) =>
                {
                    Err(format!("{id} is in {f}"))
                }
                Some((_, n)) => p
                    .source
                    .enclosing((*n as usize).saturating_sub(1))
                    .ok_or_else(|| format!("line {n} of {id} is in no `for`")),
            };
            (id.clone(), h)
        })
        .collect();
    // Two loops with different lines on one header: which is which is a guess.
    let snapshot: Vec<(String, Result<usize, String>)> =
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for (id, h) in &snapshot {
        let Ok(h) = h else { continue };
        let line = lines[id].as_ref().map(|l| l.1);
        if let Some((other, _)) = snapshot.iter().find(|(o, g)| {
            o != id && g.as_ref().ok() == Some(h) && lines[o].as_ref().map(|l| l.1) != line
        }) {
            map.insert(
                id.clone(),
                Err(format!(
                    "{id} and {other} both map to the loop at line {}",
                    p.source.header_line(*h)
                )),
            );
        }
    }
    map
}

/// The headers of a suggestion's loops, in its order.
fn headers_of(
    map: &HashMap<String, Result<usize, String>>,
    s: &Value,
) -> Result<Vec<usize>, String> {
    let ids = loop_ids(s);
    if ids.is_empty() {
        return Err("no loop named".into());
    }
    let mut out = Vec::new();
    for id in &ids {
        let h = map
            .get(id)
            .cloned()
            .unwrap_or_else(|| Err(format!("{id} is not a loop of the region")))?;
        if out.contains(&h) {
            return Err(format!("two of its loops map to one header ({ids:?})"));
        }
        out.push(h);
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Applying suggestions.

#[derive(Debug)]
enum Outcome {
    Passed(usize),
    Failed(Vec<String>),
    NeedsStorage,
    Unchecked(String),
}

struct Row {
    region: String,
    kind: String,
    lines: String,
    text: String,
    outcome: Outcome,
}

/// The outputs of the runs of one program variant, or why it did not build.
type Runs = Result<Vec<(String, std::process::ExitStatus)>, String>;

/// Builds and runs program variants of one profile, memoised by source text and flags.
struct Runner<'a> {
    p: &'a Profile,
    dir: tempfile::TempDir,
    done: HashMap<(String, bool), Runs>,
    /// Program variants built so far (each in its own directory).
    built: usize,
}

impl<'a> Runner<'a> {
    fn new(p: &'a Profile) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("polyprof-legal-{}-", p.kernel))
            .tempdir()
            .expect("creating a temporary directory");
        Runner {
            p,
            dir,
            done: HashMap::new(),
            built: 0,
        }
    }

    /// Compiles `text` and runs it: the outputs. An OpenMP build runs [`OMP_RUNS`] / 2 times,
    /// at the profile's level and at -O0 too, where variables the threads share live in
    /// memory and races on them show.
    fn outputs(&mut self, text: &str, omp: bool) -> Runs {
        let key = (text.to_string(), omp);
        if let Some(r) = self.done.get(&key) {
            return r.clone();
        }
        let mut levels = vec![self.p.opt];
        if omp && self.p.opt != "-O0" {
            levels.push("-O0");
        }
        let mut runs = Vec::new();
        for opt in levels {
            match self.build_and_run(text, omp, opt) {
                Ok(r) => runs.extend(r),
                Err(e) => {
                    runs.clear();
                    self.done.insert(key, Err(e.clone()));
                    return Err(e);
                }
            }
        }
        self.done.insert(key, Ok(runs.clone()));
        Ok(runs)
    }

    fn build_and_run(&mut self, text: &str, omp: bool, opt: &str) -> Runs {
        let n = self.built;
        self.built += 1;
        let sub: PathBuf = self.dir.path().join(format!("v{n}"));
        std::fs::create_dir_all(&sub).unwrap();
        let src = sub.join(&self.p.source.file);
        std::fs::write(&src, text).unwrap();
        let bin = sub.join("prog");
        let mut cc = Command::new("cc");
        cc.arg("-g").args(opt.split_whitespace());
        if omp {
            cc.arg("-fopenmp");
        }
        let out = cc
            .arg("-o")
            .arg(&bin)
            .arg(&src)
            .arg("-lm")
            .output()
            .expect("running cc");
        if out.status.success() {
            let runs = if omp { OMP_RUNS / 2 } else { 1 };
            Ok((0..runs).map(|_| run_program(&bin, omp)).collect())
        } else {
            Err(format!(
                "the transformed source does not compile ({opt}): {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .find(|l| l.contains("error"))
                    .unwrap_or("")
            ))
        }
    }

    /// Runs `text` and compares each run with the original: the differences, if any.
    fn differs(&mut self, text: &str, omp: bool, what: &str) -> Vec<String> {
        match self.outputs(text, omp) {
            Err(e) => vec![format!("{what}: {e}")],
            Ok(runs) => runs
                .iter()
                .enumerate()
                .filter_map(|(k, (out, status))| {
                    let run = if omp {
                        format!("{what}, run {} of {}", k + 1, runs.len())
                    } else {
                        what.to_string()
                    };
                    if !status.success() {
                        return Some(format!("{run}: exited with {status}"));
                    }
                    first_difference(&self.p.baseline, out).map(|d| format!("{run}: {d}"))
                })
                .collect(),
        }
    }
}

fn first_difference(expected: &str, got: &str) -> Option<String> {
    if expected == got {
        return None;
    }
    let (e, g): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), got.lines().collect());
    let n = e.iter().zip(&g).take_while(|(a, b)| a == b).count();
    Some(format!(
        "output line {} differs: expected `{}`, got `{}`",
        n + 1,
        e.get(n).unwrap_or(&"(end of output)"),
        g.get(n).unwrap_or(&"(end of output)")
    ))
}

/// The interchange of `reg` when `l` (a parallel or vectorized loop) has other loops around it
/// in the interchange's order than in the source: the suggestion holds in that order.
fn enclosing_interchange<'r>(
    reg: &'r Value,
    map: &HashMap<String, Result<usize, String>>,
    src: &Source,
    l: &str,
) -> Option<&'r Value> {
    let ic = suggestions(reg)
        .iter()
        .find(|s| s["kind"] == "interchange")?;
    let order = loop_ids(ic);
    let k = order.iter().position(|x| x == l)?;
    let mut by_source = order.clone();
    by_source.sort_by_key(|id| {
        map.get(id)
            .and_then(|h| h.as_ref().ok())
            .map_or(usize::MAX, |&h| src.headers[h].line)
    });
    let j = by_source.iter().position(|x| x == l)?;
    (order[..=k] != by_source[..=j]).then_some(ic)
}

fn apply(runner: &mut Runner, reg: &Value, s: &Value) -> Outcome {
    let p = runner.p;
    let src = &p.source;
    let kind = s["kind"].as_str().unwrap_or("");
    // Privatizations are made by the printed pragma's clauses; other storage changes are not
    // applied.
    if requires(s) && !(kind == "parallelize" && privatization_clauses(s).is_some()) {
        return Outcome::NeedsStorage;
    }
    if let Err(why) = reduction_clauses(src, s) {
        return Outcome::Unchecked(why);
    }
    if !matches!(kind, "parallelize" | "vectorize" | "interchange" | "tile") {
        return Outcome::Unchecked(format!("{kind} is not applied"));
    }
    let map = loop_map(p, reg);
    let hs = match headers_of(&map, s) {
        Ok(h) => h,
        Err(e) => return Outcome::Unchecked(e),
    };
    let mut edit = Edit::new(src);
    // (program text, OpenMP build, what was applied)
    let mut checks: Vec<(String, bool, String)> = Vec::new();
    match kind {
        "parallelize" | "vectorize" => {
            let h = hs[0];
            let l = &loop_ids(s)[0];
            let mut prefix = String::new();
            if let Some(ic) = enclosing_interchange(reg, &map, src, l) {
                if requires(ic) {
                    return Outcome::NeedsStorage;
                }
                let order = match headers_of(&map, ic) {
                    Ok(o) => o,
                    Err(e) => return Outcome::Unchecked(format!("its interchange: {e}")),
                };
                if let Err(e) = edit
                    .distribute(ic["text"].as_str().unwrap_or(""))
                    .and_then(|()| edit.permute(&order))
                {
                    return Outcome::Unchecked(format!(
                        "holds in the interchanged order, which is not applied: {e}"
                    ));
                }
                prefix = "interchanged, then ".into();
            }
            let line = src.header_line(h);
            if kind == "parallelize" {
                // The pragma exactly as the text prints it, as a user copies it (issue 36);
                // `clauses`, read from `requires`, only decided above that it is checkable.
                let text = s["text"].as_str().unwrap_or("");
                if text.contains("` plus a `") {
                    return Outcome::Unchecked(
                        "the printed pragma lacks a clause on storage debug information does not name"
                            .into(),
                    );
                }
                let Some(pragma) = printed_pragma(text) else {
                    return Outcome::Unchecked("the text prints no pragma".into());
                };
                for schedule in ["", " schedule(static, 1)"] {
                    let name = format!("{pragma}{schedule}");
                    checks.push((
                        edit.text_with_pragma(h, &name),
                        true,
                        format!("{prefix}`{name}` on line {line}"),
                    ));
                }
            }
            // With `lastprivate`, a reversed loop legitimately leaves another iteration's value;
            // with `linear`, the variable steps through its values in the other order.
            if !requires_change(s, "lastprivate") && !requires_change(s, "linear") {
                edit.reverse(h);
                checks.push((edit.text(), false, format!("{prefix}line {line} reversed")));
            }
        }
        "interchange" | "tile" => {
            let mut order = hs.clone();
            if kind == "tile" {
                if s["text"].as_str().unwrap_or("").contains("skew") {
                    return Outcome::Unchecked("a tile after skewing".into());
                }
                order.sort_by_key(|&h| src.headers[h].line);
                order.reverse();
            }
            if let Err(e) = edit
                .distribute(s["text"].as_str().unwrap_or(""))
                .and_then(|()| edit.permute(&order))
            {
                return Outcome::Unchecked(e);
            }
            let lines: Vec<String> = order
                .iter()
                .map(|&h| src.header_line(h).to_string())
                .collect();
            checks.push((
                edit.text(),
                false,
                format!("loops in the order {}", lines.join(", ")),
            ));
        }
        _ => unreachable!(),
    }
    let n = checks.len();
    let mut failures = Vec::new();
    for (text, omp, what) in checks {
        failures.extend(runner.differs(&text, omp, &what));
    }
    if failures.is_empty() {
        Outcome::Passed(n)
    } else {
        Outcome::Failed(failures)
    }
}

fn apply_all(p: &Profile) -> Vec<Row> {
    let mut runner = Runner::new(p);
    let mut rows = Vec::new();
    for reg in regions(p) {
        let map = loop_map(p, reg);
        for s in suggestions(reg) {
            let lines: Vec<String> = loop_ids(s)
                .iter()
                .map(|id| match map.get(id) {
                    Some(Ok(h)) => format!("{id}@{}", p.source.header_line(*h)),
                    _ => format!("{id}@?"),
                })
                .collect();
            rows.push(Row {
                region: reg["id"].as_str().unwrap_or("?").to_string(),
                kind: s["kind"].as_str().unwrap_or("?").to_string(),
                lines: lines.join(","),
                text: s["text"].as_str().unwrap_or("").to_string(),
                outcome: apply(&mut runner, reg, s),
            });
        }
    }
    rows
}

fn table(p: &Profile, rows: &[Row]) -> String {
    let count = |f: fn(&Outcome) -> bool| rows.iter().filter(|r| f(&r.outcome)).count();
    let passed = count(|o| matches!(o, Outcome::Passed(_)));
    let failed = count(|o| matches!(o, Outcome::Failed(_)));
    let storage = count(|o| matches!(o, Outcome::NeedsStorage));
    let unchecked = count(|o| matches!(o, Outcome::Unchecked(_)));
    let mut t = format!(
        "{} {}: {} suggestions: {} checked ({passed} passed, {failed} FAILED), {storage} need a storage change, {unchecked} unchecked\n",
        p.kernel,
        p.opt,
        rows.len(),
        passed + failed
    );
    for r in rows {
        let what = match &r.outcome {
            Outcome::Passed(n) => format!("passed ({n} variant(s))"),
            Outcome::Failed(f) => format!("FAILED: {}", f[0]),
            Outcome::NeedsStorage => "needs storage change".into(),
            Outcome::Unchecked(why) => format!("unchecked: {why}"),
        };
        let _ = writeln!(t, "  {:<3} {:<20} {:<18} {what}", r.region, r.kind, r.lines);
    }
    t
}

/// Profiles `kernel` at every level, applies every suggestion, prints the coverage tables and
/// fails listing each suggestion whose program's output changed.
fn apply_and_run(kernel: &str) {
    apply_and_run_at(kernel, &OPT_LEVELS);
}

/// AVX2 and FMA code (what `-march=native` gives on this machine), without contracting
/// multiply-adds so that every build of a variant computes the same numbers.
const AVX2: &str = "-O3 -march=haswell -ffp-contract=off";

fn apply_and_run_at(kernel: &str, levels: &[&'static str]) {
    let mut failures = String::new();
    let mut tables = String::new();
    for &opt in levels {
        let p = profile(kernel, opt);
        let rows = apply_all(&p);
        tables.push_str(&table(&p, &rows));
        for r in &rows {
            if let Outcome::Failed(f) = &r.outcome {
                let _ = writeln!(
                    failures,
                    "{kernel} {opt} {} {} [{}]: \"{}\"",
                    r.region, r.kind, r.lines, r.text
                );
                for x in f {
                    let _ = writeln!(failures, "    {x}");
                }
            }
        }
    }
    println!("{tables}");
    assert!(
        failures.is_empty(),
        "suggestions that change the output of {kernel}:\n{failures}\ncoverage:\n{tables}"
    );
}

macro_rules! apply_and_run_tests {
    ($($test:ident => $kernel:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                apply_and_run($kernel);
            }
        )*
    };
}

apply_and_run_tests! {
    apply_and_run_shift => "legal_shift",
    apply_and_run_doitgen => "legal_doitgen",
    apply_and_run_doitgen_ptr => "legal_doitgen_ptr",
    apply_and_run_inlined_kernel => "legal_inlined_kernel",
    apply_and_run_last => "legal_last",
    apply_and_run_sse => "legal_sse",
    apply_and_run_libcalls => "legal_libcalls",
    apply_and_run_reduction => "legal_reduction",
    apply_and_run_array_reduction => "legal_array_reduction",
    apply_and_run_covariance => "legal_covariance",
    apply_and_run_matmul => "legal_matmul",
    apply_and_run_jacobi2d => "legal_jacobi2d",
    apply_and_run_seidel1d => "legal_seidel1d",
    apply_and_run_init => "legal_init",
    apply_and_run_transpose => "legal_transpose",
    apply_and_run_stencil2d => "legal_stencil2d",
    apply_and_run_shared_scalar => "legal_shared_scalar",
    apply_and_run_symm => "legal_symm",
    apply_and_run_c89 => "legal_c89",
    apply_and_run_unrolled => "legal_unrolled",
    apply_and_run_imperfect => "legal_imperfect",
    apply_and_run_recur_cols => "legal_recur_cols",
    apply_and_run_atof => "legal_atof",
    apply_and_run_stale => "legal_stale",
    apply_and_run_counter => "legal_counter",
    apply_and_run_argmin => "legal_argmin",
}

/// trmm's init_array at -O3, where gcc merges the i loop with the j loops inside and the
/// merged loop is named after the inner loop's line: no advice may send a pragma there.
#[test]
fn apply_and_run_merged_o3() {
    apply_and_run_at("legal_merged", &["-O2", "-O3"]);
}

/// Nor does any other advice name the merged loop at -O3 (a distribution and a storage
/// mapping were suggested on it, under the inner loop's line): they are withheld, saying why.
#[test]
fn merged_loop_gets_no_advice_o3() {
    let p = profile("legal_merged", "-O3");
    let inner = u64::from(tests::line_of("legal_merged", "for (j = 0; j < i; j++)"));
    let mut withheld = false;
    for reg in regions(&p) {
        let merged = loops_on_line(reg, inner);
        for s in suggestions(reg) {
            let ids = loop_ids(s);
            assert!(
                !ids.iter().any(|id| merged.contains(&id.as_str())),
                "advice on the merged loop: {s:#}"
            );
        }
        withheld |= reg["why_not"]
            .as_str()
            .is_some_and(|w| w.contains("withheld: the compiler merged it"));
    }
    assert!(withheld, "{:#}", p.report);
}

/// deriche's column recurrences at -O2: gcc gives the i loop's latch the line of its last
/// statement. The loop is named by its `for` line all the same, assigning its own counter `i`
/// there is no sign of a merge, and its interchange (after expanding the recurrence's scalars)
/// is advised, not withheld.
#[test]
fn loop_latched_on_its_last_statement_is_named_by_its_for_o2() {
    let p = profile("legal_recur_cols", "-O2");
    let src = source("legal_recur_cols");
    let header = src.header_line(src.header_enclosing("xm1 = in[i][j];")) as u64;
    let last = u64::from(tests::line_of("legal_recur_cols", "ym1 = out[i][j];"));
    let mut advised = false;
    for reg in regions(&p) {
        let why = reg["why_not"].as_str().unwrap_or("");
        assert!(!why.contains("withheld: the compiler merged it"), "{why}");
        assert!(
            loops_on_line(reg, last).is_empty(),
            "a loop named by line {last}: {reg:#}"
        );
        let named = loops_on_line(reg, header);
        advised |= suggestions(reg).iter().any(|s| {
            s["kind"] == "interchange" && loop_ids(s).iter().any(|l| named.contains(&l.as_str()))
        });
    }
    assert!(
        advised,
        "no interchange of the loop at line {header}: {:#}",
        p.report
    );
}

/// trmm's kernel at -O3: the k loop's bound, run down to -1 in a 32-bit register, is a scalar
/// evolution (it was a statement carrying a dependence across i, and the i loop had no
/// advice): the i loop is advised parallel, with B read from a copy, as at -O2. (Applied by
/// hand with the copy and 4 OpenMP threads, the output is the same.)
#[test]
fn narrow_counter_is_a_scalar_evolution_o3() {
    apply_and_run_at("legal_trmm", &["-O2", "-O3"]);
    let p = profile("legal_trmm", "-O3");
    let outer = u64::from(tests::line_of("legal_trmm", "for (i = 0; i < m; i++)"));
    let advised = regions(&p).iter().any(|reg| {
        let at_outer = loops_on_line(reg, outer);
        suggestions(reg).iter().any(|s| {
            s["kind"] == "parallelize"
                && loop_ids(s).iter().any(|id| at_outer.contains(&id.as_str()))
        })
    });
    assert!(advised, "{:#}", p.report);
}

/// The same on AVX2 builds (vector accumulators in ymm registers, inner loops unrolled
/// away, `vzeroupper` after loops), where the CPU has AVX2.
macro_rules! apply_and_run_avx2_tests {
    ($($test:ident => $kernel:literal),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                if tests::has_avx2() {
                    apply_and_run_at($kernel, &[AVX2]);
                }
            }
        )*
    };
}

apply_and_run_avx2_tests! {
    apply_and_run_avx2_reduction => "legal_reduction",
    apply_and_run_avx2_covariance => "legal_covariance",
    apply_and_run_avx2_jacobi2d => "legal_jacobi2d",
    apply_and_run_avx2_stencil2d => "legal_stencil2d",
    apply_and_run_avx2_shared_scalar => "legal_shared_scalar",
    apply_and_run_avx2_c89 => "legal_c89",
    apply_and_run_avx2_unrolled => "legal_unrolled",
}

// ---------------------------------------------------------------------------------------------
// Expectations on what is (not) suggested.

/// Suggestions of `kinds` naming a loop that maps to one of the headers `on`, with their
/// profile, region and text, at every optimisation level.
fn suggested(kernel: &str, kinds: &[&str], on: &[usize]) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    for opt in OPT_LEVELS {
        let p = profile(kernel, opt);
        for reg in regions(&p) {
            for s in suggestions(reg) {
                // Any loop on one of the headers, ambiguous or not.
                let hit = loop_ids(s).iter().any(|id| {
                    reg_loop(reg, id).is_some_and(|(file, line)| {
                        Path::new(&file).file_name().and_then(|n| n.to_str())
                            == Some(p.source.file.as_str())
                            && p.source
                                .enclosing(line.saturating_sub(1))
                                .is_some_and(|h| on.contains(&h))
                    })
                });
                if hit && kinds.contains(&s["kind"].as_str().unwrap_or("")) {
                    out.push((opt, s.clone()));
                }
            }
        }
    }
    out
}

fn reg_loop(reg: &Value, id: &str) -> Option<(String, usize)> {
    ["all_loops", "loops"].iter().find_map(|k| {
        let l = reg[*k].as_array()?.iter().find(|l| l["id"] == id)?;
        let file = l["location"]["file"].as_str()?.to_string();
        Some((file, l["location"]["line"].as_u64()? as usize))
    })
}

fn describe(found: &[(&str, Value)]) -> String {
    found
        .iter()
        .map(|(opt, s)| {
            let extra: Vec<String> = s
                .as_object()
                .map(|o| {
                    o.iter()
                        .filter(|(k, _)| !matches!(k.as_str(), "kind" | "loops" | "text"))
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect()
                })
                .unwrap_or_default();
            format!(
                "  {opt} {} {}: \"{}\" {}\n",
                s["kind"].as_str().unwrap_or("?"),
                s["loops"],
                s["text"].as_str().unwrap_or(""),
                extra.join(" ")
            )
        })
        .collect()
}

fn source(kernel: &str) -> Source {
    Source::parse(&kernels_dir().join(format!("{kernel}.c"))).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn hazard_shift_loop_is_not_parallel() {
    let src = source("legal_shift");
    let shift = src.header_enclosing("a[i] = 0.5 * a[i + 1] + 1;");
    // Reading `a` from a copy made before the loop would make it legal.
    let found: Vec<_> = suggested("legal_shift", &["parallelize", "vectorize"], &[shift])
        .into_iter()
        .filter(|(_, s)| !requires_change(s, "copy_in"))
        .collect();
    assert!(
        found.is_empty(),
        "the in-place shift at line {} carries an anti dependence (legal only with `a` read from a copy, `requires` copy_in), yet:\n{}",
        src.header_line(shift),
        describe(&found)
    );
}

#[test]
fn hazard_doitgen_outer_loops_are_parallel_only_with_sum_private() {
    let src = source("legal_doitgen");
    let p = src.header_enclosing("sum[p] = 0.0;");
    let outer: Vec<usize> = (0..src.headers.len())
        .filter(|&h| src.contains(h, p))
        .collect();
    assert_eq!(outer.len(), 2, "the r and q loops");
    let found: Vec<_> = suggested("legal_doitgen", &["parallelize"], &outer)
        .into_iter()
        .filter(|(_, s)| !requires(s))
        .collect();
    assert!(
        found.is_empty(),
        "`sum` is shared by the iterations of the r and q loops (lines {} and {}): parallelizing them needs `requires` (privatize sum), yet:\n{}",
        src.header_line(outer[0]),
        src.header_line(outer[1]),
        describe(&found)
    );
}

/// PolyBench's doitgen: `sum` is a heap block the kernel reaches through a pointer parameter.
/// The printed pragma's `private(sum)` gave each thread an undefined pointer (every run
/// crashed): the advice is an array of the body's own in place of `sum`, and its pragma,
/// for after that, names no `sum`.
#[test]
fn hazard_pointer_is_not_privatized() {
    let src = source("legal_doitgen_ptr");
    let p = src.header_enclosing("sum[p] = 0.0;");
    let outer: Vec<usize> = (0..src.headers.len())
        .filter(|&h| src.contains(h, p) && h != p)
        .collect();
    let all = suggested("legal_doitgen_ptr", &["parallelize"], &outer);
    let bad: Vec<_> = all
        .iter()
        .filter(|(_, s)| {
            let text = s["text"].as_str().unwrap_or("");
            let pragma = text
                .split('`')
                .find(|t| t.starts_with("#pragma"))
                .unwrap_or("");
            let private_sum = pragma.contains("private(sum") || pragma.contains(", sum");
            private_sum || !requires_change(s, "local_array") || text.contains("(e.g. `#pragma")
        })
        .cloned()
        .collect();
    assert!(
        !all.is_empty() && bad.is_empty(),
        "`sum` is a pointer in the loops of line {}: privatizing it copies no array, yet:\n{}",
        src.header_line(outer[0]),
        describe(&bad)
    );
}

/// PolyBench's gemm at -O2: the kernel is inlined into main, and its inlined copy's scope is
/// the i loop and nothing else. Its `int i, j, k;` are declared outside that loop all the
/// same: the printed pragma privatizes `j` and `k` (it printed no clause, and two threads
/// shared the counters).
#[test]
fn hazard_counters_of_an_inlined_kernel_are_private() {
    let src = source("legal_inlined_kernel");
    let j = src.header_enclosing("C[i][j] *= beta;");
    let i = src
        .enclosing(src.headers[j].line.saturating_sub(1))
        .expect("the i loop");
    let all = suggested("legal_inlined_kernel", &["parallelize"], &[i]);
    let bad: Vec<_> = all
        .iter()
        .filter(|(_, s)| {
            let pragma = printed_pragma(s["text"].as_str().unwrap_or("")).unwrap_or("");
            let private = pragma
                .split_once("private(")
                .and_then(|(_, rest)| rest.split_once(')'))
                .map_or("", |(list, _)| list);
            let names: Vec<&str> = private.split(", ").collect();
            !(names.contains(&"j") && names.contains(&"k"))
        })
        .cloned()
        .collect();
    assert!(
        !all.is_empty() && bad.is_empty(),
        "every thread of the i loop (line {}) needs its own `j` and `k`, yet:\n{}",
        src.header_line(i),
        describe(&bad)
    );
}

#[test]
fn hazard_last_value_loop_needs_lastprivate() {
    let src = source("legal_last");
    let l = src.header_enclosing("last = b[i] - a[i];");
    let found: Vec<_> = suggested("legal_last", &["parallelize", "vectorize"], &[l])
        .into_iter()
        .filter(|(_, s)| !requires(s))
        .collect();
    assert!(
        found.is_empty(),
        "`last` is written by every iteration of line {} and read after it: the loop is parallel only with `last` lastprivate (`requires`), yet:\n{}",
        src.header_line(l),
        describe(&found)
    );
}

/// Rodinia backprop's `memcnt`: a source variable stepped by every iteration (`memcnt +=
/// sizeof(float)`) folds into an evolution of the counters, so no dependence carries it; yet a
/// `private(memcnt)` copy starts undefined. The pragma keeps it stepped as written with
/// OpenMP's `linear`, its step per iteration read from the source: `sizeof(float)` for the
/// inner loop, `(N2 + 1) * sizeof(float)` for the outer one, whose inner loop runs `N2 + 1`
/// times in each iteration (`apply_and_run_counter` inserts the pragmas and runs them).
#[test]
fn hazard_stepped_source_variable_is_linear() {
    let src = source("legal_counter");
    let l = src.header_enclosing("memcnt += sizeof(float);");
    let Some(outer) = src.enclosing(src.headers[l].line.saturating_sub(1)) else {
        panic!(
            "legal_counter has no loop around line {}",
            src.header_line(l)
        );
    };
    for (h, step) in [(l, "sizeof(float)"), (outer, "(N2 + 1) * sizeof(float)")] {
        let all = suggested("legal_counter", &["parallelize", "vectorize"], &[h]);
        let clause = format!("linear(memcnt: {step})");
        let bad: Vec<_> = all
            .iter()
            .filter(|(_, s)| {
                let text = s["text"].as_str().unwrap_or("");
                let mut pragmas = text.split('`').skip(1).step_by(2);
                !requires_change(s, "linear")
                    || text.contains("private(memcnt")
                    || !pragmas.any(|p| p.starts_with("#pragma omp") && p.contains(&clause))
            })
            .cloned()
            .collect();
        assert!(
            !all.is_empty() && bad.is_empty(),
            "`memcnt` is stepped by each iteration of the loop of line {}: parallel or vectorized with `{clause}`, yet:\n{}",
            src.header_line(h),
            describe(&bad)
        );
    }
}

/// Rodinia kmeans' `index`: the local of an inlined call, assigned in a `cmov` (gcc -O2) that
/// reads the register the caller's own `index` shares, is each call's own: no dependence
/// carried by the loop over points, which runs in parallel with the caller's `index` private.
#[test]
fn local_of_an_inlined_call_is_each_iterations_own() {
    let src = source("legal_argmin");
    let l = src.header_enclosing("index = find_nearest(pts[i], ctr, K);");
    let found: Vec<&str> = suggested("legal_argmin", &["parallelize"], &[l])
        .into_iter()
        .map(|(opt, _)| opt)
        .collect();
    assert!(
        OPT_LEVELS.iter().all(|o| found.contains(o)),
        "the loop of line {} is parallel at every level, yet suggested only at {found:?}",
        src.header_line(l)
    );
}

/// Rodinia hotspot's `delta`: the c loop carries nothing, but its runs read `delta` as an
/// earlier run left it: `private(delta)` alone would hand out uninitialised copies.
#[test]
fn hazard_value_from_an_earlier_run_is_firstprivate() {
    let src = source("legal_stale");
    let l = src.header_enclosing("out[r][c] = t[r][c] + delta;");
    let all = suggested("legal_stale", &["parallelize"], &[l]);
    let bad: Vec<_> = all
        .iter()
        .filter(|(_, s)| {
            let text = s["text"].as_str().unwrap_or("");
            !(text.contains("firstprivate(delta)") && text.contains("lastprivate(delta)"))
        })
        .cloned()
        .collect();
    assert!(
        bad.is_empty(),
        "the runs of the loop of line {} read `delta` from earlier runs, yet:\n{}",
        src.header_line(l),
        describe(&bad)
    );
}

#[test]
fn hazard_shared_scalar_in_a_register_is_privatized() {
    let src = source("legal_shared_scalar");
    // `t` in a register at -O2, `w` in a vectorized loop, where debug information loses it.
    for (var, line) in [("t", "t = a[i] * 3.0 + 0.5;"), ("w", "w = c[i] * 0.5;")] {
        let l = src.header_enclosing(line);
        let all = suggested("legal_shared_scalar", &["parallelize"], &[l]);
        let found: Vec<_> = all
            .iter()
            .filter(|(_, s)| !requires_change(s, "privatize"))
            .cloned()
            .collect();
        assert!(
            all.len() >= 2 && found.is_empty(),
            "`{var}` is declared before the loop of line {}: wherever the compiler keeps it, the threads share it unless it is private, yet:\n{}",
            src.header_line(l),
            describe(&all)
        );
    }
    // `u` is declared in its loop's body: one per iteration already, `private(u)` would not
    // even compile.
    let u = src.header_enclosing("double u = b[i] * 0.25 + c[i];");
    let found = suggested("legal_shared_scalar", &["parallelize"], &[u]);
    assert!(
        !found.is_empty() && found.iter().all(|(_, s)| !requires(s)),
        "the loop of line {} is parallel as it is, yet:\n{}",
        src.header_line(u),
        describe(&found)
    );
}

#[test]
fn hazard_c89_counters_are_privatized() {
    let src = source("legal_c89");
    let j = src.header_enclosing("C[i][j] *= 0.5;");
    let i = src.enclosing(src.headers[j].line - 1).expect("the i loop");
    let all = suggested("legal_c89", &["parallelize"], &[i]);
    let found: Vec<_> = all
        .iter()
        .filter(|(_, s)| !(requires_privatize_of(s, "j") && requires_privatize_of(s, "k")))
        .cloned()
        .collect();
    assert!(
        all.len() >= 2 && found.is_empty(),
        "`j` and `k` are declared at the top of the kernel, outside the loop of line {}: parallelizing it needs them private, yet:\n{}",
        src.header_line(i),
        describe(&all)
    );
}

fn requires_privatize_of(s: &Value, var: &str) -> bool {
    s["requires"].as_array().is_some_and(|a| {
        a.iter().any(|r| {
            r["change"] == "privatize"
                && r["storage"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(&format!("`{var}`")))
        })
    })
}

#[test]
fn hazard_symm_accumulator_is_not_mapped_onto_a_live_element() {
    let src = source("legal_symm");
    let all: Vec<usize> = (0..src.headers.len()).collect();
    let onto_c = |s: &Value| {
        s["kind"] == "map_scalar_to_array" && s["array"].as_str().is_some_and(|a| a.contains('C'))
            || s["requires"].as_array().is_some_and(|rs| {
                rs.iter().any(|r| {
                    r["change"] == "map_to_array"
                        && r["storage"]
                            .as_str()
                            .is_some_and(|t| t.contains("onto `C`"))
                })
            })
    };
    let found: Vec<_> = suggested(
        "legal_symm",
        &["map_scalar_to_array", "interchange", "tile", "skew"],
        &all,
    )
    .into_iter()
    .filter(|(_, s)| onto_c(s))
    .collect();
    assert!(
        found.is_empty(),
        "C[i][j] is read at the end of iteration (i, j), by the statement that stores to it: it holds a live value while temp2 accumulates and cannot hold temp2, yet:\n{}",
        describe(&found)
    );
}

/// symm's and deriche's nests (legal_symm, legal_recur_cols) vectorize and run in parallel
/// once interchanged, which at -O2 needs values gcc keeps in registers expanded along a loop
/// (`alpha * B[i][j]`, `y1[i][j]` kept for the next iteration's `ym1`): no source variable
/// names them, so the texts that hold only after that interchange print no directive (it
/// would read as complete) and say why, naming the line that computes each value (issue 36).
#[test]
fn register_expansions_print_no_directive() {
    for kernel in ["legal_symm", "legal_recur_cols"] {
        let src = source(kernel);
        let all: Vec<usize> = (0..src.headers.len()).collect();
        let mut seen = 0;
        for (opt, s) in suggested(kernel, &["parallelize", "vectorize"], &all) {
            let unnamed = s["requires"].as_array().is_some_and(|rs| {
                rs.iter().any(|r| {
                    r["change"] == "expand"
                        && r["storage"].as_str().is_some_and(|t| !t.starts_with('`'))
                })
            });
            if !unnamed {
                continue;
            }
            seen += 1;
            let text = s["text"].as_str().unwrap_or("");
            assert!(
                !text.contains("`#pragma")
                    && text.contains("No directive is printed")
                    && text.contains("expanding the value computed at"),
                "{kernel} {opt}: {text}"
            );
        }
        assert!(
            seen > 0,
            "{kernel}: no suggestion needs a register expanded (the compiler's choice changed?)"
        );
    }
}

#[test]
fn hazard_sse_nest_is_neither_interchanged_nor_parallel() {
    let src = source("legal_sse");
    let i = src.header_enclosing("_mm_loadu_pd(&a[i])");
    let t = src
        .enclosing(src.headers[i].line - 1)
        .expect("the time loop");
    // A tile is legal after the skew, not on the nest as written.
    let interchanges: Vec<_> = suggested("legal_sse", &["interchange", "tile"], &[t, i])
        .into_iter()
        .filter(|(_, s)| {
            s["kind"] == "interchange" || !s["text"].as_str().unwrap_or("").contains("skew")
        })
        .collect();
    let parallel: Vec<_> = suggested("legal_sse", &["parallelize", "vectorize"], &[i])
        .into_iter()
        .filter(|(_, s)| !requires(s))
        .collect();
    assert!(
        interchanges.is_empty() && parallel.is_empty(),
        "(t, i) reads a[i + 1] from (t - 1, i + 1), distance (1, -1), and a[i] is overwritten after (t, i - 1) read it: no interchange or tile of lines {} and {} and no parallel line {} without a skew, yet:\n{}{}",
        src.header_line(t),
        src.header_line(i),
        src.header_line(i),
        describe(&interchanges),
        describe(&parallel)
    );
}

/// deriche's column recurrences (ym1, ym2, xm1 carried down each column j by the i loop):
/// tiling (j, i) interleaves columns, so the scalars must be expanded along j first. At 20
/// columns the advised tiles of 32 reorder nothing on the profiled input; the tile was called
/// legal as written until the check used small tiles.
#[test]
fn hazard_recurrence_columns_are_not_tiled_as_written() {
    let src = source("legal_recur_cols");
    let i = src.header_enclosing("xm1 = in[i][j];");
    let j = src.enclosing(src.headers[i].line - 1).expect("the j loop");
    let tiles: Vec<_> = suggested("legal_recur_cols", &["tile", "interchange"], &[j, i])
        .into_iter()
        .filter(|(_, s)| !requires(s))
        .collect();
    assert!(
        tiles.is_empty(),
        "the recurrences of lines {} and {} need expanding along j before any tile or interchange, yet:\n{}",
        src.header_line(j),
        src.header_line(i),
        describe(&tiles)
    );
}

#[test]
fn hazard_library_call_loops_are_not_parallel() {
    let src = source("legal_libcalls");
    let loops = [
        ("rand()", src.header_enclosing("a[i] = rand()")),
        ("printf", src.header_enclosing("printf(\"%a\\n\", a[i]);")),
        ("memmove", src.header_enclosing("memmove(&buf[i + 1]")),
    ];
    let mut msg = String::new();
    for (what, h) in loops {
        let found = suggested("legal_libcalls", &["parallelize", "vectorize"], &[h]);
        if !found.is_empty() {
            let _ = write!(
                msg,
                "the {what} loop at line {}:\n{}",
                src.header_line(h),
                describe(&found)
            );
        }
    }
    assert!(
        msg.is_empty(),
        "loops whose order a library call fixes were called parallel:\n{msg}"
    );
}

#[test]
fn hazard_reduction_is_not_plain_parallel() {
    let src = source("legal_reduction");
    let loops = [
        src.header_enclosing("s += a[i];"),
        src.header_enclosing("t += b[i] * b[i];"),
    ];
    let found: Vec<_> = suggested("legal_reduction", &["parallelize", "vectorize"], &loops)
        .into_iter()
        .filter(|(_, s)| !has_reduction(s))
        .collect();
    assert!(
        found.is_empty(),
        "the sums at lines {} and {} are reductions: parallel only with a `reduction`, yet:\n{}",
        src.header_line(loops[0]),
        src.header_line(loops[1]),
        describe(&found)
    );
}

#[test]
fn array_reductions_through_pointers_name_sections() {
    let clauses = |opt: &'static str| -> Vec<String> {
        let p = profile("legal_array_reduction", opt);
        regions(&p)
            .iter()
            .flat_map(suggestions)
            .filter_map(|s| s["reduction"].as_array())
            .flatten()
            .filter_map(|r| r["clause"].as_str().map(str::to_string))
            .collect()
    };
    // A pointer cannot be reduced whole: the clause names the section the array spans. At
    // -O2, main's `h` sits at the stack pointer itself (`mov r13, rsp`, no `lea`).
    let at_o0 = clauses("-O0");
    let at_o2 = clauses("-O2");
    for (opt, found) in [("-O0", &at_o0), ("-O2", &at_o2)] {
        for want in ["reduction(+: y[0:16])", "reduction(^: h[0:16])"] {
            assert!(
                found.iter().any(|c| c == want),
                "no `{want}` at {opt}: {found:?}"
            );
        }
    }
    for c in at_o0.iter().chain(&at_o2) {
        assert!(
            !["reduction(+: y)", "reduction(^: h)"].contains(&c.as_str()),
            "a pointer reduced whole: {c}"
        );
    }
}

#[test]
fn legal_matmul_keeps_interchange_and_tile() {
    let src = source("legal_matmul");
    let k = src.header_enclosing("C[i][j] += A[i][k] * B[k][j];");
    let nest: Vec<usize> = (0..src.headers.len())
        .filter(|&h| h == k || src.contains(h, k))
        .collect();
    assert_eq!(nest.len(), 3);
    let found = suggested("legal_matmul", &["interchange", "tile"], &nest);
    for opt in OPT_LEVELS {
        for kind in ["interchange", "tile"] {
            assert!(
                found.iter().any(|(o, s)| *o == opt && s["kind"] == kind),
                "matmul at {opt}: no {kind} on the nest at lines {}-{}; found:\n{}",
                src.header_line(nest[0]),
                src.header_line(k),
                describe(&found)
            );
        }
    }
}

/// An imperfect nest: the interchange says which statements go to loops of their own first,
/// and applied so (distributed, then the headers swapped) it keeps the output.
#[test]
fn legal_imperfect_interchange_names_the_distribution_it_needs() {
    let p = profile("legal_imperfect", "-O0");
    let rows = apply_all(&p);
    let src = &p.source;
    let line = |snippet: &str| {
        let n = src.lines.iter().position(|l| l.contains(snippet)).unwrap();
        format!("legal_imperfect.c:{}", n + 1)
    };
    let j = src.header_line(src.header_enclosing("C[i][j] = 0.5;"));
    let want = format!(
        "The nest is not perfect: first move {} to a copy of loop legal_imperfect.c:{j} before it and {} to one after it.",
        line("C[i][j] = 0.5;"),
        line("C[i][j] = C[i][j] * 0.25;")
    );
    let ic = rows
        .iter()
        .find(|r| r.kind == "interchange")
        .unwrap_or_else(|| panic!("no interchange:\n{}", table(&p, &rows)));
    assert!(ic.text.contains(&want), "{}\nwanted: {want}", ic.text);
    assert!(
        matches!(ic.outcome, Outcome::Passed(_)),
        "the interchange, applied after the distribution:\n{}",
        table(&p, &rows)
    );
}

#[test]
fn legal_covariance_mirrored_write_blocks_neither_parallel_nor_interchange() {
    let src = source("legal_covariance");
    let i = src.header_enclosing("cov[j][i] = cov[i][j];");
    let i = (0..src.headers.len())
        .find(|&h| src.contains(h, i) || h == i)
        .expect("the i loop");
    let nest: Vec<usize> = (0..src.headers.len())
        .filter(|&h| h == i || src.contains(i, h))
        .collect();
    let found = suggested("legal_covariance", &["parallelize", "interchange"], &nest);
    for opt in OPT_LEVELS {
        assert!(
            found
                .iter()
                .any(|(o, s)| *o == opt && s["kind"] == "parallelize"),
            "covariance at {opt}: no parallel loop in the nest at line {}; found:\n{}",
            src.header_line(i),
            describe(&found)
        );
    }
}

#[test]
fn legal_jacobi2d_keeps_parallelize() {
    let src = source("legal_jacobi2d");
    let spatial: Vec<usize> = [
        src.header_enclosing("B[i][j] = 0.2 *"),
        src.header_enclosing("A[i][j] = B[i][j];"),
    ]
    .into_iter()
    .flat_map(|j| [src.enclosing(src.headers[j].line - 1).unwrap(), j])
    .collect();
    let found = suggested("legal_jacobi2d", &["parallelize"], &spatial);
    for opt in OPT_LEVELS {
        assert!(
            found.iter().any(|(o, _)| *o == opt),
            "Jacobi at {opt}: no parallelize on the spatial loops"
        );
    }
}

#[test]
fn legal_stencil_and_init_keep_parallelize() {
    let src = source("legal_stencil2d");
    let j = src.header_enclosing("out[i][j] = in[i][j] * 0.5");
    let nest = [src.enclosing(src.headers[j].line - 1).unwrap(), j];
    for opt in OPT_LEVELS {
        assert!(
            suggested("legal_stencil2d", &["parallelize"], &nest)
                .iter()
                .any(|(o, _)| *o == opt),
            "the 2-D stencil at {opt}: no parallelize"
        );
    }
    let src = source("legal_init");
    let init = src.header_enclosing("a[i] = i % 7;");
    assert!(
        suggested("legal_init", &["parallelize"], &[init])
            .iter()
            .any(|(o, _)| *o == "-O0"),
        "the init loop at -O0: no parallelize"
    );
}

/// Every kernel of the suite.
const KERNELS: [&str; 12] = [
    "legal_shift",
    "legal_doitgen",
    "legal_last",
    "legal_sse",
    "legal_libcalls",
    "legal_reduction",
    "legal_matmul",
    "legal_jacobi2d",
    "legal_seidel1d",
    "legal_init",
    "legal_transpose",
    "legal_stencil2d",
];

/// At -O0 gcc keeps every C variable in memory between statements: no register holds a value
/// across iterations or past a loop, so a storage change on a register is never needed there.
/// Such a spurious `requires` hides legal advice from this suite (and asks the user for a
/// change they cannot make in the source).
#[test]
fn precision_no_register_storage_change_at_o0() {
    let mut msg = String::new();
    for kernel in KERNELS {
        let p = profile(kernel, "-O0");
        for reg in regions(&p) {
            for s in suggestions(reg) {
                let regs: Vec<String> = s["requires"]
                    .as_array()
                    .map_or(&[][..], Vec::as_slice)
                    .iter()
                    .filter(|r| r["storage"].as_str().unwrap_or("").starts_with("register"))
                    .map(|r| {
                        format!(
                            "{} {}",
                            r["change"].as_str().unwrap_or("?"),
                            r["storage"].as_str().unwrap_or("?")
                        )
                    })
                    .collect();
                if !regs.is_empty() {
                    let _ = writeln!(
                        msg,
                        "  {kernel} {} {} {}: requires {}: \"{}\"",
                        reg["id"].as_str().unwrap_or("?"),
                        s["kind"].as_str().unwrap_or("?"),
                        s["loops"],
                        regs.join(", "),
                        s["text"].as_str().unwrap_or("")
                    );
                }
            }
        }
    }
    assert!(
        msg.is_empty(),
        "suggestions at -O0 that require a storage change on a register:\n{msg}"
    );
}

#[test]
fn the_rewriter_handles_the_strict_style() {
    let src = source("legal_matmul");
    let k = src.header_enclosing("C[i][j] += A[i][k] * B[k][j];");
    let j = src.enclosing(src.headers[k].line - 1).unwrap();
    let i = src.enclosing(src.headers[j].line - 1).unwrap();
    assert_eq!(
        (
            src.headers[i].var.as_str(),
            src.headers[j].var.as_str(),
            src.headers[k].var.as_str()
        ),
        ("i", "j", "k")
    );
    let mut e = Edit::new(&src);
    e.permute(&[i, k, j]).unwrap();
    assert_eq!(
        e.lines[src.headers[j].line].trim(),
        "for (int k = 0; k < N; k++) {"
    );
    assert_eq!(
        e.lines[src.headers[k].line].trim(),
        "for (int j = 0; j < N; j++) {"
    );
    e.reverse(j);
    assert_eq!(
        e.lines[src.headers[k].line].trim(),
        "for (int j = (N) - 1; j >= (0); j--) {"
    );
    // Not perfect: the init nest has three statements in j, and the print nest is separate.
    let mut e = Edit::new(&src);
    let print_j = src.header_enclosing("printf(\"%a\\n\", C[i][j]);");
    assert!(e.permute(&[print_j, i]).is_err(), "not nested");
    let shift = source("legal_shift");
    let init = shift.header_enclosing("a[i] = i * 0.25");
    assert_eq!(shift.headers[init].cmp, Cmp::Le);
    let mut e = Edit::new(&shift);
    e.reverse(init);
    assert_eq!(
        e.lines[shift.headers[init].line].trim(),
        "for (int i = N; i >= (0); i--) {"
    );
    // doitgen's r-q-p nest is not perfect.
    let d = source("legal_doitgen");
    let p = d.header_enclosing("sum[p] = 0.0;");
    let q = d.enclosing(d.headers[p].line - 1).unwrap();
    assert!(Edit::new(&d).permute(&[p, q]).is_err());
}
