//! `loadgen capacity`: the highest arrival rate a service sustains under an SLO, with its
//! uncertainty and the reason it stops there.
//!
//! A composition of ordinary runs, like `calibrate` and `sweep`: a short calibration (or
//! `--calibration DIR`) gives the first rate, R(1)'s one-worker throughput; [`search`] picks
//! each next rate; each level is an open-model run in its own run directory under the
//! capacity directory ([`level`]), read back and judged from its rows ([`rows`], [`judge`]);
//! the result goes to `capacity.json` (contract `capacity_json`) and the console
//! ([`render`]). Latency is counted from the intended send time, so a server that falls
//! behind cannot hide. The cause at the first failing level comes from facts the engine
//! wrote (the client verdict, dropped sends) and from which criterion failed; the network is
//! not judged here (`loadgen-analyze explain DIR` does).

pub mod judge;
pub mod level;
pub mod render;
pub mod rows;
pub mod search;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use self::level::{Cause, Level, LevelPlan};
use self::search::{Next, Search, Step};
use crate::cli::{ArrivalsArg, CalibrateArgs, CapacityArgs};
use crate::config::{ConfigError, Output};
use crate::report::thresholds::Threshold;
use crate::report::write_json_atomically;
use crate::runner::RunError;
use crate::stop::StopSignal;

/// The exit code when no rate met the SLO, the answer is below `--min-capacity`, or the
/// search did not converge (without `--allow-unconverged`): the thresholds' code.
pub const EXIT_NOT_MET: i32 = crate::report::thresholds::EXIT_CODE;
/// Requests of the short calibration (after a few warm-up ones).
const CALIBRATION_REQUESTS: u64 = 100;

/// The search's settings, as capacity.json records them.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub level_duration_s: f64,
    pub warmup_s: f64,
    pub tolerance: f64,
    pub confirm_duration_s: f64,
    pub budget_s: f64,
    pub max_rate_rps: f64,
    pub min_capacity_rps: Option<f64>,
    pub cool_down_s: f64,
    pub confidence: f64,
}

/// Where the first rate came from.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrationUsed {
    /// `None` with `--start-rate` (no calibration).
    pub run_dir: Option<PathBuf>,
    pub r1_ns: f64,
    /// The first level's rate: `--start-rate`, or one worker's throughput, 1 / R(1).
    pub start_rps: f64,
}

/// capacity.json.
#[derive(Debug, Clone, Serialize)]
pub struct Capacity {
    pub kind: &'static str,
    pub slos: Vec<String>,
    /// `uniform` or `poisson`: the answer depends on it.
    pub arrivals: &'static str,
    pub settings: Settings,
    pub calibration: CalibrationUsed,
    pub levels: Vec<Level>,
    /// The highest rate that met the SLO (confirmed when `converged`); `None`: none did.
    pub capacity_rps: Option<f64>,
    /// [highest passing, lowest failing] rate: the limit lies between; the high end is
    /// `None` when no level failed (the search stopped at `--max-rate`).
    pub interval: Option<(f64, Option<f64>)>,
    pub converged: bool,
    /// What stopped the first failing level.
    pub verdict: Option<Cause>,
    /// What bounds the answer: the verdict, or `max_rate`.
    pub limited_by: Option<&'static str>,
    /// Index into `levels` of the first failing level (the lowest rate that failed).
    pub first_failing_level: Option<usize>,
    pub evidence: Vec<String>,
    pub warnings: Vec<String>,
    pub answer: String,
    pub elapsed_s: f64,
}

impl Capacity {
    /// 0 found; [`EXIT_NOT_MET`] none met, below `min_capacity_rps`, or unconverged
    /// (unless allowed).
    pub fn exit_code(&self, allow_unconverged: bool) -> i32 {
        let below = match (self.capacity_rps, self.settings.min_capacity_rps) {
            (None, _) => true,
            (Some(found), Some(min)) => found < min,
            (Some(_), None) => false,
        };
        if below || !(self.converged || allow_unconverged) {
            EXIT_NOT_MET
        } else {
            0
        }
    }
}

/// Runs the search into `--out DIR` (default `runs/capacity-<time>`), writes
/// `DIR/capacity.json` and returns it with the directory.
pub async fn capacity(
    args: &CapacityArgs,
    stop: StopSignal,
) -> Result<(Capacity, PathBuf), RunError> {
    let slos = check(args)?;
    let dir = super::workflow_dir(args.run.out.as_deref(), "capacity")?;
    let started = Instant::now();
    let calibration = first_rate(args, &dir, &stop).await?;
    let plan = LevelPlan {
        run: &args.run,
        slos: &slos,
        warmup: args.warmup,
        dir: dir.clone(),
    };
    let mut search = Search::new(calibration.start_rps, args.tolerance, args.max_rate);
    let (levels, converged) = run_search(args, &plan, &mut search, started, &stop).await?;
    let capacity = render::conclude(
        args,
        settings(args),
        calibration,
        levels,
        &search,
        converged,
        started.elapsed(),
    );
    let path = dir.join("capacity.json");
    write_json_atomically(&path, &capacity).map_err(|source| RunError::Write { path, source })?;
    Ok((capacity, dir))
}

/// Levels until the search is done, the budget is spent or the user stops it; whether it
/// converged.
async fn run_search(
    args: &CapacityArgs,
    plan: &LevelPlan<'_>,
    search: &mut Search,
    started: Instant,
    stop: &StopSignal,
) -> Result<(Vec<Level>, bool), RunError> {
    let mut levels = Vec::new();
    // The most a level took beyond its sending (connecting, reading its rows back, the
    // cool-down): counted when deciding whether the next one fits the budget.
    let mut overhead = Duration::ZERO;
    loop {
        let Next::Run { rate_rps, step } = search.next() else {
            return Ok((levels, true));
        };
        let duration = match step {
            Step::Confirm => args.level_duration.mul_f64(args.confirm_levels),
            _ => args.level_duration,
        };
        if started.elapsed() + duration + overhead > args.budget || stop.is_draining() {
            return Ok((levels, false));
        }
        let began = Instant::now();
        let mut sent = duration;
        let mut level = plan
            .run(levels.len(), rate_rps, step, duration, stop)
            .await?;
        announce(args, &level);
        if level.uncertain && level.aborted.is_none() && !stop.is_draining() {
            // Straddling the limit: look twice as long rather than guess.
            let pause = level.cool_down(args.cool_down);
            level.cool_down_s = pause.as_secs_f64();
            levels.push(level);
            cool_down(args, pause, stop).await;
            sent += duration * 2;
            level = plan
                .run(levels.len(), rate_rps, Step::Extend, duration * 2, stop)
                .await?;
            announce(args, &level);
        }
        search.record(rate_rps, step, level.passed);
        let pause = level.cool_down(args.cool_down);
        level.cool_down_s = pause.as_secs_f64();
        levels.push(level);
        cool_down(args, pause, stop).await;
        overhead = overhead.max(began.elapsed().saturating_sub(sent));
    }
}

fn announce(args: &CapacityArgs, level: &Level) {
    if !args.run.json {
        eprintln!("{}", render::level_line(level));
    }
}

/// Waits `pause` between levels (saying so when a cut-off backlog made it longer than
/// `--cool-down`), or until the user stops the search.
async fn cool_down(args: &CapacityArgs, pause: Duration, stop: &StopSignal) {
    if pause > args.cool_down && !args.run.json {
        eprintln!(
            "  cooling down {} (longer than --cool-down: requests were cut off in flight, and \
             the service may still be working through them)",
            crate::units::duration(pause.as_nanos() as f64)
        );
    }
    tokio::select! {
        () = tokio::time::sleep(pause) => {}
        () = stop.draining() => {}
    }
}

/// Refuses the flags the search owns and bad settings (one sentence each); parses the SLOs.
fn check(args: &CapacityArgs) -> Result<Vec<Threshold>, RunError> {
    let bad = |text: String| RunError::Config(ConfigError::Capacity(text));
    let run = &args.run;
    let owned = [
        ("-c/--connections", run.connections.is_some()),
        ("-d/--duration", run.duration.is_some()),
        ("-n/--requests", run.requests.is_some()),
        ("--rate", run.rate.is_some()),
        ("--stages", run.stages.is_some()),
        ("--shard", run.shard.is_some()),
        ("--start-at", run.start_at.is_some()),
        ("--threshold", !run.thresholds.is_empty()),
    ];
    if let Some((flag, _)) = owned.iter().find(|(_, given)| *given) {
        return Err(bad(format!(
            "`loadgen capacity` chooses each level's rate, length and workers itself, so \
             {flag} does not apply; drop it (--level-duration sets how long a level lasts, \
             --slo what it must meet)"
        )));
    }
    if args.warmup >= args.level_duration {
        return Err(bad(format!(
            "--warmup {} is not shorter than --level-duration {}; give a warm-up shorter than \
             the level, e.g. --warmup 2s --level-duration 10s",
            humantime::format_duration(args.warmup),
            humantime::format_duration(args.level_duration)
        )));
    }
    if !(args.confirm_levels >= 1.0 && args.confirm_levels.is_finite()) {
        return Err(bad(format!(
            "--confirm-levels {} must be at least 1 (the confirmation is that many levels long)",
            args.confirm_levels
        )));
    }
    super::local_only("capacity", &Output::from_arg(run.out.as_deref())?)?;
    args.slos
        .iter()
        .map(|text| {
            text.parse::<Threshold>()
                .map_err(|e| bad(format!("--slo: {e}")))
        })
        .collect()
}

fn settings(args: &CapacityArgs) -> Settings {
    Settings {
        level_duration_s: args.level_duration.as_secs_f64(),
        warmup_s: args.warmup.as_secs_f64(),
        tolerance: args.tolerance,
        confirm_duration_s: args
            .level_duration
            .mul_f64(args.confirm_levels)
            .as_secs_f64(),
        budget_s: args.budget.as_secs_f64(),
        max_rate_rps: args.max_rate,
        min_capacity_rps: args.min_capacity,
        cool_down_s: args.cool_down.as_secs_f64(),
        confidence: judge::CONFIDENCE,
    }
}

/// The first level's rate: `--start-rate`, or from R(1) of `--calibration DIR` or of a short
/// calibration run in `DIR/calibration`.
async fn first_rate(
    args: &CapacityArgs,
    dir: &Path,
    stop: &StopSignal,
) -> Result<CalibrationUsed, RunError> {
    if let Some(start_rps) = args.start_rate {
        return Ok(CalibrationUsed {
            run_dir: None,
            r1_ns: f64::NAN,
            start_rps: search::round_rate(start_rps.min(args.max_rate)),
        });
    }
    let (run_dir, r1_ns) = match &args.calibration {
        Some(path) => (path.clone(), super::read_calibration(path)?),
        None => {
            let mut run = args.run.clone();
            run.out = Some(dir.join("calibration"));
            run.requests = Some(CALIBRATION_REQUESTS);
            // The open model's flags are the levels'; the calibration is one closed worker.
            run.max_in_flight = None;
            run.send_window = None;
            run.given = crate::cli::Given::default();
            let calibrate = CalibrateArgs {
                run,
                warmup: CALIBRATION_REQUESTS / 10,
                levels: vec![1],
            };
            if !args.run.json {
                eprintln!(
                    "capacity: calibrating with one worker ({CALIBRATION_REQUESTS} requests)"
                );
            }
            let calibrated = super::calibrate(&calibrate, stop.child()).await?;
            (calibrated.run_dir, calibrated.calibration.r1_ns)
        }
    };
    // No response at all: start low and let the levels say why.
    let start_rps: f64 = if r1_ns.is_finite() && r1_ns > 0.0 {
        1e9 / r1_ns
    } else {
        1.0
    };
    Ok(CalibrationUsed {
        run_dir: Some(run_dir),
        r1_ns,
        start_rps: search::round_rate(start_rps.min(args.max_rate)),
    })
}

/// `uniform` or `poisson`.
fn arrivals_name(arg: ArrivalsArg) -> &'static str {
    match arg {
        ArrivalsArg::Uniform => "uniform",
        ArrivalsArg::Poisson => "poisson",
    }
}
