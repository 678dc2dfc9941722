//! The fault matrix, observed from real clients: resets, bodies cut short, garbage, slow
//! bodies, the connection cap, TLS (HTTP/1.1 and HTTP/2 by ALPN), and the validation of each
//! knob. Raw sockets where the point is the bytes on the wire, hyper's client where the point
//! is what an HTTP client makes of them. Timing checks are lower bounds, except that the
//! first byte of a slow body must come before its pause ends.

mod common;

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{server, Client};
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::{http1, http2};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::{CertificateDer, ServerName};
use servers::{ConfigError, Fault, ServerConfig, TlsConfig};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Long enough for any healthy exchange; a fault that hangs instead of breaking fails here.
const PATIENCE: Duration = Duration::from_secs(10);

fn get_request(path: &str) -> String {
    // No `Connection: close`: when the connection ends, the fault ended it.
    format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n")
}

/// Sends `request` and reads until the server closes: the bytes, or the read error.
async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &str,
) -> std::io::Result<Vec<u8>> {
    stream.write_all(request.as_bytes()).await?;
    let mut received = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut received))
        .await
        .expect("the server ends the connection")?;
    Ok(received)
}

async fn raw_exchange(addr: SocketAddr, request: &str) -> std::io::Result<Vec<u8>> {
    exchange(TcpStream::connect(addr).await.unwrap(), request).await
}

/// Splits a raw HTTP/1 response into its head (status line and headers) and body.
fn split_response(response: &[u8]) -> (String, &[u8]) {
    let end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| {
            panic!(
                "no end of headers in {:?}",
                String::from_utf8_lossy(response)
            )
        });
    (
        String::from_utf8_lossy(&response[..end]).into_owned(),
        &response[end + 4..],
    )
}

fn content_length(head: &str) -> usize {
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no content-length in {head:?}"))
}

async fn scrape(addr: SocketAddr) -> String {
    Client::connect(addr)
        .await
        .get("/metrics")
        .await
        .text()
        .to_owned()
}

#[tokio::test]
async fn reset_rate_one_resets_every_api_request_but_not_metrics() {
    let server = server(ServerConfig {
        reset_rate: 1.0,
        ..ServerConfig::default()
    })
    .await;
    let addr = server.local_addr();
    for path in ["/", "/albums/1"] {
        let error = raw_exchange(addr, &get_request(path))
            .await
            .expect_err("a reset, not a response");
        assert_eq!(error.kind(), ErrorKind::ConnectionReset, "{path}: {error}");
    }
    assert_eq!(server.faults_total(Fault::Reset), 2);
    assert_eq!(
        server.requests_total(),
        2,
        "faulted requests are still requests"
    );
    assert_eq!(server.requests_with_status(200), 0);

    let metrics = scrape(addr).await;
    assert!(
        metrics.contains("loadgen_server_requests_total{route=\"root\",status=\"reset\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains("{route=\"albums_get\",status=\"reset\"} 1\n"));
    server.shutdown().await;
}

#[tokio::test]
async fn close_mid_body_sends_the_full_length_and_half_the_body_then_fin() {
    let server = server(ServerConfig {
        close_mid_body_rate: 1.0,
        ..ServerConfig::default()
    })
    .await;
    let addr = server.local_addr();
    for path in ["/", "/albums/7"] {
        let response = raw_exchange(addr, &get_request(path))
            .await
            .expect("a clean close (FIN), not a reset");
        let (head, body) = split_response(&response);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        let length = content_length(&head);
        assert!(length > 1, "{path}: the body must be long enough to cut");
        assert_eq!(body.len(), length / 2, "{path}: {head}");
    }
    assert_eq!(server.faults_total(Fault::CloseMidBody), 2);
    assert_eq!(server.requests_with_status(200), 0);
    assert_eq!(server.requests_total(), 2);
    server.shutdown().await;
}

/// A body-less 201 has nothing to cut in half; the response stops after the status line so
/// the client still sees an incomplete response, never a complete one.
#[tokio::test]
async fn close_mid_body_without_a_body_stops_after_the_status_line() {
    let server = server(ServerConfig {
        close_mid_body_rate: 1.0,
        ..ServerConfig::default()
    })
    .await;
    let body = r#"{"swiper":"1","swipee":"2","comment":"c"}"#;
    let request = format!(
        "POST /swipe/left HTTP/1.1\r\nHost: test\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    let response = raw_exchange(server.local_addr(), &request).await.unwrap();
    assert_eq!(
        String::from_utf8_lossy(&response),
        "HTTP/1.1 201 Created\r\n"
    );
    assert_eq!(server.faults_total(Fault::CloseMidBody), 1);
    server.shutdown().await;
}

/// HTTP/2 multiplexes requests on one connection, so the cut is per stream: the request
/// fails (headers with the full length and a short body, or the stream reset before them),
/// and the connection keeps serving.
#[tokio::test]
async fn close_mid_body_over_h2_fails_the_stream_not_the_connection() {
    let server = server(ServerConfig {
        close_mid_body_rate: 1.0,
        ..ServerConfig::default()
    })
    .await;
    let stream = TcpStream::connect(server.local_addr()).await.unwrap();
    let (mut sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    for _ in 0..3 {
        sender.ready().await.expect("the connection survives");
        let request = Request::get("/").body(Full::new(Bytes::new())).unwrap();
        let Ok(response) = sender.send_request(request).await else {
            continue;
        };
        assert_eq!(response.headers()["content-length"], "13");
        let body = tokio::time::timeout(PATIENCE, response.into_body().collect())
            .await
            .unwrap();
        assert!(body.is_err(), "a complete body: {body:?}");
    }
    assert_eq!(server.faults_total(Fault::CloseMidBody), 3);
    server.shutdown().await;
}

#[tokio::test]
async fn garbage_rate_one_answers_bytes_that_are_not_http() {
    let server = server(ServerConfig {
        garbage_rate: 1.0,
        ..ServerConfig::default()
    })
    .await;
    let addr = server.local_addr();
    let response = raw_exchange(addr, &get_request("/")).await.unwrap();
    assert!(!response.starts_with(b"HTTP/"), "{response:?}");
    assert!(response.starts_with(b"garbage\r\n\r\n"), "{response:?}");

    // What an HTTP client makes of it: a protocol error, not a response.
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    let connection = tokio::spawn(connection);
    let request = Request::get("/")
        .header("host", "test")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let error = sender.send_request(request).await.expect_err("garbage");
    assert!(
        error.is_parse() || error.is_incomplete_message(),
        "{error:?}"
    );
    let _ = connection.await;

    assert_eq!(server.faults_total(Fault::Garbage), 2);
    let metrics = scrape(addr).await;
    assert!(
        metrics.contains("{route=\"root\",status=\"garbage\"} 2\n"),
        "{metrics}"
    );
    server.shutdown().await;
}

/// The rates are shares of one draw: with reset and garbage at one half each, every request
/// is faulted one way or the other, and none is served.
#[tokio::test]
async fn fault_rates_share_one_draw() {
    let server = server(ServerConfig {
        reset_rate: 0.5,
        garbage_rate: 0.5,
        ..ServerConfig::default()
    })
    .await;
    for _ in 0..40 {
        match raw_exchange(server.local_addr(), &get_request("/")).await {
            Ok(response) => assert!(response.starts_with(b"garbage"), "{response:?}"),
            Err(error) => assert_eq!(error.kind(), ErrorKind::ConnectionReset, "{error}"),
        }
    }
    let resets = server.faults_total(Fault::Reset);
    let garbage = server.faults_total(Fault::Garbage);
    assert_eq!(resets + garbage, 40);
    assert!(
        resets > 0 && garbage > 0,
        "{resets} resets, {garbage} garbage"
    );
    assert_eq!(server.requests_total(), 40);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_body_sends_headers_at_once_and_the_rest_after_the_pause() {
    let pause = Duration::from_millis(300);
    let server = server(ServerConfig {
        slow_body: Some(pause),
        ..ServerConfig::default()
    })
    .await;
    let mut stream = TcpStream::connect(server.local_addr()).await.unwrap();
    let started = Instant::now();
    stream.write_all(get_request("/").as_bytes()).await.unwrap();
    let mut received = vec![0; 4096];
    let first_read = stream.read(&mut received).await.unwrap();
    let first_byte = started.elapsed();
    received.truncate(first_read);
    let full_length = loop {
        if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            let (head, _) = split_response(&received);
            break end + 4 + content_length(&head);
        }
        let mut more = [0; 4096];
        let n = stream.read(&mut more).await.unwrap();
        received.extend_from_slice(&more[..n]);
    };
    while received.len() < full_length {
        let mut more = [0; 4096];
        let n = stream.read(&mut more).await.unwrap();
        assert!(n > 0, "EOF before the whole body");
        received.extend_from_slice(&more[..n]);
    }
    let whole = started.elapsed();
    assert!(first_byte < pause, "first byte after {first_byte:?}");
    assert!(whole >= pause, "whole response after {whole:?}");
    assert!(received.ends_with(b"\r\n\r\nhello, world\n"));

    // HTTP/2 too: the response (headers) before the pause, the body after it; and /metrics
    // is never slowed.
    let mut client = Client::connect_h2(server.local_addr()).await;
    let started = Instant::now();
    let reply = client.get("/albums/1").await;
    assert_eq!(reply.status, 200);
    assert!(started.elapsed() >= pause, "{:?}", started.elapsed());
    let started = Instant::now();
    assert_eq!(client.get("/metrics").await.status, 200);
    assert!(
        started.elapsed() < pause,
        "/metrics took {:?}",
        started.elapsed()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn max_connections_resets_one_connection_too_many_and_serves_the_rest() {
    let server = server(ServerConfig {
        max_connections: Some(2),
        ..ServerConfig::default()
    })
    .await;
    let addr = server.local_addr();
    let mut first = Client::connect(addr).await;
    let mut second = Client::connect(addr).await;
    assert_eq!(first.get("/").await.status, 200);
    assert_eq!(second.get("/").await.status, 200);

    let error = raw_exchange(addr, &get_request("/"))
        .await
        .expect_err("the third connection is reset");
    assert_eq!(error.kind(), ErrorKind::ConnectionReset, "{error}");
    assert_eq!(server.connections_refused(), 1);

    assert_eq!(first.get("/").await.status, 200);
    let metrics = second.get("/metrics").await;
    assert!(
        metrics
            .text()
            .contains("\nloadgen_server_connections_refused_total 1\n"),
        "{}",
        metrics.text()
    );

    // A closed connection frees its slot as soon as the server sees it close.
    drop(first);
    let deadline = Instant::now() + PATIENCE;
    loop {
        match raw_exchange(
            addr,
            "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        )
        .await
        {
            Ok(response) => {
                assert!(response.starts_with(b"HTTP/1.1 200 OK\r\n"));
                break;
            }
            Err(error) if Instant::now() < deadline => {
                assert_eq!(error.kind(), ErrorKind::ConnectionReset, "{error}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(error) => panic!("the slot was never freed: {error}"),
        }
    }
    server.shutdown().await;
}

// --- TLS ---

/// A self-signed certificate for `localhost` and 127.0.0.1: (certificate PEM, key PEM, DER
/// for the client's roots).
fn self_signed() -> (String, String, CertificateDer<'static>) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .unwrap();
    (
        certified.cert.pem(),
        certified.signing_key.serialize_pem(),
        certified.cert.der().clone(),
    )
}

async fn tls_server(config: ServerConfig) -> (servers::RunningServer, CertificateDer<'static>) {
    let (cert, key, der) = self_signed();
    let server = server(ServerConfig {
        tls: Some(TlsConfig::from_pem(cert.into_bytes(), key.into_bytes())),
        ..config
    })
    .await;
    (server, der)
}

/// Connects over TLS, trusting only `root`, offering `alpn`.
async fn tls_connect(
    addr: SocketAddr,
    root: &CertificateDer<'static>,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let stream = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    connector
        .connect(name, stream)
        .await
        .expect("TLS handshake")
}

#[tokio::test]
async fn tls_serves_http1_and_says_https_in_its_url() {
    let (server, root) = tls_server(ServerConfig::default()).await;
    assert_eq!(
        server.url(),
        format!("https://{}", server.local_addr()),
        "the url names the scheme"
    );
    let stream = tls_connect(server.local_addr(), &root, &[b"http/1.1"]).await;
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    for _ in 0..2 {
        let request = Request::get("/")
            .header("host", "localhost")
            .body(Full::new(Bytes::new()))
            .unwrap();
        sender.ready().await.unwrap();
        let response = sender.send_request(request).await.unwrap();
        assert_eq!(response.status(), 200);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&body[..], b"hello, world\n");
    }
    assert_eq!(server.requests_with_status(200), 2);
    server.shutdown().await;
}

#[tokio::test]
async fn tls_negotiates_h2_when_offered_and_serves_it() {
    let (server, root) = tls_server(ServerConfig::default()).await;
    let stream = tls_connect(server.local_addr(), &root, &[b"h2", b"http/1.1"]).await;
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(connection);
    let request = Request::get(format!("https://localhost:{}/", server.local_addr().port()))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), hyper::Version::HTTP_2);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"hello, world\n");

    // A client that offers no ALPN at all gets HTTP/1.1.
    let stream = tls_connect(server.local_addr(), &root, &[]).await;
    assert_eq!(stream.get_ref().1.alpn_protocol(), None);
    let response = exchange(
        stream,
        "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    assert!(response.starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(response.ends_with(b"hello, world\n"));
    server.shutdown().await;
}

/// Faults are made for plain TCP, but they work over TLS as well: the cut is in the
/// plaintext, and a reset is a reset.
#[tokio::test]
async fn faults_work_over_tls_too() {
    let (server, root) = tls_server(ServerConfig {
        close_mid_body_rate: 1.0,
        ..ServerConfig::default()
    })
    .await;
    let stream = tls_connect(server.local_addr(), &root, &[b"http/1.1"]).await;
    let response = exchange(stream, &get_request("/")).await.unwrap();
    let (head, body) = split_response(&response);
    assert_eq!(content_length(&head), 13);
    assert_eq!(body, b"hello,");
    server.shutdown().await;

    let (server, root) = tls_server(ServerConfig {
        reset_rate: 1.0,
        ..ServerConfig::default()
    })
    .await;
    let stream = tls_connect(server.local_addr(), &root, &[b"http/1.1"]).await;
    let error = exchange(stream, &get_request("/")).await.unwrap_err();
    assert_eq!(error.kind(), ErrorKind::ConnectionReset, "{error}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_failed_tls_handshake_is_counted_and_does_not_stop_the_server() {
    let (server, root) = tls_server(ServerConfig::default()).await;
    // Plain HTTP to an HTTPS port.
    let _ = raw_exchange(server.local_addr(), &get_request("/")).await;
    let stream = tls_connect(server.local_addr(), &root, &[b"http/1.1"]).await;
    let response = exchange(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let response = String::from_utf8(response).unwrap();
    assert!(
        response.contains("\nloadgen_server_tls_handshake_errors_total 1\n"),
        "{response}"
    );
    server.shutdown().await;
}

// --- validation ---

#[test]
fn bad_fault_knobs_are_rejected_with_a_sentence_naming_them() {
    let cases: Vec<(ServerConfig, ConfigError, &str)> = vec![
        (
            ServerConfig {
                reset_rate: 1.5,
                ..ServerConfig::default()
            },
            ConfigError::FaultRate {
                fault: Fault::Reset,
                rate: 1.5,
            },
            "reset rate must be a fraction between 0 and 1",
        ),
        (
            ServerConfig {
                close_mid_body_rate: -0.1,
                ..ServerConfig::default()
            },
            ConfigError::FaultRate {
                fault: Fault::CloseMidBody,
                rate: -0.1,
            },
            "close-mid-body rate",
        ),
        (
            ServerConfig {
                error_rate: 0.5,
                garbage_rate: 0.6,
                ..ServerConfig::default()
            },
            ConfigError::RatesOverOne(1.1),
            "must add up to at most 1",
        ),
        (
            ServerConfig {
                slow_body: Some(Duration::ZERO),
                ..ServerConfig::default()
            },
            ConfigError::ZeroSlowBody,
            "slow body",
        ),
        (
            ServerConfig {
                max_connections: Some(0),
                ..ServerConfig::default()
            },
            ConfigError::ZeroMaxConnections,
            "max connections must be at least 1",
        ),
    ];
    for (config, expected, message) in cases {
        let error = config.validate().unwrap_err();
        assert_eq!(error, expected);
        assert!(error.to_string().contains(message), "{error}");
    }
    let nan = ServerConfig {
        garbage_rate: f64::NAN,
        ..ServerConfig::default()
    };
    assert!(matches!(
        nan.validate(),
        Err(ConfigError::FaultRate {
            fault: Fault::Garbage,
            ..
        })
    ));
}

#[test]
fn rates_that_add_up_to_one_in_decimal_are_accepted() {
    let config = ServerConfig {
        error_rate: 0.1,
        reset_rate: 0.2,
        garbage_rate: 0.7,
        ..ServerConfig::default()
    };
    assert_eq!(config.validate(), Ok(()));
}

#[tokio::test]
async fn bad_tls_material_is_an_error_naming_where_it_came_from() {
    let (cert, key, _) = self_signed();
    let (_, other_key, _) = self_signed();
    let cases = [
        (
            TlsConfig::from_pem(b"not a certificate".to_vec(), key.clone().into_bytes()),
            "the TLS certificate in the in-memory certificate PEM is not usable",
        ),
        (
            TlsConfig::from_pem(cert.clone().into_bytes(), b"no key here".to_vec()),
            "the TLS private key in the in-memory key PEM is not usable: no private key found",
        ),
        (
            TlsConfig::from_pem(cert.clone().into_bytes(), other_key.into_bytes()),
            "cannot be used together",
        ),
    ];
    for (tls, message) in cases {
        let config = ServerConfig {
            tls: Some(tls),
            ..ServerConfig::default()
        };
        let error = config.validate().unwrap_err();
        assert!(error.to_string().contains(message), "{error}");
        let error = servers::start(config).await.unwrap_err();
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
        assert!(error.to_string().contains(message), "{error}");
    }

    let missing = std::path::Path::new("/nonexistent/loadgen-test-cert.pem");
    let error = TlsConfig::from_files(missing, missing).unwrap_err();
    assert!(
        error.to_string().starts_with(
            "could not read the TLS certificate file /nonexistent/loadgen-test-cert.pem: "
        ),
        "{error}"
    );
}

#[test]
fn tls_config_debug_leaves_the_key_out() {
    let (cert, key, _) = self_signed();
    let debug = format!(
        "{:?}",
        TlsConfig::from_pem(cert.into_bytes(), key.into_bytes())
    );
    assert!(!debug.contains("PRIVATE KEY"), "{debug}");
}
