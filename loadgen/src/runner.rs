//! One run, end to end: check the target, create the run directory, start the writer, the
//! workers and the progress line, stop on time or on a signal, and write the summary.
//!
//! This is the only place that knows about all the parts; each part knows only its neighbours.
//! Nothing is written to disk until the target has answered a TCP connect, so bad input never
//! leaves an empty run behind pretending to be a result.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::clock::Anchor;
use crate::config::{ConfigError, Output, ResolvedConfig, RunConfig, Target, TargetUrl};
use crate::model::ModelPlan;
use crate::record::ErrorClass;
use crate::record::SCHEMA_VERSION;
use crate::report::{console, progress::Progress, write_json_atomically, OpenSummary, RunSummary};
use crate::shard::Shard;
use crate::stats::LiveCounters;
use crate::stop::{ExitReason, StopSignal};
use crate::store::s3::{S3Error, S3Store, UploadReport};
use crate::store::writer::{self, RecordError, WriterConfig};
use crate::sysmon::cgroup::Cgroup;
use crate::sysmon::link;
use crate::sysmon::{self, ClientSummary, SysmonConfig};
use crate::transport::tls::{self, TlsSetupError, Verify};
use crate::transport::{probe, ConnectFailure, Origin, Redirects, TransportConfig};
use crate::worker::{WorkerContext, WorkerPool};
use std::sync::atomic::Ordering;

/// Why a run could not be carried out. [`RunError::exit_code`] maps each to the process exit.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("cannot resolve host '{host}' of --url {url} ({reason}); check the host name")]
    Dns {
        url: String,
        host: String,
        reason: String,
    },
    #[error(
        "cannot connect to {url} ({addr}): {source}; is the server running and is the URL right?"
    )]
    Unreachable {
        url: String,
        addr: SocketAddr,
        #[source]
        source: ConnectFailure,
    },
    #[error("cannot connect securely to {url}: {detail}; if the server uses a private or self-signed certificate, trust its CA with --cacert FILE (or skip verification with --insecure)")]
    Certificate { url: String, detail: String },
    #[error(transparent)]
    TlsSetup(#[from] TlsSetupError),
    #[error("stopped while waiting for --start-at; nothing was run")]
    NotStarted(ExitReason),
    #[error("--out {0} already exists and is not empty; choose a new directory or remove it")]
    OutExists(PathBuf),
    #[error(
        "{workers} workers need about {needed} open files but the limit is {limit} and loadgen \
         cannot raise it (it is the hard limit); raise it with `ulimit -n {needed}` (or in \
         /etc/security/limits.conf) or use fewer workers"
    )]
    OpenFiles {
        workers: u32,
        needed: u64,
        limit: u64,
    },
    #[error(
        "cannot create run directory {path}: {source}; choose a writable directory with --out"
    )]
    RunDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the embedded reference server: {0}")]
    EmbeddedServer(#[source] std::io::Error),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error(
        "{source}; the run stopped there: the {kept} segment(s) closed before it in {} are \
         complete, later requests were not kept and no run.json was written",
        dir.display()
    )]
    RecordsLost {
        #[source]
        source: RecordError,
        /// The `requests/` directory.
        dir: PathBuf,
        /// Complete segments in it.
        kept: usize,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    S3(#[from] S3Error),
}

impl RunError {
    /// 2 for input the user can fix before anything ran; 1 for failures during the run;
    /// 130/143 for a signal while waiting for `--start-at`.
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::NotStarted(reason) => reason.exit_code(),
            RunError::Config(_)
            | RunError::Dns { .. }
            | RunError::Unreachable { .. }
            | RunError::Certificate { .. }
            | RunError::TlsSetup(_)
            | RunError::OutExists(_)
            | RunError::OpenFiles { .. }
            | RunError::RunDir { .. }
            | RunError::S3(_) => 2,
            RunError::EmbeddedServer(_)
            | RunError::Record(_)
            | RunError::RecordsLost { .. }
            | RunError::Write { .. } => 1,
        }
    }
}

/// What a finished run produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The local run directory (with `--out s3://`, the staging directory, removed once
    /// everything is uploaded).
    pub run_dir: PathBuf,
    /// Where the results are: the run directory, or its `s3://` URL.
    pub location: String,
    /// Files that could not be uploaded to S3, with why (they stay in `run_dir`).
    pub upload_failures: Vec<String>,
    pub run_id: String,
    pub summary: RunSummary,
    pub exit_reason: ExitReason,
    /// The console table, as printed when `--json` is not given.
    pub console: String,
    /// The run.json document.
    pub run_json: serde_json::Value,
}

impl RunOutcome {
    /// The process exit code: the exit reason's, or 1 when results did not reach S3.
    pub fn exit_code(&self) -> i32 {
        match (
            self.exit_reason.exit_code(),
            self.upload_failures.is_empty(),
        ) {
            (0, false) => 1,
            (code, _) => code,
        }
    }
}

/// The machine the client ran on.
#[derive(Debug, Clone, Serialize)]
pub struct HostInfo {
    pub hostname: String,
    pub os: String,
    pub arch: String,
    pub cpus: usize,
}

impl HostInfo {
    pub fn current() -> Self {
        HostInfo {
            hostname: gethostname::gethostname().to_string_lossy().into_owned(),
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// What run.json says of a run from its first request on: the part the first run.json
/// uploaded to S3 shares with the final one.
#[derive(Debug, Serialize)]
struct RunIdentity<'a> {
    schema_version: u32,
    kind: &'static str,
    loadgen_version: &'static str,
    run_id: &'a str,
    created_at: String,
    anchor_unix_ns: i64,
    host: &'a HostInfo,
    config: &'a ResolvedConfig,
    /// `i/N` (`0/1` when not sharded).
    shard: String,
    /// `--start-at` as Unix nanoseconds, and how late the run actually started after it
    /// (the clock skew between shards shows in the analysis through this and the anchor).
    #[serde(skip_serializing_if = "Option::is_none")]
    start_at_unix_ns: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_offset_ns: Option<i64>,
}

#[derive(Debug, Serialize)]
struct RunJson<'a> {
    #[serde(flatten)]
    identity: &'a RunIdentity<'a>,
    exit_reason: ExitReason,
    exit_code: i32,
    summary: &'a RunSummary,
    records: RecordsInfo,
    warnings: &'a [String],
    /// Client CPU, memory and saturation (from client-metrics.parquet).
    client: Option<&'a ClientSummary>,
}

/// The first run.json of a run written to S3, before any request.
#[derive(Debug, Serialize)]
struct StartedRunJson<'a> {
    #[serde(flatten)]
    identity: &'a RunIdentity<'a>,
    exit_reason: &'static str,
}

#[derive(Debug, Serialize)]
struct RecordsInfo {
    rows: u64,
    bytes_on_disk: u64,
    segments: Vec<String>,
}

/// Runs a closed-model load test. `stop` lets the caller (signal handler, test) stop it early.
pub async fn run(config: RunConfig, stop: StopSignal) -> Result<RunOutcome, RunError> {
    let mut warnings = Vec::new();
    if let Some(warning) = check_open_files(&config)? {
        eprintln!("warning: {warning}");
        warnings.push(warning);
    }

    // The target: the embedded server, or the user's, which must answer before we go on.
    let embedded = match config.target {
        Target::Embedded => Some(
            servers::start(servers::ServerConfig::default())
                .await
                .map_err(RunError::EmbeddedServer)?,
        ),
        Target::Url(_) => None,
    };
    let target = match (&config.target, &embedded) {
        (Target::Url(url), _) => url.clone(),
        (Target::Embedded, Some(server)) => TargetUrl::parse(&format!("{}/", server.url()))?,
        (Target::Embedded, None) => unreachable!("embedded server started above"),
    };
    let addr = resolve(&target).await?;
    let origin = origin(&target, addr, &config)?;
    probe(&origin, config.connect_timeout)
        .await
        .map_err(|source| match source.class {
            ErrorClass::Tls => RunError::Certificate {
                url: target.url.clone(),
                detail: source.detail,
            },
            _ => RunError::Unreachable {
                url: target.url.clone(),
                addr,
                source,
            },
        })?;
    // Looked up before --start-at, so the shards' first requests are not delayed by it.
    let cgroup = Cgroup::discover();
    let target_interface = link::target_interface(addr);
    if origin.tls.is_some() && config.connection.verify == Verify::Insecure {
        warnings.push("--insecure: the server's TLS certificate was not verified".to_string());
    }

    // Results that cannot be stored are no results: check the bucket before the load.
    let s3 = match &config.out {
        Output::S3(location) => Some(S3Store::connect(location).await?),
        _ => None,
    };
    if let Some(start_at) = config.start_at_unix_ns {
        wait_until(start_at, &stop).await?;
    }
    let run_id = match config.shard.is_whole() {
        true => new_run_id(),
        false => format!(
            "{}-shard-{}-of-{}",
            new_run_id(),
            config.shard.index,
            config.shard.count
        ),
    };
    let (run_dir, location) = match &config.out {
        Output::Default => (create_run_dir(None, &run_id)?, None),
        Output::Dir(dir) => (create_run_dir(Some(dir), &run_id)?, None),
        Output::S3(location) => {
            let staging = std::env::temp_dir().join(format!("loadgen-{run_id}"));
            (
                create_run_dir(Some(&staging), &run_id)?,
                Some(location.run_url(&run_id)),
            )
        }
    };
    let location = location.unwrap_or_else(|| run_dir.display().to_string());
    let resolved = config.resolved(&target.url);
    let host = HostInfo::current();
    let labels = config.workload.labels();
    let phase_labels = config.model.phase_labels();
    let anchor = Anchor::now();
    let identity = RunIdentity {
        schema_version: SCHEMA_VERSION,
        kind: "run",
        loadgen_version: env!("CARGO_PKG_VERSION"),
        run_id: &run_id,
        created_at: chrono::DateTime::<chrono::Utc>::from(
            std::time::UNIX_EPOCH + std::time::Duration::from_nanos(anchor.unix_ns as u64),
        )
        .to_rfc3339(),
        anchor_unix_ns: anchor.unix_ns,
        host: &host,
        config: &resolved,
        shard: config.shard.to_string(),
        start_at_unix_ns: config.start_at_unix_ns,
        start_offset_ns: config.start_at_unix_ns.map(|t| anchor.unix_ns - t),
    };
    let mirror = match &s3 {
        Some(s3) => {
            // A first run.json, so the segments of a machine lost mid-run can still be read.
            let started = StartedRunJson {
                identity: &identity,
                exit_reason: "running",
            };
            let text = serde_json::to_vec_pretty(&started).expect("plain data");
            if let Err(e) = s3.put(&run_id, "run.json", text).await {
                let _ = std::fs::remove_dir_all(&run_dir);
                return Err(e.into());
            }
            Some(s3.mirror(&run_id, &run_dir))
        }
        None => None,
    };
    let (closed, mirror) = mirror.unzip();

    let (records, writer) = writer::spawn(WriterConfig {
        dir: run_dir.join("requests"),
        metadata: parquet_metadata(
            &run_id,
            &anchor,
            &resolved,
            &host,
            config.shard,
            config.start_at_unix_ns,
        ),
        ops: labels.clone(),
        phases: phase_labels.clone(),
        segment_interval: config.segment_interval,
        max_attempts: config.model.max_attempts(),
        max_lateness_ns: config
            .model
            .max_lateness()
            .map_or(i64::MAX, crate::clock::nanos),
        closed,
    })?;

    let live = Arc::new(LiveCounters::default());
    let sysmon = sysmon::start(SysmonConfig {
        path: run_dir.join("client-metrics.parquet"),
        interval: std::time::Duration::from_secs(1),
        anchor,
        live: live.clone(),
        cgroup,
        target_interface: target_interface.clone(),
    });
    let ctx = Arc::new(WorkerContext {
        anchor,
        workload: config.workload.clone(),
        live: live.clone(),
        stop: stop.clone(),
    });
    let transport = Arc::new(TransportConfig {
        origin,
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
    });
    let header = format!(
        "loadgen {} — {}, against {}{}",
        env!("CARGO_PKG_VERSION"),
        config.model.describe(),
        target.url,
        if embedded.is_some() {
            " (embedded loadgen-server)"
        } else {
            ""
        },
    );
    if !config.json {
        eprintln!(
            "running {} against {} — Ctrl-C stops and keeps every completed request",
            config.model.describe(),
            target.url
        );
    }
    let extent = config.model.extent();
    let progress = Progress::start(config.progress, extent, live.clone());
    let announce = progress.announcer(!config.json);

    let mut pool = WorkerPool::new(ctx.clone(), transport, records, config.shard);
    // `-d` (a closed model's duration, or a cap on any other model) drains the run.
    let timer = config.duration_limit().map(|duration| {
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            stop.drain(ExitReason::DurationElapsed);
        })
    });
    // A model stops starting workers as soon as the run drains; workers already running
    // finish (or are cut off after the grace period).
    let fields = config.workload.phase_fields[0].clone();
    tokio::select! {
        _ = config.model.clone().drive(&mut pool, config.think_time, &stop, announce, &fields) => {}
        _ = stop.draining() => {}
    }
    pool.wait_all(config.grace).await;
    drop(pool);
    if let Some(timer) = timer {
        timer.abort();
    }
    progress.finish();
    drop(ctx);
    let client = match sysmon.and_then(|s| s.finish()) {
        Ok(mut client) => {
            // The server runs on the client's cores: a saturated client starves it too.
            client.set_shared_with(match embedded {
                Some(_) => Some("the embedded server"),
                None if addr.ip().is_loopback() => Some("the server on this machine (loopback)"),
                None => None,
            });
            (client.link_capacity_bps, client.link_capacity_source) =
                link::link_capacity(config.link_capacity_bps, target_interface.as_deref());
            warnings.extend(client.warning());
            Some(client)
        }
        Err(e) => {
            warnings.push(format!("no client metrics: {e}"));
            None
        }
    };

    let report = tokio::task::spawn_blocking(move || writer.finish())
        .await
        .map_err(|_| RecordError::Panicked)?
        .map_err(|source| {
            let dir = run_dir.join("requests");
            RunError::RecordsLost {
                kept: complete_segments(&dir),
                dir,
                source,
            }
        })?;
    let exit_reason = stop.reason().unwrap_or(ExitReason::Completed);
    let open = config.model.max_lateness().map(|max_lateness| OpenSummary {
        scheduled: live.scheduled.load(Ordering::Relaxed),
        dropped: live.dropped.load(Ordering::Relaxed),
        late: report.stats.late,
        max_lateness_ns: crate::clock::nanos(max_lateness),
    });
    let summary = RunSummary::from_stats(
        &report.stats,
        &labels,
        &phase_labels,
        live.handoff_blocked_ns.load(Ordering::Relaxed),
        open,
    );
    if let Some(server) = embedded {
        server.shutdown().await;
    }

    let run_json = serde_json::to_value(RunJson {
        identity: &identity,
        exit_reason,
        exit_code: exit_reason.exit_code(),
        summary: &summary,
        records: RecordsInfo {
            rows: report.rows,
            bytes_on_disk: report.bytes_on_disk,
            segments: report
                .segments
                .iter()
                .filter_map(|p| p.strip_prefix(&run_dir).ok())
                .map(|p| p.display().to_string())
                .collect(),
        },
        warnings: &warnings,
        client: client.as_ref(),
    })
    .expect("run.json is plain data");
    let run_json_path = run_dir.join("run.json");
    write_json_atomically(&run_json_path, &run_json).map_err(|source| RunError::Write {
        path: run_json_path,
        source,
    })?;

    let mut upload = UploadReport::default();
    if let (Some(s3), Some(mirror)) = (&s3, mirror) {
        upload = mirror.finish().await;
        for relative in ["client-metrics.parquet", "run.json"] {
            if run_dir.join(relative).exists() {
                upload.record(relative, s3.put_file(&run_id, &run_dir, relative).await);
            }
        }
        if upload.failed.is_empty() {
            let _ = std::fs::remove_dir_all(&run_dir);
        } else {
            warnings.push(format!(
                "{} file(s) did not reach {location}; the whole run is kept in {}: {}",
                upload.failed.len(),
                run_dir.display(),
                upload.failed.join("; ")
            ));
        }
    }

    let mut footer = vec![
        ("Run directory", location.clone()),
        (
            "Records",
            format!(
                "{} rows in {} segment(s), {}",
                report.rows,
                report.segments.len(),
                crate::units::bytes(report.bytes_on_disk)
            ),
        ),
        ("Ended", exit_reason_text(exit_reason).to_string()),
    ];
    if let Some(client) = &client {
        footer.push(("Client", client.console_line()));
    }
    for warning in &warnings {
        footer.push(("Warning", warning.clone()));
    }
    let console = console::render(&summary, &header, &footer);
    Ok(RunOutcome {
        run_dir,
        location,
        upload_failures: upload.failed,
        run_id,
        summary,
        exit_reason,
        console,
        run_json,
    })
}

async fn resolve(target: &TargetUrl) -> Result<SocketAddr, RunError> {
    let dns = |reason: String| RunError::Dns {
        url: target.url.clone(),
        host: target.host.clone(),
        reason,
    };
    let mut addrs = tokio::net::lookup_host((target.host.as_str(), target.port))
        .await
        .map_err(|e| dns(e.to_string()))?;
    addrs.next().ok_or_else(|| dns("no addresses".to_string()))
}

/// The target as the transport connects to it, with TLS settings for `https://`.
fn origin(target: &TargetUrl, addr: SocketAddr, config: &RunConfig) -> Result<Origin, RunError> {
    let tls = match target.scheme {
        "https" => Some(tls::client_config(
            &config.connection.verify,
            config.connection.http2,
        )?),
        _ => None,
    };
    let server_name =
        rustls::pki_types::ServerName::try_from(target.host.clone()).map_err(|e| {
            ConfigError::BadUrl {
                url: target.url.clone(),
                reason: e.to_string(),
            }
        })?;
    Ok(Origin {
        scheme: target.scheme,
        addr,
        authority: hyper::header::HeaderValue::from_str(&target.authority).map_err(|e| {
            ConfigError::BadUrl {
                url: target.url.clone(),
                reason: e.to_string(),
            }
        })?,
        server_name,
        tls,
    })
}

/// Sleeps until the wall-clock instant `unix_ns` (`--start-at`). A stop while waiting ends
/// the run before anything was sent or written.
async fn wait_until(unix_ns: i64, stop: &StopSignal) -> Result<(), RunError> {
    let now_ns = crate::clock::Anchor::now().unix_ns;
    let wait = std::time::Duration::from_nanos(unix_ns.saturating_sub(now_ns).max(0) as u64);
    if !wait.is_zero() {
        eprintln!(
            "waiting {} for --start-at",
            humantime::format_duration(std::time::Duration::from_millis(wait.as_millis() as u64))
        );
    }
    tokio::select! {
        () = tokio::time::sleep(wait) => Ok(()),
        () = stop.draining() => Err(RunError::NotStarted(stop.reason().unwrap_or(ExitReason::Interrupted))),
    }
}

fn new_run_id() -> String {
    let now = chrono::Utc::now();
    // Sub-second digits keep two runs started in the same second apart.
    format!(
        "{}-{:04}",
        now.format("%Y%m%dT%H%M%SZ"),
        now.timestamp_subsec_micros() % 10_000
    )
}

/// Creates the run directory and claims it for this run. The claim is `requests/`, made with
/// `create_dir`, which fails when it exists: of two runs given one `--out` at once exactly one
/// gets it (checking for an empty directory, then creating, let both through).
fn create_run_dir(out: Option<&Path>, run_id: &str) -> Result<PathBuf, RunError> {
    let dir = match out {
        Some(dir) => dir.to_path_buf(),
        None => Path::new("runs").join(run_id),
    };
    // A directory holding earlier results is refused before anything is made in it.
    if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(RunError::OutExists(dir));
    }
    let existed = dir.exists();
    let claimed =
        std::fs::create_dir_all(&dir).and_then(|()| std::fs::create_dir(dir.join("requests")));
    match claimed {
        Ok(()) => Ok(dir),
        // Another run claimed it between the check above and now.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(RunError::OutExists(dir)),
        Err(source) => {
            // Leave nothing behind: remove the directory if we made it (and it is still empty).
            if !existed {
                let _ = std::fs::remove_dir(&dir);
            }
            Err(RunError::RunDir { path: dir, source })
        }
    }
}

/// Complete segments (`part-NNNNN.parquet`, not the hidden `.partial` ones) in `dir`.
fn complete_segments(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(|e| e.ok())
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                !name.starts_with('.') && name.ends_with(".parquet")
            })
            .count()
    })
}

fn parquet_metadata(
    run_id: &str,
    anchor: &Anchor,
    resolved: &ResolvedConfig,
    host: &HostInfo,
    shard: Shard,
    start_at_unix_ns: Option<i64>,
) -> Vec<(String, String)> {
    let mut metadata = vec![
        ("loadgen.schema_version".into(), SCHEMA_VERSION.to_string()),
        ("loadgen.version".into(), env!("CARGO_PKG_VERSION").into()),
        ("loadgen.run_id".into(), run_id.into()),
        ("loadgen.anchor_unix_ns".into(), anchor.unix_ns.to_string()),
        (
            "loadgen.scenario".into(),
            toml::to_string(resolved).unwrap_or_default(),
        ),
        (
            "loadgen.host".into(),
            serde_json::to_string(host).unwrap_or_default(),
        ),
        ("loadgen.shard".into(), shard.to_string()),
    ];
    // So the shards of one run find each other even when a lost process left no run.json.
    if let Some(start_at) = start_at_unix_ns {
        metadata.push(("loadgen.start_at_unix_ns".into(), start_at.to_string()));
    }
    metadata
}

/// Raises the soft open-files limit to the hard one, then checks that the run's connections
/// fit under it. A model that will open its workers' connections is refused when they do
/// not fit (the run would be mostly `too_many_open_files` rows); the open model's
/// `--max-in-flight` is only a cap, reached when the server falls behind, so it gets a
/// warning instead.
fn check_open_files(config: &RunConfig) -> Result<Option<String>, RunError> {
    // Headroom for the runtime, the writer, the sampler and stdio.
    const SPARE_FDS: u64 = 64;
    let Ok(limit) = rlimit::increase_nofile_limit(u64::MAX) else {
        return Ok(None);
    };
    let workers = config.model.max_workers();
    let mut connections = u64::from(workers);
    if config.connection.http2 {
        let streams = u64::from(config.connection.streams_per_connection.max(1));
        connections = connections.div_ceil(streams);
    }
    if matches!(config.target, Target::Embedded) {
        // The embedded server holds the other end of every connection in this process.
        connections *= 2;
    }
    let needed = connections + SPARE_FDS;
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

fn exit_reason_text(reason: ExitReason) -> &'static str {
    match reason {
        ExitReason::Completed => "all requests sent",
        ExitReason::DurationElapsed => "duration elapsed",
        ExitReason::Interrupted => "interrupted (Ctrl-C); every completed request is recorded",
        ExitReason::Terminated => "terminated (SIGTERM); every completed request is recorded",
        ExitReason::WriterFailed => "the record writer failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 13: two runs given one `--out` at once both ran and overwrote each other's
    /// segments. Many claims race here at once on each directory: exactly one may win.
    #[test]
    fn two_runs_claiming_one_out_dir_second_is_refused() {
        let root = tempfile::tempdir().unwrap();
        for round in 0..50 {
            let dir = root.path().join(format!("out-{round}"));
            let claimants = 8;
            let barrier = std::sync::Barrier::new(claimants);
            let results: Vec<_> = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..claimants)
                    .map(|_| {
                        scope.spawn(|| {
                            barrier.wait();
                            create_run_dir(Some(&dir), "unused")
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let won = results.iter().filter(|r| r.is_ok()).count();
            assert_eq!(
                won,
                1,
                "round {round}: {won} runs claimed {}",
                dir.display()
            );
            for lost in results.iter().filter_map(|r| r.as_ref().err()) {
                assert!(matches!(lost, RunError::OutExists(_)), "{lost}");
                assert_eq!(lost.exit_code(), 2);
            }
        }
    }
}
