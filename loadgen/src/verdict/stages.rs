//! A closed ramp's stages (`--ramp`'s `stage1`, `stage2`, …) read as the levels of a sweep:
//! the stage with the most workers against the one with the fewest. By Little's Law
//! (N = X × R) workers that were served raise throughput; workers that waited raise latency
//! instead. With at least `queueing_latency_ratio` times the workers, the busier stage's
//! median at least that many times the quieter stage's says requests queued at the server; at
//! most `no_queue_latency_ratio` times, nothing queued — the same rule ([`super::queueing`]'s
//! `classify`) as one level's median against its fastest, the quieter stage's median standing
//! for the no-queue time. Read only for one kind of request, busy workers in both stages, and
//! a quieter stage that kept the server at least `min_served_at_once` busy. It decides
//! nothing itself: [`super::decide()`] turns a ramp that could not tell
//! (`inconclusive.one_level`) into a weak cause with it (issue 61: a second stage with 4× the
//! first's latency at the same throughput was "inconclusive").

use super::checks::worker_shares;
use super::findings::Numbers;
use super::queueing::{classify, Queue};
use super::rule::T;
use crate::report::RunSummary;
use crate::units::duration;

/// One stage as the rule reads it.
#[derive(Debug, Clone)]
pub struct Stage {
    pub name: String,
    /// Workers alive on average over the stage.
    pub workers: f64,
    pub rps: f64,
    pub median_ns: f64,
}

/// The quieter and the busier stage, and what they say.
#[derive(Debug, Clone)]
pub struct StagesFact {
    pub low: Stage,
    pub high: Stage,
    pub queue: Queue,
}

/// Whether `name` is one of `--ramp`'s stages.
fn is_stage(name: &str) -> bool {
    name.strip_prefix("stage")
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The stages of a closed ramp of one kind of request, when two or more had busy workers.
pub fn across_stages(summary: &RunSummary, numbers: &mut Numbers) -> Option<StagesFact> {
    if summary.ops.len() != 1 {
        return None;
    }
    let workers = summary.workers.as_ref()?;
    let mut stages: Vec<Stage> = workers
        .phases
        .iter()
        .filter(|p| is_stage(&p.phase) && worker_shares(p).busy())
        .filter_map(|p| {
            let span_ns = (p.last_ended_ns - p.first_started_ns).max(1) as f64;
            let phase = summary.phases.iter().find(|s| s.phase == p.phase)?;
            let median_ns = phase.latency.as_ref()?.p50_ns as f64;
            Some(Stage {
                name: p.phase.clone(),
                workers: p.alive_ns as f64 / span_ns,
                rps: phase.throughput_rps,
                median_ns,
            })
        })
        .filter(|s| s.workers > 0.0 && s.median_ns > 0.0)
        .collect();
    if stages.len() < 2 {
        return None;
    }
    stages.sort_by(|a, b| a.workers.total_cmp(&b.workers));
    let (low, high) = (stages[0].clone(), stages[stages.len() - 1].clone());
    let worker_ratio = high.workers / low.workers;
    let latency_ratio = high.median_ns / low.median_ns;
    let served_at_once = low.rps * low.median_ns / 1e9;
    numbers.insert("stages_worker_ratio", worker_ratio);
    numbers.insert("stages_latency_ratio", latency_ratio);
    let queue = match worker_ratio >= T.queueing_latency_ratio {
        true => classify(latency_ratio, served_at_once),
        false => Queue::CannotTell,
    };
    Some(StagesFact { low, high, queue })
}

impl StagesFact {
    /// The verdict's sentence when this fact decides (weakly).
    pub fn decided(&self) -> String {
        let (low, high) = (&self.low, &self.high);
        let numbers = format!(
            "{} had {:.1} workers, median {} at {:.0} req/s; {} had {:.1}× the workers and \
             {:.1}× the median ({}) at {:.0} req/s",
            low.name,
            low.workers,
            duration(low.median_ns),
            low.rps,
            high.name,
            high.workers / low.workers,
            high.median_ns / low.median_ns,
            duration(high.median_ns),
            high.rps
        );
        match self.queue {
            Queue::Waited => format!(
                "requests waited at the server across the ramp's stages — {numbers}: the added \
                 workers waited rather than being served; a sweep or --server-metrics confirms it"
            ),
            _ => format!(
                "nothing queued at the server across the ramp's stages — {numbers}: the added \
                 workers were served; likely the connections set the pace"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{LatencySummary, OpSummary, PhaseSummary, PhaseWorkers, WorkersSummary};

    const S: i64 = 1_000_000_000;

    fn ramp(stages: &[(f64, f64, f64)]) -> RunSummary {
        let latency = |median_ms: f64| LatencySummary {
            count: 1000,
            mean_ns: median_ms * 1e6,
            min_ns: 1_000_000,
            p50_ns: (median_ms * 1e6) as u64,
            p90_ns: (median_ms * 1e6) as u64,
            p99_ns: (median_ms * 1e6) as u64,
            p999_ns: (median_ms * 1e6) as u64,
            max_ns: (median_ms * 1e6) as u64,
        };
        let phases: Vec<PhaseWorkers> = (stages.iter().enumerate())
            .map(|(i, &(workers, _, _))| PhaseWorkers {
                phase: format!("stage{}", i + 1),
                started: workers as u64,
                first_started_ns: 0,
                last_ended_ns: 10 * S,
                alive_ns: (workers * 10.0 * S as f64) as i64,
                busy_ns: (workers * 9.9 * S as f64) as i64,
                waiting_ns: 0,
                sent: 1000,
            })
            .collect();
        RunSummary {
            ops: vec![OpSummary {
                op: "get".into(),
                requests: 1000,
                failed: 0,
                errors: Default::default(),
                skipped: 0,
                throughput_rps: 400.0,
                latency: Some(latency(10.0)),
                uncorrected_latency: None,
            }],
            phases: (stages.iter().enumerate())
                .map(|(i, &(workers, rps, median_ms))| PhaseSummary {
                    phase: format!("stage{}", i + 1),
                    workers: workers as usize,
                    requests: 1000,
                    failed: 0,
                    wall_time_ns: 10 * S,
                    throughput_rps: rps,
                    latency: Some(latency(median_ms)),
                    op_mean_latency_ns: Default::default(),
                })
                .collect(),
            workers: Some(WorkersSummary {
                phases,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Issue 61's ramp: 4× the workers, 4× the median at the same throughput — queued; 4×
    /// the workers served at 4× the throughput — nothing queued; too few more workers — says
    /// nothing.
    #[test]
    fn a_ramps_stages_tell_queueing_as_a_sweeps_levels_do() {
        let mut numbers = Numbers::new();
        let queued = across_stages(
            &ramp(&[(8.0, 400.0, 20.0), (32.0, 402.0, 80.0)]),
            &mut numbers,
        );
        let queued = queued.unwrap();
        assert_eq!(queued.queue, Queue::Waited);
        assert!(queued
            .decided()
            .contains("stage2 had 4.0× the workers and 4.0× the median"));
        assert_eq!(numbers["stages_latency_ratio"], 4.0);
        let served = ramp(&[(8.0, 400.0, 20.0), (32.0, 1590.0, 20.1)]);
        assert_eq!(
            across_stages(&served, &mut numbers).unwrap().queue,
            Queue::NoWait
        );
        let close = ramp(&[(8.0, 400.0, 20.0), (12.0, 400.0, 30.0)]);
        assert_eq!(
            across_stages(&close, &mut numbers).unwrap().queue,
            Queue::CannotTell
        );
        assert!(across_stages(&ramp(&[(8.0, 400.0, 20.0)]), &mut numbers).is_none());
    }

    /// The judge: a ramp whose busier stage queued is the server's, weakly, not inconclusive.
    #[test]
    fn the_judge_says_a_queued_ramp_is_the_servers() {
        let summary = ramp(&[(8.0, 400.0, 20.0), (32.0, 402.0, 80.0)]);
        let latency_ns: u128 = 1000 * 10_000_000;
        let components = crate::stats::Components {
            responses: 1000,
            latency_ns,
            ttfb_ns: latency_ns,
            with_send: 1000,
            ..Default::default()
        };
        let v = super::super::decide(super::super::Facts {
            summary: &summary,
            components: &components,
            client: None,
            streams: false,
            open: None,
            server: None,
            level: None,
            decided_by: "test",
            probe_r1_ns: None,
        });
        assert_eq!(
            (v.rule.name(), v.strength),
            ("server.queueing", super::super::Strength::Weak),
            "{}",
            v.summary
        );
        assert!(
            v.summary.contains("across the ramp's stages"),
            "{}",
            v.summary
        );
    }
}
