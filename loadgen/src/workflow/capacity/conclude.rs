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
    /// The closed ramp's highest throughput of successful responses (`DIR/ramp`): the first
    /// estimate; `None` with `--start-rate`, or for a service slower than 100 ms a request.
    pub ramp_rps: Option<f64>,
    /// The first level's rate: `--start-rate`, 90 % of the ramp's estimate, or one worker's
    /// throughput, 1 / R(1).
    pub start_rps: f64,
}

/// How the search loop stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum Stopped {
    /// The search had nothing more to run.
    Done,
    /// A level failed because the client could not send its load.
    ClientLimit,
    /// A level failed because the client sent late while other work held the host's cores.
    HostBusy,
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
    /// A rate passed once and failed once, or the failure that bounds the answer came on a
    /// busy host (or with late sends) even when measured again: the interval is as narrow
    /// as this machine allows, and reaches above every rate that passed.
    NoiseFloor,
    /// Every level down to `--min-rate` failed.
    Floor,
    /// The client could not send the failing level's load: its limit, not the service's.
    ClientLimit,
    /// The client sent the failing level late while its own CPU was not saturated and other
    /// work held the host's cores (or it waited for one): this host's limit at that moment,
    /// neither the client's nor the service's.
    HostBusy,
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

    fn of(stopped: &Stopped, search: &Search, bound_busy: bool) -> Ended {
        match stopped {
            Stopped::Done if search.noisy().is_some() => Ended::NoiseFloor,
            Stopped::Done if search.floor_failed() => Ended::Floor,
            Stopped::Done if bound_busy => Ended::NoiseFloor,
            Stopped::Done => Ended::Converged,
            Stopped::ClientLimit => Ended::ClientLimit,
            Stopped::HostBusy => Ended::HostBusy,
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
    let (_, high) = search.interval();
    // A failure on a busy host inside the interval: the last verdict at that rate.
    let busy = search.busy_bound().and_then(|rate| {
        levels
            .iter()
            .rposition(|l| !l.passed && l.offered_rps == rate)
    });
    let bound_busy = busy.is_some();
    let ended = Ended::of(&stopped, search, bound_busy);
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
    let noise = match ended {
        Ended::NoiseFloor => Some(noise_words(search, busy.map(|i| &levels[i]))),
        _ => None,
    };
    // A host that kept this client off its cores: the failing level says nothing of the
    // service, so the interval's top is left open.
    let high = if ended == Ended::HostBusy { None } else { high };
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
        interval: capacity_rps.map(|lo| (lo, high)),
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
    capacity.answer = answer(&capacity, noise.as_deref());
    capacity
}

/// How the search came to its noise floor: the rate that passed once and failed once, or the
/// busy host at the failure that bounds the answer.
fn noise_words(search: &Search, busy_bound: Option<&Level>) -> String {
    let mut text = match search.noisy() {
        Some(rps) => format!("{rps} req/s passed once and failed once"),
        None => String::new(),
    };
    if let Some(level) = busy_bound {
        if !text.is_empty() {
            text += "; ";
        }
        text += &format!(
            "at {} req/s {}, even when measured again: on a quieter host the limit may be \
             higher",
            level.offered_rps,
            other_work(level).unwrap_or_else(|| "the client sent late".to_string())
        );
    }
    text
}

/// "other work kept 1.9 of this host's 2 cores busy (rustc 0.9 cores, pip 0.5 cores); this
/// client waited 340 ms a second for a core": what the host did beside a level.
pub fn other_work(level: &Level) -> Option<String> {
    let busy = level
        .other_cores
        .zip(level.host_cores)
        .map(|(other, cores)| {
            let names = match level.other_work.is_empty() {
                true => String::new(),
                false => format!(" ({})", level.other_work.join(", ")),
            };
            let server = match level.server_cpu_cores {
                Some(server) => format!(", beside the server's own {server:.1}"),
                None if level.server_shares_cores => ", the server on this host among it".into(),
                None => String::new(),
            };
            format!("other work kept {other:.1} of this host's {cores} cores busy{names}{server}")
        });
    let waited = level.run_delay_share.map(|share| {
        format!(
            "this client waited {} a second for a core",
            crate::units::duration(share * 1e9)
        )
    });
    match (busy, waited) {
        (Some(busy), Some(waited)) => Some(format!("{busy}; {waited}")),
        (one, other) => one.or(other),
    }
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
    let busy: Vec<&Level> = levels.iter().filter(|l| l.host_busy).collect();
    if let Some(busiest) = busy.iter().max_by(|a, b| {
        a.other_cores
            .unwrap_or(0.0)
            .total_cmp(&b.other_cores.unwrap_or(0.0))
    }) {
        warnings.push(format!(
            "this host was busy with other work during {} of the {} levels (the most: {}): \
             the answer is this host's at the time; search on a quieter host for the \
             service's own",
            busy.len(),
            levels.len(),
            other_work(busiest).unwrap_or_default()
        ));
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
fn answer(c: &Capacity, noise: Option<&str>) -> String {
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
        (Some(rps), _) if c.ended == Ended::HostBusy => format!(
            "the service sustains at least {rps} req/s with {slos}, {} arrivals; above that \
             this host was busy — {} — and this client sent late though its own CPU was \
             not saturated, so the service's limit was not reached: search on a quieter host{why}",
            c.arrivals,
            failing
                .and_then(other_work)
                .unwrap_or_else(|| "other work held its cores".into())
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
            suffix(c, noise)
        ),
        (Some(rps), _) if c.ended == Ended::Converged => format!(
            "sustains at least {rps} req/s with {slos}, {} arrivals: no level up to \
             --max-rate failed",
            c.arrivals
        ),
        (Some(rps), _) => format!(
            "sustains at least {rps} req/s with {slos}, {} arrivals{}",
            c.arrivals,
            suffix(c, noise)
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
        Ended::HostBusy => {
            "this host was busy (other work held its cores and this client sent late)"
        }
        _ => "the search ended",
    }
}

/// How an answer with a passing level ended, when not the usual way.
fn suffix(c: &Capacity, noise: Option<&str>) -> String {
    match c.ended {
        Ended::Budget => " — UNCONVERGED: the budget ran out first".to_string(),
        Ended::Interrupted => " — INTERRUPTED: the search was stopped before it converged".into(),
        Ended::TargetLost => format!(
            " — UNCONVERGED: the target could no longer be reached (tried for {} before \
             giving up)",
            crate::units::duration(c.settings.target_wait_s * 1e9)
        ),
        Ended::NoiseFloor => format!(
            " — NOISE FLOOR, as narrow as this machine and service allow: {}",
            noise.unwrap_or("the measurements did not settle")
        ),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::level::tests::failed;
    use super::super::search::{Judged, Step};
    use super::*;

    fn searched(levels: Vec<Level>, stopped: Stopped) -> Searched {
        Searched {
            slos: vec!["p99<50ms".into()],
            arrivals: Arrivals::default(),
            settings: Settings {
                level_duration_s: 10.0,
                warmup_s: 2.0,
                tolerance: 0.05,
                confirm_duration_s: 20.0,
                budget_s: 600.0,
                max_rate_rps: 1e5,
                min_rate_rps: 1.0,
                min_capacity_rps: None,
                cool_down_s: 2.0,
                target_wait_s: 30.0,
                confidence: 0.95,
            },
            calibration: CalibrationUsed {
                run_dir: None,
                r1_ns: f64::NAN,
                failed_requests: 0,
                ramp_rps: None,
                start_rps: 100.0,
            },
            levels,
            stopped,
            elapsed: Duration::from_secs(30),
        }
    }

    fn passed(rate: f64, step: Step) -> Level {
        Level {
            step,
            offered_rps: rate,
            passed: true,
            cause: None,
            ..failed(Cause::Server, true)
        }
    }

    /// A level that failed at `rate` while pip held 1.8 of the host's 2 cores.
    fn failed_busy(rate: f64, cause: Cause) -> Level {
        Level {
            offered_rps: rate,
            host_busy: true,
            other_cores: Some(1.8),
            other_work: vec!["pip 0.9 cores".into()],
            run_delay_share: Some(0.3),
            ..failed(cause, cause != Cause::Client)
        }
    }

    /// Issue 59: a failure that bounds the answer came on a busy host even when measured
    /// again: not `converged` — the noise floor, with the other work named.
    #[test]
    fn a_busy_failure_that_bounds_the_answer_is_the_noise_floor_naming_the_other_work() {
        let mut search = Search::new(100.0, 0.05, (1.0, 1e5));
        search.record(100.0, Step::Grow, Judged::Passed);
        search.record(104.0, Step::Bisect, Judged::FailedBusy);
        search.record(100.0, Step::Confirm, Judged::Passed);
        let levels = vec![
            passed(100.0, Step::Grow),
            failed_busy(104.0, Cause::Server),
            passed(100.0, Step::Confirm),
        ];
        let c = conclude(searched(levels, Stopped::Done), &search);
        assert_eq!(c.ended, Ended::NoiseFloor);
        assert_eq!(c.interval, Some((100.0, None)));
        assert!(
            c.answer
                .contains("other work kept 1.8 of this host's 2 cores busy (pip 0.9 cores)"),
            "{}",
            c.answer
        );
        assert!(c.warnings.iter().any(|w| w.contains("this host was busy")));
        // The same failure on a quiet host: converged.
        let mut quiet = Search::new(100.0, 0.05, (1.0, 1e5));
        quiet.record(100.0, Step::Grow, Judged::Passed);
        quiet.record(104.0, Step::Bisect, Judged::Failed);
        quiet.record(100.0, Step::Confirm, Judged::Passed);
        let mut clean = failed_busy(104.0, Cause::Server);
        (clean.host_busy, clean.other_cores) = (false, Some(0.1));
        let levels = vec![
            passed(100.0, Step::Grow),
            clean,
            passed(100.0, Step::Confirm),
        ];
        let c = conclude(searched(levels, Stopped::Done), &quiet);
        assert_eq!(c.ended, Ended::Converged);
        assert_eq!(c.interval, Some((100.0, Some(104.0))));
    }

    /// Issue 59: "this client could not send the load" while the client used 1 % of a core
    /// and other work held the host: the host's, said so, and not converged.
    #[test]
    fn a_client_starved_by_its_host_ends_host_busy_not_client_limit() {
        let mut search = Search::new(100.0, 0.05, (1.0, 1e5));
        search.record(100.0, Step::Grow, Judged::Passed);
        search.record(200.0, Step::Grow, Judged::FailedBusy);
        let levels = vec![passed(100.0, Step::Grow), failed_busy(200.0, Cause::Client)];
        let c = conclude(searched(levels, Stopped::HostBusy), &search);
        assert_eq!(c.ended, Ended::HostBusy);
        assert_eq!(c.interval, Some((100.0, None)));
        assert!(c.answer.contains("this host was busy"), "{}", c.answer);
        assert!(
            !c.answer.contains("this client could not send"),
            "{}",
            c.answer
        );
        assert_eq!(c.exit_code(false), EXIT_NOT_MET);
    }
}
