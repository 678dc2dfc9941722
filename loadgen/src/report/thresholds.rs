//! Thresholds: what a run must achieve to pass, as k6 and Gatling let a test say it
//! (`--threshold 'p99<50ms'`, a scenario's `thresholds = ["error_rate<1%"]`).
//!
//! A threshold is `METRIC[OP] CMP VALUE`: a latency percentile (`p50`, `p95`, `p99.9`, any
//! `pN`), `mean`, `max`, `error_rate` or `throughput`; optionally one op's (`p99[get_album]`),
//! else the whole run's; compared with `<`, `<=`, `>` or `>=` to a value in the metric's unit
//! (`50ms`, `1%`, `2000/s`). They are judged once, at the end, on the exact aggregates of
//! every recorded row (latency at HDR precision, from the intended send time under the open
//! model); a crossed threshold makes the run exit with [`EXIT_CODE`], and the summary,
//! run.json (`thresholds`) and the HTML report list each with what was observed.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::RunSummary;
use crate::stats::Aggregator;

/// The exit code of a run that crossed a threshold (k6's), distinct from 1 (results not
/// written) and 2 (bad input).
pub const EXIT_CODE: i32 = crate::stop::THRESHOLD_EXIT_CODE;

/// `--abort-after`'s default: how long a run goes before `--abort-on-fail` judges it.
pub const DEFAULT_ABORT_AFTER: std::time::Duration = std::time::Duration::from_secs(5);

/// How often `--abort-on-fail` judges the rows so far.
pub const ABORT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// What a threshold measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// A latency percentile, 0 < p < 100.
    Percentile(f64),
    Mean,
    Max,
    /// Failed rows / rows.
    ErrorRate,
    /// Rows per second of wall time.
    Throughput,
}

/// `<`, `<=`, `>`, `>=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Comparison {
    Below,
    AtMost,
    Above,
    AtLeast,
}

/// One parsed threshold. Latency limits are in nanoseconds, error rates a fraction,
/// throughput requests per second.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// As the user wrote it.
    pub text: String,
    pub metric: Metric,
    /// The op it applies to; `None` for the whole run.
    pub op: Option<String>,
    pub comparison: Comparison,
    pub limit: f64,
}

/// A threshold judged against a run.
#[derive(Debug, Clone, Serialize)]
pub struct ThresholdResult {
    pub threshold: String,
    /// The op, or `null` for the whole run.
    pub op: Option<String>,
    /// What the run did, in `unit`; `null` when there was nothing to measure (no response).
    pub observed: Option<f64>,
    pub limit: f64,
    /// `ns`, `fraction` or `1/s`.
    pub unit: &'static str,
    pub passed: bool,
}

impl Metric {
    fn unit(self) -> &'static str {
        match self {
            Metric::ErrorRate => "fraction",
            Metric::Throughput => "1/s",
            _ => "ns",
        }
    }
}

impl FromStr for Threshold {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "threshold '{text}' {why}; write METRIC[OP] CMP VALUE, e.g. 'p99<50ms', \
                 'p95[get_album]<=20ms', 'error_rate<1%' or 'throughput>2000/s'"
            )
        };
        let at = text
            .find(['<', '>'])
            .ok_or_else(|| bad("has no comparison (<, <=, > or >=)"))?;
        let (left, rest) = text.split_at(at);
        let (comparison, value) = match rest.as_bytes() {
            [b'<', b'=', ..] => (Comparison::AtMost, &rest[2..]),
            [b'>', b'=', ..] => (Comparison::AtLeast, &rest[2..]),
            [b'<', ..] => (Comparison::Below, &rest[1..]),
            _ => (Comparison::Above, &rest[1..]),
        };
        let left = left.trim();
        let (name, op) = match left.split_once('[') {
            Some((name, op)) => {
                let op = op
                    .strip_suffix(']')
                    .ok_or_else(|| bad("opens [ without ]"))?;
                if op.is_empty() {
                    return Err(bad("names no op inside []"));
                }
                (name.trim(), Some(op.to_string()))
            }
            None => (left, None),
        };
        let metric = match name {
            "mean" | "avg" => Metric::Mean,
            "max" => Metric::Max,
            "error_rate" => Metric::ErrorRate,
            "throughput" => Metric::Throughput,
            p if p.starts_with('p') => match p[1..].parse::<f64>() {
                Ok(q) if q > 0.0 && q < 100.0 => Metric::Percentile(q),
                _ => return Err(bad("has a percentile outside p0 < pN < p100")),
            },
            _ => {
                return Err(bad(&format!(
                    "measures '{name}', which is none of pN, mean, max, error_rate, throughput"
                )))
            }
        };
        let limit = parse_limit(metric, value.trim()).map_err(|why| bad(&why))?;
        if metric == Metric::ErrorRate {
            check_proportion(comparison, limit).map_err(|why| bad(&why))?;
        }
        Ok(Threshold {
            text: text.trim().to_string(),
            metric,
            op,
            comparison,
            limit,
        })
    }
}

/// A limit in the metric's unit: a duration with its unit for latency, a percentage or a
/// fraction for error rates, requests per second (`/s` optional) for throughput.
fn parse_limit(metric: Metric, value: &str) -> Result<f64, String> {
    let number = |text: &str| {
        text.trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .ok_or_else(|| format!("has '{value}', which is not a number >= 0 with a unit"))
    };
    match metric {
        Metric::ErrorRate => parse_proportion(value),
        Metric::Throughput => number(value.strip_suffix("/s").unwrap_or(value)),
        _ => {
            let split = value
                .find(|c: char| c.is_alphabetic() || c == 'µ')
                .ok_or_else(|| format!("gives '{value}' without a unit; write e.g. 50ms"))?;
            let scale = match &value[split..] {
                "ns" => 1.0,
                "us" | "µs" => 1e3,
                "ms" => 1e6,
                "s" => 1e9,
                unit => return Err(format!("has unit '{unit}'; use ns, us, ms or s")),
            };
            Ok(number(&value[..split])? * scale)
        }
    }
}

/// A proportion, one convention everywhere (thresholds, `compare` limits, notebook
/// parameters): `1%` and `0.01` mean the same; a bare number must be below 1, so `1` — 100 %
/// or 1 %? — is refused with a hint instead of meaning a limit that can never fail.
pub fn parse_proportion(value: &str) -> Result<f64, String> {
    let value = value.trim();
    let number = |text: &str| {
        text.trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    if let Some(percent) = value.strip_suffix('%') {
        return number(percent)
            .map(|n| n / 100.0)
            .ok_or_else(|| format!("has '{value}', which is not a percentage >= 0%"));
    }
    match number(value) {
        Some(n) if n < 1.0 => Ok(n),
        Some(n) => Err(format!(
            "has '{value}', a bare number of 1 or more where a proportion is expected (did you mean {n}%?); write a percentage ({n}%) or a fraction below 1 ({})",
            n / 100.0
        )),
        None => Err(format!(
            "has '{value}', which is not a proportion; write a percentage (1%) or a fraction (0.01)"
        )),
    }
}

/// An error-rate limit that no run can cross (`error_rate<150%`, `error_rate<=100%`) is a
/// mistake, not a threshold.
fn check_proportion(comparison: Comparison, limit: f64) -> Result<(), String> {
    let never = match comparison {
        _ if limit > 1.0 => true,
        Comparison::AtMost => limit >= 1.0,
        Comparison::AtLeast => limit <= 0.0,
        _ => false,
    };
    if never {
        return Err(format!(
            "can never be crossed (an error rate is between 0% and 100%, and this limit is {}%)",
            limit * 100.0
        ));
    }
    Ok(())
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Threshold {
    /// Whether `observed`, in the metric's unit, is on the passing side of the limit.
    pub fn passes(&self, observed: f64) -> bool {
        match self.comparison {
            Comparison::Below => observed < self.limit,
            Comparison::AtMost => observed <= self.limit,
            Comparison::Above => observed > self.limit,
            Comparison::AtLeast => observed >= self.limit,
        }
    }

    /// Whether no run can meet it: an upper limit that even a measurement of 0 does not pass
    /// (latencies, error rates and throughputs are never below 0), e.g. `p99<0ms`.
    pub fn unmeetable(&self) -> bool {
        matches!(self.comparison, Comparison::Below | Comparison::AtMost) && !self.passes(0.0)
    }

    /// The unit of the limit and of what is observed: `ns`, `fraction` or `1/s`.
    pub fn unit(&self) -> &'static str {
        self.metric.unit()
    }

    /// What the run did on this threshold's metric; `None` when nothing was measured. An op
    /// label two requests share counts both.
    fn observe(&self, stats: &Aggregator, summary: &RunSummary) -> Option<f64> {
        let ops: Vec<String> = summary.ops.iter().map(|o| o.op.clone()).collect();
        if self.metric != Metric::Throughput {
            return self.observe_recorded(stats, &ops);
        }
        let chosen: Vec<usize> = (0..summary.ops.len())
            .filter(|&i| self.op.as_ref().is_none_or(|op| &summary.ops[i].op == op))
            .collect();
        if chosen.is_empty() {
            return None;
        }
        Some(match self.op {
            Some(_) => chosen.iter().map(|&i| summary.ops[i].throughput_rps).sum(),
            None => summary.throughput_rps,
        })
    }

    /// What the rows aggregated in `stats` (ops labelled `ops`) show for any metric but
    /// throughput, which needs the run's wall time.
    fn observe_recorded(&self, stats: &Aggregator, ops: &[String]) -> Option<f64> {
        let chosen: Vec<usize> = (0..ops.len().min(stats.ops.len()))
            .filter(|&i| self.op.as_ref().is_none_or(|op| &ops[i] == op))
            .collect();
        if chosen.is_empty() {
            return None;
        }
        match self.metric {
            Metric::ErrorRate => {
                let failed: u64 = chosen.iter().map(|&i| stats.ops[i].failures).sum();
                let requests: u64 = chosen.iter().map(|&i| stats.ops[i].requests).sum();
                (requests > 0).then(|| failed as f64 / requests as f64)
            }
            Metric::Throughput => None,
            latency => {
                let mut histogram = hdrhistogram::Histogram::<u64>::new(3).ok()?;
                for &i in &chosen {
                    stats.ops.get(i)?.latency_ns.add_to(&mut histogram);
                }
                if histogram.is_empty() {
                    return None;
                }
                Some(match latency {
                    Metric::Percentile(q) => histogram.value_at_quantile(q / 100.0) as f64,
                    Metric::Mean => histogram.mean(),
                    _ => histogram.max() as f64,
                })
            }
        }
    }
}

/// Judges every threshold against the run's exact aggregates and its summary.
/// `--abort-on-fail`: after `after`, once every [`ABORT_EVERY`], the thresholds are judged on
/// the writer's aggregates so far (`published`, ops labelled `ops`); the first one lost drains
/// the run (exit reason `threshold`), said through `announce`. Off the workers' path: the
/// writer thread copies its aggregates out.
pub fn abort_on_fail(
    after: std::time::Duration,
    (thresholds, ops): (Vec<Threshold>, Vec<String>),
    published: std::sync::Arc<crate::stats::Published>,
    stop: crate::stop::StopSignal,
    announce: crate::model::Announcer,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let mut every = tokio::time::interval(ABORT_EVERY);
        loop {
            every.tick().await;
            let Some(stats) = published.take() else {
                continue;
            };
            if let Some(lost) = lost_so_far(&thresholds, &stats, &ops) {
                announce(format!(
                    "threshold {} lost on the first {} requests (observed {}): ending the run \
                     (--abort-on-fail)",
                    lost.threshold,
                    stats.requests(),
                    observed_text(&lost)
                ));
                stop.drain(crate::stop::ExitReason::Threshold);
                return;
            }
        }
    })
}

/// `--abort-on-fail`: the first threshold the rows so far (`stats`, ops labelled `ops`) have
/// lost — an upper limit (`<`, `<=`) on the error rate, a percentile, the mean or the max,
/// crossed by what is recorded. A lower limit and throughput are left to the end, where
/// the whole run is judged.
pub fn lost_so_far(
    thresholds: &[Threshold],
    stats: &Aggregator,
    ops: &[String],
) -> Option<ThresholdResult> {
    thresholds
        .iter()
        .filter(|t| matches!(t.comparison, Comparison::Below | Comparison::AtMost))
        .filter(|t| t.metric != Metric::Throughput)
        .find_map(|threshold| {
            let observed = threshold.observe_recorded(stats, ops)?;
            (!threshold.passes(observed)).then(|| ThresholdResult {
                threshold: threshold.text.clone(),
                op: threshold.op.clone(),
                observed: Some(observed),
                limit: threshold.limit,
                unit: threshold.metric.unit(),
                passed: false,
            })
        })
}

pub fn evaluate(
    thresholds: &[Threshold],
    stats: &Aggregator,
    summary: &RunSummary,
) -> Vec<ThresholdResult> {
    thresholds
        .iter()
        .map(|threshold| {
            let observed = threshold.observe(stats, summary);
            ThresholdResult {
                threshold: threshold.text.clone(),
                op: threshold.op.clone(),
                observed,
                limit: threshold.limit,
                unit: threshold.metric.unit(),
                passed: observed.is_some_and(|value| threshold.passes(value)),
            }
        })
        .collect()
}

/// The console line: all passed with what each observed, or which were crossed and by how
/// much.
pub fn console_line(results: &[ThresholdResult]) -> String {
    let crossed: Vec<String> = results
        .iter()
        .filter(|r| !r.passed)
        .map(|r| format!("{} (observed {})", r.threshold, observed_text(r)))
        .collect();
    match crossed.len() {
        0 => {
            let observed: Vec<String> = results
                .iter()
                .map(|r| format!("{} ({})", r.threshold, observed_text(r)))
                .collect();
            format!("all {} passed: {}", results.len(), observed.join(", "))
        }
        n => format!(
            "{n} of {} CROSSED (exit code {EXIT_CODE}): {}",
            results.len(),
            crossed.join("; ")
        ),
    }
}

/// What a threshold's result observed, in its unit (`12.3ms`, `9.80%`, `1500.0/s`).
pub fn observed_text(result: &ThresholdResult) -> String {
    match (result.observed, result.unit) {
        (None, _) => "nothing measured".to_string(),
        (Some(ns), "ns") => crate::units::duration(ns),
        (Some(rate), "fraction") => format!("{:.2}%", rate * 100.0),
        (Some(rps), _) => format!("{rps:.1}/s"),
    }
}

/// True when any threshold was crossed.
pub fn crossed(results: &[ThresholdResult]) -> bool {
    results.iter().any(|r| !r.passed)
}

/// The Thresholds block of a workflow that judged several runs (a sweep's levels, a
/// calibration): one line per run, then which crossed; empty when no threshold was given.
pub fn block(runs: &[(String, &[ThresholdResult])]) -> String {
    if runs.iter().all(|(_, results)| results.is_empty()) {
        return String::new();
    }
    let mut out = String::from("\n  Thresholds\n");
    for (name, results) in runs {
        out += &format!("    {name:<14} {}\n", console_line(results));
    }
    let failing: Vec<&str> = runs
        .iter()
        .filter(|(_, results)| crossed(results))
        .map(|(name, _)| name.as_str())
        .collect();
    out += &match failing.len() {
        0 => "    all passed\n".to_string(),
        _ => format!(
            "    CROSSED at {} (exit code {EXIT_CODE})\n",
            failing.join(", ")
        ),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Threshold {
        text.parse().unwrap()
    }

    /// A row of op 0: phase 0 is the warm-up, 1 the judged part; `error` a 500.
    fn row(phase: u16, latency_ms: i64, error: bool) -> crate::record::RequestRecord {
        crate::record::RequestRecord {
            start_ns: 0,
            intended_ns: None,
            latency_ns: latency_ms * 1_000_000,
            connect_ns: None,
            send_ns: None,
            ttfb_ns: None,
            queue_wait_ns: None,
            buffer_wait_ns: None,
            op: 0,
            status: if error { 500 } else { 200 },
            error: error.then_some(crate::record::ErrorClass::HttpStatus),
            bytes_sent: 0,
            bytes_received: 0,
            worker: 0,
            phase,
            attempt: 1,
            check: None,
            trace_id: None,
            grpc_status: None,
            grpc_message: None,
            retry_after_s: None,
        }
    }

    /// `--abort-on-fail` judges upper limits on what is recorded, never a lower limit or
    /// throughput, and never the warm-up's rows.
    #[test]
    fn a_threshold_is_lost_so_far_on_the_judged_rows_only() {
        let mut stats = Aggregator::new(1, 2, 0, 1, i64::MAX).leaving_out(Some(0));
        for _ in 0..50 {
            stats.observe(&row(0, 900, true)); // A slow, failing warm-up: left out.
        }
        for i in 0..100 {
            stats.observe(&row(1, 10 + i % 10, i % 10 == 0));
        }
        assert_eq!((stats.requests(), stats.left_out_rows), (100, 50));
        let ops = ["GET /".to_string()];
        let lost = |texts: &[&str]| {
            let thresholds: Vec<Threshold> = texts.iter().map(|t| parse(t)).collect();
            lost_so_far(&thresholds, &stats, &ops).map(|r| r.threshold)
        };
        assert_eq!(lost(&["p99<1s", "max<100ms", "error_rate<20%"]), None);
        assert_eq!(
            lost(&["p99<1s", "error_rate<5%"]).as_deref(),
            Some("error_rate<5%")
        );
        assert_eq!(lost(&["max<=15ms"]).as_deref(), Some("max<=15ms"));
        // Only judged at the end: a lower limit and throughput.
        assert_eq!(lost(&["p50>1s", "error_rate>50%", "throughput<1/s"]), None);
    }

    /// The shared test vectors (`contract/thresholds.json`), which the Python parser's tests
    /// read too: the two languages cannot disagree on what a threshold means.
    fn vectors() -> serde_json::Value {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../contract/thresholds.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn metric_name(metric: Metric) -> String {
        match metric {
            Metric::Percentile(q) => format!("p{q}"),
            Metric::Mean => "mean".into(),
            Metric::Max => "max".into(),
            Metric::ErrorRate => "error_rate".into(),
            Metric::Throughput => "throughput".into(),
        }
    }

    #[test]
    fn thresholds_read_as_the_shared_vectors_say() {
        let vectors = vectors();
        for case in vectors["valid"].as_array().unwrap() {
            let expr = case["expr"].as_str().unwrap();
            let t = parse(expr);
            let comparison = match t.comparison {
                Comparison::Below => "<",
                Comparison::AtMost => "<=",
                Comparison::Above => ">",
                Comparison::AtLeast => ">=",
            };
            assert_eq!(metric_name(t.metric), case["metric"], "{expr}");
            assert_eq!(t.op.as_deref(), case["op"].as_str(), "{expr}");
            assert_eq!(comparison, case["comparison"], "{expr}");
            let limit = case["limit"].as_f64().unwrap();
            assert!(
                (t.limit - limit).abs() <= 1e-9 * limit.max(1.0),
                "{expr}: {}",
                t.limit
            );
            assert_eq!(t.metric.unit(), case["unit"], "{expr}");
        }
        for case in vectors["invalid"].as_array().unwrap() {
            let expr = case["expr"].as_str().unwrap();
            let error = expr.parse::<Threshold>().unwrap_err();
            assert!(
                error.contains(case["error"].as_str().unwrap()),
                "{expr}: {error}"
            );
            assert!(error.contains("p99<50ms"), "{expr}: {error}");
        }
    }

    #[test]
    fn proportions_follow_the_shared_vectors() {
        for case in vectors()["proportions"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            match (parse_proportion(text), case["value"].as_f64()) {
                (Ok(value), Some(want)) => assert!((value - want).abs() < 1e-12, "{text}"),
                (Err(error), None) => {
                    assert!(
                        error.contains(case["error"].as_str().unwrap()),
                        "{text}: {error}"
                    )
                }
                (got, _) => panic!("{text}: {got:?}"),
            }
        }
    }

    #[test]
    fn comparisons_pass_on_their_side_of_the_limit() {
        for (text, observed, passed) in [
            ("p99<50ms", 49e6, true),
            ("p99<50ms", 50e6, false),
            ("p99<=50ms", 50e6, true),
            ("throughput>100", 100.0, false),
            ("throughput>=100", 100.0, true),
        ] {
            assert_eq!(parse(text).passes(observed), passed, "{text} at {observed}");
        }
    }
}
