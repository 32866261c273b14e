//! The second pass's two threads and the message format between them. The schedule side
//! ([`Pipe`], on the calling thread) replays the recording, computes every instruction's
//! iteration vector and folds the instruction streams ([`InsnCollect`]); it writes each step,
//! and the few events the dependence stage needs besides (code bytes, library calls and
//! returns, system calls), as words into buffers sent over a bounded channel. The other side
//! ([`Deps`]) replays them ([`unpipe`]) into the dependence stage ([`DepTracker`]: shadow
//! memory and registers), whose dependences go to their streams ([`DepCollect`]) on the same
//! thread, as runs where they repeat ([`DepRuns`]). The two halves cost about the same: the
//! pass keeps both cores busy.

use super::collect::{push_all, DepCollect, InsnCollect};
use super::runs::{DepRuns, Run};
use super::{Code, PipelineError};
use folder::FoldOptions;
use ptrace_runner::{AccessKind, Event, LibCall, Syscall, Transfer, TransferKind};
use tracer::{DepKind, DepOptions, DepTracker, EventSource, NodeId, Stmt, Through};

/// Words of messages sent to the dependence thread at a time.
const PIPE_WORDS: usize = 1 << 15;
/// Message buffers in flight: memory stays bounded when that thread falls behind.
const MESSAGES_IN_FLIGHT: usize = 8;

const MSG_STEP: u64 = 0;
const MSG_CODE: u64 = 1;
const MSG_CALL: u64 = 2;
const MSG_RETURN: u64 = 3;
const MSG_SYSCALL: u64 = 4;
/// Messages from the dependence side to the folding side.
const MSG_DEP: u64 = 5;
const MSG_RUN: u64 = 6;
/// A count in a message's first word (coordinates, accesses, registers: far below it).
const FIELD: u64 = 0xffff;

#[inline]
fn field(n: usize) -> u64 {
    debug_assert!(n as u64 <= FIELD);
    n as u64 & FIELD
}

/// A step's transfer kind, in its message's first word (0: none). The dependence stage uses
/// the kind alone (a call's return address is no data), not the target.
fn transfer_code(t: Option<Transfer>) -> u64 {
    match t.map(|t| t.kind) {
        None => 0,
        Some(TransferKind::Jump) => 1,
        Some(TransferKind::CondJump) => 2,
        Some(TransferKind::Call) => 3,
        Some(TransferKind::Return) => 4,
        Some(TransferKind::Other) => 5,
    }
}

fn transfer(code: u64) -> Option<Transfer> {
    let kind = match code {
        1 => TransferKind::Jump,
        2 => TransferKind::CondJump,
        3 => TransferKind::Call,
        4 => TransferKind::Return,
        5 => TransferKind::Other,
        _ => return None,
    };
    Some(Transfer { kind, target: 0 })
}

/// Bytes packed eight to a word, little-endian.
fn put_bytes(w: &mut Words<'_>, bytes: &[u8]) {
    for c in bytes.chunks(8) {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        w.put(u64::from_le_bytes(b));
    }
}

fn get_bytes(words: &[u64], n: usize, out: &mut Vec<u8>) {
    out.clear();
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
    out.truncate(n);
}

/// The schedule side of the second pass: the instruction streams, and steps and events as
/// words, in order.
struct Pipe<'o> {
    insns: InsnCollect<'o>,
    ch: Channel,
    /// Steps sent (for `POLYPROF_TIMING`).
    steps: u64,
}

/// Buffers of message words to the next thread, over a bounded channel; the receiver sends
/// them back to be reused.
struct Channel {
    buf: Vec<u64>,
    tx: Option<std::sync::mpsc::SyncSender<Vec<u64>>>,
    back: std::sync::mpsc::Receiver<Vec<u64>>,
}

impl Channel {
    /// A channel and its receiving end (whose buffers go back through `back_tx`).
    fn new() -> (
        Channel,
        std::sync::mpsc::Receiver<Vec<u64>>,
        std::sync::mpsc::Sender<Vec<u64>>,
    ) {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u64>>(MESSAGES_IN_FLIGHT);
        let (back_tx, back) = std::sync::mpsc::channel::<Vec<u64>>();
        let ch = Channel {
            buf: Vec::with_capacity(PIPE_WORDS + 64),
            tx: Some(tx),
            back,
        };
        (ch, rx, back_tx)
    }

    #[inline]
    fn maybe_send(&mut self) {
        if self.buf.len() >= PIPE_WORDS {
            self.send();
        }
    }

    fn send(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        let spare = self
            .back
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(PIPE_WORDS + 64));
        let full = std::mem::replace(&mut self.buf, spare);
        self.buf.clear();
        if let Some(tx) = &self.tx {
            if tx.send(full).is_err() {
                // The receiving thread is gone (it panicked): its join reports it.
                self.tx = None;
            }
        }
    }

    /// Sends the rest and closes the channel.
    fn close(&mut self) {
        self.send();
        self.tx = None;
    }
}

impl Pipe<'_> {
    /// `[tag | coords << 4 | accesses << 20 | registers << 36 | transfer << 52, context, pc,
    /// coords.., (address, size << 1 | write).., (register, value)..]`
    fn step(&mut self, s: &tracer::Step<'_>) {
        self.insns.step(s);
        let i = s.insn;
        self.steps += 1;
        let max = 3 + s.coords.len() + 2 * (i.mem.len() + i.regs.len());
        message(&mut self.ch.buf, max, |w| {
            w.put(
                MSG_STEP
                    | field(s.coords.len()) << 4
                    | field(i.mem.len()) << 20
                    | field(i.regs.len()) << 36
                    | transfer_code(i.transfer) << 52,
            );
            w.put(s.context as u64);
            w.put(i.pc);
            w.put_all(s.coords);
            for m in &i.mem {
                w.put(m.addr);
                w.put(u64::from(m.size) << 1 | u64::from(m.kind == AccessKind::Write));
            }
            for r in &i.regs {
                w.put(r.reg as u64);
                w.put(r.value);
            }
        });
        self.ch.maybe_send();
    }

    /// The events [`DepTracker::event`] reads, before the event's steps:
    /// - code: `[tag | bytes << 4, address, bytes (8 a word)..]`;
    /// - a library call: `[tag | name bytes + 1 (0: no name) << 4, site, target, return to,
    ///   name (8 bytes a word)..]`;
    /// - its return: `[tag, pc, rax, cost]`;
    /// - a system call: `[tag | returned << 4 | native << 5, pc, number, 6 arguments, return
    ///   value]`.
    fn event(&mut self, ev: &Event<'_>) {
        match *ev {
            Event::Code { addr, bytes } => {
                message(&mut self.ch.buf, 2 + bytes.len().div_ceil(8), |w| {
                    w.put(MSG_CODE | field(bytes.len()) << 4);
                    w.put(addr);
                    put_bytes(w, bytes);
                })
            }
            Event::LibCall(c) => {
                let name = c.name.as_deref().map(str::as_bytes);
                let n = name.map_or(0, |b| b.len() + 1);
                message(
                    &mut self.ch.buf,
                    4 + name.map_or(0, |b| b.len().div_ceil(8)),
                    |w| {
                        w.put(MSG_CALL | field(n) << 4);
                        w.put(c.site);
                        w.put(c.target);
                        w.put(c.return_to);
                        put_bytes(w, name.unwrap_or_default());
                    },
                )
            }
            Event::LibReturn { pc, rax, cost } => message(&mut self.ch.buf, 4, |w| {
                w.put(MSG_RETURN);
                w.put(pc);
                w.put(rax);
                w.put(cost);
            }),
            Event::Syscall(s) => message(&mut self.ch.buf, 10, |w| {
                w.put(MSG_SYSCALL | u64::from(s.ret.is_some()) << 4 | u64::from(s.native) << 5);
                w.put(s.pc);
                w.put(s.nr);
                w.put_all(&s.args);
                w.put(s.ret.unwrap_or(0) as u64);
            }),
            _ => return,
        }
        self.ch.maybe_send();
    }
}

/// Where a message's words go: the buffer's spare capacity. (Pushing them one by one reloads
/// the vector's length and capacity after every store, which might have changed them.)
struct Words<'b> {
    s: &'b mut [std::mem::MaybeUninit<u64>],
    n: usize,
}

impl Words<'_> {
    #[inline(always)]
    fn put(&mut self, w: u64) {
        self.s[self.n].write(w);
        self.n += 1;
    }

    #[inline(always)]
    fn put_all(&mut self, words: &[u64]) {
        for &w in words {
            self.put(w);
        }
    }
}

/// Appends a message of at most `max` words, written by `f`, to `b`.
#[inline(always)]
fn message(b: &mut Vec<u64>, max: usize, f: impl FnOnce(&mut Words<'_>)) {
    b.reserve(max);
    let len = b.len();
    let mut w = Words {
        s: b.spare_capacity_mut(),
        n: 0,
    };
    f(&mut w);
    let n = w.n;
    // SAFETY: `f` initialised the first `n` words of the spare capacity (`put` writes them in
    // order, and panics rather than write past the capacity).
    unsafe { b.set_len(len + n) };
}

/// The same words (coordinates), compared without a call to `memcmp`.
#[inline(always)]
fn same(a: &[u64], b: &[u64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// CPU time of the calling thread so far (for `POLYPROF_TIMING`; 0 where Linux's schedstat is
/// missing): on a loaded machine a thread's wall time says little.
fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 * 1e-9)
}

/// The dependence side of the second pass: the dependence stage and where its dependences go.
struct Deps<'d> {
    tracker: DepTracker,
    sink: Sink<'d>,
}

/// Where dependences go: their runs, and messages to the folding thread.
struct Sink<'d> {
    out: Channel,
    /// Dependence runs, unless every dependence goes on its own.
    runs: Option<DepRuns>,
    /// The step being replayed: the consumer of most dependences.
    last: Option<Stmt>,
    last_coords: Vec<u64>,
    on_dep: Option<&'d mut (dyn FnMut(&tracer::Dep<'_>) + Send)>,
    /// Dependences found, and those runs carried (for `POLYPROF_TIMING`).
    deps: u64,
    in_runs: u64,
}

impl Sink<'_> {
    /// Routes one dependence found at an event: into its run, or to its stream after the runs
    /// of its consumer.
    fn dep(&mut self, d: &tracer::Dep<'_>) {
        let current = self.last == Some(d.consumer) && same(d.consumer_coords, &self.last_coords);
        self.dep_of(d, current);
    }

    /// Routes one dependence, of the instance stepped last if `current`.
    #[inline]
    fn dep_of(&mut self, d: &tracer::Dep<'_>, current: bool) {
        self.deps += 1;
        if let Some(f) = &mut self.on_dep {
            f(d);
        }
        let buf = &mut self.out.buf;
        if let Some(runs) = &mut self.runs {
            let in_runs = &mut self.in_runs;
            let alone = runs.dep(d, current, |consumer, r| {
                *in_runs += r.pending;
                run_message(buf, consumer, r);
            });
            if !alone {
                return;
            }
        }
        dep_message(buf, d);
        self.out.maybe_send();
    }

    /// Sends every pending run, and closes the channel (at the end of the pass).
    fn finish(&mut self) {
        let (buf, in_runs) = (&mut self.out.buf, &mut self.in_runs);
        if let Some(runs) = &mut self.runs {
            runs.drain_all(|consumer, r| {
                *in_runs += r.pending;
                run_message(buf, consumer, r);
            });
        }
        self.out.close();
    }
}

/// `[tag | consumer coords << 4 | producer coords << 20 | kind << 36 | through << 40 | same
/// coordinates << 44, consumer context, consumer pc, producer context, producer pc, location,
/// consumer coords.., (producer coords..)?]`: one dependence (the producer's coordinates left
/// out when they are the consumer's, as within one iteration).
fn dep_message(b: &mut Vec<u64>, d: &tracer::Dep<'_>) {
    let same_coords = same(d.producer_coords, d.consumer_coords);
    let (n1, n2) = (d.consumer_coords.len(), d.producer_coords.len());
    message(b, 6 + n1 + n2, |w| {
        w.put(
            MSG_DEP
                | field(n1) << 4
                | field(n2) << 20
                | (d.kind as u64) << 36
                | (d.through as u64) << 40
                | u64::from(same_coords) << 44,
        );
        w.put(d.consumer.context as u64);
        w.put(d.consumer.pc);
        w.put(d.producer.context as u64);
        w.put(d.producer.pc);
        w.put(d.location);
        w.put_all(d.consumer_coords);
        if !same_coords {
            w.put_all(d.producer_coords);
        }
    });
}

/// `[tag | consumer coords << 4 | producer coords << 20 | kind << 36 | through << 40 | same
/// location << 44, consumer context, consumer pc, producer context, producer pc, location,
/// count, sigma, consumer coords.., producer coords.., producer deltas..]`: the pending
/// instances of a dependence run (see [`DepRuns`]).
fn run_message(b: &mut Vec<u64>, consumer: Stmt, r: &Run) {
    let (c, p, delta) = (r.c_first.get(), r.p_first.get(), r.delta.get());
    let (n1, n2) = (c.len(), p.len());
    message(b, 8 + n1 + 2 * n2, |w| {
        w.put(
            MSG_RUN
                | field(n1) << 4
                | field(n2) << 20
                | (r.of.kind as u64) << 36
                | (r.of.through as u64) << 40
                | u64::from(r.same_location) << 44,
        );
        w.put(consumer.context as u64);
        w.put(consumer.pc);
        w.put(r.of.producer.context as u64);
        w.put(r.of.producer.pc);
        w.put(r.location);
        w.put(r.pending);
        w.put(r.sigma);
        w.put_all(c);
        w.put_all(p);
        w.put_all(delta);
    });
}

fn kind(head: u64) -> DepKind {
    match head >> 36 & 0xf {
        0 => DepKind::Flow,
        1 => DepKind::Anti,
        _ => DepKind::Output,
    }
}

fn through(head: u64) -> Through {
    if head >> 40 & 0xf == 0 {
        Through::Register
    } else {
        Through::Memory
    }
}

/// The folding side: replays the dependence messages of one buffer into `c`.
fn unpipe_deps(buf: &[u64], c: &mut DepCollect<'_>) {
    let mut k = 0;
    while k < buf.len() {
        let head = buf[k];
        let n1 = (head >> 4 & FIELD) as usize;
        let n2 = (head >> 20 & FIELD) as usize;
        let stmt = |i: usize| Stmt {
            context: buf[i] as NodeId,
            pc: buf[i + 1],
        };
        let (consumer, producer, location) = (stmt(k + 1), stmt(k + 3), buf[k + 5]);
        // Both messages start alike; only where the coordinates lie differs.
        let dep = |consumer_coords, producer_coords| tracer::Dep {
            kind: kind(head),
            through: through(head),
            consumer,
            producer,
            location,
            consumer_coords,
            producer_coords,
        };
        if head & 0xf == MSG_RUN {
            let (count, sigma) = (buf[k + 6], buf[k + 7]);
            let j = k + 8;
            let consumer_coords = &buf[j..j + n1];
            let producer_coords = &buf[j + n1..j + n1 + n2];
            let delta = &buf[j + n1 + n2..j + n1 + 2 * n2];
            c.dep_run(
                &dep(consumer_coords, producer_coords),
                head >> 44 & 1 == 1,
                sigma,
                delta,
                count,
            );
            k = j + n1 + 2 * n2;
        } else {
            let j = k + 6;
            let consumer_coords = &buf[j..j + n1];
            let (producer_coords, end) = if head >> 44 & 1 == 1 {
                (consumer_coords, j + n1)
            } else {
                (&buf[j + n1..j + n1 + n2], j + n1 + n2)
            };
            c.dep(&dep(consumer_coords, producer_coords));
            k = end;
        }
    }
}

/// The dependence side: replays the messages of one buffer into `d`, in order.
fn unpipe(buf: &[u64], insn: &mut ptrace_runner::Insn, bytes: &mut Vec<u8>, d: &mut impl Replayed) {
    let mut k = 0;
    while k < buf.len() {
        let head = buf[k];
        let n1 = (head >> 4 & FIELD) as usize;
        match head & 0xf {
            MSG_STEP => {
                let n2 = (head >> 20 & FIELD) as usize;
                let n3 = (head >> 36 & FIELD) as usize;
                let context = buf[k + 1] as NodeId;
                insn.clear();
                insn.pc = buf[k + 2];
                insn.transfer = transfer(head >> 52 & 0xf);
                let coords = &buf[k + 3..k + 3 + n1];
                let mut j = k + 3 + n1;
                for _ in 0..n2 {
                    let (addr, sk) = (buf[j], buf[j + 1]);
                    insn.mem.push(ptrace_runner::MemAccess {
                        addr,
                        size: (sk >> 1) as u32,
                        kind: if sk & 1 == 1 {
                            AccessKind::Write
                        } else {
                            AccessKind::Read
                        },
                    });
                    j += 2;
                }
                for _ in 0..n3 {
                    let reg = iced_x86::Register::try_from(buf[j] as usize)
                        .unwrap_or(iced_x86::Register::None);
                    insn.regs.push(ptrace_runner::RegWrite {
                        reg,
                        value: buf[j + 1],
                    });
                    j += 2;
                }
                d.step(&tracer::Step {
                    insn,
                    context,
                    coords,
                });
                k = j;
            }
            MSG_CODE => {
                let words = n1.div_ceil(8);
                get_bytes(&buf[k + 2..k + 2 + words], n1, bytes);
                let ev = Event::Code {
                    addr: buf[k + 1],
                    bytes,
                };
                d.event(&ev);
                k += 2 + words;
            }
            MSG_CALL => {
                // `n1` counts the name's bytes plus one (0: no name).
                let words = n1.saturating_sub(1).div_ceil(8);
                let name = (n1 > 0).then(|| {
                    get_bytes(&buf[k + 4..k + 4 + words], n1 - 1, bytes);
                    String::from_utf8_lossy(bytes).into_owned()
                });
                let c = LibCall {
                    site: buf[k + 1],
                    target: buf[k + 2],
                    return_to: buf[k + 3],
                    name,
                };
                d.event(&Event::LibCall(&c));
                k += 4 + words;
            }
            MSG_RETURN => {
                d.event(&Event::LibReturn {
                    pc: buf[k + 1],
                    rax: buf[k + 2],
                    cost: buf[k + 3],
                });
                k += 4;
            }
            _ => {
                let mut args = [0; 6];
                args.copy_from_slice(&buf[k + 3..k + 9]);
                let s = Syscall {
                    pc: buf[k + 1],
                    nr: buf[k + 2],
                    args,
                    ret: (head >> 4 & 1 == 1).then_some(buf[k + 9] as i64),
                    native: head >> 5 & 1 == 1,
                };
                d.event(&Event::Syscall(&s));
                k += 10;
            }
        }
    }
}

/// What the messages replay into: the dependence side, or a test's record of them.
trait Replayed {
    fn step(&mut self, step: &tracer::Step<'_>);
    fn event(&mut self, ev: &Event<'_>);
}

impl Replayed for Deps<'_> {
    fn step(&mut self, step: &tracer::Step<'_>) {
        let stmt = Stmt {
            context: step.context,
            pc: step.insn.pc,
        };
        let sink = &mut self.sink;
        sink.last = Some(stmt);
        sink.last_coords.clear();
        push_all(&mut sink.last_coords, step.coords);
        if let Some(r) = &mut sink.runs {
            r.step(stmt);
        }
        // A step's dependences are all of its instance.
        self.tracker.step(step, &mut |dep| sink.dep_of(dep, true));
    }

    /// An event for the dependence stage (a library call's dependences are found here).
    fn event(&mut self, ev: &Event<'_>) {
        let sink = &mut self.sink;
        self.tracker.event(ev, &mut |dep| sink.dep(dep));
    }
}

/// The second pass on three threads joined by bounded channels of messages: iteration vectors
/// and the instruction streams on this one, the dependence stage on the next, the dependence
/// streams' folding on the last. Their shares vary with the program (regular code: the first
/// two; irregular code, where dependences rarely run: the folding); the system spreads the
/// three over the cores.
pub(super) fn second_pass<'o>(
    source: &(impl EventSource + ?Sized),
    structure: tracer::Structure,
    entries: &[u64],
    fold: &'o FoldOptions,
    code: &'o Code,
    dep_runs: bool,
    on_dep: Option<&mut (dyn FnMut(&tracer::Dep<'_>) + Send)>,
) -> Result<(tracer::Analysis, InsnCollect<'o>, DepCollect<'o>), PipelineError> {
    let started = std::time::Instant::now();
    let cpu0 = thread_cpu_seconds();
    let (ch, rx, back_tx) = Channel::new();
    let (out, fold_rx, fold_back_tx) = Channel::new();
    let (traced, insns, d, c) = std::thread::scope(|scope| {
        let folding = std::thread::Builder::new()
            .name("polyprof-fold".into())
            .spawn_scoped(scope, || {
                let mut c = DepCollect::new(fold);
                let cpu0 = thread_cpu_seconds();
                for buf in fold_rx {
                    unpipe_deps(&buf, &mut c);
                    let _ = fold_back_tx.send(buf);
                }
                (c, thread_cpu_seconds() - cpu0)
            });
        let dependences = std::thread::Builder::new()
            .name("polyprof-deps".into())
            .spawn_scoped(scope, || {
                let mut d = Deps {
                    tracker: DepTracker::new(DepOptions::default()),
                    sink: Sink {
                        out,
                        runs: dep_runs.then(DepRuns::default),
                        last: None,
                        last_coords: Vec::new(),
                        on_dep,
                        deps: 0,
                        in_runs: 0,
                    },
                };
                let cpu0 = thread_cpu_seconds();
                let mut insn = ptrace_runner::Insn::default();
                let mut bytes = Vec::new();
                for buf in rx {
                    unpipe(&buf, &mut insn, &mut bytes, &mut d);
                    // The schedule side reuses the buffer, unless it is done.
                    let _ = back_tx.send(buf);
                }
                let mut s = d.sink;
                s.finish();
                (s.deps, s.in_runs, thread_cpu_seconds() - cpu0)
            });
        let mut pipe = Pipe {
            insns: InsnCollect::new(fold, code),
            ch,
            steps: 0,
        };
        let cell = std::cell::RefCell::new(&mut pipe);
        let traced = tracer::analyze_steps_on(
            source,
            structure,
            entries,
            |ev| cell.borrow_mut().event(ev),
            |s| cell.borrow_mut().step(s),
        );
        pipe.ch.close();
        let traced_at = started.elapsed();
        let cpu = thread_cpu_seconds() - cpu0;
        let d = match dependences {
            Ok(h) => h.join().ok(),
            Err(_) => None,
        };
        let c = match folding {
            Ok(h) => h.join().ok(),
            Err(_) => None,
        };
        if std::env::var_os("POLYPROF_TIMING").is_some() {
            let (deps, in_runs, cpu2) = d.unwrap_or((0, 0, 0.0));
            eprintln!(
                "polyprof: second pass: {:.3} s ({:.3} s schedule side; CPU {:.3} s schedule, \
                 {:.3} s dependences, {:.3} s folding); {} steps, {} dependences ({} in runs)",
                started.elapsed().as_secs_f64(),
                traced_at.as_secs_f64(),
                cpu,
                cpu2,
                c.as_ref().map_or(0.0, |c| c.1),
                pipe.steps,
                deps,
                in_runs
            );
        }
        (traced, pipe.insns, d, c.map(|c| c.0))
    });
    let analysis = traced?;
    let c = c.filter(|_| d.is_some()).ok_or_else(|| {
        PipelineError::Folding(
            "the dependence or folding thread could not run or panicked".to_string(),
        )
    })?;
    Ok((analysis, insns, c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ptrace_runner::{MemAccess, OwnedEvent, RegWrite};

    /// What was replayed, as owned events (a step as its instruction, with its statement and
    /// coordinates beside).
    #[derive(Default)]
    struct Record {
        events: Vec<OwnedEvent>,
        steps: Vec<(NodeId, Vec<u64>)>,
    }

    impl Replayed for Record {
        fn step(&mut self, s: &tracer::Step<'_>) {
            self.events.push(OwnedEvent::from(&Event::Insn(s.insn)));
            self.steps.push((s.context, s.coords.to_vec()));
        }
        fn event(&mut self, ev: &Event<'_>) {
            self.events.push(OwnedEvent::from(ev));
        }
    }

    /// Every message kind, with names and code of every length around a word's, replays as
    /// it was sent (a step's transfer target aside: the dependence stage reads its kind only).
    #[test]
    fn messages_replay_as_sent() {
        let (ch, rx, _back_tx) = Channel::new();
        let (fold, code) = (FoldOptions::default(), Code::default());
        let mut pipe = Pipe {
            insns: InsnCollect::new(&fold, &code),
            ch,
            steps: 0,
        };
        let mut sent = Vec::new();
        for n in 0..20usize {
            let name: String = "abcdefghijklmnopqrstu".chars().take(n).collect();
            let bytes: Vec<u8> = (0..n as u8).map(|b| b.wrapping_mul(37)).collect();
            let call = LibCall {
                site: 0x1000 + n as u64,
                target: 0x7f00_0000_0000,
                return_to: 0x1005 + n as u64,
                name: (n % 5 != 4).then_some(name),
            };
            let sys = Syscall {
                pc: 0x2000,
                nr: n as u64,
                args: [1, 2, 3, u64::MAX, 5, n as u64],
                ret: (n % 2 == 0).then_some(-(n as i64)),
                native: n % 3 == 0,
            };
            let insn = ptrace_runner::Insn {
                pc: 0x3000 + n as u64,
                len: 0,
                mem: (0..n % 3)
                    .map(|i| MemAccess {
                        addr: 0x8000 + i as u64 * 8,
                        size: 1 << i,
                        kind: if i == 1 {
                            AccessKind::Write
                        } else {
                            AccessKind::Read
                        },
                    })
                    .collect(),
                regs: (0..n % 2)
                    .map(|_| RegWrite {
                        reg: iced_x86::Register::RAX,
                        value: u64::MAX - n as u64,
                    })
                    .collect(),
                transfer: [None, Some(TransferKind::Call), Some(TransferKind::Return)][n % 3]
                    .map(|kind| Transfer { kind, target: 0 }),
            };
            let coords: Vec<u64> = (0..n as u64 % 4).collect();
            let events = [
                Event::Code {
                    addr: 0x4000 + n as u64,
                    bytes: &bytes,
                },
                Event::LibCall(&call),
                Event::LibReturn {
                    pc: call.return_to,
                    rax: n as u64,
                    cost: 7,
                },
                Event::Syscall(&sys),
            ];
            for ev in &events {
                pipe.event(ev);
                sent.push((OwnedEvent::from(ev), None));
            }
            pipe.step(&tracer::Step {
                insn: &insn,
                context: n as NodeId,
                coords: &coords,
            });
            sent.push((
                OwnedEvent::from(&Event::Insn(&insn)),
                Some((n as NodeId, coords)),
            ));
        }
        pipe.ch.close();
        let mut got = Record::default();
        let (mut insn, mut bytes) = (ptrace_runner::Insn::default(), Vec::new());
        for buf in rx {
            unpipe(&buf, &mut insn, &mut bytes, &mut got);
        }
        assert_eq!(got.events.len(), sent.len());
        let mut steps = got.steps.iter();
        for (i, (want, step)) in sent.iter().enumerate() {
            assert_eq!(&got.events[i], want, "message {i}");
            if let Some(s) = step {
                assert_eq!(steps.next(), Some(s), "message {i}");
            }
        }
    }
}
