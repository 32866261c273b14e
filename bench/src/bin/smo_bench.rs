//! The storage benchmark: what the storage hyperplane search and the buffer-sharing check
//! (SMO) cost per region, beside the scheduler, and what they find, on the storage test
//! kernels at growing sizes and on the scheduler's triangular nests. Runs the release
//! polyprof binary and reads report.json (`storage_seconds`, `scheduler.seconds`).
//!
//! Usage: `cargo build --release -p polyprof && cargo run --release -p bench --bin smo_bench`

use anyhow::{bail, Context, Result};
use std::process::Command;

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
        let out = exe.with_extension("out");
        let run = Command::new(&bin)
            .arg("-o")
            .arg(&out)
            .arg(&exe)
            .args(*args)
            .output()?;
        if !run.status.success() {
            bail!(
                "polyprof failed on {name}: {}",
                String::from_utf8_lossy(&run.stderr)
            );
        }
        let text = std::fs::read_to_string(out.join("report.json"))
            .with_context(|| format!("reading the report of {name}"))?;
        let report: serde_json::Value = serde_json::from_str(&text)?;
        for reg in report["regions"].as_array().into_iter().flatten() {
            let advice: Vec<String> = reg["suggestions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|s| matches!(s["kind"].as_str(), Some("contract_array" | "share_storage")))
                .map(|s| {
                    let sizes = &s["sizes"];
                    match s["mapping"]["isl"].as_str() {
                        Some(m) => format!("{m} ({} -> {} bytes)", sizes[0], sizes[1]),
                        None => format!(
                            "{} ({} -> {} bytes)",
                            s["kind"].as_str().unwrap_or("?"),
                            sizes[0],
                            sizes[1]
                        ),
                    }
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
                reg["id"].as_str().unwrap_or("?"),
                reg["ops_percent"].as_f64().unwrap_or(0.0),
                reg["scheduler"]["seconds"].as_f64().unwrap_or(0.0),
                reg["storage_seconds"].as_f64().unwrap_or(0.0),
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
