//! The console summary: what the course clients print (wall time, throughput), per request type.
//!
//! Table-driven: the lines above the tables are `SUMMARY_LINES`, the tables' columns are
//! `OP_COLUMNS` and `PHASE_COLUMNS`; [`render`] only walks them. A new figure is one row
//! in one of those lists.

use std::fmt::Write;

use super::{LatencySummary, OpSummary, PhaseSummary, RunSummary};
use crate::units::{bytes, duration};

/// A line above the tables: its label and its text (`None`: the run has nothing to say there,
/// and the line is left out).
type SummaryLine = (&'static str, fn(&RunSummary) -> Option<String>);

/// A table column: its heading and its cell in one row.
type Column<R> = (&'static str, fn(&R) -> String);

/// The lines above the tables, in order.
const SUMMARY_LINES: &[SummaryLine] = &[
    ("Requests", requests_line),
    ("Wall time", |s| Some(duration(s.wall_time_ns as f64))),
    ("Throughput", |s| {
        Some(format!(
            "{:.1} req/s ({:.1} req/s ok)",
            s.throughput_rps, s.ok_throughput_rps
        ))
    }),
    ("Schedule", schedule_line),
    ("Groups only", |s| {
        s.excluding_startup.as_ref().map(|groups| {
            format!(
                "{} in {}: {:.1} req/s (startup excluded)",
                crate::units::count(groups.requests, "request"),
                duration(groups.wall_time_ns as f64),
                groups.throughput_rps
            )
        })
    }),
    ("Transfer", |s| {
        Some(format!(
            "{} sent, {} received",
            bytes(s.bytes_sent),
            bytes(s.bytes_received)
        ))
    }),
    ("Checks", checks_line),
    ("Skipped", skipped_line),
];

/// One line of the op table: an op, or (open model) the line under it with its latency
/// counted from the actual send, which leaves the counts empty.
struct OpLine<'a> {
    label: &'a str,
    op: Option<&'a OpSummary>,
    latency: Option<&'a LatencySummary>,
}

/// A column of the op table, for lines of any lifetime.
type OpColumn = (&'static str, for<'a> fn(&OpLine<'a>) -> String);

/// The op table; latency cells are `-` for an op that got no response.
const OP_COLUMNS: &[OpColumn] = &[
    ("op", |l| l.label.to_string()),
    ("requests", |l| count(l, |o| o.requests.to_string())),
    ("failed", |l| count(l, |o| o.failed.to_string())),
    ("req/s", |l| {
        count(l, |o| format!("{:.1}", o.throughput_rps))
    }),
    ("mean", |l| latency(l.latency, |l| l.mean_ns)),
    ("min", |l| latency(l.latency, |l| l.min_ns as f64)),
    ("p50", |l| latency(l.latency, |l| l.p50_ns as f64)),
    ("p90", |l| latency(l.latency, |l| l.p90_ns as f64)),
    ("p99", |l| latency(l.latency, |l| l.p99_ns as f64)),
    ("p99.9", |l| latency(l.latency, |l| l.p999_ns as f64)),
    ("max", |l| latency(l.latency, |l| l.max_ns as f64)),
];

/// The phase table (shown when the run has more than one phase).
const PHASE_COLUMNS: &[Column<PhaseSummary>] = &[
    ("phase", |p| p.phase.clone()),
    ("workers", |p| p.workers.to_string()),
    ("requests", |p| p.requests.to_string()),
    ("failed", |p| p.failed.to_string()),
    ("wall", |p| duration(p.wall_time_ns as f64)),
    ("req/s", |p| format!("{:.1}", p.throughput_rps)),
    ("p50", |p| latency(p.latency.as_ref(), |l| l.p50_ns as f64)),
    ("p99", |p| latency(p.latency.as_ref(), |l| l.p99_ns as f64)),
];

/// Renders the summary: `header`, the summary lines, the op table (and the phase table), then
/// the `footer` lines (run directory, exit reason, warnings…).
pub fn render(summary: &RunSummary, header: &str, footer: &[(&str, String)]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{header}\n");
    for (label, line) in SUMMARY_LINES {
        if let Some(text) = line(summary) {
            let _ = writeln!(out, "  {label:<12}{text}");
        }
    }
    let _ = writeln!(out);
    table(&mut out, OP_COLUMNS, &op_lines(summary));
    if summary.open.is_some() {
        let _ = writeln!(
            out,
            "  (latency counts from each request's intended send time; the line below each op counts from the actual send)"
        );
    }
    if let Some(histogram) = &summary.latency_histogram {
        let _ = writeln!(out);
        histogram.render(&mut out);
    }
    // One phase is the whole run: a per-phase table would repeat the lines above.
    if summary.phases.len() > 1 {
        let _ = writeln!(out);
        table(&mut out, PHASE_COLUMNS, &summary.phases);
    }
    if !footer.is_empty() {
        let _ = writeln!(out);
        let width = footer.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (key, value) in footer {
            let _ = writeln!(out, "  {key:<width$}  {value}");
        }
    }
    out
}

/// Totals, and the failures by class and the retries when there are any.
fn requests_line(summary: &RunSummary) -> Option<String> {
    let mut line = format!(
        "{} total, {} ok, {} failed",
        summary.requests, summary.ok, summary.failed
    );
    if !summary.errors.is_empty() {
        let by_class: Vec<String> = summary
            .errors
            .iter()
            .map(|(c, n)| match c.as_str() {
                "http_status" if !summary.failed_statuses.is_empty() => {
                    format!("{c} {n}: {}", statuses(summary))
                }
                "grpc_status" if !summary.failed_grpc.is_empty() => {
                    format!("{c} × {n}: {}", grpc_statuses(summary))
                }
                _ => format!("{c} {n}"),
            })
            .collect();
        let _ = write!(line, " ({})", by_class.join(", "));
    }
    if summary.retries > 0 {
        let _ = write!(
            line,
            " ({} of them retries; {} failed after all retries)",
            summary.retries, summary.failed_final
        );
    }
    Some(line)
}

/// Open model: how the schedule was kept — sends scheduled, sent, dropped, late — and how
/// long after its intended time a send started (the send lag's p50/p99/p99.9).
fn schedule_line(summary: &RunSummary) -> Option<String> {
    let open = summary.open.as_ref()?;
    let mut line = format!(
        "{} scheduled, {} sent, {} dropped at --max-in-flight, {} late (> {} after intended)",
        open.scheduled,
        open.scheduled.saturating_sub(open.dropped),
        open.dropped,
        open.late,
        duration(open.max_lateness_ns as f64)
    );
    if let Some(lag) = &open.send_lag {
        let _ = write!(
            line,
            "; send lag p50 {}, p99 {}, p99.9 {}",
            duration(lag.p50_ns as f64),
            duration(lag.p99_ns as f64),
            duration(lag.p999_ns as f64)
        );
    }
    Some(line)
}

/// Failed rows per check, that all passed, or that none was evaluated (no response had an
/// expected status); nothing for a run without checks.
fn checks_line(summary: &RunSummary) -> Option<String> {
    if summary.checks.is_empty() {
        return None;
    }
    let failed: Vec<String> = summary
        .checks
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(name, n)| format!("{name}: {n} failed"))
        .collect();
    Some(if summary.checks_evaluated == 0 {
        "not evaluated (no response had an expected status)".to_string()
    } else if failed.is_empty() {
        format!("all {} passed", summary.checks.len())
    } else {
        failed.join("; ")
    })
}

/// The requests skipped because a value they use was not extracted, by op.
fn skipped_line(summary: &RunSummary) -> Option<String> {
    if summary.skipped == 0 {
        return None;
    }
    let by_op: Vec<String> = summary
        .ops
        .iter()
        .filter(|o| o.skipped > 0)
        .map(|o| format!("{} {}", o.op, o.skipped))
        .collect();
    Some(format!(
        "{} not sent: a value they use was not extracted ({})",
        crate::units::count(summary.skipped, "request"),
        by_op.join(", ")
    ))
}

/// Each op's line, followed (open model) by its latency from the actual send.
fn op_lines(summary: &RunSummary) -> Vec<OpLine<'_>> {
    let mut lines = Vec::new();
    for op in &summary.ops {
        lines.push(OpLine {
            label: &op.op,
            op: Some(op),
            latency: op.latency.as_ref(),
        });
        if let Some(uncorrected) = &op.uncorrected_latency {
            lines.push(OpLine {
                label: "  (from actual send)",
                op: None,
                latency: Some(uncorrected),
            });
        }
    }
    lines
}

/// A count cell of the op table; empty on the line from the actual send.
fn count(line: &OpLine<'_>, cell: fn(&OpSummary) -> String) -> String {
    line.op.map_or_else(String::new, cell)
}

/// A latency cell; `-` when nothing got a response.
fn latency(summary: Option<&LatencySummary>, ns: fn(&LatencySummary) -> f64) -> String {
    summary.map_or_else(|| "-".to_string(), |l| duration(ns(l)))
}

/// Writes an aligned table: first column left-aligned, the rest right-aligned.
fn table<R>(out: &mut String, columns: &[Column<R>], rows: &[R]) {
    let mut all: Vec<Vec<String>> = vec![columns.iter().map(|c| c.0.to_string()).collect()];
    all.extend(
        rows.iter()
            .map(|row| columns.iter().map(|(_, cell)| cell(row)).collect()),
    );
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| all.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &all {
        let mut line = String::from(" ");
        for (i, cell) in row.iter().enumerate() {
            let pad = " ".repeat(widths[i] - cell.chars().count());
            if i == 0 {
                let _ = write!(line, " {cell}{pad}");
            } else {
                let _ = write!(line, "  {pad}{cell}");
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// Failed gRPC calls by status, most frequent first: `14 UNAVAILABLE "no bob, ever" × 200`.
fn grpc_statuses(summary: &RunSummary) -> String {
    most_first(summary.failed_grpc.iter())
}

/// Failed statuses, most frequent first: `404 × 34,562, 503 × 12`.
fn statuses(summary: &RunSummary) -> String {
    most_first(summary.failed_statuses.iter())
}

/// `name × count` pairs, the most frequent first (ties by name), comma-separated.
fn most_first<'a>(counted: impl Iterator<Item = (&'a String, &'a u64)>) -> String {
    let mut counts: Vec<(&String, &u64)> = counted.collect();
    counts.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let text: Vec<String> = counts
        .iter()
        .map(|(status, n)| format!("{status} × {}", crate::units::thousands(**n)))
        .collect();
    text.join(", ")
}
