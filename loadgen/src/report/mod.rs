//! Reporting: the run summary (derived from the recorded rows), the console table, run.json,
//! and the live progress line.
//!
//! Raw records are the interface; everything here is derived from them (docs/architecture.md,
//! "The data flow"). This module decides how results are shown, not how they are measured.

pub mod console;
pub mod dashboard;
pub mod histogram;
pub mod junit;
pub mod metrics;
pub mod progress;
pub mod serve;
pub mod thresholds;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;

use serde::Serialize;

use crate::model::{Limit, Plan};
use crate::record::Labels;
use crate::stats::activity::Activity;
use crate::stats::{Aggregator, LiveCounters, OpAggregate};

/// The responses of one rejecting status (429, 503): how many, and the `Retry-After` they
/// carried (how long the server asked clients to wait), in seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Rejection {
    pub status: u16,
    pub responses: u64,
    pub retry_after_responses: u64,
    pub retry_after_min_s: Option<u32>,
    pub retry_after_max_s: Option<u32>,
}

impl Rejection {
    /// "503, Retry-After 1 s", "429, Retry-After 1–30 s", or "429" without one.
    pub fn text(&self) -> String {
        match (self.retry_after_min_s, self.retry_after_max_s) {
            (Some(lo), Some(hi)) if lo == hi => format!("{}, Retry-After {lo} s", self.status),
            (Some(lo), Some(hi)) => format!("{}, Retry-After {lo}–{hi} s", self.status),
            _ => self.status.to_string(),
        }
    }
}

/// The numbers a run ends with; printed on the console and stored in run.json.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunSummary {
    pub requests: u64,
    pub ok: u64,
    pub failed: u64,
    /// Failures by error class (`http_status`, `reset`, …).
    pub errors: BTreeMap<String, u64>,
    /// Failures of class `http_status` by status code (`"404": 34562`).
    pub failed_statuses: BTreeMap<String, u64>,
    /// Failures of class `grpc_status` by code, name and message
    /// (`{"14 UNAVAILABLE \"no bob, ever\"": 200}`); absent when none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub failed_grpc: BTreeMap<String, u64>,
    /// Rejections (429, 503) by status, with the `Retry-After` they carried; absent when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rejections: Vec<Rejection>,
    /// From the first request's start to the last one's end.
    pub wall_time_ns: i64,
    pub throughput_rps: f64,
    pub ok_throughput_rps: f64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Rows that were retries (`attempt > 1`); they are included in `requests`.
    pub retries: u64,
    /// Requests that failed on their last allowed attempt.
    pub failed_final: u64,
    /// Requests not sent because a value they use was not extracted (not rows).
    pub skipped: u64,
    /// Failed rows per check or extraction name (every name the run checks, failed or not).
    pub checks: BTreeMap<String, u64>,
    /// Rows whose response had an expected status, so the op's checks were evaluated on it:
    /// with none (every response a 500), no check was evaluated, and none passed.
    pub checks_evaluated: u64,
    pub ops: Vec<OpSummary>,
    pub phases: Vec<PhaseSummary>,
    /// Open model: schedule keeping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open: Option<OpenSummary>,
    /// Rows of the phase `warmup` (`--warmup`): recorded, and left out of every figure here
    /// but `phases` (wall time and rates start with the first request after the warm-up).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warmup_requests: Option<u64>,
    /// The run without its `startup` phase (thread-groups), as the courses report it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub excluding_startup: Option<Span>,
    /// Total time workers spent blocked handing record batches to the writer thread.
    pub record_handoff_blocked_ns: u64,
    /// Where the workers' time went, measured by each worker (not derived from the rows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersSummary>,
    /// The console's latency histogram of every response (not in run.json, whose ops hold
    /// the percentiles); `None` without responses or with `--no-histogram`.
    #[serde(skip)]
    pub latency_histogram: Option<histogram::LatencyHistogram>,
}

/// The workers' time over the run and per phase (group, phase, `main`): how long they were
/// alive, in a request (busy), and waiting for their next request (think time, the open
/// schedule, the producer's buffer, retry backoff). Busy over alive is the share of the
/// workers really in use: N_eff against the workers alive, from the engine's own clocks.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct WorkersSummary {
    pub started: u64,
    pub alive_ns: i64,
    pub busy_ns: i64,
    pub waiting_ns: i64,
    pub phases: Vec<PhaseWorkers>,
}

/// One phase's workers.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct PhaseWorkers {
    pub phase: String,
    /// Workers started in this phase.
    pub started: u64,
    /// The first of them started, the last ended (ns since the anchor).
    pub first_started_ns: i64,
    pub last_ended_ns: i64,
    pub alive_ns: i64,
    pub busy_ns: i64,
    pub waiting_ns: i64,
    /// Requests they started.
    pub sent: u64,
}

impl WorkersSummary {
    /// Adds another process's workers (a spread run's), whose times are `shift_ns` after
    /// these; a phase is matched by its name.
    pub fn merge(&mut self, other: &WorkersSummary, shift_ns: i64) {
        self.started += other.started;
        self.alive_ns += other.alive_ns;
        self.busy_ns += other.busy_ns;
        self.waiting_ns += other.waiting_ns;
        for theirs in &other.phases {
            let mut shifted = theirs.clone();
            shifted.first_started_ns += shift_ns;
            shifted.last_ended_ns += shift_ns;
            match self.phases.iter_mut().find(|p| p.phase == theirs.phase) {
                None => self.phases.push(shifted),
                Some(ours) => {
                    ours.started += shifted.started;
                    ours.first_started_ns = ours.first_started_ns.min(shifted.first_started_ns);
                    ours.last_ended_ns = ours.last_ended_ns.max(shifted.last_ended_ns);
                    ours.alive_ns += shifted.alive_ns;
                    ours.busy_ns += shifted.busy_ns;
                    ours.waiting_ns += shifted.waiting_ns;
                    ours.sent += shifted.sent;
                }
            }
        }
    }

    /// Read from every worker's clock once they have all ended.
    pub fn from_activity(activity: &Activity, phase_labels: &[String]) -> Self {
        Self::from_activity_at(activity, phase_labels, i64::MAX)
    }

    /// The workers' time as of `now_ns` (from the run's anchor): a running run's, so far.
    pub fn from_activity_at(activity: &Activity, phase_labels: &[String], now_ns: i64) -> Self {
        let phases = activity.by_phase(now_ns);
        let total = Activity::total(&phases);
        let phases = phases
            .iter()
            .zip(phase_labels)
            .enumerate()
            .filter(|(_, (t, _))| t.workers > 0)
            .map(|(i, (t, label))| {
                let (first_started_ns, last_ended_ns) = activity.span(i as u16).unwrap_or_default();
                PhaseWorkers {
                    phase: label.clone(),
                    started: t.workers,
                    first_started_ns,
                    last_ended_ns,
                    alive_ns: t.alive_ns,
                    busy_ns: t.busy_ns,
                    waiting_ns: t.waiting_ns,
                    sent: t.sent,
                }
            })
            .collect();
        WorkersSummary {
            started: activity.started(),
            alive_ns: total.alive_ns,
            busy_ns: total.busy_ns,
            waiting_ns: total.waiting_ns,
            phases,
        }
    }
}

/// Per phase (group, phase, `main`).
#[derive(Debug, Clone, Serialize)]
pub struct PhaseSummary {
    pub phase: String,
    pub workers: usize,
    pub requests: u64,
    pub failed: u64,
    /// From the phase's first request start to its last request end.
    pub wall_time_ns: i64,
    pub throughput_rps: f64,
    pub latency: Option<LatencySummary>,
    /// Mean response time of each op in this phase (exact, not from the histogram).
    pub op_mean_latency_ns: BTreeMap<String, f64>,
}

/// Requests over a stretch of the run.
#[derive(Debug, Clone, Serialize)]
pub struct Span {
    pub requests: u64,
    pub wall_time_ns: i64,
    pub throughput_rps: f64,
}

/// Per request type.
#[derive(Debug, Clone, Serialize)]
pub struct OpSummary {
    pub op: String,
    pub requests: u64,
    pub failed: u64,
    pub errors: BTreeMap<String, u64>,
    /// Requests of this op not sent because a value they use was not extracted.
    pub skipped: u64,
    pub throughput_rps: f64,
    /// Over requests that got an HTTP response; `None` if none did. In the open model it is
    /// measured from each request's intended send time (free of coordinated omission).
    pub latency: Option<LatencySummary>,
    /// Open model only: the same, measured from the actual send.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncorrected_latency: Option<LatencySummary>,
}

/// How well the open model kept its schedule.
#[derive(Debug, Clone, Serialize)]
pub struct OpenSummary {
    /// Sends the schedule asked for; equals rows + dropped.
    pub scheduled: u64,
    /// Sends not made because `--max-in-flight` requests were already in flight.
    pub dropped: u64,
    /// Sends that started more than `max_lateness_ns` after their intended time.
    pub late: u64,
    pub max_lateness_ns: i64,
    /// The offered load: `scheduled` over the schedule's duration (or over the run's wall
    /// time when the run stopped before the schedule ended), requests/s.
    pub offered_rps: f64,
    /// How long after its intended time each send started (ns, HDR precision).
    pub send_lag: Option<LatencySummary>,
}

impl OpenSummary {
    /// How an open run whose schedule spans `extent` kept it: sends asked for, dropped,
    /// late, the offered load and the send lag.
    fn of(
        extent: Limit,
        max_lateness: std::time::Duration,
        live: &LiveCounters,
        stats: &Aggregator,
    ) -> Self {
        let scheduled = live.scheduled.load(Ordering::Relaxed);
        let wall_ns = stats.last_end_ns.unwrap_or(0).max(0);
        let schedule_ns = match extent {
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
}

/// Latency percentiles in nanoseconds, at HDR precision (3 significant digits).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_ns: f64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl RunSummary {
    /// The summary of a run of `plan` from the writer's exact aggregates (`stats`, whose
    /// indexes `labels` name) and the live counters: the open model's schedule keeping, and
    /// the workers' time as of `now_ns` (`i64::MAX` at the end of the run; a live page's
    /// summary of the rows so far reads it as of its second).
    pub fn of_run(
        plan: &dyn Plan,
        (live, stats, labels): (&LiveCounters, &Aggregator, &Labels),
        now_ns: i64,
    ) -> Self {
        let open = (plan.max_lateness())
            .map(|max_lateness| OpenSummary::of(plan.extent(), max_lateness, live, stats));
        let mut summary = RunSummary::from_stats(
            stats,
            labels,
            &live.skipped(),
            live.handoff_blocked_ns.load(Ordering::Relaxed),
            open,
        );
        summary.workers = Some(WorkersSummary::from_activity_at(
            &live.activity,
            &labels.phases,
            now_ns,
        ));
        summary
    }

    /// `labels` name the indexes of `stats`; `skipped` is per op, as `labels.ops`.
    pub fn from_stats(
        stats: &Aggregator,
        labels: &Labels,
        skipped: &[u64],
        handoff_blocked_ns: u64,
        open: Option<OpenSummary>,
    ) -> Self {
        let warmup_requests = stats.left_out_phase.map(|_| stats.left_out_rows);
        // Without a warm-up the run's wall time starts at its anchor; after one, with the
        // first request judged.
        let judged_from_ns = match warmup_requests {
            Some(_) => stats.first_start_ns.unwrap_or(0),
            None => 0,
        };
        let wall_time_ns = (stats.last_end_ns.unwrap_or(0) - judged_from_ns).max(0);
        let rate = |n: u64| per_second(n, wall_time_ns);
        let requests = stats.requests();
        let failed = stats.failures();
        RunSummary {
            requests,
            ok: requests - failed,
            failed,
            errors: stats
                .errors_by_class()
                .into_iter()
                .map(|(class, n)| (class.to_string(), n))
                .collect(),
            failed_statuses: stats
                .failed_statuses
                .iter()
                .map(|(status, n)| (status.to_string(), *n))
                .collect(),
            failed_grpc: stats.failed_grpc.clone(),
            rejections: stats
                .rejections
                .iter()
                .map(|(&status, r)| Rejection {
                    status,
                    responses: r.responses,
                    retry_after_responses: r.retry_after_responses,
                    retry_after_min_s: r.retry_after_min_s,
                    retry_after_max_s: r.retry_after_max_s,
                })
                .collect(),
            wall_time_ns,
            throughput_rps: rate(requests),
            ok_throughput_rps: rate(requests - failed),
            bytes_sent: stats.ops.iter().map(|o| o.bytes_sent).sum(),
            bytes_received: stats.ops.iter().map(|o| o.bytes_received).sum(),
            retries: stats.retries,
            failed_final: stats.failed_final,
            skipped: skipped.iter().sum(),
            checks: labels
                .checks
                .iter()
                .zip(&stats.check_failures)
                .map(|(name, &n)| (name.clone(), n))
                .collect(),
            checks_evaluated: stats.checked,
            ops: op_summaries(stats, &labels.ops, skipped, wall_time_ns),
            phases: phase_summaries(stats, labels),
            open,
            warmup_requests,
            excluding_startup: excluding_startup(stats, &labels.phases),
            record_handoff_blocked_ns: handoff_blocked_ns,
            workers: None,
            latency_histogram: histogram::LatencyHistogram::from_ops(
                stats.ops.iter().map(|o| o.latency_ns.histogram()),
            ),
        }
    }
}

/// One entry per op, rates over the whole run's wall time.
fn op_summaries(
    stats: &Aggregator,
    ops: &[String],
    skipped: &[u64],
    wall_time_ns: i64,
) -> Vec<OpSummary> {
    stats
        .ops
        .iter()
        .zip(ops)
        .enumerate()
        .map(|(i, (op, label))| OpSummary {
            op: label.clone(),
            requests: op.requests,
            failed: op.failures,
            errors: errors_by_name(op),
            skipped: skipped.get(i).copied().unwrap_or(0),
            throughput_rps: per_second(op.requests, wall_time_ns),
            latency: latency(&op.latency_ns.histogram()),
            uncorrected_latency: (op.uncorrected_latency_ns.as_ref())
                .and_then(|h| latency(&h.histogram())),
        })
        .collect()
}

/// One entry per phase that sent anything, rates over the phase's own wall time.
fn phase_summaries(stats: &Aggregator, labels: &Labels) -> Vec<PhaseSummary> {
    stats
        .phases
        .iter()
        .zip(&labels.phases)
        .filter(|(phase, _)| phase.requests > 0)
        .map(|(phase, label)| {
            let wall = phase.last_end_ns.unwrap_or(0) - phase.first_start_ns.unwrap_or(0);
            PhaseSummary {
                phase: label.clone(),
                workers: phase.workers(),
                requests: phase.requests,
                failed: phase.failures,
                wall_time_ns: wall,
                throughput_rps: per_second(phase.requests, wall),
                latency: latency(&phase.latency_ns.histogram()),
                op_mean_latency_ns: labels
                    .ops
                    .iter()
                    .zip(&phase.op_latency_sum_ns)
                    .filter(|(_, (count, _))| *count > 0)
                    .map(|(op, (count, sum))| (op.clone(), *sum as f64 / *count as f64))
                    .collect(),
            }
        })
        .collect()
}

/// Thread groups: the phases after `startup`, as one span; `None` without a startup phase.
fn excluding_startup(stats: &Aggregator, phase_labels: &[String]) -> Option<Span> {
    (phase_labels.first().is_some_and(|l| l == "startup") && stats.phases.len() > 1).then(|| {
        let rest = &stats.phases[1..];
        let requests = rest.iter().map(|p| p.requests).sum();
        let start = rest
            .iter()
            .filter_map(|p| p.first_start_ns)
            .min()
            .unwrap_or(0);
        let end = rest.iter().filter_map(|p| p.last_end_ns).max().unwrap_or(0);
        Span {
            requests,
            wall_time_ns: end - start,
            throughput_rps: per_second(requests, end - start),
        }
    })
}

fn errors_by_name(op: &OpAggregate) -> BTreeMap<String, u64> {
    crate::record::ErrorClass::ALL
        .iter()
        .zip(&op.errors)
        .filter(|(_, &n)| n > 0)
        .map(|(class, &n)| (class.to_string(), n))
        .collect()
}

fn per_second(requests: u64, wall_time_ns: i64) -> f64 {
    if wall_time_ns > 0 {
        requests as f64 / (wall_time_ns as f64 / 1e9)
    } else {
        0.0
    }
}

/// Percentiles of a histogram of nanoseconds; `None` when it is empty.
pub fn latency(h: &hdrhistogram::Histogram<u64>) -> Option<LatencySummary> {
    (!h.is_empty()).then(|| LatencySummary {
        count: h.len(),
        mean_ns: h.mean(),
        min_ns: h.min(),
        p50_ns: h.value_at_quantile(0.50),
        p90_ns: h.value_at_quantile(0.90),
        p99_ns: h.value_at_quantile(0.99),
        p999_ns: h.value_at_quantile(0.999),
        max_ns: h.max(),
    })
}

/// Writes `value` as pretty JSON to `path`, via a temporary file so a reader never sees half.
pub fn write_json_atomically(path: &Path, value: &impl Serialize) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    let partial = path.with_extension("json.partial");
    std::fs::write(&partial, text + "\n")?;
    std::fs::rename(&partial, path)
}
