//! The few isl operations the feedback stage needs, with errors in words, and isl's schedule
//! tree read back into plain Rust values.

use crate::affine::Affine;
use crate::params::Parameterizer;
use crate::Error;
use isl_rs::{
    BasicMap, Context, DimType, LibISLError, Map, ScheduleConstraints, ScheduleNode,
    ScheduleNodeType, Set, UnionMap, UnionSet,
};
use std::collections::BTreeMap;

extern "C" {
    fn isl_schedule_to_str(schedule: usize) -> *mut std::os::raw::c_char;
    fn isl_union_map_to_str(umap: usize) -> *mut std::os::raw::c_char;
    fn isl_union_set_to_str(uset: usize) -> *mut std::os::raw::c_char;
    fn isl_set_to_str(set: usize) -> *mut std::os::raw::c_char;
    fn isl_basic_map_to_str(bmap: usize) -> *mut std::os::raw::c_char;
    fn isl_ast_expr_to_C_str(expr: usize) -> *mut std::os::raw::c_char;
}

/// An isl object isl can print.
pub(crate) trait Printable {
    /// isl's text of the object: a string isl allocated, or null when isl failed.
    fn isl_text(&self) -> *mut std::os::raw::c_char;
}

impl Printable for isl_rs::Schedule {
    fn isl_text(&self) -> *mut std::os::raw::c_char {
        // SAFETY: `ptr` is a live isl_schedule owned by `self`; printing does not take it.
        unsafe { isl_schedule_to_str(self.ptr) }
    }
}

impl Printable for UnionMap {
    fn isl_text(&self) -> *mut std::os::raw::c_char {
        // SAFETY: as above, for an isl_union_map.
        unsafe { isl_union_map_to_str(self.ptr) }
    }
}

impl Printable for UnionSet {
    fn isl_text(&self) -> *mut std::os::raw::c_char {
        // SAFETY: as above, for an isl_union_set.
        unsafe { isl_union_set_to_str(self.ptr) }
    }
}

impl Printable for Set {
    fn isl_text(&self) -> *mut std::os::raw::c_char {
        // SAFETY: as above, for an isl_set.
        unsafe { isl_set_to_str(self.ptr) }
    }
}

impl Printable for isl_rs::BasicMap {
    fn isl_text(&self) -> *mut std::os::raw::c_char {
        // SAFETY: as above, for an isl_basic_map.
        unsafe { isl_basic_map_to_str(self.ptr) }
    }
}

impl Printable for isl_rs::ASTExpr {
    /// As C.
    fn isl_text(&self) -> *mut std::os::raw::c_char {
        // SAFETY: as above, for an isl_ast_expr.
        unsafe { isl_ast_expr_to_C_str(self.ptr) }
    }
}

/// The text of an isl object. isl-rs's `to_str` reads isl's result without checking it, and
/// isl returns null once a budget stop (or the watchdog) fails its operations: that read
/// crashed. Here a null is the budget error, and isl's string is freed.
pub(crate) fn text(obj: &impl Printable) -> Result<String, Error> {
    let raw = obj.isl_text();
    if raw.is_null() {
        return Err(Error::TooComplex);
    }
    // SAFETY: isl returned a valid NUL-terminated string that the caller owns.
    let out = unsafe { std::ffi::CStr::from_ptr(raw) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: isl allocates with malloc by default; the string is not used after this.
    unsafe { libc::free(raw.cast()) };
    Ok(out)
}

pub(crate) fn isl(what: &str) -> impl FnOnce(LibISLError) -> Error + '_ {
    move |e| {
        let text = e.to_string();
        // The error kind is only visible through the message (`[Quota] ...`).
        if text.starts_with("[Quota]") {
            Error::TooComplex
        } else {
            Error::Isl(format!("{what}: {text}"))
        }
    }
}

/// Gives the next step of an analysis the whole operation budget again: the operations
/// counted so far and a quota error are forgotten. A context the watchdog stopped (its budget
/// lowered to one operation) stays stopped.
pub(crate) fn fresh_budget(ctx: &Context) {
    ctx.reset_error();
    ctx.reset_operations();
}

/// An optional step that stopped at isl's budget is skipped: its `what` is noted for the
/// region's `why_not`, and the analysis goes on with the next step (on a fresh budget). Any
/// other error ends the analysis.
pub(crate) fn skip_over_budget(
    ctx: &Context,
    step: Result<(), Error>,
    what: &'static str,
    skipped: &mut Vec<&'static str>,
) -> Result<(), Error> {
    match step {
        Err(Error::TooComplex) => {
            skipped.push(what);
            fresh_budget(ctx);
            Ok(())
        }
        other => other,
    }
}

/// Whether `ctx` has used up its operation budget: then every operation fails, and isl may
/// have reported the failure under another name (a parser says "syntax error").
fn over_budget(ctx: &Context) -> bool {
    Set::read_from_str(ctx, "{ [i] : 0 <= i <= 1 }")
        .and_then(|s| s.is_empty())
        .is_err()
}

/// Runs `work` on a fresh isl context within the budget of `opts`: at most
/// `isl_max_operations` operations and `isl_max_seconds` seconds (operations vary in cost by
/// orders of magnitude, so the clock bounds the worst case). Past either, the error is
/// [`Error::TooComplex`]. isl's errors come back as values (they become a region's `why_not`)
/// instead of being printed.
pub(crate) fn limited<T>(
    opts: &crate::Options,
    work: impl FnOnce(&Context) -> Result<T, Error>,
) -> Result<T, Error> {
    let ctx = Context::alloc();
    ctx.set_max_operations(opts.isl_max_operations);
    // Setting an option on a fresh context cannot fail.
    let _ = isl_rs::Options::set_on_error(&ctx, 1);
    let result = {
        let _watchdog = Watchdog::start(&ctx, opts.isl_max_seconds, opts.cancel);
        work(&ctx)
    };
    match result {
        Err(_) if over_budget(&ctx) => Err(Error::TooComplex),
        r => r,
    }
}

/// Aborts the computation running on an isl context after a time limit or once `cancel` is
/// set, unless dropped first (dropping waits for its thread, so it never touches a freed
/// context).
struct Watchdog {
    done: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(
        ctx: &Context,
        seconds: f64,
        cancel: Option<&'static std::sync::atomic::AtomicBool>,
    ) -> Watchdog {
        let ptr = ctx.ptr;
        // A budget too large for a Duration is no limit.
        let limit = std::time::Duration::try_from_secs_f64(seconds.max(0.0))
            .unwrap_or(std::time::Duration::MAX);
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            // The cancel flag is polled at this period.
            const POLL: std::time::Duration = std::time::Duration::from_millis(50);
            let deadline = std::time::Instant::now().checked_add(limit);
            let expired = loop {
                let left = deadline.map_or(std::time::Duration::MAX, |d| {
                    d.saturating_duration_since(std::time::Instant::now())
                });
                let step = if cancel.is_some() {
                    left.min(POLL)
                } else {
                    left
                };
                match wait.recv_timeout(step) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        let cancelled =
                            cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed));
                        if cancelled || step == left {
                            break true;
                        }
                    }
                    _ => break false,
                }
            };
            if expired {
                // Lower the operation budget under isl's feet: its next operation then fails
                // with the ordinary quota error. (isl_ctx_abort would be the documented way,
                // but its error carries no message, and isl-rs reads the message of every
                // error it returns: a null pointer.) The budget is one aligned word, which
                // isl only reads.
                let ctx = Context {
                    ptr,
                    should_free_on_drop: false,
                };
                ctx.set_max_operations(1);
            }
        });
        Watchdog {
            done: Some(done),
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.done.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The start of an isl string for an error message: whole relations of real programs run to
/// tens of kilobytes, which would bury the message.
fn excerpt(text: &str) -> String {
    const MAX: usize = 160;
    match text.char_indices().nth(MAX) {
        Some((end, _)) => format!("`{} ...` ({} characters)", &text[..end], text.len()),
        None => format!("`{text}`"),
    }
}

pub(crate) fn union_set(ctx: &Context, text: &str) -> Result<UnionSet, Error> {
    UnionSet::read_from_str(ctx, text)
        .map_err(|e| isl(&format!("reading the set {}", excerpt(text)))(e))
}

pub(crate) fn union_map(ctx: &Context, text: &str) -> Result<UnionMap, Error> {
    UnionMap::read_from_str(ctx, text)
        .map_err(|e| isl(&format!("reading the map {}", excerpt(text)))(e))
}

/// A band member of the computed schedule.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Member {
    pub coincident: bool,
    /// Per statement: its row (affine over its own dimensions), `None` if not linear.
    pub rows: BTreeMap<String, Option<Affine>>,
}

/// isl's schedule tree, reduced to what the suggestions need.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tree {
    Band {
        permutable: bool,
        members: Vec<Member>,
        child: Box<Tree>,
    },
    /// Children run one after the other (sequence) or in any order (set); each child is
    /// filtered to its statements.
    Sequence(Vec<(Vec<String>, Tree)>),
    Leaf,
}

impl Tree {
    /// Statements scheduled under this node, in order.
    pub fn statements(&self, all: &[String]) -> Vec<String> {
        match self {
            Tree::Band { child, .. } => child.statements(all),
            Tree::Sequence(children) => children.iter().flat_map(|(s, _)| s.clone()).collect(),
            Tree::Leaf => all.to_vec(),
        }
    }
}

fn read_tree(n: &ScheduleNode) -> Result<Tree, Error> {
    let ty = n.get_type().map_err(isl("reading a schedule node"))?;
    let child = |i: i32| -> Result<Tree, Error> {
        let c = n.get_child(i).map_err(isl("reading a schedule child"))?;
        read_tree(&c)
    };
    Ok(match ty {
        ScheduleNodeType::Band => {
            let m = n.band_n_member().map_err(isl("reading a band"))?;
            let permutable = n.band_get_permutable().map_err(isl("reading a band"))?;
            let sched = n
                .band_get_partial_schedule_union_map()
                .map_err(isl("reading a band's schedule"))?;
            let rows = crate::poly::schedule_rows(&sched);
            let mut members = Vec::new();
            for k in 0..m {
                let coincident = n
                    .band_member_get_coincident(k)
                    .map_err(isl("reading a band member"))?;
                let rows = rows
                    .iter()
                    .map(|(name, r)| (name.clone(), r.get(k as usize).cloned().flatten()))
                    .collect();
                members.push(Member { coincident, rows });
            }
            Tree::Band {
                permutable,
                members,
                child: Box::new(child(0)?),
            }
        }
        ScheduleNodeType::Sequence | ScheduleNodeType::Set => {
            let k = n.n_children().map_err(isl("reading a sequence"))?;
            let mut children = Vec::new();
            for i in 0..k {
                let f = n.get_child(i).map_err(isl("reading a filter"))?;
                let filter = f.filter_get_filter().map_err(isl("reading a filter"))?;
                let names = crate::poly::tuple_names(&filter);
                let sub = match f.n_children().map_err(isl("reading a filter"))? {
                    0 => Tree::Leaf,
                    _ => {
                        let c = f.get_child(0).map_err(isl("reading a filter"))?;
                        read_tree(&c)?
                    }
                };
                children.push((names, sub));
            }
            Tree::Sequence(children)
        }
        ScheduleNodeType::Leaf => Tree::Leaf,
        // Domain, context, mark, filter and the like: look through them.
        _ => match n.n_children().map_err(isl("reading a node"))? {
            0 => Tree::Leaf,
            _ => child(0)?,
        },
    })
}

/// How a region's schedule was found: the first of these isl solves within its share of the
/// budget. Each later one asks less of isl.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// isl's scheduler (Pluto-style bands, per strongly connected component), with schedule
    /// coefficients bounded by 4 and constant terms by 8: the domains of a trace have
    /// concrete bounds, and unbounded constants make isl's searches explode (lu: over a
    /// minute unbounded, 0.3 s bounded).
    Bands,
    /// The same, with each strongly connected component of the dependence graph scheduled
    /// apart (no fusion across them).
    SerializedSccs,
    /// Feautrier's scheduler: one dimension at a time, carrying as many dependences as
    /// possible; no bands to tile, but a valid order and the parallel loops that remain.
    Feautrier,
}

impl Strategy {
    const ALL: [Strategy; 3] = [
        Strategy::Bands,
        Strategy::SerializedSccs,
        Strategy::Feautrier,
    ];

    /// Share of the region's isl time budget.
    fn share(self) -> f64 {
        match self {
            Strategy::Bands => 0.5,
            Strategy::SerializedSccs | Strategy::Feautrier => 0.25,
        }
    }

    /// Its name in report.json.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Bands => "bands",
            Strategy::SerializedSccs => "serialized_sccs",
            Strategy::Feautrier => "feautrier",
        }
    }

    fn configure(self, ctx: &Context) -> Result<(), Error> {
        let opt = |r: Result<isl_rs::Stat, LibISLError>| {
            r.map(drop).map_err(isl("setting scheduler options"))
        };
        // The incremental scheduler (per strongly connected component) keeps the ILP small.
        opt(isl_rs::Options::set_schedule_whole_component(ctx, 0))?;
        opt(isl_rs::Options::set_schedule_max_coefficient(ctx, 4))?;
        opt(isl_rs::Options::set_schedule_max_constant_term(ctx, 8))?;
        opt(isl_rs::Options::set_schedule_serialize_sccs(
            ctx,
            i32::from(self == Strategy::SerializedSccs),
        ))?;
        // 1 is ISL_SCHEDULE_ALGORITHM_FEAUTRIER, 0 isl's own.
        opt(isl_rs::Options::set_schedule_algorithm(
            ctx,
            i32::from(self == Strategy::Feautrier),
        ))?;
        // Errors come back as values (and become a region's `why_not`), not as isl's own prints.
        opt(isl_rs::Options::set_on_error(ctx, 1))
    }
}

/// A computed schedule: isl's text, its tree, and how it was found.
pub(crate) struct Scheduled {
    pub text: String,
    pub tree: Tree,
    pub strategy: Strategy,
    /// The schedule as one map from statement instances to times.
    pub map: String,
    /// The same after tiling every permutable band of two or more members: what the tiling
    /// advice asks for.
    pub tiled: String,
    /// The same with tiles of [`CHECK_TILE`] iterations: what the tiling advice is checked
    /// with against the dependences the scheduler did not see. Tiles of the advised size can
    /// hold a whole loop of the profiled input and reorder nothing there, which a larger
    /// input's tiles would.
    pub tiled_check: String,
}

/// Iterations per loop of the tiles a tiling is checked with (see [`Scheduled::tiled_check`]).
const CHECK_TILE: i64 = 2;

/// Schedules `domain` under the dependences `validity` (source → sink, also the proximity
/// and coincidence constraints), trying each [`Strategy`] in turn, each on a fresh isl
/// context within its share of the budget of `opts`. The error is the first strategy's.
pub(crate) fn schedule(
    opts: &crate::Options,
    domain: &str,
    validity: &str,
    params: &Parameterizer,
) -> Result<Scheduled, Error> {
    let mut first_error = None;
    // Whether isl answered something other than its budget: only then may fixed sizes help.
    let mut failed_on_sizes = false;
    // The problem, for reproducing it with isl's own `isl_schedule` tool.
    let debug = std::env::var_os("POLYPROF_DEBUG_SCHEDULE").is_some();
    if debug {
        let ctx = Context::alloc();
        let context = params.context(&ctx).and_then(|c| text(&c));
        let context = context.unwrap_or_else(|e| e.to_string());
        eprintln!("DOMAIN {domain}\nVALIDITY {validity}\nCONTEXT {context}");
    }
    // At the program's own sizes when the sizes as parameters fail: two large constants
    // that differ by one may become `P3` and 242, a distance `242 - P3` that is backward
    // for every `P3` above the observed 241, which no schedule carries.
    // With more than a few sizes as parameters, isl's ILP has a dimension per parameter in
    // every row and stalls: floyd-warshall's irregular pieces bring 54 large constants, and
    // its two regions spent 14 s at the budget. Such a problem goes at the observed sizes
    // from the start.
    let rounds = match used_params(domain, validity) {
        0 => &[false][..],
        n if n > MAX_SCHEDULED_PARAMS => &[true][..],
        _ => &[false, true][..],
    };
    for (&fixed, strategy) in rounds
        .iter()
        .flat_map(|f| Strategy::ALL.iter().map(move |s| (f, *s)))
    {
        if fixed && !failed_on_sizes && rounds.len() > 1 {
            break;
        }
        let share = crate::Options {
            isl_max_seconds: opts.isl_max_seconds * strategy.share(),
            isl_max_operations: (opts.isl_max_operations as f64 * strategy.share()) as u64,
            ..opts.clone()
        };
        let attempt = limited(&share, |ctx| {
            strategy.configure(ctx)?;
            let validity = union_map(ctx, validity)?;
            let (text, tree, map, [tiled, tiled_check]) =
                schedule_in(ctx, domain, &validity, params, fixed, opts.tile_size)?;
            Ok(Scheduled {
                text,
                tree,
                strategy,
                map,
                tiled,
                tiled_check,
            })
        });
        match attempt {
            Ok(s) => return Ok(s),
            Err(e) => {
                if debug {
                    let sizes = if fixed { " (fixed sizes)" } else { "" };
                    eprintln!("{}{sizes}: {e}", strategy.as_str());
                }
                failed_on_sizes |= !matches!(e, Error::TooComplex);
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.unwrap_or(Error::TooComplex))
}

/// The most pieces a statement's dependences on itself keep for the scheduler (see
/// [`simplified`]).
const MAX_PIECES: i32 = 64;

/// The most sizes a scheduling problem keeps as parameters (see [`schedule`]).
const MAX_SCHEDULED_PARAMS: usize = 6;

/// How many distinct parameters (`P<k>`) the constraints of `domain` and `validity` use, not
/// counting the parameter lists that declare them.
fn used_params(domain: &str, validity: &str) -> usize {
    let mut used = std::collections::BTreeSet::new();
    for text in [domain, validity] {
        let body = text.find('{').map_or(text, |k| &text[k..]);
        let bytes = body.as_bytes();
        for (k, _) in body.match_indices('P') {
            let word_start =
                k == 0 || !(bytes[k - 1].is_ascii_alphanumeric() || bytes[k - 1] == b'_');
            let digits = body[k + 1..].bytes().take_while(u8::is_ascii_digit).count();
            if word_start && digits > 0 {
                used.insert(&body[k + 1..k + 1 + digits]);
            }
        }
    }
    used.len()
}

/// `m` with each statement's dependences on itself that come in more than [`MAX_PIECES`]
/// pieces (a loop whose stores depend on data, floyd-warshall's initialization: 1,532)
/// replaced by their [`distance_hull`]: a schedule that respects it respects them, and isl's
/// scheduler stalls on such pieces at any budget. Before the sizes are fixed or simplified:
/// both take as long on those pieces (a simple hull of floyd-warshall's did not end in 5 s).
/// Taken before the problem is printed for the scheduler's contexts (see
/// [`crate::analyze`]'s `schedule_region`): reading floyd-warshall's 1,532 pieces back from
/// their text took isl 1.7 s, once per strategy.
pub(crate) fn hulled(m: UnionMap) -> Result<UnionMap, Error> {
    let e = || isl("taking the hull of dependences");
    let maps = m.get_map_list().map_err(e())?;
    let big = |map: &Map| -> Result<bool, Error> {
        let same_statement =
            map.get_tuple_name(DimType::In).ok() == map.get_tuple_name(DimType::Out).ok();
        Ok(same_statement && map.n_basic_map().map_err(e())? > MAX_PIECES)
    };
    let mut any = false;
    for k in 0..maps.size().map_err(e())? {
        any |= big(&maps.get_at(k).map_err(e())?)?;
    }
    if !any {
        return Ok(m);
    }
    let mut out = UnionMap::empty(m.get_space().map_err(e())?).map_err(e())?;
    for k in 0..maps.size().map_err(e())? {
        let map = maps.get_at(k).map_err(e())?;
        let map = if big(&map)? {
            distance_hull(map).map_err(e())?
        } else {
            map
        };
        out = UnionMap::from_map(map)
            .and_then(|u| out.union(u))
            .map_err(e())?;
    }
    Ok(out)
}

/// `{ S[i] -> S[i + d] : d in D, i before i + d }`, where `D` is the simple hull of the
/// distances of `map` (a statement's dependences on itself), whatever the sizes: every
/// dependence of `map` is in it. Distances are cheap where the relation is not: each piece's
/// sizes (parameters) go, and floyd-warshall's 1,532 pieces become a handful of distances.
fn distance_hull(map: Map) -> Result<Map, LibISLError> {
    let name = map.get_tuple_name(DimType::In)?.to_string();
    let distances = map
        .deltas()?
        .project_out_all_params()?
        .coalesce()?
        .simple_hull()
        .and_then(Set::from_basic_set)?
        .set_tuple_name(&name)?;
    let space = distances.get_space()?;
    let shift = Map::from_domain_and_range(Set::universe(space.copy()?)?, distances)?;
    let forward = Map::lex_lt(space.copy()?)?;
    Map::identity(space.map_from_set()?)?
        .sum(shift)?
        .intersect(forward)
}

/// `m` in fewer pieces for the scheduler, whose ILP grows with them: what the parameters'
/// context implies goes (a part's projected relations come as `i <= 8 or i <= 15 or ... or
/// i <= P1`, where `P1 >= 99`), then pieces with the same affine hull (the same distances) are
/// coalesced. Pieces of different hulls stay apart: coalescing heat-3d's seven uniform
/// stencil distances into their octahedron took isl's scheduler from 0.2 s to over 200 s;
/// coalescing floyd-warshall's relation under the context took 8 s.
fn simplified(m: UnionMap, context: &Set) -> Result<UnionMap, Error> {
    let e = || isl("simplifying dependences");
    let gist = context.copy().map_err(isl("copying the context"))?;
    let m = m.gist_params(gist).map_err(e())?;
    let space = m.get_space().map_err(e())?;
    let mut out = UnionMap::empty(space).map_err(e())?;
    let maps = m.get_map_list().map_err(e())?;
    for k in 0..maps.size().map_err(e())? {
        // Pieces of one map (one pair of statements) by affine hull, as isl prints it (in a
        // normal form: comparing hulls with isl took floyd-warshall 2.4 s).
        let mut groups: BTreeMap<String, UnionMap> = BTreeMap::new();
        let pieces = maps
            .get_at(k)
            .and_then(|m| m.get_basic_map_list())
            .map_err(e())?;
        let count = pieces.size().map_err(e())?;
        for p in 0..count {
            let piece = pieces.get_at(p).map_err(e())?;
            let hull = piece.copy().and_then(BasicMap::affine_hull).map_err(e())?;
            let key = hull.to_str().map_err(e())?.to_string();
            let piece = UnionMap::from_basic_map(piece).map_err(e())?;
            let group = match groups.remove(&key) {
                Some(u) => u.union(piece).map_err(e())?,
                None => piece,
            };
            groups.insert(key, group);
        }
        for u in groups.into_values() {
            out = u.coalesce().and_then(|u| out.union(u)).map_err(e())?;
        }
    }
    Ok(out)
}

/// One scheduler run on a configured context (`fixed`: the parameters at their observed
/// values): the schedule's text, tree, map, and maps once
/// tiled by `tile` and by [`CHECK_TILE`].
fn schedule_in(
    ctx: &Context,
    domain: &str,
    validity: &UnionMap,
    params: &Parameterizer,
    fixed: bool,
    tile: u32,
) -> Result<(String, Tree, String, [String; 2]), Error> {
    // A parameter the problem does not use (a large constant of another relation of the
    // region) still enters isl's ILP as a dimension of every schedule row: lu's main region
    // took 0.9 s without one, and over a minute with it.
    let dom = union_set(ctx, domain)?
        .drop_unused_params()
        .map_err(isl("dropping unused parameters"))?;
    let validity = validity
        .copy()
        .and_then(UnionMap::drop_unused_params)
        .map_err(isl("dropping unused parameters"))?;
    let mut used = param_names(&dom.get_space().map_err(isl("reading a space"))?);
    used.extend(param_names(
        &validity.get_space().map_err(isl("reading a space"))?,
    ));
    let validity = hulled(validity)?;
    let (dom, validity, ctx_set) = match fixed {
        // The sizes substituted, not only fixed by the context: isl's scheduler keeps a
        // column per parameter in every row of its ILP either way, and floyd-warshall's
        // initialization brings 71.
        true => {
            let e = || isl("substituting the observed sizes");
            let sizes = params.fixed_of(ctx, &used)?;
            let copy = || sizes.copy().map_err(e());
            let dom = dom
                .intersect_params(copy()?)
                .and_then(UnionSet::project_out_all_params)
                .map_err(e())?;
            let validity = validity
                .intersect_params(copy()?)
                .and_then(UnionMap::project_out_all_params)
                .map_err(e())?;
            let none = sizes.project_out_all_params().map_err(e())?;
            (dom, validity, none)
        }
        false => (dom, validity, params.context_of(ctx, &used)?),
    };
    let validity = simplified(validity, &ctx_set)?;
    // The operation budget is the scheduler's: reading and simplifying floyd-warshall's
    // 157-piece relation took 1.2 M operations, and its schedule then 0.3 M. The clock still
    // bounds the whole.
    fresh_budget(ctx);
    let validity = &validity;
    let copy = |m: &UnionMap| m.copy().map_err(isl("copying dependences"));
    let sc = ScheduleConstraints::on_domain(dom)
        .and_then(|s| s.set_context(ctx_set))
        .map_err(isl("setting up the scheduler"))?
        .set_validity(copy(validity)?)
        .and_then(|s| s.set_proximity(validity.copy()?))
        .and_then(|s| s.set_coincidence(validity.copy()?))
        .map_err(isl("setting up the scheduler"))?;
    let s = sc.compute_schedule().map_err(isl("computing a schedule"))?;
    let printed = text(&s)?;
    let map_of = |s: &isl_rs::Schedule| -> Result<String, Error> {
        let m = s.get_map().map_err(isl("flattening the schedule"))?;
        text(&m)
    };
    let map = map_of(&s)?;
    let root = || s.get_root().map_err(isl("reading the schedule"));
    let tree = read_tree(&root()?)?;
    let tiled = |size: i64| -> Result<String, Error> {
        let t = tile_bands(ctx, root()?, size)?
            .get_schedule()
            .map_err(isl("reading the tiled schedule"))?;
        map_of(&t)
    };
    let tiled = [tiled(i64::from(tile.max(1)))?, tiled(CHECK_TILE)?];
    Ok((printed, tree, map, tiled))
}

/// The names of a space's parameters.
fn param_names(space: &isl_rs::Space) -> Vec<String> {
    let n = space.dim(isl_rs::DimType::Param).unwrap_or(0);
    (0..n.max(0) as u32)
        .filter_map(|k| {
            space
                .get_dim_name(isl_rs::DimType::Param, k)
                .ok()
                .map(str::to_string)
        })
        .collect()
}

/// Tiles every permutable band of two or more members below `node` by `size`, returning the
/// node back at its own position.
fn tile_bands(ctx: &Context, node: ScheduleNode, size: i64) -> Result<ScheduleNode, Error> {
    let e = || isl("tiling a band");
    let mut node = node;
    if node.get_type().map_err(e())? == ScheduleNodeType::Band
        && node.band_get_permutable().map_err(e())?
        && node.band_n_member().map_err(e())? >= 2
    {
        let n = node.band_n_member().map_err(e())?;
        let mut sizes = isl_rs::MultiVal::zero(node.band_get_space().map_err(e())?).map_err(e())?;
        for k in 0..n {
            let v = isl_rs::Val::int_from_si(ctx, size).map_err(e())?;
            sizes = sizes.set_val(k, v).map_err(e())?;
        }
        // The tile band replaces the node; the point band is its child.
        node = node.band_tile(sizes).map_err(e())?;
        node = node.first_child().map_err(e())?;
        if node.has_children().map_err(e())? {
            node = tile_children(ctx, node, size)?;
        }
        return node.parent().map_err(e());
    }
    if node.has_children().map_err(e())? {
        node = tile_children(ctx, node, size)?;
    }
    Ok(node)
}

/// [`tile_bands`] on each child of `node`.
fn tile_children(ctx: &Context, node: ScheduleNode, size: i64) -> Result<ScheduleNode, Error> {
    let e = || isl("walking the schedule");
    let mut child = node.first_child().map_err(e())?;
    loop {
        child = tile_bands(ctx, child, size)?;
        if !child.has_next_sibling().map_err(e())? {
            break;
        }
        child = child.next_sibling().map_err(e())?;
    }
    child.parent().map_err(e())
}

/// The pairs of `deps` (source → sink) that `schedule` orders source-first: all of them for
/// exact dependences (a producer always ran before its consumer); an over-approximation may
/// also hold backward or self pairs, which no schedule can satisfy and which this removes.
/// Only the schedule's pieces for the statements `deps` relates are ordered against each
/// other: ordering every pair of statements of a region costs seconds.
pub(crate) fn forward(deps: UnionMap, schedule: &UnionMap) -> Result<UnionMap, Error> {
    let e = || isl("keeping forward dependences");
    let on = |side: UnionSet| -> Result<UnionMap, Error> {
        schedule
            .copy()
            .and_then(|m| m.intersect_domain(side.universe()?))
            .map_err(e())
    };
    let sources = on(deps.copy().and_then(UnionMap::domain).map_err(e())?)?;
    let sinks = on(deps.copy().and_then(UnionMap::range).map_err(e())?)?;
    let ordered = sources.lex_lt_union_map(sinks).map_err(e())?;
    deps.intersect(ordered).map_err(e())
}

/// A schedule, ready to check dependences against: pairs are compared in time space, their
/// images against "not earlier" on the schedule's own time spaces, rather than against every
/// ordered pair of instances, which costs seconds on a skewed triangular nest. Every
/// statement's time must live in one space (isl's flat schedules and
/// [`crate::legality::schedule_text`] pad to one dimension).
pub(crate) struct TimeOrder {
    schedule: UnionMap,
    not_earlier: UnionMap,
}

impl TimeOrder {
    pub fn new(schedule: UnionMap) -> Result<TimeOrder, Error> {
        let e = || isl("ordering times");
        let spaces = schedule
            .copy()
            .and_then(UnionMap::range)
            .and_then(UnionSet::universe)
            .map_err(e())?;
        let not_earlier = spaces
            .copy()
            .and_then(|u| u.lex_ge_union_set(spaces))
            .map_err(e())?;
        Ok(TimeOrder {
            schedule,
            not_earlier,
        })
    }

    /// Whether the schedule runs the sink of some pair of `deps` (source → sink) no later
    /// than its source.
    ///
    /// Piece by piece, after a look at the relations' simple hulls: a relation of a hundred
    /// pieces under a tiled schedule (syr2k's triangular register reuse) took seconds as a
    /// whole, and one violated piece answers.
    pub fn violated(&self, deps: &UnionMap) -> Result<bool, Error> {
        let e = || isl("checking dependences");
        let hull = deps.copy().and_then(UnionMap::simple_hull).map_err(e())?;
        if !self.violated_whole(hull)? {
            return Ok(false);
        }
        let maps = deps.get_map_list().map_err(e())?;
        for m in 0..maps.size().map_err(e())? {
            let pieces = maps
                .get_at(m)
                .and_then(|m| m.get_basic_map_list())
                .map_err(e())?;
            for p in 0..pieces.size().map_err(e())? {
                let piece = pieces
                    .get_at(p)
                    .and_then(UnionMap::from_basic_map)
                    .map_err(e())?;
                if self.violated_whole(piece)? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    fn violated_whole(&self, deps: UnionMap) -> Result<bool, Error> {
        let e = || isl("checking dependences");
        let bad = deps
            .apply_domain(self.schedule.copy().map_err(e())?)
            .and_then(|t| t.apply_range(self.schedule.copy()?))
            .and_then(|t| t.intersect(self.not_earlier.copy()?))
            .map_err(e())?;
        empty(&bad).map(|none| !none)
    }
}

/// True when `m` holds nothing.
pub(crate) fn empty(m: &UnionMap) -> Result<bool, Error> {
    m.is_empty().map_err(isl("testing emptiness"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lu's main region (N = 60, gcc -O2), where another relation's large constant had become
    /// a parameter the problem does not use: isl's band scheduler stopped at its budget with
    /// it, and schedules the nest without it.
    #[test]
    fn an_unused_parameter_stays_out_of_the_scheduler() {
        let domain = "{ S3[i0, i1] : i0 > 0 and 0 <= i1 <= 59 - i0; S8[i0, i1] : i0 <= 58 and 0 <= i1 < i0; S4[i0, i1, i2] : 0 <= i1 <= 59 - i0 and 0 <= i2 < i0; S0[i0] : 0 <= i0 <= 58; S1[i0, i1] : i0 <= 58 and 0 <= i1 <= i0; S9[i0, i1, i2] : i0 <= 58 and i1 < i0 and 0 <= i2 <= i1 }";
        let validity = "[P0] -> { S4[i0, 0, -1 + i0] -> S1[o0, i0] : i0 > 0 and i0 <= o0 <= 58; S4[i0, i1, -1 + i0] -> S9[o0, -1 + i0 + i1, i0] : i0 > 0 and i1 > 0 and i0 + i1 <= o0 <= 58; S9[i0, i1, i2] -> S9[i0, i1, 1 + i2] : i0 <= 58 and i1 < i0 and 0 <= i2 < i1; S4[i0, i1, i2] -> S4[i0, i1, 1 + i2] : 0 <= i1 <= 59 - i0 and 0 <= i2 <= -2 + i0; S4[i0, i1, -1 + i0] -> S4[o0, i0 + i1 - o0, i0] : i0 > 0 and i1 <= 59 - i0 and i0 < o0 <= i0 + i1; S9[i0, i1, i1] -> S1[i0, 1 + i1] : i0 <= 58 and 0 <= i1 < i0; S0[i0] -> S1[i0, 0] : 0 <= i0 <= 58; S8[i0, i1] -> S9[i0, i1, 0] : i0 <= 58 and 0 <= i1 < i0; S1[i0, i1] -> S4[1 + i0, o1, i1] : 0 <= i1 <= i0 and 0 <= o1 <= 58 - i0; S1[i0, i1] -> S9[i0, o1, i1] : i0 <= 58 and i1 >= 0 and i1 <= o1 < i0; S3[i0, i1] -> S4[i0, i1, 0] : i0 > 0 and 0 <= i1 <= 59 - i0 }";
        let mut params = Parameterizer::new(64, 20);
        assert!(params.split(100).is_some());
        let opts = crate::Options {
            // Operations, not seconds, decide: the test means the same on any machine.
            isl_max_seconds: 600.0,
            ..crate::Options::default()
        };
        let s = schedule(&opts, domain, validity, &params).expect("a schedule");
        assert_eq!(s.strategy, Strategy::Bands);
    }
}
