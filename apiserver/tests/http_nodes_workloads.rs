//! ReplicationController (core `v1`) and DaemonSet (`apps/v1`) over HTTP: defaults,
//! kube-apiserver's validation messages and field paths, generation counting spec
//! changes (and a DaemonSet's template generation in its annotation), the `status`
//! subresource, an RC's `scale` subresource, discovery, OpenAPI and the Table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::{Value, json};

const RCS: &str = "/api/v1/namespaces/default/replicationcontrollers";
const DSES: &str = "/apis/apps/v1/namespaces/default/daemonsets";
const MERGE: &str = "application/merge-patch+json";

fn rc(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
            }
        }
    })
}

fn daemonset(name: &str) -> Value {
    apps_workload("DaemonSet", name)
}

fn patch(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

async fn table(server: &Server, path: &str) -> Value {
    reqwest::Client::new()
        .get(format!("{}{path}", server.url))
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn column_names(t: &Value) -> Vec<&str> {
    t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replication_controller_defaults_from_its_template_and_scales() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, r) = http.json("POST", RCS, &rc("old")).await;
    assert_eq!(code, 201, "{r}");
    assert_eq!(r["spec"]["replicas"], 1);
    assert_eq!(r["spec"]["selector"], json!({"app": "old"}));
    assert_eq!(r["metadata"]["labels"], json!({"app": "old"}));
    assert_eq!(r["metadata"]["generation"], 1);
    assert_eq!(r["spec"]["template"]["spec"]["restartPolicy"], "Always");

    // The selector may change (it is not immutable on an RC); labels are not spec.
    let path = format!("{RCS}/old");
    let (_, r) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            patch(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await;
    assert_eq!(r["metadata"]["generation"], 1);
    let (code, r) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            patch(json!({"spec": {"selector": {"app": "old", "v": "2"},
                "template": {"metadata": {"labels": {"app": "old", "v": "2"}}}}})),
        )
        .await;
    assert_eq!(code, 200, "{r}");
    assert_eq!(r["metadata"]["generation"], 2);

    // Status only through /status, which writes nothing else.
    let mut with_status = r.clone();
    with_status["status"] = json!({"replicas": 3, "observedGeneration": 2});
    with_status["spec"]["replicas"] = json!(9);
    let (code, r) = http
        .json("PUT", &format!("{path}/status"), &with_status)
        .await;
    assert_eq!(code, 200, "{r}");
    assert_eq!(
        (
            r["status"]["replicas"].clone(),
            r["spec"]["replicas"].clone()
        ),
        (json!(3), json!(1))
    );
    let (_, r) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            patch(json!({"status": {"replicas": 0}})),
        )
        .await;
    assert_eq!(
        r["status"]["replicas"], 3,
        "the main endpoint keeps the status"
    );

    // Scale, as `kubectl scale rc/old --replicas=4` sends it.
    let (code, scale) = http
        .send(
            "PATCH",
            &format!("{path}/scale"),
            MERGE,
            br#"{"spec":{"replicas":4}}"#.to_vec(),
        )
        .await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["spec"]["replicas"], 4);
    assert_eq!(
        scale["status"],
        json!({"replicas": 3, "selector": "app=old,v=2"})
    );
    let (_, r) = http.get(&path).await;
    assert_eq!(r["spec"]["replicas"], 4);

    let t = table(&server, RCS).await;
    assert_eq!(
        column_names(&t),
        [
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    let cells = &t["rows"][0]["cells"];
    assert_eq!(
        [&cells[0], &cells[1], &cells[2], &cells[3], &cells[7]],
        [
            &json!("old"),
            &json!(4),
            &json!(3),
            &json!(0),
            &json!("app=old,v=2")
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_replication_controllers_are_refused_with_kube_apiservers_messages() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let mut bad = rc("bad");
    bad["spec"]["selector"] = json!({"app": "other"});
    bad["spec"]["replicas"] = json!(-1);
    bad["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
    let (code, status) = http.json("POST", RCS, &bad).await;
    assert_eq!(code, 422, "{status}");
    let got = causes(&status);
    for want in [
        "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
        "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"bad\"}: `selector` does not match template `labels`",
        "spec.template.spec.restartPolicy: Unsupported value: \"OnFailure\": supported values: \"Always\"",
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
            .starts_with("ReplicationController \"bad\" is invalid: "),
        "{status}"
    );
    // No template and no selector: nothing to default the selector from.
    let bare = json!({"apiVersion": "v1", "kind": "ReplicationController",
        "metadata": {"name": "bare"}, "spec": {}});
    let (code, status) = http.json("POST", RCS, &bare).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        [
            "spec.selector: Required value",
            "spec.template: Required value"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemonset_is_defaulted_and_counts_its_template_generation() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, d) = http.json("POST", DSES, &daemonset("agent")).await;
    assert_eq!(code, 201, "{d}");
    assert_eq!(d["metadata"]["generation"], 1);
    assert_eq!(
        d["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
    assert_eq!(
        d["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "1"
    );
    assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Always");

    let path = format!("{DSES}/agent");
    // A spec change that is not the template: the generation moves, the template's not.
    let (_, d) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            patch(json!({"spec": {"minReadySeconds": 5}})),
        )
        .await;
    assert_eq!(d["metadata"]["generation"], 2);
    assert_eq!(
        d["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "1"
    );
    let (_, d) = http
        .send(
            "PATCH",
            &path,
            "application/strategic-merge-patch+json",
            patch(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "main", "image": "busybox:1.37"}]}}}})),
        )
        .await;
    assert_eq!(d["metadata"]["generation"], 3);
    assert_eq!(
        d["metadata"]["annotations"]["deprecated.daemonset.template.generation"],
        "2"
    );
    let (_, d) = http
        .send(
            "PATCH",
            &path,
            MERGE,
            patch(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await;
    assert_eq!(d["metadata"]["generation"], 3, "labels are not spec");

    // Status only through /status; DaemonSets have no scale.
    let mut with_status = d.clone();
    with_status["status"] = json!({"desiredNumberScheduled": 2, "currentNumberScheduled": 1,
        "numberMisscheduled": 0, "numberReady": 1, "observedGeneration": 3});
    with_status["spec"]["minReadySeconds"] = json!(9);
    let (code, d) = http
        .json("PUT", &format!("{path}/status"), &with_status)
        .await;
    assert_eq!(code, 200, "{d}");
    assert_eq!(d["status"]["desiredNumberScheduled"], 2);
    assert_eq!(d["spec"]["minReadySeconds"], 5);
    let (code, _) = http.get(&format!("{path}/scale")).await;
    assert_eq!(code, 404);

    let t = table(&server, DSES).await;
    assert_eq!(
        column_names(&t),
        [
            "Name",
            "Desired",
            "Current",
            "Ready",
            "Up-to-date",
            "Available",
            "Node Selector",
            "Age",
            "Containers",
            "Images",
            "Selector"
        ]
    );
    let cells = &t["rows"][0]["cells"];
    assert_eq!(
        [
            &cells[0], &cells[1], &cells[2], &cells[3], &cells[6], &cells[9]
        ],
        [
            &json!("agent"),
            &json!(2),
            &json!(1),
            &json!(1),
            &json!("<none>"),
            &json!("busybox:1.37")
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_daemonsets_are_refused_with_kube_apiservers_messages() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let mut bad = daemonset("bad");
    bad["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    bad["spec"]["template"]["spec"]["restartPolicy"] = json!("Never");
    bad["spec"]["updateStrategy"] = json!({"type": "Sideways"});
    let (code, status) = http.json("POST", DSES, &bad).await;
    assert_eq!(code, 422, "{status}");
    let got = causes(&status);
    for want in [
        "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match template `labels`",
        "spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"",
        "spec.updateStrategy: Unsupported value: apps.DaemonSetUpdateStrategy{Type:\"Sideways\", RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}: supported values: \"RollingUpdate\", \"OnDelete\"",
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
            .starts_with("DaemonSet.apps \"bad\" is invalid: "),
        "{status}"
    );

    let mut both = daemonset("both");
    both["spec"]["updateStrategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "10%"}});
    let (code, status) = http.json("POST", DSES, &both).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        [
            "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"10%\"}: may not be set when maxUnavailable is non-zero"
        ]
    );
    let mut none = daemonset("none");
    none["spec"]["updateStrategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "0%", "maxSurge": 0}});
    let (code, status) = http.json("POST", DSES, &none).await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        causes(&status),
        [
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0"
        ]
    );
    let mut empty = daemonset("empty");
    empty["spec"]["selector"] = json!({});
    let (code, status) = http.json("POST", DSES, &empty).await;
    assert_eq!(code, 422, "{status}");
    assert!(
        causes(&status)
            .iter()
            .any(|c| c.starts_with("spec.selector: Invalid value: ")
                && c.ends_with(": empty selector is invalid for daemonset")),
        "{status}"
    );

    // Surge alone is accepted; the selector is immutable.
    let mut surge = daemonset("web");
    surge["spec"]["updateStrategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}});
    let (code, created) = http.json("POST", DSES, &surge).await;
    assert_eq!(code, 201, "{created}");
    let mut changed = daemonset("web");
    changed["spec"]["selector"] = json!({"matchLabels": {"app": "web", "v": "2"}});
    changed["spec"]["template"]["metadata"]["labels"] = json!({"app": "web", "v": "2"});
    let (code, status) = http.json("PUT", &format!("{DSES}/web"), &changed).await;
    assert_eq!(code, 422, "{status}");
    assert!(
        causes(&status)[0].starts_with("spec.selector: Invalid value: ")
            && causes(&status)[0].ends_with(": field is immutable"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_and_openapi_list_replication_controllers_and_daemonsets() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let find = |list: &Value, n: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == n)
            .cloned()
            .unwrap_or_else(|| panic!("no {n} in {list}"))
    };
    let (_, core) = http.get("/api/v1").await;
    assert_eq!(
        find(&core, "replicationcontrollers")["shortNames"],
        json!(["rc"])
    );
    let scale = find(&core, "replicationcontrollers/scale");
    assert_eq!(
        (
            scale["group"].clone(),
            scale["version"].clone(),
            scale["kind"].clone()
        ),
        (json!("autoscaling"), json!("v1"), json!("Scale"))
    );
    find(&core, "replicationcontrollers/status");
    let (_, apps) = http.get("/apis/apps/v1").await;
    let ds = find(&apps, "daemonsets");
    assert_eq!(ds["shortNames"], json!(["ds"]));
    assert_eq!(ds["kind"], "DaemonSet");
    find(&apps, "daemonsets/status");
    assert!(
        apps["resources"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["name"] != "daemonsets/scale")
    );

    let (_, v3) = http.get("/openapi/v3/apis/apps/v1").await;
    assert!(
        v3["components"]["schemas"]["io.k8s.api.apps.v1.DaemonSet"].is_object(),
        "no DaemonSet schema"
    );
    let (_, v3) = http.get("/openapi/v3/api/v1").await;
    assert!(
        v3["components"]["schemas"]["io.k8s.api.core.v1.ReplicationController"].is_object(),
        "no ReplicationController schema"
    );

    // Watch: a create shows up as ADDED.
    let (code, d) = http.json("POST", DSES, &daemonset("w")).await;
    assert_eq!(code, 201);
    let rv: u64 = d["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let resp = reqwest::Client::new()
        .get(format!(
            "{}{DSES}?watch=1&resourceVersion={}",
            server.url,
            rv - 1
        ))
        .send()
        .await
        .unwrap();
    let mut stream = resp.bytes_stream();
    use futures::StreamExt as _;
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let ev: Value = serde_json::from_slice(first.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["metadata"]["name"], "w");
}
