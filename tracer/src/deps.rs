//! Dynamic dependences (section 4 of the POLY-PROF paper): shadow memory and a register shadow
//! turn each instruction's accesses into flow (read after write), anti (write after read) and
//! output (write after write) dependences, each labelled with the producer's and the consumer's
//! iteration vectors.
//!
//! Every shadowed byte (of memory or of a register) holds handles to the *records* of its last
//! writer, of its first reader since that write and of its last reader since that write: the
//! statement (context, instruction address) and its coordinates. Records are reference-counted
//! by the bytes that point to them, so memory follows the data the program keeps live, not the
//! length of the trace.
//!
//! A write reports an output dependence on the writer and anti dependences on both readers.
//! Readers in between are not kept, which bounds the work per access: of the anti dependences
//! from the readers `R1 < ... < Rm` of a value to the write `W` that overwrites it, only
//! `R1 -> W` and `Rm -> W` are reported. They are the extremes: `R1 -> W` has the
//! lexicographically largest distance, `Rm -> W` the smallest, and the loop carrying any other
//! `Ri -> W` is nested between the loops carrying those two.
//!
//! Shadow memory is a two-level table (page number → page), allocated per 4 KiB page touched,
//! holding a writer and two reader handles per 4-byte granule: 3 bytes of shadow per byte of
//! traced memory. A granule whose bytes differ is split into per-byte handles (module
//! `shadow`), so dependences stay byte-precise while the common access touches one or two
//! slots. Registers are shadowed the same way, one granule per general-purpose register and
//! two per ymm register.
//!
//! Return addresses are not data: the stack write of `call` and the stack read of `ret` do not
//! enter the shadow (`call [mem]` still reads its operand).
//!
//! A returned frame is dead: at a traced `ret`, the shadow of the callee's frame (from the
//! lowest stack pointer it reached, red zone included, up to its return address) is forgotten.
//! Two calls at one depth share addresses, but not storage: without this, rustc -O0's callees
//! (`Range::next`, `index_mut`) carry flow dependences from one call's spills to the next
//! call's partial reads of its own uninitialised slots, and output dependences between calls.
//!
//! A library call run natively is a statement of its own: the traced `call` instruction's
//! instance in the caller. Its accesses (argument registers, memory ranges and the *hidden
//! state* of the library, [`Effect`]) are applied as that instance, so they give ordinary flow,
//! anti and output dependences. Argument registers are read when the call is made; memory,
//! hidden state and results when it returns (sizes can depend on the result). Traced code that
//! runs in between (callbacks) is nested in the call's iteration, so dependences between it and
//! the call are never carried by a loop around the call.

use crate::libcall::{self, CallModel, Heap, RegSpan};
use crate::schedule::{NodeId, Step};
use crate::shadow::{self, Splits};
use iced_x86::{
    Decoder, DecoderOptions, EncodingKind, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
    OpKind, Register,
};
use ptrace_runner::{AccessKind, Event, Insn, LibCall, Syscall, TransferKind};
use smallvec::SmallVec;
use std::collections::HashMap;

/// A statement: an instruction in a context of the schedule tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stmt {
    pub context: NodeId,
    pub pc: u64,
}

/// Flow (read after write), anti (write after read) or output (write after write).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DepKind {
    Flow,
    Anti,
    Output,
}

impl DepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DepKind::Flow => "flow",
            DepKind::Anti => "anti",
            DepKind::Output => "output",
        }
    }
}

/// Whether a dependence goes through a register or through memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Through {
    Register,
    Memory,
}

impl Through {
    pub fn as_str(self) -> &'static str {
        match self {
            Through::Register => "register",
            Through::Memory => "memory",
        }
    }
}

/// Hidden state of library code run natively: a call that uses it reads and writes the 8 bytes
/// at [`Effect::addr`], so successive calls are chained by flow, anti and output dependences
/// through memory at that address, an address no user-space program can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Input and output: streams, files, the terminal.
    Output,
    /// The random number generator's state (`rand`, `drand48`).
    Random,
    /// The heap allocator's state.
    Heap,
    /// The clock.
    Clock,
    /// Whatever unknown library code uses: calls not modelled use this and all the others.
    Unknown,
}

impl Effect {
    /// Every effect, `Unknown` first.
    pub const ALL: [Effect; 5] = [
        Effect::Unknown,
        Effect::Output,
        Effect::Random,
        Effect::Heap,
        Effect::Clock,
    ];
    /// Start of the pseudo-addresses: the first address above the user-space half of x86-64.
    const BASE: u64 = 0xffff_8000_0000_0000;
    /// Bytes between two effects' slots.
    const STRIDE: u64 = 64;
    /// Bytes of one effect's slot.
    pub const SIZE: u64 = 8;

    /// The pseudo-address of this effect's 8 bytes.
    pub fn addr(self) -> u64 {
        Self::BASE + Self::STRIDE * self as u64
    }

    /// The effect whose 8 bytes hold `addr`.
    pub fn at(addr: u64) -> Option<Effect> {
        let off = addr.checked_sub(Self::BASE)?;
        if off % Self::STRIDE >= Self::SIZE {
            return None;
        }
        Self::ALL
            .into_iter()
            .find(|e| *e as u64 == off / Self::STRIDE)
    }

    /// What the state is, for a person.
    pub fn describe(self) -> &'static str {
        match self {
            Effect::Output => "the program's input and output",
            Effect::Random => "the random number generator's state",
            Effect::Heap => "the heap allocator's state",
            Effect::Clock => "the clock",
            Effect::Unknown => "unknown state of library code",
        }
    }

    /// The effects a call with this hidden state reads and writes: unknown library code may
    /// use any of them.
    fn touched(e: Option<Effect>) -> &'static [Effect] {
        match e {
            None => &[],
            Some(Effect::Output) => &[Effect::Output],
            Some(Effect::Random) => &[Effect::Random],
            Some(Effect::Heap) => &[Effect::Heap],
            Some(Effect::Clock) => &[Effect::Clock],
            Some(Effect::Unknown) => &Effect::ALL,
        }
    }
}

/// One dynamic dependence: a point of the consumer's iteration space labelled with the
/// producer's iteration vector.
#[derive(Clone, Copy, Debug)]
pub struct Dep<'a> {
    pub kind: DepKind,
    pub through: Through,
    pub producer: Stmt,
    pub consumer: Stmt,
    pub producer_coords: &'a [u64],
    pub consumer_coords: &'a [u64],
    /// For memory: the lowest address of the bytes that carried it; for registers: the
    /// register's offset in the register shadow.
    pub location: u64,
}

/// Handle of a record; 0 means "nobody" (never written, or filled from outside the trace).
pub(crate) type Handle = u32;

/// A statement instance, in 32 bytes: memory keeps one per instance some shadow byte still
/// refers to (heartwall keeps 3.2 M live; at 112 bytes each they were most of its peak
/// memory). The instruction is an index in [`Records::pcs`]; contexts below 2^28 and
/// coordinates that fit in 32 bits (nearly all: one loop would have to run 4 G times) are
/// kept inline, the rest in [`Records::wide`].
#[derive(Clone, Default)]
struct Record {
    pc: u32,
    /// The context, shifted left by 4, and the number of coordinates in `inline` (or
    /// [`Record::WIDE`]).
    ctx_len: u32,
    inline: [u32; Record::INLINE],
}

impl Record {
    const INLINE: usize = 6;
    /// The statement and coordinates are in [`Records::wide`].
    const WIDE: u32 = 15;

    /// Sets an instance with `pc_id` not 0, a context below 2^28 and at most
    /// [`Self::INLINE`] coordinates; whether they all fit in 32 bits (if not, the record is
    /// to be set wide).
    #[inline(always)]
    fn set(&mut self, stmt: Stmt, pc_id: u32, coords: &[u64]) -> bool {
        self.pc = pc_id;
        self.ctx_len = (stmt.context as u32) << 4 | coords.len() as u32;
        let mut any = 0;
        for (d, s) in self.inline.iter_mut().zip(coords) {
            *d = *s as u32;
            any |= *s;
        }
        any >> 32 == 0
    }
}

/// Slots of [`Records::reported`].
const REPORTED_SLOTS: usize = 256;
/// Low bits of a [`Records::reported`] entry that hold (kind, through) bits; the instance's
/// epoch is above them.
const EPOCH_SHIFT: u32 = 6;

const PAGE_BITS: u32 = 12;
const PAGE: usize = 1 << PAGE_BITS;

/// Writers, first readers and last readers (since the last write) of a shadowed byte range, as
/// `N` granules of `G` bytes (see [`shadow`]).
struct Shadow<const G: usize, const N: usize> {
    writer: [u32; N],
    first: [u32; N],
    reader: [u32; N],
}

impl<const G: usize, const N: usize> Shadow<G, N> {
    fn new() -> Self {
        Shadow {
            writer: [0; N],
            first: [0; N],
            reader: [0; N],
        }
    }

    /// Forgets the writer and the readers of bytes `off..off + n`.
    fn clear(&mut self, splits: &mut Splits<G>, records: &mut Records, off: usize, n: usize) {
        for slots in [&mut self.writer, &mut self.first, &mut self.reader] {
            shadow::overwrite(slots, splits, records, off, n, 0, false);
        }
    }
}

impl<const G: usize, const N: usize> Default for Shadow<G, N> {
    fn default() -> Self {
        Shadow::new()
    }
}

/// Every shadow: memory pages, general-purpose and vector registers, and their split
/// granules.
#[derive(Default)]
struct Shadows {
    pages: Pages,
    gprs: GprShadow,
    vecs: VecShadow,
    mem_splits: Splits<MEM_GRAIN>,
    gpr_splits: Splits<8>,
    vec_splits: Splits<16>,
}

/// Memory granule: an `int`.
const MEM_GRAIN: usize = 4;
type ShadowPage = Shadow<MEM_GRAIN, { PAGE / MEM_GRAIN }>;
/// A general-purpose register is one granule; a ymm register two (its xmm half and the rest).
type GprShadow = Shadow<8, 16>;
type VecShadow = Shadow<16, 64>;

/// Bytes of the register shadow: 16 general-purpose registers of 8 bytes, then 32 vector
/// registers of 32 bytes (ymm; xmm is the low half).
pub(crate) const GPR_BYTES: usize = 16 * 8;
const REG_BYTES: usize = GPR_BYTES + 32 * 32;

/// What the dependence stage needs of an instruction, decoded once per address.
#[derive(Clone, Debug, Default)]
struct RegUse {
    /// (offset, size) of register bytes read. (Plain vectors: read on every instruction,
    /// built once per address.)
    reads: Vec<(u16, u8)>,
    /// (offset, size) of register bytes written.
    writes: Vec<(u16, u8)>,
}

fn reg_span(reg: Register, write: bool, vex: bool) -> Option<(u16, u8)> {
    if reg.is_gpr() {
        let full = reg.full_register();
        let idx = (full as usize).checked_sub(Register::RAX as usize)?;
        if idx >= 16 {
            return None;
        }
        if full == Register::RSP {
            // Stack-pointer traffic is a scalar evolution of every push, pop, call and
            // return: its dependences would only be dropped later.
            return None;
        }
        let base = (idx * 8) as u16;
        return Some(match reg {
            Register::AH | Register::BH | Register::CH | Register::DH => (base + 1, 1),
            // A 32-bit write zero-extends into the whole register. A 32-bit read counts as a
            // read of all of it, which is exact: bytes 2..8 are only ever written together (by
            // 32- and 64-bit writes), so bytes 4..8 have the writer of bytes 2..4. Whole
            // registers keep the register shadow unsplit.
            _ if reg.is_gpr32() => (base, 8),
            _ => (base, reg.size() as u8),
        });
    }
    // iced names the destination of a VEX or EVEX instruction by its zmm register (the
    // instruction zeroes the bits above what it writes); the shadow keeps 32 bytes of each.
    if reg.is_xmm() || reg.is_ymm() || reg.is_zmm() {
        let n = reg.number();
        if n >= 32 {
            return None;
        }
        let base = (GPR_BYTES + n * 32) as u16;
        let size = if reg.is_ymm() || reg.is_zmm() || (write && vex) {
            32
        } else {
            16
        };
        return Some((base, size));
    }
    None
}

fn reg_use(insn: &Instruction, info: &mut InstructionInfoFactory) -> RegUse {
    let mut u = RegUse::default();
    if insn.mnemonic() == Mnemonic::Vzeroupper {
        // It zeroes the upper halves and keeps the lower ones, which iced lists as reads: as
        // such, every vector register a loop wrote would look read after it (gcc puts a
        // `vzeroupper` before each call and return).
        for n in 0..16 {
            u.writes.push(((GPR_BYTES + 32 * n + 16) as u16, 16));
        }
        return u;
    }
    let vex = insn.encoding() != EncodingKind::Legacy;
    // `xor eax, eax` and friends only write: the old value does not matter.
    let zero_idiom = matches!(
        insn.mnemonic(),
        Mnemonic::Xor
            | Mnemonic::Sub
            | Mnemonic::Pxor
            | Mnemonic::Xorps
            | Mnemonic::Xorpd
            | Mnemonic::Vpxor
            | Mnemonic::Vxorps
            | Mnemonic::Vxorpd
            | Mnemonic::Pcmpeqd
    ) && insn.op_count() >= 2
        && insn.op0_kind() == OpKind::Register
        && insn.op1_kind() == OpKind::Register
        && insn.op0_register() == insn.op1_register()
        && (insn.op_count() == 2 || insn.op2_register() == insn.op0_register());
    for r in info.info(insn).used_registers() {
        let (read, write) = match r.access() {
            OpAccess::Read | OpAccess::CondRead => (true, false),
            OpAccess::Write | OpAccess::CondWrite => (false, true),
            OpAccess::ReadWrite | OpAccess::ReadCondWrite => (true, true),
            _ => (false, false),
        };
        if read && !zero_idiom {
            if let Some(s) = reg_span(r.register(), false, vex) {
                u.reads.push(s);
            }
        }
        if write {
            if let Some(s) = reg_span(r.register(), true, vex) {
                u.writes.push(s);
            }
        }
    }
    u
}

/// A register access of an instruction, classified once per address: most are one whole
/// general-purpose register or one or two whole granules of a vector register, whose
/// shadow slots are known without working out offsets on every execution.
#[derive(Clone, Copy, Debug)]
enum RegOp {
    /// Granule `g` of the general-purpose registers (register `g`).
    Gpr(u8),
    /// Granules `g..g + n` of the vector registers.
    Vec(u8, u8),
    /// Anything else: (offset, size) in the register file.
    Bytes(u16, u8),
}

impl RegOp {
    fn new((off, size): (u16, u8)) -> RegOp {
        let (o, n) = (off as usize, size as usize);
        if o < GPR_BYTES {
            if n == 8 && o.is_multiple_of(8) {
                return RegOp::Gpr((o / 8) as u8);
            }
        } else if (n == 16 || n == 32) && (o - GPR_BYTES).is_multiple_of(16) {
            return RegOp::Vec(((o - GPR_BYTES) / 16) as u8, (n / 16) as u8);
        }
        RegOp::Bytes(off, size)
    }
}

/// The register reads and writes of an instruction address, as [`RegOp`]s.
#[derive(Clone, Debug, Default)]
struct Plan {
    reads: Vec<RegOp>,
    writes: Vec<RegOp>,
}

impl Plan {
    fn new(u: &RegUse) -> Plan {
        Plan {
            reads: u.reads.iter().map(|&r| RegOp::new(r)).collect(),
            writes: u.writes.iter().map(|&w| RegOp::new(w)).collect(),
        }
    }
}

/// The [`RegUse`] of each instruction address, with the recent lookups cached
/// (direct-mapped by address): a hash lookup per instruction otherwise.
struct Code {
    index: FastMap<u64, u32>,
    uses: Vec<Plan>,
    /// (address, index in `uses`); `u32::MAX`: empty.
    recent: Box<[(u64, u32)]>,
}

const RECENT_CODE: usize = 1 << 12;

impl Default for Code {
    fn default() -> Self {
        Code {
            index: FastMap::default(),
            // Index 0: no use at all, for addresses without code.
            uses: vec![Plan::default()],
            recent: vec![(0, u32::MAX); RECENT_CODE].into_boxed_slice(),
        }
    }
}

impl Code {
    /// Records what the instruction at `addr` uses; returns the address's index (one per
    /// address, from 1).
    fn insert(&mut self, addr: u64, u: RegUse) -> u32 {
        // A miss may be cached for the address.
        self.recent[Self::slot(addr)] = (0, u32::MAX);
        let next = self.uses.len() as u32;
        let i = *self.index.entry(addr).or_insert(next);
        let plan = Plan::new(&u);
        if i == next {
            self.uses.push(plan);
        } else {
            self.uses[i as usize] = plan;
        }
        i
    }

    #[inline]
    fn slot(addr: u64) -> usize {
        (addr ^ addr >> 12) as usize & (RECENT_CODE - 1)
    }

    /// The index of `addr` (0 if it has no code) and what it uses.
    #[inline]
    fn get(&mut self, addr: u64) -> (u32, &Plan) {
        let slot = &mut self.recent[Self::slot(addr)];
        let i = if slot.0 == addr && slot.1 != u32::MAX {
            slot.1
        } else {
            let i = self.index.get(&addr).copied().unwrap_or(0);
            *slot = (addr, i);
            i
        };
        (i, &self.uses[i as usize])
    }
}

/// Options of the dependence stage.
#[derive(Clone, Debug)]
pub struct DepOptions {
    /// Report dependences through registers. Default: true.
    pub registers: bool,
    /// Report anti and output dependences. Default: true.
    pub storage: bool,
}

impl Default for DepOptions {
    fn default() -> Self {
        DepOptions {
            registers: true,
            storage: true,
        }
    }
}

/// Reference-counted records of statement instances; handle 0 is "nobody".
struct Records {
    recs: Vec<Record>,
    /// Reference counts, kept apart from the records so that the shadow operations touch few
    /// cache lines: shadow bytes referring to each record.
    refs: Vec<u32>,
    free: Vec<Handle>,
    /// The producers the instance being processed has reported on, direct-mapped by handle:
    /// (handle, epoch and one bit per (kind, through)), each producer appearing once per kind
    /// in an instance's dependences. Per instance rather than per record (a handful, where
    /// records are millions) and without a search (a list of them took 10-20% more time).
    reported: [(Handle, u32); REPORTED_SLOTS],
    /// Those whose slot another producer of the instance holds.
    reported_more: FastMap<Handle, u32>,
    /// Number of the instance being processed, shifted left by [`EPOCH_SHIFT`]; never 0, the
    /// epoch of the empty slots.
    epoch: u32,
    /// Statement and coordinates of the records too deep or too large for [`Record`]'s
    /// inline fields.
    wide: FastMap<Handle, (Stmt, Vec<u64>)>,
    /// Instruction addresses, by their index in [`Code`] (0: none, for addresses without
    /// code).
    pcs: Vec<u64>,
}

impl Records {
    fn new() -> Records {
        Records {
            recs: vec![Record::default()],
            refs: vec![u32::MAX],
            free: Vec::new(),
            reported: [(0, 0); REPORTED_SLOTS],
            reported_more: FastMap::default(),
            epoch: 1 << EPOCH_SHIFT,
            wide: FastMap::default(),
            pcs: vec![0],
        }
    }

    /// A new record of `stmt`'s instance at `coords` (one per instance: most reuse a freed
    /// one, in line); `pc_id` is the index of `stmt.pc` in [`Self::pcs`], 0 if none.
    #[inline(always)]
    fn alloc(&mut self, stmt: Stmt, pc_id: u32, coords: &[u64]) -> Handle {
        let fits = pc_id != 0 && coords.len() <= Record::INLINE && stmt.context >> 28 == 0;
        if let Some(&h) = self.free.last() {
            let r = &mut self.recs[h as usize];
            // Set in place, the coordinates checked as they are copied (one pass); a record
            // that does not fit is set again, wide, out of line.
            if fits && r.ctx_len & 15 != Record::WIDE && r.set(stmt, pc_id, coords) {
                self.free.pop();
                self.refs[h as usize] = 0;
                return h;
            }
        }
        let h = self.free.pop();
        self.alloc_rare(h, fits, stmt, pc_id, coords)
    }

    /// [`Self::alloc`] of a new record, or where the side table is involved: `h` is the
    /// freed record to reuse; `fits`, whether [`Record::set`] can take the instance.
    #[inline(never)]
    fn alloc_rare(
        &mut self,
        h: Option<Handle>,
        fits: bool,
        stmt: Stmt,
        pc_id: u32,
        coords: &[u64],
    ) -> Handle {
        let h = match h {
            Some(h) => {
                self.refs[h as usize] = 0;
                h
            }
            None => {
                self.recs.push(Record::default());
                self.refs.push(0);
                (self.recs.len() - 1) as Handle
            }
        };
        let r = &mut self.recs[h as usize];
        if r.ctx_len & 15 == Record::WIDE {
            self.wide.remove(&h);
        }
        if !(fits && r.set(stmt, pc_id, coords)) {
            r.ctx_len = Record::WIDE;
            self.wide.insert(h, (stmt, coords.to_vec()));
        }
        h
    }

    /// The statement of record `h`.
    #[inline(always)]
    fn stmt(&self, h: Handle) -> Stmt {
        let r = &self.recs[h as usize];
        match r.ctx_len & 15 {
            Record::WIDE => self
                .wide
                .get(&h)
                .map_or(Stmt { context: 0, pc: 0 }, |w| w.0),
            _ => Stmt {
                context: (r.ctx_len >> 4) as NodeId,
                pc: self.pcs[r.pc as usize],
            },
        }
    }

    /// The coordinates of record `h`, widened into `buf` when they are inline.
    #[inline(always)]
    fn coords<'a>(&'a self, h: Handle, buf: &'a mut [u64; Record::INLINE]) -> &'a [u64] {
        let r = &self.recs[h as usize];
        match r.ctx_len & 15 {
            Record::WIDE => self.wide.get(&h).map_or(&[], |w| &w.1[..]),
            n => {
                // All of them, a fixed-size loop (vectorised); those past `n` are unused.
                for (d, s) in buf.iter_mut().zip(&r.inline) {
                    *d = u64::from(*s);
                }
                &buf[..n as usize]
            }
        }
    }

    #[inline]
    fn retain(&mut self, h: Handle, n: u32) {
        if h != 0 {
            self.refs[h as usize] += n;
        }
    }

    #[inline]
    fn release(&mut self, h: Handle, n: u32) {
        if h != 0 && n != 0 {
            let refs = &mut self.refs[h as usize];
            *refs -= n;
            if *refs == 0 {
                self.free.push(h);
            }
        }
    }

    /// Whether the current instance has not reported a dependence of kind `bit` on `h` yet
    /// (and from now on, it has).
    #[inline(always)]
    fn first_report(&mut self, h: Handle, bit: u32) -> bool {
        let slot = &mut self.reported[h as usize % REPORTED_SLOTS];
        let bits = if slot.1 >> EPOCH_SHIFT != self.epoch >> EPOCH_SHIFT {
            *slot = (h, self.epoch);
            &mut slot.1
        } else if slot.0 == h {
            &mut slot.1
        } else {
            self.reported_more.entry(h).or_insert(0)
        };
        let first = *bits & bit == 0;
        *bits |= bit;
        first
    }

    /// A new instance starts: it has reported nothing yet.
    #[inline]
    fn next_instance(&mut self) {
        self.epoch = self.epoch.wrapping_add(1 << EPOCH_SHIFT);
        if self.epoch == 0 || !self.reported_more.is_empty() {
            self.next_instance_rare();
        }
    }

    /// [`Self::next_instance`] when the last one used `reported_more`, or every 2^26
    /// instances, when the epoch comes round again (slots keep no earlier one).
    #[cold]
    #[inline(never)]
    fn next_instance_rare(&mut self) {
        // Cleared per instance: not at the size one large library call left it.
        if self.reported_more.capacity() > 1024 {
            self.reported_more = FastMap::default();
        } else {
            self.reported_more.clear();
        }
        if self.epoch == 0 {
            self.reported.fill((0, 0));
            self.epoch = 1 << EPOCH_SHIFT;
        }
    }

    fn live(&self) -> usize {
        self.recs.len() - 1 - self.free.len()
    }
}

impl shadow::Release for Records {
    #[inline]
    fn release(&mut self, h: Handle, n: u32) {
        Records::release(self, h, n)
    }
}

/// Bytes accessed in one shadow (`len` at offset `off`), and how dependences through them are
/// labelled.
#[derive(Clone, Copy)]
struct Bytes {
    off: usize,
    len: usize,
    through: Through,
    /// A memory address, or a register's offset in the register file.
    location: u64,
}

/// One instruction instance at work on the shadows: what it reports, and the record it
/// leaves behind as writer or reader.
struct Instance<'t, F> {
    records: &'t mut Records,
    me: Stmt,
    coords: &'t [u64],
    mine: Handle,
    out: &'t mut F,
}

impl<F: FnMut(&Dep<'_>)> Instance<'_, F> {
    /// Reads register bytes (`size` at `off` in the register file).
    #[inline(always)]
    fn reg_read(&mut self, sh: &mut Shadows, off: u16, size: u8, readers: bool) {
        match reg_bytes(off, size) {
            (true, b) => self.read(&mut sh.gprs, &mut sh.gpr_splits, b, readers),
            (false, b) => self.read(&mut sh.vecs, &mut sh.vec_splits, b, readers),
        }
    }

    /// Writes register bytes.
    #[inline(always)]
    fn reg_write(&mut self, sh: &mut Shadows, off: u16, size: u8, report: bool) {
        match reg_bytes(off, size) {
            (true, b) => self.write(&mut sh.gprs, &mut sh.gpr_splits, b, report),
            (false, b) => self.write(&mut sh.vecs, &mut sh.vec_splits, b, report),
        }
    }

    /// Reads a register ([`Self::reg_read`] of the op's bytes).
    #[inline(always)]
    fn reg_read_op(&mut self, sh: &mut Shadows, op: RegOp, readers: bool) {
        match op {
            RegOp::Gpr(g) if Self::unsplit(&sh.gprs, g as usize, 1) => {
                let g = g as usize;
                self.read_granule(&mut sh.gprs, g, Through::Register, (g * 8) as u64, readers)
            }
            RegOp::Vec(g, n) if Self::unsplit(&sh.vecs, g as usize, n as usize) => {
                let location = (GPR_BYTES + g as usize * 16) as u64;
                for g in g as usize..(g + n) as usize {
                    self.read_granule(&mut sh.vecs, g, Through::Register, location, readers);
                }
            }
            RegOp::Gpr(g) => self.reg_read(sh, u16::from(g) * 8, 8, readers),
            RegOp::Vec(g, n) => {
                let off = (GPR_BYTES + g as usize * 16) as u16;
                self.reg_read(sh, off, n * 16, readers)
            }
            RegOp::Bytes(off, size) => self.reg_read(sh, off, size, readers),
        }
    }

    /// Writes a register ([`Self::reg_write`] of the op's bytes).
    #[inline(always)]
    fn reg_write_op(&mut self, sh: &mut Shadows, op: RegOp, report: bool) {
        match op {
            RegOp::Gpr(g) if Self::unsplit(&sh.gprs, g as usize, 1) => {
                let g = g as usize;
                self.write_granule(&mut sh.gprs, g, Through::Register, (g * 8) as u64, report)
            }
            RegOp::Vec(g, n) if Self::unsplit(&sh.vecs, g as usize, n as usize) => {
                let location = (GPR_BYTES + g as usize * 16) as u64;
                for g in g as usize..(g + n) as usize {
                    self.write_granule(&mut sh.vecs, g, Through::Register, location, report);
                }
            }
            RegOp::Gpr(g) => self.reg_write(sh, u16::from(g) * 8, 8, report),
            RegOp::Vec(g, n) => {
                let off = (GPR_BYTES + g as usize * 16) as u16;
                self.reg_write(sh, off, n * 16, report)
            }
            RegOp::Bytes(off, size) => self.reg_write(sh, off, size, report),
        }
    }

    /// Whether granules `g..g + n` are split in none of the writer and reader shadows.
    #[inline(always)]
    fn unsplit<const G: usize, const N: usize>(sh: &Shadow<G, N>, g: usize, n: usize) -> bool {
        let mut any = 0;
        for g in g..g + n {
            any |= sh.writer[g] | sh.first[g] | sh.reader[g];
        }
        any & shadow::SPLIT == 0
    }

    /// Reads `n` bytes of memory at `addr`.
    #[inline(always)]
    fn mem_read(&mut self, sh: &mut Shadows, addr: u64, n: u64, readers: bool) {
        if let Some((pn, b)) = one_page(addr, n) {
            return self.read(sh.pages.page(pn), &mut sh.mem_splits, b, readers);
        }
        for (pn, b) in mem_bytes(addr, n) {
            self.read(sh.pages.page(pn), &mut sh.mem_splits, b, readers);
        }
    }

    /// Writes `n` bytes of memory at `addr`.
    #[inline(always)]
    fn mem_write(&mut self, sh: &mut Shadows, addr: u64, n: u64, report: bool) {
        if let Some((pn, b)) = one_page(addr, n) {
            return self.write(sh.pages.page(pn), &mut sh.mem_splits, b, report);
        }
        for (pn, b) in mem_bytes(addr, n) {
            self.write(sh.pages.page(pn), &mut sh.mem_splits, b, report);
        }
    }

    /// Reports a dependence of `kind` on the record `h`, unless it is nobody, this instance,
    /// or already reported by this instance.
    #[inline(always)]
    fn report_one(&mut self, h: Handle, kind: DepKind, through: Through, location: u64) {
        let bit = 1 << (kind as u32 * 2 + through as u32);
        if h == 0 || h == self.mine || !self.records.first_report(h, bit) {
            return;
        }
        let records = &*self.records;
        let mut buf = [0; Record::INLINE];
        (self.out)(&Dep {
            kind,
            through,
            producer: records.stmt(h),
            consumer: self.me,
            producer_coords: records.coords(h, &mut buf),
            consumer_coords: self.coords,
            location,
        });
    }

    /// Reports dependences of `kind` on the handles of bytes `b` of `slots`.
    #[inline]
    fn report<const G: usize>(
        &mut self,
        slots: &[u32],
        splits: &Splits<G>,
        b: Bytes,
        kind: DepKind,
    ) {
        shadow::for_each(slots, splits, b.off, b.len, |h| {
            self.report_one(h, kind, b.through, b.location)
        });
    }

    /// The granules `g..g + n` when bytes `off..off + len` are one or two whole granules,
    /// split in none of the writer and reader shadows: the common case, done without the
    /// general per-byte walk.
    #[inline(always)]
    fn whole<const G: usize, const N: usize>(
        sh: &Shadow<G, N>,
        off: usize,
        len: usize,
    ) -> Option<std::ops::Range<usize>> {
        if !off.is_multiple_of(G) || !(len == G || len == 2 * G) {
            return None;
        }
        let (g, last) = (off / G, (off + len) / G - 1);
        let any = sh.writer[g]
            | sh.first[g]
            | sh.reader[g]
            | sh.writer[last]
            | sh.first[last]
            | sh.reader[last];
        (any & shadow::SPLIT == 0).then_some(g..last + 1)
    }

    /// A read of bytes `b`: flow dependences on their writers; with `readers`, this instance
    /// becomes their last reader, and the first reader of those not read since their write.
    #[inline(always)]
    fn read<const G: usize, const N: usize>(
        &mut self,
        sh: &mut Shadow<G, N>,
        splits: &mut Splits<G>,
        b: Bytes,
        readers: bool,
    ) {
        if let Some(gs) = Self::whole(sh, b.off, b.len) {
            for g in gs {
                self.read_granule(sh, g, b.through, b.location, readers);
            }
            return;
        }
        self.read_split(sh, splits, b, readers);
    }

    /// [`Self::read`] of granule `g`, whole and not split.
    #[inline(always)]
    fn read_granule<const G: usize, const N: usize>(
        &mut self,
        sh: &mut Shadow<G, N>,
        g: usize,
        through: Through,
        location: u64,
        readers: bool,
    ) {
        let w = sh.writer[g];
        self.report_one(w, DepKind::Flow, through, location);
        if readers {
            if sh.first[g] == 0 {
                sh.first[g] = self.mine;
                self.records.retain(self.mine, G as u32);
            }
            let r = sh.reader[g];
            if r != self.mine {
                sh.reader[g] = self.mine;
                self.records.release(r, G as u32);
                self.records.retain(self.mine, G as u32);
            }
        }
    }

    /// [`Self::read`] of bytes in split granules (or not whole granules).
    #[inline(never)]
    fn read_split<const G: usize, const N: usize>(
        &mut self,
        sh: &mut Shadow<G, N>,
        splits: &mut Splits<G>,
        b: Bytes,
        readers: bool,
    ) {
        self.report(&sh.writer, splits, b, DepKind::Flow);
        if readers {
            let n = shadow::overwrite(
                &mut sh.first,
                splits,
                self.records,
                b.off,
                b.len,
                self.mine,
                true,
            );
            self.records.retain(self.mine, n);
            let n = shadow::overwrite(
                &mut sh.reader,
                splits,
                self.records,
                b.off,
                b.len,
                self.mine,
                false,
            );
            self.records.retain(self.mine, n);
        }
    }

    /// A write of bytes `b`: with `report`, anti dependences on their first and last readers
    /// and output dependences on their writers; this instance becomes their writer, with no
    /// reader since.
    #[inline(always)]
    fn write<const G: usize, const N: usize>(
        &mut self,
        sh: &mut Shadow<G, N>,
        splits: &mut Splits<G>,
        b: Bytes,
        report: bool,
    ) {
        if let Some(gs) = Self::whole(sh, b.off, b.len) {
            for g in gs {
                self.write_granule(sh, g, b.through, b.location, report);
            }
            return;
        }
        self.write_split(sh, splits, b, report);
    }

    /// [`Self::write`] of granule `g`, whole and not split.
    #[inline(always)]
    fn write_granule<const G: usize, const N: usize>(
        &mut self,
        sh: &mut Shadow<G, N>,
        g: usize,
        through: Through,
        location: u64,
        report: bool,
    ) {
        let (f, r, w) = (sh.first[g], sh.reader[g], sh.writer[g]);
        if report {
            self.report_one(f, DepKind::Anti, through, location);
            self.report_one(r, DepKind::Anti, through, location);
            self.report_one(w, DepKind::Output, through, location);
        }
        sh.first[g] = 0;
        sh.reader[g] = 0;
        sh.writer[g] = self.mine;
        // `mine` keeps a reference of its own during the step: never freed here.
        self.records.retain(self.mine, G as u32);
        self.records.release(f, G as u32);
        self.records.release(r, G as u32);
        self.records.release(w, G as u32);
    }

    /// [`Self::write`] of bytes in split granules (or not whole granules).
    #[inline(never)]
    fn write_split<const G: usize, const N: usize>(
        &mut self,
        sh: &mut Shadow<G, N>,
        splits: &mut Splits<G>,
        b: Bytes,
        report: bool,
    ) {
        if report {
            self.report(&sh.first, splits, b, DepKind::Anti);
            self.report(&sh.reader, splits, b, DepKind::Anti);
            self.report(&sh.writer, splits, b, DepKind::Output);
        }
        shadow::overwrite(&mut sh.first, splits, self.records, b.off, b.len, 0, false);
        shadow::overwrite(&mut sh.reader, splits, self.records, b.off, b.len, 0, false);
        let n = shadow::overwrite(
            &mut sh.writer,
            splits,
            self.records,
            b.off,
            b.len,
            self.mine,
            false,
        );
        self.records.retain(self.mine, n);
    }
}

type FastMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<rustc_hash::FxHasher>>;

/// The dependence tracker: feed it every event in order (instructions through [`Self::step`],
/// others through [`Self::event`]).
pub struct DepTracker {
    opts: DepOptions,
    records: Records,
    sh: Shadows,
    /// What each instruction address reads and writes of the registers.
    code: Code,
    info: InstructionInfoFactory,
    /// Values of the general-purpose registers as traced instructions left them (`None` when
    /// natively-run code may have changed them), to read library calls' arguments.
    values: [Option<u64>; 16],
    /// The record of the last `call` instruction's instance (one reference held), the
    /// statement of the library call it may lead to.
    last_call: Handle,
    /// The record of the last instruction's instance (no reference held: intact until the
    /// next instance is allocated), for a library call left to by a jump.
    last_step: Handle,
    /// Library calls made and not returned yet, innermost last (callbacks can make more).
    calls: Vec<PendingCall>,
    /// Scratch for a call instance's coordinates.
    call_coords: Vec<u64>,
    /// Sizes of heap blocks returned by the modelled allocators.
    blocks: HashMap<u64, u64>,
    /// Number of library calls whose effects are not modelled (unknown library code).
    pub unmodelled_calls: u64,
    /// Traced calls not returned yet, innermost last: (where the return address is, lowest
    /// stack pointer seen since). Calls that ran natively leave entries that a later return
    /// from a shallower frame drops.
    frames: Vec<(u64, u64)>,
}

/// The System V red zone: a function may use this much below its stack pointer.
const RED_ZONE: u64 = 128;
/// Deeper pending calls than this are not tracked (their frames are then never forgotten).
const MAX_FRAMES: usize = 1 << 16;

/// A library call between its `LibCall` and its `LibReturn`.
struct PendingCall {
    /// The call's statement instance (one reference held).
    rec: Handle,
    return_to: u64,
    model: CallModel,
}

/// Accesses applied as one instance outside [`DepTracker::step`] (a library call's).
#[derive(Default)]
struct Accesses<'a> {
    reg_reads: &'a [RegSpan],
    more_reg_reads: &'a [RegSpan],
    /// (address, bytes, written)
    mem: &'a [(u64, u64, bool)],
    effects: &'a [Effect],
    reg_writes: &'a [RegSpan],
}

/// Register bytes at `off` in the register file: (general-purpose, the bytes in that file).
#[inline(always)]
fn reg_bytes(off: u16, size: u8) -> (bool, Bytes) {
    let (off, location) = (off as usize, u64::from(off));
    let b = |off| Bytes {
        off,
        len: size as usize,
        through: Through::Register,
        location,
    };
    if off < GPR_BYTES {
        (true, b(off))
    } else {
        (false, b(off - GPR_BYTES))
    }
}

impl DepTracker {
    pub fn new(opts: DepOptions) -> DepTracker {
        DepTracker {
            opts,
            records: Records::new(),
            sh: Shadows::default(),
            code: Code::default(),
            info: InstructionInfoFactory::new(),
            values: [None; 16],
            last_call: 0,
            last_step: 0,
            calls: Vec::new(),
            call_coords: Vec::new(),
            blocks: HashMap::new(),
            unmodelled_calls: 0,
            frames: Vec::new(),
        }
    }

    /// Live records (statement instances still referenced by some shadow byte).
    pub fn live_records(&self) -> usize {
        self.records.live()
    }

    /// Pages of shadow memory allocated.
    pub fn shadow_pages(&self) -> usize {
        self.sh.pages.pages.len()
    }

    /// Non-instruction events: code bytes, library calls and returns, system calls. A library
    /// call's dependences go to `out` (see [`Self::step`]): on its argument registers at the
    /// call, on the rest at the return.
    pub fn event(&mut self, ev: &Event<'_>, out: &mut impl FnMut(&Dep<'_>)) {
        match *ev {
            Event::Code { addr, bytes } => {
                let mut d = Decoder::with_ip(64, bytes, addr, DecoderOptions::NONE);
                let insn = d.decode();
                let u = reg_use(&insn, &mut self.info);
                let id = self.code.insert(addr, u);
                if id as usize == self.records.pcs.len() {
                    self.records.pcs.push(addr);
                }
            }
            Event::LibCall(c) => self.lib_call(c, out),
            Event::LibReturn { pc, rax, .. } => self.lib_return(pc, rax, out),
            Event::Syscall(s) => self.syscall(s),
            _ => {}
        }
    }

    /// A library call starts: it is the statement instance of the `call` instruction at
    /// `c.site` (or of the instruction that left traced code), and reads its arguments now.
    fn lib_call(&mut self, c: &LibCall, out: &mut impl FnMut(&Dep<'_>)) {
        let values = self.values;
        let mut model = libcall::model(c.name.as_deref(), |i| values[libcall::ARG_INDEX[i]]);
        if let (true, Some(rax)) = (model.variadic, values[0]) {
            // Reading vector registers the call does not take would chain it to whatever
            // last wrote them.
            model.xmm_args = model.xmm_args.min((rax & 0xff) as usize);
        }
        if !model.known {
            self.unmodelled_calls += 1;
        }
        let rec = self.call_record(c.site);
        let acc = Accesses {
            reg_reads: &libcall::INT_ARGS[..model.int_args],
            more_reg_reads: &libcall::XMM_ARGS[..model.xmm_args],
            ..Accesses::default()
        };
        self.apply_as(rec, &acc, out);
        self.calls.push(PendingCall {
            rec,
            return_to: c.return_to,
            model,
        });
    }

    /// The record of the library call made at `site`, with a reference for the caller.
    fn call_record(&mut self, site: u64) -> Handle {
        let records = &mut self.records;
        let call = self.last_call;
        if call != 0 && records.stmt(call).pc == site {
            records.retain(call, 1);
            return call;
        }
        // Left by a jump (a tail call): the last instruction's instance. Its record may be
        // free already (not yet reused): copy it.
        let stmt = if self.last_step != 0 {
            records.stmt(self.last_step)
        } else {
            Stmt {
                context: 0,
                pc: site,
            }
        };
        self.call_coords.clear();
        let mut buf = [0; Record::INLINE];
        self.call_coords
            .extend_from_slice(records.coords(self.last_step, &mut buf));
        let (pc_id, _) = self.code.get(stmt.pc);
        let h = records.alloc(stmt, pc_id, &self.call_coords);
        records.retain(h, 1);
        h
    }

    /// A library call returns to `pc` with `rax`: its memory, hidden state and results, as
    /// its statement instance; then the registers it clobbered have no writer.
    fn lib_return(&mut self, pc: u64, rax: u64, out: &mut impl FnMut(&Dep<'_>)) {
        // The innermost call that returns to `pc`; calls inside it that did not return (a
        // `longjmp` out of a callback) are abandoned.
        let call = match self.calls.iter().rposition(|c| c.return_to == pc) {
            Some(i) => {
                for c in self.calls.split_off(i + 1) {
                    self.records.release(c.rec, 1);
                }
                self.calls.pop()
            }
            None => self.calls.pop(),
        };
        let written = match &call {
            Some(c) => {
                self.finish_call(c, rax, out);
                self.records.release(c.rec, 1);
                c.model.writes
            }
            None => &[],
        };
        // The callee clobbered the caller-saved registers; rax holds its result.
        for r in libcall::CALLER_SAVED {
            self.values[r] = None;
            if !written.contains(&((r * 8) as u16, 8)) {
                self.clear_reg_bytes(r * 8, 8);
            }
        }
        self.values[0] = Some(rax);
        for k in 0..32 {
            let base = GPR_BYTES + 32 * k;
            if written.contains(&(base as u16, 16)) {
                self.clear_reg_bytes(base + 16, 16);
            } else {
                self.clear_reg_bytes(base, 32);
            }
        }
    }

    /// Applies what `call` read and wrote, now that it returned `rax`.
    fn finish_call(&mut self, call: &PendingCall, rax: u64, out: &mut impl FnMut(&Dep<'_>)) {
        let m = &call.model;
        let mut mem: SmallVec<[(u64, u64, bool); 4]> = m
            .ranges
            .iter()
            .map(|r| (r.addr, r.len.bytes(rax), r.write))
            .collect();
        // Bytes of a new block: no writer.
        let mut fresh = None;
        match m.heap {
            Heap::Alloc { n } if rax != 0 => fresh = Some((rax, n)),
            Heap::Realloc { old, n } if rax != 0 => {
                let known = self.blocks.get(&old).copied();
                if old == 0 {
                    fresh = Some((rax, n));
                } else if rax != old {
                    // The block moved with its contents: the call read and wrote them.
                    let keep = known.unwrap_or(0).min(n);
                    mem.push((old, keep, false));
                    mem.push((rax, keep, true));
                    fresh = Some((rax + keep, n - keep));
                } else if let Some(size) = known.filter(|&size| size < n) {
                    fresh = Some((rax + size, n - size));
                }
            }
            _ => {}
        }
        let acc = Accesses {
            mem: &mem,
            effects: Effect::touched(m.effect),
            reg_writes: m.writes,
            ..Accesses::default()
        };
        self.apply_as(call.rec, &acc, out);
        if let Some((a, n)) = fresh {
            self.clear_memory(a, n);
        }
        match m.heap {
            Heap::Alloc { n } if rax != 0 => {
                self.blocks.insert(rax, n);
            }
            Heap::Realloc { old, n } if rax != 0 => {
                self.blocks.remove(&old);
                self.blocks.insert(rax, n);
            }
            Heap::Free { p } => {
                self.blocks.remove(&p);
            }
            _ => {}
        }
    }

    /// Applies `acc` as the instance of record `rec` (a library call's): register reads,
    /// memory reads, hidden-state reads, then the writes in the same order.
    fn apply_as(&mut self, rec: Handle, acc: &Accesses<'_>, out: &mut impl FnMut(&Dep<'_>)) {
        let mut coords = std::mem::take(&mut self.call_coords);
        coords.clear();
        let mut buf = [0; Record::INLINE];
        coords.extend_from_slice(self.records.coords(rec, &mut buf));
        let me = self.records.stmt(rec);
        let DepTracker {
            opts, records, sh, ..
        } = self;
        records.next_instance();
        let storage = opts.storage;
        let mut inst = Instance {
            records,
            me,
            coords: &coords,
            mine: rec,
            out,
        };
        let effects = acc.effects.iter().map(|e| (e.addr(), Effect::SIZE));
        let mem = |write: bool| {
            let ranges = acc.mem.iter().filter(move |m| m.2 == write);
            ranges.map(|&(a, n, _)| (a, n)).chain(effects.clone())
        };
        if opts.registers {
            for &(off, size) in acc.reg_reads.iter().chain(acc.more_reg_reads) {
                inst.reg_read(sh, off, size, storage);
            }
        }
        for (addr, n) in mem(false) {
            inst.mem_read(sh, addr, n, storage);
        }
        for (addr, n) in mem(true) {
            inst.mem_write(sh, addr, n, storage);
        }
        let report = storage && opts.registers;
        for &(off, size) in acc.reg_writes {
            inst.reg_write(sh, off, size, report);
        }
        self.call_coords = coords;
    }

    fn syscall(&mut self, s: &Syscall) {
        if !s.native {
            // The kernel returns in rax and clobbers rcx and r11.
            self.values[0] = s.ret.map(|r| r as u64);
            self.values[1] = None;
            self.values[11] = None;
        }
        let ret = match s.ret {
            Some(r) if r > 0 => r as u64,
            _ => return,
        };
        match s.nr {
            // read, pread64, recvfrom: the bytes come from outside the trace.
            0 | 17 | 45 => self.clear_memory(s.args[1], ret),
            // munmap: the range is gone.
            11 => self.clear_memory(s.args[0], s.args[1]),
            _ => {}
        }
    }

    /// Forgets who wrote and read `n` bytes at `addr` (filled from outside the trace).
    fn clear_memory(&mut self, addr: u64, n: u64) {
        // Bound the work on absurd sizes (a failed call's garbage arguments).
        let n = n.min(1 << 32);
        let mut a = addr;
        let end = addr.saturating_add(n);
        while a < end {
            let pn = a >> PAGE_BITS;
            let off = (a as usize) & (PAGE - 1);
            let take = ((PAGE - off) as u64).min(end - a) as usize;
            if let Some(page) = self.sh.pages.existing_mut(pn) {
                page.clear(&mut self.sh.mem_splits, &mut self.records, off, take);
            }
            a += take as u64;
        }
    }

    fn clear_reg_bytes(&mut self, off: usize, n: usize) {
        let n = n.min(REG_BYTES - off);
        let (sh, records) = (&mut self.sh, &mut self.records);
        if off < GPR_BYTES {
            sh.gprs.clear(&mut sh.gpr_splits, records, off, n);
        } else {
            sh.vecs
                .clear(&mut sh.vec_splits, records, off - GPR_BYTES, n);
        }
    }

    /// Follows the stack of traced calls; at a return, forgets the returned frame (see the
    /// module's documentation).
    #[inline(always)]
    fn track_frames(&mut self, insn: &Insn, call: bool, ret: bool) {
        if let Some(top) = self.frames.last_mut() {
            for r in insn.regs.iter().filter(|r| r.reg == Register::RSP) {
                top.1 = top.1.min(r.value);
            }
        }
        if call || ret {
            self.call_or_return(insn, call);
        }
    }

    /// [`Self::track_frames`] at a traced call (`call`) or return.
    #[inline(never)]
    fn call_or_return(&mut self, insn: &Insn, call: bool) {
        let slot = |kind| insn.mem.iter().find(|a| a.kind == kind).map(|a| a.addr);
        if call {
            if let Some(at) = slot(AccessKind::Write) {
                if self.frames.len() < MAX_FRAMES {
                    self.frames.push((at, at));
                }
            }
        } else {
            let Some(at) = slot(AccessKind::Read) else {
                return;
            };
            // Entries below the return address are calls that never returned through a
            // traced `ret` (run natively); a return with no entry (a callback's) forgets nothing.
            while self.frames.last().is_some_and(|&(e, _)| e < at) {
                self.frames.pop();
            }
            if self.frames.last().is_some_and(|&(e, _)| e == at) {
                if let Some((entry, low)) = self.frames.pop() {
                    let from = low.saturating_sub(RED_ZONE);
                    self.clear_memory(from, entry - from);
                }
            }
        }
    }

    /// One executed instruction with its iteration vector: reports its dependences to `out`.
    pub fn step(&mut self, step: &Step<'_>, out: &mut impl FnMut(&Dep<'_>)) {
        let insn = step.insn;
        let me = Stmt {
            context: step.context,
            pc: insn.pc,
        };
        let coords = step.coords;
        let DepTracker {
            opts,
            records,
            sh,
            code,
            values,
            last_call,
            last_step,
            ..
        } = self;
        records.next_instance();
        let (pc_id, uses) = code.get(insn.pc);
        let storage = opts.storage;
        // The record of this instance. It holds a reference of its own until the end of the
        // step, so that replacing its reads by its writes never frees it midway.
        let mine = records.alloc(me, pc_id, coords);
        records.retain(mine, 1);
        let mut inst = Instance {
            records,
            me,
            coords,
            mine,
            out,
        };

        // Return addresses are not data: the stack write of a call and the stack read of a
        // return stay out of the shadow (a call's only write and a return's only read).
        let transfer = insn.transfer.map(|t| t.kind);
        let (call, ret) = (
            transfer == Some(TransferKind::Call),
            transfer == Some(TransferKind::Return),
        );
        // Reads: flow dependences; this instance becomes the bytes' last reader (and the first
        // of those not read since their write).
        if opts.registers {
            for &op in &uses.reads {
                inst.reg_read_op(sh, op, storage);
            }
        }
        if !ret {
            for a in insn.mem.iter().filter(|a| a.kind == AccessKind::Read) {
                inst.mem_read(sh, a.addr, u64::from(a.size), storage);
            }
        }

        // Writes: anti and output dependences; this instance becomes the last writer.
        if !call {
            for a in insn.mem.iter().filter(|a| a.kind == AccessKind::Write) {
                inst.mem_write(sh, a.addr, u64::from(a.size), storage);
            }
        }
        let report = storage && opts.registers;
        for &op in &uses.writes {
            inst.reg_write_op(sh, op, report);
        }
        let records = inst.records;
        if call {
            // The statement of the library call this may lead to: keep its record.
            records.retain(mine, 1);
            records.release(std::mem::replace(last_call, mine), 1);
        }
        *last_step = mine;
        records.release(mine, 1);

        // Register values, for the arguments of natively-run library calls.
        for r in &insn.regs {
            let full = r.reg.full_register();
            if let Some(idx) = (full as usize)
                .checked_sub(Register::RAX as usize)
                .filter(|&i| i < 16)
            {
                values[idx] = if r.reg == full || r.reg.is_gpr32() {
                    Some(r.value)
                } else {
                    None
                };
            }
        }
        self.track_frames(insn, call, ret);
    }
}

/// `n` bytes of memory at `addr` when they lie in one page (the common case): the page
/// number and the bytes, labelled with `addr`.
#[inline(always)]
fn one_page(addr: u64, n: u64) -> Option<(u64, Bytes)> {
    let off = (addr as usize) & (PAGE - 1);
    (n > 0 && n <= (PAGE - off) as u64).then(|| {
        let b = Bytes {
            off,
            len: n as usize,
            through: Through::Memory,
            location: addr,
        };
        (addr >> PAGE_BITS, b)
    })
}

/// The pieces of `n` bytes of memory at `addr`, per page, labelled with `addr`.
fn mem_bytes(addr: u64, n: u64) -> impl Iterator<Item = (u64, Bytes)> {
    page_spans(addr, n).map(move |(pn, off, len)| {
        let b = Bytes {
            off,
            len,
            through: Through::Memory,
            location: addr,
        };
        (pn, b)
    })
}

/// The second level of the shadow table: pages by number, with the last page used cached
/// (consecutive accesses mostly hit the same page).
#[derive(Default)]
struct Pages {
    pages: Vec<Box<ShadowPage>>,
    index: FastMap<u64, u32>,
    last: Option<(u64, u32)>,
}

impl Pages {
    /// The page `pn`, allocated on first use.
    #[inline]
    fn page(&mut self, pn: u64) -> &mut ShadowPage {
        let i = match self.last {
            Some((n, i)) if n == pn => i,
            _ => self.find(pn),
        };
        &mut self.pages[i as usize]
    }

    #[inline(never)]
    fn find(&mut self, pn: u64) -> u32 {
        let next = self.pages.len() as u32;
        let i = *self.index.entry(pn).or_insert(next);
        if i == next {
            self.pages.push(Box::new(ShadowPage::new()));
        }
        self.last = Some((pn, i));
        i
    }

    fn existing_mut(&mut self, pn: u64) -> Option<&mut ShadowPage> {
        let i = *self.index.get(&pn)?;
        self.pages.get_mut(i as usize).map(|b| &mut **b)
    }
}

/// The (page number, offset, length) pieces of `size` bytes at `addr`, cut at page boundaries.
fn page_spans(addr: u64, size: u64) -> impl Iterator<Item = (u64, usize, usize)> {
    let mut a = addr;
    let end = addr.saturating_add(size);
    std::iter::from_fn(move || {
        if a >= end {
            return None;
        }
        let off = (a as usize) & (PAGE - 1);
        let len = ((PAGE - off) as u64).min(end - a) as usize;
        let span = (a >> PAGE_BITS, off, len);
        a += len as u64;
        Some(span)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptrace_runner::{MemAccess, RegWrite, Transfer};
    use std::collections::{BTreeSet, HashMap};

    /// Instructions mixing whole, partial and zero-extending register accesses.
    const CODE: &[&[u8]] = &[
        &[0x48, 0x89, 0xd8],       // mov rax, rbx
        &[0x89, 0xd8],             // mov eax, ebx
        &[0x88, 0xd8],             // mov al, bl
        &[0x88, 0xe3],             // mov bl, ah
        &[0x66, 0x01, 0xd8],       // add ax, bx
        &[0x48, 0x01, 0xc3],       // add rbx, rax
        &[0x0f, 0x28, 0xc1],       // movaps xmm0, xmm1
        &[0xf2, 0x0f, 0x58, 0xc8], // addsd xmm1, xmm0
        &[0xc5, 0xfc, 0x28, 0xc1], // vmovaps ymm0, ymm1
        &[0xc5, 0xf8, 0x28, 0xc8], // vmovaps xmm1, xmm0 (zeroes the upper half)
        &[0x31, 0xc0],             // xor eax, eax
        &[0x90],                   // nop
    ];

    /// A VEX instruction's destination, which iced names by its zmm register, is written in
    /// the register shadow: an accumulator kept in xmm0 by `-mavx` code carries its flow
    /// dependence from one iteration to the next.
    #[test]
    fn vex_destinations_are_written() {
        // vaddsd xmm0, xmm0, qword ptr [rax]; vxorpd xmm2, xmm2, xmm2.
        for (bytes, reg) in [
            (&[0xc5u8, 0xfb, 0x58, 0x00][..], 0),
            (&[0xc5, 0xe9, 0x57, 0xd2], 2),
        ] {
            let insn = iced_x86::Decoder::new(64, bytes, iced_x86::DecoderOptions::NONE).decode();
            let u = reg_use(&insn, &mut InstructionInfoFactory::new());
            let at = (GPR_BYTES + 32 * reg) as u16;
            assert!(u.writes.contains(&(at, 32)), "{insn}: {u:?}");
        }
    }

    /// A byte-per-byte reference: writer, first reader and last reader of every byte, by
    /// instance number.
    #[derive(Default)]
    struct Reference {
        writer: HashMap<(bool, u64), u64>,
        first: HashMap<(bool, u64), u64>,
        reader: HashMap<(bool, u64), u64>,
    }

    type Found = BTreeSet<(DepKind, Through, u64, u64)>;

    impl Reference {
        fn step(&mut self, me: u64, u: &RegUse, mem: &[MemAccess], found: &mut Found) {
            let bytes = |reg: bool, off: u64, n: u64| (off..off + n).map(move |b| (reg, b));
            let mut read = |key: (bool, u64), through, found: &mut Found| {
                if let Some(&w) = self.writer.get(&key) {
                    found.insert((DepKind::Flow, through, w, me));
                }
                self.first.entry(key).or_insert(me);
                self.reader.insert(key, me);
            };
            for &(off, n) in &u.reads {
                for k in bytes(true, off.into(), n.into()) {
                    read(k, Through::Register, found);
                }
            }
            for a in mem.iter().filter(|a| a.kind == AccessKind::Read) {
                for k in bytes(false, a.addr, a.size.into()) {
                    read(k, Through::Memory, found);
                }
            }
            let mut write = |key: (bool, u64), through, found: &mut Found| {
                if let Some(r) = self.first.remove(&key).filter(|&r| r != me) {
                    found.insert((DepKind::Anti, through, r, me));
                }
                if let Some(r) = self.reader.remove(&key).filter(|&r| r != me) {
                    found.insert((DepKind::Anti, through, r, me));
                }
                if let Some(w) = self.writer.insert(key, me).filter(|&w| w != me) {
                    found.insert((DepKind::Output, through, w, me));
                }
            };
            for a in mem.iter().filter(|a| a.kind == AccessKind::Write) {
                for k in bytes(false, a.addr, a.size.into()) {
                    write(k, Through::Memory, found);
                }
            }
            for &(off, n) in &u.writes {
                for k in bytes(true, off.into(), n.into()) {
                    write(k, Through::Register, found);
                }
            }
        }
    }

    /// Random instructions and memory accesses (every size, any alignment, across a page
    /// boundary): the granule shadow reports exactly the dependences of a per-byte shadow.
    #[test]
    fn granule_shadow_matches_a_byte_shadow() {
        let mut rng = fastrand::Rng::with_seed(1);
        let mut next = |m: u64| rng.u64(..m);
        let mut tracker = DepTracker::new(DepOptions::default());
        let mut info = InstructionInfoFactory::new();
        let mut uses = Vec::new();
        for (i, bytes) in CODE.iter().enumerate() {
            let addr = 0x40_0000 + 16 * i as u64;
            tracker.event(&Event::Code { addr, bytes }, &mut |_| {});
            let insn = Decoder::with_ip(64, bytes, addr, DecoderOptions::NONE).decode();
            uses.push((addr, reg_use(&insn, &mut info)));
        }
        let mut reference = Reference::default();
        let (mut expected, mut got) = (Found::new(), Found::new());
        let mut kinds = BTreeSet::new();
        for me in 1..20_000u64 {
            let (pc, u) = &uses[next(uses.len() as u64) as usize];
            let mut mem: Vec<MemAccess> = (0..next(3))
                .map(|_| MemAccess {
                    addr: 0x1ff0 + next(40),
                    size: [1, 2, 4, 8, 16, 32][next(6) as usize],
                    kind: if next(2) == 0 {
                        AccessKind::Read
                    } else {
                        AccessKind::Write
                    },
                })
                .collect();
            mem.sort_by_key(|a| a.kind == AccessKind::Write);
            reference.step(me, u, &mem, &mut expected);
            let insn = Insn {
                pc: *pc,
                len: 1,
                mem,
                regs: Vec::new(),
                transfer: None,
            };
            let coords = [me];
            let step = Step {
                insn: &insn,
                context: 0,
                coords: &coords,
            };
            tracker.step(&step, &mut |d| {
                got.insert((
                    d.kind,
                    d.through,
                    d.producer_coords[0],
                    d.consumer_coords[0],
                ));
            });
            assert_eq!(got, expected, "instance {me}");
            kinds.extend(got.iter().map(|d| (d.0, d.1)));
            got.clear();
            expected.clear();
        }
        assert_eq!(kinds.len(), 6, "every kind through both: {kinds:?}");
    }

    /// A dependence, owned: statements by address.
    #[derive(Clone, Debug, PartialEq, Eq)]
    struct D {
        kind: DepKind,
        through: Through,
        producer: u64,
        pc: Vec<u64>,
        consumer: u64,
        cc: Vec<u64>,
        location: u64,
    }

    /// Synthetic events into a tracker, collecting its dependences.
    struct Harness {
        t: DepTracker,
        deps: Vec<D>,
    }

    const CALL: u64 = 0x40_1000;
    const PLT: u64 = 0x40_0100;
    const GOT: u64 = 0x40_4000;
    const STACK: u64 = 0x7ffe_0000;
    const LIB: u64 = 0x7f00_0000_0000;

    impl Harness {
        fn new(code: &[(u64, &[u8])]) -> Harness {
            let mut t = DepTracker::new(DepOptions::default());
            for &(addr, bytes) in code {
                t.event(&Event::Code { addr, bytes }, &mut |_| {});
            }
            // A call (`call rel32`) and a PLT stub (`jmp [rip+0]`).
            let stubs: [(u64, &[u8]); 2] = [
                (CALL, &[0xe8, 0, 0, 0, 0]),
                (PLT, &[0xff, 0x25, 0, 0, 0, 0]),
            ];
            for (addr, bytes) in stubs {
                t.event(&Event::Code { addr, bytes }, &mut |_| {});
            }
            Harness {
                t,
                deps: Vec::new(),
            }
        }

        fn insn(&mut self, insn: &Insn, context: NodeId, coords: &[u64]) {
            let deps = &mut self.deps;
            let step = Step {
                insn,
                context,
                coords,
            };
            self.t.step(&step, &mut |d| deps.push(own(d)));
        }

        /// An instruction at `pc` with memory accesses and register values written.
        fn step(&mut self, pc: u64, coords: &[u64], mem: &[MemAccess], regs: &[RegWrite]) {
            let insn = Insn {
                pc,
                len: 1,
                mem: mem.to_vec(),
                regs: regs.to_vec(),
                transfer: None,
            };
            self.insn(&insn, 0, coords);
        }

        fn event(&mut self, ev: &Event<'_>) {
            let deps = &mut self.deps;
            self.t.event(ev, &mut |d| deps.push(own(d)));
        }

        /// `call name@plt` at [`CALL`] in iteration `coords`, through the PLT stub, run
        /// natively and returning `rax`; `inside` runs between the call and its return.
        fn call_with(
            &mut self,
            coords: &[u64],
            name: &str,
            rax: u64,
            inside: impl FnOnce(&mut Self),
        ) {
            let call = Insn {
                pc: CALL,
                len: 5,
                mem: vec![write(STACK - 8, 8)],
                regs: Vec::new(),
                transfer: Some(Transfer {
                    kind: TransferKind::Call,
                    target: PLT,
                }),
            };
            self.insn(&call, 0, coords);
            let jmp = Insn {
                pc: PLT,
                len: 6,
                mem: vec![read(GOT, 8)],
                regs: Vec::new(),
                transfer: Some(Transfer {
                    kind: TransferKind::Jump,
                    target: LIB,
                }),
            };
            self.insn(&jmp, 1, coords);
            let c = LibCall {
                site: CALL,
                target: LIB,
                return_to: CALL + 5,
                name: Some(format!("{name}@GLIBC_2.2.5")),
            };
            self.event(&Event::LibCall(&c));
            inside(self);
            self.event(&Event::LibReturn {
                pc: CALL + 5,
                rax,
                cost: 0,
            });
        }

        fn call(&mut self, coords: &[u64], name: &str, rax: u64) {
            self.call_with(coords, name, rax, |_| {});
        }

        /// Dependences of `kind` from statement `from` to statement `to`.
        fn between(&self, kind: DepKind, from: u64, to: u64) -> Vec<&D> {
            let deps = self.deps.iter();
            deps.filter(|d| d.kind == kind && d.producer == from && d.consumer == to)
                .collect()
        }
    }

    fn own(d: &Dep<'_>) -> D {
        D {
            kind: d.kind,
            through: d.through,
            producer: d.producer.pc,
            pc: d.producer_coords.to_vec(),
            consumer: d.consumer.pc,
            cc: d.consumer_coords.to_vec(),
            location: d.location,
        }
    }

    fn read(addr: u64, size: u32) -> MemAccess {
        MemAccess {
            addr,
            size,
            kind: AccessKind::Read,
        }
    }

    fn write(addr: u64, size: u32) -> MemAccess {
        MemAccess {
            addr,
            size,
            kind: AccessKind::Write,
        }
    }

    fn reg(reg: Register, value: u64) -> RegWrite {
        RegWrite { reg, value }
    }

    const LOAD: u64 = 0x40_0000; // mov eax, [rbx]
    const STORE: u64 = 0x40_0010; // mov [rbx], ecx
    const SET_RDI: u64 = 0x40_0020; // mov rdi, rbx
    const SET_RSI: u64 = 0x40_0030; // mov rsi, rbx
    const SET_RDX: u64 = 0x40_0040; // mov edx, 16
    const LOAD_X: u64 = 0x40_0050; // movsd xmm0, [rbx]
    const STORE_X: u64 = 0x40_0060; // movsd [rbx+8], xmm0
    const CODE2: &[(u64, &[u8])] = &[
        (LOAD, &[0x8b, 0x03]),
        (STORE, &[0x89, 0x0b]),
        (SET_RDI, &[0x48, 0x89, 0xdf]),
        (SET_RSI, &[0x48, 0x89, 0xde]),
        (SET_RDX, &[0xba, 0x10, 0, 0, 0]),
        (LOAD_X, &[0xf2, 0x0f, 0x10, 0x03]),
        (STORE_X, &[0xf2, 0x0f, 0x11, 0x43, 0x08]),
    ];

    /// Readers in iterations 0, 1 and 2, then a write in iteration 2: the anti dependences
    /// from the first reader (the largest distance) and from the last are both reported.
    #[test]
    fn anti_dependences_from_the_first_and_the_last_reader() {
        let mut h = Harness::new(CODE2);
        for i in 0..3 {
            h.step(LOAD, &[i], &[read(0x1000, 4)], &[]);
        }
        h.step(STORE, &[2], &[write(0x1000, 4)], &[]);
        let mut anti: Vec<Vec<u64>> = h
            .between(DepKind::Anti, LOAD, STORE)
            .into_iter()
            .filter(|d| d.through == Through::Memory)
            .map(|d| d.pc.clone())
            .collect();
        anti.sort();
        assert_eq!(anti, vec![vec![0], vec![2]]);
        // The write cleared both readers: a second write has only an output dependence.
        h.deps.clear();
        h.step(STORE, &[3], &[write(0x1000, 4)], &[]);
        let mem: Vec<&D> = h
            .deps
            .iter()
            .filter(|d| d.through == Through::Memory)
            .collect();
        assert_eq!(mem.len(), 1, "{mem:?}");
        assert_eq!(mem[0].kind, DepKind::Output);
    }

    /// The return address a call pushes and a return pops is not data: no dependence through
    /// the stack slot, not even on a data write to that slot before; `call [mem]` still reads
    /// its operand.
    #[test]
    fn return_addresses_are_not_data() {
        let mut h = Harness::new(&[(0x40_0200, &[0xc3]), (0x40_0300, &[0xff, 0x10])]);
        let slot = STACK - 8;
        h.step(STORE, &[0], &[write(slot, 8)], &[]);
        for i in 0..3 {
            let call = Insn {
                pc: 0x40_0300, // call [rax]
                len: 2,
                mem: vec![read(0x5000, 8), write(slot, 8)],
                regs: Vec::new(),
                transfer: Some(Transfer {
                    kind: TransferKind::Call,
                    target: 0x40_0200,
                }),
            };
            h.insn(&call, 0, &[i]);
            let ret = Insn {
                pc: 0x40_0200,
                len: 1,
                mem: vec![read(slot, 8)],
                regs: Vec::new(),
                transfer: Some(Transfer {
                    kind: TransferKind::Return,
                    target: 0x40_0302,
                }),
            };
            h.insn(&ret, 2, &[i]);
            // The function pointer is rewritten in each iteration.
            h.step(STORE, &[i], &[write(0x5000, 8)], &[]);
        }
        let through_slot: Vec<&D> = h.deps.iter().filter(|d| d.location == slot).collect();
        assert!(through_slot.is_empty(), "{through_slot:?}");
        // The operand: flow from its writer, anti to the next write.
        let flow = h.between(DepKind::Flow, STORE, 0x40_0300);
        assert_eq!(flow.len(), 2, "{flow:?}");
        assert!(flow.iter().all(|d| d.location == 0x5000));
        assert_eq!(h.between(DepKind::Anti, 0x40_0300, STORE).len(), 3);
    }

    /// The loop-carried dependences between successive calls through `effect`'s state.
    fn carried_through(h: &Harness, effect: Effect) -> Vec<(DepKind, u64, u64)> {
        let mut v: Vec<(DepKind, u64, u64)> = h
            .between_all(CALL, CALL)
            .filter(|d| d.through == Through::Memory && Effect::at(d.location) == Some(effect))
            .map(|d| (d.kind, d.pc[0], d.cc[0]))
            .collect();
        v.sort();
        v
    }

    impl Harness {
        fn between_all(&self, from: u64, to: u64) -> impl Iterator<Item = &D> {
            let deps = self.deps.iter();
            deps.filter(move |d| d.producer == from && d.consumer == to)
        }
    }

    #[test]
    fn effects_have_distinct_addresses_outside_user_space() {
        for e in Effect::ALL {
            assert!(e.addr() > 0x0000_7fff_ffff_ffff);
            for b in 0..Effect::SIZE {
                assert_eq!(Effect::at(e.addr() + b), Some(e));
            }
            assert_eq!(Effect::at(e.addr() + Effect::SIZE), None);
            assert!(!e.describe().is_empty());
        }
        assert_eq!(Effect::at(0x1000), None);
        let addrs: BTreeSet<u64> = Effect::ALL.iter().map(|e| e.addr()).collect();
        assert_eq!(addrs.len(), Effect::ALL.len());
    }

    /// `for (i...) x = rand();` and `for (i...) printf(...)`: successive calls are chained by
    /// a flow (and an output) dependence through the hidden state, carried by the loop.
    #[test]
    fn hidden_state_serializes_calls() {
        for (name, effect) in [("rand", Effect::Random), ("printf", Effect::Output)] {
            let mut h = Harness::new(CODE2);
            for i in 0..4 {
                h.call(&[i], name, 7);
            }
            let deps = carried_through(&h, effect);
            for i in 1..4 {
                assert!(
                    deps.contains(&(DepKind::Flow, i - 1, i)),
                    "{name}: {deps:?}"
                );
                assert!(
                    deps.contains(&(DepKind::Output, i - 1, i)),
                    "{name}: {deps:?}"
                );
            }
            assert!(deps.iter().all(|d| d.1 + 1 == d.2), "{name}: {deps:?}");
            assert_eq!(h.t.unmodelled_calls, 0);
            // Records do not pile up.
            assert!(h.t.live_records() < 10, "{}", h.t.live_records());
        }
    }

    /// `y = sqrt(x)`: the load of `x` flows into the call, the call into the store of `y`,
    /// through xmm0; and the loop has no dependence through hidden state.
    #[test]
    fn pure_math_chains_through_xmm0() {
        let mut h = Harness::new(CODE2);
        for i in 0..3 {
            h.step(LOAD_X, &[i], &[read(0x1000 + 16 * i, 8)], &[]);
            h.call(&[i], "sqrt", 0);
            h.step(STORE_X, &[i], &[write(0x1008 + 16 * i, 8)], &[]);
        }
        let xmm0 = GPR_BYTES as u64;
        for (from, to) in [(LOAD_X, CALL), (CALL, STORE_X)] {
            let flow = h.between(DepKind::Flow, from, to);
            assert_eq!(flow.len(), 3, "{from:x} -> {to:x}: {flow:?}");
            assert!(flow
                .iter()
                .all(|d| d.through == Through::Register && d.location == xmm0 && d.pc == d.cc));
        }
        let hidden: Vec<&D> = h
            .deps
            .iter()
            .filter(|d| Effect::at(d.location).is_some() && d.through == Through::Memory)
            .collect();
        assert!(hidden.is_empty(), "{hidden:?}");
        assert_eq!(h.t.unmodelled_calls, 0);
    }

    /// `for (i...) memmove(buf + 1, buf, 16)`: each call reads what the previous one wrote.
    #[test]
    fn memmove_in_a_loop_carries_a_flow_dependence() {
        let mut h = Harness::new(CODE2);
        let buf = 0x2000;
        for i in 0..3 {
            h.step(SET_RDI, &[i], &[], &[reg(Register::RDI, buf + 1)]);
            h.step(SET_RSI, &[i], &[], &[reg(Register::RSI, buf)]);
            h.step(SET_RDX, &[i], &[], &[reg(Register::RDX, 16)]);
            h.call(&[i], "memmove", buf + 1);
        }
        let flow: Vec<(u64, u64)> = h
            .between(DepKind::Flow, CALL, CALL)
            .iter()
            .filter(|d| d.through == Through::Memory)
            .map(|d| (d.pc[0], d.cc[0]))
            .collect();
        assert_eq!(flow, vec![(0, 1), (1, 2)]);
        // The arguments flow into the call.
        for set in [SET_RDI, SET_RSI, SET_RDX] {
            assert_eq!(h.between(DepKind::Flow, set, CALL).len(), 3, "{set:x}");
        }
        // A later load of the destination depends on the call, not on older writers.
        h.deps.clear();
        h.step(LOAD, &[3], &[read(buf + 4, 4)], &[]);
        let flow = h.between(DepKind::Flow, CALL, LOAD);
        assert_eq!(flow.len(), 1);
        assert_eq!(flow[0].pc, vec![2]);
        assert_eq!(h.t.unmodelled_calls, 0);
    }

    /// A callback (a `qsort` comparator) that makes a library call of its own: each call
    /// finishes as its own instance, the outer one after the inner one.
    #[test]
    fn nested_calls_finish_innermost_first() {
        let mut h = Harness::new(CODE2);
        h.call_with(&[0], "qsort", 0, |h| {
            // The comparator, in another context, calls rand.
            h.call_with(&[0, 5], "rand", 3, |_| {});
        });
        // rand's instance (coordinates [0, 5]) then qsort's ([0]) write the hidden state.
        let writes: Vec<(DepKind, Vec<u64>, Vec<u64>)> = h
            .between_all(CALL, CALL)
            .filter(|d| d.location == Effect::Random.addr())
            .map(|d| (d.kind, d.pc.clone(), d.cc.clone()))
            .collect();
        assert!(
            writes.contains(&(DepKind::Output, vec![0, 5], vec![0])),
            "{writes:?}"
        );
        assert_eq!(h.t.unmodelled_calls, 1);
        assert!(h.t.calls.is_empty());
    }
}
