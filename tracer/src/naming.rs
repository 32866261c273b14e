//! Names and source locations of schedule-tree nodes, for the flame graph and the reports.

use crate::schedule::{NodeId, NodeKind, ScheduleTree};
use crate::structure::{FuncId, Structure};
use std::collections::HashSet;
use std::sync::Mutex;
use symbols::{Loaded, Loc, SourceText};

/// Names tree nodes from the executable's symbols and debug information.
pub struct Naming<'a> {
    bin: Loaded<'a>,
    structure: &'a Structure,
    /// The source files, read to tell a loop statement's line from a body line.
    sources: Mutex<SourceText>,
}

/// A source location with the (possibly inlined) function it is in.
type Framed = (Option<String>, Loc);

fn basename(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

impl<'a> Naming<'a> {
    /// Names from executable `bin` (loaded at its bias) for the nodes of `structure`.
    pub fn new(bin: Loaded<'a>, structure: &'a Structure) -> Naming<'a> {
        Naming {
            bin,
            structure,
            sources: Mutex::default(),
        }
    }

    /// The executable and its load bias.
    pub fn loaded(&self) -> Loaded<'a> {
        self.bin
    }

    /// The control structure names are taken from.
    pub fn structure(&self) -> &'a Structure {
        self.structure
    }

    /// Source location of a runtime address.
    pub fn location(&self, addr: u64) -> Option<Loc> {
        self.bin.location(addr).filter(|l| l.line > 0)
    }

    /// The imported name when `entry` is a PLT stub.
    pub fn import(&self, entry: u64) -> Option<&str> {
        self.bin.import_for_plt_stub(entry)
    }

    /// A function's name, or `0x...` when nothing names it.
    pub fn function(&self, entry: u64) -> String {
        let link = self.bin.link(entry);
        match self.bin.function_at(entry) {
            Some(f) if f.address == link.0 => f.name.clone(),
            Some(_) => self.bin.describe(entry),
            // Stripped code: the link-time address, as loop frames and objdump show it.
            None => format!("fn_{link:x}"),
        }
    }

    /// The function and source location that name a runtime address for the user: the
    /// innermost (possibly inlined) frame in the program's own source. Library code inlined
    /// into it (Rust's iterators, C++'s containers) is named by the line that calls it.
    fn innermost(&self, addr: u64) -> Option<(Option<String>, Loc)> {
        let frames = self.bin.frames(addr);
        let lined = || {
            frames
                .iter()
                .filter(|f| f.location.as_ref().is_some_and(|l| l.line > 0))
        };
        let f = lined()
            .find(|f| f.location.as_ref().is_some_and(|l| !l.is_library()))
            .or_else(|| lined().next())?;
        Some((f.function.clone(), f.location.clone()?))
    }

    /// The function a runtime address belongs to, for the user (see [`Self::innermost`]),
    /// and its location when it has a line (LLVM gives a loop header's first instruction
    /// line 0).
    fn head(&self, addr: u64) -> Option<(Option<String>, Option<Loc>)> {
        if let Some((f, l)) = self.innermost(addr) {
            return Some((f, Some(l)));
        }
        let frames = self.bin.frames(addr);
        let outer = frames.last()?;
        Some((outer.function.clone(), None))
    }

    /// The source line that names a loop: the line of its back edges (the jumps back to the
    /// header), which compilers attribute to the loop statement's condition (`for`, `while`)
    /// at -O0 and -O3 alike, while the header instruction's own line moves with loop rotation
    /// and scheduling. A back edge on the line of a nested loop's back edges does not count:
    /// gcc -O2 lets the inner loop's exit jump straight to the outer header, with the inner
    /// loop's line. Neither does a back edge inside a nested loop when the loop's own lowest
    /// line is a loop statement: rustc -O0's inner `for` exits from its header (the line of
    /// the inner `for`) straight to the outer header. Without back-edge lines, the smallest
    /// line among the loop's own instructions of the header's (possibly inlined) function
    /// and file, again not a nested loop's line when it has another.
    ///
    /// The worksharing loop of an outlined parallel body (`main._omp_fn.0`) is named by the
    /// `for` statement below its directive: gcc computes the thread's bounds from that line
    /// before the loop, and gives the loop a body line or the directive's, while the serial
    /// build's loop is named by its `for` (the same source loop must have the same name).
    pub fn loop_location(&self, func: FuncId, lp: usize) -> Option<Loc> {
        let loc = self.code_location(func, lp)?;
        Some(self.worksharing_statement(func, lp, &loc).unwrap_or(loc))
    }

    /// The `for` statement of the worksharing directive above `loc`, when loop `lp` is the
    /// outermost loop of an outlined parallel body (the loop its threads share).
    fn worksharing_statement(&self, func: FuncId, lp: usize, loc: &Loc) -> Option<Loc> {
        let cfg = &self.structure.funcs[func];
        if cfg.forest.loops[lp].parent.is_some()
            || !crate::omp_source::is_outlined(&self.function(cfg.entry))
        {
            return None;
        }
        let mut sources = self.sources.lock().ok()?;
        let line = crate::omp_source::worksharing_statement(&mut sources, &loc.file, loc.line)?;
        Some(Loc {
            file: loc.file.clone(),
            line,
        })
    }

    /// [`Self::loop_location`] from the loop's code alone.
    fn code_location(&self, func: FuncId, lp: usize) -> Option<Loc> {
        let cfg = &self.structure.funcs[func];
        let forest = &cfg.forest;
        let header_node = forest.loops[lp].header;
        let header = cfg.addrs[header_node];
        let Some((head_fn, head_loc)) = self.head(header) else {
            return self.location(header);
        };
        let same_function = |(f, l): &(Option<String>, Loc)| {
            *f == head_fn && head_loc.as_ref().is_none_or(|h| l.file == h.file)
        };
        let nested_loops: Vec<usize> = (0..forest.loops.len())
            .filter(|&c| c != lp && forest.contains(lp, forest.loops[c].header))
            .collect();
        let in_nested = |n: usize| nested_loops.iter().any(|&c| forest.contains(c, n));
        let latch_nodes = |l: usize| {
            let h = forest.loops[l].header;
            (1..cfg.addrs.len()).filter(move |&n| cfg.succ[n].contains(&h) && forest.contains(l, n))
        };
        let latches_of = |l: usize| latch_nodes(l).filter_map(|n| self.innermost(cfg.addrs[n]));
        let nested: HashSet<u32> = nested_loops
            .iter()
            .flat_map(|&c| latches_of(c))
            .filter(same_function)
            .map(|(_, l)| l.line)
            .collect();
        let own = |l: &Loc| !nested.contains(&l.line);
        let latches: Vec<(Option<String>, Loc)> = latches_of(lp).collect();
        let lowest = |ls: &mut dyn Iterator<Item = &(Option<String>, Loc)>| {
            ls.map(|(_, l)| l.clone()).min_by_key(|l| l.line)
        };
        let body = || {
            let lines: Vec<Loc> = cfg
                .own_nodes(lp)
                .filter_map(|n| self.innermost(cfg.addrs[n]))
                .filter(same_function)
                .map(|(_, l)| l)
                .chain(head_loc.clone())
                .collect();
            lines
                .iter()
                .filter(|l| own(l))
                .min_by_key(|l| l.line)
                .or_else(|| lines.iter().min_by_key(|l| l.line))
                .cloned()
        };
        let outside_nested: Vec<(Option<String>, Loc)> = latch_nodes(lp)
            .filter(|&n| !in_nested(n))
            .filter_map(|n| self.innermost(cfg.addrs[n]))
            .collect();
        let through_nested = !latches.is_empty()
            && outside_nested.iter().all(|x| !same_function(x))
            && latches.iter().any(same_function);
        let statement = || body().filter(|l| self.is_loop_statement(l));
        // A loop around an inlined call can start in the callee's code (its header is the
        // callee's first instruction) while its back edge is the caller's loop statement:
        // then the back edge names it, not a line inside the callee.
        let latch = if through_nested { statement() } else { None }
            .or_else(|| lowest(&mut latches.iter().filter(|x| same_function(x) && own(&x.1))))
            .or_else(|| lowest(&mut latches.iter().filter(|x| !same_function(x))));
        let loc = latch.or_else(body)?;
        let innermost = nested_loops.is_empty();
        if innermost && !self.is_loop_statement(&loc) {
            // gcc -O2 can give a rotated innermost loop's back edge the line of its last
            // statement (deriche's `ym1 = y1[i][j];` for the `for` four lines above): the
            // nearest loop statement above it among the loop's lines names it. (With loops
            // nested inside, that statement could be theirs.)
            // Else the loop's own loop statement below it: gcc -O2 can end bfs's
            // `for (tid ...)` (line 159) with a jump to a block of line 128 (`stop=false;`,
            // the register it sets is the loop's), which only falls through to the header.
            // And when the header's function has none, the back edge's: a loop around a call
            // gcc inlined can start in the callee's code and end in a block the caller's
            // frame names by a callee's line (hotspot's time loop around `single_iteration`
            // with -fopenmp: line 61), while its counter's increment is the caller's `for`.
            let latch_fn = latches
                .iter()
                .find(|(_, l)| *l == loc)
                .map(|(f, _)| f.clone());
            let in_fn = |pick: &dyn Fn(&Framed) -> bool| -> Vec<Loc> {
                cfg.own_nodes(lp)
                    .filter_map(|n| self.innermost(cfg.addrs[n]))
                    .filter(|x| pick(x))
                    .map(|(_, l)| l)
                    .filter(|l| l.file == loc.file && self.is_loop_statement(l))
                    .collect()
            };
            let mut statements = in_fn(&same_function);
            if statements.is_empty() {
                if let Some(f) = latch_fn.filter(|f| f.is_some() && *f != head_fn) {
                    statements = in_fn(&|x| x.0 == f);
                }
            }
            let above = statements
                .iter()
                .filter(|l| l.line < loc.line)
                .max_by_key(|l| l.line);
            let below = || statements.iter().min_by_key(|l| l.line);
            return above.or_else(below).cloned().or(Some(loc));
        }
        Some(loc)
    }

    /// Whether the source line at `loc` starts a `for` or `while` loop (or ends a `do`
    /// loop), when the file can be read.
    fn is_loop_statement(&self, loc: &Loc) -> bool {
        let Ok(mut sources) = self.sources.lock() else {
            return false;
        };
        sources
            .line(&loc.file, loc.line)
            .is_some_and(crate::omp_source::starts_loop)
    }

    /// Source location of a node (every node has one when the program has debug information).
    pub fn node_location(&self, tree: &ScheduleTree, n: NodeId) -> Option<Loc> {
        match tree.nodes[n].kind {
            NodeKind::Root => None,
            NodeKind::Func { entry, site } => {
                if self.import(entry).is_some() && site != 0 {
                    self.location(site)
                } else {
                    self.location(entry)
                }
            }
            NodeKind::Loop { func, lp } => self.loop_location(func, lp),
            NodeKind::Recursion { component } => {
                let f = *self.structure.components[component].headers.first()?;
                self.location(self.structure.funcs[f].entry)
            }
            // Where the call is: its context's location (the call site, for a PLT stub).
            NodeKind::Native { .. } => self.node_location(tree, tree.nodes[n].parent?),
        }
    }

    /// The frame name of a node, as REPORT.md specifies: a function's name, `loop <file>:<line>`,
    /// `call <name>` for a library call; `recursion <function>` for a recursive loop;
    /// `call <name> [native]` for what natively-run calls cost.
    pub fn frame(&self, tree: &ScheduleTree, n: NodeId) -> String {
        match tree.nodes[n].kind {
            NodeKind::Root => "all".to_string(),
            NodeKind::Func { entry, .. } => match self.import(entry) {
                Some(name) => format!("call {name}"),
                None => self.function(entry),
            },
            NodeKind::Loop { func, lp } => match self.loop_location(func, lp) {
                Some(l) => format!("loop {}:{}", basename(&l.file), l.line),
                None => {
                    let cfg = &self.structure.funcs[func];
                    let header = cfg.addrs[cfg.forest.loops[lp].header];
                    format!("loop {}", self.bin.describe(header))
                }
            },
            NodeKind::Recursion { component } => {
                let names: Vec<String> = self.structure.components[component]
                    .headers
                    .iter()
                    .map(|&f| self.function(self.structure.funcs[f].entry))
                    .collect();
                format!("recursion {}", names.join(","))
            }
            NodeKind::Native { name } => format!(
                "call {} [native]",
                tree.native_names
                    .get(name as usize)
                    .map_or("?", String::as_str)
            ),
        }
    }

    /// The folded stacks (`frame;frame;... count`), one line per distinct stack, sorted. The
    /// count is traced instructions, and for `[native]` frames what the native calls cost.
    pub fn folded(&self, tree: &ScheduleTree) -> Vec<String> {
        let mut stacks: std::collections::BTreeMap<String, u64> = Default::default();
        for (n, node) in tree.nodes.iter().enumerate() {
            let weight = node.self_weight + node.native_weight;
            if weight == 0 {
                continue;
            }
            let names: Vec<String> = tree
                .path(n)
                .into_iter()
                .map(|m| self.frame(tree, m).replace(';', ":"))
                .collect();
            if names.is_empty() {
                continue;
            }
            *stacks.entry(names.join(";")).or_default() += weight;
        }
        stacks
            .into_iter()
            .map(|(s, w)| format!("{s} {w}"))
            .collect()
    }
}
