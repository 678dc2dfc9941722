//! Workers that send the request sequence in order: the closed model (wrk/oha style: `-c N`
//! workers back to back, for `-d` or `-n`), and the per-worker source thread-groups and phased
//! workers use too.
//!
//! A [`SequenceSource`] stops handing out work when the run drains (duration elapsed, Ctrl-C),
//! when its own quota is done (`iterations` × sequence, `requests_per_worker`), or when a
//! budget shared by all workers is spent — so `-n` sends exactly that many requests. An
//! optional think time makes each worker pause between its requests, as a real user would;
//! the pause is not part of any request's latency.
//!
//! [`ClosedPlan`] is the closed model's validated parameters and its [`Plan`]: workers, and
//! a duration or a request budget, and an optional warm-up: a [`PhaseClock`] labels the
//! requests sent in the run's first stretch `warmup` and the rest `main`. The same clock
//! labels a ramp's requests with their stage (`ramp.rs`); a source can also be told to
//! [`retire`](SequenceSource::retirable) at the end of its current request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{DriveContext, Driving, Limit, Model, ModelPlan, Plan};
use crate::record::phase::{MAIN, WARMUP};
use crate::shard::Shard;
use crate::stop::StopSignal;
use crate::worker::WorkerPool;
use crate::worker::{Work, WorkSource};
use crate::workload::fields::{Fields, Value};

/// Parameters of a closed-model run.
#[derive(Debug, Clone)]
pub struct ClosedPlan {
    pub workers: u32,
    pub limit: Limit,
    pub sequence: Arc<[u16]>,
    /// The run's first stretch, whose requests carry the phase `warmup` (zero: none).
    pub warmup: Duration,
}

impl Plan for ClosedPlan {
    fn kind(&self) -> &'static str {
        "closed"
    }

    fn phase_labels(&self) -> Vec<String> {
        if self.warmup.is_zero() {
            vec![MAIN.to_string()]
        } else {
            vec![WARMUP.to_string(), MAIN.to_string()]
        }
    }

    fn warmup_phase(&self) -> Option<u16> {
        (!self.warmup.is_zero()).then_some(0)
    }

    fn extent(&self) -> Limit {
        self.limit
    }

    fn time_limit(&self) -> Option<Duration> {
        match self.limit {
            Limit::Duration(d) => Some(d),
            Limit::Requests(_) => None,
        }
    }

    fn max_workers(&self) -> u32 {
        self.workers
    }

    fn describe(&self) -> String {
        let limit = match self.limit {
            Limit::Duration(d) => format!("for {}", humantime::format_duration(d)),
            Limit::Requests(n) => crate::units::count(n, "request"),
        };
        let warmup = if self.warmup.is_zero() {
            String::new()
        } else {
            format!(
                " (the first {} is warmup)",
                humantime::format_duration(self.warmup)
            )
        };
        let workers = crate::units::count(self.workers, "worker");
        format!("closed model, {workers}, {limit}{warmup}")
    }

    fn sequence(&self) -> &Arc<[u16]> {
        &self.sequence
    }

    fn slice(&self, shard: &Shard) -> Result<ModelPlan, String> {
        let mut plan = self.clone();
        plan.workers = shard.share_u32(plan.workers);
        shard.need("workers", u64::from(plan.workers))?;
        if let Limit::Requests(n) = &mut plan.limit {
            *n = shard.share(*n);
            shard.need("requests", *n)?;
        }
        Ok(ModelPlan::Closed(plan))
    }

    fn drive<'a>(&self, pool: &'a mut WorkerPool, context: DriveContext) -> Driving<'a> {
        let model = Closed {
            workers: self.workers,
            requests: match self.limit {
                Limit::Requests(n) => Some(n),
                Limit::Duration(_) => None,
            },
            sequence: self.sequence.clone(),
            think_time: context.think_time,
            stop: context.stop,
            warmup: self.warmup,
        };
        Box::pin(model.drive(pool))
    }
}

/// The closed model: `workers` workers from the start, sharing an optional `requests` budget.
#[derive(Debug, Clone)]
pub struct Closed {
    pub workers: u32,
    pub requests: Option<u64>,
    pub sequence: Arc<[u16]>,
    pub think_time: Duration,
    pub stop: StopSignal,
    /// Requests sent this long from the start carry phase 0 (`warmup`), later ones phase 1.
    pub warmup: Duration,
}

impl Model for Closed {
    async fn drive(self, pool: &mut WorkerPool) {
        let budget = self.requests.map(|n| Arc::new(AtomicU64::new(n)));
        let clock = (!self.warmup.is_zero()).then(|| PhaseClock::new(vec![self.warmup]));
        for _ in 0..self.workers {
            let mut source =
                SequenceSource::new(self.sequence.clone(), 0, None, self.think_time, &self.stop);
            if let Some(clock) = &clock {
                source = source.timed(clock.clone());
            }
            pool.spawn(0, source.with_budget(budget.clone()));
        }
    }
}

/// Phases by time since a start: a request sent after `ends[i]` (from the start) is in phase
/// `i + 1` of its source, before `ends[0]` in phase 0. The warm-up's end, a ramp's stages.
#[derive(Debug, Clone)]
pub struct PhaseClock {
    start: Instant,
    ends: Arc<[Duration]>,
}

impl PhaseClock {
    /// A clock starting now, with phases ending at `ends` (ascending offsets).
    pub fn new(ends: Vec<Duration>) -> Self {
        PhaseClock {
            start: Instant::now(),
            ends: ends.into(),
        }
    }

    /// The phase (counted from the source's first) a request sent at `now` belongs to.
    pub fn phase_at(&self, now: Instant) -> u16 {
        let elapsed = now.saturating_duration_since(self.start);
        self.ends.iter().take_while(|end| elapsed >= **end).count() as u16
    }
}

/// Takes one iteration of `len` requests from a shared budget of requests, while any is left:
/// the last iteration may overrun it, so a budget counts requests rounded up to whole
/// iterations (compilation rounds it, and the console says so).
pub fn take_iteration(budget: &AtomicU64, len: u64) -> Option<()> {
    budget
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n > 0).then(|| n.saturating_sub(len))
        })
        .ok()
        .map(drop)
}

/// True when a shared budget of requests exists and is spent: a model starts no more workers.
pub fn budget_spent(budget: Option<&AtomicU64>) -> bool {
    budget.is_some_and(|b| b.load(Ordering::Relaxed) == 0)
}

/// One worker going through the request sequence, cyclically.
#[derive(Debug, Clone)]
pub struct SequenceSource {
    sequence: Arc<[u16]>,
    phase: u16,
    /// Requests this worker sends in all; `None` for no limit of its own.
    quota: Option<u64>,
    /// Requests left for all workers together.
    budget: Option<Arc<AtomicU64>>,
    think_time: Duration,
    sent: u64,
    stop: StopSignal,
    /// A field this worker walks through (the phased model's `walk`), with its own rng.
    walk: Option<(Walk, fastrand::Rng)>,
    /// Phases by send time (a warm-up, a ramp's stages), counted from `phase`.
    clock: Option<PhaseClock>,
    /// Set by the model to have this worker leave at the end of its current request.
    retire: Option<Arc<AtomicBool>>,
}

/// A field a worker walks through: `steps` consecutive integers from `from`, each for
/// `iterations_per_step` iterations of the sequence (then round again). The other fields are
/// drawn fresh from `fields` for every request, as the worker would.
#[derive(Debug, Clone)]
pub struct Walk {
    pub fields: Fields,
    pub field: usize,
    pub from: i64,
    pub steps: u64,
    pub iterations_per_step: u64,
}

impl Walk {
    /// The walked field's value at `iteration` (0-based) of a worker.
    pub fn value_at(&self, iteration: u64) -> i64 {
        let step = (iteration / self.iterations_per_step.max(1)) % self.steps.max(1);
        self.from + step as i64
    }

    /// Requests a worker sends to walk the whole range once.
    pub fn requests(&self, sequence_len: usize) -> u64 {
        self.steps * self.iterations_per_step * sequence_len as u64
    }
}

impl SequenceSource {
    pub fn new(
        sequence: Arc<[u16]>,
        phase: u16,
        quota: Option<u64>,
        think_time: Duration,
        stop: &StopSignal,
    ) -> Self {
        SequenceSource {
            sequence,
            phase,
            quota,
            budget: None,
            think_time,
            sent: 0,
            stop: stop.clone(),
            walk: None,
            clock: None,
            retire: None,
        }
    }

    /// The same source, its requests' phase decided by when they are sent (see [`PhaseClock`]).
    pub fn timed(mut self, clock: PhaseClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The same source, leaving (no more work) once `retire` is set: a ramp's worker.
    pub fn retirable(mut self, retire: Arc<AtomicBool>) -> Self {
        self.retire = Some(retire);
        self
    }

    /// The same source, walking a field (see [`Walk`]).
    pub fn walking(mut self, walk: Walk) -> Self {
        self.walk = Some((walk, fastrand::Rng::new()));
        self
    }

    /// A budget of requests shared with other workers (`-n`), taken a whole iteration at a
    /// time (see [`take_iteration`]).
    pub fn with_budget(mut self, budget: Option<Arc<AtomicU64>>) -> Self {
        self.budget = budget;
        self
    }

    fn take(&mut self) -> Option<Work> {
        if self.stop.is_draining()
            || self
                .retire
                .as_ref()
                .is_some_and(|r| r.load(Ordering::Relaxed))
        {
            return None;
        }
        let len = self.sequence.len() as u64;
        // Quotas and budgets are checked where an iteration starts, so a worker never stops
        // between the steps of its sequence (a POST without the GET that reads it back).
        if self.sent.is_multiple_of(len) {
            if self.quota.is_some_and(|q| self.sent >= q) {
                return None;
            }
            if let Some(budget) = &self.budget {
                take_iteration(budget, len)?;
            }
        }
        let op = self.sequence[(self.sent % len) as usize];
        let phase = match &self.clock {
            Some(clock) => self.phase + clock.phase_at(Instant::now()),
            None => self.phase,
        };
        let mut work = Work::new(op, phase);
        if let Some((walk, rng)) = &mut self.walk {
            let mut values = walk.fields.draw(rng);
            values[walk.field] = Value::Int(walk.value_at(self.sent / len));
            work.values = Some(values.into());
        }
        self.sent += 1;
        Some(work)
    }
}

impl WorkSource for SequenceSource {
    async fn next(&mut self) -> Option<Work> {
        if self.sent > 0 && !self.think_time.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(self.think_time) => {}
                _ = self.stop.draining() => return None,
            }
        }
        self.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every worker holds its task's state for as long as it runs (issue 46).
    #[test]
    fn worker_task_stays_small() {
        crate::worker::assert_task_small::<SequenceSource>();
    }
    use crate::workload::fields::Generator;

    /// A walking worker keeps each value for `iterations_per_step` whole iterations, in
    /// order, and every request of an iteration carries the same walked value.
    #[tokio::test]
    async fn a_walk_steps_once_per_iterations_per_step_iterations() {
        let mut fields = Fields::default();
        fields.push("user", Generator::Int { min: 1, max: 9 });
        fields.push("interval", Generator::Int { min: 0, max: 23 });
        let walk = Walk {
            fields,
            field: 1,
            from: 3,
            steps: 3,
            iterations_per_step: 2,
        };
        let sequence: Arc<[u16]> = Arc::from(vec![0u16, 0, 1]);
        let requests = walk.requests(sequence.len());
        assert_eq!(requests, 3 * 2 * 3);
        let mut source = SequenceSource::new(
            sequence,
            0,
            Some(requests),
            Duration::ZERO,
            &StopSignal::new(),
        )
        .walking(walk);
        let mut walked = Vec::new();
        while let Some(work) = source.next().await {
            let values = work.values.expect("a walking source decides the values");
            walked.push(values[1].clone());
        }
        let expected: Vec<Value> = [3, 4, 5]
            .iter()
            .flat_map(|&v| std::iter::repeat_n(Value::Int(v), 2 * 3))
            .collect();
        assert_eq!(walked, expected);
    }
}
