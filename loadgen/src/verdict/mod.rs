//! The verdict of a run — where its throughput stopped and why — decided once, here, from the
//! facts the engine holds when the run ends: the summary (counts, errors, the open model's
//! schedule, each phase's workers' time), where the responses' time went (the writer's
//! [`Components`](crate::stats::Components)), the client's own verdict on its CPU ([`ClientSummary`](crate::sysmon::ClientSummary)), the rows of an
//! open run (whether it kept its schedule, [`schedule`]), and what the server said about
//! itself ([`server`]). Every reader shows this decision: the console's last lines, run.json's
//! `verdict`, capacity's levels and capacity.json, and the analysis (`explain`, `summary`,
//! `report`, the notebooks), which never judges a run again.
//!
//! One judge ([`decide::decide`]) chooses the cause for a run, a phase, a sweep level and a
//! capacity level alike (capacity hands in its SLO judgement, [`slo::LevelFacts`]). Typed
//! rules ([`rule::Rule`]) whose numbers are the contract's (`contract/verdict.json`,
//! `contract/sustainability.json`); checks that return findings ([`checks`]), run in a fixed
//! order — errors, client, network, server — of which the first limit decides; the client's
//! CPU rule ([`client`]); the open model's schedule rule ([`schedule`]); what one closed
//! level's latency against its own fastest response says of queueing at the server
//! ([`queueing`]), what a closed ramp's stages say of it ([`stages`]), and what the kernel's
//! TCP timers left in the rows — a body held for the client's delayed ACK, a SYN resent past
//! a full accept queue ([`timers`]). In layers, each
//! importing only those below it: what the rules find, typed ([`findings`]); the rules
//! ([`checks`], [`slo`], [`queueing`], [`stages`], [`timers`], …), which produce findings from the facts
//! ([`facts`]); the words ([`words`]), which read findings and never decide; the judge
//! ([`decide()`]) on top. The rules never import their words. What needs several runs (a
//! sweep's plateau, its USL, an open-rate sweep's knee) is the analysis's (its thresholds are
//! the contract's `sweep`).

pub mod checks;
pub mod client;
pub mod decide;
pub mod facts;
pub mod findings;
pub mod host;
pub mod queueing;
pub mod rule;
pub mod schedule;
pub mod server;
pub mod slo;
pub mod stages;
pub mod timers;
pub mod words;

use serde::Serialize;

pub use self::decide::decide;
pub use self::facts::{Facts, Judged, LevelSlos};
pub use self::rule::Rule;
pub use self::server::{check_before_run, SaturationGauges, ServerEvidence};

/// Where the limit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// Nothing limited it: the workload as configured (its rate, its think time) set the pace.
    None,
    /// Requests failed: the run measures the failure path.
    Errors,
    /// The load generator: its CPU or quota, its own work, a producer, its schedule.
    Client,
    /// Moving the bytes: the link, or sending and receiving dominating latency.
    Network,
    /// The server: it fell behind the schedule, or its saturation was measured.
    Server,
    /// The facts of one run cannot tell (e.g. one closed level, time at the server, no
    /// saturation measured), or the run was not judged.
    Inconclusive,
}

impl Cause {
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::None => "none",
            Cause::Errors => "errors",
            Cause::Client => "client",
            Cause::Network => "network",
            Cause::Server => "server",
            Cause::Inconclusive => "inconclusive",
        }
    }
}

/// What bounds a capacity search's answer (capacity.json `limited_by`): the cause the judge
/// gave its first failing level, or the search's own end — its `--max-rate` ceiling, or a
/// target it could no longer reach. Chosen here, by [`LimitedBy::of`], never in the workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitedBy {
    /// The first failing level's cause.
    Cause(Cause),
    /// Nothing stopped the search below its ceiling.
    MaxRate,
    /// The target could no longer be reached: its requests failed, so the cause is `errors`.
    TargetLost,
}

impl LimitedBy {
    /// A lost target bounds the answer whatever the levels said; else the first failing
    /// level's cause; else, with an answer at the ceiling, the ceiling.
    pub fn of(target_lost: bool, failing: Option<Cause>, at_max_rate: bool) -> Option<Self> {
        match (target_lost, failing) {
            (true, _) => Some(LimitedBy::TargetLost),
            (false, Some(cause)) => Some(LimitedBy::Cause(cause)),
            (false, None) => at_max_rate.then_some(LimitedBy::MaxRate),
        }
    }

    /// As capacity.json writes it: the cause's name (a lost target's is `errors`), or
    /// `max_rate`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitedBy::Cause(cause) => cause.as_str(),
            LimitedBy::TargetLost => Cause::Errors.as_str(),
            LimitedBy::MaxRate => "max_rate",
        }
    }
}

impl Serialize for LimitedBy {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// How firmly the facts say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Strength {
    Strong,
    Weak,
}

/// A phase's (thread group's, stage's) own verdict, on the workers alive in it.
#[derive(Debug, Clone, Serialize)]
pub struct PhaseVerdict {
    pub phase: String,
    pub cause: Cause,
    pub rule: Rule,
    pub workers_alive: f64,
    pub busy_share: f64,
    pub waiting_share: f64,
}

/// The verdict, as run.json's `verdict` holds it.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub cause: Cause,
    pub strength: Strength,
    /// The rule that decided (`errors.share`, `client.cpu`, `server.fell_behind`, …; the list
    /// is docs/verdict.md's).
    pub rule: Rule,
    /// The console's one line (at most 120 characters): cause, strength, what the rule found
    /// and the next step, without numbers ([`words::headline`]).
    pub headline: String,
    /// One sentence: the cause and why, with its numbers.
    pub summary: String,
    /// Every check's finding, each a sentence with its numbers (the deciding one first).
    pub evidence: Vec<String>,
    /// The numbers behind the evidence, by name (shares 0–1, ns, req/s, cores).
    pub numbers: std::collections::BTreeMap<&'static str, f64>,
    /// The server's own metrics, reduced; `None` without `--server-metrics`.
    pub server: Option<ServerEvidence>,
    /// Runs of several phases: a verdict per phase.
    pub phases: Vec<PhaseVerdict>,
    /// Capacity levels: whether it passed and the SLOs it crossed (or could not be told apart
    /// from); `None` for a plain run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slos: Option<SloVerdict>,
    /// `loadgen run` or `loadgen capacity`.
    pub decided_by: &'static str,
}

/// A capacity level's SLOs.
#[derive(Debug, Clone, Serialize)]
pub struct SloVerdict {
    pub passed: bool,
    pub crossed: Vec<String>,
    /// False when Ctrl-C or SIGTERM cut the level short: recorded, not judged.
    pub judged: bool,
    /// Why it failed, each a sentence (capacity.json's level `reasons`; in run.json they are
    /// the evidence after the summary).
    #[serde(skip)]
    pub reasons: Vec<String>,
}

impl Verdict {
    /// The console's Verdict line: [`words::headline`], at most 120 characters; the summary,
    /// the evidence and their numbers are `loadgen-analyze explain`'s.
    pub fn console_line(&self) -> &str {
        &self.headline
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 57: what bounds a capacity search is chosen here — a lost target before any
    /// level's cause (written `errors`), else the first failing level's cause, else the ceiling.
    #[test]
    fn a_searchs_limit_is_a_cause_or_its_own_end() {
        let of =
            |lost, failing, at_max| LimitedBy::of(lost, failing, at_max).map(LimitedBy::as_str);
        assert_eq!(of(true, Some(Cause::Server), true), Some("errors"));
        assert_eq!(of(false, Some(Cause::Client), true), Some("client"));
        assert_eq!(of(false, None, true), Some("max_rate"));
        assert_eq!(of(false, None, false), None);
        let json = serde_json::to_value(LimitedBy::TargetLost).unwrap();
        assert_eq!(json, "errors");
    }

    /// Every rule's line, weak or strong, is the cause, the strength, what it found and the
    /// next step, within the console's 120 characters (issue 61: it was ~600, three lines).
    #[test]
    fn every_verdict_line_is_one_short_line_with_a_next_step() {
        for rule in Rule::ALL {
            for strength in [Strength::Strong, Strength::Weak] {
                let line = words::headline(rule, strength);
                assert!(
                    line.chars().count() <= words::HEADLINE_MAX_CHARS,
                    "{} chars: {line}",
                    line.chars().count()
                );
                assert!(line.starts_with(rule.cause().as_str()), "{line}");
                assert!(line.contains(" — next: "), "{line}");
                let note = matches!(rule, Rule::ClientNote | Rule::ServerNote);
                assert_eq!(
                    line.contains(": a note — "),
                    note,
                    "{line}: a rule with no words"
                );
                assert!(!line.contains('\n'), "{line}");
            }
        }
        for rule in Rule::ALL.into_iter().filter(|r| r.cause() == Cause::Server) {
            let line = words::headline_on_a_shared_host(rule);
            assert!(
                line.chars().count() <= words::HEADLINE_MAX_CHARS,
                "{} chars: {line}",
                line.chars().count()
            );
            assert!(line.starts_with("server (weak): "), "{line}");
        }
        assert_eq!(
            words::headline(Rule::ServerQueueing, Strength::Weak),
            "server (weak): requests queued at the server — next: loadgen sweep, or --server-metrics"
        );
    }
}
