//! The probe: once a closed single-phase level has ended, a short run at one connection to
//! the same target with the same requests — at most `config::PROBE_REQUESTS` requests and
//! `config::PROBE_TIME` — through the same runner and worker loop. The median of its
//! successful responses is R(1), the response time with nothing else in flight; the level's
//! median against it (R(N)/R(1)) is run.json's `probe` and a second sign of queueing for the
//! verdict (`verdict::queueing`). It runs by default where the level's verdict rests on its
//! latency alone and every request the level sends is safe to repeat (GET, HEAD, OPTIONS),
//! after any level of more than one connection with `--probe`, never with `--no-probe`. Its
//! rows go to a temporary directory that is removed: they are never the run's requests (the
//! server counts them, the run does not). A Ctrl-C or SIGTERM during it cuts it short and is
//! the run's exit reason.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::config::{Output, RunConfig};
use crate::report::RunSummary;
use crate::stop::{ExitReason, StopSignal};
use crate::verdict::Verdict;

/// What the probe measured (run.json `probe`).
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// Requests the probe sent (the server counted them; the run's rows do not hold them).
    pub requests: u64,
    /// Of them, failed: left out of R(1).
    pub failed: u64,
    /// What it sent: requests by op (`GET /albums/1`).
    pub ops: BTreeMap<String, u64>,
    /// Median response time of its successful requests at one connection: R(1).
    pub r1_ns: f64,
    /// The level's median response time.
    pub level_median_ns: f64,
    /// `level_median_ns / r1_ns`: R(N)/R(1).
    pub latency_ratio: f64,
}

impl Probe {
    /// The console's line: "1 connection after the level, 50 requests (GET /albums/1: 50;
    /// not the run's): median 10.1 ms; the level's median 41 ms is 4.1× that".
    pub fn line(&self) -> String {
        let failed = match self.failed {
            0 => String::new(),
            n => format!(", {n} failed and left out"),
        };
        format!(
            "1 connection after the level, {} ({}; not the run's){failed}: median {}; the \
             level's median {} is {:.1}× that",
            crate::units::count(self.requests, "request"),
            sent(&self.ops),
            crate::units::duration(self.r1_ns),
            crate::units::duration(self.level_median_ns),
            self.latency_ratio
        )
    }
}

/// "GET /albums/1: 50, HEAD /: 3".
fn sent(ops: &BTreeMap<String, u64>) -> String {
    let each: Vec<String> = ops.iter().map(|(op, n)| format!("{op}: {n}")).collect();
    each.join(", ")
}

impl Probe {
    /// The probe in the verdict's evidence and numbers (`probe_r1_ns`,
    /// `probe_latency_ratio`); the decision itself reads it in `verdict::queueing`.
    pub fn add_to(&self, verdict: &mut Verdict) {
        verdict.evidence.push(format!("probe: {}", self.line()));
        verdict.numbers.insert("probe_r1_ns", self.r1_ns);
        verdict
            .numbers
            .insert("probe_latency_ratio", self.latency_ratio);
    }
}

/// What came of the probe: its figures, if it measured R(1), and the signal that cut it
/// short, if one did (the run then exits as signalled).
pub(super) struct Probed {
    pub probe: Option<Probe>,
    pub signal: Option<ExitReason>,
}

/// The probe `config` plans, once a level that ended as planned is over and where `verdict`
/// (the level's, without it) could change by it; `stop` is the run's, whose next signal cuts
/// the probe short. One withheld by default (requests not safe to repeat) is said instead.
pub(super) async fn after(
    config: &mut RunConfig,
    (exit_reason, stop): (ExitReason, &StopSignal),
    (level, verdict): (&RunSummary, &Verdict),
    warnings: &mut Vec<String>,
) -> Probed {
    let nothing = Probed {
        probe: None,
        signal: None,
    };
    let ended = matches!(
        exit_reason,
        ExitReason::Completed | ExitReason::DurationElapsed
    );
    let Some(probing) = config.probe.take() else {
        return nothing;
    };
    if !ended || !(probing.always || verdict.rule.probe_can_tell()) {
        return nothing;
    }
    if let (false, Some(what)) = (probing.always, &probing.withheld) {
        warnings.push(format!(
            "no probe at one connection after the level: the level sends {what}, and sending \
             up to {} of them again may change data; --probe sends it anyway",
            crate::config::PROBE_REQUESTS
        ));
        return nothing;
    }
    measure(*probing.config, level, stop, warnings).await
}

/// Runs the probe once the level is over; no figures (with a warning) when it could not run,
/// had no successful response or was cut short by a signal. Its directory is removed. It has
/// its own stop signal (the run's is already draining once its `-d` has elapsed), aborted at
/// the run's next signal.
async fn measure(
    config: RunConfig,
    level: &RunSummary,
    stop: &StopSignal,
    warnings: &mut Vec<String>,
) -> Probed {
    let mut probed = Probed {
        probe: None,
        signal: None,
    };
    let Some(level_median_ns) = median_ns(level) else {
        return probed;
    };
    let dir: Option<PathBuf> = match &config.output.out {
        Output::Dir(dir) => Some(dir.clone()),
        _ => None,
    };
    let own = StopSignal::new();
    let signalled: Arc<Mutex<Option<ExitReason>>> = Arc::default();
    let forward = {
        let (run, probe, seen) = (stop.clone(), own.clone(), signalled.clone());
        tokio::spawn(async move {
            let reason = run.next_signal().await;
            *seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
            probe.abort();
        })
    };
    let outcome = Box::pin(super::run(config, own.clone())).await;
    forward.abort();
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    probed.signal = *signalled.lock().unwrap_or_else(|e| e.into_inner());
    let outcome = match outcome {
        Ok(_) if probed.signal.is_some() => {
            warnings.push("the probe at one connection was cut short by a signal".into());
            return probed;
        }
        Ok(outcome) => outcome,
        Err(e) => {
            warnings.push(format!("the probe at one connection did not run: {e}"));
            return probed;
        }
    };
    let summary = &outcome.summary;
    let ops: BTreeMap<String, u64> = summary
        .ops
        .iter()
        .filter(|op| op.requests > 0)
        .map(|op| (op.op.clone(), op.requests))
        .collect();
    let r1_ns = outcome
        .judged
        .rows
        .as_ref()
        .and_then(|rows| rows.successful_median_ns())
        .filter(|&r1| r1 > 0.0);
    let Some(r1_ns) = r1_ns else {
        warnings.push(format!(
            "the probe at one connection sent {} ({}) and none succeeded ({}): R(1) is not \
             measured from failures, and the verdict goes without it",
            crate::units::count(summary.requests, "request"),
            sent(&ops),
            failures(summary)
        ));
        return probed;
    };
    probed.probe = Some(Probe {
        requests: summary.requests,
        failed: summary.failed,
        ops,
        r1_ns,
        level_median_ns,
        latency_ratio: level_median_ns / r1_ns,
    });
    probed
}

/// "http_status 503: 50", "cancelled: 1": the probe's failures by class (and status).
fn failures(summary: &RunSummary) -> String {
    let mut each: Vec<String> = Vec::new();
    for (class, n) in &summary.errors {
        match class.as_str() {
            "http_status" => each.extend(
                summary
                    .failed_statuses
                    .iter()
                    .map(|(status, n)| format!("http_status {status}: {n}")),
            ),
            _ => each.push(format!("{class}: {n}")),
        }
    }
    match each.is_empty() {
        true => "no response".to_string(),
        false => each.join(", "),
    }
}

/// The median response of a run of one phase (the level's, the probe's).
fn median_ns(summary: &RunSummary) -> Option<f64> {
    match &summary.phases[..] {
        [phase] => phase
            .latency
            .as_ref()
            .filter(|l| l.p50_ns > 0)
            .map(|l| l.p50_ns as f64),
        _ => None,
    }
}
