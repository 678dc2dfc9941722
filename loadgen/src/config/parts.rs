//! The resolved parts of a run's configuration that do not depend on its model: where its
//! results go and how they are shown ([`OutputSettings`]), what it gathers beside its rows
//! ([`Evidence`]) and which slice of a sharded run it is ([`Sharding`]).
//!
//! Each part is resolved once from its group of flags, when a command's flags are read
//! ([`super::RunInputs`]); every run the command makes takes the same parts, so a field is
//! checked in one place and copied by none.

use std::net::SocketAddr;
use std::time::Duration;

use super::{validate, ConfigError, Output};
use crate::cli::{EvidenceArgs, OutputArgs, ShardArgs};
use crate::scenario::Scenario;

/// `--metrics-linger` when `--metrics-addr` is given without it: three scrapes at Prometheus's
/// common 5 s interval.
pub const DEFAULT_METRICS_LINGER: Duration = Duration::from_secs(15);

/// Where a run's results go and how the console shows them.
#[derive(Debug, Clone)]
pub struct OutputSettings {
    pub out: Output,
    /// The live progress line (not `--no-progress`, not `--json`).
    pub progress: bool,
    /// `--json`: the summary as JSON on stdout, nothing else.
    pub json: bool,
    /// The console shows the latency histogram (not `--no-histogram`).
    pub histogram: bool,
    /// The run says what it runs, how it connects and that Ctrl-C keeps its rows, before it
    /// starts (not `--json`; not a capacity search's levels, which the search announces once).
    pub banner: bool,
    /// A new Parquet segment this often (`--segment-interval`).
    pub segment_interval: Duration,
    /// `--upload-timeout`: the longest the end of an `--out s3://` run waits for uploads.
    pub upload_timeout: Duration,
    /// Live metrics for Prometheus (`--metrics-addr`).
    pub metrics: LiveMetrics,
    /// The run's page in the browser (`--dashboard`, `--dashboard-out`), or its workflow's.
    pub dashboard: DashboardSettings,
}

/// `--dashboard [ADDR]` at `--dashboard-linger` after the run, `--dashboard-out FILE`.
#[derive(Debug, Clone, Default)]
pub struct DashboardSettings {
    pub addr: Option<SocketAddr>,
    pub linger: Duration,
    pub out: Option<std::path::PathBuf>,
    /// A workflow's page (`sweep`, `capacity`): the run appends its seconds to it instead
    /// of serving its own (the workflow bound, serves, saves and finishes it).
    pub page: Option<crate::report::dashboard::SharedPage>,
}

/// `--dashboard-linger` when `--dashboard` is given without it.
pub const DEFAULT_DASHBOARD_LINGER: Duration = Duration::from_secs(30);

impl DashboardSettings {
    pub fn from_args(args: &crate::cli::DashboardArgs) -> Self {
        DashboardSettings {
            addr: args.dashboard,
            linger: match args.dashboard {
                Some(_) => args.dashboard_linger.unwrap_or(DEFAULT_DASHBOARD_LINGER),
                None => Duration::ZERO,
            },
            out: args.dashboard_out.clone(),
            page: None,
        }
    }

    /// Whether the run samples its live figures for a page (served, saved or both).
    pub fn wanted(&self) -> bool {
        self.addr.is_some() || self.out.is_some() || self.page.is_some()
    }
}

/// The live metrics endpoint: where, for how long after the run, under which group label.
#[derive(Debug, Clone, Default)]
pub struct LiveMetrics {
    /// `--metrics-addr`: where live metrics are served.
    pub addr: Option<SocketAddr>,
    /// How long the endpoint serves the final counts after the run (`--metrics-linger`,
    /// 15 s with `--metrics-addr`; a sweep sets zero for all but its last level).
    pub linger: Duration,
    /// `--run-group`: the label shards of one run share in the live metrics.
    pub run_group: Option<String>,
}

impl OutputSettings {
    /// `output`'s flags, and the command's `--upload-timeout` (zero: it writes locally).
    pub(super) fn from_args(
        output: &OutputArgs,
        upload_timeout: Duration,
    ) -> Result<Self, ConfigError> {
        Ok(OutputSettings {
            out: Output::from_arg(output.out.as_deref())?,
            progress: !output.no_progress && !output.json,
            json: output.json,
            histogram: !output.no_histogram,
            banner: !output.json,
            segment_interval: output.segment_interval,
            upload_timeout,
            metrics: LiveMetrics {
                addr: output.metrics_addr,
                linger: match output.metrics_addr {
                    Some(_) => output.metrics_linger.unwrap_or(DEFAULT_METRICS_LINGER),
                    None => Duration::ZERO,
                },
                run_group: output.run_group.clone(),
            },
            dashboard: DashboardSettings::default(),
        })
    }
}

/// What a run gathers beside its rows to explain them: the link's capacity, the server's
/// metrics, trace ids.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// `--link-capacity`, in bits per second.
    pub link_capacity_bps: Option<u64>,
    /// The server's endpoints to scrape (`--server-metrics`, a scenario's `server_metrics`).
    pub server_metrics: ServerMetrics,
    /// `--trace`: the share of requests whose `traceparent` is sampled (`--trace-sample`).
    pub trace_sample: Option<f64>,
}

/// The server's Prometheus endpoints scraped during a run; none: no scraper, no file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerMetrics {
    pub sources: Vec<String>,
    pub timeout: Duration,
    /// Which gauges say the service is saturated (`--server-saturation`).
    pub saturation: crate::verdict::SaturationGauges,
    /// Hold those gauges to a scrape before the run (refusing one that picks several series
    /// or none): a run's or a workflow's first; a later level only warns, as its run does.
    pub check_before_run: bool,
}

impl ServerMetrics {
    /// Whether the gauges are held to a scrape before this run: there are endpoints and
    /// gauges, and the run is the first to check them.
    pub fn gauges_to_check(&self) -> bool {
        !self.sources.is_empty() && self.saturation != Default::default() && self.check_before_run
    }
}

impl Evidence {
    /// `evidence`'s flags with the scenario's `server_metrics` and `server_saturation`, and
    /// `--link-capacity`.
    pub(super) fn read(
        evidence: &EvidenceArgs,
        scenario: &Scenario,
        link_capacity_bps: Option<u64>,
    ) -> Result<Self, ConfigError> {
        let sources = scenario
            .server_metrics
            .iter()
            .chain(&evidence.server_metrics);
        let saturation = match (evidence.server_saturation.as_ref())
            .or(scenario.server_saturation.as_ref())
        {
            Some(spec) => spec.parse().map_err(|why| {
                ConfigError::ServerSaturation(format!(
                    "--server-saturation '{spec}': {why}; write BUSY/LIMIT, BUSY/LIMIT,QUEUE or QUEUE (metric names)"
                ))
            })?,
            None => Default::default(),
        };
        let sources = validate::server_metrics(sources)?;
        if evidence.server_metrics_timeout.is_zero() && !sources.is_empty() {
            // Every scrape would time out at once: a run with evidence that says nothing.
            return Err(ConfigError::ServerMetricsTimeout);
        }
        Ok(Evidence {
            link_capacity_bps,
            server_metrics: ServerMetrics {
                sources,
                timeout: evidence.server_metrics_timeout,
                saturation,
                check_before_run: true,
            },
            trace_sample: evidence.trace.then_some(evidence.trace_sample),
        })
    }
}

/// This process's slice of a sharded run (`--shard`) and the start the shards share.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sharding {
    /// The slice of the load this process runs; a run's model is already sliced.
    pub shard: crate::shard::Shard,
    /// `--start-at`, as Unix nanoseconds.
    pub start_at_unix_ns: Option<i64>,
    /// True when this run waits for `--start-at` and records how late it started: false for
    /// a sweep's later levels, which start when the level before them ends.
    pub waits_for_start_at: bool,
}

impl Sharding {
    /// `--shard` and `--start-at`; a command without them runs whole, now.
    pub(super) fn from_args(shard: Option<&ShardArgs>) -> Result<Self, ConfigError> {
        Ok(Sharding {
            shard: shard.and_then(|s| s.shard).unwrap_or_default(),
            start_at_unix_ns: shard
                .and_then(|s| s.start_at.as_deref())
                .map(validate::parse_start_at)
                .transpose()?,
            waits_for_start_at: true,
        })
    }
}
