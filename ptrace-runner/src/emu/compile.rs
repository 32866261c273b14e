//! Compilation of a decoded instruction into an [`Op`] the interpreter runs.

use super::*;

/// A memory operand: `seg:[base + (index << scale) + disp]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemRef {
    pub(super) base: u8,
    pub(super) index: u8,
    pub(super) scale: u8,
    /// 0: no segment base, 1: fs, 2: gs.
    pub(super) seg: u8,
    /// Bytes accessed (0 for `lea`).
    pub(super) size: u8,
    pub(super) disp: u64,
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
    /// A whole ymm register (VEX.256): its xmm half and bits 255:128.
    Ymm(u8),
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
    /// `cmpxchg r/m, r`: compares rAX with the destination.
    Cmpxchg,
    Xadd,
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
    /// `stmxcsr`/`vstmxcsr m32`.
    StMxcsr,
    /// `ldmxcsr`/`vldmxcsr m32`.
    LdMxcsr,
    /// `fnstcw m16`: the x87 control word (strtod and fegetround read the rounding mode).
    FnstCw,
    /// `fldcw m16`.
    FldCw,
    // Bit manipulation (BMI1, BMI2, LZCNT, MOVBE, and the older bsf/bsr).
    /// Run on the host with the tracee's flags (their undefined bits come out as this CPU
    /// leaves them).
    HostBits(BitOp),
    /// `sarx`/`shlx`/`shrx`/`rorx`, `pdep`/`pext`: no flags.
    Bmi2(Bmi2),
    /// `movbe`: a load or store with the bytes reversed.
    Movbe,
    /// `shld` (true) or `shrd`, run on the host.
    DoubleShift(bool),
    // AVX (VEX-encoded): a 128-bit result zeroes bits 255:128 of its register. See `avx`.
    VMov,
    VLoadZ,
    VMerge,
    VLoadHalf,
    VBin(XOp, Shape),
    VShuf(Shuf),
    VCmp,
    VRound,
    VFma(Fma),
    VBroadcast,
    VExtract128,
    VInsert128,
    VPerm2x128,
    VPermq,
    VPermd,
    VPermilpd,
    VBlendv,
    VShiftV(VShift),
    VInsertGpr,
    VCvtFromGpr(CvtF),
    VPtest,
    VMovmsk(Msk),
    VZeroUpper,
    VZeroAll,
}

/// Flag-setting bit operations run on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    Bsf,
    Bsr,
    Tzcnt,
    Lzcnt,
    Andn,
    Blsi,
    Blsr,
    Blsmsk,
    Bzhi,
    Bextr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bmi2 {
    Sarx,
    Shlx,
    Shrx,
    Rorx,
    Pdep,
    Pext,
}

/// How a VEX form applies its 128-bit SSE operation to 256 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// To each 128-bit half on its own.
    Lanes,
    /// A shift by the count in the low quadword of the second source, for both halves.
    Count,
    /// A widening conversion: the upper half from the source's bits above this many.
    Widen(u8),
    /// A narrowing conversion from 256 bits: each half gives one quadword.
    Narrow,
}

/// `vfm{add,sub}`/`vfnm{add,sub}` `{132,213,231}` `{pd,ps,sd,ss}`, run as such on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fma(pub Mnemonic);

/// AVX2's per-element variable shifts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VShift {
    Sllvd,
    Sllvq,
    Srlvd,
    Srlvq,
    Sravd,
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
    /// An atomic read-modify-write of memory (`lock` prefix, `xchg` with memory): done as a
    /// plain one while no other thread runs, stepped otherwise.
    pub lock: bool,
    pub ops: [Opnd; 3],
}

impl Op {
    pub const UNSUPPORTED: Op = Op {
        code: Code::Unsupported,
        size: 0,
        cc: 0,
        align: false,
        lock: false,
        ops: [Opnd::None; 3],
    };

    /// Whether the interpreter implements this instruction.
    pub fn supported(&self) -> bool {
        self.code != Code::Unsupported
    }
}

impl Code {
    /// An SSE instruction (run by `Emulate::run_sse`).
    pub(super) fn is_sse(self) -> bool {
        matches!(
            self,
            Code::XCopy
                | Code::XLoad
                | Code::XStore
                | Code::XStoreHigh
                | Code::XLoadLow
                | Code::XLoadHigh
                | Code::XMovLow
                | Code::XMovqZ
                | Code::XFromGpr
                | Code::XToGpr
                | Code::XBin(_)
                | Code::XCmp
                | Code::XRound
                | Code::XShuf(_)
                | Code::XComi(_)
                | Code::XPtest
                | Code::XCvtToGpr(_)
                | Code::XCvtFromGpr(_)
                | Code::XMovmsk(_)
                | Code::XExtract
                | Code::XInsert
                | Code::StMxcsr
                | Code::LdMxcsr
                | Code::FnstCw
                | Code::FldCw
        )
    }

    /// An AVX instruction (run by `Emulate::run_vex`).
    pub(super) fn is_vex(self) -> bool {
        matches!(
            self,
            Code::VMov
                | Code::VLoadZ
                | Code::VMerge
                | Code::VLoadHalf
                | Code::VBin(..)
                | Code::VShuf(_)
                | Code::VCmp
                | Code::VRound
                | Code::VFma(_)
                | Code::VBroadcast
                | Code::VExtract128
                | Code::VInsert128
                | Code::VPerm2x128
                | Code::VPermq
                | Code::VPermd
                | Code::VPermilpd
                | Code::VBlendv
                | Code::VShiftV(_)
                | Code::VInsertGpr
                | Code::VCvtFromGpr(_)
                | Code::VPtest
                | Code::VMovmsk(_)
                | Code::VZeroUpper
                | Code::VZeroAll
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Compilation.

pub(super) fn opnd(i: &Instruction, k: u32) -> Option<Opnd> {
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
            } else if reg.is_ymm() && reg.number() < 16 {
                Opnd::Ymm(reg.number() as u8)
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

pub(super) fn osize(o: &Opnd) -> u8 {
    match *o {
        Opnd::Gpr { size, .. } => size,
        Opnd::Mem(m) => m.size,
        Opnd::Xmm(_) => 16,
        Opnd::Ymm(_) => 32,
        _ => 0,
    }
}

pub(super) fn cc_of(i: &Instruction) -> Option<u8> {
    match i.condition_code() {
        ConditionCode::None => None,
        c => Some(c as u8 - 1),
    }
}

/// Compiles an instruction for the interpreter ([`Op::UNSUPPORTED`] when it must be stepped).
pub fn compile(i: &Instruction) -> Op {
    compile_inner(i).unwrap_or(Op::UNSUPPORTED)
}

pub(super) fn compile_inner(i: &Instruction) -> Option<Op> {
    if i.is_invalid() {
        return None;
    }
    match i.encoding() {
        EncodingKind::Legacy => {}
        // AVX, and the bit-manipulation instructions encoded the same way.
        EncodingKind::VEX => {
            if let Some(op) = super::avx::vex_code(i) {
                return Some(op);
            }
        }
        // AVX-512 (mask registers, 32 vector registers), XOP, 3DNow!: stepped.
        _ => return None,
    }
    if i.op_count() > 3 {
        return None;
    }
    if is_string(i) {
        return compile_string(i).filter(|_| !i.has_lock_prefix());
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
        lock: false,
        ops,
    };
    op.code = if let Some(code) = integer_code(i, &mut op) {
        code
    } else if let Some(code) = control_code(i, &mut op) {
        code
    } else if let Some(code) = bit_code(i, &mut op) {
        code
    } else if let Some(code) = sse_move_code(i, &mut op) {
        code
    } else if let Some(code) = sse_imm_code(i, &mut op) {
        code
    } else {
        sse_code(i, &mut op)?
    };
    // Atomic read-modify-writes of memory: the integer ones, done as plain ones while the
    // program has one thread (`Emulate::execute` steps them otherwise).
    let atomic = matches!(
        op.code,
        Code::Add
            | Code::Adc
            | Code::Sub
            | Code::Sbb
            | Code::And
            | Code::Or
            | Code::Xor
            | Code::Inc
            | Code::Dec
            | Code::Neg
            | Code::Not
            | Code::Bts
            | Code::Btr
            | Code::Btc
            | Code::Xadd
            | Code::Cmpxchg
            | Code::Xchg
    ) && is_mem(&op.ops[0]);
    if i.has_lock_prefix() && !atomic {
        return None;
    }
    op.lock = atomic && (i.has_lock_prefix() || op.code == Code::Xchg);
    Some(op)
}

pub(super) fn is_gpr(o: &Opnd) -> bool {
    matches!(o, Opnd::Gpr { .. })
}

pub(super) fn is_xmm(o: &Opnd) -> bool {
    matches!(o, Opnd::Xmm(_))
}

pub(super) fn is_mem(o: &Opnd) -> bool {
    matches!(o, Opnd::Mem(_))
}

pub(super) fn is_imm(o: &Opnd) -> bool {
    matches!(o, Opnd::Imm(_))
}

/// A general-purpose register or memory.
pub(super) fn rm(o: &Opnd) -> bool {
    is_gpr(o) || is_mem(o)
}

/// An xmm register or memory.
pub(super) fn xm(o: &Opnd) -> bool {
    is_xmm(o) || is_mem(o)
}

/// Whether `i` is a string instruction (`movs`, `stos`, `cmps`, ...): it addresses memory
/// through rSI / rDI implicitly.
pub fn is_string(i: &Instruction) -> bool {
    (0..i.op_count()).any(|k| {
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
    })
}

/// A string instruction: only rep/plain stos and movs, 64-bit addressing, no segment override.
fn compile_string(i: &Instruction) -> Option<Op> {
    use Mnemonic as M;
    let m = i.mnemonic();
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
    Some(Op {
        code,
        size,
        cc: i.has_rep_prefix() as u8,
        align: false,
        lock: false,
        ops: [Opnd::None; 3],
    })
}

/// The interpreter's code for an integer or control instruction (adjusting `op`'s size and
/// condition); `None` for anything else.
fn integer_code(i: &Instruction, op: &mut Op) -> Option<Code> {
    use Mnemonic as M;
    let (m, n) = (i.mnemonic(), i.op_count());
    let [o0, o1, o2] = op.ops;
    Some(match m {
        M::Nop | M::Endbr64 | M::Endbr32 | M::Pause => Code::Nop,
        M::Prefetchnta | M::Prefetcht0 | M::Prefetcht1 | M::Prefetcht2 | M::Prefetchw => Code::Nop,
        M::Mov if n == 2 && rm(&o0) && (rm(&o1) || is_imm(&o1)) => Code::Mov,
        M::Movnti if n == 2 && is_mem(&o0) && is_gpr(&o1) => Code::Mov,
        M::Movzx if n == 2 && is_gpr(&o0) && rm(&o1) => Code::Movzx,
        M::Movsx | M::Movsxd if n == 2 && is_gpr(&o0) && rm(&o1) => Code::Movsx,
        M::Lea if n == 2 && is_gpr(&o0) && is_mem(&o1) => Code::Lea,
        M::Xchg if n == 2 && rm(&o0) && is_gpr(&o1) => Code::Xchg,
        M::Cmpxchg if n == 2 && rm(&o0) && is_gpr(&o1) => Code::Cmpxchg,
        M::Xadd if n == 2 && rm(&o0) && is_gpr(&o1) => Code::Xadd,
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
        _ => return None,
    })
}

/// The interpreter's code for a jump, call, return, stack or flag instruction, or a sign
/// extension of rAX (adjusting `op`'s size and condition); `None` for anything else.
fn control_code(i: &Instruction, op: &mut Op) -> Option<Code> {
    use Mnemonic as M;
    let (m, n) = (i.mnemonic(), i.op_count());
    let [o0, ..] = op.ops;
    Some(match m {
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
        _ => return None,
    })
}

/// The interpreter's code for a bit-manipulation instruction (`bsf`, BMI1, BMI2, LZCNT,
/// MOVBE); `None` for anything else.
fn bit_code(i: &Instruction, op: &mut Op) -> Option<Code> {
    use Mnemonic as M;
    let (m, n) = (i.mnemonic(), i.op_count());
    let [o0, o1, o2] = op.ops;
    Some(match m {
        M::Bsf | M::Bsr | M::Tzcnt | M::Lzcnt | M::Blsi | M::Blsr | M::Blsmsk
            if n == 2 && is_gpr(&o0) && rm(&o1) =>
        {
            // The host instruction's destination comes in with the register's value: `bsf`
            // of zero leaves it as it was.
            op.ops = [o0, o0, o1];
            Code::HostBits(match m {
                M::Bsf => BitOp::Bsf,
                M::Bsr => BitOp::Bsr,
                M::Tzcnt => BitOp::Tzcnt,
                M::Lzcnt => BitOp::Lzcnt,
                M::Blsi => BitOp::Blsi,
                M::Blsr => BitOp::Blsr,
                _ => BitOp::Blsmsk,
            })
        }
        M::Andn if n == 3 && is_gpr(&o0) && is_gpr(&o1) && rm(&o2) => Code::HostBits(BitOp::Andn),
        M::Bzhi | M::Bextr if n == 3 && is_gpr(&o0) && rm(&o1) && is_gpr(&o2) => {
            Code::HostBits(if m == M::Bzhi {
                BitOp::Bzhi
            } else {
                BitOp::Bextr
            })
        }
        M::Sarx | M::Shlx | M::Shrx if n == 3 && is_gpr(&o0) && rm(&o1) && is_gpr(&o2) => {
            Code::Bmi2(match m {
                M::Sarx => Bmi2::Sarx,
                M::Shlx => Bmi2::Shlx,
                _ => Bmi2::Shrx,
            })
        }
        M::Rorx if n == 3 && is_gpr(&o0) && rm(&o1) && is_imm(&o2) => Code::Bmi2(Bmi2::Rorx),
        M::Pdep | M::Pext if n == 3 && is_gpr(&o0) && is_gpr(&o1) && rm(&o2) => {
            Code::Bmi2(if m == M::Pdep { Bmi2::Pdep } else { Bmi2::Pext })
        }
        M::Shld | M::Shrd
            if n == 3
                && rm(&o0)
                && is_gpr(&o1)
                && (is_imm(&o2)
                    || o2
                        == Opnd::Gpr {
                            idx: R_RCX,
                            size: 1,
                            high: false,
                        }) =>
        {
            Code::DoubleShift(m == M::Shld)
        }
        M::Movbe if n == 2 && ((is_gpr(&o0) && is_mem(&o1)) || (is_mem(&o0) && is_gpr(&o1))) => {
            Code::Movbe
        }
        _ => return None,
    })
}

/// The interpreter's code for an SSE move, load or store (adjusting `op`'s size and
/// alignment); `None` for anything else.
fn sse_move_code(i: &Instruction, op: &mut Op) -> Option<Code> {
    use Mnemonic as M;
    let (m, n) = (i.mnemonic(), i.op_count());
    let [o0, o1, _] = op.ops;
    Some(match m {
        // libm saves and sets the rounding mode around its functions (sin, cos, atan2).
        M::Stmxcsr | M::Vstmxcsr if n == 1 && is_mem(&o0) => {
            op.size = 4;
            Code::StMxcsr
        }
        M::Ldmxcsr | M::Vldmxcsr if n == 1 && is_mem(&o0) => {
            op.size = 4;
            Code::LdMxcsr
        }
        M::Fnstcw | M::Fldcw if n == 1 && is_mem(&o0) => {
            op.size = 2;
            if m == M::Fnstcw {
                Code::FnstCw
            } else {
                Code::FldCw
            }
        }
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
        _ => return None,
    })
}

/// The interpreter's code for an SSE compare, rounding, shuffle or shift under an immediate
/// (adjusting `op`'s size, alignment and immediate); `None` for anything else.
fn sse_imm_code(i: &Instruction, op: &mut Op) -> Option<Code> {
    use Mnemonic as M;
    let (m, n) = (i.mnemonic(), i.op_count());
    let [o0, o1, o2] = op.ops;
    Some(match m {
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
        _ => return None,
    })
}

/// The interpreter's code for an SSE instruction (adjusting `op`'s size, alignment and
/// immediate); `None` when it is not one the interpreter implements.
fn sse_code(i: &Instruction, op: &mut Op) -> Option<Code> {
    use Mnemonic as M;
    let (m, n) = (i.mnemonic(), i.op_count());
    let [o0, o1, o2] = op.ops;
    Some(match m {
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
    })
}
