//! `--dashboard`: a real run against the embedded loadgen-server, its event stream read with
//! a plain HTTP client. The seconds' request counts grow, and the final event carries the
//! summary and verdict exactly as run.json has them; the saved page holds the same. (The
//! page itself, in a browser: analysis/tests/test_dashboard_browser.py.)

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

use common::{loadgen_bin, run_json};
use serde_json::Value;

/// Reads `GET /events` until the `final` event; returns every second's event and the final.
fn read_events(addr: &str) -> (Vec<Value>, Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
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
    let (mut seconds, mut last, mut kind) = (Vec::new(), None, "message");
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("event: ") {
            kind = if name == "history" {
                "history"
            } else {
                "final"
            };
        } else if let Some(data) = line.strip_prefix("data: ") {
            let value: Value = serde_json::from_str(data).unwrap();
            match kind {
                "history" => seconds.extend(value.as_array().unwrap().iter().cloned()),
                "final" => last = Some(value),
                _ => seconds.push(value),
            }
            kind = "message";
        }
    }
    (seconds, last.expect("a final event"))
}

#[test]
fn the_event_stream_moves_and_ends_with_run_jsons_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (out, page) = (dir.path().join("run"), dir.path().join("page.html"));
    let mut child = loadgen_bin()
        .args(["run", "-c", "2", "-d", "3s", "--no-progress", "--dashboard"])
        .args(["--dashboard-linger", "2s", "--dashboard-out"])
        .arg(&page)
        .arg("--out")
        .arg(&out)
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
    // `--dashboard` without an address is a loopback port.
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    let (seconds, last) = read_events(&addr);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");

    let requests: Vec<u64> = seconds
        .iter()
        .map(|e| e["requests"].as_u64().unwrap())
        .collect();
    assert!(requests.len() >= 2, "{requests:?}");
    assert!(requests.windows(2).all(|w| w[0] < w[1]), "{requests:?}");
    assert!(seconds.iter().all(|e| e["p99_ms"].as_f64().unwrap() > 0.0));

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
