//! The program's source files, by the paths debug information gives.

use std::collections::HashMap;

/// Source files, each read once. A file that cannot be read (moved, never shipped) answers
/// nothing, and callers fall back to what debug information alone says. A file that is not
/// UTF-8 (Rodinia myocyte's `main.c`, Windows-1252 with a `\x92` in a comment) is read all
/// the same, its other bytes replaced: its lines and their code stay where they are.
#[derive(Default)]
pub struct SourceText {
    files: HashMap<String, Option<Vec<String>>>,
}

impl SourceText {
    /// Line `line` (from 1) of `file`, when the file can be read.
    pub fn line(&mut self, file: &str, line: u32) -> Option<&str> {
        if !self.files.contains_key(file) {
            let text = std::fs::read(file).ok().map(|bytes| {
                String::from_utf8_lossy(&bytes)
                    .lines()
                    .map(str::to_string)
                    .collect()
            });
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

#[cfg(test)]
mod tests {
    use super::SourceText;

    /// myocyte's main.c: Windows-1252 (`heart\x92s`) and CRLF line ends.
    #[test]
    fn files_not_in_utf8_are_read() {
        let dir = std::env::temp_dir().join(format!("polyprof-source-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("main.c");
        std::fs::write(
            &file,
            b"// the heart\x92s state\r\nint i;\r\n\tfor(i=0; i<n; i++){\r\n",
        )
        .unwrap();
        let mut s = SourceText::default();
        let path = file.to_string_lossy();
        assert_eq!(s.line(&path, 3), Some("\tfor(i=0; i<n; i++){"));
        assert!(s.line(&path, 1).is_some_and(|l| l.ends_with("s state")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
