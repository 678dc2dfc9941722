//! The page and its event log: one per command (a run, a sweep, a capacity search), served
//! by one listener bound before the command's first run.
//!
//! The log holds the seconds so far (every run's sampler appends to it), the finished levels
//! of a workflow (`point` events, as its JSON file records them) and, at the end, the
//! command's final figures. `GET /` answers the page (its script and uPlot inlined: it works
//! offline), `GET /events` a server-sent-event stream: the seconds so far as one `history`
//! event and the points so far, then each new second and point as it comes, then `final`.
//! Each browser has a bounded buffer; one that does not read its events fills it and is
//! dropped, so a slow or absent page holds no memory and costs no request. What it is not: a
//! reader of the run — the samplers (`sample.rs`) and the workflows push what they know.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::channel::{Channel, Sender};
use http_body_util::{Either, Full};
use hyper::body::Frame;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;
use tokio::sync::watch;

use crate::stop::StopSignal;

/// The page: its template, and the charting library it inlines (uPlot, MIT, vendored at a
/// pinned version under loadgen/assets with its license).
const PAGE: &str = include_str!("../../../assets/dashboard.html");
const UPLOT_JS: &str = include_str!("../../../assets/uplot-1.6.32/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../../assets/uplot-1.6.32/uPlot.min.css");

/// Events a browser may leave unread before it is dropped.
const CLIENT_BUFFER: usize = 16;
/// The longest log of seconds kept: past it, every other second is dropped (a long run keeps
/// its shape).
const MAX_EVENTS: usize = 7_200;

/// A bound listener, not yet serving.
#[derive(Debug)]
pub struct DashboardListener {
    listener: std::net::TcpListener,
}

impl DashboardListener {
    pub fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(DashboardListener { listener })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The line on stderr that says where the page is — and, on an address other than
    /// loopback, who else can read it.
    pub fn announce(&self) {
        let Ok(bound) = self.local_addr() else { return };
        eprintln!("dashboard at http://{bound}/");
        if !bound.ip().is_loopback() {
            eprintln!(
                "note: the dashboard listens on {}, not on loopback: anyone who can reach this \
                 machine can read the run's figures (--dashboard alone serves 127.0.0.1 only)",
                bound.ip()
            );
        }
    }
}

/// The events so far and the final one, shared by the samplers and every browser.
#[derive(Default)]
struct Log {
    events: Vec<String>,
    /// Events dropped from the front when the log was thinned (a browser's index shifts).
    thinned: u64,
    /// A workflow's finished levels, in order.
    points: Vec<String>,
    last: Option<String>,
}

pub(super) struct State {
    title: String,
    /// Every event's `t_s` counts from here (one time axis for all of a command's runs).
    pub(super) started: Instant,
    log: Mutex<Log>,
    /// Rings each time the log grows; browsers wait on it.
    bell: watch::Sender<u64>,
}

impl State {
    pub(super) fn push(&self, event: String) {
        {
            let mut log = self.log.lock().expect("dashboard log");
            if log.events.len() >= MAX_EVENTS {
                let kept: Vec<String> = log.events.iter().step_by(2).cloned().collect();
                log.thinned += (log.events.len() - kept.len()) as u64;
                log.events = kept;
            }
            log.events.push(event);
        }
        self.bell.send_modify(|n| *n += 1);
    }

    fn push_point(&self, point: String) {
        self.log.lock().expect("dashboard log").points.push(point);
        self.bell.send_modify(|n| *n += 1);
    }

    /// The page with `data` inlined (`null`: it reads /events).
    fn page(&self, data: &str) -> String {
        PAGE.replace("/*UPLOT_CSS*/", UPLOT_CSS)
            .replace("/*UPLOT_JS*/", UPLOT_JS)
            .replace("__TITLE__", &html_escape(&self.title))
            .replace("/*DATA*/null", &data.replace("</", "<\\/"))
    }
}

/// A command's page: its log and, with `--dashboard`, its server.
pub struct Page {
    state: Arc<State>,
    server: Option<tokio::task::JoinHandle<()>>,
    url: Option<String>,
    out: Option<PathBuf>,
    linger: Duration,
}

impl std::fmt::Debug for Page {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Page").field("url", &self.url).finish()
    }
}

/// A command's page as its runs see it: they append their seconds to it (cloned into each
/// run's config by a workflow; see [`Page::shared`]).
#[derive(Clone)]
pub struct SharedPage {
    pub(super) state: Arc<State>,
}

impl std::fmt::Debug for SharedPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedPage")
            .field("title", &self.state.title)
            .finish()
    }
}

impl Page {
    /// The page titled `title`, served on `listener` when given; saved to `out` at the end,
    /// and served for `linger` after it.
    pub fn start(
        title: String,
        listener: Option<DashboardListener>,
        out: Option<PathBuf>,
        linger: Duration,
    ) -> std::io::Result<Page> {
        let state = Arc::new(State {
            title,
            started: Instant::now(),
            log: Mutex::default(),
            bell: watch::channel(0).0,
        });
        let (server, url) = match listener {
            Some(listener) => {
                let listener = tokio::net::TcpListener::from_std(listener.listener)?;
                let local = listener.local_addr()?;
                let url = format!("http://{local}/");
                let state = state.clone();
                let loopback = local.ip().is_loopback();
                let task = tokio::spawn(crate::report::serve::serve(listener, move |request| {
                    answer(&request, &state, loopback)
                }));
                (Some(task), Some(url))
            }
            None => (None, None),
        };
        Ok(Page {
            state,
            server,
            url,
            out,
            linger,
        })
    }

    /// What a run made for this page appends its seconds to.
    pub fn shared(&self) -> SharedPage {
        SharedPage {
            state: self.state.clone(),
        }
    }

    pub(super) fn state(&self) -> &Arc<State> {
        &self.state
    }

    /// A workflow's finished level, as its JSON file records it.
    pub fn point(&self, point: &Value) {
        self.state.push_point(point.to_string());
    }

    /// The command is over: sends `last` (its final figures, as its file has them) to every
    /// page, and saves the page with `--dashboard-out`; a file that cannot be written is a
    /// warning. Keep the result to serve the final page for the linger.
    pub fn finish(mut self, last: &Value, warnings: &mut Vec<String>) -> FinalDashboard {
        self.state.log.lock().expect("dashboard log").last = Some(last.to_string());
        self.state.bell.send_modify(|n| *n += 1);
        if let Some(path) = &self.out {
            if let Err(e) = save(path, &self.state) {
                warnings.push(format!(
                    "cannot write --dashboard-out {}: {e}",
                    path.display()
                ));
            }
        }
        FinalDashboard {
            server: Arc::new(Served {
                task: self.server.take(),
                url: self.url.take(),
            }),
            linger: self.linger,
        }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        if let Some(task) = &self.server {
            task.abort();
        }
    }
}

struct Served {
    task: Option<tokio::task::JoinHandle<()>>,
    url: Option<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The page after the command, serving the final figures until dropped.
#[derive(Clone)]
pub struct FinalDashboard {
    server: Arc<Served>,
    linger: Duration,
}

impl std::fmt::Debug for FinalDashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FinalDashboard")
            .field("url", &self.server.url)
            .finish()
    }
}

impl FinalDashboard {
    /// Nothing to serve: a run whose page is its workflow's (the workflow finishes it).
    pub(super) fn none() -> Self {
        FinalDashboard {
            server: Arc::new(Served {
                task: None,
                url: None,
            }),
            linger: Duration::ZERO,
        }
    }

    /// Serves the final page for `--dashboard-linger`, or until a signal (Ctrl-C skips it).
    pub async fn linger(self, stop: &StopSignal) {
        let Some(url) = &self.server.url else {
            return;
        };
        if self.linger.is_zero() {
            return;
        }
        eprintln!(
            "serving the final dashboard at {url} for {} (Ctrl-C skips)",
            humantime::format_duration(self.linger)
        );
        tokio::select! {
            () = tokio::time::sleep(self.linger) => {}
            _ = stop.next_signal() => {}
        }
    }
}

/// Writes the final page, its events inlined, to `path` (through a temporary file).
fn save(path: &Path, state: &State) -> std::io::Result<()> {
    let data = {
        let log = state.log.lock().expect("dashboard log");
        format!(
            "{{\"history\":[{}],\"points\":[{}],\"last\":{}}}",
            log.events.join(","),
            log.points.join(","),
            log.last.as_deref().unwrap_or("null")
        )
    };
    let partial = path.with_extension("html.partial");
    std::fs::write(&partial, state.page(&data))?;
    std::fs::rename(&partial, path)
}

fn html_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

type Body = Either<Full<Bytes>, Channel<Bytes, Infallible>>;

/// Whether a request to a page on a loopback address names it by a name that cannot have been
/// rebound: an IP address or `localhost`. A page in a browser tab of `evil.example`, whose
/// DNS now answers 127.0.0.1, would send `Host: evil.example:8089` and read the run's
/// figures; it gets 421. A page bound to another address is exposed by the user's choice, to
/// any name that reaches it.
fn host_allowed<B>(request: &Request<B>, loopback: bool) -> bool {
    let Some(host) = request.headers().get(hyper::header::HOST) else {
        return true;
    };
    let Ok(host) = host.to_str() else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    !loopback || name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok()
}

fn answer<B>(request: &Request<B>, state: &Arc<State>, loopback: bool) -> Response<Body> {
    let (status, content_type, body) = match (host_allowed(request, loopback), request.uri().path()) {
        (false, _) => (
            StatusCode::MISDIRECTED_REQUEST,
            "text/plain; charset=utf-8",
            Either::Left(Full::new(Bytes::from_static(
                b"loadgen serves its dashboard on a loopback address to Host: localhost or an IP address only\n",
            ))),
        ),
        (true, "/") => (
            StatusCode::OK,
            "text/html; charset=utf-8",
            Either::Left(Full::new(Bytes::from(state.page("null")))),
        ),
        (true, "/events") => {
            let (sender, body) = Channel::new(CLIENT_BUFFER);
            tokio::spawn(stream_events(state.clone(), sender));
            (StatusCode::OK, "text/event-stream", Either::Right(body))
        }
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            Either::Left(Full::new(Bytes::from_static(
                b"loadgen serves its dashboard at / and its events at /events\n",
            ))),
        ),
    };
    Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, content_type)
        .header(hyper::header::CACHE_CONTROL, "no-store")
        .body(body)
        .expect("a valid response")
}

/// Where one browser's stream is in the log.
#[derive(Default)]
struct Cursor {
    next: u64,
    points: usize,
    last_sent: bool,
}

impl Cursor {
    /// The frames of what the log gained since the cursor, which moves past them.
    fn frames(&mut self, log: &Log) -> Vec<String> {
        let mut frames = Vec::new();
        let from = self.next.saturating_sub(log.thinned) as usize;
        frames.extend((log.events.iter().skip(from)).map(|event| format!("data: {event}\n\n")));
        self.next = log.thinned + log.events.len() as u64;
        let points = log.points.iter().skip(self.points);
        frames.extend(points.map(|point| format!("event: point\ndata: {point}\n\n")));
        self.points = log.points.len();
        if let (Some(last), false) = (&log.last, self.last_sent) {
            frames.push(format!("event: final\ndata: {last}\n\n"));
            self.last_sent = true;
        }
        frames
    }
}

/// One browser's stream: the seconds so far, then each event as it comes, then the last one.
/// A browser whose buffer is full (it stopped reading) is dropped.
async fn stream_events(state: Arc<State>, mut sender: Sender<Bytes, Infallible>) {
    let mut bell = state.bell.subscribe();
    // The catch-up (the seconds as one `history` event, the points so far) is one frame.
    let (catch_up, mut cursor) = {
        let log = state.log.lock().expect("dashboard log");
        let mut cursor = Cursor {
            next: log.thinned + log.events.len() as u64,
            ..Cursor::default()
        };
        let history = format!("event: history\ndata: [{}]\n\n", log.events.join(","));
        (history + &cursor.frames(&log).concat(), cursor)
    };
    if sender.send_data(Bytes::from(catch_up)).await.is_err() {
        return;
    }
    loop {
        let frames = cursor.frames(&state.log.lock().expect("dashboard log"));
        for frame in frames {
            if sender.try_send(Frame::data(Bytes::from(frame))).is_err() {
                return;
            }
        }
        if bell.changed().await.is_err() {
            return;
        }
    }
}
