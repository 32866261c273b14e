//! End-to-end tests of `polyprof record` and `polyprof report DIR`: a recorded run reports
//! again, with other options, without running the program; earlier outputs are kept as
//! DIR.old; the formats, `--quiet`, the manual and the completions.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use tests::{compile, load_report, polyprof_bin, run_with_deadline, Output};

const BIN: &str = polyprof_bin!();

fn polyprof(args: &[&std::ffi::OsStr]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    run_with_deadline(cmd, b"")
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

fn region_count(r: &Value) -> usize {
    r["regions"].as_array().map_or(0, Vec::len)
}

/// report.json without what differs between two analyses of one recording (isl's time).
fn without_timings(mut r: Value) -> Value {
    if let Some(regions) = r["regions"].as_array_mut() {
        for region in regions {
            if let Some(s) = region["scheduler"].as_object_mut() {
                s.remove("seconds");
            }
            if let Some(o) = region.as_object_mut() {
                o.remove("storage_seconds");
            }
        }
    }
    r
}

/// The test: record once (the program runs and prints), then report twice with
/// different region thresholds: the program does not run again (its output does not
/// appear), and the regions follow the threshold.
#[test]
fn a_recorded_run_reports_again_without_running() {
    let k = compile("matmul", &["-O1", "-g", "-fno-tree-vectorize"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let rec = polyprof(&[os("record"), os("-o"), out.as_os_str(), k.path.as_os_str()]);
    assert_eq!(rec.code(), 0, "{}", rec.stderr);
    assert!(rec.stdout.starts_with("trace="), "{}", rec.stdout);
    assert!(out.join("recording/run.json").is_file());
    assert!(
        !out.join("report.json").exists(),
        "record wrote the reports"
    );
    assert!(
        rec.polyprof_lines()
            .iter()
            .any(|l| l.contains("polyprof report")),
        "record does not say how to report:\n{}",
        rec.stderr
    );

    let low = polyprof(&[
        os("report"),
        out.as_os_str(),
        os("--region-threshold"),
        os("1"),
    ]);
    assert_eq!(low.code(), 0, "{}", low.stderr);
    assert_eq!(low.stdout, "", "the program ran again");
    let r_low = load_report(&out).unwrap();
    for f in ["report.txt", "flamegraph.svg", "stacks.folded"] {
        assert!(out.join(f).is_file(), "{f} not written");
    }

    let high = polyprof(&[
        os("report"),
        out.as_os_str(),
        os("--region-threshold"),
        os("50"),
    ]);
    assert_eq!(high.code(), 0, "{}", high.stderr);
    assert_eq!(high.stdout, "", "the program ran again");
    let r_high = load_report(&out).unwrap();
    assert!(
        region_count(&r_low) > region_count(&r_high) && region_count(&r_high) >= 1,
        "threshold 1: {} regions, threshold 50: {}",
        region_count(&r_low),
        region_count(&r_high)
    );
    // Everything but the regions is the recorded run's.
    assert_eq!(r_low["program"], r_high["program"]);
    assert_eq!(r_low["trace"], r_high["trace"]);
    assert_eq!(r_low["program"]["exit_code"], 0);
    assert!(r_low["trace"]["instructions"].as_u64().unwrap() > 1000);
}

/// `polyprof PROGRAM` keeps its recording: `polyprof report DIR -o OUT` with the same options
/// writes the same report (isl's timings aside); a second run keeps the first as DIR.old.
#[test]
fn one_step_runs_keep_their_recording_and_the_earlier_output() {
    let k = compile("loop", &["-O1", "-g", "-fno-tree-vectorize"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let first = polyprof(&[os("-o"), out.as_os_str(), k.path.as_os_str()]);
    assert_eq!(first.code(), 0, "{}", first.stderr);
    assert_eq!(first.stdout, "a[63] = 189\n");
    let r1 = load_report(&out).unwrap();

    let again = dir.path().join("again");
    let rep = polyprof(&[os("report"), out.as_os_str(), os("-o"), again.as_os_str()]);
    assert_eq!(rep.code(), 0, "{}", rep.stderr);
    assert_eq!(rep.stdout, "");
    assert_eq!(
        without_timings(load_report(&again).unwrap()),
        without_timings(r1.clone())
    );
    assert_eq!(
        std::fs::read_to_string(again.join("stacks.folded")).unwrap(),
        std::fs::read_to_string(out.join("stacks.folded")).unwrap()
    );

    let second = polyprof(&[os("-o"), out.as_os_str(), k.path.as_os_str()]);
    assert_eq!(second.code(), 0, "{}", second.stderr);
    let old = dir.path().join("out.old");
    assert!(
        second
            .polyprof_lines()
            .iter()
            .any(|l| l.contains("out.old")),
        "{}",
        second.stderr
    );
    assert_eq!(
        without_timings(load_report(&old).unwrap()),
        without_timings(r1)
    );
    assert!(old.join("recording/run.json").is_file());
    assert!(out.join("report.json").is_file());
}

/// `--format json` writes report.json alone (beside the recording); `--quiet` says nothing
/// on stderr.
#[test]
fn json_only_and_quiet() {
    let k = compile("busy", &["-O1", "-g"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let run = polyprof(&[
        os("--format"),
        os("json"),
        os("--quiet"),
        os("-o"),
        out.as_os_str(),
        k.path.as_os_str(),
    ]);
    assert_eq!(run.code(), 0, "{}", run.stderr);
    assert_eq!(run.stderr, "", "--quiet printed something");
    assert!(run.stdout.starts_with("h="));
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["recording", "report.json"]);
    assert!(load_report(&out).unwrap()["trace"]["instructions"].as_u64() > Some(1000));
}

/// Recordings polyprof cannot read are refused with a sentence and status 2: none, an
/// unfinished one, another format.
#[test]
fn unreadable_recordings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let none = polyprof(&[os("report"), dir.path().as_os_str()]);
    assert_eq!(none.code(), 2);
    assert!(none.stderr.starts_with("polyprof: "), "{}", none.stderr);
    assert!(none.stderr.contains("no recording"), "{}", none.stderr);

    let k = compile("busy", &["-O1", "-g"]);
    let out = dir.path().join("out");
    let rec = polyprof(&[
        os("record"),
        os("-q"),
        os("-o"),
        out.as_os_str(),
        k.path.as_os_str(),
    ]);
    assert_eq!(rec.code(), 0, "{}", rec.stderr);
    let run_json = out.join("recording/run.json");
    let text = std::fs::read_to_string(&run_json).unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["format"], polyprof::RECORDING_FORMAT);
    v["format"] = Value::from(polyprof::RECORDING_FORMAT + 1);
    std::fs::write(&run_json, v.to_string()).unwrap();
    let other = polyprof(&[os("report"), out.as_os_str()]);
    assert_eq!(other.code(), 2, "{}", other.stderr);
    assert!(
        other.stderr.contains("recording format")
            && other.stderr.contains("record the program again"),
        "{}",
        other.stderr
    );
    assert!(!out.join("report.json").exists());

    std::fs::remove_file(&run_json).unwrap();
    let unfinished = polyprof(&[os("report"), out.as_os_str()]);
    assert_eq!(unfinished.code(), 2, "{}", unfinished.stderr);
    assert!(
        unfinished.stderr.contains("did not finish"),
        "{}",
        unfinished.stderr
    );
}

/// An output directory polyprof did not write is neither moved nor written into, and the
/// program does not run.
#[test]
fn a_foreign_output_directory_is_refused() {
    let k = compile("busy", &["-O1", "-g"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let run = polyprof(&[os("-o"), dir.path().as_os_str(), k.path.as_os_str()]);
    assert_eq!(run.code(), 2, "{}", run.stderr);
    assert_eq!(run.stdout, "", "the program ran");
    assert!(
        run.stderr.contains("polyprof did not write"),
        "{}",
        run.stderr
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "mine"
    );
    assert!(!dir.path().join("recording").exists());
}

/// `polyprof completions SHELL` prints a script naming the subcommands and options;
/// `polyprof man` prints polyprof(1), and `polyprof man DIR` writes a page per command.
#[test]
fn completions_and_manual_pages() {
    let bash = polyprof(&[os("completions"), os("bash")]);
    assert_eq!(bash.code(), 0, "{}", bash.stderr);
    for word in [
        "_polyprof",
        "record",
        "report",
        "--region-threshold",
        "--format",
    ] {
        assert!(bash.stdout.contains(word), "no {word} in:\n{}", bash.stdout);
    }
    let zsh = polyprof(&[os("completions"), os("zsh")]);
    assert_eq!(zsh.code(), 0, "{}", zsh.stderr);
    assert!(zsh.stdout.contains("#compdef polyprof"), "{}", zsh.stdout);

    let man = polyprof(&[os("man")]);
    assert_eq!(man.code(), 0, "{}", man.stderr);
    assert!(
        man.stdout.starts_with(".ie") || man.stdout.contains(".TH polyprof"),
        "{}",
        man.stdout
    );
    assert!(man.stdout.contains("region\\-threshold"), "{}", man.stdout);
    let dir = tempfile::tempdir().unwrap();
    let pages = dir.path().join("man1");
    let st = polyprof(&[os("man"), pages.as_os_str()]);
    assert_eq!(st.code(), 0, "{}", st.stderr);
    for page in [
        "polyprof.1",
        "polyprof-record.1",
        "polyprof-report.1",
        "polyprof-check.1",
    ] {
        let p: &Path = &pages.join(page);
        let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page}:\n{text}");
    }
}
