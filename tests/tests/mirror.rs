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
    let (json, text, _) = profile_all(kernel);
    (json, text)
}

/// [`profile`], with report.html too.
fn profile_all(kernel: &Kernel) -> (Value, String, String) {
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
    let html = std::fs::read_to_string(run.out.join("report.html")).expect("report.html");
    (run.report(), text, html)
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
    let i = tests::line_of("check_matmul", "/* loop i */") as usize;
    let j = tests::line_of("check_matmul", "/* loop j */") as usize;
    for opt in ["-O0", "-O2"] {
        let k = tests::compile("check_matmul", &["-g", opt]);
        let what = format!("C {opt}");
        assert_interchange_without_registers(&k, "check_matmul.c", j, &what);
        let (report, _) = profile(&k);
        let (region, i_id) = region_of(&report, "check_matmul.c", i);
        assert_parallel_text(region, &i_id, "`#pragma omp parallel for", &what);
        assert_every_region_plain(&report, &what);
    }
}

/// The parallel advice on loop `id` of `region` in the language's own form, `form`.
fn assert_parallel_text(region: &Value, id: &str, form: &str, what: &str) {
    let suggestions = region["suggestions"].as_array().expect("suggestions");
    let parallel = suggestions
        .iter()
        .find(|s| s["kind"] == "parallelize" && s["loops"][0] == id)
        .unwrap_or_else(|| panic!("{what}: no parallel advice on {id}: {suggestions:#?}"));
    let text = parallel["text"].as_str().unwrap_or("");
    assert!(text.contains(form), "{what}: {text}");
}

/// [`assert_plain_texts`] on every region of a report, the library's loops too (a C++
/// `vector`'s constructor, Rust's formatting).
fn assert_every_region_plain(report: &Value, what: &str) {
    for r in report["regions"].as_array().expect("regions") {
        assert_plain_texts(r, &format!("{what}, region {}", r["id"]));
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
        let what = format!("Fortran {opt}");
        assert_interchange_without_registers(&k, "fmatmul_ijk.f90", i, &what);
        let (report, text) = profile(&k);
        let (region, _) = region_of(&report, "fmatmul_ijk.f90", i);
        // Fortran's own directive on one of the product's loops, no C pragma anywhere.
        let directive = region["suggestions"]
            .as_array()
            .expect("suggestions")
            .iter()
            .filter(|s| s["kind"] == "parallelize")
            .filter_map(|s| s["text"].as_str())
            .any(|t| t.contains("`!$omp parallel do"));
        assert!(directive, "{what}: no `!$omp parallel do`: {region:#}");
        assert!(
            !text.contains("#pragma"),
            "{what}: a C pragma in report.txt"
        );
        assert_every_region_plain(&report, &what);
    }
}

/// Whether a text holds a run-time address (`0x7fff...`); `2.00x` is a factor.
fn holds_address(text: &str) -> bool {
    text.as_bytes()
        .windows(3)
        .any(|w| w[0] == b'0' && w[1] == b'x' && w[2].is_ascii_hexdigit())
}

/// Every text of a region's suggestions and why-nots: no address, no "line 0", none over
/// 600 characters, no list of anonymous stack slots.
fn assert_plain_texts(region: &Value, what: &str) {
    fn texts<'v>(v: &'v Value, out: &mut Vec<&'v str>) {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(a) => a.iter().for_each(|x| texts(x, out)),
            Value::Object(o) => o
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "relation" | "address"))
                .for_each(|(_, x)| texts(x, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    texts(&region["suggestions"], &mut all);
    texts(&region["why_not"], &mut all);
    for t in all {
        assert!(!holds_address(t), "{what}: an address in {t}");
        assert!(!t.contains("line 0"), "{what}: line 0 in {t}");
        // The program's own frames name their slots; the Rust standard library's code
        // (its float formatting) comes without variable debug information.
        let anonymous = t.match_indices("stack slot of ").any(|(at, m)| {
            let frame = &t[at + m.len()..];
            !["core::", "std::", "alloc::"]
                .iter()
                .any(|lib| frame.trim_start_matches('`').starts_with(lib))
        });
        assert!(!anonymous, "{what}: anonymous stack slots in {t}");
        assert!(!names_register(t), "{what}: a register in {t}");
    }
    for s in region["suggestions"].as_array().into_iter().flatten() {
        let t = s["text"].as_str().unwrap_or("");
        assert!(
            t.chars().count() <= 600,
            "{what}: {} characters: {t}",
            t.len()
        );
    }
}

/// A C++ `vector<vector<double>>` product, i-j-k (g++ -O0 calls `operator[]`, -O2 inlines
/// it): the j/k interchange, no register, and the rows named by the program's lines.
#[test]
fn cxx_vector_matmul_gets_the_stride_1_interchange_without_registers() {
    let j = tests::line_of_file("cxx_matmul.cpp", "// loop j") as usize;
    let i = tests::line_of_file("cxx_matmul.cpp", "// loop i") as usize;
    for opt in ["-O0", "-O2"] {
        let k = tests::compile_cxx("cxx_matmul", &["-g", opt]);
        let what = format!("C++ {opt}");
        assert_interchange_without_registers(&k, "cxx_matmul.cpp", j, &what);
        let (report, text) = profile(&k);
        let (region, i_id) = region_of(&report, "cxx_matmul.cpp", i);
        assert_plain_texts(region, &what);
        assert_parallel_text(region, &i_id, "`#pragma omp parallel for", &what);
        assert_every_region_plain(&report, &what);
        let block: String = text
            .lines()
            .skip_while(|l| {
                !l.starts_with(&format!("Region {} ", region["id"].as_str().unwrap_or("?")))
            })
            .take_while(|l| !l.trim_start().starts_with("Schedule:"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            !block.contains("memory at"),
            "{what}: unnamed storage:\n{block}"
        );
        // The rows' storage by the vector whose constructor stores their pointers through
        // `this`: found by the address `main` computes for `b` (-O0), or keeps in rbp across
        // the constructor's call, which stores the outer vector's start and end with one
        // vector instruction (-O2).
        let named = "`b[...]` (heap block allocated at cxx_matmul.cpp:";
        assert!(
            block.contains(named),
            "{what}: b's rows not named:\n{block}"
        );
        assert!(
            !block.contains("allocated at stl_") && !block.contains("allocated at new_allocator"),
            "{what}: storage named by library lines:\n{block}"
        );
    }
}

/// A Rust product over flat `Vec<f64>`s, i-j-k (rustc -O0 calls `Range::next` and
/// `index_mut`, -O inlines them): the j/k interchange, no register, loops named by the lines
/// of rs_matmul.rs, plain texts.
#[test]
fn rust_matmul_gets_the_stride_1_interchange_named_by_its_lines() {
    let line = |m| tests::line_of_file("rs_matmul.rs", m) as usize - 1;
    let (i, j, k) = (line("// loop i"), line("// loop j"), line("// loop k"));
    for opt in [&["-C", "opt-level=0"][..], &["-O"][..]] {
        let mut flags = vec!["-g"];
        flags.extend_from_slice(opt);
        let kernel = tests::compile_rust("rs_matmul", &flags);
        let what = format!("Rust {opt:?}");
        assert_interchange_without_registers(&kernel, "rs_matmul.rs", j, &what);
        let (report, text, html) = profile_all(&kernel);
        let (region, i_id) = region_of(&report, "rs_matmul.rs", i);
        assert_rayon_advice(region, &i_id, opt == ["-O"], &what);
        // Rust has no OpenMP: no directive anywhere in its reports.
        let json = serde_json::to_string(&report).expect("report.json");
        for (file, body) in [
            ("report.txt", &text),
            ("report.json", &json),
            ("report.html", &html),
        ] {
            assert!(!body.contains("#pragma"), "{what}: a #pragma in {file}");
            assert!(
                !body.contains("!$omp"),
                "{what}: an OpenMP directive in {file}"
            );
        }
        let _ = region_of(&report, "rs_matmul.rs", k);
        assert_plain_texts(region, &what);
        assert_every_region_plain(&report, &what);
        // The product's heap storage by its variables (`b`, read with stride n), not by the
        // standard library's parameters (`slice`, `self`).
        let storages: Vec<&str> = region["dependences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["storage"].as_str())
            .collect();
        let suggestions = serde_json::to_string(&region["suggestions"]).expect("suggestions");
        for s in storages.iter().copied().chain([suggestions.as_str()]) {
            assert!(
                !s.contains("`slice`") && !s.contains("`self`"),
                "{what}: storage named by the library: {s}"
            );
        }
        assert!(
            text.contains("`b` (heap block allocated at rs_matmul.rs:"),
            "{what}: `b` not named in report.txt"
        );
        for l in region["loops"].as_array().expect("loops") {
            let file = l["location"]["file"].as_str().unwrap_or("");
            assert!(file.ends_with("rs_matmul.rs"), "{what}: loop {l:#}");
        }
        // The nests' frames in the flame graph's stacks: the user's lines, not the iterator's.
        for l in text.lines().filter(|l| l.contains("rs_matmul::main;loop")) {
            let frames = l.split("rs_matmul::main;").nth(1).unwrap_or("");
            assert!(
                !frames.contains("range.rs:") && !frames.contains("main+"),
                "{what}: {l}"
            );
        }
    }
}

/// The Rust product's parallel advice on its i loop in rayon's form: an iterator over the
/// loop's range, or (where `rustc -O` leaves the writes to `c` visible as its rows) `c`
/// split by rows; and its vector advice without a directive.
fn assert_rayon_advice(region: &Value, i_id: &str, optimized: bool, what: &str) {
    let suggestions = region["suggestions"].as_array().expect("suggestions");
    let parallel = suggestions
        .iter()
        .find(|s| s["kind"] == "parallelize" && s["loops"][0] == i_id)
        .unwrap_or_else(|| panic!("{what}: no parallel advice on {i_id}: {suggestions:#?}"));
    let text = parallel["text"].as_str().unwrap_or("");
    assert!(text.contains("with rayon"), "{what}: {text}");
    assert!(
        text.contains(".into_par_iter().for_each(|i| ...)") || text.contains("par_chunks_mut("),
        "{what}: {text}"
    );
    if optimized {
        assert!(
            text.contains("`c.par_chunks_mut(n).enumerate().for_each(|(i, c_row)| ...)`"),
            "{what}: {text}"
        );
    }
    for s in suggestions.iter().filter(|s| s["kind"] == "vectorize") {
        let t = s["text"].as_str().unwrap_or("");
        assert!(t.contains("Rust has no directive"), "{what}: {t}");
    }
    let after = region["code_after"].as_str().unwrap_or("");
    assert!(after.contains("// rayon: "), "{what}: {after}");
}
