//! Step five of a run: judge. The one judge ([`verdict::decide`]) on every fact the run
//! measured — the summary, the responses' time, the client's CPU, an open run's schedule, a
//! capacity level's SLOs, the server's scrapes — and, once the probe at one connection has
//! run (`probe`, a stage of its own), on its R(1) too; and the user's thresholds on the
//! run's exact aggregates. A spread run's finish (`merged`) and the live page (`live_page`)
//! call the same judge.

use super::measure::Measured;
use super::probe::Probe;
use crate::config::RunConfig;
use crate::report::thresholds::{self, ThresholdResult};
use crate::report::RunSummary;
use crate::sysmon::ClientSummary;
use crate::verdict::{self, Judged, ServerEvidence, Verdict};

/// What the run was judged: the verdict, and each threshold.
pub(super) struct Judgement {
    pub verdict: Verdict,
    pub thresholds: Vec<ThresholdResult>,
}

/// The run's judgement on what it measured, before any probe.
pub(super) fn judge(config: &RunConfig, measured: &Measured) -> Judgement {
    let verdict = verdict(config, measured, None);
    let stats = &measured.report.stats;
    let thresholds = thresholds::evaluate(&config.thresholds, stats, &measured.summary);
    Judgement {
        verdict,
        thresholds,
    }
}

/// The run's verdict on what it measured, with the probe's R(1) when it ran.
pub(super) fn verdict(config: &RunConfig, measured: &Measured, probe: Option<&Probe>) -> Verdict {
    let facts = (
        &measured.summary,
        &measured.report.stats.components,
        &measured.judged,
        probe,
    );
    decide_verdict(config, facts, &measured.client, measured.server.clone())
}

/// The run's verdict from every fact the engine holds: the summary, the responses' time, the
/// client's CPU, an open run's schedule, a capacity level's SLOs, the server's scrapes, the
/// probe at one connection.
pub(super) fn decide_verdict(
    config: &RunConfig,
    (summary, components, judged, probe): (
        &RunSummary,
        &crate::stats::Components,
        &Judged,
        Option<&Probe>,
    ),
    client: &Option<ClientSummary>,
    server: Option<ServerEvidence>,
) -> Verdict {
    let decided_by = config.judgement.decided_by();
    let mut verdict = verdict::decide(verdict::Facts {
        summary,
        components,
        client: client.as_ref(),
        streams: config.connection.multiplexed(),
        open: judged.open.clone(),
        server,
        level: judged.level.as_ref(),
        decided_by,
        probe_r1_ns: probe.map(|p| p.r1_ns),
    });
    if let Some(probe) = probe {
        probe.add_to(&mut verdict);
    }
    verdict
}
