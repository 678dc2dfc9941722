//! Transport: how one worker's requests reach the server, timed and classified.
//!
//! A [`Client`] is owned by exactly one worker. Over HTTP/1.1 it holds at most one connection
//! of its own, so connection queueing is never hidden behind a pool (docs/architecture.md,
//! "Hot path rules"); over HTTP/2 and HTTP/3 a fixed group of workers shares one connection,
//! one stream each (`--streams-per-connection`). It reports what happened as an [`Exchange`] — status,
//! connect and first-byte times, bytes on the wire, and an [`ErrorClass`] when it failed — and
//! never returns early with an error: failures are data. It follows redirects only when asked.
//! It does not decide what to send or when (models do) and does not record anything (the
//! worker does).

pub mod connect;
pub mod grpc;
pub mod http1;
pub mod http2;
pub mod http3;
mod io;
pub mod tls;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::borrow::Cow;

use hyper::header::{HeaderMap, HeaderValue, LOCATION};
use hyper::{Method, StatusCode, Uri};

pub use connect::{ConnectFailure, ConnectPacer, Origin};

use crate::record::ErrorClass;
use crate::workload::check::{Capture, Captured};
use crate::workload::{Prepared, RequestTemplate};

/// Most redirects followed for one request; one more is a `too_many_redirects` row.
pub const MAX_REDIRECTS: u32 = 10;

/// The outcome of one request on the wire (all its redirect hops, when they are followed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exchange {
    /// HTTP status of the last response; 0 when no response arrived.
    pub status: u16,
    /// Time spent opening new connections for this request; `None` when one was reused.
    pub connect_ns: Option<i64>,
    /// Last byte of the last request handed over for sending, measured from the request's
    /// start: written to the socket (HTTP/1.1), or its last body frame taken by the HTTP/2
    /// stream (the headers, for a request without a body; flow control may still hold the
    /// data in the connection's buffer). `None` when the request could not be sent whole.
    pub send_ns: Option<i64>,
    /// First byte of the last response, measured from the request's start.
    pub ttfb_ns: Option<i64>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub error: Option<ErrorClass>,
    /// gRPC calls: the reply's `grpc-status` and `grpc-message` (an index into
    /// [`crate::record::grpc`]'s table).
    pub grpc_status: Option<u8>,
    pub grpc_message: Option<u16>,
    /// The last response was a rejection (429, 503) with a `Retry-After`: its delay in
    /// seconds ([`retry_after_s`]).
    pub retry_after_s: Option<u32>,
}

impl Exchange {
    fn add_connect(&mut self, ns: i64) {
        *self.connect_ns.get_or_insert(0) += ns;
    }
}

/// Which redirects a worker follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Redirects {
    /// None: a 3xx is the response (the default, like wrk and oha).
    #[default]
    None,
    /// Those to the same scheme, host and port, over the worker's own connection.
    SameOrigin,
    /// Any, opening a one-off connection for another origin.
    Any,
}

/// How every worker of a run connects; shared by all of them.
#[derive(Debug, Clone)]
pub struct TransportConfig {
    pub origin: Origin,
    /// HTTP/2 (ALPN `h2` over TLS, prior knowledge over TCP) instead of HTTP/1.1.
    pub http2: bool,
    /// HTTP/3 (QUIC, ALPN `h3`; `https://` only) instead of HTTP/1.1.
    pub http3: bool,
    /// HTTP/2 and HTTP/3: workers (streams) sharing one connection.
    pub streams_per_connection: u32,
    /// `--proto`: requests to `/package.Service/Method` are gRPC calls (HTTP/2 only).
    pub grpc: Option<Arc<grpc::Codec>>,
    /// `false`: a new connection for every request (`--no-keepalive`, HTTP/1.1).
    pub keepalive: bool,
    pub redirects: Redirects,
    /// TLS settings for `https://` redirect targets of another origin (`Redirects::Any`).
    pub redirect_tls: Option<Arc<rustls::ClientConfig>>,
    pub connect_timeout: Duration,
    /// Limit for one whole request: connect (if needed), send, headers and body, redirects.
    pub request_timeout: Duration,
    /// `--source-addr`: the local addresses HTTP/1.1 workers connect from, in turn (empty:
    /// the kernel's choice).
    pub sources: Vec<std::net::IpAddr>,
    /// `--connect-rate`: the pace of the workers' first connections.
    pub connect_pacer: Option<Arc<ConnectPacer>>,
    /// The run's `TCP_INFO` sums: each connection adds its own as it closes.
    pub tcp: Arc<crate::stats::tcp::TcpTotals>,
}

/// One worker's way of sending requests.
pub trait Transport: Send {
    /// Sends `request` (the op's `template` rendered as `prepared`), which the worker started
    /// at `started`, and reports how it went. What the template's checks read of the last
    /// response (`template.capture`) is left in `captured`; without checks it is untouched.
    fn send<'a>(
        &'a mut self,
        template: &'a RequestTemplate,
        prepared: Prepared,
        started: Instant,
        captured: &'a mut Captured,
    ) -> impl Future<Output = Exchange> + Send + 'a;

    /// Opens the connection ahead of the first request, if it can; whether it could is left
    /// to that request to find out.
    fn connect(&mut self) -> impl Future<Output = ()> + Send;

    /// The worker will wait before its next request (think time, the schedule): buffers only
    /// a request in flight needs can be given back, so an idle connection costs little.
    fn idle(&mut self) {}
}

/// One request as the transports send it: the template's headers are borrowed, and only
/// copied when a redirect changes them.
#[derive(Debug, Clone)]
pub struct Outgoing<'a> {
    pub method: Method,
    /// Path and query (origin form).
    pub path: Uri,
    pub headers: Cow<'a, HeaderMap>,
    pub body: crate::workload::template::BodyBytes,
    /// The `traceparent` header's value (`--trace`), sent after the template's headers.
    pub trace: Option<[u8; crate::record::trace::TRACEPARENT_LEN]>,
    /// What of the response to keep for the op's checks (nothing for most ops).
    pub capture: Capture,
}

/// One request/response on one connection: the HTTP/1.1 and HTTP/2 connections implement it.
pub trait Hop: Send {
    /// Sends `request` to `origin`, reads the whole response, and adds what happened to `out`
    /// (status, connect time, first byte, bytes); keeps what `request.capture` asks for in
    /// `captured`. Returns the `Location` of a redirect.
    fn hop<'a>(
        &'a mut self,
        origin: &'a Origin,
        request: &'a Outgoing<'a>,
        started: Instant,
        out: &'a mut Exchange,
        captured: &'a mut Captured,
    ) -> impl Future<Output = Result<Option<HeaderValue>, ErrorClass>> + Send + 'a;

    /// Adds the bytes of the hop in progress to `out`; called after each hop and after a
    /// request timeout cut one off.
    fn settle(&mut self, out: &mut Exchange);

    /// Forgets the connection after a failure: whatever state it is in, it is not one to send
    /// the next request on.
    fn discard(&mut self);

    /// Gives back what only a request in flight needs ([`Transport::idle`]).
    fn idle(&mut self) {}
}

/// A worker's client: its connection (`C`: its own HTTP/1.1 one, or a stream on a shared
/// HTTP/2 one) and the redirect policy.
///
/// Generic over the connection rather than holding an enum of both, so that a worker's
/// request future is only as large as its own protocol's: an HTTP/2 stream's state is a
/// fraction of the HTTP/1.1 exchange's, and a future is copied whole each time it is created
/// and handed to the next layer (measured: 14 KB per HTTP/2 worker task with the enum).
pub struct Client<C> {
    config: Arc<TransportConfig>,
    connection: C,
    /// The request timeout, one timer reset for each request rather than a new one (it is
    /// taken out while a request runs, so a request cut off by an abort leaves `None`).
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// A connection that can be opened ahead of the first request ([`Transport::connect`]).
pub trait Connect: Hop {
    /// Opens the connection to `origin` if it is not open; a failure is left for the next
    /// request to find.
    fn open_ahead<'a>(&'a mut self, origin: &'a Origin) -> impl Future<Output = ()> + Send + 'a;
}

impl Connect for http1::Http1Connection {
    async fn open_ahead(&mut self, origin: &Origin) {
        let _ = self
            .ready(origin, Instant::now(), &mut Exchange::default())
            .await;
    }
}

impl Connect for http2::Http2Stream {
    async fn open_ahead(&mut self, origin: &Origin) {
        let _ = self.sender(origin, &mut Exchange::default()).await;
    }
}

impl Connect for http3::Http3Stream {
    async fn open_ahead(&mut self, origin: &Origin) {
        let _ = self.sender(origin, &mut Exchange::default()).await;
    }
}

impl Client<http1::Http1Connection> {
    /// A client over its own HTTP/1.1 connection, opened from `source` when given.
    pub fn http1(config: Arc<TransportConfig>, source: Option<std::net::IpAddr>) -> Self {
        let connection = http1::Http1Connection::new(config.clone(), source);
        Client {
            config,
            connection,
            deadline: None,
        }
    }
}

impl Client<http2::Http2Stream> {
    /// A client that is one stream of the shared HTTP/2 connection `shared`.
    pub fn http2(config: Arc<TransportConfig>, shared: Arc<http2::SharedConnection>) -> Self {
        let connection = http2::Http2Stream::new(config.clone(), shared);
        Client {
            config,
            connection,
            deadline: None,
        }
    }
}

impl Client<http3::Http3Stream> {
    /// A client that is one stream of the shared QUIC connection `shared`.
    pub fn http3(config: Arc<TransportConfig>, shared: Arc<http3::SharedConnection>) -> Self {
        let connection = http3::Http3Stream::new(config.clone(), shared);
        Client {
            config,
            connection,
            deadline: None,
        }
    }
}

impl<C: Connect> Client<C> {
    async fn hop(
        &mut self,
        origin: Option<&Origin>,
        request: &Outgoing<'_>,
        started: Instant,
        out: &mut Exchange,
        captured: &mut Captured,
    ) -> Result<Option<HeaderValue>, ErrorClass> {
        // Each hop's response replaces the last: checks read the final one.
        if request.capture.any() {
            captured.start(request.capture);
        }
        let Some(origin) = origin else {
            let origin = &self.config.origin;
            return self
                .connection
                .hop(origin, request, started, out, captured)
                .await;
        };
        // Another origin (`--follow-redirects=any`): a one-off HTTP/1.1 connection, its state
        // boxed so that it does not weigh on every request's future.
        let mut one_off = http1::Http1Connection::new(self.config.clone(), None);
        Box::pin(one_off.hop(origin, request, started, out, captured)).await
    }

    /// Sends `outgoing` and follows redirects as configured.
    ///
    /// The first hop is the whole request almost always; following a redirect is boxed, so
    /// its state (the next origin, a copy of the request) is not part of every request's
    /// future, which every worker holds for as long as it runs.
    async fn follow(
        &mut self,
        outgoing: &Outgoing<'_>,
        started: Instant,
        out: &mut Exchange,
        captured: &mut Captured,
    ) -> Result<(), ErrorClass> {
        let location = self.hop(None, outgoing, started, out, captured).await?;
        match location {
            Some(location) if self.config.redirects != Redirects::None => {
                let outgoing = outgoing.clone();
                Box::pin(self.redirect(outgoing, location, started, out, captured)).await
            }
            _ => Ok(()),
        }
    }

    /// Follows the redirect to `location` that the first hop of `outgoing` was answered
    /// with, and those after it, up to [`MAX_REDIRECTS`].
    async fn redirect(
        &mut self,
        mut outgoing: Outgoing<'_>,
        mut location: HeaderValue,
        started: Instant,
        out: &mut Exchange,
        captured: &mut Captured,
    ) -> Result<(), ErrorClass> {
        let mut origin: Option<Origin> = None;
        for hop in 1..=MAX_REDIRECTS + 1 {
            let config = self.config.clone();
            let Some((next_origin, path)) =
                Self::redirect_target(&config, &location, origin.as_ref()).await?
            else {
                return Ok(());
            };
            if hop == MAX_REDIRECTS + 1 {
                return Err(ErrorClass::TooManyRedirects);
            }
            redirect_method(&mut outgoing, out.status);
            outgoing.path = path;
            origin = next_origin;
            match self
                .hop(origin.as_ref(), &outgoing, started, out, captured)
                .await?
            {
                Some(next) => location = next,
                None => return Ok(()),
            }
        }
        Ok(())
    }

    /// Where a `Location` points: `None` if the policy does not follow it; otherwise the
    /// origin (`None` for the worker's own) and the path.
    async fn redirect_target(
        config: &TransportConfig,
        location: &HeaderValue,
        current: Option<&Origin>,
    ) -> Result<Option<(Option<Origin>, Uri)>, ErrorClass> {
        let Ok(uri) = location.to_str().unwrap_or("").parse::<Uri>() else {
            return Err(ErrorClass::Protocol);
        };
        let path: Uri = uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .map_err(|_| ErrorClass::Protocol)?;
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            // Relative: same origin as the response that sent it.
            return Ok(Some((current.cloned(), path)));
        };
        if config.origin.is(scheme, authority.as_str()) {
            return Ok(Some((None, path)));
        }
        if current.is_some_and(|o| o.is(scheme, authority.as_str())) {
            return Ok(Some((current.cloned(), path)));
        }
        if config.redirects != Redirects::Any {
            return Ok(None);
        }
        let tls = match scheme {
            "https" => Some(config.redirect_tls.clone().ok_or(ErrorClass::Tls)?),
            "http" => None,
            _ => return Ok(None),
        };
        let port = authority
            .port_u16()
            .unwrap_or(if tls.is_some() { 443 } else { 80 });
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let addr = tokio::net::lookup_host((host, port))
            .await
            .ok()
            .and_then(|mut a| a.next())
            .ok_or(ErrorClass::Dns)?;
        let server_name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|_| ErrorClass::Tls)?;
        Ok(Some((
            Some(Origin {
                scheme: if tls.is_some() { "https" } else { "http" },
                addr,
                authority: HeaderValue::from_str(authority.as_str())
                    .map_err(|_| ErrorClass::Protocol)?,
                server_name,
                tls,
            }),
            path,
        )))
    }
}

impl<C: Connect> Transport for Client<C> {
    async fn connect(&mut self) {
        let origin = self.config.origin.clone();
        self.connection.open_ahead(&origin).await;
    }

    fn idle(&mut self) {
        self.connection.idle();
    }

    async fn send(
        &mut self,
        template: &RequestTemplate,
        prepared: Prepared,
        started: Instant,
        captured: &mut Captured,
    ) -> Exchange {
        let mut out = Exchange::default();
        let outgoing = Outgoing {
            method: template.method.clone(),
            path: prepared.uri,
            headers: Cow::Borrowed(&template.headers),
            body: prepared.body,
            trace: prepared.trace.map(|t| t.header_value()),
            capture: template.capture,
        };
        let due = tokio::time::Instant::from_std(started + self.config.request_timeout);
        let mut deadline = match self.deadline.take() {
            Some(mut sleep) => {
                sleep.as_mut().reset(due);
                sleep
            }
            None => Box::pin(tokio::time::sleep_until(due)),
        };
        let result = tokio::select! {
            biased;
            result = self.follow(&outgoing, started, &mut out, captured) => Some(result),
            () = deadline.as_mut() => None,
        };
        self.deadline = Some(deadline);
        match result {
            Some(Ok(())) => {}
            Some(Err(class)) => out.error = Some(class),
            None => out.error = Some(ErrorClass::Timeout),
        }
        self.connection.settle(&mut out);
        if out.error.is_some() {
            self.connection.discard();
        }
        out
    }
}

/// The method and body of the next hop, as browsers and curl do: 303 always becomes GET,
/// 301/302 turn a POST into a GET; 307/308 repeat the request as it was.
fn redirect_method(outgoing: &mut Outgoing<'_>, status: u16) {
    let to_get = status == StatusCode::SEE_OTHER.as_u16()
        || (matches!(status, 301 | 302) && outgoing.method == Method::POST);
    if to_get && outgoing.method != Method::HEAD {
        outgoing.method = Method::GET;
        outgoing.body = Default::default();
        let headers = outgoing.headers.to_mut();
        headers.remove(hyper::header::CONTENT_TYPE);
        headers.remove(hyper::header::CONTENT_LENGTH);
    }
}

/// A rejection's `Retry-After` (RFC 9110 §10.2.3) in seconds: its delay-seconds, or an
/// HTTP-date's distance from now (0 when past); `None` for any other status or a value that
/// is neither. Read only on rejections, so the common response pays one name comparison.
pub fn retry_after_s(status: u16, value: &[u8]) -> Option<u32> {
    if !crate::record::is_rejection(status) {
        return None;
    }
    let text = std::str::from_utf8(value).ok()?.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Some(seconds.min(u64::from(u32::MAX)) as u32);
    }
    let at = httpdate::parse_http_date(text).ok()?;
    let ahead = at
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    Some(ahead.as_secs().min(u64::from(u32::MAX)) as u32)
}

/// True for the statuses whose `Location` a client may follow.
pub(crate) fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// The `Location` of a redirect response, if it is one.
pub(crate) fn location(status: StatusCode, headers: &HeaderMap) -> Option<HeaderValue> {
    is_redirect(status.as_u16())
        .then(|| headers.get(LOCATION).cloned())
        .flatten()
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

/// Opens one connection (TCP, and TLS for `https://`) before the run, so an unreachable
/// target or a certificate problem is a clear error at start instead of a run full of
/// failed rows.
pub async fn probe(origin: &Origin, connect_timeout: Duration) -> Result<(), ConnectFailure> {
    let uncounted = Arc::new(crate::stats::tcp::TcpTotals::default());
    connect::connect(origin, None, connect_timeout, &uncounted)
        .await
        .map(drop)
}
