//! The folder's benchmark. Prints, on this machine:
//! - points folded per second on one core for synthetic 3-D streams of 10^7 points (a box with
//!   an affine address label, a triangular nest, and the box with a data-dependent value label);
//! - the folder's peak heap use (a counting allocator) and the process's peak RSS (VmHWM) while
//!   folding 10^6 and 10^8 points of the same nest: the state does not grow with the stream;
//! - many streams folded in parallel with rayon (generated in place, and materialized streams
//!   through `fold_all`), with the rayon thread count.
//!
//! Usage: `cargo run --release -p bench --bin fold_bench [-- --quick]` (`--quick` divides the
//! sizes by 10).

use folder::{fold_all, FoldOptions, Folded, StreamFolder};
use rayon::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::time::Instant;

/// Counts live heap bytes and their peak, while `COUNTING` is on (only in the memory section,
/// so that the shared counters do not slow the parallel section down).
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && COUNTING.load(Ordering::Relaxed) {
            let size = layout.size() as isize;
            let now = LIVE.fetch_add(size, Ordering::Relaxed) + size;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Starts counting from zero (frees of blocks allocated before may take `LIVE` below zero; the
/// peak is what the folder allocated on top).
fn start_counting() {
    LIVE.store(0, Ordering::Relaxed);
    PEAK.store(0, Ordering::Relaxed);
    COUNTING.store(true, Ordering::Relaxed);
}

fn vm_hwm_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[derive(Clone, Copy)]
enum Shape {
    /// for i < a, j < b, k < c: address = base + 8 (k + c j + b c i)
    Box,
    /// for i < a, j <= i, k < c: address = base + 8 (k + c j + a c i)
    Triangle,
    /// The box, with a second label: a data-dependent value.
    BoxValue,
    /// for i < a, j < b, k < len(i, j) (data-dependent, 0..2c): address = base + 8 (ptr + k),
    /// a CSR-like loop: over-approximated.
    Csr,
    /// for i < a, j < b, k < 4, but about one k in 29 missing (a wall, no neighbour): a mesh's
    /// neighbour loop, labelled with the neighbour read (data-dependent): runs of a few points
    /// (Rodinia cfd's dependences).
    Mesh,
}

/// Pushes the nest's points into `sink`; returns the number of points.
fn generate(shape: Shape, a: i64, b: i64, c: i64, mut sink: impl FnMut(&[i64], &[i64])) -> u64 {
    let base = 0x7fff_0000_0000_i64;
    let mut n = 0u64;
    let mut rng = fastrand::Rng::with_seed(1);
    let mut ptr = 0i64;
    for i in 0..a {
        let rows = match shape {
            Shape::Triangle => i + 1,
            _ => b,
        };
        for j in 0..rows {
            let len = match shape {
                Shape::Csr => rng.i64(0..2 * c),
                Shape::Mesh => 4,
                _ => c,
            };
            for k in 0..len {
                if let Shape::Mesh = shape {
                    if rng.u32(0..29) != 0 {
                        sink(&[i, j, k], &[i - 1, rng.i64(0..c), 0]);
                        n += 1;
                    }
                    continue;
                }
                let addr = base + 8 * (k + c * j + b.max(a) * c * i);
                match shape {
                    Shape::BoxValue => sink(&[i, j, k], &[addr, rng.i64(0..1 << 24)]),
                    Shape::Csr => sink(&[i, j, k], &[base + 8 * (ptr + k)]),
                    _ => sink(&[i, j, k], &[addr]),
                }
                n += 1;
            }
            ptr += len;
        }
    }
    n
}

fn labels(shape: Shape) -> usize {
    match shape {
        Shape::BoxValue => 2,
        Shape::Mesh => 3,
        _ => 1,
    }
}

/// Folds the nest in one thread; returns (points, seconds folding net of generation, result).
fn fold_one(shape: Shape, a: i64, b: i64, c: i64) -> (u64, f64, f64, Folded) {
    let t = Instant::now();
    let mut acc = 0i64;
    generate(shape, a, b, c, |p, l| {
        acc = acc.wrapping_add(black_box(p[2] ^ l[0]))
    });
    black_box(acc);
    let gen = t.elapsed().as_secs_f64();
    let mut f = StreamFolder::new(3, labels(shape), &FoldOptions::default());
    let t = Instant::now();
    let n = generate(shape, a, b, c, |p, l| f.push(p, l));
    let folded = f.finish();
    let total = t.elapsed().as_secs_f64();
    (n, total, (total - gen).max(1e-9), folded)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let scale = if quick { 10 } else { 1 };
    println!(
        "fold_bench: one core unless said otherwise{}",
        if quick { " (quick: sizes / 10)" } else { "" }
    );

    println!("\n== throughput, single thread ==");
    let cases: [(&str, Shape, i64, i64, i64); 5] = [
        (
            "3-D box 100x100x1000, address label",
            Shape::Box,
            100,
            100,
            1000 / scale,
        ),
        (
            "3-D triangle i<140, j<=i, k<1000, address label",
            Shape::Triangle,
            140,
            0,
            1000 / scale,
        ),
        (
            "3-D box 100x100x1000, address + data value",
            Shape::BoxValue,
            100,
            100,
            1000 / scale,
        ),
        (
            "3-D CSR-like 100x100x(0..2000), address label",
            Shape::Csr,
            100,
            100,
            1000 / scale,
        ),
        (
            "3-D mesh 6x400000x4, a neighbour in 29 missing, neighbour label",
            Shape::Mesh,
            6,
            400_000 / scale,
            1000,
        ),
    ];
    for (name, shape, a, b, c) in cases {
        let (n, total, net, folded) = fold_one(shape, a, b, c);
        println!(
            "{name}: {n} points in {total:.3} s: {:.1} M points/s (net of generation {:.1} M points/s); {} piece(s), exact fraction {:.3}",
            n as f64 / total / 1e6,
            n as f64 / net / 1e6,
            folded.pieces.len(),
            folded.exact_fraction()
        );
        if folded.pieces.len() <= 2 {
            println!("    {}", folded.to_isl_map("S", "A"));
        }
    }

    println!("\n== memory: the folder's state does not grow with the stream ==");
    for (name, shape) in [("box", Shape::Box), ("box + data value", Shape::BoxValue)] {
        for (a, b, c) in [(10, 100, 1000), (1000, 100, 1000)] {
            let (a, b) = (a / scale, b);
            start_counting();
            let hwm0 = vm_hwm_kib().unwrap_or(0);
            let mut f = StreamFolder::new(3, labels(shape), &FoldOptions::default());
            let t = Instant::now();
            let n = generate(shape, a, b, c, |p, l| f.push(p, l));
            let folded = f.finish();
            let secs = t.elapsed().as_secs_f64();
            COUNTING.store(false, Ordering::Relaxed);
            let peak = PEAK.load(Ordering::Relaxed).max(0);
            let hwm1 = vm_hwm_kib().unwrap_or(0);
            println!(
                "{name}, {n:>10} points: folder heap peak {:>7} bytes, VmHWM {hwm1} KiB (+{} KiB), {:.1} M points/s, {} piece(s)",
                peak,
                hwm1.saturating_sub(hwm0),
                n as f64 / secs / 1e6,
                folded.pieces.len()
            );
        }
    }

    println!("\n== many streams in parallel ==");
    let threads = rayon::current_num_threads();
    // Folding alone: each stream generated on the fly where it is folded.
    let jobs: Vec<i64> = (0..64).collect();
    let one = |s: &i64| {
        let shape = if s % 2 == 0 {
            Shape::Box
        } else {
            Shape::Triangle
        };
        let mut f = StreamFolder::new(3, 1, &FoldOptions::default());
        let n = generate(shape, 20 + s % 7, 20, 2000 / scale, |p, l| f.push(p, l));
        (n, f.finish())
    };
    let t = Instant::now();
    let seq: Vec<(u64, Folded)> = jobs.iter().map(one).collect();
    let t_seq = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let par: Vec<(u64, Folded)> = jobs.par_iter().map(one).collect();
    let t_par = t.elapsed().as_secs_f64();
    assert!(par == seq);
    let n: u64 = seq.iter().map(|(n, _)| n).sum();
    println!(
        "{} generated streams, {n} points: one thread {:.1} M points/s, rayon par_iter on {threads} thread(s) {:.1} M points/s ({:.2}x)",
        jobs.len(),
        n as f64 / t_seq / 1e6,
        n as f64 / t_par / 1e6,
        t_seq / t_par
    );
    // fold_all over materialized streams (one Vec per point and label: freeing them costs more
    // than folding them, and glibc frees blocks of another thread's arena slowly).
    let mut streams = Vec::new();
    for s in 0..64i64 {
        let mut pts = Vec::new();
        let shape = if s % 2 == 0 {
            Shape::Box
        } else {
            Shape::Triangle
        };
        generate(shape, 20 + s % 7, 20, 100 / scale, |p, l| {
            pts.push((p.to_vec(), l.to_vec()))
        });
        streams.push((s, pts));
    }
    let n: usize = streams.iter().map(|(_, p)| p.len()).sum();
    let opts = FoldOptions::default();
    let copy = streams.clone();
    let t = Instant::now();
    let seq: Vec<Folded> = copy
        .into_iter()
        .map(|(_, p)| folder::fold_points(&p, &opts))
        .collect();
    let t_seq = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let par = fold_all(streams, &opts);
    let t_par = t.elapsed().as_secs_f64();
    assert!(par.iter().zip(&seq).all(|((_, a), b)| a == b));
    println!(
        "{} materialized streams, {n} points (consumed and freed): one thread {:.1} M points/s, fold_all on {threads} thread(s) {:.1} M points/s ({:.2}x)",
        seq.len(),
        n as f64 / t_seq / 1e6,
        n as f64 / t_par / 1e6,
        t_seq / t_par
    );
}
