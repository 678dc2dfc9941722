//! The console's latency histogram (as oha shows one): the responses' latencies in buckets
//! whose edges grow by a constant factor from the fastest to the slowest, each with its count
//! and a bar.
//!
//! Built from the exact aggregates the summary already has (the ops' HDR histograms, the
//! latency the op table reports), never from the rows again; it only counts and draws.

use std::fmt::Write;

use hdrhistogram::Histogram;

use crate::units::duration;

/// Buckets between the fastest and the slowest response.
const BUCKETS: usize = 10;

/// Characters of the longest bar.
const BAR_WIDTH: usize = 40;

/// One bucket: responses with a latency above the previous bucket's edge up to `upper_ns`.
#[derive(Debug, Clone, PartialEq)]
pub struct Bucket {
    pub upper_ns: u64,
    pub count: u64,
}

/// The run's latency histogram: every response once.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyHistogram {
    pub buckets: Vec<Bucket>,
}

impl LatencyHistogram {
    /// The histogram of all of `ops` together; `None` when none got a response.
    pub fn from_ops<H: std::borrow::Borrow<Histogram<u64>>>(
        ops: impl IntoIterator<Item = H>,
    ) -> Option<Self> {
        let mut all: Option<Histogram<u64>> = None;
        for h in ops {
            let h = h.borrow();
            match &mut all {
                Some(merged) => merged.add(h).expect("the ops' histograms have one range"),
                None => all = Some(h.clone()),
            }
        }
        all.filter(|h| !h.is_empty()).map(|h| Self::of(&h))
    }

    /// Log buckets from `h`'s smallest to its largest value.
    fn of(h: &Histogram<u64>) -> Self {
        let (low, high) = (h.min().max(1) as f64, h.max().max(1) as f64);
        let factor = (high / low).powf(1.0 / BUCKETS as f64);
        let mut buckets: Vec<Bucket> = (1..=BUCKETS)
            .map(|i| Bucket {
                // Edges the histogram cannot tell apart are one bucket.
                upper_ns: h.highest_equivalent((low * factor.powi(i as i32)).round() as u64),
                count: 0,
            })
            .collect();
        buckets.last_mut().expect("BUCKETS > 0").upper_ns = h.max();
        buckets.dedup_by_key(|b| b.upper_ns);
        for value in h.iter_recorded() {
            let ns = h.highest_equivalent(value.value_iterated_to());
            let index = buckets
                .iter()
                .position(|b| ns <= b.upper_ns)
                .unwrap_or(buckets.len() - 1);
            buckets[index].count += value.count_at_value();
        }
        LatencyHistogram { buckets }
    }

    /// The histogram's lines, indented as the tables.
    pub fn render(&self, out: &mut String) {
        let total: u64 = self.buckets.iter().map(|b| b.count).sum();
        let _ = writeln!(
            out,
            "  Latency histogram ({total} responses, all ops; bucket edges grow by a constant factor)"
        );
        let most = self
            .buckets
            .iter()
            .map(|b| b.count)
            .max()
            .unwrap_or(0)
            .max(1);
        let edges: Vec<String> = self
            .buckets
            .iter()
            .map(|b| duration(b.upper_ns as f64))
            .collect();
        let counts: Vec<String> = self.buckets.iter().map(|b| b.count.to_string()).collect();
        let edge_width = edges.iter().map(|e| e.chars().count()).max().unwrap_or(0);
        let count_width = counts.iter().map(String::len).max().unwrap_or(0);
        for ((bucket, edge), count) in self.buckets.iter().zip(&edges).zip(&counts) {
            let bar = "■".repeat((bucket.count as usize * BAR_WIDTH).div_ceil(most as usize));
            let line = format!("    ≤ {edge:>edge_width$}  {count:>count_width$}  {bar}");
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values_ns: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 3_600_000_000_000, 3).unwrap();
        for &v in values_ns {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn every_response_falls_in_one_bucket_and_edges_grow() {
        let a = histogram(&[100_000, 120_000, 5_000_000]);
        let b = histogram(&[1_000_000, 90_000_000, 90_000_000]);
        let h = LatencyHistogram::from_ops([&a, &b]).unwrap();
        assert_eq!(h.buckets.iter().map(|b| b.count).sum::<u64>(), 6);
        assert!(h.buckets.windows(2).all(|w| w[0].upper_ns < w[1].upper_ns));
        assert_eq!(h.buckets.last().unwrap().count, 2);
        assert_eq!(h.buckets[0].count, 2, "{h:?}");
    }

    #[test]
    fn one_value_is_one_bucket_and_no_responses_is_none() {
        let h = LatencyHistogram::from_ops([&histogram(&[7_000, 7_000])]).unwrap();
        assert_eq!(h.buckets.len(), 1);
        assert_eq!(h.buckets[0].count, 2);
        assert!(LatencyHistogram::from_ops([&histogram(&[])]).is_none());
        let mut out = String::new();
        h.render(&mut out);
        assert!(out.contains("2 responses"), "{out}");
    }
}
