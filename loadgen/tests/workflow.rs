//! `loadgen calibrate` and `loadgen sweep` against reference servers of known capacity.

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
            service_time: "10ms".parse().unwrap(),
            ..ServerConfig::default()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let overhead = calibrate(&format!("{}/", fast.url()), &dir.path().join("fast"));
    let measured = calibrate(&format!("{}/", slow.url()), &dir.path().join("slow"));
    let loopback_ns = overhead["calibration"]["r1_ns"].as_f64().unwrap();
    let r1_ns = measured["calibration"]["r1_ns"].as_f64().unwrap();
    let expected = 10e6 + loopback_ns;
    assert!(
        (r1_ns - expected).abs() <= 0.1 * expected,
        "R(1) {r1_ns} ns vs {expected} ns"
    );
    // The prediction table is N / R(1).
    for p in measured["calibration"]["predictions"].as_array().unwrap() {
        let n = p["n"].as_f64().unwrap();
        assert!((p["x_rps"].as_f64().unwrap() - n * 1e9 / r1_ns).abs() < 1e-6);
    }
    assert_eq!(measured["calibration"]["requests"], 150);
    // The run directory is an ordinary run, tagged as a calibration; warm-up rows are phase
    // `warmup`, so R(1) covers only the measured ones.
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("slow/run.json")).unwrap())
            .unwrap();
    assert_eq!(run_json["kind"], "calibration");
    assert_eq!(run_json["summary"]["requests"], 160);
    assert_eq!(slow.requests_total(), 160);
    runtime.block_on(async {
        fast.shutdown().await;
        slow.shutdown().await;
    });
}

#[test]
fn sweep_finds_the_capacity_of_a_server_with_8_workers_of_10ms() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = runtime
        .block_on(servers::start(ServerConfig {
            service_time: "10ms".parse().unwrap(),
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
        if n >= 8.0 {
            // Plateau at 8 workers / 10 ms = 800 req/s.
            assert!((x - 800.0).abs() <= 80.0, "{table}");
            // Beyond capacity, requests queue: R ≈ N / 800 s.
            assert!((r_s - n / 800.0).abs() <= 0.15 * n / 800.0, "{table}");
        }
    }
    // Predictions come from level 1's R(1).
    let r1 = levels[0]["mean_latency_ns"].as_f64().unwrap();
    assert_eq!(sweep["calibration_r1_ns"].as_f64().unwrap(), r1);
    let predicted_32 = levels[4]["predicted_rps"].as_f64().unwrap();
    assert!((predicted_32 - 32.0 * 1e9 / r1).abs() < 1e-6);
    runtime.block_on(server.shutdown());
}
