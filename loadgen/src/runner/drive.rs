//! Step three of a run: drive the model. Give it a pool of workers sharing one transport
//! configuration, with the services' counters and announcer, and stop when the model is done,
//! `-d` has elapsed or a signal came; requests in flight then get `--grace`.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::services::Services;
use crate::config::RunConfig;
use crate::model::DriveContext;
use crate::report::thresholds::ABORT_EVERY;
use crate::stats::tcp::TcpTotals;
use crate::stop::StopSignal;
use crate::store::writer::RecordSender;
use crate::transport::TransportConfig;
use crate::worker::{WorkerContext, WorkerPool};

/// `--abort-on-fail`: the oldest a worker's finished rows get before they go to the writer,
/// even while its next request is in flight (a quarter of the judge's period).
const ROWS_TO_JUDGE_MAX_AGE: std::time::Duration = ABORT_EVERY.checked_div(4).unwrap();

/// Runs the model until its workers are done (or cut off); returns the connections'
/// `TCP_INFO`, summed as each closed. `records` is dropped with the last worker, which lets
/// the writer close its last segment.
pub(super) async fn drive(
    config: &RunConfig,
    (transport, records): (TransportConfig, RecordSender),
    services: &Services,
    stop: &StopSignal,
) -> Arc<TcpTotals> {
    let transport = Arc::new(transport);
    let ctx = Arc::new(WorkerContext {
        anchor: services.anchor,
        workload: config.workload.clone(),
        live: services.live.clone(),
        metrics: services.live_metrics.clone(),
        stop: stop.clone(),
        trace_sample: config.evidence.trace_sample,
        // A judge reads the writer's aggregates: rows reach the writer within its period.
        watched_rows_max_age: config.abort_after.map(|_| ROWS_TO_JUDGE_MAX_AGE),
    });
    let tcp = transport.tcp.clone();
    let mut pool = WorkerPool::new(ctx, transport, records, config.sharding.shard);
    // A model stops starting workers as soon as the run drains; workers already running
    // finish (or are cut off after the grace period).
    let context = DriveContext {
        think_time: config.think_time,
        stop: stop.clone(),
        announce: services.announce.clone(),
        fields: config.workload.phase_fields[0].clone(),
        budget: config.request_cap.map(|n| Arc::new(AtomicU64::new(n))),
    };
    tokio::select! {
        _ = config.model.plan().drive(&mut pool, context) => {}
        _ = stop.draining() => {}
    }
    pool.wait_all(config.grace).await;
    tcp
}
