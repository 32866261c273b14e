//! Heap blocks seen in the trace, and the places that receive their addresses, so that arrays
//! the program allocates are named by their source variable (`` `A` ``) rather than by an
//! address; and the stack addresses `lea` computes, which name a local array a loop reaches
//! through a pointer register.
//!
//! The first pass follows the allocators' calls (`malloc`, `calloc`, `realloc`,
//! `posix_memalign`, `aligned_alloc`, `memalign`, C++'s `operator new`) and, after each, where traced code puts the
//! block's start: a 64-bit store of a register holding it, or a register write of it. Each such
//! place is a *holder*, kept with the call depth it happened at. Naming, later and only for
//! the blocks a report mentions, asks debug information which variable each holder is, the
//! shallowest first: PolyBench's `A = polybench_alloc_data(...)` passes the block up through
//! `xmalloc`'s and `polybench_alloc_data`'s locals before `main`'s `A` receives it, and `A` is
//! the name the user knows.

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};
use ptrace_runner::{AccessKind, Event, Insn, MemAccess, TransferKind};
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;

/// Holders kept per block: the first ones are the allocation's own path; later ones are
/// pointer copies in loops.
const MAX_HOLDERS: usize = 16;

/// Addresses a holder is known at: the 1st, 2nd, 4th, ... 128th instruction of its function
/// run while it held the block (gcc may describe a register as the variable only some
/// instructions after it is filled: PolyBench's `B` at -O2, 30 bytes later).
pub(crate) const WATCHED: usize = 8;

/// Where a block's start was put.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Place {
    /// Memory at `addr` (a local, a global): stored there, or, for `posix_memalign`'s
    /// out-parameter, loaded from there.
    Memory { addr: u64 },
    /// General-purpose register `reg` (iced's number, 0 = rax ... 15 = r15).
    Register { reg: u8 },
}

/// Where traced code put a block's start: the instruction at `pc` did, at call depth `depth`.
/// `at`: addresses of that function executed while the place still held it, the first just
/// after `pc`, then ever further apart (0: none). Debug information's location ranges often start a little after the
/// instruction that fills the place (gcc starts the range of a value returned by one call at
/// the next call's last byte), so naming tries each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Holder {
    pub pc: u64,
    pub depth: u32,
    pub place: Place,
    pub at: [u64; WATCHED],
    /// Instructions of its function run since `pc` while it held the block.
    steps: u32,
}

/// One allocated block.
#[derive(Clone, Debug)]
pub(crate) struct Block {
    pub size: u64,
    /// The call instruction of the allocation.
    pub site: u64,
    /// Return addresses of the traced calls that led to the allocation, outermost first:
    /// `calls[d] - 1` is inside the call made at depth `d`.
    pub calls: Vec<u64>,
    /// In the order they happened.
    pub holders: Vec<Holder>,
    /// An address inside another block that this block's start was first loaded from: a
    /// container's element (a row of a C++ `vector<vector<double>>`, whose pointer g++ -O2
    /// stores into the outer vector with vector instructions, which make no holder).
    pub container: Option<u64>,
}

impl Block {
    /// The call made at `depth` on the way to the allocation (the allocator's own call when
    /// `depth` is the allocating function's): where a holder at that depth allocated it.
    pub(crate) fn call_at(&self, depth: u32) -> u64 {
        self.calls
            .get(depth as usize)
            .map_or(self.site, |ret| ret.wrapping_sub(1))
    }
}

/// An allocator's call in flight.
#[derive(Clone, Copy, Debug)]
enum Allocator {
    /// The block comes back in `rax`.
    Returned { size: u64, site: u64 },
    /// `posix_memalign(&p, align, size)`: the block is written to `p`.
    OutParameter { ptr: u64, size: u64, site: u64 },
}

/// The heap blocks of one execution and their holders, built from the event stream.
#[derive(Default)]
pub(crate) struct HeapBlocks {
    blocks: BTreeMap<u64, Block>,
    /// Values of the general-purpose registers as traced code left them (`None` where
    /// natively-run code may have changed them).
    values: [Option<u64>; 16],
    /// Bit `r`: register `r` holds the start of a block.
    holding: u16,
    /// Return addresses of the calls traced code made and has not returned from: the call
    /// depth, kept by return address so that a native call's return (which shows no `ret`)
    /// and a `longjmp` unwind it right.
    calls: Vec<u64>,
    /// An allocator's call in flight, and the calls that led to it.
    pending: Option<(Allocator, Vec<u64>)>,
    /// `posix_memalign` returned: the block's start is the next 8-byte load from `ptr`.
    awaiting: Option<(u64, u64, u64, Vec<u64>)>,
    /// The source register of each 64-bit store `mov [m], r64` seen (`None`: another kind of
    /// instruction), so that each instruction is decoded once.
    stores: HashMap<u64, Option<u8>>,
    /// The blocks' starts, for the per-instruction test of a register's value.
    starts: rustc_hash::FxHashSet<u64>,
    /// Holders still holding their block: (block start, holder index).
    watching: Vec<(u64, usize)>,
    /// Whether the instruction at each address is `lea r64, [rsp/rbp + disp]`.
    is_lea: HashMap<u64, bool>,
    /// The last value each such `lea` computed, by its address.
    pub(crate) stack_leas: HashMap<u64, u64>,
    /// Block starts in the 64-bit lanes of vector registers (`xmm0`-`xmm15`, lanes 0 and 1),
    /// followed only while some register holds one: g++ -O2 stores a `vector`'s start and
    /// end pointers together (`movq xmm0, rdi; punpcklqdq xmm0, xmm0; movups [rbp], xmm0`).
    lanes: [[Option<u64>; 2]; 16],
    /// Bit `x`: `xmm<x>` has a lane holding a block's start.
    lanes_holding: u16,
    /// What each instruction decoded for the lanes does with them.
    lane_ops: HashMap<u64, LaneOp>,
}

/// What an instruction does with the 64-bit lanes of vector registers, as far as block
/// starts go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LaneOp {
    /// Nothing a lane's start goes through (the vector registers it writes, if any, are
    /// cleared by `writes`).
    Other { writes: Option<u8> },
    /// `movq xmm, r64`: lane 0 takes the register, lane 1 is zeroed.
    FromGpr { xmm: u8, gpr: u8 },
    /// `pinsrq xmm, r64, 1` (or `movq` + `pinsrq` 0): lane `lane` takes the register.
    Insert { xmm: u8, gpr: u8, lane: u8 },
    /// `punpcklqdq x, x` / `movddup x, x`: lane 0 into both lanes.
    Duplicate { xmm: u8 },
    /// `punpcklqdq x, y`: lane 0 of `y` into lane 1 of `x`.
    Unpack { xmm: u8, src: u8 },
    /// A register-to-register move of the whole vector.
    Copy { xmm: u8, src: u8 },
    /// A store of the low `lanes` lanes (1 or 2) to memory.
    Store { xmm: u8, lanes: u8 },
}

/// The general-purpose register number of `r`'s full register, for 32- and 64-bit writes
/// (iced reports those as the 64-bit register; 8- and 16-bit writes keep the upper bits).
fn gpr64(r: Register) -> Option<u8> {
    r.is_gpr64().then(|| r.number() as u8)
}

/// Which caller-saved registers a native call may change.
const CALLER_SAVED: [usize; 9] = [0, 1, 2, 6, 7, 8, 9, 10, 11];

impl HeapBlocks {
    /// The block holding `addr`: its start and the block.
    pub(crate) fn block(&self, addr: u64) -> Option<(u64, &Block)> {
        let (&start, b) = self.blocks.range(..=addr).next_back()?;
        (addr < start.saturating_add(b.size)).then_some((start, b))
    }

    /// Follows one event; `bytes` holds the code seen so far, to decode stores.
    pub(crate) fn event(&mut self, ev: &Event<'_>, bytes: &HashMap<u64, Vec<u8>>) {
        match *ev {
            Event::Insn(i) => self.insn(i, bytes),
            Event::LibCall(c) => {
                let name = c.name.as_deref().unwrap_or("");
                let arg = |n: usize| self.values[n];
                let (rdi, rsi, rdx) = (arg(7), arg(6), arg(2));
                let site = c.site;
                self.pending = match name.split('@').next().unwrap_or("") {
                    // C++'s `operator new` and `new[]` (plain and aligned): containers'
                    // storage (a `vector`'s elements, each row of a `vector<vector>`).
                    "malloc"
                    | "_Znwm"
                    | "_Znam"
                    | "_ZnwmSt11align_val_t"
                    | "_ZnamSt11align_val_t"
                    | "operator new(unsigned long)"
                    | "operator new[](unsigned long)"
                    | "operator new(unsigned long, std::align_val_t)"
                    | "operator new[](unsigned long, std::align_val_t)" => {
                        rdi.map(|size| Allocator::Returned { size, site })
                    }
                    "calloc" => rdi.zip(rsi).map(|(a, b)| Allocator::Returned {
                        size: a.saturating_mul(b),
                        site,
                    }),
                    "realloc" | "aligned_alloc" | "memalign" => {
                        rsi.map(|size| Allocator::Returned { size, site })
                    }
                    "posix_memalign" => {
                        rdi.zip(rdx)
                            .map(|(ptr, size)| Allocator::OutParameter { ptr, size, site })
                    }
                    _ => None,
                }
                .map(|a| (a, self.calls.clone()));
            }
            Event::LibReturn { pc, rax, .. } => {
                self.returned_to(pc);
                if !self.watching.is_empty() {
                    self.watch(pc, &[]);
                }
                for r in CALLER_SAVED {
                    self.values[r] = None;
                }
                self.holding &= !CALLER_SAVED.iter().fold(0u16, |m, &r| m | 1 << r);
                match self.pending.take() {
                    Some((Allocator::Returned { size, site }, calls)) if rax != 0 => {
                        self.insert(rax, size, site, calls);
                    }
                    Some((Allocator::OutParameter { ptr, size, site }, calls)) if rax == 0 => {
                        self.awaiting = Some((ptr, size, site, calls));
                    }
                    _ => {}
                }
                self.set(0, rax);
                self.returned_value(pc);
            }
            _ => {}
        }
    }

    /// Execution came back to `pc`: unwind the calls up to the one returning there.
    fn returned_to(&mut self, pc: u64) {
        if let Some(k) = self.calls.iter().rposition(|&r| r == pc) {
            self.calls.truncate(k);
        }
    }

    fn insert(&mut self, start: u64, size: u64, site: u64, calls: Vec<u64>) {
        self.starts.insert(start);
        self.blocks.insert(
            start,
            Block {
                size,
                site,
                calls,
                holders: Vec::new(),
                container: None,
            },
        );
    }

    /// Register `r` now holds `value`.
    fn set(&mut self, r: usize, value: u64) {
        self.values[r] = Some(value);
        // Every 64-bit register write of the trace comes here: a hash lookup, not the
        // ordered map's search.
        if self.starts.contains(&value) {
            self.holding |= 1 << r;
        } else {
            self.holding &= !(1 << r);
        }
    }

    /// Adds a holder of the block at `start`: `place` was filled by the instruction at `pc`,
    /// and execution goes on at `next`.
    fn hold(&mut self, start: u64, pc: u64, next: u64, place: Place) {
        let depth = self.calls.len() as u32;
        let Some(b) = self.blocks.get_mut(&start) else {
            return;
        };
        let same = |h: &Holder| h.pc == pc && h.place == place;
        if b.holders.len() < MAX_HOLDERS && !b.holders.iter().any(same) {
            let mut at = [0; WATCHED];
            at[0] = next;
            b.holders.push(Holder {
                pc,
                depth,
                place,
                at,
                steps: 0,
            });
            self.watching.push((start, b.holders.len() - 1));
        }
    }

    /// Execution is at `pc` (before the instruction there, if any; `written`: the memory it
    /// writes): holders still holding their block learn it.
    fn watch(&mut self, pc: u64, written: &[MemAccess]) {
        let (values, blocks) = (&self.values, &mut self.blocks);
        let now = self.calls.len() as u32;
        self.watching.retain(|&(start, k)| {
            let Some(h) = blocks.get_mut(&start).and_then(|b| b.holders.get_mut(k)) else {
                return false;
            };
            let held = match h.place {
                Place::Register { reg } => values[usize::from(reg)] == Some(start),
                Place::Memory { addr } => !written.iter().any(|m| {
                    m.kind == AccessKind::Write
                        && m.addr < addr + 8
                        && addr < m.addr + u64::from(m.size)
                }),
            };
            if h.depth != now {
                // In a callee (a PLT stub too): its addresses are not the holder's function's.
                return held && h.depth < now;
            }
            // Before a store over the place executes, the place still holds.
            if !held && !matches!(h.place, Place::Memory { .. }) {
                return false;
            }
            h.steps += 1;
            if h.steps.is_power_of_two() {
                h.at[h.steps.trailing_zeros() as usize] = pc;
            }
            held && h.steps < 1 << (WATCHED - 1)
        });
    }

    fn insn(&mut self, i: &Insn, bytes: &HashMap<u64, Vec<u8>>) {
        if !self.watching.is_empty() {
            self.watch(i.pc, &i.mem);
        }
        let next = i.pc + u64::from(i.len);
        if let Some((ptr, ..)) = self.awaiting {
            // The first load of posix_memalign's out-parameter reads the block's start.
            let load = i
                .mem
                .iter()
                .any(|m| m.kind == AccessKind::Read && m.addr == ptr && m.size == 8);
            let written = i.regs.iter().find(|w| w.reg.is_gpr64()).filter(|_| load);
            if let Some(w) = written {
                if let Some((_, size, site, calls)) = self.awaiting.take() {
                    self.insert(w.value, size, site, calls);
                    self.hold(w.value, i.pc, next, Place::Memory { addr: ptr });
                }
            }
        }
        // A store of a register holding a block's start: the registers' values before the
        // instruction are the stored ones.
        if self.holding != 0 {
            if let Some(m) = i
                .mem
                .iter()
                .find(|m| m.kind == AccessKind::Write && m.size == 8)
            {
                let src = *self
                    .stores
                    .entry(i.pc)
                    .or_insert_with(|| bytes.get(&i.pc).and_then(|b| store_source(b, i.pc)));
                if let Some(r) = src.filter(|&r| self.holding & (1 << r) != 0) {
                    if let Some(start) = self.values[r as usize] {
                        self.hold(start, i.pc, next, Place::Memory { addr: m.addr });
                    }
                }
            }
        }
        if self.holding != 0 || self.lanes_holding != 0 {
            self.lane_insn(i, bytes, next);
        }
        let returned = match i.transfer {
            Some(t) if t.kind == TransferKind::Call => {
                self.calls.push(next);
                None
            }
            Some(t) if t.kind == TransferKind::Return => {
                self.returned_to(t.target);
                Some(t.target)
            }
            _ => None,
        };
        if let ([], [w]) = (&i.mem[..], &i.regs[..]) {
            // A stack address computed into a register (not the stack or frame pointer).
            let r = w.reg;
            // rbp too where it is not the frame pointer (g++ -O2 keeps `&b` there for a
            // constructor's calls): `lea rbp, [rsp + disp]`, never `mov rbp, rsp`.
            if w.value >= STACK_START && r.is_gpr64() && r != Register::RSP {
                let lea = *self.is_lea.entry(i.pc).or_insert_with(|| {
                    bytes
                        .get(&i.pc)
                        .is_some_and(|b| stack_lea(b, i.pc, r != Register::RBP))
                });
                if lea {
                    self.stack_leas.insert(i.pc, w.value);
                }
            }
        }
        for w in &i.regs {
            match gpr64(w.reg) {
                Some(r) => {
                    self.set(r as usize, w.value);
                    if self.holding & (1 << r) != 0 {
                        self.hold(w.value, i.pc, next, Place::Register { reg: r });
                        if let ([m], [_]) = (&i.mem[..], &i.regs[..]) {
                            if m.kind == AccessKind::Read && m.size == 8 {
                                self.contained(w.value, m.addr);
                            }
                        }
                    }
                }
                None => {
                    // An 8- or 16-bit write: the full register's value is not at hand.
                    let r = w.reg.full_register().number();
                    if r < 16 {
                        self.values[r] = None;
                        self.holding &= !(1 << r);
                    }
                }
            }
        }
        if let Some(to) = returned {
            self.returned_value(to);
        }
    }

    /// Follows block starts through vector registers' lanes for the instruction `i` (run
    /// only while a general-purpose or vector register holds one: the lanes start from a
    /// `movq xmm, r64` of a holding register).
    fn lane_insn(&mut self, i: &Insn, bytes: &HashMap<u64, Vec<u8>>, next: u64) {
        if let Some(t) = i.transfer {
            if t.kind != TransferKind::CondJump {
                // Vector registers are all caller-saved: a call or return leaves none held.
                self.clear_lanes();
            }
            return;
        }
        // Only instructions that write no general-purpose register can move a lane.
        if !i.regs.is_empty() {
            return;
        }
        let op = *self.lane_ops.entry(i.pc).or_insert_with(|| {
            bytes
                .get(&i.pc)
                .map_or(LaneOp::Other { writes: None }, |b| lane_op(b, i.pc))
        });
        let start_in = |values: &[Option<u64>; 16], starts: &rustc_hash::FxHashSet<u64>, g: u8| {
            values[usize::from(g)].filter(|v| starts.contains(v))
        };
        match op {
            LaneOp::Other { writes: None } => {}
            LaneOp::Other { writes: Some(x) } => self.set_lanes(x, [None, None]),
            LaneOp::FromGpr { xmm, gpr } => {
                let v = start_in(&self.values, &self.starts, gpr);
                self.set_lanes(xmm, [v, None]);
            }
            LaneOp::Insert { xmm, gpr, lane } => {
                let mut l = self.lanes[usize::from(xmm)];
                l[usize::from(lane & 1)] = start_in(&self.values, &self.starts, gpr);
                self.set_lanes(xmm, l);
            }
            LaneOp::Duplicate { xmm } => {
                let l = self.lanes[usize::from(xmm)][0];
                self.set_lanes(xmm, [l, l]);
            }
            LaneOp::Unpack { xmm, src } => {
                let l0 = self.lanes[usize::from(xmm)][0];
                let l1 = self.lanes[usize::from(src)][0];
                self.set_lanes(xmm, [l0, l1]);
            }
            LaneOp::Copy { xmm, src } => {
                let l = self.lanes[usize::from(src)];
                self.set_lanes(xmm, l);
            }
            LaneOp::Store { xmm, lanes } => {
                let Some(m) = i.mem.iter().find(|m| m.kind == AccessKind::Write) else {
                    return;
                };
                let l = self.lanes[usize::from(xmm)];
                for (k, v) in l.iter().take(usize::from(lanes)).enumerate() {
                    if let Some(start) = *v {
                        let addr = m.addr + 8 * k as u64;
                        self.hold(start, i.pc, next, Place::Memory { addr });
                    }
                }
            }
        }
    }

    fn set_lanes(&mut self, xmm: u8, lanes: [Option<u64>; 2]) {
        let x = usize::from(xmm & 15);
        self.lanes[x] = lanes;
        if lanes.iter().any(Option::is_some) {
            self.lanes_holding |= 1 << x;
        } else {
            self.lanes_holding &= !(1 << x);
        }
    }

    fn clear_lanes(&mut self) {
        if self.lanes_holding != 0 {
            self.lanes = [[None; 2]; 16];
            self.lanes_holding = 0;
        }
    }

    /// The start of the block at `start` was loaded from `from`: when that is in another
    /// block, the first such place is the block's container.
    fn contained(&mut self, start: u64, from: u64) {
        if self
            .blocks
            .get(&start)
            .is_none_or(|b| b.container.is_some())
        {
            return;
        }
        let inside = self.block(from).is_some_and(|(s, _)| s != start);
        if let (true, Some(b)) = (inside, self.blocks.get_mut(&start)) {
            b.container = Some(from);
        }
    }

    /// A call returned to `to`: a block's start in `rax` is the caller's now.
    fn returned_value(&mut self, to: u64) {
        if self.holding & 1 != 0 {
            if let Some(start) = self.values[0] {
                self.hold(start, to, to, Place::Register { reg: 0 });
            }
        }
    }
}

/// Addresses from here up are the stack's.
pub(crate) const STACK_START: u64 = 0x7ff0_0000_0000;

/// Whether `bytes` at `pc` encode `lea r64, [rsp + disp]` or `[rbp + disp]` (or, with
/// `moves`, `mov r64, rsp/rbp`; without, only a `lea` from `rsp` counts).
fn stack_lea(bytes: &[u8], pc: u64, moves: bool) -> bool {
    let insn: Instruction = Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE).decode();
    match frame_address(&insn) {
        Some((base, _)) if !moves => insn.mnemonic() == Mnemonic::Lea && base == Register::RSP,
        found => found.is_some(),
    }
}

/// The frame address an instruction computes into a register: `lea r64, [rsp/rbp + disp]`,
/// or `mov r64, rsp/rbp` (what gcc writes for a local array at the stack pointer itself), as
/// (base register, displacement).
pub(crate) fn frame_address(insn: &Instruction) -> Option<(Register, i64)> {
    let frame = |r: Register| matches!(r, Register::RSP | Register::RBP);
    match insn.mnemonic() {
        Mnemonic::Lea if insn.memory_index() == Register::None && frame(insn.memory_base()) => {
            Some((insn.memory_base(), insn.memory_displacement64() as i64))
        }
        Mnemonic::Mov
            if insn.op_count() == 2
                && insn.op0_kind() == OpKind::Register
                && insn.op0_register().is_gpr64()
                && insn.op1_kind() == OpKind::Register
                && frame(insn.op1_register()) =>
        {
            Some((insn.op1_register(), 0))
        }
        _ => None,
    }
}

/// What the instruction `bytes` encode at `pc` does with vector registers' 64-bit lanes.
fn lane_op(bytes: &[u8], pc: u64) -> LaneOp {
    let insn: Instruction = Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE).decode();
    let vector = |k: u32| {
        (insn.op_kind(k) == OpKind::Register && insn.op_register(k).is_xmm())
            .then(|| insn.op_register(k).number() as u8)
    };
    let gpr = |k: u32| {
        (insn.op_kind(k) == OpKind::Register && insn.op_register(k).is_gpr64())
            .then(|| insn.op_register(k).number() as u8)
    };
    let memory = |k: u32| insn.op_kind(k) == OpKind::Memory;
    let written = || {
        (insn.op_count() > 0
            && insn.op0_kind() == OpKind::Register
            && insn.op0_register().is_vector_register())
        .then(|| insn.op0_register().number() as u8 & 15)
    };
    use Mnemonic::*;
    let m = insn.mnemonic();
    let op = match m {
        Movq | Vmovq => match (vector(0), gpr(1)) {
            (Some(xmm), Some(gpr)) => Some(LaneOp::FromGpr { xmm, gpr }),
            _ if memory(0) => vector(1).map(|xmm| LaneOp::Store { xmm, lanes: 1 }),
            _ => None,
        },
        Pinsrq | Vpinsrq => match (vector(0), gpr(insn.op_count() - 2)) {
            (Some(xmm), Some(gpr)) => Some(LaneOp::Insert {
                xmm,
                gpr,
                lane: insn.immediate8() & 1,
            }),
            _ => None,
        },
        Punpcklqdq | Vpunpcklqdq | Unpcklpd | Vunpcklpd | Movlhps | Vmovlhps => {
            let last = insn.op_count() - 1;
            match (vector(0), vector(last)) {
                (Some(x), Some(y)) if x == y => Some(LaneOp::Duplicate { xmm: x }),
                (Some(x), Some(y)) if insn.op_count() == 2 => {
                    Some(LaneOp::Unpack { xmm: x, src: y })
                }
                _ => None,
            }
        }
        Movddup | Vmovddup => match (vector(0), vector(1)) {
            (Some(x), Some(y)) if x == y => Some(LaneOp::Duplicate { xmm: x }),
            _ => None,
        },
        Movups | Movaps | Movdqu | Movdqa | Movupd | Movapd | Vmovups | Vmovaps | Vmovdqu
        | Vmovdqa | Vmovupd | Vmovapd => match (vector(0), vector(1)) {
            (Some(xmm), Some(src)) => Some(LaneOp::Copy { xmm, src }),
            (None, Some(xmm)) if memory(0) && insn.op_register(1).is_xmm() => {
                Some(LaneOp::Store { xmm, lanes: 2 })
            }
            _ => None,
        },
        Movlps | Movlpd | Vmovlps | Vmovlpd | Movsd | Vmovsd if memory(0) => {
            vector(1).map(|xmm| LaneOp::Store { xmm, lanes: 1 })
        }
        _ => None,
    };
    op.unwrap_or(LaneOp::Other { writes: written() })
}

/// The source register of `mov [m], r64` at `pc`, if that is what `bytes` encode.
fn store_source(bytes: &[u8], pc: u64) -> Option<u8> {
    let insn: Instruction = Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE).decode();
    let store = insn.mnemonic() == Mnemonic::Mov
        && insn.op0_kind() == OpKind::Memory
        && insn.op1_kind() == OpKind::Register;
    store.then(|| gpr64(insn.op1_register())).flatten()
}
