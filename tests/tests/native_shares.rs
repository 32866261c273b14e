//! The shares of the run's time spent in natively-run library calls: the total and its parts
//! per function are shares of one whole, so no part exceeds the total and the parts add up to
//! it, in report.json and in report.txt (issue 39: "0.2% of the run's time in native library
//! calls (log 25.4%, ...)").

use serde_json::Value;
use tests::{compile_linked, polyprof, polyprof_bin};

const BIN: &str = polyprof_bin!();

/// What rounding to one decimal may add to a sum of `n` shares.
fn slack(n: usize) -> f64 {
    0.05 * n as f64 + 1e-9
}

/// The shares `name 12.3%` of the summary line on stderr, after its total.
fn summary_shares(line: &str) -> (f64, Vec<(String, f64)>) {
    let (total, rest) = line
        .trim_start_matches("polyprof: ")
        .split_once("% of the run's time in native library calls (")
        .unwrap_or_else(|| panic!("not the native summary line: {line}"));
    let parts = rest
        .split(';')
        .next()
        .unwrap()
        .split(", ")
        .map(|p| {
            let (name, pct) = p.rsplit_once(' ').unwrap();
            (name.to_string(), pct.trim_end_matches('%').parse().unwrap())
        })
        .collect();
    (total.parse().unwrap(), parts)
}

/// report.txt: "native calls: T% of the run's time (...)", then "  P%  name (N calls)" lines.
fn text_shares(text: &str) -> (f64, Vec<(String, f64)>) {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with("native calls: "));
    let head = lines.next().expect("no native calls line in report.txt");
    let total = head["native calls: ".len()..]
        .split('%')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let parts = lines
        .map_while(|l| {
            let l = l.trim_start();
            let (pct, rest) = l.split_once("%  ")?;
            let name = rest.split(" (").next()?;
            Some((name.to_string(), pct.parse().ok()?))
        })
        .collect();
    (total, parts)
}

fn check_parts(what: &str, total: f64, parts: &[(String, f64)], all_listed: bool) {
    assert!(!parts.is_empty(), "{what}: no function listed");
    let sum: f64 = parts.iter().map(|p| p.1).sum();
    for (name, p) in parts {
        assert!(
            *p <= total + 0.05 + 1e-9,
            "{what}: {name} {p}% is more than the total {total}%"
        );
    }
    assert!(
        sum <= total + slack(parts.len()),
        "{what}: the parts {parts:?} add up to {sum}%, more than the total {total}%"
    );
    if all_listed {
        assert!(
            sum >= total - slack(parts.len()),
            "{what}: the parts {parts:?} add up to {sum}%, less than the total {total}%"
        );
    }
}

#[test]
fn native_call_shares_add_up_to_the_total() {
    let k = compile_linked("native_shares", &["-O1", "-g"], &["-lm"]);
    for engine in ["emulate", "step"] {
        let run = polyprof(BIN, &["--engine", engine, k.path.to_str().unwrap()], b"");
        assert_eq!(run.output.code(), 0, "{engine}: {}", run.output.stderr);
        let r: Value = run.report();
        let n = &r["trace"]["native_cost"];
        let total = n["run_percent"].as_f64().unwrap();
        let functions = n["functions"].as_array().unwrap();
        let names: Vec<&str> = functions
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        for want in ["qsort", "sin", "log"] {
            assert!(names.contains(&want), "{engine}: no {want} in {names:?}");
        }
        // report.json lists every function: exact sums.
        let sum_insns: u64 = functions
            .iter()
            .map(|f| f["instructions"].as_u64().unwrap())
            .sum();
        assert_eq!(
            sum_insns,
            n["instructions"].as_u64().unwrap(),
            "{engine}: the functions' costs do not add up to the total: {n:#}"
        );
        let parts: Vec<(String, f64)> = functions
            .iter()
            .map(|f| {
                (
                    f["name"].as_str().unwrap().to_string(),
                    f["run_percent"].as_f64().unwrap(),
                )
            })
            .collect();
        let sum: f64 = parts.iter().map(|p| p.1).sum();
        assert!(
            (sum - total).abs() < 1e-6 * total.max(1.0),
            "{engine}: report.json's shares {parts:?} add up to {sum}%, not the total {total}%"
        );
        check_parts(&format!("{engine}: report.json"), total, &parts, true);

        let text = std::fs::read_to_string(run.out.join("report.txt")).unwrap();
        let (t, p) = text_shares(&text);
        check_parts(
            &format!("{engine}: report.txt"),
            t,
            &p,
            functions.len() <= 5,
        );
        assert!((t - total).abs() <= 0.05 + 1e-9, "{engine}: {t} vs {total}");

        let line = run
            .output
            .polyprof_lines()
            .into_iter()
            .find(|l| l.contains("of the run's time in native library calls"))
            .unwrap_or_else(|| panic!("{engine}: no summary line:\n{}", run.output.stderr))
            .to_string();
        let (t, p) = summary_shares(&line);
        check_parts(&format!("{engine}: {line}"), t, &p, functions.len() <= 3);
    }
}

/// glibc's string functions run inside the engine, counted by their own instructions: on a
/// CPU with AVX-512 glibc would pick EVEX versions the engine does not run, and each call
/// would stop the program and run natively (metered at thousands of instructions a call).
#[test]
fn string_functions_run_inside_the_engine() {
    let k = compile_linked("strcmp_loop", &["-O1", "-g", "-fno-builtin"], &[]);
    let run = polyprof(BIN, &[k.path.to_str().unwrap()], b"");
    assert_eq!(run.output.code(), 0, "{}", run.output.stderr);
    assert_eq!(run.output.stdout.trim(), "1128");
    let r: Value = run.report();
    let functions = r["trace"]["native_cost"]["functions"].as_array().unwrap();
    let strcmp = functions
        .iter()
        .find(|f| f["name"] == "strcmp")
        .unwrap_or_else(|| panic!("no strcmp in {functions:#?}"));
    let calls = strcmp["calls"].as_u64().unwrap();
    let per_call = strcmp["instructions"].as_u64().unwrap() / calls.max(1);
    assert!(calls >= 3000, "{strcmp:#}");
    assert!(
        per_call < 200,
        "strcmp cost {per_call} instructions a call: it ran natively ({strcmp:#})"
    );
}
