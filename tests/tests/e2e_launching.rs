//! A round is launched while the core goes on: what happens to a pod that
//! is deleted after it was bound but before Mesos has its task.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::cluster::*;
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(60);

/// The KILL for a pod deleted while its ACCEPT is with a slow master waits
/// for the ACCEPT: sent first, it would reach Mesos before the task exists
/// and be lost, and the task would then run with no pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_deleted_while_its_launch_is_under_way_is_killed_once_launched() {
    let app = start(Setup::default()).await;
    let server = app.api_url();
    let mesos = app.local().expect("an embedded localmesos");
    mesos.hold_accepts();

    Kubectl::new(&server)
        .apply(&pod_yaml("held", "", "sleep 120"))
        .await;
    // Bound durably before the ACCEPT, which the master now holds.
    let bound = wait_pod(app.api(), "default", "held", T, |p| {
        p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
    })
    .await;
    let task_id = bound.metadata.annotations.unwrap()["mesopod.io/task-id"].clone();
    assert!(
        mesos.state().task(&task_id).is_none(),
        "the master has not seen the task yet"
    );

    ok(&Kubectl::new(&server)
        .run(&["delete", "pod", "held", "--wait=false"])
        .await);
    // The core reads its pod watch in order: once a pod created after the
    // deletion is bound, the deletion has been handled (the KILL held).
    Kubectl::new(&server)
        .apply(&pod_yaml("after", "", "sleep 120"))
        .await;
    wait_pod(app.api(), "default", "after", T, |p| {
        p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some()
    })
    .await;
    assert!(
        mesos.state().task(&task_id).is_none(),
        "still held: nothing reached the master"
    );

    mesos.release_accepts();
    wait_gone(app.api(), "default", "held", T).await;
    let state = mesos.state();
    let task = state
        .task(&task_id)
        .expect("the task was launched, then killed");
    assert_eq!(task.state, mesos::proto::TaskState::TaskKilled, "{task:?}");
    // The other pod launched normally.
    wait_pod(app.api(), "default", "after", T, |p| phase(p) == "Running").await;
    app.shutdown().await;
}
