//! What the server said about itself during the run: the `--server-metrics` scrapes (the rows
//! of `server-metrics.parquet`, handed on in memory by the scraper) reduced to the facts the
//! verdict names — the
//! target host's CPU (node_exporter's `node_cpu_seconds_total` by mode), the service's own CPU
//! (`process_cpu_seconds_total` of a source that is not node_exporter), and the service's
//! saturation gauges (busy workers against their limit, a queue's length: loadgen-server's
//! `loadgen_server_workers_busy`, `_workers_limit`, `_queue_length` by default, or the names
//! given with `--server-saturation`).
//!
//! It reduces; the rule that reads these numbers is [`mod@super::decide`]'s.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::servermon::ScrapeRow as Row;

/// Which gauges say the service is saturated (`--server-saturation`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SaturationGauges {
    /// Busy workers (threads, connections in use…).
    pub busy: Option<String>,
    /// Their limit: a gauge's name, or a number.
    pub limit: Option<Limit>,
    /// Requests waiting for a worker.
    pub queue: Option<String>,
}

/// A workers' limit: read from a gauge, or given.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Limit {
    Gauge(String),
    Fixed(f64),
}

impl Default for SaturationGauges {
    /// loadgen-server's gauges.
    fn default() -> Self {
        SaturationGauges {
            busy: Some("loadgen_server_workers_busy".into()),
            limit: Some(Limit::Gauge("loadgen_server_workers_limit".into())),
            queue: Some("loadgen_server_queue_length".into()),
        }
    }
}

impl std::str::FromStr for SaturationGauges {
    type Err = String;

    /// `BUSY/LIMIT` (LIMIT a gauge's name or a number), `BUSY/LIMIT,QUEUE`, or `QUEUE`
    /// alone (a queue's length).
    fn from_str(text: &str) -> Result<Self, String> {
        let valid = |text: &str| Selector::parse(text).is_some();
        let (workers, queue) = match split_outside_braces(text, ',') {
            Some((workers, queue)) => (Some(workers.trim()), Some(queue.trim())),
            None if split_outside_braces(text, '/').is_some() => (Some(text.trim()), None),
            None => (None, Some(text.trim())),
        };
        let mut gauges = SaturationGauges {
            busy: None,
            limit: None,
            queue: None,
        };
        if let Some(workers) = workers {
            let (busy, limit) = split_outside_braces(workers, '/').ok_or_else(|| {
                format!("`{workers}` is not BUSY/LIMIT (e.g. `threads_busy/threads_max`)")
            })?;
            // Anything that reads as a number (`0`, `inf`, `NaN`) is a number, never a name.
            let limit = match limit.trim().parse::<f64>() {
                Ok(n) if n.is_finite() && n > 0.0 => Limit::Fixed(n),
                Err(_) if valid(limit.trim()) => Limit::Gauge(limit.trim().into()),
                _ => {
                    return Err(format!(
                        "`{limit}` is neither a metric (NAME or NAME{{label=\"value\"}}) nor a \
                         positive number"
                    ))
                }
            };
            if !valid(busy.trim()) {
                return Err(format!(
                    "`{busy}` is not a metric: NAME, or NAME{{label=\"value\",…}} for one series"
                ));
            }
            (gauges.busy, gauges.limit) = (Some(busy.trim().into()), Some(limit));
        }
        if let Some(queue) = queue {
            if !valid(queue) {
                return Err(format!(
                    "`{queue}` is not a metric: NAME, or NAME{{label=\"value\",…}} for one series"
                ));
            }
            if workers.is_none() && names_workers(queue) {
                return Err(format!(
                    "`{queue}` alone is read as a queue's length, but its name says busy \
                     workers or their limit; write BUSY/LIMIT (e.g. `{queue}/200`) or \
                     BUSY/LIMIT,QUEUE"
                ));
            }
            gauges.queue = Some(queue.into());
        }
        Ok(gauges)
    }
}

/// Whether a gauge's name says it counts workers or their limit (`…_busy`, `…_active`,
/// `…_max`), not requests waiting: such a gauge given alone would be read as a queue.
fn names_workers(text: &str) -> bool {
    let name = text.split('{').next().unwrap_or(text).to_ascii_lowercase();
    let waiting = ["queue", "pending", "waiting", "backlog"];
    let workers = [
        "_busy",
        "_active",
        "_in_use",
        "_used",
        "_max",
        "_limit",
        "_capacity",
    ];
    !waiting.iter().any(|w| name.contains(w)) && workers.iter().any(|w| name.ends_with(w))
}

/// `text` split at the first `sep` outside `{…}` (a label value may hold `,` or `/`).
fn split_outside_braces(text: &str, sep: char) -> Option<(&str, &str)> {
    let (mut depth, mut quoted, mut escaped) = (0i32, false, false);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            _ if quoted => {}
            '{' => depth += 1,
            '}' => depth -= 1,
            c if c == sep && depth == 0 => return Some((&text[..i], &text[i + 1..])),
            _ => {}
        }
    }
    None
}

/// A gauge of `--server-saturation`: a metric name and the labels a series must carry
/// (`pool_active{pool="orders"}`), so a gauge exposed per pool is read one series at a time.
#[derive(Debug, Clone, PartialEq)]
struct Selector {
    name: String,
    labels: Vec<(String, String)>,
}

impl Selector {
    fn parse(text: &str) -> Option<Selector> {
        let text = text.trim();
        let (name, labels) = match text.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}')?),
            None => (text, ""),
        };
        // Prometheus's metric names: [a-zA-Z_:][a-zA-Z0-9_:]*.
        let name_ok = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        let labels = crate::servermon::label_pairs(labels.trim().trim_end_matches(','))?;
        name_ok.then(|| Selector {
            name: name.to_string(),
            labels,
        })
    }

    fn matches(&self, labels: &str) -> bool {
        // A value may hold `,` or `=` (quoted), so the series' labels are read as pairs.
        let series = crate::servermon::label_pairs(labels).unwrap_or_default();
        self.labels
            .iter()
            .all(|wanted| series.iter().any(|pair| pair == wanted))
    }
}

/// The one series of `points` (a metric's samples) that `selector` picks, or why there is
/// none to read: no series at all, or several — whose values must never be mixed (one
/// pool's busy gauge against another's limit).
fn one_series<'p>(
    by_metric: &'p BTreeMap<&str, Vec<Point<'p>>>,
    text: &str,
) -> Result<Vec<&'p Point<'p>>, String> {
    let selector = Selector::parse(text).ok_or_else(|| format!("`{text}` is not a metric"))?;
    let matched: Vec<&Point<'_>> = by_metric
        .get(selector.name.as_str())
        .map(|points| {
            points
                .iter()
                .filter(|p| selector.matches(p.labels))
                .collect()
        })
        .unwrap_or_default();
    let series: std::collections::BTreeSet<(&str, &str)> =
        matched.iter().map(|p| (p.source, p.labels)).collect();
    match series.len() {
        0 => Err(format!(
            "--server-saturation: `{text}` matched no series in the scrapes, so the verdict \
             reads no saturation from it; check the name and labels against the endpoint's \
             /metrics"
        )),
        1 => Ok(matched),
        n => Err(format!(
            "--server-saturation: `{text}` matches {n} series ({}), whose values must not be \
             mixed, so the verdict reads no saturation from it; pick one with its labels, \
             e.g. `{}{{{}}}`",
            series
                .iter()
                .map(|(_, labels)| format!("{{{labels}}}"))
                .collect::<Vec<_>>()
                .join(", "),
            selector.name,
            series.iter().next().map_or("", |(_, labels)| *labels)
        )),
    }
}

/// The `--server-saturation` gauges a user named, held to the scrape taken before the run
/// (`rows`): a gauge whose metric is there but whose selector picks several of its series,
/// or none of them, is refused in one sentence — a run would only say afterwards that it
/// read nothing. A metric not there yet is let through (it may appear once the load
/// starts; the run warns if it never does). loadgen-server's default gauges are not held.
pub fn check_before_run(rows: &[Row], gauges: &SaturationGauges) -> Result<(), String> {
    if *gauges == SaturationGauges::default() {
        return Ok(());
    }
    let limit = match &gauges.limit {
        Some(Limit::Gauge(name)) => Some(name),
        _ => None,
    };
    for text in [gauges.busy.as_ref(), limit, gauges.queue.as_ref()]
        .into_iter()
        .flatten()
    {
        let Some(selector) = Selector::parse(text) else {
            continue;
        };
        let of_metric: Vec<&Row> = rows
            .iter()
            .filter(|r| r.metric.as_deref() == Some(selector.name.as_str()) && r.error.is_none())
            .collect();
        let series = |picked: bool| -> std::collections::BTreeSet<(&str, &str)> {
            of_metric
                .iter()
                .map(|r| (r.source.as_str(), r.labels.as_deref().unwrap_or("")))
                .filter(|(_, labels)| !picked || selector.matches(labels))
                .collect()
        };
        let (all, picked) = (series(false), series(true));
        let listed = |set: &std::collections::BTreeSet<(&str, &str)>| {
            let mut names: Vec<String> = set
                .iter()
                .take(3)
                .map(|(_, l)| format!("{{{l}}}"))
                .collect();
            if set.len() > 3 {
                names.push(format!("… {} in all", set.len()));
            }
            names.join(", ")
        };
        let example = all.iter().next().map_or("", |(_, l)| *l);
        match (all.len(), picked.len()) {
            (0, _) | (_, 1) => {}
            (_, 0) => {
                return Err(format!(
                    "--server-saturation `{text}` matches none of the {} series of `{}` the                      server exposes ({}); pick one with its labels, e.g. `{}{{{example}}}`",
                    all.len(),
                    selector.name,
                    listed(&all),
                    selector.name
                ))
            }
            (_, n) => {
                return Err(format!(
                    "--server-saturation `{text}` matches {n} series ({}), whose values must                      not be mixed; pick one with its labels, e.g. `{}{{{example}}}`",
                    listed(&picked),
                    selector.name
                ))
            }
        }
    }
    Ok(())
}

/// The target host's CPU over the run, from node_exporter.
#[derive(Debug, Clone, Serialize)]
pub struct HostCpu {
    pub cores: usize,
    /// Busy (not idle, not iowait) share of all its cores.
    pub busy_share: f64,
    /// The busiest core's busy share.
    pub busiest_core_share: f64,
}

/// The service's workers, gauge by gauge over the scrapes.
#[derive(Debug, Clone, Serialize)]
pub struct Workers {
    pub busy_max: f64,
    pub busy_mean: f64,
    pub limit: Option<f64>,
    /// Share of the scrapes in which every worker was busy.
    pub all_busy_share: Option<f64>,
}

/// A queue's length over the scrapes.
#[derive(Debug, Clone, Serialize)]
pub struct Queue {
    pub max: f64,
    pub mean: f64,
    /// Share of the scrapes in which something was queued.
    pub nonempty_share: f64,
}

/// What the server's metrics said, reduced.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerEvidence {
    pub scrapes: u64,
    pub failed_scrapes: u64,
    pub host_cpu: Option<HostCpu>,
    /// Cores the service itself used (its `process_cpu_seconds_total`), on average.
    pub service_cpu_cores: Option<f64>,
    pub workers: Option<Workers>,
    pub queue: Option<Queue>,
    /// Why a `--server-saturation` gauge was not read (no series, or several): run
    /// warnings, never a verdict.
    #[serde(skip)]
    pub notes: Vec<String>,
}

/// One successful sample.
struct Point<'a> {
    t_ns: i64,
    source: &'a str,
    labels: &'a str,
    value: f64,
}

impl ServerEvidence {
    /// The scrapes' rows reduced; `None` when the run scraped nothing.
    pub fn of(rows: &[Row], gauges: &SaturationGauges) -> Option<Self> {
        (!rows.is_empty()).then(|| Self::from_rows(rows, gauges))
    }

    fn from_rows(rows: &[Row], gauges: &SaturationGauges) -> Self {
        let mut by_metric: BTreeMap<&str, Vec<Point<'_>>> = BTreeMap::new();
        let mut scrapes = std::collections::BTreeSet::new();
        let mut failed = 0;
        for row in rows {
            match (&row.metric, row.value, &row.error) {
                // A gauge not yet set (NaN) or overflowed is no reading, nor a failed scrape.
                (Some(_), Some(value), None) if !value.is_finite() => {
                    scrapes.insert((row.t_ns, row.source.as_str()));
                }
                (Some(metric), Some(value), None) => {
                    scrapes.insert((row.t_ns, row.source.as_str()));
                    by_metric.entry(metric).or_default().push(Point {
                        t_ns: row.t_ns,
                        source: &row.source,
                        labels: row.labels.as_deref().unwrap_or(""),
                        value,
                    })
                }
                _ => failed += 1,
            }
        }
        let empty = Vec::new();
        let metric = |name: &Option<String>| {
            name.as_deref()
                .and_then(|n| by_metric.get(n))
                .unwrap_or(&empty)
        };
        let node_sources: std::collections::BTreeSet<&str> = metric(&Some(NODE_CPU.into()))
            .iter()
            .map(|p| p.source)
            .collect();
        // Each gauge is one series (a selector's labels pick it); one that matches no
        // series or several is not read, and said — only the defaults may be absent quietly.
        let mut notes = Vec::new();
        let quiet = *gauges == SaturationGauges::default();
        let mut read = |text: &Option<String>| -> Vec<&Point<'_>> {
            let Some(text) = text.as_deref() else {
                return Vec::new();
            };
            one_series(&by_metric, text).unwrap_or_else(|note| {
                if !quiet || note.contains("series (") {
                    notes.push(note);
                }
                Vec::new()
            })
        };
        let busy = read(&gauges.busy);
        let limit = match &gauges.limit {
            Some(Limit::Gauge(name)) => LimitValues::Series(read(&Some(name.clone()))),
            Some(Limit::Fixed(n)) => LimitValues::Fixed(*n),
            None => LimitValues::None,
        };
        let queued = read(&gauges.queue);
        ServerEvidence {
            scrapes: scrapes.len() as u64,
            failed_scrapes: failed,
            host_cpu: host_cpu(metric(&Some(NODE_CPU.into()))),
            service_cpu_cores: counter_rate(
                metric(&Some("process_cpu_seconds_total".into()))
                    .iter()
                    .filter(|p| !node_sources.contains(p.source)),
            ),
            workers: workers(&busy, &limit),
            queue: queue(queued.iter().map(|p| p.value).collect()),
            notes,
        }
    }
}

/// The workers' limit: a series (each busy sample judged against the limit of the same
/// scrape, or the latest before it), a number, or none.
enum LimitValues<'p> {
    Series(Vec<&'p Point<'p>>),
    Fixed(f64),
    None,
}

impl LimitValues<'_> {
    /// The limit in force at `t_ns`: the latest sample at or before it (the first one before
    /// the series begins).
    fn at(&self, t_ns: i64) -> Option<f64> {
        match self {
            LimitValues::Fixed(n) => Some(*n),
            LimitValues::None => None,
            LimitValues::Series(points) => points
                .iter()
                .filter(|p| p.t_ns <= t_ns)
                .max_by_key(|p| p.t_ns)
                .or_else(|| points.iter().min_by_key(|p| p.t_ns))
                .map(|p| p.value),
        }
    }

    fn last(&self) -> Option<f64> {
        self.at(i64::MAX)
    }
}

const NODE_CPU: &str = "node_cpu_seconds_total";

fn workers(busy: &[&Point<'_>], limit: &LimitValues<'_>) -> Option<Workers> {
    if busy.is_empty() {
        return None;
    }
    let n = busy.len() as f64;
    let judged: Vec<bool> = busy
        .iter()
        .filter_map(|p| limit.at(p.t_ns).filter(|l| *l > 0.0).map(|l| p.value >= l))
        .collect();
    Some(Workers {
        busy_max: busy.iter().map(|p| p.value).fold(0.0, f64::max),
        busy_mean: busy.iter().map(|p| p.value).sum::<f64>() / n,
        limit: limit.last(),
        all_busy_share: (!judged.is_empty())
            .then(|| judged.iter().filter(|&&full| full).count() as f64 / n),
    })
}

fn queue(lengths: Vec<f64>) -> Option<Queue> {
    if lengths.is_empty() {
        return None;
    }
    let n = lengths.len() as f64;
    Some(Queue {
        max: lengths.iter().copied().fold(0.0, f64::max),
        mean: lengths.iter().sum::<f64>() / n,
        nonempty_share: lengths.iter().filter(|&&q| q > 0.0).count() as f64 / n,
    })
}

/// A counter series' first and last sample: (t_ns, value) each.
#[derive(Clone, Copy)]
struct Span {
    first: (i64, f64),
    last: (i64, f64),
}

impl Span {
    /// Widens the series' span in `spans` under `key` by one sample.
    fn widen<K: Ord>(spans: &mut BTreeMap<K, Span>, key: K, p: &Point<'_>) {
        let at = (p.t_ns, p.value);
        let span = spans.entry(key).or_insert(Span {
            first: at,
            last: at,
        });
        if at.0 < span.first.0 {
            span.first = at;
        }
        if at.0 > span.last.0 {
            span.last = at;
        }
    }

    /// How much the counter grew (a reset counts as no growth).
    fn delta(&self) -> f64 {
        (self.last.1 - self.first.1).max(0.0)
    }
}

/// A counter's rate over the run: Σ over its series of (last − first) / (t_last − t_first).
fn counter_rate<'a>(points: impl Iterator<Item = &'a Point<'a>>) -> Option<f64> {
    let mut series = BTreeMap::new();
    for p in points {
        Span::widen(&mut series, (p.source, p.labels), p);
    }
    let rates: Vec<f64> = series
        .values()
        .filter(|s| s.last.0 > s.first.0)
        .map(|s| s.delta() / ((s.last.0 - s.first.0) as f64 / 1e9))
        .collect();
    (!rates.is_empty()).then(|| rates.iter().sum())
}

/// node_exporter's CPU seconds by (cpu, mode) → each core's busy share over the run.
fn host_cpu(points: &[Point<'_>]) -> Option<HostCpu> {
    let mut by_core: BTreeMap<(&str, &str), (f64, f64)> = BTreeMap::new();
    let mut spans = BTreeMap::new();
    for p in points {
        let cpu = label(p.labels, "cpu").unwrap_or("");
        let mode = label(p.labels, "mode").unwrap_or("");
        Span::widen(&mut spans, (p.source, cpu, mode), p);
    }
    for ((source, cpu, mode), span) in &spans {
        let delta = span.delta();
        let core = by_core.entry((*source, *cpu)).or_default();
        core.0 += delta;
        if matches!(*mode, "idle" | "iowait") {
            core.1 += delta;
        }
    }
    let shares: Vec<f64> = by_core
        .values()
        .filter(|(total, _)| *total > 0.0)
        .map(|(total, idle)| 1.0 - idle / total)
        .collect();
    if shares.is_empty() {
        return None;
    }
    Some(HostCpu {
        cores: shares.len(),
        busy_share: shares.iter().sum::<f64>() / shares.len() as f64,
        busiest_core_share: shares.iter().copied().fold(0.0, f64::max),
    })
}

/// The value of `name` in `name="value",…` (the file's label spelling).
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    labels.split(',').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == name).then(|| value.trim_matches('"'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t_s: i64, source: &str, metric: &str, labels: &str, value: f64) -> Row {
        Row {
            t_ns: t_s * 1_000_000_000,
            source: source.into(),
            metric: Some(metric.into()),
            labels: Some(labels.into()),
            value: Some(value),
            error: None,
        }
    }

    #[test]
    fn host_cpu_is_one_minus_idle_over_all_modes_per_core() {
        let node = "http://n/metrics";
        let rows = vec![
            row(0, node, NODE_CPU, "cpu=\"0\",mode=\"idle\"", 100.0),
            row(0, node, NODE_CPU, "cpu=\"0\",mode=\"user\"", 50.0),
            row(0, node, NODE_CPU, "cpu=\"1\",mode=\"idle\"", 100.0),
            row(0, node, NODE_CPU, "cpu=\"1\",mode=\"user\"", 50.0),
            // 10 s later: core 0 was busy 9 s of 10, core 1 busy 1 s.
            row(10, node, NODE_CPU, "cpu=\"0\",mode=\"idle\"", 101.0),
            row(10, node, NODE_CPU, "cpu=\"0\",mode=\"user\"", 59.0),
            row(10, node, NODE_CPU, "cpu=\"1\",mode=\"idle\"", 109.0),
            row(10, node, NODE_CPU, "cpu=\"1\",mode=\"user\"", 51.0),
            // node_exporter's own process counter is not the service's.
            row(0, node, "process_cpu_seconds_total", "", 1.0),
            row(10, node, "process_cpu_seconds_total", "", 9.0),
            row(0, "http://s/metrics", "process_cpu_seconds_total", "", 2.0),
            row(10, "http://s/metrics", "process_cpu_seconds_total", "", 7.0),
        ];
        let e = ServerEvidence::from_rows(&rows, &SaturationGauges::default());
        let cpu = e.host_cpu.unwrap();
        assert_eq!(cpu.cores, 2);
        assert!((cpu.busy_share - 0.5).abs() < 1e-9);
        assert!((cpu.busiest_core_share - 0.9).abs() < 1e-9);
        assert!((e.service_cpu_cores.unwrap() - 0.5).abs() < 1e-9);
        assert_eq!(e.scrapes, 4);
    }

    #[test]
    fn workers_at_their_limit_and_a_queue_are_read_from_the_gauges() {
        let s = "http://s/metrics";
        let mut rows = Vec::new();
        for (t, busy, queued) in [
            (0, 3.0, 0.0),
            (1, 8.0, 40.0),
            (2, 8.0, 80.0),
            (3, 8.0, 60.0),
        ] {
            rows.push(row(t, s, "loadgen_server_workers_busy", "", busy));
            rows.push(row(t, s, "loadgen_server_workers_limit", "", 8.0));
            rows.push(row(t, s, "loadgen_server_queue_length", "", queued));
        }
        let e = ServerEvidence::from_rows(&rows, &SaturationGauges::default());
        let w = e.workers.unwrap();
        assert_eq!((w.busy_max, w.limit), (8.0, Some(8.0)));
        assert_eq!(w.all_busy_share, Some(0.75));
        let q = e.queue.unwrap();
        assert_eq!((q.max, q.nonempty_share), (80.0, 0.75));
    }

    #[test]
    fn a_gauge_per_pool_is_read_one_series_at_a_time_never_mixed() {
        // The endpoint: neither pool is full (orders 3 of 8, reports 8 of 200).
        let s = "http://s/metrics";
        let mut rows = Vec::new();
        for t in 0..4 {
            rows.push(row(t, s, "pool_active", "pool=\"orders\"", 3.0));
            rows.push(row(t, s, "pool_active", "pool=\"reports\"", 8.0));
            rows.push(row(t, s, "pool_max", "pool=\"reports\"", 200.0));
            rows.push(row(t, s, "pool_max", "pool=\"orders\"", 8.0));
        }
        let mixed: SaturationGauges = "pool_active/pool_max".parse().unwrap();
        let e = ServerEvidence::from_rows(&rows, &mixed);
        assert!(e.workers.is_none(), "{:?}", e.workers);
        assert_eq!(e.notes.len(), 2, "{:?}", e.notes);
        assert!(e.notes[0].contains("matches 2 series"), "{:?}", e.notes);
        let orders: SaturationGauges = "pool_active{pool=\"orders\"}/pool_max{pool=\"orders\"}"
            .parse()
            .unwrap();
        let e = ServerEvidence::from_rows(&rows, &orders);
        let w = e.workers.unwrap();
        assert_eq!(
            (w.busy_max, w.limit, w.all_busy_share),
            (3.0, Some(8.0), Some(0.0))
        );
        assert!(e.notes.is_empty(), "{:?}", e.notes);
        // A gauge that never appears is said, and gives no saturation.
        let absent: SaturationGauges = "threads_busy/threads_max".parse().unwrap();
        let e = ServerEvidence::from_rows(&rows, &absent);
        assert!(e.workers.is_none());
        assert!(
            e.notes.iter().all(|n| n.contains("matched no series")),
            "{:?}",
            e.notes
        );
    }

    #[test]
    fn saturation_gauges_are_parsed_or_refused_in_one_sentence() {
        let g: SaturationGauges = "threads_busy/threads_max,queue_len".parse().unwrap();
        assert_eq!(g.busy.as_deref(), Some("threads_busy"));
        assert_eq!(g.limit, Some(Limit::Gauge("threads_max".into())));
        assert_eq!(g.queue.as_deref(), Some("queue_len"));
        let g: SaturationGauges = "pool_active/200".parse().unwrap();
        assert_eq!(g.limit, Some(Limit::Fixed(200.0)));
        let g: SaturationGauges = "pending".parse().unwrap();
        assert_eq!((g.busy, g.queue.as_deref()), (None, Some("pending")));
        let g: SaturationGauges = "a{pool=\"x\",k=\"1\"}/b{pool=\"x/y\"},q{k=\"v\"}"
            .parse()
            .unwrap();
        assert_eq!(g.busy.as_deref(), Some("a{pool=\"x\",k=\"1\"}"));
        assert_eq!(g.limit, Some(Limit::Gauge("b{pool=\"x/y\"}".into())));
        assert_eq!(g.queue.as_deref(), Some("q{k=\"v\"}"));
        assert!("a{pool=x}/b".parse::<SaturationGauges>().is_err());
        assert!("busy/-3".parse::<SaturationGauges>().is_err());
        for limit in ["0", "inf", "NaN", "-0", "1e999", "9lives"] {
            let why = format!("busy/{limit}")
                .parse::<SaturationGauges>()
                .unwrap_err();
            assert!(why.contains("positive number"), "{limit}: {why}");
        }
        assert!("9lives".parse::<SaturationGauges>().is_err());
        assert!("a b".parse::<SaturationGauges>().is_err());
    }

    #[test]
    fn a_gauge_that_is_not_a_number_is_no_reading() {
        let gauges: SaturationGauges = "busy/limit,queue".parse().unwrap();
        let mut rows = Vec::new();
        for t in 0..4 {
            let odd = t % 2 == 1;
            rows.push(row(t, "a", "busy", "", if odd { f64::NAN } else { 2.0 }));
            rows.push(row(t, "a", "limit", "", 8.0));
            rows.push(row(
                t,
                "a",
                "queue",
                "",
                if odd { f64::INFINITY } else { 1.0 },
            ));
        }
        let e = ServerEvidence::of(&rows, &gauges).unwrap();
        let workers = e.workers.unwrap();
        assert_eq!((workers.busy_max, workers.busy_mean), (2.0, 2.0));
        assert_eq!(workers.all_busy_share, Some(0.0));
        let queue = e.queue.unwrap();
        assert_eq!((queue.max, queue.mean), (1.0, 1.0));
        assert_eq!((e.scrapes, e.failed_scrapes), (4, 0));
    }

    #[test]
    fn a_busy_gauge_alone_is_refused_not_read_as_a_queue() {
        for busy in [
            "loadgen_server_workers_busy",
            "pool_active{pool=\"orders\"}",
            "tomcat_threads_max",
        ] {
            let why = busy.parse::<SaturationGauges>().unwrap_err();
            assert!(why.contains("read as a queue's length"), "{why}");
        }
        for queue in [
            "loadgen_server_queue_length",
            "jobs_pending",
            "queue_max",
            "depth",
        ] {
            let g: SaturationGauges = queue.parse().unwrap();
            assert_eq!(g.queue.as_deref(), Some(queue));
        }
        // With a limit the busy gauge is what it says.
        assert!("loadgen_server_workers_busy/8"
            .parse::<SaturationGauges>()
            .is_ok());
    }

    #[test]
    fn the_scrape_before_the_run_refuses_a_gauge_of_several_series_or_none() {
        let rows = [
            row(0, "a", "pool_active", "pool=\"orders\"", 3.0),
            row(0, "a", "pool_active", "pool=\"reports\"", 8.0),
            row(0, "a", "pool_max", "pool=\"reports\"", 200.0),
            row(0, "a", "pool_max", "pool=\"orders\"", 8.0),
        ];
        let check = |spec: &str| check_before_run(&rows, &spec.parse().unwrap());
        let why = check("pool_active/pool_max").unwrap_err();
        assert!(why.contains("matches 2 series"), "{why}");
        assert!(why.contains("pool=\"orders\""), "{why}");
        let why = check("pool_active{pool=\"billing\"}/200").unwrap_err();
        assert!(why.contains("matches none of the 2 series"), "{why}");
        assert!(check("pool_active{pool=\"orders\"}/pool_max{pool=\"orders\"}").is_ok());
        // A gauge not exposed yet may appear under load: the run warns if it never does.
        assert!(check("threads_busy/threads_max").is_ok());
        assert!(check_before_run(&rows, &SaturationGauges::default()).is_ok());
        assert!(check_before_run(&[], &"pool_active/pool_max".parse().unwrap()).is_ok());
    }

    #[test]
    fn label_values_with_commas_and_braces_are_told_apart() {
        // As the scraper stores them (servermon's labels_text).
        let rows = [
            row(0, "a", "pool_active", "pool=\"a,b\"", 3.0),
            row(0, "a", "pool_active", "pool=\"a,c=}\"", 8.0),
        ];
        let check = |spec: &str| check_before_run(&rows, &spec.parse().unwrap());
        assert!(check("pool_active/10")
            .unwrap_err()
            .contains("matches 2 series"));
        assert!(check("pool_active{pool=\"a\"}/10").is_err());
        let gauges: SaturationGauges = "pool_active{pool=\"a,c=}\"}/10".parse().unwrap();
        assert_eq!(gauges.limit, Some(Limit::Fixed(10.0)));
        assert!(check_before_run(&rows, &gauges).is_ok());
        let workers = ServerEvidence::of(&rows, &gauges).unwrap().workers.unwrap();
        assert_eq!(workers.busy_max, 8.0);
    }
}
