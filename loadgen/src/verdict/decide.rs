//! The one judge: the only place a cause is chosen — for a run, each of its phases, a sweep
//! level and a capacity level alike. The checks ([`super::checks`]) run in a fixed order —
//! errors, client, network — and the first finding that is a limit decides; when none is,
//! the server check decides: an open run that kept up (`none`) or fell behind (`server`),
//! workers that spent their time thinking as configured (`none`), the server's measured
//! saturation (`server`), or one run that cannot tell (`inconclusive`, saying what would). A
//! capacity level's SLOs are a fact the search hands in ([`LevelFacts`]): a level that met
//! them and kept its schedule is `none`; one that did not takes the first limit the checks
//! found, else the server's.

use super::checks::{self, share, worker_shares, Shares};
use super::facts::Facts;
use super::findings::{Finding, Numbers};
use super::queueing::{Queue, QueueFact};
use super::rule::{self, Rule, WorkerShares, T};
use super::slo::LevelFacts;
use super::timers;
use super::words::{phase_where, sentence, wait_text, ONE_LEVEL, ONE_LEVEL_SCRAPED};
use super::{Cause, PhaseVerdict, SloVerdict, Verdict};
use crate::report::{PhaseWorkers, RunSummary};
use crate::sysmon::ClientSummary;

/// The deciding rule, its sentence, and the findings it used (left out of the evidence).
struct Decision {
    rule: Rule,
    text: String,
    used: Vec<usize>,
    /// A capacity level's failures, each a sentence.
    reasons: Vec<String>,
}

impl Decision {
    fn new(rule: Rule, text: String) -> Self {
        Decision {
            rule,
            text,
            used: Vec::new(),
            reasons: Vec::new(),
        }
    }
}

/// The rule's strength; a network cause is weak when the client's sockets (`TCP_INFO`) were
/// read and show nothing of the network: no retransmits, no queueing.
fn strength(f: &Facts<'_>, rule: Rule) -> super::Strength {
    let tcp = f.client.and_then(|c| c.tcp.as_ref());
    match (rule.cause(), tcp) {
        (Cause::Network, Some(t))
            if !rule::tcp_shows_network(t.retransmit_share, t.rtt_mean_us, t.min_rtt_us) =>
        {
            super::Strength::Weak
        }
        // A SYN resent to a server on another host may have been lost on the path.
        _ if rule == Rule::ServerAcceptBacklog
            && !f.client.is_some_and(|c| c.server_shares_cores) =>
        {
            super::Strength::Weak
        }
        _ => rule.strength(),
    }
}

/// The summary and what a busy host says (`host::busy_host`), where it bears: appended to a
/// server cause, which it makes weak (the `bool`), else an evidence line of its own.
fn with_host(
    f: &Facts<'_>,
    rule: Rule,
    summary: String,
    numbers: &mut Numbers,
) -> (String, Option<String>, Option<HostWeakens>) {
    let server_cpu = f.server.as_ref().and_then(|s| s.service_cpu_cores);
    let server = rule.cause() == Cause::Server;
    if let Some(busy) = f.client.and_then(|c| super::host::busy_host(c, server_cpu)) {
        numbers.insert("host_other_cores", busy.other_cores);
        return match server {
            true => (
                format!("{summary}; but {}", busy.sentence()),
                None,
                Some(HostWeakens::OtherWork),
            ),
            false => (summary, Some(format!("host: {}", busy.sentence())), None),
        };
    }
    let Some(shared) = f.client.and_then(super::host::shared_host) else {
        return (summary, None, None);
    };
    numbers.insert("host_busy_cores", shared.busy_cores);
    match server {
        true => (
            format!("{summary}; but {}", shared.sentence()),
            None,
            Some(HostWeakens::Shared),
        ),
        false => (summary, Some(format!("host: {}", shared.sentence())), None),
    }
}

/// Why a server cause is said weakly: the host it shares with the client was busy with other
/// work, or its cores went to the server and the client together (the shared host).
#[derive(Debug, Clone, Copy, PartialEq)]
enum HostWeakens {
    OtherWork,
    Shared,
}

/// The evidence: the summary, the host's line, the decision's reasons, the latency where it
/// did not decide, and every finding the decision did not use.
fn evidence_of(
    summary: &str,
    host_line: Option<String>,
    decision: &Decision,
    queue: Option<QueueFact>,
    (findings, first_server): (&[Finding], usize),
) -> Vec<String> {
    let mut evidence = vec![summary.to_string()];
    evidence.extend(host_line);
    evidence.extend(decision.reasons.iter().cloned());
    if let Some(q) =
        queue.filter(|_| !matches!(decision.rule, Rule::ServerQueueing | Rule::NoneNoQueue))
    {
        evidence.push(format!("latency: {}", q.sentence()));
    }
    for (i, finding) in findings.iter().enumerate() {
        if decision.used.contains(&i) {
            continue;
        }
        let text = say(finding);
        evidence.push(match i >= first_server {
            true => format!("server: {text}"),
            false => text,
        });
    }
    evidence.dedup();
    evidence
}

fn say(finding: &Finding) -> String {
    sentence(finding.rule, finding.limit, &finding.seen)
}

/// Every check's findings in their order — errors, client, network; what the kernel's timers
/// left in the rows (the server's, seen from the client); what the server's metrics named —
/// with where the timers' and the server's begin, and whether a body came late (time at the
/// server, not the network's).
fn findings_of(
    f: &Facts<'_>,
    shares: &Shares,
    phase: Option<&PhaseWorkers>,
    numbers: &mut Numbers,
) -> (Vec<Finding>, (usize, usize), bool) {
    let mut findings = checks::errors(f, numbers);
    findings.extend(checks::client(f, shares, phase, numbers));
    findings.extend(checks::network(f, shares, numbers));
    let late = checks::body_came_late(&findings);
    let first_timers = findings.len();
    findings.extend(timers::body_gaps(f, shares.transfer, late, numbers));
    findings.extend(timers::resent_syns(f, numbers));
    let first_server = findings.len();
    findings.extend(checks::server_named(f, numbers));
    (findings, (first_timers, first_server), late)
}

/// Decides the verdict.
pub fn decide(f: Facts<'_>) -> Verdict {
    let mut numbers = Numbers::new();
    let shares = Shares::of(f.components, &mut numbers);
    let phase = checks::judged_phase(f.summary);
    let (findings, (first_timers, first_server), late) =
        findings_of(&f, &shares, phase, &mut numbers);
    let run_findings = &findings[..first_timers];
    let (signs, server) = findings[first_timers..].split_at(first_server - first_timers);
    // One closed level of one phase: its latency against its own fastest response.
    let queue = phase
        .filter(|_| f.open.is_none() && f.level.is_none() && checks::phase_count(f.summary) == 1)
        .and_then(|p| QueueFact::of(f.summary, p, &mut numbers));
    let queue = queue.map(|q| q.body_came_late(late).with_probe(f.probe_r1_ns, late));
    // A closed ramp: its stages read as the levels of a sweep.
    let stages = (f.open.is_none() && f.level.is_none() && queue.is_none())
        .then(|| super::stages::across_stages(f.summary, &mut numbers))
        .flatten();
    let shares = match late {
        true => Shares {
            server_wait: shares.server_wait.zip(shares.transfer).map(|(w, t)| w + t),
            ..shares
        },
        false => shares,
    };
    let decision = match f.level {
        // A failing level's server reason: the kernel's timers' sign, else the scrapes'.
        Some(level) => level_decision(
            &f,
            level,
            run_findings,
            (&findings[first_timers..], first_timers),
        ),
        None => match run_findings.iter().position(|x| x.limit) {
            Some(i) => Decision {
                used: vec![i],
                ..Decision::new(run_findings[i].rule, say(&run_findings[i]))
            },
            None => server_decision(
                &f,
                (&shares, phase),
                (server, first_server),
                (signs, first_timers),
                (queue, stages.as_ref()),
            ),
        },
    };
    let summary = in_context(&f, &decision, phase);
    let (summary, host_line, weakens) = with_host(&f, decision.rule, summary, &mut numbers);
    let evidence = evidence_of(
        &summary,
        host_line,
        &decision,
        queue,
        (&findings, first_server),
    );
    let saturated = server.iter().any(|x| x.limit);
    let strength = match queue.filter(|q| q.confirmed) {
        _ if weakens.is_some() => super::Strength::Weak,
        Some(_) if decision.rule == Rule::ServerQueueing => super::Strength::Strong,
        _ => strength(&f, decision.rule),
    };
    Verdict {
        cause: decision.rule.cause(),
        strength,
        rule: decision.rule,
        headline: match weakens {
            Some(HostWeakens::Shared) => super::words::headline_on_a_shared_host(decision.rule),
            _ => super::words::headline(decision.rule, strength),
        },
        summary,
        evidence,
        numbers,
        server: f.server.clone(),
        phases: phase_verdicts(f.summary, &shares, saturated),
        slos: f.level.map(|level| SloVerdict {
            passed: decision.rule == Rule::CapacityPassed,
            crossed: level.crossed(),
            judged: !level.interrupted,
            reasons: decision.reasons.clone(),
        }),
        decided_by: f.decided_by,
    }
}

/// The decision's sentence with where it was judged (a run of several phases) and who shares
/// the client's cores, each said once, after the finding.
fn in_context(f: &Facts<'_>, decision: &Decision, phase: Option<&PhaseWorkers>) -> String {
    let cause = decision.rule.cause();
    let mut text = decision.text.clone();
    if let (Some(p), true) = (phase, checks::phase_count(f.summary) > 1) {
        let judged_on_phase = matches!(
            cause,
            Cause::Client | Cause::Server | Cause::Inconclusive | Cause::None
        ) && decision.rule != Rule::ClientCpu
            && f.level.is_none();
        if judged_on_phase {
            text = format!(
                "{text} (judged on {}, the phase with the most workers alive)",
                p.phase
            );
        }
    }
    // Who shares the cores bears on a cause the server's or client's time decided, and on
    // `none.no_queue`, which rests on the server's latency too.
    let sharing = f.client.and_then(ClientSummary::sharing).filter(|_| {
        matches!(cause, Cause::Client | Cause::Server | Cause::Inconclusive)
            || decision.rule == Rule::NoneNoQueue
    });
    match sharing {
        Some(sharing) => format!("{text} — {sharing} with the client"),
        None => text,
    }
}

/// A capacity level: passed when it met every SLO, kept its schedule and stayed under the
/// error share; else the first limit the checks found, else the server's.
fn level_decision(
    f: &Facts<'_>,
    level: &LevelFacts,
    findings: &[Finding],
    (server, first_server): (&[Finding], usize),
) -> Decision {
    if level.interrupted {
        let why = "not judged: the level was cut short by Ctrl-C or SIGTERM";
        return Decision::new(Rule::CapacityInterrupted, why.into());
    }
    let mut reasons = level.failures();
    let limit = findings.iter().position(|x| x.limit);
    if let Some(i) = limit.filter(|&i| findings[i].rule == Rule::ErrorsShare) {
        reasons.push(say(&findings[i]));
    }
    let problems = f
        .open
        .as_ref()
        .map(|(_, s)| s.problems.clone())
        .unwrap_or_default();
    reasons.extend(problems.iter().cloned());
    if reasons.is_empty() {
        let why = "the level met every SLO and kept up with its schedule";
        return Decision::new(Rule::CapacityPassed, why.into());
    }
    if let Some(outage) = &level.outage {
        let text = super::words::outage(outage);
        return Decision {
            reasons: vec![text.clone()],
            ..Decision::new(Rule::InconclusiveOutage, text)
        };
    }
    let mut used = Vec::new();
    let rule = match limit {
        Some(i) => {
            let finding = &findings[i];
            if finding.rule.cause() != Cause::Errors {
                reasons.push(say(finding));
            }
            if let (Cause::Client, Some(client)) = (finding.rule.cause(), f.client) {
                // What the client's CPU did, whichever client rule decided.
                reasons.push(format!("the client: {}", client.console_line()));
            }
            used.push(i);
            finding.rule
        }
        None => {
            if let Some(j) = server.iter().position(|x| x.limit) {
                reasons.push(format!("the server: {}", say(&server[j])));
                used.push(first_server + j);
            }
            match problems.is_empty() {
                true => Rule::ServerSlo,
                false => Rule::ServerFellBehind,
            }
        }
    };
    let crossed = level.crossed();
    let text = match crossed.is_empty() {
        true => reasons.join("; "),
        false => format!("crossed {} — {}", crossed.join(", "), reasons.join("; ")),
    };
    Decision {
        rule,
        text,
        used,
        reasons,
    }
}

/// The server check, when nothing before it found a limit.
fn server_decision(
    f: &Facts<'_>,
    (shares, phase): (&Shares, Option<&PhaseWorkers>),
    (server, first_server): (&[Finding], usize),
    signs: (&[Finding], usize),
    (queue, stages): (Option<QueueFact>, Option<&super::stages::StagesFact>),
) -> Decision {
    let wait = shares.server_wait.unwrap_or(0.0);
    let saturated = server.iter().position(|x| x.limit);
    let what = saturated.map(|i| say(&server[i]));
    let used = |mut d: Decision| {
        d.used = saturated.map(|i| i + first_server).into_iter().collect();
        d
    };
    if let Some((_, sustainability)) = &f.open {
        if sustainability.problems.is_empty() {
            let text = format!(
                "nothing limited it — the system kept up with the schedule: {:.0} req/s \
                 achieved of {:.0} offered",
                sustainability.achieved_rps, sustainability.offered_rps
            );
            return Decision::new(Rule::NoneKeptUp, text);
        }
        let mut text = format!(
            "the system fell behind the schedule: {}; {}",
            sustainability.problems.join("; "),
            wait_text(wait)
        );
        if let Some(what) = &what {
            text += &format!("; the server: {what}");
        }
        return used(Decision::new(Rule::ServerFellBehind, text));
    }
    let Some(p) = phase else {
        return Decision::new(Rule::InconclusiveNoWorkers, "no worker ran".into());
    };
    let w = worker_shares(p);
    let rule = closed_rule(w, wait, what.is_some());
    // One level that cannot tell saturation: what its latency says, weakly, when it says.
    let said = queue.map(|q| q.queue).or(stages.map(|s| s.queue));
    let rule = match (rule, said) {
        (Rule::InconclusiveOneLevel, Some(Queue::Waited)) => Rule::ServerQueueing,
        (Rule::InconclusiveOneLevel, Some(Queue::NoWait)) => Rule::NoneNoQueue,
        _ => rule,
    };
    if let Some(decision) = timers_decide(rule, signs) {
        return decision;
    }
    let text = match rule {
        Rule::ServerQueueing | Rule::NoneNoQueue => (queue.map(|q| q.decided()))
            .or(stages.map(|s| s.decided()))
            .unwrap_or_default(),
        Rule::NonePacedByWorkload => format!(
            "nothing limited it — workers thought {:.0}% of the time, as configured (busy \
             {:.0}%{}): the server was not what held them",
            w.waiting * 100.0,
            w.busy * 100.0,
            phase_where(&checks::phase_named(f.summary, p))
        ),
        Rule::InconclusiveIdleWorkers => format!(
            "workers were in a request only {} of the time",
            super::words::pct(w.busy)
        ),
        Rule::InconclusiveNoServerSign => {
            format!("no sign of a server-side limit: {}", wait_text(wait))
        }
        Rule::ServerSaturated => format!(
            "the server: {}; {}",
            what.clone().unwrap_or_default(),
            wait_text(wait)
        ),
        _ => format!(
            "{}: the time is spent at the server, but {}",
            wait_text(wait),
            if f.server.is_some() {
                ONE_LEVEL_SCRAPED
            } else {
                ONE_LEVEL
            }
        ),
    };
    match rule {
        Rule::ServerSaturated => used(Decision::new(rule, text)),
        _ => Decision::new(rule, text),
    }
}

/// What the kernel's timers showed (`signs`, from the index given) decides a closed level
/// whose workers were busy and that no measure of the server's decided (`rule`): what its
/// latency says is weaker than bodies held for a delayed ACK or SYNs resent.
fn timers_decide(rule: Rule, (signs, first): (&[Finding], usize)) -> Option<Decision> {
    let open = matches!(
        rule,
        Rule::InconclusiveNoServerSign
            | Rule::InconclusiveOneLevel
            | Rule::ServerQueueing
            | Rule::NoneNoQueue
    );
    let j = signs.iter().position(|x| x.limit).filter(|_| open)?;
    Some(Decision {
        used: vec![first + j],
        ..Decision::new(signs[j].rule, say(&signs[j]))
    })
}

/// The server check's rule for workers that were not the client's limit: paced by the
/// workload, idle, no sign at the server, saturated, or one level that cannot tell — the same
/// conditions for the run and for each of its phases.
fn closed_rule(w: WorkerShares, server_wait: f64, saturated: bool) -> Rule {
    if w.paced_by_workload() {
        Rule::NonePacedByWorkload
    } else if !w.busy() {
        Rule::InconclusiveIdleWorkers
    } else if server_wait < T.min_server_wait_share {
        Rule::InconclusiveNoServerSign
    } else if saturated {
        Rule::ServerSaturated
    } else {
        Rule::InconclusiveOneLevel
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
            let w = worker_shares(p);
            let rule = match w.own_work_limits() {
                true => Rule::ClientOwnWork,
                false => closed_rule(w, wait, server_saturated),
            };
            PhaseVerdict {
                phase: p.phase.clone(),
                cause: rule.cause(),
                rule,
                workers_alive: share(p.alive_ns, p.last_ended_ns - p.first_started_ns),
                busy_share: w.busy,
                waiting_share: w.waiting,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::WorkersSummary;
    use crate::stats::Components;
    use crate::verdict::schedule::{Schedule, Sustainability};
    use crate::verdict::server::ServerEvidence;
    use crate::verdict::server::{HostCpu, Workers};
    use crate::verdict::slo::Abort;
    use crate::verdict::Strength;

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
            streams: false,
            open: None,
            server: None,
            level: None,
            decided_by: "test",
            probe_r1_ns: None,
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
        assert_eq!((v.cause, v.rule.name()), (Cause::Errors, "errors.share"));
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

    /// contract/verdict.json's `cause_order` (issue 57), by which the analysis gives a set of
    /// shards its cause: the order this judge's checks run in. Facts that each check would
    /// call a limit, taken away one by one, decide errors, then client, then network, then
    /// the server check's own causes.
    #[test]
    fn the_checks_run_in_the_contracts_cause_order() {
        let contract: serde_json::Value = serde_json::from_str(rule::VERDICT_JSON).unwrap();
        let order: Vec<&str> = (contract["cause_order"].as_array().unwrap().iter())
            .map(|c| c.as_str().unwrap())
            .collect();
        let mut body = components(0.7, 0.01);
        body.bytes_by_second = vec![(0, 0), (1_000, 150_000), (1_000, 140_000), (0, 0)];
        let client = ClientSummary {
            link_capacity_bps: Some(2_000_000),
            ..Default::default()
        };
        let own_work = phase("main", 8, 0.5, 0.1);
        let cases = [
            (summary(1000, 100, vec![own_work.clone()]), &body),
            (summary(1000, 0, vec![own_work]), &body),
            (summary(1000, 0, vec![phase("main", 8, 0.99, 0.0)]), &body),
        ];
        let decided: Vec<&str> = (cases.iter())
            .map(|(s, c)| {
                let f = Facts {
                    client: Some(&client),
                    ..facts(s, c)
                };
                decide(f).cause.as_str()
            })
            .collect();
        assert_eq!(decided, order[..3], "{order:?}");
        let quiet = components(0.0, 0.0);
        let s = summary(1000, 0, vec![phase("main", 8, 0.99, 0.0)]);
        let last = decide(facts(&s, &quiet)).cause.as_str();
        assert!(order[3..].contains(&last), "{last} in {order:?}");
        let server_check = [Cause::Server, Cause::Inconclusive, Cause::None].map(Cause::as_str);
        assert_eq!(order[3..], server_check);
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
        crate::verdict::client::judge(&mut client);
        client.set_shared_with(Some("the embedded server"));
        let v = decide(Facts {
            client: Some(&client),
            ..facts(&s, &c)
        });
        assert_eq!((v.cause, v.rule.name()), (Cause::Client, "client.cpu"));
        assert_eq!(
            v.summary,
            "the client was saturated (peak CPU 95 % of its 2 cores): throughput and latency \
             describe the client, not the server; give it more cores or fewer workers — the \
             embedded server shares these 2 cores with the client"
        );
        let busy_client = summary(1000, 0, vec![phase("main", 8, 0.5, 0.1)]);
        let v = decide(facts(&busy_client, &c));
        assert_eq!((v.cause, v.rule.name()), (Cause::Client, "client.own_work"));
        assert_eq!(v.numbers["own_share"], 0.4);
    }

    #[test]
    fn think_time_is_the_workload_setting_the_pace() {
        let c = components(0.0, 0.0);
        let s = summary(1000, 0, vec![phase("main", 8, 0.25, 0.75)]);
        let v = decide(facts(&s, &c));
        assert_eq!((v.cause, v.strength), (Cause::None, Strength::Strong));
        assert_eq!(v.rule.name(), "none.paced_by_workload");
    }

    #[test]
    fn one_closed_level_at_the_server_needs_the_servers_saturation_to_say_server() {
        let c = components(0.0, 0.0);
        let s = summary(1000, 0, vec![phase("main", 64, 0.99, 0.0)]);
        let v = decide(facts(&s, &c));
        assert_eq!(
            (v.cause, v.rule.name()),
            (Cause::Inconclusive, "inconclusive.one_level")
        );
        assert!(v.summary.contains(ONE_LEVEL));
        // Scraped, but no gauge read: the advice is the gauges' flag, not the scrape it had.
        let v = decide(Facts {
            server: Some(ServerEvidence {
                scrapes: 3,
                ..Default::default()
            }),
            ..facts(&s, &c)
        });
        assert_eq!(v.rule.name(), "inconclusive.one_level");
        assert!(v.summary.contains("--server-saturation"), "{}", v.summary);
        assert!(!v.summary.contains("(--server-metrics)"), "{}", v.summary);
        assert!(v
            .summary
            .contains("one level cannot tell a server at its capacity"));
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
        assert_eq!(v.rule.name(), "server.saturated");
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

    /// One op, one phase of `workers` busy workers: responses from `fastest_ms` up, the
    /// median `median_ms`, at `rps`.
    fn one_level(workers: u64, fastest_ms: f64, median_ms: f64, rps: f64) -> RunSummary {
        use crate::report::{LatencySummary, OpSummary, PhaseSummary};
        let latency = LatencySummary {
            count: 1000,
            mean_ns: median_ms * 1e6,
            min_ns: (fastest_ms * 1e6) as u64,
            p50_ns: (median_ms * 1e6) as u64,
            p90_ns: (median_ms * 1e6) as u64,
            p99_ns: (median_ms * 1e6) as u64,
            p999_ns: (median_ms * 1e6) as u64,
            max_ns: (median_ms * 1e6) as u64,
        };
        let mut s = summary(1000, 0, vec![phase("main", workers, 0.99, 0.0)]);
        s.ops = vec![OpSummary {
            op: "get".into(),
            requests: 1000,
            failed: 0,
            errors: Default::default(),
            skipped: 0,
            throughput_rps: rps,
            latency: Some(latency),
            uncorrected_latency: None,
        }];
        s.phases = vec![PhaseSummary {
            phase: "main".into(),
            workers: workers as usize,
            requests: 1000,
            failed: 0,
            wall_time_ns: 10 * S,
            throughput_rps: rps,
            latency: Some(latency),
            op_mean_latency_ns: Default::default(),
        }];
        s
    }

    /// Issue 44: one closed level's latency against its own fastest response — 4 workers ×
    /// 10 ms with 16 connections waits at the server (weakly `server`); 2 connections against
    /// 8 workers do not (weakly `none`); a service time that varies (the fastest a short one)
    /// or a ratio in between stays inconclusive; the server's saturation measured wins.
    /// `--probe`'s R(1): a second sign beside the fastest response. Both say queueing: strong;
    /// the probe says the opposite: inconclusive; bodies that came late: never strong.
    #[test]
    fn the_probe_at_one_connection_confirms_or_undoes_queueing() {
        let c = components(0.0, 0.0);
        let queued = one_level(16, 10.0, 40.0, 400.0);
        let probed = |r1_ms: f64, components| {
            decide(Facts {
                probe_r1_ns: Some(r1_ms * 1e6),
                ..facts(&queued, components)
            })
        };
        let v = probed(10.5, &c);
        assert_eq!(
            (v.cause, v.strength, v.rule.name()),
            (Cause::Server, Strength::Strong, "server.queueing")
        );
        assert!(
            v.summary.contains("median of a probe at one"),
            "{}",
            v.summary
        );
        // The probe as slow as the level: nothing waited by it, so the two signs disagree.
        let v = probed(38.0, &c);
        assert_eq!(v.rule.name(), "inconclusive.one_level", "{}", v.summary);
        // In between: the probe tells nothing, the fastest response's weak answer stands.
        let v = probed(23.0, &c);
        assert_eq!(
            (v.rule.name(), v.strength),
            ("server.queueing", Strength::Weak)
        );
        // Bodies held back after their headers: the server's time, never a strong queue.
        let mut late = components(0.7, 0.01);
        late.bytes_by_second = vec![(0, 0), (1_000, 150_000), (1_000, 140_000), (0, 0)];
        let v = probed(10.5, &late);
        assert_eq!(
            v.strength,
            Strength::Weak,
            "{}: {}",
            v.rule.name(),
            v.summary
        );
    }

    #[test]
    fn one_levels_latency_against_its_fastest_says_queueing_weakly() {
        let c = components(0.0, 0.0);
        let queued = one_level(16, 10.0, 40.0, 400.0);
        let v = decide(facts(&queued, &c));
        assert_eq!(
            (v.cause, v.strength, v.rule.name()),
            (Cause::Server, Strength::Weak, "server.queueing")
        );
        assert!(
            v.summary.contains("4.0× the level's fastest (10"),
            "{}",
            v.summary
        );
        assert!(
            v.summary
                .contains("about 4.0 requests at the server at once"),
            "{}",
            v.summary
        );
        assert_eq!(v.numbers["latency_ratio"], 4.0);
        let paced = one_level(2, 10.0, 10.5, 190.0);
        let v = decide(facts(&paced, &c));
        assert_eq!(
            (v.cause, v.strength, v.rule.name()),
            (Cause::None, Strength::Weak, "none.no_queue")
        );
        // The server's latency on the client's cores: said, as for a server cause.
        let mut client = ClientSummary {
            samples: 3,
            cpuset_cores: 2,
            ..Default::default()
        };
        client.set_shared_with(Some("the server on this machine (loopback)"));
        let v = decide(Facts {
            client: Some(&client),
            ..facts(&paced, &c)
        });
        assert!(
            v.summary.ends_with("shares these 2 cores with the client"),
            "{}",
            v.summary
        );
        // Issue 44's JDK pool: no queue, but each body held back ~40 ms by the server's
        // Nagle — the server set each request's time, not the connections: no cause.
        let mut late = components(0.7, 0.01);
        late.bytes_by_second = vec![(0, 0), (1_000, 150_000), (1_000, 140_000), (0, 0)];
        let v = decide(facts(&paced, &late));
        assert_eq!(v.rule.name(), "inconclusive.one_level", "{}", v.summary);
        // Exponential service times: the fastest is a short request, not the no-queue time.
        let varied = one_level(2, 0.1, 7.0, 200.0);
        let v = decide(facts(&varied, &c));
        assert_eq!(v.rule.name(), "inconclusive.one_level", "{}", v.summary);
        assert!(v.evidence.iter().any(|e| e.starts_with("latency: ")));
        let between = one_level(8, 10.0, 17.0, 470.0);
        assert_eq!(
            decide(facts(&between, &c)).rule.name(),
            "inconclusive.one_level"
        );
        // Two kinds of request: the fastest of one says nothing of the other.
        let mut two_ops = queued.clone();
        two_ops.ops.push(two_ops.ops[0].clone());
        assert_eq!(
            decide(facts(&two_ops, &c)).rule.name(),
            "inconclusive.one_level"
        );
        let gauges = ServerEvidence {
            workers: Some(Workers {
                busy_max: 4.0,
                busy_mean: 4.0,
                limit: Some(4.0),
                all_busy_share: Some(0.95),
            }),
            ..Default::default()
        };
        let v = decide(Facts {
            server: Some(gauges),
            ..facts(&queued, &c)
        });
        assert_eq!(
            (v.rule.name(), v.strength),
            ("server.saturated", Strength::Strong)
        );
        assert!(v.evidence.iter().any(|e| e.starts_with("latency: ")));
    }

    /// Issue 59: bodies one delayed ACK after their headers name the server's Nagle, with the
    /// fix — also where each connection's first, quick response made the median look queued;
    /// the server's own 10 ms between headers and body does not, and says so; half of each
    /// cannot tell and says what would. Elsewhere (an open run, a capacity level) it is the
    /// evidence, or a failing level's reason.
    #[test]
    fn bodies_held_for_the_delayed_ack_are_the_servers_nagle() {
        let paced = one_level(4, 51.0, 55.0, 75.0);
        let mut late = components(0.75, 0.01);
        late.responses_by_body_gap_ms = [(0, 4), (41, 900), (44, 96)].into();
        let v = decide(facts(&paced, &late));
        assert_eq!(
            (v.cause, v.strength, v.rule.name()),
            (Cause::Server, Strength::Strong, "server.nagle")
        );
        let counted = "996 of 1000 response bodies came one delayed ACK (35–60 ms) after their \
                       headers, the median 41 ms after";
        assert!(v.summary.contains(counted), "{}", v.summary);
        assert!(v.summary.contains("set TCP_NODELAY"), "{}", v.summary);
        assert_eq!(v.numbers["body_gap_median_ns"], 41e6);
        let first_fast = one_level(16, 13.0, 52.0, 300.0);
        assert_eq!(
            decide(facts(&first_fast, &late)).rule.name(),
            "server.nagle"
        );
        let said = |gaps: &[(u32, u64)], text: &str| {
            let mut c = late.clone();
            c.responses_by_body_gap_ms = gaps.iter().copied().collect();
            let v = decide(facts(&paced, &c));
            assert_eq!(v.rule.name(), "inconclusive.one_level", "{}", v.summary);
            assert!(
                v.evidence.iter().any(|e| e.contains(text)),
                "{:?}",
                v.evidence
            );
        };
        said(&[(10, 1000)], "not a delayed ACK but the server's own wait");
        said(
            &[(10, 700), (41, 300)],
            "TCP_NODELAY on the server's sockets would",
        );
        // Nagle's wait a small part of each response: a note beside another rule.
        let mut small = components(0.3, 0.01);
        small.responses_by_body_gap_ms = late.responses_by_body_gap_ms.clone();
        let v = decide(facts(&paced, &small));
        assert_ne!(v.rule.name(), "server.nagle");
        assert!(v.evidence.iter().any(|e| e.contains("adds about that")));
        let s = summary(3000, 0, vec![phase("main", 20, 0.3, 0.7)]);
        let v = decide(Facts {
            open: Some(open(0.0, &[])),
            ..facts(&s, &late)
        });
        assert_eq!(v.rule.name(), "none.kept_up");
        assert!(v
            .evidence
            .iter()
            .any(|e| e.contains("the server's Nagle algorithm met")));
        let crossed = level(crate::verdict::slo::Outcome::Fail, None);
        let v = decide(Facts {
            open: Some(open(0.0, &[])),
            level: Some(&crossed),
            ..facts(&s, &late)
        });
        assert_eq!(v.rule.name(), "server.slo");
        assert!(
            v.summary.contains("; the server: the server's Nagle"),
            "{}",
            v.summary
        );
    }

    /// Issue 59: connects that waited whole seconds for resent SYNs name the server's accept
    /// queue — strongly when it shares the client's host, weakly across a path that may lose
    /// a SYN; one resent SYN in a long run is a note, and a 1.5 s connect is no resent SYN.
    #[test]
    fn syns_resent_past_a_full_accept_queue_are_the_servers_backlog() {
        let s = summary(1000, 0, vec![phase("main", 32, 0.99, 0.0)]);
        let mut c = components(0.0, 0.0);
        c.responses_by_connect_ms = [(0, 900), (1012, 4), (1500, 2), (2041, 1)].into();
        let mut client = ClientSummary::default();
        client.set_shared_with(Some("the server on this machine (loopback)"));
        let v = decide(Facts {
            client: Some(&client),
            ..facts(&s, &c)
        });
        assert_eq!(
            (v.cause, v.strength, v.rule.name()),
            (Cause::Server, Strength::Strong, "server.accept_backlog")
        );
        let counted = "5 of 907 connects waited for the kernel to resend their SYN (4 after 1 \
                       s, 1 after 2 s: its SYN retry schedule), 60.9% of the responses' time";
        assert!(v.summary.contains(counted), "{}", v.summary);
        assert_eq!(v.numbers["resent_syn_connects"], 5.0);
        let v = decide(facts(&s, &c));
        assert_eq!(
            (v.rule.name(), v.strength),
            ("server.accept_backlog", Strength::Weak)
        );
        assert!(v.summary.contains("or the path lost them"), "{}", v.summary);
        assert!(
            v.summary.contains("or keep-alive connections"),
            "{}",
            v.summary
        );
        // Each worker's one connection, opened together: the start's burst.
        c.responses_by_connect_ms = [(0, 20), (1012, 12)].into();
        let v = decide(facts(&s, &c));
        assert!(v.summary.contains("they opened together"), "{}", v.summary);
        c.responses_by_connect_ms = [(0, 900), (1012, 1)].into();
        let v = decide(facts(&s, &c));
        assert_eq!(v.rule.name(), "inconclusive.one_level");
        assert!(v.evidence.iter().any(|e| e.contains("1 after 1 s")));
    }

    #[test]
    fn moving_bytes_is_the_network_and_a_full_link_too() {
        let s = summary(1000, 0, vec![phase("main", 8, 0.99, 0.0)]);
        // Bodies took 70 % of latency while the link carried 60 % of its 2 Mbit/s.
        let mut body = components(0.7, 0.01);
        body.bytes_by_second = vec![(0, 0), (1_000, 150_000), (1_000, 140_000), (0, 0)];
        let link_of = |bps| ClientSummary {
            link_capacity_bps: Some(bps),
            ..Default::default()
        };
        let client = link_of(2_000_000);
        let v = decide(Facts {
            client: Some(&client),
            ..facts(&s, &body)
        });
        assert_eq!(
            (v.cause, v.rule.name()),
            (Cause::Network, "network.transfer")
        );
        assert!(v.summary.contains("rx 1.2 Mbit/s"), "{}", v.summary);
        // Issue 44: the same share on a link that carried 1 % of its capacity (64-byte bodies
        // a CPU-bound server sent late), or of unknown capacity, is no network verdict: the
        // late body is time at the server, which one level cannot call saturated.
        let roomy = link_of(100_000_000);
        for client in [Some(&roomy), None] {
            let v = decide(Facts {
                client,
                ..facts(&s, &body)
            });
            assert_eq!(v.rule.name(), "inconclusive.one_level", "{}", v.summary);
            assert!(
                v.evidence
                    .iter()
                    .any(|e| e.contains("the link does not explain it")
                        && e.contains("the body came late from the server")),
                "{:?}",
                v.evidence
            );
            assert_eq!(v.numbers["transfer_share"], 0.7);
        }
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
        assert_eq!((v.cause, v.rule.name()), (Cause::Network, "network.link"));
        assert_eq!(v.numbers["rx_link_utilisation"], 0.8);
        assert!(v.summary.contains("rx 1.6 Mbit/s") && v.summary.contains("2.0 Mbit/s link"));
        // Over HTTP/2 the send share is the client's wait for a stream slot.
        let streams = components(0.0, 0.6);
        let v = decide(Facts {
            streams: true,
            ..facts(&s, &streams)
        });
        assert_eq!(
            (v.cause, v.rule.name()),
            (Cause::Client, "client.http2_streams")
        );
    }

    #[test]
    fn an_open_run_kept_up_fell_behind_or_sent_late() {
        let c = components(0.0, 0.0);
        let s = summary(3000, 0, vec![phase("main", 20, 0.3, 0.7)]);
        let v = decide(Facts {
            open: Some(open(0.0, &[])),
            ..facts(&s, &c)
        });
        assert_eq!((v.cause, v.rule.name()), (Cause::None, "none.kept_up"));
        let behind = ["12 sends were dropped at the in-flight cap"];
        let v = decide(Facts {
            open: Some(open(0.0, &behind)),
            ..facts(&s, &c)
        });
        assert_eq!(
            (v.cause, v.rule.name()),
            (Cause::Server, "server.fell_behind")
        );
        assert!(v.summary.contains("12 sends were dropped"));
        let v = decide(Facts {
            open: Some(open(0.3, &[])),
            ..facts(&s, &c)
        });
        assert_eq!((v.cause, v.rule.name()), (Cause::Client, "client.schedule"));
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

    /// A server on the client's host that fell behind while other work held the host's
    /// cores: the server still, but weakly, and the summary names the host. The server's own
    /// CPU, scraped, accounts for the busy cores: strong again. A server elsewhere: strong.
    #[test]
    fn a_server_on_a_busy_host_is_said_weakly() {
        let c = components(0.0, 0.0);
        let s = summary(3000, 0, vec![phase("main", 20, 0.3, 0.7)]);
        let behind = ["12 sends were dropped at the in-flight cap"];
        let mut client = crate::sysmon::summary::tests::summary();
        (client.host_cores, client.host_other_cores) = (Some(2), Some(1.7));
        let judged = |client: &ClientSummary, server_cpu: Option<f64>| {
            decide(Facts {
                open: Some(open(0.0, &behind)),
                client: Some(client),
                server: server_cpu.map(|cores| ServerEvidence {
                    service_cpu_cores: Some(cores),
                    ..Default::default()
                }),
                ..facts(&s, &c)
            })
        };
        let v = judged(&client, None);
        assert_eq!(v.rule.name(), "server.fell_behind");
        assert_eq!(v.strength, Strength::Strong, "the server is elsewhere");
        client.server_shares_cores = true;
        let v = judged(&client, None);
        assert_eq!(
            (v.rule.name(), v.strength),
            ("server.fell_behind", Strength::Weak)
        );
        assert!(
            v.summary
                .contains("other work kept 1.7 of this host's 2 cores"),
            "{}",
            v.summary
        );
        assert!((v.numbers["host_other_cores"] - 1.7).abs() < 1e-9);
        let v = judged(&client, Some(1.0));
        assert_eq!(v.strength, Strength::Strong, "{}", v.summary);
    }

    /// Issue 59: the embedded demo, client and server on the same two cores and both busy (the
    /// client one of them): the server's queue is what the cores left it, so the server cause is
    /// said weakly, its line names the shared cores and the next step is another host. With the
    /// client on a small share of the busy cores, the server had them: strong again.
    #[test]
    fn a_server_on_cores_it_shares_with_a_busy_client_is_said_weakly() {
        let c = components(0.0, 0.0);
        let s = summary(3000, 0, vec![phase("main", 20, 0.3, 0.7)]);
        let behind = ["12 sends were dropped at the in-flight cap"];
        let mut client = crate::sysmon::summary::tests::summary();
        client.server_shares_cores = true;
        (client.cpu_limit_cores, client.mean_cpu_utilisation) = (2.0, 0.5);
        (client.host_cores, client.host_busy_cores) = (Some(2), Some(1.96));
        client.host_other_cores = Some(0.0);
        let judged = |client: &ClientSummary| {
            decide(Facts {
                open: Some(open(0.0, &behind)),
                client: Some(client),
                ..facts(&s, &c)
            })
        };
        let v = judged(&client);
        assert_eq!(
            (v.rule.name(), v.strength),
            ("server.fell_behind", Strength::Weak)
        );
        assert!(
            v.summary.contains("shared this host's 2 cores"),
            "{}",
            v.summary
        );
        assert!(v.headline.contains("on shared cores"), "{}", v.headline);
        assert!((v.numbers["host_busy_cores"] - 1.96).abs() < 1e-9);
        client.mean_cpu_utilisation = 0.1;
        let v = judged(&client);
        assert_eq!(v.strength, Strength::Strong, "{}", v.summary);
        assert!(!v.headline.contains("shares"), "{}", v.headline);
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

    fn level(outcome: crate::verdict::slo::Outcome, aborted: Option<Abort>) -> LevelFacts {
        let slo = crate::verdict::slo::SloJudgement {
            slo: "p99<50ms".into(),
            observed: Some(61e6),
            low: Some(55e6),
            high: Some(70e6),
            limit: 50e6,
            unit: "ns",
            outcome,
        };
        LevelFacts {
            slos: vec![slo],
            outage: None,
            aborted,
            interrupted: false,
        }
    }

    /// Issue 43: a capacity level is judged by the one judge, its SLOs a fact — the same
    /// errors threshold, client and server rules as any run.
    #[test]
    fn a_capacity_level_is_judged_by_the_same_checks_with_its_slos_as_a_fact() {
        use crate::verdict::slo::Outcome;
        let c = components(0.0, 0.0);
        let s = summary(3000, 0, vec![phase("main", 20, 0.3, 0.7)]);
        let judge = |s: &RunSummary, level: &LevelFacts, problems: &[&str]| {
            decide(Facts {
                open: Some(open(0.0, problems)),
                level: Some(level),
                ..facts(s, &c)
            })
        };
        let passed = level(Outcome::Pass, None);
        let v = judge(&s, &passed, &[]);
        assert_eq!((v.cause, v.rule.name()), (Cause::None, "capacity.passed"));
        assert!(v.slos.as_ref().unwrap().passed);
        let crossed = level(Outcome::Fail, None);
        let v = judge(&s, &crossed, &[]);
        assert_eq!((v.cause, v.rule.name()), (Cause::Server, "server.slo"));
        assert!(
            v.summary
                .starts_with("crossed p99<50ms — p99<50ms crossed: observed 61"),
            "{}",
            v.summary
        );
        assert_eq!(v.slos.as_ref().unwrap().crossed, ["p99<50ms"]);
        let behind = ["latency from intended time grew 40ms through the level (t = 9.0)"];
        let v = judge(&s, &crossed, &behind);
        assert_eq!(v.rule.name(), "server.fell_behind");
        assert!(v.summary.contains("grew 40ms"), "{}", v.summary);
        // Failures above the contract's errors share fail a level whose SLOs passed.
        let failing = summary(3000, 60, vec![phase("main", 20, 0.3, 0.7)]);
        let v = judge(&failing, &passed, &[]);
        assert_eq!((v.cause, v.rule.name()), (Cause::Errors, "errors.share"));
        assert!(!v.slos.as_ref().unwrap().passed);
        let stopped = level(Outcome::Fail, Some(Abort::Errors { failed_share: 0.4 }));
        let v = judge(&failing, &stopped, &[]);
        assert_eq!(v.cause, Cause::Errors);
        assert!(v
            .summary
            .contains("stopped early: 40.0% of requests failed"));
        // A saturated client at a failing level: the client's limit.
        let mut client = ClientSummary {
            samples: 3,
            peak_cpu_utilisation: 0.97,
            cpu_limit_cores: 2.0,
            cpuset_cores: 2,
            ..Default::default()
        };
        crate::verdict::client::judge(&mut client);
        let v = decide(Facts {
            client: Some(&client),
            open: Some(open(0.0, &[])),
            level: Some(&crossed),
            ..facts(&s, &c)
        });
        assert_eq!(v.rule.name(), "client.cpu");
        let cut = LevelFacts {
            interrupted: true,
            ..level(Outcome::Fail, None)
        };
        let v = judge(&s, &cut, &[]);
        assert_eq!(v.rule.name(), "capacity.interrupted");
        assert!(!v.slos.unwrap().judged);
    }
}
