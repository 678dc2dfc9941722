//! The `loadgen` binary as a user runs it: exit codes, messages, signals, the embedded demo.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{read_rows, run_json};
use servers::ServerConfig;

fn loadgen() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_loadgen"));
    command.stdin(Stdio::null());
    command
}

#[test]
fn embedded_demo_runs_and_prints_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let output = loadgen()
        .args(["run", "-c", "4", "-d", "1s", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for needle in [
        "Throughput",
        "Wall time",
        "p99.9",
        "GET /",
        "embedded",
        "Run directory",
    ] {
        assert!(
            stdout.contains(needle) || String::from_utf8_lossy(&output.stderr).contains(needle),
            "missing {needle}: {stdout}"
        );
    }
    let rows = read_rows(&out);
    assert!(rows.len() > 100);
    assert_eq!(run_json(&out)["config"]["embedded_server"], true);
    assert_eq!(run_json(&out)["summary"]["requests"], rows.len() as u64);
    // The embedded server runs on the client's cores, and the Client line says so.
    assert!(
        stdout.contains("the embedded server shares these"),
        "{stdout}"
    );
    assert_eq!(run_json(&out)["client"]["server_shares_cores"], true);
}

#[test]
fn json_summary_is_machine_readable() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = loadgen()
        .args([
            "run",
            "-c",
            "2",
            "-n",
            "300",
            "--json",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("stdout is JSON");
    assert_eq!(json["summary"]["requests"], 300);
    assert_eq!(json["summary"]["ops"][0]["op"], "GET /");
    assert!(
        json["summary"]["ops"][0]["latency"]["p99_ns"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(json["exit_reason"], "completed");
}

#[test]
fn unreachable_target_is_one_clear_error_with_exit_2_and_no_run_dir() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    let output = loadgen()
        .args([
            "run",
            "--url",
            &format!("http://127.0.0.1:{port}/"),
            "-n",
            "10",
        ])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot connect to http://127.0.0.1"),
        "{stderr}"
    );
    assert!(stderr.contains("refused"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(
        !out.exists(),
        "an unreachable target must not leave a run directory"
    );
}

#[test]
fn bad_input_is_exit_2_with_a_message_naming_the_fix() {
    let cases: [(&[&str], &str); 15] = [
        (&["run", "-c", "abc"], "--connections"),
        (&["run", "-c", "0"], "at least 1"),
        (&["run", "--url", "ftp://example.test/"], "only http://"),
        (&["run", "-d", "soon"], "not a duration"),
        (&["run", "--link-capacity", "fast"], "not a link capacity"),
        (&["run", "--link-capacity", "200mb"], "such as 200mbit"),
        (&["run", "-H", "no-colon-here"], "'Name: value'"),
        (
            &["run", "--body", "@/nonexistent/body.json"],
            "cannot read the file",
        ),
        (&["run", "--out", "s3:///prefix"], "names no bucket"),
        (
            &["run", "--out", "s3://bucket/a/../b"],
            "'..' are not allowed",
        ),
        (&["calibrate", "--out", "s3://bucket/cal"], "aws s3 sync"),
        (
            &["sweep", "--levels", "1,2", "--out", "s3://bucket/sweep"],
            "aws s3 sync",
        ),
        // The adversarial pass of issue 36 over this set's new flags.
        (
            &[
                "run",
                "--url",
                "http://127.0.0.1:9/",
                "--targets-weights",
                "1,2",
            ],
            "give --targets FILE",
        ),
        (
            &["run", "--trace", "--trace-sample", "-0.5"],
            "not a fraction from 0 to 1",
        ),
        (
            &["run", "--server-metrics", "ftp://x/metrics"],
            "not an http:// or https:// URL",
        ),
    ];
    for (args, needle) in cases {
        let output = loadgen().args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// Issue 36: `--junit` on a run's own files (a segment, run.json, capacity.json, the
/// --calibration run read) overwrote them after the run, exit 0, every row gone. Now each is
/// refused before anything runs: exit 2, no directory created, the calibration untouched.
#[test]
fn regression_an_output_on_a_run_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let at = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    let cal = at("cal");
    let recorded = loadgen()
        .args(["calibrate", "-n", "50", "--warmup", "5", "--no-progress"])
        .args(["--out", &cal])
        .output()
        .unwrap();
    assert!(recorded.status.success(), "{recorded:?}");
    std::os::unix::fs::symlink(&cal, at("link")).unwrap();
    let before = snapshot(tmp.path());
    let (jout, jcap) = (at("jout"), at("jcap"));
    let slo = "--slo p99<1s";
    let cases = [
        "run --out {jout} --junit {jout}/requests/part-00000.parquet",
        "run --out {jout} --junit {jout}/run.json",
        "run --out {jout} --junit {jout}",
        "calibrate --out {jout} --junit {jout}/./run.json",
        "capacity {slo} --start-rate 50 --out {jcap} --junit {jcap}/capacity.json",
        "sweep --levels 1 --calibration {cal} --junit {cal}/run.json",
        "sweep --levels 1 --calibration {cal} --out {cal}/requests",
        "capacity {slo} --calibration {cal} --junit {link}/requests/part-00000.parquet",
    ]
    .map(|case| {
        let case = (case.replace("{jout}", &jout).replace("{jcap}", &jcap))
            .replace("{slo}", slo)
            .replace("{cal}", &cal)
            .replace("{link}", &at("link"));
        case.split_whitespace()
            .map(String::from)
            .collect::<Vec<_>>()
    });
    for args in cases {
        // `-n` is a flag of run, calibrate and sweep; capacity chooses its levels itself.
        let count: &[&str] = if args[0] == "capacity" {
            &[]
        } else {
            &["-n", "20"]
        };
        let output = loadgen()
            .args(&args)
            .args(count)
            .arg("--no-progress")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("would overwrite that run's files"),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            !std::path::Path::new(&jout).exists(),
            "{args:?} wrote {jout}"
        );
        assert!(
            !std::path::Path::new(&jcap).exists(),
            "{args:?} wrote {jcap}"
        );
        assert!(
            snapshot(tmp.path()) == before,
            "{args:?} changed the calibration"
        );
    }
    // Beside the run, the same --junit is written as before.
    let output = loadgen()
        .args(["run", "-n", "20", "--no-progress", "--out", &jout])
        .args(["--junit", &at("jout.xml")])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(tmp.path().join("jout.xml").is_file());
}

#[test]
fn out_dir_that_holds_a_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("run.json"), "{}").unwrap();
    let output = loadgen()
        .args(["run", "-n", "5", "--out", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("already exists"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("run.json")).unwrap(),
        "{}"
    );
}

#[test]
fn sigint_mid_run_keeps_every_completed_request_and_exits_130() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(servers::start(ServerConfig {
            service_time: "2ms".parse().unwrap(),
            ..ServerConfig::default()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = loadgen()
        .args([
            "run",
            "--url",
            &format!("{}/", server.url()),
            "-c",
            "4",
            "-d",
            "60s",
        ])
        .args(["--out", out.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.requests_total() < 200 {
        assert!(Instant::now() < deadline, "the run never got going");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("interrupted"));

    let rows = read_rows(&out);
    assert_eq!(rows.len() as u64, server.requests_total());
    assert!(rows.iter().all(|r| r.status == 200));
    let json = run_json(&out);
    assert_eq!(json["exit_reason"], "interrupted");
    assert_eq!(json["exit_code"], 130);
    assert_eq!(json["summary"]["requests"], rows.len() as u64);
    runtime.block_on(server.shutdown());
}

#[test]
fn client_metrics_are_sampled_every_second() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float64Type, Int64Type, UInt64Type};
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = loadgen()
        .args([
            "run",
            "-c",
            "4",
            "-d",
            "3s",
            "--no-progress",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let file = std::fs::File::open(out.join("client-metrics.parquet")).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.map(|b| b.unwrap()).collect();
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    assert!((2..=4).contains(&rows), "{rows} samples in a 3 s run");
    let batch = &batches[0];
    let t = batch
        .column_by_name("t_ns")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert!(t.values().windows(2).all(|w| w[1] > w[0]));
    let cpu = batch
        .column_by_name("cpu_utilisation")
        .unwrap()
        .as_primitive::<Float64Type>();
    assert!(cpu.values().iter().all(|c| *c > 0.0), "{cpu:?}");
    let rss = batch
        .column_by_name("rss_bytes")
        .unwrap()
        .as_primitive::<UInt64Type>();
    assert!(rss.values().iter().all(|r| *r > 1_000_000));
    let fds = batch
        .column_by_name("open_fds")
        .unwrap()
        .as_primitive::<UInt64Type>();
    assert!(
        fds.values().iter().all(|f| *f >= 4),
        "4 connections are open"
    );
    let cores = batch
        .column_by_name("core_utilisation")
        .unwrap()
        .as_list::<i32>();
    assert!(!cores.value(0).is_empty());
    assert!(!batch
        .column_by_name("network")
        .unwrap()
        .as_list::<i32>()
        .value(0)
        .is_empty());
    let json = run_json(&out);
    assert!(json["client"]["peak_cpu_utilisation"].as_f64().unwrap() > 0.0);
    assert!(String::from_utf8_lossy(&output.stdout).contains("Client"));
}

#[test]
fn a_reader_that_stops_early_is_no_failure() {
    // `loadgen run … --json | head -1`: the pipe closes before loadgen prints.
    let dir = tempfile::tempdir().unwrap();
    let mut child = loadgen()
        .args(["run", "-n", "50", "--json", "--out"])
        .arg(dir.path().join("run"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(dir.path().join("run").join("run.json").exists());
}

/// Each command shows and accepts exactly the flags it uses (issue 33): `capacity` and
/// `calibrate` have no model flags (the search and the one worker choose them), so they are
/// neither in their `--help` nor accepted — clap refuses them, exit 2 — and a sweep's levels
/// flag and the flag it gives each level cannot both be given.
#[test]
fn each_command_shows_and_accepts_only_its_own_flags() {
    let model = [
        "--connections",
        "--duration",
        "--requests",
        "--rate",
        "--stages",
    ];
    let cases: [(&str, Vec<&str>, Vec<&str>); 2] = [
        (
            "capacity",
            [
                &model[..],
                &["--think-time", "--threshold", "--shard", "--start-at"],
            ]
            .concat(),
            vec![
                "--arrivals",
                "--max-in-flight",
                "--send-window",
                "--slo",
                "--url",
            ],
        ),
        (
            "calibrate",
            vec![
                "--connections",
                "--duration",
                "--rate",
                "--stages",
                "--think-time",
                "--arrivals",
                "--max-lateness",
            ],
            vec!["--requests", "--threshold", "--shard", "--url"],
        ),
    ];
    for (command, absent, present) in cases {
        let help = loadgen().args([command, "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&help.stdout);
        for flag in present {
            assert!(lists(&help, flag), "{command} --help lacks {flag}:\n{help}");
        }
        for flag in absent {
            assert!(
                !lists(&help, flag),
                "{command} --help shows {flag}:\n{help}"
            );
            let output = loadgen().args([command, flag, "1"]).output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{command} {flag}: {stderr}");
            assert!(
                stderr.contains(&format!("unexpected argument '{flag}'")),
                "{command} {flag}: {stderr}"
            );
        }
    }
    for flags in [
        &["--levels", "1,2", "-c", "4"][..],
        &["--rate-levels", "10", "--rate", "5"],
        &["--rate-levels", "10", "--stages", "1s:5"],
    ] {
        let output = loadgen().arg("sweep").args(flags).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(
            stderr.contains("cannot be used with"),
            "{flags:?}: {stderr}"
        );
    }
}

/// Whether `--help` text lists `flag` as one of the command's options (`  -c, --connections
/// <N>` or `      --rate <REQ/S>`), not merely mentions it in prose.
fn lists(help: &str, flag: &str) -> bool {
    help.lines().any(|line| {
        let line = line.trim_start();
        let line = match line.split_once(", ") {
            Some((short, rest)) if short.len() == 2 && short.starts_with('-') => rest,
            _ => line,
        };
        line.split_whitespace().next() == Some(flag)
    })
}
