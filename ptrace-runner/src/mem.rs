//! A cache of the tracee's memory for the `emulate` engine.
//!
//! Pages (4 KiB) are fetched on demand with `process_vm_readv`, so the cache holds only pages
//! the emulated code touched since the tracee last ran. Writes go to the cached page and mark
//! their bytes dirty (a bitmap per page); [`PageCache::flush`] writes back exactly the dirty
//! bytes with `process_vm_writev`, so bytes other threads wrote meanwhile are not clobbered.
//! Whether a page may be written is read from `/proc/PID/maps` (process_vm_writev would fail
//! on a read-only page only at write-back time, too late to fall back to a single step).

use crate::decode::IdBuildHasher;
use crate::ptrace;
use libc::pid_t;
use std::collections::HashMap;
use std::io;

pub const PAGE: usize = 4096;
const PAGE_SHIFT: u32 = 12;
const TLB: usize = 64;
const NO_PAGE: u64 = u64::MAX;

/// An emulated memory access that cannot be done here; the instruction must be stepped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemFault;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Writable {
    Unknown,
    Yes,
    No,
}

struct Slot {
    page: u64,
    data: Box<[u8; PAGE]>,
    /// One bit per byte written since the last flush.
    dirty: [u64; PAGE / 64],
    is_dirty: bool,
    writable: Writable,
}

/// The tracee's pages touched since it last ran.
pub struct PageCache {
    pid: pid_t,
    index: HashMap<u64, u32, IdBuildHasher>,
    slots: Vec<Slot>,
    free: Vec<Box<[u8; PAGE]>>,
    tlb: [(u64, u32); TLB],
    dirty: Vec<u32>,
    /// Mappings from /proc/PID/maps: (start, end, writable), sorted.
    maps: Vec<(u64, u64, bool)>,
    /// `maps` may be out of date (a system call may have changed the map).
    maps_stale: bool,
    /// Pages fetched since the cache was created (for statistics).
    pub fetched: u64,
    /// Largest number of pages held at once.
    pub peak_pages: usize,
    /// While an attempt may be abandoned (a library call run inside the engine): the bytes
    /// each write replaced, to put back.
    journal: Option<Journal>,
}

/// Bytes overwritten since [`PageCache::journal_start`]: (slot, offset, length) and the old
/// bytes, in order.
#[derive(Default)]
struct Journal {
    writes: Vec<(u32, u16, u16)>,
    old: Vec<u8>,
}

impl PageCache {
    pub fn new(pid: pid_t) -> PageCache {
        PageCache {
            pid,
            index: HashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            tlb: [(NO_PAGE, 0); TLB],
            dirty: Vec::new(),
            maps: Vec::new(),
            maps_stale: true,
            fetched: 0,
            peak_pages: 0,
            journal: None,
        }
    }

    /// Starts keeping what writes overwrite, until [`Self::journal_keep`] or
    /// [`Self::journal_undo`]. Pages stay in the cache meanwhile (slots are only freed by
    /// invalidation).
    pub fn journal_start(&mut self) {
        self.journal = Some(Journal::default());
    }

    /// Keeps the writes made since [`Self::journal_start`].
    pub fn journal_keep(&mut self) {
        self.journal = None;
    }

    /// Puts back the bytes written since [`Self::journal_start`]. (They stay marked dirty: the
    /// write-back then writes the tracee's own bytes again.)
    pub fn journal_undo(&mut self) {
        let Some(j) = self.journal.take() else {
            return;
        };
        let mut end = j.old.len();
        for &(slot, off, n) in j.writes.iter().rev() {
            let (off, n) = (off as usize, n as usize);
            self.slots[slot as usize].data[off..off + n].copy_from_slice(&j.old[end - n..end]);
            end -= n;
        }
    }

    /// Pages currently held.
    pub fn pages(&self) -> usize {
        self.slots.len()
    }

    /// The memory map may have changed (mmap, munmap, mprotect, brk, ... or another thread).
    pub fn maps_changed(&mut self) {
        self.maps_stale = true;
        for s in &mut self.slots {
            s.writable = Writable::Unknown;
        }
    }

    /// Forgets every cached page. Dirty bytes must have been flushed.
    pub fn invalidate(&mut self) {
        debug_assert!(self.dirty.is_empty(), "invalidating unflushed pages");
        self.index.clear();
        self.tlb = [(NO_PAGE, 0); TLB];
        self.dirty.clear();
        for s in self.slots.drain(..) {
            self.free.push(s.data);
        }
    }

    /// Reads the page holding `addr` again from the tracee (it wrote there). Dirty bytes must
    /// have been flushed.
    pub fn refresh(&mut self, addr: u64) {
        let page = addr >> PAGE_SHIFT;
        if let Some(&slot) = self.index.get(&page) {
            let s = &mut self.slots[slot as usize];
            if !ptrace::read_exact(self.pid, page << PAGE_SHIFT, &mut s.data[..]) {
                // The page went away: start over.
                self.invalidate();
            }
        }
    }

    /// The slot of `page`, fetching it on a miss.
    #[inline(always)]
    fn slot(&mut self, page: u64) -> Result<u32, MemFault> {
        let t = self.tlb[page as usize % TLB];
        if t.0 == page {
            return Ok(t.1);
        }
        self.slot_slow(page)
    }

    #[inline(never)]
    fn slot_slow(&mut self, page: u64) -> Result<u32, MemFault> {
        let slot = match self.index.get(&page) {
            Some(&s) => s,
            None => {
                let mut data = self.free.pop().unwrap_or_else(|| Box::new([0u8; PAGE]));
                if page > (u64::MAX >> PAGE_SHIFT) - 1
                    || !ptrace::read_exact(self.pid, page << PAGE_SHIFT, &mut data[..])
                {
                    self.free.push(data);
                    return Err(MemFault);
                }
                self.fetched += 1;
                let s = self.slots.len() as u32;
                self.slots.push(Slot {
                    page,
                    data,
                    dirty: [0; PAGE / 64],
                    is_dirty: false,
                    writable: Writable::Unknown,
                });
                self.peak_pages = self.peak_pages.max(self.slots.len());
                self.index.insert(page, s);
                s
            }
        };
        self.tlb[page as usize % TLB] = (page, slot);
        Ok(slot)
    }

    /// Reads `N` bytes at `addr`.
    #[inline(always)]
    pub fn read<const N: usize>(&mut self, addr: u64) -> Result<[u8; N], MemFault> {
        let off = (addr as usize) & (PAGE - 1);
        if off + N <= PAGE {
            let slot = self.slot(addr >> PAGE_SHIFT)?;
            let data = &self.slots[slot as usize].data;
            let mut out = [0u8; N];
            out.copy_from_slice(&data[off..off + N]);
            Ok(out)
        } else {
            let mut out = [0u8; N];
            self.read_split(addr, &mut out)?;
            Ok(out)
        }
    }

    #[inline(never)]
    fn read_split(&mut self, addr: u64, out: &mut [u8]) -> Result<(), MemFault> {
        let off = (addr as usize) & (PAGE - 1);
        let first = PAGE - off;
        let s0 = self.slot(addr >> PAGE_SHIFT)?;
        let s1 = self.slot((addr >> PAGE_SHIFT).wrapping_add(1))?;
        out[..first].copy_from_slice(&self.slots[s0 as usize].data[off..]);
        let rest = out.len() - first;
        out[first..].copy_from_slice(&self.slots[s1 as usize].data[..rest]);
        Ok(())
    }

    /// Reads a little-endian integer of `size` bytes (1, 2, 4 or 8) at `addr`.
    #[inline(always)]
    pub fn read_int(&mut self, addr: u64, size: u8) -> Result<u64, MemFault> {
        Ok(match size {
            1 => self.read::<1>(addr)?[0] as u64,
            2 => u16::from_le_bytes(self.read::<2>(addr)?) as u64,
            4 => u32::from_le_bytes(self.read::<4>(addr)?) as u64,
            _ => u64::from_le_bytes(self.read::<8>(addr)?),
        })
    }

    /// Whether `slot` may be written, from the memory map.
    fn check_writable(&mut self, slot: u32) -> bool {
        let s = &self.slots[slot as usize];
        match s.writable {
            Writable::Yes => return true,
            Writable::No => return false,
            Writable::Unknown => {}
        }
        let addr = s.page << PAGE_SHIFT;
        let mut found = self.lookup_map(addr);
        if found.is_none() || self.maps_stale {
            if self.read_maps().is_err() {
                return false;
            }
            found = self.lookup_map(addr);
        }
        let w = found.unwrap_or(false);
        self.slots[slot as usize].writable = if w { Writable::Yes } else { Writable::No };
        w
    }

    fn lookup_map(&self, addr: u64) -> Option<bool> {
        let i = self.maps.partition_point(|m| m.0 <= addr);
        let m = self.maps.get(i.checked_sub(1)?)?;
        (addr < m.1).then_some(m.2)
    }

    fn read_maps(&mut self) -> io::Result<()> {
        self.maps = symbols::read_proc_maps(self.pid)?
            .iter()
            .map(|m| (m.start, m.end, m.is_write()))
            .collect();
        self.maps.sort_unstable();
        self.maps_stale = false;
        Ok(())
    }

    /// Writes `bytes` at `addr`; nothing is written when any byte cannot be.
    #[inline(always)]
    pub fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), MemFault> {
        let off = (addr as usize) & (PAGE - 1);
        let n = bytes.len();
        if off + n > PAGE {
            return self.write_split(addr, bytes);
        }
        let slot = self.slot(addr >> PAGE_SHIFT)?;
        if self.slots[slot as usize].writable != Writable::Yes && !self.check_writable(slot) {
            return Err(MemFault);
        }
        self.commit(slot, off, bytes);
        Ok(())
    }

    #[inline(always)]
    fn commit(&mut self, slot: u32, off: usize, bytes: &[u8]) {
        let s = &mut self.slots[slot as usize];
        if let Some(j) = &mut self.journal {
            j.writes.push((slot, off as u16, bytes.len() as u16));
            j.old.extend_from_slice(&s.data[off..off + bytes.len()]);
        }
        s.data[off..off + bytes.len()].copy_from_slice(bytes);
        mark(&mut s.dirty, off, bytes.len());
        if !s.is_dirty {
            s.is_dirty = true;
            self.dirty.push(slot);
        }
    }

    #[inline(never)]
    fn write_split(&mut self, addr: u64, bytes: &[u8]) -> Result<(), MemFault> {
        let off = (addr as usize) & (PAGE - 1);
        let first = PAGE - off;
        let s0 = self.slot(addr >> PAGE_SHIFT)?;
        let s1 = self.slot((addr >> PAGE_SHIFT).wrapping_add(1))?;
        // Fetching the second page may not evict the first: slots stay until invalidation.
        if !self.check_writable(s0) || !self.check_writable(s1) {
            return Err(MemFault);
        }
        self.commit(s0, off, &bytes[..first]);
        self.commit(s1, 0, &bytes[first..]);
        Ok(())
    }

    /// Writes a little-endian integer of `size` bytes.
    #[inline(always)]
    pub fn write_int(&mut self, addr: u64, size: u8, v: u64) -> Result<(), MemFault> {
        let b = v.to_le_bytes();
        self.write(addr, &b[..size as usize])
    }

    /// Reads `out.len()` bytes at `addr`, across pages.
    pub fn read_bytes(&mut self, addr: u64, out: &mut [u8]) -> Result<(), MemFault> {
        let mut done = 0;
        while done < out.len() {
            let a = addr.checked_add(done as u64).ok_or(MemFault)?;
            let off = (a as usize) & (PAGE - 1);
            let n = (PAGE - off).min(out.len() - done);
            let slot = self.slot(a >> PAGE_SHIFT)?;
            out[done..done + n].copy_from_slice(&self.slots[slot as usize].data[off..off + n]);
            done += n;
        }
        Ok(())
    }

    /// Writes `bytes` at `addr`, across pages; nothing is written when any byte cannot be.
    pub fn write_bytes(&mut self, addr: u64, bytes: &[u8]) -> Result<(), MemFault> {
        let end = addr.checked_add(bytes.len() as u64).ok_or(MemFault)?;
        let mut page = addr >> PAGE_SHIFT;
        while !bytes.is_empty() && page << PAGE_SHIFT < end {
            let slot = self.slot(page)?;
            if !self.check_writable(slot) {
                return Err(MemFault);
            }
            page += 1;
        }
        let mut done = 0;
        while done < bytes.len() {
            let a = addr + done as u64;
            let off = (a as usize) & (PAGE - 1);
            let n = (PAGE - off).min(bytes.len() - done);
            let slot = self.slot(a >> PAGE_SHIFT)?;
            self.commit(slot, off, &bytes[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// Whether any byte awaits write-back.
    pub fn is_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Writes every dirty byte back into the tracee.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.dirty.is_empty() {
            return Ok(());
        }
        let mut runs: Vec<(u64, usize, usize)> = Vec::new();
        for &slot in &self.dirty {
            let s = &self.slots[slot as usize];
            let mut i = 0;
            while i < PAGE {
                let w = s.dirty[i / 64] >> (i % 64);
                if w == 0 {
                    i = (i / 64 + 1) * 64;
                    continue;
                }
                let start = i + w.trailing_zeros() as usize;
                let mut end = start;
                while end < PAGE && s.dirty[end / 64] & (1 << (end % 64)) != 0 {
                    end += 1;
                }
                runs.push((slot as u64, start, end));
                i = end;
            }
        }
        let pieces: Vec<(u64, &[u8])> = runs
            .iter()
            .map(|&(slot, a, b)| {
                let s = &self.slots[slot as usize];
                ((s.page << PAGE_SHIFT) + a as u64, &s.data[a..b])
            })
            .collect();
        ptrace::write_pieces(self.pid, &pieces)?;
        for &slot in &self.dirty {
            let s = &mut self.slots[slot as usize];
            s.dirty = [0; PAGE / 64];
            s.is_dirty = false;
        }
        self.dirty.clear();
        Ok(())
    }
}

/// Sets bits `off..off + n` of a page's dirty bitmap.
#[inline(always)]
fn mark(bits: &mut [u64; PAGE / 64], off: usize, n: usize) {
    let mut off = off;
    let mut n = n;
    while n > 0 {
        let bit = off % 64;
        let take = n.min(64 - bit);
        let m = if take == 64 {
            u64::MAX
        } else {
            ((1u64 << take) - 1) << bit
        };
        bits[off / 64] |= m;
        off += take;
        n -= take;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirty_bits_cover_exactly_the_written_bytes() {
        let mut b = [0u64; PAGE / 64];
        mark(&mut b, 60, 8);
        assert_eq!(b[0], 0xf << 60);
        assert_eq!(b[1], 0xf);
        mark(&mut b, 128, 64);
        assert_eq!(b[2], u64::MAX);
        assert_eq!(b[3], 0);
    }

    #[test]
    fn journal_undo_puts_back_every_byte_written() {
        // Our own memory, as in the test below.
        let pid = std::process::id() as pid_t;
        let mut cache = PageCache::new(pid);
        let buf: Box<[u8; 3 * PAGE]> = Box::new([5u8; 3 * PAGE]);
        let base = buf.as_ptr() as u64;
        cache.write_int(base, 4, 0x0102_0304).unwrap();
        cache.journal_start();
        // Overlapping writes, one across a page boundary, the last over the first.
        let cross = base + PAGE as u64 - 3;
        cache.write_int(cross, 8, u64::MAX).unwrap();
        cache.write_int(base + 2, 8, 0x1111_1111_1111_1111).unwrap();
        cache.write_bytes(base + 1, &[9u8; 5000]).unwrap();
        cache.journal_undo();
        assert_eq!(cache.read_int(base, 4), Ok(0x0102_0304));
        assert_eq!(cache.read_int(base + 4, 8), Ok(0x0505_0505_0505_0505));
        assert_eq!(cache.read_int(cross, 8), Ok(0x0505_0505_0505_0505));
        // Writes after the journal are kept.
        cache.journal_start();
        cache.write_int(cross, 2, 0x4242).unwrap();
        cache.journal_keep();
        cache.journal_undo();
        assert_eq!(cache.read_int(cross, 2), Ok(0x4242));
    }

    #[test]
    fn cache_reads_and_writes_back_own_memory() {
        // The cache works on any process we may read: use a child stopped under ptrace? Reading
        // our own memory through process_vm_readv is allowed, and write-back too.
        let pid = std::process::id() as pid_t;
        let mut cache = PageCache::new(pid);
        let buf: Box<[u8; 3 * PAGE]> = Box::new([7u8; 3 * PAGE]);
        let base = buf.as_ptr() as u64;
        // Crosses a page boundary.
        let addr = (base & !(PAGE as u64 - 1)) + 2 * PAGE as u64 - 3;
        let addr = if addr + 8 <= base + 3 * PAGE as u64 && addr >= base {
            addr
        } else {
            base + PAGE as u64 - 3
        };
        assert_eq!(cache.read_int(addr, 8), Ok(0x0707_0707_0707_0707));
        cache.write_int(addr, 8, 0x1122_3344_5566_7788).unwrap();
        assert_eq!(cache.read_int(addr, 8), Ok(0x1122_3344_5566_7788));
        let off = (addr - base) as usize;
        // SAFETY: in-bounds reads of `buf`; volatile because the kernel writes it behind the
        // compiler's back.
        let at = |k: usize| unsafe { std::ptr::read_volatile(buf.as_ptr().add(k)) };
        // Not yet in our memory.
        assert_eq!(at(off), 7);
        cache.flush().unwrap();
        let got: Vec<u8> = (off..off + 8).map(at).collect();
        assert_eq!(got, 0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(at(off - 1), 7);
        assert_eq!(at(off + 8), 7);
        cache.invalidate();
        assert_eq!(cache.pages(), 0);
        assert_eq!(cache.read(0), Err::<[u8; 1], _>(MemFault));
    }
}
