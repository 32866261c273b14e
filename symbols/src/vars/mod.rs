//! Source variables behind machine storage: which variable a register, a
//! stack slot or a static address holds at a pc, from DWARF
//! (`.debug_info`, `.debug_loc` / `.debug_loclists`) and the call-frame
//! tables (`.eh_frame`, `.debug_frame`).
//!
//! Everything is static: no register values are needed. A frame slot named
//! `base + disp` (an `[rbp-0x10]` or `[rsp+8]` operand) is related to the
//! variables' `DW_OP_fbreg` offsets through the CFA rule at the pc.
//!
//! The variable index is built per compilation unit on the first query that
//! needs it; queries are then a binary search and a short scan of one
//! function's location entries.

mod cfa;
mod index;
mod intervals;
pub mod regs;

use std::fmt;
use std::sync::OnceLock;

pub use regs::{dwarf_register, dwarf_register_name};

use crate::dwarf::DwarfCache;
use cfa::CfaTable;
use index::{Base, CuIndex, Index, LocEntry, Place};

/// What kind of variable a [`Variable`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VariableKind {
    /// A function parameter (`DW_TAG_formal_parameter`).
    Parameter,
    /// A local variable with automatic storage (frame slot or register).
    Local,
    /// A variable at a fixed address: a global, a file-level `static`, or a
    /// `static` local.
    Static,
}

/// A source variable found behind some storage, with where in it the
/// queried location falls.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Variable {
    /// Its name in the source (`DW_AT_name`, through
    /// `DW_AT_abstract_origin` for inlined copies).
    pub name: String,
    /// Parameter, local or static.
    pub kind: VariableKind,
    /// Byte offset of the queried location inside the variable: 0 for a
    /// whole register; for a frame slot or a static address, how far into
    /// the variable the address is (e.g. `8` for `a[2]` of an `int` array);
    /// for a variable split into pieces (`DW_OP_piece`), the offset of the
    /// piece.
    pub offset: u64,
    /// Size of the variable in bytes, from its type (typedefs and
    /// qualifiers followed; arrays are element size × element count);
    /// `None` when the type has no constant size (VLA, incomplete type).
    pub size: Option<u64>,
    /// For an array: the size of one element (of the innermost element type
    /// for a multi-dimensional array, e.g. 4 for `int m[3][5]`).
    pub elem_size: Option<u64>,
    /// For an array: the element count of each dimension, outermost first
    /// (`[3, 5]` for `int m[3][5]`); empty for a scalar or when a bound is
    /// not constant.
    pub dims: Vec<u64>,
    /// For a pointer (an array parameter included, `double y[]`): the size of the type it
    /// points to, when constant (8 for `double *`, 64 for `double (*)[8]`).
    pub pointee_size: Option<u64>,
    /// The function whose scope declares the variable: for a variable of an
    /// inlined function, that inlined function (demangled linkage name for
    /// C++, else `DW_AT_name`); `None` for a global.
    pub function: Option<String>,
    /// Line of the declaration (`DW_AT_decl_line`), when recorded.
    pub decl_line: Option<u32>,
    /// Link-time pc ranges `[begin, end)` of the scope that declares the variable (its
    /// lexical block, inlined subroutine or function): where in the code the name is
    /// visible. Empty for a global.
    pub scope: Vec<(u64, u64)>,
}

impl Variable {
    /// For an array, the index (one per dimension, outermost first) of the
    /// element that contains [`Variable::offset`]; `None` for a scalar, an
    /// array of unknown shape or an offset outside the array.
    pub fn element(&self) -> Option<Vec<u64>> {
        let elem = self.elem_size.filter(|&e| e > 0)?;
        if self.dims.is_empty() {
            return None;
        }
        let mut flat = self.offset / elem;
        let mut index = vec![0; self.dims.len()];
        for (slot, &dim) in index.iter_mut().zip(&self.dims).rev() {
            if dim == 0 {
                return None;
            }
            *slot = flat % dim;
            flat /= dim;
        }
        (flat == 0).then_some(index)
    }
}

impl fmt::Display for Variable {
    /// `s`, `a[3]`, `m[1][4]`, `a[2]+2` (inside an element) or `st+8`
    /// (inside a scalar or struct).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)?;
        let mut rest = self.offset;
        if let (Some(index), Some(elem)) = (self.element(), self.elem_size) {
            for i in index {
                write!(f, "[{i}]")?;
            }
            rest %= elem;
        }
        if rest != 0 {
            write!(f, "+{rest}")?;
        }
        Ok(())
    }
}

/// Where the variable index reads from.
pub(crate) struct Sources<'a> {
    /// The ELF file itself (its `.eh_frame`).
    pub(crate) main: &'a [u8],
    /// The file holding its DWARF (itself or a separate debug file).
    pub(crate) debug: Option<&'a [u8]>,
    /// The file's addr2line cache, whose sections the index shares.
    pub(crate) dwarf: &'a DwarfCache,
}

/// Lazily built variable index and CFA table of one ELF file.
#[derive(Default)]
pub(crate) struct VarCache {
    /// `None` inside: no DWARF, or it does not parse.
    index: OnceLock<Option<Index>>,
    cfa: OnceLock<CfaTable>,
}

impl VarCache {
    fn index(&self, src: &Sources<'_>) -> Option<&Index> {
        self.index
            .get_or_init(|| {
                let dwarf = src.dwarf.dwarf_for_variables(src.debug?)?;
                Some(Index::new(dwarf))
            })
            .as_ref()
    }

    /// The innermost-scoped location entry live at `pc` that `accept`
    /// takes; `accept` returns the offset of the queried location inside
    /// the variable.
    fn best_at(
        &self,
        src: &Sources<'_>,
        pc: u64,
        mut accept: impl FnMut(&CuIndex, &LocEntry) -> Option<u64>,
    ) -> Option<Variable> {
        let index = self.index(src)?;
        let mut best: Option<(u32, &CuIndex, &LocEntry, u64)> = None;
        for unit in index.units_at(pc) {
            let Some(cu) = index.cu(unit) else { continue };
            for entry in cu.entries_at(pc) {
                let Some(offset) = accept(cu, entry) else {
                    continue;
                };
                let depth = cu.vars[entry.var as usize].depth;
                // Deeper scopes shadow outer ones; among equals the first
                // declared wins.
                if best.is_none_or(|(d, ..)| depth > d) {
                    best = Some((depth, cu, entry, offset));
                }
            }
        }
        let (_, cu, entry, offset) = best?;
        Some(variable(cu, entry.var, offset))
    }

    pub(crate) fn variable_in_register(
        &self,
        src: &Sources<'_>,
        pc: u64,
        reg: u16,
    ) -> Option<Variable> {
        self.best_at(src, pc, |_, e| {
            (e.place == Place::Reg(reg)).then_some(e.var_offset)
        })
    }

    pub(crate) fn stack_variable(
        &self,
        src: &Sources<'_>,
        pc: u64,
        base: u16,
        disp: i64,
    ) -> Option<Variable> {
        // No DWARF, no variables: the CFA table is not worth reading.
        self.index(src)?;
        let cfa = self
            .cfa
            .get_or_init(|| CfaTable::new(src.main, src.debug))
            .cfa_at(pc);
        self.best_at(src, pc, |cu, e| {
            let Place::Mem(var_base, var_off) = e.place else {
                return None;
            };
            // `base + disp - (var's start)`, with both sides on one anchor.
            let delta = match var_base {
                Base::Reg(r) if r == base => disp.checked_sub(var_off)?,
                Base::Reg(_) => return None,
                Base::Cfa => {
                    let cfa = cfa.filter(|c| c.reg == base)?;
                    // base = CFA - cfa.offset.
                    disp.checked_sub(cfa.offset)?.checked_sub(var_off)?
                }
            };
            let delta = u64::try_from(delta).ok()?;
            let len = e.size.or(cu.vars[e.var as usize].ty.size);
            let inside = match len {
                Some(len) => delta < len,
                // Unknown size: only the variable's first byte is certain.
                None => delta == 0,
            };
            inside.then(|| e.var_offset.saturating_add(delta))
        })
    }

    /// The source language of the unit holding link-time address `pc`.
    pub(crate) fn language_at(&self, src: &Sources<'_>, pc: u64) -> Option<Language> {
        let index = self.index(src)?;
        index
            .units_at(pc)
            .into_iter()
            .find_map(|u| index.cu(u)?.language)
            .map(Language::from_dwarf)
    }

    pub(crate) fn locals_within(&self, src: &Sources<'_>, lo: u64, hi: u64) -> Vec<Variable> {
        let Some(index) = self.index(src) else {
            return Vec::new();
        };
        let mut units = index.units_at(lo);
        units.extend(index.units_at(hi.saturating_sub(1)));
        units.sort_unstable();
        units.dedup();
        let mut out = Vec::new();
        for unit in units {
            let Some(cu) = index.cu(unit) else { continue };
            for (i, info) in cu.vars.iter().enumerate() {
                let visible = info.scope.iter().any(|&(b, e)| b < hi && lo < e);
                if visible && info.kind != VariableKind::Static {
                    out.push(variable(cu, i as u32, 0));
                }
            }
        }
        out
    }

    pub(crate) fn global_variable(&self, src: &Sources<'_>, addr: u64) -> Option<Variable> {
        let index = self.index(src)?;
        let statics = index.statics();
        let n = statics.partition_point(|&(start, ..)| start <= addr);
        // Statics do not overlap, but one may be described twice (pieces,
        // COMDAT copies): the few nearest starts are checked.
        statics[n.saturating_sub(8)..n]
            .iter()
            .rev()
            .find_map(|&(start, unit, j)| {
                let cu = index.cu(unit)?;
                let s = cu.statics.get(j)?;
                let delta = addr - start;
                let inside = match s.size.or(cu.vars[s.var as usize].ty.size) {
                    Some(len) => delta < len,
                    None => delta == 0,
                };
                inside.then(|| variable(cu, s.var, s.var_offset.saturating_add(delta)))
            })
    }
}

/// A program's source language, as advice must speak it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Language {
    /// C, and anything not told apart below (its OpenMP is C's).
    #[default]
    C,
    /// C++: OpenMP as in C.
    Cpp,
    /// Fortran: `!$omp` directives, column-major arrays.
    Fortran,
    /// Rust: rayon rather than OpenMP.
    Rust,
}

impl Language {
    fn from_dwarf(lang: gimli::DwLang) -> Language {
        use gimli::constants as c;
        match lang {
            c::DW_LANG_C_plus_plus
            | c::DW_LANG_C_plus_plus_03
            | c::DW_LANG_C_plus_plus_11
            | c::DW_LANG_C_plus_plus_14 => Language::Cpp,
            c::DW_LANG_Fortran77
            | c::DW_LANG_Fortran90
            | c::DW_LANG_Fortran95
            | c::DW_LANG_Fortran03
            | c::DW_LANG_Fortran08
            | c::DW_LANG_Fortran18 => Language::Fortran,
            c::DW_LANG_Rust => Language::Rust,
            _ => Language::C,
        }
    }
}

fn variable(cu: &CuIndex, var: u32, offset: u64) -> Variable {
    let info = &cu.vars[var as usize];
    Variable {
        name: info.name.clone(),
        kind: info.kind,
        offset,
        size: info.ty.size,
        elem_size: info.ty.elem_size,
        dims: info.ty.dims.clone(),
        pointee_size: info.ty.pointee,
        function: info
            .function
            .and_then(|f| cu.functions.get(f as usize))
            .cloned(),
        decl_line: info.decl_line,
        scope: info.scope.to_vec(),
    }
}
