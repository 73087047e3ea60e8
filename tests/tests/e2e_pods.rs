//! End to end: pods created with the real kubectl run as real processes
//! under the real `mesopod executor`, on localmesos agents.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::cluster::*;
use framework::app::App;
use k8s_openapi::api::core::v1::Pod;
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_runs_then_succeeds_and_its_logs_show_its_output() {
    let app = start(Setup::default()).await;
    let server = app.api_url();
    let yaml = pod_yaml("hello", "", "echo hello from mesopod; sleep 1; echo bye");
    let out = Kubectl::new(&server)
        .run_stdin(&["apply", "-f", "-"], Some(&yaml))
        .await;
    assert!(ok(&out).contains("pod/hello created"));

    let running = wait_pod(app.api(), "default", "hello", T, |p| {
        phase(p) == "Running" || phase(p) == "Succeeded"
    })
    .await;
    let node = running
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .expect("bound to a node");
    assert!(node.starts_with("agent-"), "{node}");
    let ann = running.metadata.annotations.clone().unwrap();
    assert!(ann.contains_key("mesopod.io/task-id"), "{ann:?}");

    let done = wait_pod(app.api(), "default", "hello", T, |p| {
        phase(p) == "Succeeded"
    })
    .await;
    let cs = &done.status.unwrap().container_statuses.unwrap()[0];
    let term = cs.state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(term.exit_code, 0);

    let logs = Kubectl::new(&server).run(&["logs", "hello"]).await;
    let text = ok(&logs);
    assert!(
        text.contains("hello from mesopod") && text.contains("bye"),
        "{text}"
    );

    let wide = Kubectl::new(&server)
        .run(&["get", "pods", "-o", "wide"])
        .await;
    let table = ok(&wide);
    assert!(
        table.contains("hello") && table.contains("Completed") || table.contains("Succeeded"),
        "{table}"
    );
    assert!(table.contains(&node), "{table}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_too_big_waits_with_a_reason_until_an_agent_with_room_appears() {
    let app = start(Setup {
        agents: vec![agent("cpus:1;mem:1024;ports:[31000-31010]", "", 0)],
        ..Setup::default()
    })
    .await;
    let yaml = pod_yaml("big", "", "sleep 30").replace("cpu: 100m", "cpu: \"3\"");
    let server = app.api_url();
    ok(&Kubectl::new(&server)
        .run_stdin(&["create", "-f", "-"], Some(&yaml))
        .await);
    let pending = wait_pod(app.api(), "default", "big", T, |p| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter().any(|c| {
                    c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable")
                })
            })
    })
    .await;
    assert_eq!(phase(&pending), "Pending");
    let cond = pending.status.unwrap().conditions.unwrap();
    let msg = cond
        .iter()
        .find(|c| c.type_ == "PodScheduled")
        .unwrap()
        .message
        .clone()
        .unwrap();
    assert!(
        msg.contains("0/1 agents available") && msg.contains("cpus"),
        "{msg}"
    );
    assert_event_about(&app, "big", "FailedScheduling", |m| {
        m.contains("insufficient cpus")
    });

    app.local()
        .unwrap()
        .add_agent(agent("cpus:8;mem:8192;ports:[31000-31010]", "", 1).with_hostname("roomy"))
        .await
        .unwrap();
    let placed = wait_pod(app.api(), "default", "big", T, |p| phase(p) == "Running").await;
    assert_eq!(placed.spec.unwrap().node_name.as_deref(), Some("roomy"));
    // The binding recorded kube-scheduler's event with it.
    assert_event_about(&app, "big", "Scheduled", |m| {
        m == "Successfully assigned default/big to roomy"
    });
    app.shutdown().await;
}

/// Asserts that an event about pod `name` has `reason` and a message that passes.
fn assert_event_about(app: &App, name: &str, reason: &str, message: impl Fn(&str) -> bool) {
    let events = app
        .api()
        .list_events(Some("default"), "", &format!("involvedObject.name={name}"))
        .unwrap()
        .items;
    assert!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some(reason)
                && e.message.as_deref().is_some_and(&message)),
        "no {reason} event about {name}: {events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_selectors_on_agent_attributes_and_host_port_conflicts() {
    let app = start(Setup::default()).await;
    let server = app.api_url();
    // rack r2 is agent-2.
    let selected = pod_yaml("on-r2", "  nodeSelector:\n    rack: r2\n", "sleep 30");
    let mut ported = String::new();
    for name in ["port-a", "port-b", "port-c", "port-d"] {
        ported.push_str("---\n");
        ported.push_str(&pod_yaml(name, "", "sleep 30").replace(
            "    resources:",
            "    ports:\n    - containerPort: 8080\n      hostPort: 31005\n    resources:",
        ));
    }
    ok(&Kubectl::new(&server)
        .run_stdin(&["apply", "-f", "-"], Some(&format!("{selected}{ported}")))
        .await);
    let p = wait_pod(app.api(), "default", "on-r2", T, |p| phase(p) == "Running").await;
    assert_eq!(p.spec.unwrap().node_name.as_deref(), Some("agent-2"));

    // Three agents, one port 31005 each: three run, the fourth waits.
    let mut nodes = Vec::new();
    for name in ["port-a", "port-b", "port-c", "port-d"] {
        let _ = wait_pod(app.api(), "default", name, T, |p| {
            phase(p) == "Running"
                || p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| {
                        c.iter()
                            .any(|c| c.reason.as_deref() == Some("Unschedulable"))
                    })
        })
        .await;
    }
    let mut waiting = Vec::new();
    for name in ["port-a", "port-b", "port-c", "port-d"] {
        let p: Pod = app.api().get_pod("default", name).unwrap();
        match p.spec.as_ref().and_then(|s| s.node_name.clone()) {
            Some(n) => nodes.push(n),
            None => waiting.push(p),
        }
    }
    nodes.sort();
    nodes.dedup();
    assert_eq!(nodes.len(), 3, "one host port per agent: {nodes:?}");
    assert_eq!(waiting.len(), 1);
    let msg = waiting[0]
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()[0]
        .message
        .clone()
        .unwrap();
    assert!(msg.contains("port"), "{msg}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_pod_kills_its_task_within_the_grace_period() {
    let app = start(Setup::default()).await;
    let server = app.api_url();
    let yaml = pod_yaml(
        "graceful",
        "  terminationGracePeriodSeconds: 3\n",
        "trap 'echo got TERM; exit 0' TERM; echo started; while true; do sleep 0.1; done",
    );
    ok(&Kubectl::new(&server)
        .run_stdin(&["apply", "-f", "-"], Some(&yaml))
        .await);
    let running = wait_pod(app.api(), "default", "graceful", T, |p| {
        phase(p) == "Running"
    })
    .await;
    let task_id = running.metadata.annotations.unwrap()["mesopod.io/task-id"].clone();

    let started = std::time::Instant::now();
    let out = Kubectl::new(&server)
        .run(&["delete", "pod", "graceful", "--timeout=30s"])
        .await;
    assert!(ok(&out).contains("deleted"));
    assert!(
        app.api().get_pod("default", "graceful").is_err(),
        "kubectl waited until the pod left"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3 + 10),
        "{:?}",
        started.elapsed()
    );
    let state = app.local().unwrap().state();
    let task = state.task(&task_id).expect("task known to the master");
    assert_eq!(task.state, mesos::proto::TaskState::TaskKilled, "{task:?}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_agent_shows_on_its_pods_and_a_master_restart_is_survived() {
    let app = start(Setup {
        agents: vec![agent("cpus:4;mem:4096;ports:[31000-31010]", "", 0)],
        ..Setup::default()
    })
    .await;
    let server = app.api_url();
    let yaml = pod_yaml("steady", "", "sleep 120");
    ok(&Kubectl::new(&server)
        .run_stdin(&["apply", "-f", "-"], Some(&yaml))
        .await);
    let p = wait_pod(app.api(), "default", "steady", T, |p| phase(p) == "Running").await;
    let agent_id = p.metadata.annotations.unwrap()["mesopod.io/agent-id"].clone();

    // The master restarts, keeping its state; mesopod re-subscribes.
    let subs = app.observed().metrics.subscriptions.get();
    app.local()
        .unwrap()
        .restart_master(localmesos::RestartOptions {
            keep_state: true,
            ..Default::default()
        });
    let yaml = pod_yaml("after-restart", "", "sleep 120");
    ok(&Kubectl::new(&server)
        .run_stdin(&["apply", "-f", "-"], Some(&yaml))
        .await);
    wait_pod(app.api(), "default", "after-restart", T, |p| {
        phase(p) == "Running"
    })
    .await;
    assert!(
        app.observed().metrics.subscriptions.get() > subs,
        "re-subscribed"
    );

    app.local().unwrap().partition_agent(&agent_id).unwrap();
    // Unreachable once the master's clock passes its ping timeouts (75 s).
    app.local().unwrap().advance_clock(Duration::from_secs(75));
    let lost = wait_pod(app.api(), "default", "steady", T, |p| {
        p.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("NodeLost")
    })
    .await;
    // Like a pod on a NotReady node: the phase stays, nothing is ready.
    assert_eq!(phase(&lost), "Running", "{:?}", lost.status);
    let ready = lost
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.status.clone());
    assert_eq!(ready.as_deref(), Some("False"), "{:?}", lost.status);
    app.local().unwrap().heal_agent(&agent_id).unwrap();
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_pods_pack_onto_three_agents_without_overcommit() {
    let app = start(Setup {
        agents: (0..3)
            .map(|i| agent("cpus:4;mem:4096;ports:[31000-31010]", "", i))
            .collect(),
        ..Setup::default()
    })
    .await;
    let mut yaml = String::new();
    for i in 0..100 {
        yaml.push_str("---\n");
        yaml.push_str(&pod_yaml(&format!("packed-{i}"), "", "sleep 120"));
    }
    let server = app.api_url();
    ok(&Kubectl::new(&server)
        .run_stdin(&["apply", "-f", "-"], Some(&yaml))
        .await);
    for i in 0..100 {
        wait_pod(
            app.api(),
            "default",
            &format!("packed-{i}"),
            Duration::from_secs(120),
            |p| phase(p) == "Running",
        )
        .await;
    }
    let state: serde_json::Value = reqwest::get(format!("{}/state", app.master_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let agents = state["slaves"].as_array().unwrap();
    assert_eq!(agents.len(), 3);
    let mut used_cpus = 0.0;
    for a in agents {
        for r in ["cpus", "mem"] {
            let total = a["resources"][r].as_f64().unwrap();
            let used = a["used_resources"][r].as_f64().unwrap();
            assert!(
                used <= total + 1e-9,
                "agent {} over-committed on {r}: {used} > {total}",
                a["hostname"]
            );
        }
        used_cpus += a["used_resources"]["cpus"].as_f64().unwrap();
    }
    // 100 pods of 0.1 cpus, plus one executor (0.1 cpus) per agent that runs pods.
    let executors = agents
        .iter()
        .filter(|a| a["used_resources"]["cpus"].as_f64().unwrap() > 0.0)
        .count();
    assert!(
        (used_cpus - (10.0 + 0.1 * executors as f64)).abs() < 1e-6,
        "{used_cpus}"
    );
    let tasks: usize = state["frameworks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["tasks"].as_array().unwrap().len())
        .sum();
    assert_eq!(tasks, 100, "one task per pod");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_never_starts_is_killed_at_its_start_deadline() {
    use std::os::unix::fs::PermissionsExt as _;
    // An "executor" that never subscribes: the task stays STAGING.
    let dir = tempfile::tempdir().unwrap();
    let stuck = dir.path().join("stuck-executor");
    std::fs::write(&stuck, "#!/bin/sh\nexec sleep 30\n").unwrap();
    std::fs::set_permissions(&stuck, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut config = app_config(Setup {
        agents: vec![agent("cpus:2;mem:2048;ports:[31000-31010]", "", 0)],
        start_deadline: Duration::from_secs(2),
        ..Setup::default()
    });
    config.executor.program = stuck.to_str().unwrap().to_owned();
    let app = framework::app::App::start(config).await.unwrap();
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "never-starts", "namespace": "default"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}
    }))
    .unwrap();
    app.api().create_pod("default", pod).await.unwrap();
    let failed = wait_pod(app.api(), "default", "never-starts", T, |p| {
        phase(p) == "Failed"
    })
    .await;
    let status = failed.status.unwrap();
    assert_eq!(
        status.reason.as_deref(),
        Some("StartDeadlineExceeded"),
        "{status:?}"
    );
    assert!(status.message.unwrap().contains("within 2s"));
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_scheduler_taking_over_the_framework_stops_this_one() {
    use mesos::client::scheduler::SchedulerClient;
    use mesos::proto::scheduler::{Call, call};
    let mut app = start(Setup {
        agents: vec![agent("cpus:2;mem:2048", "", 0).simulated(None)],
        ..Setup::default()
    })
    .await;
    let end = std::time::Instant::now() + T;
    let id = loop {
        if let Some(id) = app.observed().snapshot().framework_id {
            break id;
        }
        assert!(std::time::Instant::now() < end, "never subscribed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // A second scheduler subscribes with the same framework id.
    let client = SchedulerClient::new(
        vec![app.master_url().to_owned()],
        mesos::codec::Codec::Protobuf,
    )
    .unwrap();
    let info = framework::driver::framework_info(
        &framework::config::FrameworkConfig::default(),
        Some(id.clone()),
    );
    let _other = client
        .subscribe(Call {
            framework_id: Some(id.clone().into()),
            r#type: Some(call::Type::Subscribe as i32),
            subscribe: Some(call::Subscribe {
                framework_info: Some(info),
                suppressed_roles: Vec::new(),
            }),
            ..Default::default()
        })
        .await
        .unwrap();
    let stopped = tokio::time::timeout(T, app.wait())
        .await
        .expect("mesopod stops");
    let err = stopped.expect_err("a takeover is an error");
    assert!(
        matches!(err, framework::core::CoreError::FailedOver(_)),
        "{err}"
    );
    assert!(err.to_string().contains("took over"), "{err}");
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_whose_agent_connection_drops_reconnects_and_loses_no_update() {
    let app = start(Setup {
        agents: vec![agent("cpus:2;mem:2048;ports:[31000-31010]", "", 0)],
        ..Setup::default()
    })
    .await;
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "resilient", "namespace": "default"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox",
            "command": ["/bin/sh", "-c", "sleep 2; echo done"]}]}
    }))
    .unwrap();
    app.api().create_pod("default", pod).await.unwrap();
    let running = wait_pod(app.api(), "default", "resilient", T, |p| {
        phase(p) == "Running"
    })
    .await;
    let ann = running.metadata.annotations.unwrap();
    let framework = app.observed().snapshot().framework_id.or_else(|| {
        app.local()
            .unwrap()
            .state()
            .frameworks
            .first()
            .map(|f| f.id.clone())
    });
    let local = app.local().unwrap();
    local
        .disconnect_executor(
            &ann["mesopod.io/agent-id"],
            &framework.unwrap(),
            &ann["mesopod.io/executor-id"],
        )
        .unwrap();
    // The pod finishes while the executor reconnects: FINISHED must arrive.
    let done = wait_pod(app.api(), "default", "resilient", T, |p| {
        phase(p) == "Succeeded"
    })
    .await;
    assert_eq!(
        done.status.unwrap().container_statuses.unwrap()[0]
            .state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        0
    );
    let state = local.state_json();
    let task = state["frameworks"][0]["completed_tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(
            state["frameworks"][0]["tasks"]
                .as_array()
                .into_iter()
                .flatten(),
        )
        .find(|t| t["id"] == ann["mesopod.io/task-id"].as_str())
        .cloned()
        .expect("the master knows the task");
    assert_eq!(task["state"], "TASK_FINISHED", "{task}");
    let finished = task["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["state"] == "TASK_FINISHED")
        .count();
    assert_eq!(finished, 1, "FINISHED exactly once: {task}");
    let executor = local
        .state()
        .agents
        .iter()
        .flat_map(|a| a.executors.clone())
        .find(|e| e.executor_id == ann["mesopod.io/executor-id"])
        .expect("the executor is known");
    assert!(
        executor.subscribed,
        "the executor subscribed again after the drop"
    );
    app.shutdown().await;
}
