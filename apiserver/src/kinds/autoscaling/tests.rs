#![allow(clippy::unwrap_used)]
use super::*;
use crate::ApiError;
use crate::kinds::validate;
use serde_json::{Value, json};

fn hpa(v: Value) -> HorizontalPodAutoscaler {
    let mut h: HorizontalPodAutoscaler = serde_json::from_value(v).unwrap();
    h.normalize();
    h
}

fn refused(h: &HorizontalPodAutoscaler) -> Vec<(String, String)> {
    let Err(ApiError::Invalid { kind, causes, .. }) = validate(h, None) else {
        panic!("accepted: {h:?}");
    };
    assert_eq!(kind, "HorizontalPodAutoscaler.autoscaling");
    causes.into_iter().map(|c| (c.field, c.message)).collect()
}

fn target() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
}

#[test]
fn defaults_are_kubes_min_one_cpu_eighty_and_a_given_behaviors_rules_filled_in() {
    let h = hpa(
        json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": target(), "maxReplicas": 3,
        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}}}}),
    );
    let spec = h.spec.as_ref().unwrap();
    assert_eq!(spec.min_replicas, Some(1));
    let m = &spec.metrics.as_ref().unwrap()[0];
    assert_eq!(m.type_, "Resource");
    let r = m.resource.as_ref().unwrap();
    assert_eq!(
        (r.name.as_str(), r.target.average_utilization),
        ("cpu", Some(80))
    );
    let b = spec.behavior.as_ref().unwrap();
    assert_eq!(b.scale_up, Some(scale_up_defaults()));
    let down = b.scale_down.as_ref().unwrap();
    assert_eq!(down.stabilization_window_seconds, Some(0));
    assert_eq!(down.policies, scale_down_defaults().policies);
    assert!(validate(&h, None).is_ok());
}

#[test]
fn replicas_and_the_target_reference_have_kubes_messages() {
    let h = hpa(
        json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": {"name": ""}, "minReplicas": 0, "maxReplicas": 0}}),
    );
    let causes = refused(&h);
    let want = [
        (
            "spec.minReplicas",
            "Invalid value: 0: must be greater than or equal to 1",
        ),
        (
            "spec.maxReplicas",
            "Invalid value: 0: must be greater than 0",
        ),
        ("spec.scaleTargetRef.kind", "Required value"),
        ("spec.scaleTargetRef.name", "Required value"),
    ];
    for (f, m) in want {
        assert!(causes.contains(&(f.into(), m.into())), "{causes:?}");
    }
    let h = hpa(
        json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": target(), "minReplicas": 4, "maxReplicas": 3}}),
    );
    assert_eq!(
        refused(&h),
        [(
            "spec.maxReplicas".to_owned(),
            "Invalid value: 3: must be greater than or equal to `minReplicas`".to_owned()
        )]
    );
}

#[test]
fn metric_targets_follow_kubes_rules() {
    let h = hpa(
        json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": target(), "maxReplicas": 3, "metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50, "averageValue": "100m"}}},
            {"type": "Resource", "resource": {"name": "memory", "target": {"type": "Utilization"}}},
            {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "web", "target": {"type": "AverageValue", "averageValue": "-1"}}},
        ]}}),
    );
    let causes = refused(&h);
    assert!(
        causes.contains(&(
            "spec.metrics[0].resource.target.averageValue".into(),
            "Forbidden: may not set both a target raw value and a target utilization".into()
        )),
        "{causes:?}"
    );
    assert!(
        causes.contains(&(
            "spec.metrics[1].resource.target.averageUtilization".into(),
            "Required value: must set either a target raw value or a target utilization".into()
        )),
        "{causes:?}"
    );
    assert!(
        causes.contains(&(
            "spec.metrics[2].containerResource.target.averageValue".into(),
            "Invalid value: \"-1\": must be positive".into()
        )),
        "{causes:?}"
    );
    let ok = hpa(
        json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": target(), "maxReplicas": 3, "metrics": [
            {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
            {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "web", "target": {"type": "Utilization", "averageUtilization": 60}}},
        ]}}),
    );
    assert!(validate(&ok, None).is_ok());
}

#[test]
fn pods_object_and_external_metrics_and_other_resources_are_refused_not_ignored() {
    let h = hpa(
        json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": target(), "maxReplicas": 3, "metrics": [
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
            {"type": "External", "external": {"metric": {"name": "queue"}, "target": {"type": "Value", "value": "10"}}},
            {"type": "Resource", "resource": {"name": "ephemeral-storage", "target": {"type": "Utilization", "averageUtilization": 50}}},
        ]}}),
    );
    let causes = refused(&h);
    assert_eq!(causes[0].0, "spec.metrics[0].type");
    assert!(
        causes[0]
            .1
            .contains("not supported by mesopod: Pods metrics"),
        "{causes:?}"
    );
    assert_eq!(causes[1].0, "spec.metrics[1].type");
    assert!(
        causes[1].1.contains("external.metrics.k8s.io"),
        "{causes:?}"
    );
    assert_eq!(causes[2].0, "spec.metrics[2].resource.name");
    assert!(
        causes[2]
            .1
            .contains("not supported by mesopod: only cpu and memory"),
        "{causes:?}"
    );
}

#[test]
fn behavior_rules_have_kubes_bounds() {
    let h = hpa(
        json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": target(), "maxReplicas": 3, "behavior": {
            "scaleUp": {"stabilizationWindowSeconds": 3601, "selectPolicy": "Most", "policies": []},
            "scaleDown": {"policies": [{"type": "Replicas", "value": 0, "periodSeconds": 1801}]},
        }}}),
    );
    let causes = refused(&h);
    let want = [
        (
            "spec.behavior.scaleUp.stabilizationWindowSeconds",
            "Invalid value: 3601: must be less than or equal to 3600",
        ),
        (
            "spec.behavior.scaleUp.selectPolicy",
            "Unsupported value: \"Most\": supported values: \"Disabled\", \"Max\", \"Min\"",
        ),
        (
            "spec.behavior.scaleUp.policies",
            "Required value: must specify at least one Policy",
        ),
        (
            "spec.behavior.scaleDown.policies[0].type",
            "Unsupported value: \"Replicas\": supported values: \"Percent\", \"Pods\"",
        ),
        (
            "spec.behavior.scaleDown.policies[0].value",
            "Invalid value: 0: must be greater than zero",
        ),
        (
            "spec.behavior.scaleDown.policies[0].periodSeconds",
            "Invalid value: 1801: must be less than or equal to 1800",
        ),
    ];
    for (f, m) in want {
        assert!(causes.contains(&(f.into(), m.into())), "{causes:?}");
    }
}

#[test]
fn targets_column_shows_current_over_target_as_kubectl_does() {
    let mut v = json!({"spec": {"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}});
    assert_eq!(table::targets(&v), "cpu: <unknown>/50%");
    v["status"] = json!({"currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 45, "averageValue": "45m"}}}]});
    assert_eq!(table::targets(&v), "cpu: 45%/50%");
    let mem = json!({"spec": {"metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}]}});
    assert_eq!(table::targets(&mem), "memory: <unknown>/100Mi");
    assert_eq!(table::targets(&json!({})), "<none>");
}

#[test]
fn a_per_hpa_tolerance_is_refused_not_ignored() {
    let h = hpa(
        json!({"metadata": {"name": "web"}, "spec": {"scaleTargetRef": target(), "maxReplicas": 3,
            "behavior": {"scaleDown": {"tolerance": "0.05", "policies": [{"type": "Pods", "value": 1, "periodSeconds": 15}]}}}}),
    );
    let causes = refused(&h);
    assert_eq!(
        causes[0].0, "spec.behavior.scaleDown.tolerance",
        "{causes:?}"
    );
    assert!(
        causes[0].1.contains("not supported by mesopod"),
        "{causes:?}"
    );
}
