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

use super::findings::Numbers;
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

/// What the level's median against R(1) of `--probe` says (`contract/verdict.json`'s
/// `probe_vectors`).
pub fn classify_probe(probe_latency_ratio: f64) -> Queue {
    if probe_latency_ratio >= T.probe_queueing_ratio {
        Queue::Waited
    } else if probe_latency_ratio <= T.probe_no_queue_ratio {
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
    /// `--probe` says the same as the fastest response — requests waited — and the bodies
    /// came with their headers: two independent signs, said strongly.
    pub confirmed: bool,
    /// The level's median against `--probe`'s R(1), when there was a probe.
    pub probe_latency_ratio: Option<f64>,
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
            confirmed: false,
            probe_latency_ratio: None,
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

    /// With `--probe`'s R(1) (`r1_ns`): both signs of queueing, with bodies on time, confirm
    /// it; a probe that says the opposite leaves the level unable to tell; a probe in between,
    /// or none, changes nothing. Call after [`Self::body_came_late`].
    pub fn with_probe(self, r1_ns: Option<f64>, late: bool) -> Self {
        let Some(r1_ns) = r1_ns.filter(|r| *r > 0.0) else {
            return self;
        };
        let ratio = self.median_ns / r1_ns;
        let probed = QueueFact {
            probe_latency_ratio: Some(ratio),
            ..self
        };
        match (self.queue, classify_probe(ratio)) {
            (Queue::Waited, Queue::Waited) => QueueFact {
                confirmed: !late,
                ..probed
            },
            (Queue::Waited, Queue::NoWait) | (Queue::NoWait, Queue::Waited) => QueueFact {
                queue: Queue::CannotTell,
                ..probed
            },
            _ => probed,
        }
    }

    /// The fact in a sentence: "the median response (41 ms) is 4.1× the level's fastest
    /// (10 ms) with 16 connections, and throughput × the fastest response puts about 3.9
    /// requests at the server at once (Little's Law)".
    pub fn sentence(&self) -> String {
        format!(
            "the median response ({}) is {:.1}× the level's fastest ({}) with {} connections, \
             and throughput × the fastest response puts about {:.1} requests at the server at \
             once (Little's Law)",
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
        match (
            self.queue,
            self.probe_latency_ratio.filter(|_| self.confirmed),
        ) {
            (Queue::Waited, Some(ratio)) => format!(
                "requests waited at the server — {}, and {:.1}× the median of a probe at one \
                 connection after the level: its capacity at this level; a sweep shows where \
                 it starts",
                self.sentence(),
                ratio
            ),
            (Queue::Waited, None) => format!(
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

    /// contract/verdict.json's `probe_vectors`: what the level's median against R(1) says.
    #[test]
    fn the_probe_is_told_as_the_contracts_vectors_say() {
        let contract: serde_json::Value =
            serde_json::from_str(super::super::rule::VERDICT_JSON).unwrap();
        let vectors = contract["probe_vectors"].as_array().unwrap();
        assert!(vectors.len() >= 6);
        for v in vectors {
            let queue = classify_probe(v["probe_latency_ratio"].as_f64().unwrap());
            assert_eq!(queue, expected(v), "{v}");
        }
    }

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
            assert_eq!(queue, expected(v), "{v}");
        }
    }

    /// A vector's `queue`: what the contract says the numbers tell.
    fn expected(v: &serde_json::Value) -> Queue {
        match v["queue"].as_str() {
            Some("waited") => Queue::Waited,
            Some("no_wait") => Queue::NoWait,
            None => Queue::CannotTell,
            Some(other) => panic!("unknown queue {other}"),
        }
    }
}
