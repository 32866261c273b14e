//! Reconstructs calls and returns from the event stream with a shadow call stack, shared by
//! both passes of the tracer.
//!
//! Each executed instruction is attributed to a *frame*: an activation of a function, named by
//! its entry address. Transitions between consecutive instructions are classified as calls,
//! returns, or local control flow; code entered without a call (a signal handler, `main` of a
//! stripped binary called by the C runtime) opens an *asynchronous* frame.

use ptrace_runner::{Event, Insn, TransferKind};

/// One activation on the shadow call stack.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Entry address of the function.
    pub func: u64,
    /// Address of the call instruction (0 for a root or asynchronous frame).
    pub site: u64,
    /// Where the call returns to (`None` for root and asynchronous frames).
    pub ret: Option<u64>,
    /// For an asynchronous frame: where the interrupted code resumes.
    pub resume: Option<u64>,
    /// The previous instruction executed in this frame.
    pub last_pc: Option<u64>,
}

/// What happened before an instruction, as the walker sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A frame was pushed: a call from `site` (0 when asynchronous) into `func`. `depth` is the
    /// new frame's index on the stack.
    Enter { func: u64, site: u64, depth: usize },
    /// The frame at `depth` (running `func`) returned or was abandoned.
    Leave { func: u64, depth: usize },
    /// A natively-run call from `site`, made in the frame at `depth`.
    LibCall { site: u64, depth: usize },
}

/// The shadow call stack and the classification of transitions.
#[derive(Default)]
pub struct Walker {
    pub stack: Vec<Frame>,
    /// Where the previous instruction said control goes next.
    expected: Option<u64>,
    /// The previous instruction's transfer, if any.
    pending: Option<(TransferKind, u64)>,
    /// The previous instruction: (address, length).
    prev: Option<(u64, u8)>,
    /// Tail calls are recognised by jumps to these addresses (function symbols' starts).
    entries: rustc_hash::FxHashSet<u64>,
}

impl Walker {
    /// A walker that treats jumps to `entries` (function starts) as tail calls.
    pub fn new(entries: impl IntoIterator<Item = u64>) -> Walker {
        Walker {
            entries: entries.into_iter().collect(),
            ..Walker::default()
        }
    }

    /// Depth of the current frame.
    pub fn depth(&self) -> usize {
        self.stack.len().saturating_sub(1)
    }

    /// The current frame.
    pub fn top(&self) -> Option<&Frame> {
        self.stack.last()
    }

    fn push(
        &mut self,
        func: u64,
        site: u64,
        ret: Option<u64>,
        resume: Option<u64>,
        out: &mut Vec<Action>,
    ) {
        self.stack.push(Frame {
            func,
            site,
            ret,
            resume,
            last_pc: None,
        });
        out.push(Action::Enter {
            func,
            site,
            depth: self.stack.len() - 1,
        });
    }

    fn pop(&mut self, out: &mut Vec<Action>) -> Option<Frame> {
        let f = self.stack.pop()?;
        out.push(Action::Leave {
            func: f.func,
            depth: self.stack.len(),
        });
        Some(f)
    }

    /// Classifies what led to `insn` and updates the stack; fills `out` with the actions, in
    /// order. After this, the top frame is the one `insn` runs in.
    #[inline(always)]
    pub fn before_insn(&mut self, insn: &Insn, out: &mut Vec<Action>) {
        // Most instructions are where the previous one said control goes, after no transfer,
        // a conditional branch or another that is neither a call, a return nor a possible
        // tail call: no action, only the bookkeeping below (what `classify` would do).
        let local = matches!(
            self.pending,
            None | Some((TransferKind::CondJump | TransferKind::Other, _))
        );
        if local && self.expected == Some(insn.pc) && !self.stack.is_empty() {
            out.clear();
            self.expect_after(insn);
            return;
        }
        self.classify(insn, out);
    }

    /// What the previous instruction said about the next, now that `insn` ran.
    #[inline(always)]
    fn expect_after(&mut self, insn: &Insn) {
        let pc = insn.pc;
        self.expected = Some(match insn.transfer {
            Some(t) => t.target,
            None => pc.wrapping_add(u64::from(insn.len)),
        });
        self.pending = insn.transfer.map(|t| (t.kind, t.target));
        self.prev = Some((pc, insn.len));
    }

    /// [`Self::before_insn`] in general.
    #[inline(never)]
    fn classify(&mut self, insn: &Insn, out: &mut Vec<Action>) {
        out.clear();
        let pc = insn.pc;
        let pending = self.pending.take();
        if self.stack.is_empty() {
            self.push(pc, 0, None, None, out);
        } else {
            match pending {
                Some((TransferKind::Call, target)) if target == pc => {
                    let (site, len) = self.prev.unwrap_or((0, 0));
                    let ret = site.wrapping_add(u64::from(len));
                    self.push(pc, site, Some(ret), None, out);
                }
                Some((TransferKind::Return, target)) => {
                    let popped = self.pop(out);
                    let resumes = popped.as_ref().and_then(|f| f.resume) == Some(pc);
                    if target != pc && !resumes {
                        // Control left traced code through a return and came back elsewhere.
                        self.enter_async(pc, out);
                    } else if self.stack.is_empty() {
                        // Returned out of the function where tracing started (`--start-at`).
                        self.push(pc, 0, None, None, out);
                    }
                }
                Some((TransferKind::Jump, target))
                    if target == pc
                        && self.entries.contains(&pc)
                        && self.top().is_some_and(|f| f.func != pc) =>
                {
                    // A tail call: the callee takes over the caller's frame.
                    if let Some(f) = self.pop(out) {
                        self.push(pc, f.site, f.ret, f.resume, out);
                    }
                }
                // The same instruction again is a REP iteration (or a jump to itself): local.
                _ if self.expected.is_some_and(|e| e != pc)
                    && self.prev.map(|p| p.0) != Some(pc) =>
                {
                    self.enter_async(pc, out)
                }
                _ => {}
            }
        }
        self.expect_after(insn);
    }

    /// Records that `insn` ran in the current frame (after the caller used `last_pc`).
    pub fn after_insn(&mut self, insn: &Insn) {
        if let Some(f) = self.stack.last_mut() {
            f.last_pc = Some(insn.pc);
        }
    }

    fn enter_async(&mut self, pc: u64, out: &mut Vec<Action>) {
        let resume = self.expected;
        self.push(pc, 0, None, resume, out);
    }

    /// Handles a non-instruction event; fills `out` with the actions it implies.
    pub fn other_event(&mut self, ev: &Event<'_>, out: &mut Vec<Action>) {
        out.clear();
        match *ev {
            Event::LibCall(c) => {
                self.pending = None;
                self.expected = Some(c.return_to);
                out.push(Action::LibCall {
                    site: c.site,
                    depth: self.depth(),
                });
            }
            Event::LibReturn { pc, .. } => {
                self.pending = None;
                // Frames opened for the PLT stub on the way to the library end here: pop back
                // through the frame whose call returns to `pc`.
                if let Some(i) = self.stack.iter().rposition(|f| f.ret == Some(pc)) {
                    while self.stack.len() > i {
                        self.pop(out);
                    }
                }
                self.expected = Some(pc);
            }
            _ => {}
        }
    }
}
