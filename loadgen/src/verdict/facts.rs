//! Everything the judge reads, in one value ([`Facts`]): the run's summary, where its
//! responses' time went, the client's and the server's evidence, an open run's schedule, a
//! capacity level's SLOs, the probe's R(1). The checks read it; the judge
//! ([`super::decide()`]) takes it.

use super::schedule::{Schedule, Sustainability};
use super::server::ServerEvidence;
use super::slo::LevelFacts;
use crate::report::RunSummary;
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
