//! One run, end to end, told in four steps (read [`run`]): prepare the target, prepare the
//! output, drive the model, finish. Each step is a module of its own: `target` (the embedded
//! server, or a check that the user's server answers), `output` (`--start-at`, the run
//! directory, the writer, S3), `drive` (workers, progress, `-d`, signals) and `finish`
//! (client verdict, summary, run.json, upload, console); `live_page` is what a `--dashboard`
//! page adds each second (the provisional verdict on the facts so far); `merged` is the finish
//! of a run spread over several processes, out of what each hands over.
//!
//! This is the only place that knows about all the parts; each part knows only its neighbours.
//! Nothing is written to disk until the target has answered a TCP connect, so bad input never
//! leaves an empty run behind pretending to be a result.

mod drive;
mod error;
mod finish;
mod live_page;
mod merged;
mod output;
mod ports;
mod probe;
mod run_json;
mod target;

pub use error::RunError;
pub use finish::{Judged, RunOutcome};
pub use merged::{finish_spread, Handover, Part, SpreadFacts, HANDOVER_VERSION};
pub use output::HostInfo;
pub(crate) use ports::ports_per_address;
pub use probe::Probe;

use crate::config::{RunConfig, Target};
use crate::model::ModelPlan;
use crate::report::dashboard::DashboardListener;
use crate::report::metrics::MetricsListener;
use crate::report::RunSummary;
use crate::stop::StopSignal;

/// Fields a workflow adds to run.json once the run's summary is known (calibrate: its `kind`
/// and R(1)); they go out in the one run.json write, before any upload.
pub type RunJsonExtra =
    Box<dyn FnOnce(&RunSummary) -> serde_json::Map<String, serde_json::Value> + Send>;

/// Runs one load test of any model, from the target check to run.json. `stop` lets the caller
/// (a signal handler, a test) stop it early; what completed by then is kept.
pub async fn run(config: RunConfig, stop: StopSignal) -> Result<RunOutcome, RunError> {
    run_with(config, stop, None).await
}

/// [`run`], with `extra` fields for run.json.
pub async fn run_with(
    mut config: RunConfig,
    stop: StopSignal,
    extra: Option<RunJsonExtra>,
) -> Result<RunOutcome, RunError> {
    let mut warnings = Vec::new();
    if let Some(warning) = check_open_files(&config)? {
        eprintln!("warning: {warning}");
        warnings.push(warning);
    }
    let listeners = drive::Listeners {
        metrics: bind_metrics(&config)?,
        dashboard: bind_dashboard(&config)?,
    };
    warnings.extend(target::tls_warning(&config));
    let target = target::PreparedTarget::prepare(&mut config).await?;
    let (output, records) = output::RunOutput::create(&config, &target, &stop).await?;
    let driven = drive::drive(&config, &target, &output, records, listeners, &stop).await?;
    finish::finish(config, target, output, driven, &stop, warnings, extra).await
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
