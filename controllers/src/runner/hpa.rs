//! The HPA controller's sync: one autoscaler's target scale read live, its pods listed
//! live by the scale's selector (the pod cache keeps no container requests), their
//! usage from the API's in-memory metrics store, then [`crate::hpa::reconcile`], the
//! scale written under the resourceVersion read, the status and the events.
//!
//! Each autoscaler syncs every `--horizontal-pod-autoscaler-sync-period` ([`resync`])
//! and when its spec changes (not on its own status writes, which would add recommendations to
//! its history at each write). Its [`Memory`] lives as long as the term: a new leader
//! starts its windows afresh from the current replicas, as a restarted KCM does.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use apiserver::{Api, ApiError, ObjectList};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::Cx;
use super::cache::{Change, Watched, key_of};
use super::queue::Key;
use crate::hpa::{self, Memory, Observed, PodUsage};

/// The controller's name on its events, as KCM's.
const COMPONENT: &str = "horizontal-pod-autoscaler";

/// kube's `--horizontal-pod-autoscaler-sync-period`.
pub(super) const DEFAULT_SYNC_PERIOD: Duration = Duration::from_secs(15);

impl Watched for HorizontalPodAutoscaler {
    fn list(api: &Api, _all: bool) -> Result<ObjectList<Self>, ApiError> {
        api.list_horizontalpodautoscalers(None, "")
    }
    fn watch(api: &Api, from: u64, _all: bool) -> Result<apiserver::ObjectStream<Self>, ApiError> {
        api.watch_horizontalpodautoscalers(None, from)
    }
}

/// Every autoscaler's history, by key.
#[derive(Default)]
pub(crate) struct Memories(Mutex<HashMap<Key, Memory>>);

impl Memories {
    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Memory>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The pods the scale's `selector` selects in `ns` (none when it is missing or does
/// not parse: the reconcile then finds no pods).
fn selected(api: &Api, ns: &str, selector: Option<&str>) -> Result<Vec<Pod>, ApiError> {
    match selector {
        Some(s) if !s.is_empty() => Ok(api.list_pods(Some(ns), s, "")?.items),
        _ => Ok(Vec::new()),
    }
}

/// The usage of `pods`, by name, from the metrics store at `now`.
fn usage_of(api: &Api, pods: &[Pod], now: std::time::SystemTime) -> BTreeMap<String, PodUsage> {
    let all = api.metrics().pods(now);
    let mut out = BTreeMap::new();
    for pod in pods {
        let (Some(uid), Some(name)) = (&pod.metadata.uid, &pod.metadata.name) else {
            continue;
        };
        let Some(u) = all.get(uid) else {
            continue;
        };
        let millis = |v: u64, per_milli: u64| i64::try_from(v / per_milli).unwrap_or(i64::MAX);
        out.insert(
            name.clone(),
            PodUsage {
                containers: u
                    .containers
                    .iter()
                    .map(|(c, x)| {
                        let bytes = i64::try_from(x.memory_bytes).unwrap_or(i64::MAX);
                        (
                            c.clone(),
                            millis(x.nanocores, 1_000_000),
                            bytes.saturating_mul(1000),
                        )
                    })
                    .collect(),
                timestamp: Timestamp::from_nanosecond(u.at_unix_nanos)
                    .unwrap_or(Timestamp::UNIX_EPOCH),
                window: SignedDuration::try_from(u.window).unwrap_or(SignedDuration::ZERO),
            },
        );
    }
    out
}

/// Syncs the autoscaler `key` (the next sync comes from [`resync`]).
pub(super) async fn sync(cx: &Cx, key: &Key) -> Result<Option<Duration>, ApiError> {
    let Some(hpa) = cx.caches.hpas.get(key) else {
        cx.hpa_memories.lock().remove(key);
        return Ok(None);
    };
    let now_sys = cx.api.now();
    let now = super::timestamp(now_sys);
    let spec = hpa.spec.clone().unwrap_or_default();
    let target = &spec.scale_target_ref;
    let api_version = target.api_version.as_deref().unwrap_or("");
    let scale = cx
        .api
        .get_scale_of(api_version, &target.kind, &key.0, &target.name)
        .map_err(|e| e.to_string());
    let selector = scale
        .as_ref()
        .ok()
        .and_then(|s| s.status.as_ref())
        .and_then(|s| s.selector.clone());
    let pods = selected(&cx.api, &key.0, selector.as_deref())?;
    let observed = Observed {
        usage: usage_of(&cx.api, &pods, now_sys),
        pods: pods.iter().collect(),
        scale: scale.clone(),
    };
    let mut plan = {
        let mut memories = cx.hpa_memories.lock();
        let memory = memories.entry(key.clone()).or_default();
        hpa::reconcile(&hpa, &observed, memory, now)
    };
    if let Some(r) = plan.rescale.clone() {
        let rv = scale
            .as_ref()
            .ok()
            .and_then(|s| s.metadata.resource_version.as_deref())
            .and_then(|v| v.parse().ok());
        match cx
            .api
            .replace_scale_of(api_version, &target.kind, &key.0, &target.name, r.to, rv)
            .await
        {
            Ok(_) => {
                plan.rescaled(now);
                let mut memories = cx.hpa_memories.lock();
                let memory = memories.entry(key.clone()).or_default();
                hpa::remember_rescale(&hpa, memory, &r, now);
            }
            Err(e) => plan.rescale_failed(&e.to_string(), now),
        }
    }
    for e in &plan.events {
        super::events::record(&cx.api, COMPONENT, hpa.as_ref(), e).await;
    }
    if hpa.status.as_ref() != Some(&plan.status) {
        let mut new = (*hpa).clone();
        new.status = Some(plan.status);
        // Under the cached resourceVersion: a spec change meanwhile is a conflict, and
        // the sync runs again on it.
        cx.api
            .replace_horizontalpodautoscaler_status(&key.0, &key.1, new)
            .await?;
    }
    if plan.failed {
        tracing::debug!(namespace = %key.0, name = %key.1, "autoscaler sync failed; next at the sync period");
    }
    Ok(None)
}

/// Queues every autoscaler once per sync period, as KCM's informer resyncs them: one
/// tick for all, so a key never runs on two timers.
pub(super) async fn resync(cx: &Cx) {
    let mut tick = tokio::time::interval(cx.options.hpa_sync_period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for h in cx.caches.hpas.all() {
            cx.hpas.add(key_of(&h.metadata));
        }
    }
}

/// An autoscaler changed: it syncs now if it is new, gone, or its spec or labels
/// changed; its own status writes do not count.
pub(super) fn hpa_changed(cx: &Cx, c: &Change<HorizontalPodAutoscaler>) {
    let (old, new) = (c.old.as_deref(), c.new.as_deref());
    let Some(h) = new.or(old) else {
        return;
    };
    let spec_changed = match (old, new) {
        (Some(o), Some(n)) => o.spec != n.spec || o.metadata.generation != n.metadata.generation,
        _ => true,
    };
    if spec_changed {
        cx.hpas.add(key_of(&h.metadata));
    }
}
