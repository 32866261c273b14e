//! Compact recording of the event stream, so the tracer's passes can replay one execution.
//!
//! The program runs once; its events go to an unlinked temporary file (on disk, so long runs
//! do not fill RAM) through a buffered writer, and are read back through a memory map.
//!
//! Encoding: one tag byte per record, then LEB128 varints. Most numbers are stored as zig-zag
//! deltas against a prediction (the next pc after the previous instruction, the previous data
//! address, a register's previous value), so a typical instruction takes 3 to 8 bytes.

use crate::event::{
    AccessKind, Event, EventSink, ExitStatus, Insn, LibCall, MemAccess, RegWrite, Syscall,
    Transfer, TransferKind,
};
use rustc_hash::FxHashMap as HashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

const TAG_CODE: u8 = 1;
const TAG_INSN: u8 = 2;
const TAG_LIBCALL: u8 = 3;
const TAG_LIBRETURN: u8 = 4;
const TAG_SYSCALL: u8 = 5;
const TAG_SIGNAL: u8 = 6;
const TAG_DETACH: u8 = 7;
const TAG_EXIT: u8 = 8;

/// Accesses per instruction whose stride is predicted (the rest use the last address).
const STRIDED: usize = 2;

/// Predictions shared by writer and reader; both update them identically.
#[derive(Clone)]
struct Model {
    next_pc: u64,
    last_addr: u64,
    reg_values: Box<[u64; 256]>,
    /// Per instruction address: the last address and stride of its first accesses, so a
    /// strided access in a loop costs one byte.
    strides: HashMap<u64, [(u64, u64); STRIDED]>,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            next_pc: 0,
            last_addr: 0,
            reg_values: Box::new([0; 256]),
            strides: HashMap::default(),
        }
    }
}

impl Model {
    /// The predicted address of access `j` of the instruction at `pc`.
    fn predict(&self, pc: u64, j: usize) -> u64 {
        match self.strides.get(&pc) {
            Some(s) if j < STRIDED && s[j].0 != 0 => s[j].0.wrapping_add(s[j].1),
            _ => self.last_addr,
        }
    }

    fn update(&mut self, pc: u64, j: usize, addr: u64) {
        self.last_addr = addr;
        if j < STRIDED {
            let s = self.strides.entry(pc).or_insert([(0, 0); STRIDED]);
            s[j].1 = if s[j].0 == 0 {
                0
            } else {
                addr.wrapping_sub(s[j].0)
            };
            s[j].0 = addr;
        }
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

/// An [`EventSink`] that appends events to a recording file.
pub struct Recorder {
    out: BufWriter<File>,
    buf: Vec<u8>,
    model: Model,
    bytes: u64,
    events: u64,
}

impl Recorder {
    /// Records into an unlinked temporary file created in `dir` (the system's temporary
    /// directory when `None`). The file disappears when the recording is dropped.
    pub fn new_temp(dir: Option<&Path>) -> io::Result<Recorder> {
        let file = match dir {
            Some(d) => tempfile::tempfile_in(d)?,
            None => tempfile::tempfile()?,
        };
        Ok(Recorder {
            out: BufWriter::with_capacity(1 << 20, file),
            buf: Vec::with_capacity(256),
            model: Model::default(),
            bytes: 0,
            events: 0,
        })
    }

    /// Bytes written so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Flushes the file and maps it for replay.
    pub fn finish(self) -> io::Result<Recording> {
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        let map = if self.bytes == 0 {
            None
        } else {
            // SAFETY: the file is private to this process (unlinked temporary) and no longer
            // written, so the mapping cannot change under us.
            Some(unsafe { memmap2::Mmap::map(&file)? })
        };
        Ok(Recording {
            map,
            events: self.events,
        })
    }

    fn encode(&mut self, ev: &Event<'_>) {
        let b = &mut self.buf;
        let m = &mut self.model;
        match *ev {
            Event::Code { addr, bytes } => {
                b.push(TAG_CODE);
                put_var(b, addr);
                b.push(bytes.len() as u8);
                b.extend_from_slice(bytes);
            }
            Event::Insn(i) => {
                b.push(TAG_INSN);
                put_delta(b, i.pc, m.next_pc);
                b.push(i.len);
                put_var(b, i.mem.len() as u64);
                for (j, a) in i.mem.iter().enumerate() {
                    let kind = matches!(a.kind, AccessKind::Write) as u64;
                    put_var(b, (u64::from(a.size) << 1) | kind);
                    put_delta(b, a.addr, m.predict(i.pc, j));
                    m.update(i.pc, j, a.addr);
                }
                put_var(b, i.regs.len() as u64);
                for r in &i.regs {
                    let idx = r.reg as usize & 0xff;
                    b.push(idx as u8);
                    put_delta(b, r.value, m.reg_values[idx]);
                    m.reg_values[idx] = r.value;
                }
                match i.transfer {
                    None => {
                        b.push(0xff);
                        m.next_pc = i.pc.wrapping_add(u64::from(i.len));
                    }
                    Some(t) => {
                        b.push(transfer_code(t.kind));
                        put_delta(b, t.target, i.pc);
                        m.next_pc = t.target;
                    }
                }
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
                m.next_pc = pc;
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

impl EventSink for Recorder {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
        self.buf.clear();
        self.encode(ev);
        self.out.write_all(&self.buf)?;
        self.bytes += self.buf.len() as u64;
        self.events += 1;
        Ok(())
    }
}

/// A finished recording, ready to be replayed any number of times.
pub struct Recording {
    map: Option<memmap2::Mmap>,
    events: u64,
}

impl Recording {
    /// Number of events recorded.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// Size of the recording in bytes.
    pub fn bytes(&self) -> usize {
        self.map.as_ref().map_or(0, |m| m.len())
    }

    /// A reader positioned at the first event.
    pub fn replay(&self) -> Replay<'_> {
        Replay::new(self.map.as_deref().unwrap_or(&[]))
    }

    /// Sends every recorded event to `sink`.
    pub fn replay_into(&self, sink: &mut dyn EventSink) -> Result<(), ReplayError> {
        let mut r = self.replay();
        while let Some(ev) = r.next_event()? {
            sink.event(&ev).map_err(ReplayError::Sink)?;
        }
        Ok(())
    }
}

/// A recording that cannot be decoded (truncated or corrupt), or a sink that failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("the event recording is corrupt at byte {0}")]
    Corrupt(usize),
    #[error("replaying events: {0}")]
    Sink(io::Error),
}

/// Decodes a recording one event at a time, reusing its buffers.
pub struct Replay<'a> {
    data: &'a [u8],
    pos: usize,
    model: Model,
    insn: Insn,
    call: LibCall,
    sys: Syscall,
}

impl<'a> Replay<'a> {
    /// Decodes the bytes written by a [`Recorder`].
    pub fn new(data: &'a [u8]) -> Replay<'a> {
        Replay {
            data,
            pos: 0,
            model: Model::default(),
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

    fn byte(&mut self) -> Result<u8, ReplayError> {
        let b = *self
            .data
            .get(self.pos)
            .ok_or(ReplayError::Corrupt(self.pos))?;
        self.pos += 1;
        Ok(b)
    }

    fn var(&mut self) -> Result<u64, ReplayError> {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift >= 64 {
                return Err(ReplayError::Corrupt(self.pos));
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
            .ok_or(ReplayError::Corrupt(self.pos))?;
        let s = self
            .data
            .get(self.pos..end)
            .ok_or(ReplayError::Corrupt(self.pos))?;
        self.pos = end;
        Ok(s)
    }

    /// The next event, or `None` at the end of the recording.
    pub fn next_event(&mut self) -> Result<Option<Event<'_>>, ReplayError> {
        if self.pos >= self.data.len() {
            return Ok(None);
        }
        let start = self.pos;
        let tag = self.byte()?;
        let ev = match tag {
            TAG_CODE => {
                let addr = self.var()?;
                let n = self.byte()? as usize;
                let bytes = self.slice(n)?;
                Event::Code { addr, bytes }
            }
            TAG_INSN => {
                self.insn.clear();
                self.insn.pc = self.delta(self.model.next_pc)?;
                self.insn.len = self.byte()?;
                let n = self.var()? as usize;
                let pc = self.insn.pc;
                for j in 0..n {
                    let sk = self.var()?;
                    let addr = self.delta(self.model.predict(pc, j))?;
                    self.model.update(pc, j, addr);
                    let kind = if sk & 1 == 1 {
                        AccessKind::Write
                    } else {
                        AccessKind::Read
                    };
                    let size = u32::try_from(sk >> 1).map_err(|_| ReplayError::Corrupt(start))?;
                    self.insn.mem.push(MemAccess { addr, size, kind });
                }
                let n = self.var()? as usize;
                for _ in 0..n {
                    let idx = self.byte()? as usize;
                    let value = self.delta(self.model.reg_values[idx])?;
                    self.model.reg_values[idx] = value;
                    let reg = register_from_index(idx).ok_or(ReplayError::Corrupt(start))?;
                    self.insn.regs.push(RegWrite { reg, value });
                }
                let t = self.byte()?;
                if t == 0xff {
                    self.model.next_pc = self.insn.pc.wrapping_add(u64::from(self.insn.len));
                } else {
                    let kind = transfer_kind(t).ok_or(ReplayError::Corrupt(start))?;
                    let target = self.delta(self.insn.pc)?;
                    self.insn.transfer = Some(Transfer { kind, target });
                    self.model.next_pc = target;
                }
                Event::Insn(&self.insn)
            }
            TAG_LIBCALL => {
                self.call.site = self.var()?;
                self.call.target = self.var()?;
                self.call.return_to = self.var()?;
                let n = self.var()? as usize;
                let name = self.slice(n)?;
                self.call.name = if name.is_empty() {
                    None
                } else {
                    Some(String::from_utf8_lossy(name).into_owned())
                };
                Event::LibCall(&self.call)
            }
            TAG_LIBRETURN => {
                let pc = self.var()?;
                let rax = self.var()?;
                let cost = self.var()?;
                self.model.next_pc = pc;
                Event::LibReturn { pc, rax, cost }
            }
            TAG_SYSCALL => {
                self.sys.pc = self.var()?;
                self.sys.nr = self.var()?;
                for i in 0..6 {
                    self.sys.args[i] = self.var()?;
                }
                self.sys.ret = match self.byte()? {
                    0 => None,
                    _ => Some(unzigzag(self.var()?)),
                };
                self.sys.native = self.byte()? != 0;
                Event::Syscall(&self.sys)
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
            _ => return Err(ReplayError::Corrupt(start)),
        };
        Ok(Some(ev))
    }
}

/// iced-x86 registers are a `u8`-sized enum; map the recorded index back.
fn register_from_index(idx: usize) -> Option<iced_x86::Register> {
    iced_x86::Register::try_from(idx).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{OwnedEvent, VecSink};
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

    #[test]
    fn register_indices_round_trip() {
        for r in [Register::RAX, Register::AH, Register::R15D, Register::RSP] {
            assert_eq!(register_from_index(r as usize), Some(r));
        }
    }
}
