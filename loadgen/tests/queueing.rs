//! One closed level's latency against its own fastest response (issue 44), on loadgen-server
//! with known truths: 4 workers × 10 ms and 16 connections queue at the server (12 of them
//! wait); 2 connections against 8 workers × 10 ms never wait. Without a probe the verdict says
//! each weakly (one level's fastest response is one sign) and run.json holds the numbers.
//! The probe, which runs by default where one level's latency is all the verdict has, adds
//! R(1) at one connection after the level: the 10 ms service time, against which the queued
//! level's median is several times longer — a second sign, which makes the queued level's
//! `server.queueing` strong; the level that never waits stays weakly none. The server counts
//! the probe's requests beside the run's; `--no-probe` leaves them out.

mod common;

use common::{loadgen_bin, run_json, ServerOnRuntime};
use servers::ServerConfig;

/// The measured levels run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `loadgen run` (the probe by default) for 2 s with `connections` against a server of
/// `workers` × 10 ms and returns run.json's verdict and probe; the server counted the run's
/// rows and the probe's requests.
fn verdict_of(workers: usize, connections: &str) -> (serde_json::Value, serde_json::Value) {
    let (verdict, probe, _) = run(workers, connections, &[]);
    assert_eq!(probe["requests"], 50, "{probe}");
    assert_eq!(probe["failed"], 0, "{probe}");
    // One connection never waits behind another: R(1) is the service time, at least 10 ms.
    assert!(probe["r1_ns"].as_f64().unwrap() >= 10e6, "{probe}");
    let evidence = verdict["evidence"].to_string();
    assert!(evidence.contains("probe: 1 connection"), "{evidence}");
    assert_eq!(verdict["numbers"]["probe_r1_ns"], probe["r1_ns"]);
    (verdict, probe)
}

/// Runs `loadgen run … flags` and returns run.json's verdict and probe, and the console;
/// checks that the server counted exactly the run's rows and the probe's requests.
fn run(
    workers: usize,
    connections: &str,
    flags: &[&str],
) -> (serde_json::Value, serde_json::Value, String) {
    // One level at a time: the tests beside it would be other work on this host's cores.
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = ServerOnRuntime::start(ServerConfig {
        service_time: "10ms".parse().unwrap(),
        workers: Some(workers),
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let url = server.url("/albums/1");
    let output = loadgen_bin()
        .args(["run", "--url", &url, "-c", connections, "-d", "2s"])
        .args(flags)
        .args(["--no-progress", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let run_json = run_json(&out);
    let verdict = run_json["verdict"].clone();
    let (rule, strength) = (&verdict["rule"], verdict["strength"].as_str().unwrap());
    assert!(
        stdout.contains(&format!("({strength}): ")),
        "{rule}: {stdout}"
    );
    let probe = run_json["probe"].clone();
    assert_eq!(stdout.contains("Probe "), !probe.is_null(), "{stdout}");
    let rows = common::read_rows(&out).len() as u64;
    let probed = probe["requests"].as_u64().unwrap_or(0);
    assert_eq!(server.server().requests_total(), rows + probed);
    (verdict, probe, stdout.into_owned())
}

#[test]
fn sixteen_connections_on_four_workers_wait_at_the_server() {
    let (verdict, probe) = verdict_of(4, "16");
    // The level's median against R(1): 16 connections on 4 workers wait for ~3 others.
    assert!(probe["latency_ratio"].as_f64().unwrap() >= 2.0, "{probe}");
    assert_eq!(verdict["rule"], "server.queueing", "{verdict:#}");
    assert_eq!(verdict["cause"], "server");
    // Two independent signs agree (the fastest response, the probe): said strongly — unless
    // other work kept this host's cores busy (a loaded machine), or the client took a good
    // share of the cores the server shares, which the verdict then says, weakly: the server
    // may have been kept off its cores.
    let numbers = &verdict["numbers"];
    let busy =
        numbers.get("host_other_cores").is_some() || numbers.get("host_busy_cores").is_some();
    let expected = if busy { "weak" } else { "strong" };
    assert_eq!(verdict["strength"], expected, "{verdict:#}");
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

/// `--no-probe`: no probe, so the fastest response is the one sign and `server.queueing` is
/// weak; the server counted the run's rows alone.
#[test]
fn no_probe_leaves_one_sign_and_the_servers_count_to_the_run() {
    let (verdict, probe, stdout) = run(4, "16", &["--no-probe"]);
    assert!(probe.is_null(), "{probe}");
    assert!(!stdout.contains("Probe "), "{stdout}");
    assert_eq!(verdict["rule"], "server.queueing", "{verdict:#}");
    assert_eq!(verdict["strength"], "weak", "{verdict:#}");
}

/// By default the probe runs only where the level's latency is all the verdict has: a level
/// whose errors decided it sends none, `--probe` sends it anyway.
#[test]
fn the_default_probes_only_where_one_levels_latency_decides() {
    let server = ServerOnRuntime::start(ServerConfig {
        error_rate: 0.5,
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    for (flags, probed) in [(&[][..], false), (&["--probe"][..], true)] {
        let out = dir.path().join(format!("run-{probed}"));
        let url = server.url("/albums/1");
        let status = loadgen_bin()
            .args(["run", "--url", &url, "-c", "4", "-d", "1s", "--no-progress"])
            .args(flags)
            .args(["--out", out.to_str().unwrap()])
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(0));
        let run_json = run_json(&out);
        assert_eq!(run_json["verdict"]["rule"], "errors.share", "{run_json:#}");
        assert_eq!(!run_json["probe"].is_null(), probed, "{flags:?}");
    }
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

/// A Ctrl-C while the probe runs cuts it short: the run's rows and run.json are written, the
/// probe is left out with a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_the_probe_cuts_it_short() {
    use loadgen::stop::{ExitReason, StopSignal};
    // One worker × 300 ms: the probe's requests take 300 ms each, so it runs for its 1 s.
    let server = servers::start(ServerConfig {
        service_time: "300ms".parse().unwrap(),
        workers: Some(1),
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let stop = StopSignal::new();
    let signal = stop.clone();
    let probes = std::env::temp_dir();
    let prefix = format!("loadgen-probe-{}-", std::process::id());
    tokio::spawn(async move {
        // The probe's scratch directory appears when it starts.
        while !std::fs::read_dir(&probes).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(&prefix)
        }) {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        signal.signal(ExitReason::Interrupted);
    });
    let url = format!("{}/albums/1", server.url());
    let flags = ["-c", "2", "-d", "1s", "--probe", "--no-progress"];
    let (_dir, out, outcome) = common::run_at(&url, &flags, stop).await;
    let run_json = run_json(&out);
    assert!(run_json["probe"].is_null(), "{run_json:#}");
    let warnings = run_json["warnings"].to_string();
    assert!(
        warnings.contains("the probe at one connection was cut short by a signal"),
        "{warnings}"
    );
    assert_eq!(
        common::read_rows(&out).len() as u64,
        outcome.summary.requests
    );
    server.shutdown().await;
}
