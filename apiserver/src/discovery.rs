//! Legacy discovery (`/api`, `/apis`, `/api/v1`) and `/version`.
//!
//! kubectl asks for aggregated discovery first; answering legacy JSON (with a plain
//! `application/json` Content-Type) makes it fall back, which keeps this module small.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::json;

use crate::http::respond::json;

/// The Kubernetes version the shim implements. `/usr/bin/kubectl` picks the kubectl
/// binary by this minor version, and k8s-openapi is built for it (feature `v1_33`).
pub const KUBERNETES_VERSION: (&str, &str) = ("1", "33");

/// `GET /version`.
pub(crate) async fn version() -> Response {
    let (major, minor) = KUBERNETES_VERSION;
    json(
        StatusCode::OK,
        &json!({
            "major": major,
            "minor": minor,
            "gitVersion": format!("v{major}.{minor}.0"),
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2025-04-23T00:00:00Z",
            "goVersion": "go1.24.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }),
    )
}

/// `GET /api`.
pub(crate) async fn api_versions(headers: HeaderMap) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("127.0.0.1");
    json(
        StatusCode::OK,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
        }),
    )
}

/// The group of Lease, served here as the plain kinds are.
const COORDINATION: &str = "coordination.k8s.io";

/// A group served in `v1` alone, as `/apis` lists it.
fn group_v1(name: &str) -> serde_json::Value {
    let v = json!({"groupVersion": format!("{name}/v1"), "version": "v1"});
    json!({"name": name, "versions": [v], "preferredVersion": v})
}

/// `GET /apis/<name>` of a group served in `v1` alone.
fn api_group_v1(name: &str) -> Response {
    let mut g = group_v1(name);
    g["kind"] = "APIGroup".into();
    g["apiVersion"] = "v1".into();
    json(StatusCode::OK, &g)
}

/// The workload kinds' group.
const APPS: &str = "apps";

/// The verbs of a kind served with every write, `deletecollection` included, in
/// kube-apiserver's order.
pub(crate) const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `GET /apis/apps`.
pub(crate) async fn apps() -> Response {
    api_group_v1(APPS)
}

/// `GET /apis/apps/v1`: each workload kind with its `status` and `scale` subresources;
/// `scale` names its group and version (`autoscaling/v1`), which client-go reads.
pub(crate) async fn apps_v1() -> Response {
    let all = ALL_VERBS;
    let sub = ["get", "patch", "update"];
    let mut resources = Vec::new();
    for (plural, singular, kind, short) in [
        ("deployments", "deployment", "Deployment", "deploy"),
        ("replicasets", "replicaset", "ReplicaSet", "rs"),
        ("statefulsets", "statefulset", "StatefulSet", "sts"),
    ] {
        resources.push(json!({"name": plural, "singularName": singular, "namespaced": true, "kind": kind, "verbs": all, "shortNames": [short], "categories": ["all"]}));
        resources.push(json!({"name": format!("{plural}/scale"), "singularName": "", "namespaced": true, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": sub}));
        resources.push(json!({"name": format!("{plural}/status"), "singularName": "", "namespaced": true, "kind": kind, "verbs": sub}));
    }
    // DaemonSets scale with the nodes: no `scale` subresource.
    resources.push(json!({"name": "daemonsets", "singularName": "daemonset", "namespaced": true, "kind": "DaemonSet", "verbs": all, "shortNames": ["ds"], "categories": ["all"]}));
    resources.push(json!({"name": "daemonsets/status", "singularName": "", "namespaced": true, "kind": "DaemonSet", "verbs": sub}));
    resources.push(json!({"name": "controllerrevisions", "singularName": "controllerrevision", "namespaced": true, "kind": "ControllerRevision", "verbs": all}));
    json(
        StatusCode::OK,
        &json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{APPS}/v1"),
            "resources": resources,
        }),
    )
}

/// The group of Job and CronJob.
const BATCH: &str = "batch";

/// `GET /apis/batch`.
pub(crate) async fn batch() -> Response {
    api_group_v1(BATCH)
}

/// `GET /apis/batch/v1`: Jobs and CronJobs with their `status` subresources (no
/// `scale`: a Job's parallelism is its own field, as in kube-apiserver).
pub(crate) async fn batch_v1() -> Response {
    let all = ALL_VERBS;
    let sub = ["get", "patch", "update"];
    json(
        StatusCode::OK,
        &json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{BATCH}/v1"),
            "resources": [
                {"name": "cronjobs", "singularName": "cronjob", "namespaced": true, "kind": "CronJob", "verbs": all, "shortNames": ["cj"], "categories": ["all"]},
                {"name": "cronjobs/status", "singularName": "", "namespaced": true, "kind": "CronJob", "verbs": sub},
                {"name": "jobs", "singularName": "job", "namespaced": true, "kind": "Job", "verbs": all, "categories": ["all"]},
                {"name": "jobs/status", "singularName": "", "namespaced": true, "kind": "Job", "verbs": sub},
            ],
        }),
    )
}

/// `GET /apis`: the groups beyond the core group.
pub(crate) async fn api_groups() -> Response {
    let mut groups: Vec<_> = [APPS, BATCH, COORDINATION, POLICY, SCHEDULING]
        .into_iter()
        .map(group_v1)
        .collect();
    groups.push(autoscaling_group());
    groups.extend(crate::auth::api_groups());
    groups.push(crate::metrics::http::api_group());
    json(
        StatusCode::OK,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

/// `GET /apis/coordination.k8s.io`.
pub(crate) async fn coordination() -> Response {
    api_group_v1(COORDINATION)
}

/// `GET /apis/coordination.k8s.io/v1`.
pub(crate) async fn coordination_v1() -> Response {
    let verbs = ALL_VERBS;
    json(
        StatusCode::OK,
        &json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{COORDINATION}/v1"),
            "resources": [{"name": "leases", "singularName": "lease", "namespaced": true, "kind": "Lease", "verbs": verbs}],
        }),
    )
}

/// The group of PodDisruptionBudget (and of Eviction, a pods subresource).
const POLICY: &str = "policy";

/// `GET /apis/policy`.
pub(crate) async fn policy() -> Response {
    api_group_v1(POLICY)
}

/// `GET /apis/policy/v1`.
pub(crate) async fn policy_v1() -> Response {
    json(
        StatusCode::OK,
        &json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{POLICY}/v1"),
            "resources": [
                {"name": "poddisruptionbudgets", "singularName": "poddisruptionbudget", "namespaced": true, "kind": "PodDisruptionBudget", "verbs": ALL_VERBS, "shortNames": ["pdb"]},
                {"name": "poddisruptionbudgets/status", "singularName": "", "namespaced": true, "kind": "PodDisruptionBudget", "verbs": ["get", "patch", "update"]},
            ],
        }),
    )
}

/// The group of HorizontalPodAutoscaler: `v2`, the stored and preferred version (as
/// kube-apiserver 1.26+ prefers it), and `v1`, converted from it (`kinds::autoscaling::v1`).
const AUTOSCALING: &str = "autoscaling";

/// The autoscaling group as `/apis` lists it.
fn autoscaling_group() -> serde_json::Value {
    let v = |version: &str| json!({"groupVersion": format!("{AUTOSCALING}/{version}"), "version": version});
    json!({"name": AUTOSCALING, "versions": [v("v2"), v("v1")], "preferredVersion": v("v2")})
}

/// `GET /apis/autoscaling`.
pub(crate) async fn autoscaling() -> Response {
    let mut g = autoscaling_group();
    g["kind"] = "APIGroup".into();
    g["apiVersion"] = "v1".into();
    json(StatusCode::OK, &g)
}

/// The HorizontalPodAutoscaler resources of `version`: the same in both.
fn autoscaling_resources(version: &str) -> Response {
    json(
        StatusCode::OK,
        &json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{AUTOSCALING}/{version}"),
            "resources": [
                {"name": "horizontalpodautoscalers", "singularName": "horizontalpodautoscaler", "namespaced": true, "kind": "HorizontalPodAutoscaler", "verbs": ALL_VERBS, "shortNames": ["hpa"], "categories": ["all"]},
                {"name": "horizontalpodautoscalers/status", "singularName": "", "namespaced": true, "kind": "HorizontalPodAutoscaler", "verbs": ["get", "patch", "update"]},
            ],
        }),
    )
}

/// `GET /apis/autoscaling/v2`.
pub(crate) async fn autoscaling_v2() -> Response {
    autoscaling_resources("v2")
}

/// `GET /apis/autoscaling/v1`.
pub(crate) async fn autoscaling_v1() -> Response {
    autoscaling_resources("v1")
}

/// The group of PriorityClass.
const SCHEDULING: &str = "scheduling.k8s.io";

/// `GET /apis/scheduling.k8s.io`.
pub(crate) async fn scheduling() -> Response {
    api_group_v1(SCHEDULING)
}

/// `GET /apis/scheduling.k8s.io/v1`.
pub(crate) async fn scheduling_v1() -> Response {
    json(
        StatusCode::OK,
        &json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{SCHEDULING}/v1"),
            "resources": [{"name": "priorityclasses", "singularName": "priorityclass", "namespaced": false, "kind": "PriorityClass", "verbs": ALL_VERBS, "shortNames": ["pc"]}],
        }),
    )
}

/// `GET /api/v1`.
pub(crate) async fn core_v1() -> Response {
    let r = |name: &str,
             singular: &str,
             namespaced: bool,
             kind: &str,
             verbs: &[&str],
             short: &[&str]| {
        let mut v = json!({"name": name, "singularName": singular, "namespaced": namespaced, "kind": kind, "verbs": verbs});
        if !short.is_empty() {
            v["shortNames"] = json!(short);
        }
        v
    };
    let all = ALL_VERBS;
    let mut pods = r("pods", "pod", true, "Pod", &all, &["po"]);
    pods["categories"] = json!(["all"]);
    let sub = ["get", "patch", "update"];
    let mut rcs = r(
        "replicationcontrollers",
        "replicationcontroller",
        true,
        "ReplicationController",
        &all,
        &["rc"],
    );
    rcs["categories"] = json!(["all"]);
    // kubectl drain evicts through policy/v1 only when this entry names that version.
    let mut eviction = r("pods/eviction", "", true, "Eviction", &["create"], &[]);
    eviction["group"] = json!("policy");
    eviction["version"] = json!("v1");
    let mut rc_scale = r("replicationcontrollers/scale", "", true, "Scale", &sub, &[]);
    rc_scale["group"] = json!("autoscaling");
    rc_scale["version"] = json!("v1");
    json(
        StatusCode::OK,
        &json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": "v1",
            "resources": [
                pods,
                eviction,
                r("pods/log", "", true, "Pod", &["get"], &[]),
                r("pods/status", "", true, "Pod", &["get", "patch", "update"], &[]),
                r("nodes", "node", false, "Node", &["get", "list", "patch", "update", "watch"], &["no"]),
                r("nodes/status", "", false, "Node", &["get"], &[]),
                r("events", "event", true, "Event", &["create", "delete", "deletecollection", "get", "list", "watch"], &["ev"]),
                r("namespaces", "namespace", false, "Namespace", &["create", "delete", "get", "list", "patch", "update", "watch"], &["ns"]),
                r("configmaps", "configmap", true, "ConfigMap", &all, &["cm"]),
                r("secrets", "secret", true, "Secret", &all, &[]),
                r("serviceaccounts", "serviceaccount", true, "ServiceAccount", &all, &["sa"]),
                r("limitranges", "limitrange", true, "LimitRange", &all, &["limits"]),
                r("resourcequotas", "resourcequota", true, "ResourceQuota", &all, &["quota"]),
                r("resourcequotas/status", "", true, "ResourceQuota", &sub, &[]),
                rcs,
                rc_scale,
                r("replicationcontrollers/status", "", true, "ReplicationController", &sub, &[]),
            ],
        }),
    )
}
