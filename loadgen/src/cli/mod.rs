//! Command-line types (clap derive) and nothing else: turning them into a validated
//! [`RunConfig`](crate::config::RunConfig) is `config/flags.rs`'s job. Here: the commands
//! and each command's flags; the flag groups they flatten are `groups`', the parsers of flag
//! values `parse`'s.
//!
//! Doc comments on the flags are their `--help` text, written for the terminal (`[:port]`,
//! `<run-id>`), not for rustdoc; hence the two rustdoc lints allowed below.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::units::parse_duration;

mod groups;
mod parse;

pub use groups::{
    DashboardArgs, EvidenceArgs, ModelArgs, OpenArgs, OutputArgs, ShardArgs, TargetArgs,
    ThresholdArgs,
};
use parse::{parse_fraction, parse_per_second, parse_rate};
pub use parse::{RedirectsArg, SourceAddrs};

/// loadgen — an HTTP load generator that records every request and explains where
/// throughput stops.
#[derive(Debug, Parser)]
#[command(name = "loadgen", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The flags `-h` shows of the groups every load command shares (all of them and the command's
/// own are `--help`'s): what a first run needs — the target, the request, the load, the
/// output, the gates. `-h` of `loadgen run` was 234 lines (issue 61).
const SHORT_HELP: &[&str] = &[
    "file",
    "scenario",
    "sets",
    "url",
    "method",
    "headers",
    "body",
    "connections",
    "duration",
    "requests",
    "rate",
    "ramp",
    "thresholds",
    "out",
    "json",
    "dashboard",
    "server_metrics",
];

/// The command line as clap parses it, with each load command's `-h` cut to `SHORT_HELP` and
/// the command's own flags; `--help` shows every flag. `main` parses with it.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let shared: std::collections::BTreeSet<String> = [
        TargetArgs::augment_args(clap::Command::new("g")),
        ModelArgs::augment_args(clap::Command::new("g")),
        OpenArgs::augment_args(clap::Command::new("g")),
        ThresholdArgs::augment_args(clap::Command::new("g")),
        DashboardArgs::augment_args(clap::Command::new("g")),
        OutputArgs::augment_args(clap::Command::new("g")),
        EvidenceArgs::augment_args(clap::Command::new("g")),
        ShardArgs::augment_args(clap::Command::new("g")),
    ]
    .iter()
    .flat_map(|g| {
        g.get_arguments()
            .map(|a| a.get_id().to_string())
            .collect::<Vec<_>>()
    })
    .collect();
    let shorten = |command: clap::Command| {
        command.mut_args(|arg| {
            let id = arg.get_id().as_str();
            let advanced = shared.contains(id) || ["probe", "no_probe"].contains(&id);
            match advanced && !SHORT_HELP.contains(&id) {
                true => arg.hide_short_help(true),
                false => first_clause_for_short_help(arg),
            }
        })
    };
    let mut cli = Cli::command();
    for name in ["run", "calibrate", "sweep", "capacity"] {
        cli = cli.mut_subcommand(name, shorten);
    }
    cli
}

/// Where a flag's help text ends its first clause: the first ". ", "; " or " — " outside
/// parentheses (not "e.g. "), else its end.
fn first_clause_end(text: &str) -> usize {
    let mut depth = 0i32;
    for (i, c) in text.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            _ if depth > 0 => {}
            _ => {
                let rest = &text[i..];
                let abbreviation = text[..i].ends_with("e.g") || text[..i].ends_with("i.e");
                if (rest.starts_with(". ") && !abbreviation)
                    || rest.starts_with("; ")
                    || rest.starts_with(" — ")
                {
                    return i;
                }
            }
        }
    }
    text.trim_end_matches('.').len()
}

/// `-h`'s line for a flag: its help up to the end of its first clause (the rest, and the
/// whole text, are `--help`'s).
fn first_clause_for_short_help(arg: clap::Arg) -> clap::Arg {
    let Some(full) = arg.get_help().map(|h| h.to_string()) else {
        return arg;
    };
    let short = full[..first_clause_end(&full)].to_string();
    match arg.get_long_help() {
        Some(_) => arg.help(short),
        None => arg.long_help(full).help(short),
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a load test and write one Parquet row per request.
    ///
    /// Without --url, starts the built-in reference server (loadgen-server) in-process and
    /// tests it: a complete demo with nothing else to install.
    #[command(
        after_help = RUN_EXAMPLES,
        override_usage = "loadgen run [URL | SCENARIO.toml] [OPTIONS]"
    )]
    Run(Box<RunArgs>),
    /// Measure R(1) with one worker and predict throughput with Little's Law, X(N) = N / R(1).
    #[command(
        after_help = CALIBRATE_EXAMPLES,
        override_usage = "loadgen calibrate [URL | SCENARIO.toml] [OPTIONS]"
    )]
    Calibrate(Box<CalibrateArgs>),
    /// Run the closed model at several concurrency levels (or the open model at several rates)
    /// and compare each with Little's Law.
    #[command(
        after_help = SWEEP_EXAMPLES,
        override_usage = "loadgen sweep [URL | SCENARIO.toml] [OPTIONS]"
    )]
    Sweep(Box<SweepArgs>),
    /// Find the highest arrival rate that meets an SLO — with its uncertainty and the reason
    /// it stops there.
    ///
    /// Searches the open model's rate: a short calibration, then levels growing ×2 until one
    /// fails, then bisection until the bracket is within --tolerance, then the best passing
    /// level confirmed over a longer window. A level fails when an --slo is crossed (a
    /// percentile judged with a block-bootstrap confidence interval over latency from the
    /// intended send time, warm-up excluded) or when it is not sustainable (latency growing
    /// through it, sends dropped, achieved rate more than 2 % below the offered one).
    #[command(
        after_help = CAPACITY_EXAMPLES,
        override_usage = "loadgen capacity [URL | SCENARIO.toml] --slo EXPR [OPTIONS]"
    )]
    Capacity(Box<CapacityArgs>),
    /// List the built-in scenarios, or print one (`loadgen scenarios show NAME`) to copy and edit.
    Scenarios(ScenariosArgs),
    /// Upload a run directory kept locally (an `--out s3://` run whose upload failed or was
    /// stopped) to `s3://BUCKET/PREFIX/<run-id>/`, as the run would have.
    Upload(UploadArgs),
}

/// Flags of `loadgen upload`.
#[derive(Debug, Args, Clone)]
pub struct UploadArgs {
    /// The run directory (the staging directory the run printed).
    pub dir: PathBuf,
    /// Where the run was going: the run's `--out s3://BUCKET/PREFIX`.
    #[arg(value_name = "s3://BUCKET/PREFIX")]
    pub to: String,
    /// The longest the upload may take; what has not arrived by then is reported (exit 1).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10m")]
    pub upload_timeout: Duration,
}

/// `loadgen calibrate -n`'s default: requests measured for R(1).
pub const DEFAULT_CALIBRATION_REQUESTS: u64 = 1000;
/// `loadgen calibrate --warmup`'s default.
pub const DEFAULT_CALIBRATION_WARMUP: u64 = 100;

const CALIBRATE_EXAMPLES: &str = "\
Examples:
  loadgen calibrate --url http://127.0.0.1:8080/albums/1
  loadgen calibrate --scenario skiers -n 2000 --levels 1,32,64,128,200 --out runs/calibration";

const SWEEP_EXAMPLES: &str = "\
Examples:
  loadgen sweep --url http://127.0.0.1:8080/ --levels 1,10,20,50,100,200 -d 30s --out runs/sweep
  loadgen sweep --scenario twinder --levels 1,8,32 -n 5000 --calibration runs/calibration
  loadgen sweep --url http://127.0.0.1:8080/ --rate-levels 100,200,400,800 -d 20s";

const CAPACITY_EXAMPLES: &str = "\
Examples:
  loadgen capacity --url http://127.0.0.1:8080/albums/1 --slo 'p99<50ms'
  loadgen capacity --url http://host:8080/ --slo 'p99<50ms' --slo 'error_rate<0.1%' --max-rate 5000
  loadgen capacity --scenario albums --slo 'p99[get_album]<20ms' --tolerance 2% --json

Exit codes: 0 the capacity was found (also when the client limited it: then a warning, and
capacity.json says limited_by \"client\"); 99 no level met the SLO, the answer is below
--min-capacity, or the search did not converge within --budget (0 with --allow-unconverged);
2 bad input; 130 Ctrl-C; 143 SIGTERM.";

/// Flags of `loadgen capacity`: the target and transport of `loadgen run`, the open model's
/// pacing (each level's rate, length and workers are the search's), the output, the SLOs and
/// the search's settings. --out is the capacity directory (one run directory per level).
#[derive(Debug, Args, Clone)]
pub struct CapacityArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub open: OpenArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub dashboard: DashboardArgs,

    /// The service level objective every level is judged by, in the --threshold language:
    /// 'p99<50ms', 'error_rate<0.1%', 'p99[GET /x]<20ms' (repeatable; all must hold).
    #[arg(
        help_heading = "Search",
        long = "slo",
        value_name = "EXPR",
        required = true
    )]
    pub slos: Vec<String>,

    /// How long each level sends, warm-up included.
    #[arg(help_heading = "Search", long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub level_duration: Duration,

    /// The first part of each level, labelled `warmup` in its rows and not judged.
    #[arg(help_heading = "Search", long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    pub warmup: Duration,

    /// Stop bisecting when the lowest failing rate is within this of the highest passing one.
    #[arg(help_heading = "Search", long, value_name = "PERCENT", value_parser = parse_fraction, default_value = "5%")]
    pub tolerance: f64,

    /// The best passing level is confirmed over this many level durations before it is reported.
    #[arg(help_heading = "Search", long, value_name = "N", default_value_t = 2.0)]
    pub confirm_levels: f64,

    /// Time the whole search may take; when it runs out, the bracket so far is reported, marked
    /// unconverged.
    #[arg(help_heading = "Search", long, value_name = "DURATION", value_parser = parse_duration, default_value = "10m")]
    pub budget: Duration,

    /// The highest rate ever offered (requests/s): a ceiling for services that must be spared.
    #[arg(help_heading = "Search", long, value_name = "REQ/S", value_parser = parse_rate, default_value = "100000")]
    pub max_rate: f64,

    /// The lowest rate offered (requests/s): when levels keep failing, the search halves the
    /// rate down to this floor before it answers that no rate met the SLO.
    #[arg(help_heading = "Search", long, value_name = "REQ/S", value_parser = parse_rate, default_value = "1")]
    pub min_rate: f64,

    /// Exit 99 when the capacity found is below this (requests/s), e.g. 500/s.
    #[arg(help_heading = "Search", long, value_name = "REQ/S", value_parser = parse_per_second)]
    pub min_capacity: Option<f64>,

    /// How long a target that cannot be reached before a level (refused, reset, not resolved)
    /// is tried again, with a growing pause, before the search ends as `target_lost` with what
    /// it measured. Real targets restart and fail over: the answer must not be the moment's.
    #[arg(help_heading = "Search", long, value_name = "DURATION", value_parser = parse_duration, default_value = "30s")]
    pub target_wait: Duration,

    /// Pause between levels, so one level's backlog does not bleed into the next.
    #[arg(help_heading = "Search", long, value_name = "DURATION", value_parser = parse_duration, default_value = "2s")]
    pub cool_down: Duration,

    /// A run directory written by `loadgen calibrate` whose R(1) gives the first rate,
    /// instead of a short calibration of its own.
    #[arg(
        help_heading = "Search",
        long,
        value_name = "DIR",
        conflicts_with = "start_rate"
    )]
    pub calibration: Option<PathBuf>,

    /// The first level's rate (requests/s), instead of a calibration's estimate: when you know
    /// roughly where the limit is, or one worker's speed says little about it.
    #[arg(help_heading = "Search", long, value_name = "REQ/S", value_parser = parse_rate)]
    pub start_rate: Option<f64>,

    /// Exit 0 even when the budget ran out before the bracket closed.
    #[arg(help_heading = "Search", long)]
    pub allow_unconverged: bool,
}

/// Flags of `loadgen calibrate`: the target, thresholds, output and shards of `loadgen run`,
/// and the calibration's own: one worker is the point, so no model flags.
#[derive(Debug, Args, Clone)]
pub struct CalibrateArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub shard: ShardArgs,

    /// Requests measured for R(1), after the warm-up ones.
    #[arg(help_heading = "Calibration", short = 'n', long = "requests", value_name = "N", default_value_t = DEFAULT_CALIBRATION_REQUESTS)]
    pub requests: u64,

    /// Requests sent (and not counted in R(1)) before measuring, to warm connections and caches.
    #[arg(help_heading = "Calibration", long, value_name = "N", default_value_t = DEFAULT_CALIBRATION_WARMUP)]
    pub warmup: u64,

    /// Concurrency levels N for the prediction table.
    #[arg(
        help_heading = "Calibration",
        long,
        value_name = "N,N,…",
        value_delimiter = ',',
        default_value = "1,10,20,50,100,150,200"
    )]
    pub levels: Vec<u32>,
}

/// Flags of `loadgen sweep`: the flags of `loadgen run` (but the S3 upload), where -d or -n
/// applies to each level and --out is the sweep's directory.
#[derive(Debug, Args, Clone)]
pub struct SweepArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub open: OpenArgs,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub shard: ShardArgs,
    #[command(flatten)]
    pub dashboard: DashboardArgs,

    /// Closed-model concurrency levels (workers), e.g. 1,10,20,50,100,200: each level's -c.
    #[arg(help_heading = "Sweep", 
        long,
        value_name = "N,N,…",
        value_delimiter = ',',
        required_unless_present = "rate_levels",
        conflicts_with_all = ["rate_levels", "connections"]
    )]
    pub levels: Vec<u32>,

    /// Sweep the open model instead, at these arrival rates (requests/s): each level's --rate.
    #[arg(help_heading = "Sweep", long, value_name = "R,R,…", value_delimiter = ',', conflicts_with_all = ["rate", "stages"])]
    pub rate_levels: Vec<f64>,

    /// A run directory written by `loadgen calibrate`, whose R(1) gives the predictions
    /// (default: the sweep's own level 1, if it has one).
    #[arg(help_heading = "Sweep", long, value_name = "DIR")]
    pub calibration: Option<PathBuf>,
}

/// Flags of `loadgen scenarios`.
#[derive(Debug, Args, Clone)]
pub struct ScenariosArgs {
    #[command(subcommand)]
    pub action: Option<ScenariosAction>,
}

#[derive(Debug, Subcommand, Clone)]
pub enum ScenariosAction {
    /// Print a built-in scenario's TOML.
    Show {
        /// Name of the built-in (see `loadgen scenarios`).
        name: String,
    },
}

const RUN_EXAMPLES: &str = "\
Examples:
  loadgen run                                        # demo against the embedded server
  loadgen run --scenario albums --set model.groups=3 --set model.iterations=50
  loadgen run my-scenario.toml --url http://10.0.0.5:8080
  loadgen run --url http://127.0.0.1:8080/ -c 50 -d 30s
  loadgen run --url http://host:8080/albums/1 -c 32 -n 100000 --json
  loadgen run --url http://host:8080/ --ramp 30s:10,1m:50,30s:0 --threshold 'p99<50ms' --abort-on-fail
  loadgen run --url http://host:8080/swipe/left/ --method POST \\
      -H 'Content-Type: application/json' --body @swipe.json -c 20 -d 1m

Exit codes: 0 run finished (failed requests are counted, not fatal); 1 results could not be
written; 2 bad input or unreachable target (nothing was run); 99 a --threshold was crossed
(or lost, with --abort-on-fail); 130 Ctrl-C; 143 SIGTERM.";

/// Flags of `loadgen run`: every group.
#[derive(Debug, Args, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: TargetArgs,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub open: OpenArgs,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    #[command(flatten)]
    pub output: OutputArgs,
    #[command(flatten)]
    pub shard: ShardArgs,
    #[command(flatten)]
    pub dashboard: DashboardArgs,

    /// After a closed level (-c), send at most 50 requests in at most 1 s at one connection
    /// and record their median, R(1), in run.json's `probe`: the server counts them, the run's
    /// rows do not hold them. By default this runs only where the level's latency is all the
    /// verdict has to go on; --probe runs it after any closed level (refused with any other
    /// model, a shard or a spread run).
    #[arg(long, conflicts_with = "no_probe")]
    pub probe: bool,

    /// Never send the probe at one connection after the level: the server then counts
    /// exactly the run's requests.
    #[arg(long)]
    pub no_probe: bool,

    /// With --out s3://: the longest the end of the run waits for uploads still going; what
    /// has not arrived by then stays in the local staging directory (exit 1).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "60s", hide_short_help = true)]
    pub upload_timeout: Duration,
}
