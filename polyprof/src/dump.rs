//! `events.txt`: the event stream in words, for debugging small runs.

use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter};
use ptrace_runner::{AccessKind, Event, EventSink, ExitStatus};
use std::collections::HashMap;
use std::io::{self, Write};

/// Writes one line per event, naming code by function+offset and source line.
pub struct EventDump<'a, W: Write> {
    out: W,
    bin: symbols::Loaded<'a>,
    code: HashMap<u64, String>,
    formatter: IntelFormatter,
    index: u64,
}

impl<'a, W: Write> EventDump<'a, W> {
    pub fn new(out: W, bin: symbols::Loaded<'a>) -> Self {
        EventDump {
            out,
            bin,
            code: HashMap::new(),
            formatter: IntelFormatter::new(),
            index: 0,
        }
    }

    fn place(&self, pc: u64) -> String {
        let location = self.bin.location(pc);
        if self.bin.function_at(pc).is_none() && location.is_none() {
            return format!("{pc:#x}");
        }
        let mut s = self.bin.describe(pc);
        if let Some(loc) = location {
            let file = loc.file.rsplit('/').next().unwrap_or(&loc.file);
            s.push_str(&format!(" {file}:{}", loc.line));
        }
        s
    }

    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

impl<W: Write> EventSink for EventDump<'_, W> {
    fn event(&mut self, ev: &Event<'_>) -> io::Result<()> {
        match *ev {
            Event::Code { addr, bytes } => {
                let mut decoder = Decoder::with_ip(64, bytes, addr, DecoderOptions::NONE);
                let insn = decoder.decode();
                let mut text = String::new();
                self.formatter.format(&insn, &mut text);
                self.code.insert(addr, text);
                return Ok(());
            }
            Event::Insn(i) => {
                self.index += 1;
                let asm = self.code.get(&i.pc).map(String::as_str).unwrap_or("?");
                write!(
                    self.out,
                    "{:>8} {:#x} {:<32} {:<36}",
                    self.index,
                    i.pc,
                    self.place(i.pc),
                    asm
                )?;
                for a in &i.mem {
                    let k = match a.kind {
                        AccessKind::Read => 'R',
                        AccessKind::Write => 'W',
                    };
                    write!(self.out, " {k}{}@{:#x}", a.size, a.addr)?;
                }
                for r in &i.regs {
                    write!(self.out, " {:?}={:#x}", r.reg, r.value)?;
                }
                if let Some(t) = i.transfer {
                    write!(self.out, " {:?}->{:#x}", t.kind, t.target)?;
                }
                writeln!(self.out)?;
            }
            Event::LibCall(c) => writeln!(
                self.out,
                "         call {} (native) from {:#x}, returns to {:#x}",
                c.name.as_deref().unwrap_or("?"),
                c.site,
                c.return_to
            )?,
            Event::LibReturn { pc, rax, cost } => writeln!(
                self.out,
                "         return to {pc:#x} rax={rax:#x} cost={cost}"
            )?,
            Event::Syscall(s) => writeln!(
                self.out,
                "         syscall {} ({:#x}, {:#x}, {:#x}) = {}{}",
                s.nr,
                s.args[0],
                s.args[1],
                s.args[2],
                s.ret.map_or("(no return)".to_string(), |r| r.to_string()),
                if s.native { " [native]" } else { "" }
            )?,
            Event::Signal { signo, pc } => writeln!(
                self.out,
                "         signal {} at {}",
                crate::signal_name(signo),
                self.place(pc)
            )?,
            Event::Detach { pc } => writeln!(
                self.out,
                "         detached at {pc:#x}; the rest ran untraced"
            )?,
            Event::Exit(ExitStatus::Code(c)) => writeln!(self.out, "         exit {c}")?,
            Event::Exit(ExitStatus::Signal(s)) => {
                writeln!(self.out, "         killed by {}", crate::signal_name(s))?
            }
        }
        Ok(())
    }
}
