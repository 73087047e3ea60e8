//! `autoscaling/v1` HorizontalPodAutoscaler, converted at the edge: the store holds v2
//! alone, a v1 body is converted to v2 before the v2 path takes it, and every v2 result
//! is converted to v1 on the way out (kube's `pkg/apis/autoscaling/v1/conversion.go`).
//!
//! v1 says only `targetCPUUtilizationPercentage`, the cpu `Resource` metric's
//! `Utilization` target. What else a v2 object holds rides in annotations of the v1
//! object so that a v1 client that reads, edits and writes back loses nothing: the other
//! metrics ([`METRICS`]), the current metrics ([`CURRENT_METRICS`]), the conditions
//! ([`CONDITIONS`]) and `behavior` ([`BEHAVIOR`]). Those annotations never reach the
//! stored v2 object: they are dropped after conversion to v2, and from a v2 write too,
//! as kube's v2 conversion drops them.
//!
//! As kube, a v1 object with neither a cpu target nor other metrics gets v2's default,
//! cpu at 80%, and the cpu metric comes last in v2 whatever its place before (metrics
//! are weighed all alike, so only the order `kubectl get hpa` prints them in moves).

mod legacy;

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::{v1, v2};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::DEFAULT_CPU_UTILIZATION;

/// The metrics other than the cpu utilization target, as v1 `MetricSpec`s.
pub(crate) const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
/// `status.currentMetrics`, as v1 `MetricStatus`es (all of them: the cpu one's raw
/// value is more than `currentCPUUtilizationPercentage` says).
pub(crate) const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
/// `status.conditions`.
pub(crate) const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";
/// `spec.behavior`.
pub(crate) const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";

/// kube's `DropRoundTripHorizontalPodAutoscalerAnnotations`.
const ROUND_TRIP: [&str; 4] = [METRICS, CURRENT_METRICS, CONDITIONS, BEHAVIOR];

/// The resource name of the one metric v1 spells out.
const CPU: &str = "cpu";

/// Removes the round-trip annotations from `meta`; annotations left empty by that are
/// none at all, as Go's `omitempty` writes them.
pub(crate) fn drop_round_trip(meta: &mut ObjectMeta) {
    let Some(annotations) = meta.annotations.as_mut() else {
        return;
    };
    let before = annotations.len();
    annotations.retain(|k, _| !ROUND_TRIP.contains(&k.as_str()));
    if annotations.is_empty() && before > 0 {
        meta.annotations = None;
    }
}

fn is_cpu_resource(m: &v2::MetricSpec) -> bool {
    m.type_ == "Resource" && m.resource.as_ref().is_some_and(|r| r.name == CPU)
}

fn cpu_target(utilization: i32) -> v2::MetricSpec {
    v2::MetricSpec {
        type_: "Resource".into(),
        resource: Some(v2::ResourceMetricSource {
            name: CPU.into(),
            target: v2::MetricTarget {
                type_: legacy::UTILIZATION.into(),
                average_utilization: Some(utilization),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn encode(value: &impl Serialize) -> Option<String> {
    serde_json::to_string(value).ok()
}

/// An annotation's JSON; one that does not parse is ignored, as kube ignores it.
fn decode<T: DeserializeOwned>(annotations: &BTreeMap<String, String>, key: &str) -> Option<T> {
    serde_json::from_str(annotations.get(key)?).ok()
}

/// The v1 view of a v2 autoscaler.
pub(crate) fn to_v1(hpa: &v2::HorizontalPodAutoscaler) -> v1::HorizontalPodAutoscaler {
    let mut metadata = hpa.metadata.clone();
    drop_round_trip(&mut metadata);
    let spec = hpa.spec.as_ref();
    let status = hpa.status.as_ref();
    let metrics = spec.and_then(|s| s.metrics.as_deref()).unwrap_or_default();
    let mut extra = BTreeMap::new();
    let others: Vec<_> = metrics
        .iter()
        .filter(|m| {
            !(is_cpu_resource(m)
                && m.resource
                    .as_ref()
                    .is_some_and(|r| r.target.average_utilization.is_some()))
        })
        .map(legacy::MetricSpec::from_v2)
        .collect();
    if !others.is_empty() {
        extra.insert(METRICS, encode(&others));
    }
    if let Some(current) = status
        .and_then(|s| s.current_metrics.as_deref())
        .filter(|c| !c.is_empty())
    {
        let current: Vec<_> = current.iter().map(legacy::MetricStatus::from_v2).collect();
        extra.insert(CURRENT_METRICS, encode(&current));
    }
    if let Some(behavior) = spec.and_then(|s| s.behavior.as_ref()) {
        extra.insert(BEHAVIOR, encode(behavior));
    }
    if let Some(conditions) = status
        .and_then(|s| s.conditions.as_deref())
        .filter(|c| !c.is_empty())
    {
        extra.insert(CONDITIONS, encode(&conditions));
    }
    for (key, value) in extra {
        if let Some(value) = value {
            metadata
                .annotations
                .get_or_insert_default()
                .insert(key.into(), value);
        }
    }
    v1::HorizontalPodAutoscaler {
        metadata,
        spec: spec.map(|s| v1::HorizontalPodAutoscalerSpec {
            max_replicas: s.max_replicas,
            min_replicas: s.min_replicas,
            scale_target_ref: v1::CrossVersionObjectReference {
                api_version: s.scale_target_ref.api_version.clone(),
                kind: s.scale_target_ref.kind.clone(),
                name: s.scale_target_ref.name.clone(),
            },
            // The first cpu metric decides, be its target a utilization or not.
            target_cpu_utilization_percentage: metrics
                .iter()
                .find(|m| is_cpu_resource(m))
                .and_then(|m| m.resource.as_ref()?.target.average_utilization),
        }),
        status: status.map(|s| v1::HorizontalPodAutoscalerStatus {
            current_cpu_utilization_percentage: s
                .current_metrics
                .iter()
                .flatten()
                .filter(|m| m.type_ == "Resource")
                .filter_map(|m| m.resource.as_ref().filter(|r| r.name == CPU))
                .filter_map(|r| r.current.average_utilization)
                .next_back(),
            current_replicas: s.current_replicas.unwrap_or(0),
            desired_replicas: s.desired_replicas,
            last_scale_time: s.last_scale_time.clone(),
            observed_generation: s.observed_generation,
        }),
    }
}

/// The v2 autoscaler a v1 one stands for, without the round-trip annotations.
pub(crate) fn to_v2(hpa: v1::HorizontalPodAutoscaler) -> v2::HorizontalPodAutoscaler {
    let mut metadata = hpa.metadata;
    let annotations = metadata.annotations.clone().unwrap_or_default();
    drop_round_trip(&mut metadata);
    let spec = hpa.spec.map(|s| {
        let mut metrics: Vec<v2::MetricSpec> =
            decode::<Vec<legacy::MetricSpec>>(&annotations, METRICS)
                .unwrap_or_default()
                .into_iter()
                .map(legacy::MetricSpec::into_v2)
                .collect();
        metrics.extend(s.target_cpu_utilization_percentage.map(cpu_target));
        if metrics.is_empty() {
            metrics.push(cpu_target(DEFAULT_CPU_UTILIZATION));
        }
        v2::HorizontalPodAutoscalerSpec {
            behavior: decode::<v2::HorizontalPodAutoscalerBehavior>(&annotations, BEHAVIOR)
                .filter(|b| *b != v2::HorizontalPodAutoscalerBehavior::default()),
            max_replicas: s.max_replicas,
            metrics: Some(metrics),
            min_replicas: s.min_replicas,
            scale_target_ref: v2::CrossVersionObjectReference {
                api_version: s.scale_target_ref.api_version,
                kind: s.scale_target_ref.kind,
                name: s.scale_target_ref.name,
            },
        }
    });
    let current = decode::<Vec<legacy::MetricStatus>>(&annotations, CURRENT_METRICS)
        .map(|c| c.into_iter().map(legacy::MetricStatus::into_v2).collect());
    let conditions = decode::<Vec<v2::HorizontalPodAutoscalerCondition>>(&annotations, CONDITIONS);
    let mut status = hpa.status.map(|s| v2::HorizontalPodAutoscalerStatus {
        current_metrics: s.current_cpu_utilization_percentage.map(|u| {
            vec![v2::MetricStatus {
                type_: "Resource".into(),
                resource: Some(v2::ResourceMetricStatus {
                    name: CPU.into(),
                    current: v2::MetricValueStatus {
                        average_utilization: Some(u),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            }]
        }),
        conditions: None,
        // v2's `currentReplicas` is `omitempty`: a zero is no value.
        current_replicas: (s.current_replicas != 0).then_some(s.current_replicas),
        desired_replicas: s.desired_replicas,
        last_scale_time: s.last_scale_time,
        observed_generation: s.observed_generation,
    });
    if current.is_some() || conditions.is_some() {
        let status = status.get_or_insert_default();
        if current.is_some() {
            // The annotation says more than the cpu percentage.
            status.current_metrics = current;
        }
        if conditions.is_some() {
            status.conditions = conditions;
        }
    }
    v2::HorizontalPodAutoscaler {
        metadata,
        spec,
        status,
    }
}

/// A stored (v2) object as v1 JSON. The store holds only objects that decoded as v2, so
/// one that does not is passed on as it is rather than dropped.
pub(crate) fn value_to_v1(stored: &Value) -> Value {
    serde_json::from_value::<v2::HorizontalPodAutoscaler>(stored.clone())
        .ok()
        .and_then(|hpa| serde_json::to_value(to_v1(&hpa)).ok())
        .unwrap_or_else(|| stored.clone())
}

/// v1 JSON as v2 JSON (`None` if it is not a v1 autoscaler).
pub(crate) fn value_to_v2(served: &Value) -> Option<Value> {
    let hpa = serde_json::from_value::<v1::HorizontalPodAutoscaler>(served.clone()).ok()?;
    serde_json::to_value(to_v2(hpa)).ok()
}

#[cfg(test)]
mod tests;
