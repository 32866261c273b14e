//! From a recorded execution to the feedback of its hottest regions: iteration vectors and
//! dependences (tracer), folding (folder), region selection, and [`analyze_region`].
//!
//! Statements are the instructions of a region that are not scalar evolutions: an instruction
//! that reads no memory and whose produced values fold into one affine function of its
//! iteration vector (loop counters, address arithmetic) leaves the statement set, and the
//! dependences out of it are dropped, since they would serialize every loop.

use crate::heap::{Block, HeapBlocks, Place, STACK_START};
use crate::input::{
    Access, Boundary, Dependence, EqualPairs, Loop, Polyhedra, ReduceOp, Region, SharedVariable,
    Statement, Storage, Update,
};
use crate::scopes::LoopCode;
use crate::{analyze_region, Feedback, Options};
use folder::{FoldOptions, Folded, Label, StreamFolder};
use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter, Mnemonic};
use ptrace_runner::{AccessKind, Event, EventSink};
use rustc_hash::FxHashMap as HashMap;
use std::collections::{BTreeMap, BTreeSet};
use symbols::Loaded;
use symbols::SourceText;
use tracer::deps::Effect;
use tracer::{DepKind, DepOptions, EventSource, NodeId, NodeKind, ScheduleTree, Stmt, Through};

/// Options of the whole back end, with documented defaults.
#[derive(Clone, Debug)]
pub struct PipelineOptions {
    /// A region is a loop subtree holding at least this share of the traced instructions.
    /// Default: 5%.
    pub region_threshold: f64,
    /// At most this many regions are analysed, hottest first. Default: 8.
    pub max_regions: usize,
    pub fold: FoldOptions,
    pub feedback: Options,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            region_threshold: 5.0,
            max_regions: 8,
            fold: FoldOptions::default(),
            feedback: Options::default(),
        }
    }
}

/// A statement of a region, as reported.
#[derive(Clone, Debug)]
pub struct StatementReport {
    pub name: String,
    pub pc: u64,
    pub context: NodeId,
    pub domain: Polyhedra,
    pub ops: u64,
    pub exact: bool,
}

/// A dependence of a region, as reported.
#[derive(Clone, Debug)]
pub struct DependenceReport {
    pub source: String,
    pub sink: String,
    pub kind: DepKind,
    pub through: Through,
    /// The storage, in source names where debug information has them (`` array `A` (heap
    /// block allocated at k.c:12) ``, `` `s` (register xmm0) ``).
    pub storage: String,
    /// Consumer instances → producer instances.
    pub relation: Polyhedra,
    pub exact: bool,
}

/// One analysed region.
#[derive(Clone, Debug)]
pub struct RegionReport {
    pub id: String,
    /// The schedule-tree node at the region's root.
    pub root: NodeId,
    /// Share of all traced instructions.
    pub ops_percent: f64,
    /// Spans several functions, or calls natively-run library code.
    pub interprocedural: bool,
    /// Share of the statements' executions in exactly folded pieces.
    pub affine_percent: f64,
    /// Schedule-tree node of each region loop (same order as `input.loops`).
    pub loop_nodes: Vec<NodeId>,
    pub statements: Vec<StatementReport>,
    pub dependences: Vec<DependenceReport>,
    pub input: Region,
    pub feedback: Feedback,
}

/// The analysis of a whole execution.
pub struct Profile {
    pub analysis: tracer::Analysis,
    pub regions: Vec<RegionReport>,
    /// Instruction streams and dependence streams folded.
    pub streams: (usize, usize),
}

/// Errors of the pipeline.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error(transparent)]
    Tracer(#[from] tracer::Error),
    #[error(transparent)]
    Feedback(#[from] crate::Error),
    #[error("{0}")]
    Folding(String),
}

/// Words of messages sent to the folding thread at a time.
const PIPE_WORDS: usize = 1 << 15;
/// Message buffers in flight: memory stays bounded when folding falls behind.
const MESSAGES_IN_FLIGHT: usize = 8;

const MSG_STEP: u64 = 0;
const MSG_DEP: u64 = 1;
/// A dependence message's consumer is the last step's instance (left out of the message).
const DEP_SAME_CONSUMER: u64 = 1 << 44;
/// A dependence message's producer coordinates are its consumer's (left out of the message).
const DEP_SAME_COORDS: u64 = 1 << 45;
/// A count in a message's first word (coordinates, accesses, registers: far below it).
const FIELD: u64 = 0xffff;

#[inline]
fn field(n: usize) -> u64 {
    debug_assert!(n as u64 <= FIELD);
    n as u64 & FIELD
}

/// The tracing side of the second pass: steps and dependences as words, in order.
struct Pipe {
    buf: Vec<u64>,
    tx: Option<std::sync::mpsc::SyncSender<Vec<u64>>>,
    back: std::sync::mpsc::Receiver<Vec<u64>>,
    /// The last step's statement and coordinates.
    last: Option<Stmt>,
    last_coords: Vec<u64>,
    /// Messages sent (for `POLYPROF_TIMING`).
    steps: u64,
    deps: u64,
}

impl Pipe {
    /// `[tag | coords << 4 | accesses << 20 | registers << 36, context, pc, coords..,
    /// (address, size << 1 | write).., (register, value)..]`
    fn step(&mut self, s: &tracer::Step<'_>) {
        let i = s.insn;
        self.steps += 1;
        let max = 3 + s.coords.len() + 2 * (i.mem.len() + i.regs.len());
        message(&mut self.buf, max, |w| {
            w.put(
                MSG_STEP
                    | field(s.coords.len()) << 4
                    | field(i.mem.len()) << 20
                    | field(i.regs.len()) << 36,
            );
            w.put(s.context as u64);
            w.put(i.pc);
            w.put_all(s.coords);
            for m in &i.mem {
                w.put(m.addr);
                w.put(u64::from(m.size) << 1 | u64::from(m.kind == AccessKind::Write));
            }
            for r in &i.regs {
                w.put(r.reg as u64);
                w.put(r.value);
            }
        });
        // The dependences that follow are mostly this instance's: they leave it out.
        self.last = Some(Stmt {
            context: s.context,
            pc: i.pc,
        });
        self.last_coords.clear();
        push_all(&mut self.last_coords, s.coords);
        self.maybe_send();
    }

    /// `[tag | consumer coords << 4 | producer coords << 20 | kind << 36 | through << 40 |
    /// flags << 44, (consumer context, consumer pc)?, producer context, producer pc, location,
    /// (consumer coords..)?, (producer coords..)?]`. Three dependences come per instruction
    /// on average, most of them of the instance just stepped and many within one iteration:
    /// [`DEP_SAME_CONSUMER`] leaves out the consumer (the last step's statement and
    /// coordinates), [`DEP_SAME_COORDS`] the producer's coordinates (the consumer's).
    fn dep(&mut self, d: &tracer::Dep<'_>) {
        self.deps += 1;
        let same_consumer =
            self.last == Some(d.consumer) && same(d.consumer_coords, &self.last_coords);
        let same_coords = same(d.producer_coords, d.consumer_coords);
        let max = 6 + d.consumer_coords.len() + d.producer_coords.len();
        message(&mut self.buf, max, |w| {
            w.put(
                MSG_DEP
                    | field(d.consumer_coords.len()) << 4
                    | field(d.producer_coords.len()) << 20
                    | (d.kind as u64) << 36
                    | (d.through as u64) << 40
                    | if same_consumer { DEP_SAME_CONSUMER } else { 0 }
                    | if same_coords { DEP_SAME_COORDS } else { 0 },
            );
            if !same_consumer {
                w.put(d.consumer.context as u64);
                w.put(d.consumer.pc);
            }
            w.put(d.producer.context as u64);
            w.put(d.producer.pc);
            w.put(d.location);
            if !same_consumer {
                w.put_all(d.consumer_coords);
            }
            if !same_coords {
                w.put_all(d.producer_coords);
            }
        });
        self.maybe_send();
    }

    #[inline]
    fn maybe_send(&mut self) {
        if self.buf.len() >= PIPE_WORDS {
            self.send();
        }
    }

    fn send(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let spare = self
            .back
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(PIPE_WORDS + 64));
        let full = std::mem::replace(&mut self.buf, spare);
        self.buf.clear();
        if let Some(tx) = &self.tx {
            if tx.send(full).is_err() {
                // The folding thread is gone (it panicked): its join reports it.
                self.tx = None;
            }
        }
    }

    /// Sends the rest and closes the channel.
    fn close(&mut self) {
        self.send();
        self.tx = None;
    }
}

/// Where a message's words go: the buffer's spare capacity. (Pushing them one by one reloads
/// the vector's length and capacity after every store, which might have changed them.)
struct Words<'b> {
    s: &'b mut [std::mem::MaybeUninit<u64>],
    n: usize,
}

impl Words<'_> {
    #[inline(always)]
    fn put(&mut self, w: u64) {
        self.s[self.n].write(w);
        self.n += 1;
    }

    #[inline(always)]
    fn put_all(&mut self, words: &[u64]) {
        for &w in words {
            self.put(w);
        }
    }
}

/// Appends a message of at most `max` words, written by `f`, to `b`.
#[inline(always)]
fn message(b: &mut Vec<u64>, max: usize, f: impl FnOnce(&mut Words<'_>)) {
    b.reserve(max);
    let len = b.len();
    let mut w = Words {
        s: b.spare_capacity_mut(),
        n: 0,
    };
    f(&mut w);
    let n = w.n;
    // SAFETY: `f` initialised the first `n` words of the spare capacity (`put` writes them in
    // order, and panics rather than write past the capacity).
    unsafe { b.set_len(len + n) };
}

/// The same words (coordinates), compared without a call to `memcmp`.
#[inline(always)]
fn same(a: &[u64], b: &[u64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Appends a few words (coordinates) without a call to `memcpy`.
#[inline(always)]
fn push_all(b: &mut Vec<u64>, words: &[u64]) {
    for &w in words {
        b.push(w);
    }
}

/// The last step the folding side replayed: the consumer of the dependences that leave it out.
#[derive(Default)]
struct LastStep {
    stmt: Option<Stmt>,
    coords: Vec<u64>,
}

/// CPU time of the calling thread so far (for `POLYPROF_TIMING`; 0 where Linux's schedstat is
/// missing): on a loaded machine a thread's wall time says little.
fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 * 1e-9)
}

/// The folding side: replays the messages of one buffer into `c`.
fn unpipe(buf: &[u64], insn: &mut ptrace_runner::Insn, last: &mut LastStep, c: &mut Collect<'_>) {
    let mut k = 0;
    while k < buf.len() {
        let head = buf[k];
        let n1 = (head >> 4 & FIELD) as usize;
        let n2 = (head >> 20 & FIELD) as usize;
        if head & 0xf == MSG_STEP {
            let n3 = (head >> 36 & FIELD) as usize;
            let context = buf[k + 1] as NodeId;
            insn.clear();
            insn.pc = buf[k + 2];
            let coords = &buf[k + 3..k + 3 + n1];
            let mut j = k + 3 + n1;
            for _ in 0..n2 {
                let (addr, sk) = (buf[j], buf[j + 1]);
                insn.mem.push(ptrace_runner::MemAccess {
                    addr,
                    size: (sk >> 1) as u32,
                    kind: if sk & 1 == 1 {
                        AccessKind::Write
                    } else {
                        AccessKind::Read
                    },
                });
                j += 2;
            }
            for _ in 0..n3 {
                let reg = iced_x86::Register::try_from(buf[j] as usize)
                    .unwrap_or(iced_x86::Register::None);
                insn.regs.push(ptrace_runner::RegWrite {
                    reg,
                    value: buf[j + 1],
                });
                j += 2;
            }
            last.stmt = Some(Stmt {
                context,
                pc: insn.pc,
            });
            last.coords.clear();
            push_all(&mut last.coords, coords);
            c.step(&tracer::Step {
                insn,
                context,
                coords,
            });
            k = j;
        } else {
            let kind = match head >> 36 & 0xf {
                0 => DepKind::Flow,
                1 => DepKind::Anti,
                _ => DepKind::Output,
            };
            let through = if head >> 40 & 0xf == 0 {
                Through::Register
            } else {
                Through::Memory
            };
            let stmt = |i: usize| Stmt {
                context: buf[i] as NodeId,
                pc: buf[i + 1],
            };
            let mut j = k + 1;
            // The flag decides the layout; the tracing side sets it only after a step.
            let consumer = if head & DEP_SAME_CONSUMER != 0 {
                last.stmt.unwrap_or(Stmt { context: 0, pc: 0 })
            } else {
                j += 2;
                stmt(k + 1)
            };
            let producer = stmt(j);
            let location = buf[j + 2];
            j += 3;
            let consumer_coords = if head & DEP_SAME_CONSUMER != 0 {
                &last.coords[..]
            } else {
                j += n1;
                &buf[j - n1..j]
            };
            let producer_coords = if head & DEP_SAME_COORDS != 0 {
                consumer_coords
            } else {
                j += n2;
                &buf[j - n2..j]
            };
            c.dep(&tracer::Dep {
                kind,
                through,
                consumer,
                producer,
                location,
                consumer_coords,
                producer_coords,
            });
            k = j;
        }
    }
}

struct InsnStream {
    folder: StreamFolder,
    first: u64,
    naddr: usize,
    nval: usize,
    sizes: Vec<u32>,
    writes: Vec<bool>,
    /// Bit k: register write k is of a 32-bit form, whose value is folded sign-extended (a
    /// counter gcc runs down to -1 in `r11d` is affine only so).
    narrow: u64,
    last: Vec<u64>,
    /// The dependence streams this statement consumes: (producer, kind, through, slot, index
    /// in `Collect::deps`). A handful each, searched before the hash index.
    consumes: Vec<(Stmt, DepKind, Through, u8, u32)>,
}

struct DepStream {
    folder: StreamFolder,
    last: Vec<u64>,
    /// Some consumer instance had several producer instances of the same statement.
    multi: bool,
    /// The first instance's location (memory address, or register-shadow offset), and
    /// whether every instance had it.
    location: u64,
    fixed: bool,
}

/// Consumer, producer, kind, through, and the slot: the rank of the producer instance among
/// those of the same statement that one consumer instance depends on.
type DepKey = (Stmt, Stmt, DepKind, Through, u8);

/// Producer instances of one statement kept per consumer instance (a 32-byte load of four
/// values written by four iterations needs four); past that the relation is marked inexact.
const MAX_SLOTS: u8 = 8;

/// Streams by key, looked up several times per traced instruction. The folders live apart from
/// the index so that the index stays small enough for the cache (a folder is hundreds of
/// bytes; inline in the table, every probe would touch a new cache line).
struct Streams<K, V> {
    index: HashMap<K, u32>,
    items: Vec<(K, V)>,
}

impl<K: std::hash::Hash + Eq + Copy, V> Streams<K, V> {
    fn new() -> Self {
        Streams {
            index: HashMap::default(),
            items: Vec::new(),
        }
    }

    #[inline]
    fn index_of(&mut self, k: K, new: impl FnOnce() -> V) -> u32 {
        let items = &mut self.items;
        *self.index.entry(k).or_insert_with(|| {
            items.push((k, new()));
            (items.len() - 1) as u32
        })
    }

    fn len(&self) -> usize {
        self.items.len()
    }
}

struct Collect<'o> {
    opts: &'o FoldOptions,
    /// The code the first pass saw, to decode an instruction when its stream starts.
    code: &'o Code,
    insns: Streams<(NodeId, u64), InsnStream>,
    deps: Streams<DepKey, DepStream>,
    /// The index in `insns` of the instruction being processed (its dependences follow it).
    current: Option<u32>,
    /// Where in the current instruction's `consumes` its next dependence is looked up first.
    cursor: usize,
    clock: u64,
    point: Vec<i64>,
    label: Vec<i64>,
}

fn lex_gt(a: &[u64], b: &[u64]) -> bool {
    a.len() != b.len() || a > b
}

impl Collect<'_> {
    fn step(&mut self, s: &tracer::Step<'_>) {
        let insn = s.insn;
        // The index of this instruction, the clock of the schedule tree's `first` and `last`.
        let clock = self.clock;
        self.clock += 1;
        let (opts, code) = (self.opts, self.code);
        let i = self.insns.index_of((s.context, insn.pc), || {
            let naddr = insn.mem.len();
            let nval = insn.regs.len();
            InsnStream {
                folder: StreamFolder::new(s.coords.len(), naddr + nval, opts),
                first: clock,
                naddr,
                nval,
                sizes: insn.mem.iter().map(|m| m.size).collect(),
                writes: insn
                    .mem
                    .iter()
                    .map(|m| m.kind == AccessKind::Write)
                    .collect(),
                narrow: narrow_writes(code, insn),
                last: Vec::new(),
                consumes: Vec::new(),
            }
        });
        self.current = Some(i);
        self.cursor = 0;
        let st = &mut self.insns.items[i as usize].1;
        if !st.last.is_empty() && !lex_gt(s.coords, &st.last) {
            return;
        }
        st.last.clear();
        push_all(&mut st.last, s.coords);
        self.point.clear();
        self.point.extend(s.coords.iter().map(|&c| c as i64));
        self.label.clear();
        for k in 0..st.naddr {
            self.label
                .push(insn.mem.get(k).map_or(0, |m| m.addr as i64));
        }
        for k in 0..st.nval {
            let v = insn.regs.get(k).map_or(0, |r| r.value);
            self.label.push(if k < 64 && st.narrow >> k & 1 == 1 {
                i64::from(v as u32 as i32)
            } else {
                v as i64
            });
        }
        st.folder.push(&self.point, &self.label);
    }

    /// One dynamic dependence. A consumer instance with several producer instances of the
    /// same statement (a 16-byte load of two values written by two iterations) sends the
    /// second to a second stream (slot 1), and so on: each slot folds on its own, and none of
    /// the pairs is lost.
    fn dep(&mut self, d: &tracer::Dep<'_>) {
        for slot in 0..MAX_SLOTS {
            let i = self.stream_of(d, slot);
            let st = &mut self.deps.items[i as usize].1;
            st.fixed &= st.location == d.location;
            if !st.last.is_empty() && !lex_gt(d.consumer_coords, &st.last) {
                if st.last.as_slice() == d.consumer_coords && slot + 1 < MAX_SLOTS {
                    continue;
                }
                st.multi = true;
                return;
            }
            st.last.clear();
            push_all(&mut st.last, d.consumer_coords);
            self.point.clear();
            self.point
                .extend(d.consumer_coords.iter().map(|&c| c as i64));
            self.label.clear();
            self.label
                .extend(d.producer_coords.iter().map(|&c| c as i64));
            st.folder.push(&self.point, &self.label);
            return;
        }
    }

    /// The index of the stream of `d`'s key in `slot`.
    fn stream_of(&mut self, d: &tracer::Dep<'_>, slot: u8) -> u32 {
        let opts = self.opts;
        let new = || DepStream {
            folder: StreamFolder::new(d.consumer_coords.len(), d.producer_coords.len(), opts),
            last: Vec::new(),
            multi: false,
            location: d.location,
            fixed: true,
        };
        let key = (d.consumer, d.producer, d.kind, d.through, slot);
        let consumer = (d.consumer.context, d.consumer.pc);
        let current = self.current.map(|i| &mut self.insns.items[i as usize]);
        match current {
            Some((at, st)) if *at == consumer => {
                let consumes = &mut st.consumes;
                let want = (d.producer, d.kind, d.through, slot);
                let is = |c: &(Stmt, DepKind, Through, u8, u32)| (c.0, c.1, c.2, c.3) == want;
                // An instance's dependences come in the order the last one's came: try the
                // entry after the last one matched before searching.
                if let Some(c) = consumes.get(self.cursor).filter(|c| is(c)) {
                    self.cursor += 1;
                    return c.4;
                }
                match consumes.iter().position(is) {
                    Some(p) => {
                        self.cursor = p + 1;
                        consumes[p].4
                    }
                    None => {
                        let i = self.deps.index_of(key, new);
                        consumes.push((d.producer, d.kind, d.through, slot, i));
                        self.cursor = consumes.len();
                        i
                    }
                }
            }
            _ => self.deps.index_of(key, new),
        }
    }
}

/// What the first pass keeps besides the structure: instruction bytes by address, and heap
/// blocks with the variables that receive them, to name statements and arrays.
#[derive(Default)]
struct Code {
    bytes: HashMap<u64, Vec<u8>>,
    heap: HeapBlocks,
}

impl EventSink for Code {
    fn event(&mut self, ev: &Event<'_>) -> std::io::Result<()> {
        if let Event::Code { addr, bytes } = *ev {
            self.bytes.insert(addr, bytes.to_vec());
        }
        self.heap.event(ev, &self.bytes);
        Ok(())
    }
}

const GPR_NAMES: [&str; 16] = [
    "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13",
    "r14", "r15",
];

/// A register of the register shadow, by its offset there.
fn register_name(offset: u64) -> String {
    match offset {
        o if o < 128 => GPR_NAMES[(o / 8) as usize].to_string(),
        o => format!("xmm{}", (o - 128) / 32),
    }
}

struct Folded2 {
    insns: HashMap<(NodeId, u64), (InsnStream2, Folded)>,
    /// Instructions at either end of some dependence.
    dep_ends: rustc_hash::FxHashSet<(NodeId, u64)>,
    /// (key, folded stream, several producers per instance, first location, fixed location)
    deps: Vec<(DepKey, Folded, bool, u64, bool)>,
}

struct InsnStream2 {
    first: u64,
    naddr: usize,
    sizes: Vec<u32>,
    writes: Vec<bool>,
}

/// A scalar evolution: the produced values fold into one affine function of the iteration
/// vector, and whatever memory is read sits at one fixed address (a scalar kept in memory, as
/// loop counters are at -O0). Loads from addresses that move with the loops read arrays: their
/// values are data, even when they happen to be affine on this input.
fn is_scev(meta: &InsnStream2, f: &Folded, nval: usize, insn: &iced_x86::Instruction) -> bool {
    if f.points == 0 || f.rejected != 0 {
        return false;
    }
    if nval == 0 {
        // `add dword ptr [rbp-8], 1`, `mov dword ptr [rbp-12], 0`: a counter kept in memory,
        // stepped by or set to a constant.
        let immediate = insn.op_count() == 1 || insn.op1_kind() != iced_x86::OpKind::Register;
        let steps = matches!(
            insn.mnemonic(),
            Mnemonic::Add | Mnemonic::Sub | Mnemonic::Inc | Mnemonic::Dec | Mnemonic::Mov
        ) && immediate;
        return steps && meta.naddr > 0 && (0..meta.naddr).all(|j| fixed_address(f, j));
    }
    // (A 32-bit destination's values were folded sign-extended: see `narrow_writes`.)
    let values = |p: &folder::Piece| p.labels[meta.naddr..].to_vec();
    let Some(first) = f.pieces.first().map(values) else {
        return false;
    };
    if !first.iter().all(Label::is_affine) || !f.pieces.iter().all(|p| values(p) == first) {
        return false;
    }
    (0..meta.naddr).all(|j| meta.writes.get(j).copied().unwrap_or(false) || fixed_address(f, j))
}

/// Label `j` is the same constant on every point (an access to one fixed address).
fn fixed_address(f: &Folded, j: usize) -> bool {
    let l0 = f.pieces.first().and_then(|p| p.labels.get(j));
    matches!(l0, Some(Label::Affine { coeffs, .. }) if coeffs.iter().all(|&c| c == 0))
        && f.pieces.iter().all(|p| p.labels.get(j) == l0)
}

/// The instruction moves data: it writes memory or a register other than the flags, the
/// instruction pointer and the stack pointer.
fn writes_data(insn: &iced_x86::Instruction, info: &mut iced_x86::InstructionInfoFactory) -> bool {
    use iced_x86::{OpAccess, Register};
    info.info(insn).used_registers().iter().any(|r| {
        matches!(
            r.access(),
            OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
        ) && !matches!(r.register().full_register(), Register::RSP | Register::RIP)
    })
}

/// The full name of a register as dependences name it (`rax` for `eax`, `xmm0` for `ymm0`).
fn full_name(r: iced_x86::Register) -> Option<String> {
    let full = r.full_register();
    if full.is_gpr64() {
        let n = full.number();
        return GPR_NAMES.get(n).map(|s| s.to_string());
    }
    if r.is_xmm() || r.is_ymm() || r.is_zmm() {
        return Some(format!("xmm{}", full.number()));
    }
    None
}

/// What an instruction computes, when it may be a link of a reduction: a copy, or
/// `dst = acc op other` with an associative operator. Each operand that may carry the
/// accumulated value in is named; an instruction reading one register twice (`add eax, eax`,
/// `xor eax, eax`) is no link: its result is not `acc op other`.
fn update_of(insn: &iced_x86::Instruction) -> Option<Update> {
    let m = insn.mnemonic();
    let copy = is_copy(m);
    let op = operator_of(m);
    if !copy && op.is_none() {
        return None;
    }
    let (acc_registers, acc_memory) = if m == Mnemonic::Lea {
        (lea_addends(insn)?, false)
    } else {
        let commutative = op.is_none_or(|(_, c)| c);
        accumulators(insn, &combined_operands(insn, copy)?, commutative)?
    };
    Some(Update {
        op: op.map(|(o, _)| o),
        acc_registers,
        acc_memory,
    })
}

/// The operands whose values an arithmetic instruction combines (or a copy copies).
fn combined_operands(insn: &iced_x86::Instruction, copy: bool) -> Option<Vec<u32>> {
    let m = insn.mnemonic();
    let count = insn.op_count();
    Some(if copy {
        vec![1]
    } else if count == 1 {
        // `inc`, `dec`; the one-operand `imul` writes rdx:rax, no link.
        if m == Mnemonic::Imul {
            return None;
        }
        vec![0]
    } else if count == 3 && m == Mnemonic::Imul {
        // `imul r, r/m, imm`: the product of the second operand and a constant.
        vec![1]
    } else if count == 3 {
        // VEX forms: `vaddsd xmm0, xmm1, xmm2`.
        vec![1, 2]
    } else {
        vec![0, 1]
    })
}

/// `lea d, [b + i*1 + c]`: the addends are the base and an unscaled index.
fn lea_addends(insn: &iced_x86::Instruction) -> Option<Vec<String>> {
    let base = full_name(insn.memory_base());
    let index = (insn.memory_index_scale() == 1)
        .then(|| full_name(insn.memory_index()))
        .flatten();
    if (base.is_some() && base == index) || insn.memory_base() == iced_x86::Register::RIP {
        return None;
    }
    let addends: Vec<String> = base.into_iter().chain(index).collect();
    (!addends.is_empty()).then_some(addends)
}

/// The registers among `sources` that may hold the accumulator (the first operand only, when
/// the operation does not commute), and whether a memory operand may; `None` when a register
/// is combined with itself.
fn accumulators(
    insn: &iced_x86::Instruction,
    sources: &[u32],
    commutative: bool,
) -> Option<(Vec<String>, bool)> {
    let mut registers: Vec<String> = Vec::new();
    let mut memory = false;
    let mut seen: Vec<String> = Vec::new();
    for (k, &o) in sources.iter().enumerate() {
        let may_acc = commutative || k == 0;
        match insn.op_kind(o) {
            iced_x86::OpKind::Register => {
                let r = full_name(insn.op_register(o))?;
                if seen.contains(&r) {
                    return None;
                }
                seen.push(r.clone());
                if may_acc {
                    registers.push(r);
                }
            }
            iced_x86::OpKind::Memory => memory |= may_acc,
            _ => {}
        }
    }
    Some((registers, memory))
}

/// Moves between registers and memory that copy a value unchanged (or widened).
fn is_copy(m: Mnemonic) -> bool {
    use Mnemonic as M;
    matches!(
        m,
        M::Mov
            | M::Movsd
            | M::Movss
            | M::Movaps
            | M::Movapd
            | M::Movups
            | M::Movupd
            | M::Movdqa
            | M::Movdqu
            | M::Movq
            | M::Movd
            | M::Movzx
            | M::Movsx
            | M::Movsxd
            | M::Vmovsd
            | M::Vmovss
            | M::Vmovaps
            | M::Vmovapd
            | M::Vmovups
            | M::Vmovupd
            | M::Vmovdqa
            | M::Vmovdqu
            | M::Vmovq
            | M::Vmovd
    )
}

/// The operator an instruction applies, and whether its operands commute.
fn operator_of(m: Mnemonic) -> Option<(ReduceOp, bool)> {
    use Mnemonic as M;
    match m {
        M::Add
        | M::Inc
        | M::Lea
        | M::Addsd
        | M::Addss
        | M::Addpd
        | M::Addps
        | M::Paddb
        | M::Paddw
        | M::Paddd
        | M::Paddq
        | M::Vaddsd
        | M::Vaddss
        | M::Vaddpd
        | M::Vaddps
        | M::Vpaddb
        | M::Vpaddw
        | M::Vpaddd
        | M::Vpaddq => Some((ReduceOp::Add, true)),
        M::Sub
        | M::Dec
        | M::Subsd
        | M::Subss
        | M::Subpd
        | M::Subps
        | M::Psubb
        | M::Psubw
        | M::Psubd
        | M::Psubq
        | M::Vsubsd
        | M::Vsubss
        | M::Vsubpd
        | M::Vsubps
        | M::Vpsubb
        | M::Vpsubw
        | M::Vpsubd
        | M::Vpsubq => Some((ReduceOp::Add, false)),
        M::Imul
        | M::Mulsd
        | M::Mulss
        | M::Mulpd
        | M::Mulps
        | M::Pmulld
        | M::Vmulsd
        | M::Vmulss
        | M::Vmulpd
        | M::Vmulps
        | M::Vpmulld => Some((ReduceOp::Mul, true)),
        M::Minsd
        | M::Minss
        | M::Minpd
        | M::Minps
        | M::Pminsb
        | M::Pminsw
        | M::Pminsd
        | M::Pminub
        | M::Pminuw
        | M::Pminud
        | M::Vminsd
        | M::Vminss
        | M::Vminpd
        | M::Vminps
        | M::Vpminsd
        | M::Vpminud => Some((ReduceOp::Min, true)),
        M::Maxsd
        | M::Maxss
        | M::Maxpd
        | M::Maxps
        | M::Pmaxsb
        | M::Pmaxsw
        | M::Pmaxsd
        | M::Pmaxub
        | M::Pmaxuw
        | M::Pmaxud
        | M::Vmaxsd
        | M::Vmaxss
        | M::Vmaxpd
        | M::Vmaxps
        | M::Vpmaxsd
        | M::Vpmaxud => Some((ReduceOp::Max, true)),
        M::And | M::Pand | M::Andps | M::Andpd | M::Vpand | M::Vandps | M::Vandpd => {
            Some((ReduceOp::And, true))
        }
        M::Or | M::Por | M::Orps | M::Orpd | M::Vpor | M::Vorps | M::Vorpd => {
            Some((ReduceOp::Or, true))
        }
        M::Xor | M::Pxor | M::Xorps | M::Xorpd | M::Vpxor | M::Vxorps | M::Vxorpd => {
            Some((ReduceOp::Xor, true))
        }
        _ => None,
    }
}

fn fp_op(m: Mnemonic) -> bool {
    let name = format!("{m:?}");
    let arith = [
        "Add", "Sub", "Mul", "Div", "Sqrt", "Max", "Min", "Fma", "Vfmadd", "Vfmsub",
    ];
    (name.ends_with("sd") || name.ends_with("ss") || name.ends_with("pd") || name.ends_with("ps"))
        && arith
            .iter()
            .any(|a| name.starts_with(a) || name.starts_with(&format!("V{}", a.to_lowercase())))
}

/// The name of the function a direct call goes to (`printf`), when the binary names it.
fn callee_name(insn: &iced_x86::Instruction, bin: Loaded<'_>) -> Option<String> {
    if insn.op0_kind() != iced_x86::OpKind::NearBranch64 {
        return None;
    }
    let target = insn.near_branch_target();
    Some(match bin.import_for_plt_stub(target) {
        Some(name) => name.split('@').next().unwrap_or(name).to_string(),
        None => bin.describe(target),
    })
}

/// Names the memory at `addr` for a person: a global by symbol, a heap block by allocation
/// site, a stack slot by function.
fn name_memory(addr: u64, bin: Loaded<'_>, code: &Code, function: &str) -> String {
    name_memory_at(addr, bin, code, function, true)
}

/// `` `s` `` or `` `a`+16 ``, as globals are named.
fn with_offset(var: &str, off: u64) -> String {
    if off == 0 {
        format!("`{var}`")
    } else {
        format!("`{var}`+{off}")
    }
}

/// The instruction at run-time address `pc`, if it ran.
/// Which of `insn`'s register writes (bit k for the k-th, of the first 64) write a 32-bit
/// register: the destination operand's (`ecx`, which the engine reports as the whole `rcx`;
/// iced lists that write as `rcx`'s).
fn narrow_writes(code: &Code, insn: &ptrace_runner::Insn) -> u64 {
    let narrow = insn_at(code, insn.pc).and_then(|d| {
        (d.op_count() > 0 && d.op0_kind() == iced_x86::OpKind::Register)
            .then(|| d.op0_register())
            .filter(|r| r.is_gpr32())
    });
    let Some(n) = narrow else {
        return 0;
    };
    insn.regs
        .iter()
        .take(64)
        .enumerate()
        .filter(|(_, r)| n.full_register() == r.reg)
        .fold(0, |bits, (k, _)| bits | 1 << k)
}

fn insn_at(code: &Code, pc: u64) -> Option<iced_x86::Instruction> {
    let bytes = code.bytes.get(&pc)?;
    Some(Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE).decode())
}

/// The source variable debug information places in register `reg` where the consumer `cons`
/// reads it, or just after the producer `prod` writes it (a location starts after the
/// instruction that writes it).
fn register_variable(
    bin: Loaded<'_>,
    code: &Code,
    reg: &str,
    cons: u64,
    prod: u64,
) -> Option<symbols::Variable> {
    let number = symbols::dwarf_register(reg)?;
    let after = insn_at(code, prod).map(|i| i.next_ip());
    [Some(cons), after]
        .into_iter()
        .flatten()
        .find_map(|pc| bin.variable_in_register(pc, number))
}

/// The frame slot the instruction at `pc` reaches through its memory operand `[rbp + disp]`
/// or `[rsp + disp]`: (DWARF number of the base register, displacement). An indexed operand
/// gives the displacement, where the array it indexes starts.
fn frame_operand(code: &Code, pc: u64) -> Option<(u16, i64)> {
    use iced_x86::{OpKind, Register};
    let insn = insn_at(code, pc)?;
    if !(0..insn.op_count()).any(|o| insn.op_kind(o) == OpKind::Memory) {
        return None;
    }
    let base = match insn.memory_base() {
        Register::RBP => symbols::regs::RBP,
        Register::RSP => symbols::regs::RSP,
        _ => return None,
    };
    Some((base, insn.memory_displacement64() as i64))
}

/// The stack variable, and the offset inside it, that one of the instructions at `pcs`
/// reaches through its memory operand (see [`frame_operand`]): the frame a variable lives in
/// is known statically, from the call frame information at the instruction.
fn stack_variable(bin: Loaded<'_>, code: &Code, pcs: &[u64]) -> Option<symbols::Variable> {
    pcs.iter().find_map(|&pc| {
        let (base, disp) = frame_operand(code, pc)?;
        bin.stack_variable(pc, base, disp)
    })
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

/// The source variable that holds the start of heap block `block`, and the call depth it
/// does so at: the holder in the shallowest frame that debug information names (see
/// [`crate::heap`]).
fn heap_variable(bin: Loaded<'_>, code: &Code, block: &Block) -> Option<(String, u32)> {
    let mut holders = block.holders.clone();
    // Stable: among holders of one frame, the first.
    holders.sort_by_key(|h| h.depth);
    holders.iter().find_map(|h| {
        let mut at = std::iter::once(h.pc).chain(h.at.iter().copied().take_while(|&a| a != 0));
        let var = match h.place {
            Place::Memory { addr } if addr >= STACK_START => {
                // The slot the filling instruction reached, named where a location range
                // covers it (the stack pointer does not move between calls at -O2).
                let (base, disp) = frame_operand(code, h.pc)?;
                at.find_map(|a| bin.stack_variable(a, base, disp))
                    .filter(|v| v.offset == 0)?
                    .name
            }
            Place::Memory { addr } => match bin.global_variable(addr) {
                Some(v) => (v.offset == 0).then_some(v.name)?,
                None => {
                    let (d, off) = bin.data_at(addr)?;
                    (off == 0).then(|| d.name.clone())?
                }
            },
            Place::Register { reg } => {
                let number = symbols::dwarf_register(GPR_NAMES[usize::from(reg)])?;
                at.skip(1)
                    .find_map(|a| bin.variable_in_register(a, number))?
                    .name
            }
        };
        Some((var, h.depth))
    })
}

/// A local array a pointer reaches, found from the instruction that computed its address.
struct FrameArray {
    name: String,
    /// Where in it the address is.
    offset: u64,
    size: u64,
    /// The function whose frame holds it (its declaring function, inlined or not).
    function: Option<String>,
}

/// The local variable holding stack address `addr`, from the `lea r, [rsp/rbp + disp]` (or
/// `mov r, rsp`) that computed a pointer to it (a loop that walks a local array through a
/// pointer register, a callee given the array): that instruction names a variable, and its
/// last value says where that variable was.
fn stack_array_via_lea(bin: Loaded<'_>, code: &Code, addr: u64) -> Option<FrameArray> {
    let mut found: Vec<(u64, FrameArray)> = code
        .heap
        .stack_leas
        .iter()
        .filter(|&(_, &value)| value <= addr)
        .filter_map(|(&pc, &value)| {
            let (base, disp) = crate::heap::frame_address(&insn_at(code, pc)?)?;
            let base = match base {
                iced_x86::Register::RBP => symbols::regs::RBP,
                _ => symbols::regs::RSP,
            };
            let v = bin.stack_variable(pc, base, disp)?;
            let start = value.checked_sub(v.offset)?;
            let offset = addr - start;
            let size = v.size?;
            (offset < size).then_some((
                start,
                FrameArray {
                    name: v.name,
                    offset,
                    size,
                    function: v.function,
                },
            ))
        })
        .collect();
    // The innermost: the variable starting closest below the address.
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    found.into_iter().next().map(|(_, a)| a)
}

/// How many elements an OpenMP clause's array section spans (`y[0:len]`) for the array holding
/// `addr`, when the code at `pc` reaches it through a pointer: a reduction on a pointer must
/// name a section. The innermost variable of the array's name visible at `pc` says, from debug
/// information, whether it is a pointer (an array parameter is one) and the size of what it
/// points to. Only for heap blocks and stack arrays reached through a `lea`, whose name is that
/// of a place holding their start: the pointer is taken to point there. `None` when that
/// variable is the array itself (a clause names it whole) or none is visible.
fn pointer_section(addr: u64, bin: Loaded<'_>, code: &Code, pc: u64) -> Option<u64> {
    let (name, bytes) = match code.heap.block(addr) {
        Some((_, block)) => (heap_variable(bin, code, block)?.0, block.size),
        None if addr >= STACK_START => {
            let a = stack_array_via_lea(bin, code, addr)?;
            (a.name, a.size)
        }
        None => return None,
    };
    let var = bin.locals_at(pc).into_iter().find(|v| v.name == name)?;
    let each = var.pointee_size.filter(|&p| p > 0)?;
    bytes.is_multiple_of(each).then(|| bytes / each)
}

/// The array or block holding `addr`, without the offset inside it.
fn name_array(addr: u64, bin: Loaded<'_>, code: &Code, function: &str) -> String {
    name_memory_at(addr, bin, code, function, false)
}

fn name_memory_at(
    addr: u64,
    bin: Loaded<'_>,
    code: &Code,
    function: &str,
    with_offset: bool,
) -> String {
    let loc = |pc: u64| bin.source_line(pc);
    if let Some((d, off)) = bin.data_at(addr) {
        return if off == 0 || !with_offset {
            format!("`{}`", d.name)
        } else {
            format!("`{}`+{off}", d.name)
        };
    }
    if let Some((start, block)) = code.heap.block(addr) {
        let off = addr - start;
        return match heap_variable(bin, code, block) {
            Some((var, depth)) => {
                let var = if with_offset {
                    self::with_offset(&var, off)
                } else {
                    format!("`{var}`")
                };
                format!(
                    "{var} (heap block allocated at {})",
                    loc(block.call_at(depth))
                )
            }
            None => {
                let what = format!("the heap block allocated at {}", loc(block.site));
                if off == 0 || !with_offset {
                    what
                } else {
                    format!("{what} (+{off})")
                }
            }
        };
    }
    if addr >= STACK_START {
        if let Some(a) = stack_array_via_lea(bin, code, addr) {
            // The frame the array is in, not the function reaching it through a pointer.
            let frame = a.function.as_deref().unwrap_or(function);
            return if with_offset {
                format!(
                    "{} (stack of {frame})",
                    self::with_offset(&a.name, a.offset)
                )
            } else {
                format!("`{}` (stack of {frame})", a.name)
            };
        }
        // An array's first access varies from one dependence to the next: name it by its
        // frame alone, so that all its dependences name one storage.
        return if with_offset {
            format!("a stack slot of {function} ({addr:#x})")
        } else {
            format!("a stack array of {function}")
        };
    }
    format!("memory at {addr:#x}")
}

/// The first pass over the events: the control structure, and the code bytes and heap blocks
/// that name statements and arrays. It can run while the program is traced (the consumer of
/// [`ptrace_runner::record::Recorder::spawn`]), so that only the second pass replays.
pub struct FirstPass {
    builder: tracer::StructureBuilder,
    code: Code,
}

impl FirstPass {
    /// A first pass over the events of executable `bin`.
    pub fn new(bin: Loaded<'_>) -> FirstPass {
        FirstPass {
            builder: tracer::StructureBuilder::new(tracer::function_entries(bin)),
            code: Code::default(),
        }
    }
}

impl EventSink for FirstPass {
    fn event(&mut self, ev: &Event<'_>) -> std::io::Result<()> {
        self.builder.event(ev)?;
        self.code.event(ev)
    }
}

/// Runs the whole back end on a recording.
pub fn profile(
    source: &(impl EventSource + ?Sized),
    bin: Loaded<'_>,
    opts: &PipelineOptions,
) -> Result<Profile, PipelineError> {
    profile_with(source, None, bin, opts, &mut |_| {})
}

/// [`profile`], after `first` when the first pass ran as the program was traced (else it
/// replays `source` for it), showing `on_dep` every dynamic dependence as the analysis finds
/// it (for a dump of them, without a pass of its own).
pub fn profile_with(
    source: &(impl EventSource + ?Sized),
    first: Option<FirstPass>,
    bin: Loaded<'_>,
    opts: &PipelineOptions,
    on_dep: &mut dyn FnMut(&tracer::Dep<'_>),
) -> Result<Profile, PipelineError> {
    let first = match first {
        Some(first) => first,
        None => {
            let mut first = FirstPass::new(bin);
            source
                .replay_into(&mut first)
                .map_err(tracer::Error::from)?;
            first
        }
    };
    let entries = tracer::function_entries(bin);
    let FirstPass { builder, code } = first;
    let (analysis, c) = second_pass(
        source,
        builder.finish(),
        &entries,
        &opts.fold,
        &code,
        on_dep,
    )?;
    let (folded, streams) = finish_folding(c);
    let naming = tracer::Naming::new(bin, &analysis.structure);
    let regions = build_regions(&analysis, &naming, &folded, &code, opts)?;
    Ok(Profile {
        analysis,
        regions,
        streams,
    })
}

/// The second pass: iteration vectors and dependences on this thread, their folding on
/// another (the two halves cost about the same), joined by a bounded channel of messages.
fn second_pass<'o>(
    source: &(impl EventSource + ?Sized),
    structure: tracer::Structure,
    entries: &[u64],
    fold: &'o FoldOptions,
    code: &'o Code,
    on_dep: &mut dyn FnMut(&tracer::Dep<'_>),
) -> Result<(tracer::Analysis, Collect<'o>), PipelineError> {
    let started = std::time::Instant::now();
    let cpu0 = thread_cpu_seconds();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u64>>(MESSAGES_IN_FLIGHT);
    let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u64>>();
    let (traced, c) = std::thread::scope(|scope| {
        let folding = std::thread::Builder::new()
            .name("polyprof-fold".into())
            .spawn_scoped(scope, || {
                let mut c = Collect {
                    opts: fold,
                    code,
                    insns: Streams::new(),
                    deps: Streams::new(),
                    current: None,
                    cursor: 0,
                    clock: 0,
                    point: Vec::new(),
                    label: Vec::new(),
                };
                let cpu0 = thread_cpu_seconds();
                let mut insn = ptrace_runner::Insn::default();
                let mut last = LastStep::default();
                for buf in rx {
                    unpipe(&buf, &mut insn, &mut last, &mut c);
                    // The tracing side reuses the buffer, unless it is done.
                    let _ = back_tx.send(buf);
                }
                (c, thread_cpu_seconds() - cpu0)
            });
        let mut pipe = Pipe {
            buf: Vec::with_capacity(PIPE_WORDS + 64),
            tx: Some(tx),
            back: back_rx,
            last: None,
            last_coords: Vec::new(),
            steps: 0,
            deps: 0,
        };
        let cell = std::cell::RefCell::new(&mut pipe);
        let traced = tracer::analyze_with_deps_on(
            source,
            structure,
            entries,
            DepOptions::default(),
            |s| cell.borrow_mut().step(s),
            |d| {
                on_dep(d);
                cell.borrow_mut().dep(d)
            },
        );
        pipe.close();
        let traced_at = started.elapsed();
        let cpu = thread_cpu_seconds() - cpu0;
        let c = match folding {
            Ok(h) => h.join().ok(),
            Err(_) => None,
        };
        if std::env::var_os("POLYPROF_TIMING").is_some() {
            eprintln!(
                "polyprof: second pass: {:.3} s ({:.3} s tracer side; CPU {:.3} s tracing, \
                 {:.3} s folding); {} steps, {} dependences",
                started.elapsed().as_secs_f64(),
                traced_at.as_secs_f64(),
                cpu,
                c.as_ref().map_or(0.0, |c| c.1),
                pipe.steps,
                pipe.deps
            );
        }
        (traced, c.map(|c| c.0))
    });
    let (analysis, _) = traced?;
    let c = c.ok_or_else(|| {
        PipelineError::Folding("the folding thread could not run or panicked".to_string())
    })?;
    Ok((analysis, c))
}

/// The folded streams of the second pass, and how many of each kind there were.
fn finish_folding(c: Collect<'_>) -> (Folded2, (usize, usize)) {
    let streams = (c.insns.len(), c.deps.len());
    let dep_ends = c
        .deps
        .items
        .iter()
        .flat_map(|((cons, prod, ..), _)| [(cons.context, cons.pc), (prod.context, prod.pc)])
        .collect();
    let folded = Folded2 {
        dep_ends,
        insns: c
            .insns
            .items
            .into_iter()
            .map(|(k, s)| {
                let meta = InsnStream2 {
                    first: s.first,
                    naddr: s.naddr,
                    sizes: s.sizes,
                    writes: s.writes,
                };
                let f = s.folder.finish();
                (k, (meta, f))
            })
            .collect(),
        deps: c
            .deps
            .items
            .into_iter()
            .map(|(k, s)| {
                let (multi, location, fixed) = (s.multi, s.location, s.fixed);
                (k, s.folder.finish(), multi, location, fixed)
            })
            .collect(),
    };
    (folded, streams)
}

/// The regions of the run: the hottest outermost loops, each built and analysed; then
/// consecutive nests that pass values from one to the other, scheduled together: the fusion
/// isl finds, when legal, goes to the first nest's region.
fn build_regions(
    analysis: &tracer::Analysis,
    naming: &tracer::Naming<'_>,
    folded: &Folded2,
    code: &Code,
    opts: &PipelineOptions,
) -> Result<Vec<RegionReport>, PipelineError> {
    let roots = select_regions(&analysis.tree, opts);
    let build = |i: usize, roots: &[NodeId]| {
        build_region(i, roots, &analysis.tree, naming, folded, code, opts)
    };
    let mut regions = roots
        .iter()
        .enumerate()
        // Once cancelled, the regions analysed so far are what is reported.
        .take_while(|_| !opts.feedback.cancelled())
        .map(|(i, &root)| build(i, &[root]))
        .collect::<Result<Vec<_>, _>>()?;
    for (a, b) in fusion_pairs(&analysis.tree, &roots, folded) {
        if opts.feedback.cancelled() {
            break;
        }
        let group = build(regions.len(), &[a, b])?;
        let fuse = group
            .feedback
            .suggestions
            .iter()
            .find(|s| s.kind == crate::SuggestionKind::Fuse);
        if std::env::var_os("POLYPROF_DEBUG_FUSION").is_some() {
            eprintln!(
                "fusion group {a}+{b}: {:?}\n{:?}\nwhy not: {:?}",
                group.feedback.schedule,
                group
                    .feedback
                    .suggestions
                    .iter()
                    .map(|s| s.kind)
                    .collect::<Vec<_>>(),
                group.feedback.why_not
            );
            for d in &group.input.dependences {
                eprintln!(
                    "  {} -> {} {:?} {:?} exact {} {}",
                    d.source,
                    d.sink,
                    d.kind,
                    d.storage,
                    d.exact,
                    d.relation.isl_text()
                );
            }
        }
        if let Some(fuse) = fuse {
            let mut fuse = fuse.clone();
            fuse.text = format!(
                "{} {}",
                fuse.text,
                passed_values(&group, a, b, &analysis.tree)
            );
            if let Some(r) = regions.iter_mut().find(|r| r.root == a) {
                r.feedback.suggestions.push(fuse);
                // Ranked among the region's own advice, not the group's.
                crate::gain::rate(&r.input, &mut r.feedback, &opts.feedback.gain);
            }
        }
    }
    Ok(regions)
}

/// Pairs of region roots that are consecutive loops of one parent (no other loop between them
/// in the order they first ran) where the first produces values the second reads.
fn fusion_pairs(tree: &ScheduleTree, roots: &[NodeId], folded: &Folded2) -> Vec<(NodeId, NodeId)> {
    let is_loop = |n: NodeId| matches!(tree.nodes[n].kind, NodeKind::Loop { .. });
    let mut pairs = Vec::new();
    for &a in roots {
        let Some(parent) = tree.nodes[a].parent else {
            continue;
        };
        // Nodes are numbered as first entered: the next loop child of the parent.
        let next =
            (a + 1..tree.nodes.len()).find(|&n| tree.nodes[n].parent == Some(parent) && is_loop(n));
        let Some(b) = next.filter(|b| roots.contains(b)) else {
            continue;
        };
        let feeds = folded.deps.iter().any(|((cons, prod, kind, _, _), ..)| {
            *kind == DepKind::Flow
                && tree.is_within(prod.context, a)
                && tree.is_within(cons.context, b)
        });
        if is_loop(a) && feeds {
            pairs.push((a, b));
        }
    }
    pairs
}

/// How much data the second nest of a fused pair reads from the first: "About 32768 bytes of
/// `tmp` pass from one nest to the other; fused, each iteration of the outer loop reads the
/// 1024 bytes it wrote, while they are still in cache."
fn passed_values(group: &RegionReport, a: NodeId, b: NodeId, tree: &ScheduleTree) -> String {
    let input = &group.input;
    let stmt_in = |name: &str, root: NodeId| {
        group
            .statements
            .iter()
            .find(|s| s.name == name)
            .is_some_and(|s| tree.is_within(s.context, root))
    };
    let mut arrays: BTreeSet<String> = BTreeSet::new();
    let mut bytes: u64 = 0;
    for d in &input.dependences {
        if d.kind != DepKind::Flow || !stmt_in(&d.source, a) || !stmt_in(&d.sink, b) {
            continue;
        }
        if let Storage::Array { name } | Storage::Scalar { name, .. } = &d.storage {
            arrays.insert(name.clone());
        }
        // The distinct elements the producer writes: its trips along the dimensions its
        // address moves with (a store in a reduction loop rewrites one element).
        if let Some(p) = input.statements.iter().find(|s| s.name == d.source) {
            for w in p.accesses.iter().filter(|x| x.write) {
                let elements: Option<u64> = w
                    .strides
                    .iter()
                    .zip(&p.loops)
                    .filter(|(st, _)| **st != Some(0))
                    .map(|(_, &l)| input.trips.get(l).copied().flatten())
                    .product();
                if let Some(n) = elements {
                    bytes = bytes.max(n * u64::from(w.size));
                }
            }
        }
    }
    let outer = input.statements.iter().find_map(|s| {
        let l = *s.loops.first()?;
        input.trips.get(l).copied().flatten()
    });
    let per = outer.filter(|&t| t > 0).map(|t| bytes / t);
    let what = if arrays.is_empty() {
        "values".to_string()
    } else {
        arrays.into_iter().collect::<Vec<_>>().join(", ")
    };
    match per {
        Some(per) => format!(
            "About {bytes} bytes of {what} pass from one nest to the other; fused, each iteration of the outer loop reads the {per} bytes it wrote, while they are still in cache."
        ),
        None => format!("About {bytes} bytes of {what} pass from one nest to the other."),
    }
}

/// Outermost loop (or recursion) nodes holding at least the threshold share, hottest first.
fn select_regions(tree: &ScheduleTree, opts: &PipelineOptions) -> Vec<NodeId> {
    let totals = tree.total_weights();
    let all = totals[ScheduleTree::ROOT].max(1) as f64;
    let is_loop = |n: NodeId| {
        matches!(
            tree.nodes[n].kind,
            NodeKind::Loop { .. } | NodeKind::Recursion { .. }
        )
    };
    let fat = |n: NodeId| 100.0 * totals[n] as f64 / all >= opts.region_threshold;
    let mut roots: Vec<NodeId> = (0..tree.nodes.len())
        .filter(|&n| is_loop(n) && fat(n))
        .filter(|&n| {
            let mut p = tree.nodes[n].parent;
            while let Some(q) = p {
                if is_loop(q) && fat(q) {
                    return false;
                }
                p = tree.nodes[q].parent;
            }
            true
        })
        .collect();
    roots.sort_by_key(|&n| std::cmp::Reverse(totals[n]));
    roots.truncate(opts.max_regions);
    roots
}

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
/// names; by name, the function each is in.
#[derive(Default)]
struct Statements {
    list: Vec<Statement>,
    reports: Vec<StatementReport>,
    names: HashMap<(NodeId, u64), String>,
    functions: HashMap<String, String>,
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
}

/// Builds region `index` (rooted at `roots`) from the folded trace, and analyses it.
fn build_region(
    index: usize,
    roots: &[NodeId],
    tree: &ScheduleTree,
    naming: &tracer::Naming<'_>,
    folded: &Folded2,
    code: &Code,
    opts: &PipelineOptions,
) -> Result<RegionReport, PipelineError> {
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
    let mut edges = scope.edges(&stmts, &loop_code);
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
    let input = Region {
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
    };
    // A region isl cannot schedule is still reported, with the reason.
    let feedback = analyze_region(&input, &opts.feedback).unwrap_or_else(|e| Feedback {
        why_not: Some(if opts.feedback.cancelled() {
            "not analysed: polyprof was interrupted during its analysis".to_string()
        } else {
            format!("the polyhedral analysis failed: {e}")
        }),
        ..Feedback::default()
    });
    Ok(RegionReport {
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
        feedback,
    })
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
                && (is_scev(meta, f, nval, &insn) || !(touches || writes_data(&insn, &mut info)))
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
            let function_name = path
                .iter()
                .rev()
                .find_map(|&n| match tree.nodes[n].kind {
                    NodeKind::Func { entry, .. } => Some(self.naming.function(entry)),
                    _ => None,
                })
                .unwrap_or_else(|| "?".to_string());
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
                accesses: self.accesses(meta, f, &function_name),
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
            out.functions.insert(name.clone(), function_name);
            out.names.insert(*key, name);
        }
        // Kelly positions: rank the static positions per loop level.
        normalize_positions(&mut out.list, &raw);
        out
    }

    /// The memory accesses of an instruction's folded stream `f`, with their strides from its
    /// biggest piece, in function `function` (for naming stack arrays).
    fn accesses(&self, meta: &InsnStream2, f: &Folded, function: &str) -> Vec<Access> {
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
                    array: first.map(|a| name_array(a, self.bin, self.code, function)),
                }
            })
            .collect()
    }

    /// The dependences between the region's statements, the values crossing its border, and
    /// the source variables its loops assign.
    fn edges(&self, stmts: &Statements, loop_code: &[LoopCode]) -> Edges {
        let bin = self.bin;
        let mut out = Edges::default();
        let mut sources = SourceText::default();
        for a in crate::scopes::assigned_in_source(bin.exe, loop_code, &mut sources) {
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
            v.loops.push(a.loop_id);
            v.lines.push(a.line);
        }
        for (key, f, multi, location, fixed) in &self.folded.deps {
            let (cons, prod, kind, through, _) = key;
            let sink = stmts.names.get(&(cons.context, cons.pc));
            let source = stmts.names.get(&(prod.context, prod.pc));
            let function = source
                .or(sink)
                .and_then(|n| stmts.functions.get(n))
                .map_or("the region", String::as_str);
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
            let relation = Polyhedra::map_of(f, sink, source);
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
            out.dependences.push(Dependence {
                source: source.clone(),
                sink: sink.clone(),
                kind: *kind,
                storage,
                relation,
                exact,
                equal_pairs: equal_pairs(f),
            });
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
        let (bin, code, function) = (self.bin, self.code, place.function);
        let location = place.location;
        let array = |addr: u64| Storage::Array {
            name: name_array(addr, bin, code, function),
        };
        let scalar = || Storage::Scalar {
            addr: location,
            name: name_memory(location, bin, code, function),
        };
        match through {
            Through::Register => {
                let (reg, var) = register.clone().unwrap_or_default();
                Storage::Register {
                    reg,
                    var: var.map(|v| v.name),
                }
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
                    None => array(location),
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
}

/// Sets each statement's positions to the rank of its first-execution times among the
/// statements sharing the same loops above each level.
fn normalize_positions(stmts: &mut [Statement], raw: &[Vec<Vec<u64>>]) {
    for k in 0..raw.iter().map(Vec::len).max().unwrap_or(0) {
        let mut groups: BTreeMap<Vec<usize>, BTreeSet<Vec<u64>>> = BTreeMap::new();
        for (s, r) in stmts.iter().zip(raw) {
            if let Some(p) = r.get(k) {
                groups
                    .entry(s.loops[..k.min(s.loops.len())].to_vec())
                    .or_default()
                    .insert(p.clone());
            }
        }
        for (s, r) in stmts.iter_mut().zip(raw) {
            let key = s.loops[..k.min(s.loops.len())].to_vec();
            let rank = match (r.get(k), groups.get(&key)) {
                (Some(p), Some(set)) => set.iter().position(|x| x == p).unwrap_or(0) as u32,
                _ => 0,
            };
            s.positions.push(rank);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Folds consumer → producer pairs over an 8 x 8 nest, the producer given by `f`.
    fn folded(f: impl Fn(i64, i64) -> Option<[i64; 2]>) -> Folded {
        let points: Vec<(Vec<i64>, Vec<i64>)> = (0..8)
            .flat_map(|i| (0..8).map(move |j| (i, j)))
            .filter_map(|(i, j)| f(i, j).map(|p| (vec![i, j], p.to_vec())))
            .collect();
        folder::fold_points(&points, &FoldOptions::default())
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
