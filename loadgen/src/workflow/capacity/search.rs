//! The search over arrival rates, as plain state: which rate to try next, given what passed
//! and what failed. Grow ×2 from the first estimate until a level fails (or halve until one
//! passes, down to the floor `--min-rate`), then bisect between the highest passing and the
//! lowest failing rate until they are within the tolerance, then confirm the highest passing
//! rate over a longer window. A confirmation that fails moves the bracket's top down to it and
//! the search bisects on below it; when the bracket it leaves is already within the
//! tolerance, or the failure came on a busy host (or with late sends) even when measured
//! again, the rate that passed once and failed once is the noise floor of this machine and
//! service, and the search stops there rather than spend its budget on noise.
//!
//! A rate that passed is never left outside the answer: once a rate has passed and failed,
//! the interval's top is the lowest failure above it ([`Search::interval`]), so the answer
//! widens rather than bisects below a rate that passed (issue 59: 376 req/s passed, failed
//! its re-check on a busy host, and the search bisected down to "271–282 req/s, converged"
//! against a limit of ~380).
//!
//! A first estimate from a closed ramp ([`Search::from_estimate`]) is near the limit: the
//! search steps ×1.25 up or ×0.8 down from it before it doubles or halves.
//!
//! It runs nothing: the caller runs each level and records how it was judged ([`Judged`]).

use serde::Serialize;

/// Why a level was run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Growing geometrically from the first estimate.
    Grow,
    /// Halving, because no level has passed yet.
    Descend,
    /// Between the highest passing and the lowest failing rate.
    Bisect,
    /// The same rate again for longer, because an SLO's interval straddled its limit.
    Extend,
    /// The answer, over the longer confirmation window.
    Confirm,
}

/// How a level was judged, as the search takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    Passed,
    Failed,
    /// Failed on a busy host or with late sends, and again when measured again: a failure
    /// the machine may have caused.
    FailedBusy,
}

/// What to do next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Next {
    Run {
        rate_rps: f64,
        step: Step,
    },
    /// The bracket is closed and its low end confirmed (or nothing passed).
    Done,
}

#[derive(Debug, Clone)]
pub struct Search {
    start_rps: f64,
    tolerance: f64,
    min_rps: f64,
    max_rps: f64,
    passing: Vec<f64>,
    failing: Vec<f64>,
    confirmed: Option<f64>,
    /// A rate that passed once and failed once, where the search stopped.
    noisy: Option<f64>,
    /// Rates that passed and later failed (a confirmation): the answer's interval covers them.
    contradicted: Vec<f64>,
    /// Rates that failed on a busy host or with late sends ([`Judged::FailedBusy`]): they
    /// steer the search but never bound the answer's interval.
    busy_failing: Vec<f64>,
    /// The first level's rate is a closed ramp's estimate: step ×1.25 / ×0.8 from it.
    estimated: bool,
    /// The closed ramp's highest throughput: the most the server delivered with its queue
    /// full. A rate within the tolerance of it is near the edge whatever the bracket
    /// ([`Search::near_ceiling`]).
    ceiling_rps: Option<f64>,
}

/// The first step from a closed ramp's estimate: up ×1.25 when it passed, down ×0.8 when not.
const NEAR_STEP: f64 = 1.25;

/// Rates as a person writes them: whole numbers from 10 req/s, two decimals below.
pub fn round_rate(rate_rps: f64) -> f64 {
    if rate_rps >= 10.0 {
        rate_rps.round()
    } else {
        (rate_rps * 100.0).round() / 100.0
    }
}

impl Search {
    /// A search from `start_rps`, never offering less than `min_rps` or more than `max_rps`.
    pub fn new(start_rps: f64, tolerance: f64, (min_rps, max_rps): (f64, f64)) -> Self {
        Search {
            start_rps: round_rate(start_rps.clamp(min_rps, max_rps)).max(0.01),
            tolerance,
            min_rps,
            max_rps,
            passing: Vec::new(),
            failing: Vec::new(),
            confirmed: None,
            noisy: None,
            contradicted: Vec::new(),
            busy_failing: Vec::new(),
            estimated: false,
            ceiling_rps: None,
        }
    }

    /// A search from a closed ramp's estimate of the limit: it steps ×1.25 up or ×0.8 down
    /// from it before it doubles or halves.
    pub fn from_estimate(estimate_rps: f64, tolerance: f64, range: (f64, f64)) -> Self {
        Search {
            estimated: true,
            ..Search::new(estimate_rps, tolerance, range)
        }
    }

    /// The same search, knowing the closed ramp's highest throughput (req/s).
    pub fn with_ceiling(self, ceiling_rps: f64) -> Self {
        Search {
            ceiling_rps: Some(ceiling_rps),
            ..self
        }
    }

    /// Whether `rate_rps` is within the tolerance of the closed ramp's throughput: there a
    /// queue grows by a few requests a second, which a short level does not show (issue 59: 2-s
    /// levels passed 777 req/s against a server that delivered 772, and the 20-s confirmation
    /// then failed), so its level runs its full length.
    pub fn near_ceiling(&self, rate_rps: f64) -> bool {
        self.ceiling_rps
            .is_some_and(|ceiling| (rate_rps / ceiling - 1.0).abs() <= self.tolerance)
    }

    /// [low, high] of the limit as measured: the highest rate that passed (and was not
    /// disproven by a failed confirmation) and the lowest clean failure above every rate that
    /// ever passed — never a top below a rate that passed, nor one the machine may have set (a
    /// failure on a busy host); `None` where there is none.
    pub fn interval(&self) -> (Option<f64>, Option<f64>) {
        let top_passed = self.contradicted.iter().copied().reduce(f64::max);
        let high = self
            .failing
            .iter()
            .copied()
            .filter(|r| top_passed.is_none_or(|top| *r > top))
            .filter(|r| !self.busy_failing.contains(r))
            .reduce(f64::min);
        (self.highest_passing(), high)
    }

    /// The lowest failure on a busy host inside the interval: where the search would have
    /// bounded the answer had the host been quiet (the answer then names the other work).
    pub fn busy_bound(&self) -> Option<f64> {
        let (low, high) = self.interval();
        let low = low?;
        self.busy_failing
            .iter()
            .copied()
            .filter(|&r| r > low && high.is_none_or(|h| r < h))
            .reduce(f64::min)
    }

    /// The rate that passed once and failed once, when the search stopped at the noise floor.
    pub fn noisy(&self) -> Option<f64> {
        self.noisy
    }

    /// Whether nothing passed down to the floor (`--min-rate` itself failed).
    pub fn floor_failed(&self) -> bool {
        self.highest_passing().is_none()
            && self.lowest_failing().is_some_and(|lo| lo <= self.min_rps)
    }

    /// The highest rate that passed (and was not disproven by a failed confirmation).
    pub fn highest_passing(&self) -> Option<f64> {
        self.passing.iter().copied().reduce(f64::max)
    }

    /// The lowest rate that failed.
    pub fn lowest_failing(&self) -> Option<f64> {
        self.failing.iter().copied().reduce(f64::min)
    }

    /// How wide the bracket is (lowest failing / highest passing - 1); `None` before it closes.
    pub fn width(&self) -> Option<f64> {
        Some(self.lowest_failing()? / self.highest_passing()? - 1.0)
    }

    /// The confirmed answer, if the search has one.
    pub fn confirmed(&self) -> Option<f64> {
        self.confirmed
    }

    pub fn next(&self) -> Next {
        let run = |rate_rps: f64, step| Next::Run { rate_rps, step };
        match (self.highest_passing(), self.lowest_failing()) {
            (None, None) => run(self.start_rps, Step::Grow),
            (None, Some(hi)) if hi <= self.min_rps => Next::Done,
            (None, Some(hi)) => {
                let near = self.estimated && hi == self.start_rps;
                let lower = if near { hi / NEAR_STEP } else { hi / 2.0 };
                run(round_rate(lower).max(self.min_rps), Step::Descend)
            }
            (Some(lo), hi) => self.within_bracket(lo, hi),
        }
    }

    fn within_bracket(&self, lo: f64, hi: Option<f64>) -> Next {
        if self.noisy.is_some() {
            return Next::Done;
        }
        let confirm = || match self.confirmed {
            Some(rate) if rate == lo => Next::Done,
            _ => Next::Run {
                rate_rps: lo,
                step: Step::Confirm,
            },
        };
        let Some(hi) = hi else {
            if lo >= self.max_rps {
                return confirm();
            }
            let factor = if self.estimated && lo == self.start_rps {
                NEAR_STEP
            } else {
                2.0
            };
            let higher = round_rate((lo * factor).min(self.max_rps));
            return Next::Run {
                rate_rps: higher,
                step: Step::Grow,
            };
        };
        let middle = round_rate((lo + hi) / 2.0);
        if hi / lo - 1.0 <= self.tolerance || middle <= lo || middle >= hi {
            return confirm();
        }
        Next::Run {
            rate_rps: middle,
            step: Step::Bisect,
        }
    }

    /// Records how a level was judged.
    pub fn record(&mut self, rate_rps: f64, step: Step, judged: Judged) {
        match (step, judged) {
            (Step::Confirm, Judged::Passed) => self.confirmed = Some(rate_rps),
            (Step::Confirm, failed) => {
                if failed == Judged::FailedBusy {
                    self.busy_failing.push(rate_rps);
                }
                self.contradicted.push(rate_rps);
                self.passing.retain(|&r| r < rate_rps);
                self.failing.push(rate_rps);
                // A narrow bracket is the noise floor, and so is a failure the machine may
                // have caused; a wide one failed cleanly is bisected on (a limiter's bursts
                // can pass a rate above its limit once).
                let narrow = self
                    .highest_passing()
                    .is_none_or(|lo| rate_rps / lo - 1.0 <= self.tolerance);
                if narrow || failed == Judged::FailedBusy {
                    self.noisy = Some(rate_rps);
                }
            }
            (_, Judged::Passed) => self.passing.push(rate_rps),
            (_, Judged::Failed) => self.failing.push(rate_rps),
            (_, Judged::FailedBusy) => {
                self.failing.push(rate_rps);
                self.busy_failing.push(rate_rps);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judged(passed: bool) -> Judged {
        match passed {
            true => Judged::Passed,
            false => Judged::Failed,
        }
    }

    /// Runs the search against a service that passes every rate up to `capacity`.
    fn search_for(
        capacity: f64,
        start: f64,
        tolerance: f64,
        max: f64,
    ) -> (Search, Vec<(f64, Step)>) {
        let mut search = Search::new(start, tolerance, (1.0, max));
        let mut steps = Vec::new();
        while let Next::Run { rate_rps, step } = search.next() {
            steps.push((rate_rps, step));
            search.record(rate_rps, step, judged(rate_rps <= capacity));
            assert!(steps.len() < 50, "{steps:?}");
        }
        (search, steps)
    }

    #[test]
    fn grows_then_bisects_to_the_tolerance_then_confirms() {
        let (search, steps) = search_for(780.0, 99.0, 0.05, 1e5);
        let rates: Vec<f64> = steps.iter().map(|s| s.0).collect();
        assert_eq!(&rates[..4], &[99.0, 198.0, 396.0, 792.0]);
        let (lo, hi) = (
            search.highest_passing().unwrap(),
            search.lowest_failing().unwrap(),
        );
        assert!(
            lo <= 780.0 && hi > 780.0 && hi / lo - 1.0 <= 0.05,
            "{lo} {hi}"
        );
        assert_eq!(steps.last().unwrap(), &(lo, Step::Confirm));
        assert_eq!(search.confirmed(), Some(lo));
    }

    /// Issue 34: a rate-limited service far below the first estimate is found, not given up
    /// on after three halvings; "nothing met it" is said only of the floor.
    #[test]
    fn halves_until_a_level_passes_or_the_floor_fails() {
        let (search, steps) = search_for(30.0, 100.0, 0.05, 1e5);
        assert_eq!(steps[1], (50.0, Step::Descend));
        assert!(search.confirmed().unwrap() <= 30.0);
        let (search, _) = search_for(300.0, 13_181.0, 0.05, 1e5);
        let found = search.confirmed().unwrap();
        assert!((300.0 * 0.95..=300.0).contains(&found), "{found}");
        let (search, steps) = search_for(0.5, 100.0, 0.05, 1e5);
        assert_eq!(search.confirmed(), None);
        assert!(search.floor_failed());
        assert_eq!(steps.last().unwrap(), &(1.0, Step::Descend), "{steps:?}");
    }

    #[test]
    fn stops_at_the_ceiling() {
        let (search, steps) = search_for(1e9, 100.0, 0.05, 300.0);
        assert_eq!(search.confirmed(), Some(300.0));
        assert!(steps.iter().all(|s| s.0 <= 300.0));
    }

    /// Issue 44: a limiter at 300 req/s passed 306 once (its bursts) and failed its
    /// confirmation; the bracket it left, 204–306, is bisected on, not taken as the noise floor.
    #[test]
    fn a_failed_confirmation_over_a_wide_bracket_bisects_on() {
        let mut search = Search::new(100.0, 0.05, (1.0, 1e5));
        for (rate, passed) in [(204.0, true), (306.0, true), (357.0, false), (332.0, false)] {
            search.record(rate, Step::Bisect, judged(passed));
        }
        search.record(306.0, Step::Confirm, Judged::Failed);
        assert_eq!(search.noisy(), None);
        assert_eq!(
            search.next(),
            Next::Run {
                rate_rps: 255.0,
                step: Step::Bisect
            }
        );
    }

    #[test]
    fn a_failed_confirmation_is_the_noise_floor_and_ends_the_search() {
        let mut search = Search::new(100.0, 0.1, (1.0, 1e5));
        for (rate, passed) in [(100.0, true), (200.0, false), (150.0, true), (175.0, false)] {
            search.record(rate, Step::Bisect, judged(passed));
        }
        search.record(162.0, Step::Bisect, Judged::Passed);
        search.record(168.0, Step::Bisect, Judged::Failed);
        assert_eq!(
            search.next(),
            Next::Run {
                rate_rps: 162.0,
                step: Step::Confirm
            }
        );
        search.record(162.0, Step::Confirm, Judged::Failed);
        assert_eq!(search.highest_passing(), Some(150.0));
        // 162 passed once and failed once, 8 % above 150 (within the 10 % tolerance): the
        // machine's noise floor, where the search stops (issue 34) with the limit between 150
        // and 162.
        assert_eq!(search.noisy(), Some(162.0));
        assert_eq!(search.lowest_failing(), Some(162.0));
        assert_eq!(search.next(), Next::Done);
        // 162 passed once: the interval's top is the failure above it, not 162 itself.
        assert_eq!(search.interval(), (Some(150.0), Some(168.0)));
    }

    /// Issue 59: against ~380 req/s, 376 passed on the way up and failed its confirmation on
    /// a busy host; the search bisected below it to "271–282 req/s, converged". Now a
    /// confirmation that fails on a busy host ends the search at the noise floor, and the
    /// interval reaches up to the failure above the rate that passed.
    #[test]
    fn a_pass_then_a_failure_on_a_busy_host_widens_the_interval_and_stops() {
        let mut search = Search::new(94.0, 0.05, (1.0, 1e5));
        let mut steps = Vec::new();
        while let Next::Run { rate_rps, step } = search.next() {
            steps.push((rate_rps, step));
            let judged = match (step, rate_rps <= 380.0) {
                (Step::Confirm, _) => Judged::FailedBusy,
                (_, passed) => judged(passed),
            };
            search.record(rate_rps, step, judged);
            assert!(steps.len() < 20, "{steps:?}");
        }
        assert_eq!(steps.last(), Some(&(376.0, Step::Confirm)), "{steps:?}");
        assert_eq!(search.noisy(), Some(376.0));
        let (low, high) = search.interval();
        assert_eq!(low, Some(188.0));
        assert!(high.is_some_and(|h| h > 380.0), "{high:?}");
    }

    /// Issue 59's testbed: on a busy host 257 req/s failed (twice), 245 passed — against
    /// ~388. A failure on a busy host steers the search but never bounds the interval: the
    /// answer is "at least 245", the busy failure named, not "between 245 and 257".
    #[test]
    fn a_failure_on_a_busy_host_never_bounds_the_interval() {
        let mut search = Search::from_estimate(257.0, 0.05, (1.0, 1e5));
        search.record(257.0, Step::Grow, Judged::FailedBusy);
        assert_eq!(
            search.next(),
            Next::Run {
                rate_rps: 206.0,
                step: Step::Descend
            }
        );
        for rate in [206.0, 232.0, 245.0] {
            search.record(rate, Step::Bisect, Judged::Passed);
        }
        search.record(245.0, Step::Confirm, Judged::Passed);
        assert_eq!(search.next(), Next::Done);
        assert_eq!(search.interval(), (Some(245.0), None));
        assert_eq!(search.busy_bound(), Some(257.0));
        // A clean failure above it bounds it again.
        search.record(300.0, Step::Bisect, Judged::Failed);
        assert_eq!(search.interval(), (Some(245.0), Some(300.0)));
        assert_eq!(search.busy_bound(), Some(257.0));
    }

    /// A wide bracket's confirmation that failed cleanly is bisected on (issue 44), but the
    /// rate that passed stays inside the answer's interval.
    #[test]
    fn a_clean_failed_confirmation_bisects_on_but_keeps_the_rate_that_passed_inside() {
        let mut search = Search::new(100.0, 0.05, (1.0, 1e5));
        for (rate, passed) in [(204.0, true), (306.0, true), (357.0, false), (332.0, false)] {
            search.record(rate, Step::Bisect, judged(passed));
        }
        search.record(306.0, Step::Confirm, Judged::Failed);
        while let Next::Run { rate_rps, step } = search.next() {
            search.record(rate_rps, step, judged(rate_rps <= 300.0));
        }
        let (low, high) = search.interval();
        assert!(low.is_some_and(|l| (285.0..=300.0).contains(&l)), "{low:?}");
        assert_eq!(high, Some(332.0));
        assert_eq!(search.noisy(), None);
    }

    /// A closed ramp's estimate of 800 req/s: one step of ×0.8 below it, then bisection;
    /// one of ×1.25 above it when it passed.
    #[test]
    fn from_a_ramps_estimate_the_search_steps_near_it() {
        for (capacity, second) in [
            (780.0, (640.0, Step::Descend)),
            (900.0, (1000.0, Step::Grow)),
        ] {
            let mut search = Search::from_estimate(800.0, 0.05, (1.0, 1e5));
            let mut steps = Vec::new();
            while let Next::Run { rate_rps, step } = search.next() {
                steps.push((rate_rps, step));
                search.record(rate_rps, step, judged(rate_rps <= capacity));
            }
            assert_eq!(steps[1], second, "{steps:?}");
            assert!(steps.len() <= 7, "{steps:?}");
            let found = search.confirmed().unwrap();
            assert!((capacity * 0.95..=capacity).contains(&found), "{found}");
        }
    }

    /// Issue 59: a rate within the tolerance of the closed ramp's throughput is near the edge
    /// (its level runs its full length); one further off, or any without a ramp, is not.
    #[test]
    fn a_rate_within_the_tolerance_of_the_ramps_throughput_is_near_the_edge() {
        let search = Search::from_estimate(690.0, 0.05, (1.0, 1e5)).with_ceiling(766.0);
        assert!(search.near_ceiling(777.0) && search.near_ceiling(734.0));
        assert!(!search.near_ceiling(690.0) && !search.near_ceiling(863.0));
        assert!(!Search::from_estimate(690.0, 0.05, (1.0, 1e5)).near_ceiling(766.0));
    }
}
