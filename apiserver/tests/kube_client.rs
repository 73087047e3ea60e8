//! kube-rs, the Rust Kubernetes client, against the shim: it sends no Accept on GETs,
//! leaves empty query parameters and sends `{}` as a DELETE body.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret};
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_creates_lists_patches_watches_and_deletes() {
    let server = Server::start().await;
    let config = kube::Config::new(server.url.parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "default");

    let pod: Pod =
        serde_yaml_ng::from_str(&pod_yaml("kube-rs", "nginx:1", "made-by: kube-rs")).unwrap();
    let created = pods.create(&PostParams::default(), &pod).await.unwrap();
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    let dup = pods.create(&PostParams::default(), &pod).await.unwrap_err();
    assert!(
        matches!(&dup, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{dup:?}"
    );

    let list = pods
        .list(&ListParams::default().labels("made-by=kube-rs"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    let rv = list.metadata.resource_version.clone().unwrap();

    let mut stream = pods
        .watch(&WatchParams::default().timeout(20), &rv)
        .await
        .unwrap()
        .boxed();
    let patch = serde_json::json!({"metadata": {"labels": {"patched": "yes"}}});
    pods.patch("kube-rs", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    match event {
        WatchEvent::Modified(p) => assert_eq!(p.metadata.labels.unwrap()["patched"], "yes"),
        other => panic!("expected MODIFIED, got {other:?}"),
    }

    let applied: Pod =
        serde_yaml_ng::from_str(&pod_yaml("kube-rs-ssa", "redis", "made-by: kube-rs")).unwrap();
    let ssa = pods
        .patch(
            "kube-rs-ssa",
            &PatchParams::apply("test").force(),
            &Patch::Apply(&applied),
        )
        .await
        .unwrap();
    assert_eq!(ssa.metadata.name.as_deref(), Some("kube-rs-ssa"));

    let event = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(event, WatchEvent::Added(ref p) if p.metadata.name.as_deref() == Some("kube-rs-ssa")),
        "{event:?}"
    );

    pods.delete("kube-rs", &DeleteParams::default())
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(20), stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(event, WatchEvent::Deleted(ref p) if p.metadata.name.as_deref() == Some("kube-rs")),
        "{event:?}"
    );
    let missing = pods.get("kube-rs").await.unwrap_err();
    assert!(
        matches!(&missing, kube::Error::Api(s) if s.code == 404),
        "{missing:?}"
    );

    let nodes: kube::Api<Node> = kube::Api::all(client.clone());
    let listed = nodes.list(&ListParams::default()).await.unwrap();
    assert!(listed.items.is_empty());
    let mut node_watch = nodes
        .watch(
            &WatchParams::default().timeout(20),
            &listed.metadata.resource_version.unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let node: Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "agent-9"}})).unwrap();
    server.api.upsert_node(node).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(20), node_watch.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(
        matches!(event, WatchEvent::Added(ref n) if n.metadata.name.as_deref() == Some("agent-9")),
        "{event:?}"
    );
    let denied = nodes
        .delete("agent-9", &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&denied, kube::Error::Api(s) if s.code == 405),
        "users do not write nodes: {denied:?}"
    );
    drop(node_watch);
    let namespaces: kube::Api<Namespace> = kube::Api::all(client);
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(names, ["default", "kube-public", "kube-system"]);
    drop(stream);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_creates_and_reads_a_config_map_and_a_secret() {
    let server = Server::start().await;
    let config = kube::Config::new(server.url.parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let cms: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "settings"},
        "data": {"mode": "fast"},
        "binaryData": {"blob": "AAEC"},
    }))
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let read = cms.get("settings").await.unwrap();
    assert_eq!(read.data.unwrap()["mode"], "fast");
    assert_eq!(read.binary_data.unwrap()["blob"].0, [0, 1, 2]);
    assert_eq!(
        cms.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    let secrets: kube::Api<Secret> = kube::Api::namespaced(client, "default");
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some("token".into()),
            ..Default::default()
        },
        string_data: Some([("api-key".to_string(), "abc123".to_string())].into()),
        data: Some([("raw".to_string(), ByteString(vec![0xff, 0x00]))].into()),
        ..Default::default()
    };
    let created = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    let read = secrets.get("token").await.unwrap();
    assert!(read.string_data.is_none(), "stringData is write-only");
    let data = read.data.unwrap();
    assert_eq!(data["api-key"].0, b"abc123");
    assert_eq!(data["raw"].0, [0xff, 0x00]);
    secrets
        .delete("token", &DeleteParams::default())
        .await
        .unwrap();
    assert!(secrets.get("token").await.is_err());
    server.stop().await;
}
