//! Quantities as people write and read them: durations (`10s`, `1m30s`), link capacities
//! (`200mbit`, `25MB/s`) parsed from flags and scenario files, and nanoseconds and bytes
//! formatted for the console. A leaf: it knows no other module, so the CLI, the scenario
//! parser, the report and the client monitor all share one reading of a unit.

use std::time::Duration;

/// Parses a link capacity into bits per second: a number (`200e6`), optionally followed by
/// `k`/`m`/`g`/`t` (10^3…10^12, any case) and `bit`, `bits`, `bit/s` or `bps` (bits), or
/// `B/s` / `Bps` (bytes, ×8; a capital B, as `MB/s` is written).
pub fn parse_link_capacity(text: &str) -> Result<u64, String> {
    let bad = || {
        format!(
            "'{text}' is not a link capacity; give bits per second such as 200mbit, 1gbit or 200e6, or bytes per second such as 25MB/s"
        )
    };
    let text = text.trim();
    // The longest prefix that is a number, so `200e6` is one and `1gbit` is 1 + `gbit`.
    let (number, unit) = (1..=text.len())
        .rev()
        .filter(|&i| text.is_char_boundary(i))
        .find_map(|i| Some((text[..i].parse::<f64>().ok()?, &text[i..])))
        .ok_or_else(bad)?;
    let (scale, rest) = match unit.chars().next().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (1e3, &unit[1..]),
        Some('m') => (1e6, &unit[1..]),
        Some('g') => (1e9, &unit[1..]),
        Some('t') => (1e12, &unit[1..]),
        _ => (1.0, unit),
    };
    let per_unit = match rest {
        "" | "bit" | "bits" | "bit/s" | "bits/s" | "bps" => 1.0,
        "B/s" | "Bps" => 8.0,
        _ => return Err(bad()),
    };
    let bps = number * scale * per_unit;
    if !bps.is_finite() || bps < 1.0 || bps > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bps.round() as u64)
}

/// Parses `10s`, `250ms`, `1m30s`; a bare number means seconds.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        if seconds.is_finite() && seconds >= 0.0 {
            return Ok(Duration::from_secs_f64(seconds));
        }
        return Err(format!(
            "'{text}' is not a duration; use e.g. 10s, 500ms or 2m"
        ));
    }
    humantime::parse_duration(text)
        .map_err(|e| format!("'{text}' is not a duration ({e}); use e.g. 10s, 500ms or 2m"))
}

/// A nanosecond quantity in the unit a person reads best.
pub fn duration(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0}ns")
    } else if ns < 1e6 {
        format!("{:.1}µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2}ms", ns / 1e6)
    } else {
        format!("{:.3}s", ns / 1e9)
    }
}

/// Bytes with a binary unit.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// `2048`, `"25KB"`, `"2KiB"`, `"1.5MB"` → bytes; `None` when it is not a size.
pub fn parse_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1000,
        "kib" => 1 << 10,
        "mb" => 1_000_000,
        "mib" => 1 << 20,
        "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        _ => return None,
    };
    if let Ok(n) = number.parse::<u64>() {
        return usize::try_from(n.checked_mul(factor)?).ok();
    }
    // A decimal ("1.5MB"): whole bytes, rounded.
    let bytes = number.parse::<f64>().ok()? * factor as f64;
    (bytes.is_finite() && bytes >= 0.0 && bytes < usize::MAX as f64).then(|| bytes.round() as usize)
}

/// A count with thousands separators: `34,562`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A count with its noun in the right number: `count(1, "worker")` is `1 worker`,
/// `count(8, "worker")` is `8 workers` (nouns that take an `s`, as every counted one here does).
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_singular_for_one_only() {
        assert_eq!(count(1u32, "worker"), "1 worker");
        assert_eq!(count(0u32, "level"), "0 levels");
        assert_eq!(count(8u64, "request"), "8 requests");
    }

    #[test]
    fn link_capacities_are_bits_per_second() {
        for (text, bps) in [
            ("200mbit", 200_000_000),
            ("1gbit", 1_000_000_000),
            ("10Gbit", 10_000_000_000),
            ("200e6", 200_000_000),
            ("100Mbps", 100_000_000),
            ("500kbit/s", 500_000),
            ("25MB/s", 200_000_000),
            ("1.5GBps", 12_000_000_000),
            (" 64000 ", 64_000),
        ] {
            assert_eq!(parse_link_capacity(text), Ok(bps), "{text}");
        }
        for text in [
            "", "fast", "200mb", "-5mbit", "0", "1e400", "200 mbit", "mbit",
        ] {
            let error = parse_link_capacity(text).unwrap_err();
            assert!(error.contains("200mbit"), "{text}: {error}");
        }
    }

    #[test]
    fn units_are_readable() {
        assert_eq!(duration(850.0), "850ns");
        assert_eq!(duration(123_400.0), "123.4µs");
        assert_eq!(duration(12_345_678.0), "12.35ms");
        assert_eq!(duration(2_500_000_000.0), "2.500s");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 * 1024 * 1024 / 2), "1.5 MiB");
    }
}
