//! Issue 44: the network's own evidence. A run's `client.tcp` (run.json) is what the kernel
//! measured on the client's sockets (`TCP_INFO`, read as each connection closes), over a real
//! path — a network namespace joined to this one by a veth pair. With `tc netem` on the
//! client's side, the round trip it reports is netem's delay and loss shows as retransmits;
//! a kernel without netem (this project's VMs) is shaped with `tbf` instead: a full link's
//! queue shows as a round trip far above the lowest. Needs root, `ip` and `tc`; skips with
//! the reason otherwise. Traffic stays inside the namespace pair it creates.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::Command;

use common::ServerOnRuntime;
use servers::ServerConfig;

/// A network namespace (the client's side) joined to this one by a veth pair, deleted on
/// drop (which deletes the pair too).
struct Namespace {
    namespace: String,
    inside: String,
    outside: String,
    host_ip: Ipv4Addr,
}

fn sh(argv: &[&str]) -> Result<(), String> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .output()
        .map_err(|e| format!("{}: {e}", argv[0]))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "`{}` failed: {}",
            argv.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

impl Namespace {
    fn create() -> Result<Namespace, String> {
        let id = std::process::id() % 100_000;
        let (namespace, outside, inside) =
            (format!("lgtcp{id}"), format!("lgh{id}"), format!("lgn{id}"));
        let subnet = 1 + id % 250;
        let host_ip = Ipv4Addr::new(10, 231, subnet as u8, 1);
        sh(&["ip", "netns", "add", &namespace])?;
        let path = Namespace {
            namespace,
            inside,
            outside: outside.clone(),
            host_ip,
        };
        let ns = path.namespace.as_str();
        let inside = path.inside.as_str();
        let host_cidr = format!("{host_ip}/24");
        let client_cidr = format!("10.231.{subnet}.2/24");
        sh(&[
            "ip", "link", "add", &outside, "type", "veth", "peer", "name", inside,
        ])?;
        sh(&["ip", "link", "set", inside, "netns", ns])?;
        sh(&["ip", "addr", "add", &host_cidr, "dev", &outside])?;
        sh(&["ip", "link", "set", &outside, "up"])?;
        sh(&[
            "ip",
            "netns",
            "exec",
            ns,
            "ip",
            "addr",
            "add",
            &client_cidr,
            "dev",
            inside,
        ])?;
        sh(&["ip", "netns", "exec", ns, "ip", "link", "set", inside, "up"])?;
        sh(&["ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up"])?;
        Ok(path)
    }

    /// `tc qdisc replace … netem ARGS` on the client's side of the pair.
    fn netem(&self, args: &[&str]) -> Result<(), String> {
        let mut argv = vec![
            "ip",
            "netns",
            "exec",
            &self.namespace,
            "tc",
            "qdisc",
            "replace",
        ];
        argv.extend(["dev", &self.inside, "root", "netem"]);
        argv.extend(args);
        sh(&argv)
    }

    /// A closed run of 4 connections for 2 s from inside the namespace; its run.json.
    fn run(&self, url: &str, out: &Path, extra: &[&str]) -> serde_json::Value {
        let output = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.namespace,
                env!("CARGO_BIN_EXE_loadgen"),
            ])
            .args([
                "run",
                "--url",
                url,
                "-c",
                "4",
                "-d",
                "2s",
                "--no-progress",
                "--json",
            ])
            .args(extra)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{stderr}");
        common::run_json(out)
    }
}

impl Drop for Namespace {
    fn drop(&mut self) {
        let _ = sh(&["ip", "netns", "del", &self.namespace]);
    }
}

#[test]
fn tcp_info_shows_the_paths_delay_and_its_losses() {
    let path = match Namespace::create() {
        Ok(path) => path,
        Err(why) => {
            return common::unavailable::missing(
                "netns",
                &format!("no network namespace could be made ({why})"),
            )
        }
    };
    let server = ServerOnRuntime::start(ServerConfig {
        bind: IpAddr::V4(path.host_ip),
        ..ServerConfig::default()
    });
    let url = server.url("/albums/1");
    let dir = tempfile::tempdir().unwrap();
    if let Err(why) = path.netem(&["delay", "20ms"]) {
        eprintln!("no tc netem ({why}): the link is shaped with tbf instead");
        return a_full_links_queue_shows_in_the_round_trip(&path, &url, dir.path());
    }

    // 20 ms on the client's way out: every round trip takes at least that.
    let run = path.run(&url, &dir.path().join("delay"), &[]);
    let tcp = &run["client"]["tcp"];
    assert!(tcp["connections"].as_u64().unwrap() >= 4, "{tcp}");
    let rtt_us = tcp["rtt_mean_us"].as_f64().unwrap();
    let min_rtt_us = tcp["min_rtt_us"].as_u64().unwrap();
    assert!((19_000.0..=40_000.0).contains(&rtt_us), "{tcp}");
    assert!((19_000..=25_000).contains(&min_rtt_us), "{tcp}");
    let evidence = run["verdict"]["evidence"].to_string();
    assert!(
        evidence.contains("connections the client opened and closed"),
        "{evidence}"
    );

    // And 10 % of its segments lost: the client sends them again.
    path.netem(&["delay", "20ms", "loss", "10%"]).unwrap();
    let run = path.run(&url, &dir.path().join("loss"), &[]);
    let tcp = &run["client"]["tcp"];
    assert!(tcp["retransmits"].as_u64().unwrap() > 0, "{tcp}");
    assert!(tcp["retransmit_share"].as_f64().unwrap() > 0.01, "{tcp}");
}

/// The server's way out shaped to 64 kbit/s (`tbf`, a queue of up to 200 ms): 4 connections
/// fill it, and its queue holds the acknowledgements of the client's requests, so the round
/// trip TCP measured is far above the lowest (measured: 99 ms against 5 µs), and the verdict
/// shows it. First the same path unshaped: microseconds, nothing to show.
fn a_full_links_queue_shows_in_the_round_trip(path: &Namespace, url: &str, dir: &Path) {
    let idle = path.run(url, &dir.join("idle"), &[]);
    let tcp = &idle["client"]["tcp"];
    assert!(tcp["rtt_mean_us"].as_f64().unwrap() < 5_000.0, "{tcp}");
    let evidence = idle["verdict"]["evidence"].to_string();
    assert!(
        evidence.contains("connections the client opened and closed"),
        "{evidence}"
    );
    assert_ne!(idle["verdict"]["cause"], "network", "{}", idle["verdict"]);
    let shape = [
        "tc",
        "qdisc",
        "replace",
        "dev",
        &path.outside,
        "root",
        "tbf",
        "rate",
        "64kbit",
        "burst",
        "4kbit",
        "latency",
        "200ms",
    ];
    if let Err(why) = sh(&shape) {
        return common::unavailable::missing("tbf", &format!("neither netem nor tbf ({why})"));
    }
    let full = path.run(url, &dir.join("full"), &["--link-capacity", "64kbit"]);
    let tcp = &full["client"]["tcp"];
    let rtt_us = tcp["rtt_mean_us"].as_f64().unwrap();
    let lowest_us = tcp["min_rtt_us"].as_f64().unwrap();
    assert!(rtt_us >= 10_000.0 && rtt_us >= 2.0 * lowest_us, "{tcp}");
    let evidence = full["verdict"]["evidence"].to_string();
    assert!(
        evidence.contains("connections the client opened and closed"),
        "{evidence}"
    );
}
