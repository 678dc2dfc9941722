//! A level's rows read back from its Parquet segments, the way any reader would: what the
//! judgement needs of each request (latency from its intended send time, its op, whether it
//! failed, when it ended), split into the `warmup` stretch and the judged rest.
//!
//! It reads files the engine wrote and never measures anything itself.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, UInt16Type};
use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use crate::record::phase::WARMUP;

/// One request as the judgement sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// When the schedule wanted it sent (ns from the run's anchor).
    pub intended_ns: i64,
    /// End of the response (or of the failure) minus the intended send time: latency that a
    /// server falling behind cannot hide.
    pub from_intended_ns: i64,
    /// When it ended (ns from the run's anchor).
    pub end_ns: i64,
    /// How long after its intended time the send started: the client's own delay (the open
    /// model hands a send off at its time whatever the server does).
    pub send_lag_ns: i64,
    /// Index into [`LevelRows::ops`].
    pub op: u16,
    pub failed: bool,
    /// A response arrived (`status` > 0); only those have a latency that counts.
    pub responded: bool,
}

/// Every row of a level.
#[derive(Debug, Clone, Default)]
pub struct LevelRows {
    pub ops: Vec<String>,
    /// Rows after the warm-up, by intended send time.
    pub judged: Vec<Sample>,
    /// Rows of the warm-up (they still end inside the judged window, and count there).
    pub warmup: Vec<Sample>,
}

const COLUMNS: [&str; 7] = [
    "intended_ns",
    "start_ns",
    "latency_ns",
    "op",
    "status",
    "error",
    "phase",
];

impl LevelRows {
    /// Reads every closed segment of the run directory `run_dir` (`requests/part-*.parquet`).
    pub fn read(run_dir: &Path) -> Result<Self, String> {
        let mut rows = LevelRows::default();
        let mut op_index = HashMap::new();
        for path in segments(&run_dir.join("requests"))? {
            rows.read_segment(&path, &mut op_index)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        rows.judged.sort_by_key(|s| s.intended_ns);
        rows.warmup.sort_by_key(|s| s.intended_ns);
        Ok(rows)
    }

    fn read_segment(
        &mut self,
        path: &Path,
        op_index: &mut HashMap<String, u16>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?;
        let schema = builder.parquet_schema();
        let wanted: Vec<usize> = (0..schema.num_columns())
            .filter(|&i| COLUMNS.contains(&schema.column(i).name()))
            .collect();
        let mask = ProjectionMask::leaves(schema, wanted);
        for batch in builder.with_projection(mask).build()? {
            self.add_batch(&batch?, op_index)?;
        }
        Ok(())
    }

    fn add_batch(
        &mut self,
        batch: &RecordBatch,
        op_index: &mut HashMap<String, u16>,
    ) -> Result<(), String> {
        let column = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| format!("has no column {name}"))
        };
        let intended = column("intended_ns")?.as_primitive::<Int64Type>();
        let start = column("start_ns")?.as_primitive::<Int64Type>();
        let latency = column("latency_ns")?.as_primitive::<Int64Type>();
        let status = column("status")?.as_primitive::<UInt16Type>();
        let error = column("error")?;
        let ops = strings(column("op")?.as_ref());
        let phases = strings(column("phase")?.as_ref());
        for i in 0..batch.num_rows() {
            let end_ns = start.value(i) + latency.value(i);
            let intended_ns = if intended.is_null(i) {
                start.value(i)
            } else {
                intended.value(i)
            };
            let next = u16::try_from(op_index.len()).unwrap_or(u16::MAX);
            let op = *op_index.entry(ops[i].clone()).or_insert_with(|| {
                self.ops.push(ops[i].clone());
                next
            });
            let sample = Sample {
                intended_ns,
                from_intended_ns: end_ns - intended_ns,
                end_ns,
                send_lag_ns: (start.value(i) - intended_ns).max(0),
                op,
                failed: error.is_valid(i),
                responded: status.value(i) > 0,
            };
            if phases[i] == WARMUP {
                self.warmup.push(sample);
            } else {
                self.judged.push(sample);
            }
        }
        Ok(())
    }

    /// These rows with the warm-up judged when nothing came after it (a level stopped early,
    /// in its warm-up): what it measured is then all it has to show.
    pub fn or_warmup(mut self) -> Self {
        if self.judged.is_empty() {
            self.judged = std::mem::take(&mut self.warmup);
        }
        self
    }

    /// Mean latency of the judged rows that succeeded (a calibration's R(1): an error answered
    /// fast says nothing of how long a request takes), and how many judged rows failed.
    pub fn successful_mean_ns(&self) -> (f64, u64) {
        let ok: Vec<i64> = self
            .judged
            .iter()
            .filter(|s| !s.failed)
            .map(|s| s.from_intended_ns)
            .collect();
        let failed = (self.judged.len() - ok.len()) as u64;
        let mean = ok.iter().sum::<i64>() as f64 / ok.len() as f64;
        (if ok.is_empty() { f64::NAN } else { mean }, failed)
    }

    /// The judged window: from the first judged send's intended time to the last one's.
    pub fn window_ns(&self) -> Option<(i64, i64)> {
        let first = self.judged.first()?.intended_ns;
        let last = self.judged.last()?.intended_ns;
        (last > first).then_some((first, last))
    }

    /// The index of `op`, if any row has it.
    pub fn op_index(&self, op: &str) -> Option<u16> {
        self.ops
            .iter()
            .position(|o| o == op)
            .and_then(|i| u16::try_from(i).ok())
    }
}

/// The closed segments in `requests/`, in order (a `.partial` file is still being written).
fn segments(dir: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    crate::store::segments(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// A dictionary (or plain) string column as owned strings; nulls as "".
fn strings(array: &dyn Array) -> Vec<String> {
    if let Some(dict) = array.as_dictionary_opt::<Int32Type>() {
        let values = dict.values().as_string::<i32>();
        return (0..dict.len())
            .map(|i| {
                if dict.is_null(i) {
                    String::new()
                } else {
                    values.value(dict.keys().value(i) as usize).to_string()
                }
            })
            .collect();
    }
    let plain = array.as_string::<i32>();
    (0..plain.len())
        .map(|i| plain.value(i).to_string())
        .collect()
}
