//! Damaged recordings (issue 39): `polyprof report DIR` on a recording cut short, copied with
//! errors, or put together from several runs answers with one sentence naming the damaged
//! file and exit status 2: no panic, no hang, no memory blowup.
//!
//! One test mutates two real recordings 1,000 times (seeded, so every run is the same):
//! truncations, flipped and inserted bytes, huge numbers in the events (with and without the
//! checksums of recordings from earlier versions), run.json cut, made invalid, with wrong types
//! or counts or from another program, a missing or altered copy of the program. Every case
//! goes through the reading code `polyprof report` uses, in this process (panics caught and
//! reported as failures, each case under a deadline); one case in 25 also runs the binary.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tests::{compile, polyprof_bin, run_with_timeout};

const BIN: &str = polyprof_bin!();
const CASES: usize = 1000;
/// One case in this many also runs the polyprof binary.
const PROCESS_EVERY: usize = 25;
/// How long one case may take in this process.
const CASE_DEADLINE: Duration = Duration::from_secs(20);

/// A tiny xorshift generator: the cases are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The files of a recording, as bytes.
#[derive(Clone)]
struct Files {
    run: Vec<u8>,
    events: Vec<u8>,
    program: Option<Vec<u8>>,
}

impl Files {
    fn read(out: &Path) -> Files {
        let d = out.join("recording");
        Files {
            run: std::fs::read(d.join("run.json")).unwrap(),
            events: std::fs::read(d.join("events")).unwrap(),
            program: Some(std::fs::read(d.join("program")).unwrap()),
        }
    }

    fn write(&self, out: &Path) {
        let d = out.join("recording");
        let _ = std::fs::remove_dir_all(out);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("run.json"), &self.run).unwrap();
        std::fs::write(d.join("events"), &self.events).unwrap();
        if let Some(p) = &self.program {
            std::fs::write(d.join("program"), p).unwrap();
        }
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.run).unwrap()
    }

    fn set_json(&mut self, v: &Value) {
        self.run = serde_json::to_vec_pretty(v).unwrap();
    }

    /// As a recording of an earlier version: without the checksums of its files.
    fn without_checksums(&mut self) {
        let mut v = self.json();
        let o = v.as_object_mut().unwrap();
        for k in [
            "events_bytes",
            "events_crc32",
            "program_crc32",
            "debug_crc32",
        ] {
            o.remove(k);
        }
        self.set_json(&v);
    }
}

/// One damaged recording: what was done, and whether polyprof must refuse it (some damage to
/// a recording without checksums cannot be seen: it must then report or refuse, no more).
struct Case {
    what: String,
    files: Files,
    must_refuse: bool,
}

/// Bytes that make numbers huge: continuation bits, then a tag and more of them.
const HUGE: [&[u8]; 4] = [
    &[0xff; 10],
    &[9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
    &[
        3, 1, 2, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ],
    &[1, 0x80, 0x80, 0x80, 0x01, 0xff],
];

fn mutate(rng: &mut Rng, base: &Files, other: &Files) -> Case {
    let mut f = base.clone();
    let kind = rng.below(20);
    let n = f.events.len();
    let what = match kind {
        // The events cut short, with the checksums or without.
        0 | 1 => {
            let at = rng.below(n);
            f.events.truncate(at);
            if kind == 1 {
                f.without_checksums();
            }
            format!("events cut at byte {at} of {n}{}", old(kind == 1))
        }
        // A byte of the events changed.
        2 | 3 => {
            let at = rng.below(n);
            f.events[at] ^= 1 + rng.below(255) as u8;
            if kind == 3 {
                f.without_checksums();
            }
            format!("events byte {at} changed{}", old(kind == 3))
        }
        // Huge numbers written into the events.
        4 | 5 => {
            let at = rng.below(n);
            let huge = HUGE[rng.below(HUGE.len())];
            let end = (at + huge.len()).min(n);
            f.events.splice(at..end, huge.iter().copied());
            if kind == 5 {
                f.without_checksums();
            }
            format!("huge numbers at events byte {at}{}", old(kind == 5))
        }
        // Bytes inserted into or removed from the events.
        6 => {
            let at = rng.below(n);
            let len = 1 + rng.below(16);
            if rng.below(2) == 0 {
                let junk: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                f.events.splice(at..at, junk);
                f.without_checksums();
                format!("{len} bytes inserted at events byte {at} (no checksums)")
            } else {
                let end = (at + len).min(n);
                f.events.drain(at..end);
                format!("events bytes {at}..{end} removed")
            }
        }
        // The events doubled (a copy appended twice).
        7 => {
            let copy = f.events.clone();
            f.events.extend(copy);
            if rng.below(2) == 0 {
                f.without_checksums();
            }
            "events appended twice".to_string()
        }
        // run.json cut short.
        8 => {
            let at = rng.below(f.run.len().saturating_sub(2));
            f.run.truncate(at);
            format!("run.json cut at byte {at}")
        }
        // A character of run.json's syntax replaced.
        9 => {
            let syntax: Vec<usize> = (0..f.run.len())
                .filter(|&i| b"{}[]:,\"".contains(&f.run[i]))
                .collect();
            let at = syntax[rng.below(syntax.len())];
            f.run[at] = b'x';
            format!("run.json byte {at} replaced")
        }
        // A field of run.json of the wrong type, or missing.
        10 => {
            let mut v = f.json();
            let keys = [
                "format",
                "events",
                "program",
                "trace",
                "load_bias",
                "argv0",
                "debug_file",
            ];
            let key = keys[rng.below(keys.len())];
            let bad = [
                Value::from("twelve"),
                Value::from(-1),
                Value::from(1.5),
                Value::Null,
                Value::from(vec![1, 2]),
                serde_json::json!({"a": 1}),
            ];
            let choice = rng.below(bad.len() + 1);
            let o = v.as_object_mut().unwrap();
            let what = if choice == bad.len() {
                o.remove(key);
                format!("run.json without {key}")
            } else {
                // A value of the right type is no damage: skip it.
                let b = bad[choice].clone();
                let same = matches!((key, &b), ("argv0", Value::String(_)));
                o.insert(key.to_string(), if same { Value::from(true) } else { b });
                format!("run.json with {key} of the wrong type")
            };
            f.set_json(&v);
            what
        }
        // Wrong counts in run.json.
        11 => {
            let mut v = f.json();
            let (path, delta): (&[&str], i64) = match rng.below(6) {
                0 => (&["events"], 1),
                1 => (&["events"], -1),
                2 => (&["trace", "instructions"], 1),
                3 => (&["trace", "native_calls"], 1),
                4 => (&["trace", "syscalls"], -1),
                _ => (&["events_bytes"], 7),
            };
            let mut x = &mut v;
            for p in path {
                x = &mut x[*p];
            }
            let now = x.as_u64().unwrap() as i64;
            *x = Value::from((now + delta).max(0) as u64 + u64::from(now + delta < 0));
            if rng.below(2) == 0 && path != ["events_bytes"] {
                let o = v.as_object_mut().unwrap();
                o.remove("events_bytes");
                o.remove("events_crc32");
            }
            f.set_json(&v);
            format!("run.json's {} off by {delta}", path.join("."))
        }
        // Huge counts in run.json.
        12 => {
            let mut v = f.json();
            v["events"] = Value::from(u64::MAX);
            if rng.below(2) == 0 {
                v.as_object_mut().unwrap().remove("events_crc32");
            }
            f.set_json(&v);
            "run.json counts 2^64 - 1 events".to_string()
        }
        // run.json of another program's recording.
        13 => {
            f.run = other.run.clone();
            if rng.below(2) == 0 {
                f.without_checksums();
            }
            "run.json of another recording".to_string()
        }
        // The program missing, cut short, altered or another one.
        14 => {
            let p = f.program.as_mut().unwrap();
            let len = p.len();
            match rng.below(4) {
                0 => {
                    f.program = None;
                    "program missing".to_string()
                }
                1 => {
                    let at = rng.below(len);
                    p.truncate(at);
                    format!("program cut at byte {at}")
                }
                2 => {
                    let at = rng.below(len);
                    p[at] ^= 1 + rng.below(255) as u8;
                    format!("program byte {at} changed")
                }
                _ => {
                    f.program = other.program.clone();
                    "another program".to_string()
                }
            }
        }
        // The program garbled, in a recording without checksums (its header, where it shows).
        15 => {
            f.without_checksums();
            let p = f.program.as_mut().unwrap();
            let at = rng.below(64);
            p[at] ^= 0xff;
            if rng.below(2) == 0 {
                p.truncate(64 + rng.below(4000));
            }
            format!("program header byte {at} garbled (no checksums)")
        }
        // Another program in a recording without checksums.
        16 => {
            f.without_checksums();
            f.program = other.program.clone();
            "another program (no checksums)".to_string()
        }
        // Events of another run.
        17 => {
            f.events = other.events.clone();
            if rng.below(2) == 0 {
                f.without_checksums();
            }
            "events of another recording".to_string()
        }
        // run.json not an object at all, or empty.
        18 => {
            let texts: [&[u8]; 6] = [b"", b"\n", b"[]", b"null", b"\"run\"", b"{}"];
            let t = texts[rng.below(texts.len())];
            f.run = t.to_vec();
            format!("run.json is {:?}", String::from_utf8_lossy(t))
        }
        // run.json's bytes not text.
        _ => {
            let at = rng.below(f.run.len());
            f.run[at] = 0xff;
            format!("run.json byte {at} not UTF-8")
        }
    };
    let must_refuse = !what.contains("no checksums");
    Case {
        what,
        files: f,
        must_refuse,
    }
}

fn old(yes: bool) -> &'static str {
    if yes {
        " (no checksums)"
    } else {
        ""
    }
}

/// Records `kernel` into `dir`/NAME and returns the output directory.
fn record(kernel: &tests::Kernel, dir: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    let mut cmd = Command::new(BIN);
    cmd.args(["record", "-q", "-o"]).arg(&out).arg(&kernel.path);
    let r = run_with_timeout(cmd, b"", Duration::from_secs(60));
    assert_eq!(r.code(), 0, "{}", r.stderr);
    out
}

/// What checking one case in this process found.
enum Outcome {
    Refused(String),
    Reported(i32),
    Panicked(String),
}

fn check_in_process(dir: &Path, reports: &Path) -> Outcome {
    let r = std::panic::catch_unwind(|| polyprof::check_recording(dir));
    match r {
        Err(p) => Outcome::Panicked(panic_text(&p)),
        Ok(Err(e)) => Outcome::Refused(e.to_string()),
        // Damage no check can see: the whole report runs, here too.
        Ok(Ok(())) => {
            let args = [
                "polyprof".as_ref(),
                "report".as_ref(),
                "-q".as_ref(),
                "--format".as_ref(),
                "json".as_ref(),
                dir.as_os_str(),
                "-o".as_ref(),
                reports.as_os_str(),
            ];
            match std::panic::catch_unwind(|| polyprof::cli_main_from(args)) {
                Ok(code) => Outcome::Reported(code),
                Err(p) => Outcome::Panicked(panic_text(&p)),
            }
        }
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "?".to_string())
}

/// A refusal is one line naming what is wrong and what to do.
fn assert_clear(case: &Case, msg: &str) {
    assert!(
        !msg.contains('\n'),
        "{}: more than a line: {msg}",
        case.what
    );
    let named = [
        "is damaged: run.json:",
        "is damaged: events:",
        "is damaged: program:",
        "did not finish",
        "recording format",
    ];
    assert!(
        named.iter().any(|n| msg.contains(n)),
        "{}: the message names no file: {msg}",
        case.what
    );
    assert!(
        msg.contains("record the program again"),
        "{}: {msg}",
        case.what
    );
    // The file named is the one damaged (counts may be either's fault; another run's files
    // may show in the other's).
    let file = ["run.json", "events", "program"]
        .into_iter()
        .filter_map(|f| case.what.find(f).map(|at| (at, f)))
        .min()
        .map(|(_, f)| f)
        .unwrap();
    let counts = !case.must_refuse
        || case.what.contains("off by")
        || case.what.contains("2^64")
        || case.what.contains("another")
        || case.what.contains("twice");
    if !counts && !msg.contains("did not finish") && !msg.contains("recording format") {
        assert!(
            msg.contains(&format!("damaged: {file}:")),
            "{}: the message does not name {file}: {msg}",
            case.what
        );
    }
}

#[test]
fn damaged_recordings_are_refused_with_a_sentence() {
    let t0 = Instant::now();
    let small = compile("loop", &["-O1", "-g"]);
    let other = compile("busy", &["-O1", "-g"]);
    let tmp = tempfile::tempdir().unwrap();
    let bases = [
        Files::read(&record(&small, tmp.path(), "small")),
        Files::read(&record(&other, tmp.path(), "other")),
    ];
    // Both read back whole.
    for b in ["small", "other"] {
        if let Err(e) = polyprof::check_recording(&tmp.path().join(b)) {
            panic!("the undamaged recording {b} is refused: {e}");
        }
    }
    let work = tmp.path().join("case");
    let reports = tmp.path().join("reports");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let cases: Vec<Case> = (0..CASES)
        .map(|i| {
            let (base, other) = (&bases[i % 2], &bases[1 - i % 2]);
            mutate(&mut rng, base, other)
        })
        .collect();

    // In this process, on a thread of its own so that a case that hangs fails the test.
    let (tx, rx) = mpsc::channel::<(usize, Outcome)>();
    let (go_tx, go_rx) = mpsc::channel::<Option<(usize, Files)>>();
    let worker = {
        let (work, reports) = (work.clone(), reports.clone());
        std::thread::spawn(move || {
            while let Ok(Some((i, files))) = go_rx.recv() {
                files.write(&work);
                let outcome = check_in_process(&work, &reports);
                if tx.send((i, outcome)).is_err() {
                    return;
                }
            }
        })
    };
    let mut refused = 0;
    let mut reported = 0;
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        go_tx.send(Some((i, case.files.clone()))).unwrap();
        let (j, outcome) = rx
            .recv_timeout(CASE_DEADLINE)
            .unwrap_or_else(|_| panic!("case {i} ({}) did not end in time", case.what));
        assert_eq!(i, j);
        match outcome {
            Outcome::Panicked(p) => failures.push(format!("case {i} ({}): panic: {p}", case.what)),
            Outcome::Refused(msg) => {
                refused += 1;
                assert_clear(case, &msg);
            }
            Outcome::Reported(code) => {
                reported += 1;
                if case.must_refuse || !matches!(code, 0 | 2) {
                    failures.push(format!(
                        "case {i} ({}): not refused (polyprof report: status {code})",
                        case.what
                    ));
                }
            }
        }
    }
    go_tx.send(None).unwrap();
    worker.join().unwrap();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        refused > CASES * 8 / 10,
        "only {refused} of {CASES} refused"
    );
    let in_process = t0.elapsed();

    // The binary, on one case in PROCESS_EVERY: status 2 and one line on stderr.
    let mut runs = 0;
    for (i, case) in cases
        .iter()
        .enumerate()
        .filter(|(i, _)| i % PROCESS_EVERY == 0)
    {
        case.files.write(&work);
        let _ = std::fs::remove_dir_all(&reports);
        let mut cmd = Command::new(BIN);
        cmd.arg("report").arg(&work).arg("-o").arg(&reports);
        let out = run_with_timeout(cmd, b"", CASE_DEADLINE);
        runs += 1;
        let code = out.code();
        assert!(
            !out.stderr.contains("panicked"),
            "case {i} ({}): {}",
            case.what,
            out.stderr
        );
        if code == 2 || case.must_refuse {
            assert_eq!(code, 2, "case {i} ({}): {}", case.what, out.stderr);
            let lines: Vec<&str> = out.stderr.lines().collect();
            assert_eq!(lines.len(), 1, "case {i} ({}): {}", case.what, out.stderr);
            assert!(lines[0].starts_with("polyprof: "), "{}", out.stderr);
            assert_clear(case, lines[0]);
            assert!(
                !reports.join("report.json").exists(),
                "case {i}: reports written"
            );
        } else {
            assert_eq!(code, 0, "case {i} ({}): {}", case.what, out.stderr);
        }
    }
    eprintln!(
        "{CASES} damaged recordings ({refused} refused, {reported} reported: damage without \
         checksums that no check sees) in {:.1} s in this process; {runs} runs of polyprof \
         report in {:.1} s",
        in_process.as_secs_f64(),
        (t0.elapsed() - in_process).as_secs_f64()
    );
}
