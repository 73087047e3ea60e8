//! The real kubectl against the shim: create, get in every output form, and errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::shim::*;
use common::*;
use testkit::{KUBECTL, ok, stderr};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_then_get_in_every_form_with_each_kubectl() {
    let server = Server::start().await;
    for (i, k) in ALL_KUBECTLS.iter().enumerate() {
        let name = format!("web-{i}");
        let out = kubectl(k, &server.url)
            .run_stdin(
                &["create", "-f", "-"],
                Some(&pod_yaml(&name, "nginx:1.25", "app: web, tier: front")),
            )
            .await;
        assert_eq!(ok(&out).trim(), format!("pod/{name} created"), "{k}");

        let table = ok(&kubectl(k, &server.url).run(&["get", "pods"]).await);
        let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
            "{k}: {table}"
        );
        let row = table
            .lines()
            .find(|l| l.starts_with(&name))
            .unwrap_or_else(|| panic!("{k}: {table}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[..4], [name.as_str(), "0/1", "Pending", "0"], "{k}");
        assert!(
            cells[4].ends_with('s'),
            "AGE is formatted by the server: {row}"
        );

        let wide = ok(&kubectl(k, &server.url)
            .run(&["get", "pods", "-o", "wide"])
            .await);
        let header = wide.lines().next().unwrap();
        for col in ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"] {
            assert!(header.contains(col), "{k}: wide lacks {col}: {header}");
        }

        let yaml = ok(&kubectl(k, &server.url)
            .run(&["get", "pod", &name, "-o", "yaml"])
            .await);
        assert!(
            yaml.contains("kind: Pod")
                && yaml.contains("image: nginx:1.25")
                && yaml.contains("phase: Pending"),
            "{yaml}"
        );
        assert!(
            yaml.contains("resourceVersion:") && yaml.contains("uid:"),
            "{yaml}"
        );

        let list: serde_json::Value = serde_json::from_str(&ok(&kubectl(k, &server.url)
            .run(&["get", "pods", "-o", "json"])
            .await))
        .unwrap();
        assert_eq!(
            list["kind"], "List",
            "kubectl wraps items in a List for -o json"
        );
        assert!(
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["metadata"]["name"] == name.as_str())
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_namespaces_and_label_selectors_filter_as_kubectl_users_expect() {
    let server = Server::start().await;
    let k = KUBECTL;
    ok(&kubectl(k, &server.url)
        .run(&["create", "namespace", "team-a"])
        .await);
    ok(&kubectl(k, &server.url)
        .run_stdin(
            &["create", "-f", "-"],
            Some(&pod_yaml("front", "nginx", "app: web")),
        )
        .await);
    ok(&kubectl(k, &server.url)
        .run_stdin(
            &["create", "-n", "team-a", "-f", "-"],
            Some(&pod_yaml("db", "postgres", "app: db")),
        )
        .await);

    let all = ok(&kubectl(k, &server.url).run(&["get", "pods", "-A"]).await);
    assert!(
        all.lines().next().unwrap().starts_with("NAMESPACE"),
        "{all}"
    );
    assert!(
        all.contains("team-a") && all.contains("db") && all.contains("front"),
        "{all}"
    );

    let web = ok(&kubectl(k, &server.url)
        .run(&["get", "pods", "-A", "-l", "app=web", "-o", "name"])
        .await);
    assert_eq!(web.trim(), "pod/front");
    let not_web = ok(&kubectl(k, &server.url)
        .run(&["get", "pods", "-A", "-l", "app notin (web)", "-o", "name"])
        .await);
    assert_eq!(not_web.trim(), "pod/db");
    let default_only = ok(&kubectl(k, &server.url)
        .run(&["get", "pods", "-o", "name"])
        .await);
    assert_eq!(default_only.trim(), "pod/front");

    let namespaces = ok(&kubectl(k, &server.url).run(&["get", "namespaces"]).await);
    for ns in ["default", "kube-system", "team-a"] {
        assert!(namespaces.contains(ns), "{namespaces}");
    }
    // Deleting a namespace takes its pods with it (issue 18), as in Kubernetes.
    let gone = ok(&kubectl(k, &server.url)
        .run(&["delete", "namespace", "team-a"])
        .await);
    assert_eq!(gone.trim(), "namespace \"team-a\" deleted");
    let db = kubectl(k, &server.url)
        .run(&["get", "pod", "db", "-n", "team-a"])
        .await;
    assert!(stderr(&db).contains("not found"), "{}", stderr(&db));
    let system = kubectl(k, &server.url)
        .run(&["delete", "namespace", "kube-system"])
        .await;
    assert!(
        stderr(&system).contains("may not be deleted"),
        "{}",
        stderr(&system)
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_missing_and_invalid_pods_are_refused_with_kubernetes_errors() {
    let server = Server::start().await;
    for k in [KUBECTL_131, KUBECTL_133] {
        ok(&kubectl(k, &server.url)
            .run_stdin(
                &["create", "-f", "-"],
                Some(&pod_yaml("dup", "nginx", "a: b")),
            )
            .await);
        let rv_before = server.api.resource_version();

        let dup = kubectl(k, &server.url)
            .run_stdin(
                &["create", "-f", "-"],
                Some(&pod_yaml("dup", "nginx", "a: b")),
            )
            .await;
        assert!(!dup.status.success());
        assert!(
            stderr(&dup).contains(r#"pods "dup" already exists"#),
            "{k}: {}",
            stderr(&dup)
        );

        let missing = kubectl(k, &server.url).run(&["get", "pod", "nope"]).await;
        assert!(!missing.status.success());
        assert!(
            stderr(&missing).contains(r#"pods "nope" not found"#),
            "{k}: {}",
            stderr(&missing)
        );

        let bad = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: Bad_Name\nspec:\n  restartPolicy: Sometimes\n  containers:\n  - name: a\n    image: x\n    resources: {limits: {cpu: lots}}\n  - name: a\n";
        let invalid = kubectl(k, &server.url)
            .run_stdin(&["create", "-f", "-"], Some(bad))
            .await;
        assert!(!invalid.status.success());
        let err = stderr(&invalid);
        assert!(err.contains(r#"Pod "Bad_Name" is invalid"#), "{k}: {err}");
        for cause in [
            "metadata.name: Invalid value",
            "spec.restartPolicy: Unsupported value",
            "spec.containers[1].name: Duplicate value",
            "spec.containers[1].image: Required value",
            "resources.limits[cpu]: Invalid value",
        ] {
            assert!(err.contains(cause), "{k}: missing {cause} in {err}");
        }

        let unknown = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: strict\nspec:\n  containers:\n  - name: a\n    image: x\n    imagePolcy: Always\n";
        let strict = kubectl(k, &server.url)
            .run_stdin(&["create", "-f", "-"], Some(unknown))
            .await;
        assert!(!strict.status.success());
        assert!(
            stderr(&strict).contains("unknown field \"spec.containers[0].imagePolcy\""),
            "{k}: {}",
            stderr(&strict)
        );

        assert_eq!(
            server.api.resource_version(),
            rv_before,
            "refused requests change nothing"
        );
        ok(&kubectl(k, &server.url).run(&["delete", "pod", "dup"]).await);
    }
    server.stop().await;
}
