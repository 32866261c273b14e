//! Storage and layout advice (DeLICM, SMO, Shirako & Sarkar): what a suggested schedule needs
//! of the program's storage, and which arrays would be better contracted, transposed, split
//! into structures of arrays or padded.
//!
//! Flow dependences decide schedules; anti and output dependences decide storage. A scalar (a
//! register or a fixed memory location) whose anti or output dependences the new schedule
//! would violate must be expanded along the loop that moved, or mapped onto an array element
//! that is dead while it is live (zero extra memory); one whose anti or output dependences are
//! carried by a loop run in parallel, while its values never cross iterations, is privatized.

use crate::input::{Access, DepKind, Dependence, Region, Statement, Storage};
use crate::legality::{line_of, Change, Ctx, Requirement};
use crate::{Error, Mapping, Rating, Suggestion, SuggestionKind};
use isl_rs::UnionMap;
use std::collections::{BTreeMap, BTreeSet};

fn stmt<'a>(region: &'a Region, name: &str) -> Option<&'a Statement> {
    region.statements.iter().find(|s| s.name == name)
}

/// Whether some statement reads the element that `a`, a write of `t`, stores to, in the same
/// iteration of `t`'s loops (`C[i][j] = beta * C[i][j] + alpha * temp2` reads it before the
/// store): that element holds a live value until the store, so it is no home for `storage`,
/// a scalar live meanwhile. Reads with the same address function: the same array, the same
/// constant term and strides along `t`'s loops, and stride 0 along any loop nested deeper. A
/// read whose value goes on into `storage` (matmul's `C[i][j] +=` loads the sum's first
/// value) begins the scalar's life: the element is dead from there.
fn element_read(region: &Region, t: &Statement, a: &Access, storage: &Storage) -> bool {
    let depth = t.loops.len();
    let starts_scalar = |s: &Statement| {
        region.dependences.iter().any(|d| {
            d.kind == DepKind::Flow
                && &d.storage == storage
                && d.source == s.name
                && d.sink != s.name
        })
    };
    region.statements.iter().any(|s| {
        s.loops.starts_with(&t.loops)
            && !starts_scalar(s)
            && s.accesses.iter().any(|r| {
                !r.write
                    && r.array == a.array
                    && r.base == a.base
                    && r.strides.get(..depth) == a.strides.get(..depth)
                    && r.strides.iter().skip(depth).all(|x| *x == Some(0))
            })
    })
}

/// Loops along which values of `storage` flow from one iteration to the next: for each
/// flow dependence through it, the loops both ends share whose coordinate differs between
/// producer and consumer. `None` when a dependence names a statement the region lacks.
pub(crate) fn carrying_loops(region: &Region, storage: &Storage) -> Option<BTreeSet<usize>> {
    let mut out = BTreeSet::new();
    for d in region
        .dependences
        .iter()
        .filter(|d| d.kind == DepKind::Flow && &d.storage == storage)
    {
        carried_by(region, d, &mut out)?;
    }
    Some(out)
}

/// Adds to `out` the loops that carry dependence `d`: those both ends share along which
/// some pair of its instances is at different iterations.
fn carried_by(region: &Region, d: &Dependence, out: &mut BTreeSet<usize>) -> Option<()> {
    let common = shared_loops(region, d)?;
    for rows in d.relation.outputs() {
        for k in 0..common {
            let same =
                rows.get(k).cloned().flatten().is_some_and(|r| {
                    r.single_dim() == Some(k) && r.coeffs[k] == 1 && r.constant == 0
                });
            if !same {
                out.insert(region_loop(region, d, k)?);
            }
        }
    }
    Some(())
}

/// How many loops both ends of `d` share (outermost first).
fn shared_loops(region: &Region, d: &Dependence) -> Option<usize> {
    let (sink, src) = (stmt(region, &d.sink)?, stmt(region, &d.source)?);
    Some(
        sink.loops
            .iter()
            .zip(&src.loops)
            .take_while(|(a, b)| a == b)
            .count(),
    )
}

/// The `k`-th loop around `d`'s sink.
fn region_loop(region: &Region, d: &Dependence, k: usize) -> Option<usize> {
    stmt(region, &d.sink)?.loops.get(k).copied()
}

/// Every instance of `d` reads the value written a fixed number of iterations before, along
/// each loop both ends share (`x_k - c`): the value read is a function of the reader's own
/// iteration. Not so for a value left by some earlier iteration whichever it was (`delta`
/// set on some rows, read on the later ones).
fn uniform(region: &Region, d: &Dependence) -> bool {
    let Some(common) = shared_loops(region, d) else {
        return false;
    };
    d.relation.outputs().iter().all(|rows| {
        (0..common).all(|k| {
            rows.get(k)
                .cloned()
                .flatten()
                .is_some_and(|r| r.single_dim() == Some(k) && r.coeffs[k] == 1)
        })
    })
}

/// The statements whose values are functions of their iteration vector alone: they write
/// no memory, read only memory no statement of the region writes (constants, the region's
/// inputs), and take their registers from scalar evolutions (whose dependences the pipeline
/// drops) or from other such statements. A statement stepping its own register along a
/// loop (gcc's vector of `j`s, `{j, j+1, j+2, j+3}` plus 4) is one when the step does not
/// move along the loop: its memory is read at one address, its other registers come from
/// outside the loop. gcc -O2 hoists `2 * i` into a register broadcast to a vector before
/// the j loop: the register holds the source's expression of `i`, which the compiled code
/// of any new order computes where it needs it.
fn index_derived(region: &Region) -> BTreeSet<&str> {
    let memory = |s: &Storage| !matches!(s, Storage::Register { .. });
    // Statements disqualified by their memory: writes, reads of memory the region writes
    // (before: a flow dependence in; after: an anti dependence out), hidden state.
    let mut out: BTreeSet<&str> = BTreeSet::new();
    for d in &region.dependences {
        if memory(&d.storage) {
            match d.kind {
                DepKind::Flow => {
                    out.insert(d.sink.as_str());
                }
                DepKind::Anti => {
                    out.insert(d.source.as_str());
                }
                DepKind::Output => {
                    out.insert(d.source.as_str());
                    out.insert(d.sink.as_str());
                }
            }
        }
    }
    let candidates: BTreeMap<&str, &Statement> = region
        .statements
        .iter()
        .filter(|s| !out.contains(s.name.as_str()) && s.accesses.iter().all(|a| !a.write))
        .map(|s| (s.name.as_str(), s))
        .collect();
    // Register flow dependences into each candidate: (producer, self-step).
    let mut inputs: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut stepped: BTreeSet<&str> = BTreeSet::new();
    for d in &region.dependences {
        if d.kind != DepKind::Flow || memory(&d.storage) {
            continue;
        }
        let Some(t) = candidates.get(d.sink.as_str()) else {
            continue;
        };
        if d.source == d.sink {
            stepped.insert(&t.name);
        } else {
            inputs.entry(&t.name).or_default().push(&d.source);
        }
    }
    let mut derived: BTreeSet<&str> = BTreeSet::new();
    loop {
        let before = derived.len();
        for (&name, t) in &candidates {
            if derived.contains(name) {
                continue;
            }
            let ins = inputs.get(name).map_or(&[][..], Vec::as_slice);
            let from_derived = ins.iter().all(|p| derived.contains(p));
            let invariant_step = !stepped.contains(name)
                || (t
                    .accesses
                    .iter()
                    .all(|a| a.strides.iter().all(|s| *s == Some(0)))
                    && ins.iter().all(|p| {
                        candidates
                            .get(p)
                            .is_some_and(|q| q.loops.len() < t.loops.len())
                    }));
            if from_derived && invariant_step {
                derived.insert(name);
            }
        }
        if derived.len() == before {
            return derived;
        }
    }
}

/// Drops the dependences through compiler registers (no source variable) whose every value
/// a statement of [`index_derived`] writes: expressions of the loop counters, which the code
/// of any new order computes where it needs them, as it does the scalar evolutions whose
/// dependences the pipeline never keeps. Run on the instructions, before they are merged
/// into blocks (a block mixes the vector of `j`s with the stores it indexes). A register
/// read after the region keeps them: its last value is the program's (`last = b[i] - a[i]`
/// printed after the loop needs `lastprivate`, whatever computes it).
pub(crate) fn drop_recomputed(region: &mut Region) {
    let derived = index_derived(region);
    let mut all_derived: BTreeMap<&str, bool> = BTreeMap::new();
    for b in &region.live_out {
        if let Storage::Register { reg, .. } = &b.storage {
            all_derived.insert(reg.as_str(), false);
        }
    }
    for d in &region.dependences {
        let Storage::Register { reg, var } = &d.storage else {
            continue;
        };
        let writers: &[&str] = match d.kind {
            DepKind::Flow => &[d.source.as_str()],
            DepKind::Anti => &[d.sink.as_str()],
            DepKind::Output => &[d.source.as_str(), d.sink.as_str()],
        };
        // A value some earlier iteration left, whichever it was, is not recomputed where it
        // is read; a register stepping itself along its loop is [`index_derived`]'s to judge.
        let here = d.kind != DepKind::Flow || d.source == d.sink || uniform(region, d);
        let ok = var.is_none() && here && writers.iter().all(|w| derived.contains(w));
        *all_derived.entry(reg.as_str()).or_insert(true) &= ok;
    }
    let gone: BTreeSet<String> = all_derived
        .into_iter()
        .filter(|(_, ok)| *ok)
        .map(|(r, _)| r.to_string())
        .collect();
    if gone.is_empty() {
        return;
    }
    region
        .dependences
        .retain(|d| !matches!(&d.storage, Storage::Register { reg, .. } if gone.contains(reg)));
    region
        .compared
        .retain(|c| !matches!(&c.storage, Storage::Register { reg, .. } if gone.contains(reg)));
}

/// Some flow dependence through `storage` links different iterations of a loop.
fn crosses_iterations(region: &Region, storage: &Storage) -> bool {
    carrying_loops(region, storage).is_none_or(|loops| !loops.is_empty())
}

/// Some value of `storage` is produced on one source line and used on another.
fn crosses_lines(region: &Region, storage: &Storage) -> bool {
    region
        .dependences
        .iter()
        .filter(|d| d.kind == DepKind::Flow && &d.storage == storage)
        .any(|d| line_of(region, &d.source) != line_of(region, &d.sink))
}

/// What a new schedule (an interchange, a tiling, a skew, a fusion) needs of the program's
/// storage.
pub(crate) struct Fix {
    /// The storage suggestions themselves (`expand_scalar`, `map_scalar_to_array`).
    pub suggestions: Vec<Suggestion>,
    /// The same, as requirements of the interchange.
    pub needs: Vec<Requirement>,
    /// Storage given copies of its own (expanded, mapped, or temporaries renamed freely).
    pub renamed: BTreeSet<String>,
    /// Why no storage change makes the schedule legal, when none does: then there is no
    /// suggestion.
    pub blocked: Option<String>,
}

/// The dependences through renamable storage (not binding) that schedule `theta` breaks,
/// but for a register's reuse between nests: the compiler reuses a register for unrelated
/// values of different nests (each nest's accumulator in xmm1); no value passes between the
/// nests through it, so the reuse says nothing about the source, and the compiler allocates
/// registers again after any reordering.
fn broken_renamable(cx: &Ctx<'_>, theta: &UnionMap) -> Result<Vec<usize>, Error> {
    let region = cx.region;
    let renamable: Vec<usize> = (0..region.dependences.len())
        .filter(|&i| !region.dependences[i].binding())
        .collect();
    let broken = cx.all_violated(&renamable, theta)?;
    let outermost = |name: &str| stmt(region, name).and_then(|s| s.loops.first().copied());
    let passes: BTreeSet<(&Storage, Option<usize>, Option<usize>)> = region
        .dependences
        .iter()
        .filter(|d| d.kind == DepKind::Flow)
        .map(|d| (&d.storage, outermost(&d.source), outermost(&d.sink)))
        .collect();
    Ok(broken
        .into_iter()
        .filter(|&i| {
            let d = &region.dependences[i];
            let (a, b) = (outermost(&d.source), outermost(&d.sink));
            let reuse_only = matches!(d.storage, Storage::Register { .. })
                && a != b
                && !passes.contains(&(&d.storage, a, b))
                && !passes.contains(&(&d.storage, b, a));
            !reuse_only
        })
        .collect())
}

/// The storage of the `broken` dependences that needs a change, with its dependences, and
/// every such storage (renamed, by description). A temporary whose values never leave their
/// iteration is renamed freely by an interchange, which keeps each iteration's body whole
/// (`whole_iterations`); only values living across iterations (an accumulator) need storage
/// of their own. Other schedules may split an iteration between its source statements
/// (distribution, fusion, skewing of an imperfect nest): there only an expression's own
/// temporaries, produced and used on one source line, rename freely.
fn needing_storage(
    region: &Region,
    broken: Vec<usize>,
    whole_iterations: bool,
) -> (BTreeMap<&Storage, Vec<usize>>, BTreeSet<String>) {
    let mut by_storage: BTreeMap<&Storage, Vec<usize>> = BTreeMap::new();
    let mut renamed = BTreeSet::new();
    for i in broken {
        let s = &region.dependences[i].storage;
        renamed.insert(s.describe());
        if crosses_iterations(region, s) || (!whole_iterations && crosses_lines(region, s)) {
            by_storage.entry(s).or_default().push(i);
        }
    }
    (by_storage, renamed)
}

/// The source lines naming a storage that needs a change: where its carried value is produced
/// (the accumulation), else the writes of its dependences `deps` the new order reorders.
fn writer_lines(region: &Region, storage: &Storage, deps: &[usize]) -> Vec<String> {
    let carried_writers: BTreeSet<&str> = region
        .dependences
        .iter()
        .filter(|d| d.kind == DepKind::Flow && &d.storage == storage && d.source == d.sink)
        .map(|d| d.source.as_str())
        .collect();
    let writers: BTreeSet<&str> = if carried_writers.is_empty() {
        deps.iter()
            .map(|&i| region.dependences[i].source.as_str())
            .collect()
    } else {
        carried_writers
    };
    writers
        .iter()
        .map(|w| line_of(region, w))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// DeLICM: a store that saves scalar `storage` into an array element varying along the loops
/// `needed` gives the scalar a home whose element is dead until that store: its statement and
/// array. Along the loops that carry the scalar (`carriers`) it is one value, so its home does
/// not move along them: a store inside the accumulation that steps along them (symm's
/// `C[k][j] +=` beside `temp2 +=`) stores something else.
fn dead_home<'r>(
    region: &'r Region,
    storage: &Storage,
    needed: &[usize],
    carriers: &BTreeSet<usize>,
) -> Option<(&'r Statement, String)> {
    region
        .dependences
        .iter()
        .filter(|d| d.kind == DepKind::Flow && &d.storage == storage)
        .filter_map(|d| stmt(region, &d.sink))
        .find_map(|t| {
            let dims: Vec<usize> = needed
                .iter()
                .map(|l| t.loops.iter().position(|x| x == l))
                .collect::<Option<_>>()?;
            let fixed: Vec<usize> = t
                .loops
                .iter()
                .enumerate()
                .filter(|(_, l)| carriers.contains(l))
                .map(|(d, _)| d)
                .collect();
            let a = t.accesses.iter().find(|a| {
                let stride = |d: usize| a.strides.get(d).copied().flatten();
                a.write
                    && dims.iter().all(|&d| stride(d).is_some_and(|s| s != 0))
                    && fixed.iter().all(|&d| stride(d) == Some(0))
                    && !element_read(region, t, a, storage)
            })?;
            Some((t, a.array.clone().unwrap_or_else(|| "the array".into())))
        })
}

/// Storage a new schedule `theta` needs, for the values it reorders: a mapping onto a dead
/// array element (DeLICM) that varies along every loop of `along` (the loops the schedule
/// reorders, the one that moves inward first), or, when only one loop is reordered,
/// expansion along it. `what` names the transformation in the advice ("the interchange").
pub(crate) fn for_schedule(
    cx: &Ctx<'_>,
    along: &[usize],
    theta: &UnionMap,
    what: &str,
    whole_iterations: bool,
) -> Result<Fix, Error> {
    if along.is_empty() {
        return Err(Error::Isl("a schedule change without loops".into()));
    }
    let region = cx.region;
    let broken = broken_renamable(cx, theta)?;
    let (by_storage, renamed) = needing_storage(region, broken, whole_iterations);
    let loop_label = |l: usize| format!("{} ({})", region.loops[l].label, region.loops[l].id);
    let mut sugs = Vec::new();
    let mut needs = Vec::new();
    let mut blocked = None;
    for (storage, deps) in by_storage {
        let lines = writer_lines(region, storage, &deps);
        let at = lines.join(", ");
        // Each value lives along the loops that carry it (an accumulator along its
        // reduction loop); different values must get different homes along the other
        // reordered loops.
        let carriers = carrying_loops(region, storage).unwrap_or_default();
        let mut needed: Vec<usize> = along
            .iter()
            .copied()
            .filter(|l| !carriers.contains(l))
            .collect();
        if needed.is_empty() {
            needed = along.to_vec();
        }
        let moved = needed[0];
        let home = dead_home(region, storage, &needed, &carriers);
        match home {
            Some((t, array)) => {
                let line = t.lines().join(", ");
                sugs.push(Suggestion {
                    kind: SuggestionKind::MapScalarToArray,
                    loops: vec![region.loops[moved].id.clone()],
                    text: format!(
                        "Keep {} (written at {at}) in the element of {array} that {line} stores it to: that element is dead until then, so {what} needs no extra memory.",
                        storage.describe()
                    ),
                    sizes: Vec::new(),
                    requires: Vec::new(),
                    array: Some(array.clone()),
                    mapping: None,
                    rating: Rating::default(),
                });
                needs.push(Requirement {
                    change: Change::MapToArray,
                    storage: format!("{} onto {array} (line {line})", storage.describe()),
                    lines: lines.clone(),
                    step: None,
                });
            }
            None if needed.len() > 1 => {
                blocked.get_or_insert(format!(
                    "{what} would reorder the values of {} (written at {at}) across {}, and no array element varying along all of them can hold them",
                    storage.describe(),
                    needed.iter().map(|&l| loop_label(l)).collect::<Vec<_>>().join(", ")
                ));
            }
            None => {
                let n = region.trips.get(moved).copied().flatten();
                sugs.push(Suggestion {
                    kind: SuggestionKind::ExpandScalar,
                    loops: vec![region.loops[moved].id.clone()],
                    text: format!(
                        "Expand {} (written at {at}) into an array along loop {}{}: each of its iterations needs its own copy for {what}.",
                        storage.describe(),
                        loop_label(moved),
                        n.map_or(String::new(), |n| format!(" ({n} elements)"))
                    ),
                    sizes: n.map(|n| vec![u32::try_from(n).unwrap_or(u32::MAX)]).unwrap_or_default(),
                    requires: Vec::new(),
                    array: None,
                    mapping: None,
                    rating: Rating::default(),
                });
                needs.push(Requirement {
                    change: Change::Expand,
                    storage: format!("{} along {}", storage.describe(), region.loops[moved].label),
                    lines: lines.clone(),
                    step: None,
                });
            }
        }
    }
    Ok(Fix {
        suggestions: sugs,
        needs,
        renamed,
        blocked,
    })
}

/// An access of the innermost loop: (stride along it, size, base address, source line,
/// strides along every dimension).
type HotAccess = (i64, u32, Option<i64>, String, Vec<Option<i64>>);

/// Accesses this many bytes apart (or a multiple) map to the same cache set.
const SET_SPAN: u64 = 4096;

/// Transposition of a two-dimensional view: rows of `row` bytes, `walked` of them walked.
fn transpose_map(name: &str, row: u64, walked: Option<u64>) -> Mapping {
    let a = crate::smo::c_name(name);
    let bytes = walked.map_or(0, |w| w * row);
    Mapping {
        isl: format!("{{ {a}[i, j] -> [j, i] }}"),
        c: format!("{a}[j][i] for {a}[i][j]"),
        bytes_before: bytes,
        bytes_after: bytes,
    }
}

/// Padding of rows of `row` bytes by one cache line, over the `walked` rows the loop visits.
fn pad_map(name: &str, row: u64, size: u32, walked: u64) -> Mapping {
    let a = crate::smo::c_name(name);
    let e = u64::from(size.max(1));
    let (before, after) = (row / e, (row + 64) / e);
    Mapping {
        isl: format!("{{ {a}[i, j] -> [{after}i + j] }}"),
        c: format!("{a}[i * {after} + j] for {a}[i * {before} + j]"),
        bytes_before: walked * row,
        bytes_after: walked * (row + 64),
    }
}

/// Structure of arrays: the record index and the field trade places; `walked` records.
fn soa_map(name: &str, record: u64, offsets: &BTreeMap<i64, u32>, walked: u64) -> Mapping {
    let a = crate::smo::c_name(name);
    Mapping {
        isl: format!("{{ {a}[i, f] -> [f, i] }}"),
        c: format!(
            "{a}_f[i] for {a}[i].f, one array per field (fields at offsets {})",
            offsets
                .keys()
                .map(|o| o.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        bytes_before: walked * record,
        bytes_after: walked * record,
    }
}

/// Layout advice from the accesses of the hottest loop nest.
pub(crate) fn layout(region: &Region, chain: &[usize]) -> Vec<Suggestion> {
    let mut out = Vec::new();
    let Some(&inner) = chain.last() else {
        return out;
    };
    let hot: Vec<&Statement> = region
        .statements
        .iter()
        .filter(|s| s.loops.last() == Some(&inner))
        .collect();
    let label = |l: usize| format!("{} ({})", region.loops[l].label, region.loops[l].id);
    // Accesses per array along the innermost loop.
    let mut by_array: BTreeMap<String, Vec<HotAccess>> = BTreeMap::new();
    for s in &hot {
        let Some(d) = s.loops.iter().position(|&l| l == inner) else {
            continue;
        };
        let line = s.lines().join(", ");
        for a in &s.accesses {
            let (Some(name), Some(Some(stride))) = (&a.array, a.strides.get(d)) else {
                continue;
            };
            if name.starts_with("a stack array") {
                continue;
            }
            by_array.entry(name.clone()).or_default().push((
                *stride,
                a.size,
                a.base,
                line.clone(),
                a.strides.clone(),
            ));
        }
    }
    for (name, accs) in &by_array {
        let lines: BTreeSet<&str> = accs.iter().map(|a| a.3.as_str()).collect();
        let lines = lines.into_iter().collect::<Vec<_>>().join(", ");
        let size = accs.iter().map(|a| a.1).max().unwrap_or(8);
        let stride = accs[0].0;
        let same_stride = accs.iter().all(|a| a.0 == stride);
        let big = stride.unsigned_abs() > u64::from(size);
        // Array of structures: one stride (the record size) and several field offsets.
        // Field offsets, relative to the lowest field touched.
        let low = accs.iter().filter_map(|a| a.2).min().unwrap_or(0);
        let offsets: BTreeMap<i64, u32> = accs
            .iter()
            .filter_map(|a| {
                a.2.map(|b| ((b - low).rem_euclid(stride.abs().max(1)), a.1))
            })
            .collect();
        if same_stride && big && offsets.len() >= 2 && stride.unsigned_abs() <= 4096 {
            let used: u64 = offsets.values().map(|&s| u64::from(s)).sum();
            let record = stride.unsigned_abs();
            if used < record {
                let map = soa_map(
                    name,
                    record,
                    &offsets,
                    region.trips.get(inner).copied().flatten().unwrap_or(1),
                );
                out.push(Suggestion {
                    kind: SuggestionKind::AosToSoa,
                    loops: vec![region.loops[inner].id.clone()],
                    text: format!(
                        "Turn {name} (records of {record} bytes, accessed at {lines}) into a structure of arrays: loop {} uses only the fields at offsets {} ({used} of {record} bytes, {:.0}%), so each cache line would carry only useful data: map {}{}, i.e. {}.",
                        label(inner),
                        offsets
                            .iter()
                            .map(|(o, s)| format!("{o} ({s} bytes)"))
                            .collect::<Vec<_>>()
                            .join(", "),
                        100.0 * used as f64 / record as f64,
                        map.isl,
                        crate::smo::standing(name),
                        map.c
                    ),
                    sizes: vec![u32::try_from(record).unwrap_or(u32::MAX)],
                    requires: Vec::new(),
                    array: Some(name.clone()),
                    mapping: Some(map),
                    rating: Rating::default(),
                });
                continue;
            }
        }
        // Transposition: a large stride along the innermost loop, unit stride along another.
        if same_stride && big && offsets.len() <= 1 {
            let unit = accs[0]
                .4
                .iter()
                .enumerate()
                .find(|(_, s)| s.is_some_and(|s| s.unsigned_abs() == u64::from(size)));
            if let Some((d, _)) = unit {
                let other = chain
                    .get(d)
                    .map_or("another loop".to_string(), |&l| label(l));
                let map = transpose_map(
                    name,
                    stride.unsigned_abs(),
                    region.trips.get(inner).copied().flatten(),
                );
                out.push(Suggestion {
                    kind: SuggestionKind::TransposeArray,
                    loops: vec![region.loops[inner].id.clone()],
                    text: format!(
                        "Transpose {name} (accessed at {lines}): along the innermost loop {} its accesses step by {} bytes, along {other} by {size}; with its dimensions swapped (map {}{}, i.e. {}) the innermost loop walks it contiguously.",
                        label(inner),
                        stride.unsigned_abs(),
                        map.isl,
                        crate::smo::standing(name),
                        map.c
                    ),
                    sizes: Vec::new(),
                    requires: Vec::new(),
                    array: Some(name.clone()),
                    mapping: Some(map),
                    rating: Rating::default(),
                });
            }
        }
        // Padding: along the innermost loop, accesses a multiple of 4 KiB apart fall into the
        // same cache sets (the set index is taken from the address bits below 4 KiB on
        // common L1 caches); a loop that walks the array contiguously gains nothing.
        let row = stride.unsigned_abs();
        if same_stride && row >= SET_SPAN && row % SET_SPAN == 0 {
            let walked = region.trips.get(inner).copied().flatten().unwrap_or(1);
            let map = pad_map(name, row, size, walked);
            out.push(Suggestion {
                kind: SuggestionKind::PadArray,
                loops: vec![region.loops[inner].id.clone()],
                text: format!(
                    "Pad the rows of {name} (accessed at {lines}) by one cache line (64 bytes), to {} bytes: the innermost loop {} steps through it by {row} bytes, a multiple of 4 KiB, so its successive accesses map to the same cache sets and evict each other; map {}{}, i.e. index it as {}.",
                    row + 64,
                    label(inner),
                    map.isl,
                    crate::smo::standing(name),
                    map.c
                ),
                sizes: vec![u32::try_from(row + 64).unwrap_or(u32::MAX)],
                requires: Vec::new(),
                array: Some(name.clone()),
                mapping: Some(map),
                rating: Rating::default(),
            });
        }
    }
    out
}

/// Array contraction (SMO, successive modulo per dimension, outermost dimension): an array
/// written and read in the region whose values live at most `m` iterations of the outermost
/// loop needs only `m + 1` of its rows along it.
pub(crate) fn contraction(region: &Region, chain: &[usize]) -> Vec<Suggestion> {
    let mut out = Vec::new();
    let Some(&outer) = chain.first() else {
        return out;
    };
    let mut by_array: BTreeMap<&str, Vec<&Dependence>> = BTreeMap::new();
    for d in &region.dependences {
        if let (Storage::Array { name }, DepKind::Flow) = (&d.storage, d.kind) {
            by_array.entry(name.as_str()).or_default().push(d);
        }
    }
    for (name, deps) in by_array {
        let root = Storage::Array {
            name: name.to_string(),
        }
        .root();
        // Overwritten after the region: the code there would store into the kept rows too.
        if region
            .rewritten_after
            .iter()
            .any(|b| b.storage.root() == root)
        {
            continue;
        }
        let read_after = read_after_rows(region, &root, outer);
        let (max_dist, row_bytes) = outer_distance(region, name, &deps, outer);
        let (Some(m), Some(row), Some(Some(trips))) =
            (max_dist, row_bytes, region.trips.get(outer))
        else {
            continue;
        };
        if !walked_by_rows(region, name, outer, row) {
            continue;
        }
        let keep = (m + 1) as u64;
        if m < 0 || row == 0 || keep >= *trips {
            continue;
        }
        // Read after the loop: legal only when every value read comes from the rows kept,
        // the last `keep` iterations, and the reads then index the array the same way.
        let first_kept = (*trips - keep) as i64;
        if read_after
            .iter()
            .any(|(outer, _)| outer.is_none_or(|o| o < first_kept))
        {
            continue;
        }
        let after: BTreeSet<&str> = read_after.iter().map(|r| r.1).collect();
        let after = if after.is_empty() {
            "the program reads none of its values after the loop".to_string()
        } else {
            format!(
                "the reads after the loop ({}) only see the last {keep} rows, and must use the same index",
                after.into_iter().collect::<Vec<_>>().join(", ")
            )
        };
        let lines: BTreeSet<String> = deps
            .iter()
            .flat_map(|d| [line_of(region, &d.source), line_of(region, &d.sink)])
            .collect();
        out.push(Suggestion {
            kind: SuggestionKind::ContractArray,
            loops: vec![region.loops[outer].id.clone()],
            text: format!(
                "Contract {name} (accessed at {}): a value written in iteration t of loop {} is last read in iteration t + {m}, so {} ({} bytes instead of {}); {after}.",
                lines.into_iter().collect::<Vec<_>>().join(", "),
                region.loops[outer].label,
                if keep == 1 {
                    "one row suffices: index its outer dimension as [0] instead of [t]".to_string()
                } else {
                    format!("{keep} rows suffice: index its outer dimension as [t % {keep}] instead of [t]")
                },
                keep * row,
                trips * row
            ),
            sizes: vec![
                u32::try_from(trips * row).unwrap_or(u32::MAX),
                u32::try_from(keep * row).unwrap_or(u32::MAX),
            ],
            requires: Vec::new(),
            array: Some(name.to_string()),
            mapping: None,
            rating: Rating::default(),
        });
    }
    out
}

/// Values of the array rooted at `root` read after the region: the iteration of loop `outer`
/// that wrote each (when it is one constant), and where it is read.
fn read_after_rows<'r>(
    region: &'r Region,
    root: &str,
    outer: usize,
) -> Vec<(Option<i64>, &'r str)> {
    region
        .live_out
        .iter()
        .filter(|b| b.storage.root() == root)
        .flat_map(|b| {
            let dp = stmt(region, &b.stmt).and_then(|s| s.loops.iter().position(|&l| l == outer));
            let rows = b.relation.outputs();
            let outers: Vec<Option<i64>> = if rows.is_empty() {
                vec![None]
            } else {
                rows.iter()
                    .map(|r| match dp.and_then(|d| r.get(d).cloned().flatten()) {
                        Some(a) if a.dims_used() == 0 => Some(a.constant),
                        _ => None,
                    })
                    .collect()
            };
            outers.into_iter().map(move |o| (o, b.outside.as_str()))
        })
        .collect()
}

/// The largest distance along loop `outer` of the flow dependences `deps` through array
/// `name`, from every piece of every relation (`None` when one is not a constant distance),
/// and the size of one of its rows: its writer's stride along `outer`.
fn outer_distance(
    region: &Region,
    name: &str,
    deps: &[&Dependence],
    outer: usize,
) -> (Option<i64>, Option<u64>) {
    let mut max_dist = Some(0i64);
    let mut row_bytes = None;
    for d in deps {
        let (Some(sink), Some(src)) = (stmt(region, &d.sink), stmt(region, &d.source)) else {
            max_dist = None;
            break;
        };
        let (Some(ds), Some(dp)) = (
            sink.loops.iter().position(|&l| l == outer),
            src.loops.iter().position(|&l| l == outer),
        ) else {
            max_dist = None;
            break;
        };
        for rows in d.relation.outputs() {
            match rows.get(dp).cloned().flatten() {
                Some(r) if r.single_dim() == Some(ds) && r.coeffs[ds] == 1 => {
                    max_dist = max_dist.map(|m| m.max(-r.constant));
                }
                _ => max_dist = None,
            }
        }
        // The writer's stride along the outer loop: the size of one of its rows.
        if let Some(w) = src
            .accesses
            .iter()
            .find(|a| a.write && a.array.as_deref() == Some(name))
        {
            if let Some(Some(s)) = w.strides.get(dp) {
                row_bytes = Some(s.unsigned_abs());
            }
        }
    }
    (max_dist, row_bytes)
}

/// Successive modulo keeps rows: every access to array `name` must step by one row (`row`
/// bytes) per iteration of loop `outer`. durbin's `y[i] = z[i]` inside `for k` (stride 0
/// along k) or gramschmidt's `A[i][j]` would otherwise be folded onto two "rows".
fn walked_by_rows(region: &Region, name: &str, outer: usize, row: u64) -> bool {
    region.statements.iter().all(|s| {
        let mine = s
            .accesses
            .iter()
            .filter(|a| a.array.as_deref() == Some(name))
            .collect::<Vec<_>>();
        mine.is_empty()
            || s.loops.iter().position(|&l| l == outer).is_some_and(|d| {
                mine.iter().all(|a| {
                    let steps =
                        matches!(a.strides.get(d), Some(Some(st)) if st.unsigned_abs() == row);
                    // What one iteration of the outer loop touches stays within a row:
                    // gramschmidt's `A[i][j]` for `j` from `k + 1` steps by one element
                    // along `k` but spans whole columns.
                    let span = s
                        .loops
                        .iter()
                        .enumerate()
                        .filter(|&(e, _)| e != d)
                        .try_fold(u64::from(a.size), |acc, (e, &l)| {
                            let st = (*a.strides.get(e)?)?.unsigned_abs();
                            let trips = (*region.trips.get(l)?)?;
                            Some(acc + st * trips.saturating_sub(1))
                        });
                    steps && span.is_some_and(|b| b <= row)
                })
            })
    })
}

/// One access of a tiled band that walks a two-dimensional view of its array: rows of `row`
/// bytes along the tiled loop `rows_by`, elements of `size` bytes along the tiled loop
/// `cols_by`, still along the band's other loops.
#[derive(Clone, Copy, PartialEq, Eq)]
struct TiledWalk {
    row: u64,
    size: u32,
    rows_by: usize,
    cols_by: usize,
}

/// The two-dimensional walk of access `a` of a statement over `loops` (region loop per
/// dimension) inside the tiled band `band`, if it is one.
fn tiled_walk(a: &Access, loops: &[usize], band: &[usize]) -> Option<TiledWalk> {
    let size = u64::from(a.size);
    let (mut rows, mut cols) = (Vec::new(), Vec::new());
    for &l in band {
        let d = loops.iter().position(|&x| x == l)?;
        match (*a.strides.get(d)?)?.unsigned_abs() {
            0 => {}
            s if s == size => cols.push(l),
            s if s > size && s % size == 0 => rows.push((l, s)),
            _ => return None,
        }
    }
    match (&rows[..], &cols[..]) {
        (&[(rows_by, row)], &[cols_by]) => Some(TiledWalk {
            row,
            size: a.size,
            rows_by,
            cols_by,
        }),
        _ => None,
    }
}

/// Data tiling (Shirako & Sarkar's layout maps): where the band `tile` tiles walks an array
/// row by row with rows a page or more apart, each tile touches one page per row of the tile
/// (as many TLB entries, and rows a multiple of 4 KiB apart share cache sets). Stored tile by
/// tile, a tile of the array is one contiguous block. Said for each such array, with the
/// tiling it goes with (`enables`): worth nothing without it.
pub(crate) fn data_tiling(region: &Region, tile: &Suggestion) -> Vec<Suggestion> {
    let band: Vec<usize> = tile
        .loops
        .iter()
        .filter_map(|id| region.loops.iter().position(|l| &l.id == id))
        .collect();
    if band.len() != tile.loops.len() || tile.sizes.len() != band.len() {
        return Vec::new();
    }
    let tile_of = |l: usize| {
        band.iter()
            .position(|&b| b == l)
            .map(|k| u64::from(tile.sizes[k].max(1)))
    };
    // Per array: its walks and the lines of its accesses; `None` once an access of it in the
    // band walks it otherwise.
    let mut arrays: BTreeMap<&str, Option<(TiledWalk, BTreeSet<String>)>> = BTreeMap::new();
    for s in &region.statements {
        if !band.iter().all(|l| s.loops.contains(l)) {
            continue;
        }
        for a in &s.accesses {
            let Some(name) = a.array.as_deref() else {
                continue;
            };
            let walk = tiled_walk(a, &s.loops, &band);
            let entry = arrays
                .entry(name)
                .or_insert_with(|| walk.map(|w| (w, BTreeSet::new())));
            match (entry.as_mut(), walk) {
                (Some((w, lines)), Some(x)) if *w == x => {
                    lines.extend(s.lines().into_iter().map(str::to_string));
                }
                _ => *entry = None,
            }
        }
    }
    let mut out = Vec::new();
    for (name, found) in arrays {
        let Some((w, lines)) = found else { continue };
        if w.row < SET_SPAN || name.starts_with("a stack array") {
            continue;
        }
        let (Some(tr), Some(tc)) = (tile_of(w.rows_by), tile_of(w.cols_by)) else {
            continue;
        };
        let size = u64::from(w.size.max(1));
        let rows = region.trips.get(w.rows_by).copied().flatten().unwrap_or(tr);
        let map = tiled_map(name, w.row / size, rows, size, (tr, tc));
        let label = |l: usize| format!("{} ({})", region.loops[l].label, region.loops[l].id);
        out.push(Suggestion {
            kind: SuggestionKind::TileArray,
            loops: tile.loops.clone(),
            text: format!(
                "Store {name} (accessed at {}) tile by tile, in blocks of {tr}x{tc} elements, with the tiling of loops {}: within a tile, loop {} steps {} bytes from row to row, so each of the tile's {tr} rows is on a page of its own (a TLB entry each{}). Stored by tiles (map {}{}, i.e. index it as {}), a tile is {} contiguous bytes.",
                lines.into_iter().collect::<Vec<_>>().join(", "),
                band.iter().map(|&l| label(l)).collect::<Vec<_>>().join(", "),
                label(w.rows_by),
                w.row,
                if w.row % SET_SPAN == 0 {
                    ", and rows 4 KiB apart compete for the same cache sets"
                } else {
                    ""
                },
                map.isl,
                crate::smo::standing(name),
                map.c,
                tr * tc * size
            ),
            sizes: vec![
                u32::try_from(tr).unwrap_or(u32::MAX),
                u32::try_from(tc).unwrap_or(u32::MAX),
            ],
            requires: Vec::new(),
            array: Some(name.to_string()),
            mapping: Some(map),
            rating: Rating {
                enables: vec![SuggestionKind::Tile],
                ..Rating::default()
            },
        });
    }
    out
}

/// The tile-by-tile layout of a view of `cols` elements per row, `rows` rows walked, tiles of
/// `tr` x `tc` elements: tiles in row-major order, each row-major inside. A partial last tile
/// of a row or column is stored whole (the bytes after count it).
fn tiled_map(name: &str, cols: u64, rows: u64, size: u64, (tr, tc): (u64, u64)) -> Mapping {
    let a = crate::smo::c_name(name);
    let tiles_per_row = cols.div_ceil(tc);
    Mapping {
        isl: format!("{{ {a}[i, j] -> [floor(i/{tr}), floor(j/{tc}), i mod {tr}, j mod {tc}] }}"),
        c: format!(
            "{a}[((i / {tr}) * {tiles_per_row} + j / {tc}) * {} + (i % {tr}) * {tc} + j % {tc}]",
            tr * tc
        ),
        bytes_before: rows * cols * size,
        bytes_after: rows.div_ceil(tr) * tr * tiles_per_row * tc * size,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isl_rs::{Context, Map, Set};

    /// The data-tiling map is isl notation isl reads, one-to-one over the array, and its C
    /// index counts the bytes after: 40 rows of 100 doubles in 32x32 tiles are stored as 64
    /// rows of 4 tiles.
    #[test]
    fn a_tiled_layout_is_one_to_one_and_sized_in_whole_tiles() {
        let m = tiled_map("`A`", 100, 40, 8, (32, 32));
        assert_eq!(
            m.c,
            "A[((i / 32) * 4 + j / 32) * 1024 + (i % 32) * 32 + j % 32]"
        );
        assert_eq!((m.bytes_before, m.bytes_after), (40 * 800, 64 * 128 * 8));
        let ctx = Context::alloc();
        let map = Map::read_from_str(&ctx, &m.isl).unwrap();
        let array = Set::read_from_str(&ctx, "{ A[i, j] : 0 <= i < 40 and 0 <= j < 100 }").unwrap();
        let on = map.intersect_domain(array).unwrap();
        assert!(on.is_injective().unwrap());
        let point = Set::read_from_str(&ctx, "{ A[33, 70] }").unwrap();
        let image = on.intersect_domain(point).unwrap().range().unwrap();
        let want = Set::read_from_str(&ctx, "{ [1, 2, 1, 6] }").unwrap();
        assert!(image.is_equal(&want).unwrap());
    }
}
