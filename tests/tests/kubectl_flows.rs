//! The real kubectl through whole workflows: apply (client- and server-side), label,
//! watch, describe with events, delete that waits for the framework, nodes, logs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use apiserver::{Binding, Finalized};
use common::shim::*;
use common::*;
use k8s_openapi::api::core::v1::{
    Event, Node, NodeAddress, NodeCondition, NodeStatus, NodeSystemInfo, ObjectReference, PodStatus,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use std::process::Stdio;
use testkit::{KUBECTL, ok, stderr, wait_until};

use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_creates_then_patches_and_server_side_apply_creates_when_missing() {
    let server = Server::start().await;
    for k in [KUBECTL, KUBECTL_131] {
        let name = if k == KUBECTL {
            "applied"
        } else {
            "applied-old"
        };
        let created = kubectl(k, &server.url)
            .run_stdin(
                &["apply", "-f", "-"],
                Some(&pod_yaml(name, "nginx:1", "app: web")),
            )
            .await;
        assert_eq!(ok(&created).trim(), format!("pod/{name} created"), "{k}");
        let pod = server.api.get_pod("default", name).unwrap();
        assert!(
            pod.metadata
                .annotations
                .unwrap()
                .contains_key("kubectl.kubernetes.io/last-applied-configuration")
        );

        let unchanged = kubectl(k, &server.url)
            .run_stdin(
                &["apply", "-f", "-"],
                Some(&pod_yaml(name, "nginx:1", "app: web")),
            )
            .await;
        assert_eq!(
            ok(&unchanged).trim(),
            format!("pod/{name} unchanged"),
            "{k}"
        );

        let updated = kubectl(k, &server.url)
            .run_stdin(
                &["apply", "-f", "-"],
                Some(&pod_yaml(name, "nginx:2", "app: web, v: two")),
            )
            .await;
        assert_eq!(ok(&updated).trim(), format!("pod/{name} configured"), "{k}");
        let pod = server.api.get_pod("default", name).unwrap();
        let spec = pod.spec.unwrap();
        assert_eq!(spec.containers.len(), 1);
        assert_eq!(spec.containers[0].image.as_deref(), Some("nginx:2"));
        assert_eq!(
            spec.containers[0].ports.as_ref().unwrap()[0].container_port,
            80,
            "untouched fields stay"
        );
        assert_eq!(
            pod.metadata.labels.unwrap().get("v").map(String::as_str),
            Some("two")
        );

        let forbidden = kubectl(k, &server.url)
            .run_stdin(
                &["apply", "-f", "-"],
                Some(
                    &pod_yaml(name, "nginx:2", "app: web, v: two")
                        .replace("containerPort: 80", "containerPort: 81"),
                ),
            )
            .await;
        assert!(
            !forbidden.status.success(),
            "{k}: pod spec changes beyond the image are refused"
        );
        assert!(
            stderr(&forbidden).contains("Forbidden: pod updates may not change fields"),
            "{}",
            stderr(&forbidden)
        );
    }

    let ssa = kubectl(KUBECTL, &server.url)
        .run_stdin(
            &["apply", "--server-side", "-f", "-"],
            Some(&pod_yaml("ssa", "redis:7", "app: cache")),
        )
        .await;
    assert_eq!(ok(&ssa).trim(), "pod/ssa serverside-applied");
    let again = kubectl(KUBECTL, &server.url)
        .run_stdin(
            &["apply", "--server-side", "-f", "-"],
            Some(&pod_yaml("ssa", "redis:8", "app: cache")),
        )
        .await;
    assert_eq!(ok(&again).trim(), "pod/ssa serverside-applied");
    assert_eq!(image(&server, "ssa").as_deref(), Some("redis:8"));

    ok(&kubectl(KUBECTL, &server.url)
        .run(&["label", "pod", "ssa", "team=blue"])
        .await);
    ok(&kubectl(KUBECTL, &server.url)
        .run(&["annotate", "pod", "ssa", "note=hi"])
        .await);
    let pod = server.api.get_pod("default", "ssa").unwrap();
    assert_eq!(pod.metadata.labels.unwrap()["team"], "blue");
    assert_eq!(pod.metadata.annotations.unwrap()["note"], "hi");

    let replaced = kubectl(KUBECTL, &server.url)
        .run_stdin(
            &["replace", "-f", "-"],
            Some(&pod_yaml("ssa", "redis:9", "app: cache")),
        )
        .await;
    assert_eq!(ok(&replaced).trim(), "pod/ssa replaced");
    assert_eq!(image(&server, "ssa").as_deref(), Some("redis:9"));
    server.stop().await;
}

/// The image of the pod's first container, as stored.
fn image(server: &Server, name: &str) -> Option<String> {
    server
        .api
        .get_pod("default", name)
        .unwrap()
        .spec
        .unwrap()
        .containers[0]
        .image
        .clone()
}

/// Reads lines from a running `kubectl get -w` until one contains all of `want`.
async fn expect_line(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    want: &[&str],
    seen: &mut Vec<String>,
) {
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            seen.push(line.clone());
            if want.iter().all(|w| line.contains(w)) {
                return true;
            }
        }
        false
    })
    .await;
    assert!(
        matches!(found, Ok(true)),
        "no line with {want:?} in {seen:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_sees_added_modified_and_deleted_in_order() {
    let server = Server::start().await;
    for k in [KUBECTL, KUBECTL_131] {
        let name = if k == KUBECTL {
            "watched"
        } else {
            "watched-old"
        };
        let mut child = kubectl(k, &server.url).start(
            &["get", "pods", "-w", "--output-watch-events"],
            Stdio::piped(),
            Stdio::null(),
        );
        let mut lines = BufReader::new(child.child.stdout.take().unwrap()).lines();
        let mut seen = Vec::new();
        // Whether the pod lands in kubectl's initial list or in its watch, it shows as
        // ADDED; what follows comes through the watch.
        let pod: k8s_openapi::api::core::v1::Pod =
            serde_yaml_ng::from_str(&pod_yaml(name, "nginx", "w: x")).unwrap();
        server.api.create_pod("default", pod).await.unwrap();
        expect_line(&mut lines, &["ADDED", name, "Pending"], &mut seen).await;

        let status = PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        };
        server
            .api
            .update_pod_status("default", name, status)
            .await
            .unwrap();
        expect_line(&mut lines, &["MODIFIED", name, "Running"], &mut seen).await;

        server
            .api
            .delete_pod("default", name, &Default::default())
            .await
            .unwrap();
        expect_line(&mut lines, &["DELETED", name], &mut seen).await;

        child.kill().await.unwrap();
        let order: Vec<&str> = seen
            .iter()
            .filter(|l| l.contains(name))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(order, ["ADDED", "MODIFIED", "DELETED"], "{k}");
    }

    // Plain `-w` (rows only, no event column) with the newest kubectl run directly.
    let mut child = kubectl(KUBECTL_133, &server.url).start(
        &["get", "pods", "-w"],
        Stdio::piped(),
        Stdio::null(),
    );
    let mut lines = BufReader::new(child.child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let pod: k8s_openapi::api::core::v1::Pod =
        serde_yaml_ng::from_str(&pod_yaml("plain", "nginx", "w: x")).unwrap();
    server.api.create_pod("default", pod).await.unwrap();
    expect_line(&mut lines, &["plain", "Pending"], &mut seen).await;
    let status = PodStatus {
        phase: Some("Running".into()),
        ..Default::default()
    };
    server
        .api
        .update_pod_status("default", "plain", status)
        .await
        .unwrap();
    expect_line(&mut lines, &["plain", "Running"], &mut seen).await;
    child.kill().await.unwrap();
    server.stop().await;
}

fn node(name: &str) -> Node {
    let mut capacity = BTreeMap::new();
    capacity.insert("cpu".to_string(), Quantity("4".into()));
    capacity.insert("memory".to_string(), Quantity("8Gi".into()));
    capacity.insert("pods".to_string(), Quantity("110".into()));
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("kubernetes.io/hostname".to_string(), name.to_string())].into()),
            ..Default::default()
        },
        status: Some(NodeStatus {
            capacity: Some(capacity.clone()),
            allocatable: Some(capacity),
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".into(),
                address: "10.1.2.3".into(),
            }]),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            node_info: Some(NodeSystemInfo {
                kubelet_version: "v1.33.0-mesopod".into(),
                os_image: "Debian GNU/Linux 12".into(),
                kernel_version: "6.1.0".into(),
                container_runtime_version: "mesos://1.11".into(),
                operating_system: "linux".into(),
                architecture: "amd64".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_list_wide_and_describe_pod_shows_its_events() {
    let server = Server::start().await;
    server.api.upsert_node(node("agent-1")).await.unwrap();
    for k in ALL_KUBECTLS {
        let nodes = ok(&kubectl(k, &server.url).run(&["get", "nodes"]).await);
        let header: Vec<&str> = nodes.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(header, ["NAME", "STATUS", "ROLES", "AGE", "VERSION"], "{k}");
        let row: Vec<&str> = nodes.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(
            [row[0], row[1], row[2], row[4]],
            ["agent-1", "Ready", "<none>", "v1.33.0-mesopod"],
            "{k}"
        );
        let wide = ok(&kubectl(k, &server.url)
            .run(&["get", "nodes", "-o", "wide"])
            .await);
        assert!(
            wide.contains("INTERNAL-IP")
                && wide.contains("10.1.2.3")
                && wide.contains("Debian GNU/Linux 12"),
            "{wide}"
        );
    }
    let write = kubectl(KUBECTL, &server.url)
        .run_stdin(&["label", "node", "agent-1", "x=y"], None)
        .await;
    assert!(!write.status.success(), "users do not write nodes");

    let pod: k8s_openapi::api::core::v1::Pod =
        serde_yaml_ng::from_str(&pod_yaml("described", "nginx", "a: b")).unwrap();
    let pod = server.api.create_pod("default", pod).await.unwrap();
    let event = Event {
        metadata: ObjectMeta {
            generate_name: Some("described.".into()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            kind: Some("Pod".into()),
            name: Some("described".into()),
            namespace: Some("default".into()),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        },
        reason: Some("FailedScheduling".into()),
        message: Some("no offer fits: 0/1 nodes have enough cpu".into()),
        type_: Some("Warning".into()),
        source: Some(k8s_openapi::api::core::v1::EventSource {
            component: Some("mesopod-scheduler".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    server.api.create_event("default", event).await.unwrap();
    for k in [KUBECTL, KUBECTL_131] {
        let out = ok(&kubectl(k, &server.url)
            .run(&["describe", "pod", "described"])
            .await);
        assert!(
            out.contains("Name:") && out.contains("described") && out.contains("nginx"),
            "{out}"
        );
        assert!(
            out.contains("Events:")
                && out.contains("FailedScheduling")
                && out.contains("no offer fits"),
            "{k}: {out}"
        );
        assert!(out.contains("mesopod-scheduler"), "{out}");
        let events = ok(&kubectl(k, &server.url).run(&["get", "events"]).await);
        assert!(
            events.contains("FailedScheduling") && events.contains("pod/described"),
            "{events}"
        );
    }
    let out = ok(&kubectl(KUBECTL, &server.url)
        .run(&["describe", "node", "agent-1"])
        .await);
    assert!(out.contains("agent-1") && out.contains("Capacity"), "{out}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_of_a_bound_pod_waits_for_the_framework_then_returns() {
    let server = Server::start().await;
    ok(&kubectl(KUBECTL, &server.url)
        .run_stdin(
            &["create", "-f", "-"],
            Some(&pod_yaml("bound", "nginx", "a: b")),
        )
        .await);
    let binding = Binding {
        node_name: "agent-1".into(),
        ..Default::default()
    };
    server
        .api
        .bind_pod("default", "bound", &binding)
        .await
        .unwrap();

    let child = kubectl(KUBECTL, &server.url).start(
        &["delete", "pod", "bound"],
        Stdio::piped(),
        Stdio::piped(),
    );
    let api = server.api.clone();
    let _marked = wait_until(
        "kubectl delete to mark the bound pod",
        Duration::from_secs(30),
        async || {
            api.get_pod("default", "bound")
                .map(|p| p.metadata.deletion_timestamp)
        },
        |marked| marked.as_ref().is_ok_and(Option::is_some),
    )
    .await;
    // kubectl is now waiting; the pod stays until the framework confirms the task ended.
    assert!(api.get_pod("default", "bound").is_ok());
    let uid = api.get_pod("default", "bound").unwrap().metadata.uid;
    assert_eq!(
        api.finalize_pod("default", "bound", uid.as_deref())
            .await
            .unwrap(),
        Finalized::Removed
    );

    let out = tokio::time::timeout(Duration::from_secs(30), child.output())
        .await
        .unwrap();
    assert_eq!(ok(&out).trim(), "pod \"bound\" deleted");
    assert!(api.get_pod("default", "bound").is_err());

    // An unbound pod goes at once.
    ok(&kubectl(KUBECTL, &server.url)
        .run_stdin(
            &["create", "-f", "-"],
            Some(&pod_yaml("loose", "nginx", "a: b")),
        )
        .await);
    let out = kubectl(KUBECTL_131, &server.url)
        .run(&["delete", "pod", "loose"])
        .await;
    assert_eq!(ok(&out).trim(), "pod \"loose\" deleted");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_read_through_the_log_source_with_tail_follow_and_container_choice() {
    let server = Server::start().await;
    ok(&kubectl(KUBECTL, &server.url)
        .run_stdin(
            &["create", "-f", "-"],
            Some(&pod_yaml("logged", "nginx", "a: b")),
        )
        .await);
    for k in ALL_KUBECTLS {
        let all = ok(&kubectl(k, &server.url).run(&["logs", "logged"]).await);
        assert_eq!(all.lines().count(), LOG_LINES, "{k}: {all}");
        assert!(all.starts_with("main line 1"), "{all}");
        let tail = ok(&kubectl(k, &server.url)
            .run(&["logs", "logged", "--tail=2"])
            .await);
        assert_eq!(tail, "main line 4\nmain line 5\n", "{k}");
        let follow = ok(&kubectl(k, &server.url).run(&["logs", "-f", "logged"]).await);
        assert!(
            follow.ends_with("followed 1\nfollowed 2\n"),
            "{k}: {follow}"
        );
    }
    let two = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: two\nspec:\n  containers:\n  - name: a\n    image: img-a\n  - name: not-started\n    image: img-b\n";
    ok(&kubectl(KUBECTL, &server.url)
        .run_stdin(&["create", "-f", "-"], Some(two))
        .await);
    let picked = ok(&kubectl(KUBECTL, &server.url)
        .run(&["logs", "two", "-c", "a"])
        .await);
    assert!(picked.starts_with("a line 1"), "{picked}");
    let waiting = kubectl(KUBECTL, &server.url)
        .run(&["logs", "two", "-c", "not-started"])
        .await;
    assert!(!waiting.status.success());
    assert!(
        stderr(&waiting).contains("is waiting to start"),
        "{}",
        stderr(&waiting)
    );
    let missing = kubectl(KUBECTL, &server.url).run(&["logs", "nope"]).await;
    assert!(
        stderr(&missing).contains(r#"pods "nope" not found"#),
        "{}",
        stderr(&missing)
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_delete_returns_once_the_grace_period_runs_out_on_the_servers_clock() {
    let (api, clock) = api_with_clock().await;
    let server = Server::serve(api.clone()).await;
    let pod = serde_yaml_ng::from_str(&pod_yaml("slow", "nginx", "app: web")).unwrap();
    api.create_pod("default", pod).await.unwrap();
    let binding = Binding {
        node_name: "n".into(),
        annotations: BTreeMap::from([("mesopod.io/task-id".to_string(), "t-1".to_string())]),
        ..Default::default()
    };
    api.bind_pod("default", "slow", &binding).await.unwrap();
    let child = kubectl(KUBECTL, &server.url).start(
        &["delete", "pod", "slow", "--grace-period=10"],
        Stdio::piped(),
        Stdio::piped(),
    );
    let _marked = wait_until(
        "kubectl delete to mark the pod",
        Duration::from_secs(30),
        async || {
            api.get_pod("default", "slow")
                .map(|p| p.metadata.deletion_timestamp)
        },
        |marked| marked.as_ref().is_ok_and(Option::is_some),
    )
    .await;
    clock.advance(Duration::from_secs(11));
    let out = tokio::time::timeout(Duration::from_secs(30), child.output())
        .await
        .unwrap();
    assert_eq!(ok(&out).trim(), "pod \"slow\" deleted");
    server.stop().await;
}
