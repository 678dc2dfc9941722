//! Regression tests of issue 45's loadgen findings, each against a real `loadgen-server`:
//! framing headers owned by the client, `--rate` in requests per second for a targets file,
//! targets files real tools write, and weights whose sum wraps a u32.

mod common;

use common::{loadgen_bin, read_rows, ServerOnRuntime};
use servers::ServerConfig;

/// Runs `loadgen ARGS --out DIR/run --no-progress`; the output and the run directory.
fn run(args: &[&str], dir: &std::path::Path) -> (std::process::Output, std::path::PathBuf) {
    let out = dir.join("run");
    let output = loadgen_bin()
        .args(["run", "--no-progress", "--out", out.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    (output, out)
}

#[test]
fn a_content_length_header_without_a_body_is_the_clients_to_write() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    for given in ["Content-Length: 10", "Transfer-Encoding: chunked"] {
        let dir = tempfile::tempdir().unwrap();
        let url = server.url("/");
        let (output, out) = run(
            &["--url", &url, "-c", "1", "-n", "4", "-H", given],
            dir.path(),
        );
        assert!(output.status.success(), "{given}: {output:?}");
        let rows = read_rows(&out);
        assert_eq!(rows.len(), 4, "{given}");
        assert!(
            rows.iter().all(|r| r.error.is_none() && r.status == 200),
            "{given}: {rows:?}"
        );
    }
    // And in a targets file, beside a header whose value is a URL, after a byte order mark.
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets.txt");
    let text = format!(
        "\u{feff}GET {}\nReferer: http://example.com/x\nContent-Length: 10\n\nGET {}\nOrigin: https://example.com\n",
        server.url("/"),
        server.url("/albums/1")
    );
    std::fs::write(&targets, text).unwrap();
    let (output, out) = run(
        &["--targets", targets.to_str().unwrap(), "-c", "1", "-n", "4"],
        dir.path(),
    );
    assert!(output.status.success(), "{output:?}");
    let rows = read_rows(&out);
    assert_eq!(rows.len(), 4);
    assert!(rows.iter().all(|r| r.error.is_none()), "{rows:?}");
}

#[test]
fn rate_with_a_targets_file_is_requests_per_second() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets.txt");
    let text = format!(
        "GET {}\n\nGET {}\n\nGET {}\n",
        server.url("/"),
        server.url("/albums/1"),
        server.url("/albums/2")
    );
    std::fs::write(&targets, text).unwrap();
    let (output, out) = run(
        &[
            "--targets",
            targets.to_str().unwrap(),
            "--rate",
            "60",
            "-d",
            "1s",
        ],
        dir.path(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{output:?}");
    assert!(!stdout.contains("iterations/s"), "{stdout}");
    let rows = read_rows(&out);
    // 60 req/s for 1 s is 60 requests (not 60 iterations of 3), the targets taking turns.
    assert_eq!(rows.len(), 60, "{stdout}");
    for op in ["GET /", "GET /albums/1", "GET /albums/2"] {
        assert_eq!(rows.iter().filter(|r| r.op == op).count(), 20, "op {op}");
    }
}

#[test]
fn weights_whose_sum_wraps_a_u32_are_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets.txt");
    std::fs::write(
        &targets,
        "GET http://127.0.0.1:9/a\n\nGET http://127.0.0.1:9/b\n",
    )
    .unwrap();
    let (output, _) = run(
        &[
            "--targets",
            targets.to_str().unwrap(),
            "--targets-weights",
            "4294967295,1",
            "-n",
            "2",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("at most 10000"), "{stderr}");
}

#[test]
fn abort_on_fail_stops_an_overloaded_open_run_within_the_judges_period() {
    // 4 workers × 500 ms: 8 req/s, against 100 req/s offered; the first response (0.5 s)
    // already crosses p99<100ms. Each worker's next request waits in the server's queue for
    // seconds, and a worker that held its rows until then kept them from the judge until
    // every one of the 600 sends was made.
    let server = ServerOnRuntime::start(ServerConfig {
        service_time: "500ms".parse().unwrap(),
        workers: Some(4),
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let url = server.url("/");
    let args = [
        "--url",
        &url,
        "--rate",
        "100",
        "-d",
        "3s",
        "--threshold",
        "p99<100ms",
    ];
    let (output, out) = run(
        &[&args[..], &["--abort-on-fail", "--abort-after", "500ms"]].concat(),
        dir.path(),
    );
    let text = String::from_utf8_lossy(&output.stdout).into_owned()
        + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(99), "{text}");
    let document = common::run_json(&out);
    assert_eq!(document["exit_reason"], "threshold", "{document}");
    // The rows reach the writer within a quarter second, the judge within its period (1 s):
    // the schedule stops after about 2 s of its 6 (leeway for a loaded machine).
    let sent = read_rows(&out).len();
    assert!(sent < 400, "{sent} sends: {text}");
    // The judge lost the threshold on the first rows, not on rows of requests that waited
    // seconds in the server's queue behind a worker's held rows (5.6 s when they were held).
    let observed = text
        .lines()
        .find(|l| l.contains("lost on the first"))
        .and_then(|l| l.split("(observed ").nth(1))
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_else(|| panic!("no abort line: {text}"));
    let observed_s = match observed.strip_suffix("ms") {
        Some(ms) => ms.parse::<f64>().unwrap() / 1e3,
        None => observed.trim_end_matches('s').parse::<f64>().unwrap(),
    };
    assert!(observed_s < 3.0, "judged on a p99 of {observed}: {text}");
}

/// Serves `body` as a Prometheus endpoint on loopback, to `max` requests; its URL.
fn metrics_endpoint(body: &'static str, max: usize) -> String {
    metrics_endpoint_changing(body, body, max)
}

/// Serves `first` to the first request and `then` to the rest, to `max` requests; its URL.
fn metrics_endpoint_changing(first: &'static str, then: &'static str, max: usize) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for (i, stream) in listener.incoming().take(max).enumerate() {
            let body = if i == 0 { first } else { then };
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

#[test]
fn a_saturation_gauge_of_several_series_or_none_is_refused_before_the_run() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let metrics = metrics_endpoint(
        "pool_active{pool=\"orders\"} 3\npool_active{pool=\"reports\"} 8\n\
         pool_max{pool=\"reports\"} 200\npool_max{pool=\"orders\"} 8\n",
        50,
    );
    let url = server.url("/");
    let with = |spec: &str| {
        let dir = tempfile::tempdir().unwrap();
        let (output, out) = run(
            &[
                "--url",
                &url,
                "-c",
                "1",
                "-n",
                "3",
                "--server-metrics",
                &metrics,
                "--server-saturation",
                spec,
            ],
            dir.path(),
        );
        let stderr = String::from_utf8_lossy(&output.stderr).to_string();
        (output.status.code(), stderr, out.join("run.json").exists())
    };
    let (code, stderr, ran) = with("pool_active/pool_max");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("matches 2 series"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one sentence: {stderr}");
    assert!(!ran);
    let (code, stderr, _) = with("pool_active{pool=\"billing\"}/200");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("matches none of the 2 series"), "{stderr}");
    let (code, stderr, ran) = with("pool_active{pool=\"orders\"}/pool_max{pool=\"orders\"}");
    assert_eq!(code, Some(0), "{stderr}");
    assert!(ran);
    // A busy gauge alone is not read as a queue.
    let (code, stderr, _) = with("loadgen_server_workers_busy");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("read as a queue's length"), "{stderr}");
    // A scrape timeout of zero would fail every scrape.
    let dir = tempfile::tempdir().unwrap();
    let (output, _) = run(
        &[
            "--url",
            &url,
            "-n",
            "1",
            "--server-metrics",
            &metrics,
            "--server-metrics-timeout",
            "0s",
        ],
        dir.path(),
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("would fail every scrape"), "{stderr}");
}

/// A workflow holds the gauges to the scrape before its first level only: a series that
/// appears later is a warning of that level's run, never a refusal after levels ran.
#[test]
fn a_sweep_refuses_gauges_before_its_first_level_only() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let metrics = metrics_endpoint_changing(
        "pool_active{pool=\"orders\"} 3\n",
        "pool_active{pool=\"orders\"} 3\npool_active{pool=\"reports\"} 8\n",
        100,
    );
    let dir = tempfile::tempdir().unwrap();
    let output = loadgen_bin()
        .args(["sweep", "--no-progress", "--url", &server.url("/")])
        .args(["--rate-levels", "20,40", "-d", "1s"])
        .args(["--server-metrics", &metrics])
        .args(["--server-saturation", "pool_active/8"])
        .args(["--out", dir.path().join("sweep").to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Both levels ran: the second's scrape before it saw two series, and did not refuse.
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(dir.path().join("sweep").read_dir().unwrap().count() >= 2);
}

#[test]
fn control_characters_in_names_leave_the_junit_file_valid_xml() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let (output, _) = run(
        &[
            "--url",
            &server.url("/"),
            "-n",
            "3",
            "--threshold",
            "p99<10s",
            "--junit",
            junit.to_str().unwrap(),
            "--junit-name",
            "nightly\u{1}\u{1b}[31m",
        ],
        dir.path(),
    );
    assert!(output.status.success(), "{output:?}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    // XML 1.0's Char production, which expat and the JVM's parsers hold a file to.
    let bad: Vec<char> = xml
        .chars()
        .filter(|&c| c < ' ' && !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    assert!(bad.is_empty(), "{bad:?} in {xml:?}");
    let suites = common::junit::suites(&xml);
    assert_eq!(suites.len(), 1);
    assert_eq!(suites[0].name, "nightly\u{fffd}\u{fffd}[31m");
    assert_eq!((suites[0].cases, suites[0].failures), (1, 0));
}

#[test]
fn a_source_address_no_connection_can_start_from_is_refused_before_the_run() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    // TEST-NET-1 (not this machine's), and IPv6 for an IPv4 target: every request failed.
    for (source, why) in [
        ("192.0.2.1", "cannot be bound here"),
        ("::1", "is IPv6 but the target"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (output, out) = run(
            &[
                "--url",
                &server.url("/"),
                "-n",
                "2",
                "--source-addr",
                source,
            ],
            dir.path(),
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{source}: {stderr}");
        assert!(stderr.contains(why), "{source}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
        assert!(!out.join("run.json").exists());
    }
}
