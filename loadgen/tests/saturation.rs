//! The client-saturation verdict under a real cgroup CPU quota. Its own test binary.
//!
//! Each test creates a cgroup limited to a fraction of one core (cgroup v1 `cpu` controller,
//! or v2 `cpu.max`), starts the real `loadgen` binary inside it (`sh` writes its own pid into
//! `cgroup.procs`, then execs loadgen), and removes the cgroup afterwards. A quota makes the
//! saturation certain however busy the machine is: the process wants far more than its
//! quota, so the kernel throttles it in most periods. Where cgroups cannot be created (not
//! root, no CPU controller) the tests say why and pass without checking anything.

mod common;

use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;
use common::quota::QuotaCgroup;
use common::{run_json, ServerOnRuntime};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn column_sum(path: &Path, name: &str) -> (usize, i64) {
    let file = std::fs::File::open(path).unwrap();
    let mut nulls = 0;
    let mut sum = 0;
    for batch in ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
    {
        let batch = batch.unwrap();
        let column = batch.column_by_name(name).unwrap();
        nulls += column.null_count();
        sum += column
            .as_primitive::<Int64Type>()
            .iter()
            .flatten()
            .sum::<i64>();
    }
    (nulls, sum)
}

/// Issue 11's CPU quota: loadgen in a cgroup of 0.1 cores against a server outside it (0.1,
/// not the 0.25: a host busy with other work gave the client less than a quarter of
/// a core, so the quota never bit; a tenth of a core it gets beside a build).
/// run.json says the quota, the throttling and "saturated by its CPU quota"; client-metrics
/// has the throttling per second and the quota in its metadata.
#[test]
fn a_cpu_quota_is_recorded_and_saturates_the_client() {
    let cgroup = match QuotaCgroup::create("quota", 10_000) {
        Ok(cgroup) => cgroup,
        Err(why) => return common::unavailable::missing("cgroup", &why),
    };
    let server = ServerOnRuntime::start(servers::ServerConfig::default());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let url = server.url("/");
    let output = cgroup.run_loadgen(&[
        "run",
        "--url",
        &url,
        "-c",
        "32",
        "-d",
        "3s",
        "--no-progress",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    let client = &run_json(&out)["client"];
    assert_eq!(client["cpu_quota_cores"], 0.1, "{client}");
    assert_eq!(client["cpu_limit_cores"], 0.1, "{client}");
    assert!(client["cpu_quota_source"]
        .as_str()
        .is_some_and(|s| s.starts_with("cgroup-v")));
    assert!(client["throttled_ns"].as_u64().unwrap() > 0, "{client}");
    assert!(client["nr_throttled"].as_u64().unwrap() > 0, "{client}");
    assert_eq!(client["saturated"], true, "{client}");
    assert_eq!(client["saturation"], "cpu-quota", "{client}");
    assert_eq!(client["server_shares_cores"], true, "{client}");
    assert!(
        stdout.contains("saturated (CPU quota)") && stdout.contains("quota"),
        "{stdout}"
    );

    let metrics = out.join("client-metrics.parquet");
    let (nulls, throttled_ns) = column_sum(&metrics, "throttled_ns");
    assert_eq!(nulls, 0);
    assert!(throttled_ns > 0);
    let (_, nr_throttled) = column_sum(&metrics, "nr_throttled");
    assert!(nr_throttled > 0);
    let meta = common::metadata(&metrics);
    assert_eq!(meta["loadgen.cpu_quota_cores"], "0.1");
    assert_eq!(meta["loadgen.cpu_limit_cores"], "0.1");
}

/// Issue 13 item 13: `a_saturated_client_is_called_out` pinned the demo to one core with
/// taskset and expected that core to saturate, which failed when other processes shared the
/// machine. Under a quota of 0.1 cores the demo (client and embedded server in one process)
/// is saturated whatever else runs, and the line says that the server shares its cores.
#[test]
fn regression_a_saturated_client_is_called_out_on_a_busy_machine() {
    let cgroup = match QuotaCgroup::create("demo", 10_000) {
        Ok(cgroup) => cgroup,
        Err(why) => return common::unavailable::missing("cgroup", &why),
    };
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = cgroup.run_loadgen(&[
        "run",
        "-c",
        "64",
        "-d",
        "3s",
        "--no-progress",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(
        stdout.contains("saturated (CPU quota): these numbers describe the client"),
        "{stdout}"
    );
    assert!(
        stdout.contains("the embedded server shares these"),
        "{stdout}"
    );
    let client = &run_json(&out)["client"];
    assert_eq!(client["saturated"], true);
    assert_eq!(client["server_shares_cores"], true);
}
