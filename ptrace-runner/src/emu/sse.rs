//! SSE operations run on the host CPU under the tracee's MXCSR, and the helpers around them.

use super::*;

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
    (
        fp: [$($fp:ident $fv:ident $fs:literal),* $(,)?],
        int: [$($io:ident $iv:ident $is:literal),* $(,)?] $(,)?
    ) => {
        /// Two-operand SSE instructions run on the host (`xmm op= xmm/mem`), each with its VEX form.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum XOp { $($fp,)* $($io,)* }

        impl XOp {
            /// Whether the instruction is floating-point arithmetic (depends on MXCSR).
            pub fn is_fp(self) -> bool {
                match self { $(XOp::$fp => true,)* _ => false }
            }

            pub(super) fn from_mnemonic(m: Mnemonic) -> Option<XOp> {
                match m {
                    $(Mnemonic::$fp => Some(XOp::$fp),)*
                    $(Mnemonic::$io => Some(XOp::$io),)*
                    _ => None,
                }
            }

            /// The operation of a VEX-encoded form (`vaddpd`), run 128 bits at a time.
            pub(super) fn from_vex(m: Mnemonic) -> Option<XOp> {
                match m {
                    $(Mnemonic::$fv => Some(XOp::$fp),)*
                    $(Mnemonic::$iv => Some(XOp::$io),)*
                    _ => None,
                }
            }

            #[inline(never)]
            pub(super) fn run(self, a: __m128i, b: __m128i, mxcsr: &mut u32) -> __m128i {
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
        Addss Vaddss "addss", Addsd Vaddsd "addsd", Addps Vaddps "addps", Addpd Vaddpd "addpd",
        Subss Vsubss "subss", Subsd Vsubsd "subsd", Subps Vsubps "subps", Subpd Vsubpd "subpd",
        Mulss Vmulss "mulss", Mulsd Vmulsd "mulsd", Mulps Vmulps "mulps", Mulpd Vmulpd "mulpd",
        Divss Vdivss "divss", Divsd Vdivsd "divsd", Divps Vdivps "divps", Divpd Vdivpd "divpd",
        Minss Vminss "minss", Minsd Vminsd "minsd", Minps Vminps "minps", Minpd Vminpd "minpd",
        Maxss Vmaxss "maxss", Maxsd Vmaxsd "maxsd", Maxps Vmaxps "maxps", Maxpd Vmaxpd "maxpd",
        Sqrtss Vsqrtss "sqrtss", Sqrtsd Vsqrtsd "sqrtsd", Sqrtps Vsqrtps "sqrtps", Sqrtpd Vsqrtpd "sqrtpd",
        Cvtss2sd Vcvtss2sd "cvtss2sd", Cvtsd2ss Vcvtsd2ss "cvtsd2ss", Cvtdq2pd Vcvtdq2pd "cvtdq2pd", Cvtdq2ps Vcvtdq2ps "cvtdq2ps",
        Cvtps2pd Vcvtps2pd "cvtps2pd", Cvtpd2ps Vcvtpd2ps "cvtpd2ps", Cvttps2dq Vcvttps2dq "cvttps2dq", Cvttpd2dq Vcvttpd2dq "cvttpd2dq",
        Cvtps2dq Vcvtps2dq "cvtps2dq", Cvtpd2dq Vcvtpd2dq "cvtpd2dq",
        Addsubpd Vaddsubpd "addsubpd", Addsubps Vaddsubps "addsubps", Haddpd Vhaddpd "haddpd", Haddps Vhaddps "haddps",
        Hsubpd Vhsubpd "hsubpd", Hsubps Vhsubps "hsubps",
        Rcpps Vrcpps "rcpps", Rcpss Vrcpss "rcpss", Rsqrtps Vrsqrtps "rsqrtps", Rsqrtss Vrsqrtss "rsqrtss",
    ],
    int: [
        Andps Vandps "andps", Andpd Vandpd "andpd", Andnps Vandnps "andnps", Andnpd Vandnpd "andnpd",
        Orps Vorps "orps", Orpd Vorpd "orpd", Xorps Vxorps "xorps", Xorpd Vxorpd "xorpd",
        Unpcklps Vunpcklps "unpcklps", Unpckhps Vunpckhps "unpckhps", Unpcklpd Vunpcklpd "unpcklpd", Unpckhpd Vunpckhpd "unpckhpd",
        Movhlps Vmovhlps "movhlps", Movlhps Vmovlhps "movlhps",
        Movddup Vmovddup "movddup", Movshdup Vmovshdup "movshdup", Movsldup Vmovsldup "movsldup",
        Paddb Vpaddb "paddb", Paddw Vpaddw "paddw", Paddd Vpaddd "paddd", Paddq Vpaddq "paddq",
        Psubb Vpsubb "psubb", Psubw Vpsubw "psubw", Psubd Vpsubd "psubd", Psubq Vpsubq "psubq",
        Paddsb Vpaddsb "paddsb", Paddsw Vpaddsw "paddsw", Paddusb Vpaddusb "paddusb", Paddusw Vpaddusw "paddusw",
        Psubsb Vpsubsb "psubsb", Psubsw Vpsubsw "psubsw", Psubusb Vpsubusb "psubusb", Psubusw Vpsubusw "psubusw",
        Pmullw Vpmullw "pmullw", Pmulhw Vpmulhw "pmulhw", Pmulhuw Vpmulhuw "pmulhuw", Pmuludq Vpmuludq "pmuludq",
        Pmaddwd Vpmaddwd "pmaddwd", Pavgb Vpavgb "pavgb", Pavgw Vpavgw "pavgw",
        Pminub Vpminub "pminub", Pmaxub Vpmaxub "pmaxub", Pminsw Vpminsw "pminsw", Pmaxsw Vpmaxsw "pmaxsw", Psadbw Vpsadbw "psadbw",
        Pcmpeqb Vpcmpeqb "pcmpeqb", Pcmpeqw Vpcmpeqw "pcmpeqw", Pcmpeqd Vpcmpeqd "pcmpeqd",
        Pcmpgtb Vpcmpgtb "pcmpgtb", Pcmpgtw Vpcmpgtw "pcmpgtw", Pcmpgtd Vpcmpgtd "pcmpgtd",
        Pand Vpand "pand", Pandn Vpandn "pandn", Por Vpor "por", Pxor Vpxor "pxor",
        Punpcklbw Vpunpcklbw "punpcklbw", Punpcklwd Vpunpcklwd "punpcklwd", Punpckldq Vpunpckldq "punpckldq",
        Punpcklqdq Vpunpcklqdq "punpcklqdq", Punpckhbw Vpunpckhbw "punpckhbw", Punpckhwd Vpunpckhwd "punpckhwd",
        Punpckhdq Vpunpckhdq "punpckhdq", Punpckhqdq Vpunpckhqdq "punpckhqdq",
        Packsswb Vpacksswb "packsswb", Packssdw Vpackssdw "packssdw", Packuswb Vpackuswb "packuswb",
        Psllw Vpsllw "psllw", Pslld Vpslld "pslld", Psllq Vpsllq "psllq", Psrlw Vpsrlw "psrlw", Psrld Vpsrld "psrld",
        Psrlq Vpsrlq "psrlq", Psraw Vpsraw "psraw", Psrad Vpsrad "psrad",
        Pshufb Vpshufb "pshufb", Pabsb Vpabsb "pabsb", Pabsw Vpabsw "pabsw", Pabsd Vpabsd "pabsd",
        Phaddw Vphaddw "phaddw", Phaddd Vphaddd "phaddd", Phsubw Vphsubw "phsubw", Phsubd Vphsubd "phsubd",
        Pmaddubsw Vpmaddubsw "pmaddubsw", Pmulhrsw Vpmulhrsw "pmulhrsw", Psignb Vpsignb "psignb", Psignw Vpsignw "psignw",
        Psignd Vpsignd "psignd",
        Pmulld Vpmulld "pmulld", Pmuldq Vpmuldq "pmuldq", Pminsb Vpminsb "pminsb", Pminsd Vpminsd "pminsd",
        Pminuw Vpminuw "pminuw", Pminud Vpminud "pminud", Pmaxsb Vpmaxsb "pmaxsb", Pmaxsd Vpmaxsd "pmaxsd",
        Pmaxuw Vpmaxuw "pmaxuw", Pmaxud Vpmaxud "pmaxud", Pcmpeqq Vpcmpeqq "pcmpeqq", Pcmpgtq Vpcmpgtq "pcmpgtq",
        Packusdw Vpackusdw "packusdw",
        Pmovsxbw Vpmovsxbw "pmovsxbw", Pmovsxbd Vpmovsxbd "pmovsxbd", Pmovsxbq Vpmovsxbq "pmovsxbq", Pmovsxwd Vpmovsxwd "pmovsxwd",
        Pmovsxwq Vpmovsxwq "pmovsxwq", Pmovsxdq Vpmovsxdq "pmovsxdq", Pmovzxbw Vpmovzxbw "pmovzxbw", Pmovzxbd Vpmovzxbd "pmovzxbd",
        Pmovzxbq Vpmovzxbq "pmovzxbq", Pmovzxwd Vpmovzxwd "pmovzxwd", Pmovzxwq Vpmovzxwq "pmovzxwq", Pmovzxdq Vpmovzxdq "pmovzxdq",
        Phminposuw Vphminposuw "phminposuw",
    ],
}

/// `cmp{ss,sd,ps,pd}` (`m` = 0..=3) with predicate `pred` (0..=7).
#[inline(never)]
pub(super) fn run_cmp(m: u8, pred: u8, a: __m128i, b: __m128i, mx: *mut u32) -> __m128i {
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
pub(super) fn run_round(m: u8, imm: u8, a: __m128i, b: __m128i, mx: *mut u32) -> __m128i {
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
pub(super) fn to_m128(v: u128) -> __m128i {
    // SAFETY: both are 16 plain bytes.
    unsafe { std::mem::transmute::<u128, __m128i>(v) }
}

#[inline(always)]
pub(super) fn from_m128(v: __m128i) -> u128 {
    // SAFETY: both are 16 plain bytes.
    unsafe { std::mem::transmute::<__m128i, u128>(v) }
}

pub(super) fn shuffle(s: Shuf, a: u128, b: u128, imm: u8) -> u128 {
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
pub(super) fn comi(c: Comi, a: __m128i, b: __m128i, mxcsr: &mut u32) -> u64 {
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
pub(super) fn cvt_to_int(c: CvtI, size: u8, b: __m128i, mxcsr: &mut u32) -> u64 {
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
pub(super) fn cvt_from_int(c: CvtF, size: u8, a: __m128i, v: u64, mxcsr: &mut u32) -> __m128i {
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
