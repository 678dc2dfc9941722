//! Server-side metrics: the target's own Prometheus endpoints (`--server-metrics URL`, e.g.
//! node_exporter's `:9100/metrics` on the target host, or the service's `/metrics`), scraped
//! once per interval during the run — the server's evidence beside the client's.
//!
//! The scraper runs on its own OS thread with its own single-threaded async runtime, never
//! on the runtime that sends requests, so scraping takes nothing from the request path but a
//! little CPU. Each source is scraped every interval on its own clock, with its own timeout, so
//! a slow source delays no other; once the run ends, each is scraped once more unless it just
//! was, so its counters cover the whole run. A source that refuses, errs, answers a non-2xx
//! status, sends a body that is not the text exposition, or is slower than the timeout gets
//! one row saying so and is tried again next interval: a scrape never stops or delays the run.
//! The text exposition is parsed by the `prometheus-parse` crate; each sample becomes one row
//! of `server-metrics.parquet` (time, source, metric, labels, value), written as a row group
//! at least every [`ROW_GROUP_EVERY`] into a hidden `.partial` file renamed when
//! [`ServerMon::finish`] closes it. The columns are in `contract/files.json`
//! (`files.server_metrics`); `file` owns the schema.
//!
//! What it is not: a judge. It records what the server said; the verdict reads the file.

mod file;

use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::clock::Anchor;
use crate::record::parquet_file::{FileError, ParquetFile};
pub use file::schema;
use file::{Columns, Sample};

/// A row group is written at least this often, so a long run never holds its samples in
/// memory and the `.partial` file shows progress.
pub const ROW_GROUP_EVERY: Duration = Duration::from_secs(10);

/// The version in `loadgen.schema_version`; bump it when a column changes meaning.
pub const SCHEMA_VERSION: &str = "1";

/// The longest the scrape at the end of a run may take (less when `--server-metrics-timeout`
/// is shorter).
pub const LAST_SCRAPE_TIMEOUT: Duration = Duration::from_millis(500);

/// The interval between scrapes in a run.
pub const INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum ServerMonError {
    #[error("cannot start the server-metrics scraper: {0}")]
    Start(String),
    #[error(transparent)]
    File(#[from] FileError),
    #[error("the server-metrics scraper thread panicked")]
    Panicked,
}

/// What the scraper needs, once, before the first scrape.
#[derive(Debug, Clone)]
pub struct ServerMonConfig {
    /// Where the file ends up, normally `DIR/server-metrics.parquet`.
    pub path: PathBuf,
    /// The URLs to scrape (already checked to be http:// or https://).
    pub sources: Vec<String>,
    pub interval: Duration,
    /// The longest one scrape may take, connect to last byte.
    pub timeout: Duration,
    /// The run's time base, so `t_ns` lines up with the request records' `start_ns`.
    pub anchor: Anchor,
    /// Every row written, for the run's verdict at the end: given by the caller, so a live
    /// page that reads them as they come can hold them before the scraper starts.
    pub rows: RowsSoFar,
}

/// What the scrapes of one source came to.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SourceSummary {
    pub source: String,
    pub scrapes: u64,
    pub failures: u64,
    pub samples: u64,
}

/// One row of server-metrics.parquet, as the scraper wrote it: a sample of a metric, or a
/// scrape that failed (`error`). Handed on in memory to the run's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct ScrapeRow {
    pub t_ns: i64,
    pub source: String,
    pub metric: Option<String>,
    pub labels: Option<String>,
    pub value: Option<f64>,
    pub error: Option<String>,
}

/// What the scraper did: each source's counts, and every row it wrote.
#[derive(Debug, Clone, Default)]
pub struct Scrapes {
    pub sources: Vec<SourceSummary>,
    pub rows: Vec<ScrapeRow>,
}

/// The rows scraped so far, shared with a live page (`--dashboard`) that reads them once a
/// second: the scraper adds each scrape's rows under the lock, once per scrape.
pub type RowsSoFar = std::sync::Arc<std::sync::Mutex<Vec<ScrapeRow>>>;

/// A running scraper. Dropping it without [`ServerMon::finish`] stops it at its next tick.
pub struct ServerMon {
    stop: tokio::sync::oneshot::Sender<()>,
    thread: JoinHandle<Result<Scrapes, ServerMonError>>,
}

impl ServerMon {
    /// Takes one last scrape (so counters cover the whole run), closes the file and returns
    /// each source's counts and the rows it wrote.
    pub fn finish(self) -> Result<Scrapes, ServerMonError> {
        let _ = self.stop.send(());
        self.thread.join().map_err(|_| ServerMonError::Panicked)?
    }
}

/// Creates the file and starts scraping. Fails, with nothing left on disk, when the file
/// cannot be created or the thread cannot start.
pub fn start(config: ServerMonConfig) -> Result<ServerMon, ServerMonError> {
    // reqwest's TLS takes the process's rustls provider (the one the rest of loadgen uses).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(config.timeout)
        .connect_timeout(config.timeout)
        .no_proxy()
        .build()
        .map_err(|e| ServerMonError::Start(e.to_string()))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ServerMonError::Start(e.to_string()))?;
    let file = file::create(
        &config.path,
        &config.anchor,
        config.interval,
        config.timeout,
    )?;
    let scraper = Scraper {
        summaries: config
            .sources
            .iter()
            .map(|source| SourceSummary {
                source: source.clone(),
                scrapes: 0,
                failures: 0,
                samples: 0,
            })
            .collect(),
        config,
        client,
        file,
        columns: Columns::new(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let thread = crate::background::spawn("loadgen-servermon", move || {
        runtime.block_on(scraper.run(stopped))
    })
    .map_err(|e| ServerMonError::Start(e.to_string()))?;
    Ok(ServerMon { stop, thread })
}

/// One scrape of every source, before the run (each within `timeout`), as rows — a failed
/// scrape is a row with its error, as in the run. Lets the run hold `--server-saturation`'s
/// gauges to what the server exposes before any load is sent.
pub async fn scrape_once(sources: &[String], timeout: Duration) -> Vec<ScrapeRow> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let Ok(client) = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .no_proxy()
        .build()
    else {
        return Vec::new();
    };
    // Every source at once; their rows in the order given.
    let tasks: Vec<_> = (sources.iter())
        .map(|source| tokio::spawn(scrape(client.get(source))))
        .collect();
    let mut rows = Vec::new();
    for (source, task) in sources.iter().zip(tasks) {
        let body = match task.await {
            Ok(scraped) => scraped.body,
            Err(panicked) => Err(panicked.to_string()),
        };
        match body.and_then(|body| parse(&body)) {
            Ok(samples) => {
                rows.extend(
                    samples
                        .into_iter()
                        .map(|(metric, labels, value)| ScrapeRow {
                            t_ns: 0,
                            source: source.clone(),
                            metric: Some(metric),
                            labels: Some(labels),
                            value: Some(value),
                            error: None,
                        }),
                )
            }
            Err(error) => rows.push(ScrapeRow {
                t_ns: 0,
                source: source.clone(),
                metric: None,
                labels: None,
                value: None,
                error: Some(error),
            }),
        }
    }
    rows
}

/// The scraper thread's state.
struct Scraper {
    config: ServerMonConfig,
    client: reqwest::Client,
    file: ParquetFile,
    columns: Columns,
    summaries: Vec<SourceSummary>,
}

/// What one scrape of one source returned.
struct Scraped {
    started: Instant,
    took: Duration,
    body: Result<String, String>,
}

impl Scraper {
    async fn run(
        mut self,
        stopped: tokio::sync::oneshot::Receiver<()>,
    ) -> Result<Scrapes, ServerMonError> {
        match self.scrape_until_stopped(stopped).await {
            Ok(()) => {
                self.file.close()?;
                Ok(Scrapes {
                    sources: self.summaries,
                    rows: std::mem::take(&mut *self.config.rows.lock().expect("scrape rows")),
                })
            }
            Err(e) => {
                // Nothing half-written is left behind.
                self.file.discard();
                Err(e)
            }
        }
    }

    /// Records every source's scrapes until stopped, each source on its own clock
    /// ([`scrape_source`]), so a slow source costs no other its scrapes; a row group is written
    /// at least every [`ROW_GROUP_EVERY`]. Once stopped, it waits for each source's scrape at
    /// the end, which takes at most [`LAST_SCRAPE_TIMEOUT`].
    async fn scrape_until_stopped(
        &mut self,
        mut stopped: tokio::sync::oneshot::Receiver<()>,
    ) -> Result<(), ServerMonError> {
        let (scraped_tx, mut scraped) = tokio::sync::mpsc::unbounded_channel();
        let (halt, halted) = tokio::sync::watch::channel(false);
        for (i, source) in self.config.sources.iter().enumerate() {
            let clock = SourceClock {
                request: self.client.get(source),
                interval: self.config.interval,
                timeout: self.config.timeout,
            };
            let (scraped_tx, halted) = (scraped_tx.clone(), halted.clone());
            tokio::spawn(async move {
                scrape_source(clock, halted, |one| {
                    let _ = scraped_tx.send((i, one));
                })
                .await
            });
        }
        drop(scraped_tx);
        let mut row_group_started = Instant::now();
        let mut halting = false;
        // Every source's loop ends after its scrape at the end, closing the channel.
        loop {
            let next = tokio::select! {
                next = scraped.recv() => next,
                _ = &mut stopped, if !halting => {
                    let _ = halt.send(true);
                    halting = true;
                    continue;
                }
            };
            let Some((i, one)) = next else { break };
            self.record(i, one);
            if self.columns.rows() > 0 && row_group_started.elapsed() >= ROW_GROUP_EVERY {
                self.write_row_group()?;
                row_group_started = Instant::now();
            }
        }
        if self.columns.rows() > 0 {
            self.write_row_group()?;
        }
        Ok(())
    }

    /// Writes the rows so far as a row group and pushes it to the disk.
    fn write_row_group(&mut self) -> Result<(), ServerMonError> {
        self.file.write(&self.columns.take())?;
        self.file.sync()?;
        Ok(())
    }

    fn record(&mut self, i: usize, scraped: Scraped) {
        let t_ns = self.config.anchor.offset_ns(scraped.started);
        let took_ns = crate::clock::nanos(scraped.took);
        let summary = &mut self.summaries[i];
        summary.scrapes += 1;
        let parsed = scraped.body.and_then(|body| parse(&body));
        let mut rows = Vec::new();
        match parsed {
            Ok(samples) => {
                summary.samples += samples.len() as u64;
                for (metric, labels, value) in &samples {
                    let sample = Sample {
                        metric,
                        labels,
                        value: *value,
                    };
                    self.columns.sample(t_ns, took_ns, &summary.source, &sample);
                    rows.push(ScrapeRow {
                        t_ns,
                        source: summary.source.clone(),
                        metric: Some(metric.to_string()),
                        labels: Some(labels.to_string()),
                        value: Some(*value),
                        error: None,
                    });
                }
            }
            Err(error) => {
                summary.failures += 1;
                self.columns.failure(t_ns, took_ns, &summary.source, &error);
                rows.push(ScrapeRow {
                    t_ns,
                    source: summary.source.clone(),
                    metric: None,
                    labels: None,
                    value: None,
                    error: Some(error),
                });
            }
        }
        self.config.rows.lock().expect("scrape rows").extend(rows);
    }
}

/// One source's request and timing.
struct SourceClock {
    request: reqwest::RequestBuilder,
    interval: Duration,
    timeout: Duration,
}

/// Scrapes one source every interval until `halted`, handing each scrape to `recorded`. A
/// scrape still in progress then is abandoned and, unless the last one recorded began within a
/// quarter of an interval, the source is scraped once more (within [`LAST_SCRAPE_TIMEOUT`]) so
/// its counters cover the whole run — a slow first scrape (node_exporter's takes ~0.9 s on a
/// loaded host) must not leave a short run with one reading of a counter, which is no rate.
async fn scrape_source(
    clock: SourceClock,
    mut halted: tokio::sync::watch::Receiver<bool>,
    mut recorded: impl FnMut(Scraped),
) {
    let request = |timeout: Duration| {
        let request = clock
            .request
            .try_clone()
            .expect("a GET without a body clones");
        request.timeout(timeout)
    };
    let mut ticks = tokio::time::interval(clock.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_started: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = halted.changed() => break,
        }
        tokio::select! {
            one = scrape(request(clock.timeout)) => {
                last_started = Some(one.started);
                recorded(one);
            }
            _ = halted.changed() => break,
        }
    }
    if last_started.is_none_or(|t| t.elapsed() >= clock.interval / 4) {
        recorded(scrape(request(clock.timeout.min(LAST_SCRAPE_TIMEOUT))).await);
    }
}

/// The most of one scrape's body kept: node_exporter's exposition is a few hundred KB, so an
/// endpoint sending more (or a body that never ends) is refused before it costs the client
/// memory (issue 36's hostile endpoints: 200 MB took 244 MB of RSS before this bound).
const MAX_BODY_BYTES: usize = 16 << 20;

/// One GET within the client's timeout: the body of a 2xx answer (at most
/// [`MAX_BODY_BYTES`]), or why there is none.
async fn scrape(request: reqwest::RequestBuilder) -> Scraped {
    let started = Instant::now();
    let body = async {
        let mut response = request.send().await.map_err(describe)?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("status {}", status.as_u16()));
        }
        let too_big = || format!("body over {} MiB", MAX_BODY_BYTES >> 20);
        if response
            .content_length()
            .is_some_and(|n| n > MAX_BODY_BYTES as u64)
        {
            return Err(too_big());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(describe)? {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(too_big());
            }
            body.extend_from_slice(&chunk);
        }
        String::from_utf8(body).map_err(|_| "body is not UTF-8 text".to_string())
    }
    .await;
    Scraped {
        started,
        took: started.elapsed(),
        body,
    }
}

/// A failed scrape in a few words: `timeout`, `connect: …` or the error's own text.
fn describe(error: reqwest::Error) -> String {
    if error.is_timeout() {
        "timeout".to_string()
    } else if error.is_connect() {
        format!("connect: {}", root_cause(&error))
    } else {
        root_cause(&error)
    }
}

fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// The text exposition as (metric, labels, value) rows: histogram buckets as
/// `NAME_bucket{le=…}`, summary quantiles as `NAME{quantile=…}`; labels as `name="value"`
/// pairs sorted by name. A body with no sample at all is not an exposition.
fn parse(body: &str) -> Result<Vec<(String, String, f64)>, String> {
    // Lines whose label values hold `,`, `=`, `{`, `}`, `"` or `\\` are read here:
    // prometheus-parse splits labels at every `,` and `=`, which would give two series
    // (`pool="a,b"`, `pool="a,c"`) one label set, and mix their values.
    let mut rows = Vec::new();
    let mut plain = Vec::new();
    for line in body.lines() {
        match odd_sample(line) {
            Some(row) => rows.push(row),
            None => plain.push(Ok(line.to_string())),
        }
    }
    let scrape =
        prometheus_parse::Scrape::parse(plain.into_iter()).map_err(|e| format!("parse: {e}"))?;
    if scrape.samples.is_empty() && rows.is_empty() {
        return Err("parse: no samples in the body".to_string());
    }
    rows.reserve(scrape.samples.len());
    for sample in scrape.samples {
        let labels = sample.labels.to_string();
        let with = |name: &str, value: f64| {
            let extra = match value.is_infinite() {
                true => format!("{name}=\"{}Inf\"", if value > 0.0 { "+" } else { "-" }),
                false => format!("{name}=\"{value}\""),
            };
            match labels.is_empty() {
                true => extra,
                false => format!("{labels},{extra}"),
            }
        };
        match sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => rows.push((sample.metric, labels, v)),
            prometheus_parse::Value::Histogram(buckets) => {
                let name = format!("{}_bucket", sample.metric);
                for b in buckets {
                    rows.push((name.clone(), with("le", b.less_than), b.count));
                }
            }
            prometheus_parse::Value::Summary(quantiles) => {
                for q in quantiles {
                    rows.push((sample.metric.clone(), with("quantile", q.quantile), q.count));
                }
            }
        }
    }
    Ok(rows)
}

/// A sample line (`name{k="v",…} value`) with a label value prometheus-parse would split
/// wrongly, read here as (name, labels as [`labels_text`] writes them, value); None for any
/// other line (plain samples, comments, lines that are not samples).
fn odd_sample(line: &str) -> Option<(String, String, f64)> {
    let line = line.trim();
    let (name, rest) = line.split_once('{')?;
    if line.starts_with('#') || name.is_empty() {
        return None;
    }
    // The closing brace: the first `}` outside a quoted value.
    let (mut quoted, mut escaped, mut close) = (false, false, None);
    for (i, c) in rest.char_indices() {
        match (escaped, quoted, c) {
            (true, _, _) => escaped = false,
            (false, true, '\\') => escaped = true,
            (false, _, '"') => quoted = !quoted,
            (false, false, '}') => {
                close = Some(i);
                break;
            }
            _ => {}
        }
    }
    let close = close?;
    let pairs = label_pairs(&rest[..close])?;
    let odd = |v: &String| v.contains([',', '=', '{', '}', '"', '\\', '\n']);
    if !pairs.iter().any(|(_, v)| odd(v)) {
        return None;
    }
    let value = rest[close + 1..]
        .split_whitespace()
        .next()?
        .parse::<f64>()
        .ok()?;
    Some((name.trim().to_string(), labels_text(pairs), value))
}

/// `k="v",k2="v2"` (a series' labels as stored, or a selector's) as pairs, the values
/// unescaped (`\\`, `\"`, `\n`); None when the text is not of that form.
pub fn label_pairs(text: &str) -> Option<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let (key, after) = rest.split_once('=')?;
        let body = after.trim_start().strip_prefix('"')?;
        let (mut value, mut escaped, mut end) = (String::new(), false, None);
        for (i, c) in body.char_indices() {
            match (escaped, c) {
                (true, c) => {
                    value.push(if c == 'n' { '\n' } else { c });
                    escaped = false;
                }
                (false, '\\') => escaped = true,
                (false, '"') => {
                    end = Some(i);
                    break;
                }
                (false, c) => value.push(c),
            }
        }
        let key = key.trim();
        if key.is_empty() {
            return None;
        }
        pairs.push((key.to_string(), value));
        rest = body[end? + 1..].trim_start();
        rest = match rest.strip_prefix(',') {
            Some(more) => more.trim_start(),
            None if rest.is_empty() => rest,
            None => return None,
        };
    }
    Some(pairs)
}

/// Labels as server-metrics.parquet holds them: sorted by name, `k="v"` joined by `,` (as
/// prometheus-parse writes plain ones), with `\\`, `"` and newlines in a value escaped.
fn labels_text(mut pairs: Vec<(String, String)>) -> String {
    pairs.sort();
    let escape = |v: &str| {
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::{label_pairs, parse};

    #[test]
    fn label_values_with_commas_equals_and_braces_stay_apart() {
        let body = "# TYPE pool_active gauge\n\
                    pool_active{pool=\"a,b\"} 3\n\
                    pool_active{pool=\"a,c\",zone=\"x=1}\"} 8\n\
                    pool_active{pool=\"q\\\"uote\"} 1\n\
                    up 1\n";
        let mut rows = parse(body).unwrap();
        rows.sort_by(|a, b| a.1.cmp(&b.1));
        let labels: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
        assert_eq!(
            labels,
            [
                "",
                "pool=\"a,b\"",
                "pool=\"a,c\",zone=\"x=1}\"",
                "pool=\"q\\\"uote\""
            ]
        );
        assert_eq!(rows[2].2, 8.0);
        // Read back as pairs, the values whole again.
        assert_eq!(
            label_pairs(&rows[2].1).unwrap(),
            [
                ("pool".into(), "a,c".into()),
                ("zone".into(), "x=1}".into())
            ]
        );
        assert_eq!(label_pairs(&rows[3].1).unwrap()[0].1, "q\"uote");
        assert_eq!(label_pairs("a=\"1\",b"), None);
        // Only odd lines are read here: a body of them alone is samples too.
        assert_eq!(parse("x{k=\"1,2\"} 5\n").unwrap().len(), 1);
    }

    #[test]
    fn an_exposition_becomes_rows_with_sorted_labels() {
        let body = "# HELP node_cpu_seconds_total Seconds.\n\
                    # TYPE node_cpu_seconds_total counter\n\
                    node_cpu_seconds_total{mode=\"idle\",cpu=\"0\"} 12.5\n\
                    # TYPE up gauge\n\
                    up 1\n\
                    # TYPE lat histogram\n\
                    lat_bucket{le=\"0.1\"} 3\n\
                    lat_bucket{le=\"+Inf\"} 4\n\
                    lat_sum 0.2\n\
                    lat_count 4\n";
        let mut rows = parse(body).unwrap();
        rows.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let find = |metric: &str, labels: &str| {
            rows.iter()
                .find(|r| r.0 == metric && r.1 == labels)
                .map(|r| r.2)
        };
        assert_eq!(
            find("node_cpu_seconds_total", "cpu=\"0\",mode=\"idle\""),
            Some(12.5)
        );
        assert_eq!(find("up", ""), Some(1.0));
        assert_eq!(find("lat_bucket", "le=\"0.1\""), Some(3.0));
        assert_eq!(find("lat_bucket", "le=\"+Inf\""), Some(4.0));
    }

    #[test]
    fn a_body_without_samples_is_refused() {
        assert!(parse("<html>not metrics</html>\n").is_err());
        assert!(parse("").is_err());
    }
}
