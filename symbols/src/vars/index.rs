//! The variable index: for each compilation unit, every variable with a
//! location, where it lives (register, frame slot, static address) and over
//! which pcs. Built from `.debug_info` and the location lists by walking the
//! DIE tree once per unit, on the first query that needs that unit.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};

use gimli::{
    AttributeValue, DebuggingInformationEntry, DwAt, DwLang, DwTag, Dwarf, Expression, Operation,
    Reader as _, Unit, UnitHeader, UnitOffset, UnitSectionOffset,
};

use super::intervals::Intervals;
use super::VariableKind;
use crate::dwarf::Reader;

type Entry<'a, 'u> = DebuggingInformationEntry<'a, 'u, Reader>;

/// Where a location holds: a location-list entry's pc range, or `None` for
/// a single expression, which holds over its scope's ranges.
type Span = Option<(u64, u64)>;

/// Bound on `DW_AT_abstract_origin` / `DW_AT_specification` / `DW_AT_type`
/// chains: real ones are a few links long, malformed ones may loop.
const MAX_CHAIN: u32 = 16;

/// Where (part of) a variable lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// In the register with this DWARF number (`DW_OP_regN`, `DW_OP_regx`).
    Reg(u16),
    /// In memory at `base + offset`.
    Mem(Base, i64),
}

/// The base of a memory place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Base {
    /// The canonical frame address (`DW_OP_fbreg` under a frame base of
    /// `DW_OP_call_frame_cfa`, gcc's default).
    Cfa,
    /// The value of a register (`DW_OP_bregN`, or `DW_OP_fbreg` under a
    /// register frame base).
    Reg(u16),
}

/// A piece of a variable in one place over one pc range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocEntry {
    /// Link-time pc range `[begin, end)` where the location holds.
    pub(crate) begin: u64,
    pub(crate) end: u64,
    /// Index of the variable in [`CuIndex::vars`].
    pub(crate) var: u32,
    pub(crate) place: Place,
    /// Byte offset of this piece inside the variable (0 without
    /// `DW_OP_piece`).
    pub(crate) var_offset: u64,
    /// Size of the piece in bytes; `None` for a whole-variable location.
    pub(crate) size: Option<u64>,
}

/// A variable (or a piece of one) at a fixed address (`DW_OP_addr`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StaticEntry {
    pub(crate) addr: u64,
    pub(crate) var: u32,
    pub(crate) var_offset: u64,
    pub(crate) size: Option<u64>,
}

/// What the index keeps of one variable DIE.
#[derive(Debug, Clone)]
pub(crate) struct VarInfo {
    pub(crate) name: String,
    pub(crate) kind: VariableKind,
    pub(crate) decl_line: Option<u32>,
    pub(crate) ty: TypeInfo,
    /// Index in [`CuIndex::functions`] of the innermost (possibly inlined)
    /// function around the variable.
    pub(crate) function: Option<u32>,
    /// Scope nesting depth (subprogram 1, each inlined subroutine or
    /// lexical block inside it one more): deeper scopes shadow outer ones.
    pub(crate) depth: u32,
    /// Pc ranges of the declaring scope (empty outside any scope with pcs).
    pub(crate) scope: Arc<[(u64, u64)]>,
}

/// Size facts of a type.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TypeInfo {
    /// Size in bytes, when known.
    pub(crate) size: Option<u64>,
    /// For arrays: size of one element (of the innermost element type for
    /// a multi-dimensional array).
    pub(crate) elem_size: Option<u64>,
    /// For arrays: element count of each dimension, outermost first; empty
    /// when not an array or when a bound is not constant.
    pub(crate) dims: Vec<u64>,
    /// For pointers: size of the type pointed to, when known (`double (*)[8]`: 64).
    pub(crate) pointee: Option<u64>,
}

/// The index of one compilation unit.
#[derive(Debug, Default)]
pub(crate) struct CuIndex {
    pub(crate) vars: Vec<VarInfo>,
    pub(crate) functions: Vec<String>,
    /// Location entries grouped by out-of-line function (inlined
    /// subroutines' variables go to the function they are inlined into).
    groups: Vec<Vec<LocEntry>>,
    /// Pc ranges of the out-of-line functions → index in `groups`.
    group_ranges: Intervals<u32>,
    /// Entries found outside any function with pc ranges (location lists of
    /// variables in abstract or malformed scopes): checked on every query.
    loose: Vec<LocEntry>,
    pub(crate) statics: Vec<StaticEntry>,
    /// The unit's source language (`DW_AT_language`).
    pub(crate) language: Option<DwLang>,
}

impl CuIndex {
    /// The location entries whose pc range contains `pc`.
    pub(crate) fn entries_at(&self, pc: u64) -> impl Iterator<Item = &LocEntry> {
        self.group_ranges
            .containing(pc)
            .flat_map(move |&g| self.groups[g as usize].iter())
            .chain(self.loose.iter())
            .filter(move |e| e.begin <= pc && pc < e.end)
    }
}

/// Index of every unit of one file; units are indexed on first use.
pub(crate) struct Index {
    dwarf: Dwarf<Reader>,
    headers: Vec<UnitHeader<Reader>>,
    cus: Vec<OnceLock<Option<CuIndex>>>,
    /// Pc ranges of the units (from their root DIE) → unit index.
    unit_ranges: Intervals<usize>,
    /// Units whose root DIE gives no pc range: they are asked every time.
    unranged: Vec<usize>,
    /// Every static variable of the file, sorted by address: (address,
    /// unit, index in that unit's `statics`).
    statics: OnceLock<Vec<(u64, usize, usize)>>,
}

impl Index {
    pub(crate) fn new(mut dwarf: Dwarf<Reader>) -> Index {
        dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
        let mut headers = Vec::new();
        let mut units = dwarf.units();
        // A malformed header ends the list: later units cannot be located.
        while let Ok(Some(header)) = units.next() {
            headers.push(header);
        }
        let mut ranges = Vec::new();
        let mut unranged = Vec::new();
        for (i, header) in headers.iter().enumerate() {
            let Ok(unit) = dwarf.unit(header.clone()) else {
                continue;
            };
            let mut found = false;
            if let Ok(mut iter) = dwarf.unit_ranges(&unit) {
                while let Ok(Some(r)) = iter.next() {
                    if r.begin < r.end {
                        ranges.push((r.begin, r.end, i));
                        found = true;
                    }
                }
            }
            if !found {
                unranged.push(i);
            }
        }
        Index {
            cus: headers.iter().map(|_| OnceLock::new()).collect(),
            dwarf,
            headers,
            unit_ranges: Intervals::new(ranges),
            unranged,
            statics: OnceLock::new(),
        }
    }

    /// Indices of the units that may hold variables live at `pc`.
    pub(crate) fn units_at(&self, pc: u64) -> Vec<usize> {
        let mut out: Vec<usize> = self.unit_ranges.containing(pc).copied().collect();
        out.extend_from_slice(&self.unranged);
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The index of unit `i`, built on first use; `None` when the unit does
    /// not parse.
    pub(crate) fn cu(&self, i: usize) -> Option<&CuIndex> {
        self.cus
            .get(i)?
            .get_or_init(|| {
                // gimli reports malformed input as errors; the guard is for
                // bugs, so that one bad unit costs its variables, not the run.
                catch_unwind(AssertUnwindSafe(|| build_cu(self, i)))
                    .ok()
                    .flatten()
            })
            .as_ref()
    }

    /// Every static variable piece: (address, unit, index in the unit's
    /// `statics`), sorted by address. Indexes every unit on first use.
    pub(crate) fn statics(&self) -> &[(u64, usize, usize)] {
        self.statics.get_or_init(|| {
            let mut all = Vec::new();
            for i in 0..self.headers.len() {
                if let Some(cu) = self.cu(i) {
                    all.extend(cu.statics.iter().enumerate().map(|(j, s)| (s.addr, i, j)));
                }
            }
            all.sort_unstable();
            all
        })
    }

    /// The unit whose `.debug_info` span holds `offset`.
    fn unit_of(&self, offset: gimli::DebugInfoOffset<usize>) -> Option<usize> {
        let start = |h: &UnitHeader<Reader>| match h.offset() {
            UnitSectionOffset::DebugInfoOffset(o) => o.0,
            UnitSectionOffset::DebugTypesOffset(o) => o.0,
        };
        let i = self
            .headers
            .partition_point(|h| start(h) <= offset.0)
            .checked_sub(1)?;
        let h = &self.headers[i];
        (offset.0 < start(h) + h.length_including_self()).then_some(i)
    }
}

/// A DIE anywhere in `.debug_info`: unit index and offset in that unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct DieRef {
    unit: usize,
    offset: UnitOffset<usize>,
}

/// How `DW_OP_fbreg` offsets are anchored in the current subprogram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameBase {
    /// `DW_OP_call_frame_cfa`.
    Cfa,
    /// `DW_OP_regN` (the frame base is the register's value) or
    /// `DW_OP_bregN off`.
    Reg(u16, i64),
    /// Absent, a location list, or another expression: `DW_OP_fbreg` places
    /// are not indexed.
    Unknown,
}

/// One open scope of the DIE walk.
struct Scope {
    /// DIE depth of the scope's DIE.
    depth: isize,
    /// Its pc ranges (a lexical block without any inherits its parent's);
    /// empty for abstract (not emitted) code.
    ranges: Arc<[(u64, u64)]>,
    function: Option<u32>,
    frame_base: FrameBase,
    /// The out-of-line function's entry group, if it has pc ranges.
    group: Option<u32>,
    nesting: u32,
    /// Its DIE.
    die: DieRef,
    /// The concrete copy of an abstract function it is or is inside (an inlined instance).
    copy: Option<DieRef>,
    /// The abstract function (an inlined one's original, without pcs) it is or is inside.
    abstract_fn: Option<DieRef>,
}

/// A concrete copy of an abstract function (an inlined instance).
struct InlinedCopy {
    die: DieRef,
    /// The abstract original.
    origin: DieRef,
    /// The scope the copy covers.
    ranges: Arc<[(u64, u64)]>,
    function: Option<u32>,
    nesting: u32,
}

/// Names and links read from a DIE and its origin chain.
#[derive(Default)]
struct Described {
    name: Option<String>,
    linkage_name: Option<String>,
    decl_line: Option<u32>,
    ty: Option<DieRef>,
}

struct Builder<'a> {
    index: &'a Index,
    home: usize,
    unit: &'a Unit<Reader>,
    /// Other units that DIE references (`DW_FORM_ref_addr`) led to.
    others: HashMap<usize, Unit<Reader>>,
    types: HashMap<DieRef, TypeInfo>,
    /// Default lower bound of array subranges in this unit's language.
    lower_bound: u64,
    /// Pc ranges of the out-of-line functions → their entry group.
    group_spans: Vec<(u64, u64, u32)>,
    out: CuIndex,
    /// Variables declared directly in abstract functions (inlined ones' originals), with the
    /// function's DIE and their own.
    abstract_vars: Vec<(DieRef, DieRef, VarInfo)>,
    /// Concrete copies of abstract functions (inlined instances): their DIE, their
    /// original's, and the scope they cover.
    concrete: Vec<InlinedCopy>,
    /// (concrete copy, original variable) for the variables a copy declares itself.
    copied: std::collections::HashSet<(DieRef, DieRef)>,
}

/// Index unit `home` of `index`.
fn build_cu(index: &Index, home: usize) -> Option<CuIndex> {
    let unit = index.dwarf.unit(index.headers.get(home)?.clone()).ok()?;
    let mut builder = Builder {
        index,
        home,
        unit: &unit,
        others: HashMap::new(),
        types: HashMap::new(),
        lower_bound: 0,
        group_spans: Vec::new(),
        out: CuIndex::default(),
        abstract_vars: Vec::new(),
        concrete: Vec::new(),
        copied: Default::default(),
    };
    builder.walk();
    builder.inline_copies();
    let mut out = builder.out;
    out.group_ranges = Intervals::new(std::mem::take(&mut builder.group_spans));
    Some(out)
}

impl Builder<'_> {
    fn walk(&mut self) {
        let unit = self.unit;
        let mut cursor = unit.entries();
        let mut depth: isize = 0;
        let mut scopes: Vec<Scope> = Vec::new();
        // A malformed DIE ends the walk; what was indexed so far is kept.
        while let Ok(Some((delta, entry))) = cursor.next_dfs() {
            depth += delta;
            while scopes.last().is_some_and(|s| s.depth >= depth) {
                scopes.pop();
            }
            let tag = entry.tag();
            if depth == 0 {
                if let Ok(Some(AttributeValue::Language(lang))) =
                    entry.attr_value(gimli::DW_AT_language)
                {
                    self.lower_bound = default_lower_bound(lang);
                    self.out.language = Some(lang);
                }
                continue;
            }
            let parent = scopes.last();
            // Only a scope's direct children belong to it; a
            // `DW_TAG_formal_parameter` of a subroutine type nested in a
            // function is not one of its parameters.
            let direct = parent.is_none_or(|p| p.depth == depth - 1);
            match tag {
                gimli::DW_TAG_subprogram => {
                    let scope = self.subprogram(entry, depth, parent);
                    scopes.push(scope);
                }
                gimli::DW_TAG_inlined_subroutine | gimli::DW_TAG_lexical_block => {
                    if let Some(parent) = parent {
                        let scope = self.inner_scope(entry, tag, depth, parent);
                        scopes.push(scope);
                    }
                }
                gimli::DW_TAG_variable | gimli::DW_TAG_formal_parameter => {
                    self.variable(entry, tag, if direct { parent } else { None });
                }
                _ => {}
            }
        }
    }

    fn die_ranges(&self, entry: &Entry<'_, '_>) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        if let Ok(mut iter) = self.index.dwarf.die_ranges(self.unit, entry) {
            while let Ok(Some(r)) = iter.next() {
                if r.begin < r.end {
                    out.push((r.begin, r.end));
                }
            }
        }
        out
    }

    fn add_function(&mut self, name: Option<String>) -> Option<u32> {
        let name = name?;
        let i = u32::try_from(self.out.functions.len()).ok()?;
        self.out.functions.push(name);
        Some(i)
    }

    fn subprogram(&mut self, entry: &Entry<'_, '_>, depth: isize, parent: Option<&Scope>) -> Scope {
        let ranges = self.die_ranges(entry);
        let described = self.describe(entry);
        let function = self.add_function(described.linkage_name.or(described.name));
        let frame_base = match entry.attr_value(gimli::DW_AT_frame_base) {
            Ok(Some(AttributeValue::Exprloc(expr))) => self.frame_base(&expr),
            _ => FrameBase::Unknown,
        };
        let group = if ranges.is_empty() {
            None
        } else {
            let g = u32::try_from(self.out.groups.len()).ok();
            if let Some(g) = g {
                self.out.groups.push(Vec::new());
                self.group_spans
                    .extend(ranges.iter().map(|&(begin, end)| (begin, end, g)));
            }
            g
        };
        let scope = Scope {
            depth,
            ranges: ranges.into(),
            function,
            frame_base,
            group,
            nesting: parent.map_or(1, |p| p.nesting + 1),
            die: self.die_here(entry),
            copy: None,
            abstract_fn: None,
        };
        self.with_copy(entry, scope)
    }

    fn inner_scope(
        &mut self,
        entry: &Entry<'_, '_>,
        tag: DwTag,
        depth: isize,
        parent: &Scope,
    ) -> Scope {
        let ranges = self.die_ranges(entry);
        let function = if tag == gimli::DW_TAG_inlined_subroutine {
            let described = self.describe(entry);
            self.add_function(described.linkage_name.or(described.name))
                .or(parent.function)
        } else {
            parent.function
        };
        let scope = Scope {
            depth,
            // gcc emits lexical blocks without pcs (e.g. in abstract
            // instances, or when the block's code is the whole parent's):
            // their variables live over the parent's ranges.
            ranges: if ranges.is_empty() && tag == gimli::DW_TAG_lexical_block {
                parent.ranges.clone()
            } else {
                ranges.into()
            },
            function,
            frame_base: parent.frame_base,
            group: parent.group,
            nesting: parent.nesting + 1,
            die: self.die_here(entry),
            copy: parent.copy,
            abstract_fn: parent.abstract_fn,
        };
        if tag == gimli::DW_TAG_inlined_subroutine {
            self.with_copy(entry, scope)
        } else {
            scope
        }
    }

    fn die_here(&self, entry: &Entry<'_, '_>) -> DieRef {
        DieRef {
            unit: self.home,
            offset: entry.offset(),
        }
    }

    /// A function's scope, noted as a copy of an abstract function (an inlined instance, or
    /// an out-of-line copy of a function also inlined elsewhere) when it has pcs and an
    /// origin, or as an abstract function when it has no pcs.
    fn with_copy(&mut self, entry: &Entry<'_, '_>, mut scope: Scope) -> Scope {
        if scope.ranges.is_empty() {
            scope.abstract_fn = Some(scope.die);
            return scope;
        }
        if let Some(origin) = read_links(entry).and_then(|v| self.die_ref(self.home, v)) {
            scope.copy = Some(scope.die);
            self.concrete.push(InlinedCopy {
                die: scope.die,
                origin,
                ranges: scope.ranges.clone(),
                function: scope.function,
                nesting: scope.nesting,
            });
        }
        scope
    }

    /// Gives each copy of an abstract function the variables of the original it does not
    /// declare itself: gcc leaves out of an inlined copy the variables that have no location
    /// in it (a loop counter it keeps where debug information does not say), though the
    /// copy's code assigns them.
    fn inline_copies(&mut self) {
        let mut by_origin: HashMap<DieRef, Vec<usize>> = HashMap::new();
        for (i, (function, ..)) in self.abstract_vars.iter().enumerate() {
            by_origin.entry(*function).or_default().push(i);
        }
        for copy in std::mem::take(&mut self.concrete) {
            for &i in by_origin.get(&copy.origin).into_iter().flatten() {
                let (_, var, info) = &self.abstract_vars[i];
                if self.copied.contains(&(copy.die, *var))
                    || u32::try_from(self.out.vars.len()).is_err()
                {
                    continue;
                }
                self.out.vars.push(VarInfo {
                    function: copy.function,
                    depth: copy.nesting,
                    scope: copy.ranges.clone(),
                    ..info.clone()
                });
            }
        }
    }

    /// Records a local variable or parameter that has no location.
    fn unplaced(&mut self, entry: &Entry<'_, '_>, tag: DwTag, scope: &Scope) {
        if u32::try_from(self.out.vars.len()).is_err() {
            return;
        }
        if let Some(info) = self.unplaced_info(entry, tag, scope) {
            self.out.vars.push(info);
        }
    }

    /// Keeps a variable of an abstract function (no pcs) for its copies.
    fn abstract_variable(&mut self, entry: &Entry<'_, '_>, tag: DwTag, scope: &Scope) {
        let Some(function) = scope.abstract_fn else {
            return;
        };
        if let Some(info) = self.unplaced_info(entry, tag, scope) {
            let var = self.die_here(entry);
            self.abstract_vars.push((function, var, info));
        }
    }

    fn unplaced_info(
        &mut self,
        entry: &Entry<'_, '_>,
        tag: DwTag,
        scope: &Scope,
    ) -> Option<VarInfo> {
        let described = self.describe(entry);
        Some(VarInfo {
            name: described.name?,
            kind: if tag == gimli::DW_TAG_formal_parameter {
                VariableKind::Parameter
            } else {
                VariableKind::Local
            },
            decl_line: described.decl_line,
            // Clauses ask whether a name visible at a loop is a pointer, located or not.
            ty: described
                .ty
                .map_or_else(TypeInfo::default, |t| self.type_info(t, 0)),
            function: scope.function,
            depth: scope.nesting,
            scope: scope.ranges.clone(),
        })
    }

    fn frame_base(&self, expr: &Expression<Reader>) -> FrameBase {
        let mut ops = expr.clone().operations(self.unit.encoding());
        let first = match ops.next() {
            Ok(Some(op)) => op,
            _ => return FrameBase::Unknown,
        };
        if !matches!(ops.next(), Ok(None)) {
            return FrameBase::Unknown;
        }
        match first {
            Operation::CallFrameCFA => FrameBase::Cfa,
            Operation::Register { register } => FrameBase::Reg(register.0, 0),
            Operation::RegisterOffset {
                register,
                offset,
                base_type,
            } if base_type.0 == 0 => FrameBase::Reg(register.0, offset),
            _ => FrameBase::Unknown,
        }
    }

    fn variable(&mut self, entry: &Entry<'_, '_>, tag: DwTag, scope: Option<&Scope>) {
        if let Some(copy) = scope.and_then(|s| s.copy) {
            if let Some(origin) = read_links(entry).and_then(|v| self.die_ref(self.home, v)) {
                self.copied.insert((copy, origin));
            }
        }
        let Ok(Some(location)) = entry.attr_value(gimli::DW_AT_location) else {
            // Optimized out, or a constant: no storage to find it by, but its name and scope
            // still say which variables the code of a scope can assign.
            match scope {
                Some(s) if !s.ranges.is_empty() => self.unplaced(entry, tag, s),
                Some(s) => self.abstract_variable(entry, tag, s),
                None => {}
            }
            return;
        };
        let mut exprs: Vec<(Span, Expression<Reader>)> = Vec::new();
        match location {
            AttributeValue::Exprloc(expr) => exprs.push((None, expr)),
            other => {
                if let Ok(Some(mut iter)) = self.index.dwarf.attr_locations(self.unit, other) {
                    while let Ok(Some(e)) = iter.next() {
                        if e.range.begin < e.range.end {
                            exprs.push((Some((e.range.begin, e.range.end)), e.data));
                        }
                    }
                }
            }
        }
        let frame_base = scope.map_or(FrameBase::Unknown, |s| s.frame_base);
        let mut located: Vec<(Span, Piece)> = Vec::new();
        for (range, expr) in exprs {
            for piece in self.pieces(&expr, frame_base) {
                located.push((range, piece));
            }
        }
        let has_static = located
            .iter()
            .any(|(_, p)| matches!(p.place, PiecePlace::Addr(_)));
        // A variable outside a scope with pcs (CU level, a namespace, an
        // abstract instance) only matters for its static address.
        if located.is_empty() || (!has_static && scope.is_none()) {
            // A location polyprof cannot place (an expression of other values): known by
            // name and scope, as for no location.
            if let Some(s) = scope.filter(|s| located.is_empty() && !s.ranges.is_empty()) {
                self.unplaced(entry, tag, s);
            }
            return;
        }
        let described = self.describe(entry);
        let Some(name) = described.name else { return };
        let ty = match described.ty {
            Some(t) => self.type_info(t, 0),
            None => TypeInfo::default(),
        };
        let kind = if has_static {
            VariableKind::Static
        } else if tag == gimli::DW_TAG_formal_parameter {
            VariableKind::Parameter
        } else {
            VariableKind::Local
        };
        let Ok(var) = u32::try_from(self.out.vars.len()) else {
            return;
        };
        self.out.vars.push(VarInfo {
            name,
            kind,
            decl_line: described.decl_line,
            ty,
            function: scope.and_then(|s| s.function),
            depth: scope.map_or(0, |s| s.nesting),
            scope: scope.map_or_else(|| Arc::from(Vec::new()), |s| s.ranges.clone()),
        });
        for (range, piece) in located {
            let place = match piece.place {
                PiecePlace::Addr(addr) => {
                    self.out.statics.push(StaticEntry {
                        addr,
                        var,
                        var_offset: piece.var_offset,
                        size: piece.size,
                    });
                    continue;
                }
                PiecePlace::Place(p) => p,
            };
            let Some(scope) = scope else { continue };
            let spans: Vec<(u64, u64)> = match range {
                Some(r) => vec![r],
                None => scope.ranges.to_vec(),
            };
            let target = match scope.group {
                Some(g) => &mut self.out.groups[g as usize],
                None => &mut self.out.loose,
            };
            for (begin, end) in spans {
                target.push(LocEntry {
                    begin,
                    end,
                    var,
                    place,
                    var_offset: piece.var_offset,
                    size: piece.size,
                });
            }
        }
    }

    fn pieces(&self, expr: &Expression<Reader>, frame_base: FrameBase) -> Vec<Piece> {
        let (dwarf, unit) = (&self.index.dwarf, self.unit);
        pieces(expr, unit.encoding(), frame_base, |index| {
            dwarf.address(unit, index).ok()
        })
    }

    /// Runs `f` on the DIE `r` (in this unit or another one).
    fn with_die<T>(
        &mut self,
        r: DieRef,
        f: impl FnOnce(&Unit<Reader>, &Entry<'_, '_>) -> T,
    ) -> Option<T> {
        let unit: &Unit<Reader> = if r.unit == self.home {
            self.unit
        } else {
            if !self.others.contains_key(&r.unit) {
                let header = self.index.headers.get(r.unit)?.clone();
                let unit = self.index.dwarf.unit(header).ok()?;
                self.others.insert(r.unit, unit);
            }
            self.others.get(&r.unit)?
        };
        let entry = unit.entry(r.offset).ok()?;
        Some(f(unit, &entry))
    }

    /// The DIE a reference attribute of a DIE in unit `from` points to.
    fn die_ref(&self, from: usize, value: AttributeValue<Reader>) -> Option<DieRef> {
        match value {
            AttributeValue::UnitRef(offset) => Some(DieRef { unit: from, offset }),
            AttributeValue::DebugInfoRef(offset) => {
                let unit = self.index.unit_of(offset)?;
                let header = self.index.headers.get(unit)?;
                Some(DieRef {
                    unit,
                    offset: offset.to_unit_offset(header)?,
                })
            }
            // Type units (`DW_FORM_ref_sig8`) and supplementary files are
            // not followed.
            _ => None,
        }
    }

    /// Name, linkage name, declaration line and type of a DIE, each from
    /// the DIE itself or the first DIE along its `DW_AT_abstract_origin` /
    /// `DW_AT_specification` chain that has it.
    fn describe(&mut self, entry: &Entry<'_, '_>) -> Described {
        let index = self.index;
        let mut out = Described::default();
        let mut fields = Fields::default();
        read_fields(&index.dwarf, self.unit, entry, &mut fields);
        self.absorb(&mut out, fields, self.home);
        let mut next = read_links(entry).and_then(|v| self.die_ref(self.home, v));
        let mut hops = 0;
        while let Some(r) = next {
            hops += 1;
            if hops > MAX_CHAIN {
                break;
            }
            let got = self.with_die(r, |unit, e| {
                let mut fields = Fields::default();
                read_fields(&index.dwarf, unit, e, &mut fields);
                (fields, read_links(e))
            });
            let Some((fields, link)) = got else { break };
            self.absorb(&mut out, fields, r.unit);
            next = link.and_then(|v| self.die_ref(r.unit, v));
        }
        out
    }

    /// Fill what `out` lacks from `found`, read from a DIE of unit `unit`
    /// (type references are relative to the DIE that holds them).
    fn absorb(&self, out: &mut Described, found: Fields, unit: usize) {
        if out.name.is_none() {
            out.name = found.name;
        }
        if out.linkage_name.is_none() {
            out.linkage_name = found.linkage_name;
        }
        if out.decl_line.is_none() {
            out.decl_line = found.decl_line;
        }
        if out.ty.is_none() {
            out.ty = found.ty_value.and_then(|v| self.die_ref(unit, v));
        }
    }

    /// Size, element size and dimensions of the type DIE `r`.
    fn type_info(&mut self, r: DieRef, depth: u32) -> TypeInfo {
        if depth > MAX_CHAIN {
            return TypeInfo::default();
        }
        if let Some(t) = self.types.get(&r) {
            return t.clone();
        }
        let lower_default = self.lower_bound;
        let read = self.with_die(r, |unit, e| {
            let byte_size = attr_udata(e, gimli::DW_AT_byte_size);
            let inner = e.attr_value(gimli::DW_AT_type).ok().flatten();
            let mut counts: Option<Vec<u64>> = None;
            if e.tag() == gimli::DW_TAG_array_type {
                counts = array_counts(unit, r.offset, lower_default);
            }
            (
                e.tag(),
                byte_size,
                inner,
                counts,
                unit.encoding().address_size,
            )
        });
        let Some((tag, byte_size, inner, counts, address_size)) = read else {
            return TypeInfo::default();
        };
        let inner = inner.and_then(|v| self.die_ref(r.unit, v));
        let info = match tag {
            gimli::DW_TAG_typedef
            | gimli::DW_TAG_const_type
            | gimli::DW_TAG_volatile_type
            | gimli::DW_TAG_restrict_type
            | gimli::DW_TAG_atomic_type
            | gimli::DW_TAG_packed_type
            | gimli::DW_TAG_shared_type
            | gimli::DW_TAG_immutable_type => match inner {
                Some(t) => self.type_info(t, depth + 1),
                None => TypeInfo::default(),
            },
            gimli::DW_TAG_array_type => {
                let elem = match inner {
                    Some(t) => self.type_info(t, depth + 1),
                    None => TypeInfo::default(),
                };
                // An array of arrays (through a typedef) flattens into one
                // multi-dimensional array.
                let (elem_size, elem_dims) = if elem.dims.is_empty() {
                    (elem.size, Vec::new())
                } else {
                    (elem.elem_size, elem.dims)
                };
                let dims: Vec<u64> = match counts {
                    Some(c) if !c.is_empty() => c.into_iter().chain(elem_dims).collect(),
                    _ => Vec::new(),
                };
                let total = if dims.is_empty() {
                    None
                } else {
                    elem_size.and_then(|e| dims.iter().try_fold(e, |acc, &d| acc.checked_mul(d)))
                };
                TypeInfo {
                    size: byte_size.or(total),
                    elem_size,
                    dims,
                    pointee: None,
                }
            }
            gimli::DW_TAG_pointer_type
            | gimli::DW_TAG_reference_type
            | gimli::DW_TAG_rvalue_reference_type => TypeInfo {
                size: byte_size.or(Some(u64::from(address_size))),
                pointee: inner.and_then(|t| self.type_info(t, depth + 1).size),
                ..TypeInfo::default()
            },
            gimli::DW_TAG_enumeration_type if byte_size.is_none() => match inner {
                Some(t) => self.type_info(t, depth + 1),
                None => TypeInfo::default(),
            },
            _ => TypeInfo {
                size: byte_size,
                ..TypeInfo::default()
            },
        };
        self.types.insert(r, info.clone());
        info
    }
}

/// The storage pieces of a location expression. Values that live in no
/// storage (`DW_OP_stack_value`, `DW_OP_implicit_value`,
/// `DW_OP_entry_value`, computed addresses) give no piece.
fn pieces(
    expr: &Expression<Reader>,
    encoding: gimli::Encoding,
    frame_base: FrameBase,
    address_at: impl Fn(gimli::DebugAddrIndex<usize>) -> Option<u64>,
) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut ops = expr.clone().operations(encoding);
    // The place being described since the last piece; `Err(())` once an
    // operation makes it something other than plain storage.
    let mut current: Result<Option<PiecePlace>, ()> = Ok(None);
    let mut bit_offset: u64 = 0;
    let mut pieces_seen = false;
    loop {
        let op = match ops.next() {
            Ok(Some(op)) => op,
            Ok(None) => break,
            Err(_) => return Vec::new(),
        };
        current = match (op, current) {
            (
                Operation::Piece {
                    size_in_bits,
                    bit_offset: shift,
                },
                cur,
            ) => {
                pieces_seen = true;
                if let (Ok(Some(place)), true, true) = (
                    cur,
                    size_in_bits.is_multiple_of(8) && bit_offset.is_multiple_of(8),
                    shift.unwrap_or(0) == 0,
                ) {
                    out.push(Piece {
                        place,
                        var_offset: bit_offset / 8,
                        size: Some(size_in_bits / 8),
                    });
                }
                bit_offset = bit_offset.saturating_add(size_in_bits);
                Ok(None)
            }
            (_, Err(())) => Err(()),
            (Operation::Register { register }, Ok(None)) => {
                Ok(Some(PiecePlace::Place(Place::Reg(register.0))))
            }
            (
                Operation::RegisterOffset {
                    register,
                    offset,
                    base_type,
                },
                Ok(None),
            ) if base_type.0 == 0 => Ok(Some(PiecePlace::Place(Place::Mem(
                Base::Reg(register.0),
                offset,
            )))),
            (Operation::FrameOffset { offset }, Ok(None)) => match frame_base {
                FrameBase::Cfa => Ok(Some(PiecePlace::Place(Place::Mem(Base::Cfa, offset)))),
                FrameBase::Reg(r, off) => Ok(Some(PiecePlace::Place(Place::Mem(
                    Base::Reg(r),
                    offset.wrapping_add(off),
                )))),
                FrameBase::Unknown => Err(()),
            },
            (Operation::Address { address }, Ok(None)) => Ok(Some(PiecePlace::Addr(address))),
            (Operation::AddressIndex { index }, Ok(None)) => match address_at(index) {
                Some(address) => Ok(Some(PiecePlace::Addr(address))),
                None => Err(()),
            },
            // `DW_OP_fbreg -24; DW_OP_plus_uconst 8`: still one address.
            (Operation::PlusConstant { value }, Ok(Some(PiecePlace::Place(Place::Mem(b, o))))) => {
                match i64::try_from(value).ok().and_then(|v| o.checked_add(v)) {
                    Some(o) => Ok(Some(PiecePlace::Place(Place::Mem(b, o)))),
                    None => Err(()),
                }
            }
            (Operation::PlusConstant { value }, Ok(Some(PiecePlace::Addr(a)))) => {
                Ok(Some(PiecePlace::Addr(a.wrapping_add(value))))
            }
            (Operation::Nop, cur) => cur,
            _ => Err(()),
        };
    }
    if !pieces_seen {
        if let Ok(Some(place)) = current {
            out.push(Piece {
                place,
                var_offset: 0,
                size: None,
            });
        }
    }
    out
}

/// A piece of a location expression.
#[derive(Debug, Clone, Copy)]
struct Piece {
    place: PiecePlace,
    var_offset: u64,
    size: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
enum PiecePlace {
    Place(Place),
    Addr(u64),
}

/// Fields read from one DIE; `ty_value` is resolved by the caller, who
/// knows which unit the DIE is in.
#[derive(Default)]
struct Fields {
    name: Option<String>,
    linkage_name: Option<String>,
    decl_line: Option<u32>,
    ty_value: Option<AttributeValue<Reader>>,
}

fn read_fields(dwarf: &Dwarf<Reader>, unit: &Unit<Reader>, e: &Entry<'_, '_>, out: &mut Fields) {
    let string = |at: DwAt| -> Option<String> {
        let value = e.attr_value(at).ok()??;
        let s = dwarf.attr_string(unit, value).ok()?;
        Some(s.to_string_lossy().ok()?.into_owned())
    };
    out.name = string(gimli::DW_AT_name);
    out.linkage_name = string(gimli::DW_AT_linkage_name)
        .or_else(|| string(gimli::DW_AT_MIPS_linkage_name))
        .map(|n| crate::demangle(&n));
    out.decl_line = attr_udata(e, gimli::DW_AT_decl_line).and_then(|l| u32::try_from(l).ok());
    out.ty_value = e.attr_value(gimli::DW_AT_type).ok().flatten();
}

/// The `DW_AT_abstract_origin` or `DW_AT_specification` of a DIE.
fn read_links(e: &Entry<'_, '_>) -> Option<AttributeValue<Reader>> {
    [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification]
        .into_iter()
        .find_map(|at| e.attr_value(at).ok().flatten())
}

fn attr_udata(e: &Entry<'_, '_>, at: DwAt) -> Option<u64> {
    e.attr_value(at).ok()??.udata_value()
}

/// Element counts of the `DW_TAG_subrange_type` children of the array type
/// at `offset`; `None` when a bound is not a constant (a VLA) or absent
/// (`int a[]`).
fn array_counts(
    unit: &Unit<Reader>,
    offset: UnitOffset<usize>,
    lower_default: u64,
) -> Option<Vec<u64>> {
    let mut tree = unit.entries_tree(Some(offset)).ok()?;
    let root = tree.root().ok()?;
    let mut children = root.children();
    let mut counts = Vec::new();
    while let Ok(Some(child)) = children.next() {
        let e = child.entry();
        if e.tag() != gimli::DW_TAG_subrange_type {
            continue;
        }
        let count = if let Some(count) = attr_udata(e, gimli::DW_AT_count) {
            count
        } else {
            let upper = attr_udata(e, gimli::DW_AT_upper_bound)?;
            // gcc encodes an unknown bound as -1 in a wide form.
            if upper > i64::MAX as u64 {
                return None;
            }
            let lower = attr_udata(e, gimli::DW_AT_lower_bound).unwrap_or(lower_default);
            upper.checked_sub(lower)?.checked_add(1)?
        };
        counts.push(count);
    }
    Some(counts)
}

/// DWARF 5 table 7.17: arrays in these languages start at 1 by default.
fn default_lower_bound(lang: DwLang) -> u64 {
    match lang {
        gimli::DW_LANG_Ada83
        | gimli::DW_LANG_Ada95
        | gimli::DW_LANG_Ada2005
        | gimli::DW_LANG_Ada2012
        | gimli::DW_LANG_Cobol74
        | gimli::DW_LANG_Cobol85
        | gimli::DW_LANG_Fortran77
        | gimli::DW_LANG_Fortran90
        | gimli::DW_LANG_Fortran95
        | gimli::DW_LANG_Fortran03
        | gimli::DW_LANG_Fortran08
        | gimli::DW_LANG_Julia
        | gimli::DW_LANG_Modula2
        | gimli::DW_LANG_Modula3
        | gimli::DW_LANG_PLI
        | gimli::DW_LANG_Pascal83 => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gimli::{EndianArcSlice, RunTimeEndian};

    /// (place, or static address; offset in the variable; piece size).
    type Decoded = (Option<Place>, Option<u64>, u64, Option<u64>);

    fn decode(bytes: &[u8], frame_base: FrameBase) -> Vec<Decoded> {
        let encoding = gimli::Encoding {
            format: gimli::Format::Dwarf32,
            version: 5,
            address_size: 8,
        };
        let expr = Expression(EndianArcSlice::new(Arc::from(bytes), RunTimeEndian::Little));
        pieces(&expr, encoding, frame_base, |i| Some(0x1000 + i.0 as u64))
            .into_iter()
            .map(|p| match p.place {
                PiecePlace::Place(place) => (Some(place), None, p.var_offset, p.size),
                PiecePlace::Addr(a) => (None, Some(a), p.var_offset, p.size),
            })
            .collect()
    }

    #[test]
    fn location_expressions() {
        use Base::{Cfa, Reg};
        use Place::{Mem, Reg as InReg};
        let cfa = FrameBase::Cfa;
        // DW_OP_reg5; DW_OP_regx 17.
        assert_eq!(decode(&[0x55], cfa), [(Some(InReg(5)), None, 0, None)]);
        assert_eq!(decode(&[0x90, 17], cfa), [(Some(InReg(17)), None, 0, None)]);
        // DW_OP_reg5; DW_OP_piece 8; DW_OP_reg4; DW_OP_piece 8.
        assert_eq!(
            decode(&[0x55, 0x93, 8, 0x54, 0x93, 8], cfa),
            [
                (Some(InReg(5)), None, 0, Some(8)),
                (Some(InReg(4)), None, 8, Some(8))
            ]
        );
        // DW_OP_piece 4 (optimised out); DW_OP_reg0; DW_OP_piece 4.
        assert_eq!(
            decode(&[0x93, 4, 0x50, 0x93, 4], cfa),
            [(Some(InReg(0)), None, 4, Some(4))]
        );
        // DW_OP_fbreg -24 under each frame base.
        assert_eq!(
            decode(&[0x91, 0x68], cfa),
            [(Some(Mem(Cfa, -24)), None, 0, None)]
        );
        assert_eq!(
            decode(&[0x91, 0x68], FrameBase::Reg(6, 16)),
            [(Some(Mem(Reg(6), -8)), None, 0, None)]
        );
        assert_eq!(decode(&[0x91, 0x68], FrameBase::Unknown), []);
        // DW_OP_fbreg -24; DW_OP_plus_uconst 8.
        assert_eq!(
            decode(&[0x91, 0x68, 0x23, 8], cfa),
            [(Some(Mem(Cfa, -16)), None, 0, None)]
        );
        // DW_OP_breg7 16.
        assert_eq!(
            decode(&[0x77, 0x10], cfa),
            [(Some(Mem(Reg(7), 16)), None, 0, None)]
        );
        // DW_OP_addr; DW_OP_addrx 2.
        let mut addr = vec![0x03];
        addr.extend_from_slice(&0x4010u64.to_le_bytes());
        assert_eq!(decode(&addr, cfa), [(None, Some(0x4010), 0, None)]);
        assert_eq!(decode(&[0xa1, 2], cfa), [(None, Some(0x1002), 0, None)]);
        // Values, not storage: DW_OP_breg5 0; DW_OP_stack_value /
        // DW_OP_entry_value(DW_OP_reg5); DW_OP_stack_value / DW_OP_lit0;
        // DW_OP_stack_value / DW_OP_implicit_value 1 0.
        for value in [
            &[0x75, 0, 0x9f][..],
            &[0xa3, 1, 0x55, 0x9f],
            &[0x30, 0x9f],
            &[0x9e, 1, 0],
        ] {
            assert_eq!(decode(value, cfa), [], "{value:x?}");
        }
        // A register is a whole location: DW_OP_reg5; DW_OP_plus_uconst 1.
        assert_eq!(decode(&[0x55, 0x23, 1], cfa), []);
        // DW_OP_bit_piece 3 0: not whole bytes.
        assert_eq!(decode(&[0x55, 0x9d, 3, 0], cfa), []);
        // Truncated: DW_OP_fbreg without its operand.
        assert_eq!(decode(&[0x91], cfa), []);
    }
}
