//! Differential tests: the `emulate` engine must produce the same event stream, program output
//! and exit status as the `step` engine (the reference), on every test kernel at -O0, -O2 and
//! -O3, and -O3 -march=haswell (AVX2, FMA, BMI) where this CPU has them (and -O3
//! -march=x86-64-v2 for the numeric kernels).

use ptrace_runner::ExitStatus;
use tests::{assert_engines_agree, compile_linked, options_from_main};

const LEVELS: [&[&str]; 3] = [&["-O0", "-g"], &["-O2", "-g"], &["-O3", "-g"]];
const V2: &[&str] = &["-O3", "-g", "-march=x86-64-v2"];
const AVX2: &[&str] = &["-O3", "-g", "-march=haswell"];

struct Outcome {
    instructions: u64,
    emulated: u64,
    exit: Option<ExitStatus>,
}

fn kernel(name: &str, flags: &[&str], args: &[&str], stdin: &[u8]) -> Outcome {
    let (libs, flags): (Vec<&str>, Vec<&str>) = flags.iter().partition(|f| f.starts_with("-l"));
    let flags = &flags[..];
    let k = compile_linked(name, flags, &libs);
    let opts = options_from_main(&k.path, args);
    let (step, emu) = assert_engines_agree(&opts, stdin, &format!("{name} {flags:?}"));
    let s = &emu.traced.summary;
    eprintln!(
        "{name} {flags:?}: {} instructions, {} emulated",
        s.instructions, s.emulated
    );
    assert!(
        step.traced.summary.instructions > 0,
        "{name} {flags:?}: nothing traced"
    );
    Outcome {
        instructions: s.instructions,
        emulated: s.emulated,
        exit: s.exit,
    }
}

/// Runs `name` at every optimization level (plus `extra` flags), checks the engines agree and
/// that the emulator ran at least `min_share` of the instructions itself.
fn levels(name: &str, extra: &[&str], args: &[&str], stdin: &[u8], min_share: f64, v2: bool) {
    let mut configs: Vec<Vec<&str>> = LEVELS.iter().map(|l| l.to_vec()).collect();
    if v2 {
        configs.push(V2.to_vec());
    }
    // glibc's AVX2 string functions and the compiler's AVX2 code, inside the engine.
    if tests::has_avx2() {
        configs.push(AVX2.to_vec());
    }
    for mut flags in configs {
        flags.extend_from_slice(extra);
        let o = kernel(name, &flags, args, stdin);
        assert!(o.exit.is_some(), "{name} {flags:?}: no exit status");
        let share = o.emulated as f64 / o.instructions.max(1) as f64;
        assert!(
            share >= min_share,
            "{name} {flags:?}: only {:.1}% of {} instructions emulated",
            100.0 * share,
            o.instructions
        );
    }
}

#[test]
fn args() {
    levels("args", &[], &["a", "b c", ""], b"", 0.9, false);
}

#[test]
fn busy() {
    levels("busy", &[], &[], b"", 0.99, false);
}

#[test]
fn crash() {
    for flags in LEVELS {
        let o = kernel("crash", flags, &[], b"");
        assert_eq!(o.exit, Some(ExitStatus::Signal(libc::SIGSEGV)), "{flags:?}");
    }
}

#[test]
fn fork() {
    levels("fork", &[], &[], b"", 0.5, false);
}

#[test]
fn libcalls() {
    levels("libcalls", &["-fno-builtin"], &[], b"", 0.9, false);
}

/// Atomic read-modify-writes (done as plain ones while the program has one thread), and
/// library code using them (rand's lock) or double shifts (strtod).
#[test]
fn atomics() {
    levels("atomics", &[], &[], b"", 0.99, false);
}

/// libm's functions, which save, set and restore MXCSR around their work (the emulate engine
/// runs them inside itself), under two rounding modes.
#[test]
fn mathfuncs() {
    levels("mathfuncs", &["-lm"], &[], b"", 0.9, true);
}

/// String and memory functions the emulate engine performs itself: the same events and output
/// as when the step engine runs them natively.
#[test]
fn strfuncs() {
    levels("strfuncs", &["-fno-builtin"], &[], b"", 0.9, false);
}

#[test]
fn r#loop() {
    levels("loop", &[], &[], b"", 0.99, false);
}

#[test]
fn rep() {
    levels("rep", &[], &[], b"", 0.9, false);
}

#[test]
fn signal() {
    levels("signal", &[], &[], b"", 0.9, false);
}

#[test]
fn stdio() {
    for flags in LEVELS {
        let o = kernel("stdio", flags, &[], b"1 2 3\n40\n");
        assert_eq!(o.exit, Some(ExitStatus::Code(7)), "{flags:?}");
    }
}

#[test]
fn threads() {
    for mut flags in LEVELS.iter().map(|l| l.to_vec()) {
        flags.push("-pthread");
        let k = compile_linked("threads", &flags, &[]);
        let opts = options_from_main(&k.path, &[]);
        let what = format!("threads {flags:?}");
        let (_, emu) = tests::assert_engines_agree_with(&opts, b"", &what, true);
        let s = &emu.traced.summary;
        assert_eq!(s.exit, Some(ExitStatus::Code(0)), "{what}");
        assert!(s.emulated * 10 >= s.instructions * 9, "{what}: {s:?}");
        assert_eq!(
            String::from_utf8_lossy(&emu.stdout),
            "total=79800\n",
            "{what}"
        );
    }
}

#[test]
fn matmul() {
    levels("matmul", &[], &["6"], b"", 0.99, true);
}

#[test]
fn stencil() {
    levels("stencil", &["-lm"], &[], b"", 0.99, true);
}

#[test]
fn vecint() {
    levels("vecint", &[], &[], b"", 0.99, true);
}

#[test]
fn divshift() {
    levels("divshift", &[], &[], b"", 0.99, true);
}

#[test]
fn compare() {
    levels("compare", &[], &[], b"", 0.99, true);
}

#[test]
fn floats() {
    levels("floats", &["-lm"], &[], b"", 0.95, true);
}

// ---------------------------------------------------------------------------------------------
// Randomized instruction-level differential test.
//
// Random sequences of the instructions the emulator covers (register and memory operands into a
// scratch buffer that spans a page boundary) are written as an assembly file, linked with the
// `randseq` harness, and run under both engines. Every instruction's register writes are in the
// events; after each flag-writing instruction the flags are captured into r14 (masked to the
// flags the CPU defines for it, or all of them on AMD CPUs whose undefined flags the emulator
// reproduces), after each SSE instruction the written xmm register is moved into r14 (both
// halves), and the harness prints the scratch buffer's hash and a final register dump.

struct Rng(fastrand::Rng);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.u64(..)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0.u64(..n)
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn int(&mut self) -> u64 {
        const EDGES: [u64; 12] = [
            0,
            1,
            u64::MAX,
            0x7f,
            0x80,
            0xff,
            0x7fff,
            0x8000,
            0x7fff_ffff,
            0x8000_0000,
            0x7fff_ffff_ffff_ffff,
            0x8000_0000_0000_0000,
        ];
        match self.below(4) {
            0 => *self.pick(&EDGES),
            1 => self.below(100),
            _ => self.next(),
        }
    }
}

const R64: [&str; 12] = [
    "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10", "r11", "r12",
];
const R32: [&str; 12] = [
    "eax", "ebx", "ecx", "edx", "esi", "edi", "ebp", "r8d", "r9d", "r10d", "r11d", "r12d",
];
const R16: [&str; 12] = [
    "ax", "bx", "cx", "dx", "si", "di", "bp", "r8w", "r9w", "r10w", "r11w", "r12w",
];
const R8: [&str; 12] = [
    "al", "bl", "cl", "dl", "sil", "dil", "bpl", "r8b", "r9b", "r10b", "r11b", "r12b",
];
const CC: [&str; 16] = [
    "o", "no", "b", "ae", "e", "ne", "be", "a", "s", "ns", "p", "np", "l", "ge", "le", "g",
];
const STATUS: u64 = 0x8d5;
const PF_: u64 = 0x4;
const AF_: u64 = 0x10;
const ZF_: u64 = 0x40;
const SF_: u64 = 0x80;
const OF_: u64 = 0x800;

struct SeqGen {
    rng: Rng,
    out: String,
    /// Compare the flags the manuals leave undefined too (AMD: the emulator pins them).
    exact: bool,
    label: usize,
}

impl SeqGen {
    fn reg(&mut self, size: u8) -> &'static str {
        let k = self.rng.below(12) as usize;
        match size {
            1 => R8[k],
            2 => R16[k],
            4 => R32[k],
            _ => R64[k],
        }
    }

    fn size(&mut self) -> u8 {
        *self.rng.pick(&[1, 2, 4, 8, 8, 4])
    }

    fn ptr(size: u8) -> &'static str {
        match size {
            1 => "byte ptr",
            2 => "word ptr",
            4 => "dword ptr",
            8 => "qword ptr",
            _ => "xmmword ptr",
        }
    }

    /// A memory operand in the scratch buffer; `align` forces natural alignment.
    fn mem(&mut self, size: u8, align: bool) -> String {
        let sz = size.max(1) as u64;
        let p = Self::ptr(size);
        match self.rng.below(10) {
            0 if !align => {
                // Straddles (or touches) the page boundary at 4096.
                let d = 4096 - sz + self.rng.below(2 * sz);
                format!("{p} [r15 + {d}]")
            }
            1 | 2 => {
                let k = self.rng.below(16);
                let scale = *self.rng.pick(&[1u64, 2, 4, 8]);
                {
                    let t = format!("mov r13d, {k}");
                    self.line(&t);
                }
                let mut d = self.rng.below(8000 - 16 * 8);
                if align {
                    d &= !(sz - 1);
                    let k = k & !(sz.min(16) / scale.min(sz) - 1).min(15);
                    {
                        let t = format!("mov r13d, {k}");
                        self.line(&t);
                    }
                    // Keep r13 * scale aligned: use scale = size (at most 8) when aligned.
                    let s = sz.min(8);
                    return format!("{p} [r15 + r13*{s} + {d}]");
                }
                format!("{p} [r15 + r13*{scale} + {d}]")
            }
            _ => {
                let mut d = self.rng.below(8192 - 16);
                if align {
                    d &= !(sz - 1);
                }
                format!("{p} [r15 + {d}]")
            }
        }
    }

    fn imm(&mut self, size: u8) -> i64 {
        let v = self.rng.int() as i64;
        match size {
            1 => v as i8 as i64,
            2 => v as i16 as i64,
            _ => v as i32 as i64,
        }
    }

    fn line(&mut self, s: &str) {
        self.out.push_str("    ");
        self.out.push_str(s);
        self.out.push('\n');
    }

    /// Captures the flags (those in `mask`) into r14.
    fn capture_flags(&mut self, undefined: u64) {
        let mask = if self.exact {
            STATUS | 0x400
        } else {
            (STATUS | 0x400) & !undefined
        };
        self.line("pushfq");
        {
            let t = format!("and qword ptr [rsp], {mask}");
            self.line(&t);
        }
        self.line("pop r14");
    }

    /// Random defined flags (DF clear) for the flag readers that follow.
    fn random_flags(&mut self) {
        let f = (self.rng.next() & STATUS) | 0x202;
        {
            let t = format!("push {f}");
            self.line(&t);
        }
        self.line("popfq");
    }

    fn capture_xmm(&mut self, x: u64) {
        {
            let t = format!("movq r14, xmm{x}");
            self.line(&t);
        }
        {
            let t = format!("pextrq r14, xmm{x}, 1");
            self.line(&t);
        }
    }

    fn rm(&mut self, size: u8) -> String {
        if self.rng.chance(40) {
            self.mem(size, false)
        } else {
            self.reg(size).to_string()
        }
    }

    fn gpr_element(&mut self) {
        let g = &mut self.rng;
        let which = g.below(24);
        match which {
            0..=4 => {
                let op = *self
                    .rng
                    .pick(&["add", "adc", "sub", "sbb", "and", "or", "xor", "cmp"]);
                let s = self.size();
                if matches!(op, "adc" | "sbb") && self.rng.chance(50) {
                    self.random_flags();
                }
                let form = self.rng.below(5);
                let text = match form {
                    0 => format!("{op} {}, {}", self.reg(s), self.reg(s)),
                    1 => format!("{op} {}, {}", self.reg(s), self.imm(s)),
                    2 => format!("{op} {}, {}", self.reg(s), self.mem(s, false)),
                    3 => format!("{op} {}, {}", self.mem(s, false), self.reg(s)),
                    _ => format!("{op} {}, {}", self.mem(s, false), self.imm(s)),
                };
                self.line(&text);
                let undefined = if matches!(op, "and" | "or" | "xor") {
                    AF_
                } else {
                    0
                };
                self.capture_flags(undefined);
            }
            5 => {
                let s = self.size();
                let text = match self.rng.below(3) {
                    0 => format!("test {}, {}", self.reg(s), self.reg(s)),
                    1 => format!("test {}, {}", self.rm(s), self.imm(s)),
                    _ => format!("test {}, {}", self.mem(s, false), self.reg(s)),
                };
                self.line(&text);
                self.capture_flags(AF_);
            }
            6 => {
                let op = *self.rng.pick(&["inc", "dec", "neg", "not"]);
                let s = self.size();
                let t = self.rm(s);
                {
                    let t = format!("{op} {t}");
                    self.line(&t);
                }
                if op != "not" {
                    self.capture_flags(0);
                }
            }
            7 | 8 => {
                let op = *self.rng.pick(&["shl", "shr", "sar", "rol", "ror", "sal"]);
                let s = self.size();
                let t = self.rm(s);
                let count = match self.rng.below(4) {
                    0 => "cl".to_string(),
                    1 => "1".to_string(),
                    2 => self.rng.below(8).to_string(),
                    _ => self.rng.below(70).to_string(),
                };
                {
                    let t = format!("{op} {t}, {count}");
                    self.line(&t);
                }
                let undefined = if op.starts_with('r') { OF_ } else { OF_ | AF_ };
                self.capture_flags(undefined);
            }
            9 => {
                let s = *self.rng.pick(&[2u8, 4, 8]);
                let d = self.reg(s);
                let text = if self.rng.chance(50) {
                    format!("imul {d}, {}", self.rm(s))
                } else {
                    let src = self.rm(s);
                    format!("imul {d}, {src}, {}", self.imm(s.min(4)))
                };
                self.line(&text);
                self.capture_flags(SF_ | ZF_ | AF_ | PF_);
            }
            10 => {
                let op = *self.rng.pick(&["mul", "imul"]);
                let s = self.size();
                let t = self.rm(s);
                {
                    let t = format!("{op} {t}");
                    self.line(&t);
                }
                self.capture_flags(SF_ | ZF_ | AF_ | PF_);
            }
            11 => self.division(),
            12 | 13 => {
                let s = self.size();
                let text = match self.rng.below(6) {
                    0 => format!("mov {}, {}", self.reg(s), self.reg(s)),
                    1 => format!("mov {}, {}", self.reg(s), self.imm(s)),
                    2 => format!("mov {}, {}", self.reg(s), self.mem(s, false)),
                    3 => format!("mov {}, {}", self.mem(s, false), self.reg(s)),
                    4 => format!("mov {}, {}", self.mem(s, false), self.imm(s)),
                    _ => format!("movabs {}, {}", self.reg(8), self.rng.next() as i64),
                };
                self.line(&text);
            }
            14 => {
                let (d, src) = match self.rng.below(5) {
                    0 => (
                        {
                            let z = *self.rng.pick(&[2u8, 4, 8]);
                            self.reg(z)
                        },
                        self.rm(1),
                    ),
                    1 => (
                        {
                            let z = *self.rng.pick(&[4u8, 8]);
                            self.reg(z)
                        },
                        self.rm(2),
                    ),
                    2 => ("MOVSXD", self.rm(4)),
                    _ => (
                        {
                            let z = *self.rng.pick(&[2u8, 4, 8]);
                            self.reg(z)
                        },
                        self.rm(1),
                    ),
                };
                let text = if d == "MOVSXD" {
                    format!("movsxd {}, {src}", self.reg(8))
                } else if self.rng.chance(50) {
                    format!("movzx {d}, {src}")
                } else {
                    format!("movsx {d}, {src}")
                };
                self.line(&text);
            }
            15 => {
                let s = *self.rng.pick(&[2u8, 4, 8]);
                let d = self.reg(s);
                let b = self.reg(8);
                let text = match self.rng.below(3) {
                    0 => format!("lea {d}, [{b} + {}]", self.imm(4)),
                    1 => {
                        let i = self.reg(8);
                        let sc = self.rng.pick(&[1, 2, 4, 8]);
                        format!("lea {d}, [{b} + {i}*{sc} + {}]", self.imm(4))
                    }
                    _ => format!("lea {d}, [r15 + {}]", self.rng.below(9000)),
                };
                self.line(&text);
            }
            16 => {
                self.random_flags();
                let cc = *self.rng.pick(&CC);
                let text = if self.rng.chance(60) {
                    let s = *self.rng.pick(&[2u8, 4, 8]);
                    format!("cmov{cc} {}, {}", self.reg(s), self.rm(s))
                } else {
                    format!("set{cc} {}", self.rm(1))
                };
                self.line(&text);
            }
            17 => {
                let text = match self.rng.below(6) {
                    0 => {
                        let s = self.size();
                        format!("xchg {}, {}", self.reg(s), self.reg(s))
                    }
                    1 => format!("bswap {}", {
                        let z = *self.rng.pick(&[4u8, 8]);
                        self.reg(z)
                    }),
                    2 => format!("popcnt {}, {}", self.reg(8), self.rm(8)),
                    3 => format!("popcnt {}, {}", self.reg(4), self.rm(4)),
                    4 => self
                        .rng
                        .pick(&["cbw", "cwde", "cdqe", "cwd", "cdq", "cqo"])
                        .to_string(),
                    _ => {
                        self.random_flags();
                        self.rng
                            .pick(&["clc", "stc", "cmc", "lahf", "sahf"])
                            .to_string()
                    }
                };
                let flags = text.starts_with("popcnt")
                    || matches!(text.as_str(), "clc" | "stc" | "cmc" | "sahf");
                self.line(&text);
                if flags {
                    self.capture_flags(0);
                }
            }
            18 => {
                let op = *self.rng.pick(&["bt", "bts", "btr", "btc"]);
                let s = *self.rng.pick(&[2u8, 4, 8]);
                let text = match self.rng.below(3) {
                    0 => format!("{op} {}, {}", self.reg(s), self.reg(s)),
                    1 => format!("{op} {}, {}", self.reg(s), self.rng.below(64)),
                    _ => format!("{op} {}, {}", self.mem(s, false), self.rng.below(64)),
                };
                self.line(&text);
                self.capture_flags(OF_ | SF_ | AF_ | PF_);
            }
            19 => {
                let src = match self.rng.below(3) {
                    0 => self.reg(8).to_string(),
                    1 => self.imm(4).to_string(),
                    _ => self.mem(8, false),
                };
                {
                    let t = format!("push {src}");
                    self.line(&t);
                }
                let d = self.reg(8);
                {
                    let t = format!("pop {d}");
                    self.line(&t);
                }
            }
            20 => {
                // Conditional branch over one instruction, or a short counted loop.
                self.random_flags();
                let l = self.label;
                self.label += 1;
                if self.rng.chance(60) {
                    let cc = *self.rng.pick(&CC);
                    {
                        let t = format!("j{cc} .Lskip{l}");
                        self.line(&t);
                    }
                    let (d, s) = (self.reg(8), self.reg(8));
                    {
                        let t = format!("lea {d}, [{d} + {s}*2 + 7]");
                        self.line(&t);
                    }
                    self.out.push_str(&format!(".Lskip{l}:\n"));
                } else {
                    let n = 1 + self.rng.below(5);
                    {
                        let t = format!("mov r13d, {n}");
                        self.line(&t);
                    }
                    self.out.push_str(&format!(".Lloop{l}:\n"));
                    let (d, s) = (self.reg(8), self.reg(8));
                    {
                        let t = format!("add {d}, {s}");
                        self.line(&t);
                    }
                    self.line("dec r13d");
                    {
                        let t = format!("jnz .Lloop{l}");
                        self.line(&t);
                    }
                }
            }
            21 => {
                // A call and return, direct or through a register or memory.
                let l = self.label;
                self.label += 1;
                match self.rng.below(3) {
                    0 => self.line(&format!("call .Lfn{l}")),
                    1 => {
                        {
                            let t = format!("lea r13, [rip + .Lfn{l}]");
                            self.line(&t);
                        }
                        self.line("call r13");
                    }
                    _ => {
                        {
                            let t = format!("lea r13, [rip + .Lfn{l}]");
                            self.line(&t);
                        }
                        self.line("mov qword ptr [r15 + 8184], r13");
                        self.line("call qword ptr [r15 + 8184]");
                    }
                }
                {
                    let t = format!("jmp .Lafter{l}");
                    self.line(&t);
                }
                self.out.push_str(&format!(".Lfn{l}:\n"));
                let d = self.reg(8);
                {
                    let t = format!("lea {d}, [{d} + 1]");
                    self.line(&t);
                }
                self.line("ret");
                self.out.push_str(&format!(".Lafter{l}:\n"));
            }
            22 => {
                // A REP string instruction over the scratch buffer (DF is always clear here).
                let ins = *self.rng.pick(&[
                    "stosb", "stosw", "stosd", "stosq", "movsb", "movsw", "movsd", "movsq",
                ]);
                let n = self.rng.below(6);
                {
                    let t = format!("lea rdi, [r15 + {}]", self.rng.below(3000));
                    self.line(&t);
                }
                {
                    let t = format!("lea rsi, [r15 + {}]", 4000 + self.rng.below(3000));
                    self.line(&t);
                }
                {
                    let t = format!("mov ecx, {n}");
                    self.line(&t);
                }
                let rep = if self.rng.chance(80) { "rep " } else { "" };
                {
                    let t = format!("{rep}{ins}");
                    self.line(&t);
                }
            }
            _ => {
                // High-byte registers (no REX prefix allowed with them).
                let hi = *self.rng.pick(&["ah", "bh", "ch", "dh"]);
                let lo = *self
                    .rng
                    .pick(&["al", "bl", "cl", "dl", "ah", "bh", "ch", "dh"]);
                let text = match self.rng.below(4) {
                    0 => format!("mov {hi}, {lo}"),
                    1 => format!("add {hi}, {lo}"),
                    2 => format!(
                        "movzx {}, {hi}",
                        ["eax", "ebx", "ecx", "edx"][self.rng.below(4) as usize]
                    ),
                    _ => format!("xchg {hi}, {lo}"),
                };
                self.line(&text);
                if text.starts_with("add") {
                    self.capture_flags(0);
                }
            }
        }
    }

    /// Division with a divisor that is neither zero nor -1 and a dividend whose high half is
    /// zero (unsigned) or the sign of the low half (signed): never a #DE.
    fn division(&mut self) {
        let s = self.size();
        let signed = self.rng.chance(50);
        let divisor = ["rbx", "rsi", "r9", "r12"][self.rng.below(4) as usize];
        {
            let t = format!("and {divisor}, -3");
            self.line(&t);
        }
        {
            let t = format!("or {divisor}, 1");
            self.line(&t);
        }
        let sub = divisor_name(divisor, s);
        let operand = if self.rng.chance(40) {
            let m = self.mem(s, false);
            {
                let t = format!("mov {m}, {sub}");
                self.line(&t);
            }
            m
        } else {
            sub
        };
        match (s, signed) {
            (1, false) => self.line("movzx eax, al"),
            (1, true) => self.line("cbw"),
            (2, false) | (4, false) | (8, false) => self.line("xor edx, edx"),
            (2, true) => self.line("cwd"),
            (4, true) => self.line("cdq"),
            _ => self.line("cqo"),
        }
        let op = if signed { "idiv" } else { "div" };
        {
            let t = format!("{op} {operand}");
            self.line(&t);
        }
        self.capture_flags(STATUS);
    }

    fn sse_element(&mut self) {
        let x = self.rng.below(16);
        let y = self.rng.below(16);
        let which = self.rng.below(12);
        let (text, writes_x, flags) = match which {
            0..=3 => {
                let op = *self.rng.pick(&SSE_BIN);
                let src = if self.rng.chance(30) {
                    let size = bin_mem_size(op);
                    if matches!(op, "movhlps" | "movlhps") {
                        format!("xmm{y}")
                    } else {
                        self.mem(size, size == 16 && op != "movddup")
                    }
                } else {
                    format!("xmm{y}")
                };
                (format!("{op} xmm{x}, {src}"), true, None)
            }
            4 => {
                let op = *self
                    .rng
                    .pick(&["movaps", "movups", "movapd", "movupd", "movdqa", "movdqu"]);
                let aligned = op.contains('a');
                match self.rng.below(3) {
                    0 => (format!("{op} xmm{x}, xmm{y}"), true, None),
                    1 => (
                        format!("{op} xmm{x}, {}", self.mem(16, aligned)),
                        true,
                        None,
                    ),
                    _ => (
                        format!("{op} {}, xmm{y}", self.mem(16, aligned)),
                        false,
                        None,
                    ),
                }
            }
            5 => {
                let op = *self
                    .rng
                    .pick(&["movss", "movsd", "movq", "movd", "movlpd", "movhpd"]);
                let size = if matches!(op, "movss" | "movd") { 4 } else { 8 };
                match self.rng.below(4) {
                    0 if matches!(op, "movss" | "movsd" | "movq") => {
                        (format!("{op} xmm{x}, xmm{y}"), true, None)
                    }
                    0 | 1 => (
                        format!("{op} xmm{x}, {}", self.mem(size, false)),
                        true,
                        None,
                    ),
                    2 => (
                        format!("{op} {}, xmm{y}", self.mem(size, false)),
                        false,
                        None,
                    ),
                    _ if matches!(op, "movq" | "movd") => {
                        let r = self.reg(size);
                        if self.rng.chance(50) {
                            (format!("{op} xmm{x}, {r}"), true, None)
                        } else {
                            (format!("{op} {r}, xmm{y}"), false, None)
                        }
                    }
                    _ => (
                        format!("{op} xmm{x}, {}", self.mem(size, false)),
                        true,
                        None,
                    ),
                }
            }
            6 => {
                let op = *self.rng.pick(&["cmpss", "cmpsd", "cmpps", "cmppd"]);
                let p = self.rng.below(8);
                let src = if self.rng.chance(30) {
                    let size = match op {
                        "cmpss" => 4,
                        "cmpsd" => 8,
                        _ => 16,
                    };
                    self.mem(size, size == 16)
                } else {
                    format!("xmm{y}")
                };
                (format!("{op} xmm{x}, {src}, {p}"), true, None)
            }
            7 => {
                let op = *self.rng.pick(&[
                    "shufps", "shufpd", "pshufd", "pshuflw", "pshufhw", "palignr", "pblendw",
                    "blendps", "blendpd", "roundsd", "roundss", "roundpd", "roundps",
                ]);
                let imm = match op {
                    "shufpd" | "blendpd" => self.rng.below(4),
                    "blendps" | "roundsd" | "roundss" | "roundpd" | "roundps" => self.rng.below(16),
                    "palignr" => self.rng.below(32),
                    _ => self.rng.below(256),
                };
                let src = if self.rng.chance(30) {
                    let size = match op {
                        "roundsd" => 8,
                        "roundss" => 4,
                        _ => 16,
                    };
                    self.mem(size, size == 16)
                } else {
                    format!("xmm{y}")
                };
                (format!("{op} xmm{x}, {src}, {imm}"), true, None)
            }
            8 => {
                let op = *self.rng.pick(&[
                    "psllw", "pslld", "psllq", "psrlw", "psrld", "psrlq", "psraw", "psrad",
                    "pslldq", "psrldq",
                ]);
                let n = *self.rng.pick(&[0, 1, 3, 7, 8, 15, 16, 31, 33, 63, 64, 100]);
                (format!("{op} xmm{x}, {n}"), true, None)
            }
            9 => {
                let op = *self
                    .rng
                    .pick(&["comisd", "ucomisd", "comiss", "ucomiss", "ptest"]);
                let src = if self.rng.chance(30) {
                    let size = match op {
                        "comisd" | "ucomisd" => 8,
                        "ptest" => 16,
                        _ => 4,
                    };
                    self.mem(size, size == 16)
                } else {
                    format!("xmm{y}")
                };
                (format!("{op} xmm{x}, {src}"), false, Some(0))
            }
            10 => {
                let s = *self.rng.pick(&[4u8, 8]);
                match self.rng.below(3) {
                    0 => {
                        let op =
                            *self
                                .rng
                                .pick(&["cvttsd2si", "cvtsd2si", "cvttss2si", "cvtss2si"]);
                        let src = if self.rng.chance(30) {
                            self.mem(if op.contains("sd") { 8 } else { 4 }, false)
                        } else {
                            format!("xmm{y}")
                        };
                        (format!("{op} {}, {src}", self.reg(s)), false, None)
                    }
                    _ => {
                        let op = *self.rng.pick(&["cvtsi2sd", "cvtsi2ss"]);
                        let src = if self.rng.chance(30) {
                            self.mem(s, false)
                        } else {
                            self.reg(s).to_string()
                        };
                        (format!("{op} xmm{x}, {src}"), true, None)
                    }
                }
            }
            _ => {
                let k = self.rng.below(16);
                match self.rng.below(6) {
                    0 => {
                        let op = *self.rng.pick(&["movmskpd", "movmskps", "pmovmskb"]);
                        (format!("{op} {}, xmm{y}", self.reg(4)), false, None)
                    }
                    1 => (
                        format!("pextrw {}, xmm{y}, {}", self.reg(4), k % 8),
                        false,
                        None,
                    ),
                    2 => (
                        format!("pinsrw xmm{x}, {}, {}", self.reg(4), k % 8),
                        true,
                        None,
                    ),
                    3 => (
                        format!("pextrd {}, xmm{y}, {}", self.reg(4), k % 4),
                        false,
                        None,
                    ),
                    4 => (
                        format!("pinsrq xmm{x}, {}, {}", self.reg(8), k % 2),
                        true,
                        None,
                    ),
                    _ => (
                        format!("pextrq {}, xmm{y}, {}", self.mem(8, false), k % 2),
                        false,
                        None,
                    ),
                }
            }
        };
        self.line(&text);
        if writes_x {
            self.capture_xmm(x);
        }
        if let Some(undefined) = flags {
            self.capture_flags(undefined);
        }
    }

    fn sequence(&mut self, n: usize, elements: usize) {
        let name = format!("seq_{n}");
        self.out.push_str(&format!(".globl {name}\n{name}:\n"));
        for r in ["rbx", "rbp", "r12", "r13", "r14", "r15"] {
            {
                let t = format!("push {r}");
                self.line(&t);
            }
        }
        self.line("mov r15, rdi");
        for k in 0..16 {
            {
                let t = format!("movdqu xmm{k}, xmmword ptr [r15 + {}]", 6000 + 16 * k);
                self.line(&t);
            }
        }
        for r in R64 {
            let v = self.rng.int() as i64;
            {
                let t = format!("movabs {r}, {v}");
                self.line(&t);
            }
        }
        self.line("xor r13d, r13d");
        self.line("xor r14d, r14d");
        self.random_flags();
        for _ in 0..elements {
            if self.rng.chance(35) {
                self.sse_element();
            } else {
                self.gpr_element();
            }
        }
        for (k, r) in R64.iter().chain(["r13", "r14"].iter()).enumerate() {
            {
                let t = format!("mov qword ptr [r15 + {}], {r}", 8192 + 8 * k);
                self.line(&t);
            }
        }
        for k in 0..16 {
            {
                let t = format!("movdqu xmmword ptr [r15 + {}], xmm{k}", 8192 + 112 + 16 * k);
                self.line(&t);
            }
        }
        for r in ["r15", "r14", "r13", "r12", "rbp", "rbx"] {
            {
                let t = format!("pop {r}");
                self.line(&t);
            }
        }
        self.line("ret");
    }
}

/// Bytes of the memory operand of a two-operand SSE instruction.
fn bin_mem_size(op: &str) -> u8 {
    match op {
        "cvtss2sd" | "pmovsxwq" | "pmovzxbd" => 4,
        "cvtsd2ss" | "cvtdq2pd" | "cvtps2pd" | "movddup" | "pmovsxbw" | "pmovzxdq" => 8,
        "pmovzxbq" => 2,
        _ if op.starts_with('p') => 16,
        _ if op.ends_with("ss") => 4,
        _ if op.ends_with("sd") => 8,
        _ => 16,
    }
}

fn divisor_name(r: &str, size: u8) -> String {
    let k = R64.iter().position(|x| *x == r).unwrap_or(0);
    match size {
        1 => R8[k],
        2 => R16[k],
        4 => R32[k],
        _ => R64[k],
    }
    .to_string()
}

const SSE_BIN: [&str; 72] = [
    "addss",
    "addsd",
    "addps",
    "addpd",
    "subss",
    "subsd",
    "subps",
    "subpd",
    "mulss",
    "mulsd",
    "mulps",
    "mulpd",
    "divss",
    "divsd",
    "divps",
    "divpd",
    "minsd",
    "maxsd",
    "minps",
    "maxpd",
    "sqrtsd",
    "sqrtss",
    "sqrtpd",
    "cvtss2sd",
    "cvtsd2ss",
    "cvtdq2pd",
    "cvtdq2ps",
    "cvtps2pd",
    "cvtpd2ps",
    "cvttps2dq",
    "cvttpd2dq",
    "cvtps2dq",
    "andpd",
    "andnpd",
    "orps",
    "xorps",
    "unpcklps",
    "unpckhpd",
    "unpcklpd",
    "movhlps",
    "movlhps",
    "movddup",
    "paddb",
    "paddw",
    "paddd",
    "paddq",
    "psubd",
    "psubq",
    "paddusb",
    "psubsw",
    "pmullw",
    "pmuludq",
    "pmaddwd",
    "pcmpeqd",
    "pcmpgtb",
    "pcmpgtd",
    "pand",
    "pandn",
    "por",
    "pxor",
    "punpcklbw",
    "punpckhdq",
    "punpcklqdq",
    "packsswb",
    "packuswb",
    "psllq",
    "psrad",
    "pshufb",
    "pmulld",
    "pminsd",
    "pmovsxbw",
    "pmovzxdq",
];

fn is_amd() -> bool {
    let r = std::arch::x86_64::__cpuid(0);
    (r.ebx, r.edx, r.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163)
}

/// Generates `count` sequences of `elements` random elements from `seed` as an assembly file.
fn random_program(seed: u64, count: usize, elements: usize) -> String {
    let mut g = SeqGen {
        rng: Rng(fastrand::Rng::with_seed(seed)),
        out: String::from(".intel_syntax noprefix\n.text\n"),
        exact: is_amd(),
        label: 0,
    };
    for n in 0..count {
        g.sequence(n, elements);
    }
    g.out
        .push_str(".section .rodata\n.globl nseq\nnseq: .long ");
    g.out.push_str(&format!(
        "{count}\n.balign 8\n.globl seq_table\nseq_table:\n"
    ));
    for n in 0..count {
        g.out.push_str(&format!("    .quad seq_{n}\n"));
    }
    // The scratch buffer's initial contents: random words and special values (zeros, signed
    // zeros, infinities, NaNs, denormals, extremes of both float formats).
    const SPECIAL: [u64; 12] = [
        0,
        0x8000_0000_0000_0000,
        0x3ff0_0000_0000_0000,
        0x7ff0_0000_0000_0000,
        0x7ff8_0000_0000_0000,
        1,
        0x7fef_ffff_ffff_ffff,
        u64::MAX,
        0x3f80_0000_7f80_0000,
        0x0000_0001_ff80_0000,
        0x7fc0_0000_4f00_0000,
        0x8000_0000,
    ];
    g.out
        .push_str(".balign 4096\n.globl seq_pattern\nseq_pattern:\n");
    for _ in 0..3 * 4096 / 8 {
        let v = if g.rng.chance(25) {
            *g.rng.pick(&SPECIAL)
        } else {
            g.rng.next()
        };
        g.out.push_str(&format!("    .quad {v:#x}\n"));
    }
    g.out.push_str(".section .note.GNU-stack,\"\",@progbits\n");
    g.out
}

/// Sequences per program and random elements (instructions, plus their set-up) per sequence.
const SEQUENCES: usize = 25;
const ELEMENTS: usize = 60;

fn random_sequences(seed: u64) {
    let dir = tempfile::Builder::new()
        .prefix("polyprof-randseq-")
        .tempdir()
        .expect("creating a temporary directory");
    let asm = dir.path().join(format!("seq{seed}.s"));
    std::fs::write(&asm, random_program(seed, SEQUENCES, ELEMENTS))
        .expect("writing the assembly file");
    let asm_path = asm.to_string_lossy().into_owned();
    let k = compile_linked("randseq", &["-O1", "-g", "-fno-builtin"], &[&asm_path]);
    let opts = options_from_main(&k.path, &[]);
    let what = format!("random sequences, seed {seed} ({asm_path})");
    if std::env::var_os("POLYPROF_KEEP_RANDSEQ").is_some() {
        let _ = std::fs::copy(&asm, format!("/tmp/randseq{seed}.s"));
        let _ = std::fs::copy(&k.path, format!("/tmp/randseq{seed}"));
    }
    let (step, emu) = tests::assert_engines_agree(&opts, b"", &what);
    assert_eq!(
        emu.traced.summary.exit,
        Some(ExitStatus::Code(0)),
        "{what}: the harness failed"
    );
    assert_eq!(
        step.stdout.len(),
        SEQUENCES * 3 * 4096,
        "{what}: the harness did not run every sequence"
    );
    let s = &emu.traced.summary;
    assert_eq!(s.exit, Some(ExitStatus::Code(0)), "{what}");
    eprintln!(
        "{what}: {} instructions, {} emulated",
        s.instructions, s.emulated
    );
    assert!(
        s.emulated * 10 >= s.instructions * 6,
        "{what}: only {} of {} instructions emulated",
        s.emulated,
        s.instructions
    );
    drop(dir);
}

#[test]
fn random_sequences_seed_1() {
    random_sequences(1);
}

#[test]
fn random_sequences_seed_2() {
    random_sequences(2);
}

#[test]
fn random_sequences_seed_3() {
    random_sequences(3);
}

#[test]
fn random_sequences_seed_4() {
    random_sequences(4);
}

#[test]
fn random_sequences_seed_5() {
    random_sequences(5);
}

#[test]
fn random_sequences_seed_6() {
    random_sequences(6);
}

/// With `trace_libs` the emulator also runs libc and the dynamic loader (lazy binding,
/// string functions chosen by CPU features): anything it does not implement (AVX, xsave,
/// cpuid) is single-stepped, and the stream must still be identical.
#[test]
fn libcalls_traced_into_libraries() {
    let k = compile_linked("libcalls", &["-O2", "-g", "-fno-builtin"], &[]);
    let mut opts = options_from_main(&k.path, &[]);
    opts.trace_libs = true;
    let (_, emu) = assert_engines_agree(&opts, b"", "libcalls with trace_libs");
    let s = &emu.traced.summary;
    eprintln!(
        "libcalls with trace_libs: {} instructions, {} emulated",
        s.instructions, s.emulated
    );
    assert_eq!(s.exit, Some(ExitStatus::Code(0)));
    assert!(
        s.emulated * 2 >= s.instructions,
        "only {} of {} instructions emulated",
        s.emulated,
        s.instructions
    );
}
