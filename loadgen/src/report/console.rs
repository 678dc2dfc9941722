//! The console summary: what the course clients print (wall time, throughput), per request type.

use std::fmt::Write;

use super::RunSummary;
use crate::units::{bytes, duration};

/// Renders the summary table. `run_dir` and `exit_reason` are shown at the end.
pub fn render(summary: &RunSummary, header: &str, footer: &[(&str, String)]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{header}");
    let _ = writeln!(out);
    let failures = if summary.errors.is_empty() {
        String::new()
    } else {
        let by_class: Vec<String> = summary
            .errors
            .iter()
            .map(|(c, n)| format!("{c} {n}"))
            .collect();
        format!(" ({})", by_class.join(", "))
    };
    let retries = if summary.retries > 0 {
        format!(
            " ({} of them retries; {} failed after all retries)",
            summary.retries, summary.failed_final
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  Requests    {} total, {} ok, {} failed{failures}{retries}",
        summary.requests, summary.ok, summary.failed
    );
    let _ = writeln!(
        out,
        "  Wall time   {}",
        duration(summary.wall_time_ns as f64)
    );
    let _ = writeln!(
        out,
        "  Throughput  {:.1} req/s ({:.1} req/s ok)",
        summary.throughput_rps, summary.ok_throughput_rps
    );
    if let Some(open) = &summary.open {
        let _ = writeln!(
            out,
            "  Schedule    {} scheduled, {} sent, {} dropped at --max-in-flight, {} late (> {} after intended)",
            open.scheduled,
            open.scheduled.saturating_sub(open.dropped),
            open.dropped,
            open.late,
            duration(open.max_lateness_ns as f64)
        );
    }
    if let Some(groups) = &summary.excluding_startup {
        let _ = writeln!(
            out,
            "  Groups only {} requests in {}: {:.1} req/s (startup excluded)",
            groups.requests,
            duration(groups.wall_time_ns as f64),
            groups.throughput_rps
        );
    }
    let _ = writeln!(
        out,
        "  Transfer    {} sent, {} received",
        bytes(summary.bytes_sent),
        bytes(summary.bytes_received)
    );
    checks(&mut out, summary);
    let _ = writeln!(out);

    let headings = [
        "op", "requests", "failed", "req/s", "mean", "min", "p50", "p90", "p99", "p99.9", "max",
    ];
    let mut rows: Vec<Vec<String>> = Vec::new();
    for op in &summary.ops {
        let mut row = vec![
            op.op.clone(),
            op.requests.to_string(),
            op.failed.to_string(),
            format!("{:.1}", op.throughput_rps),
        ];
        match &op.latency {
            Some(l) => row.extend(latency_cells(l)),
            None => row.extend(std::iter::repeat_n("-".to_string(), 7)),
        }
        rows.push(row);
        if let Some(l) = &op.uncorrected_latency {
            let mut row = vec![
                "  (from actual send)".to_string(),
                String::new(),
                String::new(),
                String::new(),
            ];
            row.extend(latency_cells(l));
            rows.push(row);
        }
    }
    table(&mut out, &headings, &rows);
    if summary.open.is_some() {
        let _ = writeln!(
            out,
            "  (latency counts from each request's intended send time; the line below each op counts from the actual send)"
        );
    }
    // One phase is the whole run: a per-phase table would repeat the lines above.
    if summary.phases.len() > 1 {
        let _ = writeln!(out);
        let headings = [
            "phase", "workers", "requests", "failed", "wall", "req/s", "p50", "p99",
        ];
        let rows: Vec<Vec<String>> = summary
            .phases
            .iter()
            .map(|p| {
                let (p50, p99) = p.latency.map_or(("-".into(), "-".into()), |l| {
                    (duration(l.p50_ns as f64), duration(l.p99_ns as f64))
                });
                vec![
                    p.phase.clone(),
                    p.workers.to_string(),
                    p.requests.to_string(),
                    p.failed.to_string(),
                    duration(p.wall_time_ns as f64),
                    format!("{:.1}", p.throughput_rps),
                    p50,
                    p99,
                ]
            })
            .collect();
        table(&mut out, &headings, &rows);
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

/// The checks line (failed rows per check, all passed) and the requests skipped because a
/// value was not extracted; nothing for a run without checks.
fn checks(out: &mut String, summary: &RunSummary) {
    if !summary.checks.is_empty() {
        let failed: Vec<String> = summary
            .checks
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(name, n)| format!("{name}: {n} failed"))
            .collect();
        let line = if failed.is_empty() {
            format!("all {} passed", summary.checks.len())
        } else {
            failed.join("; ")
        };
        let _ = writeln!(out, "  Checks      {line}");
    }
    if summary.skipped > 0 {
        let by_op: Vec<String> = summary
            .ops
            .iter()
            .filter(|o| o.skipped > 0)
            .map(|o| format!("{} {}", o.op, o.skipped))
            .collect();
        let _ = writeln!(
            out,
            "  Skipped     {} requests not sent: a value they use was not extracted ({})",
            summary.skipped,
            by_op.join(", ")
        );
    }
}

/// mean, min, p50, p90, p99, p99.9, max.
fn latency_cells(l: &super::LatencySummary) -> [String; 7] {
    [
        l.mean_ns,
        l.min_ns as f64,
        l.p50_ns as f64,
        l.p90_ns as f64,
        l.p99_ns as f64,
        l.p999_ns as f64,
        l.max_ns as f64,
    ]
    .map(duration)
}

/// Writes an aligned table: first column left-aligned, the rest right-aligned.
fn table(out: &mut String, headings: &[&str], rows: &[Vec<String>]) {
    let mut all: Vec<Vec<String>> = vec![headings.iter().map(|s| s.to_string()).collect()];
    all.extend(rows.iter().cloned());
    let widths: Vec<usize> = (0..headings.len())
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
