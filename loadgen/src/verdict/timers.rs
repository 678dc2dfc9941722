//! What the kernel's TCP timers leave in a run's rows, read from the writer's distributions
//! ([`Components`](crate::stats::Components)) against `contract/verdict.json`: a body that
//! came one delayed ACK after its headers — the server's Nagle algorithm holding a small
//! second write until the client's delayed ACK of the first (`server.nagle`) — and connects
//! that waited whole seconds for the kernel to resend a SYN the server's full accept queue
//! dropped (`server.accept_backlog`). Both are measured by the client on every request: no
//! scrape, no second run. The rules return findings ([`BodyGaps`], [`ResentSyns`], worded by
//! [`super::words`]); the judge ([`super::decide()`]) lets one decide a closed level that
//! nothing before it decided, and gives it to a failing capacity level as its reason.

use std::collections::BTreeMap;

use super::facts::Facts;
use super::findings::{BodyGap, BodyGaps, Finding, Numbers, ResentSyns, Seen};
use super::rule::{Rule, T};

/// One delayed ACK after the headers, in ns: the contract's band, moved by the lowest round
/// trip the client's sockets saw (the ACK goes to the server, the body comes back).
pub fn delayed_ack_band_ns(min_rtt_us: Option<u64>) -> (f64, f64) {
    let rtt_ns = min_rtt_us.unwrap_or(0) as f64 * 1e3;
    (T.delayed_ack_min_ns + rtt_ns, T.delayed_ack_max_ns + rtt_ns)
}

/// Whether a body `gap_ms` after its headers (whole milliseconds, as the writer counts them)
/// came one delayed ACK after them (`delayed_ack_vectors`).
pub fn in_delayed_ack_band(gap_ms: u32, band_ns: (f64, f64)) -> bool {
    let gap_ns = f64::from(gap_ms) * 1e6;
    gap_ns >= band_ns.0 && gap_ns < band_ns.1
}

/// What the share of bodies one delayed ACK after their headers says (`nagle_vectors`).
pub fn classify_gaps(delayed_ack_share: f64) -> BodyGap {
    if delayed_ack_share >= T.nagle_min_share {
        BodyGap::DelayedAck
    } else if delayed_ack_share <= T.own_wait_max_share {
        BodyGap::OwnWait
    } else {
        BodyGap::CannotTell
    }
}

/// Whether a connect of `connect_ms` waited for the kernel to resend its SYN: at least the
/// first retransmission's wait, and ending just after a whole multiple of it
/// (`syn_retry_vectors`).
pub fn resent_syn(connect_ms: u32) -> bool {
    let ns = f64::from(connect_ms) * 1e6;
    ns >= T.syn_retry_first_ns && ns % T.syn_retry_first_ns < T.syn_retry_slack_ns
}

/// Whether the resent SYNs' share of the responses' latency makes the server's accept queue
/// the limit (`backlog_vectors`).
pub fn backlog_limits(resent_syn_latency_share: f64) -> bool {
    resent_syn_latency_share >= T.syn_retry_min_latency_share
}

/// The bodies against their headers: `server.nagle` when most came one delayed ACK after
/// them — a limit when receiving bodies was at least `max_transfer_share` of latency
/// (`transfer_share`), else a note; when the bodies came late (`late`) and not so, a note of
/// what the gap was (`server.note`). None otherwise.
pub fn body_gaps(
    f: &Facts<'_>,
    transfer_share: Option<f64>,
    late: bool,
    numbers: &mut Numbers,
) -> Option<Finding> {
    let gaps = &f.components.responses_by_body_gap_ms;
    let responses: u64 = gaps.values().sum();
    if responses == 0 {
        return None;
    }
    let min_rtt_us = f.client.and_then(|c| c.tcp).and_then(|t| t.min_rtt_us);
    let band_ns = delayed_ack_band_ns(min_rtt_us);
    let delayed_ack: u64 = (gaps.iter())
        .filter(|(ms, _)| in_delayed_ack_band(**ms, band_ns))
        .map(|(_, n)| n)
        .sum();
    let share = delayed_ack as f64 / responses as f64;
    let seen = BodyGaps {
        responses,
        delayed_ack,
        median_gap_ns: f64::from(median_ms(gaps, responses)) * 1e6,
        band_ns,
        gap: classify_gaps(share),
    };
    let finding = match seen.gap {
        BodyGap::DelayedAck => Finding {
            rule: Rule::ServerNagle,
            limit: transfer_share.is_some_and(|t| t >= T.max_transfer_share),
            seen: Seen::BodyGaps(seen),
        },
        _ if late => Finding::note(Rule::ServerNote, Seen::BodyGaps(seen)),
        _ => return None,
    };
    numbers.insert("body_gap_median_ns", seen.median_gap_ns);
    numbers.insert("delayed_ack_share", share);
    Some(finding)
}

/// The whole millisecond the median response's count falls in.
fn median_ms(counts: &BTreeMap<u32, u64>, total: u64) -> u32 {
    let mut seen = 0;
    for (ms, n) in counts {
        seen += n;
        if seen * 2 >= total {
            return *ms;
        }
    }
    0
}

/// The connects that waited for a resent SYN: `server.accept_backlog`, a limit when they
/// took at least `syn_retry_min_latency_share` of the responses' latency, else a note. None
/// when no connect waited so.
pub fn resent_syns(f: &Facts<'_>, numbers: &mut Numbers) -> Option<Finding> {
    let connects = &f.components.responses_by_connect_ms;
    let mut after_s = BTreeMap::<u32, u64>::new();
    let mut waited_ns = 0.0;
    for (&ms, &n) in connects.iter().filter(|(ms, _)| resent_syn(**ms)) {
        *after_s.entry(ms / 1000).or_default() += n;
        waited_ns += f64::from(ms) * 1e6 * n as f64;
    }
    let resent: u64 = after_s.values().sum();
    if resent == 0 {
        return None;
    }
    let latency_ns = f.components.latency_ns as f64;
    let latency_share = if latency_ns > 0.0 {
        waited_ns / latency_ns
    } else {
        0.0
    };
    numbers.insert("resent_syn_connects", resent as f64);
    numbers.insert("resent_syn_latency_share", latency_share);
    let workers = f.summary.workers.as_ref().map_or(0, |w| w.started);
    let connects: u64 = connects.values().sum();
    let seen = ResentSyns {
        connects,
        resent,
        after_s: after_s.into_iter().collect(),
        latency_share,
        on_this_host: f.client.is_some_and(|c| c.server_shares_cores),
        opened_once: connects <= workers,
    };
    Some(Finding {
        rule: Rule::ServerAcceptBacklog,
        limit: backlog_limits(latency_share),
        seen: Seen::ResentSyns(seen),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract() -> serde_json::Value {
        serde_json::from_str(super::super::rule::VERDICT_JSON).unwrap()
    }

    /// contract/verdict.json's `delayed_ack_vectors`: which gaps are one delayed ACK.
    #[test]
    fn a_delayed_ack_is_the_contracts_band() {
        let vectors = contract()["delayed_ack_vectors"]
            .as_array()
            .unwrap()
            .clone();
        assert!(vectors.len() >= 6);
        for v in vectors {
            let band = delayed_ack_band_ns(v["min_rtt_us"].as_u64());
            let gap_ms = v["gap_ms"].as_u64().unwrap() as u32;
            let expected = v["in_band"].as_bool().unwrap();
            assert_eq!(in_delayed_ack_band(gap_ms, band), expected, "{v}");
        }
    }

    /// contract/verdict.json's `nagle_vectors`: what the share in the band says.
    #[test]
    fn the_gap_is_told_as_the_contracts_vectors_say() {
        for v in contract()["nagle_vectors"].as_array().unwrap() {
            let expected = match v["gap"].as_str() {
                Some("delayed_ack") => BodyGap::DelayedAck,
                Some("own_wait") => BodyGap::OwnWait,
                None => BodyGap::CannotTell,
                Some(other) => panic!("unknown gap {other}"),
            };
            let share = v["delayed_ack_share"].as_f64().unwrap();
            assert_eq!(classify_gaps(share), expected, "{v}");
        }
    }

    /// contract/verdict.json's `syn_retry_vectors` and `backlog_vectors`.
    #[test]
    fn resent_syns_are_told_as_the_contracts_vectors_say() {
        let contract = contract();
        for v in contract["syn_retry_vectors"].as_array().unwrap() {
            let ms = v["connect_ms"].as_u64().unwrap() as u32;
            assert_eq!(resent_syn(ms), v["resent_syn"].as_bool().unwrap(), "{v}");
        }
        for v in contract["backlog_vectors"].as_array().unwrap() {
            let share = v["resent_syn_latency_share"].as_f64().unwrap();
            assert_eq!(backlog_limits(share), v["limit"].as_bool().unwrap(), "{v}");
        }
    }

    #[test]
    fn the_median_is_the_middle_responses_millisecond() {
        let counts: BTreeMap<u32, u64> = [(0, 4), (41, 5), (43, 1)].into_iter().collect();
        assert_eq!(median_ms(&counts, 10), 41);
        let counts: BTreeMap<u32, u64> = [(0, 5), (41, 5)].into_iter().collect();
        assert_eq!(median_ms(&counts, 10), 0);
    }
}
