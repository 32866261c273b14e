//! The flame graph (inferno) and the folded stacks it is drawn from.

use crate::Error;
use std::path::Path;

/// Writes `stacks.folded`: one `frame;frame;... count` line per stack.
pub fn write_folded(lines: &[String], path: &Path) -> Result<(), Error> {
    let mut text = lines.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|source| Error::Write {
        path: path.display().to_string(),
        source,
    })
}

/// How to draw the frames of one name: a fill colour, and a tooltip replacing the default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FrameStyle {
    pub color: Option<(u8, u8, u8)>,
    pub tooltip: Option<String>,
}

/// Grey, for frames the analysis could not model (non-affine regions, library calls).
pub const GREY: (u8, u8, u8) = (190, 190, 190);
/// Green, for regions with suggestions.
pub const HIGHLIGHT: (u8, u8, u8) = (90, 200, 110);

/// Renders the folded stacks as an interactive SVG flame graph. Width is dynamic
/// instructions; `title` names the program and its arguments; `styles` colours frames and
/// gives them tooltips, by frame name.
pub fn write_flamegraph(
    lines: &[String],
    title: &str,
    styles: &std::collections::BTreeMap<String, FrameStyle>,
    path: &Path,
) -> Result<(), Error> {
    let mut palette = inferno::flamegraph::color::PaletteMap::default();
    let mut attrs = String::new();
    for (name, style) in styles {
        if let Some((r, g, b)) = style.color {
            palette.insert(name, inferno::flamegraph::color::Color { r, g, b });
        }
        if let Some(t) = &style.tooltip {
            attrs.push_str(&format!("{name}\ttitle={}\n", t.replace(['\t', '\n'], " ")));
        }
    }
    let frameattrs = inferno::flamegraph::FuncFrameAttrsMap::from_reader(attrs.as_bytes())
        .map_err(|source| Error::Write {
            path: path.display().to_string(),
            source,
        })?;
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = title.to_string();
    opts.count_name = "instructions".to_string();
    opts.name_type = "Frame:".to_string();
    opts.hash = true;
    opts.func_frameattrs = frameattrs;
    opts.palette_map = Some(&mut palette);
    let file = std::fs::File::create(path).map_err(|source| Error::Write {
        path: path.display().to_string(),
        source,
    })?;
    let mut out = std::io::BufWriter::new(file);
    let result = if lines.is_empty() {
        // inferno refuses empty input; an empty trace still gets a valid (empty) graph.
        opts.flame_chart = false;
        inferno::flamegraph::from_lines(&mut opts, std::iter::once("(nothing traced) 1"), &mut out)
    } else {
        inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)
    };
    result.map_err(|e| Error::Write {
        path: path.display().to_string(),
        source: std::io::Error::other(e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_the_frames_and_the_title() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("f.svg");
        let lines = vec![
            "main;loop k.c:4 90".to_string(),
            "main;call puts 3".to_string(),
        ];
        let mut styles = std::collections::BTreeMap::new();
        styles.insert(
            "loop k.c:4".to_string(),
            FrameStyle {
                color: Some(HIGHLIGHT),
                tooltip: Some("region R1: interchange".into()),
            },
        );
        write_flamegraph(&lines, "./k 10", &styles, &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("region R1: interchange"));
        assert!(text.contains("rgb(90,200,110)"));
        assert!(text.contains("<svg"));
        assert!(text.contains("loop k.c:4"));
        assert!(text.contains("./k 10"));
        assert!(text.contains("instructions"));
        let folded = dir.path().join("s.folded");
        write_folded(&lines, &folded).unwrap();
        assert_eq!(
            std::fs::read_to_string(&folded).unwrap(),
            "main;loop k.c:4 90\nmain;call puts 3\n"
        );
    }
}
