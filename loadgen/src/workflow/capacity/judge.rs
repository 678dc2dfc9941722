//! Judging one level's SLOs from its rows, each with a confidence interval (whether the level
//! was sustainable at all is [`crate::verdict::schedule`]'s rule, shared with every open run).
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

use crate::report::thresholds::{Comparison, Metric, Threshold};
use crate::verdict::rows::{LevelRows, Sample};
use crate::verdict::schedule::blocks;
pub use crate::verdict::schedule::{
    achieved_shortfall, quantile, schedule, sustainability, Schedule, Sustainability,
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::schedule::slope;

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
}
