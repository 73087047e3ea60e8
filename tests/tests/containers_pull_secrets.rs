//! A pod's `imagePullSecrets`: the executor reads each Secret through its
//! `PodObjects` and pulls with its credentials before the agent's own, as
//! kubelet does; a Secret that cannot be read gives kubelet's warning and
//! the pull goes on without it. The executor's runtime runs in-process
//! here (objects from `StaticObjects`), its containers on the embedded
//! runtime of the mesopod binary, against a registry that wants basic auth.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::containers_support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use containers_support::*;
use executor::objects::StaticObjects;
use executor::{PodPlan, PodState, PodUpdate};
use images::ImageGcPolicy;
use images::testing::{AUTH_PASSWORD, AUTH_USER, Registry};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use mesos::proto::TaskId;

fn docker_config(registry: &str, user: &str, password: &str) -> String {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!(r#"{{"auths": {{"{registry}": {{"auth": "{auth}"}}}}}}"#)
}

fn secret(name: &str, type_: &str, key: &str, json: &str) -> Secret {
    Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        type_: Some(type_.into()),
        data: Some(BTreeMap::from([(
            key.to_owned(),
            ByteString(json.as_bytes().to_vec()),
        )])),
        ..Default::default()
    }
}

fn pod(name: &str, image: &str, secrets: &[&str]) -> PodPlan {
    let pod = serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {
            "restartPolicy": "Never",
            "imagePullSecrets": secrets.iter().map(|s| serde_json::json!({"name": s})).collect::<Vec<_>>(),
            "containers": [{"name": "main", "image": image, "command": ["cat", IMAGE_FILE]}]
        }
    });
    PodPlan::from_task_data(Some(&serde_json::to_vec(&pod).unwrap())).unwrap()
}

fn waiting_reason(u: &PodUpdate) -> Option<String> {
    let cs = u.status.as_ref()?.container_statuses.as_ref()?.first()?;
    cs.state.as_ref()?.waiting.as_ref()?.reason.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_pull_secrets_are_tried_before_the_agents_credentials() {
    if !prerequisites(false) {
        return;
    }
    if !images::testing::require(
        "imagePullSecrets",
        Path::new("/usr/bin/docker-registry").exists(),
        "docker-registry (.ci/install-registry.sh)",
    ) {
        return;
    }
    let registry = Registry::start_with_auth().await;
    let image = registry.push("private/app", "1", &test_image()).await;
    let host = registry.host();
    let objects = StaticObjects::default();
    objects.set_secret(secret(
        "wrong",
        "kubernetes.io/dockerconfigjson",
        ".dockerconfigjson",
        &docker_config(&host, AUTH_USER, "not-the-password"),
    ));
    objects.set_secret(secret(
        "regcred",
        "kubernetes.io/dockerconfigjson",
        ".dockerconfigjson",
        &docker_config(&host, AUTH_USER, AUTH_PASSWORD),
    ));
    objects.set_secret(secret(
        "legacy",
        "kubernetes.io/dockercfg",
        ".dockercfg",
        &format!(r#"{{"{host}": {{"username": "{AUTH_USER}", "password": "{AUTH_PASSWORD}"}}}}"#),
    ));
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = in_process::runtime(dir.path(), objects, ImageGcPolicy::default());

    // No secret: the registry refuses the pull, the pod waits in ErrImagePull.
    rt.launch(TaskId::new("t-none"), pod("none", &image, &[]))
        .unwrap();
    let (refused, events) = in_process::until(&mut rx, |u| {
        u.task_id.value == "t-none" && waiting_reason(u).is_some_and(|r| r == "ErrImagePull")
    })
    .await;
    assert_eq!(refused.state, PodState::Starting);
    assert!(
        events
            .iter()
            .any(|e| e.reason == "Failed" && e.message.contains("failed to authorize")),
        "{events:?}"
    );
    assert!(rt.kill(&TaskId::new("t-none"), Some(Duration::ZERO)));

    // A wrong secret, a missing one, then the right one: the pull gets
    // through with the right one and says which secret it could not read.
    rt.launch(
        TaskId::new("t-json"),
        pod("json", &image, &["wrong", "missing", "regcred"]),
    )
    .unwrap();
    let (done, events) = in_process::until(&mut rx, |u| {
        u.task_id.value == "t-json" && u.state.is_terminal()
    })
    .await;
    assert_eq!(done.state, PodState::Finished, "{done:?}");
    let warning = events
        .iter()
        .find(|e| e.reason == "FailedToRetrieveImagePullSecret")
        .expect("the missing secret is named");
    assert_eq!(warning.type_, "Warning");
    assert!(
        warning.message.starts_with(
            "Unable to retrieve some image pull secrets (missing); attempting to pull the image may not succeed."
        ),
        "{warning:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e.reason == "Pulled" && e.message.starts_with("Successfully pulled image")),
        "{events:?}"
    );
    let log = std::fs::read(dir.path().join("sandbox").join(executor::layout::run_log(
        "ns", "json", "uid-json", "main", 0,
    )))
    .unwrap();
    // A last line without a newline is a full CRI line: read back with one.
    assert_eq!(
        executor::logs::cri::texts(&log, Some(executor::logs::cri::Stream::Stdout)),
        format!("{IMAGE_FILE_TEXT}\n")
    );
    // No secret's content reaches an event.
    assert!(
        events
            .iter()
            .all(|e| !e.message.contains(AUTH_PASSWORD) && !e.message.contains("not-the-password")),
        "{events:?}"
    );

    // A legacy .dockercfg Secret works too (pull policy Always: it pulls again).
    let mut legacy = pod("legacy", &image, &["legacy"]);
    legacy.containers[0].pull_policy = images::PullPolicy::Always;
    rt.launch(TaskId::new("t-legacy"), legacy).unwrap();
    let (done, _) = in_process::until(&mut rx, |u| {
        u.task_id.value == "t-legacy" && u.state.is_terminal()
    })
    .await;
    assert_eq!(done.state, PodState::Finished, "{done:?}");

    rt.kill_all(Duration::ZERO);
    rt.wait_all().await;
}
