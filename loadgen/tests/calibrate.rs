//! `loadgen calibrate` against reference servers of known service time. 40 ms rather than the
//! 10 ms of the course setup: unoptimised test builds add ~1 ms per request, which would be
//! 10 % of a 10 ms service time but is 2.5 % of 40 ms. (Its own test binary:
//! cargo runs binaries one at a time, so no other test competes for the 2 cores while it times.)

use std::process::Command;

use servers::ServerConfig;

fn loadgen(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(args)
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn calibrate(url: &str, out: &std::path::Path) -> serde_json::Value {
    let (code, stdout, stderr) = loadgen(&[
        "calibrate",
        "--url",
        url,
        "-n",
        "150",
        "--warmup",
        "10",
        "--levels",
        "1,10,64",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn calibrate_measures_r1_and_predicts_with_littles_law() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let fast = runtime
        .block_on(servers::start(ServerConfig::default()))
        .unwrap();
    let slow = runtime
        .block_on(servers::start(ServerConfig {
            service_time: "40ms".parse().unwrap(),
            ..ServerConfig::default()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let overhead = calibrate(&format!("{}/", fast.url()), &dir.path().join("fast"));
    let measured = calibrate(&format!("{}/", slow.url()), &dir.path().join("slow"));
    let loopback_ns = overhead["calibration"]["r1_ns"].as_f64().unwrap();
    let r1_ns = measured["calibration"]["r1_ns"].as_f64().unwrap();
    let expected = 40e6 + loopback_ns;
    // Never below the service time; above it by the loopback's cost and what a loaded
    // machine adds to one request (scheduling), not by a multiple of it.
    assert!(
        r1_ns >= 40e6 && r1_ns <= 1.5 * expected,
        "R(1) {r1_ns} ns vs {expected} ns"
    );
    // The prediction table is N / R(1).
    for p in measured["calibration"]["predictions"].as_array().unwrap() {
        let n = p["n"].as_f64().unwrap();
        assert!((p["x_rps"].as_f64().unwrap() - n * 1e9 / r1_ns).abs() < 1e-6);
    }
    assert_eq!(measured["calibration"]["requests"], 150);
    // The run directory is an ordinary run, tagged as a calibration; warm-up rows are phase
    // `warmup`, so R(1) covers only the measured ones; the summary has them all (a phased
    // model's phases are its own, judged together).
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("slow/run.json")).unwrap())
            .unwrap();
    assert_eq!(run_json["kind"], "calibration");
    assert_eq!(run_json["summary"]["requests"], 160);
    assert!(run_json["summary"].get("warmup_requests").is_none());
    assert_eq!(slow.requests_total(), 160);
    runtime.block_on(async {
        fast.shutdown().await;
        slow.shutdown().await;
    });
}
