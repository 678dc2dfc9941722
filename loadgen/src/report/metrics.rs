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

use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};

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
        let task = tokio::spawn(super::serve::serve(listener, move |request| {
            answer(&request, &source)
        }));
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

/// One metric family of the exposition: its `# HELP` / `# TYPE` header and its samples.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    samples: Samples,
}

/// How a family's samples are written.
enum Samples {
    /// One sample, labelled with the run only: the value now.
    Run(fn(&MetricsSource) -> u64),
    /// Samples per op, written by the function (given the family's name and the run's labels).
    PerOp(fn(&mut String, &str, &MetricsSource, &str)),
}

/// Every family, in the order of the exposition.
const FAMILIES: &[Family] = &[
    Family {
        name: "loadgen_requests_total",
        kind: "counter",
        help: "Requests finished, by op and outcome (ok, or the error class of a failure).",
        samples: Samples::PerOp(requests_by_outcome),
    },
    Family {
        name: "loadgen_in_flight",
        kind: "gauge",
        help: "Requests sent and not yet answered.",
        samples: Samples::Run(|s| s.live.in_flight.load(Ordering::Relaxed).max(0) as u64),
    },
    Family {
        name: "loadgen_workers",
        kind: "gauge",
        help: "Workers (virtual users) running.",
        samples: Samples::Run(|s| s.live.workers_alive.load(Ordering::Relaxed).max(0) as u64),
    },
    Family {
        name: "loadgen_scheduled_total",
        kind: "counter",
        help: "Open model: sends the schedule asked for.",
        samples: Samples::Run(|s| load(&s.live.scheduled)),
    },
    Family {
        name: "loadgen_dropped_total",
        kind: "counter",
        help: "Open model: sends not made because --max-in-flight requests were in flight.",
        samples: Samples::Run(|s| load(&s.live.dropped)),
    },
    Family {
        name: "loadgen_late_total",
        kind: "counter",
        help: "Open model: sends that started later than --max-lateness after their intended time.",
        samples: Samples::Run(|s| load(&s.metrics.late)),
    },
    Family {
        name: "loadgen_skipped_total",
        kind: "counter",
        help: "Requests not sent, by op, because a value they use was not extracted.",
        samples: Samples::PerOp(skipped_by_op),
    },
    Family {
        name: "loadgen_request_duration_seconds",
        kind: "histogram",
        help:
            "Latency of requests that got a response, by op (open model: from the intended send).",
        samples: Samples::PerOp(latency_histogram),
    },
];

/// The text exposition of every metric, now.
pub fn render(source: &MetricsSource) -> String {
    let mut out = String::new();
    let run = format!(
        "run_id=\"{}\",shard=\"{}\",run_group=\"{}\"",
        escape(&source.run_id),
        escape(&source.shard),
        escape(&source.run_group)
    );
    for Family {
        name,
        kind,
        help,
        samples,
    } in FAMILIES
    {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        match samples {
            Samples::Run(value) => {
                let _ = writeln!(out, "{name}{{{run}}} {}", value(source));
            }
            Samples::PerOp(write) => write(&mut out, name, source, &run),
        }
    }
    out
}

fn load(counter: &std::sync::atomic::AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Per op: `ok` always, each error class once it has happened.
fn requests_by_outcome(out: &mut String, name: &str, source: &MetricsSource, run: &str) {
    for (op, live) in source.ops.iter().zip(&source.metrics.ops) {
        for (i, count) in live.outcomes.iter().map(load).enumerate() {
            let outcome = match i {
                0 => "ok",
                _ => ErrorClass::ALL[i - 1].as_str(),
            };
            if i == 0 || count > 0 {
                let _ = writeln!(
                    out,
                    "{name}{{{run},op=\"{}\",outcome=\"{outcome}\"}} {count}",
                    escape(op)
                );
            }
        }
    }
}

fn skipped_by_op(out: &mut String, name: &str, source: &MetricsSource, run: &str) {
    for (op, skipped) in source.ops.iter().zip(source.live.skipped.iter()) {
        let _ = writeln!(
            out,
            "{name}{{{run},op=\"{}\"}} {}",
            escape(op),
            load(skipped)
        );
    }
}

/// Per op: the cumulative buckets, the sum in seconds and the count.
fn latency_histogram(out: &mut String, name: &str, source: &MetricsSource, run: &str) {
    for (op, live) in source.ops.iter().zip(&source.metrics.ops) {
        let labels = format!("{run},op=\"{}\"", escape(op));
        let mut cumulative = 0;
        for (i, count) in live.buckets.iter().map(load).enumerate() {
            cumulative += count;
            let le = BUCKET_BOUNDS_S
                .get(i)
                .map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        let sum_s = load(&live.latency_sum_ns) as f64 / 1e9;
        let _ = writeln!(
            out,
            "{name}_sum{{{labels}}} {sum_s}\n{name}_count{{{labels}}} {cumulative}"
        );
    }
}
