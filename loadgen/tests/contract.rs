//! The file contract (`contract/files.json`) against what the code builds and what a real
//! run writes: the Arrow schemas of both Parquet files, and the segments, client-metrics,
//! run.json, sweep.json and capacity.json of real `loadgen run` / `sweep` / `capacity` runs against the
//! reference server on 127.0.0.1. Every field present with its type, none missing from the
//! contract; a renamed column or field fails here (and in analysis/tests/test_contract.py).

mod common;

use std::sync::Arc;

use arrow_schema::{Field, Schema};
use common::contract::{self, json_problems, schema_problems};
use common::{run_at, ServerOnRuntime};
use loadgen::stop::StopSignal;
use servers::ServerConfig;

#[test]
fn the_arrow_schemas_the_code_builds_are_the_contracts() {
    assert_eq!(
        schema_problems("requests", &loadgen::record::schema()),
        Vec::<String>::new()
    );
    assert_eq!(
        schema_problems("client_metrics", &loadgen::sysmon::schema()),
        Vec::<String>::new()
    );
    let version = contract::file("requests")["schema_version"].clone();
    assert_eq!(version, loadgen::record::SCHEMA_VERSION.to_string());
    let version = contract::file("client_metrics")["schema_version"].clone();
    assert_eq!(version, loadgen::sysmon::SCHEMA_VERSION);
    assert_eq!(
        schema_problems("server_metrics", &loadgen::servermon::schema()),
        Vec::<String>::new()
    );
    let version = contract::file("server_metrics")["schema_version"].clone();
    assert_eq!(version, loadgen::servermon::SCHEMA_VERSION);
}

/// The phase labels the engine writes by itself are the contract's, which the analysis reads
/// (it leaves the `warmup` rows out of every judgement by this label).
#[test]
fn the_engines_phase_labels_are_the_contracts() {
    let labels = contract::file("requests")["phase_labels"].clone();
    assert_eq!(labels["warmup"]["label"], loadgen::record::phase::WARMUP);
    assert_eq!(labels["main"]["label"], loadgen::record::phase::MAIN);
    assert_eq!(labels.as_object().unwrap().len(), 2, "{labels}");
}

/// The checker is not blind: a renamed column, a retyped one and a renamed run.json field
/// are each reported.
#[test]
fn a_renamed_column_or_field_breaks_the_contract() {
    let schema = loadgen::record::schema();
    let renamed: Vec<Arc<Field>> = schema
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            "ttfb_ns" => Arc::new(f.as_ref().clone().with_name("ttfb")),
            _ => f.clone(),
        })
        .collect();
    let problems = schema_problems("requests", &Schema::new(renamed));
    assert!(problems.iter().any(|p| p.contains("ttfb")), "{problems:?}");

    let schema = loadgen::sysmon::schema();
    let retyped: Vec<Arc<Field>> = schema
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            "cpu_utilisation" => Arc::new(Field::new(
                "cpu_utilisation",
                arrow_schema::DataType::Float32,
                true,
            )),
            _ => f.clone(),
        })
        .collect();
    assert!(!schema_problems("client_metrics", &Schema::new(retyped)).is_empty());

    let document = serde_json::json!({"kind": "sweep", "model": "closed",
        "calibration_r1_ns": null, "levels": [{"level": 1.0, "run_dir": "x", "requests": 1,
        "failed": 0, "throughput_rps": 1.0, "mean_latency_ns": 1.0, "p99_latency_ns": 1,
        "n_eff": 1.0, "predicted_rps": null, "verdict": "server"}]});
    assert_eq!(json_problems("sweep_json", &document), Vec::<String>::new());
    let mut renamed = document.clone();
    let level = renamed["levels"][0].as_object_mut().unwrap();
    let value = level.remove("n_eff").unwrap();
    level.insert("n_effective".into(), value);
    let problems = json_problems("sweep_json", &renamed);
    assert!(
        problems.iter().any(|p| p.contains("levels[].n_effective"))
            && problems
                .iter()
                .any(|p| p.contains("levels[].n_eff is missing")),
        "{problems:?}"
    );
    let mut retyped = document;
    retyped["levels"][0]["requests"] = "1".into();
    assert!(!json_problems("sweep_json", &retyped).is_empty());
}

/// A closed and an open run (the open one adds `summary.open` and `uncorrected_latency`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_run_writes_what_the_contract_says() {
    let server = servers::start(ServerConfig::default()).await.unwrap();
    let url = format!("{}/", server.url());
    let scrape = format!("{}/metrics", server.url());
    for flags in [
        &["-c", "2", "-n", "300", "--trace", "--probe"][..],
        &["--rate", "100", "-d", "1500ms", "--server-metrics", &scrape][..],
    ] {
        let (_dir, out, outcome) = run_at(&url, flags, StopSignal::new()).await;
        assert!(outcome.summary.requests > 0);
        contract::assert_run_dir(&out);
        // The optional parts are there to be held to the contract.
        let traced = common::read_rows(&out).iter().all(|r| r.trace_id.is_some());
        assert_eq!(traced, flags.contains(&"--trace"), "{flags:?}");
        assert_eq!(
            out.join("server-metrics.parquet").exists(),
            flags.contains(&"--server-metrics"),
            "{flags:?}"
        );
        let run_json = contract::read_json(&out.join("run.json"));
        // `--probe` after the closed level: its requests beside, never among, the run's.
        assert_eq!(run_json["probe"].is_object(), flags.contains(&"--probe"));
        if flags.contains(&"--probe") {
            assert_eq!(run_json["summary"]["requests"], 300);
            assert_eq!(common::read_rows(&out).len(), 300);
            assert_eq!(run_json["probe"]["requests"], 50);
        }
        assert!(
            run_json["client"].is_object(),
            "{flags:?}: no client summary"
        );
        // The facts the verdict reads (issue 25) are written, not left to the analysis.
        let summary = &run_json["summary"];
        assert!(
            summary["workers"]["busy_ns"].as_i64().unwrap() > 0,
            "{flags:?}"
        );
        if flags[0] == "--rate" {
            let offered = summary["open"]["offered_rps"].as_f64().unwrap();
            assert!((90.0..=110.0).contains(&offered), "offered {offered}/s");
            assert!(summary["open"]["send_lag"]["p50_ns"].as_i64().unwrap() >= 1);
        }
    }
    server.shutdown().await;
}

#[test]
fn a_real_sweep_writes_what_the_contract_says() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["sweep", "--url", &server.url("/"), "--levels", "1,2"])
        .args(["-n", "100", "--json", "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let sweep = contract::read_json(&out.join("sweep.json"));
    assert_eq!(json_problems("sweep_json", &sweep), Vec::<String>::new());
    let levels = sweep["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2);
    for level in levels {
        contract::assert_run_dir(std::path::Path::new(level["run_dir"].as_str().unwrap()));
    }
}

/// A capacity search held to the contract: capacity.json, and every level a run directory.
/// A ceiling of 50 req/s that the default server meets keeps it to two short levels.
#[test]
fn a_real_capacity_search_writes_what_the_contract_says() {
    let server = ServerOnRuntime::start(ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("capacity");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_loadgen"))
        .args(["capacity", "--url", &server.url("/"), "--slo", "p99<1s"])
        .args([
            "--slo",
            "error_rate<50%",
            "--max-rate",
            "50",
            "--level-duration",
            "1s",
        ])
        .args([
            "--warmup",
            "300ms",
            "--confirm-levels",
            "1",
            "--cool-down",
            "0s",
        ])
        .args(["--json", "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let capacity = contract::read_json(&out.join("capacity.json"));
    assert_eq!(
        json_problems("capacity_json", &capacity),
        Vec::<String>::new()
    );
    assert_eq!(capacity["capacity_rps"], 50.0);
    assert_eq!(capacity["limited_by"], "max_rate");
    let levels = capacity["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{capacity}");
    for level in levels {
        contract::assert_run_dir(std::path::Path::new(level["run_dir"].as_str().unwrap()));
    }
}

/// The tests' `Row` has a field per contract column, in order, of the column's type and
/// nullability (`Option<T>`), so a column added to the contract fails here until the tests
/// read it.
#[test]
fn the_tests_row_is_the_contracts() {
    let expected: Vec<(String, String, bool)> = contract::file("requests")["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let text = |key: &str| c[key].as_str().unwrap().to_string();
            (text("name"), text("type"), c["nullable"].as_bool().unwrap())
        })
        .collect();
    let actual: Vec<(String, String, bool)> = common::ROW_FIELDS
        .iter()
        .map(|(name, rust)| {
            let (contract_type, nullable) = contract::rust_type(rust);
            (name.to_string(), contract_type, nullable)
        })
        .collect();
    assert_eq!(actual, expected);
}

/// The error classes the code writes are the ones the contract's `error` column lists, in
/// dictionary order.
#[test]
fn the_error_classes_are_the_contracts() {
    let columns = contract::file("requests")["columns"].clone();
    let error = columns
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "error")
        .expect("an error column");
    let meaning = error["meaning"].as_str().unwrap();
    let listed = meaning
        .strip_prefix("error class (")
        .and_then(|rest| rest.split_once(')'))
        .map(|(list, _)| list.split(", ").collect::<Vec<_>>())
        .expect("the meaning starts with `error class (…)`");
    let code: Vec<&str> = loadgen::record::ErrorClass::ALL
        .iter()
        .map(|c| c.as_str())
        .collect();
    assert_eq!(listed, code);
}

/// The schema tables of docs/reference/files.md are generated from the contract: this test
/// renders them and compares them with the page's marked sections; `UPDATE_DOCS=1` rewrites
/// the sections.
#[test]
fn the_docs_schema_tables_are_generated_from_the_contract() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/reference/files.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let generated = ["requests", "client_metrics", "server_metrics"]
        .into_iter()
        .fold(readme.clone(), |text, name| {
            contract::replace_generated(&text, name, &contract::markdown(name))
        });
    if generated == readme {
        return;
    }
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, generated).unwrap();
    } else {
        panic!(
            "docs/reference/files.md's schema tables differ from contract/files.json; regenerate \
             them with \
             `UPDATE_DOCS=1 cargo test -p loadgen --test contract`"
        );
    }
}
