//! The executable as loaded in the traced process. The engine reports runtime addresses
//! (plain `u64`); the ELF file and its DWARF speak link-time addresses ([`LinkAddr`]). The
//! load bias between them (`runtime = link-time + bias`) is applied here, in one place.

use crate::{ElfFile, Frame, FunctionSym, Loc, Variable};
use std::fmt;

/// A link-time address: as in the ELF file, its DWARF, and `objdump`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkAddr(pub u64);

impl fmt::Display for LinkAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

impl fmt::LowerHex for LinkAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::LowerHex::fmt(&self.0, f)
    }
}

/// An executable and its load bias in the traced process: queries by runtime address.
#[derive(Clone, Copy, Debug)]
pub struct Loaded<'a> {
    /// The executable's file.
    pub exe: &'a ElfFile,
    /// `runtime = link-time + bias` (0 for a non-PIE executable).
    pub bias: u64,
}

impl<'a> Loaded<'a> {
    /// `exe` loaded at `bias`.
    pub fn new(exe: &'a ElfFile, bias: u64) -> Loaded<'a> {
        Loaded { exe, bias }
    }

    /// The link-time address of runtime address `pc`.
    pub fn link(&self, pc: u64) -> LinkAddr {
        LinkAddr(pc.wrapping_sub(self.bias))
    }

    /// The runtime address of link-time address `a`.
    pub fn runtime(&self, a: LinkAddr) -> u64 {
        a.0.wrapping_add(self.bias)
    }

    /// The source location of `pc`.
    pub fn location(&self, pc: u64) -> Option<Loc> {
        self.exe.location(self.link(pc).0)
    }

    /// The (possibly inlined) frames at `pc`, innermost first.
    pub fn frames(&self, pc: u64) -> Vec<Frame> {
        self.exe.frames(self.link(pc).0)
    }

    /// `function+0x12` for `pc`.
    pub fn describe(&self, pc: u64) -> String {
        self.exe.describe(self.link(pc).0)
    }

    /// The function holding `pc`.
    pub fn function_at(&self, pc: u64) -> Option<&'a FunctionSym> {
        self.exe.function_at(self.link(pc).0)
    }

    /// The imported function's name when `pc` is in a PLT stub.
    pub fn import_for_plt_stub(&self, pc: u64) -> Option<&'a str> {
        self.exe.import_for_plt_stub(self.link(pc).0)
    }

    /// The file's bytes at `pc` (code and initialised data), when it maps them.
    pub fn bytes_at(&self, pc: u64, len: usize) -> Option<&'a [u8]> {
        self.exe.bytes_at(self.link(pc).0, len)
    }

    /// `file.c:12` for `pc`: the innermost frame in the program's own source (library code
    /// inlined into it is named by its call site, see [`Loc::is_library`]), or the function's
    /// name without line information (never line 0), or `function+0x1a` without a name.
    pub fn source_line(&self, pc: u64) -> String {
        let frames = self.frames(pc);
        let lined = || {
            frames
                .iter()
                .filter_map(|f| f.location.as_ref())
                .filter(|l| l.line > 0)
        };
        if let Some(l) = lined().find(|l| !l.is_library()).or_else(|| lined().next()) {
            return l.short();
        }
        if let Some(l) = self.location(pc).filter(|l| l.line > 0) {
            return l.short();
        }
        match frames.last().and_then(|f| f.function.clone()) {
            Some(name) => name,
            None => self.describe(pc),
        }
    }

    /// Whether `pc` is in the named section (`.plt`).
    pub fn in_section(&self, name: &str, pc: u64) -> bool {
        self.exe
            .section_range(name)
            .is_some_and(|r| r.contains(&self.link(pc).0))
    }

    /// The data symbol holding `addr` and how far into it `addr` is.
    pub fn data_at(&self, addr: u64) -> Option<(&'a FunctionSym, u64)> {
        let link = self.link(addr).0;
        let d = self.exe.data_at(link)?;
        Some((d, link - d.address))
    }

    /// See [`ElfFile::variable_in_register`].
    pub fn variable_in_register(&self, pc: u64, reg: u16) -> Option<Variable> {
        self.exe.variable_in_register(self.link(pc).0, reg)
    }

    /// See [`ElfFile::language`].
    pub fn language(&self, pc: u64) -> Option<crate::Language> {
        self.exe.language(self.link(pc).0)
    }

    /// See [`ElfFile::stack_variable`].
    pub fn stack_variable(&self, pc: u64, base: u16, disp: i64) -> Option<Variable> {
        self.exe.stack_variable(self.link(pc).0, base, disp)
    }

    /// See [`ElfFile::global_variable`].
    pub fn global_variable(&self, addr: u64) -> Option<Variable> {
        self.exe.global_variable(self.link(addr).0)
    }

    /// The local variables and parameters visible at `pc`, innermost scope first (see
    /// [`ElfFile::locals_within`]).
    pub fn locals_at(&self, pc: u64) -> Vec<Variable> {
        let at = self.link(pc).0;
        let mut vars = self.exe.locals_within(at, at + 1);
        let span = |v: &Variable| v.scope.iter().map(|&(b, e)| e - b).sum::<u64>();
        vars.sort_by_key(span);
        vars
    }
}
