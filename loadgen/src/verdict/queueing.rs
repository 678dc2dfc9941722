//! What one closed level's latency says about queueing at the server, against the level's own
//! fastest response: the fastest is the no-queue time (R0), the median is what a request
//! took (R). With R near R0 nothing waited — the connections set the pace; with R many times
//! R0 requests waited behind each other at the server. The fact is read from the summary's
//! exact aggregates of the judged phase, only when the run sent one kind of request (the
//! fastest of two ops says nothing of the other), and only when the fastest response is the
//! service time of the others: the server served at least `min_served_at_once` requests at a
//! time by Little's Law (X × R0) — otherwise the service time varies and the fastest was only
//! a short request. The thresholds are `contract/verdict.json`'s (`queue_vectors`). It decides
//! nothing itself: [`super::decide()`] turns one closed level that could not tell
//! (`inconclusive.one_level`) into a weak cause with it, never a strong one — one level's
//! latency cannot tell a server at exactly its parallelism from one with room.

use super::checks::Numbers;
use super::rule::T;
use crate::report::{PhaseWorkers, RunSummary};
use crate::units::duration;

/// What the level's latency against its fastest response says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// The median at least `queueing_latency_ratio` times the fastest: requests waited.
    Waited,
    /// The median at most `no_queue_latency_ratio` times the fastest: nothing waited.
    NoWait,
    /// In between, or the fastest response is not the others' service time.
    CannotTell,
}

/// The queueing rule on the two numbers (`contract/verdict.json`'s `queue_vectors`).
pub fn classify(latency_ratio: f64, served_at_once: f64) -> Queue {
    if served_at_once < T.min_served_at_once {
        Queue::CannotTell
    } else if latency_ratio >= T.queueing_latency_ratio {
        Queue::Waited
    } else if latency_ratio <= T.no_queue_latency_ratio {
        Queue::NoWait
    } else {
        Queue::CannotTell
    }
}

/// The level's fact: its fastest and median response, what the server served at once, and
/// what that says.
#[derive(Debug, Clone, Copy)]
pub struct QueueFact {
    pub fastest_ns: f64,
    pub median_ns: f64,
    pub workers: u64,
    pub served_at_once: f64,
    pub queue: Queue,
}

impl QueueFact {
    /// The judged phase's fact, when the run sent one kind of request and had responses.
    pub fn of(summary: &RunSummary, p: &PhaseWorkers, numbers: &mut Numbers) -> Option<Self> {
        if summary.ops.len() != 1 {
            return None;
        }
        let phase = summary.phases.iter().find(|s| s.phase == p.phase)?;
        let latency = phase.latency.as_ref().filter(|l| l.min_ns > 0)?;
        let (fastest_ns, median_ns) = (latency.min_ns as f64, latency.p50_ns as f64);
        let served_at_once = phase.throughput_rps * fastest_ns / 1e9;
        let latency_ratio = median_ns / fastest_ns;
        numbers.insert("fastest_latency_ns", fastest_ns);
        numbers.insert("median_latency_ns", median_ns);
        numbers.insert("latency_ratio", latency_ratio);
        numbers.insert("served_at_once", served_at_once);
        Some(QueueFact {
            fastest_ns,
            median_ns,
            workers: p.started,
            served_at_once,
            queue: classify(latency_ratio, served_at_once),
        })
    }

    /// A body the server sent late (after its headers: Nagle's algorithm, a flush) is time
    /// the server held every response: that nothing queued then does not mean the
    /// connections set the pace (the zoo's JDK pool at 16 connections, each response held
    /// ~40 ms), so no queue tells nothing.
    pub fn body_came_late(self, late: bool) -> Self {
        match (late, self.queue) {
            (true, Queue::NoWait) => QueueFact {
                queue: Queue::CannotTell,
                ..self
            },
            _ => self,
        }
    }

    /// The fact in a sentence: "the median response (41 ms) is 4.1× the level's fastest
    /// (10 ms) with 16 connections: the server served about 3.9 at a time".
    pub fn sentence(&self) -> String {
        format!(
            "the median response ({}) is {:.1}× the level's fastest ({}) with {} connections, \
             and the server served about {:.1} at a time (throughput × fastest)",
            duration(self.median_ns),
            self.median_ns / self.fastest_ns,
            duration(self.fastest_ns),
            self.workers,
            self.served_at_once
        )
    }

    /// The verdict's sentence when this fact decides (weakly); the console cuts it at its
    /// ": ", the fact first.
    pub fn decided(&self) -> String {
        match self.queue {
            Queue::Waited => format!(
                "requests waited at the server — {}: likely its capacity, which one level \
                 cannot show itself; scrape its metrics (--server-metrics) or run a sweep to \
                 confirm",
                self.sentence()
            ),
            _ => format!(
                "nothing queued at the server — {}: likely the connections set the pace; a \
                 level with more connections tells whether the server has room (at exactly \
                 its parallelism nothing queues either)",
                self.sentence()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// contract/verdict.json's `queue_vectors`: what a level's latency against its fastest
    /// response says.
    #[test]
    fn queueing_is_told_as_the_contracts_vectors_say() {
        let contract: serde_json::Value =
            serde_json::from_str(super::super::rule::VERDICT_JSON).unwrap();
        let vectors = contract["queue_vectors"].as_array().unwrap();
        assert!(vectors.len() >= 6);
        for v in vectors {
            let queue = classify(
                v["latency_ratio"].as_f64().unwrap(),
                v["served_at_once"].as_f64().unwrap(),
            );
            let expected = match v["queue"].as_str() {
                Some("waited") => Queue::Waited,
                Some("no_wait") => Queue::NoWait,
                None => Queue::CannotTell,
                Some(other) => panic!("unknown queue {other}"),
            };
            assert_eq!(queue, expected, "{v}");
        }
    }
}
