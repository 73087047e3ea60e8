//! `autoscaling/v1` HorizontalPodAutoscalers over HTTP: the stored v2 objects read,
//! written, patched and watched as v1, and back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common;

use common::*;
use futures::StreamExt;
use serde_json::{Value, json};

const V1: &str = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
const V2: &str = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";

fn target() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"})
}

fn v1_hpa(name: &str, cpu: i64) -> Value {
    json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "labels": {"tier": "web"}},
        "spec": {"scaleTargetRef": target(), "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": cpu}})
}

/// A v2 autoscaler v1 cannot say without its annotations: memory and a behavior.
fn v2_memory(name: &str) -> Value {
    json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {"scaleTargetRef": target(), "maxReplicas": 5,
            "metrics": [{"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 30}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_in_v1_it_is_read_in_v2_and_back_in_v1_unchanged() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, created) = http.json("POST", V1, &v1_hpa("web", 50)).await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["apiVersion"], "autoscaling/v1");
    assert_eq!(created["spec"]["targetCPUUtilizationPercentage"], 50);
    assert!(created["metadata"]["annotations"].is_null(), "{created}");

    let (code, v2) = http.get(&format!("{V2}/web")).await;
    assert_eq!(code, 200);
    assert_eq!(
        v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}])
    );
    assert!(v2["metadata"]["annotations"].is_null(), "{v2}");
    let (code, v1) = http.get(&format!("{V1}/web")).await;
    assert_eq!(code, 200);
    assert_eq!(v1, created);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v2_object_put_back_unchanged_through_v1_is_unchanged() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, stored) = http.json("POST", V2, &v2_memory("mem")).await;
    assert_eq!(code, 201, "{stored}");
    let (_, v1) = http.get(&format!("{V1}/mem")).await;
    let annotations = &v1["metadata"]["annotations"];
    let metrics: Value = serde_json::from_str(annotations[METRICS].as_str().unwrap()).unwrap();
    assert_eq!(
        metrics,
        json!([{"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "100Mi"}}])
    );
    assert!(annotations[BEHAVIOR].is_string(), "{v1}");
    assert!(v1["spec"]["targetCPUUtilizationPercentage"].is_null());

    let (code, put) = http.json("PUT", &format!("{V1}/mem"), &v1).await;
    assert_eq!(code, 200, "{put}");
    assert_eq!(put, v1);
    let (_, after) = http.get(&format!("{V2}/mem")).await;
    assert_eq!(
        after, stored,
        "nothing changed, the annotations did not leak"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_select_and_page_in_v1_and_the_table_is_v2s() {
    let server = Server::start().await;
    let http = Http::new(&server);
    for name in ["a", "b"] {
        assert_eq!(http.json("POST", V1, &v1_hpa(name, 60)).await.0, 201);
    }
    assert_eq!(http.json("POST", V2, &v2_memory("c")).await.0, 201);

    let (code, list) = http.get(&format!("{V1}?labelSelector=tier%3Dweb")).await;
    assert_eq!(code, 200, "{list}");
    assert_eq!(list["apiVersion"], "autoscaling/v1");
    assert_eq!(list["kind"], "HorizontalPodAutoscalerList");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(|i| i["apiVersion"] == "autoscaling/v1"
        && i["spec"]["targetCPUUtilizationPercentage"] == 60));

    let (_, all) = http
        .get("/apis/autoscaling/v1/horizontalpodautoscalers")
        .await;
    assert_eq!(all["items"].as_array().unwrap().len(), 3);
    let (_, page) = http.get(&format!("{V1}?limit=2")).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 2);
    let token = page["metadata"]["continue"].as_str().unwrap();
    let (_, rest) = http.get(&format!("{V1}?limit=2&continue={token}")).await;
    assert_eq!(rest["items"][0]["metadata"]["name"], "c");
    assert!(rest["items"][0]["metadata"]["annotations"][METRICS].is_string());

    let rows = |url: String| async move {
        let resp = reqwest::Client::new()
            .get(url)
            .header("accept", TABLE)
            .send()
            .await
            .unwrap();
        let t: Value = resp.json().await.unwrap();
        (
            t["columnDefinitions"].clone(),
            t["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["cells"].clone())
                .collect::<Vec<_>>(),
        )
    };
    let v1_rows = rows(format!("{}{V1}", server.url)).await;
    let v2_rows = rows(format!("{}{V2}", server.url)).await;
    assert_eq!(v1_rows, v2_rows);
    assert_eq!(v1_rows.1[0][2], "cpu: <unknown>/60%");
    assert_eq!(v1_rows.1[2][2], "memory: <unknown>/100Mi");
    server.stop().await;
}

/// The first `n` events of a watch.
async fn watch_lines(url: &str, n: usize) -> Vec<Value> {
    testkit::init_crypto();
    let resp = reqwest::Client::new().get(url).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut stream = resp.bytes_stream();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while out.len() < n {
            let chunk = stream.next().await.unwrap().unwrap();
            buf.extend_from_slice(&chunk);
            while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                out.push(serde_json::from_slice(&line).unwrap());
            }
        }
    })
    .await
    .expect("watch events in time");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_watch_sees_v2_writes_as_v1() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (_, list) = http.get(V1).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(http.json("POST", V2, &v2_memory("mem")).await.0, 201);
    let patch = json!({"spec": {"maxReplicas": 7}});
    let (code, _) = http
        .send(
            "PATCH",
            &format!("{V2}/mem"),
            "application/merge-patch+json",
            serde_json::to_vec(&patch).unwrap(),
        )
        .await;
    assert_eq!(code, 200);
    let events = watch_lines(
        &format!("{}{V1}?watch=true&resourceVersion={rv}", server.url),
        2,
    )
    .await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[1]["type"], "MODIFIED");
    for e in &events {
        assert_eq!(e["object"]["apiVersion"], "autoscaling/v1");
        assert!(e["object"]["metadata"]["annotations"][METRICS].is_string());
    }
    assert_eq!(events[1]["object"]["spec"]["maxReplicas"], 7);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patches_apply_to_the_v1_view_and_keep_what_v1_cannot_say() {
    let server = Server::start().await;
    let http = Http::new(&server);
    assert_eq!(http.json("POST", V2, &v2_memory("mem")).await.0, 201);
    let merge = json!({"spec": {"targetCPUUtilizationPercentage": 70}});
    let (code, patched) = http
        .send(
            "PATCH",
            &format!("{V1}/mem"),
            "application/merge-patch+json",
            serde_json::to_vec(&merge).unwrap(),
        )
        .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["apiVersion"], "autoscaling/v1");
    assert_eq!(patched["spec"]["targetCPUUtilizationPercentage"], 70);
    let (_, v2) = http.get(&format!("{V2}/mem")).await;
    let metrics = v2["spec"]["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), 2, "{v2}");
    assert_eq!(metrics[0]["resource"]["name"], "memory");
    assert_eq!(metrics[1]["resource"]["target"]["averageUtilization"], 70);
    assert_eq!(
        v2["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        30
    );
    assert!(v2["metadata"]["annotations"].is_null(), "{v2}");

    let ops = json!([{"op": "replace", "path": "/spec/maxReplicas", "value": 8}]);
    let (code, patched) = http
        .send(
            "PATCH",
            &format!("{V1}/mem"),
            "application/json-patch+json",
            serde_json::to_vec(&ops).unwrap(),
        )
        .await;
    assert_eq!(code, 200, "{patched}");
    let smp = json!({"spec": {"minReplicas": 2}});
    let (code, patched) = http
        .send(
            "PATCH",
            &format!("{V1}/mem"),
            "application/strategic-merge-patch+json",
            serde_json::to_vec(&smp).unwrap(),
        )
        .await;
    assert_eq!(code, 200, "{patched}");
    let (_, v2) = http.get(&format!("{V2}/mem")).await;
    assert_eq!(
        (
            v2["spec"]["minReplicas"].as_i64(),
            v2["spec"]["maxReplicas"].as_i64()
        ),
        (Some(2), Some(8))
    );
    assert_eq!(v2["spec"]["metrics"].as_array().unwrap().len(), 2);

    // Removing the annotation through v1 removes the metrics it held.
    let drop_metrics = json!({"metadata": {"annotations": {METRICS: null}}});
    let (code, _) = http
        .send(
            "PATCH",
            &format!("{V1}/mem"),
            "application/merge-patch+json",
            serde_json::to_vec(&drop_metrics).unwrap(),
        )
        .await;
    assert_eq!(code, 200);
    let (_, v2) = http.get(&format!("{V2}/mem")).await;
    assert_eq!(v2["spec"]["metrics"].as_array().unwrap().len(), 1, "{v2}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_v1_put_is_a_conflict_and_unknown_fields_are_refused_as_kube_does() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (_, created) = http.json("POST", V1, &v1_hpa("web", 50)).await;
    let mut stale = created.clone();
    let bump = json!({"spec": {"maxReplicas": 4}});
    http.send(
        "PATCH",
        &format!("{V2}/web"),
        "application/merge-patch+json",
        serde_json::to_vec(&bump).unwrap(),
    )
    .await;
    stale["spec"]["maxReplicas"] = json!(9);
    let (code, status) = http.json("PUT", &format!("{V1}/web"), &stale).await;
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        "Operation cannot be fulfilled on horizontalpodautoscalers.autoscaling \"web\": the object has been modified; please apply your changes to the latest version and try again"
    );

    let mut unknown = v1_hpa("odd", 50);
    unknown["spec"]["foo"] = json!(1);
    let (code, status) = http
        .json("POST", &format!("{V1}?fieldValidation=Strict"), &unknown)
        .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "HorizontalPodAutoscaler in version \"v1\" cannot be handled as a HorizontalPodAutoscaler: strict decoding error: unknown field \"spec.foo\""
    );
    // The v2 field is unknown to v1 too.
    let mut v2_field = v1_hpa("odd", 50);
    v2_field["spec"]["metrics"] = json!([]);
    let (code, status) = http
        .json("POST", &format!("{V1}?fieldValidation=Strict"), &v2_field)
        .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(http.get(&format!("{V1}/odd")).await.0, 404);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_status_and_deletes_go_through_v1() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, dry) = http
        .json("POST", &format!("{V1}?dryRun=All"), &v1_hpa("web", 50))
        .await;
    assert_eq!(code, 201, "{dry}");
    assert_eq!(dry["apiVersion"], "autoscaling/v1");
    assert_eq!(
        http.get(&format!("{V1}/web")).await.0,
        404,
        "dry run stores nothing"
    );

    let (_, created) = http.json("POST", V1, &v1_hpa("web", 50)).await;
    let mut status = created.clone();
    status["status"] =
        json!({"currentReplicas": 2, "desiredReplicas": 2, "currentCPUUtilizationPercentage": 40});
    let (code, written) = http.json("PUT", &format!("{V1}/web/status"), &status).await;
    assert_eq!(code, 200, "{written}");
    assert_eq!(written["status"]["currentCPUUtilizationPercentage"], 40);
    let (_, v2) = http.get(&format!("{V2}/web/status")).await;
    assert_eq!(
        v2["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"],
        40
    );
    let (_, v1_status) = http.get(&format!("{V1}/web/status")).await;
    assert_eq!(v1_status["status"], written["status"]);

    let (code, gone) = http
        .send("DELETE", &format!("{V1}/web"), "", Vec::new())
        .await;
    assert_eq!(code, 200, "{gone}");
    assert_eq!(gone["kind"], "Status");
    assert_eq!(gone["details"]["group"], "autoscaling");
    assert_eq!(http.json("POST", V1, &v1_hpa("x", 50)).await.0, 201);
    let (code, deleted) = http.send("DELETE", V1, "", Vec::new()).await;
    assert_eq!(code, 200, "{deleted}");
    assert_eq!(deleted["apiVersion"], "autoscaling/v1");
    assert_eq!(deleted["items"][0]["metadata"]["name"], "x");
    assert_eq!(http.get(V2).await.1["items"], json!([]));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_and_openapi_list_v1_beside_the_preferred_v2() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (_, group) = http.get("/apis/autoscaling").await;
    let versions: Vec<_> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].clone())
        .collect();
    assert_eq!(versions, ["v2", "v1"]);
    assert_eq!(group["preferredVersion"]["version"], "v2");
    let (_, groups) = http.get("/apis").await;
    let listed = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "autoscaling")
        .unwrap();
    assert_eq!(
        listed,
        &json!({"name": "autoscaling", "versions": group["versions"], "preferredVersion": group["preferredVersion"]})
    );
    let (code, v1) = http.get("/apis/autoscaling/v1").await;
    assert_eq!(code, 200);
    let names: Vec<_> = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].clone())
        .collect();
    assert_eq!(
        names,
        [
            "horizontalpodautoscalers",
            "horizontalpodautoscalers/status"
        ]
    );
    assert_eq!(v1["resources"][0]["shortNames"], json!(["hpa"]));
    assert_eq!(v1["resources"][0]["categories"], json!(["all"]));

    let (code, doc) = http.get("/openapi/v3/apis/autoscaling/v1").await;
    assert_eq!(code, 200);
    let schema = &doc["components"]["schemas"]["io.k8s.api.autoscaling.v1.HorizontalPodAutoscaler"];
    assert_eq!(
        schema["x-kubernetes-group-version-kind"],
        json!([{"group": "autoscaling", "kind": "HorizontalPodAutoscaler", "version": "v1"}])
    );
    let (_, index) = http.get("/openapi/v3").await;
    assert!(index["paths"]["apis/autoscaling/v1"].is_object(), "{index}");
    server.stop().await;
}
