//! Snapshot tests of what users read, pinned in `tests/tests/snapshots/` (insta): report.txt,
//! report.json, report.html (without its inline flame graph), the flame graph's frame titles
//! (what a browser shows on hovering a frame) and stacks.folded, of the bundled example and a
//! few kernels, and `polyprof check`'s verdicts (text and JSON). A change to a report's
//! wording, ids, lines, ranking or trees shows as a diff.
//!
//! What differs from run to run or machine to machine is redacted first: paths (the checkout
//! and the temporary build directory), every decimal number (timings, measured native costs,
//! percentages of the run's time and the gains that depend on them) and the measured cost of
//! native calls. Integers stay: loop and statement ids, source lines, sizes, iteration counts.
//!
//! After an intended change, bless the snapshots (see README.md, "Tests"):
//! `INSTA_UPDATE=always cargo test --release -p tests --test snapshots`, then review the diff
//! with `git diff tests/tests/snapshots`.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tests::{kernels_dir, polyprof, polyprof_bin};

/// The repository's root (where `examples/` and `tests/` are).
fn repo_root() -> PathBuf {
    kernels_dir()
        .parent()
        .and_then(Path::parent)
        .expect("tests/kernels is two levels below the root")
        .to_path_buf()
}

/// Replaces every decimal number (`12.5`, `0.03`) by `#.#`: timings, measured costs and
/// everything derived from them.
fn redact_decimals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].is_ascii_digit() {
                i += 1;
            }
            let decimal = i + 1 < chars.len() && chars[i] == '.' && chars[i + 1].is_ascii_digit();
            if decimal {
                i += 1;
                while i < chars.len() && chars[i].is_ascii_digit() {
                    i += 1;
                }
                // Exponents of JSON numbers (`1.5e-7`).
                if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
                    i += 1;
                    while i < chars.len()
                        && (chars[i].is_ascii_digit() || chars[i] == '-' || chars[i] == '+')
                    {
                        i += 1;
                    }
                }
                // Column alignment follows the redacted width.
                if out.ends_with("  ") {
                    out.truncate(out.trim_end_matches(' ').len());
                    out.push(' ');
                }
                out.push_str("#.#");
            } else {
                out.extend(&chars[start..i]);
            }
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Whether a line of report.txt states what native calls measured: their cost, their order
/// by cost (`   0.48%  free (2 calls)`), or a warning about the meter.
fn measured(line: &str) -> bool {
    let per_call = line
        .trim_start()
        .split_once("%  ")
        .is_some_and(|(pct, rest)| {
            pct.parse::<f64>().is_ok() && rest.ends_with(" call)") || rest.ends_with(" calls)")
        });
    per_call || line.contains("instruction equivalents") || line.contains("CPU-time meter")
}

/// Paths and decimals redacted; lines about measured native costs dropped.
fn redact_text(text: &str, build_dir: &Path) -> String {
    let text = text
        .replace(&build_dir.display().to_string(), "<build>")
        .replace(&repo_root().display().to_string(), "<repo>");
    let kept: Vec<&str> = text.lines().filter(|l| !measured(l)).collect();
    redact_decimals(&kept.join("\n"))
}

/// report.json with the same redactions, floats and the measured native costs replaced.
fn redact_json(v: &mut Value, build_dir: &Path) {
    match v {
        Value::Number(n) if n.is_f64() => *v = Value::String("#.#".into()),
        Value::String(s) => *s = redact_text(s, build_dir),
        Value::Array(items) => {
            items.iter_mut().for_each(|x| redact_json(x, build_dir));
            // A warning about the native-call meter comes and goes with the measurement.
            items.retain(|x| x.as_str() != Some(""));
        }
        Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                if matches!(
                    k.as_str(),
                    "native_cost" | "seconds" | "instructions_per_second"
                ) {
                    *x = Value::String("<measured>".into());
                } else {
                    redact_json(x, build_dir);
                }
            }
        }
        _ => {}
    }
}

/// `#` for every count of instructions (`449,976 instruction equivalents`): the run's total
/// and its shares include what native calls measured.
fn redact_counts(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(" instruction") {
        let head = &rest[..at];
        let digits = head.len()
            - head
                .trim_end_matches(|c: char| c.is_ascii_digit() || c == ',')
                .len();
        if digits > 0 && head[head.len() - digits..].starts_with(|c: char| c.is_ascii_digit()) {
            out.push_str(&head[..head.len() - digits]);
            out.push('#');
        } else {
            out.push_str(head);
        }
        out.push_str(" instruction");
        rest = &rest[at + " instruction".len()..];
    }
    out.push_str(rest);
    out
}

/// The flame graph's frame titles, one per line, in the SVG's order, for the frames that run
/// at least 1% of the traced instructions (`folded`: stacks.folded); `None` when native calls
/// are half the width or more. Widths also count measured native calls, which vary from run
/// to run (with the machine's load), and inferno leaves out frames under a tenth of a pixel:
/// in a program that mostly prints, a loop's frame is drawn in one run and not in the next.
fn flame_titles(svg: &str, folded: &str) -> Option<String> {
    let mut traced: BTreeMap<&str, u64> = BTreeMap::new();
    let (mut total, mut all) = (0u64, 0u64);
    for (stack, count) in folded.lines().filter_map(|l| l.rsplit_once(' ')) {
        let count: u64 = count.parse().unwrap_or(0);
        all += count;
        if stack.ends_with("[native]") {
            continue;
        }
        total += count;
        let mut names: Vec<&str> = stack.split(';').collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            *traced.entry(name).or_default() += count;
        }
    }
    let shown = |title: &str| {
        let name = title
            .split(" (")
            .next()
            .unwrap_or(title)
            .replace("&apos;", "'");
        traced.get(name.as_str()).is_some_and(|&c| c * 100 >= total)
    };
    let titles: Vec<&str> = svg
        .split("<title>")
        .skip(1)
        .filter_map(|t| t.split_once("</title>").map(|(t, _)| t))
        .filter(|t| shown(t))
        .collect();
    (total * 2 >= all).then(|| redact_counts(&titles.join("\n")))
}

/// report.html without its inline flame graph (pinned by its titles) and without what states
/// measured native costs.
fn html_page(html: &str) -> String {
    let mut page = html.to_string();
    if let (Some(a), Some(b)) = (page.find("<div id=\"pp-flame\">"), page.rfind("</svg>")) {
        page.replace_range(a..b + "</svg>".len(), "<div id=\"pp-flame\"><svg/>");
    }
    // Paragraphs that state measured native costs: the warnings about the meter, and the
    // native calls' share (whose order by cost varies from run to run).
    for start in [
        "<p class=\"warn\">Warning: ",
        "<p class=\"muted\">Native library calls: ",
    ] {
        let mut from = 0;
        while let Some(a) = page[from..].find(start).map(|a| a + from) {
            let Some(len) = page[a..].find("</p>") else {
                break;
            };
            let para = &page[a..a + len];
            if start.contains("warn") && !para.contains("CPU-time meter") {
                from = a + len;
                continue;
            }
            page.replace_range(a..a + len + "</p>".len(), "");
            from = a;
        }
    }
    // One element per line, for readable diffs.
    redact_counts(&page.replace("><", ">\n<"))
}

/// stacks.folded without its native frames: their weights are measured, and whether one
/// appears at all depends on that measure (a cheap call can measure 0 and be left out).
fn folded(text: &str) -> String {
    text.lines()
        .filter(|l| {
            !l.rsplit_once(' ')
                .is_some_and(|(stack, _)| stack.ends_with("[native]"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What one profile gives users, redacted.
struct Outputs {
    text: String,
    json: String,
    html: String,
    titles: Option<String>,
    folded: String,
}

/// Compiles `src` at `opt` (with debug information) into a new temporary directory.
fn build(src: &Path, opt: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("polyprof-snapshot-")
        .tempdir()
        .expect("a temporary directory");
    let name = src
        .file_stem()
        .and_then(|s| s.to_str())
        .expect("a file name");
    let bin = dir.path().join(name);
    let cc = Command::new("cc")
        .args([opt, "-g", "-o"])
        .arg(&bin)
        .arg(src)
        .output()
        .expect("running cc");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    (dir, bin)
}

/// Compiles `src` at `opt` into a temporary directory, profiles it, and returns its redacted
/// outputs.
fn reports(src: &Path, opt: &str, extra: &[&str]) -> Outputs {
    let (dir, bin) = build(src, opt);
    let mut args: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    args.push(bin.display().to_string());
    let run = polyprof(polyprof_bin!(), &args, b"");
    assert_eq!(run.output.code(), 0, "{}", run.output.stderr);
    let text = std::fs::read_to_string(run.out.join("report.txt")).expect("report.txt");
    // The run's own temporary directory holds the output directory.
    let text = text.replace(&run.dir.path().display().to_string(), "<run>");
    let mut json = run.report();
    redact_json(&mut json, dir.path());
    let json = serde_json::to_string_pretty(&json)
        .expect("JSON")
        .replace(&run.dir.path().display().to_string(), "<run>");
    let read = |file: &str| {
        std::fs::read_to_string(run.out.join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"))
            .replace(&run.dir.path().display().to_string(), "<run>")
    };
    let html = html_page(&read("report.html"));
    let titles = flame_titles(&read("flamegraph.svg"), &read("stacks.folded"));
    Outputs {
        text: redact_text(&text, dir.path()),
        json,
        html: redact_text(&html, dir.path()),
        titles: titles.map(|t| redact_text(&t, dir.path())),
        folded: folded(&read("stacks.folded")),
    }
}

fn snapshot(name: &str, src: &Path, opt: &str, extra: &[&str]) {
    let out = reports(src, opt, extra);
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("snapshots");
    settings.bind(|| {
        insta::assert_snapshot!(format!("{name}.txt"), out.text);
        insta::assert_snapshot!(format!("{name}.json"), out.json);
        insta::assert_snapshot!(format!("{name}.html"), out.html);
        if let Some(titles) = &out.titles {
            insta::assert_snapshot!(format!("{name}.flame-titles"), titles);
        }
        insta::assert_snapshot!(format!("{name}.folded"), out.folded);
    });
}

#[test]
fn bundled_example_matmul_o2() {
    let src = repo_root().join("examples").join("matmul.c");
    snapshot("example_matmul_O2", &src, "-O2", &[]);
}

#[test]
fn shift_loop_o0() {
    let src = kernels_dir().join("legal_shift.c");
    snapshot("legal_shift_O0", &src, "-O0", &["--region-threshold", "1"]);
}

#[test]
fn storage_names_o2() {
    let src = kernels_dir().join("names.c");
    snapshot("names_O2", &src, "-O2", &["--region-threshold", "0.01"]);
}

/// `polyprof check`'s verdicts, in sentences and in JSON, on seidel-1d built -O0: the
/// time/space interchange (illegal: the dependences it breaks, with instances) and the same
/// after a skew (legal).
#[test]
fn check_verdicts_seidel_o0() {
    let (dir, bin) = build(&kernels_dir().join("check_seidel1d.c"), "-O0");
    let out = dir.path().join("out");
    let record = Command::new(polyprof_bin!())
        .arg("record")
        .arg("-o")
        .arg(&out)
        .arg(&bin)
        .output()
        .expect("running polyprof record");
    assert!(
        record.status.success(),
        "{}",
        String::from_utf8_lossy(&record.stderr)
    );
    let line = |tag: &str| tests::line_of("check_seidel1d", tag);
    let (t, i) = (line("/* loop t */"), line("/* loop i */"));
    let (t, i) = (
        format!("check_seidel1d.c:{t}"),
        format!("check_seidel1d.c:{i}"),
    );
    let check = |format: &str, transform: &str| {
        let o = Command::new(polyprof_bin!())
            .args(["check", "--format", format, "-t", transform])
            .arg(&out)
            .output()
            .expect("running polyprof check");
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        format!("exit status {:?}\n{text}", o.status.code())
    };
    let illegal = format!("interchange {t} {i}");
    let legal = format!("skew {t} {i} 1; interchange {t} {i}");
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("snapshots");
    settings.bind(|| {
        insta::assert_snapshot!("check_seidel_O0.illegal.txt", check("text", &illegal));
        insta::assert_snapshot!("check_seidel_O0.illegal.json", check("json", &illegal));
        insta::assert_snapshot!("check_seidel_O0.legal.txt", check("text", &legal));
        insta::assert_snapshot!("check_seidel_O0.legal.json", check("json", &legal));
    });
}
