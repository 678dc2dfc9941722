//! The phased model's `[model]` section: `max_workers`, and phases with their worker counts
//! (or fractions), start rules (`after` + `when_done`, or `at`), field overrides and walks →
//! [`PhasedPlan`], with each phase's field overrides.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::workload::{compile_fields, generator};
use super::{at_least_one, violation, CompileModel, PhaseOverrides, Violation};
use crate::model::closed::Walk;
use crate::model::phased::{PhasePlan, PhasedPlan, StartRule};
use crate::model::ModelPlan;
use crate::scenario::schema::{PhaseSpec, PhasedSpec, Rounding, WalkSpec, WorkerCount};
use crate::workload::fields::{Fields, Generator};

impl CompileModel for PhasedSpec {
    fn compile(
        &self,
        sequence: Arc<[u16]>,
        fields: &Fields,
    ) -> Result<(ModelPlan, PhaseOverrides), Violation> {
        at_least_one("model.max_workers", u64::from(self.max_workers))?;
        if self.phases.is_empty() {
            return Err(violation("model.phases", "needs at least one phase"));
        }
        let default_when_done = self.when_done.unwrap_or(1.0);
        check_when_done("model.when_done", default_when_done, "the previous phase's")?;
        let mut names = BTreeSet::new();
        let mut plans: Vec<PhasePlan> = Vec::new();
        let mut overrides = Vec::new();
        for (i, phase) in self.phases.iter().enumerate() {
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
            let workers = phase_workers(phase.workers, self.max_workers, self.round, &here)?;
            let start = start_rule(i, phase, &plans, default_when_done, &here)?;
            let phase_overrides = phase_overrides(phase, fields, &here)?;
            let walk = match &phase.walk {
                Some(walk) => Some(compile_walk(
                    walk,
                    self.iterations_per_step,
                    fields.with_overrides(&phase_overrides),
                    &here,
                )?),
                None => None,
            };
            let requests_per_worker = requests_per_worker(phase, &walk, sequence.len(), &here)?;
            overrides.push(phase_overrides);
            plans.push(PhasePlan {
                name: phase.name.clone(),
                workers,
                requests_per_worker,
                start,
                walk,
            });
        }
        let plan = PhasedPlan {
            phases: plans,
            sequence,
        };
        Ok((ModelPlan::Phased(plan), overrides))
    }
}

/// When phase `i` starts: after (a fraction of) an earlier phase, at an offset, or by
/// default when the previous phase is done (the first phase at once).
fn start_rule(
    i: usize,
    phase: &PhaseSpec,
    earlier: &[PhasePlan],
    default_when_done: f64,
    here: &str,
) -> Result<StartRule, Violation> {
    Ok(match (&phase.after, phase.when_done, phase.at) {
        (Some(_), _, Some(_)) => {
            return Err(violation(
                here,
                "give either after (+ when_done) or at, not both",
            ))
        }
        (Some(after), when_done, None) => {
            let Some(previous) = earlier.iter().position(|p| &p.name == after) else {
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
                finished: finished_needed(fraction, earlier[previous].workers),
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
            finished: finished_needed(default_when_done, earlier[i - 1].workers),
        },
    })
}

/// The generators a phase replaces; each must be a field the scenario declares.
fn phase_overrides(
    phase: &PhaseSpec,
    fields: &Fields,
    here: &str,
) -> Result<Vec<(String, Generator)>, Violation> {
    let phase_fields =
        compile_fields(&phase.fields, &format!("{here}.fields"), &Fields::default())?;
    let mut overrides = Vec::new();
    for name in phase_fields.names() {
        if fields.index(name).is_none() {
            return Err(violation(
                format!("{here}.fields.{name}"),
                "overrides a field that is not declared under [fields]",
            ));
        }
        let spec = &phase.fields[name];
        overrides.push((
            name.clone(),
            generator(spec, &format!("{here}.fields.{name}"))?,
        ));
    }
    Ok(overrides)
}

/// Requests each worker of a phase sends: given (rounded up to whole iterations of the
/// sequence), or what its walk takes.
fn requests_per_worker(
    phase: &PhaseSpec,
    walk: &Option<Walk>,
    sequence_len: usize,
    here: &str,
) -> Result<u64, Violation> {
    let requests = match (phase.requests_per_worker, walk) {
        (Some(_), Some(_)) => {
            return Err(violation(
                format!("{here}.requests_per_worker"),
                "give either requests_per_worker or walk (which sets it: steps × iterations_per_step × sequence length), not both",
            ))
        }
        (Some(n), None) => n,
        (None, Some(walk)) => walk.requests(sequence_len),
        (None, None) => {
            return Err(violation(
                format!("{here}.requests_per_worker"),
                "is missing: give the requests each worker sends, e.g. requests_per_worker = 200",
            ))
        }
    };
    at_least_one(&format!("{here}.requests_per_worker"), requests)?;
    // Whole iterations: a worker never stops between the steps of its sequence.
    let len = sequence_len.max(1) as u64;
    Ok(requests.div_ceil(len) * len)
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
