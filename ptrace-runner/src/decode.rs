//! Instruction decoding, cached by address, and what an instruction does to memory and
//! registers given the register file before and after it.

use crate::event::{AccessKind, Insn, MemAccess, RegWrite, Transfer, TransferKind};
use crate::ptrace::Regs;
use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory, Mnemonic, OpAccess,
    Register, UsedMemory,
};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::rc::Rc;

/// A hasher for addresses and page numbers: one multiplication (they are already well spread in
/// their low bits; the high bits of the product feed the table index).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 ^= self.0 >> 32;
    }
}

pub type IdBuildHasher = BuildHasherDefault<IdHasher>;

/// What the engine needs of one instruction, computed once per address.
#[derive(Clone, Debug)]
pub struct Decoded {
    pub insn: Instruction,
    pub bytes: [u8; 15],
    pub len: u8,
    /// Memory operands, with their access kind.
    pub mem: Vec<UsedMemory>,
    /// General-purpose registers the instruction may write.
    pub writes: Vec<Register>,
    pub flow: FlowControl,
    /// A REP/REPNE string instruction: one event per iteration, none when the count is 0.
    pub rep_string: bool,
    pub is_syscall: bool,
    pub is_int3: bool,
    /// The instruction compiled for the `emulate` engine's interpreter.
    pub op: crate::emu::Op,
}

impl Decoded {
    /// Decodes the instruction at `pc` from `bytes` (which may hold more than one instruction).
    pub fn new(pc: u64, bytes: &[u8], info: &mut InstructionInfoFactory) -> Decoded {
        let mut decoder = Decoder::with_ip(64, bytes, pc, DecoderOptions::NONE);
        let insn = decoder.decode();
        let len = insn.len().min(15) as u8;
        let mut raw = [0u8; 15];
        let n = (len as usize).min(bytes.len());
        raw[..n].copy_from_slice(&bytes[..n]);
        let used = info.info(&insn);
        let mem = used
            .used_memory()
            .iter()
            .filter(|m| m.access() != OpAccess::NoMemAccess)
            .copied()
            .collect();
        let mut writes: Vec<Register> = used
            .used_registers()
            .iter()
            .filter(|r| {
                r.register().is_gpr()
                    && matches!(
                        r.access(),
                        OpAccess::Write
                            | OpAccess::CondWrite
                            | OpAccess::ReadWrite
                            | OpAccess::ReadCondWrite
                    )
            })
            .map(|r| r.register())
            .collect();
        writes.dedup();
        let rep_string =
            (insn.has_rep_prefix() || insn.has_repne_prefix()) && is_string_op(insn.mnemonic());
        Decoded {
            flow: insn.flow_control(),
            is_syscall: insn.mnemonic() == Mnemonic::Syscall,
            is_int3: matches!(insn.mnemonic(), Mnemonic::Int3 | Mnemonic::Int1),
            op: crate::emu::compile(&insn),
            insn,
            bytes: raw,
            len,
            mem,
            writes,
            rep_string,
        }
    }

    /// True when this instruction did not decode (bad bytes, unreadable memory).
    pub fn is_invalid(&self) -> bool {
        self.insn.is_invalid()
    }

    /// The kind of control transfer this instruction performs, if any.
    pub fn transfer_kind(&self) -> Option<TransferKind> {
        if self.is_syscall {
            return None;
        }
        Some(match self.flow {
            FlowControl::Next => return None,
            FlowControl::UnconditionalBranch | FlowControl::IndirectBranch => TransferKind::Jump,
            FlowControl::ConditionalBranch => TransferKind::CondJump,
            FlowControl::Call | FlowControl::IndirectCall => TransferKind::Call,
            FlowControl::Return => TransferKind::Return,
            _ => TransferKind::Other,
        })
    }

    /// Fills `out.mem` with the accesses this instruction makes from the register state
    /// `before`. Returns false when an address could not be computed (vector-indexed
    /// addressing, whose index registers are not in the general register file).
    pub fn accesses(&self, before: &Regs, out: &mut Vec<MemAccess>) -> bool {
        out.clear();
        if self.rep_string && rep_count(&self.insn, before) == 0 {
            return true;
        }
        let mut complete = true;
        for pass in [AccessKind::Read, AccessKind::Write] {
            for m in &self.mem {
                let (reads, writes) = match m.access() {
                    OpAccess::Read | OpAccess::CondRead => (true, false),
                    OpAccess::Write | OpAccess::CondWrite => (false, true),
                    OpAccess::ReadWrite | OpAccess::ReadCondWrite => (true, true),
                    _ => (false, false),
                };
                let wanted = match pass {
                    AccessKind::Read => reads,
                    AccessKind::Write => writes,
                };
                if !wanted {
                    continue;
                }
                let addr = m.virtual_address(0, |reg, _, _| register_value(before, reg));
                // iced leaves the operand size of REP string instructions unknown; the
                // instruction's own memory size is the size of one iteration's access.
                let size = match m.memory_size().size() {
                    0 => self.insn.memory_size().size(),
                    n => n,
                };
                match addr {
                    Some(addr) => out.push(MemAccess {
                        addr,
                        size: size as u32,
                        kind: pass,
                    }),
                    None => complete = false,
                }
            }
        }
        complete
    }

    /// Fills `out.regs` with the general-purpose registers written and their new values.
    pub fn reg_writes(&self, after: &Regs, out: &mut Vec<RegWrite>) {
        out.clear();
        for &reg in &self.writes {
            if let Some(value) = register_value(after, reg) {
                out.push(RegWrite { reg, value });
            }
        }
    }

    /// Builds the event of this instruction having run from `before` to `after`.
    pub fn fill_event(&self, pc: u64, before: &Regs, after: &Regs, out: &mut Insn) -> bool {
        out.pc = pc;
        out.len = self.len;
        let complete = self.accesses(before, &mut out.mem);
        self.reg_writes(after, &mut out.regs);
        out.transfer = self.transfer_kind().map(|kind| Transfer {
            kind,
            target: after.rip,
        });
        complete
    }
}

fn is_string_op(m: Mnemonic) -> bool {
    use Mnemonic::*;
    matches!(
        m,
        Movsb
            | Movsw
            | Movsd
            | Movsq
            | Stosb
            | Stosw
            | Stosd
            | Stosq
            | Lodsb
            | Lodsw
            | Lodsd
            | Lodsq
            | Scasb
            | Scasw
            | Scasd
            | Scasq
            | Cmpsb
            | Cmpsw
            | Cmpsd
            | Cmpsq
            | Insb
            | Insw
            | Insd
            | Outsb
            | Outsw
            | Outsd
    )
}

fn rep_count(insn: &Instruction, regs: &Regs) -> u64 {
    use iced_x86::OpKind::{MemoryESEDI, MemorySegESI};
    // A 32-bit address size (`addr32 rep movsb`) counts in ecx.
    let addr32 =
        (0..insn.op_count()).any(|i| matches!(insn.op_kind(i), MemorySegESI | MemoryESEDI));
    if addr32 {
        regs.rcx & 0xffff_ffff
    } else {
        regs.rcx
    }
}

/// The value of `reg` (any width) in a register file, or the base of a segment register.
pub fn register_value(regs: &Regs, reg: Register) -> Option<u64> {
    let full = match reg.full_register() {
        Register::RAX => regs.rax,
        Register::RBX => regs.rbx,
        Register::RCX => regs.rcx,
        Register::RDX => regs.rdx,
        Register::RSI => regs.rsi,
        Register::RDI => regs.rdi,
        Register::RBP => regs.rbp,
        Register::RSP => regs.rsp,
        Register::R8 => regs.r8,
        Register::R9 => regs.r9,
        Register::R10 => regs.r10,
        Register::R11 => regs.r11,
        Register::R12 => regs.r12,
        Register::R13 => regs.r13,
        Register::R14 => regs.r14,
        Register::R15 => regs.r15,
        Register::RIP => regs.rip,
        Register::FS => regs.fs_base,
        Register::GS => regs.gs_base,
        Register::ES | Register::CS | Register::SS | Register::DS => 0,
        _ => return None,
    };
    Some(match reg {
        Register::AH | Register::BH | Register::CH | Register::DH => (full >> 8) & 0xff,
        _ if reg.is_gpr8() => full & 0xff,
        _ if reg.is_gpr16() => full & 0xffff,
        _ if reg.is_gpr32() => full & 0xffff_ffff,
        Register::EIP => full & 0xffff_ffff,
        _ => full,
    })
}

/// Decoded instructions by address.
pub struct DecodeCache {
    map: HashMap<u64, Rc<Decoded>, IdBuildHasher>,
    info: InstructionInfoFactory,
}

impl Default for DecodeCache {
    fn default() -> Self {
        Self::new()
    }
}

impl DecodeCache {
    pub fn new() -> Self {
        DecodeCache {
            map: HashMap::default(),
            info: InstructionInfoFactory::new(),
        }
    }

    /// The decoded instruction at `pc`, and whether it was decoded now (first execution).
    /// `read` supplies up to 15 bytes at `pc` and returns how many it could read.
    pub fn get_or_decode(
        &mut self,
        pc: u64,
        read: impl FnOnce(&mut [u8; 15]) -> usize,
    ) -> (Rc<Decoded>, bool) {
        let mut fresh = false;
        let info = &mut self.info;
        let d = self.map.entry(pc).or_insert_with(|| {
            fresh = true;
            let mut buf = [0u8; 15];
            let n = read(&mut buf);
            Rc::new(Decoded::new(pc, &buf[..n], info))
        });
        (Rc::clone(d), fresh)
    }

    pub fn get(&self, pc: u64) -> Option<&Decoded> {
        self.map.get(&pc).map(|d| &**d)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regs() -> Regs {
        // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
        let mut r: Regs = unsafe { std::mem::zeroed() };
        r.rax = 0x1122_3344_5566_7788;
        r.rsp = 0x7fff_0000;
        r.rdi = 0x1000;
        r.rsi = 0x2000;
        r.rcx = 3;
        r.fs_base = 0x7000_0000;
        r
    }

    fn dec(pc: u64, bytes: &[u8]) -> Decoded {
        Decoded::new(pc, bytes, &mut InstructionInfoFactory::new())
    }

    #[test]
    fn sub_registers_extract() {
        let r = regs();
        assert_eq!(register_value(&r, Register::AL), Some(0x88));
        assert_eq!(register_value(&r, Register::AH), Some(0x77));
        assert_eq!(register_value(&r, Register::AX), Some(0x7788));
        assert_eq!(register_value(&r, Register::EAX), Some(0x5566_7788));
        assert_eq!(register_value(&r, Register::FS), Some(0x7000_0000));
    }

    #[test]
    fn push_writes_below_the_stack_pointer() {
        // push rax
        let d = dec(0x1000, &[0x50]);
        let mut out = Vec::new();
        assert!(d.accesses(&regs(), &mut out));
        assert_eq!(
            out,
            vec![MemAccess {
                addr: 0x7fff_0000 - 8,
                size: 8,
                kind: AccessKind::Write
            }]
        );
    }

    #[test]
    fn read_modify_write_gives_read_then_write() {
        // add dword ptr [rdi+8], 1
        let d = dec(0x1000, &[0x83, 0x47, 0x08, 0x01]);
        let mut out = Vec::new();
        d.accesses(&regs(), &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].kind, AccessKind::Read);
        assert_eq!(out[1].kind, AccessKind::Write);
        assert!(out.iter().all(|a| a.addr == 0x1008 && a.size == 4));
    }

    #[test]
    fn rip_relative_and_fs_addresses() {
        // mov eax, [rip+0x10] at 0x4000 (6 bytes): address 0x4016
        let d = dec(0x4000, &[0x8b, 0x05, 0x10, 0x00, 0x00, 0x00]);
        let mut out = Vec::new();
        d.accesses(&regs(), &mut out);
        assert_eq!(out[0].addr, 0x4016);
        // mov rax, fs:[0x28]
        let d = dec(0x4000, &[0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0]);
        d.accesses(&regs(), &mut out);
        assert_eq!(out[0].addr, 0x7000_0028);
    }

    #[test]
    fn rep_movsb_iteration_and_zero_count() {
        // rep movsb
        let d = dec(0x1000, &[0xf3, 0xa4]);
        assert!(d.rep_string);
        let mut out = Vec::new();
        d.accesses(&regs(), &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!((out[0].addr, out[0].kind), (0x2000, AccessKind::Read));
        assert_eq!((out[1].addr, out[1].kind), (0x1000, AccessKind::Write));
        assert!(out.iter().all(|a| a.size == 1));
        // rep stosq writes 8 bytes per iteration.
        let d = dec(0x1000, &[0xf3, 0x48, 0xab]);
        d.accesses(&regs(), &mut out);
        assert_eq!((out[0].addr, out[0].size), (0x1000, 8));
        let mut r = regs();
        r.rcx = 0;
        d.accesses(&r, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn lea_touches_no_memory_and_writes_its_register() {
        // lea rax, [rdi+8]
        let d = dec(0x1000, &[0x48, 0x8d, 0x47, 0x08]);
        let mut out = Vec::new();
        d.accesses(&regs(), &mut out);
        assert!(out.is_empty());
        assert_eq!(d.writes, vec![Register::RAX]);
    }

    #[test]
    fn transfers_classify() {
        assert_eq!(dec(0, &[0xc3]).transfer_kind(), Some(TransferKind::Return));
        assert_eq!(
            dec(0, &[0xe8, 0, 0, 0, 0]).transfer_kind(),
            Some(TransferKind::Call)
        );
        assert_eq!(
            dec(0, &[0x74, 0x02]).transfer_kind(),
            Some(TransferKind::CondJump)
        );
        assert_eq!(dec(0, &[0x0f, 0x05]).transfer_kind(), None);
        assert!(dec(0, &[0x0f, 0x05]).is_syscall);
    }
}
