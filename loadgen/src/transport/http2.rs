//! HTTP/2: a few workers share one connection, each sending on its own stream.
//!
//! With `--http2`, workers are grouped `--streams-per-connection` at a time; each group shares
//! a [`SharedConnection`], opened by whichever of its workers needs it first (that worker's
//! row carries `connect_ns`) and reopened the same way once it has closed. A failed stream
//! does not close the connection for the others; a broken connection shows up as closed and
//! is replaced.
//!
//! The streams go straight to the `h2` crate: each worker holds its own handle on the
//! connection and opens its stream itself, and one task per connection reads and writes the
//! socket. (hyper's HTTP/2 client, which sits on the same crate, routes every request through a
//! channel to that task and back, and copies a multi-chunk body into one buffer; profiled
//! against h2load, that hand-off was the largest cost we could remove.)
//!
//! Byte counts: streams share the connection's socket, so per-request wire bytes cannot be
//! measured. `bytes_sent` and `bytes_received` count each request's and response's headers
//! (as `name: value` text) and body — HPACK compression and frame overhead are not included.
//!
//! `send_ns`: the connection's task writes the stream's frames, so the time the last byte
//! reached the socket is not visible to the worker. What is recorded is the moment h2
//! accepted the request's last frame *after* the client's own waits were over: a stream slot
//! (a request beyond the server's SETTINGS_MAX_CONCURRENT_STREAMS waits inside the client
//! until one frees) and flow-control capacity for every byte of the body (sent as the
//! connection grants it). Those waits are the client's time, not the server's, so
//! `ttfb_ns - send_ns` is time the request was in the server's hands (request schema
//! version 4; before, a request that waited for a slot showed a `send_ns` of microseconds
//! and its wait landed in `ttfb_ns`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use h2::client::{self, SendRequest};
use h2::Reason;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::http::uri::{Authority, Scheme};
use hyper::{Method, Request, Uri};
use tokio::sync::Mutex;

mod preface;

use self::preface::{ServerPreface, Watched};
use super::connect::{connect, Origin};
use super::grpc;
use super::{classify_io, location, Exchange, Hop, Outgoing, TransportConfig};
use crate::clock::nanos;
use crate::record::ErrorClass;
use crate::workload::check::{Capture, Captured};

/// Flow-control windows and send buffer, as hyper's HTTP/2 client sets them: a response of a
/// few megabytes is not held back by window updates.
const STREAM_WINDOW_BYTES: u32 = 2 * 1024 * 1024;
const CONNECTION_WINDOW_BYTES: u32 = 5 * 1024 * 1024;
const MAX_SEND_BUFFER_BYTES: usize = 400 * 1024;
/// HTTP/2's initial stream window (RFC 9113 §6.9.2): a body this small is queued whole at once
/// (a peer that set a smaller window gets its bytes as h2 sees the window open).
const SMALL_BODY_BYTES: usize = 65_535;

/// One HTTP/2 connection shared by a group of workers.
#[derive(Default)]
pub struct SharedConnection {
    open: Mutex<Option<Open>>,
}

impl std::fmt::Debug for SharedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedConnection")
    }
}

/// An open connection: the handle streams are opened on, and how the connection itself ended.
#[derive(Clone)]
pub(crate) struct Open {
    sender: SendRequest<Bytes>,
    /// Set once the connection's task has ended (or a stream heard of a GOAWAY): no new
    /// stream goes on it.
    closed: Arc<AtomicBool>,
    /// Set by the connection's task when it ends with an error: the streams it cut off take
    /// this class (an HTTP/1.1-only server's answer is `protocol` every time, whichever of
    /// the connection and the stream hears of it first).
    ended: Arc<OnceLock<ErrorClass>>,
    /// What the server's first bytes said: a server that answered in another protocol makes
    /// every failure on the connection `protocol`, also when its close beat its answer.
    preface: Arc<ServerPreface>,
}

impl Open {
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// The class of a stream's failure, looking through to the connection's end when the
    /// stream was cut off by it.
    fn classify(&self, error: &h2::Error) -> ErrorClass {
        if error.is_go_away() {
            self.closed.store(true, Ordering::Relaxed);
        }
        if self.preface.not_http2() {
            return ErrorClass::Protocol;
        }
        match (self.ended.get(), error.is_reset() && error.is_remote()) {
            (Some(&class), false) => class,
            _ => classify_h2(error),
        }
    }
}

/// One worker's stream on a shared connection.
pub struct Http2Stream {
    config: Arc<TransportConfig>,
    shared: Arc<SharedConnection>,
    /// This worker's handle on the shared connection, while it is open.
    open: Option<Open>,
    uris: AbsoluteUris,
    /// `--proto`: the stream's gRPC state (see `grpc`).
    calls: grpc::Calls,
}

impl Http2Stream {
    pub fn new(config: Arc<TransportConfig>, shared: Arc<SharedConnection>) -> Self {
        Http2Stream {
            uris: AbsoluteUris::new(&config.origin),
            config,
            shared,
            open: None,
            calls: grpc::Calls::default(),
        }
    }

    /// A handle on the group's open connection, opening it if this worker is the first to
    /// find it missing or closed; the time that took goes to `out`.
    pub(crate) async fn sender(
        &mut self,
        origin: &Origin,
        out: &mut Exchange,
    ) -> Result<&mut Open, ErrorClass> {
        if self.open.as_ref().is_some_and(|o| !o.is_closed()) {
            return Ok(self.open.as_mut().expect("checked above"));
        }
        self.open = None;
        // Boxed: the handshake's state is several times a request's, and would otherwise be
        // part of (and copied with) every request's future.
        let open = Box::pin(self.shared.join_or_open(origin, &self.config, out)).await?;
        Ok(self.open.insert(open))
    }
}

impl SharedConnection {
    /// The open connection, or a new one if it is missing or closed.
    async fn join_or_open(
        &self,
        origin: &Origin,
        config: &TransportConfig,
        out: &mut Exchange,
    ) -> Result<Open, ErrorClass> {
        let mut slot = self.open.lock().await;
        if let Some(open) = slot.as_ref().filter(|o| !o.is_closed()) {
            return Ok(open.clone());
        }
        let before = Instant::now();
        let open = handshake(origin, config).await?;
        out.add_connect(nanos(before.elapsed()));
        *slot = Some(open.clone());
        Ok(open)
    }
}

/// Opens a connection (TCP, TLS with ALPN `h2`, or prior knowledge over TCP), completes the
/// HTTP/2 handshake and starts the task that drives the connection.
async fn handshake(origin: &Origin, config: &TransportConfig) -> Result<Open, ErrorClass> {
    let connected = connect(origin, None, config.connect_timeout, &config.tcp)
        .await
        .map_err(|f| f.class)?;
    // Until the server's SETTINGS arrive, h2 would open any number of streams, and a server
    // allowing fewer refuses the rest (REFUSED_STREAM): spurious `reset` rows at the start of
    // every connection. One stream until then; the SETTINGS frame, the server's first, lifts
    // it to the server's own limit one round trip later (the wait is in those rows' send_ns).
    let (io, preface) = Watched::new(connected.io);
    let (sender, connection) = client::Builder::new()
        .initial_max_send_streams(1)
        .enable_push(false)
        .initial_window_size(STREAM_WINDOW_BYTES)
        .initial_connection_window_size(CONNECTION_WINDOW_BYTES)
        .max_send_buffer_size(MAX_SEND_BUFFER_BYTES)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| classify_h2(&e))?;
    let open = Open {
        sender,
        closed: Arc::default(),
        ended: Arc::default(),
        preface: preface.clone(),
    };
    let (closed, ended) = (open.closed.clone(), open.ended.clone());
    tokio::spawn(async move {
        if let Err(e) = (Batched {
            inner: connection,
            yielded: false,
        })
        .await
        {
            let _ = ended.set(match preface.not_http2() {
                true => ErrorClass::Protocol,
                false => classify_h2(&e),
            });
        }
        closed.store(true, Ordering::Relaxed);
    });
    Ok(open)
}

/// Drives a connection one scheduler turn after it was woken, not at once: the workers woken
/// in the same turn (by the responses of the last read) then queue their next requests first,
/// and the connection writes them all in one TLS record and one system call. Polled at once,
/// it wrote each worker's HEADERS frame as soon as that worker queued it — one `writev` per
/// request, a quarter of the client's CPU in the profile.
struct Batched<F> {
    inner: F,
    yielded: bool,
}

impl<F: Future + Unpin> Future for Batched<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        if !self.yielded {
            self.yielded = true;
            // Waking itself while polled puts the task at the back of the run queue.
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.yielded = false;
        Pin::new(&mut self.inner).poll(cx)
    }
}

/// The absolute URIs (`:scheme`, `:authority`, `:path`) a worker's requests to one origin
/// carry over HTTP/2 and HTTP/3: the scheme and authority parsed once, and the last path's URI
/// kept — most ops send the same path every time, and a clone is cheaper than building it
/// from its parts again.
pub(super) struct AbsoluteUris {
    scheme: Scheme,
    authority: Option<Authority>,
    last: Option<(Uri, Uri)>,
}

impl AbsoluteUris {
    pub(super) fn new(origin: &Origin) -> Self {
        let scheme = if origin.tls.is_some() {
            Scheme::HTTPS
        } else {
            Scheme::HTTP
        };
        AbsoluteUris {
            scheme,
            authority: Authority::try_from(origin.authority.as_bytes()).ok(),
            last: None,
        }
    }

    /// The absolute URI for a request to `path`.
    pub(super) fn of(&mut self, path: &Uri) -> Uri {
        if let Some((last, absolute)) = &self.last {
            if last == path {
                return absolute.clone();
            }
        }
        let mut parts = path.clone().into_parts();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = self.authority.clone();
        let absolute = Uri::from_parts(parts).unwrap_or_else(|_| path.clone());
        self.last = Some((path.clone(), absolute.clone()));
        absolute
    }
}

/// True for the headers HTTP/2 forbids (RFC 9113, 8.2.2): they describe an HTTP/1.1
/// connection (`te` is allowed only as `trailers`).
fn is_connection_header(name: &HeaderName, value: &HeaderValue) -> bool {
    matches!(
        name.as_str(),
        "connection" | "keep-alive" | "proxy-connection" | "upgrade" | "transfer-encoding"
    ) || (name == header::TE && value != "trailers")
}

/// The request head for one stream: HTTP/2 carries the absolute URI (`:scheme`,
/// `:authority`) instead of a `Host` header, and the body's length as `content-length`.
pub(super) fn build_request(outgoing: &Outgoing<'_>, uri: Uri) -> Request<()> {
    let mut request = Request::new(());
    *request.method_mut() = outgoing.method.clone();
    *request.uri_mut() = uri;
    let template = outgoing.headers.as_ref();
    let headers = request.headers_mut();
    // One pass over the (few) template headers; a copy without the forbidden ones only when
    // there are some.
    if template
        .iter()
        .any(|(name, value)| is_connection_header(name, value))
    {
        headers.extend(
            template
                .iter()
                .filter(|(name, value)| !is_connection_header(name, value))
                .map(|(name, value)| (name.clone(), value.clone())),
        );
    } else {
        *headers = template.clone();
    }
    if let Some(trace) = &outgoing.trace {
        if let Ok(value) = HeaderValue::from_bytes(trace) {
            headers.insert(
                HeaderName::from_static(crate::record::trace::TRACEPARENT),
                value,
            );
        }
    }
    let length = outgoing.body.len();
    let has_payload = matches!(outgoing.method, Method::POST | Method::PUT | Method::PATCH);
    if (length > 0 || has_payload) && !headers.contains_key(header::CONTENT_LENGTH) {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    request
}

/// Classes an `h2` error. The connection's I/O error is looked through (a TLS alert is `tls`);
/// a stream or connection the server reset or closed is `reset`, unless it named a protocol
/// violation; HTTP/2 failing locally — e.g. a server that speaks only HTTP/1.1 answers the
/// connection preface with an HTTP/1.1 response — is `protocol`.
fn classify_h2(error: &h2::Error) -> ErrorClass {
    if let Some(io) = error.get_io() {
        if io
            .get_ref()
            .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
        {
            return ErrorClass::Tls;
        }
        return classify_io(io, false);
    }
    let violation = matches!(
        error.reason(),
        Some(
            Reason::PROTOCOL_ERROR
                | Reason::FRAME_SIZE_ERROR
                | Reason::COMPRESSION_ERROR
                | Reason::FLOW_CONTROL_ERROR
                | Reason::HTTP_1_1_REQUIRED
        )
    );
    if error.reason().is_none() {
        // Neither I/O nor a reset: our own misuse of the API.
        ErrorClass::Other
    } else if error.is_library() || violation {
        ErrorClass::Protocol
    } else {
        ErrorClass::Reset
    }
}

/// Sends the body as flow control grants capacity for it, so the last chunk is accepted only
/// once every byte may go out (a stream is given capacity only once it has a slot). A body
/// no larger than HTTP/2's smallest window (a gRPC call, a small POST) is queued at once
/// behind its HEADERS: the connection writes both in one system call and one TCP segment.
/// Waiting for capacity first made them two writes a scheduler turn apart, and the server
/// waited for the second (grpcio's reply came 1–15 ms later on a loaded machine).
async fn send_body(stream: &mut h2::SendStream<Bytes>, body: &[Bytes]) -> Result<(), h2::Error> {
    let Some(last) = body.len().checked_sub(1) else {
        return Ok(());
    };
    if body.iter().map(Bytes::len).sum::<usize>() <= SMALL_BODY_BYTES {
        for (i, chunk) in body.iter().enumerate() {
            stream.send_data(chunk.clone(), i == last)?;
        }
        return Ok(());
    }
    for (i, chunk) in body.iter().enumerate() {
        let mut rest = chunk.clone();
        loop {
            let granted = if rest.is_empty() {
                0
            } else {
                stream.reserve_capacity(rest.len());
                match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
                    Some(granted) => granted?,
                    None => return Err(h2::Error::from(Reason::CANCEL)),
                }
            };
            let piece = rest.split_to(granted.min(rest.len()));
            let end = i == last && rest.is_empty();
            stream.send_data(piece, end)?;
            if rest.is_empty() {
                break;
            }
        }
    }
    Ok(())
}

/// Size of a header block written out as HTTP/1.1 text (`name: value\r\n`).
pub(super) fn header_bytes(headers: &HeaderMap) -> u64 {
    headers
        .iter()
        .map(|(name, value)| (name.as_str().len() + value.len() + 4) as u64)
        .sum()
}

/// A gRPC call's status: a trailers-only reply's, else its trailers'.
async fn call_status(
    early: Option<Result<(u8, Option<String>), ErrorClass>>,
    body: &mut h2::RecvStream,
    open: &Open,
) -> Result<(u8, Option<String>), ErrorClass> {
    match early {
        Some(status) => status,
        None => match body.trailers().await.map_err(|e| open.classify(&e))? {
            Some(trailers) => grpc::status(&trailers),
            None => Err(ErrorClass::Protocol),
        },
    }
}

impl Hop for Http2Stream {
    async fn hop(
        &mut self,
        origin: &Origin,
        request: &Outgoing<'_>,
        started: Instant,
        out: &mut Exchange,
        captured: &mut Captured,
    ) -> Result<Option<HeaderValue>, ErrorClass> {
        // Boxed: a request's state (its head, the stream, a gRPC call's reply) lives only
        // while it is in flight, not in every worker's future, idle or not.
        Box::pin(self.exchange(origin, request, started, out, captured)).await
    }

    fn settle(&mut self, _out: &mut Exchange) {
        // Bytes are counted as they are sent and received (see the module note).
    }

    fn discard(&mut self) {
        // The stream failed; the connection may be fine for the group's other workers. If it
        // is not, it reports itself closed and the next request opens a new one.
        self.open = None;
    }
}

impl Http2Stream {
    /// One request and its response on this worker's stream.
    async fn exchange(
        &mut self,
        origin: &Origin,
        request: &Outgoing<'_>,
        started: Instant,
        out: &mut Exchange,
        captured: &mut Captured,
    ) -> Result<Option<HeaderValue>, ErrorClass> {
        // Redirects to another origin go over HTTP/1.1 (see `Client::hop`), so the origin's
        // scheme and authority are the configured ones.
        let call = match &self.config.grpc {
            Some(codec) => self.calls.prepare(codec, &request.path, &request.body)?,
            None => None,
        };
        let mut head = build_request(request, self.uris.of(&request.path));
        let body = match &call {
            Some(call) => call.onto(&mut head),
            None => request.body.chunks(),
        };
        out.bytes_sent += header_bytes(head.headers())
            + head.uri().path_and_query().map_or(1, |p| p.as_str().len()) as u64
            + body.iter().map(|c| c.len() as u64).sum::<u64>();
        // The reply body of a call whose checks read it (the buffer is the stream's, reused).
        let mut reply = std::mem::take(&mut self.calls.reply);
        let open = self.sender(origin, out).await?;
        std::future::poll_fn(|cx| open.sender.poll_ready(cx))
            .await
            .map_err(|e| open.classify(&e))?;
        let (response, mut stream) = open
            .sender
            .send_request(head, body.is_empty())
            .map_err(|e| open.classify(&e))?;
        send_body(&mut stream, body)
            .await
            .map_err(|e| open.classify(&e))?;
        // Beyond the server's stream limit the request waits in the client for a slot; this
        // handle is ready again once its stream has one.
        std::future::poll_fn(|cx| open.sender.poll_ready(cx))
            .await
            .map_err(|e| open.classify(&e))?;
        out.send_ns = Some(nanos(started.elapsed()));
        let response = response.await.map_err(|e| open.classify(&e))?;
        out.status = response.status().as_u16();
        out.retry_after_s = response
            .headers()
            .get(hyper::header::RETRY_AFTER)
            .and_then(|v| super::retry_after_s(out.status, v.as_bytes()));
        out.ttfb_ns = Some(nanos(started.elapsed()));
        out.bytes_received += header_bytes(response.headers());
        let redirect = location(response.status(), response.headers());
        let Capture {
            headers,
            body: keep_body,
            ..
        } = request.capture;
        if headers {
            captured.headers.clone_from(response.headers());
        }
        // A trailers-only reply (an error at once) carries its status in the headers.
        let early = (call.is_some() && response.headers().contains_key("grpc-status"))
            .then(|| grpc::status(response.headers()));
        let mut body = response.into_body();
        while let Some(data) = body.data().await {
            let data = data.map_err(|e| match open.classify(&e) {
                ErrorClass::Timeout => ErrorClass::Timeout,
                _ => ErrorClass::Body,
            })?;
            out.bytes_received += data.len() as u64;
            match (keep_body, &call) {
                (false, _) => {}
                (true, None) => captured.push_body(&data),
                (true, Some(_)) => reply.extend_from_slice(&data),
            }
            // Gives the window back, so the server can send the rest.
            let _ = body.flow_control().release_capacity(data.len());
        }
        // A gRPC server answers 200; any other status is the HTTP error it is.
        if let (Some(call), 200) = (call, out.status) {
            if keep_body {
                let json = grpc::decode_json(&call.method.output(), &reply);
                captured.push_body(json.as_deref().unwrap_or_default());
            }
            reply.clear();
            let status = call_status(early, &mut body, open).await;
            self.calls.reply = reply;
            return grpc::settle(status, out).map(|()| redirect);
        }
        Ok(redirect)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_is_reset_unless_it_names_a_protocol_violation() {
        for (reason, class) in [
            (Reason::CANCEL, ErrorClass::Reset),
            (Reason::REFUSED_STREAM, ErrorClass::Reset),
            (Reason::INTERNAL_ERROR, ErrorClass::Reset),
            (Reason::PROTOCOL_ERROR, ErrorClass::Protocol),
            (Reason::FRAME_SIZE_ERROR, ErrorClass::Protocol),
            (Reason::HTTP_1_1_REQUIRED, ErrorClass::Protocol),
        ] {
            assert_eq!(classify_h2(&h2::Error::from(reason)), class, "{reason:?}");
        }
    }

    #[test]
    fn connection_headers_are_not_sent_over_http2() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        headers.insert(header::TE, HeaderValue::from_static("gzip"));
        headers.insert(header::USER_AGENT, HeaderValue::from_static("loadgen"));
        let outgoing = Outgoing {
            method: Method::POST,
            path: "/a?b=1".parse().unwrap(),
            headers: std::borrow::Cow::Owned(headers),
            body: Default::default(),
            trace: None,
            capture: Default::default(),
        };
        let uri = "https://example.test:8443/a?b=1".parse().unwrap();
        let request = build_request(&outgoing, uri);
        assert_eq!(request.uri(), "https://example.test:8443/a?b=1");
        let names: Vec<_> = request.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["user-agent", "content-length"]);
        assert_eq!(request.headers()[header::CONTENT_LENGTH], "0");
    }
}
