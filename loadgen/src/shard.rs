//! Which slice of the load this process runs (`--shard I/N`): the value, how counts are
//! shared out and how worker ids stay unique across shards. A leaf, so the CLI can parse it
//! without knowing any model; how each model's plan is cut into slices is
//! [`model::shard`](crate::model::shard).

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

    /// The global id of this shard's `local`-th worker.
    pub fn worker_id(&self, local: u32) -> u32 {
        self.index + local * self.count
    }

    pub(crate) fn share_u32(&self, total: u32) -> u32 {
        self.share(u64::from(total)) as u32
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
