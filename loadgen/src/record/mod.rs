//! The per-request record: the one row every request becomes, and its Arrow schema.
//!
//! This module is the contract between the Rust engine and the Python analysis
//! (docs/architecture.md, "The data flow"). It owns the column names, their types and the error classes; it
//! does not decide when rows are written (that is [`store::writer`](crate::store::writer)) or what they mean in aggregate
//! (that is `stats`). Times are integer nanoseconds from the run's anchor instant.
//!
//! The columns, their units and meanings and the segments' metadata keys are written down in
//! `contract/files.json` (`files.requests`) at the repository root; `loadgen/tests/contract.rs`
//! and the Python tests hold [`schema`], [`ErrorClass::ALL`], the tests' decoded row and real
//! segments to it, and the tables of docs/reference/files.md are generated from it, so change
//! the contract with the code.

pub mod grpc;
pub mod parquet_file;
pub mod phase;
pub mod trace;

use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use serde::Serialize;

/// Version of the row layout below; stored as `loadgen.schema_version` in every segment.
/// Version 2 added `send_ns`; version 3 added `check` (and the `check` error class); version 4
/// added `buffer_wait_ns`, and HTTP/2's `send_ns` includes the client's wait for a stream slot
/// and flow-control capacity; version 5 added `trace_id` (`--trace`); version 6 adds nothing to the rows, but its run.json
/// carries the engine's `verdict` (a run recorded before it is "not measured" there); version 7
/// adds `grpc_status` and `grpc_message` (and the `grpc_status` error class). HTTP/3's error
/// classes (`handshake`, `closed`, `idle_timeout`) came later without a new version: they are
/// new values of the `error` dictionary, not a change of any column (the sample runs in
/// data/ hold no HTTP/3 rows).
pub const SCHEMA_VERSION: u32 = 7;

/// Why a request did not produce the response the run expected.
///
/// A failed request is data: it becomes a row with one of these classes, never an early
/// return. The discriminant is the dictionary key in the Parquet `error` column, so the
/// order is part of the file format only through [`ErrorClass::ALL`]'s labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// The server answered, but with a status outside the expected ones (default 2xx/3xx).
    HttpStatus,
    /// TCP connect was refused (nothing listening, or the backlog refused us).
    ConnectRefused,
    /// TCP connect (and handshake) did not finish within `--connect-timeout`.
    ConnectTimeout,
    /// The request did not complete within `--timeout`.
    Timeout,
    /// The peer reset or closed the connection before a complete response arrived.
    Reset,
    /// The response body broke off or was malformed after the headers arrived.
    Body,
    /// The bytes received were not valid HTTP.
    Protocol,
    /// The process ran out of file descriptors (EMFILE / ENFILE).
    TooManyOpenFiles,
    /// The host name did not resolve.
    Dns,
    /// TLS handshake or certificate failure.
    Tls,
    /// The request was still in flight when the run was stopped and the grace period ran out.
    Cancelled,
    /// More than ten redirects in a row (`--follow-redirects`).
    TooManyRedirects,
    /// The response had an expected status but failed one of the op's checks, or a value
    /// to extract was not in it; the row's `check` column names which.
    Check,
    /// A gRPC call ended with a status other than OK; the row's `grpc_status` and
    /// `grpc_message` say which.
    GrpcStatus,
    /// HTTP/3: the QUIC handshake was refused by the server or could not agree (a
    /// certificate problem is `tls`; no answer in time, `connect_timeout`).
    Handshake,
    /// HTTP/3: the server closed the QUIC connection (CONNECTION_CLOSE, GOAWAY, a stateless
    /// reset) while the request was in flight.
    Closed,
    /// HTTP/3: the QUIC connection heard nothing from the server for its idle timeout.
    IdleTimeout,
    /// Anything not classified above; the console shows it so we can classify it next time.
    Other,
}

impl ErrorClass {
    /// Every class, in dictionary-key order.
    pub const ALL: [ErrorClass; 18] = [
        ErrorClass::HttpStatus,
        ErrorClass::ConnectRefused,
        ErrorClass::ConnectTimeout,
        ErrorClass::Timeout,
        ErrorClass::Reset,
        ErrorClass::Body,
        ErrorClass::Protocol,
        ErrorClass::TooManyOpenFiles,
        ErrorClass::Dns,
        ErrorClass::Tls,
        ErrorClass::Cancelled,
        ErrorClass::TooManyRedirects,
        ErrorClass::Check,
        ErrorClass::GrpcStatus,
        ErrorClass::Handshake,
        ErrorClass::Closed,
        ErrorClass::IdleTimeout,
        ErrorClass::Other,
    ];

    /// The label written to Parquet and shown in summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::HttpStatus => "http_status",
            ErrorClass::ConnectRefused => "connect_refused",
            ErrorClass::ConnectTimeout => "connect_timeout",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Reset => "reset",
            ErrorClass::Body => "body",
            ErrorClass::Protocol => "protocol",
            ErrorClass::TooManyOpenFiles => "too_many_open_files",
            ErrorClass::Dns => "dns",
            ErrorClass::Tls => "tls",
            ErrorClass::Cancelled => "cancelled",
            ErrorClass::TooManyRedirects => "too_many_redirects",
            ErrorClass::Check => "check",
            ErrorClass::GrpcStatus => "grpc_status",
            ErrorClass::Handshake => "handshake",
            ErrorClass::Closed => "closed",
            ErrorClass::IdleTimeout => "idle_timeout",
            ErrorClass::Other => "other",
        }
    }

    /// Position in [`ErrorClass::ALL`]; used as dictionary key and array index.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The names a row's `op`, `phase` and `check` indexes stand for: the run's dictionaries.
///
/// Built once, when the run's output is set up, and handed as one value to the writer (the
/// Parquet dictionaries), the summary and the live metrics, so the three cannot disagree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels {
    /// Indexed by [`RequestRecord::op`].
    pub ops: Vec<String>,
    /// Indexed by [`RequestRecord::phase`].
    pub phases: Vec<String>,
    /// Indexed by [`RequestRecord::check`].
    pub checks: Vec<String>,
}

/// One request, as it happened. `op`, `phase` and `check` index the run's [`Labels`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestRecord {
    pub start_ns: i64,
    pub intended_ns: Option<i64>,
    pub latency_ns: i64,
    pub connect_ns: Option<i64>,
    /// The last request byte handed to the socket (HTTP/1.1) or accepted by the HTTP/2
    /// stream once it had a slot and flow-control capacity, from `start_ns`; `None` when not
    /// every byte could be sent.
    pub send_ns: Option<i64>,
    pub ttfb_ns: Option<i64>,
    /// Producer-buffer: how long the worker waited on an empty buffer for this item.
    pub queue_wait_ns: Option<i64>,
    /// Producer-buffer: how long the item waited between being produced and being taken.
    pub buffer_wait_ns: Option<i64>,
    pub op: u16,
    pub status: u16,
    pub error: Option<ErrorClass>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub worker: u32,
    pub phase: u16,
    pub attempt: u8,
    /// The check or extraction that failed (error class `check`), indexing the run's check
    /// names.
    pub check: Option<u16>,
    /// The W3C trace id of the `traceparent` the request carried (`--trace`); never zero
    /// (an invalid id), which keeps the field as small as the id.
    pub trace_id: Option<std::num::NonZeroU128>,
    /// gRPC calls: the `grpc-status` code of the reply (0 is OK); `None` for HTTP requests
    /// and calls that got no status.
    pub grpc_status: Option<u8>,
    /// gRPC calls: the reply's `grpc-message`, as an index into [`grpc`]'s table.
    pub grpc_message: Option<u16>,
    /// A rejection's (429, 503) `Retry-After` in seconds. Not a column: the writer's
    /// aggregates count it into run.json's `summary.rejections`.
    pub retry_after_s: Option<u32>,
}

/// True for the statuses that reject a request for now (429 Too Many Requests, 503 Service
/// Unavailable): the ones whose `Retry-After` is recorded and the verdict calls rejections.
pub fn is_rejection(status: u16) -> bool {
    matches!(status, 429 | 503)
}

fn dictionary(name: &str, nullable: bool) -> Field {
    Field::new(
        name,
        DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
        nullable,
    )
}

/// The Arrow schema of a request segment (schema version [`SCHEMA_VERSION`]).
pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("start_ns", DataType::Int64, false),
        Field::new("intended_ns", DataType::Int64, true),
        Field::new("latency_ns", DataType::Int64, false),
        Field::new("connect_ns", DataType::Int64, true),
        Field::new("send_ns", DataType::Int64, true),
        Field::new("ttfb_ns", DataType::Int64, true),
        Field::new("queue_wait_ns", DataType::Int64, true),
        Field::new("buffer_wait_ns", DataType::Int64, true),
        dictionary("op", false),
        Field::new("status", DataType::UInt16, false),
        dictionary("error", true),
        Field::new("bytes_sent", DataType::UInt64, false),
        Field::new("bytes_received", DataType::UInt64, false),
        Field::new("worker", DataType::UInt32, false),
        dictionary("phase", false),
        Field::new("attempt", DataType::UInt8, false),
        dictionary("check", true),
        Field::new("trace_id", DataType::Utf8, true),
        Field::new("grpc_status", DataType::UInt8, true),
        Field::new("grpc_message", DataType::Utf8, true),
    ]))
}
