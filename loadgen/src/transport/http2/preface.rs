//! The server's first bytes on an HTTP/2 connection, to tell a server that does not speak
//! HTTP/2 from one that reset the connection.
//!
//! An HTTP/2 server's first frame is SETTINGS (RFC 9113, 3.4): its 3-byte length is below
//! 2^16 (the first byte 0) and its type byte, the fourth, is 0x4. An HTTP/1.1-only server
//! answers the client's preface with something else — `HTTP/1.1 400 …`, an HTML page — and
//! closes; as it leaves the client's frames unread, the close is a TCP reset, and the client's
//! next write can fail with it before the answer is read: a `reset` row for a server that
//! simply does not speak HTTP/2. [`Watched`] keeps the first four bytes the server sends and,
//! when a write fails with a reset first, reads what the server had already answered (still in
//! the socket's receive buffer) before it returns the error; a start that cannot be SETTINGS
//! marks the connection [`ServerPreface::not_http2`], and its failures are `protocol`. A server
//! that resets without a word stays `reset`. Once four bytes are in, it only passes calls on.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes it takes to see a SETTINGS frame begin: the length and the type.
const PREFIX: usize = 4;
const SETTINGS: u8 = 0x4;
/// Polls a write's reset error is held for the answer before it to be read.
const MAX_HOLDS: u8 = 4;

/// What the server's first bytes said about it, once known.
#[derive(Debug, Default)]
pub(crate) struct ServerPreface(OnceLock<bool>);

impl ServerPreface {
    /// True when the server's first bytes cannot begin an HTTP/2 SETTINGS frame: it answered
    /// in another protocol.
    pub(crate) fn not_http2(&self) -> bool {
        self.0.get() == Some(&false)
    }
}

/// Whether `first` (at most [`PREFIX`] bytes) can still begin a SETTINGS frame.
fn may_begin_settings(first: &[u8]) -> bool {
    first.first().is_none_or(|&b| b == 0) && first.get(3).is_none_or(|&t| t == SETTINGS)
}

/// A connection's I/O, watching the server's first bytes.
pub(crate) struct Watched<T> {
    inner: T,
    first: [u8; PREFIX],
    seen: usize,
    preface: Arc<ServerPreface>,
    /// A write's reset error held until the answer before it is read, and the polls so far.
    held: Option<(io::Error, u8)>,
}

impl<T> Watched<T> {
    pub(crate) fn new(inner: T) -> (Self, Arc<ServerPreface>) {
        let preface = Arc::new(ServerPreface::default());
        let watched = Watched {
            inner,
            first: [0; PREFIX],
            seen: 0,
            preface: preface.clone(),
            held: None,
        };
        (watched, preface)
    }

    /// Takes in bytes the server sent, until its first ones are judged.
    fn note(&mut self, bytes: &[u8]) {
        let take = (PREFIX - self.seen).min(bytes.len());
        self.first[self.seen..self.seen + take].copy_from_slice(&bytes[..take]);
        self.seen += take;
        if !may_begin_settings(&self.first[..self.seen]) {
            let _ = self.preface.0.set(false);
            self.seen = PREFIX;
        } else if self.seen == PREFIX {
            let _ = self.preface.0.set(true);
        }
    }
}

impl<T: AsyncRead + Unpin> Watched<T> {
    /// A write's outcome, unless it failed on a reset before the server's first bytes were
    /// read: then those bytes are still in the socket's receive buffer, and are read first.
    fn watch_write<R>(
        &mut self,
        cx: &mut Context<'_>,
        polled: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        use io::ErrorKind::{BrokenPipe, ConnectionReset};
        match polled {
            Poll::Ready(Err(error))
                if self.seen < PREFIX && matches!(error.kind(), ConnectionReset | BrokenPipe) =>
            {
                self.read_the_answer(cx, error, 0)
            }
            polled => polled,
        }
    }

    /// Reads what the server answered before the reset, then returns the write's `error`.
    /// The runtime may not have seen those bytes arrive yet (the reset and the answer come
    /// together): then the error is held, and returned once it has — at most a few polls.
    fn read_the_answer<R>(
        &mut self,
        cx: &mut Context<'_>,
        error: io::Error,
        tries: u8,
    ) -> Poll<io::Result<R>> {
        let mut scratch = [0; PREFIX];
        let mut buf = ReadBuf::new(&mut scratch[..PREFIX - self.seen]);
        match Pin::new(&mut self.inner).poll_read(cx, &mut buf) {
            Poll::Pending if tries < MAX_HOLDS => {
                self.held = Some((error, tries + 1));
                Poll::Pending
            }
            Poll::Ready(Ok(())) => {
                let filled = buf.filled().len();
                self.note(&scratch[..filled]);
                Poll::Ready(Err(error))
            }
            _ => Poll::Ready(Err(error)),
        }
    }

    /// The write error held by [`Self::read_the_answer`], if any, after another read.
    fn release_held<R>(&mut self, cx: &mut Context<'_>) -> Option<Poll<io::Result<R>>> {
        let (error, tries) = self.held.take()?;
        Some(self.read_the_answer(cx, error, tries))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if self.seen < PREFIX && matches!(polled, Poll::Ready(Ok(()))) {
            self.note(&buf.filled()[before..]);
        }
        polled
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(held) = self.release_held(cx) {
            return held;
        }
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch_write(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(held) = self.release_held(cx) {
            return held;
        }
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch_write(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(held) = self.release_held(cx) {
            return held;
        }
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch_write(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settings_frame_is_http2_and_an_http1_answer_or_a_page_is_not() {
        let judged = |bytes: &[u8]| {
            let (mut watched, preface) = Watched::new(());
            for byte in bytes {
                watched.note(std::slice::from_ref(byte));
            }
            preface.0.get().copied()
        };
        assert_eq!(judged(&[0, 0, 18, SETTINGS, 0, 0, 0, 0, 0]), Some(true));
        assert_eq!(judged(&[0, 0, 0, SETTINGS]), Some(true));
        assert_eq!(judged(b"HTTP/1.1 400 Bad Request\r\n"), Some(false));
        assert_eq!(judged(b"<!DOCTYPE HTML>"), Some(false));
        assert_eq!(
            judged(&[0, 0, 8, 0x7]),
            Some(false),
            "GOAWAY first is not HTTP/2"
        );
        assert_eq!(judged(b"H"), Some(false), "one byte is enough to tell");
        assert_eq!(judged(&[0, 0]), None, "too few bytes to tell");
    }

    #[tokio::test]
    async fn a_write_that_fails_on_a_reset_reads_the_answer_before_it() {
        // The server answers in HTTP/1.1 and closes with the client's bytes unread: a reset.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut stream, _) = listener.accept().unwrap();
            let mut line = [0; 4];
            stream.read_exact(&mut line).unwrap();
            stream
                .write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(100));
            // Unread bytes in the receive buffer make the close a reset.
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut watched, preface) = Watched::new(tcp);
        use tokio::io::AsyncWriteExt;
        watched.write_all(b"PRI * HTTP/2.0\r\n\r\n").await.unwrap();
        server.join().unwrap();
        // Writes now meet the reset, never having read the answer.
        let mut failed = None;
        for _ in 0..100 {
            if let Err(e) = watched.write_all(&[0; 1024]).await {
                failed = Some(e);
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert!(failed.is_some(), "the writes never failed");
        assert!(preface.not_http2());
    }
}
