//! `--metrics-addr` refusals: a port that cannot be bound is bad input, found before anything
//! runs. (The endpoint's content is tested with Prometheus' own parser in
//! analysis/tests/test_live_metrics.py, during a real run.)

mod common;

use common::loadgen_bin;

#[test]
fn a_taken_metrics_port_is_refused_before_anything_is_written() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never");
    let output = loadgen_bin()
        .args(["run", "-n", "5", "--metrics-addr", &addr, "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("--metrics-addr {addr}")),
        "{stderr}"
    );
    assert!(stderr.contains("choose a free port"), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn a_metrics_addr_that_is_not_an_address_is_bad_input() {
    let output = loadgen_bin()
        .args(["run", "-n", "5", "--metrics-addr", "localhost"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--metrics-addr"), "{stderr}");
}
