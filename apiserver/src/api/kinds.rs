//! The plain kinds (`crate::kinds`) through one generic path: create (a namespaced one
//! in a live namespace), replace and patch with resourceVersion preconditions, delete at
//! once. What differs between them is in `crate::kinds`; every write is admitted by the
//! kind for its writer ([`Kind::admit`]) after validation.

use std::sync::Arc;

use serde_json::{Value, json};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};

use super::finalizers;
use super::objects::{
    bind_namespace, check_name, create_with_name_retries, meta_rv, name_is_generated, stamp_new,
    to_value, typed,
};
use super::pods::{first_object, patch_precondition};
use super::{Api, RETRIES, WriteOptions};
use crate::auth::rbac::Writer;
use crate::decode::{decode_resource, decode_resource_body};
use crate::error::ApiError;
use crate::kinds::{self, Kind};
use crate::patch::{self, PatchType};
use crate::resource::Resource;
use crate::store::{Change, Precondition, WriteOp, object_rv};
use crate::validation::Causes;

impl Api {
    /// The check that guards every create in `ns`: the namespace exists (else 404) and is
    /// not terminating (else 403), and still is at commit time (its resourceVersion).
    pub(crate) fn namespace_guard(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
    ) -> Result<WriteOp, ApiError> {
        let key = Resource::Namespaces.key("", ns);
        let Some(v) = self.get_value(&key) else {
            return Err(ApiError::NotFound {
                resource: "namespaces".into(),
                name: ns.into(),
            });
        };
        if super::namespaces::is_terminating(&v) {
            return Err(ApiError::NamespaceTerminating {
                resource: resource.plural().into(),
                name: name.into(),
                namespace: ns.into(),
            });
        }
        Ok(WriteOp::Check {
            key,
            precondition: Precondition::ResourceVersion(object_rv(&v).unwrap_or(0)),
        })
    }

    /// Commits `put` (a create of `resource` `name` in `ns`) guarded by the namespace;
    /// a namespace that changed meanwhile is read again.
    pub(crate) async fn commit_create(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
        put: WriteOp,
    ) -> Result<Vec<Arc<Change>>, ApiError> {
        for _ in 0..RETRIES {
            let guard = self.namespace_guard(resource, ns, name)?;
            match self.commit(vec![guard, put.clone()]).await {
                // The put's precondition is Absent (AlreadyExists), so a conflict is the
                // namespace's.
                Err(ApiError::Conflict { .. }) => continue,
                other => return other,
            }
        }
        Err(ApiError::stale("namespaces", ns))
    }

    /// Creates a plain object in `ns` (`""` for a cluster-scoped kind) as `writer`: 409
    /// if the name is taken, 404 if the namespace is missing, 403 if it is terminating or
    /// the kind does not admit the writer, 422 if invalid.
    pub(crate) async fn create_object<K: Kind>(
        &self,
        ns: &str,
        mut obj: K,
        opts: WriteOptions,
        writer: Option<&Writer>,
    ) -> Result<K, ApiError> {
        let meta = obj.metadata_mut();
        bind_scope::<K>(meta, ns)?;
        let generated = name_is_generated(meta);
        let shown = super::limit_ranger::admission_name(meta);
        stamp_new(meta, self.now());
        obj.normalize();
        obj.prepare_create();
        kinds::validate(&obj, None)?;
        obj.admit(ns, writer)?;
        obj.admit_stored(self, None)?;
        let name = obj.metadata().name.clone().unwrap_or_default();
        let key = K::RESOURCE.key(ns, &name);
        let namespaced = K::RESOURCE.namespaced();
        if namespaced {
            let subject = crate::quota::Subject::Object(K::RESOURCE);
            let fixed = (!generated).then_some(key.as_str());
            self.admit_quota(
                ns,
                (K::RESOURCE, &shown, fixed),
                subject,
                opts.dry_run,
                None,
            )
            .await?;
        }
        if opts.dry_run {
            if namespaced {
                self.namespace_guard(K::RESOURCE, ns, &name)?;
            }
            if self.get_value(&key).is_some() {
                return Err(ApiError::AlreadyExists {
                    resource: K::RESOURCE.qualified(),
                    name,
                });
            }
            return Ok(obj);
        }
        let changes = create_with_name_retries(&mut obj, generated, |obj: &K| {
            let name = obj.metadata().name.clone().unwrap_or_default();
            let put = WriteOp::Put {
                key: K::RESOURCE.key(ns, &name),
                object: to_value(obj)?,
                precondition: Precondition::Absent,
            };
            Ok(async move {
                if namespaced {
                    self.commit_create(K::RESOURCE, ns, &name, put).await
                } else {
                    self.commit(vec![put]).await
                }
            })
        })
        .await;
        first_object(&changes.map_err(|e| K::RESOURCE.qualify(e))?)
    }

    /// Replaces a plain object (PUT): with `metadata.resourceVersion`, 409 unless it is
    /// the stored one; without, unconditional.
    pub(crate) async fn replace_object<K: Kind>(
        &self,
        ns: &str,
        name: &str,
        obj: K,
        opts: WriteOptions,
        writer: Option<&Writer>,
    ) -> Result<K, ApiError> {
        self.replace_object_via(ns, name, obj, opts, writer, Endpoint::Main)
            .await
    }

    /// [`Api::replace_object`] through `endpoint` (the main one, or `/status`).
    pub(crate) async fn replace_object_via<K: Kind>(
        &self,
        ns: &str,
        name: &str,
        mut obj: K,
        opts: WriteOptions,
        writer: Option<&Writer>,
        endpoint: Endpoint<K>,
    ) -> Result<K, ApiError> {
        check_name(obj.metadata_mut(), name)?;
        bind_scope::<K>(obj.metadata_mut(), ns)?;
        let explicit = meta_rv(obj.metadata())?;
        for _ in 0..RETRIES {
            let (old, old_rv) = self.get_typed::<K>(K::RESOURCE, ns, name)?;
            if explicit.is_some_and(|rv| rv != old_rv) {
                return Err(stale::<K>(name));
            }
            let at = At { ns, name, old_rv };
            match self
                .update_object(at, &old, obj.clone(), opts, writer, endpoint)
                .await
            {
                Err(ApiError::Conflict { .. }) if explicit.is_none() => continue,
                other => return other,
            }
        }
        Err(stale::<K>(name))
    }

    /// Patches a plain object (merge, JSON, strategic, apply); an apply of a missing
    /// object creates it. Returns the unknown-field warnings too.
    pub(crate) async fn patch_object<K: Kind>(
        &self,
        ns: &str,
        name: &str,
        ty: PatchType,
        patch: &Value,
        opts: WriteOptions,
        writer: Option<&Writer>,
    ) -> Result<(K, Vec<String>), ApiError> {
        self.patch_object_via(ns, name, ty, patch, opts, writer, Endpoint::Main)
            .await
    }

    /// [`Api::patch_object`] through `endpoint`. Only the main endpoint creates on apply.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn patch_object_via<K: Kind>(
        &self,
        ns: &str,
        name: &str,
        ty: PatchType,
        patch: &Value,
        opts: WriteOptions,
        writer: Option<&Writer>,
        endpoint: Endpoint<K>,
    ) -> Result<(K, Vec<String>), ApiError> {
        let version = Version::stored();
        self.patch_object_as(ns, name, ty, patch, opts, writer, endpoint, version)
            .await
    }

    /// [`Api::patch_object_via`] with the patch applied to `version`'s view of the
    /// stored object, so a client patches what it reads; the result goes back to the
    /// stored kind and is written under the resourceVersion it was read at.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn patch_object_as<K: Kind>(
        &self,
        ns: &str,
        name: &str,
        ty: PatchType,
        patch: &Value,
        opts: WriteOptions,
        writer: Option<&Writer>,
        endpoint: Endpoint<K>,
        version: Version<K>,
    ) -> Result<(K, Vec<String>), ApiError> {
        let main = matches!(endpoint, Endpoint::Main);
        let explicit = patch_precondition(patch)?;
        for _ in 0..RETRIES {
            let live = match self.get_raw(K::RESOURCE, ns, name) {
                Ok(v) => v,
                Err(ApiError::NotFound { .. }) if ty == PatchType::Apply && main => {
                    let (mut obj, warnings) = (version.decode)(patch, opts)?;
                    check_name(obj.metadata_mut(), name)?;
                    let created = self.create_object(ns, obj, opts, writer).await?;
                    return Ok((created, warnings));
                }
                Err(e) => return Err(e),
            };
            let live_rv = object_rv(&live).unwrap_or(0);
            if explicit.is_some_and(|rv| rv != live_rv) {
                return Err(stale::<K>(name));
            }
            let patched = patch::apply(ty, &(version.show)(&live), patch, K::KIND, name)?;
            let (mut new, warnings) = (version.decode)(&patched, opts)?;
            check_name(new.metadata_mut(), name)?;
            bind_scope::<K>(new.metadata_mut(), ns)?;
            let old: K = typed(&live)?;
            let at = At {
                ns,
                name,
                old_rv: live_rv,
            };
            match self
                .update_object(at, &old, new, opts, writer, endpoint)
                .await
            {
                Err(ApiError::Conflict { .. }) if explicit.is_none() => continue,
                other => return other.map(|o| (o, warnings)),
            }
        }
        Err(stale::<K>(name))
    }

    /// Writes `new` over `old` (stored at `at.old_rv`), keeping what clients may not
    /// change.
    pub(super) async fn update_object<K: Kind>(
        &self,
        at: At<'_>,
        old: &K,
        mut new: K,
        opts: WriteOptions,
        writer: Option<&Writer>,
        endpoint: Endpoint<K>,
    ) -> Result<K, ApiError> {
        let At { ns, name, old_rv } = at;
        let (o, n) = (old.metadata(), new.metadata_mut());
        n.uid.clone_from(&o.uid);
        n.creation_timestamp.clone_from(&o.creation_timestamp);
        n.deletion_timestamp.clone_from(&o.deletion_timestamp);
        n.deletion_grace_period_seconds = o.deletion_grace_period_seconds;
        n.resource_version.clone_from(&o.resource_version);
        n.managed_fields.clone_from(&o.managed_fields);
        n.generate_name.clone_from(&o.generate_name);
        new.normalize();
        endpoint.prepare(&mut new, old);
        match endpoint {
            Endpoint::Main => kinds::validate(&new, Some(old))?,
            Endpoint::Sub(_, check) => {
                kinds::validate_with(&new, Some(old), |causes| check(&new, old, causes))?;
            }
        }
        new.admit(ns, writer)?;
        new.admit_stored(self, Some(old))?;
        if new == *old || opts.dry_run {
            return Ok(new);
        }
        let key = K::RESOURCE.key(ns, name);
        let precondition = Precondition::ResourceVersion(old_rv);
        // The update that takes the last finalizer off an object being deleted removes it.
        let op = if finalizers::removed_by_update(old.metadata(), new.metadata()) {
            WriteOp::Delete { key, precondition }
        } else {
            WriteOp::Put {
                key,
                object: to_value(&new)?,
                precondition,
            }
        };
        let changes = self.commit(vec![op]).await;
        first_object(&changes.map_err(|e| K::RESOURCE.qualify(e))?)
    }

    /// Deletes an object of a kind without grace periods (every kind but pods), as
    /// kube-apiserver's generic registry does: the delete's propagation policy sets the
    /// `orphan` or `foregroundDeletion` finalizer, and an object left with finalizers is
    /// only marked as being deleted ([`Deleted::Held`]); one without leaves the store
    /// at once ([`Deleted::Gone`]). Honors uid and resourceVersion preconditions and
    /// `dryRun`.
    pub(crate) async fn delete_object(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        finalizers::validate_delete_options(opts)?;
        if resource == Resource::PriorityClasses {
            crate::kinds::priorityclass::refuse_delete(name)?;
        }
        let dry_run = opts.dry_run.iter().flatten().any(|d| d == "All");
        let key = resource.key(ns, name);
        for _ in 0..RETRIES {
            let existing = self.get_raw(resource, ns, name)?;
            let rv = object_rv(&existing).unwrap_or(0);
            let meta = finalizers::meta_of(&existing)?;
            check_preconditions(resource, name, &meta, rv, opts)?;
            let have = meta.finalizers.clone().unwrap_or_default();
            let wanted = finalizers::finalizers_for_delete(resource, &have, opts);
            let precondition = Precondition::ResourceVersion(rv);
            let held = wanted.as_ref().map_or(!have.is_empty(), |f| !f.is_empty());
            let result = if held {
                let mut new_meta = meta.clone();
                if let Some(f) = wanted {
                    new_meta.finalizers = Some(f);
                }
                finalizers::mark_deleting(&mut new_meta, self.now());
                let mut object = (*existing).clone();
                object["metadata"] = to_value(&new_meta)?;
                if dry_run || new_meta == meta {
                    return Ok(Deleted::Held(object));
                }
                self.commit(vec![WriteOp::Put {
                    key: key.clone(),
                    object,
                    precondition,
                }])
                .await
                .map(|changes| {
                    Deleted::Held(changes.first().map_or(Value::Null, |c| (*c.object).clone()))
                })
            } else {
                if dry_run {
                    return Ok(Deleted::Gone(gone_status(resource, name, &existing)));
                }
                self.commit(vec![WriteOp::Delete {
                    key: key.clone(),
                    precondition,
                }])
                .await
                .map(|_| Deleted::Gone(gone_status(resource, name, &existing)))
            };
            match result {
                Err(ApiError::Conflict { .. }) => continue,
                other => return other.map_err(|e| resource.qualify(e)),
            }
        }
        Err(ApiError::stale(&resource.qualified(), name))
    }
}

/// What a delete did.
#[derive(Debug, Clone)]
pub(crate) enum Deleted {
    /// The object left the store; Kubernetes' success `Status` for it.
    Gone(Value),
    /// Finalizers hold the object: it is as now stored, marked as being deleted.
    Held(Value),
}

/// Kubernetes' success `Status` of a delete that removed `existing`, as for every kind
/// that does not return the deleted object.
pub(crate) fn gone_status(resource: Resource, name: &str, existing: &Value) -> Value {
    let mut details = json!({
        "name": name,
        "kind": resource.plural(),
        "uid": existing.pointer("/metadata/uid").cloned().unwrap_or(Value::Null),
    });
    if !resource.group().is_empty() {
        details["group"] = resource.group().into();
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    })
}

/// A delete's uid and resourceVersion preconditions (`rest.BeforeDelete`): 409 unless
/// they name the stored object.
pub(crate) fn check_preconditions(
    resource: Resource,
    name: &str,
    meta: &ObjectMeta,
    rv: u64,
    opts: &DeleteOptions,
) -> Result<(), ApiError> {
    let pre = opts.preconditions.clone().unwrap_or_default();
    let conflict = |detail: String| ApiError::Conflict {
        resource: resource.qualified(),
        name: name.to_owned(),
        detail,
    };
    if let Some(uid) = pre.uid.as_deref()
        && meta.uid.as_deref() != Some(uid)
    {
        return Err(conflict(format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta.uid.as_deref().unwrap_or("")
        )));
    }
    if let Some(want) = pre.resource_version.as_deref()
        && want != rv.to_string()
    {
        return Err(conflict(format!(
            "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {rv}"
        )));
    }
    Ok(())
}

/// Where an update writes: the object's namespace and name, and the resourceVersion
/// it was read at.
#[derive(Clone, Copy)]
pub(super) struct At<'a> {
    pub(super) ns: &'a str,
    pub(super) name: &'a str,
    pub(super) old_rv: u64,
}

/// Where an update comes in, which decides what it keeps of the stored object.
pub(crate) enum Endpoint<K> {
    /// The object itself: [`Kind::prepare_update`].
    Main,
    /// A subresource that keeps what its first function keeps (`/status`: all but the
    /// status) and checks the write by its second, given the stored object, in place of
    /// [`Kind::validate_against`].
    Sub(fn(&mut K, &K), fn(&K, &K, &mut Causes)),
}

impl<K: Kind> Endpoint<K> {
    fn prepare(&self, new: &mut K, old: &K) {
        match self {
            Endpoint::Main => new.prepare_update(old),
            Endpoint::Sub(keep, _) => keep(new, old),
        }
    }
}

impl<K> Clone for Endpoint<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Endpoint<K> {}

/// The version a patch is applied in: the stored kind's own, or another served version
/// converted at the edge (`autoscaling/v1` HorizontalPodAutoscaler over the stored v2).
pub(crate) struct Version<K> {
    /// The stored object as the version's JSON.
    pub(crate) show: fn(&Value) -> Value,
    /// The version's JSON, decoded under the write's field validation, as the stored
    /// kind (with the unknown-field warnings).
    pub(crate) decode: fn(&Value, WriteOptions) -> Decoded<K>,
}

/// An object decoded as the stored kind, with its unknown-field warnings.
pub(crate) type Decoded<K> = Result<(K, Vec<String>), ApiError>;

impl<K: Kind> Version<K> {
    /// The stored kind itself.
    fn stored() -> Self {
        Self {
            show: Value::clone,
            decode: decode_kind::<K>,
        }
    }
}

impl<K> Clone for Version<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Version<K> {}

/// The 409 of a write over a changed object, naming the resource as Kubernetes does.
pub(super) fn stale<K: Kind>(name: &str) -> ApiError {
    ApiError::stale(&K::RESOURCE.qualified(), name)
}

/// A namespaced kind's object takes the URL's namespace (a different one in the body is
/// a 400); a cluster-scoped kind's has none, whatever the body says (kube-apiserver's
/// `BeforeCreate` and `BeforeUpdate` clear it).
fn bind_scope<K: Kind>(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ns: &str,
) -> Result<(), ApiError> {
    if K::RESOURCE.namespaced() {
        bind_namespace(meta, ns)
    } else {
        meta.namespace = None;
        Ok(())
    }
}

/// Decodes an object of kind `K` under the write's field validation.
pub(crate) fn decode_kind<K: Kind>(
    value: &Value,
    opts: WriteOptions,
) -> Result<(K, Vec<String>), ApiError> {
    decode_resource::<K>(value, opts.field_validation).map_err(redact::<K>)
}

/// [`decode_kind`] of a JSON, YAML or protobuf body (duplicate keys checked too).
pub(crate) fn decode_kind_body<K: Kind>(
    bytes: &[u8],
    content_type: &str,
    opts: WriteOptions,
) -> Result<(K, Vec<String>), ApiError> {
    decode_resource_body::<K>(bytes, content_type, opts.field_validation).map_err(redact::<K>)
}

/// A Secret's decoding error never quotes the body: serde's messages may carry the
/// offending value (a bad base64 string is the secret itself). Field-name problems
/// (unknown or duplicate fields) name only fields and stay as they are.
fn redact<K: Kind>(e: ApiError) -> ApiError {
    match e {
        ApiError::BadRequest(msg) if K::SENSITIVE && !msg.contains("strict decoding error") => {
            ApiError::BadRequest(format!(
                "{kind} in version \"v1\" cannot be handled as a {kind}: the object could not be decoded (its values are not shown)",
                kind = K::KIND
            ))
        }
        other => other,
    }
}
