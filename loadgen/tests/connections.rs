//! Opening many connections (issue 46): `--connect-rate` paces the workers' first connections,
//! ends with the run, and is reported in run.json; `--source-addr` spreads them over local addresses (the server
//! sees each one) and is reported too; bad values are one sentence. Real servers on 127.0.0.1,
//! in-process runs; a few seconds in all.

mod common;

use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use common::{read_rows, run_at, run_json};
use loadgen::cli::Cli;
use loadgen::stop::StopSignal;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A keep-alive HTTP/1.1 server on 127.0.0.1 answering every request `200 ok`, noting the
/// address each connection came from.
async fn server_noting_peers() -> (String, Arc<Mutex<Vec<IpAddr>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let peers = Arc::new(Mutex::new(Vec::new()));
    let seen = peers.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, peer)) = listener.accept().await {
            seen.lock().unwrap().push(peer.ip());
            tokio::spawn(async move {
                let mut request = [0u8; 4096];
                while matches!(socket.read(&mut request).await, Ok(n) if n > 0) {
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if socket.write_all(answer).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (url, peers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_rate_paces_the_first_requests_and_is_in_run_json() {
    let (url, _) = server_noting_peers().await;
    let flags = [
        "-c",
        "20",
        "-d",
        "400ms",
        "--think-time",
        "50ms",
        "--connect-rate",
        "100/s",
        "--no-progress",
    ];
    let (_dir, out, _) = run_at(&url, &flags, StopSignal::new()).await;
    let run = run_json(&out);
    assert_eq!(
        run["connections"]["connect_rate_per_s"], 100,
        "{}",
        run["connections"]
    );
    assert!(run["connections"].get("source_addrs").is_none());
    let rows = read_rows(&out);
    // 20 workers at 100 a second: the last one starts ~190 ms after the first.
    let firsts: Vec<i64> = (0..20u32)
        .map(|w| {
            rows.iter()
                .filter(|r| r.worker == w)
                .map(|r| r.start_ns)
                .min()
                .unwrap()
        })
        .collect();
    let spread_ms = (firsts.iter().max().unwrap() - firsts.iter().min().unwrap()) / 1_000_000;
    assert!(
        spread_ms >= 150,
        "first requests spread over {spread_ms} ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_addrs_are_taken_in_turn_and_are_in_run_json() {
    let (url, peers) = server_noting_peers().await;
    let flags = [
        "-c",
        "4",
        "-d",
        "300ms",
        "--think-time",
        "20ms",
        "--source-addr",
        "127.0.0.2-127.0.0.3",
        "--no-progress",
    ];
    let (_dir, out, _) = run_at(&url, &flags, StopSignal::new()).await;
    let run = run_json(&out);
    assert_eq!(
        run["connections"]["source_addrs"],
        serde_json::json!(["127.0.0.2", "127.0.0.3"])
    );
    let rows = read_rows(&out);
    assert!(rows.len() >= 8, "{} rows", rows.len());
    assert!(rows.iter().all(|r| r.status == 200), "{rows:?}");
    let mut seen: Vec<String> = peers
        .lock()
        .unwrap()
        .iter()
        .map(|p| p.to_string())
        .collect();
    seen.sort();
    // The target check's one connection is the kernel's choice; the workers' are two each.
    assert_eq!(
        seen,
        [
            "127.0.0.1",
            "127.0.0.2",
            "127.0.0.2",
            "127.0.0.3",
            "127.0.0.3"
        ]
    );
}

/// Regression (the 100,000-user run held on past `-d`): workers still waiting for their turn
/// under `--connect-rate` when the run stops do not open their connections afterwards. 50
/// workers at 5 a second in a 1 s run: a few connect, not all 50; the run records only what
/// was sent, every row answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_waiting_for_their_connect_turn_stop_with_the_run() {
    let (url, peers) = server_noting_peers().await;
    let flags = [
        "-c",
        "50",
        "-d",
        "1s",
        "--think-time",
        "100ms",
        "--connect-rate",
        "5/s",
        "--no-progress",
    ];
    let (_dir, out, _) = run_at(&url, &flags, StopSignal::new()).await;
    let connections = peers.lock().unwrap().len();
    // The target check's one, and the workers whose turn came within the second.
    assert!(connections < 25, "{connections} connections opened");
    let rows = read_rows(&out);
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r.status == 200), "{rows:?}");
    let workers = &run_json(&out)["summary"]["workers"];
    assert_eq!(workers["started"], 50, "{workers}");
    // The last turn comes 10 s in: the workers waiting for it ended with the run instead
    // (the engine's own clocks; with a margin of seconds, not a speed).
    let last_ended_ns = workers["phases"][0]["last_ended_ns"].as_i64().unwrap();
    assert!(last_ended_ns < 5_000_000_000, "{workers}");
}

/// The sentence clap prints for `loadgen run --url U ARGS…`.
fn refusal(args: &[&str]) -> String {
    let all = ["loadgen", "run", "--url", "http://127.0.0.1:1/"];
    let error = <Cli as clap::Parser>::try_parse_from(all.iter().chain(args)).expect_err("refused");
    assert_eq!(error.exit_code(), 2);
    error.to_string()
}

#[test]
fn bad_source_addrs_and_connect_rates_are_one_sentence() {
    let text = refusal(&["--source-addr", "127.0.0.9-127.0.0.1"]);
    assert!(text.contains("ends before it starts"), "{text}");
    let text = refusal(&["--source-addr", "127.0.0.1,localhost"]);
    assert!(
        text.contains("'localhost' is not an IP address or a range"),
        "{text}"
    );
    let text = refusal(&["--source-addr", "10.0.0.0-10.1.0.0"]);
    assert!(text.contains("names 65537 addresses"), "{text}");
    let text = refusal(&["--connect-rate", "0/s"]);
    assert!(text.contains("at least 1"), "{text}");
    let config = common::config(&[
        "--url",
        "http://127.0.0.1:1/",
        "--source-addr",
        "127.0.0.4, 127.0.0.2",
    ]);
    assert_eq!(config.connection.source_addrs.len(), 2);
    assert_eq!(
        config.connection.connect_rate_per_s,
        loadgen::config::DEFAULT_CONNECT_RATE_PER_S
    );
}
