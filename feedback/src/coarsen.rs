//! Statements are machine instructions: a source statement is several of them. Before
//! scheduling, instructions that run in the same loops over the same domain, one after the
//! other with no inner loop between them, become one block statement: the scheduler's ILP
//! grows with the number of statements, and a block moves as a whole anyway.

use crate::affine::parse_schedule_map;
use crate::input::{Boundary, Dependence, Region, Statement};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Renames the statement tuples of an isl string (`S3[` → `B1[`).
fn rename(text: &str, names: &HashMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let prev_ident = i > 0 && (bytes[i - 1].is_alphanumeric() || bytes[i - 1] == '_');
        if c == 'S' && !prev_ident {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
            if j > i + 1 && j < bytes.len() && bytes[j] == '[' {
                let name: String = bytes[i..j].iter().collect();
                if let Some(n) = names.get(&name) {
                    out.push_str(n);
                    i = j;
                    continue;
                }
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// The relation maps every instance to itself (a dependence inside one block instance).
fn is_identity(relation: &str, source: &str, sink: &str) -> bool {
    source == sink
        && parse_schedule_map(relation).iter().all(|rows| {
            rows.rows.iter().enumerate().all(|(k, r)| {
                r.as_ref().is_some_and(|r| {
                    r.single_dim() == Some(k) && r.coeffs[k] == 1 && r.constant == 0
                })
            })
        })
}

/// (loops, domain, positions above the last level, run of the last level).
type GroupKey = (Vec<usize>, String, Vec<u32>, usize);

/// The region with its instructions grouped into block statements.
pub(crate) fn coarsen(region: &Region) -> Region {
    // Positions taken by inner loops at each level: blocks do not span them.
    let mut loop_positions: BTreeMap<Vec<usize>, BTreeSet<u32>> = BTreeMap::new();
    for s in &region.statements {
        for k in 0..s.loops.len() {
            loop_positions
                .entry(s.loops[..k].to_vec())
                .or_default()
                .insert(s.positions.get(k).copied().unwrap_or(0));
        }
    }
    // Group key: loops, domain, positions above the last level, and the run of last-level
    // positions (the number of inner loops before it).
    let mut groups: BTreeMap<GroupKey, Vec<usize>> = BTreeMap::new();
    for (i, s) in region.statements.iter().enumerate() {
        let last = s.positions.get(s.loops.len()).copied().unwrap_or(0);
        let run = loop_positions
            .get(&s.loops)
            .map_or(0, |set| set.iter().filter(|&&p| p < last).count());
        let above = s.positions[..s.loops.len().min(s.positions.len())].to_vec();
        let domain = s.domain.replace(&format!("{}[", s.name), "X[");
        groups
            .entry((s.loops.clone(), domain, above, run))
            .or_default()
            .push(i);
    }
    let mut members: Vec<Vec<usize>> = groups.into_values().collect();
    members.sort_by_key(|m| m[0]);
    let mut names: HashMap<String, String> = HashMap::new();
    let mut statements = Vec::new();
    for (b, m) in members.iter().enumerate() {
        let name = format!("S{b}");
        let first = &region.statements[m[0]];
        for &i in m {
            names.insert(region.statements[i].name.clone(), name.clone());
        }
        let domain = rename(&first.domain, &names);
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
            format!("{} ({} instructions)", lines.join(", "), m.len())
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
            exact: m.iter().all(|&i| region.statements[i].exact),
        });
    }
    let renamed = |n: &str| names.get(n).cloned().unwrap_or_else(|| n.to_string());
    let mut seen = BTreeSet::new();
    let dependences = region
        .dependences
        .iter()
        .filter_map(|d| {
            let (source, sink) = (renamed(&d.source), renamed(&d.sink));
            let relation = rename(&d.relation, &names);
            // Inside one block instance, or the same pairs through the same storage again.
            if is_identity(&relation, &source, &sink)
                || !seen.insert((d.kind, d.storage.clone(), relation.clone()))
            {
                return None;
            }
            Some(Dependence {
                source,
                sink,
                relation,
                ..d.clone()
            })
        })
        .collect();
    let border = |b: &Boundary| Boundary {
        stmt: renamed(&b.stmt),
        relation: rename(&b.relation, &names),
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_tuples_only() {
        let mut n = HashMap::new();
        n.insert("S3".to_string(), "S0".to_string());
        assert_eq!(
            rename("{ S3[i0] -> S3[i0 - 1] : S3x = 1 }", &n),
            "{ S0[i0] -> S0[i0 - 1] : S3x = 1 }"
        );
        assert!(is_identity(
            "{ S0[i0, i1] -> S0[i0, i1] : 0 <= i0 }",
            "S0",
            "S0"
        ));
        assert!(!is_identity("{ S0[i0] -> S0[i0 - 1] }", "S0", "S0"));
    }
}
