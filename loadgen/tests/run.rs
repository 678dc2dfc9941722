//! The closed model end to end, in-process, against the reference server on 127.0.0.1:0:
//! what the server counted is what the Parquet files hold.

mod common;

use std::collections::BTreeMap;

use common::{metadata, read_rows, run_at, run_json, segments};
use loadgen::stop::{ExitReason, StopSignal};
use servers::ServerConfig;

async fn server(config: ServerConfig) -> servers::RunningServer {
    servers::start(config).await.expect("server starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_n_requests_each_one_row_matching_the_server() {
    let server = server(ServerConfig::default()).await;
    let url = format!("{}/", server.url());
    let (_dir, out, outcome) = run_at(&url, &["-c", "4", "-n", "500"], StopSignal::new()).await;

    assert_eq!(outcome.exit_reason, ExitReason::Completed);
    // The server counted the run's 500 and the probe's requests after the level, if any.
    assert_eq!(server.requests_total(), 500 + common::probe_requests(&out));
    let rows = read_rows(&out);
    assert_eq!(rows.len(), 500);
    assert_eq!(outcome.summary.requests, 500);
    assert_eq!(outcome.summary.failed, 0);

    let mut last_start: BTreeMap<u32, i64> = BTreeMap::new();
    let mut connects: BTreeMap<u32, usize> = BTreeMap::new();
    for row in &rows {
        assert_eq!(row.status, 200, "{row:?}");
        assert_eq!(row.error, None);
        assert_eq!(row.op, "GET /");
        assert_eq!(row.phase, "main");
        assert_eq!(row.attempt, 1);
        assert!(row.worker < 4);
        assert!(row.latency_ns > 0);
        let ttfb = row.ttfb_ns.expect("a response has a first byte");
        assert!(ttfb > 0 && ttfb <= row.latency_ns, "{row:?}");
        // The request was written whole before the response's first byte arrived.
        let send = row
            .send_ns
            .expect("a request written whole has a send time");
        assert!(send > 0 && send <= ttfb, "{row:?}");
        assert_eq!((row.intended_ns, row.queue_wait_ns), (None, None));
        // "GET / HTTP/1.1" plus headers; "hello, world\n" plus status line and headers.
        assert!(row.bytes_sent > 30, "{row:?}");
        assert!(row.bytes_received > 13 + 17, "{row:?}");
        let previous = last_start.insert(row.worker, row.start_ns);
        assert!(
            previous.is_none_or(|p| p <= row.start_ns),
            "start_ns goes back for {row:?}"
        );
        if let Some(connect_ns) = row.connect_ns {
            assert!(connect_ns > 0 && connect_ns <= row.latency_ns);
            *connects.entry(row.worker).or_default() += 1;
        }
    }
    // Keep-alive: each worker connected once and reused its connection.
    assert!(connects.values().all(|&n| n == 1), "{connects:?}");

    let meta = metadata(&segments(&out)[0]);
    assert_eq!(
        meta["loadgen.schema_version"],
        loadgen::record::SCHEMA_VERSION.to_string()
    );
    assert_eq!(meta["loadgen.run_id"], outcome.run_id);
    assert!(meta["loadgen.anchor_unix_ns"].parse::<i64>().unwrap() > 1_600_000_000_000_000_000);
    assert!(
        meta["loadgen.scenario"].contains("workers = 4"),
        "{}",
        meta["loadgen.scenario"]
    );
    assert!(meta["loadgen.host"].contains("cpus"));
    assert_eq!(meta["loadgen.shard"], "0/1");

    let json = run_json(&out);
    assert_eq!(json["exit_reason"], "completed");
    assert_eq!(json["summary"]["requests"], 500);
    assert_eq!(json["records"]["rows"], 500);
    assert_eq!(json["config"]["definition"]["model"]["requests"], 500);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_run_records_every_request_the_server_answered() {
    let server = server(ServerConfig::default()).await;
    let url = format!("{}/albums/7", server.url());
    let (_dir, out, outcome) = run_at(&url, &["-c", "8", "-d", "1s"], StopSignal::new()).await;
    let rows = read_rows(&out);
    assert_eq!(outcome.exit_reason, ExitReason::DurationElapsed);
    assert!(rows.len() > 100, "only {} rows in 1 s", rows.len());
    let probed = common::probe_requests(&out);
    assert_eq!(rows.len() as u64 + probed, server.requests_total());
    assert_eq!(outcome.summary.requests, rows.len() as u64);
    assert!(rows
        .iter()
        .all(|r| r.op == "GET /albums/7" && r.status == 200));
    let wall_s = outcome.summary.wall_time_ns as f64 / 1e9;
    assert!((0.9..3.0).contains(&wall_s), "wall time {wall_s}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_are_counted_and_written_not_dropped() {
    let server = server(ServerConfig {
        error_rate: 0.2,
        ..ServerConfig::default()
    })
    .await;
    let url = format!("{}/albums/1", server.url());
    let (_dir, out, outcome) = run_at(&url, &["-c", "4", "-n", "1000"], StopSignal::new()).await;
    let rows = read_rows(&out);
    assert_eq!(rows.len(), 1000);
    let server_500 = server.requests_with_status(500);
    let rows_500 = rows.iter().filter(|r| r.status == 500).count() as u64;
    let rows_failed = rows
        .iter()
        .filter(|r| r.error.as_deref() == Some("http_status"))
        .count() as u64;
    assert_eq!(rows_500, server_500);
    assert_eq!(rows_failed, server_500);
    assert_eq!(outcome.summary.failed, server_500);
    assert_eq!(outcome.summary.errors.get("http_status"), Some(&server_500));
    assert!(
        (100..=300).contains(&server_500),
        "{server_500} of 1000 failed at rate 0.2"
    );
    // Failed requests still got a response, so they have a latency.
    assert_eq!(outcome.summary.ops[0].latency.unwrap().count, 1000);
    assert!(outcome.console.contains(&format!(
        "{server_500} failed (http_status {server_500}: 500 × {server_500})"
    )));
    // The verdict: errors first, said the same in the console and run.json.
    assert_eq!(outcome.verdict.cause, loadgen::verdict::Cause::Errors);
    assert!(outcome.console.contains("Verdict        errors (strong)"));
    let verdict = &run_json(&out)["verdict"];
    assert_eq!(
        (&verdict["cause"], &verdict["rule"]),
        (&"errors".into(), &"errors.share".into())
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segments_close_on_schedule_and_each_is_complete() {
    let server = server(ServerConfig {
        service_time: "1ms".parse().unwrap(),
        ..ServerConfig::default()
    })
    .await;
    let url = format!("{}/", server.url());
    let (_dir, out, outcome) = run_at(
        &url,
        &["-c", "2", "-d", "3s", "--segment-interval", "300ms"],
        StopSignal::new(),
    )
    .await;
    let files = segments(&out);
    assert!(files.len() >= 3, "{files:?}");
    // No half-written segment is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(out.join("requests"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert_eq!(read_rows(&out).len() as u64, outcome.summary.requests);
    let probed = common::probe_requests(&out);
    assert_eq!(outcome.summary.requests + probed, server.requests_total());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_mid_run_drains_in_flight_requests_into_the_records() {
    let server = server(ServerConfig {
        service_time: "20ms".parse().unwrap(),
        ..ServerConfig::default()
    })
    .await;
    let url = format!("{}/", server.url());
    let stop = StopSignal::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        stopper.drain(ExitReason::Interrupted);
    });
    let (_dir, out, outcome) = run_at(&url, &["-c", "8", "-d", "60s"], stop).await;
    assert_eq!(outcome.exit_reason, ExitReason::Interrupted);
    let rows = read_rows(&out);
    assert_eq!(rows.len() as u64, server.requests_total());
    assert!(rows.iter().all(|r| r.status == 200 && r.error.is_none()));
    assert_eq!(run_json(&out)["exit_reason"], "interrupted");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_still_in_flight_after_the_grace_period_are_cancelled_rows() {
    let server = server(ServerConfig {
        service_time: "10s".parse().unwrap(),
        ..ServerConfig::default()
    })
    .await;
    let url = format!("{}/", server.url());
    let (_dir, out, outcome) = run_at(
        &url,
        &["-c", "3", "-d", "300ms", "--grace", "200ms"],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&out);
    assert_eq!(rows.len(), 3);
    assert!(rows
        .iter()
        .all(|r| r.error.as_deref() == Some("cancelled") && r.status == 0));
    assert_eq!(outcome.summary.errors.get("cancelled"), Some(&3));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn think_time_paces_each_worker_and_is_not_latency() {
    let server = server(ServerConfig::default()).await;
    let url = format!("{}/", server.url());
    let (_dir, out, outcome) = run_at(
        &url,
        &["-c", "2", "-n", "12", "--think-time", "50ms"],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&out);
    assert_eq!(rows.len(), 12);
    for worker in 0..2 {
        let starts: Vec<i64> = rows
            .iter()
            .filter(|r| r.worker == worker)
            .map(|r| r.start_ns)
            .collect();
        for pair in starts.windows(2) {
            assert!(
                pair[1] - pair[0] >= 50_000_000,
                "gap {} ns",
                pair[1] - pair[0]
            );
        }
    }
    let latency = outcome.summary.ops[0].latency.unwrap();
    assert!(
        latency.p50_ns < 50_000_000,
        "think time leaked into latency: {latency:?}"
    );
    server.shutdown().await;
}

/// Regression: a worker that waited for work (think time, the open model at a low rate) kept
/// its rows until its next request finished, so a killed run lost more than the documented
/// bound. Rows now reach a closed segment within about a second even while workers think.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_a_waiting_worker_reach_a_segment_before_its_next_request() {
    let server = server(ServerConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let url = format!("{}/", server.url());
    let config = common::config(&[
        "--url",
        &url,
        "-c",
        "2",
        "-d",
        "3s",
        "--think-time",
        "4s",
        "--segment-interval",
        "200ms",
        "--no-progress",
        "--out",
        out.to_str().unwrap(),
    ]);
    let run = tokio::spawn(loadgen::run(config, StopSignal::new()));
    // Each worker sent one request at once and is thinking until 4 s.
    tokio::time::sleep(std::time::Duration::from_millis(2_000)).await;
    let on_disk = read_rows(&out).len();
    assert_eq!(
        on_disk, 2,
        "both first requests are in closed segments while workers think"
    );
    run.await.unwrap().unwrap();
    server.shutdown().await;
}

/// `--link-capacity` is recorded in run.json's `client` as given (bits/s, source `flag`), with
/// the interface that carries the target's traffic (loopback here), also in client-metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn link_capacity_and_the_target_interface_are_recorded() {
    let server = servers::start(ServerConfig::default()).await.unwrap();
    let url = format!("{}/", server.url());
    let (_dir, out, _) = run_at(
        &url,
        &["-c", "2", "-n", "50", "--link-capacity", "25MB/s"],
        StopSignal::new(),
    )
    .await;
    let client = &run_json(&out)["client"];
    assert_eq!(client["link_capacity_bps"], 200_000_000, "{client}");
    assert_eq!(client["link_capacity_source"], "flag", "{client}");
    assert_eq!(client["target_interface"], "lo", "{client}");
    // A loopback target: the server shares the client's cores.
    assert_eq!(client["server_shares_cores"], true, "{client}");
    let meta = metadata(&out.join("client-metrics.parquet"));
    assert_eq!(meta["loadgen.target_interface"], "lo");

    // Without the flag, loopback reports no speed: the capacity is unknown.
    let (_dir, out, _) = run_at(&url, &["-c", "2", "-n", "50"], StopSignal::new()).await;
    let client = &run_json(&out)["client"];
    assert_eq!(client["link_capacity_bps"], serde_json::Value::Null);
    assert_eq!(client["link_capacity_source"], serde_json::Value::Null);
    server.shutdown().await;
}
