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
//! a duration or a request budget.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{DriveContext, Driving, Limit, Model, ModelPlan, Plan};
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
}

impl Plan for ClosedPlan {
    fn kind(&self) -> &'static str {
        "closed"
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
            Limit::Requests(n) => format!("{n} requests"),
        };
        format!("closed model, {} workers, {limit}", self.workers)
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
}

impl Model for Closed {
    async fn drive(self, pool: &mut WorkerPool) {
        let budget = self.requests.map(|n| Arc::new(AtomicU64::new(n)));
        for _ in 0..self.workers {
            let source =
                SequenceSource::new(self.sequence.clone(), 0, None, self.think_time, &self.stop);
            pool.spawn(0, source.with_budget(budget.clone()));
        }
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
        }
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
        if self.stop.is_draining() {
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
        let mut work = Work::new(op, self.phase);
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
