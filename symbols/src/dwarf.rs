//! Lazily built addr2line context with per-address caches.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use gimli::{EndianArcSlice, RunTimeEndian, SectionId};
use object::{Object, ObjectSection};

use crate::{Frame, Loc};

/// Section data shared by the addr2line context and the variable index.
pub(crate) type Reader = EndianArcSlice<RunTimeEndian>;
type Context = addr2line::Context<Reader>;

/// Cached lookups are dropped wholesale past this many entries.
const MAX_CACHED: usize = 1 << 20;

#[derive(Default)]
struct State {
    /// `None`: not built yet; `Some(None)`: building failed.
    ctx: Option<Option<Context>>,
    /// Sections read so far, by id: the addr2line context and the variable
    /// index ([`DwarfCache::dwarf_for_variables`]) share them, so neither
    /// copies `.debug_info` a second time.
    sections: HashMap<SectionId, Reader>,
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
            let ctx = catch_unwind(AssertUnwindSafe(|| {
                build_context(data, &mut state.sections)
            }))
            .ok()
            .flatten();
            state.ctx = Some(ctx);
        }
        f(&mut state)
    }

    /// The sections addr2line reads plus the location lists
    /// (`.debug_loc`, `.debug_loclists`), for the variable index. Building
    /// it does not build the addr2line context; sections either one has
    /// already read are shared. `None` when the file does not parse.
    pub(crate) fn dwarf_for_variables(&self, data: &[u8]) -> Option<gimli::Dwarf<Reader>> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        catch_unwind(AssertUnwindSafe(|| {
            load_dwarf(data, &mut state.sections, |id| {
                wanted(id) || matches!(id, SectionId::DebugLoc | SectionId::DebugLocLists)
            })
        }))
        .ok()
        .flatten()
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
/// tables…) are left empty to save memory. The variable index adds the
/// location lists to these.
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

fn build_context(data: &[u8], memo: &mut HashMap<SectionId, Reader>) -> Option<Context> {
    Context::from_dwarf(load_dwarf(data, memo, wanted)?).ok()
}

/// A `gimli::Dwarf` over the sections `want` accepts (the others empty),
/// reading each section once: `memo` keeps what was read.
fn load_dwarf(
    data: &[u8],
    memo: &mut HashMap<SectionId, Reader>,
    want: impl Fn(SectionId) -> bool,
) -> Option<gimli::Dwarf<Reader>> {
    let file = object::File::parse(data).ok()?;
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    let load = |id: SectionId| -> Result<Reader, gimli::Error> {
        if !want(id) {
            return Ok(EndianArcSlice::new(Arc::from(&[][..]), endian));
        }
        let reader = memo.entry(id).or_insert_with(|| {
            let bytes: Arc<[u8]> = file
                .section_by_name(id.name())
                .and_then(|s| s.uncompressed_data().ok())
                .map(|d| Arc::from(&*d))
                .unwrap_or_else(|| Arc::from(&[][..]));
            EndianArcSlice::new(bytes, endian)
        });
        Ok(reader.clone())
    };
    gimli::Dwarf::load(load).ok()
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
