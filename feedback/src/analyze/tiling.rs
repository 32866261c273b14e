//! Whether the hottest nest is skewed and tiled: the deepest permutable band of isl's schedule
//! along the hottest statement's path, the skew that makes the nest permutable, and the
//! tiling of that band.

use super::schedule::{bands_of, describe_row, from_schedule, has_skew, Scheduled};
use super::Nest;
use crate::islx;
use crate::legality::Ctx;
use crate::{Error, Feedback, Options, SuggestionKind};
use std::collections::BTreeSet;

/// The deepest permutable band along the hottest statement's path.
#[derive(Clone, Default)]
pub(super) struct Tiling {
    pub(super) depth: usize,
    /// The band's statements.
    pub(super) stmts: BTreeSet<String>,
}

/// Skewing and tiling, from isl's bands along the hottest statement's path. Their checks
/// under the tiled schedule can be the costliest of all: on a budget of their own, and
/// skipped (said in `why_not`, through `skipped`) when they stop at it; the answers before
/// them stand.
pub(super) fn skew_and_tile(
    cx: &Ctx<'_>,
    nest: &Nest<'_>,
    scheduled: &Scheduled,
    opts: &Options,
    fb: &mut Feedback,
    skipped: &mut Vec<&'static str>,
) -> Result<Tiling, Error> {
    let region = nest.region;
    let (chain, maps) = (&nest.chain, &scheduled.maps);
    let skewed = has_skew(&scheduled.tree);
    let mut tiling = Tiling::default();
    islx::fresh_budget(cx.isl);
    let found = (|| -> Result<(), Error> {
        let all_names: Vec<String> = region.statements.iter().map(|s| s.name.clone()).collect();
        let bands = bands_of(&scheduled.tree, &nest.main.name, &all_names);
        let mut tiled_band = None;
        for (b, (permutable, members, stmts)) in bands.iter().enumerate() {
            if *permutable && members.len() >= 2 && members.len() > tiling.depth {
                tiling.depth = members.len();
                tiling.stmts = stmts.iter().cloned().collect();
                tiled_band = Some(b);
            }
        }
        // isl scheduled the statements: a value a comparison reads from an earlier iteration
        // is no dependence of its problem, and must stay forward too.
        let rows: Vec<Vec<_>> = bands
            .iter()
            .map(|(_, m, _)| m.iter().map(|m| &m.rows).collect())
            .collect();
        if let Some(why) = crate::compared::against_bands(region, &rows, None) {
            fb.why_not
                .get_or_insert(format!("isl's schedule is not advised: {why}"));
            return Ok(());
        }
        if tiled_band.is_some() {
            if let Some(why) = crate::compared::against_bands(region, &rows, tiled_band) {
                fb.why_not.get_or_insert(format!("no tiling: {why}"));
                tiling = Tiling::default();
            }
        }
        if skewed {
            let rows = bands
                .iter()
                .flat_map(|(_, m, _)| m.iter())
                .filter_map(|m| m.rows.get(&nest.main.name).cloned().flatten())
                .filter(|r| r.dims_used() >= 2)
                .map(|r| describe_row(&r, chain, region))
                .collect::<Vec<_>>();
            let text = format!(
                "Skew the nest {}: iterate along {} so that the dependences point forward in every loop, which makes the nest tilable and exposes wavefront parallelism.",
                chain.iter().map(|&l| region.loops[l].label.clone()).collect::<Vec<_>>().join(", "),
                rows.join(" and ")
            );
            from_schedule(cx, fb, maps, SuggestionKind::Skew, chain, text, Vec::new())?;
        }
        if tiling.depth >= 2 {
            let tiled: Vec<usize> = chain.iter().copied().take(tiling.depth).collect();
            let text = format!(
                "Tile the {}-deep band {}{} with tiles of {} iterations per loop: it is fully permutable.",
                tiling.depth,
                tiled.iter().map(|&l| region.loops[l].label.clone()).collect::<Vec<_>>().join(", "),
                if skewed { " after skewing" } else { "" },
                opts.tile_size
            );
            let sizes = vec![opts.tile_size; tiling.depth];
            from_schedule(cx, fb, maps, SuggestionKind::Tile, &tiled, text, sizes)?;
            // Skewing is what makes such a band tilable: it serves the tiling.
            if skewed
                && fb
                    .suggestions
                    .iter()
                    .any(|s| s.kind == SuggestionKind::Tile)
            {
                for s in fb
                    .suggestions
                    .iter_mut()
                    .filter(|s| s.kind == SuggestionKind::Skew)
                {
                    s.rating.enables.push(SuggestionKind::Tile);
                }
            }
        }
        Ok(())
    })();
    islx::skip_over_budget(cx.isl, found, "skewing and tiling", skipped)?;
    Ok(tiling)
}
