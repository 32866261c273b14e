//! Reductions: a value carried from one iteration of a loop to the next only to be combined
//! with something by one associative operator (`s += a[i]`, `y[j] += A[i][j] * x[i]`,
//! `m = max(m, a[i])`). Its carried flow dependence does not order the iterations: each
//! thread (or vector lane) can accumulate a partial result of its own, combined at the end,
//! which is what OpenMP's `reduction(op: var)` does.
//!
//! The test is on machine instructions (the statements before blocks are formed), from the
//! observed dependences alone. For a loop `l` and a storage `X` (register, scalar or array
//! element) through which `l` carries flow dependences, the *chain* is every statement on a
//! path, inside one iteration, from an instruction reading `X` to one writing it. It is a
//! reduction when:
//! - every link is a copy or an update `acc op other` with one operator throughout, and the
//!   accumulated value comes into each link through an operand that may play `acc`;
//! - each link takes the accumulated value through one storage only, so `other` never
//!   depends on it (`s = s + s * a[i]` is no reduction);
//! - inside the loop, nothing but the chain reads what the chain writes, and nothing but the
//!   chain reads or writes `X` (a prefix sum `b[i] = s` reads partial results; so does a
//!   comparison, [`crate::input::Compared`]: `if (s > t)`);
//! - for an array, the chain reads and writes the same element in each iteration (a scan
//!   `y[j + 1] = y[j] + a[j]` moves along the array and is no reduction).
//!
//! Floating-point operators are associative only up to rounding: such a reduction is marked,
//! and its result may differ in the last bits.

use crate::distance::{Distances, Tri};
use crate::input::{Access, DepKind, Dependence, ReduceOp, Region, Statement, Storage};
use crate::islx::{empty, union_map};
use crate::legality::line_of;
use crate::Error;
use isl_rs::Context;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

/// A reduction found on a loop.
#[derive(Clone, Debug, PartialEq)]
pub struct Reduction {
    /// The storage the partial results live in.
    pub storage: Storage,
    pub op: ReduceOp,
    /// The operator is floating point: combining partial results reassociates it.
    pub fp: bool,
    /// Source lines of the updates.
    pub lines: Vec<String>,
    /// When the root holds several storages (variables of one stack frame), each with the
    /// lines of its updates; empty when it holds one.
    pub parts: Vec<(Storage, Vec<String>)>,
}

/// The reductions of a region's loops, found when a loop's carried flow dependence asks for
/// them (the test costs isl work per dependence), on the statements as the pipeline gives
/// them: one per instruction.
pub(crate) struct Reductions<'a> {
    finder: Option<RefCell<Finder<'a>>>,
    /// Per loop and storage (its [`Storage::root`]): the reduction, or none.
    known: RefCell<BTreeMap<(usize, String), Option<Reduction>>>,
}

impl<'a> Reductions<'a> {
    /// No reductions anywhere.
    pub fn none() -> Reductions<'a> {
        Reductions {
            finder: None,
            known: RefCell::new(BTreeMap::new()),
        }
    }

    /// Reductions found from the dependences' distances, and by isl where those do not
    /// decide.
    pub fn new(region: &'a Region, isl: &'a Context) -> Reductions<'a> {
        Self::with(region, Some(isl), None)
    }

    /// Reductions found from the dependences' distances alone (no isl: no budget stops
    /// them); where those do not decide, the answer is the cautious one (no reduction).
    /// `distances` are the region's, shared with the caller (computing them is a pass over
    /// every dependence's pieces).
    pub fn direct(region: &'a Region, distances: &'a Distances) -> Reductions<'a> {
        Self::with(region, None, Some(distances))
    }

    fn with(
        region: &'a Region,
        isl: Option<&'a Context>,
        distances: Option<&'a Distances>,
    ) -> Reductions<'a> {
        Reductions {
            finder: Some(RefCell::new(Finder {
                region,
                isl,
                distances: match distances {
                    Some(d) => std::borrow::Cow::Borrowed(d),
                    None => std::borrow::Cow::Owned(Distances::new(region)),
                },
                same_iteration: vec![None; region.dependences.len()],
            })),
            known: RefCell::new(BTreeMap::new()),
        }
    }

    /// The reduction of loop `l` (an index into the region's loops) through the storage
    /// `root`, if its carried flow dependences are one.
    pub fn of(&self, l: usize, root: &str) -> Result<Option<Reduction>, Error> {
        let key = (l, root.to_string());
        if let Some(known) = self.known.borrow().get(&key) {
            return Ok(known.clone());
        }
        let found = match &self.finder {
            Some(f) => f.borrow_mut().on_loop(l, root)?,
            None => None,
        };
        self.known.borrow_mut().insert(key, found.clone());
        Ok(found)
    }
}

impl Reduction {
    /// The storage changes that run it in parallel: OpenMP's `reduction` on its storage (a
    /// section of it when the array is reached through a pointer), one per variable when its
    /// root holds several.
    pub(crate) fn requirements(&self, region: &Region) -> Vec<crate::legality::Requirement> {
        let one = |storage: &Storage, lines: &[String]| crate::legality::Requirement {
            change: crate::legality::Change::Reduction {
                op: self.op,
                fp: self.fp,
                array: matches!(storage, Storage::Array { .. }),
                section: storage
                    .variable()
                    .and_then(|v| region.sections.get(v).copied()),
            },
            storage: storage.describe(),
            lines: lines.to_vec(),
            step: None,
        };
        if self.parts.is_empty() {
            vec![one(&self.storage, &self.lines)]
        } else {
            self.parts.iter().map(|(s, ls)| one(s, ls)).collect()
        }
    }
}

struct Finder<'a> {
    region: &'a Region,
    /// Asked where the distances do not decide; `None`: such a question gets the cautious
    /// answer.
    isl: Option<&'a Context>,
    distances: std::borrow::Cow<'a, Distances>,
    /// Per dependence, once asked: whether it only relates instances of the same iteration of
    /// every loop around both ends.
    same_iteration: Vec<Option<bool>>,
}

impl<'a> Finder<'a> {
    fn stmt(&self, name: &str) -> Option<&'a Statement> {
        self.region.statements.iter().find(|s| s.name == name)
    }

    fn on_loop(&mut self, l: usize, root: &str) -> Result<Option<Reduction>, Error> {
        let region = self.region;
        let inside: BTreeSet<&str> = region
            .statements
            .iter()
            .filter(|s| s.loops.contains(&l))
            .map(|s| s.name.as_str())
            .collect();
        let Some(depth) = region
            .statements
            .iter()
            .find_map(|s| s.loops.iter().position(|&x| x == l))
        else {
            return Ok(None);
        };
        let within: Vec<usize> = (0..region.dependences.len())
            .filter(|&i| {
                let d = &region.dependences[i];
                inside.contains(d.source.as_str()) && inside.contains(d.sink.as_str())
            })
            .collect();
        let links = |name: &str| self.stmt(name).is_some_and(|s| s.update.is_some());
        // The storage's carried flow dependences, between links.
        let mut carried = Vec::new();
        for &i in &within {
            let d = &region.dependences[i];
            if d.kind == DepKind::Flow
                && d.storage.root() == root
                && links(&d.source)
                && links(&d.sink)
                && self.carried_at(i, depth)?
            {
                carried.push(i);
            }
        }
        if carried.is_empty() {
            return Ok(None);
        }
        self.chain(l, &within, root, &carried)
    }

    /// The reduction through the storage `root`, whose carried flow dependences inside loop
    /// `l` are `carried`, if the chain passes every test of the module's description.
    fn chain(
        &mut self,
        l: usize,
        within: &[usize],
        root: &str,
        carried: &[usize],
    ) -> Result<Option<Reduction>, Error> {
        let region = self.region;
        let deps = &region.dependences;
        // Anything carried through the storage that is not a flow between links disqualifies
        // it; so does any other loop's storage being mixed in (checked below).
        let readers: BTreeSet<&str> = carried.iter().map(|&i| deps[i].sink.as_str()).collect();
        let writers: BTreeSet<&str> = carried.iter().map(|&i| deps[i].source.as_str()).collect();
        // Links of one iteration: flow dependences between links, inside one iteration.
        let mut edges: Vec<usize> = Vec::new();
        for &i in within {
            let d = &deps[i];
            let linked = [&d.source, &d.sink]
                .iter()
                .all(|n| self.stmt(n).is_some_and(|s| s.update.is_some()));
            if d.kind == DepKind::Flow && linked && self.in_one_iteration(i)? {
                edges.push(i);
            }
        }
        let reach = |from: &BTreeSet<&'a str>, forward: bool| -> BTreeSet<&'a str> {
            let mut seen: BTreeSet<&str> = from.clone();
            let mut stack: Vec<&str> = from.iter().copied().collect();
            while let Some(n) = stack.pop() {
                for &i in &edges {
                    let (a, b) = if forward {
                        (deps[i].source.as_str(), deps[i].sink.as_str())
                    } else {
                        (deps[i].sink.as_str(), deps[i].source.as_str())
                    };
                    if a == n && seen.insert(b) {
                        stack.push(b);
                    }
                }
            }
            seen
        };
        let down = reach(&readers, true);
        let up = reach(&writers, false);
        let chain: BTreeSet<&str> = down.intersection(&up).copied().collect();
        if !readers.iter().chain(&writers).all(|n| chain.contains(n)) {
            return Ok(None);
        }
        // One operator throughout, and at least one update.
        let mut ops: BTreeSet<ReduceOp> = BTreeSet::new();
        let mut fp = false;
        let mut lines: BTreeSet<String> = BTreeSet::new();
        for n in &chain {
            let s = self.stmt(n).expect("chain statements exist");
            if let Some(op) = s.update.as_ref().and_then(|u| u.op) {
                ops.insert(op);
                fp |= s.fp;
                lines.insert(line_of(region, n));
            }
        }
        let op = match ops.len() {
            1 => *ops.iter().next().expect("one operator"),
            _ => return Ok(None),
        };
        let inside_l = |n: &str| self.stmt(n).is_some_and(|s| s.loops.contains(&l));
        for n in &chain {
            let s = self.stmt(n).expect("chain statements exist");
            let u = s.update.as_ref().expect("links have an update");
            // The accumulated value comes in through one storage, an `acc` operand.
            let ins: BTreeMap<String, &Dependence> = deps
                .iter()
                .filter(|d| {
                    d.kind == DepKind::Flow && d.sink == *n && chain.contains(d.source.as_str())
                })
                .map(|d| (d.storage.root(), d))
                .collect();
            if ins.len() != 1 {
                return Ok(None);
            }
            let d = ins.values().next().expect("one storage");
            let fits = match &d.storage {
                Storage::Register { reg, .. } => u.acc_registers.contains(reg),
                // An element the compiler keeps in a register comes in through it.
                Storage::Scalar { .. } | Storage::Array { .. } => match &d.mirror {
                    Some(reg) => u.acc_registers.contains(reg),
                    None => u.acc_memory,
                },
                Storage::Effect { .. } => false,
            };
            if !fits {
                return Ok(None);
            }
            // What a link writes is read, inside the loop, by links only.
            let leaks = deps.iter().any(|d| {
                d.kind == DepKind::Flow
                    && d.source == *n
                    && inside_l(&d.sink)
                    && !chain.contains(d.sink.as_str())
            });
            // Nor compared there (`s += a[i]; if (s > t)`): each thread's partial value is
            // not the program's.
            let compared = region
                .compared
                .iter()
                .any(|c| c.source == *n && c.loops.contains(&l));
            if leaks || compared {
                return Ok(None);
            }
        }
        // Inside the loop, the storage is touched by the chain only.
        let foreign = deps.iter().any(|d| {
            d.storage.root() == root
                && (inside_l(&d.source) || inside_l(&d.sink))
                && [&d.source, &d.sink]
                    .iter()
                    .any(|n| inside_l(n) && !chain.contains(n.as_str()))
        });
        if foreign {
            return Ok(None);
        }
        let storage = deps[carried[0]].storage.clone();
        // An array: the same element, read and written, in each iteration (a scalar's
        // address is fixed already).
        if matches!(storage, Storage::Array { .. }) {
            let accesses: Vec<&Access> = readers
                .iter()
                .chain(&writers)
                .flat_map(|n| &self.stmt(n).expect("chain statements exist").accesses)
                .collect();
            // An element kept in a register, with no access of its own in the chain, is one
            // per range already (`crate::mirror`).
            let mirrored = carried.iter().all(|&i| deps[i].mirror.is_some());
            let one_element = accesses.first().map_or(mirrored, |first| {
                first.strides.iter().all(Option::is_some)
                    && accesses.iter().all(|a| {
                        a.strides == first.strides && a.base == first.base && a.size == first.size
                    })
            });
            if !one_element {
                return Ok(None);
            }
        }
        // One root may hold several variables (an -O0 frame's `xe` and `ye`, each its own
        // chain through the frame): each is a reduction of its own, named by itself.
        let mut parts: Vec<(Storage, Vec<String>)> = Vec::new();
        for &i in carried {
            let line = line_of(region, &deps[i].source);
            match parts.iter_mut().find(|(s, _)| *s == deps[i].storage) {
                Some((_, ls)) if ls.contains(&line) => {}
                Some((_, ls)) => ls.push(line),
                None => parts.push((deps[i].storage.clone(), vec![line])),
            }
        }
        Ok(Some(Reduction {
            storage,
            op,
            fp,
            lines: lines.into_iter().collect(),
            parts: if parts.len() > 1 { parts } else { Vec::new() },
        }))
    }

    /// The consumer → producer relation of dependence `i`, with the pairs `extra` (an isl
    /// constraint over the consumer's `i0, i1, ...` and the producer's `j0, j1, ...`) kept:
    /// whether any pair is left.
    fn any_pair(
        &self,
        isl: &Context,
        i: usize,
        extra: &dyn Fn(usize) -> Option<String>,
    ) -> Result<bool, Error> {
        let d = &self.region.dependences[i];
        let (Some(sink), Some(source)) = (self.stmt(&d.sink), self.stmt(&d.source)) else {
            return Ok(false);
        };
        let common = sink
            .loops
            .iter()
            .zip(&source.loops)
            .take_while(|(a, b)| a == b)
            .count();
        let Some(cond) = extra(common) else {
            return Ok(false);
        };
        let xs: Vec<String> = (0..sink.loops.len()).map(|k| format!("i{k}")).collect();
        let ys: Vec<String> = (0..source.loops.len()).map(|k| format!("j{k}")).collect();
        let filter = format!(
            "{{ {}[{}] -> {}[{}] : {cond} }}",
            sink.name,
            xs.join(", "),
            source.name,
            ys.join(", ")
        );
        let m = d
            .relation
            .to_union_map(isl, &mut crate::params::Parameterizer::none())?
            .intersect(union_map(isl, &filter)?)
            .map_err(crate::islx::isl("restricting a dependence"))?;
        Ok(!empty(&m)?)
    }

    /// Whether dependence `i` relates instances in different iterations of the loop at
    /// `depth`, within one iteration of the loops around it.
    /// Undecided without isl: carried (the storage's readers and writers must then all be
    /// links of the chain).
    fn carried_at(&self, i: usize, depth: usize) -> Result<bool, Error> {
        match self.distances.carried_at(i, depth) {
            Tri::Yes => return Ok(true),
            Tri::No => return Ok(false),
            Tri::Maybe => {}
        }
        let Some(isl) = self.isl else {
            return Ok(true);
        };
        self.any_pair(isl, i, &|common| {
            (depth < common).then(|| {
                let mut c: Vec<String> = (0..depth).map(|k| format!("i{k} = j{k}")).collect();
                c.push(format!("(i{depth} < j{depth} or i{depth} > j{depth})"));
                c.join(" and ")
            })
        })
    }

    /// Whether dependence `i` only relates instances of the same iteration of every loop
    /// around both ends.
    /// Undecided without isl: not (no link of a chain is taken on trust).
    fn in_one_iteration(&mut self, i: usize) -> Result<bool, Error> {
        if let Some(known) = self.same_iteration[i] {
            return Ok(known);
        }
        match self.distances.in_one_iteration(i) {
            Tri::Yes => return Ok(true),
            Tri::No => return Ok(false),
            Tri::Maybe => {}
        }
        let Some(isl) = self.isl else {
            return Ok(false);
        };
        let apart = self.any_pair(isl, i, &|common| {
            (common > 0).then(|| {
                (0..common)
                    .map(|k| format!("i{k} < j{k} or i{k} > j{k}"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            })
        })?;
        self.same_iteration[i] = Some(!apart);
        Ok(!apart)
    }
}
