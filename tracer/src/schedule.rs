//! Pass 2: loop events (Alg. 1 and 2 of the POLY-PROF paper), dynamic interprocedural
//! iteration vectors (Alg. 3) and the dynamic schedule tree.
//!
//! The current dynamic IIV is kept as a *path* in the schedule tree: function frames, loops and
//! recursive loops from the root to the current context. The context id of an instruction is
//! the tree node at the end of the path; its coordinates are the canonical induction variables
//! of the loops on the path. Recursive loops do not deepen the path: a call to a component's
//! header goes back to the recursive loop's node and increments its counter (Alg. 2), so the
//! vector's depth does not grow with the recursion depth.

use crate::structure::{FuncId, Structure};
use crate::walk::{Action, Walker};
use ptrace_runner::{Event, EventSink, Insn};
use rustc_hash::FxHashMap as HashMap;
use std::io;

/// Index of a node in the [`ScheduleTree`].
pub type NodeId = usize;

/// What a schedule-tree node stands for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NodeKind {
    Root,
    /// A function entered at `entry`, called from `site` (0: not called from traced code).
    Func {
        entry: u64,
        site: u64,
    },
    /// Loop `lp` of function `func`'s loop-nesting forest.
    Loop {
        func: FuncId,
        lp: usize,
    },
    /// A recursive loop: recursive component `component` of the call graph.
    Recursion {
        component: usize,
    },
    /// Library calls run natively from the parent context, to the function named
    /// `ScheduleTree::native_names[name]`: their measured cost is the node's `native_weight`.
    Native {
        name: u32,
    },
}

/// A node of the dynamic schedule tree.
#[derive(Clone, Debug)]
pub struct TreeNode {
    pub kind: NodeKind,
    pub parent: Option<NodeId>,
    /// Dynamic instructions executed directly in this context.
    pub self_weight: u64,
    /// What the native calls of this context cost, in instructions or instruction equivalents
    /// (only `Native` nodes have any).
    pub native_weight: u64,
    /// Native calls that returned to this context (only `Native` nodes have any).
    pub native_calls: u64,
    /// Number of loop dimensions from the root to this node (its coordinates' length).
    pub depth: usize,
    /// Index of the traced instruction that first entered this node.
    pub first: u64,
}

/// The calling-context tree with loops as nodes, weighted by dynamic instructions.
#[derive(Clone, Debug)]
pub struct ScheduleTree {
    pub nodes: Vec<TreeNode>,
    children: HashMap<(NodeId, NodeKind), NodeId>,
    /// Instructions seen so far (the clock of `TreeNode::first`).
    pub instructions: u64,
    /// Names of the natively-run functions (`NodeKind::Native`), without symbol versions.
    pub native_names: Vec<String>,
    /// Where the last signal delivered to the program reached it: for a program killed by a
    /// signal, the loop context of its death.
    pub last_signal: Option<SignalPoint>,
}

/// Where a signal reached the program: the context and iteration vector of the last traced
/// instruction before it (a faulting instruction never completes, so it has no step).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignalPoint {
    pub signo: i32,
    /// Where the program stood (runtime address): for a fault, the faulting instruction.
    pub pc: u64,
    pub context: NodeId,
    /// The iteration vector there: one counter per loop on the context's path, outermost
    /// first.
    pub coords: Vec<u64>,
    /// The natively-run function under way when the signal came during a library call, and
    /// the call's return address (runtime; the call instruction ends there).
    pub native: Option<(String, u64)>,
}

impl Default for ScheduleTree {
    fn default() -> Self {
        ScheduleTree {
            nodes: vec![TreeNode {
                kind: NodeKind::Root,
                parent: None,
                self_weight: 0,
                native_weight: 0,
                native_calls: 0,
                depth: 0,
                first: 0,
            }],
            children: HashMap::default(),
            instructions: 0,
            native_names: Vec::new(),
            last_signal: None,
        }
    }
}

impl ScheduleTree {
    pub const ROOT: NodeId = 0;

    fn child(&mut self, parent: NodeId, kind: NodeKind) -> NodeId {
        if let Some(&c) = self.children.get(&(parent, kind.clone())) {
            return c;
        }
        let id = self.nodes.len();
        let depth = self.nodes[parent].depth
            + usize::from(matches!(
                kind,
                NodeKind::Loop { .. } | NodeKind::Recursion { .. }
            ));
        self.nodes.push(TreeNode {
            kind: kind.clone(),
            parent: Some(parent),
            self_weight: 0,
            native_weight: 0,
            native_calls: 0,
            depth,
            first: self.instructions,
        });
        self.children.insert((parent, kind), id);
        id
    }

    /// Nodes from the root's child down to `n`.
    pub fn path(&self, mut n: NodeId) -> Vec<NodeId> {
        let mut p = Vec::new();
        while let Some(parent) = self.nodes[n].parent {
            p.push(n);
            n = parent;
        }
        p.reverse();
        p
    }

    /// Total weight of each node (its own plus its descendants'): traced instructions only.
    pub fn total_weights(&self) -> Vec<u64> {
        self.sum_up(|n| n.self_weight)
    }

    /// Total weight of each node counting what native calls cost too: the run's time, in
    /// instructions and instruction equivalents.
    pub fn total_run_weights(&self) -> Vec<u64> {
        self.sum_up(|n| n.self_weight + n.native_weight)
    }

    /// Total cost of native calls under each node.
    pub fn total_native_weights(&self) -> Vec<u64> {
        self.sum_up(|n| n.native_weight)
    }

    fn sum_up(&self, weight: impl Fn(&TreeNode) -> u64) -> Vec<u64> {
        let mut total: Vec<u64> = self.nodes.iter().map(weight).collect();
        // Children always have larger ids than their parents.
        for n in (1..self.nodes.len()).rev() {
            if let Some(p) = self.nodes[n].parent {
                total[p] += total[n];
            }
        }
        total
    }

    /// Kelly's static positions of the instruction at `pc` run in context `ctx`: one vector
    /// for the root and one for each loop (or recursion) on the context's path, holding where
    /// each node below it, down to the next loop, is entered in its function's code, and
    /// finally where the instruction is. Compared lexicographically among the instructions
    /// under one loop, they order its body as one iteration runs it. Ranks come from the
    /// control-flow graph, not from times: which iterations ran what does not matter (a
    /// triangular inner loop that is empty in the last outer iteration stays between the
    /// code before and after it).
    pub fn positions(&self, s: &Structure, ctx: NodeId, pc: u64) -> Vec<Vec<u32>> {
        let path = self.path(ctx);
        let rank = |f: Option<FuncId>, addr: u64| -> u32 {
            f.and_then(|f| {
                let cfg = &s.funcs[f];
                cfg.node_of(addr).map(|n| cfg.order[n])
            })
            .unwrap_or(u32::MAX / 2)
        };
        let mut levels: Vec<Vec<u32>> = vec![Vec::new()];
        let mut func: Option<FuncId> = None;
        for (i, &n) in path.iter().enumerate() {
            // Twice the rank, plus one for a call's callee: the call instruction (a statement
            // when it is a library call with effects) comes before the code it calls.
            let at = match self.nodes[n].kind {
                NodeKind::Root => 0,
                NodeKind::Func { entry, site } => {
                    let r = 2 * rank(func, site) + 1;
                    func = s.func(entry);
                    r
                }
                NodeKind::Loop { func: f, lp } => {
                    func = Some(f);
                    let header = s.funcs[f].forest.loops[lp].header;
                    2 * s.funcs[f]
                        .order
                        .get(header)
                        .copied()
                        .unwrap_or(u32::MAX / 2)
                }
                // Native calls are leaves: no instruction runs under them.
                NodeKind::Native { .. } => 0,
                // A recursive loop is entered by the call that follows it on the path.
                NodeKind::Recursion { .. } => match path.get(i + 1).map(|&c| &self.nodes[c].kind) {
                    Some(NodeKind::Func { site, .. }) => 2 * rank(func, *site) + 1,
                    _ => 0,
                },
            };
            if let Some(level) = levels.last_mut() {
                level.push(at);
            }
            if matches!(
                self.nodes[n].kind,
                NodeKind::Loop { .. } | NodeKind::Recursion { .. }
            ) {
                levels.push(Vec::new());
            }
        }
        if let Some(level) = levels.last_mut() {
            level.push(2 * rank(func, pc));
        }
        levels
    }

    /// Charges a native call to `name` from context `parent` what it cost.
    fn native_call(&mut self, parent: NodeId, name: u32, cost: u64) {
        let n = self.child(parent, NodeKind::Native { name });
        self.nodes[n].native_weight += cost;
        self.nodes[n].native_calls += 1;
    }

    fn native_name(&mut self, name: &str) -> u32 {
        // Few distinct names per run: a linear search is enough.
        let name = name.split('@').next().unwrap_or(name);
        match self.native_names.iter().position(|n| n == name) {
            Some(i) => i as u32,
            None => {
                self.native_names.push(name.to_string());
                (self.native_names.len() - 1) as u32
            }
        }
    }

    /// Whether `n` is `ancestor` or below it.
    pub fn is_within(&self, mut n: NodeId, ancestor: NodeId) -> bool {
        loop {
            if n == ancestor {
                return true;
            }
            match self.nodes[n].parent {
                Some(p) => n = p,
                None => return false,
            }
        }
    }

    /// Deepest loop nesting of any node (the longest iteration vector).
    pub fn max_depth(&self) -> usize {
        self.nodes.iter().map(|n| n.depth).max().unwrap_or(0)
    }
}

/// One traced instruction with its dynamic IIV: context and coordinates.
#[derive(Clone, Copy, Debug)]
pub struct Step<'a> {
    pub insn: &'a Insn,
    /// The schedule-tree node of the innermost context.
    pub context: NodeId,
    /// Canonical induction variables of the loops on the path, outermost first.
    pub coords: &'a [u64],
}

#[derive(Clone, Copy, Debug)]
enum ElemKind {
    Func,
    Loop { func: FuncId, lp: usize },
    Rec { component: usize },
}

#[derive(Clone, Copy, Debug)]
struct Elem {
    node: NodeId,
    /// Depth of the shadow-stack frame that owns this element.
    owner: usize,
    kind: ElemKind,
    /// Length of the coordinates before this element.
    coords_before: usize,
}

#[derive(Clone, Copy, Debug, Default)]
struct CompState {
    /// Index in the path of the active recursive loop.
    active: Option<usize>,
    entry_func: u64,
    entry_depth: usize,
    /// Calls to headers minus returns from them.
    stackcount: u64,
}

/// Replays events through the loop-event algorithms, building the schedule tree and giving
/// every instruction its dynamic IIV ([`Scheduler::process`]).
pub struct Scheduler<'s> {
    s: &'s Structure,
    walker: Walker,
    actions: Vec<Action>,
    tree: ScheduleTree,
    path: Vec<Elem>,
    coords: Vec<u64>,
    comps: Vec<CompState>,
    /// Native calls under way, innermost last: (the context that made it, where it returns,
    /// the callee's name).
    native: Vec<(NodeId, u64, u32)>,
    /// Recent (instruction address, function entry) -> (function, control-flow node)
    /// answers of [`Self::locate`], direct-mapped by address: two hash lookups per
    /// instruction otherwise.
    located: Box<[Located]>,
}

/// An entry of [`Scheduler::located`] (an empty one has entry 0, which never hits it).
#[derive(Clone, Copy, Default)]
struct Located {
    pc: u64,
    entry: u64,
    func: u32,
    node: u32,
}

const LOCATED: usize = 1 << 12;

impl<'s> Scheduler<'s> {
    pub fn new(s: &'s Structure, entries: impl IntoIterator<Item = u64>) -> Self {
        Scheduler {
            s,
            walker: Walker::new(entries),
            actions: Vec::new(),
            tree: ScheduleTree::default(),
            path: Vec::new(),
            coords: Vec::new(),
            comps: vec![CompState::default(); s.components.len()],
            native: Vec::new(),
            located: vec![Located::default(); LOCATED].into_boxed_slice(),
        }
    }

    pub fn finish(self) -> ScheduleTree {
        self.tree
    }

    fn cur(&self) -> NodeId {
        self.path.last().map_or(ScheduleTree::ROOT, |e| e.node)
    }

    fn push(&mut self, kind: NodeKind, elem: ElemKind, owner: usize, parent: NodeId) {
        let node = self.tree.child(parent, kind);
        let coords_before = self.coords.len();
        if matches!(elem, ElemKind::Loop { .. } | ElemKind::Rec { .. }) {
            self.coords.push(0);
        }
        self.path.push(Elem {
            node,
            owner,
            kind: elem,
            coords_before,
        });
        if let ElemKind::Rec { component } = elem {
            self.comps[component].active = Some(self.path.len() - 1);
        }
    }

    fn truncate(&mut self, len: usize) {
        while self.path.len() > len {
            if let Some(e) = self.path.pop() {
                self.coords.truncate(e.coords_before);
                if let ElemKind::Rec { component } = e.kind {
                    self.comps[component].active = None;
                }
            }
        }
    }

    fn pop_owned(&mut self, depth: usize) {
        let keep = self
            .path
            .iter()
            .rposition(|e| e.owner < depth)
            .map_or(0, |i| i + 1);
        self.truncate(keep);
    }

    /// Makes sure the frame at `depth` has an element on the path (it can lose it to a
    /// recursive-loop iteration that unwound the path).
    fn restore_frame(&mut self, depth: usize) {
        if self.path.last().is_some_and(|e| e.owner >= depth) {
            return;
        }
        if let Some(f) = self.walker.stack.get(depth) {
            let kind = NodeKind::Func {
                entry: f.func,
                site: f.site,
            };
            let parent = self.cur();
            self.push(kind, ElemKind::Func, depth, parent);
        }
    }

    /// Iterates the active recursive loop of `component` at path index `pos`.
    fn iterate_rec(&mut self, pos: usize) {
        self.truncate(pos + 1);
        if let Some(c) = self.coords.last_mut() {
            *c += 1;
        }
    }

    fn enter(&mut self, func: u64, site: u64, depth: usize) {
        let kind = NodeKind::Func { entry: func, site };
        let role = self.s.func(func).and_then(|f| self.s.roles[f]);
        if let Some(r) = role {
            let st = self.comps[r.component];
            match st.active {
                Some(pos) if r.is_header => {
                    // I_C: a call to a header iterates the recursive loop.
                    self.iterate_rec(pos);
                    self.comps[r.component].stackcount += 1;
                    let parent = self.path[pos].node;
                    self.push(kind, ElemKind::Func, depth, parent);
                    return;
                }
                None if r.is_entry => {
                    // E_C: entering the component enters its recursive loop.
                    let parent = self.cur();
                    self.push(
                        NodeKind::Recursion {
                            component: r.component,
                        },
                        ElemKind::Rec {
                            component: r.component,
                        },
                        depth,
                        parent,
                    );
                    let c = &mut self.comps[r.component];
                    c.entry_func = func;
                    c.entry_depth = depth;
                    c.stackcount = 0;
                    let parent = self.cur();
                    self.push(kind, ElemKind::Func, depth, parent);
                    return;
                }
                _ => {}
            }
        }
        let parent = self.cur();
        self.push(kind, ElemKind::Func, depth, parent);
    }

    fn leave(&mut self, func: u64, depth: usize) {
        let role = self.s.func(func).and_then(|f| self.s.roles[f]);
        if let Some(r) = role {
            let st = self.comps[r.component];
            if let Some(pos) = st.active {
                if r.is_entry
                    && st.stackcount == 0
                    && st.entry_func == func
                    && st.entry_depth == depth
                {
                    // X_R: the call that entered the recursive loop returns.
                    self.pop_owned(depth);
                    self.comps[r.component].active = None;
                    if depth > 0 {
                        self.restore_frame(depth - 1);
                    }
                    return;
                }
                if r.is_header && st.stackcount > 0 {
                    // I_R: a return from a header iterates the recursive loop.
                    self.comps[r.component].stackcount -= 1;
                    self.iterate_rec(pos);
                    if depth > 0 {
                        if let Some(f) = self.walker.stack.get(depth - 1) {
                            let kind = NodeKind::Func {
                                entry: f.func,
                                site: f.site,
                            };
                            let parent = self.path[pos].node;
                            self.push(kind, ElemKind::Func, depth - 1, parent);
                        }
                    }
                    return;
                }
            }
        }
        self.pop_owned(depth);
        if depth > 0 {
            self.restore_frame(depth - 1);
        }
    }

    /// The context and coordinates instruction `pc` would run in if control reached it
    /// locally now ([`Self::local_jump`] without changing anything): where a signal finds the
    /// instruction it interrupts, which has not run. A loop never entered before has no node:
    /// the instruction is then placed in the loop around it.
    fn peek(&self, pc: u64) -> (NodeId, Vec<u64>) {
        let here = (self.cur(), self.coords.clone());
        let depth = self.walker.depth();
        let Some(entry) = self.walker.top().map(|f| f.func) else {
            return here;
        };
        let s = self.s;
        let Some(fid) = s.func(entry) else {
            return here;
        };
        let cfg = &s.funcs[fid];
        let Some(node) = cfg.node_of(pc) else {
            return here;
        };
        let mut len = self.path.len();
        let mut ncoords = self.coords.len();
        while let Some(e) = len.checked_sub(1).map(|i| &self.path[i]) {
            match e.kind {
                ElemKind::Loop { func, lp }
                    if e.owner == depth && func == fid && !cfg.forest.contains(lp, node) =>
                {
                    ncoords = e.coords_before;
                    len -= 1;
                }
                _ => break,
            }
        }
        let top = len.checked_sub(1).map(|i| &self.path[i]);
        let context = top.map_or(ScheduleTree::ROOT, |e| e.node);
        let mut coords = self.coords[..ncoords].to_vec();
        if let Some(lp) = cfg.forest.heads[node] {
            let on_top = top.is_some_and(|e| {
                e.owner == depth
                    && matches!(e.kind, ElemKind::Loop { func, lp: l } if func == fid && l == lp)
            });
            if on_top {
                if let Some(c) = coords.last_mut() {
                    *c += 1;
                }
            } else if let Some(&child) = self
                .tree
                .children
                .get(&(context, NodeKind::Loop { func: fid, lp }))
            {
                coords.push(0);
                return (child, coords);
            }
        }
        (context, coords)
    }

    /// The function entered at `entry` and the node of `pc` in its control-flow graph.
    #[inline]
    fn locate(&mut self, entry: u64, pc: u64) -> Option<(FuncId, usize)> {
        let slot = &mut self.located[(pc ^ pc >> 12) as usize & (LOCATED - 1)];
        if slot.pc == pc && slot.entry == entry && entry != 0 {
            return Some((slot.func as usize, slot.node as usize));
        }
        let fid = self.s.func(entry)?;
        let node = self.s.funcs[fid].node_of(pc)?;
        if let (Ok(func), Ok(n)) = (u32::try_from(fid), u32::try_from(node)) {
            *slot = Located {
                pc,
                entry,
                func,
                node: n,
            };
        }
        Some((fid, node))
    }

    /// Alg. 1: control reaches instruction `pc` of the current frame's function locally.
    fn local_jump(&mut self, pc: u64) {
        let depth = self.walker.depth();
        let Some(entry) = self.walker.top().map(|f| f.func) else {
            return;
        };
        let Some((fid, node)) = self.locate(entry, pc) else {
            return;
        };
        let s = self.s;
        let cfg = &s.funcs[fid];
        while let Some(e) = self.path.last() {
            match e.kind {
                ElemKind::Loop { func, lp }
                    if e.owner == depth && func == fid && !cfg.forest.contains(lp, node) =>
                {
                    let len = self.path.len() - 1;
                    self.truncate(len);
                }
                _ => break,
            }
        }
        if let Some(lp) = cfg.forest.heads[node] {
            let on_top = self.path.last().is_some_and(|e| {
                e.owner == depth
                    && matches!(e.kind, ElemKind::Loop { func, lp: l } if func == fid && l == lp)
            });
            if on_top {
                if let Some(c) = self.coords.last_mut() {
                    *c += 1;
                }
            } else {
                self.restore_frame(depth);
                let parent = self.cur();
                self.push(
                    NodeKind::Loop { func: fid, lp },
                    ElemKind::Loop { func: fid, lp },
                    depth,
                    parent,
                );
            }
        }
    }
}

impl Scheduler<'_> {
    /// Processes one event; for an instruction, calls `on_step` with its context and
    /// coordinates.
    pub fn process(&mut self, ev: &Event<'_>, on_step: &mut dyn FnMut(&Step<'_>)) {
        let Event::Insn(insn) = ev else {
            let mut actions = std::mem::take(&mut self.actions);
            match *ev {
                Event::LibCall(c) => {
                    let name = match &c.name {
                        Some(n) => self.tree.native_name(n),
                        None => self.tree.native_name(&format!("{:#x}", c.target)),
                    };
                    self.native.push((self.cur(), c.return_to, name));
                }
                Event::Signal { signo, pc } => {
                    let native = self.native.last().and_then(|&(_, back, name)| {
                        let name = self.tree.native_names.get(name as usize)?;
                        Some((name.clone(), back))
                    });
                    let (context, coords) = if native.is_some() {
                        (self.cur(), self.coords.clone())
                    } else {
                        self.peek(pc)
                    };
                    self.tree.last_signal = Some(SignalPoint {
                        signo,
                        pc,
                        context,
                        coords,
                        native,
                    });
                }
                Event::LibReturn { pc, cost, .. } => {
                    // Calls that never returned (left by a longjmp) end with the one that did,
                    // which the runner charged for them.
                    if let Some(i) = self.native.iter().rposition(|c| c.1 == pc) {
                        let (parent, _, name) = self.native[i];
                        self.native.truncate(i);
                        self.tree.native_call(parent, name, cost);
                    }
                }
                _ => {}
            }
            self.walker.other_event(ev, &mut actions);
            for a in &actions {
                if let Action::Leave { func, depth } = *a {
                    self.leave(func, depth);
                }
            }
            self.actions = actions;
            return;
        };
        self.walker.before_insn(insn, &mut self.actions);
        // (By index: `enter` and `leave` leave the actions alone, and most instructions have
        // none, which then costs no moving of the vector in and out.)
        for k in 0..self.actions.len() {
            match self.actions[k] {
                Action::Enter { func, site, depth } => self.enter(func, site, depth),
                Action::Leave { func, depth } => self.leave(func, depth),
                Action::LibCall { .. } => {}
            }
        }
        self.local_jump(insn.pc);
        let context = self.cur();
        self.tree.nodes[context].self_weight += 1;
        self.tree.instructions += 1;
        on_step(&Step {
            insn,
            context,
            coords: &self.coords,
        });
        self.walker.after_insn(insn);
    }
}

/// An [`EventSink`] running a [`Scheduler`] with a callback per instruction.
pub struct SchedulerSink<'s, F: FnMut(&Step<'_>)> {
    pub scheduler: Scheduler<'s>,
    pub on_step: F,
}

impl<F: FnMut(&Step<'_>)> EventSink for SchedulerSink<'_, F> {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
        self.scheduler.process(ev, &mut self.on_step);
        Ok(())
    }
}
