//! A latency histogram that costs what its samples need: the buckets of the summary's HDR
//! histogram (1 ns to an hour, 3 significant digits), but held as a sorted list of the
//! buckets that have counts until that list would grow past [`SPARSE_MAX_BUCKETS`], and only
//! then as a full HDR histogram (grown to the largest value seen).
//!
//! A full histogram over the summary's range is ~270 KB of counters; an op of a vegeta
//! targets file with a few hundred lines may see a handful of requests, so one per op made
//! memory grow with the targets, not with the samples (issue 45, finding 12). An op with `k`
//! distinct buckets costs `16·k` bytes here. The figures are the same either way: each
//! sample lands in the bucket the HDR histogram would put it in, and every figure is read
//! from an HDR histogram holding those counts ([`OpHistogram::histogram`]), so min, max,
//! mean and every percentile are `hdrhistogram`'s own.

use std::borrow::Cow;

use hdrhistogram::Histogram;

use super::{LiveLatency, MAX_TRACKED_NS};

/// Distinct buckets kept as a list before the histogram becomes a full HDR one: 16 KB of
/// list at most, an op with fewer samples than this never costs more than its samples.
pub const SPARSE_MAX_BUCKETS: usize = 1024;

/// Latencies in ns (each already clamped into the summary's range), sparse while few; on the
/// wire (a spread run's hand-over) its buckets with counts, as (HDR counts index, count).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(into = "Vec<(u32, u64)>", from = "Vec<(u32, u64)>")]
pub struct OpHistogram {
    repr: Repr,
}

#[derive(Debug, Clone)]
enum Repr {
    /// (HDR counts index, count), sorted by index, no zero counts.
    Sparse(Vec<(u32, u64)>),
    Dense(Box<Histogram<u64>>),
}

impl Default for OpHistogram {
    fn default() -> Self {
        OpHistogram {
            repr: Repr::Sparse(Vec::new()),
        }
    }
}

/// An empty HDR histogram with the summary's precision (3 significant digits from 1 ns),
/// grown as values arrive: its buckets are the full range's, only fewer of them exist.
fn growing() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits are valid")
}

impl OpHistogram {
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one latency of `ns` (1 ns to the summary's maximum; clamped into it).
    pub fn record(&mut self, ns: u64) {
        match &mut self.repr {
            Repr::Dense(h) => h
                .record(ns.clamp(1, MAX_TRACKED_NS))
                .expect("a growing histogram takes any value"),
            Repr::Sparse(list) => {
                let index = LiveLatency::index(ns) as u32;
                match list.binary_search_by_key(&index, |e| e.0) {
                    Ok(at) => list[at].1 += 1,
                    Err(at) if list.len() < SPARSE_MAX_BUCKETS => list.insert(at, (index, 1)),
                    Err(_) => {
                        let mut dense = growing();
                        add_list(list, &mut dense);
                        self.repr = Repr::Dense(Box::new(dense));
                        self.record(ns);
                    }
                }
            }
        }
    }

    /// Samples counted.
    pub fn len(&self) -> u64 {
        match &self.repr {
            Repr::Sparse(list) => list.iter().map(|e| e.1).sum(),
            Repr::Dense(h) => h.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The HDR histogram of these samples, to read figures from (built when sparse).
    pub fn histogram(&self) -> Cow<'_, Histogram<u64>> {
        match &self.repr {
            Repr::Dense(h) => Cow::Borrowed(h),
            Repr::Sparse(list) => {
                let mut h = growing();
                add_list(list, &mut h);
                Cow::Owned(h)
            }
        }
    }

    /// Adds these samples to `into`, which must grow (`Histogram::new`) or cover their range.
    pub fn add_to(&self, into: &mut Histogram<u64>) {
        match &self.repr {
            Repr::Dense(h) => into
                .add(&**h)
                .expect("a histogram with the summary's range"),
            Repr::Sparse(list) => add_list(list, into),
        }
    }

    /// The buckets that have counts, as (HDR counts index, count), sorted by index.
    pub fn buckets(&self) -> Vec<(u32, u64)> {
        match &self.repr {
            Repr::Sparse(list) => list.clone(),
            // A recorded value is its bucket's highest equivalent: the same index.
            Repr::Dense(h) => h
                .iter_recorded()
                .map(|v| {
                    let index = LiveLatency::index(v.value_iterated_to()) as u32;
                    (index, v.count_at_value())
                })
                .collect(),
        }
    }

    /// Adds `other`'s samples (another process's, in a spread run).
    pub fn merge(&mut self, other: &OpHistogram) {
        if let Repr::Dense(h) = &mut self.repr {
            other.add_to(h);
            return;
        }
        let mut merged = self.buckets();
        merged.extend(other.buckets());
        merged.sort_unstable_by_key(|&(index, _)| index);
        // One bucket per index: a later one's count goes into the one kept before it.
        merged.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
            }
            same
        });
        *self = OpHistogram::from(merged);
    }

    /// Bytes of counters this histogram holds on the heap (the list, or the HDR counts).
    pub fn heap_bytes(&self) -> usize {
        match &self.repr {
            Repr::Sparse(list) => list.capacity() * std::mem::size_of::<(u32, u64)>(),
            Repr::Dense(h) => h.distinct_values() * std::mem::size_of::<u64>(),
        }
    }
}

impl From<OpHistogram> for Vec<(u32, u64)> {
    fn from(h: OpHistogram) -> Self {
        h.buckets()
    }
}

impl From<Vec<(u32, u64)>> for OpHistogram {
    /// From buckets sorted by index, as [`OpHistogram::buckets`] gives them.
    fn from(list: Vec<(u32, u64)>) -> Self {
        let repr = match list.len() <= SPARSE_MAX_BUCKETS {
            true => Repr::Sparse(list),
            false => {
                let mut dense = growing();
                add_list(&list, &mut dense);
                Repr::Dense(Box::new(dense))
            }
        };
        OpHistogram { repr }
    }
}

fn add_list(list: &[(u32, u64)], into: &mut Histogram<u64>) {
    for &(index, count) in list {
        // A bucket's lowest value is recorded as the bucket: the same index, min and max.
        let value = LiveLatency::lower_bound(index as usize).max(1);
        into.record_n(value, count)
            .expect("a histogram with the summary's range");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two sparse histograms sharing buckets merge into the figures of one that saw both
    /// (a spread run's hand-over): shared buckets' counts are added, none is lost or doubled.
    #[test]
    fn sparse_halves_sharing_buckets_merge_into_the_whole() {
        let (mut whole, mut odd, mut even) =
            (OpHistogram::new(), OpHistogram::new(), OpHistogram::new());
        for i in 0..600u64 {
            let ns = 1_000_000 + (i % 41) * 50_000; // 41: each half sees every bucket
            whole.record(ns);
            if i % 2 == 0 { &mut even } else { &mut odd }.record(ns);
        }
        even.merge(&odd);
        assert_eq!(even.buckets(), whole.buckets());
        assert_eq!(latency(&even.histogram()), latency(&whole.histogram()));
    }

    /// What the summary reads of a histogram (`report::latency`'s figures).
    fn latency(h: &Histogram<u64>) -> (u64, f64, u64, u64, [u64; 4]) {
        let q = |q| h.value_at_quantile(q);
        (
            h.len(),
            h.mean(),
            h.min(),
            h.max(),
            [q(0.5), q(0.9), q(0.99), q(0.999)],
        )
    }

    const MAX_NS: u64 = 3_600 * 1_000_000_000;

    /// Values from 1 ns to an hour, many per magnitude, in a scrambled order.
    fn samples(n: usize) -> Vec<u64> {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let magnitude = state % 42;
                (1u64 << magnitude)
                    .saturating_add(state >> 40)
                    .clamp(1, MAX_NS)
            })
            .collect()
    }

    fn today(values: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, MAX_NS, 3).unwrap();
        for &v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn the_summarys_figures_are_those_of_the_full_histogram_sparse_or_dense() {
        for n in [1, 7, 300, SPARSE_MAX_BUCKETS - 1, 5_000, 40_000] {
            let values = samples(n);
            let mut op = OpHistogram::new();
            values.iter().for_each(|&v| op.record(v));
            let full = today(&values);
            assert_eq!(latency(&op.histogram()), latency(&full), "{n} samples");
            assert_eq!(op.len(), n as u64);
            for q in [0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
                assert_eq!(
                    op.histogram().value_at_quantile(q),
                    full.value_at_quantile(q),
                    "{n} samples, q {q}"
                );
            }
            let mut merged = growing();
            op.add_to(&mut merged);
            op.add_to(&mut merged);
            let mut twice = full.clone();
            twice.add(&full).unwrap();
            assert_eq!(latency(&merged), latency(&twice), "{n} samples merged");
        }
    }

    #[test]
    fn an_op_with_few_samples_costs_a_few_kb_not_a_full_histogram() {
        let full = today(&[]).distinct_values() * 8;
        assert!(full > 200_000, "a full histogram is {full} bytes");
        let mut op = OpHistogram::new();
        assert_eq!(op.heap_bytes(), 0);
        for v in samples(100) {
            op.record(v);
        }
        assert!(op.heap_bytes() <= 4 * 1024, "{} bytes", op.heap_bytes());
        // Many samples in few buckets stay a list.
        for _ in 0..100_000 {
            op.record(12_345_678);
        }
        assert!(op.heap_bytes() <= 4 * 1024, "{} bytes", op.heap_bytes());
        // Past the list's limit it is one growing HDR histogram, no larger than today's.
        let mut busy = OpHistogram::new();
        samples(40_000).into_iter().for_each(|v| busy.record(v));
        assert!(busy.heap_bytes() > SPARSE_MAX_BUCKETS * 16);
        assert!(busy.heap_bytes() <= full, "{} bytes", busy.heap_bytes());
    }
}
