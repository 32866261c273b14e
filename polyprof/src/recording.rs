//! The recording an output directory keeps, so that `polyprof report DIR` can write every
//! report again, with other options, without running the program.
//!
//! What is kept is the event recording itself (the runner's compact encoding: about 0.06
//! bytes per instruction on affine loops, a few bytes on irregular code): every report option
//! applies after it, including `--dump-events` and `--dump-deps`, which need the events
//! themselves. Folded streams would be smaller on irregular code, but would fix the folding
//! and dependence options, and tie the format to the back end's internal types.
//!
//! `DIR/recording/` holds:
//! - `run.json`: [`RunInfo`], what the reports need from the run besides its events, with
//!   the format numbers checked when it is read;
//! - `events`: the event recording (`ptrace_runner::record`);
//! - `program`: a copy of the executable (symbols, lines, code bytes), and `program.debug`,
//!   the separate debug file it was named from, if any: a recording stays readable after the
//!   program is rebuilt or removed.
//!
//! `run.json` is written last: a recording without it did not finish.

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Version of the recording's layout and of [`RunInfo`]; bump it on any change that an older
/// polyprof would misread.
pub const FORMAT: u32 = 1;

/// The recording's directory inside an output directory.
pub const DIR: &str = "recording";
const RUN: &str = "run.json";
const EVENTS: &str = "events";
const PROGRAM: &str = "program";
const DEBUG: &str = "program.debug";

/// A signal that killed the program, as the kernel described it.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Fault {
    pub signo: i32,
    /// Runtime address where the program stood.
    pub pc: u64,
    /// `si_code`.
    pub code: i32,
    /// The faulting address, for a fault.
    pub addr: Option<u64>,
}

impl From<ptrace_runner::SignalInfo> for Fault {
    fn from(s: ptrace_runner::SignalInfo) -> Fault {
        Fault {
            signo: s.signo,
            pc: s.pc,
            code: s.code,
            addr: s.addr,
        }
    }
}

impl Fault {
    pub fn info(&self) -> ptrace_runner::SignalInfo {
        ptrace_runner::SignalInfo {
            signo: self.signo,
            pc: self.pc,
            code: self.code,
            addr: self.addr,
        }
    }
}

/// `run.json`: the run as the reports describe it, and what reading the events needs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunInfo {
    /// [`FORMAT`] of the polyprof that wrote it.
    pub format: u32,
    /// `ptrace_runner::record::FORMAT` of the events' encoding.
    pub events_format: u32,
    /// Version of the polyprof that wrote it.
    pub polyprof_version: String,
    /// Events in `events`.
    pub events: u64,
    /// The program as given on the command line (the flame graph's title).
    pub argv0: String,
    /// report.json's `program` and `trace` (`trace.native_cost` without its per-function
    /// costs, which come from the analysis).
    pub program: reports::Program,
    pub trace: reports::Trace,
    /// Runtime address minus link-time address of the executable.
    pub load_bias: u64,
    /// The signal that killed the program, when one did, with its fault address.
    pub fault: Option<Fault>,
    /// polyprof's exit status for this run: the program's, or 128 + the signal that
    /// interrupted polyprof.
    pub exit_status: i32,
    /// The executable's GNU build-id, when it has one.
    pub build_id: Option<String>,
    /// Whether `program.debug` was kept.
    pub debug_file: bool,
}

/// Paths of a recording.
pub struct Paths {
    pub dir: PathBuf,
}

impl Paths {
    pub fn new(out_dir: &Path) -> Paths {
        Paths {
            dir: out_dir.join(DIR),
        }
    }
    pub fn run(&self) -> PathBuf {
        self.dir.join(RUN)
    }
    pub fn events(&self) -> PathBuf {
        self.dir.join(EVENTS)
    }
    pub fn program(&self) -> PathBuf {
        self.dir.join(PROGRAM)
    }
    pub fn debug(&self) -> PathBuf {
        self.dir.join(DEBUG)
    }
}

/// Whether `dir` holds polyprof's outputs (a recording or a report).
fn is_output_dir(dir: &Path) -> bool {
    dir.join(DIR).is_dir() || dir.join("report.json").is_file()
}

/// `DIR.old` for `DIR`.
fn old_name(dir: &Path) -> Option<PathBuf> {
    let mut name = dir.file_name()?.to_os_string();
    name.push(".old");
    Some(dir.with_file_name(name))
}

/// Makes `dir` ready for a new run: created if missing; an earlier run's output is kept as
/// `DIR.old` (replacing an older `DIR.old`), as perf keeps perf.data. Returns where the
/// earlier output went. A directory polyprof did not write is refused rather than moved.
pub fn prepare_output(dir: &Path) -> Result<Option<PathBuf>, String> {
    let shown = dir.display();
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create the output directory {shown}: {e}"))?;
            return Ok(None);
        }
        Err(e) => return Err(format!("cannot use the output directory {shown}: {e}")),
        Ok(m) if !m.is_dir() => {
            return Err(format!(
                "the output directory {shown} exists and is not a directory: choose another -o"
            ))
        }
        Ok(_) => {}
    }
    let empty = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read the output directory {shown}: {e}"))?
        .next()
        .is_none();
    if empty {
        return Ok(None);
    }
    if !is_output_dir(dir) {
        return Err(format!(
            "the output directory {shown} already holds files polyprof did not write: choose \
             another -o (an earlier polyprof output would be kept as {shown}.old)"
        ));
    }
    let old = old_name(dir)
        .ok_or_else(|| format!("cannot keep the earlier output {shown}: choose another -o"))?;
    if std::fs::symlink_metadata(&old).is_ok() {
        if !is_output_dir(&old) {
            return Err(format!(
                "{} exists and is not a polyprof output directory: move it away, or choose \
                 another -o",
                old.display()
            ));
        }
        std::fs::remove_dir_all(&old)
            .map_err(|e| format!("cannot remove {}: {e}", old.display()))?;
    }
    std::fs::rename(dir, &old).map_err(|e| {
        format!(
            "cannot keep the earlier output {shown} as {}: {e}",
            old.display()
        )
    })?;
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the output directory {shown}: {e}"))?;
    Ok(Some(old))
}

/// Starts a recording in `out_dir`: copies the executable (and its separate debug file) and
/// creates the events file, opened for the recorder.
pub fn start(out_dir: &Path, exe: &symbols::ElfFile) -> anyhow::Result<std::fs::File> {
    let paths = Paths::new(out_dir);
    std::fs::create_dir_all(&paths.dir)
        .with_context(|| format!("creating {}", paths.dir.display()))?;
    std::fs::copy(exe.path(), paths.program()).with_context(|| {
        format!(
            "copying {} into {}",
            exe.path().display(),
            paths.dir.display()
        )
    })?;
    if let Some(debug) = exe.debug_file() {
        std::fs::copy(debug, paths.debug())
            .with_context(|| format!("copying {} into {}", debug.display(), paths.dir.display()))?;
    }
    let events = paths.events();
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&events)
        .with_context(|| format!("creating {}", events.display()))
}

/// Finishes a recording: writes `run.json`, whole or not at all (a temporary file renamed):
/// from then on, `polyprof report` can redo every report, whenever polyprof is killed.
pub fn finish(out_dir: &Path, info: &RunInfo) -> anyhow::Result<()> {
    let path = Paths::new(out_dir).run();
    let mut text = serde_json::to_string_pretty(info)?;
    text.push('\n');
    reports::write_file(&path, |w| w.write_all(text.as_bytes()))?;
    Ok(())
}

/// A recording read back.
pub struct Loaded {
    pub info: RunInfo,
    pub exe: symbols::ElfFile,
    pub recording: ptrace_runner::record::Recording,
}

/// Why a recording cannot be read: one sentence each.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}: no recording here ({1} not found): record with `polyprof record PROGRAM` or `polyprof PROGRAM`")]
    Missing(String, String),
    #[error("{0}: the recording did not finish ({1} is missing): record the program again")]
    Unfinished(String, String),
    #[error("{0} was written by polyprof {1} in recording format {2}.{3}; this polyprof ({4}) reads format {5}.{6}: record the program again, or report with that version")]
    Format(String, String, u32, u32, String, u32, u32),
    #[error("{0} cannot be read: {1}")]
    Unreadable(String, String),
}

/// Reads the recording in `out_dir`, checking its format numbers.
pub fn load(out_dir: &Path) -> Result<Loaded, LoadError> {
    let paths = Paths::new(out_dir);
    let shown = out_dir.display().to_string();
    let run = paths.run();
    if !paths.dir.is_dir() {
        return Err(LoadError::Missing(shown, paths.dir.display().to_string()));
    }
    let text = match std::fs::read_to_string(&run) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LoadError::Unfinished(shown, run.display().to_string()))
        }
        Err(e) => {
            return Err(LoadError::Unreadable(
                run.display().to_string(),
                e.to_string(),
            ))
        }
    };
    // The format numbers first: a newer layout may not parse as this one.
    #[derive(Deserialize)]
    struct Header {
        format: u32,
        events_format: u32,
        #[serde(default)]
        polyprof_version: String,
    }
    let header: Header = serde_json::from_str(&text)
        .map_err(|e| LoadError::Unreadable(run.display().to_string(), e.to_string()))?;
    if header.format != FORMAT || header.events_format != ptrace_runner::record::FORMAT {
        return Err(LoadError::Format(
            paths.dir.display().to_string(),
            header.polyprof_version,
            header.format,
            header.events_format,
            env!("CARGO_PKG_VERSION").to_string(),
            FORMAT,
            ptrace_runner::record::FORMAT,
        ));
    }
    let info: RunInfo = serde_json::from_str(&text)
        .map_err(|e| LoadError::Unreadable(run.display().to_string(), e.to_string()))?;
    let opts = symbols::OpenOptions {
        // Only the copy kept with the recording: what the run was named from.
        debug_root: paths.dir.join("no-debug-root"),
        debug_file: info.debug_file.then(|| paths.debug()),
    };
    let program = paths.program();
    let exe = symbols::ElfFile::open_with(&program, &opts)
        .map_err(|e| LoadError::Unreadable(program.display().to_string(), e.to_string()))?;
    let events = paths.events();
    let recording = ptrace_runner::record::Recording::open(&events, info.events)
        .map_err(|e| LoadError::Unreadable(events.display().to_string(), e.to_string()))?;
    Ok(Loaded {
        info,
        exe,
        recording,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_output_is_kept_as_old() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("out");
        assert_eq!(prepare_output(&out), Ok(None));
        assert!(out.is_dir());
        // Empty: used as it is.
        assert_eq!(prepare_output(&out), Ok(None));
        std::fs::write(out.join("report.json"), "{}").unwrap();
        let old = tmp.path().join("out.old");
        assert_eq!(prepare_output(&out), Ok(Some(old.clone())));
        assert!(old.join("report.json").is_file());
        assert!(out.is_dir() && !out.join("report.json").exists());
        // Again: the older .old goes.
        std::fs::create_dir(out.join(DIR)).unwrap();
        assert_eq!(prepare_output(&out), Ok(Some(old.clone())));
        assert!(old.join(DIR).is_dir() && !old.join("report.json").exists());
    }

    #[test]
    fn foreign_directories_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("mine");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("thesis.tex"), "precious").unwrap();
        let e = prepare_output(&out).unwrap_err();
        assert!(e.contains("polyprof did not write"), "{e}");
        assert!(out.join("thesis.tex").is_file());
        let file = tmp.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert!(prepare_output(&file)
            .unwrap_err()
            .contains("not a directory"));
        // A foreign DIR.old is not removed either.
        let out = tmp.path().join("run");
        std::fs::create_dir_all(out.join(DIR)).unwrap();
        std::fs::create_dir_all(tmp.path().join("run.old")).unwrap();
        std::fs::write(tmp.path().join("run.old/notes"), "x").unwrap();
        assert!(prepare_output(&out).unwrap_err().contains("run.old"));
        assert!(tmp.path().join("run.old/notes").is_file());
    }

    #[test]
    fn other_formats_are_refused_with_the_versions() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path();
        assert!(matches!(load(out), Err(LoadError::Missing(..))));
        std::fs::create_dir(out.join(DIR)).unwrap();
        assert!(matches!(load(out), Err(LoadError::Unfinished(..))));
        std::fs::write(
            out.join(DIR).join(RUN),
            r#"{"format": 999, "events_format": 1, "polyprof_version": "9.9.9", "new": []}"#,
        )
        .unwrap();
        let e = load(out).err().expect("format 999 is refused").to_string();
        assert!(
            e.contains("polyprof 9.9.9 in recording format 999.1"),
            "{e}"
        );
        assert!(e.contains(&format!("reads format {FORMAT}.")), "{e}");
        assert!(e.contains("record the program again"), "{e}");
    }
}
