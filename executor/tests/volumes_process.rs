//! Process mode cannot mount: a pod that needs a volume or values from
//! ConfigMaps and Secrets is refused with the reason, never run without
//! them. The ServiceAccount token volume admission adds to every pod is the
//! one exception (process mode is unisolated anyway, and says so).
#![allow(clippy::unwrap_used)]

mod common;

use common::pods::*;
use executor::PodState;
use executor::logs::cri::Stream as LogStream;
use mesos::proto::TaskId;
use serde_json::json;

#[tokio::test]
async fn volumes_and_object_env_are_refused_in_process_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let mut c = sh("c", "true");
    c["volumeMounts"] = json!([{"name": "data", "mountPath": "/data"}]);
    let p = pod_with(
        "vol",
        json!({"volumes": [{"name": "data", "emptyDir": {}}], "containers": [c]}),
    );
    rt.launch(TaskId::new("t-vol"), p).unwrap();
    let u = next(&mut rx).await;
    assert_eq!(u.state, PodState::Error);
    let msg = u.message.unwrap();
    assert!(
        msg.contains("mounts volume \"data\"") && msg.contains("--container-runtime=process"),
        "{msg}"
    );

    let mut c = sh("c", "true");
    c["env"] = json!([{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "k"}}}]);
    rt.launch(TaskId::new("t-env"), pod("env", "Never", json!([c])))
        .unwrap();
    let u = next(&mut rx).await;
    assert_eq!(u.state, PodState::Error);
    assert!(u.message.unwrap().contains("env \"X\""));
}

#[tokio::test]
async fn the_service_account_volume_and_local_env_sources_work_in_process_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let mut c = sh("c", "echo \"$GREETING $APP $MEM\"");
    c["volumeMounts"] = json!([{"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]);
    c["resources"] = json!({"limits": {"memory": "64Mi"}});
    c["env"] = json!([
        {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
        {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
        {"name": "GREETING", "value": "hi $(APP)"}
    ]);
    let p = executor::PodPlan::from_task_data(Some(
        &serde_json::to_vec(&json!({
            "metadata": {"name": "sa", "namespace": "ns", "uid": "uid-sa", "labels": {"app": "shop"}},
            "spec": {"restartPolicy": "Never",
                "volumes": [{"name": "kube-api-access-abcde", "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
                "containers": [c]}
        }))
        .unwrap(),
    ))
    .unwrap();
    rt.launch(TaskId::new("t-sa"), p).unwrap();
    let end = until_terminal(&mut rx).await;
    assert_eq!(end.last().unwrap().state, PodState::Finished, "{end:?}");
    assert_eq!(
        read_log(dir.path(), "sa", "c", LogStream::Stdout),
        "hi shop shop 64\n"
    );
}
