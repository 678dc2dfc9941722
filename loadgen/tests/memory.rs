//! Memory per worker is bounded by design (issue 27): a size-only check counts the body as it
//! streams past instead of keeping it. The bound is on the real binary's peak resident set
//! (`VmHWM` in `/proc/PID/status`, read until it exits): 200 workers reading 1.2 MB bodies
//! with `min_body_bytes = 1` stay under 100 MB (the issue asked for 150 MB; measured here
//! 40 MB, a debug build). Before the fix every worker kept up to 1 MiB of its last body: 150 MB
//! here, 229 MB in the run. This is a memory bound, not a timing claim: how fast the
//! run goes does not matter.

mod common;

use std::convert::Infallible;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{loadgen_bin, read_rows};
use http_body_util::Full;
use hyper::Response;
use hyper_util::rt::TokioIo;

const BODY_BYTES: usize = 1_200_000;
const WORKERS: usize = 200;
const REQUESTS: usize = 2000;
/// The documented bound (docs/scenarios.md, "Checks and chaining").
const MAX_RSS_BYTES: u64 = 100_000_000;

/// Answers every request with the same 1.2 MB body (shared, not copied per response).
async fn big_body_server() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let body = Bytes::from(vec![b'x'; BODY_BYTES]);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let body = body.clone();
            let service = hyper::service::service_fn(move |_| {
                let body = body.clone();
                async move { Ok::<_, Infallible>(Response::new(Full::new(body))) }
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    url
}

/// The peak resident set of process `pid` so far, from `VmHWM`; `None` once it is gone.
fn peak_rss_bytes(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[test]
fn regression_a_size_check_keeps_no_body_200_workers_on_1_2_mb_stay_under_150_mb() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = runtime.block_on(big_body_server());
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("big.toml");
    std::fs::write(
        &scenario,
        format!("sequence = [\"get\"]\n[requests.get]\npath = \"/\"\ncheck = [{{ min_body_bytes = 1 }}]\n\
         [model]\nkind = \"closed\"\nworkers = {WORKERS}\nrequests = {REQUESTS}\n"),
    )
    .unwrap();
    let out = dir.path().join("run");
    let mut child = loadgen_bin()
        .args(["run", "--url", &url])
        .arg(&scenario)
        .args(["--no-progress", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the run did not end in 120 s");
        }
        peak = peak_rss_bytes(pid).unwrap_or(peak).max(peak);
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let rows = read_rows(&out);
    assert_eq!(rows.len(), REQUESTS);
    assert!(rows.iter().all(|r| r.error.is_none()), "a failed row");
    assert!(rows.iter().all(|r| r.bytes_received > BODY_BYTES as u64));
    eprintln!(
        "peak RSS {:.1} MB for {WORKERS} workers on {BODY_BYTES}-byte bodies",
        peak as f64 / 1e6
    );
    assert!(peak > 0, "never read the child's RSS");
    assert!(
        peak < MAX_RSS_BYTES,
        "peak RSS {peak} bytes is over the documented bound of {MAX_RSS_BYTES}"
    );
}
