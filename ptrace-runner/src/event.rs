//! The engine-independent event stream.
//!
//! Every engine (`step` today, `emulate` later) turns one execution into the same sequence of
//! [`Event`]s and hands them to an [`EventSink`]. The tracer only ever sees this stream (live or
//! replayed from a [`crate::record::Recording`]), never the engine.

use std::io;

/// Whether a memory access reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    Read,
    Write,
}

/// One memory access of one executed instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemAccess {
    /// Effective (linear) address, segment base included.
    pub addr: u64,
    /// Bytes accessed.
    pub size: u32,
    pub kind: AccessKind,
}

/// A general-purpose register written by an instruction, with the value it holds afterwards.
///
/// `reg` is the register written, as iced-x86 reports it: the 64-bit register for 32- and
/// 64-bit writes (a 32-bit write zero-extends into the whole register), the sub-register for
/// 8- and 16-bit writes (`AL`, `AH`, `AX`). `value` is its value after the instruction (for
/// `AH`, the high byte itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegWrite {
    pub reg: iced_x86::Register,
    pub value: u64,
}

/// Kinds of control transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransferKind {
    /// Unconditional jump, direct or indirect.
    Jump,
    /// Conditional branch; `target` tells whether it was taken (`target != pc + len`).
    CondJump,
    /// Call, direct or indirect.
    Call,
    /// Return.
    Return,
    /// Interrupt, `syscall` or anything else that leaves the straight line.
    Other,
}

/// A control transfer: `target` is the address of the next instruction executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Transfer {
    pub kind: TransferKind,
    pub target: u64,
}

/// One executed instruction (one iteration, for REP-prefixed string instructions).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Insn {
    pub pc: u64,
    pub len: u8,
    /// Memory accesses in the order the instruction performs them (reads before writes).
    pub mem: Vec<MemAccess>,
    /// General-purpose registers written, with their new values.
    pub regs: Vec<RegWrite>,
    /// Set for branches, calls and returns (taken or not).
    pub transfer: Option<Transfer>,
}

impl Insn {
    pub fn clear(&mut self) {
        self.pc = 0;
        self.len = 0;
        self.mem.clear();
        self.regs.clear();
        self.transfer = None;
    }
}

/// A call that left traced code and ran natively (a shared-library call by default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibCall {
    /// Address of the call instruction in traced code (the instruction that left traced code
    /// when no call leads to it, e.g. a tail call through a jump).
    pub site: u64,
    /// Where execution went.
    pub target: u64,
    /// Address execution comes back to when the call returns.
    pub return_to: u64,
    /// The callee's name (imported symbol or the library's dynamic symbol), or `None`.
    pub name: Option<String>,
}

/// A system call, made by traced code or by natively-run code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Syscall {
    /// Address of the `syscall` instruction.
    pub pc: u64,
    pub nr: u64,
    pub args: [u64; 6],
    /// Return value (`-errno` on failure). `None` when the call did not return (exit, execve).
    pub ret: Option<i64>,
    /// True when natively-run code made the call (no `Insn` event for it).
    pub native: bool,
}

/// How the traced program ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// It exited with this code.
    Code(i32),
    /// It was killed by this signal.
    Signal(i32),
}

impl ExitStatus {
    /// The shell convention: the code, or 128 + the signal number.
    pub fn shell_code(self) -> i32 {
        match self {
            ExitStatus::Code(c) => c,
            ExitStatus::Signal(s) => 128 + s,
        }
    }
}

/// One event of the stream.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// The bytes of an instruction, sent once before the first `Insn` at that address, so a
    /// replay can decode without the process.
    Code {
        addr: u64,
        bytes: &'a [u8],
    },
    /// An executed instruction.
    Insn(&'a Insn),
    /// Traced code called into natively-run code. Traced code can run before the matching
    /// `LibReturn`: a signal handler of the program, or `main` of a stripped binary, which the
    /// C runtime calls from inside `__libc_start_main` (its first `Insn` then follows directly).
    LibCall(&'a LibCall),
    /// The native call of the innermost `LibCall` returned to `pc`; `rax` is its return value.
    /// `cost`: what the call cost natively, in instructions or instruction equivalents (see
    /// [`crate::NativeCostMethod`]); it differs from run to run.
    LibReturn {
        pc: u64,
        rax: u64,
        cost: u64,
    },
    Syscall(&'a Syscall),
    /// A signal was delivered to the program while it stood at `pc`.
    Signal {
        signo: i32,
        pc: u64,
    },
    /// Tracing stopped before the program ended (`--max-instructions`, exec, interrupt).
    Detach {
        pc: u64,
    },
    /// The program ended.
    Exit(ExitStatus),
}

/// Receives events. Engines call it once per event, in execution order.
pub trait EventSink {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()>;
}

impl<S: EventSink + ?Sized> EventSink for &mut S {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
        (**self).event(ev)
    }
}

/// Sends every event to two sinks.
pub struct Tee<A, B>(pub A, pub B);

impl<A: EventSink, B: EventSink> EventSink for Tee<A, B> {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
        self.0.event(ev)?;
        self.1.event(ev)
    }
}

/// Discards events (benchmarks, dry runs).
pub struct NullSink;

impl EventSink for NullSink {
    fn event(&mut self, _ev: &Event<'_>) -> io::Result<()> {
        Ok(())
    }
}

/// Keeps every event in memory; for tests of small runs.
#[derive(Default, Debug)]
pub struct VecSink {
    pub events: Vec<OwnedEvent>,
}

/// An owned copy of an [`Event`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedEvent {
    Code { addr: u64, bytes: Vec<u8> },
    Insn(Insn),
    LibCall(LibCall),
    LibReturn { pc: u64, rax: u64, cost: u64 },
    Syscall(Syscall),
    Signal { signo: i32, pc: u64 },
    Detach { pc: u64 },
    Exit(ExitStatus),
}

impl From<&Event<'_>> for OwnedEvent {
    fn from(ev: &Event<'_>) -> Self {
        match *ev {
            Event::Code { addr, bytes } => OwnedEvent::Code {
                addr,
                bytes: bytes.to_vec(),
            },
            Event::Insn(i) => OwnedEvent::Insn(i.clone()),
            Event::LibCall(c) => OwnedEvent::LibCall(c.clone()),
            Event::LibReturn { pc, rax, cost } => OwnedEvent::LibReturn { pc, rax, cost },
            Event::Syscall(s) => OwnedEvent::Syscall(*s),
            Event::Signal { signo, pc } => OwnedEvent::Signal { signo, pc },
            Event::Detach { pc } => OwnedEvent::Detach { pc },
            Event::Exit(s) => OwnedEvent::Exit(s),
        }
    }
}

impl OwnedEvent {
    /// Borrows this event as an [`Event`].
    pub fn as_event(&self) -> Event<'_> {
        match self {
            OwnedEvent::Code { addr, bytes } => Event::Code { addr: *addr, bytes },
            OwnedEvent::Insn(i) => Event::Insn(i),
            OwnedEvent::LibCall(c) => Event::LibCall(c),
            OwnedEvent::LibReturn { pc, rax, cost } => Event::LibReturn {
                pc: *pc,
                rax: *rax,
                cost: *cost,
            },
            OwnedEvent::Syscall(s) => Event::Syscall(s),
            OwnedEvent::Signal { signo, pc } => Event::Signal {
                signo: *signo,
                pc: *pc,
            },
            OwnedEvent::Detach { pc } => Event::Detach { pc: *pc },
            OwnedEvent::Exit(s) => Event::Exit(*s),
        }
    }
}

impl EventSink for VecSink {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
        self.events.push(ev.into());
        Ok(())
    }
}
