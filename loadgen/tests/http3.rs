//! HTTP/3 against `loadgen-server --http3` (in-process, QUIC on 127.0.0.1:0's port): every
//! request a row, streams sharing connections, the handshake in connect time, the stream
//! limit's wait as client time, the closed and open models, and the server's faults as
//! classified rows. (aioquic, a server that is not ours, is the witness in
//! analysis/tests/test_http3.py.)

mod common;

use std::path::Path;
use std::time::Duration;

use common::{read_rows, run_at, run_json};
use loadgen::stop::StopSignal;
use servers::ServerConfig;

/// The reference server over TLS with HTTP/3, and its self-signed certificate in a file.
async fn h3_server(dir: &Path, config: ServerConfig) -> (servers::RunningServer, String) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, cert.cert.pem()).unwrap();
    let server = servers::start(ServerConfig {
        tls: Some(servers::TlsConfig::from_pem(
            cert.cert.pem().into_bytes(),
            cert.signing_key.serialize_pem().into_bytes(),
        )),
        http3: true,
        ..config
    })
    .await
    .unwrap();
    assert_eq!(
        server.http3_addr().unwrap().port(),
        server.local_addr().port()
    );
    (server, ca.to_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http3_multiplexes_workers_on_quic_connections_and_counts_every_request() {
    let dir = tempfile::tempdir().unwrap();
    let (server, ca) = h3_server(dir.path(), ServerConfig::default()).await;
    let (_d, run_dir, outcome) = run_at(
        &format!("{}/", server.url()),
        &[
            "--http3",
            "-c",
            "2",
            "--streams-per-connection",
            "3",
            "-n",
            "120",
            "--cacert",
            &ca,
            "--no-progress",
        ],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert_eq!(rows.len(), 120);
    assert!(rows.iter().all(|r| r.status == 200 && r.error.is_none()));
    // The run's 120, and the probe's at one connection after the level, if any.
    assert_eq!(
        server.requests_total(),
        120 + common::probe_requests(&run_dir)
    );
    let workers: std::collections::BTreeSet<u32> = rows.iter().map(|r| r.worker).collect();
    assert_eq!(workers.len(), 6, "{workers:?}");
    // Two QUIC connections, each opened by one worker whose row carries the handshake.
    let connects: Vec<i64> = rows.iter().filter_map(|r| r.connect_ns).collect();
    assert_eq!(connects.len(), 2, "{connects:?}");
    assert!(connects.iter().all(|ns| *ns > 0));
    let json = run_json(&outcome.run_dir);
    assert_eq!(json["config"]["protocol"], "HTTP/3");
    assert_eq!(json["config"]["streams_per_connection"], 3);
    // No TCP here: the run claims no TCP facts.
    assert!(json["client"]["tcp"].is_null(), "{}", json["client"]);
    common::contract::assert_run_dir(&run_dir);
    server.shutdown().await;
}

/// As over HTTP/2 (issue 25): a request beyond the server's stream limit (QUIC MAX_STREAMS)
/// waits inside the client; the wait is in `send_ns`, so `ttfb_ns - send_ns` is the server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http3_wait_for_a_stream_is_client_time_in_send_ns() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        service_time: servers::ServiceTime::Fixed(Duration::from_millis(20)),
        h2_max_streams: Some(1),
        ..ServerConfig::default()
    };
    let (server, ca) = h3_server(dir.path(), config).await;
    let (_d, run_dir, outcome) = run_at(
        &format!("{}/", server.url()),
        &[
            "--http3",
            "-c",
            "1",
            "--streams-per-connection",
            "4",
            "-n",
            "40",
            "--cacert",
            &ca,
            "--no-progress",
        ],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    let ok: Vec<_> = rows.iter().filter(|r| r.status == 200).collect();
    assert_eq!(ok.len(), 40, "{rows:?}");
    let mut waits: Vec<i64> = ok.iter().map(|r| r.send_ns.unwrap()).collect();
    let mut server_ns: Vec<i64> = ok
        .iter()
        .map(|r| r.ttfb_ns.unwrap() - r.send_ns.unwrap())
        .collect();
    waits.sort_unstable();
    server_ns.sort_unstable();
    let median = ok.len() / 2;
    // One stream at a time for four workers: a request waits for another's 20 ms at least,
    // and the server's part is its own 20 ms, far less than the wait.
    assert!(
        waits[median] >= 20_000_000,
        "median send_ns {}",
        waits[median]
    );
    assert!(server_ns[median] < waits[median], "{server_ns:?} {waits:?}");
    // The verdict: the wait is the client's (as over HTTP/2), never a TCP send buffer.
    let verdict = &run_json(&outcome.run_dir)["verdict"];
    assert_eq!(verdict["rule"], "client.http2_streams", "{verdict}");
    let text = verdict.to_string();
    assert!(
        !text.contains("network.send") && !text.contains("tcp_"),
        "{text}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http3_server_resets_and_closes_are_classified_rows() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServerConfig {
        reset_rate: 0.2,
        garbage_rate: 0.05,
        ..ServerConfig::default()
    };
    let (server, ca) = h3_server(dir.path(), config).await;
    let (_d, run_dir, _) = run_at(
        &format!("{}/", server.url()),
        &[
            "--http3",
            "-c",
            "1",
            "--streams-per-connection",
            "2",
            "-n",
            "200",
            "--cacert",
            &ca,
            "--no-progress",
        ],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert_eq!(rows.len(), 200);
    let count = |class: &str| common::rows_with_error(&rows, class);
    let resets = server.faults_total(servers::Fault::Reset);
    assert!(resets > 0);
    // Every stream the server reset is a `reset` row, unless the connection closed first.
    assert!(count("reset") > 0, "{rows:?}");
    assert!(count("reset") as u64 <= resets);
    // Garbage closes the QUIC connection: the requests it cut are `closed` rows.
    assert!(count("closed") > 0, "{rows:?}");
    let classified = count("reset") + count("closed") + count("handshake");
    let ok = rows.iter().filter(|r| r.error.is_none()).count();
    assert_eq!(ok + classified, 200, "{rows:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http3_open_model_keeps_its_schedule_over_quic() {
    let dir = tempfile::tempdir().unwrap();
    let (server, ca) = h3_server(dir.path(), ServerConfig::default()).await;
    let (_d, run_dir, outcome) = run_at(
        &format!("{}/", server.url()),
        &[
            "--http3",
            "--rate",
            "100",
            "-d",
            "1s",
            "--cacert",
            &ca,
            "--no-progress",
        ],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert!(rows.len() >= 90, "{}", rows.len());
    assert!(rows
        .iter()
        .all(|r| r.error.is_none() && r.intended_ns.is_some()));
    assert_eq!(server.requests_total(), rows.len() as u64);
    assert_eq!(run_json(&outcome.run_dir)["config"]["model"], "open");
    server.shutdown().await;
}

#[test]
fn http3_over_plain_http_is_one_sentence_and_exit_2() {
    let out = common::loadgen_bin()
        .args(["run", "--url", "http://127.0.0.1:9/", "--http3", "-n", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("https://"), "{stderr}");
}

/// No QUIC server on the port: nothing answers the handshake; the run refuses at start (as
/// an unreachable TCP target does) rather than recording a run of failures.
#[test]
fn http3_without_a_quic_server_is_a_clear_error_at_start() {
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = udp.local_addr().unwrap().port();
    let out = common::loadgen_bin()
        .args([
            "run",
            "--url",
            &format!("https://127.0.0.1:{port}/"),
            "--http3",
            "--insecure",
            "--connect-timeout",
            "1s",
            "-n",
            "1",
        ])
        .output()
        .unwrap();
    drop(udp);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("QUIC"), "{stderr}");
}
