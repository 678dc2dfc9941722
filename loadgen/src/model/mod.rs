//! Client models: who sends what, and when. Nothing else.
//!
//! A model starts workers through the [`WorkerPool`] and hands each a [`WorkSource`]; the one
//! worker loop (`worker.rs`) asks it for the next [`Work`] item and sends it. Models never
//! touch connections or records, so every model gets the same timing, error handling and
//! recording.
//!
//! Each model owns its knowledge in one file: its validated parameters (a plan type), what
//! the runner and the console ask about them ([`Plan`]: kind, phase labels, extent, peak
//! workers, description), how a shard's slice of it looks, and how it is driven. Those files
//! are [`closed`], [`thread_groups`], [`producer_buffer`], [`phased`], [`open`] and [`ramp`].
//! [`ModelPlan`] is the one name callers hold: an enum with one variant per model, so callers
//! and tests can still look at a particular model's plan, whose only `match` is
//! [`ModelPlan::plan`]; callers ask the trait through it (`model.plan().describe()`), so a
//! new [`Plan`] method needs no second copy here. How a scenario's `[model]` becomes a plan
//! is `scenario::compile`'s job (scenario → model, never back), one file per model there too.
//!
//! Adding a model: its file here (plan type, `impl Plan`, the driving), its spec in
//! `scenario/schema.rs` with its `kind`, its compile file in `scenario/compile/`, and one line
//! each in [`ModelPlan`], [`ModelPlan::plan`] and `scenario::compile::compile_model`.
//!
//! [`Work`]: crate::worker::Work
//! [`WorkSource`]: crate::worker::WorkSource

pub mod closed;
pub mod open;
pub mod phased;
pub mod producer_buffer;
pub mod ramp;
pub mod shard;
pub mod thread_groups;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::shard::Shard;
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

/// What a run gives every model to drive with, beside the pool.
#[derive(Clone)]
pub struct DriveContext {
    /// Pause between a worker's requests.
    pub think_time: Duration,
    pub stop: StopSignal,
    pub announce: Announcer,
    /// The run's fields (the producer draws its payloads from them).
    pub fields: Fields,
    /// Requests left for all workers together (`-n` as a cap on a model that is not
    /// closed), taken a whole iteration at a time; `None` when the plan alone decides.
    pub budget: Option<Arc<std::sync::atomic::AtomicU64>>,
}

/// A model being driven, boxed so that [`Plan`] can be used as `dyn Plan`.
pub type Driving<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// A validated model: what the rest of loadgen asks of it. One implementation per model file.
pub trait Plan: std::fmt::Debug + Send + Sync {
    /// The model's name as in a scenario's `kind` and run.json.
    fn kind(&self) -> &'static str;

    /// The `phase` labels rows of this model carry, by index.
    fn phase_labels(&self) -> Vec<String> {
        vec![crate::record::phase::MAIN.to_string()]
    }

    /// The phase of the warm-up this plan labels ([`WARMUP`](crate::record::phase::WARMUP):
    /// the closed and open models' `warmup`), whose rows every judgement leaves out; `None`
    /// without one. A scenario's own phase that happens to be called `warmup` is not it.
    fn warmup_phase(&self) -> Option<u16> {
        None
    }

    /// Most attempts one request can get (retries + 1).
    fn max_attempts(&self) -> u8 {
        1
    }

    /// For the progress bar: how long the run lasts, or how many first attempts it sends.
    fn extent(&self) -> Limit;

    /// A time after which the run stops sending because this plan says so (the closed
    /// model's duration); `None` when the plan ends by itself.
    fn time_limit(&self) -> Option<Duration> {
        None
    }

    /// Peak concurrent workers, for the open-files check.
    fn max_workers(&self) -> u32;

    /// One line for the console header.
    fn describe(&self) -> String;

    /// The op sequence one iteration sends.
    fn sequence(&self) -> &Arc<[u16]>;

    /// Open model: a send later than this after its intended time counts as late.
    fn max_lateness(&self) -> Option<Duration> {
        None
    }

    /// The plan of `shard`'s slice (never the whole: [`Shard::slice`] handles that); `Err`
    /// names what has nothing to do in it (see [`shard`]).
    fn slice(&self, shard: &Shard) -> Result<ModelPlan, String>;

    /// Drives the model until its workers are done.
    fn drive<'a>(&self, pool: &'a mut WorkerPool, context: DriveContext) -> Driving<'a>;
}

/// A validated model with its parameters.
#[derive(Debug, Clone)]
pub enum ModelPlan {
    Closed(closed::ClosedPlan),
    ThreadGroups(thread_groups::ThreadGroupsPlan),
    ProducerBuffer(producer_buffer::ProducerBufferPlan),
    Phased(phased::PhasedPlan),
    Open(open::OpenPlan),
    Ramp(ramp::RampPlan),
}

impl ModelPlan {
    /// The model's own plan, as the trait every model implements.
    pub fn plan(&self) -> &dyn Plan {
        match self {
            ModelPlan::Closed(plan) => plan,
            ModelPlan::ThreadGroups(plan) => plan,
            ModelPlan::ProducerBuffer(plan) => plan,
            ModelPlan::Phased(plan) => plan,
            ModelPlan::Open(plan) => plan,
            ModelPlan::Ramp(plan) => plan,
        }
    }
}
