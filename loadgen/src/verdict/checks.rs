//! The checks, in the fixed order — errors, client, network — and what the server's metrics
//! name. Each reads the run's facts against the contract's thresholds ([`T`]) and returns
//! [`Finding`]s: the rule, whether it found a limit, and what it saw ([`Seen`], worded by
//! [`super::words`]); the numbers behind them go into the verdict's `numbers`. Nothing here
//! chooses the cause: [`super::decide()`] does, from the findings.

use super::facts::Facts;
use super::findings::{Carried, CpuBusy, Finding, Numbers, Seen};
use super::rule::{Rule, WorkerShares, T};
use crate::report::{PhaseWorkers, RunSummary};
use crate::stats::Components;

/// Where the responses' time went, as shares of their latency.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shares {
    /// First byte minus sending: the server's time and the round trip.
    pub server_wait: Option<f64>,
    pub transfer: Option<f64>,
    /// Sending the request (connect left out).
    pub send: Option<f64>,
}

impl Shares {
    pub fn of(c: &Components, numbers: &mut Numbers) -> Self {
        if c.responses == 0 || c.latency_ns == 0 {
            return Shares::default();
        }
        let latency = c.latency_ns as f64;
        let sent = match c.with_send == c.responses {
            true => c.send_ns,
            false => c.connect_ns,
        };
        let shares = Shares {
            server_wait: Some(c.ttfb_ns.saturating_sub(sent) as f64 / latency),
            transfer: Some(c.latency_ns.saturating_sub(c.ttfb_ns) as f64 / latency),
            send: (c.with_send == c.responses)
                .then(|| c.send_ns.saturating_sub(c.connect_ns) as f64 / latency),
        };
        numbers.insert("mean_latency_ns", latency / c.responses as f64);
        for (name, value) in [
            ("server_wait_share", shares.server_wait),
            ("transfer_share", shares.transfer),
            ("send_share", shares.send),
        ] {
            if let Some(v) = value {
                numbers.insert(name, v);
            }
        }
        shares
    }
}

pub fn share(part: i64, whole: i64) -> f64 {
    if whole > 0 {
        part as f64 / whole as f64
    } else {
        0.0
    }
}

/// A phase's workers' busy and waiting shares of their alive time.
pub fn worker_shares(p: &PhaseWorkers) -> WorkerShares {
    WorkerShares {
        busy: share(p.busy_ns, p.alive_ns),
        waiting: share(p.waiting_ns, p.alive_ns),
    }
}

/// The phase the run is judged on: the one whose workers started most (the longer on a tie).
pub fn judged_phase(summary: &RunSummary) -> Option<&PhaseWorkers> {
    let phases = &summary.workers.as_ref()?.phases;
    phases
        .iter()
        .max_by_key(|p| (p.started, p.last_ended_ns - p.first_started_ns))
}

pub fn phase_count(summary: &RunSummary) -> usize {
    summary.workers.as_ref().map_or(0, |w| w.phases.len())
}

/// The phase, when the run has several: what the sentences say it was judged on.
pub fn phase_named(summary: &RunSummary, p: &PhaseWorkers) -> Option<(String, u64)> {
    (phase_count(summary) > 1).then(|| (p.phase.clone(), p.started))
}

/// Errors: failures above the contract's share; a capacity level's error-rate SLO.
pub fn errors(f: &Facts<'_>, numbers: &mut Numbers) -> Vec<Finding> {
    let s = f.summary;
    let rate = share(s.failed as i64, s.requests as i64);
    numbers.insert("error_rate", rate);
    let mut found = Vec::new();
    if s.failed == 0 {
        found.push(Finding::note(
            Rule::ErrorsShare,
            Seen::NoFailures {
                requests: s.requests,
            },
        ));
    } else {
        let mut classes: Vec<(String, u64)> =
            s.errors.iter().map(|(c, n)| (c.clone(), *n)).collect();
        classes.sort_by_key(|c| std::cmp::Reverse(c.1));
        let mut statuses: Vec<(String, u64)> = s
            .failed_statuses
            .iter()
            .chain(&s.failed_grpc)
            .map(|(c, n)| (c.clone(), *n))
            .collect();
        statuses.sort_by_key(|c| std::cmp::Reverse(c.1));
        let seen = Seen::Failures {
            failed: s.failed,
            requests: s.requests,
            rate,
            classes,
            statuses,
            rejections: s.rejections.clone(),
        };
        found.push(Finding {
            rule: Rule::ErrorsShare,
            limit: rate > T.max_error_rate,
            seen,
        });
    }
    if let Some(level) = f.level {
        found.extend(level.error_findings());
    }
    found
}

/// The client: its CPU, its own work, a producer, its schedule, HTTP/2 stream slots.
pub fn client(
    f: &Facts<'_>,
    shares: &Shares,
    phase: Option<&PhaseWorkers>,
    numbers: &mut Numbers,
) -> Vec<Finding> {
    let mut found = Vec::new();
    if let Some(c) = f.client {
        numbers.insert("client_cpu_peak", c.peak_cpu_utilisation);
        let seen = Seen::Client(Box::new(c.clone()));
        found.push(match c.saturated {
            true => Finding::limit(Rule::ClientCpu, seen),
            false => Finding::note(Rule::ClientNote, seen),
        });
    }
    if let Some(p) = phase {
        let w = worker_shares(p);
        numbers.extend([
            ("busy_share", w.busy),
            ("waiting_share", w.waiting),
            ("own_share", w.own()),
        ]);
        if w.own_work_limits() {
            let seen = Seen::OwnWork {
                own: w.own(),
                phase: phase_named(f.summary, p),
            };
            found.push(Finding::limit(Rule::ClientOwnWork, seen));
        }
    }
    let alive_ns = f.summary.workers.as_ref().map_or(0, |w| w.alive_ns);
    let queue_wait = share(
        f.components.queue_wait_ns.min(i64::MAX as u128) as i64,
        alive_ns,
    );
    if f.components.queue_wait_ns > 0 {
        numbers.insert("empty_buffer_share", queue_wait);
    }
    if queue_wait > T.max_queue_wait_share {
        found.push(Finding::limit(
            Rule::ClientProducer,
            Seen::EmptyBuffer { share: queue_wait },
        ));
    }
    found.extend(schedule(f, numbers));
    if let (true, Some(send)) = (f.streams, shares.send) {
        numbers.insert("http2_send_share", send);
        if send >= T.max_transfer_share {
            found.push(Finding::limit(
                Rule::ClientHttp2Streams,
                Seen::Share { share: send },
            ));
        }
    }
    found
}

/// Open model: whether the client kept its schedule (a late client is the limit unless the
/// server fell behind at the same time: then it is a note, and the server check decides).
fn schedule(f: &Facts<'_>, numbers: &mut Numbers) -> Option<Finding> {
    let (schedule, sustainability) = f.open.as_ref()?;
    numbers.insert("late_share", schedule.late_share);
    if let Some(lag) = schedule.send_lag_p99_ns {
        numbers.insert("send_lag_p99_ns", lag);
    }
    if schedule.kept {
        return None;
    }
    let server_behind = !sustainability.problems.is_empty();
    let seen = Seen::Late {
        schedule: schedule.clone(),
        server_behind,
    };
    Some(Finding {
        rule: Rule::ClientSchedule,
        limit: !server_behind,
        seen,
    })
}

/// The network: a full link, or moving bytes dominating latency where the link carried
/// enough to explain it. Bytes that take long without the link to show for it are not the
/// network's: a late body is noted (and counted as time at the server), a slow send is noted.
pub fn network(f: &Facts<'_>, shares: &Shares, numbers: &mut Numbers) -> Vec<Finding> {
    let mut found = Vec::new();
    // The network's own evidence, shown whenever the kernel gave it.
    if let Some(tcp) = f.client.and_then(|c| c.tcp) {
        numbers.extend([
            ("tcp_rtt_mean_us", tcp.rtt_mean_us),
            ("tcp_retransmit_share", tcp.retransmit_share),
        ]);
        if let Some(min) = tcp.min_rtt_us {
            numbers.insert("tcp_min_rtt_us", min as f64);
        }
        found.push(Finding::note(Rule::NetworkTcp, Seen::Tcp(tcp)));
    }
    let capacity = f
        .client
        .and_then(|c| c.link_capacity_bps)
        .filter(|c| *c > 0);
    let peak = peak_bytes_per_s(&f.components.bytes_by_second);
    let mut used = (None, None);
    if let (Some(capacity), Some((tx, rx))) = (capacity, peak) {
        numbers.insert("link_capacity_bps", capacity as f64);
        for (direction, bytes, name) in [
            ("tx", tx, "tx_link_utilisation"),
            ("rx", rx, "rx_link_utilisation"),
        ] {
            let utilisation = bytes as f64 * 8.0 / capacity as f64;
            numbers.insert(name, utilisation);
            match direction {
                "tx" => used.0 = Some(utilisation),
                _ => used.1 = Some(utilisation),
            }
            let seen = Seen::Link {
                direction,
                bps: bytes as f64 * 8.0,
                utilisation,
                capacity_bps: capacity as f64,
            };
            found.push(Finding {
                rule: Rule::NetworkLink,
                limit: utilisation >= T.max_link_utilisation,
                seen,
            });
        }
    }
    let explains =
        |utilisation: Option<f64>| utilisation.is_some_and(|u| u >= T.min_transfer_link_share);
    let carried = |direction: &'static str, i: usize| Carried {
        direction,
        bps: peak.map(|p| [p.0, p.1][i] as f64 * 8.0),
        capacity_bps: capacity.map(|c| c as f64),
    };
    if let Some(transfer) = shares.transfer.filter(|s| *s >= T.max_transfer_share) {
        let seen = Seen::Moving {
            share: transfer,
            carried: carried("rx", 1),
        };
        found.push(Finding {
            rule: Rule::NetworkTransfer,
            limit: explains(used.1),
            seen,
        });
    }
    if let (false, Some(send)) = (f.streams, shares.send) {
        if send >= T.max_transfer_share {
            let seen = Seen::Moving {
                share: send,
                carried: carried("tx", 0),
            };
            found.push(Finding {
                rule: Rule::NetworkSend,
                limit: explains(used.0),
                seen,
            });
        }
    }
    found
}

/// The busiest second's (sent, received) bytes, leaving out the first and the last second
/// when the run has more (slivers of a second are not a rate).
fn peak_bytes_per_s(seconds: &[(u64, u64)]) -> Option<(u64, u64)> {
    let inner = match seconds.len() {
        0 => return None,
        1 | 2 => seconds,
        n => &seconds[1..n - 1],
    };
    Some((
        inner.iter().map(|s| s.0).max().unwrap_or(0),
        inner.iter().map(|s| s.1).max().unwrap_or(0),
    ))
}

/// Whether a body that came late (receiving it dominated latency without the link to explain
/// it) was noted: its time is then the server's.
pub fn body_came_late(findings: &[Finding]) -> bool {
    findings
        .iter()
        .any(|x| x.rule == Rule::NetworkTransfer && !x.limit)
}

/// What the server's metrics name: whether it was saturated (and by what), and notes.
pub fn server_named(f: &Facts<'_>, numbers: &mut Numbers) -> Vec<Finding> {
    let mut found = Vec::new();
    let Some(e) = &f.server else {
        return found;
    };
    if let Some(w) = &e.workers {
        let queued = e.queue.as_ref().filter(|q| q.max > 0.0).cloned();
        let all = w
            .all_busy_share
            .filter(|all| *all >= T.saturated_scrape_share);
        if let Some(all) = all {
            numbers.insert("server_all_busy_share", all);
        }
        let seen = Seen::Workers {
            workers: w.clone(),
            queued,
            all_busy_share: all,
        };
        found.push(Finding {
            rule: Rule::ServerSaturated,
            limit: all.is_some(),
            seen,
        });
    } else if let Some(q) = &e.queue {
        found.push(Finding {
            rule: Rule::ServerSaturated,
            limit: q.nonempty_share >= T.saturated_scrape_share,
            seen: Seen::Queue(q.clone()),
        });
    }
    if let Some(cpu) = &e.host_cpu {
        numbers.insert("server_host_cpu_share", cpu.busy_share);
        let shared = f.client.is_some_and(|c| c.server_shares_cores);
        let client_cores = f.client.map(|c| c.mean_cpu_utilisation * c.cpu_limit_cores);
        let busy = match cpu.busy_share {
            b if b >= T.cpu_saturated_share => CpuBusy::Saturated,
            b if b < T.cpu_room_share => CpuBusy::Room,
            _ => CpuBusy::Between,
        };
        let seen = Seen::HostCpu {
            cpu: cpu.clone(),
            busy,
            shared,
            service_cores: e.service_cpu_cores,
            client_cores,
        };
        found.push(Finding {
            rule: Rule::ServerSaturated,
            limit: busy == CpuBusy::Saturated,
            seen,
        });
    }
    let said_with_host_cpu =
        e.host_cpu.is_some() && f.client.is_some_and(|c| c.server_shares_cores);
    if let (Some(cores), false) = (e.service_cpu_cores, said_with_host_cpu) {
        numbers.insert("service_cpu_cores", cores);
        found.push(Finding::note(Rule::ServerNote, Seen::ServiceCpu(cores)));
    }
    if e.failed_scrapes > 0 {
        found.push(Finding::note(
            Rule::ServerNote,
            Seen::FailedScrapes(e.failed_scrapes),
        ));
    }
    found
}
