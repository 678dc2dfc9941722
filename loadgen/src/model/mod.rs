//! Client models: who sends what, and when. Nothing else.
//!
//! A model starts workers through the [`WorkerPool`] and hands each a [`WorkSource`](crate::worker::WorkSource); the one
//! worker loop (`worker.rs`) asks it for the next [`Work`](crate::worker::Work) item and sends it. Models never
//! touch connections or records, so every model gets the same timing, error handling and
//! recording. [`ModelPlan`] is the validated description of a model; one file per model
//! implements it: [`closed`], [`thread_groups`], [`producer_buffer`], [`phased`].

pub mod closed;
pub mod open;
pub mod phased;
pub mod producer_buffer;
pub mod shard;
pub mod thread_groups;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::stop::StopSignal;
use crate::worker::WorkerPool;
use crate::workload::fields::Fields;

/// When a closed-model run stops sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Duration(Duration),
    Requests(u64),
}

/// Used when neither `-d` nor `-n` is given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);

/// A client model: starts workers through the pool, over time, and returns once its workers
/// are done (or it will start no more). The runner stops polling it when the run drains.
pub trait Model: Send {
    fn drive(self, pool: &mut WorkerPool) -> impl Future<Output = ()> + Send;
}

/// Prints a model's progress messages (phase starts and ends) without breaking the progress bar.
pub type Announcer = Arc<dyn Fn(String) + Send + Sync>;

/// A validated model with its parameters.
#[derive(Debug, Clone)]
pub enum ModelPlan {
    Closed {
        workers: u32,
        limit: Limit,
        sequence: Arc<[u16]>,
    },
    ThreadGroups(thread_groups::ThreadGroupsPlan),
    ProducerBuffer(producer_buffer::ProducerBufferPlan),
    Phased(phased::PhasedPlan),
    Open(open::OpenPlan),
}

impl ModelPlan {
    pub fn kind(&self) -> &'static str {
        match self {
            ModelPlan::Closed { .. } => "closed",
            ModelPlan::ThreadGroups(_) => "thread-groups",
            ModelPlan::ProducerBuffer(_) => "producer-buffer",
            ModelPlan::Phased(_) => "phased",
            ModelPlan::Open(_) => "open",
        }
    }

    /// The `phase` labels rows of this model carry, by index.
    pub fn phase_labels(&self) -> Vec<String> {
        match self {
            ModelPlan::Closed { .. } => vec!["main".to_string()],
            ModelPlan::ThreadGroups(plan) => plan.phase_labels(),
            ModelPlan::ProducerBuffer(_) => producer_buffer::PHASES.map(String::from).to_vec(),
            ModelPlan::Phased(plan) => plan.phases.iter().map(|p| p.name.clone()).collect(),
            ModelPlan::Open(_) => vec!["main".to_string()],
        }
    }

    /// Most attempts one request can get (retries + 1).
    pub fn max_attempts(&self) -> u8 {
        match self {
            ModelPlan::ProducerBuffer(plan) => plan.retries.saturating_add(1),
            _ => 1,
        }
    }

    /// For the progress bar: how long the run lasts, or how many first attempts it sends.
    pub fn extent(&self) -> Limit {
        match self {
            ModelPlan::Closed { limit, .. } => *limit,
            ModelPlan::ThreadGroups(plan) => Limit::Requests(plan.total_requests()),
            ModelPlan::ProducerBuffer(plan) => Limit::Requests(plan.total),
            ModelPlan::Phased(plan) => Limit::Requests(plan.total_requests()),
            ModelPlan::Open(plan) => Limit::Duration(plan.duration()),
        }
    }

    /// Peak concurrent workers, for the open-files check.
    pub fn max_workers(&self) -> u32 {
        match self {
            ModelPlan::Closed { workers, .. } => *workers,
            ModelPlan::ThreadGroups(plan) => plan
                .startup
                .map_or(0, |(w, _)| w)
                .max(plan.groups * plan.group_size),
            ModelPlan::ProducerBuffer(plan) => plan.max_workers,
            ModelPlan::Phased(plan) => plan.phases.iter().map(|p| p.workers).sum(),
            ModelPlan::Open(plan) => plan.max_in_flight,
        }
    }

    /// One line for the console header.
    pub fn describe(&self) -> String {
        match self {
            ModelPlan::Closed { workers, limit, .. } => {
                let limit = match limit {
                    Limit::Duration(d) => format!("for {}", humantime::format_duration(*d)),
                    Limit::Requests(n) => format!("{n} requests"),
                };
                format!("closed model, {workers} workers, {limit}")
            }
            ModelPlan::ThreadGroups(p) => format!(
                "thread-groups: {}{} groups × {} workers, {} apart, {} iterations",
                p.startup
                    .map(|(w, i)| format!("startup {w} × {i}, then "))
                    .unwrap_or_default(),
                p.groups,
                p.group_size,
                humantime::format_duration(p.delay),
                p.iterations
            ),
            ModelPlan::ProducerBuffer(p) => format!(
                "producer-buffer: {} payloads, {} consumers × {} growing to {}, {} retries",
                p.total, p.initial_workers, p.requests_per_worker, p.max_workers, p.retries
            ),
            ModelPlan::Phased(p) => format!(
                "phased: {}",
                p.phases
                    .iter()
                    .map(|ph| format!("{} {}×{}", ph.name, ph.workers, ph.requests_per_worker))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ModelPlan::Open(p) => format!(
                "open model: {}, {:?} arrivals, {} scheduled, at most {} in flight",
                p.stages
                    .iter()
                    .map(|s| if s.from_rps == s.to_rps {
                        format!(
                            "{} req/s for {}",
                            s.to_rps,
                            humantime::format_duration(s.duration)
                        )
                    } else {
                        format!(
                            "{}→{} req/s over {}",
                            s.from_rps,
                            s.to_rps,
                            humantime::format_duration(s.duration)
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", then "),
                p.arrivals,
                p.scheduled(),
                p.max_in_flight
            ),
        }
    }

    /// The op sequence one iteration sends.
    pub fn sequence(&self) -> Arc<[u16]> {
        match self {
            ModelPlan::Closed { sequence, .. } => sequence.clone(),
            ModelPlan::ThreadGroups(p) => p.sequence.clone(),
            ModelPlan::ProducerBuffer(p) => p.sequence.clone(),
            ModelPlan::Phased(p) => p.sequence.clone(),
            ModelPlan::Open(p) => p.sequence.clone(),
        }
    }

    /// Open model: a send later than this after its intended time counts as late.
    pub fn max_lateness(&self) -> Option<Duration> {
        match self {
            ModelPlan::Open(plan) => Some(plan.max_lateness),
            _ => None,
        }
    }

    /// Drives the model until its workers are done.
    pub async fn drive(
        self,
        pool: &mut WorkerPool,
        think_time: Duration,
        stop: &StopSignal,
        announce: Announcer,
        fields: &Fields,
    ) {
        let stop = stop.clone();
        match self {
            ModelPlan::Closed {
                workers,
                limit,
                sequence,
            } => {
                let requests = match limit {
                    Limit::Requests(n) => Some(n),
                    Limit::Duration(_) => None,
                };
                let model = closed::Closed {
                    workers,
                    requests,
                    sequence,
                    think_time,
                    stop,
                };
                model.drive(pool).await
            }
            ModelPlan::ThreadGroups(plan) => {
                thread_groups::ThreadGroups {
                    plan,
                    think_time,
                    stop,
                    announce,
                }
                .drive(pool)
                .await
            }
            ModelPlan::ProducerBuffer(plan) => {
                producer_buffer::ProducerBuffer {
                    plan,
                    fields: fields.clone(),
                    think_time,
                    stop,
                    announce,
                }
                .drive(pool)
                .await
            }
            ModelPlan::Open(plan) => {
                open::Open {
                    plan,
                    stop,
                    seed: fastrand::u64(..),
                }
                .drive(pool)
                .await
            }
            ModelPlan::Phased(plan) => {
                phased::Phased {
                    plan,
                    think_time,
                    stop,
                    announce,
                }
                .drive(pool)
                .await
            }
        }
    }
}
