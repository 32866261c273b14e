//! OpenMP programs traced whole (issue 39): built with `-fopenmp` and run with no environment
//! set, the program runs with one OpenMP thread, its outlined parallel bodies are traced as
//! the runtime calls them back (inside their source nest), a `qsort` comparator too, and each
//! of its own `#pragma omp parallel for` loops gets its verdict from the dependences
//! observed: a stencil is parallel as written, a planted race is a race, a reduction with its
//! clause is parallel, one without it lacks `reduction(+: u)`, a shared temporary lacks
//! `private(t)`, a `private(d)` whose value passes from iteration to iteration is a race;
//! partial sums in rows indexed by the thread number are parallel (with one
//! thread every iteration uses row 0), and so is a stencil by chunks whose shared pointer gcc
//! -O2 spills and restores around the interior loop (a register that holds one value all
//! along the loop), and so is a loop over columns gcc -O2 names by a line of its inner loop's
//! body (not merged with it: its own `for` is below the directive); the program's own `omp_set_num_threads(4)` starts no thread. At -O0 and
//! -O2 (where gcc keeps the stencil's `a[i + 1]` in a register for the next iteration, and the
//! shared `u` in a register for the whole loop).

use serde_json::Value;
use std::process::Command;
use tests::{compile_linked, line_of, load_report, polyprof_bin, run_with_deadline};

const KERNEL: &str = "omp_own";

/// The verdict of the loop with an `openmp` verdict named within two lines of the marker
/// (gcc names a loop by its `for` line or a line of its body).
fn verdict_at(r: &Value, marker: &str) -> Value {
    let line = i64::from(line_of(KERNEL, marker));
    let loops: Vec<&Value> = r["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .flat_map(|g| g["all_loops"].as_array().expect("all_loops"))
        .filter(|l| !l["openmp"].is_null())
        .collect();
    loops
        .iter()
        .find(|l| {
            let at = l["location"]["line"].as_i64().unwrap_or(0);
            (line - 1..=line + 2).contains(&at)
        })
        .map(|l| l["openmp"].clone())
        .unwrap_or_else(|| {
            let all: Vec<String> = loops.iter().map(|l| l.to_string()).collect();
            panic!("no verdict for the loop at line {line} ({marker}): {all:#?}")
        })
}

/// The verdict of the loop of outlined body `body` (`chunks._omp_fn.0`): gcc names the
/// chunk loop by its `continue` at -O0, by its `for` at -O2.
fn verdict_of_body(r: &Value, body: &str) -> Value {
    r["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .flat_map(|g| g["all_loops"].as_array().expect("all_loops"))
        .find(|l| {
            l["openmp"]["body"]
                .as_str()
                .is_some_and(|b| b.starts_with(body))
        })
        .map(|l| l["openmp"].clone())
        .unwrap_or_else(|| panic!("no verdict for a loop of {body}"))
}

fn check(opt: &str) {
    let k = compile_linked(KERNEL, &[opt, "-g", "-fopenmp"], &[]);
    let mut native = Command::new(&k.path);
    // One thread, though the program asks for four itself.
    native
        .env("OMP_NUM_THREADS", "1")
        .env("OMP_THREAD_LIMIT", "1");
    let native = run_with_deadline(native, b"");
    assert!(native.status.success(), "{native:?}");

    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    let mut cmd = Command::new(polyprof_bin!());
    cmd.env_remove("OMP_NUM_THREADS")
        .env_remove("OMP_THREAD_LIMIT")
        .arg("-o")
        .arg(&out)
        .arg(&k.path);
    let run = run_with_deadline(cmd, b"");
    assert!(run.status.success(), "{opt}: {}", run.stderr);
    // One thread: the program's output is that of its one-thread run.
    assert_eq!(run.stdout, native.stdout, "{opt}");
    let r = load_report(&out).expect("report.json");
    let warnings = r["trace"]["warnings"].to_string();
    assert!(
        warnings.contains("OpenMP (libgomp)") && warnings.contains("OMP_NUM_THREADS=1"),
        "{opt}: {warnings}"
    );
    assert!(!warnings.contains("not traced (id"), "{opt}: {warnings}");

    // The outlined bodies run inside their source nest, and the comparator inside qsort.
    let stacks = std::fs::read_to_string(out.join("stacks.folded")).expect("stacks.folded");
    assert!(
        stacks
            .lines()
            .any(|l| l.contains("call GOMP_parallel;main._omp_fn.")),
        "{opt}: {stacks}"
    );
    assert!(
        stacks.lines().any(|l| l.contains("call qsort;by_value")),
        "{opt}: {stacks}"
    );

    let verdict = |marker: &str| {
        let v = verdict_at(&r, marker);
        (
            v["verdict"].as_str().unwrap_or("?").to_string(),
            v["missing"].to_string(),
            v,
        )
    };
    let (v, _, all) = verdict("/* stencil */");
    assert_eq!(v, "parallel", "{opt}: {all:#}");
    let (v, _, all) = verdict("/* race */");
    assert_eq!(v, "race", "{opt}: {all:#}");
    let (v, _, all) = verdict("/* reduction */");
    assert_eq!(v, "parallel", "{opt}: {all:#}");
    assert!(
        all["directive"]
            .as_str()
            .is_some_and(|d| d.contains("reduction(+ : s)")),
        "{opt}: {all:#}"
    );
    let (v, missing, all) = verdict("/* unreduced */");
    assert_eq!(v, "reduction_needed", "{opt}: {all:#}");
    assert!(missing.contains("reduction(+: u)"), "{opt}: {all:#}");
    let (v, missing, all) = verdict("/* shared temporary */");
    assert_eq!(v, "private_needed", "{opt}: {all:#}");
    assert!(missing.contains("private(t)"), "{opt}: {all:#}");

    // An iteration reads the `d` an earlier one left in its private copy: another thread's
    // copy holds another value.
    let (v, _, all) = verdict("/* stale private */");
    assert_eq!(v, "race", "{opt}: {all:#}");
    assert!(
        all["text"].as_str().is_some_and(|t| t.contains("`d`")),
        "{opt}: {all:#}"
    );
    let (v, _, all) = verdict("/* per-thread rows */");
    assert_eq!(v, "parallel", "{opt}: {all:#}");
    let all = verdict_of_body(&r, "chunks._omp_fn.");
    assert_eq!(all["verdict"], "parallel", "{opt}: {all:#}");
    let all = verdict_of_body(&r, "derivatives._omp_fn.");
    assert_eq!(all["verdict"], "parallel", "{opt}: {all:#}");

    let text = std::fs::read_to_string(out.join("report.txt")).expect("report.txt");
    assert!(
        text.contains("The program's own parallel loops") && text.contains("RACE"),
        "{opt}: {text}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    assert!(html.contains("race"), "{opt}");
}

#[test]
fn own_parallel_loops_are_checked_at_o0() {
    check("-O0");
}

#[test]
fn own_parallel_loops_are_checked_at_o2() {
    check("-O2");
}

/// A time loop around a step gcc inlines into the time loop's function, the step's parallel
/// loop outlined (Rodinia's hotspot with -fopenmp): the time loop starts in the step's code
/// and its back edge is a block the caller's frame names by a line of the step's, but the
/// time loop is named by its own `for`, as in the serial build.
#[test]
fn a_time_loop_around_an_inlined_parallel_step_is_named_by_its_for() {
    let k = compile_linked("omp_steps", &["-O2", "-g", "-fopenmp"], &[]);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let out = dir.path().join("out");
    let mut cmd = Command::new(polyprof_bin!());
    cmd.arg("-o").arg(&out).arg(&k.path);
    let run = run_with_deadline(cmd, b"");
    assert!(run.status.success(), "{}", run.stderr);
    let stacks = std::fs::read_to_string(out.join("stacks.folded")).expect("stacks.folded");
    let time = format!(
        "steps;loop omp_steps.c:{} ",
        line_of("omp_steps", "/* time steps */")
    );
    assert!(stacks.lines().any(|l| l.contains(&time)), "{stacks}");
}
