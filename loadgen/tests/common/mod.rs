//! Test helpers: build configs through the real CLI parser and read run directories back
//! with the `parquet` crate's Arrow reader, the way any other reader would.
#![allow(dead_code)]

pub mod contract;
pub mod junit;
pub mod quota;
pub mod unavailable;

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::RecordBatch;
use loadgen::cli::{Cli, Command};
use loadgen::config::RunConfig;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// A config exactly as `loadgen run ARGS…` would build it.
pub fn config(args: &[&str]) -> RunConfig {
    let cli = <Cli as clap::Parser>::try_parse_from(["loadgen", "run"].iter().chain(args))
        .expect("valid flags");
    let Command::Run(run) = cli.command else {
        panic!("not a run command")
    };
    RunConfig::from_args(&run).expect("valid config")
}

/// Runs `loadgen run --url URL FLAGS… --out <temp dir>` in-process; the directory lives as
/// long as the returned guard.
pub async fn run_at(
    url: &str,
    flags: &[&str],
    stop: loadgen::stop::StopSignal,
) -> (tempfile::TempDir, PathBuf, loadgen::RunOutcome) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut args = vec!["--url", url];
    args.extend(flags);
    args.extend(["--out", out.to_str().unwrap()]);
    let outcome = loadgen::run(config(&args), stop).await.unwrap();
    (dir, out, outcome)
}

/// Declares [`Row`], its decoder and [`ROW_FIELDS`] from one list of fields, so the fields
/// are written once and `tests/contract.rs` holds them to the contract's columns.
macro_rules! row {
    ($($(#[$doc:meta])* $name:ident: $ty:ty,)*) => {
        /// One decoded row: a field per column of `contract/files.json` `requests`, in order.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Row {
            $($(#[$doc])* pub $name: $ty,)*
        }

        /// `Row`'s fields in order: the name and the Rust type as written.
        pub const ROW_FIELDS: &[(&str, &str)] = &[$((stringify!($name), stringify!($ty)),)*];

        fn decode(batch: &RecordBatch) -> Vec<Row> {
            $(let mut $name = <$ty as Cell>::column(batch, stringify!($name)).into_iter();)*
            (0..batch.num_rows())
                .map(|_| Row {
                    $($name: $name.next().expect("one value per row"),)*
                })
                .collect()
        }
    };
}

row! {
    start_ns: i64,
    intended_ns: Option<i64>,
    latency_ns: i64,
    connect_ns: Option<i64>,
    send_ns: Option<i64>,
    ttfb_ns: Option<i64>,
    queue_wait_ns: Option<i64>,
    buffer_wait_ns: Option<i64>,
    op: String,
    status: u16,
    error: Option<String>,
    bytes_sent: u64,
    bytes_received: u64,
    worker: u32,
    phase: String,
    attempt: u8,
    /// The failed check's name (error class `check`).
    check: Option<String>,
    /// `--trace`: the trace id the request's `traceparent` carried.
    trace_id: Option<Text>,
    /// gRPC calls: the reply's status code and message.
    grpc_status: Option<u8>,
    grpc_message: Option<Text>,
}

/// A plain (not dictionary) utf8 cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text(pub String);

impl Cell for Option<Text> {
    fn column(batch: &RecordBatch, name: &str) -> Vec<Self> {
        let values = array(batch, name).as_string::<i32>();
        values
            .iter()
            .map(|v| v.map(|v| Text(v.to_string())))
            .collect()
    }
}

/// A Rust type a column decodes into: a primitive, an `Option` of one for a nullable column,
/// `String` / `Option<String>` for a dictionary column.
trait Cell: Sized {
    fn column(batch: &RecordBatch, name: &str) -> Vec<Self>;
}

fn array<'a>(batch: &'a RecordBatch, name: &str) -> &'a arrow_array::ArrayRef {
    batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

macro_rules! primitive_cells {
    ($($rust:ty => $arrow:ty),*) => {$(
        impl Cell for Option<$rust> {
            fn column(batch: &RecordBatch, name: &str) -> Vec<Self> {
                array(batch, name).as_primitive::<$arrow>().iter().collect()
            }
        }

        impl Cell for $rust {
            fn column(batch: &RecordBatch, name: &str) -> Vec<Self> {
                let values = <Option<$rust> as Cell>::column(batch, name);
                values.into_iter().map(|v| v.expect("not null")).collect()
            }
        }
    )*};
}

primitive_cells!(i64 => Int64Type, u8 => UInt8Type, u16 => UInt16Type, u32 => UInt32Type,
    u64 => UInt64Type);

impl Cell for Option<String> {
    fn column(batch: &RecordBatch, name: &str) -> Vec<Self> {
        let dict = array(batch, name).as_dictionary::<Int32Type>();
        let values = dict.values().as_string::<i32>();
        dict.keys()
            .iter()
            .map(|k| k.map(|k| values.value(k as usize).to_string()))
            .collect()
    }
}

impl Cell for String {
    fn column(batch: &RecordBatch, name: &str) -> Vec<Self> {
        let values = <Option<String> as Cell>::column(batch, name);
        values
            .into_iter()
            .map(|v| v.unwrap_or_else(|| panic!("{name} is never null")))
            .collect()
    }
}

/// Completed segment files of a run, in order.
pub fn segments(run_dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(run_dir.join("requests"))
        .expect("requests dir")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .collect();
    files.sort();
    files
}

/// Parquet key-value metadata of one segment.
pub fn metadata(segment: &Path) -> HashMap<String, String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(segment).unwrap()).unwrap();
    builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect()
}

/// Every row of every segment, checking the schema's column types on the way.
pub fn read_rows(run_dir: &Path) -> Vec<Row> {
    let mut rows = Vec::new();
    for segment in segments(run_dir) {
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&segment).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            check_types(&batch);
            rows.extend(decode(&batch));
        }
    }
    rows
}

/// Every batch read back has the contract's columns, types and nullability.
fn check_types(batch: &RecordBatch) {
    let problems = contract::schema_problems("requests", &batch.schema());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// run.json of a run directory.
pub fn run_json(run_dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap()
}

/// Requests the probe at one connection sent after the level (run.json `probe`; 0 without
/// one): the server counted them beside the run's rows.
pub fn probe_requests(run_dir: &Path) -> u64 {
    run_json(run_dir)["probe"]["requests"].as_u64().unwrap_or(0)
}

/// The `loadgen` binary of this build, with stdin closed and output captured.
pub fn loadgen_bin() -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_loadgen"));
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

/// The `loadgen` binary run by `sh -c 'SETUP; exec loadgen ARGS…'`, so that `SETUP` (shell
/// limits, ignored signals) applies to it; pass the loadgen arguments with `.args(…)`.
pub fn loadgen_under_sh(setup: &str) -> std::process::Command {
    let mut command = std::process::Command::new("sh");
    command
        .arg("-c")
        .arg(format!("{setup}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_loadgen"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    command
}

/// A reference server on 127.0.0.1 with the runtime that serves it, for tests that drive
/// the `loadgen` binary from a plain (synchronous) test thread.
pub struct ServerOnRuntime {
    pub runtime: tokio::runtime::Runtime,
    pub server: Option<servers::RunningServer>,
}

impl ServerOnRuntime {
    pub fn start(config: servers::ServerConfig) -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let server = runtime
            .block_on(servers::start(config))
            .expect("server starts");
        ServerOnRuntime {
            runtime,
            server: Some(server),
        }
    }

    pub fn server(&self) -> &servers::RunningServer {
        self.server.as_ref().expect("server is running")
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server().url())
    }

    /// Stops the server (closing its connections) and waits until it is gone.
    pub fn stop(&mut self) {
        if let Some(server) = self.server.take() {
            self.runtime.block_on(server.shutdown());
        }
    }

    /// Starts a new server (after [`ServerOnRuntime::stop`]).
    pub fn restart(&mut self, config: servers::ServerConfig) {
        assert!(self.server.is_none(), "stop the running server first");
        self.server = Some(
            self.runtime
                .block_on(servers::start(config))
                .expect("server restarts"),
        );
    }
}

impl Drop for ServerOnRuntime {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Nanoseconds since the Unix epoch, the unit of `loadgen.anchor_unix_ns`.
pub fn unix_ns(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i64
}

/// The run's anchor (wall clock of `start_ns = 0`), from a segment's metadata.
pub fn anchor_unix_ns(segment: &Path) -> i64 {
    metadata(segment)["loadgen.anchor_unix_ns"].parse().unwrap()
}

/// Rows whose `error` is `class`.
pub fn rows_with_error(rows: &[Row], class: &str) -> usize {
    rows.iter()
        .filter(|r| r.error.as_deref() == Some(class))
        .count()
}

/// Checks that run.json's summary describes exactly the rows on disk: as many requests as
/// rows, `ok` + the failures of every class = rows, and each class's count = its rows.
/// Returns the rows and the summary.
pub fn rows_matching_summary(run_dir: &Path) -> (Vec<Row>, serde_json::Value) {
    let rows = read_rows(run_dir);
    let summary = run_json(run_dir)["summary"].clone();
    let errors = summary["errors"].as_object().expect("summary.errors");
    let by_class: u64 = errors.values().map(|n| n.as_u64().unwrap()).sum();
    assert_eq!(summary["requests"], rows.len() as u64, "{summary}");
    assert_eq!(summary["failed"].as_u64().unwrap(), by_class, "{summary}");
    assert_eq!(
        summary["ok"].as_u64().unwrap() + by_class,
        rows.len() as u64,
        "{summary}"
    );
    let ok_rows = rows.iter().filter(|r| r.error.is_none()).count() as u64;
    assert_eq!(summary["ok"], ok_rows, "{summary}");
    for (class, n) in errors {
        assert_eq!(
            rows_with_error(&rows, class) as u64,
            n.as_u64().unwrap(),
            "rows of class {class}"
        );
    }
    (rows, summary)
}
