//! Sharding: the I-th of N equal slices of a model, so that N loadgen processes (machines,
//! pods) started with `--shard 0/N … N-1/N` together produce exactly the load of one run.
//!
//! Counts are split with the remainder spread over the first shards, never dropped: workers of
//! the closed model, of each thread group and of each phase; the producer-buffer's total and
//! pools; a closed model's `-n` budget. The open model's rate is split, and each shard's
//! schedule is offset by its share of the gap so that the union of the shards' sends is as
//! evenly spaced as one unsharded schedule. Worker ids stay unique across shards: shard I
//! numbers its workers I, I+N, I+2N… ([`Shard::worker_id`]). This module only rewrites
//! plans; it does not coordinate processes (start them together with `--start-at`). How
//! each model is cut is that model's [`Plan::slice`](super::Plan::slice), in its own file; this file holds the
//! entry point and the one rule they share (a slice with nothing to do is refused).

use super::ModelPlan;
use crate::shard::Shard;

impl Shard {
    /// The plan of this slice; `Err` names what has nothing to do in it.
    pub fn slice(&self, plan: &ModelPlan) -> Result<ModelPlan, String> {
        if self.is_whole() {
            return Ok(plan.clone());
        }
        plan.plan().slice(self)
    }

    /// `Err` when this slice would get none of `what` (`n` is its share).
    pub(crate) fn need(&self, what: &str, n: u64) -> Result<(), String> {
        if n == 0 {
            Err(format!(
                "--shard {self}: {what} cannot be split {} ways (this slice would have none); use fewer shards or more {what}",
                self.count
            ))
        } else {
            Ok(())
        }
    }
}
