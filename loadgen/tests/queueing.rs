//! One closed level's latency against its own fastest response (issue 44), on loadgen-server
//! with known truths: 4 workers × 10 ms and 16 connections queue at the server (12 of them
//! wait); 2 connections against 8 workers × 10 ms never wait. Without a probe the verdict says
//! each weakly (one level's fastest response is one sign) and run.json holds the numbers.
//! `--probe` adds R(1) at one connection after the level: the 10 ms service time, against
//! which the queued level's median is several times longer — a second sign, which makes the
//! queued level's `server.queueing` strong; the level that never waits stays weakly none.

mod common;

use common::{loadgen_bin, run_json, ServerOnRuntime};
use servers::ServerConfig;

/// Runs `loadgen run --probe` for 2 s with `connections` against a server of `workers` × 10 ms
/// and returns run.json's verdict and probe.
fn verdict_of(workers: usize, connections: &str) -> (serde_json::Value, serde_json::Value) {
    let server = ServerOnRuntime::start(ServerConfig {
        service_time: "10ms".parse().unwrap(),
        workers: Some(workers),
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let url = server.url("/albums/1");
    let output = loadgen_bin()
        .args([
            "run",
            "--url",
            &url,
            "-c",
            connections,
            "-d",
            "2s",
            "--probe",
        ])
        .args(["--no-progress", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let run_json = run_json(&out);
    let verdict = run_json["verdict"].clone();
    let (rule, strength) = (&verdict["rule"], verdict["strength"].as_str().unwrap());
    assert!(
        stdout.contains(&format!("({strength}) —")),
        "{rule}: {stdout}"
    );
    let probe = run_json["probe"].clone();
    assert_eq!(probe["requests"], 50, "{probe}");
    assert_eq!(probe["failed"], 0, "{probe}");
    // One connection never waits behind another: R(1) is the service time, at least 10 ms.
    assert!(probe["r1_ns"].as_f64().unwrap() >= 10e6, "{probe}");
    assert!(stdout.contains("Probe "), "{stdout}");
    let evidence = verdict["evidence"].to_string();
    assert!(evidence.contains("probe: 1 connection"), "{evidence}");
    assert_eq!(verdict["numbers"]["probe_r1_ns"], probe["r1_ns"]);
    (verdict, probe)
}

#[test]
fn sixteen_connections_on_four_workers_wait_at_the_server() {
    let (verdict, probe) = verdict_of(4, "16");
    // The level's median against R(1): 16 connections on 4 workers wait for ~3 others.
    assert!(probe["latency_ratio"].as_f64().unwrap() >= 2.0, "{probe}");
    assert_eq!(verdict["rule"], "server.queueing", "{verdict:#}");
    assert_eq!(verdict["cause"], "server");
    // Two independent signs agree (the fastest response, the probe): said strongly.
    assert_eq!(verdict["strength"], "strong", "{verdict:#}");
    let numbers = &verdict["numbers"];
    // 16 connections on 4 workers: a request waits for 3 others, ~40 ms against 10 ms.
    assert!(
        numbers["latency_ratio"].as_f64().unwrap() >= 2.0,
        "{numbers}"
    );
    // What the server served at a time (throughput × the fastest response) is at most half
    // the connections; above its 4 workers only by what a busy machine adds to the fastest.
    let at_once = numbers["served_at_once"].as_f64().unwrap();
    assert!((1.0..=8.0).contains(&at_once), "{numbers}");
    let summary = verdict["summary"].as_str().unwrap();
    assert!(
        summary.contains("requests waited at the server"),
        "{summary}"
    );
    assert!(summary.contains("a probe at one connection"), "{summary}");
}

#[test]
fn two_connections_on_eight_workers_never_wait() {
    let (verdict, probe) = verdict_of(8, "2");
    assert!(probe["latency_ratio"].as_f64().unwrap() <= 1.5, "{probe}");
    assert_eq!(verdict["rule"], "none.no_queue", "{verdict:#}");
    assert_eq!(verdict["cause"], "none");
    assert_eq!(verdict["strength"], "weak");
    assert!(verdict["numbers"]["latency_ratio"].as_f64().unwrap() <= 1.5);
    let summary = verdict["summary"].as_str().unwrap();
    assert!(
        summary.contains("nothing queued at the server"),
        "{summary}"
    );
}

/// `--probe` follows one closed level of one process; anywhere else it is refused with one
/// sentence and exit 2 before anything runs, never ignored.
#[test]
fn a_probe_after_anything_but_one_closed_level_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |args: &[&str], why: &str| {
        let out = dir.path().join(args.join("-").replace(['/', ' '], "_"));
        let output = loadgen_bin()
            .args(["run", "--url", "http://127.0.0.1:9/", "-d", "1s", "--probe"])
            .args(args)
            .args(["--no-progress", "--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
        assert!(!out.exists(), "{args:?} left {out:?} behind");
    };
    refused(
        &["--rate", "100"],
        "this run is not a closed level; drop --probe",
    );
    refused(&["--scenario", "stepcounter"], "not a closed level");
    refused(
        &["-c", "2", "--shard", "0/2"],
        "one shard of several (--shard)",
    );
}
