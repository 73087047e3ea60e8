//! End to end with the real kubectl: a running pod's container image is
//! changed (`kubectl set image`), and the container restarts with it as
//! kubelet restarts it, with kubelet's events; an image that cannot be
//! pulled shows as at launch, and fixing it brings the container back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::time::Duration;

use common::cluster::*;
use containers_support::*;
use images::testing::Registry;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(90);

fn main_status(p: &Pod) -> Option<&ContainerStatus> {
    p.status.as_ref()?.container_statuses.as_ref()?.first()
}

fn running(p: &Pod) -> bool {
    main_status(p)
        .and_then(|c| c.state.as_ref())
        .is_some_and(|s| s.running.is_some())
}

fn waiting_reason(p: &Pod) -> Option<String> {
    main_status(p)?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

/// `(reason, message, fieldPath)` of the events about pod `name`.
async fn events(k: &Kubectl, name: &str) -> Vec<(String, String, String)> {
    let list: serde_json::Value =
        serde_json::from_str(&ok(&k.run(&["get", "events", "-o", "json"]).await)).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name)
        .map(|e| {
            let s = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
            (
                s(&e["reason"]),
                s(&e["message"]),
                s(&e["involvedObject"]["fieldPath"]),
            )
        })
        .collect()
}

fn has_event(seen: &[(String, String, String)], reason: &str, starts: &str) -> bool {
    seen.iter()
        .any(|(r, m, f)| r == reason && m.starts_with(starts) && f == "spec.containers{main}")
}

async fn jsonpath(k: &Kubectl, name: &str, path: &str) -> String {
    let arg = format!("jsonpath={{{path}}}");
    ok(&k.run(&["get", "pod", name, "-o", &arg]).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_image_on_a_running_pod_restarts_its_container_with_the_new_image() {
    if !prerequisites(false) {
        return;
    }
    let Some(registry) = Registry::start_or_skip("image updates on the embedded runtime").await
    else {
        return;
    };
    let (_keep, store) = store();
    let one = registry
        .push("test/update", "1", &test_image_with_env(&["MARK=one"]))
        .await;
    let two = registry
        .push("test/update", "2", &test_image_with_env(&["MARK=two"]))
        .await;
    let app = cluster("embedded", &store).await;
    let server = app.api_url();
    let k = Kubectl::new(&server);

    // The container says which image it runs, and ends with exit 3 on SIGTERM.
    let script = "trap 'exit 3' TERM; echo image=$MARK; while :; do sleep 1; done";
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  restartPolicy: Never\n  \
         terminationGracePeriodSeconds: 20\n  containers:\n  - name: main\n    image: {one}\n    \
         command: [\"/bin/sh\", \"-c\", {script:?}]\n"
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    wait_pod(app.api(), "default", "p", T, running).await;
    let logs = async || ok(&Kubectl::new(&server).run(&["logs", "p"]).await);
    testkit::wait_until("the first run's output", T, logs, |l| {
        l.contains("image=one")
    })
    .await;

    ok(&k
        .run(&["set", "image", "pod/p", &format!("main={two}")])
        .await);
    let again = wait_pod(app.api(), "default", "p", T, |p| {
        running(p) && main_status(p).is_some_and(|c| c.restart_count == 1)
    })
    .await;
    let c = main_status(&again).unwrap();
    assert_eq!(c.image, two, "{c:?}");
    assert!(
        c.image_id
            .starts_with(&format!("{}/test/update@sha256:", registry.host())),
        "{c:?}"
    );
    let last = c.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!((last.exit_code, last.reason.as_deref()), (3, Some("Error")));
    assert_eq!(
        phase(&again),
        "Running",
        "restartPolicy Never does not stop it"
    );
    testkit::wait_until("the new run's output", T, logs, |l| l.contains("image=two")).await;
    let previous = ok(&k.run(&["logs", "p", "--previous"]).await);
    assert!(previous.contains("image=one"), "{previous}");
    assert_eq!(
        jsonpath(&k, "p", ".status.containerStatuses[0].image").await,
        two
    );
    assert_eq!(
        jsonpath(&k, "p", ".status.containerStatuses[0].restartCount").await,
        "1"
    );
    let seen = events(&k, "p").await;
    for (reason, starts) in [
        (
            "Killing",
            "Container main definition changed, will be restarted".to_owned(),
        ),
        ("Pulling", format!("Pulling image \"{two}\"")),
        ("Pulled", format!("Successfully pulled image \"{two}\" in ")),
        ("Created", "Created container: main".to_owned()),
        ("Started", "Started container main".to_owned()),
    ] {
        assert!(
            has_event(&seen, reason, &starts),
            "no {reason} {starts:?}: {seen:?}"
        );
    }

    // An image that cannot be pulled shows as at launch, and keeps being tried.
    let missing = format!("{}/test/does-not-exist:1", registry.host());
    ok(&k
        .run(&["set", "image", "pod/p", &format!("main={missing}")])
        .await);
    wait_pod(app.api(), "default", "p", T, |p| {
        waiting_reason(p).as_deref() == Some("ImagePullBackOff")
    })
    .await;
    let seen = events(&k, "p").await;
    for (reason, starts) in [
        ("Failed", format!("Failed to pull image \"{missing}\": ")),
        ("Failed", "Error: ErrImagePull".to_owned()),
        ("BackOff", format!("Back-off pulling image \"{missing}\"")),
    ] {
        assert!(
            has_event(&seen, reason, &starts),
            "no {reason} {starts:?}: {seen:?}"
        );
    }
    // Fixed, it runs at once, without waiting out the back-off.
    ok(&k
        .run(&["set", "image", "pod/p", &format!("main={one}")])
        .await);
    let fixed = wait_pod(app.api(), "default", "p", Duration::from_secs(30), |p| {
        running(p) && main_status(p).is_some_and(|c| c.image == one)
    })
    .await;
    assert_eq!(phase(&fixed), "Running");
    let present = format!("Container image \"{one}\" already present on machine");
    assert!(has_event(&events(&k, "p").await, "Pulled", &present));

    // Nothing else of a container may change, in kube's words.
    let refused = k
        .run(&[
            "patch",
            "pod",
            "p",
            "-p",
            r#"{"spec":{"containers":[{"name":"main","command":["true"]}]}}"#,
        ])
        .await;
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"),
        "{err}"
    );

    ok(&k.run(&["delete", "pod", "p", "--wait=false"]).await);
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_changed_while_the_executor_is_dead_is_run_by_the_one_that_adopts_the_pod() {
    testkit::init_crypto();
    if !prerequisites(false) {
        return;
    }
    let Some(registry) = Registry::start_or_skip("image updates across adoption").await else {
        return;
    };
    let (_keep, store) = store();
    let one = registry
        .push("test/adopt", "1", &test_image_with_env(&["MARK=one"]))
        .await;
    let two = registry
        .push("test/adopt", "2", &test_image_with_env(&["MARK=two"]))
        .await;
    let app = cluster_with("embedded", &store, |cfg| {
        cfg.embedded.timing.recovery_timeout = Duration::from_secs(30);
    })
    .await;
    let server = app.api_url();
    let k = Kubectl::new(&server);
    let script = "trap 'exit 3' TERM; echo image=$MARK; while :; do sleep 1; done";
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\nspec:\n  terminationGracePeriodSeconds: 20\n  \
         containers:\n  - name: main\n    image: {one}\n    command: [\"/bin/sh\", \"-c\", {script:?}]\n"
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let first = wait_pod(app.api(), "default", "a", T, running).await;
    let old_task = first.metadata.annotations.as_ref().unwrap()["mesopod.io/task-id"].clone();

    // The executor dies; the change comes while none runs the pod.
    let work = app.local().unwrap().work_dir().to_path_buf();
    kill_the_executor(&work);
    ok(&k
        .run(&["set", "image", "pod/a", &format!("main={two}")])
        .await);
    wait_adopted(&app, "a", &old_task, T).await;
    let changed = wait_pod(app.api(), "default", "a", T, |p| {
        running(p) && main_status(p).is_some_and(|c| c.image == two)
    })
    .await;
    let c = main_status(&changed).unwrap();
    assert_eq!(c.restart_count, 1, "{c:?}");
    let last = c.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    assert_eq!(
        last.exit_code, 3,
        "the adopted run was stopped for its image: {last:?}"
    );
    // What runs was pulled for it. (Not read back with `kubectl logs` or
    // exec: both look for an adopted pod in the newest executor run's
    // sandbox, not in the one its pod directory stays in.)
    let before = main_status(&first).unwrap().image_id.clone();
    assert!(
        !c.image_id.is_empty() && c.image_id != before,
        "{before} then {c:?}"
    );

    ok(&k.run(&["delete", "pod", "a", "--wait=false"]).await);
    app.shutdown().await;
}
