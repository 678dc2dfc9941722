//! From a parsed scenario to what the engine runs: validated values, compiled templates and a
//! model plan. Every rule a scenario must follow is checked here, before any request is sent,
//! and each violation names the field path, the value and what is allowed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use std::time::Duration;

use hyper::header::{HeaderName, HeaderValue};
use hyper::Method;

use super::schema::{
    ClosedSpec, FieldSpec, Literal, ModelSpec, PartSpec, PhasedSpec, ProducerBufferSpec,
    RequestSpec, Rounding, Scenario, StatusSpec, ThreadGroupsSpec, WalkSpec, WorkerCount,
};
use crate::model::closed::Walk;
use crate::model::open::{OpenPlan, Stage};
use crate::model::phased::{PhasePlan, PhasedPlan, StartRule};
use crate::model::producer_buffer::ProducerBufferPlan;
use crate::model::thread_groups::ThreadGroupsPlan;
use crate::model::Limit;
use crate::model::ModelPlan;
use crate::workload::fields::{Fields, Generator, Value};
use crate::workload::template::{blob, Body, Json, Part, PartContent, Text};
use crate::workload::{RequestTemplate, StatusSet, Workload};

/// A rule a scenario broke: where (field path) and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub path: String,
    pub message: String,
}

fn violation(path: impl Into<String>, message: impl Into<String>) -> Violation {
    Violation {
        path: path.into(),
        message: message.into(),
    }
}

/// A scenario ready to run.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub workload: Workload,
    pub model: ModelPlan,
    pub timeout: Option<Duration>,
    pub connect_timeout: Option<Duration>,
    pub think_time: Option<Duration>,
}

/// Validates `scenario` and builds its workload and model plan; request paths are relative
/// to `base_path` (the target URL's path, without a trailing `/`).
pub fn compile(scenario: &Scenario, base_path: &str) -> Result<Compiled, Violation> {
    let fields = compile_fields(&scenario.fields, "fields", &Fields::default())?;

    if scenario.requests.is_empty() {
        return Err(violation(
            "requests",
            "at least one request template is required",
        ));
    }
    if scenario.sequence.is_empty() {
        return Err(violation(
            "sequence",
            "must name at least one request, e.g. sequence = [\"get_album\"]",
        ));
    }
    // Ops are the requests the sequence uses, in order of first use.
    let mut op_names: Vec<&str> = Vec::new();
    let mut sequence = Vec::new();
    for (i, name) in scenario.sequence.iter().enumerate() {
        if !scenario.requests.contains_key(name) {
            let defined: Vec<&str> = scenario.requests.keys().map(String::as_str).collect();
            return Err(violation(
                format!("sequence[{i}]"),
                format!(
                    "'{name}' is not defined under [requests] (defined: {})",
                    defined.join(", ")
                ),
            ));
        }
        let op = match op_names.iter().position(|n| n == name) {
            Some(op) => op,
            None => {
                op_names.push(name);
                op_names.len() - 1
            }
        };
        sequence.push(op as u16);
    }

    let default_headers = compile_headers(&scenario.defaults.headers, "defaults.headers")?;
    let default_expect = match &scenario.defaults.expect {
        Some(specs) => compile_statuses(specs, "defaults.expect")?,
        None => StatusSet::default(),
    };
    let mut rng = fastrand::Rng::new();
    let mut templates = Vec::new();
    for name in &op_names {
        let spec = &scenario.requests[*name];
        templates.push(compile_request(
            spec,
            &format!("requests.{name}"),
            &fields,
            &default_headers,
            &default_expect,
            base_path,
            &mut rng,
        )?);
    }

    let (model, phase_overrides) = compile_model(&scenario.model, sequence, &fields)?;
    let phase_fields = phase_overrides
        .into_iter()
        .map(|overrides| fields.with_overrides(&overrides))
        .collect();
    Ok(Compiled {
        workload: Workload {
            templates,
            phase_fields,
        },
        model,
        timeout: scenario.defaults.timeout.map(|d| d.0),
        connect_timeout: scenario.defaults.connect_timeout.map(|d| d.0),
        think_time: scenario.defaults.think_time.map(|d| d.0),
    })
}

fn compile_fields(
    specs: &BTreeMap<String, FieldSpec>,
    path: &str,
    base: &Fields,
) -> Result<Fields, Violation> {
    let mut fields = base.clone();
    for (name, spec) in specs {
        let here = format!("{path}.{name}");
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(violation(
                here,
                "field names use letters, digits and _ only",
            ));
        }
        fields.push(name, generator(spec, &here)?);
    }
    Ok(fields)
}

fn generator(spec: &FieldSpec, path: &str) -> Result<Generator, Violation> {
    Ok(match spec {
        FieldSpec::Int([min, max]) => {
            if min > max {
                return Err(violation(
                    format!("{path}.int"),
                    format!("[{min}, {max}] is empty; write [min, max] with min <= max"),
                ));
            }
            Generator::Int {
                min: *min,
                max: *max,
            }
        }
        FieldSpec::Choice(options) => {
            if options.is_empty() {
                return Err(violation(
                    format!("{path}.choice"),
                    "needs at least one option",
                ));
            }
            Generator::Choice(options.clone())
        }
        FieldSpec::Sequence(start) => Generator::Sequence(Arc::new(AtomicI64::new(*start))),
        FieldSpec::Literal(Literal::Int(n)) => Generator::Literal(Value::Int(*n)),
        FieldSpec::Literal(Literal::Str(s)) => Generator::Literal(Value::Str(s.clone())),
        FieldSpec::Chars(n) => Generator::Chars(*n),
    })
}

fn compile_headers(
    headers: &BTreeMap<String, String>,
    path: &str,
) -> Result<Vec<(HeaderName, HeaderValue)>, Violation> {
    headers
        .iter()
        .map(|(name, value)| {
            let here = format!("{path}.{name}");
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| violation(&here, "is not a valid header name"))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| violation(&here, "is not a valid header value"))?;
            Ok((name, value))
        })
        .collect()
}

fn compile_statuses(specs: &[StatusSpec], path: &str) -> Result<StatusSet, Violation> {
    let mut ranges = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let bad = || {
            violation(
                format!("{path}[{i}]"),
                "write a status code (201), a range (\"200-299\") or a class (\"2xx\")",
            )
        };
        let range = match spec {
            StatusSpec::Code(code) if (100..=599).contains(code) => *code..=*code,
            StatusSpec::Code(_) => return Err(bad()),
            StatusSpec::Range(text) => {
                let text = text.trim().to_ascii_lowercase();
                if let Some(class) = text.strip_suffix("xx") {
                    let digit: u16 = class.parse().map_err(|_| bad())?;
                    if !(1..=5).contains(&digit) {
                        return Err(bad());
                    }
                    digit * 100..=digit * 100 + 99
                } else {
                    let (lo, hi) = text.split_once('-').ok_or_else(bad)?;
                    let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
                    let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
                    if lo > hi {
                        return Err(bad());
                    }
                    lo..=hi
                }
            }
        };
        ranges.push(range);
    }
    if ranges.is_empty() {
        return Err(violation(path, "must list at least one status"));
    }
    Ok(StatusSet(ranges))
}

fn compile_request(
    spec: &RequestSpec,
    path: &str,
    fields: &Fields,
    default_headers: &[(HeaderName, HeaderValue)],
    default_expect: &StatusSet,
    base_path: &str,
    rng: &mut fastrand::Rng,
) -> Result<RequestTemplate, Violation> {
    let method = Method::from_bytes(spec.method.to_ascii_uppercase().as_bytes()).map_err(|_| {
        violation(
            format!("{path}.method"),
            format!(
                "'{}' is not an HTTP method; use e.g. GET or POST",
                spec.method
            ),
        )
    })?;
    if !spec.path.starts_with('/') {
        return Err(violation(
            format!("{path}.path"),
            format!(
                "'{}' must start with '/' (it is relative to the target)",
                spec.path
            ),
        ));
    }
    let base = base_path.replace('{', "{{").replace('}', "}}");
    let url_path = Text::parse(&format!("{base}{}", spec.path), fields)
        .map_err(|m| violation(format!("{path}.path"), m))?;
    let bodies = [
        spec.body.is_some(),
        spec.json.is_some(),
        spec.multipart.is_some(),
    ];
    if bodies.iter().filter(|b| **b).count() > 1 {
        return Err(violation(
            path,
            "give at most one of body, json and multipart",
        ));
    }
    let body = if let Some(text) = &spec.body {
        Body::Text(Text::parse(text, fields).map_err(|m| violation(format!("{path}.body"), m))?)
    } else if let Some(json) = &spec.json {
        Body::Json(Json::from_toml(json, fields).map_err(|m| violation(format!("{path}.json"), m))?)
    } else if let Some(parts) = &spec.multipart {
        let mut compiled = Vec::new();
        for (name, part) in parts {
            compiled.push(compile_part(
                name,
                part,
                &format!("{path}.multipart.{name}"),
                fields,
                rng,
            )?);
        }
        if compiled.is_empty() {
            return Err(violation(
                format!("{path}.multipart"),
                "needs at least one part",
            ));
        }
        Body::Multipart {
            boundary: format!("loadgen-{:016x}", rng.u64(..)),
            parts: compiled,
        }
    } else {
        Body::Empty
    };
    let mut headers = default_headers.to_vec();
    headers.extend(compile_headers(&spec.headers, &format!("{path}.headers"))?);
    let expect = match &spec.expect {
        Some(specs) => compile_statuses(specs, &format!("{path}.expect"))?,
        None => default_expect.clone(),
    };
    RequestTemplate::new(spec.label.clone(), method, url_path, &headers, body, expect)
        .map_err(|e| violation(format!("{path}.path"), e.to_string()))
}

/// Refuses an open-model rate beyond what one process schedules, so a typo (`--rate 1e9`)
/// is an error, not a run that cannot keep its schedule or its duration.
fn check_schedulable(stages: &[Stage], staged: bool) -> Result<(), Violation> {
    use crate::model::open::MAX_RATE_RPS;
    let peak_rps = stages
        .iter()
        .map(|s| s.from_rps.max(s.to_rps))
        .fold(0.0, f64::max);
    if peak_rps <= MAX_RATE_RPS {
        return Ok(());
    }
    Err(violation(
        if staged { "model.stages" } else { "model.rate" },
        format!(
            "{peak_rps} requests/s is more than one loadgen process schedules (at most \
             {MAX_RATE_RPS} requests/s: one dispatcher hands out every send); split higher \
             rates over several processes with --shard I/N"
        ),
    ))
}

/// The largest generated multipart part (`bytes = …`); see [`compile_part`].
const MAX_GENERATED_PART_BYTES: usize = 1 << 30;

fn compile_part(
    name: &str,
    spec: &PartSpec,
    path: &str,
    fields: &Fields,
    rng: &mut fastrand::Rng,
) -> Result<Part, Violation> {
    let given = [
        spec.json.is_some(),
        spec.text.is_some(),
        spec.bytes.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(violation(path, "give exactly one of json, text and bytes"));
    }
    let (content, default_type) = if let Some(json) = &spec.json {
        let json =
            Json::from_toml(json, fields).map_err(|m| violation(format!("{path}.json"), m))?;
        (PartContent::Json(json), "application/json")
    } else if let Some(text) = &spec.text {
        let text = Text::parse(text, fields).map_err(|m| violation(format!("{path}.text"), m))?;
        (PartContent::Text(text), "text/plain")
    } else {
        let size = spec.bytes.map_or(0, |b| b.0);
        if size > MAX_GENERATED_PART_BYTES {
            return Err(violation(
                format!("{path}.bytes"),
                format!(
                    "{size} bytes is more than loadgen generates for one part (1GiB): the \
                     part is held in memory, and every request in flight renders its body \
                     around it; use at most \"1GiB\""
                ),
            ));
        }
        (
            PartContent::Blob(blob(size, rng)),
            "application/octet-stream",
        )
    };
    Ok(Part {
        name: name.to_string(),
        filename: spec.filename.clone(),
        content_type: spec
            .content_type
            .clone()
            .unwrap_or_else(|| default_type.to_string()),
        content,
    })
}

fn at_least_one(path: &str, value: u64) -> Result<(), Violation> {
    if value == 0 {
        return Err(violation(path, "must be at least 1 (got 0)"));
    }
    Ok(())
}

type PhaseOverrides = Vec<Vec<(String, Generator)>>;

/// Validates a model section and builds its plan, with each phase's field overrides.
pub fn compile_model(
    spec: &ModelSpec,
    sequence: Vec<u16>,
    fields: &Fields,
) -> Result<(ModelPlan, PhaseOverrides), Violation> {
    let sequence: Arc<[u16]> = sequence.into();
    match spec {
        ModelSpec::Closed(ClosedSpec {
            workers,
            requests,
            duration,
        }) => {
            at_least_one("model.workers", u64::from(*workers))?;
            let limit = match (requests, duration) {
                (Some(_), Some(_)) => {
                    return Err(violation("model", "give requests or duration, not both"))
                }
                (Some(n), None) => {
                    at_least_one("model.requests", *n)?;
                    Limit::Requests(*n)
                }
                (None, Some(d)) if d.0.is_zero() => {
                    return Err(violation("model.duration", "must be longer than 0"))
                }
                (None, Some(d)) => Limit::Duration(d.0),
                (None, None) => Limit::Duration(crate::model::DEFAULT_DURATION),
            };
            Ok((
                ModelPlan::Closed {
                    workers: *workers,
                    limit,
                    sequence,
                },
                vec![Vec::new()],
            ))
        }
        ModelSpec::ThreadGroups(ThreadGroupsSpec {
            startup,
            groups,
            group_size,
            delay,
            iterations,
        }) => {
            at_least_one("model.groups", u64::from(*groups))?;
            at_least_one("model.group_size", u64::from(*group_size))?;
            at_least_one("model.iterations", *iterations)?;
            if let Some(s) = startup {
                at_least_one("model.startup.workers", u64::from(s.workers))?;
                at_least_one("model.startup.iterations", s.iterations)?;
            }
            let plan = ThreadGroupsPlan {
                startup: startup.as_ref().map(|s| (s.workers, s.iterations)),
                groups: *groups,
                group_size: *group_size,
                delay: delay.0,
                iterations: *iterations,
                sequence,
            };
            let phases = plan.phase_labels().len();
            Ok((ModelPlan::ThreadGroups(plan), vec![Vec::new(); phases]))
        }
        ModelSpec::ProducerBuffer(ProducerBufferSpec {
            total,
            buffer,
            initial_workers,
            requests_per_worker,
            max_workers,
            retries,
            backoff,
        }) => {
            at_least_one("model.total", *total)?;
            at_least_one("model.buffer", *buffer as u64)?;
            at_least_one("model.initial_workers", u64::from(*initial_workers))?;
            at_least_one("model.requests_per_worker", *requests_per_worker)?;
            if max_workers < initial_workers {
                return Err(violation(
                    "model.max_workers",
                    format!(
                        "must be at least initial_workers ({initial_workers}), got {max_workers}"
                    ),
                ));
            }
            if *retries > 100 {
                return Err(violation(
                    "model.retries",
                    format!("must be at most 100 (got {retries})"),
                ));
            }
            Ok((
                ModelPlan::ProducerBuffer(ProducerBufferPlan {
                    total: *total,
                    buffer: *buffer,
                    initial_workers: *initial_workers,
                    requests_per_worker: *requests_per_worker,
                    max_workers: *max_workers,
                    retries: *retries as u8,
                    backoff: backoff.0,
                    sequence,
                }),
                vec![Vec::new(); 2],
            ))
        }
        ModelSpec::Open(open) => {
            let mut stages = Vec::new();
            let positive = |path: &str, rate: f64| {
                if rate.is_finite() && rate >= 0.0 {
                    Ok(rate)
                } else {
                    Err(violation(
                        path,
                        format!("{rate} is not a rate; give requests per second >= 0"),
                    ))
                }
            };
            match (&open.stages, open.rate, open.duration) {
                (Some(_), _, Some(_)) => {
                    return Err(violation("model", "give stages, or rate with duration, not both"))
                }
                (Some(list), start, None) => {
                    let mut from = positive("model.rate", start.unwrap_or(0.0))?;
                    for (i, stage) in list.iter().enumerate() {
                        let to = positive(&format!("model.stages[{i}].rate"), stage.rate)?;
                        if stage.duration.0.is_zero() {
                            return Err(violation(format!("model.stages[{i}].duration"), "must be longer than 0"));
                        }
                        stages.push(Stage { duration: stage.duration.0, from_rps: from, to_rps: to });
                        from = to;
                    }
                    if stages.is_empty() {
                        return Err(violation("model.stages", "needs at least one stage"));
                    }
                }
                (None, Some(rate), Some(duration)) => {
                    if !(rate.is_finite() && rate > 0.0) {
                        return Err(violation("model.rate", format!("{rate} is not a rate; give requests per second > 0")));
                    }
                    if duration.0.is_zero() {
                        return Err(violation("model.duration", "must be longer than 0"));
                    }
                    stages.push(Stage { duration: duration.0, from_rps: rate, to_rps: rate });
                }
                (None, _, _) => {
                    return Err(violation(
                        "model",
                        "the open model needs rate and duration, or stages = [{ duration = \"30s\", rate = 100 }, …]",
                    ))
                }
            }
            check_schedulable(&stages, open.stages.is_some())?;
            at_least_one("model.max_in_flight", u64::from(open.max_in_flight))?;
            Ok((
                ModelPlan::Open(OpenPlan {
                    stages,
                    arrivals: open.arrivals,
                    max_in_flight: open.max_in_flight,
                    max_lateness: open.max_lateness.0,
                    sequence,
                    offset: 0.0,
                }),
                vec![Vec::new()],
            ))
        }
        ModelSpec::Phased(spec) => {
            let PhasedSpec {
                max_workers,
                phases,
                ..
            } = spec;
            at_least_one("model.max_workers", u64::from(*max_workers))?;
            if phases.is_empty() {
                return Err(violation("model.phases", "needs at least one phase"));
            }
            let default_when_done = spec.when_done.unwrap_or(1.0);
            check_when_done("model.when_done", default_when_done, "the previous phase's")?;
            let mut names = BTreeSet::new();
            let mut plans: Vec<PhasePlan> = Vec::new();
            let mut overrides = Vec::new();
            for (i, phase) in phases.iter().enumerate() {
                let here = format!("model.phases[{i}]");
                if !names.insert(phase.name.clone()) {
                    return Err(violation(
                        format!("{here}.name"),
                        format!(
                            "'{}' is used by an earlier phase; names must be unique",
                            phase.name
                        ),
                    ));
                }
                let workers = phase_workers(phase.workers, *max_workers, spec.round, &here)?;
                let start = match (&phase.after, phase.when_done, phase.at) {
                    (Some(_), _, Some(_)) => {
                        return Err(violation(
                            &here,
                            "give either after (+ when_done) or at, not both",
                        ))
                    }
                    (Some(after), when_done, None) => {
                        let Some(previous) = plans.iter().position(|p| &p.name == after) else {
                            return Err(violation(
                                format!("{here}.after"),
                                format!("'{after}' is not an earlier phase (phases start in the order listed)"),
                            ));
                        };
                        let fraction = when_done.unwrap_or(default_when_done);
                        check_when_done(
                            &format!("{here}.when_done"),
                            fraction,
                            &format!("'{after}'"),
                        )?;
                        StartRule::After {
                            phase: previous,
                            finished: finished_needed(fraction, plans[previous].workers),
                        }
                    }
                    (None, Some(_), _) => {
                        return Err(violation(
                            format!("{here}.when_done"),
                            "needs after = \"<earlier phase>\"",
                        ))
                    }
                    (None, None, Some(at)) => StartRule::At(at.0),
                    (None, None, None) if i == 0 => StartRule::At(Duration::ZERO),
                    (None, None, None) => StartRule::After {
                        phase: i - 1,
                        finished: finished_needed(default_when_done, plans[i - 1].workers),
                    },
                };
                let phase_fields =
                    compile_fields(&phase.fields, &format!("{here}.fields"), &Fields::default())?;
                let mut phase_overrides = Vec::new();
                for name in phase_fields.names() {
                    if fields.index(name).is_none() {
                        return Err(violation(
                            format!("{here}.fields.{name}"),
                            "overrides a field that is not declared under [fields]",
                        ));
                    }
                    let spec = &phase.fields[name];
                    phase_overrides.push((
                        name.clone(),
                        generator(spec, &format!("{here}.fields.{name}"))?,
                    ));
                }
                let walk = match &phase.walk {
                    Some(walk) => Some(compile_walk(
                        walk,
                        spec.iterations_per_step,
                        fields.with_overrides(&phase_overrides),
                        &here,
                    )?),
                    None => None,
                };
                let requests_per_worker = match (phase.requests_per_worker, &walk) {
                    (Some(_), Some(_)) => {
                        return Err(violation(
                            format!("{here}.requests_per_worker"),
                            "give either requests_per_worker or walk (which sets it: steps × iterations_per_step × sequence length), not both",
                        ))
                    }
                    (Some(n), None) => n,
                    (None, Some(walk)) => walk.requests(sequence.len()),
                    (None, None) => {
                        return Err(violation(
                            format!("{here}.requests_per_worker"),
                            "is missing: give the requests each worker sends, e.g. requests_per_worker = 200",
                        ))
                    }
                };
                at_least_one(&format!("{here}.requests_per_worker"), requests_per_worker)?;
                overrides.push(phase_overrides);
                plans.push(PhasePlan {
                    name: phase.name.clone(),
                    workers,
                    requests_per_worker,
                    start,
                    walk,
                });
            }
            Ok((
                ModelPlan::Phased(PhasedPlan {
                    phases: plans,
                    sequence,
                }),
                overrides,
            ))
        }
    }
}

/// A phase's worker count: a count as given, or a fraction of `max_workers` rounded as the
/// scenario says (down by default, like the course clients' integer division), at least 1.
fn phase_workers(
    workers: WorkerCount,
    max_workers: u32,
    round: Rounding,
    here: &str,
) -> Result<u32, Violation> {
    match workers {
        WorkerCount::Count(n) => {
            at_least_one(&format!("{here}.workers"), u64::from(n))?;
            Ok(n)
        }
        WorkerCount::Fraction(f) if f > 0.0 && f <= 1.0 => {
            let exact = f * f64::from(max_workers);
            // A hair of tolerance so 0.1 × 30 (= 3.0000000000000004) is 3, not 4, when up.
            let rounded = match round {
                Rounding::Down => (exact + 1e-9).floor(),
                Rounding::Up => (exact - 1e-9).ceil(),
                Rounding::Nearest => exact.round(),
            };
            Ok((rounded as u32).max(1))
        }
        WorkerCount::Fraction(f) => Err(violation(
            format!("{here}.workers"),
            format!(
                "{f} is neither a worker count (1, 2, …) nor a fraction of max_workers in (0, 1]"
            ),
        )),
    }
}

fn check_when_done(path: &str, fraction: f64, of: &str) -> Result<(), Violation> {
    if fraction > 0.0 && fraction <= 1.0 {
        Ok(())
    } else {
        Err(violation(
            path,
            format!("{fraction} is outside (0, 1]; it is the fraction of {of} workers that must finish first"),
        ))
    }
}

/// How many of a phase's `workers` must finish for `fraction` of it to be done.
fn finished_needed(fraction: f64, workers: u32) -> u32 {
    ((fraction * f64::from(workers) - 1e-9).ceil() as u32).max(1)
}

/// A phase's `walk`: the field must be declared, the range non-empty, and the model must say
/// how many iterations each value gets.
fn compile_walk(
    walk: &WalkSpec,
    iterations_per_step: Option<u64>,
    fields: Fields,
    here: &str,
) -> Result<Walk, Violation> {
    let path = format!("{here}.walk");
    let Some(field) = fields.index(&walk.field) else {
        return Err(violation(
            format!("{path}.field"),
            format!("'{}' is not declared under [fields]", walk.field),
        ));
    };
    if walk.to < walk.from {
        return Err(violation(
            &path,
            format!(
                "to ({}) is below from ({}); the walk goes up from `from` to `to`",
                walk.to, walk.from
            ),
        ));
    }
    let Some(iterations_per_step) = iterations_per_step.filter(|&n| n > 0) else {
        return Err(violation(
            "model.iterations_per_step",
            "is needed (at least 1) when a phase has a walk: the iterations each worker runs at each value",
        ));
    };
    Ok(Walk {
        fields,
        field,
        from: walk.from,
        steps: walk.to.abs_diff(walk.from) + 1,
        iterations_per_step,
    })
}
