//! The `step` engine: single-steps traced code with ptrace. It is the reference every other
//! engine is checked against.
//!
//! States of the tracee, from polyprof's point of view:
//! - *start-up*: runs natively (PTRACE_CONT) until a hardware breakpoint on the start address;
//! - *stepping*: one PTRACE_SINGLESTEP per instruction of traced code;
//! - *native*: runs natively with PTRACE_SYSCALL (so its system calls are still seen) until it
//!   comes back to traced code: a hardware breakpoint on the return address of a library call,
//!   or a system call (such as `rt_sigreturn`) that lands in traced code.
//!
//! Breakpoints are hardware debug registers of the main thread only: the program's code is never
//! patched, so threads and child processes that run natively cannot hit them.

use crate::decode::{DecodeCache, Decoded};
use crate::event::{Event, EventSink, ExitStatus, Insn, LibCall, Syscall};
use crate::meter::NativeMeter;
use crate::ptrace::{self, Regs, Stop};
use crate::{Engine, Error, RunOptions, RunSummary, StartAt};
use libc::pid_t;
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const ADDR_NO_RANDOMIZE: libc::c_ulong = 0x0040000;
/// `si_code` of the stop the kernel reports after setting up a signal handler while stepping.
const SI_HANDLER_ENTRY: i32 = libc::SIGTRAP;

/// Code outside traced code that the tracee runs natively, innermost last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NativeFrame {
    /// A call into a library: comes back at `ret` with the stack pointer at `rsp`; `cost`: the
    /// meter's difference over the stretches it ran natively so far (in the meter's unit).
    /// `callbacks`: the program's functions passed to it as arguments (an OpenMP outlined body,
    /// a `qsort` comparator; 0: none), traced whenever the library runs them; `inside`: how
    /// many of their runs are under way.
    Call {
        ret: u64,
        rsp: u64,
        cost: u64,
        callbacks: [u64; CALLBACK_SLOTS],
        inside: u32,
        site: u64,
    },
    /// Traced code was left some other way (a return into the C runtime, a signal handler
    /// in a library): it comes back after a system call, if ever.
    Out,
}

/// Debug registers left for callback entries once the return breakpoint has one.
const CALLBACK_SLOTS: usize = 3;

/// Callbacks traced per call site of a library function: each costs two stops of the
/// program (about 100 µs), so a `qsort` comparator called a million times would cost
/// minutes. Past it, the site's callbacks run natively (OpenMP's outlined bodies, called
/// once per parallel region, never get there).
const CALLBACKS_PER_SITE: u32 = 2000;

enum Next {
    Step,
    Native,
    Done(ExitStatus),
}

/// Result of resuming the tracee for one single step.
enum StepOutcome {
    /// The instruction ran; registers after it.
    Executed(Regs),
    /// A signal handler was set up; nothing ran yet; registers at the handler's entry.
    HandlerEntered(Regs),
    /// A signal stopped the tracee before the instruction ran.
    Signal(i32),
    /// The program ended.
    Ended(ExitStatus),
    /// The program replaced itself with `execve`; tracing must stop.
    Exec,
}

/// How the engine runs one instruction of traced code: the rest of the state machine (start-up,
/// native library calls, signals, threads, detach, exec, exit) is shared by every engine.
///
/// An executor either runs the instruction itself ([`Executor::execute`]) or declines, and the
/// runner single-steps it in the tracee. Before anything runs in the tracee the runner calls
/// [`Executor::flush`] so the tracee holds the executor's state; afterwards it tells the executor
/// what may have changed.
pub trait Executor {
    /// The engine's name, as `--engine` spells it.
    const NAME: &'static str;
    /// A fresh executor for the traced process `pid`.
    fn new(pid: pid_t) -> Self;
    /// Runs the instruction `d` at `before.rip` inside the engine, leaving the registers after it
    /// in `after`. Returns false, having changed nothing, when the instruction must be
    /// single-stepped in the tracee instead.
    fn execute(&mut self, d: &Decoded, before: &Regs, after: &mut Regs) -> bool;
    /// Makes the tracee's registers and memory equal to the executor's (`regs` are the current
    /// registers), before the tracee runs.
    fn flush(&mut self, regs: &Regs) -> Result<(), Error>;
    /// The tracee single-stepped `d` from `before`: forget what it may have changed.
    fn stepped(&mut self, d: &Decoded, before: &Regs);
    /// The tracee ran natively (or was stopped by a signal): forget everything cached.
    fn invalidate(&mut self);
    /// A system call was seen (it may have changed the memory map).
    fn syscall_seen(&mut self, nr: u64);
    /// Another thread now shares the tracee's memory.
    fn thread_started(&mut self);
    /// Instructions executed inside the engine so far.
    fn emulated(&self) -> u64;
    /// Performs the library function `name`, called with `regs` at its first instruction,
    /// inside the engine when it can (see [`crate::libcall`]), provided the return address
    /// on top of the stack satisfies `returns_ok`; returns the registers after its return and
    /// what it cost in instructions. `None`, having changed nothing: the call runs natively.
    fn library_call(
        &mut self,
        _name: &str,
        _regs: &Regs,
        _returns_ok: &dyn Fn(u64) -> bool,
    ) -> Option<(Regs, u64)> {
        None
    }
}

/// The executor of the `step` engine: single-steps every instruction.
pub struct SingleStep;

impl Executor for SingleStep {
    const NAME: &'static str = "step";
    fn new(_pid: pid_t) -> Self {
        SingleStep
    }
    #[inline(always)]
    fn execute(&mut self, _d: &Decoded, _before: &Regs, _after: &mut Regs) -> bool {
        false
    }
    #[inline(always)]
    fn flush(&mut self, _regs: &Regs) -> Result<(), Error> {
        Ok(())
    }
    #[inline(always)]
    fn stepped(&mut self, _d: &Decoded, _before: &Regs) {}
    #[inline(always)]
    fn invalidate(&mut self) {}
    fn syscall_seen(&mut self, _nr: u64) {}
    fn thread_started(&mut self) {}
    fn emulated(&self) -> u64 {
        0
    }
}

/// The single-stepping engine, the reference.
pub type StepEngine = Runner<SingleStep>;

/// The state machine shared by the engines, parameterised by how one instruction runs.
pub struct Runner<X: Executor> {
    pid: pid_t,
    exec: X,
    opts: RunOptions,
    /// The executable and the libraries mapped beside it.
    symbolizer: symbols::Symbolizer,
    /// Path of the executable as /proc/PID/maps shows it.
    exe_path: PathBuf,
    bias: u64,
    start_addr: u64,
    /// Runtime ranges of the executable's code (ignored with `trace_libs`).
    traced: Vec<(u64, u64)>,
    cache: DecodeCache,
    frames: Vec<NativeFrame>,
    insn: Insn,
    instructions: u64,
    /// Name of the PLT stub most recently jumped or called to.
    pending_plt: Option<String>,
    /// The last call executed: (its address, its return address).
    last_call: (u64, u64),
    /// Traced code that natively-run code is known to call into: `main` of a stripped binary,
    /// passed to `__libc_start_main`. Tracing resumes when it runs.
    callback_entry: Option<u64>,
    /// Callbacks traced so far, by library call site, with the library function's name.
    callbacks_traced: std::collections::HashMap<u64, (u32, String)>,
    /// What debug registers 0 to 3 hold. Writing them costs the kernel an inter-processor
    /// call each time, so a return breakpoint stays armed after it fired (a loop calling a
    /// library function from one call site arms it once) and is cleared only before traced
    /// code runs natively, under single steps.
    armed: [Option<u64>; 4],
    /// Signal to deliver at the next resume.
    pending_signal: i32,
    warnings: Vec<String>,
    untraced_threads: BTreeMap<&'static str, Vec<u64>>,
    /// Measures what natively-run calls cost.
    meter: NativeMeter,
    /// The current native stretch, as metered.
    stretch: Stretch,
    /// What the returned native calls cost in all (instructions or equivalents).
    native_instructions: u64,
    /// The last signal delivered to the program (see `RunSummary::last_signal`).
    last_signal: Option<crate::SignalInfo>,
    incomplete_addresses: bool,
    complete: bool,
    started: bool,
    alive: bool,
}

impl<X: Executor> Runner<X> {
    /// Starts the program stopped at its first instruction (after `execve`), with address-space
    /// randomization off and PTRACE_O_EXITKILL set.
    pub fn launch(opts: RunOptions) -> Result<Runner<X>, Error> {
        let exe = symbols::ElfFile::open(&opts.program)?;
        let pid = spawn_traced(&opts)?;
        let mut engine = Runner {
            pid,
            exec: X::new(pid),
            symbolizer: symbols::Symbolizer::new(exe, Vec::new()),
            exe_path: canonical(&opts.program),
            opts,
            bias: 0,
            start_addr: 0,
            traced: Vec::new(),
            cache: DecodeCache::new(),
            frames: Vec::new(),
            insn: Insn::default(),
            instructions: 0,
            pending_plt: None,
            last_call: (0, 0),
            callback_entry: None,
            callbacks_traced: std::collections::HashMap::new(),
            armed: [None; 4],
            pending_signal: 0,
            warnings: Vec::new(),
            untraced_threads: BTreeMap::new(),
            meter: crate::meter::NativeMeter::none(),
            stretch: Stretch::default(),
            native_instructions: 0,
            last_signal: None,
            incomplete_addresses: false,
            complete: true,
            started: false,
            alive: true,
        };
        engine.attach_setup()?;
        engine.meter = NativeMeter::open(pid, engine.opts.meter);
        if engine.meter.counter_refused() {
            let level = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "?".to_string());
            engine.warnings.push(format!(
                "the kernel refused a counter of the program's instructions \
                 (kernel.perf_event_paranoid is {level}): library calls run natively are \
                 charged their CPU time instead; `sudo sysctl kernel.perf_event_paranoid=2` \
                 lets polyprof count their instructions"
            ));
        }
        Ok(engine)
    }

    /// The executor (statistics of the `emulate` engine's caches, for instance).
    pub fn executor(&self) -> &X {
        &self.exec
    }

    fn attach_setup(&mut self) -> Result<(), Error> {
        match ptrace::wait(self.pid).map_err(Error::trace("waiting for exec"))? {
            Stop::Signal(libc::SIGTRAP) => {}
            Stop::Exited(c) => {
                self.alive = false;
                return Err(Error::Spawn {
                    program: self.opts.program.clone(),
                    source: std::io::Error::other(format!("it exited at once with status {c}")),
                });
            }
            other => {
                return Err(Error::Spawn {
                    program: self.opts.program.clone(),
                    source: std::io::Error::other(format!("unexpected first stop {other:?}")),
                })
            }
        }
        let options = libc::PTRACE_O_EXITKILL
            | libc::PTRACE_O_TRACESYSGOOD
            | libc::PTRACE_O_TRACECLONE
            | libc::PTRACE_O_TRACEFORK
            | libc::PTRACE_O_TRACEVFORK
            | libc::PTRACE_O_TRACEEXEC;
        ptrace::set_options(self.pid, options).map_err(Error::trace("PTRACE_SETOPTIONS"))?;
        if self.opts.fixed_random {
            self.fix_at_random()?;
        }
        self.read_maps()?;
        self.start_addr = match &self.opts.start {
            StartAt::Address { addr, .. } => addr.wrapping_add(self.bias),
            StartAt::Entry => self.symbolizer.main().entry().wrapping_add(self.bias),
        };
        Ok(())
    }

    /// Overwrites the bytes `AT_RANDOM` points to (the program has not run yet).
    fn fix_at_random(&self) -> Result<(), Error> {
        let auxv = std::fs::read(format!("/proc/{}/auxv", self.pid))
            .map_err(Error::trace("reading /proc/PID/auxv"))?;
        let word = |k: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&auxv[8 * k..8 * k + 8]);
            u64::from_ne_bytes(w)
        };
        let addr = (0..auxv.len() / 16)
            .map(|k| (word(2 * k), word(2 * k + 1)))
            .find(|&(t, _)| t == libc::AT_RANDOM)
            .map(|(_, v)| v);
        if let Some(addr) = addr {
            let bytes: Vec<u8> = (0..16u8)
                .map(|b| b.wrapping_mul(37).wrapping_add(11))
                .collect();
            ptrace::write_pieces(self.pid, &[(addr, &bytes)])
                .map_err(Error::trace("writing AT_RANDOM"))?;
        }
        Ok(())
    }

    /// Reads /proc/PID/maps: load bias, the executable's code ranges, libraries for naming.
    fn read_maps(&mut self) -> Result<(), Error> {
        let maps =
            symbols::read_proc_maps(self.pid).map_err(Error::trace("reading /proc/PID/maps"))?;
        if let Ok(p) = std::fs::read_link(format!("/proc/{}/exe", self.pid)) {
            self.exe_path = p;
        }
        let exe_path = self.exe_path.as_path();
        self.bias = self
            .symbolizer
            .main()
            .load_bias(&maps, exe_path)
            .ok_or_else(|| Error::NoExeMapping(exe_path.to_path_buf()))?;
        self.traced = maps
            .iter()
            .filter(|m| m.path.as_deref() == Some(exe_path) && m.is_exec())
            .map(|m| (m.start, m.end))
            .collect();
        self.symbolizer.refresh(maps);
        Ok(())
    }

    fn in_traced(&self, pc: u64) -> bool {
        self.opts.trace_libs || self.traced.iter().any(|&(s, e)| pc >= s && pc < e)
    }

    fn emit(sink: &mut dyn EventSink, ev: Event<'_>) -> Result<(), Error> {
        sink.event(&ev).map_err(Error::Sink)
    }

    /// Emits the delivery of signal `signo` at `pc`, and keeps what the kernel says of it (a
    /// fault's address) in case it kills the program. Called at the signal-delivery stop.
    fn signal_event(&mut self, sink: &mut dyn EventSink, signo: i32, pc: u64) -> Result<(), Error> {
        let (code, addr) = ptrace::siginfo_fault(self.pid).unwrap_or((0, None));
        self.last_signal = Some(crate::SignalInfo {
            signo,
            pc,
            code,
            addr,
        });
        Self::emit(sink, Event::Signal { signo, pc })
    }

    /// Runs natively to the start address.
    fn run_to_start(&mut self, sink: &mut dyn EventSink) -> Result<Next, Error> {
        let pid = self.pid;
        ptrace::set_hw_breakpoint(pid, Some(self.start_addr))
            .map_err(Error::trace("setting a hardware breakpoint"))?;
        let mut sig = 0;
        loop {
            ptrace::cont(pid, sig).map_err(Error::trace("PTRACE_CONT"))?;
            sig = 0;
            match ptrace::wait(pid).map_err(Error::trace("waitpid"))? {
                Stop::Signal(libc::SIGTRAP)
                    if ptrace::hw_breakpoint_hit(pid).map_err(Error::trace("reading DR6"))? =>
                {
                    if let Some(next) = self.calibrate_meter(sink)? {
                        return Ok(next);
                    }
                    ptrace::set_hw_breakpoint(pid, None)
                        .map_err(Error::trace("clearing a hardware breakpoint"))?;
                    self.started = true;
                    // Libraries are mapped by now; read the map again for naming.
                    self.read_maps()?;
                    return Ok(Next::Step);
                }
                Stop::Signal(s) => sig = self.forward_signal(s),
                Stop::Event(e) => {
                    if let Some(next) = self.handle_event(e, sink)? {
                        return Ok(next);
                    }
                }
                Stop::Syscall => {}
                Stop::Exited(c) => return self.ended(sink, ExitStatus::Code(c)),
                Stop::Killed(s) => return self.ended(sink, ExitStatus::Signal(s)),
            }
        }
    }

    /// Measures, for the CPU-time meter, what the kernel's work to stop and resume the tracee
    /// costs it: every native call pays it, and it is no part of the call's cost. Standing on
    /// the start breakpoint, the tracee is resumed as for a library call (PTRACE_SYSCALL) with
    /// the resume flag cleared, so the breakpoint fires again before any instruction runs; then
    /// it is made to run `getpid` from a `syscall` instruction of its libraries, to time the
    /// pair of stops PTRACE_SYSCALL makes around a system call. Its registers are restored.
    fn calibrate_meter(&mut self, sink: &mut dyn EventSink) -> Result<Option<Next>, Error> {
        const RF: u64 = 1 << 16;
        const TRIPS: usize = 31;
        if !matches!(self.meter.method(), crate::NativeCostMethod::CpuTime { .. }) {
            return Ok(None);
        }
        let pid = self.pid;
        let saved = ptrace::get_regs(pid).map_err(Error::trace("GETREGS"))?;
        let mut trap = saved;
        trap.eflags &= !RF;
        let mut traps = Vec::with_capacity(TRIPS);
        let mut syscalls = Vec::with_capacity(TRIPS);
        let mut ended = None;
        'trips: {
            for _ in 0..TRIPS {
                match self.calibration_trip(sink, &trap, 1)? {
                    Trip::Cost(c) => traps.push(c),
                    Trip::GaveUp => break 'trips,
                    Trip::Ended(next) => {
                        ended = Some(next);
                        break 'trips;
                    }
                }
            }
            let Some(at) = self.syscall_instruction() else {
                break 'trips;
            };
            let mut call = saved;
            call.rip = at;
            call.rax = libc::SYS_getpid as u64;
            for _ in 0..TRIPS {
                match self.calibration_trip(sink, &call, 2)? {
                    Trip::Cost(c) => syscalls.push(c),
                    Trip::GaveUp => break 'trips,
                    Trip::Ended(next) => {
                        ended = Some(next);
                        break 'trips;
                    }
                }
            }
        }
        if ended.is_some() {
            return Ok(ended);
        }
        ptrace::set_regs(pid, &saved).map_err(Error::trace("SETREGS"))?;
        let median = |v: &mut Vec<u64>| {
            v.sort_unstable();
            v.get(v.len() / 2).copied()
        };
        let trap = median(&mut traps).unwrap_or(0);
        // Without a syscall instruction to time, the breakpoint's figure stands for both.
        let syscall = median(&mut syscalls).unwrap_or(trap);
        self.meter.set_overheads(trap, syscall);
        Ok(None)
    }

    /// Resumes the tracee from `regs` with PTRACE_SYSCALL until `stops` stops of the kind
    /// calibration expects (the breakpoint, or a system call's entry and exit) and returns
    /// what its CPU clock advanced up to the first: a resume and a stop, as a native stretch
    /// pays them (the time from a system call's entry stop to its exit stop is not charged).
    fn calibration_trip(
        &mut self,
        sink: &mut dyn EventSink,
        regs: &Regs,
        stops: usize,
    ) -> Result<Trip, Error> {
        let pid = self.pid;
        ptrace::set_regs(pid, regs).map_err(Error::trace("SETREGS"))?;
        let Some(before) = self.meter.read() else {
            return Ok(Trip::GaveUp);
        };
        let mut first = None;
        for _ in 0..stops {
            ptrace::cont_syscall(pid, 0).map_err(Error::trace("PTRACE_SYSCALL"))?;
            match ptrace::wait(pid).map_err(Error::trace("waitpid"))? {
                Stop::Signal(libc::SIGTRAP)
                    if stops == 1
                        && ptrace::hw_breakpoint_hit(pid)
                            .map_err(Error::trace("reading DR6"))? => {}
                Stop::Syscall if stops == 2 => {}
                Stop::Signal(s) => {
                    // A signal came in between: it is delivered once tracing starts.
                    self.pending_signal = self.forward_signal(s);
                    return Ok(Trip::GaveUp);
                }
                Stop::Exited(c) => return Ok(Trip::Ended(self.ended(sink, ExitStatus::Code(c))?)),
                Stop::Killed(s) => {
                    return Ok(Trip::Ended(self.ended(sink, ExitStatus::Signal(s))?))
                }
                Stop::Syscall | Stop::Event(_) => return Ok(Trip::GaveUp),
            }
            if first.is_none() {
                first = self.meter.read();
            }
        }
        Ok(match first {
            Some(after) => Trip::Cost(after.saturating_sub(before)),
            None => Trip::GaveUp,
        })
    }

    /// The address of a `syscall` instruction (bytes 0f 05) in the tracee's libraries or vDSO.
    fn syscall_instruction(&self) -> Option<u64> {
        let maps = symbols::read_proc_maps(self.pid).ok()?;
        let mut buf = vec![0u8; 1 << 16];
        maps.iter()
            .filter(|m| m.is_exec() && !self.in_traced(m.start))
            .find_map(|m| {
                let n = ptrace::read_memory(self.pid, m.start, &mut buf[..]);
                let n = n.min((m.end - m.start) as usize);
                buf[..n]
                    .windows(2)
                    .position(|w| w == [0x0f, 0x05])
                    .map(|i| m.start + i as u64)
            })
    }

    /// A signal arriving while the tracee runs natively before the start or after a detach:
    /// returns the signal to inject (0 for group-stops, which must not be re-injected).
    fn forward_signal(&self, sig: i32) -> i32 {
        if matches!(
            sig,
            libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
        ) && ptrace::siginfo_code(self.pid).is_err()
        {
            // A group-stop (GETSIGINFO fails for those): resume without re-injecting.
            return 0;
        }
        sig
    }

    fn ended(&mut self, sink: &mut dyn EventSink, status: ExitStatus) -> Result<Next, Error> {
        self.alive = false;
        Self::emit(sink, Event::Exit(status))?;
        Ok(Next::Done(status))
    }

    /// Handles a PTRACE_EVENT stop of the main thread. Returns `Some` when tracing must stop.
    fn handle_event(
        &mut self,
        event: i32,
        sink: &mut dyn EventSink,
    ) -> Result<Option<Next>, Error> {
        match event {
            libc::PTRACE_EVENT_CLONE | libc::PTRACE_EVENT_FORK | libc::PTRACE_EVENT_VFORK => {
                let child = ptrace::event_msg(self.pid).map_err(Error::trace("GETEVENTMSG"))?;
                // The new task starts stopped and traced; let it go, untraced.
                let tid = child as pid_t;
                if let Ok(Stop::Signal(_)) = ptrace::wait(tid) {
                    let _ = ptrace::detach(tid, 0);
                }
                let what = if event == libc::PTRACE_EVENT_CLONE {
                    "thread"
                } else {
                    "child process"
                };
                if event == libc::PTRACE_EVENT_CLONE {
                    self.exec.thread_started();
                }
                self.untraced_threads.entry(what).or_default().push(child);
                Ok(None)
            }
            libc::PTRACE_EVENT_EXEC => {
                self.warnings.push(
                    "the program replaced itself with execve; the new program ran untraced"
                        .to_string(),
                );
                self.detach(sink, 0).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Stops tracing and lets the program finish natively; waits for its end.
    fn detach(&mut self, sink: &mut dyn EventSink, sig: i32) -> Result<Next, Error> {
        let pid = self.pid;
        let pc = ptrace::get_regs(pid).map(|r| r.rip).unwrap_or(0);
        Self::emit(sink, Event::Detach { pc })?;
        self.complete = false;
        let _ = self.set_breakpoints([None; 4]);
        self.clear_stray_trap_flag();
        ptrace::detach(pid, sig).map_err(Error::trace("PTRACE_DETACH"))?;
        // Still our child: wait for its end the ordinary way.
        loop {
            let mut status = 0;
            // SAFETY: plain syscall with a pointer to a local.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            if r == -1 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::Trace {
                    what: "waitpid after detach",
                    source: e,
                });
            }
            if libc::WIFEXITED(status) {
                return self.ended(sink, ExitStatus::Code(libc::WEXITSTATUS(status)));
            }
            if libc::WIFSIGNALED(status) {
                return self.ended(sink, ExitStatus::Signal(libc::WTERMSIG(status)));
            }
        }
    }

    /// Resumes for one single step (delivering `sig`) and classifies what happened.
    fn step_once(&mut self, sig: i32, sink: &mut dyn EventSink) -> Result<StepOutcome, Error> {
        let pid = self.pid;
        ptrace::single_step(pid, sig).map_err(Error::trace("PTRACE_SINGLESTEP"))?;
        loop {
            match ptrace::wait(pid).map_err(Error::trace("waitpid"))? {
                Stop::Signal(libc::SIGTRAP) => {
                    let regs = ptrace::get_regs(pid).map_err(Error::trace("GETREGS"))?;
                    if sig != 0
                        && ptrace::siginfo_code(pid).map_err(Error::trace("GETSIGINFO"))?
                            == SI_HANDLER_ENTRY
                    {
                        return Ok(StepOutcome::HandlerEntered(regs));
                    }
                    return Ok(StepOutcome::Executed(regs));
                }
                Stop::Signal(s) => {
                    if self.forward_signal(s) == 0 {
                        ptrace::single_step(pid, 0).map_err(Error::trace("PTRACE_SINGLESTEP"))?;
                        continue;
                    }
                    return Ok(StepOutcome::Signal(s));
                }
                Stop::Event(libc::PTRACE_EVENT_EXEC) => return Ok(StepOutcome::Exec),
                Stop::Event(e) => {
                    self.handle_event(e, sink)?;
                    // The instruction (a system call) is still in progress: finish the step.
                    ptrace::single_step(pid, 0).map_err(Error::trace("PTRACE_SINGLESTEP"))?;
                }
                Stop::Syscall => {
                    ptrace::single_step(pid, 0).map_err(Error::trace("PTRACE_SINGLESTEP"))?;
                }
                Stop::Exited(c) => return Ok(StepOutcome::Ended(ExitStatus::Code(c))),
                Stop::Killed(s) => return Ok(StepOutcome::Ended(ExitStatus::Signal(s))),
            }
        }
    }

    /// Steps traced code until it leaves it or the program ends.
    fn run_stepping(&mut self, sink: &mut dyn EventSink, mut regs: Regs) -> Result<Next, Error> {
        let pid = self.pid;
        // The tracee ran since the executor last looked at it.
        self.exec.invalidate();
        let mut scratch = regs;
        loop {
            if let Some(max) = self.opts.max_instructions {
                if self.instructions >= max {
                    self.exec.flush(&regs)?;
                    let sig = std::mem::take(&mut self.pending_signal);
                    return self.detach(sink, sig);
                }
            }
            let pc = regs.rip;
            let (d, fresh) = self
                .cache
                .get_or_decode(pc, |buf| ptrace::read_memory(pid, pc, buf));
            if fresh {
                Self::emit(
                    sink,
                    Event::Code {
                        addr: pc,
                        bytes: &d.bytes[..d.len as usize],
                    },
                )?;
            }
            // After an interrupt, step through the kernel: it reports the killed program.
            let interrupted = self
                .opts
                .interrupt
                .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed) != 0);
            if self.pending_signal == 0
                && !interrupted
                && self.exec.execute(&d, &regs, &mut scratch)
            {
                // Ran inside the engine.
                d.fill_event(pc, &regs, &scratch, &mut self.insn);
                self.instructions += 1;
                Self::emit(sink, Event::Insn(&self.insn))?;
                if d.transfer_kind().is_some() {
                    self.note_plt_target(&d, pc, scratch.rip);
                }
                regs = scratch;
                if !self.in_traced(regs.rip) {
                    if let Some(back) = self.emulated_call(sink, &d, pc, &regs)? {
                        regs = back;
                        continue;
                    }
                    self.exec.flush(&regs)?;
                    self.leave_traced(sink, &d, pc, &regs)?;
                    return Ok(Next::Native);
                }
                continue;
            }
            self.exec.flush(&regs)?;
            // A return breakpoint left armed would fire before this instruction runs.
            self.disarm()?;
            let sig = std::mem::take(&mut self.pending_signal);
            let outcome = self.step_once(sig, sink)?;
            match outcome {
                StepOutcome::Executed(_) => self.exec.stepped(&d, &regs),
                _ => self.exec.invalidate(),
            }
            let after = match outcome {
                StepOutcome::Executed(after) => after,
                StepOutcome::HandlerEntered(at) => {
                    regs = at;
                    if self.in_traced(regs.rip) {
                        continue;
                    }
                    self.frames.push(NativeFrame::Out);
                    return Ok(Next::Native);
                }
                StepOutcome::Signal(s) => {
                    self.signal_event(sink, s, pc)?;
                    self.pending_signal = s;
                    continue;
                }
                StepOutcome::Ended(status) => {
                    // The instruction ran and ended the program (exit_group, a fatal fault
                    // already reported as a signal, or a kill from outside).
                    if d.is_syscall && matches!(status, ExitStatus::Code(_)) {
                        d.fill_event(pc, &regs, &regs, &mut self.insn);
                        self.insn.regs.clear();
                        self.instructions += 1;
                        Self::emit(sink, Event::Insn(&self.insn))?;
                        self.emit_syscall(sink, pc, &regs, None, false)?;
                    }
                    return self.ended(sink, status);
                }
                StepOutcome::Exec => {
                    self.warnings.push(
                        "the program replaced itself with execve; the new program ran untraced"
                            .to_string(),
                    );
                    return self.detach(sink, 0);
                }
            };
            if !d.fill_event(pc, &regs, &after, &mut self.insn) && !self.incomplete_addresses {
                self.incomplete_addresses = true;
                self.warnings.push(
                    "some vector-indexed (gather/scatter) memory accesses have no recorded address"
                        .to_string(),
                );
            }
            self.instructions += 1;
            Self::emit(sink, Event::Insn(&self.insn))?;
            if d.is_syscall {
                self.emit_syscall(sink, pc, &regs, Some(after.rax as i64), false)?;
            }
            if d.is_int3 {
                // The program's own breakpoint: it raises SIGTRAP as it would untraced.
                self.pending_signal = libc::SIGTRAP;
            }
            self.note_plt_target(&d, pc, after.rip);
            regs = after;
            if !self.in_traced(regs.rip) {
                self.leave_traced(sink, &d, pc, &regs)?;
                return Ok(Next::Native);
            }
        }
    }

    fn emit_syscall(
        &mut self,
        sink: &mut dyn EventSink,
        pc: u64,
        before: &Regs,
        ret: Option<i64>,
        native: bool,
    ) -> Result<(), Error> {
        let nr = if native { before.orig_rax } else { before.rax };
        self.exec.syscall_seen(nr);
        let mut args = [
            before.rdi, before.rsi, before.rdx, before.r10, before.r8, before.r9,
        ];
        if native {
            // Registers the call does not take hold whatever natively-run code left there,
            // which depends on whether earlier library calls ran natively or in the engine
            // (see `crate::libcall`): they are not part of the event.
            for a in &mut args[syscall_arity(nr)..] {
                *a = 0;
            }
        }
        let s = Syscall {
            pc,
            nr,
            args,
            ret,
            native,
        };
        Self::emit(sink, Event::Syscall(&s))
    }

    /// Remembers the imported name of a PLT stub that a call or jump goes to, so the library
    /// call it leads to is named even when lazy binding goes through the dynamic loader first.
    fn note_plt_target(&mut self, d: &Decoded, pc: u64, target: u64) {
        match d.transfer_kind() {
            None => return,
            Some(crate::TransferKind::Call) => {
                self.last_call = (pc, pc.wrapping_add(u64::from(d.len)));
            }
            Some(_) => {}
        }
        let exe = self.symbolizer.main();
        if let Some(name) = exe.import_for_plt_stub(target.wrapping_sub(self.bias)) {
            self.pending_plt = Some(name.to_string());
        }
    }

    /// Traced code was left at `regs.rip` by the instruction `d` at `pc`.
    fn leave_traced(
        &mut self,
        sink: &mut dyn EventSink,
        d: &Decoded,
        pc: u64,
        regs: &Regs,
    ) -> Result<(), Error> {
        use crate::event::TransferKind::{Call, Jump};
        let target = regs.rip;
        // A call leaves its return address on top of the stack. A jump (a PLT stub, a tail
        // call) finds it there too, except from the lazy-binding PLT0 stub, which has pushed
        // two more words (relocation index, link map) on the way to the dynamic loader.
        let slots = match d.transfer_kind() {
            Some(Call) => 1,
            Some(Jump) => 3,
            _ => 0,
        };
        let mut stack = [0u8; 24];
        let read = ptrace::read_memory(self.pid, regs.rsp, &mut stack[..slots * 8]) / 8;
        let found = (0..read).find_map(|k| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&stack[k * 8..k * 8 + 8]);
            let v = u64::from_ne_bytes(w);
            self.in_traced(v).then_some((k as u64, v))
        });
        let Some((k, ret)) = found else {
            self.pending_plt = None;
            if d.transfer_kind() == Some(crate::event::TransferKind::Return) {
                // A callback returning to the library that called it: the call goes on.
                if let Some(NativeFrame::Call { inside, .. }) = self.frames.last_mut() {
                    if *inside > 0 {
                        *inside -= 1;
                        return Ok(());
                    }
                }
            }
            self.frames.push(NativeFrame::Out);
            return Ok(());
        };
        let name = self.callee_name(target);
        if self.opts.start == StartAt::Entry
            && name.as_deref() == Some("__libc_start_main")
            && self.in_traced(regs.rdi)
        {
            // Without symbols, tracing starts at the entry point; the C runtime then calls
            // `main` (its first argument) natively. Catch that call.
            self.callback_entry = Some(regs.rdi);
        }
        let site = self.call_site(pc, ret);
        let spent = self.callbacks_traced.get(&site).map_or(0, |c| c.0);
        let callbacks =
            if name.as_deref() == Some("__libc_start_main") || spent >= CALLBACKS_PER_SITE {
                [0; CALLBACK_SLOTS]
            } else {
                self.callbacks_in(regs)
            };
        if callbacks[0] != 0 && spent == 0 {
            let shown = name.clone().unwrap_or_else(|| format!("{target:#x}"));
            self.callbacks_traced.insert(site, (0, shown));
        }
        self.frames.push(NativeFrame::Call {
            ret,
            rsp: regs.rsp.wrapping_add(8 * k + 8),
            cost: 0,
            callbacks,
            inside: 0,
            site,
        });
        let call = LibCall {
            site,
            target,
            return_to: ret,
            name,
        };
        Self::emit(sink, Event::LibCall(&call))
    }

    /// The program's functions among a library call's register arguments: where the library
    /// may call back into the program (GOMP_parallel's outlined body, qsort's comparator,
    /// pthread_once's routine). A value counts when it is the start of a function of the
    /// program, or, without symbols, any address of its code.
    fn callbacks_in(&self, regs: &Regs) -> [u64; CALLBACK_SLOTS] {
        let mut out = [0; CALLBACK_SLOTS];
        let mut n = 0;
        for v in [regs.rdi, regs.rsi, regs.rdx, regs.rcx, regs.r8, regs.r9] {
            if n == out.len() || self.opts.trace_libs {
                break;
            }
            if v == 0 || !self.in_traced(v) || out[..n].contains(&v) {
                continue;
            }
            let entry = match self.symbolizer.resolve(v) {
                Some(r) => r
                    .file
                    .function_at(r.link_addr)
                    .is_none_or(|f| f.address == r.link_addr),
                None => true,
            };
            if entry {
                out[n] = v;
                n += 1;
            }
        }
        out
    }

    /// Where a library call returning to `ret` was made, left at `pc`: the call in the
    /// program's code, not the PLT stub that left it.
    fn call_site(&self, pc: u64, ret: u64) -> u64 {
        if self.last_call.1 == ret {
            self.last_call.0
        } else {
            pc
        }
    }

    /// A library call the executor performs itself (a plain call or a PLT stub's jump, the
    /// return address on top of the stack): the same `LibCall` and `LibReturn` as when it runs
    /// natively, without the tracee running. The registers after it, or `None`, having
    /// changed nothing, when it must run natively.
    fn emulated_call(
        &mut self,
        sink: &mut dyn EventSink,
        d: &Decoded,
        pc: u64,
        regs: &Regs,
    ) -> Result<Option<Regs>, Error> {
        use crate::event::TransferKind::{Call, Jump};
        if !matches!(d.transfer_kind(), Some(Call | Jump)) || self.opts.trace_libs {
            return Ok(None);
        }
        let target = regs.rip;
        let saved = self.pending_plt.clone();
        let Some(name) = self.callee_name(target) else {
            self.pending_plt = saved;
            return Ok(None);
        };
        let traced = &self.traced;
        let returns_ok = |ret: u64| traced.iter().any(|&(s, e)| ret >= s && ret < e);
        let Some((after, cost)) = self.exec.library_call(&name, regs, &returns_ok) else {
            self.pending_plt = saved;
            return Ok(None);
        };
        let ret = after.rip;
        // Counted as a native call's cost is: `native_instructions` is the sum of the
        // `LibReturn` costs, whoever ran the call.
        self.native_instructions += cost;
        let call = LibCall {
            site: self.call_site(pc, ret),
            target,
            return_to: ret,
            name: Some(name),
        };
        Self::emit(sink, Event::LibCall(&call))?;
        Self::emit(
            sink,
            Event::LibReturn {
                pc: ret,
                rax: after.rax,
                cost,
            },
        )?;
        Ok(Some(after))
    }

    /// Names the callee of a library call: the GOT slot the leaving jump read, else the PLT
    /// stub on the way, else the library's symbol at the target.
    fn callee_name(&mut self, target: u64) -> Option<String> {
        let pending = self.pending_plt.take();
        let via_slot = self
            .insn
            .mem
            .iter()
            .find(|a| a.kind == crate::AccessKind::Read && a.size == 8)
            .and_then(|a| self.symbolizer.import_for_got_slot(a.addr))
            .map(str::to_string);
        via_slot.or(pending).or_else(|| {
            if self.symbolizer.mapping_at(target).is_none() {
                // A library loaded after start-up (dlopen): read the map again.
                let _ = self.read_maps();
            }
            let r = self.symbolizer.resolve(target)?;
            r.file.function_at(r.link_addr).map(|f| f.name.clone())
        })
    }

    /// Runs natively until execution comes back to traced code, metering the stretch.
    fn run_native(&mut self, sink: &mut dyn EventSink) -> Result<(Next, Option<Regs>), Error> {
        self.stretch = Stretch {
            mark: self.meter.read(),
            faults: self.meter.faults(),
            ..Stretch::default()
        };
        let r = self.run_native_unmetered(sink);
        self.charge_native();
        r
    }

    /// Charges what the tracee spent since the current native stretch began, less what the
    /// kernel spent stopping and resuming it for polyprof, to the innermost pending library
    /// call (code a library runs outside any call, such as the C runtime after `main`
    /// returns, is charged to nothing).
    fn charge_native(&mut self) {
        let st = std::mem::take(&mut self.stretch);
        let Some(mark) = st.mark else {
            return;
        };
        let Some(now) = self.meter.read() else {
            return;
        };
        // Each system call left one stop outside the time excluded (its entry stop and the
        // resume after its exit stop); every other trip was a breakpoint or a single step.
        let (trap, syscall) = self.meter.overheads();
        let traps = st.trips.saturating_sub(2 * st.syscalls);
        let stops = trap.saturating_mul(traps) + syscall.saturating_mul(st.syscalls);
        let faults = st
            .faults
            .zip(self.meter.faults())
            .map_or(0, |(a, b)| b.saturating_sub(a));
        let spent = now
            .saturating_sub(mark)
            .saturating_sub(st.excluded)
            .saturating_sub(stops)
            .saturating_sub(self.meter.fault_cost(faults));
        let call = self.frames.iter_mut().rev().find_map(|f| match f {
            NativeFrame::Call { cost, .. } => Some(cost),
            NativeFrame::Out => None,
        });
        if let Some(cost) = call {
            *cost += spent;
        }
    }

    fn run_native_unmetered(
        &mut self,
        sink: &mut dyn EventSink,
    ) -> Result<(Next, Option<Regs>), Error> {
        let pid = self.pid;
        self.clear_stray_trap_flag();
        self.arm_innermost_call()?;
        let mut in_syscall: Option<Regs> = None;
        loop {
            let sig = std::mem::take(&mut self.pending_signal);
            if sig != 0 {
                // Deliver with a single step, to see whether a traced handler gets control.
                self.stretch.trips += 1;
                match self.step_once(sig, sink)? {
                    StepOutcome::HandlerEntered(regs) if self.in_traced(regs.rip) => {
                        return Ok((Next::Step, Some(regs)));
                    }
                    StepOutcome::HandlerEntered(_) | StepOutcome::Executed(_) => {}
                    StepOutcome::Signal(s) => {
                        let pc = ptrace::get_regs(pid).map(|r| r.rip).unwrap_or(0);
                        self.signal_event(sink, s, pc)?;
                        self.pending_signal = s;
                        continue;
                    }
                    StepOutcome::Ended(status) => return Ok((self.ended(sink, status)?, None)),
                    StepOutcome::Exec => {
                        self.warnings.push(
                            "the program replaced itself with execve; the new program ran untraced"
                                .to_string(),
                        );
                        return Ok((self.detach(sink, 0)?, None));
                    }
                }
                // The single step may have stopped on the armed return address.
                match self.check_return(sink)? {
                    ReturnCheck::Back(regs) => return Ok((Next::Step, Some(regs))),
                    ReturnCheck::Ended(next) => return Ok((next, None)),
                    ReturnCheck::Passed | ReturnCheck::NotOurs => {}
                }
            }
            self.stretch.trips += 1;
            ptrace::cont_syscall(pid, 0).map_err(Error::trace("PTRACE_SYSCALL"))?;
            match ptrace::wait(pid).map_err(Error::trace("waitpid"))? {
                Stop::Syscall => {
                    self.stretch.syscall_stop(&self.meter, in_syscall.is_none());
                    let regs = ptrace::get_regs(pid).map_err(Error::trace("GETREGS"))?;
                    match in_syscall.take() {
                        None => in_syscall = Some(regs),
                        Some(entry) => {
                            let pc = entry.rip.wrapping_sub(2);
                            self.emit_syscall(sink, pc, &entry, Some(regs.rax as i64), true)?;
                            if matches!(self.frames.last(), Some(NativeFrame::Out))
                                && self.in_traced(regs.rip)
                            {
                                self.frames.pop();
                                return Ok((Next::Step, Some(regs)));
                            }
                        }
                    }
                }
                Stop::Signal(libc::SIGTRAP) => match self.check_return(sink)? {
                    ReturnCheck::Back(regs) => return Ok((Next::Step, Some(regs))),
                    ReturnCheck::Ended(next) => return Ok((next, None)),
                    ReturnCheck::Passed => {}
                    ReturnCheck::NotOurs => {
                        // The program's own SIGTRAP (int3, raise): deliver it.
                        let pc = ptrace::get_regs(pid).map(|r| r.rip).unwrap_or(0);
                        let signo = libc::SIGTRAP;
                        self.signal_event(sink, signo, pc)?;
                        self.pending_signal = signo;
                    }
                },
                Stop::Signal(s) => {
                    let s = self.forward_signal(s);
                    if s != 0 {
                        let pc = ptrace::get_regs(pid).map(|r| r.rip).unwrap_or(0);
                        self.signal_event(sink, s, pc)?;
                        self.pending_signal = s;
                    }
                }
                Stop::Event(e) => {
                    if let Some(next) = self.handle_event(e, sink)? {
                        return Ok((next, None));
                    }
                }
                Stop::Exited(c) => {
                    if let Some(entry) = in_syscall.take() {
                        let pc = entry.rip.wrapping_sub(2);
                        self.emit_syscall(sink, pc, &entry, None, true)?;
                    }
                    return Ok((self.ended(sink, ExitStatus::Code(c))?, None));
                }
                Stop::Killed(s) => return Ok((self.ended(sink, ExitStatus::Signal(s))?, None)),
            }
        }
    }

    /// Clears TF before the tracee runs natively. After a single step over `popf` the kernel
    /// no longer knows that TF was ptrace's own, so PTRACE_SYSCALL/CONT/DETACH would leave it set
    /// and the program would die of a SIGTRAP at its next instruction. (A program that sets TF
    /// itself loses it here; none of the supported kinds of program do.)
    fn clear_stray_trap_flag(&self) {
        const TF: u64 = 0x100;
        if let Ok(mut regs) = ptrace::get_regs(self.pid) {
            if regs.eflags & TF != 0 {
                regs.eflags &= !TF;
                let _ = ptrace::set_regs(self.pid, &regs);
            }
        }
    }

    /// Sets debug registers 0 to 3, unless they already hold `want`.
    fn set_breakpoints(&mut self, want: [Option<u64>; 4]) -> Result<(), Error> {
        if self.armed != want {
            // Unknown after a failure: write again next time.
            self.armed = [Some(u64::MAX); 4];
            ptrace::set_hw_breakpoints(self.pid, want)
                .map_err(Error::trace("setting a hardware breakpoint"))?;
            self.armed = want;
        }
        Ok(())
    }

    fn disarm(&mut self) -> Result<(), Error> {
        self.set_breakpoints([None; 4])
    }

    /// Arms the breakpoints on the return address of the innermost pending library call, on
    /// the known callback entry and on the program's functions that call was given.
    fn arm_innermost_call(&mut self) -> Result<(), Error> {
        let (ret, callbacks) = self
            .frames
            .iter()
            .rev()
            .find_map(|f| match *f {
                NativeFrame::Call { ret, callbacks, .. } => Some((Some(ret), callbacks)),
                NativeFrame::Out => None,
            })
            .unwrap_or((None, [0; CALLBACK_SLOTS]));
        let mut want = [ret, None, None, None];
        let entries = self.callback_entry.into_iter();
        let given = callbacks.into_iter().filter(|&c| c != 0);
        for (slot, a) in want[1..].iter_mut().zip(entries.chain(given)) {
            *slot = Some(a);
        }
        self.set_breakpoints(want)
    }

    /// After a SIGTRAP while running natively: was it the return breakpoint, and is execution
    /// back in traced code?
    fn check_return(&mut self, sink: &mut dyn EventSink) -> Result<ReturnCheck, Error> {
        let pid = self.pid;
        let hit = ptrace::hw_breakpoints_hit(pid).map_err(Error::trace("reading DR6"))?;
        if hit & 0xf == 0 {
            return Ok(ReturnCheck::NotOurs);
        }
        let regs = ptrace::get_regs(pid).map_err(Error::trace("GETREGS"))?;
        if hit & 0xe != 0 && self.callback_entry == Some(regs.rip) {
            self.callback_entry = None;
            return Ok(ReturnCheck::Back(regs));
        }
        if hit & 0xe != 0 {
            // The library calls back into the program: trace the callback.
            let call = self.frames.iter_mut().rev().find_map(|f| match f {
                NativeFrame::Call {
                    callbacks,
                    inside,
                    site,
                    ..
                } => Some((callbacks, inside, *site)),
                NativeFrame::Out => None,
            });
            if let Some((callbacks, inside, site)) = call {
                if callbacks.contains(&regs.rip) {
                    *inside += 1;
                    let n = &mut self.callbacks_traced.entry(site).or_default().0;
                    *n += 1;
                    if *n >= CALLBACKS_PER_SITE {
                        // The rest of this call's callbacks run natively.
                        *callbacks = [0; CALLBACK_SLOTS];
                    }
                    return Ok(ReturnCheck::Back(regs));
                }
            }
        }
        let here = self.frames.iter().rposition(|f| {
            matches!(*f, NativeFrame::Call { ret, rsp, .. } if ret == regs.rip && rsp == regs.rsp)
        });
        if let Some(i) = here {
            self.charge_native();
            // Calls inside it that never returned (a longjmp out of them) are part of it.
            let spent: u64 = self.frames[i..]
                .iter()
                .map(|f| match *f {
                    NativeFrame::Call { cost, .. } => cost,
                    NativeFrame::Out => 0,
                })
                .sum();
            let cost = self.meter.instructions(spent);
            self.native_instructions += cost;
            self.frames.truncate(i);
            Self::emit(
                sink,
                Event::LibReturn {
                    pc: regs.rip,
                    rax: regs.rax,
                    cost,
                },
            )?;
            return Ok(ReturnCheck::Back(regs));
        }
        // The return address ran at another stack depth (code reached again from inside the
        // library): step over it with the breakpoints off, then re-arm.
        self.disarm()?;
        self.stretch.trips += 1;
        match self.step_once(0, sink)? {
            StepOutcome::Ended(status) => return Ok(ReturnCheck::Ended(self.ended(sink, status)?)),
            StepOutcome::Exec => return Ok(ReturnCheck::Ended(self.detach(sink, 0)?)),
            StepOutcome::Signal(s) => self.pending_signal = s,
            StepOutcome::Executed(_) | StepOutcome::HandlerEntered(_) => {}
        }
        self.arm_innermost_call()?;
        Ok(ReturnCheck::Passed)
    }

    fn warnings(&self) -> Vec<String> {
        let mut w = self.warnings.clone();
        if !self.started {
            let what = match &self.opts.start {
                StartAt::Address { name, .. } => format!("`{name}`"),
                StartAt::Entry => "the entry point".to_string(),
            };
            w.push(format!(
                "the program ended before reaching {what}; nothing was traced"
            ));
        }
        let mut spent: Vec<&str> = self
            .callbacks_traced
            .values()
            .filter(|(n, _)| *n >= CALLBACKS_PER_SITE)
            .map(|(_, name)| name.as_str())
            .collect();
        spent.sort_unstable();
        spent.dedup();
        for name in spent {
            w.push(format!(
                "{name} called the program's functions back more than {CALLBACKS_PER_SITE} \
                 times from one call site: the later callbacks ran natively and untraced \
                 (tracing each costs two stops of the program)"
            ));
        }
        for (what, ids) in &self.untraced_threads {
            let list: Vec<String> = ids.iter().take(8).map(|i| i.to_string()).collect();
            let more = if ids.len() > 8 { ", ..." } else { "" };
            let plural = if ids.len() == 1 { "" } else { "s" };
            w.push(format!(
                "{} {what}{plural} ran natively and {} not traced (id{plural} {}{more}); \
                 only the main thread is traced",
                ids.len(),
                if ids.len() == 1 { "was" } else { "were" },
                list.join(", ")
            ));
        }
        w
    }
}

/// A stretch of native execution, as the meter sees it. The kernel's work inside the system
/// calls natively-run code makes is excluded (so that, like the instruction counter, the meter
/// measures user-space work), and so are the work of the stops polyprof causes and the page
/// faults the code takes.
#[derive(Default)]
struct Stretch {
    /// The meter's reading when the stretch began.
    mark: Option<u64>,
    /// The page faults counted by then.
    faults: Option<u64>,
    /// Times the tracee was resumed and stopped again since.
    trips: u64,
    /// System calls made (entry and exit seen).
    syscalls: u64,
    /// The meter's reading at the entry of the system call under way.
    syscall_entry: Option<u64>,
    /// The meter's advance inside system calls, from their entry stop to their exit stop.
    excluded: u64,
}

impl Stretch {
    /// The tracee stopped at a system call's entry (`entry`) or exit.
    fn syscall_stop(&mut self, meter: &NativeMeter, entry: bool) {
        let now = meter.read();
        if entry {
            self.syscall_entry = now;
        } else if let (Some(from), Some(to)) = (self.syscall_entry.take(), now) {
            self.syscalls += 1;
            self.excluded += to.saturating_sub(from);
        }
    }
}

/// How one calibration round trip went.
enum Trip {
    /// What the tracee's CPU clock advanced (nanoseconds).
    Cost(u64),
    /// Something else happened (a signal): calibration stops there.
    GaveUp,
    /// The program ended.
    Ended(Next),
}

// Short-lived return value; boxing the register file would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum ReturnCheck {
    /// Back in traced code after the library call returned.
    Back(Regs),
    /// The breakpoint address ran at another depth; still native.
    Passed,
    /// Not the return breakpoint: a SIGTRAP of the program's own.
    NotOurs,
    /// The program ended meanwhile.
    Ended(Next),
}

impl<X: Executor> Engine for Runner<X> {
    fn name(&self) -> &'static str {
        X::NAME
    }

    fn pid(&self) -> i32 {
        self.pid
    }

    fn load_bias(&self) -> u64 {
        self.bias
    }

    fn run(&mut self, sink: &mut dyn EventSink) -> Result<RunSummary, Error> {
        let exit = match self.drive(sink) {
            Ok(status) => status,
            // The program vanished between two ptrace calls (killed from outside, e.g. by
            // polyprof's own Ctrl-C handler): collect how it ended.
            Err(Error::Trace { source, .. }) if source.raw_os_error() == Some(libc::ESRCH) => {
                let status = loop {
                    match ptrace::wait(self.pid).map_err(Error::trace("waitpid"))? {
                        Stop::Exited(c) => break ExitStatus::Code(c),
                        Stop::Killed(s) => break ExitStatus::Signal(s),
                        _ => {}
                    }
                };
                self.ended(sink, status)?;
                status
            }
            Err(e) => return Err(e),
        };
        Ok(RunSummary {
            engine: self.name(),
            exit: Some(exit),
            instructions: self.instructions,
            emulated: self.exec.emulated(),
            complete: self.complete && self.started,
            warnings: self.warnings(),
            load_bias: self.bias,
            started: self.started,
            native_method: self.meter.method(),
            native_instructions: self.native_instructions,
            last_signal: self.last_signal,
        })
    }
}

impl<X: Executor> Runner<X> {
    /// Runs the state machine to the program's end.
    fn drive(&mut self, sink: &mut dyn EventSink) -> Result<ExitStatus, Error> {
        let mut next = self.run_to_start(sink)?;
        let mut regs = None;
        let exit = loop {
            next = match next {
                Next::Step => {
                    let r = match regs.take() {
                        Some(r) => r,
                        None => ptrace::get_regs(self.pid).map_err(Error::trace("GETREGS"))?,
                    };
                    self.run_stepping(sink, r)?
                }
                Next::Native => {
                    let (n, r) = self.run_native(sink)?;
                    regs = r;
                    n
                }
                Next::Done(status) => break status,
            };
        };
        Ok(exit)
    }
}

impl<X: Executor> Drop for Runner<X> {
    fn drop(&mut self) {
        if self.alive {
            // SAFETY: plain syscalls on our own child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(self.pid, &mut status, libc::__WALL);
            }
        }
    }
}

/// Forks and execs the program with ptrace(TRACEME) and no address-space randomization. The
/// child inherits stdin, stdout and stderr untouched.
pub fn spawn_traced(opts: &RunOptions) -> Result<pid_t, Error> {
    let mut cmd = Command::new(&opts.program);
    cmd.arg0(&opts.argv0).args(&opts.args);
    cmd.envs(opts.env.iter().map(|(k, v)| (k, v)));
    let open = |path: &Option<PathBuf>, write: bool| -> Result<Option<std::fs::File>, Error> {
        let Some(p) = path else { return Ok(None) };
        let f = if write {
            std::fs::File::create(p)
        } else {
            std::fs::File::open(p)
        };
        f.map(Some).map_err(|source| Error::Spawn {
            program: p.clone(),
            source,
        })
    };
    if let Some(f) = open(&opts.stdin, false)? {
        cmd.stdin(f);
    }
    if let Some(f) = open(&opts.stdout, true)? {
        cmd.stdout(f);
    }
    if let Some(f) = open(&opts.stderr, true)? {
        cmd.stderr(f);
    }
    // SAFETY: the closure only makes async-signal-safe system calls.
    unsafe {
        cmd.pre_exec(|| {
            let persona = libc::personality(0xffff_ffff);
            if persona != -1 {
                libc::personality(persona as libc::c_ulong | ADDR_NO_RANDOMIZE);
            }
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    match cmd.spawn() {
        Ok(child) => Ok(child.id() as pid_t),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(Error::PtraceDenied),
        Err(source) => Err(Error::Spawn {
            program: opts.program.clone(),
            source,
        }),
    }
}

/// Arguments an x86-64 Linux system call takes (6 for calls not listed).
fn syscall_arity(nr: u64) -> usize {
    match nr {
        24 | 39 | 57 | 102 | 104 | 107 | 108 | 110 | 186 | 15 => 0,
        3 | 12 | 22 | 32 | 60 | 63 | 74 | 87 | 99 | 201 | 218 | 231 => 1,
        4 | 5 | 6 | 11 | 21 | 33 | 35 | 62 | 76 | 77 | 79 | 82 | 83 | 96 | 97 | 131 | 137 | 138
        | 158 | 200 | 228 | 273 | 293 | 435 => 2,
        0 | 1 | 2 | 7 | 8 | 10 | 16 | 19 | 20 | 28 | 41 | 42 | 59 | 72 | 78 | 89 | 234 | 258
        | 263 | 292 | 318 => 3,
        13 | 14 | 17 | 18 | 61 | 230 | 257 | 262 | 302 | 334 => 4,
        23 | 25 | 56 | 332 => 5,
        _ => 6,
    }
}

/// The path the kernel shows for `program` in /proc/PID/maps.
pub fn canonical(program: &Path) -> PathBuf {
    std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf())
}
