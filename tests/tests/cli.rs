//! End-to-end tests of the polyprof command line on C kernels: what passes through to the
//! program, exit statuses, report.json, warnings, and refusals of bad input.

use serde_json::Value;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use tests::{compile, polyprof, polyprof_bin, Run};

const BIN: &str = polyprof_bin!();

/// Runs polyprof on `program` with `args` (after `opts`), feeding `stdin`.
fn run(opts: &[&str], program: &Path, args: &[&str], stdin: &[u8]) -> Run {
    let mut all: Vec<OsString> = opts.iter().map(OsString::from).collect();
    all.push(program.as_os_str().to_os_string());
    all.extend(args.iter().map(OsString::from));
    polyprof(BIN, &all, stdin)
}

/// The parts of report.json every finished run must have right.
fn check_report(run: &Run, program: &Path, args: &[&str]) -> Value {
    let r = run.report();
    let ctx = format!("report.json: {r:#}\nstderr:\n{}", run.output.stderr);
    assert_eq!(r["schema"], "polyprof-report/1", "{ctx}");
    let path = r["program"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("program.path: {ctx}"));
    let name = program.file_name().unwrap().to_str().unwrap();
    assert!(
        path.ends_with(name),
        "program.path {path:?} does not name {name}"
    );
    let want: Vec<Value> = args.iter().map(|a| Value::from(*a)).collect();
    assert_eq!(
        r["program"]["args"],
        Value::Array(want),
        "program.args: {ctx}"
    );
    assert_eq!(r["trace"]["engine"], "emulate", "{ctx}");
    assert!(r["trace"]["complete"].is_boolean(), "trace.complete: {ctx}");
    assert!(
        r["trace"]["instructions"].is_u64(),
        "trace.instructions: {ctx}"
    );
    assert!(r["trace"]["warnings"].is_array(), "trace.warnings: {ctx}");
    assert!(r["regions"].is_array(), "regions: {ctx}");
    r
}

/// `--dump-deps` writes what the analysis found (its own dependence pass, not a second one):
/// the chain's distance-1 flow through memory, and nothing carried by the copy.
#[test]
fn dump_deps_lists_the_dependences_the_analysis_saw() {
    let k = compile("dep_chain", &["-O0", "-g"]);
    let run = run(&["--dump-deps"], &k.path, &["16"], b"");
    assert_eq!(run.output.code(), 0, "stderr:\n{}", run.output.stderr);
    check_report(&run, &k.path, &["16"]);
    let deps = std::fs::read_to_string(run.out.join("deps.txt")).expect("deps.txt");
    let chain = format!("dep_chain.c:{}", tests::line_of("dep_chain", "/* CHAIN */"));
    let copy = format!("dep_chain.c:{}", tests::line_of("dep_chain", "/* COPY */"));
    // a[i] written at iteration i - 1, read at i: 14 of the 15 iterations.
    let chained = deps.lines().any(|l| {
        l.starts_with("flow memory:")
            && l.matches(chain.as_str()).count() == 2
            && l.contains(" 14 instances")
            && l.contains("[1]x14")
    });
    assert!(
        chained,
        "no distance-1 flow of the chain ({chain}) in deps.txt:\n{deps}"
    );
    let carried_copy = deps.lines().any(|l| {
        l.starts_with("flow memory:") && l.matches(copy.as_str()).count() == 2 && l.contains("[1]x")
    });
    assert!(!carried_copy, "the copy carries nothing:\n{deps}");
    assert!(
        run.output.stderr.contains("dependences: "),
        "stderr names deps.txt:\n{}",
        run.output.stderr
    );
}

fn instructions(r: &Value) -> u64 {
    r["trace"]["instructions"].as_u64().unwrap()
}

fn warnings(r: &Value) -> Vec<String> {
    r["trace"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().expect("a warning is a string").to_string())
        .collect()
}

/// The value the `busy` kernel prints, run with no arguments.
fn busy_hash() -> u64 {
    let mut h: u64 = 5381 + 1;
    for i in 0..1000u64 {
        h = h.wrapping_mul(33).wrapping_add(i);
    }
    h
}

#[test]
fn stdin_stdout_and_exit_status_pass_through() {
    let k = compile("stdio", &["-O1", "-g"]);
    let run = run(&[], &k.path, &[], b"1 2 3\n4 5\n");
    let out = &run.output;
    assert_eq!(out.stdout, "sum=15\n", "stderr:\n{}", out.stderr);
    assert!(
        out.stderr.lines().any(|l| l == "kernel: read 5 numbers"),
        "the program's stderr line is missing:\n{}",
        out.stderr
    );
    assert_eq!(out.code(), 7, "stderr:\n{}", out.stderr);
    let r = check_report(&run, &k.path, &[]);
    assert_eq!(r["program"]["exit_code"], 7);
    assert_eq!(r["program"]["signal"], Value::Null);
    assert_eq!(r["trace"]["complete"], true);
    assert!(instructions(&r) > 0);
}

/// The output directory holds the four files of REPORT.md; the folded stacks name main, the
/// loop by its header line and the library call, and their widths add up to the instructions.
#[test]
fn output_files_follow_the_contract() {
    let k = compile("loop", &["-O1", "-g", "-fno-tree-vectorize"]);
    let run = run(&[], &k.path, &[], b"");
    let out = &run.output;
    assert_ran(&run, "a[63] = 189\n", 0);
    let r = check_report(&run, &k.path, &[]);
    // flamegraph.svg and stacks.folded come with the control-structure stage (issue 3); the
    // flame-graph assertions belong there.
    let missing: Vec<&str> = ["report.txt", "report.json"]
        .into_iter()
        .filter(|f| !run.out.join(f).is_file())
        .collect();
    assert!(
        missing.is_empty(),
        "files not written in {}: {missing:?}",
        run.out.display()
    );
    let report_txt = std::fs::read_to_string(run.out.join("report.txt")).unwrap();
    assert!(
        report_txt.contains(&format!("{} instructions", instructions(&r))),
        "report.txt does not give the instruction count:\n{report_txt}"
    );
    assert!(report_txt.contains("exited with status 0"), "{report_txt}");

    // The last lines on stderr name the reports.
    let tail: Vec<&str> = out.stderr.lines().rev().take(3).collect();
    for f in ["report.txt", "report.json"] {
        assert!(
            tail.iter()
                .any(|l| l.starts_with("polyprof:") && l.contains(f)),
            "the last lines on stderr do not name {f}:\n{}",
            out.stderr
        );
    }
}

#[test]
fn arguments_with_spaces_and_empty_arguments() {
    let k = compile("args", &["-O1", "-g"]);
    let args = ["a b", "", "c"];
    let run = run(&[], &k.path, &args, b"");
    assert_ran(&run, "argc=4\n[a b]\n[]\n[c]\n", 0);
    let r = check_report(&run, &k.path, &args);
    assert_eq!(r["program"]["exit_code"], 0);
    assert_eq!(r["trace"]["complete"], true);
}

#[test]
fn options_after_the_program_belong_to_the_program() {
    let k = compile("args", &["-O1", "-g"]);
    let args = ["--max-instructions", "5", "-o", "x"];
    let run = run(&[], &k.path, &args, b"");
    assert_ran(&run, "argc=5\n[--max-instructions]\n[5]\n[-o]\n[x]\n", 0);
    let r = check_report(&run, &k.path, &args);
    assert_eq!(r["trace"]["complete"], true);
}

#[test]
fn crashing_kernel_reports_sigsegv() {
    let k = compile("crash", &["-O0", "-g"]);
    let run = run(&[], &k.path, &[], b"");
    assert_ran(&run, "before crash: 45\n", 128 + libc::SIGSEGV);
    let r = check_report(&run, &k.path, &[]);
    assert_eq!(r["program"]["signal"], "SIGSEGV", "{r:#}");
    assert_eq!(r["program"]["exit_code"], Value::Null, "{r:#}");
    assert!(instructions(&r) > 0);
    // The write through NULL, outside any loop.
    let crash = &r["crash"];
    assert_eq!(crash["signal"], "SIGSEGV", "{r:#}");
    assert_eq!(crash["address"], "0x0", "{r:#}");
    assert_eq!(
        crash["location"]["line"],
        tests::line_of("crash", "*target = sum"),
        "{r:#}"
    );
    assert_eq!(crash["loops"], Value::Array(vec![]), "{r:#}");
}

/// A fault inside a loop nest: report.json, report.txt and stderr name the signal, the
/// faulting instruction and address, its source line, and the loops around it with the
/// iteration each was in; polyprof exits with the program's status.
#[test]
fn crash_report_names_the_faulting_line_and_loops() {
    let k = compile("segv_loop", &["-O1", "-g"]);
    let run = run(&[], &k.path, &[], b"");
    let out = &run.output;
    assert_ran(&run, "summing\n", 128 + libc::SIGSEGV);
    let r = check_report(&run, &k.path, &[]);
    let crash = &r["crash"];
    let ctx = format!("{r:#}\nstderr:\n{}", out.stderr);
    let fault = tests::line_of("segv_loop", "/* FAULT */");
    assert_eq!(crash["signal"], "SIGSEGV", "{ctx}");
    assert_eq!(crash["code"], "SEGV_MAPERR", "{ctx}");
    assert_eq!(crash["address"], "0x10", "{ctx}");
    assert_eq!(crash["function"], "main", "{ctx}");
    assert_eq!(crash["location"]["line"], fault, "{ctx}");
    assert!(
        crash["location"]["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("segv_loop.c")),
        "{ctx}"
    );
    assert!(
        crash["instruction"]
            .as_str()
            .is_some_and(|i| i.contains('[')),
        "{ctx}"
    );
    // The faulting load's address is the executable's: its line is the fault's.
    let pc =
        u64::from_str_radix(crash["pc"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap();
    assert_eq!(k.elf().location(pc).map(|l| l.line), Some(fault), "{ctx}");
    let loops: Vec<(u64, u64)> = crash["loops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["location"]["line"].as_u64().unwrap(),
                l["iteration"].as_u64().unwrap(),
            )
        })
        .collect();
    let outer = u64::from(tests::line_of("segv_loop", "OUTER"));
    let inner = u64::from(tests::line_of("segv_loop", "INNER"));
    assert_eq!(loops, [(outer, 5), (inner, 0)], "{ctx}");
    let said =
        format!("killed by SIGSEGV (address not mapped: 0x10) at segv_loop.c:{fault} in main");
    assert!(
        out.polyprof_lines()
            .iter()
            .any(|l| l.contains(&said)
                && l.contains(&format!("loop segv_loop.c:{outer} (iteration 5)"))),
        "stderr does not say {said:?} with the loops:\n{}",
        out.stderr
    );
    let text = std::fs::read_to_string(run.out.join("report.txt")).unwrap();
    assert!(
        text.lines()
            .any(|l| l.starts_with("crash:") && l.contains(&format!("segv_loop.c:{fault}"))),
        "{text}"
    );
}

#[test]
fn signal_handlers_run() {
    let k = compile("signal", &["-O0", "-g"]);
    let run = run(&[], &k.path, &[], b"");
    assert_ran(&run, "counter=20\n", 0);
    let r = check_report(&run, &k.path, &[]);
    assert_eq!(r["trace"]["complete"], true);
    assert_eq!(r["program"]["exit_code"], 0);
}

#[test]
fn threaded_program_is_warned_about_not_hung() {
    let k = compile("threads", &["-O1", "-g", "-pthread"]);
    let run = run(&[], &k.path, &[], b"");
    let out = &run.output;
    assert_ran(&run, "total=79800\n", 0);
    assert!(
        out.polyprof_lines().iter().any(|l| l.contains("thread")),
        "no polyprof: warning about threads on stderr:\n{}",
        out.stderr
    );
    let r = check_report(&run, &k.path, &[]);
    let w = warnings(&r);
    assert!(w.iter().any(|w| w.contains("thread")), "warnings: {w:?}");
    assert!(instructions(&r) > 0);
}

#[test]
fn forked_child_is_warned_about() {
    let k = compile("fork", &["-O1", "-g"]);
    let run = run(&[], &k.path, &[], b"");
    let out = &run.output;
    assert!(
        out.stdout.lines().any(|l| l == "child: 55"),
        "the child's output is missing: {:?}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l == "parent: child exited with 3"),
        "the parent's output is missing: {:?}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    assert_eq!(out.code(), 0, "stderr:\n{}", out.stderr);
    assert!(
        out.polyprof_lines()
            .iter()
            .any(|l| l.contains("child process")),
        "no polyprof: warning about the child process on stderr:\n{}",
        out.stderr
    );
    let r = check_report(&run, &k.path, &[]);
    let w = warnings(&r);
    assert!(
        w.iter().any(|w| w.contains("child process")),
        "warnings: {w:?}"
    );
}

/// polyprof refused to run `run`'s program: status 2, one `polyprof:` message mentioning one
/// of `words` (case-insensitive), and no report.
/// The program ran through polyprof as alone: its standard output and exit status.
fn assert_ran(run: &Run, stdout: impl AsRef<str>, code: i32) {
    let out = &run.output;
    assert_eq!(out.stdout, stdout.as_ref(), "stderr:\n{}", out.stderr);
    assert_eq!(out.code(), code, "stderr:\n{}", out.stderr);
}

fn assert_refused(run: &Run, words: &[&str]) {
    let out = &run.output;
    assert_eq!(
        out.code(),
        2,
        "stdout: {:?}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stderr.starts_with("polyprof:"),
        "stderr does not start with `polyprof:`:\n{}",
        out.stderr
    );
    let lower = out.stderr.to_lowercase();
    assert!(
        words.iter().any(|w| lower.contains(&w.to_lowercase())),
        "stderr mentions none of {words:?}:\n{}",
        out.stderr
    );
    assert!(!run.report_path().exists(), "a report was written");
    assert_eq!(out.stdout, "", "something ran");
}

/// polyprof refuses a program file `name` holding `content`, naming one of `words`.
fn assert_refuses_file(name: &str, content: &[u8], words: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_refused(&run(&[], &path, &[], b""), words);
}

#[test]
fn bad_input_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let run = run(&[], &dir.path().join("does-not-exist"), &[], b"");
    assert_refused(&run, &["not found", "no such"]);
}

#[test]
fn bad_input_directory() {
    let dir = tempfile::tempdir().unwrap();
    assert_refused(&run(&[], dir.path(), &[], b""), &["directory"]);
}

#[test]
fn bad_input_not_an_elf_file() {
    assert_refuses_file("text", b"echo this is not a program\n", &["not an ELF"]);
}

#[test]
fn bad_input_shebang_script() {
    let script = b"#!/bin/sh\necho hello from the script\n";
    assert_refuses_file("script.sh", script, &["interpreter"]);
}

#[test]
fn bad_input_non_executable_elf() {
    let k = compile("args", &["-O1", "-g"]);
    let path = k.dir.path().join("not-executable");
    std::fs::copy(&k.path, &path).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = run(&[], &path, &[], b"");
    assert_refused(&run, &["executable"]);
}

#[test]
fn max_instructions_detaches_and_the_program_finishes() {
    let k = compile("busy", &["-O0", "-g"]);
    let run = run(&["--max-instructions", "50"], &k.path, &[], b"");
    assert_ran(&run, format!("h={}\n", busy_hash()), 0);
    let r = check_report(&run, &k.path, &[]);
    assert_eq!(r["trace"]["complete"], false, "{r:#}");
    assert_eq!(instructions(&r), 50, "{r:#}");
    assert_eq!(r["program"]["exit_code"], 0);
}

#[test]
fn stripped_binary_runs_with_a_warning() {
    let k = compile("busy", &["-O1", "-s"]);
    assert!(!k.elf().has_symtab(), "cc -s left a symbol table");
    let run = run(&[], &k.path, &[], b"");
    let out = &run.output;
    assert_ran(&run, format!("h={}\n", busy_hash()), 0);
    assert!(
        out.polyprof_lines()
            .iter()
            .any(|l| l.contains("stripped") || l.contains("symbols")),
        "no polyprof: warning about missing symbols:\n{}",
        out.stderr
    );
    let r = check_report(&run, &k.path, &[]);
    assert_eq!(r["program"]["exit_code"], 0);
    // main (found through the C runtime's call to it) is traced: its loop runs 1000 times.
    assert!(instructions(&r) > 1000, "{r:#}");
}

/// Ctrl-C while tracing stops the program and still reports what was traced (exit status
/// 130, a warning saying so).
#[test]
fn interrupting_reports_what_was_traced() {
    use std::process::{Command, Stdio};
    let k = compile("forever", &["-O1", "-g"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut child = Command::new(BIN)
        .arg("-o")
        .arg(&out)
        .arg(&k.path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the program to run, then interrupt.
    let mut line = String::new();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert_eq!(line, "started\n");
    std::thread::sleep(std::time::Duration::from_millis(300));
    // SAFETY: a plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupt again to skip"), "{stderr}");
    let r = tests::load_report(&out).unwrap_or_else(|e| panic!("{e}\n{stderr}"));
    assert!(instructions(&r) > 1000, "{r:#}");
    assert!(
        warnings(&r)
            .iter()
            .any(|w| w.contains("interrupted (SIGINT)")),
        "{r:#}"
    );
}

/// `timeout 3 polyprof PROGRAM` on a program that never ends: `timeout` sends SIGTERM to
/// polyprof and then to its whole process group (polyprof again, and the program). Tracing
/// ends, the program is killed, and the reports of what ran are written; polyprof exits with
/// 128 + SIGTERM. (The step engine keeps the trace, and so the test, short.)
#[test]
fn sigterm_from_timeout_leaves_a_partial_report() {
    use std::process::Command;
    let k = compile("forever", &["-O1", "-g"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut cmd = Command::new("timeout");
    cmd.args(["--preserve-status", "3", BIN, "--engine", "step", "-o"])
        .arg(&out)
        .arg(&k.path);
    let output = tests::run_with_deadline(cmd, b"");
    assert_eq!(output.stdout, "started\n", "{}", output.stderr);
    assert_eq!(output.code(), 128 + libc::SIGTERM, "{}", output.stderr);
    let r = tests::load_report(&out).unwrap_or_else(|e| panic!("{e}\n{}", output.stderr));
    assert!(instructions(&r) > 100, "{r:#}");
    assert_eq!(r["trace"]["complete"], false, "{r:#}");
    assert_eq!(r["trace"]["interrupted"], true, "{r:#}");
    assert!(
        warnings(&r)
            .iter()
            .any(|w| w.contains("interrupted (SIGTERM)")),
        "{r:#}"
    );
    assert!(
        r["hot_loops"].as_array().is_some_and(|l| !l.is_empty()),
        "{r:#}"
    );
    assert!(out.join("report.txt").is_file());
}

/// The scenario, `timeout -s TERM -k K T polyprof PROGRAM` with an analysis longer
/// than K: SIGTERM stops the tracing, SIGKILL comes during the analysis. The reports of the
/// trace were written before the analysis (parseable, saying it is in progress and how to
/// complete it), stderr named the command, and the recording is complete: `polyprof report
/// DIR` then writes the full analysis. `--dump-events` into a FIFO nobody reads holds the
/// analysis until the SIGKILL.
#[test]
fn sigkill_during_the_analysis_leaves_the_trace_report_and_the_command_that_completes_it() {
    use std::process::{Command, Stdio};
    let k = compile("forever", &["-O1", "-g"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut child = Command::new("timeout")
        .args(["-s", "TERM", "-k", "1", "2", BIN, "--engine", "step"])
        .args(["--dump-events", "-o"])
        .arg(&out)
        .arg(&k.path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert_eq!(line, "started\n");
    // The program runs: the output directory is there, and the analysis not yet.
    let fifo = out.join("events.txt");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo(3) with a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // polyprof never ended by itself: timeout killed it.
    assert!(
        output
            .status
            .code()
            .is_none_or(|c| c == 128 + libc::SIGKILL),
        "{:?}\n{stderr}",
        output.status
    );
    let command = format!("polyprof report {}", out.display());
    assert!(
        stderr.contains(&format!(
            "polyprof: the analysis continues; if it is cut short, `{command}` completes it"
        )),
        "{stderr}"
    );
    let r = tests::load_report(&out).unwrap_or_else(|e| panic!("{e}\n{stderr}"));
    assert_eq!(r["analysis"]["state"], "in_progress", "{r:#}");
    assert_eq!(r["analysis"]["complete_with"], command.as_str(), "{r:#}");
    assert_eq!(r["trace"]["interrupted"], true, "{r:#}");
    assert!(instructions(&r) > 100, "{r:#}");
    assert_eq!(r["hot_functions"][0]["name"], "main", "{r:#}");
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(text.contains("The analysis was in progress"), "{text}");
    assert!(text.contains(&format!("`{command}` completes")), "{text}");
    assert!(!text.contains("No region holds enough"), "{text}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!html.contains("No region holds enough"));
    let folded = std::fs::read_to_string(out.join("stacks.folded")).unwrap();
    assert!(folded.lines().any(|l| l.starts_with("main ")), "{folded}");
    assert!(out.join("flamegraph.svg").is_file());
    // Every file was replaced whole: no temporary file is left.
    for e in std::fs::read_dir(&out).unwrap() {
        let name = e.unwrap().file_name();
        assert!(!name.to_string_lossy().ends_with(".tmp"), "{name:?}");
    }

    // The recording is complete: `polyprof report DIR` does the analysis.
    let mut cmd = Command::new(BIN);
    cmd.arg("report").arg(&out);
    let again = tests::run_with_deadline(cmd, b"");
    assert_eq!(again.code(), 0, "{}", again.stderr);
    let r = tests::load_report(&out).unwrap_or_else(|e| panic!("{e}\n{}", again.stderr));
    assert_eq!(r["analysis"]["state"], "complete", "{r:#}");
    assert!(r["analysis"].get("complete_with").is_none(), "{r:#}");
    assert!(
        r["hot_loops"].as_array().is_some_and(|l| !l.is_empty()),
        "{r:#}"
    );
    assert!(
        r["regions"].as_array().is_some_and(|l| !l.is_empty()),
        "{r:#}"
    );
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(!text.contains("in progress"), "{text}");
}

/// A signal during the analysis skips the rest of it: the reports of what is ready are
/// written (here the trace alone), with a warning, and polyprof exits with 128 + the signal.
/// `polyprof report` analyses from the start; its `--dump-events` into a FIFO holds it inside
/// the analysis until the test reads, so the signal comes there for sure.
#[test]
fn a_signal_during_the_analysis_skips_to_the_reports() {
    use std::process::{Command, Stdio};
    let k = compile("busy", &["-O1", "-g"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let status = Command::new(BIN)
        .args(["record", "-q", "-o"])
        .arg(&out)
        .arg(&k.path)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let fifo = out.join("events.txt");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo(3) with a valid path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let child = Command::new(BIN)
        .arg("report")
        .arg(&out)
        .arg("--dump-events")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(tests::wait_for_handler(child.id(), libc::SIGHUP));
    for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGHUP] {
        // SAFETY: a plain kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, sig) };
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Let the dump start, and drain it.
    let mut events = String::new();
    std::io::Read::read_to_string(&mut std::fs::File::open(&fifo).unwrap(), &mut events).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(128 + libc::SIGHUP), "{stderr}");
    assert!(
        stderr.contains("skipping the rest of the analysis"),
        "{stderr}"
    );
    let r = tests::load_report(&out).unwrap_or_else(|e| panic!("{e}\n{stderr}"));
    let w = warnings(&r);
    assert!(
        w.iter()
            .any(|w| w.contains("interrupted (SIGHUP) during its analysis")
                && w.contains("the analysis was skipped")),
        "{w:?}"
    );
    assert!(
        w.iter().any(|w| w.contains("events.txt is incomplete")),
        "{w:?}"
    );
    assert!(instructions(&r) > 1000, "{r:#}");
    assert!(
        r["regions"].as_array().is_some_and(|r| r.is_empty()),
        "{r:#}"
    );
    // Skipped, said so, with the command that completes it; never "no region".
    let command = format!("polyprof report {}", out.display());
    assert_eq!(r["analysis"]["state"], "skipped", "{r:#}");
    assert_eq!(r["analysis"]["complete_with"], command.as_str(), "{r:#}");
    // Said by the watchdog as it writes the reports of the trace, or in the closing lines.
    assert!(
        stderr.contains(&format!("`{command}` completes")),
        "{stderr}"
    );
    let text = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(text.contains("The analysis was not done"), "{text}");
    assert!(!text.contains("No region holds enough"), "{text}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("The analysis was not done"));
    assert!(!html.contains("No region holds enough"));
}

/// A stripped program whose symbols and DWARF are in a separate debug file under the debug
/// root (`--debug-dir`, /usr/lib/debug by default), found by its build-id: named and located
/// as if it were not stripped.
#[test]
fn debug_files_are_found_by_build_id() {
    use std::process::Command;
    let k = compile("busy", &["-O1", "-g", "-Wl,--build-id"]);
    let id = k.elf().build_id().expect("a build-id");
    let root = k.dir.path().join("debug");
    let debug = root
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    for args in [
        vec![
            "--only-keep-debug".as_ref(),
            k.path.as_os_str(),
            debug.as_os_str(),
        ],
        vec!["--strip-all".as_ref(), k.path.as_os_str()],
    ] {
        let st = Command::new("objcopy").args(&args).status().unwrap();
        assert!(st.success(), "objcopy {args:?}");
    }
    assert!(!k.elf().has_symtab(), "objcopy --strip-all left symbols");
    let run = run(&["--debug-dir", root.to_str().unwrap()], &k.path, &[], b"");
    let out = &run.output;
    assert_eq!(out.stdout, format!("h={}\n", busy_hash()), "{}", out.stderr);
    assert_eq!(out.code(), 0, "{}", out.stderr);
    assert!(
        !out.stderr.contains("stripped") && !out.stderr.contains("no debug information"),
        "{}",
        out.stderr
    );
    let r = check_report(&run, &k.path, &[]);
    assert_eq!(r["trace"]["start"], "main", "{r:#}");
    let stacks: Vec<&str> = r["hot_loops"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["stack"].as_str())
        .collect();
    assert!(
        stacks.iter().any(|s| s.starts_with("main;loop busy.c:")),
        "{stacks:?}"
    );
    // The debug file is kept with the recording: reporting again names the same.
    std::fs::remove_dir_all(&root).unwrap();
    let again = Command::new(BIN)
        .args(["report", "-q"])
        .arg(&run.out)
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let r2 = tests::load_report(&run.out).unwrap();
    assert_eq!(r2["hot_loops"], r["hot_loops"]);
}
