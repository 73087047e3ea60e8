//! The pod watch: feeds pod changes from the store into the core.

use std::sync::Arc;
use std::time::Duration;

use apiserver::{Api, ApiError, EventKind};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use registry::PodKey;
use serde::Deserialize as _;
use tokio::sync::mpsc;

use crate::core::Input;

/// Feeds pod changes from the store into the core, from `from` on. When
/// the watch falls too far behind (410 Expired), it lists again and hands
/// the core a full resync, so no change is ever silently skipped.
pub(crate) fn spawn_pod_watch(
    api: Api,
    from: u64,
    inputs: mpsc::UnboundedSender<Input>,
) -> tokio::task::JoinHandle<()> {
    let core = inputs.clone();
    while_core_lives(core, follow(api, from, inputs))
}

/// Runs `work` until it ends or the core does (a scheduler term that
/// stopped), whichever comes first: a watch ends with its core, not at its
/// next change.
pub(super) fn while_core_lives(
    core: mpsc::UnboundedSender<Input>,
    work: impl Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        tokio::select! {
            () = core.closed() => {}
            () = work => {}
        }
    })
}

async fn follow(api: Api, mut from: u64, inputs: mpsc::UnboundedSender<Input>) {
    loop {
        let mut stream = match api.watch_pods_raw(None, from) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "pod watch failed; relisting");
                match relist(&api, &inputs).await {
                    Some(rv) => {
                        from = rv;
                        continue;
                    }
                    None => return,
                }
            }
        };
        let mut expired = false;
        while let Some(item) = stream.next().await {
            match item {
                Ok((kind, object)) => {
                    from = apiserver::store::object_rv(&object).unwrap_or(from);
                    let Some(input) = pod_input(kind, &object) else {
                        continue;
                    };
                    if inputs.send(input).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    expired = matches!(e, ApiError::Expired(_));
                    if !expired {
                        tracing::warn!(error = %e, "pod watch ended; resuming");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    break;
                }
            }
        }
        if expired {
            // Changes were missed: start over from a full list.
            match relist(&api, &inputs).await {
                Some(rv) => from = rv,
                None => return,
            }
        }
    }
}

/// What the core needs to hear of one pod event. Most events of a busy
/// cluster are status writes on bound pods, for which the core only needs
/// the pod's identity: those are not decoded, unless a container's image
/// changed and its executor has yet to run it (`core/images.rs`).
fn pod_input(kind: EventKind, object: &serde_json::Value) -> Option<Input> {
    let bound = object
        .pointer("/spec/nodeName")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let terminating = object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    if kind != EventKind::Deleted && bound && !terminating && !crate::core::stale_json(object) {
        let text = |p: &str| object.pointer(p).and_then(serde_json::Value::as_str);
        return Some(Input::PodSettled(PodKey::from_parts(
            text("/metadata/namespace"),
            text("/metadata/name")?,
            text("/metadata/uid"),
        )));
    }
    let pod = match Pod::deserialize(object) {
        Ok(pod) => Arc::new(pod),
        Err(e) => {
            tracing::warn!(error = %e, "skipping a stored pod that cannot be read");
            return None;
        }
    };
    Some(match kind {
        EventKind::Deleted => Input::PodDeleted(pod),
        EventKind::Added | EventKind::Modified => Input::PodUpsert(pod),
    })
}

async fn relist(api: &Api, inputs: &mpsc::UnboundedSender<Input>) -> Option<u64> {
    loop {
        match api.list_pods(None, "", "") {
            Ok(list) => {
                let pods = list.items.into_iter().map(Arc::new).collect();
                inputs.send(Input::PodResync(pods)).ok()?;
                return Some(list.resource_version);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot list pods; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
