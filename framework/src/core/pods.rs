//! Pod events from the store: what to queue, what to kill, what to finalize.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use apiserver::{Api, ApiError, EventKind};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use registry::{Flag, PodKey, PodTask, Registry};
use serde::Deserialize as _;
use tokio::sync::mpsc;

use super::{Core, Input, KillReason, SCHEDULER_NAMES};
use crate::launch::grace_period;

/// Whether mesopod schedules this pod: its `schedulerName` is ours or the
/// default one.
pub(crate) fn is_ours(pod: &Pod) -> bool {
    let name = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduler_name.as_deref())
        .unwrap_or("default-scheduler");
    SCHEDULER_NAMES.contains(&name)
}

fn is_finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

fn created(pod: &Pod) -> std::time::SystemTime {
    pod.metadata
        .creation_timestamp
        .as_ref()
        .map_or(std::time::UNIX_EPOCH, apiserver::system_time)
}

impl Core {
    pub(super) async fn on_pod(&mut self, pod: Arc<Pod>) {
        let Ok(key) = PodKey::of(&pod) else { return };
        let terminating = pod.metadata.deletion_timestamp.is_some();
        if let Some(task) = self.registry.for_pod(&key) {
            self.forget_waiting(&key);
            if terminating && !task.has(Flag::Deleted) {
                self.kill_for_deletion(task, &pod).await;
            }
            return;
        }
        let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        if terminating {
            self.forget_waiting(&key);
            if bound {
                // Bound by us earlier, and its task is no longer live: nothing
                // runs, so the pod may go.
                self.finalize(&key).await;
            }
            return;
        }
        if bound || !is_ours(&pod) || is_finished(&pod) {
            self.forget_waiting(&key);
            return;
        }
        let priority = pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0);
        let now = self.now();
        self.queue.push(key.clone(), priority, created(&pod), now);
        self.waiting.insert(key, pod);
        self.observed.metrics.pods_queued.inc();
    }

    pub(super) async fn on_pod_deleted(&mut self, pod: &Pod) {
        let Ok(key) = PodKey::of(pod) else { return };
        self.forget_waiting(&key);
        if let Some(task) = self.registry.for_pod(&key)
            && !task.has(Flag::Deleted)
        {
            self.kill_for_deletion(task, pod).await;
        }
    }

    pub(super) async fn on_resync(&mut self, pods: Vec<Arc<Pod>>) {
        let present: HashSet<PodKey> = pods.iter().filter_map(|p| PodKey::of(p).ok()).collect();
        let gone: Vec<PodKey> = self
            .waiting
            .keys()
            .filter(|k| !present.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            self.forget_waiting(&key);
        }
        for pod in pods {
            self.on_pod(pod).await;
        }
    }

    /// Takes the pod out of the queue: placed, bound elsewhere, gone, or
    /// not ours to place. All a bound pod that is not being deleted needs.
    pub(super) fn forget_waiting(&mut self, key: &PodKey) {
        self.queue.remove(key);
        self.waiting.remove(key);
    }

    async fn kill_for_deletion(&mut self, mut task: PodTask, pod: &Pod) {
        let grace = pod
            .metadata
            .deletion_grace_period_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or_else(|| grace_period(&task), Duration::from_secs);
        task.set(Flag::Deleted);
        if let Err(e) = self.registry.update(task.clone()) {
            tracing::warn!(task = %task.id, error = %e, "could not flag a deleted pod's task");
        }
        self.kill(
            &task,
            grace,
            KillReason {
                reason: "Deleted".into(),
                message: "the pod was deleted".into(),
            },
        )
        .await;
    }

    /// Removes a terminating pod from the store once nothing runs for it.
    pub(super) async fn finalize(&self, key: &PodKey) {
        let uid = (!key.uid.is_empty()).then_some(key.uid.as_str());
        match self.api.finalize_pod(&key.namespace, &key.name, uid).await {
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(pod = %key.name, error = %e, "could not finalize a deleted pod")
            }
        }
    }
}

/// Feeds pod changes from the store into the core, from `from` on. When
/// the watch falls too far behind (410 Expired), it lists again and hands
/// the core a full resync, so no change is ever silently skipped.
pub(super) fn spawn_pod_watch(
    api: Api,
    mut from: u64,
    inputs: mpsc::UnboundedSender<Input>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
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
    })
}

/// What the core needs to hear of one pod event. Most events of a busy
/// cluster are status writes on bound pods, for which the core only needs
/// the pod's identity: those are not decoded.
fn pod_input(kind: EventKind, object: &serde_json::Value) -> Option<Input> {
    let bound = object
        .pointer("/spec/nodeName")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let terminating = object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    if kind != EventKind::Deleted && bound && !terminating {
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
