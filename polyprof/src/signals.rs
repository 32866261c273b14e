//! SIGINT, SIGTERM and SIGHUP to polyprof: what they end depends on the phase.
//!
//! - While the program is traced, the first one kills it (tracing then ends and what ran is
//!   analysed and reported); more change nothing. `timeout` and a terminal's Ctrl-C send the
//!   signal to the whole process group, so polyprof often gets it twice at once, and the
//!   traced program once: that must not cost the report.
//! - During the analysis, one skips what is left of it: the replay stops, isl stops at its
//!   next operation, and the reports say what was skipped.
//! - While the reports are written, signals are noted (for the exit status) and ignored.
//!
//! polyprof then exits with 128 + the first signal's number. As soon as the analysis is
//! skipped, a watchdog thread writes the reports of the trace ([`Watchdog`]), so that a
//! SIGKILL that follows (`timeout -k`) loses nothing; if the analysis has not returned within
//! [`GRACE`], it writes them again, saying so, and exits.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TRACING: u8 = 0;
const ANALYSING: u8 = 1;
const WRITING: u8 = 2;

static PHASE: AtomicU8 = AtomicU8::new(TRACING);
/// The program's pid while it runs (0: none).
static CHILD: AtomicI32 = AtomicI32::new(0);
/// The first signal that interrupted polyprof (0: none). The runner polls it too.
pub static INTERRUPTED: AtomicI32 = AtomicI32::new(0);
/// Set by a signal during the analysis: skip the rest (feedback's cancel flag).
pub static SKIP: AtomicBool = AtomicBool::new(false);
/// `--quiet`: the handler says nothing.
static QUIET: AtomicBool = AtomicBool::new(false);
/// Whether the handler already said what it does in the current phase.
static SAID: [AtomicBool; 2] = [AtomicBool::new(false), AtomicBool::new(false)];

/// How long a skipped analysis may take to return before the watchdog writes the reports.
pub const GRACE: Duration = Duration::from_secs(5);

fn say_once(phase: u8, msg: &[u8]) {
    if QUIET.load(Ordering::SeqCst) || SAID[phase as usize].swap(true, Ordering::SeqCst) {
        return;
    }
    // SAFETY: write(2) is async-signal-safe; `msg` is a valid buffer.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
    }
}

fn on_signal(sig: i32) {
    let _ = INTERRUPTED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    match PHASE.load(Ordering::SeqCst) {
        TRACING => {
            let pid = CHILD.load(Ordering::SeqCst);
            if pid > 0 {
                // SAFETY: kill(2) is async-signal-safe; the pid is our traced child.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                }
            }
            say_once(
                TRACING,
                b"\npolyprof: interrupted: the program was killed; analysing what was traced \
                  (interrupt again to skip to the reports)\n",
            );
        }
        ANALYSING => {
            SKIP.store(true, Ordering::SeqCst);
            say_once(
                ANALYSING,
                b"\npolyprof: interrupted: skipping the rest of the analysis; writing the \
                  reports of what is ready\n",
            );
        }
        _ => {}
    }
}

/// Installs the handlers (once per process). `quiet`: they print nothing.
pub fn install(quiet: bool) -> std::io::Result<()> {
    QUIET.store(quiet, Ordering::SeqCst);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only uses atomics, kill(2) and write(2), all async-signal-safe.
        unsafe { signal_hook::low_level::register(sig, move || on_signal(sig)) }?;
    }
    Ok(())
}

/// The traced program is `pid` (0: it is gone). A signal that came before it started kills
/// it at once.
pub fn set_child(pid: i32) {
    CHILD.store(pid, Ordering::SeqCst);
    if pid > 0 && INTERRUPTED.load(Ordering::SeqCst) != 0 {
        // SAFETY: a plain kill(2) of our own child.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Tracing is over: signals now skip the analysis. A signal that already came during
/// tracing does not skip it: it asked for the analysis of what ran.
pub fn analysing() {
    PHASE.store(ANALYSING, Ordering::SeqCst);
}

/// The first signal that interrupted polyprof, if any.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Whether the analysis is to be skipped.
pub fn skipping() -> bool {
    SKIP.load(Ordering::SeqCst)
}

/// What the watchdog writes when the analysis is skipped, set before the analysis: called with
/// `false` at once, with `true` if the analysis has not returned within [`GRACE`]; returns the
/// exit status.
pub type Fallback = Box<dyn FnMut(bool) -> i32 + Send>;

/// Writes the reports of the trace as soon as the analysis is skipped, and again and exits if
/// the analysis does not return in time. Dropping it (or [`Watchdog::writing`]) tells it the
/// main thread is writing.
pub struct Watchdog {
    fallback: Arc<Mutex<Option<Fallback>>>,
}

impl Watchdog {
    /// Starts watching: `fallback` writes the reports of what is ready before the analysis
    /// and returns the exit status.
    pub fn start(fallback: Fallback) -> Watchdog {
        let slot = Arc::new(Mutex::new(Some(fallback)));
        let watched = Arc::clone(&slot);
        std::thread::spawn(move || {
            while !skipping() {
                if Arc::strong_count(&watched) == 1 {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            // The lock is held while writing: the main thread, done meanwhile, waits to write
            // its own reports after these (or for the exit).
            match watched.lock() {
                Ok(mut slot) => match slot.as_mut() {
                    Some(write) => {
                        write(false);
                    }
                    None => return,
                },
                Err(_) => return,
            }
            std::thread::sleep(GRACE);
            if let Ok(mut slot) = watched.lock() {
                if let Some(mut write) = slot.take() {
                    let code = write(true);
                    std::process::exit(code);
                }
            }
        });
        Watchdog { fallback: slot }
    }

    /// The analysis returned: the main thread writes the reports; the watchdog stands down.
    pub fn writing(self) {
        drop(self);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Taking the fallback under the lock: if the watchdog is writing, wait for it (it then
        // exits the process, or stands down).
        if let Ok(mut f) = self.fallback.lock() {
            f.take();
        }
        PHASE.store(WRITING, Ordering::SeqCst);
    }
}
