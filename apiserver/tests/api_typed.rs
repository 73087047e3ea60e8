//! The in-process API the framework uses: binding, status, graceful deletion by the
//! injected clock, finalization, nodes, events, typed watches, meta values.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use apiserver::{ApiError, Binding, Clock, EventKind, Finalized};
use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ObjectMeta};

fn pod(name: &str) -> Pod {
    serde_yaml_ng::from_str(&pod_yaml(name, "nginx", "app: web")).unwrap()
}

fn bind_to(node: &str) -> Binding {
    Binding {
        node_name: node.into(),
        annotations: BTreeMap::from([("mesopod.io/task-id".to_string(), "t-1".to_string())]),
        ..Default::default()
    }
}

#[tokio::test]
async fn binding_sets_node_annotations_and_condition_at_once_and_refuses_another_node() {
    let (api, _) = api_with_clock().await;
    api.create_pod("default", pod("b")).await.unwrap();
    let created = api.get_pod("default", "b").unwrap();
    let bound = api
        .bind_pod("default", "b", &bind_to("agent-1"))
        .await
        .unwrap();
    assert_eq!(
        api.get_pod("default", "b").unwrap(),
        bound,
        "writes return the object as stored"
    );
    assert_ne!(
        created.metadata.resource_version,
        bound.metadata.resource_version
    );
    assert_eq!(
        bound.spec.as_ref().unwrap().node_name.as_deref(),
        Some("agent-1")
    );
    assert_eq!(
        bound.metadata.annotations.as_ref().unwrap()["mesopod.io/task-id"],
        "t-1"
    );
    let cond = &bound.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
    assert_eq!(
        (cond.type_.as_str(), cond.status.as_str()),
        ("PodScheduled", "True")
    );

    let again = api
        .bind_pod("default", "b", &bind_to("agent-1"))
        .await
        .unwrap();
    assert_eq!(
        again.metadata.resource_version, bound.metadata.resource_version,
        "rebinding to the same node is a no-op"
    );
    let err = api
        .bind_pod("default", "b", &bind_to("agent-2"))
        .await
        .unwrap_err();
    assert!(matches!(err, ApiError::Conflict { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("already assigned to node \"agent-1\"")
    );

    let unbound = api
        .list_pods(Some("default"), "", "spec.nodeName=")
        .unwrap();
    assert!(unbound.items.is_empty());
    let on_node = api
        .list_pods(
            None,
            "app=web",
            "spec.nodeName=agent-1,status.phase!=Succeeded",
        )
        .unwrap();
    assert_eq!(on_node.items.len(), 1);
}

#[tokio::test]
async fn status_updates_keep_spec_and_user_updates_keep_status() {
    let (api, _) = api_with_clock().await;
    api.create_pod("default", pod("s")).await.unwrap();
    let status = PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let p = api
        .update_pod_status("default", "s", status.clone())
        .await
        .unwrap();
    assert_eq!(api.get_pod("default", "s").unwrap(), p);
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    let bad = PodStatus {
        phase: Some("Exploded".into()),
        ..Default::default()
    };
    assert!(matches!(
        api.update_pod_status("default", "s", bad).await,
        Err(ApiError::Invalid { .. })
    ));

    let mut user = api.get_pod("default", "s").unwrap();
    user.status = Some(PodStatus {
        phase: Some("Failed".into()),
        ..Default::default()
    });
    user.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
    let p = api.replace_pod("default", "s", user.clone()).await.unwrap();
    assert_eq!(
        p.status.unwrap().phase.as_deref(),
        Some("Running"),
        "the main resource ignores status"
    );
    let stale = api.replace_pod("default", "s", user).await.unwrap_err();
    assert!(
        matches!(stale, ApiError::Conflict { .. }),
        "a stale resourceVersion is refused: {stale}"
    );
}

#[tokio::test]
async fn the_schedulers_status_write_sees_metadata_and_status_and_writes_only_changes() {
    let (api, _) = api_with_clock().await;
    api.create_pod("default", pod("w")).await.unwrap();
    let created = api.get_pod("default", "w").unwrap();
    let running = PodStatus {
        phase: Some("Running".into()),
        ..Default::default()
    };

    // The closure sees the stored uid and status; its answer is written.
    let write = api
        .update_pod_status_with("default", "w", |head| {
            assert_eq!(head.metadata.uid, created.metadata.uid);
            assert_eq!(head.status, created.status);
            Some(running.clone())
        })
        .await
        .unwrap();
    let stored = api.get_pod("default", "w").unwrap();
    assert_eq!(
        write.written.map(|rv| rv.to_string()),
        stored.metadata.resource_version
    );
    assert_eq!(stored.status, Some(running.clone()));
    assert_eq!(stored.spec, created.spec, "the spec is untouched");

    // The same status again, or a declined write, changes nothing.
    let again = api
        .update_pod_status_with("default", "w", |_| Some(running.clone()))
        .await
        .unwrap();
    assert_eq!(again.written, None);
    assert_eq!(again.before.status, Some(running.clone()));
    let declined = api
        .update_pod_status_with("default", "w", |_| None)
        .await
        .unwrap();
    assert_eq!(declined.written, None);
    assert_eq!(api.get_pod("default", "w").unwrap(), stored);

    // Validation as on the status subresource; a missing pod is 404.
    let bad = api
        .update_pod_status_with("default", "w", |_| {
            Some(PodStatus {
                phase: Some("Exploded".into()),
                ..Default::default()
            })
        })
        .await;
    assert!(matches!(bad, Err(ApiError::Invalid { .. })), "{bad:?}");
    let gone = api
        .update_pod_status_with("default", "nope", |_| Some(running.clone()))
        .await;
    assert!(matches!(gone, Err(ApiError::NotFound { .. })), "{gone:?}");
}

#[tokio::test]
async fn a_bound_pod_waits_for_finalize_or_its_grace_period_by_the_injected_clock() {
    let (api, clock) = api_with_clock().await;
    for name in ["f", "g", "u"] {
        api.create_pod("default", pod(name)).await.unwrap();
    }
    api.bind_pod("default", "f", &bind_to("n")).await.unwrap();
    api.bind_pod("default", "g", &bind_to("n")).await.unwrap();
    let rv = api.resource_version();
    let mut watch = api.watch_pods(Some("default"), rv).unwrap();

    let unbound = api
        .delete_pod("default", "u", &DeleteOptions::default())
        .await
        .unwrap();
    assert!(unbound.metadata.deletion_timestamp.is_none());
    assert!(
        api.get_pod("default", "u").is_err(),
        "an unbound pod goes at once"
    );

    let marked = api
        .delete_pod("default", "f", &DeleteOptions::default())
        .await
        .unwrap();
    assert_eq!(marked.metadata.deletion_grace_period_seconds, Some(30));
    assert!(
        api.get_pod("default", "f")
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    let short = DeleteOptions {
        grace_period_seconds: Some(5),
        ..Default::default()
    };
    api.delete_pod("default", "g", &short).await.unwrap();

    let other_uid = api
        .finalize_pod("default", "f", Some("not-its-uid"))
        .await
        .unwrap();
    assert_eq!(other_uid, Finalized::Gone, "a uid mismatch removes nothing");
    assert_eq!(
        api.finalize_pod("default", "f", marked.metadata.uid.as_deref())
            .await
            .unwrap(),
        Finalized::Removed
    );
    assert_eq!(
        api.finalize_pod("default", "f", None).await.unwrap(),
        Finalized::Gone
    );

    assert_eq!(
        api.expire_deletions(clock.now()).await.unwrap(),
        0,
        "grace not over yet"
    );
    clock.advance(Duration::from_secs(6));
    assert_eq!(api.expire_deletions(clock.now()).await.unwrap(), 1);
    assert!(api.get_pod("default", "g").is_err());

    let mut seen = Vec::new();
    while seen.len() < 5 {
        let ev = tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        seen.push((ev.kind, ev.object.metadata.name.unwrap()));
    }
    let expected = [
        (EventKind::Deleted, "u"),
        (EventKind::Modified, "f"),
        (EventKind::Modified, "g"),
        (EventKind::Deleted, "f"),
        (EventKind::Deleted, "g"),
    ];
    assert_eq!(seen, expected.map(|(k, n)| (k, n.to_string())));
}

#[tokio::test]
async fn nodes_keep_their_identity_across_upserts_and_meta_values_persist() {
    let (api, _) = api_with_clock().await;
    let node = Node {
        metadata: ObjectMeta {
            name: Some("agent-1".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let first = api.upsert_node(node.clone()).await.unwrap();
    let mut changed = node.clone();
    changed.metadata.labels = Some(BTreeMap::from([("zone".to_string(), "a".to_string())]));
    let second = api.upsert_node(changed).await.unwrap();
    assert_eq!(first.metadata.uid, second.metadata.uid);
    assert_ne!(
        first.metadata.resource_version,
        second.metadata.resource_version
    );
    assert_eq!(api.list_nodes("zone=a", "").unwrap().items.len(), 1);
    let bad = Node {
        metadata: ObjectMeta {
            name: Some("Bad Name".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(matches!(
        api.upsert_node(bad).await,
        Err(ApiError::Invalid { .. })
    ));
    api.delete_node("agent-1").await.unwrap();
    assert!(matches!(
        api.delete_node("agent-1").await,
        Err(ApiError::NotFound { .. })
    ));

    api.put_meta("framework-id", b"abc".to_vec()).await.unwrap();
    assert_eq!(api.get_meta("framework-id").as_deref(), Some(&b"abc"[..]));
}

#[tokio::test]
async fn repeated_events_update_in_place_and_old_events_expire_after_their_ttl() {
    let (api, clock) = api_with_clock().await;
    let event: k8s_openapi::api::core::v1::Event = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p.1"},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "FailedScheduling", "message": "no offer fits"}))
    .unwrap();
    let first = api.create_event("default", event).await.unwrap();
    assert_eq!(
        (first.count, first.type_.as_deref()),
        (Some(1), Some("Normal"))
    );
    let mut again = first.clone();
    again.count = Some(2);
    let second = api.update_event("default", again.clone()).await.unwrap();
    assert_eq!(
        (second.count, &second.metadata.uid),
        (Some(2), &first.metadata.uid)
    );
    assert!(matches!(
        api.update_event("default", again).await,
        Err(ApiError::Conflict { .. })
    ));

    clock.advance(apiserver::EVENT_TTL - Duration::from_secs(1));
    assert_eq!(api.expire_events(clock.now()).await.unwrap(), 0);
    clock.advance(Duration::from_secs(2));
    assert_eq!(api.expire_events(clock.now()).await.unwrap(), 1);
    assert!(api.list_events(None, "", "").unwrap().items.is_empty());
}

#[tokio::test]
async fn only_events_past_their_ttl_expire_whatever_their_order() {
    let (api, clock) = api_with_clock().await;
    let event = |name: &str| -> k8s_openapi::api::core::v1::Event {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Scheduled", "message": "assigned"}))
        .unwrap()
    };
    // Named so that the newer event comes first in the store's key order.
    api.create_event("default", event("z-old")).await.unwrap();
    clock.advance(apiserver::EVENT_TTL / 2);
    api.create_event("default", event("a-new")).await.unwrap();
    clock.advance(apiserver::EVENT_TTL / 2 + Duration::from_secs(1));
    assert_eq!(api.expire_events(clock.now()).await.unwrap(), 1);
    let left: Vec<_> = api
        .list_events(None, "", "")
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.metadata.name)
        .collect();
    assert_eq!(left, ["a-new"]);
}

#[tokio::test]
async fn absurd_grace_periods_are_bounded_instead_of_overflowing() {
    let (api, clock) = api_with_clock().await;
    api.create_pod("default", pod("forever")).await.unwrap();
    api.bind_pod("default", "forever", &bind_to("n"))
        .await
        .unwrap();
    let huge = DeleteOptions {
        grace_period_seconds: Some(i64::MAX),
        ..Default::default()
    };
    let marked = api.delete_pod("default", "forever", &huge).await.unwrap();
    assert_eq!(
        marked.metadata.deletion_grace_period_seconds,
        Some(365 * 24 * 3600)
    );
    assert_eq!(
        api.expire_deletions(clock.now()).await.unwrap(),
        0,
        "the pod is not expired at once"
    );
}

/// Five random characters collide about 14 times in 20,000 names; kube-apiserver
/// (RetryGenerateName) draws a new name for a create that hit a taken one, so every
/// create with `generateName` succeeds and none is refused `AlreadyExists`.
#[tokio::test]
async fn generated_names_that_collide_are_drawn_again() {
    const PODS: usize = 20_000;
    let (api, _) = api_with_clock().await;
    let template = {
        let mut p = pod("unused");
        p.metadata.name = None;
        p.metadata.generate_name = Some("web-".into());
        p
    };
    let names: Vec<String> = futures::stream::iter(0..PODS)
        .map(|_| {
            let api = api.clone();
            let p = template.clone();
            async move { api.create_pod("default", p).await }
        })
        .buffer_unordered(256)
        .map(|r| {
            r.expect("a create with generateName")
                .metadata
                .name
                .unwrap()
        })
        .collect()
        .await;
    let distinct: std::collections::HashSet<&String> = names.iter().collect();
    assert_eq!(distinct.len(), PODS);
    assert!(names.iter().all(|n| n.len() == "web-".len() + 5));
    assert_eq!(
        api.list_pods(Some("default"), "", "").unwrap().items.len(),
        PODS
    );
}
