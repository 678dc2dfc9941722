//! Statistics: live counters for the progress line, and exact per-op aggregates for the summary.
//!
//! Two consumers with different needs. The progress line reads [`LiveCounters`] — a handful of
//! relaxed atomics the workers bump — and never blocks anyone. The summary comes from
//! [`Aggregator`], which the record writer thread feeds with every row it writes, so the
//! console percentiles describe exactly the rows on disk (at HDR precision, 3 significant
//! digits). Latency statistics cover requests that got an HTTP response (`status > 0`);
//! transport failures are counted by class but their time-to-failure is not a latency.

pub mod activity;
pub mod live;
mod merge;
pub mod samples;
pub mod slowest;
pub mod sparse;
pub mod tcp;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::record::{ErrorClass, RequestRecord};
use activity::Activity;
use sparse::OpHistogram;

/// Counters read by the progress line while the run goes on.
#[derive(Debug, Default)]
pub struct LiveCounters {
    pub requests: AtomicU64,
    pub failures: AtomicU64,
    /// Total time workers spent blocked handing record batches to the writer.
    pub handoff_blocked_ns: AtomicU64,
    /// Requests sent and not yet answered.
    pub in_flight: AtomicI64,
    /// Worker tasks started and not yet finished.
    pub workers_alive: AtomicI64,
    /// Payloads waiting in the producer-buffer model's buffer (0 for other models).
    pub buffer_depth: AtomicI64,
    /// Open model: sends the schedule asked for so far, and those dropped at the
    /// `--max-in-flight` cap (scheduled = rows + dropped).
    pub scheduled: AtomicU64,
    pub dropped: AtomicU64,
    /// Requests not sent, per op, because a value they use was not extracted (no rows).
    pub skipped: Box<[AtomicU64]>,
    /// Each worker's busy, waiting and alive time (read by the sampler and the summary).
    pub activity: Activity,
    /// Latency of answered requests, in the summary's buckets, for the live p50/p99.
    pub latency: LiveLatency,
}

/// The answered requests' latencies in the buckets of the summary's histograms (HDR, 3
/// significant digits, 1 ns to `MAX_TRACKED_NS`), as relaxed atomics: one increment per
/// answered request. Only the progress line reads them, and its percentiles come from the
/// same definition as the summary's — `hdrhistogram`'s `value_at_quantile` over the same
/// buckets — so a live p50 is never below the run's minimum (a bucket's lower bound was).
#[derive(Debug)]
pub struct LiveLatency {
    buckets: Box<[AtomicU64]>,
}

impl Default for LiveLatency {
    fn default() -> Self {
        LiveLatency {
            buckets: (0..=LiveLatency::index(MAX_TRACKED_NS))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
}

impl LiveLatency {
    /// log2 of half the sub-buckets of a 3-significant-digit HDR histogram (2048 of them).
    const HALF_MAGNITUDE: u32 = 10;

    /// The HDR counts index of `ns` (clamped into 1..=MAX_TRACKED_NS), as `hdrhistogram`
    /// lays out a histogram of 1 ns to `MAX_TRACKED_NS` at 3 significant digits.
    pub(crate) fn index(ns: u64) -> usize {
        let v = ns.clamp(1, MAX_TRACKED_NS);
        let sub_bucket_mask = (1u64 << (Self::HALF_MAGNITUDE + 1)) - 1;
        let bucket = (64 - (Self::HALF_MAGNITUDE + 1)) - (v | sub_bucket_mask).leading_zeros();
        let sub_bucket = v >> bucket;
        (((bucket as u64 + 1) << Self::HALF_MAGNITUDE) + sub_bucket
            - (1u64 << Self::HALF_MAGNITUDE)) as usize
    }

    /// The smallest latency in bucket `index`, in ns.
    pub(crate) fn lower_bound(index: usize) -> u64 {
        let half = 1usize << Self::HALF_MAGNITUDE;
        let bucket = (index >> Self::HALF_MAGNITUDE).saturating_sub(1);
        let sub_bucket = if index < half {
            index
        } else {
            (index & (half - 1)) + half
        };
        (sub_bucket as u64) << bucket
    }

    pub fn record(&self, ns: u64) {
        self.buckets[Self::index(ns)].fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far, to subtract an earlier snapshot from (a window).
    pub fn snapshot(&self) -> Vec<u64> {
        self.buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }

    /// The `q` quantile (0–1) of the latencies counted between `earlier` and `later`
    /// snapshots, in ns, as the summary computes it; None when none was.
    pub fn quantile(earlier: &[u64], later: &[u64], q: f64) -> Option<u64> {
        let mut histogram = new_histogram();
        for (index, (l, e)) in later
            .iter()
            .zip(earlier.iter().chain(std::iter::repeat(&0)))
            .enumerate()
        {
            let n = l.saturating_sub(*e);
            if n > 0 {
                histogram.record_n(Self::lower_bound(index), n).ok()?;
            }
        }
        (!histogram.is_empty()).then(|| histogram.value_at_quantile(q))
    }
}

impl LiveCounters {
    /// Counters for a run of `op_count` ops.
    pub fn for_ops(op_count: usize) -> Self {
        LiveCounters {
            skipped: (0..op_count).map(|_| AtomicU64::new(0)).collect(),
            ..LiveCounters::default()
        }
    }

    /// Counters for a run of `op_count` ops whose sends are late more than
    /// `max_lateness_ns` after their intended time.
    pub fn for_run(op_count: usize, max_lateness_ns: i64) -> Self {
        LiveCounters {
            activity: Activity::new(max_lateness_ns),
            ..LiveCounters::for_ops(op_count)
        }
    }

    /// A request of `op` was skipped.
    pub fn skip(&self, op: u16) {
        if let Some(n) = self.skipped.get(usize::from(op)) {
            n.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Skipped requests per op.
    pub fn skipped(&self) -> Vec<u64> {
        self.skipped
            .iter()
            .map(|n| n.load(Ordering::Relaxed))
            .collect()
    }

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

/// The aggregates so far, copied out by the record writer thread now and then for a judge
/// that watches the run (`--abort-on-fail`): the writer locks it for the copy, the judge
/// to take it; workers never see it.
#[derive(Debug, Default)]
pub struct Published {
    latest: std::sync::Mutex<Option<Aggregator>>,
}

impl Published {
    /// Replaces the copy with `stats`.
    pub fn publish(&self, stats: &Aggregator) {
        let copy = stats.clone();
        if let Ok(mut latest) = self.latest.lock() {
            *latest = Some(copy);
        }
    }

    /// A copy of the latest copy, leaving it for [`Published::take`] (a live page's look).
    pub fn peek(&self) -> Option<Aggregator> {
        self.latest.lock().ok().and_then(|latest| latest.clone())
    }

    /// The latest copy, if one came since the last take.
    pub fn take(&self) -> Option<Aggregator> {
        self.latest.lock().ok().and_then(|mut latest| latest.take())
    }
}

/// Longest latency the histograms track exactly; longer values are clamped to it.
const MAX_TRACKED_NS: u64 = 3_600 * 1_000_000_000;

/// Aggregates for one op.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpAggregate {
    pub requests: u64,
    pub failures: u64,
    pub errors: [u64; ErrorClass::ALL.len()],
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Latency of requests that got a response, in ns — from the *intended* send time when
    /// the row has one (open model), so a stalled server shows in the percentiles.
    /// Sparse while the op has few samples ([`sparse`]): a targets file's many ops each
    /// cost what their samples need.
    pub latency_ns: OpHistogram,
    /// Open model only: latency from the actual send (`latency_ns` column), for comparison.
    pub uncorrected_latency_ns: Option<OpHistogram>,
}

impl OpAggregate {
    fn new() -> Self {
        OpAggregate {
            requests: 0,
            failures: 0,
            errors: [0; ErrorClass::ALL.len()],
            bytes_sent: 0,
            bytes_received: 0,
            latency_ns: OpHistogram::new(),
            uncorrected_latency_ns: None,
        }
    }
}

/// Aggregates for one phase (group, phase, or `main`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PhaseAggregate {
    pub requests: u64,
    pub failures: u64,
    /// Which workers sent in this phase (indexed by worker id).
    pub workers_seen: Vec<bool>,
    pub first_start_ns: Option<i64>,
    pub last_end_ns: Option<i64>,
    pub latency_ns: OpHistogram,
    /// Per op: (responses, Σ latency in ns) — the mean response time of each request type
    /// in this phase, which calibration needs (R(1) per op).
    pub op_latency_sum_ns: Vec<(u64, u128)>,
}

impl PhaseAggregate {
    fn new(op_count: usize) -> Self {
        PhaseAggregate {
            op_latency_sum_ns: vec![(0, 0); op_count],
            requests: 0,
            failures: 0,
            workers_seen: Vec::new(),
            first_start_ns: None,
            last_end_ns: None,
            latency_ns: OpHistogram::new(),
        }
    }

    pub fn workers(&self) -> usize {
        self.workers_seen.iter().filter(|w| **w).count()
    }
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_TRACKED_NS, 3).expect("static histogram bounds are valid")
}

fn widen(range: &mut (Option<i64>, Option<i64>), start_ns: i64, end_ns: i64) {
    range.0 = Some(range.0.map_or(start_ns, |s| s.min(start_ns)));
    range.1 = Some(range.1.map_or(end_ns, |e| e.max(end_ns)));
}

/// Where the time of the responses went, summed over every judged row that got a response
/// with a first byte: the parts of [`RequestRecord::latency_ns`] (from the actual send), and
/// the busiest second's bytes each way. The verdict reads their shares; nothing here judges.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Components {
    /// Responses with a first byte (the rows the sums below cover).
    pub responses: u64,
    pub latency_ns: u128,
    /// Start to first response byte.
    pub ttfb_ns: u128,
    /// Start to the last request byte sent (connect included), over the rows that have it.
    pub send_ns: u128,
    pub connect_ns: u128,
    /// Responses that have `send_ns`.
    pub with_send: u64,
    /// Producer-buffer: the consumers' wait on an empty buffer, every row.
    pub queue_wait_ns: u128,
    /// Bytes sent and received per second of the run (by each row's end), for the busiest.
    pub bytes_by_second: Vec<(u64, u64)>,
    /// Responses by how long their body took after its first byte (latency − ttfb), in whole
    /// milliseconds: a body the server held for the client's delayed ACK clusters at ~40 ms.
    #[serde(default)]
    pub responses_by_body_gap_ms: BTreeMap<u32, u64>,
    /// Responses that opened a connection, by how long opening it took (`connect_ns`), in
    /// whole milliseconds: a SYN the kernel had to resend waits whole seconds.
    #[serde(default)]
    pub responses_by_connect_ms: BTreeMap<u32, u64>,
}

impl Components {
    fn observe(&mut self, r: &RequestRecord) {
        self.queue_wait_ns += r.queue_wait_ns.unwrap_or(0).max(0) as u128;
        let second = usize::try_from((r.start_ns + r.latency_ns) / 1_000_000_000).unwrap_or(0);
        if second < 86_400 {
            if self.bytes_by_second.len() <= second {
                self.bytes_by_second.resize(second + 1, (0, 0));
            }
            self.bytes_by_second[second].0 += r.bytes_sent;
            self.bytes_by_second[second].1 += r.bytes_received;
        }
        let (Some(ttfb), true) = (r.ttfb_ns, r.status > 0) else {
            return;
        };
        let ns = |v: i64| v.max(0) as u128;
        let ms = |v: i64| u32::try_from(v.max(0) / 1_000_000).unwrap_or(u32::MAX);
        *(self.responses_by_body_gap_ms)
            .entry(ms(r.latency_ns - ttfb))
            .or_default() += 1;
        if let Some(connect) = r.connect_ns {
            *self.responses_by_connect_ms.entry(ms(connect)).or_default() += 1;
        }
        self.responses += 1;
        self.latency_ns += ns(r.latency_ns);
        self.ttfb_ns += ns(ttfb);
        self.connect_ns += ns(r.connect_ns.unwrap_or(0));
        if let Some(send) = r.send_ns {
            self.send_ns += ns(send);
            self.with_send += 1;
        }
    }
}

/// Exact per-op and per-phase counts and latency histograms over every recorded row; handed
/// over as JSON between the processes of a spread run, and merged there.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Aggregator {
    pub ops: Vec<OpAggregate>,
    pub phases: Vec<PhaseAggregate>,
    /// Earliest `start_ns` and latest request end seen, for wall time.
    pub first_start_ns: Option<i64>,
    pub last_end_ns: Option<i64>,
    /// Rows with `attempt > 1`.
    pub retries: u64,
    /// Failed rows that were the last attempt allowed: requests that failed for good.
    pub failed_final: u64,
    /// Rows whose send started more than `max_lateness_ns` after its intended time.
    pub late: u64,
    /// Open model: how long after its intended time each send started (`start_ns -
    /// intended_ns`), over every row with an intended time.
    #[serde(with = "merge::opt_histogram")]
    pub send_lag_ns: Option<Histogram<u64>>,
    /// Failed rows per check or extraction (indexed by check id, the `check` column).
    pub check_failures: Vec<u64>,
    /// Rows of class `http_status` (an unexpected status) per status code.
    pub failed_statuses: BTreeMap<u16, u64>,
    /// Rows of class `grpc_status` per status and message (`14 UNAVAILABLE "no bob, ever"`).
    #[serde(default)]
    pub failed_grpc: BTreeMap<String, u64>,
    /// Rejections (429, 503) per status, with the `Retry-After` they carried.
    pub rejections: BTreeMap<u16, Rejections>,
    /// Rows whose response had an expected status: the ones checks were evaluated on.
    pub checked: u64,
    /// The phase whose rows are recorded but left out of everything above but `phases`: the
    /// warm-up (labelled [`crate::record::phase::WARMUP`]), when the run has one.
    pub left_out_phase: Option<u16>,
    /// Rows of `left_out_phase`.
    pub left_out_rows: u64,
    /// Where the responses' time went, summed (the verdict's shares of latency).
    pub components: Components,
    /// The slowest requests so far, with their trace ids (a live page's; not handed over).
    #[serde(skip)]
    pub slowest: slowest::Slowest,
    max_attempts: u8,
    max_lateness_ns: i64,
}

/// Responses of one rejecting status (429, 503) and the `Retry-After` they carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejections {
    pub responses: u64,
    /// Responses with a `Retry-After` the client could read (delay-seconds or an HTTP-date).
    pub retry_after_responses: u64,
    pub retry_after_min_s: Option<u32>,
    pub retry_after_max_s: Option<u32>,
}

impl Rejections {
    fn observe(&mut self, retry_after_s: Option<u32>) {
        self.responses += 1;
        if let Some(s) = retry_after_s {
            self.retry_after_responses += 1;
            self.retry_after_min_s = Some(self.retry_after_min_s.map_or(s, |m| m.min(s)));
            self.retry_after_max_s = Some(self.retry_after_max_s.map_or(s, |m| m.max(s)));
        }
    }
}

impl Aggregator {
    pub fn new(
        op_count: usize,
        phase_count: usize,
        check_count: usize,
        max_attempts: u8,
        max_lateness_ns: i64,
    ) -> Self {
        Aggregator {
            ops: (0..op_count).map(|_| OpAggregate::new()).collect(),
            phases: (0..phase_count)
                .map(|_| PhaseAggregate::new(op_count))
                .collect(),
            first_start_ns: None,
            last_end_ns: None,
            retries: 0,
            failed_final: 0,
            late: 0,
            send_lag_ns: None,
            check_failures: vec![0; check_count],
            failed_statuses: BTreeMap::new(),
            failed_grpc: BTreeMap::new(),
            rejections: BTreeMap::new(),
            checked: 0,
            left_out_phase: None,
            left_out_rows: 0,
            components: Components::default(),
            slowest: slowest::Slowest::default(),
            max_attempts: max_attempts.max(1),
            max_lateness_ns,
        }
    }

    /// The same aggregator, leaving the rows of the warm-up phase (the plan's
    /// [`warmup_phase`](crate::model::Plan::warmup_phase)), if any, out of every aggregate
    /// but their phase's.
    pub fn leaving_out(mut self, warmup_phase: Option<u16>) -> Self {
        self.left_out_phase = warmup_phase;
        self
    }

    pub fn observe(&mut self, r: &RequestRecord) {
        let end_ns = r.start_ns + r.latency_ns;
        // Open model: latency counts from when the request should have been sent.
        let from_ns = match r.intended_ns {
            Some(intended) => intended.min(r.start_ns),
            None => r.start_ns,
        };
        let clamp = |ns: i64| u64::try_from(ns).unwrap_or(0).clamp(1, MAX_TRACKED_NS);
        let latency_ns = clamp(end_ns - from_ns);
        self.observe_phase(r, end_ns, latency_ns);
        if self.left_out_phase == Some(r.phase) {
            self.left_out_rows += 1;
            return;
        }
        self.observe_schedule(r);
        if r.error.is_some() && r.attempt >= self.max_attempts {
            self.failed_final += 1;
        }
        if r.attempt > 1 {
            self.retries += 1;
        }
        if matches!(r.error, None | Some(ErrorClass::Check)) {
            self.checked += 1;
        }
        self.observe_op(r, latency_ns, clamp(r.latency_ns));
        self.components.observe(r);
        // Responses only, as the latency percentiles and max count them: the page's slowest is
        // then the run's max (a failure with no response is in the errors, not the latency).
        if r.status > 0 {
            self.slowest.observe(r, latency_ns);
        }
        let mut range = (self.first_start_ns, self.last_end_ns);
        widen(&mut range, r.start_ns, end_ns);
        (self.first_start_ns, self.last_end_ns) = range;
    }

    /// The row's phase: its count, workers, span and latency.
    fn observe_phase(&mut self, r: &RequestRecord, end_ns: i64, latency_ns: u64) {
        let phase = &mut self.phases[usize::from(r.phase)];
        phase.requests += 1;
        let worker = r.worker as usize;
        if phase.workers_seen.len() <= worker {
            phase.workers_seen.resize(worker + 1, false);
        }
        phase.workers_seen[worker] = true;
        let mut range = (phase.first_start_ns, phase.last_end_ns);
        widen(&mut range, r.start_ns, end_ns);
        (phase.first_start_ns, phase.last_end_ns) = range;
        if r.error.is_some() {
            phase.failures += 1;
        }
        if r.status > 0 {
            phase.latency_ns.record(latency_ns);
            let (count, sum) = &mut phase.op_latency_sum_ns[usize::from(r.op)];
            *count += 1;
            *sum += u128::from(latency_ns);
        }
    }

    /// The row's op: counts, bytes, errors, failed checks and latency (`uncorrected_ns` from
    /// the actual send).
    fn observe_op(&mut self, r: &RequestRecord, latency_ns: u64, uncorrected_ns: u64) {
        let op = &mut self.ops[usize::from(r.op)];
        op.requests += 1;
        op.bytes_sent += r.bytes_sent;
        op.bytes_received += r.bytes_received;
        if let Some(class) = r.error {
            op.failures += 1;
            op.errors[class.index()] += 1;
            if class == ErrorClass::HttpStatus {
                *self.failed_statuses.entry(r.status).or_insert(0) += 1;
            }
            if let (ErrorClass::GrpcStatus, Some(code)) = (class, r.grpc_status) {
                let text = crate::record::grpc::failure_text(code, r.grpc_message);
                *self.failed_grpc.entry(text).or_insert(0) += 1;
            }
        }
        if crate::record::is_rejection(r.status) {
            self.rejections
                .entry(r.status)
                .or_default()
                .observe(r.retry_after_s);
        }
        if let Some(failed) = r
            .check
            .and_then(|c| self.check_failures.get_mut(usize::from(c)))
        {
            *failed += 1;
        }
        if r.status > 0 {
            op.latency_ns.record(latency_ns);
            if r.intended_ns.is_some() {
                op.uncorrected_latency_ns
                    .get_or_insert_with(OpHistogram::new)
                    .record(uncorrected_ns);
            }
        }
    }

    /// Open model: a send later than `max_lateness_ns` is late, and every send's lag behind its
    /// intended time goes into the send-lag histogram.
    fn observe_schedule(&mut self, r: &RequestRecord) {
        let Some(intended) = r.intended_ns else {
            return;
        };
        let lateness_ns = r.start_ns - intended;
        if lateness_ns > self.max_lateness_ns {
            self.late += 1;
        }
        let lag_ns = u64::try_from(lateness_ns).unwrap_or(0);
        (self.send_lag_ns.get_or_insert_with(new_histogram))
            .record(lag_ns.clamp(1, MAX_TRACKED_NS))
            .expect("value clamped into range");
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
