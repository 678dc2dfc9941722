//! The validated run configuration, and the checks that produce it from the command line.
//!
//! Everything a user can get wrong is caught here, before any connection is opened or any file
//! written, with one sentence naming the flag, the value and the fix ([`ConfigError`], exit 2).
//! The result, [`RunConfig`], is what the engine runs; its [`ResolvedConfig`] view (secrets
//! redacted) is what run.json and the Parquet metadata store.
//!
//! This file tells the story: a command's flags are read once into [`RunInputs`] (flags
//! checked, the scenario read), and each run the command makes — `run`'s one, each level of
//! a sweep or capacity search, a calibration — is a [`RunConfig`] made from it with its own
//! model ([`ModelChoice`]) and output folder (model shaped → one compile → slice).
//! `flags` turns the flags into a scenario (a file's, a built-in, or one a quick run
//! synthesizes) that `scenario::compile` then validates — the one path every run takes;
//! `model_flags` is the one rule table of what a model flag does to a scenario's model;
//! `validate` checks single values (URL, `--out`, `--start-at`, `--stages`, headers);
//! `redact` is what gets recorded, without secrets.

mod flags;
mod grpc;
mod model_flags;
mod parts;
mod redact;
mod validate;

use std::time::Duration;

use std::path::Path;

use crate::cli::{
    CalibrateArgs, CapacityArgs, ModelArgs, OpenArgs, OutputArgs, RunArgs, ShardArgs, SweepArgs,
    TargetArgs,
};
use crate::model::ModelPlan;
use crate::report::thresholds::Threshold;
use crate::scenario::schema::ModelSpec;
use crate::scenario::{Scenario, ScenarioError};
use crate::workload::Workload;

pub use model_flags::SweepLevel;
pub use parts::{
    DashboardSettings, Evidence, LiveMetrics, OutputSettings, ServerMetrics, Sharding,
    DEFAULT_METRICS_LINGER,
};
pub use redact::ResolvedConfig;
pub use validate::{Output, Target, TargetUrl};

/// A problem with the user's input. Each message is one sentence with the fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("--url '{url}' is not a valid URL ({reason}); use e.g. http://127.0.0.1:8080/path")]
    BadUrl { url: String, reason: String },
    #[error("'{0}' is a URL given where the scenario file goes, and --url is given too; drop one of them (a URL alone as the argument is run as --url)")]
    UrlTwice(String),
    #[error("--url '{url}' has scheme '{scheme}'; only http:// and https:// URLs are supported")]
    Scheme { url: String, scheme: String },
    #[error("{flag} must be at least 1 (got 0)")]
    Zero { flag: &'static str },
    #[error("--probe follows a closed level run by one process (-c N, or a one-phase closed scenario), and this run is {0}; drop --probe")]
    Probe(&'static str),
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
    #[error(
        "{0} is not a scenario file, and a URL needs its scheme: did you mean http://{0}? \
         e.g. loadgen run --url http://{0}"
    )]
    UrlWithoutScheme(String),
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
    #[error("{0}")]
    Grpc(String),
    #[error("--streams-per-connection multiplexes HTTP/2 and HTTP/3 connections; add --http2 (or --proto for gRPC) or --http3")]
    StreamsWithoutHttp2,
    #[error("--http3 runs over QUIC, which is always encrypted; give an https:// URL (with --cacert FILE or --insecure for a self-signed certificate)")]
    Http3NeedsHttps,
    #[error("--method and --body describe a single-URL run; with a scenario, set them in its [requests] (or with --set)")]
    QuickOnly,
    /// A model flag that cannot apply to the model asked for (see `model_flags`).
    #[error("{0}")]
    ModelFlag(String),
    #[error("--targets-weights weighs the targets of a --targets file; give --targets FILE with it, or drop --targets-weights")]
    QuickOnlyWeights,
    #[error("--set changes a scenario; give one (a SCENARIO.toml file or --scenario NAME), or use flags such as -c and -d")]
    SetWithoutScenario,
    #[error("--stages '{0}' is not a list of DURATION:RATE stages; write e.g. --stages 30s:100,60s:1000")]
    Stages(String),
    #[error("{0}")]
    Shard(String),
    #[error("{0}")]
    ServerSaturation(String),
    #[error("--server-metrics-timeout 0s would fail every scrape; give the longest one scrape may take, e.g. --server-metrics-timeout 1s")]
    ServerMetricsTimeout,
    #[error("{0}")]
    Threshold(String),
    /// `loadgen capacity`: a flag the search owns, or a setting out of range.
    #[error("{0}")]
    Capacity(String),
    /// `loadgen sweep` levels that cannot all run (e.g. one given twice).
    #[error("{0}")]
    SweepLevels(String),
    #[error("--start-at '{value}' {reason}")]
    StartAt { value: String, reason: String },
    #[error("{0}")]
    Out(String),
    #[error("--server-metrics '{url}' {reason}; give the endpoint's URL, e.g. http://10.0.0.5:9100/metrics")]
    ServerMetrics { url: String, reason: String },
    #[error("--body @{path}: cannot read the file ({source}); check the path")]
    BodyFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
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
    pub connection: ConnectionOptions,
    /// Where the results go and how the console shows them.
    pub output: OutputSettings,
    /// What the run gathers beside its rows.
    pub evidence: Evidence,
    /// This process's slice of a sharded run (the model is already sliced) and its start.
    pub sharding: Sharding,
    /// `-d` with a model other than closed (whose duration it sets): the run stops sending
    /// after this long whatever the model, like k6's `maxDuration`.
    pub duration_cap: Option<Duration>,
    /// `-n` with a thread-groups or phased model: requests for all workers together,
    /// rounded up to whole iterations.
    pub request_cap: Option<u64>,
    /// What the model rules changed that the user may not expect (a scenario's model replaced
    /// by `--rate`, `-n` rounded up to whole iterations): on the console and in run.json.
    pub notes: Vec<String>,
    /// The scenario's `thresholds` and `--threshold`s, judged at the end.
    pub thresholds: Vec<Threshold>,
    /// `--abort-on-fail`: judge the thresholds on the rows so far once a second after this
    /// long, and end the run when one is lost.
    pub abort_after: Option<Duration>,
    /// What a workflow asks of the run's judgement beyond a plain run's.
    pub judgement: Judgement,
    /// The probe at one connection after the level (a closed single-phase run's; `--probe`,
    /// or by default where the level's verdict needs it).
    pub probe: Option<Probing>,
}

/// The probe at one connection planned after a closed level: its run, and whether the
/// level's verdict decides if it runs.
#[derive(Debug, Clone)]
pub struct Probing {
    pub config: Box<RunConfig>,
    /// `--probe`: it runs after any level that ended as planned. Without it (the default),
    /// only where one level's latency is all the verdict has to go on
    /// (what the verdict's rules say: `probe_can_tell`).
    pub always: bool,
    /// Why the default does not send it although it could: the level's requests are not
    /// safe to repeat (a POST, a gRPC call: sending 50 more may change data). Said where the
    /// verdict would have wanted the probe; `--probe` sends it anyway.
    pub withheld: Option<String>,
}

/// What a workflow asks of a run's judgement: its rows kept in memory (an open run keeps
/// them always: its schedule is judged from them), and a capacity level's SLOs.
#[derive(Debug, Clone, Default)]
pub struct Judgement {
    /// Keep each row's sample (a calibration's R(1) of its successful rows).
    pub keep_samples: bool,
    /// A capacity level: the one judge gets its SLOs' judgement as a fact.
    pub level: Option<LevelSpec>,
}

impl Judgement {
    /// Who decides the run's verdict: a capacity level's judge, or a run's.
    pub fn decided_by(&self) -> &'static str {
        match self.level {
            Some(_) => "loadgen capacity",
            None => "loadgen run",
        }
    }
}

/// A capacity level's part of its run's judgement.
#[derive(Debug, Clone)]
pub struct LevelSpec {
    /// Judged on the level's rows at its end, and watched while it runs: a level far past
    /// them is stopped at once (the contract's abort rule).
    pub slos: Vec<Threshold>,
}

/// How workers connect: TLS verification, protocol, keep-alive, redirects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionOptions {
    pub verify: crate::transport::tls::Verify,
    pub http2: bool,
    /// `--http3`: QUIC with ALPN `h3` (https:// targets only).
    pub http3: bool,
    /// HTTP/2 and HTTP/3: workers sharing one connection.
    pub streams_per_connection: u32,
    /// `--proto`: the gRPC services requests may call (implies HTTP/2).
    pub grpc: Option<std::sync::Arc<crate::transport::grpc::Codec>>,
    pub keepalive: bool,
    pub redirects: crate::transport::Redirects,
    /// `--source-addr` (empty: the kernel's choice, or 127.0.0.x as needed on loopback).
    pub source_addrs: Vec<std::net::IpAddr>,
    /// `--connect-rate`: connections opened per second at most, before first requests.
    pub connect_rate_per_s: u32,
}

impl ConnectionOptions {
    /// Whether workers share connections as streams (HTTP/2 or HTTP/3): a wait for a stream
    /// slot is then the client's, never the network's.
    pub fn multiplexed(&self) -> bool {
        self.http2 || self.http3
    }
}

/// `--connect-rate` when it is not given: 100,000 connections open in 10 s.
pub const DEFAULT_CONNECT_RATE_PER_S: u32 = 10_000;

/// `--timeout` when neither it nor the scenario says.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// `--connect-timeout` when neither it nor the scenario says.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The groups of flags a command gives its runs (see `cli`); a command without a group gives
/// `None`.
#[derive(Debug, Clone, Copy)]
pub struct CommandFlags<'a> {
    pub target: &'a TargetArgs,
    /// The model flags (`run`, `sweep`); `None`: each run takes a workflow's model.
    pub model: Option<(&'a ModelArgs, &'a OpenArgs)>,
    pub thresholds: &'a [String],
    /// `--abort-on-fail`'s delay (`--abort-after` or its default); `None` without it.
    pub abort_after: Option<Duration>,
    pub output: &'a OutputArgs,
    pub shard: Option<&'a ShardArgs>,
    /// `--upload-timeout` (`run`'s only: the workflows write locally, so zero).
    pub upload_timeout: Duration,
}

impl<'a> CommandFlags<'a> {
    /// A command's target and output alone: no model flags (its runs take a workflow's
    /// model), thresholds, shards or upload (it writes locally).
    fn local(target: &'a TargetArgs, output: &'a OutputArgs) -> Self {
        CommandFlags {
            target,
            model: None,
            thresholds: &[],
            abort_after: None,
            output,
            shard: None,
            upload_timeout: Duration::ZERO,
        }
    }
}

impl<'a> From<&'a RunArgs> for CommandFlags<'a> {
    fn from(args: &'a RunArgs) -> Self {
        CommandFlags {
            model: Some((&args.model, &args.open)),
            thresholds: &args.thresholds.thresholds,
            abort_after: args.thresholds.abort_after(),
            shard: Some(&args.shard),
            upload_timeout: args.upload_timeout,
            ..CommandFlags::local(&args.target, &args.output)
        }
    }
}

impl<'a> From<&'a SweepArgs> for CommandFlags<'a> {
    fn from(args: &'a SweepArgs) -> Self {
        CommandFlags {
            model: Some((&args.model, &args.open)),
            thresholds: &args.thresholds.thresholds,
            abort_after: args.thresholds.abort_after(),
            shard: Some(&args.shard),
            ..CommandFlags::local(&args.target, &args.output)
        }
    }
}

impl<'a> From<&'a CalibrateArgs> for CommandFlags<'a> {
    fn from(args: &'a CalibrateArgs) -> Self {
        CommandFlags {
            thresholds: &args.thresholds.thresholds,
            abort_after: args.thresholds.abort_after(),
            shard: Some(&args.shard),
            ..CommandFlags::local(&args.target, &args.output)
        }
    }
}

/// Capacity: no model flags (each level is the search's), thresholds (its SLOs are judged
/// by the search) or shards.
impl<'a> From<&'a CapacityArgs> for CommandFlags<'a> {
    fn from(args: &'a CapacityArgs) -> Self {
        CommandFlags::local(&args.target, &args.output)
    }
}

/// The model a run made from [`RunInputs`] takes.
#[derive(Debug, Clone)]
pub enum ModelChoice {
    /// The scenario's (or a quick run's) model, shaped by the command's model flags.
    Flags,
    /// As `Flags`, with a sweep's level in place of `-c` or `--rate`.
    Level(SweepLevel),
    /// A workflow's own model, as it is (calibrate's one worker, a capacity level's rate). It
    /// runs whole under `--shard` (a calibration measures R(1) with one worker on every
    /// shard).
    Spec(ModelSpec),
}

/// A command's flags read once: checked, the scenario read and parsed, a quick run's request
/// built. Every run of the command is a [`RunConfig`] made from it by [`RunInputs::config`],
/// so a workflow never edits flags or reads a scenario twice.
#[derive(Debug, Clone)]
pub struct RunInputs {
    source: flags::Source,
    connection: ConnectionOptions,
    model_flags: model_flags::ModelFlags,
    think_time: Option<Duration>,
    timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
    grace: Duration,
    max_body_kept: usize,
    output: OutputSettings,
    evidence: Evidence,
    sharding: Sharding,
    thresholds: Vec<String>,
    abort_after: Option<Duration>,
}

impl RunInputs {
    /// Checks the flags and reads the scenario they name (bad input: one sentence, exit 2).
    pub fn read(flags: CommandFlags<'_>) -> Result<Self, ConfigError> {
        let (target, output) = (flags.target, flags.output);
        flags::check_counts(target, flags.model.map(|(m, _)| m), output)?;
        let connection = ConnectionOptions::from_args(target)?;
        let headers = target
            .headers
            .iter()
            .map(|h| validate::parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let source = flags::Source::read(target, &headers, &connection)?;
        let https = matches!(&source.target, Target::Url(url) if url.scheme == "https");
        if connection.http3 && !https {
            return Err(ConfigError::Http3NeedsHttps);
        }
        let model_flags = match flags.model {
            Some((model, open)) => {
                model_flags::ModelFlags::from_args(model, open, connection.streams_per_connection)?
            }
            None => model_flags::ModelFlags::none(),
        };
        Ok(RunInputs {
            evidence: Evidence::read(&output.evidence, &source.scenario, target.link_capacity)?,
            output: OutputSettings::from_args(output, flags.upload_timeout)?,
            sharding: Sharding::from_args(flags.shard)?,
            source,
            model_flags,
            think_time: flags.model.and_then(|(m, _)| m.think_time),
            timeout: target.timeout,
            connect_timeout: target.connect_timeout,
            grace: target.grace,
            max_body_kept: target.max_body_kept,
            thresholds: flags.thresholds.to_vec(),
            abort_after: flags.abort_after,
            connection,
        })
    }

    /// Where the command's results go (`--out`).
    pub fn out(&self) -> &Output {
        &self.output.out
    }

    /// The same inputs, whose runs start without their banner: a workflow that announces
    /// itself once (a capacity search) and not each run it makes.
    pub fn without_banner(mut self) -> Self {
        self.output.banner = false;
        self
    }

    /// The same inputs, whose runs append their live figures to `page` (a workflow's
    /// `--dashboard`, which it serves and finishes itself).
    pub fn with_dashboard_page(mut self, page: crate::report::dashboard::SharedPage) -> Self {
        self.output.dashboard = parts::DashboardSettings {
            page: Some(page),
            ..parts::DashboardSettings::default()
        };
        self
    }

    /// Whether the command prints JSON (and so no progress or level lines).
    pub fn json(&self) -> bool {
        self.output.json
    }

    /// The scenario's thresholds and `--threshold`s, as written.
    pub fn has_thresholds(&self) -> bool {
        !self.thresholds.is_empty() || !self.source.scenario.thresholds.is_empty()
    }

    /// `texts` (a workflow's SLOs) parsed, each op selector resolved against the workload's
    /// ops as a run's thresholds are; one naming no op is refused before anything is sent.
    pub fn thresholds(&self, texts: &[String]) -> Result<Vec<Threshold>, ConfigError> {
        let one_request = ModelSpec::Closed(crate::scenario::schema::ClosedSpec {
            workers: 1,
            requests: Some(1),
            duration: None,
            warmup: None,
        });
        let shaped = self
            .source
            .shape(&model_flags::ModelFlags::none(), Some(one_request))?;
        validate::thresholds(texts.iter(), &shaped.compiled.workload)
    }

    /// A run of `model` into `out` (`None`: the command's `--out`).
    pub fn config(&self, model: ModelChoice, out: Option<&Path>) -> Result<RunConfig, ConfigError> {
        let streams = self.connection.streams_per_connection;
        let (flags, spec) = match model {
            ModelChoice::Flags => (self.model_flags.clone(), None),
            ModelChoice::Level(level) => (self.model_flags.at_level(level, streams), None),
            ModelChoice::Spec(spec) => (model_flags::ModelFlags::none(), Some(spec)),
        };
        let whole = spec.is_some();
        let flags::Shaped {
            scenario,
            mut compiled,
            applied,
        } = self.source.shape(&flags, spec)?;
        for template in &mut compiled.workload.templates {
            crate::workload::check::Rules::limit_kept(&mut template.capture, self.max_body_kept);
        }
        if let Some(codec) = &self.connection.grpc {
            grpc::check_calls(&mut compiled.workload, codec)?;
        }
        let model = match whole {
            true => compiled.model,
            false => self
                .sharding
                .shard
                .slice(&compiled.model)
                .map_err(ConfigError::Shard)?,
        };
        let request_cap = applied
            .request_cap
            .map(|n| shard_cap(&self.sharding.shard, n, model.plan().sequence().len()));
        let thresholds = validate::thresholds(
            scenario.thresholds.iter().chain(&self.thresholds),
            &compiled.workload,
        )?;
        if self.abort_after.is_some() && thresholds.is_empty() {
            return Err(ConfigError::Threshold(
                "--abort-on-fail ends the run when a threshold is lost, and this run has none; \
                 give one with --threshold, e.g. --threshold 'p99<50ms'"
                    .to_string(),
            ));
        }
        Ok(RunConfig {
            target: self.source.target.clone(),
            scenario_origin: self.source.origin.clone(),
            scenario: redact::redact(scenario),
            workload: compiled.workload,
            model,
            think_time: self.think_time.or(compiled.think_time).unwrap_or_default(),
            timeout: self.timeout.or(compiled.timeout).unwrap_or(DEFAULT_TIMEOUT),
            connect_timeout: self
                .connect_timeout
                .or(compiled.connect_timeout)
                .unwrap_or(DEFAULT_CONNECT_TIMEOUT),
            grace: self.grace,
            output: OutputSettings {
                out: match out {
                    Some(dir) => Output::Dir(dir.to_path_buf()),
                    None => self.output.out.clone(),
                },
                ..self.output.clone()
            },
            connection: self.connection.clone(),
            evidence: self.evidence.clone(),
            sharding: self.sharding,
            duration_cap: applied.duration_cap,
            request_cap,
            notes: applied.notes,
            thresholds,
            abort_after: self.abort_after,
            judgement: Judgement::default(),
            probe: None,
        })
    }
}

/// `--probe`: requests the probe at one connection sends at most.
pub const PROBE_REQUESTS: u64 = 50;
/// `--probe`: how long the probe sends at most.
pub const PROBE_TIME: Duration = Duration::from_secs(1);

/// The probe's run for a closed single-phase `main`: its target, requests and transport at
/// one connection, bounded, into a temporary directory, with no listeners, scrapes,
/// thresholds or console of its own; any other model, or a shard, is refused. It is `main`'s
/// own config, its bodies shared rather than built again (a 48 MiB upload is held once).
fn probe_config(main: &RunConfig) -> Result<RunConfig, ConfigError> {
    let ModelPlan::Closed(level) = &main.model else {
        return Err(ConfigError::Probe("not a closed level"));
    };
    if !main.sharding.shard.is_whole() {
        return Err(ConfigError::Probe("one shard of several (--shard)"));
    }
    if level.workers <= 1 {
        return Err(ConfigError::Probe(
            "at one connection already (its median is R(1))",
        ));
    }
    // One directory a probe, also where one process runs several (a library's caller).
    static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("loadgen-probe-{}-{n}", std::process::id()));
    let mut config = main.clone();
    config.model = ModelPlan::Closed(crate::model::closed::ClosedPlan {
        workers: 1,
        limit: crate::model::Limit::Requests(PROBE_REQUESTS),
        sequence: level.sequence.clone(),
        warmup: Duration::ZERO,
    });
    config.duration_cap = Some(PROBE_TIME);
    // A request still in flight at the cap gets as long again at most: a server that hangs
    // holds the run's end by 2 s, not by the run's `--grace`.
    config.grace = config.grace.min(PROBE_TIME);
    config.request_cap = None;
    config.notes.clear();
    config.output.out = Output::Dir(dir);
    config.output.progress = false;
    config.output.banner = false;
    config.output.json = true;
    config.output.metrics = LiveMetrics::default();
    config.output.dashboard = Default::default();
    config.evidence.server_metrics = ServerMetrics::default();
    config.evidence.trace_sample = None;
    config.thresholds.clear();
    config.abort_after = None;
    // Its rows' samples: R(1) is the median of the successful ones alone.
    config.judgement = Judgement {
        keep_samples: true,
        level: None,
    };
    Ok(config)
}

/// Methods a probe may send again without being asked (`--probe`): what HTTP calls safe.
const SAFE_TO_REPEAT: [hyper::Method; 3] = [
    hyper::Method::GET,
    hyper::Method::HEAD,
    hyper::Method::OPTIONS,
];

/// Why the level's requests are not safe to send again unasked — "POST, DELETE requests", "gRPC
/// calls" — or `None` when every one the level sends is a GET, HEAD or OPTIONS.
fn unsafe_to_repeat(main: &RunConfig) -> Option<String> {
    let ModelPlan::Closed(level) = &main.model else {
        return None;
    };
    if main.connection.grpc.is_some() {
        return Some("gRPC calls".to_string());
    }
    let mut methods: Vec<&str> = Vec::new();
    for &op in level.sequence.iter() {
        let method = &main.workload.templates[op as usize].method;
        if !SAFE_TO_REPEAT.contains(method) && !methods.contains(&method.as_str()) {
            methods.push(method.as_str());
        }
    }
    (!methods.is_empty()).then(|| format!("{} requests", methods.join(", ")))
}

impl RunConfig {
    /// Validates the flags of `loadgen run` (and the scenario they name).
    pub fn from_args(args: &RunArgs) -> Result<Self, ConfigError> {
        let inputs = RunInputs::read(args.into())?;
        let mut config = inputs.config(ModelChoice::Flags, None)?;
        config.output.dashboard = parts::DashboardSettings::from_args(&args.dashboard);
        config.probe = match (args.probe, args.no_probe) {
            (true, _) => Some(probe_config(&config)?),
            (false, false) => probe_config(&config).ok(),
            (false, true) => None,
        }
        .map(|probe| Probing {
            config: Box::new(probe),
            always: args.probe,
            withheld: unsafe_to_repeat(&config),
        });
        Ok(config)
    }

    /// From how late after its intended time a send counts as late, in ns: the open model's
    /// `max_lateness`; `i64::MAX` for a model without a schedule.
    pub fn max_lateness_ns(&self) -> i64 {
        self.model
            .plan()
            .max_lateness()
            .map_or(i64::MAX, crate::clock::nanos)
    }

    /// How long the run may send: a closed model's duration, or the `-d` cap of any other.
    pub fn duration_limit(&self) -> Option<Duration> {
        self.model.plan().time_limit().or(self.duration_cap)
    }
}

/// A shard's share of a `-n` cap of `requests` (whole iterations of `len` requests): its
/// share of the iterations, so the shards together send the cap.
fn shard_cap(shard: &crate::shard::Shard, requests: u64, len: usize) -> u64 {
    let len = len.max(1) as u64;
    shard.share(requests.div_ceil(len)) * len
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::phased::StartRule;
    use crate::scenario::schema::{PhaseSpec, PhasedSpec, WorkerCount};

    fn run_args(flags: &[&str]) -> RunArgs {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["loadgen", "run"].iter().chain(flags))
            .expect("valid flags");
        let crate::cli::Command::Run(args) = cli.command else {
            panic!("not a run")
        };
        *args
    }

    /// A scenario's `server_metrics` and `--server-metrics` add up, a URL given twice once;
    /// a URL that is not http(s) is refused naming the flag.
    #[test]
    fn server_metrics_come_from_the_scenario_and_the_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.toml");
        let scenario = "server_metrics = [\"http://a:9100/metrics\"]\nsequence = [\"get\"]\n\
                        [requests.get]\npath = \"/\"\n[model]\nkind = \"closed\"\nworkers = 1\n";
        std::fs::write(&path, scenario).unwrap();
        let file = path.to_str().unwrap();
        let url = "http://127.0.0.1:1";
        let flags = [file, "--url", url, "--server-metrics", "http://b/metrics"];
        let config = RunConfig::from_args(&run_args(&flags)).unwrap();
        let expected = ["http://a:9100/metrics", "http://b/metrics"];
        assert_eq!(config.evidence.server_metrics.sources, expected);
        let twice = [
            file,
            "--url",
            url,
            "--server-metrics",
            "http://a:9100/metrics",
        ];
        let config = RunConfig::from_args(&run_args(&twice)).unwrap();
        assert_eq!(
            config.evidence.server_metrics.sources,
            ["http://a:9100/metrics"]
        );
        let bad = ["--url", url, "--server-metrics", "file:///metrics"];
        let error = RunConfig::from_args(&run_args(&bad))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("--server-metrics 'file:///metrics'"),
            "{error}"
        );
        assert_eq!(
            RunConfig::from_args(&run_args(&["--url", url]))
                .unwrap()
                .evidence
                .trace_sample,
            None
        );
    }

    /// The scenario a config records, written out as a file and run through the scenario
    /// path: the plan it compiles to.
    fn plan_of_recorded_scenario(config: &RunConfig) -> ModelPlan {
        let text = toml::to_string(&config.scenario).expect("a scenario serializes");
        let scenario = crate::scenario::parse("recorded", &text, &[]).expect("it parses back");
        crate::scenario::compile_scenario("recorded", &scenario, "")
            .expect("it compiles")
            .model
    }

    /// A quick run synthesizes a model section and compiles it like a scenario's: its plan
    /// is the plan the same section gives on the scenario path.
    #[test]
    fn a_quick_runs_plan_is_the_scenario_paths_plan_for_its_spec() {
        for flags in [
            &["--url", "http://127.0.0.1:9/x", "-c", "3", "-n", "40"][..],
            &["-c", "7", "-d", "2s"],
            &["--rate", "50", "-d", "3s", "--max-in-flight", "9"],
            &["--stages", "1s:10,2s:40", "--arrivals", "poisson"],
        ] {
            let config = RunConfig::from_args(&run_args(flags)).unwrap();
            assert_eq!(
                format!("{:?}", config.model),
                format!("{:?}", plan_of_recorded_scenario(&config)),
                "{flags:?}"
            );
        }
        let config = RunConfig::from_args(&run_args(&["-c", "7", "-n", "20"])).unwrap();
        assert_eq!(
            config.model.plan().describe(),
            "closed model, 7 workers, 20 requests"
        );
    }

    /// `-c 0` is refused by the flag check, in the flag's words, before any model exists.
    #[test]
    fn zero_connections_name_the_flag() {
        let err = RunConfig::from_args(&run_args(&["-c", "0"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "-c/--connections must be at least 1 (got 0)"
        );
    }

    /// A workflow's model spec replaces the run's model, is compiled by the one compiler and
    /// is what gets recorded (calibrate: warm-up, then the measured phase once it is done).
    #[test]
    fn with_model_compiles_and_records_the_given_spec() {
        let phase = |name: &str, after: Option<&str>| PhaseSpec {
            name: name.to_string(),
            workers: WorkerCount::Count(1),
            requests_per_worker: Some(5),
            walk: None,
            after: after.map(String::from),
            when_done: None,
            at: None,
            fields: Default::default(),
        };
        let spec = ModelSpec::Phased(PhasedSpec {
            max_workers: 1,
            phases: vec![phase("warmup", None), phase("calibration", Some("warmup"))],
            ..Default::default()
        });
        for flags in [&[][..], &["--scenario", "albums"]] {
            let args = run_args(flags);
            let inputs = RunInputs::read((&args).into()).unwrap();
            let config = inputs
                .config(ModelChoice::Spec(spec.clone()), None)
                .unwrap();
            let ModelPlan::Phased(plan) = &config.model else {
                panic!("{flags:?}: {}", config.model.plan().kind())
            };
            let starts: Vec<StartRule> = plan.phases.iter().map(|p| p.start.clone()).collect();
            assert_eq!(
                starts,
                [
                    StartRule::At(Duration::ZERO),
                    StartRule::After {
                        phase: 0,
                        finished: 1
                    }
                ]
            );
            assert_eq!(config.workload.phase_fields.len(), 2, "{flags:?}");
            assert_eq!(format!("{:?}", config.scenario.model), format!("{spec:?}"));
        }
    }

    /// Flags that are `Option`s (so that one not given leaves a scenario's value alone) state
    /// their default in their help text; each such default is the constant the engine uses,
    /// and every stated default is in this table.
    #[test]
    fn help_defaults_are_the_engines_constants() {
        use crate::scenario::schema::{
            DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_LATENESS, DEFAULT_WORKERS,
        };
        use clap::CommandFactory;
        let text = |d: Duration| humantime::format_duration(d).to_string();
        let expected: Vec<(&str, String)> = vec![
            ("connections", DEFAULT_WORKERS.to_string()),
            ("duration", text(crate::model::DEFAULT_DURATION)),
            ("max_in_flight", DEFAULT_MAX_IN_FLIGHT.to_string()),
            ("max_lateness", text(DEFAULT_MAX_LATENESS)),
            (
                "arrivals",
                crate::model::open::Arrivals::default().name().to_string(),
            ),
            ("timeout", text(DEFAULT_TIMEOUT)),
            ("connect_timeout", text(DEFAULT_CONNECT_TIMEOUT)),
            ("connect_rate", format!("{DEFAULT_CONNECT_RATE_PER_S}/s")),
            ("metrics_linger", text(DEFAULT_METRICS_LINGER)),
            ("dashboard_linger", text(parts::DEFAULT_DASHBOARD_LINGER)),
            ("think_time", text(Duration::ZERO)),
            ("warmup", text(Duration::ZERO)),
            (
                "abort_after",
                text(crate::report::thresholds::DEFAULT_ABORT_AFTER),
            ),
            ("send_window", "0".to_string()),
            ("streams_per_connection", "1".to_string()),
            ("method", "GET".to_string()),
            ("out", "runs/<run-id>".to_string()),
            ("run_group", "the".to_string()),
            ("junit_name", "--out's".to_string()),
        ];
        let cli = crate::cli::Cli::command();
        let mut checked = 0;
        for command in cli.get_subcommands() {
            for arg in command.get_arguments() {
                let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
                let Some((_, after)) = help.split_once("[default: ") else {
                    continue;
                };
                let stated = after.split([' ', ']', ',']).next().unwrap_or_default();
                let id = arg.get_id().as_str();
                let want = expected
                    .iter()
                    .find(|(name, _)| *name == id)
                    .map(|(_, v)| v);
                assert_eq!(
                    Some(&stated.to_string()),
                    want,
                    "`{} --{id}` states [default: {stated}…]: add it to this table, or fix it",
                    command.get_name()
                );
                checked += 1;
            }
        }
        assert!(checked >= expected.len(), "{checked} stated defaults");
    }
}
