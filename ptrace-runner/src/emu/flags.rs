//! Integer flags, general-purpose register writes and shifts.

use super::*;

#[inline(always)]
pub(super) fn mask(size: u8) -> u64 {
    if size >= 8 {
        u64::MAX
    } else {
        (1u64 << (size as u32 * 8)) - 1
    }
}

#[inline(always)]
pub(super) fn sign_bit(size: u8) -> u64 {
    1u64 << (size as u32 * 8 - 1)
}

#[inline(always)]
pub(super) fn sext(v: u64, size: u8) -> u64 {
    let sh = 64 - size as u32 * 8;
    (((v << sh) as i64) >> sh) as u64
}

#[inline(always)]
pub(super) fn parity(v: u64) -> u64 {
    if (v as u8).count_ones() & 1 == 0 {
        PF
    } else {
        0
    }
}

/// SF, ZF and PF of a result.
#[inline(always)]
pub(super) fn szp(res: u64, size: u8) -> u64 {
    let m = res & mask(size);
    (if m == 0 { ZF } else { 0 }) | (if m & sign_bit(size) != 0 { SF } else { 0 }) | parity(m)
}

#[inline(always)]
pub(super) fn add_flags(a: u64, b: u64, c: u64, size: u8) -> (u64, u64) {
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
pub(super) fn sub_flags(a: u64, b: u64, c: u64, size: u8) -> (u64, u64) {
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
pub(super) fn set_flags(r: &mut Regs, which: u64, value: u64) {
    r.eflags = (r.eflags & !which) | (value & which);
}

#[inline(always)]
pub(super) fn cond(cc: u8, f: u64) -> bool {
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

/// Writes a general-purpose register with x86-64 semantics: 32-bit writes zero-extend, 8- and
/// 16-bit writes merge.
#[inline(always)]
pub(super) fn write_gpr(r: &mut Regs, idx: u8, size: u8, high: bool, v: u64) {
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
pub(super) fn div_flags(r: &mut Regs) {
    set_flags(r, SF | ZF | PF | AF, AF);
}

/// Shifts and rotates with a non-zero (masked) count: result, flags, flags written. Shifts set
/// AF (undefined in the manuals) as this CPU family does.
#[inline(always)]
pub(super) fn shift(code: Code, a: u64, count: u32, size: u8, flags: u64) -> (u64, u64, u64) {
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
