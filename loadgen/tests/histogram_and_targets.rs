//! The `loadgen` binary against a real `loadgen-server`: the console's latency histogram
//! (issue 38 part 5) and a vegeta targets file (part 6).

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{loadgen_bin, read_rows, run_json, ServerOnRuntime};
use servers::ServerConfig;

/// The counts of the histogram's lines (`≤ EDGE  COUNT  BARS`) on the console.
fn histogram_counts(stdout: &str) -> Vec<u64> {
    stdout
        .lines()
        .skip_while(|l| !l.contains("Latency histogram"))
        .skip(1)
        .take_while(|l| l.trim_start().starts_with('≤'))
        .map(|l| l.split_whitespace().nth(2).unwrap().parse().unwrap())
        .collect()
}

#[test]
fn the_console_histogram_counts_every_request_and_no_histogram_hides_it() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    for (name, extra) in [
        ("shown", None),
        ("hidden", Some("--no-histogram")),
        ("json", Some("--json")),
    ] {
        let out = dir.path().join(name);
        let mut command = loadgen_bin();
        command.args(["run", "--url", &server.url("/"), "-c", "4", "-n", "400"]);
        command.args(["--out", out.to_str().unwrap()]).args(extra);
        let output = command.output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        let counts = histogram_counts(&stdout);
        if extra.is_some() {
            assert!(!stdout.contains("Latency histogram"), "{stdout}");
            if extra == Some("--json") {
                let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
                assert!(
                    json["summary"].get("latency_histogram").is_none(),
                    "{stdout}"
                );
            }
            continue;
        }
        assert!(counts.len() > 1, "{stdout}");
        let requests = run_json(&out)["summary"]["requests"].as_u64().unwrap();
        assert_eq!(counts.iter().sum::<u64>(), requests, "{stdout}");
        assert_eq!(read_rows(&out).len() as u64, requests);
    }
}

/// The requests the server answered on `route`, every status: `loadgen_server_requests_total`
/// from its /metrics.
fn served(server: &ServerOnRuntime, route: &str) -> u64 {
    let addr = server.url("").trim_start_matches("http://").to_string();
    let mut stream = TcpStream::connect(&addr).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let key = format!("loadgen_server_requests_total{{route=\"{route}\",");
    text.lines()
        .filter(|l| l.starts_with(&key))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum()
}

#[test]
fn a_three_url_targets_file_sends_each_url_a_third_of_the_requests() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("swipe.json");
    std::fs::write(&body, r#"{"swiper":"1","swipee":"2","comment":"hi"}"#).unwrap();
    let targets = dir.path().join("targets.txt");
    let text = format!(
        "GET {}\n\nGET {}\nAccept: application/json\n\nPOST {}\nContent-Type: application/json\n@{}\n",
        server.url("/"),
        server.url("/albums/1"),
        server.url("/swipe/left/"),
        body.display()
    );
    std::fs::write(&targets, text).unwrap();
    let out = dir.path().join("run");
    let output = loadgen_bin()
        .args([
            "run",
            "--targets",
            targets.to_str().unwrap(),
            "-c",
            "3",
            "-n",
            "300",
        ])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    for route in ["root", "albums_get", "swipe_post"] {
        assert_eq!(served(&server, route), 100, "route {route}");
    }
    let rows = read_rows(&out);
    assert_eq!(rows.len(), 300);
    assert!(rows.iter().all(|r| r.error.is_none()), "{rows:?}");

    // Weighted: the second target twice as often as the others.
    let weighted = dir.path().join("weighted");
    let output = loadgen_bin()
        .args([
            "run",
            "--targets",
            targets.to_str().unwrap(),
            "-c",
            "2",
            "-n",
            "400",
        ])
        .args([
            "--targets-weights",
            "1,2,1",
            "--out",
            weighted.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    for (route, total) in [("root", 200), ("albums_get", 300), ("swipe_post", 200)] {
        assert_eq!(served(&server, route), total, "route {route}");
    }
}

#[test]
fn a_bad_targets_file_is_refused_with_its_name_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets.txt");
    std::fs::write(&targets, "GET http://127.0.0.1:9/a\nthis is not a header\n").unwrap();
    let output = loadgen_bin()
        .args(["run", "--targets", targets.to_str().unwrap(), "-n", "3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:2:", targets.display())),
        "{stderr}"
    );
}
