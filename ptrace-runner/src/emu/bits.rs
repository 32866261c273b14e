//! Bit-manipulation instructions: `bsf`/`bsr` and BMI1/LZCNT run on the host (their undefined
//! flags, and `bsf`'s destination for a zero source, are whatever this CPU does: the tracee
//! runs on it too); BMI2's flagless shifts and bit gathers computed here.

use super::*;

/// Runs `template` with the status flags `$fl` loaded, leaving the flags after it in `$fl`;
/// `$operands` are the template's other asm operands. Skips the red zone before pushing the
/// flags.
macro_rules! under_flags {
    ($template:expr, $fl:ident, $($operands:tt)*) => {
        // SAFETY: a register-only instruction the host CPU has (the tracee, on this CPU, was
        // about to run it); the stack below the red zone is restored before the block ends,
        // and only the status flags are loaded from the tracee's.
        unsafe {
            asm!(
                "sub rsp, 128",
                "pushfq",
                "and qword ptr [rsp], {keep}",
                "or qword ptr [rsp], {fl}",
                "popfq",
                $template,
                "pushfq",
                "pop {fl}",
                "add rsp, 128",
                fl = inout(reg) $fl,
                keep = in(reg) !STATUS,
                $($operands)*
            );
        }
    };
}

/// Runs `template` (operands `{d}` in/out, `{a}`, `{b}`) under the flags `$fl`.
macro_rules! with_flags {
    ($template:expr, $d:ident, $a:ident, $b:ident, $fl:ident) => {
        // (`{a}` is unused by one-source forms: named in a comment.)
        under_flags!(
            concat!($template, "\n# {a}"),
            $fl,
            d = inout(reg) $d,
            a = in(reg) $a,
            b = in(reg) $b,
        )
    };
}

/// `d` (the destination's whole register), `a` and `b` (the sources, `b` the only one of
/// one-source forms) at operand size `size`: the destination register after, and the flags.
#[inline(never)]
pub(super) fn host_bits(op: BitOp, size: u8, d: u64, a: u64, b: u64, flags: u64) -> (u64, u64) {
    let (mut d, mut fl) = (d, flags & STATUS);
    macro_rules! by_size {
        ($ins:literal, three) => {
            match size {
                8 => with_flags!(concat!($ins, " {d}, {a}, {b}"), d, a, b, fl),
                _ => with_flags!(concat!($ins, " {d:e}, {a:e}, {b:e}"), d, a, b, fl),
            }
        };
        ($ins:literal, two32) => {
            match size {
                8 => with_flags!(concat!($ins, " {d}, {b}"), d, a, b, fl),
                _ => with_flags!(concat!($ins, " {d:e}, {b:e}"), d, a, b, fl),
            }
        };
        ($ins:literal, two) => {
            match size {
                8 => with_flags!(concat!($ins, " {d}, {b}"), d, a, b, fl),
                4 => with_flags!(concat!($ins, " {d:e}, {b:e}"), d, a, b, fl),
                _ => with_flags!(concat!($ins, " {d:x}, {b:x}"), d, a, b, fl),
            }
        };
    }
    match op {
        BitOp::Bsf => by_size!("bsf", two),
        BitOp::Bsr => by_size!("bsr", two),
        BitOp::Tzcnt => by_size!("tzcnt", two),
        BitOp::Lzcnt => by_size!("lzcnt", two),
        BitOp::Blsi => by_size!("blsi", two32),
        BitOp::Blsr => by_size!("blsr", two32),
        BitOp::Blsmsk => by_size!("blsmsk", two32),
        BitOp::Andn => by_size!("andn", three),
        BitOp::Bzhi => by_size!("bzhi", three),
        BitOp::Bextr => by_size!("bextr", three),
    }
    (d, fl & STATUS)
}

/// BMI2's flagless operations on `a` and `b` (count, index mask or immediate) at `size` (4
/// or 8 bytes).
pub(super) fn bmi2(op: Bmi2, size: u8, a: u64, b: u64) -> u64 {
    let bits = size as u32 * 8;
    let count = (b & (bits as u64 - 1)) as u32;
    let m = mask(size);
    let a = a & m;
    match op {
        Bmi2::Shlx => (a << count) & m,
        Bmi2::Shrx => a >> count,
        Bmi2::Sarx => (sext(a, size) as i64 >> count) as u64 & m,
        Bmi2::Rorx if size == 8 => a.rotate_right(count),
        Bmi2::Rorx => (a as u32).rotate_right(count) as u64,
        Bmi2::Pdep => {
            let (mut out, mut k) = (0u64, 0);
            for bit in 0..bits {
                if b >> bit & 1 == 1 {
                    out |= (a >> k & 1) << bit;
                    k += 1;
                }
            }
            out
        }
        Bmi2::Pext => {
            let (mut out, mut k) = (0u64, 0);
            for bit in 0..bits {
                if b >> bit & 1 == 1 {
                    out |= (a >> bit & 1) << k;
                    k += 1;
                }
            }
            out
        }
    }
}

/// `shld` (`left`) or `shrd` of `d` (the destination's whole register, or the memory value)
/// with bits from `s`, by `count`, at operand size `size` (2, 4 or 8), run on the host with the
/// tracee's status flags: the destination after, and the flags.
#[inline(never)]
pub(super) fn host_double_shift(
    left: bool,
    size: u8,
    d: u64,
    s: u64,
    count: u8,
    flags: u64,
) -> (u64, u64) {
    let (mut d, mut fl) = (d, flags & STATUS);
    macro_rules! go {
        ($template:literal) => {
            under_flags!($template, fl, d = inout(reg) d, s = in(reg) s, in("cl") count,)
        };
    }
    match (left, size) {
        (true, 8) => go!("shld {d}, {s}, cl"),
        (true, 4) => go!("shld {d:e}, {s:e}, cl"),
        (true, _) => go!("shld {d:x}, {s:x}, cl"),
        (false, 8) => go!("shrd {d}, {s}, cl"),
        (false, 4) => go!("shrd {d:e}, {s:e}, cl"),
        (false, _) => go!("shrd {d:x}, {s:x}, cl"),
    }
    (d, fl & STATUS)
}
