//! The finish of a run spread over several processes of this machine (`workflow::spread`):
//! each process hands its parent what its own finish derived everything from — its exact
//! aggregates, its workers' clocks, its rows on disk ([`Handover`], the `handover` of its
//! `--json` document, read from its stdout, never from disk) — and here they become one run.
//! The aggregates are added up ([`Aggregator::merge`]: counts summed, histograms added bucket
//! by bucket), the summary is derived from them as one process derives its own, the
//! thresholds and the verdict are judged by the same functions as any run's
//! (`judge::decide_verdict`, the one judge), run.json is written once at the top of the run
//! directory and the console table rendered once.
//!
//! A process that ended without handing over (killed, crashed: [`Lost`]) leaves only its
//! closed segments: the parent reads them back (`store::read_back`) and counts their rows into
//! the aggregates as the process's own writer did, so the summary holds every row on disk —
//! the rows `loadgen-analyze` reads — and a warning names the process, the rows read back, and
//! the rows it had not closed into a segment (in memory, or in its open `.partial` segment,
//! which it names) as lost. What no row holds stays out of the summary, and the warning says
//! so: its skipped requests, its workers' clocks, its writer hand-off's blocked time, its
//! rejections' `Retry-After`.
//!
//! Not merged: the client's CPU and memory. Each process samples its own, kept in its shard's
//! run.json; adding their utilisations up would be a second client rule, so the verdict's
//! client rule does not see them, and a warning says so.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::judge::decide_verdict;
use super::output::{empty_aggregates, run_labels, RunIdentity};
use super::record::{exit_code, exit_reason_text, judgement_lines};
use super::run_json::{write_run_json, RecordsInfo, RunJson};
use super::{Judged, RunError, RunJsonExtra, RunOutcome};
use crate::config::{RunConfig, Target};
use crate::record::Labels;
use crate::report::thresholds;
use crate::report::{console, RunSummary, WorkersSummary};
use crate::stats::Aggregator;
use crate::stop::ExitReason;
use crate::store::read_back::{read_back, ReadBack};

/// The layout of a [`Handover`]; a parent refuses another (a different loadgen binary).
pub const HANDOVER_VERSION: u32 = 1;

/// What one process of a spread run hands its parent when it ends.
#[derive(Debug, Serialize, Deserialize)]
pub struct Handover {
    pub version: u32,
    pub exit_reason: ExitReason,
    /// The Unix time its `*_ns` times count from.
    pub anchor_unix_ns: i64,
    pub aggregates: Aggregator,
    /// Requests not sent, per op.
    pub skipped: Vec<u64>,
    pub record_handoff_blocked_ns: u64,
    pub workers: Option<WorkersSummary>,
    /// Its rows on disk; segment paths from its own directory.
    pub records: RecordsInfo,
}

impl Handover {
    pub fn of(outcome: &RunOutcome) -> Self {
        Handover {
            version: HANDOVER_VERSION,
            exit_reason: outcome.exit_reason,
            anchor_unix_ns: outcome.anchor_unix_ns,
            aggregates: outcome.aggregates.clone(),
            skipped: outcome.summary.ops.iter().map(|o| o.skipped).collect(),
            record_handoff_blocked_ns: outcome.summary.record_handoff_blocked_ns,
            workers: outcome.summary.workers.clone(),
            records: outcome.records.clone(),
        }
    }
}

/// One process's hand-over, with its directory's name inside the run directory.
#[derive(Debug)]
pub struct Part {
    pub dir_name: String,
    pub handover: Handover,
}

/// A process that ended without handing over (killed, crashed).
#[derive(Debug)]
pub struct Lost {
    /// `I/N`.
    pub shard: String,
    /// How it ended, as the system says (`signal: 9 (SIGKILL)`).
    pub status: String,
    /// Its run directory, inside the spread run's.
    pub dir: PathBuf,
}

/// What the parent knows beside the hand-overs.
pub struct SpreadFacts {
    /// The processes' common `--start-at`.
    pub start_at_unix_ns: i64,
    /// The exit code of the worst process (a lost one counts as 1).
    pub worst_exit_code: i32,
    /// The processes that handed nothing over, whose closed segments are read back.
    pub lost: Vec<Lost>,
    /// run.json's `spread`: the processes, each one's end.
    pub spread: serde_json::Value,
}

/// The run out of its processes' hand-overs: one summary, one verdict, one run.json.
pub fn finish_spread(
    config: &RunConfig,
    run_dir: &Path,
    parts: Vec<Part>,
    facts: SpreadFacts,
) -> Result<RunOutcome, RunError> {
    let labels = run_labels(config);
    let mut lost_warnings = Vec::new();
    let read = read_lost(config, &labels, &facts.lost, &mut lost_warnings);
    let anchor_unix_ns = (parts.iter().map(|p| p.handover.anchor_unix_ns))
        .chain(read.iter().filter_map(|(_, back)| back.anchor_unix_ns))
        .min()
        .unwrap_or(facts.start_at_unix_ns);
    let (stats, summary, records) = merge(config, &labels, (&parts, &read), anchor_unix_ns);
    let exit_reason = parts
        .iter()
        .map(|p| p.handover.exit_reason)
        .max_by_key(|r| r.exit_code())
        .unwrap_or(ExitReason::Interrupted);
    let judged = Judged::default();
    let (thresholds, verdict, warnings) = judge(config, (&stats, &summary, &judged), lost_warnings);
    let run_id = run_dir.file_name().map_or_else(
        || "spread".to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let url = match &config.target {
        Target::Url(url) => url.url.clone(),
        Target::Embedded => String::new(),
    };
    let document = RunJson {
        identity: &RunIdentity::spread(
            config,
            &run_id,
            &url,
            (anchor_unix_ns, facts.start_at_unix_ns),
        ),
        exit_reason,
        exit_code: exit_code(exit_reason, &[], &thresholds).max(facts.worst_exit_code),
        summary: &summary,
        records: records.clone(),
        warnings: &warnings,
        client: None,
        thresholds: &thresholds,
        verdict: &verdict,
        request_ops: config.workload.request_ops(),
        probe: None,
    };
    write_run_json(run_dir, &document, Some(spread_field(facts.spread)))?;
    let processes = parts.len() + read.len();
    let mut footer = footer(run_dir, &records, processes, exit_reason);
    let location = run_dir.display().to_string();
    footer.extend(judgement_lines(
        &thresholds,
        None,
        (&verdict, &location),
        &warnings,
    ));
    let header = format!(
        "loadgen {} — {}, against {url}",
        env!("CARGO_PKG_VERSION"),
        config.model.plan().describe(),
    );
    Ok(RunOutcome {
        run_dir: run_dir.to_path_buf(),
        console: console::render(&summary, &header, &footer),
        location: run_dir.display().to_string(),
        upload_failures: Vec::new(),
        upload_stopped_by: None,
        probe: None,
        run_id,
        summary,
        exit_reason,
        judged,
        thresholds,
        client: None,
        verdict,
        metrics: None,
        dashboard: None,
        aggregates: stats,
        anchor_unix_ns,
        records,
    })
}

/// The thresholds and the verdict, by the functions every run's finish uses.
fn judge(
    config: &RunConfig,
    (stats, summary, judged): (&Aggregator, &RunSummary, &Judged),
    mut warnings: Vec<String>,
) -> (
    Vec<thresholds::ThresholdResult>,
    crate::verdict::Verdict,
    Vec<String>,
) {
    let thresholds = thresholds::evaluate(&config.thresholds, stats, summary);
    warnings.push(
        "the client's CPU and memory are each process's own (its shard's run.json `client`); \
         the verdict did not judge the client"
            .to_string(),
    );
    let facts = (summary, &stats.components, judged, None);
    let verdict = decide_verdict(config, facts, &None, None);
    (thresholds, verdict, warnings)
}

/// run.json's `spread`, added to the document as a workflow's fields are.
fn spread_field(spread: serde_json::Value) -> RunJsonExtra {
    Box::new(move |_| {
        let mut fields = serde_json::Map::new();
        fields.insert("spread".into(), spread);
        fields
    })
}

/// The first lines under the console table: where the run is, its rows, how it ended.
fn footer(
    run_dir: &Path,
    records: &RecordsInfo,
    processes: usize,
    exit_reason: ExitReason,
) -> Vec<(&'static str, String)> {
    let rows = format!(
        "{} rows in {} segment(s) of {processes} processes, {}",
        records.rows,
        records.segments.len(),
        crate::units::bytes(records.bytes_on_disk)
    );
    vec![
        ("Run directory", run_dir.display().to_string()),
        ("Records", rows),
        ("Ended", exit_reason_text(exit_reason).to_string()),
    ]
}

/// Each lost process's closed segments read back into the run's aggregates (by its directory's
/// name), and a warning for each: what was read back, what is lost, what no row holds.
fn read_lost(
    config: &RunConfig,
    labels: &Labels,
    lost: &[Lost],
    warnings: &mut Vec<String>,
) -> Vec<(String, ReadBack)> {
    let empty = empty_aggregates(config, labels);
    let mut read = Vec::new();
    for process in lost {
        let back = read_back(&process.dir.join("requests"), labels, &empty);
        warnings.push(lost_warning(process, &back));
        let dir_name = (process.dir.file_name())
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        read.push((dir_name, back));
    }
    read
}

/// The warning of a process that handed nothing over.
fn lost_warning(process: &Lost, back: &ReadBack) -> String {
    let mut text = format!(
        "process {} ended ({}) without handing over its aggregates: its {} rows in {} closed \
         segment(s) in {} were read back into this summary, without what no row holds (its \
         skipped requests, its workers' clocks, its writer hand-off's blocked time, its \
         rejections' Retry-After); the rows it had not closed into a segment are lost",
        process.shard,
        process.status,
        back.rows,
        back.segments.len(),
        process.dir.display()
    );
    if !back.open.is_empty() {
        text.push_str(&format!(" (its open segment {})", back.open.join(", ")));
    }
    if !back.unreadable.is_empty() {
        let unreadable = back.unreadable.join("; ");
        text.push_str(&format!(
            "; segments that could not be read are not in the summary: {unreadable}"
        ));
    }
    text
}

/// The processes' aggregates added up (each shifted by how much later its anchor was), the
/// lost processes' rows read back with them, the summary derived from them, their rows on
/// disk.
fn merge(
    config: &RunConfig,
    labels: &Labels,
    (parts, read): (&[Part], &[(String, ReadBack)]),
    anchor_unix_ns: i64,
) -> (Aggregator, RunSummary, RecordsInfo) {
    let mut stats = empty_aggregates(config, labels);
    for part in parts {
        let shift_ns = part.handover.anchor_unix_ns - anchor_unix_ns;
        stats.merge(&part.handover.aggregates, shift_ns);
    }
    for (_, back) in read {
        if let Some(anchor) = back.anchor_unix_ns {
            stats.merge(&back.stats, anchor - anchor_unix_ns);
        }
    }
    let mut skipped = vec![0; labels.ops.len()];
    let mut handoff_blocked_ns = 0;
    let mut workers: Option<WorkersSummary> = None;
    for part in parts {
        let handover = &part.handover;
        for (n, m) in skipped.iter_mut().zip(&handover.skipped) {
            *n += m;
        }
        handoff_blocked_ns += handover.record_handoff_blocked_ns;
        if let Some(theirs) = &handover.workers {
            let shift_ns = handover.anchor_unix_ns - anchor_unix_ns;
            workers
                .get_or_insert_with(WorkersSummary::default)
                .merge(theirs, shift_ns);
        }
    }
    let mut summary = RunSummary::from_stats(&stats, labels, &skipped, handoff_blocked_ns, None);
    if !config.output.histogram {
        summary.latency_histogram = None;
    }
    summary.workers = workers;
    (stats, summary, records_of(parts, read))
}

/// The rows on disk of every process, handed over or read back; segment paths from the run
/// directory.
fn records_of(parts: &[Part], read: &[(String, ReadBack)]) -> RecordsInfo {
    let mut records = RecordsInfo::default();
    for part in parts {
        let (dir, theirs) = (&part.dir_name, &part.handover.records);
        records.rows += theirs.rows;
        records.bytes_on_disk += theirs.bytes_on_disk;
        (records.segments).extend((theirs.segments.iter()).map(|s| format!("{dir}/{s}")));
    }
    for (dir, back) in read {
        records.rows += back.rows;
        records.bytes_on_disk += back.bytes_on_disk;
        (records.segments).extend((back.segments.iter()).map(|s| format!("{dir}/requests/{s}")));
    }
    records
}
