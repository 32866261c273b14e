//! Runs a program under the step engine and prints a count of each event kind.
use ptrace_runner::{Engine, OwnedEvent, RunOptions, StartAt, StepEngine, VecSink};
use std::path::PathBuf;

fn main() {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let program = PathBuf::from(&args[0]);
    let exe = symbols::ElfFile::open(&program).expect("open");
    let start = match exe.symbol_address("main") {
        Some(addr) => StartAt::Address {
            addr,
            name: "main".into(),
        },
        None => StartAt::Entry,
    };
    let opts = RunOptions::new(program, args[1..].to_vec(), start);
    let mut engine = StepEngine::launch(opts).expect("launch");
    let mut sink = VecSink::default();
    let t = std::time::Instant::now();
    let summary = engine.run(&mut sink).expect("run");
    let dt = t.elapsed();
    for e in sink
        .events
        .iter()
        .filter(|e| !matches!(e, OwnedEvent::Code { .. }))
    {
        eprintln!("{e:?}");
    }
    eprintln!(
        "{summary:?} in {dt:?} ({:.0}/s)",
        summary.instructions as f64 / dt.as_secs_f64()
    );
}
