//! Issue #17: the tmpfs volumes of a SIGKILLed executor's pods (a `medium:
//! Memory` emptyDir, a secret volume) do not stay mounted for good. A pod
//! the next executor adopts keeps them (its containers still use them); a
//! pod nobody adopts (deleted while no executor ran) has them unmounted and
//! its volume directories removed once the adoption timeout is over:
//! `/proc/self/mountinfo` then has no mount under the dead executor's
//! sandbox.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::cluster::*;
use containers_support::*;
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(120);
/// The agent's `--recovery_timeout`: how long a dead executor's pods wait
/// to be adopted.
const ADOPTION_TIMEOUT: Duration = Duration::from_secs(15);

/// The mount points below `dir`.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(PathBuf::from)
        .filter(|m| m.starts_with(dir))
        .collect()
}

fn pod(name: &str, marker: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds-{name}\nstringData:\n  password: hunter2\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  \
         volumes:\n  - name: scratch\n    emptyDir:\n      medium: Memory\n  - name: creds\n    secret:\n      secretName: creds-{name}\n  \
         containers:\n  - name: main\n    image: {IMAGE}\n    command: [\"sleep\", \"3600\"]\n    env:\n    - name: MARKER\n      value: {marker:?}\n    \
         volumeMounts:\n    - {{name: scratch, mountPath: /scratch}}\n    - {{name: creds, mountPath: /creds}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_executor_unmounts_what_a_sigkilled_one_left() {
    testkit::init_crypto();
    if !prerequisites(false) {
        return;
    }
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let app = cluster_with("embedded", &store, |cfg| {
        cfg.embedded.timing.recovery_timeout = ADOPTION_TIMEOUT;
    })
    .await;
    let k = Kubectl::new(&app.api_url());
    let first = format!("leftovers-first-{}", std::process::id());
    ok(&k
        .run_stdin(&["apply", "-f", "-"], Some(&pod("first", &first)))
        .await);
    wait_pod(app.api(), "default", "first", T, |p| phase(p) == "Running").await;

    let work = app.local().unwrap().work_dir().to_path_buf();
    let executors = executors_under(&work);
    assert_eq!(executors.len(), 1, "one executor: {executors:?}");
    // Both tmpfs volumes are mounted below the pod's directory in the
    // executor's sandbox.
    let volumes: Vec<PathBuf> = mounts_under(&work)
        .into_iter()
        .filter(|m| m.parent().is_some_and(|p| p.ends_with("volumes")))
        .collect();
    assert_eq!(volumes.len(), 2, "{volumes:?}");
    let pod_dir = volumes[0].parent().unwrap().parent().unwrap().to_path_buf();
    let old_sandbox = pod_dir.parent().unwrap().parent().unwrap().to_path_buf();
    assert!(old_sandbox.join("pods").is_dir(), "{old_sandbox:?}");

    // The executor dies: the next one adopts the pod, whose volumes stay.
    let task = |p: &k8s_openapi::api::core::v1::Pod| {
        p.metadata.annotations.as_ref().unwrap()["mesopod.io/task-id"].clone()
    };
    let before = task(&app.api().get_pod("default", "first").unwrap());
    sigkill(executors[0]);
    wait_adopted(&app, "first", &before, T).await;
    let mut kept = mounts_under(&old_sandbox);
    kept.retain(|m| m.parent().is_some_and(|p| p.ends_with("volumes")));
    kept.sort();
    let mut was = volumes.clone();
    was.sort();
    assert_eq!(kept, was, "the adopted pod's volumes stay mounted");

    // It dies again, and the pod is deleted meanwhile: nobody adopts it.
    let executors = executors_under(&work);
    assert_eq!(executors.len(), 1, "one executor: {executors:?}");
    sigkill(executors[0]);
    ok(&k
        .run(&["delete", "pod", "first", "--force", "--grace-period=0"])
        .await);
    let left = mounts_under(&old_sandbox);
    assert!(
        !left.is_empty(),
        "a SIGKILLed executor cannot unmount its pods' volumes"
    );

    // A new pod brings a new executor, which cleans up what nobody
    // adopted once the adoption timeout is over.
    let second = format!("leftovers-second-{}", std::process::id());
    ok(&k
        .run_stdin(&["apply", "-f", "-"], Some(&pod("second", &second)))
        .await);
    wait_pod(app.api(), "default", "second", T, |p| phase(p) == "Running").await;
    wait_until(
        "no mount left under the dead executor's sandbox",
        T + ADOPTION_TIMEOUT,
        async || mounts_under(&old_sandbox),
        Vec::is_empty,
    )
    .await;
    // Unmounted first, removed next.
    wait_until(
        "the dead executor's pod volumes removed",
        T,
        async || pod_dir.join("volumes").exists(),
        |exists| !exists,
    )
    .await;
    assert!(
        pod_dir.join("main").is_dir(),
        "its container logs stay, as after a pod's own teardown"
    );
    // The new pod's volumes are mounted, elsewhere.
    let now: Vec<PathBuf> = mounts_under(&work)
        .into_iter()
        .filter(|m| m.parent().is_some_and(|p| p.ends_with("volumes")))
        .collect();
    assert_eq!(now.len(), 2, "{now:?}");

    ok(&k
        .run(&["delete", "pod", "second", "--wait=true", "--timeout=60s"])
        .await);
    wait_until(
        "the second pod's volumes unmounted with it",
        T,
        async || mounts_under(&work),
        |m| {
            !m.iter()
                .any(|m| m.parent().is_some_and(|p| p.ends_with("volumes")))
        },
    )
    .await;
    app.shutdown().await;
    wait_until(
        "no pod process after shutdown",
        T,
        async || processes_with_env(&format!("MARKER={second}")),
        |p| p.is_empty(),
    )
    .await;
}
