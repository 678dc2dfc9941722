//! The closed model's `[model]` section: `workers`, `requests` or `duration` (10 s when
//! neither is given), and an optional `warmup` shorter than the duration → [`ClosedPlan`].

use std::sync::Arc;

use super::{at_least_one, violation, without_overrides, CompileModel, PhaseOverrides, Violation};
use crate::model::closed::ClosedPlan;
use crate::model::{Limit, ModelPlan, DEFAULT_DURATION};
use crate::scenario::schema::ClosedSpec;
use crate::workload::fields::Fields;

impl CompileModel for ClosedSpec {
    fn compile(
        &self,
        sequence: Arc<[u16]>,
        _fields: &Fields,
    ) -> Result<(ModelPlan, PhaseOverrides), Violation> {
        at_least_one("model.workers", u64::from(self.workers))?;
        let limit = match (self.requests, &self.duration) {
            (Some(_), Some(_)) => {
                return Err(violation("model", "give requests or duration, not both"))
            }
            (Some(n), None) => {
                at_least_one("model.requests", n)?;
                Limit::Requests(n)
            }
            (None, Some(d)) if d.0.is_zero() => {
                return Err(violation("model.duration", "must be longer than 0"))
            }
            (None, Some(d)) => Limit::Duration(d.0),
            (None, None) => Limit::Duration(DEFAULT_DURATION),
        };
        let warmup = self.warmup.map_or(std::time::Duration::ZERO, |d| d.0);
        if matches!(limit, Limit::Duration(d) if warmup >= d) {
            return Err(violation(
                "model.warmup",
                "must be shorter than the duration, which it begins",
            ));
        }
        let plan = ClosedPlan {
            workers: self.workers,
            limit,
            sequence,
            warmup,
        };
        Ok(without_overrides(ModelPlan::Closed(plan)))
    }
}
