//! Restart durability: stop the server, reopen the same data directory, find everything
//! as it was, resourceVersions included.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::shim::*;
use common::*;
use testkit::{KUBECTL, ok};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_and_resource_versions_survive_a_restart_on_the_same_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let server = Server::start_on(tmp.path()).await;
    for i in 0..5 {
        ok(&kubectl(KUBECTL, &server.url)
            .run_stdin(
                &["create", "-f", "-"],
                Some(&pod_yaml(&format!("keep-{i}"), "nginx", "a: b")),
            )
            .await);
    }
    ok(&kubectl(KUBECTL, &server.url)
        .run(&["create", "namespace", "extra"])
        .await);
    ok(&kubectl(KUBECTL, &server.url)
        .run(&["delete", "pod", "keep-4"])
        .await);
    server
        .api
        .put_meta("framework-id", b"fw-1".to_vec())
        .await
        .unwrap();
    let before = server.api.list_pods(None, "", "").unwrap();
    let rv_before = server.api.resource_version();
    let yaml_before = ok(&kubectl(KUBECTL, &server.url)
        .run(&["get", "pods", "-o", "yaml"])
        .await);
    server.stop().await;

    let server = Server::start_on(tmp.path()).await;
    let after = server.api.list_pods(None, "", "").unwrap();
    assert_eq!(
        after.items, before.items,
        "same objects, same uids, same resourceVersions"
    );
    assert_eq!(server.api.resource_version(), rv_before);
    assert_eq!(
        server.api.get_meta("framework-id").as_deref(),
        Some(&b"fw-1"[..])
    );
    assert_eq!(
        ok(&kubectl(KUBECTL, &server.url)
            .run(&["get", "pods", "-o", "yaml"])
            .await),
        yaml_before
    );
    assert!(
        ok(&kubectl(KUBECTL, &server.url)
            .run(&["get", "namespaces"])
            .await)
        .contains("extra")
    );

    ok(&kubectl(KUBECTL, &server.url)
        .run_stdin(
            &["create", "-f", "-"],
            Some(&pod_yaml("fresh", "nginx", "a: b")),
        )
        .await);
    let fresh = server.api.get_pod("default", "fresh").unwrap();
    let rv: u64 = fresh.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv > rv_before, "versions keep counting up after a restart");
    server.stop().await;
}
