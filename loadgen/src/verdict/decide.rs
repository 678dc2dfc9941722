//! The rules: four checks in a fixed order — errors, client, network, server — each reading
//! the run's facts against `contract/verdict.json`'s thresholds; the first that finds a limit
//! decides. When none does, the workload set the pace (an open run that kept up, workers
//! that spent their time thinking as configured: `none`), or one run cannot tell
//! (`inconclusive`, saying what would).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::Deserialize;

use super::schedule::{Schedule, Sustainability};
use super::server::ServerEvidence;
use super::{Cause, PhaseVerdict, Strength, Verdict};
use crate::report::{PhaseWorkers, RunSummary};
use crate::stats::Components;
use crate::sysmon::ClientSummary;

/// `contract/verdict.json`: the thresholds, documented there.
const VERDICT_JSON: &str = include_str!("../../../contract/verdict.json");

#[derive(Debug, Deserialize)]
struct Thresholds {
    max_error_rate: f64,
    max_own_share: f64,
    max_queue_wait_share: f64,
    min_paced_share: f64,
    min_busy_share: f64,
    min_server_wait_share: f64,
    max_transfer_share: f64,
    max_link_utilisation: f64,
    saturated_scrape_share: f64,
    cpu_saturated_share: f64,
    cpu_room_share: f64,
}

static T: LazyLock<Thresholds> =
    LazyLock::new(|| serde_json::from_str(VERDICT_JSON).expect("contract/verdict.json is valid"));

/// Said when one closed level spends its time at the server with no measure of the server's
/// saturation (the analysis's testbeds look for these words).
pub const ONE_LEVEL: &str = "one level cannot tell a server at its capacity from one with room \
     to spare; run `loadgen capacity` or a sweep to find where it stops, or scrape the \
     server's metrics (--server-metrics) to see its saturation";

/// Everything the verdict reads.
pub struct Facts<'a> {
    pub summary: &'a RunSummary,
    pub components: &'a Components,
    pub client: Option<&'a ClientSummary>,
    pub http2: bool,
    /// Open model: how the run kept its schedule, from its rows.
    pub open: Option<(Schedule, Sustainability)>,
    pub server: Option<ServerEvidence>,
    pub decided_by: &'static str,
}

/// A check's outcome: the limit it found (rule, sentence), and what it noted.
#[derive(Default)]
struct Check {
    limit: Option<(&'static str, String)>,
    notes: Vec<String>,
}

impl Check {
    fn limit(&mut self, rule: &'static str, text: String) {
        if self.limit.is_none() {
            self.limit = Some((rule, text));
        } else {
            self.notes.push(text);
        }
    }
}

/// Decides the run's verdict.
pub fn decide(f: Facts<'_>) -> Verdict {
    let mut numbers = BTreeMap::new();
    let shares = Shares::of(f.components, &mut numbers);
    let phase = judged_phase(f.summary);
    let server = server_named(&f, &mut numbers);
    let checks = [
        (Cause::Errors, errors(&f, &mut numbers)),
        (Cause::Client, client(&f, &shares, phase, &mut numbers)),
        (Cause::Network, network(&f, &shares, &mut numbers)),
    ];
    let mut evidence: Vec<String> = Vec::new();
    let mut decided = None;
    for (cause, check) in checks {
        if let (None, Some((rule, text))) = (&decided, &check.limit) {
            decided = Some((cause, Strength::Strong, *rule, text.clone()));
        } else if let Some((_, text)) = check.limit {
            evidence.push(text);
        }
        evidence.extend(check.notes);
    }
    let (cause, strength, rule, summary) =
        decided.unwrap_or_else(|| server_check(&f, &shares, phase, &server));
    for named in server.saturated.iter().chain(&server.notes) {
        if cause != Cause::Server || !summary.contains(named.as_str()) {
            evidence.push(format!("server: {named}"));
        }
    }
    let summary = match (phase, cause) {
        (Some(p), Cause::Client | Cause::Server | Cause::Inconclusive | Cause::None)
            if phase_count(f.summary) > 1 && rule != "client.cpu" =>
        {
            format!(
                "{summary} (judged on {}, the phase with the most workers alive)",
                p.phase
            )
        }
        _ => summary,
    };
    // Where the server shares the client's cores, each side's numbers include the other's
    // load: said once, after the finding (unless the finding quotes the Client line, which
    // says it already).
    let sharing = f
        .client
        .and_then(ClientSummary::sharing)
        .filter(|_| matches!(cause, Cause::Client | Cause::Server | Cause::Inconclusive));
    let summary = match sharing {
        Some(sharing) if !summary.contains(&sharing) => {
            format!("{summary} — {sharing} with the client")
        }
        _ => summary,
    };
    evidence.insert(0, summary.clone());
    evidence.dedup();
    Verdict {
        cause,
        strength,
        rule,
        summary,
        evidence,
        numbers,
        server: f.server.clone(),
        phases: phase_verdicts(f.summary, &shares, server.saturated.is_some()),
        slos: None,
        decided_by: f.decided_by,
    }
}

/// Where the responses' time went, as shares of their latency.
struct Shares {
    /// First byte minus sending: the server's time and the round trip.
    server_wait: Option<f64>,
    transfer: Option<f64>,
    /// Sending the request (connect left out).
    send: Option<f64>,
}

impl Shares {
    fn of(c: &Components, numbers: &mut BTreeMap<&'static str, f64>) -> Self {
        if c.responses == 0 || c.latency_ns == 0 {
            return Shares {
                server_wait: None,
                transfer: None,
                send: None,
            };
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

/// "1.6 Mbit/s", "250 kbit/s".
fn bits_per_s(bps: f64) -> String {
    match bps {
        b if b >= 1e9 => format!("{:.2} Gbit/s", b / 1e9),
        b if b >= 1e6 => format!("{:.1} Mbit/s", b / 1e6),
        b => format!("{:.0} kbit/s", b / 1e3),
    }
}

fn pct(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// The phase the run is judged on: the one whose workers started most (the longer on a tie).
fn judged_phase(summary: &RunSummary) -> Option<&PhaseWorkers> {
    let phases = &summary.workers.as_ref()?.phases;
    phases
        .iter()
        .max_by_key(|p| (p.started, p.last_ended_ns - p.first_started_ns))
}

fn share(part: i64, whole: i64) -> f64 {
    if whole > 0 {
        part as f64 / whole as f64
    } else {
        0.0
    }
}

fn errors(f: &Facts<'_>, numbers: &mut BTreeMap<&'static str, f64>) -> Check {
    let mut check = Check::default();
    let s = f.summary;
    let rate = share(s.failed as i64, s.requests as i64);
    numbers.insert("error_rate", rate);
    if s.failed == 0 {
        check
            .notes
            .push(format!("no failures in {} requests", s.requests));
        return check;
    }
    let mut classes: Vec<(&String, &u64)> = s.errors.iter().collect();
    classes.sort_by(|a, b| b.1.cmp(a.1));
    let mut detail: Vec<String> = classes.iter().map(|(c, n)| format!("{c} {n}")).collect();
    let mut statuses: Vec<(&String, &u64)> = s.failed_statuses.iter().collect();
    statuses.sort_by(|a, b| b.1.cmp(a.1));
    if !statuses.is_empty() {
        let list: Vec<String> = statuses.iter().map(|(s, n)| format!("{s} ×{n}")).collect();
        detail.push(format!("statuses {}", list.join(", ")));
    }
    let text = format!(
        "{} of {} requests failed ({}): {}",
        s.failed,
        s.requests,
        pct(rate),
        detail.join("; ")
    );
    if rate > T.max_error_rate {
        check.limit(
            "errors.share",
            format!("{text} — above {}", pct(T.max_error_rate)),
        );
    } else {
        check.notes.push(text);
    }
    check
}

fn client(
    f: &Facts<'_>,
    shares: &Shares,
    phase: Option<&PhaseWorkers>,
    numbers: &mut BTreeMap<&'static str, f64>,
) -> Check {
    let mut check = Check::default();
    if let Some(c) = f.client {
        numbers.insert("client_cpu_peak", c.peak_cpu_utilisation);
        if c.saturated {
            let finding = c
                .saturated_finding()
                .unwrap_or_else(|| format!("the client: {}", c.console_line()));
            check.limit("client.cpu", finding);
        } else {
            check.notes.push(format!("client: {}", c.console_line()));
        }
    }
    if let Some(p) = phase {
        let (busy, waiting) = (
            share(p.busy_ns, p.alive_ns),
            share(p.waiting_ns, p.alive_ns),
        );
        let own = (1.0 - busy - waiting).max(0.0);
        numbers.extend([
            ("busy_share", busy),
            ("waiting_share", waiting),
            ("own_share", own),
        ]);
        let where_ = phase_where(f.summary, p);
        if own > T.max_own_share {
            check.limit(
                "client.own_work",
                format!(
                    "workers spent {} of their time{where_} in the client's own work between \
                     requests (neither in a request nor waiting for the next)",
                    pct(own)
                ),
            );
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
        check.limit(
            "client.producer",
            format!(
                "consumers waited on an empty buffer {} of their time: the producer (the \
                 client) is the limit",
                pct(queue_wait)
            ),
        );
    }
    schedule_check(f, &mut check, numbers);
    if let (true, Some(send)) = (f.http2, shares.send) {
        numbers.insert("http2_send_share", send);
        if send >= T.max_transfer_share {
            check.limit(
                "client.http2_streams",
                format!(
                    "over HTTP/2 requests waited {} of their latency inside the client for a \
                     stream slot or flow-control window: more streams per connection than the \
                     server allows (lower --streams-per-connection or open more connections)",
                    pct(send)
                ),
            );
        }
    }
    check
}

/// Open model: whether the client kept its schedule (a late client is the limit unless the
/// server fell behind at the same time: then it is a note, and the server check decides).
fn schedule_check(f: &Facts<'_>, check: &mut Check, numbers: &mut BTreeMap<&'static str, f64>) {
    if let Some((schedule, sustainability)) = &f.open {
        numbers.insert("late_share", schedule.late_share);
        if let Some(lag) = schedule.send_lag_p99_ns {
            numbers.insert("send_lag_p99_ns", lag);
        }
        if !schedule.kept {
            let text = format!(
                "the client fell behind its own schedule: {} of sends started more than {} \
                 after their intended time (p99 send lag {})",
                pct(schedule.late_share),
                crate::units::duration(schedule.max_lateness_ns as f64),
                schedule
                    .send_lag_p99_ns
                    .map_or("-".into(), crate::units::duration)
            );
            match sustainability.problems.is_empty() {
                true => check.limit("client.schedule", text),
                false => check
                    .notes
                    .push(format!("{text}, while the server fell behind")),
            }
        }
    }
}

fn phase_count(summary: &RunSummary) -> usize {
    summary.workers.as_ref().map_or(0, |w| w.phases.len())
}

/// " in main (the phase with the most workers, 16)" for a run of several phases.
fn phase_where(summary: &RunSummary, p: &PhaseWorkers) -> String {
    match phase_count(summary) {
        0 | 1 => String::new(),
        _ => format!(
            " in {} (the phase with the most workers, {})",
            p.phase, p.started
        ),
    }
}

fn network(f: &Facts<'_>, shares: &Shares, numbers: &mut BTreeMap<&'static str, f64>) -> Check {
    let mut check = Check::default();
    let capacity = f
        .client
        .and_then(|c| c.link_capacity_bps)
        .filter(|c| *c > 0);
    let mut tx_idle = false;
    if let (Some(capacity), Some((tx, rx))) = (capacity, f.components.peak_bytes_per_s()) {
        numbers.insert("link_capacity_bps", capacity as f64);
        for (direction, bytes) in [("tx", tx), ("rx", rx)] {
            let utilisation = bytes as f64 * 8.0 / capacity as f64;
            numbers.insert(
                if direction == "tx" {
                    "tx_link_utilisation"
                } else {
                    "rx_link_utilisation"
                },
                utilisation,
            );
            tx_idle |= direction == "tx" && utilisation < T.max_link_utilisation;
            let text = format!(
                "{direction} {} in the busiest second is {} of the {} link",
                bits_per_s(bytes as f64 * 8.0),
                pct(utilisation),
                bits_per_s(capacity as f64)
            );
            match utilisation >= T.max_link_utilisation {
                true => check.limit("network.link", text),
                false => check.notes.push(text),
            }
        }
    }
    if let Some(transfer) = shares.transfer.filter(|s| *s >= T.max_transfer_share) {
        check.limit(
            "network.transfer",
            format!(
                "receiving response bodies took {} of latency",
                pct(transfer)
            ),
        );
    }
    if let (false, Some(send)) = (f.http2, shares.send) {
        if send >= T.max_transfer_share && !(capacity.is_some() && tx_idle) {
            check.limit(
                "network.send",
                format!("sending requests took {} of latency", pct(send)),
            );
        }
    }
    check
}

/// What the server's metrics name: whether it was saturated (and by what), and notes.
#[derive(Default)]
struct Named {
    saturated: Option<String>,
    notes: Vec<String>,
}

fn server_named(f: &Facts<'_>, numbers: &mut BTreeMap<&'static str, f64>) -> Named {
    let mut named = Named::default();
    let Some(e) = &f.server else {
        return named;
    };
    if let Some(w) = &e.workers {
        let busy = match w.limit {
            Some(limit) => format!("{:.0} of {limit:.0} workers busy", w.busy_max),
            None => format!("up to {:.0} workers busy", w.busy_max),
        };
        let queued = e
            .queue
            .as_ref()
            .filter(|q| q.max > 0.0)
            .map(|q| format!(", up to {:.0} requests queued (mean {:.0})", q.max, q.mean));
        let text = format!("{busy}{}", queued.unwrap_or_default());
        match w.all_busy_share {
            Some(all) if all >= T.saturated_scrape_share => {
                numbers.insert("server_all_busy_share", all);
                named.saturated = Some(format!("{text} ({} of the scrapes)", pct(all)));
            }
            _ => named.notes.push(text),
        }
    } else if let Some(q) = &e.queue {
        let text = format!(
            "requests queued in {} of the scrapes (up to {:.0})",
            pct(q.nonempty_share),
            q.max
        );
        match q.nonempty_share >= T.saturated_scrape_share {
            true => named.saturated = Some(text),
            false => named.notes.push(text),
        }
    }
    if let Some(cpu) = &e.host_cpu {
        numbers.insert("server_host_cpu_share", cpu.busy_share);
        let shared = f.client.is_some_and(|c| c.server_shares_cores);
        let split = match (shared, e.service_cpu_cores, f.client) {
            (true, Some(service), _) => {
                format!(", which the client shares (the service itself used {service:.2} cores)")
            }
            (true, None, Some(c)) => format!(
                ", which the client shares (it used {:.2} of them)",
                c.mean_cpu_utilisation * c.cpu_limit_cores
            ),
            _ => String::new(),
        };
        let cores = cpu.cores;
        if cpu.busy_share >= T.cpu_saturated_share {
            let text = format!(
                "CPU {} of {cores} cores on the target{split}",
                pct(cpu.busy_share)
            );
            named.saturated.get_or_insert(text);
        } else if cpu.busy_share < T.cpu_room_share {
            named.notes.push(format!(
                "the target's CPU was {} busy{split} — a limit there is inside the service (a \
                 pool, a lock, a downstream call), not its CPU",
                pct(cpu.busy_share)
            ));
        } else {
            named.notes.push(format!(
                "the target's CPU was {} busy{split}",
                pct(cpu.busy_share)
            ));
        }
    }
    if e.failed_scrapes > 0 {
        named.notes.push(format!(
            "{} scrapes of the server's metrics failed",
            e.failed_scrapes
        ));
    }
    named
}

/// The server check, when nothing before it found a limit.
fn server_check(
    f: &Facts<'_>,
    shares: &Shares,
    phase: Option<&PhaseWorkers>,
    named: &Named,
) -> (Cause, Strength, &'static str, String) {
    let wait = shares.server_wait.unwrap_or(0.0);
    let wait_text = format!("waiting for the first byte is {} of latency", pct(wait));
    if let Some((_, sustainability)) = &f.open {
        if sustainability.problems.is_empty() {
            let text = format!(
                "nothing limited it — the system kept up with the schedule: {:.0} req/s \
                 achieved of {:.0} offered",
                sustainability.achieved_rps, sustainability.offered_rps
            );
            return (Cause::None, Strength::Strong, "none.kept_up", text);
        }
        let mut text = format!(
            "the system fell behind the schedule: {}; {wait_text}",
            sustainability.problems.join("; ")
        );
        if let Some(what) = &named.saturated {
            text += &format!("; the server: {what}");
        }
        return (Cause::Server, Strength::Strong, "server.fell_behind", text);
    }
    let Some(p) = phase else {
        return (
            Cause::Inconclusive,
            Strength::Weak,
            "inconclusive.no_workers",
            "no worker ran".into(),
        );
    };
    let (busy, waiting) = (
        share(p.busy_ns, p.alive_ns),
        share(p.waiting_ns, p.alive_ns),
    );
    if busy < T.min_busy_share && waiting > T.min_paced_share {
        let text = format!(
            "nothing limited it — workers thought {:.0}% of the time, as configured (busy \
             {:.0}%{}): the server was not what held them",
            waiting * 100.0,
            busy * 100.0,
            phase_where(f.summary, p)
        );
        return (
            Cause::None,
            Strength::Strong,
            "none.paced_by_workload",
            text,
        );
    }
    if busy < T.min_busy_share {
        let text = format!("workers were in a request only {} of the time", pct(busy));
        return (
            Cause::Inconclusive,
            Strength::Weak,
            "inconclusive.idle_workers",
            text,
        );
    }
    if wait < T.min_server_wait_share {
        let text = format!("no sign of a server-side limit: {wait_text}");
        return (
            Cause::Inconclusive,
            Strength::Weak,
            "inconclusive.no_server_sign",
            text,
        );
    }
    match &named.saturated {
        Some(what) => (
            Cause::Server,
            Strength::Strong,
            "server.saturated",
            format!("the server: {what}; {wait_text}"),
        ),
        None => (
            Cause::Inconclusive,
            Strength::Weak,
            "inconclusive.one_level",
            format!("{wait_text}: the time is spent at the server, but {ONE_LEVEL}"),
        ),
    }
}

/// A verdict per phase for a run of several, on the workers alive in each.
fn phase_verdicts(
    summary: &RunSummary,
    shares: &Shares,
    server_saturated: bool,
) -> Vec<PhaseVerdict> {
    let Some(workers) = summary.workers.as_ref().filter(|w| w.phases.len() > 1) else {
        return Vec::new();
    };
    let wait = shares.server_wait.unwrap_or(0.0);
    workers
        .phases
        .iter()
        .map(|p| {
            let (busy, waiting) = (
                share(p.busy_ns, p.alive_ns),
                share(p.waiting_ns, p.alive_ns),
            );
            let (cause, rule) = if 1.0 - busy - waiting > T.max_own_share {
                (Cause::Client, "client.own_work")
            } else if waiting > T.min_paced_share {
                (Cause::None, "none.paced_by_workload")
            } else if busy >= T.min_busy_share && wait >= T.min_server_wait_share {
                match server_saturated {
                    true => (Cause::Server, "server.saturated"),
                    false => (Cause::Inconclusive, "inconclusive.one_level"),
                }
            } else {
                (Cause::Inconclusive, "inconclusive.no_server_sign")
            };
            PhaseVerdict {
                phase: p.phase.clone(),
                cause,
                rule,
                workers_alive: share(p.alive_ns, p.last_ended_ns - p.first_started_ns),
                busy_share: busy,
                waiting_share: waiting,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::WorkersSummary;
    use crate::verdict::server::{HostCpu, Workers};

    const S: i64 = 1_000_000_000;

    /// One phase of `workers` workers, each alive 10 s: busy and waiting shares as given.
    fn phase(name: &str, workers: u64, busy: f64, waiting: f64) -> PhaseWorkers {
        let alive = workers as i64 * 10 * S;
        PhaseWorkers {
            phase: name.into(),
            started: workers,
            first_started_ns: 0,
            last_ended_ns: 10 * S,
            alive_ns: alive,
            busy_ns: (alive as f64 * busy) as i64,
            waiting_ns: (alive as f64 * waiting) as i64,
            sent: 1000,
        }
    }

    fn summary(requests: u64, failed: u64, phases: Vec<PhaseWorkers>) -> RunSummary {
        let alive_ns = phases.iter().map(|p| p.alive_ns).sum();
        RunSummary {
            requests,
            failed,
            errors: [("http_status".to_string(), failed)]
                .into_iter()
                .filter(|e| e.1 > 0)
                .collect(),
            workers: Some(WorkersSummary {
                started: phases.iter().map(|p| p.started).sum(),
                alive_ns,
                phases,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// 1000 responses of 10 ms: `transfer` of it receiving, `send` sending, the rest waiting
    /// at the server.
    fn components(transfer: f64, send: f64) -> Components {
        let latency: u128 = 1000 * 10_000_000;
        let part = |share: f64| (latency as f64 * share) as u128;
        Components {
            responses: 1000,
            latency_ns: latency,
            send_ns: part(send),
            ttfb_ns: latency - part(transfer),
            with_send: 1000,
            ..Default::default()
        }
    }

    fn facts<'a>(summary: &'a RunSummary, components: &'a Components) -> Facts<'a> {
        Facts {
            summary,
            components,
            client: None,
            http2: false,
            open: None,
            server: None,
            decided_by: "test",
        }
    }

    fn open(late_share: f64, problems: &[&str]) -> (Schedule, Sustainability) {
        let schedule = Schedule {
            late_share,
            send_lag_p99_ns: Some(50e6),
            lag_share_of_latency: Some(0.9),
            max_lateness_ns: 10_000_000,
            kept: crate::verdict::schedule::schedule_kept(late_share, Some(0.9)),
        };
        let sustainability = Sustainability {
            slope_ns_per_s: 0.0,
            slope_t: 0.0,
            growth_ns: 0.0,
            achieved_rps: 290.0,
            offered_rps: 300.0,
            dropped: 0,
            problems: problems.iter().map(|p| p.to_string()).collect(),
        };
        (schedule, sustainability)
    }

    #[test]
    fn errors_above_the_contracts_share_decide_first() {
        let c = components(0.0, 0.0);
        let failing = summary(1000, 100, vec![phase("main", 8, 0.99, 0.0)]);
        let v = decide(facts(&failing, &c));
        assert_eq!((v.cause, v.rule), (Cause::Errors, "errors.share"));
        assert!(
            v.summary.contains("100 of 1000 requests failed (10.0%)"),
            "{}",
            v.summary
        );
        let few = summary(1000, 5, vec![phase("main", 8, 0.99, 0.0)]);
        let v = decide(facts(&few, &c));
        assert_ne!(v.cause, Cause::Errors);
        assert!(v
            .evidence
            .iter()
            .any(|e| e.starts_with("5 of 1000 requests failed")));
    }

    #[test]
    fn a_saturated_client_or_its_own_work_is_the_client() {
        let c = components(0.0, 0.0);
        let s = summary(1000, 0, vec![phase("main", 8, 0.99, 0.0)]);
        let mut client = ClientSummary {
            samples: 3,
            peak_cpu_utilisation: 0.95,
            cpu_limit_cores: 2.0,
            cpuset_cores: 2,
            ..Default::default()
        };
        client.judge();
        client.set_shared_with(Some("the embedded server"));
        let v = decide(Facts {
            client: Some(&client),
            ..facts(&s, &c)
        });
        assert_eq!((v.cause, v.rule), (Cause::Client, "client.cpu"));
        assert_eq!(
            v.summary,
            "the client was saturated (peak CPU 95 % of its 2 cores): throughput and latency \
             describe the client, not the server; give it more cores or fewer workers — the \
             embedded server shares these 2 cores with the client"
        );
        let busy_client = summary(1000, 0, vec![phase("main", 8, 0.5, 0.1)]);
        let v = decide(facts(&busy_client, &c));
        assert_eq!((v.cause, v.rule), (Cause::Client, "client.own_work"));
        assert_eq!(v.numbers["own_share"], 0.4);
    }

    #[test]
    fn think_time_is_the_workload_setting_the_pace() {
        let c = components(0.0, 0.0);
        let s = summary(1000, 0, vec![phase("main", 8, 0.25, 0.75)]);
        let v = decide(facts(&s, &c));
        assert_eq!((v.cause, v.strength), (Cause::None, Strength::Strong));
        assert_eq!(v.rule, "none.paced_by_workload");
    }

    #[test]
    fn one_closed_level_at_the_server_needs_the_servers_saturation_to_say_server() {
        let c = components(0.0, 0.0);
        let s = summary(1000, 0, vec![phase("main", 64, 0.99, 0.0)]);
        let v = decide(facts(&s, &c));
        assert_eq!(
            (v.cause, v.rule),
            (Cause::Inconclusive, "inconclusive.one_level")
        );
        assert!(v.summary.contains(ONE_LEVEL));
        let gauges = ServerEvidence {
            workers: Some(Workers {
                busy_max: 8.0,
                busy_mean: 8.0,
                limit: Some(8.0),
                all_busy_share: Some(0.95),
            }),
            ..Default::default()
        };
        let v = decide(Facts {
            server: Some(gauges.clone()),
            ..facts(&s, &c)
        });
        assert_eq!((v.cause, v.strength), (Cause::Server, Strength::Strong));
        assert!(v.summary.contains("8 of 8 workers busy"), "{}", v.summary);
        // A server on the client's machine: the finding first, then who shares the cores.
        let mut client = ClientSummary {
            samples: 3,
            cpuset_cores: 2,
            ..Default::default()
        };
        client.set_shared_with(Some("the server on this machine (loopback)"));
        let v = decide(Facts {
            server: Some(gauges.clone()),
            client: Some(&client),
            ..facts(&s, &c)
        });
        assert!(
            v.summary.starts_with("the server: 8 of 8 workers busy"),
            "{}",
            v.summary
        );
        assert!(
            v.summary.ends_with(
                " — the server on this machine (loopback) shares these 2 cores with the client"
            ),
            "{}",
            v.summary
        );
        // The target's CPU: full names it; idle says the limit is not its CPU.
        let cpu = |busy_share| ServerEvidence {
            host_cpu: Some(HostCpu {
                cores: 2,
                busy_share,
                busiest_core_share: busy_share,
            }),
            ..Default::default()
        };
        let v = decide(Facts {
            server: Some(cpu(0.97)),
            ..facts(&s, &c)
        });
        assert_eq!(v.rule, "server.saturated");
        assert!(
            v.summary.contains("CPU 97.0% of 2 cores on the target"),
            "{}",
            v.summary
        );
        let v = decide(Facts {
            server: Some(cpu(0.06)),
            ..facts(&s, &c)
        });
        assert_eq!(v.cause, Cause::Inconclusive);
        assert!(v
            .evidence
            .iter()
            .any(|e| e.contains("6.0% busy") && e.contains("not its CPU")));
    }

    #[test]
    fn moving_bytes_is_the_network_and_a_full_link_too() {
        let body = components(0.7, 0.01);
        let s = summary(1000, 0, vec![phase("main", 8, 0.99, 0.0)]);
        let v = decide(facts(&s, &body));
        assert_eq!((v.cause, v.rule), (Cause::Network, "network.transfer"));
        let mut link = components(0.0, 0.0);
        link.bytes_by_second = vec![(0, 0), (1_000, 190_000), (1_000, 200_000), (0, 0)];
        let client = ClientSummary {
            link_capacity_bps: Some(2_000_000),
            ..Default::default()
        };
        let v = decide(Facts {
            client: Some(&client),
            ..facts(&s, &link)
        });
        assert_eq!((v.cause, v.rule), (Cause::Network, "network.link"));
        assert_eq!(v.numbers["rx_link_utilisation"], 0.8);
        assert!(v.summary.contains("rx 1.6 Mbit/s") && v.summary.contains("2.0 Mbit/s link"));
        // Over HTTP/2 the send share is the client's wait for a stream slot.
        let streams = components(0.0, 0.6);
        let v = decide(Facts {
            http2: true,
            ..facts(&s, &streams)
        });
        assert_eq!((v.cause, v.rule), (Cause::Client, "client.http2_streams"));
    }

    #[test]
    fn an_open_run_kept_up_fell_behind_or_sent_late() {
        let c = components(0.0, 0.0);
        let s = summary(3000, 0, vec![phase("main", 20, 0.3, 0.7)]);
        let v = decide(Facts {
            open: Some(open(0.0, &[])),
            ..facts(&s, &c)
        });
        assert_eq!((v.cause, v.rule), (Cause::None, "none.kept_up"));
        let behind = ["12 sends were dropped at the in-flight cap"];
        let v = decide(Facts {
            open: Some(open(0.0, &behind)),
            ..facts(&s, &c)
        });
        assert_eq!((v.cause, v.rule), (Cause::Server, "server.fell_behind"));
        assert!(v.summary.contains("12 sends were dropped"));
        let v = decide(Facts {
            open: Some(open(0.3, &[])),
            ..facts(&s, &c)
        });
        assert_eq!((v.cause, v.rule), (Cause::Client, "client.schedule"));
        // Late while the server fell behind: the server's queue, and the lateness a note.
        let v = decide(Facts {
            open: Some(open(0.3, &behind)),
            ..facts(&s, &c)
        });
        assert_eq!(v.cause, Cause::Server);
        assert!(v
            .evidence
            .iter()
            .any(|e| e.contains("while the server fell behind")));
    }

    #[test]
    fn each_phase_gets_its_own_verdict_and_the_run_the_busiest_phases() {
        let c = components(0.0, 0.0);
        let phases = vec![
            phase("startup", 2, 0.3, 0.7),
            phase("groups", 30, 0.99, 0.0),
            phase("tail", 4, 0.5, 0.0),
        ];
        let s = summary(1000, 0, phases);
        let v = decide(facts(&s, &c));
        assert_eq!(v.cause, Cause::Inconclusive);
        let by_phase: Vec<(&str, Cause)> = v
            .phases
            .iter()
            .map(|p| (p.phase.as_str(), p.cause))
            .collect();
        assert_eq!(
            by_phase,
            [
                ("startup", Cause::None),
                ("groups", Cause::Inconclusive),
                ("tail", Cause::Client)
            ]
        );
    }
}
