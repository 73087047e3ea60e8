//! The framework's writes on pods: the status subresource and binding to a node.
//!
//! The scheduler writes every pod at least twice (binding, then each status change), so
//! its writes edit the stored JSON directly: decoding and re-encoding a whole typed pod
//! per write cost more than the write itself. Only the parts a write reads (metadata and
//! status, never the spec) are decoded.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Map, Value};

use super::events::new_event_op;
use super::objects::{k8s_time, to_value, typed};
use super::pods::{Binding, PODS, as_stored, conflict, is_conflict, pod_key};
use super::{Api, RETRIES};
use crate::error::{ApiError, CauseKind};
use crate::store::{Change, Precondition, WriteOp, object_rv};
use crate::validation::{Causes, check_subdomain_name, is_qualified_name};

/// What a status write reads of the stored pod: its metadata and status.
#[derive(Debug, Clone, Default)]
pub struct PodHead {
    /// The stored metadata.
    pub metadata: ObjectMeta,
    /// The stored status.
    pub status: Option<PodStatus>,
}

impl PodHead {
    fn of(pod: &Value) -> Result<Self, ApiError> {
        let part = |name: &str| pod.get(name).filter(|v| !v.is_null());
        Ok(Self {
            metadata: part("metadata").map(typed).transpose()?.unwrap_or_default(),
            status: part("status").map(typed).transpose()?,
        })
    }
}

/// What [`Api::update_pod_status_with`] did.
#[derive(Debug, Clone)]
pub struct StatusWrite {
    /// The pod's metadata and status before the write.
    pub before: PodHead,
    /// The pod's resourceVersion after the write; `None` when nothing was written (the
    /// status was unchanged, or the caller declined).
    pub written: Option<u64>,
}

/// 422 unless the status's phase is one Kubernetes knows.
fn check_phase(status: &PodStatus, name: &str) -> Result<(), ApiError> {
    let mut causes = Causes::default();
    if let Some(phase) = status.phase.as_deref() {
        const PHASES: [&str; 5] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];
        if !PHASES.contains(&phase) {
            causes.unsupported("status.phase", phase, &PHASES);
        }
    }
    causes.into_result("Pod", name)
}

/// `v`'s member `key`, replaced by `empty` if missing or of another JSON kind.
fn member<'a>(v: &'a mut Map<String, Value>, key: &str, empty: fn() -> Value) -> &'a mut Value {
    let slot = v.entry(key.to_owned()).or_insert_with(empty);
    if std::mem::discriminant(slot) != std::mem::discriminant(&empty()) {
        *slot = empty();
    }
    slot
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// `v` as an object (a stored pod always is); 500 otherwise, never a panic.
fn fields<'a>(v: &'a mut Value, name: &str) -> Result<&'a mut Map<String, Value>, ApiError> {
    v.as_object_mut()
        .ok_or_else(|| ApiError::Internal(format!("stored pod {name} is malformed")))
}

impl Api {
    /// Replaces the pod's status (the status subresource): metadata and spec stay as
    /// stored. Unconditional (a lost race is retried on a fresh read).
    pub async fn update_pod_status(
        &self,
        namespace: &str,
        name: &str,
        status: PodStatus,
    ) -> Result<Pod, ApiError> {
        self.check_in_process("update", "pods/status", namespace, name)?;
        self.write_status(namespace, name, None, false, |_| Ok(status.clone()))
            .await
    }

    /// The status write behind PUT/PATCH `pods/NAME/status` and [`Api::update_pod_status`]:
    /// `make` computes the new status from the stored pod.
    pub(crate) async fn write_status(
        &self,
        ns: &str,
        name: &str,
        expected: Option<u64>,
        dry_run: bool,
        make: impl Fn(&Pod) -> Result<PodStatus, ApiError>,
    ) -> Result<Pod, ApiError> {
        for _ in 0..RETRIES {
            let (old, old_rv) = self.get_typed::<Pod>(PODS, ns, name)?;
            if expected.is_some_and(|rv| rv != old_rv) {
                return Err(ApiError::stale("pods", name));
            }
            let status = make(&old)?;
            check_phase(&status, name)?;
            let mut new = old.clone();
            new.status = Some(status);
            if new == old || dry_run {
                return Ok(new);
            }
            let result = self
                .commit(vec![WriteOp::Put {
                    key: pod_key(ns, name),
                    object: to_value(&new)?,
                    precondition: Precondition::ResourceVersion(old_rv),
                }])
                .await;
            match result {
                Err(e) if is_conflict(&e) && expected.is_none() => continue,
                other => return as_stored(new, &other?),
            }
        }
        Err(ApiError::stale("pods", name))
    }

    /// The status write the scheduler makes: `make` sees the stored metadata and status
    /// and returns the new status, or `None` to write nothing. Retried on a fresh read if
    /// another writer got in between; 404 if the pod is gone.
    pub async fn update_pod_status_with(
        &self,
        namespace: &str,
        name: &str,
        make: impl Fn(&PodHead) -> Option<PodStatus>,
    ) -> Result<StatusWrite, ApiError> {
        self.check_in_process("update", "pods/status", namespace, name)?;
        for _ in 0..RETRIES {
            let old = self.get_raw(PODS, namespace, name)?;
            let old_rv = object_rv(&old).unwrap_or(0);
            let before = PodHead::of(&old)?;
            let Some(status) = make(&before) else {
                return Ok(StatusWrite {
                    before,
                    written: None,
                });
            };
            check_phase(&status, name)?;
            let status = to_value(&status)?;
            if old.get("status") == Some(&status) {
                return Ok(StatusWrite {
                    before,
                    written: None,
                });
            }
            let mut new = (*old).clone();
            fields(&mut new, name)?.insert("status".into(), status);
            if let Some(change) = self.put_if_unchanged(namespace, name, new, old_rv).await? {
                return Ok(StatusWrite {
                    before,
                    written: Some(change.rv),
                });
            }
        }
        Err(ApiError::stale("pods", name))
    }

    /// Binds the pod to `binding.node_name`, merging the annotations and setting the
    /// condition in one write. Idempotent for the same node; 409 if the pod is bound to
    /// another node or is being deleted.
    pub async fn bind_pod(
        &self,
        namespace: &str,
        name: &str,
        binding: &Binding,
    ) -> Result<Pod, ApiError> {
        typed(self.bind_pod_raw(namespace, name, binding).await?.as_ref())
    }

    /// [`Api::bind_pod`], answering with the stored JSON instead of a decoded pod.
    pub async fn bind_pod_raw(
        &self,
        namespace: &str,
        name: &str,
        binding: &Binding,
    ) -> Result<Arc<Value>, ApiError> {
        self.check_in_process("create", "pods/binding", namespace, name)?;
        let mut causes = Causes::default();
        check_subdomain_name(&mut causes, "target.name", &binding.node_name);
        for k in binding.annotations.keys() {
            if !is_qualified_name(k) {
                causes.push(
                    CauseKind::Invalid,
                    "metadata.annotations",
                    format!("Invalid value: \"{k}\": not a qualified name"),
                );
            }
        }
        causes.into_result("Binding", name)?;
        let condition = binding.condition.clone().unwrap_or_else(|| PodCondition {
            type_: "PodScheduled".into(),
            status: "True".into(),
            last_transition_time: Some(k8s_time(self.now())),
            ..Default::default()
        });
        let condition = to_value(&condition)?;
        let mut event = binding.event.clone();
        let event_name = match event.as_mut() {
            Some(event) => Some(self.prepare_event(namespace, event)?),
            None => None,
        };
        for _ in 0..RETRIES {
            let old = self.get_raw(PODS, namespace, name)?;
            let old_rv = object_rv(&old).unwrap_or(0);
            // A relaunch only names a pod's new task: a pod being deleted
            // may need one, for its containers to be stopped.
            if !binding.relaunch
                && old
                    .pointer("/metadata/deletionTimestamp")
                    .is_some_and(|t| !t.is_null())
            {
                return Err(conflict(
                    name,
                    "pod is being deleted, cannot be assigned to a host",
                ));
            }
            if let Some(uid) = &binding.uid {
                let stored = old.pointer("/metadata/uid").and_then(Value::as_str);
                if stored != Some(uid.as_str()) {
                    return Err(conflict(
                        name,
                        format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                            stored.unwrap_or_default()
                        ),
                    ));
                }
            }
            match old.pointer("/spec/nodeName").and_then(Value::as_str) {
                Some(n) if !n.is_empty() && n != binding.node_name => {
                    return Err(conflict(
                        name,
                        format!("pod {name} is already assigned to node \"{n}\""),
                    ));
                }
                Some(n) if !n.is_empty() => {}
                _ if binding.relaunch => {
                    return Err(conflict(
                        name,
                        format!("pod {name} is not bound to node \"{}\"", binding.node_name),
                    ));
                }
                _ => {}
            }
            let mut new = (*old).clone();
            let pod = fields(&mut new, name)?;
            let spec = fields(member(pod, "spec", empty_object), name)?;
            spec.insert("nodeName".into(), Value::String(binding.node_name.clone()));
            let metadata = fields(member(pod, "metadata", empty_object), name)?;
            let annotations = fields(member(metadata, "annotations", empty_object), name)?;
            for (k, v) in &binding.annotations {
                annotations.insert(k.clone(), Value::String(v.clone()));
            }
            if !binding.labels.is_empty() {
                let labels = fields(member(metadata, "labels", empty_object), name)?;
                for (k, v) in &binding.labels {
                    labels.insert(k.clone(), Value::String(v.clone()));
                }
            }
            if !binding.relaunch {
                let status = fields(member(pod, "status", empty_object), name)?;
                set_condition(status, &condition);
            }
            if new == *old {
                // Bound so already: no binding happens, so no event, but the
                // caller's launch still needs its values durable.
                if !binding.meta.is_empty() {
                    self.commit(meta_ops(binding)).await?;
                }
                return Ok(old);
            }
            let mut also = Vec::with_capacity(1 + binding.meta.len());
            if let (false, Some(event), Some(event_name)) =
                (binding.relaunch, event.as_mut(), event_name.as_deref())
            {
                let about = &mut event.involved_object.resource_version;
                if about.is_none() {
                    *about = Some(old_rv.to_string());
                }
                also.push(new_event_op(namespace, event_name, event)?);
            }
            also.extend(meta_ops(binding));
            if let Some(change) = self
                .put_if_unchanged_with(namespace, name, new, old_rv, also)
                .await?
            {
                return Ok(Arc::clone(&change.object));
            }
        }
        Err(ApiError::stale("pods", name))
    }
}

impl Api {
    /// Writes `new` over the pod if it is still at `old_rv`; `None` if another writer got
    /// in first (the caller reads again and retries).
    async fn put_if_unchanged(
        &self,
        namespace: &str,
        name: &str,
        new: Value,
        old_rv: u64,
    ) -> Result<Option<Arc<Change>>, ApiError> {
        self.put_if_unchanged_with(namespace, name, new, old_rv, Vec::new())
            .await
    }

    /// [`Api::put_if_unchanged`] with more writes in the same transaction, after the
    /// pod's; the change returned is the pod's.
    async fn put_if_unchanged_with(
        &self,
        namespace: &str,
        name: &str,
        new: Value,
        old_rv: u64,
        also: Vec<WriteOp>,
    ) -> Result<Option<Arc<Change>>, ApiError> {
        let mut ops = Vec::with_capacity(1 + also.len());
        ops.push(WriteOp::Put {
            key: pod_key(namespace, name),
            object: new,
            precondition: Precondition::ResourceVersion(old_rv),
        });
        ops.extend(also);
        let result = self.commit(ops).await;
        match result {
            Err(e) if is_conflict(&e) => Ok(None),
            Err(e) => Err(e),
            Ok(changes) => changes
                .into_iter()
                .next()
                .map(Some)
                .ok_or_else(|| ApiError::Internal("the store reported no change".into())),
        }
    }
}

/// The writes of a binding's side values.
fn meta_ops(binding: &Binding) -> Vec<WriteOp> {
    (binding.meta.iter())
        .map(|(key, value)| WriteOp::PutMeta {
            key: key.clone(),
            value: value.clone(),
        })
        .collect()
}

/// Replaces the condition of the same type in `status.conditions`, or appends it.
fn set_condition(status: &mut Map<String, Value>, condition: &Value) {
    let Value::Array(conditions) = member(status, "conditions", || Value::Array(Vec::new())) else {
        return;
    };
    let kind = condition.get("type");
    match conditions.iter_mut().find(|c| c.get("type") == kind) {
        Some(c) => *c = condition.clone(),
        None => conditions.push(condition.clone()),
    }
}
