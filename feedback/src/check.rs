//! `polyprof check`: a transformation the user states (Loopy-style operations on named loops,
//! or any affine schedule in isl notation) checked against the observed dependences of one
//! region, with the legality model of [`crate::legality`].
//!
//! The transformations act on the region's schedule in Kelly's form, one row list per
//! statement, `[p0, i0, p1, i1, ..., pk]`: constant rows give the textual order, loop rows are
//! affine expressions of the statement's iteration numbers (counted from 0 in every loop, as
//! the region's domains count them), each tagged with the loop it stands for. An operation
//! rewrites the rows of the statements inside the loops it names. The verdict:
//! - the final schedule is one-to-one on the statements' instances;
//! - every observed dependence (flow, anti, output; registers, memory, library state) keeps
//!   its source before its sink;
//! - a `tile` band is permutable when tiled: no dependence between instances with the same
//!   outer loop iterations has a negative distance along a tiled loop;
//! - a `parallel` or `vectorize` claim holds at its place in the sequence: the loop carries
//!   no dependence, checked by [`Ctx::parallel`] (reductions, privatization, library calls).
//!
//! A violated dependence is named with a concrete pair of instances that isl samples from its
//! violated part, and with the storage change that would remove it, when one would.

use crate::input::{DepKind, Region, Storage};
use crate::islx::{self, empty, union_map};
use crate::legality::{line_of, Change, Ctx, Requirement, Verdict};
use crate::params::Parameterizer;
use crate::{Error, Options};
use isl_rs::{Context, UnionMap};
use std::collections::BTreeSet;

/// One operation of a transformation, with its loops as the user named them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Swap two loops of a nest.
    Interchange(String, String),
    /// Reorder loops of a nest, outermost first.
    Permute(Vec<String>),
    /// Run a loop backwards.
    Reverse(String),
    /// `inner += factor · outer`.
    Skew {
        outer: String,
        inner: String,
        factor: i64,
    },
    /// Add a constant to a loop's iteration numbers (aligns a loop with one fused to it).
    Shift { target: String, by: i64 },
    /// Tile nested loops (outermost first) by `size` iterations each.
    Tile { loops: Vec<String>, size: i64 },
    /// Fuse two sibling loops into the first (iteration numbers aligned from 0).
    Fuse(String, String),
    /// Distribute a loop over the statements and loops of its body.
    Split(String),
    /// A claim: the loop carries no dependence after the preceding operations.
    Parallel(String),
    /// The same claim for SIMD lanes.
    Vectorize(String),
    /// A whole schedule, as an isl map over the region's statements.
    Schedule(String),
}

impl Op {
    /// Every loop the operation names.
    pub fn loops(&self) -> Vec<&str> {
        match self {
            Op::Interchange(a, b) | Op::Fuse(a, b) => vec![a, b],
            Op::Permute(v) | Op::Tile { loops: v, .. } => v.iter().map(String::as_str).collect(),
            Op::Reverse(a) | Op::Split(a) | Op::Parallel(a) | Op::Vectorize(a) => vec![a],
            Op::Shift { target, .. } => vec![target],
            Op::Skew { outer, inner, .. } => vec![outer, inner],
            Op::Schedule(_) => Vec::new(),
        }
    }
}

/// An operation and where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub op: Op,
    /// As written, for messages.
    pub text: String,
}

/// Parses a transformation: operations separated by `;` or new lines, `#` to the end of a
/// line a comment. A quoted argument (`schedule "{ S0[i] -> [i] }"`) may hold `;`.
pub fn parse(text: &str) -> Result<Vec<Step>, Error> {
    let mut steps = Vec::new();
    for line in text.lines() {
        for piece in split_ops(strip_comment(line)) {
            let piece = piece.trim();
            if piece.is_empty() {
                continue;
            }
            steps.push(Step {
                op: parse_op(piece)?,
                text: piece.to_string(),
            });
        }
    }
    if steps.is_empty() {
        return Err(usage("the transformation holds no operation"));
    }
    if let Some(k) = steps.iter().position(|s| matches!(s.op, Op::Schedule(_))) {
        if k + 1 != steps.len() {
            return Err(usage(
                "`schedule` replaces the whole schedule, so it must be the last operation",
            ));
        }
    }
    Ok(steps)
}

fn usage(s: &str) -> Error {
    Error::Usage(s.to_string())
}

fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}

fn split_ops(line: &str) -> Vec<&str> {
    let (mut out, mut start, mut quoted) = (Vec::new(), 0, false);
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ';' if !quoted => {
                out.push(&line[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&line[start..]);
    out
}

fn parse_op(piece: &str) -> Result<Op, Error> {
    let (name, rest) = piece.split_once(char::is_whitespace).unwrap_or((piece, ""));
    let rest = rest.trim();
    if name == "schedule" {
        let map = rest
            .strip_prefix('"')
            .and_then(|r| r.strip_suffix('"'))
            .unwrap_or(rest);
        if !map.contains('{') {
            return Err(Error::Usage(format!(
                "`{piece}`: `schedule` takes an isl map in quotes, e.g. schedule \"{{ S0[i, j] -> [j, i] }}\""
            )));
        }
        return Ok(Op::Schedule(map.to_string()));
    }
    let args: Vec<String> = rest.split_whitespace().map(str::to_string).collect();
    let bad = |form: &str| Error::Usage(format!("`{piece}` is malformed: write `{form}`"));
    let int = |s: &str, form: &str| s.parse::<i64>().map_err(|_| bad(form));
    let op = match (name, args.as_slice()) {
        ("interchange", [a, b]) => Op::Interchange(a.clone(), b.clone()),
        ("interchange", _) => return Err(bad("interchange LOOP LOOP")),
        ("permute", v) if v.len() >= 2 => Op::Permute(v.to_vec()),
        ("permute", _) => return Err(bad("permute LOOP LOOP [LOOP...] (outermost first)")),
        ("reverse", [a]) => Op::Reverse(a.clone()),
        ("reverse", _) => return Err(bad("reverse LOOP")),
        ("skew", [a, b, f]) => Op::Skew {
            outer: a.clone(),
            inner: b.clone(),
            factor: int(f, "skew LOOP LOOP FACTOR")?,
        },
        ("skew", _) => return Err(bad("skew LOOP LOOP FACTOR")),
        ("shift", [a, n]) => Op::Shift {
            target: a.clone(),
            by: int(n, "shift LOOP N")?,
        },
        ("shift", _) => return Err(bad("shift LOOP N")),
        ("tile", [loops @ .., size]) if !loops.is_empty() => {
            let size = int(size, "tile LOOP [LOOP...] SIZE")?;
            if size < 1 {
                return Err(bad("tile LOOP [LOOP...] SIZE, with a SIZE of at least 1"));
            }
            Op::Tile {
                loops: loops.to_vec(),
                size,
            }
        }
        ("tile", _) => return Err(bad("tile LOOP [LOOP...] SIZE")),
        ("fuse", [a, b]) => Op::Fuse(a.clone(), b.clone()),
        ("fuse", _) => return Err(bad("fuse LOOP LOOP")),
        ("split", [a]) => Op::Split(a.clone()),
        ("split", _) => return Err(bad("split LOOP")),
        ("parallel", [a]) => Op::Parallel(a.clone()),
        ("parallel", _) => return Err(bad("parallel LOOP")),
        ("vectorize", [a]) => Op::Vectorize(a.clone()),
        ("vectorize", _) => return Err(bad("vectorize LOOP")),
        _ => {
            return Err(Error::Usage(format!(
                "`{piece}`: unknown operation `{name}` (known: interchange, permute, reverse, skew, shift, tile, fuse, split, parallel, vectorize, schedule)"
            )))
        }
    };
    for l in op.loops() {
        if l.parse::<i64>().is_ok() {
            return Err(Error::Usage(format!(
                "`{piece}`: `{l}` is not a loop (name loops by file:line or report id, e.g. k.c:12 or L3)"
            )));
        }
    }
    Ok(op)
}

/// A dependence the transformation breaks.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// Index of the operation that breaks it (a `tile` or a claim), or the number of
    /// operations for the final schedule.
    pub step: usize,
    /// Index into the region's dependences.
    pub dep: usize,
    pub kind: DepKind,
    /// The storage, in source names.
    pub storage: String,
    /// Source and sink statements (names) and their source lines.
    pub source: String,
    pub source_line: String,
    pub sink: String,
    pub sink_line: String,
    /// One pair of instances the transformation reorders, as isl samples it:
    /// `(statement, iteration numbers)` of the source, then of the sink.
    pub pair: Option<Collision>,
    /// The storage change that removes this dependence, if one does.
    pub fix: Option<Requirement>,
}

/// The verdict on a `parallel` or `vectorize` claim.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    pub step: usize,
    /// The loop's report id.
    pub loop_id: String,
    /// Holds as the program stands.
    pub holds: bool,
    /// Storage changes that would make it hold (privatize, a reduction, ...).
    pub needs: Vec<Requirement>,
    /// Why it does not hold, when no storage change helps.
    pub why: Option<String>,
}

/// A statement instance: the statement's name and its iteration numbers, outermost first.
pub use crate::poly::Instance;

/// Two instances: the source and sink of a dependence, or two instances a schedule runs at
/// the same time (it is not one-to-one).
pub type Collision = (Instance, Instance);

/// The verdict on a transformation.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Legal as the program stands: one-to-one, no violation, every claim holds.
    pub legal: bool,
    /// The new schedule, in isl notation.
    pub schedule: String,
    /// `None` when the schedule is one-to-one; else two instances it runs at one time.
    pub collision: Option<Collision>,
    pub violations: Vec<Violation>,
    pub claims: Vec<Claim>,
    /// Dependences every schedule must keep (flow; anti and output through arrays and
    /// library state), checked source before sink.
    pub dependences: usize,
    /// Anti and output dependences through registers and scalars, which decide storage
    /// rather than legality: checked by the storage model (`storage_needs`).
    pub renamable: usize,
    /// Storage changes the new order needs for the values of registers and scalars it
    /// reorders (expansion, mapping onto a dead array element), as the suggestions ask them.
    pub storage_needs: Vec<Requirement>,
    /// Why no storage change can hold those values, when none can.
    pub storage_blocked: Option<String>,
    /// When not legal: the storage changes that would make it legal, if changes can (every
    /// violation has a fix, every failed claim names what it needs).
    pub legal_after: Option<Vec<Requirement>>,
}

/// A schedule row of one statement.
#[derive(Clone, Debug, PartialEq)]
enum Row {
    /// A textual position.
    Const(i64),
    /// A loop: an affine expression over the statement's iteration numbers `i0, i1, ...`,
    /// standing for loop `tag` (the loop over its tiles once tiled; `point`: the loop within a
    /// tile).
    Loop {
        expr: String,
        tag: usize,
        point: bool,
    },
}

/// The schedule under transformation: rows per statement, and which loops were fused into
/// one (`class[l]`: the loop standing for `l`'s class).
struct Sched {
    rows: Vec<Vec<Row>>,
    class: Vec<usize>,
}

impl Sched {
    fn original(region: &Region) -> Sched {
        let rows = region
            .statements
            .iter()
            .map(|s| {
                let mut r = Vec::new();
                for (d, &l) in s.loops.iter().enumerate() {
                    r.push(Row::Const(i64::from(
                        s.positions.get(d).copied().unwrap_or(0),
                    )));
                    r.push(Row::Loop {
                        expr: format!("i{d}"),
                        tag: l,
                        point: false,
                    });
                }
                let last = s.positions.get(s.loops.len()).copied().unwrap_or(0);
                r.push(Row::Const(i64::from(last)));
                r
            })
            .collect();
        Sched {
            rows,
            class: (0..region.loops.len()).collect(),
        }
    }

    /// The row of statement `s` standing for loop `l` (or a loop fused with it).
    fn row_of(&self, s: usize, l: usize) -> Option<usize> {
        self.rows[s].iter().position(|r| {
            matches!(r, Row::Loop { tag, point: false, .. } if self.class[*tag] == self.class[l])
        })
    }

    fn expr(&mut self, s: usize, r: usize) -> &mut String {
        match &mut self.rows[s][r] {
            Row::Loop { expr, .. } => expr,
            // Callers pass loop rows only.
            Row::Const(_) => unreachable!("a constant row taken for a loop"),
        }
    }

    /// The schedule as an isl map, every statement's time padded to one length.
    fn text(&self, region: &Region) -> String {
        let n = self.rows.iter().map(Vec::len).max().unwrap_or(1);
        let pieces: Vec<String> = region
            .statements
            .iter()
            .zip(&self.rows)
            .map(|(s, rows)| {
                let vars: Vec<String> = (0..s.loops.len()).map(|d| format!("i{d}")).collect();
                let mut out: Vec<String> = rows
                    .iter()
                    .map(|r| match r {
                        Row::Const(c) => c.to_string(),
                        Row::Loop { expr, .. } => expr.clone(),
                    })
                    .collect();
                out.resize(n, "0".to_string());
                format!("{}[{}] -> [{}]", s.name, vars.join(", "), out.join(", "))
            })
            .collect();
        format!("{{ {} }}", pieces.join("; "))
    }
}

/// Checks the transformation `steps` on `region`. `loop_of` resolves a loop as the user named
/// it to an index into the region's loops (`None`: not a loop of this region).
pub fn check(
    region: &Region,
    steps: &[Step],
    loop_of: &dyn Fn(&str) -> Option<usize>,
    opts: &Options,
) -> Result<Outcome, Error> {
    islx::limited(opts, |isl| check_in(region, steps, loop_of, isl))
}

fn check_in(
    region: &Region,
    steps: &[Step],
    loop_of: &dyn Fn(&str) -> Option<usize>,
    isl: &Context,
) -> Result<Outcome, Error> {
    // No parameters: the relations stay in the program's own numbers, and the sampled
    // instances with them (nothing is scheduled, so isl's scheduler costs do not arise).
    let debug = std::env::var_os("POLYPROF_DEBUG_CHECK").is_some();
    let t0 = std::time::Instant::now();
    let mark = |what: &str| {
        if debug {
            eprintln!("check: {what} at {:.3} s", t0.elapsed().as_secs_f64());
        }
    };
    let mut cx = Ctx::new(region, isl, Parameterizer::none())?;
    mark("parse");
    cx.reductions = crate::reduction::Reductions::new(region, isl);
    cx.keep_forward()?;
    mark("keep_forward");
    let mut sched = Sched::original(region);
    let mut violations = Vec::new();
    let mut claims = Vec::new();
    let mut replaced: Option<String> = None;
    // Loops whose order changes, and whether every statement instance's iteration stays
    // whole (its statements together), for the storage question.
    let mut moved: Vec<usize> = Vec::new();
    let mut whole = true;
    for (k, step) in steps.iter().enumerate() {
        let loops: Vec<usize> = step
            .op
            .loops()
            .iter()
            .map(|name| {
                loop_of(name).ok_or_else(|| {
                    Error::Usage(format!(
                        "`{}`: `{name}` is not a loop of the region",
                        step.text
                    ))
                })
            })
            .collect::<Result<_, _>>()?;
        let fail = |why: String| Error::Usage(format!("`{}`: {why}", step.text));
        if !matches!(step.op, Op::Parallel(_) | Op::Vectorize(_)) {
            for &l in &loops {
                if !moved.contains(&l) {
                    moved.push(l);
                }
            }
        }
        match &step.op {
            Op::Interchange(..) | Op::Permute(_) => {
                whole &= !distribute(&mut sched, &loops);
                match &step.op {
                    Op::Interchange(..) => swap(&mut sched, loops[0], loops[1]).map_err(fail)?,
                    _ => permute(&mut sched, &loops).map_err(fail)?,
                }
            }
            Op::Reverse(_) => {
                each_row(&mut sched, loops[0], |e| format!("-({e})")).map_err(fail)?
            }
            Op::Shift { by, .. } => shift(&mut sched, loops[0], *by).map_err(fail)?,
            Op::Skew { factor, .. } => {
                skew(&mut sched, loops[0], loops[1], *factor).map_err(fail)?
            }
            Op::Fuse(..) => {
                whole = false;
                fuse(&mut sched, loops[0], loops[1]).map_err(fail)?
            }
            Op::Split(_) => {
                whole = false;
                split(&mut sched, loops[0]).map_err(fail)?
            }
            Op::Tile { size, .. } => {
                whole &= perfect(&sched, &loops);
                let band = band_rows(&sched, &loops).map_err(fail)?;
                cx.n = sched.rows.iter().map(Vec::len).max().unwrap_or(1);
                violations.extend(not_permutable(&cx, &sched, &band, k)?);
                tile(&mut sched, &loops, *size);
            }
            Op::Parallel(_) | Op::Vectorize(_) => {
                cx.n = sched.rows.iter().map(Vec::len).max().unwrap_or(1);
                let (claim, broken) = claim(&cx, &sched, loops[0], k).map_err(|e| match e {
                    Error::Usage(m) => fail(m),
                    e => e,
                })?;
                violations.extend(broken);
                claims.push(claim);
            }
            Op::Schedule(map) => {
                whole = false;
                moved = (0..region.loops.len()).collect();
                replaced = Some(map.clone());
            }
        }
    }
    let theta = match replaced {
        Some(map) => given_schedule(&cx, &map)?,
        None => sched.text(region),
    };
    mark("operations");
    let theta_m = union_map(isl, &theta)?;
    let collision = collision(&cx, &theta_m)?;
    mark("one-to-one");
    for dep in cx.all_violated(&cx.binding(), &theta_m)? {
        violations.push(violation(&cx, &theta_m, dep, steps.len(), None)?);
    }
    mark("dependences");
    // Registers and scalars whose values the new order reorders: the storage model of the
    // suggestions says what they need (a temporary that stays within its iteration renames
    // freely when iterations stay whole).
    let fix = match moved.is_empty() || values_kept(&cx, &theta_m, whole)? {
        true => None,
        false => Some(crate::storage::for_schedule(
            &cx,
            &moved,
            &theta_m,
            "the transformation",
            whole,
        )?),
    };
    mark("storage");
    let mut o = outcome(&cx, theta, collision, violations, claims);
    if let Some(fix) = fix {
        o.storage_needs = fix.needs;
        o.storage_blocked = fix.blocked;
        settle(&mut o);
    }
    Ok(o)
}

/// Whether every value of a register or scalar whose anti or output dependences `theta`
/// breaks still reaches its readers: no write of that storage runs between a producer and
/// its consumer in the new order. Then no storage change is needed (the broken dependences
/// only say the storage is reused, as a temporary is in every iteration).
///
/// When the transformation keeps iterations whole, a storage whose values never cross
/// iterations (a temporary of one iteration's body) keeps them without asking isl: nothing
/// of another iteration runs between two instances of one iteration.
fn values_kept(cx: &Ctx<'_>, theta: &UnionMap, whole: bool) -> Result<bool, Error> {
    let deps = &cx.region.dependences;
    let renamable: Vec<usize> = (0..deps.len()).filter(|&i| !deps[i].binding()).collect();
    let broken = cx.all_violated(&renamable, theta)?;
    let storages: BTreeSet<&Storage> = broken.iter().map(|&i| &deps[i].storage).collect();
    let e = || islx::isl("checking that values reach their readers");
    for storage in storages {
        let within_iterations = crate::storage::carrying_loops(cx.region, storage)
            .is_some_and(|loops| loops.is_empty());
        if whole && within_iterations {
            continue;
        }
        let of = |i: &usize| &deps[*i].storage == storage;
        let flows: Vec<usize> = (0..deps.len())
            .filter(|i| of(i) && deps[*i].kind == DepKind::Flow)
            .collect();
        let Some(flow) = cx.deps_map(&flows)? else {
            continue;
        };
        // The statements writing the storage: producers of its flow and output
        // dependences, overwriters of its anti dependences.
        let writers: BTreeSet<&str> = (0..deps.len())
            .filter(of)
            .flat_map(|i| {
                let d = &deps[i];
                match d.kind {
                    DepKind::Flow => vec![d.source.as_str()],
                    DepKind::Anti => vec![d.sink.as_str()],
                    DepKind::Output => vec![d.source.as_str(), d.sink.as_str()],
                }
            })
            .collect();
        let written = cx.domains_of(
            (0..cx.region.statements.len())
                .filter(|&i| writers.contains(cx.region.statements[i].name.as_str())),
        )?;
        let at_writes = theta
            .copy()
            .and_then(|t| t.intersect_domain(written))
            .map_err(e())?;
        // Instance pairs (x, w) with x before the write w, and (w, y) with w before y.
        let t_of = |m: &UnionMap| m.copy().map_err(e());
        let before_write = t_of(theta)?
            .lex_lt_union_map(t_of(&at_writes)?)
            .map_err(e())?;
        let after_write = t_of(&at_writes)?
            .lex_lt_union_map(t_of(theta)?)
            .map_err(e())?;
        let between = before_write.apply_range(after_write).map_err(e())?;
        let lost = flow.intersect(between).map_err(e())?;
        if !empty(&lost)? {
            return Ok(false);
        }
        // A value from before the region must still be read before any write, and the last
        // write of a value read after the region must stay the last.
        for (borders, live_in) in [(&cx.region.live_in, true), (&cx.region.live_out, false)] {
            for b in borders.iter().filter(|b| &b.storage == storage) {
                let rel = b
                    .relation
                    .to_union_map(cx.isl, &mut Parameterizer::none())?;
                let ends = if live_in { rel.domain() } else { rel.range() }.map_err(e())?;
                let at_ends = t_of(theta)?.intersect_domain(ends).map_err(e())?;
                let crossed = if live_in {
                    t_of(&at_writes)?.lex_lt_union_map(at_ends)
                } else {
                    at_ends.lex_lt_union_map(t_of(&at_writes)?)
                }
                .map_err(e())?;
                if !empty(&crossed)? {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// Whether the statements inside the outermost loop of `band` run inside all of its loops.
fn perfect(sched: &Sched, band: &[usize]) -> bool {
    inside(sched, band[0])
        .iter()
        .all(|&(s, _)| band.iter().all(|&l| sched.row_of(s, l).is_some()))
}

/// Before an interchange or permutation of an imperfect nest: the outermost of the loops
/// (in the statements inside all of them) is distributed, so that the code before and after
/// the inner loops forms nests of its own, before and after the permuted one, as the program
/// orders it (what the interchange advice does). Returns whether it distributed.
fn distribute(sched: &mut Sched, loops: &[usize]) -> bool {
    let full: Vec<usize> = (0..sched.rows.len())
        .filter(|&s| loops.iter().all(|&l| sched.row_of(s, l).is_some()))
        .collect();
    let Some(&first) = full.first() else {
        return false;
    };
    let Some(outer) = loops
        .iter()
        .copied()
        .min_by_key(|&l| sched.row_of(first, l).unwrap_or(usize::MAX))
    else {
        return false;
    };
    if perfect(
        sched,
        &[outer].iter().chain(loops).copied().collect::<Vec<_>>(),
    ) {
        return false;
    }
    split(sched, outer).is_ok()
}

/// The verdict once the storage needs are known.
fn settle(o: &mut Outcome) {
    let was_fixable = o.legal || o.legal_after.is_some();
    o.legal = o.legal && o.storage_needs.is_empty() && o.storage_blocked.is_none();
    if o.legal {
        return;
    }
    o.legal_after = match (was_fixable, &o.storage_blocked) {
        (true, None) => {
            let mut needs = o.legal_after.take().unwrap_or_default();
            needs.extend(o.storage_needs.iter().cloned());
            needs.sort();
            needs.dedup();
            Some(needs)
        }
        _ => None,
    };
}

/// The verdict from its parts.
fn outcome(
    cx: &Ctx<'_>,
    schedule: String,
    collision: Option<Collision>,
    violations: Vec<Violation>,
    claims: Vec<Claim>,
) -> Outcome {
    let legal = collision.is_none() && violations.is_empty() && claims.iter().all(|c| c.holds);
    let fixable = collision.is_none()
        && violations.iter().all(|v| v.fix.is_some())
        && claims.iter().all(|c| c.holds || c.why.is_none());
    let legal_after = (!legal && fixable).then(|| {
        let mut needs: Vec<Requirement> = violations.iter().filter_map(|v| v.fix.clone()).collect();
        needs.extend(claims.iter().flat_map(|c| c.needs.iter().cloned()));
        needs.sort();
        needs.dedup();
        needs
    });
    Outcome {
        legal,
        schedule,
        collision,
        violations,
        claims,
        dependences: cx.binding().len(),
        renamable: cx.region.dependences.len() - cx.binding().len(),
        storage_needs: Vec::new(),
        storage_blocked: None,
        legal_after,
    }
}

/// Interchange: the rows of the two loops swap in every statement inside both.
fn swap(sched: &mut Sched, a: usize, b: usize) -> Result<(), String> {
    if sched.class[a] == sched.class[b] {
        return Err("interchanging a loop with itself".into());
    }
    let mut any = false;
    for s in 0..sched.rows.len() {
        if let (Some(ra), Some(rb)) = (sched.row_of(s, a), sched.row_of(s, b)) {
            sched.rows[s].swap(ra, rb);
            any = true;
        }
    }
    if any {
        Ok(())
    } else {
        Err("no statement runs inside both loops: they are not nested".into())
    }
}

/// Permutation: for every statement inside all of them, the rows
/// they hold are refilled in the new order; statements inside only some keep theirs.
fn permute(sched: &mut Sched, order: &[usize]) -> Result<(), String> {
    let distinct: BTreeSet<usize> = order.iter().map(|&l| sched.class[l]).collect();
    if distinct.len() != order.len() {
        return Err("a loop is named twice".into());
    }
    let mut any = false;
    for s in 0..sched.rows.len() {
        let at: Option<Vec<usize>> = order.iter().map(|&l| sched.row_of(s, l)).collect();
        let Some(at) = at else { continue };
        any = true;
        let mut slots = at.clone();
        slots.sort_unstable();
        let taken: Vec<Row> = at.iter().map(|&r| sched.rows[s][r].clone()).collect();
        for (slot, row) in slots.into_iter().zip(taken) {
            sched.rows[s][slot] = row;
        }
    }
    if any {
        Ok(())
    } else {
        Err("no statement runs inside all of these loops: they are not nested".into())
    }
}

/// Rewrites the row of loop `l` in every statement inside it.
fn each_row(sched: &mut Sched, l: usize, f: impl Fn(&str) -> String) -> Result<(), String> {
    let mut any = false;
    for s in 0..sched.rows.len() {
        if let Some(r) = sched.row_of(s, l) {
            let e = sched.expr(s, r);
            *e = f(e);
            any = true;
        }
    }
    if any {
        Ok(())
    } else {
        Err("the loop holds no statement".into())
    }
}

/// `shift A N`: the statements of loop A itself (not those of a loop fused into it, so that
/// a fused loop can be aligned) run N iterations later.
fn shift(sched: &mut Sched, a: usize, by: i64) -> Result<(), String> {
    let mut any = false;
    for rows in sched.rows.iter_mut() {
        for r in rows.iter_mut() {
            if let Row::Loop {
                expr,
                tag,
                point: false,
            } = r
            {
                if *tag == a {
                    let sign = if by >= 0 { '+' } else { '-' };
                    *expr = format!("{} {sign} {}", operand(expr), by.unsigned_abs());
                    any = true;
                }
            }
        }
    }
    if any {
        Ok(())
    } else {
        Err("the loop holds no statement".into())
    }
}

fn skew(sched: &mut Sched, outer: usize, inner: usize, factor: i64) -> Result<(), String> {
    if sched.class[outer] == sched.class[inner] {
        return Err("skewing a loop by itself".into());
    }
    let mut any = false;
    for s in 0..sched.rows.len() {
        if let (Some(a), Some(b)) = (sched.row_of(s, outer), sched.row_of(s, inner)) {
            let by = sched.expr(s, a).clone();
            let e = sched.expr(s, b);
            // isl takes a constant factor, not a parenthesised one.
            let times = match factor.unsigned_abs() {
                1 => String::new(),
                f => format!("{f}*"),
            };
            let sign = if factor >= 0 { '+' } else { '-' };
            *e = format!("{} {sign} {times}{}", operand(e), operand(&by));
            any = true;
        }
    }
    if any {
        Ok(())
    } else {
        Err("no statement runs inside both loops: they are not nested".into())
    }
}

/// `e` as an operand of a sum: in parentheses unless it is one name or number.
fn operand(e: &str) -> String {
    if e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        e.to_string()
    } else {
        format!("({e})")
    }
}

/// Statements inside loop `l`, with the row standing for it.
fn inside(sched: &Sched, l: usize) -> Vec<(usize, usize)> {
    (0..sched.rows.len())
        .filter_map(|s| sched.row_of(s, l).map(|r| (s, r)))
        .collect()
}

/// `fuse A B`: B's statements join A's loop, after A's body, with B's iteration numbers
/// aligned to A's.
fn fuse(sched: &mut Sched, a: usize, b: usize) -> Result<(), String> {
    let (ia, ib) = (inside(sched, a), inside(sched, b));
    if ia.is_empty() || ib.is_empty() {
        return Err("a loop holds no statement".into());
    }
    if sched.class[a] == sched.class[b] {
        return Err("the loops are already one loop".into());
    }
    let level = ia[0].1;
    if ia.iter().chain(&ib).any(|&(_, r)| r != level) {
        return Err("the loops are not siblings (they sit at different depths)".into());
    }
    // Siblings: the same rows before the loop's position row.
    let prefix = |s: usize| sched.rows[s][..level - 1].to_vec();
    let first = prefix(ia[0].0);
    if ia.iter().chain(&ib).any(|&(s, _)| prefix(s) != first)
        || ia.iter().any(|&(s, _)| ib.iter().any(|&(t, _)| s == t))
    {
        return Err("the loops are not siblings of one parent".into());
    }
    let konst = |sched: &Sched, s: usize, r: usize| match sched.rows[s].get(r) {
        Some(Row::Const(c)) => *c,
        _ => 0,
    };
    let pos_a = konst(sched, ia[0].0, level - 1);
    let after = ia
        .iter()
        .map(|&(s, _)| konst(sched, s, level + 1))
        .max()
        .unwrap_or(0)
        + 1;
    for &(s, _) in &ib {
        sched.rows[s][level - 1] = Row::Const(pos_a);
        let inner = konst(sched, s, level + 1);
        sched.rows[s][level + 1] = Row::Const(inner + after);
    }
    let (ca, cb) = (sched.class[a], sched.class[b]);
    for c in sched.class.iter_mut() {
        if *c == cb {
            *c = ca;
        }
    }
    Ok(())
}

/// `split A`: one loop A per part of its body (loop distribution), in the body's order.
fn split(sched: &mut Sched, a: usize) -> Result<(), String> {
    let ia = inside(sched, a);
    let Some(&(_, level)) = ia.first() else {
        return Err("the loop holds no statement".into());
    };
    if ia.iter().any(|&(_, r)| r != level) {
        return Err("the loop sits at different depths in different statements".into());
    }
    // Positions at the loop's level are scaled so that each part of A's body fits between A
    // and its next sibling.
    let scale = sched
        .rows
        .iter()
        .flatten()
        .filter_map(|r| match r {
            Row::Const(c) => Some(*c),
            Row::Loop { .. } => None,
        })
        .max()
        .unwrap_or(0)
        + 1;
    for rows in sched.rows.iter_mut() {
        if let Some(Row::Const(c)) = rows.get_mut(level - 1) {
            *c *= scale;
        }
    }
    for &(s, _) in &ia {
        let part = match sched.rows[s].get(level + 1) {
            Some(Row::Const(c)) => *c,
            _ => 0,
        };
        if let Some(Row::Const(c)) = sched.rows[s].get_mut(level - 1) {
            *c += part;
        }
    }
    Ok(())
}

/// For `tile`: per statement inside the outermost loop of the band, the rows of the band's
/// loops it runs in (a prefix of the band, consecutive loop rows).
fn band_rows(sched: &Sched, band: &[usize]) -> Result<Vec<(usize, Vec<usize>)>, String> {
    let mut out = Vec::new();
    for (s, first) in inside(sched, band[0]) {
        let mut rows = vec![first];
        for &l in &band[1..] {
            match sched.row_of(s, l) {
                Some(r) if Some(&r) == rows.last().map(|l| l + 2).as_ref() => rows.push(r),
                Some(_) => {
                    return Err(
                        "the loops of a tile band must be nested directly, outermost first".into(),
                    )
                }
                None => break,
            }
        }
        out.push((s, rows));
    }
    if out.iter().all(|(_, r)| r.len() < band.len()) {
        return Err("no statement runs inside all of the band's loops: they are not nested".into());
    }
    Ok(out)
}

/// Dependences with a negative distance along a loop of the band, between instances with the
/// same iterations of the loops around it: tiling would run their sink's tile first.
fn not_permutable(
    cx: &Ctx<'_>,
    sched: &Sched,
    band: &[(usize, Vec<usize>)],
    step: usize,
) -> Result<Vec<Violation>, Error> {
    let Some(start) = band.iter().map(|(_, r)| r[0]).min() else {
        return Ok(Vec::new());
    };
    let rows: BTreeSet<usize> = band.iter().flat_map(|(_, r)| r.iter().copied()).collect();
    let n = cx.n;
    let xs: Vec<String> = (0..n).map(|i| format!("x{i}")).collect();
    let ys: Vec<String> = (0..n).map(|i| format!("y{i}")).collect();
    let mut cond: Vec<String> = (0..start).map(|q| format!("x{q} = y{q}")).collect();
    let neg: Vec<String> = rows.iter().map(|q| format!("y{q} < x{q}")).collect();
    cond.push(format!("({})", neg.join(" or ")));
    let rel = format!(
        "{{ [{}] -> [{}] : {} }}",
        xs.join(", "),
        ys.join(", "),
        cond.join(" and ")
    );
    let stmts: BTreeSet<&str> = band
        .iter()
        .map(|(s, _)| cx.region.statements[*s].name.as_str())
        .collect();
    let within: Vec<usize> = (0..cx.region.dependences.len())
        .filter(|&i| {
            let d = &cx.region.dependences[i];
            stmts.contains(d.source.as_str()) && stmts.contains(d.sink.as_str()) && d.binding()
        })
        .collect();
    let theta = sched.text(cx.region);
    let theta_m = union_map(cx.isl, &theta)?;
    let rel_m = union_map(cx.isl, &rel)?;
    let mut out = Vec::new();
    for i in within {
        let Some(d) = cx.deps_map(&[i])? else {
            continue;
        };
        let bad = instance_relation(&theta_m, &rel_m)?;
        let hit = d.intersect(bad).map_err(islx::isl("intersecting"))?;
        if !empty(&hit)? {
            out.push(violation(cx, &theta_m, i, step, Some(hit))?);
        }
    }
    Ok(out)
}

/// `θ⁻¹ ∘ rel ∘ θ` restricted to the schedule's statements: instance pairs whose times `rel`
/// relates.
fn instance_relation(theta: &UnionMap, rel: &UnionMap) -> Result<UnionMap, Error> {
    let e = || islx::isl("relating instances through the schedule");
    theta
        .copy()
        .and_then(|t| t.apply_range(rel.copy()?))
        .and_then(|t| t.apply_range(theta.copy()?.reverse()?))
        .map_err(e())
}

/// Replaces the rows of a band's loops by tile rows, then the point rows as they were.
fn tile(sched: &mut Sched, band: &[usize], size: i64) {
    for (s, rows) in band_rows(sched, band).unwrap_or_default() {
        let first = rows[0];
        let mut tiles = Vec::new();
        for (k, &l) in band.iter().enumerate() {
            if k > 0 {
                tiles.push(Row::Const(0));
            }
            tiles.push(match rows.get(k) {
                Some(&r) => match &sched.rows[s][r] {
                    Row::Loop { expr, .. } => Row::Loop {
                        expr: format!("floor(({expr})/{size})"),
                        tag: l,
                        point: false,
                    },
                    Row::Const(_) => Row::Const(0),
                },
                // Outside this loop of the band: in its first tile.
                None => Row::Const(0),
            });
        }
        tiles.push(Row::Const(0));
        for &r in &rows {
            if let Row::Loop { point, .. } = &mut sched.rows[s][r] {
                *point = true;
            }
        }
        let rest = sched.rows[s].split_off(first);
        sched.rows[s].extend(tiles);
        sched.rows[s].extend(rest);
    }
}

/// A `parallel` or `vectorize` claim on loop `l` at step `step`.
fn claim(
    cx: &Ctx<'_>,
    sched: &Sched,
    l: usize,
    step: usize,
) -> Result<(Claim, Vec<Violation>), Error> {
    let ia = inside(sched, l);
    let Some(&(_, row)) = ia.first() else {
        return Err(usage("the loop holds no statement"));
    };
    if ia.iter().any(|&(_, r)| r != row) {
        return Err(usage(
            "the loop sits at different depths in different statements after the preceding operations",
        ));
    }
    let theta = sched.text(cx.region);
    let fused = sched.class.iter().filter(|&&c| c == sched.class[l]).count() > 1;
    let lvl = (row - 1) / 2;
    let mut claim = Claim {
        step,
        loop_id: cx.region.loops[l].id.clone(),
        holds: true,
        needs: Vec::new(),
        why: None,
    };
    // Dependences carried at the loop's row: equal times before it, different at it.
    let rel_m = cx.relation(&crate::legality::carried_at(cx.n, lvl))?;
    let theta_m = union_map(cx.isl, &theta)?;
    let mut broken = Vec::new();
    if fused {
        // Statements of several source loops: no storage question is asked of them (the
        // model's are per loop); every carried dependence is a violation.
        let between = instance_relation(&theta_m, &rel_m)?;
        let members: BTreeSet<&str> = ia
            .iter()
            .map(|&(s, _)| cx.region.statements[s].name.as_str())
            .collect();
        for i in 0..cx.region.dependences.len() {
            let dep = &cx.region.dependences[i];
            // Between statements of the fused loop; registers are private to each thread.
            if !members.contains(dep.source.as_str())
                || !members.contains(dep.sink.as_str())
                || (dep.kind != DepKind::Flow && matches!(dep.storage, Storage::Register { .. }))
            {
                continue;
            }
            let Some(d) = cx.deps_map(&[i])? else {
                continue;
            };
            let bad = between.copy().map_err(islx::isl("copying"))?;
            let hit = d.intersect(bad).map_err(islx::isl("intersecting"))?;
            if !empty(&hit)? {
                broken.push(violation(cx, &theta_m, i, step, Some(hit))?);
            }
        }
        if let Some(v) = broken.first() {
            claim.holds = false;
            if broken.iter().all(|v| v.fix.is_some()) {
                claim.needs = broken.iter().filter_map(|v| v.fix.clone()).collect();
            } else {
                claim.why = Some(format!("it carries {}", cx.describe_dep(v.dep)));
            }
        }
        return Ok((claim, broken));
    }
    match cx.parallel(l, lvl, &theta_m, &BTreeSet::new())? {
        Verdict::Legal(needs) if needs.is_empty() => {}
        Verdict::Legal(needs) => {
            claim.holds = false;
            claim.needs = needs;
        }
        Verdict::Blocked(why) => {
            claim.holds = false;
            claim.why = Some(why);
            // The carried dependences, with a pair of instances each.
            let between = instance_relation(&theta_m, &rel_m)?;
            for i in cx.deps_within(l) {
                let Some(d) = cx.deps_map(&[i])? else {
                    continue;
                };
                let bad = between.copy().map_err(islx::isl("copying"))?;
                let hit = d.intersect(bad).map_err(islx::isl("intersecting"))?;
                let kind = cx.region.dependences[i].kind;
                let through = &cx.region.dependences[i].storage;
                // Only what no storage change removes, which is what blocks the claim.
                if !empty(&hit)? && (kind == DepKind::Flow || !through.renamable()) {
                    broken.push(violation(cx, &theta_m, i, step, Some(hit))?);
                }
            }
        }
    }
    Ok((claim, broken))
}

/// Two instances a schedule runs at one time, if any. A schedule one-to-one on all integer
/// points of the statements' spaces is one-to-one on their domains, and isl answers that
/// cheaply; only otherwise are the domains themselves (unions of many pieces when the trace
/// folded them inexactly) asked, at a cost of seconds on large regions.
fn collision(cx: &Ctx<'_>, theta: &UnionMap) -> Result<Option<Collision>, Error> {
    let e = || islx::isl("testing whether the schedule is one-to-one");
    let domain = cx.domain()?;
    let whole = theta
        .copy()
        .and_then(|t| t.intersect_domain(domain.copy()?.universe()?))
        .map_err(e())?;
    if whole.is_injective().map_err(e())? {
        return Ok(None);
    }
    let on = theta
        .copy()
        .and_then(|t| t.intersect_domain(domain.copy()?))
        .map_err(e())?;
    if on.is_injective().map_err(e())? {
        return Ok(None);
    }
    let same = on
        .copy()
        .and_then(|t| t.apply_range(on.copy()?.reverse()?))
        .and_then(|m| m.subtract(domain.identity()?))
        .map_err(e())?;
    if empty(&same)? {
        return Ok(None);
    }
    let sample = same.sample().map_err(e())?;
    Ok(crate::poly::sampled_pair(sample))
}

/// The schedule the user gave, checked to cover every statement in one time space.
fn given_schedule(cx: &Ctx<'_>, map: &str) -> Result<String, Error> {
    let bad = |why: String| Error::Usage(format!("the schedule {why}"));
    let m = union_map(cx.isl, map).map_err(|_| {
        bad("is not an isl map (write it as { S0[i, j] -> [j, i]; S1[i] -> [i, 0] })".into())
    })?;
    let e = || islx::isl("reading the given schedule");
    let spaces = m
        .copy()
        .and_then(|m| m.range())
        .and_then(|r| r.universe())
        .map_err(e())?;
    if spaces.n_set().map_err(e())? > 1 {
        return Err(bad(
            "maps statements to times of different lengths or names: give every statement a time of the same length".into(),
        ));
    }
    let domain = cx.domain()?;
    let missing = domain
        .subtract(m.copy().and_then(|m| m.domain()).map_err(e())?)
        .map_err(e())?;
    if !missing.is_empty().map_err(e())? {
        let names: BTreeSet<String> = crate::poly::tuple_names(&missing).into_iter().collect();
        return Err(bad(format!(
            "leaves instances of {} unscheduled (every statement of the region needs a time)",
            names.into_iter().collect::<Vec<_>>().join(", ")
        )));
    }
    islx::text(&m)
}

/// Describes dependence `dep` broken at `step`, with a pair of instances from `hit` (source →
/// sink pairs it breaks), or from the pairs the schedule `theta` runs sink first.
fn violation(
    cx: &Ctx<'_>,
    theta: &UnionMap,
    dep: usize,
    step: usize,
    hit: Option<UnionMap>,
) -> Result<Violation, Error> {
    let hit = match hit {
        Some(h) => h,
        None => {
            // Pairs whose sink runs no later than their source.
            let e = || islx::isl("ordering times");
            let spaces = theta
                .copy()
                .and_then(UnionMap::range)
                .and_then(|r| r.universe())
                .map_err(e())?;
            let not_later = spaces
                .copy()
                .and_then(|u| u.lex_ge_union_set(spaces))
                .map_err(e())?;
            let pairs = instance_relation(theta, &not_later)?;
            match cx.deps_map(&[dep])? {
                Some(d) => d.intersect(pairs).map_err(islx::isl("intersecting"))?,
                None => return Err(Error::Isl("a violated dependence without pairs".into())),
            }
        }
    };
    let pair = if empty(&hit)? {
        None
    } else {
        let s = hit
            .sample()
            .map_err(islx::isl("sampling a violated pair"))?;
        if std::env::var_os("POLYPROF_DEBUG_CHECK").is_some() {
            eprintln!("sample {}", islx::text(&s)?);
        }
        crate::poly::sampled_pair(s)
    };
    let d = &cx.region.dependences[dep];
    Ok(Violation {
        step,
        dep,
        kind: d.kind,
        storage: d.storage.describe(),
        source: d.source.clone(),
        source_line: line_of(cx.region, &d.source),
        sink: d.sink.clone(),
        sink_line: line_of(cx.region, &d.sink),
        pair,
        fix: fix(cx, dep),
    })
}

/// The storage change that removes dependence `dep`, if one does: none for a flow dependence
/// or library state; expansion for a register or scalar; for an array's anti dependence,
/// reading a copy made before the region, when the reads concerned only ever see values from
/// before it.
fn fix(cx: &Ctx<'_>, dep: usize) -> Option<Requirement> {
    let deps = &cx.region.dependences;
    let d = &deps[dep];
    if d.kind == DepKind::Flow {
        return None;
    }
    match &d.storage {
        Storage::Effect { .. } => None,
        Storage::Register { .. } | Storage::Scalar { .. } => Some(Requirement {
            change: Change::Expand,
            storage: d.storage.describe(),
            lines: Vec::new(),
            step: None,
        }),
        Storage::Array { .. } if d.kind == DepKind::Anti => {
            let root = d.storage.root();
            let fed = deps
                .iter()
                .any(|f| f.kind == DepKind::Flow && f.storage.root() == root && f.sink == d.source);
            (!fed).then(|| Requirement {
                change: Change::CopyIn,
                storage: d.storage.describe(),
                lines: vec![line_of(cx.region, &d.source)],
                step: None,
            })
        }
        Storage::Array { .. } => None,
    }
}

/// An instance for a person: `S3 (k.c:12) at L4=0, L5=2` (iteration numbers from 0).
pub fn describe_instance(region: &Region, inst: &Instance) -> String {
    let Some(s) = region.statements.iter().find(|s| s.name == inst.0) else {
        return format!("{}{:?}", inst.0, inst.1);
    };
    let at: Vec<String> = s
        .loops
        .iter()
        .zip(&inst.1)
        .map(|(&l, v)| format!("{}={v}", region.loops[l].id))
        .collect();
    if at.is_empty() {
        format!("{} ({})", s.name, line_of(region, &s.name))
    } else {
        format!(
            "{} ({}) at {}",
            s.name,
            line_of(region, &s.name),
            at.join(", ")
        )
    }
}

/// The source line of statement `name` (`k.c:12`).
pub fn statement_line(region: &Region, name: &str) -> String {
    line_of(region, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_parse() {
        let s = parse("interchange L5 L6; tile L4 L5 32 # a comment\nparallel k.c:20").unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].op, Op::Interchange("L5".into(), "L6".into()));
        assert_eq!(
            s[1].op,
            Op::Tile {
                loops: vec!["L4".into(), "L5".into()],
                size: 32
            }
        );
        assert_eq!(s[2].op, Op::Parallel("k.c:20".into()));
        let s = parse("schedule \"{ S0[i, j] -> [j, i]; S1[i] -> [i, 0] }\"").unwrap();
        assert_eq!(
            s[0].op,
            Op::Schedule("{ S0[i, j] -> [j, i]; S1[i] -> [i, 0] }".into())
        );
    }

    #[test]
    fn malformed_operations_say_why() {
        for bad in [
            "interchange L5",
            "reverse",
            "skew L1 L2 x",
            "tile L1 L2 0",
            "tile 32",
            "twist L1",
            "",
            "# nothing",
            "schedule \"{ S0[i] -> [i] }\"; reverse L1",
            "reverse 12",
        ] {
            match parse(bad) {
                Err(Error::Usage(m)) => assert!(!m.is_empty() && !m.contains('\n'), "{m}"),
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn sampled_pairs_read_back() {
        let isl = Context::alloc();
        let sample = |text: &str| {
            let m = union_map(&isl, text).expect("a map");
            crate::poly::sampled_pair(m.sample().expect("a point"))
        };
        assert_eq!(
            sample("{ S3[1, 2] -> S0[2, 0] }"),
            Some((("S3".into(), vec![1, 2]), ("S0".into(), vec![2, 0])))
        );
        assert_eq!(
            sample("{ S5[i, j] -> S0[k, l] : i = 0 and j = 2 and k = 1 and l = i + j - 2 }"),
            Some((("S5".into(), vec![0, 2]), ("S0".into(), vec![1, 0])))
        );
        assert_eq!(
            sample("{ S1[] -> S2[4] }"),
            Some((("S1".into(), vec![]), ("S2".into(), vec![4])))
        );
    }
}
