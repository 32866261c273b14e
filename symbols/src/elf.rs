//! [`ElfFile`]: one memory-mapped x86-64 ELF file and everything parsed
//! from it up front (symbols, imports, segments); DWARF is parsed lazily.

use std::collections::HashMap;
use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader, SectionHeader};
use object::{
    Endianness, Object, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationFlags,
    RelocationTarget, SectionKind, SymbolKind, SymbolSection,
};

use crate::dwarf::DwarfCache;
use crate::maps::Mapping;
use crate::plt::{decode_stubs, PltSection};
use crate::vars::{Sources, VarCache};
use crate::{demangle, Error, Frame, Loc, Variable};

/// A function symbol (from `.symtab`, `.dynsym`, or a synthetic `name@plt`
/// for a PLT stub).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionSym {
    /// Demangled name (C names as is, without any `@VERSION` suffix).
    pub name: String,
    /// Link-time start address.
    pub address: u64,
    /// Size from the symbol table (0 when unknown; such a symbol is taken to
    /// extend to the next symbol or the end of its section).
    pub size: u64,
}

/// A PT_LOAD program header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSegment {
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_memsz`.
    pub memsz: u64,
    /// `p_offset`.
    pub offset: u64,
    /// `p_filesz`.
    pub filesz: u64,
    /// `p_flags` (`PF_X` = 1, `PF_W` = 2, `PF_R` = 4).
    pub flags: u32,
}

impl LoadSegment {
    /// Whether the segment is executable.
    pub fn is_exec(&self) -> bool {
        self.flags & elf::PF_X != 0
    }

    /// Link-time address range of the segment in memory.
    pub fn range(&self) -> Range<u64> {
        self.vaddr..self.vaddr.saturating_add(self.memsz)
    }
}

/// An allocated section (one that occupies memory at run time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionInfo {
    /// Section name, e.g. `.text`.
    pub name: String,
    /// Link-time address.
    pub address: u64,
    /// Size in memory.
    pub size: u64,
    /// Whether the section holds code (`SHF_EXECINSTR`).
    pub exec: bool,
}

/// A PLT stub that jumps through the GOT slot of an imported symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PltStub {
    /// Link-time address of the stub's first byte.
    pub start: u64,
    /// One past its last byte.
    pub end: u64,
    /// Address of the GOT slot it jumps through.
    pub got_slot: u64,
    /// The imported symbol's (demangled) name.
    pub name: String,
}

/// An opened x86-64 ELF file (executable or shared library).
///
/// Symbols, imports and headers are parsed in [`ElfFile::open`]; DWARF is
/// parsed on the first [`ElfFile::location`] / [`ElfFile::frames`] call and
/// lookups are cached. All addresses are link-time addresses. The type is
/// `Send + Sync`.
pub struct ElfFile {
    path: PathBuf,
    canonical: Option<PathBuf>,
    map: Mmap,
    /// Separate debug file (found by build-id or `.gnu_debuglink`, or given).
    debug_map: Option<Mmap>,
    /// Its path.
    debug_path: Option<PathBuf>,
    /// The separate debug file has DWARF (it may hold only a symbol table).
    debug_dwarf: bool,
    own_debug: bool,
    is_pie: bool,
    entry: u64,
    segments: Vec<LoadSegment>,
    sections: Vec<SectionInfo>,
    has_symtab: bool,
    /// Sorted by address, one per address.
    functions: Vec<FunctionSym>,
    /// Effective end of `functions[i]`.
    ends: Vec<u64>,
    /// Data objects with a size (globals, statics), sorted by address.
    data: Vec<FunctionSym>,
    by_name: HashMap<String, u64>,
    got: HashMap<u64, String>,
    /// Sorted by start.
    plt: Vec<PltStub>,
    dwarf: DwarfCache,
    vars: VarCache,
}

impl std::fmt::Debug for ElfFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfFile")
            .field("path", &self.path)
            .field("is_pie", &self.is_pie)
            .field("entry", &format_args!("{:#x}", self.entry))
            .field("functions", &self.functions.len())
            .field("imports", &self.got.len())
            .finish_non_exhaustive()
    }
}

fn machine_name(e_machine: u16) -> String {
    match e_machine {
        elf::EM_386 => "x86".into(),
        elf::EM_X86_64 => "x86-64".into(),
        elf::EM_AARCH64 => "aarch64".into(),
        elf::EM_ARM => "arm".into(),
        elf::EM_RISCV => "riscv".into(),
        elf::EM_MIPS => "mips".into(),
        elf::EM_PPC => "powerpc".into(),
        elf::EM_PPC64 => "powerpc64".into(),
        elf::EM_S390 => "s390".into(),
        elf::EM_SPARC => "sparc".into(),
        elf::EM_SPARCV9 => "sparcv9".into(),
        elf::EM_LOONGARCH => "loongarch".into(),
        n => format!("e_machine {n}"),
    }
}

/// Memory-map a file.
#[allow(unsafe_code)]
fn map_file(file: &File) -> std::io::Result<Mmap> {
    // SAFETY: the mapping is read-only and private to this process. As with
    // every mmap-based ELF reader, another process truncating the file while
    // it is mapped could fault; polyprof only maps binaries it is profiling.
    unsafe { Mmap::map(file) }
}

/// Open and map `path`, checking the ELF magic and x86-64 machine.
fn map_elf(path: &Path) -> Result<Mmap, Error> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(io(std::io::Error::other("is a directory")));
    }
    if meta.len() < 4 {
        return Err(Error::NotElf {
            path: path.to_path_buf(),
        });
    }
    let map = map_file(&file).map_err(io)?;
    if map.get(..4) != Some(&elf::ELFMAG[..]) {
        return Err(Error::NotElf {
            path: path.to_path_buf(),
        });
    }
    let header = map.get(..20).ok_or_else(|| Error::Parse {
        path: path.to_path_buf(),
        msg: "truncated ELF header".into(),
    })?;
    // e_ident[EI_CLASS], e_ident[EI_DATA], e_machine.
    let class = header[4];
    let big = header[5] == elf::ELFDATA2MSB;
    let e_machine = if big {
        u16::from_be_bytes([header[18], header[19]])
    } else {
        u16::from_le_bytes([header[18], header[19]])
    };
    if class != elf::ELFCLASS64 || e_machine != elf::EM_X86_64 {
        let mut machine = machine_name(e_machine);
        if class != elf::ELFCLASS64 {
            machine.push_str(if e_machine == elf::EM_X86_64 {
                " (x32)"
            } else {
                " (32-bit)"
            });
        }
        return Err(Error::NotX86_64 {
            path: path.to_path_buf(),
            machine,
        });
    }
    Ok(map)
}

/// Whether an object file has DWARF line or info data.
fn has_dwarf<'d>(file: &impl Object<'d>) -> bool {
    [".debug_info", ".debug_line"].iter().any(|name| {
        file.section_by_name(name).is_some_and(|s| {
            s.kind() != SectionKind::UninitializedData
                && s.file_range().is_some_and(|(_, size)| size > 0)
        })
    })
}

/// Where [`ElfFile::open_with`] looks for a separate debug file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    /// Root of the separate debug files, as GDB's `debug-file-directory`: the file whose
    /// build-id is `xxyyyy...` is `ROOT/.build-id/xx/yyyy....debug` (Debian's `-dbgsym`
    /// packages install them there), and a `.gnu_debuglink` name is also looked up under
    /// `ROOT/<the file's directory>/`. Default: `/usr/lib/debug`.
    pub debug_root: PathBuf,
    /// A separate debug file to use instead of searching (checked against the build-id when
    /// both have one). Default: none.
    pub debug_file: Option<PathBuf>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            debug_root: PathBuf::from("/usr/lib/debug"),
            debug_file: None,
        }
    }
}

/// A separate debug file that was found: its mapping, its path, whether it has DWARF.
type DebugFile = (Mmap, PathBuf, bool);

/// The separate debug file: the one given, else the build-id path, then the debuglink paths.
/// A candidate must match the build-id (when both have one) and hold DWARF or a symbol table.
fn find_separate_debug(
    elf: &ElfFile64<'_>,
    path: &Path,
    canonical: Option<&Path>,
    opts: &OpenOptions,
) -> Option<DebugFile> {
    let build_id = elf.build_id().ok().flatten().filter(|id| id.len() >= 2);
    let mut candidates = Vec::new();
    if let Some(given) = &opts.debug_file {
        candidates.push(given.clone());
    } else {
        if let Some(id) = build_id {
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            candidates.push(
                opts.debug_root
                    .join(".build-id")
                    .join(&hex[..2])
                    .join(format!("{}.debug", &hex[2..])),
            );
        }
        if let Some((name, _crc)) = elf.gnu_debuglink().ok().flatten() {
            let name = Path::new(std::str::from_utf8(name).ok()?);
            let dir = canonical.unwrap_or(path).parent()?;
            candidates.push(dir.join(name));
            candidates.push(dir.join(".debug").join(name));
            if let Ok(rel) = dir.strip_prefix("/") {
                candidates.push(opts.debug_root.join(rel).join(name));
            }
        }
    }
    candidates.into_iter().find_map(|cand| {
        if Some(cand.as_path()) == canonical || cand == path {
            return None;
        }
        let map = map_elf(&cand).ok()?;
        let file = object::File::parse(&*map).ok()?;
        let matches = match (build_id, file.build_id().ok().flatten()) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        let dwarf = has_dwarf(&file);
        (matches && (dwarf || file.symbol_table().is_some())).then_some((map, cand, dwarf))
    })
}

/// Sort key among symbols at one address (smaller is better).
type Rank = (u8, usize, u8, usize);

/// Preference among symbols at one address: sized, then fewer leading
/// underscores (`puts` over `_IO_puts`), then global, weak, local, then
/// shorter.
fn rank(name: &str, size: u64, binding: u8) -> Rank {
    let bind = match binding {
        elf::STB_GLOBAL => 0,
        elf::STB_WEAK => 1,
        _ => 2,
    };
    let underscores = name.bytes().take_while(|&b| b == b'_').count();
    (u8::from(size == 0), underscores, bind, name.len())
}

/// Strip an `@VERSION` / `@@VERSION` suffix.
fn base_name(name: &str) -> &str {
    match name.find('@') {
        Some(i) if i > 0 => &name[..i],
        _ => name,
    }
}

/// The PT_LOAD segments.
fn load_segments(elf: &ElfFile64<'_, Endianness>) -> Vec<LoadSegment> {
    let endian = elf.endian();
    elf.elf_program_headers()
        .iter()
        .filter(|ph| ph.p_type(endian) == elf::PT_LOAD)
        .map(|ph| LoadSegment {
            vaddr: ph.p_vaddr(endian),
            memsz: ph.p_memsz(endian),
            offset: ph.p_offset(endian),
            filesz: ph.p_filesz(endian),
            flags: ph.p_flags(endian),
        })
        .collect()
}

/// The sections loaded into memory, with their addresses.
fn alloc_sections(elf: &ElfFile64<'_, Endianness>) -> Vec<SectionInfo> {
    let endian = elf.endian();
    elf.sections()
        .filter_map(|s| {
            let hdr = s.elf_section_header();
            let flags = hdr.sh_flags(endian);
            if flags & u64::from(elf::SHF_ALLOC) == 0 || s.address() == 0 {
                return None;
            }
            Some(SectionInfo {
                name: s.name().ok()?.to_string(),
                address: s.address(),
                size: s.size(),
                exec: flags & u64::from(elf::SHF_EXECINSTR) != 0,
            })
        })
        .collect()
}

/// What the symbol tables give: addresses by name, function candidates (address, size, name,
/// rank: one per address is kept, the best ranked) and data objects.
#[derive(Default)]
struct Symbols {
    by_name: HashMap<String, u64>,
    cands: Vec<(u64, u64, String, Rank)>,
    data: Vec<FunctionSym>,
}

impl Symbols {
    fn add<'d>(&mut self, sym: &impl ObjectSymbol<'d>) {
        let Ok(raw) = sym.name() else { return };
        if raw.is_empty() {
            return;
        }
        let in_section = matches!(sym.section(), SymbolSection::Section(_));
        if !(in_section || sym.section() == SymbolSection::Absolute) {
            return;
        }
        if matches!(sym.kind(), SymbolKind::Section | SymbolKind::File) {
            return;
        }
        let addr = sym.address();
        self.by_name.entry(raw.to_string()).or_insert(addr);
        let base = base_name(raw);
        if base != raw {
            self.by_name.entry(base.to_string()).or_insert(addr);
        }
        if sym.kind() == SymbolKind::Data && in_section && addr != 0 && sym.size() > 0 {
            self.data.push(FunctionSym {
                name: demangle(base),
                address: addr,
                size: sym.size(),
            });
        }
        if sym.kind() == SymbolKind::Text && in_section && addr != 0 {
            let name = demangle(base);
            if name != base {
                self.by_name.entry(name.clone()).or_insert(addr);
            }
            let binding = match sym.flags() {
                object::SymbolFlags::Elf { st_info, .. } => st_info >> 4,
                _ => 0,
            };
            let r = rank(base, sym.size(), binding);
            self.cands.push((addr, sym.size(), name, r));
        }
    }
}

/// Imports through the GOT: slot address to the imported function's name.
fn got_imports(elf: &ElfFile64<'_, Endianness>) -> HashMap<u64, String> {
    let mut got: HashMap<u64, String> = HashMap::new();
    if let (Some(relocs), Some(dynsyms)) = (elf.dynamic_relocations(), elf.dynamic_symbol_table()) {
        for (offset, reloc) in relocs {
            let RelocationFlags::Elf { r_type } = reloc.flags() else {
                continue;
            };
            if r_type != elf::R_X86_64_JUMP_SLOT && r_type != elf::R_X86_64_GLOB_DAT {
                continue;
            }
            let RelocationTarget::Symbol(index) = reloc.target() else {
                continue;
            };
            let Ok(sym) = dynsyms.symbol_by_index(index) else {
                continue;
            };
            match sym.name() {
                Ok(name) if !name.is_empty() => {
                    got.entry(offset)
                        .or_insert_with(|| demangle(base_name(name)));
                }
                _ => {}
            }
        }
    }
    got
}

/// The PLT stubs of the imports in `got`, by address.
fn plt_stubs(elf: &ElfFile64<'_, Endianness>, got: &HashMap<u64, String>) -> Vec<PltStub> {
    let endian = elf.endian();
    let mut plt: Vec<PltStub> = Vec::new();
    for name in [".plt", ".plt.sec", ".plt.got"] {
        let Some(section) = elf.section_by_name(name) else {
            continue;
        };
        let Ok(data) = section.data() else { continue };
        let sec = PltSection {
            address: section.address(),
            data,
            entsize: section.elf_section_header().sh_entsize(endian),
        };
        for stub in decode_stubs(&sec, &|slot| got.contains_key(&slot)) {
            if let Some(name) = got.get(&stub.got_slot) {
                plt.push(PltStub {
                    start: stub.start,
                    end: stub.end,
                    got_slot: stub.got_slot,
                    name: name.clone(),
                });
            }
        }
    }
    plt.sort_by_key(|s| s.start);
    plt.dedup_by_key(|s| s.start);
    plt
}

impl ElfFile {
    /// Open, map and parse an x86-64 ELF file; a separate debug file is looked up under
    /// `/usr/lib/debug` (see [`OpenOptions`]).
    pub fn open(path: &Path) -> Result<ElfFile, Error> {
        ElfFile::open_with(path, &OpenOptions::default())
    }

    /// Open, map and parse an x86-64 ELF file. When it has no DWARF or no symbol table, a
    /// separate debug file (see [`OpenOptions`]) provides them: Debian's stripped binaries keep
    /// both in `/usr/lib/debug/.build-id/`.
    pub fn open_with(path: &Path, opts: &OpenOptions) -> Result<ElfFile, Error> {
        let map = map_elf(path)?;
        let parse_err = |e: object::Error| Error::Parse {
            path: path.to_path_buf(),
            msg: e.to_string(),
        };
        let elf = ElfFile64::<Endianness>::parse(&*map).map_err(parse_err)?;
        let endian = elf.endian();
        let header = elf.elf_header();
        let is_pie = header.e_type(endian) == elf::ET_DYN;
        let entry = header.e_entry(endian);
        let canonical = std::fs::canonicalize(path).ok();

        let segments = load_segments(&elf);
        let sections = alloc_sections(&elf);

        let own_debug = has_dwarf(&elf);
        let own_symtab = elf.symbol_table().is_some();
        let debug = if own_debug && own_symtab && opts.debug_file.is_none() {
            None
        } else {
            find_separate_debug(&elf, path, canonical.as_deref(), opts)
        };
        let (debug_map, debug_path, debug_dwarf) = match debug {
            Some((m, p, d)) => (Some(m), Some(p), d),
            None => (None, None, false),
        };
        // The debug file's symbol table names what a stripped file's does not (the debug file
        // keeps every symbol with its link-time address).
        let debug_elf = match &debug_map {
            Some(m) if !own_symtab => ElfFile64::<Endianness>::parse(&**m).ok(),
            _ => None,
        };
        let debug_symbols = debug_elf.iter().flat_map(|d| d.symbols());
        let has_symtab = own_symtab
            || debug_elf
                .as_ref()
                .is_some_and(|d| d.symbol_table().is_some());

        let mut symbols = Symbols::default();
        for sym in elf
            .symbols()
            .chain(elf.dynamic_symbols())
            .chain(debug_symbols)
        {
            symbols.add(&sym);
        }
        let Symbols {
            by_name,
            mut cands,
            mut data,
        } = symbols;

        let got = got_imports(&elf);

        let plt = plt_stubs(&elf, &got);
        for stub in &plt {
            cands.push((
                stub.start,
                stub.end - stub.start,
                format!("{}@plt", stub.name),
                (2, 0, 3, 0),
            ));
        }

        // One function per address, best ranked.
        cands.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.3.cmp(&b.3)));
        cands.dedup_by_key(|c| c.0);
        let functions: Vec<FunctionSym> = cands
            .into_iter()
            .map(|(address, size, name, _)| FunctionSym {
                name,
                address,
                size,
            })
            .collect();
        let ends = compute_ends(&functions, &sections, &segments);

        Ok(ElfFile {
            path: path.to_path_buf(),
            canonical,
            map,
            debug_map,
            debug_path,
            debug_dwarf,
            own_debug,
            is_pie,
            entry,
            segments,
            sections,
            has_symtab,
            functions,
            ends,
            data: {
                data.sort_by_key(|d| d.address);
                data.dedup_by_key(|d| d.address);
                data
            },
            by_name,
            got,
            plt,
            dwarf: DwarfCache::default(),
            vars: VarCache::default(),
        })
    }

    /// The path this file was opened with.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file is position independent (`ET_DYN`: a PIE executable
    /// or a shared library), i.e. may be loaded with a non-zero bias.
    pub fn is_pie(&self) -> bool {
        self.is_pie
    }

    /// Link-time entry point (`e_entry`).
    pub fn entry(&self) -> u64 {
        self.entry
    }

    /// The PT_LOAD segments, in file order.
    pub fn segments(&self) -> &[LoadSegment] {
        &self.segments
    }

    /// Lowest PT_LOAD `p_vaddr` (0 when there is none).
    pub fn min_load_vaddr(&self) -> u64 {
        self.segments.iter().map(|s| s.vaddr).min().unwrap_or(0)
    }

    /// Allocated sections with a non-zero address.
    pub fn sections(&self) -> &[SectionInfo] {
        &self.sections
    }

    /// Link-time address range of the named allocated section
    /// (e.g. `.text`).
    pub fn section_range(&self, name: &str) -> Option<Range<u64>> {
        self.sections
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.address..s.address.saturating_add(s.size))
    }

    /// Whether the file has a `.symtab` (false for a stripped file; the
    /// `.dynsym` symbols are still used).
    pub fn has_symtab(&self) -> bool {
        self.has_symtab
    }

    /// Whether DWARF (`.debug_info` / `.debug_line` with content) is
    /// available, in the file itself or in a separate debug file found under
    /// `/usr/lib/debug` (by build-id) or through `.gnu_debuglink`.
    pub fn has_debug_info(&self) -> bool {
        self.own_debug || self.debug_dwarf
    }

    /// The separate debug file in use, when one was found (or given).
    pub fn debug_file(&self) -> Option<&Path> {
        self.debug_path.as_deref()
    }

    /// The file's GNU build-id (`.note.gnu.build-id`), in hexadecimal.
    pub fn build_id(&self) -> Option<String> {
        let elf = ElfFile64::<Endianness>::parse(&*self.map).ok()?;
        let id = elf.build_id().ok().flatten()?;
        Some(id.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// The file's bytes at link-time address `addr` (at most `len`, fewer at the end of the
    /// segment); `None` when no PT_LOAD segment holds file bytes there.
    pub fn bytes_at(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let seg = self
            .segments
            .iter()
            .find(|s| addr >= s.vaddr && addr - s.vaddr < s.filesz)?;
        let start = usize::try_from(seg.offset + (addr - seg.vaddr)).ok()?;
        let end = usize::try_from(seg.offset + seg.filesz).ok()?;
        self.map.get(start..end.min(start.saturating_add(len)))
    }

    /// Link-time address of a defined symbol (function or object) from
    /// `.symtab` or `.dynsym`, by its raw (mangled) name, its name without
    /// `@VERSION`, or a function's demangled name.
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).copied()
    }

    /// All function symbols, sorted by address, one per address (aliases
    /// resolved in favour of sized, global, less underscored names),
    /// including synthetic `name@plt` symbols for PLT stubs.
    pub fn functions(&self) -> &[FunctionSym] {
        &self.functions
    }

    /// The data object (global or static variable) containing link-time address `addr`.
    pub fn data_at(&self, addr: u64) -> Option<&FunctionSym> {
        let i = self.data.partition_point(|d| d.address <= addr);
        let d = self.data.get(i.checked_sub(1)?)?;
        (addr < d.address.saturating_add(d.size)).then_some(d)
    }

    /// The function containing link-time address `addr`, in O(log n).
    pub fn function_at(&self, addr: u64) -> Option<&FunctionSym> {
        let idx = self.functions.partition_point(|f| f.address <= addr);
        // The nearest symbol normally decides; a few earlier ones are
        // checked for enclosing (nested or overlapping) symbols.
        (idx.saturating_sub(8)..idx)
            .rev()
            .find(|&i| addr < self.ends[i])
            .map(|i| &self.functions[i])
    }

    /// `name+0x1a`, `name` (at its start) or `0x401000` when no function is
    /// known at link-time address `addr`.
    pub fn describe(&self, addr: u64) -> String {
        match self.function_at(addr) {
            Some(f) if addr == f.address => f.name.clone(),
            Some(f) => format!("{}+{:#x}", f.name, addr - f.address),
            None => format!("{addr:#x}"),
        }
    }

    /// Name of the symbol imported through the GOT slot at link-time address
    /// `slot` (from `R_X86_64_JUMP_SLOT` / `R_X86_64_GLOB_DAT` relocations).
    pub fn import_for_got_slot(&self, slot: u64) -> Option<&str> {
        self.got.get(&slot).map(String::as_str)
    }

    /// All imports: GOT slot address → imported (demangled) name.
    pub fn got_imports(&self) -> &HashMap<u64, String> {
        &self.got
    }

    /// The PLT stubs (`.plt`, `.plt.sec`, `.plt.got`), sorted by start.
    pub fn plt_stubs(&self) -> &[PltStub] {
        &self.plt
    }

    /// Name of the imported symbol whose PLT stub contains link-time address
    /// `addr` (normally the stub's first byte, the call target). PLT0 and
    /// the lazy-binding `push; jmp PLT0` halves have no name.
    pub fn import_for_plt_stub(&self, addr: u64) -> Option<&str> {
        let idx = self.plt.partition_point(|s| s.start <= addr);
        let stub = self.plt.get(idx.checked_sub(1)?)?;
        (addr < stub.end).then_some(stub.name.as_str())
    }

    fn debug_data(&self) -> Option<&[u8]> {
        if self.own_debug {
            Some(&self.map)
        } else if self.debug_dwarf {
            self.debug_map.as_deref()
        } else {
            None
        }
    }

    /// Source location (file:line) of link-time address `addr`, from DWARF.
    /// Cached; `None` without debug info or for malformed DWARF.
    pub fn location(&self, addr: u64) -> Option<Loc> {
        self.dwarf.location(self.debug_data()?, addr)
    }

    /// The frames at link-time address `addr`, innermost (inlined) first,
    /// ending with the real (out-of-line) function; callers' locations are
    /// call sites. A frame without a DWARF function name gets the ELF
    /// symbol's name. Without DWARF: one frame from the symbol table (no
    /// location), or none when no symbol covers `addr`.
    pub fn frames(&self, addr: u64) -> Vec<Frame> {
        let mut frames = match self.debug_data() {
            Some(data) => self.dwarf.frames(data, addr),
            None => Vec::new(),
        };
        let symbol = self.function_at(addr).map(|f| f.name.clone());
        match frames.last_mut() {
            Some(last) if last.function.is_none() => last.function = symbol,
            Some(_) => {}
            None => {
                if symbol.is_some() {
                    frames.push(Frame {
                        function: symbol,
                        location: None,
                    });
                }
            }
        }
        frames
    }

    fn var_sources(&self) -> Sources<'_> {
        Sources {
            main: &self.map,
            debug: self.debug_data(),
            dwarf: &self.dwarf,
        }
    }

    /// The source variable held in DWARF register `reg` (see
    /// [`crate::dwarf_register`]) at link-time `pc`: a local, a parameter,
    /// or one of an inlined function, whose location at `pc`
    /// (`DW_OP_regN` / `DW_OP_regx`, alone or as a `DW_OP_piece`) is that
    /// register. The innermost scope wins.
    ///
    /// Location ranges hold *before* the instruction at their start
    /// executes, and gcc starts a register's range just after the
    /// instruction that writes it: ask at an instruction that reads the
    /// register (or, for the writer itself, at the address that follows
    /// it). `None` without DWARF or when no variable is there.
    pub fn variable_in_register(&self, pc: u64, reg: u16) -> Option<Variable> {
        self.vars.variable_in_register(&self.var_sources(), pc, reg)
    }

    /// The local variables and parameters visible somewhere in the link-time range
    /// `[lo, hi)`: those whose declaring scope's ranges meet it (see [`Variable::scope`]),
    /// with or without a location there, outer scopes' included, inlined functions' too.
    /// Empty without DWARF.
    pub fn locals_within(&self, lo: u64, hi: u64) -> Vec<Variable> {
        self.vars.locals_within(&self.var_sources(), lo, hi)
    }

    /// The source language of the compilation unit holding link-time address `pc`, from
    /// DWARF (`None` without debug information).
    pub fn language(&self, pc: u64) -> Option<crate::Language> {
        self.vars.language_at(&self.var_sources(), pc)
    }

    /// The source variable whose frame slot holds the address
    /// `base + disp` at link-time `pc`, where `base` is the DWARF number of
    /// the memory operand's base register (`rbp` = 6 or `rsp` = 7, see
    /// [`crate::regs`]) and `disp` its displacement. For an indexed operand
    /// (`[rbp+rax*4-0x50]`) pass the displacement alone to name the array
    /// (offset 0 is then where the displacement points), or add
    /// index × scale when the index's value is known.
    ///
    /// Statically: the CFA rule at `pc` (`.eh_frame`, else `.debug_frame`)
    /// turns `base + disp` into a CFA offset when the rule is
    /// `CFA = base + k`, matched against variables at `DW_OP_fbreg` (frame
    /// base `DW_OP_call_frame_cfa`, gcc's; a register frame base, clang's,
    /// matches that register directly, as `DW_OP_bregN` locations do).
    /// A variable matches when the address falls inside it (its type's
    /// size; exactly its start when the size is unknown); the innermost
    /// scope wins, and [`Variable::offset`] tells where in the variable the
    /// address falls. `None` when the CFA rule is an expression (a
    /// realigned stack) and nothing matches directly.
    pub fn stack_variable(&self, pc: u64, base: u16, disp: i64) -> Option<Variable> {
        self.vars
            .stack_variable(&self.var_sources(), pc, base, disp)
    }

    /// The global or static variable (`DW_OP_addr`, including `static`
    /// locals, which the symbol table names `name.1234`) whose storage
    /// contains link-time address `addr`, from DWARF. The first call indexes
    /// every compilation unit.
    pub fn global_variable(&self, addr: u64) -> Option<Variable> {
        self.vars.global_variable(&self.var_sources(), addr)
    }

    /// Load bias of this file in a process: `runtime = link-time + bias`.
    ///
    /// `0` for a non-PIE (`ET_EXEC`) file. For `ET_DYN`, the file's mappings
    /// are those whose path is `path_in_maps` (or, if none is, whose
    /// canonicalized path is this file's); the lowest one whose file offset
    /// falls in a PT_LOAD segment gives
    /// `bias = start - (p_vaddr - p_offset + offset)`. `None` when the file
    /// is not mapped.
    pub fn load_bias(&self, maps: &[Mapping], path_in_maps: &Path) -> Option<u64> {
        if !self.is_pie {
            return Some(0);
        }
        let mut mine: Vec<&Mapping> = maps
            .iter()
            .filter(|m| m.path.as_deref() == Some(path_in_maps))
            .collect();
        if mine.is_empty() {
            if let Some(canonical) = &self.canonical {
                mine = maps
                    .iter()
                    .filter(|m| {
                        m.is_file()
                            && m.path.as_deref().is_some_and(|p| {
                                p == canonical
                                    || std::fs::canonicalize(p).ok().as_ref() == Some(canonical)
                            })
                    })
                    .collect();
            }
        }
        mine.sort_by_key(|m| m.start);
        mine.iter().find_map(|m| self.bias_from_mapping(m))
    }

    /// Bias implied by one mapping of this file, if its offset lies in a
    /// PT_LOAD segment.
    pub(crate) fn bias_from_mapping(&self, m: &Mapping) -> Option<u64> {
        let seg = self.segments.iter().find(|s| {
            let page_start = s.offset & !0xfff;
            page_start <= m.offset && m.offset < s.offset.saturating_add(s.filesz.max(1))
        })?;
        let vaddr_at = seg.vaddr.wrapping_sub(seg.offset).wrapping_add(m.offset);
        Some(m.start.wrapping_sub(vaddr_at))
    }

    /// Canonical path of the file, when it could be resolved at open time.
    pub fn canonical_path(&self) -> Option<&Path> {
        self.canonical.as_deref()
    }
}

/// Effective end of each function: `address + size`, or for size-0 symbols
/// the next symbol's address bounded by the end of the containing section
/// (or segment).
fn compute_ends(
    functions: &[FunctionSym],
    sections: &[SectionInfo],
    segments: &[LoadSegment],
) -> Vec<u64> {
    functions
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if f.size > 0 {
                return f.address.saturating_add(f.size);
            }
            let container_end = sections
                .iter()
                .filter(|s| s.exec)
                .map(|s| s.address..s.address.saturating_add(s.size))
                .chain(segments.iter().map(LoadSegment::range))
                .find(|r| r.contains(&f.address))
                .map(|r| r.end);
            let next = functions.get(i + 1).map(|n| n.address);
            match (next, container_end) {
                (Some(n), Some(e)) => n.min(e),
                (Some(n), None) => n,
                (None, Some(e)) => e,
                (None, None) => f.address.saturating_add(1),
            }
        })
        .collect()
}
