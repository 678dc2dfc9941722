//! HTTP/1.1 over one keep-alive connection per worker: the request written with one syscall
//! from a reused buffer, the response parsed with `httparse` in the worker's own task.
//!
//! No pool and no connection task: the worker owns its connection, opens a new one only when
//! the previous one closed or failed (or after every request with `--no-keepalive`), and
//! reports the time that took as `connect_ns`. Doing the exchange inline, instead of through
//! hyper's connection task and its channel, brought the client's CPU per request from 1.43×
//! wrk's to about 1.03× (see docs/reference/performance.md). The module handles what
//! HTTP/1.1 servers send: `Content-Length`, chunked bodies with trailers, bodies delimited by
//! the connection closing, interim `1xx` responses, `HEAD`/`204`/`304` without bodies, and
//! `Connection: close`. After any failure the connection is dropped: its state is unknown.
//!
//! This file is the connection and the exchange; [`wire`] encodes requests and parses response
//! heads (pure functions over bytes), `body` reads a body to its end.

mod body;
pub mod wire;

use std::net::IpAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use hyper::header::HeaderValue;
use hyper::Method;
use tokio::io::{AsyncWriteExt, ReadBuf};

use super::connect::{connect, Connected, Io, Origin};
use super::io::Meter;
use super::{classify_io, Exchange, Hop, Outgoing, TransportConfig};
use crate::clock::nanos;
use crate::record::ErrorClass;
use crate::workload::check::{Capture, Captured};
use crate::workload::template::BodyBytes;
use body::read_body;
use wire::{encode, parse_head, response_headers, Framing, INLINE_BODY_BYTES};

/// A connection idle at least this long is checked for a close by the server before it is
/// used again (keep-alive timeouts are seconds; back-to-back requests skip the check).
const IDLE_PROBE_AFTER: std::time::Duration = std::time::Duration::from_millis(50);
/// The most of its read buffer a connection keeps between responses: a response head and a
/// small body. The buffer holds only what arrived (reads land in the thread's scratch, see
/// [`read_more`]); a larger one is given back after the response, and any one while the
/// worker waits for its next request: 100,000 idle connections hold no read buffers.
pub(crate) const READ_START: usize = 1024;
/// The largest single read: each runtime thread's scratch buffer.
pub(crate) const READ_MAX: usize = 64 * 1024;

struct Open {
    io: Box<dyn Io>,
    meter: Arc<Meter>,
    /// When the last request on it started.
    last_used: Instant,
}

/// A worker's HTTP/1.1 connection (opened on first use) and its reused buffers.
pub struct Http1Connection {
    config: Arc<TransportConfig>,
    /// The local address its connections come from (`--source-addr`).
    source: Option<IpAddr>,
    open: Option<Open>,
    write_buf: Vec<u8>,
    read_buf: Vec<u8>,
    /// The meter of the hop in progress and its totals when it began, so the bytes of a hop
    /// cut off by the request timeout are still counted ([`Hop::settle`]).
    pending: Option<(Arc<Meter>, (u64, u64))>,
}

impl Http1Connection {
    pub fn new(config: Arc<TransportConfig>, source: Option<IpAddr>) -> Self {
        Http1Connection {
            config,
            source,
            open: None,
            write_buf: Vec::new(),
            read_buf: Vec::new(),
            pending: None,
        }
    }

    /// The open connection, or a new one; adds the time a new one took to `out`.
    pub(crate) async fn ready(
        &mut self,
        origin: &Origin,
        started: Instant,
        out: &mut Exchange,
    ) -> Result<(), ErrorClass> {
        // A connection the server closed while idle (keep-alive timeout, `Connection: close`)
        // is not a failed request: open a new one, and the row shows it in `connect_ns`.
        if let Some(open) = &mut self.open {
            let idle = started.saturating_duration_since(open.last_used);
            if idle >= IDLE_PROBE_AFTER && peer_closed(&mut open.io).await {
                self.open = None;
            }
        }
        if self.open.is_none() {
            let before = Instant::now();
            // Boxed: opening (TCP, TLS) is rare on a keep-alive connection, and its state
            // would otherwise be part of every request's future, held by every worker.
            let opening = connect(
                origin,
                self.source,
                self.config.connect_timeout,
                &self.config.tcp,
            );
            let Connected { io, meter } = Box::pin(opening).await.map_err(|f| f.class)?;
            out.add_connect(nanos(before.elapsed()));
            self.open = Some(Open {
                io,
                meter,
                last_used: started,
            });
        }
        Ok(())
    }

    /// Writes the request in `write_buf` and reads the whole response, keeping what
    /// `capture` asks for in `captured`.
    async fn exchange(
        &mut self,
        request: &Outgoing<'_>,
        started: Instant,
        out: &mut Exchange,
        captured: &mut Captured,
    ) -> Result<(Option<HeaderValue>, bool), ErrorClass> {
        let head_request = request.method == Method::HEAD;
        let large_body = (request.body.len() > INLINE_BODY_BYTES).then_some(&request.body);
        let open = self.open.as_mut().expect("ready() opened it");
        let io = &mut open.io;
        open.meter.arm();
        let buf = &mut self.read_buf;
        buf.clear();
        // A server may answer before it has read the whole request (413 to a large upload):
        // then the answer is the result, and the connection is not reused.
        let (whole_request_sent, write_error) =
            match write_request(io, &self.write_buf, large_body, buf).await {
                Ok(Sent::All) => match io.flush().await {
                    Ok(()) => {
                        // send_ns: the last request byte handed to the socket.
                        out.send_ns = Some(nanos(started.elapsed()));
                        (true, None)
                    }
                    Err(e) => (false, Some(classify_io(&e, false))),
                },
                Ok(Sent::AnsweredEarly) => (false, None),
                Err(e) => (false, Some(classify_io(&e, false))),
            };
        // The request is out: its buffer is not held while the response is awaited (one
        // small allocation per request, ~150 bytes fewer per waiting connection).
        self.write_buf = Vec::new();
        let head = loop {
            if let Some(head) = parse_head(buf, head_request)? {
                if (100..200).contains(&head.status) && head.status != 101 {
                    // An interim response (100 Continue, 103 Early Hints): the real one follows.
                    buf.drain(..head.len);
                    continue;
                }
                break head;
            }
            // After a failed write, what the server sent before it stopped reading may still
            // be readable (the early answer); without one, the write's error is the row's.
            match (read_more(io, buf).await, write_error) {
                (Ok(0) | Err(_), Some(write_error)) => return Err(write_error),
                // The server closed before a complete head: with nothing at all it dropped
                // the request (a reset, as far as the client can tell), otherwise it broke off.
                (Ok(0), None) => return Err(ErrorClass::Reset),
                (Err(class), None) => return Err(class),
                (Ok(_), _) => {}
            }
        };
        out.status = head.status;
        out.retry_after_s = head.retry_after_s;
        let first_byte = open.meter.first_read().unwrap_or_else(Instant::now);
        out.ttfb_ns = Some(nanos(first_byte.saturating_duration_since(started)));
        let Capture { headers, body, .. } = request.capture;
        if headers {
            response_headers(&buf[..head.len], &mut captured.headers);
        }
        buf.drain(..head.len);
        let clean = read_body(io, buf, head.framing, body.then_some(captured)).await?;
        let reusable =
            clean && whole_request_sent && !head.close && head.framing != Framing::UntilClose;
        Ok((head.location, reusable))
    }
}

impl Hop for Http1Connection {
    async fn hop(
        &mut self,
        origin: &Origin,
        request: &Outgoing<'_>,
        started: Instant,
        out: &mut Exchange,
        captured: &mut Captured,
    ) -> Result<Option<HeaderValue>, ErrorClass> {
        let keepalive = self.config.keepalive;
        encode(&mut self.write_buf, request, origin, !keepalive);
        self.ready(origin, started, out).await?;
        let meter = self.open.as_ref().expect("opened above").meter.clone();
        self.pending = Some((meter.clone(), meter.totals()));
        let result = self.exchange(request, started, out, captured).await;
        self.settle(out);
        give_back(&mut self.read_buf, READ_START);
        match result {
            Ok((location, reusable)) => {
                match &mut self.open {
                    Some(open) if keepalive && reusable => open.last_used = started,
                    _ => self.open = None,
                }
                Ok(location)
            }
            Err(class) => {
                self.open = None;
                Err(class)
            }
        }
    }

    fn settle(&mut self, out: &mut Exchange) {
        // Bytes count even when the exchange failed half-way: they crossed the wire.
        if let Some((meter, (sent0, received0))) = self.pending.take() {
            let (sent, received) = meter.totals();
            out.bytes_sent += sent - sent0;
            out.bytes_received += received - received0;
        }
    }

    fn discard(&mut self) {
        self.open = None;
    }

    fn idle(&mut self) {
        give_back(&mut self.read_buf, 0);
    }
}

/// Empties `buf`, and frees it when it holds more than `keep` bytes of capacity (the next
/// response allocates what it needs).
fn give_back(buf: &mut Vec<u8>, keep: usize) {
    buf.clear();
    if buf.capacity() > keep {
        *buf = Vec::new();
    }
}

/// True when an idle keep-alive connection can no longer carry a request: the peer closed
/// it, reset it, or sent something unasked. One poll, no waiting; on a socket with nothing
/// to read, tokio answers from its readiness flags without a system call.
async fn peer_closed(io: &mut Box<dyn Io>) -> bool {
    std::future::poll_fn(|cx| {
        let mut byte = [0u8; 1];
        let mut probe = ReadBuf::new(&mut byte);
        Poll::Ready(!matches!(
            Pin::new(&mut **io).poll_read(cx, &mut probe),
            Poll::Pending
        ))
    })
    .await
}

/// Writes the request: `head` (with the body when it is small), then a large body's chunks.
async fn write_request(
    io: &mut Box<dyn Io>,
    head: &[u8],
    large_body: Option<&BodyBytes>,
    buf: &mut Vec<u8>,
) -> std::io::Result<Sent> {
    let chunks = large_body.map_or(&[][..], |body| body.chunks());
    for part in std::iter::once(head).chain(chunks.iter().map(|c| &c[..])) {
        if let Sent::AnsweredEarly = write_watching(io, part, buf).await? {
            return Ok(Sent::AnsweredEarly);
        }
    }
    Ok(Sent::All)
}

/// How far [`write_watching`] got.
enum Sent {
    All,
    /// The server's answer began to arrive (in the read buffer) before the request was out.
    AnsweredEarly,
}

/// Writes `data`, and whenever the socket cannot take more, looks for an early answer: a
/// server refusing a large upload (413) answers while the body is still going out, and may
/// stop reading. Without this, the client kept writing into a full socket until the server
/// closed it, and recorded a `reset` with no status.
async fn write_watching(
    io: &mut Box<dyn Io>,
    data: &[u8],
    buf: &mut Vec<u8>,
) -> std::io::Result<Sent> {
    let mut written = 0;
    std::future::poll_fn(|cx| loop {
        if written == data.len() {
            return Poll::Ready(Ok(Sent::All));
        }
        match Pin::new(&mut **io).poll_write(cx, &data[written..]) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
            Poll::Ready(Ok(n)) => {
                written += n;
                continue;
            }
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => {}
        }
        // The socket is full: has the server answered already? (The scratch space is on the
        // stack of this poll only, not in every request's future.)
        let mut scratch = [0u8; 4096];
        let mut probe = ReadBuf::new(&mut scratch);
        match Pin::new(&mut **io).poll_read(cx, &mut probe) {
            // The server's end of stream: the reading after this finds out what happened.
            Poll::Ready(Ok(())) if probe.filled().is_empty() => {
                return Poll::Ready(Ok(Sent::AnsweredEarly))
            }
            Poll::Ready(Ok(())) => buf.extend_from_slice(probe.filled()),
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
        match parse_head(buf, false) {
            // An interim response (100 Continue): the server wants the rest.
            Ok(Some(head)) if (100..200).contains(&head.status) && head.status != 101 => {
                buf.drain(..head.len);
            }
            Ok(None) => {} // more of the head to come; keep writing meanwhile
            Ok(Some(_)) | Err(_) => return Poll::Ready(Ok(Sent::AnsweredEarly)),
        }
    })
    .await
}

thread_local! {
    /// Each runtime thread's one read buffer: a read lands here and only what arrived is
    /// copied to the connection's own buffer, so a connection waiting for its response holds
    /// no read space at all (10,000 in-flight connections once held 1 KiB each).
    static SCRATCH: std::cell::RefCell<Box<[u8]>> =
        std::cell::RefCell::new(vec![0; READ_MAX].into_boxed_slice());
}

/// Reads what is available and appends it to `buf`; 0 means the peer closed.
///
/// The read goes into the thread's [`SCRATCH`] (up to [`READ_MAX`] at once, so a large body is
/// read in large reads) and `buf` grows by what arrived: sized to what the connection needs.
async fn read_more(io: &mut Box<dyn Io>, buf: &mut Vec<u8>) -> Result<usize, ErrorClass> {
    std::future::poll_fn(|cx| {
        SCRATCH.with_borrow_mut(|scratch| {
            let mut read = ReadBuf::new(scratch);
            match Pin::new(&mut **io).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) => {
                    buf.extend_from_slice(read.filled());
                    Poll::Ready(Ok(read.filled().len()))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(classify_io(&e, false))),
                Poll::Pending => Poll::Pending,
            }
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;
    use tokio::io::AsyncReadExt;

    /// A server on 127.0.0.1 that answers each request on one connection with `bodies[i]`
    /// bytes of body, in turn.
    async fn server(bodies: Vec<usize>) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            for body in bodies {
                let _ = socket.read(&mut request).await.unwrap();
                let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {body}\r\n\r\n");
                socket.write_all(head.as_bytes()).await.unwrap();
                socket.write_all(&vec![b'x'; body]).await.unwrap();
            }
        });
        addr
    }

    #[tokio::test]
    async fn a_large_body_is_read_in_large_reads() {
        let addr = server(vec![4 << 20]).await;
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.try_write(b"GET / HTTP/1.1\r\n\r\n").unwrap();
        let mut io: Box<dyn Io> = Box::new(tcp);
        let (mut buf, mut largest, mut total) = (Vec::new(), 0, 0);
        while total < 4 << 20 {
            let read = read_more(&mut io, &mut buf).await.unwrap();
            assert_eq!(buf.len(), read, "the buffer holds what arrived");
            total += read;
            largest = largest.max(read);
            buf.clear();
        }
        assert_eq!(largest, READ_MAX, "a large body is read in large reads");
    }

    #[tokio::test]
    async fn a_large_response_is_read_whole_and_its_buffer_given_back() {
        let addr = server(vec![1 << 20, 13]).await;
        let config = Arc::new(TransportConfig {
            origin: Origin {
                scheme: "http",
                addr,
                authority: HeaderValue::from_static("127.0.0.1"),
                server_name: rustls::pki_types::ServerName::try_from("localhost").unwrap(),
                tls: None,
            },
            http2: false,
            http3: false,
            streams_per_connection: 1,
            grpc: None,
            keepalive: true,
            redirects: super::super::Redirects::None,
            redirect_tls: None,
            connect_timeout: std::time::Duration::from_secs(5),
            request_timeout: std::time::Duration::from_secs(30),
            sources: Vec::new(),
            connect_pacer: None,
            tcp: Arc::default(),
        });
        let mut connection = Http1Connection::new(config.clone(), None);
        let request = Outgoing {
            method: Method::GET,
            path: "/".parse().unwrap(),
            headers: Cow::Owned(Default::default()),
            body: Default::default(),
            trace: None,
            capture: Default::default(),
        };
        for body in [1 << 20, 13] {
            let mut out = Exchange::default();
            let mut captured = Captured::default();
            let started = Instant::now();
            let hop = connection.hop(&config.origin, &request, started, &mut out, &mut captured);
            hop.await.unwrap();
            assert_eq!(out.status, 200);
            assert!(out.bytes_received > body as u64, "{out:?}");
            assert!(
                connection.read_buf.capacity() <= READ_START,
                "given back after the response"
            );
            assert!(connection.open.is_some(), "the connection is kept");
            assert_eq!(connection.write_buf.capacity(), 0, "no request buffer kept");
        }
        connection.idle();
        assert_eq!(connection.read_buf.capacity(), 0, "nothing kept while idle");
    }
}
