//! The slowest requests so far: a small, bounded top-N of the responses the writer thread
//! aggregates (latency from the intended send under the open model, as the summary's; rows
//! with no response are not latency, as in the percentiles), so its first is the run's max, with
//! each one's trace id, so a live page can name the requests to look up in the server's
//! traces. Fed with every row on the writer thread (one comparison per row once it is full),
//! never on a worker.

use crate::record::RequestRecord;

/// How many of the slowest requests are kept.
pub const KEPT: usize = 10;

/// One of the slowest requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SlowRequest {
    /// Latency as the summary counts it (open model: from the intended send).
    pub latency_ns: u64,
    pub start_ns: i64,
    pub op: u16,
    pub status: u16,
    /// The row's `traceparent` trace id as 32 hex digits, when the request carried one.
    #[serde(serialize_with = "hex")]
    pub trace_id: Option<std::num::NonZeroU128>,
}

fn hex<S: serde::Serializer>(
    id: &Option<std::num::NonZeroU128>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match id {
        Some(id) => serializer.serialize_str(&format!("{:032x}", id.get())),
        None => serializer.serialize_none(),
    }
}

/// The [`KEPT`] slowest requests seen, slowest first.
#[derive(Debug, Clone, Default)]
pub struct Slowest {
    rows: Vec<SlowRequest>,
}

impl Slowest {
    /// Keeps `r` when it is among the slowest so far (`latency_ns`: its latency as counted).
    pub fn observe(&mut self, r: &RequestRecord, latency_ns: u64) {
        if self.rows.len() == KEPT && self.rows[KEPT - 1].latency_ns >= latency_ns {
            return;
        }
        let at = self.rows.partition_point(|s| s.latency_ns >= latency_ns);
        self.rows.insert(
            at,
            SlowRequest {
                latency_ns,
                start_ns: r.start_ns,
                op: r.op,
                status: r.status,
                trace_id: r.trace_id,
            },
        );
        self.rows.truncate(KEPT);
    }

    pub fn rows(&self) -> &[SlowRequest] {
        &self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_slowest_first_and_no_more_than_kept() {
        let mut slowest = Slowest::default();
        let row = RequestRecord {
            start_ns: 0,
            intended_ns: None,
            latency_ns: 0,
            connect_ns: None,
            send_ns: None,
            ttfb_ns: None,
            queue_wait_ns: None,
            buffer_wait_ns: None,
            op: 0,
            status: 200,
            error: None,
            bytes_sent: 0,
            bytes_received: 0,
            worker: 0,
            phase: 0,
            attempt: 1,
            check: None,
            trace_id: None,
            grpc_status: None,
            grpc_message: None,
            retry_after_s: None,
        };
        for latency_ns in (1..=25).map(|i| (i * 7 % 25) as u64) {
            slowest.observe(&row, latency_ns);
        }
        let kept: Vec<u64> = slowest.rows().iter().map(|s| s.latency_ns).collect();
        assert_eq!(kept, (15..=24).rev().collect::<Vec<u64>>());
    }
}
