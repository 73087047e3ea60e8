//! The garbage collector (kube-controller-manager's), generic over every kind of
//! [`Resource::COLLECTED`]: which objects to look at comes from the [`graph`], what to
//! do is decided on live reads.
//!
//! - **Background**: an object whose owners are all gone (not found, or another object
//!   under the name) is deleted; one that lost only some owners loses their references.
//! - **Orphan**: an owner being deleted with the `orphan` finalizer has its reference
//!   removed from every dependent, then the finalizer, and leaves.
//! - **Foreground**: an owner being deleted with the `foregroundDeletion` finalizer has
//!   its dependents deleted (those that have dependents of their own in Foreground
//!   too); once none with `blockOwnerDeletion` is left, the finalizer goes, and so does
//!   the owner. A dependent with another live owner only loses the reference. A cycle
//!   (a dependent whose own dependent waits in Foreground) is broken as KCM breaks it:
//!   the dependent's references stop blocking before it is deleted.

pub(super) mod graph;

use std::time::Duration;

use apiserver::resource::Resource;
use apiserver::{ApiError, FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, ObjectMeta, OwnerReference, Preconditions,
};

use super::Cx;
use super::queue::Key;
use graph::ObjKey;

/// The collector's queue key for an object: `(namespace, "plural/name")`.
pub(super) fn key(k: &ObjKey) -> Key {
    (k.1.clone(), format!("{}/{}", k.0.plural(), k.2))
}

/// Looks at the object `key` again.
pub(super) async fn sync(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let ns = key.0.as_str();
    let Some((resource, name)) = key
        .1
        .split_once('/')
        .and_then(|(p, n)| Some((Resource::of_plural(p)?, n)))
    else {
        return Ok(None);
    };
    let meta = match cx.api.get_metadata(resource, ns, name) {
        Ok(m) => m,
        Err(ApiError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let uid = meta.uid.clone().unwrap_or_default();
    let at = (resource, ns.to_owned(), name.to_owned());
    if meta.deletion_timestamp.is_some() {
        let has = |f: &str| meta.finalizers.iter().flatten().any(|x| x == f);
        if has(ORPHAN_FINALIZER) {
            orphan_dependents(cx, &uid).await?;
            remove_finalizer(cx, &at, &uid, ORPHAN_FINALIZER).await?;
        } else if has(FOREGROUND_FINALIZER) {
            delete_dependents(cx, &at, &uid).await?;
        }
        // Being deleted otherwise: nothing is the collector's to do.
        return Ok(None);
    }
    collect(cx, &at, &meta).await.map(|()| None)
}

/// Removes the owner `uid`'s reference from each of its dependents.
async fn orphan_dependents(cx: &Cx, uid: &str) -> Result<(), ApiError> {
    for ((r, ns, name), node) in cx.gc_graph.dependents(uid) {
        tracing::debug!(resource = r.plural(), namespace = %ns, name, owner = uid, "orphaning");
        cx.api
            .edit_metadata(r, &ns, &name, &node.uid, |m| drop_refs(m, &[uid]))
            .await?;
    }
    Ok(())
}

/// Deletes the dependents of the owner `at` being deleted in Foreground, and lets it
/// go once none blocks it.
async fn delete_dependents(cx: &Cx, at: &ObjKey, uid: &str) -> Result<(), ApiError> {
    let dependents = cx.gc_graph.dependents(uid);
    let blocking = dependents.iter().any(|(_, n)| {
        n.reference_to(uid)
            .is_some_and(|r| r.block_owner_deletion == Some(true))
    });
    if !blocking {
        return remove_finalizer(cx, at, uid, FOREGROUND_FINALIZER).await;
    }
    // Each dependent decides for itself (its other owners may keep it); one already
    // deleting its own dependents is under way.
    for (k, n) in dependents {
        if !n.deleting_dependents() {
            cx.gc.add(key(&k));
        }
    }
    Ok(())
}

/// The collection of a dependent that is not being deleted (`attemptToDeleteItem`).
async fn collect(cx: &Cx, at: &ObjKey, meta: &ObjectMeta) -> Result<(), ApiError> {
    let refs = meta.owner_references.clone().unwrap_or_default();
    if refs.is_empty() {
        return Ok(());
    }
    let (mut solid, mut dangling, mut waiting) = (0, Vec::new(), Vec::new());
    for r in &refs {
        match owner_state(cx, &at.1, r)? {
            Owner::Solid => solid += 1,
            Owner::Dangling => dangling.push(r.uid.as_str()),
            Owner::Waiting => waiting.push(r.uid.as_str()),
        }
    }
    let uid = meta.uid.clone().unwrap_or_default();
    let (resource, ns, name) = at;
    if solid > 0 {
        // A live owner keeps it: only the references to owners gone or waiting for
        // their dependents go, or those would wait for ever.
        let gone: Vec<&str> = dangling.iter().chain(&waiting).copied().collect();
        if !gone.is_empty() {
            cx.api
                .edit_metadata(*resource, ns, name, &uid, |m| drop_refs(m, &gone))
                .await?;
        }
        return Ok(());
    }
    let has = |f: &str| meta.finalizers.iter().flatten().any(|x| x == f);
    let dependents = cx.gc_graph.dependents(&uid);
    if !waiting.is_empty() && dependents.iter().any(|(_, n)| n.deleting_dependents()) {
        // A dependent of its own waits for its dependents too: a cycle, in which each
        // would wait for the other for ever. Its references stop blocking, so its
        // owners may go first (KCM's `unblockOwnerReferences`).
        tracing::debug!(resource = resource.plural(), namespace = %ns, name, "unblocking its owner references: a cycle of foreground deletions");
        cx.api
            .edit_metadata(*resource, ns, name, &uid, |m| {
                for r in m.owner_references.iter_mut().flatten() {
                    if r.block_owner_deletion == Some(true) {
                        r.block_owner_deletion = Some(false);
                    }
                }
            })
            .await?;
    }
    let policy = if !waiting.is_empty() && !dependents.is_empty() {
        // Its owner waits for it, and it has dependents: they go first.
        "Foreground"
    } else if has(ORPHAN_FINALIZER) {
        "Orphan"
    } else if has(FOREGROUND_FINALIZER) {
        "Foreground"
    } else {
        "Background"
    };
    tracing::debug!(resource = resource.plural(), namespace = %ns, name, policy, "no owner left; deleting");
    let opts = DeleteOptions {
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        propagation_policy: Some(policy.to_owned()),
        ..DeleteOptions::default()
    };
    match cx.api.delete_any(*resource, ns, name, &opts).await {
        // Gone already, or another object under the name now.
        Ok(()) | Err(ApiError::NotFound { .. } | ApiError::Conflict { .. }) => Ok(()),
        Err(e) => Err(e),
    }
}

/// What an owner reference names, by a live read.
enum Owner {
    /// It exists and is not waiting for its dependents.
    Solid,
    /// It is gone, or another object holds its name.
    Dangling,
    /// It is being deleted in Foreground.
    Waiting,
}

fn owner_state(cx: &Cx, ns: &str, r: &OwnerReference) -> Result<Owner, ApiError> {
    // A kind the collector does not know keeps its dependents.
    let Some(resource) = Resource::of_kind(&r.api_version, &r.kind) else {
        return Ok(Owner::Solid);
    };
    let ns = if resource.namespaced() { ns } else { "" };
    match cx.api.get_metadata(resource, ns, &r.name) {
        Ok(m) if m.uid.as_deref() != Some(r.uid.as_str()) => Ok(Owner::Dangling),
        Ok(m) => {
            let foreground = m
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FOREGROUND_FINALIZER);
            Ok(if m.deletion_timestamp.is_some() && foreground {
                Owner::Waiting
            } else {
                Owner::Solid
            })
        }
        Err(ApiError::NotFound { .. }) => Ok(Owner::Dangling),
        Err(e) => Err(e),
    }
}

/// Removes `finalizer` from the object `at` (uid `uid`); the last one going removes it.
async fn remove_finalizer(
    cx: &Cx,
    at: &ObjKey,
    uid: &str,
    finalizer: &str,
) -> Result<(), ApiError> {
    let (resource, ns, name) = at;
    tracing::debug!(resource = resource.plural(), namespace = %ns, name, finalizer, "removing finalizer");
    cx.api
        .edit_metadata(*resource, ns, name, uid, |m| {
            if let Some(f) = m.finalizers.as_mut() {
                f.retain(|x| x != finalizer);
            }
        })
        .await
        .map(|_| ())
}

/// Drops the references to the owners `uids`.
fn drop_refs(meta: &mut ObjectMeta, uids: &[&str]) {
    if let Some(refs) = meta.owner_references.as_mut() {
        refs.retain(|r| !uids.contains(&r.uid.as_str()));
    }
}
