//! The writer's inverse: the rows of a run's closed segments turned back into the
//! [`RequestRecord`]s they were written from, and counted into the aggregates the writer
//! counts them into ([`Aggregator::observe`], the one rule), so what comes back is what the
//! process would have handed over for those rows. A spread run's parent reads so the segments
//! of a process that died before handing its aggregates over (`runner::finish_spread`).
//!
//! What no column holds cannot come back: a rejection's `Retry-After` (the rows still count as
//! rejections, without it), and the `op`, `phase` and `check` indexes come back through their
//! labels, which must be the reader's run's. The open segment of a process that died (its
//! hidden `.partial` file, without a footer) cannot be read: it is named, its rows are lost.

use std::collections::HashMap;
use std::fs::File;
use std::num::NonZeroU128;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, ArrowPrimitiveType, PrimitiveArray, RecordBatch, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::record::{ErrorClass, Labels, RequestRecord};
use crate::stats::Aggregator;

/// What a run directory's `requests/` holds, read back.
#[derive(Debug, Clone)]
pub struct ReadBack {
    /// The rows of every segment read, counted as the writer counts them.
    pub stats: Aggregator,
    /// `loadgen.anchor_unix_ns` of the segments, which their times (and `stats`') count
    /// from; `None` when none was read.
    pub anchor_unix_ns: Option<i64>,
    pub rows: u64,
    pub bytes_on_disk: u64,
    /// The segments read, by name.
    pub segments: Vec<String>,
    /// Segments that could not be read, each with why: their rows are not in `stats`.
    pub unreadable: Vec<String>,
    /// Segments left open (hidden, without a footer): their rows are lost.
    pub open: Vec<String>,
}

/// The rows of every closed segment in `requests_dir`, counted into a copy of `empty` (the
/// run's aggregates before any row); `labels` are the run's.
pub fn read_back(requests_dir: &Path, labels: &Labels, empty: &Aggregator) -> ReadBack {
    let mut back = ReadBack {
        stats: empty.clone(),
        anchor_unix_ns: None,
        rows: 0,
        bytes_on_disk: 0,
        segments: Vec::new(),
        unreadable: Vec::new(),
        open: open_segments(requests_dir),
    };
    let names = Names::of(labels);
    for path in super::segments(requests_dir).unwrap_or_default() {
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        match read_segment(&path, &names, empty) {
            Ok((anchor_unix_ns, rows, stats)) => {
                let anchor = *back.anchor_unix_ns.get_or_insert(anchor_unix_ns);
                back.stats.merge(&stats, anchor_unix_ns - anchor);
                back.rows += rows;
                back.bytes_on_disk += std::fs::metadata(&path).map_or(0, |m| m.len());
                back.segments.push(name);
            }
            Err(why) => back.unreadable.push(format!("{name}: {why}")),
        }
    }
    back
}

/// The hidden `.NAME.partial` files of segments being written when the process ended.
fn open_segments(requests_dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(requests_dir) else {
        return Vec::new();
    };
    let mut open: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n.ends_with(".partial"))
        .collect();
    open.sort();
    open
}

/// One segment's anchor, rows and aggregates; nothing of it when any of it cannot be read.
fn read_segment(
    path: &Path,
    names: &Names,
    empty: &Aggregator,
) -> Result<(i64, u64, Aggregator), String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| e.to_string())?;
    let anchor_unix_ns = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .find(|kv| kv.key == "loadgen.anchor_unix_ns")
        .and_then(|kv| kv.value.as_deref()?.parse::<i64>().ok())
        .ok_or("no loadgen.anchor_unix_ns in its metadata")?;
    let mut stats = empty.clone();
    let mut rows = 0;
    for batch in builder.build().map_err(|e| e.to_string())? {
        let batch = batch.map_err(|e| e.to_string())?;
        let columns = Columns::of(&batch, names)?;
        for i in 0..batch.num_rows() {
            stats.observe(&columns.record(i)?);
        }
        rows += batch.num_rows() as u64;
    }
    Ok((anchor_unix_ns, rows, stats))
}

/// The run's labels by name, to turn a dictionary column's text back into its index.
struct Names<'a> {
    ops: HashMap<&'a str, u16>,
    phases: HashMap<&'a str, u16>,
    checks: HashMap<&'a str, u16>,
}

impl<'a> Names<'a> {
    fn of(labels: &'a Labels) -> Self {
        let index = |names: &'a [String]| {
            (names.iter().enumerate())
                .map(|(i, n)| (n.as_str(), i as u16))
                .collect()
        };
        Names {
            ops: index(&labels.ops),
            phases: index(&labels.phases),
            checks: index(&labels.checks),
        }
    }
}

/// A dictionary column, each row's value as what its label stands for: `Err(label)` for a
/// label the run does not have.
type Labelled<T> = Vec<Option<Result<T, String>>>;

/// One batch's columns, typed as the writer wrote them (`record::schema`).
struct Columns<'b> {
    i64s: [&'b PrimitiveArray<Int64Type>; 8],
    op: Labelled<u16>,
    status: &'b PrimitiveArray<UInt16Type>,
    error: Labelled<ErrorClass>,
    bytes: [&'b PrimitiveArray<UInt64Type>; 2],
    worker: &'b PrimitiveArray<UInt32Type>,
    phase: Labelled<u16>,
    attempt: &'b PrimitiveArray<UInt8Type>,
    check: Labelled<u16>,
    trace_id: &'b StringArray,
    grpc_status: &'b PrimitiveArray<UInt8Type>,
    grpc_message: &'b StringArray,
}

impl<'b> Columns<'b> {
    fn of(batch: &'b RecordBatch, names: &Names) -> Result<Self, String> {
        let i64s = |name| primitive::<Int64Type>(batch, name);
        let class = |label: &str| ErrorClass::ALL.into_iter().find(|c| c.as_str() == label);
        Ok(Columns {
            i64s: [
                i64s("start_ns")?,
                i64s("intended_ns")?,
                i64s("latency_ns")?,
                i64s("connect_ns")?,
                i64s("send_ns")?,
                i64s("ttfb_ns")?,
                i64s("queue_wait_ns")?,
                i64s("buffer_wait_ns")?,
            ],
            op: labelled(batch, "op", |l| names.ops.get(l).copied())?,
            status: primitive(batch, "status")?,
            error: labelled(batch, "error", class)?,
            bytes: [
                primitive(batch, "bytes_sent")?,
                primitive(batch, "bytes_received")?,
            ],
            worker: primitive(batch, "worker")?,
            phase: labelled(batch, "phase", |l| names.phases.get(l).copied())?,
            attempt: primitive(batch, "attempt")?,
            check: labelled(batch, "check", |l| names.checks.get(l).copied())?,
            trace_id: text(batch, "trace_id")?,
            grpc_status: primitive(batch, "grpc_status")?,
            grpc_message: text(batch, "grpc_message")?,
        })
    }

    /// Row `i` as the record it was written from (`retry_after_s`, not a column, is `None`).
    fn record(&self, i: usize) -> Result<RequestRecord, String> {
        let [start, intended, latency, connect, send, ttfb, queue_wait, buffer_wait] =
            self.i64s.map(|c| value(c, i));
        let [bytes_sent, bytes_received] = self.bytes.map(|c| c.value(i));
        Ok(RequestRecord {
            start_ns: start.ok_or("start_ns is null")?,
            intended_ns: intended,
            latency_ns: latency.ok_or("latency_ns is null")?,
            connect_ns: connect,
            send_ns: send,
            ttfb_ns: ttfb,
            queue_wait_ns: queue_wait,
            buffer_wait_ns: buffer_wait,
            op: label(&self.op, i)?.ok_or("op is null")?,
            status: self.status.value(i),
            error: label(&self.error, i)?,
            bytes_sent,
            bytes_received,
            worker: self.worker.value(i),
            phase: label(&self.phase, i)?.ok_or("phase is null")?,
            attempt: self.attempt.value(i),
            check: label(&self.check, i)?,
            trace_id: text_at(self.trace_id, i)
                .and_then(|hex| u128::from_str_radix(hex, 16).ok())
                .and_then(NonZeroU128::new),
            grpc_status: value(self.grpc_status, i),
            grpc_message: text_at(self.grpc_message, i).map(crate::record::grpc::intern),
            retry_after_s: None,
        })
    }
}

fn value<T: ArrowPrimitiveType>(column: &PrimitiveArray<T>, i: usize) -> Option<T::Native> {
    (!column.is_null(i)).then(|| column.value(i))
}

fn text_at(column: &StringArray, i: usize) -> Option<&str> {
    (!column.is_null(i)).then(|| column.value(i))
}

fn label<T: Copy>(column: &Labelled<T>, i: usize) -> Result<Option<T>, String> {
    match &column[i] {
        None => Ok(None),
        Some(Ok(v)) => Ok(Some(*v)),
        Some(Err(label)) => Err(format!("{label:?} is not a label of this run")),
    }
}

fn primitive<'b, T: ArrowPrimitiveType>(
    batch: &'b RecordBatch,
    name: &str,
) -> Result<&'b PrimitiveArray<T>, String> {
    (batch
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<T>()))
    .ok_or_else(|| format!("no {name} column of the record schema's type"))
}

fn text<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b StringArray, String> {
    (batch
        .column_by_name(name)
        .and_then(|c| c.as_string_opt::<i32>()))
    .ok_or_else(|| format!("no {name} column of the record schema's type"))
}

/// A dictionary column's rows, each label looked up once per distinct value.
fn labelled<T: Copy>(
    batch: &RecordBatch,
    name: &str,
    look_up: impl Fn(&str) -> Option<T>,
) -> Result<Labelled<T>, String> {
    let dictionary = (batch.column_by_name(name))
        .and_then(|c| c.as_dictionary_opt::<Int32Type>())
        .ok_or_else(|| format!("no {name} column of the record schema's type"))?;
    let values = (dictionary.values().as_string_opt::<i32>())
        .ok_or_else(|| format!("{name}'s labels are not text"))?;
    let known: Vec<Result<T, String>> = (0..values.len())
        .map(|v| look_up(values.value(v)).ok_or_else(|| values.value(v).to_string()))
        .collect();
    Ok(dictionary
        .keys()
        .iter()
        .map(|key| key.and_then(|k| known.get(k as usize).cloned()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::writer::{spawn, WriterConfig};
    use std::time::Duration;

    fn labels() -> Labels {
        Labels {
            ops: vec!["GET /a".into(), "POST /b".into()],
            phases: vec!["warmup".into(), "main".into()],
            checks: vec!["json /id present".into()],
        }
    }

    /// A row of every kind the aggregates tell apart: failures of each class, checks,
    /// retries, the open model's intended times, the warm-up phase, gRPC statuses.
    fn sample(i: usize) -> RequestRecord {
        let some_if = |cond: bool, v: i64| cond.then_some(v);
        let error = i
            .is_multiple_of(4)
            .then(|| ErrorClass::ALL[(i / 4) % ErrorClass::ALL.len()]);
        RequestRecord {
            start_ns: i as i64 * 1_000,
            intended_ns: some_if(i.is_multiple_of(3), i as i64 * 990),
            latency_ns: 50_000 + (i as i64 * 7919) % 900_000,
            connect_ns: some_if(i.is_multiple_of(7), 12_345),
            send_ns: some_if(!i.is_multiple_of(5), 30_000),
            ttfb_ns: some_if(!i.is_multiple_of(5), 40_000),
            queue_wait_ns: some_if(i.is_multiple_of(2), i as i64),
            buffer_wait_ns: None,
            op: (i % 2) as u16,
            status: [0, 200, 500, 429, 503][i % 5],
            error,
            bytes_sent: 100 + i as u64,
            bytes_received: 200 + i as u64,
            worker: (i % 9) as u32,
            phase: u16::from(i >= 100),
            attempt: 1 + (i % 3) as u8,
            check: (error == Some(ErrorClass::Check)).then_some(0),
            trace_id: NonZeroU128::new(i as u128 * 0x1234_5678_9abc),
            grpc_status: (error == Some(ErrorClass::GrpcStatus)).then_some(14),
            grpc_message: (error == Some(ErrorClass::GrpcStatus))
                .then(|| crate::record::grpc::intern("read back (a test)")),
            retry_after_s: None,
        }
    }

    /// `records` written into `dir` by the run's own writer (700 a hand-off, as workers hand
    /// them over), its segments anchored at `anchor_unix_ns`.
    fn write(
        dir: &std::path::Path,
        anchor_unix_ns: i64,
        empty: &Aggregator,
        records: &[RequestRecord],
    ) -> crate::store::writer::WriterReport {
        let (tx, thread) = spawn(WriterConfig {
            dir: dir.to_path_buf(),
            metadata: vec![("loadgen.anchor_unix_ns".into(), anchor_unix_ns.to_string())],
            labels: labels(),
            segment_interval: Duration::from_secs(3600),
            stats: empty.clone(),
            closed: None,
            publish: None,
            samples: None,
        })
        .unwrap();
        for chunk in records.chunks(700) {
            tx.send(chunk.to_vec()).unwrap();
        }
        drop(tx);
        thread.finish().unwrap()
    }

    /// The rows the writer wrote, read back, are counted into exactly the aggregates the
    /// writer counted them into: the same JSON, every count and histogram bucket.
    #[test]
    fn segments_read_back_into_the_writers_aggregates() {
        let dir = tempfile::tempdir().unwrap();
        let empty = Aggregator::new(2, 2, 1, 3, 5_000).leaving_out(Some(0));
        let records: Vec<RequestRecord> = (0..5_000).map(sample).collect();
        let report = write(dir.path(), 1_700_000_000, &empty, &records);
        std::fs::write(dir.path().join(".part-00001.parquet.partial"), b"PAR1").unwrap();
        let back = read_back(dir.path(), &labels(), &empty);
        assert_eq!(back.unreadable, Vec::<String>::new());
        assert_eq!(back.open, [".part-00001.parquet.partial"]);
        assert_eq!((back.rows, back.segments.len()), (5_000, 1));
        assert_eq!(back.anchor_unix_ns, Some(1_700_000_000));
        assert_eq!(back.bytes_on_disk, report.bytes_on_disk);
        let json = |a: &Aggregator| serde_json::to_value(a).unwrap();
        assert_eq!(json(&back.stats), json(&report.stats));
        assert!(back.stats.left_out_rows > 0 && !back.stats.failed_grpc.is_empty());
    }

    /// A label the reader's run does not have makes the segment unreadable, whole.
    #[test]
    fn a_segment_of_another_runs_labels_is_named_and_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let empty = Aggregator::new(2, 2, 1, 1, 0);
        write(
            dir.path(),
            0,
            &empty,
            &(0..10).map(sample).collect::<Vec<_>>(),
        );
        let mut other = labels();
        other.ops[1] = "PUT /c".into();
        let back = read_back(dir.path(), &other, &empty);
        assert_eq!((back.rows, back.stats.requests()), (0, 0));
        assert_eq!(back.unreadable.len(), 1, "{:?}", back.unreadable);
        assert!(back.unreadable[0].contains("\"POST /b\""), "{back:?}");
    }
}
