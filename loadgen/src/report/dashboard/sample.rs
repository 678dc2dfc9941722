//! One second of the dashboard: what the live counters hold now, as one JSON event.
//!
//! Read off the hot path, once a second, from the relaxed atomics the workers already bump
//! ([`LiveCounters`], [`LiveMetrics`]): no lock, no channel, nothing a worker waits for. The
//! percentiles are the summary's definition over the HDR buckets of [`LiveLatency`] (the same
//! that the progress line reads): `p*_ms` over the last second's answered requests and
//! `total_p*_ms` over every answered request so far (open model: from the intended send, as
//! the summary). The client's CPU is the whole process's (with the embedded server, when the
//! run has no `--url`, that includes the server's threads), as a share of the cores.

use std::sync::atomic::Ordering;
use std::time::Instant;

use serde_json::{json, Map, Value};

use crate::record::ErrorClass;
use crate::stats::live::LiveMetrics;
use crate::stats::{LiveCounters, LiveLatency};

/// What the sampler remembers between two seconds, to turn totals into rates.
pub struct Sampler {
    started: Instant,
    last: Instant,
    last_requests: u64,
    last_latency: Vec<u64>,
    last_cpu_ns: Option<u64>,
    open: bool,
    cores: f64,
}

impl Sampler {
    /// A sampler from now, its `t_s` counted from `started` (the page's start); `open`: the
    /// run has a schedule (scheduled, dropped, late sends).
    pub fn new(live: &LiveCounters, open: bool, started: Instant) -> Self {
        let now = Instant::now();
        Sampler {
            started,
            last: now,
            last_requests: live.requests(),
            last_latency: live.latency.snapshot(),
            last_cpu_ns: process_cpu_ns(),
            open,
            cores: std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64),
        }
    }

    /// The event for the second that ends now.
    pub fn sample(&mut self, live: &LiveCounters, metrics: &LiveMetrics) -> Value {
        let now = Instant::now();
        let seconds = (now - self.last).as_secs_f64().max(1e-3);
        let requests = live.requests();
        let latency = live.latency.snapshot();
        let cpu_ns = process_cpu_ns();
        let window = |q| ms(LiveLatency::quantile(&self.last_latency, &latency, q));
        let total = |q| ms(LiveLatency::quantile(&[], &latency, q));
        let cpu = match (self.last_cpu_ns, cpu_ns) {
            (Some(before), Some(after)) => {
                json!(after.saturating_sub(before) as f64 / 1e9 / seconds / self.cores * 100.0)
            }
            _ => Value::Null,
        };
        let mut event = json!({
            "t_s": (now - self.started).as_secs_f64(),
            "requests": requests,
            "failures": live.failures(),
            "rps": requests.saturating_sub(self.last_requests) as f64 / seconds,
            "p50_ms": window(0.5),
            "p90_ms": window(0.9),
            "p99_ms": window(0.99),
            "total_p50_ms": total(0.5),
            "total_p90_ms": total(0.9),
            "total_p99_ms": total(0.99),
            "errors": errors_by_class(metrics),
            "in_flight": live.in_flight.load(Ordering::Relaxed).max(0),
            "workers": live.workers_alive.load(Ordering::Relaxed).max(0),
            "client_cpu_percent": cpu,
        });
        if self.open {
            event["scheduled"] = json!(live.scheduled.load(Ordering::Relaxed));
            event["dropped"] = json!(live.dropped.load(Ordering::Relaxed));
            event["late"] = json!(metrics.late.load(Ordering::Relaxed));
        }
        self.last = now;
        self.last_requests = requests;
        self.last_latency = latency;
        self.last_cpu_ns = cpu_ns;
        event
    }
}

/// Failed requests so far by error class, over every op; classes not seen are left out.
fn errors_by_class(metrics: &LiveMetrics) -> Map<String, Value> {
    let mut errors = Map::new();
    for (i, class) in ErrorClass::ALL.iter().enumerate() {
        let count: u64 = (metrics.ops.iter())
            .map(|op| op.outcomes[1 + i].load(Ordering::Relaxed))
            .sum();
        if count > 0 {
            errors.insert(class.as_str().to_string(), json!(count));
        }
    }
    errors
}

fn ms(ns: Option<u64>) -> Value {
    ns.map_or(Value::Null, |ns| json!(ns as f64 / 1e6))
}

/// The process's user + system CPU time so far, in ns (None where /proc cannot be read).
fn process_cpu_ns() -> Option<u64> {
    let stat = procfs::process::Process::myself().ok()?.stat().ok()?;
    let ns_per_tick = 1_000_000_000 / procfs::ticks_per_second().max(1);
    Some((stat.utime + stat.stime) * ns_per_tick)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_counts_its_requests_and_errors_by_class() {
        let live = LiveCounters::for_run(1, i64::MAX);
        let metrics = LiveMetrics::new(1, i64::MAX);
        let mut sampler = Sampler::new(&live, false, Instant::now());
        for ns in [2_000_000u64, 4_000_000, 6_000_000] {
            live.count(false);
            live.latency.record(ns);
            metrics.observe(0, None, true, ns as i64, None);
        }
        live.count(true);
        metrics.observe(0, Some(ErrorClass::Timeout), false, 0, None);
        let event = sampler.sample(&live, &metrics);
        assert_eq!(event["requests"], 4);
        assert_eq!(event["failures"], 1);
        assert_eq!(event["errors"][ErrorClass::Timeout.as_str()], 1);
        let p50 = event["p50_ms"].as_f64().unwrap();
        assert!((3.99..=4.01).contains(&p50), "p50 {p50}");
        assert!(event.get("late").is_none());
        // The next second saw nothing: no window percentiles, the totals stay.
        let next = sampler.sample(&live, &metrics);
        assert!(next["p50_ms"].is_null());
        assert_eq!(next["total_p50_ms"], event["total_p50_ms"]);
    }
}
