//! One `loadgen run` past the open-files limit (issue 46): with the limit lowered to 1,700
//! files (`ulimit -n` before exec), 3,000 connections run as two processes of loadgen, one
//! shard each, into one run directory whose rows are the server's count, with one summary
//! (exactly the rows', percentiles included), one verdict and one run.json held to the
//! contract; Ctrl-C reaches both; what cannot be shared between processes is refused with one
//! sentence; a process lost mid-run has its closed segments read back into the summary. The
//! real binary against the reference server on 127.0.0.1; a few seconds.

mod common;

use std::path::Path;

use common::{contract, loadgen_under_sh, read_rows, run_json, ServerOnRuntime};
use servers::ServerConfig;

const LIMIT: &str = "ulimit -n 1700";

/// The shard directories of a spread run, sorted.
fn shard_dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The latency figures of the answered rows, from an HDR histogram of the summary's range.
fn figures(rows: &[common::Row]) -> serde_json::Value {
    let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
    for row in rows.iter().filter(|r| r.status > 0) {
        h.record(row.latency_ns.max(1) as u64).unwrap();
    }
    serde_json::json!({
        "count": h.len(),
        "min_ns": h.min(),
        "p50_ns": h.value_at_quantile(0.5),
        "p90_ns": h.value_at_quantile(0.9),
        "p99_ns": h.value_at_quantile(0.99),
        "max_ns": h.max(),
    })
}

#[test]
fn three_thousand_connections_under_1700_files_are_two_processes_and_one_run_directory() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spread");
    let url = server.url("/albums/1");
    let output = loadgen_under_sh(LIMIT)
        .args(["run", "--url", &url, "-c", "3000", "-d", "3s"])
        .args([
            "--think-time",
            "500ms",
            "--connect-rate",
            "6000/s",
            "--json",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["spread"]["processes"], 2, "{doc}");

    // One run directory: a shard directory per process and the run's own run.json.
    let shards = shard_dirs(&out);
    assert_eq!(shards.len(), 2, "{shards:?}");
    let mut rows = Vec::new();
    for (i, shard) in shards.iter().enumerate() {
        let run = run_json(shard);
        assert_eq!(run["shard"], format!("{i}/2"), "{shard:?}");
        rows.extend(read_rows(shard));
    }
    let n = rows.len() as u64;
    assert_eq!(n, server.server().requests_total(), "rows = server's count");

    // One summary, exactly the rows': counts, workers, and the percentiles of every row.
    let run = run_json(&out);
    let problems = contract::json_problems("run_json", &run);
    assert!(problems.is_empty(), "{problems:#?}");
    let summary = &run["summary"];
    assert_eq!(summary["requests"], n, "{summary}");
    assert_eq!(summary["failed"], 0, "{summary}");
    assert_eq!(run["records"]["rows"], n);
    assert_eq!(summary["workers"]["started"], 3000, "{summary}");
    let latency = &summary["ops"][0]["latency"];
    let want = figures(&rows);
    for key in ["count", "min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"] {
        assert_eq!(
            latency[key], want[key],
            "{key}: {latency} vs the rows' {want}"
        );
    }
    // One verdict, by the run's judge; the same document on stdout.
    assert_eq!(
        run["verdict"]["decided_by"], "loadgen run",
        "{}",
        run["verdict"]
    );
    assert_eq!(doc["verdict"], run["verdict"]);
    assert_eq!(doc["summary"]["requests"], n);
    assert_eq!(run["spread"]["processes"], 2);
    let handed: Vec<_> = run["spread"]["shards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["handed_over"].clone())
        .collect();
    assert_eq!(handed, [true, true], "{}", run["spread"]);
}

/// The console: one table and one Verdict line for the whole run.
#[test]
fn a_spread_run_prints_one_summary_and_one_verdict() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let url = server.url("/albums/1");
    let output = loadgen_under_sh(LIMIT)
        .args([
            "run",
            "--url",
            &url,
            "-c",
            "3000",
            "-d",
            "2s",
            "--no-progress",
        ])
        .args(["--think-time", "500ms", "--connect-rate", "6000/s"])
        .arg("--out")
        .arg(dir.path().join("spread"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let console = String::from_utf8_lossy(&output.stdout);
    assert_eq!(console.matches("Verdict").count(), 1, "{console}");
    let rows = server.server().requests_total();
    assert!(
        console.contains(&format!("{rows} rows in")) && console.contains("of 2 processes"),
        "{console}"
    );
}

#[test]
fn ctrl_c_reaches_every_process_and_their_rows_are_kept() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spread");
    let url = server.url("/albums/1");
    let child = loadgen_under_sh(LIMIT)
        .args(["run", "--url", &url, "-c", "3000", "-d", "60s"])
        .args([
            "--think-time",
            "500ms",
            "--connect-rate",
            "6000/s",
            "--json",
        ])
        .arg("--out")
        .arg(&out)
        .spawn()
        .unwrap();
    // Ctrl-C once both processes have written rows (their first segments close each second).
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    for _ in 0..600 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if server.server().requests_total() >= 6000 {
            break;
        }
    }
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let shards = shard_dirs(&out);
    assert_eq!(shards.len(), 2, "{shards:?}");
    for shard in &shards {
        assert_eq!(run_json(shard)["exit_reason"], "interrupted", "{shard:?}");
    }
    let rows: u64 = shards.iter().map(|s| read_rows(s).len() as u64).sum();
    assert_eq!(
        rows,
        server.server().requests_total(),
        "rows = server's count"
    );
    assert_eq!(doc["summary"]["requests"], rows, "{doc}");
    assert_eq!(run_json(&out)["exit_reason"], "interrupted");
}

#[test]
fn what_one_process_owns_is_refused_when_the_run_is_spread() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let url = server.url("/albums/1");
    let output = loadgen_under_sh(LIMIT)
        .args(["run", "--url", &url, "-c", "3000", "-d", "1s"])
        .args(["--metrics-addr", "127.0.0.1:0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--metrics-addr belongs to one process"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(server.server().requests_total(), 0);
}

/// `kill -9` of the parent (issue 58): its processes see their stdin's pipe end and stop as at
/// SIGTERM — they drain, write their run.json (`terminated`) and their rows, and the server's
/// count stops growing — rather than sending until `-d` (60 s here) ends.
#[test]
fn the_processes_stop_when_their_parent_is_killed() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spread");
    let url = server.url("/albums/1");
    let mut child = loadgen_under_sh(LIMIT)
        .args(["run", "--url", &url, "-c", "3000", "-d", "60s"])
        .args(["--think-time", "500ms", "--connect-rate", "6000/s"])
        .arg("--out")
        .arg(&out)
        .spawn()
        .unwrap();
    for _ in 0..600 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if server.server().requests_total() >= 6000 {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The count stops growing once the processes have drained: unchanged for a second.
    let mut last = server.server().requests_total();
    let mut still = 0;
    for _ in 0..240 {
        std::thread::sleep(std::time::Duration::from_millis(250));
        let now = server.server().requests_total();
        still = if now == last { still + 1 } else { 0 };
        last = now;
        if still == 4 {
            break;
        }
    }
    assert_eq!(
        still, 4,
        "the processes went on sending after their parent was killed"
    );
    let shards = shard_dirs(&out);
    assert_eq!(shards.len(), 2, "{shards:?}");
    for _ in 0..100 {
        if shards.iter().all(|s| s.join("run.json").exists()) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    for shard in &shards {
        assert_eq!(run_json(shard)["exit_reason"], "terminated", "{shard:?}");
    }
    let rows: u64 = shards.iter().map(|s| read_rows(s).len() as u64).sum();
    assert_eq!(
        rows,
        server.server().requests_total(),
        "rows = server's count"
    );
}

/// A process stopped (SIGSTOP) mid-run (issue 58): the parent no longer waits for it without
/// end; past its `-d`, `--grace` and 20 s it kills it, names it as not handed over, and the
/// run ends with exit 1 and the other process's rows.
#[test]
fn a_stopped_process_is_killed_past_the_runs_end() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spread");
    let url = server.url("/albums/1");
    let child = loadgen_under_sh(LIMIT)
        .args([
            "run", "--url", &url, "-c", "3000", "-d", "1s", "--grace", "1s",
        ])
        .args(["--think-time", "500ms", "--connect-rate", "6000/s"])
        .arg("--out")
        .arg(&out)
        .spawn()
        .unwrap();
    let processes = processes_of(&child, 2);
    rustix::process::kill_process(processes[0], rustix::process::Signal::STOP).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("still running 20s after their -d and --grace"),
        "{stderr}"
    );
    let run = run_json(&out);
    assert_eq!(not_handed_over(&run), 1, "{run:#}");
    // Whatever the stopped process wrote before it stopped is in the summary, read back.
    let rows: u64 = shard_dirs(&out)
        .iter()
        .map(|s| read_rows(s).len() as u64)
        .sum();
    assert_eq!(run["summary"]["requests"], rows, "{stderr}");
    assert_eq!(run["records"]["rows"], rows, "{stderr}");
}

/// The processes of a spread run, once `count` of them have started: the children of its
/// parent (the shell exec'd into loadgen).
fn processes_of(parent: &std::process::Child, count: usize) -> Vec<rustix::process::Pid> {
    let parent = parent.id().to_string();
    let mut processes = Vec::new();
    for _ in 0..300 {
        processes = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
                let after_name = stat.rsplit_once(')')?.1;
                let ppid = after_name.split_whitespace().nth(1)?;
                (ppid == parent).then(|| e.file_name().to_string_lossy().into_owned())
            })
            .collect::<Vec<_>>();
        if processes.len() == count {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(processes.len(), count, "{processes:?}");
    (processes.iter())
        .map(|p| rustix::process::Pid::from_raw(p.parse().unwrap()).unwrap())
        .collect()
}

/// A process killed (`kill -9`) mid-run (issue 58) hands nothing over; the parent reads its
/// closed segments back, so run.json's summary is every row on disk — the rows
/// `loadgen-analyze` reads, percentiles included — not the other process's alone, and the
/// warning says what was read back and what is lost. The kill comes once every process has
/// closed a segment (`--segment-interval 1s`), the end by Ctrl-C: counts, not times.
#[test]
fn a_killed_processs_closed_segments_are_read_back_into_the_summary() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spread");
    let url = server.url("/albums/1");
    let child = loadgen_under_sh(LIMIT)
        .args(["run", "--url", &url, "-c", "3000", "-d", "60s"])
        .args(["--think-time", "500ms", "--connect-rate", "6000/s"])
        .args(["--segment-interval", "1s", "--json"])
        .arg("--out")
        .arg(&out)
        .spawn()
        .unwrap();
    let processes = processes_of(&child, 2);
    let closed = |shard: &Path| {
        let segments = std::fs::read_dir(shard.join("requests"))
            .into_iter()
            .flatten();
        segments
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".parquet"))
            .count()
    };
    for _ in 0..600 {
        let shards = if out.is_dir() {
            shard_dirs(&out)
        } else {
            Vec::new()
        };
        if shards.len() == 2 && shards.iter().all(|s| closed(s) > 0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    rustix::process::kill_process(processes[0], rustix::process::Signal::KILL).unwrap();
    let parent = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(parent, rustix::process::Signal::INT).unwrap();
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let run = run_json(&out);
    assert_eq!(not_handed_over(&run), 1, "{run:#}");
    let shards = shard_dirs(&out);
    assert!(shards.iter().all(|s| closed(s) > 0), "{shards:?}");
    let mut rows = Vec::new();
    for shard in &shards {
        rows.extend(read_rows(shard));
    }
    let n = rows.len() as u64;
    let summary = &run["summary"];
    assert_eq!(summary["requests"], n, "{stderr}");
    assert_eq!(run["records"]["rows"], n, "{stderr}");
    let latency = &summary["ops"][0]["latency"];
    let want = figures(&rows);
    for key in ["count", "min_ns", "p50_ns", "p90_ns", "p99_ns", "max_ns"] {
        assert_eq!(
            latency[key], want[key],
            "{key}: {latency} vs the rows' {want}"
        );
    }
    let warnings = run["warnings"].to_string();
    assert!(
        warnings.contains("were read back into this summary"),
        "{warnings}"
    );
    let doc: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(doc["summary"]["requests"], n);
}

/// How many of a spread run's processes ended without handing over (run.json's `spread`).
fn not_handed_over(run: &serde_json::Value) -> usize {
    let shards = run["spread"]["shards"].as_array().unwrap();
    shards.iter().filter(|s| s["handed_over"] == false).count()
}
