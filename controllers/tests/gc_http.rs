//! The garbage collector's propagation policies end to end: an in-memory API served
//! over HTTP on 127.0.0.1:0, the controllers running on it, and the deletes a client
//! sends. No node runs pods here, so a pod goes at once on delete unless a finalizer
//! holds it, which is how a dependent that is slow to go is played.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use apiserver::Api;
use serde_json::{Value, json};
use testkit::wait_until;

const T: Duration = Duration::from_secs(20);
const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const RSES: &str = "/apis/apps/v1/namespaces/default/replicasets";
const PODS: &str = "/api/v1/namespaces/default/pods";

/// A served API with the controllers running; both end on drop.
struct Cluster {
    base: String,
    client: reqwest::Client,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl Cluster {
    async fn start() -> Self {
        testkit::init_crypto();
        let api = Api::in_memory().await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let serve = tokio::spawn({
            let api = api.clone();
            async move {
                let _ = apiserver::serve(listener, api).await;
            }
        });
        let controllers = tokio::spawn(controllers::runner::run(api.clone()));
        Cluster {
            base,
            client: reqwest::Client::new(),
            tasks: vec![serve, controllers],
        }
    }

    async fn send(&self, method: &str, path: &str, ct: &str, body: &Value) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let resp = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("content-type", ct)
            .body(serde_json::to_vec(body).unwrap())
            .send()
            .await
            .unwrap();
        let code = resp.status().as_u16();
        (code, resp.json().await.unwrap_or(Value::Null))
    }

    async fn json(&self, method: &str, path: &str, body: &Value) -> (u16, Value) {
        self.send(method, path, "application/json", body).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send("GET", path, "application/json", &Value::Null)
            .await
    }

    async fn items(&self, path: &str) -> Vec<Value> {
        let (code, list) = self.get(path).await;
        assert_eq!(code, 200, "{list}");
        list["items"].as_array().cloned().unwrap_or_default()
    }

    /// The Deployment `name` created and rolled out to `replicas` pods (held by a
    /// finalizer when `held`); returns the pods.
    async fn deployment(&self, name: &str, replicas: i32, held: bool) -> Vec<Value> {
        let finalizers: Vec<&str> = if held {
            vec!["example.com/hold"]
        } else {
            vec![]
        };
        let d = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}, "finalizers": finalizers},
                    "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
                }
            }
        });
        let (code, body) = self.json("POST", DEPLOYS, &d).await;
        assert_eq!(code, 201, "{body}");
        let pods = format!("{PODS}?labelSelector=app%3D{name}");
        wait_until(
            "the pods created",
            T,
            async || self.items(&pods).await,
            |p| p.len() == usize::try_from(replicas).unwrap(),
        )
        .await
    }
}

fn owners(obj: &Value) -> Vec<String> {
    obj["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{}/{}",
                r["kind"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            )
        })
        .collect()
}

fn delete_options(policy: &str) -> Value {
    json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": policy})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphan_delete_leaves_the_dependents_without_the_owner_and_a_new_owner_adopts_them() {
    let c = Cluster::start().await;
    c.deployment("web", 2, false).await;
    let rs = wait_until(
        "the ReplicaSet",
        T,
        async || c.items(RSES).await,
        |r| r.len() == 1,
    )
    .await;
    let rs_name = rs[0]["metadata"]["name"].as_str().unwrap().to_owned();
    assert_eq!(owners(&rs[0]), ["Deployment/web"]);

    let (code, d) = c
        .json(
            "DELETE",
            &format!("{DEPLOYS}/web"),
            &delete_options("Orphan"),
        )
        .await;
    assert_eq!(code, 200, "{d}");
    wait_until(
        "the Deployment gone",
        T,
        async || c.get(&format!("{DEPLOYS}/web")).await.0,
        |c| *c == 404,
    )
    .await;
    let rs = c.items(RSES).await;
    assert_eq!(rs.len(), 1, "the ReplicaSet stays");
    assert!(owners(&rs[0]).is_empty(), "{:?}", owners(&rs[0]));
    let pods = c.items(PODS).await;
    assert_eq!(pods.len(), 2, "its pods stay");
    assert!(
        pods.iter()
            .all(|p| owners(p) == [format!("ReplicaSet/{rs_name}")])
    );

    // The ReplicaSet, orphaning too: its pods stay, owned by nobody, and it does not
    // take them back while it is going.
    let (code, _) = c
        .json(
            "DELETE",
            &format!("{RSES}/{rs_name}"),
            &delete_options("Orphan"),
        )
        .await;
    assert_eq!(code, 200);
    wait_until(
        "the ReplicaSet gone",
        T,
        async || c.items(RSES).await.len(),
        |n| *n == 0,
    )
    .await;
    let pods = c.items(PODS).await;
    assert_eq!(pods.len(), 2);
    assert!(pods.iter().all(|p| owners(p).is_empty()), "{pods:?}");

    // A new ReplicaSet with the same selector adopts them, and needs no new pod.
    let template = &rs[0]["spec"]["template"];
    let adopter = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "adopter"},
        "spec": {"replicas": 2, "selector": rs[0]["spec"]["selector"], "template": template}
    });
    let (code, body) = c.json("POST", RSES, &adopter).await;
    assert_eq!(code, 201, "{body}");
    let pods = wait_until(
        "the orphans adopted",
        T,
        async || c.items(PODS).await,
        |p| p.iter().all(|p| owners(p) == ["ReplicaSet/adopter"]),
    )
    .await;
    assert_eq!(pods.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_delete_keeps_the_owner_until_its_dependents_are_gone() {
    let c = Cluster::start().await;
    let pods = c.deployment("fg", 2, true).await;
    let (code, d) = c
        .json(
            "DELETE",
            &format!("{DEPLOYS}/fg"),
            &delete_options("Foreground"),
        )
        .await;
    assert_eq!(code, 200, "{d}");
    // The pods are being deleted, but their finalizer holds them: so do the
    // ReplicaSet and the Deployment, each waiting for its dependents.
    wait_until(
        "the pods marked",
        T,
        async || c.items(PODS).await,
        |p| {
            p.iter()
                .all(|p| p["metadata"]["deletionTimestamp"].is_string())
        },
    )
    .await;
    let (code, d) = c.get(&format!("{DEPLOYS}/fg")).await;
    assert_eq!(code, 200);
    assert_eq!(d["metadata"]["finalizers"], json!(["foregroundDeletion"]));
    let rs = c.items(RSES).await;
    assert_eq!(rs.len(), 1);
    assert_eq!(
        rs[0]["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    assert_eq!(c.items(PODS).await.len(), 2, "no pod replaced");

    for p in &pods {
        let name = p["metadata"]["name"].as_str().unwrap();
        let (code, body) = c
            .send(
                "PATCH",
                &format!("{PODS}/{name}"),
                "application/merge-patch+json",
                &json!({"metadata": {"finalizers": null}}),
            )
            .await;
        assert_eq!(code, 200, "{body}");
    }
    wait_until(
        "everything gone",
        T,
        async || {
            (
                c.items(PODS).await.len(),
                c.items(RSES).await.len(),
                c.get(&format!("{DEPLOYS}/fg")).await.0,
            )
        },
        |s| *s == (0, 0, 404),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_delete_collects_the_dependents_and_a_live_owner_keeps_one() {
    let c = Cluster::start().await;
    c.deployment("bg", 1, false).await;
    // A ConfigMap owned by the Deployment and by another ConfigMap that stays.
    let (_, d) = c.get(&format!("{DEPLOYS}/bg")).await;
    let (_, keeper) = c
        .json(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            &json!({"metadata": {"name": "keeper"}}),
        )
        .await;
    let reference = |o: &Value, kind: &str, api_version: &str| json!({"apiVersion": api_version, "kind": kind, "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]});
    for (name, refs) in [
        ("owned", vec![reference(&d, "Deployment", "apps/v1")]),
        (
            "shared",
            vec![
                reference(&d, "Deployment", "apps/v1"),
                reference(&keeper, "ConfigMap", "v1"),
            ],
        ),
    ] {
        let cm = json!({"metadata": {"name": name, "ownerReferences": refs}});
        let (code, body) = c
            .json("POST", "/api/v1/namespaces/default/configmaps", &cm)
            .await;
        assert_eq!(code, 201, "{body}");
    }
    let (code, _) = c
        .json(
            "DELETE",
            &format!("{DEPLOYS}/bg"),
            &delete_options("Background"),
        )
        .await;
    assert_eq!(code, 200);
    let cms = wait_until(
        "collected",
        T,
        async || {
            (
                c.items(RSES).await.len(),
                c.items(PODS).await.len(),
                c.items("/api/v1/namespaces/default/configmaps").await,
            )
        },
        |(r, p, cms)| {
            *r == 0 && *p == 0 && cms.len() == 2 && cms.iter().all(|cm| owners(cm).len() < 2)
        },
    )
    .await;
    let shared = cms
        .2
        .iter()
        .find(|cm| cm["metadata"]["name"] == "shared")
        .unwrap();
    assert_eq!(owners(shared), ["ConfigMap/keeper"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicaset_being_deleted_neither_adopts_its_orphans_nor_replaces_them() {
    let c = Cluster::start().await;
    // Its own finalizer keeps the ReplicaSet around, being deleted, after the
    // collector has orphaned its pods and removed the orphan finalizer.
    let rs = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "going", "finalizers": ["example.com/hold"]},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "going"}},
            "template": {
                "metadata": {"labels": {"app": "going"}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
            }
        }
    });
    let (code, body) = c.json("POST", RSES, &rs).await;
    assert_eq!(code, 201, "{body}");
    wait_until(
        "the pods created",
        T,
        async || c.items(PODS).await.len(),
        |n| *n == 2,
    )
    .await;
    let (code, _) = c
        .json(
            "DELETE",
            &format!("{RSES}/going"),
            &delete_options("Orphan"),
        )
        .await;
    assert_eq!(code, 200);
    // Synced since: its status observed the generation the deletion bumped.
    let rs = wait_until(
        "orphaned and synced",
        T,
        async || c.get(&format!("{RSES}/going")).await.1,
        |rs| {
            rs["metadata"]["finalizers"] == json!(["example.com/hold"])
                && rs["status"]["observedGeneration"] == rs["metadata"]["generation"]
        },
    )
    .await;
    assert!(rs["metadata"]["deletionTimestamp"].is_string());
    let pods = wait_until(
        "the pods orphaned",
        T,
        async || c.items(PODS).await,
        |p| p.iter().all(|p| owners(p).is_empty()),
    )
    .await;
    assert_eq!(pods.len(), 2, "none replaced");
    // Gone at last, its pods still nobody's.
    let (code, _) = c
        .send(
            "PATCH",
            &format!("{RSES}/going"),
            "application/merge-patch+json",
            &json!({"metadata": {"finalizers": null}}),
        )
        .await;
    assert_eq!(code, 200);
    wait_until(
        "the ReplicaSet gone",
        T,
        async || c.items(RSES).await.len(),
        |n| *n == 0,
    )
    .await;
    let pods = c.items(PODS).await;
    assert_eq!(pods.len(), 2);
    assert!(pods.iter().all(|p| owners(p).is_empty()));
}

/// Two objects that own each other, both blocking: a Foreground delete of one would
/// leave each waiting for the other for ever. The collector breaks the cycle as KCM
/// does, and both go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_delete_through_an_ownership_cycle_ends() {
    const CMS: &str = "/api/v1/namespaces/default/configmaps";
    let c = Cluster::start().await;
    let mut uids = Vec::new();
    for name in ["a", "b"] {
        let (code, cm) = c
            .json(
                "POST",
                CMS,
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}),
            )
            .await;
        assert_eq!(code, 201, "{cm}");
        uids.push(cm["metadata"]["uid"].as_str().unwrap().to_owned());
    }
    for (name, owner, uid) in [("a", "b", &uids[1]), ("b", "a", &uids[0])] {
        let (code, body) = c
            .send(
                "PATCH",
                &format!("{CMS}/{name}"),
                "application/merge-patch+json",
                &json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                    "name": owner, "uid": uid, "blockOwnerDeletion": true}]}}),
            )
            .await;
        assert_eq!(code, 200, "{body}");
    }
    let (code, body) = c
        .json("DELETE", &format!("{CMS}/a"), &delete_options("Foreground"))
        .await;
    assert_eq!(code, 200, "{body}");
    wait_until(
        "both gone",
        T,
        async || {
            (
                c.get(&format!("{CMS}/a")).await.0,
                c.get(&format!("{CMS}/b")).await.0,
            )
        },
        |s| *s == (404, 404),
    )
    .await;
}
