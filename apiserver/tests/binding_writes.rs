//! What a binding writes besides the pod: the scheduler's `Scheduled` event and its
//! executor's info go in the binding's own transaction, so they exist exactly when
//! the binding does, on the in-memory store and on etcd (where a transaction is one
//! revision).
//! The etcd case needs etcd (`.ci/install-etcd.sh`): skipped without it, failed
//! under `CI=true`.
#![allow(clippy::unwrap_used)]

use crate::common;

use apiserver::{Api, ApiError, Binding};
use common::{api_with_clock, etcd_api_with_clock, pod_yaml};
use k8s_openapi::api::core::v1::{Event, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};
use testkit::etcd::Etcd;

fn binding(pod: &str) -> Binding {
    Binding {
        node_name: "agent-1".into(),
        event: Some(Event {
            metadata: ObjectMeta {
                name: Some(format!("{pod}.scheduled")),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                name: Some(pod.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            reason: Some("Scheduled".into()),
            message: Some(format!("Successfully assigned default/{pod} to agent-1")),
            ..Default::default()
        }),
        meta: vec![(format!("test/executor/{pod}"), b"{\"info\":1}".to_vec())],
        ..Default::default()
    }
}

async fn binding_records_its_event_and_meta_or_nothing(api: &Api) {
    let pod: Pod = serde_yaml_ng::from_str(&pod_yaml("p", "nginx", "app: web")).unwrap();
    let created = api.create_pod("default", pod).await.unwrap();
    let bound = api.bind_pod("default", "p", &binding("p")).await.unwrap();

    let events = api
        .list_events(Some("default"), "", "involvedObject.name=p")
        .unwrap()
        .items;
    assert_eq!(events.len(), 1, "{events:?}");
    let event = &events[0];
    assert_eq!(event.reason.as_deref(), Some("Scheduled"));
    assert_eq!(event.count, Some(1), "defaults as a created event's");
    assert_eq!(
        event.involved_object.resource_version, created.metadata.resource_version,
        "the event names the pod as the binding found it, as kube-scheduler's does"
    );
    assert!(
        bound.metadata.resource_version.is_some(),
        "the bound pod has a resourceVersion"
    );
    assert_eq!(
        api.get_meta("test/executor/p").as_deref(),
        Some(&b"{\"info\":1}"[..])
    );

    // Bound so already (the clock has not moved, so the condition is the same):
    // the pod is not written and no event recorded, but the values still are.
    let again = Binding {
        node_name: "agent-1".into(),
        meta: vec![("test/executor/again".into(), b"2".to_vec())],
        ..Default::default()
    };
    let rebound = api.bind_pod("default", "p", &again).await.unwrap();
    assert_eq!(
        rebound.metadata.resource_version, bound.metadata.resource_version,
        "bound so already: the pod is not written"
    );
    assert_eq!(
        api.get_meta("test/executor/again").as_deref(),
        Some(&b"2"[..])
    );
    let events = api
        .list_events(Some("default"), "", "involvedObject.name=p")
        .unwrap()
        .items;
    assert_eq!(events.len(), 1, "{events:?}");

    // A binding refused (the pod is being deleted) writes neither. The pod is bound
    // once without them first, so that deleting it is graceful and it stays.
    let pod: Pod = serde_yaml_ng::from_str(&pod_yaml("q", "nginx", "app: web")).unwrap();
    api.create_pod("default", pod).await.unwrap();
    let plain = Binding {
        node_name: "agent-1".into(),
        ..Default::default()
    };
    api.bind_pod("default", "q", &plain).await.unwrap();
    api.delete_pod("default", "q", &DeleteOptions::default())
        .await
        .unwrap();
    let terminating = api.get_pod("default", "q").unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let err = api
        .bind_pod("default", "q", &binding("q"))
        .await
        .unwrap_err();
    assert!(matches!(err, ApiError::Conflict { .. }), "{err}");
    let events = api
        .list_events(Some("default"), "", "involvedObject.name=q")
        .unwrap()
        .items;
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(api.get_meta("test/executor/q"), None);
}

/// A pod launched again on its node: the relaunch binding writes the new task's
/// annotations and the hook's labels in one write, only while the pod is that pod
/// (by uid) and bound to that node, and adds no condition or event.
async fn a_relaunch_writes_only_on_the_same_pod_bound_to_its_node(api: &Api) {
    let pod: Pod = serde_yaml_ng::from_str(&pod_yaml("r", "nginx", "app: web")).unwrap();
    let created = api.create_pod("default", pod).await.unwrap();
    let uid = created.metadata.uid.clone();
    let relaunch = |node: &str, uid: Option<String>| Binding {
        node_name: node.into(),
        annotations: [("mesopod.io/task-id".to_string(), "t2".to_string())].into(),
        labels: [("hooked".to_string(), "yes".to_string())].into(),
        uid,
        relaunch: true,
        ..Default::default()
    };
    // Not bound yet: a relaunch is refused.
    let err = api
        .bind_pod("default", "r", &relaunch("agent-1", uid.clone()))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("is not bound to node \"agent-1\""),
        "{err}"
    );
    api.bind_pod("default", "r", &binding("r")).await.unwrap();
    let events = |api: &Api| {
        api.list_events(Some("default"), "", "involvedObject.name=r")
            .unwrap()
            .items
            .len()
    };
    assert_eq!(events(api), 1);
    // Another node, or another uid: refused, nothing written.
    let err = api
        .bind_pod("default", "r", &relaunch("agent-2", uid.clone()))
        .await
        .unwrap_err();
    assert!(matches!(err, ApiError::Conflict { .. }), "{err}");
    let err = api
        .bind_pod("default", "r", &relaunch("agent-1", Some("other".into())))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("Precondition failed: UID in precondition: other"),
        "{err}"
    );
    let stored = api.get_pod("default", "r").unwrap();
    assert!(!stored.metadata.labels.unwrap().contains_key("hooked"));
    // The same pod on its node: annotations and labels, one write, no event.
    let done = api
        .bind_pod("default", "r", &relaunch("agent-1", uid))
        .await
        .unwrap();
    let annotations = done.metadata.annotations.unwrap();
    assert_eq!(annotations["mesopod.io/task-id"], "t2");
    assert_eq!(done.metadata.labels.unwrap()["hooked"], "yes");
    assert_eq!(
        events(api),
        1,
        "a relaunch records no second Scheduled event"
    );
}

#[tokio::test]
async fn on_the_memory_store() {
    let (api, _) = api_with_clock().await;
    binding_records_its_event_and_meta_or_nothing(&api).await;
    a_relaunch_writes_only_on_the_same_pod_bound_to_its_node(&api).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_etcd() {
    let Some(etcd) = Etcd::start("binding_writes_on_etcd").await else {
        return;
    };
    let (api, _) = etcd_api_with_clock(&etcd).await;
    binding_records_its_event_and_meta_or_nothing(&api).await;
    a_relaunch_writes_only_on_the_same_pod_bound_to_its_node(&api).await;
}
