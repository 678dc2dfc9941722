//! The validated run configuration, and the checks that produce it from the command line.
//!
//! Everything a user can get wrong is caught here, before any connection is opened or any file
//! written, with one sentence naming the flag, the value and the fix ([`ConfigError`], exit 2).
//! The result, [`RunConfig`], is what the engine runs; its [`ResolvedConfig`] view (secrets
//! redacted) is what run.json and the Parquet metadata store.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Uri};
use serde::Serialize;

use crate::cli::{ArrivalsArg, RedirectsArg, RunArgs};
use crate::model::open::Arrivals;
use crate::model::{Limit, ModelPlan, DEFAULT_DURATION};
use crate::scenario::schema::{
    ClosedSpec, Defaults, Dur, ModelSpec, OpenSpec, RequestSpec, StageSpec, DEFAULT_MAX_IN_FLIGHT,
};
use crate::scenario::{self, builtin, Compiled, Scenario, ScenarioError};
use crate::store::s3::S3Location;
use crate::transport::Redirects;
use crate::workload::template::{Body, Text};
use crate::workload::{RequestTemplate, StatusSet, Workload};

/// A problem with the user's input. Each message is one sentence with the fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--url '{url}' is not a valid URL ({reason}); use e.g. http://127.0.0.1:8080/path")]
    BadUrl { url: String, reason: String },
    #[error("--url '{url}' has scheme '{scheme}'; only http:// and https:// URLs are supported")]
    Scheme { url: String, scheme: String },
    #[error("{flag} must be at least 1 (got 0)")]
    Zero { flag: &'static str },
    #[error("{flag} must be longer than 0 (got {value})")]
    ZeroDuration { flag: &'static str, value: String },
    #[error("--method '{0}' is not a valid HTTP method; use e.g. GET, POST, PUT or DELETE")]
    Method(String),
    #[error("-H '{0}' is not a header; write it as 'Name: value'")]
    Header(String),
    #[error("{0}")]
    Template(String),
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    #[error("cannot read scenario file {path} ({source}); check the path")]
    ScenarioFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "there is no built-in scenario '{name}'; built-ins are: {known} (see `loadgen scenarios`)"
    )]
    UnknownScenario { name: String, known: String },
    #[error("--method and --body describe a single-URL run; with a scenario, set them in its [requests] (or with --set)")]
    QuickOnly,
    #[error("-c and -n set the closed model; this scenario uses another model, so shape it with --set model.FIELD=VALUE (-d caps any model's run time)")]
    ClosedOnly,
    #[error("--set changes a scenario; give one (a SCENARIO.toml file or --scenario NAME), or use flags such as -c and -d")]
    SetWithoutScenario,
    #[error("--stages '{0}' is not a list of DURATION:RATE stages; write e.g. --stages 30s:100,60s:1000")]
    Stages(String),
    #[error("-c and -n belong to the closed model; with --rate or --stages, concurrency is bounded by --max-in-flight and the run lasts -d or the stages")]
    OpenFlags,
    #[error("{0}")]
    Shard(String),
    /// `loadgen sweep` levels that cannot all run (e.g. one given twice).
    #[error("{0}")]
    SweepLevels(String),
    #[error("--start-at '{value}' {reason}")]
    StartAt { value: String, reason: String },
    #[error("{0}")]
    Out(String),
    #[error("--body @{path}: cannot read the file ({source}); check the path")]
    BodyFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A parsed `http://` or `https://` target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetUrl {
    /// As the user gave it (or as built for the embedded server).
    pub url: String,
    /// `http` or `https`.
    pub scheme: &'static str,
    pub host: String,
    pub port: u16,
    /// `host:port` as sent in the Host header (port omitted when it is 80).
    pub authority: String,
    /// Path and query.
    pub path: Uri,
}

impl TargetUrl {
    pub fn parse(url: &str) -> Result<Self, ConfigError> {
        let bad = |reason: &str| ConfigError::BadUrl {
            url: url.to_string(),
            reason: reason.to_string(),
        };
        let uri: Uri = url
            .parse()
            .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?;
        let scheme = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => "http",
            Some(s) if s.eq_ignore_ascii_case("https") => "https",
            Some(other) => {
                return Err(ConfigError::Scheme {
                    url: url.to_string(),
                    scheme: other.to_string(),
                })
            }
            None => return Err(bad("it has no scheme")),
        };
        let authority = uri.authority().ok_or_else(|| bad("it has no host"))?;
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if host.is_empty() {
            return Err(bad("it has no host"));
        }
        let port = authority
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let path = uri
            .path_and_query()
            .map(|p| p.as_str())
            .filter(|p| !p.is_empty())
            .unwrap_or("/");
        Ok(TargetUrl {
            url: url.to_string(),
            scheme,
            host: host.to_string(),
            port,
            authority: authority.as_str().to_string(),
            path: path
                .parse()
                .map_err(|e: hyper::http::uri::InvalidUri| bad(&e.to_string()))?,
        })
    }
}

/// What to test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The reference server, started in-process on 127.0.0.1:0.
    Embedded,
    Url(TargetUrl),
}

impl Target {
    /// The path scenario request paths are relative to, without a trailing `/`.
    pub fn base_path(&self) -> &str {
        match self {
            Target::Url(url) => url.path.path().trim_end_matches('/'),
            Target::Embedded => "",
        }
    }
}

/// Where the run directory goes (`--out`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// `runs/<run-id>`.
    Default,
    /// `--out DIR`: exactly this directory.
    Dir(PathBuf),
    /// `--out s3://BUCKET/PREFIX`: staged locally, uploaded to `PREFIX/<run-id>/`.
    S3(S3Location),
}

impl Output {
    /// Reads `--out` (absent, a directory, or an `s3://` URL).
    pub fn from_arg(out: Option<&Path>) -> Result<Self, ConfigError> {
        let Some(out) = out else {
            return Ok(Output::Default);
        };
        match S3Location::parse(&out.to_string_lossy()) {
            None => Ok(Output::Dir(out.to_path_buf())),
            Some(parsed) => parsed.map(Output::S3).map_err(ConfigError::Out),
        }
    }
}

/// A validated run: where to send, what, and how the client behaves.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub target: Target,
    /// `command line`, a scenario file's path, or `built-in NAME`.
    pub scenario_origin: String,
    /// The scenario as run (overrides applied, secret headers redacted), for the records.
    pub scenario: Scenario,
    pub workload: Workload,
    pub model: ModelPlan,
    pub think_time: Duration,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub grace: Duration,
    pub out: Output,
    pub progress: bool,
    pub json: bool,
    pub segment_interval: Duration,
    pub connection: ConnectionOptions,
    /// The slice of the load this process runs (`--shard`); the model is already sliced.
    pub shard: crate::shard::Shard,
    /// `--start-at`, as Unix nanoseconds.
    pub start_at_unix_ns: Option<i64>,
    /// `-d` with a model other than closed (whose duration it sets): the run stops sending
    /// after this long whatever the model, like k6's `maxDuration`.
    pub duration_cap: Option<Duration>,
    /// `--link-capacity`, in bits per second.
    pub link_capacity_bps: Option<u64>,
}

/// How workers connect: TLS verification, protocol, keep-alive, redirects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionOptions {
    pub verify: crate::transport::tls::Verify,
    pub http2: bool,
    /// HTTP/2: workers sharing one connection.
    pub streams_per_connection: u32,
    pub keepalive: bool,
    pub redirects: crate::transport::Redirects,
}

impl ConnectionOptions {
    fn from_args(args: &RunArgs) -> Self {
        use crate::transport::tls::Verify;
        ConnectionOptions {
            verify: match (&args.cacert, args.insecure) {
                (_, true) => Verify::Insecure,
                (Some(path), false) => Verify::CaFile(path.clone()),
                (None, false) => Verify::System,
            },
            http2: args.http2,
            streams_per_connection: args.streams_per_connection.unwrap_or(1),
            keepalive: !args.no_keepalive,
            redirects: match args.follow_redirects {
                None => Redirects::None,
                Some(RedirectsArg::SameOrigin) => Redirects::SameOrigin,
                Some(RedirectsArg::Any) => Redirects::Any,
            },
        }
    }

    /// Workers a closed model runs for `-c` connections: one per connection over HTTP/1.1,
    /// `--streams-per-connection` per connection over HTTP/2.
    fn workers_for(&self, connections: u32) -> u32 {
        connections.saturating_mul(self.streams_per_connection)
    }
}

const DEFAULT_CONNECTIONS: u32 = 50;
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl RunConfig {
    /// Validates the flags of `loadgen run` (and the scenario they name).
    pub fn from_args(args: &RunArgs) -> Result<Self, ConfigError> {
        let url = args.url.as_deref().map(TargetUrl::parse).transpose()?;
        if args.connections == Some(0) {
            return Err(ConfigError::Zero {
                flag: "-c/--connections",
            });
        }
        if args.streams_per_connection == Some(0) {
            return Err(ConfigError::Zero {
                flag: "--streams-per-connection",
            });
        }
        let connection = ConnectionOptions::from_args(args);
        if args.requests == Some(0) {
            return Err(ConfigError::Zero {
                flag: "-n/--requests",
            });
        }
        for (flag, value) in [
            ("-d/--duration", args.duration),
            ("--timeout", args.timeout),
            ("--connect-timeout", args.connect_timeout),
            ("--segment-interval", Some(args.segment_interval)),
        ] {
            if let Some(value) = value.filter(|v| v.is_zero()) {
                return Err(ConfigError::ZeroDuration {
                    flag,
                    value: format!("{value:?}"),
                });
            }
        }
        let headers = args
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;

        let scenario_text = match (&args.file, &args.scenario) {
            (Some(path), _) => Some((
                path.display().to_string(),
                std::fs::read_to_string(path).map_err(|source| ConfigError::ScenarioFile {
                    path: path.display().to_string(),
                    source,
                })?,
            )),
            (None, Some(name)) => Some((
                format!("built-in scenario {name}"),
                builtin::get(name)
                    .ok_or_else(|| ConfigError::UnknownScenario {
                        name: name.clone(),
                        known: builtin::names().join(", "),
                    })?
                    .to_string(),
            )),
            (None, None) => None,
        };

        let (target, origin, scenario, compiled, duration_cap) = match scenario_text {
            Some((origin, text)) => {
                if args.method.is_some() || args.body.is_some() {
                    return Err(ConfigError::QuickOnly);
                }
                let mut scenario = scenario::parse(&origin, &text, &args.sets)?;
                for (name, value) in &headers {
                    scenario.defaults.headers.insert(
                        name.to_string(),
                        value.to_str().unwrap_or_default().to_string(),
                    );
                }
                let target = match (&url, &scenario.target) {
                    (Some(url), _) => Target::Url(url.clone()),
                    (None, Some(t)) => Target::Url(TargetUrl::parse(t).map_err(|e| {
                        ConfigError::Scenario(ScenarioError {
                            origin: origin.clone(),
                            line: None,
                            path: "target".into(),
                            message: e.to_string(),
                        })
                    })?),
                    (None, None) => Target::Embedded,
                };
                let closed_overrides = (
                    args.connections.map(|c| connection.workers_for(c)),
                    args.duration,
                    args.requests,
                );
                let cap = apply_closed_overrides(&mut scenario, closed_overrides)?;
                let compiled = scenario::compile_scenario(&origin, &scenario, target.base_path())?;
                (target, origin, scenario, compiled, cap)
            }
            None => {
                if !args.sets.is_empty() {
                    return Err(ConfigError::SetWithoutScenario);
                }
                let target = url.clone().map_or(Target::Embedded, Target::Url);
                let (scenario, compiled) = quick_scenario(args, &target, &headers, &connection)?;
                (target, "command line".to_string(), scenario, compiled, None)
            }
        };
        let shard = args.shard.unwrap_or_default();
        let model = shard.slice(&compiled.model).map_err(ConfigError::Shard)?;
        let start_at_unix_ns = args.start_at.as_deref().map(parse_start_at).transpose()?;
        Ok(RunConfig {
            target,
            scenario_origin: origin,
            scenario: redact(scenario),
            workload: compiled.workload,
            model,
            think_time: args.think_time.or(compiled.think_time).unwrap_or_default(),
            timeout: args.timeout.or(compiled.timeout).unwrap_or(DEFAULT_TIMEOUT),
            connect_timeout: args
                .connect_timeout
                .or(compiled.connect_timeout)
                .unwrap_or(DEFAULT_CONNECT_TIMEOUT),
            grace: args.grace,
            out: Output::from_arg(args.out.as_deref())?,
            progress: !args.no_progress && !args.json,
            json: args.json,
            segment_interval: args.segment_interval,
            connection,
            shard,
            start_at_unix_ns,
            duration_cap,
            link_capacity_bps: args.link_capacity,
        })
    }

    /// How long the run may send: a closed model's duration, or the `-d` cap of any other.
    pub fn duration_limit(&self) -> Option<Duration> {
        self.model.time_limit().or(self.duration_cap)
    }

    /// The configuration as stored in run.json, secrets redacted.
    pub fn resolved(&self, target_url: &str) -> ResolvedConfig {
        let text = |d: Duration| humantime::format_duration(d).to_string();
        ResolvedConfig {
            scenario: self.scenario_origin.clone(),
            model: self.model.kind(),
            description: self.model.describe(),
            url: target_url.to_string(),
            embedded_server: self.target == Target::Embedded,
            think_time: text(self.think_time),
            timeout: text(self.timeout),
            connect_timeout: text(self.connect_timeout),
            grace: text(self.grace),
            segment_interval: text(self.segment_interval),
            protocol: if self.connection.http2 {
                "HTTP/2"
            } else {
                "HTTP/1.1"
            },
            streams_per_connection: self
                .connection
                .http2
                .then_some(self.connection.streams_per_connection),
            keepalive: self.connection.keepalive,
            follow_redirects: self.connection.redirects,
            duration: self.duration_limit().map(text),
            tls_verify: match &self.connection.verify {
                crate::transport::tls::Verify::System => "system roots".to_string(),
                crate::transport::tls::Verify::CaFile(p) => format!("--cacert {}", p.display()),
                crate::transport::tls::Verify::Insecure => "off (--insecure)".to_string(),
            },
            definition: self.scenario.clone(),
        }
    }
}

/// `-c`, `-d` and `-n` set the closed model's parameters; other models are shaped with --set,
/// and `-d` caps their run time: the cap is returned.
fn apply_closed_overrides(
    scenario: &mut Scenario,
    (connections, duration, requests): (Option<u32>, Option<Duration>, Option<u64>),
) -> Result<Option<Duration>, ConfigError> {
    if connections.is_none() && duration.is_none() && requests.is_none() {
        return Ok(None);
    }
    let ModelSpec::Closed(ClosedSpec {
        workers,
        requests: spec_requests,
        duration: spec_duration,
    }) = &mut scenario.model
    else {
        if connections.is_some() || requests.is_some() {
            return Err(ConfigError::ClosedOnly);
        }
        return Ok(duration);
    };
    if let Some(c) = connections {
        *workers = c;
    }
    if let Some(d) = duration {
        *spec_duration = Some(Dur(d));
        *spec_requests = None;
    }
    if let Some(n) = requests {
        *spec_requests = Some(n);
        *spec_duration = None;
    }
    Ok(None)
}

/// The scenario a quick `loadgen run --url … -c … -d …` amounts to, compiled directly (a
/// command-line path or body is literal, never a template).
fn quick_scenario(
    args: &RunArgs,
    target: &Target,
    headers: &[(HeaderName, HeaderValue)],
    connection: &ConnectionOptions,
) -> Result<(Scenario, Compiled), ConfigError> {
    let method_text = args.method.clone().unwrap_or_else(|| "GET".to_string());
    let method = Method::from_bytes(method_text.to_ascii_uppercase().as_bytes())
        .map_err(|_| ConfigError::Method(method_text.clone()))?;
    let body = match args.body.as_deref() {
        None => Bytes::new(),
        Some(text) => match text.strip_prefix('@') {
            Some(path) => {
                Bytes::from(std::fs::read(path).map_err(|source| ConfigError::BodyFile {
                    path: path.to_string(),
                    source,
                })?)
            }
            None => Bytes::from(text.to_string()),
        },
    };
    let path = match target {
        Target::Url(url) => url.path.to_string(),
        Target::Embedded => "/".to_string(),
    };
    let limit = match (args.duration, args.requests) {
        (_, Some(n)) => Limit::Requests(n),
        (Some(d), None) => Limit::Duration(d),
        (None, None) => Limit::Duration(DEFAULT_DURATION),
    };
    let workers = connection.workers_for(args.connections.unwrap_or(DEFAULT_CONNECTIONS));
    let template = RequestTemplate::new(
        None,
        method.clone(),
        Text::literal(&path),
        headers,
        if body.is_empty() {
            Body::Empty
        } else {
            Body::Static(body.clone())
        },
        StatusSet::default(),
    )
    .map_err(|e| ConfigError::Template(e.to_string()))?;
    let scenario = Scenario {
        name: None,
        description: Some("from the command line".into()),
        target: match target {
            Target::Url(url) => Some(url.url.clone()),
            Target::Embedded => None,
        },
        defaults: Defaults {
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("<binary>").to_string()))
                .collect(),
            ..Defaults::default()
        },
        fields: Default::default(),
        requests: [(
            "main".to_string(),
            RequestSpec {
                method: method.to_string(),
                path: path.clone(),
                label: None,
                headers: Default::default(),
                body: (!body.is_empty()).then(|| match &args.body {
                    Some(b) if b.starts_with('@') => {
                        format!("<{} bytes from {}>", body.len(), &b[1..])
                    }
                    _ => format!("<{} bytes>", body.len()),
                }),
                json: None,
                multipart: None,
                expect: None,
            },
        )]
        .into(),
        sequence: vec!["main".to_string()],
        model: quick_model(args, workers, limit)?,
    };
    let (model, _) = crate::scenario::compile::compile_model(
        &scenario.model,
        vec![0u16],
        &crate::workload::fields::Fields::default(),
    )
    .map_err(|v| ConfigError::Template(format!("{}: {}", v.path, v.message)))?;
    let compiled = Compiled {
        workload: Workload::single(template),
        model,
        timeout: None,
        connect_timeout: None,
        think_time: None,
    };
    Ok((scenario, compiled))
}

/// The model a quick run asks for: open with `--rate`/`--stages`, closed otherwise.
fn quick_model(args: &RunArgs, workers: u32, limit: Limit) -> Result<ModelSpec, ConfigError> {
    if args.rate.is_none() && args.stages.is_none() {
        return Ok(ModelSpec::Closed(ClosedSpec {
            workers,
            requests: args.requests,
            duration: match limit {
                Limit::Duration(d) => Some(Dur(d)),
                Limit::Requests(_) => None,
            },
        }));
    }
    if args.connections.is_some() || args.requests.is_some() {
        return Err(ConfigError::OpenFlags);
    }
    let stages = args.stages.as_deref().map(parse_stages).transpose()?;
    Ok(ModelSpec::Open(OpenSpec {
        rate: args.rate,
        duration: match (&stages, args.duration) {
            (Some(_), _) => None,
            (None, d) => Some(Dur(d.unwrap_or(DEFAULT_DURATION))),
        },
        stages,
        arrivals: match args.arrivals {
            ArrivalsArg::Uniform => Arrivals::Uniform,
            ArrivalsArg::Poisson => Arrivals::Poisson,
        },
        max_in_flight: args.max_in_flight.unwrap_or(DEFAULT_MAX_IN_FLIGHT),
        max_lateness: Dur(args.max_lateness),
    }))
}

/// How far in the past `--start-at` may be (clock skew, a slow pod start) before it is
/// refused as a mistake.
const START_AT_PAST_TOLERANCE: Duration = Duration::from_secs(5);

/// `--start-at`: RFC 3339 or Unix milliseconds → Unix nanoseconds; refused when it is more
/// than a few seconds in the past.
fn parse_start_at(text: &str) -> Result<i64, ConfigError> {
    let bad = |reason: String| ConfigError::StartAt {
        value: text.to_string(),
        reason,
    };
    let unix_ns = match text.trim().parse::<i64>() {
        Ok(ms) => ms.checked_mul(1_000_000).ok_or_else(|| bad("is too large".into()))?,
        Err(_) => chrono::DateTime::parse_from_rfc3339(text.trim())
            .map_err(|e| bad(format!("is not a time ({e}); use RFC 3339 such as 2026-11-22T10:15:00Z, or Unix milliseconds")))?
            .timestamp_nanos_opt()
            .ok_or_else(|| bad("is out of range".into()))?,
    };
    let now_ns = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(i64::MAX);
    let late = Duration::from_nanos(now_ns.saturating_sub(unix_ns).max(0) as u64);
    if late > START_AT_PAST_TOLERANCE {
        return Err(bad(format!(
            "was {} ago; give a time in the future (e.g. a minute from now) so every shard can wait for it",
            humantime::format_duration(Duration::from_secs(late.as_secs()))
        )));
    }
    Ok(unix_ns)
}

/// `30s:100,60s:1000` → stages (duration, target rate).
fn parse_stages(text: &str) -> Result<Vec<StageSpec>, ConfigError> {
    text.split(',')
        .map(|part| {
            let bad = || ConfigError::Stages(text.to_string());
            let (duration, rate) = part.trim().split_once(':').ok_or_else(bad)?;
            Ok(StageSpec {
                duration: Dur(crate::units::parse_duration(duration).map_err(|_| bad())?),
                rate: rate.trim().parse().map_err(|_| bad())?,
            })
        })
        .collect()
}

/// The run as configured, in the units a person reads; stored in run.json, and its
/// `definition` as `loadgen.scenario` (TOML) in every segment.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedConfig {
    pub scenario: String,
    pub model: &'static str,
    pub description: String,
    pub url: String,
    pub embedded_server: bool,
    pub think_time: String,
    pub timeout: String,
    pub connect_timeout: String,
    pub grace: String,
    pub segment_interval: String,
    pub protocol: &'static str,
    pub streams_per_connection: Option<u32>,
    pub keepalive: bool,
    pub follow_redirects: crate::transport::Redirects,
    /// How long the run may send (`-d`, or a closed scenario's `duration`), whatever the
    /// model; `None` when only the model's own plan ends it.
    pub duration: Option<String>,
    /// How server certificates were checked (https:// targets).
    pub tls_verify: String,
    /// The scenario as run: overrides applied, secret header values redacted.
    pub definition: Scenario,
}

/// The scenario with secret-looking header values replaced.
fn redact(mut scenario: Scenario) -> Scenario {
    let hide = |headers: &mut std::collections::BTreeMap<String, String>| {
        for (name, value) in headers.iter_mut() {
            if HeaderName::from_bytes(name.as_bytes()).is_ok_and(|n| is_secret(&n)) {
                *value = "<redacted>".to_string();
            }
        }
    };
    hide(&mut scenario.defaults.headers);
    for request in scenario.requests.values_mut() {
        hide(&mut request.headers);
    }
    scenario
}

fn parse_header(text: &str) -> Result<(HeaderName, HeaderValue), ConfigError> {
    let bad = || ConfigError::Header(text.to_string());
    let (name, value) = text.split_once(':').ok_or_else(bad)?;
    let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| bad())?;
    let value = HeaderValue::from_str(value.trim()).map_err(|_| bad())?;
    Ok((name, value))
}

/// Header names whose values must not end up in run.json or Parquet metadata.
fn is_secret(name: &HeaderName) -> bool {
    let name = name.as_str();
    matches!(
        name,
        "authorization" | "proxy-authorization" | "cookie" | "set-cookie"
    ) || [
        "token", "secret", "api-key", "apikey", "password", "session",
    ]
    .iter()
    .any(|word| name.contains(word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_parts() {
        let t = TargetUrl::parse("http://example.test:8080/albums/1?x=2").unwrap();
        assert_eq!(t.host, "example.test");
        assert_eq!(t.port, 8080);
        assert_eq!(t.authority, "example.test:8080");
        assert_eq!(t.path, "/albums/1?x=2");
        let t = TargetUrl::parse("http://[::1]").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.path.to_string().as_str()),
            ("::1", 80, "/")
        );
    }

    #[test]
    fn url_errors_name_the_fix() {
        for (url, needle) in [
            ("ftp://x/", "only http://"),
            ("localhost:8080", "scheme"),
            ("http://", "not a valid URL"),
        ] {
            let err = TargetUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(needle), "{url}: {err}");
            assert!(err.contains(url), "{url}: {err}");
        }
    }

    #[test]
    fn secrets_are_redacted() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from([
            "loadgen",
            "run",
            "-H",
            "Authorization: Bearer abc",
            "-H",
            "X-Api-Key: k",
            "-H",
            "Accept: text/plain",
        ])
        .unwrap();
        let crate::cli::Command::Run(args) = cli.command else {
            panic!()
        };
        let resolved = RunConfig::from_args(&args).unwrap().resolved("http://x/");
        let text = serde_json::to_string(&resolved).unwrap();
        assert!(!text.contains("abc") && !text.contains("\"k\""), "{text}");
        assert!(text.contains("text/plain"), "{text}");
    }
}
