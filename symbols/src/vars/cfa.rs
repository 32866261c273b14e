//! The canonical frame address (CFA) rule at a pc, read statically from
//! `.eh_frame` (or `.debug_frame`): it relates an `rsp`/`rbp`-based memory
//! operand to the CFA-relative offsets of `DW_OP_fbreg` variables.

use std::sync::Arc;

use gimli::{
    BaseAddresses, CfaRule, DebugFrame, EhFrame, EndianArcSlice, FrameDescriptionEntry,
    RunTimeEndian, UnwindContext, UnwindSection,
};
use object::{Object, ObjectSection};

use crate::dwarf::Reader;

/// `CFA = register + offset` at some pc.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cfa {
    /// DWARF register number.
    pub(crate) reg: u16,
    /// Offset added to the register's value.
    pub(crate) offset: i64,
}

/// One unwind section and its FDEs sorted by start address, so that a
/// lookup is a binary search rather than gimli's scan of the section.
struct Frames<S> {
    section: S,
    bases: BaseAddresses,
    fdes: Vec<FrameDescriptionEntry<Reader>>,
}

impl<S: UnwindSection<Reader>> Frames<S> {
    fn new(section: S, bases: BaseAddresses) -> Frames<S> {
        let mut fdes = Vec::new();
        let mut entries = section.entries(&bases);
        // A malformed entry ends the walk: the FDEs read so far still serve.
        while let Ok(Some(entry)) = entries.next() {
            if let gimli::CieOrFde::Fde(partial) = entry {
                if let Ok(fde) = partial.parse(S::cie_from_offset) {
                    fdes.push(fde);
                }
            }
        }
        fdes.sort_by_key(|f| f.initial_address());
        Frames {
            section,
            bases,
            fdes,
        }
    }

    /// The CFA rule at `pc`: `None` when no FDE covers it, or when the rule
    /// is a DWARF expression (stack realignment: `DW_OP_breg6; DW_OP_deref`),
    /// which has no static value.
    fn cfa_at(&self, pc: u64) -> Option<Option<Cfa>> {
        let i = self.fdes.partition_point(|f| f.initial_address() <= pc);
        // FDEs do not nest; the nearest one before `pc` is the only candidate
        // apart from zero-length or overlapping junk, which a few steps back
        // skip over.
        let fde = self.fdes[i.saturating_sub(4)..i]
            .iter()
            .rev()
            .find(|f| f.contains(pc))?;
        let mut ctx = UnwindContext::new();
        let row = fde
            .unwind_info_for_address(&self.section, &self.bases, &mut ctx, pc)
            .ok()?;
        Some(match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => Some(Cfa {
                reg: register.0,
                offset: *offset,
            }),
            CfaRule::Expression(_) => None,
        })
    }
}

/// CFA rules of one ELF file.
pub(crate) struct CfaTable {
    eh_frame: Option<Frames<EhFrame<Reader>>>,
    debug_frame: Option<Frames<DebugFrame<Reader>>>,
}

fn section_reader(file: &object::File<'_>, name: &str) -> Option<(Reader, u64)> {
    let section = file.section_by_name(name)?;
    let data = section.uncompressed_data().ok()?;
    if data.is_empty() {
        return None;
    }
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    Some((
        EndianArcSlice::new(Arc::from(&*data), endian),
        section.address(),
    ))
}

impl CfaTable {
    /// Read `.eh_frame` from the file itself (`main`) and `.debug_frame`
    /// from the file holding DWARF (`debug`: the file itself or its separate
    /// debug file, whose `.eh_frame` is only a `NOBITS` placeholder).
    pub(crate) fn new(main: &[u8], debug: Option<&[u8]>) -> CfaTable {
        let eh_frame = object::File::parse(main).ok().and_then(|file| {
            let (reader, address) = section_reader(&file, ".eh_frame")?;
            let mut bases = BaseAddresses::default().set_eh_frame(address);
            if let Some(text) = file.section_by_name(".text") {
                bases = bases.set_text(text.address());
            }
            if let Some(hdr) = file.section_by_name(".eh_frame_hdr") {
                bases = bases.set_eh_frame_hdr(hdr.address());
            }
            if let Some(got) = file.section_by_name(".got") {
                bases = bases.set_got(got.address());
            }
            let mut section = EhFrame::from(reader);
            section.set_address_size(8);
            Some(Frames::new(section, bases))
        });
        let debug_frame = [Some(main), debug].into_iter().flatten().find_map(|data| {
            let file = object::File::parse(data).ok()?;
            let (reader, _) = section_reader(&file, ".debug_frame")?;
            let mut section = DebugFrame::from(reader);
            section.set_address_size(8);
            Some(Frames::new(section, BaseAddresses::default()))
        });
        CfaTable {
            eh_frame,
            debug_frame,
        }
    }

    /// The CFA rule at link-time `pc`: `.eh_frame` first (what the program
    /// itself unwinds with), then `.debug_frame`.
    pub(crate) fn cfa_at(&self, pc: u64) -> Option<Cfa> {
        if let Some(found) = self.eh_frame.as_ref().and_then(|f| f.cfa_at(pc)) {
            return found;
        }
        self.debug_frame.as_ref()?.cfa_at(pc)?
    }
}
