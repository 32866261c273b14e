//! Storage mapping optimisation from the trace (SMO: Bhaskaracharya, Bondhugula and Cohen,
//! TOPLAS 2016): the conflict set of an array (pairs of its values live at the same time,
//! folded as polyhedra over write instances), a storage-partitioning hyperplane that keeps
//! every conflicting pair apart with the fewest cells, and arrays whose values are never live
//! at the same time, which can share one buffer.
//!
//! A value lives from its write to its last read, or to the end of the region and beyond
//! when it is read after the region (its live-out border). Two write instances `a`, `b`
//! conflict when `b` is written while `a`'s value is live: `T(a) < T(b) < T(r)` for a read
//! `r` of `a`, or `T(a) < T(b)` when `a` is live-out. A mapping `A[x] -> (s . x) mod K` is
//! legal when `s . (x_b - x_a)` is never 0 nor a multiple of `K` over those pairs: with
//! `K = 1 + max |s . d|` over the conflict deltas `d`, the second holds whenever the first
//! does, which is the paper's one-dimensional hyperplane with its modulo. The paper finds
//! `s` by an ILP with Farkas multipliers; here the hyperplanes with small coefficients (the
//! ones a person writes) are enumerated and each is checked exactly by isl on the folded
//! conflict deltas, which gives the same optimum within that box.

use crate::input::{Region, Statement, Storage};
use crate::islx::{self, isl, union_map, union_set};
use crate::legality::{kelly, line_of, schedule_map};
use crate::poly::{union_of_maps, union_of_sets};
use crate::{Error, Mapping, Rating, Suggestion, SuggestionKind};
use isl_rs::{Context, UnionMap, UnionSet};
use std::collections::BTreeMap;

/// Largest magnitude of a hyperplane coefficient tried, for up to two dimensions (one less
/// above).
const MAX_COEFF: i64 = 3;
/// Arrays of more dimensions than this are left to successive modulo.
const MAX_DIMS: usize = 3;
/// Only the largest this many arrays of a region are weighed for sharing (pairs cost an isl
/// question each).
const MAX_SHARED: usize = 12;

/// An array written in the region, as its writes see it.
struct Array<'a> {
    /// Its name in the accesses (`` `A` ``, a heap block's allocation site).
    name: String,
    /// The statements that write it.
    writers: Vec<&'a Statement>,
    /// Bytes its writes cover (the bounding box of their addresses).
    bytes: u64,
}

/// The identity of an access's or a dependence's array: its name without the offset.
fn key(name: &str) -> &str {
    name.split(" (+").next().unwrap_or(name)
}

fn storage_key(s: &Storage) -> Option<&str> {
    match s {
        Storage::Array { name } | Storage::Scalar { name, .. } => Some(key(name)),
        _ => None,
    }
}

/// Bytes covered by the writes of `s` to `name`: the span of their addresses over the
/// statement's iterations.
fn span(region: &Region, s: &Statement, name: &str) -> Option<u64> {
    let a = s
        .accesses
        .iter()
        .find(|a| a.write && a.array.as_deref().map(key) == Some(name))?;
    let mut bytes = u64::from(a.size);
    for (d, st) in a.strides.iter().enumerate() {
        let trips = region.trips.get(*s.loops.get(d)?).copied().flatten()?;
        bytes += trips.saturating_sub(1) * (*st)?.unsigned_abs();
    }
    Some(bytes)
}

/// The arrays the region writes, with no value read before the region (a value the region
/// did not write may sit in any cell), none of its values overwritten after the region (the
/// code after it would then store into the contracted or shared cells too, with lifetimes
/// this region does not show), and no write whose address is not affine.
fn arrays(region: &Region) -> Vec<Array<'_>> {
    let mut by: BTreeMap<&str, Vec<&Statement>> = BTreeMap::new();
    for s in &region.statements {
        for a in s.accesses.iter().filter(|a| a.write) {
            if let Some(n) = a.array.as_deref() {
                let list = by.entry(key(n)).or_default();
                if !list.iter().any(|x| x.name == s.name) {
                    list.push(s);
                }
            }
        }
    }
    by.into_iter()
        .filter(|(name, _)| {
            // Unnamed stack locations may be one another reached through a pointer.
            !name.starts_with("a stack")
                && !region
                    .live_in
                    .iter()
                    .chain(&region.rewritten_after)
                    .any(|b| storage_key(&b.storage) == Some(*name))
        })
        .filter(|(name, writers)| {
            // A value whose writer does not name the array (an unnamed access) would have no
            // lifetime here: such an array is left alone.
            region.dependences.iter().all(|d| {
                d.kind != crate::DepKind::Flow
                    || storage_key(&d.storage) != Some(*name)
                    || writers.iter().any(|w| w.name == d.source)
            })
        })
        .filter_map(|(name, writers)| {
            let bytes = writers
                .iter()
                .map(|w| span(region, w, name))
                .collect::<Option<Vec<u64>>>()?
                .into_iter()
                .max()?;
            Some(Array {
                name: name.to_string(),
                writers,
                bytes,
            })
        })
        .collect()
}

/// The lifetimes of an array's values under one schedule, as isl maps.
struct Lifetimes {
    /// Write instance -> its time.
    writes: UnionMap,
    /// Write instance -> time of a read of its value.
    reads: UnionMap,
    /// Write instances whose value is read after the region.
    live_out: UnionSet,
}

fn lifetimes(
    isl_ctx: &Context,
    region: &Region,
    schedule: &UnionMap,
    a: &Array<'_>,
) -> Result<Lifetimes, Error> {
    let e = || isl("folding lifetimes");
    let domain = union_of_sets(isl_ctx, a.writers.iter().map(|w| &w.domain))?;
    let writes = schedule
        .copy()
        .and_then(|s| s.intersect_domain(domain))
        .map_err(e())?;
    // Flow dependences through the array, consumer -> producer: reversed, producer ->
    // consumer, then consumer -> its time.
    let flows = region
        .dependences
        .iter()
        .filter(|d| d.kind == crate::DepKind::Flow && storage_key(&d.storage) == Some(&a.name))
        .map(|d| &*d.relation);
    let reads = union_of_maps(isl_ctx, flows)?
        .reverse()
        .and_then(|m| m.apply_range(schedule.copy()?))
        .map_err(e())?;
    let outs = region
        .live_out
        .iter()
        .filter(|b| storage_key(&b.storage) == Some(&a.name))
        .map(|b| &b.relation);
    let live_out = union_of_maps(isl_ctx, outs)?.range().map_err(e())?;
    Ok(Lifetimes {
        writes,
        reads,
        live_out,
    })
}

/// The pairs `a -> b` of a write `a` of `x` and a write `b` of `y` made while `a`'s value is
/// live.
fn conflicts(x: &Lifetimes, y: &Lifetimes) -> Result<UnionMap, Error> {
    let e = || isl("computing conflicts");
    let after = x
        .writes
        .copy()
        .and_then(|w| w.lex_lt_union_map(y.writes.copy()?))
        .map_err(e())?;
    let before_read = y
        .writes
        .copy()
        .and_then(|w| w.lex_lt_union_map(x.reads.copy()?))
        .and_then(UnionMap::reverse)
        .map_err(e())?;
    let while_read = after.copy().and_then(|m| m.intersect(before_read));
    let beyond = after.intersect_domain(x.live_out.copy().map_err(e())?);
    while_read
        .and_then(|m| m.union(beyond?))
        .and_then(UnionMap::coalesce)
        .map_err(e())
}

/// The single write access of a one-writer array as subscripts: for each subscript
/// (outermost first), the writer's dimension it follows; and the element size. `None` when
/// the write is not a permutation of the writer's dimensions onto a row-major array (two
/// dimensions with one stride, a stride that is not the element size times the inner rows).
fn subscripts(region: &Region, w: &Statement, name: &str) -> Option<(Vec<usize>, u32)> {
    let a = w
        .accesses
        .iter()
        .find(|a| a.write && a.array.as_deref().map(key) == Some(name))?;
    let strides: Vec<i64> = a.strides.iter().copied().collect::<Option<_>>()?;
    if strides.is_empty() || strides.len() > MAX_DIMS || strides.iter().any(|&s| s <= 0) {
        return None;
    }
    let mut order: Vec<usize> = (0..strides.len()).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(strides[d]));
    // Innermost subscript: one element; each outer one spans the rows inside it.
    let mut inner = i64::from(a.size);
    for &d in order.iter().rev() {
        if strides[d] < inner || strides[d] % i64::from(a.size) != 0 {
            return None;
        }
        let trips = region.trips.get(*w.loops.get(d)?).copied().flatten()?;
        inner = strides[d].checked_mul(i64::try_from(trips).ok()?)?;
    }
    if strides[*order.last()?] != i64::from(a.size) {
        return None;
    }
    Some((order, a.size))
}

/// A storage hyperplane: `s . x mod modulus`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Hyperplane {
    pub coeffs: Vec<i64>,
    pub modulus: u64,
}

/// The value `{ [v] }` of a one-point set's text.
fn point(text: &str) -> Option<i64> {
    let inner = text.split('[').nth(1)?.split(']').next()?;
    inner.trim().parse().ok()
}

/// Hyperplanes to try over `n` dimensions, the first nonzero coefficient positive (a
/// hyperplane and its negation partition alike).
fn candidates(n: usize) -> Vec<Vec<i64>> {
    let m = if n <= 2 { MAX_COEFF } else { MAX_COEFF - 1 };
    let mut out: Vec<Vec<i64>> = vec![Vec::new()];
    for _ in 0..n {
        out = out
            .into_iter()
            .flat_map(|v| {
                (-m..=m).map(move |c| {
                    let mut v = v.clone();
                    v.push(c);
                    v
                })
            })
            .collect();
    }
    out.retain(|v| v.iter().find(|&&c| c != 0).is_some_and(|&c| c > 0));
    out
}

/// The best one-dimensional storage hyperplane for the conflict deltas `deltas` (over the
/// writer `w`'s `n` dimensions): fewest cells, then fewest and smallest coefficients.
/// `None` when no hyperplane of the box separates every conflicting pair.
fn best_hyperplane(
    isl_ctx: &Context,
    deltas: &UnionSet,
    w: &str,
    n: usize,
) -> Result<Option<Hyperplane>, Error> {
    let e = || isl("searching storage hyperplanes");
    let vars: Vec<String> = (0..n).map(|k| format!("d{k}")).collect();
    let mut best: Option<(u64, usize, i64, Vec<i64>)> = None;
    for s in candidates(n) {
        let dot = linear(&s, &vars);
        let proj = union_map(
            isl_ctx,
            &format!("{{ {w}[{}] -> [{dot}] }}", vars.join(", ")),
        )?;
        let image = deltas.copy().and_then(|d| d.apply(proj)).map_err(e())?;
        let zero = union_set(isl_ctx, "{ [0] }")?;
        let hits = image.copy().and_then(|i| i.intersect(zero)).map_err(e())?;
        if !hits.is_empty().map_err(e())? {
            continue;
        }
        let hi = image.copy().and_then(UnionSet::lexmax).map_err(e())?;
        let lo = image.lexmin().map_err(e())?;
        let (Some(hi), Some(lo)) = (point(&islx::text(&hi)?), point(&islx::text(&lo)?)) else {
            // No conflict at all: one cell would do; left to the caller's "dead" case.
            continue;
        };
        let modulus = hi.unsigned_abs().max(lo.unsigned_abs()) + 1;
        let nonzero = s.iter().filter(|&&c| c != 0).count();
        let weight: i64 = s.iter().map(|c| c.abs()).sum();
        let cand = (modulus, nonzero, weight, s);
        if best.as_ref().is_none_or(|b| cand < *b) {
            best = Some(cand);
        }
    }
    Ok(best.map(|(modulus, _, _, coeffs)| Hyperplane { coeffs, modulus }))
}

/// Subscript names for a person: `i, j, k`, or `i0, i1, ...` beyond three.
fn names(n: usize) -> Vec<String> {
    if n <= 3 {
        ["i", "j", "k"][..n].iter().map(|s| s.to_string()).collect()
    } else {
        (0..n).map(|k| format!("i{k}")).collect()
    }
}

/// `s . x` over subscript names, as `j - i`.
fn linear(coeffs: &[i64], vars: &[String]) -> String {
    let mut out = String::new();
    for (c, v) in coeffs.iter().zip(vars).filter(|(c, _)| **c != 0) {
        let mag = c.unsigned_abs();
        let term = if mag == 1 {
            v.clone()
        } else {
            format!("{mag}*{v}")
        };
        if out.is_empty() {
            out = if *c < 0 { format!("-{term}") } else { term };
        } else {
            out.push_str(if *c < 0 { " - " } else { " + " });
            out.push_str(&term);
        }
    }
    out
}

/// The C name of an array: its symbol, or `A` for a heap block or an unnamed location.
pub(crate) fn c_name(array: &str) -> &str {
    leading_variable(array).unwrap_or("A")
}

/// The C identifier an array's name starts with: `` `A` `` alone, or `` `A` (heap block
/// allocated at k.c:12) ``; `None` for `` `b[...]` `` or "the heap block allocated at k.c:12".
fn leading_variable(array: &str) -> Option<&str> {
    let bare = match array.strip_prefix('`') {
        Some(rest) => &rest[..rest.find('`')?],
        None => array,
    };
    let ident = !bare.is_empty()
        && bare.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    ident.then_some(bare)
}

/// ` (A standing for the heap block allocated at k.c:12)` when the array has no C name of
/// its own.
pub(crate) fn standing(array: &str) -> String {
    match leading_variable(array) {
        Some(_) => String::new(),
        None => format!(" ({} standing for {array})", c_name(array)),
    }
}

/// The hyperplane over the writer's dimensions, written over the array's subscripts, in
/// isl's notation and in C (a C `%` of a negative number is negative, hence the second
/// modulo).
fn mapping_text(array: &str, h: &Hyperplane, order: &[usize]) -> (String, String) {
    let vars = names(order.len());
    // Coefficient of subscript k: the writer's dimension it follows.
    let by_sub: Vec<i64> = order.iter().map(|&d| h.coeffs[d]).collect();
    let lin = linear(&by_sub, &vars);
    let name = c_name(array);
    let k = h.modulus;
    (
        format!("{{ {name}[{}] -> [({lin}) mod {k}] }}", vars.join(", ")),
        format!("{name}[(({lin}) % {k} + {k}) % {k}]"),
    )
}

/// Each statement's dimensions, outermost first, in the order a schedule runs them.
pub(crate) type Order<'a> = &'a dyn Fn(&Statement) -> Vec<usize>;

/// Options of the storage analysis.
pub(crate) struct Under<'a> {
    /// The order of the suggested schedule (an interchange), with what to call it; `None`:
    /// the original order only.
    pub suggested: Option<(Order<'a>, &'a str)>,
}

/// Storage hyperplanes and buffer sharing for the arrays of `region` (one statement per
/// instruction), under its original schedule and, when given, the suggested one.
pub(crate) fn storage(
    isl_ctx: &Context,
    region: &Region,
    under: &Under<'_>,
) -> Result<Vec<Suggestion>, Error> {
    let original = schedule_map(isl_ctx, &kelly(region, &|s| (0..s.loops.len()).collect()))?;
    let suggested = match under.suggested {
        Some((perm, what)) => Some((schedule_map(isl_ctx, &kelly(region, perm))?, what)),
        None => None,
    };
    let arrays = arrays(region);
    let mut lives = Vec::with_capacity(arrays.len());
    for a in &arrays {
        lives.push(lifetimes(isl_ctx, region, &original, a)?);
    }
    let mut out = Vec::new();
    for (a, life) in arrays.iter().zip(&lives) {
        out.extend(contract(isl_ctx, region, a, life, &suggested)?);
    }
    out.extend(sharing(region, &arrays, &lives)?);
    Ok(out)
}

/// The storage hyperplane of a one-writer array, when it needs fewer cells than the array.
fn contract(
    isl_ctx: &Context,
    region: &Region,
    a: &Array<'_>,
    life: &Lifetimes,
    suggested: &Option<(UnionMap, &str)>,
) -> Result<Option<Suggestion>, Error> {
    let [w] = a.writers[..] else {
        return Ok(None);
    };
    let Some((order, size)) = subscripts(region, w, &a.name) else {
        return Ok(None);
    };
    let n = w.loops.len();
    let deltas = |c: UnionMap| c.deltas().map_err(isl("taking conflict deltas"));
    let d = deltas(conflicts(life, life)?)?;
    if d.is_empty().map_err(isl("testing conflicts"))? {
        // No value outlives the next write: a scalar would do, which the register
        // allocator already finds; nothing worth an array advice.
        return Ok(None);
    }
    let Some(h) = best_hyperplane(isl_ctx, &d, &w.name, n)? else {
        return Ok(None);
    };
    let cells_before = a.bytes / u64::from(size);
    let bytes_after = h.modulus * u64::from(size);
    if bytes_after >= a.bytes {
        return Ok(None);
    }
    // The same mapping under the suggested schedule: its conflicts differ.
    let under_new = match suggested {
        Some((theta, what)) => under_suggested(isl_ctx, region, a, w, &h, &order, theta, what)?,
        None => String::new(),
    };
    let (isl_map, c) = mapping_text(&a.name, &h, &order);
    let after = if region
        .live_out
        .iter()
        .any(|b| storage_key(&b.storage) == Some(&a.name))
    {
        "reads after the loop nest use the same index"
    } else {
        "no value is read after the loop nest"
    };
    let text = format!(
        "Contract {} (written at {}) along the storage hyperplane ({}) to {} cells instead of {cells_before} ({bytes_after} bytes instead of {}): index it as {c}{} at every access (map {isl_map}). In the original order no two values live at once share a cell ({after}){under_new}; not with tiling or skewing. The trace shows none read from before the nest or overwritten after it; other code must not use its other elements.",
        a.name,
        line_of(region, &w.name),
        order
            .iter()
            .map(|&d| h.coeffs[d].to_string())
            .collect::<Vec<_>>()
            .join(","),
        h.modulus,
        a.bytes,
        standing(&a.name),
    );
    let outer = w.loops.first().map(|&l| region.loops[l].id.clone());
    Ok(Some(Suggestion {
        kind: SuggestionKind::ContractArray,
        loops: outer.into_iter().collect(),
        text,
        sizes: vec![
            u32::try_from(a.bytes).unwrap_or(u32::MAX),
            u32::try_from(bytes_after).unwrap_or(u32::MAX),
        ],
        requires: Vec::new(),
        array: Some(a.name.clone()),
        mapping: Some(Mapping {
            isl: isl_map,
            c,
            bytes_before: a.bytes,
            bytes_after,
        }),
        rating: Rating::default(),
    }))
}

/// Whether the hyperplane `h` of `a` (written by `w`) stays legal under the suggested
/// schedule `theta`, and when it does not, the best one there: a clause for the advice.
#[allow(clippy::too_many_arguments)]
fn under_suggested(
    isl_ctx: &Context,
    region: &Region,
    a: &Array<'_>,
    w: &Statement,
    h: &Hyperplane,
    order: &[usize],
    theta: &UnionMap,
    what: &str,
) -> Result<String, Error> {
    let e = || isl("checking the suggested schedule");
    let n = w.loops.len();
    let life = lifetimes(isl_ctx, region, theta, a)?;
    let d = conflicts(&life, &life)?.deltas().map_err(e())?;
    let vars: Vec<String> = (0..n).map(|k| format!("d{k}")).collect();
    let proj = union_map(
        isl_ctx,
        &format!(
            "{{ {}[{}] -> [{}] }}",
            w.name,
            vars.join(", "),
            linear(&h.coeffs, &vars)
        ),
    )?;
    let image = d.copy().and_then(|d| d.apply(proj)).map_err(e())?;
    let m = i64::try_from(h.modulus).unwrap_or(i64::MAX);
    // Two conflicting values share a cell when their distance along `s` is a multiple of K.
    let clash = union_set(isl_ctx, &format!("{{ [v] : exists q : v = {m} * q }}"))?;
    let apart = image
        .intersect(clash)
        .and_then(|s| s.is_empty())
        .map_err(e())?;
    if apart {
        return Ok(format!("; it stays legal after {what}"));
    }
    Ok(match best_hyperplane(isl_ctx, &d, &w.name, n)? {
        Some(h2) => {
            let (isl_map, c) = mapping_text(&a.name, &h2, order);
            format!(
                "; after {what} some of these values would be live together: with {what}, map {isl_map} instead ({c}, {} cells)",
                h2.modulus
            )
        }
        None => format!(
            "; after {what} some of these values would be live together, and no storage hyperplane keeps them apart: apply it only to the original order"
        ),
    })
}

/// Groups of arrays whose values are never live at the same time: no write of one while a
/// value of another is live, either way. Largest arrays first; each joins the first group it
/// conflicts with no member of.
fn sharing(
    region: &Region,
    arrays: &[Array<'_>],
    lives: &[Lifetimes],
) -> Result<Vec<Suggestion>, Error> {
    let mut idx: Vec<usize> = (0..arrays.len()).collect();
    idx.sort_by_key(|&i| std::cmp::Reverse(arrays[i].bytes));
    idx.truncate(MAX_SHARED);
    let disjoint = |x: usize, y: usize| -> Result<bool, Error> {
        Ok(islx::empty(&conflicts(&lives[x], &lives[y])?)?
            && islx::empty(&conflicts(&lives[y], &lives[x])?)?)
    };
    let mut groups: Vec<Vec<usize>> = Vec::new();
    'next: for &i in &idx {
        for g in groups.iter_mut() {
            let mut all = true;
            for &j in g.iter() {
                if !disjoint(i, j)? {
                    all = false;
                    break;
                }
            }
            if all {
                g.push(i);
                continue 'next;
            }
        }
        groups.push(vec![i]);
    }
    let mut out = Vec::new();
    for g in groups.into_iter().filter(|g| g.len() > 1) {
        let first = &arrays[g[0]];
        let total: u64 = g.iter().map(|&i| arrays[i].bytes).sum();
        let saved = total - first.bytes;
        let describe = |i: usize| {
            let a = &arrays[i];
            let lines: Vec<String> = a
                .writers
                .iter()
                .map(|w| line_of(region, &w.name))
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            format!(
                "{} ({} bytes, written at {})",
                a.name,
                a.bytes,
                lines.join(", ")
            )
        };
        let names: Vec<String> = g.iter().map(|&i| describe(i)).collect();
        let loops = first
            .writers
            .first()
            .and_then(|w| w.loops.first())
            .map(|&l| vec![region.loops[l].id.clone()])
            .unwrap_or_default();
        out.push(Suggestion {
            kind: SuggestionKind::ShareStorage,
            loops,
            text: format!(
                "Let {} share one buffer of {} bytes, saving {saved}: in the original order no value of one is live (from its write to its last read, reads after the loop nest included) while another is written; a reordering that interleaves their loops needs this checked again. The trace shows none of their values read from before the loop nest or overwritten after it; no other code may use their other elements.",
                names.join(" and "),
                first.bytes
            ),
            sizes: vec![
                u32::try_from(total).unwrap_or(u32::MAX),
                u32::try_from(first.bytes).unwrap_or(u32::MAX),
            ],
            requires: Vec::new(),
            array: Some(first.name.clone()),
            mapping: None,
            rating: Rating::default(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{Access, Boundary, Dependence, EqualPairs, Loop, Polyhedra};
    use crate::DepKind;

    fn stmt(name: &str, line: u32, pos: u32, dom: &str, write: bool) -> Statement {
        Statement {
            name: name.into(),
            label: format!("k.c:{line} op"),
            loops: vec![0, 1],
            positions: vec![0, 0, pos],
            domain: Polyhedra::parse(&format!("{{ {name}[i0, i1] : {dom} }}")).expect("a set"),
            ops: 64,
            accesses: vec![Access {
                strides: vec![Some(64), Some(8)],
                size: 8,
                write,
                base: Some(0),
                array: Some("`A`".into()),
            }],
            fp: true,
            exact: true,
            update: None,
        }
    }

    /// `A[t][i] = f(A[t-1][i], A[t][i-1])` over 8 x 8, its last row and column read after.
    fn stencil() -> Region {
        let all = "0 <= i0 <= 7 and 0 <= i1 <= 7";
        let flow = |sink: &str, rel: &str| Dependence {
            source: "S2".into(),
            sink: sink.into(),
            kind: DepKind::Flow,
            storage: Storage::Array { name: "`A`".into() },
            relation: Polyhedra::parse(rel).expect("a map").into(),
            exact: true,
            equal_pairs: EqualPairs::Unknown,
            reload: None,
            mirror: None,
            invariant_in: Vec::new(),
        };
        Region {
            loops: vec![
                Loop { id: "L0".into(), label: "k.c:1".into() },
                Loop { id: "L1".into(), label: "k.c:2".into() },
            ],
            statements: vec![
                stmt("S0", 3, 0, "1 <= i0 <= 7 and 0 <= i1 <= 7", false),
                stmt("S1", 3, 1, "0 <= i0 <= 7 and 1 <= i1 <= 7", false),
                stmt("S2", 3, 2, all, true),
            ],
            dependences: vec![
                flow("S0", "{ S0[i0, i1] -> S2[i0 - 1, i1] : 1 <= i0 <= 7 and 0 <= i1 <= 7 }"),
                flow("S1", "{ S1[i0, i1] -> S2[i0, i1 - 1] : 0 <= i0 <= 7 and 1 <= i1 <= 7 }"),
            ],
            trips: vec![Some(8), Some(8)],
            live_out: vec![Boundary {
                stmt: "S2".into(),
                storage: Storage::Array { name: "`A`".into() },
                relation: Polyhedra::parse("{ Outside[] -> S2[7, i1] : 0 <= i1 <= 7; Outside[] -> S2[i0, 7] : 0 <= i0 <= 7 }").expect("a map"),
                outside: "k.c:9".into(),
            }],
            ..Region::default()
        }
    }

    #[test]
    fn live_out_stencil_gets_the_hyperplane_one_minus_one_under_both_orders() {
        let ctx = Context::alloc();
        let region = stencil();
        let swap = |s: &Statement| (0..s.loops.len()).rev().collect::<Vec<usize>>();
        let under = Under {
            suggested: Some((&swap, "the interchange")),
        };
        let out = storage(&ctx, &region, &under).expect("isl");
        let c = out
            .iter()
            .find(|s| s.kind == SuggestionKind::ContractArray)
            .unwrap_or_else(|| panic!("{out:#?}"));
        let m = c.mapping.as_ref().expect("a mapping");
        assert_eq!(m.isl, "{ A[i, j] -> [(i - j) mod 15] }", "{}", c.text);
        assert_eq!((m.bytes_before, m.bytes_after), (512, 120));
        // Transposed, the same wavefront: the hyperplane stays legal.
        assert!(
            c.text.contains("stays legal after the interchange"),
            "{}",
            c.text
        );
        // Nothing else is written: no sharing.
        assert!(!out.iter().any(|s| s.kind == SuggestionKind::ShareStorage));
    }

    #[test]
    fn an_array_overwritten_after_the_region_is_left_alone() {
        let ctx = Context::alloc();
        let mut region = stencil();
        region.rewritten_after = vec![Boundary {
            stmt: "S2".into(),
            storage: Storage::Array { name: "`A`".into() },
            relation: Polyhedra::parse("{ Outside[] -> S2[0, 0] }").expect("a map"),
            outside: "k.c:12".into(),
        }];
        let out = storage(&ctx, &region, &Under { suggested: None }).expect("isl");
        assert!(out.is_empty(), "{out:#?}");
    }

    #[test]
    fn without_live_out_a_row_suffices() {
        let ctx = Context::alloc();
        let mut region = stencil();
        region.live_out.clear();
        let out = storage(&ctx, &region, &Under { suggested: None }).expect("isl");
        let m = out[0].mapping.as_ref().expect("a mapping");
        // Values live one row: N + 1 cells along the rows (i), or fewer.
        assert!(m.bytes_after <= 9 * 8, "{}", out[0].text);
    }

    #[test]
    fn hyperplane_text_is_over_subscripts() {
        let h = Hyperplane {
            coeffs: vec![1, -1],
            modulus: 31,
        };
        let (m, c) = mapping_text("`A`", &h, &[0, 1]);
        assert_eq!(m, "{ A[i, j] -> [(i - j) mod 31] }");
        assert_eq!(c, "A[((i - j) % 31 + 31) % 31]");
        // A column-major writer: subscript 0 follows its dimension 1.
        let (m, _) = mapping_text("`A`", &h, &[1, 0]);
        assert_eq!(m, "{ A[i, j] -> [(-i + j) mod 31] }");
    }

    #[test]
    fn candidates_are_canonical() {
        let c = candidates(2);
        assert!(c.contains(&vec![1, -1]));
        assert!(!c.contains(&vec![-1, 1]));
        assert!(!c.contains(&vec![0, 0]));
        assert_eq!(c.len(), (49 - 1) / 2);
    }
}
