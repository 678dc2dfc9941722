//! The live metrics reach a real Prometheus (issue 27): Debian's `prometheus` scrapes the two
//! shards of one run, each on its own `--metrics-addr`, once a second, and afterwards the final
//! request count it stored — summed over the shards by `run_group`, as the Grafana dashboard
//! does — equals the rows the shards wrote, per op too. Before, the endpoint closed ~4 ms after
//! the last request, so the last scrape interval never reached Prometheus, and each shard's
//! own `run_id` was the only run label; two requests with one method and path served duplicate
//! series, which Prometheus drops.
//!
//! `scripts/test.sh` installs Prometheus when it is missing; where it cannot be, this test says
//! so and passes without running.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{loadgen_bin, read_rows, ServerOnRuntime};

/// Scrape interval of the test's Prometheus; the linger covers several.
const SCRAPE_INTERVAL: &str = "1s";
const LINGER: &str = "4s";

/// Kills the child when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `GET path` on 127.0.0.1:`port`: (status, body), or `None` when nothing answers.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n")?.1.to_string();
    Some((status, body))
}

/// Starts Prometheus scraping `targets`; `None` when it is not installed.
fn start_prometheus(dir: &Path, targets: &[u16]) -> Option<(Killed, u16)> {
    let targets: Vec<String> = targets.iter().map(|p| format!("'127.0.0.1:{p}'")).collect();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: {SCRAPE_INTERVAL}\nscrape_configs:\n  - job_name: loadgen\n    \
             static_configs:\n      - targets: [{}]\n",
            targets.join(", ")
        ),
    )
    .unwrap();
    let port = free_port();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let prometheus = Killed(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_get(port, "/-/ready").map(|(s, _)| s) != Some(200) {
        assert!(Instant::now() < deadline, "Prometheus not ready in 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    Some((prometheus, port))
}

/// An instant query's result: (labels, value) per series.
fn query(port: u16, promql: &str) -> Vec<(serde_json::Value, f64)> {
    let encoded: String = promql
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (status, body) = http_get(port, &format!("/api/v1/query?query={encoded}")).unwrap();
    assert_eq!(status, 200, "{body}");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    json["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["metric"].clone(),
                r["value"][1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// Two shards of one closed run (two requests with one method and path, 2 s) starting at
/// `start_at`, each serving metrics on its port; their rows once both have exited.
fn run_two_shards(
    dir: &Path,
    url: &str,
    start_at: std::time::SystemTime,
    metrics_ports: &[u16; 2],
) -> Vec<common::Row> {
    let scenario = dir.join("twice.toml");
    std::fs::write(
        &scenario,
        "sequence = [\"first\", \"again\"]\n[requests.first]\npath = \"/\"\n\
         [requests.again]\npath = \"/\"\n[model]\nkind = \"closed\"\nworkers = 2\nduration = \"2s\"\n",
    )
    .unwrap();
    let start_at_ms = common::unix_ns(start_at) / 1_000_000;
    let shards: Vec<(Killed, std::path::PathBuf)> = (0..2)
        .map(|i| {
            let out = dir.join(format!("shard-{i}"));
            let child = loadgen_bin()
                .args(["run", "--url", url])
                .arg(&scenario)
                .args([
                    "--shard",
                    &format!("{i}/2"),
                    "--start-at",
                    &start_at_ms.to_string(),
                ])
                .args(["--metrics-addr", &format!("127.0.0.1:{}", metrics_ports[i])])
                .args(["--metrics-linger", LINGER, "--no-progress", "--out"])
                .arg(&out)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            (Killed(child), out)
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rows = Vec::new();
    for (mut shard, out) in shards {
        while shard.0.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "a shard did not end in 60 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(shard.0.wait().unwrap().success());
        rows.extend(read_rows(&out));
    }
    rows
}

/// Every query of the Grafana dashboard is valid PromQL to this Prometheus, for `group`.
fn assert_dashboard_queries_run(prometheus_port: u16, group: &str) {
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/grafana/loadgen-dashboard.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    for target in panels.iter().flat_map(|p| p["targets"].as_array().unwrap()) {
        let expr = target["expr"].as_str().unwrap();
        assert!(
            expr.contains("$run_group"),
            "{expr} does not select a run group"
        );
        let concrete = expr
            .replace("$run_group", group)
            .replace("$__rate_interval", "10s");
        query(prometheus_port, &concrete);
    }
}

#[test]
fn regression_prometheus_stores_the_final_count_of_every_shard_and_it_equals_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let metrics_ports = [free_port(), free_port()];
    let Some((_prometheus, prometheus_port)) = start_prometheus(dir.path(), &metrics_ports) else {
        return common::unavailable::missing("prometheus", "`prometheus` is not installed");
    };
    let server = ServerOnRuntime::start(servers::ServerConfig::default());
    let start_at = std::time::SystemTime::now() + Duration::from_secs(2);
    let rows = run_two_shards(dir.path(), &server.url("/"), start_at, &metrics_ports);
    assert!(!rows.is_empty());

    // As the dashboard sums shards: one group, named after --start-at, holding every row.
    let groups = query(
        prometheus_port,
        "sum by (run_group) (max_over_time(loadgen_requests_total[5m]))",
    );
    assert_eq!(groups.len(), 1, "{groups:?}");
    let group = chrono::DateTime::<chrono::Utc>::from(start_at)
        .format("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string();
    assert_eq!(groups[0].0["run_group"], group, "{groups:?}");
    eprintln!("Prometheus: {} requests; rows: {}", groups[0].1, rows.len());
    assert_eq!(groups[0].1, rows.len() as f64);
    assert_dashboard_queries_run(prometheus_port, &group);
    // Per op: two requests with one method and path are two ops, in the rows and in
    // Prometheus alike.
    let by_op = query(
        prometheus_port,
        "sum by (op) (max_over_time(loadgen_requests_total[5m]))",
    );
    assert_eq!(by_op.len(), 2, "{by_op:?}");
    for (labels, count) in by_op {
        let op = labels["op"].as_str().unwrap();
        let in_rows = rows.iter().filter(|r| r.op == op).count();
        assert!(in_rows > 0, "{op} is not an op of the rows");
        assert_eq!(count, in_rows as f64, "{op}");
    }
}
