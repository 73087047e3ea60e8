//! Deleting pods.
//!
//! A pod no node holds (no `spec.nodeName`, or already Succeeded/Failed, or a zero grace
//! period) leaves the store at once. A bound pod instead gets `deletionTimestamp`
//! (= now + grace) and stays until [`Api::finalize_pod`] (the framework saw its task end)
//! or [`Api::expire_deletions`] (the grace period ran out by the injected clock) removes
//! it with a DELETED event.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
use serde_json::Value;

use super::finalizers;
use super::kinds::check_preconditions;
use super::objects::{k8s_time, system_time, to_value, typed};
use super::pods::{DEFAULT_GRACE_SECONDS, Finalized, PODS, first_object, is_conflict, pod_key};
use super::{Api, RETRIES};
use crate::error::ApiError;
use crate::store::{Precondition, WriteOp, object_rv};

/// The longest grace period honoured: a year is far beyond any real shutdown, and the
/// bound keeps the deadline a representable time whatever a client sends.
const MAX_GRACE_SECONDS: i64 = 365 * 24 * 3600;

impl Api {
    /// Deletes the pod (see the module doc for when it leaves at once). Returns the pod as
    /// deleted or as marked. Honors `gracePeriodSeconds`, uid/resourceVersion
    /// preconditions and `dryRun`.
    pub async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Pod, ApiError> {
        let dry_run = opts
            .dry_run
            .as_ref()
            .is_some_and(|d| d.iter().any(|x| x == "All"));
        super::finalizers::validate_delete_options(opts)?;
        for _ in 0..RETRIES {
            let (old, old_rv) = self.get_typed::<Pod>(PODS, namespace, name)?;
            check_preconditions(PODS, name, &old.metadata, old_rv, opts)?;
            let spec = old.spec.clone().unwrap_or_default();
            let grace = opts
                .grace_period_seconds
                .or(spec.termination_grace_period_seconds)
                .unwrap_or(DEFAULT_GRACE_SECONDS)
                .clamp(0, MAX_GRACE_SECONDS);
            let bound = spec.node_name.as_deref().is_some_and(|n| !n.is_empty());
            let phase = old
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .unwrap_or("");
            let terminal = matches!(phase, "Succeeded" | "Failed");
            let precondition = Precondition::ResourceVersion(old_rv);
            let key = pod_key(namespace, name);
            let have = old.metadata.finalizers.clone().unwrap_or_default();
            let wanted = finalizers::finalizers_for_delete(PODS, &have, opts);
            let held = wanted.as_ref().map_or(!have.is_empty(), |f| !f.is_empty());
            let result = if (!bound || terminal || grace == 0) && held {
                // Gone from its node, but finalizers hold it until they are removed.
                let mut new = old.clone();
                if let Some(f) = wanted {
                    new.metadata.finalizers = Some(f);
                }
                finalizers::mark_deleting(&mut new.metadata, self.now());
                if dry_run || new == old {
                    return Ok(new);
                }
                self.commit(vec![WriteOp::Put {
                    key,
                    object: to_value(&new)?,
                    precondition,
                }])
                .await
            } else if !bound || terminal || grace == 0 {
                if dry_run {
                    return Ok(old);
                }
                self.commit(vec![WriteOp::Delete { key, precondition }])
                    .await
            } else {
                let deadline = self.now() + Duration::from_secs(grace.unsigned_abs());
                let current = old.metadata.deletion_timestamp.as_ref().map(system_time);
                if current.is_some_and(|c| c <= deadline) {
                    return Ok(old);
                }
                let mut new = old.clone();
                if let Some(f) = wanted {
                    new.metadata.finalizers = Some(f);
                }
                new.metadata.deletion_timestamp = Some(k8s_time(deadline));
                new.metadata.deletion_grace_period_seconds = Some(grace);
                if dry_run {
                    return Ok(new);
                }
                self.commit(vec![WriteOp::Put {
                    key,
                    object: to_value(&new)?,
                    precondition,
                }])
                .await
            };
            match result {
                Err(e) if is_conflict(&e) => continue,
                other => return first_object(&other?),
            }
        }
        Err(ApiError::stale("pods", name))
    }

    /// The framework's confirmation that the pod's task is terminal: a pod being deleted
    /// leaves the store (DELETED event). `uid`, if given, must match, so a pod recreated
    /// under the same name is never removed by mistake.
    pub async fn finalize_pod(
        &self,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<Finalized, ApiError> {
        for _ in 0..RETRIES {
            let Ok((pod, rv)) = self.get_typed::<Pod>(PODS, namespace, name) else {
                return Ok(Finalized::Gone);
            };
            if uid.is_some_and(|u| pod.metadata.uid.as_deref() != Some(u)) {
                return Ok(Finalized::Gone);
            }
            if pod.metadata.deletion_timestamp.is_none() {
                return Ok(Finalized::NotTerminating);
            }
            let (op, done) = match self.removal(&pod, rv)? {
                Some(op) => op,
                None => return Ok(Finalized::Held),
            };
            match self.commit(vec![op]).await {
                Ok(_) => return Ok(done),
                Err(ApiError::NotFound { .. }) => return Ok(Finalized::Gone),
                Err(e) if is_conflict(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::stale("pods", name))
    }

    /// Removes every terminating pod whose grace period has run out by `now`; returns how
    /// many left. A pod changed meanwhile is left for the next sweep.
    pub async fn expire_deletions(&self, now: SystemTime) -> Result<usize, ApiError> {
        let (items, _) = self
            .store()
            .list_containing(&PODS.prefix(None), "\"deletionTimestamp\"");
        let mut removed = 0;
        for v in items {
            let due = v
                .pointer("/metadata/deletionTimestamp")
                .and_then(Value::as_str)
                .and_then(crate::clock::parse_time)
                .is_some_and(|t| t <= now);
            if !due {
                continue;
            }
            let (Some(ns), Some(name), Some(rv)) = (
                v.pointer("/metadata/namespace").and_then(Value::as_str),
                v.pointer("/metadata/name").and_then(Value::as_str),
                object_rv(&v),
            ) else {
                continue;
            };
            let finalizers = matches!(
                v.pointer("/metadata/finalizers"),
                Some(Value::Array(f)) if !f.is_empty()
            );
            let (op, done) = if finalizers {
                // Held by finalizers: only a pod not yet marked gets a write.
                let Ok(pod) = typed::<Pod>(&v) else {
                    continue;
                };
                match self.removal(&pod, rv)? {
                    Some(write) => write,
                    None => continue,
                }
            } else {
                let op = WriteOp::Delete {
                    key: pod_key(ns, name),
                    precondition: Precondition::ResourceVersion(rv),
                };
                (op, Finalized::Removed)
            };
            match self.commit(vec![op]).await {
                Ok(_) if done == Finalized::Removed => removed += 1,
                Ok(_) => {}
                Err(ApiError::NotFound { .. } | ApiError::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(removed)
    }

    /// The write that ends a terminating pod's grace period: its removal, or, while
    /// finalizers hold it, its grace period set to 0 (`None` when already so), after
    /// which the update that removes the last finalizer removes it.
    fn removal(&self, pod: &Pod, rv: u64) -> Result<Option<(WriteOp, Finalized)>, ApiError> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let key = pod_key(ns, name);
        let precondition = Precondition::ResourceVersion(rv);
        if !finalizers::has_finalizers(&pod.metadata) {
            return Ok(Some((
                WriteOp::Delete { key, precondition },
                Finalized::Removed,
            )));
        }
        let mut held = pod.clone();
        finalizers::mark_deleting(&mut held.metadata, self.now());
        if held == *pod {
            return Ok(None);
        }
        let op = WriteOp::Put {
            key,
            object: to_value(&held)?,
            precondition,
        };
        Ok(Some((op, Finalized::Held)))
    }
}
