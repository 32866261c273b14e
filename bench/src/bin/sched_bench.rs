//! The scheduler's benchmark: how long isl takes per region, and which scheduler answered,
//! on the triangular nests of PolyBench's shapes (trmm, lu, nussinov) at the test sizes and
//! at PolyBench's SMALL-like sizes, compiled at -O0 and -O2. Runs the release polyprof binary
//! and reads report.json.
//!
//! Usage: `cargo build --release -p polyprof && cargo run --release -p bench --bin sched_bench`

use anyhow::Result;

fn main() -> Result<()> {
    let bin = bench::polyprof_binary()?;
    let dir = tempfile::tempdir()?;
    let kernels: [(&str, &[&str]); 6] = [
        ("sched_trmm", &[]),
        ("sched_trmm", &["-DM=40", "-DN=50"]),
        ("sched_lu", &[]),
        ("sched_lu", &["-DN=60"]),
        ("sched_nussinov", &[]),
        ("sched_nussinov", &["-DN=80"]),
    ];
    println!("isl time per region (default budget: 10 s per region, shared by the strategies)");
    println!(
        "{:<16} {:<14} {:<4} {:<7} {:>6} {:<16} {:>8}  suggestions",
        "kernel", "sizes", "opt", "region", "ops%", "strategy", "isl s"
    );
    for (name, defs) in kernels {
        for opt in ["-O0", "-O2"] {
            let src = bench::kernel(&format!("../../tests/kernels/{name}.c"));
            let exe = dir.path().join(format!("{name}{}{opt}", defs.join("")));
            let mut flags = vec!["-g", opt];
            flags.extend_from_slice(defs);
            bench::compile_c(&src, &exe, &flags)?;
            let report = bench::profile(&bin, &exe, &[])?;
            for reg in &report.regions {
                let kinds: Vec<&str> = reg.suggestions.iter().map(|s| s.kind.as_str()).collect();
                let strategy = match &reg.scheduler {
                    None => "not run",
                    Some(s) => s.strategy.as_deref().unwrap_or("failed"),
                };
                println!(
                    "{:<16} {:<14} {:<4} {:<7} {:>6.1} {:<16} {:>8.3}  {}",
                    name,
                    if defs.is_empty() {
                        "test".to_string()
                    } else {
                        defs.join(" ")
                    },
                    opt,
                    reg.id,
                    reg.ops_percent,
                    strategy,
                    reg.scheduler.as_ref().map_or(0.0, |s| s.seconds),
                    kinds.join(", ")
                );
            }
        }
    }
    Ok(())
}
