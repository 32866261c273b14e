//! Dynamic dependences (section 4 of the POLY-PROF paper): shadow memory and a register shadow
//! turn each instruction's accesses into flow (read after write), anti (write after read) and
//! output (write after write) dependences, each labelled with the producer's and the consumer's
//! iteration vectors.
//!
//! Every shadowed byte (of memory or of a register) holds a handle to the *record* of its last
//! writer and of its last reader since that write: the statement (context, instruction address)
//! and its coordinates. Records are reference-counted by the bytes that point to them, so memory
//! follows the data the program keeps live, not the length of the trace.
//!
//! Shadow memory is a two-level table (page number → page), allocated per 4 KiB page touched,
//! holding a writer and a reader handle per 4-byte granule: 2 bytes of shadow per byte of traced
//! memory. A granule whose bytes differ is split into per-byte handles (module `shadow`), so
//! dependences stay byte-precise while the common access touches one or two slots. Registers
//! are shadowed the same way, one granule per general-purpose register and two per ymm
//! register. Only the last reader since the last write is kept, which bounds the work per
//! access; anti dependences from earlier readers of the same bytes are not reported.

use crate::schedule::{NodeId, Step};
use crate::shadow::{self, Splits};
use iced_x86::{
    Decoder, DecoderOptions, EncodingKind, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
    OpKind, Register,
};
use ptrace_runner::{AccessKind, Event, MemAccess, Syscall};
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

struct Record {
    stmt: Stmt,
    coords: Coords,
}

/// Coordinates of a record: inline up to [`Coords::INLINE`] loops deep (copied on every
/// instruction, so without the branches of a general small vector).
#[derive(Default)]
struct Coords {
    len: u32,
    inline: [u64; Coords::INLINE],
    deeper: Vec<u64>,
}

impl Coords {
    const INLINE: usize = 6;

    #[inline]
    fn set(&mut self, c: &[u64]) {
        self.len = c.len() as u32;
        if c.len() <= Self::INLINE {
            for (d, s) in self.inline.iter_mut().zip(c) {
                *d = *s;
            }
        } else {
            self.deeper.clear();
            self.deeper.extend_from_slice(c);
        }
    }

    #[inline]
    fn get(&self) -> &[u64] {
        let n = self.len as usize;
        if n <= Self::INLINE {
            &self.inline[..n]
        } else {
            &self.deeper
        }
    }
}

/// What the shadow operations touch of a record, kept apart from the statement and coordinates
/// so that reference counting stays in few cache lines.
#[derive(Clone, Copy, Default)]
struct Meta {
    /// Shadow bytes referring to the record.
    refs: u32,
    /// One bit per (kind, through) already reported on this producer by the instance `epoch`:
    /// each producer appears once per kind in an instance's dependences.
    reported: u32,
    epoch: u64,
}

const PAGE_BITS: u32 = 12;
const PAGE: usize = 1 << PAGE_BITS;

/// Writers and last readers of a shadowed byte range, as `N` granules of `G` bytes (see
/// [`shadow`]).
struct Shadow<const G: usize, const N: usize> {
    writer: [u32; N],
    reader: [u32; N],
}

impl<const G: usize, const N: usize> Shadow<G, N> {
    fn new() -> Self {
        Shadow {
            writer: [0; N],
            reader: [0; N],
        }
    }
}

/// Memory granule: an `int`.
const MEM_GRAIN: usize = 4;
type ShadowPage = Shadow<MEM_GRAIN, { PAGE / MEM_GRAIN }>;
/// A general-purpose register is one granule; a ymm register two (its xmm half and the rest).
type GprShadow = Shadow<8, 16>;
type VecShadow = Shadow<16, 64>;

/// Bytes of the register shadow: 16 general-purpose registers of 8 bytes, then 32 vector
/// registers of 32 bytes (ymm; xmm is the low half).
const GPR_BYTES: usize = 16 * 8;
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
    if reg.is_xmm() || reg.is_ymm() {
        let n = reg.number();
        if n >= 32 {
            return None;
        }
        let base = (GPR_BYTES + n * 32) as u16;
        let size = if reg.is_ymm() || (write && vex) {
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

/// Library functions whose effect on memory is modelled when they run natively.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Model {
    /// memcpy / memmove: copy the shadow of `n` bytes from `src` to `dst`.
    Copy { dst: u64, src: u64, n: u64 },
    /// memset and friends: `n` bytes at `dst` are written from outside the trace.
    Fill { dst: u64, n: u64 },
    /// calloc(n, size), malloc(size): the returned block is fresh.
    Alloc { n: u64 },
    /// realloc(p, n): the block moves with its contents.
    Realloc { old: u64, n: u64 },
    /// fread(buf, size, n, f): `size * returned` bytes at `buf` come from outside.
    Fread { dst: u64, size: u64 },
    /// fgets(buf, n, f), read-like: `n` bytes at `dst` may come from outside.
    FillAll { dst: u64, n: u64 },
    /// Known to write no memory of the program's (output, math, process control).
    Nothing,
}

/// Reference-counted records of statement instances; handle 0 is "nobody".
struct Records {
    recs: Vec<Record>,
    meta: Vec<Meta>,
    free: Vec<Handle>,
    /// Number of the instance being processed (for [`Meta::reported`]).
    epoch: u64,
}

impl Records {
    fn new() -> Records {
        Records {
            recs: vec![Record {
                stmt: Stmt { context: 0, pc: 0 },
                coords: Coords::default(),
            }],
            meta: vec![Meta {
                refs: u32::MAX,
                ..Meta::default()
            }],
            free: Vec::new(),
            epoch: 0,
        }
    }

    fn alloc(&mut self, stmt: Stmt, coords: &[u64]) -> Handle {
        if let Some(h) = self.free.pop() {
            let r = &mut self.recs[h as usize];
            r.stmt = stmt;
            r.coords.set(coords);
            self.meta[h as usize] = Meta::default();
            h
        } else {
            let mut r = Record {
                stmt,
                coords: Coords::default(),
            };
            r.coords.set(coords);
            self.recs.push(r);
            self.meta.push(Meta::default());
            (self.recs.len() - 1) as Handle
        }
    }

    #[inline]
    fn retain(&mut self, h: Handle, n: u32) {
        if h != 0 {
            self.meta[h as usize].refs += n;
        }
    }

    #[inline]
    fn release(&mut self, h: Handle, n: u32) {
        if h != 0 && n != 0 {
            let m = &mut self.meta[h as usize];
            m.refs -= n;
            if m.refs == 0 {
                self.free.push(h);
            }
        }
    }

    /// Whether the current instance has not reported a dependence of kind `bit` on `h` yet
    /// (and from now on, it has).
    #[inline]
    fn first_report(&mut self, h: Handle, bit: u32) -> bool {
        let m = &mut self.meta[h as usize];
        if m.epoch != self.epoch {
            m.epoch = self.epoch;
            m.reported = 0;
        }
        let first = m.reported & bit == 0;
        m.reported |= bit;
        first
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
    /// Reports a dependence of `kind` on the record `h`, unless it is nobody, this instance,
    /// or already reported by this instance.
    #[inline(always)]
    fn report_one(&mut self, h: Handle, kind: DepKind, through: Through, location: u64) {
        let bit = 1 << (kind as u32 * 2 + through as u32);
        if h == 0 || h == self.mine || !self.records.first_report(h, bit) {
            return;
        }
        let p = &self.records.recs[h as usize];
        (self.out)(&Dep {
            kind,
            through,
            producer: p.stmt,
            consumer: self.me,
            producer_coords: p.coords.get(),
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
    /// split in neither the writer nor the reader shadow: the common case, done without the
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
        let any = sh.writer[g] | sh.reader[g] | sh.writer[last] | sh.reader[last];
        (any & shadow::SPLIT == 0).then_some(g..last + 1)
    }

    /// A read of bytes `b`: flow dependences on their writers; with `readers`, this instance
    /// becomes their last reader.
    #[inline]
    fn read<const G: usize, const N: usize>(
        &mut self,
        sh: &mut Shadow<G, N>,
        splits: &mut Splits<G>,
        b: Bytes,
        readers: bool,
    ) {
        if let Some(gs) = Self::whole(sh, b.off, b.len) {
            for g in gs {
                let w = sh.writer[g];
                self.report_one(w, DepKind::Flow, b.through, b.location);
                let r = sh.reader[g];
                if readers && r != self.mine {
                    sh.reader[g] = self.mine;
                    self.records.release(r, G as u32);
                    self.records.retain(self.mine, G as u32);
                }
            }
            return;
        }
        self.report(&sh.writer, splits, b, DepKind::Flow);
        if readers {
            let n = shadow::overwrite(
                &mut sh.reader,
                splits,
                self.records,
                b.off,
                b.len,
                self.mine,
            );
            self.records.retain(self.mine, n);
        }
    }

    /// A write of bytes `b`: with `report`, anti dependences on their last readers and output
    /// dependences on their writers; this instance becomes their writer, with no reader since.
    #[inline]
    fn write<const G: usize, const N: usize>(
        &mut self,
        sh: &mut Shadow<G, N>,
        splits: &mut Splits<G>,
        b: Bytes,
        report: bool,
    ) {
        if let Some(gs) = Self::whole(sh, b.off, b.len) {
            for g in gs {
                let (r, w) = (sh.reader[g], sh.writer[g]);
                if report {
                    self.report_one(r, DepKind::Anti, b.through, b.location);
                    self.report_one(w, DepKind::Output, b.through, b.location);
                }
                sh.reader[g] = 0;
                sh.writer[g] = self.mine;
                // `mine` keeps a reference of its own during the step: never freed here.
                self.records.retain(self.mine, G as u32);
                self.records.release(r, G as u32);
                self.records.release(w, G as u32);
            }
            return;
        }
        if report {
            self.report(&sh.reader, splits, b, DepKind::Anti);
            self.report(&sh.writer, splits, b, DepKind::Output);
        }
        shadow::overwrite(&mut sh.reader, splits, self.records, b.off, b.len, 0);
        let n = shadow::overwrite(
            &mut sh.writer,
            splits,
            self.records,
            b.off,
            b.len,
            self.mine,
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
    pages: Pages,
    gprs: GprShadow,
    vecs: VecShadow,
    /// Split granules of memory, general-purpose and vector registers.
    mem_splits: Splits<MEM_GRAIN>,
    gpr_splits: Splits<8>,
    vec_splits: Splits<16>,
    code: FastMap<u64, RegUse>,
    info: InstructionInfoFactory,
    /// Values of the general-purpose registers as traced instructions left them (`None` when
    /// natively-run code may have changed them), to read library calls' arguments.
    values: [Option<u64>; 16],
    pending_model: Option<Model>,
    /// Sizes of heap blocks returned by the modelled allocators.
    blocks: HashMap<u64, u64>,
    /// Number of library calls whose memory effects are not modelled.
    pub unmodelled_calls: u64,
}

impl DepTracker {
    pub fn new(opts: DepOptions) -> DepTracker {
        DepTracker {
            opts,
            records: Records::new(),
            pages: Pages::default(),
            gprs: Shadow::new(),
            vecs: Shadow::new(),
            mem_splits: Splits::default(),
            gpr_splits: Splits::default(),
            vec_splits: Splits::default(),
            code: FastMap::default(),
            info: InstructionInfoFactory::new(),
            values: [None; 16],
            pending_model: None,
            blocks: HashMap::new(),
            unmodelled_calls: 0,
        }
    }

    /// Live records (statement instances still referenced by some shadow byte).
    pub fn live_records(&self) -> usize {
        self.records.live()
    }

    /// Pages of shadow memory allocated.
    pub fn shadow_pages(&self) -> usize {
        self.pages.pages.len()
    }

    /// Non-instruction events: code bytes, library calls and returns, system calls.
    pub fn event(&mut self, ev: &Event<'_>) {
        match *ev {
            Event::Code { addr, bytes } => {
                let mut d = Decoder::with_ip(64, bytes, addr, DecoderOptions::NONE);
                let insn = d.decode();
                let u = reg_use(&insn, &mut self.info);
                self.code.insert(addr, u);
            }
            Event::LibCall(c) => {
                self.pending_model = c.name.as_deref().and_then(|n| self.model_for(n));
                if self.pending_model.is_none() {
                    self.unmodelled_calls += 1;
                }
            }
            Event::LibReturn { rax, .. } => {
                if let Some(m) = self.pending_model.take() {
                    self.apply_model(m, rax);
                }
                // The callee clobbered the caller-saved registers; rax holds its result.
                for r in [0usize, 1, 2, 6, 7, 8, 9, 10, 11] {
                    self.values[r] = None;
                    self.clear_reg_bytes(r * 8, 8);
                }
                self.values[0] = Some(rax);
                self.clear_reg_bytes(GPR_BYTES, REG_BYTES - GPR_BYTES);
            }
            Event::Syscall(s) => self.syscall(s),
            _ => {}
        }
    }

    fn arg(&self, i: usize) -> Option<u64> {
        // rdi, rsi, rdx, rcx, r8, r9 in the register numbering rax, rcx, rdx, rbx, rsp, rbp,
        // rsi, rdi, r8...
        const ARGS: [usize; 6] = [7, 6, 2, 1, 8, 9];
        self.values[ARGS[i]]
    }

    fn model_for(&self, name: &str) -> Option<Model> {
        let base = name.split('@').next().unwrap_or(name);
        let (a0, a1, a2) = (self.arg(0), self.arg(1), self.arg(2));
        Some(match base {
            "memcpy" | "memmove" | "__memcpy_chk" | "__memmove_chk" | "mempcpy" => Model::Copy {
                dst: a0?,
                src: a1?,
                n: a2?,
            },
            "memset" | "__memset_chk" | "bzero" | "explicit_bzero" => Model::Fill {
                dst: a0?,
                n: if base == "memset" || base == "__memset_chk" {
                    a2?
                } else {
                    a1?
                },
            },
            "malloc" => Model::Alloc { n: a0? },
            "calloc" => Model::Alloc {
                n: a0?.checked_mul(a1?)?,
            },
            "realloc" => Model::Realloc { old: a0?, n: a1? },
            "fread" | "fread_unlocked" => Model::Fread {
                dst: a0?,
                size: a1?,
            },
            "fgets" | "fgets_unlocked" | "read" | "pread" | "pread64" | "recv" | "recvfrom" => {
                Model::FillAll {
                    dst: if base.starts_with("fgets") { a0? } else { a1? },
                    n: if base.starts_with("fgets") { a1? } else { a2? },
                }
            }
            "free" | "puts" | "printf" | "fprintf" | "putchar" | "fputs" | "write" | "strlen"
            | "strcmp" | "strncmp" | "memcmp" | "exp" | "log" | "sqrt" | "sin" | "cos" | "pow"
            | "tanh" | "fabs" | "floor" | "ceil" | "atoi" | "atof" | "strtol" | "strtod"
            | "rand" | "srand" | "time" | "clock" | "exit" | "abort" | "fflush" | "fclose"
            | "fopen" | "open" | "close" | "getpid" | "kill" | "raise" | "signal" | "sigaction"
            | "pthread_create" | "pthread_join" | "fork" | "waitpid" | "sleep" | "usleep"
            | "__stack_chk_fail" => Model::Nothing,
            _ => return None,
        })
    }

    fn apply_model(&mut self, m: Model, rax: u64) {
        match m {
            Model::Copy { dst, src, n } => self.copy_shadow(dst, src, n),
            Model::Fill { dst, n } => self.clear_memory(dst, n),
            Model::Alloc { n } => {
                if rax != 0 {
                    self.clear_memory(rax, n);
                    self.blocks.insert(rax, n);
                }
            }
            Model::Realloc { old, n } => {
                if rax != 0 {
                    if rax != old && old != 0 {
                        let keep = self.blocks.get(&old).copied().unwrap_or(0).min(n);
                        self.copy_shadow(rax, old, keep);
                        self.clear_memory(rax + keep, n - keep);
                    }
                    self.blocks.remove(&old);
                    self.blocks.insert(rax, n);
                }
            }
            Model::Fread { dst, size } => self.clear_memory(dst, size.saturating_mul(rax)),
            Model::FillAll { dst, n } => self.clear_memory(dst, n),
            Model::Nothing => {}
        }
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
            if let Some(page) = self.pages.existing_mut(pn) {
                let (records, splits) = (&mut self.records, &mut self.mem_splits);
                shadow::overwrite(&mut page.writer, splits, records, off, take, 0);
                shadow::overwrite(&mut page.reader, splits, records, off, take, 0);
            }
            a += take as u64;
        }
    }

    /// Copies the writers of `n` bytes from `src` to `dst` (memcpy run natively).
    fn copy_shadow(&mut self, dst: u64, src: u64, n: u64) {
        let n = n.min(1 << 32);
        let writers: Vec<Handle> = (0..n)
            .map(|i| {
                let a = src.wrapping_add(i);
                self.pages.get(a >> PAGE_BITS).map_or(0, |p| {
                    shadow::get(&p.writer, &self.mem_splits, (a as usize) & (PAGE - 1))
                })
            })
            .collect();
        self.clear_memory(dst, n);
        // Runs of bytes with one writer, cut at page boundaries.
        let mut i = 0;
        while i < writers.len() {
            let a = dst.wrapping_add(i as u64);
            let off = (a as usize) & (PAGE - 1);
            let w = writers[i];
            let mut len = 1;
            while i + len < writers.len() && writers[i + len] == w && off + len < PAGE {
                len += 1;
            }
            if w != 0 {
                let page = self.pages.page(a >> PAGE_BITS);
                let (records, splits) = (&mut self.records, &mut self.mem_splits);
                let changed = shadow::overwrite(&mut page.writer, splits, records, off, len, w);
                records.retain(w, changed);
            }
            i += len;
        }
    }

    fn clear_reg_bytes(&mut self, off: usize, n: usize) {
        let n = n.min(REG_BYTES - off);
        let records = &mut self.records;
        if off < GPR_BYTES {
            let (sh, splits) = (&mut self.gprs, &mut self.gpr_splits);
            shadow::overwrite(&mut sh.writer, splits, records, off, n, 0);
            shadow::overwrite(&mut sh.reader, splits, records, off, n, 0);
        } else {
            let (sh, splits) = (&mut self.vecs, &mut self.vec_splits);
            let off = off - GPR_BYTES;
            shadow::overwrite(&mut sh.writer, splits, records, off, n, 0);
            shadow::overwrite(&mut sh.reader, splits, records, off, n, 0);
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
            pages,
            gprs,
            vecs,
            mem_splits,
            gpr_splits,
            vec_splits,
            code,
            values,
            ..
        } = self;
        records.epoch += 1;
        let no_use = RegUse::default();
        let uses = code.get(&insn.pc).unwrap_or(&no_use);
        let storage = opts.storage;
        // The record of this instance. It holds a reference of its own until the end of the
        // step, so that replacing its reads by its writes never frees it midway.
        let mine = records.alloc(me, coords);
        records.retain(mine, 1);
        let mut inst = Instance {
            records,
            me,
            coords,
            mine,
            out,
        };

        // Reads: flow dependences; this instance becomes the bytes' last reader.
        // Register bytes: general-purpose or vector, at their offset in that file.
        let reg = |off: u16, size: u8| {
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
        };
        let mem = |a: &MemAccess| {
            let location = a.addr;
            page_spans(a.addr, a.size).map(move |(pn, off, len)| {
                let through = Through::Memory;
                (
                    pn,
                    Bytes {
                        off,
                        len,
                        through,
                        location,
                    },
                )
            })
        };
        if opts.registers {
            for &(off, size) in &uses.reads {
                match reg(off, size) {
                    (true, b) => inst.read(gprs, gpr_splits, b, storage),
                    (false, b) => inst.read(vecs, vec_splits, b, storage),
                }
            }
        }
        for a in insn.mem.iter().filter(|a| a.kind == AccessKind::Read) {
            for (pn, b) in mem(a) {
                inst.read(pages.page(pn), mem_splits, b, storage);
            }
        }

        // Writes: anti and output dependences; this instance becomes the last writer.
        for a in insn.mem.iter().filter(|a| a.kind == AccessKind::Write) {
            for (pn, b) in mem(a) {
                inst.write(pages.page(pn), mem_splits, b, storage);
            }
        }
        let report = storage && opts.registers;
        for &(off, size) in &uses.writes {
            match reg(off, size) {
                (true, b) => inst.write(gprs, gpr_splits, b, report),
                (false, b) => inst.write(vecs, vec_splits, b, report),
            }
        }
        let records = inst.records;
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
    }
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
    fn page(&mut self, pn: u64) -> &mut ShadowPage {
        let i = match self.last {
            Some((n, i)) if n == pn => i,
            _ => {
                let next = self.pages.len() as u32;
                let i = *self.index.entry(pn).or_insert(next);
                if i == next {
                    self.pages.push(Box::new(ShadowPage::new()));
                }
                self.last = Some((pn, i));
                i
            }
        };
        &mut self.pages[i as usize]
    }

    fn get(&self, pn: u64) -> Option<&ShadowPage> {
        let i = *self.index.get(&pn)?;
        self.pages.get(i as usize).map(|b| &**b)
    }

    fn existing_mut(&mut self, pn: u64) -> Option<&mut ShadowPage> {
        let i = *self.index.get(&pn)?;
        self.pages.get_mut(i as usize).map(|b| &mut **b)
    }
}

/// The (page number, offset, length) pieces of an access (two when it crosses a page).
fn page_spans(addr: u64, size: u32) -> impl Iterator<Item = (u64, usize, usize)> {
    let mut a = addr;
    let end = addr.saturating_add(u64::from(size));
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
    use ptrace_runner::{Insn, MemAccess};
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

    /// A byte-per-byte reference: writer and last reader of every byte, by instance number.
    #[derive(Default)]
    struct Reference {
        writer: HashMap<(bool, u64), u64>,
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
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        };
        let mut tracker = DepTracker::new(DepOptions::default());
        let mut info = InstructionInfoFactory::new();
        let mut uses = Vec::new();
        for (i, bytes) in CODE.iter().enumerate() {
            let addr = 0x40_0000 + 16 * i as u64;
            tracker.event(&Event::Code { addr, bytes });
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
}
