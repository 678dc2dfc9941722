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

/// A timer on the async runtime that wakes at an instant to the microsecond: a Linux timerfd
/// in the runtime's own event loop.
///
/// tokio's timer has millisecond ticks, so a send paced by it starts up to a millisecond
/// late. A timerfd is exact (the kernel applies no timer slack to it) and its expiry wakes the
/// runtime's I/O driver directly, so the task waiting on it runs on the runtime's thread
/// without a second thread to wake and hand over from. (Measured against nginx at 20,000
/// req/s: a pacer thread sleeping in `nanosleep`, with its 50 µs of default timer slack, and
/// handing sends over a channel started them a median 82–89 µs late; this timer, 31–37 µs.
/// At 5,000 req/s context switches per request fell from 4.4 to 1.9.)
/// Where no timerfd can be had (out of descriptors) it falls back to tokio's timer.
pub struct PreciseTimer {
    fd: Option<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>>,
}

impl std::fmt::Debug for PreciseTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreciseTimer")
            .field("timerfd", &self.fd.is_some())
            .finish()
    }
}

impl Default for PreciseTimer {
    /// A timer on the current runtime (call from within it).
    fn default() -> Self {
        use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .map_err(std::io::Error::from)
        .and_then(|fd| {
            // Deprecated because a generic `T` may not own its descriptor; an `OwnedFd` does
            // and keeps it for the AsyncFd's lifetime, which is what the unsafe successor
            // asks the caller to promise (this workspace forbids unsafe code).
            #[allow(deprecated)]
            tokio::io::unix::AsyncFd::with_interest(fd, tokio::io::Interest::READABLE)
        });
        match fd {
            Ok(fd) => PreciseTimer { fd: Some(fd) },
            Err(e) => {
                eprintln!("warning: no precise timer ({e}); sends are paced to the millisecond");
                PreciseTimer { fd: None }
            }
        }
    }
}

impl PreciseTimer {
    /// True when the timer is exact (a timerfd), false on the millisecond fallback.
    pub fn is_precise(&self) -> bool {
        self.fd.is_some()
    }

    /// Waits until `deadline`; returns at once if it has passed.
    pub async fn sleep_until(&mut self, deadline: Instant) {
        let Some(fd) = &self.fd else {
            return tokio::time::sleep_until(deadline.into()).await;
        };
        loop {
            let now = Instant::now();
            if deadline <= now {
                return;
            }
            // Relative to `now`, so it cannot fire before `deadline`. Arming resets the
            // expiry count, so the descriptor is never read: the next expiry is a new edge
            // for the (edge-triggered) event loop.
            let wait = deadline - now;
            let spec = rustix::time::Itimerspec {
                it_interval: rustix::time::Timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                },
                it_value: rustix::time::Timespec {
                    tv_sec: wait.as_secs() as i64,
                    tv_nsec: i64::from(wait.subsec_nanos()),
                },
            };
            let armed = rustix::time::timerfd_settime(
                fd.get_ref(),
                rustix::time::TimerfdTimerFlags::empty(),
                &spec,
            );
            match (armed, fd.readable().await) {
                (Ok(_), Ok(mut guard)) => guard.clear_ready(),
                // Neither can fail on a valid timerfd; if one did, tokio's timer still works.
                _ => return tokio::time::sleep_until(deadline.into()).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_precise_timer_never_wakes_before_its_deadline() {
        let mut timer = PreciseTimer::default();
        assert!(timer.is_precise(), "Linux has timerfd");
        for wait_us in [1, 50, 300, 2_000, 0, 700] {
            let deadline = Instant::now() + Duration::from_micros(wait_us);
            timer.sleep_until(deadline).await;
            assert!(
                Instant::now() >= deadline,
                "woke before a {wait_us} µs deadline"
            );
        }
    }

    #[tokio::test]
    async fn an_abandoned_wait_does_not_end_the_next_one_early() {
        use std::future::Future;
        let mut timer = PreciseTimer::default();
        // Armed (polled once), dropped, and left to expire: the stale expiry must not end the
        // next wait before its deadline.
        {
            let abandoned = timer.sleep_until(Instant::now() + Duration::from_micros(100));
            tokio::pin!(abandoned);
            let polled =
                std::future::poll_fn(|cx| std::task::Poll::Ready(abandoned.as_mut().poll(cx)))
                    .await;
            assert!(polled.is_pending());
        }
        std::thread::sleep(Duration::from_millis(1));
        timer.sleep_until(Instant::now()).await;
        let deadline = Instant::now() + Duration::from_millis(3);
        timer.sleep_until(deadline).await;
        assert!(Instant::now() >= deadline);
    }
}
