//! `--rate-limit`: at most so many API requests per second are served; one arriving faster is
//! answered `503 Service Unavailable` with `Retry-After: 1` at once, as an API gateway or
//! nginx's `limit_req` does.
//!
//! A generic cell rate algorithm on one atomic: the theoretical arrival time of the next
//! request moves by one interval per request served, and a request that would push it more
//! than the burst ahead of now is refused. Lock-free, so it costs the request path nothing
//! when not configured and one compare-and-swap when it is.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Requests allowed ahead of the steady rate (nginx's `burst`): jitter in arrivals at the
/// limit is served, a rate above it is not.
const BURST_REQUESTS: f64 = 10.0;

/// A limit of `rate_rps` requests per second, from the instant it was made.
#[derive(Debug)]
pub struct RateLimit {
    started: Instant,
    interval_ns: u64,
    burst_ns: u64,
    /// When, in ns after `started`, the next request is due at the steady rate.
    due_ns: AtomicU64,
}

impl RateLimit {
    pub fn new(rate_rps: f64) -> Self {
        let interval_ns = (1e9 / rate_rps).max(1.0) as u64;
        RateLimit {
            started: Instant::now(),
            interval_ns,
            burst_ns: (BURST_REQUESTS * interval_ns as f64) as u64,
            due_ns: AtomicU64::new(0),
        }
    }

    /// Whether a request arriving now is within the limit (and counts against it if so).
    pub fn admit(&self) -> bool {
        let now_ns = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let mut due_ns = self.due_ns.load(Ordering::Relaxed);
        loop {
            let next_ns = due_ns.max(now_ns) + self.interval_ns;
            if next_ns > now_ns + self.burst_ns + self.interval_ns {
                return false;
            }
            match self.due_ns.compare_exchange_weak(
                due_ns,
                next_ns,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(seen) => due_ns = seen,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A burst all at once: the burst and one more are served, the rest refused.
    #[test]
    fn serves_the_burst_then_refuses_what_comes_faster_than_the_rate() {
        let limit = RateLimit::new(1.0);
        let admitted = (0..100).filter(|_| limit.admit()).count();
        assert_eq!(admitted, BURST_REQUESTS as usize + 1);
    }
}
