//! Thin wrappers over the ptrace calls the engines use.
//!
//! libc is used directly rather than nix because signal numbers must pass through untouched
//! (real-time signals have no `nix::Signal` variant) and wait statuses must be decoded whole.

use libc::{c_int, c_long, c_void, pid_t, user_regs_struct};
use std::io;
use std::mem::{offset_of, MaybeUninit};

pub type Regs = user_regs_struct;

fn check(r: c_long) -> io::Result<c_long> {
    if r == -1 {
        let e = io::Error::last_os_error();
        if e.raw_os_error().unwrap_or(0) != 0 {
            return Err(e);
        }
    }
    Ok(r)
}

fn ptrace(req: libc::c_uint, pid: pid_t, addr: usize, data: usize) -> io::Result<c_long> {
    // SAFETY: every request used here takes plain integers or a pointer to a buffer the caller
    // owns and sized for the request; errno is cleared first so PEEK results of -1 are told
    // apart from failures.
    unsafe {
        *libc::__errno_location() = 0;
        check(libc::ptrace(
            req,
            pid,
            addr as *mut c_void,
            data as *mut c_void,
        ))
    }
}

pub fn get_regs(pid: pid_t) -> io::Result<Regs> {
    let mut regs = MaybeUninit::<Regs>::uninit();
    ptrace(libc::PTRACE_GETREGS, pid, 0, regs.as_mut_ptr() as usize)?;
    // SAFETY: PTRACE_GETREGS filled the whole struct.
    Ok(unsafe { regs.assume_init() })
}

pub fn set_regs(pid: pid_t, regs: &Regs) -> io::Result<()> {
    ptrace(libc::PTRACE_SETREGS, pid, 0, regs as *const Regs as usize).map(drop)
}

/// The legacy FXSAVE area: x87 and SSE registers, MXCSR.
pub type FpRegs = libc::user_fpregs_struct;

pub fn get_fpregs(pid: pid_t) -> io::Result<FpRegs> {
    let mut regs = MaybeUninit::<FpRegs>::uninit();
    ptrace(libc::PTRACE_GETFPREGS, pid, 0, regs.as_mut_ptr() as usize)?;
    // SAFETY: PTRACE_GETFPREGS filled the whole struct.
    Ok(unsafe { regs.assume_init() })
}

pub fn set_fpregs(pid: pid_t, regs: &FpRegs) -> io::Result<()> {
    ptrace(
        libc::PTRACE_SETFPREGS,
        pid,
        0,
        regs as *const FpRegs as usize,
    )
    .map(drop)
}

/// `NT_X86_XSTATE`: the regset of the whole XSAVE area (in the standard, uncompacted format).
const NT_X86_XSTATE: usize = 0x202;

/// Reads the tracee's XSAVE area (the FXSAVE area first, then the XSAVE header, then the
/// upper halves of the ymm registers and any further components) into `buf`; returns the
/// bytes the kernel filled.
pub fn get_xstate(pid: pid_t, buf: &mut [u8]) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut c_void,
        iov_len: buf.len(),
    };
    ptrace(
        libc::PTRACE_GETREGSET,
        pid,
        NT_X86_XSTATE,
        &mut iov as *mut libc::iovec as usize,
    )?;
    Ok(iov.iov_len)
}

/// Writes the tracee's XSAVE area back (as [`get_xstate`] read it, possibly changed).
pub fn set_xstate(pid: pid_t, buf: &[u8]) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut c_void,
        iov_len: buf.len(),
    };
    ptrace(
        libc::PTRACE_SETREGSET,
        pid,
        NT_X86_XSTATE,
        &mut iov as *mut libc::iovec as usize,
    )
    .map(drop)
}

pub fn set_options(pid: pid_t, options: c_int) -> io::Result<()> {
    ptrace(libc::PTRACE_SETOPTIONS, pid, 0, options as usize).map(drop)
}

pub fn single_step(pid: pid_t, sig: i32) -> io::Result<()> {
    ptrace(libc::PTRACE_SINGLESTEP, pid, 0, sig as usize).map(drop)
}

pub fn cont(pid: pid_t, sig: i32) -> io::Result<()> {
    ptrace(libc::PTRACE_CONT, pid, 0, sig as usize).map(drop)
}

pub fn cont_syscall(pid: pid_t, sig: i32) -> io::Result<()> {
    ptrace(libc::PTRACE_SYSCALL, pid, 0, sig as usize).map(drop)
}

pub fn detach(pid: pid_t, sig: i32) -> io::Result<()> {
    ptrace(libc::PTRACE_DETACH, pid, 0, sig as usize).map(drop)
}

pub fn event_msg(pid: pid_t) -> io::Result<u64> {
    let mut msg: libc::c_ulong = 0;
    ptrace(
        libc::PTRACE_GETEVENTMSG,
        pid,
        0,
        &mut msg as *mut libc::c_ulong as usize,
    )?;
    Ok(msg)
}

/// `si_code` of the signal that caused the current stop.
pub fn siginfo_code(pid: pid_t) -> io::Result<i32> {
    let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
    ptrace(libc::PTRACE_GETSIGINFO, pid, 0, info.as_mut_ptr() as usize)?;
    // SAFETY: zero-initialised and then filled by the kernel.
    Ok(unsafe { info.assume_init() }.si_code)
}

/// `si_code` of the signal that caused the current signal-delivery stop, and `si_addr` when the
/// CPU raised it (SIGSEGV and SIGBUS: the data address; SIGILL, SIGFPE and SIGTRAP: the
/// instruction). `si_addr` means nothing for a signal another process sent (`si_code` <= 0).
pub fn siginfo_fault(pid: pid_t) -> io::Result<(i32, Option<u64>)> {
    let mut info = MaybeUninit::<libc::siginfo_t>::zeroed();
    ptrace(libc::PTRACE_GETSIGINFO, pid, 0, info.as_mut_ptr() as usize)?;
    // SAFETY: zero-initialised and then filled by the kernel.
    let info = unsafe { info.assume_init() };
    let faults = matches!(
        info.si_signo,
        libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE | libc::SIGTRAP
    );
    // SAFETY: for these signals, raised by the kernel, the union holds `si_addr`.
    let addr = (faults && info.si_code > 0).then(|| unsafe { info.si_addr() } as u64);
    Ok((info.si_code, addr))
}

fn debugreg_offset(n: usize) -> usize {
    offset_of!(libc::user, u_debugreg) + n * std::mem::size_of::<libc::c_ulong>()
}

pub fn peek_user_debugreg(pid: pid_t, n: usize) -> io::Result<u64> {
    ptrace(libc::PTRACE_PEEKUSER, pid, debugreg_offset(n), 0).map(|v| v as u64)
}

pub fn poke_user_debugreg(pid: pid_t, n: usize, value: u64) -> io::Result<()> {
    ptrace(
        libc::PTRACE_POKEUSER,
        pid,
        debugreg_offset(n),
        value as usize,
    )
    .map(drop)
}

/// Arms (or with `None` disarms) hardware execution breakpoints 0 and 1.
///
/// Hardware breakpoints are per thread and leave the program's code untouched, so threads and
/// child processes running natively can never trip over them.
pub fn set_hw_breakpoints(pid: pid_t, addrs: [Option<u64>; 4]) -> io::Result<()> {
    // DR7 must be cleared before DR0-DR3 change, or the kernel validates the old pairs.
    poke_user_debugreg(pid, 7, 0)?;
    let mut dr7 = 0;
    for (i, addr) in addrs.iter().enumerate() {
        if let Some(a) = *addr {
            poke_user_debugreg(pid, i, a)?;
            // Ln enable; RWn = 00 (execute) and LENn = 00 (1 byte) stay zero.
            dr7 |= 1 << (2 * i);
        }
    }
    if dr7 != 0 {
        poke_user_debugreg(pid, 7, dr7)?;
    }
    Ok(())
}

/// Arms (or with `None` disarms) hardware execution breakpoint 0 alone.
pub fn set_hw_breakpoint(pid: pid_t, addr: Option<u64>) -> io::Result<()> {
    set_hw_breakpoints(pid, [addr, None, None, None])
}

/// Which hardware breakpoints caused the current SIGTRAP stop (bit n for breakpoint n);
/// clears DR6.
pub fn hw_breakpoints_hit(pid: pid_t) -> io::Result<u64> {
    let hit = peek_user_debugreg(pid, 6)? & 0xf;
    if hit != 0 {
        poke_user_debugreg(pid, 6, 0)?;
    }
    Ok(hit)
}

/// True when the current SIGTRAP stop comes from hardware breakpoint 0; clears DR6.
pub fn hw_breakpoint_hit(pid: pid_t) -> io::Result<bool> {
    Ok(hw_breakpoints_hit(pid)? & 1 != 0)
}

/// Reads up to `buf.len()` bytes of the tracee's memory; returns how many were readable.
pub fn read_memory(pid: pid_t, addr: u64, buf: &mut [u8]) -> usize {
    let n = vm_readv(pid, addr, buf);
    if n > 0 {
        return n as usize;
    }
    // process_vm_readv refuses a range that crosses into an unmapped page; fall back to words.
    let mut done = 0;
    while done < buf.len() {
        let Ok(word) = ptrace(libc::PTRACE_PEEKDATA, pid, addr as usize + done, 0) else {
            break;
        };
        let bytes = word.to_ne_bytes();
        let take = (buf.len() - done).min(8);
        buf[done..done + take].copy_from_slice(&bytes[..take]);
        done += take;
    }
    done
}

/// Reads exactly `buf.len()` bytes of the tracee's memory with one `process_vm_readv`;
/// false when any byte is unreadable.
pub fn read_exact(pid: pid_t, addr: u64, buf: &mut [u8]) -> bool {
    let n = vm_readv(pid, addr, buf);
    n >= 0 && n as usize == buf.len()
}

/// One `process_vm_readv` of `buf.len()` bytes at `addr`: the bytes read, or -1.
fn vm_readv(pid: pid_t, addr: u64, buf: &mut [u8]) -> isize {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the local iovec points into `buf`, which outlives the call.
    unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) }
}

/// Writes `(remote address, bytes)` pieces into the tracee's memory with `process_vm_writev`.
pub fn write_pieces(pid: pid_t, pieces: &[(u64, &[u8])]) -> io::Result<()> {
    // IOV_MAX is 1024 on Linux.
    for chunk in pieces.chunks(1024) {
        let mut local = Vec::with_capacity(chunk.len());
        let mut remote = Vec::with_capacity(chunk.len());
        let mut total = 0usize;
        for &(addr, bytes) in chunk {
            local.push(libc::iovec {
                iov_base: bytes.as_ptr() as *mut c_void,
                iov_len: bytes.len(),
            });
            remote.push(libc::iovec {
                iov_base: addr as *mut c_void,
                iov_len: bytes.len(),
            });
            total += bytes.len();
        }
        // SAFETY: every local iovec points into a slice that outlives the call; the kernel only
        // reads from them.
        let n = unsafe {
            libc::process_vm_writev(
                pid,
                local.as_ptr(),
                local.len() as libc::c_ulong,
                remote.as_ptr(),
                remote.len() as libc::c_ulong,
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n as usize != total {
            return Err(io::Error::other(format!(
                "process_vm_writev wrote {n} of {total} bytes"
            )));
        }
    }
    Ok(())
}

pub fn read_u64(pid: pid_t, addr: u64) -> Option<u64> {
    let mut b = [0u8; 8];
    (read_memory(pid, addr, &mut b) == 8).then(|| u64::from_ne_bytes(b))
}

/// What `waitpid` reported for a traced task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Exited with a code.
    Exited(i32),
    /// Killed by a signal.
    Killed(i32),
    /// Syscall entry or exit stop (PTRACE_O_TRACESYSGOOD).
    Syscall,
    /// A ptrace event stop (`PTRACE_EVENT_*`).
    Event(i32),
    /// A signal-delivery stop (or the trap of a single step / breakpoint).
    Signal(i32),
}

pub fn wait(pid: pid_t) -> io::Result<Stop> {
    loop {
        let mut status: c_int = 0;
        // SAFETY: plain syscall with a pointer to a local.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::__WALL) };
        if r == -1 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        return Ok(decode_status(status));
    }
}

fn decode_status(status: c_int) -> Stop {
    if libc::WIFEXITED(status) {
        Stop::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Stop::Killed(libc::WTERMSIG(status))
    } else {
        let sig = libc::WSTOPSIG(status);
        let event = (status >> 16) & 0xff;
        if sig == (libc::SIGTRAP | 0x80) {
            Stop::Syscall
        } else if event != 0 {
            Stop::Event(event)
        } else {
            Stop::Signal(sig)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_decode() {
        assert_eq!(decode_status(3 << 8), Stop::Exited(3));
        assert_eq!(decode_status(11), Stop::Killed(11));
        assert_eq!(decode_status((0x85 << 8) | 0x7f), Stop::Syscall);
        assert_eq!(
            decode_status((libc::PTRACE_EVENT_CLONE << 16) | (5 << 8) | 0x7f),
            Stop::Event(libc::PTRACE_EVENT_CLONE)
        );
        assert_eq!(decode_status((10 << 8) | 0x7f), Stop::Signal(10));
    }
}
