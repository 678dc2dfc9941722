//! Transport: how one worker's requests reach the server, timed and classified.
//!
//! A [`Transport`] is owned by exactly one worker and holds at most one connection, so
//! connection queueing is never hidden behind a pool (DESIGN.md, "Hot path rules"). It reports
//! what happened as an [`Exchange`] — status, connect and first-byte times, bytes on the wire,
//! and an [`ErrorClass`] when it failed — and never returns early with an error: failures are
//! data. It does not decide what to send or when (models do) and does not record anything
//! (the worker does).

pub mod http1;
mod io;

use std::future::Future;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::record::ErrorClass;
use crate::workload::{Prepared, RequestTemplate};

/// The outcome of one request on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exchange {
    /// HTTP status; 0 when no response arrived.
    pub status: u16,
    /// Time spent opening a new connection for this request; `None` when one was reused.
    pub connect_ns: Option<i64>,
    /// First response byte, measured from the request's start.
    pub ttfb_ns: Option<i64>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub error: Option<ErrorClass>,
}

/// Where and how to connect; shared by every worker's transport.
#[derive(Debug, Clone)]
pub struct TransportConfig {
    pub addr: SocketAddr,
    /// `host[:port]`, sent as the Host header unless a request sets its own.
    pub host: hyper::header::HeaderValue,
    pub connect_timeout: Duration,
    /// Limit for one whole request: connect (if needed), send, headers and body.
    pub request_timeout: Duration,
}

/// One worker's connection to the target.
pub trait Transport: Send {
    /// Sends `request` (the op's `template` rendered as `prepared`), which the worker started
    /// at `started`, and reports how it went.
    fn send<'a>(
        &'a mut self,
        template: &'a RequestTemplate,
        prepared: Prepared,
        started: Instant,
    ) -> impl Future<Output = Exchange> + Send + 'a;
}

/// Maps an I/O error to the error class users see. `connecting` tells refusals and resets
/// during connect apart from those on an established connection.
pub fn classify_io(error: &std::io::Error, connecting: bool) -> ErrorClass {
    use std::io::ErrorKind;
    // EMFILE / ENFILE: the client, not the server, ran out of descriptors.
    if matches!(error.raw_os_error(), Some(23) | Some(24)) {
        return ErrorClass::TooManyOpenFiles;
    }
    match error.kind() {
        ErrorKind::ConnectionRefused => ErrorClass::ConnectRefused,
        ErrorKind::TimedOut if connecting => ErrorClass::ConnectTimeout,
        ErrorKind::TimedOut => ErrorClass::Timeout,
        ErrorKind::ConnectionReset
        | ErrorKind::ConnectionAborted
        | ErrorKind::BrokenPipe
        | ErrorKind::UnexpectedEof => ErrorClass::Reset,
        _ => ErrorClass::Other,
    }
}

/// Tries one TCP connection before the run, so an unreachable target is a clear error at
/// start instead of a run full of `connect_refused` rows.
pub async fn probe(addr: SocketAddr, connect_timeout: Duration) -> Result<(), ProbeError> {
    match tokio::time::timeout(connect_timeout, tokio::net::TcpStream::connect(addr)).await {
        Ok(Ok(_stream)) => Ok(()),
        Ok(Err(source)) => Err(ProbeError::Io {
            class: classify_io(&source, true),
            source,
        }),
        Err(_) => Err(ProbeError::Timeout(connect_timeout)),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{source}")]
    Io {
        class: ErrorClass,
        #[source]
        source: std::io::Error,
    },
    #[error("no answer within the connect timeout of {}", humantime::format_duration(*.0))]
    Timeout(Duration),
}
