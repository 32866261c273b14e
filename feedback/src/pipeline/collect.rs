//! Stream collection, on both sides of the second pass: each instruction's instances
//! (coordinates, addresses, values written; [`InsnCollect`], on the schedule side) and each
//! dependence's pairs of instances ([`DepCollect`], on the dependence side) go to a stream
//! folder of their own; finished, they are the folded trace ([`Folded2`]) the regions are
//! built from.

use super::classify::narrow_writes;
use super::{Code, Folded2, InsnStream2};
use folder::{FoldOptions, StreamFolder};
use ptrace_runner::AccessKind;
use rustc_hash::FxHashMap as HashMap;
use tracer::{DepKind, NodeId, Stmt, Through};

/// Appends a few words (coordinates) without a call to `memcpy`.
#[inline(always)]
pub(super) fn push_all(b: &mut Vec<u64>, words: &[u64]) {
    for &w in words {
        b.push(w);
    }
}

struct InsnStream {
    folder: StreamFolder,
    first: u64,
    naddr: usize,
    nval: usize,
    sizes: Vec<u32>,
    writes: Vec<bool>,
    /// Bit k: register write k is of a 32-bit form, whose value is folded sign-extended (a
    /// counter gcc runs down to -1 in `r11d` is affine only so).
    narrow: u64,
}

struct DepStream {
    folder: StreamFolder,
    /// Some consumer instance had several producer instances of the same statement.
    multi: bool,
    /// The first instance's location (memory address, or register-shadow offset), and
    /// whether every instance had it.
    location: u64,
    fixed: bool,
}

/// Consumer, producer, kind, through, and the slot: the rank of the producer instance among
/// those of the same statement that one consumer instance depends on.
pub(super) type DepKey = (Stmt, Stmt, DepKind, Through, u8);

/// Producer instances of one statement kept per consumer instance (a 32-byte load of four
/// values written by four iterations needs four); past that the relation is marked inexact.
const MAX_SLOTS: u8 = 8;

/// Streams by key, looked up several times per traced instruction. The folders live apart from
/// the index so that the index stays small enough for the cache (a folder is hundreds of
/// bytes; inline in the table, every probe would touch a new cache line).
struct Streams<K, V> {
    index: HashMap<K, u32>,
    items: Vec<(K, V)>,
}

impl<K: std::hash::Hash + Eq + Copy, V> Streams<K, V> {
    fn new() -> Self {
        Streams {
            index: HashMap::default(),
            items: Vec::new(),
        }
    }

    #[inline]
    fn index_of(&mut self, k: K, new: impl FnOnce() -> V) -> u32 {
        let items = &mut self.items;
        *self.index.entry(k).or_insert_with(|| {
            items.push((k, new()));
            (items.len() - 1) as u32
        })
    }

    fn len(&self) -> usize {
        self.items.len()
    }
}

/// The instruction streams, on the schedule side.
pub(super) struct InsnCollect<'o> {
    opts: &'o FoldOptions,
    /// The code the first pass saw, to decode an instruction when its stream starts.
    code: &'o Code,
    insns: Streams<(NodeId, u64), InsnStream>,
    clock: u64,
    label: Vec<i64>,
}

/// A dependence stream a consumer statement consumes: producer, kind, through, slot, and its
/// index in [`DepCollect::deps`].
type Consumed = (Stmt, DepKind, Through, u8, u32);

/// The dependence streams, on the dependence side.
pub(super) struct DepCollect<'o> {
    opts: &'o FoldOptions,
    deps: Streams<DepKey, DepStream>,
    /// Per consumer statement, the dependence streams it consumes: (producer, kind, through,
    /// slot, index in `deps`). A handful each, searched before the hash index.
    consumers: Streams<Stmt, Vec<Consumed>>,
    /// The consumer of the last dependence, and its index in `consumers`.
    stepped: Option<Stmt>,
    current: Option<u32>,
    /// Where in the current consumer's list its next dependence is looked up first.
    cursor: usize,
}

fn lex_gt(a: &[i64], b: &[i64]) -> bool {
    a.len() != b.len() || a > b
}

/// Iteration coordinates as the folder's points: counters from 0, far below 2^63, so the
/// same words and the same order as signed integers.
#[inline(always)]
fn coords(c: &[u64]) -> &[i64] {
    bytemuck::cast_slice(c)
}

impl<'o> InsnCollect<'o> {
    /// No streams yet, folding with `opts`, the code the first pass saw in `code`.
    pub(super) fn new(opts: &'o FoldOptions, code: &'o Code) -> InsnCollect<'o> {
        InsnCollect {
            opts,
            code,
            insns: Streams::new(),
            clock: 0,
            label: Vec::new(),
        }
    }

    pub(super) fn step(&mut self, s: &tracer::Step<'_>) {
        let insn = s.insn;
        // The index of this instruction, the clock of the schedule tree's `first` and `last`.
        let clock = self.clock;
        self.clock += 1;
        let (opts, code) = (self.opts, self.code);
        let i = self.insns.index_of((s.context, insn.pc), || {
            let naddr = insn.mem.len();
            let nval = insn.regs.len();
            InsnStream {
                folder: StreamFolder::new(s.coords.len(), naddr + nval, opts),
                first: clock,
                naddr,
                nval,
                sizes: insn.mem.iter().map(|m| m.size).collect(),
                writes: insn
                    .mem
                    .iter()
                    .map(|m| m.kind == AccessKind::Write)
                    .collect(),
                narrow: narrow_writes(code, insn),
            }
        });
        let st = &mut self.insns.items[i as usize].1;
        let point = coords(s.coords);
        if st
            .folder
            .last_point()
            .is_some_and(|last| !lex_gt(point, last))
        {
            return;
        }
        self.label.clear();
        for k in 0..st.naddr {
            self.label
                .push(insn.mem.get(k).map_or(0, |m| m.addr as i64));
        }
        for k in 0..st.nval {
            let v = insn.regs.get(k).map_or(0, |r| r.value);
            self.label.push(if k < 64 && st.narrow >> k & 1 == 1 {
                i64::from(v as u32 as i32)
            } else {
                v as i64
            });
        }
        st.folder.push(point, &self.label);
    }
}

impl<'o> DepCollect<'o> {
    /// No streams yet, folding with `opts`.
    pub(super) fn new(opts: &'o FoldOptions) -> DepCollect<'o> {
        DepCollect {
            opts,
            deps: Streams::new(),
            consumers: Streams::new(),
            stepped: None,
            current: None,
            cursor: 0,
        }
    }

    /// The dependences that follow are mostly `stmt`'s, as this one.
    #[inline]
    fn focus(&mut self, stmt: Stmt) {
        if self.stepped != Some(stmt) {
            self.stepped = Some(stmt);
            self.current = None;
            self.cursor = 0;
        }
    }

    /// One dynamic dependence. A consumer instance with several producer instances of the
    /// same statement (a 16-byte load of two values written by two iterations) sends the
    /// second to a second stream (slot 1), and so on: each slot folds on its own, and none of
    /// the pairs is lost.
    pub(super) fn dep(&mut self, d: &tracer::Dep<'_>) {
        for slot in 0..MAX_SLOTS {
            let i = self.stream_of(d, slot);
            let st = &mut self.deps.items[i as usize].1;
            st.fixed &= st.location == d.location;
            let point = coords(d.consumer_coords);
            if let Some(last) = st.folder.last_point() {
                if !lex_gt(point, last) {
                    if last == point && slot + 1 < MAX_SLOTS {
                        continue;
                    }
                    st.multi = true;
                    return;
                }
            }
            st.folder.push(point, coords(d.producer_coords));
            return;
        }
    }

    /// `count` dynamic dependences: `d`, then `d` with the consumer's last coordinate `sigma`
    /// further and the producer's coordinates `delta` further (two's complement), and so on;
    /// at `d.location` each if `same_location`. Placed and folded as they would be one by
    /// one: the stream is the one of the first instance, which is above the stream's last
    /// point, and so are the others, which are above it.
    pub(super) fn dep_run(
        &mut self,
        d: &tracer::Dep<'_>,
        same_location: bool,
        sigma: u64,
        delta: &[u64],
        count: u64,
    ) {
        let point = coords(d.consumer_coords);
        for slot in 0..MAX_SLOTS {
            let i = self.stream_of(d, slot);
            let st = &mut self.deps.items[i as usize].1;
            match st.folder.last_point() {
                Some(last) if last == point && slot + 1 < MAX_SLOTS => continue,
                Some(last) if !lex_gt(point, last) => break,
                _ => {}
            }
            st.fixed &= same_location && st.location == d.location;
            st.folder.push_run(
                point,
                coords(d.producer_coords),
                sigma as i64,
                bytemuck::cast_slice(delta),
                count,
            );
            return;
        }
        // Out of order (never so from the dependence side): one by one, as they would come.
        let mut c = d.consumer_coords.to_vec();
        let mut p = d.producer_coords.to_vec();
        for k in 0..count {
            if k > 0 {
                if let Some(t) = c.last_mut() {
                    *t = t.wrapping_add(sigma);
                }
                p.iter_mut()
                    .zip(delta)
                    .for_each(|(v, dv)| *v = v.wrapping_add(*dv));
            }
            self.dep(&tracer::Dep {
                consumer_coords: &c,
                producer_coords: &p,
                // Not all at `d.location`: the stream's location is then not fixed.
                location: if same_location {
                    d.location
                } else {
                    !d.location
                },
                ..*d
            });
        }
    }

    /// The index of the stream of `d`'s key in `slot`.
    fn stream_of(&mut self, d: &tracer::Dep<'_>, slot: u8) -> u32 {
        let opts = self.opts;
        let new = || DepStream {
            folder: StreamFolder::new(d.consumer_coords.len(), d.producer_coords.len(), opts),
            multi: false,
            location: d.location,
            fixed: true,
        };
        let key = (d.consumer, d.producer, d.kind, d.through, slot);
        self.focus(d.consumer);
        if self.current.is_none() {
            self.current = Some(self.consumers.index_of(d.consumer, Vec::new));
        }
        let current = self.current.map(|i| &mut self.consumers.items[i as usize]);
        match current {
            Some((at, consumes)) if *at == d.consumer => {
                let want = (d.producer, d.kind, d.through, slot);
                let is = |c: &Consumed| (c.0, c.1, c.2, c.3) == want;
                // An instance's dependences come in the order the last one's came: try the
                // entry after the last one matched (the first, after the last) before searching.
                if self.cursor >= consumes.len() {
                    self.cursor = 0;
                }
                if let Some(c) = consumes.get(self.cursor).filter(|c| is(c)) {
                    self.cursor += 1;
                    return c.4;
                }
                match consumes.iter().position(is) {
                    Some(p) => {
                        self.cursor = p + 1;
                        consumes[p].4
                    }
                    None => {
                        let i = self.deps.index_of(key, new);
                        consumes.push((d.producer, d.kind, d.through, slot, i));
                        self.cursor = consumes.len();
                        i
                    }
                }
            }
            _ => self.deps.index_of(key, new),
        }
    }
}

/// The folded streams of the second pass, and how many of each kind there were.
pub(super) fn finish_folding(i: InsnCollect<'_>, c: DepCollect<'_>) -> (Folded2, (usize, usize)) {
    let streams = (i.insns.len(), c.deps.len());
    let dep_ends = c
        .deps
        .items
        .iter()
        .flat_map(|((cons, prod, ..), _)| [(cons.context, cons.pc), (prod.context, prod.pc)])
        .collect();
    let folded = Folded2 {
        dep_ends,
        insns: i
            .insns
            .items
            .into_iter()
            .map(|(k, s)| {
                let meta = InsnStream2 {
                    first: s.first,
                    naddr: s.naddr,
                    sizes: s.sizes,
                    writes: s.writes,
                };
                let f = s.folder.finish();
                (k, (meta, f))
            })
            .collect(),
        deps: c
            .deps
            .items
            .into_iter()
            .map(|(k, s)| {
                let (multi, location, fixed) = (s.multi, s.location, s.fixed);
                (k, s.folder.finish(), multi, location, fixed)
            })
            .collect(),
    };
    (folded, streams)
}
