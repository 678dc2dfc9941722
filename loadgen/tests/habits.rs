//! Habits users bring from wrk, oha, vegeta and k6 (issue 49), on the real binary against a
//! real `loadgen-server`: the URL as the positional argument, `--targets -` from stdin, and
//! passing thresholds that show what they observed.

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{loadgen_bin, read_rows, run_json, ServerOnRuntime};
use servers::ServerConfig;

/// `loadgen run http://…/` is a run of that URL, as `wrk`, `oha` and `hey` take it; with
/// `--url` too it is refused with one sentence, exit 2.
#[test]
fn a_url_as_the_argument_is_run_as_url() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let url = server.url("/albums/1");
    let output = loadgen_bin()
        .args(["run", &url, "-c", "2", "-n", "40", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(read_rows(&out).len(), 40);
    assert_eq!(run_json(&out)["config"]["url"], url);

    let twice = loadgen_bin()
        .args(["run", &url, "--url", &url, "-n", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&twice.stderr);
    assert_eq!(twice.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("drop one of them"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
}

/// `--targets -` reads a vegeta targets list from stdin, as vegeta's `attack` does.
#[test]
fn targets_dash_reads_the_targets_from_stdin() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut child = loadgen_bin()
        .args(["run", "--targets", "-", "-c", "1", "-n", "20", "--out"])
        .arg(&out)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let text = format!(
        "GET {}\n\nGET {}\n",
        server.url("/"),
        server.url("/albums/1")
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let rows = read_rows(&out);
    assert_eq!(rows.len(), 20);
    let albums = rows.iter().filter(|r| r.op.contains("albums")).count();
    assert_eq!(albums, 10, "the two targets take turns");
    assert_eq!(run_json(&out)["config"]["scenario"], "targets from stdin");
}

/// Passing thresholds show what each observed, as k6 does, not only "all passed".
#[test]
fn passing_thresholds_show_their_observed_values() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let output = loadgen_bin()
        .args(["run", "--url", &server.url("/"), "-c", "1", "-n", "30"])
        .args(["--threshold", "p99<10s", "--threshold", "error_rate<50%"])
        .arg("--out")
        .arg(dir.path().join("run"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("Thresholds"))
        .unwrap_or_else(|| panic!("no Thresholds line:\n{stdout}"));
    assert!(line.contains("all 2 passed: p99<10s ("), "{line}");
    assert!(line.contains("error_rate<50% (0.00%)"), "{line}");
}

/// A capacity search's console (issue 49): its banner once, one line per level (no run
/// banner, no connect line per level), and the report after it without the levels again.
#[test]
fn a_capacity_search_says_its_banner_once_and_each_level_once() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let output = loadgen_bin()
        .args(["capacity", "--url", &server.url("/"), "--slo", "p99<2s"])
        .args([
            "--start-rate",
            "50",
            "--level-duration",
            "1s",
            "--warmup",
            "200ms",
        ])
        .args([
            "--cool-down",
            "100ms",
            "--budget",
            "4s",
            "--no-progress",
            "--out",
        ])
        .arg(dir.path().join("capacity"))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    // The budget ends the search unconverged (its own exit code); it wrote its answer.
    assert_ne!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.matches("capacity: the highest rate").count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("running open model"), "{stderr}");
    assert!(!stderr.contains("opening connections"), "{stderr}");
    let levels = stderr
        .lines()
        .filter(|l| l.contains("req/s offered"))
        .count();
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("capacity/capacity.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(levels, json["levels"].as_array().unwrap().len(), "{stderr}");
    assert!(stdout.contains("  Answer "), "{stdout}");
    assert!(!stdout.contains("req/s offered"), "{stdout}");
}

/// `loadgen run 127.0.0.1:18080/albums/1` (a URL without its scheme, as curl takes it) says
/// what to type, in one sentence, exit 2 — not "cannot read scenario file" (issue 61).
#[test]
fn a_url_without_its_scheme_is_told_what_to_type() {
    for given in ["127.0.0.1:18080/albums/1", "localhost:8080", "localhost"] {
        let output = loadgen_bin().args(["run", given]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("did you mean http://{given}?")),
            "{stderr}"
        );
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
    // A scenario file that is not there is still said to be one.
    let output = loadgen_bin()
        .args(["run", "missing.toml"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot read scenario file missing.toml"),
        "{stderr}"
    );
}

/// `-h` is the short help (what a first run needs, a screenful), `--help` every flag
/// (issue 61: `loadgen run -h` printed 234 lines).
#[test]
fn short_help_is_short_and_long_help_is_whole() {
    for command in ["run", "sweep", "capacity"] {
        let short = loadgen_bin().args([command, "-h"]).output().unwrap();
        let long = loadgen_bin().args([command, "--help"]).output().unwrap();
        let (short, long) = (
            String::from_utf8_lossy(&short.stdout).to_string(),
            String::from_utf8_lossy(&long.stdout).to_string(),
        );
        assert!(
            short.lines().count() <= 100,
            "{command} -h: {}",
            short.lines().count()
        );
        assert!(
            long.lines().count() >= 2 * short.lines().count(),
            "{command}"
        );
        for flag in ["--url", "--out", "--threshold"] {
            assert!(short.contains(flag), "{command} -h lacks {flag}");
        }
        assert!(
            short.contains("--help") && long.contains("--source-addr"),
            "{command}"
        );
        assert!(!short.contains("--source-addr"), "{command} -h");
    }
}

/// A bad combination of flags shows the usage as a user types it — the URL or scenario file
/// optional — not clap's `<SCENARIO.toml>`, which reads as required (issue 61).
#[test]
fn a_bad_combination_shows_the_usage_without_a_required_scenario() {
    let output = loadgen_bin()
        .args(["run", "-d", "10s", "-n", "5"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(!stderr.contains("<SCENARIO.toml>"), "{stderr}");
    assert!(
        stderr.contains("Usage: loadgen run [URL | SCENARIO.toml] [OPTIONS]"),
        "{stderr}"
    );
}
