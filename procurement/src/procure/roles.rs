//! Roles: which reservation roles the pod takes resources from, in order.

use std::sync::Arc;

use registry::PodTask;

use crate::demand::{PodDemand, RolesAnnotation};
use crate::failure::ProcureError;
use crate::node::NodeView;
use crate::pipeline::{ConfigError, Procurement};
use crate::procure::take_order;
use crate::state::ProcureState;

/// Chooses the pod's roles: the `mesopod.io/roles` annotation (comma
/// separated) filtered to the framework's roles, or the default pod roles
/// when the annotation is absent. An annotation that lists nothing makes the
/// pod unschedulable, as does one that lists no framework role.
///
/// Resources are then taken in the roles' order, reserved roles before `*`
/// (unreserved), wherever `*` appears in the list.
#[derive(Debug, Clone)]
pub struct RolesProcurement {
    framework_roles: Vec<String>,
    default: Arc<[String]>,
}

impl RolesProcurement {
    /// # Errors
    /// [`ConfigError`] when there is no framework role or a default pod role
    /// is not a framework role.
    pub fn new(
        framework_roles: &[String],
        default_pod_roles: &[String],
    ) -> Result<Self, ConfigError> {
        if framework_roles.is_empty() {
            return Err(ConfigError::NoFrameworkRoles);
        }
        if let Some(r) = default_pod_roles
            .iter()
            .find(|r| !framework_roles.contains(r))
        {
            return Err(ConfigError::DefaultRoleNotFramework(r.clone()));
        }
        Ok(RolesProcurement {
            framework_roles: framework_roles.to_vec(),
            default: take_order(default_pod_roles).into(),
        })
    }

    fn resolve(&self, demand: &PodDemand) -> Result<Arc<[String]>, ProcureError> {
        match demand.roles.as_ref().map_err(Clone::clone)? {
            RolesAnnotation::Absent if self.default.is_empty() => {
                Err(ProcureError::NoFrameworkRole {
                    requested: Vec::new(),
                })
            }
            RolesAnnotation::Absent => Ok(self.default.clone()),
            RolesAnnotation::Listed(listed) if listed.is_empty() => {
                Err(ProcureError::RolesAnnotationEmpty)
            }
            RolesAnnotation::Listed(listed) => {
                let roles = take_order(listed.iter().filter(|r| self.framework_roles.contains(r)));
                if roles.is_empty() {
                    return Err(ProcureError::NoFrameworkRole {
                        requested: listed.clone(),
                    });
                }
                Ok(roles.into())
            }
        }
    }
}

impl Procurement for RolesProcurement {
    fn modifies_task(&self) -> bool {
        false
    }

    fn procure(
        &self,
        task: &mut PodTask,
        _node: &NodeView,
        state: &mut ProcureState,
    ) -> Result<(), ProcureError> {
        let roles = self.resolve(state.ensure_demand(task))?;
        state.set_pod_roles(roles);
        Ok(())
    }
}
