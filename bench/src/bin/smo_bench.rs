//! The storage benchmark: what the storage hyperplane search and the buffer-sharing check
//! (SMO) cost per region, beside the scheduler, and what they find, on the storage test
//! kernels at growing sizes and on the scheduler's triangular nests. Runs the release
//! polyprof binary and reads report.json (`storage_seconds`, `scheduler.seconds`).
//!
//! Usage: `cargo build --release -p polyprof && cargo run --release -p bench --bin smo_bench`

use anyhow::Result;

fn main() -> Result<()> {
    let bin = bench::polyprof_binary()?;
    let dir = tempfile::tempdir()?;
    let runs: [(&str, &[&str], &[&str]); 8] = [
        ("st_liveout", &[], &["16"]),
        ("st_liveout", &[], &["32"]),
        ("st_liveout", &[], &["64"]),
        ("st_share", &[], &["16", "3"]),
        ("st_share", &[], &["256", "8"]),
        ("legal_matmul", &[], &[]),
        ("sched_lu", &["-DN=60"], &[]),
        ("sched_nussinov", &["-DN=80"], &[]),
    ];
    println!(
        "{:<15} {:<8} {:<7} {:>6} {:>9} {:>9}  storage advice",
        "kernel", "args", "region", "ops%", "sched s", "storage s"
    );
    for (k, (name, defs, args)) in runs.iter().enumerate() {
        let src = bench::kernel(&format!("../../tests/kernels/{name}.c"));
        let exe = dir.path().join(format!("{name}{k}"));
        let mut flags = vec!["-g", "-O1"];
        flags.extend_from_slice(defs);
        bench::compile_c(&src, &exe, &flags)?;
        let report = bench::profile(&bin, &exe, args)?;
        for reg in &report.regions {
            let advice: Vec<String> = reg
                .suggestions
                .iter()
                .filter(|s| matches!(s.kind.as_str(), "contract_array" | "share_storage"))
                .map(|s| {
                    let what = s.mapping.as_ref().map_or(s.kind.as_str(), |m| &m.isl);
                    let size = |k: usize| s.sizes.get(k).copied().unwrap_or(0);
                    format!("{what} ({} -> {} bytes)", size(0), size(1))
                })
                .collect();
            println!(
                "{:<15} {:<8} {:<7} {:>6.1} {:>9.3} {:>9.3}  {}",
                name,
                if args.is_empty() {
                    defs.join(" ")
                } else {
                    args.join(" ")
                },
                reg.id,
                reg.ops_percent,
                reg.scheduler.as_ref().map_or(0.0, |s| s.seconds),
                reg.storage_seconds.unwrap_or(0.0),
                if advice.is_empty() {
                    "-".to_string()
                } else {
                    advice.join("; ")
                }
            );
        }
    }
    Ok(())
}
