//! Region building: one region's loops, statements (with their accesses and Kelly
//! positions), dependences and the values crossing its border, from the folded trace, named
//! ([`build_region`]), then analysed ([`Prepared::analyze`]).

use super::classify::{fp_op, is_scev, stepped_by_invariants, update_of, writes_data};
use super::naming::{
    callee_name, name_array, name_memory, pointer_section, register_name, register_variable,
    stack_array_variable, stack_variable, with_offset,
};
use super::{
    Code, DependenceReport, Folded2, InsnStream2, PipelineError, PipelineOptions, RegionReport,
    StatementReport,
};
use crate::heap::STACK_START;
use crate::input::{
    Access, Boundary, Compared, Dependence, EqualPairs, Loop, Polyhedra, Region, SharedVariable,
    Span, Statement, Storage,
};
use crate::scopes::LoopCode;
use crate::{analyze_region, Feedback};
use folder::{Folded, Label};
use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter, Mnemonic};
use rustc_hash::FxHashMap as HashMap;
use std::collections::{BTreeMap, BTreeSet};
use symbols::{Loaded, SourceText};
use tracer::deps::Effect;
use tracer::{DepKind, NodeId, NodeKind, ScheduleTree, Stmt, Through};

/// One region of the trace: the subtrees of the schedule tree under its roots, with what
/// naming its statements and storage needs.
struct Scope<'a> {
    roots: &'a [NodeId],
    tree: &'a ScheduleTree,
    naming: &'a tracer::Naming<'a>,
    bin: Loaded<'a>,
    folded: &'a Folded2,
    code: &'a Code,
}

/// The region's statements, with their reports, and by instruction (context, pc) their
/// names and indices in `list`; by name, the functions of the frames live at each, outermost first (the last is
/// the one it is in).
#[derive(Default)]
struct Statements {
    list: Vec<Statement>,
    reports: Vec<StatementReport>,
    names: HashMap<(NodeId, u64), String>,
    index: HashMap<(NodeId, u64), usize>,
    functions: HashMap<String, Vec<String>>,
}

/// The region's dependences and what crosses its border, with the facts about source
/// variables the storage naming finds on the way.
#[derive(Default)]
struct Edges {
    dependences: Vec<Dependence>,
    reports: Vec<DependenceReport>,
    live_in: Vec<Boundary>,
    live_out: Vec<Boundary>,
    rewritten_after: Vec<Boundary>,
    shared: BTreeMap<String, SharedVariable>,
    declared_in: BTreeMap<String, Vec<String>>,
    sections: BTreeMap<String, u64>,
    /// Variables whose section was looked for.
    sections_asked: BTreeSet<String>,
    /// The loops declaring the variable a consumer's line sees under a register variable's
    /// name, by (consumer pc, name): each looked up in debug information once.
    declaring: HashMap<(u64, String), Vec<String>>,
}

/// Register-to-register and memory-to-register moves: the value goes unchanged.
fn is_move(insn: &iced_x86::Instruction) -> bool {
    matches!(
        insn.mnemonic(),
        Mnemonic::Mov
            | Mnemonic::Movsd
            | Mnemonic::Movss
            | Mnemonic::Movapd
            | Mnemonic::Movaps
            | Mnemonic::Movupd
            | Mnemonic::Movups
            | Mnemonic::Movdqa
            | Mnemonic::Movdqu
            | Mnemonic::Movq
            | Mnemonic::Movd
            | Mnemonic::Vmovsd
            | Mnemonic::Vmovss
            | Mnemonic::Vmovapd
            | Mnemonic::Vmovaps
            | Mnemonic::Vmovupd
            | Mnemonic::Vmovups
            | Mnemonic::Movzx
            | Mnemonic::Movsx
            | Mnemonic::Movsxd
    ) && insn.op_count() == 2
        && insn.op0_kind() == iced_x86::OpKind::Register
}

/// Moves chased back from a register's producer to the load its value came from.
const MOVE_CHAIN: usize = 4;

/// (consumer context, pc) -> the (context, pc) of each producer of a register it reads.
type Producers = HashMap<(NodeId, u64), Vec<(NodeId, u64)>>;

/// The array whose element the register written by instruction `at` holds: it was loaded
/// by a plain move from memory, maybe through register copies (gcc passes a stencil's
/// `a[i + 1]` through `rsi` to the next iteration's `xmm0`). Producers outside the region
/// (before its loops) are left out: the dependences asked about are the region's.
fn loaded_from(
    code: &Code,
    at: (NodeId, u64),
    producers: &Producers,
    stmts: &Statements,
    hops: usize,
) -> Option<String> {
    let insn = super::insn_at(code, at.1)?;
    if !is_move(&insn) {
        return None;
    }
    match insn.op1_kind() {
        iced_x86::OpKind::Memory => {
            let stmt = &stmts.list[*stmts.index.get(&at)?];
            match &stmt.accesses[..] {
                [read] if !read.write => read.array.clone(),
                _ => None,
            }
        }
        iced_x86::OpKind::Register if hops < MOVE_CHAIN => {
            let inside = producers
                .get(&at)?
                .iter()
                .filter(|p| stmts.names.contains_key(p));
            let mut found: Option<String> = None;
            for &p in inside {
                let array = loaded_from(code, p, producers, stmts, hops + 1)?;
                if found.get_or_insert_with(|| array.clone()) != &array {
                    return None;
                }
            }
            found
        }
        _ => None,
    }
}

/// Marks the register flow dependences whose value is one along a loop
/// ([`crate::input::Dependence::invariant_in`]).
fn invariant_registers(
    deps: &mut [Dependence],
    stmts: &Statements,
    loop_nodes: &[NodeId],
    loops: &[Loop],
    tree: &ScheduleTree,
    folded: &Folded2,
    code: &Code,
) {
    let copies = super::copies::Copies::new(folded);
    let keys: HashMap<&str, (NodeId, u64)> =
        stmts.names.iter().map(|(k, n)| (n.as_str(), *k)).collect();
    for d in deps {
        if d.kind != DepKind::Flow || !matches!(d.storage, Storage::Register { .. }) {
            continue;
        }
        let Some(&at) = keys.get(d.source.as_str()) else {
            continue;
        };
        d.invariant_in = loop_nodes
            .iter()
            .zip(loops)
            .filter(|(&n, _)| tree.is_within(at.0, n) && copies.one_value_along(code, tree, at, n))
            .map(|(_, l)| l.id.clone())
            .collect();
    }
}

/// A region built from the folded trace, not analysed yet: what [`build_region`] needs of the
/// folded trace is here, so that the trace can be dropped before the analyses (on myocyte it
/// held 190 MB under the analysis of its 35,000-statement region).
pub(super) struct Prepared {
    report: RegionReport,
}

impl Prepared {
    /// The region's input to the analysis.
    pub(super) fn input(&self) -> &Region {
        &self.report.input
    }

    /// Analyses the region with `opts`.
    pub(super) fn analyze(self, opts: &PipelineOptions) -> RegionReport {
        let mut report = self.report;
        // A region isl cannot schedule is still reported, with the reason.
        report.feedback =
            analyze_region(&report.input, &opts.feedback).unwrap_or_else(|e| Feedback {
                why_not: Some(if opts.feedback.cancelled() {
                    "not analysed: polyprof was interrupted during its analysis".to_string()
                } else {
                    format!("the polyhedral analysis failed: {e}")
                }),
                ..Feedback::default()
            });
        report
    }
}

/// Builds region `index` (rooted at `roots`) from the folded trace, to be analysed by
/// [`Prepared::analyze`].
pub(super) fn build_region(
    index: usize,
    roots: &[NodeId],
    tree: &ScheduleTree,
    naming: &tracer::Naming<'_>,
    folded: &Folded2,
    code: &Code,
    opts: &PipelineOptions,
) -> Result<Prepared, PipelineError> {
    let scope = Scope {
        roots,
        tree,
        naming,
        bin: naming.loaded(),
        folded,
        code,
    };
    let totals = tree.total_weights();
    let all = totals[ScheduleTree::ROOT].max(1) as f64;
    let (loop_nodes, loops) = scope.loops();
    let library_calls = scope.library_calls();
    let interprocedural = !library_calls.is_empty()
        || (0..tree.nodes.len()).any(|n| {
            !roots.contains(&n)
                && scope.inside(n)
                && matches!(tree.nodes[n].kind, NodeKind::Func { .. })
        });
    let stmts = scope.statements(&loop_nodes);
    let loop_code = LoopCode::of_region(&loop_nodes, &loops, tree, naming);
    let omp_loops = super::openmp::omp_loops(&loop_nodes, &loops, tree, naming);
    let producers = scope.register_producers();
    let mut edges = scope.edges(&stmts, &loop_code, &producers);
    let mut compared = scope.compared(&stmts, &loop_nodes, &loop_code, &producers, &mut edges);
    let copies = super::copies::Copies::new(folded);
    for (c, at) in &mut compared {
        if matches!(c.storage, Storage::Register { .. }) {
            c.invariant_in = loop_nodes
                .iter()
                .zip(&loops)
                .filter(|(&n, _)| {
                    tree.is_within(at.0, n) && copies.one_value_along(code, tree, *at, n)
                })
                .map(|(_, l)| l.id.clone())
                .collect();
        }
    }
    if std::env::var_os("POLYPROF_DEBUG_COMPARED").is_some() {
        for (c, _) in &compared {
            eprintln!(
                "compared: {} at {} from {} {} through {}: loops {:?}, distances {:?}, reload {:?}, invariant in {:?}",
                c.line,
                c.source,
                c.source_line,
                stmts.list.iter().find(|s| s.name == c.source).map_or("", |s| s.label.as_str()),
                c.storage.describe(),
                c.loops,
                c.distances,
                c.reload,
                c.invariant_in
            );
        }
    }
    invariant_registers(
        &mut edges.dependences,
        &stmts,
        &loop_nodes,
        &loops,
        tree,
        folded,
        code,
    );
    // An OpenMP loop's own statement is known (the `for` below its directive): a loop
    // statement below it is nested in it, not one the compiler merged it with (gcc names
    // srad's outlined `j` loop by a line of the inner `i` loop's body).
    for v in edges.shared.values_mut() {
        v.merged.retain(|(id, at)| {
            let own = omp_loops.get(id).and_then(|o| o.line);
            let line = at.rsplit(':').next().and_then(|n| n.parse::<u32>().ok());
            !matches!((own, line), (Some(own), Some(line)) if line > own)
        });
    }
    edges
        .reports
        .sort_by(|a, b| (&a.sink, &a.source).cmp(&(&b.sink, &b.source)));
    let ops: u64 = stmts.list.iter().map(|s| s.ops).sum();
    let exact_ops: u64 = folded
        .insns
        .iter()
        .filter(|(k, _)| stmts.names.contains_key(*k))
        .map(|(_, (_, f))| f.exact_points())
        .sum();
    let trips = scope.trips(&stmts, loops.len());
    let language = stmts
        .reports
        .iter()
        .max_by_key(|s| s.ops)
        .and_then(|s| naming.loaded().language(s.pc))
        .unwrap_or_default();
    let headers = if language == symbols::Language::Rust {
        let mut sources = SourceText::default();
        loop_code
            .iter()
            .filter_map(|l| l.header(&mut sources))
            .collect()
    } else {
        BTreeMap::new()
    };
    let mut input = Region {
        loops,
        statements: stmts.list,
        dependences: edges.dependences,
        library_calls: library_calls.into_iter().collect(),
        trips,
        live_in: edges.live_in,
        live_out: edges.live_out,
        rewritten_after: edges.rewritten_after,
        shared_variables: edges
            .shared
            .into_values()
            .map(|mut v| {
                for list in [&mut v.registers, &mut v.loops, &mut v.lines] {
                    list.sort_unstable();
                    list.dedup();
                }
                v
            })
            .collect(),
        declared_in: edges.declared_in,
        sections: edges.sections,
        omp_loops,
        early_exits: crate::exits::early_exits(&loop_code),
        language,
        headers,
        compared: compared.into_iter().map(|(c, _)| c).collect(),
    };
    // Registers that only hold expressions of the loop counters are recomputed by any order.
    crate::storage::drop_recomputed(&mut input);
    // Registers that only hold an array element are that element for every verdict.
    crate::mirror::elements_for_registers(&mut input, &opts.feedback);
    let report = RegionReport {
        id: format!("R{}", index + 1),
        root: roots[0],
        ops_percent: 100.0 * roots.iter().map(|&r| totals[r]).sum::<u64>() as f64 / all,
        interprocedural,
        affine_percent: if ops == 0 {
            0.0
        } else {
            100.0 * exact_ops as f64 / ops as f64
        },
        loop_nodes,
        statements: stmts.reports,
        dependences: edges.reports,
        input,
        feedback: Feedback::default(),
    };
    Ok(Prepared { report })
}

impl Scope<'_> {
    /// Whether node `n` is in the region.
    fn inside(&self, n: NodeId) -> bool {
        self.roots.iter().any(|&r| self.tree.is_within(n, r))
    }

    /// The region's loops (loop and recursion nodes of its subtrees, numbered by node), with
    /// their nodes.
    fn loops(&self) -> (Vec<NodeId>, Vec<Loop>) {
        let tree = self.tree;
        let nodes: Vec<NodeId> = (0..tree.nodes.len())
            .filter(|&n| {
                matches!(
                    tree.nodes[n].kind,
                    NodeKind::Loop { .. } | NodeKind::Recursion { .. }
                ) && self.inside(n)
            })
            .collect();
        let loops = nodes
            .iter()
            .map(|&n| Loop {
                id: format!("L{n}"),
                label: self
                    .naming
                    .frame(tree, n)
                    .trim_start_matches("loop ")
                    .to_string(),
            })
            .collect();
        (nodes, loops)
    }

    /// The natively-run library functions the region calls.
    fn library_calls(&self) -> BTreeSet<String> {
        let mut calls = BTreeSet::new();
        for n in 0..self.tree.nodes.len() {
            if let NodeKind::Func { entry, .. } = self.tree.nodes[n].kind {
                if self.inside(n) && self.naming.import(entry).is_some() {
                    calls.insert(
                        self.naming
                            .frame(self.tree, n)
                            .trim_start_matches("call ")
                            .to_string(),
                    );
                }
            }
        }
        calls
    }

    /// Statements: the instructions of the region that are not scalar evolutions and touch
    /// memory or produce values (and calls with effects), in the order they first ran, with
    /// Kelly positions.
    fn statements(&self, loop_nodes: &[NodeId]) -> Statements {
        let (tree, folded, bin) = (self.tree, self.folded, self.bin);
        let loop_index: HashMap<NodeId, usize> = loop_nodes
            .iter()
            .enumerate()
            .map(|(i, &n)| (n, i))
            .collect();
        let mut keys: Vec<&(NodeId, u64)> = folded
            .insns
            .keys()
            .filter(|(ctx, _)| self.inside(*ctx))
            .collect();
        keys.sort_by_key(|k| folded.insns[*k].0.first);
        // Loads of values a library call wrote (`strtol(p, &p, 10)`'s end pointer): data
        // from code the trace does not see, never a scalar evolution, however affine its
        // values happen to be on this input.
        let from_calls: rustc_hash::FxHashSet<(NodeId, u64)> = folded
            .deps
            .iter()
            .filter(|((_, source, kind, through, _), ..)| {
                *kind == DepKind::Flow
                    && *through == Through::Memory
                    && self.code.bytes.get(&source.pc).is_some_and(|b| {
                        Decoder::with_ip(64, b, source.pc, DecoderOptions::NONE)
                            .decode()
                            .mnemonic()
                            == Mnemonic::Call
                    })
            })
            .map(|((sink, ..), ..)| (sink.context, sink.pc))
            .collect();
        let stepped = stepped_by_invariants(self.folded, self.code);
        let mut formatter = IntelFormatter::new();
        let mut info = iced_x86::InstructionInfoFactory::new();
        let mut out = Statements::default();
        let mut raw: Vec<Vec<Vec<u64>>> = Vec::new();
        for key in keys {
            let (meta, f) = &folded.insns[key];
            let nval = f.labels - meta.naddr;
            let bytes = self.code.bytes.get(&key.1).cloned().unwrap_or_default();
            let insn = Decoder::with_ip(64, &bytes, key.1, DecoderOptions::NONE).decode();
            let touches = meta.naddr > 0;
            // A call into natively-run library code is a statement when it has effects
            // (output, hidden state, memory it reads or writes): the tracer reports them as
            // its own.
            let effectful_call = insn.mnemonic() == Mnemonic::Call && folded.dep_ends.contains(key);
            if !effectful_call
                && (((is_scev(meta, f, nval, &insn) || stepped.contains(key))
                    && !from_calls.contains(key))
                    || !(touches || writes_data(&insn, &mut info)))
            {
                continue;
            }
            let in_plt = [".plt", ".plt.sec", ".plt.got"]
                .iter()
                .any(|sec| bin.in_section(sec, key.1));
            if in_plt
                || (matches!(
                    insn.mnemonic(),
                    Mnemonic::Call | Mnemonic::Ret | Mnemonic::Jmp | Mnemonic::Cmp | Mnemonic::Test
                ) && !effectful_call)
            {
                // Control: the return address carries no program data, and comparisons only
                // set the flags of a branch.
                continue;
            }
            let name = format!("S{}", out.list.len());
            let path = tree.path(key.0);
            let stmt_loops: Vec<usize> = path
                .iter()
                .filter_map(|n| loop_index.get(n).copied())
                .collect();
            if f.dims != stmt_loops.len() {
                // Coordinates from loops outside the region: not a statement of it.
                continue;
            }
            // Kelly positions from the control-flow graphs (see `ScheduleTree::positions`).
            raw.push(
                tree.positions(self.naming.structure(), key.0, key.1)
                    .into_iter()
                    .map(|level| level.into_iter().map(u64::from).collect())
                    .collect(),
            );
            // The functions of the frames live at the statement, outermost first.
            let frames: Vec<String> = path
                .iter()
                .filter_map(|&n| match tree.nodes[n].kind {
                    NodeKind::Func { entry, .. } => Some(self.naming.function(entry)),
                    _ => None,
                })
                .collect();
            let frames = if frames.is_empty() {
                vec!["?".to_string()]
            } else {
                frames
            };
            let mut asm = String::new();
            formatter.format(&insn, &mut asm);
            if effectful_call {
                // `call printf`, not `call 1050h`.
                if let Some(name) = callee_name(&insn, bin) {
                    asm = format!("call {name}");
                }
            }
            let domain = Polyhedra::set_of(f, &name);
            out.list.push(Statement {
                name: name.clone(),
                label: format!("{} {asm}", bin.source_line(key.1)),
                loops: stmt_loops,
                positions: Vec::new(),
                domain: domain.clone(),
                ops: f.points,
                accesses: self.accesses(meta, f, &frames, key.1),
                fp: fp_op(insn.mnemonic()),
                exact: f.is_exact(),
                update: update_of(&insn),
            });
            out.reports.push(StatementReport {
                name: name.clone(),
                pc: key.1,
                context: key.0,
                domain,
                ops: f.points,
                exact: f.is_exact(),
            });
            out.functions.insert(name.clone(), frames);
            out.index.insert(*key, out.list.len() - 1);
            out.names.insert(*key, name);
        }
        // Kelly positions: rank the static positions per loop level.
        normalize_positions(&mut out.list, &raw);
        out
    }

    /// The memory accesses of an instruction's folded stream `f`, with their strides from its
    /// biggest piece, in function `function` (for naming stack arrays).
    fn accesses(&self, meta: &InsnStream2, f: &Folded, frames: &[String], pc: u64) -> Vec<Access> {
        let big = f.pieces.iter().max_by_key(|p| p.points);
        // A point the statement ran at: the affine address at the origin may lie outside the
        // array when the domain does not hold the origin (a loop from 1, a reversed loop).
        let mut ran_at: Option<Vec<i64>> = None;
        if let Some(p) = big {
            p.domain.for_each_point(1, |pt| ran_at = Some(pt.to_vec()));
        }
        (0..meta.naddr)
            .map(|j| {
                let label = big.and_then(|p| p.labels.get(j));
                let base = match label {
                    Some(Label::Affine { constant, .. }) => Some(*constant),
                    _ => None,
                };
                let first = match label {
                    Some(l @ Label::Affine { constant, .. }) => Some(
                        ran_at
                            .as_deref()
                            .and_then(|pt| l.eval(pt))
                            .unwrap_or(*constant) as u64,
                    ),
                    Some(Label::Range { min, .. }) => Some(*min as u64),
                    None => None,
                };
                Access {
                    strides: (0..f.dims)
                        .map(|d| match label {
                            Some(Label::Affine { coeffs, .. }) => coeffs.get(d).copied(),
                            _ => None,
                        })
                        .collect(),
                    size: meta.sizes.get(j).copied().unwrap_or(0),
                    write: meta.writes.get(j).copied().unwrap_or(false),
                    base,
                    array: first.map(|a| name_array(a, self.bin, self.code, frames, &[pc])),
                }
            })
            .collect()
    }

    /// Who produced each register an instruction reads, for [`loaded_from`]: the dependences'
    /// and the comparisons' storage naming share it.
    fn register_producers(&self) -> Producers {
        let mut producers = Producers::default();
        for ((cons, prod, kind, through, _), ..) in &self.folded.deps {
            if *kind == DepKind::Flow && *through == Through::Register {
                producers
                    .entry((cons.context, cons.pc))
                    .or_default()
                    .push((prod.context, prod.pc));
            }
        }
        producers
    }

    /// The dependences between the region's statements, the values crossing its border, and
    /// the source variables its loops assign.
    fn edges(&self, stmts: &Statements, loop_code: &[LoopCode], producers: &Producers) -> Edges {
        let bin = self.bin;
        let mut out = Edges::default();
        let mut sources = SourceText::default();
        // Per variable and loop: whether any of its assignments there sets it afresh.
        let mut sets: BTreeMap<(String, String), bool> = BTreeMap::new();
        // Per variable, the loops where some assignment does not accumulate into it.
        let mut not_only_accumulated: BTreeSet<(String, String)> = BTreeSet::new();
        // Per variable, the loops where some assignment stores no constant.
        let mut not_only_constant: BTreeSet<(String, String)> = BTreeSet::new();
        for a in crate::scopes::assigned_in_source(bin.exe, loop_code, &mut sources) {
            *sets.entry((a.name.clone(), a.loop_id.clone())).or_default() |= !a.steps;
            if a.accumulates.is_none() {
                not_only_accumulated.insert((a.name.clone(), a.loop_id.clone()));
            }
            if a.constant.is_none() && !a.outside {
                not_only_constant.insert((a.name.clone(), a.loop_id.clone()));
            }
            let v = out
                .shared
                .entry(a.name.clone())
                .or_insert_with(|| SharedVariable {
                    name: a.name,
                    ..SharedVariable::default()
                });
            if a.encloses {
                v.merged.push((a.loop_id.clone(), a.line.clone()));
            }
            if a.steps {
                v.steps.push((a.loop_id.clone(), a.line.clone()));
            }
            if let Some(op) = a.accumulates {
                v.accumulates.push((a.loop_id.clone(), a.line.clone(), op));
            }
            if let Some(at) = &a.read_in_loop {
                if !v.reads.iter().any(|(l, _)| *l == a.loop_id) {
                    v.reads.push((a.loop_id.clone(), at.clone()));
                }
            }
            if let Some(c) = a.constant.filter(|_| !a.outside) {
                v.flags.push((a.loop_id.clone(), a.line.clone(), c));
            }
            v.loops.push(a.loop_id);
            v.lines.push(a.line);
        }
        // Only stepped, never set: the loop's iterations each start from the previous one's
        // value.
        for v in out.shared.values_mut() {
            let name = v.name.clone();
            v.steps
                .retain(|(l, _)| sets.get(&(name.clone(), l.clone())) == Some(&false));
            // A variable the loop also sets or steps is no reduction of the source's.
            v.accumulates
                .retain(|(l, _, _)| !not_only_accumulated.contains(&(name.clone(), l.clone())));
            // A flag only if every assignment in the loop stores a constant.
            v.flags
                .retain(|(l, _, _)| !not_only_constant.contains(&(name.clone(), l.clone())));
            // The step per iteration, for a `linear` clause: one stepping line per loop.
            for (l, line) in &v.steps {
                if v.steps.iter().filter(|(m, _)| m == l).count() != 1 {
                    continue;
                }
                let code = loop_code.iter().find(|c| c.id() == l);
                if let Some((step, inner)) =
                    code.and_then(|c| c.linear_step(&mut sources, line, &name))
                {
                    v.linear.push((l.clone(), step, inner));
                }
            }
        }
        for (key, f, multi, location, fixed) in &self.folded.deps {
            let (cons, prod, kind, through, _) = key;
            let sink = stmts.names.get(&(cons.context, cons.pc));
            let source = stmts.names.get(&(prod.context, prod.pc));
            let region_frames = ["the region".to_string()];
            let frames: &[String] = source
                .or(sink)
                .and_then(|n| stmts.functions.get(n))
                .map_or(&region_frames[..], Vec::as_slice);
            let function = frames.last().map_or("the region", String::as_str);
            let register = (*through == Through::Register).then(|| {
                let reg = register_name(*location);
                let var = register_variable(bin, self.code, &reg, cons.pc, prod.pc);
                (reg, var)
            });
            if let Some((reg, Some(var))) = &register {
                let writer = if *kind == DepKind::Anti { cons } else { prod };
                self.register_assigned(writer, reg, var, loop_code, &mut sources, &mut out);
            }
            let mut storage = || {
                let place = DepPlace {
                    location: *location,
                    fixed: *fixed,
                    pcs: [cons.pc, prod.pc],
                    function,
                    frames,
                };
                let storage = self.storage(through, &register, &place, loop_code, &mut out);
                // The pc an OpenMP clause on the storage would stand at: inside the region.
                let pc = if self.inside(cons.context) {
                    cons.pc
                } else {
                    prod.pc
                };
                // Asked once per variable: naming the pointer reads debug information.
                if let Some(var) = storage.variable() {
                    if out.sections_asked.insert(var.to_string()) {
                        if let Some(len) = pointer_section(*location, bin, self.code, pc) {
                            out.sections.insert(var.to_string(), len);
                        }
                    }
                }
                storage
            };
            let (sink, source) = match (sink, source) {
                (Some(sink), Some(source)) => (sink, source),
                // A value crossing the region's border: read inside from before it, or written
                // inside and read after it. Only flow dependences make a value live.
                (Some(sink), None) if *kind == DepKind::Flow && !self.inside(prod.context) => {
                    let before = Boundary {
                        stmt: sink.clone(),
                        storage: storage(),
                        relation: Polyhedra::map_of(f, sink, "Outside"),
                        outside: bin.source_line(prod.pc),
                    };
                    out.live_in.push(before);
                    continue;
                }
                // Written inside and read after the region (flow), or overwritten after it
                // (output).
                (None, Some(source)) if *kind != DepKind::Anti && !self.inside(cons.context) => {
                    let after = Boundary {
                        stmt: source.clone(),
                        storage: storage(),
                        relation: Polyhedra::map_of(f, "Outside", source),
                        outside: bin.source_line(cons.pc),
                    };
                    match kind {
                        DepKind::Flow => out.live_out.push(after),
                        _ => out.rewritten_after.push(after),
                    }
                    continue;
                }
                _ => continue,
            };
            let relation = std::sync::Arc::new(Polyhedra::map_of(f, sink, source));
            // Pairs past the slots were dropped: the relation is then known to be incomplete.
            let exact = f.is_exact() && !multi;
            let storage = storage();
            out.reports.push(DependenceReport {
                source: source.clone(),
                sink: sink.clone(),
                kind: *kind,
                through: *through,
                storage: storage.describe(),
                relation: relation.clone(),
                exact,
            });
            let reload = match (&storage, kind) {
                (Storage::Register { var: None, .. }, DepKind::Flow) => {
                    loaded_from(self.code, (prod.context, prod.pc), producers, stmts, 0)
                }
                _ => None,
            };
            out.dependences.push(Dependence {
                source: source.clone(),
                sink: sink.clone(),
                kind: *kind,
                storage,
                relation,
                exact,
                equal_pairs: equal_pairs(f),
                reload,
                mirror: None,
                invariant_in: Vec::new(),
            });
        }
        out
    }

    /// The values the region's comparisons read from its statements ([`Compared`]), each
    /// with its producer's (context, pc): instructions that write only the flags (`cmp`,
    /// `test`, `ucomisd`, `bt`), reached by a flow from a statement. Scalar evolutions are no
    /// statements, so a loop's counter and Rust's iterator bounds are none of them.
    fn compared(
        &self,
        stmts: &Statements,
        loop_nodes: &[NodeId],
        loop_code: &[LoopCode],
        producers: &Producers,
        edges: &mut Edges,
    ) -> Vec<(Compared, (NodeId, u64))> {
        let bin = self.bin;
        let mut info = iced_x86::InstructionInfoFactory::new();
        let mut flag_only: HashMap<u64, bool> = HashMap::default();
        let mut is_flag_only = |pc: u64| -> bool {
            *flag_only.entry(pc).or_insert_with(|| {
                let Some(insn) = super::insn_at(self.code, pc) else {
                    return false;
                };
                let writes_memory = info.info(&insn).used_memory().iter().any(|m| {
                    !matches!(
                        m.access(),
                        iced_x86::OpAccess::Read
                            | iced_x86::OpAccess::CondRead
                            | iced_x86::OpAccess::NoMemAccess
                    )
                });
                insn.flow_control() == iced_x86::FlowControl::Next
                    && insn.rflags_modified() != 0
                    && !writes_memory
                    && !writes_data(&insn, &mut info)
            })
        };
        let loop_index: HashMap<NodeId, usize> = loop_nodes
            .iter()
            .enumerate()
            .map(|(i, &n)| (n, i))
            .collect();
        let mut out = Vec::new();
        for (key, f, _, location, fixed) in &self.folded.deps {
            let (cons, prod, kind, through, _) = key;
            if *kind != DepKind::Flow
                || !self.inside(cons.context)
                || stmts.names.contains_key(&(cons.context, cons.pc))
            {
                continue;
            }
            let Some(&at) = stmts.index.get(&(prod.context, prod.pc)) else {
                continue;
            };
            if !is_flag_only(cons.pc) {
                continue;
            }
            let loops: Vec<usize> = self
                .tree
                .path(cons.context)
                .iter()
                .filter_map(|n| loop_index.get(n).copied())
                .collect();
            let source = &stmts.list[at];
            if f.dims != loops.len() || f.labels != source.loops.len() {
                continue;
            }
            let common = loops
                .iter()
                .zip(&source.loops)
                .take_while(|(a, b)| a == b)
                .count();
            let relation = Polyhedra::map_of(f, "Compare", &source.name);
            let distances: Vec<Vec<(usize, Span)>> = f
                .pieces
                .iter()
                .zip(&relation.pieces)
                .flat_map(|(p, convex)| {
                    let spans = piece_spans(p, common).unwrap_or_else(|| {
                        let one = Polyhedra {
                            pieces: vec![convex.clone()],
                            ..relation.clone()
                        };
                        crate::distance::of_relation(&one, common)
                            .into_iter()
                            .map(|piece| {
                                piece
                                    .into_iter()
                                    .map(|iv| Span {
                                        lo: iv.lo,
                                        hi: iv.hi,
                                    })
                                    .collect()
                            })
                            .collect()
                    });
                    spans
                        .into_iter()
                        .map(|piece: Vec<Span>| loops.iter().copied().zip(piece).collect())
                })
                .collect();
            let frames: &[String] = stmts
                .functions
                .get(&source.name)
                .map_or(&[][..], Vec::as_slice);
            let function = frames.last().map_or("the region", String::as_str);
            let storage = match through {
                Through::Register => {
                    let reg = register_name(*location);
                    let var = register_variable(bin, self.code, &reg, cons.pc, prod.pc);
                    Storage::Register {
                        reg,
                        var: var.map(|v| v.name),
                    }
                }
                Through::Memory => {
                    let place = DepPlace {
                        location: *location,
                        fixed: *fixed,
                        pcs: [cons.pc, prod.pc],
                        function,
                        frames,
                    };
                    self.storage(through, &None, &place, loop_code, edges)
                }
            };
            let reload = match &storage {
                Storage::Register { var: None, .. } => {
                    loaded_from(self.code, (prod.context, prod.pc), producers, stmts, 0)
                }
                _ => None,
            };
            out.push((
                Compared {
                    source: source.name.clone(),
                    storage,
                    line: bin.source_line(cons.pc),
                    source_line: bin.source_line(prod.pc),
                    loops,
                    distances,
                    reload,
                    invariant_in: Vec::new(),
                },
                (prod.context, prod.pc),
            ));
        }
        out
    }

    /// A variable in register `reg` that the instruction `writer` assigns: shared by the
    /// loops around it that it is declared outside of, where the source cannot be read (where
    /// it can, its text decided already, in `edges`: debug information names registers
    /// loosely, a reload of a pointer, code gcc shares between nests).
    fn register_assigned(
        &self,
        writer: &Stmt,
        reg: &str,
        var: &symbols::Variable,
        loop_code: &[LoopCode],
        sources: &mut SourceText,
        out: &mut Edges,
    ) {
        let loops = LoopCode::assigning(loop_code, self.tree, writer.context, var);
        if loops.is_empty() || sources.readable_at(self.bin.exe, self.bin.link(writer.pc).0) {
            return;
        }
        let v = out
            .shared
            .entry(var.name.clone())
            .or_insert_with(|| SharedVariable {
                name: var.name.clone(),
                ..SharedVariable::default()
            });
        v.registers.push(reg.to_string());
        v.loops.extend(loops);
        v.lines.push(self.bin.source_line(writer.pc));
    }

    /// The storage a dependence goes through, named for a person; a stack scalar declared in
    /// the body of loops goes to `out.declared_in`.
    fn storage(
        &self,
        through: &Through,
        register: &Option<(String, Option<symbols::Variable>)>,
        place: &DepPlace<'_>,
        loop_code: &[LoopCode],
        out: &mut Edges,
    ) -> Storage {
        let (bin, code, frames) = (self.bin, self.code, place.frames);
        let function = super::naming::frame_name(place.function);
        let location = place.location;
        let array = |addr: u64| Storage::Array {
            name: name_array(addr, bin, code, frames, &place.pcs),
        };
        let scalar = || Storage::Scalar {
            addr: location,
            name: name_memory(location, bin, code, frames),
        };
        match through {
            Through::Register => {
                let (reg, var) = register.clone().unwrap_or_default();
                // A variable declared in the body of loops is each iteration's own in the
                // source: a value its register passes from one iteration to the next is the
                // compiler's. The variable is the one the consumer's source line sees under
                // that name, the innermost: gcc -O2 keeps kmeans' `index` and the `index` of
                // the inlined `find_nearest_point` in one register, which debug information
                // gives to the outer one, and reads it in a `cmov` before the callee's own
                // is assigned.
                let own = var.as_ref().map(|v| {
                    out.declaring
                        .entry((place.pcs[0], v.name.clone()))
                        .or_insert_with(|| {
                            bin.locals_at(place.pcs[0])
                                .into_iter()
                                .find(|l| l.name == v.name)
                                .map_or_else(Vec::new, |seen| LoopCode::declaring(loop_code, &seen))
                        })
                        .clone()
                });
                let storage = Storage::Register {
                    reg,
                    var: var.map(|v| v.name),
                };
                if let Some(loops) = own.filter(|l| !l.is_empty()) {
                    out.declared_in.insert(storage.describe(), loops);
                }
                storage
            }
            Through::Memory if location >= STACK_START && Effect::at(location).is_none() => {
                match stack_variable(bin, code, &place.pcs) {
                    Some(var) if place.fixed => {
                        let name = format!(
                            "{} (stack of {function})",
                            with_offset(&var.name, var.offset)
                        );
                        let loops = LoopCode::declaring(loop_code, &var);
                        if !loops.is_empty() {
                            out.declared_in.insert(name.clone(), loops);
                        }
                        Storage::Scalar {
                            addr: location,
                            name,
                        }
                    }
                    Some(var) => Storage::Array {
                        name: format!("`{}` (stack of {function})", var.name),
                    },
                    None if place.fixed => scalar(),
                    None => {
                        let storage = array(location);
                        // An array declared in the loop's body (reached through a `lea` gcc
                        // hoisted above it: Rodinia nw's `input_itemsets_l`) is each
                        // iteration's own in the source, as a scalar is: no clause names it.
                        let var = stack_array_variable(bin, code, location, frames, &place.pcs);
                        let loops =
                            var.map_or_else(Vec::new, |v| LoopCode::declaring(loop_code, &v));
                        if !loops.is_empty() {
                            out.declared_in.insert(storage.describe(), loops);
                        }
                        storage
                    }
                }
            }
            Through::Memory => match Effect::at(location) {
                Some(e) => Storage::Effect {
                    name: e.describe().to_string(),
                },
                None if place.fixed => scalar(),
                None => array(location),
            },
        }
    }

    /// Iterations of each of the region's `n` loops: the largest coordinate any statement
    /// reaches in it, plus one.
    fn trips(&self, stmts: &Statements, n: usize) -> Vec<Option<u64>> {
        let mut trips: Vec<Option<u64>> = vec![None; n];
        for (st, rep) in stmts.list.iter().zip(&stmts.reports) {
            let Some((_, f)) = self.folded.insns.get(&(rep.context, rep.pc)) else {
                continue;
            };
            for (d, &li) in st.loops.iter().enumerate() {
                let hi = f
                    .pieces
                    .iter()
                    .filter_map(|p| p.domain.bounds.get(d))
                    .filter(|b| b.upper.is_constant())
                    .map(|b| b.upper.constant)
                    .max();
                if let Some(hi) = hi {
                    let t = (hi + 1).max(0) as u64;
                    trips[li] = Some(trips[li].map_or(t, |x| x.max(t)));
                }
            }
        }
        trips
    }
}

/// The memory a dependence goes through, as its folded stream found it.
struct DepPlace<'a> {
    /// The first address.
    location: u64,
    /// The address stays the same over the dependence's instances.
    fixed: bool,
    /// The consumer's and the producer's pcs.
    pcs: [u64; 2],
    /// The function the statements are in.
    function: &'a str,
    /// The functions of the frames live at them, outermost first.
    frames: &'a [String],
}

/// Sets each statement's positions to the rank of its first-execution times among the
/// statements sharing the same loops above each level.
fn normalize_positions(stmts: &mut [Statement], raw: &[Vec<Vec<u64>>]) {
    for k in 0..raw.iter().map(Vec::len).max().unwrap_or(0) {
        // Ranked through maps: a region can have tens of thousands of statements in a group.
        let ranks: Vec<u32> = {
            let above = |s: &Statement| -> Vec<usize> { s.loops[..k.min(s.loops.len())].to_vec() };
            let mut groups: HashMap<Vec<usize>, BTreeSet<&[u64]>> = HashMap::default();
            for (s, r) in stmts.iter().zip(raw) {
                if let Some(p) = r.get(k) {
                    groups.entry(above(s)).or_default().insert(p);
                }
            }
            let rank: HashMap<Vec<usize>, HashMap<&[u64], u32>> = groups
                .into_iter()
                .map(|(key, set)| (key, set.into_iter().zip(0..).collect()))
                .collect();
            stmts
                .iter()
                .zip(raw)
                .map(|(s, r)| match (r.get(k), rank.get(&above(s))) {
                    (Some(p), Some(set)) => set.get(&p[..]).copied().unwrap_or(0),
                    _ => 0,
                })
                .collect()
        };
        for (s, rank) in stmts.iter_mut().zip(ranks) {
            s.positions.push(rank);
        }
    }
}

/// Whether the pairs of a folded dependence join instances with equal coordinates, from its
/// labels (the producer's coordinates as functions of the consumer's): a piece whose label
/// along some loop is that loop's coordinate plus a nonzero constant has none, a piece whose
/// every label is the coordinate itself has only such pairs; anything else is for isl.
fn equal_pairs(f: &Folded) -> EqualPairs {
    let (mut never, mut always) = (true, true);
    for p in &f.pieces {
        if p.labels.len() != p.domain.dims() {
            return EqualPairs::Unknown;
        }
        // Per label: whether it is its own loop's coordinate, plus which constant.
        let shifts: Vec<Option<i64>> = p
            .labels
            .iter()
            .enumerate()
            .map(|(k, l)| match l {
                Label::Affine { coeffs, constant }
                    if coeffs.len() > k
                        && coeffs
                            .iter()
                            .enumerate()
                            .all(|(j, &c)| c == i64::from(j == k)) =>
                {
                    Some(*constant)
                }
                _ => None,
            })
            .collect();
        if shifts.iter().any(|s| s.is_some_and(|c| c != 0)) {
            always = false;
        } else if shifts.iter().all(|s| *s == Some(0)) {
            never = false;
        } else {
            // Other affine labels (the folder's fit across a loop's wrap-around): a small
            // piece is settled point by point.
            match equal_points(p) {
                Some((false, _)) => always = false,
                Some((true, true)) => never = false,
                _ => return EqualPairs::Unknown,
            }
        }
    }
    match (never, always) {
        (true, _) => EqualPairs::Never,
        (false, true) => EqualPairs::Always,
        _ => EqualPairs::Unknown,
    }
}

/// The exact distances (consumer's coordinate minus producer's) of a small piece along its
/// first `common` dimensions, point by point: none for an empty piece, one list otherwise;
/// `None` for a larger piece or a label that is a range (its constraints then bound them).
/// The folder's fits across a loop's wrap-around give loose bounds where every pair is in
/// one iteration.
fn piece_spans(p: &folder::Piece, common: usize) -> Option<Vec<Vec<Span>>> {
    let common = common.min(p.labels.len()).min(p.domain.dims());
    let mut spans: Vec<(i128, i128)> = Vec::new();
    let mut range = false;
    let mut points = 0u64;
    let complete = p.domain.for_each_point(EQUAL_POINTS_LIMIT, |x| {
        points += 1;
        for k in 0..common {
            let Some(w) = p.labels[k].eval(x) else {
                range = true;
                return;
            };
            let d = i128::from(x[k]) - i128::from(w);
            match spans.get_mut(k) {
                Some((lo, hi)) => {
                    *lo = (*lo).min(d);
                    *hi = (*hi).max(d);
                }
                None => spans.push((d, d)),
            }
        }
    });
    if !complete || range {
        return None;
    }
    if points == 0 {
        return Some(Vec::new());
    }
    Some(vec![spans
        .into_iter()
        .map(|(lo, hi)| Span {
            lo: Some(lo),
            hi: Some(hi),
        })
        .collect()])
}

/// Pieces up to this many points are settled point by point by [`equal_points`].
const EQUAL_POINTS_LIMIT: u64 = 4096;

/// Whether some and whether all points of a small piece have labels equal to their
/// coordinates; `None` for a larger piece or a label that is a range.
fn equal_points(p: &folder::Piece) -> Option<(bool, bool)> {
    let (mut some, mut all, mut range) = (false, true, false);
    let complete = p.domain.for_each_point(EQUAL_POINTS_LIMIT, |x| {
        let same = p.labels.iter().zip(x).all(|(l, &v)| match l.eval(x) {
            Some(w) => w == v,
            None => {
                range = true;
                false
            }
        });
        some |= same;
        all &= same;
    });
    (complete && !range).then_some((some, all))
}

#[cfg(test)]
mod tests {
    use super::*;
    use folder::FoldOptions;

    /// Folds consumer → producer pairs over an 8 x 8 nest, the producer given by `f`.
    fn folded(f: impl Fn(i64, i64) -> Option<[i64; 2]>) -> Folded {
        let points: Vec<(Vec<i64>, Vec<i64>)> = (0..8)
            .flat_map(|i| (0..8).map(move |j| (i, j)))
            .filter_map(|(i, j)| f(i, j).map(|p| (vec![i, j], p.to_vec())))
            .collect();
        folder::fold_points(&points, &FoldOptions::default())
    }

    #[test]
    fn distances_of_small_pieces_are_counted() {
        let spans = |f: &Folded| -> Vec<Vec<Span>> {
            f.pieces
                .iter()
                .flat_map(|p| piece_spans(p, 2).expect("small pieces"))
                .collect()
        };
        let one = |lo, hi| Span {
            lo: Some(lo),
            hi: Some(hi),
        };
        // Compared in the iteration after the one that computed it, along j.
        let carried = folded(|i, j| (j > 0).then_some([i, j - 1]));
        assert!(spans(&carried)
            .iter()
            .all(|p| p[..] == [one(0, 0), one(1, 1)]));
        let within = folded(|i, j| Some([i, j]));
        assert!(spans(&within)
            .iter()
            .all(|p| p[..] == [one(0, 0), one(0, 0)]));
    }

    #[test]
    fn equal_pairs_come_from_the_labels() {
        // A value of the previous iteration of j: never the same instance.
        let carried = folded(|i, j| (j > 0).then_some([i, j - 1]));
        assert_eq!(equal_pairs(&carried), EqualPairs::Never);
        // Within one iteration: always.
        let within = folded(|i, j| Some([i, j]));
        assert_eq!(equal_pairs(&within), EqualPairs::Always);
        // A transposed read meets itself on the diagonal only: isl's question for large
        // pieces, settled point by point for small ones.
        let transposed = folded(|i, j| Some([j, i]));
        assert_eq!(equal_pairs(&transposed), EqualPairs::Unknown);
        let piece = &transposed.pieces[0];
        assert_eq!(equal_points(piece), Some((true, false)));
    }
}
