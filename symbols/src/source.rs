//! The program's source files, by the paths debug information gives.

use std::collections::HashMap;

/// Source files, each read once. A file that cannot be read (moved, never shipped) answers
/// nothing, and callers fall back to what debug information alone says.
#[derive(Default)]
pub struct SourceText {
    files: HashMap<String, Option<Vec<String>>>,
}

impl SourceText {
    /// Line `line` (from 1) of `file`, when the file can be read.
    pub fn line(&mut self, file: &str, line: u32) -> Option<&str> {
        if !self.files.contains_key(file) {
            let text = std::fs::read_to_string(file)
                .ok()
                .map(|t| t.lines().map(str::to_string).collect());
            self.files.insert(file.to_string(), text);
        }
        self.files
            .get(file)?
            .as_ref()?
            .get((line as usize).checked_sub(1)?)
            .map(String::as_str)
    }

    /// Whether the source line of link-time `pc` in `exe` can be read.
    pub fn readable_at(&mut self, exe: &crate::ElfFile, pc: u64) -> bool {
        exe.location(pc)
            .is_some_and(|loc| self.line(&loc.file, loc.line).is_some())
    }
}
