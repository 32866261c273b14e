//! What natively-run code costs: the runner reads a meter of the tracee when a library call
//! leaves traced code and when it comes back, and charges the call the difference.
//!
//! The meter is, by preference, a hardware performance counter of the user-space instructions
//! the tracee retires (`perf_event_open` on its pid: what callgrind and the trace itself count).
//! Where the kernel or the machine offers none (virtual machines often do not;
//! `/proc/sys/kernel/perf_event_paranoid` above 2 refuses it to unprivileged users), it is the
//! tracee's CPU time, converted to instruction equivalents at one instruction per cycle of
//! this machine's clock, measured once per process. CPU time counts the kernel's work too; to
//! approach the user-space work the counter measures, the runner leaves out the time inside
//! system calls and the cost of its own stops, and the meter the page faults the calls take
//! (counted by a software perf event where allowed, at a cost measured once per process).
//! Either way a reading is a system call or two.

use libc::{c_int, pid_t};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::OnceLock;

/// How the cost of natively-run calls was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NativeCostMethod {
    /// User-space instructions retired by the tracee, counted by a hardware performance counter.
    Instructions,
    /// The tracee's CPU time (user and system), converted at `instructions_per_second`: one
    /// instruction per cycle of this machine's clock rate, as measured at start. What the
    /// kernel spends to stop and resume the tracee for polyprof (measured when tracing starts)
    /// is subtracted: `stop_overhead_ns` per return breakpoint or single step,
    /// `syscall_stop_overhead_ns` per stop at a system call's entry or exit.
    CpuTime {
        instructions_per_second: u64,
        stop_overhead_ns: u64,
        syscall_stop_overhead_ns: u64,
        /// What one page fault costs, left out per fault the calls take (0: not counted).
        page_fault_ns: u64,
    },
    /// Neither is available: native calls cost nothing.
    Unmeasured,
}

impl NativeCostMethod {
    /// The name report.json uses: `instructions`, `cpu_time` or `unmeasured`.
    pub fn as_str(&self) -> &'static str {
        match self {
            NativeCostMethod::Instructions => "instructions",
            NativeCostMethod::CpuTime { .. } => "cpu_time",
            NativeCostMethod::Unmeasured => "unmeasured",
        }
    }
}

/// Which meters [`NativeMeter::open`] may use (tests force the fallback).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MeterChoice {
    /// The instruction counter when the kernel grants it, else CPU time.
    #[default]
    Best,
    /// CPU time only.
    CpuTime,
}

enum Source {
    Counter(OwnedFd),
    Clock(libc::clockid_t),
    None,
}

/// A meter of one traced process.
pub struct NativeMeter {
    source: Source,
    /// Page faults the tracee takes in user space (CPU-time meter only).
    faults: Option<OwnedFd>,
    method: NativeCostMethod,
    /// What the kernel's work for one stop costs the tracee, in the meter's unit: at a
    /// breakpoint or single step, at a system call's entry or exit.
    overheads: (u64, u64),
    /// The kernel refused the instruction counter for want of permission (rather than for
    /// want of a counter).
    counter_refused: bool,
}

// `struct perf_event_attr` up to `config1` (PERF_ATTR_SIZE_VER0): the fields used here.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    type_: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const PERF_COUNT_SW_TASK_CLOCK: u64 = 1;
const PERF_COUNT_SW_PAGE_FAULTS: u64 = 2;
const EXCLUDE_KERNEL: u64 = 1 << 5;
const EXCLUDE_HV: u64 = 1 << 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;

/// Opens a counting (not sampling) perf event of thread `pid`, running from now on.
fn perf_counter(pid: pid_t, type_: u32, config: u64) -> io::Result<OwnedFd> {
    let attr = PerfEventAttr {
        type_,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config,
        flags: EXCLUDE_KERNEL | EXCLUDE_HV,
        ..Default::default()
    };
    // SAFETY: `attr` is a valid, fully initialised perf_event_attr of the size it states; the
    // other arguments are plain integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            pid,
            -1 as c_int,
            -1 as c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as c_int) })
}

fn read_counter(fd: &OwnedFd) -> Option<u64> {
    let mut v = 0u64;
    // SAFETY: reads 8 bytes into a local u64.
    let n = unsafe { libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    (n == 8).then_some(v)
}

fn read_clock(clock: libc::clockid_t) -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes a timespec into a local.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// This machine's clock rate in cycles per second: a chain of dependent additions retires one
/// per cycle, timed on this thread's CPU clock (immune to preemption); the fastest of a few
/// rounds, so a frequency ramp-up does not count. Measured once per process (about 5 ms).
pub fn cycles_per_second() -> u64 {
    static RATE: OnceLock<u64> = OnceLock::new();
    *RATE.get_or_init(|| {
        const ITERATIONS: u64 = 1_000_000;
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let Some(t0) = read_clock(libc::CLOCK_THREAD_CPUTIME_ID) else {
                break;
            };
            add_chain(ITERATIONS);
            let Some(t1) = read_clock(libc::CLOCK_THREAD_CPUTIME_ID) else {
                break;
            };
            best = best.min(t1.saturating_sub(t0).max(1) as f64);
        }
        if best.is_finite() {
            (4.0 * ITERATIONS as f64 / best * 1e9) as u64
        } else {
            // No CPU clock at all: a typical server clock rate (the figure is stated anyway).
            3_000_000_000
        }
    })
}

/// What a page fault costs in CPU time here: fresh anonymous pages (no huge pages) written one
/// by one, timed on this thread's CPU clock and counted by a software perf event; the cheapest
/// of a few rounds. Measured once per process (about 1 ms); 0 when faults cannot be counted.
pub fn page_fault_ns() -> u64 {
    static COST: OnceLock<u64> = OnceLock::new();
    *COST.get_or_init(|| {
        const PAGES: usize = 128;
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as pid_t;
        let Ok(counter) = perf_counter(tid, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS) else {
            return 0;
        };
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let len = PAGES * 4096;
            // SAFETY: a fresh private anonymous mapping, unmapped below; only this function
            // touches it.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                break;
            }
            // SAFETY: `p` is the mapping just made, `len` bytes long; each page is written once.
            let timed = unsafe {
                libc::madvise(p, len, libc::MADV_NOHUGEPAGE);
                let f0 = read_counter(&counter);
                let t0 = read_clock(libc::CLOCK_THREAD_CPUTIME_ID);
                for k in 0..PAGES {
                    std::ptr::write_volatile(p.cast::<u8>().add(k * 4096), 1);
                }
                let t1 = read_clock(libc::CLOCK_THREAD_CPUTIME_ID);
                let f1 = read_counter(&counter);
                libc::munmap(p, len);
                t0.zip(t1).zip(f0.zip(f1))
            };
            if let Some(((t0, t1), (f0, f1))) = timed {
                if f1 > f0 {
                    best = best.min(t1.saturating_sub(t0) as f64 / (f1 - f0) as f64);
                }
            }
        }
        if best.is_finite() {
            best as u64
        } else {
            0
        }
    })
}

/// Four dependent additions per iteration: four cycles, whatever the core's width.
#[inline(never)]
fn add_chain(iterations: u64) {
    let mut x: u64 = 0;
    let mut n = iterations;
    // SAFETY: register-only arithmetic on the two operands declared.
    unsafe {
        std::arch::asm!(
            "2:",
            "add {x}, 1",
            "add {x}, 1",
            "add {x}, 1",
            "add {x}, 1",
            "dec {n}",
            "jnz 2b",
            x = inout(reg) x,
            n = inout(reg) n,
            options(nomem, nostack),
        );
    }
    std::hint::black_box((x, n));
}

impl NativeMeter {
    /// A meter of process `pid` (its main thread for the instruction counter).
    pub fn open(pid: pid_t, choice: MeterChoice) -> NativeMeter {
        let mut counter_refused = false;
        if choice == MeterChoice::Best {
            match perf_counter(pid, PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS) {
                Ok(fd) if read_counter(&fd).is_some() => {
                    return NativeMeter {
                        source: Source::Counter(fd),
                        faults: None,
                        method: NativeCostMethod::Instructions,
                        overheads: (0, 0),
                        counter_refused,
                    };
                }
                Ok(_) => {}
                Err(e) => {
                    counter_refused = matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM))
                }
            }
        }
        let mut clock: libc::clockid_t = 0;
        // SAFETY: writes a clockid_t into a local.
        if unsafe { libc::clock_getcpuclockid(pid, &mut clock) } == 0 && read_clock(clock).is_some()
        {
            // With exclude_kernel, faults taken by the kernel inside system calls (whose time
            // is left out already) are not counted.
            let faults = perf_counter(pid, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS)
                .ok()
                .filter(|fd| read_counter(fd).is_some());
            let page_fault_ns = if faults.is_some() { page_fault_ns() } else { 0 };
            return NativeMeter {
                source: Source::Clock(clock),
                faults,
                counter_refused,
                method: NativeCostMethod::CpuTime {
                    instructions_per_second: cycles_per_second(),
                    stop_overhead_ns: 0,
                    syscall_stop_overhead_ns: 0,
                    page_fault_ns,
                },
                overheads: (0, 0),
            };
        }
        NativeMeter {
            counter_refused,
            ..NativeMeter::none()
        }
    }

    /// Whether the kernel refused the instruction counter for want of permission.
    pub fn counter_refused(&self) -> bool {
        self.counter_refused
    }

    /// A meter that measures nothing (engines driven without a process, tests).
    pub fn none() -> NativeMeter {
        NativeMeter {
            source: Source::None,
            faults: None,
            method: NativeCostMethod::Unmeasured,
            overheads: (0, 0),
            counter_refused: false,
        }
    }

    /// Page faults the tracee has taken in user space, when they are counted.
    pub fn faults(&self) -> Option<u64> {
        self.faults.as_ref().and_then(read_counter)
    }

    /// What `faults` page faults cost, in the meter's unit (0 when they are not counted).
    pub fn fault_cost(&self, faults: u64) -> u64 {
        match self.method {
            NativeCostMethod::CpuTime { page_fault_ns, .. } => faults.saturating_mul(page_fault_ns),
            _ => 0,
        }
    }

    pub fn method(&self) -> NativeCostMethod {
        match self.method {
            NativeCostMethod::CpuTime {
                instructions_per_second,
                page_fault_ns,
                ..
            } => NativeCostMethod::CpuTime {
                instructions_per_second,
                stop_overhead_ns: self.overheads.0,
                syscall_stop_overhead_ns: self.overheads.1,
                page_fault_ns,
            },
            m => m,
        }
    }

    /// Sets what one stop costs the tracee, in the meter's unit: at a breakpoint or single
    /// step (`trap`), at a system call's entry or exit (`syscall`).
    pub fn set_overheads(&mut self, trap: u64, syscall: u64) {
        self.overheads = (trap, syscall);
    }

    /// What one stop costs the tracee: (at a breakpoint or single step, at a system call).
    pub fn overheads(&self) -> (u64, u64) {
        self.overheads
    }

    /// The meter's reading in its own unit (instructions or nanoseconds); `None` when it
    /// cannot be read (the process is gone).
    pub fn read(&self) -> Option<u64> {
        match &self.source {
            Source::Counter(fd) => read_counter(fd),
            Source::Clock(c) => read_clock(*c),
            Source::None => None,
        }
    }

    /// A difference of two readings in instructions (or instruction equivalents).
    pub fn instructions(&self, delta: u64) -> u64 {
        match self.method {
            NativeCostMethod::Instructions => delta,
            NativeCostMethod::CpuTime {
                instructions_per_second,
                ..
            } => (delta as u128 * u128::from(instructions_per_second) / 1_000_000_000) as u64,
            NativeCostMethod::Unmeasured => 0,
        }
    }
}

/// Opens the software task clock of `pid` through the same perf_event_open path as the
/// instruction counter: a test of that path on machines without hardware counters.
#[doc(hidden)]
pub fn task_clock_counter(pid: pid_t) -> io::Result<impl Fn() -> Option<u64>> {
    let fd = perf_counter(pid, PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK)?;
    Ok(move || read_counter(&fd))
}

// PERF_ATTR_SIZE_VER0: the kernel reads exactly the fields declared.
const _: () = assert!(std::mem::size_of::<PerfEventAttr>() == 64);

#[cfg(test)]
mod tests {
    use super::*;

    /// This thread's CPU time, in nanoseconds.
    fn thread_cpu_ns() -> u64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec it is given.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    }

    /// Spins until this thread has run `ms` milliseconds of CPU time: on a loaded machine
    /// that takes longer than `ms` of wall-clock time, and the clocks under test must still
    /// see `ms`.
    fn burn(ms: u64) {
        let start = thread_cpu_ns();
        let mut x = 0u64;
        while thread_cpu_ns() - start < ms * 1_000_000 {
            for _ in 0..1000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
    }

    #[test]
    fn a_page_fault_costs_a_plausible_time() {
        let ns = page_fault_ns();
        // 0 only where perf_event_open is refused.
        if task_clock_counter(0).is_ok() {
            assert!((50..200_000).contains(&ns), "{ns} ns");
        }
    }

    #[test]
    fn the_clock_rate_is_plausible() {
        let hz = cycles_per_second();
        assert!((200_000_000..20_000_000_000).contains(&hz), "{hz} Hz");
    }

    #[test]
    fn the_cpu_clock_of_a_process_advances_while_it_runs() {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() };
        let m = NativeMeter::open(pid, MeterChoice::CpuTime);
        assert_eq!(m.method().as_str(), "cpu_time");
        let a = m.read().unwrap();
        burn(20);
        let b = m.read().unwrap();
        // 20 ms of CPU time at least (other test threads may add some).
        assert!(b - a >= 15_000_000, "{} ns", b - a);
        let per_ns = m.instructions(1_000_000_000);
        assert_eq!(per_ns, cycles_per_second());
    }

    #[test]
    fn perf_counters_open_and_count() {
        // The software task clock goes through the same perf_event_open and read(2) path as
        // the hardware instruction counter, and exists wherever perf_event_open is allowed.
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as pid_t;
        let read = match task_clock_counter(tid) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("perf_event_open refused here ({e}); nothing to test");
                return;
            }
        };
        let a = read().unwrap();
        burn(10);
        let b = read().unwrap();
        assert!(b - a >= 5_000_000, "{} ns", b - a);
        // Whichever meter `Best` picks for this process, it reads (the instruction counter
        // would count the main thread, which waits while this test runs).
        // SAFETY: getpid has no preconditions.
        let m = NativeMeter::open(unsafe { libc::getpid() }, MeterChoice::Best);
        let a = m.read().unwrap();
        assert!(m.read().unwrap() >= a, "{:?}", m.method());
    }
}
