//! The `emulate` engine: interprets traced instructions inside polyprof against a copy of the
//! tracee's registers and a cache of its pages, and single-steps in the tracee only what it does
//! not implement (and system calls).
//!
//! It is the same state machine as the `step` engine ([`crate::step::Runner`]); only the way one
//! instruction runs differs ([`Emulate`], an [`Executor`]). Instructions are compiled once per
//! address into an [`Op`] (when decoded) and interpreted from that.
//!
//! Exactness:
//! - integer instructions compute every defined flag; the flags the manuals leave undefined are
//!   computed the way this CPU family does where a test pins them (see `tests`);
//! - SSE arithmetic, conversions and compares run the very instruction on the host CPU with the
//!   tracee's MXCSR loaded (rounding mode, DAZ/FTZ, sticky exception flags all carried over), so
//!   results are bit-identical; when the tracee unmasks a floating-point exception they fall back;
//! - a memory access the cache cannot do (unmapped, unreadable or read-only page, a misaligned
//!   aligned-SSE operand) falls back to a single step, which faults exactly as natively;
//! - division by zero and quotient overflow fall back (the step raises SIGFPE);
//! - AVX, AVX2 and FMA instructions hold the upper halves of the ymm registers too, read and
//!   written through the kernel's XSAVE regset; without it they fall back;
//! - `bsf`, `bsr` and BMI1 run on the host with the tracee's flags loaded (their undefined flags
//!   come out as this CPU leaves them).
//!
//! Asynchronous signals are noticed only when the tracee next runs (a fallback step, a system
//! call, a library call): the step engine stays the reference for timing-sensitive signal code.
//! Memory shared with untraced threads is re-synchronised every [`THREADED_SYNC`] instructions.
//!
//! Here: the engine's state and its interpreter; `compile` turns a decoded instruction into an
//! [`Op`]; `flags` computes integer flags, register writes and shifts; `sse` runs SSE
//! operations on the host CPU under the tracee's MXCSR; `avx` the VEX-encoded ones, mostly as
//! SSE operations on each 128-bit half; `bits` the bit-manipulation instructions; `tests`
//! compares all of them with the CPU.

use crate::decode::Decoded;
use crate::event::{AccessKind, MemAccess};
use crate::mem::{MemFault, PageCache};
use crate::ptrace::{self, FpRegs, Regs};
use crate::step::{Executor, Runner};
use crate::Error;
use iced_x86::{ConditionCode, EncodingKind, FlowControl, Instruction, Mnemonic, OpKind, Register};
use libc::pid_t;
use std::arch::asm;
use std::arch::x86_64::__m128i;

/// The `emulate` engine.
pub type EmulateEngine = Runner<Emulate>;

/// With untraced threads sharing memory, the cache is written back and dropped this often
/// (in emulated instructions), so spin loops on shared flags make progress.
pub const THREADED_SYNC: u32 = 4096;

const CF: u64 = 0x1;
const PF: u64 = 0x4;
const AF: u64 = 0x10;
const ZF: u64 = 0x40;
const SF: u64 = 0x80;
const DF: u64 = 0x400;
const OF: u64 = 0x800;
const RF: u64 = 0x1_0000;
const STATUS: u64 = CF | PF | AF | ZF | SF | OF;

// Indices of `user_regs_struct` seen as `[u64; 27]`.
const R_RAX: u8 = 10;
const R_RCX: u8 = 11;
const R_RDX: u8 = 12;
const NONE: u8 = 0xff;

const _: () = assert!(std::mem::size_of::<Regs>() == 27 * 8);

#[inline(always)]
fn gprs(r: &Regs) -> &[u64; 27] {
    // SAFETY: user_regs_struct is repr(C) with 27 u64 fields (asserted above), so it has the
    // layout of [u64; 27].
    unsafe { &*(r as *const Regs as *const [u64; 27]) }
}

#[inline(always)]
fn gprs_mut(r: &mut Regs) -> &mut [u64; 27] {
    // SAFETY: as in `gprs`.
    unsafe { &mut *(r as *mut Regs as *mut [u64; 27]) }
}

fn reg_index(reg: Register) -> Option<u8> {
    Some(match reg.full_register() {
        Register::R15 => 0,
        Register::R14 => 1,
        Register::R13 => 2,
        Register::R12 => 3,
        Register::RBP => 4,
        Register::RBX => 5,
        Register::R11 => 6,
        Register::R10 => 7,
        Register::R9 => 8,
        Register::R8 => 9,
        Register::RAX => 10,
        Register::RCX => 11,
        Register::RDX => 12,
        Register::RSI => 13,
        Register::RDI => 14,
        Register::RSP => 19,
        _ => return None,
    })
}

mod compile;
mod flags;
#[macro_use]
mod sse;
mod avx;
mod bits;

use bits::*;
use compile::*;
pub use compile::{compile, is_string, Code, Comi, CvtF, CvtI, MemRef, Msk, Op, Opnd, Shuf};
use flags::*;
use sse::*;

// ---------------------------------------------------------------------------------------------
// The executor.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FpState {
    /// Not read from the tracee since it last ran.
    Stale,
    Clean,
    /// Changed here; must be written back.
    Dirty,
}

/// The FXSAVE area's size, and where in it the xmm registers are.
const FXSAVE_BYTES: usize = 512;
const XMM_OFFSET: usize = 160;
/// XSTATE_BV bits (in the XSAVE header at byte 512): x87 state, SSE state, AVX state (ymm
/// upper halves).
const XFEATURE_X87: u64 = 1 << 0;
const XFEATURE_SSE: u64 = 1 << 1;
const XFEATURE_AVX: u64 = 1 << 2;

fn u128_at(b: &[u8], at: usize) -> u128 {
    let mut w = [0u8; 16];
    w.copy_from_slice(&b[at..at + 16]);
    u128::from_le_bytes(w)
}

/// The tracee's floating-point state as last read, into which the engine's changes are
/// written back: the XSAVE area (with the upper halves of the ymm registers) where the kernel
/// gives it, else the 512-byte legacy FXSAVE area.
struct FpImage {
    bytes: Vec<u8>,
    /// Bytes of `bytes` the kernel filled.
    len: usize,
    /// Read and written through the XSAVE regset.
    xsave: bool,
    /// Offset of the ymm upper halves in the XSAVE area; 0 without AVX, where VEX instructions
    /// are single-stepped.
    avx: usize,
}

impl FpImage {
    /// The x87 control word (the FXSAVE area's first two bytes).
    fn control_word(&self) -> u16 {
        u16::from_le_bytes([self.bytes[0], self.bytes[1]])
    }

    /// The MXCSR bits this CPU implements (0 in the image means the default, 0xffbf).
    fn mxcsr_mask(&self) -> u32 {
        match u32::from_le_bytes(self.bytes[28..32].try_into().unwrap_or_default()) {
            0 => 0xffbf,
            m => m,
        }
    }

    fn new() -> FpImage {
        // The XSAVE area's size for the features the OS enabled, and where AVX state sits in
        // it (CPUID leaf 0xD); the host's answer is the tracee's (same CPU, same kernel).
        let avx = if std::arch::is_x86_feature_detected!("avx2") {
            // CPUID leaf 0xD exists where AVX is enabled.
            std::arch::x86_64::__cpuid_count(0xd, 2).ebx as usize
        } else {
            0
        };
        let size = if std::arch::is_x86_feature_detected!("xsave") {
            std::arch::x86_64::__cpuid_count(0xd, 0).ebx as usize
        } else {
            FXSAVE_BYTES
        };
        FpImage {
            bytes: vec![0; size.clamp(FXSAVE_BYTES, 1 << 16)],
            len: FXSAVE_BYTES,
            xsave: size > FXSAVE_BYTES,
            avx: if avx >= FXSAVE_BYTES + 64 && avx + 256 <= size {
                avx
            } else {
                0
            },
        }
    }
}

/// Why an instruction could not be interpreted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault;

impl From<MemFault> for Fault {
    fn from(_: MemFault) -> Fault {
        Fault
    }
}

type R<T> = Result<T, Fault>;

/// The `emulate` executor: registers live in the runner's register file, memory in a page cache,
/// SSE state here.
pub struct Emulate {
    pid: pid_t,
    mem: PageCache,
    xmm: [u128; 16],
    /// Bits 255:128 of the ymm registers (legacy SSE instructions leave them alone, VEX
    /// instructions write them).
    ymm_hi: [u128; 16],
    mxcsr: u32,
    fpimage: FpImage,
    fp: FpState,
    /// Every floating-point exception is masked in MXCSR (else FP arithmetic falls back).
    fp_masked: bool,
    regs_dirty: bool,
    threaded: bool,
    since_sync: u32,
    emulated: u64,
    scratch: Vec<MemAccess>,
    /// Library code run inside the engine, decoded once per address, and the last few
    /// instructions by address bits (looked up first: a loop of short calls runs the same
    /// hundred instructions over and over).
    lib_code: crate::decode::DecodeCache,
    lib_recent: Vec<Option<(u64, std::rc::Rc<Decoded>)>>,
    /// Library functions (by entry address) run inside the engine: (calls done, calls
    /// abandoned). One never done, abandoned [`LIBRARY_GIVE_UP`] times, runs natively from
    /// then on (an attempt costs up to [`LIBRARY_MAX_INSTRUCTIONS`]).
    lib_tries: std::collections::HashMap<u64, (u32, u32)>,
}

impl Emulate {
    /// Loads the SSE state when it is stale.
    #[inline(always)]
    fn need_fp(&mut self) -> R<()> {
        if self.fp == FpState::Stale {
            self.load_fp()?;
        }
        Ok(())
    }

    #[inline(never)]
    fn load_fp(&mut self) -> R<()> {
        let img = &mut self.fpimage;
        if img.xsave {
            match ptrace::get_xstate(self.pid, &mut img.bytes) {
                Ok(n) if n >= FXSAVE_BYTES => img.len = n,
                // No XSAVE regset (an old kernel, a virtual machine hiding it): the legacy area
                // only, and VEX instructions are single-stepped.
                _ => (img.xsave, img.avx) = (false, 0),
            }
        }
        if !img.xsave {
            let f = ptrace::get_fpregs(self.pid).map_err(|_| Fault)?;
            // SAFETY: user_fpregs_struct is 512 plain bytes (the FXSAVE layout).
            let raw = unsafe {
                std::slice::from_raw_parts(&f as *const FpRegs as *const u8, FXSAVE_BYTES)
            };
            img.bytes[..FXSAVE_BYTES].copy_from_slice(raw);
            img.len = FXSAVE_BYTES;
        }
        let b = &img.bytes;
        for k in 0..16 {
            self.xmm[k] = u128_at(b, XMM_OFFSET + 16 * k);
        }
        // The AVX component is in its initial state (all zero) when XSTATE_BV says so.
        let avx_live = img.avx != 0
            && img.len >= img.avx + 256
            && u64::from_le_bytes(b[512..520].try_into().unwrap_or_default()) & XFEATURE_AVX != 0;
        for k in 0..16 {
            self.ymm_hi[k] = if avx_live {
                u128_at(b, img.avx + 16 * k)
            } else {
                0
            };
        }
        let mxcsr = u32::from_le_bytes(b[24..28].try_into().unwrap_or_default());
        self.mxcsr = mxcsr;
        // All six exception masks set, and no bits beyond the architectural ones (such as
        // AMD's misaligned-SSE mode) that would change what faults.
        self.fp_masked = mxcsr & 0x1f80 == 0x1f80 && mxcsr & !0xffff == 0;
        self.fp = FpState::Clean;
        Ok(())
    }

    /// Writes the SSE and AVX registers and MXCSR back into the tracee.
    fn store_fp(&mut self) -> Result<(), Error> {
        let img = &mut self.fpimage;
        let b = &mut img.bytes;
        for k in 0..16 {
            b[XMM_OFFSET + 16 * k..XMM_OFFSET + 16 * k + 16]
                .copy_from_slice(&self.xmm[k].to_le_bytes());
        }
        b[24..28].copy_from_slice(&self.mxcsr.to_le_bytes());
        if img.xsave {
            let mut features = u64::from_le_bytes(b[512..520].try_into().unwrap_or_default());
            // x87 too: `fldcw` may have changed the control word.
            features |= XFEATURE_X87 | XFEATURE_SSE;
            if img.avx != 0 && img.len >= img.avx + 256 {
                for k in 0..16 {
                    let at = img.avx + 16 * k;
                    b[at..at + 16].copy_from_slice(&self.ymm_hi[k].to_le_bytes());
                }
                features |= XFEATURE_AVX;
            }
            b[512..520].copy_from_slice(&features.to_le_bytes());
            return ptrace::set_xstate(self.pid, &b[..img.len])
                .map_err(Error::trace("PTRACE_SETREGSET (XSAVE area)"));
        }
        // SAFETY: user_fpregs_struct is 512 plain bytes; every bit pattern is a valid value.
        let mut f: FpRegs = unsafe { std::mem::zeroed() };
        // SAFETY: as above; the slice covers exactly the struct.
        unsafe {
            std::slice::from_raw_parts_mut(&mut f as *mut FpRegs as *mut u8, FXSAVE_BYTES)
                .copy_from_slice(&b[..FXSAVE_BYTES]);
        }
        ptrace::set_fpregs(self.pid, &f).map_err(Error::trace("PTRACE_SETFPREGS"))
    }

    /// Sets up SSE state directly (tests).
    #[cfg(test)]
    fn set_fp(&mut self, xmm: [u128; 16], ymm_hi: [u128; 16], mxcsr: u32) {
        self.xmm = xmm;
        self.ymm_hi = ymm_hi;
        self.mxcsr = mxcsr;
        self.fp_masked = mxcsr & 0x1f80 == 0x1f80 && mxcsr & !0xffff == 0;
        self.fp = FpState::Clean;
    }

    #[inline(always)]
    fn ea(r: &Regs, m: &MemRef) -> u64 {
        let g = gprs(r);
        let mut a = m.disp;
        if m.base != NONE {
            a = a.wrapping_add(g[m.base as usize]);
        }
        if m.index != NONE {
            a = a.wrapping_add(g[m.index as usize] << m.scale);
        }
        match m.seg {
            0 => a,
            1 => a.wrapping_add(r.fs_base),
            _ => a.wrapping_add(r.gs_base),
        }
    }

    #[inline(always)]
    fn rd(&mut self, r: &Regs, o: &Opnd) -> R<u64> {
        match *o {
            Opnd::Gpr { idx, size, high } => {
                let v = gprs(r)[idx as usize];
                Ok(if high {
                    (v >> 8) & 0xff
                } else {
                    v & mask(size)
                })
            }
            Opnd::Imm(v) => Ok(v),
            Opnd::Mem(m) => {
                let a = Self::ea(r, &m);
                Ok(self.mem.read_int(a, m.size)?)
            }
            _ => Err(Fault),
        }
    }

    #[inline(always)]
    fn wr(&mut self, r: &mut Regs, o: &Opnd, v: u64) -> R<()> {
        match *o {
            Opnd::Gpr { idx, size, high } => {
                write_gpr(r, idx, size, high, v);
                Ok(())
            }
            Opnd::Mem(m) => {
                let a = Self::ea(r, &m);
                Ok(self.mem.write_int(a, m.size, v)?)
            }
            _ => Err(Fault),
        }
    }

    /// Interprets `op`; `r` holds the registers before and receives those after. On `Err` the
    /// tracee's memory is unchanged (the single memory write of an instruction comes last).
    #[inline(always)]
    fn run(&mut self, op: &Op, r: &mut Regs, next: u64) -> R<()> {
        let pc = r.rip;
        r.rip = next;
        let size = op.size;
        let [o0, o1, _] = &op.ops;
        match op.code {
            Code::Unsupported => return Err(Fault),
            Code::Nop => {}
            Code::Mov => {
                let v = self.rd(r, o1)?;
                self.wr(r, o0, v)?;
            }
            Code::Movzx => {
                let v = self.rd(r, o1)?;
                self.wr(r, o0, v)?;
            }
            Code::Movsx => {
                let v = self.rd(r, o1)?;
                let v = sext(v, osize(o1));
                self.wr(r, o0, v)?;
            }
            Code::Lea => {
                let Opnd::Mem(m) = o1 else { return Err(Fault) };
                let mut plain = *m;
                plain.seg = 0;
                let a = Self::ea(r, &plain);
                self.wr(r, o0, a)?;
            }
            Code::Cmov => {
                let v = self.rd(r, o1)?;
                if cond(op.cc, r.eflags) {
                    self.wr(r, o0, v)?;
                } else if size == 4 {
                    // A 32-bit cmov zero-extends its destination even when it does not move.
                    let d = self.rd(r, o0)?;
                    self.wr(r, o0, d)?;
                }
            }
            Code::Setcc => {
                let v = cond(op.cc, r.eflags) as u64;
                self.wr(r, o0, v)?;
            }
            Code::Add | Code::Adc | Code::Sub | Code::Sbb | Code::Cmp => {
                let a = self.rd(r, o0)?;
                let b = self.rd(r, o1)? & mask(size);
                let c = match op.code {
                    Code::Adc | Code::Sbb => r.eflags & CF,
                    _ => 0,
                };
                let (res, f) = match op.code {
                    Code::Add | Code::Adc => add_flags(a, b, c, size),
                    _ => sub_flags(a, b, c, size),
                };
                if op.code != Code::Cmp {
                    self.wr(r, o0, res)?;
                }
                set_flags(r, STATUS, f);
            }
            Code::And | Code::Or | Code::Xor | Code::Test => {
                let a = self.rd(r, o0)?;
                let b = self.rd(r, o1)?;
                let res = match op.code {
                    Code::And | Code::Test => a & b,
                    Code::Or => a | b,
                    _ => a ^ b,
                } & mask(size);
                if op.code != Code::Test {
                    self.wr(r, o0, res)?;
                }
                set_flags(r, STATUS, szp(res, size));
            }
            Code::Inc | Code::Dec => {
                let a = self.rd(r, o0)?;
                let (res, f) = if op.code == Code::Inc {
                    add_flags(a, 1, 0, size)
                } else {
                    sub_flags(a, 1, 0, size)
                };
                self.wr(r, o0, res)?;
                set_flags(r, STATUS & !CF, f);
            }
            Code::Neg => {
                let a = self.rd(r, o0)?;
                let (res, f) = sub_flags(0, a, 0, size);
                self.wr(r, o0, res)?;
                set_flags(r, STATUS, f);
            }
            Code::Not => {
                let a = self.rd(r, o0)?;
                self.wr(r, o0, !a & mask(size))?;
            }
            Code::Shl | Code::Shr | Code::Sar | Code::Rol | Code::Ror => {
                let a = self.rd(r, o0)?;
                let count = self.rd(r, o1)? & if size == 8 { 0x3f } else { 0x1f };
                if count == 0 {
                    // No flag changes; a 32-bit register is still written (zero-extended).
                    self.wr(r, o0, a)?;
                } else {
                    let (res, f, which) = shift(op.code, a, count as u32, size, r.eflags);
                    self.wr(r, o0, res)?;
                    set_flags(r, which, f);
                }
            }
            Code::Jcc => {
                if cond(op.cc, r.eflags) {
                    let Opnd::Imm(t) = *o0 else { return Err(Fault) };
                    r.rip = t;
                }
            }
            Code::Jmp => {
                r.rip = self.rd(r, o0)?;
            }
            Code::Call => {
                let t = self.rd(r, o0)?;
                let sp = r.rsp.wrapping_sub(8);
                self.mem.write_int(sp, 8, next)?;
                r.rsp = sp;
                r.rip = t;
            }
            Code::Ret => {
                let t = self.mem.read_int(r.rsp, 8)?;
                let extra = match *o0 {
                    Opnd::Imm(v) => v & 0xffff,
                    _ => 0,
                };
                r.rsp = r.rsp.wrapping_add(8).wrapping_add(extra);
                r.rip = t;
            }
            Code::Push => {
                let v = self.rd(r, o0)?;
                let sp = r.rsp.wrapping_sub(8);
                self.mem.write_int(sp, 8, v)?;
                r.rsp = sp;
            }
            Code::Pop => {
                let v = self.mem.read_int(r.rsp, 8)?;
                r.rsp = r.rsp.wrapping_add(8);
                self.wr(r, o0, v)?;
            }
            Code::Leave => {
                let v = self.mem.read_int(r.rbp, 8)?;
                r.rsp = r.rbp.wrapping_add(8);
                r.rbp = v;
            }
            Code::Stos | Code::Movs => return self.run_string(op, r, pc),
            _ if op.code.is_vex() => return self.run_vex(op, r),
            _ if op.code.is_sse() => return self.run_sse(op, r),
            _ => return self.run_rare(op, r),
        }
        Ok(())
    }

    /// The integer instructions compilers emit less often: multiplication, division, sign
    /// extensions, flag instructions; and those of [`Self::run_bits`].
    #[inline(never)]
    fn run_rare(&mut self, op: &Op, r: &mut Regs) -> R<()> {
        let size = op.size;
        let [o0, o1, o2] = &op.ops;
        match op.code {
            Code::Imul1 | Code::Mul1 => {
                let b = self.rd(r, o0)?;
                let a = gprs(r)[R_RAX as usize] & mask(size);
                let bits = size as u32 * 8;
                let (lo, hi, over) = if op.code == Code::Imul1 {
                    let p = (sext(a, size) as i64 as i128) * (sext(b, size) as i64 as i128);
                    let lo = p as u64 & mask(size);
                    let hi = (p >> bits) as u64 & mask(size);
                    (lo, hi, p != sext(lo, size) as i64 as i128)
                } else {
                    let p = a as u128 * b as u128;
                    let lo = p as u64 & mask(size);
                    let hi = (p >> bits) as u64 & mask(size);
                    (lo, hi, hi != 0)
                };
                if size == 1 {
                    write_gpr(r, R_RAX, 2, false, (hi << 8) | lo);
                } else {
                    write_gpr(r, R_RAX, size, false, lo);
                    write_gpr(r, R_RDX, size, false, hi);
                }
                // SF, ZF, AF and PF (undefined in the manuals) are kept, as this CPU family does.
                set_flags(r, CF | OF, if over { CF | OF } else { 0 });
            }
            Code::Imul => {
                let a = sext(self.rd(r, o1)?, size);
                let b = sext(self.rd(r, o2)? & mask(size), size);
                let p = (a as i64 as i128) * (b as i64 as i128);
                let lo = p as u64 & mask(size);
                let over = p != sext(lo, size) as i64 as i128;
                self.wr(r, o0, lo)?;
                // SF, ZF, AF and PF (undefined in the manuals) are kept, as this CPU family does.
                set_flags(r, CF | OF, if over { CF | OF } else { 0 });
            }
            Code::Div | Code::Idiv => {
                let d = self.rd(r, o0)?;
                if d == 0 {
                    return Err(Fault);
                }
                let g = gprs(r);
                let bits = size as u32 * 8;
                let (lo, hi) = if size == 1 {
                    (g[R_RAX as usize] & 0xff, (g[R_RAX as usize] >> 8) & 0xff)
                } else {
                    (
                        g[R_RAX as usize] & mask(size),
                        g[R_RDX as usize] & mask(size),
                    )
                };
                let n = ((hi as u128) << bits) | lo as u128;
                let (q, rem) = if op.code == Code::Div {
                    let q = n / d as u128;
                    if q > mask(size) as u128 {
                        return Err(Fault);
                    }
                    (q as u64, (n % d as u128) as u64)
                } else {
                    // Sign-extend the 2*bits dividend.
                    let sh = 128 - 2 * bits;
                    let n = ((n << sh) as i128) >> sh;
                    let dv = sext(d, size) as i64 as i128;
                    let q = n / dv;
                    let lim = 1i128 << (bits - 1);
                    if q >= lim || q < -lim {
                        return Err(Fault);
                    }
                    (q as u64 & mask(size), (n % dv) as u64 & mask(size))
                };
                if size == 1 {
                    write_gpr(r, R_RAX, 2, false, (rem << 8) | q);
                } else {
                    write_gpr(r, R_RAX, size, false, q);
                    write_gpr(r, R_RDX, size, false, rem);
                }
                div_flags(r);
            }
            Code::SignToRdx => {
                let a = gprs(r)[R_RAX as usize];
                let fill = if a & sign_bit(size) != 0 { u64::MAX } else { 0 };
                write_gpr(r, R_RDX, size, false, fill);
            }
            Code::SignExtendRax => {
                let a = gprs(r)[R_RAX as usize];
                let v = sext(a, size / 2);
                write_gpr(r, R_RAX, size, false, v);
            }
            Code::Clc => r.eflags &= !CF,
            Code::Stc => r.eflags |= CF,
            Code::Cmc => r.eflags ^= CF,
            Code::Cld => r.eflags &= !DF,
            Code::Std => r.eflags |= DF,
            Code::Lahf => {
                let v = (r.eflags & (SF | ZF | AF | PF | CF)) | 2;
                write_gpr(r, R_RAX, 1, true, v);
            }
            Code::Sahf => {
                let v = (r.rax >> 8) & (SF | ZF | AF | PF | CF);
                set_flags(r, SF | ZF | AF | PF | CF, v);
            }
            _ => return self.run_bits(op, r),
        }
        Ok(())
    }

    /// Exchanges, byte swaps, bit tests, counts and scans, BMI.
    fn run_bits(&mut self, op: &Op, r: &mut Regs) -> R<()> {
        let size = op.size;
        let [o0, o1, o2] = &op.ops;
        match op.code {
            Code::Xchg => {
                // The register first: a memory write, the one that can fail, comes last.
                let a = self.rd(r, o0)?;
                let b = self.rd(r, o1)?;
                self.wr(r, o1, a)?;
                self.wr(r, o0, b)?;
            }
            Code::Cmpxchg => {
                let d = self.rd(r, o0)?;
                let s = self.rd(r, o1)?;
                let acc = gprs(r)[R_RAX as usize] & mask(size);
                let (_, f) = sub_flags(acc, d, 0, size);
                set_flags(r, STATUS, f);
                if acc == d {
                    self.wr(r, o0, s)?;
                } else {
                    write_gpr(r, R_RAX, size, false, d);
                    // Memory is written back as it was (the access writes: a read-only page
                    // faults); a register destination is left whole (a 32-bit one is not
                    // zero-extended, as this CPU does).
                    if matches!(o0, Opnd::Mem(_)) {
                        self.wr(r, o0, d)?;
                    }
                }
            }
            Code::Xadd => {
                let d = self.rd(r, o0)?;
                let s = self.rd(r, o1)?;
                let (sum, f) = add_flags(d, s, 0, size);
                self.wr(r, o1, d)?;
                self.wr(r, o0, sum)?;
                set_flags(r, STATUS, f);
            }
            Code::DoubleShift(left) => {
                let s = self.rd(r, o1)?;
                let count = self.rd(r, o2)? as u8;
                match *o0 {
                    // The host writes the whole register as the instruction does.
                    Opnd::Gpr { idx, .. } => {
                        let d = gprs(r)[idx as usize];
                        let (v, f) = host_double_shift(left, size, d, s, count, r.eflags);
                        write_gpr(r, idx, 8, false, v);
                        set_flags(r, STATUS, f);
                    }
                    _ => {
                        let d = self.rd(r, o0)?;
                        let (v, f) = host_double_shift(left, size, d, s, count, r.eflags);
                        self.wr(r, o0, v)?;
                        set_flags(r, STATUS, f);
                    }
                }
            }
            Code::Bswap => {
                let v = self.rd(r, o0)?;
                let v = if size == 8 {
                    v.swap_bytes()
                } else {
                    (v as u32).swap_bytes() as u64
                };
                self.wr(r, o0, v)?;
            }
            Code::Bt | Code::Bts | Code::Btr | Code::Btc => {
                let a = self.rd(r, o0)?;
                let bit = self.rd(r, o1)? & (size as u64 * 8 - 1);
                let cf = (a >> bit) & 1;
                let res = match op.code {
                    Code::Bts => a | (1 << bit),
                    Code::Btr => a & !(1 << bit),
                    Code::Btc => a ^ (1 << bit),
                    _ => a,
                };
                if op.code != Code::Bt {
                    self.wr(r, o0, res)?;
                }
                set_flags(r, CF, cf);
            }
            Code::Popcnt => {
                let v = self.rd(r, o1)?;
                self.wr(r, o0, v.count_ones() as u64)?;
                set_flags(r, STATUS, if v == 0 { ZF } else { 0 });
            }
            Code::HostBits(b) => {
                let Opnd::Gpr { idx, .. } = *o0 else {
                    return Err(Fault);
                };
                let d = gprs(r)[idx as usize];
                let (a, s) = (self.rd(r, o1)?, self.rd(r, o2)?);
                let (v, f) = host_bits(b, size, d, a, s, r.eflags);
                // The host wrote the whole register as the instruction does (zero-extended at
                // 32 bits, merged at 16, unchanged where `bsf` finds no bit).
                write_gpr(r, idx, 8, false, v);
                set_flags(r, STATUS, f);
            }
            Code::Bmi2(b) => {
                let (a, s) = (self.rd(r, o1)?, self.rd(r, o2)?);
                self.wr(r, o0, bmi2(b, size, a, s))?;
            }
            Code::Movbe => {
                let v = self.rd(r, o1)?;
                let v = match size {
                    2 => (v as u16).swap_bytes() as u64,
                    4 => (v as u32).swap_bytes() as u64,
                    _ => v.swap_bytes(),
                };
                self.wr(r, o0, v)?;
            }
            _ => return Err(Fault),
        }
        Ok(())
    }

    /// `stos` and `movs`, with or without REP (`pc` is the instruction's address: a REP
    /// iteration that leaves rcx non-zero runs it again).
    #[inline(never)]
    fn run_string(&mut self, op: &Op, r: &mut Regs, pc: u64) -> R<()> {
        let size = op.size;
        match op.code {
            Code::Stos | Code::Movs => {
                let rep = op.cc != 0;
                if rep && r.rcx == 0 {
                    return Ok(());
                }
                let step = if r.eflags & DF != 0 {
                    (size as u64).wrapping_neg()
                } else {
                    size as u64
                };
                if op.code == Code::Stos {
                    let v = r.rax & mask(size);
                    self.mem.write_int(r.rdi, size, v)?;
                } else {
                    let v = self.mem.read_int(r.rsi, size)?;
                    self.mem.write_int(r.rdi, size, v)?;
                    r.rsi = r.rsi.wrapping_add(step);
                }
                r.rdi = r.rdi.wrapping_add(step);
                if rep {
                    r.rcx -= 1;
                    if r.rcx != 0 {
                        // The next iteration is the same instruction.
                        r.rip = pc;
                    }
                }
            }
            _ => return Err(Fault),
        }
        Ok(())
    }

    #[inline(never)]
    fn run_sse(&mut self, op: &Op, r: &mut Regs) -> R<()> {
        self.need_fp()?;
        let [o0, o1, o2] = &op.ops;
        let _ = o2;
        let size = op.size;
        match op.code {
            Code::XBin(x) => {
                if x.is_fp() && !self.fp_masked {
                    return Err(Fault);
                }
                let b = self.xsrc(r, o1, op.align)?;
                let a = self.xmm_of(o0)?;
                let res = from_m128(x.run(to_m128(a), to_m128(b), &mut self.mxcsr));
                self.set_xmm(o0, res)?;
            }
            Code::XCmp | Code::XRound => {
                if !self.fp_masked {
                    return Err(Fault);
                }
                let b = self.xsrc(r, o1, op.align)?;
                let a = self.xmm_of(o0)?;
                let mx: *mut u32 = &mut self.mxcsr;
                let res = if op.code == Code::XCmp {
                    run_cmp(size, op.cc, to_m128(a), to_m128(b), mx)
                } else {
                    run_round(size, op.cc, to_m128(a), to_m128(b), mx)
                };
                self.set_xmm(o0, from_m128(res))?;
            }
            Code::XShuf(s) => {
                let a = self.xmm_of(o0)?;
                let b = match o1 {
                    Opnd::Imm(_) => a,
                    _ => self.xsrc(r, o1, op.align)?,
                };
                self.set_xmm(o0, shuffle(s, a, b, op.cc))?;
            }
            Code::XComi(c) => {
                if !self.fp_masked {
                    return Err(Fault);
                }
                let b = self.xsrc(r, o1, false)?;
                let a = self.xmm_of(o0)?;
                let f = comi(c, to_m128(a), to_m128(b), &mut self.mxcsr);
                set_flags(r, STATUS, f);
            }
            Code::XPtest => {
                let b = self.xsrc(r, o1, op.align)?;
                let a = self.xmm_of(o0)?;
                let zf = if a & b == 0 { ZF } else { 0 };
                let cf = if !a & b == 0 { CF } else { 0 };
                set_flags(r, STATUS, zf | cf);
            }
            Code::XCvtToGpr(c) => {
                if !self.fp_masked {
                    return Err(Fault);
                }
                let b = self.xsrc(r, o1, false)?;
                let v = cvt_to_int(c, size, to_m128(b), &mut self.mxcsr);
                self.wr(r, o0, v)?;
            }
            Code::XCvtFromGpr(c) => {
                if !self.fp_masked {
                    return Err(Fault);
                }
                let v = self.rd(r, o1)?;
                let a = self.xmm_of(o0)?;
                let res = cvt_from_int(c, size, to_m128(a), v, &mut self.mxcsr);
                self.set_xmm(o0, from_m128(res))?;
            }
            Code::XMovmsk(k) => {
                let v = self.xmm_of(o1)?;
                let bits = match k {
                    Msk::Movmskpd => ((v >> 63) & 1) | ((v >> 126) & 2),
                    Msk::Movmskps => {
                        ((v >> 31) & 1) | ((v >> 62) & 2) | ((v >> 93) & 4) | ((v >> 124) & 8)
                    }
                    Msk::Pmovmskb => {
                        let mut m = 0u128;
                        for k in 0..16 {
                            m |= ((v >> (8 * k + 7)) & 1) << k;
                        }
                        m
                    }
                };
                self.wr(r, o0, bits as u64)?;
            }
            Code::XExtract => {
                let v = self.xmm_of(o1)?;
                let lanes = 16 / size as u32;
                let k = op.cc as u32 % lanes;
                let lane = (v >> (k * size as u32 * 8)) as u64 & mask(size);
                self.wr(r, o0, lane)?;
            }
            Code::XInsert => {
                let v = self.rd(r, o1)? & mask(size);
                let d = self.xmm_of(o0)?;
                let lanes = 16 / size as u32;
                let sh = (op.cc as u32 % lanes) * size as u32 * 8;
                let m = (mask(size) as u128) << sh;
                self.set_xmm(o0, (d & !m) | ((v as u128) << sh))?;
            }
            _ => return self.run_sse_move(op, r),
        }
        Ok(())
    }

    /// SSE moves, loads and stores, and moves between xmm and general registers.
    fn run_sse_move(&mut self, op: &Op, r: &mut Regs) -> R<()> {
        let [o0, o1, _] = &op.ops;
        let size = op.size;
        match op.code {
            Code::StMxcsr => {
                let mxcsr = self.mxcsr as u64;
                self.wr(r, o0, mxcsr)?;
            }
            Code::FnstCw => {
                let cw = self.fpimage.control_word();
                self.wr(r, o0, cw as u64)?;
            }
            Code::FldCw => {
                let cw = self.rd(r, o0)? as u16;
                self.fpimage.bytes[..2].copy_from_slice(&cw.to_le_bytes());
                self.fp = FpState::Dirty;
            }
            Code::LdMxcsr => {
                let v = self.rd(r, o0)? as u32;
                // Bits this CPU does not have (MXCSR_MASK, in the FXSAVE area) fault natively
                // (#GP): let them.
                if v & !self.fpimage.mxcsr_mask() != 0 {
                    return Err(Fault);
                }
                self.mxcsr = v;
                self.fp_masked = v & 0x1f80 == 0x1f80;
                self.fp = FpState::Dirty;
            }
            Code::XCopy => {
                let v = self.xsrc(r, o1, false)?;
                self.set_xmm(o0, v)?;
            }
            Code::XLoad => {
                let v = self.xsrc(r, o1, op.align)?;
                self.set_xmm(o0, v)?;
            }
            Code::XStore | Code::XStoreHigh => {
                let v = self.xmm_of(o1)?;
                let v = if op.code == Code::XStoreHigh {
                    v >> 64
                } else {
                    v
                };
                let Opnd::Mem(m) = o0 else { return Err(Fault) };
                let a = Self::ea(r, m);
                if op.align && a & 15 != 0 {
                    return Err(Fault);
                }
                let b = v.to_le_bytes();
                self.mem.write(a, &b[..size as usize])?;
            }
            Code::XLoadLow | Code::XLoadHigh => {
                let v = self.xsrc(r, o1, false)? as u64 as u128;
                let d = self.xmm_of(o0)?;
                let res = if op.code == Code::XLoadLow {
                    (d & !(u64::MAX as u128)) | v
                } else {
                    (d & u64::MAX as u128) | (v << 64)
                };
                self.set_xmm(o0, res)?;
            }
            Code::XMovLow => {
                let s = self.xmm_of(o1)?;
                let d = self.xmm_of(o0)?;
                let m: u128 = if size == 4 {
                    u32::MAX as u128
                } else {
                    u64::MAX as u128
                };
                self.set_xmm(o0, (d & !m) | (s & m))?;
            }
            Code::XMovqZ => {
                let s = self.xmm_of(o1)?;
                self.set_xmm(o0, s & u64::MAX as u128)?;
            }
            Code::XFromGpr => {
                let v = self.rd(r, o1)?;
                self.set_xmm(o0, v as u128)?;
            }
            Code::XToGpr => {
                let v = self.xmm_of(o1)? as u64 & mask(size);
                self.wr(r, o0, v)?;
            }
            _ => return Err(Fault),
        }
        Ok(())
    }

    #[inline(always)]
    fn xmm_of(&self, o: &Opnd) -> R<u128> {
        match *o {
            Opnd::Xmm(n) => Ok(self.xmm[n as usize & 15]),
            _ => Err(Fault),
        }
    }

    #[inline(always)]
    fn set_xmm(&mut self, o: &Opnd, v: u128) -> R<()> {
        match *o {
            Opnd::Xmm(n) => {
                self.xmm[n as usize & 15] = v;
                self.fp = FpState::Dirty;
                Ok(())
            }
            _ => Err(Fault),
        }
    }

    /// An xmm register, or a memory operand zero-extended to 128 bits.
    #[inline(always)]
    fn xsrc(&mut self, r: &Regs, o: &Opnd, align: bool) -> R<u128> {
        match *o {
            Opnd::Xmm(n) => Ok(self.xmm[n as usize & 15]),
            Opnd::Mem(m) => {
                let a = Self::ea(r, &m);
                Ok(match m.size {
                    16 => {
                        if align && a & 15 != 0 {
                            return Err(Fault);
                        }
                        u128::from_le_bytes(self.mem.read::<16>(a)?)
                    }
                    8 => u64::from_le_bytes(self.mem.read::<8>(a)?) as u128,
                    4 => u32::from_le_bytes(self.mem.read::<4>(a)?) as u128,
                    2 => u16::from_le_bytes(self.mem.read::<2>(a)?) as u128,
                    1 => self.mem.read::<1>(a)?[0] as u128,
                    _ => return Err(Fault),
                })
            }
            _ => Err(Fault),
        }
    }
}

impl Executor for Emulate {
    const NAME: &'static str = "emulate";

    fn new(pid: pid_t) -> Emulate {
        Emulate {
            pid,
            mem: PageCache::new(pid),
            xmm: [0; 16],
            ymm_hi: [0; 16],
            mxcsr: 0x1f80,
            fpimage: FpImage::new(),
            fp: FpState::Stale,
            fp_masked: false,
            regs_dirty: false,
            threaded: false,
            since_sync: 0,
            emulated: 0,
            scratch: Vec::new(),
            lib_code: crate::decode::DecodeCache::new(),
            lib_recent: vec![None; LIBRARY_RECENT],
            lib_tries: std::collections::HashMap::new(),
        }
    }

    #[inline(always)]
    fn execute(&mut self, d: &Decoded, before: &Regs, after: &mut Regs) -> bool {
        if !d.op.supported() {
            return false;
        }
        if self.threaded {
            self.since_sync += 1;
            // Another thread may race for the same memory: only the CPU is atomic.
            if self.since_sync > THREADED_SYNC || d.op.lock {
                return false;
            }
        }
        *after = *before;
        let next = before.rip.wrapping_add(d.len as u64);
        match self.run(&d.op, after, next) {
            Ok(()) => {
                after.eflags &= !RF;
                self.regs_dirty = true;
                self.emulated += 1;
                true
            }
            Err(Fault) => false,
        }
    }

    fn flush(&mut self, regs: &Regs) -> Result<(), Error> {
        if self.regs_dirty {
            ptrace::set_regs(self.pid, regs).map_err(Error::trace("PTRACE_SETREGS"))?;
            self.regs_dirty = false;
        }
        if self.fp == FpState::Dirty {
            self.store_fp()?;
            self.fp = FpState::Clean;
        }
        self.mem
            .flush()
            .map_err(Error::trace("writing emulated memory back"))
    }

    fn stepped(&mut self, d: &Decoded, before: &Regs) {
        // The instruction may have changed SSE state.
        self.fp = FpState::Stale;
        self.regs_dirty = false;
        let simple = !self.threaded
            && !d.is_syscall
            && matches!(
                d.flow,
                FlowControl::Next
                    | FlowControl::UnconditionalBranch
                    | FlowControl::IndirectBranch
                    | FlowControl::ConditionalBranch
                    | FlowControl::Call
                    | FlowControl::IndirectCall
                    | FlowControl::Return
            );
        if !simple {
            self.invalidate();
            return;
        }
        let complete = d.accesses(before, &mut self.scratch);
        let mut all = !complete;
        for a in &self.scratch {
            if a.kind == AccessKind::Write && (a.size == 0 || a.size > 4096) {
                all = true;
            }
        }
        if all {
            self.invalidate();
            return;
        }
        for k in 0..self.scratch.len() {
            let a = self.scratch[k];
            if a.kind == AccessKind::Write {
                self.mem.refresh(a.addr);
                self.mem.refresh(a.addr + a.size as u64 - 1);
            }
        }
    }

    fn invalidate(&mut self) {
        self.mem.invalidate();
        if self.threaded {
            self.mem.maps_changed();
        }
        self.fp = FpState::Stale;
        self.regs_dirty = false;
        self.since_sync = 0;
    }

    fn syscall_seen(&mut self, nr: u64) {
        // mmap, mprotect, munmap, brk, mremap, shmat, shmdt, execve, remap_file_pages,
        // execveat, pkey_mprotect: the map (and what may be written) may have changed.
        if matches!(nr, 9 | 10 | 11 | 12 | 25 | 30 | 67 | 59 | 216 | 322 | 329) {
            self.mem.maps_changed();
            // Library code may have been unmapped or replaced (dlclose, dlopen).
            self.lib_code = crate::decode::DecodeCache::new();
            self.lib_recent.iter_mut().for_each(|e| *e = None);
        }
    }

    fn thread_started(&mut self) {
        self.threaded = true;
        self.mem.maps_changed();
    }

    fn emulated(&self) -> u64 {
        self.emulated
    }

    fn library_call(
        &mut self,
        name: &str,
        regs: &Regs,
        returns_ok: &dyn Fn(u64) -> bool,
    ) -> Option<(Regs, u64)> {
        // Other threads could see the bytes change at another time than natively.
        if self.threaded {
            return None;
        }
        let ret = self.mem.read_int(regs.rsp, 8).ok()?;
        if !returns_ok(ret) {
            return None;
        }
        let args = crate::libcall::Args(regs.rdi, regs.rsi, regs.rdx);
        if let Some(rax) = crate::libcall::call(&mut self.mem, name, args) {
            let mut after = *regs;
            after.rax = rax;
            after.rip = ret;
            after.rsp = regs.rsp.wrapping_add(8);
            self.regs_dirty = true;
            return Some((after, crate::libcall::estimated_cost(name, args, rax)));
        }
        let tries = self.lib_tries.get(&regs.rip).copied().unwrap_or((0, 0));
        if tries.0 == 0 && tries.1 >= LIBRARY_GIVE_UP {
            return None;
        }
        let done = self.run_library(regs, ret, returns_ok);
        let t = self.lib_tries.entry(regs.rip).or_insert((0, 0));
        match done {
            Some((after, n)) => {
                t.0 = t.0.saturating_add(1);
                self.regs_dirty = true;
                Some((after, n))
            }
            None => {
                t.1 = t.1.saturating_add(1);
                None
            }
        }
    }
}

/// Instructions a library call run inside the engine may take before it is abandoned (and
/// run natively, having cost the attempt). About where running it natively, with its ptrace
/// stop (tens of microseconds), becomes cheaper.
const LIBRARY_MAX_INSTRUCTIONS: u64 = 4096;
/// Entries of [`Emulate::lib_recent`].
const LIBRARY_RECENT: usize = 512;
/// Abandoned attempts after which a library function never run inside the engine is left to
/// run natively.
const LIBRARY_GIVE_UP: u32 = 16;

impl Emulate {
    /// Runs the library function at `regs.rip` inside the engine, silently, until it returns
    /// to `ret`: its own instructions, against the page cache, as the CPU would. Gives up,
    /// having changed nothing (memory writes are journalled and put back), on a system call,
    /// an instruction the engine does not implement, a fault, a jump into traced code (a
    /// callback) or after [`LIBRARY_MAX_INSTRUCTIONS`]; the call then runs natively. Returns
    /// the registers after the return and the instructions run (its exact cost).
    fn run_library(
        &mut self,
        regs: &Regs,
        ret: u64,
        returns_ok: &dyn Fn(u64) -> bool,
    ) -> Option<(Regs, u64)> {
        let back_rsp = regs.rsp.wrapping_add(8);
        let saved = (self.xmm, self.ymm_hi, self.mxcsr, self.fp, self.fp_masked);
        let control_word = self.fpimage.control_word();
        self.mem.journal_start();
        let mut r = *regs;
        let mut n = 0;
        // Whether `r.rip` may have reached traced code: after a transfer, or across a page.
        let mut moved = true;
        let done = loop {
            if r.rip == ret && r.rsp == back_rsp {
                break true;
            }
            if n >= LIBRARY_MAX_INSTRUCTIONS || (moved && returns_ok(r.rip)) {
                break false;
            }
            let d = self.library_insn(r.rip);
            if d.is_syscall || d.is_int3 || !d.op.supported() {
                break false;
            }
            let (pc, next) = (r.rip, r.rip.wrapping_add(d.len as u64));
            if self.run(&d.op, &mut r, next).is_err() {
                break false;
            }
            r.eflags &= !RF;
            moved = r.rip != next || (pc ^ next) >> 12 != 0;
            n += 1;
        };
        if done {
            self.mem.journal_keep();
            Some((r, n))
        } else {
            self.mem.journal_undo();
            (self.xmm, self.ymm_hi, self.mxcsr, self.fp, self.fp_masked) = saved;
            self.fpimage.bytes[..2].copy_from_slice(&control_word.to_le_bytes());
            None
        }
    }

    /// The library instruction at `pc`, decoded from the page cache (an unreadable byte ends
    /// the bytes: the instruction then decodes as invalid, which the engine declines).
    fn library_insn(&mut self, pc: u64) -> std::rc::Rc<Decoded> {
        let slot = (pc as usize ^ (pc as usize >> 9)) % LIBRARY_RECENT;
        if let Some((at, d)) = &self.lib_recent[slot] {
            if *at == pc {
                return std::rc::Rc::clone(d);
            }
        }
        let mem = &mut self.mem;
        let (d, _) = self.lib_code.get_or_decode(pc, |buf| {
            if mem.read_bytes(pc, buf).is_ok() {
                return buf.len();
            }
            let mut n = 0;
            while n < buf.len() {
                match mem.read::<1>(pc.wrapping_add(n as u64)) {
                    Ok([b]) => buf[n] = b,
                    Err(_) => break,
                }
                n += 1;
            }
            n
        });
        self.lib_recent[slot] = Some((pc, std::rc::Rc::clone(&d)));
        d
    }
}

impl Emulate {
    /// Pages held by the cache now, and at most so far.
    pub fn cache_pages(&self) -> (usize, usize) {
        (self.mem.pages(), self.mem.peak_pages)
    }
}

#[cfg(test)]
mod tests;
