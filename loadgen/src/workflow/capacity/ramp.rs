//! The search's first estimate: a short closed ramp after the calibration. Workers 1, 2, 4,
//! 8 and 16 each send a few requests, one phase after another, in one ordinary run
//! (`DIR/ramp`); by Little's Law each phase's throughput is its workers over its response
//! time, X(N) = N / R(N), and it stops growing at the knee, where the service's workers are
//! all busy. The highest successful throughput of the phases is the estimate the search starts
//! from, at [`START_SHARE`] of it ([`super::search::Search::from_estimate`]): near the limit, rather than 1 / R(1) and
//! doubling up to it (five or six levels more on a service of 8 workers).
//!
//! Each phase sends about `PHASE_S` of one worker's requests, so the ramp takes about a
//! second on a service that scales to 16 workers and at most a few seconds on one that does
//! not; a service slower than [`SLOWEST_R1`] a request is not ramped (1 / R(1) is the estimate).

use std::path::Path;
use std::time::Duration;

use crate::config::{ModelChoice, RunInputs};
use crate::runner::{run, RunError};
use crate::scenario::schema::{ModelSpec, PhaseSpec, PhasedSpec, WorkerCount};
use crate::stop::StopSignal;

/// The ramp's worker counts.
const WORKERS: [u32; 5] = [1, 2, 4, 8, 16];
/// Each worker of a phase sends about this long of requests (at R(1) a request).
const PHASE_S: f64 = 0.2;
/// Requests per worker of a phase, at least and at most.
const REQUESTS: (u64, u64) = (2, 20);
/// The first level offers this share of the ramp's estimate: the ramp's highest throughput is
/// the service's most with its queue full, and an SLO holds below it (at 100 % a short level
/// may pass before the queue has grown, and the search would start from a false pass).
pub const START_SHARE: f64 = 0.9;
/// A service slower than this a request is not ramped.
pub const SLOWEST_R1: Duration = Duration::from_millis(100);

/// Requests per worker of each phase for a service of `r1_ns` a request.
pub fn requests_per_worker(r1_ns: f64) -> u64 {
    ((PHASE_S * 1e9 / r1_ns).round() as u64).clamp(REQUESTS.0, REQUESTS.1)
}

/// The phases' highest throughput of successful responses: (requests - failed) / wall time.
pub fn estimate(phases: &[(u64, u64, i64)]) -> Option<f64> {
    phases
        .iter()
        .filter(|(_, _, wall_ns)| *wall_ns > 0)
        .map(|&(requests, failed, wall_ns)| {
            requests.saturating_sub(failed) as f64 / (wall_ns as f64 / 1e9)
        })
        .filter(|x| *x > 0.0)
        .reduce(f64::max)
}

/// Runs the ramp into `dir` and returns its estimate (`None`: no phase had a success).
pub async fn run_ramp(
    inputs: &RunInputs,
    dir: &Path,
    r1_ns: f64,
    stop: &StopSignal,
) -> Result<Option<f64>, RunError> {
    let per_worker = requests_per_worker(r1_ns);
    let phases: Vec<PhaseSpec> = WORKERS
        .iter()
        .enumerate()
        .map(|(i, &workers)| PhaseSpec {
            name: format!("workers-{workers}"),
            workers: WorkerCount::Count(workers),
            requests_per_worker: Some(per_worker),
            walk: None,
            after: i.checked_sub(1).map(|p| format!("workers-{}", WORKERS[p])),
            when_done: None,
            at: None,
            fields: Default::default(),
        })
        .collect();
    let model = ModelChoice::Spec(ModelSpec::Phased(PhasedSpec {
        max_workers: WORKERS[WORKERS.len() - 1],
        phases,
        ..Default::default()
    }));
    let mut config = inputs.config(model, Some(dir))?;
    // One line for the ramp (the caller's), not one per phase.
    (config.output.progress, config.output.json) = (false, true);
    let outcome = run(config, stop.child()).await?;
    let phases: Vec<(u64, u64, i64)> = outcome
        .summary
        .phases
        .iter()
        .map(|p| (p.requests, p.failed, p.wall_time_ns))
        .collect();
    Ok(estimate(&phases))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_sends_about_a_fifth_of_a_second_of_requests() {
        assert_eq!(requests_per_worker(10e6), 20);
        assert_eq!(requests_per_worker(50e6), 4);
        assert_eq!(requests_per_worker(100e6), 2);
        assert_eq!(requests_per_worker(1e3), 20);
    }

    /// 8 workers of 10 ms: 100, 200, 400, 790, 795 req/s; failures do not count.
    #[test]
    fn the_estimate_is_the_highest_successful_throughput() {
        let ms = 1_000_000;
        let phases = [
            (20, 0, 200 * ms),
            (40, 0, 200 * ms),
            (80, 0, 200 * ms),
            (160, 2, 200 * ms),
            (320, 160, 200 * ms),
        ];
        assert_eq!(estimate(&phases), Some(800.0));
        assert_eq!(estimate(&[(10, 10, ms)]), None);
        assert_eq!(estimate(&[]), None);
    }
}
