//! The routes: `metrics.k8s.io/v1beta1` as metrics-server serves it (discovery,
//! `get` and `list` of `nodes` and `pods`, Tables), and the executors' push.

use std::collections::HashSet;
use std::time::SystemTime;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use k8s_openapi::api::core::v1::{Node, Pod};
use serde_json::{Value, json};

use super::rate::{cpu_quantity, memory_quantity};
use super::store::{NodeUsage, PodUsage};
use super::{GROUP, VERSION, push};
use crate::api::Api;
use crate::error::ApiError;
use crate::http::extract::{ApiPath, Format, Params, negotiate, read_body};
use crate::http::respond::json;

/// The group version, as objects name it.
fn api_version() -> String {
    format!("{GROUP}/{VERSION}")
}

/// The resource a 404 names, as metrics-server's (`podmetrics.metrics.k8s.io`).
const POD_METRICS: &str = "podmetrics.metrics.k8s.io";
/// As [`POD_METRICS`], for nodes.
const NODE_METRICS: &str = "nodemetrics.metrics.k8s.io";

/// The routes of this module.
pub(crate) fn routes() -> Router<Api> {
    let base = format!("/apis/{GROUP}/{VERSION}");
    Router::new()
        .route(&format!("/apis/{GROUP}"), get(group))
        .route(&base, get(resources))
        .route(&format!("{base}/nodes"), get(list_nodes))
        .route(&format!("{base}/nodes/{{name}}"), get(get_node))
        .route(&format!("{base}/pods"), get(list_all_pods))
        .route(&format!("{base}/namespaces/{{ns}}/pods"), get(list_pods))
        .route(
            &format!("{base}/namespaces/{{ns}}/pods/{{name}}"),
            get(get_pod),
        )
        .route("/api/v1/nodes/{name}/metrics", post(receive))
}

/// This group in `/apis`'s list.
pub(crate) fn api_group() -> Value {
    let v = json!({"groupVersion": api_version(), "version": VERSION});
    json!({"name": GROUP, "versions": [v], "preferredVersion": v})
}

async fn group() -> Response {
    let mut g = api_group();
    g["kind"] = "APIGroup".into();
    g["apiVersion"] = "v1".into();
    json(StatusCode::OK, &g)
}

/// `GET /apis/metrics.k8s.io/v1beta1`: metrics-server's two resources, read only.
async fn resources() -> Response {
    json(
        StatusCode::OK,
        &json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": api_version(),
            "resources": [
                {"name": "nodes", "singularName": "", "namespaced": false, "kind": "NodeMetrics", "verbs": ["get", "list"]},
                {"name": "pods", "singularName": "", "namespaced": true, "kind": "PodMetrics", "verbs": ["get", "list"]},
            ],
        }),
    )
}

/// metav1.Time of Unix nanoseconds: RFC 3339 in whole seconds.
fn time(unix_nanos: i128) -> String {
    let secs = i64::try_from(unix_nanos.div_euclid(1_000_000_000)).unwrap_or_default();
    jiff::Timestamp::from_second(secs)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

fn now_time(now: SystemTime) -> String {
    jiff::Timestamp::try_from(now)
        .map(|t| {
            jiff::Timestamp::from_second(t.as_second())
                .unwrap_or(t)
                .to_string()
        })
        .unwrap_or_default()
}

fn window(w: std::time::Duration) -> String {
    crate::protobuf::go_duration(i64::try_from(w.as_nanos()).unwrap_or(i64::MAX))
}

fn node_metrics(node: &Node, u: &NodeUsage, now: SystemTime) -> Value {
    json!({
        "kind": "NodeMetrics",
        "apiVersion": api_version(),
        "metadata": {
            "name": node.metadata.name,
            "creationTimestamp": now_time(now),
            "labels": node.metadata.labels.clone().unwrap_or_default(),
        },
        "timestamp": time(u.at_unix_nanos),
        "window": window(u.window),
        "usage": {"cpu": cpu_quantity(u.nanocores), "memory": memory_quantity(u.memory_bytes)},
    })
}

fn pod_metrics(pod: &Pod, u: &PodUsage, now: SystemTime) -> Value {
    let containers: Vec<Value> = u
        .containers
        .iter()
        .map(|(name, c)| {
            json!({"name": name, "usage": {"cpu": cpu_quantity(c.nanocores), "memory": memory_quantity(c.memory_bytes)}})
        })
        .collect();
    json!({
        "kind": "PodMetrics",
        "apiVersion": api_version(),
        "metadata": {
            "name": pod.metadata.name,
            "namespace": pod.metadata.namespace,
            "creationTimestamp": now_time(now),
            "labels": pod.metadata.labels.clone().unwrap_or_default(),
        },
        "timestamp": time(u.at_unix_nanos),
        "window": window(u.window),
        "containers": containers,
    })
}

/// metrics-server's Table: Name, cpu, memory (summed over a pod's
/// containers), Window.
fn table(items: &[Value], pods: bool) -> Value {
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let (cpu, memory) = match pods {
                true => {
                    let sum = |key: &str| {
                        o["containers"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|c| c["usage"][key].as_str())
                            .filter_map(|q| quantity::Quantity::parse(q).ok()?.amount())
                            .try_fold(quantity::Amount::ZERO, quantity::Amount::checked_add)
                            .map(|a| a.to_string())
                            .unwrap_or_default()
                    };
                    (sum("cpu"), sum("memory"))
                }
                false => (
                    o["usage"]["cpu"].as_str().unwrap_or_default().to_owned(),
                    o["usage"]["memory"].as_str().unwrap_or_default().to_owned(),
                ),
            };
            let meta = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]});
            json!({"cells": [o["metadata"]["name"], cpu, memory, o["window"]], "object": meta})
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name of the resource", "priority": 0},
            {"name": "cpu", "type": "string", "format": "quantity", "description": "", "priority": 0},
            {"name": "memory", "type": "string", "format": "quantity", "description": "", "priority": 0},
            {"name": "Window", "type": "string", "format": "duration", "description": "", "priority": 0},
        ],
        "rows": rows,
    })
}

fn one(headers: &HeaderMap, obj: Value, pods: bool) -> Response {
    match negotiate(headers) {
        Format::Table => json(StatusCode::OK, &table(&[obj], pods)),
        _ => json(StatusCode::OK, &obj),
    }
}

fn many(headers: &HeaderMap, items: Vec<Value>, kind: &str, pods: bool) -> Response {
    match negotiate(headers) {
        Format::Table => json(StatusCode::OK, &table(&items, pods)),
        _ => json(
            StatusCode::OK,
            &json!({"kind": kind, "apiVersion": api_version(), "metadata": {}, "items": items}),
        ),
    }
}

/// metrics-server serves no watch of these lists here.
fn refuse_watch(p: &Params) -> Result<(), ApiError> {
    match p.flag("watch") {
        true => Err(ApiError::MethodNotAllowed(
            "the server does not allow this method on the requested resource".into(),
        )),
        false => Ok(()),
    }
}

async fn list_nodes(State(api): State<Api>, p: Params, h: HeaderMap) -> Result<Response, ApiError> {
    refuse_watch(&p)?;
    let now = api.now();
    let nodes = api.list_nodes(
        p.get("labelSelector").unwrap_or(""),
        p.get("fieldSelector").unwrap_or(""),
    )?;
    let items = nodes
        .items
        .iter()
        .filter_map(|n| {
            let u = api.metrics().node(n.metadata.name.as_deref()?, now)?;
            Some(node_metrics(n, &u, now))
        })
        .collect();
    Ok(many(&h, items, "NodeMetricsList", false))
}

async fn get_node(
    State(api): State<Api>,
    ApiPath(name): ApiPath<String>,
    h: HeaderMap,
) -> Result<Response, ApiError> {
    let now = api.now();
    let node = api.get_node(&name)?;
    let u = api
        .metrics()
        .node(&name, now)
        .ok_or_else(|| ApiError::NotFound {
            resource: NODE_METRICS.into(),
            name: name.clone(),
        })?;
    Ok(one(&h, node_metrics(&node, &u, now), false))
}

/// The pods of `namespace` (all without) with usage, in the API's order;
/// metrics-server leaves out pods that are not Running.
fn pods_with_usage(api: &Api, namespace: Option<&str>, p: &Params) -> Result<Vec<Value>, ApiError> {
    let now = api.now();
    let pods = api.list_pods(
        namespace,
        p.get("labelSelector").unwrap_or(""),
        p.get("fieldSelector").unwrap_or(""),
    )?;
    let usage = api.metrics().pods(now);
    Ok(pods
        .items
        .iter()
        .filter(|pod| running(pod))
        .filter_map(|pod| {
            let u = usage.get(pod.metadata.uid.as_deref()?)?;
            Some(pod_metrics(pod, u, now))
        })
        .collect())
}

fn running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

async fn list_all_pods(
    State(api): State<Api>,
    p: Params,
    h: HeaderMap,
) -> Result<Response, ApiError> {
    refuse_watch(&p)?;
    let items = pods_with_usage(&api, None, &p)?;
    Ok(many(&h, items, "PodMetricsList", true))
}

async fn list_pods(
    State(api): State<Api>,
    ApiPath(ns): ApiPath<String>,
    p: Params,
    h: HeaderMap,
) -> Result<Response, ApiError> {
    refuse_watch(&p)?;
    let items = pods_with_usage(&api, Some(&ns), &p)?;
    Ok(many(&h, items, "PodMetricsList", true))
}

async fn get_pod(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    h: HeaderMap,
) -> Result<Response, ApiError> {
    let now = api.now();
    let pod = api.get_pod(&ns, &name)?;
    let usage = api.metrics().pods(now);
    let u = pod
        .metadata
        .uid
        .as_deref()
        .and_then(|uid| usage.get(uid))
        .filter(|_| running(&pod))
        .ok_or_else(|| ApiError::NotFound {
            resource: POD_METRICS.into(),
            name: format!("{ns}/{name}"),
        })?;
    Ok(one(&h, pod_metrics(&pod, u, now), true))
}

/// `POST /api/v1/nodes/{node}/metrics`: an executor's push ([`push`]).
///
/// The Node authorizer lets a node push only as itself; here, as
/// NodeRestriction does for what the authorizer cannot see, each pod the push
/// names must be bound to that node (403 otherwise). A pod that is gone, or
/// was made again under its name, is left out: its metrics are gone with it.
async fn receive(
    State(api): State<Api>,
    ApiPath(node): ApiPath<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let bytes = read_body(&headers, body).await?;
    let summary = push::decode(&bytes)?;
    api.get_node(&node)?;
    let mut keep = HashSet::new();
    for p in &summary.pods {
        let pod = match api.get_pod(&p.namespace, &p.name) {
            Ok(pod) => pod,
            Err(ApiError::NotFound { .. }) => continue,
            Err(e) => return Err(e),
        };
        if pod.metadata.uid.as_deref() != Some(p.uid.as_str()) {
            continue;
        }
        let bound = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
        if bound != Some(node.as_str()) {
            return Err(ApiError::Forbidden(format!(
                "node \"{node}\" cannot report metrics of pod \"{}/{}\": it is not bound to this node",
                p.namespace, p.name
            )));
        }
        keep.insert(p.uid.clone());
    }
    api.metrics()
        .record(&node, &summary, |uid| keep.contains(uid), api.now())?;
    Ok(json(
        StatusCode::OK,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 200}),
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use axum::http::{Method, Request};
    use k8s_openapi::api::core::v1::PodStatus;
    use serde_json::json;
    use tower::ServiceExt as _;

    use super::*;

    async fn call(router: &Router, method: Method, path: &str, body: Value) -> (u16, Value) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let resp = router.clone().oneshot(req).await.unwrap();
        let code = resp.status().as_u16();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    fn push(at: u32, cpu: u64, uid: &str) -> Value {
        let t = format!("2026-01-01T00:00:{at:02}Z");
        json!({"executor": "e1", "timestamp": t, "resolutionSeconds": 15, "pods": [
            {"namespace": "default", "name": "web", "uid": uid, "containers": [
                {"name": "app", "id": "r1", "time": t, "cpuUsageNanoseconds": cpu, "workingSetBytes": 4 << 20}]}]})
    }

    #[tokio::test]
    async fn pushed_samples_become_pod_and_node_metrics_that_only_reads_reach() {
        let api = Api::in_memory().await.unwrap();
        let router = crate::router(api.clone());
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"}})).unwrap();
        api.upsert_node(node).await.unwrap();
        let pod: Pod = serde_json::from_value(
            json!({"metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "i"}]}}),
        )
        .unwrap();
        let uid = api
            .create_pod("default", pod)
            .await
            .unwrap()
            .metadata
            .uid
            .unwrap();
        let binding = crate::Binding {
            node_name: "n1".into(),
            ..Default::default()
        };
        api.bind_pod("default", "web", &binding).await.unwrap();
        let running = PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        };
        api.update_pod_status("default", "web", running)
            .await
            .unwrap();

        let base = "/apis/metrics.k8s.io/v1beta1";
        let pod_path = format!("{base}/namespaces/default/pods/web");
        let (code, s) = call(&router, Method::GET, &pod_path, Value::Null).await;
        assert_eq!(code, 404);
        assert_eq!(
            s["message"],
            "podmetrics.metrics.k8s.io \"default/web\" not found"
        );
        assert_eq!(
            s["details"],
            json!({"name": "default/web", "group": "metrics.k8s.io", "kind": "podmetrics"})
        );
        let (code, _) = call(
            &router,
            Method::POST,
            "/api/v1/nodes/n1/metrics",
            push(0, 0, &uid),
        )
        .await;
        assert_eq!(code, 200);
        let (code, _) = call(
            &router,
            Method::POST,
            "/api/v1/nodes/n1/metrics",
            push(10, 2_500_000_000, &uid),
        )
        .await;
        assert_eq!(code, 200);

        let (code, m) = call(&router, Method::GET, &pod_path, Value::Null).await;
        assert_eq!(code, 200, "{m}");
        assert_eq!(m["kind"], "PodMetrics");
        assert_eq!(m["window"], "10s");
        assert_eq!(m["timestamp"], "2026-01-01T00:00:10Z");
        assert_eq!(
            m["containers"][0],
            json!({"name": "app", "usage": {"cpu": "250m", "memory": "4Mi"}})
        );
        let (_, list) = call(
            &router,
            Method::GET,
            &format!("{base}/pods?labelSelector=app%3Dweb"),
            Value::Null,
        )
        .await;
        assert_eq!(list["kind"], "PodMetricsList");
        assert_eq!(list["items"].as_array().unwrap().len(), 1);
        let (_, none) = call(
            &router,
            Method::GET,
            &format!("{base}/namespaces/default/pods?labelSelector=app%3Dother"),
            Value::Null,
        )
        .await;
        assert_eq!(none["items"], json!([]));
        let (code, n) = call(
            &router,
            Method::GET,
            &format!("{base}/nodes/n1"),
            Value::Null,
        )
        .await;
        assert_eq!(code, 200, "{n}");
        assert_eq!(n["usage"], json!({"cpu": "250m", "memory": "4Mi"}));

        // Read only: kube's 405.
        let (code, s) = call(
            &router,
            Method::POST,
            &format!("{base}/namespaces/default/pods"),
            json!({}),
        )
        .await;
        assert_eq!(
            (code, s["reason"].as_str()),
            (405, Some("MethodNotAllowed"))
        );
        let (code, _) = call(&router, Method::DELETE, &pod_path, Value::Null).await;
        assert_eq!(code, 405);
        // Discovery lists the group.
        let (_, groups) = call(&router, Method::GET, "/apis", Value::Null).await;
        assert!(
            groups["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == GROUP)
        );

        // Another node may not report this node's pod.
        let other: Node = serde_json::from_value(json!({"metadata": {"name": "n2"}})).unwrap();
        api.upsert_node(other).await.unwrap();
        let (code, s) = call(
            &router,
            Method::POST,
            "/api/v1/nodes/n2/metrics",
            push(20, 1, &uid),
        )
        .await;
        assert_eq!(code, 403, "{s}");
        // A push that no longer names the pod drops it.
        let empty =
            json!({"executor": "e1", "timestamp": "2026-01-01T00:00:30Z", "resolutionSeconds": 15});
        call(&router, Method::POST, "/api/v1/nodes/n1/metrics", empty).await;
        let (code, _) = call(&router, Method::GET, &pod_path, Value::Null).await;
        assert_eq!(code, 404);
        let (code, _) = call(
            &router,
            Method::POST,
            "/api/v1/nodes/n1/metrics",
            json!({"bogus": 1}),
        )
        .await;
        assert_eq!(code, 400);
    }
}
