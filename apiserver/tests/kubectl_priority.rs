//! PriorityClasses and the Priority admission of pods, through the real kubectl: the
//! system classes, kube-apiserver's refusals of bad classes, one global default, and
//! what a pod's `spec.priority` becomes.

use std::process::Output;

use common::Server;
use testkit::{Kubectl, ok};

use super::common;

fn stderr(out: &Output) -> String {
    assert!(!out.status.success(), "accepted: {out:?}");
    String::from_utf8_lossy(&out.stderr).trim().to_owned()
}

fn pod(name: &str, spec_extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n{spec_extra}  containers:\n  - name: c\n    image: busybox:1.36\n"
    )
}

async fn priority_of(k: &Kubectl, name: &str) -> String {
    ok(&k
        .run(&[
            "get",
            "pod",
            name,
            "-o",
            "jsonpath={.spec.priorityClassName}/{.spec.priority}/{.spec.preemptionPolicy}",
        ])
        .await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_classes_are_checked_and_give_pods_their_priority() {
    let server = Server::start().await;
    let k = Kubectl::new(&server.url);

    // The system classes exist from the start, in kube's columns.
    let table = ok(&k.run(&["get", "priorityclasses"]).await);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    );
    for (name, value) in [
        ("system-cluster-critical", "2000000000"),
        ("system-node-critical", "2000001000"),
    ] {
        let row = table.lines().find(|l| l.starts_with(name)).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            [cells[0], cells[1], cells[2], cells[4]],
            [name, value, "false", "PreemptLowerPriority"],
            "{table}"
        );
    }
    let out = k.run(&["delete", "pc", "system-node-critical"]).await;
    assert!(
        stderr(&out).contains("\"system-node-critical\" is forbidden: this is a system priority class and cannot be deleted"),
        "{out:?}"
    );
    assert!(ok(&k.run(&["explain", "priorityclass.value"]).await).contains("integer"));

    // A user's class: defaulted, and refused past kube's limits.
    ok(&k
        .run(&[
            "create",
            "priorityclass",
            "high",
            "--value=1000",
            "--description=urgent",
        ])
        .await);
    assert_eq!(
        ok(&k
            .run(&[
                "get",
                "pc",
                "high",
                "-o",
                "jsonpath={.value}/{.preemptionPolicy}"
            ])
            .await),
        "1000/PreemptLowerPriority"
    );
    let out = k
        .run(&["create", "priorityclass", "huge", "--value=1000000001"])
        .await;
    assert!(
        stderr(&out).contains(
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000"
        ),
        "{out:?}"
    );
    let out = k
        .run(&["create", "priorityclass", "system-mine", "--value=1"])
        .await;
    assert!(
        stderr(&out).contains("metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-mine is not a known system priority class"),
        "{out:?}"
    );
    let out = k
        .run(&[
            "patch",
            "pc",
            "high",
            "--type=merge",
            "-p",
            r#"{"value":5}"#,
        ])
        .await;
    assert!(
        stderr(&out).contains("value: Forbidden: may not be changed in an update."),
        "{out:?}"
    );
    let out = k
        .run(&[
            "patch",
            "pc",
            "high",
            "--type=merge",
            "-p",
            r#"{"preemptionPolicy":"Never"}"#,
        ])
        .await;
    assert!(
        stderr(&out).contains("preemptionPolicy: Invalid value: \"Never\": field is immutable"),
        "{out:?}"
    );
    ok(&k.run(&["label", "pc", "high", "tier=urgent"]).await);

    // One global default.
    ok(&k
        .run(&[
            "create",
            "priorityclass",
            "base",
            "--value=10",
            "--global-default",
        ])
        .await);
    let out = k
        .run(&[
            "create",
            "priorityclass",
            "base2",
            "--value=20",
            "--global-default",
        ])
        .await;
    assert!(
        stderr(&out).contains(
            "PriorityClass base is already marked as default. Only one default can exist"
        ),
        "{out:?}"
    );
    ok(&k
        .run(&[
            "create",
            "priorityclass",
            "calm",
            "--value=5",
            "--preemption-policy=Never",
        ])
        .await);

    // Pods: the class's value and policy, the default's without a class.
    k.apply(&pod("urgent", "  priorityClassName: high\n")).await;
    assert_eq!(
        priority_of(&k, "urgent").await,
        "high/1000/PreemptLowerPriority"
    );
    k.apply(&pod("plain", "")).await;
    assert_eq!(
        priority_of(&k, "plain").await,
        "base/10/PreemptLowerPriority"
    );
    k.apply(&pod("patient", "  priorityClassName: calm\n"))
        .await;
    assert_eq!(priority_of(&k, "patient").await, "calm/5/Never");
    // A dry run is admitted the same way.
    let dry = ok(&k
        .run_stdin(
            &[
                "create",
                "--dry-run=server",
                "-o",
                "jsonpath={.spec.priority}",
                "-f",
                "-",
            ],
            Some(&pod("dry", "  priorityClassName: high\n")),
        )
        .await);
    assert_eq!(dry, "1000");

    // Refusals, with kube-apiserver's words, and nothing created.
    for (name, extra, want) in [
        (
            "unknown",
            "  priorityClassName: nope\n",
            "pods \"unknown\" is forbidden: no PriorityClass with name nope was found",
        ),
        (
            "forged",
            "  priorityClassName: high\n  priority: 7\n",
            "pods \"forged\" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority admission controller computed 1000 from the given PriorityClass name",
        ),
        (
            "policy",
            "  priorityClassName: high\n  preemptionPolicy: Never\n",
            "pods \"policy\" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority admission controller computed PreemptLowerPriority from the given PriorityClass name",
        ),
    ] {
        let out = k
            .run_stdin(&["create", "-f", "-"], Some(&pod(name, extra)))
            .await;
        assert!(stderr(&out).contains(want), "{name}: {out:?}");
        assert!(!k.run(&["get", "pod", name]).await.status.success());
    }

    // Without a global default, a pod without a class has priority 0.
    ok(&k.run(&["delete", "pc", "base"]).await);
    k.apply(&pod("zero", "")).await;
    assert_eq!(priority_of(&k, "zero").await, "/0/PreemptLowerPriority");
    // A label on a pod keeps what admission gave it.
    ok(&k.run(&["label", "pod", "urgent", "x=y"]).await);
    assert_eq!(
        priority_of(&k, "urgent").await,
        "high/1000/PreemptLowerPriority"
    );
}
