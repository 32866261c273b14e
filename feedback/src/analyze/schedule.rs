//! What isl's scheduler makes of a region: its schedule tree and maps, or why there are none
//! (it failed, ran out of its budget, or most of the region's work is at addresses that
//! depend on data); the bands and skews along the tree; and the suggestions that follow it
//! (skewing, tiling, fusion, distribution), with the storage changes they need.

use super::text::phrases;
use crate::input::{Region, Statement, Storage};
use crate::islx::{self, union_map, Tree};
use crate::legality::{pct, Ctx};
use crate::{Error, Feedback, Options, Rating, Suggestion, SuggestionKind};
use isl_rs::UnionMap;

/// Share of a region's operations, in percent, at data-dependent addresses from which the
/// region is reported not affine instead of scheduled.
const NOT_AFFINE_SHARE: f64 = 50.0;

/// What the scheduler made of a region: its schedule tree and its maps (plain and tiled,
/// read into the region's context), or why there are none.
pub(super) struct Scheduled {
    pub(super) tree: Tree,
    pub(super) maps: Option<(UnionMap, UnionMap)>,
    pub(super) failure: Option<String>,
    /// The failure is an answer about the region (not affine), which its parts would give
    /// too: they are not scheduled either.
    pub(super) settled: bool,
}

/// Why the region is not scheduled: it does input or output, whose order is the program's
/// (a loop that prints is serial, and nothing may move its calls).
fn does_io(region: &Region) -> Option<String> {
    let output = tracer::deps::Effect::Output.describe();
    let io = region
        .dependences
        .iter()
        .any(|d| matches!(&d.storage, Storage::Effect { name } if name == output));
    if !io {
        return None;
    }
    let calls = if region.library_calls.is_empty() {
        String::new()
    } else {
        format!(" (calls {})", region.library_calls.join(", "))
    };
    Some(format!(
        "the region does input or output{calls}, which keeps the program's order"
    ))
}

/// Why the region is not scheduled: most of its work at addresses that depend on data (a
/// hash chain, a table lookup), where a schedule of the over-approximated problem would say
/// nothing true about the program.
fn not_affine(region: &Region) -> Option<String> {
    const SHOWN_LINES: usize = 4;
    let total: u64 = region.statements.iter().map(|s| s.ops).sum();
    let mut data_addressed: Vec<&Statement> = region
        .statements
        .iter()
        .filter(|s| {
            s.accesses
                .iter()
                .any(|a| a.strides.iter().any(Option::is_none))
        })
        .collect();
    data_addressed.sort_by_key(|s| std::cmp::Reverse(s.ops));
    let data_share = pct(data_addressed.iter().map(|s| s.ops).sum(), total);
    if data_share < NOT_AFFINE_SHARE {
        return None;
    }
    let mut lines: Vec<String> = Vec::new();
    for s in &data_addressed {
        let l = crate::legality::line_of(region, &s.name);
        if !lines.contains(&l) {
            lines.push(l);
        }
    }
    // The hottest lines only: a why-not stays short enough to read (issue 36).
    let at = if lines.len() > SHOWN_LINES {
        format!(
            "{} and {} other lines",
            lines[..SHOWN_LINES].join(", "),
            lines.len() - SHOWN_LINES
        )
    } else {
        lines.join(", ")
    };
    Some(format!(
        "the region is not affine: addresses depend on data at {at} ({data_share:.0}% of its operations)"
    ))
}

/// Runs isl's scheduler on the region's binding dependences, within a budget of its own: when
/// it fails or runs out, the per-loop answers (parallel, vectorize, interchange), which need
/// only the dependences, still hold. Not affine is an answer too (see [`not_affine`]).
///
/// `whole`: the problem is the whole region (not a part of it, see `parts`): its schedule is
/// then the region's, kept for the code after the advice.
pub(super) fn schedule_region(
    cx: &Ctx<'_>,
    binding: &[usize],
    opts: &Options,
    fb: &mut Feedback,
    whole: bool,
) -> Result<Scheduled, Error> {
    let isl = cx.isl;
    // The scheduler runs on contexts of its own: the problem goes there in isl's notation,
    // printed by isl.
    let domain = islx::text(&cx.domain()?)?;
    let validity = match cx.deps_map(binding)? {
        Some(m) => m,
        None => UnionMap::empty_ctx(isl).map_err(islx::isl("an empty map"))?,
    };
    // A statement's dependences on itself in many pieces go as their distance hull before
    // they are printed: the scheduler's contexts read the text again, once per strategy.
    let validity = islx::text(&islx::hulled(validity)?)?;
    // Not affine is an answer for its parts too; a part without the input and output may
    // still be scheduled (a nest inside a time loop that prints its progress).
    let settled = not_affine(cx.region);
    let scheduled = match settled.clone().or_else(|| does_io(cx.region)) {
        Some(why) => Err(why),
        None => {
            let started = std::time::Instant::now();
            let s = islx::schedule(opts, &domain, &validity, &cx.params).map_err(|e| e.to_string());
            let spent = started.elapsed().as_secs_f64();
            fb.schedule_seconds = Some(fb.schedule_seconds.unwrap_or(0.0) + spent);
            s
        }
    };
    Ok(match scheduled {
        Ok(s) => {
            fb.strategy = Some(s.strategy);
            if whole {
                fb.schedule = s.text;
                fb.isl_schedule = Some(crate::IslSchedule {
                    map: s.map.clone(),
                    tiled: s.tiled.clone(),
                    params: cx.params.clone(),
                });
            }
            Scheduled {
                tree: s.tree,
                maps: Some((union_map(isl, &s.map)?, union_map(isl, &s.tiled_check)?)),
                failure: None,
                settled: false,
            }
        }
        // `islx::schedule` printed the problem under POLYPROF_DEBUG_SCHEDULE.
        Err(e) => Scheduled {
            tree: Tree::Leaf,
            maps: None,
            failure: Some(e),
            settled: settled.is_some(),
        },
    })
}

/// Adds a suggestion that follows isl's schedule (for tiling: after tiling its permutable
/// bands), with the storage changes that schedule needs for the dependences isl was not given
/// (anti and output dependences through registers and scalars), then those storage
/// suggestions (expansion, mapping) unless already there. When no storage change makes it
/// legal there is no suggestion, and the reason goes to the region's `why_not`.
pub(super) fn from_schedule(
    cx: &Ctx<'_>,
    fb: &mut Feedback,
    maps: &Option<(UnionMap, UnionMap)>,
    kind: SuggestionKind,
    along: &[usize],
    text: String,
    sizes: Vec<u32>,
) -> Result<(), Error> {
    let Some((map, tiled_map)) = maps else {
        return Ok(());
    };
    let what = match kind {
        SuggestionKind::Tile => "tiling",
        SuggestionKind::Skew => "skewing",
        SuggestionKind::Fuse => "fusion",
        _ => "distribution",
    };
    let theta = if kind == SuggestionKind::Tile {
        tiled_map
    } else {
        map
    };
    // Tiles of a band every statement of which runs in all its loops keep each iteration's
    // body whole: temporaries that stay within one iteration rename freely.
    let region = cx.region;
    let whole = kind == SuggestionKind::Tile
        && region
            .statements
            .iter()
            .filter(|s| s.loops.contains(&along[0]))
            .all(|s| along.iter().all(|l| s.loops.contains(l)));
    let fix = crate::storage::for_schedule(cx, along, theta, what, whole)?;
    if let Some(why) = fix.blocked {
        fb.why_not.get_or_insert(format!("no {what} advice: {why}"));
        return Ok(());
    }
    let text = match fix.needs.is_empty() {
        true => text,
        false => format!("{text} Legal after {}.", phrases(&fix.needs)),
    };
    fb.suggestions.push(Suggestion {
        kind,
        loops: along.iter().map(|&l| region.loops[l].id.clone()).collect(),
        text,
        sizes,
        requires: fix.needs,
        array: None,
        mapping: None,
        rating: Rating::default(),
    });
    // The same storage change asked for by several transformations is one suggestion (its
    // first sentence names the storage and its home).
    let head = |t: &str| t.split(':').next().unwrap_or(t).to_string();
    for mut s in fix.suggestions {
        // Either way the storage change now also serves this transformation.
        match fb
            .suggestions
            .iter_mut()
            .find(|t| t.kind == s.kind && head(&t.text) == head(&s.text))
        {
            Some(t) => {
                if !t.rating.enables.contains(&kind) {
                    t.rating.enables.push(kind);
                }
            }
            None => {
                s.rating.enables.push(kind);
                fb.suggestions.push(s);
            }
        }
    }
    Ok(())
}

pub(super) fn has_skew(t: &Tree) -> bool {
    match t {
        Tree::Band { members, child, .. } => {
            members
                .iter()
                .any(|m| m.rows.values().flatten().any(|r| r.dims_used() >= 2))
                || has_skew(child)
        }
        Tree::Sequence(c) => c.iter().any(|(_, t)| has_skew(t)),
        Tree::Leaf => false,
    }
}

/// The bands on `stmt`'s path through the schedule tree: (permutable, members, statements).
pub(super) fn bands_of(
    t: &Tree,
    stmt: &str,
    all: &[String],
) -> Vec<(bool, Vec<islx::Member>, Vec<String>)> {
    let mut out = Vec::new();
    let mut cur = t;
    // The statements of the filter the walk is under.
    let mut names: Vec<String> = all.to_vec();
    loop {
        match cur {
            Tree::Band {
                permutable,
                members,
                child,
            } => {
                out.push((*permutable, members.clone(), child.statements(&names)));
                cur = child;
            }
            Tree::Sequence(children) => {
                match children.iter().find(|(n, _)| n.iter().any(|n| n == stmt)) {
                    Some((n, sub)) => {
                        names = n.clone();
                        cur = sub;
                    }
                    None => break,
                }
            }
            Tree::Leaf => break,
        }
    }
    out
}

pub(super) fn describe_row(r: &crate::affine::Affine, chain: &[usize], region: &Region) -> String {
    let terms: Vec<String> = r
        .coeffs
        .iter()
        .enumerate()
        .filter(|(_, c)| **c != 0)
        .map(|(d, c)| {
            let name = chain
                .get(d)
                .map_or(format!("i{d}"), |&l| region.loops[l].label.clone());
            match c {
                1 => format!("({name})"),
                -1 => format!("-({name})"),
                c => format!("{c}*({name})"),
            }
        })
        .collect();
    terms.join(" + ")
}
