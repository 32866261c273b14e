//! Command-line options (REPORT.md is the contract).

use clap::{Parser, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

/// Dynamic binary profiler: traces a program and reports which loop, layout and storage
/// transformations would expose parallelism and locality.
#[derive(Parser, Debug)]
#[command(name = "polyprof", version)]
pub struct Args {
    /// Output directory [default: polyprof-out/<program file name>/]
    #[arg(short, long, value_name = "DIR")]
    pub output: Option<PathBuf>,

    /// Function where tracing starts; everything before it runs natively.
    #[arg(long, value_name = "SYMBOL", default_value = "main")]
    pub start_at: String,

    /// Step into shared-library code instead of running library calls natively.
    #[arg(long)]
    pub trace_libs: bool,

    /// Stop tracing after N instructions; the program then finishes natively.
    #[arg(long, value_name = "N")]
    pub max_instructions: Option<u64>,

    /// Execution engine.
    #[arg(long, value_enum, default_value_t = EngineKind::Emulate)]
    pub engine: EngineKind,

    /// Also write events.txt: every traced event, one line each, with disassembly and source
    /// lines (for small runs: it grows by about 100 bytes per instruction).
    #[arg(long)]
    pub dump_events: bool,

    /// A region is a loop nest holding at least this share (in percent) of the traced
    /// instructions; regions are analysed hottest first.
    #[arg(long, value_name = "PERCENT", default_value_t = 5.0)]
    pub region_threshold: f64,

    /// At most this many regions are analysed (and reported), hottest first.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_regions: usize,

    /// Budget of isl operations per region (scheduling and storage questions): a region
    /// larger than the polyhedral scheduler can handle in a few seconds is reported without
    /// suggestions, and says so.
    #[arg(long, value_name = "N", default_value_t = 2_000_000)]
    pub isl_max_operations: u64,

    /// Time budget of the same isl computations, per region, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub isl_max_seconds: f64,

    /// Also write deps.txt: the dynamic dependences (flow, anti, output; through registers
    /// and memory) between every pair of statements, with counts and distances.
    #[arg(long)]
    pub dump_deps: bool,

    /// The program to profile, then its arguments. Everything after the program belongs to
    /// it, options included.
    #[arg(
        value_name = "PROGRAM [ARGS]",
        required = true,
        num_args = 1..,
        trailing_var_arg = true
    )]
    pub command: Vec<OsString>,
}

impl Args {
    /// The program, as given.
    pub fn program(&self) -> &OsString {
        &self.command[0]
    }

    /// The program's arguments.
    pub fn args(&self) -> &[OsString] {
        &self.command[1..]
    }
}

/// `--engine`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineKind {
    /// Single-step every traced instruction with ptrace (the reference engine).
    Step,
    /// Interpret instructions inside polyprof, single-stepping only what it does not implement
    /// (the default; about 100 to 1000 times faster than `step`).
    Emulate,
}
