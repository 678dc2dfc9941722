//! The live progress line: elapsed time, requests, current rate, p50/p99 of the last second,
//! failures, and the time remaining where the model knows its end (as oha and k6 show).
//!
//! It reads only the workers' relaxed atomics, a few times a second, so it costs the hot path
//! nothing but one increment per request. Its percentiles are those of the last second's
//! answered requests, by the summary's own definition (the same HDR buckets and quantile,
//! [`crate::stats::LiveLatency`]), so a live p50 is never below the run's minimum. It draws on
//! stderr and hides itself when stderr is not a terminal.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::model::Limit;
use crate::stats::{LiveCounters, LiveLatency};

const TICK: Duration = Duration::from_millis(250);
/// The live percentiles cover the requests answered in the last this many ticks (1 s).
const WINDOW_TICKS: usize = 4;

/// A running progress line; [`Progress::finish`] clears it.
pub struct Progress {
    bar: ProgressBar,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Progress {
    /// Starts drawing unless `enabled` is false or stderr is not a terminal.
    pub fn start(enabled: bool, limit: Limit, live: Arc<LiveCounters>) -> Self {
        if !enabled || !std::io::stderr().is_terminal() {
            return Progress {
                bar: ProgressBar::hidden(),
                task: None,
            };
        }
        let (length, unit_is_time) = match limit {
            Limit::Duration(d) => (d.as_millis() as u64, true),
            Limit::Requests(n) => (n, false),
        };
        let bar = ProgressBar::with_draw_target(Some(length), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed:>4} [{bar:24}] {msg}")
                .expect("static template")
                .progress_chars("=> "),
        );
        let ticker = bar.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut last = (Instant::now(), 0u64);
            let mut window = std::collections::VecDeque::from([live.latency.snapshot()]);
            let mut interval = tokio::time::interval(TICK);
            loop {
                interval.tick().await;
                let requests = live.requests();
                let now = Instant::now();
                let rate = (requests - last.1) as f64 / (now - last.0).as_secs_f64().max(1e-3);
                last = (now, requests);
                window.push_back(live.latency.snapshot());
                if window.len() > WINDOW_TICKS + 1 {
                    window.pop_front();
                }
                ticker.set_position(if unit_is_time {
                    started.elapsed().as_millis() as u64
                } else {
                    requests
                });
                let latency = live_percentiles(&window[0], &window[window.len() - 1]);
                let left = remaining(limit, started.elapsed(), requests, rate);
                ticker.set_message(format!(
                    "{requests} requests  {rate:.0} req/s  {latency}  {} failed{left}",
                    live.failures()
                ));
            }
        });
        Progress {
            bar,
            task: Some(task),
        }
    }

    /// Prints model messages (phase starts and ends) above the bar, or on stderr when there
    /// is no bar; nothing when `enabled` is false (`--json`).
    pub fn announcer(&self, enabled: bool) -> crate::model::Announcer {
        let bar = self.bar.clone();
        let drawing = self.task.is_some();
        Arc::new(move |message: String| {
            if drawing {
                bar.println(format!("  {message}"));
            } else if enabled {
                eprintln!("  {message}");
            }
        })
    }

    pub fn finish(self) {
        if let Some(task) = self.task {
            task.abort();
        }
        self.bar.finish_and_clear();
    }
}

/// `p50 2.10ms p99 8.39ms` over the window between two snapshots; dashes when nothing was
/// answered in it.
fn live_percentiles(earlier: &[u64], later: &[u64]) -> String {
    let show = |q| {
        LiveLatency::quantile(earlier, later, q)
            .map_or_else(|| "—".to_string(), |ns| crate::units::duration(ns as f64))
    };
    format!("p50 {} p99 {}", show(0.5), show(0.99))
}

/// `  12s left`: what remains of a duration, or of a request count at the current rate.
fn remaining(limit: Limit, elapsed: Duration, requests: u64, rate: f64) -> String {
    let seconds = match limit {
        Limit::Duration(d) => d.saturating_sub(elapsed).as_secs_f64(),
        Limit::Requests(n) if rate > 0.0 => n.saturating_sub(requests) as f64 / rate,
        Limit::Requests(_) => return String::new(),
    };
    format!("  {seconds:.0}s left")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_percentiles_are_the_windows_by_the_summarys_definition() {
        let latency = LiveLatency::default();
        latency.record(1_000_000);
        let before = latency.snapshot();
        // The run: every latency between 13.20 and 16.17 ms; the live p50 was 12.58.
        let mut exact =
            hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        let mut ns = 13_200_000u64;
        while ns <= 16_170_000 {
            latency.record(ns);
            exact.record(ns).unwrap();
            ns += 7_919;
        }
        let after = latency.snapshot();
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let live = LiveLatency::quantile(&before, &after, q).unwrap();
            assert_eq!(live, exact.value_at_quantile(q), "q {q}");
            if q >= 0.5 {
                assert!(live >= 13_200_000, "q {q}: {live} below the minimum");
            }
        }
        assert_eq!(LiveLatency::quantile(&after, &after, 0.5), None);
        assert_eq!(live_percentiles(&after, &after), "p50 — p99 —");
    }

    #[test]
    fn the_live_buckets_are_the_summarys() {
        let exact =
            hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        let mut v = 1u64;
        while v < 3_600_000_000_000 {
            for x in [v, v + 1, v * 3 / 2, v * 2 - 1]
                .into_iter()
                .filter(|&x| x <= 3_600_000_000_000)
            {
                let index = LiveLatency::index(x);
                assert_eq!(
                    LiveLatency::lower_bound(index),
                    exact.lowest_equivalent(x),
                    "{x}"
                );
            }
            v *= 2;
        }
    }

    #[test]
    fn time_left_is_the_duration_left_or_the_requests_left_at_the_rate() {
        let d = Limit::Duration(Duration::from_secs(30));
        assert_eq!(remaining(d, Duration::from_secs(12), 0, 0.0), "  18s left");
        let n = Limit::Requests(1000);
        assert_eq!(remaining(n, Duration::ZERO, 600, 100.0), "  4s left");
        assert_eq!(remaining(n, Duration::ZERO, 0, 0.0), "");
    }
}
