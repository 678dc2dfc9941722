//! Thresholds end to end: `--threshold` and a scenario's `thresholds` judged on the recorded
//! rows, a crossed one exits 99 and is listed on the console and in run.json, bad ones are
//! refused before anything runs (exit 2).
//!
//! The server sleeps 20 ms per request, so "at least 20 ms" is a bound no machine load can
//! break; nothing here depends on how fast this machine is.

mod common;

/// Issue 34: a threshold may name an op by its request's name in the scenario (`get_album`)
/// as well as by its label; it is judged on the op's rows either way, and a name that is
/// neither is refused before anything is sent, listing both.
#[test]
fn an_op_is_named_by_its_request_name_or_its_label() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = common::loadgen_bin()
        .args(["run", "--scenario", "albums", "--url", &server.url("")])
        .args(["-n", "20", "--no-progress", "--threshold"])
        .arg("p99[get_album]<10s")
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let judged = &common::run_json(&out)["thresholds"][0];
    assert_eq!(judged["op"], "GET /albums/{album_id}", "{judged}");
    assert!(judged["observed"].as_f64().is_some(), "{judged}");
    let output = common::loadgen_bin()
        .args(["run", "--scenario", "albums", "--url", &server.url("")])
        .args(["-n", "20", "--threshold", "p99[get_albums]<10s", "--out"])
        .arg(dir.path().join("refused"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("GET /albums/{album_id} (get_album)"),
        "{stderr}"
    );
    assert!(!dir.path().join("refused").exists());
}

use common::{loadgen_bin, read_rows, run_json, ServerOnRuntime};
use servers::ServerConfig;

fn slow_server() -> ServerOnRuntime {
    ServerOnRuntime::start(ServerConfig {
        service_time: "20ms".parse().unwrap(),
        ..ServerConfig::default()
    })
}

fn run(args: &[&str]) -> (i32, String) {
    let output = loadgen_bin().args(args).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), text)
}

#[test]
fn a_crossed_threshold_exits_99_and_says_what_was_observed() {
    let server = slow_server();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (code, text) = run(&[
        "run",
        "--url",
        &server.url("/"),
        "-c",
        "4",
        "-n",
        "120",
        "--no-progress",
        "--threshold",
        "p99<5ms",
        "--threshold",
        "error_rate<1%",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 99, "{text}");
    assert!(text.contains("Thresholds"), "{text}");
    assert!(
        text.contains("1 of 2 CROSSED (exit code 99): p99<5ms (observed"),
        "{text}"
    );

    let doc = run_json(&out);
    assert_eq!(doc["exit_code"], 99);
    let results = doc["thresholds"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["threshold"], "p99<5ms");
    assert_eq!(results[0]["passed"], false);
    assert_eq!(results[0]["unit"], "ns");
    assert_eq!(results[0]["limit"], 5e6);
    assert!(results[0]["op"].is_null());
    assert_eq!(results[1]["passed"], true);
    assert_eq!(results[1]["observed"], 0.0);

    // Judged on every recorded row: the exact p99 of the rows, at HDR precision.
    let mut latencies: Vec<i64> = read_rows(&out)
        .iter()
        .filter(|r| r.status != 0)
        .map(|r| r.latency_ns)
        .collect();
    assert_eq!(latencies.len(), 120);
    latencies.sort_unstable();
    let exact_p99 = latencies[(0.99f64 * 120.0).ceil() as usize - 1] as f64;
    let observed = results[0]["observed"].as_f64().unwrap();
    assert!(
        (observed - exact_p99).abs() <= 0.002 * exact_p99,
        "observed {observed} vs rows {exact_p99}"
    );
    assert!(observed >= 20e6, "{observed}");
}

#[test]
fn thresholds_that_hold_exit_0_and_a_scenarios_thresholds_name_ops() {
    let server = slow_server();
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        r#"
thresholds = ["p50[home]>=20ms", "throughput[home]>0/s"]
sequence = ["home", "again"]

[requests.home]
method = "GET"
path = "/"
label = "home"

[requests.again]
method = "GET"
path = "/"
label = "again"

[model]
kind = "closed"
workers = 2
requests = 40
"#,
    )
    .unwrap();
    // The scenario's thresholds, plus one from the command line, into `dir/name`.
    let run_scenario = |name: &str, threshold: &str| {
        let out = dir.path().join(name);
        let (code, text) = run(&[
            "run",
            scenario.to_str().unwrap(),
            "--url",
            &server.url(""),
            "--no-progress",
            "--threshold",
            threshold,
            "--out",
            out.to_str().unwrap(),
        ]);
        (code, text, out)
    };
    let (code, text, out) = run_scenario("pass", "mean>=20ms");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("all 3 passed"), "{text}");
    let doc = run_json(&out);
    assert_eq!(doc["exit_code"], 0);
    let results = doc["thresholds"].as_array().unwrap();
    assert_eq!(results[0]["op"], "home");
    assert_eq!(results[2]["threshold"], "mean>=20ms");
    assert!(results.iter().all(|r| r["passed"] == true), "{results:?}");
    // The scenario's thresholds are part of the definition run.json records.
    assert_eq!(
        doc["config"]["definition"]["thresholds"][0],
        "p50[home]>=20ms"
    );

    // The same run with one of `again`'s requests held to an impossible bound fails alone.
    let (code, text, out) = run_scenario("fail", "max[again]<1ms");
    assert_eq!(code, 99, "{text}");
    let results = run_json(&out)["thresholds"].as_array().unwrap().clone();
    let passed: Vec<bool> = results.iter().map(|r| r["passed"] == true).collect();
    assert_eq!(passed, [true, true, false], "{results:?}");
}

#[test]
fn bad_thresholds_are_refused_before_anything_runs() {
    let server = slow_server();
    let dir = tempfile::tempdir().unwrap();
    for (threshold, needle) in [
        ("p99<50", "without a unit"),
        ("p99[nope]<1s", "which this run does not send"),
        ("latency<1s", "none of pN"),
    ] {
        let out = dir.path().join("never");
        let (code, text) = run(&[
            "run",
            "--url",
            &server.url("/"),
            "-n",
            "5",
            "--threshold",
            threshold,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, 2, "{threshold}: {text}");
        assert!(text.contains(needle), "{threshold}: {text}");
        assert_eq!(text.trim().lines().count(), 1, "one sentence: {text}");
        assert!(!out.exists(), "{threshold}: nothing is written");
    }
}

/// Issue 26: a crossed threshold on `sweep` and `calibrate` exited 0. Both now judge their
/// runs, print the Thresholds block, exit 99 and put the results in --json.
#[test]
fn sweep_and_calibrate_exit_99_when_a_threshold_is_crossed() {
    let server = slow_server();
    let dir = tempfile::tempdir().unwrap();
    let sweep_dir = dir.path().join("sweep");
    let (code, text) = run(&[
        "sweep",
        "--url",
        &server.url("/"),
        "--levels",
        "1,2",
        "-n",
        "10",
        "--no-progress",
        "--threshold",
        "p99<5ms",
        "--threshold",
        "error_rate<1%",
        "--out",
        sweep_dir.to_str().unwrap(),
    ]);
    assert_eq!(code, 99, "{text}");
    assert!(text.contains("Thresholds"), "{text}");
    assert!(
        text.contains("CROSSED at N = 1, N = 2 (exit code 99)"),
        "{text}"
    );
    let sweep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sweep_dir.join("sweep.json")).unwrap())
            .unwrap();
    assert_eq!(sweep["thresholds_passed"], false);
    assert_eq!(sweep["levels"][0]["thresholds"][0]["passed"], false);
    assert_eq!(sweep["levels"][0]["thresholds"][1]["passed"], true);

    let calibration = dir.path().join("calibration");
    let (code, text) = run(&[
        "calibrate",
        "--url",
        &server.url("/"),
        "-n",
        "10",
        "--warmup",
        "0",
        "--json",
        "--threshold",
        "p99<5ms",
        "--out",
        calibration.to_str().unwrap(),
    ]);
    assert_eq!(code, 99, "{text}");
    let json_end = text.rfind('}').unwrap() + 1;
    let doc: serde_json::Value = serde_json::from_str(&text[..json_end]).unwrap();
    assert_eq!(doc["thresholds"][0]["threshold"], "p99<5ms");
    assert_eq!(doc["thresholds"][0]["passed"], false);
    assert_eq!(run_json(&calibration)["exit_code"], 99);

    // Met thresholds exit 0, and the block says so.
    let (code, text) = run(&[
        "calibrate",
        "--url",
        &server.url("/"),
        "-n",
        "10",
        "--warmup",
        "0",
        "--threshold",
        "p99>=20ms",
        "--out",
        dir.path().join("met").to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("calibration    all 1 passed"), "{text}");
}

/// `--junit FILE` (issues 30, 39): one test case per threshold, a crossed one a `<failure>`
/// with what was observed; a sweep writes one suite per level, a calibration one suite. Each
/// suite is named after `--out`'s folder (or `--junit-name`), so two runs are told apart, and
/// timed with its run's duration.
#[test]
fn junit_files_have_a_case_per_threshold_and_a_failure_per_crossed_one() {
    let server = slow_server();
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let judged = ["--threshold", "p99<5ms", "--threshold", "error_rate<1%"];
    let runs: [(&str, &[&str], &[&str]); 4] = [
        ("run.xml", &["run", "-c", "2", "-n", "10"], &["run.xml.out"]),
        (
            "candidate.xml",
            &["run", "-c", "2", "-n", "10", "--junit-name", "pr-7"],
            &["pr-7"],
        ),
        (
            "sweep.xml",
            &["sweep", "--levels", "1,2", "-n", "10"],
            &["sweep.xml.out: N = 1", "sweep.xml.out: N = 2"],
        ),
        (
            "calibrate.xml",
            &["calibrate", "-n", "10", "--warmup", "0"],
            &["calibrate.xml.out"],
        ),
    ];
    for (file, command, names) in runs {
        let mut args = command.to_vec();
        let (url, junit, out) = (server.url("/"), path(file), path(&format!("{file}.out")));
        args.extend([
            "--url",
            &url,
            "--no-progress",
            "--junit",
            &junit,
            "--out",
            &out,
        ]);
        args.extend(judged);
        let (code, text) = run(&args);
        assert_eq!(code, 99, "{text}");
        let xml = std::fs::read_to_string(&junit).unwrap();
        let suites = common::junit::suites(&xml);
        let found: Vec<&str> = suites.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(found, names, "{xml}");
        for suite in &suites {
            assert_eq!(
                (suite.tests, suite.cases, suite.failures),
                (2, 2, 1),
                "{xml}"
            );
            // 10 requests of 20 ms each, at least: the run's duration, not a placeholder.
            assert!(suite.time_s >= 0.02 && suite.time_s < 60.0, "{xml}");
        }
        assert!(xml.contains("p99&lt;5ms crossed: observed "), "{xml}");
    }
}
