//! The thread-groups model's `[model]` section: an optional startup group, then `groups` ×
//! `group_size` workers `delay` apart, `iterations` each → [`ThreadGroupsPlan`].

use std::sync::Arc;

use super::{at_least_one, without_overrides, CompileModel, PhaseOverrides, Violation};
use crate::model::thread_groups::ThreadGroupsPlan;
use crate::model::ModelPlan;
use crate::scenario::schema::ThreadGroupsSpec;
use crate::workload::fields::Fields;

impl CompileModel for ThreadGroupsSpec {
    fn compile(
        &self,
        sequence: Arc<[u16]>,
        _fields: &Fields,
    ) -> Result<(ModelPlan, PhaseOverrides), Violation> {
        at_least_one("model.groups", u64::from(self.groups))?;
        at_least_one("model.group_size", u64::from(self.group_size))?;
        at_least_one("model.iterations", self.iterations)?;
        if let Some(s) = &self.startup {
            at_least_one("model.startup.workers", u64::from(s.workers))?;
            at_least_one("model.startup.iterations", s.iterations)?;
        }
        let plan = ThreadGroupsPlan {
            startup: self.startup.as_ref().map(|s| (s.workers, s.iterations)),
            groups: self.groups,
            group_size: self.group_size,
            delay: self.delay.0,
            iterations: self.iterations,
            sequence,
        };
        Ok(without_overrides(ModelPlan::ThreadGroups(plan)))
    }
}
