//! Adding up the exact aggregates of several processes of one run (a spread run's shards,
//! `workflow::spread`): each process hands its [`Aggregator`] over as JSON, and the run's
//! aggregates are their sum — counts added, latency histograms added bucket by bucket
//! (`hdrhistogram`'s own `add` once a histogram is dense), spans widened — so the run's
//! summary is exactly the one a single process that wrote every row would have made.
//!
//! Times in an aggregate are offsets from its process's anchor; the processes start together
//! (`--start-at`) but each takes its own anchor, so an aggregate is shifted by how much later
//! its anchor was than the run's. The busiest second's bytes stay by each process's second
//! (a few milliseconds apart). The slowest requests are a live page's and are not handed on.

use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Aggregator, Components};

impl Aggregator {
    /// Adds `other`'s rows, whose times are `shift_ns` after this aggregate's anchor.
    pub fn merge(&mut self, other: &Aggregator, shift_ns: i64) {
        let shift = |t: Option<i64>| t.map(|t| t + shift_ns);
        for (op, theirs) in self.ops.iter_mut().zip(&other.ops) {
            op.requests += theirs.requests;
            op.failures += theirs.failures;
            for (n, m) in op.errors.iter_mut().zip(theirs.errors) {
                *n += m;
            }
            op.bytes_sent += theirs.bytes_sent;
            op.bytes_received += theirs.bytes_received;
            op.latency_ns.merge(&theirs.latency_ns);
            if let Some(h) = &theirs.uncorrected_latency_ns {
                (op.uncorrected_latency_ns
                    .get_or_insert_with(Default::default))
                .merge(h);
            }
        }
        for (phase, theirs) in self.phases.iter_mut().zip(&other.phases) {
            phase.requests += theirs.requests;
            phase.failures += theirs.failures;
            if phase.workers_seen.len() < theirs.workers_seen.len() {
                phase.workers_seen.resize(theirs.workers_seen.len(), false);
            }
            for (seen, &s) in phase.workers_seen.iter_mut().zip(&theirs.workers_seen) {
                *seen |= s;
            }
            phase.first_start_ns = earliest(phase.first_start_ns, shift(theirs.first_start_ns));
            phase.last_end_ns = latest(phase.last_end_ns, shift(theirs.last_end_ns));
            phase.latency_ns.merge(&theirs.latency_ns);
            for (sum, s) in phase
                .op_latency_sum_ns
                .iter_mut()
                .zip(&theirs.op_latency_sum_ns)
            {
                sum.0 += s.0;
                sum.1 += s.1;
            }
        }
        self.first_start_ns = earliest(self.first_start_ns, shift(other.first_start_ns));
        self.last_end_ns = latest(self.last_end_ns, shift(other.last_end_ns));
        self.merge_counts(other);
        self.components.merge(&other.components);
    }

    /// The counters that are plain sums.
    fn merge_counts(&mut self, other: &Aggregator) {
        self.retries += other.retries;
        self.failed_final += other.failed_final;
        self.late += other.late;
        if let Some(theirs) = &other.send_lag_ns {
            let ours = self.send_lag_ns.get_or_insert_with(super::new_histogram);
            ours.add(theirs).expect("histograms of the summary's range");
        }
        for (n, m) in self.check_failures.iter_mut().zip(&other.check_failures) {
            *n += m;
        }
        for (status, n) in &other.failed_statuses {
            *self.failed_statuses.entry(*status).or_insert(0) += n;
        }
        for (text, n) in &other.failed_grpc {
            *self.failed_grpc.entry(text.clone()).or_insert(0) += n;
        }
        for (status, theirs) in &other.rejections {
            let ours = self.rejections.entry(*status).or_default();
            ours.responses += theirs.responses;
            ours.retry_after_responses += theirs.retry_after_responses;
            ours.retry_after_min_s = min_some(ours.retry_after_min_s, theirs.retry_after_min_s);
            ours.retry_after_max_s = ours.retry_after_max_s.max(theirs.retry_after_max_s);
        }
        self.checked += other.checked;
        self.left_out_rows += other.left_out_rows;
    }
}

impl Components {
    fn merge(&mut self, other: &Components) {
        self.responses += other.responses;
        self.latency_ns += other.latency_ns;
        self.ttfb_ns += other.ttfb_ns;
        self.send_ns += other.send_ns;
        self.connect_ns += other.connect_ns;
        self.with_send += other.with_send;
        self.queue_wait_ns += other.queue_wait_ns;
        if self.bytes_by_second.len() < other.bytes_by_second.len() {
            self.bytes_by_second
                .resize(other.bytes_by_second.len(), (0, 0));
        }
        for (ours, theirs) in self.bytes_by_second.iter_mut().zip(&other.bytes_by_second) {
            ours.0 += theirs.0;
            ours.1 += theirs.1;
        }
        for (ours, theirs) in [
            (
                &mut self.responses_by_body_gap_ms,
                &other.responses_by_body_gap_ms,
            ),
            (
                &mut self.responses_by_connect_ms,
                &other.responses_by_connect_ms,
            ),
        ] {
            for (ms, count) in theirs {
                *ours.entry(*ms).or_default() += count;
            }
        }
    }
}

fn earliest(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    min_some(a, b)
}

fn latest(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    a.max(b)
}

fn min_some<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// An optional HDR histogram as its recorded (value, count) pairs: each value is its
/// bucket's highest equivalent, so recording it again lands in the same bucket.
pub(super) mod opt_histogram {
    use super::*;

    pub fn serialize<S: Serializer>(h: &Option<Histogram<u64>>, s: S) -> Result<S::Ok, S::Error> {
        let pairs: Option<Vec<(u64, u64)>> = h.as_ref().map(|h| {
            h.iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .collect()
        });
        pairs.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Histogram<u64>>, D::Error> {
        let pairs: Option<Vec<(u64, u64)>> = Option::deserialize(d)?;
        pairs
            .map(|pairs| {
                let mut h = crate::stats::new_histogram();
                for (value, count) in pairs {
                    h.record_n(value, count).map_err(serde::de::Error::custom)?;
                }
                Ok(h)
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{ErrorClass, RequestRecord};

    fn row(i: i64) -> RequestRecord {
        RequestRecord {
            start_ns: i * 1_000,
            intended_ns: None,
            latency_ns: 1 + (i * i * 7_919) % 50_000_000,
            connect_ns: (i % 5 == 0).then_some((i * 7_919_000) % 3_000_000_000),
            send_ns: Some(10),
            ttfb_ns: Some(20),
            queue_wait_ns: None,
            buffer_wait_ns: None,
            op: (i % 2) as u16,
            status: if i % 13 == 0 { 0 } else { 200 },
            error: (i % 13 == 0).then_some(ErrorClass::ConnectRefused),
            bytes_sent: 10,
            bytes_received: 100,
            worker: (i % 7) as u32,
            phase: 0,
            attempt: 1,
            check: None,
            trace_id: None,
            grpc_status: None,
            grpc_message: None,
            retry_after_s: None,
        }
    }

    /// What the summary reads: counts, errors, and each op's and phase's percentiles.
    fn figures(stats: &Aggregator) -> Vec<u64> {
        let quantiles = |h: &super::super::sparse::OpHistogram| {
            let h = h.histogram();
            [0.0, 0.5, 0.9, 0.99, 0.999, 1.0].map(|q| h.value_at_quantile(q))
        };
        let mut out = vec![stats.requests(), stats.failures(), stats.checked];
        out.extend(stats.errors_by_class().values());
        for op in &stats.ops {
            out.extend([op.requests, op.bytes_received, op.latency_ns.len()]);
            out.extend(quantiles(&op.latency_ns));
        }
        for phase in &stats.phases {
            out.extend(quantiles(&phase.latency_ns));
            out.push(phase.workers() as u64);
        }
        out.extend([stats.first_start_ns, stats.last_end_ns].map(|t| t.unwrap_or(-1) as u64));
        out
    }

    #[test]
    fn two_halves_handed_over_as_json_and_merged_are_the_whole() {
        let new = || Aggregator::new(2, 1, 0, 1, 0);
        let (mut whole, mut first, mut second) = (new(), new(), new());
        // Enough distinct latencies that some histograms turn dense.
        for i in 0..30_000 {
            whole.observe(&row(i));
            let half = if i % 3 == 0 { &mut first } else { &mut second };
            half.observe(&row(i));
        }
        let handed = |a: &Aggregator| -> Aggregator {
            serde_json::from_str(&serde_json::to_string(a).unwrap()).unwrap()
        };
        let mut merged = handed(&first);
        merged.merge(&handed(&second), 0);
        assert_eq!(figures(&merged), figures(&whole));
        assert_eq!(merged.phases[0].workers(), 7);
        assert_eq!(merged.components.responses, whole.components.responses);
        let (ours, theirs) = (&merged.components, &whole.components);
        assert_eq!(
            ours.responses_by_body_gap_ms,
            theirs.responses_by_body_gap_ms
        );
        assert_eq!(ours.responses_by_connect_ms, theirs.responses_by_connect_ms);
        assert!(ours.responses_by_connect_ms.len() > 100);
    }
}
