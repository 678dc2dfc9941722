//! The verdict in words: what each check saw ([`Seen`]) as the one sentence the console,
//! run.json's `evidence` and every reader show. It words numbers it is given; it decides
//! nothing and compares nothing with a threshold.

use super::findings::{BodyGap, BodyGaps, Carried, CpuBusy, ResentSyns, Seen};
use super::rule::T;
use super::schedule::Schedule;
use super::server::{HostCpu, Queue, Workers};
use crate::units::duration;

/// Said when one closed level spends its time at the server with no measure of the server's
/// saturation (the analysis's testbeds look for these words).
pub const ONE_LEVEL: &str = "one level cannot tell a server at its capacity from one with room \
     to spare; run `loadgen capacity` or a sweep to find where it stops, or scrape the \
     server's metrics (--server-metrics) to see its saturation";

/// [`ONE_LEVEL`] for a run that scraped the server (`--server-metrics`) and read no
/// saturation gauge there: advising the scrape it had would send the user in a circle.
pub const ONE_LEVEL_SCRAPED: &str = "one level cannot tell a server at its capacity from one \
     with room to spare, and the server's scrapes held no saturation gauge the verdict read; \
     run `loadgen capacity` or a sweep to find where it stops, or name the service's gauges \
     with --server-saturation (BUSY/LIMIT)";

pub fn pct(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// "1.6 Mbit/s", "250 kbit/s".
pub fn bits_per_s(bps: f64) -> String {
    match bps {
        b if b >= 1e9 => format!("{:.2} Gbit/s", b / 1e9),
        b if b >= 1e6 => format!("{:.1} Mbit/s", b / 1e6),
        b => format!("{:.0} kbit/s", b / 1e3),
    }
}

/// " in main (the phase with the most workers, 16)" for a run of several phases.
pub fn phase_where(phase: &Option<(String, u64)>) -> String {
    match phase {
        None => String::new(),
        Some((name, started)) => {
            format!(" in {name} (the phase with the most workers, {started})")
        }
    }
}

/// "waiting for the first byte is 93.1% of latency".
pub fn wait_text(wait: f64) -> String {
    format!("waiting for the first byte is {} of latency", pct(wait))
}

/// The finding as one sentence; `limit` says whether it decided or is a note.
pub fn sentence(rule: super::Rule, limit: bool, seen: &Seen) -> String {
    match seen {
        Seen::NoFailures { requests } => format!("no failures in {requests} requests"),
        Seen::Failures {
            failed,
            requests,
            rate,
            classes,
            statuses,
            rejections,
        } => {
            let text = failures(*failed, *requests, *rate, classes, statuses, limit);
            rejected(*requests, rejections).map_or(text.clone(), |r| format!("{r}: {text}"))
        }
        Seen::Tcp(t) => tcp(t),
        Seen::Client(c) if limit => c
            .saturated_finding()
            .unwrap_or_else(|| format!("the client: {}", c.console_line())),
        Seen::Client(c) => format!("client: {}", c.console_line()),
        Seen::OwnWork { own, phase } => format!(
            "workers spent {} of their time{} in the client's own work between requests \
             (neither in a request nor waiting for the next)",
            pct(*own),
            phase_where(phase)
        ),
        Seen::EmptyBuffer { share } => format!(
            "consumers waited on an empty buffer {} of their time: the producer (the client) \
             is the limit",
            pct(*share)
        ),
        Seen::Late {
            schedule,
            server_behind,
        } => late(schedule, *server_behind),
        Seen::Share { share } => share_of_latency(rule, *share),
        Seen::Moving { share, carried } => moving(rule, limit, *share, carried),
        Seen::Link {
            direction,
            bps,
            utilisation,
            capacity_bps,
        } => format!(
            "{direction} {} in the busiest second is {} of the {} link",
            bits_per_s(*bps),
            pct(*utilisation),
            bits_per_s(*capacity_bps)
        ),
        Seen::Workers {
            workers,
            queued,
            all_busy_share,
        } => workers_text(workers, queued.as_ref(), *all_busy_share),
        Seen::Queue(q) => format!(
            "requests queued in {} of the scrapes (up to {:.0})",
            pct(q.nonempty_share),
            q.max
        ),
        Seen::HostCpu {
            cpu,
            busy,
            shared,
            service_cores,
            client_cores,
        } => host_cpu(cpu, *busy, *shared, (*service_cores, *client_cores)),
        Seen::FailedScrapes(n) => format!("{n} scrapes of the server's metrics failed"),
        Seen::ServiceCpu(cores) => format!(
            "the service itself used {cores:.2} cores on average (its process_cpu_seconds_total)"
        ),
        Seen::BodyGaps(gaps) => body_gaps(gaps, limit),
        Seen::ResentSyns(syns) => resent_syns(syns, limit),
        Seen::Level(reasons) => reasons.join("; "),
        Seen::Text(text) => text.clone(),
    }
}

/// A share of latency: the client's wait for a stream slot (HTTP/2, HTTP/3), or moving bytes.
fn share_of_latency(rule: super::Rule, share: f64) -> String {
    match rule {
        super::Rule::ClientHttp2Streams => format!(
            "over HTTP/2 or HTTP/3 requests waited {} of their latency inside the client for a \
             stream slot or flow-control window: more streams per connection than the server \
             allows (lower --streams-per-connection or open more connections)",
            pct(share)
        ),
        _ => format!("moving bytes took {} of latency", pct(share)),
    }
}

/// Moving bytes that dominated latency: with the link that explains it (a limit), or without.
fn moving(rule: super::Rule, limit: bool, share: f64, c: &Carried) -> String {
    let what = match rule {
        super::Rule::NetworkSend => "sending requests",
        _ => "receiving response bodies",
    };
    let link = match (c.bps, c.capacity_bps) {
        (Some(bps), Some(capacity)) => format!(
            "{} {} in the busiest second of the {} link",
            c.direction,
            bits_per_s(bps),
            bits_per_s(capacity)
        ),
        (Some(bps), None) => format!(
            "{} {} in the busiest second, on a link of unknown capacity",
            c.direction,
            bits_per_s(bps)
        ),
        _ => "nothing measured on the link".to_string(),
    };
    if limit {
        return format!("{what} took {} of latency ({link})", pct(share));
    }
    let why = match rule {
        super::Rule::NetworkSend => {
            "the request's bytes waited on the server (it did not read them) or on the client"
        }
        _ => {
            "the body came late from the server — it sent its headers first, or held the body \
             under Nagle's algorithm without TCP_NODELAY — and that time is counted as the \
             server's"
        }
    };
    format!(
        "{what} took {} of latency, but the link does not explain it ({link}): {why}; give \
         --link-capacity if the link may be the limit",
        pct(share)
    )
}

/// The bodies against their headers: the server's Nagle meeting the client's delayed ACK (a
/// limit, or a note of what it costs), or what else the gap was.
fn body_gaps(g: &BodyGaps, limit: bool) -> String {
    let ms = |ns: f64| format!("{:.0}", ns / 1e6);
    let counted = format!(
        "{} of {} response bodies came one delayed ACK ({}–{} ms) after their headers, the \
         median {} ms after",
        g.delayed_ack,
        g.responses,
        ms(g.band_ns.0),
        ms(g.band_ns.1),
        ms(g.median_gap_ns)
    );
    let fix = "set TCP_NODELAY on the server's sockets, or have it write headers and body in \
               one write";
    match (g.gap, limit) {
        (BodyGap::DelayedAck, true) => format!(
            "the server's Nagle algorithm met the client's delayed ACK: {counted} — the server \
             wrote them in two writes, and held the small second one until the client \
             acknowledged the first, which it delays ~40 ms; that wait, not the server's work, \
             set each response's time: {fix}"
        ),
        (BodyGap::DelayedAck, false) => format!(
            "{counted}: the server's Nagle algorithm meeting the client's delayed ACK adds \
             about that to each response; {fix}"
        ),
        (BodyGap::OwnWait, _) => format!(
            "{counted}: not a delayed ACK but the server's own wait between headers and body \
             (it sent its headers before the body was ready)"
        ),
        (BodyGap::CannotTell, _) => format!(
            "{counted}: some may have waited for the client's delayed ACK under the server's \
             Nagle algorithm, the rest for the server itself — the rows cannot tell; a run with \
             TCP_NODELAY on the server's sockets would (the delayed-ACK wait goes, the server's \
             own stays)"
        ),
    }
}

/// The connects that waited for a resent SYN: the server's accept queue.
fn resent_syns(s: &ResentSyns, limit: bool) -> String {
    let after: Vec<String> = (s.after_s.iter())
        .map(|(seconds, n)| format!("{n} after {seconds} s"))
        .collect();
    let text = format!(
        "{} of {} connects waited for the kernel to resend their SYN ({}: its SYN retry \
         schedule), {} of the responses' time",
        s.resent,
        s.connects,
        after.join(", "),
        pct(s.latency_share)
    );
    let path = match s.on_this_host {
        true => "",
        false => {
            " (or the path lost them: a lost SYN is resent on the same schedule, and the \
                  TCP figures show whether the path loses packets)"
        }
    };
    let why = format!(
        "the server's accept queue was full and dropped their SYNs{path} — its listen \
         backlog is too small for the connections arriving, or it accepts only when a worker \
         is free"
    );
    let remedy = match s.opened_once {
        true => {
            "each connection was opened once and kept: they opened together, which a \
                 larger backlog (listen(2)'s, up to net.core.somaxconn) takes, and \
                 --connect-rate spreads"
        }
        false => {
            "a larger backlog (listen(2)'s, up to net.core.somaxconn), accepting \
                  sooner, or keep-alive connections remove the wait"
        }
    };
    match limit {
        true => format!("{text}: {why}; {remedy}"),
        false => format!("{text}: {why}"),
    }
}

/// "the server rejected 12 % with 503, Retry-After 1 s": a limiter's or an overloaded
/// server's answer, told apart from other failures; `None` without rejections.
pub fn rejected(requests: u64, rejections: &[crate::report::Rejection]) -> Option<String> {
    let responses: u64 = rejections.iter().map(|r| r.responses).sum();
    if responses == 0 {
        return None;
    }
    let list: Vec<String> = rejections.iter().map(|r| r.text()).collect();
    Some(format!(
        "the server rejected {} with {}",
        pct(responses as f64 / requests.max(1) as f64),
        list.join(" and ")
    ))
}

/// "TCP over the 16 connections the client opened and closed: round trip 20.3 ms (lowest 20.0 ms), 12 of 10000 segments
/// retransmitted (0.1%)".
fn tcp(t: &crate::stats::tcp::TcpSummary) -> String {
    let lowest = t.min_rtt_us.map_or(String::new(), |m| {
        format!(" (lowest {})", duration(m as f64 * 1e3))
    });
    format!(
        "TCP over the {} connections the client opened and closed: round trip {}{lowest}, {} of {} segments \
         retransmitted ({})",
        t.connections,
        duration(t.rtt_mean_us * 1e3),
        t.retransmits,
        t.segments_out,
        pct(t.retransmit_share)
    )
}

fn failures(
    failed: u64,
    requests: u64,
    rate: f64,
    classes: &[(String, u64)],
    statuses: &[(String, u64)],
    limit: bool,
) -> String {
    // A gRPC class's count beside its codes would read as a status ("grpc_status 200").
    let count = |c: &str, n: u64| match c {
        "grpc_status" => format!("{c} ×{n}"),
        _ => format!("{c} {n}"),
    };
    let mut detail: Vec<String> = classes.iter().map(|(c, n)| count(c, *n)).collect();
    if !statuses.is_empty() {
        let list: Vec<String> = statuses.iter().map(|(s, n)| format!("{s} ×{n}")).collect();
        detail.push(format!("statuses {}", list.join(", ")));
    }
    let text = format!(
        "{failed} of {requests} requests failed ({}): {}",
        pct(rate),
        detail.join("; ")
    );
    match limit {
        true => format!("{text} — above {}", pct(T.max_error_rate)),
        false => text,
    }
}

fn late(schedule: &Schedule, server_behind: bool) -> String {
    let text = format!(
        "the client fell behind its own schedule: {} of sends started more than {} after \
         their intended time (p99 send lag {})",
        pct(schedule.late_share),
        duration(schedule.max_lateness_ns as f64),
        schedule.send_lag_p99_ns.map_or("-".into(), duration)
    );
    match server_behind {
        true => format!("{text}, while the server fell behind"),
        false => text,
    }
}

fn workers_text(w: &Workers, queued: Option<&Queue>, all_busy_share: Option<f64>) -> String {
    let busy = match w.limit {
        Some(limit) => format!("{:.0} of {limit:.0} workers busy", w.busy_max),
        None => format!("up to {:.0} workers busy", w.busy_max),
    };
    let queued = queued
        .map(|q| format!(", up to {:.0} requests queued (mean {:.0})", q.max, q.mean))
        .unwrap_or_default();
    match all_busy_share {
        Some(all) => format!("{busy}{queued} ({} of the scrapes)", pct(all)),
        None => format!("{busy}{queued}"),
    }
}

fn host_cpu(
    cpu: &HostCpu,
    busy: CpuBusy,
    shared: bool,
    (service_cores, client_cores): (Option<f64>, Option<f64>),
) -> String {
    let split = match (shared, service_cores, client_cores) {
        (true, Some(service), _) => {
            format!(", which the client shares (the service itself used {service:.2} cores)")
        }
        (true, None, Some(client)) => {
            format!(", which the client shares (it used {client:.2} of them)")
        }
        _ => String::new(),
    };
    let (cores, busy_pct) = (cpu.cores, pct(cpu.busy_share));
    match busy {
        CpuBusy::Saturated => format!("CPU {busy_pct} of {cores} cores on the target{split}"),
        CpuBusy::Room => format!(
            "the target's CPU was {busy_pct} busy{split} — a limit there is inside the service \
             (a pool, a lock, a downstream call), not its CPU"
        ),
        CpuBusy::Between => format!("the target's CPU was {busy_pct} busy{split}"),
    }
}

/// A level's outage: what it was, and that the level is measured again.
pub fn outage(o: &super::slo::Outage) -> String {
    format!(
        "an outage, not a limit: {} connections were refused, timed out or reset within {} of \
         the {} level, and the rest of it failed no more than {} — the target was down for a \
         moment; the level is measured again",
        o.failures,
        duration(o.span_ns as f64),
        duration(o.window_ns as f64),
        pct(T.max_error_rate)
    )
}

/// The longest a [`headline`] may be: the console's Verdict line (issue 61).
pub const HEADLINE_MAX_CHARS: usize = 120;

/// The verdict in one short line — its cause, strength, what the rule found in plain words and
/// the one next step: "server (weak): requests queued at the server — next: loadgen sweep".
/// Numbers and the reasons are `loadgen-analyze explain`'s; this line is the same for every
/// run a rule decides, so it never outgrows [`HEADLINE_MAX_CHARS`].
pub fn headline(rule: super::Rule, strength: super::Strength) -> String {
    let (found, next) = found_and_next(rule, strength);
    let strength = match strength {
        super::Strength::Strong => "strong",
        super::Strength::Weak => "weak",
    };
    format!(
        "{} ({strength}): {found} — next: {next}",
        rule.cause().as_str()
    )
}

/// A server cause on a host whose cores the server and the client took from each other
/// (`host::shared_host`): what the rule found, on shared cores, and the step that tells the
/// server's own limit — "server (weak): requests queued at the server, on shared cores —
/// next: the server alone" (on a host of its own).
pub fn headline_on_a_shared_host(rule: super::Rule) -> String {
    let (found, _) = found_and_next(rule, super::Strength::Weak);
    format!(
        "{} (weak): {found}, on shared cores — next: the server alone",
        rule.cause().as_str()
    )
}

/// What each rule found, in words a newcomer reads without docs/verdict.md, and what to do
/// next ([`headline`]); `server.queueing` said strongly (the probe agreed) is [`QUEUED_STRONGLY`].
const FOUND_AND_NEXT: [(super::Rule, &str, &str); 29] = {
    use super::Rule;
    [
        (
            Rule::ErrorsShare,
            "too many requests failed",
            "read the failures, loadgen-analyze summary",
        ),
        (
            Rule::ErrorsSlo,
            "the level failed its error-rate SLO",
            "read the failures, loadgen-analyze summary",
        ),
        (
            Rule::ClientCpu,
            "loadgen's CPU was saturated",
            "give loadgen more cores or another host",
        ),
        (
            Rule::ClientOwnWork,
            "workers were busy in loadgen's own work",
            "fewer checks and extractions per request",
        ),
        (
            Rule::ClientProducer,
            "workers waited for the producer's next item",
            "a faster producer or fewer consumers",
        ),
        (
            Rule::ClientSchedule,
            "loadgen could not send on schedule",
            "give loadgen more cores or lower the --rate",
        ),
        (
            Rule::ClientHttp2Streams,
            "requests waited for a stream slot",
            "more connections (-c)",
        ),
        (
            Rule::NetworkLink,
            "the network link was full",
            "a faster link or smaller bodies",
        ),
        (
            Rule::NetworkTransfer,
            "receiving bodies took most of the time",
            "a faster link or smaller bodies",
        ),
        (
            Rule::NetworkSend,
            "sending requests took most of the time",
            "a faster link or smaller requests",
        ),
        (
            Rule::NetworkTcp,
            "the kernel's TCP figures",
            "loadgen-analyze explain",
        ),
        (
            Rule::ServerFellBehind,
            "the server fell behind the offered rate",
            "loadgen capacity, for the rate it keeps up with",
        ),
        (
            Rule::ServerSaturated,
            "the server's workers or CPU were saturated",
            "loadgen capacity, for its limit",
        ),
        (
            Rule::ServerSlo,
            "the level failed a latency SLO at the server",
            "loadgen-analyze explain on the level",
        ),
        (
            Rule::ServerQueueing,
            "requests queued at the server",
            "loadgen sweep, or --server-metrics",
        ),
        (
            Rule::ServerNagle,
            "the server's Nagle held bodies for loadgen's delayed ACK",
            "TCP_NODELAY on the server's sockets",
        ),
        (
            Rule::ServerAcceptBacklog,
            "the server's accept queue was full; SYNs were resent",
            "a larger listen backlog, or keep-alive",
        ),
        (
            Rule::NoneKeptUp,
            "the system kept up with the offered rate",
            "a higher --rate, or loadgen capacity",
        ),
        (
            Rule::NonePacedByWorkload,
            "the workload's think time set the pace",
            "more workers (-c) or less think time",
        ),
        (
            Rule::NoneNoQueue,
            "nothing queued; the connections set the pace",
            "more connections (-c), or loadgen sweep",
        ),
        (
            Rule::CapacityPassed,
            "the level met every SLO",
            "a higher rate",
        ),
        (
            Rule::CapacityInterrupted,
            "the level was cut short and not judged",
            "run it again",
        ),
        (
            Rule::InconclusiveNoWorkers,
            "no worker ran",
            "check the scenario's phases",
        ),
        (
            Rule::InconclusiveIdleWorkers,
            "workers were mostly idle",
            "more workers (-c), or loadgen sweep",
        ),
        (
            Rule::InconclusiveNoServerSign,
            "no sign of a limit at the server",
            "loadgen-analyze explain, where the time went",
        ),
        (
            Rule::InconclusiveOneLevel,
            "one level cannot tell",
            "loadgen sweep, loadgen capacity or --server-metrics",
        ),
        (
            Rule::InconclusiveOutage,
            "the target was down for a moment",
            "measure again",
        ),
        (Rule::ClientNote, "a note", "loadgen-analyze explain"),
        (Rule::ServerNote, "a note", "loadgen-analyze explain"),
    ]
};

/// `server.queueing` when the probe at one connection agreed: the next step is the limit.
const QUEUED_STRONGLY: (&str, &str) = (
    "requests queued at the server",
    "loadgen capacity, for its limit",
);

fn found_and_next(rule: super::Rule, strength: super::Strength) -> (&'static str, &'static str) {
    if rule == super::Rule::ServerQueueing && strength == super::Strength::Strong {
        return QUEUED_STRONGLY;
    }
    FOUND_AND_NEXT.iter().find(|(r, _, _)| *r == rule).map_or(
        ("a note", "loadgen-analyze explain"),
        |&(_, found, next)| (found, next),
    )
}
