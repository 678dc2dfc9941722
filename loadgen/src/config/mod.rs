//! The validated run configuration, and the checks that produce it from the command line.
//!
//! Everything a user can get wrong is caught here, before any connection is opened or any file
//! written, with one sentence naming the flag, the value and the fix ([`ConfigError`], exit 2).
//! The result, [`RunConfig`], is what the engine runs; its [`ResolvedConfig`] view (secrets
//! redacted) is what run.json and the Parquet metadata store.
//!
//! This file tells the story (flags → scenario → one compile → slice → `RunConfig`);
//! `flags` turns the flags into a scenario (a file's, a built-in, or one a quick run
//! synthesizes) that `scenario::compile` then validates — the one path every run, sweep
//! level and calibration takes; `validate` checks single values (URL, `--out`,
//! `--start-at`, `--stages`, headers); `redact` is what gets recorded, without secrets.

mod flags;
mod model_flags;
mod redact;
mod validate;

use std::time::Duration;

use crate::cli::RunArgs;
use crate::model::ModelPlan;
use crate::report::thresholds::Threshold;
use crate::scenario::schema::ModelSpec;
use crate::scenario::{Scenario, ScenarioError};
use crate::workload::Workload;

pub use redact::ResolvedConfig;
pub use validate::{Output, Target, TargetUrl};

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
    /// A model flag that cannot apply to the model asked for (see `model_flags`).
    #[error("{0}")]
    ModelFlag(String),
    #[error("--set changes a scenario; give one (a SCENARIO.toml file or --scenario NAME), or use flags such as -c and -d")]
    SetWithoutScenario,
    #[error("--stages '{0}' is not a list of DURATION:RATE stages; write e.g. --stages 30s:100,60s:1000")]
    Stages(String),
    #[error("{0}")]
    Shard(String),
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
    /// `-n` with a thread-groups or phased model: requests for all workers together,
    /// rounded up to whole iterations.
    pub request_cap: Option<u64>,
    /// What the model rules changed that the user may not expect (a scenario's model replaced
    /// by `--rate`, `-n` rounded up to whole iterations): on the console and in run.json.
    pub notes: Vec<String>,
    /// `--link-capacity`, in bits per second.
    pub link_capacity_bps: Option<u64>,
    /// The scenario's `thresholds` and `--threshold`s, judged at the end.
    pub thresholds: Vec<Threshold>,
    /// `--metrics-addr`: where live metrics are served for Prometheus.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// How long the metrics endpoint serves the final counts after the run (`--metrics-linger`,
    /// 15 s with `--metrics-addr`; a sweep sets zero for all but its last level).
    pub metrics_linger: Duration,
    /// `--run-group`: the label shards of one run share in the live metrics.
    pub run_group: Option<String>,
    /// True when this run waits for `--start-at` and records how late it started: false for
    /// a sweep's later levels, which start when the level before them ends.
    pub waits_for_start_at: bool,
    /// The console shows the latency histogram (not `--no-histogram`).
    pub histogram: bool,
    /// `--upload-timeout`: the longest the end of an `--out s3://` run waits for uploads.
    pub upload_timeout: Duration,
}

/// `--metrics-linger` when `--metrics-addr` is given without it: three scrapes at Prometheus's
/// common 5 s interval.
pub const DEFAULT_METRICS_LINGER: Duration = Duration::from_secs(15);

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

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl RunConfig {
    /// Validates the flags of `loadgen run` (and the scenario they name).
    pub fn from_args(args: &RunArgs) -> Result<Self, ConfigError> {
        Self::build(args, None)
    }

    /// As [`RunConfig::from_args`], with `model` in place of the scenario's (or the quick
    /// run's) model section: a workflow (calibrate) shapes the run as a spec, and the spec goes
    /// through the same compiler and is what run.json records. The given model runs whole
    /// under `--shard` (a calibration measures R(1) with one worker on every shard).
    pub fn with_model(args: &RunArgs, model: ModelSpec) -> Result<Self, ConfigError> {
        Self::build(args, Some(model))
    }

    fn build(args: &RunArgs, model: Option<ModelSpec>) -> Result<Self, ConfigError> {
        let given_model = model.is_some();
        let url = args.url.as_deref().map(TargetUrl::parse).transpose()?;
        flags::check_counts(args)?;
        let connection = ConnectionOptions::from_args(args);
        let headers = args
            .headers
            .iter()
            .map(|h| validate::parse_header(h))
            .collect::<Result<Vec<_>, _>>()?;
        let flags::Shaped {
            target,
            origin,
            scenario,
            mut compiled,
            applied,
        } = match flags::scenario_text(args)? {
            Some((origin, text)) => {
                flags::from_scenario(args, url, origin, &text, &headers, &connection, model)?
            }
            None => flags::from_command_line(args, url, &headers, &connection, model)?,
        };
        for template in &mut compiled.workload.templates {
            crate::workload::check::Rules::limit_kept(&mut template.capture, args.max_body_kept);
        }
        let shard = args.shard.unwrap_or_default();
        let model = match given_model {
            true => compiled.model,
            false => shard.slice(&compiled.model).map_err(ConfigError::Shard)?,
        };
        let request_cap = applied
            .request_cap
            .map(|n| shard_cap(&shard, n, model.plan().sequence().len()));
        let thresholds = validate::thresholds(
            scenario.thresholds.iter().chain(&args.thresholds),
            &compiled.workload.labels(),
        )?;
        let start_at_unix_ns = args
            .start_at
            .as_deref()
            .map(validate::parse_start_at)
            .transpose()?;
        Ok(RunConfig {
            target,
            scenario_origin: origin,
            scenario: redact::redact(scenario),
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
            duration_cap: applied.duration_cap,
            request_cap,
            notes: applied.notes,
            link_capacity_bps: args.link_capacity,
            thresholds,
            metrics_addr: args.metrics_addr,
            metrics_linger: match args.metrics_addr {
                Some(_) => args.metrics_linger.unwrap_or(DEFAULT_METRICS_LINGER),
                None => Duration::ZERO,
            },
            run_group: args.run_group.clone(),
            waits_for_start_at: true,
            histogram: !args.no_histogram,
            upload_timeout: args.upload_timeout,
        })
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
        let cli = crate::cli::Cli::try_parse_given(["loadgen", "run"].iter().chain(flags))
            .expect("valid flags");
        let crate::cli::Command::Run(args) = cli.command else {
            panic!("not a run")
        };
        *args
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
            let config = RunConfig::with_model(&run_args(flags), spec.clone()).unwrap();
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
}
