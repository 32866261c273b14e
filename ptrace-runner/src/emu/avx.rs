//! AVX and AVX2 (VEX-encoded) instructions: what gcc and clang emit with `-mavx2` or
//! `-march=native`, and what glibc's string functions run on CPUs that have it.
//!
//! A VEX instruction names up to three vector operands, and a 128-bit (xmm) result zeroes
//! bits 255:128 of its register, where a legacy SSE instruction leaves them alone. Most 256-bit
//! operations are their 128-bit SSE operation applied to each half ("in-lane"): those run the
//! very SSE instruction on the host twice, as `sse` does (so results and MXCSR flags are
//! bit-identical). Cross-lane moves (broadcasts, permutes, 128-bit inserts and extracts) are
//! done here; FMA and the compare predicates legacy SSE lacks run their VEX instruction on the
//! host.

use super::*;

/// A vector register or operand as (bits 127:0, bits 255:128).
type V = (u128, u128);

fn is_vreg(o: &Opnd) -> bool {
    matches!(o, Opnd::Xmm(_) | Opnd::Ymm(_))
}

fn is_ymm(o: &Opnd) -> bool {
    matches!(o, Opnd::Ymm(_))
}

/// A vector register or memory.
fn vm(o: &Opnd) -> bool {
    is_vreg(o) || is_mem(o)
}

fn imm8(o: &Opnd) -> Option<u8> {
    match *o {
        Opnd::Imm(v) => Some(v as u8),
        _ => None,
    }
}

/// The register number of a vector operand.
fn vnum(o: &Opnd) -> Option<u8> {
    match *o {
        Opnd::Xmm(n) | Opnd::Ymm(n) => Some(n),
        _ => None,
    }
}

macro_rules! fma_table {
    ($($name:ident $text:literal),* $(,)?) => {
        fn is_fma(m: Mnemonic) -> bool {
            matches!(m, $(Mnemonic::$name)|*)
        }

        /// Runs the FMA instruction `f` on the host: `a` is its destination (and a source).
        #[inline(never)]
        pub(super) fn run_fma(f: Fma, a: __m128i, b: __m128i, c: __m128i, mx: *mut u32) -> __m128i {
            let mut a = a;
            match f.0 {
                $(Mnemonic::$name => {
                    // SAFETY: a register-only FMA instruction the host CPU has (the tracee,
                    // on this CPU, was about to run it), with the tracee's MXCSR (every
                    // exception masked: the caller checked).
                    unsafe {
                        under_mxcsr!(
                            mx,
                            [concat!($text, " {a}, {b}, {c}")],
                            a = inout(xmm_reg) a,
                            b = in(xmm_reg) b,
                            c = in(xmm_reg) c,
                            options(nostack, preserves_flags),
                        );
                    }
                })*
                _ => {}
            }
            a
        }
    };
}

fma_table! {
    Vfmadd132pd "vfmadd132pd", Vfmadd132ps "vfmadd132ps", Vfmadd132sd "vfmadd132sd",
    Vfmadd132ss "vfmadd132ss", Vfmadd213pd "vfmadd213pd", Vfmadd213ps "vfmadd213ps",
    Vfmadd213sd "vfmadd213sd", Vfmadd213ss "vfmadd213ss", Vfmadd231pd "vfmadd231pd",
    Vfmadd231ps "vfmadd231ps", Vfmadd231sd "vfmadd231sd", Vfmadd231ss "vfmadd231ss",
    Vfmsub132pd "vfmsub132pd", Vfmsub132ps "vfmsub132ps", Vfmsub132sd "vfmsub132sd",
    Vfmsub132ss "vfmsub132ss", Vfmsub213pd "vfmsub213pd", Vfmsub213ps "vfmsub213ps",
    Vfmsub213sd "vfmsub213sd", Vfmsub213ss "vfmsub213ss", Vfmsub231pd "vfmsub231pd",
    Vfmsub231ps "vfmsub231ps", Vfmsub231sd "vfmsub231sd", Vfmsub231ss "vfmsub231ss",
    Vfnmadd132pd "vfnmadd132pd", Vfnmadd132ps "vfnmadd132ps", Vfnmadd132sd "vfnmadd132sd",
    Vfnmadd132ss "vfnmadd132ss", Vfnmadd213pd "vfnmadd213pd", Vfnmadd213ps "vfnmadd213ps",
    Vfnmadd213sd "vfnmadd213sd", Vfnmadd213ss "vfnmadd213ss", Vfnmadd231pd "vfnmadd231pd",
    Vfnmadd231ps "vfnmadd231ps", Vfnmadd231sd "vfnmadd231sd", Vfnmadd231ss "vfnmadd231ss",
    Vfnmsub132pd "vfnmsub132pd", Vfnmsub132ps "vfnmsub132ps", Vfnmsub132sd "vfnmsub132sd",
    Vfnmsub132ss "vfnmsub132ss", Vfnmsub213pd "vfnmsub213pd", Vfnmsub213ps "vfnmsub213ps",
    Vfnmsub213sd "vfnmsub213sd", Vfnmsub213ss "vfnmsub213ss", Vfnmsub231pd "vfnmsub231pd",
    Vfnmsub231ps "vfnmsub231ps", Vfnmsub231sd "vfnmsub231sd", Vfnmsub231ss "vfnmsub231ss",
}

/// `vcmp{ss,sd,ps,pd}` (`m` = 0..=3) with predicate `pred` (0..=31) on 128 bits: the first
/// eight as legacy SSE has them, the rest with the VEX instruction on the host.
#[inline(never)]
fn run_vcmp(m: u8, pred: u8, a: __m128i, b: __m128i, mx: *mut u32) -> __m128i {
    if pred < 8 {
        return run_cmp(m, pred, a, b, mx);
    }
    macro_rules! preds {
        ($ins:literal; $($n:literal)*) => {
            match pred {
                $($n => {
                    let mut d = a;
                    // SAFETY: as in `fp_bin` (a register-only compare, exceptions masked).
                    unsafe {
                        under_mxcsr!(
                            mx,
                            [concat!($ins, " {d}, {a}, {b}, ", $n)],
                            d = out(xmm_reg) d,
                            a = in(xmm_reg) a,
                            b = in(xmm_reg) b,
                            options(nostack, preserves_flags),
                        );
                    }
                    d
                })*
                _ => a,
            }
        };
    }
    match m {
        0 => {
            preds!("vcmpss"; 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
        }
        1 => {
            preds!("vcmpsd"; 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
        }
        2 => {
            preds!("vcmpps"; 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
        }
        _ => {
            preds!("vcmppd"; 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31)
        }
    }
}

/// The element sizes in bits of a widening conversion's source (`vpmovsxbd ymm, xmm` turns 4
/// bytes into each 128-bit half: its upper half starts at bit 32), or `None`.
fn widening(x: XOp) -> Option<u8> {
    Some(match x {
        XOp::Cvtdq2pd | XOp::Cvtps2pd => 64,
        XOp::Pmovsxbw | XOp::Pmovzxbw | XOp::Pmovsxwd | XOp::Pmovzxwd => 64,
        XOp::Pmovsxdq | XOp::Pmovzxdq => 64,
        XOp::Pmovsxbd | XOp::Pmovzxbd | XOp::Pmovsxwq | XOp::Pmovzxwq => 32,
        XOp::Pmovsxbq | XOp::Pmovzxbq => 16,
        _ => return None,
    })
}

/// Shifts of every element by the count in an xmm register or memory.
fn count_shift(x: XOp) -> bool {
    matches!(
        x,
        XOp::Psllw
            | XOp::Pslld
            | XOp::Psllq
            | XOp::Psrlw
            | XOp::Psrld
            | XOp::Psrlq
            | XOp::Psraw
            | XOp::Psrad
    )
}

/// An [`Op`] with `ops`, the immediate or mask register in `cc`.
fn vop(code: Code, size: u8, cc: u8, align: bool, ops: [Opnd; 3]) -> Option<Op> {
    Some(Op {
        code,
        size,
        cc,
        align,
        lock: false,
        ops,
    })
}

/// Compiles a VEX-encoded instruction; `None` when the interpreter does not implement it (a
/// bit-manipulation instruction: `integer_code` compiles those).
pub(super) fn vex_code(i: &Instruction) -> Option<Op> {
    use Mnemonic as M;
    let (m, n) = (i.mnemonic(), i.op_count() as usize);
    match m {
        M::Vzeroupper => return vop(Code::VZeroUpper, 0, 0, false, [Opnd::None; 3]),
        M::Vzeroall => return vop(Code::VZeroAll, 0, 0, false, [Opnd::None; 3]),
        _ if n > 4 => return None,
        _ => {}
    }
    let mut all = [Opnd::None; 4];
    for (k, o) in all.iter_mut().enumerate().take(n) {
        *o = opnd(i, k as u32)?;
    }
    if !all.iter().any(is_vreg) {
        // BMI1, BMI2: `integer_code` compiles those.
        return None;
    }
    data_code(m, n, all)
        .or_else(|| immediate_code(m, n, all))
        .or_else(|| compute_code(m, n, all))
}

/// The operands of a VEX instruction, and the ops it compiles to.
macro_rules! vex_operands {
    ($all:expr, $o0:ident, $o1:ident, $o2:ident, $o3:ident, $width:ident, $three:ident, $unary:ident) => {
        let [$o0, $o1, $o2, $o3] = $all;
        let $width = osize(&$o0).max(osize(&$o1));
        // Three-operand forms with an immediate or a fourth register: that goes in `cc`.
        let $three = |code: Code, size: u8, cc: u8| vop(code, size, cc, false, [$o0, $o1, $o2]);
        // Two-operand forms read their one source twice (as `a` and `b`).
        let $unary = |code: Code, size: u8, cc: u8| vop(code, size, cc, false, [$o0, $o1, $o1]);
    };
}

/// Moves, broadcasts, inserts, extracts, permutes and blends.
fn data_code(m: Mnemonic, n: usize, all: [Opnd; 4]) -> Option<Op> {
    use Mnemonic as M;
    vex_operands!(all, o0, o1, o2, o3, width, three, unary);
    match m {
        M::Vmovaps
        | M::Vmovapd
        | M::Vmovdqa
        | M::Vmovups
        | M::Vmovupd
        | M::Vmovdqu
        | M::Vlddqu
        | M::Vmovntdqa
        | M::Vmovntdq
        | M::Vmovntps
        | M::Vmovntpd
            if n == 2 && ((is_vreg(&o0) && vm(&o1)) || (is_mem(&o0) && is_vreg(&o1))) =>
        {
            let align = !matches!(m, M::Vmovups | M::Vmovupd | M::Vmovdqu | M::Vlddqu);
            vop(Code::VMov, width, 0, align, [o0, o1, Opnd::None])
        }
        M::Vmovss | M::Vmovsd => {
            let size = if m == M::Vmovss { 4 } else { 8 };
            if n == 2 && is_xmm(&o0) && is_mem(&o1) {
                three(Code::VLoadZ, size, 0)
            } else if n == 2 && is_mem(&o0) && is_xmm(&o1) {
                three(Code::XStore, size, 0)
            } else if n == 3 && is_xmm(&o0) && is_xmm(&o1) && is_xmm(&o2) {
                three(Code::VMerge, size, 0)
            } else {
                None
            }
        }
        M::Vmovd | M::Vmovq if n == 2 => {
            if is_xmm(&o0) && (rm(&o1) || is_xmm(&o1)) {
                let size = if is_xmm(&o1) { 8 } else { osize(&o1) };
                three(Code::VLoadZ, size, 0)
            } else if is_gpr(&o0) && is_xmm(&o1) {
                three(Code::XToGpr, osize(&o0), 0)
            } else if is_mem(&o0) && is_xmm(&o1) {
                three(Code::XStore, osize(&o0), 0)
            } else {
                None
            }
        }
        M::Vmovhpd | M::Vmovhps | M::Vmovlpd | M::Vmovlps => {
            let high = matches!(m, M::Vmovhpd | M::Vmovhps);
            if n == 3 && is_xmm(&o0) && is_xmm(&o1) && is_mem(&o2) {
                three(Code::VLoadHalf, 8, high as u8)
            } else if n == 2 && is_mem(&o0) && is_xmm(&o1) {
                let code = if high { Code::XStoreHigh } else { Code::XStore };
                three(code, 8, 0)
            } else {
                None
            }
        }
        M::Vbroadcastss
        | M::Vbroadcastsd
        | M::Vpbroadcastb
        | M::Vpbroadcastw
        | M::Vpbroadcastd
        | M::Vpbroadcastq
        | M::Vbroadcastf128
        | M::Vbroadcasti128
            if n == 2 && is_vreg(&o0) && (is_xmm(&o1) || is_mem(&o1)) =>
        {
            let size = match m {
                M::Vpbroadcastb => 1,
                M::Vpbroadcastw => 2,
                M::Vbroadcastss | M::Vpbroadcastd => 4,
                M::Vbroadcastsd | M::Vpbroadcastq => 8,
                _ => 16,
            };
            three(Code::VBroadcast, size, 0)
        }
        M::Vextractf128 | M::Vextracti128 if n == 3 && is_ymm(&o1) => {
            three(Code::VExtract128, 16, imm8(&o2)?)
        }
        M::Vinsertf128 | M::Vinserti128 if n == 4 && is_ymm(&o0) => {
            three(Code::VInsert128, 32, imm8(&o3)?)
        }
        M::Vperm2f128 | M::Vperm2i128 if n == 4 => three(Code::VPerm2x128, 32, imm8(&o3)?),
        M::Vpermq | M::Vpermpd if n == 3 && is_ymm(&o0) => unary(Code::VPermq, 32, imm8(&o2)?),
        M::Vpermd | M::Vpermps if n == 3 && is_ymm(&o0) && is_ymm(&o1) => {
            three(Code::VPermd, 32, 0)
        }
        M::Vpermilpd if n == 3 => unary(Code::VPermilpd, width, imm8(&o2)?),
        M::Vpermilps if n == 3 => unary(Code::VShuf(Shuf::Pshufd), width, imm8(&o2)?),
        M::Vblendvpd | M::Vblendvps | M::Vpblendvb if n == 4 => {
            let size = match m {
                M::Vblendvpd => 8,
                M::Vblendvps => 4,
                _ => 1,
            };
            three(Code::VBlendv, size, vnum(&o3)?)
        }
        _ => None,
    }
}

/// Compares, rounding, shuffles and shifts under an immediate.
fn immediate_code(m: Mnemonic, n: usize, all: [Opnd; 4]) -> Option<Op> {
    use Mnemonic as M;
    vex_operands!(all, o0, o1, o2, o3, width, three, unary);
    match m {
        M::Vcmpss | M::Vcmpsd | M::Vcmpps | M::Vcmppd if n == 4 => {
            let p = imm8(&o3)?;
            let kind = match m {
                M::Vcmpss => 0,
                M::Vcmpsd => 1,
                M::Vcmpps => 2,
                _ => 3,
            };
            (p < 32).then_some(())?;
            vop(Code::VCmp, kind, p, false, [o0, o1, o2])
        }
        M::Vroundss | M::Vroundsd | M::Vroundps | M::Vroundpd => {
            let kind = match m {
                M::Vroundss => 0,
                M::Vroundsd => 1,
                M::Vroundps => 2,
                _ => 3,
            };
            match n {
                4 => vop(Code::VRound, kind, imm8(&o3)? & 15, false, [o0, o1, o2]),
                3 => vop(Code::VRound, kind, imm8(&o2)? & 15, false, [o0, o1, o1]),
                _ => None,
            }
        }
        M::Vshufps
        | M::Vshufpd
        | M::Vpalignr
        | M::Vpblendw
        | M::Vblendps
        | M::Vblendpd
        | M::Vpblendd
            if n == 4 =>
        {
            let s = match m {
                M::Vshufps => Shuf::Shufps,
                M::Vshufpd => Shuf::Shufpd,
                M::Vpalignr => Shuf::Palignr,
                M::Vpblendw => Shuf::Pblendw,
                M::Vblendpd => Shuf::Blendpd,
                // vpblendd picks dwords as blendps does.
                _ => Shuf::Blendps,
            };
            three(Code::VShuf(s), width, imm8(&o3)?)
        }
        M::Vpshufd | M::Vpshuflw | M::Vpshufhw if n == 3 => {
            let s = match m {
                M::Vpshufd => Shuf::Pshufd,
                M::Vpshuflw => Shuf::Pshuflw,
                _ => Shuf::Pshufhw,
            };
            unary(Code::VShuf(s), width, imm8(&o2)?)
        }
        M::Vpsllw
        | M::Vpslld
        | M::Vpsllq
        | M::Vpsrlw
        | M::Vpsrld
        | M::Vpsrlq
        | M::Vpsraw
        | M::Vpsrad
        | M::Vpslldq
        | M::Vpsrldq
            if n == 3 && is_imm(&o2) =>
        {
            let s = match m {
                M::Vpsllw => Shuf::Psllw,
                M::Vpslld => Shuf::Pslld,
                M::Vpsllq => Shuf::Psllq,
                M::Vpsrlw => Shuf::Psrlw,
                M::Vpsrld => Shuf::Psrld,
                M::Vpsrlq => Shuf::Psrlq,
                M::Vpsraw => Shuf::Psraw,
                M::Vpsrad => Shuf::Psrad,
                M::Vpslldq => Shuf::Pslldq,
                _ => Shuf::Psrldq,
            };
            unary(Code::VShuf(s), width, imm8(&o2)?)
        }
        _ => None,
    }
}

/// Arithmetic, conversions, tests, FMA, and shifts by a register.
fn compute_code(m: Mnemonic, n: usize, all: [Opnd; 4]) -> Option<Op> {
    use Mnemonic as M;
    vex_operands!(all, o0, o1, o2, o3, width, three, unary);
    match m {
        M::Vpsllvd | M::Vpsllvq | M::Vpsrlvd | M::Vpsrlvq | M::Vpsravd if n == 3 => three(
            Code::VShiftV(match m {
                M::Vpsllvd => VShift::Sllvd,
                M::Vpsllvq => VShift::Sllvq,
                M::Vpsrlvd => VShift::Srlvd,
                M::Vpsrlvq => VShift::Srlvq,
                _ => VShift::Sravd,
            }),
            width,
            0,
        ),
        M::Vpinsrb | M::Vpinsrw | M::Vpinsrd | M::Vpinsrq if n == 4 && rm(&o2) => {
            let size = match m {
                M::Vpinsrb => 1,
                M::Vpinsrw => 2,
                M::Vpinsrd => 4,
                _ => 8,
            };
            three(Code::VInsertGpr, size, imm8(&o3)?)
        }
        M::Vcvtsi2sd | M::Vcvtsi2ss if n == 3 && rm(&o2) && osize(&o2) >= 4 => {
            let c = if m == M::Vcvtsi2sd {
                CvtF::Cvtsi2sd
            } else {
                CvtF::Cvtsi2ss
            };
            three(Code::VCvtFromGpr(c), osize(&o2), 0)
        }
        M::Vptest if n == 2 => three(
            if is_ymm(&o0) {
                Code::VPtest
            } else {
                Code::XPtest
            },
            width,
            0,
        ),
        M::Vpmovmskb | M::Vmovmskpd | M::Vmovmskps if n == 2 && is_gpr(&o0) => {
            let k = match m {
                M::Vmovmskpd => Msk::Movmskpd,
                M::Vmovmskps => Msk::Movmskps,
                _ => Msk::Pmovmskb,
            };
            let code = if is_ymm(&o1) {
                Code::VMovmsk(k)
            } else {
                Code::XMovmsk(k)
            };
            three(code, osize(&o0), 0)
        }
        M::Vcomisd | M::Vucomisd | M::Vcomiss | M::Vucomiss if n == 2 => three(
            Code::XComi(match m {
                M::Vcomisd => Comi::Comisd,
                M::Vucomisd => Comi::Ucomisd,
                M::Vcomiss => Comi::Comiss,
                _ => Comi::Ucomiss,
            }),
            16,
            0,
        ),
        M::Vcvttsd2si | M::Vcvtsd2si | M::Vcvttss2si | M::Vcvtss2si
            if n == 2 && is_gpr(&o0) && osize(&o0) >= 4 =>
        {
            three(
                Code::XCvtToGpr(match m {
                    M::Vcvttsd2si => CvtI::Cvttsd2si,
                    M::Vcvtsd2si => CvtI::Cvtsd2si,
                    M::Vcvttss2si => CvtI::Cvttss2si,
                    _ => CvtI::Cvtss2si,
                }),
                osize(&o0),
                0,
            )
        }
        M::Vpextrb | M::Vpextrw | M::Vpextrd | M::Vpextrq | M::Vextractps
            if n == 3 && rm(&o0) && is_xmm(&o1) =>
        {
            let size = match m {
                M::Vpextrb => 1,
                M::Vpextrw => 2,
                M::Vpextrd | M::Vextractps => 4,
                _ => 8,
            };
            three(Code::XExtract, size, imm8(&o2)?)
        }
        _ if is_fma(m) && n == 3 => three(Code::VFma(Fma(m)), width, 0),
        _ => {
            let x = XOp::from_vex(m)?;
            let narrow =
                matches!(x, XOp::Cvtpd2ps | XOp::Cvttpd2dq | XOp::Cvtpd2dq) && osize(&o1) == 32;
            let shape = match widening(x) {
                Some(bits) if is_ymm(&o0) => Shape::Widen(bits),
                _ if narrow => Shape::Narrow,
                _ if count_shift(x) => Shape::Count,
                _ => Shape::Lanes,
            };
            match n {
                3 if is_vreg(&o0) && is_vreg(&o1) && vm(&o2) => {
                    three(Code::VBin(x, shape), width, 0)
                }
                2 if is_vreg(&o0) && vm(&o1) => unary(Code::VBin(x, shape), width, 0),
                _ => None,
            }
        }
    }
}

/// `v` with its elements of `size` bytes repeated from the lowest through 128 bits.
fn splat(v: u128, size: u8) -> u128 {
    let bits = size as u32 * 8;
    if bits >= 128 {
        return v;
    }
    let e = v & ((1u128 << bits) - 1);
    let mut out = 0;
    let mut at = 0;
    while at < 128 {
        out |= e << at;
        at += bits;
    }
    out
}

/// Element `k` of `size` bytes of a 256-bit value.
fn elem(v: V, size: u32, k: u32) -> u64 {
    let bit = k * size * 8;
    let half = if bit >= 128 { v.1 } else { v.0 };
    let m = if size == 8 {
        u64::MAX
    } else {
        (1u64 << (size * 8)) - 1
    };
    (half >> (bit % 128)) as u64 & m
}

/// Sets element `k` of `size` bytes of a 256-bit value.
fn set_elem(v: &mut V, size: u32, k: u32, e: u64) {
    let bit = k * size * 8;
    let half = if bit >= 128 { &mut v.1 } else { &mut v.0 };
    let m: u128 = if size == 8 {
        u64::MAX as u128
    } else {
        (1u128 << (size * 8)) - 1
    };
    let sh = bit % 128;
    *half = (*half & !(m << sh)) | ((e as u128 & m) << sh);
}

fn shift_v(s: VShift, a: u64, count: u64) -> u64 {
    match s {
        VShift::Sllvd if count < 32 => (a << count) & u32::MAX as u64,
        VShift::Sllvq if count < 64 => a << count,
        VShift::Srlvd if count < 32 => a >> count,
        VShift::Srlvq if count < 64 => a >> count,
        VShift::Sravd => ((a as u32 as i32) >> count.min(31)) as u32 as u64,
        _ => 0,
    }
}

impl Emulate {
    /// A vector register's value; an xmm register's upper half reads as 0.
    #[inline(always)]
    fn vreg(&self, o: &Opnd) -> R<V> {
        match *o {
            Opnd::Xmm(n) => Ok((self.xmm[n as usize & 15], 0)),
            Opnd::Ymm(n) => Ok((self.xmm[n as usize & 15], self.ymm_hi[n as usize & 15])),
            _ => Err(Fault),
        }
    }

    /// A vector register or memory operand (of up to 32 bytes, zero-extended).
    fn vsrc(&mut self, r: &Regs, o: &Opnd, align: bool) -> R<V> {
        match *o {
            Opnd::Mem(m) if m.size == 32 => {
                let a = Self::ea(r, &m);
                if align && a & 31 != 0 {
                    return Err(Fault);
                }
                let b = self.mem.read::<32>(a)?;
                let (lo, hi) = b.split_at(16);
                let half = |h: &[u8]| u128::from_le_bytes(h.try_into().unwrap_or_default());
                Ok((half(lo), half(hi)))
            }
            Opnd::Mem(_) => Ok((self.xsrc(r, o, align)?, 0)),
            _ => self.vreg(o),
        }
    }

    /// The two sources of an operation; a one-source form names its operand twice (read
    /// once).
    fn two_sources(&mut self, r: &Regs, o1: &Opnd, o2: &Opnd) -> R<(V, V)> {
        let a = self.vsrc(r, o1, false)?;
        let b = if o2 == o1 {
            a
        } else {
            self.vsrc(r, o2, false)?
        };
        Ok((a, b))
    }

    /// Writes a VEX result: an xmm destination's bits 255:128 become 0.
    #[inline(always)]
    fn set_vec(&mut self, o: &Opnd, v: V) -> R<()> {
        let (n, hi) = match *o {
            Opnd::Xmm(n) => (n, 0),
            Opnd::Ymm(n) => (n, v.1),
            _ => return Err(Fault),
        };
        self.xmm[n as usize & 15] = v.0;
        self.ymm_hi[n as usize & 15] = hi;
        self.fp = FpState::Dirty;
        Ok(())
    }

    /// Interprets an AVX instruction (see [`Code::is_vex`]).
    #[inline(never)]
    pub(super) fn run_vex(&mut self, op: &Op, r: &mut Regs) -> R<()> {
        self.need_fp()?;
        // Without the XSAVE regset (checked as the state loads) the upper halves are unknown.
        if self.fpimage.avx == 0 {
            return Err(Fault);
        }
        match op.code {
            Code::VMov
            | Code::VLoadZ
            | Code::VMerge
            | Code::VLoadHalf
            | Code::VBroadcast
            | Code::VExtract128
            | Code::VInsert128 => self.vex_move(op, r),
            Code::VBin(..) | Code::VShuf(_) | Code::VCmp | Code::VRound | Code::VFma(_) => {
                self.vex_arith(op, r)
            }
            Code::VCvtFromGpr(_) => self.vex_arith(op, r),
            Code::VZeroUpper => {
                self.ymm_hi = [0; 16];
                self.fp = FpState::Dirty;
                Ok(())
            }
            Code::VZeroAll => {
                self.ymm_hi = [0; 16];
                self.xmm = [0; 16];
                self.fp = FpState::Dirty;
                Ok(())
            }
            _ => self.vex_permute(op, r),
        }
    }

    /// Moves, loads, stores, broadcasts, 128-bit inserts and extracts.
    fn vex_move(&mut self, op: &Op, r: &mut Regs) -> R<()> {
        let [o0, o1, o2] = &op.ops;
        match op.code {
            Code::VMov => {
                if let Opnd::Mem(m) = o0 {
                    let v = self.vreg(o1)?;
                    let a = Self::ea(r, m);
                    if op.align && a & (m.size as u64 - 1) != 0 {
                        return Err(Fault);
                    }
                    let mut b = [0u8; 32];
                    b[..16].copy_from_slice(&v.0.to_le_bytes());
                    b[16..].copy_from_slice(&v.1.to_le_bytes());
                    self.mem.write(a, &b[..m.size as usize])?;
                } else {
                    let v = self.vsrc(r, o1, op.align)?;
                    self.set_vec(o0, v)?;
                }
            }
            Code::VLoadZ => {
                let v = match o1 {
                    Opnd::Gpr { .. } => self.rd(r, o1)? as u128,
                    _ => self.vsrc(r, o1, false)?.0,
                };
                self.set_vec(o0, (v & mask(op.size) as u128, 0))?;
            }
            Code::VMerge => {
                let m = mask(op.size) as u128;
                let (a, b) = (self.vreg(o1)?.0, self.vreg(o2)?.0);
                self.set_vec(o0, ((a & !m) | (b & m), 0))?;
            }
            Code::VLoadHalf => {
                let a = self.vreg(o1)?.0;
                let v = self.vsrc(r, o2, false)?.0 & u64::MAX as u128;
                let low = u64::MAX as u128;
                let res = if op.cc == 1 {
                    (a & low) | (v << 64)
                } else {
                    (a & !low) | v
                };
                self.set_vec(o0, (res, 0))?;
            }
            Code::VBroadcast => {
                let v = splat(self.vsrc(r, o1, false)?.0, op.size);
                self.set_vec(o0, (v, v))?;
            }
            Code::VExtract128 => {
                let v = self.vreg(o1)?;
                let h = if op.cc & 1 == 1 { v.1 } else { v.0 };
                if let Opnd::Mem(m) = o0 {
                    let a = Self::ea(r, m);
                    self.mem.write(a, &h.to_le_bytes())?;
                } else {
                    self.set_vec(o0, (h, 0))?;
                }
            }
            Code::VInsert128 => {
                let mut v = self.vreg(o1)?;
                let h = self.vsrc(r, o2, false)?.0;
                if op.cc & 1 == 1 {
                    v.1 = h;
                } else {
                    v.0 = h;
                }
                self.set_vec(o0, v)?;
            }
            _ => return Err(Fault),
        }
        Ok(())
    }

    /// Arithmetic, compares and shuffles run on the host (per 128-bit half).
    fn vex_arith(&mut self, op: &Op, r: &mut Regs) -> R<()> {
        let [o0, o1, o2] = &op.ops;
        let wide = is_ymm(o0);
        match op.code {
            Code::VBin(x, shape) => {
                if x.is_fp() && !self.fp_masked {
                    return Err(Fault);
                }
                let (a, b) = self.two_sources(r, o1, o2)?;
                let mut mxcsr = self.mxcsr;
                let mut f = |a: u128, b: u128| from_m128(x.run(to_m128(a), to_m128(b), &mut mxcsr));
                let v = match shape {
                    Shape::Lanes => (f(a.0, b.0), if wide { f(a.1, b.1) } else { 0 }),
                    Shape::Count => (f(a.0, b.0), if wide { f(a.1, b.0) } else { 0 }),
                    Shape::Widen(bits) => {
                        let up = b.0 >> bits;
                        (f(b.0, b.0), f(up, up))
                    }
                    Shape::Narrow => {
                        let lo = f(b.0, b.0) & u64::MAX as u128;
                        let hi = f(b.1, b.1) & u64::MAX as u128;
                        (lo | hi << 64, 0)
                    }
                };
                self.mxcsr = mxcsr;
                self.set_vec(o0, v)?;
            }
            Code::VShuf(s) => {
                let (a, b) = self.two_sources(r, o1, o2)?;
                let imm = op.cc;
                // Per-element immediates go on into the upper half; the others repeat.
                let hi_imm = match s {
                    Shuf::Shufpd | Shuf::Blendpd => imm >> 2,
                    Shuf::Blendps => imm >> 4,
                    _ => imm,
                };
                let lo = shuffle(s, a.0, b.0, imm);
                let hi = if wide {
                    shuffle(s, a.1, b.1, hi_imm)
                } else {
                    0
                };
                self.set_vec(o0, (lo, hi))?;
            }
            Code::VCmp | Code::VRound => {
                if !self.fp_masked {
                    return Err(Fault);
                }
                let (a, b) = self.two_sources(r, o1, o2)?;
                let mut mxcsr = self.mxcsr;
                let mx: *mut u32 = &mut mxcsr;
                let f = |a: u128, b: u128| {
                    from_m128(if op.code == Code::VCmp {
                        run_vcmp(op.size, op.cc, to_m128(a), to_m128(b), mx)
                    } else {
                        run_round(op.size, op.cc, to_m128(a), to_m128(b), mx)
                    })
                };
                let v = (f(a.0, b.0), if wide { f(a.1, b.1) } else { 0 });
                self.mxcsr = mxcsr;
                self.set_vec(o0, v)?;
            }
            Code::VFma(k) => {
                if !self.fp_masked {
                    return Err(Fault);
                }
                let a = self.vreg(o0)?;
                let b = self.vreg(o1)?;
                let c = self.vsrc(r, o2, false)?;
                let mut mxcsr = self.mxcsr;
                let mx: *mut u32 = &mut mxcsr;
                let f = |a: u128, b: u128, c: u128| {
                    from_m128(run_fma(k, to_m128(a), to_m128(b), to_m128(c), mx))
                };
                let v = (f(a.0, b.0, c.0), if wide { f(a.1, b.1, c.1) } else { 0 });
                self.mxcsr = mxcsr;
                self.set_vec(o0, v)?;
            }
            Code::VCvtFromGpr(c) => {
                if !self.fp_masked {
                    return Err(Fault);
                }
                let v = self.rd(r, o2)?;
                let a = self.vreg(o1)?.0;
                let res = cvt_from_int(c, op.size, to_m128(a), v, &mut self.mxcsr);
                self.set_vec(o0, (from_m128(res), 0))?;
            }
            _ => return Err(Fault),
        }
        Ok(())
    }

    /// Cross-lane permutes, variable blends and shifts, inserts, tests and masks.
    fn vex_permute(&mut self, op: &Op, r: &mut Regs) -> R<()> {
        let [o0, o1, o2] = &op.ops;
        let wide = is_ymm(o0);
        match op.code {
            Code::VPerm2x128 => {
                let a = self.vreg(o1)?;
                let b = self.vsrc(r, o2, false)?;
                let pick = |ctl: u8| {
                    if ctl & 8 != 0 {
                        0
                    } else {
                        [a.0, a.1, b.0, b.1][ctl as usize & 3]
                    }
                };
                self.set_vec(o0, (pick(op.cc), pick(op.cc >> 4)))?;
            }
            Code::VPermq => {
                let s = self.vsrc(r, o1, false)?;
                let mut v = (0, 0);
                for k in 0..4 {
                    set_elem(&mut v, 8, k, elem(s, 8, (op.cc as u32 >> (2 * k)) & 3));
                }
                self.set_vec(o0, v)?;
            }
            Code::VPermd => {
                let idx = self.vreg(o1)?;
                let t = self.vsrc(r, o2, false)?;
                let mut v = (0, 0);
                for k in 0..8 {
                    set_elem(&mut v, 4, k, elem(t, 4, elem(idx, 4, k) as u32 & 7));
                }
                self.set_vec(o0, v)?;
            }
            Code::VPermilpd => {
                let s = self.vsrc(r, o1, false)?;
                let mut v = (0, 0);
                for k in 0..if wide { 4 } else { 2 } {
                    let lane = k & !1;
                    set_elem(&mut v, 8, k, elem(s, 8, lane + ((op.cc as u32 >> k) & 1)));
                }
                self.set_vec(o0, v)?;
            }
            Code::VBlendv => {
                let a = self.vreg(o1)?;
                let b = self.vsrc(r, o2, false)?;
                let n = op.cc as usize & 15;
                let m = (self.xmm[n], self.ymm_hi[n]);
                let size = op.size as u32;
                let mut v = a;
                for k in 0..(if wide { 32 } else { 16 }) / size {
                    if elem(m, size, k) >> (size * 8 - 1) & 1 == 1 {
                        set_elem(&mut v, size, k, elem(b, size, k));
                    }
                }
                self.set_vec(o0, v)?;
            }
            Code::VShiftV(s) => {
                let a = self.vreg(o1)?;
                let b = self.vsrc(r, o2, false)?;
                let size = if matches!(s, VShift::Sllvq | VShift::Srlvq) {
                    8
                } else {
                    4
                };
                let mut v = (0, 0);
                for k in 0..(if wide { 32 } else { 16 }) / size {
                    set_elem(
                        &mut v,
                        size,
                        k,
                        shift_v(s, elem(a, size, k), elem(b, size, k)),
                    );
                }
                self.set_vec(o0, v)?;
            }
            Code::VInsertGpr => {
                let size = op.size;
                let v = self.rd(r, o2)? & mask(size);
                let d = self.vreg(o1)?.0;
                let lanes = 16 / size as u32;
                let sh = (op.cc as u32 % lanes) * size as u32 * 8;
                let m = (mask(size) as u128) << sh;
                self.set_vec(o0, ((d & !m) | ((v as u128) << sh), 0))?;
            }
            Code::VPtest => {
                let a = self.vreg(o0)?;
                let b = self.vsrc(r, o1, false)?;
                let zf = if a.0 & b.0 == 0 && a.1 & b.1 == 0 {
                    ZF
                } else {
                    0
                };
                let cf = if !a.0 & b.0 == 0 && !a.1 & b.1 == 0 {
                    CF
                } else {
                    0
                };
                set_flags(r, STATUS, zf | cf);
            }
            Code::VMovmsk(k) => {
                let v = self.vreg(o1)?;
                let size = match k {
                    Msk::Movmskpd => 8,
                    Msk::Movmskps => 4,
                    Msk::Pmovmskb => 1,
                };
                let mut bits = 0u64;
                for e in 0..32 / size {
                    bits |= (elem(v, size, e) >> (size * 8 - 1) & 1) << e;
                }
                self.wr(r, o0, bits)?;
            }
            _ => return Err(Fault),
        }
        Ok(())
    }
}
