//! The stepcounter API's memory: step totals per (user, day), and each user's latest day.
//!
//! The store is sharded by user (64 mutexes, each held for one hash-map operation) so
//! concurrent requests rarely meet, and it is capped at about a million (user, day) entries:
//! beyond that, [`StepStore::add`] keeps nothing and says so, and the handler counts the drop,
//! so a long run cannot exhaust memory. It knows nothing of HTTP or of the API's validation
//! (see `api::stepcounter`).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

const SHARDS: usize = 64;
const MAX_ENTRIES_PER_SHARD: usize = (1 << 20) / SHARDS;

#[derive(Debug, Default)]
struct Shard {
    totals: HashMap<(u64, u16), u64>,
    /// The highest day recorded per user, so `current` is one lookup, not a scan.
    latest_day: HashMap<u64, u16>,
}

#[derive(Debug)]
pub(crate) struct StepStore {
    shards: Box<[Mutex<Shard>]>,
}

impl Default for StepStore {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }
}

impl StepStore {
    fn shard(&self, user: u64) -> MutexGuard<'_, Shard> {
        // Fibonacci hashing spreads consecutive user ids over all shards; the top 6 bits
        // pick one of 64.
        let index = (user.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize;
        // Nothing panics while holding the lock, but if it did the maps are still usable.
        self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds steps; false when the entry is new and the shard is full, so nothing was kept.
    pub(crate) fn add(&self, user: u64, day: u16, steps: u64) -> bool {
        let mut shard = self.shard(user);
        let full = shard.totals.len() >= MAX_ENTRIES_PER_SHARD;
        match shard.totals.get_mut(&(user, day)) {
            Some(total) => *total = total.saturating_add(steps),
            None if full => return false,
            None => {
                shard.totals.insert((user, day), steps);
            }
        }
        let latest = shard.latest_day.entry(user).or_insert(day);
        *latest = (*latest).max(day);
        true
    }

    pub(crate) fn total(&self, user: u64, day: u16) -> u64 {
        self.shard(user)
            .totals
            .get(&(user, day))
            .copied()
            .unwrap_or(0)
    }

    pub(crate) fn current(&self, user: u64) -> Option<(u16, u64)> {
        let shard = self.shard(user);
        let day = *shard.latest_day.get(&user)?;
        Some((day, shard.totals.get(&(user, day)).copied().unwrap_or(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_up_per_day_and_current_is_the_latest_day() {
        let store = StepStore::default();
        assert_eq!(store.current(7), None);
        assert!(store.add(7, 3, 100));
        assert!(store.add(7, 3, 50));
        assert!(store.add(7, 1, 10));
        assert_eq!(store.total(7, 3), 150);
        assert_eq!(store.total(7, 1), 10);
        assert_eq!(store.total(7, 2), 0);
        assert_eq!(store.current(7), Some((3, 150)));
        assert_eq!(store.current(8), None);
    }

    #[test]
    fn a_full_shard_keeps_existing_entries_and_drops_new_ones() {
        let store = StepStore::default();
        // Same user, so the same shard: fill it with distinct (user, day) keys.
        let mut user = 1u64;
        let mut stored = 0;
        while stored < MAX_ENTRIES_PER_SHARD {
            for day in 1..=366 {
                if stored == MAX_ENTRIES_PER_SHARD {
                    break;
                }
                assert!(store.add(user, day, 1));
                stored += 1;
            }
            // Next user that lands in the same shard as user 1.
            let shard_of = |u: u64| u.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58;
            let target = shard_of(1);
            user += 1;
            while shard_of(user) != target {
                user += 1;
            }
        }
        assert!(!store.add(user, 1, 5), "the shard is full");
        assert!(store.add(1, 1, 5), "an existing entry still adds up");
        assert_eq!(store.total(1, 1), 6);
        assert_eq!(store.total(user, 1), 0);
    }
}
