//! One run, end to end, told as a pipeline of stages (read [`run_with`]): each takes the
//! previous stage's typed value and hands on its own. `prepare` (the open-files limit, the
//! listeners, the target — the embedded server, or a check that the user's server answers —
//! and the output: `--start-at`, the run directory, the writer, S3), `services` (one owner
//! starts and stops the live views, progress, `--abort-on-fail`, a capacity level's watch,
//! the client monitor, the server's scraper and the `-d` timer), `drive` (the workers),
//! `measure` (the summary and what the judge reads), `judge` (the one judge on what was
//! measured, and the thresholds), `probe` (one connection after the level, when it could
//! change the verdict; the verdict is then judged again with its R(1)) and `record` (run.json
//! once, the S3 seal last, the console). `live_page` is what a `--dashboard` page adds each
//! second (the same judge on the facts so far, marked provisional); `merged` is the finish of
//! a run spread over several processes, out of what each hands over.
//!
//! This is the only place that knows about all the stages; each stage knows only the values
//! it is handed. Nothing is written to disk until the target has answered a TCP connect, so
//! bad input never leaves an empty run behind pretending to be a result.

mod drive;
mod error;
mod judge;
mod live_page;
mod measure;
mod merged;
mod output;
mod ports;
mod prepare;
mod probe;
mod record;
mod run_json;
mod services;
mod target;

pub use error::RunError;
pub use merged::{finish_spread, Handover, Lost, Part, SpreadFacts, HANDOVER_VERSION};
pub use output::HostInfo;
pub(crate) use ports::ports_per_address;
pub(crate) use prepare::{connections_needed, SPARE_FDS};
pub use probe::Probe;
pub use record::RunOutcome;

pub use crate::verdict::Judged;

use crate::config::RunConfig;
use crate::report::RunSummary;
use crate::stop::StopSignal;
use measure::Measured;
use prepare::Prepared;
use services::Services;

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
    let prepared = Prepared::prepare(&mut config, &stop).await?;
    let (target, output) = (prepared.target, prepared.output);
    let served = (prepared.listeners, prepared.live);
    let services = Services::start(&config, (&target, &output), served, &stop)?;
    let load = (prepared.transport, prepared.records);
    let tcp = drive::drive(&config, load, &services, &stop).await;
    let (stopped, serving) = services.stop();
    let mut warnings = prepared.warnings;
    let mut measured = Measured::collect(
        &config,
        (&target, prepared.writer, &output.labels),
        (stopped, &tcp),
        (&output.run_dir, &stop),
        &mut warnings,
    )
    .await?;
    let mut judgement = judge::judge(&config, &measured);
    let ended = (measured.exit_reason, &stop);
    let level = (&measured.summary, &judgement.verdict);
    let probed = probe::after(&mut config, ended, level, &mut warnings).await;
    // A signal during the probe is the run's exit (130/143), as one during the load is.
    measured.exit_reason = probed.signal.unwrap_or(measured.exit_reason);
    if let Some(probe) = &probed.probe {
        judgement.verdict = judge::verdict(&config, &measured, Some(probe));
    }
    let facts = (target, output);
    let ended = (serving, &stop);
    record::write(
        config,
        facts,
        measured,
        (judgement, probed.probe),
        ended,
        (warnings, extra),
    )
    .await
}
