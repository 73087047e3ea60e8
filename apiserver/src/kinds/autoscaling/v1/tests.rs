#![allow(clippy::unwrap_used)]
use super::*;
use crate::kinds::Kind;
use serde_json::json;

fn v1_hpa(v: Value) -> v1::HorizontalPodAutoscaler {
    serde_json::from_value(v).unwrap()
}

fn v2_hpa(v: Value) -> v2::HorizontalPodAutoscaler {
    let mut h: v2::HorizontalPodAutoscaler = serde_json::from_value(v).unwrap();
    h.normalize();
    h
}

fn target() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
}

fn annotation(h: &v1::HorizontalPodAutoscaler, key: &str) -> Value {
    let text = &h.metadata.annotations.as_ref().unwrap()[key];
    serde_json::from_str(text).unwrap()
}

#[test]
fn the_cpu_target_is_the_cpu_resource_metric_and_back() {
    let v1 = v1_hpa(json!({"metadata": {"name": "web", "labels": {"a": "b"}},
        "spec": {"scaleTargetRef": target(), "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}}));
    let v2 = to_v2(v1.clone());
    assert_eq!(
        serde_json::to_value(v2.spec.as_ref().unwrap().metrics.as_ref().unwrap()).unwrap(),
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    assert!(v2.metadata.annotations.is_none(), "{:?}", v2.metadata);
    assert_eq!(to_v1(&v2), v1, "create in v1, read in v2 and back in v1");
}

#[test]
fn no_target_is_v2s_default_cpu_at_eighty() {
    let v2 = to_v2(v1_hpa(
        json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": target(), "maxReplicas": 3}}),
    ));
    let m = &v2.spec.as_ref().unwrap().metrics.as_ref().unwrap()[0];
    let r = m.resource.as_ref().unwrap();
    assert_eq!(
        (
            m.type_.as_str(),
            r.name.as_str(),
            r.target.average_utilization
        ),
        ("Resource", "cpu", Some(DEFAULT_CPU_UTILIZATION))
    );
    let back = to_v1(&v2);
    assert_eq!(
        back.spec.unwrap().target_cpu_utilization_percentage,
        Some(DEFAULT_CPU_UTILIZATION)
    );
    assert!(back.metadata.annotations.is_none());
}

fn rich_v2() -> v2::HorizontalPodAutoscaler {
    v2_hpa(json!({
        "metadata": {"name": "web", "annotations": {"team": "a"}},
        "spec": {"scaleTargetRef": target(), "minReplicas": 2, "maxReplicas": 9,
            "metrics": [
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                {"type": "ContainerResource", "containerResource": {"name": "memory", "container": "app", "target": {"type": "Utilization", "averageUtilization": 70}}},
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}},
        "status": {"currentReplicas": 2, "desiredReplicas": 3, "observedGeneration": 1,
            "currentMetrics": [
                {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "50Mi"}}},
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 40, "averageValue": "190m"}}},
            ],
            "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale", "message": "ok", "lastTransitionTime": "2024-01-01T00:00:00Z"}]}
    }))
}

#[test]
fn other_metrics_status_conditions_and_behavior_ride_in_kubes_annotations() {
    let v1 = to_v1(&rich_v2());
    assert_eq!(
        annotation(&v1, METRICS),
        json!([
            {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "100Mi"}},
            {"type": "ContainerResource", "containerResource": {"name": "memory", "targetAverageUtilization": 70, "container": "app"}},
        ])
    );
    assert_eq!(
        annotation(&v1, CURRENT_METRICS),
        json!([
            {"type": "Resource", "resource": {"name": "memory", "currentAverageValue": "50Mi"}},
            {"type": "Resource", "resource": {"name": "cpu", "currentAverageUtilization": 40, "currentAverageValue": "190m"}},
        ])
    );
    assert_eq!(annotation(&v1, CONDITIONS)[0]["reason"], "ReadyForNewScale");
    assert_eq!(
        annotation(&v1, BEHAVIOR)["scaleDown"]["stabilizationWindowSeconds"],
        60
    );
    assert_eq!(v1.metadata.annotations.as_ref().unwrap()["team"], "a");
    let spec = v1.spec.as_ref().unwrap();
    assert_eq!(spec.target_cpu_utilization_percentage, None);
    let status = v1.status.as_ref().unwrap();
    assert_eq!(status.current_cpu_utilization_percentage, Some(40));
    assert_eq!((status.current_replicas, status.desired_replicas), (2, 3));
}

#[test]
fn a_v2_object_read_and_written_back_in_v1_is_unchanged() {
    let v2 = rich_v2();
    let again = to_v2(to_v1(&v2));
    assert_eq!(again, v2);
    let json = serde_json::to_value(&again).unwrap();
    assert_eq!(json["metadata"]["annotations"], json!({"team": "a"}));
}

#[test]
fn the_cpu_utilization_metric_comes_last_in_v2_as_kube_puts_it() {
    let v2 = v2_hpa(json!({"metadata": {"name": "web"},
    "spec": {"scaleTargetRef": target(), "maxReplicas": 3, "metrics": [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}},
        {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization", "averageUtilization": 70}}},
    ]}}));
    let v1 = to_v1(&v2);
    assert_eq!(
        v1.spec.as_ref().unwrap().target_cpu_utilization_percentage,
        Some(60)
    );
    assert_eq!(annotation(&v1, METRICS).as_array().unwrap().len(), 1);
    let names: Vec<_> = to_v2(v1)
        .spec
        .unwrap()
        .metrics
        .unwrap()
        .into_iter()
        .map(|m| m.resource.unwrap().name)
        .collect();
    assert_eq!(names, ["memory", "cpu"]);
}

#[test]
fn a_cpu_average_value_target_is_no_percentage_and_stays_in_the_annotation() {
    let v2 = v2_hpa(json!({"metadata": {"name": "web"},
    "spec": {"scaleTargetRef": target(), "maxReplicas": 3, "metrics": [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "500m"}}},
    ]}}));
    let v1 = to_v1(&v2);
    assert_eq!(
        v1.spec.as_ref().unwrap().target_cpu_utilization_percentage,
        None
    );
    assert_eq!(to_v2(v1), v2);
}

#[test]
fn a_v1_edit_of_the_target_keeps_the_other_metrics() {
    let mut v1 = to_v1(&rich_v2());
    v1.spec.as_mut().unwrap().target_cpu_utilization_percentage = Some(30);
    let metrics = to_v2(v1).spec.unwrap().metrics.unwrap();
    assert_eq!(metrics.len(), 3);
    assert_eq!(
        metrics[2]
            .resource
            .as_ref()
            .unwrap()
            .target
            .average_utilization,
        Some(30)
    );
}

#[test]
fn a_malformed_annotation_is_ignored_as_kube_ignores_it_and_none_is_stored() {
    let mut v1 = v1_hpa(
        json!({"metadata": {"name": "web", "annotations": {METRICS: "not json", BEHAVIOR: "{}"}},
        "spec": {"scaleTargetRef": target(), "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}}),
    );
    let v2 = to_v2(v1.clone());
    let spec = v2.spec.as_ref().unwrap();
    assert_eq!(spec.metrics.as_ref().unwrap().len(), 1);
    assert_eq!(spec.behavior, None, "an empty behavior is none");
    assert_eq!(v2.metadata.annotations, None);
    v1.metadata.annotations = None;
    assert_eq!(to_v1(&v2), v1);
}

#[test]
fn a_v2_write_cannot_store_the_round_trip_annotations() {
    let v2 = v2_hpa(
        json!({"metadata": {"name": "web", "annotations": {CONDITIONS: "[]", "keep": "me"}},
        "spec": {"scaleTargetRef": target(), "maxReplicas": 3}}),
    );
    assert_eq!(
        serde_json::to_value(&v2.metadata.annotations).unwrap(),
        json!({"keep": "me"})
    );
}

#[test]
fn values_convert_both_ways_and_the_table_reads_either() {
    let stored = serde_json::to_value(rich_v2()).unwrap();
    let served = value_to_v1(&stored);
    assert_eq!(served["apiVersion"], "autoscaling/v1");
    assert_eq!(value_to_v2(&served).unwrap(), stored);
    let age = String::new();
    assert_eq!(
        super::super::table::cells(&served, age.clone()),
        super::super::table::cells(&stored, age)
    );
    assert!(value_to_v2(&json!({"spec": 1})).is_none());
}
