//! Pod resources: cpus, mem, disk and gpus from the containers, by
//! Kubernetes' rules.

use registry::PodTask;

use crate::demand::{Amounts, ResourceDemand};
use crate::failure::{Owner, ProcureError};
use crate::node::NodeView;
use crate::pipeline::{ConfigError, Procurement};
use crate::pool::ResourceKind;
use crate::quantity::f64_to_millis;
use crate::state::ProcureState;

/// Defaults and minimums for pod resources.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResourceDefaults {
    /// cpus a container gets when it sets neither a cpu request nor a limit.
    /// 0.25 as in the earlier framework: enough for a small service to start.
    pub container_cpus: f64,
    /// mem (MB) a container gets when it sets no memory request or limit.
    /// 64 MB as in the earlier framework.
    pub container_mem: f64,
    /// The least cpus a pod's task is given: Mesos refuses a task without
    /// cpus or mem, and 0.01 is the smallest share the earlier framework used.
    pub min_cpus: f64,
    /// The least mem (MB) a pod's task is given: below 32 MB a process is
    /// likely OOM-killed before it starts.
    pub min_mem: f64,
}

impl Default for ResourceDefaults {
    fn default() -> Self {
        ResourceDefaults {
            container_cpus: 0.25,
            container_mem: 64.0,
            min_cpus: 0.01,
            min_mem: 32.0,
        }
    }
}

/// Takes the pod's cpus, mem, disk (`ephemeral-storage`) and gpus
/// (`nvidia.com/gpu`) from the pod's roles, all of them or none.
///
/// Per resource, as Kubernetes computes a pod's request: a container's
/// request, else its limit, else (cpus and mem only) the configured
/// default; the pod needs the larger of the app containers' sum (plus
/// sidecars) and the peak of its init containers (each one running beside
/// the sidecars started before it), plus `spec.overhead`. Pod-level
/// `spec.resources` replace the containers' figure when set. The result is
/// raised to the configured minimum.
#[derive(Debug, Clone)]
pub struct PodResourcesProcurement {
    defaults: [i64; 4],
    minimums: [i64; 4],
}

impl PodResourcesProcurement {
    /// # Errors
    /// [`ConfigError::BadResourceSetting`] for a negative or non-finite setting.
    pub fn new(d: ResourceDefaults) -> Result<Self, ConfigError> {
        let check = |v: f64, name| {
            if v.is_finite() && v >= 0.0 {
                Ok(f64_to_millis(v))
            } else {
                Err(ConfigError::BadResourceSetting(name))
            }
        };
        Ok(PodResourcesProcurement {
            defaults: [
                check(d.container_cpus, "container_cpus")?,
                check(d.container_mem, "container_mem")?,
                0,
                0,
            ],
            minimums: [
                check(d.min_cpus, "min_cpus")?,
                check(d.min_mem, "min_mem")?,
                0,
                0,
            ],
        })
    }

    /// What the pod needs, in millis per scalar kind.
    pub(crate) fn totals(&self, d: &ResourceDemand) -> [i64; 4] {
        let mut out = [0i64; 4];
        for (k, o) in out.iter_mut().enumerate() {
            let val = |a: &Amounts| a[k].unwrap_or(self.defaults[k]);
            let containers = match d.pod_level[k] {
                Some(v) => v,
                None => {
                    let app = d.app.iter().map(val).fold(0i64, i64::saturating_add);
                    let mut sidecars = 0i64;
                    let mut init_peak = 0i64;
                    for (a, sidecar) in &d.init {
                        if *sidecar {
                            sidecars = sidecars.saturating_add(val(a));
                            init_peak = init_peak.max(sidecars);
                        } else {
                            init_peak = init_peak.max(sidecars.saturating_add(val(a)));
                        }
                    }
                    app.saturating_add(sidecars).max(init_peak)
                }
            };
            *o = containers
                .saturating_add(d.overhead[k])
                .max(self.minimums[k]);
        }
        out
    }

    /// What `task`'s pod needs, as Mesos amounts (cpus, mem MB, disk MB,
    /// gpus), for display and for tests.
    ///
    /// # Errors
    /// [`ProcureError::InvalidPod`] for malformed quantities.
    pub fn pod_needs(&self, task: &PodTask) -> Result<[f64; 4], ProcureError> {
        Ok(self
            .pod_needs_millis(task)?
            .map(crate::quantity::millis_to_f64))
    }

    /// [`PodResourcesProcurement::pod_needs`] in milli-units, as the pipeline
    /// counts them.
    ///
    /// # Errors
    /// As [`PodResourcesProcurement::pod_needs`].
    pub fn pod_needs_millis(&self, task: &PodTask) -> Result<[i64; 4], ProcureError> {
        let demand = crate::demand::PodDemand::for_task(task);
        let d = demand.resources.as_ref().map_err(Clone::clone)?;
        Ok(self.totals(d))
    }
}

impl Procurement for PodResourcesProcurement {
    fn modifies_task(&self) -> bool {
        false
    }

    fn procure(
        &self,
        task: &mut PodTask,
        _node: &NodeView,
        state: &mut ProcureState,
    ) -> Result<(), ProcureError> {
        let d = state
            .ensure_demand(task)
            .resources
            .as_ref()
            .map_err(Clone::clone)?;
        let totals = self.totals(d);
        let roles = state.role_ids(&state.roles_for(task));
        // Check everything before taking anything: all or none, and the
        // failure names the first short resource in a fixed order.
        for kind in ResourceKind::SCALARS {
            let need = totals[kind.index()];
            let available = state.available_millis(kind, &roles);
            if need > available {
                return Err(ProcureError::Insufficient {
                    resource: kind,
                    owner: Owner::Pod,
                    asked: crate::quantity::millis_to_f64(need),
                    available: crate::quantity::millis_to_f64(available),
                });
            }
        }
        for kind in ResourceKind::SCALARS {
            state.take_millis(kind, totals[kind.index()], &roles, Owner::Pod)?;
        }
        Ok(())
    }
}
