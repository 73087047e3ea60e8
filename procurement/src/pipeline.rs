//! The `Procurement` trait, the function adapter, all-or-nothing composition
//! and the default pipeline.

use std::sync::Arc;

use registry::PodTask;
use thiserror::Error;

use crate::demand::PortStrategy;
use crate::failure::ProcureError;
use crate::node::NodeView;
use crate::procure::{
    ExecutorProcurement, NodeProcurement, PodResourcesProcurement, PortsProcurement,
    ResourceDefaults, RolesProcurement,
};
use crate::state::ProcureState;

/// One step of placing a pod task on an offer.
///
/// # Contract
/// An implementation reads the task and the node, and takes what the pod
/// needs from `state`. On `Err` it must leave the state as it found it
/// (every procurement in this crate does, and [`AllOrNothing`] enforces it
/// for whatever it composes). It does no I/O and reads no clock.
pub trait Procurement {
    /// Procures for `task` on `node` from what is left in `state`.
    ///
    /// # Errors
    /// Why the pod cannot be placed on this offer.
    fn procure(
        &self,
        task: &mut PodTask,
        node: &NodeView,
        state: &mut ProcureState,
    ) -> Result<(), ProcureError>;

    /// Whether `procure` may change the task. [`AllOrNothing`] and the
    /// [`crate::Placer`] copy the task before each attempt only when some
    /// step says it may; the built-in procurements never do, which keeps an
    /// attempt free of allocations for the task. Say `true` when unsure.
    ///
    /// This and [`Procurement::enforces_node_selector`] are read by this
    /// crate's placer and compositions; a scheduler never needs them.
    fn modifies_task(&self) -> bool {
        true
    }

    /// Whether `procure` refuses every node whose labels lack one of the
    /// pod's `nodeSelector` entries. The [`crate::Placer`] then tries such
    /// a pod first on the nodes that carry its selector: for a selector
    /// that matches a tenth of a large cluster, most of the work saved.
    /// Say `false` when unsure.
    fn enforces_node_selector(&self) -> bool {
        false
    }
}

/// A procurement behind a reference or a pointer is the same procurement,
/// hints included.
macro_rules! forward {
    ($($holder:ty),*) => {$(
        impl<P: Procurement + ?Sized> Procurement for $holder {
            fn procure(
                &self,
                task: &mut PodTask,
                node: &NodeView,
                state: &mut ProcureState,
            ) -> Result<(), ProcureError> {
                (**self).procure(task, node, state)
            }

            fn modifies_task(&self) -> bool {
                (**self).modifies_task()
            }

            fn enforces_node_selector(&self) -> bool {
                (**self).enforces_node_selector()
            }
        }
    )*};
}

forward!(&P, Box<P>, Arc<P>);

/// Adapts a plain function or closure into a [`Procurement`].
#[derive(Debug, Clone, Copy)]
pub struct FnProcurement<F>(pub F);

impl<F> Procurement for FnProcurement<F>
where
    F: Fn(&mut PodTask, &NodeView, &mut ProcureState) -> Result<(), ProcureError>,
{
    fn procure(
        &self,
        task: &mut PodTask,
        node: &NodeView,
        state: &mut ProcureState,
    ) -> Result<(), ProcureError> {
        (self.0)(task, node, state)
    }
}

/// Wraps `f` as a [`Procurement`].
pub fn procurement_fn<F>(f: F) -> FnProcurement<F>
where
    F: Fn(&mut PodTask, &NodeView, &mut ProcureState) -> Result<(), ProcureError>,
{
    FnProcurement(f)
}

/// A procurement that may be shared across the scheduler's threads.
pub type BoxedProcurement = Box<dyn Procurement + Send + Sync>;

/// Runs procurements in order; the first failure restores the state and the
/// task exactly as they were and returns that failure.
#[derive(Default)]
pub struct AllOrNothing {
    steps: Vec<BoxedProcurement>,
}

impl std::fmt::Debug for AllOrNothing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AllOrNothing({} steps)", self.steps.len())
    }
}

impl AllOrNothing {
    /// An empty composition (it procures nothing and always succeeds).
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a step.
    #[must_use]
    pub fn then(mut self, step: impl Procurement + Send + Sync + 'static) -> Self {
        self.steps.push(Box::new(step));
        self
    }

    /// Appends a step.
    pub fn push(&mut self, step: BoxedProcurement) {
        self.steps.push(step);
    }

    /// How many steps it runs.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether it runs no step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

impl Procurement for AllOrNothing {
    fn procure(
        &self,
        task: &mut PodTask,
        node: &NodeView,
        state: &mut ProcureState,
    ) -> Result<(), ProcureError> {
        let cp = state.checkpoint();
        // The task is restored by value, from a copy taken only when a step
        // may change it (a clone shares the pod behind an `Arc`).
        let before = self.modifies_task().then(|| task.clone());
        for step in &self.steps {
            if let Err(e) = step.procure(task, node, state) {
                state.rollback(cp);
                if let Some(before) = before {
                    *task = before;
                }
                return Err(e);
            }
        }
        Ok(())
    }

    fn modifies_task(&self) -> bool {
        self.steps.iter().any(|s| s.modifies_task())
    }

    fn enforces_node_selector(&self) -> bool {
        // Every step must succeed, so one step that refuses is enough.
        self.steps.iter().any(|s| s.enforces_node_selector())
    }
}

/// The framework's scheduling settings the default pipeline needs.
#[derive(Debug, Clone)]
pub struct PipelineConfig {
    /// Roles the framework may use, e.g. `["*"]` or `["prod", "*"]`. `*`
    /// (unreserved resources) must be listed for pods to use them.
    pub framework_roles: Vec<String>,
    /// Roles of a pod without the `mesopod.io/roles` annotation.
    pub default_pod_roles: Vec<String>,
    /// Port mapping of a pod without the `mesopod.io/port-mapping` annotation.
    pub default_port_strategy: PortStrategy,
    /// Defaults and minimums for pod resources.
    pub resources: ResourceDefaults,
    /// The executor every pod runs under; its id is derived from it.
    pub executor: mesos::proto::ExecutorInfo,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig {
            framework_roles: vec!["*".to_owned()],
            default_pod_roles: vec!["*".to_owned()],
            default_port_strategy: PortStrategy::Fixed,
            resources: ResourceDefaults::default(),
            executor: mesos::proto::ExecutorInfo::default(),
        }
    }
}

/// A pipeline configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// No framework role at all.
    #[error("the framework has no roles")]
    NoFrameworkRoles,
    /// A default pod role the framework does not have.
    #[error("default pod role {0:?} is not a framework role")]
    DefaultRoleNotFramework(String),
    /// A default or minimum that is negative or not a number.
    #[error("resource setting {0} must be a finite, non-negative number")]
    BadResourceSetting(&'static str),
    /// An executor resource the pipeline cannot procure.
    #[error(
        "executor resource {0:?}: only scalar cpus, mem, disk and gpus can be procured for the executor"
    )]
    BadExecutorResource(String),
}

/// The default pipeline: node, roles, pod resources, ports, executor; all or nothing.
///
/// # Errors
/// [`ConfigError`] for settings that cannot work.
pub fn default_pipeline(config: &PipelineConfig) -> Result<AllOrNothing, ConfigError> {
    Ok(AllOrNothing::new()
        .then(NodeProcurement)
        .then(RolesProcurement::new(
            &config.framework_roles,
            &config.default_pod_roles,
        )?)
        .then(PodResourcesProcurement::new(config.resources)?)
        .then(PortsProcurement::new(config.default_port_strategy))
        .then(ExecutorProcurement::new(
            config.executor.clone(),
            &config.framework_roles,
        )?))
}
