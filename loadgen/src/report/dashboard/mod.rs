//! `--dashboard [ADDR]`: the run as a live page in the browser, served by loadgen itself, and
//! `--dashboard-out FILE`: the final page saved as one self-contained HTML file.
//!
//! A sampler task reads the live counters once a second (`sample.rs`) and appends the event to
//! a log; `GET /` answers the page (its script and the charting library, uPlot, inlined: it
//! works offline), `GET /events` a server-sent-event stream: the log so far as one `history`
//! event, then each new second as it comes, then a `final` event with the run's summary and
//! verdict exactly as run.json has them. Like `--metrics-addr` (hyper, its own listener,
//! bound before the run so a taken port is bad input) the page costs the workers nothing: a
//! browser only reads the log. Each browser has a bounded buffer; one that does not read its
//! events fills it and is dropped, so a slow or absent page holds no memory and no request.
//! After the run the page stays served for `--dashboard-linger`.

mod sample;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::channel::{Channel, Sender};
use http_body_util::{Either, Full};
use hyper::body::Frame;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::sync::watch;

use crate::stats::live::LiveMetrics;
use crate::stats::LiveCounters;
use crate::stop::StopSignal;

/// The page: its template, and the charting library it inlines (uPlot, MIT, vendored at a
/// pinned version under loadgen/assets with its license).
const PAGE: &str = include_str!("../../../assets/dashboard.html");
const UPLOT_JS: &str = include_str!("../../../assets/uplot-1.6.32/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../../../assets/uplot-1.6.32/uPlot.min.css");

/// How often the page gets a new event.
const EVERY: Duration = Duration::from_secs(1);
/// Events a browser may leave unread before it is dropped.
const CLIENT_BUFFER: usize = 16;
/// The longest log kept: past it, every other second is dropped (a long run keeps its shape).
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
}

/// The events so far and the final one, shared by the sampler and every browser.
#[derive(Default)]
struct Log {
    events: Vec<String>,
    /// Events dropped from the front when the log was thinned (a browser's index shifts).
    thinned: u64,
    last: Option<String>,
}

struct State {
    title: String,
    log: Mutex<Log>,
    /// Rings each time the log grows; browsers wait on it.
    bell: watch::Sender<u64>,
}

/// The running dashboard: its sampler and, with `--dashboard`, its server.
pub struct Dashboard {
    state: Arc<State>,
    sampler: tokio::task::JoinHandle<()>,
    server: Option<tokio::task::JoinHandle<()>>,
    url: Option<String>,
    out: Option<PathBuf>,
    linger: Duration,
}

impl std::fmt::Debug for Dashboard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dashboard").field("url", &self.url).finish()
    }
}

/// What the dashboard reads and where it goes.
pub struct DashboardSource {
    pub live: Arc<LiveCounters>,
    pub metrics: Arc<LiveMetrics>,
    /// The run's model has a schedule (late and dropped sends are shown).
    pub open: bool,
    /// The page's title: the model and the target.
    pub title: String,
    pub out: Option<PathBuf>,
    pub linger: Duration,
}

impl Dashboard {
    /// Starts sampling, and serving on `listener` when given.
    pub fn start(
        source: DashboardSource,
        listener: Option<DashboardListener>,
    ) -> std::io::Result<Dashboard> {
        let state = Arc::new(State {
            title: source.title,
            log: Mutex::default(),
            bell: watch::channel(0).0,
        });
        let (server, url) = match listener {
            Some(listener) => {
                let listener = tokio::net::TcpListener::from_std(listener.listener)?;
                let url = format!("http://{}/", listener.local_addr()?);
                (
                    Some(tokio::spawn(serve(listener, state.clone()))),
                    Some(url),
                )
            }
            None => (None, None),
        };
        let sampler = {
            let state = state.clone();
            let (live, metrics) = (source.live, source.metrics);
            let mut sampler = sample::Sampler::new(&live, source.open);
            tokio::spawn(async move {
                let mut every = tokio::time::interval(EVERY);
                every.tick().await;
                loop {
                    every.tick().await;
                    state.push(sampler.sample(&live, &metrics).to_string());
                }
            })
        };
        Ok(Dashboard {
            state,
            sampler,
            server,
            url,
            out: source.out,
            linger: source.linger,
        })
    }

    /// The run is over: stops sampling, sends `last` (the final figures, as run.json has
    /// them) to every page, and saves the page with `--dashboard-out`; a file that cannot be
    /// written is a warning. Keep the result to serve the final page for the linger.
    pub fn finish(mut self, last: &Value, warnings: &mut Vec<String>) -> FinalDashboard {
        self.sampler.abort();
        let last = last.to_string();
        {
            let mut log = self.state.log.lock().expect("dashboard log");
            log.last = Some(last);
        }
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

impl Drop for Dashboard {
    fn drop(&mut self) {
        self.sampler.abort();
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

/// The page after the run, serving the final figures until dropped.
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

impl State {
    fn push(&self, event: String) {
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

    /// The page with `data` inlined (`null`: it reads /events).
    fn page(&self, data: &str) -> String {
        PAGE.replace("/*UPLOT_CSS*/", UPLOT_CSS)
            .replace("/*UPLOT_JS*/", UPLOT_JS)
            .replace("__TITLE__", &html_escape(&self.title))
            .replace("/*DATA*/null", &data.replace("</", "<\\/"))
    }
}

/// Writes the final page, its events inlined, to `path` (through a temporary file).
fn save(path: &Path, state: &State) -> std::io::Result<()> {
    let data = {
        let log = state.log.lock().expect("dashboard log");
        format!(
            "{{\"history\":[{}],\"last\":{}}}",
            log.events.join(","),
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

async fn serve(listener: tokio::net::TcpListener, state: Arc<State>) {
    while let Ok((stream, _)) = listener.accept().await {
        let state = state.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(answer(&request, &state)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer<B>(request: &Request<B>, state: &Arc<State>) -> Response<Body> {
    let (status, content_type, body) = match request.uri().path() {
        "/" => (
            StatusCode::OK,
            "text/html; charset=utf-8",
            Either::Left(Full::new(Bytes::from(state.page("null")))),
        ),
        "/events" => {
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

/// One browser's stream: the log so far, then each event as it comes, then the last one. A
/// browser whose buffer is full (it stopped reading) is dropped.
async fn stream_events(state: Arc<State>, mut sender: Sender<Bytes, Infallible>) {
    let mut bell = state.bell.subscribe();
    let (history, mut next, mut last_sent) = {
        let log = state.log.lock().expect("dashboard log");
        let history = format!("event: history\ndata: [{}]\n\n", log.events.join(","));
        (history, log.thinned + log.events.len() as u64, false)
    };
    if sender.send_data(Bytes::from(history)).await.is_err() {
        return;
    }
    loop {
        let mut frames = Vec::new();
        {
            let log = state.log.lock().expect("dashboard log");
            let from = next.saturating_sub(log.thinned) as usize;
            for event in log.events.iter().skip(from) {
                frames.push(format!("data: {event}\n\n"));
            }
            next = log.thinned + log.events.len() as u64;
            if let (Some(last), false) = (&log.last, last_sent) {
                frames.push(format!("event: final\ndata: {last}\n\n"));
                last_sent = true;
            }
        }
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
