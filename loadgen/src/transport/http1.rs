//! HTTP/1.1 over one keep-alive connection per worker: the request written with one syscall
//! from a reused buffer, the response parsed with `httparse` in the worker's own task.
//!
//! No pool and no connection task: the worker owns its connection, opens a new one only when
//! the previous one closed or failed (or after every request with `--no-keepalive`), and
//! reports the time that took as `connect_ns`. Doing the exchange inline, instead of through
//! hyper's connection task and its channel, brought the client's CPU per request from 1.43×
//! wrk's to about 1.03× (see the README's performance section). The module handles what
//! HTTP/1.1 servers send: `Content-Length`, chunked bodies with trailers, bodies delimited by
//! the connection closing, interim `1xx` responses, `HEAD`/`204`/`304` without bodies, and
//! `Connection: close`. After any failure the connection is dropped: its state is unknown.

use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use hyper::header::{HeaderMap, HeaderValue, CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use hyper::{Method, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadBuf};

use super::connect::{connect, Connected, Io, Origin};
use super::io::Meter;
use super::{classify_io, Exchange, Hop, Outgoing, TransportConfig};
use crate::clock::nanos;
use crate::record::ErrorClass;
use crate::workload::template::BodyBytes;

/// Most header lines a response may have; more is a `protocol` error (README).
const MAX_HEADERS: usize = 100;
/// A response head (status line and headers) larger than this is a `protocol` error, however
/// the reads happened to split it (README).
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Request bodies up to this size are copied after the head and go out in one write; larger
/// ones are written from their own chunks, never copied (a 64 MB upload per worker).
const INLINE_BODY_BYTES: usize = 64 * 1024;
/// A connection idle at least this long is checked for a close by the server before it is
/// used again (keep-alive timeouts are seconds; back-to-back requests skip the check).
const IDLE_PROBE_AFTER: std::time::Duration = std::time::Duration::from_millis(50);
/// Free space kept in the read buffer before each read.
const READ_CHUNK: usize = 16 * 1024;

struct Open {
    io: Box<dyn Io>,
    meter: Arc<Meter>,
    /// When the last request on it started.
    last_used: Instant,
}

/// A worker's HTTP/1.1 connection (opened on first use) and its reused buffers.
pub struct Http1Connection {
    config: Arc<TransportConfig>,
    open: Option<Open>,
    write_buf: Vec<u8>,
    read_buf: Vec<u8>,
    /// The meter of the hop in progress and its totals when it began, so the bytes of a hop
    /// cut off by the request timeout are still counted ([`Hop::settle`]).
    pending: Option<(Arc<Meter>, (u64, u64))>,
}

/// How the response body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// What the worker needs from a response head.
#[derive(Debug)]
pub struct Head {
    pub status: u16,
    /// Bytes of the head (status line and headers) at the start of the read buffer.
    pub len: usize,
    pub framing: Framing,
    /// The server will close the connection after this response.
    pub close: bool,
    pub location: Option<HeaderValue>,
}

impl Http1Connection {
    pub fn new(config: Arc<TransportConfig>) -> Self {
        Http1Connection {
            config,
            open: None,
            write_buf: Vec::with_capacity(1024),
            read_buf: Vec::with_capacity(READ_CHUNK),
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
            let Connected { io, meter } = connect(origin, self.config.connect_timeout)
                .await
                .map_err(|f| f.class)?;
            out.add_connect(nanos(before.elapsed()));
            self.open = Some(Open {
                io,
                meter,
                last_used: started,
            });
        }
        Ok(())
    }

    /// Writes the request in `write_buf` and reads the whole response.
    async fn exchange(
        &mut self,
        head_request: bool,
        large_body: Option<&BodyBytes>,
        started: Instant,
        out: &mut Exchange,
    ) -> Result<(Option<HeaderValue>, bool), ErrorClass> {
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
        let first_byte = open.meter.first_read().unwrap_or_else(Instant::now);
        out.ttfb_ns = Some(nanos(first_byte.saturating_duration_since(started)));
        buf.drain(..head.len);
        let clean = read_body(io, buf, head.framing).await?;
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
    ) -> Result<Option<HeaderValue>, ErrorClass> {
        let keepalive = self.config.keepalive;
        encode(&mut self.write_buf, request, origin, !keepalive);
        self.ready(origin, started, out).await?;
        let meter = self.open.as_ref().expect("opened above").meter.clone();
        self.pending = Some((meter.clone(), meter.totals()));
        let large_body = (request.body.len() > INLINE_BODY_BYTES).then_some(&request.body);
        let result = self
            .exchange(request.method == Method::HEAD, large_body, started, out)
            .await;
        self.settle(out);
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
    let mut scratch = [0u8; 4096];
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
        // The socket is full: has the server answered already?
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

/// Reads what is available into the spare capacity of `buf`; 0 means the peer closed.
async fn read_more(io: &mut Box<dyn Io>, buf: &mut Vec<u8>) -> Result<usize, ErrorClass> {
    if buf.capacity() - buf.len() < READ_CHUNK / 4 {
        buf.reserve(READ_CHUNK);
    }
    io.read_buf(buf).await.map_err(|e| classify_io(&e, false))
}

/// Serialises `request` into `out` (cleared first): request line, `Host` unless the request
/// sets one, its headers, `Content-Length` when it has a body, and the body when it is at most
/// `INLINE_BODY_BYTES` (a larger one is written from its own chunks).
pub fn encode(out: &mut Vec<u8>, request: &Outgoing<'_>, origin: &Origin, close: bool) {
    out.clear();
    out.extend_from_slice(request.method.as_str().as_bytes());
    out.push(b' ');
    let target = request.path.path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(if target.is_empty() {
        b"/"
    } else {
        target.as_bytes()
    });
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let headers: &HeaderMap = &request.headers;
    if !headers.contains_key(HOST) {
        header_line(out, HOST.as_str(), origin.authority.as_bytes());
    }
    for (name, value) in headers {
        if close && name == CONNECTION {
            continue;
        }
        header_line(out, name.as_str(), value.as_bytes());
    }
    if close {
        header_line(out, CONNECTION.as_str(), b"close");
    }
    let needs_length = !request.body.is_empty()
        || matches!(request.method, Method::POST | Method::PUT | Method::PATCH);
    if needs_length && !headers.contains_key(CONTENT_LENGTH) {
        use std::io::Write;
        // Writing to a Vec cannot fail.
        let _ = write!(out, "content-length: {}\r\n", request.body.len());
    }
    out.extend_from_slice(b"\r\n");
    if request.body.len() <= INLINE_BODY_BYTES {
        for chunk in request.body.chunks() {
            out.extend_from_slice(chunk);
        }
    }
}

fn header_line(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Parses a response head at the start of `buf`; `None` while it is incomplete.
pub fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<Head>, ErrorClass> {
    // Uninitialised header slots: zeroing a hundred of them per response costs more than
    // parsing a typical head.
    let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut response,
        buf,
        &mut headers,
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) if len <= MAX_HEAD_BYTES => len,
        Ok(httparse::Status::Partial) if buf.len() <= MAX_HEAD_BYTES => return Ok(None),
        Ok(_) | Err(_) => return Err(ErrorClass::Protocol),
    };
    let status = response.code.ok_or(ErrorClass::Protocol)?;
    let http10 = response.version == Some(0);
    let (mut length, mut chunked, mut close, mut keep_alive) = (None, false, http10, false);
    let mut location_value = None;
    for header in response.headers.iter() {
        let name = header.name;
        if name.eq_ignore_ascii_case(CONTENT_LENGTH.as_str()) {
            let text = std::str::from_utf8(header.value).map_err(|_| ErrorClass::Protocol)?;
            let value: u64 = text.trim().parse().map_err(|_| ErrorClass::Protocol)?;
            if length.is_some_and(|l| l != value) {
                return Err(ErrorClass::Protocol);
            }
            length = Some(value);
        } else if name.eq_ignore_ascii_case(TRANSFER_ENCODING.as_str()) {
            chunked = header
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|last| last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(CONNECTION.as_str()) {
            for token in header.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("location") {
            location_value = HeaderValue::from_bytes(header.value).ok();
        }
    }
    if http10 && keep_alive {
        close = false;
    }
    let framing = if head_request
        || (100..200).contains(&status)
        || status == StatusCode::NO_CONTENT.as_u16()
        || status == StatusCode::NOT_MODIFIED.as_u16()
    {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else {
        match length {
            Some(0) => Framing::Empty,
            Some(n) => Framing::Length(n),
            None => Framing::UntilClose,
        }
    };
    let location = location_value.filter(|_| super::is_redirect(status));
    Ok(Some(Head {
        status,
        len,
        framing,
        close,
        location,
    }))
}

/// Reads and discards the body; `buf` holds what was read after the head. Returns whether
/// the connection ended exactly at the end of the body (no stray bytes), i.e. can be reused.
async fn read_body(
    io: &mut Box<dyn Io>,
    buf: &mut Vec<u8>,
    framing: Framing,
) -> Result<bool, ErrorClass> {
    match framing {
        Framing::Empty => Ok(buf.is_empty()),
        Framing::Length(length) => {
            let mut remaining = length;
            loop {
                let have = buf.len() as u64;
                if have >= remaining {
                    return Ok(have == remaining);
                }
                remaining -= have;
                buf.clear();
                if read_more(io, buf).await.map_err(body_error)? == 0 {
                    return Err(ErrorClass::Body);
                }
            }
        }
        Framing::Chunked => {
            let mut chunks = Chunked::default();
            loop {
                let used = chunks.feed(buf).map_err(|()| ErrorClass::Body)?;
                buf.drain(..used);
                if chunks.done() {
                    return Ok(buf.is_empty());
                }
                if read_more(io, buf).await.map_err(body_error)? == 0 {
                    return Err(ErrorClass::Body);
                }
            }
        }
        Framing::UntilClose => loop {
            buf.clear();
            if read_more(io, buf).await.map_err(body_error)? == 0 {
                return Ok(false);
            }
        },
    }
}

/// Once the headers have arrived, a broken connection is a broken body (timeouts stay timeouts).
fn body_error(class: ErrorClass) -> ErrorClass {
    match class {
        ErrorClass::Timeout => ErrorClass::Timeout,
        _ => ErrorClass::Body,
    }
}

/// A chunked-body decoder that only finds the end: chunk sizes, data, trailers.
#[derive(Debug, Default)]
struct Chunked {
    state: ChunkState,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    #[default]
    Size,
    Data(u64),
    DataEnd,
    Trailers,
    Done,
}

impl Chunked {
    /// Consumes what it can of `buf`; returns how many bytes it used. `Err` on malformed input.
    fn feed(&mut self, buf: &[u8]) -> Result<usize, ()> {
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            match self.state {
                ChunkState::Size => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((used, 0))) => {
                        pos += used;
                        self.state = ChunkState::Trailers;
                    }
                    Ok(httparse::Status::Complete((used, size))) => {
                        pos += used;
                        self.state = ChunkState::Data(size);
                    }
                    Ok(httparse::Status::Partial) => return Ok(pos),
                    Err(_) => return Err(()),
                },
                ChunkState::Data(size) => {
                    let take = size.min(rest.len() as u64);
                    pos += take as usize;
                    if take < size {
                        self.state = ChunkState::Data(size - take);
                        return Ok(pos);
                    }
                    self.state = ChunkState::DataEnd;
                }
                ChunkState::DataEnd => {
                    if rest.len() < 2 {
                        return Ok(pos);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(());
                    }
                    pos += 2;
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailers => match rest.windows(2).position(|w| w == b"\r\n") {
                    // An empty line ends the trailers (and the body).
                    Some(0) => {
                        pos += 2;
                        self.state = ChunkState::Done;
                    }
                    Some(line) => pos += line + 2,
                    None => return Ok(pos),
                },
                ChunkState::Done => return Ok(pos),
            }
        }
    }

    fn done(&self) -> bool {
        self.state == ChunkState::Done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn chunked_bodies_end_where_they_end_in_any_split() {
        let body = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: yes\r\n\r\n";
        for split in 0..body.len() {
            let mut chunks = Chunked::default();
            let mut buf = body[..split].to_vec();
            let used = chunks.feed(&buf).unwrap();
            buf.drain(..used);
            buf.extend_from_slice(&body[split..]);
            let used = chunks.feed(&buf).unwrap();
            assert!(chunks.done(), "split at {split}");
            assert_eq!(used, buf.len(), "split at {split}");
        }
        assert!(Chunked::default().feed(b"zz\r\n").is_err());
        assert!(Chunked::default().feed(b"2\r\nabXY").is_err());
    }

    #[test]
    fn heads_give_status_framing_and_reuse() {
        let head = |text: &str, head_request| parse_head(text.as_bytes(), head_request);
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!(
            (h.status, h.framing, h.close),
            (200, Framing::Length(12), false)
        );
        let h = head(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!((h.framing, h.close), (Framing::Chunked, true));
        let h = head("HTTP/1.0 200 OK\r\n\r\n", false).unwrap().unwrap();
        assert_eq!((h.framing, h.close), (Framing::UntilClose, true));
        let h = head(
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert!(!h.close);
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", true)
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Empty, "HEAD has no body");
        let h = head(
            "HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.framing, Framing::Empty);
        let h = head(
            "HTTP/1.1 302 Found\r\nLocation: /next\r\nContent-Length: 0\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.location.unwrap(), "/next");
        assert!(head("HTTP/1.1 200 OK\r\nContent-Le", false)
            .unwrap()
            .is_none());
        assert_eq!(
            head("garbage\r\n\r\n", false).unwrap_err(),
            ErrorClass::Protocol
        );
        assert_eq!(
            head(
                "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                false
            )
            .unwrap_err(),
            ErrorClass::Protocol
        );
    }

    #[test]
    fn requests_carry_host_length_and_close() {
        let origin = Origin {
            scheme: "http",
            addr: "127.0.0.1:8080".parse().unwrap(),
            authority: HeaderValue::from_static("example.test:8080"),
            server_name: rustls::pki_types::ServerName::try_from("example.test").unwrap(),
            tls: None,
        };
        let mut headers = HeaderMap::new();
        headers.insert("x-one", HeaderValue::from_static("1"));
        let request = Outgoing {
            method: Method::POST,
            path: "/swipe/left/?q=1".parse().unwrap(),
            headers: Cow::Owned(headers),
            body: bytes::Bytes::from_static(b"{}").into(),
        };
        let mut out = Vec::new();
        encode(&mut out, &request, &origin, true);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /swipe/left/?q=1 HTTP/1.1\r\nhost: example.test:8080\r\nx-one: 1\r\n\
             connection: close\r\ncontent-length: 2\r\n\r\n{}"
        );
    }
}
