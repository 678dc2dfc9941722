//! Client models: who sends what, and when. Nothing else.
//!
//! A model hands each worker a [`WorkSource`]; the one worker loop (`worker.rs`) asks it for
//! the next [`Work`] item and sends it. Models never touch connections or records, so every
//! model gets the same timing, error handling and recording for free. The closed model lives
//! in [`closed`]; the course models and the open model follow the same seam.

pub mod closed;

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use crate::workload::fields::Value;

use crate::worker::WorkerPool;

/// One request a worker should send next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Work {
    /// Index into the run's request templates (and the `op` dictionary).
    pub op: u16,
    /// Index into the run's phase labels.
    pub phase: u16,
    /// When the schedule wanted this request sent (open model); `None` for closed models.
    pub intended: Option<Instant>,
    /// How long the worker waited for this item (producer-buffer model).
    pub queue_wait_ns: Option<i64>,
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
}

/// A client model: starts workers through the pool, over time, and returns once it will start
/// no more. The runner stops calling it when the run drains, so it need not watch for that.
pub trait Model: Send {
    fn drive(self, pool: &mut WorkerPool) -> impl Future<Output = ()> + Send;
}
