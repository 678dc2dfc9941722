//! Checks and chaining end to end, against a server that knows the truth: it hands out ids
//! (every fifth POST answers without one) and counts every GET that asks for an id or token
//! it never issued. So "the GET used the value the POST returned" is checked by the server,
//! and the skipped, failed and passed counts are exact — over HTTP/1.1 and HTTP/2, in a
//! closed model and in the open model (where each chained step carries an intended time).

mod common;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use common::{loadgen_bin, read_rows, rows_matching_summary, run_at, Row};
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use loadgen::stop::StopSignal;

/// The server's ledger: ids issued (with their tokens) and what the client asked for.
#[derive(Default)]
struct Items {
    next: AtomicU64,
    issued: Mutex<HashMap<u64, String>>,
    without_id: AtomicU64,
    good_reads: AtomicU64,
    bad_reads: AtomicU64,
}

impl Items {
    fn answer(&self, method: &hyper::Method, path_and_query: &str) -> Response<Full<Bytes>> {
        let json = |status: StatusCode, body: String| {
            let mut response = Response::new(Full::new(Bytes::from(body)));
            *response.status_mut() = status;
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                "application/json".parse().unwrap(),
            );
            response
        };
        if method == hyper::Method::POST && path_and_query == "/items" {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            if n.is_multiple_of(5) {
                self.without_id.fetch_add(1, Ordering::Relaxed);
                return json(StatusCode::CREATED, r#"{"note":"busy, no id"}"#.into());
            }
            let token = format!("t{n}x");
            self.issued.lock().unwrap().insert(n, token.clone());
            let mut response = json(
                StatusCode::CREATED,
                format!(r#"{{"id":{n},"token":"{token}"}}"#),
            );
            response
                .headers_mut()
                .insert("x-item-id", n.to_string().parse().unwrap());
            return response;
        }
        // GET /items/{id}?token={token} or GET /items/{id}/again
        let rest = path_and_query.strip_prefix("/items/").unwrap_or("");
        let (id, token) = match rest.split_once("?token=") {
            Some((id, token)) => (id, Some(token)),
            None => (rest.strip_suffix("/again").unwrap_or("-"), None),
        };
        let issued = id
            .parse::<u64>()
            .ok()
            .and_then(|id| self.issued.lock().unwrap().get(&id).cloned());
        let good = match (issued, token) {
            (Some(want), Some(token)) => want == token,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if good {
            self.good_reads.fetch_add(1, Ordering::Relaxed);
            json(StatusCode::OK, format!(r#"{{"id":{id}}}"#))
        } else {
            self.bad_reads.fetch_add(1, Ordering::Relaxed);
            json(StatusCode::NOT_FOUND, r#"{"error":"no such item"}"#.into())
        }
    }
}

/// The items server on 127.0.0.1:0, HTTP/1.1 and HTTP/2 (prior knowledge) on one port.
async fn items_server() -> (SocketAddr, Arc<Items>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let items = Arc::new(Items::default());
    let ledger = items.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let items = items.clone();
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
                let response = items.answer(req.method(), target);
                async move { Ok::<_, Infallible>(response) }
            });
            tokio::spawn(async move {
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                let _ = builder
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (addr, ledger)
}

/// POST an item, then read it back by the extracted id and token (JSON Pointer and regex),
/// then again by the id taken from a response header.
const CHAIN: &str = r#"
sequence = ["create", "read", "again"]

[requests.create]
method = "POST"
path = "/items"
expect = [201]
check = [{ header = "content-type", equals = "application/json" }]
extract = { id = "/id", token = { regex = '"token":"([^"]+)"' }, loc = { header = "x-item-id" } }

[requests.read]
path = "/items/{id}?token={token}"
check = [{ json = "/id", name = "read echoes the id" }, { min_body_bytes = 5, max_body_bytes = 64 }]

[requests.again]
path = "/items/{loc}/again"
"#;

fn scenario(dir: &Path, model: &str) -> String {
    let path = dir.join("chain.toml");
    std::fs::write(&path, format!("{CHAIN}\n[model]\n{model}\n")).unwrap();
    path.to_str().unwrap().to_string()
}

fn rows_of<'a>(rows: &'a [Row], op: &str) -> Vec<&'a Row> {
    rows.iter().filter(|r| r.op == op).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chained_requests_use_the_extracted_values_and_skip_when_one_is_missing() {
    for protocol in [None, Some("--http2")] {
        let (addr, items) = items_server().await;
        let dir = tempfile::tempdir().unwrap();
        let file = scenario(
            dir.path(),
            "kind = \"thread-groups\"\ngroups = 1\ngroup_size = 4\ndelay = \"0s\"\niterations = 25",
        );
        let mut flags = vec![file.as_str(), "--no-progress"];
        flags.extend(protocol);
        let url = format!("http://{addr}");
        let (_guard, run_dir, _) = run_at(&url, &flags, StopSignal::new()).await;

        // The server saw only ids and tokens it issued, for every read that was sent.
        assert_eq!(items.bad_reads.load(Ordering::Relaxed), 0, "{protocol:?}");
        assert_eq!(items.without_id.load(Ordering::Relaxed), 20, "{protocol:?}");
        assert_eq!(
            items.good_reads.load(Ordering::Relaxed),
            160,
            "{protocol:?}"
        );

        let (rows, summary) = rows_matching_summary(&run_dir);
        let creates = rows_of(&rows, "POST /items");
        assert_eq!(creates.len(), 100);
        let failed: Vec<&&Row> = creates.iter().filter(|r| r.error.is_some()).collect();
        assert_eq!(failed.len(), 20);
        // The response came (201), but the value to extract did not: a `check` row naming it.
        for row in &failed {
            assert_eq!(row.status, 201);
            assert_eq!(row.error.as_deref(), Some("check"));
            assert_eq!(row.check.as_deref(), Some("extract id"));
        }
        for op in ["GET /items/{id}?token={token}", "GET /items/{loc}/again"] {
            let sent = rows_of(&rows, op);
            assert_eq!(sent.len(), 80, "{op}");
            assert!(sent.iter().all(|r| r.error.is_none() && r.check.is_none()));
        }
        // The dependants of the 20 were skipped, and counted per op, not sent empty.
        assert_eq!(summary["skipped"], 40);
        for op in summary["ops"].as_array().unwrap() {
            let want = if op["op"] == "POST /items" { 0 } else { 20 };
            assert_eq!(op["skipped"], want, "{op}");
        }
        assert_eq!(summary["checks"]["extract id"], 20);
        assert_eq!(summary["checks"]["read echoes the id"], 0);
        assert_eq!(summary["checks"]["body 5..64 bytes"], 0);
        assert_eq!(summary["errors"]["check"], 20);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_check_is_a_check_row_named_after_the_check() {
    let (addr, _items) = items_server().await;
    let dir = tempfile::tempdir().unwrap();
    // A read's body (`{"id":N}`) is at most 12 bytes: a 40-byte minimum fails every read.
    let text = CHAIN.replace("min_body_bytes = 5", "min_body_bytes = 40");
    let path = dir.path().join("strict.toml");
    std::fs::write(
        &path,
        format!("{text}\n[model]\nkind = \"closed\"\nworkers = 1\nrequests = 30\n"),
    )
    .unwrap();
    let url = format!("http://{addr}");
    let flags = [path.to_str().unwrap(), "--no-progress"];
    let (_guard, run_dir, _) = run_at(&url, &flags, StopSignal::new()).await;
    let (rows, summary) = rows_matching_summary(&run_dir);
    let reads = rows_of(&rows, "GET /items/{id}?token={token}");
    // One worker, 10 iterations; the POSTs 0 and 5 have no id, so 8 reads are sent.
    assert_eq!(reads.len(), 8);
    for read in reads {
        assert_eq!(read.status, 200);
        assert_eq!(read.error.as_deref(), Some("check"));
        // The first check passes (the id is echoed); the second names the failure.
        assert_eq!(read.check.as_deref(), Some("body 40..64 bytes"));
    }
    assert_eq!(summary["checks"]["body 40..64 bytes"], 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_model_chains_keep_an_intended_time_for_every_step() {
    let (addr, items) = items_server().await;
    let dir = tempfile::tempdir().unwrap();
    let file = scenario(
        dir.path(),
        "kind = \"open\"\nrate = 100\nduration = \"1s\"\nmax_in_flight = 50",
    );
    let url = format!("http://{addr}");
    let flags = [file.as_str(), "--no-progress"];
    let (_guard, run_dir, _) = run_at(&url, &flags, StopSignal::new()).await;
    assert_eq!(items.bad_reads.load(Ordering::Relaxed), 0);
    let (rows, summary) = rows_matching_summary(&run_dir);
    // Each arrival is one iteration: as many creates as the schedule sent.
    let open = &summary["open"];
    let creates = rows_of(&rows, "POST /items").len() as u64;
    assert_eq!(
        creates + open["dropped"].as_u64().unwrap(),
        open["scheduled"].as_u64().unwrap()
    );
    assert!(creates >= 50, "{creates} iterations");
    // Every row has an intended time; a later step's is when the step before it ended (on
    // the same worker), never after its own start.
    let mut by_worker: HashMap<u32, Vec<&Row>> = HashMap::new();
    for row in &rows {
        assert!(row.intended_ns.is_some(), "{row:?}");
        by_worker.entry(row.worker).or_default().push(row);
    }
    let mut later_steps = 0;
    for rows in by_worker.values_mut() {
        rows.sort_by_key(|r| r.start_ns);
        for pair in rows.windows(2) {
            let (before, step) = (pair[0], pair[1]);
            let intended = step.intended_ns.unwrap();
            assert!(intended <= step.start_ns, "{step:?}");
            if step.op != "POST /items" {
                later_steps += 1;
                assert!(
                    intended >= before.start_ns + before.latency_ns,
                    "{step:?} intended before {before:?} ended"
                );
            }
        }
    }
    assert_eq!(
        later_steps as u64,
        summary["requests"].as_u64().unwrap() - creates
    );
}

#[test]
fn bad_checks_and_chains_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            CHAIN.replace(
                r#"{ json = "/id", name = "read echoes the id" }"#,
                r#"{ json = "id" }"#,
            ),
            "not a JSON Pointer",
        ),
        (
            CHAIN.replace(r#"equals = "application/json""#, r#"matches = "(""#),
            "is not a valid regex",
        ),
        (
            CHAIN.replace("min_body_bytes = 5", "min_body_bytes = 500"),
            "min_body_bytes 500 is above max_body_bytes 64",
        ),
        (
            CHAIN.replace(
                r#"sequence = ["create", "read", "again"]"#,
                r#"sequence = ["read", "create"]"#,
            ),
            "put that request before it in the sequence",
        ),
        (
            CHAIN.replace(
                "[requests.read]",
                "[fields]\nid = { int = [1, 9] }\n\n[requests.read]",
            ),
            "is also declared under [fields]",
        ),
    ];
    for (text, message) in cases {
        let path = dir.path().join("bad.toml");
        std::fs::write(
            &path,
            format!("{text}\n[model]\nkind = \"closed\"\nworkers = 1\nrequests = 3\n"),
        )
        .unwrap();
        let out = dir.path().join("never");
        let output = loadgen_bin()
            .args([
                "run",
                path.to_str().unwrap(),
                "--url",
                "http://127.0.0.1:9/",
            ])
            .args(["--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(message), "{message}: {stderr}");
        assert!(!out.exists());
    }
}

#[test]
fn checks_over_the_reference_servers_albums_api() {
    // The built-in chained albums scenario, shortened, against the reference server: every
    // POST's albumID is extracted and read back, and every check passes.
    let server = common::ServerOnRuntime::start(servers::ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = loadgen_bin()
        .args(["run", "-s", "albums-chained", "--url", &server.url("/")])
        .args([
            "--set",
            "model.startup.iterations=2",
            "--set",
            "model.groups=1",
        ])
        .args(["--set", "model.iterations=5", "--set", "model.delay=\"0s\""])
        .args(["--no-progress", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("Checks      all 4 passed"), "{stdout}");
    let rows = read_rows(&out);
    // (10 × 2 + 10 × 5) iterations of POST + GET.
    assert_eq!(rows.len(), 140);
    assert!(rows.iter().all(|r| r.error.is_none()), "{rows:?}");
}

/// Issue 25: a run where every response was a 500 evaluated no check; the console said
/// "all 4 passed". It says "not evaluated", and run.json `checks_evaluated` is 0.
#[test]
fn checks_are_not_evaluated_when_every_response_is_an_error() {
    let server = common::ServerOnRuntime::start(servers::ServerConfig {
        error_rate: 1.0,
        ..servers::ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = loadgen_bin()
        .args(["run", "-s", "albums-chained", "--url", &server.url("/")])
        .args([
            "--set",
            "model.startup.iterations=1",
            "--set",
            "model.groups=1",
        ])
        .args(["--set", "model.iterations=1", "--set", "model.delay=\"0s\""])
        .args(["--no-progress", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("Checks      not evaluated (no response had an expected status)"),
        "{stdout}"
    );
    assert!(!stdout.contains("passed"), "{stdout}");
    let run_json = common::run_json(&out);
    assert_eq!(run_json["summary"]["checks_evaluated"], 0);
}
