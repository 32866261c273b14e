//! Dependence runs, on the tracing side of the second pass: a dependence that repeats its
//! predecessor's producer statement, kind and distance one innermost iteration later extends a
//! run in place, with no message; the run goes to the folding side as one message when it
//! breaks (and [`crate::pipeline`]'s folder folds it in constant time).
//!
//! Runs are kept per consumer statement and per rank of the dependence among its instance's
//! dependences (its *ordinal*): an instance's dependences come in the same order iteration
//! after iteration. The folding side must see each stream's points in the order they came, and
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

/// One ordinal's run of a consumer statement.
pub(super) struct Run {
    pub of: Of,
    /// Extendable: false after a dependence that must go alone took this ordinal.
    live: bool,
    /// The consumer's instance (its count, see [`Consumer`]) the run last took, and the
    /// producer's coordinates there.
    instance: u64,
    p_last: Vec<u64>,
    /// Step of the consumer's last coordinate, and change of the producer's coordinates (two's
    /// complement), per instance; `sigma` is 0 until the run has two instances.
    pub sigma: u64,
    pub delta: Vec<u64>,
    /// Pending instances (not sent yet): the first one's coordinates and location, how many,
    /// and whether they all had that location.
    pub c_first: Vec<u64>,
    pub p_first: Vec<u64>,
    pub location: u64,
    pub same_location: bool,
    pub pending: u64,
}

impl Run {
    /// A run at a dependence sent alone, of the consumer's instance `instance`.
    fn start(of: Of, instance: u64, p: &[u64], live: bool) -> Run {
        Run {
            of,
            live,
            instance,
            p_last: p.to_vec(),
            sigma: 0,
            delta: Vec::new(),
            c_first: Vec::new(),
            p_first: Vec::new(),
            location: 0,
            same_location: true,
            pending: 0,
        }
    }

    /// Extends the run with instance `instance` of the consumer, `step` further than its last
    /// one (0: not along the innermost loop), of producer instance `p`, at `location`, if it
    /// is the run's next one.
    #[inline]
    fn extend(&mut self, of: Of, c: &At<'_>, p: &[u64], location: u64) -> bool {
        if !self.live
            || self.of != of
            || c.step == 0
            || self.instance + 1 != c.instance
            || p.len() != self.p_last.len()
        {
            return false;
        }
        if self.sigma == 0 {
            self.sigma = c.step;
            self.delta.clear();
            for (a, b) in p.iter().zip(&self.p_last) {
                self.delta.push(a.wrapping_sub(*b));
            }
        } else if self.sigma != c.step
            || !p
                .iter()
                .zip(&self.p_last)
                .zip(&self.delta)
                .all(|((a, b), dv)| a.wrapping_sub(*b) == *dv)
        {
            return false;
        }
        if self.pending == 0 {
            set(&mut self.c_first, c.coords);
            set(&mut self.p_first, p);
            self.location = location;
            self.same_location = true;
        } else {
            self.same_location &= location == self.location;
        }
        self.pending += 1;
        self.instance = c.instance;
        for (l, v) in self.p_last.iter_mut().zip(p) {
            *l = *v;
        }
        true
    }
}

/// A consumer's current instance, as [`Run::extend`] sees it.
struct At<'c> {
    instance: u64,
    step: u64,
    coords: &'c [u64],
}

/// Copies `from` into `v` (a few words: no call to `memcpy`).
#[inline(always)]
fn set(v: &mut Vec<u64>, from: &[u64]) {
    v.clear();
    for &w in from {
        v.push(w);
    }
}

/// A consumer statement: its instances that had dependences, and its runs by ordinal.
struct Consumer {
    stmt: Stmt,
    runs: Vec<Run>,
    /// How many instances had dependences, the last one's coordinates, and its step from the
    /// one before in the innermost coordinate (0 when it is not the next along that loop).
    instance: u64,
    coords: Vec<u64>,
    step: u64,
}

impl Consumer {
    /// The instance at `c` had its first dependence.
    fn next_instance(&mut self, c: &[u64]) {
        let d = c.len();
        let along = d > 0
            && d == self.coords.len()
            && c[..d - 1].iter().zip(&self.coords).all(|(a, b)| a == b);
        let step = if along {
            c[d - 1].wrapping_sub(self.coords[d - 1])
        } else {
            0
        };
        // Forward only, and small enough for the folder's signed steps.
        self.step = if step <= i64::MAX as u64 { step } else { 0 };
        self.instance += 1;
        set(&mut self.coords, c);
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
                coords: Vec::new(),
                step: 0,
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
        }
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
