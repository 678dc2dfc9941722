//! The live progress line: elapsed time, requests, current rate, failures.
//!
//! It reads only the workers' relaxed atomics, a few times a second, so it costs the hot path
//! nothing. It draws on stderr and hides itself when stderr is not a terminal.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::model::Limit;
use crate::stats::LiveCounters;

const TICK: Duration = Duration::from_millis(250);

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
            let mut interval = tokio::time::interval(TICK);
            loop {
                interval.tick().await;
                let requests = live.requests();
                let now = Instant::now();
                let rate = (requests - last.1) as f64 / (now - last.0).as_secs_f64().max(1e-3);
                last = (now, requests);
                ticker.set_position(if unit_is_time {
                    started.elapsed().as_millis() as u64
                } else {
                    requests
                });
                ticker.set_message(format!(
                    "{requests} requests  {rate:.0} req/s  {} failed",
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
