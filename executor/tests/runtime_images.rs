//! A pod's container images changed while it runs (the scheduler's
//! `ImageUpdate`), with real processes: kubelet's "definition changed" restart
//! of a running container, and nothing for init containers that are done or
//! containers that ended for good.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::pods::*;
use executor::backoff::Backoff;
use executor::logs::cri::Stream as LogStream;
use executor::{ContainerImage, ImageUpdate, PodUpdate, Runtime, RuntimeConfig};
use mesos::proto::TaskId;
use serde_json::json;

fn images(task: &str, containers: &[(&str, &str)], init: &[(&str, &str)]) -> ImageUpdate {
    let list = |l: &[(&str, &str)]| {
        l.iter()
            .map(|(name, image)| ContainerImage {
                name: (*name).into(),
                image: (*image).into(),
            })
            .collect()
    };
    ImageUpdate {
        task_id: task.into(),
        containers: list(containers),
        init_containers: list(init),
    }
}

fn events(u: &PodUpdate) -> Vec<String> {
    u.events
        .iter()
        .map(|e| format!("{} {}", e.reason, e.message))
        .collect()
}

fn waiting_reason(u: &PodUpdate, name: &str) -> Option<String> {
    let c = container(status(u), name);
    c.state.as_ref()?.waiting.as_ref()?.reason.clone()
}

#[tokio::test]
async fn a_running_container_whose_image_changed_is_stopped_and_started_again_whatever_its_policy()
{
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let mut plan = pod("img", "Never", json!([sh("c", "echo run; exec sleep 300")]));
    plan.termination_grace = Duration::from_secs(5);
    rt.launch(TaskId::new("t-img"), plan).unwrap();
    until(&mut rx, |u| {
        container(status(u), "c")
            .state
            .as_ref()
            .unwrap()
            .running
            .is_some()
    })
    .await;
    wait_for_output(dir.path(), "img", "c").await;

    assert!(rt.update_images(images("t-img", &[("c", "busybox:1.37")], &[])));
    let killing = until(&mut rx, |u| !u.events.is_empty()).await;
    assert_eq!(
        events(&killing),
        ["Killing Container c definition changed, will be restarted"]
    );
    let again = until(&mut rx, |u| {
        let c = container(status(u), "c");
        c.restart_count == 1 && c.state.as_ref().unwrap().running.is_some()
    })
    .await;
    let c = container(status(&again), "c");
    assert_eq!(c.image, "busybox:1.37");
    let last = c.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
    // SIGTERM ended the old run (128 + 15), kubelet's `Error`.
    assert_eq!(
        (last.exit_code, last.reason.as_deref()),
        (143, Some("Error"))
    );
    let read = async || read_log(dir.path(), "img", "c", LogStream::Stdout);
    testkit::wait_until("the second run's output", WAIT, read, |log| {
        log.matches("run").count() == 2
    })
    .await;

    // The same order again changes nothing: no second stop.
    assert!(rt.update_images(images("t-img", &[("c", "busybox:1.37")], &[])));
    assert!(rt.kill(&TaskId::new("t-img"), Some(Duration::ZERO)));
    let updates = until_terminal(&mut rx).await;
    let last = updates.last().unwrap();
    assert_eq!(container(status(last), "c").restart_count, 1);
    assert!(
        updates
            .iter()
            .flat_map(events)
            .all(|e| !e.contains("definition changed")),
        "{:?}",
        updates.iter().flat_map(events).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn an_init_container_that_is_done_and_a_container_that_ended_are_not_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let plan = pod_with(
        "done",
        json!({"restartPolicy": "Never",
               "initContainers": [sh("init", "echo init")],
               "containers": [sh("once", "echo once"), sh("long", "echo long; exec sleep 300")]}),
    );
    rt.launch(TaskId::new("t-done"), plan).unwrap();
    until(&mut rx, |u| {
        let s = status(u);
        container(s, "long")
            .state
            .as_ref()
            .unwrap()
            .running
            .is_some()
            && container(s, "once")
                .state
                .as_ref()
                .unwrap()
                .terminated
                .is_some()
    })
    .await;

    let update = images(
        "t-done",
        &[("once", "busybox:1.37"), ("long", "busybox:1.36")],
        &[("init", "busybox:1.37")],
    );
    assert!(rt.update_images(update));
    assert!(rt.kill(&TaskId::new("t-done"), Some(Duration::ZERO)));
    let updates = until_terminal(&mut rx).await;
    let s = status(updates.last().unwrap());
    let init = s.init_container_statuses.as_ref().unwrap();
    // Each keeps the image it ran, and ran once.
    assert_eq!(
        (init[0].image.as_str(), init[0].restart_count),
        ("busybox:1.36", 0)
    );
    let once = container(s, "once");
    assert_eq!(
        (once.image.as_str(), once.restart_count),
        ("busybox:1.36", 0)
    );
    assert_eq!(
        read_log(dir.path(), "done", "init", LogStream::Stdout),
        "init\n"
    );
    assert_eq!(
        read_log(dir.path(), "done", "once", LogStream::Stdout),
        "once\n"
    );
    assert!(
        updates
            .iter()
            .flat_map(events)
            .all(|e| !e.contains("definition changed"))
    );
}

#[tokio::test]
async fn a_running_init_container_finishes_with_its_image_and_a_container_yet_to_start_takes_the_new_one()
 {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = runtime(dir.path());
    let gate = dir.path().join("go");
    let wait = format!(
        "echo init; while [ ! -e {} ]; do sleep 0.05; done",
        gate.display()
    );
    let plan = pod_with(
        "init",
        json!({"restartPolicy": "Never",
               "initContainers": [sh("init", &wait)],
               "containers": [sh("main", "echo main; exec sleep 300")]}),
    );
    rt.launch(TaskId::new("t-init"), plan).unwrap();
    wait_for_output(dir.path(), "init", "init").await;

    let update = images(
        "t-init",
        &[("main", "busybox:1.37")],
        &[("init", "busybox:1.37")],
    );
    assert!(rt.update_images(update));
    // The main container has not run: its status shows the image it will run.
    let taken = until(&mut rx, |u| {
        container(status(u), "main").image == "busybox:1.37"
    })
    .await;
    assert_eq!(
        status(&taken).init_container_statuses.as_ref().unwrap()[0].image,
        "busybox:1.36"
    );
    std::fs::write(&gate, b"").unwrap();
    let started = until(&mut rx, |u| {
        container(status(u), "main")
            .state
            .as_ref()
            .unwrap()
            .running
            .is_some()
    })
    .await;
    let init = &status(&started).init_container_statuses.as_ref().unwrap()[0];
    // The init container ran once, to its end, with the image it had.
    assert_eq!(
        (init.image.as_str(), init.restart_count),
        ("busybox:1.36", 0)
    );
    assert!(init.state.as_ref().unwrap().terminated.is_some());
    assert_eq!(container(status(&started), "main").restart_count, 0);
    assert!(rt.kill(&TaskId::new("t-init"), Some(Duration::ZERO)));
    let updates = until_terminal(&mut rx).await;
    assert!(
        updates
            .iter()
            .flat_map(events)
            .all(|e| !e.contains("definition changed"))
    );
}

#[tokio::test]
async fn a_container_in_crash_loop_back_off_starts_at_once_with_its_new_image() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, mut rx) = Runtime::new(RuntimeConfig {
        // A back-off far longer than the test waits.
        backoff: Backoff {
            initial: Duration::from_secs(600),
            max: Duration::from_secs(600),
        },
        ..config(dir.path())
    });
    let marker = dir.path().join("ran");
    // Fails its first run, runs on from its second.
    let script = format!(
        "[ -e {m} ] && exec sleep 300; touch {m}; exit 1",
        m = marker.display()
    );
    rt.launch(
        TaskId::new("t-crash"),
        pod("crash", "Always", json!([sh("c", &script)])),
    )
    .unwrap();
    until(&mut rx, |u| {
        waiting_reason(u, "c").as_deref() == Some("CrashLoopBackOff")
    })
    .await;

    assert!(rt.update_images(images("t-crash", &[("c", "busybox:1.37")], &[])));
    let again = until(&mut rx, |u| {
        container(status(u), "c")
            .state
            .as_ref()
            .unwrap()
            .running
            .is_some()
    })
    .await;
    let c = container(status(&again), "c");
    assert_eq!((c.image.as_str(), c.restart_count), ("busybox:1.37", 1));
    // Not running when it changed: nothing to stop.
    assert!(
        events(&again)
            .iter()
            .all(|e| !e.contains("definition changed"))
    );
    assert!(rt.kill(&TaskId::new("t-crash"), Some(Duration::ZERO)));
    let last = until_terminal(&mut rx).await.pop().unwrap();
    assert_eq!(container(status(&last), "c").restart_count, 1);
}

#[tokio::test]
async fn new_images_for_a_task_that_is_not_here_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut rt, _rx) = runtime(dir.path());
    assert!(!rt.update_images(images("t-none", &[("c", "busybox:1.37")], &[])));
}
