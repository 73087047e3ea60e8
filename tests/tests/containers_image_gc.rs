//! Image gc driven by the executor, as kubelet's: when it starts and
//! whenever a pod ends, past `--image-gc-high-threshold` percent of the
//! store's filesystem, unused images go and the images of live pods stay.
//! The thresholds here (1 % and 0 %, no minimum age) put any real
//! filesystem past them, so every unused image goes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::containers_support;

use std::path::Path;
use std::time::Duration;

use containers_support::*;
use executor::objects::StaticObjects;
use executor::{PodPlan, PodState};
use images::testing::{Layer, Spec, docker_save, image};
use images::{ImageGcPolicy, ImageStore, StoreConfig};
use mesos::proto::TaskId;
use testkit::wait_until;

const UNUSED: &str = "mesopod.test/unused:1";

fn pod(name: &str, command: &[&str]) -> PodPlan {
    let pod = serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": IMAGE, "command": command,
                            "imagePullPolicy": "Never"}]
        }
    });
    PodPlan::from_task_data(Some(&serde_json::to_vec(&pod).unwrap())).unwrap()
}

/// Loads [`IMAGE`] (the test image) and [`UNUSED`] (another) into `store`.
async fn load_both(store: &Path) {
    load_image(store, IMAGE).await;
    let other = image(
        vec![
            Layer::new()
                .dir("data")
                .file("data/f", 0o644, b"only here")
                .tar(),
        ],
        &Spec::default(),
    );
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("other.tar");
    std::fs::write(&archive, docker_save(&[(&[UNUSED], &other)])).unwrap();
    let s = ImageStore::open(StoreConfig::new(store)).unwrap();
    s.load_archive(&archive).await.unwrap();
}

/// Which of the two images the store at `store` holds (looking does not
/// count as a use, which would change what gc removes).
async fn present(store: &Path) -> (bool, bool) {
    let refs = ImageStore::open(StoreConfig::new(store))
        .unwrap()
        .references()
        .await;
    let has = |name: &str| {
        let full = images::Reference::parse(name).unwrap().to_string();
        refs.contains(&full)
    };
    (has(IMAGE), has(UNUSED))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_executor_removes_unused_images_past_the_threshold_and_keeps_those_in_use() {
    if !prerequisites(false) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("images");
    load_both(&store).await;
    assert_eq!(present(&store).await, (true, true));
    let policy = ImageGcPolicy::new(1, 0, Duration::ZERO).unwrap();

    // At start, nothing runs: every image is unused and goes.
    let (mut rt, mut rx) = in_process::runtime(dir.path(), StaticObjects::default(), policy);
    wait_until(
        "the executor's first gc pass",
        in_process::T,
        async || present(&store).await,
        |p| *p == (false, false),
    )
    .await;

    // A pod runs IMAGE; another pod of it ends, and the pass that follows
    // removes only the image no live pod runs.
    load_both(&store).await;
    rt.launch(TaskId::new("t-live"), pod("live", &["sleep", "3600"]))
        .unwrap();
    in_process::until(&mut rx, |u| {
        u.task_id.value == "t-live" && u.state == PodState::Running
    })
    .await;
    rt.launch(TaskId::new("t-done"), pod("done", &["true"]))
        .unwrap();
    let (done, _) = in_process::until(&mut rx, |u| {
        u.task_id.value == "t-done" && u.state.is_terminal()
    })
    .await;
    assert_eq!(done.state, PodState::Finished, "{done:?}");
    wait_until(
        "the unused image removed after a pod ended",
        in_process::T,
        async || present(&store).await,
        |p| !p.1,
    )
    .await;
    assert_eq!(
        present(&store).await,
        (true, false),
        "the live pod's image stays"
    );

    // Once the last pod that runs it ends, it goes too.
    assert!(rt.kill(&TaskId::new("t-live"), Some(Duration::ZERO)));
    in_process::until(&mut rx, |u| {
        u.task_id.value == "t-live" && u.state.is_terminal()
    })
    .await;
    wait_until(
        "the image removed once no pod runs it",
        in_process::T,
        async || present(&store).await,
        |p| *p == (false, false),
    )
    .await;
    rt.kill_all(Duration::ZERO);
    rt.wait_all().await;
}
