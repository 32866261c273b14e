//! Lazily built addr2line context with per-address caches.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use gimli::{EndianArcSlice, RunTimeEndian, SectionId};
use object::{Object, ObjectSection};

use crate::{Frame, Loc};

type Reader = EndianArcSlice<RunTimeEndian>;
type Context = addr2line::Context<Reader>;

/// Cached lookups are dropped wholesale past this many entries.
const MAX_CACHED: usize = 1 << 20;

#[derive(Default)]
struct State {
    /// `None`: not built yet; `Some(None)`: building failed.
    ctx: Option<Option<Context>>,
    locations: HashMap<u64, Option<Loc>>,
    frames: HashMap<u64, Vec<Frame>>,
}

/// DWARF queries on one object file; the context is built on first use.
#[derive(Default)]
pub(crate) struct DwarfCache {
    state: Mutex<State>,
}

impl DwarfCache {
    fn with_ctx<T>(&self, data: &[u8], f: impl FnOnce(&mut State) -> T) -> T {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.ctx.is_none() {
            let ctx = catch_unwind(AssertUnwindSafe(|| build_context(data)))
                .ok()
                .flatten();
            state.ctx = Some(ctx);
        }
        f(&mut state)
    }

    /// Source location of `addr` (link-time), cached.
    pub(crate) fn location(&self, data: &[u8], addr: u64) -> Option<Loc> {
        self.with_ctx(data, |state| {
            if let Some(loc) = state.locations.get(&addr) {
                return loc.clone();
            }
            let loc = match &state.ctx {
                Some(Some(ctx)) => catch_unwind(AssertUnwindSafe(|| find_location(ctx, addr)))
                    .ok()
                    .flatten(),
                _ => None,
            };
            if state.locations.len() >= MAX_CACHED {
                state.locations.clear();
            }
            state.locations.insert(addr, loc.clone());
            loc
        })
    }

    /// Frames at `addr` (link-time), innermost first, cached.
    pub(crate) fn frames(&self, data: &[u8], addr: u64) -> Vec<Frame> {
        self.with_ctx(data, |state| {
            if let Some(frames) = state.frames.get(&addr) {
                return frames.clone();
            }
            let frames = match &state.ctx {
                Some(Some(ctx)) => {
                    catch_unwind(AssertUnwindSafe(|| find_frames(ctx, addr))).unwrap_or_default()
                }
                _ => Vec::new(),
            };
            if state.frames.len() >= MAX_CACHED {
                state.frames.clear();
            }
            state.frames.insert(addr, frames.clone());
            frames
        })
    }
}

/// Sections addr2line reads; the others (location lists, macros, frame
/// tables…) are left empty to save memory.
fn wanted(id: SectionId) -> bool {
    matches!(
        id,
        SectionId::DebugAbbrev
            | SectionId::DebugAddr
            | SectionId::DebugAranges
            | SectionId::DebugInfo
            | SectionId::DebugLine
            | SectionId::DebugLineStr
            | SectionId::DebugStr
            | SectionId::DebugStrOffsets
            | SectionId::DebugTypes
            | SectionId::DebugRanges
            | SectionId::DebugRngLists
    )
}

fn build_context(data: &[u8]) -> Option<Context> {
    let file = object::File::parse(data).ok()?;
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let load = |id: SectionId| -> Result<Reader, gimli::Error> {
        let bytes: Arc<[u8]> = if wanted(id) {
            file.section_by_name(id.name())
                .and_then(|s| s.uncompressed_data().ok())
                .map(|d| Arc::from(&*d))
                .unwrap_or_else(|| Arc::from(&[][..]))
        } else {
            Arc::from(&[][..])
        };
        Ok(EndianArcSlice::new(bytes, endian))
    };
    let dwarf = gimli::Dwarf::load(load).ok()?;
    Context::from_dwarf(dwarf).ok()
}

fn to_loc(loc: &addr2line::Location<'_>) -> Option<Loc> {
    Some(Loc {
        file: loc.file?.to_string(),
        line: loc.line.unwrap_or(0),
    })
}

fn find_location(ctx: &Context, addr: u64) -> Option<Loc> {
    ctx.find_location(addr)
        .ok()
        .flatten()
        .as_ref()
        .and_then(to_loc)
}

fn find_frames(ctx: &Context, addr: u64) -> Vec<Frame> {
    let mut out = Vec::new();
    let Ok(mut iter) = ctx.find_frames(addr).skip_all_loads() else {
        return out;
    };
    // Bound the walk in case of cyclic/malformed inlining data.
    while out.len() < 256 {
        match iter.next() {
            Ok(Some(frame)) => out.push(Frame {
                function: frame
                    .function
                    .as_ref()
                    .and_then(|f| f.demangle().ok())
                    .map(|name| name.into_owned()),
                location: frame.location.as_ref().and_then(to_loc),
            }),
            Ok(None) | Err(_) => break,
        }
    }
    out
}
