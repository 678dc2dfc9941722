//! Sharding: the I-th of N equal slices of a model, so that N loadgen processes (machines,
//! pods) started with `--shard 0/N … N-1/N` together produce exactly the load of one run.
//!
//! Counts are split with the remainder spread over the first shards, never dropped: workers of
//! the closed model, of each thread group and of each phase; the producer-buffer's total and
//! pools; a closed model's `-n` budget. The open model's rate is split, and each shard's
//! schedule is offset by its share of the gap so that the union of the shards' sends is as
//! evenly spaced as one unsharded schedule. Worker ids stay unique across shards: shard I
//! numbers its workers I, I+N, I+2N… ([`Shard::worker_id`]). This module only rewrites
//! plans; it does not coordinate processes (start them together with `--start-at`).

use super::phased::StartRule;
use super::ModelPlan;
use crate::model::Limit;
use crate::shard::Shard;

impl Shard {
    /// The plan of this slice; `Err` names what has nothing to do in it.
    pub fn slice(&self, plan: &ModelPlan) -> Result<ModelPlan, String> {
        if self.is_whole() {
            return Ok(plan.clone());
        }
        let need = |what: &str, n: u64| {
            if n == 0 {
                Err(format!(
                    "--shard {self}: {what} cannot be split {} ways (this slice would have none); use fewer shards or more {what}",
                    self.count
                ))
            } else {
                Ok(())
            }
        };
        let mut plan = plan.clone();
        match &mut plan {
            ModelPlan::Closed { workers, limit, .. } => {
                *workers = self.share_u32(*workers);
                need("workers", u64::from(*workers))?;
                if let Limit::Requests(n) = limit {
                    *n = self.share(*n);
                    need("requests", *n)?;
                }
            }
            ModelPlan::ThreadGroups(p) => {
                if let Some((workers, _)) = &mut p.startup {
                    *workers = self.share_u32(*workers);
                }
                p.startup = p.startup.filter(|(workers, _)| *workers > 0);
                p.group_size = self.share_u32(p.group_size);
                need("workers per group (group_size)", u64::from(p.group_size))?;
            }
            ModelPlan::ProducerBuffer(p) => {
                p.total = self.share(p.total);
                need("payloads (total)", p.total)?;
                p.initial_workers = self.share_u32(p.initial_workers);
                need("initial workers", u64::from(p.initial_workers))?;
                p.max_workers = self.share_u32(p.max_workers).max(p.initial_workers);
                p.buffer = (self.share(p.buffer as u64) as usize).max(1);
            }
            ModelPlan::Phased(p) => {
                let before: Vec<u32> = p.phases.iter().map(|ph| ph.workers).collect();
                for phase in &mut p.phases {
                    phase.workers = self.share_u32(phase.workers);
                    need(
                        &format!("workers of phase '{}'", phase.name),
                        u64::from(phase.workers),
                    )?;
                }
                // "When a fraction of phase k's workers finished" keeps its fraction.
                let after: Vec<u32> = p.phases.iter().map(|ph| ph.workers).collect();
                for phase in &mut p.phases {
                    if let StartRule::After { phase: k, finished } = &mut phase.start {
                        let fraction = f64::from(*finished) / f64::from(before[*k].max(1));
                        *finished = ((fraction * f64::from(after[*k])).ceil() as u32).max(1);
                    }
                }
            }
            ModelPlan::Open(p) => {
                let n = f64::from(self.count);
                for stage in &mut p.stages {
                    stage.from_rps /= n;
                    stage.to_rps /= n;
                }
                p.max_in_flight = self.share_u32(p.max_in_flight).max(1);
                p.offset = f64::from(self.index) / n;
                need("scheduled requests", p.scheduled())?;
            }
        }
        Ok(plan)
    }
}
