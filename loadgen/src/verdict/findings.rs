//! What the rules find, typed: a [`Finding`] (the rule, whether it found a limit, and what it
//! saw, [`Seen`]) and the [`Numbers`] behind it. A leaf of the verdict: the rules
//! ([`super::checks`], [`super::slo`], [`super::queueing`]) produce these and the words
//! ([`super::words`]) read them; it imports neither, so the rules never import their words.

use std::collections::BTreeMap;

use super::rule::Rule;
use super::schedule::Schedule;
use super::server::{HostCpu, Queue, Workers};
use crate::sysmon::ClientSummary;

/// What a check found under a rule: a limit, or a note.
#[derive(Debug, Clone)]
pub struct Finding {
    pub rule: Rule,
    pub limit: bool,
    pub seen: Seen,
}

impl Finding {
    pub fn limit(rule: Rule, seen: Seen) -> Self {
        Finding {
            rule,
            limit: true,
            seen,
        }
    }

    pub fn note(rule: Rule, seen: Seen) -> Self {
        Finding {
            rule,
            limit: false,
            seen,
        }
    }
}

/// The numbers behind the findings, by name (run.json `verdict.numbers`).
pub type Numbers = BTreeMap<&'static str, f64>;

/// What the link carried in one direction in the busiest second, and its capacity if known.
#[derive(Debug, Clone, Copy)]
pub struct Carried {
    pub direction: &'static str,
    pub bps: Option<f64>,
    pub capacity_bps: Option<f64>,
}

/// The target's CPU against the contract's `cpu_saturated_share` and `cpu_room_share`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuBusy {
    Saturated,
    /// Under `cpu_room_share`: a limit there is inside the service.
    Room,
    Between,
}

/// What the gap between a response's headers and its body says (`contract/verdict.json`'s
/// `nagle_vectors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyGap {
    /// At least `nagle_min_share` of the bodies came one delayed ACK after their headers.
    DelayedAck,
    /// At most `own_wait_max_share` did: the gap is the server's own wait.
    OwnWait,
    /// In between: the rows cannot tell.
    CannotTell,
}

/// The responses' bodies against their headers (latency − ttfb, each row).
#[derive(Debug, Clone, Copy)]
pub struct BodyGaps {
    /// Responses with a first byte.
    pub responses: u64,
    /// Those whose body came one delayed ACK after the first byte (in `band_ns`).
    pub delayed_ack: u64,
    /// The median gap (whole milliseconds, in ns).
    pub median_gap_ns: f64,
    /// One delayed ACK after the headers: from, to (ns).
    pub band_ns: (f64, f64),
    pub gap: BodyGap,
}

/// The connects that waited for the kernel to resend their SYN.
#[derive(Debug, Clone)]
pub struct ResentSyns {
    /// Responses that opened a connection.
    pub connects: u64,
    /// Those whose connect ended just after a whole second (the SYN retry schedule).
    pub resent: u64,
    /// (whole seconds waited, connects): 1 s, 2 s, …
    pub after_s: Vec<(u32, u64)>,
    /// Their connects' time over the responses' latency.
    pub latency_share: f64,
    /// The server shares the client's host: no path between to lose a SYN on.
    pub on_this_host: bool,
    /// No more connects than workers: each opened its connection once and kept it, so the
    /// SYNs were dropped when they opened together.
    pub opened_once: bool,
}

/// What a check saw, with the numbers its sentence needs.
#[derive(Debug, Clone)]
pub enum Seen {
    NoFailures {
        requests: u64,
    },
    Failures {
        failed: u64,
        requests: u64,
        rate: f64,
        classes: Vec<(String, u64)>,
        statuses: Vec<(String, u64)>,
        /// The 429s and 503s among the responses, with their `Retry-After`.
        rejections: Vec<crate::report::Rejection>,
    },
    /// The client's sockets as the kernel saw them (`TCP_INFO`).
    Tcp(crate::stats::tcp::TcpSummary),
    /// The client's CPU line (saturated or not).
    Client(Box<ClientSummary>),
    OwnWork {
        own: f64,
        /// The judged phase and its workers, when the run has several.
        phase: Option<(String, u64)>,
    },
    EmptyBuffer {
        share: f64,
    },
    Late {
        schedule: Schedule,
        server_behind: bool,
    },
    /// A share of latency (HTTP/2 stream wait, transfer, send: the rule tells which).
    Share {
        share: f64,
    },
    /// Moving bytes took `share` of latency; what the link carried meanwhile.
    Moving {
        share: f64,
        carried: Carried,
    },
    Link {
        direction: &'static str,
        bps: f64,
        utilisation: f64,
        capacity_bps: f64,
    },
    Workers {
        workers: Workers,
        queued: Option<Queue>,
        /// Share of the scrapes with every worker busy, when it says saturated.
        all_busy_share: Option<f64>,
    },
    Queue(Queue),
    HostCpu {
        cpu: HostCpu,
        /// What the rule made of its busy share.
        busy: CpuBusy,
        shared: bool,
        service_cores: Option<f64>,
        client_cores: Option<f64>,
    },
    FailedScrapes(u64),
    /// The service's own CPU (its `process_cpu_seconds_total`), in cores.
    ServiceCpu(f64),
    /// Bodies against their headers (`server.nagle`, or a note of what the gap was).
    BodyGaps(BodyGaps),
    /// Connects that waited for a resent SYN (`server.accept_backlog`).
    ResentSyns(ResentSyns),
    /// A capacity level's failures: each a sentence of the level's (SLOs, abort, schedule).
    Level(Vec<String>),
    Text(String),
}
