//! Step one of a run: prepare. Check that its connections fit under the open-files limit,
//! bind the listeners it will serve on (a taken port is bad input), make sure the target
//! answers (or start the embedded server), then claim the output — the run directory, the
//! writer, S3 — and say how every worker will connect. Nothing is written before the target
//! has answered, so bad input never leaves an empty run behind pretending to be a result.

use std::sync::Arc;

use super::output::RunOutput;
use super::services::Listeners;
use super::target::{self, PreparedTarget};
use super::RunError;
use crate::config::{RunConfig, Target};
use crate::model::ModelPlan;
use crate::report::dashboard::DashboardListener;
use crate::report::metrics::MetricsListener;
use crate::stats::LiveCounters;
use crate::stop::StopSignal;
use crate::store::writer::{RecordSender, WriterThread};
use crate::transport::TransportConfig;

/// A run ready to start: its target, its output and what its workers and services need.
pub(super) struct Prepared {
    pub target: PreparedTarget,
    pub output: RunOutput,
    /// The writer's end the workers send their rows to.
    pub records: RecordSender,
    /// The writer's thread, which closes the last segment once every sender is gone.
    pub writer: WriterThread,
    pub listeners: Listeners,
    /// The counters the workers bump and every live view reads.
    pub live: Arc<LiveCounters>,
    pub transport: TransportConfig,
    /// Said before the run (the open-files limit, TLS), and kept in run.json.
    pub warnings: Vec<String>,
}

impl Prepared {
    /// Prepares the run `config` describes; the embedded server's address is written into
    /// it.
    pub async fn prepare(config: &mut RunConfig, stop: &StopSignal) -> Result<Self, RunError> {
        let mut warnings = Vec::new();
        if let Some(warning) = check_open_files(config)? {
            eprintln!("warning: {warning}");
            warnings.push(warning);
        }
        let listeners = Listeners {
            metrics: bind_metrics(config)?,
            dashboard: bind_dashboard(config)?,
        };
        warnings.extend(target::tls_warning(config));
        let (target, transport) = PreparedTarget::prepare(config).await?;
        let (output, records, writer) = RunOutput::create(config, &target, stop).await?;
        let live = Arc::new(LiveCounters::for_run(
            config.workload.templates.len(),
            config.max_lateness_ns(),
        ));
        Ok(Prepared {
            target,
            output,
            records,
            writer,
            listeners,
            live,
            transport,
            warnings,
        })
    }
}

/// Headroom beside a run's connections: the runtime, the writer, the sampler and stdio.
pub(crate) const SPARE_FDS: u64 = 64;

/// The connections a run's workers open at most (an open model's: its `--max-in-flight`),
/// counting the embedded server's end of each when it runs in this process.
pub(crate) fn connections_needed(config: &RunConfig) -> u64 {
    let mut connections = u64::from(config.model.plan().max_workers());
    if config.connection.multiplexed() {
        let streams = u64::from(config.connection.streams_per_connection.max(1));
        connections = connections.div_ceil(streams);
    }
    if matches!(config.target, Target::Embedded) {
        // The embedded server holds the other end of every connection in this process.
        connections *= 2;
    }
    connections
}

/// Raises the soft open-files limit to the hard one, then checks that the run's connections
/// fit under it. A model that will open its workers' connections is refused when they do
/// not fit (the run would be mostly `too_many_open_files` rows); the open model's
/// `--max-in-flight` is only a cap, reached when the server falls behind, so it gets a
/// warning instead. (`loadgen run` spreads a run that does not fit over several processes
/// before it gets here: `workflow::spread`.)
fn check_open_files(config: &RunConfig) -> Result<Option<String>, RunError> {
    let Ok(limit) = rlimit::increase_nofile_limit(u64::MAX) else {
        return Ok(None);
    };
    let workers = config.model.plan().max_workers();
    let needed = connections_needed(config) + SPARE_FDS;
    if needed <= limit {
        return Ok(None);
    }
    match config.model {
        ModelPlan::Open(_) => Ok(Some(format!(
            "--max-in-flight {workers} needs up to {needed} open files but the limit is \
             {limit}; if the server falls behind, expect too_many_open_files errors (raise it \
             with `ulimit -n` or lower --max-in-flight)"
        ))),
        _ => Err(RunError::OpenFiles {
            workers,
            needed,
            limit,
        }),
    }
}

/// `--metrics-addr`: bound before anything is written, so a taken port is bad input.
fn bind_metrics(config: &RunConfig) -> Result<Option<MetricsListener>, RunError> {
    let Some(addr) = config.output.metrics.addr else {
        return Ok(None);
    };
    let listener =
        MetricsListener::bind(addr).map_err(|source| RunError::MetricsAddr { addr, source })?;
    if let Ok(bound) = listener.local_addr() {
        eprintln!("metrics for Prometheus at http://{bound}/metrics");
    }
    Ok(Some(listener))
}

/// `--dashboard`: bound before anything is written, so a taken port is bad input.
fn bind_dashboard(config: &RunConfig) -> Result<Option<DashboardListener>, RunError> {
    let Some(addr) = config.output.dashboard.addr else {
        return Ok(None);
    };
    let listener =
        DashboardListener::bind(addr).map_err(|source| RunError::DashboardAddr { addr, source })?;
    listener.announce();
    Ok(Some(listener))
}
