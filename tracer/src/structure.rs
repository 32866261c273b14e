//! Pass 1: the dynamic control-flow graph of every function and the call graph, built from the
//! executed transfers; then their loop-nesting forests and the recursive-component set.

use crate::havlak::{loop_forest, LoopForest};
use crate::walk::{Action, Walker};
use ptrace_runner::{Event, EventSink};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::io;

/// Index of a function in [`Structure::funcs`].
pub type FuncId = usize;

/// A function's dynamic control-flow graph, at instruction granularity.
///
/// Node 0 is a virtual entry with an edge to every instruction where the function was entered
/// (its entry, or where an asynchronous frame began); other nodes are executed instructions.
#[derive(Clone, Debug, Default)]
pub struct FuncCfg {
    /// Entry address (the call target).
    pub entry: u64,
    /// Address of each node (node 0, the virtual entry, has address 0).
    pub addrs: Vec<u64>,
    index: HashMap<u64, usize>,
    pub succ: Vec<Vec<usize>>,
    edges: HashSet<(usize, usize)>,
    /// Loop-nesting forest (after [`StructureBuilder::finish`]).
    pub forest: LoopForest,
    /// Each node's rank in reverse postorder from the virtual entry (after
    /// [`StructureBuilder::finish`]): a topological order of the graph without its back
    /// edges, so within a loop's body it is the order of one iteration, header first.
    pub order: Vec<u32>,
    /// Dynamic instructions executed in this function.
    pub instructions: u64,
}

impl FuncCfg {
    fn new(entry: u64) -> FuncCfg {
        FuncCfg {
            entry,
            addrs: vec![0],
            succ: vec![Vec::new()],
            ..FuncCfg::default()
        }
    }

    fn node(&mut self, addr: u64) -> usize {
        if let Some(&n) = self.index.get(&addr) {
            return n;
        }
        let n = self.addrs.len();
        self.addrs.push(addr);
        self.succ.push(Vec::new());
        self.index.insert(addr, n);
        n
    }

    fn edge(&mut self, a: usize, b: usize) {
        if self.edges.insert((a, b)) {
            self.succ[a].push(b);
        }
    }

    /// The node of an instruction address, if it ran in this function.
    pub fn node_of(&self, addr: u64) -> Option<usize> {
        self.index.get(&addr).copied()
    }

    /// Reverse postorder ranks of the nodes (see [`FuncCfg::order`]); nodes the virtual
    /// entry does not reach come last.
    fn reverse_postorder(&self) -> Vec<u32> {
        let n = self.addrs.len();
        let mut seen = vec![false; n];
        let mut post = Vec::with_capacity(n);
        // (node, next successor to visit): an explicit stack, since loops run deep.
        let mut stack = vec![(0usize, 0usize)];
        seen[0] = true;
        while let Some(top) = stack.last_mut() {
            let (v, next) = *top;
            if let Some(&w) = self.succ[v].get(next) {
                top.1 += 1;
                if !seen[w] {
                    seen[w] = true;
                    stack.push((w, 0));
                }
            } else {
                post.push(v);
                stack.pop();
            }
        }
        let mut order = vec![u32::MAX; n];
        for (rank, &v) in post.iter().rev().enumerate() {
            order[v] = rank as u32;
        }
        order
    }

    /// Nodes (instruction addresses) of loop `l` that are in no loop nested in it.
    pub fn own_nodes(&self, l: usize) -> impl Iterator<Item = usize> + '_ {
        (1..self.addrs.len()).filter(move |&n| self.forest.innermost[n] == Some(l))
    }
}

/// A recursive component of the call graph: a set of mutually recursive functions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Component {
    /// Functions whose calls iterate the recursive loop.
    pub headers: Vec<FuncId>,
    /// Functions through which the component is entered from outside.
    pub entries: Vec<FuncId>,
    /// All member functions.
    pub members: Vec<FuncId>,
}

/// A function's role in the recursive-component set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecRole {
    pub component: usize,
    pub is_header: bool,
    pub is_entry: bool,
}

/// The program's executed control structure.
#[derive(Clone, Debug, Default)]
pub struct Structure {
    pub funcs: Vec<FuncCfg>,
    index: HashMap<u64, FuncId>,
    /// Call graph: callees of each function (deduplicated).
    pub callees: Vec<Vec<FuncId>>,
    /// Functions entered without a call from traced code (start, handlers, callbacks).
    pub roots: Vec<FuncId>,
    pub components: Vec<Component>,
    /// Recursive role of each function.
    pub roles: Vec<Option<RecRole>>,
}

impl Structure {
    /// The function entered at `entry`.
    pub fn func(&self, entry: u64) -> Option<FuncId> {
        self.index.get(&entry).copied()
    }

    /// Total number of loops in all functions.
    pub fn loop_count(&self) -> usize {
        self.funcs.iter().map(|f| f.forest.loops.len()).sum()
    }
}

/// Builds the [`Structure`] from a first replay of the events.
pub struct StructureBuilder {
    walker: Walker,
    actions: Vec<Action>,
    s: Structure,
    call_edges: HashSet<(FuncId, FuncId)>,
    /// Recent answers of [`Self::locate`] and edges known to be in the graph, direct-mapped:
    /// three hash-table operations per instruction otherwise.
    recent: Box<[Recent]>,
}

/// An entry of [`StructureBuilder::recent`]: the node of an address in the function entered
/// at `entry` (0: empty; no function starts at 0), and an edge known to be in a graph.
#[derive(Clone, Copy, Default)]
struct Recent {
    pc: u64,
    entry: u64,
    func: u32,
    node: u32,
    /// (function + 1, from, to); 0 for the function: none.
    edge: (u32, u32, u32),
}

const RECENT: usize = 1 << 12;

#[inline]
fn recent_slot(pc: u64) -> usize {
    (pc ^ pc >> 12) as usize & (RECENT - 1)
}

impl StructureBuilder {
    /// `entries`: start addresses of the executable's functions (runtime addresses), so jumps
    /// to them are read as tail calls.
    pub fn new(entries: impl IntoIterator<Item = u64>) -> StructureBuilder {
        StructureBuilder {
            walker: Walker::new(entries),
            actions: Vec::new(),
            s: Structure::default(),
            call_edges: HashSet::default(),
            recent: vec![Recent::default(); RECENT].into_boxed_slice(),
        }
    }

    /// The function entered at `entry` and the node of `pc` in its graph, created on first
    /// use (functions, then nodes, in the order of the calls).
    #[inline]
    fn locate(&mut self, entry: u64, pc: u64) -> (FuncId, usize) {
        let slot = &self.recent[recent_slot(pc)];
        if slot.pc == pc && slot.entry == entry && entry != 0 {
            return (slot.func as usize, slot.node as usize);
        }
        let f = self.func(entry);
        let node = self.s.funcs[f].node(pc);
        if let (Ok(func), Ok(n)) = (u32::try_from(f), u32::try_from(node)) {
            let slot = &mut self.recent[recent_slot(pc)];
            (slot.pc, slot.entry, slot.func, slot.node) = (pc, entry, func, n);
        }
        (f, node)
    }

    /// Adds the edge `a -> b` to the graph of function `f`.
    #[inline]
    fn edge(&mut self, f: FuncId, a: usize, b: usize) {
        let key = match (u32::try_from(f + 1), u32::try_from(a), u32::try_from(b)) {
            (Ok(f), Ok(a), Ok(b)) => Some((f, a, b)),
            _ => None,
        };
        let i = recent_slot((a as u64) << 32 ^ b as u64 ^ (f as u64) << 20);
        if key.is_some_and(|k| self.recent[i].edge == k) {
            return;
        }
        self.s.funcs[f].edge(a, b);
        if let Some(k) = key {
            self.recent[i].edge = k;
        }
    }

    fn func(&mut self, entry: u64) -> FuncId {
        if let Some(&f) = self.s.index.get(&entry) {
            return f;
        }
        let id = self.s.funcs.len();
        self.s.funcs.push(FuncCfg::new(entry));
        self.s.callees.push(Vec::new());
        self.s.index.insert(entry, id);
        id
    }

    /// Each function seen so far: its entry and the instructions traced in its own code.
    pub fn function_instructions(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.s.funcs.iter().map(|f| (f.entry, f.instructions))
    }

    /// Computes the loop-nesting forests and the recursive components.
    pub fn finish(mut self) -> Structure {
        for f in &mut self.s.funcs {
            f.forest = loop_forest(&f.succ, 0);
            f.order = f.reverse_postorder();
        }
        // The call graph with a virtual root (node 0) calling every root function.
        let n = self.s.funcs.len();
        let mut succ = vec![Vec::new(); n + 1];
        for &r in &self.s.roots {
            succ[0].push(r + 1);
        }
        for (f, cs) in self.s.callees.iter().enumerate() {
            succ[f + 1].extend(cs.iter().map(|c| c + 1));
        }
        let forest = loop_forest(&succ, 0);
        // Each outermost call-graph loop is a recursive component; nested loops add headers.
        let top_of: Vec<usize> = (0..forest.loops.len())
            .map(|l| {
                let mut t = l;
                while let Some(p) = forest.loops[t].parent {
                    t = p;
                }
                t
            })
            .collect();
        let mut comp_of_top = HashMap::default();
        for (l, &t) in top_of.iter().enumerate() {
            if l == t {
                comp_of_top.insert(t, self.s.components.len());
                self.s.components.push(Component::default());
            }
        }
        self.s.roles = vec![None; n];
        for f in 0..n {
            if let Some(l) = forest.innermost[f + 1] {
                let c = comp_of_top[&top_of[l]];
                self.s.components[c].members.push(f);
                self.s.roles[f] = Some(RecRole {
                    component: c,
                    is_header: forest.heads[f + 1].is_some(),
                    is_entry: false,
                });
                if forest.heads[f + 1].is_some() {
                    self.s.components[c].headers.push(f);
                }
            }
        }
        // Entries: members called from outside their component (or roots).
        for (caller, callees) in succ.iter().enumerate() {
            let caller_comp = caller
                .checked_sub(1)
                .and_then(|c| self.s.roles[c])
                .map(|r| r.component);
            for &callee in callees {
                let f = callee - 1;
                if let Some(role) = self.s.roles[f].as_mut() {
                    if caller_comp != Some(role.component) && !role.is_entry {
                        role.is_entry = true;
                        self.s.components[role.component].entries.push(f);
                    }
                }
            }
        }
        self.s
    }
}

impl EventSink for StructureBuilder {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
        let Event::Insn(insn) = ev else {
            self.walker.other_event(ev, &mut self.actions);
            return Ok(());
        };
        let mut actions = std::mem::take(&mut self.actions);
        self.walker.before_insn(insn, &mut actions);
        for a in &actions {
            if let Action::Enter { func, site, depth } = *a {
                let callee = self.func(func);
                let caller = (depth > 0 && site != 0)
                    .then(|| self.walker.stack.get(depth - 1).map(|f| f.func))
                    .flatten();
                match caller {
                    Some(c) => {
                        let c = self.func(c);
                        if self.call_edges.insert((c, callee)) {
                            self.s.callees[c].push(callee);
                        }
                    }
                    None => {
                        if !self.s.roots.contains(&callee) {
                            self.s.roots.push(callee);
                        }
                    }
                }
            }
        }
        self.actions = actions;
        if let Some(frame) = self.walker.top() {
            let (entry, last) = (frame.func, frame.last_pc);
            let (f, node) = self.locate(entry, insn.pc);
            let from = match last {
                Some(l) => self.locate(entry, l).1,
                None => 0,
            };
            self.edge(f, from, node);
            self.s.funcs[f].instructions += 1;
        }
        self.walker.after_insn(insn);
        Ok(())
    }
}
