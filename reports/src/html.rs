//! `report.html`: one self-contained page (no external resource) with the regions ranked,
//! each region's source lines with its loops marked and the advice beside them, the flame
//! graph inline, the code before and after as isl generates it, and a glossary of every
//! metric.

use crate::glossary::GLOSSARY;
use crate::source::Sources;
use crate::{gain_phrase, GainModel, Lead, Loc, Region, Report, Suggestion};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{self, Write};

/// Lines of context shown around each source line a region names.
const CONTEXT: u32 = 1;
/// Referenced lines closer than this are shown as one stretch.
const JOIN_GAP: u32 = 4;

/// Writes `report.html`: the page of [`render_html`].
pub fn write_html(
    report: &Report,
    flame: Option<&str>,
    sources: &Sources,
    mut out: impl Write,
) -> io::Result<()> {
    out.write_all(render_html(report, flame, sources).as_bytes())
}

/// The page, from the report, the flame graph's SVG text and the sources.
pub fn render_html(report: &Report, flame: Option<&str>, sources: &Sources) -> String {
    let mut h = String::with_capacity(64 * 1024);
    let title = format!("polyprof: {}", report.program.path);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}</style></head><body>\n",
        esc(&title)
    );
    header(&mut h, report);
    ranking(&mut h, report);
    // The flame graph first among SVGs: inferno's script takes the page's first `svg`.
    flame_section(&mut h, flame);
    for r in &report.regions {
        region(&mut h, r, sources);
    }
    glossary(&mut h);
    h.push_str("</body></html>\n");
    h
}

const STYLE: &str = r#"
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1250px; padding: 0 16px 40px; color: #222; }
h1 { font-size: 22px; margin: 18px 0 4px; } h2 { font-size: 19px; margin-top: 34px; border-bottom: 2px solid #5ac86e; padding-bottom: 3px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.muted { color: #666; } .warn { color: #a05a00; }
table { border-collapse: collapse; } td, th { padding: 2px 8px; text-align: left; vertical-align: top; }
table.grid td, table.grid th { border-bottom: 1px solid #e3e3e3; } th { font-weight: 600; }
a.term { color: inherit; text-decoration: underline dotted #888; }
.num { text-align: right; font-variant-numeric: tabular-nums; }
.gain { display: inline-block; background: #e3f6e7; border: 1px solid #5ac86e; border-radius: 3px; padding: 0 5px; font-weight: 600; white-space: nowrap; }
.skip { color: #777; } .skip .gain { background: #eee; border-color: #bbb; color: #666; }
ol.advice > li { margin: 6px 0; } .model { color: #555; font-size: 13px; }
table.src { font-family: ui-monospace, monospace; font-size: 13px; width: 100%; }
table.src td.n { color: #999; text-align: right; user-select: none; width: 3em; }
table.src td.code { white-space: pre; width: 50%; }
table.src tr.loop td.code { background: #eef7ff; border-left: 3px solid #3b82c4; }
table.src tr.stmt td.code { background: #fbfbe8; }
table.src td.notes { font-family: system-ui, sans-serif; font-size: 12.5px; }
.tag { display: inline-block; border-radius: 3px; padding: 0 4px; margin: 1px 3px 1px 0; background: #eef2f7; border: 1px solid #c8d3e0; }
.tag.adv { background: #e3f6e7; border-color: #5ac86e; }
.tag.skip { background: #f3f3f3; border-color: #ccc; color: #777; }
.gap td { color: #aaa; }
.codes > div { margin-bottom: 10px; }
pre.code { background: #f7f7f7; border: 1px solid #e3e3e3; padding: 8px; font-size: 12.5px; overflow-x: auto; }
pre.code .src { color: #2f6f3a; } pre.code .pragma { color: #a0308a; font-weight: 600; }
dl.glossary dt { font-weight: 600; margin-top: 8px; } dl.glossary dd { margin-left: 18px; }
#pp-flame svg { width: 100%; height: auto; }
"#;

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Prose for a person: escaped, with `code` in backticks shown as code.
fn prose(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for (k, part) in esc(s).split('`').enumerate() {
        if k % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    // An odd number of backticks: the last one was not a pair; keep the text as it was.
    if s.matches('`').count() % 2 == 1 {
        return esc(s);
    }
    out
}

/// A link to the glossary's entry for `id`, showing `text`.
fn term(id: &str, text: &str) -> String {
    format!("<a class=\"term\" href=\"#pp-g-{id}\">{}</a>", esc(text))
}

fn short(file: &str) -> &str {
    file.rsplit('/').next().unwrap_or(file)
}

fn loc_of(l: Option<&Loc>) -> Option<(String, u32)> {
    l.map(|l| (l.file.clone(), l.line))
}

fn region_at(r: &Region) -> String {
    r.location.as_ref().map_or(String::new(), |l| {
        format!(" at {}:{}", short(&l.file), l.line)
    })
}

fn header(h: &mut String, report: &Report) {
    let p = &report.program;
    let t = &report.trace;
    let _ = write!(
        h,
        "<h1>polyprof report: {} {}</h1>",
        esc(&p.path),
        esc(&p.args.join(" "))
    );
    let ended = match (&p.exit_code, &p.signal) {
        (Some(c), _) => format!("exited with status {c}"),
        (None, Some(s)) => format!("killed by {s}"),
        (None, None) => "end unknown".into(),
    };
    let _ = write!(
        h,
        "<p class=\"muted\">{ended}; {} instructions traced from {} ({} engine, {}), {} native library calls, {:.2} s</p>",
        t.instructions,
        esc(&t.start),
        esc(&t.engine),
        if t.complete { "complete" } else { "incomplete" },
        t.native_calls,
        t.seconds
    );
    if t.native_calls > 0 {
        let top: Vec<String> = t
            .native_cost
            .functions
            .iter()
            .take(3)
            .map(|f| format!("{} {:.1}%", esc(&f.name), f.run_percent))
            .collect();
        let _ = write!(
            h,
            "<p class=\"muted\">Native library calls: {:.1}% of the {} ({}; {}).</p>",
            t.native_cost.run_percent,
            term("run", "run's time"),
            top.join(", "),
            esc(&t.native_cost.how_brief())
        );
    }
    for w in &t.warnings {
        let _ = write!(h, "<p class=\"warn\">Warning: {}</p>", esc(w));
    }
}

/// The regions, hottest first, with their best advice.
fn ranking(h: &mut String, report: &Report) {
    let _ = write!(h, "<h2 id=\"pp-regions\">Regions, hottest first</h2>");
    if let Some(said) = report.analysis.sentence() {
        let _ = write!(h, "<p class=\"warn\">{}</p>", prose(&said));
    }
    if report.hot_loops.is_empty() && !report.hot_functions.is_empty() {
        let _ = write!(
            h,
            "<p>Hottest functions, by the {} in their own code:</p><table class=\"grid\"><tr><th>function</th><th>where</th><th class=\"num\">share</th></tr>",
            term("ops", "traced instructions")
        );
        for f in report.hot_functions.iter().take(10) {
            let at = f
                .location
                .as_ref()
                .map_or(String::new(), |l| format!("{}:{}", short(&l.file), l.line));
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{:.2}%</td></tr>",
                esc(&f.name),
                esc(&at),
                f.ops_percent
            );
        }
        h.push_str("</table>");
    }
    if report.regions.is_empty() {
        if report.analysis.is_complete() {
            h.push_str("<p>No region holds enough of the traced instructions to be analysed (see --region-threshold).</p>");
        }
        return;
    }
    let _ = write!(
        h,
        "<table class=\"grid\"><tr><th>{}</th><th>where</th><th class=\"num\">{}</th><th class=\"num\">{}</th><th>best advice</th></tr>",
        term("region", "region"),
        term("ops", "traced instr."),
        term("run", "run's time")
    );
    for r in &report.regions {
        let best = r.suggestions.iter().find(|s| s.advised());
        let advice = match best {
            Some(s) => format!(
                "{} {}",
                s.kind,
                s.gain.as_ref().map_or(String::new(), |g| format!(
                    "<span class=\"gain\">{:.2}x</span>",
                    g.estimate
                ))
            ),
            None => "<span class=\"muted\">none that pays here</span>".to_string(),
        };
        let _ = write!(
            h,
            "<tr><td><a href=\"#pp-{0}\">{0}</a></td><td>{1} in {2}</td><td class=\"num\">{3:.1}%</td><td class=\"num\">{4:.1}%</td><td>{advice}</td></tr>",
            esc(&r.id),
            esc(region_at(r).trim_start_matches(" at ")),
            esc(&r.function),
            r.ops_percent,
            r.run_percent
        );
    }
    h.push_str("</table>");
}

fn flame_section(h: &mut String, flame: Option<&str>) {
    h.push_str("<h2 id=\"pp-flame-title\">Flame graph</h2>");
    match flame.and_then(|f| f.find("<svg").map(|i| &f[i..])) {
        Some(svg) => {
            h.push_str(
                "<p class=\"muted\">Width: instructions traced (and what native calls cost, in \
                 their <a class=\"term\" href=\"#pp-g-native\">[native]</a> frames). Green \
                 frames are regions with advice. Click a frame to zoom, Search to highlight \
                 by <code>file:line</code> or function.</p><div id=\"pp-flame\">",
            );
            h.push_str(svg.trim_end());
            h.push_str("</div>");
        }
        None => h.push_str("<p class=\"muted\">No flame graph was written.</p>"),
    }
}

/// `Sa, Sb`: the statements of report.json at each source line.
fn statements_by_line(r: &Region) -> BTreeMap<(String, u32), Vec<String>> {
    let mut out: BTreeMap<(String, u32), Vec<String>> = BTreeMap::new();
    for s in &r.statements {
        if let Some(at) = loc_of(s.location.as_ref()) {
            out.entry(at).or_default().push(s.id.clone());
        }
    }
    out
}

/// `S1-S4` for consecutive numbers, else a list.
fn span_names(ids: &[String]) -> String {
    let nums: Option<Vec<u64>> = ids
        .iter()
        .map(|n| n.strip_prefix('S').and_then(|d| d.parse().ok()))
        .collect();
    match nums {
        Some(n) if n.len() > 2 && n.windows(2).all(|w| w[1] == w[0] + 1) => {
            format!("{}-{}", ids[0], ids[ids.len() - 1])
        }
        _ => ids.join(", "),
    }
}

/// The source line of the first loop a suggestion names (where it is shown beside the
/// source).
fn anchor(r: &Region, s: &Suggestion) -> Option<(String, u32)> {
    let first = s.loops.first()?;
    let l = r.all_loops.iter().find(|l| &l.id == first)?;
    loc_of(l.location.as_ref())
}

fn region(h: &mut String, r: &Region, sources: &Sources) {
    let _ = write!(
        h,
        "<h2 id=\"pp-{0}\">Region {0}{1} in {2}</h2>",
        esc(&r.id),
        esc(&region_at(r)),
        esc(&r.function)
    );
    let _ = write!(
        h,
        "<p>{:.2}% of the {}; {:.2}% of the {} ({:.2}% in the native calls it makes); {}: {}; {}: {:.0}% of its operations</p>",
        r.ops_percent,
        term("ops", "traced instructions"),
        r.run_percent,
        term("run", "run's time"),
        r.native_percent,
        term("interprocedural", "interprocedural"),
        if r.interprocedural { "yes" } else { "no" },
        term("affine", "exactly affine"),
        r.affine_percent
    );
    advice(h, r);
    source(h, r, sources);
    loops_and_metrics(h, r);
    if let Some(w) = &r.why_not {
        let _ = write!(
            h,
            "<p><b>{}:</b> {}</p>",
            term("whynot", "Why not more"),
            esc(w)
        );
    }
    code(h, r, sources);
}

fn advice(h: &mut String, r: &Region) {
    h.push_str("<h3>Advice, best first</h3>");
    if let Some(rec) = &r.recommended {
        let _ = write!(
            h,
            "<p class=\"recommended\"><b>{}:</b> {}",
            term("recommended", "Recommended"),
            prose(&rec.text)
        );
        if let Some(g) = rec.run_estimate {
            let _ = write!(h, " ({g:.2}x for the whole run)");
        }
        for n in &rec.needs {
            let _ = write!(h, "<br>Needs {}.", prose(n));
        }
        for w in &rec.left_out {
            let _ = write!(h, "<br>Left out: {}.", prose(w));
        }
        h.push_str("</p>");
    }
    if r.suggestions.is_empty() {
        h.push_str("<p>No suggestion.</p>");
        return;
    }
    let now = crate::model::advised_with_leads(&r.suggestions);
    let skipped: Vec<&Suggestion> = r.suggestions.iter().filter(|s| !s.advised()).collect();
    if now.is_empty() {
        h.push_str("<p>No advice pays at this size.</p>");
    } else {
        h.push_str("<ol class=\"advice\">");
        for (s, lead) in now {
            let rank = s.rank;
            let lead = match lead {
                Lead::For(e) => format!(", for the {}", esc(&e)),
                Lead::Alternative => format!(" ({})", term("rank", "or: an alternative")),
                Lead::First => String::new(),
            };
            let gain = gain_phrase(s).map_or(String::new(), |g| {
                format!(" <span class=\"gain\">{}</span>", esc(&g))
            });
            let _ = write!(
                h,
                "<li value=\"{rank}\" id=\"pp-{}-{rank}\"><b>{}</b>{lead}{gain}: {}",
                esc(&r.id),
                s.kind,
                prose(&s.text)
            );
            if let Some(g) = &s.gain {
                let id = match g.model {
                    GainModel::CacheLines => "cachelines",
                    GainModel::Amdahl => "amdahl",
                    GainModel::Simd => "simd",
                };
                let _ = write!(
                    h,
                    "<div class=\"model\">{}: {}</div>",
                    term(id, "model"),
                    prose(&g.basis)
                );
            }
            h.push_str("</li>");
        }
        h.push_str("</ol>");
    }
    if !skipped.is_empty() {
        let _ = write!(
            h,
            "<p class=\"skip\">{}:</p><ul class=\"skip\">",
            term("skipped", "Legal, but not worth it here")
        );
        for s in skipped {
            let _ = write!(
                h,
                "<li><b>{}</b>: {} <i>Skipped: {}.</i></li>",
                s.kind,
                prose(&s.text),
                prose(s.skipped.as_ref().map_or("", |k| k.text.as_str()))
            );
        }
        h.push_str("</ul>");
    }
}

/// Notes for one source line: its loops, statements and the advice anchored there.
#[derive(Default)]
struct Notes {
    loops: Vec<String>,
    statements: Vec<String>,
    advice: Vec<String>,
}

fn source(h: &mut String, r: &Region, sources: &Sources) {
    h.push_str("<h3>Source</h3>");
    let mut notes: BTreeMap<(String, u32), Notes> = BTreeMap::new();
    for l in &r.all_loops {
        if let Some(at) = loc_of(l.location.as_ref()) {
            let tag = format!(
                "<span class=\"tag\" title=\"{}\">{} {}, {}, {} {:.0}%</span>",
                esc(&format!("{} at {}:{}", l.id, short(&at.0), at.1)),
                esc(&l.id),
                if l.parallel {
                    term("parallel", "parallel")
                } else {
                    term("parallel", "serial")
                },
                if l.permutable {
                    term("permutable", "permutable")
                } else {
                    term("permutable", "not permutable")
                },
                term("stride01", "stride 0/1"),
                l.stride01_percent
            );
            notes.entry(at).or_default().loops.push(tag);
        }
    }
    for (at, ids) in statements_by_line(r) {
        notes
            .entry(at)
            .or_default()
            .statements
            .push(span_names(&ids));
    }
    for s in &r.suggestions {
        let Some(at) = anchor(r, s) else { continue };
        let (rank, kind) = (s.rank, s.kind);
        let tag = if s.advised() {
            let gain = s.gain.as_ref().map_or(String::new(), |g| {
                format!(" <span class=\"gain\">{:.2}x</span>", g.estimate)
            });
            format!(
                "<a class=\"tag adv\" href=\"#pp-{}-{rank}\" title=\"{}\">#{rank} {}{gain}</a>",
                esc(&r.id),
                esc(&s.text),
                kind
            )
        } else {
            format!(
                "<span class=\"tag skip\" title=\"{}\">{}: not worth it here</span>",
                esc(s.skipped.as_ref().map_or("", |k| k.text.as_str())),
                kind
            )
        };
        notes.entry(at).or_default().advice.push(tag);
    }
    let files: BTreeSet<&String> = notes.keys().map(|(f, _)| f).collect();
    if files.is_empty() {
        h.push_str("<p class=\"muted\">No source location: the program has no debug information (compile with -g).</p>");
        return;
    }
    for file in files {
        let lines: Vec<u32> = notes
            .keys()
            .filter(|(f, _)| f == file)
            .map(|(_, l)| *l)
            .collect();
        let Some(text) = sources.lines(file) else {
            let _ =
                write!(
                h,
                "<p class=\"muted\">The source file {} is not on this machine: lines {} only.</p>",
                esc(file),
                lines.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            );
            continue;
        };
        let _ = write!(
            h,
            "<p class=\"muted\">{}</p><table class=\"src\">",
            esc(file)
        );
        let mut shown_until = 0u32;
        for (from, to) in stretches(&lines, text.len() as u32) {
            if shown_until > 0 && from > shown_until + 1 {
                h.push_str("<tr class=\"gap\"><td class=\"n\">…</td><td></td><td></td></tr>");
            }
            for n in from..=to {
                source_row(h, n, text, notes.get(&(file.clone(), n)));
            }
            shown_until = to;
        }
        h.push_str("</table>");
    }
}

/// Stretches of lines to show: each referenced line with its context, close ones joined.
fn stretches(lines: &[u32], last: u32) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for &l in lines {
        let (a, b) = (l.saturating_sub(CONTEXT).max(1), (l + CONTEXT).min(last));
        if a > b {
            continue;
        }
        match out.last_mut() {
            Some(s) if a <= s.1 + JOIN_GAP => s.1 = s.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn source_row(h: &mut String, n: u32, text: &[String], notes: Option<&Notes>) {
    let code = text.get(n as usize - 1).map(String::as_str).unwrap_or("");
    let class = match notes {
        Some(x) if !x.loops.is_empty() => " class=\"loop\"",
        Some(x) if !x.statements.is_empty() => " class=\"stmt\"",
        _ => "",
    };
    let mut cell = String::new();
    if let Some(x) = notes {
        for t in x.loops.iter().chain(&x.advice) {
            cell.push_str(t);
        }
        if !x.statements.is_empty() {
            let _ = write!(
                cell,
                "<span class=\"tag\">{} {}</span>",
                term("statement", "statements"),
                esc(&x.statements.join(", "))
            );
        }
    }
    let _ = write!(
        h,
        "<tr{class}><td class=\"n\">{n}</td><td class=\"code\">{}</td><td class=\"notes\">{cell}</td></tr>",
        esc(code.trim_end())
    );
}

/// The loops the program runs in parallel itself, with their verdicts (a race in bold).
fn own_parallel_loops(h: &mut String, r: &Region) {
    let own: Vec<_> = r.all_loops.iter().filter(|l| l.openmp.is_some()).collect();
    if own.is_empty() {
        return;
    }
    h.push_str("<h3>The program's own parallel loops</h3><ul>");
    for l in own {
        let Some(o) = &l.openmp else { continue };
        let at = l
            .location
            .as_ref()
            .map_or(String::new(), |l| format!("{}:{}", short(&l.file), l.line));
        let directive = o
            .directive
            .as_deref()
            .map_or(format!("in {}", esc(&o.body)), |d| {
                format!("<code>{}</code>", esc(d))
            });
        let verdict = match o.verdict {
            crate::model::OmpVerdict::Parallel => esc(o.verdict.brief()),
            _ => format!(
                "<strong>{}</strong>",
                esc(&o.verdict.brief().to_lowercase())
            ),
        };
        let _ = write!(
            h,
            "<li>{} {} {directive}: {verdict}: {}</li>",
            esc(&l.id),
            esc(&at),
            esc(&o.text)
        );
    }
    h.push_str("</ul>");
}

fn loops_and_metrics(h: &mut String, r: &Region) {
    h.push_str("<h3>Loops and metrics</h3><table class=\"grid\"><tr><th>loop</th><th>");
    let _ = write!(
        h,
        "{}</th><th>{}</th><th class=\"num\">{}</th><th>{}</th></tr>",
        term("parallel", "parallel"),
        term("permutable", "permutable"),
        term("stride01", "stride 0/1"),
        term("carries", "carries")
    );
    for l in &r.all_loops {
        let at = l
            .location
            .as_ref()
            .map_or(String::new(), |l| format!("{}:{}", short(&l.file), l.line));
        let _ = write!(
            h,
            "<tr><td>{} {}</td><td>{}</td><td>{}</td><td class=\"num\">{:.0}%</td><td>{}{}</td></tr>",
            esc(&l.id),
            esc(&at),
            crate::parallel_flag(l),
            if l.permutable { "yes" } else { "no" },
            l.stride01_percent,
            esc(&l.carries.join(", ")),
            if l.by_distances {
                " (from distances alone)"
            } else {
                ""
            }
        );
    }
    h.push_str("</table>");
    own_parallel_loops(h, r);
    let m = &r.metrics;
    let _ = write!(
        h,
        "<p>{} {:.0}%, {} {:.0}%, {} {:.0}%, {} {:.0}%, {} {:.0}%, {} {:.0}%; {} {} ({:.0}% of ops), {} {} -&gt; {}, {} {}, {} {}</p>",
        term("memops", "memory ops"),
        m.mem_ops_percent,
        term("fpops", "FP ops"),
        m.fp_ops_percent,
        term("parops", "parallel ops"),
        m.parallel_ops_percent,
        term("simdops", "SIMD ops"),
        m.simd_ops_percent,
        term("reuse", "reuse"),
        m.reuse_percent,
        term("preuse", "Preuse"),
        m.preuse_percent,
        term("tiledepth", "tile depth"),
        m.tile_depth,
        m.tile_ops_percent,
        term("components", "components"),
        m.components_before,
        m.components_after,
        term("skew", "skew"),
        if m.skew { "yes" } else { "no" },
        term("loopdepth", "loop depth"),
        m.loop_depth
    );
}

/// The code before and after, with each comment's source line appended.
fn code(h: &mut String, r: &Region, sources: &Sources) {
    let _ = write!(
        h,
        "<h3>{}</h3><div class=\"codes\">",
        term("code", "Code before and after (generated by isl)")
    );
    for (title, text, fallback) in [
        ("Before", &r.code_before, &r.ast_before),
        ("After the advice", &r.code_after, &r.ast_after),
    ] {
        let body = if text.is_empty() { fallback } else { text };
        let _ = write!(h, "<div><b>{title}</b><pre class=\"code\">");
        for line in body.lines() {
            h.push_str(&code_line(line, sources));
            h.push('\n');
        }
        h.push_str("</pre></div>");
    }
    h.push_str("</div>");
}

/// One line of generated code, escaped, with the source text of the first `file:line` its
/// comment names.
pub(crate) fn code_line(line: &str, sources: &Sources) -> String {
    let trimmed = line.trim_start();
    // The advice's marks: OpenMP's directives, Rust's rayon form (a comment: Rust has none).
    if trimmed.starts_with("#pragma") || trimmed.starts_with("// rayon:") {
        return format!("<span class=\"pragma\">{}</span>", esc(line));
    }
    match source_of_comment(line, sources) {
        Some(text) => format!("{}<span class=\"src\">  ⟵ {}</span>", esc(line), esc(text)),
        None => esc(line),
    }
}

/// The source text of the first `file.c:N` location in a line's `//` comment.
pub(crate) fn source_of_comment<'s>(line: &str, sources: &'s Sources) -> Option<&'s str> {
    // A note on a line of its own (what the advice needs) is no statement's line.
    if line.trim_start().starts_with("//") {
        return None;
    }
    let comment = &line[line.find("//")? + 2..];
    comment
        .split([' ', ',', '(', ')'])
        .find(|w| {
            w.rsplit_once(':').is_some_and(|(f, n)| {
                f.contains('.') && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
            })
        })
        .and_then(|w| sources.line_text(w))
}

fn glossary(h: &mut String) {
    h.push_str("<h2 id=\"pp-glossary\">Glossary</h2><dl class=\"glossary\">");
    for t in GLOSSARY {
        let _ = write!(
            h,
            "<dt id=\"pp-g-{}\">{}</dt><dd>{}</dd>",
            t.id,
            esc(t.name),
            esc(t.meaning)
        );
    }
    h.push_str("</dl>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Gain, LoopEntry, Metrics, NativeCost, Program, SkipReason, Skipped, Statement,
        SuggestionKind, Trace,
    };

    fn report(file: &str) -> Report {
        let mut r = Report::new(
            Program {
                path: "./k".into(),
                args: vec![],
                exit_code: Some(0),
                signal: None,
            },
            Trace {
                engine: "emulate".into(),
                instructions: 1000,
                emulated_percent: 100.0,
                stepped_percent: 0.0,
                complete: true,
                warnings: vec![],
                start: "main".into(),
                trace_libs: false,
                native_calls: 0,
                syscalls: 0,
                signals: 0,
                interrupted: false,
                seconds: 0.1,
                native_cost: NativeCost::default(),
            },
        );
        let loc = |line: u32| {
            Some(Loc {
                file: file.into(),
                line,
            })
        };
        let lp = |id: &str, line: u32, parallel: bool, stride01_percent: f64| LoopEntry {
            id: id.into(),
            location: loc(line),
            depth: line as usize - 2,
            parallel,
            reduction: false,
            permutable: true,
            stride01_percent,
            why_not: None,
            carries: Vec::new(),
            by_distances: false,
            parallel_after: Vec::new(),
            openmp: None,
        };
        let advice = |kind, loops: [&str; 2], text: &str, rank| Suggestion {
            kind,
            loops: loops.iter().map(|l| l.to_string()).collect(),
            text: text.into(),
            rank,
            group: rank,
            alternatives: vec![],
            gain: None,
            enables: vec![],
            array: None,
            mapping: None,
            skipped: None,
            sizes: vec![],
            requires: vec![],
            reduction: vec![],
        };
        r.regions.push(Region {
            id: "R1".into(),
            function: "main".into(),
            location: loc(2),
            ops_percent: 90.0,
            run_percent: 80.0,
            native_percent: 0.0,
            interprocedural: false,
            affine_percent: 100.0,
            loops: vec![],
            all_loops: vec![lp("L1", 2, true, 50.0), lp("L2", 3, false, 100.0)],
            statements: vec![Statement {
                id: "S3".into(),
                address: "0x1000".into(),
                location: loc(4),
                domain: String::new(),
                ops: 1,
                exact: true,
            }],
            dependences: vec![],
            suggestions: vec![
                Suggestion {
                    gain: Some(Gain {
                        model: GainModel::CacheLines,
                        estimate: 2.5,
                        run_estimate: 2.0,
                        basis: "lines 1 -> 0.25".into(),
                    }),
                    ..advice(SuggestionKind::Interchange, ["L2", "L1"], "Swap <them>.", 1)
                },
                Suggestion {
                    skipped: Some(Skipped {
                        reason: SkipReason::FewIterations,
                        text: "too few".into(),
                    }),
                    ..advice(SuggestionKind::Tile, ["L1", "L2"], "Tile.", 2)
                },
            ],
            metrics: Metrics::default(),
            ast_before: String::new(),
            ast_after: String::new(),
            code_before:
                "for (int c1 = 0; c1 <= 7; c1++) {  // k.c:2 (L1)\n  S3(c1);  // k.c:4 store\n}\n"
                    .into(),
            code_after: String::new(),
            why_not: None,
            scheduler: None,
            storage_seconds: None,
            recommended: None,
        });
        r
    }

    const SOURCE: &str = "int main() {\n  for (i = 0; i < n; i++)\n    for (j = 0; j < n; j++)\n      a[j][i] = 0;\n}\n";

    #[test]
    fn advice_sits_beside_its_loop_with_its_gain() {
        let r = report("/src/k.c");
        let page = render_html(&r, None, &Sources::from_texts(&[("/src/k.c", SOURCE)]));
        // The interchange names L2 first: it sits on L2's line, 3.
        let row3 = &page[page.find("<td class=\"n\">3</td>").unwrap()..];
        let row3 = &row3[..row3.find("</tr>").unwrap()];
        assert!(
            row3.contains("#1 interchange") && row3.contains("2.50x"),
            "{row3}"
        );
        let row2 = &page[page.find("<td class=\"n\">2</td>").unwrap()..];
        let row2 = &row2[..row2.find("</tr>").unwrap()];
        assert!(row2.contains("tile: not worth it here"), "{row2}");
        assert!(page.contains("Swap &lt;them&gt;."), "escaped");
        assert!(page.contains("a[j][i] = 0;"));
        // The generated code's comments completed with the source text.
        assert!(page.contains("⟵ a[j][i] = 0;"), "{page}");
        assert!(page.contains("Legal, but not worth it here"));
        assert!(page.contains("id=\"pp-g-preuse\""));
        assert!(page.contains("No flame graph"));
    }

    #[test]
    fn a_missing_source_file_is_said() {
        let r = report("/nowhere/k.c");
        let page = render_html(&r, None, &Sources::default());
        assert!(
            page.contains(
                "The source file /nowhere/k.c is not on this machine: lines 2, 3, 4 only."
            ),
            "{page}"
        );
    }

    #[test]
    fn close_lines_are_shown_together() {
        assert_eq!(stretches(&[2, 3, 4], 10), [(1, 5)]);
        assert_eq!(stretches(&[2, 30], 40), [(1, 3), (29, 31)]);
    }
}
