//! The run's time base: one monotonic anchor instant, and its wall-clock twin.
//!
//! Every timestamp in a record is an integer offset in nanoseconds from [`Anchor::instant`]
//! (docs/architecture.md, "Hot path rules"), so rows never carry wall-clock time and never go
//! backwards. The wall-clock time of the anchor is stored once, as `loadgen.anchor_unix_ns`.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy)]
pub struct Anchor {
    pub instant: Instant,
    pub unix_ns: i64,
}

impl Anchor {
    pub fn now() -> Self {
        let instant = Instant::now();
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        Anchor { instant, unix_ns }
    }

    /// Nanoseconds from the anchor to `t` (0 for instants before it).
    pub fn offset_ns(&self, t: Instant) -> i64 {
        nanos(t.saturating_duration_since(self.instant))
    }
}

/// A duration as signed nanoseconds, the unit of every `*_ns` column.
pub fn nanos(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

/// Sleeps until `deadline`, or forever when there is none (for optional arms of `select!`).
pub async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
