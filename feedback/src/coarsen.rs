//! Statements are machine instructions: a source statement is several of them. Before
//! scheduling, instructions that run in the same loops over the same domain, one after the
//! other with no inner loop between them, become one block statement: the scheduler's ILP
//! grows with the number of statements, and a block moves as a whole anyway.

use crate::distance::Tri;
use crate::input::{Boundary, Dependence, EqualPairs, Polyhedra, Region, Statement};
use crate::islx;
use crate::params::Parameterizer;
use isl_rs::{Context, Set};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// The statements of a block, `S1-S4` when their numbers follow each other, else listed.
fn name_span<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let names: Vec<&str> = names.collect();
    let numbers: Option<Vec<u64>> = names
        .iter()
        .map(|n| n.strip_prefix('S').and_then(|d| d.parse().ok()))
        .collect();
    match numbers {
        Some(n) if n.len() > 1 && n.windows(2).all(|w| w[1] == w[0] + 1) => {
            format!("{}-{}", names[0], names[names.len() - 1])
        }
        _ => names.join(", "),
    }
}

/// The relation without the pairs that map an instance to itself (dependences between
/// instructions of one block instance, whose order the block keeps): `None` when nothing else
/// is left, the relation unchanged when isl cannot answer.
fn without_self_pairs(
    isl: &Context,
    relation: &Polyhedra,
    source: &str,
    sink: &str,
) -> Option<Polyhedra> {
    if source != sink {
        return Some(relation.clone());
    }
    // The pieces' distances decide without isl when each piece either never maps an
    // instance to itself or only does (a stencil's register relations: heat-3d spent 1 s in
    // isl's subtraction here).
    let kinds = crate::distance::self_pairs(relation);
    if kinds.iter().all(|k| k != &Some(Tri::Maybe)) {
        if kinds.iter().all(|k| k != &Some(Tri::Yes)) {
            return Some(relation.clone());
        }
        let pieces: Vec<_> = relation
            .pieces
            .iter()
            .zip(&kinds)
            .filter(|(_, k)| **k == Some(Tri::No))
            .map(|(p, _)| p.clone())
            .collect();
        return match pieces.is_empty() {
            true => None,
            false => Some(Polyhedra {
                input: relation.input.clone(),
                output: relation.output.clone(),
                pieces,
            }),
        };
    }
    let rest = || -> Result<Option<Polyhedra>, crate::Error> {
        let m = relation.to_union_map(isl, &mut Parameterizer::none())?;
        let same = m
            .copy()
            .map_err(islx::isl("copying a map"))?
            .domain()
            .map_err(islx::isl("a dependence's domain"))?
            .identity()
            .map_err(islx::isl("an identity map"))?;
        // Most relations hold no self pair: test that first, it is the cheap question.
        let selves = m
            .copy()
            .map_err(islx::isl("copying a map"))?
            .intersect(same.copy().map_err(islx::isl("copying a map"))?)
            .map_err(islx::isl("self pairs"))?;
        if selves.is_empty().map_err(islx::isl("testing emptiness"))? {
            return Ok(Some(relation.clone()));
        }
        let rest = m.subtract(same).map_err(islx::isl("removing self pairs"))?;
        if rest.is_empty().map_err(islx::isl("testing emptiness"))? {
            return Ok(None);
        }
        // What isl cannot give back exactly keeps its self pairs (more pairs, never fewer).
        Ok(Some(
            Polyhedra::from_union_map(&rest).unwrap_or_else(|| relation.clone()),
        ))
    };
    rest().unwrap_or_else(|_| Some(relation.clone()))
}

/// Domains of more pieces than this are widened before scheduling.
const MAX_DOMAIN_PIECES: i32 = 4;

/// The statements' domains as isl sets over the tuple `X` (comparable across statements),
/// simplified for the scheduler, and whether each was widened. A domain coalesces (the folder
/// may split one domain into pieces where only the labels differ); one still in many pieces is
/// shaped by data (a branch on values inside the loop), and becomes the domain of its loop
/// body: everything that ran in the same loops, as a hull if that too is in many pieces. That
/// over-approximation (the paper's treatment of what is not affine) keeps the scheduler's
/// problem small and lets the code around the branch stay one block statement.
fn domains(isl: &Context, region: &Region) -> Vec<(Option<Set>, bool, usize)> {
    let pieces = |s: &Set| s.n_basic_set().unwrap_or(i32::MAX);
    // Instructions of one basic block share their domain: each distinct one is read,
    // coalesced and united once (a data-shaped domain in dozens of pieces costs isl
    // milliseconds per operation, and b+tree's 230 instructions took 4 s one by one).
    let mut index: HashMap<Polyhedra, usize> = HashMap::new();
    let mut distinct: Vec<Option<Set>> = Vec::new();
    let ids: Vec<usize> = region
        .statements
        .iter()
        .map(|s| {
            let x = HashMap::from([(s.name.clone(), "X".to_string())]);
            let key = s.domain.renamed(&x);
            *index.entry(key).or_insert_with_key(|key| {
                let set = key.to_set(isl, &mut Parameterizer::none());
                distinct.push(set.ok().and_then(|d| d.coalesce().ok()));
                distinct.len() - 1
            })
        })
        .collect();
    let mut bodies: BTreeMap<&[usize], BTreeSet<usize>> = BTreeMap::new();
    for (s, &id) in region.statements.iter().zip(&ids) {
        bodies.entry(&s.loops).or_default().insert(id);
    }
    let union_of = |members: &BTreeSet<usize>| -> Option<Set> {
        let mut union: Option<Set> = None;
        for &id in members {
            let Some(d) = distinct[id].as_ref().and_then(|d| d.copy().ok()) else {
                continue;
            };
            union = match union {
                None => Some(d),
                Some(u) => Some(u.union(d).ok()?),
            };
        }
        // The simple hull (the pieces' own constraint directions): the polyhedral hull of
        // b+tree's 14 pieces in two dimensions took isl 1.7 s.
        let u = union?.coalesce().ok()?;
        match pieces(&u) > MAX_DOMAIN_PIECES {
            true => u.simple_hull().and_then(Set::from_basic_set).ok(),
            false => Some(u),
        }
    };
    // A body's union is needed only where one of its domains is in many pieces.
    let body: BTreeMap<&[usize], (Option<Set>, usize)> = bodies
        .into_iter()
        .filter(|(_, members)| {
            members.iter().any(|&id| {
                distinct[id]
                    .as_ref()
                    .is_some_and(|d| pieces(d) > MAX_DOMAIN_PIECES)
            })
        })
        .enumerate()
        .map(|(n, (k, members))| (k, (union_of(&members), distinct.len() + n)))
        .collect();
    region
        .statements
        .iter()
        .zip(ids)
        .map(|(s, id)| {
            let d = distinct[id].as_ref().and_then(|d| d.copy().ok());
            match d {
                Some(d) if pieces(&d) > MAX_DOMAIN_PIECES => {
                    match body.get(s.loops.as_slice()) {
                        // The widened domains of one body are one domain, numbered past
                        // the distinct ones.
                        Some((Some(u), n)) => (u.copy().ok(), true, *n),
                        _ => (Some(d), false, id),
                    }
                }
                d => (d, false, id),
            }
        })
        .collect()
}

/// The instructions a statement stands for: a block's count, from its label (`k.c:8, k.c:9
/// (S0-S23, 24 instructions)`), else 1. A block's instructions share one domain, so its
/// operations are this many times its points.
pub(crate) fn instructions(label: &str) -> u64 {
    label
        .strip_suffix(" instructions)")
        .and_then(|head| head.rsplit(", ").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

/// The region with its instructions grouped into block statements: maximal runs of
/// instructions, consecutive in program order, in the same loops over the same domain. A
/// block is contiguous, so dependences between blocks inside one iteration all go forward:
/// grouping an instruction with one after an intervening other would make a cycle at
/// distance zero, which no schedule satisfies ("unable to carry dependences").
pub(crate) fn coarsen(region: &Region, isl: &Context) -> Region {
    let mut order: Vec<usize> = (0..region.statements.len()).collect();
    // Kelly positions in lexicographic order are program order; an inner loop's
    // statements sort between the instructions before and after the loop.
    order.sort_by(|&a, &b| {
        let (sa, sb) = (&region.statements[a], &region.statements[b]);
        sa.positions.cmp(&sb.positions).then(a.cmp(&b))
    });
    let (mut sets, mut widened, mut ids) = (Vec::new(), Vec::new(), Vec::new());
    for (set, w, id) in domains(isl, region) {
        sets.push(set);
        widened.push(w);
        ids.push(id);
    }
    let same_domain = |a: usize, b: usize| match (&sets[a], &sets[b]) {
        _ if ids[a] == ids[b] && sets[a].is_some() => true,
        (Some(x), Some(y)) => x.is_equal(y).unwrap_or(false),
        _ => false,
    };
    let mut members: Vec<Vec<usize>> = Vec::new();
    for &i in &order {
        let s = &region.statements[i];
        let joins = members.last().and_then(|m| m.last()).is_some_and(|&j| {
            let t = &region.statements[j];
            let depth = s.loops.len();
            t.loops == s.loops
                && same_domain(i, j)
                && t.positions.get(..depth) == s.positions.get(..depth)
        });
        match members.last_mut() {
            Some(m) if joins => m.push(i),
            _ => members.push(vec![i]),
        }
    }
    members.sort_by_key(|m| m[0]);
    let mut names: HashMap<String, String> = HashMap::new();
    let mut statements = Vec::new();
    for m in &members {
        // A block is named after its first instruction, so that names agree with the
        // statements of report.json (one per instruction).
        let name = region.statements[m[0]].name.clone();
        let first = &region.statements[m[0]];
        for &i in m {
            names.insert(region.statements[i].name.clone(), name.clone());
        }
        // The simplified domain: fewer pieces for the scheduler.
        let domain = sets[m[0]]
            .as_ref()
            .and_then(Polyhedra::from_set)
            .map(|d| d.renamed(&HashMap::from([("X".to_string(), name.clone())])))
            .unwrap_or_else(|| first.domain.renamed(&names));
        let label = if m.len() == 1 {
            first.label.clone()
        } else {
            // `k.c:8, k.c:9 (24 instructions)`: the source lines of the block.
            let mut lines: Vec<&str> = Vec::new();
            for &i in m {
                let l = region.statements[i].label.split(' ').next().unwrap_or("?");
                if !lines.contains(&l) {
                    lines.push(l);
                }
            }
            format!(
                "{} ({}, {} instructions)",
                lines.join(", "),
                name_span(m.iter().map(|&i| region.statements[i].name.as_str())),
                m.len()
            )
        };
        statements.push(Statement {
            name,
            label,
            loops: first.loops.clone(),
            positions: m
                .iter()
                .map(|&i| region.statements[i].positions.clone())
                .min()
                .unwrap_or_default(),
            domain,
            ops: m.iter().map(|&i| region.statements[i].ops).sum(),
            accesses: m
                .iter()
                .flat_map(|&i| region.statements[i].accesses.clone())
                .collect(),
            fp: m.iter().any(|&i| region.statements[i].fp),
            exact: m.iter().all(|&i| region.statements[i].exact && !widened[i]),
            update: None,
        });
    }
    let renamed = |n: &str| names.get(n).cloned().unwrap_or_else(|| n.to_string());
    let mut seen = BTreeSet::new();
    // One block's instructions often share a relation through several storages (heat-3d's
    // over-approximated memory relations: nine copies in each nest): isl is asked once.
    let mut no_self_pairs: HashMap<Polyhedra, Option<Polyhedra>> = HashMap::new();
    let dependences = region
        .dependences
        .iter()
        .filter_map(|d| {
            let (source, sink) = (renamed(&d.source), renamed(&d.sink));
            let relation = crate::distance::without_subsumed(&d.relation.renamed(&names));
            // Inside one block instance, or the same pairs through the same storage again. Only
            // two instructions merged into one block can meet in one instance: an instruction
            // instance never depends on itself (the tracker orders its reads before its
            // writes), and the isl test costs milliseconds on a stencil's relations.
            let merged = d.source != d.sink && source == sink;
            let relation = match d.equal_pairs {
                _ if !merged => relation,
                EqualPairs::Never => relation,
                EqualPairs::Always => return None,
                EqualPairs::Unknown => no_self_pairs
                    .entry(relation)
                    .or_insert_with_key(|r| without_self_pairs(isl, r, &source, &sink))
                    .clone()?,
            };
            if !seen.insert((d.kind, d.storage.clone(), relation.clone())) {
                return None;
            }
            Some(Dependence {
                source,
                sink,
                relation: relation.into(),
                ..d.clone()
            })
        })
        .collect();
    let border = |b: &Boundary| Boundary {
        stmt: renamed(&b.stmt),
        relation: b.relation.renamed(&names),
        ..b.clone()
    };
    Region {
        loops: region.loops.clone(),
        statements,
        dependences,
        library_calls: region.library_calls.clone(),
        trips: region.trips.clone(),
        live_in: region.live_in.iter().map(border).collect(),
        live_out: region.live_out.iter().map(border).collect(),
        rewritten_after: region.rewritten_after.iter().map(border).collect(),
        shared_variables: region.shared_variables.clone(),
        declared_in: region.declared_in.clone(),
        sections: region.sections.clone(),
        omp_loops: region.omp_loops.clone(),
        early_exits: region.early_exits.clone(),
        language: region.language,
        headers: region.headers.clone(),
        compared: region
            .compared
            .iter()
            .map(|c| crate::input::Compared {
                source: renamed(&c.source),
                ..c.clone()
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_pairs_are_removed_with_isl() {
        let isl = Context::alloc();
        let parse = |r: &str| Polyhedra::parse(r).expect("a map");
        let drop = |r: &str| without_self_pairs(&isl, &parse(r), "S0", "S0").map(|p| p.isl_text());
        assert_eq!(
            drop("{ S0[i0, i1] -> S0[i0, i1] : 0 <= i0 <= 9 and 0 <= i1 <= 9 }"),
            None
        );
        // Identity pairs written as a restriction (cov[j][i] = cov[i][j] at i = j).
        assert_eq!(
            drop("{ S0[i0, i1] -> S0[i0, 0] : 0 <= i0 <= 27 and i1 = 0 }"),
            None
        );
        let carried = "{ S0[i0] -> S0[i0 - 1] : 1 <= i0 <= 9 }";
        let carried_text = parse(carried).isl_text();
        assert_eq!(drop(carried).as_deref(), Some(carried_text.as_str()));
        let mixed =
            drop("{ S0[i0] -> S0[o0] : 1 <= i0 <= 9 and i0 - 1 <= o0 <= i0 }").expect("pairs left");
        assert!(!mixed.contains("o0 <= i0 }"), "{mixed}");
        assert_eq!(
            without_self_pairs(&isl, &parse(carried), "S0", "S1"),
            Some(parse(carried))
        );
    }
}
