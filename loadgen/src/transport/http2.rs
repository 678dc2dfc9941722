//! HTTP/2: a few workers share one connection, each sending on its own stream.
//!
//! With `--http2`, workers are grouped `--streams-per-connection` at a time; each group shares
//! a [`SharedConnection`], opened by whichever of its workers needs it first (that worker's
//! row carries `connect_ns`) and reopened the same way once it has closed. A failed stream
//! does not close the connection for the others; a broken connection shows up as closed and
//! is replaced.
//!
//! Byte counts: streams share the connection's socket, so per-request wire bytes cannot be
//! measured. `bytes_sent` and `bytes_received` count each request's and response's headers
//! (as `name: value` text) and body — HPACK compression and frame overhead are not included.
//!
//! `send_ns`: hyper writes the stream's frames from the connection's own task, so the time the
//! last byte reached the socket is not visible to the worker. What is recorded is the moment
//! the stream took the body's last frame ([`TimedBody`]) — it is then queued for sending, and
//! HTTP/2 flow control may still hold part of it until the server opens its window — or, for
//! a request without a body, the moment the request (its HEADERS frame with END_STREAM) was
//! handed to the connection.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, SizeHint};
use hyper::client::conn::http2::{self, SendRequest};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::Mutex;

use super::connect::{connect, Origin};
use super::{classify_hyper, location, Exchange, Hop, Outgoing, TransportConfig};
use crate::clock::nanos;
use crate::record::ErrorClass;

/// One HTTP/2 connection shared by a group of workers.
#[derive(Default)]
pub struct SharedConnection {
    sender: Mutex<Option<SendRequest<TimedBody>>>,
}

impl std::fmt::Debug for SharedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedConnection")
    }
}

/// One worker's stream on a shared connection.
pub struct Http2Stream {
    config: Arc<TransportConfig>,
    shared: Arc<SharedConnection>,
    /// This worker's handle on the shared connection, while it is open.
    sender: Option<SendRequest<TimedBody>>,
}

impl Http2Stream {
    pub fn new(config: Arc<TransportConfig>, shared: Arc<SharedConnection>) -> Self {
        Http2Stream {
            config,
            shared,
            sender: None,
        }
    }

    /// A handle on the group's open connection, opening it if this worker is the first to
    /// find it missing or closed; the time that took goes to `out`.
    pub(crate) async fn sender(
        &mut self,
        origin: &Origin,
        out: &mut Exchange,
    ) -> Result<SendRequest<TimedBody>, ErrorClass> {
        if let Some(sender) = self.sender.as_ref().filter(|s| !s.is_closed()) {
            return Ok(sender.clone());
        }
        let mut slot = self.shared.sender.lock().await;
        if let Some(sender) = slot.as_ref().filter(|s| !s.is_closed()) {
            self.sender = Some(sender.clone());
            return Ok(sender.clone());
        }
        let before = Instant::now();
        let connected = connect(origin, self.config.connect_timeout)
            .await
            .map_err(|f| f.class)?;
        let (sender, connection) =
            http2::handshake(TokioExecutor::new(), TokioIo::new(connected.io))
                .await
                .map_err(|e| classify_hyper(&e))?;
        tokio::spawn(connection);
        out.add_connect(nanos(before.elapsed()));
        *slot = Some(sender.clone());
        self.sender = Some(sender.clone());
        Ok(sender)
    }
}

/// A request body that notes when the stream took its last frame (the `send_ns` of a request
/// with a body; see the module note).
pub struct TimedBody {
    inner: Full<Bytes>,
    sent: Arc<OnceLock<Instant>>,
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if this.inner.is_end_stream() {
            this.sent.get_or_init(Instant::now);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The hyper request for one stream: HTTP/2 carries the absolute URI (`:scheme`,
/// `:authority`) instead of a `Host` header.
fn build_request(
    outgoing: &Outgoing<'_>,
    origin: &Origin,
    sent: Arc<OnceLock<Instant>>,
) -> Request<TimedBody> {
    let body = TimedBody {
        inner: Full::new(outgoing.body.clone()),
        sent,
    };
    let mut request = Request::new(body);
    *request.method_mut() = outgoing.method.clone();
    *request.headers_mut() = outgoing.headers.as_ref().clone();
    let absolute = format!(
        "{}://{}{}",
        origin.scheme,
        origin.authority.to_str().unwrap_or("localhost"),
        outgoing.path
    );
    *request.uri_mut() = absolute.parse().unwrap_or_else(|_| outgoing.path.clone());
    request
}

/// Size of a header block written out as HTTP/1.1 text (`name: value\r\n`).
fn header_bytes(headers: &HeaderMap) -> u64 {
    headers
        .iter()
        .map(|(name, value)| (name.as_str().len() + value.len() + 4) as u64)
        .sum()
}

impl Hop for Http2Stream {
    async fn hop(
        &mut self,
        origin: &Origin,
        request: &Outgoing<'_>,
        started: Instant,
        out: &mut Exchange,
    ) -> Result<Option<HeaderValue>, ErrorClass> {
        let sent = Arc::new(OnceLock::new());
        let request = build_request(request, origin, sent.clone());
        let has_body = !request.body().is_end_stream();
        let mut sender = self.sender(origin, out).await?;
        out.bytes_sent += header_bytes(request.headers())
            + request
                .uri()
                .path_and_query()
                .map_or(1, |p| p.as_str().len()) as u64
            + request.body().size_hint().exact().unwrap_or(0);
        sender.ready().await.map_err(|e| classify_hyper(&e))?;
        let response = sender.send_request(request);
        let handed_over = Instant::now();
        let response = response.await.map_err(|e| classify_hyper(&e))?;
        let last_byte = if has_body {
            sent.get().copied()
        } else {
            Some(handed_over)
        };
        out.send_ns = last_byte.map(|at| nanos(at.saturating_duration_since(started)));
        out.status = response.status().as_u16();
        out.ttfb_ns = Some(nanos(started.elapsed()));
        out.bytes_received += header_bytes(response.headers());
        let redirect = location(response.status(), response.headers());
        let mut body = response.into_body();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => {
                    if let Some(data) = frame.data_ref() {
                        out.bytes_received += data.len() as u64;
                    }
                }
                Err(e) => {
                    return Err(match classify_hyper(&e) {
                        ErrorClass::Timeout => ErrorClass::Timeout,
                        _ => ErrorClass::Body,
                    })
                }
            }
        }
        Ok(redirect)
    }

    fn settle(&mut self, _out: &mut Exchange) {
        // Bytes are counted as they are sent and received (see the module note).
    }

    fn discard(&mut self) {
        // The stream failed; the connection may be fine for the group's other workers. If it
        // is not, it reports itself closed and the next request opens a new one.
        self.sender = None;
    }
}
