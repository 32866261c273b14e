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
/// Entries are `entsize` bytes; the first `jmp` through the GOT in an entry
/// gives its slot. When the entry size is unusable or that finds nothing,
/// falls back to a linear sweep in which every GOT jump (with an
/// immediately preceding `endbr64`) is a stub.
pub(crate) fn decode_stubs(sec: &PltSection<'_>, is_import: &dyn Fn(u64) -> bool) -> Vec<RawStub> {
    let size = sec.data.len() as u64;
    let entsize = match sec.entsize {
        // Powers of two: the mask tests divisibility.
        8 | 16 | 32 if size & (sec.entsize - 1) == 0 => sec.entsize,
        _ => return linear_sweep(sec, is_import),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `endbr64; bnd jmp [rip+disp]` at `ip` jumping through `slot`.
    fn ibt_stub(ip: u64, slot: u64) -> Vec<u8> {
        let mut v = vec![0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25];
        let next = ip + 4 + 7;
        v.extend_from_slice(&((slot.wrapping_sub(next)) as i32).to_le_bytes());
        v
    }

    /// `jmp [rip+disp]; xchg ax,ax` (8 bytes).
    fn short_stub(ip: u64, slot: u64) -> Vec<u8> {
        let mut v = vec![0xff, 0x25];
        v.extend_from_slice(&((slot.wrapping_sub(ip + 6)) as i32).to_le_bytes());
        v.extend_from_slice(&[0x66, 0x90]);
        v
    }

    #[test]
    fn entries_and_sweep() {
        let base = 0x1000;
        let mut data = short_stub(base, 0x3000);
        data.extend(short_stub(base + 8, 0x3008));
        data.extend(short_stub(base + 16, 0x3010));
        let is_import = |s: u64| s != 0x3010;
        for entsize in [8, 0, 5] {
            let sec = PltSection {
                address: base,
                data: &data,
                entsize,
            };
            let stubs = decode_stubs(&sec, &is_import);
            let got: Vec<(u64, u64)> = stubs.iter().map(|s| (s.start, s.got_slot)).collect();
            assert_eq!(got, vec![(base, 0x3000), (base + 8, 0x3008)], "{entsize}");
            if entsize == 8 {
                assert_eq!(stubs[0].end, base + 8);
            }
        }
        let mut data = ibt_stub(base, 0x3000);
        data.extend([0x90; 5]);
        data.extend(ibt_stub(base + 16, 0x3008));
        let sec = PltSection {
            address: base,
            data: &data,
            entsize: 0,
        };
        let stubs = decode_stubs(&sec, &|_| true);
        assert_eq!(stubs.len(), 2);
        assert_eq!((stubs[1].start, stubs[1].end), (base + 16, base + 27));
        // Garbage decodes to nothing, without panicking.
        let junk = [0xffu8; 37];
        let sec = PltSection {
            address: base,
            data: &junk,
            entsize: 16,
        };
        assert!(decode_stubs(&sec, &|_| true).is_empty());
    }
}
