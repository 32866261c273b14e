//! Where a program killed by a signal died: the instruction and its line from the executable,
//! the loops around it and their iterations from the schedule tree.

use crate::recording::Fault;
use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter};
use tracer::{Naming, NodeKind, ScheduleTree};

fn loc(l: symbols::Loc) -> reports::Loc {
    reports::Loc {
        file: l.file,
        line: l.line,
    }
}

/// The crash section of the report. `analysis`: the schedule tree and its naming, when the
/// analysis ran (without it, the loops are not known).
pub fn describe(
    fault: &Fault,
    bin: symbols::Loaded<'_>,
    analysis: Option<(&ScheduleTree, &Naming<'_>)>,
) -> reports::Crash {
    let info = fault.info();
    let link = bin.link(fault.pc).0;
    let in_exe = bin
        .exe
        .sections()
        .iter()
        .any(|s| s.exec && link >= s.address && link - s.address < s.size);
    // The tree's record of the same signal (a handled signal before it would be another).
    let point = analysis.and_then(|(tree, _)| {
        tree.last_signal
            .as_ref()
            .filter(|p| p.signo == fault.signo && p.pc == fault.pc)
    });
    let library_call = point.and_then(|p| p.native.as_ref());
    let mut crash = reports::Crash {
        signal: crate::signal_name(fault.signo),
        code: info.code_name().map(str::to_string),
        reason: info.code_meaning().map(str::to_string),
        address: match fault.signo {
            libc::SIGSEGV | libc::SIGBUS => info.addr.map(|a| format!("{a:#x}")),
            _ => None,
        },
        pc: format!("{:#x}", if in_exe { link } else { fault.pc }),
        instruction: None,
        function: None,
        location: None,
        library_call: library_call.map(|(name, _)| name.clone()),
        stack: String::new(),
        loops: Vec::new(),
    };
    if in_exe {
        if let Some(bytes) = bin.bytes_at(fault.pc, 15) {
            let insn = Decoder::with_ip(64, bytes, link, DecoderOptions::NONE).decode();
            if !insn.is_invalid() {
                let mut text = String::new();
                IntelFormatter::new().format(&insn, &mut text);
                crash.instruction = Some(text);
            }
        }
    }
    // The line: the instruction's, or for a signal inside a library call, the call's (the
    // byte before its return address).
    let line_at = match library_call {
        Some(&(_, back)) => Some(back.wrapping_sub(1)),
        None if in_exe => Some(fault.pc),
        None => None,
    };
    if let Some(at) = line_at {
        let frames = bin.frames(at);
        crash.function = frames
            .first()
            .and_then(|f| f.function.clone())
            .or_else(|| bin.function_at(at).map(|f| f.name.clone()));
        crash.location = bin.location(at).filter(|l| l.line > 0).map(loc);
    }
    if let (Some(p), Some((tree, naming))) = (point, analysis) {
        let path = tree.path(p.context);
        crash.stack = path
            .iter()
            .map(|&n| naming.frame(tree, n))
            .collect::<Vec<_>>()
            .join(";");
        crash.loops = path
            .iter()
            .filter(|&&n| {
                matches!(
                    tree.nodes[n].kind,
                    NodeKind::Loop { .. } | NodeKind::Recursion { .. }
                )
            })
            .map(|&n| reports::CrashLoop {
                frame: naming.frame(tree, n),
                location: naming.node_location(tree, n).map(loc),
                // A loop at depth d holds coordinate d - 1.
                iteration: tree.nodes[n]
                    .depth
                    .checked_sub(1)
                    .and_then(|d| p.coords.get(d))
                    .copied()
                    .unwrap_or(0),
            })
            .collect();
    }
    crash
}
