//! Executor: one mesopod executor per agent, its resources procured once.

use std::sync::Arc;

use mesos::proto::{ExecutorId, ExecutorInfo, value};
use prost::Message;
use registry::PodTask;

use crate::failure::{Owner, ProcureError};
use crate::node::NodeView;
use crate::pipeline::{ConfigError, Procurement};
use crate::pool::ResourceKind;
use crate::procure::take_order;
use crate::quantity::f64_to_millis;
use crate::state::{PodExecutor, ProcureState};

/// Prefix of every executor id this crate derives.
pub const EXECUTOR_ID_PREFIX: &str = "mesopod-";

/// The id of the executor configured as `prototype`: a stable 64-bit FNV-1a
/// hash of its protobuf encoding without id and framework id. The same
/// configuration gives the same id in every process and release (unlike
/// std's randomly keyed hasher), so a restarted framework recognises its
/// executors, and a changed configuration gets a new id.
pub fn executor_id_for(prototype: &ExecutorInfo) -> ExecutorId {
    let mut p = prototype.clone();
    p.executor_id = None;
    p.framework_id = None;
    ExecutorId::new(format!(
        "{EXECUTOR_ID_PREFIX}{:016x}",
        fnv1a64(&p.encode_to_vec())
    ))
}

/// FNV-1a, 64 bit: offset basis and prime from the FNV specification.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Attaches the executor to the pod, and procures its own resources when
/// the agent does not run it yet.
///
/// - The offer lists none of our executors: the first pod placed on the
///   offer takes the executor's resources from the framework roles
///   (reserved before `*`), plus one port for its streaming endpoint when
///   the offer has one, and attaches its info; later pods on the same
///   offer share it at no cost. The id stays the prototype's: the port is
///   not part of it.
/// - The offer lists exactly our executor: reuse it at no cost, attaching
///   the info the node view knows it was launched with (see
///   [`NodeView::with_running_executor`]), else the configured one.
/// - One executor with another id (an older configuration) or several:
///   error; two executors of ours on one agent would split its pods.
#[derive(Debug, Clone)]
pub struct ExecutorProcurement {
    id: ExecutorId,
    /// The configured info with its id.
    info: Arc<ExecutorInfo>,
    /// The same without resources: the procured ones are filled in.
    bare: Arc<ExecutorInfo>,
    needs: [i64; 4],
    roles: Vec<String>,
}

impl ExecutorProcurement {
    /// # Errors
    /// [`ConfigError::BadExecutorResource`] when the prototype lists a
    /// resource that is not a scalar cpus, mem, disk or gpus.
    pub fn new(prototype: ExecutorInfo, framework_roles: &[String]) -> Result<Self, ConfigError> {
        if framework_roles.is_empty() {
            return Err(ConfigError::NoFrameworkRoles);
        }
        let mut needs = [0i64; 4];
        for r in &prototype.resources {
            let kind = ResourceKind::from_name(&r.name).filter(|k| *k != ResourceKind::Ports);
            let scalar = r
                .scalar
                .map(|s| s.value)
                .filter(|v| v.is_finite() && *v >= 0.0);
            match (kind, scalar, value::Type::try_from(r.r#type)) {
                (Some(k), Some(v), Ok(value::Type::Scalar)) => needs[k.index()] += f64_to_millis(v),
                _ => return Err(ConfigError::BadExecutorResource(r.name.clone())),
            }
        }
        let id = executor_id_for(&prototype);
        let mut info = prototype;
        info.executor_id = Some(id.clone());
        let mut bare = info.clone();
        bare.resources.clear();
        Ok(ExecutorProcurement {
            id,
            info: Arc::new(info),
            bare: Arc::new(bare),
            needs,
            roles: take_order(framework_roles),
        })
    }

    /// The executor's id.
    pub fn executor_id(&self) -> &ExecutorId {
        &self.id
    }
}

impl Procurement for ExecutorProcurement {
    fn modifies_task(&self) -> bool {
        false
    }

    fn procure(
        &self,
        _task: &mut PodTask,
        node: &NodeView,
        state: &mut ProcureState,
    ) -> Result<(), ProcureError> {
        match node.executor_ids() {
            [] => {
                if state.procured_executor().is_none() {
                    let mark = state.log_mark();
                    let roles = state.role_ids(&self.roles);
                    for kind in ResourceKind::SCALARS {
                        if let Err(e) = state.take_millis(
                            kind,
                            self.needs[kind.index()],
                            &roles,
                            Owner::Executor,
                        ) {
                            state.undo_to(mark);
                            return Err(e);
                        }
                    }
                    // The executor's streaming endpoint (exec, attach, port-forward)
                    // listens on a port of its own; an offer without ports leaves it
                    // to pick a free one.
                    if let Some((entry, port)) = state.free_port(&roles) {
                        state.take_port(entry, port, Owner::Executor);
                    }
                    state.set_procured_executor(self.bare.clone());
                }
                state.set_pod_executor(PodExecutor::Procured);
                Ok(())
            }
            [one] if *one == self.id => {
                state.set_pod_executor(match node.running_executor() {
                    Some(info) if info.executor_id.as_ref() == Some(&self.id) => {
                        PodExecutor::Running(info.clone())
                    }
                    _ => PodExecutor::Configured(self.info.clone()),
                });
                Ok(())
            }
            [one] => Err(ProcureError::ExecutorMismatch {
                running: one.value.clone(),
                expected: self.id.value.clone(),
            }),
            many => Err(ProcureError::ExecutorConflict {
                running: many.iter().map(|e| e.value.clone()).collect(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(super::fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(super::fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
