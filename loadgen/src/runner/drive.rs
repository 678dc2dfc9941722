//! Step three of a run: drive the model. Start the client monitor and the progress line, give
//! the model a pool of workers sharing one transport configuration, and stop when the model
//! is done, `-d` has elapsed or a signal came; requests in flight then get `--grace`.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::output::RunOutput;
use super::target::PreparedTarget;
use super::RunError;
use crate::config::RunConfig;
use crate::model::{Announcer, DriveContext};
use crate::report::dashboard::{Dashboard, DashboardListener, DashboardSource};
use crate::report::metrics::{MetricsListener, MetricsServer, MetricsSource};
use crate::report::progress::Progress;
use crate::report::thresholds::{self, ABORT_EVERY};

/// `--abort-on-fail`: the oldest a worker's finished rows get before they go to the writer,
/// even while its next request is in flight (a quarter of the judge's period).
const ROWS_TO_JUDGE_MAX_AGE: std::time::Duration = ABORT_EVERY.checked_div(4).unwrap();
use crate::servermon::{self, ServerMon, ServerMonConfig, ServerMonError};
use crate::stats::live::LiveMetrics;
use crate::stats::LiveCounters;
use crate::stop::{ExitReason, StopSignal};
use crate::store::writer::RecordSender;
use crate::sysmon::{self, Sysmon, SysmonConfig, SysmonError};
use crate::transport::{tls, ConnectPacer, Redirects, TransportConfig};
use crate::verdict::slo::{self, Abort};
use crate::worker::{WorkerContext, WorkerPool};

/// What the finished load leaves for the summary.
pub(super) struct Driven {
    pub live: Arc<LiveCounters>,
    pub sysmon: Result<Sysmon, SysmonError>,
    /// The `--server-metrics` scraper, when there are endpoints to scrape.
    pub servermon: Option<Result<ServerMon, ServerMonError>>,
    /// Kept serving until the run is finished, so a last scrape sees the final counts.
    pub metrics_server: Option<MetricsServer>,
    /// `--dashboard` / `--dashboard-out`: sampling until the run is finished.
    pub dashboard: Option<Dashboard>,
    /// A capacity level's watcher: why it stopped the level early, if it did (it ends when
    /// the writer has handed over its last samples).
    pub level_watch: Option<tokio::task::JoinHandle<Option<Abort>>>,
    /// The connections' `TCP_INFO`, summed as each closed.
    pub tcp: Arc<crate::stats::tcp::TcpTotals>,
}

/// Runs the model until its workers are done (or cut off) and the progress line is cleared.
/// `records` is dropped with the last worker, which lets the writer close its last segment.
pub(super) async fn drive(
    config: &RunConfig,
    target: &PreparedTarget,
    output: &RunOutput,
    records: RecordSender,
    listeners: Listeners,
    stop: &StopSignal,
) -> Result<Driven, RunError> {
    let transport = Arc::new(transport_config(config, target)?);
    let live = Arc::new(LiveCounters::for_run(
        config.workload.templates.len(),
        config.max_lateness_ns(),
    ));
    let sysmon = sysmon::start(SysmonConfig {
        path: output.run_dir.join("client-metrics.parquet"),
        phase_labels: output.labels.phases.clone(),
        interval: std::time::Duration::from_secs(1),
        anchor: output.identity.anchor,
        live: live.clone(),
        cgroup: target.cgroup.clone(),
        target_interface: target.interface.clone(),
        not_client_threads: target.embedded.as_ref().map(|_| servers::THREAD_NAME),
    });
    let servermon = start_servermon(config, output);
    let server_rows = servermon
        .as_ref()
        .and_then(|s| s.as_ref().ok())
        .map(ServerMon::rows_so_far);
    let (live_metrics, metrics_server, dashboard) =
        serve_live(listeners, config, (target, output), &live, server_rows)?;
    let ctx = Arc::new(WorkerContext {
        anchor: output.identity.anchor,
        workload: config.workload.clone(),
        live: live.clone(),
        metrics: live_metrics,
        stop: stop.clone(),
        trace_sample: config.evidence.trace_sample,
        // A judge reads the writer's aggregates: rows reach the writer within its period.
        watched_rows_max_age: config.abort_after.map(|_| ROWS_TO_JUDGE_MAX_AGE),
    });
    if config.output.banner {
        eprintln!("{}", banner(config, target));
    }
    let progress = Progress::start(
        config.output.progress,
        config.model.plan().extent(),
        live.clone(),
    );
    let announce = progress.announcer(!config.output.json);
    let tcp = transport.tcp.clone();
    let mut pool = WorkerPool::new(ctx, transport, records, config.sharding.shard);
    let timer = duration_timer(config, stop);
    let judge = abort_on_fail(config, output, stop, announce.clone());
    let level_watch = watch_level(config, output, stop);
    // A model stops starting workers as soon as the run drains; workers already running
    // finish (or are cut off after the grace period).
    let context = DriveContext {
        think_time: config.think_time,
        stop: stop.clone(),
        announce,
        fields: config.workload.phase_fields[0].clone(),
        budget: config.request_cap.map(|n| Arc::new(AtomicU64::new(n))),
    };
    tokio::select! {
        _ = config.model.plan().drive(&mut pool, context) => {}
        _ = stop.draining() => {}
    }
    pool.wait_all(config.grace).await;
    drop(pool);
    for task in [timer, judge].into_iter().flatten() {
        task.abort();
    }
    progress.finish();
    Ok(Driven {
        live,
        sysmon,
        servermon,
        metrics_server,
        dashboard,
        level_watch,
        tcp,
    })
}

/// What the run runs, against what, how it connects and its notes: said once at its start.
fn banner(config: &RunConfig, target: &PreparedTarget) -> String {
    let mut lines = vec![
        format!(
            "running {} against {} — Ctrl-C stops and keeps every completed request",
            config.model.plan().describe(),
            target.url.url
        ),
        connecting(config),
    ];
    lines.extend(config.notes.iter().map(|note| format!("note: {note}")));
    lines.join("\n")
}

/// How connections are opened, said once at the start: the pace and, when not the kernel's
/// choice, the local addresses.
fn connecting(config: &RunConfig) -> String {
    let rate = config.connection.connect_rate_per_s;
    let sources = &config.connection.source_addrs;
    match (sources.first(), sources.last()) {
        (Some(first), Some(last)) if sources.len() > 1 => format!(
            "opening connections at up to {rate}/s (--connect-rate) from {} local addresses, {first} … {last}",
            sources.len()
        ),
        (Some(only), _) => format!("opening connections at up to {rate}/s (--connect-rate) from {only}"),
        _ => format!("opening connections at up to {rate}/s (--connect-rate)"),
    }
}

/// Starts scraping the server's endpoints into server-metrics.parquet, if any were given.
fn start_servermon(
    config: &RunConfig,
    output: &RunOutput,
) -> Option<Result<ServerMon, ServerMonError>> {
    let sources = &config.evidence.server_metrics.sources;
    if sources.is_empty() {
        return None;
    }
    Some(servermon::start(ServerMonConfig {
        path: output.run_dir.join("server-metrics.parquet"),
        sources: sources.clone(),
        interval: servermon::INTERVAL,
        timeout: config.evidence.server_metrics.timeout,
        anchor: output.identity.anchor,
    }))
}

/// The live views of the run: the per-op live metrics (only when something reads them), the
/// `--metrics-addr` endpoint, the `--dashboard` page's sampler and server.
#[allow(clippy::type_complexity)]
fn serve_live(
    listeners: Listeners,
    config: &RunConfig,
    (target, output): (&PreparedTarget, &RunOutput),
    live: &Arc<LiveCounters>,
    server_rows: Option<crate::servermon::RowsSoFar>,
) -> Result<
    (
        Option<Arc<LiveMetrics>>,
        Option<MetricsServer>,
        Option<Dashboard>,
    ),
    RunError,
> {
    // The per-op live metrics exist only when something reads them (the endpoint, the page).
    let live_metrics =
        (listeners.metrics.is_some() || config.output.dashboard.wanted()).then(|| {
            Arc::new(LiveMetrics::new(
                output.labels.ops.len(),
                config.max_lateness_ns(),
            ))
        });
    let metrics_server = match (listeners.metrics, &live_metrics) {
        (Some(listener), Some(metrics)) => Some(serve_metrics(
            listener,
            config,
            output,
            live,
            metrics.clone(),
        )?),
        _ => None,
    };
    let dashboard = match &live_metrics {
        Some(metrics) if config.output.dashboard.wanted() => {
            let facts = super::live_page::LiveFacts {
                config: config.clone(),
                live: live.clone(),
                labels: output.labels.clone(),
                published: output.published.clone(),
                anchor: output.identity.anchor,
                server_rows,
            };
            let source = dashboard_source(config, (target, output), live, metrics.clone());
            Some(start_dashboard(listeners.dashboard, config, source, facts)?)
        }
        _ => None,
    };
    Ok((live_metrics, metrics_server, dashboard))
}

/// The listeners a run binds before it writes anything (a taken port is bad input).
pub(super) struct Listeners {
    pub metrics: Option<MetricsListener>,
    pub dashboard: Option<DashboardListener>,
}

/// What the page's sampler reads: the live counters, and the run's name and title.
fn dashboard_source(
    config: &RunConfig,
    (target, output): (&PreparedTarget, &RunOutput),
    live: &Arc<LiveCounters>,
    metrics: Arc<LiveMetrics>,
) -> DashboardSource {
    let settings = &config.output.dashboard;
    DashboardSource {
        live: live.clone(),
        metrics,
        open: config.model.plan().max_lateness().is_some(),
        title: format!(
            "{}, against {}",
            config.model.plan().describe(),
            target.url.url
        ),
        run: (output.run_dir.file_name())
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned()),
        so_far: None,
        out: settings.out.clone(),
        linger: settings.linger,
    }
}

/// Starts the page's sampler over the live counters and the run's facts so far: onto its
/// workflow's page, or onto its own, served when `--dashboard`.
fn start_dashboard(
    listener: Option<DashboardListener>,
    config: &RunConfig,
    mut source: DashboardSource,
    facts: super::live_page::LiveFacts,
) -> Result<Dashboard, RunError> {
    source.so_far = Some(super::live_page::so_far(facts));
    let settings = &config.output.dashboard;
    if let Some(page) = &settings.page {
        return Ok(Dashboard::attach(source, page));
    }
    let addr = settings.addr.unwrap_or(([127, 0, 0, 1], 0).into());
    Dashboard::start(source, listener).map_err(|source| RunError::DashboardAddr { addr, source })
}

/// Starts serving the live metrics the workers will bump, labelled with the run and shard.
fn serve_metrics(
    listener: MetricsListener,
    config: &RunConfig,
    output: &RunOutput,
    live: &Arc<LiveCounters>,
    metrics: Arc<LiveMetrics>,
) -> Result<MetricsServer, RunError> {
    let addr = (config.output.metrics.addr).expect("a listener was bound for --metrics-addr");
    let server = listener
        .serve(MetricsSource {
            live: live.clone(),
            metrics,
            ops: output.labels.ops.clone(),
            run_id: output.run_id.clone(),
            shard: config.sharding.shard.to_string(),
            run_group: run_group(config, &output.run_id),
        })
        .map_err(|source| RunError::MetricsAddr { addr, source })?;
    Ok(server)
}

/// The `run_group` label: `--run-group`, else the `--start-at` instant that the shards of one
/// run share (RFC 3339, milliseconds), else the run id.
fn run_group(config: &RunConfig, run_id: &str) -> String {
    if let Some(group) = &config.output.metrics.run_group {
        return group.clone();
    }
    match config.sharding.start_at_unix_ns {
        Some(ns) => chrono::DateTime::<chrono::Utc>::from_timestamp_nanos(ns)
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string(),
        None => run_id.to_string(),
    }
}

/// How every worker connects: the target's origin and the connection flags.
fn transport_config(
    config: &RunConfig,
    target: &PreparedTarget,
) -> Result<TransportConfig, RunError> {
    Ok(TransportConfig {
        origin: target.origin.clone(),
        http2: config.connection.http2,
        http3: config.connection.http3,
        streams_per_connection: config.connection.streams_per_connection,
        grpc: config.connection.grpc.clone(),
        keepalive: config.connection.keepalive,
        redirects: config.connection.redirects,
        redirect_tls: match config.connection.redirects {
            Redirects::Any => Some(tls::client_config(
                &config.connection.verify,
                tls::Alpn::Http1,
            )?),
            _ => None,
        },
        connect_timeout: config.connect_timeout,
        request_timeout: config.timeout,
        sources: config.connection.source_addrs.clone(),
        connect_pacer: Some(Arc::new(ConnectPacer::new(f64::from(
            config.connection.connect_rate_per_s,
        )))),
        tcp: Arc::default(),
    })
}

/// `--abort-on-fail`: after `--abort-after`, once every [`ABORT_EVERY`], the thresholds are
/// judged on the writer's aggregates so far; the first one lost drains the run (exit reason
/// `threshold`). Off the workers' path: the writer thread copies its aggregates out.
fn abort_on_fail(
    config: &RunConfig,
    output: &RunOutput,
    stop: &StopSignal,
    announce: Announcer,
) -> Option<tokio::task::JoinHandle<()>> {
    let after = config.abort_after?;
    let published = output.published.clone()?;
    let (thresholds, ops) = (config.thresholds.clone(), output.labels.ops.clone());
    let stop = stop.clone();
    Some(tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let mut every = tokio::time::interval(ABORT_EVERY);
        loop {
            every.tick().await;
            let Some(stats) = published.take() else {
                continue;
            };
            if let Some(lost) = thresholds::lost_so_far(&thresholds, &stats, &ops) {
                announce(format!(
                    "threshold {} lost on the first {} requests (observed {}): ending the run \
                     (--abort-on-fail)",
                    lost.threshold,
                    stats.requests(),
                    thresholds::observed_text(&lost)
                ));
                stop.drain(ExitReason::Threshold);
                return;
            }
        }
    }))
}

/// A capacity level: takes its samples as the writer hands them over and stops the level
/// (drains the run) as soon as its rows are far past the SLO (the contract's abort rule);
/// returns why it stopped it.
fn watch_level(
    config: &RunConfig,
    output: &RunOutput,
    stop: &StopSignal,
) -> Option<tokio::task::JoinHandle<Option<Abort>>> {
    let mut watch = slo::LevelWatch::new(config.judgement.level.as_ref()?.slos.clone());
    let samples = output.watched.clone()?;
    let stop = stop.clone();
    Some(tokio::spawn(async move {
        while let Ok(batch) = samples.recv_async().await {
            if watch.take(batch) {
                stop.drain(ExitReason::DurationElapsed);
            }
        }
        watch.aborted()
    }))
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
