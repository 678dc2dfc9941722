//! The phased model of the course clients: phases (e.g. warmup 10 %, loading 50 %, peak 100 %,
//! cooldown 25 % of `max_workers`), each worker sending `requests_per_worker` requests,
//! optionally walking a field through a range (the StepCounter client's time intervals); a
//! phase starts when a given number of the previous phase's workers have finished (all of
//! them: one after the other; some: overlapping), or at a fixed offset from the run's start.
//!
//! Rows carry the phase's name. Each phase start and finish is announced on the console.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::closed::{budget_spent, SequenceSource, Walk};
use super::{Announcer, DriveContext, Driving, Limit, Model, ModelPlan, Plan};
use crate::shard::Shard;
use crate::stop::StopSignal;
use crate::worker::WorkerPool;

/// When a phase starts.
#[derive(Debug, Clone, PartialEq)]
pub enum StartRule {
    /// This long after the run started.
    At(Duration),
    /// When `finished` workers of phase number `phase` have finished.
    After { phase: usize, finished: u32 },
}

#[derive(Debug, Clone)]
pub struct PhasePlan {
    pub name: String,
    pub workers: u32,
    pub requests_per_worker: u64,
    pub start: StartRule,
    /// A field each worker walks through; `requests_per_worker` covers the whole walk.
    pub walk: Option<Walk>,
}

#[derive(Debug, Clone)]
pub struct PhasedPlan {
    pub phases: Vec<PhasePlan>,
    pub sequence: Arc<[u16]>,
}

impl PhasedPlan {
    pub fn total_requests(&self) -> u64 {
        self.phases
            .iter()
            .map(|p| u64::from(p.workers) * p.requests_per_worker)
            .sum()
    }
}

impl Plan for PhasedPlan {
    fn kind(&self) -> &'static str {
        "phased"
    }

    fn phase_labels(&self) -> Vec<String> {
        self.phases.iter().map(|p| p.name.clone()).collect()
    }

    fn extent(&self) -> Limit {
        Limit::Requests(self.total_requests())
    }

    fn max_workers(&self) -> u32 {
        self.phases.iter().map(|p| p.workers).sum()
    }

    fn describe(&self) -> String {
        let phases: Vec<String> = self
            .phases
            .iter()
            .map(|ph| format!("{} {}×{}", ph.name, ph.workers, ph.requests_per_worker))
            .collect();
        format!("phased: {}", phases.join(", "))
    }

    fn sequence(&self) -> &Arc<[u16]> {
        &self.sequence
    }

    fn slice(&self, shard: &Shard) -> Result<ModelPlan, String> {
        let mut plan = self.clone();
        for phase in &mut plan.phases {
            phase.workers = shard.share_u32(phase.workers);
            let what = format!("workers of phase '{}'", phase.name);
            shard.need(&what, u64::from(phase.workers))?;
        }
        // "When a fraction of phase k's workers finished" keeps its fraction.
        let after: Vec<u32> = plan.phases.iter().map(|ph| ph.workers).collect();
        for phase in &mut plan.phases {
            if let StartRule::After { phase: k, finished } = &mut phase.start {
                let fraction = f64::from(*finished) / f64::from(self.phases[*k].workers.max(1));
                *finished = ((fraction * f64::from(after[*k])).ceil() as u32).max(1);
            }
        }
        Ok(ModelPlan::Phased(plan))
    }

    fn drive<'a>(&self, pool: &'a mut WorkerPool, context: DriveContext) -> Driving<'a> {
        let model = Phased {
            plan: self.clone(),
            think_time: context.think_time,
            stop: context.stop,
            announce: context.announce,
            budget: context.budget,
        };
        Box::pin(model.drive(pool))
    }
}

/// The model, ready to drive.
pub struct Phased {
    pub plan: PhasedPlan,
    pub think_time: Duration,
    pub stop: StopSignal,
    pub announce: Announcer,
    /// `-n` as a cap: requests left for all workers (see [`DriveContext::budget`]).
    pub budget: Option<Arc<AtomicU64>>,
}

impl Model for Phased {
    async fn drive(self, pool: &mut WorkerPool) {
        let phases = &self.plan.phases;
        let run_start = Instant::now();
        let mut started: Vec<Option<Instant>> = vec![None; phases.len()];
        let mut finished = vec![0u32; phases.len()];
        loop {
            // Once a `-n` cap is spent, no more phases start.
            let spent = budget_spent(self.budget.as_deref());
            for (i, phase) in phases.iter().enumerate() {
                if started[i].is_some() || spent {
                    continue;
                }
                let due = match phase.start {
                    StartRule::At(offset) => Instant::now() >= run_start + offset,
                    StartRule::After {
                        phase: previous,
                        finished: needed,
                    } => started[previous].is_some() && finished[previous] >= needed,
                };
                if !due {
                    continue;
                }
                started[i] = Some(Instant::now());
                for _ in 0..phase.workers {
                    let mut source = SequenceSource::new(
                        self.plan.sequence.clone(),
                        i as u16,
                        Some(phase.requests_per_worker),
                        self.think_time,
                        &self.stop,
                    )
                    .with_budget(self.budget.clone());
                    if let Some(walk) = &phase.walk {
                        source = source.walking(walk.clone());
                    }
                    pool.spawn(i as u16, source);
                }
                (self.announce)(format!(
                    "phase {} started at +{:.2} s: {} × {}",
                    phase.name,
                    run_start.elapsed().as_secs_f64(),
                    crate::units::count(phase.workers, "worker"),
                    crate::units::count(phase.requests_per_worker, "request")
                ));
            }
            let all_started = spent || started.iter().all(Option::is_some);
            if all_started && pool.running() == 0 {
                return;
            }
            let next_at = phases
                .iter()
                .zip(&started)
                .filter_map(|(p, s)| match (p.start.clone(), s) {
                    (StartRule::At(offset), None) => Some(run_start + offset),
                    _ => None,
                })
                .min();
            if pool.running() == 0 && next_at.is_none() {
                return; // Nothing can start any more (validation makes this unreachable).
            }
            tokio::select! {
                Some(done) = pool.next_done() => {
                    let i = usize::from(done.phase);
                    finished[i] += 1;
                    if finished[i] == phases[i].workers {
                        let took = started[i].map_or(0.0, |s| s.elapsed().as_secs_f64());
                        (self.announce)(format!(
                            "phase {} finished at +{:.2} s ({}, {took:.2} s)",
                            phases[i].name,
                            run_start.elapsed().as_secs_f64(),
                            crate::units::count(phases[i].workers, "worker")
                        ));
                    }
                }
                _ = crate::clock::sleep_until(next_at) => {}
            }
        }
    }
}
