//! Transport options against real servers on loopback: TLS (system roots, --cacert,
//! --insecure), HTTP/2 with streams sharing connections, --no-keepalive, redirects, and secret
//! headers kept out of run.json and the Parquet metadata.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;

use bytes::Bytes;
use common::{metadata, read_rows, run_at, run_json, segments};
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use loadgen::stop::StopSignal;
use servers::ServerConfig;

/// A self-signed certificate for `localhost` and 127.0.0.1, and its key, in PEM.
fn self_signed() -> (String, String) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    (cert.cert.pem(), cert.signing_key.serialize_pem())
}

/// `n` rows, every one a 200 without error.
fn assert_all_ok(rows: &[common::Row], n: usize) {
    assert_eq!(rows.len(), n);
    let bad: Vec<_> = rows
        .iter()
        .filter(|r| r.status != 200 || r.error.is_some())
        .take(3)
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
}

/// The reference server over TLS; returns it with the CA (here: the certificate) in a file.
async fn tls_server(dir: &Path) -> (servers::RunningServer, std::path::PathBuf) {
    let (cert, key) = self_signed();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &cert).unwrap();
    let server = servers::start(ServerConfig {
        tls: Some(servers::TlsConfig::from_pem(
            cert.into_bytes(),
            key.into_bytes(),
        )),
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    (server, ca)
}

/// `loadgen run --url URL --out OUT FLAGS…` as a process: (exit code, stdout, stderr).
async fn loadgen_run(url: String, out: &Path, flags: &[&str]) -> (i32, String, String) {
    let mut command = common::loadgen_bin();
    command
        .args(["run", "--url", &url, "--out"])
        .arg(out)
        .args(flags);
    tokio::task::spawn_blocking(move || {
        let out = command.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_cacert_works_and_the_handshake_is_in_connect_time() {
    let dir = tempfile::tempdir().unwrap();
    let (server, ca) = tls_server(dir.path()).await;
    let url = format!("{}/", server.url());
    assert!(url.starts_with("https://"), "{url}");
    let (_d, run_dir, outcome) = run_at(
        &url,
        &[
            "-c",
            "2",
            "-n",
            "40",
            "--cacert",
            ca.to_str().unwrap(),
            "--no-progress",
        ],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert_all_ok(&rows, 40);
    // Keep-alive: one connection per worker, so exactly two rows carry connect time, and it
    // includes a TLS handshake (far more than a loopback TCP connect's few microseconds).
    let connects: Vec<i64> = rows.iter().filter_map(|r| r.connect_ns).collect();
    assert_eq!(connects.len(), 2, "{connects:?}");
    assert!(connects.iter().all(|&ns| ns > 100_000), "{connects:?}");
    // Bytes are counted on the wire, TLS records included: more than the plaintext response.
    assert!(rows
        .iter()
        .all(|r| r.bytes_received > "hello, world\n".len() as u64));
    // The run's 40, and the probe's after the level, if any.
    assert_eq!(
        server.requests_total(),
        40 + common::probe_requests(&run_dir)
    );
    assert_eq!(
        common::run_json(&outcome.run_dir)["config"]["tls_verify"],
        format!("--cacert {}", ca.display())
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_server_without_cacert_is_a_clear_error_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _ca) = tls_server(dir.path()).await;
    let out = dir.path().join("run");
    let (code, _stdout, stderr) =
        loadgen_run(format!("{}/", server.url()), &out, &["-n", "5"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("certificate"), "{stderr}");
    assert!(
        stderr.contains("--cacert") && stderr.contains("--insecure"),
        "{stderr}"
    );
    assert_eq!(stderr.trim().lines().count(), 1, "one sentence: {stderr}");
    assert!(!out.exists(), "no run directory is left behind");
    assert_eq!(server.requests_total(), 0);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insecure_skips_verification_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (server, _ca) = tls_server(dir.path()).await;
    let out = dir.path().join("run");
    let (code, stdout, stderr) = loadgen_run(
        format!("{}/", server.url()),
        &out,
        &["-c", "2", "-n", "10", "--insecure", "--no-progress"],
    )
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("--insecure"), "the summary warns: {stdout}");
    let json = run_json(&out);
    assert!(
        json["warnings"].to_string().contains("not verified"),
        "{}",
        json["warnings"]
    );
    assert_eq!(json["config"]["tls_verify"], "off (--insecure)");
    assert_eq!(read_rows(&out).len(), 10);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_over_tls_multiplexes_workers_on_shared_connections() {
    let dir = tempfile::tempdir().unwrap();
    let (server, ca) = tls_server(dir.path()).await;
    let (_d, run_dir, outcome) = run_at(
        &format!("{}/", server.url()),
        &[
            "--http2",
            "-c",
            "2",
            "--streams-per-connection",
            "4",
            "-n",
            "200",
            "--cacert",
            ca.to_str().unwrap(),
            "--no-progress",
        ],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert_all_ok(&rows, 200);
    // 2 connections × 4 streams = 8 workers, and only two connections were opened.
    let workers: std::collections::BTreeSet<u32> = rows.iter().map(|r| r.worker).collect();
    assert_eq!(workers.len(), 8, "{workers:?}");
    assert_eq!(rows.iter().filter(|r| r.connect_ns.is_some()).count(), 2);
    assert_eq!(
        common::run_json(&outcome.run_dir)["config"]["protocol"],
        "HTTP/2"
    );
    server.shutdown().await;
}

/// A server that speaks only HTTP/1.1 and answers every request with 200.
async fn http1_only_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(
                TokioIo::new(stream),
                hyper::service::service_fn(|_req: Request<hyper::body::Incoming>| async {
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                }),
            ));
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_prior_knowledge_is_really_http2() {
    // The reference server speaks h2c with prior knowledge: it works.
    let server = servers::start(ServerConfig::default()).await.unwrap();
    let (_d, run_dir, _) = run_at(
        &format!("{}/", server.url()),
        &[
            "--http2",
            "-c",
            "1",
            "--streams-per-connection",
            "3",
            "-n",
            "30",
            "--no-progress",
        ],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert_eq!(
        rows.iter().filter(|r| r.status == 200).count(),
        30,
        "{rows:?}"
    );
    // A request without a body is sent when its HEADERS frame is handed to the connection.
    assert!(
        rows.iter()
            .all(|r| r.send_ns.is_some_and(|s| s > 0 && Some(s) <= r.ttfb_ns)),
        "{rows:?}"
    );
    server.shutdown().await;
    // A server that only speaks HTTP/1.1 cannot answer an HTTP/2 preface: every row fails.
    let addr = http1_only_server().await;
    let (_d, run_dir, outcome) = run_at(
        &format!("http://{addr}/"),
        &["--http2", "-c", "1", "-n", "5", "--no-progress"],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert_eq!(rows.len(), 5);
    assert!(
        rows.iter().all(|r| r.status == 0 && r.error.is_some()),
        "{rows:?}"
    );
    assert_eq!(outcome.summary.failed, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_keepalive_opens_a_connection_for_every_request() {
    let server = servers::start(ServerConfig::default()).await.unwrap();
    let (_d, run_dir, _) = run_at(
        &format!("{}/", server.url()),
        &["-c", "2", "-n", "30", "--no-keepalive", "--no-progress"],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert_all_ok(&rows, 30);
    assert!(
        rows.iter().all(|r| r.connect_ns.is_some()),
        "every row connects"
    );
    server.shutdown().await;
}

/// Redirects: `/r/N` → `/r/N-1`, `/r/0` → 200, `/loop` → itself, `/away` → `elsewhere`.
async fn redirect_server(elsewhere: String) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let elsewhere = elsewhere.clone();
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let path = req.uri().path().to_string();
                let location = match path.as_str() {
                    "/r/0" => None,
                    "/loop" => Some("/loop".to_string()),
                    "/away" => Some(elsewhere.clone()),
                    p => p
                        .strip_prefix("/r/")
                        .and_then(|n| n.parse::<u32>().ok())
                        .map(|n| format!("/r/{}", n - 1)),
                };
                async move {
                    let mut response = Response::new(Full::new(Bytes::from_static(b"done")));
                    if let Some(location) = location {
                        *response.status_mut() = hyper::StatusCode::FOUND;
                        response
                            .headers_mut()
                            .insert(hyper::header::LOCATION, location.parse().unwrap());
                    }
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_are_followed_only_when_asked_and_only_so_far() {
    let other = servers::start(ServerConfig::default()).await.unwrap();
    let addr = redirect_server(format!("{}/", other.url())).await;
    let statuses = |run_dir: &Path| -> Vec<(u16, Option<String>)> {
        read_rows(run_dir)
            .into_iter()
            .map(|r| (r.status, r.error))
            .collect()
    };
    let run = |path: &'static str, flags: Vec<&'static str>| {
        let url = format!("http://{addr}{path}");
        async move {
            let mut all = vec!["-c", "1", "-n", "3", "--no-progress"];
            all.extend(flags);
            run_at(&url, &all, StopSignal::new()).await
        }
    };
    // Not followed by default: the 302 is the response (a success, like wrk and oha).
    let (_d, dir, _) = run("/r/3", vec![]).await;
    assert_eq!(statuses(&dir), vec![(302, None); 3]);
    // Followed: three hops to the 200, one row per request, latency covering all of it.
    let (_d, dir, _) = run("/r/3", vec!["--follow-redirects"]).await;
    assert_eq!(statuses(&dir), vec![(200, None); 3]);
    // A loop stops after 10 redirects.
    let (_d, dir, outcome) = run("/loop", vec!["--follow-redirects"]).await;
    assert_eq!(
        statuses(&dir),
        vec![(302, Some("too_many_redirects".to_string())); 3]
    );
    assert_eq!(outcome.summary.failed, 3);
    // Another origin: not followed unless =any.
    let (_d, dir, _) = run("/away", vec!["--follow-redirects"]).await;
    assert_eq!(statuses(&dir), vec![(302, None); 3]);
    assert_eq!(other.requests_total(), 0);
    let (_d, dir, _) = run("/away", vec!["--follow-redirects=any"]).await;
    assert_eq!(statuses(&dir), vec![(200, None); 3]);
    assert_eq!(other.requests_total(), 3 + common::probe_requests(&dir));
    other.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_headers_stay_out_of_run_json_and_parquet_metadata() {
    let server = servers::start(ServerConfig::default()).await.unwrap();
    let (_d, run_dir, _) = run_at(
        &format!("{}/", server.url()),
        &[
            "-n",
            "5",
            "-H",
            "Authorization: Bearer s3cr3t-token",
            "-H",
            "X-Api-Key: k3y-value",
            "-H",
            "Cookie: session=c00kie",
            "-H",
            "Accept: text/plain",
            "--no-progress",
        ],
        StopSignal::new(),
    )
    .await;
    let run_json_text = std::fs::read_to_string(run_dir.join("run.json")).unwrap();
    let parquet_text: String = segments(&run_dir)
        .iter()
        .map(|s| format!("{:?}", metadata(s)))
        .collect();
    for text in [&run_json_text, &parquet_text] {
        for secret in ["s3cr3t-token", "k3y-value", "c00kie"] {
            assert!(!text.contains(secret), "{secret} leaked");
        }
        assert!(text.contains("<redacted>"));
        assert!(text.contains("text/plain"), "ordinary headers are kept");
    }
    server.shutdown().await;
}

/// `send_ns` (request schema version 2): the whole request, a 200 KB swipe included, was
/// handed over before the response's first byte, on HTTP/1.1 and on HTTP/2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_ns_is_the_last_request_byte_on_http1_and_http2() {
    let server = servers::start(ServerConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body.bin");
    let comment = "x".repeat(200_000);
    std::fs::write(
        &body,
        format!(r#"{{"swiper": "1", "swipee": "2", "comment": "{comment}"}}"#),
    )
    .unwrap();
    let body_flag = format!("@{}", body.display());
    let url = format!("{}/swipe/left/", server.url());
    for protocol in [&[][..], &["--http2"][..]] {
        let mut flags = vec![
            "--method", "POST", "--body", &body_flag, "-c", "2", "-n", "20",
        ];
        flags.extend(protocol);
        let (_d, run_dir, _) = run_at(&url, &flags, StopSignal::new()).await;
        let rows = read_rows(&run_dir);
        assert_eq!(rows.len(), 20);
        for row in &rows {
            assert_eq!((row.status, row.error.as_deref()), (201, None), "{row:?}");
            let send = row
                .send_ns
                .unwrap_or_else(|| panic!("{protocol:?}: {row:?}"));
            let ttfb = row.ttfb_ns.expect("a response arrived");
            assert!(0 < send && send <= ttfb, "{protocol:?}: {row:?}");
            assert!(row.bytes_sent > 200_000, "{protocol:?}: {row:?}");
        }
    }
    server.shutdown().await;
}

/// How the HTTP/2 test server below answers the `k`-th request (1-based) of a connection.
#[derive(Clone, Copy)]
enum H2Fault {
    /// Every 5th stream is reset (RST_STREAM, INTERNAL_ERROR); after 12 requests the server
    /// ends the connection with GOAWAY INTERNAL_ERROR, cutting off the streams in flight.
    ResetAndAbruptGoaway,
    /// After 10 requests the server sends a graceful GOAWAY (NO_ERROR), finishes the streams
    /// it has taken and closes.
    GracefulGoaway,
}

/// An HTTP/2 (prior knowledge) server on the `h2` crate that misbehaves as `fault` says.
async fn h2_fault_server(fault: H2Fault) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut conn) = h2::server::handshake(stream).await else {
                    return;
                };
                let mut served = 0u32;
                while let Some(Ok((_request, mut respond))) = conn.accept().await {
                    served += 1;
                    match fault {
                        H2Fault::ResetAndAbruptGoaway if served == 12 => {
                            conn.abrupt_shutdown(h2::Reason::INTERNAL_ERROR);
                        }
                        H2Fault::ResetAndAbruptGoaway if served.is_multiple_of(5) => {
                            respond.send_reset(h2::Reason::INTERNAL_ERROR);
                            continue;
                        }
                        H2Fault::GracefulGoaway if served == 10 => conn.graceful_shutdown(),
                        _ => {}
                    }
                    let response = Response::new(());
                    if let Ok(mut body) = respond.send_response(response, false) {
                        let _ = body.send_data(Bytes::from_static(b"ok"), true);
                    }
                }
                // Drives the connection to its end (the GOAWAY and the last frames).
                let _ = std::future::poll_fn(|cx| conn.poll_closed(cx)).await;
            });
        }
    });
    addr
}

/// Streams the server resets, and those a GOAWAY cuts off mid-run, are rows with the `reset`
/// class — none is lost, none is `other` — and the workers go on over a new connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_resets_and_goaway_mid_run_are_reset_rows_not_lost() {
    let addr = h2_fault_server(H2Fault::ResetAndAbruptGoaway).await;
    let flags = [
        "--http2",
        "-c",
        "1",
        "--streams-per-connection",
        "4",
        "-n",
        "100",
        "--no-progress",
    ];
    let (_d, run_dir, outcome) =
        run_at(&format!("http://{addr}/"), &flags, StopSignal::new()).await;
    let (rows, _) = common::rows_matching_summary(&run_dir);
    assert_eq!(rows.len(), 100);
    let ok = rows.iter().filter(|r| r.status == 200).count();
    let reset = common::rows_with_error(&rows, "reset");
    assert_eq!(ok + reset, 100, "only 200s and resets: {rows:?}");
    // Every 5th stream of each connection is reset, so at least one in six requests.
    assert!(reset >= 100 / 6, "{reset} resets: {rows:?}");
    assert!(ok >= 100 / 2, "{ok} ok: {rows:?}");
    assert!(
        rows.iter()
            .filter(|r| r.error.is_some())
            .all(|r| r.status == 0 && r.ttfb_ns.is_none()),
        "{rows:?}"
    );
    // A connection serves at most 12 requests, so the 100 took several, each opened once.
    let opened = rows.iter().filter(|r| r.connect_ns.is_some()).count();
    assert!(opened >= 100 / 12, "{opened} connections: {rows:?}");
    assert_eq!(outcome.summary.failed as usize, reset);
}

/// A graceful GOAWAY ends the connection after the streams the server took: the workers open
/// another one, and every request is a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_graceful_goaway_moves_workers_to_a_new_connection() {
    let addr = h2_fault_server(H2Fault::GracefulGoaway).await;
    let flags = [
        "--http2",
        "-c",
        "1",
        "--streams-per-connection",
        "3",
        "-n",
        "60",
        "--no-progress",
    ];
    let (_d, run_dir, _) = run_at(&format!("http://{addr}/"), &flags, StopSignal::new()).await;
    let (rows, _) = common::rows_matching_summary(&run_dir);
    assert_eq!(rows.len(), 60);
    let ok = rows.iter().filter(|r| r.status == 200).count();
    assert_eq!(
        ok + common::rows_with_error(&rows, "reset"),
        60,
        "only 200s and resets: {rows:?}"
    );
    assert!(ok >= 60 / 2, "{ok} ok: {rows:?}");
    // A connection takes 10 requests, and the (at most 3) streams already sent when the
    // GOAWAY arrived.
    let opened = rows.iter().filter(|r| r.connect_ns.is_some()).count();
    assert!(opened >= 60 / (10 + 3), "{opened} connections: {rows:?}");
}

/// Issue 25: over HTTP/2 a request beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS waits
/// inside the client for a stream slot. That wait is the client's: it is in `send_ns`, so
/// `ttfb_ns - send_ns` is the server's time (its 20 ms service time), not the queue behind
/// the other streams (request schema version 4). No stream is refused: before the server's
/// SETTINGS frame says its limit, the client opens one stream, not four (four would be three
/// RST_STREAM REFUSED_STREAM, `reset` rows the server never processed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_wait_for_a_stream_slot_is_client_time_in_send_ns() {
    let server = servers::start(ServerConfig {
        service_time: servers::ServiceTime::Fixed(std::time::Duration::from_millis(20)),
        h2_max_streams: Some(1),
        ..ServerConfig::default()
    })
    .await
    .unwrap();
    let (_d, run_dir, _) = run_at(
        &format!("{}/", server.url()),
        &[
            "--http2",
            "-c",
            "1",
            "--streams-per-connection",
            "4",
            "-n",
            "40",
            "--no-progress",
        ],
        StopSignal::new(),
    )
    .await;
    let rows = read_rows(&run_dir);
    assert_eq!(rows.len(), 40);
    let ok: Vec<_> = rows.iter().filter(|r| r.status == 200).collect();
    assert_eq!(ok.len(), 40, "{rows:?}");
    // Request schema 4 put the wait in `send_ns`; every later one keeps it there.
    let version: u32 = metadata(&segments(&run_dir)[0])["loadgen.schema_version"]
        .parse()
        .unwrap();
    assert!(version >= 4, "{version}");
    let mut waits: Vec<i64> = ok.iter().map(|r| r.send_ns.unwrap()).collect();
    let mut server_ms: Vec<i64> = ok
        .iter()
        .map(|r| (r.ttfb_ns.unwrap() - r.send_ns.unwrap()) / 1_000_000)
        .collect();
    waits.sort_unstable();
    server_ms.sort_unstable();
    let median = ok.len() / 2;
    // One stream at a time for four workers: a request waits for the others' 20 ms each.
    assert!(
        waits[median] > 30_000_000,
        "median send_ns {} ns",
        waits[median]
    );
    // What is left after sending is the server's 20 ms (and a little scheduling).
    assert!(
        (19..=35).contains(&server_ms[median]),
        "median ttfb - send {} ms",
        server_ms[median]
    );
    server.shutdown().await;
}
