//! Issue #39's limits, seen with the real kubectl against an embedded
//! cluster (process runtime, no root needed):
//!
//! - a pod whose env vars double each other (the expansion bomb) waits in
//!   `CreateContainerConfigError` with a message naming the variable, and
//!   its executor stays far below the memory the expansion would take;
//! - pods that can never be placed (a `99999999999999999999Ei` memory
//!   request, 10,000 containers) get a `FailedScheduling` event while an
//!   agent of the cluster has no offer out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::cluster::*;
use k8s_openapi::api::core::v1::Pod;
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(90);

/// The waiting state of the pod's first container.
fn waiting(p: &Pod) -> Option<(String, String)> {
    let w = p
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .state
        .as_ref()?
        .waiting
        .as_ref()?;
    Some((
        w.reason.clone().unwrap_or_default(),
        w.message.clone().unwrap_or_default(),
    ))
}

/// The `/proc/<pid>/status` field `key` in bytes (`VmHWM`, `VmRSS`).
fn proc_kib(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The executor processes of this test's cluster on agent `agent_id`.
fn executors_of(agent_id: &str) -> Vec<u32> {
    let want = format!("MESOS_AGENT_ID={agent_id}");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            cmdline.split(|b| *b == 0).nth(1) == Some(b"executor")
                && env.split(|b| *b == 0).any(|kv| kv == want.as_bytes())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_env_expansion_bomb_is_a_config_error_and_the_executor_stays_small() {
    let app = start(Setup {
        agents: vec![agent("cpus:4;mem:4096;disk:4096", "", 0)],
        ..Setup::default()
    })
    .await;
    let k = Kubectl::new(&app.api_url());
    // 18 variables, each twice the one before: 4 KiB × 2^17 = 512 MiB in
    // the last, 1 GiB in all, were they expanded without a bound.
    let mut yaml = String::from(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bomb\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox\n    command: [\"/bin/sh\", \"-c\", \"echo $(V17)\"]\n    env:\n",
    );
    yaml.push_str(&format!(
        "    - name: V0\n      value: \"{}\"\n",
        "x".repeat(4096)
    ));
    for i in 1..18 {
        yaml.push_str(&format!(
            "    - name: V{i}\n      value: \"$(V{p})$(V{p})\"\n",
            p = i - 1
        ));
    }
    ok(&k.run_stdin(&["create", "-f", "-"], Some(&yaml)).await);
    let pod = wait_pod(app.api(), "default", "bomb", T, |p| {
        waiting(p).is_some_and(|(r, _)| r == "CreateContainerConfigError")
    })
    .await;
    let message = "env var \"V5\" would be longer than 131072 bytes, the most the kernel takes in one string (MAX_ARG_STRLEN)";
    assert_eq!(waiting(&pod).unwrap().1, message);
    assert_eq!(phase(&pod), "Pending");
    // As kubectl shows it: the STATUS column, and kubelet's `Failed` event.
    let get = ok(&k.run(&["get", "pod", "bomb", "--no-headers"]).await);
    assert!(get.contains("CreateContainerConfigError"), "{get}");
    let events = wait_until(
        "the Failed event",
        T,
        async || {
            ok(&k
                .run(&[
                    "get",
                    "events",
                    "--field-selector",
                    "involvedObject.name=bomb",
                ])
                .await)
        },
        |out| out.contains(&format!("Error: {message}")),
    )
    .await;
    assert!(events.contains("Failed"), "{events}");
    // The executor that refused it never grew anywhere near the expansion.
    let agent_id = pod.metadata.annotations.as_ref().unwrap()["mesopod.io/agent-id"].clone();
    let pids = executors_of(&agent_id);
    assert_eq!(pids.len(), 1, "one executor on {agent_id}: {pids:?}");
    let peak = proc_kib(pids[0], "VmHWM").expect("the executor's VmHWM");
    assert!(peak < 256 << 20, "the executor's peak RSS is {peak} bytes");
    app.shutdown().await;
}

/// The `FailedScheduling` messages about pod `name`.
async fn failed_scheduling(k: &Kubectl, name: &str) -> Vec<String> {
    let list: serde_json::Value =
        serde_json::from_str(&ok(&k.run(&["get", "events", "-o", "json"]).await)).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name && e["reason"] == "FailedScheduling")
        .map(|e| {
            assert_eq!(e["type"], "Warning", "{e}");
            e["message"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_larger_than_any_agent_get_failed_scheduling_while_an_agent_is_full() {
    let app = start(Setup {
        agents: vec![
            agent("cpus:1;mem:128;disk:1024", "", 0),
            agent("cpus:4;mem:4096;disk:4096", "", 1),
        ],
        ..Setup::default()
    })
    .await;
    let k = Kubectl::new(&app.api_url());
    // agent-0 is full (the pod and its executor's 0.1 cpus and 64 MB): it
    // has no offer out from now on.
    let filler = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: filler\nspec:\n  terminationGracePeriodSeconds: 1\n  nodeSelector:\n    kubernetes.io/hostname: agent-0\n  containers:\n  - name: main\n    image: busybox\n    command: [\"sleep\", \"3600\"]\n    resources:\n      requests:\n        cpu: 900m\n        memory: 64Mi\n";
    ok(&k.run_stdin(&["create", "-f", "-"], Some(filler)).await);
    wait_pod(app.api(), "default", "filler", T, |p| phase(p) == "Running").await;
    let hungry = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hungry\nspec:\n  containers:\n  - name: main\n    image: busybox\n    command: [\"sleep\", \"3600\"]\n    resources:\n      requests:\n        memory: 99999999999999999999Ei\n";
    ok(&k.run_stdin(&["create", "-f", "-"], Some(hungry)).await);
    // kube-apiserver takes 10,000 containers (it sets no limit on their
    // number); `create`, as `apply` would store the whole pod again in an
    // annotation past its 256 KiB limit.
    let containers: Vec<_> = (0..10_000)
        .map(|i| serde_json::json!({"name": format!("c{i}"), "image": "busybox", "command": ["true"]}))
        .collect();
    let many = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "many"}, "spec": {"containers": containers}})
    .to_string();
    ok(&k.run_stdin(&["create", "-f", "-"], Some(&many)).await);
    for (pod, message) in [
        ("hungry", "0/2 agents available: 2 insufficient mem."),
        ("many", "0/2 agents available: 2 insufficient cpus."),
    ] {
        let seen = wait_until(
            &format!("FailedScheduling for {pod}"),
            T,
            async || failed_scheduling(&k, pod).await,
            |m| !m.is_empty(),
        )
        .await;
        assert_eq!(seen, [message], "{pod}");
        let describe = ok(&k.run(&["describe", "pod", pod]).await);
        assert!(
            describe.contains("FailedScheduling") && describe.contains(message),
            "{describe}"
        );
        let p = app.api().get_pod("default", pod).unwrap();
        let scheduled = p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled"));
        assert_eq!(scheduled.map(|c| c.status.as_str()), Some("False"), "{pod}");
    }
    app.shutdown().await;
}
