//! Connection faults: a TCP reset, a response cut off mid-body, or bytes that are not HTTP —
//! the ways a real server or a middlebox breaks that a load generator must report as errors.
//!
//! The request service decides per request whether to fault (see `server`) and arms its
//! connection's [`ConnectionFaults`]; the [`FaultIo`] wrapped around that connection's socket
//! carries the fault out on the next write, because only there are the response's bytes and
//! the socket both at hand. This module does not draw the random numbers, count anything, or
//! cut HTTP/2 bodies (an HTTP/2 connection carries other requests, so `server` cuts that one
//! stream's body instead).

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A way to break one response, chosen per API request by the fault rates.
///
/// Over HTTP/2, a reset or garbage breaks the whole connection, so requests in flight on it
/// beside the faulted one fail too (and are counted as they were answered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// No response: the connection is reset (`SO_LINGER` 0, then close), so the client's
    /// read fails with `ECONNRESET`.
    Reset,
    /// The status line and headers, with the full `Content-Length`, and about half the body;
    /// then the connection is closed (FIN). Over HTTP/2 only that stream is reset after at
    /// most half the body, since other requests share the connection.
    CloseMidBody,
    /// Bytes that are not HTTP instead of the response, then the connection is closed.
    Garbage,
}

impl Fault {
    pub const ALL: [Fault; 3] = [Fault::Reset, Fault::CloseMidBody, Fault::Garbage];

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The `status` label these requests are counted under in `/metrics`.
    pub fn label(self) -> &'static str {
        match self {
            Fault::Reset => "reset",
            Fault::CloseMidBody => "close_mid_body",
            Fault::Garbage => "garbage",
        }
    }
}

impl fmt::Display for Fault {
    /// The fault as its flag names it (`--reset-rate`, `--close-mid-body-rate`, ...).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fault::Reset => "reset",
            Fault::CloseMidBody => "close-mid-body",
            Fault::Garbage => "garbage",
        })
    }
}

/// Where an HTTP/1 response is cut for [`Fault::CloseMidBody`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cut {
    /// After the headers and this many body bytes.
    AfterBodyBytes(usize),
    /// After the status line: for a response with no body bytes to cut (empty, or `HEAD`),
    /// so the client still sees an incomplete response rather than a complete one.
    AfterStatusLine,
}

/// What the next write on a connection must do instead of writing the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Armed {
    Reset,
    Garbage,
    Cut(Cut),
}

/// One connection's pending fault, shared between its request service (which arms it just
/// before returning the response) and its [`FaultIo`] (which takes it on the next write).
#[derive(Debug, Default)]
pub(crate) struct ConnectionFaults {
    /// Lets every write skip the lock when nothing is armed, which is almost always.
    armed: AtomicBool,
    next: Mutex<Option<Armed>>,
}

impl ConnectionFaults {
    pub(crate) fn arm(&self, armed: Armed) {
        *self.next.lock().unwrap_or_else(PoisonError::into_inner) = Some(armed);
        // Release: the IO side that sees the flag also sees what was armed.
        self.armed.store(true, Ordering::Release);
    }

    fn take(&self) -> Option<Armed> {
        if !self.armed.load(Ordering::Acquire) {
            return None;
        }
        self.armed.store(false, Ordering::Relaxed);
        self.next
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// A server-side stream whose TCP socket can be reached, for `SO_LINGER`.
pub(crate) trait Transport: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    fn tcp(&self) -> &TcpStream;
}

impl Transport for TcpStream {
    fn tcp(&self) -> &TcpStream {
        self
    }
}

impl Transport for tokio_rustls::server::TlsStream<TcpStream> {
    fn tcp(&self) -> &TcpStream {
        self.get_ref().0
    }
}

/// Wraps a connection's stream and carries out the fault its service armed. With nothing
/// armed it only passes calls through (one atomic load per write).
///
/// Over TLS it sits outside the TLS stream, so a cut or garbage is in the plaintext and the
/// TLS records stay valid: the client sees a broken HTTP response, not a broken handshake.
pub(crate) struct FaultIo<T> {
    inner: T,
    faults: std::sync::Arc<ConnectionFaults>,
    state: State,
}

enum State {
    Pass,
    /// Passing an HTTP/1 response through up to its cut point.
    Cutting(CutScanner),
    /// Writing junk instead of the response; `written` of `junk` have gone out.
    Garbage {
        junk: Vec<u8>,
        written: usize,
    },
    /// The response was cut or replaced: later writes are swallowed, reads see EOF (so hyper
    /// ends the connection), and the first flush or shutdown closes our side (FIN).
    Closing {
        shut_down: bool,
    },
    /// `SO_LINGER` is 0 and every call fails, so hyper drops the stream and the kernel sends
    /// RST. Nothing may be written or shut down first: a FIN would reach the client as a
    /// clean EOF instead of a reset.
    Reset,
}

impl<T: Transport> FaultIo<T> {
    pub(crate) fn new(inner: T, faults: std::sync::Arc<ConnectionFaults>) -> Self {
        Self {
            inner,
            faults,
            state: State::Pass,
        }
    }

    fn start(&mut self, armed: Armed) {
        self.state = match armed {
            Armed::Reset => {
                // If this fails the connection is still dropped, with a FIN instead of RST;
                // there is nothing better to do, and it does not happen on a live socket.
                let _ = socket2::SockRef::from(self.inner.tcp()).set_linger(Some(Duration::ZERO));
                State::Reset
            }
            Armed::Garbage => State::Garbage {
                junk: junk(),
                written: 0,
            },
            Armed::Cut(cut) => State::Cutting(CutScanner::new(cut)),
        };
    }

    /// The response is over as far as the client will see: hyper must read EOF next, and it
    /// may be waiting on a read that would never wake, so its task is polled again.
    fn close(&mut self, cx: &mut Context<'_>) {
        self.state = State::Closing { shut_down: false };
        cx.waker().wake_by_ref();
    }

    fn poll_close(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let State::Closing { shut_down } = &mut self.state {
            if !*shut_down {
                // Flush first: over TLS, the records of what was let through may still be
                // buffered. A failure here means the client is gone, which is fine.
                let flushed = ready!(Pin::new(&mut self.inner).poll_flush(cx));
                if flushed.is_ok() {
                    let _ = ready!(Pin::new(&mut self.inner).poll_shutdown(cx));
                }
                *shut_down = true;
            }
        }
        Poll::Ready(Ok(()))
    }
}

fn reset_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "connection reset on purpose (--reset-rate)",
    )
}

/// `garbage` and a blank line, so a client that reads up to a header end gets there, then
/// random bytes; never anything that starts like `HTTP/`.
fn junk() -> Vec<u8> {
    let mut junk = b"garbage\r\n\r\n".to_vec();
    let random_bytes = fastrand::usize(16..64);
    junk.extend(std::iter::repeat_with(|| fastrand::u8(..)).take(random_bytes));
    junk
}

impl<T: Transport> AsyncRead for FaultIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.state {
            State::Reset => Poll::Ready(Err(reset_error())),
            // EOF, whatever the client sends.
            State::Closing { .. } => Poll::Ready(Ok(())),
            _ => Pin::new(&mut this.inner).poll_read(cx, buf),
        }
    }
}

impl<T: Transport> AsyncWrite for FaultIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let State::Pass = this.state {
            match this.faults.take() {
                Some(armed) => this.start(armed),
                None => return Pin::new(&mut this.inner).poll_write(cx, buf),
            }
        }
        match &mut this.state {
            State::Pass => Pin::new(&mut this.inner).poll_write(cx, buf),
            State::Reset => Poll::Ready(Err(reset_error())),
            State::Closing { .. } => Poll::Ready(Ok(buf.len())),
            State::Garbage { junk, written } => {
                while *written < junk.len() {
                    let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &junk[*written..]))?;
                    if n == 0 {
                        return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                    }
                    *written += n;
                }
                this.close(cx);
                // The response is "written": hyper must not retry it.
                Poll::Ready(Ok(buf.len()))
            }
            State::Cutting(scanner) => {
                let (allowed, cut_here) = match scanner.clone().advance(buf) {
                    Some(at) => (at, true),
                    None => (buf.len(), false),
                };
                if allowed == 0 {
                    this.close(cx);
                    return Poll::Ready(Ok(buf.len()));
                }
                let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &buf[..allowed]))?;
                if cut_here && n == allowed {
                    this.close(cx);
                    // The rest of the response counts as written, and is dropped.
                    return Poll::Ready(Ok(buf.len()));
                }
                // A partial write stops before the cut point, so the scanner does not reach it.
                let _ = scanner.advance(&buf[..n]);
                Poll::Ready(Ok(n))
            }
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if matches!(this.state, State::Pass) && !this.faults.armed.load(Ordering::Acquire) {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        }
        // Faulting goes one buffer at a time; writing less than offered is always allowed.
        let first = bufs
            .iter()
            .find(|b| !b.is_empty())
            .map_or(&[][..], |b| &**b);
        Pin::new(this).poll_write(cx, first)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.state {
            State::Reset => Poll::Ready(Err(reset_error())),
            State::Closing { .. } => this.poll_close(cx),
            _ => Pin::new(&mut this.inner).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.state {
            State::Reset => Poll::Ready(Err(reset_error())),
            State::Closing { .. } => this.poll_close(cx),
            _ => Pin::new(&mut this.inner).poll_shutdown(cx),
        }
    }
}

/// Finds where an HTTP/1 response must be cut, across however many writes it arrives in:
/// the end of the status line or of the headers, then a number of body bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CutScanner {
    /// `\r\n` (status line) or `\r\n\r\n` (headers).
    end_marker: &'static [u8],
    /// How much of `end_marker` the bytes seen so far end with.
    matched: usize,
    /// Body bytes still to let through once the marker is seen.
    body_left: usize,
}

impl CutScanner {
    fn new(cut: Cut) -> Self {
        let (end_marker, body_left): (&'static [u8], usize) = match cut {
            Cut::AfterBodyBytes(n) => (b"\r\n\r\n", n),
            Cut::AfterStatusLine => (b"\r\n", 0),
        };
        Self {
            end_marker,
            matched: 0,
            body_left,
        }
    }

    /// Consumes `bytes` and returns how many of them to let through before the cut, if the
    /// cut point is among them.
    fn advance(&mut self, bytes: &[u8]) -> Option<usize> {
        for (i, &byte) in bytes.iter().enumerate() {
            if self.matched == self.end_marker.len() {
                let rest = bytes.len() - i;
                if rest >= self.body_left {
                    return Some(i + self.body_left);
                }
                self.body_left -= rest;
                return None;
            }
            if byte == self.end_marker[self.matched] {
                self.matched += 1;
            } else {
                // Both markers start with their only `\r`, so a mismatch restarts at 0 or 1.
                self.matched = usize::from(byte == b'\r');
            }
        }
        (self.matched == self.end_marker.len() && self.body_left == 0).then_some(bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 13\r\n\r\nhello, world\n";
    const HEADERS_LEN: usize = RESPONSE.len() - 13;

    /// Feeds the response in pieces of `size`, as partial writes would, and returns how many
    /// bytes went through before the cut.
    fn let_through(cut: Cut, size: usize) -> Option<usize> {
        let mut scanner = CutScanner::new(cut);
        let mut passed = 0;
        for piece in RESPONSE.chunks(size) {
            match scanner.advance(piece) {
                Some(at) => return Some(passed + at),
                None => passed += piece.len(),
            }
        }
        None
    }

    #[test]
    fn the_cut_lands_at_the_same_byte_however_the_response_is_split() {
        for size in 1..=RESPONSE.len() {
            assert_eq!(
                let_through(Cut::AfterBodyBytes(6), size),
                Some(HEADERS_LEN + 6),
                "pieces of {size}"
            );
            assert_eq!(
                let_through(Cut::AfterBodyBytes(0), size),
                Some(HEADERS_LEN),
                "pieces of {size}"
            );
            assert_eq!(
                let_through(Cut::AfterStatusLine, size),
                Some(b"HTTP/1.1 200 OK\r\n".len()),
                "pieces of {size}"
            );
        }
    }

    #[test]
    fn a_cut_past_the_end_of_the_body_is_never_reached() {
        assert_eq!(let_through(Cut::AfterBodyBytes(14), 5), None);
    }

    #[test]
    fn a_lone_cr_in_the_headers_does_not_end_them_early() {
        let mut scanner = CutScanner::new(Cut::AfterBodyBytes(1));
        assert_eq!(scanner.advance(b"HTTP/1.1 200 OK\r\nx: a\r\r\n\r\n"), None);
        assert_eq!(scanner.advance(b"ab"), Some(1));
    }

    #[test]
    fn junk_is_never_http() {
        for _ in 0..100 {
            let junk = junk();
            assert!(junk.starts_with(b"garbage\r\n\r\n"));
            assert!(!junk.starts_with(b"HTTP/"));
        }
    }

    #[test]
    fn arming_is_taken_once() {
        let faults = ConnectionFaults::default();
        assert_eq!(faults.take(), None);
        faults.arm(Armed::Garbage);
        assert_eq!(faults.take(), Some(Armed::Garbage));
        assert_eq!(faults.take(), None);
    }
}
