//! Shutdown: idle keep-alive connections close, requests already in service finish within
//! the grace period, and a request that would outlast it does not hold shutdown hostage.

mod common;

use std::time::{Duration, Instant};

use common::{default_server, server, Client};
use servers::{ServerConfig, ServiceTime};
use tokio::net::TcpStream;

#[tokio::test]
async fn idle_connections_do_not_delay_shutdown_and_the_port_is_closed_after() {
    let server = default_server().await;
    let addr = server.local_addr();
    let mut client = Client::connect(addr).await;
    assert_eq!(client.get("/").await.status, 200);
    let started = Instant::now();
    server.shutdown().await;
    assert!(
        started.elapsed() < servers::DEFAULT_SHUTDOWN_GRACE,
        "{:?}",
        started.elapsed()
    );
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "still accepting after shutdown"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_service_is_answered_before_shutdown_completes() {
    let server = server(ServerConfig {
        service_time: ServiceTime::Fixed(Duration::from_millis(200)),
        ..ServerConfig::default()
    })
    .await;
    let addr = server.local_addr();
    let request = tokio::spawn(async move { Client::connect(addr).await.get("/").await.status });
    while server.in_flight() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.shutdown_with_grace(Duration::from_secs(10)).await;
    assert_eq!(request.await.unwrap(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_longer_than_the_grace_period_is_cut_off() {
    let server = server(ServerConfig {
        service_time: ServiceTime::Fixed(Duration::from_secs(60)),
        ..ServerConfig::default()
    })
    .await;
    let addr = server.local_addr();
    let request = tokio::spawn(async move {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake::<
            _,
            http_body_util::Empty<bytes::Bytes>,
        >(hyper_util::rt::TokioIo::new(stream))
        .await
        .unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::get("/")
            .header("host", "x")
            .body(Default::default());
        sender.send_request(request.unwrap()).await.is_err()
    });
    while server.in_flight() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.shutdown_with_grace(Duration::from_millis(100)).await;
    assert!(
        request.await.unwrap(),
        "the cut-off request has no response"
    );
}
