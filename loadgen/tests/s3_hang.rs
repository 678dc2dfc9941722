//! An S3 endpoint that hangs never holds a run hostage (issue 27). Before, segments uploaded
//! one at a time with a 60 s timeout each: a 4 s run took 244 s and ignored SIGTERM and two
//! Ctrl-Cs. Here a stand-in S3 on 127.0.0.1 lists the bucket and takes the first run.json,
//! then accepts every later upload and never answers. The run must end within its
//! `--upload-timeout` with exit 1, or at once on a signal with 130 / 143, keeping the whole
//! run in the staging directory and saying how to upload it later; `loadgen upload` then
//! puts it where the run would have, against the same stand-in answering again.
//!
//! Issue 36: the same stand-in refusing segments (500 for `requests/part-*` only) shows that
//! `loadgen upload` keeps run.json back when a file before it did not arrive, and says what
//! failed and the command to retry; hanging, it shows that a signal speaks of the upload.

mod common;

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{loadgen_bin, read_rows, run_json, ServerOnRuntime};
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// The stand-in: answers the first `answered` PUTs (recording their keys), hangs on the rest;
/// with `refuse_parts` set, answers 500 to every segment instead. `puts` counts PUTs received.
struct StubS3 {
    url: String,
    answered: Arc<AtomicUsize>,
    keys: Arc<Mutex<Vec<String>>>,
    refuse_parts: Arc<AtomicBool>,
    puts: Arc<AtomicUsize>,
}

/// What the stand-in shares with each connection.
#[derive(Clone)]
struct Behaviour {
    answered: Arc<AtomicUsize>,
    keys: Arc<Mutex<Vec<String>>>,
    refuse_parts: Arc<AtomicBool>,
    puts: Arc<AtomicUsize>,
}

const LIST: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
    <ListBucketResult><Name>bucket</Name><Prefix></Prefix><KeyCount>0</KeyCount>\
    <MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>";

const INTERNAL_ERROR: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
    <Error><Code>InternalError</Code><Message>We encountered an internal error.</Message></Error>";

async fn answer(
    request: Request<hyper::body::Incoming>,
    Behaviour {
        answered,
        keys,
        refuse_parts,
        puts,
    }: Behaviour,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.method() != hyper::Method::PUT {
        return Ok(Response::new(Full::new(Bytes::from_static(
            LIST.as_bytes(),
        ))));
    }
    puts.fetch_add(1, Ordering::SeqCst);
    if refuse_parts.load(Ordering::SeqCst) && request.uri().path().contains("/requests/part-") {
        return Ok(Response::builder()
            .status(500)
            .body(Full::new(Bytes::from_static(INTERNAL_ERROR.as_bytes())))
            .unwrap());
    }
    let take = answered
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if !take {
        // Accepted, never answered: the connection stays open until the client gives up.
        std::future::pending::<()>().await;
    }
    let key = request.uri().path().to_string();
    let _ = request.into_body().collect().await;
    keys.lock().unwrap().push(key);
    Ok(Response::builder()
        .header("etag", "\"0\"")
        .body(Full::new(Bytes::new()))
        .unwrap())
}

impl StubS3 {
    fn start(runtime: &tokio::runtime::Runtime, answered: usize) -> StubS3 {
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let behaviour = Behaviour {
            answered: Arc::new(AtomicUsize::new(answered)),
            keys: Arc::new(Mutex::new(Vec::new())),
            refuse_parts: Arc::new(AtomicBool::new(false)),
            puts: Arc::new(AtomicUsize::new(0)),
        };
        let shared = behaviour.clone();
        runtime.spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let behaviour = behaviour.clone();
                let service =
                    hyper::service::service_fn(move |request| answer(request, behaviour.clone()));
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        StubS3 {
            url,
            answered: shared.answered,
            keys: shared.keys,
            refuse_parts: shared.refuse_parts,
            puts: shared.puts,
        }
    }

    /// `loadgen ARGS…` pointed at this stand-in, staging under `tmp`.
    fn loadgen(&self, tmp: &Path, args: &[&str]) -> Child {
        loadgen_bin()
            .args(args)
            .env("AWS_ENDPOINT_URL", &self.url)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_REGION", "us-east-1")
            .env("TMPDIR", tmp)
            .spawn()
            .unwrap()
    }
}

/// Waits for `child`, killing it and failing after `limit`; returns its output and how long
/// it took from `since`.
fn finish_within(mut child: Child, limit: Duration, since: Instant) -> (Output, Duration) {
    while child.try_wait().unwrap().is_none() {
        if since.elapsed() > limit {
            let _ = child.kill();
            panic!("still running after {limit:?}: the upload held the run");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = since.elapsed();
    (child.wait_with_output().unwrap(), took)
}

/// The one staging directory under `tmp`.
fn staging(tmp: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("loadgen-")
        })
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

/// The run is all there, locally, and the output says where and how to upload it.
fn assert_kept(tmp: &Path, output: &Output) -> PathBuf {
    let dir = staging(tmp);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let hint = format!("loadgen upload {} s3://bucket/run", dir.display());
    assert!(text.contains(&hint), "no `{hint}` in:\n{text}");
    let rows = read_rows(&dir);
    assert!(!rows.is_empty());
    assert_eq!(run_json(&dir)["summary"]["requests"], rows.len() as u64);
    dir
}

fn run_args<'a>(target: &'a str, upload_timeout: &'a str) -> Vec<&'a str> {
    vec![
        "run",
        "--url",
        target,
        "-c",
        "2",
        "-d",
        "2s",
        "--segment-interval",
        "300ms",
        "--no-progress",
        "--upload-timeout",
        upload_timeout,
        "--out",
        "s3://bucket/run",
    ]
}

#[test]
fn regression_a_hanging_store_costs_the_upload_timeout_then_exit_1_and_upload_later_works() {
    let server = ServerOnRuntime::start(servers::ServerConfig::default());
    let target = server.url("/");
    let tmp = tempfile::tempdir().unwrap();
    let s3 = StubS3::start(&server.runtime, 1);
    let started = Instant::now();
    let child = s3.loadgen(tmp.path(), &run_args(&target, "3s"));
    let (output, took) = finish_within(child, Duration::from_secs(60), started);
    eprintln!("a 2 s run against a hanging store took {took:?}");
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let dir = assert_kept(tmp.path(), &output);
    assert!(String::from_utf8_lossy(&output.stdout).contains("--upload-timeout 3s"));

    // The store answers again: `loadgen upload` puts the run where the run would have.
    s3.answered.store(usize::MAX, Ordering::SeqCst);
    s3.keys.lock().unwrap().clear();
    let dir_arg = dir.to_str().unwrap();
    let child = s3.loadgen(tmp.path(), &["upload", dir_arg, "s3://bucket/run"]);
    let (output, _) = finish_within(child, Duration::from_secs(60), Instant::now());
    assert!(output.status.success(), "{output:?}");
    let keys = s3.keys.lock().unwrap().clone();
    let run_id = run_json(&dir)["run_id"].as_str().unwrap().to_string();
    let prefix = format!("/bucket/run/{run_id}/");
    assert!(keys.iter().all(|k| k.starts_with(&prefix)), "{keys:?}");
    let parts = keys
        .iter()
        .filter(|k| k.contains("/requests/part-"))
        .count();
    assert_eq!(parts, common::segments(&dir).len());
    assert_eq!(
        keys.last().unwrap(),
        &format!("{prefix}run.json"),
        "run.json goes last"
    );
    assert!(keys.contains(&format!("{prefix}client-metrics.parquet")));
}

#[test]
fn regression_a_signal_during_the_upload_stops_it_at_once_and_exits_as_signalled() {
    let server = ServerOnRuntime::start(servers::ServerConfig::default());
    let target = server.url("/");
    for (signal, code) in [("-TERM", 143), ("-INT", 130)] {
        let tmp = tempfile::tempdir().unwrap();
        let s3 = StubS3::start(&server.runtime, 1);
        let started = Instant::now();
        let child = s3.loadgen(tmp.path(), &run_args(&target, "10m"));
        // The final run.json is written locally just before the upload wait begins.
        while !tmp
            .path()
            .read_dir()
            .unwrap()
            .any(|e| e.unwrap().path().join("run.json").exists())
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the run never finished"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        let status = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let signalled = Instant::now();
        let (output, took) = finish_within(child, Duration::from_secs(20), signalled);
        eprintln!("{signal}: exited {took:?} after the signal");
        assert_eq!(output.status.code(), Some(code), "{output:?}");
        assert_kept(tmp.path(), &output);
    }
}

/// Issue 27: a TMPDIR that cannot hold the staging directory told the user to change --out.
#[test]
fn regression_a_bad_tmpdir_names_tmpdir_not_out() {
    let server = ServerOnRuntime::start(servers::ServerConfig::default());
    let target = server.url("/");
    let tmp = tempfile::tempdir().unwrap();
    let not_a_dir = tmp.path().join("a-file");
    std::fs::write(&not_a_dir, "").unwrap();
    let s3 = StubS3::start(&server.runtime, usize::MAX);
    let child = s3.loadgen(&not_a_dir, &run_args(&target, "3s"));
    let (output, _) = finish_within(child, Duration::from_secs(60), Instant::now());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("set TMPDIR to a writable directory"),
        "{stderr}"
    );
    assert!(!stderr.contains("with --out"), "{stderr}");
}

/// A run kept locally (`--out DIR`), to be uploaded.
fn local_run(target: &str, dir: &Path) {
    let output = loadgen_bin()
        .args([
            "run",
            "--url",
            target,
            "-c",
            "2",
            "-n",
            "100",
            "--no-progress",
            "--out",
        ])
        .arg(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
}

/// Issue 36: with a store answering 500 to segments only, `loadgen upload` exited 1 but left a
/// run.json saying `completed` in the bucket, without rows. Now run.json stays back, the
/// message names the segment and the command to retry, and that command then works.
#[test]
fn regression_upload_keeps_run_json_back_when_a_segment_did_not_arrive() {
    let server = ServerOnRuntime::start(servers::ServerConfig::default());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    local_run(&server.url("/"), &dir);
    let s3 = StubS3::start(&server.runtime, usize::MAX);
    s3.refuse_parts.store(true, Ordering::SeqCst);
    let dir_arg = dir.to_str().unwrap();
    let child = s3.loadgen(tmp.path(), &["upload", dir_arg, "s3://bucket/run"]);
    let (output, _) = finish_within(child, Duration::from_secs(120), Instant::now());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let keys = s3.keys.lock().unwrap().clone();
    assert!(!keys.iter().any(|k| k.ends_with("/run.json")), "{keys:?}");
    for needle in [
        "requests/part-00000.parquet",
        "run.json held back",
        "InternalError (We encountered an internal error.)",
        &format!("retry with `loadgen upload {dir_arg} s3://bucket/run`"),
    ] {
        assert!(stderr.contains(needle), "no `{needle}` in: {stderr}");
    }
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    s3.refuse_parts.store(false, Ordering::SeqCst);
    let child = s3.loadgen(tmp.path(), &["upload", dir_arg, "s3://bucket/run"]);
    let (output, _) = finish_within(child, Duration::from_secs(60), Instant::now());
    assert!(output.status.success(), "{output:?}");
    let keys = s3.keys.lock().unwrap().clone();
    assert!(keys.last().unwrap().ends_with("/run.json"), "{keys:?}");
    assert!(keys
        .iter()
        .any(|k| k.ends_with("/requests/part-00000.parquet")));
}

/// Issue 36: a signal during `loadgen upload` said "letting requests in flight finish"; it
/// speaks of the upload, and the upload ends at once as signalled.
#[test]
fn regression_a_signal_during_loadgen_upload_speaks_of_the_upload() {
    let server = ServerOnRuntime::start(servers::ServerConfig::default());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    local_run(&server.url("/"), &dir);
    let s3 = StubS3::start(&server.runtime, 0);
    let child = s3.loadgen(
        tmp.path(),
        &["upload", dir.to_str().unwrap(), "s3://bucket/run"],
    );
    let started = Instant::now();
    while s3.puts.load(Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no upload began"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let (output, _) = finish_within(child, Duration::from_secs(20), Instant::now());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(143), "{stderr}");
    assert!(stderr.contains("stopping the upload"), "{stderr}");
    assert!(!stderr.contains("requests in flight"), "{stderr}");
    assert!(stderr.contains("retry with `loadgen upload"), "{stderr}");
}
