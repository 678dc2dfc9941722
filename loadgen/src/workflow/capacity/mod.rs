//! `loadgen capacity`: the highest arrival rate a service sustains under an SLO, with its
//! uncertainty and the reason it stops there.
//!
//! A composition of ordinary runs, like `calibrate` and `sweep`: a short calibration (or
//! `--calibration DIR`) gives the first rate, R(1)'s one-worker throughput; [`search`] picks
//! each next rate; each level is an open-model run in its own run directory under the
//! capacity directory ([`level`]), judged by the run's one judge with the level's SLOs
//! ([`crate::verdict::slo`]); what the search concluded is decided in [`conclude`] and goes to
//! `capacity.json` (contract `capacity_json`) and the console ([`render`]). The command line
//! is read once ([`RunInputs`]); the calibration and every level are runs made from it.
//! Latency is counted from the intended send time, so a server that falls behind cannot hide.
//! The cause at the first failing level is that level's run verdict ([`crate::verdict`], the
//! one judge, which reads the level's SLOs as a fact), written once to its run.json.

pub mod conclude;
pub mod level;
pub mod ramp;
pub mod render;
pub mod search;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use self::conclude::{CalibrationUsed, Capacity, Ended, Settings, Stopped, EXIT_NOT_MET};

use self::conclude::Searched;
use self::level::{Cause, Level, LevelPlan};
use self::search::{Judged, Next, Search, Step};
use crate::cli::CapacityArgs;
use crate::config::{ConfigError, RunInputs};
use crate::report::thresholds::Threshold;
use crate::report::write_json_atomically;
use crate::runner::RunError;
use crate::stop::StopSignal;
use crate::verdict::slo;
/// Requests of the short calibration (after a few warm-up ones).
const CALIBRATION_REQUESTS: u64 = 100;
/// How often a level that failed on a moment's outage of the target, while this client sent
/// late, or while other work kept the host busy, is measured again before its failure is
/// taken as it is.
const REMEASURES: u32 = 2;
/// How often a level that failed on a busy host (and on time) is measured again.
const BUSY_REMEASURES: u32 = 1;

/// Runs the search into `--out DIR` (default `runs/capacity-<time>`), writes
/// `DIR/capacity.json` and returns it with the directory.
pub async fn capacity(
    args: &CapacityArgs,
    stop: StopSignal,
) -> Result<(Capacity, PathBuf), RunError> {
    let inputs = RunInputs::read(args.into())?.without_banner();
    let slos = check(args, &inputs)?;
    super::local_only("capacity", inputs.out())?;
    let dir = super::workflow_dir(args.output.out.as_deref(), "capacity")?;
    let title = format!("capacity under {}", args.slos.join(", "));
    let (page, inputs) = super::WorkflowPage::start(&args.dashboard, "capacity", title, inputs)?;
    if !args.output.json {
        eprintln!("{}", render::banner(args, &dir));
    }
    let started = Instant::now();
    let calibration = first_rate(args, &inputs, &dir, &stop).await?;
    let plan = LevelPlan {
        inputs: &inputs,
        open: &args.open,
        slos: &slos,
        rows_to_pass: slo::rows_to_pass(&slos),
        warmup: args.warmup,
        target_wait: args.target_wait,
        dir: dir.clone(),
        page: page.as_ref(),
    };
    let range = (args.min_rate, args.max_rate);
    let mut search = match calibration.ramp_rps {
        Some(ramp_rps) => Search::from_estimate(calibration.start_rps, args.tolerance, range)
            .with_ceiling(ramp_rps),
        None => Search::new(calibration.start_rps, args.tolerance, range),
    };
    let (levels, stopped) = run_search(args, &plan, &mut search, started, &stop).await?;
    let searched = Searched {
        slos: args.slos.iter().map(|s| s.trim().to_string()).collect(),
        arrivals: args.open.arrivals.unwrap_or_default(),
        settings: settings(args),
        calibration,
        levels,
        stopped,
        elapsed: started.elapsed(),
    };
    let capacity = conclude::conclude(searched, &search);
    let path = dir.join("capacity.json");
    write_json_atomically(&path, &capacity).map_err(|source| RunError::Write { path, source })?;
    if let Some(page) = page {
        page.finish(&capacity, &stop).await;
    }
    Ok((capacity, dir))
}

/// Levels until the search is done, the budget is spent, the client or the target gives out,
/// or the user stops it; how it ended (with why the target was lost, when it was).
async fn run_search(
    args: &CapacityArgs,
    plan: &LevelPlan<'_>,
    search: &mut Search,
    started: Instant,
    stop: &StopSignal,
) -> Result<(Vec<Level>, Stopped), RunError> {
    let mut levels = Vec::new();
    // The most a level took beyond its sending (connecting, the writer's last segment, the
    // judgement and the probe, the cool-down): counted when deciding whether the next one
    // fits the budget.
    let mut overhead = Duration::ZERO;
    loop {
        let Next::Run { rate_rps, step } = search.next() else {
            return Ok((levels, Stopped::Done));
        };
        let near = search.near_ceiling(rate_rps);
        let (duration, warmup) = level_length(args, plan, rate_rps, step, search.width(), near);
        if stop.is_draining() {
            return Ok((levels, Stopped::Interrupted));
        }
        // The first level always runs: --budget is at least one level long.
        if !levels.is_empty() && started.elapsed() + duration + overhead > args.budget {
            return Ok((levels, Stopped::Budget));
        }
        let began = Instant::now();
        let level = LevelRun {
            rate_rps,
            step,
            duration,
            warmup,
        };
        let (mut level, sent) = match measure(args, plan, &mut levels, level, stop).await {
            Ok(measured) => measured,
            // Ctrl-C while the target was being waited for: the user stopped the search.
            Err(lost) if lost.is_target_lost() && stop.is_draining() => {
                return Ok((levels, Stopped::Interrupted));
            }
            Err(lost) if lost.is_target_lost() => {
                return Ok((levels, Stopped::TargetLost(lost.to_string())));
            }
            Err(other) => return Err(other),
        };
        if level.interrupted {
            keep(plan, &mut levels, level);
            return Ok((levels, Stopped::Interrupted));
        }
        search.record(rate_rps, step, judged(&level));
        // A client cause ends the search: higher rates would measure this client (or the host
        // that kept it off its cores), not the service.
        let client = level.cause == Some(Cause::Client);
        let ends = match (client, level.starved_by_host()) {
            (true, true) => Some(Stopped::HostBusy),
            (true, false) => Some(Stopped::ClientLimit),
            (false, _) => None,
        };
        // A level that passed left no backlog: the next one starts at once.
        let pause = match level.passed && level.cut_in_flight == 0 {
            true => Duration::ZERO,
            false => level.cool_down(args.cool_down),
        };
        level.cool_down_s = pause.as_secs_f64();
        keep(plan, &mut levels, level);
        if let Some(ends) = ends {
            return Ok((levels, ends));
        }
        cool_down(args, pause, stop).await;
        overhead = overhead.max(began.elapsed().saturating_sub(sent));
    }
}

/// How the search takes a level: a failure on a busy host or with late sends (after being
/// measured again) is one the machine may have caused.
fn judged(level: &Level) -> Judged {
    match level.passed {
        true => Judged::Passed,
        false if level.failed_on_busy_host() || level.failed_off_schedule() => Judged::FailedBusy,
        false => Judged::Failed,
    }
}

/// A level far from the edge (growing, descending, or bisecting a bracket wider than
/// [`NEAR`] × the tolerance) sends this share of `--level-duration` and of `--warmup`: a rate
/// far above or below the limit shows it within a second or two, and the time goes to the
/// levels near the edge.
const SHORT: f64 = 0.2;
/// A bracket within this many tolerances is near the edge: its levels run their full length.
const NEAR: f64 = 2.0;

/// How long a level sends, and its warm-up: `--level-duration` and `--warmup` (a fifth of
/// them far from the edge — never within the tolerance of the closed ramp's throughput,
/// `near_ceiling`; times `--confirm-levels` for a confirmation), or longer at a rate
/// too low to send, after its warm-up, the rows its SLOs need to be shown met (an error rate
/// below 1 % needs 381 rows without a failure): a level is not called uncertain, nor failed,
/// for want of rows.
fn level_length(
    args: &CapacityArgs,
    plan: &LevelPlan<'_>,
    rate_rps: f64,
    step: Step,
    width: Option<f64>,
    near_ceiling: bool,
) -> (Duration, Duration) {
    let far = !near_ceiling
        && match step {
            Step::Grow | Step::Descend => true,
            Step::Bisect => width.is_none_or(|w| w > NEAR * args.tolerance),
            Step::Extend | Step::Confirm => false,
        };
    let (given, warmup) = match step {
        Step::Confirm => (
            args.level_duration.mul_f64(args.confirm_levels),
            plan.warmup,
        ),
        _ if far => (
            args.level_duration.mul_f64(SHORT),
            plan.warmup.mul_f64(SHORT),
        ),
        _ => (args.level_duration, plan.warmup),
    };
    // One more second than the rows take: the window's last sends may still be in flight.
    let needed_s = plan.rows_to_pass as f64 / rate_rps.max(f64::MIN_POSITIVE) + 1.0;
    let needed = warmup + Duration::from_secs_f64(needed_s.min(args.budget.as_secs_f64()));
    (given.max(needed), warmup)
}

/// The rate, step, length and warm-up of a level to run.
#[derive(Debug, Clone, Copy)]
struct LevelRun {
    rate_rps: f64,
    step: Step,
    duration: Duration,
    warmup: Duration,
}

/// Runs one level — twice as long again when an SLO's interval straddled its limit, and again
/// when it failed on a moment's outage of the target or while this client sent late (each
/// earlier one goes into `levels`) —
/// and returns it with how long it sent.
async fn measure(
    args: &CapacityArgs,
    plan: &LevelPlan<'_>,
    levels: &mut Vec<Level>,
    run: LevelRun,
    stop: &StopSignal,
) -> Result<(Level, Duration), RunError> {
    let (mut next, mut sent, mut remeasured) = (run, Duration::ZERO, 0);
    loop {
        let mut level = reach(plan, levels.len(), next, stop).await?;
        announce(args, &level);
        sent += next.duration;
        next = if level.needs_extension() {
            // Straddling the limit: look twice as long rather than guess.
            LevelRun {
                step: Step::Extend,
                duration: run.duration * 2,
                ..run
            }
        } else if let Some(why) = remeasure(&level, remeasured) {
            remeasured += 1;
            level.reasons.extend(why);
            LevelRun {
                step: level.step,
                ..run
            }
        } else {
            return Ok((level, sent));
        };
        let pause = level.cool_down(args.cool_down);
        level.cool_down_s = pause.as_secs_f64();
        keep(plan, levels, level);
        cool_down(args, pause, stop).await;
    }
}

/// A level as the search keeps it, its reasons and cool-down final: in `levels`, and a point
/// on the live page (the same level capacity.json will hold).
fn keep(plan: &LevelPlan<'_>, levels: &mut Vec<Level>, level: Level) {
    if let Some(page) = plan.page {
        page.point(&level);
    }
    levels.push(level);
}

/// Why a failed level, measured `remeasured` times again already, is measured again before
/// it counts (`Some(None)`: an outage, which its reasons already say): the target's moment or
/// this client's late sends (twice at most), or a busy host (once: the host's other work
/// lasts longer than a moment, and each time costs a level).
fn remeasure(level: &Level, remeasured: u32) -> Option<Option<String>> {
    if remeasured >= REMEASURES {
        return None;
    }
    if level.failed_on_outage() {
        return Some(None);
    }
    if level.failed_off_schedule() {
        return Some(Some(format!(
            "the client sent {} of its requests late: measured again",
            crate::verdict::words::pct(level.schedule.late_share)
        )));
    }
    // A confirmation that fails on a busy host moves no bracket: it ends the search at the
    // noise floor, so it is not sent again (20 s more at the defaults).
    let moves_the_bracket = level.step != Step::Confirm;
    (level.failed_on_busy_host() && moves_the_bracket && remeasured < BUSY_REMEASURES).then(|| {
        Some(format!(
            "{}: measured again",
            conclude::other_work(level).unwrap_or_default()
        ))
    })
}

/// Runs a level; a target that cannot be reached before it starts is tried again, with a
/// growing pause, for up to `--target-wait` before the search gives up on it.
async fn reach(
    plan: &LevelPlan<'_>,
    index: usize,
    run: LevelRun,
    stop: &StopSignal,
) -> Result<Level, RunError> {
    let started = Instant::now();
    let mut pause = Duration::from_millis(250);
    loop {
        match plan
            .run(
                index,
                run.rate_rps,
                run.step,
                (run.duration, run.warmup),
                stop,
            )
            .await
        {
            Err(lost)
                if lost.is_target_lost()
                    && started.elapsed() + pause <= plan.target_wait
                    && !stop.is_draining() =>
            {
                eprintln!(
                    "  the target could not be reached ({lost}); trying again in {}",
                    crate::units::duration(pause.as_nanos() as f64)
                );
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = stop.draining() => {}
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            other => return other,
        }
    }
}

fn announce(args: &CapacityArgs, level: &Level) {
    if !args.output.json {
        eprintln!("{}", render::level_line(level));
    }
}

/// Waits `pause` between levels (saying so when a cut-off backlog made it longer than
/// `--cool-down`), or until the user stops the search.
async fn cool_down(args: &CapacityArgs, pause: Duration, stop: &StopSignal) {
    if pause > args.cool_down && !args.output.json {
        eprintln!(
            "  cooling down {:.1} s (longer than --cool-down: requests were cut off in flight, \
             and the service may still be working through them)",
            pause.as_secs_f64()
        );
    }
    tokio::select! {
        () = tokio::time::sleep(pause) => {}
        () = stop.draining() => {}
    }
}

/// Refuses bad settings (one sentence each); parses the SLOs. The flags the search owns
/// (workers, rate, duration) are not among its flags at all.
fn check(args: &CapacityArgs, inputs: &RunInputs) -> Result<Vec<Threshold>, RunError> {
    let bad = |text: String| RunError::Config(ConfigError::Capacity(text));
    if args.budget < args.level_duration {
        return Err(bad(format!(
            "--budget {} is shorter than one level (--level-duration {}), so no level could \
             run; give --budget {} or more",
            humantime::format_duration(args.budget),
            humantime::format_duration(args.level_duration),
            humantime::format_duration(args.level_duration)
        )));
    }
    if let Some(min) = args.min_capacity.filter(|&min| min > args.max_rate) {
        return Err(bad(format!(
            "--min-capacity {min}/s is above --max-rate {}/s, so the search could never meet \
             it; lower --min-capacity or raise --max-rate",
            args.max_rate
        )));
    }
    if args.min_rate > args.max_rate {
        return Err(bad(format!(
            "--min-rate {}/s is above --max-rate {}/s; give a floor below the ceiling",
            args.min_rate, args.max_rate
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
    let slos = inputs
        .thresholds(&args.slos)
        .map_err(|e| bad(format!("--slo {e}")))?;
    match slos.iter().find(|slo| slo.unmeetable()) {
        Some(slo) => Err(bad(format!(
            "--slo '{}' can never be met: what it measures is never below 0; give a limit \
             above 0",
            slo.text.trim()
        ))),
        None => Ok(slos),
    }
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
        min_rate_rps: args.min_rate,
        min_capacity_rps: args.min_capacity,
        cool_down_s: args.cool_down.as_secs_f64(),
        target_wait_s: args.target_wait.as_secs_f64(),
        confidence: crate::verdict::slo::CONFIDENCE,
    }
}

/// The first level's rate: `--start-rate`, or from R(1) of `--calibration DIR` or of a short
/// calibration run in `DIR/calibration`.
async fn first_rate(
    args: &CapacityArgs,
    inputs: &RunInputs,
    dir: &Path,
    stop: &StopSignal,
) -> Result<CalibrationUsed, RunError> {
    if let Some(start_rps) = args.start_rate {
        return Ok(CalibrationUsed {
            run_dir: None,
            r1_ns: f64::NAN,
            failed_requests: 0,
            ramp_rps: None,
            start_rps: search::round_rate(start_rps.clamp(args.min_rate, args.max_rate)),
        });
    }
    let (run_dir, r1_ns, failed_requests) = match &args.calibration {
        Some(path) => (path.clone(), super::read_calibration(path)?, 0),
        None => {
            if !inputs.json() {
                eprintln!(
                    "capacity: calibrating with one worker ({CALIBRATION_REQUESTS} requests)"
                );
            }
            let calibration = super::CalibrationRun {
                warmup: CALIBRATION_REQUESTS / 10,
                requests: CALIBRATION_REQUESTS,
                levels: &[1],
                out: Some(&dir.join("calibration")),
            };
            let calibrated = calibration.run(inputs, stop.child()).await?;
            // R(1) of the successful responses only: fast errors (a rate limiter's 503s)
            // would set the first rate far above what the service serves.
            let (r1_ns, failed) = calibrated.successful_r1;
            (calibrated.run_dir, r1_ns, failed)
        }
    };
    let answered = r1_ns.is_finite() && r1_ns > 0.0;
    let ramp_rps = match answered && r1_ns <= ramp::SLOWEST_R1.as_nanos() as f64 {
        true => {
            if !inputs.json() {
                eprintln!("capacity: a closed ramp of 1 to 16 workers for a first estimate");
            }
            ramp::run_ramp(inputs, &dir.join("ramp"), r1_ns, stop).await?
        }
        false => None,
    };
    // No successful response at all: start at the floor and let the levels say why.
    let start_rps: f64 = match (ramp_rps, answered) {
        (Some(estimate), _) => estimate * ramp::START_SHARE,
        (None, true) => 1e9 / r1_ns,
        (None, false) => args.min_rate,
    };
    Ok(CalibrationUsed {
        run_dir: Some(run_dir),
        r1_ns,
        failed_requests,
        ramp_rps,
        start_rps: search::round_rate(start_rps.clamp(args.min_rate, args.max_rate)),
    })
}
