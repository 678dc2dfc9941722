//! Step three of a run: drive the model. Start the client monitor and the progress line, give
//! the model a pool of workers sharing one transport configuration, and stop when the model
//! is done, `-d` has elapsed or a signal came; requests in flight then get `--grace`.

use std::sync::Arc;

use super::output::RunOutput;
use super::target::PreparedTarget;
use super::RunError;
use crate::config::RunConfig;
use crate::report::progress::Progress;
use crate::stats::LiveCounters;
use crate::stop::{ExitReason, StopSignal};
use crate::store::writer::RecordSender;
use crate::sysmon::{self, Sysmon, SysmonConfig, SysmonError};
use crate::transport::{tls, Redirects, TransportConfig};
use crate::worker::{WorkerContext, WorkerPool};

/// What the finished load leaves for the summary.
pub(super) struct Driven {
    pub live: Arc<LiveCounters>,
    pub sysmon: Result<Sysmon, SysmonError>,
}

/// Runs the model until its workers are done (or cut off) and the progress line is cleared.
/// `records` is dropped with the last worker, which lets the writer close its last segment.
pub(super) async fn drive(
    config: &RunConfig,
    target: &PreparedTarget,
    output: &RunOutput,
    records: RecordSender,
    stop: &StopSignal,
) -> Result<Driven, RunError> {
    let transport = Arc::new(transport_config(config, target)?);
    let live = Arc::new(LiveCounters::default());
    let sysmon = sysmon::start(SysmonConfig {
        path: output.run_dir.join("client-metrics.parquet"),
        interval: std::time::Duration::from_secs(1),
        anchor: output.identity.anchor,
        live: live.clone(),
        cgroup: target.cgroup.clone(),
        target_interface: target.interface.clone(),
    });
    let ctx = Arc::new(WorkerContext {
        anchor: output.identity.anchor,
        workload: config.workload.clone(),
        live: live.clone(),
        stop: stop.clone(),
    });
    if !config.json {
        eprintln!(
            "running {} against {} — Ctrl-C stops and keeps every completed request",
            config.model.describe(),
            target.url.url
        );
    }
    let progress = Progress::start(config.progress, config.model.extent(), live.clone());
    let announce = progress.announcer(!config.json);
    let mut pool = WorkerPool::new(ctx, transport, records, config.shard);
    let timer = duration_timer(config, stop);
    // A model stops starting workers as soon as the run drains; workers already running
    // finish (or are cut off after the grace period).
    let fields = config.workload.phase_fields[0].clone();
    tokio::select! {
        _ = config.model.clone().drive(&mut pool, config.think_time, stop, announce, &fields) => {}
        _ = stop.draining() => {}
    }
    pool.wait_all(config.grace).await;
    drop(pool);
    if let Some(timer) = timer {
        timer.abort();
    }
    progress.finish();
    Ok(Driven { live, sysmon })
}

/// How every worker connects: the target's origin and the connection flags.
fn transport_config(
    config: &RunConfig,
    target: &PreparedTarget,
) -> Result<TransportConfig, RunError> {
    Ok(TransportConfig {
        origin: target.origin.clone(),
        http2: config.connection.http2,
        streams_per_connection: config.connection.streams_per_connection,
        keepalive: config.connection.keepalive,
        redirects: config.connection.redirects,
        redirect_tls: match config.connection.redirects {
            Redirects::Any => Some(tls::client_config(&config.connection.verify, false)?),
            _ => None,
        },
        connect_timeout: config.connect_timeout,
        request_timeout: config.timeout,
    })
}

/// `-d` (a closed model's duration, or a cap on any other model) drains the run when it
/// elapses.
fn duration_timer(config: &RunConfig, stop: &StopSignal) -> Option<tokio::task::JoinHandle<()>> {
    config.duration_limit().map(|duration| {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            stop.drain(ExitReason::DurationElapsed);
        })
    })
}
