//! The `--service-time` knob: how long the server pretends to work on each API request.
//!
//! This module owns the distribution (zero, fixed, exponential, uniform), its text form
//! (`FromStr`/`Display`, so flags and scenario files say the same thing) and sampling. It does
//! not sleep and does not know which requests the delay applies to; the server decides that.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The accepted text forms, quoted in every parse error so the user sees the fix.
const ACCEPTED_FORMS: &str =
    "expected `0`, a fixed duration like `5ms`, `exp:5ms` (exponential with that mean) or `uniform:2ms..8ms`";

/// How long each API request is held before it is answered.
///
/// A fixed or random *service time* gives the server a known capacity: with `--workers N`
/// and mean service time `S`, it cannot answer more than `N / S` requests per second, which
/// is what the load generator's Little's Law checks compare against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ServiceTime {
    /// Answer as soon as the request is handled.
    #[default]
    Zero,
    /// Always the same duration.
    Fixed(Duration),
    /// Exponentially distributed with this mean (memoryless, like an M/M/c server).
    Exponential { mean: Duration },
    /// Uniformly distributed in `min..=max`.
    Uniform { min: Duration, max: Duration },
}

/// A `--service-time` value that is none of the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid service time {input:?}: {reason}; {ACCEPTED_FORMS}")]
pub struct ParseServiceTimeError {
    input: String,
    reason: String,
}

impl ParseServiceTimeError {
    fn new(input: &str, reason: impl Into<String>) -> Self {
        Self {
            input: input.to_owned(),
            reason: reason.into(),
        }
    }
}

impl ServiceTime {
    /// True when requests are not delayed at all, so the server can skip the timer entirely.
    pub fn is_zero(&self) -> bool {
        match *self {
            ServiceTime::Zero => true,
            ServiceTime::Fixed(d) | ServiceTime::Exponential { mean: d } => d.is_zero(),
            ServiceTime::Uniform { max, .. } => max.is_zero(),
        }
    }

    /// The expected service time, for capacity arithmetic (`workers / mean`).
    pub fn mean(&self) -> Duration {
        match *self {
            ServiceTime::Zero => Duration::ZERO,
            ServiceTime::Fixed(d) | ServiceTime::Exponential { mean: d } => d,
            ServiceTime::Uniform { min, max } => min + (max - min) / 2,
        }
    }

    /// The service time at quantile `q` of the distribution (the inverse CDF), `q` in `[0, 1)`.
    ///
    /// Sampling is `quantile(uniform random)`; exposing the deterministic half lets tests
    /// check the distribution exactly instead of statistically.
    pub fn quantile(&self, q: f64) -> Duration {
        let q = q.clamp(0.0, 1.0);
        match *self {
            ServiceTime::Zero => Duration::ZERO,
            ServiceTime::Fixed(d) => d,
            ServiceTime::Exponential { mean } => {
                // -ln(1 - q) is finite for every q < 1; q = 1 only arrives through the clamp
                // above, and an infinite sleep would hang the request, so cap the tail.
                let factor = (-(1.0 - q).ln()).min(50.0);
                mean.mul_f64(factor)
            }
            ServiceTime::Uniform { min, max } => min + (max - min).mul_f64(q),
        }
    }

    /// One random service time.
    pub fn sample(&self) -> Duration {
        match self {
            // No random draw for the deterministic forms: GET / with `--service-time 5ms`
            // should cost a timer, nothing more.
            ServiceTime::Zero => Duration::ZERO,
            ServiceTime::Fixed(d) => *d,
            _ => self.quantile(fastrand::f64()),
        }
    }
}

fn parse_duration(input: &str, text: &str) -> Result<Duration, ParseServiceTimeError> {
    let text = text.trim();
    if text == "0" {
        // humantime wants a unit even for zero; `0` alone is the natural way to say "none".
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(text)
        .map_err(|e| ParseServiceTimeError::new(input, format!("{text:?} is not a duration ({e})")))
}

impl FromStr for ServiceTime {
    type Err = ParseServiceTimeError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let text = input.trim();
        if text.is_empty() {
            return Err(ParseServiceTimeError::new(input, "it is empty"));
        }
        if let Some(mean) = text.strip_prefix("exp:") {
            let mean = parse_duration(input, mean)?;
            return Ok(if mean.is_zero() {
                ServiceTime::Zero
            } else {
                ServiceTime::Exponential { mean }
            });
        }
        if let Some(range) = text.strip_prefix("uniform:") {
            let (min, max) = range.split_once("..").ok_or_else(|| {
                ParseServiceTimeError::new(input, "a uniform range needs `min..max`")
            })?;
            let (min, max) = (parse_duration(input, min)?, parse_duration(input, max)?);
            if min > max {
                return Err(ParseServiceTimeError::new(
                    input,
                    "the minimum is larger than the maximum",
                ));
            }
            return Ok(if max.is_zero() {
                ServiceTime::Zero
            } else if min == max {
                ServiceTime::Fixed(min)
            } else {
                ServiceTime::Uniform { min, max }
            });
        }
        let fixed = parse_duration(input, text)?;
        Ok(if fixed.is_zero() {
            ServiceTime::Zero
        } else {
            ServiceTime::Fixed(fixed)
        })
    }
}

impl fmt::Display for ServiceTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use humantime::format_duration as human;
        match *self {
            ServiceTime::Zero => f.write_str("0"),
            ServiceTime::Fixed(d) => write!(f, "{}", human(d)),
            ServiceTime::Exponential { mean } => write!(f, "exp:{}", human(mean)),
            ServiceTime::Uniform { min, max } => {
                write!(f, "uniform:{}..{}", human(min), human(max))
            }
        }
    }
}
