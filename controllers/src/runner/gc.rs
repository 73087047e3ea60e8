//! The garbage collector, background propagation: an object whose every owner is gone
//! is deleted; one that lost some owners loses their references. An owner is gone only
//! when a live read says so (not found, or another object under its name), never on
//! the cache's word, which may lag behind a create.

use std::time::Duration;

use apiserver::ApiError;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    DeleteOptions, OwnerReference, Preconditions,
};
use serde_json::json;

use super::Cx;
use super::queue::Key;
use apiserver::patch::PatchType;

/// The collector's key for an object of `kind`: `(namespace, "Kind/name")`.
pub(super) fn key(kind: &str, ns: &str, name: &str) -> Key {
    (ns.to_owned(), format!("{kind}/{name}"))
}

/// Collects the object `key` if its owners are gone.
pub(super) async fn sync(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let ns = &key.0;
    let Some((kind, name)) = key.1.split_once('/') else {
        return Ok(None);
    };
    let object_key = (ns.clone(), name.to_owned());
    let (refs, uid) = match kind {
        "Pod" => match cx.caches.pods.get(&object_key) {
            Some(p) => (p.metadata.owner_references.clone(), p.metadata.uid.clone()),
            None => return Ok(None),
        },
        "ReplicaSet" => match cx.caches.replicasets.get(&object_key) {
            Some(r) => (r.metadata.owner_references.clone(), r.metadata.uid.clone()),
            None => return Ok(None),
        },
        "ControllerRevision" => match cx.caches.revisions.get(&object_key) {
            Some(r) => (r.metadata.owner_references.clone(), r.metadata.uid.clone()),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let refs = refs.unwrap_or_default();
    if refs.is_empty() {
        return Ok(None);
    }
    let mut dead = Vec::new();
    for r in &refs {
        // Alive, or of a kind this collector cannot read: the reference stays.
        if owner_exists(cx, ns, r) == Some(false) {
            dead.push(r.uid.clone());
        }
    }
    if dead.is_empty() {
        return Ok(None);
    }
    let uid = uid.unwrap_or_default();
    if dead.len() == refs.len() {
        tracing::debug!(kind, namespace = %ns, name, "every owner is gone; deleting");
        let result = match kind {
            "Pod" => {
                let opts = DeleteOptions {
                    preconditions: Some(Preconditions {
                        uid: Some(uid),
                        resource_version: None,
                    }),
                    ..DeleteOptions::default()
                };
                cx.api.delete_pod(ns, name, &opts).await.map(|_| ())
            }
            "ControllerRevision" => cx.api.delete_controller_revision(ns, name).await,
            _ => cx.api.delete_replicaset(ns, name).await,
        };
        return match result {
            Ok(()) | Err(ApiError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        };
    }
    // Only some owners went: their references go.
    let gone: Vec<_> = dead
        .iter()
        .map(|u| json!({"$patch": "delete", "uid": u}))
        .collect();
    let patch = json!({"metadata": {"ownerReferences": gone, "uid": uid}});
    let result = match kind {
        "Pod" => cx
            .api
            .patch_pod(ns, name, PatchType::Strategic, &patch)
            .await
            .map(|_| ()),
        "ControllerRevision" => {
            let mut rev = cx.api.get_controller_revision(ns, name)?;
            if let Some(r) = rev.metadata.owner_references.as_mut() {
                r.retain(|o| !dead.contains(&o.uid));
            }
            cx.api
                .replace_controller_revision(ns, name, rev)
                .await
                .map(|_| ())
        }
        _ => {
            let mut rs = cx.api.get_replicaset(ns, name)?;
            if let Some(r) = rs.metadata.owner_references.as_mut() {
                r.retain(|o| !dead.contains(&o.uid));
            }
            cx.api.replace_replicaset(ns, name, rs).await.map(|_| ())
        }
    };
    match result {
        Ok(()) | Err(ApiError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether the owner `r` exists under its uid (a live read); `None` for a kind the
/// collector does not read.
fn owner_exists(cx: &Cx, ns: &str, r: &OwnerReference) -> Option<bool> {
    let uid = match r.kind.as_str() {
        "ReplicaSet" if r.api_version == "apps/v1" => {
            cx.api.get_replicaset(ns, &r.name).map(|o| o.metadata.uid)
        }
        "Deployment" if r.api_version == "apps/v1" => {
            cx.api.get_deployment(ns, &r.name).map(|o| o.metadata.uid)
        }
        "StatefulSet" if r.api_version == "apps/v1" => {
            cx.api.get_statefulset(ns, &r.name).map(|o| o.metadata.uid)
        }
        _ => return None,
    };
    Some(match uid {
        Ok(uid) => uid.as_deref() == Some(r.uid.as_str()),
        Err(ApiError::NotFound { .. }) => false,
        // A read that failed says nothing: keep the dependent.
        Err(_) => true,
    })
}
