//! The open model: requests are *scheduled* at a constant or ramping arrival rate, independent
//! of responses, so a stalled server cannot slow the client down and hide the stall
//! (coordinated omission).
//!
//! A dispatcher walks the schedule ([`Schedule`]) and, at each intended time, hands the send
//! to an idle worker; if none is idle it starts a new worker, up to `max_in_flight`; at that
//! cap the send is *dropped* and counted. Every row carries `intended_ns`; a send that starts
//! more than `max_lateness` after it is counted as *late*. Workers run the same loop as every
//! other model — only the pacing differs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::{DriveContext, Driving, Limit, Model, ModelPlan, Plan};
use crate::record::phase::{MAIN, WARMUP};
use crate::shard::Shard;
use crate::stop::StopSignal;
use crate::worker::WorkerPool;
use crate::worker::{Work, WorkSource};

/// The highest arrival rate one process is asked to schedule (requests/s): a single
/// dispatcher hands out every send, and above this it would fall behind its own schedule
/// (the pacer then ends the schedule at its duration anyway, see `pace`).
pub const MAX_RATE_RPS: f64 = 1_000_000.0;

/// How arrivals are spaced: the one enum of the scenario (`model.arrivals`), the command line
/// (`--arrivals`) and capacity.json (`arrivals`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arrivals {
    /// Evenly spaced at the current rate (the default).
    #[default]
    Uniform,
    /// A Poisson process at the current rate (exponential gaps).
    Poisson,
}

impl Arrivals {
    /// The name a scenario, the command line and capacity.json use.
    pub fn name(self) -> &'static str {
        match self {
            Arrivals::Uniform => "uniform",
            Arrivals::Poisson => "poisson",
        }
    }
}

/// A stretch of the schedule: the rate goes linearly from `from_rps` to `to_rps`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stage {
    pub duration: Duration,
    pub from_rps: f64,
    pub to_rps: f64,
}

/// Parameters of an open-model run.
#[derive(Debug, Clone)]
pub struct OpenPlan {
    pub stages: Vec<Stage>,
    pub arrivals: Arrivals,
    pub max_in_flight: u32,
    pub max_lateness: Duration,
    pub sequence: Arc<[u16]>,
    /// Fraction of the first gap by which this schedule runs early (0 ≤ offset < 1): a shard
    /// `i/N` uses `i/N`, so the union of N shards' sends is evenly spaced.
    pub offset: f64,
    /// Each arrival is one iteration — the whole sequence on one worker, each later step sent
    /// when the one before it ends, which is that step's intended time — instead of one
    /// request. Set for a scenario's sequence of several requests (it must be when the
    /// scenario extracts values, which only one worker's session holds); never for a targets
    /// file, whose `--rate` is in requests per second.
    pub chained: bool,
    /// The first stretch of the schedule, whose sends carry the phase `warmup` (the rest
    /// `main`); zero: one phase, `main`.
    pub warmup: Duration,
    /// The pacer wakes at most once per this: sends due in between wait for the next wake-up
    /// (up to this late) and go out together. Zero: every send at its own time.
    pub send_window: Duration,
}

impl OpenPlan {
    /// Sends the schedule plans, rounded down.
    pub fn scheduled(&self) -> u64 {
        (self
            .stages
            .iter()
            .map(|s| (s.from_rps + s.to_rps) / 2.0 * s.duration.as_secs_f64())
            .sum::<f64>()
            + self.offset)
            .floor() as u64
    }

    pub fn duration(&self) -> Duration {
        self.stages.iter().map(|s| s.duration).sum()
    }

    /// The stages in words: `20 req/s for 2s`, `0→100 iterations/s over 30s, then …` (an
    /// arrival is an iteration when the plan is chained).
    pub fn describe_schedule(&self) -> String {
        let unit = if self.chained {
            "iterations/s"
        } else {
            "req/s"
        };
        let stages: Vec<String> = self
            .stages
            .iter()
            .map(|s| {
                let duration = humantime::format_duration(s.duration);
                if s.from_rps == s.to_rps {
                    format!("{} {unit} for {duration}", s.to_rps)
                } else {
                    format!("{}→{} {unit} over {duration}", s.from_rps, s.to_rps)
                }
            })
            .collect();
        stages.join(", then ")
    }
}

impl Plan for OpenPlan {
    fn kind(&self) -> &'static str {
        "open"
    }

    fn phase_labels(&self) -> Vec<String> {
        let main = MAIN.to_string();
        if self.warmup.is_zero() {
            vec![main]
        } else {
            vec![WARMUP.to_string(), main]
        }
    }

    fn warmup_phase(&self) -> Option<u16> {
        (!self.warmup.is_zero()).then_some(0)
    }

    fn extent(&self) -> Limit {
        Limit::Duration(self.duration())
    }

    fn max_workers(&self) -> u32 {
        self.max_in_flight
    }

    fn describe(&self) -> String {
        let unit = if self.chained {
            format!(
                " iterations of {}",
                crate::units::count(self.sequence.len() as u64, "request")
            )
        } else {
            String::new()
        };
        let warmup = if self.warmup.is_zero() {
            String::new()
        } else {
            format!(
                " (the first {} is warmup)",
                humantime::format_duration(self.warmup)
            )
        };
        let window = if self.send_window.is_zero() {
            String::new()
        } else {
            format!(
                ", sent in {} windows",
                humantime::format_duration(self.send_window)
            )
        };
        // A Poisson process's count is random: the plan knows only its expectation (the
        // summary says how many were scheduled).
        let count = match self.arrivals {
            Arrivals::Uniform => format!("{}{unit} scheduled", self.scheduled()),
            Arrivals::Poisson => format!("~{}{unit} expected", self.scheduled()),
        };
        format!(
            "open model: {}{warmup}, {} arrivals{window}, {count}, at most {} in flight",
            self.describe_schedule(),
            self.arrivals.name(),
            self.max_in_flight
        )
    }

    fn sequence(&self) -> &Arc<[u16]> {
        &self.sequence
    }

    fn max_lateness(&self) -> Option<Duration> {
        Some(self.max_lateness)
    }

    fn slice(&self, shard: &Shard) -> Result<ModelPlan, String> {
        let mut plan = self.clone();
        let n = f64::from(shard.count);
        for stage in &mut plan.stages {
            stage.from_rps /= n;
            stage.to_rps /= n;
        }
        plan.max_in_flight = shard.share_u32(plan.max_in_flight).max(1);
        plan.offset = f64::from(shard.index) / n;
        shard.need("scheduled requests", plan.scheduled())?;
        Ok(ModelPlan::Open(plan))
    }

    fn drive<'a>(&self, pool: &'a mut WorkerPool, context: DriveContext) -> Driving<'a> {
        let model = Open {
            plan: self.clone(),
            stop: context.stop,
            seed: fastrand::u64(..),
        };
        Box::pin(model.drive(pool))
    }
}

/// Intended send times, as offsets from the start: the k-th send is due when the integral of
/// the rate reaches k (uniform), or reaches a Poisson process's k-th unit-rate arrival.
#[derive(Debug, Clone)]
pub struct Schedule {
    stages: Vec<Stage>,
    arrivals: Arrivals,
    rng: fastrand::Rng,
    /// Sends due so far, in "rate integral" units.
    count: f64,
    stage: usize,
    /// Start offset of the current stage, and the sends due before it.
    stage_start_s: f64,
    stage_base_count: f64,
}

impl Schedule {
    /// `offset`: see [`OpenPlan::offset`].
    pub fn new(stages: Vec<Stage>, arrivals: Arrivals, seed: u64, offset: f64) -> Self {
        Schedule {
            stages,
            arrivals,
            rng: fastrand::Rng::with_seed(seed),
            count: -offset,
            stage: 0,
            stage_start_s: 0.0,
            stage_base_count: 0.0,
        }
    }
}

impl Iterator for Schedule {
    type Item = Duration;

    /// The next intended send time, or `None` when the schedule is over.
    fn next(&mut self) -> Option<Duration> {
        self.count += match self.arrivals {
            Arrivals::Uniform => 1.0,
            Arrivals::Poisson => -(1.0 - self.rng.f64()).ln(),
        };
        loop {
            let stage = *self.stages.get(self.stage)?;
            let length_s = stage.duration.as_secs_f64();
            let slope = (stage.to_rps - stage.from_rps) / length_s.max(f64::MIN_POSITIVE);
            let in_stage = stage.from_rps * length_s + slope * length_s * length_s / 2.0;
            let wanted = self.count - self.stage_base_count;
            if wanted <= in_stage {
                // Solve from·t + slope·t²/2 = wanted for t within the stage.
                let t = if slope.abs() < 1e-12 {
                    wanted / stage.from_rps
                } else {
                    (-stage.from_rps
                        + (stage.from_rps * stage.from_rps + 2.0 * slope * wanted)
                            .max(0.0)
                            .sqrt())
                        / slope
                };
                return Some(Duration::from_secs_f64(
                    self.stage_start_s + t.clamp(0.0, length_s),
                ));
            }
            self.stage += 1;
            self.stage_start_s += length_s;
            self.stage_base_count += in_stage;
        }
    }
}

/// The model, ready to drive.
pub struct Open {
    pub plan: OpenPlan,
    pub stop: StopSignal,
    pub seed: u64,
}

impl Model for Open {
    async fn drive(self, pool: &mut WorkerPool) {
        let plan = &self.plan;
        let mut dispatcher = Dispatcher::new(plan);
        // Idle workers waiting before the first send, so the schedule does not start with a
        // burst of new connections: about 2 ms worth of sends at the peak rate.
        let peak_rps = plan
            .stages
            .iter()
            .map(|s| s.from_rps.max(s.to_rps))
            .fold(0.0, f64::max);
        let warm = ((peak_rps * 0.002).ceil() as u32 + 4).min(plan.max_in_flight);
        for _ in 0..warm {
            dispatcher.start_worker(pool, None);
        }
        // The schedule starts once the standby workers are connected (each reports itself
        // idle when it is), or after a second if some cannot connect: their first request
        // will say why.
        let ready = dispatcher.wait_idle(warm as usize, Duration::from_secs(1));
        tokio::select! {
            _ = ready => {}
            _ = self.stop.draining() => {}
        }
        let start = std::time::Instant::now();
        dispatcher.warmup_end = (!plan.warmup.is_zero()).then(|| start + plan.warmup);
        let ticks = pace(
            Schedule::new(plan.stages.clone(), plan.arrivals, self.seed, plan.offset),
            start,
            plan.duration(),
            plan.send_window,
            &self.stop,
        );
        loop {
            let batch = tokio::select! {
                batch = ticks.recv_async() => match batch {
                    Ok(batch) => batch,
                    Err(_) => break,
                },
                _ = self.stop.draining() => break,
            };
            for due in batch {
                dispatcher.dispatch(pool, due);
            }
            // Reap finished workers (none finish before the schedule ends, but keep the set tidy).
            while pool.try_done().is_some() {}
        }
        // Closing the inboxes ends idle workers now and busy ones after their request.
        drop(dispatcher);
        while pool.next_done().await.is_some() {}
    }
}

/// Hands each due send to one idle worker — the most recently idle, so the fewest
/// connections stay warm — or to a new worker, up to `max_in_flight`; beyond, drops it.
///
/// Each worker has its own one-slot inbox and reports itself idle on a shared queue that the
/// dispatcher drains without waiting, so a send wakes exactly one task. (A shared
/// many-receiver channel woke and re-polled every idle worker for each send: at 20,000
/// sends/s that alone saturated a core.)
struct Dispatcher {
    sequence: Arc<[u16]>,
    chained: bool,
    max_in_flight: u32,
    /// Sends due before this carry phase 0 (`warmup`), later ones phase 1 (`main`).
    warmup_end: Option<std::time::Instant>,
    position: usize,
    inboxes: Vec<tokio::sync::mpsc::Sender<Work>>,
    idle: Vec<usize>,
    idle_tx: tokio::sync::mpsc::UnboundedSender<usize>,
    idle_rx: tokio::sync::mpsc::UnboundedReceiver<usize>,
}

impl Dispatcher {
    fn new(plan: &OpenPlan) -> Self {
        let (idle_tx, idle_rx) = tokio::sync::mpsc::unbounded_channel();
        Dispatcher {
            sequence: plan.sequence.clone(),
            chained: plan.chained,
            max_in_flight: plan.max_in_flight,
            warmup_end: None,
            position: 0,
            inboxes: Vec::new(),
            idle: Vec::new(),
            idle_tx,
            idle_rx,
        }
    }

    fn start_worker(&mut self, pool: &mut WorkerPool, first: Option<Work>) {
        let (inbox_tx, inbox) = tokio::sync::mpsc::channel(1);
        let id = self.inboxes.len();
        self.inboxes.push(inbox_tx);
        pool.spawn(
            0,
            OpenWorker {
                first,
                id,
                inbox,
                idle: self.idle_tx.clone(),
                chain: self.chained.then(|| self.sequence.clone()),
                step: 0,
                next_step: None,
            },
        );
    }

    /// Waits until `count` workers have reported idle, or `limit` has passed.
    async fn wait_idle(&mut self, count: usize, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.idle.len() < count {
            match tokio::time::timeout_at(deadline, self.idle_rx.recv()).await {
                Ok(Some(id)) => self.idle.push(id),
                Ok(None) | Err(_) => return,
            }
        }
    }

    /// The send due at `due`: to an idle worker, a new one, or dropped at the cap.
    fn dispatch(&mut self, pool: &mut WorkerPool, due: std::time::Instant) {
        let live = pool.live().clone();
        live.scheduled.fetch_add(1, Ordering::Relaxed);
        // Chained: every arrival starts the sequence; its worker sends the rest.
        let op = self.sequence[if self.chained {
            0
        } else {
            self.position % self.sequence.len()
        }];
        self.position += 1;
        let phase = self.warmup_end.map_or(0, |end| u16::from(due >= end));
        let mut work = Work::new(op, phase);
        work.intended = Some(due);
        while let Ok(id) = self.idle_rx.try_recv() {
            self.idle.push(id);
        }
        if let Some(id) = self.idle.pop() {
            // An idle worker's inbox is empty and it is waiting on it.
            if let Err(e) = self.inboxes[id].try_send(work) {
                // It ended (the run is stopping): the send is not made.
                drop(e);
                live.dropped.fetch_add(1, Ordering::Relaxed);
            }
        } else if (self.inboxes.len() as u32) < self.max_in_flight {
            self.start_worker(pool, Some(work));
        } else {
            live.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// How long past its duration a schedule that fell behind may still hand out sends.
const PACE_GRACE: Duration = Duration::from_millis(500);
/// Most sends in one message from the pacer to the dispatcher.
const MAX_BATCH: usize = 4096;

/// Walks the schedule on its own OS thread and emits each intended send time when it is due.
///
/// tokio's timer fires on millisecond ticks, so every send paced by it would start up to a
/// millisecond late; an OS thread sleeping to the deadline is accurate to tens of
/// microseconds. The dispatcher reacts to each tick at once. The thread stops when the run
/// drains or the dispatcher is gone.
///
/// The schedule is walked lazily and capped by time: if the dispatcher cannot keep up, the
/// pacer stops once the schedule's `duration` (plus [`PACE_GRACE`]) has passed on the clock,
/// says how many sends it handed out, and leaves the rest unscheduled, so `-d` always ends
/// the run.
fn pace(
    schedule: Schedule,
    start: std::time::Instant,
    duration: Duration,
    window: Duration,
    stop: &StopSignal,
) -> flume::Receiver<Vec<std::time::Instant>> {
    let (tx, rx) = flume::bounded(1024);
    let stop = stop.clone();
    let end = start + duration + PACE_GRACE;
    let spawned = std::thread::Builder::new()
        .name("loadgen-pacer".into())
        .spawn(move || {
            let mut schedule = schedule.map(|offset| start + offset).peekable();
            let mut handed_out = 0u64;
            // Wake-ups are at least `window` apart: sends due in between wait for the next.
            let mut earliest = start;
            while let Some(&due) = schedule.peek() {
                let wake = due.max(earliest);
                let now = std::time::Instant::now();
                if wake > now {
                    std::thread::sleep(wake - now);
                }
                // Everything due by now goes in one message (up to a bound, so the clock is
                // read again): at high rates one wake-up of the dispatcher serves several
                // sends, each still stamped with its own time.
                let now = std::time::Instant::now();
                earliest = now + window;
                if now > end {
                    eprintln!(
                        "warning: the open model fell behind its schedule and stopped at its \
                         duration: {handed_out} sends were scheduled (about {:.0}/s); lower --rate",
                        handed_out as f64 / duration.as_secs_f64().max(1e-9)
                    );
                    return;
                }
                let mut batch = Vec::new();
                while batch.len() < MAX_BATCH {
                    match schedule.next_if(|&due| due <= now) {
                        Some(due) => batch.push(due),
                        None => break,
                    }
                }
                handed_out += batch.len() as u64;
                if stop.is_draining() || tx.send(batch).is_err() {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        // Without a pacer nothing is scheduled; say why rather than run empty silently.
        eprintln!("warning: cannot start the open model's pacer thread: {e}");
    }
    rx
}

/// A worker of the open model: sends what the dispatcher hands it, when it is handed — and,
/// when chained, the rest of that arrival's iteration.
struct OpenWorker {
    first: Option<Work>,
    id: usize,
    inbox: tokio::sync::mpsc::Receiver<Work>,
    idle: tokio::sync::mpsc::UnboundedSender<usize>,
    /// The sequence, when each arrival is a whole iteration.
    chain: Option<Arc<[u16]>>,
    /// Position in the iteration of the request in flight.
    step: usize,
    /// The iteration's next request, due now that the previous one ended.
    next_step: Option<Work>,
}

impl WorkSource for OpenWorker {
    fn connect_first(&self) -> bool {
        // Standby workers connect before the schedule starts; those started for a send
        // connect as part of it (its row shows connect_ns).
        self.first.is_none()
    }

    async fn next(&mut self) -> Option<Work> {
        if let Some(work) = self.next_step.take() {
            self.step += 1;
            return Some(work);
        }
        self.step = 0;
        if let Some(work) = self.first.take() {
            return Some(work);
        }
        // Free again: say so, then wait for the next send (or for the dispatcher to close).
        self.idle.send(self.id).ok()?;
        self.inbox.recv().await
    }

    fn finished(&mut self, work: &Work, _failed: bool) {
        // The next step of a chain is intended for the moment the previous one ended, so
        // its latency, like the first step's, counts from when it was due.
        if let Some(op) = self.chain.as_ref().and_then(|c| c.get(self.step + 1)) {
            let mut next = Work::new(*op, work.phase);
            next.intended = Some(std::time::Instant::now());
            self.next_step = Some(next);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every worker holds its task's state for as long as it runs (issue 46).
    #[test]
    fn worker_task_stays_small() {
        crate::worker::assert_task_small::<OpenWorker>();
    }

    fn stage(seconds: f64, from_rps: f64, to_rps: f64) -> Stage {
        Stage {
            duration: Duration::from_secs_f64(seconds),
            from_rps,
            to_rps,
        }
    }

    #[test]
    fn uniform_constant_rate_is_evenly_spaced() {
        let times: Vec<Duration> =
            Schedule::new(vec![stage(2.0, 200.0, 200.0)], Arrivals::Uniform, 1, 0.0).collect();
        assert_eq!(times.len(), 400);
        for pair in times.windows(2) {
            let gap = (pair[1] - pair[0]).as_secs_f64();
            assert!((gap - 0.005).abs() < 1e-9, "{gap}");
        }
    }

    #[test]
    fn ramps_follow_the_stages() {
        // 0 → 100/s over 2 s (100 sends), then 100 → 300/s over 1 s (200 sends).
        let times: Vec<f64> = Schedule::new(
            vec![stage(2.0, 0.0, 100.0), stage(1.0, 100.0, 300.0)],
            Arrivals::Uniform,
            1,
            0.0,
        )
        .map(|d| d.as_secs_f64())
        .collect();
        assert_eq!(times.len(), 300);
        let in_second = |s: f64| times.iter().filter(|t| **t >= s && **t < s + 1.0).count();
        // Expected per second: 25, 75, 200 (the integral of the rate over each second).
        assert!((in_second(0.0) as i64 - 25).abs() <= 1);
        assert!((in_second(1.0) as i64 - 75).abs() <= 1);
        assert!((in_second(2.0) as i64 - 200).abs() <= 1);
    }

    #[test]
    fn shards_together_send_one_evenly_spaced_schedule() {
        let whole: Vec<Duration> =
            Schedule::new(vec![stage(1.0, 300.0, 300.0)], Arrivals::Uniform, 1, 0.0).collect();
        let mut union: Vec<Duration> = (0..3)
            .flat_map(|i| {
                Schedule::new(
                    vec![stage(1.0, 100.0, 100.0)],
                    Arrivals::Uniform,
                    1,
                    f64::from(i) / 3.0,
                )
            })
            .collect();
        union.sort();
        assert_eq!(union.len(), whole.len());
        for (a, b) in union.iter().zip(&whole) {
            assert!(a.abs_diff(*b) < Duration::from_nanos(10), "{a:?} vs {b:?}");
        }
    }

    #[test]
    fn poisson_has_the_right_mean_and_spread() {
        let times: Vec<f64> =
            Schedule::new(vec![stage(100.0, 100.0, 100.0)], Arrivals::Poisson, 7, 0.0)
                .map(|d| d.as_secs_f64())
                .collect();
        let n = times.len() as f64;
        assert!((n - 10_000.0).abs() < 400.0, "{n}");
        let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        // Exponential gaps: standard deviation equals the mean.
        assert!(
            (var.sqrt() / mean - 1.0).abs() < 0.05,
            "cv {}",
            var.sqrt() / mean
        );
    }
}
