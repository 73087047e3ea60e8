//! ConfigMaps, Secrets and ServiceAccounts over HTTP, and the validation gaps fuzzing
//! found: duplicate keys under strict validation, a resourceVersion ahead of the store,
//! unknown paths.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use serde_json::json;

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const SECRETS: &str = "/api/v1/namespaces/default/secrets";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_keys_are_refused_under_strict_validation_and_warned_about_otherwise() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let body =
        br#"{"metadata": {"name": "a", "name": "b"}, "data": {"k": "1", "k": "2"}}"#.to_vec();
    let (code, status) = http
        .send(
            "POST",
            &format!("{CMS}?fieldValidation=Strict"),
            "application/json",
            body.clone(),
        )
        .await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(
        status["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: duplicate field \"metadata.name\", duplicate field \"data.k\""
    );
    assert_eq!(
        http.get(&format!("{CMS}/b")).await.0,
        404,
        "nothing was stored"
    );
    testkit::init_crypto();
    let resp = reqwest::Client::new()
        .post(format!("{}{CMS}", server.url))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status().as_u16(),
        201,
        "Warn (the default) stores the last value"
    );
    let warnings: Vec<&str> = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(
        warnings,
        [
            "299 - \"duplicate field \\\"metadata.name\\\"\"",
            "299 - \"duplicate field \\\"data.k\\\"\""
        ]
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_or_watch_ahead_of_the_store_is_504_and_unknown_paths_are_kube_apiservers_404() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let ahead = server.api.resource_version() + 100;
    for path in [
        format!("/api/v1/pods?resourceVersion={ahead}"),
        format!("{CMS}?watch=true&resourceVersion={ahead}"),
    ] {
        let (code, body) = http.get(&path).await;
        assert_eq!(code, 504, "{path}: {body}");
        assert_eq!(body["reason"], "Timeout");
        assert_eq!(
            body["details"]["causes"][0]["reason"],
            "ResourceVersionTooLarge"
        );
        assert!(
            body["message"].as_str().unwrap().starts_with(&format!(
                "Timeout: Too large resource version: {ahead}, current: "
            )),
            "{body}"
        );
    }
    for path in [
        "/api/v1/namespaces/default/widgets",
        "/apis/networking.k8s.io/v1/ingresses",
    ] {
        let (code, body) = http.get(path).await;
        assert_eq!(code, 404);
        assert_eq!(
            body,
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "the server could not find the requested resource", "reason": "NotFound",
                "details": {}, "code": 404})
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_decoded_validated_and_deleted_without_ever_quoting_a_value() {
    let server = Server::start().await;
    let http = Http::new(&server);
    let (code, body) = http
        .json(
            "POST",
            SECRETS,
            &json!({"metadata": {"name": "s"}, "data": {"k": "hunter2!!"}}),
        )
        .await;
    assert_eq!(code, 400, "{body}");
    assert!(!body.to_string().contains("hunter2"), "{body}");
    let (code, body) = http
        .json(
            "POST",
            SECRETS,
            &json!({"metadata": {"name": "pull"}, "type": "kubernetes.io/dockerconfigjson",
                "stringData": {".dockerconfigjson": "[\"hunter2\"]"}}),
        )
        .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "Invalid value: \"<secret contents redacted>\": json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
    assert!(!body.to_string().contains("hunter2"), "{body}");

    let (code, created) = http
        .json(
            "POST",
            SECRETS,
            &json!({"metadata": {"name": "ok"}, "stringData": {"k": "v"}}),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["data"]["k"], "dg==");
    assert!(created.get("stringData").is_none());
    let (_, list) = http
        .get(&format!("{SECRETS}?fieldSelector=type%3DOpaque"))
        .await;
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
    let (code, gone) = http
        .send("DELETE", &format!("{SECRETS}/ok"), "", Vec::new())
        .await;
    assert_eq!(code, 200);
    assert_eq!(gone["status"], "Success");
    assert_eq!(gone["details"]["kind"], "secrets");
    assert_eq!(gone["details"]["uid"], created["metadata"]["uid"]);
    assert_eq!(
        http.send("DELETE", &format!("{SECRETS}/ok"), "", Vec::new())
            .await
            .0,
        404
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_maps_replace_with_preconditions_and_creates_in_a_terminating_namespace_are_refused()
{
    let server = Server::start().await;
    let http = Http::new(&server);
    let (_, cm) = http
        .json(
            "POST",
            CMS,
            &json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
        )
        .await;
    let rv = cm["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let (code, new) = http
        .json(
            "PUT",
            &format!("{CMS}/c"),
            &json!({"metadata": {"name": "c", "resourceVersion": rv}, "data": {"a": "2"}}),
        )
        .await;
    assert_eq!(code, 200, "{new}");
    assert_eq!(new["metadata"]["uid"], cm["metadata"]["uid"]);
    let (code, _) = http
        .json(
            "PUT",
            &format!("{CMS}/c"),
            &json!({"metadata": {"name": "c", "resourceVersion": rv}, "data": {"a": "3"}}),
        )
        .await;
    assert_eq!(code, 409, "a stale resourceVersion");

    http.json(
        "POST",
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "gone"}}),
    )
    .await;
    let (code, sa) = http
        .get("/api/v1/namespaces/gone/serviceaccounts/default")
        .await;
    assert_eq!(
        code, 200,
        "a namespace comes with its default account: {sa}"
    );
    http.json(
        "POST",
        "/api/v1/namespaces/gone/pods",
        &json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    )
    .await;
    let binding = apiserver::Binding {
        node_name: "n1".into(),
        ..Default::default()
    };
    server.api.bind_pod("gone", "p", &binding).await.unwrap();
    let (code, ns) = http
        .send("DELETE", "/api/v1/namespaces/gone", "", Vec::new())
        .await;
    assert_eq!(
        (code, ns["status"]["phase"].as_str()),
        (200, Some("Terminating"))
    );
    let (code, body) = http
        .json(
            "POST",
            "/api/v1/namespaces/gone/configmaps",
            &json!({"metadata": {"name": "late"}}),
        )
        .await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(body["details"]["causes"][0]["field"], "metadata.namespace");
    // The bound pod holds the namespace until its task ends (the framework finalizes it).
    server.api.finalize_namespaces().await.unwrap();
    let (_, pod) = http.get("/api/v1/namespaces/gone/pods/p").await;
    assert!(pod["metadata"]["deletionTimestamp"].is_string(), "{pod}");
    assert_eq!(http.get("/api/v1/namespaces/gone").await.0, 200);
    let uid = pod["metadata"]["uid"].as_str().unwrap();
    server
        .api
        .finalize_pod("gone", "p", Some(uid))
        .await
        .unwrap();
    // The server's own sweep may get there first; either way it is gone now.
    server.api.finalize_namespaces().await.unwrap();
    assert_eq!(http.get("/api/v1/namespaces/gone").await.0, 404);
    assert_eq!(
        http.get("/api/v1/namespaces/gone/serviceaccounts/default")
            .await
            .0,
        404
    );
    server.stop().await;
}
