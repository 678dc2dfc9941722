//! One level of the search: an ordinary open-model run at one rate (through [`crate::run`],
//! into its own run directory), watched while it runs so that a level far past the SLO is
//! stopped at once, then judged from its rows ([`super::judge`]).
//!
//! The facts about the client (saturated, sharing its cores with the server) and the
//! schedule (dropped sends) are the engine's, read from the run's outcome; this module only
//! combines them into the level's verdict and its cause.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::judge::{self, Outcome, Schedule, SloJudgement, Sustainability};
use super::search::Step;
use crate::cli::OpenArgs;
use crate::config::{ModelChoice, RunConfig, RunInputs};
use crate::report::thresholds::{Comparison, Metric, Threshold};
use crate::runner::{run, RunError, RunOutcome};
use crate::scenario::schema::{
    Dur, ModelSpec, OpenSpec, DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_LATENESS,
};
use crate::stop::{ExitReason, StopSignal};
use crate::sysmon::ClientSummary;
use crate::verdict::rows::LevelRows;
use crate::verdict::{SloVerdict, Strength, Verdict};

/// A level is stopped at once when this share of its requests failed...
pub const ABORT_ERROR_SHARE: f64 = 0.05;
/// ... or a latency SLO's statistic is this many times its limit.
pub const ABORT_LATENCY_FACTOR: f64 = 10.0;
/// The longest cool-down a level's cut-off backlog extends to.
const MAX_BACKLOG_WAIT: Duration = Duration::from_secs(60);
/// How often a running level's closed segments are read for the abort check.
const WATCH_EVERY: Duration = Duration::from_millis(500);
/// Segments close this often during a level, so the watcher sees its rows early.
const SEGMENT_INTERVAL: Duration = Duration::from_secs(1);

/// What stopped a level (errors, client or server): the run verdict's causes.
pub use crate::verdict::Cause;

/// Why a running level was stopped at once, far past the SLO; capacity.json has its sentence.
#[derive(Debug, Clone, PartialEq)]
pub enum Abort {
    /// This share of the requests so far failed.
    Errors { failed_share: f64 },
    /// A latency SLO's percentile reached this, over [`ABORT_LATENCY_FACTOR`] × its limit.
    Latency {
        percentile: f64,
        value_ns: f64,
        limit_ns: f64,
    },
}

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Abort::Errors { failed_share } => {
                write!(f, "{:.1}% of requests failed", failed_share * 100.0)
            }
            Abort::Latency {
                percentile,
                value_ns,
                limit_ns,
            } => write!(
                f,
                "p{percentile} reached {}, over {ABORT_LATENCY_FACTOR}× the SLO's {}",
                crate::units::duration(*value_ns),
                crate::units::duration(*limit_ns)
            ),
        }
    }
}

impl Serialize for Abort {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// One percentile of latency from intended time, with its interval.
#[derive(Debug, Clone, Serialize)]
pub struct Percentile {
    pub quantile: f64,
    pub value_ns: Option<f64>,
    pub low_ns: Option<f64>,
    pub high_ns: Option<f64>,
}

/// One level, as capacity.json records it.
#[derive(Debug, Clone, Serialize)]
pub struct Level {
    pub step: Step,
    pub offered_rps: f64,
    /// Completions per second in the judged window.
    pub achieved_rps: f64,
    pub duration_s: f64,
    pub run_dir: PathBuf,
    pub requests: u64,
    /// Rows after the warm-up (all of them when the level stopped in its warm-up).
    pub judged_requests: u64,
    /// Judged rows that failed.
    pub judged_failed: u64,
    /// The statuses of failed responses (`"503"`), with their counts.
    pub failed_statuses: std::collections::BTreeMap<String, u64>,
    pub failed: u64,
    pub dropped: u64,
    pub late: u64,
    /// Requests still in flight after the level's `--grace`, cut off (`cancelled` rows): a
    /// real service may still be working through them when the next level starts.
    pub cut_in_flight: u64,
    /// The pause after this level before the next: `--cool-down`, or longer for the backlog
    /// `cut_in_flight` left (see [`Level::cool_down`]).
    pub cool_down_s: f64,
    /// p50, p90, p99 of latency from intended time over the judged rows.
    pub latency: Vec<Percentile>,
    pub slos: Vec<SloJudgement>,
    pub sustainability: Sustainability,
    /// Whether the client sent on time.
    pub schedule: Schedule,
    /// Why the level was stopped early; `None` when it ran its course.
    pub aborted: Option<Abort>,
    /// Ctrl-C or SIGTERM cut it short: it is recorded (its real `duration_s` and
    /// `requests`) but not judged.
    pub interrupted: bool,
    pub passed: bool,
    /// Some SLO's interval straddled its limit.
    pub uncertain: bool,
    /// Why it failed, each a sentence.
    pub reasons: Vec<String>,
    pub cause: Option<Cause>,
    /// The engine's client verdict for the run (run.json `client`).
    pub client_saturated: bool,
    pub server_shares_cores: bool,
}

/// What every level shares.
pub struct LevelPlan<'a> {
    /// The command line, read once: each level is a run made from it.
    pub inputs: &'a RunInputs,
    pub open: &'a OpenArgs,
    pub slos: &'a [Threshold],
    pub warmup: Duration,
    pub dir: PathBuf,
}

impl LevelPlan<'_> {
    /// The level's config: the user's target and workload, the open model at `rate_rps`.
    fn config(&self, name: &str, rate_rps: f64, duration: Duration) -> Result<RunConfig, RunError> {
        let spec = OpenSpec {
            rate: Some(rate_rps),
            duration: Some(Dur(duration)),
            stages: None,
            arrivals: self.open.arrivals.unwrap_or_default(),
            max_in_flight: self.open.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
            max_lateness: Dur(self.open.max_lateness.unwrap_or(DEFAULT_MAX_LATENESS)),
            send_window: self.open.send_window.map(Dur),
            warmup: Some(Dur(self.warmup)),
        };
        let model = ModelChoice::Spec(ModelSpec::Open(spec));
        let mut config = self.inputs.config(model, Some(&self.dir.join(name)))?;
        config.segment_interval = SEGMENT_INTERVAL;
        Ok(config)
    }

    /// Runs and judges one level.
    pub async fn run(
        &self,
        index: usize,
        rate_rps: f64,
        step: Step,
        duration: Duration,
        stop: &StopSignal,
    ) -> Result<Level, RunError> {
        let name = format!("level-{index:02}-{rate_rps}rps");
        let config = self.config(&name, rate_rps, duration)?;
        let lateness_ns = config.max_lateness_ns();
        let run_dir = self.dir.join(&name);
        let child = stop.child();
        let done = Arc::new(AtomicBool::new(false));
        let watcher = tokio::spawn(watch(
            run_dir.clone(),
            self.slos.to_vec(),
            child.clone(),
            done.clone(),
        ));
        let outcome = run(config, child).await;
        done.store(true, Ordering::Relaxed);
        let aborted = watcher.await.ok().flatten();
        let outcome = outcome?;
        let rows = LevelRows::read(&outcome.run_dir)
            .map_err(|reason| RunError::ReadBack {
                path: outcome.run_dir.clone(),
                reason,
            })?
            .or_warmup();
        let ran = Ran {
            step,
            rate_rps,
            duration,
            lateness_ns,
            aborted,
            interrupted: stop.is_draining(),
        };
        let level = self.judge(ran, &outcome, &rows);
        record_verdict(&outcome, &level)?;
        Ok(level)
    }

    fn judge(&self, ran: Ran, outcome: &RunOutcome, rows: &LevelRows) -> Level {
        let Ran {
            step,
            rate_rps,
            duration,
            lateness_ns,
            aborted,
            interrupted,
        } = ran;
        let slos: Vec<SloJudgement> = self
            .slos
            .iter()
            .map(|t| judge::judge_slo(t, rows))
            .collect();
        let open = outcome.summary.open.as_ref();
        let dropped = open.map_or(0, |o| o.dropped);
        let sustainability = judge::sustainability(rows, dropped, latency_reference(self.slos));
        let client = outcome.client.as_ref();
        let mut level = Level {
            step,
            offered_rps: rate_rps,
            achieved_rps: sustainability.achieved_rps,
            duration_s: duration.as_secs_f64(),
            run_dir: outcome.run_dir.clone(),
            requests: outcome.summary.requests,
            judged_requests: rows.judged.len() as u64,
            judged_failed: rows.judged.iter().filter(|s| s.failed).count() as u64,
            failed_statuses: outcome.summary.failed_statuses.clone(),
            failed: outcome.summary.failed,
            dropped,
            late: open.map_or(0, |o| o.late),
            cut_in_flight: outcome
                .summary
                .errors
                .get(crate::record::ErrorClass::Cancelled.as_str())
                .copied()
                .unwrap_or(0),
            cool_down_s: 0.0,
            latency: [0.5, 0.9, 0.99].map(|q| percentile(rows, q)).to_vec(),
            uncertain: slos.iter().any(|s| s.outcome == Outcome::Uncertain),
            slos,
            sustainability,
            schedule: judge::schedule(rows, lateness_ns),
            aborted,
            interrupted,
            passed: false,
            reasons: Vec::new(),
            cause: None,
            client_saturated: client.is_some_and(|c| c.saturated),
            server_shares_cores: client.is_some_and(|c| c.server_shares_cores),
        };
        if interrupted {
            level.duration_s = outcome.summary.wall_time_ns as f64 / 1e9;
            level.reasons.push(format!(
                "interrupted after {:.1} s of {:.0} s: not judged",
                level.duration_s,
                duration.as_secs_f64()
            ));
        } else {
            level.conclude(client, outcome.verdict.cause);
        }
        level
    }
}

/// Adds the level's verdict to its run.json (the document the run wrote, in memory): the
/// run's verdict (`verdict`), with the search's judgement of the level deciding the cause, so
/// that whatever reads the level's directory alone — `loadgen-analyze explain` — shows the
/// search's judgement of it rather than judging it again.
fn record_verdict(outcome: &RunOutcome, level: &Level) -> Result<Verdict, RunError> {
    let verdict = level_verdict(outcome.verdict.clone(), level);
    let mut run_json = outcome.run_json.clone();
    if let Some(fields) = run_json.as_object_mut() {
        let value = serde_json::to_value(&verdict).expect("plain data");
        fields.insert("verdict".to_string(), value);
    }
    let path = outcome.run_dir.join("run.json");
    crate::report::write_json_atomically(&path, &run_json)
        .map_err(|source| RunError::Write { path, source })?;
    Ok(verdict)
}

/// The run's verdict with the level's judgement deciding: a level that passed is `none`, one
/// that failed names its cause and the SLOs it crossed (never `none`), one cut short is not
/// judged. The run's own findings stay as evidence.
fn level_verdict(mut verdict: Verdict, level: &Level) -> Verdict {
    let crossed: Vec<String> = level
        .slos
        .iter()
        .filter(|s| s.outcome != Outcome::Pass)
        .map(|s| s.slo.clone())
        .collect();
    let (cause, strength, rule, summary) = if level.interrupted {
        let why = "not judged: the level was cut short by Ctrl-C or SIGTERM".to_string();
        (
            Cause::Inconclusive,
            Strength::Weak,
            "capacity.interrupted",
            why,
        )
    } else if level.passed {
        let why = "the level met every SLO and kept up with its schedule".to_string();
        (Cause::None, Strength::Strong, "capacity.passed", why)
    } else {
        let mut why = level.reasons.join("; ");
        if !crossed.is_empty() {
            why = format!("crossed {} — {why}", crossed.join(", "));
        }
        let cause = level.cause.unwrap_or(Cause::Server);
        (cause, Strength::Strong, "capacity.level", why)
    };
    let run_evidence = std::mem::take(&mut verdict.evidence);
    verdict.evidence = std::iter::once(summary.clone())
        .chain(level.reasons.iter().cloned())
        .chain(run_evidence.into_iter().skip(1))
        .collect();
    verdict.slos = Some(SloVerdict {
        passed: level.passed,
        crossed,
        judged: !level.interrupted,
    });
    (
        verdict.cause,
        verdict.strength,
        verdict.rule,
        verdict.summary,
    ) = (cause, strength, rule, summary);
    verdict.decided_by = "loadgen capacity";
    verdict
}

/// How a level ran, for its judgement.
struct Ran {
    step: Step,
    rate_rps: f64,
    duration: Duration,
    /// The open model's `max_lateness`, in ns.
    lateness_ns: i64,
    aborted: Option<Abort>,
    /// The user stopped the search during it.
    interrupted: bool,
}

impl Level {
    /// Whether an SLO's interval straddled its limit in a level that ran its course: it is
    /// run again, twice as long, rather than guessed (an extension itself is final).
    pub fn needs_extension(&self) -> bool {
        self.uncertain && self.aborted.is_none() && !self.interrupted && self.step != Step::Extend
    }

    /// How long to wait before the next level: `cool_down`, or longer when requests were cut
    /// off in flight — the time the service, at the rate it completed this level's requests,
    /// needs to finish them (capped at `MAX_BACKLOG_WAIT`).
    pub fn cool_down(&self, cool_down: Duration) -> Duration {
        backlog_cool_down(cool_down, self.cut_in_flight, self.achieved_rps)
    }

    /// Sets `reasons`, `passed` and `cause` from the judgements. An uncertain SLO fails
    /// the level here; the caller extends an uncertain level before it takes that verdict.
    /// The client is the cause when the engine found it saturated, or when it did not keep
    /// the schedule — only the client delays an open-model send, and a client starved by
    /// other processes shows neither high CPU nor throttling, only late sends. `client`
    /// (the engine's verdict on it) describes the client's CPU for the evidence. A level that
    /// failed with neither is the server's, unless the run's own verdict (`run_cause`) found
    /// the network the limit (a full link, bodies dominating latency).
    fn conclude(&mut self, client: Option<&ClientSummary>, run_cause: Cause) {
        let mut errors = false;
        if let Some(abort) = &self.aborted {
            errors |= matches!(abort, Abort::Errors { .. });
            self.reasons.push(format!("stopped early: {abort}"));
        }
        let failed_share = self.judged_failed as f64 / self.judged_requests.max(1) as f64;
        if failed_share > judge::achieved_shortfall() {
            // More failed than the achieved rate may fall short by: what the service
            // rejected or lost, not what it was slow to serve.
            errors = true;
            self.reasons.push(format!(
                "{:.1}% of its requests failed{}",
                failed_share * 100.0,
                statuses_text(&self.failed_statuses)
            ));
        }
        for slo in &self.slos {
            let crossed = match slo.outcome {
                Outcome::Pass => continue,
                Outcome::Fail => "crossed",
                Outcome::Uncertain => "could not be told apart from its limit",
            };
            errors |= slo.unit == "fraction";
            self.reasons
                .push(format!("{} {crossed}: {}", slo.slo, observed_text(slo)));
        }
        self.reasons
            .extend(self.sustainability.problems.iter().cloned());
        self.passed = self.reasons.is_empty();
        self.cause = (!self.passed).then_some(if errors {
            Cause::Errors
        } else if self.client_saturated || !self.schedule.kept {
            Cause::Client
        } else if run_cause == Cause::Network {
            Cause::Network
        } else {
            Cause::Server
        });
        if self.cause == Some(Cause::Client) {
            let client = client.map_or_else(
                || "its CPU was not sampled".to_string(),
                ClientSummary::console_line,
            );
            self.reasons.push(format!(
                "the client {}: {client}",
                if self.schedule.kept {
                    "kept its schedule but was saturated".to_string()
                } else {
                    format!(
                        "did not keep its schedule ({:.0}% of sends started more than {} \
                         late, p99 send lag {})",
                        self.schedule.late_share * 100.0,
                        crate::units::duration(self.schedule.max_lateness_ns as f64),
                        self.schedule
                            .send_lag_p99_ns
                            .map_or("-".to_string(), crate::units::duration)
                    )
                }
            ));
        }
    }
}

/// " (503 ×412, 500 ×3)": the statuses of failed responses, most first; empty without any.
fn statuses_text(statuses: &std::collections::BTreeMap<String, u64>) -> String {
    let mut by_count: Vec<(&String, &u64)> = statuses.iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(a.1));
    let parts: Vec<String> = by_count
        .iter()
        .map(|(status, n)| format!("{status} ×{n}"))
        .collect();
    match parts.is_empty() {
        true => String::new(),
        false => format!(" ({})", parts.join(", ")),
    }
}

/// "observed 61.2ms (95% CI 55.0ms–70.1ms)".
pub fn observed_text(slo: &SloJudgement) -> String {
    let show = |value: f64| match slo.unit {
        "ns" => crate::units::duration(value),
        "fraction" => format!("{:.2}%", value * 100.0),
        _ => format!("{value:.1}/s"),
    };
    match (slo.observed, slo.low, slo.high) {
        (None, ..) => "nothing measured".to_string(),
        (Some(v), Some(low), Some(high)) if low < high => format!(
            "observed {} ({:.0}% CI {}–{})",
            show(v),
            judge::CONFIDENCE * 100.0,
            show(low),
            show(high)
        ),
        (Some(v), ..) => format!("observed {}", show(v)),
    }
}

fn percentile(rows: &LevelRows, quantile: f64) -> Percentile {
    let slo: Threshold = format!("p{}<1000s", quantile * 100.0)
        .parse()
        .expect("a valid percentile");
    let judged = judge::judge_slo(&slo, rows);
    Percentile {
        quantile,
        value_ns: judged.observed,
        low_ns: judged.low,
        high_ns: judged.high,
    }
}

/// The tightest upper limit on latency among the SLOs: what latency growth is measured against.
fn latency_reference(slos: &[Threshold]) -> Option<f64> {
    slos.iter()
        .filter(|t| !matches!(t.metric, Metric::ErrorRate | Metric::Throughput))
        .filter(|t| matches!(t.comparison, Comparison::Below | Comparison::AtMost))
        .map(|t| t.limit)
        .reduce(f64::min)
}

/// Reads the level's closed segments every [`WATCH_EVERY`] until `done`, and stops the level
/// (drains `stop`) when its requests blow far past the SLO; returns why it stopped it.
async fn watch(
    run_dir: PathBuf,
    slos: Vec<Threshold>,
    stop: StopSignal,
    done: Arc<AtomicBool>,
) -> Option<Abort> {
    while !done.load(Ordering::Relaxed) {
        tokio::time::sleep(WATCH_EVERY).await;
        let dir = run_dir.clone();
        let Ok(Ok(rows)) = tokio::task::spawn_blocking(move || LevelRows::read(&dir)).await else {
            continue;
        };
        if let Some(why) = blow_up(&rows, &slos) {
            stop.drain(ExitReason::DurationElapsed);
            return Some(why);
        }
    }
    None
}

/// Why the rows so far are far past the SLO, if they are.
fn blow_up(rows: &LevelRows, slos: &[Threshold]) -> Option<Abort> {
    let all: Vec<_> = rows.warmup.iter().chain(&rows.judged).collect();
    if all.len() < 20 {
        return None;
    }
    let failed = all.iter().filter(|s| s.failed).count() as f64 / all.len() as f64;
    let error_limit = slos
        .iter()
        .filter(|t| t.metric == Metric::ErrorRate)
        .map(|t| t.limit * 2.0)
        .fold(ABORT_ERROR_SHARE, f64::max);
    if failed > error_limit {
        return Some(Abort::Errors {
            failed_share: failed,
        });
    }
    let mut latencies: Vec<i64> = all
        .iter()
        .filter(|s| s.responded)
        .map(|s| s.from_intended_ns)
        .collect();
    for slo in slos {
        let Metric::Percentile(q) = slo.metric else {
            continue;
        };
        if latencies.is_empty() || matches!(slo.comparison, Comparison::Above | Comparison::AtLeast)
        {
            continue;
        }
        let value = judge::quantile(&mut latencies, q / 100.0) as f64;
        if value > ABORT_LATENCY_FACTOR * slo.limit {
            return Some(Abort::Latency {
                percentile: q,
                value_ns: value,
                limit_ns: slo.limit,
            });
        }
    }
    None
}

/// `cool_down`, or the time `cut_in_flight` requests take at `achieved_rps` when longer (at
/// most [`MAX_BACKLOG_WAIT`]; a level that completed almost nothing counts as 1 req/s).
fn backlog_cool_down(cool_down: Duration, cut_in_flight: u64, achieved_rps: f64) -> Duration {
    if cut_in_flight == 0 {
        return cool_down;
    }
    let backlog_s = cut_in_flight as f64 / achieved_rps.max(1.0);
    cool_down.max(Duration::from_secs_f64(backlog_s).min(MAX_BACKLOG_WAIT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_off_backlog_lengthens_the_cool_down_by_its_drain_time() {
        let two_s = Duration::from_secs(2);
        assert_eq!(backlog_cool_down(two_s, 0, 10.0), two_s);
        // 400 requests at 50 req/s: 8 s of the service's work.
        assert_eq!(backlog_cool_down(two_s, 400, 50.0), Duration::from_secs(8));
        // A backlog shorter than the cool-down changes nothing.
        assert_eq!(backlog_cool_down(two_s, 10, 50.0), two_s);
        // A level that completed nothing: 1 req/s, and never more than a minute.
        assert_eq!(backlog_cool_down(two_s, 30, 0.0), Duration::from_secs(30));
        assert_eq!(backlog_cool_down(two_s, 1_000, 1.0), MAX_BACKLOG_WAIT);
    }
}
