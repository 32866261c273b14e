//! The code "after the advice" is the ranked advice composed (issue 36): on trmm, matmul and
//! 2mm shapes its loop order is the best-ranked interchange's, its one parallel pragma per
//! nest is the best-ranked parallelization's directive on that suggestion's loop, and no
//! skipped parallelization says a loop does "0 instructions of work".

use serde_json::Value;
use std::ffi::OsStr;
use tests::{compile_linked, polyprof, polyprof_bin};

/// report.json and report.txt of a kernel, every region reported.
fn profile(name: &str, flags: &[&str]) -> (Value, String) {
    let k = compile_linked(name, flags, &["-lm"]);
    let args: Vec<&OsStr> = vec![
        OsStr::new("--region-threshold"),
        OsStr::new("1"),
        k.path.as_os_str(),
    ];
    // flame_mm exits with its checksum: the report is what counts.
    let run = polyprof(polyprof_bin!(), &args, b"");
    let txt = std::fs::read_to_string(run.out.join("report.txt")).expect("report.txt");
    (run.report(), txt)
}

const LOOP_KINDS: [&str; 7] = [
    "interchange",
    "tile",
    "parallelize",
    "vectorize",
    "skew",
    "fuse",
    "distribute",
];

/// The loop suggestions the after-code composes: those not skipped, in rank order, or all of
/// them when each is skipped.
fn pool(reg: &Value) -> Vec<&Value> {
    let all: Vec<&Value> = reg["suggestions"]
        .as_array()
        .expect("suggestions")
        .iter()
        .filter(|s| LOOP_KINDS.contains(&s["kind"].as_str().unwrap_or("")))
        .collect();
    let live: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|s| s.get("skipped").is_none_or(Value::is_null))
        .collect();
    if live.is_empty() {
        all
    } else {
        live
    }
}

/// The loop id a code line's comment names (`// k.c:17 (L7)` gives `L7`; tile loops none).
fn loop_id(line: &str) -> Option<&str> {
    let comment = &line[line.find("//")?..];
    if comment.contains("tiles of") || !line.trim_start().starts_with("for ") {
        return None;
    }
    let open = comment.rfind("(L")?;
    Some(comment[open + 1..].trim_end_matches(')'))
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// The loop ids around the most deeply nested statement of the code, outermost first.
fn deepest_chain(code: &str) -> Vec<String> {
    let lines: Vec<&str> = code.lines().collect();
    let Some(deep) = (0..lines.len())
        .filter(|&i| !lines[i].trim_start().starts_with("for ") && lines[i].contains("//"))
        .max_by_key(|&i| indent(lines[i]))
    else {
        return Vec::new();
    };
    let mut chain = Vec::new();
    let mut level = indent(lines[deep]);
    for i in (0..deep).rev() {
        if indent(lines[i]) < level && lines[i].trim_start().starts_with("for ") {
            level = indent(lines[i]);
            if let Some(id) = loop_id(lines[i]) {
                chain.push(id.to_string());
            }
        }
    }
    chain.reverse();
    chain
}

/// Checks a region's after-code against its ranked suggestions.
fn assert_after_is_the_advice(reg: &Value, what: &str) {
    let code = reg["code_after"].as_str().unwrap_or("");
    assert!(!code.is_empty(), "{what}: no code after the advice");
    let pool = pool(reg);
    let Some(head) = pool.first() else {
        return;
    };
    let lines: Vec<&str> = code.lines().collect();
    // Parallel pragmas: each a ranked parallelization's, on its loop, never nested.
    let rank_of = |kind: &str| pool.iter().position(|s| s["kind"] == kind);
    let parallel = pool.iter().find(|s| s["kind"] == "parallelize");
    // One directive per loop: a better-ranked vectorization of the same loop wins.
    let vector_first = parallel.is_some_and(|p| {
        pool.iter()
            .position(|s| s["kind"] == "vectorize" && s["loops"][0] == p["loops"][0])
            .is_some_and(|v| Some(v) < rank_of("parallelize"))
    });
    let mut open_parallel: Vec<usize> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        open_parallel.retain(|&d| indent(l) > d);
        if !l.trim_start().starts_with("#pragma omp parallel") {
            continue;
        }
        assert!(
            open_parallel.is_empty(),
            "{what}: a parallel loop nested in a parallel loop:\n{code}"
        );
        open_parallel.push(indent(l));
        // The parallelization of the loop it stands on, printed as that suggestion prints it.
        let id = lines.get(i + 1).and_then(|n| loop_id(n));
        let p = pool
            .iter()
            .find(|s| s["kind"] == "parallelize" && s["loops"][0].as_str() == id)
            .unwrap_or_else(|| {
                panic!("{what}: a parallel pragma on {id:?} that no suggestion names:\n{code}")
            });
        let text = p["text"].as_str().unwrap_or("");
        assert!(
            text.contains(&format!("`{}`", l.trim())),
            "{what}: pragma {l:?} is not the one the suggestion prints: {text}"
        );
    }
    if parallel.is_some()
        && !vector_first
        && !["skew", "fuse", "distribute"].contains(&head["kind"].as_str().unwrap_or(""))
    {
        assert!(
            lines
                .iter()
                .any(|l| l.trim_start().starts_with("#pragma omp parallel")),
            "{what}: the best-ranked parallelization is not in the code:\n{code}"
        );
    }
    // The loop order: the best-ranked interchange's, when the advice is not isl's schedule.
    if head["kind"] == "interchange" {
        let order: Vec<String> = head["loops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            deepest_chain(code),
            order,
            "{what}: the loop order is not the interchange's:\n{code}"
        );
    }
}

#[test]
fn after_code_is_the_ranked_advice() {
    for (name, flags) in [
        ("legal_trmm", &["-O2", "-g"][..]),
        ("sched_trmm", &["-O1", "-g"][..]),
        ("legal_matmul", &["-O1", "-g"][..]),
        ("flame_mm", &["-O2", "-g"][..]),
        ("fuse_2mm", &["-O1", "-g"][..]),
    ] {
        let (r, txt) = profile(name, flags);
        let regions = r["regions"].as_array().expect("regions");
        let hottest = &regions[0];
        let what = format!("{name} {flags:?} {}", hottest["id"]);
        assert_after_is_the_advice(hottest, &what);
        assert!(
            !txt.contains(" 0 instructions of work")
                && !r.to_string().contains(" 0 instructions of work"),
            "{name}: a loop that ran does 0 instructions of work:\n{txt}"
        );
    }
}

#[test]
fn matmul_after_code_follows_the_interchange_and_parallel_loop() {
    let (r, _) = profile("legal_matmul", &["-O1", "-g"]);
    let reg = &r["regions"][0];
    let code = reg["code_after"].as_str().unwrap_or("");
    let first = &reg["suggestions"][0];
    assert_eq!(first["kind"], "interchange", "{reg:#}");
    // i, k, j: the j loop innermost, the i loop the one parallel loop.
    let order: Vec<&str> = first["loops"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(deepest_chain(code), order, "{code}");
    let pragmas: Vec<&str> = code
        .lines()
        .filter(|l| l.contains("#pragma omp parallel"))
        .collect();
    assert_eq!(pragmas.len(), 1, "{code}");
    assert!(code.starts_with("#pragma omp parallel for\nfor"), "{code}");
}

/// The recommendation (issue 40) is the after-code's composition: its order is the code's,
/// each of its parallel directives is printed there, its parts are advised suggestions, and
/// its estimate is theirs multiplied.
#[test]
fn recommended_is_the_checked_composition() {
    // Each ranks an interchange first: the recommendation keeps its order.
    for (name, flags) in [
        ("legal_matmul", &["-O1", "-g"][..]),
        ("flame_mm", &["-O2", "-g"][..]),
        ("fuse_2mm", &["-O1", "-g"][..]),
    ] {
        let (r, txt) = profile(name, flags);
        let reg = &r["regions"][0];
        let what = format!("{name} {flags:?} {}", reg["id"]);
        let rec = &reg["recommended"];
        assert!(rec.is_object(), "{what}: no recommendation:\n{txt}");
        assert!(
            txt.contains("Recommended, the advice composed: "),
            "{what}:\n{txt}"
        );
        let code = reg["code_after"].as_str().unwrap_or("");
        let order: Vec<String> = rec["order"]
            .as_array()
            .map(|o| {
                o.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        assert!(!order.is_empty(), "{what}: {rec:#}");
        assert_eq!(deepest_chain(code), order, "{what}:\n{code}");
        for d in rec["parallel"].as_array().into_iter().flatten() {
            let directive = d["directive"].as_str().expect("directive");
            assert!(
                code.contains(directive),
                "{what}: {directive} not in\n{code}"
            );
        }
        let ranks: Vec<u64> = rec["ranks"]
            .as_array()
            .expect("ranks")
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        let suggestions = reg["suggestions"].as_array().expect("suggestions");
        // Models of different resources multiply; an order and a tiling (both the
        // cache-lines model's) save the same misses: the best of them counts.
        let (mut cache, mut product) = (1.0f64, 1.0);
        for rank in &ranks {
            let s = suggestions
                .iter()
                .find(|s| s["rank"].as_u64() == Some(*rank))
                .unwrap_or_else(|| panic!("{what}: no suggestion of rank {rank}"));
            assert!(
                s.get("skipped").is_none_or(Value::is_null),
                "{what}: a skipped part {s:#}"
            );
            let g = s["gain"]["estimate"].as_f64().unwrap_or(1.0);
            match s["gain"]["model"].as_str() {
                Some("cache_lines") => cache = cache.max(g),
                _ => product *= g,
            }
        }
        product *= cache;
        let estimate = rec["estimate"].as_f64().expect("estimate");
        assert!(
            (estimate - product).abs() < 1e-6 * product,
            "{what}: {rec:#}"
        );
    }
}
