//! Pods: create, read, replace, patch and watch. The framework's own writes live beside
//! this file: status and binding in `pod_status.rs`, deletion in `pod_deletion.rs`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus};
use serde_json::Value;

use super::objects::{
    bind_namespace, check_name, create_with_name_retries, meta_rv, name_is_generated, stamp_new,
    to_value, typed,
};
use super::{Api, ObjectList, ObjectStream, RETRIES, RawStream, WriteOptions};
use crate::decode::{FieldValidation, decode_resource};
use crate::error::ApiError;
use crate::kinds::DEFAULT_SERVICE_ACCOUNT;
use crate::patch::{self, PatchType};
use crate::resource::Resource;
use crate::selectors::Selectors;
use crate::store::{Precondition, WriteOp, object_rv};
use crate::validation::{validate_pod, validate_pod_update};

pub(crate) const PODS: Resource = Resource::Pods;

/// Kubernetes' default `terminationGracePeriodSeconds`.
pub(crate) const DEFAULT_GRACE_SECONDS: i64 = 30;

/// What the framework writes when it places a pod on a node.
#[derive(Debug, Clone, Default)]
pub struct Binding {
    /// The node (a Mesos agent's hostname, to the framework; just a name here).
    pub node_name: String,
    /// Annotations merged into the pod's (e.g. recovery data).
    pub annotations: BTreeMap<String, String>,
    /// A condition set on the pod, replacing one of the same type; `None` sets
    /// `PodScheduled=True`.
    pub condition: Option<PodCondition>,
    /// An event created in the binding's own transaction (the scheduler's
    /// `Scheduled`): it exists exactly when the binding does, and costs the store no
    /// write of its own. Its `involvedObject.resourceVersion`, if unset, becomes the
    /// pod's as the binding found it, as kube-scheduler's event names the pod it bound.
    pub event: Option<k8s_openapi::api::core::v1::Event>,
    /// Values of the side key-value space ([`Api::put_meta`]) written in the binding's
    /// transaction: what the pod's launch needs durable with it (its executor's info).
    /// A binding that finds the pod bound so already writes them on their own.
    pub meta: Vec<(String, Vec<u8>)>,
    /// Labels merged into the pod's in the same write (an admission hook's).
    pub labels: BTreeMap<String, String>,
    /// The pod must be this one (its `metadata.uid`): a pod deleted and created
    /// again under the same name is another pod, and gets 409.
    pub uid: Option<String>,
    /// The pod must be bound to `node_name` already: only the annotations and labels
    /// are written (a pod launched again on its node), with no condition and no
    /// event. 409 if it is not bound there. A pod being deleted may be
    /// relaunched (a new executor adopts its containers to stop them).
    pub relaunch: bool,
}

/// What [`Api::finalize_pod`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finalized {
    /// The terminating pod left the store (watchers got DELETED).
    Removed,
    /// The pod exists but nobody asked to delete it; nothing changed.
    NotTerminating,
    /// No such pod (or another pod of that name, by uid); nothing changed.
    Gone,
    /// The pod's grace period is over, but finalizers hold it: it leaves the store
    /// with the update that removes the last one.
    Held,
}

/// Fills in what Kubernetes defaults on pods, so stored pods look as kubectl expects.
fn default_pod(pod: &mut Pod) {
    if let Some(spec) = pod.spec.as_mut() {
        super::pod_defaults::default_pod_spec(spec);
        super::pod_defaults::default_pod_requests(spec);
    }
}

/// The pod's QoS class, as Kubernetes derives it from requests and limits.
fn qos_class(pod: &Pod) -> String {
    let Some(spec) = &pod.spec else {
        return "BestEffort".into();
    };
    let (mut any, mut guaranteed) = (false, true);
    for c in &spec.containers {
        let r = c.resources.clone().unwrap_or_default();
        let limits = r.limits.unwrap_or_default();
        let requests = r.requests.unwrap_or_default();
        any |= !limits.is_empty() || !requests.is_empty();
        for res in ["cpu", "memory"] {
            match limits.get(res) {
                None => guaranteed = false,
                Some(l) => {
                    if requests.get(res).is_some_and(|q| q != l) {
                        guaranteed = false;
                    }
                }
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort".into(),
        (true, true) => "Guaranteed".into(),
        (true, false) => "Burstable".into(),
    }
}

pub(crate) fn conflict(name: &str, detail: impl Into<String>) -> ApiError {
    ApiError::Conflict {
        resource: "pods".into(),
        name: name.into(),
        detail: detail.into(),
    }
}

pub(crate) fn is_conflict(e: &ApiError) -> bool {
    matches!(e, ApiError::Conflict { .. })
}

pub(crate) fn pod_key(ns: &str, name: &str) -> String {
    PODS.key(ns, name)
}

impl Api {
    /// Creates a pod in `namespace` (409 if the name is taken, 404 if the namespace does
    /// not exist, 422 if invalid). The status is reset to `Pending`.
    pub async fn create_pod(&self, namespace: &str, pod: Pod) -> Result<Pod, ApiError> {
        self.create_pod_with(namespace, pod, WriteOptions::default())
            .await
    }

    pub(crate) async fn create_pod_with(
        &self,
        ns: &str,
        mut pod: Pod,
        opts: WriteOptions,
    ) -> Result<Pod, ApiError> {
        bind_namespace(&mut pod.metadata, ns)?;
        let generated = name_is_generated(&pod.metadata);
        // Admission refusals name a pod by its generateName (kube generates the name
        // after admission; mesopod before, so retries can pick another).
        let shown = super::limit_ranger::admission_name(&pod.metadata);
        stamp_new(&mut pod.metadata, self.now());
        default_pod(&mut pod);
        pod.status = Some(PodStatus {
            phase: Some("Pending".into()),
            qos_class: Some(qos_class(&pod)),
            ..Default::default()
        });
        validate_pod(&pod)?;
        let name = pod.metadata.name.clone().unwrap_or_default();
        let mut causes = crate::validation::Causes::default();
        super::finalizers::check(&mut causes, &pod.metadata);
        causes.into_result("Pod", &name)?;
        // A missing or terminating namespace is the first thing a create is told.
        self.namespace_guard(PODS, ns, &name)?;
        let forbidden =
            |why: String| ApiError::Forbidden(format!("pods \"{shown}\" is forbidden: {why}"));
        let limit_ranges = self.limit_ranges(ns)?;
        if super::limit_ranger::apply_defaults(&mut pod, &limit_ranges) {
            // As in kube-apiserver, the defaults are validated with the rest of the pod
            // (a request above a defaulted limit is a 422), and decide its QoS class.
            validate_pod(&pod)?;
            let qos = qos_class(&pod);
            if let Some(status) = pod.status.as_mut() {
                status.qos_class = Some(qos);
            }
        }
        self.admit_service_account(ns, &shown, &mut pod)?;
        self.admit_priority(&shown, &mut pod)?;
        // kube's pod strategy warns once the pod is valid, before validating admission.
        if crate::notes::listening() {
            crate::validation::pod_create_warnings(&pod)
                .into_iter()
                .for_each(crate::notes::warn);
        }
        super::limit_ranger::check(&pod, &limit_ranges).map_err(forbidden)?;
        self.admit_pod_security(ns, &name, &pod, None)?;
        let subject = crate::quota::Subject::Pod(&pod);
        let key = pod_key(ns, &name);
        let fixed = (!generated).then_some(key.as_str());
        // Under a quota, the pod is written with its charge, in one commit.
        let mut ride = || -> Result<Vec<WriteOp>, ApiError> {
            Ok(vec![
                self.namespace_guard(PODS, ns, &name)?,
                WriteOp::Put {
                    key: key.clone(),
                    object: to_value(&pod)?,
                    precondition: Precondition::Absent,
                },
            ])
        };
        let charge = self
            .admit_quota(
                ns,
                (PODS, &shown, fixed),
                subject,
                opts.dry_run,
                Some(&mut ride),
            )
            .await?;
        if let super::quota_admission::Charge::Committed(changes) = charge {
            return as_stored(pod, &changes);
        }
        if opts.dry_run {
            if self.get_value(&pod_key(ns, &name)).is_some() {
                return Err(ApiError::AlreadyExists {
                    resource: "pods".into(),
                    name,
                });
            }
            return Ok(pod);
        }
        let changes = create_with_name_retries(&mut pod, generated, |pod: &Pod| {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let put = WriteOp::Put {
                key: pod_key(ns, &name),
                object: to_value(pod)?,
                precondition: Precondition::Absent,
            };
            Ok(async move { self.commit_create(PODS, ns, &name, put).await })
        })
        .await?;
        as_stored(pod, &changes)
    }

    /// kube-apiserver's ServiceAccount admission: a pod without `serviceAccountName` runs
    /// as `default`; the account must exist in the namespace (403 otherwise).
    fn admit_service_account(&self, ns: &str, name: &str, pod: &mut Pod) -> Result<(), ApiError> {
        let Some(spec) = pod.spec.as_mut() else {
            return Ok(());
        };
        let account = match spec
            .service_account_name
            .as_deref()
            .filter(|s| !s.is_empty())
        {
            Some(a) => a.to_string(),
            // The deprecated `serviceAccount` still names the account when it is alone.
            None => spec
                .service_account
                .clone()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT.into()),
        };
        spec.service_account_name = Some(account.clone());
        spec.service_account = Some(account.clone());
        let Some(sa) = self.get_value(&Resource::ServiceAccounts.key(ns, &account)) else {
            return Err(ApiError::Forbidden(format!(
                "pods \"{name}\" is forbidden: error looking up service account {ns}/{account}: serviceaccount \"{account}\" not found"
            )));
        };
        self.add_token_volume(pod, Some(&sa));
        Ok(())
    }

    /// The pod `namespace/name`; 404 if missing.
    pub fn get_pod(&self, namespace: &str, name: &str) -> Result<Pod, ApiError> {
        self.get_typed(PODS, namespace, name).map(|(p, _)| p)
    }

    /// Pods in `namespace` (or all namespaces) matching the selectors (Kubernetes syntax;
    /// empty selects all). Fields: `metadata.name`, `metadata.namespace`, `spec.nodeName`,
    /// `status.phase` and a few more, as Kubernetes allows.
    pub fn list_pods(
        &self,
        namespace: Option<&str>,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<ObjectList<Pod>, ApiError> {
        self.list_typed(PODS, namespace, label_selector, field_selector)
    }

    /// Replaces the pod (PUT). With `metadata.resourceVersion` set, 409 unless it is the
    /// stored one; without, unconditional. Status changes are ignored (use
    /// [`Api::update_pod_status`]); spec changes are limited as in Kubernetes.
    pub async fn replace_pod(
        &self,
        namespace: &str,
        name: &str,
        pod: Pod,
    ) -> Result<Pod, ApiError> {
        self.replace_pod_with(namespace, name, pod, WriteOptions::default())
            .await
    }

    pub(crate) async fn replace_pod_with(
        &self,
        ns: &str,
        name: &str,
        mut pod: Pod,
        opts: WriteOptions,
    ) -> Result<Pod, ApiError> {
        check_name(&mut pod.metadata, name)?;
        bind_namespace(&mut pod.metadata, ns)?;
        let explicit = meta_rv(&pod.metadata)?;
        for _ in 0..RETRIES {
            let (old, old_rv) = self.get_typed::<Pod>(PODS, ns, name)?;
            if explicit.is_some_and(|rv| rv != old_rv) {
                return Err(ApiError::stale("pods", name));
            }
            match self
                .update_from(ns, name, old, old_rv, pod.clone(), opts)
                .await
            {
                Err(e) if is_conflict(&e) && explicit.is_none() => continue,
                other => return other,
            }
        }
        Err(ApiError::stale("pods", name))
    }

    /// Patches the pod. `resourceVersion` in the patch's metadata is a precondition;
    /// otherwise a lost race is retried on a fresh read. A server-side apply of a missing
    /// pod creates it.
    pub async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        ty: PatchType,
        patch: &Value,
    ) -> Result<Pod, ApiError> {
        let opts = WriteOptions {
            field_validation: FieldValidation::Strict,
            ..Default::default()
        };
        self.patch_pod_with(namespace, name, ty, patch, opts)
            .await
            .map(|(p, _)| p)
    }

    /// As [`Api::patch_pod`], returning unknown-field warnings too.
    pub(crate) async fn patch_pod_with(
        &self,
        ns: &str,
        name: &str,
        ty: PatchType,
        patch: &Value,
        opts: WriteOptions,
    ) -> Result<(Pod, Vec<String>), ApiError> {
        let explicit = patch_precondition(patch)?;
        for _ in 0..RETRIES {
            let live = match self.get_raw(PODS, ns, name) {
                Ok(v) => v,
                Err(ApiError::NotFound { .. }) if ty == PatchType::Apply => {
                    let (mut pod, warnings) = decode_resource::<Pod>(patch, opts.field_validation)?;
                    check_name(&mut pod.metadata, name)?;
                    return Ok((self.create_pod_with(ns, pod, opts).await?, warnings));
                }
                Err(e) => return Err(e),
            };
            let live_rv = object_rv(&live).unwrap_or(0);
            if explicit.is_some_and(|rv| rv != live_rv) {
                return Err(ApiError::stale("pods", name));
            }
            let patched = patch::apply(ty, &live, patch, "Pod", name)?;
            let (new, warnings) = decode_resource::<Pod>(&patched, opts.field_validation)?;
            let mut new = new;
            check_name(&mut new.metadata, name)?;
            bind_namespace(&mut new.metadata, ns)?;
            let old: Pod = typed(&live)?;
            match self.update_from(ns, name, old, live_rv, new, opts).await {
                Err(e) if is_conflict(&e) && explicit.is_none() => continue,
                other => return other.map(|p| (p, warnings)),
            }
        }
        Err(ApiError::stale("pods", name))
    }

    /// Writes `new` over `old` (stored at `old_rv`) keeping what updates may not change.
    async fn update_from(
        &self,
        ns: &str,
        name: &str,
        mut old: Pod,
        old_rv: u64,
        mut new: Pod,
        opts: WriteOptions,
    ) -> Result<Pod, ApiError> {
        // A pod stored before a default was added is judged as if it had it, as
        // kube-apiserver defaults what it reads from etcd.
        default_pod(&mut old);
        let old = &old;
        new.metadata.uid.clone_from(&old.metadata.uid);
        new.metadata
            .creation_timestamp
            .clone_from(&old.metadata.creation_timestamp);
        new.metadata
            .deletion_timestamp
            .clone_from(&old.metadata.deletion_timestamp);
        new.metadata.deletion_grace_period_seconds = old.metadata.deletion_grace_period_seconds;
        new.metadata
            .resource_version
            .clone_from(&old.metadata.resource_version);
        new.metadata
            .managed_fields
            .clone_from(&old.metadata.managed_fields);
        new.status.clone_from(&old.status);
        default_pod(&mut new);
        // What the server filled in at create (the node; admission's account, and
        // priority with its class and policy), a replace that leaves out keeps.
        if let (Some(n), Some(o)) = (new.spec.as_mut(), old.spec.as_ref()) {
            keep_if_unset(&mut n.node_name, &o.node_name);
            if n.service_account_name.as_deref().is_none_or(str::is_empty) {
                n.service_account_name.clone_from(&o.service_account_name);
                n.service_account.clone_from(&o.service_account);
            }
            keep_if_unset(&mut n.priority_class_name, &o.priority_class_name);
            keep_if_unset(&mut n.preemption_policy, &o.preemption_policy);
            n.priority = n.priority.or(o.priority);
        }
        validate_pod(&new)?;
        validate_pod_update(old, &new)?;
        let mut causes = crate::validation::Causes::default();
        super::finalizers::check_update(&mut causes, &old.metadata, &new.metadata);
        causes.into_result("Pod", name)?;
        self.admit_pod_security(ns, name, &new, Some(old))?;
        if new == *old || opts.dry_run {
            return Ok(new);
        }
        let key = pod_key(ns, name);
        let precondition = Precondition::ResourceVersion(old_rv);
        if super::finalizers::removed_by_update(&old.metadata, &new.metadata) {
            // The last finalizer of a pod whose grace period is over: it leaves.
            let changes = self
                .commit(vec![WriteOp::Delete { key, precondition }])
                .await?;
            return as_stored(new, &changes);
        }
        let changes = self
            .commit(vec![WriteOp::Put {
                key,
                object: to_value(&new)?,
                precondition,
            }])
            .await?;
        as_stored(new, &changes)
    }

    /// Pod changes after `from` (a list's resourceVersion), in order; in `namespace` or
    /// all. `Err(ApiError::Expired)` at once if `from` is older than the store's history;
    /// the stream ends with an `Expired` item if the consumer falls too far behind. Either
    /// way: relist, then watch from the new list's resourceVersion.
    pub fn watch_pods(
        &self,
        namespace: Option<&str>,
        from: u64,
    ) -> Result<ObjectStream<Pod>, ApiError> {
        self.watch_typed(PODS, namespace, from)
    }

    /// [`Api::watch_pods`] without decoding: each event carries the stored JSON. Same
    /// ordering and expiry rules.
    pub fn watch_pods_raw(
        &self,
        namespace: Option<&str>,
        from: u64,
    ) -> Result<RawStream, ApiError> {
        self.watch_raw(PODS, namespace, Some(from), Selectors::default())
    }
}

/// The resourceVersion a patch names in its metadata: a precondition of the write.
pub(crate) fn patch_precondition(patch: &Value) -> Result<Option<u64>, ApiError> {
    match patch
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        Some(s) => s
            .parse::<u64>()
            .map(Some)
            .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {s:?}"))),
        None => Ok(None),
    }
}

/// `pod` as the store now holds it. The store only stamps the resourceVersion, so setting
/// that is exact and spares decoding the stored JSON again on every write.
pub(crate) fn as_stored(
    mut pod: Pod,
    changes: &[std::sync::Arc<crate::store::Change>],
) -> Result<Pod, ApiError> {
    let change = changes
        .first()
        .ok_or_else(|| ApiError::Internal("the store reported no change".into()))?;
    pod.metadata.resource_version = Some(change.rv.to_string());
    Ok(pod)
}

/// The object of the first change, typed.
pub(crate) fn first_object<T: serde::de::DeserializeOwned>(
    changes: &[std::sync::Arc<crate::store::Change>],
) -> Result<T, ApiError> {
    // Check operations produce no change, so the first change is the object written.
    let change = changes
        .first()
        .ok_or_else(|| ApiError::Internal("the store reported no change".into()))?;
    typed(&change.object)
}

/// `new` takes `old` when a write left it out (unset or empty).
fn keep_if_unset(new: &mut Option<String>, old: &Option<String>) {
    if new.as_deref().is_none_or(str::is_empty) {
        new.clone_from(old);
    }
}
