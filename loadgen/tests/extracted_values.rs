//! Values taken from responses are data, end to end (issue 27): a server under test that
//! returns a hostile id cannot choose the path or query of the next request, and one that
//! returns a huge id fails the request that extracted it instead of bloating every later one.
//! The server records the request targets it received, byte for byte.

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use common::{rows_matching_summary, run_at, Row};
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use loadgen::stop::StopSignal;

const HOSTILE: &str = "a/../../admin?delete=1 x#frag";

/// POST /items answers `{"id": HOSTILE}` (or, for `/items?big`, a 9 KiB id); every other
/// request is answered 200 and its target recorded.
async fn hostile_server() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let ledger = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
                let body = match (req.method().as_str(), target) {
                    ("POST", "/items") => serde_json::json!({ "id": HOSTILE }).to_string(),
                    ("POST", _) => serde_json::json!({ "id": "x".repeat(9 << 10) }).to_string(),
                    _ => {
                        seen.lock().unwrap().push(target.to_string());
                        "{}".to_string()
                    }
                };
                async move { Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body)))) }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (url, ledger)
}

fn scenario(dir: &std::path::Path, create_path: &str, read_path: &str) -> String {
    let text = format!(
        r#"
sequence = ["create", "read"]
[requests.create]
method = "POST"
path = "{create_path}"
extract = {{ id = "/id" }}
[requests.read]
path = "{read_path}"
[model]
kind = "closed"
workers = 1
requests = 10
"#
    );
    let path = dir.join("chain.toml");
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// Runs the create-then-read chain against the hostile server: the rows, the summary and the
/// request targets the server saw for reads.
async fn run_chain(
    create_path: &str,
    read_path: &str,
) -> (Vec<Row>, serde_json::Value, Vec<String>) {
    let (url, seen) = hostile_server().await;
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(dir.path(), create_path, read_path);
    let (_guard, run_dir, _) = run_at(&url, &[&file, "--no-progress"], StopSignal::new()).await;
    let (rows, summary) = rows_matching_summary(&run_dir);
    let seen = seen.lock().unwrap().clone();
    (rows, summary, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_an_extracted_value_cannot_choose_the_next_path_or_query() {
    let (rows, _, seen) = run_chain("/items", "/items/{id}?q={id}&page=2").await;
    assert_eq!(rows.len(), 10);
    assert_eq!(seen.len(), 5, "{seen:?}");
    for target in &seen {
        assert_eq!(
            target,
            "/items/a%2F..%2F..%2Fadmin%3Fdelete=1%20x%23frag\
             ?q=a%2F..%2F..%2Fadmin%3Fdelete%3D1%20x%23frag&page=2"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_opts_out_and_trusts_the_server() {
    let (_, _, seen) = run_chain("/items", "/{id|raw}").await;
    // As written: the server's value became the path (the fragment is not sent).
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|t| t == "/a/../../admin?delete=1%20x"),
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn regression_an_extracted_value_over_8_kib_fails_as_a_check() {
    let (rows, summary, seen) = run_chain("/items?big", "/items/{id}").await;
    assert!(seen.is_empty(), "a read was sent: {seen:?}");
    assert_eq!(rows.len(), 5);
    assert!(rows
        .iter()
        .all(|r| r.error.as_deref() == Some("check") && r.check.as_deref() == Some("extract id")));
    assert_eq!(summary["skipped"], 5);
}
