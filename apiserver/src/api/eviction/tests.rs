#![allow(clippy::unwrap_used)]
use k8s_openapi::api::core::v1::{Container, PodSpec, PodStatus};
use k8s_openapi::api::policy::v1::{PodDisruptionBudgetSpec, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::*;

fn labels() -> std::collections::BTreeMap<String, String> {
    [("app".to_owned(), "web".to_owned())].into()
}

async fn running_pod(api: &Api, name: &str, ready: bool) {
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(labels()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "c".into(),
                image: Some("busybox".into()),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    api.create_pod("default", pod).await.unwrap();
    // Bound, so a delete is graceful and the pod stays, terminating, for a look.
    let binding = crate::api::pods::Binding {
        node_name: "node-1".into(),
        ..Default::default()
    };
    api.bind_pod("default", name, &binding).await.unwrap();
    let status = PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    api.update_pod_status("default", name, status)
        .await
        .unwrap();
}

/// A budget over the `web` pods whose controller has computed `allowed` disruptions
/// with 2 healthy of 1 desired.
async fn budget(api: &Api, name: &str, allowed: i32) {
    let b = PodDisruptionBudget {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(labels()),
                match_expressions: None,
            }),
            ..Default::default()
        }),
        status: None,
    };
    let mut stored = api.create_poddisruptionbudget("default", b).await.unwrap();
    stored.status = Some(PodDisruptionBudgetStatus {
        disruptions_allowed: allowed,
        current_healthy: 2,
        desired_healthy: 1,
        expected_pods: 2,
        observed_generation: stored.metadata.generation,
        ..Default::default()
    });
    api.replace_poddisruptionbudget_status("default", name, stored)
        .await
        .unwrap();
}

fn eviction(name: &str) -> Eviction {
    Eviction {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        delete_options: None,
    }
}

/// The pod is being deleted, marked as the eviction's target.
fn evicted(api: &Api, name: &str) -> bool {
    let pod = api.get_pod("default", name).unwrap();
    let target = pod
        .status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget");
    let marked = target.is_some_and(|c| {
        c.status == "True" && c.reason.as_deref() == Some("EvictionByEvictionAPI")
    });
    pod.metadata.deletion_timestamp.is_some() && marked
}

fn untouched(api: &Api, name: &str) -> bool {
    let pod = api.get_pod("default", name).unwrap();
    pod.metadata.deletion_timestamp.is_none()
        && !pod
            .status
            .and_then(|s| s.conditions)
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "DisruptionTarget")
}

#[tokio::test]
async fn an_eviction_spends_one_disruption_then_the_budget_refuses_with_429() {
    let api = Api::in_memory().await.unwrap();
    running_pod(&api, "a", true).await;
    running_pod(&api, "b", true).await;
    budget(&api, "web", 1).await;

    api.evict_pod("default", "a", eviction("a"), false)
        .await
        .unwrap();
    assert!(evicted(&api, "a"));
    let b = api.get_poddisruptionbudget("default", "web").unwrap();
    let status = b.status.unwrap();
    assert_eq!(status.disruptions_allowed, 0);
    assert!(status.disrupted_pods.unwrap().contains_key("a"));
    let condition = &status.conditions.unwrap()[0];
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "InsufficientPods")
    );

    let refused = api
        .evict_pod("default", "b", eviction("b"), false)
        .await
        .unwrap_err();
    assert_eq!(refused.code_and_reason(), (429, "TooManyRequests"));
    assert_eq!(refused.to_string(), VIOLATES);
    assert_eq!(
        refused.to_status()["details"]["causes"][0],
        serde_json::json!({"reason": "DisruptionBudget", "message": "The disruption budget web needs 1 healthy pods and has 2 currently"})
    );
    assert!(untouched(&api, "b"), "a refused eviction changes nothing");
}

#[tokio::test]
async fn unready_pending_and_unbudgeted_pods_go_without_spending_the_budget() {
    let api = Api::in_memory().await.unwrap();
    running_pod(&api, "ready", true).await;
    running_pod(&api, "unready", false).await;
    budget(&api, "web", 0).await;
    // The budget is met (2 healthy of 1 desired): an unready pod may go.
    api.evict_pod("default", "unready", eviction("unready"), false)
        .await
        .unwrap();
    assert!(evicted(&api, "unready"));
    let status = api
        .get_poddisruptionbudget("default", "web")
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        (status.disruptions_allowed, status.disrupted_pods),
        (0, None)
    );
    // A pod no budget selects is deleted whatever the budgets say.
    running_pod(&api, "loner", true).await;
    let mut loner = api.get_pod("default", "loner").unwrap();
    loner.metadata.labels = Some([("app".to_owned(), "db".to_owned())].into());
    api.replace_pod("default", "loner", loner).await.unwrap();
    api.evict_pod("default", "loner", eviction("loner"), false)
        .await
        .unwrap();
    assert!(evicted(&api, "loner"));
}

#[tokio::test]
async fn two_budgets_a_stale_budget_a_dry_run_and_a_wrong_name_are_kube_apiservers_answers() {
    let api = Api::in_memory().await.unwrap();
    running_pod(&api, "a", true).await;
    budget(&api, "one", 1).await;
    // A dry run spends nothing and deletes nothing.
    api.evict_pod("default", "a", eviction("a"), true)
        .await
        .unwrap();
    assert!(untouched(&api, "a"));
    assert_eq!(
        api.get_poddisruptionbudget("default", "one")
            .unwrap()
            .status
            .unwrap()
            .disruptions_allowed,
        1
    );
    // A pod that does not exist.
    let e = api
        .evict_pod("default", "nobody", eviction("nobody"), false)
        .await
        .unwrap_err();
    assert_eq!(
        (e.code_and_reason().0, e.to_string()),
        (404, "pods \"nobody\" not found".to_owned())
    );
    // The names must agree.
    let e = api
        .evict_pod("default", "a", eviction("b"), false)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "name in URL does not match name in Eviction object"
    );
    // A spec the controller has not seen yet: 429 "still being processed".
    let mut b = api.get_poddisruptionbudget("default", "one").unwrap();
    b.spec.as_mut().unwrap().min_available = Some(IntOrString::Int(0));
    api.replace_poddisruptionbudget("default", "one", b)
        .await
        .unwrap();
    let e = api
        .evict_pod("default", "a", eviction("a"), false)
        .await
        .unwrap_err();
    assert_eq!(e.code_and_reason().0, 429);
    assert_eq!(
        e.to_status()["details"]["causes"][0]["message"],
        "The disruption budget one is still being processed by the server."
    );
    // Two budgets select it: 500.
    budget(&api, "two", 1).await;
    let e = api
        .evict_pod("default", "a", eviction("a"), false)
        .await
        .unwrap_err();
    assert_eq!(e.code_and_reason().0, 500);
    assert_eq!(
        e.to_string(),
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
}

#[tokio::test]
async fn a_preempted_pod_is_marked_by_the_scheduler_and_deleted_gracefully_whatever_its_budget() {
    let api = Api::in_memory().await.unwrap();
    running_pod(&api, "a", true).await;
    // The scheduler weighs budgets itself (best effort); the write spends none.
    budget(&api, "web", 0).await;
    let uid = api.get_pod("default", "a").unwrap().metadata.uid.unwrap();

    // Another pod under the name is not the victim: nothing is written.
    let wrong = api
        .preempt_pod("default", "a", "not-its-uid", "default-scheduler")
        .await;
    assert!(matches!(wrong, Err(ApiError::Conflict { .. })), "{wrong:?}");
    assert!(untouched(&api, "a"));

    let gone = api
        .preempt_pod("default", "a", &uid, "default-scheduler")
        .await
        .unwrap();
    assert!(
        gone.metadata.deletion_timestamp.is_some(),
        "a graceful delete"
    );
    assert_eq!(gone.metadata.deletion_grace_period_seconds, Some(30));
    let target = gone
        .status
        .and_then(|s| s.conditions)
        .into_iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")
        .unwrap();
    assert_eq!(target.status, "True");
    assert_eq!(target.reason.as_deref(), Some("PreemptionByScheduler"));
    assert_eq!(
        target.message.as_deref(),
        Some("default-scheduler: preempting to accommodate a higher priority pod")
    );
    let b = api.get_poddisruptionbudget("default", "web").unwrap();
    assert_eq!(b.status.unwrap().disrupted_pods, None);
}
