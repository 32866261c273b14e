//! What a natively-run library call reads and writes, by the callee's name: the models the
//! dependence stage applies to the call's statement instance (see [`crate::deps`]).

use crate::deps::{Effect, GPR_BYTES};
use smallvec::SmallVec;

/// Bytes of the register shadow: (offset, size).
pub(crate) type RegSpan = (u16, u8);

const fn gpr(i: usize) -> RegSpan {
    ((i * 8) as u16, 8)
}

const fn xmm(k: usize) -> RegSpan {
    ((GPR_BYTES + 32 * k) as u16, 16)
}

/// The register-file index (rax = 0, rcx, rdx, rbx, rsp, rbp, rsi, rdi, r8, ...) of each
/// integer argument: rdi, rsi, rdx, rcx, r8, r9.
pub(crate) const ARG_INDEX: [usize; 6] = [7, 6, 2, 1, 8, 9];
/// Integer argument registers, in order.
pub(crate) const INT_ARGS: [RegSpan; 6] = [gpr(7), gpr(6), gpr(2), gpr(1), gpr(8), gpr(9)];
/// Floating-point argument registers, in order.
pub(crate) const XMM_ARGS: [RegSpan; 8] = [
    xmm(0),
    xmm(1),
    xmm(2),
    xmm(3),
    xmm(4),
    xmm(5),
    xmm(6),
    xmm(7),
];
/// Caller-saved general-purpose registers (the callee may change them).
pub(crate) const CALLER_SAVED: [usize; 9] = [0, 1, 2, 6, 7, 8, 9, 10, 11];

const RAX: &[RegSpan] = &[gpr(0)];
const XMM0: &[RegSpan] = &[xmm(0)];
const NONE: &[RegSpan] = &[];
/// What unknown library code is assumed to return in.
const UNKNOWN_RESULT: &[RegSpan] = &[gpr(0), gpr(2), xmm(0), xmm(1)];

/// Most bytes one range of a model covers (a failed call's garbage arguments).
const MAX_RANGE: u64 = 1 << 32;
/// Most bytes `strncmp` is assumed to read of each string (it stops at the terminator, which
/// the trace does not show; `n` is often just a large bound).
const MAX_STRNCMP: u64 = 1 << 16;

/// Bytes a number parser (`atof`, `strtod`, ...) is assumed to read: leading blanks, sign,
/// digits, point, exponent and the byte that ends them (the longest `double` printed by
/// `%.17g` is 24 characters).
const MAX_NUMBER_TEXT: u64 = 32;

/// How many bytes a range covers, possibly known only when the call returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Len {
    Bytes(u64),
    /// `times * result + plus` bytes (`strlen`: 1, 1; `fread`: the item size, 0).
    Result {
        times: u64,
        plus: u64,
    },
    /// The result when it is not negative, at most this many bytes (`read`: what was read).
    ResultUpTo(u64),
}

impl Len {
    /// The number of bytes, given the call's result.
    pub(crate) fn bytes(self, result: u64) -> u64 {
        let n = match self {
            Len::Bytes(n) => n,
            Len::Result { times, plus } => times.saturating_mul(result).saturating_add(plus),
            Len::ResultUpTo(max) if (result as i64) > 0 => result.min(max),
            Len::ResultUpTo(_) => 0,
        };
        n.min(MAX_RANGE)
    }
}

/// Memory a call reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub addr: u64,
    pub len: Len,
    pub write: bool,
}

/// What a call does to the heap-block table (the sizes `realloc` needs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Heap {
    None,
    /// A fresh block of `n` bytes is returned: its bytes have no writer.
    Alloc {
        n: u64,
    },
    /// `realloc(old, n)`: the block may move with its contents.
    Realloc {
        old: u64,
        n: u64,
    },
    Free {
        p: u64,
    },
}

/// The accesses of one library call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CallModel {
    /// Integer argument registers read (the first `int_args` of rdi, rsi, rdx, rcx, r8, r9).
    pub int_args: usize,
    /// Vector argument registers read (the first `xmm_args` of xmm0..xmm7).
    pub xmm_args: usize,
    /// Hidden state read and written.
    pub effect: Option<Effect>,
    pub ranges: SmallVec<[Range; 2]>,
    /// Result registers written.
    pub writes: &'static [RegSpan],
    pub heap: Heap,
    /// False for the fallback of unknown library code.
    pub known: bool,
    /// A variadic function: `al` counts the vector registers its arguments use (SysV ABI),
    /// which bounds `xmm_args` when the traced code set it.
    pub variadic: bool,
}

impl CallModel {
    fn new(int_args: usize, xmm_args: usize, writes: &'static [RegSpan]) -> CallModel {
        CallModel {
            int_args,
            xmm_args,
            effect: None,
            ranges: SmallVec::new(),
            writes,
            heap: Heap::None,
            known: true,
            variadic: false,
        }
    }

    fn variadic(mut self) -> CallModel {
        self.variadic = true;
        self
    }

    /// Unknown library code: it may read every argument register and any hidden state.
    fn unknown() -> CallModel {
        CallModel {
            effect: Some(Effect::Unknown),
            known: false,
            ..CallModel::new(6, 8, UNKNOWN_RESULT)
        }
    }

    fn effect(mut self, e: Effect) -> CallModel {
        self.effect = Some(e);
        self
    }

    fn heap(mut self, h: Heap) -> CallModel {
        self.heap = h;
        self
    }

    /// Adds a range (none at address 0: a null pointer the call does not follow).
    fn range(mut self, addr: u64, len: Len, write: bool) -> CallModel {
        if addr != 0 {
            self.ranges.push(Range { addr, len, write });
        }
        self
    }

    fn reads(self, addr: u64, n: u64) -> CallModel {
        self.range(addr, Len::Bytes(n), false)
    }

    fn writes(self, addr: u64, len: Len) -> CallModel {
        self.range(addr, len, true)
    }

    /// Both reads and writes `n` bytes at `addr` (state kept by the caller: `rand_r`'s seed).
    fn updates(self, addr: u64, n: u64) -> CallModel {
        self.reads(addr, n).writes(addr, Len::Bytes(n))
    }
}

/// The callee's name without version, fortification and variant decorations:
/// `__memcpy_chk` → `memcpy`, `fgets_unlocked` → `fgets`, `__exp_finite` → `exp`,
/// `__isoc99_scanf` → `scanf`, `printf@GLIBC_2.2.5` → `printf`. Also says whether it was a
/// `__x_chk` variant (which takes the destination's size as one more argument).
pub(crate) fn base_name(name: &str) -> (&str, bool) {
    let mut b = name.split('@').next().unwrap_or(name);
    if let Some(s) = b
        .strip_prefix("__isoc99_")
        .or_else(|| b.strip_prefix("__isoc23_"))
    {
        b = s;
    }
    let mut chk = false;
    if let Some(s) = b.strip_prefix("__").and_then(|s| s.strip_suffix("_chk")) {
        b = s;
        chk = true;
    }
    if let Some(s) = b.strip_suffix("_unlocked") {
        b = s;
    }
    if let Some(s) = b.strip_prefix("__").and_then(|s| s.strip_suffix("_finite")) {
        b = s;
    }
    if let Some(s) = b.strip_prefix("_IO_") {
        b = s;
    }
    (b, chk)
}

const MATH1: &[&str] = &[
    "sqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "cbrt", "fabs", "floor", "ceil", "round", "trunc",
    "rint", "erf",
];
const MATH2: &[&str] = &["pow", "atan2", "fmod", "hypot", "fmin", "fmax", "copysign"];

/// Whether `name` is one of `list`, or one of them with the `f` (float) suffix.
fn is_math(list: &[&str], name: &str) -> bool {
    list.contains(&name) || name.strip_suffix('f').is_some_and(|n| list.contains(&n))
}

/// The model of a call to `name` (`None`: not known), with `arg(i)` the value of integer
/// argument `i` when the call was made.
pub(crate) fn model(name: Option<&str>, arg: impl Fn(usize) -> Option<u64>) -> CallModel {
    name.and_then(|n| known(n, &arg))
        .unwrap_or_else(CallModel::unknown)
}

fn known(name: &str, arg: &impl Fn(usize) -> Option<u64>) -> Option<CallModel> {
    use Effect::{Clock, Heap as H, Output, Random};
    let (base, chk) = base_name(name);
    // A `__x_chk` variant takes one more argument (a size, or a flag before the format).
    let ints = |n: usize| (n + usize::from(chk)).min(6);
    let a = |i: usize| arg(i);
    if is_math(MATH1, base) {
        return Some(CallModel::new(0, 1, XMM0));
    }
    if is_math(MATH2, base) {
        return Some(CallModel::new(0, 2, XMM0));
    }
    Some(match base {
        "memcpy" | "memmove" | "mempcpy" => {
            let n = a(2)?;
            CallModel::new(ints(3), 0, RAX)
                .reads(a(1)?, n)
                .writes(a(0)?, Len::Bytes(n))
        }
        "memset" => CallModel::new(ints(3), 0, RAX).writes(a(0)?, Len::Bytes(a(2)?)),
        "bzero" | "explicit_bzero" => {
            CallModel::new(ints(2), 0, NONE).writes(a(0)?, Len::Bytes(a(1)?))
        }
        "strlen" => {
            CallModel::new(1, 0, RAX).range(a(0)?, Len::Result { times: 1, plus: 1 }, false)
        }
        // Number parsers read their string and nothing hidden (errno aside, written only on a
        // range error): pure, as the math library is. Where the number's text ends the trace
        // does not show: taken as MAX_NUMBER_TEXT bytes (a bound past the buffer would tie
        // the loop to whatever lies after it).
        "atof" => CallModel::new(1, 0, XMM0).reads(a(0)?, MAX_NUMBER_TEXT),
        "atoi" | "atol" | "atoll" => CallModel::new(1, 0, RAX).reads(a(0)?, MAX_NUMBER_TEXT),
        "strtod" | "strtof" | "strtold" => CallModel::new(2, 0, XMM0)
            .reads(a(0)?, MAX_NUMBER_TEXT)
            .writes(a(1)?, Len::Bytes(8)),
        "strtol" | "strtoul" | "strtoll" | "strtoull" | "strtoimax" | "strtoumax" => {
            CallModel::new(3, 0, RAX)
                .reads(a(0)?, MAX_NUMBER_TEXT)
                .writes(a(1)?, Len::Bytes(8))
        }
        "memcmp" | "strncmp" => {
            let n = if base == "strncmp" {
                a(2)?.min(MAX_STRNCMP)
            } else {
                a(2)?
            };
            CallModel::new(ints(3), 0, RAX)
                .reads(a(0)?, n)
                .reads(a(1)?, n)
        }

        // The heap allocator.
        "malloc" => CallModel::new(1, 0, RAX)
            .effect(H)
            .heap(Heap::Alloc { n: a(0)? }),
        "calloc" => CallModel::new(2, 0, RAX).effect(H).heap(Heap::Alloc {
            n: a(0)?.checked_mul(a(1)?)?,
        }),
        "aligned_alloc" | "memalign" => CallModel::new(2, 0, RAX)
            .effect(H)
            .heap(Heap::Alloc { n: a(1)? }),
        "realloc" => CallModel::new(2, 0, RAX).effect(H).heap(Heap::Realloc {
            old: a(0)?,
            n: a(1)?,
        }),
        "free" => CallModel::new(1, 0, NONE)
            .effect(H)
            .heap(Heap::Free { p: a(0)? }),
        // The new block's address goes to `*memptr`; its size is not known here.
        "posix_memalign" => CallModel::new(3, 0, RAX)
            .effect(H)
            .writes(a(0)?, Len::Bytes(8)),

        // Input and output.
        "printf" | "fprintf" | "dprintf" | "scanf" | "fscanf" => {
            CallModel::new(6, 8, RAX).effect(Output).variadic()
        }
        "vprintf" => CallModel::new(ints(2), 0, RAX).effect(Output),
        "vfprintf" | "vdprintf" => CallModel::new(ints(3), 0, RAX).effect(Output),
        "puts" | "putchar" | "fflush" | "fclose" | "close" | "getc" | "fgetc" => {
            CallModel::new(ints(1), 0, RAX).effect(Output)
        }
        "getchar" => CallModel::new(0, 0, RAX).effect(Output),
        // libgfortran's formatted and list-directed I/O: a statement opens with `st_write`
        // (or `st_read`) on its parameter block, passes each item by address (its kind or
        // length in bytes) and ends with `*_done`. Modelled by their arguments, not as unknown
        // code that would read every argument register (gfortran -O0 leaves a loop's
        // temporaries in rcx, which `print` would then read after the loop).
        "_gfortran_st_write"
        | "_gfortran_st_read"
        | "_gfortran_st_write_done"
        | "_gfortran_st_read_done" => CallModel::new(1, 0, NONE).effect(Output),
        "_gfortran_transfer_integer_write"
        | "_gfortran_transfer_real_write"
        | "_gfortran_transfer_logical_write"
        | "_gfortran_transfer_character_write" => CallModel::new(3, 0, NONE)
            .effect(Output)
            .reads(a(1)?, a(2)?.min(MAX_RANGE)),
        "_gfortran_transfer_complex_write" => CallModel::new(3, 0, NONE)
            .effect(Output)
            .reads(a(1)?, a(2)?.saturating_mul(2).min(MAX_RANGE)),
        // The variants without `_write` serve reads and writes alike: the item is read and
        // written.
        "_gfortran_transfer_integer"
        | "_gfortran_transfer_real"
        | "_gfortran_transfer_logical"
        | "_gfortran_transfer_character" => CallModel::new(3, 0, NONE)
            .effect(Output)
            .updates(a(1)?, a(2)?.min(MAX_RANGE)),
        "perror" => CallModel::new(1, 0, NONE).effect(Output),
        "fputs" | "fputc" | "putc" | "fopen" | "fdopen" => {
            CallModel::new(ints(2), 0, RAX).effect(Output)
        }
        "open" => CallModel::new(3, 0, RAX).effect(Output),
        "fwrite" => CallModel::new(ints(4), 0, RAX)
            .effect(Output)
            .reads(a(0)?, a(1)?.saturating_mul(a(2)?).min(MAX_RANGE)),
        "write" => CallModel::new(ints(3), 0, RAX)
            .effect(Output)
            .reads(a(1)?, a(2)?.min(MAX_RANGE)),
        "fgets" => {
            // fgets(buf, n, f); __fgets_chk(buf, size, n, f).
            let n = if chk { a(2)? } else { a(1)? };
            CallModel::new(ints(3), 0, RAX)
                .effect(Output)
                .writes(a(0)?, Len::Bytes(n))
        }
        "fread" => {
            // fread(buf, size, n, f); __fread_chk(buf, buflen, size, n, f).
            let size = if chk { a(2)? } else { a(1)? };
            CallModel::new(ints(4), 0, RAX).effect(Output).writes(
                a(0)?,
                Len::Result {
                    times: size,
                    plus: 0,
                },
            )
        }
        "read" | "pread" | "pread64" | "recv" | "recvfrom" => {
            let nargs = match base {
                "read" => 3,
                "recvfrom" => 6,
                _ => 4,
            };
            CallModel::new(ints(nargs), 0, RAX)
                .effect(Output)
                .writes(a(1)?, Len::ResultUpTo(a(2)?))
        }

        // Random numbers.
        "rand" | "random" | "lrand48" | "mrand48" => CallModel::new(0, 0, RAX).effect(Random),
        "srand" | "srandom" | "srand48" => CallModel::new(1, 0, NONE).effect(Random),
        "drand48" => CallModel::new(0, 0, XMM0).effect(Random),
        // The `*rand48` variants that take their state from the caller.
        "erand48" => CallModel::new(1, 0, XMM0).effect(Random).updates(a(0)?, 6),
        "nrand48" | "jrand48" => CallModel::new(1, 0, RAX).effect(Random).updates(a(0)?, 6),
        "rand_r" => CallModel::new(1, 0, RAX).updates(a(0)?, 4),

        // The clock.
        "time" => CallModel::new(1, 0, RAX)
            .effect(Clock)
            .writes(a(0)?, Len::Bytes(8)),
        "clock" => CallModel::new(0, 0, RAX).effect(Clock),
        "gettimeofday" => CallModel::new(2, 0, RAX)
            .effect(Clock)
            .writes(a(0)?, Len::Bytes(16)),
        "clock_gettime" => CallModel::new(2, 0, RAX)
            .effect(Clock)
            .writes(a(1)?, Len::Bytes(16)),

        // The thread's errno location: a constant.
        "__errno_location" => CallModel::new(0, 0, RAX),
        // They do not return.
        "exit" | "_exit" | "abort" | "__stack_chk_fail" => CallModel::new(0, 0, NONE),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_decorations() {
        assert_eq!(base_name("printf@GLIBC_2.2.5"), ("printf", false));
        assert_eq!(base_name("__memcpy_chk"), ("memcpy", true));
        assert_eq!(base_name("__fread_unlocked_chk"), ("fread", true));
        assert_eq!(base_name("fgets_unlocked"), ("fgets", false));
        assert_eq!(base_name("__expf_finite"), ("expf", false));
        assert_eq!(base_name("__isoc99_scanf"), ("scanf", false));
        assert_eq!(base_name("__stack_chk_fail"), ("__stack_chk_fail", false));
        assert_eq!(base_name("_IO_putc"), ("putc", false));
    }

    #[test]
    fn models_by_name() {
        let args = |i: usize| Some([0x1000, 0x2000, 16, 0, 0, 0][i]);
        let m = model(Some("sqrtf"), args);
        assert_eq!((m.xmm_args, m.effect, m.writes), (1, None, XMM0));
        assert_eq!(model(Some("__pow_finite"), args).xmm_args, 2);
        let m = model(Some("memmove"), args);
        assert_eq!(m.ranges.len(), 2);
        assert!(!m.ranges[0].write && m.ranges[1].write);
        assert_eq!(m.ranges[1].addr, 0x1000);
        assert_eq!(model(Some("rand"), args).effect, Some(Effect::Random));
        assert_eq!(
            model(Some("__printf_chk"), args).effect,
            Some(Effect::Output)
        );
        let m = model(Some("atof"), args);
        assert!(m.known);
        assert_eq!(m.effect, None);
        assert_eq!(m.ranges.len(), 1);
        let m = model(Some("__isoc23_strtol"), args);
        assert!(m.known, "glibc's C23 names are the same functions");
        let m = model(Some("strcmp"), args);
        assert!(!m.known);
        assert_eq!(m.effect, Some(Effect::Unknown));
        // Arguments not known: the unknown-code fallback.
        assert!(!model(Some("memcpy"), |_| None).known);
        assert!(!model(None, args).known);
        let m = model(Some("read"), args);
        assert_eq!(m.ranges[0].len.bytes(8), 8);
        assert_eq!(m.ranges[0].len.bytes(u64::MAX), 0);
        assert_eq!(m.ranges[0].len.bytes(100), 16);
        // gfortran's `print`: its statement block, then each item by address and size.
        let m = model(Some("_gfortran_st_write"), args);
        assert!(m.known);
        assert_eq!((m.int_args, m.xmm_args), (1, 0));
        let m = model(Some("_gfortran_transfer_real_write"), |i| {
            Some([0x1000, 0x2000, 8, 0, 0, 0][i])
        });
        assert_eq!(m.int_args, 3);
        assert_eq!(m.ranges.len(), 1);
        assert_eq!((m.ranges[0].addr, m.ranges[0].write), (0x2000, false));
        assert_eq!(m.ranges[0].len.bytes(0), 8);
    }
}
