//! `--metrics-addr`: the run's live numbers as a Prometheus scrape target, so Grafana can watch
//! a long run, or the shards of one run side by side (every series carries `run_id`, `shard`
//! and `run_group`, which the shards of one run share).
//!
//! `GET /metrics` answers in the Prometheus text format (0.0.4): requests by op and outcome,
//! in flight, workers, scheduled / dropped / late sends (open model), and a latency histogram
//! per op (fixed buckets, 1 ms to 30 s; open model: from the intended send time, as the
//! summary). The listener is bound before the run starts, so a taken port is bad input (exit
//! 2), and served by hyper until the run ends and then for `--metrics-linger`, so the last
//! scrape sees the final counts. Live numbers are for watching; the results are the rows.

use std::convert::Infallible;
use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

use crate::record::ErrorClass;
use crate::stats::live::{LiveMetrics, BUCKET_BOUNDS_S};
use crate::stats::LiveCounters;
use crate::stop::StopSignal;

/// What the endpoint reads: the counters every worker bumps, and the run's labels.
#[derive(Debug)]
pub struct MetricsSource {
    pub live: Arc<LiveCounters>,
    pub metrics: Arc<LiveMetrics>,
    /// Op labels, by index.
    pub ops: Vec<String>,
    pub run_id: String,
    pub shard: String,
    /// What the shards of one run share (`--run-group`, else the `--start-at` instant).
    pub run_group: String,
}

/// A bound listener, not yet serving (bound early so a taken port stops the run before it
/// writes anything).
#[derive(Debug)]
pub struct MetricsListener {
    listener: std::net::TcpListener,
}

impl MetricsListener {
    pub fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(MetricsListener { listener })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `source` until the returned server is dropped.
    pub fn serve(self, source: MetricsSource) -> std::io::Result<MetricsServer> {
        let listener = tokio::net::TcpListener::from_std(self.listener)?;
        let source = Arc::new(source);
        let url = format!("http://{}/metrics", listener.local_addr()?);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let source = source.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let source = source.clone();
                        async move { Ok::<_, Infallible>(answer(&request, &source)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(MetricsServer { task, url })
    }
}

/// The running endpoint; dropping it stops it.
#[derive(Debug)]
pub struct MetricsServer {
    task: tokio::task::JoinHandle<()>,
    url: String,
}

impl MetricsServer {
    /// The endpoint once the run is over, to be kept up for `linger` (see [`FinalMetrics`]).
    pub fn after_run(self, linger: Duration) -> FinalMetrics {
        FinalMetrics {
            server: Arc::new(self),
            linger,
        }
    }
}

/// The endpoint after the run, serving the final counts. Prometheus pulls: a run that ended
/// between two scrapes would leave its last interval unseen, so the endpoint stays up for
/// `--metrics-linger` (three scrapes at 5 s by default) after the summary is printed.
#[derive(Debug, Clone)]
pub struct FinalMetrics {
    server: Arc<MetricsServer>,
    linger: Duration,
}

impl FinalMetrics {
    /// Serves the final counts for the linger period, or until a signal (Ctrl-C skips it).
    pub async fn linger(self, stop: &StopSignal) {
        if self.linger.is_zero() {
            return;
        }
        eprintln!(
            "serving the final metrics at {} for {} (Ctrl-C skips)",
            self.server.url,
            humantime::format_duration(self.linger)
        );
        tokio::select! {
            () = tokio::time::sleep(self.linger) => {}
            _ = stop.next_signal() => {}
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn answer<B>(request: &Request<B>, source: &MetricsSource) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match request.uri().path() {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            render(source),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "loadgen serves its metrics at /metrics\n".to_string(),
        ),
    };
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .body(Full::new(Bytes::from(body)))
        .expect("a valid response")
}

/// A label value with `\`, `"` and newlines escaped, as the text format requires.
fn escape(value: &str) -> String {
    value
        .replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The text exposition of every metric, now.
pub fn render(source: &MetricsSource) -> String {
    let mut out = String::new();
    let run = format!(
        "run_id=\"{}\",shard=\"{}\",run_group=\"{}\"",
        escape(&source.run_id),
        escape(&source.shard),
        escape(&source.run_group)
    );
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    family(
        &mut out,
        "loadgen_requests_total",
        "counter",
        "Requests finished, by op and outcome (ok, or the error class of a failure).",
    );
    for (op, live) in source.ops.iter().zip(&source.metrics.ops) {
        for (i, count) in live.outcomes.iter().map(load).enumerate() {
            let outcome = match i {
                0 => "ok",
                _ => ErrorClass::ALL[i - 1].as_str(),
            };
            if i == 0 || count > 0 {
                let _ = writeln!(
                    out,
                    "loadgen_requests_total{{{run},op=\"{}\",outcome=\"{outcome}\"}} {count}",
                    escape(op)
                );
            }
        }
    }
    let gauges = [
        (
            "loadgen_in_flight",
            "gauge",
            "Requests sent and not yet answered.",
            source.live.in_flight.load(Ordering::Relaxed).max(0) as u64,
        ),
        (
            "loadgen_workers",
            "gauge",
            "Workers (virtual users) running.",
            source.live.workers_alive.load(Ordering::Relaxed).max(0) as u64,
        ),
        (
            "loadgen_scheduled_total",
            "counter",
            "Open model: sends the schedule asked for.",
            load(&source.live.scheduled),
        ),
        (
            "loadgen_dropped_total",
            "counter",
            "Open model: sends not made because --max-in-flight requests were in flight.",
            load(&source.live.dropped),
        ),
        (
            "loadgen_late_total",
            "counter",
            "Open model: sends that started later than --max-lateness after their intended time.",
            load(&source.metrics.late),
        ),
    ];
    for (name, kind, help, value) in gauges {
        family(&mut out, name, kind, help);
        let _ = writeln!(out, "{name}{{{run}}} {value}");
    }
    family(
        &mut out,
        "loadgen_skipped_total",
        "counter",
        "Requests not sent, by op, because a value they use was not extracted.",
    );
    for (op, skipped) in source.ops.iter().zip(source.live.skipped.iter()) {
        let _ = writeln!(
            out,
            "loadgen_skipped_total{{{run},op=\"{}\"}} {}",
            escape(op),
            load(skipped)
        );
    }
    family(
        &mut out,
        "loadgen_request_duration_seconds",
        "histogram",
        "Latency of requests that got a response, by op (open model: from the intended send).",
    );
    for (op, live) in source.ops.iter().zip(&source.metrics.ops) {
        let labels = format!("{run},op=\"{}\"", escape(op));
        let mut cumulative = 0;
        for (i, count) in live.buckets.iter().map(load).enumerate() {
            cumulative += count;
            let le = BUCKET_BOUNDS_S
                .get(i)
                .map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(
                out,
                "loadgen_request_duration_seconds_bucket{{{labels},le=\"{le}\"}} {cumulative}"
            );
        }
        let sum_s = load(&live.latency_sum_ns) as f64 / 1e9;
        let _ = writeln!(
            out,
            "loadgen_request_duration_seconds_sum{{{labels}}} {sum_s}\n\
             loadgen_request_duration_seconds_count{{{labels}}} {cumulative}"
        );
    }
    out
}
