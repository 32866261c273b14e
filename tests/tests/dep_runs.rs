//! Dependence runs against dependences one by one: the second pass sends a dependence that
//! repeats along an innermost loop as one run, folded in constant time. The reports must be
//! the same as when every dependence goes on its own (`POLYPROF_DEP_RUNS=0`, the reference
//! path): each kernel is traced once, and its recording analysed both ways.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use tests::{compile_linked, polyprof, polyprof_bin, run_with_deadline};

/// report.json without what is measured (seconds, rates), which differs from run to run.
fn unmeasured(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.contains("seconds") && !k.contains("per_second"));
            m.values_mut().for_each(unmeasured);
        }
        Value::Array(a) => a.iter_mut().for_each(unmeasured),
        _ => {}
    }
}

/// `polyprof report` on a copy of the recording in `out`, with runs on or off.
fn report(out: &Path, runs: bool) -> Value {
    let dir = out.with_file_name(if runs { "runs" } else { "one-by-one" });
    let cp = Command::new("cp")
        .arg("-r")
        .arg(out)
        .arg(&dir)
        .status()
        .expect("cp");
    assert!(cp.success());
    let mut cmd = Command::new(polyprof_bin!());
    cmd.arg("report")
        .arg(&dir)
        .env("POLYPROF_DEP_RUNS", if runs { "1" } else { "0" });
    let o = run_with_deadline(cmd, b"");
    assert_eq!(o.code(), 0, "{}", o.stderr);
    let mut v = tests::load_report(&dir).unwrap_or_else(|e| panic!("{e}"));
    unmeasured(&mut v);
    v
}

fn same_reports(kernel: &str, opt: &str) {
    let k = compile_linked(kernel, &[opt, "-g"], &["-lm"]);
    let run = polyprof(polyprof_bin!(), &[k.path.as_os_str()], b"");
    assert_eq!(run.output.code(), 0, "{}", run.output.stderr);
    let (a, b) = (report(&run.out, true), report(&run.out, false));
    assert!(
        a["regions"].as_array().is_some_and(|r| !r.is_empty()),
        "{kernel} {opt}: no region to compare"
    );
    if a != b {
        let (a, b) = (
            serde_json::to_string_pretty(&a).unwrap_or_default(),
            serde_json::to_string_pretty(&b).unwrap_or_default(),
        );
        let first = a
            .lines()
            .zip(b.lines())
            .position(|(x, y)| x != y)
            .unwrap_or(0);
        let around = |s: &str| {
            s.lines()
                .skip(first.saturating_sub(5))
                .take(12)
                .collect::<Vec<_>>()
                .join("\n")
        };
        panic!(
            "{kernel} {opt}: runs and one by one differ at line {first} of report.json:\n--- runs\n{}\n--- one by one\n{}",
            around(&a),
            around(&b)
        );
    }
}

macro_rules! kernels {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                same_reports(stringify!($name), "-O0");
                same_reports(stringify!($name), "-O2");
            }
        )*
    };
}

// The legality suite's kernels, the snapshot and storage kernels, and kernels with library
// calls, recursion, reductions and SIMD code (several producer instances per consumer).
kernels!(
    legal_argmin,
    legal_array_reduction,
    legal_counter,
    legal_covariance,
    legal_doitgen,
    legal_doitgen_ptr,
    legal_imperfect,
    legal_jacobi2d,
    legal_last,
    legal_libcalls,
    legal_matmul,
    legal_merged,
    legal_recur_cols,
    legal_reduction,
    legal_seidel1d,
    legal_shared_scalar,
    legal_shift,
    legal_sse,
    legal_stale,
    legal_stencil2d,
    legal_symm,
    legal_transpose,
    legal_trmm,
    legal_unrolled,
    matmul,
    names,
    st_aos,
    st_stencil,
    st_tile,
    fb_gather,
    fb_recur,
    recursion,
    red_pair,
    vecint,
    cmp_carried,
    sched_lu,
);
