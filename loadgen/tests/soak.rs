//! Soak: the open model at a steady 500 req/s against a server that fails 1 % of requests and
//! stalls for 200 ms every 2 s, for `LOADGEN_SOAK_SECS` seconds (default 20; the long form is
//! `bench/soak.sh`, 300 s of a release build).
//!
//! A bench, not a test: its subject is how the client's memory behaves over a long run on this
//! machine, so the test command leaves it out (`#[ignore]`: cargo lists it as ignored) and
//! `bench/soak.sh` runs it. The books it also checks (rows + dropped = scheduled, the server's
//! failures and only those) are held by `tests/open.rs` and `tests/server_faults.rs`.
//!
//! It checks that the schedule is accounted for (rows + dropped = scheduled), that the
//! failures are the server's and only the server's, and that the client's memory stays flat
//! once warmed up. The figures are printed for `--nocapture`.

mod common;

use std::fs::File;
use std::time::Duration;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt64Type};
use arrow_array::Array;
use common::{loadgen_bin, rows_matching_summary, rows_with_error, ServerOnRuntime};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use servers::{ServerConfig, Stall};

const RATE: u64 = 500;
const MIB: u64 = 1024 * 1024;

/// (t_ns, rss_bytes) of every client-metrics sample that has an RSS.
fn rss_samples(path: &std::path::Path) -> Vec<(i64, u64)> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
        .unwrap()
        .build()
        .unwrap();
    let mut samples = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let t = batch
            .column_by_name("t_ns")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        let rss = batch
            .column_by_name("rss_bytes")
            .unwrap()
            .as_primitive::<UInt64Type>()
            .clone();
        for i in 0..batch.num_rows() {
            if !rss.is_null(i) {
                samples.push((t.value(i), rss.value(i)));
            }
        }
    }
    samples
}

// One soak, read top to bottom: the run, then each of its books checked in turn.
#[allow(clippy::too_many_lines)]
#[test]
#[ignore = "a bench of this machine: bench/soak.sh runs it"]
fn open_model_soak_keeps_its_books_and_its_memory() {
    let secs: u64 = std::env::var("LOADGEN_SOAK_SECS")
        .ok()
        .map(|s| s.parse().expect("LOADGEN_SOAK_SECS is a number of seconds"))
        .unwrap_or(20);
    assert!(
        secs >= 8,
        "a soak shorter than 8 s has no second half to compare"
    );
    let target = ServerOnRuntime::start(ServerConfig {
        error_rate: 0.01,
        stall: Some(Stall {
            every: Duration::from_secs(2),
            duration: Duration::from_millis(200),
        }),
        ..ServerConfig::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = loadgen_bin()
        .args(["run", "--url", &target.url("/albums/1")])
        .args(["--rate", &RATE.to_string(), "-d", &format!("{secs}s")])
        .args(["--no-progress", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");

    let (rows, summary) = rows_matching_summary(&out);
    let open = &summary["open"];
    let (scheduled, dropped, late) = (
        open["scheduled"].as_u64().unwrap(),
        open["dropped"].as_u64().unwrap(),
        open["late"].as_u64().unwrap(),
    );
    let errors = rows_with_error(&rows, "http_status") as u64;
    let rows_n = rows.len() as u64;

    let rss = rss_samples(&out.join("client-metrics.parquet"));
    let half_ns = (secs * 1_000_000_000 / 2) as i64;
    // The first two seconds are warm-up: workers are being started, buffers grow.
    let max_in = |from: i64, to: i64| {
        rss.iter()
            .filter(|(t, _)| (from..to).contains(t))
            .map(|(_, r)| *r)
            .max()
            .unwrap()
    };
    let first_half_max = max_in(2_000_000_000, half_ns);
    let second_half_max = max_in(half_ns, i64::MAX);
    let max = rss.iter().map(|(_, r)| *r).max().unwrap();
    println!(
        "soak {secs} s at {RATE} req/s: rows {rows_n}, scheduled {scheduled}, dropped {dropped}, \
         late {late}, http_status {errors} ({:.2} %), server answered {}",
        100.0 * errors as f64 / rows_n as f64,
        target.server().requests_total(),
    );
    println!(
        "client RSS: first {:.1} MiB, last {:.1} MiB, max {:.1} MiB; max after warm-up in the \
         first half {:.1} MiB, in the second half {:.1} MiB ({} samples)",
        rss[0].1 as f64 / MIB as f64,
        rss[rss.len() - 1].1 as f64 / MIB as f64,
        max as f64 / MIB as f64,
        first_half_max as f64 / MIB as f64,
        second_half_max as f64 / MIB as f64,
        rss.len(),
    );

    let series: Vec<String> = rss
        .iter()
        .map(|(_, r)| format!("{:.1}", *r as f64 / MIB as f64))
        .collect();
    println!("client RSS by second (MiB): {}", series.join(" "));

    // The books: every scheduled send is a row or a counted drop.
    assert_eq!(rows_n + dropped, scheduled, "{summary}");
    assert!(scheduled.abs_diff(RATE * secs) <= 2, "{summary}");
    assert_eq!(
        dropped, 0,
        "1000 in flight is plenty for 200 ms stalls at 500 req/s"
    );
    // The failures are the server's 1 %, and nothing else failed.
    assert_eq!(summary["failed"].as_u64().unwrap(), errors, "{summary}");
    let expected = rows_n as f64 * 0.01;
    assert!(
        (errors as f64 - expected).abs() <= 5.0 * expected.sqrt() + 5.0,
        "{errors} http_status rows, ~{expected:.0} expected"
    );
    assert!(rows.iter().all(|r| r.status == 200 || r.status == 500));
    // Memory: flat after warm-up (the run's data goes to disk, not to the heap).
    assert!(
        rss.len() as u64 >= secs - 1,
        "{} RSS samples in {secs} s",
        rss.len()
    );
    assert!(
        second_half_max <= first_half_max + 16 * MIB,
        "RSS grew from {first_half_max} to {second_half_max} bytes"
    );
}
