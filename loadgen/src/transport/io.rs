//! A socket wrapper that counts bytes on the wire and notes when the response began.
//!
//! The transport wraps every TCP stream in [`MeteredIo`], under TLS when there is TLS, so the
//! counts are bytes on the wire and the first response byte is seen when it arrives. Over
//! HTTP/1.1 the worker itself does the I/O; over HTTP/2 hyper's connection task does, while
//! workers read the counters, hence atomics. Each connection has exactly one writer of each
//! counter, so relaxed ordering suffices. As the connection closes, it reads the kernel's
//! `TCP_INFO` for the socket once (round-trip time, retransmits) into the run's
//! [`TcpTotals`] — one system call per connection, never per request.

use std::io::IoSlice;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::stats::tcp::TcpTotals;

const DISARMED: i64 = i64::MIN;
const ARMED: i64 = -1;

/// Byte counters and first-read time of one connection.
#[derive(Debug)]
pub struct Meter {
    base: Instant,
    sent: AtomicU64,
    received: AtomicU64,
    /// `ARMED` while waiting for a response's first byte, then its offset from `base` in ns.
    first_read_ns: AtomicI64,
}

impl Meter {
    pub fn new() -> Arc<Self> {
        Arc::new(Meter {
            base: Instant::now(),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
            first_read_ns: AtomicI64::new(DISARMED),
        })
    }

    /// (bytes sent, bytes received) so far on this connection.
    pub fn totals(&self) -> (u64, u64) {
        (
            self.sent.load(Ordering::Relaxed),
            self.received.load(Ordering::Relaxed),
        )
    }

    /// Starts watching for the first byte of the next response.
    pub fn arm(&self) {
        self.first_read_ns.store(ARMED, Ordering::Relaxed);
    }

    /// The instant the first byte arrived since [`Meter::arm`], if it has.
    pub fn first_read(&self) -> Option<Instant> {
        match self.first_read_ns.load(Ordering::Relaxed) {
            ARMED | DISARMED => None,
            ns => Some(self.base + std::time::Duration::from_nanos(ns as u64)),
        }
    }
}

/// A TCP stream that reports its traffic to a [`Meter`], and its `TCP_INFO` to the run's
/// [`TcpTotals`] as it closes.
#[derive(Debug)]
pub struct MeteredIo {
    inner: TcpStream,
    meter: Arc<Meter>,
    tcp: Arc<TcpTotals>,
}

impl MeteredIo {
    pub fn new(inner: TcpStream, meter: Arc<Meter>, tcp: Arc<TcpTotals>) -> Self {
        MeteredIo { inner, meter, tcp }
    }
}

impl Drop for MeteredIo {
    fn drop(&mut self) {
        use std::os::fd::AsFd;
        if let Some(info) = tcpinfo::read(self.inner.as_fd()) {
            self.tcp.observe(&info);
        }
    }
}

impl AsyncRead for MeteredIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        if n > 0 {
            let meter = &self.meter;
            meter.received.fetch_add(n, Ordering::Relaxed);
            if meter.first_read_ns.load(Ordering::Relaxed) == ARMED {
                let ns = crate::clock::nanos(meter.base.elapsed());
                meter.first_read_ns.store(ns, Ordering::Relaxed);
            }
        }
        poll
    }
}

impl AsyncWrite for MeteredIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &poll {
            self.meter.sent.fetch_add(*n as u64, Ordering::Relaxed);
        }
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &poll {
            self.meter.sent.fetch_add(*n as u64, Ordering::Relaxed);
        }
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
