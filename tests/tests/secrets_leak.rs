//! A Secret's value stays where it belongs. The test plants a Secret with a
//! unique value and a pod that reads it (`env[].valueFrom.secretKeyRef`),
//! lets the pod run on a real agent with mesopod logging at TRACE, and then
//! greps for the value (as written and base64-encoded) in everything else a
//! user or operator can see: the master's and the agent's `/state` (every
//! TaskInfo the master saw), localmesos' work directory (checkpointed
//! TaskInfos, the executor's own stdout and stderr), the pod, Events,
//! `/debug/*`, `/metrics`, mesopod's log output and the error message of a
//! Secret refused at create. It must find it only in the API's own answer
//! for the Secret, and in the container: the pod runs in the embedded
//! runtime, checks the value's shape, and succeeds. The runtime's record
//! of the container's spec (its env) is the one other place, readable by
//! root alone and not served by `/files`, as runc's state is on a
//! Kubernetes node.
#![allow(clippy::unwrap_used)]

use crate::common;
use crate::containers_support;

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use common::cluster::{Setup, agent, app_config};
use containers_support::{IMAGE, load_image, prerequisites, store};

/// Every regular file under `dir`, as (path, bytes), but the container
/// runtime's own state (see [`runtime_state_is_private`]).
fn files(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() && e.file_name() == "mesopod-runtime" => {}
            Ok(t) if t.is_dir() => files(&path, out),
            Ok(t) if t.is_file() => {
                if let Ok(bytes) = std::fs::read(&path) {
                    out.push((path.display().to_string(), bytes));
                }
            }
            _ => {}
        }
    }
}

/// The runtime keeps the spec it ran, the container's env with it, in its
/// state.json, as runc does on a Kubernetes node: readable by root alone,
/// and not served by the agent's `/files` (only sandboxes are). Returns how
/// many such records there are.
fn runtime_state_is_private(work_dir: &Path) -> usize {
    use std::os::unix::fs::PermissionsExt as _;
    let mut specs = 0;
    let agents = std::fs::read_dir(work_dir.join("slaves")).unwrap();
    for agent in agents.flatten() {
        let Ok(containers) = std::fs::read_dir(agent.path().join("mesopod-runtime")) else {
            continue;
        };
        for c in containers.flatten() {
            let spec = c.path().join("state.json");
            if let Ok(meta) = std::fs::metadata(&spec) {
                assert_eq!(
                    meta.permissions().mode() & 0o077,
                    0,
                    "{} is readable by others",
                    spec.display()
                );
                specs += 1;
            }
        }
    }
    specs
}

async fn get(http: &reqwest::Client, url: &str) -> (String, Vec<u8>) {
    let resp = http.get(url).send().await.unwrap();
    (url.to_owned(), resp.bytes().await.unwrap().to_vec())
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_value_appears_only_in_the_apis_answer_for_the_secret() {
    // The executor resolves the Secret only for a container runtime: process
    // mode refuses the pod before anything reads the value.
    if !prerequisites(false) {
        return;
    }
    let (_images, images) = store();
    load_image(&images, IMAGE).await;
    let logs = common::logs::Capture::start();
    let value = format!("planted-{}", std::process::id() as u64 * 7919 + 104_729);
    let encoded = base64::engine::general_purpose::STANDARD.encode(&value);
    let data = tempfile::tempdir().unwrap();
    let mut cfg = app_config(Setup {
        agents: vec![agent(
            "cpus:2;mem:2048;disk:4096;ports:[31000-31010]",
            "",
            0,
        )],
        data_dir: Some(data.path().join("data")),
        ..Setup::default()
    });
    cfg.executor.args = vec![
        "--container-runtime=embedded".into(),
        format!("--image-store={}", images.display()),
    ];
    // A persistent work dir, so the agent checkpoints every TaskInfo.
    cfg.embedded.work_dir = Some(data.path().join("localmesos"));
    let app = framework::app::App::start(cfg).await.unwrap();
    let base = app.api_url();
    let http = reqwest::Client::new();

    let created = http
        .post(format!("{base}/api/v1/namespaces/default/secrets"))
        .json(&serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "planted"},
            "stringData": {"token": value},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    // An invalid Secret carrying the value: its error must not repeat it.
    let refused = http
        .post(format!("{base}/api/v1/namespaces/default/secrets"))
        .json(&serde_json::json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "refused"},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": format!("{{not json {value}")},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 422);
    let refused = (
        "the 422 of an invalid Secret".to_owned(),
        refused.bytes().await.unwrap().to_vec(),
    );
    let pod = http
        .post(format!("{base}/api/v1/namespaces/default/pods"))
        .json(&serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "reader"},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "main", "image": IMAGE,
                "command": ["/bin/sh", "-c", format!(
                    "case \"$TOKEN\" in planted-*) test ${{#TOKEN}} -eq {} && sleep 3;; *) exit 1;; esac",
                    value.len()
                )],
                "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "planted", "key": "token"}}}],
                "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}},
            }]},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(pod.status(), 201);
    // The pod runs for a while: the agent's checkpoints (TaskInfo, updates)
    // are read then, before the task ends and they are removed.
    let mut seen: Vec<(String, Vec<u8>)> = Vec::new();
    let work_dir = app.local().unwrap().work_dir().to_owned();
    let first = common::cluster::wait_pod(
        app.api(),
        "default",
        "reader",
        Duration::from_secs(60),
        |p| {
            matches!(
                common::cluster::phase(p),
                "Running" | "Succeeded" | "Failed"
            )
        },
    )
    .await;
    assert_eq!(
        common::cluster::phase(&first),
        "Running",
        "{:?}",
        first.status
    );
    files(&work_dir, &mut seen);
    assert!(
        seen.iter().any(|(what, _)| what.ends_with("task.info")),
        "the agent checkpointed the TaskInfo"
    );
    assert_eq!(
        runtime_state_is_private(&work_dir),
        1,
        "the running container's spec is kept by the runtime"
    );
    let ended = common::cluster::wait_pod(
        app.api(),
        "default",
        "reader",
        Duration::from_secs(60),
        |p| matches!(common::cluster::phase(p), "Succeeded" | "Failed"),
    )
    .await;
    // The container checked $TOKEN's shape and length (the value itself must
    // not be in the pod): the executor resolved the Secret and handed it to
    // the container, the one place it belongs.
    assert_eq!(
        common::cluster::phase(&ended),
        "Succeeded",
        "{:?}",
        ended.status
    );

    // Where the value belongs: the Secret's own answer (this also shows the
    // grep below would find it).
    let (_, secret) = get(
        &http,
        &format!("{base}/api/v1/namespaces/default/secrets/planted"),
    )
    .await;
    assert!(contains(&secret, &encoded), "the Secret GET has its value");

    seen.push(refused);
    let master = app.master_url().to_owned();
    let state = get(&http, &format!("{master}/state")).await;
    let agents: serde_json::Value = serde_json::from_slice(&state.1).unwrap();
    seen.push(state);
    for a in agents["slaves"].as_array().unwrap() {
        // Agents are named like hosts but listen on loopback.
        let url = format!("http://127.0.0.1:{}/state", a["port"]);
        seen.push(get(&http, &url).await);
    }
    let tasks = get(&http, &format!("{base}/debug/registry/tasks")).await;
    let ids: serde_json::Value = serde_json::from_slice(&tasks.1).unwrap_or_default();
    seen.push(tasks);
    for t in ids.as_array().into_iter().flatten() {
        if let Some(id) = t["taskId"].as_str().or(t["id"].as_str()) {
            seen.push(get(&http, &format!("{base}/debug/registry/tasks/{id}")).await);
        }
    }
    for path in [
        "/debug/",
        "/debug/offers",
        "/debug/queue",
        "/debug/reconciliation",
        "/debug/framework",
        "/metrics",
        "/api/v1/events",
        "/api/v1/namespaces/default/pods/reader",
        "/api/v1/namespaces/default/pods/reader/log",
    ] {
        seen.push(get(&http, &format!("{base}{path}")).await);
    }
    files(&work_dir, &mut seen);
    assert!(
        seen.iter().any(|(what, _)| what.ends_with("/stderr")),
        "the executor's own output is read"
    );
    app.shutdown().await;
    // The agent's persistent work dir leaves the checkpointing framework's
    // executor running past shutdown, by design (#20); this test owns it.
    localmesos::LocalMesos::reset(&work_dir, Duration::from_secs(5))
        .await
        .expect("the agent's work dir is removed");
    let captured = logs.take();
    assert!(
        contains(&captured, "reader"),
        "the TRACE log output was captured and speaks of the pod"
    );
    seen.push(("mesopod's log output".into(), captured));

    let leaks: Vec<&str> = seen
        .iter()
        .filter(|(_, bytes)| contains(bytes, &value) || contains(bytes, &encoded))
        .map(|(what, _)| what.as_str())
        .collect();
    assert!(leaks.is_empty(), "the Secret's value leaked into {leaks:?}");
}
