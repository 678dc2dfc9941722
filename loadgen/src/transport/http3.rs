//! HTTP/3: a few workers share one QUIC connection, each sending on its own stream.
//!
//! With `--http3` the connection policy is HTTP/2's: workers are grouped
//! `--streams-per-connection` at a time, each group shares a [`SharedConnection`], opened by
//! whichever of its workers needs it first (that worker's row carries `connect_ns`, which
//! covers the whole QUIC handshake: TLS 1.3 with ALPN `h3` inside it) and reopened the same
//! way once it has closed. QUIC comes from `quinn` over rustls, HTTP/3 from the `h3` crate;
//! each connection has its own UDP socket (its own quinn endpoint), as each HTTP/1.1 or
//! HTTP/2 connection has its own TCP socket, so one busy endpoint task does not carry the run.
//!
//! Byte counts, as over HTTP/2: streams share the connection, so `bytes_sent` and
//! `bytes_received` count each request's and response's headers (as `name: value` text) and
//! body — QPACK compression, QUIC framing and encryption are not included. There is no TCP
//! here: no `TCP_INFO`, no send buffer; the run's `client.tcp` stays empty.
//!
//! quinn's tasks (the endpoint's and each connection's driver) run on the run's tokio runtime,
//! but yield once before each poll they were woken for (`BatchingRuntime`), so that one
//! UDP datagram carries the requests of every worker that was ready, not one request each.
//!
//! `send_ns` is the moment the request's stream was finished after every body byte was
//! accepted: a request beyond the server's stream limit (QUIC's MAX_STREAMS) waits inside the
//! client for a stream before that, like HTTP/2's wait for a slot, so that wait is the
//! client's time and `ttfb_ns - send_ns` is the server's.
//!
//! Failures: a server that resets the stream is `reset` (`body` once the headers arrived),
//! one that closes the connection (CONNECTION_CLOSE, GOAWAY, a stateless reset) is `closed`,
//! a connection that heard nothing for quinn's idle timeout is `idle_timeout`, a handshake
//! the server refused or that could not agree is `handshake` (a certificate problem is
//! `tls`, and no answer within `--connect-timeout` is `connect_timeout`).

use std::future::Future;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes};
use h3::error::StreamError;
use hyper::header::HeaderValue;
use tokio::sync::Mutex;

use super::connect::{ConnectFailure, Origin};
use super::http2::{build_request, header_bytes, AbsoluteUris};
use super::{location, Exchange, Hop, Outgoing, TransportConfig};
use crate::clock::nanos;
use crate::record::ErrorClass;
use crate::workload::check::{Capture, Captured};

/// The ALPN protocol HTTP/3 runs under (RFC 9114, 3.1).
pub const ALPN: &[u8] = b"h3";

/// How long a QUIC connection may hear nothing from the server before quinn closes it; a
/// request in flight then is an `idle_timeout` row.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

type Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// One QUIC connection shared by a group of workers.
#[derive(Default)]
pub struct SharedConnection {
    open: Mutex<Option<Open>>,
}

impl std::fmt::Debug for SharedConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedConnection")
    }
}

/// An open connection: the handle streams are opened on and the QUIC connection under it,
/// which says how (and whether) it ended.
#[derive(Clone)]
pub(crate) struct Open {
    sender: Sender,
    connection: quinn::Connection,
}

impl Open {
    fn is_closed(&self) -> bool {
        self.connection.close_reason().is_some()
    }

    /// The class of a stream's failure, looking through to the connection's end when the
    /// stream was cut off by it.
    fn classify(&self, error: &StreamError) -> ErrorClass {
        if let Some(reason) = self.connection.close_reason() {
            return classify_closed(&reason);
        }
        match error {
            StreamError::RemoteTerminate { .. } => ErrorClass::Reset,
            // GOAWAY: the server is closing the connection.
            StreamError::RemoteClosing { .. } => ErrorClass::Closed,
            StreamError::ConnectionError {
                0: h3::error::ConnectionError::Timeout { .. },
                ..
            } => ErrorClass::IdleTimeout,
            StreamError::ConnectionError { .. } => ErrorClass::Closed,
            StreamError::HeaderTooBig { .. } | StreamError::StreamError { .. } => {
                ErrorClass::Protocol
            }
            _ => ErrorClass::Other,
        }
    }
}

/// How a QUIC connection that has ended ended, as the class of a request it cut off.
fn classify_closed(reason: &quinn::ConnectionError) -> ErrorClass {
    use quinn::ConnectionError as E;
    match reason {
        E::TimedOut => ErrorClass::IdleTimeout,
        E::ApplicationClosed(_) | E::ConnectionClosed(_) | E::Reset => ErrorClass::Closed,
        E::TransportError(_) => ErrorClass::Protocol,
        E::VersionMismatch => ErrorClass::Handshake,
        E::LocallyClosed | E::CidsExhausted => ErrorClass::Other,
    }
}

/// How a QUIC handshake failed: our TLS refusing the server (its certificate) is `tls`, no
/// answer in time `connect_timeout`, anything the server refused or could not agree on (its
/// CONNECTION_CLOSE, an ALPN it does not speak, a QUIC version) `handshake`.
fn classify_handshake(error: &quinn::ConnectionError) -> ErrorClass {
    use quinn::ConnectionError as E;
    let crypto = |code: quinn::TransportErrorCode| (0x100..0x200).contains(&u64::from(code));
    match error {
        E::TransportError(e) if crypto(e.code) => ErrorClass::Tls,
        E::TimedOut => ErrorClass::ConnectTimeout,
        E::LocallyClosed | E::CidsExhausted => ErrorClass::Other,
        _ => ErrorClass::Handshake,
    }
}

/// One worker's stream on a shared QUIC connection.
pub struct Http3Stream {
    config: Arc<TransportConfig>,
    shared: Arc<SharedConnection>,
    /// This worker's handle on the shared connection, while it is open.
    open: Option<Open>,
    uris: AbsoluteUris,
}

impl Http3Stream {
    pub fn new(config: Arc<TransportConfig>, shared: Arc<SharedConnection>) -> Self {
        Http3Stream {
            uris: AbsoluteUris::new(&config.origin),
            config,
            shared,
            open: None,
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
        // Boxed: the handshake's state would otherwise be part of every request's future.
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
        let open = handshake(origin, config.connect_timeout)
            .await
            .map_err(|f| f.class)?;
        out.add_connect(nanos(before.elapsed()));
        *slot = Some(open.clone());
        Ok(open)
    }
}

/// The QUIC client settings for `origin`: its rustls config (which offers ALPN `h3`, see
/// `tls::client_config`) and the idle timeout.
fn client_config(origin: &Origin) -> Result<quinn::ClientConfig, ConnectFailure> {
    let failure = |detail: String| ConnectFailure {
        class: ErrorClass::Tls,
        detail,
    };
    let tls = origin
        .tls
        .clone()
        .ok_or_else(|| failure("HTTP/3 needs an https:// target".to_string()))?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| failure(format!("TLS 1.3 settings for QUIC: {e}")))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(Some(
        quinn::IdleTimeout::try_from(IDLE_TIMEOUT).expect("30 s is a valid QUIC idle timeout"),
    ));
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// Opens a QUIC connection to `origin` from a UDP socket of its own, completes the handshake
/// within `timeout` and starts HTTP/3 on it (the task that drives its control streams runs
/// beside it).
pub(crate) async fn handshake(origin: &Origin, timeout: Duration) -> Result<Open, ConnectFailure> {
    let failure = |class: ErrorClass, detail: String| ConnectFailure { class, detail };
    let local: SocketAddr = match origin.addr {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let endpoint = std::net::UdpSocket::bind(local)
        .and_then(|socket| {
            let runtime = Arc::new(BatchingRuntime);
            quinn::Endpoint::new(quinn::EndpointConfig::default(), None, socket, runtime)
        })
        .map_err(|e| failure(super::classify_io(&e, true), format!("UDP socket: {e}")))?;
    let name = match &origin.server_name {
        rustls::pki_types::ServerName::DnsName(name) => name.as_ref().to_string(),
        rustls::pki_types::ServerName::IpAddress(ip) => std::net::IpAddr::from(*ip).to_string(),
        _ => origin.addr.ip().to_string(),
    };
    let connecting = endpoint
        .connect_with(client_config(origin)?, origin.addr, &name)
        .map_err(|e| failure(ErrorClass::Handshake, format!("QUIC connect: {e}")))?;
    let connection = match tokio::time::timeout(timeout, connecting).await {
        Ok(Ok(connection)) => connection,
        Ok(Err(e)) => {
            return Err(failure(
                classify_handshake(&e),
                format!("QUIC handshake: {e}"),
            ))
        }
        Err(_) => {
            let detail = format!("no QUIC handshake within {timeout:?}");
            return Err(failure(ErrorClass::ConnectTimeout, detail));
        }
    };
    let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(connection.clone()))
        .await
        .map_err(|e| failure(ErrorClass::Handshake, format!("HTTP/3 settings: {e}")))?;
    tokio::spawn(async move {
        // Ends with the connection; how it ended is read from the connection itself.
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        drop(endpoint);
    });
    Ok(Open { sender, connection })
}

/// quinn's tokio runtime, except that the tasks quinn spawns (the endpoint's driver and each
/// connection's) go to the back of the runtime's queue when woken, before they run.
///
/// Why: tokio's multi-threaded scheduler runs a task that the running task woke next (its LIFO
/// slot). A worker that writes its request on a stream wakes the connection's driver, which
/// would then send that request alone, in a datagram and a `sendmsg` of its own, before the
/// next ready worker had written its own: one system call per request, measured. Behind the
/// ready workers, the driver sends all their requests at once, in as few datagrams as they fit
/// in — what a current-thread runtime (oha's) does by itself.
#[derive(Debug)]
struct BatchingRuntime;

impl quinn::Runtime for BatchingRuntime {
    fn new_timer(&self, at: Instant) -> Pin<Box<dyn quinn::AsyncTimer>> {
        quinn::TokioRuntime.new_timer(at)
    }

    fn spawn(&self, future: Pin<Box<dyn Future<Output = ()> + Send>>) {
        tokio::spawn(YieldWhenWoken {
            future,
            yielded: false,
        });
    }

    fn wrap_udp_socket(
        &self,
        socket: std::net::UdpSocket,
    ) -> std::io::Result<Arc<dyn quinn::AsyncUdpSocket>> {
        quinn::TokioRuntime.wrap_udp_socket(socket)
    }
}

/// A future that, each time it is woken, first yields once (waking itself, which tokio
/// treats as a yield: the back of the queue) and only then polls `future`.
struct YieldWhenWoken {
    future: Pin<Box<dyn Future<Output = ()> + Send>>,
    yielded: bool,
}

impl Future for YieldWhenWoken {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if !self.yielded {
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.yielded = false;
        self.future.as_mut().poll(cx)
    }
}

/// Opens one QUIC connection before the run and closes it (the probe of `--http3` runs).
pub async fn probe(origin: &Origin, timeout: Duration) -> Result<(), ConnectFailure> {
    let open = handshake(origin, timeout).await?;
    open.connection.close(0u32.into(), b"probe");
    Ok(())
}

impl Hop for Http3Stream {
    async fn hop(
        &mut self,
        origin: &Origin,
        request: &Outgoing<'_>,
        started: Instant,
        out: &mut Exchange,
        captured: &mut Captured,
    ) -> Result<Option<HeaderValue>, ErrorClass> {
        // Boxed: a request's state (its head, the stream) lives only while it is in flight,
        // not in every worker's future.
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

impl Http3Stream {
    /// One request and its response on a new stream of this worker's connection.
    async fn exchange(
        &mut self,
        origin: &Origin,
        request: &Outgoing<'_>,
        started: Instant,
        out: &mut Exchange,
        captured: &mut Captured,
    ) -> Result<Option<HeaderValue>, ErrorClass> {
        let head = build_request(request, self.uris.of(&request.path));
        let body = request.body.chunks();
        out.bytes_sent += header_bytes(head.headers())
            + head.uri().path_and_query().map_or(1, |p| p.as_str().len()) as u64
            + body.iter().map(|c| c.len() as u64).sum::<u64>();
        let open = self.sender(origin, out).await?;
        // Waits here for a stream beyond the server's MAX_STREAMS (the client's time).
        let mut stream = (open.sender.send_request(head).await).map_err(|e| open.classify(&e))?;
        for chunk in body {
            (stream.send_data(chunk.clone()).await).map_err(|e| open.classify(&e))?;
        }
        stream.finish().await.map_err(|e| open.classify(&e))?;
        out.send_ns = Some(nanos(started.elapsed()));
        let response = stream
            .recv_response()
            .await
            .map_err(|e| open.classify(&e))?;
        out.status = response.status().as_u16();
        out.retry_after_s = response
            .headers()
            .get(hyper::header::RETRY_AFTER)
            .and_then(|v| super::retry_after_s(out.status, v.as_bytes()));
        out.ttfb_ns = Some(nanos(started.elapsed()));
        out.bytes_received += header_bytes(response.headers());
        let Capture {
            headers,
            body: keep_body,
            ..
        } = request.capture;
        if headers {
            captured.headers.clone_from(response.headers());
        }
        loop {
            let data = stream
                .recv_data()
                .await
                .map_err(|e| match open.classify(&e) {
                    // A stream cut after its headers is a broken body, as over HTTP/2.
                    ErrorClass::Reset => ErrorClass::Body,
                    class => class,
                })?;
            let Some(mut data) = data else { break };
            while data.has_remaining() {
                let chunk = data.chunk();
                out.bytes_received += chunk.len() as u64;
                if keep_body {
                    captured.push_body(chunk);
                }
                let n = chunk.len();
                data.advance(n);
            }
        }
        Ok(location(response.status(), response.headers()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_that_ended_names_how() {
        use quinn::ConnectionError as E;
        assert_eq!(classify_closed(&E::TimedOut), ErrorClass::IdleTimeout);
        assert_eq!(classify_closed(&E::Reset), ErrorClass::Closed);
        assert_eq!(classify_closed(&E::VersionMismatch), ErrorClass::Handshake);
        assert_eq!(classify_handshake(&E::TimedOut), ErrorClass::ConnectTimeout);
        assert_eq!(classify_handshake(&E::Reset), ErrorClass::Handshake);
    }

    /// The order in which a worker that was ready and a driver woken after it run, on a
    /// multi-threaded runtime like the run's, the driver spawned by `spawn`.
    fn order_of_ready_worker_and_woken_driver(
        spawn: fn(Pin<Box<dyn Future<Output = ()> + Send>>),
    ) -> Vec<&'static str> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("a runtime");
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = |order: &Arc<std::sync::Mutex<Vec<_>>>, what| order.lock().unwrap().push(what);
        let wake = Arc::new(tokio::sync::Notify::new());
        let (ready, driver_waits) = tokio::sync::oneshot::channel();
        let (driver_order, driver_wake) = (order.clone(), wake.clone());
        let worker_order = order.clone();
        let driver = async move {
            let woken = driver_wake.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            ready.send(()).expect("the test waits");
            woken.await;
            log(&driver_order, "driver");
        };
        let waited = order.clone();
        runtime.block_on(async move {
            // On the runtime's worker thread, where wake-ups are local as in a run.
            tokio::spawn(async move {
                spawn(Box::pin(driver));
                driver_waits.await.expect("the driver is ready");
                // A fresh turn of the scheduler, as a worker woken by a response has.
                tokio::task::yield_now().await;
                let worker = tokio::spawn(async move { log(&worker_order, "worker") });
                // A worker's write on its stream: it wakes the connection's driver.
                wake.notify_one();
                worker.await.expect("the worker runs");
            })
            .await
            .expect("the test task runs");
            while waited.lock().unwrap().len() < 2 {
                tokio::task::yield_now().await;
            }
        });
        let order = order.lock().unwrap().clone();
        order
    }

    #[test]
    fn a_woken_quinn_driver_runs_after_the_workers_that_were_ready() {
        // tokio on its own runs the driver first (its LIFO slot): each request its own datagram.
        let plain = |driver| drop(tokio::spawn(driver));
        assert_eq!(
            order_of_ready_worker_and_woken_driver(plain),
            ["driver", "worker"]
        );
        let batching = |driver| quinn::Runtime::spawn(&BatchingRuntime, driver);
        assert_eq!(
            order_of_ready_worker_and_woken_driver(batching),
            ["worker", "driver"]
        );
    }
}
