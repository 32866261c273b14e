//! The flame graph as a user sees it: loaded in headless Chromium, after inferno's script has
//! relabelled the frames, zoomed and searched; and natively-run library calls weighted by what
//! they cost.
//!
//! Chromium is installed by `scripts/install-deps.sh`; where it is missing the browser checks
//! say so on stderr and are skipped (the checks of the SVG file itself still run).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use tests::{browser, compile, kernels_dir, polyprof, polyprof_bin, Run};

const BIN: &str = polyprof_bin!();

/// The fill inferno's script gives the frames a search matched (`#e600e6`).
const SEARCH_FILL: &str = "rgb(230,0,230)";

/// Loads `svg` with `query` (`?s=term`, `?x=..&y=..`) in headless Chromium.
fn dump_dom(chromium: &Path, svg: &Path, query: &str) -> String {
    tests::dump_dom(chromium, svg, query, "<svg")
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The value of attribute `name` in the start tag `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let len = tag[at..].find('"')?;
    Some(unescape(&tag[at..at + len]))
}

/// One drawn frame: its tooltip, the label the page shows, and its rectangle.
#[derive(Debug)]
struct Frame {
    title: String,
    label: String,
    /// The `<g>` start tag (its class says `hide` or `parent` after a zoom).
    group: String,
    rect: String,
}

impl Frame {
    /// The frame's name: its title up to the parenthesised counts.
    fn name(&self) -> &str {
        self.title.split(" (").next().unwrap_or(&self.title)
    }
    fn hidden(&self) -> bool {
        attr(&self.group, "class").is_some_and(|c| c.split(' ').any(|w| w == "hide"))
    }
    fn highlighted(&self) -> bool {
        attr(&self.rect, "fill").as_deref() == Some(SEARCH_FILL)
    }
    /// The label shows the name, whole or cut to fit (`..tail`, `head..`), or nothing.
    fn label_fits_name(&self) -> bool {
        let l = self.label.trim();
        let n = self.name();
        l.is_empty()
            || l == n
            || l.strip_prefix("..").is_some_and(|t| n.ends_with(t))
            || l.strip_suffix("..").is_some_and(|h| n.starts_with(h))
    }
}

/// The frames of the `frames` group of a flame graph (static file or dumped DOM).
fn frames(doc: &str) -> Vec<Frame> {
    let Some(start) = doc.find("id=\"frames\"") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut rest = &doc[start..];
    while let Some(g) = rest.find("<g") {
        rest = &rest[g..];
        let Some(end) = rest.find("</g>") else { break };
        let block = &rest[..end];
        rest = &rest[end + 4..];
        let group = block[..block.find('>').unwrap_or(0) + 1].to_string();
        // The content of the first `open` element (empty when it closes itself).
        let between = |open: &str, close: &str| -> String {
            block
                .find(open)
                .and_then(|a| {
                    let from = a + block[a..].find('>')? + 1;
                    if block[..from].ends_with("/>") {
                        return None;
                    }
                    let to = from + block[from..].find(close)?;
                    Some(unescape(&block[from..to]))
                })
                .unwrap_or_default()
        };
        let title = between("<title", "</title>");
        if title.is_empty() {
            continue;
        }
        let rect = block
            .find("<rect")
            .map(|a| block[a..a + block[a..].find('>').unwrap_or(0) + 1].to_string())
            .unwrap_or_default();
        let label = between("<text", "</text>");
        out.push(Frame {
            title,
            label,
            group,
            rect,
        });
    }
    out
}

fn svg_path(run: &Run) -> PathBuf {
    let svg = run.out.join("flamegraph.svg");
    assert!(
        svg.is_file(),
        "no flame graph; polyprof's stderr:\n{}",
        run.output.stderr
    );
    svg
}

/// The source line of the `for` statement in `kernel` carrying `marker`.
fn line_of(kernel: &str, marker: &str) -> usize {
    let src = std::fs::read_to_string(kernels_dir().join(kernel)).expect("reading the kernel");
    src.lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no {marker} in {kernel}"))
        + 1
}

#[test]
fn loop_frames_are_labelled_zoomed_and_searched_by_name_in_a_browser() {
    let k = compile("flame_mm", &["-O2", "-g"]);
    let run = polyprof(BIN, &[k.path.as_os_str()], b"");
    let svg = svg_path(&run);
    let [li, lj, lk] = ["/* loop i */", "/* loop j */", "/* loop k */"]
        .map(|m| format!("loop flame_mm.c:{}", line_of("flame_mm.c", m)));

    // In the file: every loop frame's title starts with its own name, then inferno's counts
    // with the frame's facts inside the final parentheses.
    let text = std::fs::read_to_string(&svg).unwrap();
    let file_frames = frames(&text);
    for name in [&li, &lj, &lk] {
        let f: Vec<&Frame> = file_frames.iter().filter(|f| f.name() == name).collect();
        assert_eq!(f.len(), 1, "{name}: {file_frames:#?}");
        let t = &f[0].title;
        assert!(
            t.ends_with(')') && t.contains(" instructions, ") && t.contains("stride 0/1"),
            "{t}"
        );
        // Nothing after the name may open a parenthesis but the counts (the script would cut
        // the label there).
        assert_eq!(t.matches('(').count(), 1, "{t}");
    }
    let outer = file_frames.iter().find(|f| f.name() == li).unwrap();
    assert!(
        outer.title.contains("region R1") && outer.title.contains("suggests interchange"),
        "{}",
        outer.title
    );
    let inner = file_frames.iter().find(|f| f.name() == lk).unwrap();
    assert!(
        !inner.title.contains("region R1"),
        "the innermost loop carries the region's facts: {}",
        inner.title
    );

    let Some(chromium) = browser() else { return };

    // Labels after the page's script ran: each frame shows its own name.
    let dom = dump_dom(&chromium, &svg, "");
    let shown = frames(&dom);
    assert_eq!(shown.len(), file_frames.len(), "{dom}");
    for f in &shown {
        assert!(
            f.label_fits_name(),
            "frame {:?} shows {:?}",
            f.name(),
            f.label
        );
    }
    for name in [&li, &lj, &lk, &"main".to_string()] {
        assert!(
            shown.iter().any(|f| f.label.trim() == name),
            "no frame labelled {name:?}: {:?}",
            shown.iter().map(|f| &f.label).collect::<Vec<_>>()
        );
    }

    // A search by file:line highlights that loop's frame and nothing else.
    let term = lj.trim_start_matches("loop ");
    let dom = dump_dom(&chromium, &svg, &format!("?s={term}"));
    let hits: Vec<String> = frames(&dom)
        .iter()
        .filter(|f| f.highlighted())
        .map(|f| f.name().to_string())
        .collect();
    assert_eq!(hits, std::slice::from_ref(&lj), "search {term}");
    assert!(dom.contains("Matched: "), "no match count shown");
    // And by function name.
    let dom = dump_dom(&chromium, &svg, "?s=^main");
    let hits: Vec<String> = frames(&dom)
        .iter()
        .filter(|f| f.highlighted())
        .map(|f| f.name().to_string())
        .collect();
    assert_eq!(hits, ["main"], "search ^main");

    // Zoomed on the middle loop: it, its parent and its child keep their own labels.
    let mid = file_frames.iter().find(|f| f.name() == lj).unwrap();
    let (x, y) = (
        attr(&mid.rect, "fg:x").expect("fg:x"),
        attr(&mid.rect, "y").expect("y"),
    );
    let dom = dump_dom(&chromium, &svg, &format!("?x={x}&y={y}"));
    let zoomed = frames(&dom);
    for name in [&li, &lj, &lk] {
        let f = zoomed
            .iter()
            .find(|f| f.name() == name && !f.hidden())
            .unwrap_or_else(|| panic!("{name} hidden after zooming on {lj}"));
        assert_eq!(f.label.trim(), name, "after zooming on {lj}");
    }
    assert!(
        zoomed
            .iter()
            .any(|f| f.hidden() && f.name().starts_with("loop flame_mm.c:")),
        "zooming hid no other loop"
    );
}

fn folded(run: &Run) -> Vec<(String, u64)> {
    std::fs::read_to_string(run.out.join("stacks.folded"))
        .expect("stacks.folded")
        .lines()
        .filter_map(|l| {
            let (s, n) = l.rsplit_once(' ')?;
            Some((s.to_string(), n.parse().ok()?))
        })
        .collect()
}

fn function<'a>(native: &'a Value, name: &str) -> &'a Value {
    native["functions"]
        .as_array()
        .and_then(|fs| fs.iter().find(|f| f["name"] == name))
        .unwrap_or_else(|| panic!("no native function {name}: {native:#}"))
}

/// Inclusive instructions per function, from main on, by callgrind (`None` without valgrind).
fn callgrind_shares(exe: &Path) -> Option<(f64, f64)> {
    let dir = tempfile::tempdir().ok()?;
    let out = dir.path().join("callgrind.out");
    let ok = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .output()
        .ok()?
        .status
        .success();
    if !ok {
        return None;
    }
    let annotated = Command::new("callgrind_annotate")
        .arg("--inclusive=yes")
        .arg(&out)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&annotated.stdout).into_owned();
    let count = |func: &str| -> Option<f64> {
        text.lines()
            .find(|l| l.contains(&format!(":{func} [")))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|n| n.replace(',', "").parse().ok())
    };
    Some((count("qsort")?, count("main")?))
}

#[test]
fn native_library_calls_weigh_what_they_cost() {
    let k = compile("native_sort", &["-O2", "-g"]);
    let run = polyprof(BIN, &[k.path.as_os_str()], b"");
    assert_eq!(run.output.code(), 0, "{}", run.output.stderr);
    let r = run.report();
    let native = &r["trace"]["native_cost"];
    let method = native["method"].as_str().unwrap_or("?");
    assert!(
        method == "instructions" || method == "cpu_time",
        "native calls are not measured here: {native:#}"
    );
    let traced = r["trace"]["instructions"].as_u64().unwrap();

    // Each call site has its [native] frame under the call's own, weighted by the calls'
    // cost: 8 sorts of 4000 keys are millions of instructions, the program's own loops a few
    // hundred thousand.
    let stacks = folded(&run);
    let weight = |suffix: &str| -> u64 {
        stacks
            .iter()
            .filter(|(s, _)| s.ends_with(suffix))
            .map(|(_, n)| n)
            .sum()
    };
    let qsort = weight(";call qsort;call qsort [native]");
    let memcpy = weight(";call memcpy;call memcpy [native]");
    assert!(qsort > 2 * traced, "qsort weighs {qsort}: {stacks:?}");
    // 16 KiB copies take microseconds: with the CPU-time meter, near its error.
    assert!(memcpy < qsort, "memcpy weighs {memcpy}: {stacks:?}");

    let q = function(native, "qsort");
    assert_eq!(q["calls"], 8, "{native:#}");
    assert_eq!(q["instructions"], qsort, "{native:#}");
    assert_eq!(function(native, "memcpy")["calls"], 8, "{native:#}");
    assert_eq!(function(native, "printf")["calls"], 1, "{native:#}");
    let share = q["run_percent"].as_f64().unwrap();
    assert!(share > 50.0, "qsort's share of the run: {share}");
    let total = native["instructions"].as_u64().unwrap();
    let run_percent = native["run_percent"].as_f64().unwrap();
    let expect = 100.0 * total as f64 / (traced + total) as f64;
    assert!((run_percent - expect).abs() < 1e-6, "{native:#}");

    // Regions say what their share counts: the program's own loops hold most traced
    // instructions but little of the run's time, and no native call.
    let regions = r["regions"].as_array().unwrap();
    assert!(!regions.is_empty(), "no region: {r:#}");
    for g in regions {
        let (ops, all, nat) = (
            g["ops_percent"].as_f64().unwrap(),
            g["run_percent"].as_f64().unwrap(),
            g["native_percent"].as_f64().unwrap(),
        );
        assert!(all < ops && nat == 0.0, "region {}: {g:#}", g["id"]);
    }
    // The loop making the calls: little of the traced instructions (the comparator's first
    // callbacks are traced), most of the run.
    let sort_loop = format!(
        "main;loop native_sort.c:{}",
        line_of("native_sort.c", "for (int r = 0; r < rows; r++) {")
    );
    let hot = r["hot_loops"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["stack"] == sort_loop.as_str())
        .unwrap_or_else(|| panic!("no hot loop {sort_loop}: {:#}", r["hot_loops"]));
    assert!(
        hot["ops_percent"].as_f64().unwrap() < 10.0 && hot["run_percent"].as_f64().unwrap() > 50.0,
        "{hot:#}"
    );

    let summary = run
        .output
        .polyprof_lines()
        .into_iter()
        .find(|l| l.contains("of the run's time in native library calls (qsort "))
        .map(str::to_string);
    assert!(summary.is_some(), "{}", run.output.stderr);
    let text = std::fs::read_to_string(run.out.join("report.txt")).unwrap();
    assert!(text.contains("native calls: "), "{text}");

    // Against callgrind, where the weight is a count of instructions (CPU time converted to
    // instructions depends on the machine: benchmarked by `native_bench`, not asserted).
    if let Some((cg_qsort, cg_main)) = callgrind_shares(&k.path) {
        let cg = 100.0 * cg_qsort / cg_main;
        eprintln!("qsort: {share:.1}% of the run by polyprof ({method}), {cg:.1}% by callgrind");
        if method == "instructions" {
            assert!(
                (share - cg).abs() <= 15.0,
                "qsort {share:.1}% against callgrind's {cg:.1}%"
            );
        }
    }

    let Some(chromium) = browser() else { return };
    let svg = svg_path(&run);
    let shown = frames(&dump_dom(&chromium, &svg, ""));
    let q = shown
        .iter()
        .find(|f| f.name() == "call qsort [native]")
        .unwrap_or_else(|| panic!("no native qsort frame: {shown:#?}"));
    assert_eq!(q.label.trim(), "call qsort [native]");
    assert!(q.title.contains("8 calls run natively"), "{}", q.title);
    let dom = dump_dom(&chromium, &svg, "?s=qsort");
    let mut hits: Vec<String> = frames(&dom)
        .iter()
        .filter(|f| f.highlighted())
        .map(|f| f.name().to_string())
        .collect();
    hits.sort();
    assert_eq!(hits, ["call qsort", "call qsort [native]"]);
}
