//! The closed model (wrk/oha style): `-c N` workers send back to back, each waiting for its
//! previous response before sending the next request.
//!
//! The model stops handing out work when the run drains (duration elapsed, Ctrl-C) or, with
//! `-n`, when the shared request budget is spent — so exactly `-n` requests are sent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Work, WorkSource};
use crate::stop::StopSignal;

/// One worker's view of the closed model.
#[derive(Debug, Clone)]
pub struct ClosedSource {
    /// Requests left for all workers together; `None` for a duration-bound run.
    budget: Option<Arc<AtomicU64>>,
    stop: StopSignal,
}

/// Sources for `workers` workers sharing an optional total of `requests`.
pub fn sources(workers: u32, requests: Option<u64>, stop: &StopSignal) -> Vec<ClosedSource> {
    let budget = requests.map(|n| Arc::new(AtomicU64::new(n)));
    (0..workers)
        .map(|_| ClosedSource {
            budget: budget.clone(),
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
        Some(Work {
            op: 0,
            phase: 0,
            intended: None,
            queue_wait_ns: None,
            attempt: 1,
        })
    }
}

impl WorkSource for ClosedSource {
    async fn next(&mut self) -> Option<Work> {
        self.take()
    }
}
