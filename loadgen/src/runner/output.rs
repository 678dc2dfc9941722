//! The second part of a run's preparation: where its results go. Wait for `--start-at`, name
//! the run, claim its directory (or the S3 staging directory and a first run.json in the bucket),
//! and start the writer thread that turns records into segments. Also the run's identity: what
//! run.json and every segment's metadata say of the run from its first request on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::target::PreparedTarget;
use super::RunError;
use crate::clock::Anchor;
use crate::config::{Output, ResolvedConfig, RunConfig};
use crate::record::{Labels, SCHEMA_VERSION};
use crate::shard::Shard;
use crate::stats::samples::{SampleLog, SampleReceiver};
use crate::stats::{Aggregator, Published};
use crate::stop::{ExitReason, StopSignal};
use crate::store::s3::{Mirror, S3Error, S3Store, FIRST_UPLOAD_TIMEOUT};
use crate::store::writer::{self, RecordSender, WriterConfig, WriterThread};

/// A claimed run directory (its writer runs beside it).
pub(super) struct RunOutput {
    pub run_id: String,
    /// The local run directory (with `--out s3://`, the staging directory).
    pub run_dir: PathBuf,
    /// Where the results are: the run directory, or its `s3://` URL.
    pub location: String,
    pub identity: RunIdentity,
    pub s3: Option<S3Store>,
    pub mirror: Option<Mirror>,
    /// What the rows' `op`, `phase` and `check` indexes stand for.
    pub labels: Labels,
    /// The writer's aggregates so far, for `--abort-on-fail` to judge.
    pub published: Option<Arc<Published>>,
    /// A capacity level: the rows' samples as the writer hands them over, for its watcher.
    pub watched: Option<SampleReceiver>,
}

impl RunOutput {
    /// Claims the run's directory and starts its writer; returns the sender workers hand
    /// their records to and the writer's thread. Results that cannot be stored are no results: the bucket is checked
    /// before the load.
    pub async fn create(
        config: &RunConfig,
        target: &PreparedTarget,
        stop: &StopSignal,
    ) -> Result<(Self, RecordSender, WriterThread), RunError> {
        let s3 = match &config.output.out {
            Output::S3(location) => Some(S3Store::connect(location).await?),
            _ => None,
        };
        // A directory given with --out is claimed before waiting for --start-at, so a second
        // run given the same one is refused at once, not at the start instant.
        let claimed = match &config.output.out {
            Output::Dir(dir) => Some((dir.exists(), create_run_dir(Some(dir), "")?)),
            _ => None,
        };
        if let (Some(start_at), true) = (
            config.sharding.start_at_unix_ns,
            config.sharding.waits_for_start_at,
        ) {
            if let Err(stopped) = wait_until(start_at, stop).await {
                // Stopped before the start: leave the directory as it was.
                if let Some((existed, dir)) = &claimed {
                    let _ = std::fs::remove_dir(dir.join("requests"));
                    if !existed {
                        let _ = std::fs::remove_dir(dir);
                    }
                }
                return Err(stopped);
            }
        }
        let claimed = claimed.map(|(_, dir)| dir);
        let run_id = run_id(config.sharding.shard);
        let (run_dir, location) = match claimed {
            Some(dir) => (dir.clone(), dir.display().to_string()),
            None => claim_run_dir(&config.output.out, &run_id)?,
        };
        let identity = RunIdentity::new(config, &run_id, &target.url.url);
        let labels = run_labels(config);
        // The aggregates so far: for `--abort-on-fail`'s judge and a live page's verdict.
        let published = (config.abort_after.is_some() || config.output.dashboard.wanted())
            .then(|| Arc::new(Published::default()));
        let (samples, watched) = sample_log(config);
        let mut writing = WriterConfig {
            dir: run_dir.join("requests"),
            metadata: identity.parquet_metadata(),
            stats: empty_aggregates(config, &labels),
            labels: labels.clone(),
            segment_interval: config.output.segment_interval,
            closed: None,
            publish: published.clone().map(|p| (p, publish_every(config))),
            samples,
        };
        // With `--out s3://`, the writer hands each closed segment to the mirror.
        let mirror = match &s3 {
            Some(s3) => {
                let (closed, mirror) = start_mirror(s3, &identity, &run_dir, stop).await?;
                writing.closed = Some(closed);
                Some(mirror)
            }
            None => None,
        };
        let (records, writer) = writer::spawn(writing)?;
        let output = RunOutput {
            run_id,
            run_dir,
            location,
            identity,
            s3,
            mirror,
            labels,
            published,
            watched,
        };
        Ok((output, records, writer))
    }
}

/// What the rows' `op`, `phase` and `check` indexes stand for in a run of `config`: the
/// writer's dictionaries, the summary's names, and the labels a spread run's parent reads a
/// lost process's rows back with.
pub(super) fn run_labels(config: &RunConfig) -> Labels {
    Labels {
        ops: config.workload.labels(),
        phases: config.model.plan().phase_labels(),
        checks: config.workload.check_names.clone(),
    }
}

/// The aggregates of a run of `config` before any row — its attempts (a failed row of the
/// last one failed for good), its open model's lateness, its warm-up left out — which the
/// writer counts every row into, and a spread run's parent a lost process's rows read back.
pub(super) fn empty_aggregates(config: &RunConfig, labels: &Labels) -> Aggregator {
    let plan = config.model.plan();
    Aggregator::new(
        labels.ops.len(),
        labels.phases.len(),
        labels.checks.len(),
        plan.max_attempts(),
        plan.max_lateness().map_or(i64::MAX, crate::clock::nanos),
    )
    .leaving_out(plan.warmup_phase())
}

/// The writer's log of samples, when the run's judgement needs them: an open run (its
/// schedule), or a workflow that asks (a calibration, a capacity level); a capacity level's
/// are handed over as they come, for its watcher.
fn sample_log(config: &RunConfig) -> (Option<SampleLog>, Option<SampleReceiver>) {
    let judgement = &config.judgement;
    let open = config.model.plan().max_lateness().is_some();
    if !(open || judgement.keep_samples || judgement.level.is_some()) {
        return (None, None);
    }
    let (watcher, watched) = match judgement.level {
        Some(_) => {
            let (tx, rx) = flume::unbounded();
            (Some(tx), Some(rx))
        }
        None => (None, None),
    };
    let log = SampleLog::new(config.model.plan().warmup_phase(), watcher);
    (Some(log), watched)
}

/// The run id: a UTC timestamp, with the shard when sharded.
fn run_id(shard: Shard) -> String {
    match shard.is_whole() {
        true => new_run_id(),
        false => format!("{}-shard-{}-of-{}", new_run_id(), shard.index, shard.count),
    }
}

/// The local directory of the run and where its results will be (`s3://…` or the directory).
fn claim_run_dir(out: &Output, run_id: &str) -> Result<(PathBuf, String), RunError> {
    let (run_dir, location) = match out {
        Output::Default => (create_run_dir(None, run_id)?, None),
        Output::Dir(dir) => (create_run_dir(Some(dir), run_id)?, None),
        Output::S3(location) => {
            let staging = std::env::temp_dir().join(format!("loadgen-{run_id}"));
            let dir = create_run_dir(Some(&staging), run_id).map_err(|e| match e {
                RunError::RunDir { path, source } => RunError::Staging { path, source },
                other => other,
            })?;
            (dir, Some(location.run_url(run_id)))
        }
    };
    let location = location.unwrap_or_else(|| run_dir.display().to_string());
    Ok((run_dir, location))
}

/// A first run.json in the bucket, so the segments of a machine lost mid-run can still be
/// read; then the mirror that uploads each segment as the writer closes it.
async fn start_mirror(
    s3: &S3Store,
    identity: &RunIdentity,
    run_dir: &Path,
    stop: &StopSignal,
) -> Result<(crate::store::s3::SegmentSender, Mirror), RunError> {
    let started = StartedRunJson {
        identity,
        exit_reason: "running",
    };
    let text = serde_json::to_vec_pretty(&started).expect("plain data");
    let put = tokio::time::timeout(
        FIRST_UPLOAD_TIMEOUT,
        s3.put(&identity.run_id, "run.json", text),
    );
    let failed = tokio::select! {
        put = put => match put {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.into()),
            Err(_) => Some(S3Error::Hanging {
                location: s3.location().to_string(),
                waited: FIRST_UPLOAD_TIMEOUT,
            }.into()),
        },
        () = stop.draining() => Some(RunError::NotStarted(stop.reason().unwrap_or(ExitReason::Interrupted))),
    };
    if let Some(error) = failed {
        let _ = std::fs::remove_dir_all(run_dir);
        return Err(error);
    }
    Ok(s3.mirror(&identity.run_id, run_dir))
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
pub(super) struct RunIdentity {
    schema_version: u32,
    kind: &'static str,
    loadgen_version: &'static str,
    pub run_id: String,
    created_at: String,
    anchor_unix_ns: i64,
    host: HostInfo,
    config: ResolvedConfig,
    /// `i/N` (`0/1` when not sharded).
    shard: String,
    connections: Connections,
    /// `--start-at` as Unix nanoseconds, and how late the run actually started after it
    /// (the clock skew between shards shows in the analysis through this and the anchor).
    #[serde(skip_serializing_if = "Option::is_none")]
    start_at_unix_ns: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_offset_ns: Option<i64>,
    /// The instant every `*_ns` time of the run counts from.
    #[serde(skip)]
    pub anchor: Anchor,
}

/// run.json's `connections`: how the workers' connections were opened.
#[derive(Debug, Serialize)]
struct Connections {
    connect_rate_per_s: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    source_addrs: Vec<std::net::IpAddr>,
}

impl RunIdentity {
    /// The run starts now: its anchor instant is taken here.
    fn new(config: &RunConfig, run_id: &str, target_url: &str) -> Self {
        let anchor = Anchor::now();
        RunIdentity {
            schema_version: SCHEMA_VERSION,
            kind: "run",
            loadgen_version: env!("CARGO_PKG_VERSION"),
            run_id: run_id.to_string(),
            created_at: chrono::DateTime::<chrono::Utc>::from(
                std::time::UNIX_EPOCH + std::time::Duration::from_nanos(anchor.unix_ns as u64),
            )
            .to_rfc3339(),
            anchor_unix_ns: anchor.unix_ns,
            host: HostInfo::current(),
            config: config.resolved(target_url),
            shard: config.sharding.shard.to_string(),
            connections: Connections {
                connect_rate_per_s: config.connection.connect_rate_per_s,
                source_addrs: config.connection.source_addrs.clone(),
            },
            start_at_unix_ns: config.sharding.start_at_unix_ns,
            start_offset_ns: (config.sharding.start_at_unix_ns)
                .filter(|_| config.sharding.waits_for_start_at)
                .map(|t| anchor.unix_ns - t),
            anchor,
        }
    }

    /// A spread run's identity, made by its parent (which holds no connection): its
    /// processes' earliest anchor, their `--start-at` and source addresses.
    pub(super) fn spread(
        config: &RunConfig,
        run_id: &str,
        target_url: &str,
        (anchor_unix_ns, start_at_unix_ns): (i64, i64),
    ) -> Self {
        let mut identity = Self::new(config, run_id, target_url);
        identity.anchor_unix_ns = anchor_unix_ns;
        identity.created_at =
            chrono::DateTime::<chrono::Utc>::from_timestamp_nanos(anchor_unix_ns).to_rfc3339();
        identity.start_at_unix_ns = Some(start_at_unix_ns);
        identity.start_offset_ns = Some(anchor_unix_ns - start_at_unix_ns);
        identity
    }

    /// The `loadgen.*` key-value metadata of every segment.
    fn parquet_metadata(&self) -> Vec<(String, String)> {
        let mut metadata = vec![
            ("loadgen.schema_version".into(), SCHEMA_VERSION.to_string()),
            ("loadgen.version".into(), env!("CARGO_PKG_VERSION").into()),
            ("loadgen.run_id".into(), self.run_id.clone()),
            (
                "loadgen.anchor_unix_ns".into(),
                self.anchor_unix_ns.to_string(),
            ),
            (
                "loadgen.scenario".into(),
                toml::to_string(&self.config).unwrap_or_default(),
            ),
            (
                "loadgen.host".into(),
                serde_json::to_string(&self.host).unwrap_or_default(),
            ),
            ("loadgen.shard".into(), self.shard.clone()),
        ];
        // So the shards of one run find each other even when a lost process left no run.json.
        if let Some(start_at) = self.start_at_unix_ns {
            metadata.push(("loadgen.start_at_unix_ns".into(), start_at.to_string()));
        }
        metadata
    }
}

/// The first run.json of a run written to S3, before any request.
#[derive(Debug, Serialize)]
struct StartedRunJson<'a> {
    #[serde(flatten)]
    identity: &'a RunIdentity,
    exit_reason: &'static str,
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
    // A file, or a link to nothing, is not a directory with results: said as what it is.
    if let Some(what) = not_a_directory(&dir) {
        return Err(RunError::OutNotDirectory(dir, what));
    }
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

/// What `path` is when it exists and is not a directory (nor a link to one): "is a file", "is
/// a symbolic link to nothing".
fn not_a_directory(path: &Path) -> Option<&'static str> {
    let link = std::fs::symlink_metadata(path).ok()?;
    match std::fs::metadata(path) {
        Ok(target) if target.is_dir() => None,
        Ok(_) => Some("is a file"),
        Err(_) if link.file_type().is_symlink() => Some("is a symbolic link to nothing"),
        Err(_) => None,
    }
}

/// How often the writer copies its aggregates out (a copy is a few hundred KiB of histograms):
/// `--abort-on-fail`'s judge wants them a quarter of its period old at most; a live page reads
/// them once a second, so a copy a second when rows came (see the writer's `publish`).
fn publish_every(config: &RunConfig) -> std::time::Duration {
    match config.abort_after {
        Some(_) => crate::report::thresholds::ABORT_EVERY / 4,
        None => std::time::Duration::from_secs(4),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(flags: &[&str]) -> RunConfig {
        let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(
            [&["loadgen", "run"], flags].concat(),
        )
        .unwrap();
        let crate::cli::Command::Run(args) = cli.command else {
            unreachable!("a run command")
        };
        RunConfig::from_args(&args).unwrap()
    }

    #[test]
    fn a_shards_run_id_names_the_shard() {
        let whole = run_id(Shard::default());
        assert!(!whole.contains("shard"), "{whole}");
        let third = run_id(Shard { index: 2, count: 3 });
        assert!(third.ends_with("-shard-2-of-3"), "{third}");
    }

    #[test]
    fn segments_carry_the_identity_and_start_at_only_when_given() {
        let keys = |identity: &RunIdentity| -> Vec<String> {
            identity
                .parquet_metadata()
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        };
        let plain = RunIdentity::new(&config(&["-c", "2"]), "r1", "http://x/");
        assert!(!keys(&plain).contains(&"loadgen.start_at_unix_ns".to_string()));
        let metadata: std::collections::BTreeMap<_, _> =
            plain.parquet_metadata().into_iter().collect();
        assert_eq!(metadata["loadgen.run_id"], "r1");
        assert_eq!(metadata["loadgen.shard"], "0/1");
        assert_eq!(
            metadata["loadgen.anchor_unix_ns"],
            plain.anchor.unix_ns.to_string()
        );
        let in_a_minute = chrono::Utc::now().timestamp_millis() + 60_000;
        let sharded = RunIdentity::new(
            &config(&["--shard", "1/2", "--start-at", &in_a_minute.to_string()]),
            "r2",
            "http://x/",
        );
        assert!(keys(&sharded).contains(&"loadgen.start_at_unix_ns".to_string()));
        assert_eq!(sharded.shard, "1/2");
        assert!(sharded.start_offset_ns.is_some());
        // A sweep's later level keeps the group (start_at) but records no lateness.
        let mut later = config(&["--shard", "1/2", "--start-at", &in_a_minute.to_string()]);
        later.sharding.waits_for_start_at = false;
        let later = RunIdentity::new(&later, "r3", "http://x/");
        assert!(later.start_at_unix_ns.is_some());
        assert_eq!(later.start_offset_ns, None);
    }

    #[test]
    fn an_out_dir_is_the_run_directory_and_its_location() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("mine");
        let (run_dir, location) = claim_run_dir(&Output::Dir(dir.clone()), "r1").unwrap();
        assert_eq!(run_dir, dir);
        assert_eq!(location, dir.display().to_string());
        assert!(dir.join("requests").is_dir());
        let again = claim_run_dir(&Output::Dir(dir.clone()), "r2").unwrap_err();
        assert!(matches!(again, RunError::OutExists(_)), "{again}");
    }

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
