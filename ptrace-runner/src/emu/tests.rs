//! The interpreter against the CPU it runs on: each case assembles one instruction, runs it
//! natively in this process (inside a harness that loads and saves every general-purpose
//! register, the flags, MXCSR and the xmm registers) and in the interpreter, from the same
//! random states, and compares everything, the flags the manuals leave undefined included.

#![allow(clippy::vec_init_then_push)]

use super::*;
use crate::decode::Decoded;
use iced_x86::code_asm::*;
use iced_x86::InstructionInfoFactory;

#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, PartialEq)]
struct State {
    /// rax, rcx, rdx, rbx, rsp (unused), rbp, rsi, rdi, r8..r15 (r15 unused).
    g: [u64; 16],
    flags: u64,
    mxcsr: u64,
    xmm: [u128; 16],
    /// Bits 255:128 of the ymm registers (loaded and compared where the CPU has AVX2).
    ymm_hi: [u128; 16],
}

fn has_avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("bmi2")
}

const G64: [AsmRegister64; 16] = [
    rax, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8, r9, r10, r11, r12, r13, r14, r15,
];

/// Regs indices of the x86 register numbers 0..16.
const TO_REGS: [usize; 16] = [10, 11, 12, 5, 19, 4, 13, 14, 9, 8, 7, 6, 3, 2, 1, 0];

type Gen = Box<dyn Fn(&mut CodeAssembler) -> Result<(), IcedError>>;

struct Native {
    code: *mut u8,
    len: usize,
}

impl Native {
    fn new(insn: &Gen) -> Native {
        let mut a = CodeAssembler::new(64).unwrap();
        for r in [rbx, rbp, r12, r13, r14, r15] {
            a.push(r).unwrap();
        }
        a.mov(r15, rdi).unwrap();
        a.ldmxcsr(dword_ptr(r15 + 136)).unwrap();
        a.push(qword_ptr(r15 + 128)).unwrap();
        a.popfq().unwrap();
        for k in 0..16 {
            a.movdqu(xmm_reg(k), xmmword_ptr(r15 + 144 + 16 * k as i32))
                .unwrap();
            if has_avx2() {
                a.vinserti128(
                    ymm_reg(k),
                    ymm_reg(k),
                    xmmword_ptr(r15 + 400 + 16 * k as i32),
                    1,
                )
                .unwrap();
            }
        }
        for (k, &r) in G64.iter().enumerate() {
            if k != 4 && k != 15 {
                a.mov(r, qword_ptr(r15 + 8 * k as i32)).unwrap();
            }
        }
        insn(&mut a).unwrap();
        for (k, &r) in G64.iter().enumerate() {
            if k != 4 && k != 15 {
                a.mov(qword_ptr(r15 + 8 * k as i32), r).unwrap();
            }
        }
        a.pushfq().unwrap();
        a.pop(qword_ptr(r15 + 128)).unwrap();
        a.stmxcsr(dword_ptr(r15 + 136)).unwrap();
        for k in 0..16 {
            a.movdqu(xmmword_ptr(r15 + 144 + 16 * k as i32), xmm_reg(k))
                .unwrap();
            if has_avx2() {
                a.vextracti128(xmmword_ptr(r15 + 400 + 16 * k as i32), ymm_reg(k), 1)
                    .unwrap();
            }
        }
        if has_avx2() {
            a.vzeroupper().unwrap();
        }
        a.mov(eax, 0x1f80).unwrap();
        a.push(rax).unwrap();
        a.ldmxcsr(dword_ptr(rsp)).unwrap();
        a.pop(rax).unwrap();
        for r in [r15, r14, r13, r12, rbp, rbx] {
            a.pop(r).unwrap();
        }
        a.ret().unwrap();
        let bytes = a.assemble(0).unwrap();
        // SAFETY: an anonymous private mapping, checked below.
        let code = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096 * 4,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(code, libc::MAP_FAILED);
        assert!(bytes.len() < 4096 * 4);
        // SAFETY: the mapping is large enough.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), code as *mut u8, bytes.len()) };
        Native {
            code: code as *mut u8,
            len: 4096 * 4,
        }
    }

    fn run(&self, s: &mut State) {
        // SAFETY: the harness saves and restores every callee-saved register, loads and stores
        // the state through rdi, and the instruction under test only touches registers.
        unsafe {
            let f: extern "C" fn(*mut State) = std::mem::transmute(self.code);
            f(s);
        }
    }
}

impl Drop for Native {
    fn drop(&mut self) {
        // SAFETY: unmaps what `new` mapped.
        unsafe { libc::munmap(self.code as *mut libc::c_void, self.len) };
    }
}

fn ymm_reg(k: usize) -> AsmRegisterYmm {
    [
        ymm0, ymm1, ymm2, ymm3, ymm4, ymm5, ymm6, ymm7, ymm8, ymm9, ymm10, ymm11, ymm12, ymm13,
        ymm14, ymm15,
    ][k]
}

fn xmm_reg(k: usize) -> AsmRegisterXmm {
    [
        xmm0, xmm1, xmm2, xmm3, xmm4, xmm5, xmm6, xmm7, xmm8, xmm9, xmm10, xmm11, xmm12, xmm13,
        xmm14, xmm15,
    ][k]
}

/// Operand values for the CPU comparisons: edge cases, small numbers and random bits.
struct Rng(fastrand::Rng);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.u64(..)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0.u64(..n)
    }

    fn int(&mut self) -> u64 {
        const EDGES: [u64; 16] = [
            0,
            1,
            2,
            u64::MAX,
            0x7f,
            0x80,
            0xff,
            0x7fff,
            0x8000,
            0xffff,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            0x7fff_ffff_ffff_ffff,
            0x8000_0000_0000_0000,
            0x1_0000_0000,
        ];
        match self.below(4) {
            0 => EDGES[self.below(16) as usize],
            1 => self.below(64),
            2 => EDGES[self.below(16) as usize]
                .wrapping_add(self.below(5))
                .wrapping_sub(2),
            _ => self.next(),
        }
    }

    fn f64(&mut self) -> u64 {
        const EDGES: [u64; 12] = [
            0,
            0x8000_0000_0000_0000,
            0x3ff0_0000_0000_0000,
            0xbff8_0000_0000_0000,
            0x7fef_ffff_ffff_ffff,
            0x0000_0000_0000_0001,
            0x7ff0_0000_0000_0000,
            0xfff0_0000_0000_0000,
            0x7ff8_0000_0000_0000,
            0x7ff4_0000_0000_0001,
            0x43e0_0000_0000_0000,
            0x41e0_0000_0000_0000,
        ];
        match self.below(3) {
            0 => EDGES[self.below(12) as usize],
            1 => f64::to_bits((self.below(2001) as f64 - 1000.0) / 8.0),
            _ => self.next(),
        }
    }

    fn f32(&mut self) -> u64 {
        const EDGES: [u32; 10] = [
            0,
            0x8000_0000,
            0x3f80_0000,
            0x7f7f_ffff,
            0x0000_0001,
            0x7f80_0000,
            0xff80_0000,
            0x7fc0_0000,
            0x7fa0_0001,
            0x4f00_0000,
        ];
        (match self.below(3) {
            0 => EDGES[self.below(10) as usize],
            1 => f32::to_bits((self.below(2001) as f32 - 1000.0) / 8.0),
            _ => self.next() as u32,
        }) as u64
    }

    fn xmm(&mut self) -> u128 {
        match self.below(4) {
            0 => (self.f64() as u128) | (self.f64() as u128) << 64,
            1 => {
                (self.f32() as u128)
                    | (self.f32() as u128) << 32
                    | (self.f32() as u128) << 64
                    | (self.f32() as u128) << 96
            }
            2 => (self.int() as u128) | (self.int() as u128) << 64,
            _ => (self.next() as u128) | (self.next() as u128) << 64,
        }
    }
}

/// Runs `insn` natively and in the interpreter from `iters` random states (adjusted by `fix`),
/// comparing everything. Returns the mismatches as text.
fn check(name: &str, insn: Gen, iters: usize, fix: &dyn Fn(&mut State)) -> Vec<String> {
    let native = Native::new(&insn);
    let mut one = CodeAssembler::new(64).unwrap();
    insn(&mut one).unwrap();
    let bytes = one.assemble(0x1000).unwrap();
    let d = Decoded::new(0x1000, &bytes, &mut InstructionInfoFactory::new());
    assert!(
        d.op.supported(),
        "{name}: not supported by the interpreter ({:?})",
        d.insn
    );
    let mut emu = Emulate::new(std::process::id() as pid_t);
    let seed = name
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    let mut rng = Rng(fastrand::Rng::with_seed(seed));
    let mut errors = Vec::new();
    for _ in 0..iters {
        let mut s = State {
            g: [0; 16],
            flags: 0x202 | (rng.next() & STATUS),
            mxcsr: 0x1f80,
            xmm: [0; 16],
            ymm_hi: [0; 16],
        };
        for k in 0..16 {
            s.g[k] = rng.int();
            s.xmm[k] = rng.xmm();
            if has_avx2() {
                s.ymm_hi[k] = rng.xmm();
            }
        }
        if rng.below(4) == 0 {
            // Another rounding mode, sometimes DAZ/FTZ.
            s.mxcsr = 0x1f80 | (rng.below(4) << 13) | if rng.below(3) == 0 { 0x8040 } else { 0 };
        }
        fix(&mut s);
        let start = s;
        // SAFETY: Regs is plain integers.
        let mut before: Regs = unsafe { std::mem::zeroed() };
        {
            let g = gprs_mut(&mut before);
            for k in 0..16 {
                g[TO_REGS[k]] = s.g[k];
            }
        }
        before.rip = 0x1000;
        before.eflags = s.flags;
        emu.set_fp(s.xmm, s.ymm_hi, s.mxcsr as u32);
        let mut after = before;
        let ok = emu.execute(&d, &before, &mut after);
        native.run(&mut s);
        if !ok {
            errors.push(format!("{name}: the interpreter declined from {start:x?}"));
            continue;
        }
        let g = gprs(&after);
        let mut diffs = Vec::new();
        for k in 0..16 {
            if k != 4 && k != 15 && g[TO_REGS[k]] != s.g[k] {
                diffs.push(format!(
                    "{:?}: {:#x} != native {:#x}",
                    G64[k], g[TO_REGS[k]], s.g[k]
                ));
            }
        }
        // The flags the manuals leave undefined are pinned for AMD CPUs (the interpreter sets
        // them as those do); on others only the defined ones are compared.
        let undefined = if amd() { 0 } else { manual_undefined(&d.insn) };
        let fl = |f: u64| f & (STATUS | DF) & !undefined;
        if fl(after.eflags) != fl(s.flags) {
            diffs.push(format!(
                "flags {:#x} != native {:#x} (differ {:#x})",
                fl(after.eflags),
                fl(s.flags),
                fl(after.eflags) ^ fl(s.flags)
            ));
        }
        if after.rip != 0x1000 + bytes.len() as u64 {
            diffs.push(format!("rip {:#x}", after.rip));
        }
        for k in 0..16 {
            if emu.xmm[k] != s.xmm[k] {
                diffs.push(format!(
                    "xmm{k}: {:#034x} != native {:#034x}",
                    emu.xmm[k], s.xmm[k]
                ));
            }
        }
        for k in 0..16 {
            if emu.ymm_hi[k] != s.ymm_hi[k] {
                diffs.push(format!(
                    "ymm{k}[255:128]: {:#034x} != native {:#034x}",
                    emu.ymm_hi[k], s.ymm_hi[k]
                ));
            }
        }
        if emu.mxcsr as u64 != s.mxcsr {
            diffs.push(format!("mxcsr {:#x} != native {:#x}", emu.mxcsr, s.mxcsr));
        }
        if !diffs.is_empty() {
            errors.push(format!(
                "{name}: from g={:x?} flags={:#x} xmm0={:#x} xmm1={:#x} mxcsr={:#x}: {}",
                start.g,
                start.flags,
                start.xmm[0],
                start.xmm[1],
                start.mxcsr,
                diffs.join("; ")
            ));
        }
    }
    errors
}

fn no_fix(_: &mut State) {}

/// The flags the manuals leave undefined after `insn`: iced's list, and what it leaves out
/// (Intel CPUs set them otherwise than AMD's): AF, and OF past a count of 1, of shifts and
/// rotates; SF, ZF, AF and PF of multiplications; every status flag of divisions.
fn manual_undefined(insn: &iced_x86::Instruction) -> u64 {
    use iced_x86::Mnemonic as M;
    const CF: u64 = 0x1;
    const PF: u64 = 0x4;
    const AF: u64 = 0x10;
    const ZF: u64 = 0x40;
    const SF: u64 = 0x80;
    const OF: u64 = 0x800;
    let extra = match insn.mnemonic() {
        M::Shl
        | M::Sal
        | M::Shr
        | M::Sar
        | M::Rol
        | M::Ror
        | M::Rcl
        | M::Rcr
        | M::Shld
        | M::Shrd => AF | OF,
        M::Mul | M::Imul => SF | ZF | AF | PF,
        M::Div | M::Idiv => CF | OF | SF | ZF | AF | PF,
        _ => 0,
    };
    insn.rflags_undefined() as u64 | extra
}

fn amd() -> bool {
    let r = std::arch::x86_64::__cpuid(0);
    (r.ebx, r.edx, r.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163)
}

macro_rules! case {
    ($list:ident, $($t:tt)*) => {
        $list.push((stringify!($($t)*).to_string(), Box::new(|a: &mut CodeAssembler| a.$($t)*) as Gen));
    };
}

fn run_cases(cases: Vec<(String, Gen)>, iters: usize, fix: &dyn Fn(&mut State)) {
    let mut all = Vec::new();
    let mut failing = Vec::new();
    for (name, g) in cases {
        let e = check(&name, g, iters, fix);
        if !e.is_empty() {
            failing.push(format!("{name} ({} of {iters})", e.len()));
            all.extend(e.into_iter().take(3));
        }
    }
    assert!(
        all.is_empty(),
        "{} cases differ from the CPU: {}\n{}",
        failing.len(),
        failing.join(", "),
        all.join("\n")
    );
}

#[test]
fn integer_alu_matches_the_cpu() {
    let mut c: Vec<(String, Gen)> = Vec::new();
    case!(c, add(rax, rbx));
    case!(c, add(eax, ebx));
    case!(c, add(ax, bx));
    case!(c, add(al, bl));
    case!(c, add(ah, bl));
    case!(c, add(r8d, 0x7fff_ffff));
    case!(c, add(rcx, -5));
    case!(c, adc(rax, rbx));
    case!(c, adc(ecx, edx));
    case!(c, adc(dl, 0x80));
    case!(c, sub(rax, rbx));
    case!(c, sub(si, di));
    case!(c, sub(r9b, r10b));
    case!(c, sbb(rax, rbx));
    case!(c, sbb(ax, bx));
    case!(c, sbb(bl, cl));
    case!(c, cmp(rax, rbx));
    case!(c, cmp(ecx, 0x1234));
    case!(c, cmp(dh, 0x7f));
    case!(c, and(rax, rbx));
    case!(c, and(eax, ebx));
    case!(c, and(cx, dx));
    case!(c, and(al, 0x0f));
    case!(c, or(rax, rbx));
    case!(c, or(r11w, r12w));
    case!(c, xor(eax, eax));
    case!(c, xor(rsi, rdi));
    case!(c, xor(bl, bh));
    case!(c, test(rax, rbx));
    case!(c, test(ecx, ecx));
    case!(c, test(dil, 1));
    case!(c, inc(rax));
    case!(c, inc(ecx));
    case!(c, inc(dx));
    case!(c, inc(bl));
    case!(c, dec(rax));
    case!(c, dec(r8d));
    case!(c, dec(ch));
    case!(c, neg(rax));
    case!(c, neg(ebx));
    case!(c, neg(cl));
    case!(c, neg(si));
    case!(c, not(rax));
    case!(c, not(edx));
    case!(c, not(al));
    for shift in 0..5 {
        for (name, g) in shifts(shift) {
            c.push((name, g));
        }
    }
    case!(c, imul_2(rax, rbx));
    case!(c, imul_2(ecx, edx));
    case!(c, imul_2(si, di));
    case!(c, imul_3(rax, rbx, -7));
    case!(c, imul_3(r8d, r9d, 0x12345));
    case!(c, imul_3(ax, bx, 300));
    case!(c, imul(rbx));
    case!(c, imul(ebx));
    case!(c, imul(bx));
    case!(c, imul(bl));
    case!(c, mul(rbx));
    case!(c, mul(ebx));
    case!(c, mul(bx));
    case!(c, mul(bl));
    case!(c, mov(rax, rbx));
    case!(c, mov(eax, ebx));
    case!(c, mov(ax, bx));
    case!(c, mov(al, bh));
    case!(c, mov(ah, cl));
    case!(c, mov(rax, 0x1122_3344_5566_7788u64));
    case!(c, mov(ecx, 0xffff_fffeu32));
    case!(c, movzx(eax, bl));
    case!(c, movzx(rax, bx));
    case!(c, movzx(ecx, ah));
    case!(c, movsx(rax, bl));
    case!(c, movsx(eax, bx));
    case!(c, movsx(cx, dl));
    case!(c, movsxd(rax, ebx));
    case!(c, lea(rax, ptr(rbx + rcx * 4 + 0x10)));
    case!(c, lea(eax, ptr(rbx + rcx * 8 - 3)));
    case!(c, lea(r9, ptr(r10 + r11 * 2)));
    case!(c, lea(ax, ptr(rdx + 0x7fff)));
    case!(c, xchg(rax, rbx));
    case!(c, xchg(ecx, edx));
    case!(c, xchg(si, di));
    case!(c, xchg(al, ah));
    case!(c, bswap(eax));
    case!(c, bswap(r9));
    case!(c, bt(rax, rbx));
    case!(c, bt(ecx, 35));
    case!(c, bts(rax, rcx));
    case!(c, btr(edx, ebx));
    case!(c, btc(ax, bx));
    case!(c, btc(rsi, 63));
    case!(c, popcnt(rax, rbx));
    case!(c, popcnt(ecx, edx));
    case!(c, popcnt(si, di));
    case!(c, cqo());
    case!(c, cdq());
    case!(c, cwd());
    case!(c, cdqe());
    case!(c, cwde());
    case!(c, cbw());
    case!(c, lahf());
    case!(c, sahf());
    case!(c, clc());
    case!(c, stc());
    case!(c, cmc());
    case!(c, cmovo(rax, rbx));
    case!(c, cmovno(eax, ebx));
    case!(c, cmovb(ax, bx));
    case!(c, cmovae(rcx, rdx));
    case!(c, cmove(ecx, edx));
    case!(c, cmovne(rsi, rdi));
    case!(c, cmovbe(esi, edi));
    case!(c, cmova(r8, r9));
    case!(c, cmovs(r8d, r9d));
    case!(c, cmovns(r10, r11));
    case!(c, cmovp(r10d, r11d));
    case!(c, cmovnp(rax, rcx));
    case!(c, cmovl(eax, ecx));
    case!(c, cmovge(rbx, rdx));
    case!(c, cmovle(ebx, edx));
    case!(c, cmovg(rbp, rsi));
    case!(c, seto(al));
    case!(c, setno(bl));
    case!(c, setb(cl));
    case!(c, setae(dl));
    case!(c, sete(ah));
    case!(c, setne(bh));
    case!(c, setbe(sil));
    case!(c, seta(dil));
    case!(c, sets(r8b));
    case!(c, setns(r9b));
    case!(c, setp(r10b));
    case!(c, setnp(r11b));
    case!(c, setl(r12b));
    case!(c, setge(al));
    case!(c, setle(bl));
    case!(c, setg(cl));
    run_cases(c, 3000, &no_fix);
}

fn shifts(which: usize) -> Vec<(String, Gen)> {
    let mut c: Vec<(String, Gen)> = Vec::new();
    macro_rules! each {
        ($op:ident) => {{
            case!(c, $op(rax, cl));
            case!(c, $op(ebx, cl));
            case!(c, $op(dx, cl));
            case!(c, $op(sil, cl));
            case!(c, $op(ah, cl));
            for n in [0u32, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 200] {
                let nm = format!("{}(rax/ebx/dx/bl, {n})", stringify!($op));
                c.push((
                    format!("{nm} q"),
                    Box::new(move |a: &mut CodeAssembler| a.$op(rax, n)),
                ));
                c.push((
                    format!("{nm} d"),
                    Box::new(move |a: &mut CodeAssembler| a.$op(ebx, n)),
                ));
                c.push((
                    format!("{nm} w"),
                    Box::new(move |a: &mut CodeAssembler| a.$op(dx, n)),
                ));
                c.push((
                    format!("{nm} b"),
                    Box::new(move |a: &mut CodeAssembler| a.$op(bl, n)),
                ));
            }
        }};
    }
    match which {
        0 => each!(shl),
        1 => each!(shr),
        2 => each!(sar),
        3 => each!(rol),
        _ => each!(ror),
    }
    c
}

#[test]
fn division_matches_the_cpu() {
    fn sign(v: u64, bits: u32) -> u64 {
        if (v >> (bits - 1)) & 1 != 0 {
            u64::MAX
        } else {
            0
        }
    }
    // High half of the dividend zero (unsigned) or the sign of the low half (signed), and a
    // divisor that is neither 0 nor -1: no #DE.
    let unsigned = |s: &mut State| {
        s.g[3] |= 1;
        s.g[2] = 0;
        s.g[0] &= !0xff00;
    };
    let signed = |bits: u32| {
        move |s: &mut State| {
            s.g[3] = (s.g[3] & !2) | 1;
            match bits {
                8 => {
                    s.g[0] = (s.g[0] & !0xff00) | (sign(s.g[0], 8) & 0xff00);
                }
                _ => s.g[2] = sign(s.g[0], bits),
            }
        }
    };
    let mut c: Vec<(String, Gen)> = Vec::new();
    case!(c, div(rbx));
    case!(c, div(ebx));
    case!(c, div(bx));
    case!(c, div(bl));
    run_cases(c, 3000, &unsigned);
    for bits in [64, 32, 16, 8] {
        let mut c: Vec<(String, Gen)> = Vec::new();
        match bits {
            64 => {
                case!(c, idiv(rbx));
            }
            32 => {
                case!(c, idiv(ebx));
            }
            16 => {
                case!(c, idiv(bx));
            }
            _ => {
                case!(c, idiv(bl));
            }
        }
        run_cases(c, 3000, &signed(bits));
    }
}

#[test]
fn sse_matches_the_cpu() {
    let mut c: Vec<(String, Gen)> = Vec::new();
    macro_rules! bin {
        ($($op:ident),*) => { $( case!(c, $op(xmm0, xmm1)); case!(c, $op(xmm9, xmm9)); )* };
    }
    bin!(
        addss, addsd, addps, addpd, subss, subsd, subps, subpd, mulss, mulsd, mulps, mulpd, divss,
        divsd, divps, divpd, minss, minsd, minps, minpd, maxss, maxsd, maxps, maxpd, sqrtss,
        sqrtsd, sqrtps, sqrtpd, cvtss2sd, cvtsd2ss, cvtdq2pd, cvtdq2ps, cvtps2pd, cvtpd2ps,
        cvttps2dq, cvttpd2dq, cvtps2dq, cvtpd2dq, addsubpd, haddpd, hsubps, andps, andpd, andnps,
        andnpd, orps, orpd, xorps, xorpd, unpcklps, unpckhps, unpcklpd, unpckhpd, movhlps, movlhps,
        movddup, movshdup, paddb, paddw, paddd, paddq, psubb, psubw, psubd, psubq, paddsb, paddusw,
        psubsw, psubusb, pmullw, pmulhw, pmulhuw, pmuludq, pmaddwd, pavgb, pminub, pmaxsw, psadbw,
        pcmpeqb, pcmpeqw, pcmpeqd, pcmpgtb, pcmpgtw, pcmpgtd, pand, pandn, por, pxor, punpcklbw,
        punpcklwd, punpckldq, punpcklqdq, punpckhbw, punpckhwd, punpckhdq, punpckhqdq, packsswb,
        packssdw, packuswb, psllw, pslld, psllq, psrlw, psrld, psrlq, psraw, psrad, pshufb, pabsd,
        phaddd, pmulld, pmuldq, pminsd, pmaxud, pcmpeqq, pcmpgtq, packusdw, pmovsxbw, pmovzxdq,
        pmovsxwq, movaps, movups, movdqa, movdqu, movss, movsd_2, movq
    );
    for p in 0..8u32 {
        c.push((
            format!("cmpsd {p}"),
            Box::new(move |a: &mut CodeAssembler| a.cmpsd_3(xmm2, xmm3, p)),
        ));
        c.push((
            format!("cmpps {p}"),
            Box::new(move |a: &mut CodeAssembler| a.cmpps(xmm2, xmm3, p)),
        ));
    }
    for imm in [0u32, 1, 2, 3, 4, 5, 9, 10, 11, 12, 15] {
        c.push((
            format!("roundsd {imm}"),
            Box::new(move |a: &mut CodeAssembler| a.roundsd(xmm4, xmm5, imm)),
        ));
        c.push((
            format!("roundps {imm}"),
            Box::new(move |a: &mut CodeAssembler| a.roundps(xmm4, xmm5, imm)),
        ));
    }
    for imm in [0u32, 1, 0x1b, 0x4e, 0xb1, 0xe4, 0xff, 0x93] {
        c.push((
            format!("shufps {imm}"),
            Box::new(move |a: &mut CodeAssembler| a.shufps(xmm6, xmm7, imm)),
        ));
        c.push((
            format!("shufpd {imm}"),
            Box::new(move |a: &mut CodeAssembler| a.shufpd(xmm6, xmm7, imm & 3)),
        ));
        c.push((
            format!("pshufd {imm}"),
            Box::new(move |a: &mut CodeAssembler| a.pshufd(xmm6, xmm7, imm)),
        ));
        c.push((
            format!("pshuflw {imm}"),
            Box::new(move |a: &mut CodeAssembler| a.pshuflw(xmm6, xmm7, imm)),
        ));
        c.push((
            format!("pshufhw {imm}"),
            Box::new(move |a: &mut CodeAssembler| a.pshufhw(xmm6, xmm7, imm)),
        ));
        c.push((
            format!("pblendw {imm}"),
            Box::new(move |a: &mut CodeAssembler| a.pblendw(xmm6, xmm7, imm)),
        ));
        c.push((
            format!("blendps {imm}"),
            Box::new(move |a: &mut CodeAssembler| a.blendps(xmm6, xmm7, imm & 15)),
        ));
        c.push((
            format!("blendpd {imm}"),
            Box::new(move |a: &mut CodeAssembler| a.blendpd(xmm6, xmm7, imm & 3)),
        ));
        c.push((
            format!("palignr {imm}"),
            Box::new(move |a: &mut CodeAssembler| a.palignr(xmm6, xmm7, imm & 31)),
        ));
    }
    for n in [0u32, 1, 3, 7, 8, 15, 16, 31, 32, 63, 64, 200] {
        c.push((
            format!("psllw {n}"),
            Box::new(move |a: &mut CodeAssembler| a.psllw(xmm8, n)),
        ));
        c.push((
            format!("pslld {n}"),
            Box::new(move |a: &mut CodeAssembler| a.pslld(xmm8, n)),
        ));
        c.push((
            format!("psllq {n}"),
            Box::new(move |a: &mut CodeAssembler| a.psllq(xmm8, n)),
        ));
        c.push((
            format!("psrlw {n}"),
            Box::new(move |a: &mut CodeAssembler| a.psrlw(xmm8, n)),
        ));
        c.push((
            format!("psrld {n}"),
            Box::new(move |a: &mut CodeAssembler| a.psrld(xmm8, n)),
        ));
        c.push((
            format!("psrlq {n}"),
            Box::new(move |a: &mut CodeAssembler| a.psrlq(xmm8, n)),
        ));
        c.push((
            format!("psraw {n}"),
            Box::new(move |a: &mut CodeAssembler| a.psraw(xmm8, n)),
        ));
        c.push((
            format!("psrad {n}"),
            Box::new(move |a: &mut CodeAssembler| a.psrad(xmm8, n)),
        ));
        c.push((
            format!("pslldq {n}"),
            Box::new(move |a: &mut CodeAssembler| a.pslldq(xmm8, n)),
        ));
        c.push((
            format!("psrldq {n}"),
            Box::new(move |a: &mut CodeAssembler| a.psrldq(xmm8, n)),
        ));
    }
    case!(c, comisd(xmm0, xmm1));
    case!(c, ucomisd(xmm0, xmm1));
    case!(c, comiss(xmm0, xmm1));
    case!(c, ucomiss(xmm0, xmm1));
    case!(c, ptest(xmm0, xmm1));
    case!(c, cvttsd2si(rax, xmm1));
    case!(c, cvttsd2si(eax, xmm1));
    case!(c, cvtsd2si(rbx, xmm2));
    case!(c, cvtsd2si(ebx, xmm2));
    case!(c, cvttss2si(rcx, xmm3));
    case!(c, cvttss2si(ecx, xmm3));
    case!(c, cvtss2si(rdx, xmm4));
    case!(c, cvtss2si(edx, xmm4));
    case!(c, cvtsi2sd(xmm0, rax));
    case!(c, cvtsi2sd(xmm0, eax));
    case!(c, cvtsi2ss(xmm1, rbx));
    case!(c, cvtsi2ss(xmm1, ebx));
    case!(c, movmskpd(eax, xmm1));
    case!(c, movmskps(ebx, xmm2));
    case!(c, pmovmskb(ecx, xmm3));
    case!(c, movd(xmm0, eax));
    case!(c, movq(xmm1, rbx));
    case!(c, movd(ecx, xmm2));
    case!(c, movq(rdx, xmm3));
    for k in [0u32, 1, 3, 5, 7, 9] {
        c.push((
            format!("pextrw {k}"),
            Box::new(move |a: &mut CodeAssembler| a.pextrw(eax, xmm1, k)),
        ));
        c.push((
            format!("pinsrw {k}"),
            Box::new(move |a: &mut CodeAssembler| a.pinsrw(xmm1, ebx, k)),
        ));
        c.push((
            format!("pextrb {k}"),
            Box::new(move |a: &mut CodeAssembler| a.pextrb(ecx, xmm2, k)),
        ));
        c.push((
            format!("pextrd {k}"),
            Box::new(move |a: &mut CodeAssembler| a.pextrd(edx, xmm3, k)),
        ));
        c.push((
            format!("pextrq {k}"),
            Box::new(move |a: &mut CodeAssembler| a.pextrq(rsi, xmm4, k)),
        ));
        c.push((
            format!("pinsrd {k}"),
            Box::new(move |a: &mut CodeAssembler| a.pinsrd(xmm5, edi, k)),
        ));
        c.push((
            format!("pinsrq {k}"),
            Box::new(move |a: &mut CodeAssembler| a.pinsrq(xmm5, r8, k)),
        ));
        c.push((
            format!("pinsrb {k}"),
            Box::new(move |a: &mut CodeAssembler| a.pinsrb(xmm6, r9d, k)),
        ));
        c.push((
            format!("extractps {k}"),
            Box::new(move |a: &mut CodeAssembler| a.extractps(r10d, xmm7, k)),
        ));
    }
    run_cases(c, 1000, &no_fix);
}

/// Cases `name imm` for each immediate.
macro_rules! imm_cases {
    ($list:ident, [$($imm:expr),*], $op:ident($($arg:expr),*)) => {
        for imm in [$($imm),*] {
            $list.push((
                format!("{} {imm}", stringify!($op($($arg),*))),
                Box::new(move |a: &mut CodeAssembler| a.$op($($arg),*, imm)),
            ));
        }
    };
}

#[test]
fn avx_matches_the_cpu() {
    if !has_avx2() {
        eprintln!("skipped: this CPU has no AVX2 and FMA");
        return;
    }
    let mut c: Vec<(String, Gen)> = Vec::new();
    macro_rules! packed {
        ($($op:ident),*) => { $(
            case!(c, $op(xmm0, xmm1, xmm2));
            case!(c, $op(ymm3, ymm4, ymm5));
            case!(c, $op(ymm9, ymm9, ymm9));
        )* };
    }
    packed!(
        vaddpd,
        vaddps,
        vsubpd,
        vmulps,
        vdivpd,
        vminpd,
        vmaxps,
        vandpd,
        vandnps,
        vorps,
        vxorpd,
        vunpcklpd,
        vunpckhps,
        vaddsubpd,
        vhaddpd,
        vpaddb,
        vpaddd,
        vpaddq,
        vpsubd,
        vpsubq,
        vpmulld,
        vpmuldq,
        vpmuludq,
        vpcmpeqb,
        vpcmpeqd,
        vpcmpgtb,
        vpcmpgtq,
        vpminub,
        vpmaxsd,
        vpminsd,
        vpand,
        vpandn,
        vpor,
        vpxor,
        vpunpcklbw,
        vpunpckhqdq,
        vpunpckldq,
        vpackusdw,
        vpackuswb,
        vpshufb,
        vpsadbw,
        vpavgb,
        vpmaddwd,
        vpsubusb
    );
    macro_rules! scalar {
        ($($op:ident),*) => { $( case!(c, $op(xmm0, xmm1, xmm2)); case!(c, $op(xmm7, xmm7, xmm3)); )* };
    }
    scalar!(
        vaddsd, vaddss, vsubsd, vmulsd, vdivsd, vdivss, vminsd, vmaxss, vsqrtsd, vsqrtss,
        vcvtss2sd, vcvtsd2ss, vmovhlps, vmovlhps
    );
    macro_rules! unary {
        ($($op:ident),*) => { $( case!(c, $op(xmm0, xmm1)); case!(c, $op(ymm2, ymm3)); )* };
    }
    unary!(
        vsqrtpd, vsqrtps, vcvtdq2ps, vcvttps2dq, vcvtps2dq, vmovddup, vmovshdup, vpabsd, vpabsb,
        vmovapd, vmovups, vmovdqa, vmovdqu
    );
    // Widening and narrowing conversions, and the shifts by an xmm count.
    case!(c, vcvtdq2pd(ymm0, xmm1));
    case!(c, vcvtdq2pd(xmm0, xmm1));
    case!(c, vcvtps2pd(ymm2, xmm3));
    case!(c, vpmovsxbd(ymm4, xmm5));
    case!(c, vpmovzxbq(ymm4, xmm5));
    case!(c, vpmovsxwd(ymm6, xmm7));
    case!(c, vpmovsxdq(ymm6, xmm6));
    case!(c, vpmovzxwd(xmm6, xmm7));
    case!(c, vcvtpd2ps(xmm0, ymm1));
    case!(c, vcvttpd2dq(xmm2, ymm3));
    case!(c, vcvtpd2dq(xmm2, xmm3));
    case!(c, vpsllq(ymm0, ymm1, xmm2));
    case!(c, vpsrad(ymm3, ymm4, xmm5));
    case!(c, vpsrlw(xmm3, xmm4, xmm5));
    case!(c, vpsllvd(ymm0, ymm1, ymm2));
    case!(c, vpsllvq(xmm0, xmm1, xmm2));
    case!(c, vpsrlvd(ymm3, ymm4, ymm5));
    case!(c, vpsrlvq(ymm3, ymm4, ymm5));
    case!(c, vpsravd(ymm6, ymm7, ymm8));
    // FMA, all three operand orders.
    macro_rules! fma {
        ($($op:ident),*) => { $( case!(c, $op(xmm0, xmm1, xmm2)); case!(c, $op(ymm3, ymm4, ymm5)); )* };
    }
    fma!(
        vfmadd132pd,
        vfmadd213pd,
        vfmadd231pd,
        vfmadd231ps,
        vfmsub132pd,
        vfnmadd231pd,
        vfnmsub213ps
    );
    macro_rules! fma_scalar {
        ($($op:ident),*) => { $( case!(c, $op(xmm0, xmm1, xmm2)); )* };
    }
    fma_scalar!(
        vfmadd132sd,
        vfmadd213sd,
        vfmadd231sd,
        vfmadd231ss,
        vfnmadd231sd,
        vfmsub213sd
    );
    // Moves.
    case!(c, vmovsd_3(xmm0, xmm1, xmm2));
    case!(c, vmovss_3(xmm3, xmm4, xmm5));
    case!(c, vmovq(xmm0, xmm1));
    case!(c, vmovq(xmm2, rax));
    case!(c, vmovd(xmm3, ebx));
    case!(c, vmovd(ecx, xmm4));
    case!(c, vmovq(rdx, xmm5));
    case!(c, vbroadcastss(ymm0, xmm1));
    case!(c, vbroadcastsd(ymm2, xmm3));
    case!(c, vpbroadcastb(ymm4, xmm5));
    case!(c, vpbroadcastw(xmm4, xmm5));
    case!(c, vpbroadcastd(ymm6, xmm7));
    case!(c, vpbroadcastq(ymm8, xmm9));
    imm_cases!(c, [0, 1], vextracti128(xmm0, ymm1));
    imm_cases!(c, [0, 1], vextractf128(xmm2, ymm2));
    imm_cases!(c, [0, 1], vinserti128(ymm0, ymm1, xmm2));
    imm_cases!(c, [0, 1], vinsertf128(ymm3, ymm3, xmm4));
    imm_cases!(
        c,
        [0, 0x21, 0x13, 0x08, 0x80, 0x32],
        vperm2i128(ymm0, ymm1, ymm2)
    );
    imm_cases!(c, [0x1b, 0x4e, 0xd8, 0], vpermq(ymm0, ymm1));
    imm_cases!(c, [0x1b, 0xff], vpermpd(ymm2, ymm3));
    case!(c, vpermd(ymm0, ymm1, ymm2));
    case!(c, vpermps(ymm3, ymm4, ymm5));
    imm_cases!(c, [0, 5, 9, 15], vpermilpd(ymm0, ymm1));
    imm_cases!(c, [1, 2], vpermilpd(xmm0, xmm1));
    imm_cases!(c, [0x1b, 0x4e], vpermilps(ymm2, ymm3));
    imm_cases!(c, [0x1b, 0xe4, 0x93], vshufps(ymm0, ymm1, ymm2));
    imm_cases!(c, [0, 5, 10, 15], vshufpd(ymm0, ymm1, ymm2));
    imm_cases!(c, [0, 0x55, 0xaa, 0x0f, 0xf0], vpblendd(ymm0, ymm1, ymm2));
    imm_cases!(c, [3, 0xc], vpblendd(xmm0, xmm1, xmm2));
    imm_cases!(c, [0x55, 0x0f], vblendps(ymm3, ymm4, ymm5));
    imm_cases!(c, [5, 0xa], vblendpd(ymm3, ymm4, ymm5));
    imm_cases!(c, [0x33], vpblendw(ymm3, ymm4, ymm5));
    imm_cases!(c, [1, 8, 17], vpalignr(ymm0, ymm1, ymm2));
    imm_cases!(c, [0x1b, 0x4e], vpshufd(ymm0, ymm1));
    imm_cases!(c, [0x1b], vpshuflw(ymm0, ymm1));
    imm_cases!(c, [0x1b], vpshufhw(xmm0, xmm1));
    imm_cases!(c, [0, 3, 33, 64], vpslld(ymm0, ymm1));
    imm_cases!(c, [1, 15, 40], vpsrlq(ymm2, ymm3));
    imm_cases!(c, [7, 31], vpsrad(xmm2, xmm3));
    imm_cases!(c, [1, 8, 16], vpsrldq(ymm4, ymm5));
    imm_cases!(c, [3], vpslldq(ymm4, ymm5));
    for p in [0, 1, 2, 4, 6, 13, 14, 17, 21, 29, 31] {
        c.push((
            format!("vcmppd ymm {p}"),
            Box::new(move |a: &mut CodeAssembler| a.vcmppd(ymm0, ymm1, ymm2, p)),
        ));
        c.push((
            format!("vcmpps xmm {p}"),
            Box::new(move |a: &mut CodeAssembler| a.vcmpps(xmm0, xmm1, xmm2, p)),
        ));
        c.push((
            format!("vcmpsd {p}"),
            Box::new(move |a: &mut CodeAssembler| a.vcmpsd(xmm3, xmm4, xmm5, p)),
        ));
    }
    imm_cases!(c, [0, 1, 9, 12], vroundpd(ymm0, ymm1));
    imm_cases!(c, [0, 3], vroundsd(xmm0, xmm1, xmm2));
    case!(c, vblendvpd(ymm0, ymm1, ymm2, ymm3));
    case!(c, vblendvps(xmm0, xmm1, xmm2, xmm3));
    case!(c, vpblendvb(ymm4, ymm5, ymm6, ymm7));
    imm_cases!(c, [0, 3, 9], vpinsrd(xmm0, xmm1, eax));
    imm_cases!(c, [0, 1], vpinsrq(xmm0, xmm1, rbx));
    imm_cases!(c, [5], vpinsrb(xmm2, xmm3, ecx));
    imm_cases!(c, [0, 3], vpextrd(eax, xmm1));
    case!(c, vcvtsi2sd(xmm0, xmm1, rax));
    case!(c, vcvtsi2ss(xmm2, xmm3, ebx));
    case!(c, vcvttsd2si(rax, xmm1));
    case!(c, vucomisd(xmm0, xmm1));
    case!(c, vptest(ymm0, ymm1));
    case!(c, vptest(xmm2, xmm3));
    case!(c, vpmovmskb(eax, ymm1));
    case!(c, vpmovmskb(ebx, xmm2));
    case!(c, vmovmskpd(ecx, ymm3));
    case!(c, vmovmskps(edx, ymm4));
    case!(c, vzeroupper());
    case!(c, vzeroall());
    run_cases(c, 300, &no_fix);
}

#[test]
fn bit_manipulation_matches_the_cpu() {
    if !has_avx2() {
        eprintln!("skipped: this CPU has no BMI2");
        return;
    }
    let mut c: Vec<(String, Gen)> = Vec::new();
    macro_rules! sizes {
        ($($op:ident),*) => { $(
            case!(c, $op(rax, rbx));
            case!(c, $op(ecx, edx));
            case!(c, $op(si, di));
        )* };
    }
    sizes!(bsf, bsr, tzcnt, lzcnt);
    case!(c, bsf(rax, rax));
    case!(c, blsi(rax, rbx));
    case!(c, blsi(eax, ebx));
    case!(c, blsr(rcx, rdx));
    case!(c, blsmsk(esi, edi));
    case!(c, andn(rax, rbx, rcx));
    case!(c, andn(eax, ebx, ecx));
    case!(c, bzhi(rax, rbx, rcx));
    case!(c, bzhi(eax, ebx, ecx));
    case!(c, bextr(rdx, rsi, rdi));
    case!(c, bextr(edx, esi, edi));
    case!(c, sarx(rax, rbx, rcx));
    case!(c, sarx(eax, ebx, ecx));
    case!(c, shlx(rdx, rsi, rdi));
    case!(c, shlx(edx, esi, edi));
    case!(c, shrx(r8, r9, r10));
    case!(c, shrx(r8d, r9d, r10d));
    case!(c, rorx(rax, rbx, 13));
    case!(c, rorx(eax, ebx, 31));
    case!(c, pdep(rax, rbx, rcx));
    case!(c, pext(eax, ebx, ecx));
    run_cases(c, 1000, &no_fix);
}

/// `cmpxchg` and `xadd` (whose memory forms with `lock` the engine does as plain ones while
/// the program has one thread), on registers; `shld` and `shrd`.
#[test]
fn exchanges_and_double_shifts_match_the_cpu() {
    let mut c: Vec<(String, Gen)> = Vec::new();
    case!(c, cmpxchg(rbx, rcx));
    case!(c, cmpxchg(ebx, ecx));
    case!(c, cmpxchg(bx, cx));
    case!(c, cmpxchg(bl, cl));
    case!(c, cmpxchg(eax, ecx));
    case!(c, xadd(rbx, rcx));
    case!(c, xadd(ebx, ecx));
    case!(c, xadd(bl, cl));
    case!(c, xadd(edx, edx));
    case!(c, xchg(ebx, ecx));
    // Half of the states have rbx equal to rax (in each width): the exchange happens.
    run_cases(c, 1000, &|s: &mut State| {
        if s.g[7] & 1 == 0 {
            s.g[3] = s.g[0];
        }
    });
    let mut c: Vec<(String, Gen)> = Vec::new();
    for n in [0u32, 1, 3, 8, 15, 16, 31, 32, 33, 63, 64, 200] {
        c.push((
            format!("shld r64 {n}"),
            Box::new(move |a: &mut CodeAssembler| a.shld(rbx, rdx, n)),
        ));
        c.push((
            format!("shrd r32 {n}"),
            Box::new(move |a: &mut CodeAssembler| a.shrd(ebx, edx, n)),
        ));
        c.push((
            format!("shld r16 {n}"),
            Box::new(move |a: &mut CodeAssembler| a.shld(bx, dx, n)),
        ));
    }
    case!(c, shld(rsi, rdi, cl));
    case!(c, shrd(esi, edi, cl));
    case!(c, shrd(si, di, cl));
    run_cases(c, 1000, &no_fix);
}
