//! What the search concluded: capacity.json's object ([`Capacity`]) put together from the
//! levels and the search's bracket — the capacity and its interval, what limited it (the
//! cause at the first failing level, or `--max-rate`), the evidence, the warnings and the
//! answer in words. Decisions live here; `render` only prints them.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::level::{Cause, Level};
use super::search::Search;
use crate::model::open::Arrivals;
use crate::verdict::LimitedBy;

/// The exit code when no rate met the SLO, the answer is below `--min-capacity`, or the
/// search did not converge (without `--allow-unconverged`): the thresholds' code.
pub const EXIT_NOT_MET: i32 = crate::report::thresholds::EXIT_CODE;

/// The search's settings, as capacity.json records them.
#[derive(Debug, Clone, Serialize)]
pub struct Settings {
    pub level_duration_s: f64,
    pub warmup_s: f64,
    pub tolerance: f64,
    pub confirm_duration_s: f64,
    pub budget_s: f64,
    pub max_rate_rps: f64,
    /// The lowest rate ever offered: a failing descent stops there.
    pub min_rate_rps: f64,
    pub min_capacity_rps: Option<f64>,
    pub cool_down_s: f64,
    /// `--target-wait`: how long an unreachable target is tried again before `target_lost`.
    pub target_wait_s: f64,
    pub confidence: f64,
}

/// Where the first rate came from.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrationUsed {
    /// `None` with `--start-rate` (no calibration).
    pub run_dir: Option<PathBuf>,
    /// Mean latency of the calibration's successful responses (its failures left out).
    pub r1_ns: f64,
    /// The calibration's measured requests that failed (not in R(1)).
    pub failed_requests: u64,
    /// The first level's rate: `--start-rate`, or one worker's throughput, 1 / R(1).
    pub start_rps: f64,
}

/// How the search loop stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum Stopped {
    /// The search had nothing more to run.
    Done,
    /// A level failed because the client could not send its load.
    ClientLimit,
    /// The target could no longer be reached (why).
    TargetLost(String),
    /// The next level would not fit in `--budget`.
    Budget,
    /// Ctrl-C or SIGTERM.
    Interrupted,
}

/// How the search ended, as capacity.json records it (`ended`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// The bracket closed within the tolerance and its low end was confirmed (or no level up
    /// to `--max-rate` failed).
    Converged,
    /// A rate passed once and failed once: the bracket is as narrow as the machine allows.
    NoiseFloor,
    /// Every level down to `--min-rate` failed.
    Floor,
    /// The client could not send the failing level's load: its limit, not the service's.
    ClientLimit,
    /// The target could no longer be reached.
    TargetLost,
    /// `--budget` ran out first.
    Budget,
    /// Ctrl-C or SIGTERM stopped it.
    Interrupted,
}

impl Ended {
    /// Whether the search came to its answer (the rest were cut short).
    pub fn answered(self) -> bool {
        matches!(
            self,
            Ended::Converged | Ended::NoiseFloor | Ended::Floor | Ended::ClientLimit
        )
    }

    fn of(stopped: &Stopped, search: &Search) -> Ended {
        match stopped {
            Stopped::Done if search.noisy().is_some() => Ended::NoiseFloor,
            Stopped::Done if search.floor_failed() => Ended::Floor,
            Stopped::Done => Ended::Converged,
            Stopped::ClientLimit => Ended::ClientLimit,
            Stopped::TargetLost(_) => Ended::TargetLost,
            Stopped::Budget => Ended::Budget,
            Stopped::Interrupted => Ended::Interrupted,
        }
    }
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
    /// The search came to its answer (`ended` is converged, noise_floor, floor or
    /// client_limit), rather than being cut short.
    pub converged: bool,
    pub ended: Ended,
    /// What stopped the first failing level.
    pub verdict: Option<Cause>,
    /// What bounds the answer: the verdict, a lost target (`errors`), or `max_rate`.
    pub limited_by: Option<LimitedBy>,
    /// Index into `levels` of the first failing level (the lowest rate that failed).
    pub first_failing_level: Option<usize>,
    pub evidence: Vec<String>,
    pub warnings: Vec<String>,
    pub answer: String,
    pub elapsed_s: f64,
}

impl Capacity {
    /// 0 found; [`EXIT_NOT_MET`] none met, below `min_capacity_rps`, or unconverged
    /// (unless allowed); 1 when the target was lost before any level could be judged.
    pub fn exit_code(&self, allow_unconverged: bool) -> i32 {
        let judged = self.levels.iter().any(|l| !l.interrupted);
        if self.ended == Ended::TargetLost && !judged {
            return 1;
        }
        if self.below_min_capacity() || !(self.converged || allow_unconverged) {
            EXIT_NOT_MET
        } else {
            0
        }
    }

    /// No rate met the SLO, or the one found is below `--min-capacity`.
    fn below_min_capacity(&self) -> bool {
        match (self.capacity_rps, self.settings.min_capacity_rps) {
            (None, _) => true,
            (Some(found), Some(min)) => found < min,
            (Some(_), None) => false,
        }
    }
}

/// What the search ran and how it ended, for [`conclude`].
pub struct Searched {
    pub slos: Vec<String>,
    pub arrivals: Arrivals,
    pub settings: Settings,
    pub calibration: CalibrationUsed,
    pub levels: Vec<Level>,
    pub stopped: Stopped,
    pub elapsed: Duration,
}

/// Puts the levels and the search's bracket together into capacity.json's object.
pub fn conclude(searched: Searched, search: &Search) -> Capacity {
    let Searched {
        slos,
        arrivals,
        settings,
        calibration,
        levels,
        stopped,
        elapsed,
    } = searched;
    let ended = Ended::of(&stopped, search);
    let capacity_rps = match ended {
        Ended::Converged => search.confirmed(),
        Ended::Floor => None,
        _ => search.highest_passing(),
    };
    let failing_rps = search.lowest_failing();
    // The last verdict on that rate: an extended level's, not the straddling one before it.
    let first_failing_level = failing_rps.and_then(|hi| {
        levels
            .iter()
            .rposition(|l| !l.passed && l.offered_rps == hi)
    });
    let first_failing = first_failing_level.map(|i| &levels[i]);
    let verdict = first_failing.and_then(|l| l.cause);
    let at_max_rate = capacity_rps.is_some_and(|rps| rps >= settings.max_rate_rps);
    let limited_by = LimitedBy::of(ended == Ended::TargetLost, verdict, at_max_rate);
    let mut evidence: Vec<String> = first_failing.map(|l| l.reasons.clone()).unwrap_or_default();
    if let Stopped::TargetLost(why) = &stopped {
        evidence.push(format!("the target could no longer be reached: {why}"));
    }
    let mut warnings = warnings(&levels, verdict, settings.min_capacity_rps, capacity_rps);
    if calibration.failed_requests > 0 {
        warnings.push(format!(
            "{} of the calibration's requests failed: they are left out of R(1), which set \
             the first rate",
            calibration.failed_requests
        ));
    }
    let mut capacity = Capacity {
        kind: "capacity",
        slos,
        arrivals: arrivals.name(),
        settings,
        calibration,
        capacity_rps,
        interval: capacity_rps.map(|lo| (lo, failing_rps)),
        converged: ended.answered(),
        ended,
        verdict,
        limited_by,
        first_failing_level,
        evidence,
        warnings,
        answer: String::new(),
        elapsed_s: elapsed.as_secs_f64(),
        levels,
    };
    capacity.answer = answer(&capacity);
    capacity
}

/// When the client or the machine, not the service, set the limit.
fn warnings(
    levels: &[Level],
    verdict: Option<Cause>,
    min_capacity: Option<f64>,
    found: Option<f64>,
) -> Vec<String> {
    let mut warnings = Vec::new();
    if let (Some(min), Some(found)) = (min_capacity, found) {
        if found < min {
            warnings.push(format!(
                "the capacity found, {found} req/s, is below --min-capacity {min} req/s (exit 99)"
            ));
        }
    }
    if verdict == Some(Cause::Client) {
        warnings.push(
            "the client was saturated or fell behind its schedule at the first failing level: \
             this is the limit of this client, not of the service; run loadgen on a larger \
             machine (or a quieter one) or shard it (--shard I/N) to measure the service"
                .to_string(),
        );
    }
    if levels.iter().any(|l| l.server_shares_cores) {
        warnings.push(
            "the server ran on this machine's cores (the embedded server or a loopback \
             target): the answer is this machine's, shared between client and server"
                .to_string(),
        );
    }
    warnings
}

/// "sustains 750 req/s (the limit lies between 750 and 800 req/s) with p99<50ms, uniform
/// arrivals; at 800 req/s p99<50ms crossed: observed …", and how the search ended when it was
/// not the usual way.
fn answer(c: &Capacity) -> String {
    let slos = c.slos.join(" and ");
    let failing = c.first_failing_level.map(|i| &c.levels[i]);
    let why = failing.map_or(String::new(), |l| {
        format!("; at {} req/s {}", l.offered_rps, l.reasons.join("; "))
    });
    let mut text = match (c.capacity_rps, c.interval) {
        _ if c.levels.is_empty() => format!("no level ran, because {}", ending(c)),
        (None, _) if c.ended == Ended::Floor => format!(
            "no rate met {slos} ({} arrivals): even --min-rate {} req/s failed{why}",
            c.arrivals, c.settings.min_rate_rps
        ),
        (None, _) => format!(
            "no rate met {slos} ({} arrivals) before {}{why}",
            c.arrivals,
            ending(c)
        ),
        (Some(rps), _) if c.ended == Ended::ClientLimit => format!(
            "the service sustains at least {rps} req/s with {slos}, {} arrivals; above that \
             this client could not send the load, so the service's limit was not reached: \
             measure from a larger machine, or from several at once (`loadgen run --shard \
             I/N --rate R` on each){why}",
            c.arrivals
        ),
        (Some(rps), Some((_, Some(hi)))) => format!(
            "sustains {rps} req/s (the limit lies between {rps} and {hi} req/s) with {slos}, \
             {} arrivals{}{why}",
            c.arrivals,
            suffix(c)
        ),
        (Some(rps), _) if c.ended == Ended::Converged => format!(
            "sustains at least {rps} req/s with {slos}, {} arrivals: no level up to \
             --max-rate failed",
            c.arrivals
        ),
        (Some(rps), _) => format!(
            "sustains at least {rps} req/s with {slos}, {} arrivals{}",
            c.arrivals,
            suffix(c)
        ),
    };
    if let (Some(found), Some(min)) = (c.capacity_rps, c.settings.min_capacity_rps) {
        if found < min {
            text += &format!(" — below --min-capacity {min} req/s");
        }
    }
    text
}

/// What cut the search short, as the end of "no level ran, because …".
fn ending(c: &Capacity) -> &'static str {
    match c.ended {
        Ended::Interrupted => "the search was interrupted (Ctrl-C or SIGTERM)",
        Ended::Budget => "the budget ran out",
        Ended::TargetLost => "the target could no longer be reached",
        _ => "the search ended",
    }
}

/// How an answer with a passing level ended, when not the usual way.
fn suffix(c: &Capacity) -> String {
    match c.ended {
        Ended::Budget => " — UNCONVERGED: the budget ran out first".to_string(),
        Ended::Interrupted => " — INTERRUPTED: the search was stopped before it converged".into(),
        Ended::TargetLost => format!(
            " — UNCONVERGED: the target could no longer be reached (tried for {} before \
             giving up)",
            crate::units::duration(c.settings.target_wait_s * 1e9)
        ),
        Ended::NoiseFloor => format!(
            " — as narrow as this machine and service allow: {} req/s passed once and failed \
             once",
            c.interval.and_then(|(_, hi)| hi).unwrap_or_default()
        ),
        _ => String::new(),
    }
}
