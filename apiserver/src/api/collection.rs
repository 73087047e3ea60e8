//! Writes of any kind by its [`Resource`], for `deletecollection` and the garbage
//! collector, which know a kind only by the resource its `ownerReferences` name.
//!
//! Contract: a delete here is the kind's own delete (a pod's is graceful, every other
//! kind's goes by [`Api::delete_object`] and its finalizers); a metadata edit changes
//! only `ownerReferences` and `finalizers`, under the object's uid and resourceVersion,
//! and removes an object being deleted once its last finalizer goes, as an update does.

use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use serde_json::Value;

use super::finalizers::{self, meta_of};
use super::objects::to_value;
use super::{Api, ObjectList, RETRIES, RawStream};
use crate::error::ApiError;
use crate::resource::Resource;
use crate::selectors::Selectors;
use crate::store::{Precondition, WriteOp, object_rv};

/// Deletes of one collection run this many at a time, so that their commits share
/// fsyncs (group commit) without flooding the committer.
const COLLECTION_DELETES_IN_FLIGHT: usize = 32;

impl Api {
    /// Deletes one object of `resource` as its kind deletes (pods gracefully).
    ///
    /// # Errors
    /// 404, a 409 precondition failure, an invalid policy, a store failure.
    pub async fn delete_any(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<(), ApiError> {
        match resource {
            Resource::Pods => self.delete_pod(ns, name, opts).await.map(|_| ()),
            _ => self
                .delete_object(resource, ns, name, opts)
                .await
                .map(|_| ()),
        }
    }

    /// `deletecollection`: deletes every object of `resource` in `ns` (or all, for a
    /// cluster-scoped kind) that `sel` selects, each as [`Api::delete_any`] (one that is
    /// gone meanwhile is no failure). Returns them as listed before, as kube-apiserver's
    /// `DeleteCollection` does, and the list's resourceVersion.
    pub(crate) async fn delete_collection(
        &self,
        resource: Resource,
        ns: Option<&str>,
        sel: &Selectors,
        opts: &DeleteOptions,
    ) -> Result<(Vec<Arc<Value>>, u64), ApiError> {
        finalizers::validate_delete_options(opts)?;
        let (items, rv) = self.list_raw(resource, ns, sel);
        let names: Vec<(String, String)> = items
            .iter()
            .map(|v| {
                let field = |f: &str| {
                    v.pointer(&format!("/metadata/{f}"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned()
                };
                (field("namespace"), field("name"))
            })
            .collect();
        let mut deletes = futures::stream::iter(names)
            .map(|(ns, name)| async move { self.delete_any(resource, &ns, &name, opts).await })
            .buffer_unordered(COLLECTION_DELETES_IN_FLIGHT);
        while let Some(result) = deletes.next().await {
            match result {
                Ok(()) | Err(ApiError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok((items, rv))
    }

    /// The metadata of one object of `resource`, read live.
    ///
    /// # Errors
    /// 404 if there is none.
    pub fn get_metadata(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
    ) -> Result<ObjectMeta, ApiError> {
        meta_of(self.get_raw(resource, ns, name)?.as_ref())
    }

    /// Every object of `resource` as stored, and the resourceVersion to watch from.
    pub fn list_stored(&self, resource: Resource) -> ObjectList<Arc<Value>> {
        let (items, resource_version) = self.list_raw(resource, None, &Selectors::default());
        ObjectList {
            items,
            resource_version,
        }
    }

    /// How many objects of `resource` namespace `ns` holds (the quota controller's
    /// object counts).
    pub fn count_stored(&self, resource: Resource, ns: &str) -> usize {
        self.store().list(&resource.prefix(Some(ns))).0.len()
    }

    /// Changes of `resource` after `from`, as stored (relist on `Expired`).
    ///
    /// # Errors
    /// `Expired` when `from` is older than the store's history.
    pub fn watch_stored(&self, resource: Resource, from: u64) -> Result<RawStream, ApiError> {
        self.watch_raw(resource, None, Some(from), Selectors::default())
    }

    /// Edits the `ownerReferences` and `finalizers` of the object of `resource` whose
    /// uid is `uid` (nothing else is kept of `edit`'s changes); an edit that leaves an
    /// object being deleted without finalizers removes it. Nothing is decoded but the
    /// metadata and nothing validated but what changed, so the controllers' finalizer
    /// and owner-reference edits cost a fraction of a patch.
    ///
    /// # Errors
    /// A store failure, or a lost race `RETRIES` times over.
    pub async fn edit_metadata(
        &self,
        resource: Resource,
        ns: &str,
        name: &str,
        uid: &str,
        edit: impl Fn(&mut ObjectMeta),
    ) -> Result<MetadataEdit, ApiError> {
        for _ in 0..RETRIES {
            let Ok(existing) = self.get_raw(resource, ns, name) else {
                return Ok(MetadataEdit::Gone);
            };
            let old = meta_of(&existing)?;
            if old.uid.as_deref() != Some(uid) {
                return Ok(MetadataEdit::Gone);
            }
            let mut new = old.clone();
            edit(&mut new);
            let mut meta = old.clone();
            meta.owner_references = new.owner_references.filter(|r| !r.is_empty());
            meta.finalizers = new.finalizers.filter(|f| !f.is_empty());
            if meta == old {
                return Ok(MetadataEdit::Unchanged);
            }
            let key = resource.key(ns, name);
            let precondition = Precondition::ResourceVersion(object_rv(&existing).unwrap_or(0));
            let op = if finalizers::removed_by_update(&old, &meta) {
                WriteOp::Delete { key, precondition }
            } else {
                let mut object = (*existing).clone();
                object["metadata"] = to_value(&meta)?;
                WriteOp::Put {
                    key,
                    object,
                    precondition,
                }
            };
            match self.commit(vec![op]).await {
                Ok(_) => return Ok(MetadataEdit::Edited),
                Err(ApiError::NotFound { .. }) => return Ok(MetadataEdit::Gone),
                Err(ApiError::Conflict { .. }) => continue,
                Err(e) => return Err(resource.qualify(e)),
            }
        }
        Err(ApiError::stale(&resource.qualified(), name))
    }
}

/// What [`Api::edit_metadata`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetadataEdit {
    /// The edit was written.
    Edited,
    /// The edit changed nothing, so nothing was written (and no watch event comes).
    Unchanged,
    /// The object is gone, or its name belongs to another object now.
    Gone,
}
