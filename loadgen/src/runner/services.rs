//! Step two of a run: its services, started by one owner and stopped by it. Beside the load
//! run the client monitor (client-metrics.parquet), the server's scraper
//! (server-metrics.parquet), the live views (the `--metrics-addr` endpoint, the `--dashboard`
//! page with its provisional verdict, the progress line) and the run's clocks and judges (the
//! `-d` timer, `--abort-on-fail`, a capacity level's watch). [`Services::start`] starts them
//! all before the first worker; [`Services::stop`] stops what ends with the load and hands on
//! what the measurement reads (the monitors' files, the level watch) and what serves past the
//! run's end (the endpoint and the page, so a last look sees the final counts).

use std::sync::Arc;

use super::measure::Stopped;
use super::output::RunOutput;
use super::target::PreparedTarget;
use super::RunError;
use crate::config::RunConfig;
use crate::model::Announcer;
use crate::report::dashboard::{Dashboard, DashboardListener, DashboardSource};
use crate::report::metrics::{MetricsListener, MetricsServer, MetricsSource};
use crate::report::progress::Progress;
use crate::report::thresholds;
use crate::servermon::{self, ServerMon, ServerMonConfig, ServerMonError};
use crate::stats::live::LiveMetrics;
use crate::stats::LiveCounters;
use crate::stop::StopSignal;
use crate::sysmon::{self, Sysmon, SysmonConfig, SysmonError};
use crate::verdict::slo::{Abort, LevelWatch};

/// Every service of a run, from its start to the end of its load.
pub(super) struct Services {
    /// The instant the run's times count from.
    pub anchor: crate::clock::Anchor,
    /// The counters the workers bump, read by the progress line, the page and the summary.
    pub live: Arc<LiveCounters>,
    /// The per-op live metrics, when something reads them (the endpoint, the page).
    pub live_metrics: Option<Arc<LiveMetrics>>,
    /// The progress line's announcer, for the model and the judges.
    pub announce: Announcer,
    progress: Progress,
    sysmon: Result<Sysmon, SysmonError>,
    servermon: Option<Result<ServerMon, ServerMonError>>,
    metrics_server: Option<MetricsServer>,
    dashboard: Option<Dashboard>,
    /// The `-d` timer and the `--abort-on-fail` judge: they end with the load.
    clocks: Vec<tokio::task::JoinHandle<()>>,
    level_watch: Option<tokio::task::JoinHandle<Option<Abort>>>,
}

/// What serves past the load: a last scrape or look sees the final counts.
pub(super) struct Serving {
    pub metrics_server: Option<MetricsServer>,
    /// `--dashboard` / `--dashboard-out`: sampling until the run is finished.
    pub dashboard: Option<Dashboard>,
}

impl Services {
    /// Starts every service before the first worker: the live views (the endpoint, the
    /// page), the banner, a capacity level's watch, the progress line, `--abort-on-fail`, the
    /// monitors (the client's, the server's scraper), and last the `-d` timer.
    pub fn start(
        config: &RunConfig,
        (target, output): (&PreparedTarget, &RunOutput),
        (listeners, live): (Listeners, Arc<LiveCounters>),
        stop: &StopSignal,
    ) -> Result<Self, RunError> {
        // The server's rows as its scraper takes them, for a live page to read.
        let scraped = (!config.evidence.server_metrics.sources.is_empty())
            .then(servermon::RowsSoFar::default);
        let (live_metrics, metrics_server, dashboard) =
            serve_live(listeners, config, (target, output), &live, scraped.clone())?;
        if config.output.banner {
            eprintln!("{}", banner(config, target));
        }
        // A capacity level's watch, over its samples as the writer hands them over.
        let level_watch = (config.judgement.level.as_ref())
            .zip(output.watched.clone())
            .map(|(level, samples)| {
                LevelWatch::new(level.slos.clone()).spawn(samples, stop.clone())
            });
        let progress = Progress::start(
            config.output.progress,
            config.model.plan().extent(),
            live.clone(),
        );
        let announce = progress.announcer(!config.output.json);
        // `--abort-on-fail`, on the writer's aggregates so far.
        let judge = config
            .abort_after
            .zip(output.published.clone())
            .map(|(after, published)| {
                let judged = (config.thresholds.clone(), output.labels.ops.clone());
                thresholds::abort_on_fail(after, judged, published, stop.clone(), announce.clone())
            });
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
        let servermon = scraped.map(|rows| {
            servermon::start(ServerMonConfig {
                path: output.run_dir.join("server-metrics.parquet"),
                sources: config.evidence.server_metrics.sources.clone(),
                interval: servermon::INTERVAL,
                timeout: config.evidence.server_metrics.timeout,
                anchor: output.identity.anchor,
                rows,
            })
        });
        // `-d` drains the run when it elapses: started last, as the load starts.
        let timer = config.duration_limit().map(|after| stop.drain_after(after));
        Ok(Services {
            anchor: output.identity.anchor,
            live,
            live_metrics,
            announce,
            progress,
            sysmon,
            servermon,
            metrics_server,
            dashboard,
            clocks: [timer, judge].into_iter().flatten().collect(),
            level_watch,
        })
    }

    /// Once the load is over: stops the clocks and judges and clears the progress line;
    /// what still serves is handed on beside what ended.
    pub fn stop(self) -> (Stopped, Serving) {
        for task in self.clocks {
            task.abort();
        }
        self.progress.finish();
        let stopped = Stopped {
            live: self.live,
            sysmon: self.sysmon,
            servermon: self.servermon,
            level_watch: self.level_watch,
        };
        let serving = Serving {
            metrics_server: self.metrics_server,
            dashboard: self.dashboard,
        };
        (stopped, serving)
    }
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
