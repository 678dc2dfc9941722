//! Live per-op metrics for `--metrics-addr`: requests by op and error class, late sends, and a
//! latency histogram per op with fixed buckets, as relaxed atomics the workers bump.
//!
//! They exist only when a run serves metrics (the worker checks an `Option`), so a run without
//! `--metrics-addr` pays nothing. They are for watching a run, not for its results: the summary
//! and the thresholds come from the exact aggregates of the rows on disk ([`super::Aggregator`]).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::record::ErrorClass;

/// Upper bounds of the latency buckets, in seconds (Prometheus' `le`), 1 ms to 10 s; a last,
/// implicit `+Inf` bucket holds the rest.
pub const BUCKET_BOUNDS_S: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// One op's counters.
#[derive(Debug)]
pub struct OpLive {
    /// Requests by outcome: index 0 succeeded, `1 + i` failed with `ErrorClass::ALL[i]`.
    pub outcomes: Vec<AtomicU64>,
    /// Requests that got a response, by latency bucket (not cumulative; the last is `+Inf`).
    pub buckets: Vec<AtomicU64>,
    pub latency_sum_ns: AtomicU64,
}

/// Every op's live counters, and the open model's late sends.
#[derive(Debug)]
pub struct LiveMetrics {
    pub ops: Vec<OpLive>,
    /// Open model: sends that started more than `max_lateness_ns` after their intended time.
    pub late: AtomicU64,
    pub max_lateness_ns: i64,
}

impl LiveMetrics {
    pub fn new(op_count: usize, max_lateness_ns: i64) -> Self {
        let zeros = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect();
        LiveMetrics {
            ops: (0..op_count)
                .map(|_| OpLive {
                    outcomes: zeros(1 + ErrorClass::ALL.len()),
                    buckets: zeros(BUCKET_BOUNDS_S.len() + 1),
                    latency_sum_ns: AtomicU64::new(0),
                })
                .collect(),
            late: AtomicU64::new(0),
            max_lateness_ns,
        }
    }

    /// Counts one finished request of `op`. `responded` is false for transport failures, whose
    /// time to fail is not a latency (as in the summary). `lateness_ns` is how long after its
    /// intended time the send started (open model).
    pub fn observe(
        &self,
        op: u16,
        error: Option<ErrorClass>,
        responded: bool,
        latency_ns: i64,
        lateness_ns: Option<i64>,
    ) {
        let Some(live) = self.ops.get(usize::from(op)) else {
            return;
        };
        let outcome = error.map_or(0, |class| {
            1 + ErrorClass::ALL
                .iter()
                .position(|c| *c == class)
                .unwrap_or(0)
        });
        live.outcomes[outcome].fetch_add(1, Ordering::Relaxed);
        if responded {
            let seconds = latency_ns as f64 / 1e9;
            let bucket = BUCKET_BOUNDS_S
                .iter()
                .position(|bound| seconds <= *bound)
                .unwrap_or(BUCKET_BOUNDS_S.len());
            live.buckets[bucket].fetch_add(1, Ordering::Relaxed);
            live.latency_sum_ns
                .fetch_add(latency_ns.max(0) as u64, Ordering::Relaxed);
        }
        if lateness_ns.is_some_and(|late| late > self.max_lateness_ns) {
            self.late.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_land_in_their_outcome_and_bucket() {
        let live = LiveMetrics::new(2, 10_000_000);
        live.observe(1, None, true, 3_000_000, None);
        live.observe(
            1,
            Some(ErrorClass::HttpStatus),
            true,
            20_000_000_000,
            Some(50_000_000),
        );
        live.observe(1, Some(ErrorClass::Timeout), false, 30_000_000_000, Some(1));
        let op = &live.ops[1];
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!(load(&op.outcomes[0]), 1);
        let status = 1 + ErrorClass::ALL
            .iter()
            .position(|c| *c == ErrorClass::HttpStatus)
            .unwrap();
        assert_eq!(load(&op.outcomes[status]), 1);
        // 3 ms is in the 5 ms bucket, 20 s in the 30 s one; the timeout has no latency.
        assert_eq!(load(&op.buckets[2]), 1);
        assert_eq!(load(&op.buckets[13]), 1);
        assert_eq!(op.buckets.iter().map(load).sum::<u64>(), 2);
        assert_eq!(load(&op.latency_sum_ns), 20_003_000_000);
        assert_eq!(load(&live.late), 1);
        assert!(live.ops[0].outcomes.iter().all(|a| load(a) == 0));
    }
}
