//! Instruction classification: which instructions are scalar evolutions (left out of the
//! statements) and which move data, which may be links of a reduction and with which
//! operator, which are floating-point arithmetic, and which register writes are of 32-bit
//! registers (folded sign-extended).

use super::naming::GPR_NAMES;
use super::{insn_at, Code, Folded2, InsnStream2};
use crate::input::{ReduceOp, Update};
use folder::{Folded, Label};
use iced_x86::Mnemonic;
use rustc_hash::{FxHashMap, FxHashSet};
use tracer::{DepKind, NodeId, Through};

/// A scalar evolution: the produced values fold into one affine function of the iteration
/// vector, and whatever memory is read sits at one fixed address (a scalar kept in memory, as
/// loop counters are at -O0). Loads from addresses that move with the loops read arrays: their
/// values are data, even when they happen to be affine on this input.
pub(super) fn is_scev(
    meta: &InsnStream2,
    f: &Folded,
    nval: usize,
    insn: &iced_x86::Instruction,
) -> bool {
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
    // A piece of one point (the folder splits them off where a run of the loops around
    // ends: Rodinia nn's `rec_iter` pointer, reset before each window) agrees when the first
    // piece's functions give its values there.
    let agrees = |p: &folder::Piece| {
        let vals = values(p);
        vals == first
            || single_point(p).is_some_and(|x| {
                vals.iter()
                    .zip(&first)
                    .all(|(v, w)| v.eval(&x).is_some() && v.eval(&x) == w.eval(&x))
            })
    };
    if !first.iter().all(Label::is_affine) || !f.pieces.iter().all(agrees) {
        return false;
    }
    (0..meta.naddr).all(|j| meta.writes.get(j).copied().unwrap_or(false) || fixed_address(f, j))
}

/// The only point of a piece whose every dimension is fixed to a constant.
fn single_point(p: &folder::Piece) -> Option<Vec<i64>> {
    p.domain
        .bounds
        .iter()
        .map(|b| {
            (b.lower.is_constant() && b.upper.is_constant() && b.lower.constant == b.upper.constant)
                .then_some(b.lower.constant)
        })
        .collect()
}

/// Counters the compiler keeps in memory and steps by a register that holds one value all
/// along (heartwall at -O2: `add %r10d, 0x10(%rsp)`, the row length reloaded from a spill
/// slot): the memory's values are an affine function of the loop counters, a scalar
/// evolution, though the step is not an immediate. The register's producers in the region
/// must all have produced one constant value (none: it came from before the region).
pub(super) fn stepped_by_invariants(folded: &Folded2, code: &Code) -> FxHashSet<(NodeId, u64)> {
    let mut feeders: FxHashMap<(NodeId, u64), Vec<(NodeId, u64)>> = FxHashMap::default();
    for ((sink, source, kind, through, _), ..) in &folded.deps {
        if *kind == DepKind::Flow && *through == Through::Register {
            feeders
                .entry((sink.context, sink.pc))
                .or_default()
                .push((source.context, source.pc));
        }
    }
    let constant = |key: &(NodeId, u64)| {
        let Some((meta, f)) = folded.insns.get(key) else {
            return false;
        };
        let values = |p: &folder::Piece| p.labels[meta.naddr..].to_vec();
        let Some(first) = f.pieces.first().map(values) else {
            return false;
        };
        f.rejected == 0
            && first.len() == f.labels - meta.naddr
            && !first.is_empty()
            && first.iter().all(
                |l| matches!(l, Label::Affine { coeffs, .. } if coeffs.iter().all(|&c| c == 0)),
            )
            && f.pieces.iter().all(|p| values(p) == first)
    };
    folded
        .insns
        .iter()
        .filter(|(key, (meta, f))| {
            let Some(insn) = insn_at(code, key.1) else {
                return false;
            };
            f.points > 0
                && f.rejected == 0
                && f.labels == meta.naddr
                && matches!(insn.mnemonic(), Mnemonic::Add | Mnemonic::Sub)
                && insn.op0_kind() == iced_x86::OpKind::Memory
                && insn.op1_kind() == iced_x86::OpKind::Register
                && meta.naddr > 0
                && (0..meta.naddr).all(|j| fixed_address(f, j))
                && feeders
                    .get(*key)
                    .is_none_or(|sources| sources.iter().all(&constant))
        })
        .map(|(key, _)| *key)
        .collect()
}

/// Label `j` is the same constant on every point (an access to one fixed address).
fn fixed_address(f: &Folded, j: usize) -> bool {
    let l0 = f.pieces.first().and_then(|p| p.labels.get(j));
    matches!(l0, Some(Label::Affine { coeffs, .. }) if coeffs.iter().all(|&c| c == 0))
        && f.pieces.iter().all(|p| p.labels.get(j) == l0)
}

/// The instruction moves data: it writes memory or a register other than the flags, the
/// instruction pointer and the stack pointer.
pub(super) fn writes_data(
    insn: &iced_x86::Instruction,
    info: &mut iced_x86::InstructionInfoFactory,
) -> bool {
    use iced_x86::{OpAccess, Register};
    info.info(insn).used_registers().iter().any(|r| {
        matches!(
            r.access(),
            OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
        ) && !matches!(r.register().full_register(), Register::RSP | Register::RIP)
    })
}

/// The full name of a register as dependences name it (`rax` for `eax`, `xmm0` for `ymm0`).
pub(super) fn full_name(r: iced_x86::Register) -> Option<String> {
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
pub(super) fn update_of(insn: &iced_x86::Instruction) -> Option<Update> {
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

pub(super) fn fp_op(m: Mnemonic) -> bool {
    let name = format!("{m:?}");
    let arith = [
        "Add", "Sub", "Mul", "Div", "Sqrt", "Max", "Min", "Fma", "Vfmadd", "Vfmsub",
    ];
    (name.ends_with("sd") || name.ends_with("ss") || name.ends_with("pd") || name.ends_with("ps"))
        && arith
            .iter()
            .any(|a| name.starts_with(a) || name.starts_with(&format!("V{}", a.to_lowercase())))
}

/// Which of `insn`'s register writes (bit k for the k-th, of the first 64) write a 32-bit
/// register: the destination operand's (`ecx`, which the engine reports as the whole `rcx`;
/// iced lists that write as `rcx`'s).
pub(super) fn narrow_writes(code: &Code, insn: &ptrace_runner::Insn) -> u64 {
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

#[cfg(test)]
mod tests {
    use super::{is_scev, InsnStream2};
    use folder::{FoldOptions, StreamFolder};

    /// Rodinia nn's `add r13, 49`: a pointer reset before each window of records and stepped
    /// by each record, over windows of 10 records but for a few of one, which the folder
    /// splits off as one-point pieces. One affine function gives every value: an evolution.
    #[test]
    fn one_point_pieces_that_agree_keep_an_evolution() {
        let fold = |value: &dyn Fn(i64, i64) -> i64| {
            let mut f = StreamFolder::new(2, 1, &FoldOptions::default());
            for w in 0..40 {
                let records = if w % 10 == 9 { 1 } else { 10 };
                for i in 0..records {
                    f.push(&[w, i], &[value(w, i)]);
                }
            }
            f.finish()
        };
        let meta = InsnStream2 {
            first: 0,
            naddr: 0,
            sizes: Vec::new(),
            writes: Vec::new(),
        };
        let add = iced_x86::Decoder::new(64, &[0x49, 0x83, 0xc5, 0x31], 0).decode();
        let stepped = fold(&|_, i| 1000 + 49 * (i + 1));
        assert!(stepped.pieces.len() > 1, "{:?}", stepped.pieces);
        assert!(is_scev(&meta, &stepped, 1, &add));
        // A one-point piece whose value the function does not give: no evolution.
        let broken = fold(&|w, i| if w == 19 { 7 } else { 1000 + 49 * (i + 1) });
        assert!(!is_scev(&meta, &broken, 1, &add));
    }
}
