//! Runs a program under ptrace and turns its execution into a stream of [`Event`]s.
//!
//! The stream is engine-independent: the tracer consumes [`Event`]s through an [`EventSink`]
//! (live) or a [`record::Recording`] (replayed), and any [`Engine`] can produce them. The
//! reference engine is [`step::StepEngine`], which single-steps the traced code;
//! [`emu::EmulateEngine`] (the default of the command line) interprets it inside polyprof and
//! single-steps only what it does not implement. Both are the one state machine of
//! [`step::Runner`] with a different [`step::Executor`]; differential tests hold their event
//! streams identical.
//!
//! Scope (see ARCHITECTURE.md): the dynamic loader and libc start-up run natively up to the start
//! symbol (`main` by default); from there every instruction of the executable is stepped, while
//! calls into shared libraries run natively and appear as [`Event::LibCall`] /
//! [`Event::LibReturn`] pairs.

pub mod decode;
pub mod emu;
pub mod event;
pub mod libcall;
pub mod mem;
pub mod meter;
pub mod ptrace;
pub mod record;
pub mod step;

pub use emu::EmulateEngine;
pub use event::{
    AccessKind, Event, EventSink, ExitStatus, Insn, LibCall, MemAccess, NullSink, OwnedEvent,
    RegWrite, Syscall, Tee, Transfer, TransferKind, VecSink,
};
pub use meter::{MeterChoice, NativeCostMethod};
pub use step::StepEngine;

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

/// Errors of the runner.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// ptrace(PTRACE_TRACEME) was refused.
    #[error(
        "ptrace is not permitted here: check /proc/sys/kernel/yama/ptrace_scope (0 or 1 allows it), \
         that a container runs with the SYS_PTRACE capability and no seccomp filter blocking \
         ptrace, and that polyprof is not itself being traced by a debugger"
    )]
    PtraceDenied,
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn { program: PathBuf, source: io::Error },
    /// A ptrace or wait call failed while tracing.
    #[error("tracing failed ({what}): {source}")]
    Trace {
        what: &'static str,
        source: io::Error,
    },
    /// The event sink failed (disk full, ...).
    #[error("recording events: {0}")]
    Sink(io::Error),
    /// The executable could not be read.
    #[error(transparent)]
    Symbols(#[from] symbols::Error),
    /// The executable did not show up in the process's memory map.
    #[error("could not find {0} in the process's memory map")]
    NoExeMapping(PathBuf),
}

impl Error {
    pub(crate) fn trace(what: &'static str) -> impl FnOnce(io::Error) -> Error {
        move |source| Error::Trace { what, source }
    }
}

/// Where tracing starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartAt {
    /// At the first execution of this link-time address (a symbol resolved by the caller).
    Address { addr: u64, name: String },
    /// At the ELF entry point (stripped binaries).
    Entry,
}

/// What to run and how to trace it.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Path of the executable to run (already resolved; no `PATH` search happens here).
    pub program: PathBuf,
    /// `argv[0]` as the program will see it.
    pub argv0: OsString,
    /// The program's arguments.
    pub args: Vec<OsString>,
    /// Where tracing starts. Default: set by the caller (usually `main`).
    pub start: StartAt,
    /// Step into shared libraries instead of running their calls natively. Default: false.
    pub trace_libs: bool,
    /// Detach after this many traced instructions; the program then finishes natively.
    /// Default: no limit.
    pub max_instructions: Option<u64>,
    /// Files for the program's standard input, output and error. Default: inherited.
    pub stdin: Option<PathBuf>,
    pub stdout: Option<PathBuf>,
    pub stderr: Option<PathBuf>,
    /// Replace the 16 random bytes the kernel gives the program (`AT_RANDOM`: stack canary,
    /// pointer guard) by fixed ones, so that two runs are comparable (differential tests).
    /// Default: false.
    pub fixed_random: bool,
    /// Checked before every traced instruction: once nonzero (the caller stores the signal
    /// that interrupted it, and kills the program), tracing stops as soon as the program is
    /// gone, even inside a loop the emulator runs without a system call. Default: none.
    pub interrupt: Option<&'static std::sync::atomic::AtomicI32>,
    /// How natively-run calls are measured. Default: the instruction counter when the kernel
    /// grants it, else CPU time.
    pub meter: MeterChoice,
    /// Environment variables set for the program over the ones it inherits. Default: none.
    pub env: Vec<(OsString, OsString)>,
}

impl RunOptions {
    /// Options to run `program` with `args`, tracing from `start`, everything else default.
    pub fn new(program: PathBuf, args: Vec<OsString>, start: StartAt) -> RunOptions {
        RunOptions {
            argv0: program.clone().into_os_string(),
            program,
            args,
            start,
            trace_libs: false,
            max_instructions: None,
            stdin: None,
            stdout: None,
            stderr: None,
            fixed_random: false,
            interrupt: None,
            meter: MeterChoice::Best,
            env: Vec::new(),
        }
    }
}

/// What a run produced besides its events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    /// The engine's name (`step`, `emulate`).
    pub engine: &'static str,
    /// How the program ended; `None` only if it could not be waited for.
    pub exit: Option<ExitStatus>,
    /// Instructions traced (`Insn` events).
    pub instructions: u64,
    /// Instructions executed in the engine's own interpreter (0 for `step`).
    pub emulated: u64,
    /// False when tracing stopped before the program ended (`--max-instructions`, exec, or the
    /// start symbol never ran).
    pub complete: bool,
    /// Things the user should know about the trace's scope, one sentence each.
    pub warnings: Vec<String>,
    /// Runtime address minus link-time address of the executable.
    pub load_bias: u64,
    /// Whether the start point was reached at all.
    pub started: bool,
    /// How the cost of natively-run calls was measured.
    pub native_method: NativeCostMethod,
    /// What the natively-run calls that returned cost in all (the sum of the `cost` of the
    /// `LibReturn` events), in instructions or instruction equivalents.
    pub native_instructions: u64,
    /// The last signal delivered to the program while it was traced: when the program died of
    /// a signal, the one that killed it (where, and for a fault, at which address).
    pub last_signal: Option<SignalInfo>,
}

/// A signal delivered to the traced program, as the kernel described it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SignalInfo {
    pub signo: i32,
    /// Where the program stood (runtime address): for a fault, the faulting instruction.
    pub pc: u64,
    /// `si_code`: positive when the kernel raised the signal (`SEGV_MAPERR`, ...), zero or
    /// negative when a process sent it (`SI_USER`, `SI_TKILL`, ...).
    pub code: i32,
    /// For a fault the kernel raised: the data address (SIGSEGV, SIGBUS) or the instruction
    /// (SIGILL, SIGFPE, SIGTRAP).
    pub addr: Option<u64>,
}

impl SignalInfo {
    /// `SEGV_MAPERR` and the like: what `code` means for this signal, when the kernel raised it.
    pub fn code_name(&self) -> Option<&'static str> {
        let name = match (self.signo, self.code) {
            (libc::SIGSEGV, 1) => "SEGV_MAPERR",
            (libc::SIGSEGV, 2) => "SEGV_ACCERR",
            (libc::SIGSEGV, 3) => "SEGV_BNDERR",
            (libc::SIGSEGV, 4) => "SEGV_PKUERR",
            (libc::SIGBUS, 1) => "BUS_ADRALN",
            (libc::SIGBUS, 2) => "BUS_ADRERR",
            (libc::SIGBUS, 3) => "BUS_OBJERR",
            (libc::SIGILL, 1) => "ILL_ILLOPC",
            (libc::SIGILL, 2) => "ILL_ILLOPN",
            (libc::SIGILL, 3) => "ILL_ILLADR",
            (libc::SIGILL, 4) => "ILL_ILLTRP",
            (libc::SIGILL, 5) => "ILL_PRVOPC",
            (libc::SIGILL, 6) => "ILL_PRVREG",
            (libc::SIGILL, 7) => "ILL_COPROC",
            (libc::SIGILL, 8) => "ILL_BADSTK",
            (libc::SIGFPE, 1) => "FPE_INTDIV",
            (libc::SIGFPE, 2) => "FPE_INTOVF",
            (libc::SIGFPE, 3) => "FPE_FLTDIV",
            (libc::SIGFPE, 4) => "FPE_FLTOVF",
            (libc::SIGFPE, 5) => "FPE_FLTUND",
            (libc::SIGFPE, 6) => "FPE_FLTRES",
            (libc::SIGFPE, 7) => "FPE_FLTINV",
            (libc::SIGFPE, 8) => "FPE_FLTSUB",
            (_, 0x80) => "SI_KERNEL",
            (_, 0) => "SI_USER",
            (_, -6) => "SI_TKILL",
            (_, -1) => "SI_QUEUE",
            _ => return None,
        };
        Some(name)
    }

    /// What the code says, in words (`address not mapped`), when the kernel raised it.
    pub fn code_meaning(&self) -> Option<&'static str> {
        Some(match self.code_name()? {
            "SEGV_MAPERR" => "address not mapped",
            "SEGV_ACCERR" => "no permission to access the address",
            "SEGV_BNDERR" => "out of bounds",
            "SEGV_PKUERR" => "protection key denied access",
            "BUS_ADRALN" => "misaligned address",
            "BUS_ADRERR" => "address past the end of a mapped file",
            "BUS_OBJERR" => "hardware error",
            "ILL_ILLOPC" => "illegal opcode",
            "ILL_ILLOPN" => "illegal operand",
            "ILL_PRVOPC" => "privileged opcode",
            "FPE_INTDIV" => "integer division by zero",
            "FPE_INTOVF" => "integer overflow",
            "FPE_FLTDIV" => "floating-point division by zero",
            "FPE_FLTINV" => "invalid floating-point operation",
            "SI_KERNEL" => {
                "raised by the kernel (often a general-protection fault: a non-canonical address)"
            }
            "SI_USER" => "sent by kill()",
            "SI_TKILL" => "sent by tgkill(), as raise() and abort() do",
            "SI_QUEUE" => "sent by sigqueue()",
            _ => return None,
        })
    }
}

/// An execution engine: runs the program once and sends its events to a sink.
pub trait Engine {
    /// The engine's name, as `--engine` spells it.
    fn name(&self) -> &'static str;
    /// The traced process.
    fn pid(&self) -> i32;
    /// Runtime address minus link-time address of the executable (known from the launch on).
    fn load_bias(&self) -> u64;
    /// Runs the program to its end (or to a detach) and returns the summary.
    fn run(&mut self, sink: &mut dyn EventSink) -> Result<RunSummary, Error>;
}
