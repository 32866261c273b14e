//! Registers that only mirror an array element are that element (issue 38): gcc and gfortran
//! keep a matrix product's `C[i][j]` / `c(i, j)` in a register across the k loop at -O2, and
//! the advice must be the source's, at -O0 and -O2 alike: the interchange that makes the
//! innermost loop stride 1, with no register named in any suggestion.

use serde_json::Value;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use tests::{polyprof_bin, Kernel};

const BIN: &str = polyprof_bin!();

/// Runs polyprof on `kernel`, every loop nest analysed; returns report.json and report.txt.
fn profile(kernel: &Kernel) -> (Value, String) {
    let run = tests::polyprof(
        BIN,
        &[
            OsStr::new("--region-threshold"),
            OsStr::new("1"),
            kernel.path.as_os_str(),
        ],
        b"",
    );
    assert_eq!(run.output.code(), 0, "{}", run.output.stderr);
    let text = std::fs::read_to_string(run.out.join("report.txt")).expect("report.txt");
    (run.report(), text)
}

/// The region holding the loop at `file:line`, with that loop's id.
fn region_of<'r>(report: &'r Value, file: &str, line: usize) -> (&'r Value, String) {
    report["regions"]
        .as_array()
        .expect("regions")
        .iter()
        .find_map(|r| {
            let l = r["loops"].as_array()?.iter().find(|l| {
                l["location"]["line"].as_u64() == Some(line as u64)
                    && l["location"]["file"]
                        .as_str()
                        .is_some_and(|f| Path::new(f).file_name() == Some(OsStr::new(file)))
            })?;
            Some((r, l["id"].as_str()?.to_string()))
        })
        .unwrap_or_else(|| panic!("no region holds loop {file}:{line}"))
}

/// Whether a text names a machine register (`register xmm1`, `xmm1`, `rax`), not the word
/// alone ("a 16-byte vector register").
fn names_register(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
        let vector = ["xmm", "ymm", "zmm"].iter().any(|p| {
            w.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        });
        let general = matches!(
            w,
            "rax"
                | "rbx"
                | "rcx"
                | "rdx"
                | "rsi"
                | "rdi"
                | "rbp"
                | "rsp"
                | "eax"
                | "ebx"
                | "ecx"
                | "edx"
                | "esi"
                | "edi"
        ) || (w.len() <= 4
            && w.starts_with('r')
            && w[1..]
                .trim_end_matches(['d', 'w', 'b'])
                .parse::<u8>()
                .is_ok_and(|n| (8..16).contains(&n)));
        vector || general
    })
}

/// The matrix product's region gets an interchange whose innermost loop is the one at
/// `inner` (the stride-1 one), and none of its suggestions, nor report.txt's lines of
/// advice, names a register.
fn assert_interchange_without_registers(kernel: &Kernel, file: &str, inner: usize, what: &str) {
    let (report, text) = profile(kernel);
    let (region, inner_id) = region_of(&report, file, inner);
    let suggestions = region["suggestions"].as_array().expect("suggestions");
    let interchange = suggestions
        .iter()
        .find(|s| s["kind"] == "interchange")
        .unwrap_or_else(|| panic!("{what}: no interchange in {suggestions:#?}"));
    let loops = interchange["loops"].as_array().expect("loops");
    assert_eq!(
        loops.last().and_then(Value::as_str),
        Some(inner_id.as_str()),
        "{what}: {interchange:#}"
    );
    for s in suggestions {
        let t = s["text"].as_str().unwrap_or("");
        assert!(
            !names_register(t),
            "{what}: a register in a suggestion: {t}"
        );
        for r in s["requires"].as_array().into_iter().flatten() {
            let storage = r["storage"].as_str().unwrap_or("");
            assert!(!storage.contains("register"), "{what}: requires {r:#}");
        }
    }
    // report.txt: the region's block, its lines of advice.
    let id = region["id"].as_str().expect("region id");
    let block: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with(&format!("Region {id} ")))
        .take_while(|l| !l.trim_start().starts_with("Schedule:"))
        .collect();
    assert!(!block.is_empty(), "{what}: no block for {id} in report.txt");
    for l in block {
        assert!(
            !names_register(l),
            "{what}: report.txt names a register: {l}"
        );
    }
}

#[test]
fn c_matmul_gets_the_stride_1_interchange_without_registers() {
    let j = tests::line_of("check_matmul", "/* loop j */") as usize;
    for opt in ["-O0", "-O2"] {
        let k = tests::compile("check_matmul", &["-g", opt]);
        assert_interchange_without_registers(&k, "check_matmul.c", j, &format!("C {opt}"));
    }
}

/// gfortran's `c(i, j)` in a register across k, the i loop outermost: i innermost walks the
/// columns contiguously.
#[test]
fn fortran_matmul_gets_the_stride_1_interchange_without_registers() {
    if Command::new("gfortran").arg("--version").output().is_err() {
        eprintln!("note: gfortran is not installed (scripts/install-deps.sh installs it): skipped");
        return;
    }
    let src =
        std::fs::read_to_string(tests::kernels_dir().join("fmatmul_ijk.f90")).expect("the kernel");
    // The product's `do i` (the initialisation's comes first).
    let i = 1 + src
        .lines()
        .enumerate()
        .filter(|(_, l)| l.trim() == "do i = 1, n")
        .map(|(n, _)| n)
        .last()
        .expect("a `do i` line");
    for opt in ["-O0", "-O2"] {
        let k = tests::compile_fortran("fmatmul_ijk", &[opt, "-g"]);
        assert_interchange_without_registers(&k, "fmatmul_ijk.f90", i, &format!("Fortran {opt}"));
    }
}
