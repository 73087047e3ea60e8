//! End to end with the real kubectl: pods run in real containers built
//! from their image, on the embedded runtime (`mesopod runtime`) and on
//! Debian's runc, through the same executor path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::time::Duration;

use common::cluster::*;
use containers_support::*;
use images::testing::Registry;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(60);

fn status(p: &Pod) -> Option<&ContainerStatus> {
    p.status.as_ref()?.container_statuses.as_ref()?.first()
}

fn waiting_reason(p: &Pod) -> Option<String> {
    status(p)?.state.as_ref()?.waiting.as_ref()?.reason.clone()
}

fn pod(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 1\n{spec}"
    )
}

fn sh(name: &str, image: &str, security: &str, script: &str) -> String {
    pod(
        name,
        &format!(
            "  containers:\n  - name: main\n    image: {image}\n    command: [\"/bin/sh\", \"-c\", {script:?}]\n{security}"
        ),
    )
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

async fn logs(server: &str, name: &str) -> String {
    ok(&Kubectl::new(server).run(&["logs", name]).await)
}

async fn scenario(runtime: &str, registry: &Registry) {
    let (_keep, store) = store();
    let repository = if runtime == "embedded" {
        "test/embedded"
    } else {
        "test/runc"
    };
    let image = registry.push(repository, "1", &test_image()).await;
    let image = image.as_str();
    let app = cluster(runtime, &store).await;
    let server = app.api_url();
    let k = Kubectl::new(&server);

    // The image's file, runAsUser, the hostname, no host /etc/shadow, an
    // environment of the pod and image only, a PID namespace of its own.
    let script = format!(
        "cat {IMAGE_FILE}; echo; echo uid=$(id -u) gid=$(id -g); echo host=$(hostname); \
         test -e /etc/shadow && echo shadow-visible || echo no-shadow; \
         echo from-image=$FROM_IMAGE; echo mesos-vars=$(env | grep -c MESOS_); \
         echo pid1=$(cat /proc/1/comm)"
    );
    let yaml = sh(
        "reader",
        image,
        "    securityContext:\n      runAsUser: 1000\n      runAsGroup: 1000\n",
        &script,
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let done = wait_pod(app.api(), "default", "reader", T, |p| {
        phase(p) == "Succeeded" || phase(p) == "Failed"
    })
    .await;
    let text = logs(&server, "reader").await;
    assert_eq!(phase(&done), "Succeeded", "{text}\n{:?}", done.status);
    for want in [
        IMAGE_FILE_TEXT,
        "uid=1000 gid=1000",
        "host=reader",
        "no-shadow",
        "from-image=yes",
        "mesos-vars=0",
        "pid1=sh",
    ] {
        assert!(text.contains(want), "{want:?} not in the logs:\n{text}");
    }
    let cs = status(&done).unwrap();
    assert!(
        cs.image_id
            .starts_with(&format!("{}/{repository}@sha256:", registry.host())),
        "{cs:?}"
    );
    assert!(
        cs.container_id
            .as_deref()
            .unwrap_or("")
            .starts_with("mesopod://"),
        "{cs:?}"
    );

    let seen = events(&k, "reader").await;
    for (reason, message) in [
        ("Pulling", format!("Pulling image \"{image}\"")),
        (
            "Pulled",
            format!("Successfully pulled image \"{image}\" in "),
        ),
        ("Created", "Created container: main".to_owned()),
        ("Started", "Started container main".to_owned()),
    ] {
        assert!(
            seen.iter().any(|(r, m, f)| r == reason
                && m.starts_with(&message)
                && f == "spec.containers{main}"),
            "no {reason} event {message:?}: {seen:?}"
        );
    }

    // A file one pod writes is in its own writable layer: another pod of
    // the same image does not see it; the image, now present, is not pulled.
    let yaml = sh(
        "writer",
        image,
        "",
        "touch /tmp/writer-was-here && echo wrote",
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    wait_pod(app.api(), "default", "writer", T, |p| {
        phase(p) == "Succeeded"
    })
    .await;
    assert!(logs(&server, "writer").await.contains("wrote"));
    let present = format!("Container image \"{image}\" already present on machine");
    assert!(
        events(&k, "writer")
            .await
            .iter()
            .any(|(r, m, _)| r == "Pulled" && *m == present),
        "{:?}",
        events(&k, "writer").await
    );
    let yaml = sh(
        "other",
        image,
        "",
        "test -e /tmp/writer-was-here && echo sees-writer || echo writer-invisible",
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    wait_pod(app.api(), "default", "other", T, |p| {
        phase(p) == "Succeeded"
    })
    .await;
    assert!(logs(&server, "other").await.contains("writer-invisible"));

    // No command: the image's Entrypoint and Cmd run.
    ok(&k
        .run(&["run", "ep", &format!("--image={image}"), "--restart=Never"])
        .await);
    wait_pod(app.api(), "default", "ep", T, |p| phase(p) == "Succeeded").await;
    let text = logs(&server, "ep").await;
    assert!(
        text.contains("entrypoint ran with the image's cmd"),
        "{text}"
    );

    // Over its memory limit: OOMKilled, exit 137.
    let yaml = sh(
        "hog",
        image,
        "    resources:\n      limits:\n        memory: 32Mi\n",
        "a=xxxxxxxxxxxxxxxx; while :; do a=$a$a; done",
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let hog = wait_pod(app.api(), "default", "hog", T, |p| phase(p) == "Failed").await;
    let term = status(&hog)
        .unwrap()
        .state
        .clone()
        .unwrap()
        .terminated
        .unwrap();
    assert_eq!(
        (term.exit_code, term.reason.as_deref()),
        (137, Some("OOMKilled")),
        "{term:?}"
    );

    // A root image under runAsNonRoot is refused, and the pod waits.
    let yaml = sh(
        "nonroot",
        image,
        "    securityContext:\n      runAsNonRoot: true\n",
        "echo should not run",
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let refused = wait_pod(app.api(), "default", "nonroot", T, |p| {
        waiting_reason(p).as_deref() == Some("CreateContainerConfigError")
    })
    .await;
    assert_eq!(phase(&refused), "Pending");
    let msg = status(&refused)
        .unwrap()
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap()
        .message
        .unwrap();
    assert!(
        msg.contains("container has runAsNonRoot and image will run as root"),
        "{msg}"
    );

    // An image that does not exist: ErrImagePull, then ImagePullBackOff, Pending throughout.
    let missing = format!("{}/test/does-not-exist:1", registry.host());
    let yaml = pod(
        "missing",
        &format!("  containers:\n  - name: main\n    image: {missing}\n"),
    );
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    let first = wait_pod(app.api(), "default", "missing", T, |p| {
        waiting_reason(p).as_deref() == Some("ErrImagePull")
    })
    .await;
    assert_eq!(phase(&first), "Pending");
    let later = wait_pod(app.api(), "default", "missing", T, |p| {
        waiting_reason(p).as_deref() == Some("ImagePullBackOff")
    })
    .await;
    assert_eq!(phase(&later), "Pending");
    let table = ok(&k.run(&["get", "pod", "missing"]).await);
    assert!(table.contains("ImagePullBackOff"), "{table}");
    let seen = events(&k, "missing").await;
    for (reason, starts) in [
        ("Failed", format!("Failed to pull image \"{missing}\": ")),
        ("Failed", "Error: ErrImagePull".to_owned()),
        ("BackOff", format!("Back-off pulling image \"{missing}\"")),
        ("Failed", "Error: ImagePullBackOff".to_owned()),
    ] {
        assert!(
            seen.iter()
                .any(|(r, m, _)| r == reason && m.starts_with(starts.as_str())),
            "no {reason} {starts:?}: {seen:?}"
        );
    }

    for name in [
        "reader", "writer", "other", "ep", "hog", "nonroot", "missing",
    ] {
        ok(&k.run(&["delete", "pod", name, "--wait=false"]).await);
    }
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_in_containers_on_the_embedded_runtime() {
    if prerequisites(false)
        && let Some(registry) = Registry::start_or_skip("containers on the embedded runtime").await
    {
        scenario("embedded", &registry).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_run_in_containers_on_runc() {
    if prerequisites(true)
        && let Some(registry) = Registry::start_or_skip("containers on runc").await
    {
        scenario(RUNC, &registry).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_mode_runs_host_processes_and_says_every_pod_is_not_isolated() {
    let (_keep, store) = store();
    let app = cluster("process", &store).await;
    let server = app.api_url();
    let k = Kubectl::new(&server);
    let yaml = sh("host", "busybox", "", "echo on the host");
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(&yaml)).await);
    wait_pod(app.api(), "default", "host", T, |p| phase(p) == "Succeeded").await;
    let seen = events(&k, "host").await;
    assert!(
        seen.iter()
            .any(|(r, m, _)| r == "NotIsolated" && m.contains("without isolation")),
        "{seen:?}"
    );
    app.shutdown().await;
}
