//! Everything the judge reads, in one value ([`Facts`]): the run's summary, where its
//! responses' time went, the client's and the server's evidence, an open run's schedule, a
//! capacity level's SLOs, the probe's R(1). The checks read it; the judge
//! ([`super::decide()`]) takes it. What the judge needs from the rows beyond the summary it
//! gathers itself ([`Judged::gather`]): the runner hands it the rows, not its conclusions.

use super::schedule::{self, Schedule, Sustainability};
use super::server::ServerEvidence;
use super::slo::{self, Abort, LevelFacts};
use crate::report::thresholds::Threshold;
use crate::report::{OpenSummary, RunSummary};
use crate::stats::samples::LevelRows;
use crate::stats::Components;
use crate::sysmon::ClientSummary;

/// Everything the verdict reads.
pub struct Facts<'a> {
    pub summary: &'a RunSummary,
    pub components: &'a Components,
    pub client: Option<&'a ClientSummary>,
    /// Requests went as streams on shared connections (HTTP/2, HTTP/3): a wait to send is
    /// the client's wait for a stream or flow-control window, not a TCP send buffer
    /// (`client.http2_streams`, never `network.send`).
    pub streams: bool,
    /// Open model: how the run kept its schedule, from its rows.
    pub open: Option<(Schedule, Sustainability)>,
    pub server: Option<ServerEvidence>,
    /// A capacity level: its SLOs judged, whether it was stopped early or cut short.
    pub level: Option<&'a LevelFacts>,
    pub decided_by: &'static str,
    /// `--probe`'s R(1), the median at one connection after the level: a second sign of
    /// queueing beside the level's fastest response.
    pub probe_r1_ns: Option<f64>,
}

/// What a run's judgement saw beyond its summary.
#[derive(Debug, Clone, Default)]
pub struct Judged {
    /// Every row's sample, when kept (an open run; a workflow that asked).
    pub rows: Option<LevelRows>,
    /// An open run: whether the client kept its schedule and the system kept up.
    pub open: Option<(Schedule, Sustainability)>,
    /// A capacity level: its SLOs judged, whether it was stopped early or cut short.
    pub level: Option<LevelFacts>,
}

/// What a capacity level hands the judge: its SLOs, why its watch stopped it (if it did),
/// whether a signal cut it short.
pub struct LevelSlos<'a> {
    pub slos: &'a [Threshold],
    pub aborted: Option<Abort>,
    pub interrupted: bool,
}

impl Judged {
    /// What the judgement needs beyond the summary, from the samples the writer kept: an open
    /// run's schedule and sustainability (against the level's latency reference: its tightest
    /// latency SLO, else the run's median), and a capacity level's SLOs.
    pub fn gather(
        rows: Option<LevelRows>,
        open: Option<&OpenSummary>,
        level: Option<LevelSlos<'_>>,
    ) -> Judged {
        let rows = rows.map(LevelRows::or_warmup);
        let open = open.zip(rows.as_ref()).map(|(open, rows)| {
            let reference = level.as_ref().and_then(|l| slo::latency_reference(l.slos));
            (
                schedule::schedule(rows, open.max_lateness_ns),
                schedule::sustainability(rows, open.dropped, reference),
            )
        });
        let level = level.map(|spec| LevelFacts {
            slos: rows.as_ref().map_or_else(Vec::new, |rows| {
                spec.slos.iter().map(|t| slo::judge_slo(t, rows)).collect()
            }),
            outage: rows.as_ref().and_then(slo::outage),
            aborted: spec.aborted,
            interrupted: spec.interrupted,
        });
        Judged { rows, open, level }
    }
}
