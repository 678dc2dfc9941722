//! The running server: listener, accept loop, one hyper connection task per client, the knobs
//! wrapped around every API request, and shutdown.
//!
//! Each accepted socket is served by `hyper_util`'s auto builder, so HTTP/1.1 and HTTP/2
//! with prior knowledge (h2c) both work on the same port. For every request this module
//! routes, applies the knobs in the order a real server would meet them (wait for a worker,
//! do the work, maybe fail) and counts the answer just before hyper writes it. It does not
//! know what any endpoint does (see `api`) or how counters are printed (see `metrics`).

use std::convert::Infallible;
use std::future::pending;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinHandle;

use crate::api::{self, StepStore};
use crate::metrics::Metrics;
use crate::reply::{self, Reply};
use crate::router::{self, Matched, Route};
use crate::{ServerConfig, ServiceTime};

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

/// State every connection and request of one server shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) metrics: Metrics,
    pub(crate) steps: StepStore,
    pub(crate) next_album_id: AtomicU64,
    service_time: ServiceTime,
    workers: Option<Semaphore>,
    error_rate: f64,
    stall: Option<crate::Stall>,
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
    let listener = listen(SocketAddr::new(config.bind, config.port))?;
    let local_addr = listener.local_addr()?;
    let shared = Arc::new(Shared {
        metrics: Metrics::default(),
        steps: StepStore::default(),
        next_album_id: AtomicU64::new(0),
        service_time: config.service_time,
        workers: config.workers.map(Semaphore::new),
        error_rate: config.error_rate,
        stall: config.stall,
        started: std::time::Instant::now(),
    });
    let (stop, stop_rx) = watch::channel(None);
    let accept_loop = tokio::spawn(accept_loop(listener, Arc::clone(&shared), stop_rx));
    Ok(RunningServer {
        local_addr,
        shared,
        stop,
        accept_loop,
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

    /// `http://IP:PORT`, without a trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.local_addr)
    }

    /// API requests answered, any status, `/metrics` excluded. A request is counted before
    /// its response is written, so once a client has read a response, it is in here.
    pub fn requests_total(&self) -> u64 {
        self.shared.metrics.requests_total()
    }

    /// API requests answered with this status, `/metrics` excluded.
    pub fn requests_with_status(&self, status: u16) -> u64 {
        self.shared.metrics.requests_with_status(status)
    }

    /// API requests received and not yet answered, including those waiting for a worker.
    pub fn in_flight(&self) -> u64 {
        self.shared.metrics.in_flight()
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
) {
    let builder = auto::Builder::new(TokioExecutor::new());
    // Every connection task holds a sender; `recv` returning `None` means all have ended.
    let (connections_tx, mut connections_done) = mpsc::channel::<()>(1);
    loop {
        tokio::select! {
            _ = stop_requested(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    tokio::spawn(serve_connection(
                        stream,
                        builder.clone(),
                        Arc::clone(&shared),
                        stop.clone(),
                        connections_tx.clone(),
                    ));
                }
                Err(_) => {
                    shared.metrics.accept_failed();
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

async fn serve_connection(
    stream: TcpStream,
    builder: auto::Builder<TokioExecutor>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<Option<Duration>>,
    _alive: mpsc::Sender<()>,
) {
    // Each response is written in one go; Nagle would only hold back the last segment of a
    // large response (or h2 frames) waiting for an ACK.
    let _ = stream.set_nodelay(true);
    let _open = shared.metrics.connection_opened();
    let service_shared = Arc::clone(&shared);
    let service = service_fn(move |request| handle(Arc::clone(&service_shared), request));
    let connection = builder.serve_connection(TokioIo::new(stream), service);
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

async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Result<Reply, Infallible> {
    let (parts, body) = request.into_parts();
    let matched = router::resolve(parts.uri.path());
    let route = matched.route();
    let response = if route == Route::Metrics {
        // Scrapes are not API work: no service time, no worker, no injected failure.
        api::handle(matched, &parts, body, &shared).await
    } else {
        serve_api(matched, &parts, body, &shared).await
    };
    shared.metrics.count(route, response.status().as_u16());
    Ok(response)
}

/// One API request with the knobs applied: queue for a worker, hold it for the service time,
/// fail at the error rate, otherwise run the handler (still holding the worker, as a
/// thread-per-request server reads and parses the body on its worker).
async fn serve_api(
    matched: Matched<'_>,
    parts: &hyper::http::request::Parts,
    body: Incoming,
    shared: &Shared,
) -> Reply {
    let _in_flight = shared.metrics.enter();
    hold_during_stall(shared).await;
    let _worker = match &shared.workers {
        Some(workers) => {
            let _waiting = shared.metrics.wait_for_worker();
            // The semaphore is never closed, so this only fails in theory; serving without a
            // permit then is better than refusing.
            workers.acquire().await.ok()
        }
        None => None,
    };
    if !shared.service_time.is_zero() {
        crate::delay::sleep(shared.service_time.sample()).await;
    }
    // A request in service when a stall begins is held too: the server answers nothing.
    hold_during_stall(shared).await;
    if shared.error_rate > 0.0 && fastrand::f64() < shared.error_rate {
        reply::discard_body(body).await;
        return reply::injected_error();
    }
    api::handle(matched, parts, body, shared).await
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
