//! Deletion over HTTP, as kube-apiserver's generic registry does it for every kind:
//! finalizers hold an object (marked, not removed) until the update that removes the
//! last one; the Orphan and Foreground propagation policies set their finalizers;
//! `deletecollection` deletes what the selectors select, each as a single delete, and
//! answers the list of them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use apiserver::Binding;
use common::*;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const PODS: &str = "/api/v1/namespaces/default/pods";
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";

fn configmap(name: &str, labels: Value, finalizers: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels, "finalizers": finalizers},
        "data": {"k": "v"}})
}

fn pod(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}})
}

fn deployment(name: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
            }
        }
    })
}

fn names(list: &Value) -> Vec<&str> {
    let mut n: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    n.sort_unstable();
    n
}

fn delete_options(policy: &str) -> Value {
    json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_hold_an_object_until_the_last_is_removed() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let cm = configmap("held", json!({}), &["example.com/a", "example.com/b"]);
    let (code, _) = http.json("POST", CMS, &cm).await;
    assert_eq!(code, 201);

    let (code, marked) = http
        .json("DELETE", &format!("{CMS}/held"), &json!({}))
        .await;
    assert_eq!(code, 200, "{marked}");
    assert_eq!(marked["kind"], "ConfigMap", "the held object, not a Status");
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(marked["metadata"]["deletionGracePeriodSeconds"], 0);
    let (code, got) = http.get(&format!("{CMS}/held")).await;
    assert_eq!(code, 200);
    assert_eq!(
        got["metadata"]["deletionTimestamp"],
        marked["metadata"]["deletionTimestamp"]
    );

    // Being deleted, it may change but take no new finalizer.
    let merge = |patch: Value| {
        let http = &http;
        async move {
            http.send(
                "PATCH",
                &format!("{CMS}/held"),
                "application/merge-patch+json",
                serde_json::to_vec(&patch).unwrap(),
            )
            .await
        }
    };
    let (code, status) = merge(
        json!({"metadata": {"finalizers": ["example.com/a", "example.com/b", "example.com/c"]}}),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/c\"}"
    );
    let (code, _) =
        merge(json!({"data": {"k": "w"}, "metadata": {"finalizers": ["example.com/b"]}})).await;
    assert_eq!(code, 200);
    let (code, got) = http.get(&format!("{CMS}/held")).await;
    assert_eq!(code, 200, "one finalizer is left");
    assert_eq!(got["data"]["k"], "w");

    let (code, _) = merge(json!({"metadata": {"finalizers": null}})).await;
    assert_eq!(code, 200);
    let (code, _) = http.get(&format!("{CMS}/held")).await;
    assert_eq!(code, 404, "the last finalizer gone, so is the object");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_held_by_a_finalizer_leaves_when_it_is_removed() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let mut p = pod("p", json!({}));
    p["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let (code, _) = http.json("POST", PODS, &p).await;
    assert_eq!(code, 201);
    // Unbound, so its deletion would be immediate: the finalizer holds it.
    let (code, held) = http.json("DELETE", &format!("{PODS}/p"), &json!({})).await;
    assert_eq!(code, 200, "{held}");
    assert_eq!(held["metadata"]["deletionGracePeriodSeconds"], 0);
    let (code, _) = http.get(&format!("{PODS}/p")).await;
    assert_eq!(code, 200);
    let (code, _) = http
        .send(
            "PATCH",
            &format!("{PODS}/p"),
            "application/json-patch+json",
            br#"[{"op": "remove", "path": "/metadata/finalizers"}]"#.to_vec(),
        )
        .await;
    assert_eq!(code, 200);
    let (code, _) = http.get(&format!("{PODS}/p")).await;
    assert_eq!(code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_and_foreground_deletes_set_their_finalizers() {
    let server = Server::start().await;
    let http = Http::new(&server);
    for (name, policy, finalizer) in [
        ("orphaned", "Orphan", "orphan"),
        ("foreground", "Foreground", "foregroundDeletion"),
    ] {
        let (code, _) = http.json("POST", DEPLOYS, &deployment(name)).await;
        assert_eq!(code, 201);
        let (code, d) = http
            .json(
                "DELETE",
                &format!("{DEPLOYS}/{name}"),
                &delete_options(policy),
            )
            .await;
        assert_eq!(code, 200, "{d}");
        assert_eq!(d["metadata"]["finalizers"], json!([finalizer]));
        assert!(d["metadata"]["deletionTimestamp"].is_string());
        assert_eq!(d["metadata"]["generation"], 2, "a first mark bumps it");
        // Held until the collector removes the finalizer.
        let (code, _) = http.get(&format!("{DEPLOYS}/{name}")).await;
        assert_eq!(code, 200);
    }
    // The legacy orphanDependents, in the query.
    let (code, _) = http.json("POST", DEPLOYS, &deployment("legacy")).await;
    assert_eq!(code, 201);
    let (code, d) = http
        .send(
            "DELETE",
            &format!("{DEPLOYS}/legacy?orphanDependents=true"),
            "",
            Vec::new(),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(d["metadata"]["finalizers"], json!(["orphan"]));
    // A later Background delete takes the finalizer back off, and the object goes.
    let (code, status) = http
        .json(
            "DELETE",
            &format!("{DEPLOYS}/legacy"),
            &delete_options("Background"),
        )
        .await;
    assert_eq!(code, 200);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["status"], "Success");
    let (code, _) = http.get(&format!("{DEPLOYS}/legacy")).await;
    assert_eq!(code, 404);

    let (code, status) = http
        .json(
            "DELETE",
            &format!("{DEPLOYS}/orphaned"),
            &delete_options("Sideways"),
        )
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
    );
    let both = json!({"propagationPolicy": "Orphan", "orphanDependents": true});
    let (code, _) = http
        .json("DELETE", &format!("{DEPLOYS}/orphaned"), &both)
        .await;
    assert_eq!(code, 422);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletecollection_deletes_what_the_selector_selects() {
    let server = Server::start().await;
    let http = Http::new(&server);
    for (name, tier) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let (code, _) = http
            .json("POST", CMS, &configmap(name, json!({"tier": tier}), &[]))
            .await;
        assert_eq!(code, 201);
    }
    let (code, dry) = http
        .send(
            "DELETE",
            &format!("{CMS}?labelSelector=tier%3Dx&dryRun=All"),
            "",
            Vec::new(),
        )
        .await;
    assert_eq!(code, 200, "{dry}");
    assert_eq!(names(&dry), ["a", "b"]);
    let (_, all) = http.get(CMS).await;
    assert_eq!(names(&all), ["a", "b", "c"], "a dry run deletes nothing");

    let (code, deleted) = http
        .send(
            "DELETE",
            &format!("{CMS}?labelSelector=tier%3Dx"),
            "",
            Vec::new(),
        )
        .await;
    assert_eq!(code, 200, "{deleted}");
    assert_eq!(deleted["kind"], "ConfigMapList");
    assert_eq!(names(&deleted), ["a", "b"]);
    assert_eq!(deleted["items"][0]["data"]["k"], "v", "as they were");
    let (_, left) = http.get(CMS).await;
    assert_eq!(names(&left), ["c"]);

    // Pods: each deletion as a single one, graceful for a pod on a node.
    for name in ["p1", "p2", "q"] {
        let app = if name == "q" { "other" } else { "web" };
        let (code, _) = http
            .json("POST", PODS, &pod(name, json!({"app": app})))
            .await;
        assert_eq!(code, 201);
    }
    let binding = Binding {
        node_name: "agent-1".into(),
        ..Binding::default()
    };
    server
        .api
        .bind_pod("default", "p1", &binding)
        .await
        .unwrap();
    let (code, deleted) = http
        .send(
            "DELETE",
            &format!("{PODS}?labelSelector=app%3Dweb"),
            "",
            Vec::new(),
        )
        .await;
    assert_eq!(code, 200, "{deleted}");
    assert_eq!(deleted["kind"], "PodList");
    assert_eq!(names(&deleted), ["p1", "p2"]);
    let (code, p1) = http.get(&format!("{PODS}/p1")).await;
    assert_eq!(code, 200, "a bound pod terminates first");
    assert_eq!(p1["metadata"]["deletionGracePeriodSeconds"], 30);
    let (code, _) = http.get(&format!("{PODS}/p2")).await;
    assert_eq!(code, 404, "an unbound one goes at once");
    let (code, _) = http.get(&format!("{PODS}/q")).await;
    assert_eq!(code, 200);

    // Discovery says so.
    let (_, core) = http.get("/api/v1").await;
    let verbs = |res: &Value, name: &str| -> Vec<String> {
        res["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| serde_json::from_value(r["verbs"].clone()).unwrap())
            .unwrap()
    };
    for name in ["pods", "configmaps", "secrets", "serviceaccounts", "events"] {
        assert!(
            verbs(&core, name).contains(&"deletecollection".to_owned()),
            "{name}"
        );
    }
    let (_, apps) = http.get("/apis/apps/v1").await;
    assert!(verbs(&apps, "deployments").contains(&"deletecollection".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_waits_for_its_objects_finalizers() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "going"}});
    let (code, _) = http.json("POST", "/api/v1/namespaces", &ns).await;
    assert_eq!(code, 201);
    let cms = "/api/v1/namespaces/going/configmaps";
    for (name, finalizers) in [("held", vec!["example.com/hold"]), ("free", vec![])] {
        let (code, _) = http
            .json("POST", cms, &configmap(name, json!({}), &finalizers))
            .await;
        assert_eq!(code, 201);
    }
    let (code, _) = http
        .json("DELETE", "/api/v1/namespaces/going", &json!({}))
        .await;
    assert_eq!(code, 200);
    server.api.finalize_namespaces().await.unwrap();
    server.api.finalize_namespaces().await.unwrap();
    let (code, held) = http.get(&format!("{cms}/held")).await;
    assert_eq!(code, 200, "the finalizer holds it");
    assert!(held["metadata"]["deletionTimestamp"].is_string());
    let (code, _) = http.get(&format!("{cms}/free")).await;
    assert_eq!(code, 404);
    let (code, _) = http.get("/api/v1/namespaces/going").await;
    assert_eq!(code, 200, "the namespace waits for it");

    let (code, _) = http
        .send(
            "PATCH",
            &format!("{cms}/held"),
            "application/merge-patch+json",
            serde_json::to_vec(&json!({"metadata": {"finalizers": null}})).unwrap(),
        )
        .await;
    assert_eq!(code, 200);
    server.api.finalize_namespaces().await.unwrap();
    let (code, _) = http.get("/api/v1/namespaces/going").await;
    assert_eq!(code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_orphan_and_foreground_finalizers_exclude_each_other() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let both = ["orphan", "foregroundDeletion"];
    let (code, status) = http
        .json("POST", CMS, &configmap("both", json!({}), &both))
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["details"]["causes"][0]["message"],
        "Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set"
    );
    let mut p = pod("both", json!({}));
    p["metadata"]["finalizers"] = json!(both);
    let (code, _) = http.json("POST", PODS, &p).await;
    assert_eq!(code, 422);
}
