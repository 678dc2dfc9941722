//! The search over arrival rates, as plain state: which rate to try next, given what passed
//! and what failed. Grow ×2 from the first estimate until a level fails (or halve until one
//! passes, down to the floor `--min-rate`), then bisect between the highest passing and the
//! lowest failing rate until they are within the tolerance, then confirm the highest passing
//! rate over a longer window. A confirmation that fails moves the bracket's top down to it and
//! the search bisects on below it; when the bracket it leaves is already within the
//! tolerance, the rate that passed once and failed once is the noise floor of this machine
//! and service: the bracket is as narrow as they allow, and the search stops there rather
//! than spend its budget on noise.
//!
//! It runs nothing: the caller runs each level and records whether it passed.

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
    /// A rate that passed once and failed once.
    noisy: Option<f64>,
}

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
        }
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

    /// The confirmed answer, if the search has one.
    pub fn confirmed(&self) -> Option<f64> {
        self.confirmed
    }

    pub fn next(&self) -> Next {
        let run = |rate_rps: f64, step| Next::Run { rate_rps, step };
        match (self.highest_passing(), self.lowest_failing()) {
            (None, None) => run(self.start_rps, Step::Grow),
            (None, Some(hi)) if hi <= self.min_rps => Next::Done,
            (None, Some(hi)) => run(round_rate(hi / 2.0).max(self.min_rps), Step::Descend),
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
            let higher = round_rate((lo * 2.0).min(self.max_rps));
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

    /// Records a level's verdict.
    pub fn record(&mut self, rate_rps: f64, step: Step, passed: bool) {
        match (step, passed) {
            (Step::Confirm, true) => self.confirmed = Some(rate_rps),
            (Step::Confirm, false) => {
                self.passing.retain(|&r| r < rate_rps);
                self.failing.push(rate_rps);
                // Only a narrow bracket is the noise floor; a wide one is bisected on (a
                // limiter's bursts can pass a rate above its limit once).
                let narrow = self
                    .highest_passing()
                    .is_none_or(|lo| rate_rps / lo - 1.0 <= self.tolerance);
                if narrow {
                    self.noisy = Some(rate_rps);
                }
            }
            (_, true) => self.passing.push(rate_rps),
            (_, false) => self.failing.push(rate_rps),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            search.record(rate_rps, step, rate_rps <= capacity);
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
            search.record(rate, Step::Bisect, passed);
        }
        search.record(306.0, Step::Confirm, false);
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
            search.record(rate, Step::Bisect, passed);
        }
        search.record(162.0, Step::Bisect, true);
        search.record(168.0, Step::Bisect, false);
        assert_eq!(
            search.next(),
            Next::Run {
                rate_rps: 162.0,
                step: Step::Confirm
            }
        );
        search.record(162.0, Step::Confirm, false);
        assert_eq!(search.highest_passing(), Some(150.0));
        // 162 passed once and failed once, 8 % above 150 (within the 10 % tolerance): the
        // machine's noise floor, where the search stops (issue 34) with the limit between 150
        // and 162.
        assert_eq!(search.noisy(), Some(162.0));
        assert_eq!(search.lowest_failing(), Some(162.0));
        assert_eq!(search.next(), Next::Done);
    }
}
