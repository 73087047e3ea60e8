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

/// `resourceVersionMatch` as client-go sends it: `Exact` reads the list as it was,
/// from the store's history, and 410 once the history no longer reaches back;
/// kube-apiserver's checks of the options are a 422 naming `ListOptions`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_at_an_exact_resource_version_is_the_state_then() {
    let store = apiserver::store::MemoryStore::with_history(8).unwrap();
    let api = Api::start(Arc::new(store), Arc::new(SystemClock), Arc::new(TestLogs))
        .await
        .unwrap();
    let server = Server::serve(api).await;
    let http = Http::new(&server);
    const PODS: &str = "/api/v1/namespaces/default/pods";
    for name in ["p1", "p2"] {
        assert_eq!(http.json("POST", PODS, &pod(name)).await.0, 201);
    }
    let (_, then) = http.get(PODS).await;
    let rv = then["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    http.json("POST", PODS, &pod("p3")).await;
    http.send("DELETE", &format!("{PODS}/p1"), "", Vec::new())
        .await;

    let (code, exact) = http
        .get(&format!(
            "{PODS}?resourceVersion={rv}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(code, 200, "{exact}");
    assert_eq!(names(&exact), ["p1", "p2"]);
    assert_eq!(exact["metadata"]["resourceVersion"], rv.as_str());
    let (code, newer) = http
        .get(&format!(
            "{PODS}?resourceVersion={rv}&resourceVersionMatch=NotOlderThan"
        ))
        .await;
    assert_eq!(code, 200);
    assert_eq!(names(&newer), ["p2", "p3"]);
    // An exact list can be paged too, every page at that version.
    let (_, page) = http
        .get(&format!(
            "{PODS}?resourceVersion={rv}&resourceVersionMatch=Exact&limit=1"
        ))
        .await;
    assert_eq!(names(&page), ["p1"]);
    let token = page["metadata"]["continue"].as_str().unwrap();
    let (_, rest) = http.get(&format!("{PODS}?limit=1&continue={token}")).await;
    assert_eq!(names(&rest), ["p2"]);

    // Past the history: kube-apiserver's 410.
    for i in 0..10 {
        http.json("POST", PODS, &pod(&format!("x{i}"))).await;
    }
    let (code, gone) = http
        .get(&format!(
            "{PODS}?resourceVersion={rv}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(code, 410, "{gone}");
    assert_eq!(
        gone["message"],
        "The resourceVersion for the provided list is too old."
    );

    let (code, bad) = http
        .get(&format!(
            "{PODS}?resourceVersion=0&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(code, 422, "{bad}");
    assert_eq!(
        bad["message"],
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
    );
    assert_eq!(bad["details"]["kind"], "ListOptions");
    assert_eq!(bad["details"]["group"], "meta.k8s.io");
    let (code, bad) = http
        .get(&format!("{PODS}?watch=true&sendInitialEvents=true"))
        .await;
    assert_eq!(code, 422, "{bad}");
    assert_eq!(
        bad["details"]["causes"][0]["message"],
        "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
    );
    server.stop().await;
}
