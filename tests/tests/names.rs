//! Storage in source names (issue 18): dependences name the heap arrays by the variable that
//! receives the block (through `posix_memalign` in a wrapper, as PolyBench allocates, and
//! from `malloc` into a global) and a local array by its variable, at -O0 and -O2, in
//! report.json's `storage` and in report.txt.

use serde_json::Value;
use tests::{line_of, polyprof_bin, profile_every_loop, region_at_mark};

const KERNEL: &str = "names";

/// report.json and report.txt of the kernel at `opt`, every loop a region.
fn profile(opt: &str) -> (Value, String) {
    let run = profile_every_loop(polyprof_bin!(), KERNEL, &[opt, "-g"], &[]);
    let text = std::fs::read_to_string(run.out.join("report.txt")).expect("report.txt");
    (run.report(), text)
}

/// The storage names of the dependences of the region rooted at the loop marked `case`.
fn storages(r: &Value, case: &str) -> Vec<String> {
    region_at_mark(r, KERNEL, case)["dependences"]
        .as_array()
        .expect("dependences")
        .iter()
        .map(|d| d["storage"].as_str().expect("a storage name").to_string())
        .collect()
}

fn has(names: &[String], want: &str) -> bool {
    names.iter().any(|n| n == want)
}

#[test]
fn heap_arrays_and_local_arrays_are_named_by_their_variables_at_o0() {
    let (r, text) = profile("-O0");
    let alloc = line_of(KERNEL, "double *mat = xmalloc");
    let heap = storages(&r, "heap");
    let mat = format!("array `mat` (heap block allocated at names.c:{alloc})");
    assert!(has(&heap, &mat), "{heap:?}");
    let global = storages(&r, "global");
    let gbuf_line = line_of(KERNEL, "gbuf = malloc");
    let gbuf = format!("array `gbuf` (heap block allocated at names.c:{gbuf_line})");
    assert!(has(&global, &gbuf), "{global:?}");
    let local = storages(&r, "local");
    assert!(has(&local, "array `local` (stack of main)"), "{local:?}");
    let bare = mat.trim_start_matches("array ");
    assert!(
        text.contains(bare),
        "report.txt does not name `mat`:\n{text}"
    );
    // Not by the wrapper's line, nor by the kernel's parameter.
    let wrapper = line_of(KERNEL, "posix_memalign(&p");
    let kernel = line_of(KERNEL, "void kernel(");
    for bad in [
        "memory at 0x".to_string(),
        "stack slot of".to_string(),
        format!("allocated at names.c:{wrapper})"),
        format!("allocated at names.c:{kernel})"),
    ] {
        assert!(
            !text.contains(&bad),
            "report.txt names storage by {bad:?}:\n{text}"
        );
    }
}

#[test]
fn heap_and_local_arrays_keep_their_names_at_o2() {
    let (r, text) = profile("-O2");
    let alloc = line_of(KERNEL, "double *mat = xmalloc");
    let heap = storages(&r, "heap");
    let mat = format!("array `mat` (heap block allocated at names.c:{alloc})");
    assert!(has(&heap, &mat), "{heap:?}");
    for bad in ["memory at 0x", "a stack array of", "a stack slot of"] {
        assert!(
            !text.contains(bad),
            "report.txt names storage by {bad:?}:\n{text}"
        );
    }
}

/// PolyBench's allocation at -O2 (trmm's `main`): two blocks back to back through an
/// out-of-line wrapper, `B` kept in a register that debug information describes as `B` only
/// some instructions after it is filled. The kernel's array is `B`, not the wrapper's `p`.
#[test]
fn arrays_named_where_debug_information_describes_them_late_o2() {
    let run = profile_every_loop(polyprof_bin!(), "names_pair", &["-O2", "-g"], &[]);
    let r = run.report();
    let names: Vec<String> = region_at_mark(&r, "names_pair", "kernel")["dependences"]
        .as_array()
        .expect("dependences")
        .iter()
        .map(|d| d["storage"].as_str().expect("a storage name").to_string())
        .collect();
    let alloc = line_of("names_pair", "double(*B)[N] = alloc_data");
    let b = format!("array `B` (heap block allocated at names_pair.c:{alloc})");
    assert!(has(&names, &b), "{names:?}");
    assert!(!names.iter().any(|n| n.contains("`p`")), "{names:?}");
}

/// Advice in the program's own language: a Fortran program's parallel loops get Fortran's
/// OpenMP directive (`!$omp parallel do`), and no C pragma anywhere, at -O0 and -O2. (At -O0
/// gfortran's scalar SSE writes keep a register's upper half, which reads as a value carried
/// out of the loops: no parallel loop is suggested there yet.)
#[test]
fn fortran_gets_fortran_directives() {
    for opt in ["-O0", "-O2"] {
        let k = tests::compile_fortran("fmatmul", &[opt, "-g"]);
        let run = tests::polyprof(
            polyprof_bin!(),
            &[
                std::ffi::OsStr::new("--region-threshold"),
                std::ffi::OsStr::new("1"),
                k.path.as_os_str(),
            ],
            b"",
        );
        assert_eq!(run.output.code(), 0, "{}", run.output.stderr);
        let r = run.report();
        let texts: Vec<&str> = r["regions"]
            .as_array()
            .expect("regions")
            .iter()
            .flat_map(|reg| reg["suggestions"].as_array().into_iter().flatten())
            .filter_map(|s| s["text"].as_str())
            .collect();
        assert!(
            opt == "-O0" || texts.iter().any(|t| t.contains("`!$omp parallel do")),
            "{opt}: no Fortran directive in {texts:#?}"
        );
        assert!(
            !texts.iter().any(|t| t.contains("#pragma")),
            "{opt}: a C pragma for Fortran in {texts:#?}"
        );
    }
}

/// Local arrays declared in the body of the loop to run in parallel, their addresses computed
/// once before the loops (gcc -O2, as in Rodinia nw): they are each iteration's own in the
/// source, so the directive names them in no clause (`private(ref)` would not compile at
/// the `for`, where `ref` is not declared), and no text calls them "a stack array of" the
/// function, at -O0 and -O2.
#[test]
fn block_scoped_arrays_named_where_their_addresses_are_hoisted() {
    for opt in ["-O0", "-O2"] {
        let run = profile_every_loop(polyprof_bin!(), "names_block", &[opt, "-g"], &[]);
        let r = run.report();
        let region = region_at_mark(&r, "names_block", "blk");
        let texts: Vec<&str> = region["suggestions"]
            .as_array()
            .expect("suggestions")
            .iter()
            .filter(|s| s["kind"] == "parallelize")
            .filter_map(|s| s["text"].as_str())
            .collect();
        // (At -O0 the loop is not found parallel: its reads of `ref` are taken for values
        // from before the loop.)
        assert!(
            opt == "-O0" || !texts.is_empty(),
            "{opt}: no parallel advice"
        );
        for t in &texts {
            assert!(
                !t.contains("ref") && !t.contains("tile"),
                "{opt}: the loop's own arrays in a clause: {t}"
            );
        }
        let text = std::fs::read_to_string(run.out.join("report.txt")).expect("report.txt");
        assert!(!text.contains("a stack array of"), "{opt}:\n{text}");
        // At -O2 no advice needs the arrays, so no text mentions them; at -O0 the reasons
        // name them.
        assert!(opt == "-O2" || text.contains("`ref`"), "{opt}:\n{text}");
    }
}
