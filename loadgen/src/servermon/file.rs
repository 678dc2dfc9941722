//! The server-metrics file: its Arrow schema, the rows not yet written, and the Parquet file
//! (a [`ParquetFile`]: hidden as `.partial` until the scraper closes it).
//!
//! Column names, units and meanings are in `contract/files.json` (`files.server_metrics`);
//! [`schema`] must match it (loadgen/tests/contract.rs). One row per sample a scrape returned
//! (`metric`, `labels`, `value` set, `error` null), or one row for a scrape that failed
//! (`error` set, the sample columns null), so failures are counted from the file itself.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::builder::{Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::SCHEMA_VERSION;
use crate::clock::Anchor;
use crate::record::parquet_file::{FileError, ParquetFile};

/// The Arrow schema of server-metrics.parquet.
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("t_ns", DataType::Int64, false),
        Field::new("scrape_ns", DataType::Int64, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("metric", DataType::Utf8, true),
        Field::new("labels", DataType::Utf8, true),
        Field::new("value", DataType::Float64, true),
        Field::new("error", DataType::Utf8, true),
    ]))
}

/// One sample of one scrape, as it goes into a row.
pub(super) struct Sample<'a> {
    pub(super) metric: &'a str,
    /// `name="value"` pairs sorted by name, joined by commas; empty without labels.
    pub(super) labels: &'a str,
    pub(super) value: f64,
}

/// Rows accumulated since the last row group.
pub(super) struct Columns {
    t_ns: Int64Builder,
    scrape_ns: Int64Builder,
    source: StringBuilder,
    metric: StringBuilder,
    labels: StringBuilder,
    value: Float64Builder,
    error: StringBuilder,
    rows: usize,
}

impl Columns {
    pub(super) fn new() -> Self {
        Columns {
            t_ns: Int64Builder::new(),
            scrape_ns: Int64Builder::new(),
            source: StringBuilder::new(),
            metric: StringBuilder::new(),
            labels: StringBuilder::new(),
            value: Float64Builder::new(),
            error: StringBuilder::new(),
            rows: 0,
        }
    }

    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    fn scrape(&mut self, t_ns: i64, scrape_ns: i64, source: &str) {
        self.t_ns.append_value(t_ns);
        self.scrape_ns.append_value(scrape_ns);
        self.source.append_value(source);
        self.rows += 1;
    }

    /// A sample of a scrape that started at `t_ns` and took `scrape_ns`.
    pub(super) fn sample(&mut self, t_ns: i64, scrape_ns: i64, source: &str, sample: &Sample) {
        self.scrape(t_ns, scrape_ns, source);
        self.metric.append_value(sample.metric);
        self.labels.append_value(sample.labels);
        self.value.append_value(sample.value);
        self.error.append_null();
    }

    /// A scrape that returned no samples: why.
    pub(super) fn failure(&mut self, t_ns: i64, scrape_ns: i64, source: &str, error: &str) {
        self.scrape(t_ns, scrape_ns, source);
        self.metric.append_null();
        self.labels.append_null();
        self.value.append_null();
        self.error.append_value(error);
    }

    /// Builds a RecordBatch and leaves the builders empty for the next row group.
    pub(super) fn take(&mut self) -> RecordBatch {
        let columns: Vec<ArrayRef> = vec![
            Arc::new(self.t_ns.finish()),
            Arc::new(self.scrape_ns.finish()),
            Arc::new(self.source.finish()),
            Arc::new(self.metric.finish()),
            Arc::new(self.labels.finish()),
            Arc::new(self.value.finish()),
            Arc::new(self.error.finish()),
        ];
        self.rows = 0;
        RecordBatch::try_new(schema(), columns).expect("columns match the server-metrics schema")
    }
}

/// Starts the server-metrics file at `path` (hidden as `.partial` until closed), with the
/// metadata the analysis reads: the anchor, the interval and the per-scrape timeout.
pub(super) fn create(
    path: &Path,
    anchor: &Anchor,
    interval: Duration,
    timeout: Duration,
) -> Result<ParquetFile, FileError> {
    let metadata = [
        ("loadgen.schema_version", SCHEMA_VERSION.to_string()),
        ("loadgen.kind", "server-metrics".to_string()),
        ("loadgen.anchor_unix_ns", anchor.unix_ns.to_string()),
        (
            "loadgen.interval_ns",
            crate::clock::nanos(interval).to_string(),
        ),
        (
            "loadgen.timeout_ns",
            crate::clock::nanos(timeout).to_string(),
        ),
    ];
    ParquetFile::create_with_metadata(path, schema(), metadata)
}
