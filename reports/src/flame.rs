//! The flame graph (inferno) and the folded stacks it is drawn from.
//!
//! Frame labels: inferno's script relabels every frame when the page loads (and on zoom) with
//! its `<title>` minus a final parenthesised group, and its search matches the whole title. So a
//! frame that carries facts gets, through inferno's own title option, the title inferno would
//! write itself with the facts inside the parentheses:
//! `loop matmul.c:18 (17,664 instructions, 75.13%; L6: parallel, ...)`. Facts must therefore
//! hold no parenthesis and name no other frame (a search for `matmul.c:18` must match only
//! that loop's frames).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

/// Parses `frame;frame;... count` lines and orders them by frames (not by the joined text), so
/// every frame's stacks are contiguous: sorted as text, `main;loop k.c:41` would fall between
/// `main;loop k.c:4 5` and `main;loop k.c:4;call f 3`, and `loop k.c:4` be drawn as two frames.
fn stacks(lines: &[String]) -> Vec<(Vec<&str>, u64)> {
    let mut out: Vec<(Vec<&str>, u64)> = lines
        .iter()
        .filter_map(|l| {
            let (stack, count) = l.rsplit_once(' ')?;
            Some((stack.split(';').collect(), count.trim().parse().ok()?))
        })
        .collect();
    out.sort();
    out
}

fn join(stacks: &[(Vec<&str>, u64)]) -> Vec<String> {
    stacks
        .iter()
        .map(|(s, c)| format!("{} {c}", s.join(";")))
        .collect()
}

/// Writes `stacks.folded`: one `frame;frame;... count` line per stack, each frame's stacks
/// together.
pub fn write_folded(lines: &[String], mut out: impl Write) -> io::Result<()> {
    for line in join(&stacks(lines)) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// How to draw the frames of one name: a fill colour, and facts for their tooltips.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameStyle {
    pub color: Option<(u8, u8, u8)>,
    /// Short phrases, joined with `; ` after the frame's width and share. Parentheses are
    /// turned into brackets (inferno's script cuts the label at the last `(`).
    pub facts: Vec<String>,
    /// The unit of these frames' width when it is not the graph's (`instruction
    /// equivalents` for native calls timed by CPU time).
    pub unit: Option<String>,
}

/// Grey, for frames the analysis could not model (non-affine regions, library calls).
pub const GREY: (u8, u8, u8) = (190, 190, 190);
/// Green, for regions with suggestions.
pub const HIGHLIGHT: (u8, u8, u8) = (90, 200, 110);

/// What the graph draws for one frame name: how many frames bear it and their total width
/// (a frame nested in a frame of the same name is counted once, within the outer one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Drawn {
    frames: u64,
    width: u64,
}

fn drawn(stacks: &[(Vec<&str>, u64)]) -> BTreeMap<String, Drawn> {
    let mut out: BTreeMap<String, Drawn> = BTreeMap::new();
    let mut prev: &[&str] = &[];
    for (stack, count) in stacks {
        let common = stack.iter().zip(prev).take_while(|(a, b)| a == b).count();
        for (depth, name) in stack.iter().enumerate() {
            let outer = !stack[..depth].contains(name);
            let d = out.entry(name.to_string()).or_default();
            if depth >= common {
                d.frames += 1;
            }
            if outer {
                d.width += count;
            }
        }
        prev = stack;
    }
    out
}

/// `1234567` as `1,234,567`, as inferno writes counts.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut s = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            s.push(',');
        }
        s.push(c);
    }
    s
}

/// The tooltip of a frame with facts, in the form inferno writes and its script parses.
fn title(name: &str, d: Drawn, total: u64, unit: &str, facts: &[String]) -> String {
    let mut t = format!("{name} ({} {unit}", thousands(d.width));
    if d.frames > 1 {
        let _ = write!(t, " in {} frames", d.frames);
    }
    let _ = write!(t, ", {:.2}%", 100.0 * d.width as f64 / total.max(1) as f64);
    for f in facts {
        t.push_str("; ");
        t.push_str(&f.replace('(', "[").replace(')', "]"));
    }
    t.push(')');
    t.replace(['\t', '\n'], " ")
}

/// Renders the folded stacks as an interactive SVG flame graph. `title` names the program and
/// its arguments, `subtitle` states what width measures, `unit` names the count
/// (`instructions`); `styles` colours frames and gives them facts, by frame name.
pub fn write_flamegraph(
    lines: &[String],
    title_text: &str,
    subtitle: Option<&str>,
    unit: &str,
    styles: &BTreeMap<String, FrameStyle>,
    mut out: impl Write,
) -> io::Result<()> {
    let stacks = stacks(lines);
    let total: u64 = stacks.iter().map(|(_, c)| c).sum();
    let drawn = drawn(&stacks);
    let mut palette = inferno::flamegraph::color::PaletteMap::default();
    let mut attrs = String::new();
    for (name, style) in styles {
        if let Some((r, g, b)) = style.color {
            palette.insert(name, inferno::flamegraph::color::Color { r, g, b });
        }
        let Some(&d) = drawn.get(name) else { continue };
        if !style.facts.is_empty() {
            let unit = style.unit.as_deref().unwrap_or(unit);
            let t = title(name, d, total, unit, &style.facts);
            let _ = writeln!(attrs, "{name}\ttitle={t}");
        }
    }
    let frameattrs = inferno::flamegraph::FuncFrameAttrsMap::from_reader(attrs.as_bytes())?;
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title_text.to_string();
    opts.subtitle = subtitle.map(str::to_string);
    opts.count_name = unit.to_string();
    opts.name_type = "Frame:".to_string();
    opts.hash = true;
    // Already ordered frame by frame (see `stacks`). `no_sort` would insist on lines sorted as
    // text; flame-chart mode takes lines in the order given (last first: it reverses them) and
    // merges them the same way.
    opts.flame_chart = true;
    opts.func_frameattrs = frameattrs;
    opts.palette_map = Some(&mut palette);
    let lines = join(&stacks);
    let result = if lines.is_empty() {
        // inferno refuses empty input; an empty trace still gets a valid (empty) graph.
        inferno::flamegraph::from_lines(&mut opts, std::iter::once("(nothing traced) 1"), &mut out)
    } else {
        inferno::flamegraph::from_lines(&mut opts, lines.iter().rev().map(String::as_str), &mut out)
    };
    result.map_err(|e| io::Error::other(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The label inferno's script shows for a title: the title minus its final `(...)`.
    fn label(title: &str) -> &str {
        match title.rfind('(') {
            Some(i) if title.ends_with(')') => title[..i].trim_end(),
            _ => title,
        }
    }

    fn titles(svg: &str) -> Vec<String> {
        svg.split("<title>")
            .skip(1)
            .filter_map(|s| s.split("</title>").next())
            .map(|s| {
                s.replace("&amp;", "&")
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
            })
            .collect()
    }

    #[test]
    fn frames_with_facts_keep_their_names_as_labels() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("f.svg");
        let lines = vec![
            "main;loop k.c:4 90".to_string(),
            "main;loop k.c:4;call puts 3".to_string(),
            "main;loop k.c:41 7".to_string(),
            "main;call puts 2".to_string(),
        ];
        let mut styles = BTreeMap::new();
        styles.insert(
            "loop k.c:4".to_string(),
            FrameStyle {
                color: Some(HIGHLIGHT),
                facts: vec!["region R1 (hot)".into(), "suggests interchange".into()],
                unit: None,
            },
        );
        styles.insert(
            "call puts".to_string(),
            FrameStyle {
                color: Some(GREY),
                facts: vec!["run natively".into()],
                unit: None,
            },
        );
        write_flamegraph(
            &lines,
            "./k 10",
            Some("width: instructions"),
            "instructions",
            &styles,
            std::fs::File::create(&svg).unwrap(),
        )
        .unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        let t = titles(&text);
        // One frame for `loop k.c:4` although `loop k.c:41` sorts between its stacks as text.
        let loop4: Vec<&String> = t.iter().filter(|s| label(s) == "loop k.c:4").collect();
        assert_eq!(
            loop4,
            [
                &"loop k.c:4 (93 instructions, 91.18%; region R1 [hot]; suggests interchange)"
                    .to_string()
            ],
            "{t:?}"
        );
        // Two `call puts` frames: the title says so, and its label is still the name.
        let puts: Vec<&String> = t.iter().filter(|s| s.starts_with("call puts")).collect();
        assert_eq!(puts.len(), 2, "{t:?}");
        assert_eq!(
            puts[0],
            "call puts (5 instructions in 2 frames, 4.90%; run natively)"
        );
        assert_eq!(label(puts[0]), "call puts");
        // Frames without facts keep inferno's own title.
        assert!(
            t.contains(&"loop k.c:41 (7 instructions, 6.86%)".to_string()),
            "{t:?}"
        );
        assert!(text.contains("rgb(90,200,110)"));
        assert!(text.contains("width: instructions"));
        assert!(text.contains("./k 10"));
        let folded = dir.path().join("s.folded");
        write_folded(&lines, std::fs::File::create(&folded).unwrap()).unwrap();
        assert_eq!(
            std::fs::read_to_string(&folded).unwrap(),
            "main;call puts 2\nmain;loop k.c:4 90\nmain;loop k.c:4;call puts 3\nmain;loop k.c:41 7\n"
        );
    }

    #[test]
    fn nested_frames_of_one_name_count_once() {
        let s = vec![
            "f;f;g 4".to_string(),
            "f 1".to_string(),
            "h;f 2".to_string(),
        ];
        let st = stacks(&s);
        let d = drawn(&st);
        assert_eq!(
            d["f"],
            Drawn {
                frames: 3,
                width: 7
            }
        );
        assert_eq!(
            d["g"],
            Drawn {
                frames: 1,
                width: 4
            }
        );
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
    }
}
