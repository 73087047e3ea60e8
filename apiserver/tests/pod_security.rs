//! Pod Security Admission over HTTP where kubectl does not easily go: pod updates are
//! evaluated only when they change the containers' images, a namespace PUT keeps its
//! finalizers and status, and the refusal is kube-apiserver's 403 Status.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::{Value, json};

fn host_pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "busybox:1"}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_updates_are_admitted_by_what_they_change() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, _) = http
        .json(
            "POST",
            "/api/v1/namespaces",
            &json!({"metadata": {"name": "team"}}),
        )
        .await;
    assert_eq!(code, 201);
    let pods = "/api/v1/namespaces/team/pods";
    let (code, _) = http.json("POST", pods, &host_pod("x")).await;
    assert_eq!(code, 201);

    // PUT of the namespace with a new label: finalizers and status are kept.
    let (_, mut ns) = http.get("/api/v1/namespaces/team").await;
    ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = json!("baseline");
    ns["spec"] = json!({});
    ns["status"] = json!({"phase": "Terminating"});
    let (code, body) = http.json("PUT", "/api/v1/namespaces/team", &ns).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["spec"]["finalizers"], json!(["kubernetes"]), "{body}");
    assert_eq!(body["status"]["phase"], "Active", "{body}");

    // A label-only update of the violating pod is not evaluated...
    let (code, body) = http
        .send(
            "PATCH",
            &format!("{pods}/x"),
            "application/merge-patch+json",
            br#"{"metadata":{"labels":{"a":"b"}}}"#.to_vec(),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    // ... a new image is.
    let (code, body) = http
        .send(
            "PATCH",
            &format!("{pods}/x"),
            "application/strategic-merge-patch+json",
            br#"{"spec":{"containers":[{"name":"c","image":"busybox:2"}]}}"#.to_vec(),
        )
        .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["kind"], "Status");
    assert_eq!(body["reason"], "Forbidden");
    assert_eq!(
        body["message"],
        "pods \"x\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostNetwork=true)"
    );
    let (_, stored) = http.get(&format!("{pods}/x")).await;
    assert_eq!(stored["spec"]["containers"][0]["image"], "busybox:1");
    assert_eq!(stored["metadata"]["labels"]["a"], "b");

    // A dry run is admitted as a real create is.
    let (code, body) = http
        .json("POST", &format!("{pods}?dryRun=All"), &host_pod("y"))
        .await;
    assert_eq!(code, 403, "{body}");
}
