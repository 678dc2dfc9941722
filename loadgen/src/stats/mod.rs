//! Statistics: live counters for the progress line, and exact per-op aggregates for the summary.
//!
//! Two consumers with different needs. The progress line reads [`LiveCounters`] — a handful of
//! relaxed atomics the workers bump — and never blocks anyone. The summary comes from
//! [`Aggregator`], which the record writer thread feeds with every row it writes, so the
//! console percentiles describe exactly the rows on disk (at HDR precision, 3 significant
//! digits). Latency statistics cover requests that got an HTTP response (`status > 0`);
//! transport failures are counted by class but their time-to-failure is not a latency.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use hdrhistogram::Histogram;

use crate::record::{ErrorClass, RequestRecord};

/// Counters read by the progress line while the run goes on.
#[derive(Debug, Default)]
pub struct LiveCounters {
    pub requests: AtomicU64,
    pub failures: AtomicU64,
    /// Total time workers spent blocked handing record batches to the writer.
    pub handoff_blocked_ns: AtomicU64,
}

impl LiveCounters {
    pub fn count(&self, failed: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }
}

/// Longest latency the histograms track exactly; longer values are clamped to it.
const MAX_TRACKED_NS: u64 = 3_600 * 1_000_000_000;

/// Aggregates for one op.
#[derive(Debug, Clone)]
pub struct OpAggregate {
    pub requests: u64,
    pub failures: u64,
    pub errors: [u64; ErrorClass::ALL.len()],
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Latency of requests that got a response, in ns.
    pub latency_ns: Histogram<u64>,
}

impl OpAggregate {
    fn new() -> Self {
        OpAggregate {
            requests: 0,
            failures: 0,
            errors: [0; ErrorClass::ALL.len()],
            bytes_sent: 0,
            bytes_received: 0,
            latency_ns: Histogram::new_with_bounds(1, MAX_TRACKED_NS, 3)
                .expect("static histogram bounds are valid"),
        }
    }
}

/// Exact per-op counts and latency histograms over every recorded row.
#[derive(Debug, Clone)]
pub struct Aggregator {
    pub ops: Vec<OpAggregate>,
    /// Earliest `start_ns` and latest request end seen, for wall time.
    pub first_start_ns: Option<i64>,
    pub last_end_ns: Option<i64>,
}

impl Aggregator {
    pub fn new(op_count: usize) -> Self {
        Aggregator {
            ops: (0..op_count).map(|_| OpAggregate::new()).collect(),
            first_start_ns: None,
            last_end_ns: None,
        }
    }

    pub fn observe(&mut self, r: &RequestRecord) {
        let op = &mut self.ops[usize::from(r.op)];
        op.requests += 1;
        op.bytes_sent += r.bytes_sent;
        op.bytes_received += r.bytes_received;
        if let Some(class) = r.error {
            op.failures += 1;
            op.errors[class.index()] += 1;
        }
        if r.status > 0 {
            let ns = u64::try_from(r.latency_ns).unwrap_or(0).clamp(1, MAX_TRACKED_NS);
            op.latency_ns.record(ns).expect("value clamped into range");
        }
        let end_ns = r.start_ns + r.latency_ns;
        self.first_start_ns = Some(self.first_start_ns.map_or(r.start_ns, |s| s.min(r.start_ns)));
        self.last_end_ns = Some(self.last_end_ns.map_or(end_ns, |e| e.max(end_ns)));
    }

    pub fn requests(&self) -> u64 {
        self.ops.iter().map(|o| o.requests).sum()
    }

    pub fn failures(&self) -> u64 {
        self.ops.iter().map(|o| o.failures).sum()
    }

    /// Failures by error class over all ops, classes with no failures left out.
    pub fn errors_by_class(&self) -> BTreeMap<ErrorClass, u64> {
        let mut out = BTreeMap::new();
        for op in &self.ops {
            for (class, &n) in ErrorClass::ALL.iter().zip(&op.errors) {
                if n > 0 {
                    *out.entry(*class).or_insert(0) += n;
                }
            }
        }
        out
    }
}
