//! Step six of a run: record. Write run.json once, then seal the S3 copy (its last files, the
//! staging directory removed), render the console, and hand back the [`RunOutcome`] — with
//! the metrics endpoint and the page still serving the final figures.

use std::path::{Path, PathBuf};

use super::judge::Judgement;
use super::measure::Measured;
use super::output::RunOutput;
use super::probe::Probe;
use super::run_json::{write_run_json, RecordsInfo, RunJson};
use super::services::Serving;
use super::target::PreparedTarget;
use super::{RunError, RunJsonExtra};
use crate::config::RunConfig;
use crate::report::dashboard::{Dashboard, FinalDashboard};
use crate::report::metrics::FinalMetrics;
use crate::report::thresholds::{self, ThresholdResult};
use crate::report::{console, RunSummary};
use crate::stop::{ExitReason, StopSignal};
use crate::store::s3::{Mirror, S3Store, Uploaded};
use crate::store::writer::WriterReport;
use crate::sysmon::ClientSummary;
use crate::verdict::{Judged, Verdict};

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
    /// The probe at one connection after the level, if it measured R(1) (run.json `probe`).
    pub probe: Option<Probe>,
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
    /// run's slowest responses) to the `--dashboard` page and saves it with `--dashboard-out`
    /// (a file not written is said).
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
pub(super) async fn write(
    config: RunConfig,
    (target, output): (PreparedTarget, RunOutput),
    measured: Measured,
    (judgement, probe): (Judgement, Option<Probe>),
    (serving, stop): (Serving, &StopSignal),
    (mut warnings, extra): (Vec<String>, Option<RunJsonExtra>),
) -> Result<RunOutcome, RunError> {
    let Measured {
        summary,
        report,
        client,
        judged,
        exit_reason,
        ..
    } = measured;
    let Judgement {
        verdict,
        thresholds,
    } = judgement;
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
    let final_slowest = super::live_page::slowest(&report.stats, &output.labels);
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
        probe,
        // Served to the end and beyond, so a last scrape sees the final counts.
        metrics: (serving.metrics_server)
            .map(|server| server.after_run(config.output.metrics.linger)),
        dashboard: None,
        anchor_unix_ns: output.identity.anchor.unix_ns,
        aggregates: report.stats,
        records,
    }
    .with_final_page(serving.dashboard, final_slowest))
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
