//! The probe: once a closed single-phase level has ended, a short run at one connection to
//! the same target with the same requests — at most `config::PROBE_REQUESTS` requests and
//! `config::PROBE_TIME` — through the same runner and worker loop. Its median is R(1), the
//! response time with nothing else in flight; the level's median against it (R(N)/R(1)) is
//! run.json's `probe` and a second sign of queueing for the verdict (`verdict::queueing`).
//! It runs by default where the level's verdict rests on its latency alone, after any level
//! with `--probe`, never with `--no-probe`. Its rows go to a temporary directory that is
//! removed: they are never the run's requests (the server counts them, the run does not). A
//! Ctrl-C during it cuts it short, and it is then left out.

use std::path::PathBuf;

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
    pub failed: u64,
    /// Median response time at one connection: R(1).
    pub r1_ns: f64,
    /// The level's median response time.
    pub level_median_ns: f64,
    /// `level_median_ns / r1_ns`: R(N)/R(1).
    pub latency_ratio: f64,
}

impl Probe {
    /// The console's line: "1 connection, 50 requests: median 10.1 ms; the level's 41 ms is
    /// 4.1× that".
    pub fn line(&self) -> String {
        format!(
            "1 connection after the level, {} (not the run's): median {}; the level's median \
             {} is {:.1}× that",
            crate::units::count(self.requests, "request"),
            crate::units::duration(self.r1_ns),
            crate::units::duration(self.level_median_ns),
            self.latency_ratio
        )
    }
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

/// The probe `config` plans, once a level that ended as planned is over and where `verdict`
/// (the level's, without it) could change by it; `stop` is the run's, whose next signal cuts
/// the probe short.
pub(super) async fn after(
    config: &mut RunConfig,
    (exit_reason, stop): (ExitReason, &StopSignal),
    level: &RunSummary,
    verdict: &Verdict,
    warnings: &mut Vec<String>,
) -> Option<Probe> {
    let ended = matches!(
        exit_reason,
        ExitReason::Completed | ExitReason::DurationElapsed
    );
    let wanted = |always: bool| always || verdict.rule.probe_can_tell();
    let probe = config.probe.take().filter(|p| ended && wanted(p.always));
    measure(*probe?.config, level, stop, warnings).await
}

/// Runs the probe once the level is over; `None` (with a warning) when it could not run, had
/// no successful response or was cut short by a signal. Its directory is removed. It has its
/// own stop signal (the run's is already draining once its `-d` has elapsed), aborted at the
/// run's next signal.
async fn measure(
    config: RunConfig,
    level: &RunSummary,
    stop: &StopSignal,
    warnings: &mut Vec<String>,
) -> Option<Probe> {
    let level_median_ns = median_ns(level)?;
    let dir: Option<PathBuf> = match &config.output.out {
        Output::Dir(dir) => Some(dir.clone()),
        _ => None,
    };
    let own = StopSignal::new();
    let forward = {
        let (run, probe) = (stop.clone(), own.clone());
        tokio::spawn(async move {
            run.next_signal().await;
            probe.abort();
        })
    };
    let outcome = Box::pin(super::run(config, own.clone())).await;
    forward.abort();
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    let summary = match outcome {
        Ok(_) if own.is_aborting() => {
            warnings.push("the probe at one connection was cut short by a signal".into());
            return None;
        }
        Ok(outcome) => outcome.summary,
        Err(e) => {
            warnings.push(format!("the probe at one connection did not run: {e}"));
            return None;
        }
    };
    let r1_ns = median_ns(&summary)?;
    Some(Probe {
        requests: summary.requests,
        failed: summary.failed,
        r1_ns,
        level_median_ns,
        latency_ratio: level_median_ns / r1_ns,
    })
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
