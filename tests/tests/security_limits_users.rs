//! The limits and the audit log name the authenticated user, as
//! kube-apiserver's do (authentication runs before them): an audit line of
//! a token user shows that user and groups, one whose token is refused has
//! no user and code 401, and `--max-watches-per-user` counts per user, not
//! per client address.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::secure::Secure;
use serde_json::Value;

fn events(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// An HTTPS client trusting mesopod's CA.
fn client(secure: &Secure) -> reqwest::Client {
    let pem = std::fs::read(secure.data_dir().join("pki/ca.crt")).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_and_the_watch_cap_name_the_authenticated_user() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("audit.log");
    let secure = Secure::start_with(|cfg| {
        cfg.hardening.audit_log_path = Some(log.clone());
        cfg.hardening.limits.max_watches_per_user = 2;
    })
    .await;
    let granted = secure
        .admin(
            testkit::KUBECTL,
            &[
                "create",
                "clusterrolebinding",
                "viewers",
                "--clusterrole=view",
                "--user=alice",
                "--user=victor",
            ],
        )
        .await;
    assert!(granted.status.success(), "{granted:?}");
    let http = client(&secure);
    let base = secure.app.api_url();
    let pods = format!("{base}/api/v1/namespaces/default/pods");

    let listed = http
        .get(&pods)
        .bearer_auth("alice-token")
        .send()
        .await
        .unwrap();
    assert_eq!(listed.status(), 200);
    let audit_id = listed.headers()["audit-id"].to_str().unwrap().to_owned();
    let refused = http
        .get(&pods)
        .bearer_auth("wrong-token")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let refused_id = refused.headers()["audit-id"].to_str().unwrap().to_owned();
    let seen = testkit::wait_until(
        "both requests audited",
        Duration::from_secs(10),
        async || events(&log),
        |e| {
            [&audit_id, &refused_id]
                .iter()
                .all(|id| e.iter().any(|ev| ev["auditID"] == id.as_str()))
        },
    )
    .await;
    let alice = seen
        .iter()
        .find(|e| e["auditID"] == audit_id.as_str())
        .unwrap();
    assert_eq!(alice["user"]["username"], "alice", "{alice}");
    assert_eq!(alice["user"]["uid"], "1000", "{alice}");
    assert!(
        alice["user"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g == "system:authenticated"),
        "{alice}"
    );
    let nobody = seen
        .iter()
        .find(|e| e["auditID"] == refused_id.as_str())
        .unwrap();
    assert_eq!(nobody["user"], serde_json::json!({}), "{nobody}");
    assert_eq!(nobody["responseStatus"]["code"], 401, "{nobody}");

    // Two watches for alice; her third is refused. victor, from the same
    // address, still gets his: the cap counts users, not addresses.
    let watch = |token: &'static str| {
        let (http, url) = (http.clone(), format!("{pods}?watch=true"));
        async move { http.get(url).bearer_auth(token).send().await.unwrap() }
    };
    let held = vec![watch("alice-token").await, watch("alice-token").await];
    assert!(held.iter().all(|r| r.status() == 200));
    assert_eq!(watch("alice-token").await.status(), 429);
    let victor = watch("victor-token").await;
    assert_eq!(
        victor.status(),
        200,
        "another user is not counted against alice"
    );
    drop(held);
    drop(victor);
    secure.app.shutdown().await;
}
