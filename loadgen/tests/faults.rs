//! The fault matrix: what the `loadgen` binary does when the target, the machine or the
//! process itself misbehaves. Every case runs against real sockets on 127.0.0.1 and checks
//! the exit code, the message, that every attempted request is a row, and that run.json's
//! summary counts the failures by class exactly as the rows do.
//!
//! Ctrl-C mid-run is covered in `cli.rs` (`sigint_mid_run_keeps_every_completed_request_and_exits_130`).

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant, SystemTime};

use common::{
    anchor_unix_ns, loadgen_bin, loadgen_under_sh, read_rows, rows_matching_summary,
    rows_with_error, run_json, segments, unix_ns, ServerOnRuntime,
};
use servers::ServerConfig;

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the exit code, showing what the process said when it is not the one expected.
fn assert_exit(output: &Output, code: i32) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        stderr(output)
    );
    assert!(!stderr(output).contains("panicked"), "{}", stderr(output));
}

/// A refusal before the run: exactly one `error:` line and no run directory.
fn assert_refused_before_the_run(output: &Output, out: &Path) {
    assert_exit(output, 2);
    let text = stderr(output);
    assert_eq!(
        text.trim().lines().count(),
        1,
        "one sentence expected:\n{text}"
    );
    assert!(text.starts_with("error: "), "{text}");
    assert!(!out.exists(), "a refused run left {} behind", out.display());
}

/// `loadgen run --url URL ARGS… --no-progress --out OUT` against the binary.
fn run(url: &str, args: &[&str], out: &Path) -> Output {
    loadgen_bin()
        .args(["run", "--url", url, "--no-progress", "--out"])
        .arg(out)
        .args(args)
        .output()
        .unwrap()
}

/// A port on 127.0.0.1 where nothing listens (it was free a moment ago).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn connection_refused_at_start_is_exit_2_naming_the_url_and_leaves_the_out_dir_empty() {
    let dir = tempfile::tempdir().unwrap();
    // An existing empty --out is allowed; a refused run must leave it empty, not remove it.
    let out = dir.path().join("run");
    std::fs::create_dir(&out).unwrap();
    let url = format!("http://127.0.0.1:{}/", closed_port());
    let output = run(&url, &["-n", "10"], &out);

    assert_exit(&output, 2);
    let text = stderr(&output);
    assert_eq!(text.trim().lines().count(), 1, "{text}");
    assert!(text.contains(&format!("cannot connect to {url}")), "{text}");
    assert!(text.contains("refused"), "{text}");
    assert!(
        text.contains("is the server running and is the URL right?"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "--out was written"
    );
}

#[test]
fn connection_refused_mid_run_is_counted_and_the_run_recovers_when_the_server_returns() {
    let mut target = ServerOnRuntime::start(ServerConfig::default());
    let addr = target.server().local_addr();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let child = loadgen_bin()
        .args(["run", "--url", &target.url("/"), "-c", "4", "-d", "5s"])
        .args(["--no-progress", "--out"])
        .arg(&out)
        .spawn()
        .unwrap();

    let deadline = Instant::now() + Duration::from_secs(20);
    while target.server().requests_total() < 200 {
        assert!(Instant::now() < deadline, "the run never got going");
        std::thread::sleep(Duration::from_millis(20));
    }
    let down_at = SystemTime::now();
    target.stop();
    // Workers reconnect in a tight loop while nothing listens: keep the outage short.
    std::thread::sleep(Duration::from_secs(1));
    target.restart(ServerConfig {
        port: addr.port(),
        ..ServerConfig::default()
    });
    let up_at = SystemTime::now();
    let output = child.wait_with_output().unwrap();
    assert_exit(&output, 0);

    let (rows, summary) = rows_matching_summary(&out);
    assert_eq!(run_json(&out)["exit_reason"], "duration_elapsed");
    let anchor = anchor_unix_ns(&segments(&out)[0]);
    // 5 ms covers the pairing of the anchor's Instant with its wall-clock time.
    let down_ns = unix_ns(down_at) - anchor - 5_000_000;
    let up_ns = unix_ns(up_at) - anchor + 5_000_000;

    let refused = rows_with_error(&rows, "connect_refused");
    assert!(refused > 0, "no connect_refused rows: {summary}");
    // Failures happen only while the server is away: before it went, every request worked.
    for row in rows.iter().filter(|r| r.error.is_some()) {
        assert!(
            (down_ns..=up_ns).contains(&row.start_ns),
            "failure outside the outage {down_ns}..{up_ns}: {row:?}"
        );
        assert_eq!(row.status, 0, "{row:?}");
    }
    // Recovery: every worker gets answers from the new server.
    for worker in 0..4 {
        assert!(
            rows.iter()
                .any(|r| r.worker == worker && r.status == 200 && r.start_ns > up_ns),
            "worker {worker} never recovered"
        );
    }
    println!(
        "{} rows, {refused} connect_refused during a ~1 s outage; summary errors {}",
        rows.len(),
        summary["errors"]
    );
}

#[test]
fn a_server_slower_than_the_timeout_gives_timeout_rows_and_exit_0() {
    let target = ServerOnRuntime::start(ServerConfig {
        service_time: "2s".parse().unwrap(),
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let started = Instant::now();
    let output = run(
        &target.url("/"),
        &["--timeout", "200ms", "-n", "10", "-c", "2"],
        &out,
    );
    assert_exit(&output, 0);
    // Five 200 ms timeouts per worker, not five 2 s waits.
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );

    let (rows, summary) = rows_matching_summary(&out);
    assert_eq!(rows.len(), 10);
    for row in &rows {
        assert_eq!(row.error.as_deref(), Some("timeout"), "{row:?}");
        assert_eq!(row.status, 0, "{row:?}");
        assert!(
            (200_000_000..1_500_000_000).contains(&row.latency_ns),
            "{row:?}"
        );
    }
    assert_eq!(summary["errors"], serde_json::json!({ "timeout": 10 }));
    assert_eq!(summary["failed"], 10);
}

/// A listener that never accepts, with a backlog of 1; Linux queues backlog + 1 connections,
/// after which it drops SYNs, so a further connect hangs until the client gives up.
/// `queued` connections are made now and kept open by the returned guard.
fn listener_that_never_accepts(
    queued: usize,
) -> (
    tokio::runtime::Runtime,
    tokio::net::TcpListener,
    Vec<TcpStream>,
    SocketAddr,
) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        socket.listen(1).unwrap()
    });
    let addr = listener.local_addr().unwrap();
    let held = (0..queued)
        .map(|_| {
            TcpStream::connect_timeout(&addr, Duration::from_secs(1)).expect("fits in the queue")
        })
        .collect();
    (runtime, listener, held, addr)
}

#[test]
fn a_connect_that_hangs_at_start_is_exit_2_naming_the_connect_timeout() {
    let (_runtime, _listener, _held, addr) = listener_that_never_accepts(2);
    // The premise: the accept queue is full, so connecting hangs.
    let err = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err}");

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let url = format!("http://{addr}/");
    let output = run(&url, &["-n", "4", "--connect-timeout", "300ms"], &out);
    assert_refused_before_the_run(&output, &out);
    let text = stderr(&output);
    assert!(text.contains(&url), "{text}");
    assert!(text.contains("connect timeout of 300ms"), "{text}");
}

#[test]
fn connects_that_hang_mid_run_are_connect_timeout_rows() {
    // One queued connection leaves room for exactly one more: the probe's. It stays queued
    // after the probe closes it (nothing accepts it), so every worker's connect then hangs.
    let (_runtime, _listener, _held, addr) = listener_that_never_accepts(1);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run(
        &format!("http://{addr}/"),
        &["-n", "4", "-c", "2", "--connect-timeout", "200ms"],
        &out,
    );
    assert_exit(&output, 0);
    let (rows, summary) = rows_matching_summary(&out);
    assert_eq!(rows.len(), 4);
    for row in &rows {
        assert_eq!(row.error.as_deref(), Some("connect_timeout"), "{row:?}");
        assert_eq!(row.status, 0, "{row:?}");
        assert!(row.latency_ns >= 200_000_000, "{row:?}");
    }
    assert_eq!(
        summary["errors"],
        serde_json::json!({ "connect_timeout": 4 })
    );
}

#[test]
fn http_errors_are_http_status_failures_unless_the_scenario_expects_them() {
    let target = ServerOnRuntime::start(ServerConfig {
        error_rate: 0.3,
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();

    // 5xx: a share of the answers, each one an http_status failure.
    let out = dir.path().join("5xx");
    let output = run(&target.url("/albums/1"), &["-n", "500", "-c", "4"], &out);
    assert_exit(&output, 0);
    let (rows, summary) = rows_matching_summary(&out);
    let server_500 = target.server().requests_with_status(500);
    assert!(
        (90..=210).contains(&server_500),
        "{server_500} of 500 at rate 0.3"
    );
    assert_eq!(rows.len(), 500);
    assert_eq!(
        summary["errors"],
        serde_json::json!({ "http_status": server_500 })
    );
    for row in &rows {
        match row.status {
            500 => assert_eq!(row.error.as_deref(), Some("http_status"), "{row:?}"),
            200 => assert_eq!(row.error, None, "{row:?}"),
            _ => panic!("unexpected {row:?}"),
        }
    }

    // 4xx: an unknown route (on a server without injected errors: they apply to 404s too).
    let target = ServerOnRuntime::start(ServerConfig::default());
    let out = dir.path().join("4xx");
    let output = run(
        &target.url("/no/such/route"),
        &["-n", "20", "-c", "2"],
        &out,
    );
    assert_exit(&output, 0);
    let (rows, summary) = rows_matching_summary(&out);
    assert_eq!(rows.len(), 20);
    assert!(
        rows.iter()
            .all(|r| r.status == 404 && r.error.as_deref() == Some("http_status")),
        "{rows:?}"
    );
    assert_eq!(summary["errors"], serde_json::json!({ "http_status": 20 }));

    // The same 404s are successes when the scenario says they are expected.
    let scenario = dir.path().join("expect-404.toml");
    std::fs::write(
        &scenario,
        r#"
sequence = ["missing"]

[requests.missing]
method = "GET"
path = "/no/such/route"
expect = [404]

[model]
kind = "closed"
workers = 2
requests = 20
"#,
    )
    .unwrap();
    let out = dir.path().join("expected");
    let output = loadgen_bin()
        .arg("run")
        .arg(&scenario)
        .args(["--url", &target.url(""), "--no-progress", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let (rows, summary) = rows_matching_summary(&out);
    assert_eq!(rows.len(), 20);
    assert!(
        rows.iter().all(|r| r.status == 404 && r.error.is_none()),
        "{rows:?}"
    );
    assert_eq!(summary["failed"], 0);
    assert_eq!(summary["ok"], 20);
}

#[test]
fn a_hard_open_files_limit_too_low_for_the_workers_is_refused_before_anything_runs() {
    let target = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // `ulimit -n` sets the soft and the hard limit: loadgen cannot raise it.
    let output = loadgen_under_sh("ulimit -n 64")
        .args(["run", "--url", &target.url("/"), "-c", "200", "-n", "400"])
        .args(["--no-progress", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_refused_before_the_run(&output, &out);
    let text = stderr(&output);
    for needle in [
        "200 workers",
        "264 open files",
        "limit is 64",
        "ulimit -n",
        "fewer workers",
    ] {
        assert!(text.contains(needle), "missing {needle:?}: {text}");
    }
    assert_eq!(target.server().requests_total(), 0);
}

#[test]
fn a_low_soft_open_files_limit_is_raised_and_the_run_completes() {
    let hard = std::process::Command::new("sh")
        .args(["-c", "ulimit -Hn"])
        .output()
        .unwrap();
    let hard = String::from_utf8_lossy(&hard.stdout).trim().to_string();
    assert!(
        hard == "unlimited" || hard.parse::<u64>().unwrap() >= 264,
        "this machine's hard open-files limit ({hard}) is below the 264 the test needs"
    );
    let target = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // For a duration, not -n: with -n 400 a worker that started last could find the requests
    // taken by faster ones (seen: 136 of 200 workers ran), and prove nothing about its socket.
    let output = loadgen_under_sh("ulimit -Sn 64")
        .args(["run", "--url", &target.url("/"), "-c", "200", "-d", "1s"])
        .args(["--no-progress", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_exit(&output, 0);
    let (rows, summary) = rows_matching_summary(&out);
    assert!(rows.len() >= 200, "{summary}");
    assert_eq!(
        rows_with_error(&rows, "too_many_open_files"),
        0,
        "{summary}"
    );
    assert_eq!(summary["failed"], 0, "{summary}");
    // All 200 workers ran, each on its own connection: 200 descriptors beyond the 64.
    let workers: std::collections::BTreeSet<u32> = rows.iter().map(|r| r.worker).collect();
    assert_eq!(workers.len(), 200);
}

#[test]
fn an_out_dir_that_cannot_be_created_is_exit_2_naming_the_path() {
    let target = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "not a directory").unwrap();
    let out = file.join("run");
    let output = run(&target.url("/"), &["-n", "10"], &out);
    assert_refused_before_the_run(&output, &out);
    let text = stderr(&output);
    assert!(text.contains(&out.display().to_string()), "{text}");
    assert!(
        text.contains("--out"),
        "the fix is a different --out: {text}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a directory");
    assert_eq!(target.server().requests_total(), 0, "requests were sent");
}

#[test]
fn a_full_disk_mid_run_is_exit_1_naming_the_file_and_closed_segments_stay_readable() {
    const BLOCKS: u64 = 16; // `ulimit -f` counts 512-byte blocks in dash
    let target = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // No file may grow beyond 8 KiB; a segment's metadata and footer take ~5 KiB of that. The
    // rate stays low for 2 s, so the first segments fit, then rises, so a later 300 ms
    // segment does not (~200 rows do it: a few hundred req/s, which even a busy machine
    // reaches a second into the ramp).
    // SIGXFSZ is ignored (and stays ignored across exec): the write fails with EFBIG instead
    // of the signal killing the process.
    let started = Instant::now();
    let output = loadgen_under_sh(&format!("trap '' XFSZ; ulimit -f {BLOCKS}"))
        .args([
            "run",
            "--url",
            &target.url("/"),
            "--stages",
            "2s:100,8s:4000",
        ])
        .args(["--segment-interval", "300ms", "--no-progress", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let took = started.elapsed();
    assert_exit(&output, 1);
    let text = stderr(&output);
    let requests = out.join("requests");
    let error = text
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line: {text}"));
    assert!(
        error.starts_with(&format!(
            "error: cannot write {}/.part-",
            requests.display()
        )) && error.contains("File too large"),
        "the error names the file that could not be written: {text}"
    );
    // Results that cannot be kept stop the run: it does not go on for the whole schedule.
    assert!(
        took < Duration::from_secs(9),
        "ran for {took:?} after the disk filled"
    );

    let files = segments(&out);
    assert!(
        !files.is_empty(),
        "no segment closed before the disk filled: {text}"
    );
    assert!(
        error.contains(&format!("the {} segment(s) closed before it", files.len())),
        "{text}"
    );
    for file in &files {
        assert!(
            file.metadata().unwrap().len() <= BLOCKS * 512,
            "{}",
            file.display()
        );
    }
    // Every closed segment is a complete Parquet file (read_rows opens each one)...
    let rows = read_rows(&out);
    assert!(!rows.is_empty());
    // ...and the segment that could not be finished is gone, not left half-written.
    let leftovers: Vec<_> = std::fs::read_dir(&requests)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(".parquet"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "half-written files left: {leftovers:?}"
    );
    assert!(!out.join("run.json").exists());
    println!(
        "{} rows in {} closed segment(s) survived, exit after {took:?}; stderr: {text}",
        rows.len(),
        files.len()
    );
}

#[test]
fn sigkill_mid_run_loses_at_most_the_open_segment() {
    const SEGMENT_INTERVAL: Duration = Duration::from_millis(300);
    let target = ServerOnRuntime::start(ServerConfig {
        service_time: "1ms".parse().unwrap(),
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut child = loadgen_bin()
        .args(["run", "--url", &target.url("/"), "-c", "4", "-d", "20s"])
        .args(["--segment-interval", "300ms", "--no-progress", "--out"])
        .arg(&out)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while target.server().requests_total() < 100 {
        assert!(Instant::now() < deadline, "the run never got going");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(3));
    child.kill().unwrap(); // SIGKILL
    let killed_at = SystemTime::now();
    child.wait().unwrap();
    let answered = target.server().requests_total();

    assert!(!out.join("run.json").exists());
    let files = segments(&out);
    assert!(files.len() >= 3, "{files:?}");
    for file in &files {
        let rows = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(file).unwrap(),
        )
        .unwrap()
        .metadata()
        .file_metadata()
        .num_rows();
        assert!(rows > 0, "{} is empty", file.display());
    }
    // Only complete segments count: read_rows reads `*.parquet`, never a `.partial`.
    let rows = read_rows(&out);
    assert!(rows.len() as u64 <= answered);
    let killed_ns = unix_ns(killed_at) - anchor_unix_ns(&files[0]);

    // What can be lost: a runtime thread's batch goes to the writer when it has 256 rows or,
    // when a request ends or the flusher looks (every 250 ms), when the oldest is
    // BATCH_MAX_AGE (1 s) old — so a row can wait up to ~1.25 s in a batch; then up to one
    // segment interval (plus the writer's 200 ms idle tick and the time to encode) in the
    // open segment. Each
    // worker's recorded rows are a prefix of its requests, so it is enough that each
    // worker's last recorded request ended within that bound (plus 1 s for a busy machine).
    let bound_ns =
        (SEGMENT_INTERVAL + Duration::from_secs(1) + Duration::from_secs(1)).as_nanos() as i64;
    let mut worst_lag_ns = 0;
    for worker in 0..4 {
        let last_end = rows
            .iter()
            .filter(|r| r.worker == worker)
            .map(|r| r.start_ns + r.latency_ns)
            .max()
            .unwrap_or(0);
        assert!(
            last_end >= killed_ns - bound_ns,
            "worker {worker}: rows end at {last_end} ns, killed at {killed_ns} ns"
        );
        worst_lag_ns = worst_lag_ns.max(killed_ns - last_end);
    }
    println!(
        "killed at {:.2} s: {} rows in {} closed segment(s), the server answered {answered}; \
         the most a worker lost is its last {:.2} s",
        killed_ns as f64 / 1e9,
        rows.len(),
        files.len(),
        worst_lag_ns as f64 / 1e9
    );
}

#[test]
fn a_host_that_does_not_resolve_is_exit_2_naming_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let started = Instant::now();
    let output = run("http://does-not-exist.invalid/", &["-n", "10"], &out);
    let took = started.elapsed();
    assert_refused_before_the_run(&output, &out);
    let text = stderr(&output);
    assert!(
        text.contains("cannot resolve host 'does-not-exist.invalid'"),
        "{text}"
    );
    assert!(text.contains("check the host name"), "{text}");
    // `.invalid` never resolves (RFC 6761); a resolver that waits on the network for it
    // would make every typo a long wait.
    assert!(took < Duration::from_secs(10), "resolving took {took:?}");
    println!("resolution failed after {took:?}");
}
