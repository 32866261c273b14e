//! Checks made before the program starts, each failing with one plain sentence.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A problem with the program given on the command line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadProgram {
    #[error("{0}: file not found")]
    NotFound(String),
    #[error("{0} is a directory, not a program")]
    Directory(String),
    #[error("{0} is a script (it starts with #!): profile its interpreter or the real binary instead, e.g. `polyprof {1} {0}`")]
    Script(String, String),
    #[error("{0} is not executable: make it executable with `chmod +x {0}`")]
    NotExecutable(String),
    #[error("{0} is not an ELF executable")]
    NotElf(String),
    #[error("{0} is an ELF file for {1}; polyprof profiles x86-64 programs only")]
    NotX86_64(String, String),
    #[error("{0} cannot be read: {1}")]
    Unreadable(String, String),
}

/// Finds the file to run: a name with a slash is a path; a bare name is looked up in `PATH`,
/// then in the current directory.
pub fn resolve(program: &OsStr) -> Result<PathBuf, BadProgram> {
    let p = Path::new(program);
    let shown = p.display().to_string();
    if program.is_empty() {
        return Err(BadProgram::NotFound("''".into()));
    }
    if p.components().count() > 1 || p.is_absolute() {
        return if p.exists() {
            Ok(p.to_path_buf())
        } else {
            Err(BadProgram::NotFound(shown))
        };
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let cand = dir.join(p);
            if cand.is_file() && is_executable(&cand) {
                return Ok(cand);
            }
        }
    }
    let local = Path::new(".").join(p);
    if local.exists() {
        return Ok(local);
    }
    Err(BadProgram::NotFound(shown))
}

fn is_executable(p: &Path) -> bool {
    p.metadata()
        .map(|m| m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Checks that `path` is an x86-64 ELF executable polyprof can run, and opens it (its
/// separate debug file found as `opts` says).
pub fn check(path: &Path, opts: &symbols::OpenOptions) -> Result<symbols::ElfFile, BadProgram> {
    let shown = path.display().to_string();
    let meta = path
        .metadata()
        .map_err(|e| BadProgram::Unreadable(shown.clone(), e.to_string()))?;
    if meta.is_dir() {
        return Err(BadProgram::Directory(shown));
    }
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| BadProgram::Unreadable(shown.clone(), e.to_string()))?;
    let head = &head[..n];
    if head.starts_with(b"#!") {
        let line = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
        let interp = String::from_utf8_lossy(&line[2..])
            .split_whitespace()
            .next()
            .unwrap_or("/bin/sh")
            .to_string();
        return Err(BadProgram::Script(shown, interp));
    }
    if !head.starts_with(b"\x7fELF") {
        return Err(BadProgram::NotElf(shown));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(BadProgram::NotExecutable(shown));
    }
    symbols::ElfFile::open_with(path, opts).map_err(|e| match e {
        symbols::Error::NotX86_64 { machine, .. } => BadProgram::NotX86_64(shown, machine),
        symbols::Error::NotElf { .. } => BadProgram::NotElf(shown),
        other => BadProgram::Unreadable(shown, other.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn check(path: &Path) -> Result<symbols::ElfFile, BadProgram> {
        super::check(path, &symbols::OpenOptions::default())
    }

    #[test]
    fn classifies_bad_programs() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(matches!(
            check(&d.join("missing")),
            Err(BadProgram::Unreadable(..))
        ));
        assert!(matches!(check(d), Err(BadProgram::Directory(_))));
        let script = d.join("s.sh");
        fs::write(&script, "#!/usr/bin/env python3\nprint(1)\n").unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        match check(&script) {
            Err(e @ BadProgram::Script(..)) => {
                assert!(e.to_string().contains("polyprof /usr/bin/env"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        let text = d.join("t.txt");
        fs::write(&text, "hello").unwrap();
        fs::set_permissions(&text, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(check(&text), Err(BadProgram::NotElf(_))));
        let elf = d.join("elf");
        fs::copy("/bin/true", &elf).unwrap();
        fs::set_permissions(&elf, fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(check(&elf), Err(BadProgram::NotExecutable(_))));
        fs::set_permissions(&elf, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(check(&elf).is_ok());
    }

    #[test]
    fn resolves_bare_names_through_path() {
        let p = resolve(OsStr::new("true")).unwrap();
        assert!(p.is_absolute(), "{}", p.display());
        assert!(matches!(
            resolve(OsStr::new("./surely-not-here")),
            Err(BadProgram::NotFound(_))
        ));
        assert!(matches!(
            resolve(OsStr::new("surely-not-a-command-xyz")),
            Err(BadProgram::NotFound(_))
        ));
    }
}
