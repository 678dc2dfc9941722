//! Server-side counters and their Prometheus text exposition (`GET /metrics`).
//!
//! Everything here is a fixed table of atomics, indexed by (route, status), so counting a
//! request is one atomic add and never takes a lock. This module does not decide *when* a
//! request counts (the server counts it just before handing the response to hyper, so a
//! client that has read a response always sees it counted) and does not serve HTTP.
//!
//! A faulted request ([`Fault`]) is counted once, under its fault's label in place of a
//! status (`status="reset"`, `"close_mid_body"`, `"garbage"`): the client never saw the
//! status, so `status="200"` stays the number of complete 200s a client can have read.
//!
//! `/metrics` requests are counted under `route="metrics"` in the exposition, but they are
//! not API requests: [`Metrics::requests_total`], [`Metrics::requests_with_status`] and the
//! in-flight gauge leave them out, so scraping does not disturb what a test measures.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::router::Route;
use crate::Fault;

/// Every status the server itself produces. Responses hyper generates on its own (e.g. 400
/// for an unparsable request line) never reach a handler and are not counted.
const STATUSES: [u16; 7] = [200, 201, 400, 404, 405, 413, 500];
/// After the statuses, one column so an unexpected status is still counted, as
/// `status="other"`, then one per fault.
const OTHER_COLUMN: usize = STATUSES.len();
const COLUMNS: usize = OTHER_COLUMN + 1 + Fault::ALL.len();
const ROUTES: usize = Route::ALL.len();

fn status_column(status: u16) -> usize {
    match status {
        200 => 0,
        201 => 1,
        400 => 2,
        404 => 3,
        405 => 4,
        413 => 5,
        500 => 6,
        _ => OTHER_COLUMN,
    }
}

fn fault_column(fault: Fault) -> usize {
    OTHER_COLUMN + 1 + fault.index()
}

/// The `status` label of a column.
fn column_label(column: usize) -> String {
    match STATUSES.get(column) {
        Some(status) => status.to_string(),
        None if column == OTHER_COLUMN => "other".to_owned(),
        None => Fault::ALL[column - OTHER_COLUMN - 1].label().to_owned(),
    }
}

/// Shared by every connection of one server.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    requests: [[AtomicU64; COLUMNS]; ROUTES],
    in_flight: AtomicU64,
    waiting_for_worker: AtomicU64,
    workers_busy: AtomicU64,
    /// `--workers`; 0 when unlimited (then the gauge is not exposed).
    workers_limit: AtomicU64,
    connections_open: AtomicU64,
    connections_accepted: AtomicU64,
    connections_refused: AtomicU64,
    accept_errors: AtomicU64,
    tls_handshake_errors: AtomicU64,
    stepcounter_dropped: AtomicU64,
}

impl Metrics {
    /// Counts one answered request. `Release` pairs with the `Acquire` loads below, so a
    /// reader that learned of the response by other means (a client on another thread) sees
    /// the count; on x86 and ARM this costs the same as `Relaxed`.
    pub(crate) fn count(&self, route: Route, status: u16) {
        self.requests[route.index()][status_column(status)].fetch_add(1, Ordering::Release);
    }

    /// Counts one request answered with a fault instead of its status; same ordering as
    /// [`Metrics::count`].
    pub(crate) fn count_fault(&self, route: Route, fault: Fault) {
        self.requests[route.index()][fault_column(fault)].fetch_add(1, Ordering::Release);
    }

    fn api_routes() -> impl Iterator<Item = Route> {
        Route::ALL.into_iter().filter(|r| *r != Route::Metrics)
    }

    pub(crate) fn requests_total(&self) -> u64 {
        Self::api_routes()
            .flat_map(|r| self.requests[r.index()].iter())
            .map(|c| c.load(Ordering::Acquire))
            .sum()
    }

    pub(crate) fn requests_with_status(&self, status: u16) -> u64 {
        if !STATUSES.contains(&status) {
            // The "other" column mixes statuses, so it cannot answer for any one of them.
            return 0;
        }
        let column = status_column(status);
        Self::api_routes()
            .map(|r| self.requests[r.index()][column].load(Ordering::Acquire))
            .sum()
    }

    pub(crate) fn faults_total(&self, fault: Fault) -> u64 {
        let column = fault_column(fault);
        Self::api_routes()
            .map(|r| self.requests[r.index()][column].load(Ordering::Acquire))
            .sum()
    }

    pub(crate) fn connections_refused(&self) -> u64 {
        self.connections_refused.load(Ordering::Acquire)
    }

    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Marks an API request as received; the guard marks it answered (or abandoned, when
    /// the client goes away and hyper drops the handler) when dropped.
    pub(crate) fn enter(&self) -> Gauge<'_> {
        Gauge::enter(&self.in_flight)
    }

    /// Marks a request as queued for a `--workers` permit until the guard drops.
    pub(crate) fn wait_for_worker(&self) -> Gauge<'_> {
        Gauge::enter(&self.waiting_for_worker)
    }

    /// Marks an API request as in service (past the `--workers` queue) until the guard drops.
    pub(crate) fn busy(&self) -> Gauge<'_> {
        Gauge::enter(&self.workers_busy)
    }

    /// Sets the `--workers` limit the saturation gauges are read against.
    pub(crate) fn set_workers_limit(&self, limit: u64) {
        self.workers_limit.store(limit, Ordering::Release);
    }

    pub(crate) fn connection_opened(&self) -> Gauge<'_> {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        Gauge::enter(&self.connections_open)
    }

    /// Counted before the refused socket is closed, so a client that saw the reset sees
    /// the count.
    pub(crate) fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Ordering::Release);
    }

    pub(crate) fn tls_handshake_failed(&self) {
        self.tls_handshake_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn accept_failed(&self) {
        self.accept_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stepcounter_dropped(&self) {
        self.stepcounter_dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// The Prometheus text exposition format, version 0.0.4. Only non-zero request series are
    /// listed: most (route, status) pairs never happen, and a scrape stays short.
    pub(crate) fn render(&self) -> String {
        let mut out = String::with_capacity(2048);
        out.push_str(
            "# HELP loadgen_server_requests_total Requests answered by the server, by route and status \
             (or the fault that replaced the answer: reset, close_mid_body, garbage).\n\
             # TYPE loadgen_server_requests_total counter\n",
        );
        for route in Route::ALL {
            for (column, counter) in self.requests[route.index()].iter().enumerate() {
                let value = counter.load(Ordering::Acquire);
                if value == 0 {
                    continue;
                }
                let status = column_label(column);
                // Writing to a String cannot fail.
                let _ = writeln!(
                    out,
                    "loadgen_server_requests_total{{route=\"{}\",status=\"{status}\"}} {value}",
                    route.label()
                );
            }
        }
        let gauges: [(&str, &str, &str, &AtomicU64); 8] = [
            (
                "loadgen_server_in_flight",
                "gauge",
                "API requests received and not yet answered, including those waiting for a worker.",
                &self.in_flight,
            ),
            (
                "loadgen_server_waiting_for_worker",
                "gauge",
                "API requests queued for a --workers permit.",
                &self.waiting_for_worker,
            ),
            (
                "loadgen_server_connections_open",
                "gauge",
                "Client connections currently open.",
                &self.connections_open,
            ),
            (
                "loadgen_server_connections_accepted_total",
                "counter",
                "Client connections accepted and served since start (refused ones are not).",
                &self.connections_accepted,
            ),
            (
                "loadgen_server_connections_refused_total",
                "counter",
                "Client connections reset on accept because --max-connections were open.",
                &self.connections_refused,
            ),
            (
                "loadgen_server_accept_errors_total",
                "counter",
                "Failed accept() calls, e.g. when the server ran out of file descriptors.",
                &self.accept_errors,
            ),
            (
                "loadgen_server_tls_handshake_errors_total",
                "counter",
                "TLS handshakes that failed or timed out (no request was read on them).",
                &self.tls_handshake_errors,
            ),
            (
                "loadgen_server_stepcounter_dropped_total",
                "counter",
                "Step counts answered 201 but not stored because the in-memory store was full.",
                &self.stepcounter_dropped,
            ),
        ];
        for (name, kind, help, value) in gauges {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}\n",
                value.load(Ordering::Acquire)
            );
        }
        self.render_saturation(&mut out);
        render_process_cpu(&mut out);
        out
    }

    /// The saturation gauges under the conventional names a load tool's verdict reads: busy
    /// workers against their limit, and the queue waiting for one.
    fn render_saturation(&self, out: &mut String) {
        let limit = self.workers_limit.load(Ordering::Acquire);
        let mut gauges = vec![
            (
                "loadgen_server_workers_busy",
                "API requests in service: holding a --workers permit (all past the queue when unlimited).",
                self.workers_busy.load(Ordering::Acquire),
            ),
            (
                "loadgen_server_queue_length",
                "API requests waiting for a --workers permit.",
                self.waiting_for_worker.load(Ordering::Acquire),
            ),
        ];
        if limit > 0 {
            gauges.push((
                "loadgen_server_workers_limit",
                "The --workers limit: API requests in service at once at most.",
                limit,
            ));
        }
        for (name, help, value) in gauges {
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n"
            );
        }
    }
}

/// Increments a gauge on creation and decrements it on drop, so every exit path (including a
/// handler future dropped mid-flight) gives the count back.
#[derive(Debug)]
pub(crate) struct Gauge<'a>(&'a AtomicU64);

impl<'a> Gauge<'a> {
    fn enter(gauge: &'a AtomicU64) -> Self {
        gauge.fetch_add(1, Ordering::Release);
        Gauge(gauge)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Release);
    }
}

/// `process_cpu_seconds_total`, the conventional name (Prometheus's process collector) for the
/// CPU the whole server process has used: user + system time from /proc/self/stat, in clock
/// ticks of 1/100 s (Linux's USER_HZ); nothing where /proc is not there.
fn render_process_cpu(out: &mut String) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // The command name (field 2) may hold spaces; the fields after its `)` are fixed.
    let Some(after) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
        return;
    };
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    if let (Some(user), Some(system)) = (ticks(11), ticks(12)) {
        let _ = write!(
            out,
            "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n\
             # TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {}\n",
            (user + system) as f64 / 100.0
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_leave_out_metrics_and_the_exposition_lists_what_happened() {
        let metrics = Metrics::default();
        metrics.count(Route::Root, 200);
        metrics.count(Route::Root, 200);
        metrics.count(Route::AlbumsPost, 201);
        metrics.count(Route::NotFound, 404);
        metrics.count(Route::Swipe, 418);
        metrics.count(Route::Metrics, 200);
        metrics.count_fault(Route::Root, Fault::CloseMidBody);
        assert_eq!(metrics.requests_total(), 6);
        assert_eq!(metrics.requests_with_status(200), 2);
        assert_eq!(metrics.requests_with_status(418), 0);
        assert_eq!(metrics.faults_total(Fault::CloseMidBody), 1);
        assert_eq!(metrics.faults_total(Fault::Reset), 0);

        let request = metrics.enter();
        let text = metrics.render();
        assert!(text.contains("loadgen_server_requests_total{route=\"root\",status=\"200\"} 2\n"));
        assert!(text.contains("{route=\"swipe_post\",status=\"other\"} 1\n"));
        assert!(text.contains("{route=\"metrics\",status=\"200\"} 1\n"));
        assert!(text.contains("{route=\"root\",status=\"close_mid_body\"} 1\n"));
        assert!(!text.contains("status=\"500\""));
        assert!(
            text.contains("# TYPE loadgen_server_in_flight gauge\nloadgen_server_in_flight 1\n")
        );
        drop(request);
        assert_eq!(metrics.in_flight(), 0);
    }
}

#[cfg(test)]
mod saturation_tests {
    use super::*;

    #[test]
    fn the_saturation_gauges_follow_the_guards_and_the_limit() {
        let metrics = Metrics::default();
        assert!(!metrics.render().contains("loadgen_server_workers_limit"));
        metrics.set_workers_limit(8);
        let busy = [metrics.busy(), metrics.busy()];
        let waiting = metrics.wait_for_worker();
        let text = metrics.render();
        assert!(text
            .contains("# TYPE loadgen_server_workers_busy gauge\nloadgen_server_workers_busy 2\n"));
        assert!(text.contains(
            "# TYPE loadgen_server_workers_limit gauge\nloadgen_server_workers_limit 8\n"
        ));
        assert!(text
            .contains("# TYPE loadgen_server_queue_length gauge\nloadgen_server_queue_length 1\n"));
        drop(busy);
        drop(waiting);
        let text = metrics.render();
        assert!(text.contains("loadgen_server_workers_busy 0\n"));
        assert!(text.contains("loadgen_server_queue_length 0\n"));
    }
}
