//! The rules, typed: each [`Rule`] has its name (run.json `verdict.rule`, docs/verdict.md's
//! list) and the cause it names; every number a rule compares against is a field of
//! [`Thresholds`], read from `contract/verdict.json` and `contract/sustainability.json` — no
//! rule writes a threshold of its own. The checks ([`super::checks`]) return findings: a
//! rule, whether it found a limit, and what it saw; [`super::words`] says them.

use std::sync::LazyLock;

use serde::Deserialize;

use super::Cause;

/// `contract/verdict.json`: the thresholds of every verdict, documented there.
pub const VERDICT_JSON: &str = include_str!("../../../contract/verdict.json");
/// `contract/sustainability.json`: when an open-model run kept up, shared with the analysis.
pub const SUSTAINABILITY_JSON: &str = include_str!("../../../contract/sustainability.json");

/// `contract/verdict.json`'s numbers (their meanings are written there).
#[derive(Debug, Deserialize)]
pub struct Thresholds {
    pub max_error_rate: f64,
    pub max_own_share: f64,
    pub max_queue_wait_share: f64,
    pub min_paced_share: f64,
    pub min_busy_share: f64,
    pub min_server_wait_share: f64,
    pub max_transfer_share: f64,
    pub max_link_utilisation: f64,
    pub min_transfer_link_share: f64,
    pub tcp_quiet_max_retransmit_share: f64,
    pub tcp_queueing_rtt_ratio: f64,
    pub tcp_queueing_min_us: f64,
    pub saturated_scrape_share: f64,
    pub cpu_saturated_share: f64,
    pub cpu_room_share: f64,
    pub client_cpu_saturated_percent: f64,
    pub client_throttled_periods_share: f64,
    pub client_throttled_wall_share: f64,
    pub level_abort_error_share: f64,
    pub level_abort_latency_factor: f64,
    pub level_abort_min_rows: f64,
    pub level_abort_error_slo_factor: f64,
    pub outage_cluster_share: f64,
    pub outage_max_span_share: f64,
    pub queueing_latency_ratio: f64,
    pub no_queue_latency_ratio: f64,
    pub min_served_at_once: f64,
    pub probe_queueing_ratio: f64,
    pub probe_no_queue_ratio: f64,
    pub busy_host_other_share: f64,
    pub shared_host_client_share: f64,
    pub delayed_ack_min_ns: f64,
    pub delayed_ack_max_ns: f64,
    pub nagle_min_share: f64,
    pub own_wait_max_share: f64,
    pub syn_retry_first_ns: f64,
    pub syn_retry_slack_ns: f64,
    pub syn_retry_min_latency_share: f64,
}

/// `contract/sustainability.json`'s numbers.
#[derive(Debug, Deserialize)]
pub struct SustainabilityRule {
    pub achieved_shortfall: f64,
    /// More than this share of the judged sends started late...
    pub late_share: f64,
    /// ... and the p99 send lag is at least this share of the p99 latency from intended time:
    /// the client did not keep its schedule.
    pub lag_share_of_latency: f64,
    /// The slope's t value above which latency trends up...
    pub growth_slope_t: f64,
    /// ... and the growth over the run, as a share of the latency reference, that matters...
    pub material_growth: f64,
    /// ... the reference never below this (ns): sub-millisecond drift is the machine's noise.
    pub growth_reference_min_ns: f64,
}

/// The verdict's thresholds.
pub static T: LazyLock<Thresholds> =
    LazyLock::new(|| serde_json::from_str(VERDICT_JSON).expect("contract/verdict.json is valid"));

/// The open model's schedule and sustainability rule.
pub static S: LazyLock<SustainabilityRule> = LazyLock::new(|| {
    serde_json::from_str(SUSTAINABILITY_JSON).expect("contract/sustainability.json is valid")
});

/// Every rule a verdict can be decided by (or note a finding under).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    ErrorsShare,
    /// A capacity level crossed an error-rate SLO, or was stopped for its failures.
    ErrorsSlo,
    ClientCpu,
    ClientOwnWork,
    ClientProducer,
    ClientSchedule,
    ClientHttp2Streams,
    NetworkLink,
    NetworkTransfer,
    NetworkSend,
    /// The client's sockets as the kernel saw them (`TCP_INFO`): a note, it decides nothing.
    NetworkTcp,
    ServerFellBehind,
    ServerSaturated,
    /// A capacity level crossed a latency SLO with nothing before the server to blame.
    ServerSlo,
    /// One closed level whose median response was many times its fastest: requests waited
    /// at the server (weak).
    ServerQueueing,
    /// Most bodies came one delayed ACK after their headers: the server's Nagle algorithm
    /// held each until the client's delayed ACK.
    ServerNagle,
    /// Connects waited whole seconds for a SYN the server's full accept queue dropped.
    ServerAcceptBacklog,
    NoneKeptUp,
    NonePacedByWorkload,
    /// One closed level whose median response was near its fastest: nothing queued at the
    /// server, the connections set the pace (weak).
    NoneNoQueue,
    /// A capacity level met every SLO and kept its schedule.
    CapacityPassed,
    /// A capacity level cut short by Ctrl-C or SIGTERM: not judged.
    CapacityInterrupted,
    InconclusiveNoWorkers,
    InconclusiveIdleWorkers,
    InconclusiveNoServerSign,
    InconclusiveOneLevel,
    /// A capacity level whose failures were a moment's outage of the target: measured again.
    InconclusiveOutage,
    /// Notes that decide nothing: the client's CPU line, the server's gauges.
    ClientNote,
    ServerNote,
}

impl Rule {
    /// Every rule, in the order of the enum.
    pub const ALL: [Rule; 29] = [
        Rule::ErrorsShare,
        Rule::ErrorsSlo,
        Rule::ClientCpu,
        Rule::ClientOwnWork,
        Rule::ClientProducer,
        Rule::ClientSchedule,
        Rule::ClientHttp2Streams,
        Rule::NetworkLink,
        Rule::NetworkTransfer,
        Rule::NetworkSend,
        Rule::NetworkTcp,
        Rule::ServerFellBehind,
        Rule::ServerSaturated,
        Rule::ServerSlo,
        Rule::ServerQueueing,
        Rule::ServerNagle,
        Rule::ServerAcceptBacklog,
        Rule::NoneKeptUp,
        Rule::NonePacedByWorkload,
        Rule::NoneNoQueue,
        Rule::CapacityPassed,
        Rule::CapacityInterrupted,
        Rule::InconclusiveNoWorkers,
        Rule::InconclusiveIdleWorkers,
        Rule::InconclusiveNoServerSign,
        Rule::InconclusiveOneLevel,
        Rule::InconclusiveOutage,
        Rule::ClientNote,
        Rule::ServerNote,
    ];

    /// Whether a probe at one connection could change a verdict this rule decided: the rules
    /// that rest on one closed level's latency against its fastest response alone, which the
    /// probe's R(1) confirms or undoes (what `inconclusive.one_level` says, it cannot decide).
    pub fn probe_can_tell(self) -> bool {
        matches!(self, Rule::ServerQueueing | Rule::NoneNoQueue)
    }

    /// The name run.json and docs/verdict.md use.
    pub fn name(self) -> &'static str {
        match self {
            Rule::ErrorsShare => "errors.share",
            Rule::ErrorsSlo => "errors.slo",
            Rule::ClientCpu => "client.cpu",
            Rule::ClientOwnWork => "client.own_work",
            Rule::ClientProducer => "client.producer",
            Rule::ClientSchedule => "client.schedule",
            Rule::ClientHttp2Streams => "client.http2_streams",
            Rule::NetworkLink => "network.link",
            Rule::NetworkTransfer => "network.transfer",
            Rule::NetworkSend => "network.send",
            Rule::NetworkTcp => "network.tcp",
            Rule::ServerFellBehind => "server.fell_behind",
            Rule::ServerSaturated => "server.saturated",
            Rule::ServerSlo => "server.slo",
            Rule::ServerQueueing => "server.queueing",
            Rule::ServerNagle => "server.nagle",
            Rule::ServerAcceptBacklog => "server.accept_backlog",
            Rule::NoneKeptUp => "none.kept_up",
            Rule::NonePacedByWorkload => "none.paced_by_workload",
            Rule::NoneNoQueue => "none.no_queue",
            Rule::CapacityPassed => "capacity.passed",
            Rule::CapacityInterrupted => "capacity.interrupted",
            Rule::InconclusiveNoWorkers => "inconclusive.no_workers",
            Rule::InconclusiveIdleWorkers => "inconclusive.idle_workers",
            Rule::InconclusiveNoServerSign => "inconclusive.no_server_sign",
            Rule::InconclusiveOneLevel => "inconclusive.one_level",
            Rule::InconclusiveOutage => "inconclusive.outage",
            Rule::ClientNote => "client.note",
            Rule::ServerNote => "server.note",
        }
    }

    /// The cause a rule names when it decides.
    pub fn cause(self) -> Cause {
        match self {
            Rule::ErrorsShare | Rule::ErrorsSlo => Cause::Errors,
            Rule::ClientCpu
            | Rule::ClientOwnWork
            | Rule::ClientProducer
            | Rule::ClientSchedule
            | Rule::ClientHttp2Streams
            | Rule::ClientNote => Cause::Client,
            Rule::NetworkLink | Rule::NetworkTransfer | Rule::NetworkSend | Rule::NetworkTcp => {
                Cause::Network
            }
            Rule::ServerFellBehind
            | Rule::ServerSaturated
            | Rule::ServerSlo
            | Rule::ServerQueueing
            | Rule::ServerNagle
            | Rule::ServerAcceptBacklog
            | Rule::ServerNote => Cause::Server,
            Rule::NoneKeptUp
            | Rule::NonePacedByWorkload
            | Rule::NoneNoQueue
            | Rule::CapacityPassed => Cause::None,
            Rule::CapacityInterrupted
            | Rule::InconclusiveNoWorkers
            | Rule::InconclusiveIdleWorkers
            | Rule::InconclusiveNoServerSign
            | Rule::InconclusiveOneLevel
            | Rule::InconclusiveOutage => Cause::Inconclusive,
        }
    }

    /// How firmly a decision by this rule is said: the inconclusive ones are weak, and so
    /// are those that rest on one level's latency alone (`server.queueing`,
    /// `none.no_queue`): one fact says "likely", never more.
    pub fn strength(self) -> super::Strength {
        match (self, self.cause()) {
            (_, Cause::Inconclusive) | (Rule::ServerQueueing | Rule::NoneNoQueue, _) => {
                super::Strength::Weak
            }
            _ => super::Strength::Strong,
        }
    }
}

/// Whether the client's sockets show the network (`TCP_INFO`): retransmits above
/// `tcp_quiet_max_retransmit_share` of the segments sent, or a mean round-trip time at least
/// `tcp_queueing_rtt_ratio` times the lowest and `tcp_queueing_min_us` above it (queues on the
/// path, not a microsecond path's noise). Without either, a network
/// verdict is weak: bytes alone do not make the network the cause.
pub fn tcp_shows_network(retransmit_share: f64, rtt_mean_us: f64, min_rtt_us: Option<u64>) -> bool {
    let queueing = min_rtt_us.filter(|m| *m > 0).is_some_and(|m| {
        let lowest = m as f64;
        rtt_mean_us >= T.tcp_queueing_rtt_ratio * lowest
            && rtt_mean_us - lowest >= T.tcp_queueing_min_us
    });
    retransmit_share > T.tcp_quiet_max_retransmit_share || queueing
}

impl serde::Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// Whether a share of the busy, waiting and own time of workers, and the server's wait, is
/// what a phase's verdict is decided by (the same conditions for the run and each phase).
#[derive(Debug, Clone, Copy)]
pub struct WorkerShares {
    pub busy: f64,
    pub waiting: f64,
}

impl WorkerShares {
    /// The client's own work between requests: neither in a request nor waiting.
    pub fn own(self) -> f64 {
        (1.0 - self.busy - self.waiting).max(0.0)
    }

    /// `client.own_work`: the client's own work is the limit.
    pub fn own_work_limits(self) -> bool {
        self.own() > T.max_own_share
    }

    /// `none.paced_by_workload`: the workers waited for their next request as configured
    /// and were not kept busy.
    pub fn paced_by_workload(self) -> bool {
        self.busy < T.min_busy_share && self.waiting > T.min_paced_share
    }

    /// Busy enough that a wait at the server could have held them.
    pub fn busy(self) -> bool {
        self.busy >= T.min_busy_share
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// contract/verdict.json's `tcp_vectors`: when TCP shows the network.
    #[test]
    fn tcp_shows_the_network_as_the_contracts_vectors_say() {
        let contract: serde_json::Value = serde_json::from_str(VERDICT_JSON).unwrap();
        for v in contract["tcp_vectors"].as_array().unwrap() {
            let shows = tcp_shows_network(
                v["retransmit_share"].as_f64().unwrap(),
                v["rtt_mean_us"].as_f64().unwrap(),
                v["min_rtt_us"].as_u64(),
            );
            assert_eq!(shows, v["shows_network"].as_bool().unwrap(), "{v}");
        }
    }

    #[test]
    fn every_threshold_is_the_contracts_and_every_rule_has_one_name() {
        let contract: serde_json::Value = serde_json::from_str(VERDICT_JSON).unwrap();
        assert_eq!(
            T.max_error_rate,
            contract["max_error_rate"].as_f64().unwrap()
        );
        assert!(S.growth_slope_t > 0.0 && S.material_growth > 0.0);
        let names: std::collections::BTreeSet<&str> = [
            Rule::ErrorsShare,
            Rule::ErrorsSlo,
            Rule::ClientCpu,
            Rule::ServerSlo,
            Rule::CapacityPassed,
            Rule::InconclusiveOneLevel,
        ]
        .iter()
        .map(|r| r.name())
        .collect();
        assert_eq!(names.len(), 6);
        assert_eq!(Rule::ServerSlo.cause(), Cause::Server);
        assert_eq!(
            Rule::InconclusiveOneLevel.strength(),
            super::super::Strength::Weak
        );
    }
}
