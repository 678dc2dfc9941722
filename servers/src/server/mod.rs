//! The running server: listener, accept loop, one hyper connection task per client, the knobs
//! wrapped around every API request, and shutdown.
//!
//! Each accepted socket (past `--max-connections`, reset at once) is served by `hyper_util`'s
//! auto builder, so HTTP/1.1 and HTTP/2 with prior knowledge (h2c) both work on the same
//! port; with TLS, the handshake comes first and ALPN offers both. For every request this
//! module routes, applies the knobs in the order a real server would meet them (wait for a
//! worker, do the work, maybe fail or fault), counts the answer just before hyper writes it,
//! and shapes the body (`--slow-body`). It does not know what any endpoint does (see `api`),
//! how counters are printed (see `metrics`) or how a fault is carried out on the socket
//! (see `fault`). HTTP/3 (`--http3`) is served beside it, from `http3`, through the same
//! knobs.

mod http3;

use std::convert::Infallible;
use std::future::pending;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::reply::RequestBody;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, Version};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::api;
use crate::body::ResponseBody;
use crate::fault::{Armed, ConnectionFaults, Cut, FaultIo, Transport};
use crate::reply::{self, Reply};
use crate::router::{self, Matched, Route};
use crate::state::AppState;
use crate::{Fault, ServerConfig, ServiceTime};

/// How long [`RunningServer::shutdown`] lets requests already in service finish before their
/// connections are closed anyway. Long enough for any sane `--service-time`, short enough
/// that a test tearing down a server with a `10s` service time does not wait for it.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// The kernel caps this at `net.core.somaxconn`; asking for more than tokio's default (1024)
/// keeps a burst of thousands of load-generator connections from being refused at connect.
const LISTEN_BACKLOG: u32 = 4096;

/// After a failed `accept()` (typically out of file descriptors) retrying at once would spin
/// a core; a short pause lets connections close first.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// A client that connects and never finishes the TLS handshake would otherwise hold a task
/// and a `--max-connections` slot forever.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// State every connection and request of one server shares: what the handlers see, and the
/// knobs only this module applies.
#[derive(Debug)]
struct Shared {
    app: AppState,
    service_time: ServiceTime,
    cpu_time: Option<std::time::Duration>,
    workers: Option<Semaphore>,
    rate_limit: Option<crate::rate_limit::RateLimit>,
    error_rate: f64,
    /// Each fault with its rate, in draw order; empty when no fault is configured.
    fault_rates: Vec<(Fault, f64)>,
    slow_body: Option<Duration>,
    /// One permit per open connection; `None` is unlimited.
    connection_slots: Option<Arc<Semaphore>>,
    stall: Option<crate::Stall>,
    tls: Option<Arc<rustls::ServerConfig>>,
    started: std::time::Instant,
}

/// A server started by [`start`]. Dropping it without [`RunningServer::shutdown`] leaves it
/// serving until the tokio runtime it was started on shuts down.
#[derive(Debug)]
pub struct RunningServer {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
    /// `None` while running; `Some(grace)` asks the accept loop and connections to stop.
    stop: watch::Sender<Option<Duration>>,
    accept_loop: JoinHandle<()>,
    /// `--http3`: the UDP address QUIC is served on, and its endpoint's task.
    http3: Option<(SocketAddr, JoinHandle<()>)>,
}

/// Binds the listener and spawns the accept loop on the current tokio runtime. Returns as
/// soon as the socket is listening, so connecting right after cannot be refused.
///
/// Fails with `InvalidInput` for a config that does not [`ServerConfig::validate`], or with
/// the bind error (e.g. the port is taken).
pub async fn start(config: ServerConfig) -> io::Result<RunningServer> {
    config
        .validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // Built before binding, so a bad certificate never leaves a port half-open. `validate`
    // has just built it once already; a second build is cheap and keeps `validate` pure.
    let tls = match &config.tls {
        Some(tls) => Some(
            tls.rustls_config()
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
        ),
        None => None,
    };
    let listener = listen(SocketAddr::new(config.bind, config.port))?;
    let local_addr = listener.local_addr()?;
    let app = AppState::new(config.lenient);
    if let Some(workers) = config.workers {
        app.metrics.set_workers_limit(workers as u64);
    }
    let shared = Arc::new(Shared {
        app,
        service_time: config.service_time,
        cpu_time: config.cpu_time,
        workers: config.workers.map(Semaphore::new),
        rate_limit: config.rate_limit.map(crate::rate_limit::RateLimit::new),
        error_rate: config.error_rate,
        fault_rates: config
            .fault_rates()
            .filter(|(_, rate)| *rate > 0.0)
            .collect(),
        slow_body: config.slow_body,
        connection_slots: config
            .max_connections
            // tokio caps a semaphore at `usize::MAX >> 3` permits; no server gets near it.
            .map(|n| Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS)))),
        stall: config.stall,
        tls,
        started: std::time::Instant::now(),
    });
    let (stop, stop_rx) = watch::channel(None);
    let http3 = match (&shared.tls, config.http3) {
        (Some(tls), true) => Some(http3::start(
            local_addr,
            tls,
            config.h2_max_streams,
            Arc::clone(&shared),
            stop_rx.clone(),
        )?),
        _ => None,
    };
    let accept_loop = tokio::spawn(accept_loop(
        listener,
        Arc::clone(&shared),
        stop_rx,
        config.h2_max_streams,
    ));
    Ok(RunningServer {
        local_addr,
        shared,
        stop,
        accept_loop,
        http3,
    })
}

fn listen(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    // A restarted server can rebind its port while old connections sit in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

impl RunningServer {
    /// The address actually bound (the real port when the config asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://IP:PORT`, or `https://IP:PORT` with TLS, without a trailing slash.
    pub fn url(&self) -> String {
        let scheme = if self.shared.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.local_addr)
    }

    /// `--http3`: the UDP address HTTP/3 is served on (the TCP listener's port number).
    pub fn http3_addr(&self) -> Option<SocketAddr> {
        self.http3.as_ref().map(|(addr, _)| *addr)
    }

    /// API requests the server received and decided on, `/metrics` excluded: answered with
    /// any status, or faulted ([`Fault`]). A request is counted before its response (or
    /// fault) is written, so once a client has read a response or seen the fault, it is in
    /// here. Requests abandoned before that (the client went away) are not.
    pub fn requests_total(&self) -> u64 {
        self.shared.app.metrics.requests_total()
    }

    /// API requests answered with this status, `/metrics` excluded. A faulted request is not
    /// counted under any status, even when its status line went out (close-mid-body).
    pub fn requests_with_status(&self, status: u16) -> u64 {
        self.shared.app.metrics.requests_with_status(status)
    }

    /// API requests answered with this fault instead of a complete response.
    pub fn faults_total(&self, fault: Fault) -> u64 {
        self.shared.app.metrics.faults_total(fault)
    }

    /// Connections reset on accept because `max_connections` were already open.
    pub fn connections_refused(&self) -> u64 {
        self.shared.app.metrics.connections_refused()
    }

    /// API requests received and not yet answered, including those waiting for a worker.
    pub fn in_flight(&self) -> u64 {
        self.shared.app.metrics.in_flight()
    }

    /// Stops accepting, closes idle connections, lets requests in service finish for up to
    /// [`DEFAULT_SHUTDOWN_GRACE`], closes what is left and waits until all of it is done.
    pub async fn shutdown(self) {
        self.shutdown_with_grace(DEFAULT_SHUTDOWN_GRACE).await;
    }

    /// [`RunningServer::shutdown`] with a chosen grace period for requests in service.
    pub async fn shutdown_with_grace(self, grace: Duration) {
        // Fails only if the accept loop is already gone, which is what we want anyway.
        let _ = self.stop.send(Some(grace));
        // A panic in the accept loop would be a bug; shutdown still completes.
        let _ = self.accept_loop.await;
        if let Some((_, quic)) = self.http3 {
            let _ = quic.await;
        }
    }
}

/// Resolves with the grace period once shutdown is requested. If the `RunningServer` was
/// dropped instead, it never resolves: dropping is documented to leave the server running.
async fn stop_requested(stop: &mut watch::Receiver<Option<Duration>>) -> Duration {
    // Copy the value out first: the borrow `wait_for` returns must not live across an await.
    let grace = stop.wait_for(Option::is_some).await.map(|grace| *grace);
    match grace {
        Ok(grace) => grace.unwrap_or_default(),
        Err(_) => pending().await,
    }
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<Option<Duration>>,
    h2_max_streams: Option<u32>,
) {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    if let Some(streams) = h2_max_streams {
        builder.http2().max_concurrent_streams(streams);
    }
    // Every connection task holds a sender; `recv` returning `None` means all have ended.
    let (connections_tx, mut connections_done) = mpsc::channel::<()>(1);
    loop {
        tokio::select! {
            _ = stop_requested(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    // The slot is taken here, not in the connection task, so a burst of
                    // accepts cannot overshoot the limit before the tasks run.
                    let slot = match &shared.connection_slots {
                        None => None,
                        Some(slots) => match Arc::clone(slots).try_acquire_owned() {
                            Ok(slot) => Some(slot),
                            Err(_) => {
                                refuse(stream, &shared);
                                continue;
                            }
                        },
                    };
                    tokio::spawn(serve_connection(
                        stream,
                        builder.clone(),
                        Arc::clone(&shared),
                        stop.clone(),
                        (connections_tx.clone(), slot),
                    ));
                }
                Err(_) => {
                    shared.app.metrics.accept_failed();
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    // Closing the listener first makes new connects fail fast instead of hanging in the
    // backlog while the remaining connections drain.
    drop(listener);
    drop(connections_tx);
    let _ = connections_done.recv().await;
}

/// Resets a connection beyond `--max-connections`: linger 0, then close, so the client gets
/// RST (`ECONNRESET`) at once rather than a connection that hangs or a clean EOF it might
/// retry as a keep-alive race.
fn refuse(stream: TcpStream, shared: &Shared) {
    shared.app.metrics.connection_refused();
    // If this fails the close below is a FIN instead; the client still gets no service.
    let _ = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO));
    drop(stream);
}

/// Held by a connection task until it ends: tells shutdown the task is alive, and holds the
/// `--max-connections` slot, if any.
type ConnectionGuards = (mpsc::Sender<()>, Option<OwnedSemaphorePermit>);

async fn serve_connection(
    stream: TcpStream,
    builder: auto::Builder<TokioExecutor>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<Option<Duration>>,
    _guards: ConnectionGuards,
) {
    // Each response is written in one go; Nagle would only hold back the last segment of a
    // large response (or h2 frames) waiting for an ACK.
    let _ = stream.set_nodelay(true);
    let _open = shared.app.metrics.connection_opened();
    let Some(tls) = &shared.tls else {
        serve_http(stream, builder, Arc::clone(&shared), stop).await;
        return;
    };
    let acceptor = TlsAcceptor::from(Arc::clone(tls));
    let handshake = tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream));
    let stream = tokio::select! {
        handshake = handshake => match handshake {
            Ok(Ok(stream)) => stream,
            // A client that cannot agree on TLS gets no HTTP; counting it is all we can do.
            Ok(Err(_)) | Err(_) => {
                shared.app.metrics.tls_handshake_failed();
                return;
            }
        },
        _ = stop_requested(&mut stop) => return,
    };
    serve_http(stream, builder, Arc::clone(&shared), stop).await;
}

/// Serves HTTP on an established stream (plain TCP or TLS) until it closes or shutdown ends
/// it.
async fn serve_http<T: Transport>(
    stream: T,
    builder: auto::Builder<TokioExecutor>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<Option<Duration>>,
) {
    let faults = Arc::new(ConnectionFaults::default());
    let io = FaultIo::new(stream, Arc::clone(&faults));
    let service =
        service_fn(move |request| handle(Arc::clone(&shared), Arc::clone(&faults), request));
    let connection = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    tokio::select! {
        // A connection error is the client's doing (reset, malformed request, went away);
        // hyper has already answered what could be answered, so there is nothing to report.
        _ = connection.as_mut() => {}
        grace = stop_requested(&mut stop) => {
            // Idle keep-alive connections close now; a request in service gets `grace`.
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(grace, connection).await;
        }
    }
}

async fn handle(
    shared: Arc<Shared>,
    faults: Arc<ConnectionFaults>,
    request: Request<Incoming>,
) -> Result<Response<ResponseBody>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = RequestBody::Hyper(body);
    let matched = router::resolve(parts.uri.path());
    let route = matched.route();
    if route == Route::Metrics {
        // Scrapes are not API work: no service time, no worker, no injected failure, no
        // fault, no slow body.
        let response = api::handle(matched, &parts, body, &shared.app).await;
        shared.app.metrics.count(route, response.status().as_u16());
        return Ok(response.map(ResponseBody::whole));
    }
    let (response, fault) = serve_api(matched, &parts, body, &shared).await;
    let Some(fault) = fault else {
        shared.app.metrics.count(route, response.status().as_u16());
        return Ok(match shared.slow_body {
            Some(delay) => response.map(|body| ResponseBody::split(body, delay)),
            None => response.map(ResponseBody::whole),
        });
    };
    shared.app.metrics.count_fault(route, fault);
    let http2 = parts.version == Version::HTTP_2;
    let armed = match fault {
        Fault::Reset => Some(Armed::Reset),
        Fault::Garbage => Some(Armed::Garbage),
        // One HTTP/2 stream is cut by its body; the connection carries other requests.
        Fault::CloseMidBody if http2 => None,
        Fault::CloseMidBody => {
            let body_bytes = response.body().len();
            // HEAD responses announce a length but carry no body to cut into.
            Some(Armed::Cut(
                if body_bytes == 0 || parts.method == hyper::Method::HEAD {
                    Cut::AfterStatusLine
                } else {
                    Cut::AfterBodyBytes(body_bytes / 2)
                },
            ))
        }
    };
    if let Some(armed) = armed {
        faults.arm(armed);
    }
    Ok(match (fault, shared.slow_body) {
        (Fault::CloseMidBody, _) if http2 => response.map(ResponseBody::cut),
        // What hyper writes after the cut point is dropped, so a slow second half only
        // delays when the connection task ends, not what the client sees.
        (_, Some(delay)) => response.map(|body| ResponseBody::split(body, delay)),
        (_, None) => response.map(ResponseBody::whole),
    })
}

/// One API request with the knobs applied: queue for a worker, hold it for the service time,
/// then draw its fate: a fault, an injected 500, or the handler (still holding the worker, as
/// a thread-per-request server reads and parses the body on its worker). A faulted request
/// still gets a response for the fault to replace or cut.
async fn serve_api(
    matched: Matched<'_>,
    parts: &hyper::http::request::Parts,
    body: RequestBody,
    shared: &Shared,
) -> (Reply, Option<Fault>) {
    let _in_flight = shared.app.metrics.enter();
    if shared
        .rate_limit
        .as_ref()
        .is_some_and(|limit| !limit.admit())
    {
        reply::discard_body(body).await;
        return (reply::rejected(), None);
    }
    hold_during_stall(shared).await;
    let _worker = match &shared.workers {
        Some(workers) => {
            let _waiting = shared.app.metrics.wait_for_worker();
            // The semaphore is never closed, so this only fails in theory; serving without a
            // permit then is better than refusing.
            workers.acquire().await.ok()
        }
        None => None,
    };
    let _busy = shared.app.metrics.busy();
    if !shared.service_time.is_zero() {
        crate::delay::sleep(shared.service_time.sample()).await;
    }
    if let Some(cpu_time) = shared.cpu_time {
        crate::delay::burn(cpu_time);
    }
    // A request in service when a stall begins is held too: the server answers nothing.
    hold_during_stall(shared).await;
    match draw(shared) {
        Fate::Serve => (api::handle(matched, parts, body, &shared.app).await, None),
        Fate::Error => {
            reply::discard_body(body).await;
            (reply::injected_error(), None)
        }
        Fate::Fault(Fault::CloseMidBody) => (
            api::handle(matched, parts, body, &shared.app).await,
            Some(Fault::CloseMidBody),
        ),
        Fate::Fault(fault) => {
            // Read to the end so the close that follows is not turned into a reset by
            // unread request bytes (garbage must arrive as garbage).
            reply::discard_body(body).await;
            (reply::empty(hyper::StatusCode::OK), Some(fault))
        }
    }
}

/// What becomes of one API request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Serve,
    Error,
    Fault(Fault),
}

/// One draw for all the rates, which validation keeps at a sum of at most 1: each rate is
/// then exactly the share of requests with that fate, whatever the others are set to.
fn draw(shared: &Shared) -> Fate {
    if shared.error_rate == 0.0 && shared.fault_rates.is_empty() {
        return Fate::Serve;
    }
    let mut left = fastrand::f64();
    for &(fault, rate) in &shared.fault_rates {
        if left < rate {
            return Fate::Fault(fault);
        }
        left -= rate;
    }
    if left < shared.error_rate {
        Fate::Error
    } else {
        Fate::Serve
    }
}

/// Waits out the current stall window, if the server is in one.
async fn hold_during_stall(shared: &Shared) {
    let Some(stall) = shared.stall else { return };
    let every_ns = stall.every.as_nanos().max(1);
    let into_period_ns = shared.started.elapsed().as_nanos() % every_ns;
    // The stall is the last `duration` of each period, so the server starts healthy.
    let stall_starts_ns = every_ns - stall.duration.as_nanos();
    if into_period_ns >= stall_starts_ns {
        let remaining_ns = (every_ns - into_period_ns) as u64;
        crate::delay::sleep(std::time::Duration::from_nanos(remaining_ns)).await;
    }
}
