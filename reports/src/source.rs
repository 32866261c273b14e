//! The program's source files, as far as the report's locations name them (they come from the
//! DWARF line tables) and they are still on disk: for showing advice beside source lines.

use crate::Report;
use std::collections::BTreeMap;
use std::path::Path;

/// Files cut at this size are not shown (a generated file of megabytes).
const MAX_BYTES: u64 = 4 << 20;

/// Source files by path; `None` for a file the report names that could not be read.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    files: BTreeMap<String, Option<Vec<String>>>,
}

impl Sources {
    /// Reads every file the report's regions name.
    pub fn load(report: &Report) -> Sources {
        let mut files = BTreeMap::new();
        for path in referenced_files(report) {
            let text = read(Path::new(&path));
            files.insert(path, text);
        }
        Sources { files }
    }

    /// Sources from memory (for tests).
    pub fn from_texts(texts: &[(&str, &str)]) -> Sources {
        Sources {
            files: texts
                .iter()
                .map(|(p, t)| (p.to_string(), Some(t.lines().map(str::to_string).collect())))
                .collect(),
        }
    }

    /// The lines of `path`, when it was read.
    pub fn lines(&self, path: &str) -> Option<&[String]> {
        self.files.get(path)?.as_deref()
    }

    /// The text of a `file.c:17` location (the file by its name or path), trimmed.
    pub fn line_text(&self, short: &str) -> Option<&str> {
        let (file, line) = short.rsplit_once(':')?;
        let line: usize = line.trim().parse().ok()?;
        let lines = self.files.iter().find_map(|(path, lines)| {
            let name = path.rsplit('/').next().unwrap_or(path);
            (path == file || name == file)
                .then_some(lines.as_deref())
                .flatten()
        })?;
        lines
            .get(line.checked_sub(1)?)
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
    }
}

fn read(path: &Path) -> Option<Vec<String>> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > MAX_BYTES {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    Some(
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(str::to_string)
            .collect(),
    )
}

/// Every file a region's location, loop or statement names.
fn referenced_files(report: &Report) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in &report.regions {
        let loops = r.all_loops.iter().map(|l| &l.location);
        let statements = r.statements.iter().map(|s| &s.location);
        for l in std::iter::once(&r.location)
            .chain(loops)
            .chain(statements)
            .flatten()
        {
            if !out.contains(&l.file) {
                out.push(l.file.clone());
            }
        }
    }
    out
}
