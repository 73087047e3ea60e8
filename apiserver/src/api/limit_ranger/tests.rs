#![allow(clippy::unwrap_used)]
use serde_json::{Value, json};

use super::*;
use crate::api::WriteOptions;
use crate::kinds::Kind;

fn range(name: &str, limits: Value) -> LimitRange {
    let mut r: LimitRange =
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"limits": limits}}))
            .unwrap();
    r.normalize();
    r
}

fn pod(containers: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": containers}}))
        .unwrap()
}

fn resources(pod: &Pod, i: usize) -> Value {
    serde_json::to_value(&pod.spec.as_ref().unwrap().containers[i].resources).unwrap()
}

#[test]
fn defaults_fill_only_what_a_container_leaves_out_and_say_so() {
    let ranges = [range(
        "limits",
        json!([{"type": "Container", "default": {"cpu": "1", "memory": "512Mi"}, "defaultRequest": {"cpu": "0.5", "memory": "256Mi"}}]),
    )];
    let mut p = pod(json!([
        {"name": "app", "image": "x", "resources": {"limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}}},
        {"name": "side", "image": "x"},
    ]));
    assert!(apply_defaults(&mut p, &ranges));
    assert_eq!(
        resources(&p, 0),
        json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}})
    );
    assert_eq!(
        resources(&p, 1),
        json!({"limits": {"cpu": "1", "memory": "512Mi"}, "requests": {"cpu": "500m", "memory": "256Mi"}})
    );
    assert_eq!(
        p.metadata.annotations.unwrap()[ANNOTATION],
        "LimitRanger plugin set: cpu request for container app; cpu limit for container app; \
         cpu, memory request for container side; cpu, memory limit for container side"
    );
    // Nothing to fill: unchanged, unannotated.
    let mut full = pod(
        json!([{"name": "app", "image": "x", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}}}]),
    );
    assert!(!apply_defaults(&mut full, &ranges));
    assert!(full.metadata.annotations.is_none());
}

#[test]
fn container_bounds_give_kubes_messages_joined_in_brackets() {
    let ranges = [range(
        "limits",
        json!([{"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "1", "memory": "1Gi"}, "maxLimitRequestRatio": {"cpu": "2"}}]),
    )];
    let p = pod(json!([{"name": "app", "image": "x", "resources": {
        "limits": {"cpu": "2", "memory": "512Mi"}, "requests": {"cpu": "50m", "memory": "512Mi"}}}]));
    assert_eq!(
        check(&p, &ranges).unwrap_err(),
        "[minimum cpu usage per Container is 100m, but request is 50m, \
          maximum cpu usage per Container is 1, but limit is 2, \
          cpu max limit to request ratio per Container is 2, but provided ratio is 40.000000]"
    );
    let p = pod(json!([{"name": "app", "image": "x", "resources": {
        "limits": {"cpu": "1"}, "requests": {"cpu": "500m"}}}]));
    assert_eq!(
        check(&p, &ranges).unwrap_err(),
        "maximum memory usage per Container is 1Gi.  No limit is specified"
    );
    let p = pod(json!([{"name": "app", "image": "x", "resources": {
        "limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}}]));
    assert_eq!(check(&p, &ranges), Ok(()));
}

#[test]
fn pod_bounds_hold_for_the_sum_of_containers_and_the_largest_init_step() {
    let ranges = [range(
        "pods",
        json!([{"type": "Pod", "max": {"memory": "1Gi"}}]),
    )];
    let two = pod(json!([
        {"name": "a", "image": "x", "resources": {"limits": {"memory": "768Mi"}}},
        {"name": "b", "image": "x", "resources": {"limits": {"memory": "768Mi"}}},
    ]));
    assert_eq!(
        check(&two, &ranges).unwrap_err(),
        "maximum memory usage per Pod is 1Gi, but limit is 1536Mi"
    );
    // An init container runs alone: it counts only where it is the larger.
    let mut with_init =
        pod(json!([{"name": "a", "image": "x", "resources": {"limits": {"memory": "512Mi"}}}]));
    with_init.spec.as_mut().unwrap().init_containers = Some(vec![
        serde_json::from_value(
            json!({"name": "setup", "image": "x", "resources": {"limits": {"memory": "1Gi"}}}),
        )
        .unwrap(),
    ]);
    assert_eq!(check(&with_init, &ranges), Ok(()));
    // A sidecar (restartable init container) runs beside the containers: it adds.
    with_init
        .spec
        .as_mut()
        .unwrap()
        .init_containers
        .as_mut()
        .unwrap()[0]
        .restart_policy = Some("Always".into());
    assert_eq!(
        check(&with_init, &ranges).unwrap_err(),
        "maximum memory usage per Pod is 1Gi, but limit is 1536Mi"
    );
}

#[test]
fn admission_names_a_pod_by_its_generate_name_until_it_has_one() {
    let meta = |name: Option<&str>, prefix: Option<&str>| ObjectMeta {
        name: name.map(Into::into),
        generate_name: prefix.map(Into::into),
        ..Default::default()
    };
    assert_eq!(admission_name(&meta(Some("web"), Some("w-"))), "web");
    assert_eq!(admission_name(&meta(None, Some("web-7d4-"))), "web-7d4-");
    assert_eq!(admission_name(&meta(None, None)), "Unknown");
}

#[tokio::test]
async fn a_pod_created_in_a_limited_namespace_gets_its_defaults_and_bounds() {
    let api = Api::in_memory().await.unwrap();
    api.create_object(
        "default",
        range(
            "limits",
            json!([{"type": "Container", "max": {"cpu": "1", "memory": "1Gi"}, "defaultRequest": {"cpu": "250m", "memory": "128Mi"}}]),
        ),
        WriteOptions::default(),
        None,
    )
    .await
    .unwrap();
    // Defaults: the limit from `max`, the request from `defaultRequest`; QoS follows.
    let created = api
        .create_pod("default", pod(json!([{"name": "app", "image": "busybox"}])))
        .await
        .unwrap();
    assert_eq!(
        resources(&created, 0),
        json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "250m", "memory": "128Mi"}})
    );
    assert_eq!(
        created.status.unwrap().qos_class.as_deref(),
        Some("Burstable")
    );
    // Past `max`: 403 in kube's words, named by generateName, nothing stored.
    let mut big =
        pod(json!([{"name": "app", "image": "busybox", "resources": {"limits": {"cpu": "2"}}}]));
    big.metadata.name = None;
    big.metadata.generate_name = Some("big-".into());
    let err = api.create_pod("default", big).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "pods \"big-\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"
    );
    assert_eq!(
        api.list_pods(Some("default"), "", "").unwrap().items.len(),
        1
    );
    // A request above the defaulted limit is the pod's own error, a 422.
    let over = pod(
        json!([{"name": "app", "image": "busybox", "resources": {"requests": {"memory": "2Gi"}}}]),
    );
    let mut over = over;
    over.metadata.name = Some("over".into());
    let err = api.create_pod("default", over).await.unwrap_err();
    assert!(
        matches!(&err, ApiError::Invalid { .. })
            && err
                .to_string()
                .contains("must be less than or equal to memory limit of 1Gi"),
        "{err}"
    );
}
