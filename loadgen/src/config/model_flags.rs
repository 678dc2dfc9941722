//! The model rules: what the model flags (`--rate`, `--stages`, `--arrivals`,
//! `--max-in-flight`, `--max-lateness`, `-c`, `-d`, `-n`, `--think-time`, `--warmup`,
//! `--ramp`) do to a scenario's
//! `[model]` — a file's, a built-in's, or the closed model a quick run starts from. The
//! scenario says *what* is sent; these flags say *when*. Every flag is either applied (and
//! visible in run.json) or refused with one sentence; none is ignored.
//!
//! | flag | closed (and a quick run) | open | ramp | thread-groups, producer-buffer, phased |
//! |---|---|---|---|---|
//! | `--rate`, `--stages` | switch to the open model over the sequence | set rate / stages | switch to the open model | switch to the open model (the replaced model's parts are named in a note) |
//! | `--arrivals`, `--max-in-flight`, `--max-lateness`, `--send-window` | only with `--rate`/`--stages` | set | only with `--rate`/`--stages` | only with `--rate`/`--stages` |
//! | `--ramp` | switch to the ramp model over the sequence | refused (hint `--stages`) | set stages | refused (hint `--set model.kind=closed`) |
//! | `-c` | sets workers | refused (hint `--set model.kind=closed`) | refused (same hint) | refused (same hint) |
//! | `-d` | sets the duration | sets the duration (caps a ramp of stages) | caps the run time | caps the run time |
//! | `-n` | sets requests, whole iterations | refused (rate × duration decides) | caps requests | caps requests, whole iterations (producer-buffer: its `total`) |
//! | `--think-time` | applies | refused | applies | applies |
//! | `--warmup` | sets `warmup` | sets `warmup` (at the schedule's start) | refused (each stage is judged) | refused (their phases are their own) |
//!
//! `-c` with `--rate`/`--stages`, and `--think-time` or `-n` with them, are refused whatever
//! the scenario; so are `--ramp` with `-c`, `-d`, `-n`, `--rate` or `--stages` (clap) and
//! `--ramp` with `--warmup`. `--streams-per-connection` groups any model's workers on HTTP/2 connections
//! (and multiplies `-c`); it is not a model rule. This file only edits the spec: checking the
//! values is `scenario::compile`'s job, as for any scenario.

use std::time::Duration;

use super::validate::{parse_ramp, parse_stages};
use super::ConfigError;
use crate::cli::{ModelArgs, OpenArgs};
use crate::model::open::Arrivals;
use crate::model::DEFAULT_DURATION;
use crate::scenario::schema::{
    ClosedSpec, Dur, ModelSpec, OpenSpec, ProducerBufferSpec, RampSpec, RampStageSpec, StageSpec,
    DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_LATENESS,
};

/// A level of `loadgen sweep`: the model value its levels flag gives each run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SweepLevel {
    /// `--levels`: the closed model's workers (as `-c`).
    Workers(u32),
    /// `--rate-levels`: the open model's rate (as `--rate`).
    Rate(f64),
}

/// The model flags given on the command line (and a sweep's level), with the names to use
/// when one is refused.
#[derive(Debug, Clone, Default)]
pub(super) struct ModelFlags {
    /// `-c`, already multiplied by `--streams-per-connection`.
    workers: Option<u32>,
    rate: Option<f64>,
    stages: Option<Vec<StageSpec>>,
    arrivals: Option<Arrivals>,
    max_in_flight: Option<u32>,
    max_lateness: Option<Duration>,
    send_window: Option<Duration>,
    duration: Option<Duration>,
    requests: Option<u64>,
    think_time: bool,
    warmup: Option<Duration>,
    ramp: Option<Vec<RampStageSpec>>,
    /// How `-c` and `--rate` were written: `-c`/`--rate`, or a sweep's `--levels`.
    workers_flag: &'static str,
    rate_flag: &'static str,
}

/// What the rules decided beside the spec itself.
#[derive(Debug, Clone, Default)]
pub(super) struct Applied {
    /// `-d` on a model whose own plan does not end by time.
    pub duration_cap: Option<Duration>,
    /// `-n` on a thread-groups or phased model.
    pub request_cap: Option<u64>,
    /// What changed that the user may not expect (a replaced model), for the banner and
    /// run.json.
    pub notes: Vec<String>,
}

impl ModelFlags {
    /// The model flags given; `streams` workers share each `-c` connection.
    pub(super) fn from_args(
        model: &ModelArgs,
        open: &OpenArgs,
        streams: u32,
    ) -> Result<Self, ConfigError> {
        Ok(ModelFlags {
            workers: model.connections.map(|c| c.saturating_mul(streams)),
            rate: model.rate,
            stages: model.stages.as_deref().map(parse_stages).transpose()?,
            arrivals: open.arrivals,
            max_in_flight: open.max_in_flight,
            max_lateness: open.max_lateness,
            send_window: open.send_window,
            duration: model.duration,
            requests: model.requests,
            think_time: model.think_time.is_some(),
            warmup: model.warmup,
            ramp: model.ramp.as_deref().map(parse_ramp).transpose()?,
            workers_flag: "-c",
            rate_flag: "--rate",
        })
    }

    /// These flags with a sweep's `level` in place of the flag it gives (which clap keeps the
    /// user from giving too); a refusal then names the sweep's flag.
    pub(super) fn at_level(&self, level: SweepLevel, streams: u32) -> Self {
        let mut flags = self.clone();
        match level {
            SweepLevel::Workers(n) => {
                flags.workers = Some(n.saturating_mul(streams));
                flags.workers_flag = "--levels";
            }
            SweepLevel::Rate(rate) => {
                flags.rate = Some(rate);
                flags.rate_flag = "--rate-levels";
            }
        }
        flags
    }

    /// No model flags given (a command without them: its runs take a workflow's model).
    pub(super) fn none() -> Self {
        ModelFlags {
            workers_flag: "-c",
            rate_flag: "--rate",
            ..ModelFlags::default()
        }
    }

    /// `-n`, as given.
    pub(super) fn requests(&self) -> Option<u64> {
        self.requests
    }

    /// `--rate` or `--stages`: the open model is asked for.
    fn opens(&self) -> bool {
        self.rate.is_some() || self.stages.is_some()
    }

    /// The open-only flags given, by name.
    fn open_only(&self) -> Option<&'static str> {
        [
            (self.arrivals.is_some(), "--arrivals"),
            (self.max_in_flight.is_some(), "--max-in-flight"),
            (self.max_lateness.is_some(), "--max-lateness"),
            (self.send_window.is_some(), "--send-window"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }

    /// The name of what asked for the open model.
    fn open_flag(&self) -> &'static str {
        if self.rate.is_some() {
            self.rate_flag
        } else {
            "--stages"
        }
    }
}

fn refuse(sentence: String) -> ConfigError {
    ConfigError::ModelFlag(sentence)
}

/// Applies the flags to `spec` (the scenario's model; for a quick run, the default closed
/// model). `scenario` is false for a quick run, whose model nobody wrote, so replacing it is
/// not worth a note.
pub(super) fn apply(
    spec: &mut ModelSpec,
    flags: &ModelFlags,
    scenario: bool,
) -> Result<Applied, ConfigError> {
    check_combinations(flags, spec)?;
    let mut applied = Applied::default();
    if flags.opens() && !matches!(spec, ModelSpec::Open(_)) {
        if scenario {
            applied.notes.push(replaced_note(spec, flags.open_flag()));
        }
        *spec = ModelSpec::Open(empty_open());
    }
    apply_ramp(spec, flags, scenario, &mut applied)?;
    refuse_warmup(spec, flags)?;
    match spec {
        ModelSpec::Closed(closed) => apply_closed(closed, flags),
        ModelSpec::Open(open) => apply_open(open, flags, &mut applied)?,
        ModelSpec::ProducerBuffer(buffer) => apply_to_producer(buffer, flags, &mut applied)?,
        other => apply_caps(other.kind(), flags, &mut applied)?,
    }
    Ok(applied)
}

/// `--ramp`: a closed model (or a quick run's) becomes the ramp model over its sequence, a
/// ramp's stages are replaced; any other model refuses it.
fn apply_ramp(
    spec: &mut ModelSpec,
    flags: &ModelFlags,
    scenario: bool,
    applied: &mut Applied,
) -> Result<(), ConfigError> {
    let Some(stages) = &flags.ramp else {
        return Ok(());
    };
    if flags.warmup.is_some() {
        return Err(refuse(
            "--warmup labels a run's first stretch, and --ramp labels each stage its own \
             phase (each judged apart); drop --warmup, or make the ramp's first stage the \
             warm-up"
                .to_string(),
        ));
    }
    match spec {
        ModelSpec::Closed(_) => {
            if scenario {
                applied.notes.push(replaced_note(spec, "--ramp"));
            }
        }
        ModelSpec::Ramp(_) => {}
        ModelSpec::Open(_) => {
            return Err(refuse(
                "--ramp ramps a closed model's workers, and this scenario's model is open; \
                 ramp its rate with --stages, or run it closed with --set model.kind=closed"
                    .to_string(),
            ))
        }
        other => {
            return Err(refuse(format!(
                "--ramp ramps a closed model's workers, and this scenario's model is {}; \
                 run it closed with --set model.kind=closed --ramp {}",
                other.kind(),
                ramp_text(stages)
            )))
        }
    }
    *spec = ModelSpec::Ramp(RampSpec {
        stages: stages.clone(),
    });
    Ok(())
}

fn ramp_text(stages: &[RampStageSpec]) -> String {
    let parts: Vec<String> = stages
        .iter()
        .map(|s| format!("{}:{}", humantime::format_duration(s.duration.0), s.workers))
        .collect();
    parts.join(",")
}

/// `--warmup` on a model that is neither closed nor open.
fn refuse_warmup(spec: &ModelSpec, flags: &ModelFlags) -> Result<(), ConfigError> {
    match spec {
        _ if flags.warmup.is_none() => Ok(()),
        ModelSpec::Closed(_) | ModelSpec::Open(_) => Ok(()),
        other => Err(refuse(format!(
            "--warmup labels the first stretch of a closed or open model's run, and this \
             scenario's model is {}, whose phases are its own; drop --warmup, or run it \
             closed with --set model.kind=closed",
            other.kind()
        ))),
    }
}

/// The refusals that hold whatever the scenario: `-c`, `-n` or `--think-time` with a rate,
/// and open-only flags on a model that is not open.
fn check_combinations(flags: &ModelFlags, spec: &ModelSpec) -> Result<(), ConfigError> {
    let (workers, open) = (flags.workers_flag, flags.open_flag());
    if flags.opens() {
        if flags.workers.is_some() {
            return Err(refuse(format!(
                "{workers} sets a closed model's workers, but {open} asks for the open model, \
                 which starts workers as sends need them (at most --max-in-flight); give one of \
                 {workers} and {open}"
            )));
        }
        if flags.requests.is_some() {
            return Err(refuse(format!(
                "-n counts a closed model's requests, but {open} asks for the open model, which \
                 sends rate × duration; give -d instead of -n"
            )));
        }
        if flags.think_time {
            return Err(refuse(format!(
                "--think-time pauses a worker between its requests, but {open} asks for the \
                 open model, whose sends follow the arrival rate; drop --think-time or {open}"
            )));
        }
    }
    let open_model = flags.opens() || matches!(spec, ModelSpec::Open(_));
    match flags.open_only() {
        Some(flag) if !open_model => Err(refuse(format!(
            "{flag} applies to the open model only, and this run's model is {}; give --rate or \
             --stages with it (or drop {flag})",
            spec.kind()
        ))),
        _ => Ok(()),
    }
}

/// An open model with nothing scheduled yet, for the flags to fill.
fn empty_open() -> OpenSpec {
    OpenSpec {
        rate: None,
        duration: None,
        stages: None,
        arrivals: Arrivals::default(),
        max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        max_lateness: Dur(DEFAULT_MAX_LATENESS),
        send_window: None,
        warmup: None,
    }
}

/// The note for a scenario whose model `--rate` replaced: what of it is not used.
fn replaced_note(spec: &ModelSpec, flag: &str) -> String {
    let unused: Vec<String> = toml::Value::try_from(spec)
        .ok()
        .and_then(|v| v.as_table().cloned())
        .map(|t| t.keys().filter(|k| *k != "kind").cloned().collect())
        .unwrap_or_default();
    format!(
        "{flag} runs the scenario's requests under the open model instead of its {} model; \
         not used: {}",
        spec.kind(),
        unused.join(", ")
    )
}

fn apply_closed(closed: &mut ClosedSpec, flags: &ModelFlags) {
    if let Some(workers) = flags.workers {
        closed.workers = workers;
    }
    if let Some(warmup) = flags.warmup {
        closed.warmup = Some(Dur(warmup));
    }
    if let Some(d) = flags.duration {
        closed.duration = Some(Dur(d));
        closed.requests = None;
    }
    if let Some(n) = flags.requests {
        closed.requests = Some(n);
        closed.duration = None;
    }
}

/// `--rate`/`--stages` set the schedule (a new `--rate` replaces a ramp and vice versa); `-d`
/// is a constant rate's duration, or caps a ramp.
fn apply_open(
    open: &mut OpenSpec,
    flags: &ModelFlags,
    applied: &mut Applied,
) -> Result<(), ConfigError> {
    refuse_closed_flags("open", flags)?;
    if flags.opens() {
        open.rate = flags.rate;
        open.stages = flags.stages.clone();
        open.duration = None;
    }
    match (flags.duration, &open.stages) {
        (Some(d), Some(_)) => applied.duration_cap = Some(d),
        (Some(d), None) => open.duration = Some(Dur(d)),
        (None, None) if open.duration.is_none() => open.duration = Some(Dur(DEFAULT_DURATION)),
        (None, _) => {}
    }
    open.arrivals = flags.arrivals.unwrap_or(open.arrivals);
    open.max_in_flight = flags.max_in_flight.unwrap_or(open.max_in_flight);
    if let Some(lateness) = flags.max_lateness {
        open.max_lateness = Dur(lateness);
    }
    if let Some(window) = flags.send_window {
        open.send_window = Some(Dur(window));
    }
    if let Some(warmup) = flags.warmup {
        open.warmup = Some(Dur(warmup));
    }
    Ok(())
}

/// `-c` on a model that is not closed, and `-n` or `--think-time` on the open model.
fn refuse_closed_flags(kind: &str, flags: &ModelFlags) -> Result<(), ConfigError> {
    if flags.workers.is_some() {
        let workers = flags.workers_flag;
        return Err(refuse(format!(
            "{workers} sets a closed model's workers, and this scenario's model is {kind}; \
             shape it with --set model.FIELD=VALUE, or run it closed with \
             --set model.kind=closed {workers} N"
        )));
    }
    if kind != "open" {
        return Ok(());
    }
    if flags.requests.is_some() {
        return Err(refuse(
            "-n counts a closed model's requests, and this scenario's model is open (it sends \
             rate × duration); give -d, or --set model.kind=closed -n N"
                .to_string(),
        ));
    }
    if flags.think_time {
        return Err(refuse(
            "--think-time pauses a worker between its requests, and this scenario's model is \
             open (its sends follow the arrival rate); drop --think-time, or \
             --set model.kind=closed"
                .to_string(),
        ));
    }
    Ok(())
}

/// Thread-groups and phased: `-d` and `-n` cap the run.
fn apply_caps(kind: &str, flags: &ModelFlags, applied: &mut Applied) -> Result<(), ConfigError> {
    refuse_closed_flags(kind, flags)?;
    applied.duration_cap = flags.duration;
    applied.request_cap = flags.requests;
    Ok(())
}

/// Producer-buffer: `-d` caps the run, `-n` caps the payloads the producer makes (`total`).
fn apply_to_producer(
    buffer: &mut ProducerBufferSpec,
    flags: &ModelFlags,
    applied: &mut Applied,
) -> Result<(), ConfigError> {
    refuse_closed_flags("producer-buffer", flags)?;
    applied.duration_cap = flags.duration;
    if let Some(n) = flags.requests {
        buffer.total = buffer.total.min(n);
    }
    Ok(())
}

/// The note when `-n` (or a closed scenario's `requests`) is not a whole number of
/// iterations of an `len`-request sequence: it is rounded up, so no worker stops between the
/// steps of its sequence. Returns the rounded count too.
pub(super) fn whole_iterations(requests: u64, len: usize, what: &str) -> (u64, Option<String>) {
    let len = len.max(1) as u64;
    let rounded = requests.div_ceil(len) * len;
    let note = (rounded != requests).then(|| {
        format!(
            "{what} {requests} is rounded up to {rounded} requests: {} whole iterations of the \
             {len}-request sequence",
            rounded / len
        )
    });
    (rounded, note)
}
