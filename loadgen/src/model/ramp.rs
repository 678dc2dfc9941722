//! The ramp model: the closed model's workers over time, as k6's ramping-vus and Gatling's
//! `rampUsers` (`--ramp 30s:10,1m:50,30s:0`). Stages of a duration and the workers to reach
//! by its end, linear from the previous stage's target (the first from 0).
//!
//! The model starts workers while fewer run than the ramp says, and tells the newest ones to
//! leave while more do: such a worker finishes its current request and asks for no more
//! (its [`SequenceSource`] is [`retirable`](SequenceSource::retirable)). It looks every
//! [`TICK`], between workers finishing. Each request's phase is the stage it was sent in
//! (`stage1`, `stage2`, …; a [`PhaseClock`]), so the summary and the verdict judge each
//! stage as they judge the phased model's phases. The run lasts the stages' total.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::closed::{budget_spent, PhaseClock, SequenceSource};
use super::{DriveContext, Driving, Limit, Model, ModelPlan, Plan};
use crate::shard::Shard;
use crate::stop::StopSignal;
use crate::worker::WorkerPool;

/// How often the model compares the workers running with the ramp's.
pub const TICK: Duration = Duration::from_millis(10);

/// One stage: reach `workers` by its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RampStage {
    pub duration: Duration,
    pub workers: u32,
}

/// The ramp's validated stages.
#[derive(Debug, Clone)]
pub struct RampPlan {
    pub stages: Vec<RampStage>,
    pub sequence: Arc<[u16]>,
}

impl RampPlan {
    /// The stages' total.
    pub fn duration(&self) -> Duration {
        self.stages.iter().map(|s| s.duration).sum()
    }

    /// The workers the ramp asks for `elapsed` into the run (rounded to the nearest).
    pub fn workers_at(&self, elapsed: Duration) -> u32 {
        let mut from = 0u32;
        let mut start = Duration::ZERO;
        for stage in &self.stages {
            let end = start + stage.duration;
            if elapsed < end {
                let fraction = (elapsed - start).as_secs_f64() / stage.duration.as_secs_f64();
                let workers =
                    f64::from(from) + (f64::from(stage.workers) - f64::from(from)) * fraction;
                return workers.round() as u32;
            }
            (from, start) = (stage.workers, end);
        }
        from
    }

    /// Where each stage but the last ends, from the start: the phase clock's boundaries.
    fn stage_ends(&self) -> Vec<Duration> {
        let mut end = Duration::ZERO;
        let mut ends: Vec<Duration> = self
            .stages
            .iter()
            .map(|s| {
                end += s.duration;
                end
            })
            .collect();
        ends.pop();
        ends
    }
}

impl Plan for RampPlan {
    fn kind(&self) -> &'static str {
        "ramp"
    }

    fn phase_labels(&self) -> Vec<String> {
        (1..=self.stages.len())
            .map(|i| format!("stage{i}"))
            .collect()
    }

    fn extent(&self) -> Limit {
        Limit::Duration(self.duration())
    }

    fn time_limit(&self) -> Option<Duration> {
        Some(self.duration())
    }

    fn max_workers(&self) -> u32 {
        self.stages.iter().map(|s| s.workers).max().unwrap_or(0)
    }

    fn describe(&self) -> String {
        let stages: Vec<String> = self
            .stages
            .iter()
            .map(|s| {
                format!(
                    "→{} over {}",
                    s.workers,
                    humantime::format_duration(s.duration)
                )
            })
            .collect();
        format!("ramp of workers from 0: {}", stages.join(", "))
    }

    fn sequence(&self) -> &Arc<[u16]> {
        &self.sequence
    }

    fn slice(&self, shard: &Shard) -> Result<ModelPlan, String> {
        let mut plan = self.clone();
        for stage in &mut plan.stages {
            stage.workers = shard.share_u32(stage.workers);
        }
        shard.need("workers", u64::from(plan.max_workers()))?;
        Ok(ModelPlan::Ramp(plan))
    }

    fn drive<'a>(&self, pool: &'a mut WorkerPool, context: DriveContext) -> Driving<'a> {
        let model = Ramp {
            plan: self.clone(),
            think_time: context.think_time,
            stop: context.stop,
            budget: context.budget,
        };
        Box::pin(model.drive(pool))
    }
}

/// The model, ready to drive.
pub struct Ramp {
    pub plan: RampPlan,
    pub think_time: Duration,
    pub stop: StopSignal,
    /// `-n` as a cap: requests left for all workers (see [`DriveContext::budget`]).
    pub budget: Option<Arc<AtomicU64>>,
}

impl Model for Ramp {
    async fn drive(self, pool: &mut WorkerPool) {
        let start = Instant::now();
        let clock = PhaseClock::new(self.plan.stage_ends());
        let total = self.plan.duration();
        // Workers running and not told to leave, oldest first, with their leave flags.
        let mut staying: Vec<(u32, Arc<AtomicBool>)> = Vec::new();
        loop {
            let elapsed = start.elapsed();
            if elapsed >= total || budget_spent(self.budget.as_deref()) {
                return; // The run's time limit drains the workers still running.
            }
            let target = self.plan.workers_at(elapsed) as usize;
            while staying.len() < target {
                let leave = Arc::new(AtomicBool::new(false));
                let source = SequenceSource::new(
                    self.plan.sequence.clone(),
                    0,
                    None,
                    self.think_time,
                    &self.stop,
                )
                .with_budget(self.budget.clone())
                .timed(clock.clone())
                .retirable(leave.clone());
                let stage = clock.phase_at(std::time::Instant::now());
                staying.push((pool.spawn(stage, source), leave));
            }
            while staying.len() > target {
                if let Some((_, leave)) = staying.pop() {
                    leave.store(true, Ordering::Relaxed);
                }
            }
            tokio::select! {
                Some(done) = pool.next_done() => staying.retain(|(id, _)| *id != done.worker),
                _ = tokio::time::sleep(TICK) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(stages: &[(u64, u32)]) -> RampPlan {
        RampPlan {
            stages: stages
                .iter()
                .map(|&(s, workers)| RampStage {
                    duration: Duration::from_secs(s),
                    workers,
                })
                .collect(),
            sequence: Arc::from(vec![0u16]),
        }
    }

    /// Linear from 0 to the first target, then between targets; the last target after.
    #[test]
    fn workers_follow_the_stages_linearly() {
        let ramp = plan(&[(2, 10), (4, 50), (2, 0)]);
        let at = |ms: u64| ramp.workers_at(Duration::from_millis(ms));
        assert_eq!(
            [
                at(0),
                at(1000),
                at(2000),
                at(4000),
                at(6000),
                at(7000),
                at(9000)
            ],
            [0, 5, 10, 30, 50, 25, 0]
        );
        assert_eq!(
            ramp.stage_ends(),
            [Duration::from_secs(2), Duration::from_secs(6)]
        );
        assert_eq!(ramp.phase_labels(), ["stage1", "stage2", "stage3"]);
        assert_eq!(ramp.max_workers(), 50);
    }
}
