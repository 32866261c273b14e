//! Command-line options (docs/REPORT.md is the contract).
//!
//! `polyprof [OPTIONS] PROGRAM [ARGS]` records and reports in one step; the subcommands split
//! it (`record`, `report DIR`) and produce the manual and shell completions. A subcommand is
//! recognised only as the first argument, so a program named like one is given by its path
//! (`polyprof ./report`).

use clap::{Args as ClapArgs, Parser, Subcommand, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

const AFTER_HELP: &str = "\
Examples:
  polyprof ./matmul                      record, then write the reports into polyprof-out/matmul/
  polyprof record -o run ./matmul 100    record only
  polyprof report run --region-threshold 1
                                         report again from the recording, without running it
  polyprof check -t 'interchange matmul.c:18 matmul.c:19' run
                                         is this interchange legal? (exit 0 yes, 1 no)

Exit status: the program's own (128 + N when signal N killed it); 128 + N when signal N \
interrupted polyprof; 2 when polyprof could not start the program or read a recording; \
`polyprof report` exits with 0 once the reports are written.";

/// Dynamic binary profiler: runs a program once, records what it executes, and reports which
/// loop, layout and storage transformations would expose parallelism and locality, tied to
/// source lines.
#[derive(Parser, Debug)]
#[command(
    name = "polyprof",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    disable_help_subcommand = true,
    after_help = AFTER_HELP,
)]
pub struct Cli {
    #[command(subcommand)]
    pub sub: Option<Sub>,

    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub report: ReportArgs,

    #[command(flatten)]
    pub ui: UiArgs,

    #[command(flatten)]
    pub program: ProgramArgs,
}

/// The program to run: the last of the command line.
#[derive(ClapArgs, Debug)]
pub struct ProgramArgs {
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

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Sub {
    /// Run the program and record its execution into the output directory, without analysing
    /// it; `polyprof report DIR` then writes the reports.
    Record(RecordCmd),
    /// Write the reports of a recorded run again, with other report options, without running
    /// the program.
    Report(ReportCmd),
    /// Check a loop transformation against the observed dependences of a recorded run (or of
    /// a program, run first): exit status 0 when legal, 1 when not (naming each violated
    /// dependence), 2 on a usage error.
    Check(CheckCmd),
    /// Print a completion script for a shell (e.g. `polyprof completions bash >
    /// ~/.local/share/bash-completion/completions/polyprof`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page polyprof(1), or write it and those of the subcommands
    /// (polyprof-record.1, ...) into a directory.
    Man {
        /// Directory to write the pages into (created if needed).
        #[arg(value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// `polyprof record`.
#[derive(ClapArgs, Debug)]
#[command(after_help = "Exit status: the program's own, as for `polyprof PROGRAM`.")]
pub struct RecordCmd {
    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub ui: UiArgs,

    #[command(flatten)]
    pub program: ProgramArgs,
}

/// `polyprof report`.
#[derive(ClapArgs, Debug)]
pub struct ReportCmd {
    /// An output directory holding a recording (`polyprof record`, or any earlier run).
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,

    /// Write the reports there instead of into DIR.
    #[arg(short, long, value_name = "OUT")]
    pub output: Option<PathBuf>,

    #[command(flatten)]
    pub report: ReportArgs,

    #[command(flatten)]
    pub ui: UiArgs,
}

const CHECK_HELP: &str = "\
Operations (loops named by file:line of their loop statement, as in report.txt, or by report id, L3):
  interchange A B      swap two loops of a nest
  permute A B C...     reorder loops of a nest, outermost first
  reverse A            run a loop backwards
  skew A B F           B += F*A
  shift A N            add N to a loop's iteration numbers (to align a fused loop)
  tile A B... SIZE     tile nested loops, outermost first (the band must be permutable)
  fuse A B             fuse sibling loop B into A, after A's body, first iterations aligned
  split A              distribute a loop over the parts of its body
  parallel A           claim: after the preceding operations, A carries no dependence
  vectorize A          the same claim, for SIMD lanes
  schedule \"MAP\"       any schedule in isl notation over the region's statements (last)
Iterations are numbered from 0 in every loop, as the report's domains count them.

Examples:
  polyprof check -t 'interchange matmul.c:21 matmul.c:22' ./matmul
  polyprof record -o run ./seidel; polyprof check -t 'skew L2 L3 1; tile L2 L3 32' run

Exit status: 0 when the transformation is legal, 1 when it is not, 2 on a usage error \
(unknown loop, malformed operation, a loop outside every analysed region) or when polyprof \
could not run the program or read the recording.";

/// `polyprof check`.
#[derive(ClapArgs, Debug)]
#[command(after_help = CHECK_HELP)]
pub struct CheckCmd {
    /// The transformation: operations separated by `;` (see below).
    #[arg(
        short,
        long,
        value_name = "OPS",
        conflicts_with = "script",
        required_unless_present = "script"
    )]
    pub transform: Option<String>,

    /// A file holding the transformation, one operation a line, `#` starting a comment.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,

    /// How the verdict is printed on stdout.
    #[arg(long, value_enum, default_value_t = CheckFormat::Text)]
    pub format: CheckFormat,

    /// The region (report id, R2) whose loops and statements the transformation names
    /// [default: the region holding every loop named; for `schedule` alone, the hottest].
    #[arg(long, value_name = "ID")]
    pub region: Option<String>,

    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub analysis: AnalysisArgs,

    #[command(flatten)]
    pub ui: UiArgs,

    /// An output directory holding a recording (`polyprof record`), or the program to run
    /// and record first, then its arguments.
    #[arg(
        value_name = "DIR | PROGRAM [ARGS]",
        required = true,
        num_args = 1..,
        trailing_var_arg = true
    )]
    pub target: Vec<OsString>,
}

/// `polyprof check --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CheckFormat {
    /// Sentences.
    Text,
    /// One JSON object (see docs/REPORT.md).
    Json,
}

/// Which regions are analysed, and isl's budget for each (the reports and `polyprof check`).
#[derive(ClapArgs, Debug, Clone)]
#[command(next_help_heading = "Analysis")]
pub struct AnalysisArgs {
    /// A region is a loop nest holding at least this share (in percent) of the traced
    /// instructions; regions are analysed hottest first, and a loop outside every region
    /// cannot be checked.
    #[arg(long, value_name = "PERCENT", default_value_t = 5.0)]
    pub region_threshold: f64,

    /// At most this many regions are analysed (and reported), hottest first.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub max_regions: usize,

    /// Budget of isl operations per region and per phase of its analysis (scheduling,
    /// storage questions, the check): a phase larger than isl can handle in a few seconds is
    /// skipped, and the report says so.
    #[arg(long, value_name = "N", default_value_t = 2_000_000)]
    pub isl_max_operations: u64,

    /// Time budget of the same isl computations, per region, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub isl_max_seconds: f64,
}

impl AnalysisArgs {
    /// The back end's options; `cancel` stops isl's work once set.
    pub fn pipeline_options(
        &self,
        cancel: &'static std::sync::atomic::AtomicBool,
    ) -> feedback::pipeline::PipelineOptions {
        feedback::pipeline::PipelineOptions {
            region_threshold: self.region_threshold,
            max_regions: self.max_regions,
            feedback: feedback::Options {
                isl_max_operations: self.isl_max_operations,
                isl_max_seconds: self.isl_max_seconds,
                cancel: Some(cancel),
                release_memory: crate::release_memory,
                ..Default::default()
            },
            // A debugging switch, not an option: `POLYPROF_DEP_RUNS=0` sends every dependence
            // on its own (the reference the runs are checked against).
            dep_runs: std::env::var_os("POLYPROF_DEP_RUNS").is_none_or(|v| v != "0"),
            ..Default::default()
        }
    }
}

/// How the program is run and traced (they shape the recording).
#[derive(ClapArgs, Debug, Clone)]
#[command(next_help_heading = "Tracing")]
pub struct RunArgs {
    /// Output directory [default: polyprof-out/<program file name>/]. An existing one is
    /// kept as DIR.old.
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

    /// Root of the separate debug files: a stripped program's symbols and lines are read
    /// from DIR/.build-id/xx/yyyy.debug (its build-id), as Debian's -dbgsym packages install
    /// them.
    #[arg(long, value_name = "DIR", default_value = "/usr/lib/debug")]
    pub debug_dir: PathBuf,
}

/// What the reports hold and how they are computed (changeable at `polyprof report`).
#[derive(ClapArgs, Debug, Clone)]
#[command(next_help_heading = "Reports")]
pub struct ReportArgs {
    #[command(flatten)]
    pub analysis: AnalysisArgs,

    /// Which reports to write: all of them, or report.json alone.
    #[arg(long, value_enum, default_value_t = Format::All)]
    pub format: Format,

    /// Also write events.txt: every traced event, one line each, with disassembly and source
    /// lines (for small runs: it grows by about 100 bytes per instruction).
    #[arg(long)]
    pub dump_events: bool,

    /// Also write deps.txt: the dynamic dependences (flow, anti, output; through registers
    /// and memory) between every pair of statements, with counts and distances.
    #[arg(long)]
    pub dump_deps: bool,
}

/// What polyprof says on stderr.
#[derive(ClapArgs, Debug, Clone, Copy)]
pub struct UiArgs {
    /// Print nothing on stderr but errors: no progress, warnings or summary (the reports
    /// still hold everything).
    #[arg(short, long)]
    pub quiet: bool,
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

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// flamegraph.svg, stacks.folded, report.txt, report.html and report.json.
    All,
    /// report.json only.
    Json,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Action {
    /// Record `command`, then report (`report` is `Some`), or only record.
    Profile {
        run: RunArgs,
        report: Option<ReportArgs>,
        ui: UiArgs,
        command: Vec<OsString>,
    },
    /// Report from the recording in `dir` into `output` (default: `dir`).
    Report {
        dir: PathBuf,
        output: Option<PathBuf>,
        report: ReportArgs,
        ui: UiArgs,
    },
    /// Check a transformation (`polyprof check`).
    Check(CheckCmd),
    Completions(clap_complete::Shell),
    Man(Option<PathBuf>),
}

impl Cli {
    /// The action, with each subcommand's own options.
    pub fn action(self) -> Action {
        match self.sub {
            None => Action::Profile {
                run: self.run,
                report: Some(self.report),
                ui: self.ui,
                command: self.program.command,
            },
            Some(Sub::Record(r)) => Action::Profile {
                run: r.run,
                report: None,
                ui: r.ui,
                command: r.program.command,
            },
            Some(Sub::Report(r)) => Action::Report {
                dir: r.dir,
                output: r.output,
                report: r.report,
                ui: r.ui,
            },
            Some(Sub::Check(c)) => Action::Check(c),
            Some(Sub::Completions { shell }) => Action::Completions(shell),
            Some(Sub::Man { dir }) => Action::Man(dir),
        }
    }
}
