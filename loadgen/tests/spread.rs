//! One `loadgen run` past the open-files limit (issue 46): with the limit lowered to 1,700
//! files (`ulimit -n` before exec), 3,000 connections run as two processes of loadgen, one
//! shard each, into one run directory whose rows are the server's count; Ctrl-C reaches both;
//! what cannot be shared between processes is refused with one sentence. The real binary
//! against the reference server on 127.0.0.1; a few seconds.

mod common;

use std::path::Path;

use common::{loadgen_under_sh, read_rows, run_json, ServerOnRuntime};
use servers::ServerConfig;

const LIMIT: &str = "ulimit -n 1700";

/// The shard directories of a spread run, sorted.
fn shard_dirs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    dirs
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
    let totals: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(totals["processes"], 2, "{totals}");
    assert_eq!(totals["failed"], 0, "{totals}");
    assert!(totals["lost"].as_array().unwrap().is_empty(), "{totals}");

    // One run directory: a shard directory per process, nothing else; every row on disk.
    let shards = shard_dirs(&out);
    assert_eq!(shards.len(), 2, "{shards:?}");
    let mut rows = 0;
    let mut workers = 0;
    for (i, shard) in shards.iter().enumerate() {
        let run = run_json(shard);
        assert_eq!(run["shard"], format!("{i}/2"), "{shard:?}");
        workers += run["summary"]["workers"]["started"].as_u64().unwrap();
        rows += read_rows(shard).len() as u64;
    }
    assert_eq!(workers, 3000, "each process ran its share of the workers");
    assert_eq!(
        rows,
        server.server().requests_total(),
        "rows = server's count"
    );
    assert_eq!(totals["requests"], rows, "{totals}");
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
    let totals: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
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
    assert_eq!(totals["requests"], rows, "{totals}");
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
