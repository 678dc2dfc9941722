//! The scenario file format (TOML), as serde types. Shape only: what values mean and which
//! combinations are allowed is checked in `compile/` (one file per model).
//!
//! Every table denies unknown fields, so a misspelt key is an error naming the key and the
//! keys allowed there, never a silently ignored setting.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

/// A whole scenario file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Base URL, e.g. `http://127.0.0.1:8080`; `--url` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Pass/fail criteria judged at the end, e.g. `["p99<50ms", "error_rate<1%"]`
    /// (`--threshold` adds to them); a crossed one makes the run exit 99.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<String>,
    /// Prometheus endpoints of the server's side scraped every second during the run, e.g.
    /// `["http://target:9100/metrics"]` (`--server-metrics` adds to them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_metrics: Vec<String>,
    /// The service's saturation gauges in those scrapes, as `--server-saturation` takes them
    /// (`BUSY/LIMIT`, `BUSY/LIMIT,QUEUE` or `QUEUE`); the flag wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_saturation: Option<String>,
    #[serde(default)]
    pub defaults: Defaults,
    /// Payload generators, referred to as `{name}` in paths and bodies.
    #[serde(default)]
    pub fields: BTreeMap<String, FieldSpec>,
    /// Named request templates.
    pub requests: BTreeMap<String, RequestSpec>,
    /// The requests one iteration sends, in order, by name.
    pub sequence: Vec<String>,
    pub model: ModelSpec,
}

/// Settings that apply to every request unless a request says otherwise.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_timeout: Option<Dur>,
    /// Pause between a worker's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_time: Option<Dur>,
    /// Statuses counted as success: codes (`201`) or ranges (`"200-299"`, `"2xx"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Vec<StatusSpec>>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

impl Defaults {
    /// The defaults of a scenario made from the command line (a quick run, a targets file):
    /// its `-H` headers, recorded as text.
    pub fn with_headers(
        headers: &[(hyper::header::HeaderName, hyper::header::HeaderValue)],
    ) -> Self {
        Defaults {
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("<binary>").to_string()))
                .collect(),
            ..Defaults::default()
        }
    }
}

/// One request template.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RequestSpec {
    #[serde(default = "get")]
    pub method: String,
    /// Path and query relative to the target, with `{field}` placeholders.
    pub path: String,
    /// Label in summaries and the `op` column; default `METHOD path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A text body with placeholders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// A JSON body; strings that are exactly `"{field}"` keep the field's type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<toml::Value>,
    /// A multipart/form-data body: part name → part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multipart: Option<BTreeMap<String, PartSpec>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Vec<StatusSpec>>,
    /// Checks of the response, e.g. `[{ json = "/imageSize", equals = "2000" }]`; a failed
    /// one makes the row a `check` error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check: Vec<CheckSpec>,
    /// Values taken from the response for later requests of the iteration, used as `{name}`:
    /// a JSON Pointer (`"/albumID"`), `{ header = "location" }` or `{ regex = "id=(\\d+)" }`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extract: BTreeMap<String, toml::Value>,
}

/// One response check: what it looks at — `header`, `json` (a JSON Pointer), `body_matches`
/// (a regex on the body) or `min_body_bytes` / `max_body_bytes` — and, for a header or a JSON
/// value, `equals` or `matches` (with neither, it must be present).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// Shown in the summary and stored in the `check` column; default: the check as written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_matches: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_body_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<toml::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
}

fn get() -> String {
    "GET".to_string()
}

/// One multipart part: exactly one of `json`, `text`, `bytes`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PartSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<toml::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A generated binary part of this size: bytes, or `"25KB"` / `"2KiB"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<ByteSize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
}

/// A payload generator.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum FieldSpec {
    /// `{ int = [min, max] }`, inclusive.
    Int([i64; 2]),
    /// `{ choice = ["left", "right"] }`.
    Choice(Vec<String>),
    /// `{ sequence = 1 }`: start, start+1, … shared by all workers.
    Sequence(i64),
    /// `{ literal = "2024" }` or `{ literal = 2024 }`.
    Literal(Literal),
    /// `{ chars = 256 }`: a random alphanumeric string of that length.
    Chars(usize),
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum Literal {
    Int(i64),
    Str(String),
}

/// A status code or range.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum StatusSpec {
    Code(u16),
    Range(String),
}

/// The client model and its parameters; `kind` selects it.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ModelSpec {
    Closed(ClosedSpec),
    ThreadGroups(ThreadGroupsSpec),
    ProducerBuffer(ProducerBufferSpec),
    Phased(PhasedSpec),
    Open(OpenSpec),
    Ramp(RampSpec),
}

const MODEL_KINDS: &str = "closed, thread-groups, producer-buffer, phased, open, ramp";

impl ModelSpec {
    /// The model's `kind`, as written in a scenario.
    pub fn kind(&self) -> &'static str {
        match self {
            ModelSpec::Closed(_) => "closed",
            ModelSpec::ThreadGroups(_) => "thread-groups",
            ModelSpec::ProducerBuffer(_) => "producer-buffer",
            ModelSpec::Phased(_) => "phased",
            ModelSpec::Open(_) => "open",
            ModelSpec::Ramp(_) => "ramp",
        }
    }
}

impl<'de> Deserialize<'de> for ModelSpec {
    /// By hand, so that an error inside a model names its field (`groups: invalid type…`);
    /// serde's internally tagged enums lose the field name.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table = toml::Table::deserialize(deserializer)?;
        let kind = match table.remove("kind") {
            Some(toml::Value::String(kind)) => kind,
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "kind = {other} is not a model; use one of {MODEL_KINDS}"
                )))
            }
            None => {
                return Err(D::Error::custom(format!(
                    "missing field `kind`; use one of {MODEL_KINDS}"
                )))
            }
        };
        fn variant<T: serde::de::DeserializeOwned, E: Error>(table: toml::Table) -> Result<T, E> {
            serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
                let path = e.path().to_string();
                let message = e.into_inner().message().to_string();
                if path == "." {
                    E::custom(message)
                } else {
                    E::custom(format!("{path}: {message}"))
                }
            })
        }
        match kind.as_str() {
            "closed" => variant(table).map(ModelSpec::Closed),
            "thread-groups" => variant(table).map(ModelSpec::ThreadGroups),
            "producer-buffer" => variant(table).map(ModelSpec::ProducerBuffer),
            "phased" => variant(table).map(ModelSpec::Phased),
            "open" => variant(table).map(ModelSpec::Open),
            "ramp" => variant(table).map(ModelSpec::Ramp),
            other => Err(D::Error::custom(format!(
                "kind = \"{other}\" is not a model; use one of {MODEL_KINDS}"
            ))),
        }
    }
}

/// `workers` back to back, for `duration` or `requests` in total.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClosedSpec {
    /// 50 when not given, as a quick run's `-c` (so `--set model.kind=closed` runs as is).
    #[serde(default = "default_workers")]
    pub workers: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Dur>,
    /// The run's first stretch, whose rows are labelled `warmup` (the rest `main`) and left
    /// out of the summary and thresholds (`--warmup`); none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Dur>,
}

/// Workers over time: `stages` of a duration and the workers to reach by its end, linear
/// from the previous stage's (the first from 0), as k6's ramping-vus (`--ramp`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RampSpec {
    pub stages: Vec<RampStageSpec>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RampStageSpec {
    pub duration: Dur,
    pub workers: u32,
}

/// Optional startup group, then `groups` groups of `group_size`, `delay` apart.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadGroupsSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<StartupSpec>,
    pub groups: u32,
    pub group_size: u32,
    pub delay: Dur,
    pub iterations: u64,
}

/// A producer fills a bounded buffer; a consumer pool drains it and grows.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProducerBufferSpec {
    pub total: u64,
    #[serde(default = "default_buffer")]
    pub buffer: usize,
    pub initial_workers: u32,
    pub requests_per_worker: u64,
    pub max_workers: u32,
    #[serde(default)]
    pub retries: u32,
    #[serde(default = "default_backoff")]
    pub backoff: Dur,
}

/// Phases that start when part of the previous phase has finished, or at an offset.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PhasedSpec {
    pub max_workers: u32,
    /// How a fraction of `max_workers` becomes a worker count: `down` (the default, Java's
    /// integer division, as the course clients did), `up` or `nearest`; never below 1.
    #[serde(default)]
    pub round: Rounding,
    /// The fraction of the previous phase's workers that must finish before a phase with no
    /// `after`/`at` of its own starts: 1.0 (the default) runs the phases one after the other,
    /// 0.1 overlaps them as "the next phase starts when 10 % of the previous one is done".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_done: Option<f64>,
    /// Iterations a worker runs at each value of its phase's `walk` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations_per_step: Option<u64>,
    pub phases: Vec<PhaseSpec>,
}

/// How a fractional worker count is rounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Rounding {
    #[default]
    Down,
    Up,
    Nearest,
}

/// A field each worker of a phase walks through, `from` to `to` (integers, inclusive),
/// running `iterations_per_step` iterations at each value: the course StepCounter client's
/// "100 iterations for each time interval of the phase's window".
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WalkSpec {
    pub field: String,
    pub from: i64,
    pub to: i64,
}

/// Requests scheduled at a rate, independent of responses.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OpenSpec {
    /// Requests per second: constant for `duration`, or where the first stage starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<Dur>,
    /// A ramp: the rate moves linearly to each stage's `rate` over its `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stages: Option<Vec<StageSpec>>,
    #[serde(default)]
    pub arrivals: crate::model::open::Arrivals,
    #[serde(default = "default_max_in_flight")]
    pub max_in_flight: u32,
    #[serde(default = "default_max_lateness")]
    pub max_lateness: Dur,
    /// The pacer wakes at most once per this; sends due in between go out together at the
    /// next wake-up (`--send-window`). None: every send at its own time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_window: Option<Dur>,
    /// The schedule's first stretch, whose rows are labelled `warmup` (the rest `main`) and
    /// left out of the summary and thresholds (`--warmup`; each `loadgen capacity` level has
    /// one); none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<Dur>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    pub duration: Dur,
    pub rate: f64,
}

pub const DEFAULT_MAX_IN_FLIGHT: u32 = 1000;

/// Workers of a closed model that does not say (a quick run without `-c` too).
pub const DEFAULT_WORKERS: u32 = 50;

fn default_workers() -> u32 {
    DEFAULT_WORKERS
}

fn default_max_in_flight() -> u32 {
    DEFAULT_MAX_IN_FLIGHT
}

/// Lateness from which an open-model send counts as late, when the scenario does not say.
pub const DEFAULT_MAX_LATENESS: Duration = Duration::from_millis(10);

fn default_max_lateness() -> Dur {
    Dur(DEFAULT_MAX_LATENESS)
}

fn default_buffer() -> usize {
    10_000
}

fn default_backoff() -> Dur {
    Dur(Duration::from_millis(10))
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StartupSpec {
    pub workers: u32,
    pub iterations: u64,
}

/// One phase of the phased model.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PhaseSpec {
    pub name: String,
    /// A count (`16`) or a fraction of `max_workers` (`0.25`).
    pub workers: WorkerCount,
    /// Requests each worker sends; derived from `walk` when the phase has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_worker: Option<u64>,
    /// Each worker walks this field through a range (see [`WalkSpec`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk: Option<WalkSpec>,
    /// Start when `when_done` of this phase's workers have finished…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_done: Option<f64>,
    /// …or at this offset from the start of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<Dur>,
    /// Generators replaced during this phase (e.g. a time-of-day window).
    #[serde(default)]
    pub fields: BTreeMap<String, FieldSpec>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize)]
#[serde(untagged)]
pub enum WorkerCount {
    Count(u32),
    Fraction(f64),
}

/// A duration written as `"2s"`, `"500ms"` or a number of seconds; never negative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Seconds(f64),
            Text(String),
        }
        let invalid = |what: String| {
            serde::de::Error::custom(format!(
                "{what} is not a duration; write e.g. \"2s\", \"500ms\" or a non-negative number of seconds"
            ))
        };
        match Raw::deserialize(deserializer)? {
            Raw::Seconds(s) if s.is_finite() && s >= 0.0 => Ok(Dur(Duration::from_secs_f64(s))),
            Raw::Seconds(s) => Err(invalid(s.to_string())),
            Raw::Text(t) => crate::units::parse_duration(&t)
                .map(Dur)
                .map_err(|_| invalid(format!("\"{t}\""))),
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&humantime::format_duration(self.0).to_string())
    }
}

/// A size in bytes: `2048`, or text with a unit — `"25KB"`, `"1MB"`, `"2GB"` (powers of 1000)
/// or `"2KiB"`, `"1MiB"`, `"1GiB"` (powers of 1024); a decimal number is allowed (`"1.5MB"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub usize);

const SIZE_HINT: &str =
    "write bytes (2048) or a number with a unit, e.g. \"25KB\", \"2KiB\", \"1MB\", \"1GiB\"";

impl<'de> Deserialize<'de> for ByteSize {
    /// By hand (a visitor, not an untagged enum) so that every wrong value — a negative
    /// number, a float, an unknown unit — is answered in this field's words.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = ByteSize;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                write!(f, "a size; {SIZE_HINT}")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<ByteSize, E> {
                usize::try_from(n)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("{n} is not a size: too large")))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<ByteSize, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::custom(format!("{n} is not a size; {SIZE_HINT}"))),
                }
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<ByteSize, E> {
                Err(E::custom(format!(
                    "{n} is not a size (bytes are whole); {SIZE_HINT}"
                )))
            }
            fn visit_str<E: serde::de::Error>(self, t: &str) -> Result<ByteSize, E> {
                parse_size(t)
                    .map(ByteSize)
                    .ok_or_else(|| E::custom(format!("\"{t}\" is not a size; {SIZE_HINT}")))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl Serialize for ByteSize {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.0 as u64)
    }
}

fn parse_size(text: &str) -> Option<usize> {
    crate::units::parse_size(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("25KB"), Some(25_000));
        assert_eq!(parse_size("2KiB"), Some(2048));
        assert_eq!(parse_size("10 b"), Some(10));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size("2GB"), Some(2_000_000_000));
        assert_eq!(parse_size("1GiB"), Some(1 << 30));
        assert_eq!(parse_size("1.5MB"), Some(1_500_000));
        assert_eq!(parse_size("2048"), Some(2048));
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_size("1..5MB"), None);
    }
}
