//! The client-metrics file: its Arrow schema, the rows not yet written, and the Parquet file
//! (a [`ParquetFile`]: hidden as `.partial` until the sampler closes it).
//!
//! Column names, units and meanings are in `contract/files.json` (`files.client_metrics`);
//! [`schema`] must match it (loadgen/tests/contract.rs). What a row holds is decided by the
//! sampler (`mod.rs`, from `probe`'s readings) and handed over as a typed [`Row`]; this module
//! turns rows into columns and writes them.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use arrow_array::builder::{
    Float64Builder, Int64Builder, ListBuilder, StringBuilder, StructBuilder, UInt64Builder,
};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};

use super::cgroup::{CpuLimit, CpuStat};
use super::probe::{Change, NetCounters};
use super::SCHEMA_VERSION;
use crate::clock::Anchor;
use crate::record::parquet_file::{FileError, ParquetFile};
use crate::stats::activity::Totals;

fn interface_fields() -> Fields {
    Fields::from(vec![
        Field::new("interface", DataType::Utf8, false),
        Field::new("rx_bytes", DataType::UInt64, false),
        Field::new("tx_bytes", DataType::UInt64, false),
        Field::new("rx_packets", DataType::UInt64, false),
        Field::new("tx_packets", DataType::UInt64, false),
    ])
}

fn phase_fields() -> Fields {
    Fields::from(vec![
        Field::new("phase", DataType::Utf8, false),
        Field::new("workers_alive", DataType::Int64, false),
        Field::new("alive_ns", DataType::Int64, false),
        Field::new("busy_ns", DataType::Int64, false),
        Field::new("waiting_ns", DataType::Int64, false),
        Field::new("sent", DataType::UInt64, false),
    ])
}

fn phase_item() -> FieldRef {
    Arc::new(Field::new("item", DataType::Struct(phase_fields()), false))
}

fn core_item() -> FieldRef {
    Arc::new(Field::new("item", DataType::Float64, false))
}

fn interface_item() -> FieldRef {
    Arc::new(Field::new(
        "item",
        DataType::Struct(interface_fields()),
        false,
    ))
}

/// The Arrow schema of client-metrics.parquet (see the module docs for meanings).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("t_ns", DataType::Int64, false),
        Field::new("interval_ns", DataType::Int64, false),
        Field::new("cpu_user_ns", DataType::Int64, true),
        Field::new("cpu_sys_ns", DataType::Int64, true),
        Field::new("cpu_utilisation", DataType::Float64, true),
        Field::new("throttled_ns", DataType::Int64, true),
        Field::new("nr_periods", DataType::Int64, true),
        Field::new("nr_throttled", DataType::Int64, true),
        Field::new("core_utilisation", DataType::List(core_item()), true),
        Field::new("rss_bytes", DataType::UInt64, true),
        Field::new("open_fds", DataType::UInt64, true),
        Field::new("network", DataType::List(interface_item()), true),
        Field::new("requests_in_flight", DataType::Int64, false),
        Field::new("workers_alive", DataType::Int64, false),
        Field::new("buffer_depth", DataType::Int64, false),
        Field::new("alive_ns", DataType::Int64, false),
        Field::new("busy_ns", DataType::Int64, false),
        Field::new("waiting_ns", DataType::Int64, false),
        Field::new("sent", DataType::UInt64, false),
        Field::new("scheduled", DataType::UInt64, false),
        Field::new("dropped", DataType::UInt64, false),
        Field::new("late", DataType::UInt64, false),
        Field::new("send_lag_ns", DataType::Int64, false),
        Field::new("phases", DataType::List(phase_item()), false),
    ]))
}

/// One row of the file: an interval's change as the probe saw it, the run's gauges at its
/// end, and the workers' time in it.
pub(super) struct Row<'a> {
    /// The end of the interval, on the run's time base.
    pub(super) t_ns: i64,
    pub(super) change: &'a Change<'a>,
    /// The process's CPU time over the interval's wall time, against the CPU limit.
    pub(super) cpu_utilisation: Option<f64>,
    pub(super) requests_in_flight: i64,
    pub(super) workers_alive: i64,
    pub(super) buffer_depth: i64,
    pub(super) activity: ActivityRow<'a>,
}

/// The workers' time and the schedule's sends in one interval: every worker's time
/// (`total`), each phase's with its label, and the sends the schedule asked for and dropped.
pub(super) struct ActivityRow<'a> {
    pub(super) total: Totals,
    pub(super) phases: Vec<(&'a str, Totals)>,
    pub(super) scheduled: u64,
    pub(super) dropped: u64,
}

/// Rows accumulated since the last row group.
pub(super) struct Columns {
    t_ns: Int64Builder,
    interval_ns: Int64Builder,
    cpu_user_ns: Int64Builder,
    cpu_sys_ns: Int64Builder,
    cpu_utilisation: Float64Builder,
    throttled_ns: Int64Builder,
    nr_periods: Int64Builder,
    nr_throttled: Int64Builder,
    core_utilisation: ListBuilder<Float64Builder>,
    rss_bytes: UInt64Builder,
    open_fds: UInt64Builder,
    network: ListBuilder<StructBuilder>,
    requests_in_flight: Int64Builder,
    workers_alive: Int64Builder,
    buffer_depth: Int64Builder,
    activity: ActivityColumns,
    rows: usize,
}

/// The workers' time and the open model's schedule in each interval.
struct ActivityColumns {
    alive_ns: Int64Builder,
    busy_ns: Int64Builder,
    waiting_ns: Int64Builder,
    sent: UInt64Builder,
    scheduled: UInt64Builder,
    dropped: UInt64Builder,
    late: UInt64Builder,
    send_lag_ns: Int64Builder,
    phases: ListBuilder<StructBuilder>,
}

impl ActivityColumns {
    fn new() -> Self {
        ActivityColumns {
            alive_ns: Int64Builder::new(),
            busy_ns: Int64Builder::new(),
            waiting_ns: Int64Builder::new(),
            sent: UInt64Builder::new(),
            scheduled: UInt64Builder::new(),
            dropped: UInt64Builder::new(),
            late: UInt64Builder::new(),
            send_lag_ns: Int64Builder::new(),
            phases: ListBuilder::new(StructBuilder::from_fields(phase_fields(), 0))
                .with_field(phase_item()),
        }
    }

    fn append(&mut self, row: &ActivityRow) {
        let total = &row.total;
        self.alive_ns.append_value(total.alive_ns);
        self.busy_ns.append_value(total.busy_ns);
        self.waiting_ns.append_value(total.waiting_ns);
        self.sent.append_value(total.sent);
        self.scheduled.append_value(row.scheduled);
        self.dropped.append_value(row.dropped);
        self.late.append_value(total.late);
        self.send_lag_ns.append_value(total.send_lag_ns);
        let items = self.phases.values();
        for (label, t) in &row.phases {
            field::<StringBuilder>(items, 0).append_value(label);
            field::<Int64Builder>(items, 1).append_value(t.workers_alive as i64);
            field::<Int64Builder>(items, 2).append_value(t.alive_ns);
            field::<Int64Builder>(items, 3).append_value(t.busy_ns);
            field::<Int64Builder>(items, 4).append_value(t.waiting_ns);
            field::<UInt64Builder>(items, 5).append_value(t.sent);
            items.append(true);
        }
        self.phases.append(true);
    }

    fn finish(&mut self) -> Vec<ArrayRef> {
        vec![
            Arc::new(self.alive_ns.finish()),
            Arc::new(self.busy_ns.finish()),
            Arc::new(self.waiting_ns.finish()),
            Arc::new(self.sent.finish()),
            Arc::new(self.scheduled.finish()),
            Arc::new(self.dropped.finish()),
            Arc::new(self.late.finish()),
            Arc::new(self.send_lag_ns.finish()),
            Arc::new(self.phases.finish()),
        ]
    }
}

/// The builder of a struct item's `i`-th field, in the order of [`phase_fields`] or
/// [`interface_fields`].
fn field<T: arrow_array::builder::ArrayBuilder>(items: &mut StructBuilder, i: usize) -> &mut T {
    items
        .field_builder::<T>(i)
        .expect("struct fields are built in schema order")
}

impl Columns {
    pub(super) fn new() -> Self {
        Columns {
            t_ns: Int64Builder::new(),
            interval_ns: Int64Builder::new(),
            cpu_user_ns: Int64Builder::new(),
            cpu_sys_ns: Int64Builder::new(),
            cpu_utilisation: Float64Builder::new(),
            throttled_ns: Int64Builder::new(),
            nr_periods: Int64Builder::new(),
            nr_throttled: Int64Builder::new(),
            core_utilisation: ListBuilder::new(Float64Builder::new()).with_field(core_item()),
            rss_bytes: UInt64Builder::new(),
            open_fds: UInt64Builder::new(),
            network: ListBuilder::new(StructBuilder::from_fields(interface_fields(), 0))
                .with_field(interface_item()),
            requests_in_flight: Int64Builder::new(),
            workers_alive: Int64Builder::new(),
            buffer_depth: Int64Builder::new(),
            activity: ActivityColumns::new(),
            rows: 0,
        }
    }

    /// Rows appended since the last [`Columns::take`].
    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    /// Appends one row (null where the probe could not read /proc).
    pub(super) fn append(&mut self, row: &Row) {
        let change = row.change;
        self.t_ns.append_value(row.t_ns);
        self.interval_ns.append_value(change.wall_ns);
        let cpu = change.cpu;
        self.cpu_user_ns
            .append_option(cpu.map(|c| c.user_ns as i64));
        self.cpu_sys_ns.append_option(cpu.map(|c| c.sys_ns as i64));
        self.cpu_utilisation.append_option(row.cpu_utilisation);
        let throttling = change.throttling;
        let counter = |pick: fn(&CpuStat) -> u64| throttling.as_ref().map(|t| pick(t) as i64);
        self.throttled_ns.append_option(counter(|t| t.throttled_ns));
        self.nr_periods.append_option(counter(|t| t.nr_periods));
        self.nr_throttled.append_option(counter(|t| t.nr_throttled));
        append_cores(
            &mut self.core_utilisation,
            change.core_utilisation.as_deref(),
        );
        self.rss_bytes.append_option(change.rss_bytes);
        self.open_fds.append_option(change.open_fds);
        append_network(&mut self.network, change.network.as_deref());
        self.requests_in_flight.append_value(row.requests_in_flight);
        self.workers_alive.append_value(row.workers_alive);
        self.buffer_depth.append_value(row.buffer_depth);
        self.activity.append(&row.activity);
        self.rows += 1;
    }

    /// Builds a RecordBatch and leaves the builders empty for the next row group.
    pub(super) fn take(&mut self) -> RecordBatch {
        let mut columns: Vec<ArrayRef> = vec![
            Arc::new(self.t_ns.finish()),
            Arc::new(self.interval_ns.finish()),
            Arc::new(self.cpu_user_ns.finish()),
            Arc::new(self.cpu_sys_ns.finish()),
            Arc::new(self.cpu_utilisation.finish()),
            Arc::new(self.throttled_ns.finish()),
            Arc::new(self.nr_periods.finish()),
            Arc::new(self.nr_throttled.finish()),
            Arc::new(self.core_utilisation.finish()),
            Arc::new(self.rss_bytes.finish()),
            Arc::new(self.open_fds.finish()),
            Arc::new(self.network.finish()),
            Arc::new(self.requests_in_flight.finish()),
            Arc::new(self.workers_alive.finish()),
            Arc::new(self.buffer_depth.finish()),
        ];
        columns.extend(self.activity.finish());
        self.rows = 0;
        RecordBatch::try_new(schema(), columns).expect("columns match the client-metrics schema")
    }
}

/// The `core_utilisation` cell: each core's busy share, or null.
fn append_cores(list: &mut ListBuilder<Float64Builder>, cores: Option<&[f64]>) {
    let Some(cores) = cores else {
        list.append(false);
        return;
    };
    list.values().append_slice(cores);
    list.append(true);
}

/// The `network` cell: each interface's bytes and packets, or null.
fn append_network(list: &mut ListBuilder<StructBuilder>, network: Option<&[(&str, NetCounters)]>) {
    let Some(network) = network else {
        list.append(false);
        return;
    };
    let items = list.values();
    for (name, counters) in network {
        field::<StringBuilder>(items, 0).append_value(name);
        field::<UInt64Builder>(items, 1).append_value(counters.rx_bytes);
        field::<UInt64Builder>(items, 2).append_value(counters.tx_bytes);
        field::<UInt64Builder>(items, 3).append_value(counters.rx_packets);
        field::<UInt64Builder>(items, 4).append_value(counters.tx_packets);
        items.append(true);
    }
    list.append(true);
}

/// Starts the client-metrics file at `path` (hidden as `.partial` until the sampler closes
/// it), with the metadata the analysis reads: the anchor, the interval and the CPU limit.
pub(super) fn create(
    path: &Path,
    anchor: &Anchor,
    interval: Duration,
    limit: &CpuLimit,
    target_interface: Option<&str>,
) -> Result<ParquetFile, FileError> {
    let metadata = [
        ("loadgen.schema_version", SCHEMA_VERSION.to_string()),
        ("loadgen.kind", "client-metrics".to_string()),
        ("loadgen.anchor_unix_ns", anchor.unix_ns.to_string()),
        (
            "loadgen.interval_ns",
            crate::clock::nanos(interval).to_string(),
        ),
        ("loadgen.cores", limit.cpuset_cores.to_string()),
        ("loadgen.cpu_limit_cores", limit.limit_cores.to_string()),
    ]
    .into_iter()
    .chain(
        limit
            .quota_cores
            .map(|q| ("loadgen.cpu_quota_cores", q.to_string())),
    )
    .chain(target_interface.map(|i| ("loadgen.target_interface", i.to_string())));
    ParquetFile::create_with_metadata(path, schema(), metadata)
}
