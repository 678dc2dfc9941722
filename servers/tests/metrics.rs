//! `GET /metrics`: Prometheus text with per-route, per-status counters that match what was
//! sent, and the in-process counters agree with it.

mod common;

use bytes::Bytes;
use common::{default_server, Client};
use hyper::Method;

fn sample(text: &str, series: &str) -> Option<u64> {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

// One scenario of requests, then every counter they should have moved.
#[allow(clippy::too_many_lines)]
#[tokio::test]
async fn counters_match_the_requests_sent() {
    let server = default_server().await;
    let mut client = Client::connect(server.local_addr()).await;
    for _ in 0..5 {
        assert_eq!(client.get("/").await.status, 200);
    }
    for id in 0..3 {
        assert_eq!(client.get(&format!("/albums/{id}")).await.status, 200);
    }
    assert_eq!(client.get("/albums/bad.id").await.status, 400);
    for _ in 0..2 {
        let reply = client
            .post_json(
                "/skiers/1/seasons/2019/days/1/skiers/1",
                r#"{"time":1,"liftID":2}"#,
            )
            .await;
        assert_eq!(reply.status, 201);
    }
    assert_eq!(client.get("/missing").await.status, 404);
    let reply = client.send(Method::DELETE, "/", &[], Bytes::new()).await;
    assert_eq!(reply.status, 405);
    assert_eq!(server.requests_total(), 13);
    assert_eq!(server.requests_with_status(200), 8);
    assert_eq!(server.requests_with_status(201), 2);
    assert_eq!(server.requests_with_status(500), 0);

    let scrape = client.get("/metrics").await;
    assert_eq!(scrape.status, 200);
    assert!(scrape
        .content_type()
        .starts_with("text/plain; version=0.0.4"));
    let text = scrape.text();
    for (series, value) in [
        (
            r#"loadgen_server_requests_total{route="root",status="200"}"#,
            5,
        ),
        (
            r#"loadgen_server_requests_total{route="albums_get",status="200"}"#,
            3,
        ),
        (
            r#"loadgen_server_requests_total{route="albums_get",status="400"}"#,
            1,
        ),
        (
            r#"loadgen_server_requests_total{route="skiers_post",status="201"}"#,
            2,
        ),
        (
            r#"loadgen_server_requests_total{route="not_found",status="404"}"#,
            1,
        ),
        (
            r#"loadgen_server_requests_total{route="root",status="405"}"#,
            1,
        ),
        ("loadgen_server_in_flight", 0),
        ("loadgen_server_connections_open", 1),
        ("loadgen_server_connections_accepted_total", 1),
    ] {
        assert_eq!(sample(text, series), Some(value), "{series} in\n{text}");
    }
    for line in [
        "# TYPE loadgen_server_requests_total counter",
        "# TYPE loadgen_server_in_flight gauge",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    assert!(text.contains("# HELP loadgen_server_requests_total "));
    assert!(text.contains("# HELP loadgen_server_in_flight "));
    // Series that never happened are not listed.
    assert!(!text.contains("status=\"500\""), "{text}");

    // A scrape counts under route="metrics" in the exposition but is not an API request.
    let again = client.get("/metrics").await;
    assert_eq!(
        sample(
            again.text(),
            r#"loadgen_server_requests_total{route="metrics",status="200"}"#
        ),
        Some(1)
    );
    assert_eq!(server.requests_total(), 13);
    server.shutdown().await;
}
