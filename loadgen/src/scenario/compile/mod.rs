//! From a parsed scenario to what the engine runs: validated values, compiled templates and a
//! model plan. Every rule a scenario must follow is checked here, before any request is sent,
//! and each violation names the field path, the value and what is allowed.
//!
//! The workload half (fields, headers, statuses, request templates) is `workload`; each
//! model's `[model]` section is checked and turned into that model's plan by its own file
//! (`closed`, `thread_groups`, `producer_buffer`, `phased`, `open`), behind
//! `CompileModel`. Compilation lives here rather than beside the plans in `model/` because
//! it reads the scenario's spec types and speaks in scenario field paths (`model.workers`):
//! scenario depends on model, never the reverse, so a model file stays about scheduling.
//! Quick runs (`loadgen run --url …`) and calibrations synthesize a [`ModelSpec`] and come
//! through [`compile_model`] too, so every plan is validated by the same rules.

mod closed;
mod open;
mod phased;
mod producer_buffer;
mod ramp;
mod rules;
mod thread_groups;
mod workload;

use std::sync::Arc;
use std::time::Duration;

use super::schema::{ModelSpec, Scenario};
use crate::model::ModelPlan;
use crate::workload::fields::{Fields, Generator};
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
    let mut fields = workload::compile_fields(&scenario.fields, "fields", &Fields::default())?;
    rules::declare_extracted(&scenario.requests, &mut fields)?;
    let (op_names, sequence) = ops(scenario)?;
    let default_headers =
        workload::compile_headers(&scenario.defaults.headers, "defaults.headers")?;
    let default_expect = match &scenario.defaults.expect {
        Some(specs) => workload::compile_statuses(specs, "defaults.expect")?,
        None => StatusSet::default(),
    };
    let mut rng = fastrand::Rng::new();
    let mut templates = Vec::new();
    let mut check_names = rules::CheckNames::default();
    for name in &op_names {
        let (spec, path) = (&scenario.requests[*name], format!("requests.{name}"));
        let template = workload::compile_request(
            spec,
            &path,
            &fields,
            &default_headers,
            &default_expect,
            base_path,
            &mut rng,
        )?;
        let rules = rules::compile_rules(spec, &path, &fields, &mut check_names)?;
        templates.push(template.with_rules(rules, &fields));
    }
    workload::unique_labels(&op_names, scenario, &mut templates)?;
    rules::check_chain(&op_names, &sequence, &templates, &fields)?;
    let mut compiled = finish(scenario, templates, sequence, &fields)?;
    compiled.workload.check_names = check_names.into_names();
    compiled.workload.request_names = op_names.iter().map(|n| n.to_string()).collect();
    chain_iterations(&mut compiled, &op_names)?;
    Ok(compiled)
}

/// With extraction, one worker must send a whole iteration (its session carries the values):
/// the open model then schedules iterations instead of single requests, and the
/// producer-buffer model, which hands each request to any consumer, is refused.
fn chain_iterations(compiled: &mut Compiled, op_names: &[&str]) -> Result<(), Violation> {
    let templates = &compiled.workload.templates;
    let Some(op) = templates.iter().position(|t| !t.rules.extracts.is_empty()) else {
        return Ok(());
    };
    match &mut compiled.model {
        ModelPlan::Open(plan) => plan.chained = true,
        ModelPlan::ProducerBuffer(_) => {
            return Err(violation(
                format!("requests.{}.extract", op_names[op]),
                "extraction needs one worker to send a whole iteration, and the \
                 producer-buffer model hands each request to any consumer; use the closed, \
                 thread-groups, phased or open model",
            ))
        }
        _ => {}
    }
    Ok(())
}

/// A scenario whose one request (the whole sequence) is given already compiled — a quick
/// run's command-line path and body are literal, never templates — and whose model, fields
/// and defaults are compiled as [`compile`] does.
pub fn compile_literal(
    scenario: &Scenario,
    request: RequestTemplate,
) -> Result<Compiled, Violation> {
    compile_literals(scenario, vec![request], vec![0])
}

/// As [`compile_literal`], for several literal requests and the sequence of one iteration
/// (indices into `requests`): a `--targets` file's. Under the open model `--rate` is in
/// requests per second, as vegeta means it for a targets file: each arrival sends the
/// sequence's next request (literal requests extract nothing, so no worker need send a whole
/// iteration); only a scenario's sequence is scheduled by iterations.
pub fn compile_literals(
    scenario: &Scenario,
    requests: Vec<RequestTemplate>,
    sequence: Vec<u16>,
) -> Result<Compiled, Violation> {
    let fields = workload::compile_fields(&scenario.fields, "fields", &Fields::default())?;
    let mut compiled = finish(scenario, requests, sequence, &fields)?;
    if let ModelPlan::Open(plan) = &mut compiled.model {
        plan.chained = false;
    }
    Ok(compiled)
}

/// The model plan and the scenario-wide defaults, around compiled templates.
fn finish(
    scenario: &Scenario,
    templates: Vec<RequestTemplate>,
    sequence: Vec<u16>,
    fields: &Fields,
) -> Result<Compiled, Violation> {
    let (model, phase_overrides) = compile_model(&scenario.model, sequence, fields)?;
    let phase_fields = phase_overrides
        .into_iter()
        .map(|overrides| fields.with_overrides(&overrides))
        .collect();
    Ok(Compiled {
        workload: Workload {
            templates,
            check_names: Vec::new(),
            request_names: Vec::new(),
            phase_fields,
        },
        model,
        timeout: scenario.defaults.timeout.map(|d| d.0),
        connect_timeout: scenario.defaults.connect_timeout.map(|d| d.0),
        think_time: scenario.defaults.think_time.map(|d| d.0),
    })
}

/// The requests the sequence uses, in order of first use (the ops), and the sequence as op
/// numbers.
fn ops(scenario: &Scenario) -> Result<(Vec<&str>, Vec<u16>), Violation> {
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
    Ok((op_names, sequence))
}

/// Field overrides of each phase of a plan (`[name, generator]` per phase).
pub type PhaseOverrides = Vec<Vec<(String, Generator)>>;

/// A model section that checks itself and becomes its model's plan; one implementation per
/// model, in that model's file here.
trait CompileModel {
    /// The plan, with each phase's field overrides; `fields` are the scenario's.
    fn compile(
        &self,
        sequence: Arc<[u16]>,
        fields: &Fields,
    ) -> Result<(ModelPlan, PhaseOverrides), Violation>;
}

/// Validates a model section and builds its plan, with each phase's field overrides.
pub fn compile_model(
    spec: &ModelSpec,
    sequence: Vec<u16>,
    fields: &Fields,
) -> Result<(ModelPlan, PhaseOverrides), Violation> {
    let sequence: Arc<[u16]> = sequence.into();
    match spec {
        ModelSpec::Closed(spec) => spec.compile(sequence, fields),
        ModelSpec::ThreadGroups(spec) => spec.compile(sequence, fields),
        ModelSpec::ProducerBuffer(spec) => spec.compile(sequence, fields),
        ModelSpec::Phased(spec) => spec.compile(sequence, fields),
        ModelSpec::Open(spec) => spec.compile(sequence, fields),
        ModelSpec::Ramp(spec) => spec.compile(sequence, fields),
    }
}

/// A plan whose phases override no fields.
fn without_overrides(plan: ModelPlan) -> (ModelPlan, PhaseOverrides) {
    let phases = plan.plan().phase_labels().len();
    (plan, vec![Vec::new(); phases])
}

fn at_least_one(path: &str, value: u64) -> Result<(), Violation> {
    if value == 0 {
        return Err(violation(path, "must be at least 1 (got 0)"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Limit;

    /// A two-request scenario (`a`, `b`, `a`) around `model`.
    fn compile_model_toml(model: &str) -> ModelPlan {
        let text = format!(
            "sequence = [\"a\", \"b\", \"a\"]\n[requests.a]\nmethod = \"GET\"\npath = \"/a\"\n\
             [requests.b]\nmethod = \"GET\"\npath = \"/b\"\n[model]\n{model}\n"
        );
        let scenario = crate::scenario::parse("test", &text, &[]).unwrap();
        compile(&scenario, "").unwrap().model
    }

    /// What a model section compiles to, as the runner and the console ask for it.
    struct Expected {
        model: &'static str,
        kind: &'static str,
        describe: &'static str,
        labels: &'static [&'static str],
        extent: Limit,
        workers: u32,
        attempts: u8,
    }

    /// Each model's file answers for it: the scenario's `kind`, the console line, the phase
    /// labels, the extent, the peak workers and the attempts, as the runner asks for them.
    #[test]
    fn each_model_compiles_to_its_own_plan() {
        let cases = [
            Expected {
                model: "kind = \"closed\"\nworkers = 4\nrequests = 30",
                kind: "closed",
                describe: "closed model, 4 workers, 30 requests",
                labels: &["main"],
                extent: Limit::Requests(30),
                workers: 4,
                attempts: 1,
            },
            Expected {
                model: "kind = \"thread-groups\"\nstartup = { workers = 6, iterations = 2 }\ngroups = 2\ngroup_size = 3\ndelay = \"1s\"\niterations = 5",
                kind: "thread-groups",
                describe: "thread-groups: startup 6 × 2, then 2 groups × 3 workers, 1s apart, 5 iterations",
                labels: &["startup", "group-1", "group-2"],
                extent: Limit::Requests((6 * 2 + 2 * 3 * 5) * 3),
                workers: 6,
                attempts: 1,
            },
            Expected {
                model: "kind = \"producer-buffer\"\ntotal = 100\ninitial_workers = 2\nrequests_per_worker = 10\nmax_workers = 5\nretries = 3",
                kind: "producer-buffer",
                describe: "producer-buffer: 100 payloads, 2 consumers × 10 requests growing to 5, 3 retries",
                labels: &["initial", "grown"],
                extent: Limit::Requests(100),
                workers: 5,
                attempts: 4,
            },
            Expected {
                model: "kind = \"phased\"\nmax_workers = 10\nphases = [{ name = \"w\", workers = 0.5, requests_per_worker = 3 }, { name = \"p\", workers = 1.0, requests_per_worker = 2 }]",
                kind: "phased",
                // p's 2 requests per worker round up to one whole iteration of a, b, a.
                describe: "phased: w 5×3, p 10×3",
                labels: &["w", "p"],
                extent: Limit::Requests(5 * 3 + 10 * 3),
                workers: 15,
                attempts: 1,
            },
            Expected {
                model: "kind = \"open\"\nrate = 20\nduration = \"2s\"\nmax_in_flight = 7",
                kind: "open",
                describe: "open model: 20 iterations/s for 2s, uniform arrivals, 40 iterations of 3 requests scheduled, at most 7 in flight",
                labels: &["main"],
                extent: Limit::Duration(Duration::from_secs(2)),
                workers: 7,
                attempts: 1,
            },
        ];
        for Expected {
            model,
            kind,
            describe,
            labels,
            extent,
            workers,
            attempts,
        } in cases
        {
            let model_plan = compile_model_toml(model);
            let plan = model_plan.plan();
            assert_eq!(plan.kind(), kind);
            assert_eq!(plan.describe(), describe);
            assert_eq!(plan.phase_labels(), labels, "{kind}");
            assert_eq!(plan.extent(), extent, "{kind}");
            assert_eq!(plan.max_workers(), workers, "{kind}");
            assert_eq!(plan.max_attempts(), attempts, "{kind}");
            assert_eq!(plan.sequence()[..], [0, 1, 0], "{kind}");
            assert_eq!(plan.max_lateness().is_some(), kind == "open", "{kind}");
        }
    }

    /// With extraction the open model schedules whole iterations, and the producer-buffer
    /// model (any consumer takes any request) is refused with the reason.
    #[test]
    fn extraction_chains_iterations_or_is_refused() {
        let chained = |model: &str| {
            let text = format!(
                "sequence = [\"a\", \"b\"]\n[requests.a]\npath = \"/a\"\n\
                 extract = {{ id = \"/id\" }}\n[requests.b]\npath = \"/b/{{id}}\"\n\
                 [model]\n{model}\n"
            );
            let scenario = crate::scenario::parse("test", &text, &[]).unwrap();
            compile(&scenario, "")
        };
        let open = chained("kind = \"open\"\nrate = 10\nduration = \"2s\"").unwrap();
        let ModelPlan::Open(plan) = &open.model else {
            panic!("open")
        };
        assert!(plan.chained);
        assert!(open
            .model
            .plan()
            .describe()
            .contains("20 iterations of 2 requests scheduled"));
        assert_eq!(open.workload.check_names, ["extract id"]);
        assert_eq!(open.workload.templates[1].session_fields.len(), 1);
        let refused = chained(
            "kind = \"producer-buffer\"\ntotal = 10\ninitial_workers = 1\n\
             requests_per_worker = 10\nmax_workers = 1",
        )
        .unwrap_err();
        assert_eq!(refused.path, "requests.a.extract");
        assert!(refused.message.contains("producer-buffer"), "{refused:?}");
        let closed = chained("kind = \"closed\"\nworkers = 1\nrequests = 2").unwrap();
        assert!(closed.workload.templates[0].capture.body);
    }

    /// An open model's `warmup` labels its first stretch (`loadgen capacity` leaves it out of
    /// the judgement); it must be shorter than the schedule.
    #[test]
    fn an_open_warmup_is_a_phase_shorter_than_the_schedule() {
        let open = |extra: &str| {
            let text = format!(
                "sequence = [\"a\"]\n[requests.a]\npath = \"/a\"\n[model]\nkind = \"open\"\nrate = 10\n\
                 duration = \"2s\"\n{extra}\n"
            );
            compile(&crate::scenario::parse("test", &text, &[]).unwrap(), "")
        };
        let plain = open("").unwrap();
        assert_eq!(plain.model.plan().phase_labels(), ["main"]);
        let warmed = open("warmup = \"500ms\"").unwrap();
        assert_eq!(warmed.model.plan().phase_labels(), ["warmup", "main"]);
        assert_eq!(warmed.workload.phase_fields.len(), 2);
        assert!(warmed
            .model
            .plan()
            .describe()
            .contains("the first 500ms is warmup"));
        let refused = open("warmup = \"2s\"").unwrap_err();
        assert_eq!(refused.path, "model.warmup");
    }

    /// Issue 27: two requests with the same method and path served duplicate Prometheus
    /// series (`op="GET /albums/1",outcome="ok"` twice), which Prometheus drops. Derived
    /// labels that collide take the request's name; a written label that collides is refused.
    #[test]
    fn regression_op_labels_are_unique_per_run() {
        let text = "sequence = [\"first\", \"again\", \"other\"]\n\
             [requests.first]\npath = \"/albums/1\"\n\
             [requests.again]\npath = \"/albums/1\"\n\
             [requests.other]\npath = \"/albums/2\"\n\
             [model]\nkind = \"closed\"\nworkers = 1\nrequests = 3\n";
        let scenario = crate::scenario::parse("test", text, &[]).unwrap();
        let labels = compile(&scenario, "").unwrap().workload.labels();
        assert_eq!(
            labels,
            [
                "GET /albums/1 (first)",
                "GET /albums/1 (again)",
                "GET /albums/2"
            ]
        );
        let written = text.replace(
            "[requests.other]\npath = \"/albums/2\"",
            "[requests.other]\npath = \"/albums/2\"\nlabel = \"GET /albums/1 (first)\"",
        );
        let scenario = crate::scenario::parse("test", &written, &[]).unwrap();
        let err = compile(&scenario, "").unwrap_err();
        assert_eq!(err.path, "requests.other.label", "{err:?}");
        assert!(err.message.contains("requests.first"), "{err:?}");
    }
}
