//! The probe at one connection as a user expects it (issue 58): by default it sends again
//! only requests safe to repeat, never at `-c 1`, never counts a failed request towards R(1),
//! says what it sent, and a signal during it is the run's exit code. Each against a server
//! that counts what it received.

mod common;
#[allow(dead_code)]
mod counting;

use std::time::{Duration, Instant};

use common::{loadgen_bin, read_rows, run_json, ServerOnRuntime};
use counting::{After, Counting};
use servers::ServerConfig;

/// Runs `loadgen run ARGS --out DIR/NAME --no-progress`.
fn run(
    args: &[&str],
    dir: &std::path::Path,
    name: &str,
) -> (std::process::Output, std::path::PathBuf) {
    let out = dir.join(name);
    let output = loadgen_bin()
        .args(["run", "--no-progress", "--out", out.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    (output, out)
}

/// A level of POSTs that queue at the server (16 connections on 4 workers × 10 ms: the
/// verdict the probe could confirm): by default no POST is sent again, and a warning says
/// why; `--probe` sends them, and says in `--json` what and how many.
#[test]
fn the_probe_never_resends_posts_unless_asked() {
    let server = ServerOnRuntime::start(ServerConfig {
        service_time: "10ms".parse().unwrap(),
        workers: Some(4),
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let url = server.url("");
    let level = [
        "--scenario",
        "twinder",
        "--url",
        &url,
        "-c",
        "16",
        "-n",
        "200",
    ];
    let (output, out) = run(&level, dir.path(), "default");
    assert!(output.status.success(), "{output:?}");
    let level_json = run_json(&out);
    assert!(level_json["probe"].is_null(), "{level_json:#}");
    assert_eq!(read_rows(&out).len(), 200);
    assert_eq!(server.server().requests_total(), 200, "POSTs sent again");
    let rule = level_json["verdict"]["rule"].as_str().unwrap();
    if ["server.queueing", "none.no_queue"].contains(&rule) {
        let warnings = level_json["warnings"].to_string();
        assert!(
            warnings.contains("the level sends POST requests"),
            "{warnings}"
        );
        assert!(warnings.contains("--probe sends it anyway"), "{warnings}");
    }

    let (output, out) = run(
        &[&level[..], &["--probe", "--json"]].concat(),
        dir.path(),
        "asked",
    );
    assert!(output.status.success(), "{output:?}");
    let printed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let probe = &printed["probe"];
    let sent = probe["requests"].as_u64().unwrap();
    assert!(sent >= 1, "{probe}");
    assert_eq!(probe["ops"]["POST /swipe/{direction}/"], sent, "{probe}");
    assert_eq!(run_json(&out)["probe"], *probe);
    assert_eq!(server.server().requests_total(), 400 + sent);
}

/// A DELETE from a targets file is not safe to repeat either; a GET is, and then the
/// console's Probe line names what it sent.
#[test]
fn a_delete_is_not_probed_by_default_and_a_get_is_named() {
    let server = Counting::start(usize::MAX, After::Unavailable);
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets.txt");
    std::fs::write(&targets, format!("DELETE {}\n", server.url("/items/1"))).unwrap();
    let targets = targets.to_str().unwrap();
    let (output, out) = run(
        &["--targets", targets, "-c", "4", "-n", "100"],
        dir.path(),
        "d",
    );
    assert!(output.status.success(), "{output:?}");
    assert!(run_json(&out)["probe"].is_null());
    assert_eq!(server.count(), 100, "DELETEs sent again");
    let url = server.url("/items/1");
    let (output, out) = run(
        &["--url", &url, "-c", "4", "-n", "100", "--probe"],
        dir.path(),
        "g",
    );
    assert!(output.status.success(), "{output:?}");
    let sent = run_json(&out)["probe"]["requests"].as_u64().unwrap();
    assert_eq!(server.count() as u64, 200 + sent);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("(GET /items/1: {sent}; not the run's)")),
        "{stdout}"
    );
}

/// At `-c 1` the level already measured R(1): the default sends no probe, `--probe` is bad
/// input (one sentence, exit 2, nothing written).
#[test]
fn the_probe_never_runs_at_one_connection() {
    let server = Counting::start(usize::MAX, After::Unavailable);
    let dir = tempfile::tempdir().unwrap();
    let url = server.url("/");
    let (output, out) = run(&["--url", &url, "-c", "1", "-n", "5"], dir.path(), "one");
    assert!(output.status.success(), "{output:?}");
    assert!(run_json(&out)["probe"].is_null());
    assert_eq!(server.count(), 5);
    let (output, out) = run(
        &["--url", &url, "-c", "1", "-n", "5", "--probe"],
        dir.path(),
        "asked",
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("at one connection already"), "{stderr}");
    assert!(!out.exists());
    assert_eq!(server.count(), 5);
}

/// A server that answers 503 once the level's 100 requests are served: the probe's answers
/// all failed, so there is no R(1) (run.json's `probe` null, a warning with the failures);
/// where 10 of its requests succeed, R(1) is theirs and the 40 failures are said.
#[test]
fn a_failed_probe_request_never_counts_towards_r1() {
    let dir = tempfile::tempdir().unwrap();
    let all_failed = Counting::start(100, After::Unavailable);
    let url = all_failed.url("/");
    let (output, out) = run(
        &["--url", &url, "-c", "8", "-n", "100", "--probe"],
        dir.path(),
        "a",
    );
    assert!(output.status.success(), "{output:?}");
    let run_json_a = run_json(&out);
    assert!(run_json_a["probe"].is_null(), "{run_json_a:#}");
    let warnings = run_json_a["warnings"].to_string();
    assert!(
        warnings.contains("none succeeded (http_status 503: "),
        "{warnings}"
    );
    assert!(!run_json_a["verdict"].to_string().contains("probe"));

    let some_failed = Counting::start(110, After::Unavailable);
    let url = some_failed.url("/");
    let (output, out) = run(
        &["--url", &url, "-c", "8", "-n", "100", "--probe"],
        dir.path(),
        "s",
    );
    assert!(output.status.success(), "{output:?}");
    let probe = run_json(&out)["probe"].clone();
    let sent = probe["requests"].as_u64().unwrap();
    assert_eq!(probe["failed"].as_u64().unwrap(), sent - 10, "{probe}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("{} failed and left out", sent - 10)),
        "{stdout}"
    );
}

/// A server that stops answering after the level: the probe's one request is cut off after
/// its 1 s and 1 s more, not after the run's `--grace` of 30 s, and nothing says a signal
/// came when none did.
#[test]
fn a_probe_against_a_server_that_hangs_ends_without_a_signal() {
    let dir = tempfile::tempdir().unwrap();
    let server = Counting::start(100, After::Hang);
    let url = server.url("/");
    let started = Instant::now();
    let args = [
        "--url", &url, "-c", "4", "-n", "100", "--probe", "--grace", "30s",
    ];
    let (output, out) = run(&args, dir.path(), "hang");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(output.status.success(), "{output:?}");
    let run_json = run_json(&out);
    let warnings = run_json["warnings"].to_string();
    assert!(!warnings.contains("signal"), "{warnings}");
    assert!(
        warnings.contains("none succeeded (cancelled: 1)"),
        "{warnings}"
    );
    assert_eq!(server.count(), 101);
}

/// Ctrl-C during the probe exits 130 and SIGTERM 143, as during the level; run.json says so.
#[test]
fn a_signal_during_the_probe_is_the_runs_exit_code() {
    for (signal, code, reason) in [("INT", 130, "interrupted"), ("TERM", 143, "terminated")] {
        let dir = tempfile::tempdir().unwrap();
        let server = Counting::start(20, After::Hang);
        let out = dir.path().join("run");
        let url = server.url("/");
        let child = loadgen_bin()
            .args([
                "run",
                "--url",
                &url,
                "-c",
                "2",
                "-n",
                "20",
                "--probe",
                "--no-progress",
            ])
            .args(["--out", out.to_str().unwrap()])
            .spawn()
            .unwrap();
        // The 21st request is the probe's: the server holds it.
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.count() < 21 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let kill = std::process::Command::new("kill")
            .args([&format!("-{signal}"), &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let output = child.wait_with_output().unwrap();
        assert_eq!(output.status.code(), Some(code), "{signal}: {output:?}");
        let run_json = run_json(&out);
        assert_eq!(run_json["exit_reason"], reason);
        assert_eq!(run_json["exit_code"], code);
        assert!(run_json["probe"].is_null());
    }
}
