//! Step four of a run: measure. Once the load is over, read the client monitor's verdict and
//! the server's scrapes, wait for the writer to close the last segment, derive the summary
//! from the exact aggregates and hand the judge the rows it reads beyond the summary. Nothing
//! is decided here: [`Measured`] is the facts, for the judge and the record.

use std::path::Path;
use std::sync::Arc;

use super::target::PreparedTarget;
use super::RunError;
use crate::config::RunConfig;
use crate::record::Labels;
use crate::report::RunSummary;
use crate::servermon::{Scrapes, ServerMon, ServerMonError};
use crate::stats::tcp::TcpTotals;
use crate::stats::LiveCounters;
use crate::stop::{ExitReason, StopSignal};
use crate::store::writer::{RecordError, WriterReport, WriterThread};
use crate::sysmon::{ClientSummary, Sysmon, SysmonError};
use crate::verdict::slo;
use crate::verdict::{self, Judged, LevelSlos, ServerEvidence};

/// What the services leave the measurement once the load is over (`Services::stop`): the
/// counters, the monitors and the level's watch.
pub(super) struct Stopped {
    pub live: Arc<LiveCounters>,
    pub sysmon: Result<Sysmon, SysmonError>,
    /// The `--server-metrics` scraper, when there are endpoints to scrape.
    pub servermon: Option<Result<ServerMon, ServerMonError>>,
    /// A capacity level's watcher: why it stopped the level early, if it did (it ends when
    /// the writer has handed over its last samples).
    pub level_watch: Option<tokio::task::JoinHandle<Option<slo::Abort>>>,
}

/// What a run measured, once its load is over.
pub(super) struct Measured {
    pub summary: RunSummary,
    /// The writer's account: its exact aggregates, its segments, its rows on disk.
    pub report: WriterReport,
    /// The engine's verdict on the client; `None` when not sampled.
    pub client: Option<ClientSummary>,
    /// What the server's scrapes say, when it was scraped.
    pub server: Option<ServerEvidence>,
    /// What the judge read from the rows beyond the summary.
    pub judged: Judged,
    pub exit_reason: ExitReason,
}

impl Measured {
    /// Collects the facts of a run whose load is over; warnings (a monitor that failed, a
    /// source not scraped) join `warnings`.
    pub async fn collect(
        config: &RunConfig,
        (target, writer, labels): (&PreparedTarget, WriterThread, &Labels),
        (stopped, tcp): (Stopped, &Arc<TcpTotals>),
        (run_dir, stop): (&Path, &StopSignal),
        warnings: &mut Vec<String>,
    ) -> Result<Self, RunError> {
        let client = client_summary(target, (stopped.sysmon, tcp), warnings);
        let scrapes = stopped.servermon.map(|s| server_scrapes(s, warnings));
        let server = server_evidence(config, scrapes, warnings);
        let mut report = wait_for_writer(writer, run_dir).await?;
        let aborted = watched_to_the_end(stopped.level_watch).await;
        let exit_reason = stop.reason().unwrap_or(ExitReason::Completed);
        let counted = (&*stopped.live, &report.stats, labels);
        let mut summary = RunSummary::of_run(config.model.plan(), counted, i64::MAX);
        if !config.output.histogram {
            summary.latency_histogram = None;
        }
        let level = config.judgement.level.as_ref().map(|spec| LevelSlos {
            slos: &spec.slos,
            aborted,
            interrupted: matches!(
                exit_reason,
                ExitReason::Interrupted | ExitReason::Terminated
            ),
        });
        let judged = Judged::gather(report.samples.take(), summary.open.as_ref(), level);
        Ok(Measured {
            summary,
            report,
            client,
            server,
            judged,
            exit_reason,
        })
    }
}

/// Waits for the writer thread to close the last segment; a writer that failed leaves the
/// segments closed before the failure, and the error says how many.
async fn wait_for_writer(writer: WriterThread, run_dir: &Path) -> Result<WriterReport, RunError> {
    tokio::task::spawn_blocking(move || writer.finish())
        .await
        .map_err(|_| RecordError::Panicked)?
        .map_err(|source| {
            let dir = run_dir.join("requests");
            RunError::RecordsLost {
                kept: complete_segments(&dir),
                dir,
                source,
            }
        })
}

/// Why a capacity level's watcher stopped it, if it did; it ends once the writer is done,
/// having seen every sample.
async fn watched_to_the_end(
    watch: Option<tokio::task::JoinHandle<Option<slo::Abort>>>,
) -> Option<slo::Abort> {
    match watch {
        Some(watch) => watch.await.ok().flatten(),
        None => None,
    }
}

/// What the server's scrapes say, for the verdict; a `--server-saturation` gauge that
/// matched no series, or several, is said in `warnings`, not read.
fn server_evidence(
    config: &RunConfig,
    scrapes: Option<Scrapes>,
    warnings: &mut Vec<String>,
) -> Option<ServerEvidence> {
    let saturation = &config.evidence.server_metrics.saturation;
    let mut server = scrapes.and_then(|s| ServerEvidence::of(&s.rows, saturation));
    warnings.extend(
        server
            .as_mut()
            .map(|s| std::mem::take(&mut s.notes))
            .unwrap_or_default(),
    );
    server
}

/// The client monitor's verdict, with who shares the client's cores and the link capacity;
/// its warning (a saturated client) joins the run's.
fn client_summary(
    target: &PreparedTarget,
    (sysmon, tcp): (Result<Sysmon, SysmonError>, &Arc<TcpTotals>),
    warnings: &mut Vec<String>,
) -> Option<ClientSummary> {
    match sysmon.and_then(|s| s.finish()) {
        Ok(mut client) => {
            client.tcp = tcp.summary();
            verdict::client::judge(&mut client);
            client.set_shared_with(target.server_on_this_machine());
            (client.link_capacity_bps, client.link_capacity_source) = target.link;
            Some(client)
        }
        Err(e) => {
            warnings.push(format!("no client metrics: {e}"));
            None
        }
    }
}

/// What the `--server-metrics` scraper did: its rows for the verdict, and a warning for each
/// source that failed some scrapes (or for the scraper itself).
fn server_scrapes(
    servermon: Result<ServerMon, ServerMonError>,
    warnings: &mut Vec<String>,
) -> Scrapes {
    match servermon.and_then(|s| s.finish()) {
        Ok(scrapes) => {
            warnings.extend(scrapes.sources.iter().filter(|s| s.failures > 0).map(|s| {
                format!(
                    "server metrics: {} of {} scrapes of {} failed (rows with an error in server-metrics.parquet)",
                    s.failures, s.scrapes, s.source
                )
            }));
            scrapes
        }
        Err(e) => {
            warnings.push(format!("no server metrics: {e}"));
            Scrapes::default()
        }
    }
}

/// Complete segments (not the hidden `.partial` one) in `dir`.
fn complete_segments(dir: &Path) -> usize {
    crate::store::segments(dir).map_or(0, |segments| segments.len())
}
