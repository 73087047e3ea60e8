//! Lists in pages (`limit`, `continue`) on both durable backends, redb and etcd: every
//! page is read at the first page's resourceVersion, so objects created or deleted
//! between pages neither show up nor go missing; `remainingItemCount` counts the rest;
//! kubectl's chunked `get` sees everything; a token older than what the store retains
//! is 410 Expired. The etcd half needs etcd (skipped without it, failed under CI=true).
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use apiserver::store::{EtcdConfig, EtcdStore};
use apiserver::{Api, SystemClock};
use common::{Http, Server, TestLogs, pod_yaml};
use serde_json::{Value, json};
use testkit::{Kubectl, ok};

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

async fn pages_are_consistent_at_the_first_pages_version(server: &Server) {
    let http = Http::new(server);
    for name in ["p1", "p2", "p3", "p4", "p5"] {
        let (code, _) = http
            .json("POST", "/api/v1/namespaces/default/pods", &pod(name))
            .await;
        assert_eq!(code, 201);
    }
    let (code, first) = http.get("/api/v1/namespaces/default/pods?limit=2").await;
    assert_eq!(code, 200, "{first}");
    assert_eq!(names(&first), ["p1", "p2"]);
    assert_eq!(first["metadata"]["remainingItemCount"], 3);
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // Changes after the first page do not show in the later ones.
    http.json("POST", "/api/v1/namespaces/default/pods", &pod("p0"))
        .await;
    let (code, _) = http
        .send(
            "DELETE",
            "/api/v1/namespaces/default/pods/p4",
            "",
            Vec::new(),
        )
        .await;
    assert_eq!(code, 200);
    let mut seen = names(&first);
    let mut token = first["metadata"]["continue"].as_str().unwrap().to_string();
    loop {
        let (code, page) = http
            .get(&format!(
                "/api/v1/namespaces/default/pods?limit=2&continue={token}"
            ))
            .await;
        assert_eq!(code, 200, "{page}");
        assert_eq!(page["metadata"]["resourceVersion"], rv.as_str());
        seen.extend(names(&page));
        match page["metadata"]["continue"].as_str() {
            Some(t) => token = t.to_string(),
            None => break,
        }
    }
    assert_eq!(seen, ["p1", "p2", "p3", "p4", "p5"]);
    // A selector filters before the limit; kubectl's chunked get sees every pod.
    let (_, none) = http
        .get("/api/v1/namespaces/default/pods?limit=1&labelSelector=app%3Dnone")
        .await;
    assert!(names(&none).is_empty() && none["metadata"]["continue"].is_null());
    let out = ok(&Kubectl::new(&server.url)
        .run(&["get", "pods", "--chunk-size=2", "-o", "name"])
        .await);
    assert_eq!(out.lines().count(), 5, "{out}");
    let (code, bad) = http
        .get("/api/v1/namespaces/default/pods?limit=1&continue=nope")
        .await;
    assert_eq!((code, bad["reason"].as_str()), (400, Some("BadRequest")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redb_lists_page_consistently() {
    let server = Server::start().await;
    pages_are_consistent_at_the_first_pages_version(&server).await;
}

async fn shim_on_etcd(etcd: &testkit::etcd::Etcd, history: usize) -> Server {
    let mut config = EtcdConfig::new(vec![etcd.url.clone()]);
    config.history = history;
    let store = EtcdStore::connect(config, None).await.unwrap();
    let api = Api::start(Arc::new(store), Arc::new(SystemClock), Arc::new(TestLogs))
        .await
        .unwrap();
    Server::serve(api).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_lists_page_consistently_and_a_too_old_token_is_410() {
    let Some(etcd) = testkit::etcd::Etcd::start("etcd_lists_page_consistently").await else {
        return;
    };
    let server = shim_on_etcd(&etcd, 1000).await;
    pages_are_consistent_at_the_first_pages_version(&server).await;

    // A store that remembers only a few changes cannot rebuild an old page.
    let small = shim_on_etcd(&etcd, 2).await;
    let http = Http::new(&small);
    let (_, first) = http.get("/api/v1/namespaces/default/pods?limit=1").await;
    let token = first["metadata"]["continue"].as_str().unwrap().to_string();
    for name in ["q1", "q2", "q3"] {
        ok(&Kubectl::new(&small.url)
            .run_stdin(
                &["create", "-f", "-"],
                Some(&pod_yaml(name, "nginx", "a: b")),
            )
            .await);
    }
    let (code, gone) = http
        .get(&format!(
            "/api/v1/namespaces/default/pods?limit=1&continue={token}"
        ))
        .await;
    assert_eq!(
        (code, gone["reason"].as_str()),
        (410, Some("Expired")),
        "{gone}"
    );
    assert!(
        gone["message"]
            .as_str()
            .unwrap()
            .starts_with("The provided continue parameter is too old"),
        "{gone}"
    );
}
