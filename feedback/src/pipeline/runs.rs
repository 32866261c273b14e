//! Dependence runs, on the dependence side of the second pass: a dependence that repeats its
//! predecessor's producer statement, kind and distance one innermost iteration later extends a
//! run in place, with no call into the stream collection; the run goes to its stream when it
//! breaks, where the folder takes it in constant time ([`folder::StreamFolder::push_run`]).
//!
//! Runs are kept per consumer statement and per rank of the dependence among its instance's
//! dependences (its *ordinal*): an instance's dependences come in the same order iteration
//! after iteration. Each stream must see its points in the order they came, and the collection
//! places a dependence in a slot (a second stream when one consumer instance has two producer
//! instances of one statement) by comparing with the stream's last point. So:
//! - a run's first instance goes alone, at once: streams are created in the same order;
//! - when any dependence of a consumer does not extend its run, every pending run of that
//!   consumer is sent first, and only then the dependence, alone;
//! - a dependence whose instance has an earlier one of the same producer, kind and channel
//!   (slot 1 and up) never runs.
//!
//! Each stream then receives the same points in the same order as dependence by dependence.

use rustc_hash::FxHashMap as HashMap;
use tracer::{DepKind, Stmt, Through};

/// What a run is of: the producer statement and the dependence's kind and channel.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Of {
    pub producer: Stmt,
    pub kind: DepKind,
    pub through: Through,
}

/// Loop depth up to which coordinates are kept inline in a run (deeper: no runs).
const DEPTH: usize = 8;

/// Coordinates (or their changes) of one instance, inline: a run reads and writes a few of
/// them per dependence, all in the run's own cache lines.
#[derive(Clone, Copy, Default)]
pub(super) struct Words {
    n: usize,
    w: [u64; DEPTH],
}

impl Words {
    /// `s`, if it fits.
    #[inline(always)]
    fn of(s: &[u64]) -> Option<Words> {
        let mut w = Words::default();
        w.set(s).then_some(w)
    }

    /// Sets the words to `s`, if it fits (else leaves them).
    #[inline(always)]
    fn set(&mut self, s: &[u64]) -> bool {
        if s.len() > DEPTH {
            return false;
        }
        self.n = s.len();
        copy(&mut self.w, s);
        true
    }

    #[inline(always)]
    pub fn get(&self) -> &[u64] {
        &self.w[..self.n]
    }
}

/// Copies `src` to the start of `dst` (a few words: a loop, not a call to `memcpy`).
#[inline(always)]
fn copy(dst: &mut [u64], src: &[u64]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = *s;
    }
}

/// One ordinal's run of a consumer statement.
pub(super) struct Run {
    pub of: Of,
    /// Extendable: false after a dependence that must go alone took this ordinal.
    live: bool,
    /// The consumer's instance (its count, see [`Consumer`]) the run last took, and the
    /// producer's coordinates there.
    instance: u64,
    p_last: Words,
    /// Step of the consumer's last coordinate, and change of the producer's coordinates (two's
    /// complement), per instance; `sigma` is 0 until the run has two instances.
    pub sigma: u64,
    pub delta: Words,
    /// Pending instances (not sent yet): the first one's coordinates and location, how many,
    /// and whether they all had that location.
    pub c_first: Words,
    pub p_first: Words,
    pub location: u64,
    pub same_location: bool,
    pub pending: u64,
}

impl Run {
    /// A run at a dependence sent alone, of the consumer's instance `instance` (one that
    /// cannot extend when its coordinates are too deep).
    fn start(of: Of, instance: u64, p: &[u64], live: bool) -> Run {
        let p_last = Words::of(p);
        Run {
            of,
            live: live && p_last.is_some(),
            instance,
            p_last: p_last.unwrap_or_default(),
            sigma: 0,
            delta: Words::default(),
            c_first: Words::default(),
            p_first: Words::default(),
            location: 0,
            same_location: true,
            pending: 0,
        }
    }

    /// Extends the run with the consumer's instance `c`, of producer instance `p`, at
    /// `location`, if it is the run's next one.
    #[inline]
    fn extend(&mut self, of: Of, c: &At<'_>, p: &[u64], location: u64) -> bool {
        let n = self.p_last.n;
        if !self.live
            || self.of != of
            || c.step == 0
            || self.instance + 1 != c.instance
            || p.len() != n
        {
            return false;
        }
        let last = &self.p_last.w[..n];
        if self.sigma == 0 {
            self.sigma = c.step;
            self.delta.n = n;
            for ((d, a), b) in self.delta.w.iter_mut().zip(p).zip(last) {
                *d = a.wrapping_sub(*b);
            }
        } else if self.sigma != c.step
            || !p
                .iter()
                .zip(last)
                .zip(&self.delta.w)
                .all(|((a, b), dv)| a.wrapping_sub(*b) == *dv)
        {
            return false;
        }
        if self.pending == 0 {
            self.c_first = *c.coords;
            self.p_first.n = n;
            copy(&mut self.p_first.w, p);
            self.location = location;
            self.same_location = true;
        } else {
            self.same_location &= location == self.location;
        }
        self.pending += 1;
        self.instance = c.instance;
        copy(&mut self.p_last.w, p);
        true
    }
}

/// A consumer's current instance, as [`Run::extend`] sees it.
struct At<'c> {
    instance: u64,
    step: u64,
    coords: &'c Words,
}

/// A consumer statement: its instances that had dependences, and its runs by ordinal.
struct Consumer {
    stmt: Stmt,
    runs: Vec<Run>,
    /// How many instances had dependences, the last one's coordinates, and its step from the
    /// one before in the innermost coordinate (0 when it is not the next along that loop).
    instance: u64,
    coords: Words,
    step: u64,
    /// Dependences since the last look at how often they break their runs, and how many went
    /// alone; instances left to send every dependence alone (runs that break every few
    /// instances cost more than they save: irregular code).
    tried: u32,
    alone: u32,
    off: u32,
}

/// Every this many dependences of a consumer, its runs are judged: when more than a third of
/// them broke a run, the consumer's dependences go alone for [`OFF_INSTANCES`] instances.
const JUDGE_EVERY: u32 = 256;
const OFF_INSTANCES: u32 = 1024;

impl Consumer {
    /// The instance at `c` had its first dependence.
    fn next_instance(&mut self, c: &[u64]) {
        let d = c.len();
        let last = self.coords.get();
        let along = d > 0 && d == last.len() && c[..d - 1].iter().zip(last).all(|(a, b)| a == b);
        let step = if along {
            c[d - 1].wrapping_sub(last[d - 1])
        } else {
            0
        };
        // Forward only, and small enough for the folder's signed steps; none past the inline
        // depth.
        self.step = if step <= i64::MAX as u64 { step } else { 0 };
        self.instance += 1;
        if !self.coords.set(c) {
            self.coords = Words::default();
            self.step = 0;
        }
    }
}

/// Entries of [`DepRuns::cache`]: a power of two, a few times the statements of a hot loop.
const CACHE_BITS: u32 = 12;

pub(super) struct DepRuns {
    /// Consumers by statement: a direct-mapped cache in front of a hash index.
    cache: Vec<(Option<Stmt>, u32)>,
    index: HashMap<Stmt, u32>,
    consumers: Vec<Consumer>,
    /// The consumer statement of the instance stepped last, its runs (once it had a
    /// dependence), and how many dependences it had so far.
    current: Option<Stmt>,
    runs_of_current: Option<u32>,
    ordinal: usize,
}

impl Default for DepRuns {
    fn default() -> Self {
        DepRuns {
            cache: vec![(None, 0); 1 << CACHE_BITS],
            index: HashMap::default(),
            consumers: Vec::new(),
            current: None,
            runs_of_current: None,
            ordinal: 0,
        }
    }
}

impl DepRuns {
    /// A new instance of `consumer` was stepped: its dependences follow.
    #[inline]
    pub fn step(&mut self, consumer: Stmt) {
        if self.current != Some(consumer) {
            self.current = Some(consumer);
            self.runs_of_current = None;
        }
        self.ordinal = 0;
    }

    /// The consumer's index: from the cache of recent ones, else from the hash index (an
    /// instance of another statement comes at nearly every step).
    #[inline]
    fn runs_of(&mut self, consumer: Stmt) -> u32 {
        let h = (consumer.pc ^ (consumer.context as u64).wrapping_mul(0x9e37_79b9))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            >> (64 - CACHE_BITS);
        let slot = &mut self.cache[h as usize];
        if slot.0 == Some(consumer) {
            return slot.1;
        }
        let i = self.lookup(consumer);
        self.cache[h as usize] = (Some(consumer), i);
        i
    }

    fn lookup(&mut self, consumer: Stmt) -> u32 {
        let consumers = &mut self.consumers;
        *self.index.entry(consumer).or_insert_with(|| {
            consumers.push(Consumer {
                stmt: consumer,
                runs: Vec::new(),
                instance: 0,
                coords: Words::default(),
                step: 0,
                tried: 0,
                alone: 0,
                off: 0,
            });
            (consumers.len() - 1) as u32
        })
    }

    /// One dependence of the instance stepped last (`of_current`), or of another one (a
    /// library call's, found later). True when it must go alone, after `send` took the
    /// consumer's pending runs; false when it extended its run.
    #[inline]
    pub fn dep(
        &mut self,
        d: &tracer::Dep<'_>,
        of_current: bool,
        send: impl FnMut(Stmt, &Run),
    ) -> bool {
        let of = Of {
            producer: d.producer,
            kind: d.kind,
            through: d.through,
        };
        if !of_current {
            let i = self.runs_of(d.consumer);
            self.drain(i, send);
            self.consumers[i as usize]
                .runs
                .iter_mut()
                .for_each(|r| r.live = false);
            return true;
        }
        let i = match self.runs_of_current {
            Some(i) => i,
            None => {
                let i = self.runs_of(d.consumer);
                self.runs_of_current = Some(i);
                i
            }
        };
        let j = self.ordinal;
        self.ordinal += 1;
        let c = &mut self.consumers[i as usize];
        if j == 0 {
            c.next_instance(d.consumer_coords);
            c.off = c.off.saturating_sub(1);
        }
        if c.off > 0 {
            // No runs (none pending either): alone.
            return true;
        }
        c.tried += 1;
        let at = At {
            instance: c.instance,
            step: c.step,
            coords: &c.coords,
        };
        if let Some(r) = c.runs.get_mut(j) {
            if r.extend(of, &at, d.producer_coords, d.location) {
                return false;
            }
        }
        self.drain(i, send);
        let c = &mut self.consumers[i as usize];
        c.alone += 1;
        if c.tried >= JUDGE_EVERY {
            let off = c.alone.saturating_mul(3) > c.tried;
            (c.tried, c.alone) = (0, 0);
            if off {
                // Nothing is pending: the runs can go, and start afresh afterwards.
                c.runs.clear();
                c.off = OFF_INSTANCES;
                return true;
            }
        }
        let runs = &mut c.runs;
        // Slot 1 and up (an earlier dependence of this instance has the same producer, kind
        // and channel): the folding side places it by the stream's last point, so it and its
        // ordinal's next instances go alone. A later ordinal's run of the same key would now
        // be one too.
        let live = !runs[..j.min(runs.len())].iter().any(|r| r.of == of);
        let r = Run::start(of, c.instance, d.producer_coords, live);
        match runs.get_mut(j) {
            Some(old) => *old = r,
            // Ordinals come in order: `j` is the next one.
            None => runs.push(r),
        }
        if live {
            runs.iter_mut()
                .skip(j + 1)
                .filter(|r| r.of == of)
                .for_each(|r| r.live = false);
        }
        true
    }

    /// The consumer of runs `i`, and its runs with pending instances, emptied as `send` takes
    /// them.
    pub fn drain(&mut self, i: u32, mut send: impl FnMut(Stmt, &Run)) {
        let c = &mut self.consumers[i as usize];
        for r in c.runs.iter_mut().filter(|r| r.pending > 0) {
            send(c.stmt, r);
            r.pending = 0;
        }
    }

    /// Every consumer's pending runs (at the end of the pass).
    pub fn drain_all(&mut self, mut send: impl FnMut(Stmt, &Run)) {
        for i in 0..self.consumers.len() {
            self.drain(i as u32, &mut send);
        }
    }
}
