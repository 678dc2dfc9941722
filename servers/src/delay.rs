//! Precise delays for service times.
//!
//! tokio's timer wheel has millisecond ticks and fires at the first tick after the deadline,
//! so a 10 ms sleep in a busy runtime takes 10.5–12 ms: a server configured for 800 req/s
//! would serve ~700, and every Little's-Law check against it would be off. Service times are
//! the whole point of the reference server, so they are timed by one OS thread that keeps the
//! deadlines in a heap and sleeps on a channel with a timeout (futex-precise, tens of µs),
//! then wakes each waiting request. This module knows nothing of requests or knobs.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

struct Entry {
    at: Instant,
    seq: u64,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Reversed, so the max-heap pops the earliest deadline first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

fn timer() -> Option<&'static Sender<Entry>> {
    static TIMER: OnceLock<Option<Sender<Entry>>> = OnceLock::new();
    TIMER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Entry>();
            std::thread::Builder::new()
                .name("loadgen-server-timer".into())
                .spawn(move || {
                    let mut heap = BinaryHeap::new();
                    loop {
                        let now = Instant::now();
                        while heap.peek().is_some_and(|e: &Entry| e.at <= now) {
                            let entry = heap.pop().expect("peeked");
                            // The request may have gone (client disconnected): nothing to do.
                            let _ = entry.wake.send(());
                        }
                        let next = match heap.peek() {
                            Some(e) => rx.recv_timeout(e.at.saturating_duration_since(now)),
                            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                        };
                        match next {
                            Ok(entry) => heap.push(entry),
                            Err(RecvTimeoutError::Timeout) => {}
                            Err(RecvTimeoutError::Disconnected) => return,
                        }
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Waits for `duration`, to within tens of microseconds.
pub async fn sleep(duration: Duration) {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    if duration.is_zero() {
        return;
    }
    let (wake, woken) = oneshot::channel();
    let entry = Entry {
        at: Instant::now() + duration,
        seq: SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        wake,
    };
    match timer() {
        Some(timer) if timer.send(entry).is_ok() => {
            let _ = woken.await;
        }
        // No timer thread could be started: tokio's coarser timer is still a delay.
        _ => tokio::time::sleep(duration).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many concurrent delays each end after their duration, not a millisecond tick later.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn delays_are_precise() {
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                tokio::spawn(async move {
                    let wanted = Duration::from_micros(5_000 + 37 * i);
                    let started = Instant::now();
                    sleep(wanted).await;
                    started.elapsed().as_secs_f64() - wanted.as_secs_f64()
                })
            })
            .collect();
        let mut overshoot_s = Vec::new();
        for task in tasks {
            overshoot_s.push(task.await.unwrap());
        }
        assert!(overshoot_s.iter().all(|o| *o >= 0.0), "a delay ended early");
        // tokio's timer overshoots by ~0.5–2 ms; this one should not. The median, not the
        // mean: on a busy machine a few delays are late because their thread was preempted,
        // which says nothing about the timer.
        overshoot_s.sort_by(f64::total_cmp);
        let median = overshoot_s[overshoot_s.len() / 2];
        assert!(median < 0.0005, "median overshoot {:.3} ms", median * 1e3);
    }
}
