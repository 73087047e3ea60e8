//! Namespaces: `default`, `kube-system` and `kube-public` always exist; others can be
//! created (with their `default` ServiceAccount, in the same transaction) and deleted.
//!
//! Deletion is Kubernetes': the namespace gets `deletionTimestamp` and phase
//! `Terminating` (creates in it are refused from then on); [`Api::finalize_namespaces`]
//! deletes its pods with their grace periods and, once none is left, removes every other
//! object in it and the namespace itself in one transaction.

use k8s_openapi::api::core::v1::{Namespace, NamespaceSpec, NamespaceStatus, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use serde_json::Value;

use super::objects::{check_name, k8s_time, meta_rv, stamp_new, to_value, typed};
use super::pods::{first_object, patch_precondition};
use super::{Api, ObjectList, RETRIES, WriteOptions};
use crate::decode::decode_resource;
use crate::error::ApiError;
use crate::kinds::DEFAULT_SERVICE_ACCOUNT;
use crate::patch::{self, PatchType};
use crate::resource::Resource;
use crate::store::{Precondition, WriteOp, object_rv};
use crate::validation::{Causes, check_label_name, check_metadata};

const NAMESPACES: Resource = Resource::Namespaces;

/// Namespaces that exist from the start and can never be deleted.
pub const SYSTEM_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// The finalizer Kubernetes puts on every namespace: its content is still being removed.
const KUBERNETES_FINALIZER: &str = "kubernetes";

/// Whether a stored namespace is being deleted.
pub(crate) fn is_terminating(ns: &Value) -> bool {
    ns.pointer("/status/phase").and_then(Value::as_str) == Some("Terminating")
        || ns
            .pointer("/metadata/deletionTimestamp")
            .is_some_and(|t| !t.is_null())
}

/// The `default` ServiceAccount of namespace `ns`, as a create operation.
fn default_service_account(ns: &str, now: std::time::SystemTime) -> Result<WriteOp, ApiError> {
    let mut sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(DEFAULT_SERVICE_ACCOUNT.into()),
            namespace: Some(ns.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    stamp_new(&mut sa.metadata, now);
    Ok(WriteOp::Put {
        key: Resource::ServiceAccounts.key(ns, DEFAULT_SERVICE_ACCOUNT),
        object: to_value(&sa)?,
        precondition: Precondition::Absent,
    })
}

/// Objects a namespace's finalizer deletes in one transaction. On etcd each costs a
/// compare, and in the last transaction one more in the emptiness checks: with those
/// and the fence, under etcd's 128 compares per txn.
const DELETES_PER_COMMIT: usize = 50;

impl Api {
    /// Creates the system namespaces if missing, and the `default` ServiceAccount of every
    /// namespace that lacks one (stores written before ServiceAccounts were served).
    pub(crate) async fn ensure_system_namespaces(&self) -> Result<(), ApiError> {
        for name in SYSTEM_NAMESPACES {
            if self.get_value(&NAMESPACES.key("", name)).is_some() {
                continue;
            }
            let ns = Namespace {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..Default::default()
                },
                ..Default::default()
            };
            match self.create_namespace(ns).await {
                Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        self.label_stored_namespaces().await?;
        let (all, _) = self.store().list(&NAMESPACES.prefix(None));
        for ns in all {
            let name = ns
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            let sa_key = Resource::ServiceAccounts.key(name, DEFAULT_SERVICE_ACCOUNT);
            if name.is_empty() || is_terminating(&ns) || self.get_value(&sa_key).is_some() {
                continue;
            }
            match self
                .commit(vec![default_service_account(name, self.now())?])
                .await
            {
                Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Creates a namespace (phase Active, finalizer `kubernetes`) and its `default`
    /// ServiceAccount; 409 if it exists, 422 if the name is not a DNS-1123 label.
    pub async fn create_namespace(&self, ns: Namespace) -> Result<Namespace, ApiError> {
        self.create_namespace_with(ns, WriteOptions::default())
            .await
    }

    pub(crate) async fn create_namespace_with(
        &self,
        mut ns: Namespace,
        opts: WriteOptions,
    ) -> Result<Namespace, ApiError> {
        ns.metadata.namespace = None;
        let now = self.now();
        stamp_new(&mut ns.metadata, now);
        let spec = ns.spec.get_or_insert_with(NamespaceSpec::default);
        let finalizers = spec.finalizers.get_or_insert_with(Vec::new);
        if !finalizers.iter().any(|f| f == KUBERNETES_FINALIZER) {
            finalizers.push(KUBERNETES_FINALIZER.into());
        }
        ns.status = Some(NamespaceStatus {
            phase: Some("Active".into()),
            ..Default::default()
        });
        label_with_name(&mut ns);
        let mut causes = Causes::default();
        check_metadata(&mut causes, &ns.metadata, check_label_name);
        let name = ns.metadata.name.clone().unwrap_or_default();
        causes.into_result("Namespace", &name)?;
        self.admit_namespace_create(&ns)?;
        if opts.dry_run {
            return Ok(ns);
        }
        let op = WriteOp::Put {
            key: NAMESPACES.key("", &name),
            object: to_value(&ns)?,
            precondition: Precondition::Absent,
        };
        let mut ops = vec![op];
        // A namespace deleted and created again may still hold its old account for a
        // moment; keep it rather than fail the create.
        if self
            .get_value(&Resource::ServiceAccounts.key(&name, DEFAULT_SERVICE_ACCOUNT))
            .is_none()
        {
            ops.push(default_service_account(&name, now)?);
        }
        if let Some(op) = self.root_ca_config_map(&name)? {
            ops.push(op);
        }
        first_object(&self.commit(ops).await?)
    }

    /// Replaces the namespace `name` (PUT): with `metadata.resourceVersion`, 409 unless
    /// it is the stored one; without, unconditional. Its finalizers and status stay (the
    /// `finalize` and `status` subresources own them, as in Kubernetes).
    pub(crate) async fn replace_namespace_with(
        &self,
        name: &str,
        mut ns: Namespace,
        opts: WriteOptions,
    ) -> Result<Namespace, ApiError> {
        check_name(&mut ns.metadata, name)?;
        let explicit = meta_rv(&ns.metadata)?;
        for _ in 0..RETRIES {
            let (old, old_rv) = self.get_typed::<Namespace>(NAMESPACES, "", name)?;
            if explicit.is_some_and(|rv| rv != old_rv) {
                return Err(ApiError::stale("namespaces", name));
            }
            match self
                .update_namespace(name, &old, old_rv, ns.clone(), opts)
                .await
            {
                Err(ApiError::Conflict { .. }) if explicit.is_none() => continue,
                other => return other,
            }
        }
        Err(ApiError::stale("namespaces", name))
    }

    /// Patches the namespace `name` (merge, JSON, strategic, apply; an apply of a
    /// missing namespace creates it). Returns the unknown-field warnings too.
    pub(crate) async fn patch_namespace_with(
        &self,
        name: &str,
        ty: PatchType,
        patch: &Value,
        opts: WriteOptions,
    ) -> Result<(Namespace, Vec<String>), ApiError> {
        let explicit = patch_precondition(patch)?;
        for _ in 0..RETRIES {
            let live = match self.get_raw(NAMESPACES, "", name) {
                Ok(v) => v,
                Err(ApiError::NotFound { .. }) if ty == PatchType::Apply => {
                    let (mut ns, warnings) =
                        decode_resource::<Namespace>(patch, opts.field_validation)?;
                    check_name(&mut ns.metadata, name)?;
                    return Ok((self.create_namespace_with(ns, opts).await?, warnings));
                }
                Err(e) => return Err(e),
            };
            let live_rv = object_rv(&live).unwrap_or(0);
            if explicit.is_some_and(|rv| rv != live_rv) {
                return Err(ApiError::stale("namespaces", name));
            }
            let patched = patch::apply(ty, &live, patch, "Namespace", name)?;
            let (mut new, warnings) =
                decode_resource::<Namespace>(&patched, opts.field_validation)?;
            check_name(&mut new.metadata, name)?;
            let old: Namespace = typed(&live)?;
            match self.update_namespace(name, &old, live_rv, new, opts).await {
                Err(ApiError::Conflict { .. }) if explicit.is_none() => continue,
                other => return other.map(|ns| (ns, warnings)),
            }
        }
        Err(ApiError::stale("namespaces", name))
    }

    /// Writes `new` over `old` (stored at `old_rv`), keeping what an update may not
    /// change; Pod Security Admission checks its labels first.
    async fn update_namespace(
        &self,
        name: &str,
        old: &Namespace,
        old_rv: u64,
        mut new: Namespace,
        opts: WriteOptions,
    ) -> Result<Namespace, ApiError> {
        let (o, n) = (&old.metadata, &mut new.metadata);
        n.namespace = None;
        n.uid.clone_from(&o.uid);
        n.creation_timestamp.clone_from(&o.creation_timestamp);
        n.deletion_timestamp.clone_from(&o.deletion_timestamp);
        n.deletion_grace_period_seconds = o.deletion_grace_period_seconds;
        n.resource_version.clone_from(&o.resource_version);
        n.managed_fields.clone_from(&o.managed_fields);
        n.generate_name.clone_from(&o.generate_name);
        new.spec.clone_from(&old.spec);
        new.status.clone_from(&old.status);
        label_with_name(&mut new);
        let mut causes = Causes::default();
        check_metadata(&mut causes, &new.metadata, check_label_name);
        causes.into_result("Namespace", name)?;
        self.admit_namespace_update(old, &new)?;
        if new == *old || opts.dry_run {
            return Ok(new);
        }
        let op = WriteOp::Put {
            key: NAMESPACES.key("", name),
            object: to_value(&new)?,
            precondition: Precondition::ResourceVersion(old_rv),
        };
        first_object(&self.commit(vec![op]).await?)
    }

    /// Labels with its name every stored namespace that lacks the label (one written
    /// before the label was), as kube-apiserver labels each write.
    async fn label_stored_namespaces(&self) -> Result<(), ApiError> {
        let (all, _) = self.store().list(&NAMESPACES.prefix(None));
        for v in all {
            let Ok(mut ns) = serde_json::from_value::<Namespace>((*v).clone()) else {
                continue;
            };
            let before = ns.clone();
            label_with_name(&mut ns);
            if ns == before {
                continue;
            }
            let name = ns.metadata.name.clone().unwrap_or_default();
            let rv = crate::store::object_rv(&v).unwrap_or(0);
            let op = WriteOp::Put {
                key: NAMESPACES.key("", &name),
                object: to_value(&ns)?,
                precondition: Precondition::ResourceVersion(rv),
            };
            match self.commit(vec![op]).await {
                // Another replica wrote it meanwhile: its write labelled it too.
                Ok(_) | Err(ApiError::Conflict { .. } | ApiError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The namespace `name`; 404 if missing.
    pub fn get_namespace(&self, name: &str) -> Result<Namespace, ApiError> {
        self.get_typed(NAMESPACES, "", name).map(|(n, _)| n)
    }

    /// Namespaces matching the selectors.
    pub fn list_namespaces(
        &self,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<ObjectList<Namespace>, ApiError> {
        self.list_typed(NAMESPACES, None, label_selector, field_selector)
    }

    /// Starts deleting a namespace: it turns `Terminating` and is returned so;
    /// [`Api::finalize_namespaces`] empties and removes it. 403 for the system
    /// namespaces, 404 if missing, 409 if it is already terminating.
    pub async fn delete_namespace(&self, name: &str) -> Result<Namespace, ApiError> {
        if SYSTEM_NAMESPACES.contains(&name) {
            return Err(ApiError::Forbidden(format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            )));
        }
        let v = self.get_raw(NAMESPACES, "", name)?;
        if is_terminating(&v) {
            return Err(ApiError::Conflict {
                resource: "namespaces".into(),
                name: name.into(),
                detail: "The system is ensuring all content is removed from this namespace.  Upon completion, this namespace will automatically be purged by the system.".into(),
            });
        }
        let mut ns: Namespace = typed(&v)?;
        ns.metadata.deletion_timestamp = Some(k8s_time(self.now()));
        ns.metadata.deletion_grace_period_seconds = Some(0);
        ns.status.get_or_insert_with(Default::default).phase = Some("Terminating".into());
        let op = WriteOp::Put {
            key: NAMESPACES.key("", name),
            object: to_value(&ns)?,
            precondition: Precondition::ResourceVersion(object_rv(&v).unwrap_or(0)),
        };
        let ns = first_object(&self.commit(vec![op]).await?)?;
        // Start at once rather than at the next sweep: a namespace holding no bound pods
        // is then gone by the time kubectl looks.
        let api = self.clone();
        tokio::spawn(async move {
            if let Err(e) = api.finalize_namespaces().await {
                tracing::warn!(error = %e, "namespace finalization failed");
            }
        });
        Ok(ns)
    }

    /// One round of the namespace controller: for every terminating namespace, deletes
    /// its pods that are not yet being deleted (with their grace periods); one with no
    /// pod left loses all its other objects and then itself, in one transaction, once
    /// no finalizer holds any of them (those are marked as deleted and waited for).
    /// Returns how many namespaces were removed. Run by [`crate::sweep`].
    pub async fn finalize_namespaces(&self) -> Result<usize, ApiError> {
        let (all, _) = self.store().list(&NAMESPACES.prefix(None));
        let mut removed = 0;
        for ns in all.iter().filter(|v| is_terminating(v)) {
            let name = ns
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if self.finalize_namespace(name).await? {
                removed += 1;
            }
        }
        Ok(removed)
    }

    async fn finalize_namespace(&self, name: &str) -> Result<bool, ApiError> {
        let (pods, _) = self.store().list(&Resource::Pods.prefix(Some(name)));
        for pod in &pods {
            let deleting = pod
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|t| !t.is_null());
            let pod_name = pod
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !deleting {
                match self
                    .delete_pod(name, pod_name, &DeleteOptions::default())
                    .await
                {
                    Ok(_) | Err(ApiError::NotFound { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if !self
            .store()
            .list(&Resource::Pods.prefix(Some(name)))
            .0
            .is_empty()
        {
            return Ok(false);
        }
        let mut ops = Vec::new();
        // Objects that finalizers hold are deleted as a client would delete them (marked)
        // and waited for, as kube-controller-manager's namespace controller waits.
        let mut held = false;
        for r in Resource::NAMESPACE_CONTENTS {
            let (items, _) = self.store().list(&r.prefix(Some(name)));
            for item in items {
                let obj = item
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let finalizers = matches!(
                    item.pointer("/metadata/finalizers"),
                    Some(Value::Array(f)) if !f.is_empty()
                );
                if finalizers {
                    held = true;
                    if item.pointer("/metadata/deletionTimestamp").is_none() {
                        // Background, as KCM's namespace deleter asks: a Job's own
                        // default would hold it for the collector to orphan its pods.
                        let background = DeleteOptions {
                            propagation_policy: Some("Background".to_owned()),
                            ..DeleteOptions::default()
                        };
                        match self.delete_object(r, name, obj, &background).await {
                            Ok(_) | Err(ApiError::NotFound { .. } | ApiError::Conflict { .. }) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    continue;
                }
                ops.push(WriteOp::Delete {
                    key: r.key(name, obj),
                    precondition: Precondition::None,
                });
            }
        }
        if held {
            ops.truncate(DELETES_PER_COMMIT);
            if ops.is_empty() {
                return Ok(false);
            }
            return match self.commit(ops).await {
                Ok(_) | Err(ApiError::Conflict { .. } | ApiError::NotFound { .. }) => Ok(false),
                Err(e) => Err(e),
            };
        }
        // etcd takes at most 128 compares in one txn (`--max-txn-ops`): a namespace
        // holding more objects loses them a share per transaction, and itself in a
        // later round once the rest fits in one.
        if ops.len() > DELETES_PER_COMMIT {
            ops.truncate(DELETES_PER_COMMIT);
            return match self.commit(ops).await {
                Ok(_) | Err(ApiError::Conflict { .. } | ApiError::NotFound { .. }) => Ok(false),
                Err(e) => Err(e),
            };
        }
        // Anything written since the reads above fails the transaction; the next round
        // deletes it.
        for r in std::iter::once(Resource::Pods).chain(Resource::NAMESPACE_CONTENTS) {
            ops.push(WriteOp::CheckEmpty {
                prefix: r.prefix(Some(name)),
            });
        }
        ops.push(WriteOp::Delete {
            key: NAMESPACES.key("", name),
            precondition: Precondition::None,
        });
        match self.commit(ops).await {
            Ok(_) => Ok(true),
            Err(ApiError::Conflict { .. } | ApiError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// The label kube-apiserver keeps on every namespace: its name
/// (`kubernetes.io/metadata.name`, the namespace strategy's `Canonicalize`).
fn label_with_name(ns: &mut Namespace) {
    let name = ns.metadata.name.clone().unwrap_or_default();
    ns.metadata
        .labels
        .get_or_insert_default()
        .insert("kubernetes.io/metadata.name".into(), name);
}
