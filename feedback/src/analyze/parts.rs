//! Scheduling by parts (ARCHITECTURE, decision 11): when isl's scheduler stops on a whole
//! region, the nest of the hottest statement is scheduled on its own, for one iteration of
//! the loops around it, going inward one loop at a time until a part fits the budget.
//!
//! A part is the subtree of one loop, as a region of its own: the dimensions of the loops
//! around it become existential (projected), its dependences keep the pairs within one
//! iteration of those loops (the others are carried by loops that stay as they are, and
//! ordered by them), and values crossing the part's border (to the rest of the region, or
//! out of it) are its live-ins and live-outs. Any schedule of the part, run inside the
//! unchanged outer loops, keeps every dependence of the region.

use super::fusion::fusion;
use super::schedule::{has_skew, schedule_region};
use super::tiling::{skew_and_tile, Tiling};
use super::Nest;
use crate::input::{Boundary, Dependence, EqualPairs, Polyhedra, Region, Statement, Tuple};
use crate::islx;
use crate::legality::Ctx;
use crate::params::Parameterizer;
use crate::poly::Convex;
use crate::{Error, Feedback, Options};
use isl_rs::Context;
use std::collections::BTreeSet;

/// The part of `region` made of loop `root` and the statements inside it, for one iteration
/// of the loops around it; `None` when no statement runs in it.
pub(super) fn part(region: &Region, root: usize) -> Option<Region> {
    let depth = region
        .statements
        .iter()
        .find_map(|s| s.loops.iter().position(|&l| l == root))?;
    let inside: BTreeSet<&str> = region
        .statements
        .iter()
        .filter(|s| s.loops.get(depth) == Some(&root))
        .map(|s| s.name.as_str())
        .collect();
    let statements: Vec<Statement> = region
        .statements
        .iter()
        .filter(|s| inside.contains(s.name.as_str()))
        .map(|s| {
            let mut accesses = s.accesses.clone();
            for a in &mut accesses {
                a.strides = a.strides.iter().skip(depth).copied().collect();
            }
            Statement {
                loops: s.loops[depth..].to_vec(),
                positions: s.positions[depth..].to_vec(),
                domain: project(&s.domain, depth, 0, 0),
                accesses,
                ..s.clone()
            }
        })
        .collect();
    let mut dependences = Vec::new();
    let mut live_in = Vec::new();
    let mut live_out = Vec::new();
    for d in &region.dependences {
        let (sink_in, source_in) = (
            inside.contains(d.sink.as_str()),
            inside.contains(d.source.as_str()),
        );
        match (sink_in, source_in) {
            (true, true) => dependences.push(Dependence {
                relation: project(&d.relation, depth, depth, depth).into(),
                equal_pairs: EqualPairs::Unknown,
                reload: None,
                mirror: None,
                ..d.clone()
            }),
            // A value from elsewhere in the region: live-in, `{ S[i] -> Outside[] }`.
            (true, false) => live_in.push(Boundary {
                stmt: d.sink.clone(),
                storage: d.storage.clone(),
                relation: to_outside(&d.relation, depth, true),
                outside: crate::legality::line_of(region, &d.source),
            }),
            // A value read elsewhere in the region: live-out, `{ Outside[] -> S[i] }`.
            (false, true) => live_out.push(Boundary {
                stmt: d.source.clone(),
                storage: d.storage.clone(),
                relation: to_outside(&d.relation, depth, false),
                outside: crate::legality::line_of(region, &d.sink),
            }),
            (false, false) => {}
        }
    }
    let border = |bs: &[Boundary], input_side: bool| -> Vec<Boundary> {
        bs.iter()
            .filter(|b| inside.contains(b.stmt.as_str()))
            .map(|b| Boundary {
                relation: if input_side {
                    project(&b.relation, depth, 0, 0)
                } else {
                    project(&b.relation, 0, depth, 0)
                },
                ..b.clone()
            })
            .collect()
    };
    live_in.extend(border(&region.live_in, true));
    live_out.extend(border(&region.live_out, false));
    let rewritten_after = border(&region.rewritten_after, false);
    Some(Region {
        statements,
        dependences,
        live_in,
        live_out,
        rewritten_after,
        ..region.clone()
    })
}

/// `p` with its first `ins` input and first `outs` output dimensions projected out (made
/// existential), after equating the first `equal` of each side.
fn project(p: &Polyhedra, ins: usize, outs: usize, equal: usize) -> Polyhedra {
    let n_in = p.input.dims;
    let n_out = p.output.as_ref().map_or(0, |t| t.dims);
    let (ins, outs) = (ins.min(n_in), outs.min(n_out));
    let pieces = p
        .pieces
        .iter()
        .map(|c| {
            let width = n_in + n_out + c.exists + 1;
            let mut equalities = c.equalities.clone();
            for k in 0..equal.min(n_in).min(n_out) {
                let mut r = vec![0; width];
                r[k] = 1;
                r[n_in + k] = -1;
                equalities.push(r);
            }
            // New columns: kept inputs, kept outputs, old existentials, projected inputs,
            // projected outputs, constant.
            let order: Vec<usize> = (ins..n_in)
                .chain(n_in + outs..n_in + n_out)
                .chain(n_in + n_out..n_in + n_out + c.exists)
                .chain(0..ins)
                .chain(n_in..n_in + outs)
                .chain(std::iter::once(width - 1))
                .collect();
            let permute = |r: &Vec<i64>| order.iter().map(|&j| r[j]).collect::<Vec<i64>>();
            Convex {
                exists: c.exists + ins + outs,
                equalities: equalities.iter().map(permute).collect(),
                inequalities: c.inequalities.iter().map(permute).collect(),
            }
        })
        .collect();
    Polyhedra {
        input: Tuple::new(&p.input.name, n_in - ins),
        output: p.output.as_ref().map(|t| Tuple::new(&t.name, n_out - outs)),
        pieces,
    }
}

/// A dependence (sink → source) as a border relation of the part: the end outside becomes
/// `Outside[]` and the end inside loses its first `depth` dimensions. `sink_inside`: the
/// sink is the part's (a live-in, `{ S[i] -> Outside[] }`), else the source is (a live-out,
/// `{ Outside[] -> S[i] }`).
fn to_outside(rel: &Polyhedra, depth: usize, sink_inside: bool) -> Polyhedra {
    let n_in = rel.input.dims;
    let n_out = rel.output.as_ref().map_or(0, |t| t.dims);
    if sink_inside {
        // Keep the sink's dimensions past `depth`; the source's all go.
        let p = project(rel, depth, n_out, 0);
        Polyhedra {
            output: Some(Tuple::new("Outside", 0)),
            ..p
        }
    } else {
        // Project the sink's dimensions, then swap the sides: `{ Outside[] -> S[i] }`.
        let p = project(rel, n_in, depth, 0);
        // No input column is left: the columns are already `[S's, existentials, 1]`.
        Polyhedra {
            input: Tuple::new("Outside", 0),
            output: Some(Tuple::new(
                &rel.output
                    .as_ref()
                    .map_or(String::new(), |t| t.name.clone()),
                n_out.saturating_sub(depth),
            )),
            pieces: p.pieces,
        }
    }
}

/// Under `POLYPROF_DEBUG_SCHEDULE`: what became of the part at loop `root`.
fn debug_part(region: &Region, root: usize, sub: &Region, what: impl FnOnce() -> String) {
    if std::env::var_os("POLYPROF_DEBUG_SCHEDULE").is_some() {
        eprintln!(
            "polyprof: part at loop {} ({} statements, {} dependences): {}",
            region.loops[root].label,
            sub.statements.len(),
            sub.dependences.len(),
            what()
        );
    }
}

/// A part of a region analysed on its own, after the analysis of the whole stopped.
pub(super) struct AnalysedPart {
    /// The loop the part starts at.
    pub(super) root: usize,
    pub(super) region: Region,
    pub(super) feedback: Feedback,
}

/// Analyses the parts of the hottest nest of `region` with `analyze`, from the innermost
/// outward, each on a budget of its own (half of the time `opts` allows that is left), and
/// keeps the largest one analysed to its end: the whole region was too large for isl even to
/// read, or to answer its loops, so its answers come from the largest part that fits
/// (ARCHITECTURE, decision 11). Inner parts first: they are cheap, so a region always gets
/// the answers of its innermost nest, and the outer ones have the time left.
pub(super) fn analyze_parts(
    region: &Region,
    opts: &Options,
    analyze: impl Fn(&Region, &Options, &Context, &mut Feedback) -> Result<(), Error>,
) -> Option<AnalysedPart> {
    let (started, deadline) = (std::time::Instant::now(), opts.isl_max_seconds);
    let chain = region
        .statements
        .iter()
        .max_by_key(|s| s.ops)
        .map(|s| s.loops.clone())?;
    let mut largest = None;
    for root in chain.into_iter().rev() {
        let Some(sub) = part(region, root) else {
            continue;
        };
        if sub.statements.len() == region.statements.len() {
            continue;
        }
        if opts.cancelled() {
            break;
        }
        let opts = &Options {
            isl_max_seconds: (deadline - started.elapsed().as_secs_f64()).max(0.0) / 2.0,
            ..opts.clone()
        };
        let mut feedback = Feedback::default();
        let attempt = islx::limited(opts, |isl| analyze(&sub, opts, isl, &mut feedback));
        debug_part(region, root, &sub, || match &attempt {
            Ok(()) => "analysed".to_string(),
            Err(e) => e.to_string(),
        });
        if attempt.is_err() {
            // A part around it would not fit either.
            break;
        }
        largest = Some(AnalysedPart {
            root,
            region: sub,
            feedback,
        });
    }
    largest
}

/// What scheduling a part gave: its tiling, fusion components and skew, and the loop it
/// starts at.
pub(super) struct PartAdvice {
    pub(super) tiling: Tiling,
    pub(super) components: (usize, usize),
    pub(super) skewed: bool,
    pub(super) root: usize,
}

/// Schedules the parts of the hottest nest, from the loop inside the outermost one inward,
/// each on a budget of its own (half of the time `opts` allows that is left), until one is
/// scheduled: its skewing, tiling and fusion advice then go to `fb`.
pub(super) fn schedule_parts(
    region: &Region,
    nest: &Nest<'_>,
    opts: &Options,
    isl: &Context,
    fb: &mut Feedback,
    skipped: &mut Vec<&'static str>,
) -> Result<Option<PartAdvice>, Error> {
    let (started, deadline) = (std::time::Instant::now(), opts.isl_max_seconds);
    for &root in nest.chain.iter().skip(1) {
        let Some(sub) = part(region, root) else {
            continue;
        };
        islx::fresh_budget(isl);
        // Half of the time left: a part that does not fit leaves the next, smaller one the
        // other half.
        let opts = &Options {
            isl_max_seconds: (deadline - started.elapsed().as_secs_f64()).max(0.0) / 2.0,
            ..opts.clone()
        };
        let attempt = (|| -> Result<Option<PartAdvice>, Error> {
            let params = Parameterizer::new(opts.param_threshold, opts.param_spread);
            let mut cx = Ctx::new(&sub, isl, params)?;
            cx.keep_forward()?;
            let binding = cx.binding();
            let scheduled = schedule_region(&cx, &binding, opts, fb, false)?;
            if scheduled.failure.is_some() {
                return Ok(None);
            }
            let inner = Nest::of(&sub);
            let tiling = skew_and_tile(&cx, &inner, &scheduled, opts, fb, skipped)?;
            let components = fusion(&cx, &inner, &scheduled, &binding, opts, fb, skipped)?;
            Ok(Some(PartAdvice {
                tiling,
                components,
                skewed: has_skew(&scheduled.tree),
                root,
            }))
        })();
        debug_part(region, root, &sub, || match &attempt {
            Ok(Some(_)) => "scheduled".to_string(),
            Ok(None) => "not scheduled".to_string(),
            Err(e) => e.to_string(),
        });
        match attempt {
            Ok(Some(advice)) => return Ok(Some(advice)),
            Ok(None) | Err(Error::TooComplex) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projecting_outer_dimensions_keeps_the_inner_relation() {
        // Pairs one iteration of i apart and within one i: only the latter stay.
        let p = Polyhedra::parse(
            "{ S1[i, j] -> S0[i, j - 1] : 0 <= i <= 9 and 1 <= j <= 9; \
               S1[i, j] -> S0[i - 1, j] : 1 <= i <= 9 and 0 <= j <= 9 }",
        )
        .expect("a map");
        let q = project(&p, 1, 1, 1);
        assert_eq!(q.input.dims, 1);
        assert_eq!(q.output.as_ref().map(|t| t.dims), Some(1));
        let ctx = isl_rs::Context::alloc();
        let text = crate::islx::text(
            &q.to_union_map(&ctx, &mut crate::params::Parameterizer::none())
                .expect("isl reads it"),
        )
        .expect("isl prints it");
        assert_eq!(text, "{ S1[i0] -> S0[-1 + i0] : 0 < i0 <= 9 }");
    }

    #[test]
    fn a_border_relation_names_the_outside() {
        let p = Polyhedra::parse("{ S1[i, j] -> S0[i, j] : 0 <= i <= 3 and 0 <= j <= 3 }")
            .expect("a map");
        let live_in = to_outside(&p, 1, true);
        assert_eq!(live_in.input.dims, 1);
        assert_eq!(
            live_in.output.as_ref().map(|t| t.name.as_str()),
            Some("Outside")
        );
        let live_out = to_outside(&p, 1, false);
        assert_eq!(live_out.input.name, "Outside");
        assert_eq!(live_out.output.as_ref().map(|t| t.dims), Some(1));
    }
}
