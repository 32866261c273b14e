//! Registers that only mirror an array element: the compiler's scalar replacement, which
//! DeLICM undoes at no cost. gcc -O2 keeps matmul's `C[i][j]` in a register across the k loop
//! (loaded before it, stored after it), and carries a stencil's `a[i - 1]` and `a[i]` from one
//! iteration to the next in registers. The source has no such register: every verdict
//! (`check`, legality, tiling, reductions, storage advice) must see the element's
//! dependences instead, so [`elements_for_registers`] rewrites the region's dependences once,
//! before its analysis:
//! - an accumulator range (a plain load of an element into a register, updates of the
//!   register in the loops below, a plain store of it back to the same element, at the same
//!   iterations of the loops around): inside one range the register is the element, so its
//!   dependences there become the element's; those between ranges only reuse the register
//!   (each range has an element of its own) and go;
//! - a forwarded value: a register read whose value memory also holds at the time of the
//!   read (it was loaded from an element, or stored to one, and that element is not written
//!   again before the read) reads the element: the register's flow dependence is replaced by
//!   the element's (its writer before, its next writer after), composed through the load or
//!   the store. A load all of whose values are forwarded has nothing left to order.
//!
//! Registers debug information names (a source variable kept in a register) stay real
//! storage, and so does everything in a region that calls library code (it may read or
//! write the element unseen).

use crate::input::{Access, Boundary, Dependence, EqualPairs, Region, Statement, Storage};
use crate::islx::{self, empty};
use crate::legality::{kelly, schedule_map};
use crate::params::Parameterizer;
use crate::poly::{Convex, Polyhedra};
use crate::{Error, Options};
use isl_rs::{Context, UnionMap};
use std::collections::{BTreeMap, BTreeSet};
use tracer::DepKind;

/// Share of the region's isl time the rewrite may take (it is mostly compositions of small
/// relations); when it runs out, the region is analysed as observed.
const SHARE: f64 = 0.2;

/// Rewrites the dependences through compiler registers that mirror array elements into the
/// elements' own (see the module's documentation). Leaves the region as it was when isl
/// stops or an answer cannot be read back.
pub fn elements_for_registers(region: &mut Region, opts: &Options) {
    let runtime = |c: &String| c.starts_with("GOMP_") || c.starts_with("omp_");
    if !region.library_calls.iter().all(runtime) {
        return;
    }
    let opts = Options {
        isl_max_seconds: (opts.isl_max_seconds * SHARE).max(0.5),
        ..opts.clone()
    };
    if let Ok(edits) = islx::limited(&opts, |isl| Rewriter::new(region, isl)?.edits()) {
        edits.apply(region);
    }
}

/// What the rewrite does to the region's dependences (indices into the original list).
#[derive(Default)]
struct Edits {
    drop: BTreeSet<usize>,
    /// The element's storage, the register it is kept in, and the pairs that stay (within
    /// one accumulator range).
    relabel: BTreeMap<usize, (Storage, String, Polyhedra)>,
    add: Vec<Dependence>,
    /// Live-out borders (indices into [`Region::live_out`]) through the element instead.
    borders: BTreeMap<usize, Storage>,
}

impl Edits {
    fn apply(mut self, region: &mut Region) {
        for (k, storage) in std::mem::take(&mut self.borders) {
            if let Some(b) = region.live_out.get_mut(k) {
                b.storage = storage;
            }
        }
        if self.drop.is_empty() && self.relabel.is_empty() && self.add.is_empty() {
            return;
        }
        let old = std::mem::take(&mut region.dependences);
        for (i, mut d) in old.into_iter().enumerate() {
            if let Some((storage, reg, relation)) = self.relabel.remove(&i) {
                d.storage = storage;
                d.relation = relation.into();
                d.reload = None;
                d.mirror = Some(reg);
            } else if self.drop.contains(&i) {
                continue;
            }
            region.dependences.push(d);
        }
        region.dependences.append(&mut self.add);
    }
}

/// A plain load (`movsd (%rax), %xmm1`): its one memory access, a read.
fn load_access(s: &Statement) -> Option<&Access> {
    let u = s.update.as_ref()?;
    match &s.accesses[..] {
        [a] if u.op.is_none() && u.acc_memory && !a.write => Some(a),
        _ => None,
    }
}

/// A plain store of register `reg` (`movsd %xmm1, (%rax)`): its one memory access, a write.
fn store_access<'s>(s: &'s Statement, reg: &str) -> Option<&'s Access> {
    let u = s.update.as_ref()?;
    match &s.accesses[..] {
        [a] if u.op.is_none()
            && !u.acc_memory
            && a.write
            && u.acc_registers.iter().any(|r| r == reg) =>
        {
            Some(a)
        }
        _ => None,
    }
}

/// Whether two accesses reach the same element at every instance (same affine address and
/// width), so that a register loaded by one and stored by the other stays one element's. `b`
/// may sit in loops below `a`'s, along which its address does not move.
fn same_element(a: &Access, b: &Access) -> bool {
    let (outer, inner) = b.strides.split_at(a.strides.len().min(b.strides.len()));
    a.array.is_some()
        && a.array == b.array
        && a.size == b.size
        && a.base.is_some()
        && a.base == b.base
        && a.strides.iter().all(Option::is_some)
        && a.strides == outer
        && inner.iter().all(|s| *s == Some(0))
}

fn in_memory(s: &Storage) -> bool {
    matches!(s, Storage::Scalar { .. } | Storage::Array { .. })
}

/// The register a dependence goes through when no source variable is said to live there.
fn unnamed_register(s: &Storage) -> Option<&str> {
    match s {
        Storage::Register { reg, var: None } => Some(reg),
        _ => None,
    }
}

struct Rewriter<'a> {
    region: &'a Region,
    isl: &'a Context,
    stmts: BTreeMap<&'a str, &'a Statement>,
    /// The original schedule of each statement (Kelly's mapping), by name.
    times: BTreeMap<&'a str, Polyhedra>,
}

type Found<T> = Result<Option<T>, Error>;

impl<'a> Rewriter<'a> {
    fn new(region: &'a Region, isl: &'a Context) -> Result<Rewriter<'a>, Error> {
        let stmts = region
            .statements
            .iter()
            .map(|s| (s.name.as_str(), s))
            .collect();
        let times = region
            .statements
            .iter()
            .zip(kelly(region, &|s| (0..s.loops.len()).collect()))
            .map(|(s, t)| (s.name.as_str(), t))
            .collect();
        Ok(Rewriter {
            region,
            isl,
            stmts,
            times,
        })
    }

    fn deps(&self) -> &'a [Dependence] {
        &self.region.dependences
    }

    fn map(&self, p: &Polyhedra) -> Result<UnionMap, Error> {
        p.to_union_map(self.isl, &mut Parameterizer::none())
    }

    /// Dependence `i`'s relation, consumer → producer.
    fn rel(&self, i: usize) -> Result<UnionMap, Error> {
        self.map(&self.deps()[i].relation)
    }

    /// `{ a[x] -> b[y] }` where `b[y]` runs before `a[x]` (or at the same time, `or_same`) in
    /// the program's order.
    fn runs_before(&self, a: &str, b: &str, or_same: bool) -> Result<UnionMap, Error> {
        let e = || islx::isl("ordering instances");
        let (Some(ta), Some(tb)) = (self.times.get(a), self.times.get(b)) else {
            return UnionMap::empty_ctx(self.isl).map_err(e());
        };
        let (ta, tb) = (
            schedule_map(self.isl, std::slice::from_ref(ta))?,
            schedule_map(self.isl, std::slice::from_ref(tb))?,
        );
        match or_same {
            true => ta.lex_ge_union_map(tb),
            false => ta.lex_gt_union_map(tb),
        }
        .map_err(e())
    }

    /// `{ sink[x] -> source[y] : x and y equal on their first `depth` coordinates }`: the
    /// pairs within one iteration of the loops around an accumulator range.
    fn same_outer(&self, sink: &Statement, source: &Statement, depth: usize) -> Polyhedra {
        let (n, m) = (sink.loops.len(), source.loops.len());
        let equalities = (0..depth)
            .map(|k| {
                let mut row = vec![0; n + m + 1];
                row[k] = 1;
                row[n + k] = -1;
                row
            })
            .collect();
        Polyhedra {
            input: crate::poly::Tuple::new(&sink.name, n),
            output: Some(crate::poly::Tuple::new(&source.name, m)),
            pieces: vec![Convex {
                exists: 0,
                equalities,
                inequalities: Vec::new(),
            }],
        }
    }

    /// A new dependence with `relation` (consumer → producer), `None` when isl's answer cannot
    /// be read back.
    fn dep(
        &self,
        reg: &str,
        (source, sink): (&str, &str),
        kind: DepKind,
        storage: &Storage,
        relation: &UnionMap,
        exact: bool,
    ) -> Option<Dependence> {
        Some(Dependence {
            source: source.to_string(),
            sink: sink.to_string(),
            kind,
            storage: storage.clone(),
            relation: Polyhedra::from_union_map(relation)?.into(),
            exact,
            equal_pairs: EqualPairs::Unknown,
            reload: None,
            mirror: Some(reg.to_string()),
            invariant_in: Vec::new(),
        })
    }

    fn edits(&self) -> Result<Edits, Error> {
        let mut edits = Edits::default();
        let mut by_reg: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, d) in self.deps().iter().enumerate() {
            if let Storage::Register { reg, .. } = &d.storage {
                by_reg.entry(reg).or_default().push(i);
            }
        }
        for (reg, idx) in &by_reg {
            if !self.accumulators(reg, idx, &mut edits)? {
                self.forward(reg, idx, &mut edits)?;
            }
        }
        Ok(edits)
    }

    /// The accumulator ranges of register `reg` (its dependences `idx`): their dependences
    /// go into `edits`. Returns whether there was one.
    fn accumulators(&self, reg: &str, idx: &[usize], edits: &mut Edits) -> Result<bool, Error> {
        let deps = self.deps();
        let flows = || {
            idx.iter()
                .map(|&i| &deps[i])
                .filter(|d| d.kind == DepKind::Flow)
        };
        let loads: BTreeSet<&str> = flows()
            .map(|d| d.source.as_str())
            .filter(|s| self.stmts.get(s).and_then(|s| load_access(s)).is_some())
            .collect();
        let stores: BTreeSet<&str> = flows()
            .map(|d| d.sink.as_str())
            .filter(|s| {
                self.stmts
                    .get(s)
                    .and_then(|s| store_access(s, reg))
                    .is_some()
            })
            .collect();
        let mut taken: BTreeSet<&str> = BTreeSet::new();
        let mut found = false;
        for l in &loads {
            for st in &stores {
                let Some((range, plan)) = self.accumulator(reg, idx, l, st)? else {
                    continue;
                };
                // Ranges of one register that overlap are not one element's each.
                if range.iter().any(|s| taken.contains(s)) {
                    return Ok(false);
                }
                taken.extend(range);
                edits.drop.extend(plan.drop);
                edits.relabel.extend(plan.relabel);
                edits.borders.extend(plan.borders);
                found = true;
            }
        }
        Ok(found)
    }

    /// The accumulator range of register `reg` loaded by statement `l` and stored by `st`:
    /// its statements and what becomes of the register's dependences, when it is one.
    fn accumulator(
        &self,
        reg: &str,
        idx: &[usize],
        l: &str,
        st: &str,
    ) -> Found<(BTreeSet<&'a str>, Edits)> {
        let deps = self.deps();
        let (Some(&load), Some(&store)) = (self.stmts.get(l), self.stmts.get(st)) else {
            return Ok(None);
        };
        let (Some(la), Some(sa)) = (load_access(load), store_access(store, reg)) else {
            return Ok(None);
        };
        let depth = load.loops.len();
        if load.loops != store.loops || !same_element(la, sa) {
            return Ok(None);
        }
        let (Some(&from), Some(&to)) = (load.positions.get(depth), store.positions.get(depth))
        else {
            return Ok(None);
        };
        if from >= to {
            return Ok(None);
        }
        // Every statement that runs between the load and the store of one range.
        let range: BTreeSet<&'a str> = self
            .region
            .statements
            .iter()
            .filter(|s| {
                s.loops.len() >= depth
                    && s.loops[..depth] == load.loops[..]
                    && s.positions
                        .get(depth)
                        .is_some_and(|p| (from..=to).contains(p))
            })
            .map(|s| s.name.as_str())
            .collect();
        let inside = |d: &Dependence| {
            (
                range.contains(d.source.as_str()),
                range.contains(d.sink.as_str()),
            )
        };
        let same_outer = |d: &Dependence| -> Result<Option<UnionMap>, Error> {
            let (Some(sink), Some(source)) = (
                self.stmts.get(d.sink.as_str()),
                self.stmts.get(d.source.as_str()),
            ) else {
                return Ok(None);
            };
            Ok(Some(self.map(&self.same_outer(sink, source, depth))?))
        };
        let e = || islx::isl("comparing an accumulator's dependences");
        for &i in idx {
            let d = &deps[i];
            let (a, b) = inside(d);
            if !a && !b {
                continue;
            }
            // A source variable in the register: real storage.
            if unnamed_register(&d.storage).is_none() {
                return Ok(None);
            }
            // Values flow only within one range: from the load to the store.
            if d.kind == DepKind::Flow {
                let Some(eq) = same_outer(d)? else {
                    return Ok(None);
                };
                if !(a && b && self.rel(i)?.is_subset(&eq).map_err(e())?) {
                    return Ok(None);
                }
            }
        }
        let crosses = |b: &Boundary| {
            unnamed_register(&b.storage) == Some(reg) && range.contains(b.stmt.as_str())
        };
        // A value from before the region would not be the element's.
        if self.region.live_in.iter().any(crosses) {
            return Ok(None);
        }
        // The range's own statements: the load, the store, and stores of the register to its
        // element inside the range (gcc -O2 keeps trmm's `B[i][j]` in memory at every k as
        // well): they are the element's accesses.
        let own: BTreeSet<&str> = range
            .iter()
            .copied()
            .filter(|s| {
                *s == l
                    || *s == st
                    || store_access(self.stmts[s], reg).is_some_and(|a| same_element(la, a))
            })
            .collect();
        // Other accesses to the array in the range reach other elements (memory is stale at
        // the range's own), and the ranges have elements of their own: no dependence through
        // memory between two ranges' own accesses, nor between a range's own accesses and
        // another access in the same iteration of the loops around.
        let array = &la.array;
        let others: BTreeSet<&str> = range
            .iter()
            .copied()
            .filter(|s| {
                !own.contains(s) && self.stmts[s].accesses.iter().any(|a| &a.array == array)
            })
            .collect();
        for (i, d) in deps.iter().enumerate() {
            if !in_memory(&d.storage) {
                continue;
            }
            let (a, b) = (d.source.as_str(), d.sink.as_str());
            let both_own = own.contains(a) && own.contains(b);
            let mixed =
                (own.contains(a) && others.contains(b)) || (others.contains(a) && own.contains(b));
            if !both_own && !mixed {
                continue;
            }
            let Some(eq) = same_outer(d)? else {
                return Ok(None);
            };
            let rel = self.rel(i)?;
            let fits = match both_own {
                true => rel.is_subset(&eq).map_err(e())?,
                false => empty(&rel.intersect(eq).map_err(e())?)?,
            };
            if !fits {
                return Ok(None);
            }
        }
        let Some(name) = array.clone() else {
            return Ok(None);
        };
        let element = Storage::Array { name };
        let mut plan = Edits::default();
        for &i in idx {
            let d = &deps[i];
            match inside(d) {
                (true, true) => {
                    let Some(eq) = same_outer(d)? else {
                        return Ok(None);
                    };
                    let within = self.rel(i)?.intersect(eq).map_err(e())?;
                    if empty(&within)? {
                        plan.drop.insert(i);
                    } else {
                        let Some(relation) = Polyhedra::from_union_map(&within) else {
                            return Ok(None);
                        };
                        plan.relabel
                            .insert(i, (element.clone(), reg.to_string(), relation));
                    }
                }
                // The register reused outside the ranges: another value, renamed freely.
                (true, false) | (false, true) => {
                    plan.drop.insert(i);
                }
                (false, false) => {}
            }
        }
        // What the register holds after the region (read there, or only taken for a library
        // call's argument) is the last range's element, which its store left in memory.
        for (k, b) in self.region.live_out.iter().enumerate() {
            if crosses(b) {
                plan.borders.insert(k, element.clone());
            }
        }
        Ok(Some((range, plan)))
    }

    /// Dependence `j` (a later writer `w` -> the producer) composed with `via` (the read ->
    /// the producer): `w -> read` pairs, or `None` when one of those writers may run before
    /// the read `u` (the element would not hold the value when the read needs it).
    fn next_writers(&self, j: usize, via: &UnionMap, u: &str, w: &str) -> Found<UnionMap> {
        let e = || islx::isl("composing a forwarded value's dependences");
        let c = self
            .rel(j)?
            .apply_range(via.copy().map_err(e())?.reverse().map_err(e())?)
            .map_err(e())?;
        if empty(&c)? {
            return Ok(Some(c));
        }
        let early = c
            .copy()
            .map_err(e())?
            .reverse()
            .map_err(e())?
            .intersect(self.runs_before(u, w, true)?)
            .map_err(e())?;
        Ok(empty(&early)?.then_some(c))
    }

    /// Forwards the values of register `reg` (dependences `idx`) that memory holds when they
    /// are read; a load whose every value is forwarded loses its memory dependences.
    fn forward(&self, reg: &str, idx: &[usize], edits: &mut Edits) -> Result<(), Error> {
        let deps = self.deps();
        let mut forwarded: BTreeSet<usize> = BTreeSet::new();
        for &i in idx {
            let d = &deps[i];
            if d.kind != DepKind::Flow || unnamed_register(&d.storage).is_none() {
                continue;
            }
            let (Some(&p), Some(&u)) = (
                self.stmts.get(d.source.as_str()),
                self.stmts.get(d.sink.as_str()),
            ) else {
                continue;
            };
            // A value used within the iteration that made it is a temporary of the source's
            // statement already.
            if d.equal_pairs == EqualPairs::Always && p.loops == u.loops {
                continue;
            }
            let new = match load_access(p) {
                Some(a) if a.array.as_ref().is_some_and(|n| !n.contains("stack")) => {
                    self.forwarded_load(i, reg)?
                }
                Some(_) => None,
                None => self.forwarded_store(i, reg, idx)?,
            };
            if let Some(new) = new {
                forwarded.insert(i);
                edits.add.extend(new);
            }
        }
        edits.drop.extend(&forwarded);
        // Loads that only fed forwarded reads.
        let loads: BTreeSet<&str> = forwarded.iter().map(|&i| deps[i].source.as_str()).collect();
        for load in loads {
            let all = idx.iter().all(|&i| {
                let d = &deps[i];
                d.kind != DepKind::Flow || d.source != load || forwarded.contains(&i)
            });
            let out = self
                .region
                .live_out
                .iter()
                .any(|b| b.stmt == load && unnamed_register(&b.storage) == Some(reg));
            if !all || out || self.stmts.get(load).and_then(|s| load_access(s)).is_none() {
                continue;
            }
            for (j, m) in deps.iter().enumerate() {
                let fed = m.kind == DepKind::Flow && m.sink == load;
                let read = m.kind == DepKind::Anti && m.source == load;
                if in_memory(&m.storage) && (fed || read) {
                    edits.drop.insert(j);
                }
            }
        }
        Ok(())
    }

    /// Flow dependence `i` from a plain load to a reader, as the reader's dependences on the
    /// loaded element: its writers before the load, its next writers after (which must run
    /// after the reader, or memory no longer holds the value then).
    fn forwarded_load(&self, i: usize, reg: &str) -> Found<Vec<Dependence>> {
        let deps = self.deps();
        let d = &deps[i];
        let (u, p) = (d.sink.as_str(), d.source.as_str());
        let e = || islx::isl("forwarding a load");
        let read = self.rel(i)?; // U -> P
        let mut out = Vec::new();
        for (j, m) in deps.iter().enumerate() {
            if !in_memory(&m.storage) {
                continue;
            }
            if m.kind == DepKind::Flow && m.sink == p {
                let c = read
                    .copy()
                    .map_err(e())?
                    .apply_range(self.rel(j)?)
                    .map_err(e())?;
                if empty(&c)? {
                    continue;
                }
                let Some(new) = self.dep(
                    reg,
                    (&m.source, u),
                    DepKind::Flow,
                    &m.storage,
                    &c,
                    d.exact && m.exact,
                ) else {
                    return Ok(None);
                };
                out.push(new);
            } else if m.kind == DepKind::Anti && m.source == p {
                // W' -> P -> U
                let Some(c) = self.next_writers(j, &read, u, &m.sink)? else {
                    return Ok(None);
                };
                if empty(&c)? {
                    continue;
                }
                let Some(new) = self.dep(
                    reg,
                    (u, &m.sink),
                    DepKind::Anti,
                    &m.storage,
                    &c,
                    d.exact && m.exact,
                ) else {
                    return Ok(None);
                };
                out.push(new);
            }
        }
        Ok(Some(out))
    }

    /// Flow dependence `i` of register `reg` from a computation to a reader, when a plain
    /// store put the value into an element before the read and nothing wrote the element
    /// again until then: the reader's dependences on that element.
    fn forwarded_store(&self, i: usize, reg: &str, idx: &[usize]) -> Found<Vec<Dependence>> {
        let deps = self.deps();
        let d = &deps[i];
        let (u, p) = (d.sink.as_str(), d.source.as_str());
        let e = || islx::isl("forwarding a stored value");
        let read = self.rel(i)?; // U -> P
        let mut covered = UnionMap::empty_ctx(self.isl).map_err(e())?;
        let mut out = Vec::new();
        for &s in idx {
            let sd = &deps[s];
            if sd.kind != DepKind::Flow || sd.source != p {
                continue;
            }
            let st = sd.sink.as_str();
            let Some(name) = self
                .stmts
                .get(st)
                .and_then(|x| store_access(x, reg))
                .and_then(|a| a.array.clone())
            else {
                continue;
            };
            let stored = self.rel(s)?; // St -> P
                                       // U -> St: the stores of the value that run before the read.
            let x = read
                .copy()
                .map_err(e())?
                .apply_range(stored.copy().map_err(e())?.reverse().map_err(e())?)
                .map_err(e())?
                .intersect(self.runs_before(u, st, false)?)
                .map_err(e())?;
            if empty(&x)? {
                continue;
            }
            let via = x.copy().map_err(e())?.apply_range(stored).map_err(e())?;
            covered = covered.union(via).map_err(e())?;
            let mut storage = Storage::Array { name };
            for (j, o) in deps.iter().enumerate() {
                if o.kind != DepKind::Output || o.source != st || !in_memory(&o.storage) {
                    continue;
                }
                // W'' -> St -> U: the element's next writers, which must come after the read.
                let Some(c) = self.next_writers(j, &x, u, &o.sink)? else {
                    return Ok(None);
                };
                if empty(&c)? {
                    continue;
                }
                storage = o.storage.clone();
                let Some(new) = self.dep(
                    reg,
                    (u, &o.sink),
                    DepKind::Anti,
                    &o.storage,
                    &c,
                    d.exact && o.exact,
                ) else {
                    return Ok(None);
                };
                out.push(new);
            }
            let Some(new) = self.dep(
                reg,
                (st, u),
                DepKind::Flow,
                &storage,
                &x,
                d.exact && sd.exact,
            ) else {
                return Ok(None);
            };
            out.push(new);
        }
        // Every value read must have been stored first.
        if out.is_empty() || !read.is_subset(&covered).map_err(e())? {
            return Ok(None);
        }
        Ok(Some(out))
    }
}
