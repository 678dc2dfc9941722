//! A misbehaving server, with `loadgen-server`'s fault knobs: resets, bodies cut short,
//! garbage instead of HTTP, bodies slower than the timeout, connections refused beyond a cap.
//! Every case: the run completes, every request is a row, and each failure has the class a
//! user would look for — counted exactly as the server counted what it did.

mod common;

use std::collections::BTreeMap;

use common::{read_rows, run_at, Row};
use loadgen::stop::StopSignal;
use servers::{Fault, ServerConfig};

fn by_class(rows: &[Row]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for row in rows {
        let class = row.error.clone().unwrap_or_else(|| "ok".to_string());
        *counts.entry(class).or_default() += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_is_its_own_error_class_counted_exactly() {
    let server = servers::start(ServerConfig {
        error_rate: 0.1,
        reset_rate: 0.1,
        close_mid_body_rate: 0.1,
        garbage_rate: 0.1,
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let (_d, run_dir, outcome) = run_at(
        &format!("{}/", server.url()),
        // No probe after the level: the server's counters are the run's alone.
        &["-c", "4", "-n", "600", "--no-progress", "--no-probe"],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert_eq!(rows.len(), 600, "every request is a row");
    assert_eq!(server.requests_total(), 600, "and the server saw each once");
    let counts = by_class(&rows);
    let expected = [
        ("reset", server.faults_total(Fault::Reset)),
        ("body", server.faults_total(Fault::CloseMidBody)),
        ("protocol", server.faults_total(Fault::Garbage)),
        ("http_status", server.requests_with_status(500)),
        ("ok", server.requests_with_status(200)),
    ];
    for (class, n) in expected {
        assert!(n > 20, "{class}: the draw gave {n}; {counts:?}");
        assert_eq!(
            counts.get(class).copied().unwrap_or(0),
            n,
            "{class}: {counts:?}"
        );
    }
    // The summary counts the same, by class.
    let summary = &outcome.summary;
    assert_eq!(summary.failed, 600 - server.requests_with_status(200));
    for class in ["reset", "body", "protocol", "http_status"] {
        assert_eq!(
            summary.errors.get(class),
            counts.get(class),
            "summary: {class}"
        );
    }
    // A cut body still had its headers: status recorded, the class says what broke.
    assert!(rows
        .iter()
        .filter(|r| r.error.as_deref() == Some("body"))
        .all(|r| r.status == 200 && r.ttfb_ns.is_some()));
    assert!(rows
        .iter()
        .filter(|r| matches!(r.error.as_deref(), Some("reset" | "protocol")))
        .all(|r| r.status == 0));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_slower_than_the_timeout_is_a_timeout_row_with_its_first_byte() {
    let server = servers::start(ServerConfig {
        slow_body: Some(std::time::Duration::from_millis(800)),
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let (_d, run_dir, outcome) = run_at(
        &format!("{}/", server.url()),
        &["-c", "2", "-n", "6", "--timeout", "200ms", "--no-progress"],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert_eq!(rows.len(), 6);
    for row in &rows {
        assert_eq!(row.error.as_deref(), Some("timeout"), "{row:?}");
        // The headers came quickly; the body did not.
        assert_eq!(row.status, 200);
        assert!(row.ttfb_ns.unwrap() < 200_000_000, "{row:?}");
        assert!(row.latency_ns >= 200_000_000, "{row:?}");
    }
    assert_eq!(outcome.summary.failed, 6);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_refused_beyond_the_servers_cap_are_reset_rows_and_the_run_goes_on() {
    let server = servers::start(ServerConfig {
        max_connections: Some(2),
        service_time: servers::ServiceTime::Fixed(std::time::Duration::from_millis(2)),
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let (_d, run_dir, _) = run_at(
        &format!("{}/", server.url()),
        &["-c", "6", "-n", "300", "--no-progress"],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert_eq!(rows.len(), 300);
    let counts = by_class(&rows);
    let ok = counts.get("ok").copied().unwrap_or(0);
    assert_eq!(ok, server.requests_with_status(200), "{counts:?}");
    assert!(ok > 0, "two connections are served: {counts:?}");
    assert!(server.connections_refused() > 0);
    assert!(counts.get("reset").copied().unwrap_or(0) > 0, "{counts:?}");
    // Nothing is unexplained: refusals are resets, never `other`.
    assert_eq!(
        counts
            .keys()
            .filter(|k| *k != "ok" && *k != "reset")
            .count(),
        0,
        "{counts:?}"
    );
    server.shutdown().await;
}
