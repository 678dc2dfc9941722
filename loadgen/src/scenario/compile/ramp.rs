//! The ramp model's `[model]` section: `stages`, each a `duration` (longer than 0) and the
//! `workers` to reach by its end, some stage with at least one → [`RampPlan`].

use std::sync::Arc;

use super::{violation, without_overrides, CompileModel, PhaseOverrides, Violation};
use crate::model::ramp::{RampPlan, RampStage};
use crate::model::ModelPlan;
use crate::scenario::schema::RampSpec;
use crate::workload::fields::Fields;

impl CompileModel for RampSpec {
    fn compile(
        &self,
        sequence: Arc<[u16]>,
        _fields: &Fields,
    ) -> Result<(ModelPlan, PhaseOverrides), Violation> {
        if self.stages.is_empty() {
            return Err(violation(
                "model.stages",
                "needs at least one stage, e.g. [{ duration = \"30s\", workers = 10 }]",
            ));
        }
        for (i, stage) in self.stages.iter().enumerate() {
            if stage.duration.0.is_zero() {
                return Err(violation(
                    format!("model.stages[{i}].duration"),
                    "must be longer than 0",
                ));
            }
        }
        if self.stages.iter().all(|s| s.workers == 0) {
            return Err(violation(
                "model.stages",
                "never has a worker: give some stage workers of at least 1",
            ));
        }
        let plan = RampPlan {
            stages: self
                .stages
                .iter()
                .map(|s| RampStage {
                    duration: s.duration.0,
                    workers: s.workers,
                })
                .collect(),
            sequence,
        };
        Ok(without_overrides(ModelPlan::Ramp(plan)))
    }
}
