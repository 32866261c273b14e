//! [`Symbolizer`]: runtime addresses of a whole process → file, symbol,
//! source location.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::{ElfFile, Frame, Loc, Mapping};

/// A runtime address resolved to the file mapped there.
#[derive(Debug, Clone, Copy)]
pub struct Resolved<'a> {
    /// The file (main executable or shared library).
    pub file: &'a ElfFile,
    /// Its load bias (`runtime = link-time + bias`).
    pub bias: u64,
    /// The address in the file's link-time address space.
    pub link_addr: u64,
}

struct Loaded {
    file: Arc<ElfFile>,
    bias: u64,
}

struct Module {
    /// Path as in the maps.
    path: PathBuf,
    is_main: bool,
    /// Opened on first use; `Some(None)` if opening failed.
    loaded: OnceLock<Option<Loaded>>,
}

/// Symbolizes runtime addresses of a traced process: the main executable
/// plus shared libraries, which are opened lazily (keyed by their path in
/// the maps) the first time an address inside them is asked about.
///
/// Results for addresses in the main executable come from the [`ElfFile`]
/// given to [`Symbolizer::new`]; its mappings are recognised by path (as
/// opened, or canonicalized). `Send + Sync`.
pub struct Symbolizer {
    main: Arc<ElfFile>,
    main_bias: Option<u64>,
    /// Sorted by start.
    maps: Vec<Mapping>,
    /// File-backed mappings: (start, end, module index), sorted by start.
    ranges: Vec<(u64, u64, usize)>,
    modules: Vec<Module>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("main", &self.main.path())
            .field("main_bias", &self.main_bias)
            .field("modules", &self.modules.len())
            .finish_non_exhaustive()
    }
}

fn strip_deleted(path: &Path) -> &Path {
    path.to_str()
        .and_then(|s| s.strip_suffix(" (deleted)"))
        .map_or(path, Path::new)
}

impl Symbolizer {
    /// A symbolizer for a process whose main executable is `main` and whose
    /// mappings (see [`crate::parse_proc_maps`]) are `maps`.
    pub fn new(main: ElfFile, maps: Vec<Mapping>) -> Symbolizer {
        let mut s = Symbolizer {
            main: Arc::new(main),
            main_bias: None,
            maps: Vec::new(),
            ranges: Vec::new(),
            modules: Vec::new(),
        };
        s.refresh(maps);
        s
    }

    /// Replace the mappings (e.g. after a `dlopen`). Files already opened are
    /// kept (their biases recomputed); new ones are opened lazily.
    pub fn refresh(&mut self, mut maps: Vec<Mapping>) {
        maps.sort_by_key(|m| m.start);
        let mut old: HashMap<PathBuf, Module> = self
            .modules
            .drain(..)
            .map(|m| (m.path.clone(), m))
            .collect();
        let main_canonical = self.main.canonical_path().map(Path::to_path_buf);
        let mut modules: Vec<Module> = Vec::new();
        let mut index: HashMap<PathBuf, usize> = HashMap::new();
        let mut ranges = Vec::new();
        for m in maps.iter().filter(|m| m.is_file()) {
            let Some(path) = m.path.as_ref() else {
                continue;
            };
            let idx = match index.get(path) {
                Some(&i) => i,
                None => {
                    let previous = old.remove(path);
                    let is_main = match &previous {
                        Some(p) => p.is_main,
                        None => {
                            path == self.main.path()
                                || Some(path) == main_canonical.as_ref()
                                || (main_canonical.is_some()
                                    && std::fs::canonicalize(strip_deleted(path)).ok()
                                        == main_canonical)
                        }
                    };
                    let loaded = OnceLock::new();
                    let reuse = if is_main {
                        Some(Some(self.main.clone()))
                    } else {
                        previous.and_then(|p| p.loaded.into_inner().map(|l| l.map(|l| l.file)))
                    };
                    if let Some(file) = reuse {
                        let value = file.and_then(|file| {
                            let bias = file.load_bias(&maps, path)?;
                            Some(Loaded { file, bias })
                        });
                        let _ = loaded.set(value);
                    }
                    modules.push(Module {
                        path: path.clone(),
                        is_main,
                        loaded,
                    });
                    index.insert(path.clone(), modules.len() - 1);
                    modules.len() - 1
                }
            };
            ranges.push((m.start, m.end, idx));
        }
        self.main_bias = if self.main.is_pie() {
            modules
                .iter()
                .filter(|m| m.is_main)
                .find_map(|m| m.loaded.get().and_then(|l| l.as_ref()).map(|l| l.bias))
        } else {
            Some(0)
        };
        self.maps = maps;
        self.ranges = ranges;
        self.modules = modules;
    }

    /// The main executable.
    pub fn main(&self) -> &ElfFile {
        &self.main
    }

    /// Load bias of the main executable (`Some(0)` when not PIE; `None` when
    /// it is PIE and not found in the mappings).
    pub fn main_bias(&self) -> Option<u64> {
        self.main_bias
    }

    /// The current mappings, sorted by start.
    pub fn maps(&self) -> &[Mapping] {
        &self.maps
    }

    /// The mapping containing runtime address `addr`.
    pub fn mapping_at(&self, addr: u64) -> Option<&Mapping> {
        let idx = self.maps.partition_point(|m| m.start <= addr);
        let m = self.maps.get(idx.checked_sub(1)?)?;
        m.contains(addr).then_some(m)
    }

    fn loaded<'a>(&'a self, module: &'a Module) -> Option<&'a Loaded> {
        module
            .loaded
            .get_or_init(|| {
                let file = ElfFile::open(strip_deleted(&module.path)).ok()?;
                let bias = file.load_bias(&self.maps, &module.path)?;
                Some(Loaded {
                    file: Arc::new(file),
                    bias,
                })
            })
            .as_ref()
    }

    /// The file mapped at runtime address `addr`, its bias and the
    /// link-time address. Opens a shared library on first use. Addresses of
    /// a non-PIE main executable resolve even without mappings.
    pub fn resolve(&self, addr: u64) -> Option<Resolved<'_>> {
        let idx = self.ranges.partition_point(|r| r.0 <= addr);
        if let Some(&(start, end, module)) = idx.checked_sub(1).and_then(|i| self.ranges.get(i)) {
            if start <= addr && addr < end {
                let loaded = self.loaded(self.modules.get(module)?)?;
                return Some(Resolved {
                    file: &loaded.file,
                    bias: loaded.bias,
                    link_addr: addr.wrapping_sub(loaded.bias),
                });
            }
        }
        let bias = self.main_bias?;
        let link_addr = addr.wrapping_sub(bias);
        self.main
            .segments()
            .iter()
            .any(|s| s.range().contains(&link_addr))
            .then_some(Resolved {
                file: &self.main,
                bias,
                link_addr,
            })
    }

    /// `name+0x1a` / `name` when a function symbol covers runtime address
    /// `addr`; `libfoo.so+0x1234` (file name and link-time address) when only
    /// the file is known; `0x7f…` otherwise.
    pub fn describe(&self, addr: u64) -> String {
        let Some(r) = self.resolve(addr) else {
            return format!("{addr:#x}");
        };
        if r.file.function_at(r.link_addr).is_some() {
            return r.file.describe(r.link_addr);
        }
        let name = r
            .file
            .path()
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("{name}+{:#x}", r.link_addr)
    }

    /// Source location of runtime address `addr`.
    pub fn location(&self, addr: u64) -> Option<Loc> {
        let r = self.resolve(addr)?;
        r.file.location(r.link_addr)
    }

    /// Frames (innermost first) at runtime address `addr`; see
    /// [`ElfFile::frames`].
    pub fn frames(&self, addr: u64) -> Vec<Frame> {
        self.resolve(addr)
            .map(|r| r.file.frames(r.link_addr))
            .unwrap_or_default()
    }

    /// Imported name for a PLT stub at runtime address `addr` (in any file).
    pub fn import_for_plt_stub(&self, addr: u64) -> Option<&str> {
        let r = self.resolve(addr)?;
        r.file.import_for_plt_stub(r.link_addr)
    }

    /// Imported name for the GOT slot at runtime address `slot` (in any
    /// file), e.g. the memory operand of a `call [rip+disp]` (`-fno-plt`).
    pub fn import_for_got_slot(&self, slot: u64) -> Option<&str> {
        let r = self.resolve(slot)?;
        r.file.import_for_got_slot(r.link_addr)
    }
}
