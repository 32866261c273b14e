//! Which transformation the code "after the advice" shows: the region's ranked advice
//! composed. Every loop order, tile and pragma in it is an item of the ranked list (the one
//! parallel loop is the best-ranked parallelization's), so the code never shows a
//! transformation the list does not name (isl's own schedule, say, when the list ranks a
//! parallel loop first).

use crate::input::Region;
use crate::{Feedback, Suggestion, SuggestionKind};
use reports::model::{Directive, Recommendation, Tiling};

/// The suggestions the after-code is built from.
#[derive(Default)]
pub(crate) struct Composed<'f> {
    /// The loop order (an interchange).
    pub(crate) order: Option<&'f Suggestion>,
    pub(crate) tile: Option<&'f Suggestion>,
    pub(crate) parallel: Option<&'f Suggestion>,
    /// Parallel loops of other nests, ranked below `parallel`: one parallel loop per nest.
    pub(crate) more_parallel: Vec<&'f Suggestion>,
    pub(crate) simd: Option<&'f Suggestion>,
    /// A skew, fusion or distribution heading the advice: isl's schedule is its code.
    pub(crate) isl: Option<&'f Suggestion>,
    /// Every suggestion is skipped on this input: the code shows the best-ranked anyway.
    pub(crate) skipped: bool,
    /// Ranked parts left out, and why.
    pub(crate) left_out: Vec<String>,
}

/// Kinds that change the loops (the others change storage or layout, and leave them).
fn loop_kind(k: SuggestionKind) -> bool {
    use SuggestionKind::*;
    matches!(
        k,
        Interchange | Tile | Parallelize | Vectorize | Skew | Fuse | Distribute
    )
}

/// A tile of a band that must be skewed first: rows of the program's order cannot show it.
fn needs_skew(s: &Suggestion) -> bool {
    s.text.contains("after skewing")
}

/// The ranked advice composed: the suggestions that are not skipped, best first (all of them
/// when each is skipped); of each kind, the best-ranked one.
pub(crate) fn compose<'f>(fb: &'f Feedback, region: &Region) -> Composed<'f> {
    let live: Vec<&Suggestion> = fb
        .suggestions
        .iter()
        .filter(|s| s.rating.skipped.is_none() && loop_kind(s.kind))
        .collect();
    let skipped = live.is_empty();
    let pool: Vec<&Suggestion> = match skipped {
        true => fb
            .suggestions
            .iter()
            .filter(|s| loop_kind(s.kind))
            .collect(),
        false => live,
    };
    let first = |k: SuggestionKind| pool.iter().copied().find(|s| s.kind == k);
    let rank = |s: &Suggestion| pool.iter().position(|p| std::ptr::eq(*p, s));
    let (mut parallel, mut simd) = (
        first(SuggestionKind::Parallelize),
        first(SuggestionKind::Vectorize),
    );
    // One directive per loop (`parallel for` then `simd` on one loop is not C): the
    // better-ranked one.
    if let (Some(p), Some(v)) = (parallel, simd) {
        if p.loops.first() == v.loops.first() {
            match rank(p) < rank(v) {
                true => simd = None,
                false => parallel = None,
            }
        }
    }
    // A reduction on an array's element vectorizes through a local scalar, a source change
    // the suggestion asks for: the composition, applied as printed, leaves the loop alone.
    let mut left_out = Vec::new();
    if let Some(v) = simd.filter(|v| array_reduction(v)) {
        left_out.push(format!(
            "vectorizing loop {}, whose reduction on an array element needs a local scalar (see its suggestion)",
            v.loops.first().map_or("", String::as_str)
        ));
        simd = None;
    }
    let mut c = Composed {
        parallel,
        simd,
        left_out,
        skipped: skipped && !pool.is_empty(),
        ..Composed::default()
    };
    let Some(head) = pool.first() else {
        return c;
    };
    if matches!(
        head.kind,
        SuggestionKind::Skew | SuggestionKind::Fuse | SuggestionKind::Distribute
    ) {
        c.isl = Some(head);
        c.tile = first(SuggestionKind::Tile);
        return c;
    }
    c.order = first(SuggestionKind::Interchange);
    // A parallelization found in the interchanged order holds only there (its text says so):
    // the order comes with it even when the interchange itself is skipped.
    if c.order.is_none()
        && c.parallel
            .is_some_and(|p| p.text.contains("once the loops are interchanged"))
    {
        c.order = fb
            .suggestions
            .iter()
            .find(|s| s.kind == SuggestionKind::Interchange);
    }
    c.tile = first(SuggestionKind::Tile).filter(|t| !needs_skew(t));
    // The other nests' parallel loops: apart from every loop the code already reorders or
    // runs in parallel (or vectorizes: one directive per loop).
    let mut taken: Vec<&str> = [c.order, c.tile, c.parallel, c.simd]
        .into_iter()
        .flatten()
        .flat_map(|s| s.loops.iter().map(String::as_str))
        .collect();
    for p in pool
        .iter()
        .filter(|s| s.kind == SuggestionKind::Parallelize)
    {
        let Some(l) = p.loops.first() else { continue };
        if taken.iter().all(|t| apart(region, t, l)) {
            c.more_parallel.push(p);
            taken.push(l);
        }
    }
    c
}

/// Whether a suggestion's reductions include one on an array's elements.
fn array_reduction(s: &Suggestion) -> bool {
    s.requires.iter().any(|r| {
        matches!(
            r.change,
            crate::legality::Change::Reduction { array: true, .. }
        )
    })
}

/// Whether loops `a` and `b` are neither one loop nor nested one in the other: no statement
/// runs in both.
fn apart(region: &Region, a: &str, b: &str) -> bool {
    let index = |id: &str| region.loops.iter().position(|l| l.id == id);
    let (Some(a), Some(b)) = (index(a), index(b)) else {
        return false;
    };
    !region
        .statements
        .iter()
        .any(|s| s.loops.contains(&a) && s.loops.contains(&b))
}

/// The directive a suggestion's text quotes (`` `#pragma omp parallel for private(k)` ``, or
/// Fortran's `!$omp parallel do`), else `default`.
pub(crate) fn directive(s: &Suggestion, default: &str) -> String {
    let word = default.split_whitespace().nth(2).unwrap_or("parallel");
    let (c, fortran) = (format!("#pragma omp {word}"), format!("!$omp {word}"));
    s.text
        .split('`')
        .skip(1)
        .step_by(2)
        .find(|q| q.starts_with(&c) || q.starts_with(&fortran))
        .map_or_else(|| default.to_string(), str::to_string)
}

/// Comment lines naming what the composed advice needs besides its loops and pragmas: the
/// source changes no clause makes (a copy, a substitution, a local array, an expansion), and
/// that the advice is skipped on this input.
pub(crate) fn notes(c: &Composed<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if c.skipped && !parts(c).is_empty() {
        out.push(
            "// Every suggestion is skipped on this input: this applies the best-ranked anyway."
                .to_string(),
        );
    }
    if let Some(head) = c.isl {
        // Its loops may also be reordered or split as isl chose: the suggestion comes from it.
        out.push(format!(
            "// isl's schedule, which the {} ranked first comes from.",
            head.kind.as_str()
        ));
    }
    out.extend(needs(c).into_iter().map(|p| format!("// Needs {p}.")));
    out
}

/// The composed parts, best-ranked first: the schedule heading them, the order, the tiling,
/// the parallel loops and the vectorized loop.
fn parts<'f>(c: &Composed<'f>) -> Vec<&'f Suggestion> {
    let mut all: Vec<&Suggestion> = [c.isl, c.order, c.tile, c.parallel, c.simd]
        .into_iter()
        .flatten()
        .chain(c.more_parallel.iter().copied())
        .collect();
    all.sort_by_key(|s| s.rating.rank);
    all
}

/// The source changes the composed advice needs besides its clauses, as phrases.
fn needs(c: &Composed<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in parts(c) {
        for r in s.requires.iter().filter(|r| r.change.condition().is_some()) {
            let p = r.phrase();
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// The composed advice as one recommendation, `left_out` naming what the check refuted; none
/// without loop advice that pays here.
pub(crate) fn recommendation(
    fb: &Feedback,
    language: symbols::Language,
    c: &Composed<'_>,
    left_out: Vec<String>,
) -> Option<Recommendation> {
    let all = parts(c);
    // Advice that does not pay at this size is no recommendation (the code after still
    // shows it).
    if all.is_empty() || c.skipped {
        return None;
    }
    let label = |id: &String| {
        fb.loops
            .iter()
            .find(|l| &l.id == id)
            .map_or_else(|| id.clone(), |l| l.label.clone())
    };
    let labels = |ids: &[String]| -> String {
        let names: Vec<String> = ids.iter().map(label).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.join(""),
        }
    };
    // Rust has no directives: its parallel loop is rayon's form, its vectorized loop rustc's.
    let rust = language == symbols::Language::Rust;
    let on = |s: &Suggestion, default: &str| Directive {
        loop_id: s.loops.first().cloned().unwrap_or_default(),
        directive: match (rust, s.kind) {
            (true, SuggestionKind::Parallelize) => crate::analyze::rayon::quoted_form(&s.text)
                .unwrap_or("rayon")
                .to_string(),
            (true, _) => String::new(),
            (false, _) => directive(s, default),
        },
    };
    let mut clauses = Vec::new();
    if let Some(h) = c.isl {
        clauses.push(format!(
            "follow isl's schedule (the {} of {}, shown as the code after the advice)",
            h.kind.as_str(),
            labels(&h.loops)
        ));
    }
    if let Some(o) = c.order {
        clauses.push(format!(
            "order the loops {}",
            o.loops.iter().map(label).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(t) = c.tile {
        let size = t.sizes.first().copied().unwrap_or(32);
        clauses.push(format!("tile {} by {size}", labels(&t.loops)));
    }
    let parallel: Vec<Directive> = c
        .parallel
        .iter()
        .chain(&c.more_parallel)
        .map(|p| on(p, "#pragma omp parallel for"))
        .collect();
    for d in &parallel {
        clauses.push(format!(
            "run {} in parallel (`{}`)",
            label(&d.loop_id),
            d.directive
        ));
    }
    let simd_directive = match language {
        symbols::Language::Fortran => "!$omp simd",
        _ => "#pragma omp simd",
    };
    let simd = c.simd.map(|v| on(v, simd_directive));
    match &simd {
        Some(d) if rust => clauses.push(format!(
            "vectorize {} (no directive in Rust: rustc does it at -O)",
            label(&d.loop_id)
        )),
        Some(d) => clauses.push(format!(
            "vectorize {} (`{}`)",
            label(&d.loop_id),
            d.directive
        )),
        None => {}
    }
    let estimate = composed_estimate(&all);
    let mut text = capitalized(&clauses.join(", then "));
    if let Some(e) = estimate {
        text += &format!(": {e:.2}x for the region by the parts' estimates");
    }
    text.push('.');
    Some(Recommendation {
        text,
        ranks: all.iter().map(|s| s.rating.rank).collect(),
        order: c.order.map(|o| o.loops.clone()).unwrap_or_default(),
        tile: c.tile.map(|t| Tiling {
            loops: t.loops.clone(),
            sizes: t.sizes.clone(),
        }),
        parallel,
        simd,
        schedule: c.isl.map(|h| h.kind),
        needs: needs(c),
        left_out,
        estimate,
        run_estimate: None,
    })
}

/// Whether a parallel or vectorized loop was found in the interchanged order (its text
/// says so): it holds only there.
pub(crate) fn in_new_order(s: &Suggestion) -> bool {
    s.text.contains("once the loops are interchanged")
}

/// Gives up the composed loop order, and with it the loops parallel or vectorized only in
/// that order.
pub(crate) fn drop_order(c: &mut Composed<'_>) {
    c.order = None;
    c.parallel = c.parallel.filter(|s| !in_new_order(s));
    c.more_parallel.retain(|s| !in_new_order(s));
    c.simd = c.simd.filter(|s| !in_new_order(s));
}

/// The parts' estimates composed: models of different resources (cache lines, cores,
/// vector lanes) multiply; the cache-lines model's parts (an order and a tiling) save the
/// same misses, so only the best of them counts.
fn composed_estimate(parts: &[&Suggestion]) -> Option<f64> {
    let gains: Vec<&crate::Gain> = parts
        .iter()
        .filter_map(|s| s.rating.gain.as_ref())
        .collect();
    if gains.is_empty() {
        return None;
    }
    let cache = gains
        .iter()
        .filter(|g| g.model == crate::GainModel::CacheLines)
        .map(|g| g.estimate)
        .fold(1.0, f64::max);
    let others: f64 = gains
        .iter()
        .filter(|g| g.model != crate::GainModel::CacheLines)
        .map(|g| g.estimate)
        .product();
    Some(cache * others)
}

/// The recommendation when isl stopped before the composed order could be checked: the
/// parts each checked on their own in the program's order (its parallel and vectorized
/// loops), without the loop order and tiling.
pub(crate) fn unchecked(fb: &Feedback, region: &Region) -> Option<Recommendation> {
    let mut c = compose(fb, region);
    let mut left_out = std::mem::take(&mut c.left_out);
    for s in [c.isl, c.order, c.tile].into_iter().flatten() {
        left_out.push(format!(
            "the {} of {}, which isl stopped before checking with the rest",
            s.kind.as_str(),
            s.loops.join(", ")
        ));
    }
    drop_order(&mut c);
    (c.isl, c.tile) = (None, None);
    recommendation(fb, region.language, &c, left_out)
}

fn capitalized(s: &str) -> String {
    let mut cs = s.chars();
    cs.next()
        .map_or_else(String::new, |f| f.to_uppercase().chain(cs).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gain::{Skip, SkipReason};

    fn s(kind: SuggestionKind, loops: &[&str], text: &str, skipped: bool) -> Suggestion {
        let mut s = Suggestion::new(
            kind,
            loops.iter().map(|l| l.to_string()).collect(),
            text.into(),
        );
        if skipped {
            s.rating.skipped = Some(Skip {
                reason: SkipReason::LittleWork,
                text: String::new(),
            });
        }
        s
    }

    #[test]
    fn the_best_ranked_parallel_loop_not_isl_s_skew() {
        // trmm: the parallel loop ranks first, the skew after it.
        let fb = Feedback {
            suggestions: vec![
                s(
                    SuggestionKind::Parallelize,
                    &["L12"],
                    "Run loop L12 in parallel (e.g. `#pragma omp parallel for private(k)`)",
                    false,
                ),
                s(SuggestionKind::Skew, &["L11", "L12"], "Skew", false),
                s(
                    SuggestionKind::Tile,
                    &["L11", "L12"],
                    "Tile the band after skewing",
                    false,
                ),
            ],
            ..Feedback::default()
        };
        let c = compose(&fb, &Region::default());
        assert!(c.isl.is_none() && c.tile.is_none() && c.order.is_none());
        let p = c.parallel.expect("the parallel loop");
        assert_eq!(p.loops, ["L12"]);
        assert_eq!(
            directive(p, "#pragma omp parallel for"),
            "#pragma omp parallel for private(k)"
        );
    }

    #[test]
    fn skipped_advice_is_shown_only_when_all_is_skipped() {
        let fb = Feedback {
            suggestions: vec![
                s(SuggestionKind::Parallelize, &["L1"], "p", true),
                s(SuggestionKind::Interchange, &["L0", "L2", "L1"], "i", false),
            ],
            ..Feedback::default()
        };
        let c = compose(&fb, &Region::default());
        assert!(!c.skipped && c.parallel.is_none());
        assert_eq!(c.order.map(|o| o.loops.len()), Some(3));
        let fb = Feedback {
            suggestions: vec![s(SuggestionKind::Parallelize, &["L1"], "p", true)],
            ..Feedback::default()
        };
        let c = compose(&fb, &Region::default());
        assert!(c.skipped && c.parallel.is_some());
    }
}
