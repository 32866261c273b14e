//! Registers that hold one value all along a loop: the value is only copied around it
//! (register to register, to a stack slot and back) from one instruction outside the loop.
//! gcc keeps hotspot's `result` pointer, loaded from OpenMP's shared block before the chunk
//! loop, in `rbp`, spills it before an inner loop that needs the register and restores it
//! after: the restore's flow dependence to the next iteration's use carries nothing the
//! iteration did not have on entry, so it does not order the iterations.

use super::classify::full_name;
use super::{insn_at, Code, Folded2};
use crate::heap::STACK_START;
use iced_x86::{Mnemonic, OpAccess, OpKind};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use tracer::{DepKind, NodeId, ScheduleTree, Through};

type Key = (NodeId, u64);

/// Instructions visited per question: past this the value is taken to vary.
const MAX_COPIES: usize = 256;

/// Where a root stands for a value written before the trace began (a register no traced
/// instruction wrote): outside every loop.
const BEFORE_TRACE: Key = (NodeId::MAX, 0);

/// The flow dependences' producers, by consumer instruction.
pub(super) struct Copies {
    /// (first register location, producer) of each register the consumer reads.
    registers: HashMap<Key, Vec<(u64, Key)>>,
    /// (first address, producer) of the memory the consumer reads.
    memory: HashMap<Key, Vec<(u64, Key)>>,
}

/// What a copy instruction copies from.
enum Input {
    Register(String),
    /// A load from the stack: each activation writes its slots before reading them, so the
    /// traced stores are all the value's producers.
    Stack,
}

impl Copies {
    pub(super) fn new(folded: &Folded2) -> Self {
        let mut registers: HashMap<Key, Vec<(u64, Key)>> = HashMap::default();
        let mut memory: HashMap<Key, Vec<(u64, Key)>> = HashMap::default();
        for ((cons, prod, kind, through, _), _, _, location, _) in &folded.deps {
            if *kind != DepKind::Flow {
                continue;
            }
            let map = match through {
                Through::Register => &mut registers,
                Through::Memory => &mut memory,
            };
            map.entry((cons.context, cons.pc))
                .or_default()
                .push((*location, (prod.context, prod.pc)));
        }
        Copies { registers, memory }
    }

    /// Whether the value instruction `at` writes is, in every iteration of loop node `lp`, the
    /// value one instruction outside the loop wrote: `at` and everything its value passed
    /// through inside the loop are plain copies.
    pub(super) fn one_value_along(
        &self,
        code: &Code,
        tree: &ScheduleTree,
        at: Key,
        lp: NodeId,
    ) -> bool {
        let inside = |k: Key| k != BEFORE_TRACE && tree.is_within(k.0, lp);
        let mut roots: HashSet<Key> = HashSet::default();
        let mut seen: HashSet<Key> = HashSet::default();
        let mut todo = vec![at];
        while let Some(k) = todo.pop() {
            if !seen.insert(k) {
                continue;
            }
            if seen.len() > MAX_COPIES {
                return false;
            }
            if !inside(k) {
                roots.insert(k);
                continue;
            }
            let Some(insn) = insn_at(code, k.1) else {
                return false;
            };
            match copied(&insn) {
                None => return false,
                Some(Input::Register(reg)) => {
                    let producers: Vec<Key> = self
                        .registers
                        .get(&k)
                        .into_iter()
                        .flatten()
                        .filter(|(loc, p)| {
                            super::naming::register_name(*loc) == reg || writes(code, *p, &reg)
                        })
                        .map(|&(_, p)| p)
                        .collect();
                    if producers.is_empty() {
                        roots.insert(BEFORE_TRACE);
                    }
                    todo.extend(producers);
                }
                Some(Input::Stack) => {
                    let Some(producers) = self.memory.get(&k) else {
                        return false;
                    };
                    if producers.iter().any(|(addr, _)| *addr < STACK_START) {
                        return false;
                    }
                    todo.extend(producers.iter().map(|&(_, p)| p));
                }
            }
            if roots.len() > 1 {
                return false;
            }
        }
        roots.len() == 1
    }
}

/// What a plain copy copies its value from: `mov reg, reg`, a load from memory, a store of a
/// register (the whole value: no widening, narrowing or merging moves). `None`: the
/// instruction computes its value.
fn copied(insn: &iced_x86::Instruction) -> Option<Input> {
    let plain = matches!(
        insn.mnemonic(),
        Mnemonic::Mov
            | Mnemonic::Movapd
            | Mnemonic::Movaps
            | Mnemonic::Movupd
            | Mnemonic::Movups
            | Mnemonic::Movdqa
            | Mnemonic::Movdqu
            | Mnemonic::Vmovapd
            | Mnemonic::Vmovaps
            | Mnemonic::Vmovupd
            | Mnemonic::Vmovups
            | Mnemonic::Vmovdqa
            | Mnemonic::Vmovdqu
    );
    if !plain || insn.op_count() != 2 {
        return None;
    }
    match (insn.op0_kind(), insn.op1_kind()) {
        (OpKind::Register, OpKind::Register) | (OpKind::Memory, OpKind::Register) => {
            full_name(insn.op1_register()).map(Input::Register)
        }
        (OpKind::Register, OpKind::Memory)
            if insn.memory_base() == iced_x86::Register::RSP
                || insn.memory_base() == iced_x86::Register::RBP =>
        {
            Some(Input::Stack)
        }
        _ => None,
    }
}

/// Whether the instruction at `p` writes register `reg` (a producer of another register the
/// consumer reads, an address register, is not the value's).
fn writes(code: &Code, p: Key, reg: &str) -> bool {
    let Some(insn) = insn_at(code, p.1) else {
        // Unknown code: take it for the value's producer.
        return true;
    };
    let mut info = iced_x86::InstructionInfoFactory::new();
    info.info(&insn).used_registers().iter().any(|r| {
        matches!(
            r.access(),
            OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
        ) && full_name(r.register()).as_deref() == Some(reg)
    })
}
