//! Step four of a run: finish. Read the client monitor's verdict, wait for the writer to close
//! the last segment, derive the summary from the exact aggregates, write run.json, upload to
//! S3 when asked, and render the console table.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::drive::Driven;
use super::output::RunOutput;
use super::probe::Probe;
use super::run_json::{write_run_json, RecordsInfo, RunJson};
use super::target::PreparedTarget;
use super::{RunError, RunJsonExtra};
use crate::config::RunConfig;
use crate::model::Limit;
use crate::record::Labels;
use crate::report::dashboard::{Dashboard, FinalDashboard};
use crate::report::metrics::FinalMetrics;
use crate::report::thresholds::{self, ThresholdResult};
use crate::report::{console, latency, OpenSummary, RunSummary, WorkersSummary};
use crate::servermon::{Scrapes, ServerMon, ServerMonError};
use crate::stats::samples::LevelRows;
use crate::stats::LiveCounters;
use crate::stop::{ExitReason, StopSignal};
use crate::store::s3::{Mirror, S3Store, Uploaded};
use crate::store::writer::{RecordError, WriterReport, WriterThread};
use crate::sysmon::{ClientSummary, Sysmon, SysmonError};
use crate::verdict::schedule::{self, Schedule, Sustainability};
use crate::verdict::slo::{self, LevelFacts};
use crate::verdict::{self, ServerEvidence, Verdict};

/// What a finished run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The local run directory (with `--out s3://`, the staging directory, removed once
    /// everything is uploaded).
    pub run_dir: PathBuf,
    /// Where the results are: the run directory, or its `s3://` URL.
    pub location: String,
    /// Files that could not be uploaded to S3, with why (they stay in `run_dir`).
    pub upload_failures: Vec<String>,
    /// The signal that stopped the upload to S3, if one did: the run exits as signalled.
    pub upload_stopped_by: Option<ExitReason>,
    pub run_id: String,
    pub summary: RunSummary,
    pub exit_reason: ExitReason,
    /// The console table, as printed when `--json` is not given.
    pub console: String,
    /// What the judgement saw beyond the summary, handed on in memory: the rows' samples (an
    /// open run, or when the config asked), the schedule, a capacity level's SLOs.
    pub judged: Judged,
    /// Each threshold judged against the run.
    pub thresholds: Vec<ThresholdResult>,
    /// The engine's verdict on the client (run.json `client`); `None` when not sampled.
    pub client: Option<ClientSummary>,
    /// The run's verdict (run.json `verdict`, the console's Verdict line).
    pub verdict: Verdict,
    /// The live metrics endpoint, still serving the final counts (`--metrics-addr`).
    pub metrics: Option<FinalMetrics>,
    /// The page, still serving the final figures (`--dashboard`).
    pub dashboard: Option<FinalDashboard>,
    /// What a process of a spread run hands its parent (`workflow::spread`): the exact
    /// aggregates the summary came from, the anchor their times count from, the rows on disk.
    pub aggregates: crate::stats::Aggregator,
    pub anchor_unix_ns: i64,
    pub records: RecordsInfo,
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

impl RunOutcome {
    /// Keeps the metrics endpoint serving the final counts for `--metrics-linger` (Ctrl-C
    /// skips it); call it once the summary is out. The endpoint closes with the outcome.
    pub async fn linger_metrics(&self, stop: &StopSignal) {
        let metrics = async {
            if let Some(metrics) = self.metrics.clone() {
                metrics.linger(stop).await;
            }
        };
        let dashboard = async {
            if let Some(dashboard) = self.dashboard.clone() {
                dashboard.linger(stop).await;
            }
        };
        tokio::join!(metrics, dashboard);
    }

    /// Sends the final figures (run.json's summary, verdict, client and thresholds, and the
    /// run's slowest responses) to the
    /// `--dashboard` page and saves it with `--dashboard-out` (a file not written is said).
    /// The outcome with its `--dashboard` page finished (see [`RunOutcome::final_page`]).
    fn with_final_page(mut self, page: Option<Dashboard>, slowest: serde_json::Value) -> Self {
        self.dashboard = page.map(|page| self.final_page(page, slowest));
        self
    }

    fn final_page(&self, page: Dashboard, slowest: serde_json::Value) -> FinalDashboard {
        let last = serde_json::json!({
            "slowest": slowest,
            "run_id": self.run_id,
            "location": self.location,
            "exit_reason": self.exit_reason,
            "summary": self.summary,
            "verdict": self.verdict,
            "client": self.client,
            "thresholds": self.thresholds,
        });
        let mut warnings = Vec::new();
        let page = page.finish(&last, &mut warnings);
        for warning in warnings {
            eprintln!("warning: {warning}");
        }
        page
    }

    /// The process exit code: the exit reason's; 1 when results did not all reach S3; 99
    /// when a run that finished crossed a threshold; 130 / 143 when a signal stopped the
    /// upload.
    pub fn exit_code(&self) -> i32 {
        match self.upload_stopped_by {
            Some(signal) => signal.exit_code(),
            None => exit_code(self.exit_reason, &self.upload_failures, &self.thresholds),
        }
    }
}

pub(super) fn exit_code(
    reason: ExitReason,
    upload_failures: &[String],
    thresholds: &[ThresholdResult],
) -> i32 {
    match reason.exit_code() {
        0 if !upload_failures.is_empty() => 1,
        0 if thresholds.iter().any(|t| !t.passed) => thresholds::EXIT_CODE,
        code => code,
    }
}

/// Writes what the run produced and returns it.
pub(super) async fn finish(
    mut config: RunConfig,
    target: PreparedTarget,
    output: RunOutput,
    driven: Driven,
    stop: &StopSignal,
    mut warnings: Vec<String>,
    extra: Option<RunJsonExtra>,
) -> Result<RunOutcome, RunError> {
    let sysmon = (driven.sysmon, &driven.tcp);
    let client = client_summary(&config, &target, sysmon, &mut warnings);
    let scrapes = driven.servermon.map(|s| server_scrapes(s, &mut warnings));
    let mut report = wait_for_writer(output.writer, &output.run_dir).await?;
    let aborted = watched_to_the_end(driven.level_watch).await;
    let exit_reason = stop.reason().unwrap_or(ExitReason::Completed);
    let (live, labels) = (&driven.live, &output.labels);
    let summary = summarize(&config, live, &report.stats, labels, i64::MAX);
    let thresholds = thresholds::evaluate(&config.thresholds, &report.stats, &summary);
    let judged = judge(&config, &summary, &mut report, (exit_reason, aborted));
    let server = server_evidence(&config, scrapes, &mut warnings);
    let facts = (&summary, &report.stats.components, &judged);
    let ended = (exit_reason, stop);
    let (verdict, probe) =
        probed_verdict(&mut config, ended, facts, (&client, server), &mut warnings).await;
    // The load is over: a signal from here on stops the upload or the metrics linger, and
    // is not announced as stopping the load.
    stop.drain(exit_reason);
    let header = header(&config, &target);
    target.shut_down().await;
    let records = RecordsInfo::new(&report, &output.run_dir);
    write_run_json(
        &output.run_dir,
        &RunJson {
            identity: &output.identity,
            exit_reason,
            exit_code: exit_code(exit_reason, &[], &thresholds),
            summary: &summary,
            records: records.clone(),
            warnings: &warnings,
            client: client.as_ref(),
            thresholds: &thresholds,
            verdict: &verdict,
            request_ops: config.workload.request_ops(),
            probe: probe.as_ref(),
        },
        extra,
    )?;
    let during = (config.output.upload_timeout, stop);
    let upload = upload(
        output.s3.as_ref().zip(output.mirror),
        during,
        &output.run_dir,
        &output.location,
        &mut warnings,
    )
    .await;
    let mut footer = footer(&output.location, &report, exit_reason);
    footer.extend(judgement_lines(
        &thresholds,
        client.as_ref(),
        (&verdict, &output.location),
        &warnings,
    ));
    let notes = config.notes.iter().map(|note| ("Note", note.clone()));
    footer.extend(probe.iter().map(|p| ("Probe", p.line())).chain(notes));
    let console = console::render(&summary, &header, &footer);
    // The page's last table is the whole run's: the live one lags the rows by a second or more.
    let final_slowest = super::live_page::slowest(&report.stats, labels);
    Ok(RunOutcome {
        run_dir: output.run_dir,
        location: output.location,
        upload_failures: upload.report.failed,
        upload_stopped_by: upload.stopped_by,
        run_id: output.run_id,
        summary,
        exit_reason,
        console,
        judged,
        thresholds,
        client,
        verdict,
        // Served to the end and beyond, so a last scrape sees the final counts.
        metrics: (driven.metrics_server)
            .map(|server| server.after_run(config.output.metrics.linger)),
        dashboard: None,
        anchor_unix_ns: output.identity.anchor.unix_ns,
        aggregates: report.stats,
        records,
    }
    .with_final_page(driven.dashboard, final_slowest))
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

/// The summary from the writer's exact aggregates, with the open model's schedule keeping
/// and the workers' time as of `now_ns` (`i64::MAX` at the end of the run; a live page's
/// summary of the rows so far reads it as of its second).
pub(super) fn summarize(
    config: &RunConfig,
    live: &LiveCounters,
    stats: &crate::stats::Aggregator,
    labels: &Labels,
    now_ns: i64,
) -> RunSummary {
    let open = config
        .model
        .plan()
        .max_lateness()
        .map(|max_lateness| open_summary(config, live, stats, max_lateness));
    let mut summary = RunSummary::from_stats(
        stats,
        labels,
        &live.skipped(),
        live.handoff_blocked_ns.load(Ordering::Relaxed),
        open,
    );
    if !config.output.histogram {
        summary.latency_histogram = None;
    }
    summary.workers = Some(WorkersSummary::from_activity_at(
        &live.activity,
        &labels.phases,
        now_ns,
    ));
    summary
}

/// How the open model kept its schedule: sends asked for, dropped, late, the offered load
/// and the send lag.
fn open_summary(
    config: &RunConfig,
    live: &LiveCounters,
    stats: &crate::stats::Aggregator,
    max_lateness: std::time::Duration,
) -> OpenSummary {
    let scheduled = live.scheduled.load(Ordering::Relaxed);
    let wall_ns = stats.last_end_ns.unwrap_or(0).max(0);
    let schedule_ns = match config.model.plan().extent() {
        Limit::Duration(d) => crate::clock::nanos(d).min(wall_ns.max(1)),
        Limit::Requests(_) => wall_ns,
    };
    OpenSummary {
        scheduled,
        dropped: live.dropped.load(Ordering::Relaxed),
        late: stats.late,
        max_lateness_ns: crate::clock::nanos(max_lateness),
        offered_rps: if schedule_ns > 0 {
            scheduled as f64 * 1e9 / schedule_ns as f64
        } else {
            0.0
        },
        send_lag: stats.send_lag_ns.as_ref().and_then(latency),
    }
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

/// What the judgement needs beyond the summary, from the samples the writer kept: an open
/// run's schedule and sustainability (against the level's latency reference: its tightest
/// latency SLO, else the run's median), and a capacity level's SLOs.
fn judge(
    config: &RunConfig,
    summary: &RunSummary,
    report: &mut WriterReport,
    (exit_reason, aborted): (ExitReason, Option<slo::Abort>),
) -> Judged {
    let rows = report.samples.take().map(LevelRows::or_warmup);
    let level_spec = config.judgement.level.as_ref();
    let open = summary
        .open
        .as_ref()
        .zip(rows.as_ref())
        .map(|(open, rows)| {
            let reference = level_spec.and_then(|l| slo::latency_reference(&l.slos));
            (
                schedule::schedule(rows, open.max_lateness_ns),
                schedule::sustainability(rows, open.dropped, reference),
            )
        });
    let level = level_spec.map(|spec| LevelFacts {
        slos: rows.as_ref().map_or_else(Vec::new, |rows| {
            spec.slos.iter().map(|t| slo::judge_slo(t, rows)).collect()
        }),
        outage: rows.as_ref().and_then(slo::outage),
        aborted: aborted.clone(),
        interrupted: matches!(
            exit_reason,
            ExitReason::Interrupted | ExitReason::Terminated
        ),
    });
    Judged { rows, open, level }
}

/// The run's verdict: the level's, then — where the probe at one connection could change it
/// and the level ended as planned — the probe's run, and the verdict again with its R(1).
async fn probed_verdict(
    config: &mut RunConfig,
    ended: (ExitReason, &StopSignal),
    (summary, components, judged): (&RunSummary, &crate::stats::Components, &Judged),
    (client, server): (&Option<ClientSummary>, Option<ServerEvidence>),
    warnings: &mut Vec<String>,
) -> (Verdict, Option<Probe>) {
    let facts = (summary, components, judged, None);
    let level = decide_verdict(config, facts, client, server.clone());
    let probe = super::probe::after(config, ended, summary, &level, warnings).await;
    match &probe {
        Some(p) => {
            let facts = (summary, components, judged, Some(p));
            (decide_verdict(config, facts, client, server), probe)
        }
        None => (level, None),
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
    let mut verdict = verdict::decide(verdict::Facts {
        summary,
        components,
        client: client.as_ref(),
        streams: config.connection.multiplexed(),
        open: judged.open.clone(),
        server,
        level: judged.level.as_ref(),
        decided_by: decided_by(config),
        probe_r1_ns: probe.map(|p| p.r1_ns),
    });
    if let Some(probe) = probe {
        probe.add_to(&mut verdict);
    }
    verdict
}

/// Who decided the verdict: a run's judge, or a capacity level's.
pub(super) fn decided_by(config: &RunConfig) -> &'static str {
    match config.judgement.level {
        Some(_) => "loadgen capacity",
        None => "loadgen run",
    }
}

/// The console's first line: the version, the model and the target.
fn header(config: &RunConfig, target: &PreparedTarget) -> String {
    format!(
        "loadgen {} — {}, against {}",
        env!("CARGO_PKG_VERSION"),
        config.model.plan().describe(),
        target.describe(),
    )
}

/// With `--out s3://`: waits (at most `limit`, and only until a signal) for the mirror's
/// segments, then client-metrics.parquet and the final run.json; removes the staging directory
/// when everything arrived, else says what is kept where and how to upload it later.
async fn upload(
    s3: Option<(&S3Store, Mirror)>,
    (limit, stop): (std::time::Duration, &StopSignal),
    run_dir: &Path,
    location: &str,
    warnings: &mut Vec<String>,
) -> Uploaded {
    let Some((s3, mirror)) = s3 else {
        return Uploaded::default();
    };
    let upload = mirror
        .finish(crate::store::s3::final_files(run_dir), limit, stop)
        .await;
    let failed = &upload.report.failed;
    if failed.is_empty() {
        let _ = std::fs::remove_dir_all(run_dir);
        return upload;
    }
    let later = format!(
        "the whole run is kept in {dir}; upload it later with `loadgen upload {dir} {}`",
        s3.location(),
        dir = run_dir.display(),
    );
    let warning = match upload.stopped_by {
        Some(_) => format!("upload to {location} stopped by a signal: {later}"),
        None => format!(
            "{} file(s) did not reach {location}: {}; {later}",
            failed.len(),
            failed.join("; ")
        ),
    };
    if upload.stopped_by.is_some() {
        eprintln!("\n{warning}");
    }
    warnings.push(warning);
    upload
}

/// The client monitor's verdict, with who shares the client's cores and the link capacity;
/// its warning (a saturated client) joins the run's.
fn client_summary(
    config: &RunConfig,
    target: &PreparedTarget,
    (sysmon, tcp): (
        Result<Sysmon, SysmonError>,
        &std::sync::Arc<crate::stats::tcp::TcpTotals>,
    ),
    warnings: &mut Vec<String>,
) -> Option<ClientSummary> {
    match sysmon.and_then(|s| s.finish()) {
        Ok(mut client) => {
            client.tcp = tcp.summary();
            verdict::client::judge(&mut client);
            client.set_shared_with(target.server_on_this_machine());
            (client.link_capacity_bps, client.link_capacity_source) =
                crate::sysmon::link::link_capacity(
                    config.evidence.link_capacity_bps,
                    target.interface.as_deref(),
                );
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

/// The first lines under the console table: where the results are, how the run ended.
fn footer<'a>(
    location: &str,
    report: &WriterReport,
    exit_reason: ExitReason,
) -> Vec<(&'a str, String)> {
    let mut footer = vec![
        ("Run directory", location.to_string()),
        (
            "Records",
            format!(
                "{} rows in {} segment(s), {}",
                report.rows,
                report.segments.len(),
                crate::units::bytes(report.bytes_on_disk)
            ),
        ),
        ("Ended", exit_reason_text(exit_reason).to_string()),
    ];
    if report.stats.left_out_phase.is_some() {
        footer.push((
            "Warm-up",
            format!(
                "{} (phase {}) recorded and left out of the summary and thresholds",
                crate::units::count(report.stats.left_out_rows, "request"),
                crate::record::phase::WARMUP
            ),
        ));
    }
    footer
}

/// The last lines under the console table: thresholds, the client's verdict, the run's
/// verdict in one line and the command that explains it (at `location`), the verdict per
/// phase, and warnings.
pub(super) fn judgement_lines<'a>(
    thresholds: &[ThresholdResult],
    client: Option<&ClientSummary>,
    (verdict, location): (&Verdict, &str),
    warnings: &[String],
) -> Vec<(&'a str, String)> {
    let mut footer = Vec::new();
    if !thresholds.is_empty() {
        footer.push(("Thresholds", thresholds::console_line(thresholds)));
    }
    if let Some(client) = client {
        footer.push(("Client", client.console_line()));
    }
    footer.push(("Verdict", verdict.console_line().to_string()));
    footer.push((
        "",
        format!("why, with its numbers: loadgen-analyze explain {location}"),
    ));
    for phase in &verdict.phases {
        footer.push((
            "  phase",
            format!(
                "{}: {} (workers alive {:.1}, busy {:.0}%, waiting {:.0}%)",
                phase.phase,
                phase.cause.as_str(),
                phase.workers_alive,
                phase.busy_share * 100.0,
                phase.waiting_share * 100.0
            ),
        ));
    }
    for warning in warnings {
        footer.push(("Warning", warning.clone()));
    }
    footer
}

/// Complete segments (not the hidden `.partial` one) in `dir`.
fn complete_segments(dir: &Path) -> usize {
    crate::store::segments(dir).map_or(0, |segments| segments.len())
}

pub(super) fn exit_reason_text(reason: ExitReason) -> &'static str {
    match reason {
        ExitReason::Completed => "all requests sent",
        ExitReason::DurationElapsed => "duration elapsed",
        ExitReason::Interrupted => "interrupted (Ctrl-C); every completed request is recorded",
        ExitReason::Terminated => "terminated (SIGTERM); every completed request is recorded",
        ExitReason::WriterFailed => "the record writer failed",
        ExitReason::Threshold => {
            "a threshold was lost (--abort-on-fail); every completed request is recorded"
        }
    }
}
