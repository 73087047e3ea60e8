//! The REST surface checked directly over HTTP: status codes and Status bodies for bad
//! input, optimistic concurrency, patches, watch framing (Table, bookmarks, 410),
//! selectors, namespaces and events.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use apiserver::store::MemoryStore;
use apiserver::{Api, NoLogs, SystemClock};
use common::*;
use futures::StreamExt;
use serde_json::{Value, json};

fn pod(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "main", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]}]}})
}

fn assert_status(body: &Value, code: u16, reason: &str) {
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["apiVersion"], "v1");
    assert_eq!(body["status"], "Failure");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
}

const PODS: &str = "/api/v1/namespaces/default/pods";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_status_and_changes_nothing() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let rv = server.api.resource_version();

    let mut big = pod("big");
    big["metadata"]["annotations"] = json!({"x": "y".repeat(3 * 1024 * 1024 + 10)});
    let (code, body) = http.json("POST", PODS, &big).await;
    assert_eq!(code, 413);
    assert_status(&body, 413, "RequestEntityTooLarge");

    let (code, body) = http
        .send(
            "POST",
            PODS,
            "application/json",
            b"{\"metadata\": ".to_vec(),
        )
        .await;
    assert_eq!(code, 400);
    assert_status(&body, 400, "BadRequest");
    let (code, body) = http
        .send(
            "POST",
            PODS,
            "application/yaml",
            b"metadata: [unclosed".to_vec(),
        )
        .await;
    assert_eq!(code, 400);
    assert_status(&body, 400, "BadRequest");
    let (code, _) = http
        .send("POST", PODS, "application/json", b"[1,2]".to_vec())
        .await;
    assert_eq!(code, 400);

    let mut strict = pod("strict");
    strict["spec"]["bogus"] = json!(1);
    let (code, body) = http
        .json("POST", &format!("{PODS}?fieldValidation=Strict"), &strict)
        .await;
    assert_eq!(code, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"spec.bogus\""),
        "{body}"
    );

    let mut invalid = pod("Invalid");
    invalid["spec"]["containers"][0]["image"] = json!("");
    let (code, body) = http.json("POST", PODS, &invalid).await;
    assert_eq!(code, 422);
    assert_status(&body, 422, "Invalid");
    let causes = body["details"]["causes"].as_array().unwrap();
    assert!(
        causes
            .iter()
            .any(|c| c["field"] == "metadata.name" && c["reason"] == "FieldValueInvalid"),
        "{body}"
    );
    assert!(
        causes.iter().any(
            |c| c["field"] == "spec.containers[0].image" && c["reason"] == "FieldValueRequired"
        ),
        "{body}"
    );

    let (code, body) = http
        .json("POST", "/api/v1/namespaces/nowhere/pods", &pod("a"))
        .await;
    assert_eq!(code, 404);
    assert_eq!(body["message"], "namespaces \"nowhere\" not found");

    let (code, body) = http.get("/api/v1/nope").await;
    assert_eq!(code, 404);
    assert_status(&body, 404, "NotFound");
    let (code, body) = http.json("POST", "/api/v1/nodes", &json!({})).await;
    assert_eq!(code, 405);
    assert_status(&body, 405, "MethodNotAllowed");
    let (code, body) = http
        .send("PATCH", &format!("{PODS}/a"), "text/plain", b"x".to_vec())
        .await;
    assert_eq!(code, 415);
    assert_status(&body, 415, "UnsupportedMediaType");
    let (code, _) = http.get(&format!("{PODS}?labelSelector=a%20in%20(")).await;
    assert_eq!(code, 400);
    let (code, body) = http
        .get(&format!("{PODS}?fieldSelector=spec.image%3Dx"))
        .await;
    assert_eq!(code, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("field label not supported"),
        "{body}"
    );

    assert_eq!(
        server.api.resource_version(),
        rv,
        "no refused request wrote anything"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_uses_optimistic_concurrency_and_patches_of_every_kind_apply() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, created) = http.json("POST", PODS, &pod("p")).await;
    assert_eq!(code, 201);
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();

    let mut updated = created.clone();
    updated["spec"]["containers"][0]["image"] = json!("nginx:2");
    let (code, body) = http.json("PUT", &format!("{PODS}/p"), &updated).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = http.json("PUT", &format!("{PODS}/p"), &updated).await;
    assert_eq!(code, 409, "the same resourceVersion again is stale");
    assert_status(&body, 409, "Conflict");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("the object has been modified")
    );
    assert_ne!(
        rv,
        server
            .api
            .get_pod("default", "p")
            .unwrap()
            .metadata
            .resource_version
            .unwrap()
    );

    let merge = json!({"metadata": {"labels": {"app": null, "new": "yes"}}});
    let (code, body) = http
        .send(
            "PATCH",
            &format!("{PODS}/p"),
            "application/merge-patch+json",
            serde_json::to_vec(&merge).unwrap(),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["metadata"]["labels"], json!({"new": "yes"}));

    let json_patch = json!([{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:3"},
        {"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}}]);
    let (code, body) = http
        .send(
            "PATCH",
            &format!("{PODS}/p"),
            "application/json-patch+json",
            serde_json::to_vec(&json_patch).unwrap(),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["spec"]["containers"][0]["image"], "nginx:3");
    let failing = json!([{"op": "test", "path": "/spec/containers/0/image", "value": "nope"}]);
    let (code, _) = http
        .send(
            "PATCH",
            &format!("{PODS}/p"),
            "application/json-patch+json",
            serde_json::to_vec(&failing).unwrap(),
        )
        .await;
    assert_eq!(code, 422);

    let smp = json!({"spec": {"$setElementOrder/containers": [{"name": "main"}],
        "containers": [{"name": "main", "image": "nginx:4"}]}});
    let (code, body) = http
        .send(
            "PATCH",
            &format!("{PODS}/p"),
            "application/strategic-merge-patch+json",
            serde_json::to_vec(&smp).unwrap(),
        )
        .await;
    assert_eq!(code, 200, "{body}");
    let env = &body["spec"]["containers"][0]["env"];
    assert_eq!(body["spec"]["containers"][0]["image"], "nginx:4");
    assert_eq!(
        env,
        &json!([{"name": "A", "value": "1"}]),
        "containers merge by name, keeping what the patch omits"
    );

    let stale = json!({"metadata": {"resourceVersion": rv, "labels": {"x": "y"}}});
    let (code, _) = http
        .send(
            "PATCH",
            &format!("{PODS}/p"),
            "application/merge-patch+json",
            serde_json::to_vec(&stale).unwrap(),
        )
        .await;
    assert_eq!(code, 409, "a resourceVersion in a patch is a precondition");

    // Only the scheduler (in process) writes status; a client's write changes nothing.
    let status = json!({"status": {"phase": "Failed"}});
    for verb in ["PATCH", "PUT"] {
        let ct = if verb == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        let (code, body) = http
            .send(
                verb,
                &format!("{PODS}/p/status"),
                ct,
                serde_json::to_vec(&status).unwrap(),
            )
            .await;
        assert_eq!(code, 403, "{verb}: {body}");
        assert_status(&body, 403, "Forbidden");
    }
    let (_, body) = http.get(&format!("{PODS}/p")).await;
    assert_eq!(body["status"]["phase"], "Pending");
    server.stop().await;
}

async fn watch_lines(url: &str, accept: &str, n: usize) -> Vec<Value> {
    testkit::init_crypto();
    let resp = reqwest::Client::new()
        .get(url)
        .header("accept", accept)
        .send()
        .await
        .unwrap();
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
async fn watches_stream_tables_bookmarks_and_expire_old_versions() {
    let store = MemoryStore::with_history(4).unwrap();
    let api = Api::start(Arc::new(store), Arc::new(SystemClock), Arc::new(NoLogs))
        .await
        .unwrap();
    let server = Server::serve(api.clone()).await;
    let list_rv = api.resource_version();
    let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod("w")).unwrap();
    api.create_pod("default", p).await.unwrap();
    api.update_pod_status(
        "default",
        "w",
        k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();

    let table = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let events = watch_lines(
        &format!("{}{PODS}?watch=true&resourceVersion={list_rv}", server.url),
        table,
        2,
    )
    .await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[1]["type"], "MODIFIED");
    assert_eq!(events[0]["object"]["kind"], "Table");
    assert!(
        events[0]["object"]["columnDefinitions"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );
    assert!(
        events[1]["object"]["columnDefinitions"].is_null(),
        "columns only in the first event"
    );
    assert_eq!(events[1]["object"]["rows"][0]["cells"][2], "Running");
    assert_eq!(
        events[1]["object"]["rows"][0]["object"]["kind"],
        "PartialObjectMetadata"
    );

    let streaming = format!(
        "{}{PODS}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
        server.url
    );
    let events = watch_lines(&streaming, "application/json", 2).await;
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["kind"], "Pod");
    assert_eq!(events[1]["type"], "BOOKMARK");
    assert_eq!(events[1]["object"]["kind"], "Pod");
    assert_eq!(events[1]["object"]["apiVersion"], "v1");
    assert_eq!(
        events[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );

    // The streaming list's other form: from now on, without the state. The watch
    // is registered before its answer's head is sent, so a pod made after it shows.
    let from_now = format!(
        "{}{PODS}?watch=true&sendInitialEvents=false&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan",
        server.url
    );
    let resp = reqwest::Client::new().get(&from_now).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let p: k8s_openapi::api::core::v1::Pod = serde_json::from_value(pod("later")).unwrap();
    api.create_pod("default", p).await.unwrap();
    let mut stream = resp.bytes_stream();
    let mut buf = Vec::new();
    while !buf.contains(&b'\n') {
        let chunk = tokio::time::timeout(Duration::from_secs(20), stream.next())
            .await
            .expect("an event in time")
            .unwrap()
            .unwrap();
        buf.extend_from_slice(&chunk);
    }
    let first: Value =
        serde_json::from_slice(&buf[..buf.iter().position(|b| *b == b'\n').unwrap()]).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["metadata"]["name"], "later", "{first}");

    for i in 0..6 {
        let p: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(pod(&format!("x{i}"))).unwrap();
        api.create_pod("default", p).await.unwrap();
    }
    let events = watch_lines(
        &format!("{}{PODS}?watch=true&resourceVersion={list_rv}", server.url),
        "application/json",
        1,
    )
    .await;
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    assert_eq!(events[0]["object"]["reason"], "Expired");

    let absurd = format!(
        "{}{PODS}?watch=true&timeoutSeconds=9223372036854775807",
        server.url
    );
    let events = watch_lines(&absurd, "application/json", 1).await;
    assert_eq!(
        events[0]["type"], "ADDED",
        "an absurd timeout is clamped, not a crash"
    );

    let selected = format!(
        "{}{PODS}?watch=true&fieldSelector=metadata.name%3Dx5",
        server.url
    );
    let events = watch_lines(&selected, "application/json", 1).await;
    assert_eq!(
        events[0]["object"]["metadata"]["name"], "x5",
        "a watch without resourceVersion starts with the selected objects"
    );

    // A watch still open does not hold the server's shutdown up.
    testkit::init_crypto();
    let open = reqwest::Client::new()
        .get(format!("{}{PODS}?watch=true", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(open.status().as_u16(), 200);
    tokio::time::timeout(Duration::from_secs(10), server.stop())
        .await
        .expect("shutdown ends open watches");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_and_events_follow_kubernetes_rules() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, _) = http
        .json(
            "POST",
            "/api/v1/namespaces",
            &json!({"metadata": {"name": "tmp"}}),
        )
        .await;
    assert_eq!(code, 201);
    let (code, body) = http
        .json(
            "POST",
            "/api/v1/namespaces",
            &json!({"metadata": {"name": "Not_A_Label"}}),
        )
        .await;
    assert_eq!(code, 422, "{body}");
    let (code, _) = http
        .json("POST", "/api/v1/namespaces/tmp/pods", &pod("inside"))
        .await;
    assert_eq!(code, 201);
    let (code, body) = http
        .send("DELETE", "/api/v1/namespaces/tmp", "", Vec::new())
        .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["status"]["phase"], "Terminating", "{body}");
    let (code, body) = http
        .json("POST", "/api/v1/namespaces/tmp/pods", &pod("late"))
        .await;
    // 403 while it is terminating; the unbound pod leaves at once, so the finalizer
    // may have removed the namespace already (404, as kube-apiserver answers then).
    if code == 404 {
        assert_eq!(body["message"], "namespaces \"tmp\" not found", "{body}");
    } else {
        assert_eq!(code, 403, "{body}");
        assert_eq!(
            body["message"],
            "pods \"late\" is forbidden: unable to create new content in namespace tmp because it is being terminated"
        );
        assert_eq!(
            body["details"]["causes"][0]["reason"],
            "NamespaceTerminating"
        );
    }
    let (code, body) = http
        .send("DELETE", "/api/v1/namespaces/tmp", "", Vec::new())
        .await;
    // 409 while it is still terminating; the unbound pod leaves at once, so
    // the finalizer may have removed the namespace already (404).
    assert!(
        code == 409 || code == 404,
        "a second delete while terminating: {body}"
    );
    // The unbound pod leaves at once, so the namespace follows without a sweep.
    testkit::wait_until(
        "the emptied namespace to go",
        Duration::from_secs(10),
        async || http.get("/api/v1/namespaces/tmp").await,
        |(code, _)| *code == 404,
    )
    .await;
    assert_eq!(http.get("/api/v1/namespaces/tmp/pods/inside").await.0, 404);
    let (code, body) = http
        .send("DELETE", "/api/v1/namespaces/default", "", Vec::new())
        .await;
    assert_eq!(code, 403);
    assert_status(&body, 403, "Forbidden");

    for (name, reason) in [("a", "Scheduled"), ("b", "Pulled")] {
        let ev = json!({"metadata": {"name": format!("{name}.1")}, "involvedObject": {"kind": "Pod", "name": name, "namespace": "default", "uid": format!("uid-{name}")},
            "reason": reason, "message": "m", "type": "Normal"});
        let (code, body) = http
            .json("POST", "/api/v1/namespaces/default/events", &ev)
            .await;
        assert_eq!(code, 201, "{body}");
        assert_eq!(body["count"], 1);
    }
    let (_, list) = http.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Db,involvedObject.uid%3Duid-b").await;
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["reason"], "Pulled");
    let (_, all) = http
        .get("/api/v1/events?fieldSelector=involvedObject.kind%3DPod")
        .await;
    assert_eq!(all["items"].as_array().unwrap().len(), 2);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_version_and_openapi_answer_what_kubectl_needs() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (_, v) = http.get("/version").await;
    assert_eq!(
        (v["major"].as_str(), v["minor"].as_str()),
        (Some("1"), Some("33"))
    );
    let (_, r) = http.get("/api/v1").await;
    let names: Vec<&str> = r["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    for n in [
        "pods",
        "pods/log",
        "pods/status",
        "nodes",
        "events",
        "namespaces",
    ] {
        assert!(names.contains(&n), "{names:?}");
    }
    let (_, idx) = http.get("/openapi/v3").await;
    let url = idx["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, doc) = http.get(&url).await;
    let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
    assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Pod");
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_stores_nothing_and_unknown_fields_warn_by_default() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let rv = server.api.resource_version();
    let (code, body) = http
        .json("POST", &format!("{PODS}?dryRun=All"), &pod("dry"))
        .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["phase"], "Pending");
    assert_eq!(server.api.resource_version(), rv);
    assert_eq!(http.get(&format!("{PODS}/dry")).await.0, 404);

    let mut extra = pod("warned");
    extra["spec"]["madeUp"] = json!(true);
    testkit::init_crypto();
    let resp = reqwest::Client::new()
        .post(format!("{}{PODS}", server.url))
        .json(&extra)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let warning = resp
        .headers()
        .get("warning")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        warning.starts_with("299 - ") && warning.contains("spec.madeUp"),
        "{warning}"
    );
    server.stop().await;
}
