//! The producer-buffer model's `[model]` section: payloads, buffer, the consumer pool and its
//! growth, retries → [`ProducerBufferPlan`].

use std::sync::Arc;

use super::{at_least_one, violation, without_overrides, CompileModel, PhaseOverrides, Violation};
use crate::model::producer_buffer::ProducerBufferPlan;
use crate::model::ModelPlan;
use crate::scenario::schema::ProducerBufferSpec;
use crate::workload::fields::Fields;

impl CompileModel for ProducerBufferSpec {
    fn compile(
        &self,
        sequence: Arc<[u16]>,
        _fields: &Fields,
    ) -> Result<(ModelPlan, PhaseOverrides), Violation> {
        let (initial_workers, max_workers, retries) =
            (self.initial_workers, self.max_workers, self.retries);
        at_least_one("model.total", self.total)?;
        at_least_one("model.buffer", self.buffer as u64)?;
        at_least_one("model.initial_workers", u64::from(initial_workers))?;
        at_least_one("model.requests_per_worker", self.requests_per_worker)?;
        if max_workers < initial_workers {
            return Err(violation(
                "model.max_workers",
                format!("must be at least initial_workers ({initial_workers}), got {max_workers}"),
            ));
        }
        if retries > 100 {
            return Err(violation(
                "model.retries",
                format!("must be at most 100 (got {retries})"),
            ));
        }
        let plan = ProducerBufferPlan {
            total: self.total,
            buffer: self.buffer,
            initial_workers,
            requests_per_worker: self.requests_per_worker,
            max_workers,
            retries: retries as u8,
            backoff: self.backoff.0,
            sequence,
        };
        Ok(without_overrides(ModelPlan::ProducerBuffer(plan)))
    }
}
