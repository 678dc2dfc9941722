//! The closed model (wrk/oha style): `-c N` workers send back to back, each waiting for its
//! previous response before sending the next request.
//!
//! The model stops handing out work when the run drains (duration elapsed, Ctrl-C) or, with
//! `-n`, when the shared request budget is spent — so exactly `-n` requests are sent. An
//! optional think time makes each worker pause between its requests, as a real user (or a
//! client doing other work) would; the pause is not part of any request's latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Model, Work, WorkSource};
use crate::worker::WorkerPool;
use crate::stop::StopSignal;

/// The closed model: `workers` workers from the start, sharing an optional `requests` budget.
#[derive(Debug, Clone)]
pub struct Closed {
    pub workers: u32,
    pub requests: Option<u64>,
    pub think_time: Duration,
    pub stop: StopSignal,
}

impl Model for Closed {
    async fn drive(self, pool: &mut WorkerPool) {
        for source in sources(self.workers, self.requests, self.think_time, &self.stop) {
            pool.spawn(0, source);
        }
    }
}

/// One worker's view of the closed model.
#[derive(Debug, Clone)]
pub struct ClosedSource {
    /// Requests left for all workers together; `None` for a duration-bound run.
    budget: Option<Arc<AtomicU64>>,
    think_time: Duration,
    /// False until the first request was handed out: nobody thinks before starting.
    started: bool,
    stop: StopSignal,
}

/// Sources for `workers` workers sharing an optional total of `requests`, each pausing
/// `think_time` between requests.
pub fn sources(
    workers: u32,
    requests: Option<u64>,
    think_time: Duration,
    stop: &StopSignal,
) -> Vec<ClosedSource> {
    let budget = requests.map(|n| Arc::new(AtomicU64::new(n)));
    (0..workers)
        .map(|_| ClosedSource {
            budget: budget.clone(),
            think_time,
            started: false,
            stop: stop.clone(),
        })
        .collect()
}

impl ClosedSource {
    fn take(&self) -> Option<Work> {
        if self.stop.is_draining() {
            return None;
        }
        if let Some(budget) = &self.budget {
            budget
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .ok()?;
        }
        Some(Work::new(0, 0))
    }
}

impl WorkSource for ClosedSource {
    async fn next(&mut self) -> Option<Work> {
        if self.started && !self.think_time.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(self.think_time) => {}
                _ = self.stop.draining() => return None,
            }
        }
        self.started = true;
        self.take()
    }
}
