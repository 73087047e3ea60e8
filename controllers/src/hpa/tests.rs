//! The HPA's rules, one per test, over hand-built pods, usage and a clock the tests
//! move.
#![allow(clippy::unwrap_used)]

use super::*;
use k8s_openapi::jiff::SignedDuration;
use serde_json::json;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

/// A Running pod started and Ready long before `t(0)`, requesting 100m of CPU.
fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "web", "image": "busybox", "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]},
        "status": {"phase": "Running", "startTime": "2027-01-01T00:00:00Z",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2027-01-01T00:00:10Z"}]},
    }))
    .unwrap()
}

fn usage(millicores: i64, at: Timestamp) -> PodUsage {
    PodUsage {
        containers: vec![("web".into(), millicores, 50 * 1024 * 1024 * 1000)],
        timestamp: at,
        window: SignedDuration::from_secs(5),
    }
}

fn scale(replicas: i32) -> Scale {
    serde_json::from_value(
        json!({"metadata": {"name": "web"}, "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "selector": "app=web"}}),
    )
    .unwrap()
}

fn hpa(extra: serde_json::Value) -> HorizontalPodAutoscaler {
    let mut v = json!({"metadata": {"name": "web", "namespace": "default", "generation": 1},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 1, "maxReplicas": 3,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]}});
    if let serde_json::Value::Object(m) = extra {
        for (k, x) in m {
            v["spec"][k] = x;
        }
    }
    serde_json::from_value(v).unwrap()
}

fn observe<'a>(replicas: i32, pods: &'a [Pod], cpu: &[(&str, i64)], at: Timestamp) -> Observed<'a> {
    Observed {
        scale: Ok(scale(replicas)),
        pods: pods.iter().collect(),
        usage: cpu
            .iter()
            .map(|(p, c)| ((*p).to_owned(), usage(*c, at)))
            .collect(),
    }
}

fn condition<'a>(p: &'a Plan, type_: &str) -> (&'a str, &'a str) {
    let c = p
        .status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == type_)
        .unwrap();
    (c.status.as_str(), c.reason.as_deref().unwrap())
}

#[test]
fn a_busy_pod_scales_up_by_the_ratio_within_max_with_kubes_reason() {
    let pods = [pod("a")];
    let mut memory = Memory::default();
    let mut plan = reconcile(
        &hpa(json!({})),
        &observe(1, &pods, &[("a", 190)], t(0)),
        &mut memory,
        t(0),
    );
    // 190% of request against 50%: ceil(3.8) = 4, held at max 3.
    let r = plan.rescale.clone().unwrap();
    assert_eq!((r.from, r.to), (1, 3));
    assert_eq!(
        r.reason,
        "cpu resource utilization (percentage of request) above target"
    );
    assert_eq!(
        condition(&plan, "ScalingLimited"),
        ("True", "TooManyReplicas")
    );
    assert_eq!(
        condition(&plan, "ScalingActive"),
        ("True", "ValidMetricFound")
    );
    plan.rescaled(t(0));
    assert_eq!(
        condition(&plan, "AbleToScale"),
        ("True", "SucceededRescale")
    );
    assert_eq!(
        plan.events[0].message,
        "New size: 3; reason: cpu resource utilization (percentage of request) above target"
    );
    let m = plan.status.current_metrics.as_ref().unwrap()[0]
        .resource
        .as_ref()
        .unwrap();
    assert_eq!(m.current.average_utilization, Some(190));
    assert_eq!(m.current.average_value.as_ref().unwrap().0, "190m");
    assert_eq!(plan.status.desired_replicas, 3);
    assert!(plan.status.last_scale_time.is_some());
}

#[test]
fn a_change_within_the_ten_percent_tolerance_scales_nothing() {
    let pods = [pod("a"), pod("b")];
    let mut memory = Memory::default();
    let plan = reconcile(
        &hpa(json!({})),
        &observe(2, &pods, &[("a", 52), ("b", 54)], t(0)),
        &mut memory,
        t(0),
    );
    assert_eq!(plan.rescale, None);
    assert_eq!(plan.status.desired_replicas, 2);
    assert_eq!(
        condition(&plan, "ScalingLimited"),
        ("False", "DesiredWithinRange")
    );
}

#[test]
fn missing_metrics_count_as_full_use_on_a_scale_down_and_none_on_a_scale_up() {
    let pods = [pod("a"), pod("b"), pod("c")];
    let no_behavior = hpa(json!({}));
    // Down: a and c idle, b unknown (100%): (0+100+0)/300 = 33% vs 50% -> ratio 0.66,
    // 3 × 0.66 -> 2 instead of the 1 the known pods alone would give.
    let p = replicas::replicas(
        3,
        Target::Utilization(50),
        "cpu",
        None,
        &pods.iter().collect::<Vec<_>>(),
        &[("a", 0), ("c", 0)]
            .iter()
            .map(|(n, v)| {
                (
                    (*n).to_owned(),
                    PodMetric {
                        value: *v,
                        timestamp: t(0),
                        window: SignedDuration::from_secs(5),
                    },
                )
            })
            .collect(),
        t(0),
    )
    .unwrap();
    assert_eq!(p.replicas, 2);
    // Up: a at 200%, b and c unknown (0%): 200/300 = 66% vs 50% -> 4.
    let p = replicas::replicas(
        3,
        Target::Utilization(50),
        "cpu",
        None,
        &pods.iter().collect::<Vec<_>>(),
        &[("a", 200)]
            .iter()
            .map(|(n, v)| {
                (
                    (*n).to_owned(),
                    PodMetric {
                        value: *v,
                        timestamp: t(0),
                        window: SignedDuration::from_secs(5),
                    },
                )
            })
            .collect(),
        t(0),
    )
    .unwrap();
    assert_eq!(p.replicas, 4);
    let _ = no_behavior;
}

#[test]
fn pods_not_ready_or_just_started_are_left_out_of_a_scale_up() {
    let mut starting = pod("b");
    // Started 10 s ago, not Ready: its CPU is its start-up's.
    let status = starting.status.as_mut().unwrap();
    status.start_time = Some(Time(t(-10)));
    let ready = &mut status.conditions.as_mut().unwrap()[0];
    ready.status = "False".into();
    ready.last_transition_time = Some(Time(t(-10)));
    let pods = [pod("a"), starting];
    let metrics = [("a", 100), ("b", 300)]
        .iter()
        .map(|(n, v)| {
            (
                (*n).to_owned(),
                PodMetric {
                    value: *v,
                    timestamp: t(0),
                    window: SignedDuration::from_secs(5),
                },
            )
        })
        .collect();
    let p = replicas::replicas(
        2,
        Target::Utilization(50),
        "cpu",
        None,
        &pods.iter().collect::<Vec<_>>(),
        &metrics,
        t(0),
    )
    .unwrap();
    // a alone is 200% (ratio 4); b counted at 0%: (100+0)/200 = 50% -> ratio 1.0, within
    // tolerance: no change, where b's 300m would have asked for 8.
    assert_eq!(p.replicas, 2);
    assert_eq!(p.utilization, Some(100));
}

#[test]
fn without_metrics_the_condition_and_events_say_why_and_nothing_scales() {
    let pods = [pod("a")];
    let mut memory = Memory::default();
    let plan = reconcile(
        &hpa(json!({})),
        &observe(1, &pods, &[], t(0)),
        &mut memory,
        t(0),
    );
    assert!(plan.failed);
    assert_eq!(plan.rescale, None);
    assert_eq!(
        condition(&plan, "ScalingActive"),
        ("False", "FailedGetResourceMetric")
    );
    assert_eq!(plan.events[0].reason, "FailedGetResourceMetric");
    assert_eq!(
        plan.events[0].message,
        "failed to get cpu utilization: unable to get metrics for resource cpu: no metrics returned from resource metrics API"
    );
    assert_eq!(plan.events[1].reason, "FailedComputeMetricsReplicas");
    assert!(plan.events[1].message.starts_with("invalid metrics (1 invalid out of 1), first error is: failed to get cpu resource metric value: "));
    assert_eq!(
        plan.status.current_metrics.as_ref().unwrap()[0],
        MetricStatus::default()
    );
}

#[test]
fn a_target_at_zero_disables_scaling_and_an_unreadable_scale_is_failed_get_scale() {
    let mut memory = Memory::default();
    let plan = reconcile(
        &hpa(json!({})),
        &observe(0, &[], &[], t(0)),
        &mut memory,
        t(0),
    );
    assert_eq!(plan.rescale, None);
    assert_eq!(
        condition(&plan, "ScalingActive"),
        ("False", "ScalingDisabled")
    );
    let mut o = observe(1, &[], &[], t(0));
    o.scale = Err("deployments.apps \"web\" not found".into());
    let plan = reconcile(&hpa(json!({})), &o, &mut memory, t(0));
    assert!(plan.failed);
    assert_eq!(condition(&plan, "AbleToScale"), ("False", "FailedGetScale"));
}

#[test]
fn replicas_outside_min_and_max_are_brought_back_whatever_the_metrics() {
    let mut memory = Memory::default();
    let plan = reconcile(
        &hpa(json!({})),
        &observe(5, &[], &[], t(0)),
        &mut memory,
        t(0),
    );
    assert_eq!(plan.status.current_metrics, None);
    let r = plan.rescale.unwrap();
    assert_eq!(
        (r.to, r.reason.as_str()),
        (3, "Current number of replicas above Spec.MaxReplicas")
    );
    let plan = reconcile(
        &hpa(json!({"minReplicas": 2})),
        &observe(1, &[], &[], t(0)),
        &mut memory,
        t(0),
    );
    assert_eq!(plan.rescale.unwrap().to, 2);
}

#[test]
fn without_behavior_a_scale_down_waits_for_the_five_minute_window() {
    let pods = [pod("a"), pod("b"), pod("c")];
    let h = hpa(json!({}));
    let mut memory = Memory::default();
    // Busy at 0: recommends 3 (current).
    let plan = reconcile(
        &h,
        &observe(3, &pods, &[("a", 60), ("b", 50), ("c", 50)], t(0)),
        &mut memory,
        t(0),
    );
    assert_eq!(plan.rescale, None);
    // Idle from 15 s: the highest recommendation of the last 5 min is still 3.
    let idle = [("a", 1), ("b", 1), ("c", 1)];
    let plan = reconcile(&h, &observe(3, &pods, &idle, t(15)), &mut memory, t(15));
    assert_eq!(plan.rescale, None);
    assert_eq!(
        condition(&plan, "AbleToScale"),
        ("True", "ScaleDownStabilized")
    );
    // Past 5 min after the busy one, 1 it is.
    let plan = reconcile(&h, &observe(3, &pods, &idle, t(301)), &mut memory, t(301));
    let r = plan.rescale.unwrap();
    assert_eq!((r.to, r.reason.as_str()), (1, "All metrics below target"));
}

#[test]
fn a_zero_scale_down_window_scales_down_at_once_and_policies_limit_the_rate() {
    let pods: Vec<Pod> = (0..10).map(|i| pod(&format!("p{i}"))).collect();
    let idle: Vec<(String, i64)> = (0..10).map(|i| (format!("p{i}"), 1)).collect();
    let idle: Vec<(&str, i64)> = idle.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    let h = hpa(
        json!({"maxReplicas": 10, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0,
        "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}]}}}),
    );
    let mut memory = Memory::default();
    let mut plan = reconcile(&h, &observe(10, &pods, &idle, t(0)), &mut memory, t(0));
    let r = plan.rescale.clone().unwrap();
    assert_eq!(r.to, 8);
    assert_eq!(
        condition(&plan, "ScalingLimited"),
        ("True", "ScaleDownLimit")
    );
    plan.rescaled(t(0));
    remember_rescale(&h, &mut memory, &r, t(0));
    // Within the policy's minute, the 2 already removed count: no further step.
    let plan = reconcile(
        &h,
        &observe(8, &pods[..8], &idle[..8], t(30)),
        &mut memory,
        t(30),
    );
    assert_eq!(plan.rescale, None);
    // After it, 2 more.
    let plan = reconcile(
        &h,
        &observe(8, &pods[..8], &idle[..8], t(61)),
        &mut memory,
        t(61),
    );
    assert_eq!(plan.rescale.unwrap().to, 6);
}

#[test]
fn scale_up_policies_select_the_larger_step_unless_min_or_disabled() {
    let up = |select: &str| -> HPAScalingRules {
        serde_json::from_value(json!({"stabilizationWindowSeconds": 0, "selectPolicy": select,
            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]})).unwrap()
    };
    let down = apiserver::scale_down_defaults();
    let memory = Memory::default();
    let at = |s: &str, current| {
        memory
            .rate_limit(&up(s), &down, (1, 100), current, 50, t(0))
            .replicas
    };
    assert_eq!(at("Max", 10), 20);
    assert_eq!(at("Max", 1), 5);
    assert_eq!(at("Min", 10), 14);
    assert_eq!(at("Disabled", 10), 10);
}

#[test]
fn a_scale_up_window_applies_the_lowest_recent_recommendation() {
    let up: HPAScalingRules = serde_json::from_value(
        json!({"stabilizationWindowSeconds": 60, "selectPolicy": "Max",
        "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}),
    )
    .unwrap();
    let down = apiserver::scale_down_defaults();
    let mut memory = Memory::default();
    memory.start(2, t(0));
    let s = memory.stabilize(&up, &down, 2, 6, t(10));
    assert_eq!((s.replicas, s.reason), (2, "ScaleUpStabilized"));
    let s = memory.stabilize(&up, &down, 2, 6, t(61));
    assert_eq!(s.replicas, 6);
}

#[test]
fn memory_and_average_value_targets_compare_the_average_usage() {
    let pods = [pod("a"), pod("b")];
    let h = hpa(
        json!({"maxReplicas": 10, "metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "25Mi"}}}]}),
    );
    let mut memory = Memory::default();
    let plan = reconcile(
        &h,
        &observe(2, &pods, &[("a", 1), ("b", 1)], t(0)),
        &mut memory,
        t(0),
    );
    // 50Mi each against 25Mi: 4.
    let r = plan.rescale.unwrap();
    assert_eq!(
        (r.to, r.reason.as_str()),
        (4, "memory resource above target")
    );
    let m = plan.status.current_metrics.unwrap()[0]
        .resource
        .clone()
        .unwrap();
    assert_eq!(m.current.average_value.unwrap().0, "52428800");
}

#[test]
fn a_sidecars_request_counts_toward_utilization_and_a_plain_init_containers_does_not() {
    let mut with_sidecar = pod("a");
    let spec = with_sidecar.spec.as_mut().unwrap();
    spec.init_containers = Some(
        serde_json::from_value(json!([
            {"name": "proxy", "image": "busybox", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": "100m"}}},
            {"name": "setup", "image": "busybox",
             "resources": {"requests": {"cpu": "500m"}}},
        ]))
        .unwrap(),
    );
    let pods = [with_sidecar];
    let mut memory = Memory::default();
    // The pod's 200m is its two running containers' use against their 200m of
    // requests: 100% against 50% asks for 2 (the web container's 100m alone would
    // make it 200%, and 4).
    let plan = reconcile(
        &hpa(json!({})),
        &observe(1, &pods, &[("a", 200)], t(0)),
        &mut memory,
        t(0),
    );
    assert_eq!(plan.rescale.as_ref().map(|r| r.to), Some(2));
    let m = plan.status.current_metrics.as_ref().unwrap()[0]
        .resource
        .as_ref()
        .unwrap();
    assert_eq!(m.current.average_utilization, Some(100));

    // A sidecar without a request makes the pod's utilization unknowable, as kube says.
    let mut bare = pods[0].clone();
    let init = bare
        .spec
        .as_mut()
        .unwrap()
        .init_containers
        .as_mut()
        .unwrap();
    init[0].resources = None;
    let pods = [bare];
    let plan = reconcile(
        &hpa(json!({})),
        &observe(1, &pods, &[("a", 200)], t(0)),
        &mut Memory::default(),
        t(0),
    );
    assert_eq!(plan.rescale, None);
    assert!(
        plan.events.iter().any(|e| e
            .message
            .contains("missing request for cpu in container proxy of Pod a")),
        "{:?}",
        plan.events
    );
}
