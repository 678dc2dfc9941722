//! One `loadgen run` past the open-files limit. When one process cannot hold the connections
//! asked (its hard limit, which in many containers not even root may raise), the run's
//! workers are spread over several processes of this binary on this machine: each is a shard
//! (`--shard I/N`, the machinery of several machines) started at one instant, with its share of
//! the workers and of the connect rate, and the source addresses the whole run needs. Their
//! shard directories go into ONE run directory, which `loadgen-analyze` reads as one run.
//!
//! The parent holds no connection: it plans, starts the processes, forwards each Ctrl-C and
//! SIGTERM to every one of them (they run in their own process group, so a terminal's Ctrl-C
//! reaches each exactly once, through the parent), and makes the run one when they end: each
//! process hands over its exact aggregates on its stdout (`runner::Handover`), and the parent
//! adds them up into one summary, judged once by the one judge, written as the run
//! directory's own run.json (`runner::finish_spread`). A process that dies (`kill -9`, a
//! crash, or killed here past the run's end) hands nothing over: it is named, the exit code is
//! at least 1, and the parent reads its closed segments back into the summary
//! (`store::read_back`, the rows counted as its own writer counted them), so the summary
//! holds every row on disk, as `loadgen-analyze` reads them; the rows it had not closed into a
//! segment are lost, and said to be.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Stdio;

use serde::{Deserialize, Serialize};

use crate::cli::{RunArgs, SourceAddrs};
use crate::config::{Output, RunConfig, Target};
use crate::model::ModelPlan;
use crate::runner::{
    connections_needed, ports_per_address, Handover, Lost, Part, RunError, SpreadFacts,
    HANDOVER_VERSION, SPARE_FDS,
};
use crate::shard::Shard;
use crate::stop::{ExitReason, StopSignal};

/// The environment variable that makes a `loadgen run` one process of a spread run: what the
/// parent chose for it, as JSON ([`ChildPlan`]). Not a flag: no one types it.
pub const CHILD_ENV: &str = "LOADGEN_SPREAD_CHILD";
/// Processes one run may spread over: far past what a 20,000-file limit needs for a million
/// connections, and a bound on what a typo (`-c 10000000`) starts.
const MAX_PROCESSES: u64 = 64;
/// How long after planning the processes start together (they load the scenario first).
const START_DELAY_MS: u64 = 2_000;

/// What the parent chose for one of its processes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChildPlan {
    /// `I/N`.
    pub shard: String,
    pub start_at_unix_ms: u64,
    /// Its run directory, inside the spread run's.
    pub out: PathBuf,
    pub sources: Vec<IpAddr>,
    pub connect_rate_per_s: u32,
}

/// A run spread over several processes.
#[derive(Debug)]
pub struct Spread {
    /// The run directory holding one shard directory per process.
    pub dir: PathBuf,
    /// The open-files limit of one process.
    pub limit: u64,
    pub connections: u64,
    pub children: Vec<ChildPlan>,
    /// When (Unix ms) a process still running is past any end it could have — its start, its
    /// `-d`, its `--grace` and [`END_MARGIN`] — and is killed; `None` when nothing bounds the
    /// run's time (`-n` alone).
    pub deadline_unix_ms: Option<u64>,
}

/// How long after its `-d` and `--grace` a process may take to write its last segment and
/// run.json and hand over: far past what that takes (well under a second), so only a process
/// that is stopped or hung is killed.
pub const END_MARGIN: std::time::Duration = std::time::Duration::from_secs(20);

/// In a process the parent started: the parent's choices applied to `args` (`--shard`,
/// `--start-at`, `--out`, `--source-addr`, `--connect-rate`, `--json`, `--no-progress`), so the
/// run is parsed and validated as one shard like any other.
pub fn as_child(args: &mut RunArgs) -> Result<(), String> {
    let Ok(text) = std::env::var(CHILD_ENV) else {
        return Ok(());
    };
    let plan: ChildPlan = serde_json::from_str(&text)
        .map_err(|e| format!("{CHILD_ENV} is not a spread run's plan ({e}); unset it"))?;
    args.shard.shard = Some(plan.shard.parse()?);
    args.shard.start_at = Some(plan.start_at_unix_ms.to_string());
    args.output.out = Some(plan.out);
    args.output.json = true;
    args.output.no_progress = true;
    args.target.connect_rate = Some(plan.connect_rate_per_s);
    if !plan.sources.is_empty() {
        args.target.source_addr = Some(SourceAddrs(plan.sources));
    }
    Ok(())
}

/// `None` when the run fits in this process (after raising the soft open-files limit to the
/// hard one); else the processes it needs, or why even they cannot hold it.
pub async fn plan(config: &RunConfig, owned: OneProcess) -> Result<Option<Spread>, RunError> {
    // A shard given by hand stays one process; an open model's `--max-in-flight` is a cap
    // the runner warns about, not connections it opens.
    if std::env::var_os(CHILD_ENV).is_some()
        || !config.sharding.shard.is_whole()
        || matches!(config.model, ModelPlan::Open(_))
    {
        return Ok(None);
    }
    let Ok(limit) = rlimit::increase_nofile_limit(u64::MAX) else {
        return Ok(None);
    };
    let connections = connections_needed(config);
    if connections + SPARE_FDS <= limit {
        return Ok(None);
    }
    let workers = config.model.plan().max_workers();
    let refuse_files = || RunError::OpenFiles {
        workers,
        needed: connections + SPARE_FDS,
        limit,
    };
    let per_process = limit.saturating_sub(2 * SPARE_FDS);
    if per_process == 0 || connections.div_ceil(per_process) > MAX_PROCESSES {
        return Err(refuse_files());
    }
    spreadable(config, owned)?;
    let processes = connections.div_ceil(per_process) as u32;
    let sources = sources(config, connections).await?;
    let dir = run_dir(config)?;
    let start_at_unix_ms = match config.sharding.start_at_unix_ns {
        Some(ns) => (ns / 1_000_000) as u64,
        None => unix_ms() + START_DELAY_MS,
    };
    let connect_rate_per_s = (config.connection.connect_rate_per_s / processes).max(1);
    let children = (0..processes)
        .map(|index| {
            let shard = Shard {
                index,
                count: processes,
            };
            ChildPlan {
                shard: shard.to_string(),
                start_at_unix_ms,
                out: dir.join(format!("shard-{index}-of-{processes}")),
                sources: sources.clone(),
                connect_rate_per_s,
            }
        })
        .collect();
    let deadline_unix_ms = config
        .duration_limit()
        .map(|limit| start_at_unix_ms + (limit + config.grace + END_MARGIN).as_millis() as u64);
    Ok(Some(Spread {
        dir,
        limit,
        connections,
        children,
        deadline_unix_ms,
    }))
}

/// What the command line asks that one process owns, beside its config: a JUnit file, the
/// targets read from stdin (the processes' stdin is their parent's pipe, see `watch_parent`).
#[derive(Debug, Clone, Copy, Default)]
pub struct OneProcess {
    pub junit: bool,
    pub stdin_targets: bool,
}

/// What several processes cannot share: one port, one page, one JUnit file, one upload, one
/// embedded server, one probe after one level, one stdin.
fn spreadable(config: &RunConfig, owned: OneProcess) -> Result<(), RunError> {
    let clash = if config.output.metrics.addr.is_some() {
        Some("--metrics-addr")
    } else if config.output.dashboard.addr.is_some() {
        Some("--dashboard")
    } else if config.output.dashboard.out.is_some() {
        // Each process would save its own shard's page to the one file: the last one wins.
        Some("--dashboard-out")
    } else if owned.junit {
        Some("--junit")
    } else if owned.stdin_targets {
        Some("--targets - (stdin)")
    } else if matches!(config.output.out, Output::S3(_)) {
        Some("--out s3://")
    } else if matches!(config.target, Target::Embedded) {
        Some("the embedded server (no --url)")
    } else if config.probe.as_ref().is_some_and(|p| p.always) {
        Some("--probe (one level, one process)")
    } else {
        None
    };
    match clash {
        Some(what) => Err(RunError::Config(crate::config::ConfigError::Out(format!(
            "{} connections do not fit in one process here and loadgen would spread them over \
             several processes, but {what} belongs to one process; leave it out, or run fewer \
             connections",
            connections_needed(config)
        )))),
        None => Ok(()),
    }
}

/// The local addresses every process takes in turn, so that no (source, destination) pair
/// runs out of ports across all of them: the ones given, checked against the whole run; else,
/// on loopback, 127.0.0.1, 127.0.0.2, … as many as needed.
async fn sources(config: &RunConfig, connections: u64) -> Result<Vec<IpAddr>, RunError> {
    let per_address = ports_per_address().max(1);
    let needed = connections.div_ceil(per_address);
    let given = &config.connection.source_addrs;
    if config.connection.http2 || (given.is_empty() && needed <= 1) {
        return Ok(given.clone());
    }
    if !given.is_empty() {
        return match (given.len() as u64) < needed {
            true => Err(RunError::SourcePorts {
                connections,
                per_address,
                needed,
                given: given.len(),
            }),
            false => Ok(given.clone()),
        };
    }
    if target_is_loopback(config).await {
        let first = u32::from(std::net::Ipv4Addr::new(127, 0, 0, 1));
        return Ok((0..needed as u32)
            .map(|i| IpAddr::V4((first + i).into()))
            .collect());
    }
    Err(RunError::SourcePorts {
        connections,
        per_address,
        needed,
        given: 1,
    })
}

/// True when the target's host resolves to a loopback address (where every 127.x is local).
async fn target_is_loopback(config: &RunConfig) -> bool {
    let Target::Url(url) = &config.target else {
        return true;
    };
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    match tokio::net::lookup_host((host, url.port)).await {
        Ok(mut addrs) => addrs.next().is_some_and(|a| a.ip().is_loopback()),
        Err(_) => false,
    }
}

/// `--out DIR` (new or empty), else `runs/<UTC time>-spread`; made now, so the processes'
/// directories have a home.
fn run_dir(config: &RunConfig) -> Result<PathBuf, RunError> {
    let out = match &config.output.out {
        Output::Dir(dir) => Some(dir.as_path()),
        _ => None,
    };
    let dir = super::workflow_dir(out, "spread")?;
    std::fs::create_dir_all(&dir).map_err(|source| RunError::RunDir {
        path: dir.clone(),
        source,
    })?;
    Ok(dir)
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// How one process ended: its `--json` document when it printed one, its exit status.
#[derive(Debug)]
pub struct ChildEnd {
    pub plan: ChildPlan,
    pub status: std::process::ExitStatus,
    pub doc: Option<serde_json::Value>,
}

/// Starts every process with this command line and its plan, forwards signals, and waits for
/// all of them.
pub async fn run(spread: &Spread, stop: &StopSignal) -> Result<Vec<ChildEnd>, RunError> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|source| RunError::RunDir {
        path: PathBuf::from("/proc/self/exe"),
        source,
    })?;
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let mut started = Vec::new();
    for plan in &spread.children {
        let spawned = std::process::Command::new(&exe)
            .args(&args)
            .env(CHILD_ENV, serde_json::to_string(plan).unwrap_or_default())
            .process_group(0)
            // Held open by this process until the child ends: its end is the parent's death.
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn();
        match spawned {
            Ok(child) => started.push((plan.clone(), child)),
            Err(source) => {
                for (_, mut child) in started {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(RunError::RunDir {
                    path: exe.clone(),
                    source,
                });
            }
        }
    }
    let pids: Vec<u32> = started.iter().map(|(_, c)| c.id()).collect();
    let forward = tokio::spawn(forward_signals(stop.clone(), pids.clone()));
    let waits: Vec<_> = started
        .into_iter()
        .map(|started| tokio::task::spawn_blocking(move || wait_child(started)))
        .collect();
    let overdue = tokio::spawn(kill_when_overdue(spread.deadline_unix_ms, pids));
    let mut ends = Vec::new();
    for wait in waits {
        if let Ok(end) = wait.await {
            ends.push(end);
        }
    }
    forward.abort();
    overdue.abort();
    Ok(ends)
}

/// Kills (SIGKILL: a stopped process takes no other signal) the processes still running at
/// `deadline_unix_ms`: stopped (SIGSTOP) or hung, they would keep the run from ending at all.
/// Each is then named as a process that did not hand over.
async fn kill_when_overdue(deadline_unix_ms: Option<u64>, pids: Vec<u32>) {
    let Some(deadline) = deadline_unix_ms else {
        return;
    };
    let wait_ms = deadline.saturating_sub(unix_ms());
    tokio::time::sleep(std::time::Duration::from_millis(wait_ms)).await;
    eprintln!(
        "processes of the spread run still running {} after their -d and --grace: killing them",
        humantime::format_duration(END_MARGIN)
    );
    for pid in pids
        .iter()
        .filter_map(|&p| rustix::process::Pid::from_raw(p as i32))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Reads a process's `--json` document and waits for it to end.
fn wait_child((plan, mut child): (ChildPlan, std::process::Child)) -> ChildEnd {
    use std::io::Read;
    let mut text = String::new();
    // `wait` would close the child's stdin first: held until it has ended (see `watch_parent`).
    let parent_alive = child.stdin.take();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = stdout.read_to_string(&mut text);
    }
    let status = child
        .wait()
        .unwrap_or_else(|_| std::os::unix::process::ExitStatusExt::from_raw(1 << 8));
    drop(parent_alive);
    ChildEnd {
        plan,
        status,
        doc: serde_json::from_str(&text).ok(),
    }
}

/// In a process of a spread run: stops it as a SIGTERM would once its parent is gone. The
/// parent holds the write end of the process's stdin until the process ends, so the pipe's
/// end (EOF) means the parent died — `kill -9`, a crash — and nobody will forward a signal or
/// take the hand-over: without this, its processes went on sending until `-d` ended. A plain
/// thread, not the runtime's: a blocking read of stdin would hold the runtime's shutdown.
pub fn watch_parent(stop: StopSignal) {
    std::thread::spawn(move || {
        use std::io::Read;
        let mut buffer = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut buffer), Ok(n) if n > 0) {}
        eprintln!("the spread run's parent process is gone: stopping as at SIGTERM");
        stop.signal(ExitReason::Terminated);
    });
}

/// Each Ctrl-C / SIGTERM the parent gets, to every process: the first drains them, a second
/// cuts their requests in flight off, as in one process.
async fn forward_signals(stop: StopSignal, pids: Vec<u32>) {
    loop {
        let signal = match stop.next_signal().await {
            ExitReason::Terminated => rustix::process::Signal::TERM,
            _ => rustix::process::Signal::INT,
        };
        for pid in pids
            .iter()
            .filter_map(|&p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process(pid, signal);
        }
    }
}

/// The run as one, out of what its processes handed over: one summary, one verdict, run.json
/// at the top of the run directory (`runner::finish_spread`). A process that ended without
/// its hand-over (killed, crashed) is lost: its closed segments are read back there, and the
/// exit code is at least 1. With the exit code: the run's, or a worse process's.
pub fn conclude(
    spread: &Spread,
    config: &RunConfig,
    ends: Vec<ChildEnd>,
) -> Result<(crate::RunOutcome, i32), RunError> {
    let mut parts = Vec::new();
    let mut lost = Vec::new();
    let mut shards = Vec::new();
    let mut worst_exit_code = 0;
    for end in ends {
        let code = end.status.code().unwrap_or(1);
        worst_exit_code = worst_exit_code.max(code);
        let dir_name = (end.plan.out.file_name())
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let handover = end.doc.and_then(|mut doc| {
            serde_json::from_value::<Handover>(doc["handover"].take())
                .ok()
                .filter(|h| h.version == HANDOVER_VERSION)
        });
        shards.push(serde_json::json!({
            "shard": end.plan.shard,
            "dir": dir_name,
            "exit_code": code,
            "handed_over": handover.is_some(),
        }));
        match handover {
            Some(handover) => parts.push(Part { dir_name, handover }),
            None => {
                worst_exit_code = worst_exit_code.max(1);
                lost.push(Lost {
                    shard: end.plan.shard,
                    status: end.status.to_string(),
                    dir: end.plan.out,
                });
            }
        }
    }
    let start_at_unix_ns =
        (spread.children.first()).map_or(0, |c| c.start_at_unix_ms as i64 * 1_000_000);
    let facts = SpreadFacts {
        start_at_unix_ns,
        worst_exit_code,
        lost,
        spread: serde_json::json!({
            "processes": shards.len(),
            "open_files_limit": spread.limit,
            "shards": shards,
        }),
    };
    let outcome = crate::runner::finish_spread(config, &spread.dir, parts, facts)?;
    let code = outcome.exit_code().max(worst_exit_code);
    Ok((outcome, code))
}
