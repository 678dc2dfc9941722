//! Client-side metrics: what the loadgen process and its machine were doing, sampled every
//! interval (1 s in a run) — the evidence for "is the client the bottleneck?".
//!
//! A sampler on its own OS thread (never the async runtime, whose timers would be late exactly
//! when the client is saturated) reads /proc through the `procfs` crate: the process's CPU
//! time, RSS and open descriptors, every core's utilisation, every network interface's bytes
//! and packets, plus the engine's [`LiveCounters`] (requests in flight, workers alive, buffer
//! depth). Each sample is one row of `client-metrics.parquet`; rows are written as a row group
//! at least every [`ROW_GROUP_EVERY`] into a hidden `.client-metrics.parquet.partial` that is
//! renamed when [`Sysmon::finish`] closes it, so a reader never sees a half-written file.
//!
//! What it is not: a judge of the server, nor a source of request statistics. It measures the
//! client and keeps the numbers of [`ClientSummary`]; whether they say it was saturated is
//! the verdict's rule (`verdict::client`). Utilisation is measured against the CPU the process may use: its cores, or
//! its cgroup CPU quota when that is smaller, whose throttling counters are sampled too
//! ([`cgroup`]); the interface carrying the target's traffic is [`link`]'s to find. Reading
//! /proc and what its counters mean (ticks, deltas between readings) is `probe`'s; the file
//! itself — schema, typed rows into columns, `.partial` handling — is `file`'s; this module
//! runs the sampler thread, puts each row together and keeps the summary. A process killed
//! mid-run leaves only the `.partial` file (no Parquet footer); the request records are what
//! must survive a kill, and they do so on their own.
//!
//! ## Columns
//!
//! The columns (`loadgen.kind = client-metrics`), their units and meanings and the metadata
//! keys are written down in `contract/files.json` (`files.client_metrics`) at the repository
//! root; `loadgen/tests/contract.rs` and the Python tests hold [`schema`] and real files to it,
//! so change both together. Deltas cover the interval that ends at `t_ns` and lasted
//! `interval_ns`; gauges are read at `t_ns`; a column is null in a row when /proc could not be
//! read for that sample.

pub mod cgroup;
mod file;
pub mod host_work;
pub mod link;
mod probe;
pub mod summary;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::clock::Anchor;
use crate::record::parquet_file::{FileError, ParquetFile};
use crate::stats::activity::{Activity, Totals};
use crate::stats::LiveCounters;
pub use cgroup::CgroupVersion;
use cgroup::{Cgroup, CpuLimit, CpuStat};
pub use file::schema;
use file::{ActivityRow, Columns, Row};
use probe::{Probe, Reading};
use procfs::ProcError;
pub use summary::{percent, ClientSummary, Saturation};

/// A row group is written at least this often, so a long run never holds its samples in
/// memory and the `.partial` file shows progress.
pub const ROW_GROUP_EVERY: Duration = Duration::from_secs(10);

/// The version in `loadgen.schema_version`; bump it when a column changes meaning.
/// Version 2 added `throttled_ns`, `nr_periods`, `nr_throttled`, and measures
/// `cpu_utilisation` against `loadgen.cpu_limit_cores`. Version 3 added the workers' time
/// (`alive_ns`, `busy_ns`, `waiting_ns`, per phase in `phases`) and the schedule's sends
/// (`sent`, `scheduled`, `dropped`, `late`, `send_lag_ns`).
pub const SCHEMA_VERSION: &str = "3";

#[derive(Debug, thiserror::Error)]
pub enum SysmonError {
    #[error("cannot read {what}: {source}")]
    Proc {
        what: &'static str,
        #[source]
        source: ProcError,
    },
    #[error("cannot start the client-metrics sampler thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error(transparent)]
    File(#[from] FileError),
    #[error("the client-metrics sampler thread panicked")]
    Panicked,
}

/// What the sampler needs, once, before the first sample.
pub struct SysmonConfig {
    /// Where the file ends up, normally `DIR/client-metrics.parquet`; the directory must exist.
    pub path: PathBuf,
    /// Time between samples (1 s in a run).
    pub interval: Duration,
    /// The run's time base, so `t_ns` lines up with the request records' `start_ns`.
    pub anchor: Anchor,
    pub live: Arc<LiveCounters>,
    /// The run's phase labels, by index (the `phases` column names them).
    pub phase_labels: Vec<String>,
    /// The process's cgroups (`Cgroup::discover()` in a run; fixture directories in tests).
    pub cgroup: Cgroup,
    /// The interface carrying the target's traffic, recorded in the file's metadata.
    pub target_interface: Option<String>,
    /// Threads whose name starts with this are not the client's (the embedded server's):
    /// their CPU is left out of the client's.
    pub not_client_threads: Option<&'static str>,
}

/// A running sampler. Dropping it without [`Sysmon::finish`] still closes the file, from the
/// detached thread.
pub struct Sysmon {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Result<ClientSummary, SysmonError>>,
}

impl Sysmon {
    /// Takes one last sample (if it covers at least a quarter of an interval: CPU time comes
    /// in 10 ms ticks, so a shorter window would be mostly rounding), closes the file and
    /// returns the summary. Returns as soon as the file is written, without waiting for the
    /// next tick.
    pub fn finish(self) -> Result<ClientSummary, SysmonError> {
        // A send error means the thread already ended; join reports why.
        let _ = self.stop.send(());
        self.thread.join().map_err(|_| SysmonError::Panicked)?
    }
}

/// Opens the file, reads a baseline and starts sampling. Fails, with nothing left on disk,
/// when /proc cannot be read or the file cannot be created.
pub fn start(config: SysmonConfig) -> Result<Sysmon, SysmonError> {
    start_with(config, ROW_GROUP_EVERY)
}

fn start_with(config: SysmonConfig, row_group_every: Duration) -> Result<Sysmon, SysmonError> {
    let limit = config.cgroup.limit(cgroup::affinity_cores());
    let probe = Probe::new(limit.stat_dir.clone(), config.not_client_threads)?;
    let baseline = probe.baseline()?;
    let file = file::create(
        &config.path,
        &config.anchor,
        config.interval,
        &limit,
        config.target_interface.as_deref(),
    )?;
    let sampler = Sampler {
        probe,
        row_group_every,
        columns: Columns::new(),
        file,
        summary: ClientSummary {
            samples: 0,
            cores: limit.cpuset_cores,
            cpu_quota_cores: limit.quota_cores,
            cpu_quota_source: limit.quota_source,
            cpuset_cores: limit.cpuset_cores,
            cpu_limit_cores: limit.limit_cores,
            peak_cpu_utilisation: 0.0,
            mean_cpu_utilisation: 0.0,
            peak_rss_bytes: 0,
            sampled_ns: 0,
            throttled_ns: None,
            nr_periods: None,
            nr_throttled: None,
            throttled_share: None,
            saturated: false,
            saturation: None,
            server_shares_cores: false,
            target_interface: config.target_interface.clone(),
            link_capacity_bps: None,
            link_capacity_source: None,
            tcp: None,
            shared_with: None,
            host_cores: None,
            host_busy_cores: None,
            host_other_cores: None,
        },
        first_stat: baseline.cpu_stat,
        last_stat: baseline.cpu_stat,
        activity: LastActivity::default(),
        limit,
        cpu_ns_total: 0,
        wall_ns_total: 0,
        host: HostBusy::default(),
        config,
    };
    let (stop, stopped) = mpsc::channel();
    let thread = crate::background::spawn("loadgen-sysmon", move || sampler.run(baseline, stopped))
        .map_err(SysmonError::Thread)?;
    Ok(Sysmon { stop, thread })
}

/// The sampler thread's state.
struct Sampler {
    config: SysmonConfig,
    probe: Probe,
    limit: CpuLimit,
    row_group_every: Duration,
    columns: Columns,
    file: ParquetFile,
    summary: ClientSummary,
    /// Process CPU and wall time over every row, for the time-weighted mean.
    cpu_ns_total: u64,
    wall_ns_total: u64,
    /// The host's busy cores over every row.
    host: HostBusy,
    /// The cgroup's throttling counters at the baseline and at the last row.
    first_stat: Option<CpuStat>,
    last_stat: Option<CpuStat>,
    activity: LastActivity,
}

impl Sampler {
    fn run(
        mut self,
        baseline: Reading,
        stopped: mpsc::Receiver<()>,
    ) -> Result<ClientSummary, SysmonError> {
        match self.sample_until_stopped(baseline, stopped) {
            Ok(()) => {
                self.file.close()?;
                let mut summary = self.summary;
                summary.mean_cpu_utilisation = if self.wall_ns_total == 0 {
                    0.0
                } else {
                    self.cpu_ns_total as f64 / self.wall_ns_total as f64 / self.limit.limit_cores
                };
                summary.sampled_ns = self.wall_ns_total;
                (
                    summary.host_cores,
                    summary.host_busy_cores,
                    summary.host_other_cores,
                ) = self.host.mean();
                if let (Some(first), Some(last)) = (self.first_stat, self.last_stat) {
                    let run = last.since(&first);
                    summary.throttled_ns = Some(run.throttled_ns);
                    summary.nr_periods = Some(run.nr_periods);
                    summary.nr_throttled = Some(run.nr_throttled);
                }
                Ok(summary)
            }
            Err(e) => {
                // Nothing half-written is left behind.
                self.file.discard();
                Err(e)
            }
        }
    }

    fn sample_until_stopped(
        &mut self,
        mut previous: Reading,
        stopped: mpsc::Receiver<()>,
    ) -> Result<(), SysmonError> {
        let interval = self.config.interval;
        let mut next = previous.at + interval;
        let mut row_group_started = Instant::now();
        loop {
            let stopping =
                match stopped.recv_timeout(next.saturating_duration_since(Instant::now())) {
                    Err(RecvTimeoutError::Timeout) => false,
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => true,
                };
            let now = self.probe.read();
            if !stopping || now.at - previous.at >= interval / 4 {
                self.record(&previous, &now);
                previous = now;
            }
            if self.columns.rows() > 0
                && (stopping || row_group_started.elapsed() >= self.row_group_every)
            {
                // One row group a few seconds, on disk now rather than at close.
                self.file.write(&self.columns.take())?;
                self.file.sync()?;
                row_group_started = Instant::now();
            }
            if stopping {
                return Ok(());
            }
            // Fixed-rate ticks; after a stall (a saturated machine), skip the missed ticks
            // rather than sampling in a burst.
            next += interval;
            let now = Instant::now();
            if next <= now {
                next = now + interval;
            }
        }
    }

    /// Appends the row for the interval from `before` to `now` (what the probe saw, the
    /// run's gauges, the workers' time), then folds it into the summary.
    fn record(&mut self, before: &Reading, now: &Reading) {
        let change = now.since(before);
        let limit_cores = self.limit.limit_cores;
        let cpu_utilisation = change
            .cpu
            .map(|c| c.total_ns() as f64 / change.wall_ns as f64 / limit_cores);
        if now.cpu_stat.is_some() {
            self.last_stat = now.cpu_stat;
        }
        let t_ns = self.config.anchor.offset_ns(now.at);
        let live = &self.config.live;
        let row = Row {
            t_ns,
            change: &change,
            cpu_utilisation,
            requests_in_flight: live.in_flight.load(Ordering::Relaxed),
            workers_alive: live.workers_alive.load(Ordering::Relaxed),
            buffer_depth: live.buffer_depth.load(Ordering::Relaxed),
            activity: self
                .activity
                .since_last_row(live, &self.config.phase_labels, t_ns),
        };
        self.columns.append(&row);

        let s = &mut self.summary;
        s.samples += 1;
        if let (Some(cpu), Some(u)) = (change.cpu, cpu_utilisation) {
            self.cpu_ns_total += cpu.total_ns();
            self.wall_ns_total += change.wall_ns as u64;
            s.peak_cpu_utilisation = s.peak_cpu_utilisation.max(u);
        }
        s.peak_rss_bytes = s.peak_rss_bytes.max(change.rss_bytes.unwrap_or(0));
        if let (Some(cores), Some(process_ns)) =
            (&change.core_utilisation, change.process_all_threads_ns)
        {
            self.host.add(cores, process_ns, change.wall_ns);
        }
    }
}

/// The host's busy cores, every process's and those of other work than this process's (the
/// client's and an embedded server's threads), summed over the rows for a time-weighted mean.
#[derive(Default)]
struct HostBusy {
    cores: usize,
    busy_core_ns: f64,
    other_core_ns: f64,
    wall_ns: f64,
}

impl HostBusy {
    fn add(&mut self, core_utilisation: &[f64], process_ns: u64, wall_ns: i64) {
        self.cores = core_utilisation.len();
        let busy_core_ns = core_utilisation.iter().sum::<f64>() * wall_ns as f64;
        self.busy_core_ns += busy_core_ns;
        self.other_core_ns += (busy_core_ns - process_ns as f64).max(0.0);
        self.wall_ns += wall_ns as f64;
    }

    /// The host's cores, how many of them were busy on average (every process's) and how
    /// many other work kept busy; `None` without a row.
    fn mean(&self) -> (Option<usize>, Option<f64>, Option<f64>) {
        match self.wall_ns > 0.0 {
            true => (
                Some(self.cores),
                Some(self.busy_core_ns / self.wall_ns),
                Some(self.other_core_ns / self.wall_ns),
            ),
            false => (None, None, None),
        }
    }
}

/// The workers' totals per phase, and the schedule's counters, at the last row.
#[derive(Default)]
struct LastActivity {
    phases: Vec<Totals>,
    scheduled: u64,
    dropped: u64,
}

impl LastActivity {
    /// The workers' time and the schedule's sends since the last row, as of `t_ns`.
    fn since_last_row<'a>(
        &mut self,
        live: &LiveCounters,
        phase_labels: &'a [String],
        t_ns: i64,
    ) -> ActivityRow<'a> {
        let phases = live.activity.by_phase(t_ns);
        let scheduled = live.scheduled.load(Ordering::Relaxed);
        let dropped = live.dropped.load(Ordering::Relaxed);
        let deltas = phases
            .iter()
            .enumerate()
            .filter(|(_, now)| now.workers > 0)
            .map(|(i, now)| {
                let label = phase_labels.get(i).map_or("", String::as_str);
                let before = self.phases.get(i).copied().unwrap_or_default();
                (label, now.since(&before))
            })
            .collect();
        let row = ActivityRow {
            total: Activity::total(&phases).since(&Activity::total(&self.phases)),
            phases: deltas,
            scheduled: scheduled.saturating_sub(self.scheduled),
            dropped: dropped.saturating_sub(self.dropped),
        };
        *self = LastActivity {
            phases,
            scheduled,
            dropped,
        };
        row
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;

    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
    use std::fs::File;
    use std::path::Path;

    use arrow_array::{Array, RecordBatch};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;

    fn config(dir: &Path, interval: Duration, live: Arc<LiveCounters>) -> SysmonConfig {
        SysmonConfig {
            path: dir.join("client-metrics.parquet"),
            interval,
            anchor: Anchor::now(),
            live,
            phase_labels: vec!["main".into()],
            cgroup: Cgroup::discover(),
            target_interface: None,
            not_client_threads: None,
        }
    }

    fn read_back(path: &Path) -> (RecordBatch, parquet::file::metadata::ParquetMetaData) {
        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap()).unwrap();
        let metadata = builder.metadata().as_ref().clone();
        // The reader's batches span row groups, so a small file comes back as one batch.
        let mut batches: Vec<RecordBatch> = builder
            .with_batch_size(1 << 16)
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect();
        assert_eq!(batches.len(), 1);
        (batches.remove(0), metadata)
    }

    /// The number of `cpuN` lines in /proc/stat, read independently of procfs.
    fn cpus_in_proc_stat() -> usize {
        std::fs::read_to_string("/proc/stat")
            .unwrap()
            .lines()
            .filter(|l| {
                l.strip_prefix("cpu")
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
            })
            .count()
    }

    /// `finish` wakes the sampler for its last row instead of sleeping out the interval: with
    /// a minute between samples it returns long before the next one is due (a bound no loaded
    /// machine comes near; the run's end waits on it).
    #[test]
    fn finish_does_not_wait_out_the_sampling_interval() {
        let dir = tempfile::tempdir().unwrap();
        let interval = Duration::from_secs(60);
        let config = config(dir.path(), interval, Arc::new(LiveCounters::default()));
        let path = config.path.clone();
        let sysmon = start(config).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let finishing = Instant::now();
        sysmon.finish().unwrap();
        assert!(
            finishing.elapsed() < interval / 2,
            "{:?}",
            finishing.elapsed()
        );
        assert!(path.exists());
    }

    /// Half a second per sample for 2.5 s while one thread spins: every row saw CPU, the
    /// gauges, and the per-core list; the summary agrees with the file.
    #[test]
    fn sysmon_samples_a_busy_process_into_parquet() {
        let dir = tempfile::tempdir().unwrap();
        let live = Arc::new(LiveCounters::default());
        live.in_flight.store(3, Ordering::Relaxed);
        live.workers_alive.store(4, Ordering::Relaxed);
        live.buffer_depth.store(5, Ordering::Relaxed);
        // One worker in a request from the anchor on: busy for every nanosecond it is alive.
        live.activity.register(0, 0).send(0, None);
        let interval = Duration::from_millis(500);
        let config = config(dir.path(), interval, live);
        let path = config.path.clone();

        let spinning = Arc::new(AtomicBool::new(true));
        let burner = {
            let spinning = spinning.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while spinning.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        };
        let sysmon = start(config).unwrap();
        std::thread::sleep(Duration::from_millis(2_600));
        let summary = sysmon.finish().unwrap();
        spinning.store(false, Ordering::Relaxed);
        burner.join().unwrap();

        assert!(path.exists());
        assert!(!dir.path().join(".client-metrics.parquet.partial").exists());

        let (batch, metadata) = read_back(&path);
        let kv: BTreeMap<_, _> = metadata
            .file_metadata()
            .key_value_metadata()
            .unwrap()
            .iter()
            .map(|kv| (kv.key.as_str(), kv.value.clone().unwrap_or_default()))
            .collect();
        assert_eq!(kv["loadgen.schema_version"], "3");
        assert_eq!(kv["loadgen.kind"], "client-metrics");
        assert_eq!(kv["loadgen.interval_ns"], "500000000");

        let rows = batch.num_rows();
        assert!(rows >= 4, "{rows} samples in 2.6 s at 500 ms");
        assert_eq!(summary.samples, rows as u64);
        let column = |name: &str| batch.column_by_name(name).unwrap().clone();
        let t_ns = column("t_ns");
        let t_ns = t_ns.as_primitive::<Int64Type>();
        assert!(t_ns.values().windows(2).all(|w| w[1] > w[0]), "{t_ns:?}");
        let interval_ns = column("interval_ns");
        let interval_ns = interval_ns.as_primitive::<Int64Type>();
        // Each row covers what passed since the one before.
        for i in 1..rows {
            let gap = t_ns.value(i) - t_ns.value(i - 1);
            assert!((gap - interval_ns.value(i)).abs() < 1_000_000, "row {i}");
        }

        let user = column("cpu_user_ns");
        let sys = column("cpu_sys_ns");
        let (user, sys) = (
            user.as_primitive::<Int64Type>(),
            sys.as_primitive::<Int64Type>(),
        );
        let utilisation = column("cpu_utilisation");
        let utilisation = utilisation.as_primitive::<Float64Type>();
        assert_eq!(user.null_count() + sys.null_count(), 0);
        for i in 0..rows {
            assert!(
                user.value(i) + sys.value(i) > 0,
                "row {i}: no CPU while spinning"
            );
            assert!(utilisation.value(i) > 0.0, "row {i}");
        }
        let peak = utilisation.values().iter().copied().fold(0.0, f64::max);
        assert_eq!(summary.peak_cpu_utilisation, peak);
        assert!(summary.mean_cpu_utilisation > 0.0);
        assert!(summary.mean_cpu_utilisation <= peak + 1e-9);
        let limit = Cgroup::discover().limit(cgroup::affinity_cores());
        assert_eq!(summary.cores, limit.cpuset_cores);
        assert_eq!(summary.cpu_limit_cores, limit.limit_cores);
        assert_eq!(kv["loadgen.cpu_limit_cores"], limit.limit_cores.to_string());

        let rss = column("rss_bytes");
        let rss = rss.as_primitive::<UInt64Type>();
        assert!(rss.values().iter().all(|r| *r > 0));
        assert_eq!(summary.peak_rss_bytes, *rss.values().iter().max().unwrap());
        let fds = column("open_fds");
        assert!(fds
            .as_primitive::<UInt64Type>()
            .values()
            .iter()
            .all(|f| *f > 0));

        let per_core = column("core_utilisation");
        let per_core = per_core.as_list::<i32>();
        let cpus = cpus_in_proc_stat();
        for i in 0..rows {
            let cores = per_core.value(i);
            let cores = cores.as_primitive::<Float64Type>();
            assert_eq!(cores.len(), cpus, "row {i}");
            assert!(cores.values().iter().all(|u| (0.0..=1.0).contains(u)));
            // Somebody was spinning the whole time.
            assert!(cores.values().iter().any(|u| *u > 0.0), "row {i}");
        }

        let network = column("network");
        let network = network.as_list::<i32>();
        let first = network.value(0);
        let names = first.as_struct().column_by_name("interface").unwrap();
        let names: Vec<_> = names.as_string::<i32>().iter().flatten().collect();
        assert!(names.contains(&"lo"), "{names:?}");

        // The worker's time: every interval alive and busy throughout, one send in all.
        let (alive, busy) = (column("alive_ns"), column("busy_ns"));
        let (alive, busy) = (
            alive.as_primitive::<Int64Type>(),
            busy.as_primitive::<Int64Type>(),
        );
        for i in 1..rows {
            assert_eq!(alive.value(i), busy.value(i), "row {i}");
            assert!(
                (alive.value(i) - interval_ns.value(i)).abs() < 1_000_000,
                "row {i}"
            );
        }
        let sent = column("sent");
        assert_eq!(
            sent.as_primitive::<UInt64Type>()
                .values()
                .iter()
                .sum::<u64>(),
            1
        );
        let phases = column("phases");
        let phases = phases.as_list::<i32>();
        for i in 0..rows {
            let row = phases.value(i);
            let row = row.as_struct();
            let label = row.column_by_name("phase").unwrap();
            assert_eq!(label.as_string::<i32>().value(0), "main", "row {i}");
            let alive_workers = row.column_by_name("workers_alive").unwrap();
            assert_eq!(alive_workers.as_primitive::<Int64Type>().value(0), 1);
        }

        for (name, expected) in [
            ("requests_in_flight", 3),
            ("workers_alive", 4),
            ("buffer_depth", 5),
        ] {
            let values = column(name);
            assert!(
                values
                    .as_primitive::<Int64Type>()
                    .values()
                    .iter()
                    .all(|v| *v == expected),
                "{name}"
            );
        }
    }

    /// Row groups reach the disk while the run goes on, not only at the end (here every
    /// 200 ms instead of every 10 s, so the test stays short).
    #[test]
    fn sysmon_writes_row_groups_while_running() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(
            dir.path(),
            Duration::from_millis(50),
            Arc::new(LiveCounters::default()),
        );
        let path = config.path.clone();
        let partial = dir.path().join(".client-metrics.parquet.partial");
        let sysmon = start_with(config, Duration::from_millis(200)).unwrap();
        assert!(partial.exists());
        std::thread::sleep(Duration::from_millis(700));
        // Past the 4-byte magic: at least one row group is on disk.
        assert!(partial.metadata().unwrap().len() > 4);
        let summary = sysmon.finish().unwrap();
        let (batch, metadata) = read_back(&path);
        assert!(
            metadata.num_row_groups() >= 2,
            "{} row groups",
            metadata.num_row_groups()
        );
        assert_eq!(batch.num_rows() as u64, summary.samples);
    }

    #[test]
    fn sysmon_start_fails_cleanly_when_the_directory_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir");
        let error = start(config(
            &missing,
            Duration::from_secs(1),
            Arc::new(LiveCounters::default()),
        ))
        .err()
        .expect("no directory, no sampler");
        assert!(
            matches!(error, SysmonError::File(FileError::Io { .. })),
            "{error}"
        );
        assert!(error.to_string().contains("no-such-dir"), "{error}");
    }
}
