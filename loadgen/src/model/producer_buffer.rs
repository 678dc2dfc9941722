//! The producer-buffer model of the course clients: one producer task generates `total`
//! payloads (e.g. random lift rides) into a bounded buffer; `initial_workers` consumers each
//! send `requests_per_worker` of them; once the first consumer finishes, the pool grows to
//! `max_workers` consumers that share the rest until the buffer is drained.
//!
//! Failed requests are retried up to `retries` times, after a backoff that grows with each
//! attempt; every attempt is a row (`attempt` 1, 2, …). Two waits are recorded on each first
//! attempt, one meaning per column: `queue_wait_ns`, how long the consumer waited on an empty
//! buffer for the item (when that grows, the producer, not the server, is the limit), and
//! `buffer_wait_ns`, how long the item waited between being produced and being taken — for
//! room in a full buffer, then in it (when that grows, the consumers — the server's pace — are
//! the limit).
//! Rows carry the phase `initial` or `grown`. At most `max_workers` consumers run at once;
//! when an initial consumer finishes while payloads remain, a new one takes its place.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Announcer, DriveContext, Driving, Limit, Model, ModelPlan, Plan};
use crate::clock::nanos;
use crate::shard::Shard;
use crate::stats::LiveCounters;
use crate::stop::StopSignal;
use crate::worker::WorkerPool;
use crate::worker::{Work, WorkSource};
use crate::workload::fields::Fields;

/// Parameters of a producer-buffer run.
#[derive(Debug, Clone)]
pub struct ProducerBufferPlan {
    pub total: u64,
    pub buffer: usize,
    pub initial_workers: u32,
    pub requests_per_worker: u64,
    pub max_workers: u32,
    pub retries: u8,
    pub backoff: Duration,
    pub sequence: Arc<[u16]>,
}

pub const PHASES: [&str; 2] = ["initial", "grown"];

impl Plan for ProducerBufferPlan {
    fn kind(&self) -> &'static str {
        "producer-buffer"
    }

    fn phase_labels(&self) -> Vec<String> {
        PHASES.map(String::from).to_vec()
    }

    fn max_attempts(&self) -> u8 {
        self.retries.saturating_add(1)
    }

    fn extent(&self) -> Limit {
        Limit::Requests(self.total)
    }

    fn max_workers(&self) -> u32 {
        self.max_workers
    }

    fn describe(&self) -> String {
        format!(
            "producer-buffer: {}, {} × {} growing to {}, {}",
            crate::units::count(self.total, "payload"),
            crate::units::count(self.initial_workers, "consumer"),
            crate::units::count(self.requests_per_worker, "request"),
            self.max_workers,
            match self.retries {
                1 => "1 retry".to_string(),
                n => format!("{n} retries"),
            }
        )
    }

    fn sequence(&self) -> &Arc<[u16]> {
        &self.sequence
    }

    fn slice(&self, shard: &Shard) -> Result<ModelPlan, String> {
        let mut plan = self.clone();
        plan.total = shard.share(plan.total);
        shard.need("payloads (total)", plan.total)?;
        plan.initial_workers = shard.share_u32(plan.initial_workers);
        shard.need("initial workers", u64::from(plan.initial_workers))?;
        plan.max_workers = shard.share_u32(plan.max_workers).max(plan.initial_workers);
        plan.buffer = (shard.share(plan.buffer as u64) as usize).max(1);
        Ok(ModelPlan::ProducerBuffer(plan))
    }

    fn drive<'a>(&self, pool: &'a mut WorkerPool, context: DriveContext) -> Driving<'a> {
        let model = ProducerBuffer {
            plan: self.clone(),
            fields: context.fields,
            think_time: context.think_time,
            stop: context.stop,
            announce: context.announce,
        };
        Box::pin(model.drive(pool))
    }
}

/// The model, ready to drive.
pub struct ProducerBuffer {
    pub plan: ProducerBufferPlan,
    pub fields: Fields,
    pub think_time: Duration,
    pub stop: StopSignal,
    pub announce: Announcer,
}

/// Aborts the producer task when the model is done or dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Model for ProducerBuffer {
    async fn drive(self, pool: &mut WorkerPool) {
        let plan = &self.plan;
        let (tx, rx) = flume::bounded::<Work>(plan.buffer);
        let (fields, sequence, total) = (self.fields.clone(), plan.sequence.clone(), plan.total);
        let depth = pool.live().clone();
        let depth_rx = rx.clone();
        let _producer = AbortOnDrop(tokio::spawn(async move {
            let mut rng = fastrand::Rng::new();
            for i in 0..total {
                let op = sequence[(i % sequence.len() as u64) as usize];
                let mut work = Work::new(op, 0);
                work.values = Some(fields.draw(&mut rng).into());
                work.produced = Some(Instant::now());
                if tx.send_async(work).await.is_err() {
                    return;
                }
                depth
                    .buffer_depth
                    .store(depth_rx.len() as i64, Ordering::Relaxed);
            }
        }));
        let live = pool.live().clone();
        let consumer = |phase: u16, quota: Option<u64>| Consumer {
            rx: rx.clone(),
            live: live.clone(),
            phase,
            quota,
            taken: 0,
            retries: plan.retries,
            backoff: plan.backoff,
            retry: None,
            think_time: self.think_time,
            stop: self.stop.clone(),
        };
        let started = Instant::now();
        (self.announce)(format!(
            "producer: {} into a buffer of {}; {} × {}",
            crate::units::count(plan.total, "payload"),
            plan.buffer,
            crate::units::count(plan.initial_workers, "consumer"),
            crate::units::count(plan.requests_per_worker, "request")
        ));
        for _ in 0..plan.initial_workers {
            pool.spawn(0, consumer(0, Some(plan.requests_per_worker)));
        }
        let mut grown = false;
        while let Some(_done) = pool.next_done().await {
            let drained = rx.is_disconnected() && rx.is_empty();
            if drained || self.stop.is_draining() {
                continue;
            }
            let running = pool.running() as u32;
            let add = plan.max_workers.saturating_sub(running);
            if !grown {
                grown = true;
                (self.announce)(format!(
                    "first consumer finished at +{:.2} s: pool grows to {} consumers",
                    started.elapsed().as_secs_f64(),
                    running + add
                ));
            }
            for _ in 0..add {
                pool.spawn(1, consumer(1, None));
            }
        }
        (self.announce)(format!(
            "buffer drained after {:.2} s",
            started.elapsed().as_secs_f64()
        ));
    }
}

/// One consumer: takes payloads from the buffer and retries the ones that fail.
struct Consumer {
    rx: flume::Receiver<Work>,
    live: Arc<LiveCounters>,
    phase: u16,
    /// Payloads this consumer takes from the buffer; `None` until the buffer is drained.
    quota: Option<u64>,
    taken: u64,
    retries: u8,
    backoff: Duration,
    retry: Option<Work>,
    think_time: Duration,
    stop: StopSignal,
}

impl WorkSource for Consumer {
    async fn next(&mut self) -> Option<Work> {
        if let Some(mut retry) = self.retry.take() {
            let wait = self.backoff * u32::from(retry.attempt - 1);
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.stop.draining() => return None,
            }
            (retry.queue_wait_ns, retry.buffer_wait_ns) = (None, None);
            return Some(retry);
        }
        if self.stop.is_draining() || self.quota.is_some_and(|q| self.taken >= q) {
            return None;
        }
        if self.taken > 0 && !self.think_time.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(self.think_time) => {}
                _ = self.stop.draining() => return None,
            }
        }
        let waiting = Instant::now();
        let mut work = tokio::select! {
            work = self.rx.recv_async() => work.ok()?,
            _ = self.stop.draining() => return None,
        };
        self.taken += 1;
        self.live
            .buffer_depth
            .store(self.rx.len() as i64, Ordering::Relaxed);
        work.phase = self.phase;
        let taken = Instant::now();
        work.queue_wait_ns = Some(nanos(taken - waiting));
        work.buffer_wait_ns = work
            .produced
            .map(|p| nanos(taken.saturating_duration_since(p)));
        Some(work)
    }

    fn finished(&mut self, work: &Work, failed: bool) {
        if failed && work.attempt <= self.retries {
            let mut retry = work.clone();
            retry.attempt += 1;
            self.retry = Some(retry);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every worker holds its task's state for as long as it runs (issue 46).
    #[test]
    fn worker_task_stays_small() {
        crate::worker::assert_task_small::<Consumer>();
    }
}
