//! Whether an open-model run kept up with its schedule, judged from its rows — one rule for
//! every open run: a plain `loadgen run --rate`, each level of `loadgen capacity`, each level of
//! an open-rate sweep.
//!
//! Sustainable means: latency from the intended send time does not trend up through the
//! run (a least-squares slope over time blocks of the judged window, significant and
//! material), no send was dropped at the in-flight cap, and the rate of successful completions
//! is within `achieved_shortfall` of the offered one. Whether the *client* kept the schedule
//! (sends that started late, and a lag that explains the latency) is the other half. Both
//! numbers live in `contract/sustainability.json` with test vectors, compiled in here. This
//! module computes; it reads nothing but the rows it is given.

use serde::Serialize;

use super::rule::S;
use crate::stats::samples::LevelRows;

/// The judged window is cut into about this many blocks (each at most [`MAX_BLOCK_NS`]).
const BLOCKS: i64 = 20;
const MAX_BLOCK_NS: i64 = 1_000_000_000;

/// A level whose completions fall more than this share below the offered rate is not
/// sustainable (the contract's `achieved_shortfall`).
pub fn achieved_shortfall() -> f64 {
    S.achieved_shortfall
}

/// Whether a level's sends were on time (the contract's rule): at most `late_share` of them
/// late, or a lag that does not explain the latency (`None`: nothing measured).
pub fn schedule_kept(late_share: f64, lag_share_of_latency: Option<f64>) -> bool {
    late_share <= S.late_share
        || lag_share_of_latency.is_none_or(|share| share < S.lag_share_of_latency)
}

/// Whether a level kept up: nothing dropped, and `completed` (requests or a rate) at least
/// `1 - achieved_shortfall` of `sent` (the contract's rule and vectors).
pub fn kept_up(dropped: u64, sent: f64, completed: f64) -> bool {
    dropped == 0 && sent > 0.0 && completed >= (1.0 - achieved_shortfall()) * sent
}
/// Whether latency grew materially through the run: a slope with a t value above the
/// contract's `growth_slope_t` that adds more than its `material_growth` of the reference.
pub fn grew(slope_t: f64, growth_share: f64) -> bool {
    slope_t > S.growth_slope_t && growth_share > S.material_growth
}

/// Whether a level could have gone on at its rate.
#[derive(Debug, Clone, Default, Serialize)]
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
#[derive(Debug, Clone, Default, Serialize)]
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
pub fn blocks(rows: &LevelRows) -> (Vec<usize>, usize) {
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

/// The nearest-rank quantile (reorders `values`).
pub fn quantile(values: &mut [i64], q: f64) -> i64 {
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    *values.select_nth_unstable(rank - 1).1
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
    if grew(t, growth_ns / reference.max(S.growth_reference_min_ns)) {
        problems.push(format!(
            "latency from the intended send grew {} from the run's start to its end, a steady \
             trend (its slope's t = {t:.1}, above {:.0})",
            crate::units::duration(growth_ns),
            S.growth_slope_t
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

    #[test]
    fn kept_up_follows_the_contracts_vectors() {
        let contract: serde_json::Value =
            serde_json::from_str(crate::verdict::rule::SUSTAINABILITY_JSON).unwrap();
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
    fn growth_follows_the_contracts_vectors() {
        let contract: serde_json::Value =
            serde_json::from_str(crate::verdict::rule::SUSTAINABILITY_JSON).unwrap();
        for v in contract["growth_vectors"].as_array().unwrap() {
            let (t, share) = (
                v["slope_t"].as_f64().unwrap(),
                v["growth_share"].as_f64().unwrap(),
            );
            assert_eq!(grew(t, share), v["grew"] == true, "{v}");
        }
    }
}
