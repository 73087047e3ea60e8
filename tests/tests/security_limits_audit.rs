//! `--audit-log-path`: one audit.k8s.io/v1 Event per request as a JSON line,
//! level Metadata: who, the verb, the object, the answer code, with the
//! `Audit-Id` the response carried; no request or response bodies. A watch
//! gets ResponseStarted, then ResponseComplete when it ends.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::cluster::{Setup, app_config};
use serde_json::Value;

fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

async fn wait_events(path: &Path, n: usize) -> Vec<Value> {
    testkit::wait_until(
        "audit events written",
        Duration::from_secs(10),
        async || events(path),
        |e| e.len() >= n,
    )
    .await
}

#[tokio::test]
async fn every_request_is_audited_at_level_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("audit.log");
    let mut cfg = app_config(Setup {
        agents: vec![],
        ..Setup::default()
    });
    cfg.hardening.audit_log_path = Some(log.clone());
    let app = framework::app::App::start(cfg).await.unwrap();
    let base = app.api_url();
    testkit::init_crypto();
    let http = reqwest::Client::new();
    let secret_note = "do-not-log-this-body";

    let created = http
        .post(format!("{base}/api/v1/namespaces/default/pods"))
        .header("Content-Type", "application/json")
        .header("User-Agent", "audit-test/1.0")
        .body(format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","annotations":{{"n":"{secret_note}"}}}},"spec":{{"containers":[{{"name":"c","image":"busybox"}}]}}}}"#
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let audit_id = created.headers()["audit-id"].to_str().unwrap().to_owned();
    let get = http
        .get(format!("{base}/api/v1/namespaces/default/pods/p"))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 200);
    let missing = http
        .get(format!("{base}/api/v1/namespaces/default/pods/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
    let list = http
        .get(format!("{base}/api/v1/pods"))
        .send()
        .await
        .unwrap();
    assert_eq!(list.status(), 200);
    let deleted = http
        .delete(format!("{base}/api/v1/namespaces/default/pods/p"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);

    let all = wait_events(&log, 5).await;
    let ours: Vec<&Value> = all
        .iter()
        .filter(|e| e["requestURI"].as_str().unwrap().starts_with("/api/v1/"))
        .collect();
    let verbs: Vec<(&str, u64)> = ours
        .iter()
        .map(|e| {
            (
                e["verb"].as_str().unwrap(),
                e["responseStatus"]["code"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        verbs,
        [
            ("create", 201),
            ("get", 200),
            ("get", 404),
            ("list", 200),
            ("delete", 200)
        ]
    );
    let create = ours[0];
    assert_eq!(create["kind"], "Event");
    assert_eq!(create["apiVersion"], "audit.k8s.io/v1");
    assert_eq!(create["level"], "Metadata");
    assert_eq!(create["stage"], "ResponseComplete");
    assert_eq!(create["auditID"], audit_id.as_str());
    assert_eq!(create["user"]["username"], "system:anonymous");
    assert_eq!(create["user"]["groups"][0], "system:unauthenticated");
    assert_eq!(create["sourceIPs"][0], "127.0.0.1");
    assert_eq!(create["userAgent"], "audit-test/1.0");
    assert_eq!(
        create["objectRef"],
        serde_json::json!({"resource": "pods", "namespace": "default", "apiVersion": "v1"})
    );
    assert_eq!(ours[1]["objectRef"]["name"], "p");
    for e in &ours {
        let received = e["requestReceivedTimestamp"].as_str().unwrap();
        assert_eq!(
            received.len(),
            "2026-01-01T00:00:00.000000Z".len(),
            "{received}"
        );
        assert!(e.get("requestObject").is_none() && e.get("responseObject").is_none());
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains(secret_note),
        "bodies are not logged at Metadata"
    );

    // A watch: ResponseStarted at once, ResponseComplete when it ends.
    let before = events(&log).len();
    let mut watch = http
        .get(format!(
            "{base}/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1"
        ))
        .send()
        .await
        .unwrap();
    let started = wait_events(&log, before + 1).await;
    let w = &started[before];
    assert_eq!(
        (w["verb"].as_str(), w["stage"].as_str()),
        (Some("watch"), Some("ResponseStarted"))
    );
    while watch.chunk().await.unwrap().is_some() {}
    let ended = wait_events(&log, before + 2).await;
    let w2 = &ended[before + 1];
    assert_eq!(w2["stage"], "ResponseComplete");
    assert_eq!(w2["auditID"], w["auditID"]);
    app.shutdown().await;
}
