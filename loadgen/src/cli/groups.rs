//! The flag groups each command flattens: what to send and how to connect, the client model,
//! the open model, thresholds, output, evidence and shards — each group one `--help` heading.
#![allow(rustdoc::broken_intra_doc_links, rustdoc::invalid_html_tags)]

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::parse::{
    parse_byte_size, parse_connect_rate, parse_rate, parse_sample_fraction, parse_shard,
    parse_source_addrs, parse_workers, SourceAddrs,
};
use super::RedirectsArg;
use crate::model::open::Arrivals;
use crate::shard::Shard;
use crate::units::{parse_duration, parse_link_capacity};

/// What to send and how to connect: the scenario or URL, the request, TLS, the protocol and the limits of one request.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Target and transport")]
pub struct TargetArgs {
    /// Scenario file (TOML) describing requests, payloads and the client model. A URL here
    /// (http://…) is taken as --url, as wrk and oha take it.
    #[arg(value_name = "SCENARIO.toml", conflicts_with = "scenario")]
    pub file: Option<PathBuf>,

    /// Run a built-in scenario (`loadgen scenarios` lists them).
    #[arg(short = 's', long, value_name = "NAME")]
    pub scenario: Option<String>,

    /// Override a scenario field, e.g. --set model.groups=30 (repeatable; values are TOML).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub sets: Vec<String>,

    /// Target URL (http://host[:port]/path?query); with a scenario, its base URL. Without a
    /// URL the embedded reference server is started and tested.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,

    /// HTTP method [default: GET].
    #[arg(short = 'm', long, value_name = "METHOD")]
    pub method: Option<String>,

    /// Extra request header, 'Name: value' (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,

    /// Send the requests of a vegeta targets file instead of one --url: paragraphs of
    /// `METHOD URL`, then `Header: value` lines and an optional `@body-file` line, every URL
    /// on one origin. Each iteration sends every target once, in file order. `-` reads them
    /// from stdin.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["file", "scenario", "url", "method", "body"])]
    pub targets: Option<PathBuf>,

    /// With --targets: how many times each target is sent per iteration, in file order, e.g.
    /// 1,2,1 sends the second target twice as often as the others.
    #[arg(
        long,
        value_name = "W,W,...",
        value_delimiter = ',',
        requires = "targets"
    )]
    pub targets_weights: Vec<u32>,

    /// Request body: a literal string, or @FILE to send a file's contents.
    #[arg(short = 'b', long, value_name = "BODY")]
    pub body: Option<String>,

    /// Trust the CA certificate(s) in this PEM file for https:// targets, instead of the
    /// system's roots (for servers with a private or self-signed certificate).
    #[arg(long, value_name = "FILE", conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,

    /// Do not verify the server's TLS certificate (encrypted but not authenticated; the
    /// summary and run.json say so).
    #[arg(short = 'k', long)]
    pub insecure: bool,

    /// Speak HTTP/2 (ALPN h2 over TLS, prior knowledge over plain TCP) instead of HTTP/1.1.
    /// -c then counts connections, each carrying --streams-per-connection workers.
    #[arg(long)]
    pub http2: bool,

    /// Speak HTTP/3 over QUIC (UDP, TLS 1.3 with ALPN h3; https:// URLs only) instead of
    /// HTTP/1.1. -c then counts connections, each carrying --streams-per-connection workers.
    #[arg(long, conflicts_with_all = ["http2", "proto"])]
    pub http3: bool,

    /// HTTP/2 and HTTP/3: concurrent streams (workers) multiplexed on each connection
    /// [default: 1].
    #[arg(long, value_name = "N")]
    pub streams_per_connection: Option<u32>,

    /// Call the gRPC method PACKAGE.SERVICE/METHOD of --proto's file (unary), with --body as
    /// the request message in JSON and -H as metadata; over HTTP/2 like --http2.
    #[arg(
        long,
        value_name = "METHOD",
        requires_all = ["proto", "url"],
        conflicts_with_all = ["file", "scenario", "targets", "method"]
    )]
    pub grpc: Option<String>,

    /// The .proto file that describes the gRPC services called, read at run time (no code
    /// generation). With a scenario, its requests to /PACKAGE.SERVICE/METHOD are gRPC calls.
    #[arg(long, value_name = "FILE")]
    pub proto: Option<PathBuf>,

    /// A directory --proto's imports are looked up in (repeatable; the file's own directory
    /// is searched last).
    #[arg(long, value_name = "DIR", requires = "proto")]
    pub import_path: Vec<PathBuf>,

    /// Open a new connection for every request (HTTP/1.1 `Connection: close`), so connect
    /// time shows in every row.
    #[arg(long, conflicts_with_all = ["http2", "http3"])]
    pub no_keepalive: bool,

    /// Follow redirects (at most 10): to the same scheme, host and port only, or with
    /// `=any` to anywhere. Without it, a 3xx is the response.
    #[arg(
        long,
        value_name = "WHERE",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "same-origin",
        value_enum
    )]
    pub follow_redirects: Option<RedirectsArg>,

    /// Limit for one whole request (connect, send, headers, body); slower ones are `timeout`
    /// rows [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub timeout: Option<Duration>,

    /// Limit for opening a connection; slower ones are `connect_timeout` rows [default: 5s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub connect_timeout: Option<Duration>,

    /// Workers open their connections at most this many a second (N/s), so that many
    /// connections do not reach the server at once; the pacing is before each worker's
    /// first request, in no row [default: 10000/s].
    #[arg(long, value_name = "N/s", value_parser = parse_connect_rate)]
    pub connect_rate: Option<u32>,

    /// Local addresses HTTP/1.1 workers connect from, in turn: a list (127.0.0.1,127.0.0.2)
    /// or a range (127.0.0.1-127.0.0.8). Each address has its own ephemeral ports to the
    /// target, so N addresses hold N times the connections one can; on loopback every
    /// 127.x.y.z is local. Without it, on loopback, loadgen spreads over 127.0.0.x as needed.
    #[arg(long, value_name = "ADDRS", value_parser = parse_source_addrs)]
    pub source_addr: Option<SourceAddrs>,

    /// After the run stops (duration over, Ctrl-C), how long requests in flight may finish
    /// before they are cut off and recorded as `cancelled`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s")]
    pub grace: Duration,

    /// The most of a response body kept per worker for JSON, regex and body checks and
    /// extractions (a longer body is cut there; size and status checks keep nothing).
    #[arg(long, value_name = "SIZE", value_parser = parse_byte_size, default_value = "1MiB", hide_short_help = true)]
    pub max_body_kept: usize,

    /// Capacity of the network link to the target, recorded in run.json for the analysis:
    /// bits per second with an SI suffix (200mbit, 1gbit, 200e6) or bytes (25MB/s). Without
    /// it, the speed the kernel reports for the target's interface, when it reports one.
    #[arg(long, value_name = "RATE", value_parser = parse_link_capacity)]
    pub link_capacity: Option<u64>,
}

/// When workers send: the closed model's workers and length, or the open model's rate (see config/model_flags.rs for what each does to a scenario's model).
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Client model")]
pub struct ModelArgs {
    /// Concurrent workers (virtual users), each with its own keep-alive connection [default: 50].
    /// Closed model only: with a scenario of another kind, add --set model.kind=closed.
    #[arg(short = 'c', long = "connections", value_name = "N", allow_negative_numbers = true, value_parser = parse_workers)]
    pub connections: Option<u32>,

    /// How long to send requests, e.g. 30s, 2m, 1500ms [default: 10s unless -n is given]: the
    /// closed and open models' duration. With a scenario of another model (thread-groups,
    /// producer-buffer, phased) it caps the run: sending stops after DURATION, exit reason
    /// `duration elapsed`.
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "requests")]
    pub duration: Option<Duration>,

    /// Total number of requests to send, shared by all workers, rounded up to whole iterations
    /// of the sequence: the closed model's count, a cap on thread-groups, producer-buffer and
    /// phased (not with the open model, which sends rate × duration).
    #[arg(short = 'n', long = "requests", value_name = "N")]
    pub requests: Option<u64>,

    /// Open model: this many arrivals per second, independent of responses (for -d). With a
    /// scenario of any kind, runs its requests under the open model (one arrival = one
    /// iteration of its sequence).
    #[arg(long, value_name = "REQ/S", conflicts_with = "requests", allow_negative_numbers = true, value_parser = parse_rate)]
    pub rate: Option<f64>,

    /// Open model: a ramp of DURATION:RATE stages, linear between targets, e.g. 30s:100,60s:1000
    /// (starting from --rate, or 0).
    #[arg(long, value_name = "STAGES", conflicts_with_all = ["requests", "duration"])]
    pub stages: Option<String>,

    /// Pause each worker this long between its requests (a user's think time) [default: 0s];
    /// every model but open.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub think_time: Option<Duration>,

    /// Label the run's first DURATION `warmup`: it sends as usual (part of -d), and its rows
    /// are recorded but left out of the summary, thresholds, verdict, report and compare
    /// [default: 0s]. Closed and open models (a sweep: each level's).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub warmup: Option<Duration>,

    /// Closed model: a ramp of workers, DURATION:WORKERS stages, linear between targets from
    /// 0, e.g. 30s:10,1m:50,30s:0 (as k6's ramping-vus); a worker over the target leaves at
    /// the end of its request. Each stage is a phase of the rows (stage1, stage2, …).
    #[arg(long, value_name = "STAGES", conflicts_with_all = ["connections", "rate", "stages", "requests", "duration"])]
    pub ramp: Option<String>,
}

/// How the open model paces its sends (`loadgen run --rate`, `sweep --rate-levels`, and each level of `capacity`).
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Open model")]
pub struct OpenArgs {
    /// Open model only (--rate, --stages or an open scenario): how arrivals are spaced
    /// [default: uniform].
    #[arg(long, value_enum)]
    pub arrivals: Option<Arrivals>,

    /// Open model only: most requests in flight at once (one connection each); a send due when
    /// all are busy is dropped and counted [default: 1000].
    #[arg(long, value_name = "N")]
    pub max_in_flight: Option<u32>,

    /// Open model only: a send starting later than this after its intended time is counted as
    /// late [default: 10ms].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub max_lateness: Option<Duration>,

    /// Open model only: the pacer wakes at most once per this, and the sends due in between go
    /// out together at the next wake-up, up to this late: fewer wake-ups, so less CPU per
    /// request at high rates, for a known lateness (still counted from each send's intended
    /// time). E.g. 1ms, as tools that pace on a millisecond timer do [default: 0, every send
    /// at its own time].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub send_window: Option<Duration>,
}

/// What the run must meet, judged at the end on every recorded row (and, with --abort-on-fail, on the rows so far while it runs).
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Thresholds")]
pub struct ThresholdArgs {
    /// Fail the run (exit code 99) unless it meets this, judged at the end on every recorded
    /// row: METRIC[OP] CMP VALUE, with METRIC a latency percentile (p50, p95, p99.9, …),
    /// mean, max, error_rate or throughput; [OP] one request type's (else the whole run);
    /// e.g. 'p99<50ms', 'p95[get_album]<=20ms', 'error_rate<1%', 'throughput>2000/s'
    /// (repeatable; adds to a scenario's `thresholds`).
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,

    /// End the run early (exit 99, exit reason `threshold`, every completed row kept) as soon
    /// as a threshold is lost on the rows so far, judged once a second after --abort-after:
    /// an upper limit on error_rate, a percentile, mean or max (a lower limit and throughput
    /// are judged at the end only).
    #[arg(long)]
    pub abort_on_fail: bool,

    /// With --abort-on-fail: judge only after the run has gone this long, so the first
    /// requests alone do not end it [default: 5s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "abort_on_fail")]
    pub abort_after: Option<Duration>,
}

impl ThresholdArgs {
    /// `--abort-on-fail`'s delay: `--abort-after`, else its default; `None` without it.
    pub fn abort_after(&self) -> Option<Duration> {
        self.abort_on_fail.then(|| {
            self.abort_after
                .unwrap_or(crate::report::thresholds::DEFAULT_ABORT_AFTER)
        })
    }
}

/// The page in the browser of `loadgen run`, `sweep` and `capacity`: live figures while it
/// runs (a workflow's: each run's, and each finished level as a point), the final ones after.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Output and reporting")]
pub struct DashboardArgs {
    /// Serve a live page at http://ADDR/ (throughput, latency percentiles, errors by class,
    /// in flight, late sends, the client's CPU, the server's gauges, the slowest requests, the
    /// verdict as it stands; a sweep's or capacity search's levels as they finish; the final
    /// figures at the end), updated every second; without ADDR, a free loopback port (the URL
    /// is printed).
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:0", value_parser = parse_dashboard_addr)]
    pub dashboard: Option<std::net::SocketAddr>,

    /// With --dashboard: keep serving the final page this long after the end (Ctrl-C skips
    /// the wait) [default: 30s with --dashboard].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "dashboard")]
    pub dashboard_linger: Option<Duration>,

    /// Save the final page as one self-contained HTML file (data and charts inlined; opens
    /// without a network connection); works with or without --dashboard.
    #[arg(long, value_name = "FILE")]
    pub dashboard_out: Option<PathBuf>,
}

/// `--dashboard ADDR`: a socket address; a URL there is the target written after the flag,
/// said as such rather than as a bad address.
fn parse_dashboard_addr(text: &str) -> Result<std::net::SocketAddr, String> {
    if text.contains("://") {
        return Err(format!(
            "'{}' is a URL, and --dashboard takes an address (e.g. 127.0.0.1:8089) or \
             nothing; put the URL before --dashboard, or write --dashboard=ADDR",
            crate::workload::secret::redact_url(text)
        ));
    }
    text.parse().map_err(|e| {
        format!("{e}; give an address such as 127.0.0.1:8089, or --dashboard alone for a free port")
    })
}

/// Where the results go and what is shown while and after it runs.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Output and reporting")]
pub struct OutputArgs {
    /// Run directory to create [default: runs/<run-id>]. Must not exist or be empty.
    /// `s3://BUCKET/PREFIX` instead uploads the run to `s3://BUCKET/PREFIX/<run-id>/` (every
    /// shard can be given the same URL), each segment as soon as it closes; credentials come
    /// from the standard AWS sources (environment, pod role, instance profile) and
    /// AWS_ENDPOINT_URL names an S3-compatible store.
    #[arg(short = 'o', long, value_name = "DIR|s3://BUCKET/PREFIX")]
    pub out: Option<PathBuf>,

    /// Print the summary as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Don't show the latency histogram under the op table (`--json` never has it).
    #[arg(long)]
    pub no_histogram: bool,

    /// Don't show the live progress line (it is hidden anyway when stderr is not a terminal).
    #[arg(long)]
    pub no_progress: bool,

    /// Also write the thresholds' results as JUnit XML to FILE, for CI systems to show: one
    /// test case per threshold, a crossed one failed with what was observed (a sweep: one
    /// suite per level).
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// With --junit: the name of the JUnit suite(s), so a baseline and a candidate are told
    /// apart in CI [default: --out's folder name, else the run id].
    #[arg(long, value_name = "NAME", requires = "junit")]
    pub junit_name: Option<String>,

    /// Serve the run's live metrics for Prometheus at http://ADDR/metrics while it runs
    /// (requests by op and outcome, in flight, latency histograms per op), e.g.
    /// 127.0.0.1:9464; port 0 picks a free one (printed at the start).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,

    /// With --metrics-addr: keep serving the final counts this long after the run, so the
    /// last scrape sees them (Ctrl-C skips the wait; a sweep waits after its last level only)
    /// [default: 15s with --metrics-addr].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "metrics_addr")]
    pub metrics_linger: Option<Duration>,

    /// The `run_group` label of every live metric: shards of one run give the same one, so a
    /// dashboard sums them [default: the --start-at instant, else the run id].
    #[arg(long, value_name = "NAME")]
    pub run_group: Option<String>,

    /// How often the open Parquet segment is closed and a new one started; a killed run keeps
    /// every closed segment.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "5s", hide_short_help = true)]
    pub segment_interval: Duration,

    #[command(flatten)]
    pub evidence: EvidenceArgs,
}

/// The server's side of the run: its own metrics, and a trace id joining each row to its trace.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Server evidence")]
pub struct EvidenceArgs {
    /// Scrape this Prometheus endpoint every second during the run into
    /// server-metrics.parquet, e.g. node_exporter on the target host
    /// (http://TARGET:9100/metrics) or the service's own /metrics; give it once per endpoint
    /// (a scenario's `server_metrics` adds to them). A scrape runs off the request path and a
    /// failed or slow one is recorded, never stopping or delaying the run.
    #[arg(long = "server-metrics", value_name = "URL")]
    pub server_metrics: Vec<String>,

    /// The longest one scrape of a --server-metrics endpoint may take before it is recorded
    /// as a timeout.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s", hide_short_help = true)]
    pub server_metrics_timeout: Duration,

    /// The service's saturation gauges in the --server-metrics scrapes, which let the verdict
    /// say "8 of 8 workers busy, 412 queued": BUSY/LIMIT (LIMIT a gauge or a number, e.g.
    /// `tomcat_threads_busy/tomcat_threads_max` or `pool_active/200`), BUSY/LIMIT,QUEUE, or a
    /// queue length's gauge alone. loadgen-server's own gauges are read when not given.
    #[arg(long, value_name = "SPEC")]
    pub server_saturation: Option<String>,

    /// Send a W3C Trace Context `traceparent` header with every request (a new trace id per
    /// request, kept in the rows' `trace_id` column), so a slow or failed row opens in Jaeger,
    /// Tempo or any OpenTelemetry backend; a scenario's own `traceparent` header is kept.
    #[arg(long)]
    pub trace: bool,

    /// With --trace: the share of requests whose `traceparent` asks the server to sample
    /// (record) the trace, e.g. 0.1 or 10% (the others still carry an id).
    #[arg(long, value_name = "FRACTION", value_parser = parse_sample_fraction, default_value = "1", requires = "trace", allow_negative_numbers = true)]
    pub trace_sample: f64,
}

/// Slices of one load on several machines.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Shards")]
pub struct ShardArgs {
    /// Run only the I-th of N equal slices of the load (I from 0), so N loadgen processes on
    /// several machines together make exactly the load of one run, e.g. --shard 0/3.
    #[arg(long, value_name = "I/N", value_parser = parse_shard)]
    pub shard: Option<Shard>,

    /// Wait and start at this wall-clock instant (RFC 3339, e.g. 2026-11-22T10:15:00Z, or Unix
    /// milliseconds), so shards on several machines start together.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
}
