//! The knobs, observed from outside: injected errors, finite workers, service time, the
//! in-flight gauge, and that `/metrics` is exempt from all of them. Timing checks are lower
//! bounds only (a slow machine can only make them more true).

mod common;

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use common::{get, server, Client};
use servers::{ServerConfig, ServiceTime};

#[tokio::test]
async fn error_rate_half_fails_about_half_of_the_requests() {
    let server = server(ServerConfig {
        error_rate: 0.5,
        ..ServerConfig::default()
    })
    .await;
    let mut client = Client::connect(server.local_addr()).await;
    let mut failed = 0;
    for i in 0..400 {
        // A mix of routes, bodies included: an injected 500 must not break the connection.
        let reply = if i % 2 == 0 {
            client.get("/albums/1").await
        } else {
            client
                .post_json(
                    "/swipe/left/",
                    r#"{"swiper":"1","swipee":"2","comment":"c"}"#,
                )
                .await
        };
        match reply.status {
            500 => {
                failed += 1;
                assert!(reply.message().contains("--error-rate"));
            }
            200 | 201 => {}
            other => panic!("unexpected status {other}: {}", reply.text()),
        }
    }
    assert!((100..=300).contains(&failed), "{failed} of 400 failed");
    assert_eq!(server.requests_with_status(500), failed);
    assert_eq!(server.requests_total(), 400);
    server.shutdown().await;
}

#[tokio::test]
async fn error_rate_zero_and_one_are_exact() {
    for (rate, expected_status) in [(0.0, 200), (1.0, 500)] {
        let server = server(ServerConfig {
            error_rate: rate,
            ..ServerConfig::default()
        })
        .await;
        let mut client = Client::connect(server.local_addr()).await;
        for _ in 0..50 {
            assert_eq!(client.get("/").await.status, expected_status);
        }
        // Scrapes are never failed on purpose.
        assert_eq!(client.get("/metrics").await.status, 200);
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_serves_concurrent_requests_one_after_another() {
    let server = server(ServerConfig {
        service_time: ServiceTime::Fixed(Duration::from_millis(50)),
        workers: Some(1),
        ..ServerConfig::default()
    })
    .await;
    let addr = server.local_addr();
    let started = Instant::now();
    let requests: Vec<_> = (0..4)
        .map(|_| tokio::spawn(async move { Client::connect(addr).await.get("/").await.status }))
        .collect();
    for request in requests {
        assert_eq!(request.await.unwrap(), 200);
    }
    let elapsed = started.elapsed();
    // Four 50 ms services through one worker cannot overlap: at least 200 ms, and the
    // bound leaves room for timer granularity.
    assert!(elapsed >= Duration::from_millis(150), "{elapsed:?}");
    assert_eq!(server.requests_total(), 4);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_time_delays_api_requests_but_not_metrics() {
    let service_time = Duration::from_secs(2);
    let server = server(ServerConfig {
        service_time: ServiceTime::Fixed(service_time),
        workers: Some(1),
        ..ServerConfig::default()
    })
    .await;
    // Occupy the only worker, then scrape: the scrape does not queue behind the request,
    // or it would only be answered once that request was done and see nothing in flight.
    let addr = server.local_addr();
    let started = Instant::now();
    let busy = tokio::spawn(async move { Client::connect(addr).await.get("/").await.status });
    while server.in_flight() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let scrape = get(&server, "/metrics").await;
    assert_eq!(scrape.status, 200);
    assert!(
        scrape.text().contains("loadgen_server_in_flight 1\n"),
        "{}",
        scrape.text()
    );
    assert_eq!(busy.await.unwrap(), 200);
    assert!(started.elapsed() >= service_time);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_counts_requests_queued_for_a_worker() {
    let server = server(ServerConfig {
        service_time: ServiceTime::Fixed(Duration::from_secs(1)),
        workers: Some(1),
        ..ServerConfig::default()
    })
    .await;
    let addr = server.local_addr();
    let requests: Vec<_> = (0..3)
        .map(|_| tokio::spawn(async move { Client::connect(addr).await.get("/albums/1").await }))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.in_flight() < 3 {
        assert!(
            Instant::now() < deadline,
            "in flight stuck at {}",
            server.in_flight()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let metrics = get(&server, "/metrics").await;
    // One in service, two waiting for the worker (unless the first already finished).
    assert!(
        metrics
            .text()
            .contains("loadgen_server_waiting_for_worker 2\n")
            || metrics
                .text()
                .contains("loadgen_server_waiting_for_worker 1\n"),
        "{}",
        metrics.text()
    );
    for request in requests {
        assert_eq!(request.await.unwrap().status, 200);
    }
    assert_eq!(server.in_flight(), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn invalid_knobs_are_refused_at_start() {
    for config in [
        ServerConfig {
            error_rate: 1.5,
            ..ServerConfig::default()
        },
        ServerConfig {
            error_rate: -0.1,
            ..ServerConfig::default()
        },
        ServerConfig {
            error_rate: f64::NAN,
            ..ServerConfig::default()
        },
        ServerConfig {
            workers: Some(0),
            ..ServerConfig::default()
        },
    ] {
        let error = servers::start(config.clone()).await.expect_err("refused");
        assert_eq!(error.kind(), ErrorKind::InvalidInput, "{config:?}");
        assert!(config.validate().is_err());
    }
    assert_eq!(ServerConfig::default().validate(), Ok(()));
}

/// For 200 ms out of every 400 ms nothing is answered: requests arriving then wait for the
/// stall to end, the others are quick.
#[tokio::test]
async fn stalls_hold_requests_until_the_window_ends() {
    let server = server(ServerConfig {
        stall: Some(servers::Stall {
            every: Duration::from_millis(400),
            duration: Duration::from_millis(200),
        }),
        ..ServerConfig::default()
    })
    .await;
    let mut client = Client::connect(server.local_addr()).await;
    let (mut slow, mut fast) = (0, 0);
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1200) {
        let sent = Instant::now();
        assert_eq!(client.get("/").await.status, 200);
        let took = sent.elapsed();
        assert!(
            took <= Duration::from_millis(260),
            "held {took:?}, longer than a stall"
        );
        if took >= Duration::from_millis(20) {
            slow += 1;
        } else {
            fast += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Three periods: about one held request per stall window, many quick ones between.
    assert!((2..=4).contains(&slow), "{slow} held requests");
    assert!(fast > 20, "{fast} quick requests");
}

#[test]
fn the_binary_rejects_a_stall_longer_than_its_period() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_loadgen-server"))
        .args(["--port", "0", "--stall-every", "1s", "--stall-for", "2s"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("a stall of 2s every 1s") && stderr.contains("shorter than --stall-every"),
        "{stderr}"
    );
}

#[test]
fn the_binary_wants_both_stall_flags_or_neither() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_loadgen-server"))
        .args(["--port", "0", "--stall-every", "1s"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--stall-for"));
}

#[tokio::test]
async fn stalls_must_be_shorter_than_their_period_and_not_empty() {
    for (every_ms, for_ms) in [(1000, 2000), (1000, 1000), (1000, 0), (0, 0)] {
        let config = ServerConfig {
            stall: Some(servers::Stall {
                every: Duration::from_millis(every_ms),
                duration: Duration::from_millis(for_ms),
            }),
            ..ServerConfig::default()
        };
        assert!(config.validate().is_err(), "{every_ms} ms / {for_ms} ms");
        let error = servers::start(config).await.expect_err("refused");
        assert_eq!(error.kind(), ErrorKind::InvalidInput);
    }
}

/// Open loop: a request on its own connection every 10 ms for 1.2 s, whatever the answers.
/// Every request arriving inside a window is held until that window ends — all of a
/// window's held requests complete together, the earliest having waited ~200 ms — and the
/// ones between windows are quick.
#[tokio::test]
async fn stalls_hold_every_request_arriving_in_a_window_until_it_ends() {
    let server = server(ServerConfig {
        stall: Some(servers::Stall {
            every: Duration::from_millis(400),
            duration: Duration::from_millis(200),
        }),
        ..ServerConfig::default()
    })
    .await;
    let addr = server.local_addr();
    let origin = Instant::now();
    let mut requests = Vec::new();
    let mut ticks = tokio::time::interval(Duration::from_millis(10));
    while origin.elapsed() < Duration::from_millis(1200) {
        ticks.tick().await;
        requests.push(tokio::spawn(async move {
            let mut client = Client::connect(addr).await;
            let sent = Instant::now();
            assert_eq!(client.get("/").await.status, 200);
            (sent - origin, sent.elapsed())
        }));
    }
    let mut held = Vec::new();
    let mut quick = 0;
    for request in requests {
        let (sent, took) = request.await.unwrap();
        assert!(
            took <= Duration::from_millis(260),
            "held {took:?}, longer than a stall"
        );
        if took >= Duration::from_millis(20) {
            held.push((sent, took));
        } else {
            quick += 1;
        }
    }
    // About half the sends fall in a window (200 of every 400 ms).
    let sends = held.len() + quick;
    assert!(
        (sends * 3 / 10..=sends * 7 / 10).contains(&held.len()),
        "{} of {sends} held",
        held.len()
    );
    assert!(
        held.iter()
            .any(|(_, took)| *took >= Duration::from_millis(150)),
        "nobody waited most of a stall: {held:?}"
    );
    // Held requests are released in bursts, one per window end, ~400 ms apart.
    let mut released: Vec<Duration> = held.iter().map(|(sent, took)| *sent + *took).collect();
    released.sort();
    let bursts = released
        .windows(2)
        .filter(|w| w[1] - w[0] > Duration::from_millis(150))
        .count()
        + 1;
    assert!((2..=3).contains(&bursts), "{bursts} bursts: {released:?}");
    for w in released.windows(2) {
        let gap = w[1] - w[0];
        assert!(
            gap <= Duration::from_millis(40) || gap >= Duration::from_millis(300),
            "releases {:?} and {:?} are neither one burst nor a window apart",
            w[0],
            w[1]
        );
    }
    server.shutdown().await;
}
