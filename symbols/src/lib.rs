//! Symbol and debug-information queries on x86-64 ELF files for polyprof.
//!
//! This crate is sans-IO apart from opening (memory-mapping) ELF files: it
//! never touches a traced process. It answers, for an executable or a shared
//! library:
//!
//! * function symbols from `.symtab` and `.dynsym` (demangled), lookup of the
//!   function containing an address and of a symbol's address by name
//!   ([`ElfFile::function_at`], [`ElfFile::describe`],
//!   [`ElfFile::symbol_address`]);
//! * imported-symbol names for GOT slots and PLT stubs
//!   ([`ElfFile::import_for_got_slot`], [`ElfFile::import_for_plt_stub`]);
//! * DWARF source locations and inlined frames
//!   ([`ElfFile::location`], [`ElfFile::frames`]);
//! * the source variables behind a register, a frame slot or a static
//!   address at a pc ([`ElfFile::variable_in_register`],
//!   [`ElfFile::stack_variable`], [`ElfFile::global_variable`]);
//! * header facts (PIE, entry point, PT_LOAD segments) and the load bias of
//!   the file in a process, from the text of `/proc/PID/maps`
//!   ([`parse_proc_maps`], [`ElfFile::load_bias`]).
//!
//! All addresses taken and returned by [`ElfFile`] are link-time addresses
//! (as in the file); `runtime = link-time + bias`. [`Loaded`] pairs the executable with its
//! bias and answers by runtime address: the one place the bias is applied. [`Symbolizer`] works on
//! runtime addresses of a whole process (main executable plus shared
//! libraries).
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod demangle;
mod dwarf;
mod elf;
mod error;
mod loaded;
mod maps;
mod plt;
mod source;
mod symbolizer;
mod vars;

#[cfg(test)]
mod tests;

pub use demangle::demangle;
pub use elf::{ElfFile, FunctionSym, LoadSegment, OpenOptions, PltStub, SectionInfo};
pub use error::Error;
pub use loaded::{LinkAddr, Loaded};
pub use maps::{parse_proc_maps, read_proc_maps, Mapping};
pub use source::SourceText;
pub use symbolizer::{Resolved, Symbolizer};
pub use vars::{dwarf_register, dwarf_register_name, regs, Language, Variable, VariableKind};

use std::fmt;

/// A source location: file and line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Loc {
    /// Path of the source file as recorded in DWARF, joined with the
    /// compilation directory when it is relative.
    pub file: String,
    /// 1-based line number; 0 when DWARF gives a file but no line.
    pub line: u32,
}

impl Loc {
    /// Whether the file is a toolchain's or a dependency's source rather than the program's
    /// own: Rust's standard library (`/rustc/<hash>/library/...`, or a local toolchain's
    /// `rust-src`), crates from the cargo registry, system and compiler headers (C++'s
    /// `<vector>`). Such frames are inlined into the program's code; the user reads their
    /// call sites instead.
    pub fn is_library(&self) -> bool {
        let f = self.file.as_str();
        [
            "/rustc/",
            "/usr/include/",
            "/usr/lib/",
            "/usr/local/include/",
        ]
        .iter()
        .any(|p| f.starts_with(p))
            || [
                "/.cargo/registry/",
                "/.rustup/toolchains/",
                "/lib/rustlib/src/",
            ]
            .iter()
            .any(|p| f.contains(p))
    }

    /// `file.c:12`: the file's name without its directories, as reports show it.
    pub fn short(&self) -> String {
        let name = self.file.rsplit('/').next().unwrap_or(&self.file);
        format!("{name}:{}", self.line)
    }
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// One (possibly inlined) frame at an address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Demangled function name, when known.
    pub function: Option<String>,
    /// Source location inside that function (for an inlined frame's callers:
    /// the call site), when known.
    pub location: Option<Loc>,
}
