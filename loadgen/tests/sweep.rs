//! `loadgen sweep` against a reference server of known capacity (8 workers × 40 ms = 200 req/s;
//! 40 ms rather than the course's 10 ms because unoptimised test builds add ~1 ms per request). (Its own test binary, so no
//! other test competes for the 2 cores while it measures.)

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

#[test]
fn sweep_finds_the_capacity_of_a_server_with_8_workers_of_40ms() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(servers::start(ServerConfig {
            service_time: "40ms".parse().unwrap(),
            workers: Some(8),
            ..ServerConfig::default()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let (code, stdout, stderr) = loadgen(&[
        "sweep",
        "--url",
        &format!("{}/", server.url()),
        "--levels",
        "1,4,8,16,32",
        "-d",
        "1500ms",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let sweep: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let on_disk: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(sweep, on_disk);
    let levels = sweep["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 5);
    let mut table = String::new();
    for level in levels {
        let n = level["level"].as_f64().unwrap();
        let x = level["throughput_rps"].as_f64().unwrap();
        let r_s = level["mean_latency_ns"].as_f64().unwrap() / 1e9;
        let n_eff = level["n_eff"].as_f64().unwrap();
        table += &format!("N={n} X={x:.0} R={:.1}ms N_eff={n_eff:.1}\n", r_s * 1e3);
        assert!(std::path::Path::new(level["run_dir"].as_str().unwrap())
            .join("run.json")
            .exists());
        // The client keeps N requests in flight: N_eff tracks N.
        assert!((n_eff - n).abs() <= 0.1 * n + 0.2, "{table}");
        // The server's capacity, 8 workers / 40 ms = 200 req/s, is never exceeded; a busy
        // machine only adds overhead, so below it the bound is loose (half of N / 40 ms) and
        // the 10 % agreement with 8 / R(1) is bench/testbeds.sh's, on a quiet machine.
        assert!(x <= 205.0, "{table}");
        assert!(x >= 0.5 * n.min(8.0) / 0.040, "{table}");
        if n >= 8.0 {
            // Beyond capacity, requests queue: R ≈ N / X (Little's Law with N_eff ≈ N).
            assert!((r_s - n / x).abs() <= 0.15 * n / x, "{table}");
        }
    }
    // Predictions come from level 1's R(1).
    let r1 = levels[0]["mean_latency_ns"].as_f64().unwrap();
    assert_eq!(sweep["calibration_r1_ns"].as_f64().unwrap(), r1);
    let predicted_32 = levels[4]["predicted_rps"].as_f64().unwrap();
    assert!((predicted_32 - 32.0 * 1e9 / r1).abs() < 1e-6);
    runtime.block_on(server.shutdown());
}
