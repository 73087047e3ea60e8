use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
use k8s_openapi::api::policy::v1::PodDisruptionBudgetSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::*;

const NOW: &str = "2024-01-01T12:00:00Z";

fn ts(s: &str) -> Timestamp {
    s.parse().expect("test timestamp")
}

fn web() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), "web".to_owned())])
}

fn pdb(min: Option<IntOrString>, max: Option<IntOrString>) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            generation: Some(1),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: min,
            max_unavailable: max,
            selector: Some(LabelSelector {
                match_labels: Some(web()),
                match_expressions: None,
            }),
            unhealthy_pod_eviction_policy: None,
        }),
        status: None,
    }
}

/// A pod of the `web` set, owned by the ReplicaSet `rs` (when `owned`), ready or not.
fn pod(name: &str, ready: bool, owned: bool) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            labels: Some(web()),
            owner_references: owned.then(|| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: "rs".into(),
                    uid: "rs-uid".into(),
                    controller: Some(true),
                    ..Default::default()
                }]
            }),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

fn written(r: &Reconciled) -> Option<&PodDisruptionBudgetStatus> {
    r.actions.iter().find_map(|a| match a {
        Action::WriteStatus(Status::PodDisruptionBudget(s)) => Some(s),
        _ => None,
    })
}

fn events(r: &Reconciled) -> Vec<&str> {
    r.actions
        .iter()
        .filter_map(|a| match a {
            Action::Event(e) => Some(e.reason.as_str()),
            _ => None,
        })
        .collect()
}

fn condition(s: &PodDisruptionBudgetStatus) -> (&str, &str) {
    let c = s
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionAllowed")
        .expect("the DisruptionAllowed condition");
    (c.status.as_str(), c.reason.as_str())
}

/// The ReplicaSet `rs` scales to `replicas`; nothing else is known.
fn scales(replicas: i32) -> impl Fn(&OwnerReference) -> Option<(String, i32)> {
    move |r: &OwnerReference| (r.kind == "ReplicaSet").then(|| (r.uid.clone(), replicas))
}

#[test]
fn an_integer_min_available_counts_the_selected_pods_and_allows_the_surplus() {
    let pods = [
        pod("a", true, true),
        pod("b", true, true),
        pod("c", false, true),
    ];
    let other = {
        let mut p = pod("other", true, true);
        p.metadata.labels = Some(BTreeMap::from([("app".into(), "db".into())]));
        p
    };
    let refs: Vec<&Pod> = pods.iter().chain([&other]).collect();
    let r = reconcile(
        &pdb(Some(IntOrString::Int(1)), None),
        &refs,
        &scales(3),
        ts(NOW),
    );
    let s = written(&r).expect("a status");
    assert_eq!(
        (
            s.expected_pods,
            s.desired_healthy,
            s.current_healthy,
            s.disruptions_allowed
        ),
        (3, 1, 2, 1)
    );
    assert_eq!(s.observed_generation, Some(1));
    assert_eq!(condition(s), ("True", "SufficientPods"));
    assert!(events(&r).is_empty());
}

#[test]
fn max_unavailable_and_percentages_scale_by_the_controller_rounding_up() {
    let pods: Vec<Pod> = (0..4).map(|i| pod(&format!("p{i}"), true, true)).collect();
    let refs: Vec<&Pod> = pods.iter().collect();
    // 25% of 10 replicas is 2.5, rounded up: 3 may be unavailable, 7 must stay.
    let r = reconcile(
        &pdb(None, Some(IntOrString::String("25%".into()))),
        &refs,
        &scales(10),
        ts(NOW),
    );
    let s = written(&r).expect("a status");
    assert_eq!(
        (s.expected_pods, s.desired_healthy, s.current_healthy),
        (10, 7, 4)
    );
    assert_eq!(s.disruptions_allowed, 0);
    assert_eq!(condition(s), ("False", "InsufficientPods"));
    // minAvailable 50% of 4: 2 must stay, 2 may go.
    let r = reconcile(
        &pdb(Some(IntOrString::String("50%".into())), None),
        &refs,
        &scales(4),
        ts(NOW),
    );
    let s = written(&r).expect("a status");
    assert_eq!((s.desired_healthy, s.disruptions_allowed), (2, 2));
}

#[test]
fn a_percentage_over_pods_of_an_unknown_controller_fails_safe() {
    let pods = [pod("a", true, true)];
    let refs: Vec<&Pod> = pods.iter().collect();
    let mut budget = pdb(None, Some(IntOrString::Int(1)));
    budget.status = Some(PodDisruptionBudgetStatus {
        disruptions_allowed: 1,
        ..Default::default()
    });
    let none = |_: &OwnerReference| None;
    let r = reconcile(&budget, &refs, &none, ts(NOW));
    let s = written(&r).expect("the fail-safe status");
    assert_eq!(s.disruptions_allowed, 0);
    assert_eq!(condition(s), ("False", "SyncFailed"));
    let c = s
        .conditions
        .as_ref()
        .and_then(|c| c.first())
        .expect("condition");
    assert_eq!(c.message, "found no controllers for pod \"a\"");
    assert_eq!(events(&r), ["CalculateExpectedPodCountFailed"]);
}

#[test]
fn bare_pods_under_a_percentage_are_reported_and_not_counted() {
    let pods = [pod("a", true, true), pod("bare", true, false)];
    let refs: Vec<&Pod> = pods.iter().collect();
    let r = reconcile(
        &pdb(None, Some(IntOrString::Int(1))),
        &refs,
        &scales(2),
        ts(NOW),
    );
    assert_eq!(events(&r), ["UnmanagedPods"]);
    let s = written(&r).expect("a status");
    assert_eq!(
        (s.expected_pods, s.current_healthy, s.disruptions_allowed),
        (2, 2, 1)
    );
}

#[test]
fn an_evicted_pod_counts_as_going_for_two_minutes_unless_deleted() {
    let pods = [
        pod("a", true, true),
        pod("b", true, true),
        pod("c", true, true),
    ];
    let refs: Vec<&Pod> = pods.iter().collect();
    let mut budget = pdb(Some(IntOrString::Int(1)), None);
    let evicted_at = ts("2024-01-01T11:59:30Z");
    budget.status = Some(PodDisruptionBudgetStatus {
        disrupted_pods: Some(BTreeMap::from([
            ("a".to_owned(), Time(evicted_at)),
            ("gone".to_owned(), Time(evicted_at)),
        ])),
        ..Default::default()
    });
    let r = reconcile(&budget, &refs, &scales(3), ts(NOW));
    let s = written(&r).expect("a status");
    // a is held (not healthy), the pod that is gone leaves the map.
    assert_eq!(s.current_healthy, 2);
    assert_eq!(s.disruptions_allowed, 1);
    assert_eq!(
        s.disrupted_pods
            .as_ref()
            .map(|d| d.keys().cloned().collect::<Vec<_>>()),
        Some(vec!["a".to_owned()])
    );
    // Looked at again once the hold runs out (11:59:30 + 2 min, and a second).
    assert_eq!(r.requeue_after, Some(Duration::from_secs(91)));
    // After the timeout the pod counts again, and the entry goes.
    let later = reconcile(&budget, &refs, &scales(3), ts("2024-01-01T12:02:00Z"));
    let s = written(&later).expect("a status");
    assert_eq!((s.current_healthy, s.disrupted_pods.as_ref()), (3, None));
}

#[test]
fn no_pods_is_an_event_and_allows_nothing_and_a_steady_status_writes_nothing() {
    let budget = pdb(Some(IntOrString::Int(0)), None);
    let r = reconcile(&budget, &[], &scales(0), ts(NOW));
    assert_eq!(events(&r), ["NoPods"]);
    let s = written(&r).expect("a status").clone();
    assert_eq!(s.disruptions_allowed, 0);
    let mut steady = budget.clone();
    steady.status = Some(s);
    let again = reconcile(&steady, &[], &scales(0), ts("2024-01-01T12:05:00Z"));
    assert!(written(&again).is_none(), "{:?}", again.actions);
}

#[test]
fn a_budget_without_a_selector_selects_nothing_and_an_empty_one_everything() {
    let pods = [pod("a", true, true)];
    let refs: Vec<&Pod> = pods.iter().collect();
    let mut none = pdb(Some(IntOrString::Int(0)), None);
    none.spec.as_mut().expect("spec").selector = None;
    let s = written(&reconcile(&none, &refs, &scales(1), ts(NOW)))
        .cloned()
        .expect("status");
    assert_eq!(s.expected_pods, 0);
    let mut all = none.clone();
    all.spec.as_mut().expect("spec").selector = Some(LabelSelector::default());
    let s = written(&reconcile(&all, &refs, &scales(1), ts(NOW)))
        .cloned()
        .expect("status");
    assert_eq!((s.expected_pods, s.disruptions_allowed), (1, 1));
}
