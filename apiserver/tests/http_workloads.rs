//! The workload kinds of `apps/v1` over HTTP: defaults, kube-apiserver's validation
//! messages and field paths, `metadata.generation` counting spec changes only, the
//! `status` subresource (the only way to write a status, and it writes nothing else),
//! the `scale` subresource as `autoscaling/v1` Scale, discovery and the Table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::{Value, json};

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const RSES: &str = "/apis/apps/v1/namespaces/default/replicasets";

fn deployment(name: &str) -> Value {
    apps_workload("Deployment", name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_is_defaulted_and_its_generation_counts_spec_changes_only() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, d) = http.json("POST", DEPLOYS, &deployment("web")).await;
    assert_eq!(code, 201, "{d}");
    assert_eq!(d["metadata"]["generation"], 1);
    assert_eq!(d["spec"]["replicas"], 1);
    assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
    assert_eq!(
        d["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    );
    assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );

    // A label is not the spec; replicas are.
    let merge = "application/merge-patch+json";
    let patch = |v: Value| serde_json::to_vec(&v).unwrap();
    let path = format!("{DEPLOYS}/web");
    let (_, d) = http
        .send(
            "PATCH",
            &path,
            merge,
            patch(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await;
    assert_eq!(d["metadata"]["generation"], 1);
    let (_, d) = http
        .send(
            "PATCH",
            &path,
            merge,
            patch(json!({"spec": {"replicas": 3}})),
        )
        .await;
    assert_eq!(d["metadata"]["generation"], 2);
    // An annotation counts for a Deployment, as in kube-apiserver.
    let (_, d) = http
        .send(
            "PATCH",
            &path,
            merge,
            patch(json!({"metadata": {"annotations": {"a": "b"}}})),
        )
        .await;
    assert_eq!(d["metadata"]["generation"], 3);

    // The main endpoint keeps the stored status; /status writes only the status.
    let (_, d) = http
        .send(
            "PATCH",
            &path,
            merge,
            patch(json!({"status": {"replicas": 7}})),
        )
        .await;
    assert!(
        d["status"].is_null() || d["status"]["replicas"].is_null(),
        "{d}"
    );
    let status_patch = json!({"status": {"replicas": 2, "observedGeneration": 3}, "spec": {"replicas": 9}, "metadata": {"labels": {"x": "y"}, "annotations": {"a": "b", "deployment.kubernetes.io/revision": "1"}}});
    let (code, d) = http
        .send(
            "PATCH",
            &format!("{path}/status"),
            merge,
            patch(status_patch),
        )
        .await;
    assert_eq!(code, 200, "{d}");
    assert_eq!(d["status"]["replicas"], 2);
    assert_eq!(d["status"]["observedGeneration"], 3);
    assert_eq!(
        d["spec"]["replicas"], 3,
        "the spec is not written through /status"
    );
    assert_eq!(d["metadata"]["labels"], json!({"team": "a"}));
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "1",
        "annotations do change through /status, without a new generation"
    );
    assert_eq!(d["metadata"]["generation"], 3);
    let (code, d) = http.get(&format!("{path}/status")).await;
    assert_eq!((code, d["status"]["replicas"].clone()), (200, json!(2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_workloads_are_refused_with_kube_apiservers_messages() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let mut d = deployment("bad");
    d["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    d["spec"]["replicas"] = json!(-1);
    d["spec"]["strategy"] = json!({"type": "Sideways"});
    d["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    let (code, status) = http.json("POST", DEPLOYS, &d).await;
    assert_eq!(code, 422, "{status}");
    let got = causes(&status);
    for want in [
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`",
        "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        "spec.strategy.type: Unsupported value: \"Sideways\": supported values: \"Recreate\", \"RollingUpdate\"",
    ] {
        assert!(
            got.iter().any(|g| g == want),
            "missing {want:?} in {got:#?}"
        );
    }
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with("Deployment.apps \"bad\" is invalid: "),
        "{status}"
    );

    let mut d = deployment("zero");
    d["spec"]["strategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "0%"}});
    let (code, status) = http.json("POST", DEPLOYS, &d).await;
    assert_eq!(code, 422);
    assert_eq!(
        causes(&status),
        [
            "spec.strategy.rollingUpdate.maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0"
        ]
    );
    let mut d = deployment("pct");
    d["spec"]["strategy"] = json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "abc"}});
    let (code, status) = http.json("POST", DEPLOYS, &d).await;
    assert_eq!(code, 422);
    assert!(
        causes(&status)[0].starts_with(
            "spec.strategy.rollingUpdate.maxSurge: Invalid value: \"abc\": a valid percent string"
        ),
        "{status}"
    );

    // A container without an image: the pod's own check, under spec.template.
    let mut d = deployment("noimage");
    d["spec"]["template"]["spec"]["containers"][0]["image"] = Value::Null;
    let (code, status) = http.json("POST", DEPLOYS, &d).await;
    assert_eq!(code, 422, "{status}");
    assert!(
        causes(&status)
            .iter()
            .any(|c| c == "spec.template.spec.containers[0].image: Required value"),
        "{status}"
    );

    // The selector is immutable.
    let (code, _) = http.json("POST", DEPLOYS, &deployment("web")).await;
    assert_eq!(code, 201);
    let mut changed = deployment("web");
    changed["spec"]["selector"] = json!({"matchLabels": {"app": "web", "v": "2"}});
    changed["spec"]["template"]["metadata"]["labels"] = json!({"app": "web", "v": "2"});
    let (code, status) = http.json("PUT", &format!("{DEPLOYS}/web"), &changed).await;
    assert_eq!(code, 422, "{status}");
    assert!(
        causes(&status)[0].starts_with("spec.selector: Invalid value: "),
        "{status}"
    );
    assert!(
        causes(&status)[0].ends_with(": field is immutable"),
        "{status}"
    );

    // A ReplicaSet without a selector.
    let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"},
        "spec": {"selector": {}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}});
    let (code, status) = http.json("POST", RSES, &rs).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(causes(&status), ["spec.selector: Required value"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scale_subresource_reads_and_writes_replicas_as_an_autoscaling_v1_scale() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let mut d = deployment("web");
    d["spec"]["replicas"] = json!(2);
    let (code, _) = http.json("POST", DEPLOYS, &d).await;
    assert_eq!(code, 201);
    let path = format!("{DEPLOYS}/web/scale");
    let (code, scale) = http.get(&path).await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 2);
    assert_eq!(
        scale["status"],
        json!({"replicas": 0, "selector": "app=web"})
    );

    // What `kubectl scale` sends.
    let (code, scale) = http
        .send(
            "PATCH",
            &path,
            "application/merge-patch+json",
            br#"{"spec":{"replicas":5}}"#.to_vec(),
        )
        .await;
    assert_eq!(
        (code, scale["spec"]["replicas"].clone()),
        (200, json!(5)),
        "{scale}"
    );
    let (_, d) = http.get(&format!("{DEPLOYS}/web")).await;
    assert_eq!(d["spec"]["replicas"], 5);
    assert_eq!(d["metadata"]["generation"], 2);

    // PUT under a stale resourceVersion is a conflict; under the current one it lands.
    let stale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "resourceVersion": "1"}, "spec": {"replicas": 1}});
    let (code, status) = http.json("PUT", &path, &stale).await;
    assert_eq!(code, 409, "{status}");
    let current = d["metadata"]["resourceVersion"].clone();
    let fresh = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web", "resourceVersion": current}, "spec": {"replicas": 1}});
    let (code, scale) = http.json("PUT", &path, &fresh).await;
    assert_eq!(
        (code, scale["spec"]["replicas"].clone()),
        (200, json!(1)),
        "{scale}"
    );
    // Negative replicas are refused as the object's own validation refuses them.
    let (code, status) = http
        .send(
            "PATCH",
            &path,
            "application/merge-patch+json",
            br#"{"spec":{"replicas":-3}}"#.to_vec(),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    let (code, _) = http.get(&format!("{RSES}/nope/scale")).await;
    assert_eq!(code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_lists_apps_v1_with_its_subresources_and_tables_have_kubectls_columns() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (_, groups) = http.get("/apis").await;
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "apps"),
        "{groups}"
    );
    let (_, list) = http.get("/apis/apps/v1").await;
    let find = |n: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(find("deployments")["shortNames"], json!(["deploy"]));
    assert_eq!(find("replicasets")["shortNames"], json!(["rs"]));
    let scale = find("deployments/scale");
    assert_eq!(
        (
            scale["group"].clone(),
            scale["version"].clone(),
            scale["kind"].clone()
        ),
        (json!("autoscaling"), json!("v1"), json!("Scale"))
    );
    find("replicasets/status");

    let (code, _) = http.json("POST", DEPLOYS, &deployment("web")).await;
    assert_eq!(code, 201);
    let table = "application/json;as=Table;v=v1;g=meta.k8s.io";
    let resp = reqwest::Client::new()
        .get(format!("{}{DEPLOYS}", server.url))
        .header("accept", table)
        .send()
        .await
        .unwrap();
    let t: Value = resp.json().await.unwrap();
    let names: Vec<&str> = t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Ready",
            "Up-to-date",
            "Available",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    let cells = &t["rows"][0]["cells"];
    assert_eq!(cells[0], "web");
    assert_eq!(cells[1], "0/1");
    assert_eq!(cells[6], "busybox:1.36");
    assert_eq!(cells[7], "app=web");
}
