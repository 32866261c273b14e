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
    /// Size of `events` in bytes, and its CRC-32 (IEEE): a recording cut short or altered is
    /// told from the one written. Absent from recordings of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_crc32: Option<u32>,
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
    /// CRC-32 of `program` and of `program.debug` (when kept), as copied: a copy altered
    /// since is told from the one run. Absent from recordings of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program_crc32: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug_crc32: Option<u32>,
}

/// CRC-32 (IEEE) of the file at `path`, `None` if it cannot be read.
pub fn file_crc32(path: &Path) -> Option<u32> {
    use std::io::Read as _;
    let mut f = std::fs::File::open(path).ok()?;
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Some(h.finalize()),
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

/// `Err` saying the file `path` kept as `what` was changed, when its CRC-32 is not `crc`.
fn check_crc(path: &Path, crc: Option<u32>, what: &str) -> Result<(), String> {
    let Some(crc) = crc else { return Ok(()) };
    match file_crc32(path) {
        Some(found) if found == crc => Ok(()),
        Some(found) => Err(format!(
            "its checksum is {found:08x}, not the {crc:08x} of the {what} copied when recording: \
             it was changed or replaced since (or run.json is another recording's)"
        )),
        None => Err(format!("the {what} cannot be read")),
    }
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
    /// (the recording's directory, the file, what is wrong with it)
    #[error("the recording in {0} is damaged: {1}: {2}; record the program again")]
    Damaged(String, &'static str, String),
}

/// Reads the recording in `out_dir`, checking its format numbers, that its files belong
/// together, and every event (see [`check_events`]): a recording copied with errors or cut
/// short is refused here, with a sentence naming the damaged file, rather than failing (or
/// misleading) the analysis.
pub fn load(out_dir: &Path) -> Result<Loaded, LoadError> {
    let paths = Paths::new(out_dir);
    let shown = out_dir.display().to_string();
    let run = paths.run();
    if !paths.dir.is_dir() {
        return Err(LoadError::Missing(shown, paths.dir.display().to_string()));
    }
    let dir = paths.dir.display().to_string();
    let damaged = |file: &'static str, what: String| LoadError::Damaged(dir.clone(), file, what);
    let bytes = match std::fs::read(&run) {
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
    let text = String::from_utf8(bytes).map_err(|e| {
        damaged(
            RUN,
            format!("it is not text (byte {})", e.utf8_error().valid_up_to()),
        )
    })?;
    if text.trim().is_empty() {
        return Err(damaged(RUN, "it is empty (was the disk full?)".to_string()));
    }
    // The format numbers first: a newer layout may not parse as this one.
    #[derive(Deserialize)]
    struct Header {
        format: u32,
        events_format: u32,
        #[serde(default)]
        polyprof_version: String,
    }
    let header: Header = serde_json::from_str(&text)
        .map_err(|e| damaged(RUN, format!("it is not the JSON polyprof writes ({e})")))?;
    if header.format != FORMAT || header.events_format != ptrace_runner::record::FORMAT {
        return Err(LoadError::Format(
            dir.clone(),
            header.polyprof_version,
            header.format,
            header.events_format,
            env!("CARGO_PKG_VERSION").to_string(),
            FORMAT,
            ptrace_runner::record::FORMAT,
        ));
    }
    let info: RunInfo = serde_json::from_str(&text)
        .map_err(|e| damaged(RUN, format!("it is not the JSON polyprof writes ({e})")))?;
    let program = paths.program();
    if !program.is_file() {
        return Err(damaged(
            PROGRAM,
            "the copy of the program is missing".to_string(),
        ));
    }
    let debug = paths.debug();
    if info.debug_file && !debug.is_file() {
        return Err(damaged(
            DEBUG,
            "the copy of the program's debug file is missing".to_string(),
        ));
    }
    check_crc(&program, info.program_crc32, "program").map_err(|e| damaged(PROGRAM, e))?;
    if info.debug_file {
        check_crc(&debug, info.debug_crc32, "debug file").map_err(|e| damaged(DEBUG, e))?;
    }
    let opts = symbols::OpenOptions {
        // Only the copy kept with the recording: what the run was named from.
        debug_root: paths.dir.join("no-debug-root"),
        debug_file: info.debug_file.then_some(debug),
    };
    let exe = symbols::ElfFile::open_with(&program, &opts).map_err(|e| {
        damaged(
            PROGRAM,
            format!("it is not a readable x86-64 program ({e})"),
        )
    })?;
    if info.build_id.is_some() && exe.build_id() != info.build_id {
        return Err(damaged(
            RUN,
            format!(
                "it describes another program than the copy kept (build-id {}, the copy's {})",
                info.build_id.as_deref().unwrap_or("none"),
                exe.build_id().as_deref().unwrap_or("none")
            ),
        ));
    }
    let events = paths.events();
    let recording = match ptrace_runner::record::Recording::open(&events, info.events) {
        Ok(r) => r,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(damaged(EVENTS, "the events are missing".to_string()))
        }
        Err(e) => {
            return Err(LoadError::Unreadable(
                events.display().to_string(),
                e.to_string(),
            ))
        }
    };
    let size = recording.bytes() as u64;
    match info.events_bytes {
        Some(n) if size < n => {
            return Err(damaged(
                EVENTS,
                format!(
                    "the events end at byte {size}, short of the {n} bytes written (was the \
                     recording cut short, or is run.json another recording's?)"
                ),
            ))
        }
        Some(n) if size > n => {
            return Err(damaged(
                EVENTS,
                format!(
                    "it holds {size} bytes, not the {n} bytes written (or run.json is another \
                     recording's)"
                ),
            ))
        }
        _ => {}
    }
    if let Some(crc) = info.events_crc32 {
        let found = recording.crc32();
        if found != crc {
            return Err(damaged(
                EVENTS,
                format!(
                    "its checksum is {found:08x}, not the {crc:08x} written: bytes of it were \
                     changed (or run.json is another recording's)"
                ),
            ));
        }
    }
    check_events(&info, &exe, &recording).map_err(|(file, what)| damaged(file, what))?;
    Ok(Loaded {
        info,
        exe,
        recording,
    })
}

/// Largest memory access of one instruction's operand the runner records (an `fxsave` area is
/// 512 bytes, an `xsave` one a few kilobytes).
const MAX_ACCESS: u32 = 1 << 16;

/// Decodes every event of `recording`, checking that it is one a recorder writes, that it
/// fits the program (instructions in its code, unless libraries were traced) and that the
/// counts match `info`'s. `Err`: the file at fault and a sentence.
fn check_events(
    info: &RunInfo,
    exe: &symbols::ElfFile,
    recording: &ptrace_runner::record::Recording,
) -> Result<(), (&'static str, String)> {
    use ptrace_runner::{Event, EventSink};
    /// Runtime ranges of the program's code, page-aligned as mapped (`None`: any address).
    struct Check {
        code: Option<Vec<std::ops::Range<u64>>>,
        insns: u64,
        calls: u64,
        syscalls: u64,
        signals: u64,
        problem: Option<String>,
    }
    impl Check {
        fn fail(&mut self, what: String) -> std::io::Result<()> {
            self.problem = Some(what);
            Err(std::io::Error::other("damaged"))
        }
    }
    impl EventSink for Check {
        fn event(&mut self, ev: &Event<'_>) -> std::io::Result<()> {
            match *ev {
                Event::Insn(i) => {
                    self.insns += 1;
                    if i.len == 0 || i.len > 15 {
                        return self.fail(format!(
                            "an instruction at {:#x} is {} bytes long",
                            i.pc, i.len
                        ));
                    }
                    if let Some(code) = &self.code {
                        if !code.iter().any(|r| r.contains(&i.pc)) {
                            return self.fail(format!(
                                "an instruction at {:#x} lies outside the program's code (are \
                                 the events another program's?)",
                                i.pc
                            ));
                        }
                    }
                    if let Some(a) = i.mem.iter().find(|a| a.size > MAX_ACCESS) {
                        return self.fail(format!(
                            "the instruction at {:#x} accesses {} bytes at once",
                            i.pc, a.size
                        ));
                    }
                }
                Event::Code { addr, bytes } if bytes.is_empty() || bytes.len() > 15 => {
                    return self.fail(format!(
                        "the code at {addr:#x} is {} bytes long",
                        bytes.len()
                    ));
                }
                Event::LibCall(_) => self.calls += 1,
                Event::Syscall(_) => self.syscalls += 1,
                Event::Signal { .. } => self.signals += 1,
                _ => {}
            }
            Ok(())
        }
    }
    const PAGE: u64 = 4096;
    let bias = info.load_bias;
    let code = (!info.trace.trace_libs).then(|| {
        exe.segments()
            .iter()
            .filter(|s| s.is_exec())
            .map(|s| {
                let r = s.range();
                let start = (r.start & !(PAGE - 1)).wrapping_add(bias);
                let end = r.end.saturating_add(PAGE - 1) & !(PAGE - 1);
                start..end.wrapping_add(bias)
            })
            .collect()
    });
    let mut check = Check {
        code,
        insns: 0,
        calls: 0,
        syscalls: 0,
        signals: 0,
        problem: None,
    };
    if let Err(e) = recording.replay_into(&mut check) {
        return Err((EVENTS, check.problem.unwrap_or_else(|| e.to_string())));
    }
    let t = &info.trace;
    for (what, found, said) in [
        ("instructions", check.insns, t.instructions),
        ("library calls", check.calls, t.native_calls),
        ("system calls", check.syscalls, t.syscalls),
        ("signals", check.signals, t.signals),
    ] {
        if found != said {
            return Err((
                RUN,
                format!(
                    "it counts {said} {what}, the events hold {found} (are they from the same \
                     run?)"
                ),
            ));
        }
    }
    Ok(())
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
