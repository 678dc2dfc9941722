//! The one request loop every model shares: wait for work, send, time, record.
//!
//! A worker is a tokio task owning one [`Transport`]. It asks its [`WorkSource`] for the next
//! request, sends it, turns the outcome into a [`RequestRecord`], and appends that to its
//! runtime thread's batch (`batches`), which goes to the writer thread when it is full or a
//! second old. It never waits for another worker, never aggregates across workers and never
//! touches a file (docs/architecture.md, "Hot path rules"). It keeps its own [`WorkerClock`]
//! — busy, waiting, its own work — with plain stores that the sampler reads, so how much of the
//! run the workers really spent in requests is measured where it happens. A worker that has to
//! wait for its next request lets its transport give back what only a request in flight needs
//! ([`Transport::idle`]): an idle worker costs its socket and a few hundred bytes.

mod batches;

use std::future::Future;
use std::num::NonZeroU128;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::clock::{nanos, Anchor};
use crate::record::trace::{TraceParent, TRACEPARENT};
use crate::record::{ErrorClass, RequestRecord};
use crate::stats::activity::{State, WorkerClock};
use crate::stats::live::LiveMetrics;
use crate::stats::LiveCounters;
use crate::stop::{ExitReason, StopSignal};
use crate::store::writer::RecordSender;
use crate::workload::check::{Captured, Session};
use crate::workload::fields::Value;
use batches::{Batches, LastSlot};
use tokio::task::JoinSet;

use crate::transport::http2::SharedConnection;
use crate::transport::{Client, ConnectPacer, Exchange, Transport, TransportConfig};
use crate::workload::{Prepared, RequestTemplate, Workload};

/// One request a worker should send next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Work {
    /// Index into the run's request templates (and the `op` dictionary).
    pub op: u16,
    /// Index into the run's phase labels.
    pub phase: u16,
    /// When the schedule wanted this request sent (open model); `None` for closed models.
    pub intended: Option<Instant>,
    /// How long the worker waited on an empty buffer for this item (producer-buffer model).
    pub queue_wait_ns: Option<i64>,
    /// How long this item waited between being produced and being taken by a worker: for
    /// room in a full buffer, then in it (producer-buffer model).
    pub buffer_wait_ns: Option<i64>,
    /// When the producer made this item (producer-buffer model; not recorded as such).
    pub produced: Option<Instant>,
    /// 1 for the first try, 2.. for retries.
    pub attempt: u8,
    /// Field values decided by the model (producer-buffer payloads, retries); `None` lets
    /// the worker draw fresh ones from its phase's fields.
    pub values: Option<Arc<[Value]>>,
}

impl Work {
    /// The first attempt of `op` in `phase`, with values drawn by the worker.
    pub fn new(op: u16, phase: u16) -> Self {
        Work {
            op,
            phase,
            intended: None,
            queue_wait_ns: None,
            buffer_wait_ns: None,
            produced: None,
            attempt: 1,
            values: None,
        }
    }
}

/// Where a worker's next request comes from; `None` means the worker is done.
pub trait WorkSource: Send {
    fn next(&mut self) -> impl Future<Output = Option<Work>> + Send;

    /// Told after each request whether it failed, so a model can retry it.
    fn finished(&mut self, _work: &Work, _failed: bool) {}

    /// True when the worker should open its connection before asking for work, so that
    /// connecting is not part of its first request (the open model's standby workers).
    fn connect_first(&self) -> bool {
        false
    }
}

/// What every worker shares.
#[derive(Debug)]
pub struct WorkerContext {
    pub anchor: Anchor,
    pub workload: Workload,
    pub live: Arc<LiveCounters>,
    /// Per-op live metrics, when the run serves them (`--metrics-addr`).
    pub metrics: Option<Arc<LiveMetrics>>,
    pub stop: StopSignal,
    /// `--trace`: the share of `traceparent` headers sampled; `None` sends none.
    pub trace_sample: Option<f64>,
    /// Oldest finished rows may get before they go to the writer when a judge watches the run
    /// (`--abort-on-fail`): the judge's period, so a slow response never hides the rows
    /// before it from the judge. `None`: a second.
    pub watched_rows_max_age: Option<Duration>,
}

/// When the model moved this worker's work to another phase (a warm-up's end, a ramp's next
/// stage), its time from `at` on is that phase's: a new clock for it.
fn move_to_phase(clock: &mut Arc<WorkerClock>, ctx: &WorkerContext, phase: u16, at: Instant) {
    if phase != clock.phase() {
        *clock = (ctx.live.activity).moved(clock, phase, ctx.anchor.offset_ns(at));
    }
}

/// Waits for the worker's turn under `--connect-rate`, then opens its connection when its
/// source wants it open before the first request; false when the run stops first (`-d`
/// over, a signal): a turn or a connect still pending then would hold the run past its end.
async fn open_first<T: Transport>(
    stop: &StopSignal,
    pace: Option<Arc<ConnectPacer>>,
    transport: &mut T,
    connect: bool,
) -> bool {
    let opening = async {
        if let Some(pacer) = pace {
            pacer.turn().await;
        }
        if connect {
            // A failure here is not a request; the first request will try again and say why.
            transport.connect().await;
        }
    };
    tokio::select! {
        biased;
        () = stop.draining() => false,
        () = opening => true,
    }
}

/// Runs one worker until its source is exhausted or the run stops.
///
/// Per request: take the next work, render it, send it (counted in flight, cut off when the
/// run aborts), judge the outcome, count it live, and add its row to the thread's batch.
///
/// It is the worker's whole task (the pool spawns this future as it is, with nothing around
/// it), so that its arguments are held once: every byte of this future is held by every
/// worker for as long as it runs (`worker_task_stays_small`).
pub(crate) async fn run_worker<T: Transport, S: WorkSource>(
    id: WorkerDone,
    mut transport: T,
    mut source: S,
    ctx: Arc<WorkerContext>,
    batches: Arc<Batches>,
    mut clock: Arc<WorkerClock>,
    pace: Option<Arc<ConnectPacer>>,
) -> WorkerDone {
    let worker = id.worker;
    // `--connect-rate`: a worker that opens a connection starts at its turn, before any row.
    // The once-per-worker steps are boxed so their state does not stay in every worker's
    // task for as long as it runs (`worker_task_stays_small`).
    let connect_first = source.connect_first();
    if !Box::pin(open_first(&ctx.stop, pace, &mut transport, connect_first)).await {
        // The run stopped before this worker's turn came or its connection opened: it never
        // sent, so it has nothing to record.
        clock.end(ctx.anchor.offset_ns(Instant::now()));
        ctx.live.workers_alive.fetch_sub(1, Ordering::Relaxed);
        return id;
    }
    let mut last_slot = LastSlot::default();
    let mut rng = fastrand::Rng::new();
    // Values extracted from responses, and the last response as far as checks read it.
    let mut session = Session::default();
    let mut captured = Captured::default();
    // One registration for the whole worker, not one per request.
    let aborting = ctx.stop.aborting();
    tokio::pin!(aborting);
    loop {
        let Some(work) = next_work(&mut source, &mut transport, (&ctx, &*clock)).await else {
            break;
        };
        let template = &ctx.workload.templates[usize::from(work.op)];
        // Rendering happens before the clock starts: it is the client's work, not latency.
        let Some(mut prepared) = prepare(template, &work, &ctx, &mut rng, &session) else {
            // A value this request uses was not extracted: it is not sent, and it is counted.
            ctx.live.skip(work.op);
            source.finished(&work, false);
            continue;
        };
        template.rules.forget_extracted(&mut session);
        let trace_id = ctx
            .trace_sample
            .and_then(|sample| trace(template, sample, &mut rng, &mut prepared));
        let started = Instant::now();
        move_to_phase(&mut clock, &ctx, work.phase, started);
        clock.send(
            ctx.anchor.offset_ns(started),
            work.intended
                .map(|t| nanos(started.saturating_duration_since(t))),
        );
        ctx.live.in_flight.fetch_add(1, Ordering::Relaxed);
        let exchange = tokio::select! {
            biased;
            exchange = transport.send(template, prepared, started, &mut captured) => exchange,
            () = &mut aborting => Exchange {
                error: Some(ErrorClass::Cancelled),
                ..Exchange::default()
            },
        };
        let ended = Instant::now();
        clock.enter(State::Own, ctx.anchor.offset_ns(ended));
        ctx.live.in_flight.fetch_sub(1, Ordering::Relaxed);
        let (error, check) = judge(template, &exchange, &captured, &mut session);
        count_live(&ctx, &work, error, exchange.status, started, ended);
        source.finished(&work, error.is_some());
        let mut record = row(
            worker,
            &ctx,
            &work,
            &exchange,
            (error, check),
            started,
            ended,
        );
        record.trace_id = trace_id;
        if batches.push(record, ended, &mut last_slot).is_err() {
            // Results that cannot be kept are not results: stop the whole run.
            ctx.stop.drain(ExitReason::WriterFailed);
            break;
        }
        if error == Some(ErrorClass::Cancelled) {
            break;
        }
    }
    clock.end(ctx.anchor.offset_ns(Instant::now()));
    ctx.live.workers_alive.fetch_sub(1, Ordering::Relaxed);
    id
}

/// The next work item; `None` when the source is done.
///
/// Work that is ready is taken at once. A worker that has to wait for work (open model, think
/// time, a producer) first lets its transport give back its request buffers, and the wait is
/// on its clock as the model's pacing.
#[inline]
async fn next_work<S: WorkSource, T: Transport>(
    source: &mut S,
    transport: &mut T,
    (ctx, clock): (&WorkerContext, &WorkerClock),
) -> Option<Work> {
    let next = source.next();
    tokio::pin!(next);
    if let Poll::Ready(work) = std::future::poll_fn(|cx| Poll::Ready(next.as_mut().poll(cx))).await
    {
        return work;
    }
    transport.idle();
    // The wait is the model's pacing (think time, the schedule, the producer): on the clock.
    clock.enter(State::Waiting, ctx.anchor.offset_ns(Instant::now()));
    let work = next.await;
    clock.enter(State::Own, ctx.anchor.offset_ns(Instant::now()));
    work
}

/// Counts a finished request in the live counters and, when served, the live metrics.
#[inline]
fn count_live(
    ctx: &WorkerContext,
    work: &Work,
    error: Option<ErrorClass>,
    status: u16,
    started: Instant,
    ended: Instant,
) {
    ctx.live.count(error.is_some());
    // As the summary: latency from the intended send time under the open model.
    let latency_ns = nanos(ended.saturating_duration_since(work.intended.unwrap_or(started)));
    if status != 0 {
        ctx.live.latency.record(latency_ns.max(0) as u64);
    }
    if let Some(metrics) = &ctx.metrics {
        metrics.observe(
            work.op,
            error,
            status != 0,
            latency_ns,
            work.intended
                .map(|t| nanos(started.saturating_duration_since(t))),
        );
    }
}

/// The request's row: times as offsets from the run's anchor, `(error, check)` as judged.
#[inline]
fn row(
    worker: u32,
    ctx: &WorkerContext,
    work: &Work,
    exchange: &Exchange,
    (error, check): (Option<ErrorClass>, Option<u16>),
    started: Instant,
    ended: Instant,
) -> RequestRecord {
    RequestRecord {
        start_ns: ctx.anchor.offset_ns(started),
        intended_ns: work.intended.map(|t| ctx.anchor.offset_ns(t)),
        latency_ns: nanos(ended - started),
        connect_ns: exchange.connect_ns,
        send_ns: exchange.send_ns,
        ttfb_ns: exchange.ttfb_ns,
        queue_wait_ns: work.queue_wait_ns,
        buffer_wait_ns: work.buffer_wait_ns,
        op: work.op,
        status: exchange.status,
        error,
        bytes_sent: exchange.bytes_sent,
        bytes_received: exchange.bytes_received,
        worker,
        phase: work.phase,
        attempt: work.attempt,
        check,
        trace_id: None,
        grpc_status: exchange.grpc_status,
        grpc_message: exchange.grpc_message,
        retry_after_s: exchange.retry_after_s,
    }
}

/// `--trace`: the trace id the request carries — the template's own `traceparent` kept as
/// it is, or a new one drawn and handed to the transport to send.
#[inline]
fn trace(
    template: &RequestTemplate,
    sample: f64,
    rng: &mut fastrand::Rng,
    prepared: &mut Prepared,
) -> Option<NonZeroU128> {
    if let Some(own) = template.headers.get(TRACEPARENT) {
        return TraceParent::trace_id_of(own.as_bytes()).and_then(NonZeroU128::new);
    }
    let context = TraceParent::draw(rng, sample);
    prepared.trace = Some(context);
    NonZeroU128::new(context.trace_id)
}

/// The request `work` asks for, rendered; `None` when it uses an extracted value the session
/// does not hold (the extraction failed).
fn prepare(
    template: &RequestTemplate,
    work: &Work,
    ctx: &WorkerContext,
    rng: &mut fastrand::Rng,
    session: &Session,
) -> Option<Prepared> {
    if !template.needs_values() {
        return Some(template.render(&[]));
    }
    let draw =
        |rng: &mut fastrand::Rng| ctx.workload.phase_fields[usize::from(work.phase)].draw(rng);
    if template.session_fields.is_empty() {
        return Some(match &work.values {
            Some(values) => template.render(values),
            None => template.render(&draw(rng)),
        });
    }
    // Values from the model (a walk, a producer's payload) or drawn, with the session's
    // extracted values in their places.
    let values = match &work.values {
        Some(values) => values.to_vec(),
        None => draw(rng),
    };
    Some(template.render(&template.fill_session(values, session)?))
}

/// The row's error class and failed check: the transport's failure, an unexpected status, or
/// — for a response with an expected status — the first of the op's checks and extractions
/// that fails (extracted values go into `session`).
fn judge(
    template: &RequestTemplate,
    exchange: &Exchange,
    captured: &Captured,
    session: &mut Session,
) -> (Option<ErrorClass>, Option<u16>) {
    if let Some(error) = exchange.error {
        return (Some(error), None);
    }
    if !template.expect.contains(exchange.status) {
        return (Some(ErrorClass::HttpStatus), None);
    }
    match template.rules.apply(captured, session) {
        Ok(()) => (None, None),
        Err(check) => (Some(ErrorClass::Check), Some(check)),
    }
}

/// Most bytes a worker's task (the future [`run_worker`] returns) may hold, whatever its
/// model and transport: every worker holds it for as long as it runs, so 100,000 workers hold
/// it 100,000 times (issue 46). Measured in a debug build: 2,928 bytes over HTTP/1.1 and 3,360
/// over HTTP/2 with the closed model's source (4,960 and 4,416 before the connect, redirect
/// and once-per-worker paths were boxed); a release build's are smaller.
#[cfg(test)]
pub(crate) const TASK_BYTES_MAX: usize = 3_584;

/// Bytes of a worker task's state (the future [`run_worker`] returns) for transport `T` and
/// source `S`: what every worker holds for as long as it runs, whatever it is waiting for.
#[cfg(test)]
pub(crate) fn task_bytes<T: Transport, S: WorkSource>() -> usize {
    fn size_of_output<T, S, F>(
        _: impl FnOnce(
            WorkerDone,
            T,
            S,
            Arc<WorkerContext>,
            Arc<Batches>,
            Arc<WorkerClock>,
            Option<Arc<ConnectPacer>>,
        ) -> F,
    ) -> usize {
        std::mem::size_of::<F>()
    }
    size_of_output(run_worker::<T, S>)
}

/// Holds the worker task of source `S` under [`TASK_BYTES_MAX`] over both transports; each
/// model's tests call it with its own source.
#[cfg(test)]
pub(crate) fn assert_task_small<S: WorkSource>() {
    use crate::transport::{http1::Http1Connection, http2::Http2Stream, http3::Http3Stream};
    let http1 = task_bytes::<Client<Http1Connection>, S>();
    let http2 = task_bytes::<Client<Http2Stream>, S>();
    let http3 = task_bytes::<Client<Http3Stream>, S>();
    eprintln!(
        "worker task of {}: HTTP/1.1 {http1} bytes, HTTP/2 {http2} bytes, HTTP/3 {http3} bytes",
        std::any::type_name::<S>()
    );
    for (protocol, bytes) in [("HTTP/1.1", http1), ("HTTP/2", http2), ("HTTP/3", http3)] {
        assert!(
            bytes <= TASK_BYTES_MAX,
            "a {protocol} worker task of {} holds {bytes} bytes, over {TASK_BYTES_MAX}: box a \
             rarely taken path or keep a large local from living across an await",
            std::any::type_name::<S>()
        );
    }
}

/// The shared connection of the next worker of a group (consecutive workers fill one up to
/// `per_connection` before the next is made), and whether the worker is the group's first.
fn next_in_group<T: Default>(
    group: &mut Option<(Arc<T>, u32)>,
    per_connection: u32,
) -> (Arc<T>, bool) {
    let next = match group.take() {
        Some((shared, started)) if started < per_connection.max(1) => (shared, started + 1),
        _ => (Arc::new(T::default()), 1),
    };
    let (shared, first) = (next.0.clone(), next.1 == 1);
    *group = Some(next);
    (shared, first)
}

/// A worker that has finished: which one, and in which phase it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerDone {
    pub worker: u32,
    pub phase: u16,
}

/// Starts workers for a model and tells it when they finish.
///
/// Models decide *when* and *how many*; the pool gives every worker the same transport,
/// context and record channel, so no model can send or record differently from another.
pub struct WorkerPool {
    ctx: Arc<WorkerContext>,
    transport: Arc<TransportConfig>,
    batches: Arc<Batches>,
    /// Hands over batches that grew old while their thread's workers waited.
    flusher: tokio::task::JoinHandle<()>,
    running: JoinSet<WorkerDone>,
    /// Workers started by this process; the `worker` column is `shard.worker_id(local)`.
    next_id: u32,
    shard: crate::shard::Shard,
    /// HTTP/2: the connection the group of the next worker shares, and how many of the
    /// group have started.
    h2_group: Option<(Arc<SharedConnection>, u32)>,
    /// HTTP/3: the same, for QUIC connections.
    h3_group: Option<(Arc<crate::transport::http3::SharedConnection>, u32)>,
}

impl WorkerPool {
    pub fn new(
        ctx: Arc<WorkerContext>,
        transport: Arc<TransportConfig>,
        records: RecordSender,
        shard: crate::shard::Shard,
    ) -> Self {
        let max_age = ctx.watched_rows_max_age.unwrap_or(batches::BATCH_MAX_AGE);
        let batches = Batches::new(records, ctx.live.clone(), max_age);
        let flusher = tokio::spawn({
            let (batches, stop) = (batches.clone(), ctx.stop.clone());
            async move {
                if batches.flusher().await.is_err() {
                    stop.drain(ExitReason::WriterFailed);
                }
            }
        });
        WorkerPool {
            ctx,
            transport,
            batches,
            flusher,
            running: JoinSet::new(),
            next_id: 0,
            shard,
            h2_group: None,
            h3_group: None,
        }
    }

    /// Starts a worker drawing from `source`; returns its id (the `worker` column).
    pub fn spawn<S: WorkSource + 'static>(&mut self, phase: u16, source: S) -> u32 {
        let worker = self.shard.worker_id(self.next_id);
        let sources = &self.transport.sources;
        let from = (!sources.is_empty()).then(|| sources[self.next_id as usize % sources.len()]);
        self.next_id += 1;
        let config = self.transport.clone();
        let pacer = config.connect_pacer.clone();
        let per_connection = config.streams_per_connection;
        if config.http3 {
            let (shared, first) = next_in_group(&mut self.h3_group, per_connection);
            let pacer = pacer.filter(|_| first);
            let client = Client::http3(config, shared);
            self.start(worker, phase, client, source, pacer);
            return worker;
        }
        match self.h2_connection() {
            None => self.start(worker, phase, Client::http1(config, from), source, pacer),
            Some((shared, first)) => {
                let pacer = pacer.filter(|_| first);
                let client = Client::http2(config, shared);
                self.start(worker, phase, client, source, pacer)
            }
        }
        worker
    }

    /// Runs the worker loop for `worker` as a task.
    fn start<T: Transport + 'static, S: WorkSource + 'static>(
        &mut self,
        worker: u32,
        phase: u16,
        transport: T,
        source: S,
        pace: Option<Arc<ConnectPacer>>,
    ) {
        let (ctx, batches) = (self.ctx.clone(), self.batches.clone());
        ctx.live.workers_alive.fetch_add(1, Ordering::Relaxed);
        let clock = (ctx.live.activity).register(phase, ctx.anchor.offset_ns(Instant::now()));
        let id = WorkerDone { worker, phase };
        let task = run_worker(id, transport, source, ctx, batches, clock, pace);
        self.running.spawn(task);
    }

    /// HTTP/2: the connection the next worker's stream goes on (consecutive workers fill a
    /// connection up to `streams_per_connection` before the next one is opened), and whether
    /// the worker is its first; `None` over HTTP/1.1, where every worker has its own.
    fn h2_connection(&mut self) -> Option<(Arc<SharedConnection>, bool)> {
        if !self.transport.http2 {
            return None;
        }
        let per_connection = self.transport.streams_per_connection;
        Some(next_in_group(&mut self.h2_group, per_connection))
    }

    /// The live counters every worker updates.
    pub fn live(&self) -> &Arc<LiveCounters> {
        &self.ctx.live
    }

    /// Workers started so far.
    pub fn started(&self) -> u32 {
        self.next_id
    }

    /// Workers still running.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// A worker that has already finished, without waiting.
    pub fn try_done(&mut self) -> Option<WorkerDone> {
        match self.running.try_join_next()? {
            Ok(done) => Some(done),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => None,
        }
    }

    /// Waits for the next worker to finish; `None` when none is running.
    pub async fn next_done(&mut self) -> Option<WorkerDone> {
        loop {
            match self.running.join_next().await? {
                Ok(done) => return Some(done),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => continue,
            }
        }
    }

    /// Waits until every worker has finished. Once the run drains, requests in flight get
    /// `grace` to finish before they are cut off (and recorded as `cancelled`).
    pub async fn wait_all(&mut self, grace: Duration) {
        let stop = self.ctx.stop.clone();
        let mut deadline = None;
        loop {
            tokio::select! {
                done = self.next_done() => if done.is_none() { return },
                _ = stop.draining(), if deadline.is_none() => {
                    deadline = Some(tokio::time::Instant::now() + grace);
                },
                _ = crate::clock::sleep_until(deadline) => stop.abort(),
            }
        }
    }
}

impl Drop for WorkerPool {
    /// The flusher stops; the rows still in batches go to the writer when the last worker
    /// lets go of them (`Batches`' own drop).
    fn drop(&mut self) {
        self.flusher.abort();
    }
}
