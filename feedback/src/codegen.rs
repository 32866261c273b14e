//! Before and after as C-like code: isl's AST generator scans the region's statements in the
//! order of a schedule (the program's own, then the advised one: the interchange's order, tile
//! and point loops, or isl's skewed or fused schedule), and this module prints the AST with
//! each loop named by its source line and the advised `#pragma`s, each statement by its name
//! in report.json and its source line.
//!
//! isl-rs has no bindings for `isl_ast_build`: the functions used are declared here (isl is
//! linked statically by isl-rs), as is `isl_ast_node_get_type`, whose isl-rs wrapper numbers
//! the node types one off from isl's `enum isl_ast_node_type` (and panics on user nodes).

use crate::analyze::layout;
use crate::composed::{
    compose, directive, drop_order, in_new_order, notes, recommendation, Composed,
};
use crate::input::Region;
use crate::islx::{isl, union_map};
use crate::legality::Ctx;
use crate::{Error, Feedback};
use isl_rs::{ASTExpr, ASTNode, Context, Set, UnionMap};
use reports::model::Recommendation;
use std::collections::BTreeMap;
use std::fmt::Write as _;

extern "C" {
    fn isl_ast_node_get_type(node: usize) -> i32;
    fn isl_ast_build_from_context(set: usize) -> usize;
    fn isl_ast_build_node_from_schedule_map(build: usize, schedule: usize) -> usize;
    fn isl_ast_build_free(build: usize) -> usize;
}

/// Lines of generated code kept per schedule: a region whose domains split into many pieces
/// would print pages no one reads.
const MAX_LINES: usize = 80;

/// What one output dimension of a schedule means for a statement.
#[derive(Clone, Debug, PartialEq)]
enum Role {
    /// A constant: the statement's place among its siblings (no loop).
    Position(u32),
    /// Iterates the statement's dimension `d`.
    Dim(usize),
    /// Iterates the tiles of dimension `d`, `size` iterations each.
    Tile(usize, u32),
    /// Anything else isl computed (a skew), as isl prints it.
    Other,
}

/// A schedule to generate code for: per statement, the role of each output dimension, or a
/// map isl computed (with its parameters fixed by `params`).
enum Plan {
    Rows(BTreeMap<String, Vec<Role>>),
    Isl {
        map: String,
        params: crate::params::Parameterizer,
    },
}

/// What the printed loops are marked with.
#[derive(Default)]
struct Marks {
    /// Region loops run in parallel (their tile loops when tiled), with their directives:
    /// one per nest.
    parallel: Vec<(usize, String)>,
    /// Region loop vectorized, with its directive.
    simd: Option<(usize, String)>,
}

/// The region's code before and after the advised transformations, or why there is none,
/// and the advice composed into one recommendation once checked as one schedule.
pub(crate) fn region_code(
    region: &Region,
    fb: &Feedback,
    isl: &Context,
) -> Result<(String, String, Option<Recommendation>), Error> {
    let chain = hottest_chain(region);
    let before = Plan::Rows(rows(region, &[], &[], None));
    let before = generate(isl, region, &before, &Marks::default())?;
    let mut composed = compose(fb, region);
    let mut left_out = std::mem::take(&mut composed.left_out);
    let after = match after_plan(region, fb, &mut composed, &mut left_out, &chain, isl) {
        Ok(Ok((plan, marks))) => {
            let mut text = String::new();
            for n in notes(&composed) {
                let _ = writeln!(text, "{n}");
            }
            for why in &left_out {
                let _ = writeln!(text, "// Not shown: {why}.");
            }
            text + &generate(isl, region, &plan, &marks)?
        }
        Ok(Err(why)) => {
            left_out.push(why.clone());
            drop_order(&mut composed);
            composed.tile = None;
            composed.isl = None;
            format!("// {why}\n")
        }
        // Code not checked is not shown: it could break what the advice keeps.
        Err(e) => {
            drop_order(&mut composed);
            composed.tile = None;
            composed.isl = None;
            format!(
                "// No code after the advice: isl stopped while checking its order against the dependences ({e}).\n"
            )
        }
    };
    Ok((
        before,
        after,
        recommendation(fb, region.language, &composed, left_out),
    ))
}

/// The loops of the statement with the most executions, outermost first.
fn hottest_chain(region: &Region) -> Vec<usize> {
    region
        .statements
        .iter()
        .max_by_key(|s| s.ops)
        .map(|s| s.loops.clone())
        .unwrap_or_default()
}

/// A schedule to generate and the loops it marks.
type Advised = (Plan, Marks);

/// The schedule of the composed advice, with the loops to mark and notes on what it leaves
/// out; or why it cannot be shown (its order breaks a dependence: the code would not be the
/// advice's). Parts the check refutes together are dropped from `c`, and said in `left_out`.
fn after_plan(
    region: &Region,
    fb: &Feedback,
    c: &mut Composed<'_>,
    left_out: &mut Vec<String>,
    chain: &[usize],
    isl: &Context,
) -> Result<Result<Advised, String>, Error> {
    let loop_of = |id: &String| region.loops.iter().position(|l| &l.id == id);
    // Rust has no directives: its marks are comments, the parallel one rayon's form.
    let rust = region.language == symbols::Language::Rust;
    let marks_of = |c: &Composed<'_>| Marks {
        parallel: c
            .parallel
            .iter()
            .chain(&c.more_parallel)
            .filter_map(|s| {
                let l = s.loops.first().and_then(loop_of)?;
                let mark = if rust {
                    let form = crate::analyze::rayon::quoted_form(&s.text);
                    format!("// rayon: {}", form.unwrap_or("in parallel"))
                } else {
                    directive(s, "#pragma omp parallel for")
                };
                Some((l, mark))
            })
            .collect(),
        simd: c.simd.and_then(|s| {
            let l = s.loops.first().and_then(loop_of)?;
            let mark = if rust {
                "// vectorize: no directive in Rust, rustc does it at -O".to_string()
            } else if region.language == symbols::Language::Fortran {
                directive(s, "!$omp simd")
            } else {
                directive(s, "#pragma omp simd")
            };
            Some((l, mark))
        }),
    };
    if let Some(head) = c.isl {
        // isl's schedule is the skew's (fusion's, distribution's) own code.
        let Some(s) = &fb.isl_schedule else {
            return Ok(Err(format!(
                "No code for the {}: isl gave no schedule to generate it from.",
                head.kind.as_str()
            )));
        };
        let map = if c.tile.is_some() { &s.tiled } else { &s.map };
        // The parallel loop was found in the program's order: it stays parallel where isl
        // keeps it behind the same outer loops, unskewed.
        let roles = roles_of_map(&union_map(isl, map)?);
        let keep = |p: &&crate::Suggestion| {
            p.loops
                .first()
                .and_then(loop_of)
                .is_some_and(|l| same_outer_loops(region, &roles, l))
        };
        for p in c
            .parallel
            .iter()
            .chain(&c.more_parallel)
            .filter(|p| !keep(p))
        {
            left_out.push(format!(
                "the parallel loop {}, which isl's schedule moves",
                p.loops.first().map_or("", String::as_str)
            ));
        }
        c.parallel = c.parallel.filter(keep);
        c.more_parallel.retain(keep);
        let plan = Plan::Isl {
            map: map.clone(),
            params: s.params.clone(),
        };
        return Ok(Ok((plan, marks_of(c))));
    }
    let order: Vec<usize> = c
        .order
        .and_then(|s| s.loops.iter().map(loop_of).collect())
        .unwrap_or_else(|| chain.to_vec());
    let band: Option<(Vec<usize>, u32)> = c.tile.map(|s| {
        (
            s.loops.iter().filter_map(loop_of).collect(),
            s.sizes.first().copied().unwrap_or(32),
        )
    });
    let band = band.as_ref().map(|(l, t)| (l.as_slice(), *t));
    // The order and tiling checked against the dependences no storage change removes (the
    // program's own order needs no check).
    if order == chain && band.is_none() {
        return Ok(Ok((
            Plan::Rows(rows(region, chain, &order, None)),
            marks_of(c),
        )));
    }
    let cx = Ctx::new(region, isl, crate::params::Parameterizer::none())?;
    let binding = cx.binding();
    if order != chain {
        // The parallel and vectorized loops were each checked in the program's order (or in
        // the interchanged one): in the composed order they must still carry nothing.
        let flat = rows(region, chain, &order, None);
        let untiled = union_map(isl, &map_text(region, &flat))?;
        let carried = |s: &crate::Suggestion| -> Result<bool, Error> {
            let Some(l) = s.loops.first().and_then(loop_of) else {
                return Ok(true);
            };
            let Some(lvl) = level_of(region, &flat, l) else {
                return Ok(true);
            };
            let verdict = cx.parallel(l, lvl, &untiled, &Default::default())?;
            Ok(matches!(verdict, crate::legality::Verdict::Blocked(_)))
        };
        let mut broken = Vec::new();
        for s in c.parallel.iter().chain(&c.more_parallel).chain(&c.simd) {
            // Found in the interchanged order: checked there already.
            if !in_new_order(s) && carried(s)? {
                broken.push(*s);
            }
        }
        if !broken.is_empty() {
            // The order is the one to give up: the loop it would break ranks higher, or is
            // what the order was for.
            let names: Vec<String> = broken
                .iter()
                .map(|s| s.loops.first().cloned().unwrap_or_default())
                .collect();
            left_out.push(format!(
                "the loop order, in which loop {} would carry a dependence",
                names.join(" and ")
            ));
            drop_order(c);
            return after_plan(region, fb, c, left_out, chain, isl);
        }
    }
    let mut why = String::new();
    for band in [band, None] {
        let rows = rows(region, chain, &order, band);
        let theta = union_map(isl, &map_text(region, &rows))?;
        match cx.first_violated(&binding, &theta)? {
            None if why.is_empty() => return Ok(Ok((Plan::Rows(rows), marks_of(c)))),
            None => {
                left_out.push(format!("the tiling, which breaks {why}"));
                c.tile = None;
                return Ok(Ok((Plan::Rows(rows), marks_of(c))));
            }
            Some(i) if why.is_empty() => why = cx.describe_dep(i),
            Some(_) => {}
        }
        if band.is_none() {
            break;
        }
    }
    if c.order.is_some() {
        // The rest of the advice holds in the program's order.
        left_out.push(format!("the loop order, which breaks {why}"));
        drop_order(c);
        return after_plan(region, fb, c, left_out, chain, isl);
    }
    Ok(Err(format!(
        "The advice cannot be shown as code: its loop order breaks {why}."
    )))
}

/// The schedule level (loop position `2 lvl + 1` of the rows) at which every statement in
/// loop `l` runs it, or `None` when they differ.
fn level_of(region: &Region, rows: &BTreeMap<String, Vec<Role>>, l: usize) -> Option<usize> {
    let mut at = None;
    for s in &region.statements {
        let Some(d) = s.loops.iter().position(|&x| x == l) else {
            continue;
        };
        let k = rows.get(&s.name)?.iter().position(|r| r == &Role::Dim(d))?;
        let lvl = (k % 2 == 1).then_some(k / 2)?;
        if at.is_some_and(|a| a != lvl) {
            return None;
        }
        at = Some(lvl);
    }
    at
}

/// Whether every statement in loop `l` runs it, in `roles`, inside the loops around it in
/// the program and in their order, none of them skewed or tiled.
fn same_outer_loops(region: &Region, roles: &BTreeMap<String, Vec<Role>>, l: usize) -> bool {
    region
        .statements
        .iter()
        .filter_map(|s| Some((s, s.loops.iter().position(|&x| x == l)?)))
        .all(|(s, depth)| {
            let loops: Vec<&Role> = roles.get(&s.name).map_or(Vec::new(), |r| {
                r.iter()
                    .filter(|r| !matches!(r, Role::Position(_)))
                    .collect()
            });
            loops.len() > depth && (0..=depth).all(|d| loops[d] == &Role::Dim(d))
        })
}

/// Each statement's schedule rows once the statements running the whole `chain` follow
/// `order`, with the loops of `band` tiled: `[p0, i0, p1, i1, ..., pk]`, tile dimensions
/// inserted before the first tiled level.
fn rows(
    region: &Region,
    chain: &[usize],
    order: &[usize],
    band: Option<(&[usize], u32)>,
) -> BTreeMap<String, Vec<Role>> {
    let mut out = BTreeMap::new();
    // The band's loops in the advised order: every statement in the band gets one tile
    // dimension each, a constant 0 for a loop it does not run (gemm's `C[i][j] *= beta`,
    // outside the k loop, runs in the first k tile of its i tile, before the others).
    let band_order: Vec<usize> = band.map_or(Vec::new(), |(loops, _)| {
        order
            .iter()
            .copied()
            .filter(|l| loops.contains(l))
            .collect()
    });
    for (s, (positions, _, dims)) in region.statements.iter().zip(layout(region, chain, order)) {
        let tiled: Vec<usize> = match band {
            Some((loops, _)) => (0..dims.len())
                .filter(|&lvl| loops.contains(&s.loops[dims[lvl]]))
                .collect(),
            None => Vec::new(),
        };
        let contiguous = tiled.windows(2).all(|w| w[1] == w[0] + 1);
        let size = band.map_or(1, |b| b.1.max(1));
        // Its tiled loops in the band's order, padded where it lacks one; else its own.
        let in_band = |t: usize| band_order.iter().position(|&b| b == s.loops[dims[t]]);
        let padded = tiled.iter().all(|&t| in_band(t).is_some())
            && tiled.windows(2).all(|w| in_band(w[0]) < in_band(w[1]))
            && tiled.first().and_then(|&t| in_band(t)) == Some(0);
        let tiles: Vec<Role> = match padded {
            true => band_order
                .iter()
                .map(|&b| {
                    tiled
                        .iter()
                        .find(|&&t| s.loops[dims[t]] == b)
                        .map_or(Role::Position(0), |&t| Role::Tile(dims[t], size))
                })
                .collect(),
            false => tiled.iter().map(|&t| Role::Tile(dims[t], size)).collect(),
        };
        let mut r = Vec::new();
        for (lvl, &d) in dims.iter().enumerate() {
            r.push(Role::Position(positions.get(lvl).copied().unwrap_or(0)));
            if contiguous && tiled.first() == Some(&lvl) {
                for (j, t) in tiles.iter().enumerate() {
                    if j > 0 {
                        r.push(Role::Position(0));
                    }
                    r.push(t.clone());
                }
                r.push(Role::Position(0));
            }
            r.push(Role::Dim(d));
        }
        r.push(Role::Position(
            positions.get(dims.len()).copied().unwrap_or(0),
        ));
        out.insert(s.name.clone(), r);
    }
    let n = out.values().map(Vec::len).max().unwrap_or(0);
    for r in out.values_mut() {
        r.resize(n, Role::Position(0));
    }
    out
}

/// The rows as an isl map.
fn map_text(region: &Region, rows: &BTreeMap<String, Vec<Role>>) -> String {
    let pieces: Vec<String> = region
        .statements
        .iter()
        .filter_map(|s| {
            let r = rows.get(&s.name)?;
            let vars: Vec<String> = (0..s.loops.len()).map(|d| format!("i{d}")).collect();
            let out: Vec<String> = r
                .iter()
                .map(|role| match role {
                    Role::Position(p) => p.to_string(),
                    Role::Dim(d) => format!("i{d}"),
                    Role::Tile(d, t) => format!("floor(i{d}/{t})"),
                    Role::Other => "0".to_string(),
                })
                .collect();
            Some(format!(
                "{}[{}] -> [{}]",
                s.name,
                vars.join(", "),
                out.join(", ")
            ))
        })
        .collect();
    format!("{{ {} }}", pieces.join("; "))
}

/// Roles read back from a map isl computed: a row following one dimension is that
/// dimension's loop; a constant row a position; anything else a skew or a tile.
fn roles_of_map(map: &UnionMap) -> BTreeMap<String, Vec<Role>> {
    crate::poly::schedule_rows(map)
        .into_iter()
        .map(|(name, rows)| {
            let roles = rows
                .iter()
                .map(|row| match row {
                    Some(a) if a.dims_used() == 0 => Role::Position(a.constant.max(0) as u32),
                    Some(a) => match a.single_dim() {
                        Some(d) => Role::Dim(d),
                        None => Role::Other,
                    },
                    None => Role::Other,
                })
                .collect();
            (name, roles)
        })
        .collect()
}

fn generate(ctx: &Context, region: &Region, plan: &Plan, marks: &Marks) -> Result<String, Error> {
    // Without parameters: the code shows the program's own bounds.
    let dom = crate::poly::union_of_sets(ctx, region.statements.iter().map(|s| &s.domain))?;
    let (schedule, roles) = match plan {
        Plan::Rows(rows) => (union_map(ctx, &map_text(region, rows))?, rows.clone()),
        Plan::Isl { map, params } => {
            let mut m = union_map(ctx, map)?;
            let roles = roles_of_map(&m);
            if let Some(fixed) = params.fixed(ctx)? {
                m = m
                    .intersect_params(fixed)
                    .and_then(UnionMap::project_out_all_params)
                    .map_err(isl("fixing parameters"))?;
            }
            (m, roles)
        }
    };
    let schedule = schedule
        .intersect_domain(dom)
        .map_err(isl("restricting the schedule"))?;
    let node = build(ctx, schedule)?;
    let mut p = Printer {
        region,
        roles: &roles,
        marks,
        out: String::new(),
        lines: 0,
    };
    p.node(&node, 0)?;
    if p.lines > MAX_LINES {
        let _ = writeln!(p.out, "... ({} more lines)", p.lines - MAX_LINES);
    }
    Ok(p.out)
}

/// isl's AST for `schedule` (consumed), in a universe context.
fn build(ctx: &Context, schedule: UnionMap) -> Result<ASTNode, Error> {
    let mut context = Set::read_from_str(ctx, "{ : }").map_err(isl("reading the context"))?;
    let mut schedule = schedule;
    let (c, s) = (context.ptr, schedule.ptr);
    context.do_not_free_on_drop();
    schedule.do_not_free_on_drop();
    // SAFETY: both objects were valid and are handed over (`__isl_take`), as their wrappers
    // no longer free them; the build is freed here and the node is owned by the wrapper.
    let node = unsafe {
        let build = isl_ast_build_from_context(c);
        if build == 0 {
            // The schedule was not consumed: its wrapper frees it.
            drop(UnionMap {
                ptr: s,
                should_free_on_drop: true,
            });
            return Err(Error::Isl("creating an AST build".into()));
        }
        let node = isl_ast_build_node_from_schedule_map(build, s);
        isl_ast_build_free(build);
        node
    };
    if node == 0 {
        return Err(Error::Isl("generating code from a schedule".into()));
    }
    Ok(ASTNode {
        ptr: node,
        should_free_on_drop: true,
    })
}

/// The kinds of AST nodes, as isl numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    For,
    If,
    Block,
    Mark,
    User,
    Error,
}

fn kind(n: &ASTNode) -> Kind {
    // SAFETY: the node is valid for the wrapper's lifetime; the call only reads it.
    match unsafe { isl_ast_node_get_type(n.ptr) } {
        1 => Kind::For,
        2 => Kind::If,
        3 => Kind::Block,
        4 => Kind::Mark,
        5 => Kind::User,
        _ => Kind::Error,
    }
}

struct Printer<'a> {
    region: &'a Region,
    roles: &'a BTreeMap<String, Vec<Role>>,
    marks: &'a Marks,
    out: String,
    lines: usize,
}

fn c_expr(e: &ASTExpr) -> Result<String, Error> {
    crate::islx::text(e)
}

impl Printer<'_> {
    fn line(&mut self, depth: usize, text: &str) {
        self.lines += 1;
        if self.lines <= MAX_LINES {
            let _ = writeln!(self.out, "{}{text}", "  ".repeat(depth));
        }
    }

    fn node(&mut self, n: &ASTNode, depth: usize) -> Result<(), Error> {
        let e = || isl("reading the generated code");
        match kind(n) {
            Kind::For => self.for_node(n, depth),
            Kind::If => {
                let cond = c_expr(&n.if_get_cond().map_err(e())?)?;
                self.line(depth, &format!("if ({cond}) {{"));
                self.node(&n.if_get_then_node().map_err(e())?, depth + 1)?;
                if n.if_has_else_node().map_err(e())? {
                    self.line(depth, "} else {");
                    self.node(&n.if_get_else_node().map_err(e())?, depth + 1)?;
                }
                self.line(depth, "}");
                Ok(())
            }
            Kind::Block => {
                let list = n.block_get_children().map_err(e())?;
                for i in 0..list.n_ast_node().map_err(e())? {
                    self.node(&list.get_at(i).map_err(e())?, depth)?;
                }
                Ok(())
            }
            Kind::Mark => self.node(&n.mark_get_node().map_err(e())?, depth),
            Kind::User => {
                let call = n.user_get_expr().map_err(e())?;
                let text = c_expr(&call)?;
                let name = text.split('(').next().unwrap_or("").trim().to_string();
                let label = self
                    .region
                    .statements
                    .iter()
                    .find(|s| s.name == name)
                    .map_or(String::new(), |s| s.label.clone());
                self.line(depth, &format!("{text};  // {label}"));
                Ok(())
            }
            Kind::Error => Err(Error::Isl("an AST node in error".into())),
        }
    }

    fn for_node(&mut self, n: &ASTNode, depth: usize) -> Result<(), Error> {
        let e = || isl("reading a loop");
        let it = c_expr(&n.for_get_iterator().map_err(e())?)?;
        let init = c_expr(&n.for_get_init().map_err(e())?)?;
        let body = n.for_get_body().map_err(e())?;
        let role = self.role_of(&it, &body)?;
        let what = role.as_ref().map_or(String::new(), |(r, l)| {
            let lp = &self.region.loops[*l];
            match r {
                Role::Tile(_, t) => format!("  // tiles of {t} of {} ({})", lp.label, lp.id),
                _ => format!("  // {} ({})", lp.label, lp.id),
            }
        });
        let parallel = self.marks.parallel.iter().find(|(p, _)| {
            role.as_ref()
                .is_some_and(|(r, l)| l == p && (matches!(r, Role::Tile(..)) || !self.tiled(*l)))
        });
        if let Some((_, d)) = parallel {
            let d = d.clone();
            self.line(depth, &d);
        }
        let simd = self.marks.simd.as_ref().filter(|(v, _)| {
            role.as_ref()
                .is_some_and(|(r, l)| l == v && matches!(r, Role::Dim(_)))
        });
        if let Some((_, d)) = simd {
            let d = d.clone();
            self.line(depth, &d);
        }
        if n.for_is_degenerate().map_err(e())? {
            self.line(
                depth,
                &format!("{{ int {it} = {init};{what}, one iteration"),
            );
        } else {
            let cond = c_expr(&n.for_get_cond().map_err(e())?)?;
            let inc = c_expr(&n.for_get_inc().map_err(e())?)?;
            let step = if inc == "1" {
                format!("{it}++")
            } else {
                format!("{it} += {inc}")
            };
            self.line(
                depth,
                &format!("for (int {it} = {init}; {cond}; {step}) {{{what}"),
            );
        }
        self.node(&body, depth + 1)?;
        self.line(depth, "}");
        Ok(())
    }

    /// Whether region loop `l` is tiled in this schedule.
    fn tiled(&self, l: usize) -> bool {
        self.roles.iter().any(|(name, rows)| {
            let Some(s) = self.region.statements.iter().find(|s| &s.name == name) else {
                return false;
            };
            rows.iter()
                .any(|r| matches!(r, Role::Tile(d, _) if s.loops.get(*d) == Some(&l)))
        })
    }

    /// The role of iterator `it` (`c3`: schedule dimension 3) for the first statement under
    /// `body`, with the region loop it scans.
    fn role_of(&self, it: &str, body: &ASTNode) -> Result<Option<(Role, usize)>, Error> {
        let Some(k) = it.strip_prefix('c').and_then(|d| d.parse::<usize>().ok()) else {
            return Ok(None);
        };
        let Some(name) = first_statement(body)? else {
            return Ok(None);
        };
        let Some(s) = self.region.statements.iter().find(|s| s.name == name) else {
            return Ok(None);
        };
        let role = self.roles.get(&name).and_then(|r| r.get(k)).cloned();
        Ok(match role {
            Some(r @ (Role::Dim(d) | Role::Tile(d, _))) => s.loops.get(d).map(|&l| (r, l)),
            _ => None,
        })
    }
}

/// The name of the first statement an AST node runs.
fn first_statement(n: &ASTNode) -> Result<Option<String>, Error> {
    let e = || isl("reading the generated code");
    Ok(match kind(n) {
        Kind::For => first_statement(&n.for_get_body().map_err(e())?)?,
        Kind::If => first_statement(&n.if_get_then_node().map_err(e())?)?,
        Kind::Mark => first_statement(&n.mark_get_node().map_err(e())?)?,
        Kind::Block => {
            let list = n.block_get_children().map_err(e())?;
            let mut found = None;
            for i in 0..list.n_ast_node().map_err(e())? {
                found = first_statement(&list.get_at(i).map_err(e())?)?;
                if found.is_some() {
                    break;
                }
            }
            found
        }
        Kind::User => {
            let text = c_expr(&n.user_get_expr().map_err(e())?)?;
            Some(text.split('(').next().unwrap_or("").trim().to_string())
        }
        Kind::Error => None,
    })
}
