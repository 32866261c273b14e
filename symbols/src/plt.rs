//! Decoding of PLT stubs (`.plt`, `.plt.sec`, `.plt.got`).

use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind};

/// A raw PLT section to decode.
pub(crate) struct PltSection<'a> {
    pub address: u64,
    pub data: &'a [u8],
    /// `sh_entsize` of the section (0 when unknown).
    pub entsize: u64,
}

/// A stub found in a PLT section, before its GOT slot is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawStub {
    pub start: u64,
    pub end: u64,
    pub got_slot: u64,
}

/// If `ins` is `[bnd] jmp qword ptr [rip+disp]`, the address of the slot.
fn got_jump(ins: &Instruction) -> Option<u64> {
    if ins.mnemonic() == Mnemonic::Jmp
        && ins.op_count() == 1
        && ins.op0_kind() == OpKind::Memory
        && ins.is_ip_rel_memory_operand()
    {
        Some(ins.ip_rel_memory_address())
    } else {
        None
    }
}

/// Decode the stubs of one PLT section. `is_import` tells whether a GOT slot
/// belongs to an imported symbol (PLT0's slot does not).
///
/// Entries are `entsize` bytes (16 when unknown); the first `jmp` through
/// the GOT in an entry gives its slot. When that finds nothing, falls back
/// to a linear sweep in which every GOT jump (with a preceding `endbr64`)
/// is a stub.
pub(crate) fn decode_stubs(sec: &PltSection<'_>, is_import: &dyn Fn(u64) -> bool) -> Vec<RawStub> {
    let size = sec.data.len() as u64;
    let entsize = match sec.entsize {
        8 | 16 | 32 if size % sec.entsize == 0 => sec.entsize,
        _ => 16,
    };
    let mut stubs = Vec::new();
    let mut ins = Instruction::default();
    let mut off = 0u64;
    while off < size {
        let end = (off + entsize).min(size);
        // Indices fit: off < end <= data.len().
        let bytes = &sec.data[off as usize..end as usize];
        let start = sec.address.wrapping_add(off);
        let mut dec = Decoder::with_ip(64, bytes, start, DecoderOptions::NONE);
        while dec.can_decode() {
            dec.decode_out(&mut ins);
            if ins.is_invalid() {
                break;
            }
            if let Some(slot) = got_jump(&ins) {
                if is_import(slot) {
                    stubs.push(RawStub {
                        start,
                        end: sec.address.wrapping_add(end),
                        got_slot: slot,
                    });
                }
                break;
            }
        }
        off = end;
    }
    if stubs.is_empty() {
        stubs = linear_sweep(sec, is_import);
    }
    stubs
}

fn linear_sweep(sec: &PltSection<'_>, is_import: &dyn Fn(u64) -> bool) -> Vec<RawStub> {
    let mut stubs = Vec::new();
    let mut dec = Decoder::with_ip(64, sec.data, sec.address, DecoderOptions::NONE);
    let mut ins = Instruction::default();
    let mut prev_endbr: Option<u64> = None;
    while dec.can_decode() {
        dec.decode_out(&mut ins);
        if ins.is_invalid() {
            prev_endbr = None;
            continue;
        }
        if let Some(slot) = got_jump(&ins) {
            if is_import(slot) {
                stubs.push(RawStub {
                    start: prev_endbr.unwrap_or(ins.ip()),
                    end: ins.next_ip(),
                    got_slot: slot,
                });
            }
        }
        prev_endbr = (ins.mnemonic() == Mnemonic::Endbr64).then(|| ins.ip());
    }
    stubs
}
