//! The run's TCP evidence: what the kernel measured on the client's sockets (`TCP_INFO`,
//! read once per connection as it closes, see `transport::io`), summed over connections in
//! atomics — one update per connection, lock-free. It reports the round-trip time the
//! connections saw (their smoothed RTT at the end, and the lowest any saw), the segments they
//! sent and how many of them were retransmitted, and the best delivery rate. It does not read
//! sockets itself nor judge what the numbers mean (the verdict does).

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use tcpinfo::TcpInfo;

/// Sums of the `TCP_INFO` of every connection that closed, for one run.
#[derive(Debug)]
pub struct TcpTotals {
    connections: AtomicU64,
    rtt_sum_us: AtomicU64,
    rtt_max_us: AtomicU64,
    min_rtt_us: AtomicU64,
    retransmits: AtomicU64,
    segments_out: AtomicU64,
    segments_in: AtomicU64,
    delivery_rate_max_bps: AtomicU64,
}

impl Default for TcpTotals {
    fn default() -> Self {
        TcpTotals {
            connections: AtomicU64::new(0),
            rtt_sum_us: AtomicU64::new(0),
            rtt_max_us: AtomicU64::new(0),
            min_rtt_us: AtomicU64::new(u64::MAX),
            retransmits: AtomicU64::new(0),
            segments_out: AtomicU64::new(0),
            segments_in: AtomicU64::new(0),
            delivery_rate_max_bps: AtomicU64::new(0),
        }
    }
}

/// run.json's `tcp`: the client's sockets as the kernel saw them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TcpSummary {
    /// Connections whose `TCP_INFO` was read (as each closed).
    pub connections: u64,
    /// Mean over connections of the smoothed round-trip time each ended with.
    pub rtt_mean_us: f64,
    pub rtt_max_us: u64,
    /// The lowest round-trip time any connection saw (the path without queues); null when
    /// the kernel does not report it.
    pub min_rtt_us: Option<u64>,
    /// Segments the client retransmitted, and all it sent (retransmits included).
    pub retransmits: u64,
    pub segments_out: u64,
    pub segments_in: u64,
    /// `retransmits / segments_out`.
    pub retransmit_share: f64,
    /// The highest delivery-rate estimate of any connection (of what the client sent).
    pub delivery_rate_max_bps: u64,
}

impl TcpTotals {
    /// Adds one closing connection's `TCP_INFO`.
    pub fn observe(&self, info: &TcpInfo) {
        let relaxed = Ordering::Relaxed;
        self.connections.fetch_add(1, relaxed);
        self.rtt_sum_us.fetch_add(u64::from(info.rtt_us), relaxed);
        self.rtt_max_us.fetch_max(u64::from(info.rtt_us), relaxed);
        if info.min_rtt_us > 0 {
            self.min_rtt_us
                .fetch_min(u64::from(info.min_rtt_us), relaxed);
        }
        self.retransmits
            .fetch_add(u64::from(info.total_retrans), relaxed);
        self.segments_out
            .fetch_add(u64::from(info.segs_out), relaxed);
        self.segments_in.fetch_add(u64::from(info.segs_in), relaxed);
        self.delivery_rate_max_bps
            .fetch_max(info.delivery_rate_bps, relaxed);
    }

    /// What the connections that closed so far saw; `None` when none was read.
    pub fn summary(&self) -> Option<TcpSummary> {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let connections = load(&self.connections);
        if connections == 0 {
            return None;
        }
        let (retransmits, segments_out) = (load(&self.retransmits), load(&self.segments_out));
        Some(TcpSummary {
            connections,
            rtt_mean_us: load(&self.rtt_sum_us) as f64 / connections as f64,
            rtt_max_us: load(&self.rtt_max_us),
            min_rtt_us: Some(load(&self.min_rtt_us)).filter(|m| *m != u64::MAX),
            retransmits,
            segments_out,
            segments_in: load(&self.segments_in),
            retransmit_share: retransmits as f64 / segments_out.max(1) as f64,
            delivery_rate_max_bps: load(&self.delivery_rate_max_bps),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_add_up_and_none_read_is_no_summary() {
        let totals = TcpTotals::default();
        assert_eq!(totals.summary(), None);
        let info = |rtt_us, min_rtt_us, total_retrans, segs_out| TcpInfo {
            rtt_us,
            min_rtt_us,
            total_retrans,
            segs_out,
            ..TcpInfo::default()
        };
        totals.observe(&info(20_000, 19_000, 3, 100));
        totals.observe(&info(30_000, 0, 1, 300));
        let s = totals.summary().unwrap();
        assert_eq!(
            (s.connections, s.rtt_max_us, s.min_rtt_us),
            (2, 30_000, Some(19_000))
        );
        assert_eq!(s.rtt_mean_us, 25_000.0);
        assert_eq!((s.retransmits, s.segments_out), (4, 400));
        assert_eq!(s.retransmit_share, 0.01);
    }
}
