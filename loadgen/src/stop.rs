//! Stopping a run: why it ends, and the two-step stop every worker obeys.
//!
//! A run stops in two steps. *Draining*: no worker starts a new request, requests in flight
//! finish normally. *Aborting*: after the grace period (or a second Ctrl-C) requests still in
//! flight are cut off and recorded as `cancelled`. Either way every request that was started
//! becomes a row. The first reason given is the one the run reports.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::Notify;

/// Why a run ended; stored in run.json as `exit_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// Every planned request was sent (`-n`).
    Completed,
    /// The `-d` duration elapsed.
    DurationElapsed,
    /// Ctrl-C.
    Interrupted,
    /// SIGTERM.
    Terminated,
    /// The record writer failed; the run stopped because results could not be kept.
    WriterFailed,
    /// `--abort-on-fail`: a threshold was lost for good on the rows so far.
    Threshold,
}

impl ExitReason {
    /// The conventional process exit code for this reason (128 + signal number for signals).
    pub fn exit_code(self) -> i32 {
        match self {
            ExitReason::Completed | ExitReason::DurationElapsed => 0,
            ExitReason::Interrupted => 130,
            ExitReason::Terminated => 143,
            ExitReason::WriterFailed => 1,
            ExitReason::Threshold => THRESHOLD_EXIT_CODE,
        }
    }
}

/// The exit code of a run that crossed (or, with `--abort-on-fail`, lost) a threshold: k6's,
/// distinct from 1 (results not written) and 2 (bad input).
pub const THRESHOLD_EXIT_CODE: i32 = 99;

// Level 0 is running.
const DRAINING: u8 = 1;
const ABORTING: u8 = 2;

#[derive(Debug, Default)]
struct Inner {
    level: AtomicU8,
    reason: Mutex<Option<ExitReason>>,
    changed: Notify,
    /// Ctrl-C / SIGTERM received so far, and the latest one's reason: after the load, a
    /// signal still means "stop now" (the upload to S3), whatever ended the load.
    signals: std::sync::atomic::AtomicU32,
    last_signal: Mutex<Option<ExitReason>>,
}

/// Shared stop state; cheap to clone into every worker.
#[derive(Debug, Clone, Default)]
pub struct StopSignal(Arc<Inner>);

impl StopSignal {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stop starting requests. The first reason given is kept.
    pub fn drain(&self, reason: ExitReason) {
        self.0
            .reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(reason);
        self.raise(DRAINING);
    }

    /// `-d` (a closed model's duration, or a cap on any other model): drains the run with
    /// [`ExitReason::DurationElapsed`] once `after` has elapsed.
    pub fn drain_after(&self, after: std::time::Duration) -> tokio::task::JoinHandle<()> {
        let stop = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(after).await;
            stop.drain(ExitReason::DurationElapsed);
        })
    }

    /// Cut off requests in flight.
    pub fn abort(&self) {
        self.raise(ABORTING);
    }

    /// A Ctrl-C or SIGTERM (`reason`): the first drains, later ones abort; each is also
    /// remembered, for whoever waits on [`StopSignal::next_signal`].
    pub fn signal(&self, reason: ExitReason) {
        *self.0.last_signal.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason);
        let first = self.0.signals.fetch_add(1, Ordering::SeqCst) == 0;
        match first {
            true => self.drain(reason),
            false => self.abort(),
        }
    }

    /// Resolves at the first signal after this call, with its reason.
    pub async fn next_signal(&self) -> ExitReason {
        let seen = self.0.signals.load(Ordering::SeqCst);
        loop {
            let notified = self.0.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.0.signals.load(Ordering::SeqCst) != seen {
                return self
                    .0
                    .last_signal
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .unwrap_or(ExitReason::Interrupted);
            }
            notified.await;
        }
    }

    fn raise(&self, level: u8) {
        self.0.level.fetch_max(level, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }

    /// True once [`StopSignal::drain`] or [`StopSignal::abort`] was called.
    pub fn is_draining(&self) -> bool {
        self.0.level.load(Ordering::Relaxed) >= DRAINING
    }

    pub fn is_aborting(&self) -> bool {
        self.0.level.load(Ordering::Relaxed) >= ABORTING
    }

    /// The reason given first, if any.
    pub fn reason(&self) -> Option<ExitReason> {
        *self.0.reason.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Resolves once the stop level reaches `level`.
    async fn reached(&self, level: u8) {
        loop {
            let notified = self.0.changed.notified();
            tokio::pin!(notified);
            // Register before checking, so a raise between the check and the await is not missed.
            notified.as_mut().enable();
            if self.0.level.load(Ordering::SeqCst) >= level {
                return;
            }
            notified.await;
        }
    }

    /// A new signal that follows this one (for one run of several, e.g. a sweep level): it
    /// drains and aborts when this one does, but draining it does not drain this one.
    pub fn child(&self) -> StopSignal {
        let child = StopSignal::new();
        let (parent, forward) = (self.clone(), child.clone());
        tokio::spawn(async move {
            parent.draining().await;
            forward.drain(parent.reason().unwrap_or(ExitReason::Interrupted));
            parent.aborting().await;
            forward.abort();
        });
        child
    }

    /// Resolves when draining starts.
    pub async fn draining(&self) {
        self.reached(DRAINING).await
    }

    /// Resolves when in-flight requests must be cut off.
    pub async fn aborting(&self) {
        self.reached(ABORTING).await
    }
}
