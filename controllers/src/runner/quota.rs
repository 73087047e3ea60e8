//! The resource quota controller's sync: one ResourceQuota's recount
//! ([`crate::quota::reconcile`]) from its namespace's pods and object counts, read
//! live, then its status; and which changes call for a recount (kube's replenishment):
//! a quota created or its `spec` changed, an object of a counted kind deleted, a pod
//! finished or being deleted, and a full resync every five minutes
//! (`--resource-quota-sync-period`'s default), which also gives back a charge whose
//! create failed after its admission.

use std::time::Duration;

use apiserver::resource::Resource;
use apiserver::{Api, ApiError, EventKind, ObjectList};
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use serde_json::Value;

use super::Cx;
use super::cache::{Change, Watched, key_of};
use super::queue::Key;
use crate::{Action, Status};

/// How often every quota is recounted though nothing asked (kube's default
/// `--resource-quota-sync-period`).
pub(super) const RESYNC: Duration = Duration::from_secs(300);

/// How long a namespace's changes gather before its quotas are recounted: a recount
/// reads every pod of the namespace, and a burst of pods finishing asks for one each.
const GATHER: Duration = Duration::from_millis(100);

impl Watched for ResourceQuota {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_resourcequotas(None, "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_resourcequotas(None, from)
    }
}

/// A quota's own change: a new quota, or a `spec` that changed, is recounted at once
/// (the admission charges nothing to a quota until its `status.hard` is set); a
/// status write (the admission's, or this controller's) needs nothing.
pub(super) fn quota_changed(cx: &Cx, c: &Change<ResourceQuota>) {
    match (c.old.as_deref(), c.new.as_deref()) {
        (_, None) => {}
        (Some(old), Some(new)) if old.spec == new.spec => {}
        (_, Some(new)) => {
            cx.quotas.add(key_of(&new.metadata));
        }
    }
}

/// A change of any counted object, as the collector's graph sees it: quotas of its
/// namespace are recounted when it frees something (deleted, or a pod that finished
/// or is being deleted).
pub(super) fn object_changed(cx: &Cx, resource: Resource, kind: EventKind, v: &Value) {
    let frees =
        kind == EventKind::Deleted || (resource == Resource::Pods && (finished(v) || deleting(v)));
    if !frees {
        return;
    }
    let Some(ns) = v.pointer("/metadata/namespace").and_then(Value::as_str) else {
        return;
    };
    for q in cx.caches.quotas.in_namespace(ns) {
        cx.quotas.add_within(key_of(&q.metadata), GATHER);
    }
}

fn finished(pod: &Value) -> bool {
    matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    )
}

fn deleting(v: &Value) -> bool {
    v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// Recounts the quota `key` and writes its status if it changed; a full resync of it
/// is due again in [`RESYNC`].
pub(super) async fn sync(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let Some(q) = cx.caches.quotas.get(key) else {
        return Ok(None);
    };
    let ns = key.0.as_str();
    let pods = cx.api.list_pods(Some(ns), "", "")?.items;
    let pods: Vec<&Pod> = pods.iter().collect();
    let api = &cx.api;
    let count_of =
        |name: &str| apiserver::quota::counted_resource(name).map(|r| api.count_stored(r, ns));
    let now = super::timestamp(cx.api.now());
    let planned = crate::quota::reconcile(&q, &pods, &count_of, now);
    for action in planned.actions {
        match action {
            Action::WriteStatus(Status::ResourceQuota(status)) => {
                let mut new = (*q).clone();
                new.status = Some(status);
                // Under the cached resourceVersion: an admission's charge meanwhile is
                // a conflict, and the recount runs again.
                cx.api.replace_resourcequota_status(ns, &key.1, new).await?;
            }
            other => {
                tracing::warn!(quota = ?key, action = ?other, "not a quota controller's action");
            }
        }
    }
    Ok(Some(RESYNC))
}
