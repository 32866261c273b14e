//! Library functions the `emulate` engine performs itself instead of running them natively.
//!
//! A natively-run call costs a ptrace stop and the page cache's refill afterwards (tens of
//! microseconds); a loop of short calls (`strlen`, `memcpy`) would spend its time switching.
//! The functions here have results fully defined by the C standard (no "some negative
//! number" as `strcmp` returns), so doing them against the page cache gives the program the
//! same memory and the same return value, and the event stream the same `LibCall` and
//! `LibReturn` as the native call gives the `step` engine. Registers the callee may clobber
//! keep their values, which a program following the ABI never reads.
//!
//! A call declines (returns `None`, having changed nothing) when a byte it would touch is not
//! accessible, when it would touch more than [`MAX_BYTES`], or for overlapping `memcpy`
//! (undefined behaviour: the native one decides what happens).

use crate::mem::{MemFault, PageCache, PAGE};

/// Bytes one emulated call may read or write: bigger calls run natively (the page cache
/// would hold every page they touch).
pub const MAX_BYTES: u64 = 64 << 10;

/// Arguments of a call: rdi, rsi, rdx.
#[derive(Clone, Copy, Debug)]
pub struct Args(pub u64, pub u64, pub u64);

/// What a call [`call`] performed would have cost natively, in instruction equivalents: 16
/// instructions plus one per 8 bytes touched (glibc's SSE2 string and memory routines handle
/// about 16 bytes in two instructions). An estimate: the engine performed the call, so no
/// counter saw it run.
pub fn estimated_cost(name: &str, a: Args, rax: u64) -> u64 {
    let base = name.split('@').next().unwrap_or(name);
    let bytes = match base {
        "strlen" | "strnlen" => rax.saturating_add(1),
        "strspn" | "strcspn" => rax.saturating_add(1),
        "strchr" | "rawmemchr" | "strrchr" | "strpbrk" | "strstr" if rax != 0 => {
            rax.saturating_sub(a.0).saturating_add(1)
        }
        "memchr" if rax != 0 => rax.saturating_sub(a.0).saturating_add(1),
        "memchr" | "memrchr" => a.2,
        "memcpy" | "memmove" | "mempcpy" | "memset" => a.2,
        "stpcpy" => rax.saturating_sub(a.0).saturating_add(1).saturating_mul(2),
        _ => 0,
    };
    16 + bytes / 8
}

/// Performs library function `name` (an imported name, possibly versioned: `memcpy@GLIBC_2.14`)
/// on `mem`; returns its result (rax), or `None` when it runs natively instead.
pub fn call(mem: &mut PageCache, name: &str, a: Args) -> Option<u64> {
    let base = name.split('@').next().unwrap_or(name);
    let r = match base {
        "strlen" => find(mem, a.0, 0, MAX_BYTES).map(|end| end.map(|e| e - a.0)),
        "strnlen" => {
            let limit = a.1;
            if limit > MAX_BYTES {
                // The string may still end early, but the bound cannot be scanned here.
                return find(mem, a.0, 0, MAX_BYTES).ok().flatten().map(|e| e - a.0);
            }
            find(mem, a.0, 0, limit).map(|end| Some(end.map_or(limit, |e| e - a.0)))
        }
        "strchr" => strchr(mem, a.0, a.1 as u8),
        "strrchr" => strrchr(mem, a.0, a.1 as u8),
        "memchr" => find(mem, a.0, a.1 as u8, a.2).map(|at| Some(at.unwrap_or(0))),
        "rawmemchr" => find(mem, a.0, a.1 as u8, MAX_BYTES + 1),
        "memrchr" => memrchr(mem, a.0, a.1 as u8, a.2),
        "strspn" | "strcspn" | "strpbrk" => spans(mem, base, a.0, a.1),
        "strstr" => strstr(mem, a.0, a.1),
        "memcpy" if !overlap(a.0, a.1, a.2) => copy(mem, a.0, a.1, a.2).map(|_| Some(a.0)),
        "memmove" => copy(mem, a.0, a.1, a.2).map(|_| Some(a.0)),
        "mempcpy" if !overlap(a.0, a.1, a.2) => {
            copy(mem, a.0, a.1, a.2).map(|_| Some(a.0.wrapping_add(a.2)))
        }
        "memset" => fill(mem, a.0, a.1 as u8, a.2).map(|_| Some(a.0)),
        "strcpy" | "stpcpy" => match find(mem, a.1, 0, MAX_BYTES) {
            Ok(Some(end)) => {
                let n = end - a.1;
                if overlap(a.0, a.1, n + 1) {
                    return None;
                }
                let ret = if base == "strcpy" { a.0 } else { a.0 + n };
                copy(mem, a.0, a.1, n + 1).map(|_| Some(ret))
            }
            _ => return None,
        },
        _ => return None,
    };
    r.ok().flatten()
}

/// The ranges `[d, d + n)` and `[s, s + n)` overlap.
fn overlap(d: u64, s: u64, n: u64) -> bool {
    n > 0 && d < s.saturating_add(n) && s < d.saturating_add(n)
}

/// The address of the first byte equal to `b` in `[addr, addr + limit)`; `None` when there is
/// none there; an error when a byte before it cannot be read or the scan would go past
/// [`MAX_BYTES`].
fn find(mem: &mut PageCache, addr: u64, b: u8, limit: u64) -> Result<Option<u64>, MemFault> {
    let limit = limit.min(MAX_BYTES + 1);
    let mut at = addr;
    let end = addr.checked_add(limit).ok_or(MemFault)?;
    let mut chunk = [0u8; 256];
    while at < end {
        // Up to the page end: a string may end right before an unmapped page.
        let to_page = PAGE as u64 - (at & (PAGE as u64 - 1));
        let n = (end - at).min(to_page).min(chunk.len() as u64) as usize;
        mem.read_bytes(at, &mut chunk[..n])?;
        if let Some(i) = chunk[..n].iter().position(|&c| c == b) {
            return Ok(Some(at + i as u64));
        }
        at += n as u64;
    }
    if limit > MAX_BYTES {
        return Err(MemFault);
    }
    Ok(None)
}

/// `strchr`: the first `c` before the terminator (the terminator itself for `c == 0`), or 0.
fn strchr(mem: &mut PageCache, addr: u64, c: u8) -> Result<Option<u64>, MemFault> {
    let end = find(mem, addr, 0, MAX_BYTES)?.ok_or(MemFault)?;
    if c == 0 {
        return Ok(Some(end));
    }
    Ok(Some(find(mem, addr, c, end - addr)?.unwrap_or(0)))
}

/// `strrchr`: the last `c` before the terminator (the terminator itself for `c == 0`), or 0.
fn strrchr(mem: &mut PageCache, addr: u64, c: u8) -> Result<Option<u64>, MemFault> {
    let end = find(mem, addr, 0, MAX_BYTES)?.ok_or(MemFault)?;
    if c == 0 {
        return Ok(Some(end));
    }
    memrchr(mem, addr, c, end - addr).map(|at| at.or(Some(0)))
}

/// `memrchr`: the last `c` in `[addr, addr + n)`, or 0.
fn memrchr(mem: &mut PageCache, addr: u64, c: u8, n: u64) -> Result<Option<u64>, MemFault> {
    if n > MAX_BYTES {
        return Err(MemFault);
    }
    let mut bytes = vec![0u8; n as usize];
    mem.read_bytes(addr, &mut bytes)?;
    Ok(Some(
        bytes
            .iter()
            .rposition(|&b| b == c)
            .map_or(0, |i| addr + i as u64),
    ))
}

/// The bytes of the C string at `addr`, without its terminator.
fn c_string(mem: &mut PageCache, addr: u64) -> Result<Vec<u8>, MemFault> {
    let end = find(mem, addr, 0, MAX_BYTES)?.ok_or(MemFault)?;
    let mut bytes = vec![0u8; (end - addr) as usize];
    mem.read_bytes(addr, &mut bytes)?;
    Ok(bytes)
}

/// `strspn`, `strcspn` (lengths of the initial segment of `s` made of bytes in, or not in,
/// the set at `set`) and `strpbrk` (the first byte of `s` in the set, or 0).
fn spans(mem: &mut PageCache, which: &str, s: u64, set: u64) -> Result<Option<u64>, MemFault> {
    let mut in_set = [false; 256];
    for b in c_string(mem, set)? {
        in_set[usize::from(b)] = true;
    }
    let text = c_string(mem, s)?;
    let first = |want: bool| text.iter().position(|&b| in_set[usize::from(b)] == want);
    Ok(Some(match which {
        "strspn" => first(false).unwrap_or(text.len()) as u64,
        "strcspn" => first(true).unwrap_or(text.len()) as u64,
        _ => first(true).map_or(0, |i| s + i as u64),
    }))
}

/// `strstr`: the first occurrence of the string at `needle` in the string at `hay` (`hay`
/// itself for an empty needle), or 0.
fn strstr(mem: &mut PageCache, hay: u64, needle: u64) -> Result<Option<u64>, MemFault> {
    let needle = c_string(mem, needle)?;
    let text = c_string(mem, hay)?;
    if needle.is_empty() {
        return Ok(Some(hay));
    }
    Ok(Some(
        text.windows(needle.len())
            .position(|w| w == needle.as_slice())
            .map_or(0, |i| hay + i as u64),
    ))
}

/// `memmove(d, s, n)` through the cache: every source byte is read before any is written.
fn copy(mem: &mut PageCache, d: u64, s: u64, n: u64) -> Result<(), MemFault> {
    if n > MAX_BYTES {
        return Err(MemFault);
    }
    let mut bytes = vec![0u8; n as usize];
    mem.read_bytes(s, &mut bytes)?;
    mem.write_bytes(d, &bytes)
}

fn fill(mem: &mut PageCache, d: u64, c: u8, n: u64) -> Result<(), MemFault> {
    if n > MAX_BYTES {
        return Err(MemFault);
    }
    mem.write_bytes(d, &vec![c; n as usize])
}
