//! `deps.txt`: the dynamic dependences in words, aggregated per pair of statements, for
//! debugging small runs.

use std::collections::BTreeMap;
use std::io::{self, Write};
use tracer::{Dep, DepKind, Stmt, Through};

/// Instances of one dependence between two statements.
struct Agg {
    count: u64,
    /// The first instance: (producer coordinates, consumer coordinates).
    example: (Vec<u64>, Vec<u64>),
    /// Distinct distance vectors (consumer minus producer, when both have the same depth).
    distances: BTreeMap<Vec<i64>, u64>,
}

/// Collects dependences (call [`DepDump::add`] for each) and writes them aggregated.
#[derive(Default)]
pub struct DepDump {
    aggs: BTreeMap<(Stmt, Stmt, DepKind, Through), Agg>,
}

impl DepDump {
    pub fn add(&mut self, d: &Dep<'_>) {
        let a = self
            .aggs
            .entry((d.consumer, d.producer, d.kind, d.through))
            .or_insert_with(|| Agg {
                count: 0,
                example: (d.producer_coords.to_vec(), d.consumer_coords.to_vec()),
                distances: BTreeMap::new(),
            });
        a.count += 1;
        if d.producer_coords.len() == d.consumer_coords.len() && a.distances.len() < 8 {
            let dist: Vec<i64> = d
                .consumer_coords
                .iter()
                .zip(d.producer_coords)
                .map(|(c, p)| c.wrapping_sub(*p) as i64)
                .collect();
            *a.distances.entry(dist).or_default() += 1;
        }
    }

    /// Writes one line per (consumer, producer, kind, register or memory), naming each
    /// statement with `describe` (source line, function+offset, disassembly).
    pub fn write(&self, out: &mut impl Write, describe: impl Fn(Stmt) -> String) -> io::Result<()> {
        writeln!(
            out,
            "# kind through: producer -> consumer, instances, distances (consumer - producer \
             iteration vector), an example instance"
        )?;
        for ((consumer, producer, kind, through), a) in &self.aggs {
            let dists: Vec<String> = a
                .distances
                .iter()
                .map(|(d, n)| format!("{d:?}x{n}"))
                .collect();
            writeln!(
                out,
                "{} {}: {} -> {}, {} instances, distances {}, e.g. {:?} -> {:?}",
                kind.as_str(),
                through.as_str(),
                describe(*producer),
                describe(*consumer),
                a.count,
                if dists.is_empty() {
                    "-".to_string()
                } else {
                    dists.join(" ")
                },
                a.example.0,
                a.example.1
            )?;
        }
        Ok(())
    }
}
