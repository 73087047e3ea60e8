//! End to end across processes: SIGKILL mesopod while pods run, start it
//! again on the same data directory, and check that it rebuilds its
//! registry, reconciles, keeps the pods' status and launches nothing twice.
//! And after each of SIGTERM and SIGKILL of the embedded cluster, `kubectl exec`
//! reaches a running pod, and a new pod mounting a ConfigMap runs, within seconds:
//! the executors register again with the new mesopod on their own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::faults;

use common::restart::{
    framework_id, get_json, localmesos, reconciled_as, run_sleepers, running_pods, scheduler,
};

fn master_tasks(master: &str) -> Vec<(String, String)> {
    let state = get_json(&format!("{master}/state"));
    let mut out = Vec::new();
    for fw in state["frameworks"].as_array().cloned().unwrap_or_default() {
        let live = fw["tasks"].as_array().cloned().unwrap_or_default();
        let done = fw["completed_tasks"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for t in live.into_iter().chain(done) {
            out.push((
                t["id"].as_str().unwrap_or("").to_owned(),
                t["state"].as_str().unwrap_or("").to_owned(),
            ));
        }
    }
    out
}

#[test]
fn sigkill_and_restart_rebuilds_the_registry_and_launches_nothing_twice() {
    let data = tempfile::tempdir().unwrap();
    let (_master, master) = localmesos();
    let (mut first, api) = scheduler(&master, data.path(), &[]);
    let before = run_sleepers(&api, &["keep-a", "keep-b", "keep-c"]);
    let framework_before = framework_id(&api);

    first.kill().unwrap();
    first.wait().unwrap();
    let tasks_before = master_tasks(&master);
    assert_eq!(tasks_before.len(), 3, "{tasks_before:?}");

    let (_second, api) = scheduler(&master, data.path(), &[]);
    reconciled_as(&api, &framework_before, "the framework id is reused");

    let tasks = get_json(&format!("{api}/debug/registry/tasks"));
    let registry: Vec<(String, String)> = tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap().to_owned(),
                t["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(registry.len(), 3, "{registry:?}");
    assert!(registry.iter().all(|(_, s)| s == "running"), "{registry:?}");
    assert_eq!(
        running_pods(&api),
        before,
        "same pods, same tasks, still Running"
    );
    let tasks_after = master_tasks(&master);
    assert_eq!(
        tasks_after.len(),
        3,
        "nothing launched twice: {tasks_after:?}"
    );
}

/// How soon after a restarted mesopod is ready exec and ConfigMap volumes work.
const AFTER_READY: std::time::Duration = std::time::Duration::from_secs(5);

/// A pod of the test image that sleeps; with `volume`, the ConfigMap `greeting`
/// mounted at `/etc/greeting`.
fn sleeper_pod(name: &str, volume: bool) -> String {
    let (mounts, volumes) = if volume {
        (
            "    volumeMounts:\n    - name: greeting\n      mountPath: /etc/greeting\n",
            "  volumes:\n  - name: greeting\n    configMap:\n      name: greeting\n",
        )
    } else {
        ("", "")
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {}\n    command: [\"/bin/sh\", \"-c\", \"exec sleep 3600\"]\n    resources:\n      requests:\n        cpu: 10m\n        memory: 8Mi\n{mounts}{volumes}",
        faults::image::IMAGE
    )
}

/// Awaits pod `pod` Running, by `deadline`.
async fn running_by(api: &str, pod: &str, deadline: tokio::time::Instant) {
    testkit::wait_until(
        &format!("pod {pod} Running"),
        deadline.saturating_duration_since(tokio::time::Instant::now()),
        async || {
            faults::get_json(&format!("{api}/api/v1/namespaces/default/pods/{pod}"))["status"]
                ["phase"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        },
        |p| p == "Running",
    )
    .await;
}

/// `kubectl exec POD -- ARGS` until it prints `expected`, by `deadline`.
async fn exec_by(
    api: &str,
    pod: &str,
    args: &[&str],
    expected: &str,
    deadline: tokio::time::Instant,
) {
    let mut argv = vec!["exec", pod, "--"];
    argv.extend_from_slice(args);
    let kubectl = testkit::Kubectl::new(api);
    testkit::wait_until(
        &format!("kubectl exec {pod} to print {expected:?}"),
        deadline.saturating_duration_since(tokio::time::Instant::now()),
        async || {
            let out = kubectl.run(&argv).await;
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        },
        |(code, out, _)| *code == Some(0) && out == expected,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_and_configmap_volumes_work_within_seconds_of_each_restart_of_the_embedded_cluster() {
    use faults::{Mode, Proc};
    use std::time::Duration;
    use tokio::time::Instant;
    if !Mode::Containers.possible(
        "exec_and_configmap_volumes_work_within_seconds_of_each_restart_of_the_embedded_cluster",
    ) {
        return;
    }
    let scratch = faults::Scratch::new();
    let (data, data_s, log) = (&scratch.data, scratch.data_s.clone(), scratch.log.clone());
    faults::image::load(&data.join("images"));
    let start = || {
        Proc::spawn(
            &[
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                &data_s,
                "--agents",
                "2",
                "--offer-ttl",
                "1s",
            ],
            "Kubernetes API",
            &log,
        )
    };

    let mut current = start();
    let api = current.url();
    let kubectl = testkit::Kubectl::new(&api);
    kubectl
        .apply(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: greeting\ndata:\n  hello: from the store\n",
        )
        .await;
    kubectl.apply(&sleeper_pod("shell", false)).await;
    running_by(&api, "shell", Instant::now() + Duration::from_secs(120)).await;
    exec_by(
        &api,
        "shell",
        &["echo", "hi"],
        "hi\n",
        Instant::now() + Duration::from_secs(30),
    )
    .await;

    for (n, (how, stop)) in [
        ("SIGTERM", Proc::sigterm as fn(Proc)),
        ("SIGKILL", Proc::sigkill as fn(Proc)),
    ]
    .into_iter()
    .enumerate()
    {
        stop(current);
        current = start();
        let api = current.url();
        testkit::wait_until(
            &format!("mesopod ready after {how}"),
            Duration::from_secs(60),
            async || faults::request("GET", &format!("{api}/readyz"), ""),
            Option::is_some,
        )
        .await;
        let by = Instant::now() + AFTER_READY;
        // What a user does first: start a pod, and look into a running one.
        let pod = format!("mounts-{n}");
        testkit::Kubectl::new(&api)
            .apply(&sleeper_pod(&pod, true))
            .await;
        exec_by(&api, "shell", &["echo", how], &format!("{how}\n"), by).await;
        running_by(&api, &pod, by).await;
        exec_by(
            &api,
            &pod,
            &["cat", "/etc/greeting/hello"],
            "from the store",
            Instant::now() + Duration::from_secs(2),
        )
        .await;
    }
    assert_eq!(faults::panics(&[&log]), 0);
    current.sigterm();
}
