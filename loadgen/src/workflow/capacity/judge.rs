//! Judging one level from its rows: each SLO with a confidence interval, and whether the
//! level is sustainable at all.
//!
//! The interval is a **block bootstrap** over time blocks of the judged window: latencies
//! next to each other in time are correlated (a queue that builds up lifts a whole stretch),
//! so resampling single requests would claim far more certainty than the level holds;
//! resampling whole blocks keeps that correlation. An SLO passes when its whole interval is
//! on the passing side, fails when the whole interval is on the failing side, and is
//! *uncertain* otherwise — the caller extends the level rather than guess.
//!
//! Sustainable means: latency from the intended send time does not trend up through the
//! level (a least-squares slope over its blocks, significant and material), no send was
//! dropped at the in-flight cap, and the rate of successful completions is within
//! `achieved_shortfall` of the offered one — a number the analysis's open-rate sweeps judge by
//! too, so it lives in `contract/sustainability.json` with test vectors, compiled in here. This
//! module computes; it runs nothing and reads nothing.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use super::rows::{LevelRows, Sample};
use crate::report::thresholds::{Comparison, Metric, Threshold};

/// Resamples per bootstrap.
const RESAMPLES: usize = 400;
/// The judged window is cut into about this many blocks (each at most [`MAX_BLOCK_NS`]).
const BLOCKS: i64 = 20;
const MAX_BLOCK_NS: i64 = 1_000_000_000;
/// Confidence of the intervals.
pub const CONFIDENCE: f64 = 0.95;
/// `contract/sustainability.json`: when an open-model level kept up, shared with the analysis.
const SUSTAINABILITY_JSON: &str = include_str!("../../../../contract/sustainability.json");

#[derive(Debug, Deserialize)]
struct SustainabilityRule {
    achieved_shortfall: f64,
    /// More than this share of a level's judged sends started late...
    late_share: f64,
    /// ... and the p99 send lag is at least this share of the p99 latency from intended time
    /// (the lag explains the latency, rather than a server queue): the client did not keep
    /// its schedule.
    lag_share_of_latency: f64,
}

static RULE: LazyLock<SustainabilityRule> = LazyLock::new(|| {
    serde_json::from_str(SUSTAINABILITY_JSON).expect("contract/sustainability.json is valid")
});

/// A level whose completions fall more than this share below the offered rate is not
/// sustainable (the contract's `achieved_shortfall`).
pub fn achieved_shortfall() -> f64 {
    RULE.achieved_shortfall
}

/// Whether a level's sends were on time (the contract's rule): at most `late_share` of them
/// late, or a lag that does not explain the latency (`None`: nothing measured).
pub fn schedule_kept(late_share: f64, lag_share_of_latency: Option<f64>) -> bool {
    late_share <= RULE.late_share
        || lag_share_of_latency.is_none_or(|share| share < RULE.lag_share_of_latency)
}

/// Whether a level kept up: nothing dropped, and `completed` (requests or a rate) at least
/// `1 - achieved_shortfall` of `sent` (the contract's rule and vectors).
pub fn kept_up(dropped: u64, sent: f64, completed: f64) -> bool {
    dropped == 0 && sent > 0.0 && completed >= (1.0 - achieved_shortfall()) * sent
}
/// The slope's t statistic from which latency is trending up.
const SLOPE_T: f64 = 3.0;
/// ... and the growth over the level, as a share of the latency reference, that matters.
const MATERIAL_GROWTH: f64 = 0.2;

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

/// Whether a level could have gone on at its rate.
#[derive(Debug, Clone, Serialize)]
pub struct Sustainability {
    /// Latency from intended time: its trend through the level (ns per second) and t value.
    pub slope_ns_per_s: f64,
    pub slope_t: f64,
    /// How much the trend adds over the judged window, ns.
    pub growth_ns: f64,
    /// Completions per second inside the judged window.
    pub achieved_rps: f64,
    /// Sends scheduled per second inside the judged window.
    pub offered_rps: f64,
    pub dropped: u64,
    /// Why not, each a sentence; empty when sustainable.
    pub problems: Vec<String>,
}

/// Whether the client kept the level's schedule. In the open model the dispatcher hands a
/// send off at its intended time whatever the server does (at the in-flight cap it drops
/// it), so a send that starts late was delayed by the client itself: its CPU, its quota, or
/// other processes that kept it off the cores.
#[derive(Debug, Clone, Serialize)]
pub struct Schedule {
    /// Share of the judged sends that started more than `max_lateness` after their
    /// intended time.
    pub late_share: f64,
    /// The judged sends' p99 delay from intended time to start; `None` without rows.
    pub send_lag_p99_ns: Option<f64>,
    /// `send_lag_p99_ns` over the p99 latency from intended time; `None` without responses.
    pub lag_share_of_latency: Option<f64>,
    /// Later than this is late (the level's `max_lateness`).
    pub max_lateness_ns: i64,
    /// the contract's rule, [`schedule_kept`].
    pub kept: bool,
}

/// The schedule's judgement over the judged rows; late means later than `max_lateness_ns`.
pub fn schedule(rows: &LevelRows, max_lateness_ns: i64) -> Schedule {
    let mut lags: Vec<i64> = rows.judged.iter().map(|s| s.send_lag_ns).collect();
    let late = lags.iter().filter(|&&lag| lag > max_lateness_ns).count();
    let late_share = if lags.is_empty() {
        0.0
    } else {
        late as f64 / lags.len() as f64
    };
    let send_lag_p99_ns = (!lags.is_empty()).then(|| quantile(&mut lags, 0.99) as f64);
    let mut latencies: Vec<i64> = rows
        .judged
        .iter()
        .filter(|s| s.responded)
        .map(|s| s.from_intended_ns)
        .collect();
    let lag_share_of_latency = match (send_lag_p99_ns, latencies.is_empty()) {
        (Some(lag), false) => Some(lag / (quantile(&mut latencies, 0.99) as f64).max(1.0)),
        _ => None,
    };
    Schedule {
        late_share,
        send_lag_p99_ns,
        lag_share_of_latency,
        max_lateness_ns,
        kept: schedule_kept(late_share, lag_share_of_latency),
    }
}

/// The blocks of the judged window: each sample's block index, and the block count.
fn blocks(rows: &LevelRows) -> (Vec<usize>, usize) {
    let Some((first, last)) = rows.window_ns() else {
        return (vec![0; rows.judged.len()], 1);
    };
    let block_ns = ((last - first) / BLOCKS).clamp(1, MAX_BLOCK_NS);
    let index: Vec<usize> = rows
        .judged
        .iter()
        .map(|s| ((s.intended_ns - first) / block_ns) as usize)
        .collect();
    let count = index.last().map_or(1, |i| i + 1);
    (index, count)
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

/// The nearest-rank quantile (reorders `values`).
pub fn quantile(values: &mut [i64], q: f64) -> i64 {
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    *values.select_nth_unstable(rank - 1).1
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

/// The least-squares slope of `points` (x, y) and its t value (0 when undefined).
pub fn slope(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    if points.len() < 3 {
        return (0.0, 0.0);
    }
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    if sxx <= 0.0 {
        return (0.0, 0.0);
    }
    let b = sxy / sxx;
    let residual: f64 = points
        .iter()
        .map(|p| (p.1 - mean_y - b * (p.0 - mean_x)).powi(2))
        .sum();
    let se = (residual / (n - 2.0) / sxx).sqrt();
    let t = if se > 0.0 {
        b / se
    } else {
        f64::INFINITY * b.signum()
    };
    (b, t)
}

/// Each block's median latency from intended time, at the block's middle (s into the window).
fn block_medians(rows: &LevelRows) -> Vec<(f64, f64)> {
    let (index, count) = blocks(rows);
    let mut by_block: Vec<Vec<i64>> = vec![Vec::new(); count];
    for (sample, &block) in rows.judged.iter().zip(&index) {
        if sample.responded {
            by_block[block].push(sample.from_intended_ns);
        }
    }
    by_block
        .iter_mut()
        .enumerate()
        .filter(|(_, latencies)| !latencies.is_empty())
        .map(|(i, latencies)| (i as f64 + 0.5, quantile(latencies, 0.5) as f64))
        .collect()
}

/// Whether the level is sustainable. `reference_ns`: the latency the growth is measured
/// against (the tightest latency SLO's limit, else the level's median).
pub fn sustainability(rows: &LevelRows, dropped: u64, reference_ns: Option<f64>) -> Sustainability {
    let medians = block_medians(rows);
    let window_s = rows
        .window_ns()
        .map_or(0.0, |(first, last)| (last - first) as f64 / 1e9);
    let block_s = window_s / medians.len().max(1) as f64;
    let (per_block, t) = slope(&medians);
    let slope_ns_per_s = if block_s > 0.0 {
        per_block / block_s
    } else {
        0.0
    };
    let growth_ns = slope_ns_per_s * window_s;
    let reference = reference_ns.unwrap_or_else(|| {
        let mut all: Vec<i64> = medians.iter().map(|m| m.1 as i64).collect();
        if all.is_empty() {
            0.0
        } else {
            quantile(&mut all, 0.5) as f64
        }
    });
    let (achieved_rps, offered_rps) = rates(rows);
    // Requests in flight at the window's end complete after it: excuse them (at the least
    // latency any block saw), and two more for the window's edges.
    let in_flight_s = medians.iter().map(|m| m.1).fold(f64::INFINITY, f64::min) / 1e9;
    let excused_rps = if window_s > 0.0 && in_flight_s.is_finite() {
        (offered_rps * in_flight_s + 2.0) / window_s
    } else {
        0.0
    };
    let mut problems = Vec::new();
    if t > SLOPE_T && growth_ns > MATERIAL_GROWTH * reference.max(1e6) {
        problems.push(format!(
            "latency from intended time grew {} through the level (t = {t:.1})",
            crate::units::duration(growth_ns)
        ));
    }
    if dropped > 0 {
        problems.push(format!("{dropped} sends were dropped at the in-flight cap"));
    }
    if offered_rps > 0.0 && !kept_up(0, offered_rps, achieved_rps + excused_rps) {
        problems.push(format!(
            "achieved {achieved_rps:.1} req/s, more than {}% below the {offered_rps:.1} req/s offered",
            achieved_shortfall() * 100.0
        ));
    }
    Sustainability {
        slope_ns_per_s,
        slope_t: t,
        growth_ns,
        achieved_rps,
        offered_rps,
        dropped,
        problems,
    }
}

/// Successful completions per second inside the judged window (warm-up rows ending in it
/// included) — a request answered with an error was not served — and sends scheduled per
/// second in it.
fn rates(rows: &LevelRows) -> (f64, f64) {
    let Some((first, last)) = rows.window_ns() else {
        return (0.0, 0.0);
    };
    let window_s = (last - first) as f64 / 1e9;
    let ended = rows
        .warmup
        .iter()
        .chain(&rows.judged)
        .filter(|s| !s.failed && s.end_ns >= first && s.end_ns <= last)
        .count();
    // The window holds every judged send but the last one's gap: n − 1 gaps.
    let scheduled = rows.judged.len().saturating_sub(1);
    (ended as f64 / window_s, scheduled as f64 / window_s)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn kept_up_follows_the_contracts_vectors() {
        let contract: serde_json::Value = serde_json::from_str(SUSTAINABILITY_JSON).unwrap();
        let vectors = contract["vectors"].as_array().unwrap();
        assert!(vectors.len() >= 5);
        for v in vectors {
            let (dropped, sent, completed) = (
                v["dropped"].as_u64().unwrap(),
                v["sent"].as_f64().unwrap(),
                v["completed"].as_f64().unwrap(),
            );
            assert_eq!(kept_up(dropped, sent, completed), v["kept"] == true, "{v}");
        }
        for v in contract["schedule_vectors"].as_array().unwrap() {
            let (late, lag) = (
                v["late_share"].as_f64().unwrap(),
                v["lag_share_of_latency"].as_f64(),
            );
            assert_eq!(schedule_kept(late, lag), v["kept"] == true, "{v}");
        }
    }

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
