//! Issue 38 parts 1–3 end to end against the reference server: `--warmup` labels the run's
//! first stretch `warmup` and the summary leaves exactly those rows out; `--ramp` starts and
//! stops workers along its stages, the rows and the workers' time carry the stage; and
//! `--abort-on-fail` ends a run whose threshold is lost, keeping every completed row.

mod common;

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use common::{loadgen_bin, read_rows, run_json, ServerOnRuntime};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use servers::ServerConfig;

fn server(service_time: &str, error_rate: f64) -> ServerOnRuntime {
    ServerOnRuntime::start(ServerConfig {
        service_time: service_time.parse().unwrap(),
        workers: Some(8),
        error_rate,
        ..ServerConfig::default()
    })
}

/// Runs loadgen with `args` and `--out out`; the exit code and the console.
fn run(args: &[&str], out: &Path) -> (i32, String) {
    let output = loadgen_bin()
        .args(args)
        .args(["--no-progress", "--out"])
        .arg(out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.code().unwrap_or(-1), text)
}

#[test]
fn a_warmup_is_recorded_and_left_out_of_the_summary() {
    let server = server("5ms", 0.0);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let url = server.url("/");
    let (code, text) = run(
        &[
            "run", "--url", &url, "-c", "4", "-d", "2s", "--warmup", "1s",
        ],
        &out,
    );
    assert_eq!(code, 0, "{text}");
    let rows = read_rows(&out);
    let warmup = rows.iter().filter(|r| r.phase == "warmup").count() as u64;
    let main = rows.iter().filter(|r| r.phase == "main").count() as u64;
    assert_eq!(warmup + main, rows.len() as u64);
    assert!(warmup > 0 && main > 0, "warmup {warmup}, main {main}");
    // The warm-up is the first second: every warm-up row was sent before every main row.
    let last_warmup = rows
        .iter()
        .filter(|r| r.phase == "warmup")
        .map(|r| r.start_ns)
        .max();
    let first_main = rows
        .iter()
        .filter(|r| r.phase == "main")
        .map(|r| r.start_ns)
        .min();
    assert!(last_warmup < first_main);
    let summary = &run_json(&out)["summary"];
    assert_eq!(summary["requests"], main, "{summary}");
    assert_eq!(summary["warmup_requests"], warmup, "{summary}");
    let op_rows: u64 = summary["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(op_rows, main);
    assert!(
        text.contains(&format!(
            "{warmup} requests (phase warmup) recorded and left out"
        )),
        "{text}"
    );
    eprintln!("warm-up rows {warmup}, main rows {main}");
}

/// Per client-metrics row: (interval end, interval, worker time alive) in ns.
fn worker_seconds(run_dir: &Path) -> Vec<(i64, i64, i64)> {
    let file = File::open(run_dir.join("client-metrics.parquet")).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut out = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let column = |name: &str| {
            let array = batch
                .column_by_name(name)
                .unwrap()
                .as_primitive::<Int64Type>();
            array.iter().map(|v| v.unwrap_or(0)).collect::<Vec<i64>>()
        };
        let (t, interval, alive) = (column("t_ns"), column("interval_ns"), column("alive_ns"));
        out.extend((0..t.len()).map(|i| (t[i], interval[i], alive[i])));
    }
    out
}

/// The ramp 0→20→0 over 3 s + 3 s: workers averaged over each [a, b] second, in closed form.
fn ramp_mean(a_s: f64, b_s: f64) -> f64 {
    let workers = |t: f64| {
        if t <= 3.0 {
            20.0 * t / 3.0
        } else {
            (20.0 * (6.0 - t) / 3.0).max(0.0)
        }
    };
    let steps = 100;
    (0..steps)
        .map(|i| workers(a_s + (b_s - a_s) * (f64::from(i) + 0.5) / f64::from(steps)))
        .sum::<f64>()
        / f64::from(steps)
}

#[test]
fn a_ramp_of_workers_follows_its_stages_and_labels_each() {
    let server = server("10ms", 0.0);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let url = server.url("/");
    let (code, text) = run(&["run", "--url", &url, "--ramp", "3s:20,3s:0"], &out);
    assert_eq!(code, 0, "{text}");
    let mut checked = 0;
    for (t_ns, interval_ns, alive_ns) in worker_seconds(&out) {
        let (end_s, start_s) = (t_ns as f64 / 1e9, (t_ns - interval_ns) as f64 / 1e9);
        if interval_ns < 500_000_000 || end_s > 6.0 {
            continue; // A short last interval says little.
        }
        let (measured, expected) = (
            alive_ns as f64 / interval_ns as f64,
            ramp_mean(start_s, end_s),
        );
        eprintln!("{start_s:.2}–{end_s:.2} s: {measured:.1} workers (ramp {expected:.1})");
        assert!(
            (measured - expected).abs() < 3.0,
            "{start_s:.2}–{end_s:.2} s: {measured:.1} workers, the ramp says {expected:.1}"
        );
        checked += 1;
    }
    assert!(checked >= 4, "{checked} seconds checked");
    let rows = read_rows(&out);
    let stage = |name: &str| rows.iter().filter(|r| r.phase == name).count();
    assert!(
        stage("stage1") > 0 && stage("stage2") > 0,
        "{} {}",
        stage("stage1"),
        stage("stage2")
    );
    // A row's stage is when it was sent (the ramp starts a little after the run's anchor).
    let early = |r: &&common::Row| r.start_ns < 2_900_000_000;
    let late = |r: &&common::Row| r.start_ns > 3_200_000_000;
    assert!(rows.iter().filter(early).all(|r| r.phase == "stage1"));
    assert!(rows.iter().filter(late).all(|r| r.phase == "stage2"));
    // The workers' time per stage, which the verdict judges each stage on.
    let summary = &run_json(&out)["summary"];
    let phases = summary["workers"]["phases"].as_array().unwrap();
    let names: Vec<&str> = phases
        .iter()
        .map(|p| p["phase"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["stage1", "stage2"], "{summary}");
    for phase in phases {
        assert!(phase["busy_ns"].as_i64().unwrap() > 0, "{phase}");
    }
    assert!(
        summary["workers"]["started"].as_u64().unwrap() <= 21,
        "{summary}"
    );
}

#[test]
fn abort_on_fail_ends_the_run_once_a_threshold_is_lost() {
    let server = server("5ms", 0.1);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let url = server.url("/");
    let started = Instant::now();
    let (code, text) = run(
        &[
            "run",
            "--url",
            &url,
            "-c",
            "4",
            "-d",
            "20s",
            "--threshold",
            "error_rate<1%",
            "--abort-on-fail",
            "--abort-after",
            "1s",
        ],
        &out,
    );
    let took = started.elapsed();
    assert_eq!(code, 99, "{text}");
    let document = run_json(&out);
    assert_eq!(document["exit_reason"], "threshold", "{document}");
    assert_eq!(document["exit_code"], 99);
    let rows = read_rows(&out);
    assert_eq!(rows.len() as u64, server.server().requests_total());
    // Judged after 1 s, then once a second: the last request ends by 1 s + one interval
    // (and a request's length; 0.5 s of slack for a loaded machine).
    let last_end_ns = rows
        .iter()
        .map(|r| r.start_ns + r.latency_ns)
        .max()
        .unwrap();
    eprintln!(
        "stopped after {:.2} s of load ({} rows), process {took:?}",
        last_end_ns as f64 / 1e9,
        rows.len()
    );
    assert!(
        Duration::from_nanos(last_end_ns as u64) < Duration::from_millis(2_500),
        "{last_end_ns}"
    );
    assert!(text.contains("threshold error_rate<1% lost"), "{text}");
}

/// Bad input is refused before anything runs: one sentence naming the flag, exit 2.
#[test]
fn bad_warmups_ramps_and_aborts_are_refused() {
    let server = server("0ms", 0.0);
    let url = server.url("/");
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&["--abort-on-fail", "-d", "1s"], "--abort-on-fail"),
        (
            &["--abort-after", "1s", "--threshold", "p99<1s"],
            "--abort-on-fail",
        ),
        (&["--ramp", "1s:4", "--warmup", "500ms"], "--warmup"),
        (&["--ramp", "1s-4"], "--ramp"),
        (&["--ramp", "1s:0"], "workers"),
        (&["-d", "1s", "--warmup", "2s"], "model.warmup"),
    ];
    for (i, (args, named)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("refused-{i}"));
        let (code, text) = run(&[&["run", "--url", &url][..], args].concat(), &out);
        assert_eq!(code, 2, "{args:?}: {text}");
        let errors: Vec<&str> = text.lines().filter(|l| l.starts_with("error:")).collect();
        // clap names a missing flag on the line under its one error line.
        assert!(
            errors.len() == 1 && text.contains(named),
            "{args:?}: {text}"
        );
        assert!(!out.exists(), "{args:?} left a directory");
    }
}
