//! The second pass's two threads and the message format between them: the tracing side
//! ([`Pipe`]) writes each step and dependence the tracer finds as words into buffers, sent over
//! a bounded channel to the folding side, which replays them ([`unpipe`]) into the stream
//! collection ([`Collect`]).

use super::collect::{push_all, Collect};
use super::{Code, PipelineError};
use folder::FoldOptions;
use ptrace_runner::AccessKind;
use tracer::{DepKind, DepOptions, EventSource, NodeId, Stmt, Through};

/// Words of messages sent to the folding thread at a time.
const PIPE_WORDS: usize = 1 << 15;
/// Message buffers in flight: memory stays bounded when folding falls behind.
const MESSAGES_IN_FLIGHT: usize = 8;

const MSG_STEP: u64 = 0;
const MSG_DEP: u64 = 1;
/// A dependence message's consumer is the last step's instance (left out of the message).
const DEP_SAME_CONSUMER: u64 = 1 << 44;
/// A dependence message's producer coordinates are its consumer's (left out of the message).
const DEP_SAME_COORDS: u64 = 1 << 45;
/// A count in a message's first word (coordinates, accesses, registers: far below it).
const FIELD: u64 = 0xffff;

#[inline]
fn field(n: usize) -> u64 {
    debug_assert!(n as u64 <= FIELD);
    n as u64 & FIELD
}

/// The tracing side of the second pass: steps and dependences as words, in order.
struct Pipe {
    buf: Vec<u64>,
    tx: Option<std::sync::mpsc::SyncSender<Vec<u64>>>,
    back: std::sync::mpsc::Receiver<Vec<u64>>,
    /// The last step's statement and coordinates.
    last: Option<Stmt>,
    last_coords: Vec<u64>,
    /// Messages sent (for `POLYPROF_TIMING`).
    steps: u64,
    deps: u64,
}

impl Pipe {
    /// `[tag | coords << 4 | accesses << 20 | registers << 36, context, pc, coords..,
    /// (address, size << 1 | write).., (register, value)..]`
    fn step(&mut self, s: &tracer::Step<'_>) {
        let i = s.insn;
        self.steps += 1;
        let max = 3 + s.coords.len() + 2 * (i.mem.len() + i.regs.len());
        message(&mut self.buf, max, |w| {
            w.put(
                MSG_STEP
                    | field(s.coords.len()) << 4
                    | field(i.mem.len()) << 20
                    | field(i.regs.len()) << 36,
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
        // The dependences that follow are mostly this instance's: they leave it out.
        self.last = Some(Stmt {
            context: s.context,
            pc: i.pc,
        });
        self.last_coords.clear();
        push_all(&mut self.last_coords, s.coords);
        self.maybe_send();
    }

    /// `[tag | consumer coords << 4 | producer coords << 20 | kind << 36 | through << 40 |
    /// flags << 44, (consumer context, consumer pc)?, producer context, producer pc, location,
    /// (consumer coords..)?, (producer coords..)?]`. Three dependences come per instruction
    /// on average, most of them of the instance just stepped and many within one iteration:
    /// [`DEP_SAME_CONSUMER`] leaves out the consumer (the last step's statement and
    /// coordinates), [`DEP_SAME_COORDS`] the producer's coordinates (the consumer's).
    fn dep(&mut self, d: &tracer::Dep<'_>) {
        self.deps += 1;
        let same_consumer =
            self.last == Some(d.consumer) && same(d.consumer_coords, &self.last_coords);
        let same_coords = same(d.producer_coords, d.consumer_coords);
        let max = 6 + d.consumer_coords.len() + d.producer_coords.len();
        message(&mut self.buf, max, |w| {
            w.put(
                MSG_DEP
                    | field(d.consumer_coords.len()) << 4
                    | field(d.producer_coords.len()) << 20
                    | (d.kind as u64) << 36
                    | (d.through as u64) << 40
                    | if same_consumer { DEP_SAME_CONSUMER } else { 0 }
                    | if same_coords { DEP_SAME_COORDS } else { 0 },
            );
            if !same_consumer {
                w.put(d.consumer.context as u64);
                w.put(d.consumer.pc);
            }
            w.put(d.producer.context as u64);
            w.put(d.producer.pc);
            w.put(d.location);
            if !same_consumer {
                w.put_all(d.consumer_coords);
            }
            if !same_coords {
                w.put_all(d.producer_coords);
            }
        });
        self.maybe_send();
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
                // The folding thread is gone (it panicked): its join reports it.
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

/// The last step the folding side replayed: the consumer of the dependences that leave it out.
#[derive(Default)]
struct LastStep {
    stmt: Option<Stmt>,
    coords: Vec<u64>,
}

/// CPU time of the calling thread so far (for `POLYPROF_TIMING`; 0 where Linux's schedstat is
/// missing): on a loaded machine a thread's wall time says little.
fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 * 1e-9)
}

/// The folding side: replays the messages of one buffer into `c`.
fn unpipe(buf: &[u64], insn: &mut ptrace_runner::Insn, last: &mut LastStep, c: &mut Collect<'_>) {
    let mut k = 0;
    while k < buf.len() {
        let head = buf[k];
        let n1 = (head >> 4 & FIELD) as usize;
        let n2 = (head >> 20 & FIELD) as usize;
        if head & 0xf == MSG_STEP {
            let n3 = (head >> 36 & FIELD) as usize;
            let context = buf[k + 1] as NodeId;
            insn.clear();
            insn.pc = buf[k + 2];
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
            last.stmt = Some(Stmt {
                context,
                pc: insn.pc,
            });
            last.coords.clear();
            push_all(&mut last.coords, coords);
            c.step(&tracer::Step {
                insn,
                context,
                coords,
            });
            k = j;
        } else {
            let kind = match head >> 36 & 0xf {
                0 => DepKind::Flow,
                1 => DepKind::Anti,
                _ => DepKind::Output,
            };
            let through = if head >> 40 & 0xf == 0 {
                Through::Register
            } else {
                Through::Memory
            };
            let stmt = |i: usize| Stmt {
                context: buf[i] as NodeId,
                pc: buf[i + 1],
            };
            let mut j = k + 1;
            // The flag decides the layout; the tracing side sets it only after a step.
            let consumer = if head & DEP_SAME_CONSUMER != 0 {
                last.stmt.unwrap_or(Stmt { context: 0, pc: 0 })
            } else {
                j += 2;
                stmt(k + 1)
            };
            let producer = stmt(j);
            let location = buf[j + 2];
            j += 3;
            let consumer_coords = if head & DEP_SAME_CONSUMER != 0 {
                &last.coords[..]
            } else {
                j += n1;
                &buf[j - n1..j]
            };
            let producer_coords = if head & DEP_SAME_COORDS != 0 {
                consumer_coords
            } else {
                j += n2;
                &buf[j - n2..j]
            };
            c.dep(&tracer::Dep {
                kind,
                through,
                consumer,
                producer,
                location,
                consumer_coords,
                producer_coords,
            });
            k = j;
        }
    }
}

/// The second pass: iteration vectors and dependences on this thread, their folding on
/// another (the two halves cost about the same), joined by a bounded channel of messages.
pub(super) fn second_pass<'o>(
    source: &(impl EventSource + ?Sized),
    structure: tracer::Structure,
    entries: &[u64],
    fold: &'o FoldOptions,
    code: &'o Code,
    on_dep: &mut dyn FnMut(&tracer::Dep<'_>),
) -> Result<(tracer::Analysis, Collect<'o>), PipelineError> {
    let started = std::time::Instant::now();
    let cpu0 = thread_cpu_seconds();
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u64>>(MESSAGES_IN_FLIGHT);
    let (back_tx, back_rx) = std::sync::mpsc::channel::<Vec<u64>>();
    let (traced, c) = std::thread::scope(|scope| {
        let folding = std::thread::Builder::new()
            .name("polyprof-fold".into())
            .spawn_scoped(scope, || {
                let mut c = Collect::new(fold, code);
                let cpu0 = thread_cpu_seconds();
                let mut insn = ptrace_runner::Insn::default();
                let mut last = LastStep::default();
                for buf in rx {
                    unpipe(&buf, &mut insn, &mut last, &mut c);
                    // The tracing side reuses the buffer, unless it is done.
                    let _ = back_tx.send(buf);
                }
                (c, thread_cpu_seconds() - cpu0)
            });
        let mut pipe = Pipe {
            buf: Vec::with_capacity(PIPE_WORDS + 64),
            tx: Some(tx),
            back: back_rx,
            last: None,
            last_coords: Vec::new(),
            steps: 0,
            deps: 0,
        };
        let cell = std::cell::RefCell::new(&mut pipe);
        let traced = tracer::analyze_with_deps_on(
            source,
            structure,
            entries,
            DepOptions::default(),
            |s| cell.borrow_mut().step(s),
            |d| {
                on_dep(d);
                cell.borrow_mut().dep(d)
            },
        );
        pipe.close();
        let traced_at = started.elapsed();
        let cpu = thread_cpu_seconds() - cpu0;
        let c = match folding {
            Ok(h) => h.join().ok(),
            Err(_) => None,
        };
        if std::env::var_os("POLYPROF_TIMING").is_some() {
            eprintln!(
                "polyprof: second pass: {:.3} s ({:.3} s tracer side; CPU {:.3} s tracing, \
                 {:.3} s folding); {} steps, {} dependences",
                started.elapsed().as_secs_f64(),
                traced_at.as_secs_f64(),
                cpu,
                c.as_ref().map_or(0.0, |c| c.1),
                pipe.steps,
                pipe.deps
            );
        }
        (traced, c.map(|c| c.0))
    });
    let (analysis, _) = traced?;
    let c = c.ok_or_else(|| {
        PipelineError::Folding("the folding thread could not run or panicked".to_string())
    })?;
    Ok((analysis, c))
}
