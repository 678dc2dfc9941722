//! run.json: the one document a run writes about itself, once, after its judgement is in —
//! the identity, how it ended, its summary, the client's and the verdict's findings and the
//! thresholds — with a workflow's extra fields (calibrate's R(1)) merged in.

use std::path::Path;

use serde::Serialize;

use super::output::RunIdentity;
use super::{RunError, RunJsonExtra};
use crate::report::thresholds::ThresholdResult;
use crate::report::{write_json_atomically, RunSummary};
use crate::stop::ExitReason;
use crate::store::writer::WriterReport;
use crate::sysmon::ClientSummary;
use crate::verdict::Verdict;

/// The final run.json: the identity, how the run ended and what it measured.
#[derive(Debug, Serialize)]
pub(super) struct RunJson<'a> {
    #[serde(flatten)]
    pub(super) identity: &'a RunIdentity,
    pub(super) exit_reason: ExitReason,
    pub(super) exit_code: i32,
    pub(super) summary: &'a RunSummary,
    pub(super) records: RecordsInfo,
    pub(super) warnings: &'a [String],
    /// Client CPU, memory and saturation (from client-metrics.parquet).
    pub(super) client: Option<&'a ClientSummary>,
    /// Each threshold (scenario `thresholds`, `--threshold`) with what the run did.
    pub(super) thresholds: &'a [ThresholdResult],
    /// Where the run's throughput stopped and why (the `verdict` module).
    pub(super) verdict: &'a Verdict,
    /// Each request's name in the scenario → its op's label (selectors may name either).
    pub(super) request_ops: std::collections::BTreeMap<String, String>,
    /// `--probe`: R(1) at one connection after the level, against the level's median.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) probe: Option<&'a super::probe::Probe>,
}

/// run.json's `records`: the rows on disk and their segments (paths from the run directory).
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct RecordsInfo {
    pub rows: u64,
    pub bytes_on_disk: u64,
    pub segments: Vec<String>,
}

impl RecordsInfo {
    pub(super) fn new(report: &WriterReport, run_dir: &Path) -> Self {
        RecordsInfo {
            rows: report.rows,
            bytes_on_disk: report.bytes_on_disk,
            segments: report
                .segments
                .iter()
                .filter_map(|p| p.strip_prefix(run_dir).ok())
                .map(|p| p.display().to_string())
                .collect(),
        }
    }
}

/// Writes run.json (the document plus a workflow's extra fields) atomically, once.
pub(super) fn write_run_json(
    run_dir: &Path,
    document: &RunJson<'_>,
    extra: Option<RunJsonExtra>,
) -> Result<(), RunError> {
    let mut run_json = serde_json::to_value(document).expect("run.json is plain data");
    if let (Some(extra), Some(fields)) = (extra, run_json.as_object_mut()) {
        fields.extend(extra(document.summary));
    }
    let path = run_dir.join("run.json");
    write_json_atomically(&path, &run_json).map_err(|source| RunError::Write { path, source })
}
