//! `--dashboard`: real runs, a sweep and a capacity search against loadgen-server, their event
//! streams read with a plain HTTP client. The seconds' request counts grow, each carries the
//! verdict as it stands (the engine's, provisional, naming what it lacks), and the final event
//! carries the summary and verdict exactly as run.json has them; a workflow's levels arrive
//! as points as they finish, before the next level's seconds, and its final event is
//! sweep.json or capacity.json as written. The saved page holds the same. (The page itself,
//! in a browser: analysis/tests/test_dashboard_browser.py.)

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Stdio};
use std::time::Duration;

use common::{loadgen_bin, run_json, ServerOnRuntime};
use serde_json::Value;
use servers::ServerConfig;

/// One event of the stream, in the order it came: `history` (its seconds), `second`,
/// `point` (a workflow's finished level) or `final`.
#[derive(Debug)]
struct Event {
    kind: String,
    data: Value,
}

/// Reads `GET /events` until the `final` event; returns every event in order.
fn read_stream(addr: &str) -> Vec<Event> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(stream, "GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut text = String::new();
    let mut buffer = [0u8; 65536];
    let complete = |text: &str| {
        text.split_once("event: final\ndata: ")
            .is_some_and(|(_, last)| last.contains("\n\n"))
    };
    while !complete(&text) {
        let n = stream.read(&mut buffer).unwrap();
        assert!(n > 0, "the stream ended before the final event:\n{text}");
        text.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("text/event-stream"), "{text}");
    let (mut events, mut kind) = (Vec::new(), "second".to_string());
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("event: ") {
            kind = name.to_string();
        } else if let Some(data) = line.strip_prefix("data: ") {
            let data: Value = serde_json::from_str(data).unwrap();
            events.push(Event { kind, data });
            kind = "second".to_string();
        }
    }
    events
}

/// Every second's event (the history's and the live ones), and the final event.
fn seconds_and_final(events: &[Event]) -> (Vec<Value>, Value) {
    let mut seconds = Vec::new();
    for event in events {
        match event.kind.as_str() {
            "history" => seconds.extend(event.data.as_array().unwrap().iter().cloned()),
            "second" => seconds.push(event.data.clone()),
            _ => {}
        }
    }
    let last = events
        .iter()
        .find(|e| e.kind == "final")
        .expect("a final event");
    (seconds, last.data.clone())
}

/// Starts `loadgen ARGS` and returns it with its dashboard's address (printed on stderr).
fn spawn_with_dashboard(args: &[&str]) -> (Child, String) {
    let mut child = loadgen_bin()
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "no dashboard URL");
        if let Some(url) = line.trim().strip_prefix("dashboard at http://") {
            break url.trim_end_matches('/').to_string();
        }
    };
    // Keep reading stderr so the child never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, addr)
}

#[test]
fn the_event_stream_moves_and_ends_with_run_jsons_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (out, page) = (dir.path().join("run"), dir.path().join("page.html"));
    let (page_arg, out_arg) = (page.to_str().unwrap(), out.to_str().unwrap());
    let (mut child, addr) = spawn_with_dashboard(&[
        "run",
        "-c",
        "2",
        "-d",
        "3s",
        "--no-progress",
        "--dashboard",
        "--dashboard-linger",
        "2s",
        "--dashboard-out",
        page_arg,
        "--out",
        out_arg,
    ]);
    // `--dashboard` without an address is a loopback port.
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let (seconds, last) = seconds_and_final(&read_stream(&addr));
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");

    let requests: Vec<u64> = seconds
        .iter()
        .map(|e| e["requests"].as_u64().unwrap())
        .collect();
    assert!(requests.len() >= 2, "{requests:?}");
    assert!(requests.windows(2).all(|w| w[0] < w[1]), "{requests:?}");
    assert!(seconds.iter().all(|e| e["p99_ms"].as_f64().unwrap() > 0.0));
    assert_judged_so_far(&seconds);

    let run = run_json(&out);
    for field in ["summary", "verdict", "client", "thresholds", "run_id"] {
        assert_eq!(last[field], run[field], "{field}");
    }
    assert!(last["summary"]["requests"].as_u64().unwrap() >= *requests.last().unwrap());

    let saved = std::fs::read_to_string(&page).unwrap();
    assert!(saved.contains(&format!("\"run_id\":{}", run["run_id"])));
    assert!(!saved.contains("src=\"http") && !saved.contains("href=\"http"));
}

#[test]
fn a_taken_dashboard_port_is_refused_before_anything_is_written() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    let output = loadgen_bin()
        .args(["run", "-n", "5", "--dashboard", &addr, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("--dashboard {addr}")), "{stderr}");
    assert!(!out.exists());
}

/// The seconds carry the verdict as it stands — the engine's on the rows so far, provisional,
/// naming what it lacks — and the slowest requests so far (once the writer has rows).
fn assert_judged_so_far(seconds: &[Value]) {
    let judged: Vec<&Value> = seconds
        .iter()
        .filter(|s| s.get("verdict").is_some())
        .collect();
    assert!(
        !judged.is_empty(),
        "no second carried a verdict: {seconds:?}"
    );
    for second in &judged {
        let verdict = &second["verdict"];
        assert_eq!(verdict["provisional"], true, "{second}");
        assert!(verdict["cause"].is_string(), "{second}");
        let lacks = verdict["lacks"].as_array().unwrap();
        assert!(lacks
            .iter()
            .any(|l| l.as_str().unwrap().contains("client's CPU")));
        let slowest = second["slowest"].as_array().unwrap();
        assert!(!slowest.is_empty(), "{second}");
        let latency: Vec<u64> = slowest
            .iter()
            .map(|s| s["latency_ns"].as_u64().unwrap())
            .collect();
        assert!(latency.windows(2).all(|w| w[0] >= w[1]), "{latency:?}");
    }
}

/// The points (finished levels) in order, and for each, how many seconds came before it.
fn points_in_order(events: &[Event]) -> Vec<(usize, Value)> {
    let mut seconds = 0;
    let mut points = Vec::new();
    for event in events {
        match event.kind.as_str() {
            "history" => seconds += event.data.as_array().unwrap().len(),
            "second" => seconds += 1,
            "point" => points.push((seconds, event.data.clone())),
            _ => {}
        }
    }
    points
}

/// Issue 48: one page for a whole sweep. Each level's seconds are named by its folder, each
/// finished level is a point before the next level's seconds, and the final event is
/// sweep.json as written.
#[test]
fn a_sweeps_page_shows_each_level_as_it_finishes_and_ends_with_sweep_json() {
    let server = ServerOnRuntime::start(ServerConfig {
        service_time: "2ms".parse().unwrap(),
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let (out, page) = (dir.path().join("sweep"), dir.path().join("sweep.html"));
    let url = server.url("/albums/1");
    let (mut child, addr) = spawn_with_dashboard(&[
        "sweep",
        "--url",
        &url,
        "--levels",
        "1,2",
        "-d",
        "2s",
        "--no-progress",
        "--dashboard",
        "127.0.0.1:0",
        "--dashboard-linger",
        "1s",
        "--dashboard-out",
        page.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let events = read_stream(&addr);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let (seconds, last) = seconds_and_final(&events);
    let sweep: Value =
        serde_json::from_slice(&std::fs::read(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(last["kind"], "sweep");
    assert_eq!(last["sweep"], sweep);

    let runs: Vec<&str> = seconds.iter().filter_map(|s| s["run"].as_str()).collect();
    assert!(
        runs.contains(&"level-0001") && runs.contains(&"level-0002"),
        "{runs:?}"
    );
    let points = points_in_order(&events);
    assert_eq!(points.len(), 2, "{points:?}");
    for ((_, point), level) in points.iter().zip(sweep["levels"].as_array().unwrap()) {
        assert_eq!(point["kind"], "sweep");
        for field in [
            "level",
            "requests",
            "throughput_rps",
            "p99_latency_ns",
            "verdict",
        ] {
            assert_eq!(point["level"][field], level[field], "{field}");
        }
    }
    // Level 1's point came before any second of level 2.
    let first_of_level_2 = seconds
        .iter()
        .position(|s| s["run"] == "level-0002")
        .unwrap();
    assert!(
        points[0].0 <= first_of_level_2,
        "{points:?} vs {first_of_level_2}"
    );
    assert_judged_so_far(&seconds);
    let saved = std::fs::read_to_string(&page).unwrap();
    assert!(saved.contains("\"points\":[{\"kind\":\"sweep\""));
}

/// A short capacity search against 2 workers × 10 ms (200 req/s), served on a page.
const QUICK_SEARCH: [&str; 22] = [
    "--slo",
    "p99<50ms",
    "--start-rate",
    "100",
    "--level-duration",
    "2500ms",
    "--warmup",
    "300ms",
    "--cool-down",
    "0s",
    "--tolerance",
    "50%",
    "--confirm-levels",
    "1",
    "--budget",
    "14s",
    "--allow-unconverged",
    "--no-progress",
    "--dashboard",
    "--dashboard-linger",
    "1s",
    "--json",
];

/// Issue 48: a capacity search's page. Its calibration's and levels' seconds, each level as a
/// point as the search decides it (offered vs achieved, p99, pass or fail and why), and the
/// final event is capacity.json as written; each point is its level in capacity.json.
#[test]
fn a_capacity_searchs_levels_appear_as_they_finish_and_the_final_is_capacity_json() {
    let server = ServerOnRuntime::start(ServerConfig {
        service_time: "10ms".parse().unwrap(),
        workers: Some(2),
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("capacity");
    let url = server.url("/albums/1");
    let mut args = vec!["capacity", "--url", &url, "--out", out.to_str().unwrap()];
    args.extend(QUICK_SEARCH);
    let (mut child, addr) = spawn_with_dashboard(&args);
    let events = read_stream(&addr);
    let status = child.wait().unwrap();
    assert!(matches!(status.code(), Some(0 | 99)), "{status}");
    let (seconds, last) = seconds_and_final(&events);
    let capacity: Value =
        serde_json::from_slice(&std::fs::read(out.join("capacity.json")).unwrap()).unwrap();
    assert_eq!(last["kind"], "capacity");
    assert_eq!(last["capacity"], capacity);

    let levels = capacity["levels"].as_array().unwrap();
    let points = points_in_order(&events);
    assert!(levels.len() >= 2, "{levels:?}");
    assert_eq!(points.len(), levels.len(), "{points:?}");
    for ((_, point), level) in points.iter().zip(levels) {
        for field in [
            "step",
            "offered_rps",
            "achieved_rps",
            "latency",
            "passed",
            "reasons",
        ] {
            assert_eq!(point["level"][field], level[field], "{field}");
        }
        let run = std::path::Path::new(level["run_dir"].as_str().unwrap());
        let name = run.file_name().unwrap().to_str().unwrap();
        assert!(
            seconds.iter().any(|s| s["run"] == name),
            "no second of {name}"
        );
    }
    // Each level's point came as it finished: before the next level's first second.
    for (i, (before, _)) in points.iter().enumerate().skip(1) {
        let run = std::path::Path::new(levels[i]["run_dir"].as_str().unwrap());
        let name = run.file_name().unwrap().to_str().unwrap();
        let first = seconds.iter().position(|s| s["run"] == name).unwrap();
        assert!(
            points[i - 1].0 <= first && first < *before,
            "level {i}: {points:?}"
        );
    }
    assert!(
        seconds.iter().any(|s| s["run"] == "calibration")
            || capacity["calibration"]["run_dir"].is_null()
    );
    let level_lacks = seconds
        .iter()
        .filter_map(|s| s["verdict"]["lacks"].as_array());
    assert!(level_lacks
        .flatten()
        .any(|l| l.as_str().unwrap().contains("SLOs")));
}

/// A sweep's taken `--dashboard` port is bad input before its first level runs.
#[test]
fn a_sweeps_taken_dashboard_port_is_refused_before_the_first_level() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    let output = loadgen_bin()
        .args([
            "sweep",
            "--levels",
            "1,2",
            "-n",
            "5",
            "--dashboard",
            &addr,
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("--dashboard {addr}")), "{stderr}");
    assert!(!out.exists());
}

/// With `--server-metrics`, the seconds carry the server's figures as the verdict reads them
/// from the scrapes so far (run.json's `verdict.server` at the end), and with `--trace` the
/// slowest requests carry their trace ids.
#[test]
fn the_page_shows_the_servers_scraped_figures_and_the_slowest_requests_trace_ids() {
    let server = ServerOnRuntime::start(ServerConfig {
        service_time: "2ms".parse().unwrap(),
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let (url, metrics) = (server.url("/albums/1"), server.url("/metrics"));
    let (mut child, addr) = spawn_with_dashboard(&[
        "run",
        "--url",
        &url,
        "-c",
        "2",
        "-d",
        "3s",
        "--server-metrics",
        &metrics,
        "--trace",
        "--no-progress",
        "--dashboard",
        "--dashboard-linger",
        "1s",
        "--out",
        out.to_str().unwrap(),
    ]);
    let (seconds, last) = seconds_and_final(&read_stream(&addr));
    assert!(child.wait().unwrap().success());
    let run = run_json(&out);
    assert_eq!(last["verdict"], run["verdict"]);
    let server_seconds: Vec<&Value> = seconds.iter().filter_map(|s| s.get("server")).collect();
    assert!(!server_seconds.is_empty(), "{seconds:?}");
    let final_server = &run["verdict"]["server"];
    for server in &server_seconds {
        let scrapes = server["scrapes"].as_u64().unwrap();
        assert!(
            scrapes <= final_server["scrapes"].as_u64().unwrap(),
            "{server}"
        );
    }
    // The same reduction of the same scrapes: what the end has, the seconds had so far (a
    // CPU rate needs two scrapes, so not every second has it).
    for field in ["service_cpu_cores", "workers", "queue"] {
        let seen = server_seconds.iter().any(|s| !s[field].is_null());
        assert_eq!(
            seen,
            !final_server[field].is_null(),
            "{field}: {server_seconds:?}"
        );
    }
    let traced = seconds
        .iter()
        .filter_map(|s| s["slowest"].as_array())
        .flatten();
    let ids: Vec<&str> = traced.filter_map(|s| s["trace_id"].as_str()).collect();
    assert!(!ids.is_empty(), "{seconds:?}");
    assert!(ids
        .iter()
        .all(|id| id.len() == 32 && id.chars().all(|c| c.is_ascii_hexdigit())));
}
