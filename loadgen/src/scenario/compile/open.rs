//! The open model's `[model]` section: a constant `rate` for `duration`, or `stages` that
//! ramp it; arrivals, `max_in_flight`, `max_lateness` and `send_window` → [`OpenPlan`]. A
//! rate beyond what one process schedules is refused here.

use std::sync::Arc;

use super::{at_least_one, violation, without_overrides, CompileModel, PhaseOverrides, Violation};
use crate::model::open::{OpenPlan, Stage, MAX_RATE_RPS};
use crate::model::ModelPlan;
use crate::scenario::schema::OpenSpec;
use crate::workload::fields::Fields;

impl CompileModel for OpenSpec {
    fn compile(
        &self,
        sequence: Arc<[u16]>,
        _fields: &Fields,
    ) -> Result<(ModelPlan, PhaseOverrides), Violation> {
        let stages = stages(self)?;
        check_schedulable(&stages, self.stages.is_some())?;
        at_least_one("model.max_in_flight", u64::from(self.max_in_flight))?;
        let warmup = self.warmup.map_or(std::time::Duration::ZERO, |d| d.0);
        let total: std::time::Duration = stages.iter().map(|s| s.duration).sum();
        if warmup >= total {
            return Err(violation(
                "model.warmup",
                "must be shorter than the schedule, which it begins",
            ));
        }
        let send_window = self.send_window.map_or(std::time::Duration::ZERO, |d| d.0);
        if send_window >= self.max_lateness.0 {
            return Err(violation(
                "model.send_window",
                format!(
                    "{} would make every batched send late: give one shorter than \
                     max_lateness ({})",
                    humantime::format_duration(send_window),
                    humantime::format_duration(self.max_lateness.0)
                ),
            ));
        }
        let plan = OpenPlan {
            stages,
            arrivals: self.arrivals,
            max_in_flight: self.max_in_flight,
            max_lateness: self.max_lateness.0,
            send_window,
            // With a sequence of several requests, one arrival starts one iteration.
            chained: sequence.len() > 1,
            sequence,
            offset: 0.0,
            warmup,
        };
        check_sends_something(&plan, self.stages.is_some())?;
        Ok(without_overrides(ModelPlan::Open(plan)))
    }
}

/// The schedule's stages: one at `rate` for `duration`, or the ramp `stages` describes.
fn stages(open: &OpenSpec) -> Result<Vec<Stage>, Violation> {
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
    let mut stages = Vec::new();
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
    Ok(stages)
}

/// Refuses an open-model rate beyond what one process schedules, so a typo (`--rate 1e9`)
/// is an error, not a run that cannot keep its schedule or its duration.
fn check_schedulable(stages: &[Stage], staged: bool) -> Result<(), Violation> {
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

/// Refuses a schedule that sends nothing (`--rate 0.001 -d 1s`): a run of no requests would
/// exit 0 and look like a result.
fn check_sends_something(plan: &OpenPlan, staged: bool) -> Result<(), Violation> {
    if plan.scheduled() > 0 {
        return Ok(());
    }
    let (path, fix) = if staged {
        ("model.stages", "raise a stage's rate or lengthen it")
    } else {
        (
            "model.rate",
            "raise the rate (--rate) or lengthen the duration (-d)",
        )
    };
    Err(violation(
        path,
        format!(
            "the schedule ({}) sends no request; {fix}",
            plan.describe_schedule()
        ),
    ))
}
