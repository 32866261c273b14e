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
//!   computed the way this CPU family does where a test pins them (see the tests below);
//! - SSE arithmetic, conversions and compares run the very instruction on the host CPU with the
//!   tracee's MXCSR loaded (rounding mode, DAZ/FTZ, sticky exception flags all carried over), so
//!   results are bit-identical; when the tracee unmasks a floating-point exception they fall back;
//! - a memory access the cache cannot do (unmapped, unreadable or read-only page, a misaligned
//!   aligned-SSE operand) falls back to a single step, which faults exactly as natively;
//! - division by zero and quotient overflow fall back (the step raises SIGFPE).
//!
//! Asynchronous signals are noticed only when the tracee next runs (a fallback step, a system
//! call, a library call): the step engine stays the reference for timing-sensitive signal code.
//! Memory shared with untraced threads is re-synchronised every [`THREADED_SYNC`] instructions.

use crate::decode::Decoded;
use crate::event::{AccessKind, MemAccess};
use crate::mem::{MemFault, PageCache};
use crate::ptrace::{self, FpRegs, Regs};
use crate::step::{Executor, Runner};
use crate::Error;
use iced_x86::{ConditionCode, FlowControl, Instruction, Mnemonic, OpKind, Register};
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

/// A memory operand: `seg:[base + (index << scale) + disp]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemRef {
    base: u8,
    index: u8,
    scale: u8,
    /// 0: no segment base, 1: fs, 2: gs.
    seg: u8,
    /// Bytes accessed (0 for `lea`).
    size: u8,
    disp: u64,
}

/// An operand of a compiled instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Opnd {
    None,
    /// A general-purpose register: index in the register file, size in bytes, AH/BH/CH/DH.
    Gpr {
        idx: u8,
        size: u8,
        high: bool,
    },
    Xmm(u8),
    Mem(MemRef),
    Imm(u64),
}

/// What a compiled instruction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Not implemented: single-step it.
    Unsupported,
    Nop,
    Mov,
    Movzx,
    Movsx,
    Lea,
    Xchg,
    Bswap,
    Cmov,
    Setcc,
    Add,
    Or,
    Adc,
    Sbb,
    And,
    Sub,
    Xor,
    Cmp,
    Test,
    Inc,
    Dec,
    Neg,
    Not,
    Shl,
    Shr,
    Sar,
    Rol,
    Ror,
    /// One-operand `imul`: rDX:rAX = rAX * src.
    Imul1,
    Mul1,
    /// `dst = a * b` (two- and three-operand `imul`).
    Imul,
    Div,
    Idiv,
    Bt,
    Bts,
    Btr,
    Btc,
    Popcnt,
    Jcc,
    Jmp,
    Call,
    Ret,
    Push,
    Pop,
    Leave,
    /// cwd/cdq/cqo.
    SignToRdx,
    /// cbw/cwde/cdqe.
    SignExtendRax,
    Stos,
    Movs,
    Clc,
    Stc,
    Cmc,
    Cld,
    Std,
    Lahf,
    Sahf,
    // SSE.
    XCopy,
    XLoad,
    XStore,
    XStoreHigh,
    XLoadLow,
    XLoadHigh,
    XMovLow,
    XMovqZ,
    XFromGpr,
    XToGpr,
    XBin(XOp),
    XCmp,
    XRound,
    XShuf(Shuf),
    XComi(Comi),
    XPtest,
    XCvtToGpr(CvtI),
    XCvtFromGpr(CvtF),
    XMovmsk(Msk),
    XExtract,
    XInsert,
}

/// Instructions that rearrange lanes under an immediate, implemented here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shuf {
    Shufps,
    Shufpd,
    Pshufd,
    Pshuflw,
    Pshufhw,
    Palignr,
    Pblendw,
    Blendps,
    Blendpd,
    Psllw,
    Pslld,
    Psllq,
    Psrlw,
    Psrld,
    Psrlq,
    Psraw,
    Psrad,
    Pslldq,
    Psrldq,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comi {
    Comisd,
    Ucomisd,
    Comiss,
    Ucomiss,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CvtI {
    Cvttsd2si,
    Cvtsd2si,
    Cvttss2si,
    Cvtss2si,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CvtF {
    Cvtsi2sd,
    Cvtsi2ss,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Msk {
    Movmskpd,
    Movmskps,
    Pmovmskb,
}

/// One instruction compiled for the interpreter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    pub code: Code,
    /// Operand size in bytes (integer instructions), or the lane size (extract/insert).
    pub size: u8,
    /// Condition code (jcc, cmov, setcc), immediate (SSE), REP prefix (string instructions).
    pub cc: u8,
    /// A 16-byte memory operand must be 16-byte aligned (legacy SSE).
    pub align: bool,
    pub ops: [Opnd; 3],
}

impl Op {
    pub const UNSUPPORTED: Op = Op {
        code: Code::Unsupported,
        size: 0,
        cc: 0,
        align: false,
        ops: [Opnd::None; 3],
    };

    /// Whether the interpreter implements this instruction.
    pub fn supported(&self) -> bool {
        self.code != Code::Unsupported
    }
}

// ---------------------------------------------------------------------------------------------
// SSE operations run on the host CPU.

/// Runs the instruction template `[...]` (one or more asm template strings) with the tracee's
/// MXCSR image at `$mxcsr` (a `*mut u32`) loaded, storing the flags it raises back into the
/// image and restoring the host's MXCSR; `$operands` are the asm operands and options of the
/// template. Expands to an `asm!`: the caller's `unsafe` block states why it is sound.
macro_rules! under_mxcsr {
    ($mxcsr:expr, [$($ins:tt)*], $($operands:tt)*) => {{
        let mut host: u32 = 0;
        let guest: *mut u32 = $mxcsr;
        asm!(
            "stmxcsr [{h}]",
            "ldmxcsr [{g}]",
            $($ins)*,
            "stmxcsr [{g}]",
            "ldmxcsr [{h}]",
            h = in(reg) &mut host as *mut u32,
            g = in(reg) guest,
            $($operands)*
        );
    }};
}

/// Runs `ins a, b` with the tracee's MXCSR loaded, folding the exception flags it raises back.
macro_rules! fp_bin {
    ($ins:expr, $a:expr, $b:expr, $mx:expr) => {{
        let mut a: __m128i = $a;
        let b: __m128i = $b;
        // SAFETY: the instruction only reads and writes the named xmm registers and the two
        // MXCSR images, which are valid u32 locations; the caller checked that every
        // floating-point exception is masked, so it cannot trap.
        unsafe {
            under_mxcsr!(
                $mx,
                [concat!($ins, " {a}, {b}")],
                a = inout(xmm_reg) a,
                b = in(xmm_reg) b,
                options(nostack, preserves_flags),
            );
        }
        a
    }};
}

/// Runs `ins a, b` for an instruction that neither reads nor changes MXCSR.
macro_rules! int_bin {
    ($ins:literal, $a:expr, $b:expr) => {{
        let mut a: __m128i = $a;
        let b: __m128i = $b;
        // SAFETY: a register-only SSE instruction the host CPU supports (the tracee, on the same
        // CPU, was about to run it).
        unsafe {
            asm!(
                concat!($ins, " {a}, {b}"),
                a = inout(xmm_reg) a,
                b = in(xmm_reg) b,
                options(pure, nomem, nostack, preserves_flags),
            );
        }
        a
    }};
}

macro_rules! xops {
    (fp: [$($fp:ident $fs:literal),* $(,)?], int: [$($io:ident $is:literal),* $(,)?] $(,)?) => {
        /// Two-operand SSE instructions run on the host (`xmm op= xmm/mem`).
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum XOp { $($fp,)* $($io,)* }

        impl XOp {
            /// Whether the instruction is floating-point arithmetic (depends on MXCSR).
            pub fn is_fp(self) -> bool {
                match self { $(XOp::$fp => true,)* _ => false }
            }

            fn from_mnemonic(m: Mnemonic) -> Option<XOp> {
                match m {
                    $(Mnemonic::$fp => Some(XOp::$fp),)*
                    $(Mnemonic::$io => Some(XOp::$io),)*
                    _ => None,
                }
            }

            #[inline(never)]
            fn run(self, a: __m128i, b: __m128i, mxcsr: &mut u32) -> __m128i {
                let mx: *mut u32 = mxcsr;
                match self {
                    $(XOp::$fp => fp_bin!($fs, a, b, mx),)*
                    $(XOp::$io => { let _ = mx; int_bin!($is, a, b) },)*
                }
            }
        }
    };
}

xops! {
    fp: [
        Addss "addss", Addsd "addsd", Addps "addps", Addpd "addpd",
        Subss "subss", Subsd "subsd", Subps "subps", Subpd "subpd",
        Mulss "mulss", Mulsd "mulsd", Mulps "mulps", Mulpd "mulpd",
        Divss "divss", Divsd "divsd", Divps "divps", Divpd "divpd",
        Minss "minss", Minsd "minsd", Minps "minps", Minpd "minpd",
        Maxss "maxss", Maxsd "maxsd", Maxps "maxps", Maxpd "maxpd",
        Sqrtss "sqrtss", Sqrtsd "sqrtsd", Sqrtps "sqrtps", Sqrtpd "sqrtpd",
        Cvtss2sd "cvtss2sd", Cvtsd2ss "cvtsd2ss", Cvtdq2pd "cvtdq2pd", Cvtdq2ps "cvtdq2ps",
        Cvtps2pd "cvtps2pd", Cvtpd2ps "cvtpd2ps", Cvttps2dq "cvttps2dq", Cvttpd2dq "cvttpd2dq",
        Cvtps2dq "cvtps2dq", Cvtpd2dq "cvtpd2dq",
        Addsubpd "addsubpd", Addsubps "addsubps", Haddpd "haddpd", Haddps "haddps",
        Hsubpd "hsubpd", Hsubps "hsubps",
        Rcpps "rcpps", Rcpss "rcpss", Rsqrtps "rsqrtps", Rsqrtss "rsqrtss",
    ],
    int: [
        Andps "andps", Andpd "andpd", Andnps "andnps", Andnpd "andnpd",
        Orps "orps", Orpd "orpd", Xorps "xorps", Xorpd "xorpd",
        Unpcklps "unpcklps", Unpckhps "unpckhps", Unpcklpd "unpcklpd", Unpckhpd "unpckhpd",
        Movhlps "movhlps", Movlhps "movlhps",
        Movddup "movddup", Movshdup "movshdup", Movsldup "movsldup",
        Paddb "paddb", Paddw "paddw", Paddd "paddd", Paddq "paddq",
        Psubb "psubb", Psubw "psubw", Psubd "psubd", Psubq "psubq",
        Paddsb "paddsb", Paddsw "paddsw", Paddusb "paddusb", Paddusw "paddusw",
        Psubsb "psubsb", Psubsw "psubsw", Psubusb "psubusb", Psubusw "psubusw",
        Pmullw "pmullw", Pmulhw "pmulhw", Pmulhuw "pmulhuw", Pmuludq "pmuludq",
        Pmaddwd "pmaddwd", Pavgb "pavgb", Pavgw "pavgw",
        Pminub "pminub", Pmaxub "pmaxub", Pminsw "pminsw", Pmaxsw "pmaxsw", Psadbw "psadbw",
        Pcmpeqb "pcmpeqb", Pcmpeqw "pcmpeqw", Pcmpeqd "pcmpeqd",
        Pcmpgtb "pcmpgtb", Pcmpgtw "pcmpgtw", Pcmpgtd "pcmpgtd",
        Pand "pand", Pandn "pandn", Por "por", Pxor "pxor",
        Punpcklbw "punpcklbw", Punpcklwd "punpcklwd", Punpckldq "punpckldq",
        Punpcklqdq "punpcklqdq", Punpckhbw "punpckhbw", Punpckhwd "punpckhwd",
        Punpckhdq "punpckhdq", Punpckhqdq "punpckhqdq",
        Packsswb "packsswb", Packssdw "packssdw", Packuswb "packuswb",
        Psllw "psllw", Pslld "pslld", Psllq "psllq", Psrlw "psrlw", Psrld "psrld",
        Psrlq "psrlq", Psraw "psraw", Psrad "psrad",
        Pshufb "pshufb", Pabsb "pabsb", Pabsw "pabsw", Pabsd "pabsd",
        Phaddw "phaddw", Phaddd "phaddd", Phsubw "phsubw", Phsubd "phsubd",
        Pmaddubsw "pmaddubsw", Pmulhrsw "pmulhrsw", Psignb "psignb", Psignw "psignw",
        Psignd "psignd",
        Pmulld "pmulld", Pmuldq "pmuldq", Pminsb "pminsb", Pminsd "pminsd",
        Pminuw "pminuw", Pminud "pminud", Pmaxsb "pmaxsb", Pmaxsd "pmaxsd",
        Pmaxuw "pmaxuw", Pmaxud "pmaxud", Pcmpeqq "pcmpeqq", Pcmpgtq "pcmpgtq",
        Packusdw "packusdw",
        Pmovsxbw "pmovsxbw", Pmovsxbd "pmovsxbd", Pmovsxbq "pmovsxbq", Pmovsxwd "pmovsxwd",
        Pmovsxwq "pmovsxwq", Pmovsxdq "pmovsxdq", Pmovzxbw "pmovzxbw", Pmovzxbd "pmovzxbd",
        Pmovzxbq "pmovzxbq", Pmovzxwd "pmovzxwd", Pmovzxwq "pmovzxwq", Pmovzxdq "pmovzxdq",
        Phminposuw "phminposuw",
    ],
}

/// `cmp{ss,sd,ps,pd}` (`m` = 0..=3) with predicate `pred` (0..=7).
#[inline(never)]
fn run_cmp(m: u8, pred: u8, a: __m128i, b: __m128i, mx: *mut u32) -> __m128i {
    macro_rules! preds {
        ($suffix:literal) => {
            match pred {
                0 => fp_bin!(concat!("cmpeq", $suffix), a, b, mx),
                1 => fp_bin!(concat!("cmplt", $suffix), a, b, mx),
                2 => fp_bin!(concat!("cmple", $suffix), a, b, mx),
                3 => fp_bin!(concat!("cmpunord", $suffix), a, b, mx),
                4 => fp_bin!(concat!("cmpneq", $suffix), a, b, mx),
                5 => fp_bin!(concat!("cmpnlt", $suffix), a, b, mx),
                6 => fp_bin!(concat!("cmpnle", $suffix), a, b, mx),
                _ => fp_bin!(concat!("cmpord", $suffix), a, b, mx),
            }
        };
    }
    match m {
        0 => preds!("ss"),
        1 => preds!("sd"),
        2 => preds!("ps"),
        _ => preds!("pd"),
    }
}

/// `round{ss,sd,ps,pd}` with immediate `imm` (0..=15).
#[inline(never)]
fn run_round(m: u8, imm: u8, a: __m128i, b: __m128i, mx: *mut u32) -> __m128i {
    macro_rules! fp_imm {
        ($ins:literal, $imm:literal) => {{
            let mut a: __m128i = a;
            // SAFETY: as in `fp_bin`.
            unsafe {
                under_mxcsr!(
                    mx,
                    [concat!($ins, " {a}, {b}, ", $imm)],
                    a = inout(xmm_reg) a,
                    b = in(xmm_reg) b,
                    options(nostack, preserves_flags),
                );
            }
            a
        }};
    }
    macro_rules! imms {
        ($ins:literal) => {
            match imm {
                0 => fp_imm!($ins, "0"),
                1 => fp_imm!($ins, "1"),
                2 => fp_imm!($ins, "2"),
                3 => fp_imm!($ins, "3"),
                4 => fp_imm!($ins, "4"),
                5 => fp_imm!($ins, "5"),
                6 => fp_imm!($ins, "6"),
                7 => fp_imm!($ins, "7"),
                8 => fp_imm!($ins, "8"),
                9 => fp_imm!($ins, "9"),
                10 => fp_imm!($ins, "10"),
                11 => fp_imm!($ins, "11"),
                12 => fp_imm!($ins, "12"),
                13 => fp_imm!($ins, "13"),
                14 => fp_imm!($ins, "14"),
                _ => fp_imm!($ins, "15"),
            }
        };
    }
    match m {
        0 => imms!("roundss"),
        1 => imms!("roundsd"),
        2 => imms!("roundps"),
        _ => imms!("roundpd"),
    }
}

#[inline(always)]
fn to_m128(v: u128) -> __m128i {
    // SAFETY: both are 16 plain bytes.
    unsafe { std::mem::transmute::<u128, __m128i>(v) }
}

#[inline(always)]
fn from_m128(v: __m128i) -> u128 {
    // SAFETY: both are 16 plain bytes.
    unsafe { std::mem::transmute::<__m128i, u128>(v) }
}

// ---------------------------------------------------------------------------------------------
// Compilation.

fn opnd(i: &Instruction, k: u32) -> Option<Opnd> {
    Some(match i.op_kind(k) {
        OpKind::Register => {
            let reg = i.op_register(k);
            if reg.is_gpr() {
                Opnd::Gpr {
                    idx: reg_index(reg)?,
                    size: reg.size() as u8,
                    high: matches!(
                        reg,
                        Register::AH | Register::BH | Register::CH | Register::DH
                    ),
                }
            } else if reg.is_xmm() {
                let n = reg.number();
                if n >= 16 {
                    return None;
                }
                Opnd::Xmm(n as u8)
            } else {
                return None;
            }
        }
        OpKind::Memory => {
            let base = i.memory_base();
            let index = i.memory_index();
            let (base, disp) = match base {
                Register::None => (NONE, i.memory_displacement64()),
                Register::RIP => (NONE, i.memory_displacement64()),
                r if r.is_gpr64() => (reg_index(r)?, i.memory_displacement64()),
                _ => return None,
            };
            let index = match index {
                Register::None => NONE,
                r if r.is_gpr64() => reg_index(r)?,
                _ => return None,
            };
            let seg = match i.memory_segment() {
                Register::FS => 1,
                Register::GS => 2,
                Register::ES | Register::CS | Register::SS | Register::DS => 0,
                _ => return None,
            };
            Opnd::Mem(MemRef {
                base,
                index,
                scale: i.memory_index_scale().trailing_zeros() as u8,
                seg,
                size: i.memory_size().size() as u8,
                disp,
            })
        }
        OpKind::Immediate8
        | OpKind::Immediate8_2nd
        | OpKind::Immediate16
        | OpKind::Immediate32
        | OpKind::Immediate64
        | OpKind::Immediate8to16
        | OpKind::Immediate8to32
        | OpKind::Immediate8to64
        | OpKind::Immediate32to64 => Opnd::Imm(i.immediate(k)),
        OpKind::NearBranch64 => Opnd::Imm(i.near_branch64()),
        _ => return None,
    })
}

fn osize(o: &Opnd) -> u8 {
    match *o {
        Opnd::Gpr { size, .. } => size,
        Opnd::Mem(m) => m.size,
        Opnd::Xmm(_) => 16,
        _ => 0,
    }
}

fn cc_of(i: &Instruction) -> Option<u8> {
    match i.condition_code() {
        ConditionCode::None => None,
        c => Some(c as u8 - 1),
    }
}

/// Compiles an instruction for the interpreter ([`Op::UNSUPPORTED`] when it must be stepped).
pub fn compile(i: &Instruction) -> Op {
    compile_inner(i).unwrap_or(Op::UNSUPPORTED)
}

fn compile_inner(i: &Instruction) -> Option<Op> {
    use Mnemonic as M;
    if i.is_invalid() || i.has_lock_prefix() || i.op_count() > 3 {
        return None;
    }
    let m = i.mnemonic();
    // String instructions: only rep/plain stos and movs, 64-bit addressing, no segment override.
    let string = (0..i.op_count()).any(|k| {
        matches!(
            i.op_kind(k),
            OpKind::MemorySegSI
                | OpKind::MemorySegESI
                | OpKind::MemorySegRSI
                | OpKind::MemorySegDI
                | OpKind::MemorySegEDI
                | OpKind::MemorySegRDI
                | OpKind::MemoryESDI
                | OpKind::MemoryESEDI
                | OpKind::MemoryESRDI
        )
    });
    if string {
        if i.has_repne_prefix() {
            return None;
        }
        let ok_kinds = (0..i.op_count()).all(|k| {
            matches!(
                i.op_kind(k),
                OpKind::MemorySegRSI | OpKind::MemoryESRDI | OpKind::Register
            )
        });
        if !ok_kinds
            || !matches!(
                i.memory_segment(),
                Register::DS | Register::ES | Register::None
            )
            || i.segment_prefix() != Register::None
        {
            return None;
        }
        let (code, size) = match m {
            M::Stosb => (Code::Stos, 1),
            M::Stosw => (Code::Stos, 2),
            M::Stosd => (Code::Stos, 4),
            M::Stosq => (Code::Stos, 8),
            M::Movsb => (Code::Movs, 1),
            M::Movsw => (Code::Movs, 2),
            M::Movsd => (Code::Movs, 4),
            M::Movsq => (Code::Movs, 8),
            _ => return None,
        };
        return Some(Op {
            code,
            size,
            cc: i.has_rep_prefix() as u8,
            align: false,
            ops: [Opnd::None; 3],
        });
    }
    let n = i.op_count();
    let mut ops = [Opnd::None; 3];
    for k in 0..n {
        ops[k as usize] = opnd(i, k)?;
    }
    let mut op = Op {
        code: Code::Unsupported,
        size: osize(&ops[0]),
        cc: 0,
        align: false,
        ops,
    };
    let is_gpr = |o: &Opnd| matches!(o, Opnd::Gpr { .. });
    let is_xmm = |o: &Opnd| matches!(o, Opnd::Xmm(_));
    let is_mem = |o: &Opnd| matches!(o, Opnd::Mem(_));
    let is_imm = |o: &Opnd| matches!(o, Opnd::Imm(_));
    let rm = |o: &Opnd| is_gpr(o) || is_mem(o);
    let xm = |o: &Opnd| is_xmm(o) || is_mem(o);
    let [o0, o1, o2] = ops;
    op.code = match m {
        M::Nop | M::Endbr64 | M::Endbr32 | M::Pause => Code::Nop,
        M::Prefetchnta | M::Prefetcht0 | M::Prefetcht1 | M::Prefetcht2 | M::Prefetchw => Code::Nop,
        M::Mov if n == 2 && rm(&o0) && (rm(&o1) || is_imm(&o1)) => Code::Mov,
        M::Movnti if n == 2 && is_mem(&o0) && is_gpr(&o1) => Code::Mov,
        M::Movzx if n == 2 && is_gpr(&o0) && rm(&o1) => Code::Movzx,
        M::Movsx | M::Movsxd if n == 2 && is_gpr(&o0) && rm(&o1) => Code::Movsx,
        M::Lea if n == 2 && is_gpr(&o0) && is_mem(&o1) => Code::Lea,
        M::Xchg if n == 2 && is_gpr(&o0) && is_gpr(&o1) => Code::Xchg,
        M::Bswap if n == 1 && is_gpr(&o0) && op.size >= 4 => Code::Bswap,
        M::Cmovo
        | M::Cmovno
        | M::Cmovb
        | M::Cmovae
        | M::Cmove
        | M::Cmovne
        | M::Cmovbe
        | M::Cmova
        | M::Cmovs
        | M::Cmovns
        | M::Cmovp
        | M::Cmovnp
        | M::Cmovl
        | M::Cmovge
        | M::Cmovle
        | M::Cmovg
            if n == 2 && is_gpr(&o0) && rm(&o1) =>
        {
            op.cc = cc_of(i)?;
            Code::Cmov
        }
        M::Seto
        | M::Setno
        | M::Setb
        | M::Setae
        | M::Sete
        | M::Setne
        | M::Setbe
        | M::Seta
        | M::Sets
        | M::Setns
        | M::Setp
        | M::Setnp
        | M::Setl
        | M::Setge
        | M::Setle
        | M::Setg
            if n == 1 && rm(&o0) =>
        {
            op.cc = cc_of(i)?;
            Code::Setcc
        }
        M::Add | M::Or | M::Adc | M::Sbb | M::And | M::Sub | M::Xor | M::Cmp | M::Test
            if n == 2 && rm(&o0) && (rm(&o1) || is_imm(&o1)) =>
        {
            match m {
                M::Add => Code::Add,
                M::Or => Code::Or,
                M::Adc => Code::Adc,
                M::Sbb => Code::Sbb,
                M::And => Code::And,
                M::Sub => Code::Sub,
                M::Xor => Code::Xor,
                M::Cmp => Code::Cmp,
                _ => Code::Test,
            }
        }
        M::Inc if n == 1 && rm(&o0) => Code::Inc,
        M::Dec if n == 1 && rm(&o0) => Code::Dec,
        M::Neg if n == 1 && rm(&o0) => Code::Neg,
        M::Not if n == 1 && rm(&o0) => Code::Not,
        M::Shl | M::Sal | M::Shr | M::Sar | M::Rol | M::Ror
            if n == 2
                && rm(&o0)
                && (is_imm(&o1)
                    || o1
                        == Opnd::Gpr {
                            idx: R_RCX,
                            size: 1,
                            high: false,
                        }) =>
        {
            match m {
                M::Shl | M::Sal => Code::Shl,
                M::Shr => Code::Shr,
                M::Sar => Code::Sar,
                M::Rol => Code::Rol,
                _ => Code::Ror,
            }
        }
        M::Imul if n == 1 && rm(&o0) => Code::Imul1,
        M::Imul if n == 2 && is_gpr(&o0) && rm(&o1) => {
            op.ops = [o0, o0, o1];
            Code::Imul
        }
        M::Imul if n == 3 && is_gpr(&o0) && rm(&o1) && is_imm(&o2) => Code::Imul,
        M::Mul if n == 1 && rm(&o0) => Code::Mul1,
        M::Div if n == 1 && rm(&o0) => Code::Div,
        M::Idiv if n == 1 && rm(&o0) => Code::Idiv,
        M::Bt | M::Bts | M::Btr | M::Btc
            if n == 2 && (is_gpr(&o0) || (is_mem(&o0) && is_imm(&o1))) =>
        {
            match m {
                M::Bt => Code::Bt,
                M::Bts => Code::Bts,
                M::Btr => Code::Btr,
                _ => Code::Btc,
            }
        }
        M::Popcnt if n == 2 && is_gpr(&o0) && rm(&o1) => Code::Popcnt,
        M::Jo
        | M::Jno
        | M::Jb
        | M::Jae
        | M::Je
        | M::Jne
        | M::Jbe
        | M::Ja
        | M::Js
        | M::Jns
        | M::Jp
        | M::Jnp
        | M::Jl
        | M::Jge
        | M::Jle
        | M::Jg
            if n == 1 && is_imm(&o0) =>
        {
            op.cc = cc_of(i)?;
            Code::Jcc
        }
        M::Jmp if n == 1 && (is_imm(&o0) || (rm(&o0) && op.size == 8)) => Code::Jmp,
        M::Call
            if n == 1
                && (is_imm(&o0) || (rm(&o0) && op.size == 8))
                && i.stack_pointer_increment() == -8 =>
        {
            Code::Call
        }
        M::Ret if i.stack_pointer_increment() >= 8 && (n == 0 || is_imm(&o0)) => Code::Ret,
        M::Push if n == 1 && i.stack_pointer_increment() == -8 => {
            op.size = 8;
            Code::Push
        }
        M::Pop if n == 1 && is_gpr(&o0) && op.size == 8 => Code::Pop,
        M::Leave if i.code() == iced_x86::Code::Leaveq => Code::Leave,
        M::Cwd => {
            op.size = 2;
            Code::SignToRdx
        }
        M::Cdq => {
            op.size = 4;
            Code::SignToRdx
        }
        M::Cqo => {
            op.size = 8;
            Code::SignToRdx
        }
        M::Cbw => {
            op.size = 2;
            Code::SignExtendRax
        }
        M::Cwde => {
            op.size = 4;
            Code::SignExtendRax
        }
        M::Cdqe => {
            op.size = 8;
            Code::SignExtendRax
        }
        M::Clc => Code::Clc,
        M::Stc => Code::Stc,
        M::Cmc => Code::Cmc,
        M::Cld => Code::Cld,
        M::Std => Code::Std,
        M::Lahf => Code::Lahf,
        M::Sahf => Code::Sahf,
        // SSE moves.
        M::Movaps | M::Movups | M::Movapd | M::Movupd | M::Movdqa | M::Movdqu | M::Lddqu
            if n == 2 =>
        {
            op.align = matches!(m, M::Movaps | M::Movapd | M::Movdqa);
            op.size = 16;
            if is_xmm(&o0) && is_xmm(&o1) {
                Code::XCopy
            } else if is_xmm(&o0) && is_mem(&o1) {
                Code::XLoad
            } else if is_mem(&o0) && is_xmm(&o1) && m != M::Lddqu {
                Code::XStore
            } else {
                return None;
            }
        }
        M::Movntps | M::Movntpd | M::Movntdq if n == 2 && is_mem(&o0) && is_xmm(&o1) => {
            op.align = true;
            op.size = 16;
            Code::XStore
        }
        M::Movss | M::Movsd if n == 2 => {
            op.size = if m == M::Movss { 4 } else { 8 };
            if is_xmm(&o0) && is_xmm(&o1) {
                Code::XMovLow
            } else if is_xmm(&o0) && is_mem(&o1) {
                Code::XLoad
            } else if is_mem(&o0) && is_xmm(&o1) {
                Code::XStore
            } else {
                return None;
            }
        }
        M::Movd | M::Movq if n == 2 => {
            let size = if m == M::Movd { 4 } else { 8 };
            if is_xmm(&o0) && is_gpr(&o1) {
                op.size = osize(&o1);
                Code::XFromGpr
            } else if is_gpr(&o0) && is_xmm(&o1) {
                op.size = osize(&o0);
                Code::XToGpr
            } else if is_xmm(&o0) && is_mem(&o1) {
                op.size = size;
                Code::XLoad
            } else if is_mem(&o0) && is_xmm(&o1) {
                op.size = size;
                Code::XStore
            } else if is_xmm(&o0) && is_xmm(&o1) && m == M::Movq {
                Code::XMovqZ
            } else {
                return None;
            }
        }
        M::Movlpd | M::Movlps | M::Movhpd | M::Movhps if n == 2 => {
            op.size = 8;
            let high = matches!(m, M::Movhpd | M::Movhps);
            if is_xmm(&o0) && is_mem(&o1) {
                if high {
                    Code::XLoadHigh
                } else {
                    Code::XLoadLow
                }
            } else if is_mem(&o0) && is_xmm(&o1) {
                if high {
                    Code::XStoreHigh
                } else {
                    Code::XStore
                }
            } else {
                return None;
            }
        }
        M::Cmpss | M::Cmpsd | M::Cmpps | M::Cmppd
            if n == 3 && is_xmm(&o0) && xm(&o1) && is_imm(&o2) =>
        {
            let Opnd::Imm(p) = o2 else { return None };
            if p > 7 {
                return None;
            }
            op.cc = p as u8;
            op.size = match m {
                M::Cmpss => 0,
                M::Cmpsd => 1,
                M::Cmpps => 2,
                _ => 3,
            };
            op.align = m == M::Cmpps || m == M::Cmppd;
            Code::XCmp
        }
        M::Roundss | M::Roundsd | M::Roundps | M::Roundpd
            if n == 3 && is_xmm(&o0) && xm(&o1) && is_imm(&o2) =>
        {
            let Opnd::Imm(p) = o2 else { return None };
            if p > 15 {
                return None;
            }
            op.cc = p as u8;
            op.size = match m {
                M::Roundss => 0,
                M::Roundsd => 1,
                M::Roundps => 2,
                _ => 3,
            };
            op.align = m == M::Roundps || m == M::Roundpd;
            Code::XRound
        }
        M::Shufps
        | M::Shufpd
        | M::Pshufd
        | M::Pshuflw
        | M::Pshufhw
        | M::Palignr
        | M::Pblendw
        | M::Blendps
        | M::Blendpd
            if n == 3 && is_xmm(&o0) && xm(&o1) && is_imm(&o2) =>
        {
            let Opnd::Imm(p) = o2 else { return None };
            op.cc = p as u8;
            op.align = true;
            Code::XShuf(match m {
                M::Shufps => Shuf::Shufps,
                M::Shufpd => Shuf::Shufpd,
                M::Pshufd => Shuf::Pshufd,
                M::Pshuflw => Shuf::Pshuflw,
                M::Pshufhw => Shuf::Pshufhw,
                M::Palignr => Shuf::Palignr,
                M::Pblendw => Shuf::Pblendw,
                M::Blendps => Shuf::Blendps,
                _ => Shuf::Blendpd,
            })
        }
        M::Psllw
        | M::Pslld
        | M::Psllq
        | M::Psrlw
        | M::Psrld
        | M::Psrlq
        | M::Psraw
        | M::Psrad
        | M::Pslldq
        | M::Psrldq
            if n == 2 && is_xmm(&o0) && is_imm(&o1) =>
        {
            let Opnd::Imm(p) = o1 else { return None };
            op.cc = p as u8;
            Code::XShuf(match m {
                M::Psllw => Shuf::Psllw,
                M::Pslld => Shuf::Pslld,
                M::Psllq => Shuf::Psllq,
                M::Psrlw => Shuf::Psrlw,
                M::Psrld => Shuf::Psrld,
                M::Psrlq => Shuf::Psrlq,
                M::Psraw => Shuf::Psraw,
                M::Psrad => Shuf::Psrad,
                M::Pslldq => Shuf::Pslldq,
                _ => Shuf::Psrldq,
            })
        }
        M::Comisd | M::Ucomisd | M::Comiss | M::Ucomiss if n == 2 && is_xmm(&o0) && xm(&o1) => {
            Code::XComi(match m {
                M::Comisd => Comi::Comisd,
                M::Ucomisd => Comi::Ucomisd,
                M::Comiss => Comi::Comiss,
                _ => Comi::Ucomiss,
            })
        }
        M::Ptest if n == 2 && is_xmm(&o0) && xm(&o1) => {
            op.align = true;
            Code::XPtest
        }
        M::Cvttsd2si | M::Cvtsd2si | M::Cvttss2si | M::Cvtss2si
            if n == 2 && is_gpr(&o0) && op.size >= 4 && xm(&o1) =>
        {
            Code::XCvtToGpr(match m {
                M::Cvttsd2si => CvtI::Cvttsd2si,
                M::Cvtsd2si => CvtI::Cvtsd2si,
                M::Cvttss2si => CvtI::Cvttss2si,
                _ => CvtI::Cvtss2si,
            })
        }
        M::Cvtsi2sd | M::Cvtsi2ss if n == 2 && is_xmm(&o0) && rm(&o1) && osize(&o1) >= 4 => {
            op.size = osize(&o1);
            Code::XCvtFromGpr(if m == M::Cvtsi2sd {
                CvtF::Cvtsi2sd
            } else {
                CvtF::Cvtsi2ss
            })
        }
        M::Movmskpd | M::Movmskps | M::Pmovmskb if n == 2 && is_gpr(&o0) && is_xmm(&o1) => {
            Code::XMovmsk(match m {
                M::Movmskpd => Msk::Movmskpd,
                M::Movmskps => Msk::Movmskps,
                _ => Msk::Pmovmskb,
            })
        }
        M::Pextrb | M::Pextrw | M::Pextrd | M::Pextrq | M::Extractps
            if n == 3 && rm(&o0) && is_xmm(&o1) && is_imm(&o2) =>
        {
            let Opnd::Imm(p) = o2 else { return None };
            op.cc = p as u8;
            op.size = match m {
                M::Pextrb => 1,
                M::Pextrw => 2,
                M::Pextrd | M::Extractps => 4,
                _ => 8,
            };
            Code::XExtract
        }
        M::Pinsrb | M::Pinsrw | M::Pinsrd | M::Pinsrq
            if n == 3 && is_xmm(&o0) && rm(&o1) && is_imm(&o2) =>
        {
            let Opnd::Imm(p) = o2 else { return None };
            op.cc = p as u8;
            op.size = match m {
                M::Pinsrb => 1,
                M::Pinsrw => 2,
                M::Pinsrd => 4,
                _ => 8,
            };
            Code::XInsert
        }
        _ => {
            let x = XOp::from_mnemonic(m)?;
            if !(n == 2 && is_xmm(&o0) && xm(&o1)) {
                return None;
            }
            op.align = !matches!(x, XOp::Movddup);
            Code::XBin(x)
        }
    };
    Some(op)
}

// ---------------------------------------------------------------------------------------------
// Flags.

#[inline(always)]
fn mask(size: u8) -> u64 {
    if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (size as u32 * 8)) - 1
    }
}

#[inline(always)]
fn sign_bit(size: u8) -> u64 {
    1u64 << (size as u32 * 8 - 1)
}

#[inline(always)]
fn sext(v: u64, size: u8) -> u64 {
    let sh = 64 - size as u32 * 8;
    (((v << sh) as i64) >> sh) as u64
}

#[inline(always)]
fn parity(v: u64) -> u64 {
    if (v as u8).count_ones() & 1 == 0 {
        PF
    } else {
        0
    }
}

/// SF, ZF and PF of a result.
#[inline(always)]
fn szp(res: u64, size: u8) -> u64 {
    let m = res & mask(size);
    (if m == 0 { ZF } else { 0 }) | (if m & sign_bit(size) != 0 { SF } else { 0 }) | parity(m)
}

#[inline(always)]
fn add_flags(a: u64, b: u64, c: u64, size: u8) -> (u64, u64) {
    let m = mask(size);
    let full = a as u128 + b as u128 + c as u128;
    let res = full as u64 & m;
    let cf = (full >> (size as u32 * 8)) as u64 & 1;
    let of = if (a ^ res) & (b ^ res) & sign_bit(size) != 0 {
        OF
    } else {
        0
    };
    let af = (a ^ b ^ res) & AF;
    (res, cf | of | af | szp(res, size))
}

#[inline(always)]
fn sub_flags(a: u64, b: u64, c: u64, size: u8) -> (u64, u64) {
    let m = mask(size);
    let res = a.wrapping_sub(b).wrapping_sub(c) & m;
    let cf = ((a as u128) < b as u128 + c as u128) as u64;
    let of = if (a ^ b) & (a ^ res) & sign_bit(size) != 0 {
        OF
    } else {
        0
    };
    let af = (a ^ b ^ res) & AF;
    (res, cf | of | af | szp(res, size))
}

#[inline(always)]
fn set_flags(r: &mut Regs, which: u64, value: u64) {
    r.eflags = (r.eflags & !which) | (value & which);
}

#[inline(always)]
fn cond(cc: u8, f: u64) -> bool {
    let t = match cc >> 1 {
        0 => f & OF != 0,
        1 => f & CF != 0,
        2 => f & ZF != 0,
        3 => f & (CF | ZF) != 0,
        4 => f & SF != 0,
        5 => f & PF != 0,
        6 => (f & SF != 0) != (f & OF != 0),
        _ => f & ZF != 0 || ((f & SF != 0) != (f & OF != 0)),
    };
    t ^ (cc & 1 != 0)
}

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
    mxcsr: u32,
    fpregs: Box<FpRegs>,
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
        let f = ptrace::get_fpregs(self.pid).map_err(|_| Fault)?;
        *self.fpregs = f;
        for k in 0..16 {
            let w = &f.xmm_space[4 * k..4 * k + 4];
            self.xmm[k] =
                w[0] as u128 | (w[1] as u128) << 32 | (w[2] as u128) << 64 | (w[3] as u128) << 96;
        }
        self.mxcsr = f.mxcsr;
        // All six exception masks set, and no bits beyond the architectural ones (such as
        // AMD's misaligned-SSE mode) that would change what faults.
        self.fp_masked = f.mxcsr & 0x1f80 == 0x1f80 && f.mxcsr & !0xffff == 0;
        self.fp = FpState::Clean;
        Ok(())
    }

    /// Sets up SSE state directly (tests).
    #[cfg(test)]
    fn set_fp(&mut self, xmm: [u128; 16], mxcsr: u32) {
        self.xmm = xmm;
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
        let [o0, o1, o2] = &op.ops;
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
            Code::Xchg => {
                let a = self.rd(r, o0)?;
                let b = self.rd(r, o1)?;
                self.wr(r, o0, b)?;
                self.wr(r, o1, a)?;
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
            _ => return self.run_sse(op, r),
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

/// Writes a general-purpose register with x86-64 semantics: 32-bit writes zero-extend, 8- and
/// 16-bit writes merge.
#[inline(always)]
fn write_gpr(r: &mut Regs, idx: u8, size: u8, high: bool, v: u64) {
    let g = &mut gprs_mut(r)[idx as usize];
    *g = match size {
        8 => v,
        4 => v & 0xffff_ffff,
        2 => (*g & !0xffff) | (v & 0xffff),
        _ if high => (*g & !0xff00) | ((v & 0xff) << 8),
        _ => (*g & !0xff) | (v & 0xff),
    };
}

/// The flags `div`/`idiv` leave undefined, as this CPU family sets them: CF and OF kept, AF
/// set, SF, ZF and PF cleared.
#[inline(always)]
fn div_flags(r: &mut Regs) {
    set_flags(r, SF | ZF | PF | AF, AF);
}

/// Shifts and rotates with a non-zero (masked) count: result, flags, flags written. Shifts set
/// AF (undefined in the manuals) as this CPU family does.
#[inline(always)]
fn shift(code: Code, a: u64, count: u32, size: u8, flags: u64) -> (u64, u64, u64) {
    let bits = size as u32 * 8;
    let m = mask(size);
    let msb = |v: u64| (v >> (bits - 1)) & 1;
    match code {
        Code::Shl => {
            let full = (a as u128) << count;
            let res = full as u64 & m;
            let cf = ((full >> bits) & 1) as u64;
            let of = (msb(res) ^ cf) << 11;
            (res, cf | of | AF | szp(res, size), STATUS)
        }
        Code::Shr => {
            let res = if count >= 64 { 0 } else { a >> count };
            let cf = if count > 64 {
                0
            } else {
                (a >> (count - 1)) & 1
            };
            let of = if count == 1 { msb(a) << 11 } else { 0 };
            (res, cf | of | AF | szp(res, size), STATUS)
        }
        Code::Sar => {
            let s = sext(a, size) as i64;
            let res = (s >> count.min(63)) as u64 & m;
            let cf = ((s >> (count - 1).min(63)) & 1) as u64;
            (res, cf | AF | szp(res, size), STATUS)
        }
        Code::Rol => {
            let c = count % bits;
            let res = if c == 0 {
                a
            } else {
                ((a << c) | (a >> (bits - c))) & m
            };
            let cf = res & 1;
            let of = (msb(res) ^ cf) << 11;
            let _ = flags;
            (res, cf | of, CF | OF)
        }
        _ => {
            let c = count % bits;
            let res = if c == 0 {
                a
            } else {
                ((a >> c) | (a << (bits - c))) & m
            };
            let cf = msb(res);
            let of = (msb(res) ^ ((res >> (bits - 2)) & 1)) << 11;
            (res, cf | of, CF | OF)
        }
    }
}

fn shuffle(s: Shuf, a: u128, b: u128, imm: u8) -> u128 {
    let imm = imm as u32;
    let l32 = |v: u128, k: u32| (v >> (32 * (k & 3))) as u32 as u128;
    let l64 = |v: u128, k: u32| (v >> (64 * (k & 1))) as u64 as u128;
    let l16 = |v: u128, k: u32| (v >> (16 * (k & 7))) as u16 as u128;
    // Per-lane shifts: each lane of `w` bits shifted by `imm`.
    let lanes = |v: u128, w: u32, f: &dyn Fn(u64) -> u64| {
        let mut out = 0u128;
        let m = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
        for k in 0..128 / w {
            let lane = (v >> (k * w)) as u64 & m;
            out |= ((f(lane) & m) as u128) << (k * w);
        }
        out
    };
    match s {
        Shuf::Shufps => {
            l32(a, imm) | l32(a, imm >> 2) << 32 | l32(b, imm >> 4) << 64 | l32(b, imm >> 6) << 96
        }
        Shuf::Shufpd => l64(a, imm) | l64(b, imm >> 1) << 64,
        Shuf::Pshufd => {
            l32(b, imm) | l32(b, imm >> 2) << 32 | l32(b, imm >> 4) << 64 | l32(b, imm >> 6) << 96
        }
        Shuf::Pshuflw => {
            let lo = l16(b, imm & 3)
                | l16(b, (imm >> 2) & 3) << 16
                | l16(b, (imm >> 4) & 3) << 32
                | l16(b, (imm >> 6) & 3) << 48;
            lo | (b >> 64) << 64
        }
        Shuf::Pshufhw => {
            let hi = l16(b, 4 + (imm & 3))
                | l16(b, 4 + ((imm >> 2) & 3)) << 16
                | l16(b, 4 + ((imm >> 4) & 3)) << 32
                | l16(b, 4 + ((imm >> 6) & 3)) << 48;
            (b & u64::MAX as u128) | hi << 64
        }
        Shuf::Palignr => {
            // (a:b) >> (imm * 8), low 128 bits.
            let sh = imm * 8;
            if sh >= 256 {
                0
            } else if sh >= 128 {
                a >> (sh - 128)
            } else if sh == 0 {
                b
            } else {
                (b >> sh) | (a << (128 - sh))
            }
        }
        Shuf::Pblendw => {
            let mut out = a;
            for k in 0..8 {
                if imm & (1 << k) != 0 {
                    let m = 0xffffu128 << (16 * k);
                    out = (out & !m) | (b & m);
                }
            }
            out
        }
        Shuf::Blendps => {
            let mut out = a;
            for k in 0..4 {
                if imm & (1 << k) != 0 {
                    let m = (u32::MAX as u128) << (32 * k);
                    out = (out & !m) | (b & m);
                }
            }
            out
        }
        Shuf::Blendpd => {
            let mut out = a;
            for k in 0..2 {
                if imm & (1 << k) != 0 {
                    let m = (u64::MAX as u128) << (64 * k);
                    out = (out & !m) | (b & m);
                }
            }
            out
        }
        Shuf::Psllw | Shuf::Pslld | Shuf::Psllq => {
            let w = match s {
                Shuf::Psllw => 16,
                Shuf::Pslld => 32,
                _ => 64,
            };
            if imm >= w {
                0
            } else {
                lanes(a, w, &|x| x << imm)
            }
        }
        Shuf::Psrlw | Shuf::Psrld | Shuf::Psrlq => {
            let w = match s {
                Shuf::Psrlw => 16,
                Shuf::Psrld => 32,
                _ => 64,
            };
            if imm >= w {
                0
            } else {
                lanes(a, w, &|x| x >> imm)
            }
        }
        Shuf::Psraw | Shuf::Psrad => {
            let w = if s == Shuf::Psraw { 16 } else { 32 };
            let c = imm.min(w - 1);
            lanes(a, w, &|x| {
                let sx = ((x << (64 - w)) as i64) >> (64 - w);
                (sx >> c) as u64
            })
        }
        Shuf::Pslldq => {
            if imm > 15 {
                0
            } else {
                a << (imm * 8)
            }
        }
        Shuf::Psrldq => {
            if imm > 15 {
                0
            } else {
                a >> (imm * 8)
            }
        }
    }
}

/// `comisd`/`ucomisd`/`comiss`/`ucomiss` on the host: ZF, PF, CF (OF, SF, AF cleared).
#[inline(never)]
fn comi(c: Comi, a: __m128i, b: __m128i, mxcsr: &mut u32) -> u64 {
    let (mut z, mut p, mut cy): (u8, u8, u8);
    let g: *mut u32 = mxcsr;
    macro_rules! go {
        ($ins:literal) => {
            // SAFETY: register-only compare with the tracee's MXCSR (exceptions masked).
            unsafe {
                under_mxcsr!(
                    g,
                    [concat!($ins, " {a}, {b}"), "setz {z}", "setp {p}", "setc {c}"],
                    a = in(xmm_reg) a,
                    b = in(xmm_reg) b,
                    z = out(reg_byte) z,
                    p = out(reg_byte) p,
                    c = out(reg_byte) cy,
                    options(nostack),
                );
            }
        };
    }
    match c {
        Comi::Comisd => go!("comisd"),
        Comi::Ucomisd => go!("ucomisd"),
        Comi::Comiss => go!("comiss"),
        Comi::Ucomiss => go!("ucomiss"),
    }
    (if z != 0 { ZF } else { 0 }) | (if p != 0 { PF } else { 0 }) | (if cy != 0 { CF } else { 0 })
}

/// Scalar float to integer conversions on the host.
#[inline(never)]
fn cvt_to_int(c: CvtI, size: u8, b: __m128i, mxcsr: &mut u32) -> u64 {
    let mut out: u64 = 0;
    let g: *mut u32 = mxcsr;
    macro_rules! go {
        ($ins:literal) => {
            // SAFETY: register-only conversion with the tracee's MXCSR (exceptions masked).
            unsafe {
                under_mxcsr!(
                    g,
                    [$ins],
                    b = in(xmm_reg) b,
                    o = out(reg) out,
                    options(nostack, preserves_flags),
                );
            }
        };
    }
    match (c, size) {
        (CvtI::Cvttsd2si, 8) => go!("cvttsd2si {o}, {b}"),
        (CvtI::Cvttsd2si, _) => go!("cvttsd2si {o:e}, {b}"),
        (CvtI::Cvtsd2si, 8) => go!("cvtsd2si {o}, {b}"),
        (CvtI::Cvtsd2si, _) => go!("cvtsd2si {o:e}, {b}"),
        (CvtI::Cvttss2si, 8) => go!("cvttss2si {o}, {b}"),
        (CvtI::Cvttss2si, _) => go!("cvttss2si {o:e}, {b}"),
        (CvtI::Cvtss2si, 8) => go!("cvtss2si {o}, {b}"),
        (CvtI::Cvtss2si, _) => go!("cvtss2si {o:e}, {b}"),
    }
    if size == 8 {
        out
    } else {
        out & 0xffff_ffff
    }
}

/// Integer to scalar float conversions on the host.
#[inline(never)]
fn cvt_from_int(c: CvtF, size: u8, a: __m128i, v: u64, mxcsr: &mut u32) -> __m128i {
    let mut a = a;
    let g: *mut u32 = mxcsr;
    macro_rules! go {
        ($ins:literal) => {
            // SAFETY: register-only conversion with the tracee's MXCSR (exceptions masked).
            unsafe {
                under_mxcsr!(
                    g,
                    [$ins],
                    a = inout(xmm_reg) a,
                    v = in(reg) v,
                    options(nostack, preserves_flags),
                );
            }
        };
    }
    match (c, size) {
        (CvtF::Cvtsi2sd, 8) => go!("cvtsi2sd {a}, {v}"),
        (CvtF::Cvtsi2sd, _) => go!("cvtsi2sd {a}, {v:e}"),
        (CvtF::Cvtsi2ss, 8) => go!("cvtsi2ss {a}, {v}"),
        (CvtF::Cvtsi2ss, _) => go!("cvtsi2ss {a}, {v:e}"),
    }
    a
}

impl Executor for Emulate {
    const NAME: &'static str = "emulate";

    fn new(pid: pid_t) -> Emulate {
        Emulate {
            pid,
            mem: PageCache::new(pid),
            xmm: [0; 16],
            mxcsr: 0x1f80,
            // SAFETY: user_fpregs_struct is plain integers; all-zero is a valid value.
            fpregs: Box::new(unsafe { std::mem::zeroed() }),
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
            if self.since_sync > THREADED_SYNC {
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
            let f = &mut *self.fpregs;
            for k in 0..16 {
                let v = self.xmm[k];
                for w in 0..4 {
                    f.xmm_space[4 * k + w] = (v >> (32 * w)) as u32;
                }
            }
            f.mxcsr = self.mxcsr;
            ptrace::set_fpregs(self.pid, f).map_err(Error::trace("PTRACE_SETFPREGS"))?;
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
        let saved = (self.xmm, self.mxcsr, self.fp, self.fp_masked);
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
            (self.xmm, self.mxcsr, self.fp, self.fp_masked) = saved;
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
#[path = "emu_tests.rs"]
mod tests;
