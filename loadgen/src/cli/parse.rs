//! Parsers of flag values (sizes, shards, worker counts, rates, fractions), each refusing bad
//! input with one sentence that says what to give instead, and the enums flags take.

use clap::builder::PossibleValue;
use clap::ValueEnum;

use crate::model::open::Arrivals;
use crate::shard::Shard;

/// A size: bytes, or a number with a unit (`64KiB`, `1MiB`, `2MB`).
pub(super) fn parse_byte_size(text: &str) -> Result<usize, String> {
    crate::units::parse_size(text).ok_or_else(|| {
        format!("'{text}' is not a size; give bytes or a number with a unit, e.g. 1MiB or 64KB")
    })
}

pub(super) fn parse_shard(text: &str) -> Result<Shard, String> {
    text.parse()
}

/// `-c N`. By hand, with negative numbers let through, so `-c -1` is told about the value
/// (clap alone suggests writing `-- -1`).
pub(super) fn parse_workers(text: &str) -> Result<u32, String> {
    text.trim().parse().map_err(|_| {
        format!(
            "'{text}' is not a number of workers; give a whole number of at least 1, e.g. -c 50"
        )
    })
}

/// `--source-addr`'s addresses, in the order workers take them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceAddrs(pub Vec<std::net::IpAddr>);

pub(super) fn parse_source_addrs(text: &str) -> Result<SourceAddrs, String> {
    crate::transport::connect::parse_source_addrs(text).map(SourceAddrs)
}

/// `--connect-rate N/s` (or just N), a whole number of at least 1.
pub(super) fn parse_connect_rate(text: &str) -> Result<u32, String> {
    let number = text.trim().trim_end_matches("/s").trim();
    match number.parse::<u32>() {
        Ok(rate) if rate > 0 => Ok(rate),
        _ => Err(format!(
            "--connect-rate '{text}' is not a rate; give connections per second, a whole number of at least 1, e.g. --connect-rate 5000/s"
        )),
    }
}

/// `--rate REQ/S`, positive and finite (see [`parse_workers`] for why by hand).
pub(super) fn parse_rate(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(rate) if rate.is_finite() && rate > 0.0 => Ok(rate),
        _ => Err(format!(
            "'{text}' is not a rate; give requests per second above 0, e.g. --rate 1000"
        )),
    }
}

/// `--tolerance 5%` or `0.05`: a fraction in (0, 1).
pub(super) fn parse_fraction(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let value = match trimmed.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
        None => trimmed.parse::<f64>(),
    };
    match value {
        Ok(f) if f > 0.0 && f < 1.0 => Ok(f),
        _ => Err(format!(
            "'{text}' is not a fraction between 0 and 1; give e.g. 5% or 0.05"
        )),
    }
}

/// `--trace-sample 10%` or `0.1`: a fraction in [0, 1].
pub(super) fn parse_sample_fraction(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    let value = match trimmed.strip_suffix('%') {
        Some(percent) => percent.trim().parse::<f64>().map(|p| p / 100.0),
        None => trimmed.parse::<f64>(),
    };
    match value {
        Ok(f) if (0.0..=1.0).contains(&f) => Ok(f),
        _ => Err(format!(
            "'{text}' is not a fraction from 0 to 1; give e.g. 10% or 0.1"
        )),
    }
}

/// `--min-capacity 500/s` or `500`: requests per second above 0.
pub(super) fn parse_per_second(text: &str) -> Result<f64, String> {
    let trimmed = text.trim();
    parse_rate(trimmed.strip_suffix("/s").unwrap_or(trimmed))
        .map_err(|_| format!("'{text}' is not a rate; give requests per second, e.g. 500/s"))
}

/// `--arrivals`: the model's own enum, named on the command line as in a scenario.
impl ValueEnum for Arrivals {
    fn value_variants<'a>() -> &'a [Self] {
        &[Arrivals::Uniform, Arrivals::Poisson]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        let help = match self {
            Arrivals::Uniform => "Evenly spaced at the current rate",
            Arrivals::Poisson => "A Poisson process at the current rate (exponential gaps)",
        };
        Some(PossibleValue::new(self.name()).help(help))
    }
}

/// `--follow-redirects[=WHERE]`: which redirects workers follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RedirectsArg {
    /// Those to the same scheme, host and port, over the worker's own connection.
    SameOrigin,
    /// Any, opening a one-off connection for another origin.
    Any,
}
