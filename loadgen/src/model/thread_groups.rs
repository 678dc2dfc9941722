//! The thread-groups model of the course clients: an optional startup group runs first; then
//! `groups` groups of `group_size` workers start `delay` apart, each worker sending `iterations`
//! rounds of the request sequence (e.g. POST then GET).
//!
//! Rows carry the phase `startup` or `group-K` (K from 1); group K starts (K−1) × delay after
//! group 1, which starts when the startup group has finished.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use super::closed::{budget_spent, SequenceSource};
use super::{Announcer, DriveContext, Driving, Limit, Model, ModelPlan, Plan};
use crate::shard::Shard;
use crate::stop::StopSignal;
use crate::worker::WorkerPool;

/// Parameters of a thread-groups run.
#[derive(Debug, Clone)]
pub struct ThreadGroupsPlan {
    /// (workers, iterations) of the startup group.
    pub startup: Option<(u32, u64)>,
    pub groups: u32,
    pub group_size: u32,
    pub delay: Duration,
    pub iterations: u64,
    pub sequence: Arc<[u16]>,
}

impl ThreadGroupsPlan {
    pub fn total_requests(&self) -> u64 {
        let per_round = self.sequence.len() as u64;
        let startup = self
            .startup
            .map_or(0, |(w, i)| u64::from(w) * i * per_round);
        startup + u64::from(self.groups) * u64::from(self.group_size) * self.iterations * per_round
    }
}

impl Plan for ThreadGroupsPlan {
    fn kind(&self) -> &'static str {
        "thread-groups"
    }

    fn phase_labels(&self) -> Vec<String> {
        let startup = self.startup.map(|_| "startup".to_string());
        startup
            .into_iter()
            .chain((1..=self.groups).map(|k| format!("group-{k}")))
            .collect()
    }

    fn extent(&self) -> Limit {
        Limit::Requests(self.total_requests())
    }

    fn max_workers(&self) -> u32 {
        self.startup
            .map_or(0, |(w, _)| w)
            .max(self.groups * self.group_size)
    }

    fn describe(&self) -> String {
        format!(
            "thread-groups: {}{} × {}, {} apart, {}",
            self.startup
                .map(|(w, i)| format!("startup {w} × {i}, then "))
                .unwrap_or_default(),
            crate::units::count(self.groups, "group"),
            crate::units::count(self.group_size, "worker"),
            humantime::format_duration(self.delay),
            crate::units::count(self.iterations, "iteration")
        )
    }

    fn sequence(&self) -> &Arc<[u16]> {
        &self.sequence
    }

    fn slice(&self, shard: &Shard) -> Result<ModelPlan, String> {
        let mut plan = self.clone();
        if let Some((workers, _)) = &mut plan.startup {
            *workers = shard.share_u32(*workers);
        }
        plan.startup = plan.startup.filter(|(workers, _)| *workers > 0);
        plan.group_size = shard.share_u32(plan.group_size);
        shard.need("workers per group (group_size)", u64::from(plan.group_size))?;
        Ok(ModelPlan::ThreadGroups(plan))
    }

    fn drive<'a>(&self, pool: &'a mut WorkerPool, context: DriveContext) -> Driving<'a> {
        let model = ThreadGroups {
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
pub struct ThreadGroups {
    pub plan: ThreadGroupsPlan,
    pub think_time: Duration,
    pub stop: StopSignal,
    pub announce: Announcer,
    /// `-n` as a cap: requests left for all workers (see [`DriveContext::budget`]).
    pub budget: Option<Arc<AtomicU64>>,
}

impl Model for ThreadGroups {
    async fn drive(self, pool: &mut WorkerPool) {
        let plan = &self.plan;
        let labels = plan.phase_labels();
        let rounds = |iterations: u64| Some(iterations * plan.sequence.len() as u64);
        let mut first_group_phase = 0u16;
        if let Some((workers, iterations)) = plan.startup {
            let started = tokio::time::Instant::now();
            (self.announce)(format!(
                "startup: {} × {}",
                crate::units::count(workers, "worker"),
                crate::units::count(iterations, "iteration")
            ));
            for _ in 0..workers {
                pool.spawn(0, self.source(0, rounds(iterations)));
            }
            while pool.next_done().await.is_some() {}
            (self.announce)(format!(
                "startup finished after {:.2} s",
                started.elapsed().as_secs_f64()
            ));
            first_group_phase = 1;
        }
        let groups_start = tokio::time::Instant::now();
        let mut finished = vec![0u32; labels.len()];
        'groups: for k in 0..plan.groups {
            let at = groups_start + plan.delay * k;
            // Workers of earlier groups may finish while we wait for this group's start; once
            // a `-n` cap is spent, no more groups start.
            loop {
                if budget_spent(self.budget.as_deref()) {
                    break 'groups;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(at) => break,
                    Some(done) = pool.next_done() => self.finished(&mut finished, &labels, done.phase, groups_start),
                }
            }
            let phase = first_group_phase + k as u16;
            for _ in 0..plan.group_size {
                pool.spawn(phase, self.source(phase, rounds(plan.iterations)));
            }
            (self.announce)(format!(
                "{} started at +{:.2} s: {}",
                labels[usize::from(phase)],
                groups_start.elapsed().as_secs_f64(),
                crate::units::count(plan.group_size, "worker")
            ));
        }
        while let Some(done) = pool.next_done().await {
            self.finished(&mut finished, &labels, done.phase, groups_start);
        }
    }
}

impl ThreadGroups {
    /// A worker of `phase` running `quota` requests (whole iterations), under the cap if any.
    fn source(&self, phase: u16, quota: Option<u64>) -> SequenceSource {
        SequenceSource::new(
            self.plan.sequence.clone(),
            phase,
            quota,
            self.think_time,
            &self.stop,
        )
        .with_budget(self.budget.clone())
    }

    fn finished(
        &self,
        finished: &mut [u32],
        labels: &[String],
        phase: u16,
        groups_start: tokio::time::Instant,
    ) {
        let count = &mut finished[usize::from(phase)];
        *count += 1;
        if *count == self.plan.group_size {
            (self.announce)(format!(
                "{} finished at +{:.2} s",
                labels[usize::from(phase)],
                groups_start.elapsed().as_secs_f64()
            ));
        }
    }
}
