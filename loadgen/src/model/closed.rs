//! Workers that send the request sequence in order: the closed model (wrk/oha style: `-c N`
//! workers back to back, for `-d` or `-n`), and the per-worker source thread-groups and phased
//! workers use too.
//!
//! A [`SequenceSource`] stops handing out work when the run drains (duration elapsed, Ctrl-C),
//! when its own quota is done (`iterations` × sequence, `requests_per_worker`), or when a
//! budget shared by all workers is spent — so `-n` sends exactly that many requests. An
//! optional think time makes each worker pause between its requests, as a real user would;
//! the pause is not part of any request's latency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{Model, Work, WorkSource};
use crate::stop::StopSignal;
use crate::worker::WorkerPool;

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
            let mut source =
                SequenceSource::new(self.sequence.clone(), 0, None, self.think_time, &self.stop);
            source.budget = budget.clone();
            pool.spawn(0, source);
        }
    }
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
        }
    }

    fn take(&mut self) -> Option<Work> {
        if self.stop.is_draining() || self.quota.is_some_and(|q| self.sent >= q) {
            return None;
        }
        if let Some(budget) = &self.budget {
            budget
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .ok()?;
        }
        let op = self.sequence[(self.sent % self.sequence.len() as u64) as usize];
        self.sent += 1;
        Some(Work::new(op, self.phase))
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
