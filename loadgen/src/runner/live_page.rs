//! What a run's live page (`--dashboard`) adds to each second beyond the live counters: the
//! run's verdict as it stands — the engine's own judge ([`verdict::decide`]) on the facts so
//! far, marked provisional, with the facts it still lacks named — the server's scraped
//! gauges and CPU, and the slowest requests with their trace ids.
//!
//! Off the workers' path: the facts are copies. The writer thread copies its exact aggregates
//! out ([`Published`]; the slowest requests are among them), the scraper shares the rows it
//! scraped (not a second scrape), and this runs once a second on the page's sampler. It
//! decides nothing itself: a fact only known at the end (the client's CPU verdict, the open
//! model's schedule, a capacity level's SLOs) is left out of the facts and named as lacking.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::clock::Anchor;
use crate::config::RunConfig;
use crate::record::Labels;
use crate::report::dashboard::SoFar;
use crate::report::RunSummary;
use crate::servermon::RowsSoFar;
use crate::stats::{Aggregator, LiveCounters, Published};
use crate::verdict::{self, ServerEvidence};

/// What the hook reads, once a second.
pub(super) struct LiveFacts {
    pub config: RunConfig,
    pub live: Arc<LiveCounters>,
    pub labels: Labels,
    pub published: Option<Arc<Published>>,
    pub anchor: Anchor,
    pub server_rows: Option<RowsSoFar>,
}

/// The server's figures are reduced again at most this share of the time: the reduction reads
/// every row scraped so far, which grows with a long run against a large exposition.
const SERVER_SHARE: u32 = 20;

/// The page's hook: the provisional verdict, the server's figures and the slowest requests.
pub(super) fn so_far(facts: LiveFacts) -> SoFar {
    let mut stats: Option<Aggregator> = None;
    let mut server = ServerSoFar::default();
    Box::new(move || {
        if let Some(latest) = facts.published.as_ref().and_then(|p| p.peek()) {
            stats = Some(latest);
        }
        let mut fields = Map::new();
        let server = server.read(&facts);
        if let Some(server) = &server {
            fields.insert("server".into(), json!(server));
        }
        if let Some(stats) = &stats {
            fields.insert("slowest".into(), slowest(stats, &facts.labels));
            fields.insert("verdict".into(), provisional(&facts, stats, server));
        }
        fields
    })
}

/// The server's figures as the verdict reduces its scrapes, kept between reductions.
#[derive(Default)]
struct ServerSoFar {
    last: Option<ServerEvidence>,
    next_at: Option<Instant>,
}

impl ServerSoFar {
    /// The scrapes so far reduced, at most every `SERVER_SHARE` times the reduction's own
    /// time; the last reduction in between, and once the run's end took the rows over.
    fn read(&mut self, facts: &LiveFacts) -> Option<ServerEvidence> {
        let rows = facts.server_rows.as_ref()?;
        if self.next_at.is_some_and(|at| Instant::now() < at) {
            return self.last.clone();
        }
        let started = Instant::now();
        let saturation = &facts.config.evidence.server_metrics.saturation;
        let reduced = ServerEvidence::of(&rows.lock().ok()?, saturation);
        self.next_at = Some(Instant::now() + started.elapsed() * SERVER_SHARE);
        if reduced.is_some() {
            self.last = reduced;
        }
        self.last.clone()
    }
}

/// The slowest requests so far, each with its op's label.
pub(super) fn slowest(stats: &Aggregator, labels: &Labels) -> Value {
    let rows = stats.slowest.rows().iter().map(|slow| {
        let mut row = json!(slow);
        row["op"] = json!(labels.ops.get(usize::from(slow.op)));
        row
    });
    Value::Array(rows.collect())
}

/// The engine's verdict on the rows so far, with what it still lacks.
fn provisional(facts: &LiveFacts, stats: &Aggregator, server: Option<ServerEvidence>) -> Value {
    let config = &facts.config;
    let now_ns = facts.anchor.offset_ns(Instant::now());
    let counted = (&*facts.live, stats, &facts.labels);
    let summary = RunSummary::of_run(config.model.plan(), counted, now_ns);
    let verdict = verdict::decide(verdict::Facts {
        summary: &summary,
        components: &stats.components,
        client: None,
        streams: config.connection.multiplexed(),
        open: None,
        server,
        level: None,
        decided_by: config.judgement.decided_by(),
        probe_r1_ns: None,
    });
    json!({
        "provisional": true,
        "cause": verdict.cause,
        "rule": verdict.rule,
        "headline": verdict.headline,
        "summary": verdict.summary,
        "requests": summary.requests,
        "lacks": lacks(config),
    })
}

/// The facts the final verdict reads that are only known at the end of the run.
fn lacks(config: &RunConfig) -> Vec<&'static str> {
    let mut lacks =
        vec!["the client's CPU verdict (sampled over the whole run, judged at its end)"];
    if config.model.plan().max_lateness().is_some() {
        lacks.push("the open model's schedule and sustainability (judged on every row at the end)");
    }
    if config.judgement.level.is_some() {
        lacks.push("the level's SLOs (judged with bootstrap intervals on every row at the end)");
    }
    lacks
}
