//! Compact recording of the event stream, so the tracer's passes can replay one execution.
//!
//! The program runs once; its events go to an unlinked temporary file (on disk, so long runs
//! do not fill RAM) and are read back through a memory map whose pages are released behind
//! the reader, so that replaying does not grow resident memory with the trace either.
//!
//! Encoding: one tag byte per record, then LEB128 varints. Each instruction address keeps a
//! model of its last execution (addresses and their stride, register values and their step,
//! the transfer target). An instruction that does exactly what its model predicts costs
//! nothing but a count: a run of predicted instructions is one record, so an affine loop
//! costs a few bytes per iteration of its outermost loop that breaks the prediction. Other
//! instructions are written out, their numbers as zig-zag deltas against the same predictions.
//!
//! [`Recorder::spawn`] records on a second thread: the tracing thread only encodes into
//! chunks, sent through a bounded channel to a thread that decodes them for a consumer (the
//! tracer's first pass) and writes them to the file.

use crate::event::{
    AccessKind, Event, EventSink, ExitStatus, Insn, LibCall, MemAccess, RegWrite, Syscall,
    Transfer, TransferKind,
};
use rustc_hash::FxHashMap as HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc;

/// Version of the encoding below. Recordings kept on disk (`polyprof record`) carry it; bump it
/// whenever a change to the encoding would make an older recording decode differently.
pub const FORMAT: u32 = 1;

const TAG_CODE: u8 = 1;
const TAG_INSN: u8 = 2;
const TAG_LIBCALL: u8 = 3;
const TAG_LIBRETURN: u8 = 4;
const TAG_SYSCALL: u8 = 5;
const TAG_SIGNAL: u8 = 6;
const TAG_DETACH: u8 = 7;
const TAG_EXIT: u8 = 8;
/// A run of instructions that each did what the model of its address predicted.
const TAG_RUN: u8 = 9;

/// Accesses and register writes per instruction that the model of an address predicts; an
/// instruction with more is always written out.
const SLOTS: usize = 4;
const NO_TRANSFER: u8 = 0xff;

/// What an instruction address did last time, and the steps since the time before.
#[derive(Clone, Default)]
struct PcModel {
    seen: bool,
    len: u8,
    transfer: u8,
    target: u64,
    nmem: usize,
    /// (size and kind as encoded, last address, stride)
    mem: [(u64, u64, u64); SLOTS],
    nregs: usize,
    /// (register, last value, step)
    regs: [(iced_x86::Register, u64, u64); SLOTS],
}

fn access_code(a: &MemAccess) -> u64 {
    (u64::from(a.size) << 1) | matches!(a.kind, AccessKind::Write) as u64
}

impl PcModel {
    /// Whether `i` is exactly the predicted next execution of this address.
    #[inline]
    fn predicts(&self, i: &Insn) -> bool {
        if !self.seen
            || i.len != self.len
            || i.mem.len() != self.nmem
            || i.regs.len() != self.nregs
            || self.nmem > SLOTS
            || self.nregs > SLOTS
        {
            return false;
        }
        let transfer_ok = match i.transfer {
            None => self.transfer == NO_TRANSFER,
            Some(t) => transfer_code(t.kind) == self.transfer && t.target == self.target,
        };
        transfer_ok
            && i.mem
                .iter()
                .zip(&self.mem)
                .all(|(a, &(code, last, stride))| {
                    access_code(a) == code && a.addr == last.wrapping_add(stride)
                })
            && i.regs
                .iter()
                .zip(&self.regs)
                .all(|(r, &(reg, last, step))| r.reg == reg && r.value == last.wrapping_add(step))
    }

    /// The predicted address of access `j` (when this address has one).
    #[inline]
    fn addr(&self, j: usize) -> Option<u64> {
        (self.seen && j < self.nmem.min(SLOTS)).then(|| {
            let (_, last, stride) = self.mem[j];
            last.wrapping_add(stride)
        })
    }

    /// The predicted value of register write `k` (when it writes the same register).
    #[inline]
    fn value(&self, k: usize, reg: iced_x86::Register) -> Option<u64> {
        (self.seen && k < self.nregs.min(SLOTS) && self.regs[k].0 == reg).then(|| {
            let (_, last, step) = self.regs[k];
            last.wrapping_add(step)
        })
    }

    /// Learns from an execution of this address.
    #[inline]
    fn update(&mut self, i: &Insn) {
        for (j, a) in i.mem.iter().enumerate().take(SLOTS) {
            let code = access_code(a);
            let m = &mut self.mem[j];
            m.2 = if self.seen && j < self.nmem && m.0 == code {
                a.addr.wrapping_sub(m.1)
            } else {
                0
            };
            m.0 = code;
            m.1 = a.addr;
        }
        for (k, r) in i.regs.iter().enumerate().take(SLOTS) {
            let m = &mut self.regs[k];
            m.2 = if self.seen && k < self.nregs && m.0 == r.reg {
                r.value.wrapping_sub(m.1)
            } else {
                0
            };
            m.0 = r.reg;
            m.1 = r.value;
        }
        self.nmem = i.mem.len();
        self.nregs = i.regs.len();
        self.len = i.len;
        match i.transfer {
            None => self.transfer = NO_TRANSFER,
            Some(t) => {
                self.transfer = transfer_code(t.kind);
                self.target = t.target;
            }
        }
        self.seen = true;
    }
}

/// Predictions shared by writer and reader; both update them identically.
struct Model {
    next_pc: u64,
    /// The model of `next_pc`, when it has one (`NO_MODEL` otherwise): found without a hash
    /// lookup when control goes where it went last time from the previous address.
    next_id: u32,
    last_addr: u64,
    reg_values: Box<[u64; 256]>,
    /// Models by instruction address: indices into `models`.
    index: HashMap<u64, u32>,
    models: Vec<PcModel>,
    /// For each model, the address that followed it last time and its model: most
    /// instructions go where they went before.
    succ: Vec<(u64, u32)>,
}

const NO_MODEL: u32 = u32::MAX;

impl Default for Model {
    fn default() -> Self {
        Model {
            next_pc: 0,
            next_id: NO_MODEL,
            last_addr: 0,
            reg_values: Box::new([0; 256]),
            index: HashMap::default(),
            models: Vec::new(),
            succ: Vec::new(),
        }
    }
}

impl Model {
    /// Learns from instruction `i` (its address's model is `pm`).
    #[inline]
    fn learn(pm: &mut PcModel, last_addr: &mut u64, reg_values: &mut [u64; 256], i: &Insn) {
        pm.update(i);
        if let Some(a) = i.mem.last() {
            *last_addr = a.addr;
        }
        for r in &i.regs {
            reg_values[r.reg as usize & 0xff] = r.value;
        }
    }

    /// The model of `pc`, created (unseen) when it has none.
    #[inline]
    fn id_or_new(&mut self, pc: u64) -> u32 {
        if pc == self.next_pc && self.next_id != NO_MODEL {
            return self.next_id;
        }
        let next = self.models.len() as u32;
        let id = *self.index.entry(pc).or_insert(next);
        if id == next {
            self.models.push(PcModel::default());
            self.succ.push((0, NO_MODEL));
        }
        if pc == self.next_pc {
            self.next_id = id;
        }
        id
    }

    /// Control goes to `pc` after the instruction of model `from` (`NO_MODEL`: after
    /// something else).
    #[inline(always)]
    fn go_to(&mut self, pc: u64, from: u32) {
        self.next_pc = pc;
        match self.succ.get(from as usize) {
            Some(&(last, id)) if last == pc && id != NO_MODEL => self.next_id = id,
            _ => self.look_up_next(from),
        }
    }

    /// [`Self::go_to`] when `from` did not go there last time.
    #[inline(never)]
    fn look_up_next(&mut self, from: u32) {
        let pc = self.next_pc;
        let id = self.index.get(&pc).copied().unwrap_or(NO_MODEL);
        if let (Some(s), true) = (self.succ.get_mut(from as usize), id != NO_MODEL) {
            *s = (pc, id);
        }
        self.next_id = id;
    }
}

fn next_pc_after(i: &Insn) -> u64 {
    match i.transfer {
        None => i.pc.wrapping_add(u64::from(i.len)),
        Some(t) => t.target,
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_var(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_delta(out: &mut Vec<u8>, value: u64, predicted: u64) {
    put_var(out, zigzag(value.wrapping_sub(predicted) as i64));
}

fn transfer_code(k: TransferKind) -> u8 {
    match k {
        TransferKind::Jump => 0,
        TransferKind::CondJump => 1,
        TransferKind::Call => 2,
        TransferKind::Return => 3,
        TransferKind::Other => 4,
    }
}

fn transfer_kind(c: u8) -> Option<TransferKind> {
    Some(match c {
        0 => TransferKind::Jump,
        1 => TransferKind::CondJump,
        2 => TransferKind::Call,
        3 => TransferKind::Return,
        4 => TransferKind::Other,
        _ => return None,
    })
}

/// The encoding side: appends events to a byte buffer.
#[derive(Default)]
struct Encoder {
    model: Model,
    /// Predicted instructions not written yet.
    run: u64,
    events: u64,
}

impl Encoder {
    /// Writes the pending run of predicted instructions.
    fn flush_run(&mut self, b: &mut Vec<u8>) {
        if self.run > 0 {
            b.push(TAG_RUN);
            put_var(b, self.run);
            self.run = 0;
        }
    }

    fn encode(&mut self, ev: &Event<'_>, b: &mut Vec<u8>) {
        self.events += 1;
        if let Event::Insn(i) = *ev {
            let id = self.model.id_or_new(i.pc);
            let Model {
                next_pc,
                last_addr,
                reg_values,
                models,
                ..
            } = &mut self.model;
            let pm = &mut models[id as usize];
            if i.pc == *next_pc && pm.predicts(i) {
                self.run += 1;
            } else {
                if self.run > 0 {
                    b.push(TAG_RUN);
                    put_var(b, self.run);
                    self.run = 0;
                }
                b.push(TAG_INSN);
                put_delta(b, i.pc, *next_pc);
                b.push(i.len);
                put_var(b, i.mem.len() as u64);
                let mut last = *last_addr;
                for (j, a) in i.mem.iter().enumerate() {
                    put_var(b, access_code(a));
                    put_delta(b, a.addr, pm.addr(j).unwrap_or(last));
                    last = a.addr;
                }
                put_var(b, i.regs.len() as u64);
                for (k, r) in i.regs.iter().enumerate() {
                    let idx = r.reg as usize & 0xff;
                    b.push(idx as u8);
                    put_delta(b, r.value, pm.value(k, r.reg).unwrap_or(reg_values[idx]));
                }
                match i.transfer {
                    None => b.push(NO_TRANSFER),
                    Some(t) => {
                        b.push(transfer_code(t.kind));
                        put_delta(b, t.target, i.pc);
                    }
                }
            }
            Model::learn(pm, last_addr, reg_values, i);
            self.model.go_to(next_pc_after(i), id);
            return;
        }
        self.flush_run(b);
        match *ev {
            Event::Insn(_) => {}
            Event::Code { addr, bytes } => {
                b.push(TAG_CODE);
                put_var(b, addr);
                b.push(bytes.len() as u8);
                b.extend_from_slice(bytes);
            }
            Event::LibCall(c) => {
                b.push(TAG_LIBCALL);
                put_var(b, c.site);
                put_var(b, c.target);
                put_var(b, c.return_to);
                let name = c.name.as_deref().unwrap_or("");
                put_var(b, name.len() as u64);
                b.extend_from_slice(name.as_bytes());
            }
            Event::LibReturn { pc, rax, cost } => {
                b.push(TAG_LIBRETURN);
                put_var(b, pc);
                put_var(b, rax);
                put_var(b, cost);
                self.model.go_to(pc, NO_MODEL);
            }
            Event::Syscall(s) => {
                b.push(TAG_SYSCALL);
                put_var(b, s.pc);
                put_var(b, s.nr);
                for a in s.args {
                    put_var(b, a);
                }
                match s.ret {
                    Some(r) => {
                        b.push(1);
                        put_var(b, zigzag(r));
                    }
                    None => b.push(0),
                }
                b.push(s.native as u8);
            }
            Event::Signal { signo, pc } => {
                b.push(TAG_SIGNAL);
                put_var(b, signo as u64);
                put_var(b, pc);
            }
            Event::Detach { pc } => {
                b.push(TAG_DETACH);
                put_var(b, pc);
            }
            Event::Exit(s) => {
                b.push(TAG_EXIT);
                match s {
                    ExitStatus::Code(c) => {
                        b.push(0);
                        put_var(b, zigzag(i64::from(c)));
                    }
                    ExitStatus::Signal(sig) => {
                        b.push(1);
                        put_var(b, sig as u64);
                    }
                }
            }
        }
    }
}

/// An [`EventSink`] that appends events to a recording file.
pub struct Recorder {
    out: BufWriter<File>,
    buf: Vec<u8>,
    enc: Encoder,
    bytes: u64,
}

/// Bytes of encoded events the recording thread receives at a time.
const CHUNK: usize = 256 << 10;
/// Chunks in flight between the tracing thread and the recording thread: memory stays
/// bounded when the recording thread falls behind (the tracing thread then waits).
const CHUNKS_IN_FLIGHT: usize = 4;

fn temp_file(dir: Option<&Path>) -> io::Result<File> {
    match dir {
        Some(d) => tempfile::tempfile_in(d),
        None => tempfile::tempfile(),
    }
}

impl Recorder {
    /// Records into an unlinked temporary file created in `dir` (the system's temporary
    /// directory when `None`). The file disappears when the recording is dropped.
    pub fn new_temp(dir: Option<&Path>) -> io::Result<Recorder> {
        Ok(Recorder {
            out: BufWriter::with_capacity(1 << 20, temp_file(dir)?),
            buf: Vec::with_capacity(256),
            enc: Encoder::default(),
            bytes: 0,
        })
    }

    /// Records on a second thread, which also sends every event to `consumer` (decoded from
    /// the recording, so it sees exactly what a replay will). The returned sink encodes; the
    /// consumer comes back with the recording from [`RecordingThread::finish`].
    pub fn spawn<C: EventSink + Send + 'static>(
        dir: Option<&Path>,
        consumer: C,
    ) -> io::Result<RecordingThread<C>> {
        Recorder::spawn_into(temp_file(dir)?, consumer)
    }

    /// [`Recorder::spawn`] into `file`, which the caller created empty, opened for reading and
    /// writing (the finished recording is mapped from it), and may keep: a recording kept on
    /// disk for later replays ([`Recording::open`]).
    pub fn spawn_into<C: EventSink + Send + 'static>(
        file: File,
        consumer: C,
    ) -> io::Result<RecordingThread<C>> {
        let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(CHUNKS_IN_FLIGHT);
        let (back_tx, back) = mpsc::channel::<Vec<u8>>();
        let handle = std::thread::Builder::new()
            .name("polyprof-record".into())
            .spawn(move || record_chunks(file, rx, back_tx, consumer))?;
        Ok(RecordingThread {
            tx: Some(tx),
            back,
            buf: Vec::with_capacity(CHUNK + 4096),
            enc: Encoder::default(),
            handle: Some(handle),
        })
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes + self.buf.len() as u64 + u64::from(self.enc.run > 0) * 4
    }

    /// Flushes the file and maps it for replay.
    pub fn finish(mut self) -> io::Result<Recording> {
        self.enc.flush_run(&mut self.buf);
        self.out.write_all(&self.buf)?;
        self.bytes += self.buf.len() as u64;
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        Recording::map(&file, self.bytes, self.enc.events)
    }
}

impl EventSink for Recorder {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
        self.enc.encode(ev, &mut self.buf);
        if self.buf.len() >= 1 << 16 {
            self.out.write_all(&self.buf)?;
            self.bytes += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }
}

/// What the recording thread hands back.
type Recorded<C> = io::Result<(File, u64, u32, C)>;

/// The recording thread: decodes each chunk for the consumer, then appends it to the file.
fn record_chunks<C: EventSink>(
    mut file: File,
    rx: mpsc::Receiver<Vec<u8>>,
    back: mpsc::Sender<Vec<u8>>,
    mut consumer: C,
) -> Recorded<C> {
    let mut state = Decoder::default();
    let mut bytes = 0u64;
    let mut crc = crc32fast::Hasher::new();
    for chunk in rx {
        let mut r = Replay::resume(&chunk, state);
        r.send_all(&mut consumer).map_err(|e| match e {
            ReplayError::Sink(e) => e,
            e => io::Error::other(e),
        })?;
        state = r.into_state();
        file.write_all(&chunk)?;
        crc.update(&chunk);
        bytes += chunk.len() as u64;
        // The tracing thread reuses the buffer; if it is gone, the buffer is simply freed.
        let _ = back.send(chunk);
    }
    Ok((file, bytes, crc.finalize(), consumer))
}

/// The tracing thread's side of [`Recorder::spawn`]: an [`EventSink`] that encodes events into
/// chunks for the recording thread.
pub struct RecordingThread<C> {
    tx: Option<mpsc::SyncSender<Vec<u8>>>,
    back: mpsc::Receiver<Vec<u8>>,
    buf: Vec<u8>,
    enc: Encoder,
    handle: Option<std::thread::JoinHandle<Recorded<C>>>,
}

impl<C> RecordingThread<C> {
    fn send(&mut self) -> io::Result<()> {
        self.enc.flush_run(&mut self.buf);
        if self.buf.is_empty() {
            return Ok(());
        }
        let spare = self
            .back
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK + 4096));
        let chunk = std::mem::replace(&mut self.buf, spare);
        self.buf.clear();
        let sent = self.tx.as_ref().map(|tx| tx.send(chunk));
        match sent {
            Some(Ok(())) => Ok(()),
            // The thread stopped: its error says why.
            _ => Err(self.join().err().unwrap_or_else(|| {
                io::Error::other("the recording thread stopped before the end of the trace")
            })),
        }
    }

    fn join(&mut self) -> io::Result<(File, u64, u32, C)> {
        self.tx = None;
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(io::Error::other("the recording thread panicked")),
            None => Err(io::Error::other("the recording thread already ended")),
        }
    }

    /// Sends what is left, waits for the recording thread, and maps the file for replay.
    pub fn finish(mut self) -> io::Result<(Recording, C)> {
        self.send()?;
        let events = self.enc.events;
        let (file, bytes, crc, consumer) = self.join()?;
        let mut recording = Recording::map(&file, bytes, events)?;
        recording.crc32 = Some(crc);
        Ok((recording, consumer))
    }
}

impl<C> EventSink for RecordingThread<C> {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
        self.enc.encode(ev, &mut self.buf);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(())
    }
}

/// A finished recording, ready to be replayed any number of times.
pub struct Recording {
    map: Option<memmap2::Mmap>,
    events: u64,
    /// [`Recording::crc32`], when computed while recording.
    crc32: Option<u32>,
}

impl Recording {
    fn map(file: &File, bytes: u64, events: u64) -> io::Result<Recording> {
        let map = if bytes == 0 {
            None
        } else {
            // SAFETY: the file is no longer written: an unlinked temporary is private to this
            // process, and a kept recording is finished before it is mapped. (Another process
            // truncating a kept recording while it is read would fault, as with any reader
            // that maps its input.)
            Some(unsafe { memmap2::Mmap::map(file)? })
        };
        Ok(Recording {
            map,
            events,
            crc32: None,
        })
    }

    /// Maps a recording kept on disk (written through [`Recorder::spawn_into`]) whose
    /// encoding is [`FORMAT`] (the caller checks it) and which holds `events` events (what
    /// [`Recording::events`] answers; the replay itself does not need it).
    pub fn open(path: &Path, events: u64) -> io::Result<Recording> {
        let file = File::open(path)?;
        let bytes = file.metadata()?.len();
        Recording::map(&file, bytes, events)
    }

    /// Number of events recorded.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Size of the recording in bytes.
    pub fn bytes(&self) -> usize {
        self.map.as_ref().map_or(0, |m| m.len())
    }

    /// A reader positioned at the first event. It releases the pages it has read (they come
    /// back from the file if read again), so a replay does not keep the recording resident.
    pub fn replay(&self) -> Replay<'_> {
        let mut r = Replay::new(self.map.as_deref().unwrap_or(&[]));
        r.release_behind = self.map.is_some();
        r.expected = Some(self.events);
        r
    }

    /// CRC-32 (IEEE) of the recording's bytes: computed while recording through
    /// [`Recorder::spawn_into`], else over the file now.
    pub fn crc32(&self) -> u32 {
        self.crc32.unwrap_or_else(|| {
            let mut h = crc32fast::Hasher::new();
            h.update(self.map.as_deref().unwrap_or(&[]));
            h.finalize()
        })
    }

    /// Sends every recorded event to `sink`.
    pub fn replay_into(&self, sink: &mut dyn EventSink) -> Result<(), ReplayError> {
        self.replay().send_all(sink)
    }
}

/// A recording that cannot be decoded (truncated or corrupt), or a sink that failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The bytes end inside an event.
    #[error("the events end at byte {0} in the middle of an event (was the recording cut short?)")]
    Truncated(usize),
    /// An event that no recorder writes, at this byte: why.
    #[error("the events are corrupt at byte {0}: {1}")]
    Corrupt(usize, &'static str),
    /// More events than the recording says it holds.
    #[error("the events go on after the {0} events the recording says it holds")]
    TooMany(u64),
    /// Fewer events than the recording says it holds: (decoded, said).
    #[error("the events end after {0} events, not the {1} the recording says it holds (was the recording cut short?)")]
    TooFew(u64, u64),
    #[error("replaying events: {0}")]
    Sink(io::Error),
}

impl ReplayError {
    /// Whether the recording's bytes are at fault (not the sink).
    pub fn is_damage(&self) -> bool {
        !matches!(self, ReplayError::Sink(_))
    }
}

/// The decoding state that carries from one event to the next: the model and the buffers the
/// events borrow.
struct Decoder {
    model: Model,
    /// Predicted instructions still to deliver.
    run: u64,
    insn: Insn,
    call: LibCall,
    sys: Syscall,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            model: Model::default(),
            run: 0,
            insn: Insn::default(),
            call: LibCall {
                site: 0,
                target: 0,
                return_to: 0,
                name: None,
            },
            sys: Syscall {
                pc: 0,
                nr: 0,
                args: [0; 6],
                ret: None,
                native: false,
            },
        }
    }
}

/// Bytes read between two releases of the pages behind the reader.
const RELEASE_EVERY: usize = 8 << 20;

/// Decodes a recording one event at a time, reusing its buffers.
pub struct Replay<'a> {
    data: &'a [u8],
    pos: usize,
    st: Decoder,
    /// The events the data holds, when known (a finished recording): a replay delivers no
    /// more, and fails if the data ends before.
    expected: Option<u64>,
    delivered: u64,
    /// `data` is a private file mapping whose pages can be dropped once read.
    release_behind: bool,
    released: usize,
}

impl<'a> Replay<'a> {
    /// Decodes the bytes written by a [`Recorder`].
    pub fn new(data: &'a [u8]) -> Replay<'a> {
        Replay::resume(data, Decoder::default())
    }

    fn resume(data: &'a [u8], st: Decoder) -> Replay<'a> {
        Replay {
            data,
            pos: 0,
            st,
            expected: None,
            delivered: 0,
            release_behind: false,
            released: 0,
        }
    }

    fn into_state(self) -> Decoder {
        self.st
    }

    /// Drops the mapped pages before `pos` from memory.
    fn release(&mut self) {
        const PAGE: usize = 4096;
        let end = self.pos & !(PAGE - 1);
        if end > self.released {
            // SAFETY: `data` starts a read-only private mapping of a file nobody writes (see
            // `Recording::map`); MADV_DONTNEED only drops its resident pages, which a later
            // read brings back unchanged from the file. The range lies inside the mapping.
            unsafe {
                libc::madvise(
                    self.data.as_ptr().add(self.released) as *mut libc::c_void,
                    end - self.released,
                    libc::MADV_DONTNEED,
                );
            }
            self.released = end;
        }
    }

    fn byte(&mut self) -> Result<u8, ReplayError> {
        let b = *self
            .data
            .get(self.pos)
            .ok_or(ReplayError::Truncated(self.pos))?;
        self.pos += 1;
        Ok(b)
    }

    fn var(&mut self) -> Result<u64, ReplayError> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift >= 64 {
                return Err(ReplayError::Corrupt(
                    self.pos,
                    "a number longer than 64 bits",
                ));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
        }
    }

    fn delta(&mut self, predicted: u64) -> Result<u64, ReplayError> {
        Ok(predicted.wrapping_add(unzigzag(self.var()?) as u64))
    }

    fn slice(&mut self, n: usize) -> Result<&'a [u8], ReplayError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(ReplayError::Truncated(self.data.len()))?;
        let s = self
            .data
            .get(self.pos..end)
            .ok_or(ReplayError::Truncated(self.data.len()))?;
        self.pos = end;
        Ok(s)
    }

    /// The next instruction of a run: what the model of the next address predicts. (The
    /// model learns from it as [`Model::learn`] would, in the same loops that build it: the
    /// strides and steps of a predicted instruction are unchanged, only the last values move.)
    fn predicted(&mut self) -> Result<Event<'_>, ReplayError> {
        self.predict()?;
        Ok(Event::Insn(&self.st.insn))
    }

    /// [`Self::predicted`], left in the instruction buffer.
    #[inline(always)]
    fn predict(&mut self) -> Result<(), ReplayError> {
        let st = &mut self.st;
        st.run -= 1;
        let m = &mut st.model;
        let id = m.next_id;
        let pm = m
            .models
            .get_mut(id as usize)
            .filter(|m| m.seen && m.nmem <= SLOTS && m.nregs <= SLOTS)
            .ok_or(ReplayError::Corrupt(
                self.pos,
                "a run of predicted instructions at an address without a prediction",
            ))?;
        let i = &mut st.insn;
        i.pc = m.next_pc;
        i.len = pm.len;
        i.mem.clear();
        i.mem.extend(pm.mem[..pm.nmem].iter_mut().map(|slot| {
            let (code, last, stride) = *slot;
            let addr = last.wrapping_add(stride);
            slot.1 = addr;
            MemAccess {
                addr,
                size: (code >> 1) as u32,
                kind: if code & 1 == 1 {
                    AccessKind::Write
                } else {
                    AccessKind::Read
                },
            }
        }));
        if let Some(a) = i.mem.last() {
            m.last_addr = a.addr;
        }
        let reg_values = &mut m.reg_values;
        i.regs.clear();
        i.regs.extend(pm.regs[..pm.nregs].iter_mut().map(|slot| {
            let (reg, last, step) = *slot;
            let value = last.wrapping_add(step);
            slot.1 = value;
            reg_values[reg as usize & 0xff] = value;
            RegWrite { reg, value }
        }));
        i.transfer = if pm.transfer == NO_TRANSFER {
            None
        } else {
            let kind = transfer_kind(pm.transfer).ok_or(ReplayError::Corrupt(
                self.pos,
                "an unknown kind of transfer",
            ))?;
            Some(Transfer {
                kind,
                target: pm.target,
            })
        };
        let next = next_pc_after(i);
        m.go_to(next, id);
        Ok(())
    }

    /// The next event when it is an instruction of a run (what [`Self::next_event`] would
    /// give), decoded into the instruction buffer: `false` when it is anything else.
    #[inline]
    fn next_predicted(&mut self) -> Result<bool, ReplayError> {
        if self.st.run == 0 || self.expected.is_some_and(|n| self.delivered >= n) {
            return Ok(false);
        }
        self.delivered += 1;
        self.predict()?;
        Ok(true)
    }

    /// Sends every event left to `sink`.
    pub fn send_all(&mut self, sink: &mut (impl EventSink + ?Sized)) -> Result<(), ReplayError> {
        loop {
            // Most events are predicted instructions: built in place and sent from here,
            // rather than returned by value through `next_event` (a large result, whose
            // copies stalled the loop on store forwarding).
            if self.next_predicted()? {
                sink.event(&Event::Insn(&self.st.insn))
                    .map_err(ReplayError::Sink)?;
                continue;
            }
            match self.next_event()? {
                Some(ev) => sink.event(&ev).map_err(ReplayError::Sink)?,
                None => return Ok(()),
            }
        }
    }

    /// The next event, or `None` at the end of the recording.
    pub fn next_event(&mut self) -> Result<Option<Event<'_>>, ReplayError> {
        if self.st.run == 0 && self.pos >= self.data.len() {
            return match self.expected {
                Some(n) if self.delivered < n => Err(ReplayError::TooFew(self.delivered, n)),
                _ => Ok(None),
            };
        }
        if let Some(n) = self.expected {
            if self.delivered >= n {
                return Err(ReplayError::TooMany(n));
            }
        }
        self.delivered += 1;
        if self.st.run > 0 {
            return self.predicted().map(Some);
        }
        if self.release_behind && self.pos - self.released >= RELEASE_EVERY {
            self.release();
        }
        let start = self.pos;
        let tag = self.byte()?;
        let ev = match tag {
            TAG_RUN => {
                let n = self.var()?;
                if n == 0 {
                    return Err(ReplayError::Corrupt(start, "an empty run of instructions"));
                }
                self.st.run = n;
                return self.predicted().map(Some);
            }
            TAG_CODE => {
                let addr = self.var()?;
                let n = self.byte()? as usize;
                let bytes = self.slice(n)?;
                Event::Code { addr, bytes }
            }
            TAG_INSN => {
                let pc = self.delta(self.st.model.next_pc)?;
                let len = self.byte()?;
                let id = self.st.model.id_or_new(pc);
                let mut pm = std::mem::take(&mut self.st.model.models[id as usize]);
                let mut insn = std::mem::take(&mut self.st.insn);
                insn.clear();
                insn.pc = pc;
                insn.len = len;
                let decoded = self.insn_body(&pm, &mut insn, start);
                let m = &mut self.st.model;
                if decoded.is_ok() {
                    Model::learn(&mut pm, &mut m.last_addr, &mut m.reg_values, &insn);
                }
                m.models[id as usize] = pm;
                if decoded.is_ok() {
                    m.go_to(next_pc_after(&insn), id);
                }
                self.st.insn = insn;
                decoded?;
                Event::Insn(&self.st.insn)
            }
            TAG_LIBCALL => {
                self.st.call.site = self.var()?;
                self.st.call.target = self.var()?;
                self.st.call.return_to = self.var()?;
                let n = self.var()? as usize;
                let name = self.slice(n)?;
                self.st.call.name = if name.is_empty() {
                    None
                } else {
                    Some(String::from_utf8_lossy(name).into_owned())
                };
                Event::LibCall(&self.st.call)
            }
            TAG_LIBRETURN => {
                let pc = self.var()?;
                let rax = self.var()?;
                let cost = self.var()?;
                self.st.model.go_to(pc, NO_MODEL);
                Event::LibReturn { pc, rax, cost }
            }
            TAG_SYSCALL => {
                self.st.sys.pc = self.var()?;
                self.st.sys.nr = self.var()?;
                for i in 0..6 {
                    self.st.sys.args[i] = self.var()?;
                }
                self.st.sys.ret = match self.byte()? {
                    0 => None,
                    _ => Some(unzigzag(self.var()?)),
                };
                self.st.sys.native = self.byte()? != 0;
                Event::Syscall(&self.st.sys)
            }
            TAG_SIGNAL => {
                let signo = self.var()? as i32;
                let pc = self.var()?;
                Event::Signal { signo, pc }
            }
            TAG_DETACH => Event::Detach { pc: self.var()? },
            TAG_EXIT => match self.byte()? {
                0 => Event::Exit(ExitStatus::Code(unzigzag(self.var()?) as i32)),
                _ => Event::Exit(ExitStatus::Signal(self.var()? as i32)),
            },
            _ => return Err(ReplayError::Corrupt(start, "an unknown kind of event")),
        };
        Ok(Some(ev))
    }

    /// Accesses, register writes and transfer of a written-out instruction.
    fn insn_body(
        &mut self,
        pm: &PcModel,
        insn: &mut Insn,
        start: usize,
    ) -> Result<(), ReplayError> {
        let n = self.var()? as usize;
        let mut last = self.st.model.last_addr;
        for j in 0..n {
            let code = self.var()?;
            let addr = self.delta(pm.addr(j).unwrap_or(last))?;
            last = addr;
            let kind = if code & 1 == 1 {
                AccessKind::Write
            } else {
                AccessKind::Read
            };
            let size = u32::try_from(code >> 1)
                .map_err(|_| ReplayError::Corrupt(start, "an impossible access size"))?;
            insn.mem.push(MemAccess { addr, size, kind });
        }
        let n = self.var()? as usize;
        for k in 0..n {
            let idx = self.byte()? as usize;
            let reg = register_from_index(idx)
                .ok_or(ReplayError::Corrupt(start, "an unknown register"))?;
            let predicted = pm.value(k, reg).unwrap_or(self.st.model.reg_values[idx]);
            let value = self.delta(predicted)?;
            insn.regs.push(RegWrite { reg, value });
        }
        let t = self.byte()?;
        if t != NO_TRANSFER {
            let kind = transfer_kind(t)
                .ok_or(ReplayError::Corrupt(start, "an unknown kind of transfer"))?;
            let target = self.delta(insn.pc)?;
            insn.transfer = Some(Transfer { kind, target });
        }
        Ok(())
    }
}

/// iced-x86 registers are a `u8`-sized enum; map the recorded index back.
fn register_from_index(idx: usize) -> Option<iced_x86::Register> {
    iced_x86::Register::try_from(idx).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{NullSink, OwnedEvent, VecSink};
    use iced_x86::Register;

    fn sample() -> Vec<OwnedEvent> {
        let mut v = vec![OwnedEvent::Code {
            addr: 0x401000,
            bytes: vec![0x48, 0x89, 0xc8],
        }];
        for i in 0..5u64 {
            v.push(OwnedEvent::Insn(Insn {
                pc: 0x401000,
                len: 3,
                mem: vec![
                    MemAccess {
                        addr: 0x7fff_0000 + 8 * i,
                        size: 8,
                        kind: AccessKind::Read,
                    },
                    MemAccess {
                        addr: 0x4000 - 4 * i,
                        size: 4,
                        kind: AccessKind::Write,
                    },
                ],
                regs: vec![RegWrite {
                    reg: Register::EAX,
                    value: i,
                }],
                transfer: Some(Transfer {
                    kind: TransferKind::CondJump,
                    target: 0x401000,
                }),
            }));
        }
        v.push(OwnedEvent::LibCall(LibCall {
            site: 1,
            target: 0x7fff_f000_0000,
            return_to: 3,
            name: Some("puts".into()),
        }));
        v.push(OwnedEvent::LibReturn {
            pc: 3,
            rax: 6,
            cost: 123_456,
        });
        v.push(OwnedEvent::Syscall(Syscall {
            pc: 9,
            nr: 1,
            args: [1, 2, 3, 4, 5, u64::MAX],
            ret: Some(-14),
            native: true,
        }));
        v.push(OwnedEvent::Signal { signo: 11, pc: 5 });
        v.push(OwnedEvent::Exit(ExitStatus::Code(-1)));
        v
    }

    #[test]
    fn round_trip_preserves_every_event() {
        let events = sample();
        let mut rec = Recorder::new_temp(None).unwrap();
        for e in &events {
            rec.event(&e.as_event()).unwrap();
        }
        let recording = rec.finish().unwrap();
        assert_eq!(recording.events(), events.len() as u64);
        let mut back = VecSink::default();
        recording.replay_into(&mut back).unwrap();
        assert_eq!(back.events, events);
        // Replays are repeatable.
        let mut again = VecSink::default();
        recording.replay_into(&mut again).unwrap();
        assert_eq!(again.events, events);
    }

    #[test]
    fn loop_iterations_encode_compactly() {
        let events = sample();
        let mut rec = Recorder::new_temp(None).unwrap();
        for e in &events[..6] {
            rec.event(&e.as_event()).unwrap();
        }
        // Code record (7 bytes) + 5 instructions of two accesses, a register and a branch.
        assert!(rec.bytes() < 7 + 5 * 16, "{} bytes", rec.bytes());
    }

    /// A loop of `n` iterations: two instructions, strided accesses, a counter, a branch.
    fn affine_loop(n: u64) -> Vec<OwnedEvent> {
        let mut v = Vec::new();
        for i in 0..n {
            v.push(OwnedEvent::Insn(Insn {
                pc: 0x401000,
                len: 4,
                mem: vec![MemAccess {
                    addr: 0x6000 + 8 * i,
                    size: 8,
                    kind: AccessKind::Read,
                }],
                regs: vec![RegWrite {
                    reg: Register::RCX,
                    value: i + 1,
                }],
                transfer: None,
            }));
            v.push(OwnedEvent::Insn(Insn {
                pc: 0x401004,
                len: 2,
                mem: vec![],
                regs: vec![],
                transfer: Some(Transfer {
                    kind: TransferKind::CondJump,
                    target: if i + 1 < n { 0x401000 } else { 0x401006 },
                }),
            }));
        }
        v.push(OwnedEvent::Exit(ExitStatus::Code(0)));
        v
    }

    /// Through the recording thread: the consumer and every replay see the events recorded,
    /// and an affine loop costs far less than a byte per instruction.
    #[test]
    fn recording_thread_round_trip_and_runs() {
        let mut events = sample();
        events.splice(1..1, affine_loop(100_000));
        let mut rec = Recorder::spawn(None, VecSink::default()).unwrap();
        for e in &events {
            rec.event(&e.as_event()).unwrap();
        }
        let (recording, consumer) = rec.finish().unwrap();
        assert_eq!(consumer.events, events);
        assert_eq!(recording.events(), events.len() as u64);
        let mut back = VecSink::default();
        recording.replay_into(&mut back).unwrap();
        assert_eq!(back.events, events);
        assert!(
            recording.bytes() < 1000,
            "{} bytes for 200,000 loop instructions",
            recording.bytes()
        );
    }

    /// A recording kept in a named file replays the same events when opened again.
    #[test]
    fn kept_recording_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events");
        let mut events = sample();
        events.splice(1..1, affine_loop(1000));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .unwrap();
        let mut rec = Recorder::spawn_into(file, NullSink).unwrap();
        for e in &events {
            rec.event(&e.as_event()).unwrap();
        }
        let (first, _) = rec.finish().unwrap();
        let n = first.events();
        drop(first);
        let again = Recording::open(&path, n).unwrap();
        assert_eq!(again.events(), events.len() as u64);
        let mut back = VecSink::default();
        again.replay_into(&mut back).unwrap();
        assert_eq!(back.events, events);
    }

    /// Values no model predicts fill several chunks: still every event, in order.
    #[test]
    fn recording_thread_many_chunks() {
        let mut rng = fastrand::Rng::with_seed(1);
        let mut events = affine_loop(1000);
        events.pop();
        for _ in 0..200_000 {
            events.push(OwnedEvent::Insn(Insn {
                pc: 0x401006,
                len: 3,
                mem: vec![],
                regs: vec![RegWrite {
                    reg: Register::RAX,
                    value: rng.u64(..),
                }],
                transfer: Some(Transfer {
                    kind: TransferKind::Jump,
                    target: 0x401006,
                }),
            }));
        }
        let mut rec = Recorder::spawn(None, VecSink::default()).unwrap();
        for e in &events {
            rec.event(&e.as_event()).unwrap();
        }
        let (recording, consumer) = rec.finish().unwrap();
        assert!(recording.bytes() > 4 * CHUNK, "{} bytes", recording.bytes());
        assert_eq!(consumer.events, events);
        let mut back = VecSink::default();
        recording.replay_into(&mut back).unwrap();
        assert_eq!(back.events, events);
    }

    #[test]
    fn truncated_recording_is_an_error_not_a_panic() {
        let mut rec = Recorder::new_temp(None).unwrap();
        for e in &sample() {
            rec.event(&e.as_event()).unwrap();
        }
        let recording = rec.finish().unwrap();
        let data = recording.map.as_deref().unwrap();
        for cut in 1..data.len() {
            let mut r = Replay::new(&data[..cut]);
            let mut n = 0;
            while let Ok(Some(_)) = r.next_event() {
                n += 1;
                assert!(n < 100);
            }
        }
    }

    /// A replay of a finished recording delivers the events it says it holds, no more (a
    /// damaged run of predicted instructions cannot go on forever) and no fewer.
    #[test]
    fn replays_hold_the_recorded_number_of_events() {
        let mut events = sample();
        events.splice(1..1, affine_loop(50));
        let mut rec = Recorder::new_temp(None).unwrap();
        for e in &events {
            rec.event(&e.as_event()).unwrap();
        }
        let mut recording = rec.finish().unwrap();
        let n = recording.events();
        recording.events = n - 1;
        assert!(matches!(
            recording.replay_into(&mut NullSink),
            Err(ReplayError::TooMany(m)) if m == n - 1
        ));
        recording.events = n + 1;
        assert!(matches!(
            recording.replay_into(&mut NullSink),
            Err(ReplayError::TooFew(m, k)) if m == n && k == n + 1
        ));
        // A run made endless: stopped at the count. (A loop without its last iteration ends
        // with a run of fewer than 128 predicted instructions: a tag and one byte.)
        let mut lp = affine_loop(50);
        lp.truncate(lp.len() - 3);
        let mut rec = Recorder::new_temp(None).unwrap();
        for e in &lp {
            rec.event(&e.as_event()).unwrap();
        }
        let looped = rec.finish().unwrap();
        let data = looped.map.as_deref().unwrap();
        assert_eq!(data[data.len() - 2], TAG_RUN);
        let mut bad = data[..data.len() - 1].to_vec();
        bad.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        let mut r = Replay::new(&bad);
        r.expected = Some(looped.events());
        let mut seen = 0u64;
        let end = loop {
            match r.next_event() {
                Ok(Some(_)) => seen += 1,
                other => break other.map(|_| ()),
            }
        };
        assert!(matches!(end, Err(ReplayError::TooMany(_))), "{end:?}");
        assert_eq!(seen, looped.events());
        let data = recording.map.as_deref().unwrap();
        // Cut short: said so.
        let mut r = Replay::new(&data[..data.len() - 1]);
        let end = loop {
            match r.next_event() {
                Ok(Some(_)) => {}
                other => break other.map(|_| ()),
            }
        };
        assert!(
            matches!(
                end,
                Err(ReplayError::Truncated(_) | ReplayError::Corrupt(..)) | Ok(())
            ),
            "{end:?}"
        );
    }

    #[test]
    fn register_indices_round_trip() {
        for r in [Register::RAX, Register::AH, Register::R15D, Register::RSP] {
            assert_eq!(register_from_index(r as usize), Some(r));
        }
    }
}
