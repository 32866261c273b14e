//! Byte-precise shadow state stored per granule of `G` bytes.
//!
//! Each shadowed byte (of memory or of the register file) refers to a record handle. Almost
//! every access covers whole granules that hold one handle, so a granule stores that handle
//! directly; only a granule whose bytes differ (a `char` store into an `int`, `mov al, ...`)
//! is *split*: its slot then points to `G` per-byte handles in a side table. A split granule
//! whose bytes become equal again is merged back. Reference counts stay per byte (a uniform
//! granule holds `G` references), so splitting and merging never touch them.
//!
//! Granules: 4 bytes for memory (an `int`), 8 for a general-purpose register, 16 for a vector
//! register (an xmm half of a ymm).

use crate::deps::Handle;

/// Set in a slot that indexes the split table instead of holding a handle.
pub(crate) const SPLIT: u32 = 1 << 31;

/// Per-byte handles of split granules.
pub(crate) struct Splits<const G: usize> {
    bytes: Vec<[Handle; G]>,
    free: Vec<u32>,
}

impl<const G: usize> Default for Splits<G> {
    fn default() -> Self {
        Splits {
            bytes: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<const G: usize> Splits<G> {
    fn alloc(&mut self, v: [Handle; G]) -> u32 {
        if let Some(i) = self.free.pop() {
            self.bytes[i as usize] = v;
            i
        } else {
            self.bytes.push(v);
            (self.bytes.len() - 1) as u32
        }
    }

    /// Split granules alive (a measure of how byte-granular the program's accesses are).
    #[cfg(test)]
    fn live(&self) -> usize {
        self.bytes.len() - self.free.len()
    }
}

/// Receives reference-count decrements: `release(handle, bytes)`.
pub(crate) trait Release {
    fn release(&mut self, h: Handle, n: u32);
}

/// Releases batched over consecutive equal handles.
struct Batch<'r, R: Release> {
    rel: &'r mut R,
    h: Handle,
    n: u32,
}

impl<R: Release> Batch<'_, R> {
    #[inline]
    fn add(&mut self, h: Handle, n: u32) {
        if h != self.h {
            self.rel.release(self.h, self.n);
            self.h = h;
            self.n = 0;
        }
        self.n += n;
    }
}

impl<R: Release> Drop for Batch<'_, R> {
    fn drop(&mut self) {
        self.rel.release(self.h, self.n);
    }
}

/// The handle of byte `off` of `slots`.
#[cfg(test)]
pub(crate) fn get<const G: usize>(slots: &[u32], splits: &Splits<G>, off: usize) -> Handle {
    let s = slots[off / G];
    if s & SPLIT == 0 {
        s
    } else {
        splits.bytes[(s & !SPLIT) as usize][off % G]
    }
}

/// Calls `f` with the handles of bytes `off..off + len`, skipping repeats of the previous one.
#[inline(always)]
pub(crate) fn for_each<const G: usize>(
    slots: &[u32],
    splits: &Splits<G>,
    off: usize,
    len: usize,
    mut f: impl FnMut(Handle),
) {
    // Fast path: the bytes lie in one or two granules that are not split.
    let g = off / G;
    let last = (off + len - 1) / G;
    if last == g && slots[g] & SPLIT == 0 {
        f(slots[g]);
        return;
    }
    if last == g + 1 && (slots[g] | slots[last]) & SPLIT == 0 {
        f(slots[g]);
        if slots[last] != slots[g] {
            f(slots[last]);
        }
        return;
    }
    for_each_slow(slots, splits, off, len, f)
}

fn for_each_slow<const G: usize>(
    slots: &[u32],
    splits: &Splits<G>,
    off: usize,
    len: usize,
    mut f: impl FnMut(Handle),
) {
    let end = off + len;
    let mut last = u32::MAX;
    let mut g = off / G;
    let mut lo = off % G;
    while g * G < end {
        let hi = (end - g * G).min(G);
        let s = slots[g];
        if s & SPLIT == 0 {
            if s != last {
                last = s;
                f(s);
            }
        } else {
            for &h in &splits.bytes[(s & !SPLIT) as usize][lo..hi] {
                if h != last {
                    last = h;
                    f(h);
                }
            }
        }
        g += 1;
        lo = 0;
    }
}

/// Sets bytes `off..off + len` to `h` (with `only_empty`, only those that hold no handle, 0),
/// releasing the handles they held; returns how many bytes changed (the references `h`
/// gains). (The dependence tracker handles whole unsplit granules itself; this is the
/// general walk.)
#[inline(always)]
pub(crate) fn overwrite<const G: usize>(
    slots: &mut [u32],
    splits: &mut Splits<G>,
    rel: &mut impl Release,
    off: usize,
    len: usize,
    h: Handle,
    only_empty: bool,
) -> u32 {
    debug_assert!(h & SPLIT == 0, "record handles stay below 2^31");
    let end = off + len;
    let mut changed = 0;
    let mut batch = Batch { rel, h: 0, n: 0 };
    let mut g = off / G;
    let mut lo = off % G;
    while g * G < end {
        let hi = (end - g * G).min(G);
        let slot = &mut slots[g];
        let s = *slot;
        if s & SPLIT == 0 {
            if s != h && (!only_empty || s == 0) {
                if lo == 0 && hi == G {
                    batch.add(s, G as u32);
                    changed += G as u32;
                    *slot = h;
                } else {
                    // Part of a uniform granule: split it.
                    let mut bytes = [s; G];
                    bytes[lo..hi].fill(h);
                    batch.add(s, (hi - lo) as u32);
                    changed += (hi - lo) as u32;
                    *slot = SPLIT | splits.alloc(bytes);
                }
            }
        } else {
            let i = (s & !SPLIT) as usize;
            let bytes = &mut splits.bytes[i];
            for b in &mut bytes[lo..hi] {
                if *b != h && (!only_empty || *b == 0) {
                    batch.add(*b, 1);
                    changed += 1;
                    *b = h;
                }
            }
            // Merge back once the bytes agree again.
            let first = bytes[0];
            if bytes.iter().all(|&b| b == first) {
                *slot = first;
                splits.free.push(i as u32);
            }
        }
        g += 1;
        lo = 0;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Counts(std::collections::HashMap<Handle, i64>);

    impl Release for Counts {
        fn release(&mut self, h: Handle, n: u32) {
            *self.0.entry(h).or_default() -= i64::from(n);
        }
    }

    /// Random overwrites (of all bytes, or of the empty ones) of a 64-byte range against a
    /// plain byte array: the same handles byte for byte, the same reference counts, and no
    /// split granule left whose bytes agree.
    #[test]
    fn matches_a_byte_array() {
        let mut rng = fastrand::Rng::with_seed(1);
        let mut next = |m: u64| rng.u64(..m);
        let mut slots = vec![0u32; 16];
        let mut splits = Splits::<4>::default();
        let mut bytes = [0u32; 64];
        let mut counts = Counts::default();
        for _ in 0..20_000 {
            let off = next(64) as usize;
            let len = (1 + next(32) as usize).min(64 - off);
            let h = next(4) as u32;
            // A third of the time, only the bytes that hold no handle.
            let only_empty = next(3) == 0;
            let changed = overwrite(
                &mut slots,
                &mut splits,
                &mut counts,
                off,
                len,
                h,
                only_empty,
            );
            *counts.0.entry(h).or_default() += i64::from(changed);
            let mut expect = 0;
            for b in &mut bytes[off..off + len] {
                if *b != h && (!only_empty || *b == 0) {
                    expect += 1;
                    *b = h;
                }
            }
            assert_eq!(changed, expect);
            for (i, &b) in bytes.iter().enumerate() {
                assert_eq!(get(&slots, &splits, i), b, "byte {i}");
            }
            let mut seen = Vec::new();
            for_each(&slots, &splits, off, len, |h| seen.push(h));
            if !only_empty {
                assert_eq!(seen, vec![h]);
            }
            for h in 1..4 {
                let refs = bytes.iter().filter(|&&b| b == h).count() as i64;
                assert_eq!(counts.0.get(&h).copied().unwrap_or(0), refs, "handle {h}");
            }
            for &s in &slots {
                if s & SPLIT != 0 {
                    let b = splits.bytes[(s & !SPLIT) as usize];
                    assert!(b.iter().any(|&x| x != b[0]));
                }
            }
        }
        assert!(splits.live() <= 16);
    }

    #[test]
    fn for_each_skips_repeats_across_granules() {
        let mut slots = vec![0u32; 4];
        let mut splits = Splits::<4>::default();
        let mut counts = Counts::default();
        overwrite(&mut slots, &mut splits, &mut counts, 0, 16, 1, false);
        overwrite(&mut slots, &mut splits, &mut counts, 5, 2, 2, false);
        let mut seen = Vec::new();
        for_each(&slots, &splits, 0, 16, |h| seen.push(h));
        assert_eq!(seen, vec![1, 2, 1]);
        seen.clear();
        for_each(&slots, &splits, 6, 1, |h| seen.push(h));
        assert_eq!(seen, vec![2]);
    }
}
