//! Recovery: what a bound pod carries so a restarted framework can rebuild
//! its task, and the rebuilding.
//!
//! The earlier system lost the executor id and the port mappings on restart
//! and deleted pods whose task it could not rebuild. Here both are written
//! and read back, and a pod that cannot be recovered yields a typed error
//! naming the annotation at fault; the pod itself is never touched.
//!
//! # What is not recovered
//!
//! The task's resources and the executor's full `ExecutorInfo` are not in
//! the annotations (they are large, and Mesos already accounts for what a
//! running task uses). A recovered spec has no resources and an executor
//! that carries only its id; the framework rebuilds the rest from its
//! executor prototype if it needs it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use k8s_openapi::api::core::v1::Pod;
use mesos::proto::{AgentId, ExecutorId, ExecutorInfo, OfferId, TaskId};

use crate::annotations::{
    AGENT_ID, BINDING_KEYS, EXECUTOR_ID, HOSTNAME, OFFER_ID, PORTS, ROLES, TASK_ID,
};
use crate::state::{Flag, State};
use crate::task::{PodTask, PortMapping, Progress, Spec, TaskError};

/// Why a pod that carries our annotations could not be turned into a task.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoveryError {
    /// A binding annotation is absent while others are present.
    #[error("pod is bound by mesopod but annotation {key} is missing")]
    Missing {
        /// The absent key.
        key: &'static str,
    },
    /// An annotation is present but its value is unusable.
    #[error("annotation {key} is malformed: {reason}")]
    Malformed {
        /// The key at fault.
        key: &'static str,
        /// What is wrong with its value.
        reason: String,
    },
    /// The pod itself cannot carry a task (e.g. it has no name).
    #[error("pod cannot carry a task: {0}")]
    Pod(#[from] TaskError),
}

/// The annotations that let [`recover_from`] rebuild `task`; merge them into
/// the pod's annotations when binding it.
///
/// A task that was never placed (no spec, no offer) yields only its id and
/// roles; recovering from those fails on the first missing key, which is
/// right: such a task never ran.
pub fn save_recovery_info(task: &PodTask) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    out.insert(TASK_ID.to_owned(), task.id.value.clone());
    out.insert(ROLES.to_owned(), task.roles.join(","));
    if let Some(offer) = &task.offer_id {
        out.insert(OFFER_ID.to_owned(), offer.value.clone());
    }
    if let Some(spec) = &task.spec {
        out.insert(AGENT_ID.to_owned(), spec.agent_id.value.clone());
        out.insert(HOSTNAME.to_owned(), spec.hostname.clone());
        out.insert(PORTS.to_owned(), ports_json(&spec.port_mappings));
        if let Some(executor) = spec.executor_id() {
            out.insert(EXECUTOR_ID.to_owned(), executor.value.clone());
        }
    }
    out
}

#[allow(
    clippy::expect_used,
    reason = "PortMapping has only strings, integers and an Option<String>: serde_json cannot fail on it"
)]
fn ports_json(ports: &[PortMapping]) -> String {
    serde_json::to_string(ports).expect("port mappings serialise")
}

/// Rebuilds the task of a pod bound by mesopod.
///
/// - `Ok(None)`: the pod carries none of the binding annotations (it was
///   never bound by us). A `mesopod.io/roles` annotation alone does not
///   count: users set it.
/// - `Ok(Some(task))`: the task, flagged Launched and Bound (never Deleted:
///   the core kills a recovered task whose pod is being deleted, whether or
///   not an earlier leader did), with its id, agent, hostname, offer,
///   executor id, port mappings and roles. Its state follows the pod's
///   phase: `Running` → Running, `Succeeded`/`Failed` → Finished, anything
///   else → Pending. Reconciliation with Mesos corrects it from there.
///
/// # Errors
///
/// [`RecoveryError::Missing`] or [`RecoveryError::Malformed`] naming the
/// first key at fault; [`RecoveryError::Pod`] if the pod has no name.
pub fn recover_from(pod: &Pod, now: SystemTime) -> Result<Option<PodTask>, RecoveryError> {
    let empty = BTreeMap::new();
    let ann = pod.metadata.annotations.as_ref().unwrap_or(&empty);
    if !BINDING_KEYS.iter().any(|k| ann.contains_key(*k)) {
        return Ok(None);
    }
    let task_id = required(ann, TASK_ID)?;
    let agent_id = required(ann, AGENT_ID)?;
    let offer_id = required(ann, OFFER_ID)?;
    let executor_id = required(ann, EXECUTOR_ID)?;
    let hostname = required(ann, HOSTNAME)?;
    let ports_raw = ann
        .get(PORTS)
        .ok_or(RecoveryError::Missing { key: PORTS })?;
    let port_mappings: Vec<PortMapping> =
        serde_json::from_str(ports_raw).map_err(|e| RecoveryError::Malformed {
            key: PORTS,
            reason: e.to_string(),
        })?;
    let roles = match ann.get(ROLES) {
        Some(raw) => parse_roles(raw)?,
        // Roles matter for placing a task, and this one is placed already.
        None => Vec::new(),
    };

    let mut task = PodTask::with_id(TaskId::new(task_id), Arc::new(pod.clone()), roles, now)?;
    task.spec = Some(Arc::new(Spec {
        agent_id: AgentId::new(agent_id),
        hostname: hostname.to_owned(),
        resources: Vec::new(),
        port_mappings,
        executor: Some(Arc::new(ExecutorInfo {
            executor_id: Some(ExecutorId::new(executor_id)),
            ..ExecutorInfo::default()
        })),
    }));
    task.offer_id = Some(OfferId::new(offer_id));
    // Launched: like any launched task it keeps the pod's key, not the pod.
    task.release_pod();
    task.set(Flag::Launched);
    task.set(Flag::Bound);
    // Not flagged Deleted even if the pod is being deleted: nothing says
    // the KILL its deletion calls for was ever sent (a leader may have
    // frozen first), so the core kills it as a deletion it just saw.
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    match phase {
        Some("Running") => {
            task.state = State::Running;
            task.order.progress = Progress::Running;
        }
        Some("Succeeded" | "Failed") => {
            task.state = State::Finished;
            task.order.finished_at = Some(now);
        }
        _ => {}
    }
    Ok(Some(task))
}

fn required<'a>(
    ann: &'a BTreeMap<String, String>,
    key: &'static str,
) -> Result<&'a str, RecoveryError> {
    match ann.get(key).map(|v| v.trim()) {
        None => Err(RecoveryError::Missing { key }),
        Some("") => Err(RecoveryError::Malformed {
            key,
            reason: "empty value".into(),
        }),
        Some(v) => Ok(v),
    }
}

fn parse_roles(raw: &str) -> Result<Vec<String>, RecoveryError> {
    if raw.trim().is_empty() {
        return Ok(Vec::new());
    }
    raw.split(',')
        .map(|r| match r.trim() {
            "" => Err(RecoveryError::Malformed {
                key: ROLES,
                reason: format!("empty role in {raw:?}"),
            }),
            role => Ok(role.to_owned()),
        })
        .collect()
}
