//! A capacity level's SLOs, judged from its rows (handed over in memory by the writer), each
//! with a confidence interval — the fact the search hands the one judge ([`LevelFacts`],
//! read by [`super::decide()`]) — and the rule that stops a running level far past its SLO
//! ([`LevelWatch`], by `contract/verdict.json`'s `level_abort_*`). Whether the level was
//! sustainable at all is [`super::schedule`]'s rule, shared with every open run.
//!
//! The interval is a **block bootstrap** over time blocks of the judged window: latencies
//! next to each other in time are correlated (a queue that builds up lifts a whole stretch),
//! so resampling single requests would claim far more certainty than the level holds;
//! resampling whole blocks keeps that correlation. An SLO passes when its whole interval is
//! on the passing side, fails when the whole interval is on the failing side, and is
//! *uncertain* otherwise — the caller extends the level rather than guess.
//!
//! This module computes; it runs nothing and reads nothing.

use serde::Serialize;

use super::findings::{Finding, Seen};
use super::rule::{Rule, T};
use super::schedule::{blocks, quantile};
use crate::report::thresholds::{Comparison, Metric, Threshold};
use crate::stats::samples::{LevelRows, Sample, SampleReceiver};
use crate::stop::{ExitReason, StopSignal};

/// Resamples per bootstrap.
const RESAMPLES: usize = 400;
/// Confidence of the intervals.
pub const CONFIDENCE: f64 = 0.95;

/// Where an SLO's interval lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    Uncertain,
}

/// One SLO judged on one level.
#[derive(Debug, Clone, Serialize)]
pub struct SloJudgement {
    pub slo: String,
    /// The point estimate, in `unit`; `None` when nothing was measured.
    pub observed: Option<f64>,
    /// The confidence interval's ends ([`CONFIDENCE`]).
    pub low: Option<f64>,
    pub high: Option<f64>,
    pub limit: f64,
    pub unit: &'static str,
    pub outcome: Outcome,
}

/// A statistic of some samples: `None` when there is nothing to compute it on.
type Statistic<'a> = Box<dyn Fn(&[&Sample]) -> Option<f64> + 'a>;

fn statistic<'a>(threshold: &'a Threshold, op: Option<u16>, window_s: f64) -> Statistic<'a> {
    let keep = move |s: &&Sample| op.is_none_or(|op| s.op == op);
    match threshold.metric {
        Metric::ErrorRate => Box::new(move |samples| {
            let chosen: Vec<_> = samples.iter().copied().filter(keep).collect();
            let failed = chosen.iter().filter(|s| s.failed).count();
            (!chosen.is_empty()).then(|| failed as f64 / chosen.len() as f64)
        }),
        Metric::Throughput => Box::new(move |samples| {
            let ok = samples.iter().copied().filter(keep).filter(|s| !s.failed);
            (window_s > 0.0).then(|| ok.count() as f64 / window_s)
        }),
        metric => Box::new(move |samples| {
            let mut latencies: Vec<i64> = samples
                .iter()
                .copied()
                .filter(keep)
                .filter(|s| s.responded)
                .map(|s| s.from_intended_ns)
                .collect();
            latency_statistic(metric, &mut latencies)
        }),
    }
}

fn latency_statistic(metric: Metric, latencies: &mut [i64]) -> Option<f64> {
    if latencies.is_empty() {
        return None;
    }
    Some(match metric {
        Metric::Percentile(q) => quantile(latencies, q / 100.0) as f64,
        Metric::Mean => latencies.iter().map(|&l| l as f64).sum::<f64>() / latencies.len() as f64,
        _ => latencies.iter().copied().max().unwrap_or(0) as f64,
    })
}

/// The statistic on resamples of whole blocks; the ([`CONFIDENCE`]) interval's ends.
fn block_bootstrap(rows: &LevelRows, statistic: &Statistic<'_>, seed: u64) -> Option<(f64, f64)> {
    let (index, count) = blocks(rows);
    let mut by_block: Vec<Vec<&Sample>> = vec![Vec::new(); count];
    for (sample, &block) in rows.judged.iter().zip(&index) {
        by_block[block].push(sample);
    }
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut estimates: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            let resample: Vec<&Sample> = (0..count)
                .flat_map(|_| by_block[rng.usize(..count)].iter().copied())
                .collect();
            statistic(&resample)
        })
        .collect();
    if estimates.is_empty() {
        return None;
    }
    estimates.sort_by(f64::total_cmp);
    let at = |p: f64| estimates[((p * estimates.len() as f64) as usize).min(estimates.len() - 1)];
    Some((at((1.0 - CONFIDENCE) / 2.0), at((1.0 + CONFIDENCE) / 2.0)))
}

/// Judges one SLO on the level's judged rows.
pub fn judge_slo(threshold: &Threshold, rows: &LevelRows) -> SloJudgement {
    let op = threshold.op.as_deref().map(|op| rows.op_index(op));
    let window_s = rows
        .window_ns()
        .map_or(0.0, |(first, last)| (last - first) as f64 / 1e9);
    let unit = threshold.unit();
    let mut judgement = SloJudgement {
        slo: threshold.text.clone(),
        observed: None,
        low: None,
        high: None,
        limit: threshold.limit,
        unit,
        outcome: Outcome::Fail,
    };
    // An op no row has: nothing measured, which fails (as a threshold does).
    let Some(op) = op
        .unwrap_or(Some(u16::MAX))
        .map(|op| (op != u16::MAX).then_some(op))
    else {
        return judgement;
    };
    let statistic = statistic(threshold, op, window_s);
    let all: Vec<&Sample> = rows.judged.iter().collect();
    judgement.observed = statistic(&all);
    let Some(observed) = judgement.observed else {
        return judgement;
    };
    let (low, mut high) = match threshold.metric {
        Metric::Max | Metric::Throughput => (observed, observed),
        _ => block_bootstrap(rows, &statistic, 0x5eed).unwrap_or((observed, observed)),
    };
    if threshold.metric == Metric::ErrorRate {
        // No failure among a few hundred rows resamples to [0, 0], which proves little:
        // the interval reaches at least the Wilson bound of the counts.
        let chosen = rows
            .judged
            .iter()
            .filter(|s| op.is_none_or(|op| s.op == op));
        let n = chosen.clone().count() as f64;
        high = high.max(wilson_upper(observed * n, n));
    }
    (judgement.low, judgement.high) = (Some(low), Some(high));
    let (best, worst) = match threshold.comparison {
        Comparison::Below | Comparison::AtMost => (low, high),
        Comparison::Above | Comparison::AtLeast => (high, low),
    };
    judgement.outcome = match (threshold.passes(worst), threshold.passes(best)) {
        (true, _) => Outcome::Pass,
        (false, false) => Outcome::Fail,
        (false, true) => Outcome::Uncertain,
    };
    judgement
}

/// The fewest judged rows on which every SLO in `slos` can pass at all: an error rate below
/// `L` is shown only when even a level without one failure has its interval's top (the Wilson
/// bound, see [`judge_slo`]) under `L` — about 381 rows for 1 %, 3,838 for 0.1 %. A capacity
/// level at a rate too low to send that many in its window is lengthened rather than called
/// uncertain for want of rows. Other SLOs set no floor (0).
pub fn rows_to_pass(slos: &[Threshold]) -> u64 {
    slos.iter()
        .filter(|slo| slo.metric == Metric::ErrorRate)
        .filter(|slo| matches!(slo.comparison, Comparison::Below | Comparison::AtMost))
        .filter(|slo| slo.limit > 0.0 && slo.limit < 1.0)
        .map(|slo| {
            // wilson_upper(0, n) = z² / (n + z²): below the limit once n > z²(1 − L) / L.
            let z2 = 1.96f64 * 1.96;
            let mut n = (z2 * (1.0 - slo.limit) / slo.limit).ceil().max(1.0);
            while !slo.passes(wilson_upper(0.0, n)) {
                n += 1.0;
            }
            n as u64
        })
        .max()
        .unwrap_or(0)
}

/// The upper end of the Wilson score interval for `events` in `n` trials (z = 1.96).
pub fn wilson_upper(events: f64, n: f64) -> f64 {
    if n <= 0.0 {
        return 1.0;
    }
    let z2 = 1.96f64 * 1.96;
    let p = events / n;
    let centre = p + z2 / (2.0 * n);
    let spread = 1.96 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre + spread) / (1.0 + z2 / n)).min(1.0)
}

/// What the search hands the judge about one capacity level: its SLOs judged on its rows,
/// whether it was stopped early (and why), and whether the user cut it short.
#[derive(Debug, Clone)]
pub struct LevelFacts {
    pub slos: Vec<SloJudgement>,
    /// The target was down for a moment during the level ([`outage`]).
    pub outage: Option<Outage>,
    pub aborted: Option<Abort>,
    /// Ctrl-C or SIGTERM cut it short: recorded, not judged.
    pub interrupted: bool,
}

impl LevelFacts {
    /// The SLOs it crossed (or could not be told apart from).
    pub fn crossed(&self) -> Vec<String> {
        self.slos
            .iter()
            .filter(|s| s.outcome != Outcome::Pass)
            .map(|s| s.slo.clone())
            .collect()
    }

    /// An error-rate SLO crossed, or the level stopped for its failures: the errors' limit.
    pub fn error_findings(&self) -> Vec<Finding> {
        let crossed_errors = self
            .slos
            .iter()
            .any(|s| s.outcome != Outcome::Pass && s.unit == "fraction");
        let stopped = matches!(self.aborted, Some(Abort::Errors { .. }));
        let why = match (&self.aborted, stopped) {
            (Some(abort), true) => format!("stopped early: {abort}"),
            _ => "an error-rate SLO was crossed".to_string(),
        };
        match crossed_errors || stopped {
            true => vec![Finding::limit(Rule::ErrorsSlo, Seen::Text(why))],
            false => Vec::new(),
        }
    }

    /// What failed the level, each a sentence: being stopped early and each SLO crossed.
    pub fn failures(&self) -> Vec<String> {
        let mut reasons: Vec<String> = self
            .aborted
            .iter()
            .map(|abort| format!("stopped early: {abort}"))
            .collect();
        for slo in &self.slos {
            let crossed = match slo.outcome {
                Outcome::Pass => continue,
                Outcome::Fail => "crossed",
                Outcome::Uncertain => "could not be told apart from its limit",
            };
            reasons.push(format!("{} {crossed}: {}", slo.slo, observed_text(slo)));
        }
        reasons
    }
}

/// A moment the target was down: its connection failures bunched in one stretch of the
/// level, the rest of the level nearly clean.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outage {
    /// The level's connection failures (refused, timed out, reset).
    pub failures: u64,
    /// How long the stretch holding `outage_cluster_share` of them lasted.
    pub span_ns: i64,
    /// The judged window.
    pub window_ns: i64,
}

/// An outage, by the contract's rule (`outage_cluster_share`, `outage_max_span_share`,
/// `max_error_rate`): most connection failures within a short stretch of the judged window,
/// and no more other failures than the errors share. A limiter's answers (429, 503) are
/// responses, not connection failures, and spread through the level. A level that ended
/// inside the stretch — its watcher stops a level whose requests fail — cannot show how long
/// it lasted, wherever in the level it began: it is an outage when nothing sent after it began
/// succeeded (requests already in flight may still complete). A limit lets some requests
/// through; measuring the level again tells a moment from a limit (which fails again) or a
/// target that is gone (which cannot be reached before it).
pub fn outage(rows: &LevelRows) -> Option<Outage> {
    let (first, last) = rows.window_ns()?;
    let mut ends: Vec<i64> = rows
        .judged
        .iter()
        .filter(|s| s.connection_failed)
        .map(|s| s.end_ns)
        .collect();
    if ends.len() < 2 {
        return None;
    }
    ends.sort_unstable();
    let cluster =
        ((T.outage_cluster_share * ends.len() as f64).ceil() as usize).clamp(2, ends.len());
    let (start, span_ns) = (0..=ends.len() - cluster)
        .map(|i| (i, ends[i + cluster - 1] - ends[i]))
        .min_by_key(|c| c.1)?;
    let window_ns = last - first;
    let short = T.outage_max_span_share * window_ns as f64;
    let began_ns = ends[start];
    let ended_inside = rows
        .judged
        .iter()
        .all(|s| s.failed || s.intended_ns + s.send_lag_ns < began_ns);
    if span_ns as f64 > short && !ended_inside {
        return None;
    }
    let other_failures = rows
        .judged
        .iter()
        .filter(|s| s.failed && !s.connection_failed)
        .count() as f64;
    if other_failures > T.max_error_rate * rows.judged.len() as f64 {
        return None;
    }
    Some(Outage {
        failures: ends.len() as u64,
        span_ns,
        window_ns,
    })
}

/// Why a running level was stopped at once, far past the SLO; capacity.json has its sentence.
#[derive(Debug, Clone, PartialEq)]
pub enum Abort {
    /// This share of the requests so far failed.
    Errors { failed_share: f64 },
    /// A latency SLO's percentile reached this, over `level_abort_latency_factor` × its limit.
    Latency {
        percentile: f64,
        value_ns: f64,
        limit_ns: f64,
    },
}

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Abort::Errors { failed_share } => {
                write!(f, "{:.1}% of requests failed", failed_share * 100.0)
            }
            Abort::Latency {
                percentile,
                value_ns,
                limit_ns,
            } => write!(
                f,
                "p{percentile} reached {}, over {}× the SLO's {}",
                crate::units::duration(*value_ns),
                T.level_abort_latency_factor,
                crate::units::duration(*limit_ns)
            ),
        }
    }
}

impl Serialize for Abort {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A capacity level's watch over its rows as the writer hands them over: it keeps them, and
/// says once when they are far past the SLO (the contract's `level_abort_*`), and why.
pub struct LevelWatch {
    slos: Vec<Threshold>,
    rows: LevelRows,
    aborted: Option<Abort>,
}

impl LevelWatch {
    pub fn new(slos: Vec<Threshold>) -> Self {
        LevelWatch {
            slos,
            rows: LevelRows::default(),
            aborted: None,
        }
    }

    /// Takes the writer's next batch; true the first time the rows are far past the SLO
    /// (the level is to stop). Batches after that are not kept.
    pub fn take(&mut self, batch: Vec<(Sample, bool)>) -> bool {
        if self.aborted.is_some() {
            return false;
        }
        self.rows.extend(batch);
        self.aborted = far_past(&self.rows, &self.slos);
        self.aborted.is_some()
    }

    /// Why the level was stopped early, if it was.
    pub fn aborted(self) -> Option<Abort> {
        self.aborted
    }

    /// Watches a running level: takes its samples as the writer hands them over and stops
    /// the level (drains the run) as soon as its rows are far past the SLO; returns why it
    /// stopped it, once the writer has handed over its last samples.
    pub fn spawn(
        mut self,
        samples: SampleReceiver,
        stop: StopSignal,
    ) -> tokio::task::JoinHandle<Option<Abort>> {
        tokio::spawn(async move {
            while let Ok(batch) = samples.recv_async().await {
                if self.take(batch) {
                    stop.drain(ExitReason::DurationElapsed);
                }
            }
            self.aborted()
        })
    }
}

/// Why the rows so far are far past the SLO, if they are (the contract's `level_abort_*`).
fn far_past(rows: &LevelRows, slos: &[Threshold]) -> Option<Abort> {
    let all: Vec<_> = rows.warmup.iter().chain(&rows.judged).collect();
    if (all.len() as f64) < T.level_abort_min_rows {
        return None;
    }
    let failed = all.iter().filter(|s| s.failed).count() as f64 / all.len() as f64;
    if failed > error_abort_share(slos) {
        return Some(Abort::Errors {
            failed_share: failed,
        });
    }
    let mut latencies: Vec<i64> = all
        .iter()
        .filter(|s| s.responded)
        .map(|s| s.from_intended_ns)
        .collect();
    for slo in slos {
        let Metric::Percentile(q) = slo.metric else {
            continue;
        };
        if latencies.is_empty() || matches!(slo.comparison, Comparison::Above | Comparison::AtLeast)
        {
            continue;
        }
        let value = quantile(&mut latencies, q / 100.0) as f64;
        if value > T.level_abort_latency_factor * slo.limit {
            return Some(Abort::Latency {
                percentile: q,
                value_ns: value,
                limit_ns: slo.limit,
            });
        }
    }
    None
}

/// The failed share above which a running level stops: the contract's, or a multiple of an
/// error-rate SLO when that is higher.
fn error_abort_share(slos: &[Threshold]) -> f64 {
    slos.iter()
        .filter(|t| t.metric == Metric::ErrorRate)
        .map(|t| t.limit * T.level_abort_error_slo_factor)
        .fold(T.level_abort_error_share, f64::max)
}

/// "observed 61.2ms (95% CI 55.0ms–70.1ms)".
pub fn observed_text(slo: &SloJudgement) -> String {
    let show = |value: f64| match slo.unit {
        "ns" => crate::units::duration(value),
        "fraction" => format!("{:.2}%", value * 100.0),
        _ => format!("{value:.1}/s"),
    };
    match (slo.observed, slo.low, slo.high) {
        (None, ..) => "nothing measured".to_string(),
        (Some(v), Some(low), Some(high)) if low < high => format!(
            "observed {} ({:.0}% CI {}–{})",
            show(v),
            CONFIDENCE * 100.0,
            show(low),
            show(high)
        ),
        (Some(v), ..) => format!("observed {}", show(v)),
    }
}

/// The tightest upper limit on latency among the SLOs: what latency growth is measured
/// against in a capacity level.
pub fn latency_reference(slos: &[Threshold]) -> Option<f64> {
    slos.iter()
        .filter(|t| !matches!(t.metric, Metric::ErrorRate | Metric::Throughput))
        .filter(|t| matches!(t.comparison, Comparison::Below | Comparison::AtMost))
        .map(|t| t.limit)
        .reduce(f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::schedule::{schedule, slope, sustainability};

    fn rows(latency_at: impl Fn(f64) -> i64, rate_rps: f64, seconds: f64) -> LevelRows {
        let n = (rate_rps * seconds) as i64;
        let gap = (1e9 / rate_rps) as i64;
        let judged = (0..n)
            .map(|i| {
                let intended_ns = i * gap;
                let latency = latency_at(intended_ns as f64 / 1e9);
                Sample {
                    intended_ns,
                    from_intended_ns: latency,
                    end_ns: intended_ns + latency,
                    send_lag_ns: 0,
                    op: 0,
                    failed: false,
                    responded: true,
                    connection_failed: false,
                }
            })
            .collect();
        LevelRows {
            ops: vec!["GET /".into()],
            judged,
            warmup: Vec::new(),
        }
    }

    fn threshold(text: &str) -> Threshold {
        text.parse().unwrap()
    }

    /// The contract's vectors, which the analysis's open-rate sweeps are held to as well.
    #[test]
    fn a_flat_level_passes_with_an_interval_around_its_percentile() {
        let level = rows(
            |t| 10_000_000 + ((t * 1000.0) as i64 % 7) * 1_000_000,
            500.0,
            8.0,
        );
        let j = judge_slo(&threshold("p99<50ms"), &level);
        assert_eq!(j.outcome, Outcome::Pass);
        let (low, high) = (j.low.unwrap(), j.high.unwrap());
        assert!(
            low <= j.observed.unwrap() && j.observed.unwrap() <= high,
            "{j:?}"
        );
        let s = sustainability(&level, 0, Some(50e6));
        assert!(s.problems.is_empty(), "{s:?}");
    }

    #[test]
    fn a_percentile_on_the_limit_is_uncertain_and_far_past_it_fails() {
        // 1 % of the rows, all in one block, are slow: whether the p99 is slow depends on
        // how often a resample draws that block.
        let level = rows(
            |t| {
                if (2.0..2.08).contains(&t) {
                    80_000_000
                } else {
                    10_000_000
                }
            },
            500.0,
            8.0,
        );
        let j = judge_slo(&threshold("p99<50ms"), &level);
        assert_eq!(j.outcome, Outcome::Uncertain, "{j:?}");
        let j = judge_slo(&threshold("p99<5ms"), &level);
        assert_eq!(j.outcome, Outcome::Fail, "{j:?}");
    }

    #[test]
    fn latency_growing_through_the_level_is_not_sustainable() {
        let level = rows(|t| 10_000_000 + (t * 20e6) as i64, 500.0, 8.0);
        let s = sustainability(&level, 0, Some(50e6));
        assert!(s.problems.iter().any(|p| p.contains("grew")), "{s:?}");
        assert!(sustainability(&level, 3, None)
            .problems
            .iter()
            .any(|p| p.contains("dropped")));
    }

    #[test]
    fn error_rate_slos_need_enough_rows_to_pass_without_a_failure() {
        let one_percent = [threshold("error_rate<1%"), threshold("p99<100ms")];
        let n = rows_to_pass(&one_percent);
        assert_eq!(n, 381);
        assert!(wilson_upper(0.0, n as f64) < 0.01);
        assert!(wilson_upper(0.0, (n - 1) as f64) >= 0.01);
        // A level of exactly that many rows, none failed, passes; one row fewer cannot.
        for (count, outcome) in [(n, Outcome::Pass), (n - 1, Outcome::Uncertain)] {
            let level = rows(|_| 1_000_000, count as f64 / 4.0, 4.0);
            assert_eq!(level.judged.len() as u64, count);
            let judged = judge_slo(&one_percent[0], &level);
            assert_eq!(judged.outcome, outcome, "{count} rows: {judged:?}");
        }
        assert_eq!(rows_to_pass(&[threshold("error_rate<0.1%")]), 3_838);
        assert_eq!(
            rows_to_pass(&[threshold("p99<100ms"), threshold("error_rate>1%")]),
            0
        );
    }

    #[test]
    fn error_rates_and_unknown_ops_are_judged() {
        let mut level = rows(|_| 1_000_000, 200.0, 5.0);
        for (i, s) in level.judged.iter_mut().enumerate() {
            s.failed = i % 50 == 0;
        }
        assert_eq!(
            judge_slo(&threshold("error_rate<1%"), &level).outcome,
            Outcome::Fail
        );
        assert_eq!(
            judge_slo(&threshold("error_rate<10%"), &level).outcome,
            Outcome::Pass
        );
        let missing = judge_slo(&threshold("p99[POST /x]<1s"), &level);
        assert_eq!((missing.outcome, missing.observed), (Outcome::Fail, None));
    }

    #[test]
    fn sends_that_start_late_mean_the_client_did_not_keep_its_schedule() {
        let mut level = rows(|_| 50_000_000, 200.0, 5.0);
        assert!(schedule(&level, 10_000_000).kept);
        for (i, s) in level.judged.iter_mut().enumerate() {
            s.send_lag_ns = if i % 10 == 0 { 40_000_000 } else { 1_000 };
        }
        let judged = schedule(&level, 10_000_000);
        assert!(!judged.kept, "{judged:?}");
        assert!((judged.late_share - 0.1).abs() < 1e-9, "{judged:?}");
        assert_eq!(judged.send_lag_p99_ns, Some(40e6));
        assert_eq!(judged.lag_share_of_latency, Some(0.8));
        // The same late sends under a server queue ten times longer: the server's latency.
        for s in &mut level.judged {
            s.from_intended_ns = 500_000_000;
        }
        assert!(schedule(&level, 10_000_000).kept);
    }

    #[test]
    fn quantiles_are_nearest_rank_and_slopes_least_squares() {
        let mut values: Vec<i64> = (1..=100).collect();
        assert_eq!(quantile(&mut values, 0.99), 99);
        assert_eq!(quantile(&mut values, 0.5), 50);
        let (b, t) = slope(&[(0.0, 1.0), (1.0, 3.1), (2.0, 4.9), (3.0, 7.0)]);
        assert!((b - 2.0).abs() < 0.1 && t > 10.0, "{b} {t}");
    }

    #[test]
    fn a_running_level_is_stopped_by_the_contracts_abort_vectors() {
        let contract: serde_json::Value =
            serde_json::from_str(crate::verdict::rule::VERDICT_JSON).unwrap();
        for v in contract["abort_vectors"].as_array().unwrap() {
            let n = v["rows"].as_u64().unwrap() as usize;
            let failed = (v["failed_share"].as_f64().unwrap() * n as f64).round() as usize;
            let ratio = v["worst_latency_ratio"].as_f64().unwrap();
            let mut level = rows(|_| (ratio * 10e6) as i64, 100.0, n as f64 / 100.0);
            level.judged.truncate(n);
            for s in level.judged.iter_mut().take(failed) {
                s.failed = true;
            }
            let mut slos = vec![threshold("p99<10ms")];
            if let Some(limit) = v["error_slo"].as_f64() {
                slos.push(threshold(&format!("error_rate<{}%", limit * 100.0)));
            }
            let got = match far_past(&level, &slos) {
                Some(Abort::Errors { .. }) => Some("errors"),
                Some(Abort::Latency { .. }) => Some("latency"),
                None => None,
            };
            assert_eq!(got, v["abort"].as_str(), "{v}");
        }
    }

    #[test]
    fn an_outage_follows_the_contracts_vectors() {
        let contract: serde_json::Value =
            serde_json::from_str(crate::verdict::rule::VERDICT_JSON).unwrap();
        for v in contract["outage_vectors"].as_array().unwrap() {
            let f = |k: &str| v[k].as_f64().unwrap();
            let mut level = rows(|_| 1_000_000, f("rate_rps"), f("level_s"));
            let (from, to) = (f("outage_start_s"), f("outage_start_s") + f("outage_s"));
            let background = (1.0 / f("background_failed_share")).round() as usize;
            for (i, s) in level.judged.iter_mut().enumerate() {
                let t = s.intended_ns as f64 / 1e9;
                if (from..to).contains(&t) {
                    (s.failed, s.connection_failed, s.responded) = (true, true, false);
                } else if f("background_failed_share") > 0.0 && i % background == 0 {
                    s.failed = true;
                }
            }
            assert_eq!(outage(&level).is_some(), v["outage"] == true, "{v}");
        }
    }
}
