//! The legality model: every loop-level claim is checked against every observed dependence,
//! flow, anti and output, through registers, memory and the hidden state of library calls.
//!
//! Flow dependences can never be broken. Anti and output dependences can be removed by a
//! storage change, which the claim then names as a [`Requirement`] and which is itself
//! checked:
//! - a register or a scalar in memory whose values never cross iterations of the loop is
//!   privatized (registers are private to each thread already and need nothing unless their
//!   value comes from before the loop, `firstprivate`, or is read after it, `lastprivate`);
//!   `lastprivate` is legal only when every value read after the loop was written in the
//!   loop's last iteration;
//! - an array written by several iterations (output dependences) is privatized when no
//!   iteration reads what another wrote, no value comes from before the loop, and none is
//!   read after it;
//! - an array read by one iteration and overwritten by a later one (anti dependences only) is
//!   read from a copy made before the loop, when the reads concerned only ever see values
//!   from before the loop;
//! - the hidden state of library code (output streams, random generators, the heap) cannot be
//!   renamed: a loop that calls `printf` or `rand` is serial.

/// Longest relation a dependence's description quotes (`{ S0[i0] -> S0[-1 + i0] : 0 < i0 <= 63 }`); a
/// longer one is named by its statements.
const SHORT_RELATION: usize = 80;

use crate::affine::Affine;
use crate::distance::{Distances, Tri};
use crate::input::{DepKind, ReduceOp, Region, SharedVariable, Statement, Storage};
use crate::islx::{self, empty};
use crate::params::Parameterizer;
use crate::poly::{Convex, Polyhedra};
use crate::reduction::Reductions;
use crate::Error;
use isl_rs::{Context, UnionMap, UnionSet};
use std::collections::{BTreeMap, BTreeSet};

/// A storage change a suggestion needs before it is legal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    /// Each thread (or iteration) gets its own copy.
    Privatize,
    /// Private copies start from the value before the loop.
    FirstPrivate,
    /// The copy of the last iteration is kept after the loop.
    LastPrivate,
    /// The value the sequentially last iteration that assigns the variable assigned is kept
    /// after the loop, the original's where none does: OpenMP 5.0's
    /// `lastprivate(conditional: found)`, for a flag set to one constant.
    LastConditional,
    /// The reads see a copy of the array made before the loop.
    CopyIn,
    /// A scalar becomes an array along a loop.
    Expand,
    /// A scalar lives in an array element that is dead meanwhile (DeLICM).
    MapToArray,
    /// An array each iteration writes before reading, reached through a pointer (a heap
    /// block, an array parameter): in C and C++ `private` on the pointer copies nothing, so
    /// the loop's body declares an array of its own instead (`double sum[8]`) and uses it.
    /// `len`: its element count, when known.
    LocalArray { len: Option<u64> },
    /// A source variable each iteration steps from the previous one's value (an induction
    /// variable the source keeps, `memcnt += 4`) is computed from the loop counters at the
    /// top of each iteration instead, and made private.
    ClosedForm,
    /// Such a variable, stepped as written, with OpenMP's `linear(var: step)` clause: each
    /// iteration's copy starts at the value before the loop plus the iteration's number times
    /// the step ([`Requirement::step`]), and the last iteration's value is kept after it.
    Linear,
    /// Each thread accumulates a partial result, combined with `op` after the loop (OpenMP's
    /// `reduction(op: var)`). `fp`: the operator is floating point, and combining partial
    /// results reassociates it (the result may differ in the last bits).
    /// `array`: the partial results are an array's elements (each thread needs a copy of the
    /// array). `section`: the array is reached through a pointer, and spans this many of its
    /// elements: the clause names the section (`y[0:len]`).
    Reduction {
        op: ReduceOp,
        fp: bool,
        array: bool,
        section: Option<u64>,
    },
}

impl Change {
    /// The source change a loop-table flag names (`parallel after copy`); `None` for the
    /// changes an OpenMP clause makes.
    pub fn condition(&self) -> Option<&'static str> {
        match self {
            Change::CopyIn => Some("copy"),
            Change::ClosedForm => Some("substitution"),
            Change::LocalArray { .. } => Some("local array"),
            Change::Expand => Some("expansion"),
            Change::MapToArray => Some("mapping"),
            _ => None,
        }
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Change::Privatize => "privatize",
            Change::FirstPrivate => "firstprivate",
            Change::LastPrivate => "lastprivate",
            Change::LastConditional => "lastprivate_conditional",
            Change::CopyIn => "copy_in",
            Change::Expand => "expand",
            Change::MapToArray => "map_to_array",
            Change::ClosedForm => "closed_form",
            Change::Linear => "linear",
            Change::LocalArray { .. } => "local_array",
            Change::Reduction { .. } => "reduction",
        }
    }
}

/// A storage change, with the storage it applies to.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Requirement {
    pub change: Change,
    /// The storage, as [`Storage::describe`] says it.
    pub storage: String,
    /// Source lines of the accesses concerned.
    pub lines: Vec<String>,
    /// For [`Change::Linear`]: the variable's step per iteration, as C text.
    pub step: Option<String>,
}

impl Requirement {
    /// The OpenMP clause of a reduction: `reduction(+: s)`, with the variable's name when the
    /// storage has one a person can type.
    pub fn clause(&self) -> Option<String> {
        let Change::Reduction { op, section, .. } = self.change else {
            return None;
        };
        let name = variable(&self.storage);
        let name = match name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) {
            Some(n) => n.to_string(),
            None => format!("<{name}>"),
        };
        let section = section.map_or(String::new(), |len| format!("[0:{len}]"));
        Some(format!("reduction({}: {name}{section})", op.clause()))
    }

    /// The source variable a privatization names, when it is one a person can type in an
    /// OpenMP clause (`` `t` (register xmm0) `` gives `t`; a register, an element, a stack
    /// slot without a name give none).
    pub fn private_variable(&self) -> Option<&str> {
        if !matches!(
            self.change,
            Change::Privatize
                | Change::FirstPrivate
                | Change::LastPrivate
                | Change::LastConditional
                | Change::ClosedForm
        ) {
            return None;
        }
        let name = self.storage.strip_prefix('`')?.split('`').next()?;
        let plain = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_alphanumeric() || c == '_');
        plain.then_some(name)
    }

    /// For a sentence: "privatizing `t` (written at k.c:7)".
    pub fn phrase(&self) -> String {
        let at = if self.lines.is_empty() {
            String::new()
        } else {
            format!(" (at {})", self.lines.join(", "))
        };
        match self.change {
            Change::Privatize => format!("privatizing {}{at}", self.storage),
            Change::FirstPrivate => format!(
                "giving each thread a copy of {} initialised before the loop (`firstprivate`)",
                self.storage
            ),
            Change::LastPrivate if !self.storage.starts_with('`') => format!(
                "keeping {} as the last iteration left it (`lastprivate`){at}",
                self.storage
            ),
            Change::LastPrivate => format!(
                "keeping the last iteration's {} after the loop (`lastprivate`){at}",
                self.storage
            ),
            Change::LastConditional => {
                let name = variable(&self.storage);
                format!(
                    "keeping in {} after the loop the value the last iteration that sets it stores{at}, or its value from before the loop when none does (`lastprivate(conditional: {})`, OpenMP 5.0)",
                    self.storage,
                    name.trim_matches('`')
                )
            }
            Change::CopyIn => format!(
                "reading {}{at} from a copy made before the loop",
                self.storage
            ),
            // Their storage already says where (`xmm1 onto `C` (line k.c:18)`).
            Change::Expand => format!("expanding {}", self.storage),
            Change::MapToArray => format!("mapping {}", self.storage),
            Change::LocalArray { len } => {
                let name = variable(&self.storage);
                let size = len.map_or(String::new(), |n| format!(" of {n} elements"));
                let plain = name.trim_matches('`');
                format!(
                    "using in place of {name}{at} an array{size} declared in the loop's body (`private({plain})` would copy the pointer, not the array)"
                )
            }
            Change::ClosedForm => format!(
                "computing {} from the loop counters at the top of each iteration instead of stepping it{at}, and making it private",
                self.storage
            ),
            // The clause printed with it gives the step.
            Change::Linear => format!(
                "making {}, stepped at {}, linear",
                self.storage,
                self.lines.join(", ")
            ),
            Change::Reduction { .. } => {
                format!("a reduction on {}{at}", self.storage)
            }
        }
    }

    /// The OpenMP clause of a variable stepped as written: `linear(memcnt: 4 * n)`, when the
    /// storage names a variable a person can type.
    pub fn linear_clause(&self) -> Option<String> {
        if self.change != Change::Linear {
            return None;
        }
        let name = self.storage.strip_prefix('`')?.split('`').next()?;
        Some(format!("linear({name}: {})", self.step.as_deref()?))
    }
}

/// Whether a loop may run its iterations in parallel (or in any order).
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Legal once these storage changes are made (none: legal as it is).
    Legal(Vec<Requirement>),
    /// Not legal: why, in words.
    Blocked(String),
}

pub(crate) fn pct(part: u64, all: u64) -> f64 {
    if all == 0 {
        0.0
    } else {
        100.0 * part as f64 / all as f64
    }
}

/// Schedule vectors are padded to this many positions: `[p0, i0, p1, i1, ..., pk]`.
pub(crate) fn sched_len(region: &Region) -> usize {
    2 * region
        .statements
        .iter()
        .map(|s| s.loops.len())
        .max()
        .unwrap_or(0)
        + 1
}

/// A constraint row over two schedule vectors of length `n` (`[x, y, 1]`): `terms` are
/// (column, coefficient) pairs, `y_k` at column `n + k`.
fn time_row(n: usize, terms: &[(usize, i64)], constant: i64) -> Vec<i64> {
    let mut r = vec![0; 2 * n + 1];
    for &(col, c) in terms {
        r[col] += c;
    }
    r[2 * n] = constant;
    r
}

/// Dependences carried at loop level `lvl` of the schedule: equal before, different at it
/// (`{ [x] -> [y] : x_q = y_q for q < p and x_p != y_p }`, with `p = 2 lvl + 1`).
pub(crate) fn carried_at(n: usize, lvl: usize) -> Polyhedra {
    let pos = 2 * lvl + 1;
    let equalities: Vec<Vec<i64>> = (0..pos.min(n))
        .map(|q| time_row(n, &[(q, 1), (n + q, -1)], 0))
        .collect();
    let pieces = if pos < n {
        // y_p - x_p - 1 >= 0, or x_p - y_p - 1 >= 0.
        [1, -1]
            .into_iter()
            .map(|sign| Convex {
                exists: 0,
                equalities: equalities.clone(),
                inequalities: vec![time_row(n, &[(n + pos, sign), (pos, -sign)], -1)],
            })
            .collect()
    } else {
        Vec::new()
    };
    Polyhedra::relation(n, pieces)
}

/// Dependences with a negative distance at some loop level up to `lvl` (`y_p < x_p` at a
/// loop position `p = 2 q + 1`, `q <= lvl`).
pub(crate) fn negative_up_to(n: usize, lvl: usize) -> Polyhedra {
    let pieces = (0..=lvl)
        .map(|q| 2 * q + 1)
        .filter(|&p| p < n)
        .map(|p| Convex {
            exists: 0,
            equalities: Vec::new(),
            inequalities: vec![time_row(n, &[(p, 1), (n + p, -1)], -1)],
        })
        .collect();
    Polyhedra::relation(n, pieces)
}

/// Whether a register's value, plainly loaded from `array` ([`crate::input::Dependence::reload`]),
/// can be loaded again by each iteration of loop `l`: no iteration of it writes the array.
pub(crate) fn reloadable(region: &Region, l: usize, array: Option<&str>) -> bool {
    let Some(array) = array else {
        return false;
    };
    // Memory a library call may write, which no statement shows: a stack variable whose
    // address the code passes (`strtol(p, &p, 10)`), anything where the region calls
    // more than OpenMP's runtime.
    let runtime = |c: &String| c.starts_with("GOMP_") || c.starts_with("omp_");
    if array.contains("stack") || !region.library_calls.iter().all(runtime) {
        return false;
    }
    !region.statements_in(l).iter().any(|s| {
        s.accesses
            .iter()
            .any(|a| a.write && a.array.as_deref() == Some(array))
    })
}

/// The source line of a statement (`k.c:12`).
pub(crate) fn line_of(region: &Region, name: &str) -> String {
    region
        .statements
        .iter()
        .find(|s| s.name == name)
        .map(|s| s.lines().first().copied().unwrap_or("?").to_string())
        .unwrap_or_else(|| name.to_string())
}

/// The question of a loop's parallel check: which pairs loop `l` carries at its level of
/// schedule `theta` (`rel`, the time relation of that level).
struct Carried<'t> {
    l: usize,
    theta: &'t UnionMap,
    rel: UnionMap,
    /// The loop's depth when `theta` is the program's own order: the dependences' distances
    /// then answer most questions without isl.
    as_written: Option<usize>,
}

/// The source lines outside the loop where crossing values are read, once each.
fn outside_lines(crossed: &[Crossed]) -> String {
    crossed
        .iter()
        .map(|o| o.outside.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join(", ")
}

/// A region's dependences in isl's terms, with the questions the suggestions ask of them.
pub(crate) struct Ctx<'a> {
    pub region: &'a Region,
    pub isl: &'a Context,
    pub params: Parameterizer,
    /// Per statement: its domain, parameterized.
    domains: Vec<UnionSet>,
    pub n: usize,
    /// Per dependence: its relation, source → sink; `None` when it holds no pair.
    maps: Vec<Option<UnionMap>>,
    /// Per live-out border of the region: its relation, producer inside → `Outside`.
    outs: Vec<UnionMap>,
    /// The dependences' distances, asked before isl about the program's own order.
    distances: Distances,
    /// The reductions of the loops, found on demand on the region's instructions (before
    /// they were grouped into blocks).
    pub reductions: Reductions<'a>,
}

/// Which way a value crosses a loop's border.
#[derive(Clone, Copy)]
enum Crossing {
    In,
    Out,
}

/// A value crossing a loop's border ([`Ctx::crossing`]).
struct Crossed {
    /// Producer → consumer pairs, when the question needs them (values going out).
    pairs: Option<UnionMap>,
    /// Where the end outside the loop is (`k.c:12`).
    outside: String,
}

impl<'a> Ctx<'a> {
    /// The region's domains and dependences given to isl, with large constants made
    /// parameters by `params`.
    pub fn new(
        region: &'a Region,
        isl: &'a Context,
        mut params: Parameterizer,
    ) -> Result<Ctx<'a>, Error> {
        let reversed = |m: UnionMap| m.reverse().map_err(islx::isl("reversing dependences"));
        let mut domains = Vec::with_capacity(region.statements.len());
        for s in &region.statements {
            domains.push(s.domain.to_union_set(isl, &mut params)?);
        }
        let mut maps = Vec::with_capacity(region.dependences.len());
        for d in &region.dependences {
            maps.push(match d.relation.is_empty() {
                true => None,
                false => Some(reversed(d.relation.to_union_map(isl, &mut params)?)?),
            });
        }
        let mut outs = Vec::with_capacity(region.live_out.len());
        for b in &region.live_out {
            outs.push(reversed(b.relation.to_union_map(isl, &mut params)?)?);
        }
        Ok(Ctx {
            region,
            isl,
            params,
            domains,
            n: sched_len(region),
            maps,
            outs,
            distances: Distances::new(region),
            reductions: Reductions::none(),
        })
    }

    /// The dependences' distances, computed once for the region.
    pub fn distances(&self) -> &Distances {
        &self.distances
    }

    fn copy(m: &UnionMap) -> Result<UnionMap, Error> {
        m.copy().map_err(islx::isl("copying a map"))
    }

    /// The original schedule (Kelly's mapping).
    pub fn original(&self) -> Result<UnionMap, Error> {
        schedule_map(
            self.isl,
            &kelly(self.region, &|s| (0..s.loops.len()).collect()),
        )
    }

    /// A relation (between times, or iterations) in isl.
    pub fn relation(&self, r: &Polyhedra) -> Result<UnionMap, Error> {
        r.to_union_map(self.isl, &mut Parameterizer::none())
    }

    /// Restricts every over-approximated dependence to the pairs whose producer instance runs
    /// before its consumer. A real dependence always does; a hull or box around irregular
    /// pairs may also hold backward or identical pairs, and one of those is enough for isl to
    /// find no schedule at all ("unable to carry dependences"). Exact relations stay as they
    /// are.
    pub fn keep_forward(&mut self) -> Result<(), Error> {
        let original = self.original()?;
        for (i, d) in self.region.dependences.iter().enumerate() {
            if d.exact {
                continue;
            }
            let Some(m) = self.maps[i].take() else {
                continue;
            };
            let kept = islx::forward(m, &original)?;
            self.maps[i] = (!empty(&kept)?).then_some(kept);
        }
        Ok(())
    }

    /// The domains of the statements `which` (indices), as one union set.
    pub fn domains_of(&self, which: impl IntoIterator<Item = usize>) -> Result<UnionSet, Error> {
        let e = || islx::isl("uniting domains");
        let mut out = UnionSet::empty_ctx(self.isl).map_err(e())?;
        for i in which {
            let d = self.domains[i].copy().map_err(e())?;
            out = out.union(d).map_err(e())?;
        }
        Ok(out)
    }

    /// The statements' domains as one union set.
    pub fn domain(&self) -> Result<UnionSet, Error> {
        self.domains_of(0..self.domains.len())
    }

    /// Source → sink maps of the dependences `which`, as one union map.
    pub fn deps_map(&self, which: &[usize]) -> Result<Option<UnionMap>, Error> {
        let mut out: Option<UnionMap> = None;
        for &i in which {
            let Some(m) = self.maps.get(i).and_then(Option::as_ref) else {
                continue;
            };
            let m = Self::copy(m)?;
            out = Some(match out {
                None => m,
                Some(o) => o.union(m).map_err(islx::isl("uniting dependences"))?,
            });
        }
        Ok(out)
    }

    /// Dependences that every schedule must respect: flow dependences, and anti and output
    /// dependences through storage that cannot be renamed (arrays, library state).
    pub fn binding(&self) -> Vec<usize> {
        (0..self.region.dependences.len())
            .filter(|&i| self.region.dependences[i].binding())
            .collect()
    }

    /// Names of the statements inside loop `l`.
    fn inside(&self, l: usize) -> BTreeSet<&'a str> {
        self.region
            .statements
            .iter()
            .filter(|s| s.loops.contains(&l))
            .map(|s| s.name.as_str())
            .collect()
    }

    /// Dependences (indices) between statements that both run inside `loop_idx`.
    pub fn deps_within(&self, loop_idx: usize) -> Vec<usize> {
        let inside = self.inside(loop_idx);
        (0..self.region.dependences.len())
            .filter(|&i| {
                let d = &self.region.dependences[i];
                inside.contains(d.source.as_str()) && inside.contains(d.sink.as_str())
            })
            .collect()
    }

    /// Whether some pair of the dependences `deps` is related by `rel` in schedule `theta`.
    fn related(&self, deps: &[usize], theta: &UnionMap, rel: &UnionMap) -> Result<bool, Error> {
        let Some(d) = self.deps_map(deps)? else {
            return Ok(false);
        };
        let in_sched = d
            .apply_domain(Self::copy(theta)?)
            .and_then(|m| m.apply_range(theta.copy()?))
            .map_err(islx::isl("mapping dependences to the schedule"))?;
        let hit = in_sched
            .intersect(Self::copy(rel)?)
            .map_err(islx::isl("intersecting"))?;
        Ok(!empty(&hit)?)
    }

    /// The first dependence of `which` (if any) that the schedule `theta` relates by `rel`.
    pub fn first_related(
        &self,
        which: &[usize],
        theta: &UnionMap,
        rel: &UnionMap,
    ) -> Result<Option<usize>, Error> {
        if !self.related(which, theta, rel)? {
            return Ok(None);
        }
        for &i in which {
            if self.related(&[i], theta, rel)? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Whether loop `c.l` carries one of the dependences `which`: from their distances where
    /// those decide (the program's own order), from isl for the rest.
    fn any_carried(&self, c: &Carried<'_>, which: &[usize]) -> Result<bool, Error> {
        let Some(depth) = c.as_written else {
            return self.related(which, c.theta, &c.rel);
        };
        let mut ask = Vec::new();
        for &i in which {
            match self.distances.carried_at(i, depth) {
                Tri::Yes => return Ok(true),
                Tri::No => {}
                Tri::Maybe => ask.push(i),
            }
        }
        if ask.is_empty() {
            return Ok(false);
        }
        self.related(&ask, c.theta, &c.rel)
    }

    /// The first of the dependences `which` loop `c.l` carries, as [`Ctx::any_carried`] finds
    /// them.
    fn first_carried(&self, c: &Carried<'_>, which: &[usize]) -> Result<Option<usize>, Error> {
        let Some(depth) = c.as_written else {
            return self.first_related(which, c.theta, &c.rel);
        };
        let mut ask = Vec::new();
        for &i in which {
            match self.distances.carried_at(i, depth) {
                Tri::Yes => return Ok(Some(i)),
                Tri::No => {}
                Tri::Maybe => ask.push(i),
            }
        }
        self.first_related(&ask, c.theta, &c.rel)
    }

    /// Whether some dependence of `which` goes backwards along a loop at depth `0..=depth`
    /// in the program's own order (the band of those loops is then not permutable): the
    /// first such, from the distances where they decide, from isl for the rest.
    pub fn first_negative(
        &self,
        which: &[usize],
        original: &UnionMap,
        depth: usize,
    ) -> Result<Option<usize>, Error> {
        let ask: Vec<usize> = which
            .iter()
            .copied()
            .filter(|&i| self.distances.nonnegative_up_to(i, depth) != Tri::Yes)
            .collect();
        if ask.is_empty() {
            return Ok(None);
        }
        self.first_related(
            &ask,
            original,
            &self.relation(&negative_up_to(self.n, depth))?,
        )
    }

    /// The first dependence of `which` that schedule `theta` breaks, if any.
    pub fn first_violated(
        &self,
        which: &[usize],
        theta: &UnionMap,
    ) -> Result<Option<usize>, Error> {
        let order = islx::TimeOrder::new(Self::copy(theta)?)?;
        let violated = |deps: &[usize]| -> Result<bool, Error> {
            match self.deps_map(deps)? {
                Some(d) => order.violated(&d),
                None => Ok(false),
            }
        };
        if !violated(which)? {
            return Ok(None);
        }
        for &i in which {
            if violated(&[i])? {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// The dependences of `which` that schedule `theta` breaks.
    pub fn all_violated(&self, which: &[usize], theta: &UnionMap) -> Result<Vec<usize>, Error> {
        let order = islx::TimeOrder::new(Self::copy(theta)?)?;
        let mut out = Vec::new();
        // Dependences through several storages often share one relation (heat-3d's register
        // relations): each distinct relation is checked once.
        // (Not across exactness: only an inexact relation loses its backward pairs.)
        let mut known: std::collections::HashMap<(&crate::input::Polyhedra, bool), bool> =
            std::collections::HashMap::new();
        for &i in which {
            let d = &self.region.dependences[i];
            let relation = (&*d.relation, d.exact);
            let broken = match known.get(&relation) {
                Some(&b) => b,
                None => {
                    let b = match self.deps_map(&[i])? {
                        Some(d) => order.violated(&d)?,
                        None => false,
                    };
                    known.insert(relation, b);
                    b
                }
            };
            if broken && self.maps[i].is_some() {
                out.push(i);
            }
        }
        Ok(out)
    }

    /// A dependence for a person: kind, storage, the source lines of its ends, and its
    /// relation when short. A long relation stays in report.json's `dependences`: a why-not
    /// quoting one ran to thousands of characters.
    pub fn describe_dep(&self, i: usize) -> String {
        let d = &self.region.dependences[i];
        let kind = match d.kind {
            DepKind::Flow => "a flow",
            DepKind::Anti => "an anti",
            DepKind::Output => "an output",
        };
        let (from, to) = (
            line_of(self.region, &d.source),
            line_of(self.region, &d.sink),
        );
        let ends = if from == to {
            format!("at {from}")
        } else {
            format!("from {from} to {to}")
        };
        // A short relation says which iterations (`S0[i0] -> S0[-1 + i0]`); a long one only
        // its statements, so that a why-not stays short (issue 36): report.json's
        // `dependences` give the relation of the pair.
        let relation = d.relation.isl_text();
        let pairs = match relation.len() <= SHORT_RELATION {
            true => relation,
            false => format!("{} to {}", d.source, d.sink),
        };
        format!(
            "{kind} dependence through {} {ends} ({pairs})",
            d.storage.describe()
        )
    }

    /// Whether running loop `l`, at level `lvl` of schedule `theta`, in parallel is legal, and
    /// with which storage changes. Storage in `renamed` is already given copies of its own by
    /// another suggestion (an expansion for an interchange): its anti and output dependences
    /// no longer count.
    pub fn parallel(
        &self,
        l: usize,
        lvl: usize,
        theta: &UnionMap,
        renamed: &BTreeSet<String>,
    ) -> Result<Verdict, Error> {
        self.parallel_in(l, lvl, theta, renamed, None)
    }

    /// [`Ctx::parallel`] in the program's own order (`original`, from [`Ctx::original`]), at
    /// the loop's own depth: the dependences' distances answer what they can before isl is
    /// asked.
    pub fn parallel_as_written(
        &self,
        l: usize,
        depth: usize,
        original: &UnionMap,
    ) -> Result<Verdict, Error> {
        self.parallel_in(l, depth, original, &BTreeSet::new(), Some(depth))
    }

    fn parallel_in(
        &self,
        l: usize,
        lvl: usize,
        theta: &UnionMap,
        renamed: &BTreeSet<String>,
        as_written: Option<usize>,
    ) -> Result<Verdict, Error> {
        let carried = Carried {
            l,
            theta,
            rel: self.relation(&carried_at(self.n, lvl))?,
            as_written,
        };
        if let Some(why) = self.merged_with_enclosing(l) {
            return Ok(Verdict::Blocked(why));
        }
        if let Some(at) = self.region.early_exits.get(&self.region.loops[l].id) {
            return Ok(Verdict::Blocked(early_exit(at)));
        }
        let mut within = self.deps_within(l);
        // A variable declared in the loop's body is one per iteration in the source: what
        // crosses iterations through its slot is the compiler's reuse of it (gcc -O2 keeps
        // hotspot3D's `w` of one iteration as the next one's `c - 1`), which code compiled
        // for the parallel loop does not do.
        within.retain(|&i| !self.declared_inside(l, &self.region.dependences[i].storage));
        within.retain(|&i| !self.reloadable(l, i));
        let id = &self.region.loops[l].id;
        within.retain(|&i| !self.region.dependences[i].invariant_in.contains(id));
        // A loop the program runs in parallel itself: what its threads keep in memory of
        // their own (the outlined body's frame, the directive's private copies) is no one
        // else's, but for values one iteration passes to another through a private copy.
        if let Some(omp) = self.region.omp_loops.get(&self.region.loops[l].id) {
            within.retain(|&i| !omp.keeps_to_itself(&self.region.dependences[i], self.region));
        }
        let mut needs = match self.reductions_for(&carried, &mut within)? {
            Ok(needs) => needs,
            Err(why) => return Ok(Verdict::Blocked(why)),
        };
        crate::accumulators::name_register_reductions(self.region, id, &mut needs);
        if let Err(why) = self.privatize_shared(l, &mut needs) {
            return Ok(Verdict::Blocked(why));
        }
        let inside = self.inside(l);
        if let Err(why) = self.borders_of_shared(l, &inside, &mut needs)? {
            return Ok(Verdict::Blocked(why));
        }
        for (storage, idx) in self.renamable(&carried, &within, renamed)? {
            let change = match storage {
                Storage::Effect { .. } => Err(format!("it carries {}", self.describe_dep(idx[0]))),
                Storage::Register { .. } | Storage::Scalar { .. } => {
                    self.scalar_changes(l, storage, &idx, &inside)?
                }
                Storage::Array { .. } => self.array_changes(&carried, storage, &idx, &inside)?,
            };
            match change {
                Ok(more) => needs.extend(more),
                Err(why) => return Ok(Verdict::Blocked(why)),
            }
        }
        // A value an earlier iteration computed and this one only compares: no dependence
        // shows it, and no storage change gives the iteration that value.
        if let Some(why) = crate::compared::blocking(self.region, l, as_written.is_some()) {
            return Ok(Verdict::Blocked(why));
        }
        Ok(Verdict::Legal(merge(needs)))
    }

    /// Whether dependence `i` is a register mirroring an array no iteration of loop `l`
    /// writes ([`crate::input::Dependence::reload`]): each iteration can read the array
    /// itself, as the source does.
    fn reloadable(&self, l: usize, i: usize) -> bool {
        reloadable(self.region, l, self.region.dependences[i].reload.as_deref())
    }

    /// Why loop `l` cannot be named in a pragma: its code assigns the counter of a `for`
    /// statement above its own line, so it holds an enclosing source loop's code too (gcc -O3
    /// merges a loop with the short loops inside it) and is named after an inner loop: advice
    /// applied at that line would go to the wrong loop.
    fn merged_with_enclosing(&self, l: usize) -> Option<String> {
        let id = &self.region.loops[l].id;
        self.region.shared_variables.iter().find_map(|v| {
            let (_, line) = v.merged.iter().find(|(loop_id, _)| loop_id == id)?;
            Some(format!(
                "its code also runs the loop statement at {line} (it assigns `{}` there): the \
                 compiler merged the loops, and which source loop this is cannot be told",
                v.name
            ))
        })
    }

    /// The reductions a loop's carried flow dependences (among `within`) belong to. A carried
    /// flow dependence makes the iterations dependent, unless it belongs to a reduction, whose
    /// storage is then accumulated per thread: all of that storage's dependences are set aside
    /// (out of `within`), and the reduction named. `Err`: why the loop is serial.
    fn reductions_for(
        &self,
        c: &Carried<'_>,
        within: &mut Vec<usize>,
    ) -> Result<Result<Vec<Requirement>, String>, Error> {
        let deps = &self.region.dependences;
        let mut needs = Vec::new();
        loop {
            let flows: Vec<usize> = within
                .iter()
                .copied()
                .filter(|&i| deps[i].kind == DepKind::Flow)
                .collect();
            let Some(i) = self.first_carried(c, &flows)? else {
                return Ok(Ok(needs));
            };
            let root = deps[i].storage.root();
            let Some(r) = self.reductions.of(c.l, &root)? else {
                if let Some(flag) = self.flag_of(c.l, i) {
                    needs.push(flag);
                    within.retain(|&k| deps[k].storage.root() != root);
                    continue;
                }
                return Ok(Err(format!("it carries {}", self.describe_dep(i))));
            };
            needs.extend(r.requirements(self.region));
            within.retain(|&k| deps[k].storage.root() != root);
        }
    }

    /// The clause of a flag ([`crate::accumulators::flag_reduction`]) that carried flow
    /// dependence `i` of loop `l` is: a statement to itself through a source variable the
    /// loop only sets to `true` (or only to `false`, or only to one other constant) on that
    /// statement's lines. gcc -O2 compiles `if (n) stop = true;` to `cmovne`, which reads the
    /// flag's old value; vectorized, it blends each lane's flag in a register debug
    /// information names no variable for (`pand`/`pandn`/`por`): that register is the flag
    /// when every source variable the loop assigns on the statement's lines is such a flag.
    fn flag_of(&self, l: usize, i: usize) -> Option<Requirement> {
        let d = &self.region.dependences[i];
        if d.source != d.sink {
            return None;
        }
        let loop_id = &self.region.loops[l].id;
        let st = self.region.statements.iter().find(|s| s.name == d.source)?;
        let lines = st.lines();
        let on_lines = |r: &Requirement| r.lines.iter().any(|x| lines.contains(&x.as_str()));
        let v = match &d.storage {
            Storage::Register { var: None, .. } if d.reload.is_none() && d.mirror.is_none() => {
                let assigned: Vec<&crate::input::SharedVariable> = self
                    .region
                    .shared_variables
                    .iter()
                    .filter(|v| {
                        v.loops
                            .iter()
                            .zip(&v.lines)
                            .any(|(id, line)| id == loop_id && lines.contains(&line.as_str()))
                    })
                    .collect();
                let flags: Vec<Requirement> = assigned
                    .iter()
                    .filter_map(|v| crate::accumulators::flag_reduction(v, loop_id))
                    .filter(on_lines)
                    .collect();
                return (flags.len() == assigned.len())
                    .then(|| flags.into_iter().next())
                    .flatten();
            }
            s => {
                let name = match s {
                    Storage::Register { var: Some(v), .. } => v.as_str(),
                    s => s.variable()?.trim_matches('`'),
                };
                self.region
                    .shared_variables
                    .iter()
                    .find(|v| v.name == name)?
            }
        };
        let r = crate::accumulators::flag_reduction(v, loop_id)?;
        on_lines(&r).then_some(r)
    }

    /// A source variable privatized by name whose value comes into the loop from before it
    /// (read in an iteration that does not assign it first: hotspot's `delta`, assigned on
    /// the borders only) starts each thread's copy from that value: `firstprivate`; one whose
    /// value is read after the loop keeps the last iteration's: `lastprivate`, legal only
    /// when the last iteration always writes it (`Err`: why not). Its flows are found by the
    /// variable's name, wherever the compiler kept it.
    fn borders_of_shared(
        &self,
        l: usize,
        inside: &BTreeSet<&str>,
        needs: &mut Vec<Requirement>,
    ) -> Result<Result<(), String>, Error> {
        let named: Vec<String> = needs
            .iter()
            .filter(|r| r.change == Change::Privatize)
            .filter_map(|r| r.private_variable().map(str::to_string))
            .collect();
        for name in named {
            let is_it = |s: &Storage| match s {
                Storage::Register { var: Some(v), .. } => *v == name,
                Storage::Scalar { .. } => {
                    s.variable().map(|v| v.trim_matches('`')) == Some(name.as_str())
                }
                _ => false,
            };
            let quoted = format!("`{name}`");
            let has = |change: Change, needs: &[Requirement]| {
                needs
                    .iter()
                    .any(|r| r.change == change && r.storage.contains(&quoted))
            };
            if !has(Change::FirstPrivate, needs)
                && !self
                    .crossing_of(Crossing::In, l, &is_it, inside)?
                    .is_empty()
            {
                needs.push(Requirement {
                    change: Change::FirstPrivate,
                    storage: quoted.clone(),
                    lines: Vec::new(),
                    step: None,
                });
            }
            let live_out = self.crossing_of(Crossing::Out, l, &is_it, inside)?;
            if !has(Change::LastPrivate, needs) && !live_out.is_empty() {
                if !self.written_last(l, &live_out)? {
                    return Ok(Err(format!(
                        "{quoted} is assigned in some iterations and read after the loop (at {}), and the value read is not always the last iteration's",
                        outside_lines(&live_out)
                    )));
                }
                needs.push(Requirement {
                    change: Change::LastPrivate,
                    storage: quoted,
                    lines: Vec::new(),
                    step: None,
                });
            }
        }
        Ok(Ok(()))
    }

    /// The step per iteration of loop `loop_id` of `v`, stepped by it, for a `linear`
    /// clause: the source's ([`SharedVariable::linear`]), when the `for` loops between ran
    /// the same number of iterations each time: a statement of the innermost one has a box
    /// for its domain (each constraint bounds one counter).
    fn linear_step(&self, v: &SharedVariable, loop_id: &str) -> Option<String> {
        let (_, step, inner) = v.linear.iter().find(|(l, _, _)| l == loop_id)?;
        let index = |line: &String| self.region.loops.iter().position(|l| &l.label == line);
        let loops: Vec<usize> = inner.iter().map(index).collect::<Option<_>>()?;
        if let Some(&innermost) = loops.last() {
            let full = self.region.statements.iter().any(|s| {
                s.loops.last() == Some(&innermost)
                    && box_volume(&s.domain)
                        .and_then(|v| v.checked_mul(crate::coarsen::instructions(&s.label)))
                        == Some(s.ops)
            });
            if !full {
                return None;
            }
        }
        Some(step.clone())
    }

    /// Variables held in registers: the register is each thread's own, but the variable,
    /// declared before loop `l` and assigned in it, is one for all its iterations in the
    /// source: privatized (a reduction's variable, among `needs`, is already accumulated per
    /// thread). `Err`: why one cannot be (a flag the loop reads,
    /// [`crate::accumulators::read_flag`]).
    fn privatize_shared(&self, l: usize, needs: &mut Vec<Requirement>) -> Result<(), String> {
        let loop_id = &self.region.loops[l].id;
        for v in &self.region.shared_variables {
            // A reduction's variable is named by its storage, or only by its line when the
            // compiler left it no name (a vectorized accumulator).
            let quoted = format!("`{}`", v.name);
            let reduced = needs.iter().any(|n| {
                matches!(n.change, Change::Reduction { .. })
                    && (n.storage.contains(&quoted) || n.lines.iter().any(|x| v.lines.contains(x)))
            });
            if !v.loops.contains(loop_id) || reduced {
                continue;
            }
            if let Some(r) = crate::accumulators::folded_accumulation(v, loop_id) {
                needs.push(r);
                continue;
            }
            if let Some(r) = crate::accumulators::flag_reduction(v, loop_id) {
                needs.push(r);
                continue;
            }
            if let Some(why) = crate::accumulators::read_flag(v, loop_id) {
                return Err(why);
            }
            // Stepped by each iteration from the previous one's value, which the trace folded
            // into an evolution of the counters (so no dependence carries it): private copies
            // would start undefined (backprop's `memcnt`).
            let steps: Vec<String> = v
                .steps
                .iter()
                .filter(|(l, _)| l == loop_id)
                .map(|(_, line)| line.clone())
                .collect();
            let step = (!steps.is_empty())
                .then(|| self.linear_step(v, loop_id))
                .flatten();
            needs.push(Requirement {
                change: match (steps.is_empty(), &step) {
                    (true, _) => Change::Privatize,
                    (false, Some(_)) => Change::Linear,
                    (false, None) => Change::ClosedForm,
                },
                step,
                storage: v.describe(),
                lines: if steps.is_empty() {
                    v.lines.clone()
                } else {
                    steps
                },
            });
        }
        Ok(())
    }

    /// The anti and output dependences among `within` the loop carries, by storage (not in
    /// `renamed`), a storage at a time (one question each): when one of a storage's is
    /// carried, all of its are taken as carried, which only widens the lines named and the
    /// readers checked. One array reached through fixed addresses too (unrolled code) is one
    /// array, whose own carried dependences decide.
    fn renamable(
        &self,
        c: &Carried<'_>,
        within: &[usize],
        renamed: &BTreeSet<String>,
    ) -> Result<BTreeMap<&'a Storage, Vec<usize>>, Error> {
        let deps = &self.region.dependences;
        let mut groups: BTreeMap<&Storage, Vec<usize>> = BTreeMap::new();
        for &i in within {
            if deps[i].kind != DepKind::Flow && !renamed.contains(&deps[i].storage.describe()) {
                groups.entry(&deps[i].storage).or_default().push(i);
            }
        }
        let mut carried: BTreeMap<&Storage, Vec<usize>> = BTreeMap::new();
        for (storage, idx) in groups {
            if self.any_carried(c, &idx)? {
                carried.insert(storage, idx);
            }
        }
        let arrays: BTreeMap<String, &Storage> = carried
            .keys()
            .filter(|s| matches!(s, Storage::Array { .. }))
            .map(|s| (s.root(), *s))
            .collect();
        let mut merged: BTreeMap<&Storage, Vec<usize>> = BTreeMap::new();
        for (storage, idx) in carried {
            let key = match storage {
                Storage::Scalar { .. } => arrays.get(&storage.root()).copied().unwrap_or(storage),
                _ => storage,
            };
            merged.entry(key).or_default().extend(idx);
        }
        Ok(merged)
    }

    /// Source lines of the statements named by `ends`, once each.
    fn lines_of<'s>(&self, ends: impl Iterator<Item = &'s str>) -> Vec<String> {
        ends.map(|n| line_of(self.region, n))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// Lines of the writes among dependences `idx` (an anti dependence's sink, the others'
    /// source).
    fn writers(&self, idx: &[usize]) -> Vec<String> {
        let deps = &self.region.dependences;
        self.lines_of(idx.iter().map(|&i| {
            let d = &deps[i];
            if d.kind == DepKind::Anti {
                d.sink.as_str()
            } else {
                d.source.as_str()
            }
        }))
    }

    /// A register or a scalar in memory whose anti and output dependences `idx` loop `l`
    /// carries: privatized (unless declared in the loop's body), `firstprivate` when a value
    /// comes from before the loop, `lastprivate` when one is read after it and always the
    /// last iteration's. `Err`: why not.
    fn scalar_changes(
        &self,
        l: usize,
        storage: &Storage,
        idx: &[usize],
        inside: &BTreeSet<&str>,
    ) -> Result<Result<Vec<Requirement>, String>, Error> {
        let writers = self.writers(idx);
        let live_in = self.crossing(Crossing::In, l, storage, inside)?;
        let live_out = self.crossing(Crossing::Out, l, storage, inside)?;
        let mut needs = Vec::new();
        // A register or stack slot holding a source variable is named by the variable: the
        // clause is written on the variable. One holding none is the compiler's temporary:
        // the code compiled for the parallel loop gives each thread its own, computed from
        // the source's variables (its flow dependences are still checked, as every flow
        // dependence is). A value read after the loop is still said: debug information may
        // have lost the variable it is (legal_last's `last` at -O2).
        let named = self.variable_in(l, storage, &writers);
        let temporary = match storage {
            Storage::Register { var, .. } => var.is_none(),
            Storage::Scalar { name, .. } => name.starts_with("a stack slot"),
            _ => false,
        } && named == storage.describe();
        if matches!(storage, Storage::Scalar { .. }) && !temporary {
            needs.push(Requirement {
                change: Change::Privatize,
                storage: named.clone(),
                lines: writers.clone(),
                step: None,
            });
        }
        if !live_in.is_empty() && !temporary {
            needs.push(Requirement {
                change: Change::FirstPrivate,
                storage: named.clone(),
                lines: Vec::new(),
                step: None,
            });
        }
        if !live_out.is_empty() {
            if !self.written_last(l, &live_out)? {
                return Ok(Err(format!(
                    "{} is written in several iterations and read after the loop (at {}), and the value read is not always the last iteration's",
                    storage.describe(),
                    outside_lines(&live_out)
                )));
            }
            needs.push(Requirement {
                change: Change::LastPrivate,
                storage: named,
                lines: writers,
                step: None,
            });
        }
        Ok(Ok(needs))
    }

    /// Whether `storage` is a source variable declared in the body of loop `l`.
    fn declared_inside(&self, l: usize, storage: &Storage) -> bool {
        let loop_id = &self.region.loops[l].id;
        self.region
            .declared_in
            .get(&storage.describe())
            .is_some_and(|ls| ls.contains(loop_id))
    }

    /// The description of `storage` for a clause on loop `l`: a register debug information
    /// leaves unnamed at these `writers` is the source variable assigned on the same lines in
    /// the loop (gcc -O2 keeps hotspot's `delta` in xmm1 without saying so).
    fn variable_in(&self, l: usize, storage: &Storage, writers: &[String]) -> String {
        let Storage::Register { reg, var: None } = storage else {
            return storage.describe();
        };
        let loop_id = &self.region.loops[l].id;
        self.region
            .shared_variables
            .iter()
            .filter(|v| v.loops.contains(loop_id))
            .find(|v| v.registers.contains(reg) || v.lines.iter().any(|x| writers.contains(x)))
            .map_or_else(|| storage.describe(), |v| format!("`{}`", v.name))
    }

    /// An array whose anti and output dependences `idx` the loop carries. Written by several
    /// iterations (output dependences): privatized, when no value comes from before the loop
    /// and none is read after it. Read by one iteration and overwritten by a later one (anti
    /// only): read from a copy made before the loop, when its readers only ever see values
    /// from before the loop. `Err`: why not.
    fn array_changes(
        &self,
        c: &Carried<'_>,
        storage: &Storage,
        idx: &[usize],
        inside: &BTreeSet<&str>,
    ) -> Result<Result<Vec<Requirement>, String>, Error> {
        let deps = &self.region.dependences;
        let writers = self.writers(idx);
        let outputs: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| deps[i].kind == DepKind::Output)
            .collect();
        if self.any_carried(c, &outputs)? {
            let live_out = self.crossing(Crossing::Out, c.l, storage, inside)?;
            if !live_out.is_empty() {
                return Ok(Err(format!(
                    "several iterations write the same elements of {} (at {}), which are read after the loop (at {})",
                    storage.describe(),
                    writers.join(", "),
                    outside_lines(&live_out)
                )));
            }
            if !self
                .crossing(Crossing::In, c.l, storage, inside)?
                .is_empty()
            {
                return Ok(Err(format!(
                    "several iterations write the same elements of {} (at {}), and the loop also reads values of it written before the loop",
                    storage.describe(),
                    writers.join(", ")
                )));
            }
            return Ok(Ok(vec![Requirement {
                change: self.array_privatization(storage),
                storage: storage.describe(),
                lines: writers,
                step: None,
            }]));
        }
        let readers: BTreeSet<&str> = idx
            .iter()
            .filter(|&&i| deps[i].kind == DepKind::Anti)
            .map(|&i| deps[i].source.as_str())
            .collect();
        // A value the binary passes in a register (`Dependence::mirror`) is not a copied read.
        let fed_inside = deps.iter().any(|d| {
            d.kind == DepKind::Flow
                && d.mirror.is_none()
                && d.storage.root() == storage.root()
                && readers.contains(d.sink.as_str())
                && inside.contains(d.source.as_str())
        });
        if fed_inside {
            return Ok(Err(format!("it carries {}", self.describe_dep(idx[0]))));
        }
        Ok(Ok(vec![Requirement {
            change: Change::CopyIn,
            storage: storage.describe(),
            lines: self.lines_of(readers.into_iter()),
            step: None,
        }]))
    }

    /// How an array each iteration writes first is made private: by the clause where it names
    /// the array (a global or local array, anything in Fortran), by an array the body
    /// declares where the program reaches it through a pointer (a heap block, an array
    /// parameter: `private(sum)` on a `double *` gives each thread an undefined pointer).
    fn array_privatization(&self, storage: &Storage) -> Change {
        let heap = matches!(storage, Storage::Array { name } if name.contains("(heap block"));
        let section = storage
            .variable()
            .and_then(|v| self.region.sections.get(v).copied());
        if self.region.language == symbols::Language::Fortran || !(heap || section.is_some()) {
            return Change::Privatize;
        }
        Change::LocalArray { len: section }
    }

    /// Values crossing the border of loop `l` (`inside`: its statements) through `storage`
    /// (matched by variable): read inside from writes before it (`Crossing::In`), or written
    /// inside and read after it (`Crossing::Out`, with their pairs), in the region or beyond
    /// it. A value going from one run of the loop to a later one (both ends inside, in
    /// different iterations of the loops around it) crosses both ways: hotspot's `delta`,
    /// left unassigned by some iterations, is read by the next run of the loop.
    fn crossing(
        &self,
        way: Crossing,
        l: usize,
        storage: &Storage,
        inside: &BTreeSet<&str>,
    ) -> Result<Vec<Crossed>, Error> {
        let root = storage.root();
        self.crossing_of(way, l, &|s: &Storage| s.root() == root, inside)
    }

    /// [`Ctx::crossing`] for the storages `mine` accepts.
    fn crossing_of(
        &self,
        way: Crossing,
        l: usize,
        mine_storage: &dyn Fn(&Storage) -> bool,
        inside: &BTreeSet<&str>,
    ) -> Result<Vec<Crossed>, Error> {
        let mut out = Vec::new();
        for (i, d) in self.region.dependences.iter().enumerate() {
            if d.kind != DepKind::Flow || !mine_storage(&d.storage) {
                continue;
            }
            let (mine, other) = match way {
                Crossing::In => (&d.sink, &d.source),
                Crossing::Out => (&d.source, &d.sink),
            };
            if !inside.contains(mine.as_str()) {
                continue;
            }
            if inside.contains(other.as_str()) {
                if let Some(pairs) = self.across_runs(i, l)? {
                    out.push(Crossed {
                        pairs: matches!(way, Crossing::Out).then_some(pairs),
                        outside: format!(
                            "{} (in another run of the loop)",
                            line_of(self.region, other)
                        ),
                    });
                }
                continue;
            }
            {
                let pairs = match (way, &self.maps[i]) {
                    (Crossing::Out, Some(m)) => Some(Self::copy(m)?),
                    _ => None,
                };
                out.push(Crossed {
                    pairs,
                    outside: line_of(self.region, other),
                });
            }
        }
        let borders = match way {
            Crossing::In => &self.region.live_in,
            Crossing::Out => &self.region.live_out,
        };
        for (k, b) in borders.iter().enumerate() {
            if mine_storage(&b.storage) && inside.contains(b.stmt.as_str()) {
                let pairs = match way {
                    Crossing::Out => Some(Self::copy(&self.outs[k])?),
                    Crossing::In => None,
                };
                out.push(Crossed {
                    pairs,
                    outside: b.outside.clone(),
                });
            }
        }
        Ok(out)
    }

    /// The pairs of dependence `i`, both of whose ends run in loop `l`, that lie in different
    /// runs of the loop (different iterations of the loops around it); `None`: none does.
    fn across_runs(&self, i: usize, l: usize) -> Result<Option<UnionMap>, Error> {
        let Some(m) = self.maps[i].as_ref() else {
            return Ok(None);
        };
        let d = &self.region.dependences[i];
        let depth_in = |name: &str| {
            self.region
                .statements
                .iter()
                .find(|s| s.name == name)
                .and_then(|s| s.loops.iter().position(|&x| x == l).map(|k| (s, k)))
        };
        let (Some((source, depth)), Some((sink, _))) = (depth_in(&d.source), depth_in(&d.sink))
        else {
            return Ok(None);
        };
        if depth == 0 || self.distances.within_runs(i, depth) {
            return Ok(None);
        }
        // Each end projected onto the loops around `l`; pairs whose projections differ (a
        // flow dependence's source runs first: lexicographically before).
        let outer = |s: &Statement| {
            let dims = s.loops.len();
            let rows: Vec<Affine> = (0..depth).map(|k| Affine::dim(dims, k)).collect();
            Polyhedra::schedule(&s.name, dims, &rows)
        };
        let e = || islx::isl("finding values crossing runs of a loop");
        let from = schedule_map(self.isl, &[outer(source)])?;
        let to = schedule_map(self.isl, &[outer(sink)])?;
        let across = from
            .lex_lt_union_map(to)
            .and_then(|o| m.copy()?.intersect(o))
            .map_err(e())?;
        Ok((!empty(&across)?).then_some(across))
    }

    /// Whether every value of `live_out` was written in the last iteration of loop `l`, for
    /// each iteration of the loops around it: then the copy of the last iteration holds it,
    /// and `lastprivate` is legal.
    fn written_last(&self, l: usize, live_out: &[Crossed]) -> Result<bool, Error> {
        let in_l: Vec<(usize, &Statement)> = self
            .region
            .statements
            .iter()
            .enumerate()
            .filter(|(_, s)| s.loops.contains(&l))
            .collect();
        let Some(d) = in_l
            .first()
            .and_then(|(_, s)| s.loops.iter().position(|&x| x == l))
        else {
            return Ok(false);
        };
        // Each statement of the loop projected onto the loops down to `l`.
        let proj: Vec<Polyhedra> = in_l
            .iter()
            .map(|(_, s)| {
                let dims = s.loops.len();
                let rows: Vec<Affine> = (0..=d).map(|k| Affine::dim(dims, k)).collect();
                Polyhedra::schedule(&s.name, dims, &rows)
            })
            .collect();
        let proj = schedule_map(self.isl, &proj)?;
        let all = self.domains_of(in_l.iter().map(|(i, _)| *i))?;
        let iterations = all
            .apply(Self::copy(&proj)?)
            .map_err(islx::isl("projecting domains"))?;
        let mut produced: Option<UnionSet> = None;
        for m in live_out.iter().filter_map(|o| o.pairs.as_ref()) {
            let r = Self::copy(m)?
                .domain()
                .map_err(islx::isl("taking the producers"))?;
            produced = Some(match produced {
                None => r,
                Some(p) => p.union(r).map_err(islx::isl("uniting producers"))?,
            });
        }
        let Some(produced) = produced else {
            return Ok(true);
        };
        let produced = produced
            .apply(proj)
            .map_err(islx::isl("projecting producers"))?;
        // A later iteration of `l` with the same outer iterations as some producer.
        let n = d + 1;
        let later = Polyhedra::relation(
            n,
            vec![Convex {
                exists: 0,
                equalities: (0..d)
                    .map(|k| time_row(n, &[(k, 1), (n + k, -1)], 0))
                    .collect(),
                inequalities: vec![time_row(n, &[(n + d, 1), (d, -1)], -1)],
            }],
        );
        let later = self.relation(&later)?;
        let bad = later
            .intersect_domain(produced)
            .and_then(|m| m.intersect_range(iterations))
            .map_err(islx::isl("finding later iterations"))?;
        empty(&bad)
    }
}

/// The variable a storage description names: `` `sum` `` for `` `sum`+16 `` and
/// ``array `sum` `` (unrolled code reaches one array through several fixed addresses).
/// Why a loop whose body can leave it early (at `at`) cannot run in parallel.
pub(crate) fn early_exit(at: &str) -> String {
    format!(
        "its body can leave it early (at {at}): OpenMP's `for` runs every iteration, and takes no `break`"
    )
}

fn variable(storage: &str) -> &str {
    let s = storage.strip_prefix("array ").unwrap_or(storage);
    match (s.starts_with('`'), s[1..].find('`')) {
        (true, Some(end)) => &s[..end + 2],
        _ => s,
    }
}

/// The number of points of a domain that is one box (each constraint bounds one counter, by
/// constants): `None` for any other shape.
fn box_volume(d: &Polyhedra) -> Option<u64> {
    let [p] = &d.pieces[..] else { return None };
    let dims = d.input.dims;
    if p.exists != 0 || !p.equalities.is_empty() {
        return None;
    }
    let (mut lo, mut hi) = (vec![None; dims], vec![None; dims]);
    for row in &p.inequalities {
        let mut counters = (0..dims).filter(|&k| row[k] != 0);
        let (Some(k), None) = (counters.next(), counters.next()) else {
            return None;
        };
        // c * x + e >= 0: x >= -e / c for c > 0, x <= e / -c for c < 0.
        let (c, e) = (row[k], *row.last()?);
        if c > 0 {
            let b = (-e).div_euclid(c) + i64::from((-e).rem_euclid(c) != 0);
            lo[k] = Some(lo[k].map_or(b, |x: i64| x.max(b)));
        } else {
            let b = e.div_euclid(-c);
            hi[k] = Some(hi[k].map_or(b, |x: i64| x.min(b)));
        }
    }
    (0..dims).try_fold(1u64, |n, k| {
        let extent = u64::try_from(hi[k]? - lo[k]? + 1).ok()?;
        n.checked_mul(extent)
    })
}

/// One requirement per change and variable, with the lines of all; a variable computed from
/// the loop counters is not also privatized (its closed form says so).
fn merge(needs: Vec<Requirement>) -> Vec<Requirement> {
    let closed: BTreeSet<String> = needs
        .iter()
        .filter(|r| matches!(r.change, Change::ClosedForm | Change::Linear))
        .map(|r| variable(&r.storage).to_string())
        .collect();
    let mut by: BTreeMap<(Change, String), (BTreeSet<String>, Option<String>)> = BTreeMap::new();
    for r in needs {
        if r.change == Change::Privatize && closed.contains(variable(&r.storage)) {
            continue;
        }
        let entry = by
            .entry((r.change, variable(&r.storage).to_string()))
            .or_default();
        entry.0.extend(r.lines);
        entry.1 = entry.1.take().or(r.step);
    }
    by.into_iter()
        .map(|((change, storage), (lines, step))| Requirement {
            change,
            storage,
            lines: lines.into_iter().collect(),
            step,
        })
        .collect()
}

/// The original schedule (Kelly's mapping), with the dimensions of each statement optionally
/// permuted: `perm[s]` gives, for each schedule loop level, which of the statement's
/// dimensions runs there. One map per statement, to times `[p0, i0, p1, i1, ..., pk]` padded
/// with zeros to [`sched_len`].
pub(crate) fn kelly(region: &Region, perm: &dyn Fn(&Statement) -> Vec<usize>) -> Vec<Polyhedra> {
    let n = sched_len(region);
    region
        .statements
        .iter()
        .map(|s| {
            let position = |lvl: usize| s.positions.get(lvl).copied().unwrap_or(0);
            kelly_map(s, &perm(s), &position, n)
        })
        .collect()
}

/// One statement's map to times `[p0, i_{order[0]}, p1, i_{order[1]}, ..., pk]`, its static
/// positions given by `position(level)`, padded with zeros to `n` entries.
pub(crate) fn kelly_map(
    s: &Statement,
    order: &[usize],
    position: &dyn Fn(usize) -> u32,
    n: usize,
) -> Polyhedra {
    let dims = s.loops.len();
    let at = |lvl: usize| Affine::constant(dims, i64::from(position(lvl)));
    let mut rows: Vec<Affine> = Vec::with_capacity(n);
    for (lvl, &d) in order.iter().enumerate() {
        rows.push(at(lvl));
        rows.push(Affine::dim(dims, d));
    }
    rows.push(at(order.len()));
    while rows.len() < n {
        rows.push(Affine::constant(dims, 0));
    }
    Polyhedra::schedule(&s.name, dims, &rows)
}

/// Per-statement schedule maps as one union map.
pub(crate) fn schedule_map(ctx: &Context, maps: &[Polyhedra]) -> Result<UnionMap, Error> {
    crate::poly::union_of_maps(ctx, maps)
}
