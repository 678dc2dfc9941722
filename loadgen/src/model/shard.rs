//! Sharding: the I-th of N equal slices of a model, so that N loadgen processes (machines,
//! pods) started with `--shard 0/N … N-1/N` together produce exactly the load of one run.
//!
//! Counts are split with the remainder spread over the first shards, never dropped: workers of
//! the closed model, of each thread group and of each phase; the producer-buffer's total and
//! pools; a closed model's `-n` budget. The open model's rate is split, and each shard's
//! schedule is offset by its share of the gap so that the union of the shards' sends is as
//! evenly spaced as one unsharded schedule. Worker ids stay unique across shards: shard I
//! numbers its workers I, I+N, I+2N… ([`Shard::worker_id`]). This module only rewrites
//! plans; it does not coordinate processes (start them together with `--start-at`).

use super::phased::StartRule;
use super::ModelPlan;
use crate::config::Limit;

/// Which slice this process runs: `index` of `count` (0-based), as in `--shard 2/3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = String;

    /// `I/N` with 0 ≤ I < N.
    fn from_str(text: &str) -> Result<Self, String> {
        let bad = || {
            format!("--shard '{text}' is not I/N; write e.g. --shard 0/3 for the first of three shards (I counts from 0)")
        };
        let (index, count) = text.trim().split_once('/').ok_or_else(bad)?;
        let index: u32 = index.trim().parse().map_err(|_| bad())?;
        let count: u32 = count.trim().parse().map_err(|_| bad())?;
        if count == 0 {
            return Err(format!(
                "--shard {text}: N must be at least 1 (the number of shards)"
            ));
        }
        if index >= count {
            return Err(format!(
                "--shard {text}: I must be below N (shards are numbered 0 to {}); write --shard {}/{count} for the last one",
                count - 1,
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }
}

impl Shard {
    pub fn is_whole(&self) -> bool {
        self.count == 1
    }

    /// This shard's part of `total`: ⌊total / N⌋, plus one for the first `total mod N` shards.
    pub fn share(&self, total: u64) -> u64 {
        let (n, i) = (u64::from(self.count), u64::from(self.index));
        total / n + u64::from(i < total % n)
    }

    fn share_u32(&self, total: u32) -> u32 {
        self.share(u64::from(total)) as u32
    }

    /// The global id of this shard's `local`-th worker.
    pub fn worker_id(&self, local: u32) -> u32 {
        self.index + local * self.count
    }

    /// The plan of this slice; `Err` names what has nothing to do in it.
    pub fn slice(&self, plan: &ModelPlan) -> Result<ModelPlan, String> {
        if self.is_whole() {
            return Ok(plan.clone());
        }
        let need = |what: &str, n: u64| {
            if n == 0 {
                Err(format!(
                    "--shard {self}: {what} cannot be split {} ways (this slice would have none); use fewer shards or more {what}",
                    self.count
                ))
            } else {
                Ok(())
            }
        };
        let mut plan = plan.clone();
        match &mut plan {
            ModelPlan::Closed { workers, limit, .. } => {
                *workers = self.share_u32(*workers);
                need("workers", u64::from(*workers))?;
                if let Limit::Requests(n) = limit {
                    *n = self.share(*n);
                    need("requests", *n)?;
                }
            }
            ModelPlan::ThreadGroups(p) => {
                if let Some((workers, _)) = &mut p.startup {
                    *workers = self.share_u32(*workers);
                }
                p.startup = p.startup.filter(|(workers, _)| *workers > 0);
                p.group_size = self.share_u32(p.group_size);
                need("workers per group (group_size)", u64::from(p.group_size))?;
            }
            ModelPlan::ProducerBuffer(p) => {
                p.total = self.share(p.total);
                need("payloads (total)", p.total)?;
                p.initial_workers = self.share_u32(p.initial_workers);
                need("initial workers", u64::from(p.initial_workers))?;
                p.max_workers = self.share_u32(p.max_workers).max(p.initial_workers);
                p.buffer = (self.share(p.buffer as u64) as usize).max(1);
            }
            ModelPlan::Phased(p) => {
                let before: Vec<u32> = p.phases.iter().map(|ph| ph.workers).collect();
                for phase in &mut p.phases {
                    phase.workers = self.share_u32(phase.workers);
                    need(
                        &format!("workers of phase '{}'", phase.name),
                        u64::from(phase.workers),
                    )?;
                }
                // "When a fraction of phase k's workers finished" keeps its fraction.
                let after: Vec<u32> = p.phases.iter().map(|ph| ph.workers).collect();
                for phase in &mut p.phases {
                    if let StartRule::After { phase: k, finished } = &mut phase.start {
                        let fraction = f64::from(*finished) / f64::from(before[*k].max(1));
                        *finished = ((fraction * f64::from(after[*k])).ceil() as u32).max(1);
                    }
                }
            }
            ModelPlan::Open(p) => {
                let n = f64::from(self.count);
                for stage in &mut p.stages {
                    stage.from_rps /= n;
                    stage.to_rps /= n;
                }
                p.max_in_flight = self.share_u32(p.max_in_flight).max(1);
                p.offset = f64::from(self.index) / n;
                need("scheduled requests", p.scheduled())?;
            }
        }
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_spread_the_remainder() {
        for count in 1..7u32 {
            for total in [0u64, 1, 5, 7, 100, 1001] {
                let shares: Vec<u64> = (0..count)
                    .map(|index| Shard { index, count }.share(total))
                    .collect();
                assert_eq!(shares.iter().sum::<u64>(), total, "{total} over {count}");
                assert!(shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1);
            }
        }
    }

    #[test]
    fn worker_ids_never_collide() {
        let mut seen = std::collections::HashSet::new();
        for index in 0..3 {
            let shard = Shard { index, count: 3 };
            for local in 0..50 {
                assert!(seen.insert(shard.worker_id(local)));
            }
        }
    }

    #[test]
    fn bad_shards_say_how_to_write_them() {
        for (text, needle) in [
            ("3/3", "below N"),
            ("1/0", "at least 1"),
            ("two/3", "not I/N"),
            ("1", "not I/N"),
        ] {
            let err = text.parse::<Shard>().unwrap_err();
            assert!(err.contains(needle), "{text}: {err}");
        }
        assert_eq!(
            "2/3".parse::<Shard>().unwrap(),
            Shard { index: 2, count: 3 }
        );
    }
}
