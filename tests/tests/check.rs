//! `polyprof check` end to end: kernels recorded once (at -O0, with `polyprof record`), then
//! transformations checked against their observed dependences. Every legal verdict is
//! confirmed by applying the transformation to the C source (the kernels' `-D` variants) and
//! comparing the output with the original's byte for byte (doubles printed with `%a`); every
//! illegal one on a kernel with a variant is shown to change the output.
//!
//! Loops are named by `file:line` of their loop statement (found by the `/* loop x */` marker
//! on their line), as report.txt shows them, or by report id.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;
use tests::{compile, compile_linked, line_of, polyprof_bin, run_with_timeout, Output};

const BIN: &str = polyprof_bin!();
/// Time limit of one native run of a kernel variant.
const RUN_LIMIT: Duration = Duration::from_secs(20);
/// Kernels' regions are small: every loop nest is analysed.
const THRESHOLD: &str = "1";

/// A kernel recorded once: its executable and the recording's directory.
struct Recorded {
    _dir: tempfile::TempDir,
    _kernel: tests::Kernel,
    out: PathBuf,
}

fn record(name: &str, level: &str) -> Recorded {
    let kernel = compile(name, &["-g", level]);
    let dir = tempfile::Builder::new()
        .prefix("polyprof-check-")
        .tempdir()
        .expect("creating a temporary directory");
    let out = dir.path().join("rec");
    let mut cmd = Command::new(BIN);
    cmd.arg("record")
        .arg("-q")
        .arg("-o")
        .arg(&out)
        .arg(&kernel.path);
    let o = run_with_timeout(cmd, b"", Duration::from_secs(120));
    assert_eq!(o.code(), 0, "recording {name}: {}", o.stderr);
    Recorded {
        _dir: dir,
        _kernel: kernel,
        out,
    }
}

fn recorded(name: &'static str) -> &'static Recorded {
    static MATMUL: OnceLock<Recorded> = OnceLock::new();
    static SEIDEL: OnceLock<Recorded> = OnceLock::new();
    static SHIFT: OnceLock<Recorded> = OnceLock::new();
    static LIBCALLS: OnceLock<Recorded> = OnceLock::new();
    static FUSE: OnceLock<Recorded> = OnceLock::new();
    static MATMUL_O2: OnceLock<Recorded> = OnceLock::new();
    static SEIDEL_O2: OnceLock<Recorded> = OnceLock::new();
    let cell = match name {
        "check_matmul" => &MATMUL,
        "check_seidel1d" => &SEIDEL,
        "check_shift" => &SHIFT,
        "legal_libcalls" => &LIBCALLS,
        "check_fuse" => &FUSE,
        "check_matmul_O2" => &MATMUL_O2,
        "check_seidel1d_O2" => &SEIDEL_O2,
        _ => panic!("no recording for {name}"),
    };
    cell.get_or_init(|| match name.strip_suffix("_O2") {
        Some(base) => record(base, "-O2"),
        None => record(name, "-O0"),
    })
}

/// `transform` on kernel `name` is refused (exit status 1), naming a `kind` dependence
/// through `storage`; returns the verdict.
fn assert_illegal(name: &'static str, transform: &str, kind: &str, storage: &str) -> Value {
    let (code, v) = verdict(name, transform);
    assert_eq!(code, 1, "{v:#}");
    assert!(!violations(&v, kind, storage).is_empty(), "{v:#}");
    v
}

/// `file:line` of the loop marked `/* loop <var> */` in kernel `name`.
fn loop_at(name: &str, var: &str) -> String {
    format!("{name}.c:{}", line_of(name, &format!("/* loop {var} */")))
}

/// `polyprof check` on a recording, with `args` before the directory.
fn check(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.arg("check")
        .arg("-q")
        .args(["--region-threshold", THRESHOLD])
        .args(args)
        .arg(dir);
    run_with_timeout(cmd, b"", Duration::from_secs(120))
}

/// The JSON verdict of `transform` on kernel `name`, with its exit status.
fn verdict(name: &'static str, transform: &str) -> (i32, Value) {
    let o = check(
        &recorded(name).out,
        &["--format", "json", "--transform", transform],
    );
    assert_ne!(o.code(), 2, "{transform}: a usage error: {}", o.stderr);
    let v: Value = serde_json::from_str(&o.stdout)
        .unwrap_or_else(|e| panic!("{transform}: not JSON ({e}): {}\n{}", o.stdout, o.stderr));
    (o.code(), v)
}

/// Output of kernel `name` built natively with `defines` (`-DX`).
fn output_with(name: &str, defines: &[&str]) -> String {
    let flags: Vec<String> = std::iter::once("-O0".to_string())
        .chain(defines.iter().map(|d| format!("-D{d}")))
        .collect();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let k = compile_linked(name, &flags, &[]);
    let o = run_with_timeout(Command::new(&k.path), b"", RUN_LIMIT);
    assert_eq!(o.code(), 0, "{name} {defines:?}: {}", o.stderr);
    assert!(!o.stdout.is_empty(), "{name} {defines:?} printed nothing");
    o.stdout
}

/// The transformation, applied to the source as `define`, keeps the output byte for byte.
fn assert_same_output(name: &str, define: &str) {
    assert!(
        output_with(name, &[define]) == output_with(name, &[]),
        "{name} with -D{define} prints something else than the original"
    );
}

/// The transformation, applied to the source as `define`, changes the output.
fn assert_other_output(name: &str, define: &str) {
    assert!(
        output_with(name, &[define]) != output_with(name, &[]),
        "{name} with -D{define} prints what the original prints: the kernel does not show the illegality"
    );
}

fn assert_legal(code: i32, v: &Value, what: &str) {
    assert_eq!(code, 0, "{what}: {v:#}");
    assert_eq!(v["verdict"], "legal", "{what}: {v:#}");
    assert_eq!(v["violations"].as_array().map(Vec::len), Some(0), "{what}");
    assert_eq!(v["one_to_one"], true, "{what}");
    assert!(v["dependences_checked"].as_u64().unwrap_or(0) > 0, "{what}");
}

/// The violations of a verdict of a given kind through a storage naming `storage`.
fn violations<'a>(v: &'a Value, kind: &str, storage: &str) -> Vec<&'a Value> {
    v["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .filter(|x| x["kind"] == kind && x["storage"].as_str().unwrap_or("").contains(storage))
        .collect()
}

#[test]
fn matmul_ikj_interchange_is_legal() {
    let (j, k) = (loop_at("check_matmul", "j"), loop_at("check_matmul", "k"));
    let (code, v) = verdict("check_matmul", &format!("interchange {j} {k}"));
    assert_legal(code, &v, "i-k-j");
    // The schedule puts k's iterations outside j's.
    assert_same_output("check_matmul", "IKJ");
}

#[test]
fn matmul_tiling_is_legal() {
    let l = |v| loop_at("check_matmul", v);
    let (code, v) = verdict(
        "check_matmul",
        &format!("tile {} {} {} 8", l("i"), l("j"), l("k")),
    );
    assert_legal(code, &v, "tile 8");
    assert!(
        v["schedule"].as_str().unwrap_or("").contains("floor"),
        "{v:#}"
    );
    assert_same_output("check_matmul", "TILE=8");
    // Tiling after the interchange too, loops named by report id.
    let ids: Vec<String> = v["loops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect();
    let (code, v) = verdict(
        "check_matmul",
        &format!(
            "interchange {} {}; tile {} {} {} 8; parallel {}",
            ids[1], ids[2], ids[0], ids[2], ids[1], ids[0]
        ),
    );
    assert_legal(code, &v, "i-k-j tiled, i parallel");
    assert_eq!(v["claims"][0]["holds"], true, "{v:#}");
}

/// At -O2 the sum of `C[i][j]` stays in a register across the k loop (loaded before it,
/// stored after it): that register is the element, so the i-k-j interchange is legal as it is
/// in the source, with no storage change and no register named; reversing k still is not.
#[test]
fn matmul_at_o2_accumulator_is_its_element() {
    let l = |v| loop_at("check_matmul", v);
    let (code, v) = verdict(
        "check_matmul_O2",
        &format!("interchange {} {}", l("j"), l("k")),
    );
    assert_legal(code, &v, "-O2 i-k-j");
    assert!(v["legal_after"].is_null(), "{v:#}");
    assert_same_output("check_matmul", "IKJ");
    let o = check(
        &recorded("check_matmul_O2").out,
        &["--transform", &format!("interchange {} {}", l("j"), l("k"))],
    );
    assert_eq!(o.code(), 0, "{}", o.stdout);
    // No storage change, no register named.
    assert!(!o.stdout.contains("xmm"), "{}", o.stdout);
    let (code, v) = verdict(
        "check_matmul_O2",
        &format!("interchange {} {}", l("i"), l("j")),
    );
    assert_legal(code, &v, "-O2 j-i-k");
    assert_same_output("check_matmul", "JIK");
    // The element's own order along k: reversing it changes the sum.
    let (code, v) = verdict("check_matmul_O2", &format!("reverse {}", l("k")));
    assert_eq!(code, 1, "{v:#}");
    assert!(v["legal_after"].is_null(), "{v:#}");
    assert!(!violations(&v, "flow", "`C`").is_empty(), "{v:#}");
}

/// At -O2 gcc carries seidel's `a[i - 1]` (just computed) and `a[i]` (loaded as the previous
/// iteration's `a[i + 1]`) in registers: they are those elements, so skewing then
/// interchanging or tiling is legal as in the source, and the interchange alone is not.
#[test]
fn seidel_at_o2_registers_are_its_elements() {
    let (t, i) = (
        loop_at("check_seidel1d", "t"),
        loop_at("check_seidel1d", "i"),
    );
    let (code, v) = verdict(
        "check_seidel1d_O2",
        &format!("skew {t} {i} 1; interchange {t} {i}"),
    );
    assert_legal(code, &v, "-O2 skew then interchange");
    assert!(v["legal_after"].is_null(), "{v:#}");
    assert_same_output("check_seidel1d", "SKEW");
    let (code, v) = verdict(
        "check_seidel1d_O2",
        &format!("skew {t} {i} 1; tile {t} {i} 16"),
    );
    assert_legal(code, &v, "-O2 skew then tile");
    // Without the skew, a time step's read of a[i + 1] would run before the previous step
    // wrote it.
    let v = assert_illegal(
        "check_seidel1d_O2",
        &format!("interchange {t} {i}"),
        "flow",
        "`a`",
    );
    assert!(v["legal_after"].is_null(), "{v:#}");
    let (code, _) = verdict(
        "check_seidel1d_O2",
        &format!("skew {t} {i} -1; interchange {t} {i}"),
    );
    assert_eq!(code, 1);
}

/// Reversing k breaks the flow dependence through `C` that the sum carries: no storage change
/// helps, and the reversed source sums in another order.
#[test]
fn matmul_reversed_k_is_illegal() {
    let k = loop_at("check_matmul", "k");
    let (code, v) = verdict("check_matmul", &format!("reverse {k}"));
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(v["verdict"], "illegal");
    let flow = violations(&v, "flow", "`C`");
    assert!(
        !flow.is_empty(),
        "no flow dependence through C named: {v:#}"
    );
    let f = flow[0];
    assert!(f["fix"].is_null(), "{f:#}");
    // The statement inside the profiled k loop.
    let line = format!(
        "check_matmul.c:{}",
        line_of("check_matmul", "/* loop k */") + 1
    );
    assert_eq!(f["source"]["line"], line.as_str(), "{f:#}");
    // The pair of instances: same i and j, consecutive k, the source first in the program.
    let (src, snk) = (&f["instances"]["source"], &f["instances"]["sink"]);
    let it = |x: &Value| -> Vec<i64> {
        x["iteration"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_i64().unwrap())
            .collect()
    };
    let (a, b) = (it(src), it(snk));
    assert_eq!(a.len(), 3, "{f:#}");
    assert_eq!((a[0], a[1]), (b[0], b[1]), "{f:#}");
    assert!(a[2] < b[2], "{f:#}");
    assert!(v["legal_after"].is_null(), "{v:#}");
    assert_other_output("check_matmul", "REVERSE_K");
    // The sentence names the kind, the storage and the line.
    let o = check(
        &recorded("check_matmul").out,
        &["--transform", &format!("reverse {k}")],
    );
    assert_eq!(o.code(), 1);
    assert!(
        o.stdout.contains("a flow dependence through array `C`") && o.stdout.contains(&line),
        "{}",
        o.stdout
    );
}

#[test]
fn seidel_interchange_is_illegal_and_legal_after_skew() {
    let (t, i) = (
        loop_at("check_seidel1d", "t"),
        loop_at("check_seidel1d", "i"),
    );
    assert_illegal(
        "check_seidel1d",
        &format!("interchange {t} {i}"),
        "flow",
        "`a`",
    );
    assert_other_output("check_seidel1d", "INTERCHANGE");
    // Tiling without the skew: the band is not permutable.
    let (code, v) = verdict("check_seidel1d", &format!("tile {t} {i} 16"));
    assert_eq!(code, 1, "{v:#}");
    assert!(
        violations(&v, "flow", "`a`")
            .iter()
            .any(|x| x["operation"] == format!("tile {t} {i} 16").as_str()),
        "{v:#}"
    );
    let (code, v) = verdict(
        "check_seidel1d",
        &format!("skew {t} {i} 1; interchange {t} {i}"),
    );
    assert_legal(code, &v, "skew then interchange");
    assert_same_output("check_seidel1d", "SKEW");
    let (code, v) = verdict(
        "check_seidel1d",
        &format!("skew {t} {i} 1; tile {t} {i} 16"),
    );
    assert_legal(code, &v, "skew then tile");
    assert_same_output("check_seidel1d", "SKEW_TILE=16");
    // A skew the wrong way does not help.
    let (code, _) = verdict(
        "check_seidel1d",
        &format!("skew {t} {i} -1; interchange {t} {i}"),
    );
    assert_eq!(code, 1);
}

#[test]
fn reversing_an_in_place_shift_names_the_anti_dependence() {
    let l = loop_at("check_shift", "shift");
    let (code, v) = verdict("check_shift", &format!("reverse {l}"));
    assert_eq!(code, 1, "{v:#}");
    let anti = violations(&v, "anti", "`a`");
    assert!(!anti.is_empty(), "no anti dependence through a: {v:#}");
    let a = anti[0];
    // Iteration i reads what iteration i + 1 overwrites: reversed, the write comes first.
    let n = |x: &Value| {
        x["iteration"]
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .as_i64()
            .unwrap()
    };
    let (src, snk) = (&a["instances"]["source"], &a["instances"]["sink"]);
    assert_eq!(n(snk), n(src) + 1, "{a:#}");
    assert_eq!(a["fix"]["change"], "copy_in", "{a:#}");
    assert!(violations(&v, "flow", "").is_empty(), "{v:#}");
    assert_other_output("check_shift", "REVERSE");
    let o = check(
        &recorded("check_shift").out,
        &["--transform", &format!("reverse {l}")],
    );
    assert_eq!(o.code(), 1);
    assert!(
        o.stdout.contains("an anti dependence through array `a`"),
        "{}",
        o.stdout
    );
}

#[test]
fn parallel_on_a_loop_calling_rand_is_illegal() {
    let line = line_of("legal_libcalls", "a[i] = rand()") - 1;
    let (code, v) = verdict(
        "legal_libcalls",
        &format!("parallel legal_libcalls.c:{line}"),
    );
    assert_eq!(code, 1, "{v:#}");
    let claim = &v["claims"][0];
    assert_eq!(claim["holds"], false, "{v:#}");
    assert!(
        claim["why"].as_str().unwrap_or("").contains("random"),
        "{claim:#}"
    );
    assert!(v["legal_after"].is_null(), "{v:#}");
    // The loop that prints is not parallel either.
    let line = line_of("legal_libcalls", "printf(\"%a\\n\", a[i])") - 1;
    let (code, _) = verdict(
        "legal_libcalls",
        &format!("parallel legal_libcalls.c:{line}"),
    );
    assert_eq!(code, 1);
}

/// Fusing two sibling loops where the second reads one element ahead of the first is
/// illegal; shifting the second by one iteration makes it legal, and the fused loop's
/// iterations are then independent.
#[test]
fn fusion_needs_a_shift() {
    let (a, b) = (
        loop_at("check_fuse", "first"),
        loop_at("check_fuse", "second"),
    );
    assert_illegal("check_fuse", &format!("fuse {a} {b}"), "flow", "`b`");
    assert_other_output("check_fuse", "FUSED");
    let (code, v) = verdict(
        "check_fuse",
        &format!("fuse {a} {b}; shift {b} 1; parallel {a}"),
    );
    assert_legal(code, &v, "fuse after shift");
    assert_eq!(v["claims"][0]["holds"], true, "{v:#}");
    assert_same_output("check_fuse", "FUSED_SHIFT");
    // Distributing the time loop is not: a time step reads what the previous one wrote.
    let (code, v) = verdict(
        "check_fuse",
        &format!("split {}", loop_at("check_fuse", "t")),
    );
    assert_eq!(code, 1, "{v:#}");
}

/// Exit 2 and one sentence on stderr for each kind of usage error.
#[test]
fn malformed_input_gets_exit_2_and_a_sentence() {
    let dir = &recorded("check_matmul").out;
    let j = loop_at("check_matmul", "j");
    let init = format!("check_matmul.c:{}", line_of("check_matmul", "for (int i"));
    for (args, says) in [
        (vec!["-t", "interchange"], "malformed"),
        (vec!["-t", "twist L1"], "unknown operation"),
        (vec!["-t", "tile L1 L2 0"], "SIZE"),
        (vec!["-t", "reverse nosuch.c:3"], "names no loop"),
        (vec!["-t", "interchange L999 L4"], "names no loop"),
        (
            vec!["-t", &format!("interchange {j} {init}")],
            "different regions",
        ),
        (vec!["-t", &format!("interchange {j} {j}")], "itself"),
        (vec!["-t", "# only a comment"], "no operation"),
        (
            vec!["-t", "schedule \"{ S0[i] -> [0] }\"; reverse L4"],
            "last",
        ),
        (
            vec!["--region", "R99", "-t", "reverse L4"],
            "no analysed region",
        ),
    ] {
        let o = check(dir, &args);
        assert_eq!(o.code(), 2, "{args:?}: {}{}", o.stdout, o.stderr);
        let lines = o.polyprof_lines();
        assert_eq!(lines.len(), 1, "{args:?}: {}", o.stderr);
        assert!(lines[0].contains(says), "{args:?}: {}", lines[0]);
        assert!(o.stdout.is_empty(), "{args:?}: {}", o.stdout);
    }
    // A loop outside every analysed region, with the threshold that leaves it out.
    let mut cmd = Command::new(BIN);
    cmd.args(["check", "-q", "--region-threshold", "50", "-t"])
        .arg(format!("reverse {init}"))
        .arg(dir);
    let o = run_with_timeout(cmd, b"", Duration::from_secs(120));
    assert_eq!(o.code(), 2, "{}", o.stderr);
    assert!(
        o.stderr.contains("outside every analysed region"),
        "{}",
        o.stderr
    );
    // JSON for tools: the sentence as a message.
    let o = check(dir, &["--format", "json", "-t", "reverse"]);
    assert_eq!(o.code(), 2);
    let v: Value = serde_json::from_str(&o.stdout).expect("JSON on stdout");
    assert_eq!(v["verdict"], "usage_error");
    assert!(v["message"].as_str().unwrap_or("").contains("malformed"));
}

/// A script file with comments; a program given instead of a recording (recorded first); a
/// schedule in isl notation.
#[test]
fn scripts_programs_and_isl_schedules() {
    let (j, k) = (loop_at("check_matmul", "j"), loop_at("check_matmul", "k"));
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("t.txt");
    std::fs::write(
        &script,
        format!("# i-k-j\ninterchange {j} {k}   # j innermost\n\nvectorize {j}\n"),
    )
    .unwrap();
    let kernel = compile("check_matmul", &["-g", "-O0"]);
    let mut cmd = Command::new(BIN);
    cmd.args(["check", "-q", "--region-threshold", THRESHOLD, "--script"])
        .arg(&script)
        .arg("-o")
        .arg(dir.path().join("out"))
        .arg(&kernel.path);
    let o = run_with_timeout(cmd, b"", Duration::from_secs(120));
    assert_eq!(o.code(), 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("legal:"), "{}", o.stdout);
    assert!(dir.path().join("out").join("recording").is_dir());

    // The shift loop's region, scheduled backwards in isl notation: the same anti dependence.
    let rec = &recorded("check_shift").out;
    let (_, v) = verdict(
        "check_shift",
        &format!("parallel {}", loop_at("check_shift", "shift")),
    );
    let region = v["region"].as_str().unwrap().to_string();
    let stmts: Vec<String> = v["schedule"]
        .as_str()
        .unwrap()
        .split(';')
        .filter_map(|p| p.trim().trim_start_matches('{').trim().split('[').next())
        .map(str::to_string)
        .collect();
    // A schedule of the region made of one piece per statement (`n`-th statement `s`).
    let check_schedule = |piece: &dyn Fn(usize, &str) -> String| {
        let map: Vec<String> = stmts.iter().enumerate().map(|(n, s)| piece(n, s)).collect();
        let t = format!("schedule \"{{ {} }}\"", map.join("; "));
        let o = check(rec, &["--region", &region, "--format", "json", "-t", &t]);
        let v: Value = serde_json::from_str(&o.stdout).unwrap();
        (o.code(), v)
    };
    let (code, v) = check_schedule(&|n, s| format!("{s}[i] -> [-i, {n}]"));
    assert_eq!(code, 1, "{v:#}");
    assert!(!violations(&v, "anti", "`a`").is_empty(), "{v:#}");
    // The same order forwards is the original: legal.
    let (code, v) = check_schedule(&|n, s| format!("{s}[i] -> [i, {n}]"));
    assert_eq!(code, 0, "{v:#}");
    // Two statements at one time: not one-to-one.
    let (code, v) = check_schedule(&|_, s| format!("{s}[i] -> [i, 0]"));
    assert_eq!(code, 1);
    assert_eq!(v["one_to_one"], false, "{v:#}");
}
