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

/// What the search ran and how it ended, for [`conclude`].
pub struct Searched {
    pub slos: Vec<String>,
    pub arrivals: Arrivals,
    pub settings: Settings,
    pub calibration: CalibrationUsed,
    pub levels: Vec<Level>,
    pub converged: bool,
    pub elapsed: Duration,
}

/// What the network would need, which this command does not judge.
const NETWORK_NOTE: &str = "the network is not judged here: `loadgen-analyze explain DIR` on \
    the first failing level's run directory weighs it (bytes/s against the link)";

/// Puts the levels and the search's bracket together into capacity.json's object.
pub fn conclude(searched: Searched, search: &Search) -> Capacity {
    let Searched {
        slos,
        arrivals,
        settings,
        calibration,
        levels,
        converged,
        elapsed,
    } = searched;
    let capacity_rps = if converged {
        search.confirmed()
    } else {
        search.highest_passing()
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
    let limited_by = match (verdict, capacity_rps) {
        (Some(cause), _) => Some(cause_name(cause)),
        (None, Some(rps)) if rps >= settings.max_rate_rps => Some("max_rate"),
        _ => None,
    };
    let mut evidence: Vec<String> = first_failing.map(|l| l.reasons.clone()).unwrap_or_default();
    if first_failing.is_some() {
        evidence.push(NETWORK_NOTE.to_string());
    }
    let mut capacity = Capacity {
        kind: "capacity",
        slos,
        arrivals: arrivals.name(),
        settings,
        calibration,
        capacity_rps,
        interval: capacity_rps.map(|lo| (lo, failing_rps)),
        converged,
        verdict,
        limited_by,
        first_failing_level,
        evidence,
        warnings: warnings(&levels, verdict),
        answer: String::new(),
        elapsed_s: elapsed.as_secs_f64(),
        levels,
    };
    capacity.answer = answer(&capacity);
    capacity
}

pub fn cause_name(cause: Cause) -> &'static str {
    match cause {
        Cause::Errors => "errors",
        Cause::Client => "client",
        Cause::Server => "server",
    }
}

/// When the client or the machine, not the service, set the limit.
fn warnings(levels: &[Level], verdict: Option<Cause>) -> Vec<String> {
    let mut warnings = Vec::new();
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
/// arrivals; at 800 req/s p99<50ms crossed: observed …".
fn answer(c: &Capacity) -> String {
    let slos = c.slos.join(" and ");
    let failing = c.first_failing_level.map(|i| &c.levels[i]);
    let why = failing.map_or(String::new(), |l| {
        format!("; at {} req/s {}", l.offered_rps, l.reasons.join("; "))
    });
    match (c.capacity_rps, c.interval) {
        (None, _) => format!(
            "no rate met {slos} ({} arrivals): even the lowest level failed{why}",
            c.arrivals
        ),
        (Some(rps), Some((_, Some(hi)))) => format!(
            "sustains {rps} req/s (the limit lies between {rps} and {hi} req/s) with {slos}, \
             {} arrivals{}{why}",
            c.arrivals,
            if c.converged {
                ""
            } else {
                " — UNCONVERGED: the budget ran out first"
            }
        ),
        (Some(rps), _) => format!(
            "sustains at least {rps} req/s with {slos}, {} arrivals: no level up to \
             --max-rate failed{}",
            c.arrivals,
            if c.converged {
                ""
            } else {
                " — UNCONVERGED: the budget ran out first"
            }
        ),
    }
}
