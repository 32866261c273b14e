//! report.html and report.txt as a user reads them, on the example of the README (`make
//! demo`: examples/matmul.c at -O2): the matmul source with the interchange beside its loop's
//! line and the interchange's estimated gain, the flame graph inline and searchable, the
//! glossary, nothing loaded from outside; report.txt ranked as report.json.
//!
//! The browser checks load the page in headless Chromium (installed by
//! `scripts/install-deps.sh`); where it is missing they say so on stderr and are skipped (the
//! checks of the files themselves still run).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use tests::{chromium, polyprof, polyprof_bin, run_with_timeout, Run};

const BIN: &str = polyprof_bin!();

/// The fill inferno's script gives the frames a search matched (`#e600e6`).
const SEARCH_FILL: &str = "rgb(230,0,230)";

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/matmul.c")
}

/// The example compiled as `make demo` does, and polyprof's run on it.
fn demo() -> (tempfile::TempDir, Run) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let exe = dir.path().join("matmul");
    let out = Command::new("cc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(example())
        .output()
        .expect("running cc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = polyprof(BIN, &[exe.as_os_str()], b"");
    assert_eq!(run.output.code(), 0, "{}", run.output.stderr);
    (dir, run)
}

/// The line of the example's `marker`, after the line holding `after`.
fn line_after(after: &str, marker: &str) -> u32 {
    let src = std::fs::read_to_string(example()).expect("reading the example");
    let start = src.lines().position(|l| l.contains(after)).expect("anchor");
    let at = src
        .lines()
        .skip(start)
        .position(|l| l.contains(marker))
        .expect("marker");
    (start + at + 1) as u32
}

/// The `<tr>` of source line `n` in a page (the static file or the DOM Chromium dumped).
fn source_row(page: &str, n: u32) -> Option<&str> {
    let cell = format!("<td class=\"n\">{n}</td>");
    let at = page.find(&cell)?;
    let start = page[..at].rfind("<tr")?;
    let end = at + page[at..].find("</tr>")?;
    Some(&page[start..end])
}

fn interchange(r: &Value) -> &Value {
    r["regions"][0]["suggestions"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["kind"] == "interchange"))
        .unwrap_or_else(|| panic!("no interchange: {:#}", r["regions"][0]["suggestions"]))
}

fn browser_dom(chromium: &Path, page: &Path, query: &str) -> String {
    let profile = tempfile::tempdir().expect("a profile directory");
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--virtual-time-budget=2000",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .arg("--dump-dom")
    .arg(format!("file://{}{query}", page.display()));
    let out = run_with_timeout(cmd, b"", Duration::from_secs(120));
    assert!(
        out.stdout.contains("<html"),
        "chromium printed no document for {}:\n{}",
        page.display(),
        out.stderr
    );
    out.stdout
}

#[test]
fn the_demo_page_shows_the_interchange_beside_its_line_with_a_gain() {
    let (_dir, run) = demo();
    let r = run.report();
    let page_path = run.out.join("report.html");
    let page = std::fs::read_to_string(&page_path).expect("report.html");
    assert!(
        run.output
            .polyprof_lines()
            .iter()
            .any(|l| l.contains("HTML report: ")),
        "{}",
        run.output.stderr
    );

    // The interchange is the region's best advice, with its model and number.
    let ic = interchange(&r);
    assert_eq!(ic["rank"], 1, "{ic:#}");
    assert_eq!(ic["gain"]["model"], "cache_lines");
    let estimate = ic["gain"]["estimate"].as_f64().expect("an estimate");
    assert!(estimate > 1.1, "{ic:#}");
    assert!(
        ic["gain"]["basis"].as_str().unwrap().contains("lines"),
        "{ic:#}"
    );

    // Beside the loop's source line: the interchange and its estimate.
    let line = line_after("static void matmul", "for (int i = 0;");
    let row = source_row(&page, line).unwrap_or_else(|| panic!("no source line {line}"));
    assert!(row.contains("for (int i = 0; i &lt; N; i++)"), "{row}");
    assert!(row.contains("interchange"), "{row}");
    assert!(row.contains(&format!("{estimate:.2}x")), "{row}");
    // The loops are marked, and the statements named as in report.json.
    assert!(row.contains("L5") || row.contains("parallel"), "{row}");
    let body = line_after("static void matmul", "C[i][j] +=");
    let row = source_row(&page, body).expect("the statement's line");
    let ids: Vec<&str> = r["regions"][0]["statements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["location"]["line"] == body)
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert!(!ids.is_empty());
    assert!(row.contains(ids[0]), "{row} lacks {ids:?}");

    // Code generated by isl, before and after, and the glossary.
    assert!(page.contains("for (int c1 = 0;"), "no generated code");
    assert!(page.contains("C[i][j] += A[i][k] * B[k][j];"));
    for id in [
        "preuse",
        "stride01",
        "components",
        "affine",
        "cachelines",
        "amdahl",
    ] {
        assert!(
            page.contains(&format!("id=\"pp-g-{id}\"")),
            "no glossary entry {id}"
        );
    }
    // Self-contained: no stylesheet, script or image from elsewhere.
    for outside in ["src=\"http", "href=\"http", "<link", "@import", "url(http"] {
        assert!(!page.contains(outside), "report.html loads {outside}");
    }
    // The flame graph inline.
    assert!(page.contains("id=\"frames\""), "no inline flame graph");

    // report.txt: the same ranking and statement names.
    let text = std::fs::read_to_string(run.out.join("report.txt")).expect("report.txt");
    assert!(text.contains("1. interchange ("), "{text}");
    assert!(text.contains("C[i][j] += A[i][k] * B[k][j];"), "{text}");
    assert!(text.contains(&format!("{}(", ids[0])), "{text}");

    let Some(chromium) = chromium() else {
        eprintln!(
            "SKIPPED the browser checks: chromium is not installed (scripts/install-deps.sh, \
             which `make test` runs, installs it)"
        );
        return;
    };
    let dom = browser_dom(&chromium, &page_path, "");
    let row = source_row(&dom, line).expect("the loop's line in the browser");
    assert!(
        row.contains("interchange") && row.contains(&format!("{estimate:.2}x")),
        "{row}"
    );
    // The flame graph's script ran inside the page: a search highlights the loop's frame.
    let dom = browser_dom(&chromium, &page_path, "?s=matmul.c:18");
    let highlighted = format!("fill=\"{SEARCH_FILL}\"");
    assert_eq!(
        dom.matches(&highlighted).count(),
        1,
        "the search matched no frame, or several"
    );
    let shown = dom
        .match_indices("Matched: ")
        .any(|(i, m)| dom[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()));
    assert!(shown, "no match count");
    // A screenshot for the developer to look at (kept beside the reports).
    let shot = run.out.join("report.png");
    let profile = tempfile::tempdir().expect("a profile directory");
    let mut cmd = Command::new(&chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--window-size=1200,900",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .arg(format!("--screenshot={}", shot.display()))
    .arg(format!("file://{}", page_path.display()));
    run_with_timeout(cmd, b"", Duration::from_secs(120));
    let size = std::fs::metadata(&shot).map_or(0, |m| m.len());
    assert!(size > 10_000, "screenshot of {size} bytes");
    if let Ok(keep) = std::env::var("POLYPROF_KEEP_SCREENSHOT") {
        let _ = std::fs::copy(&shot, keep);
    }
}
