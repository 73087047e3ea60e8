//! mesopod on etcd end to end: `mesopod scheduler --etcd-servers URL` places pods
//! kubectl creates; SIGKILLed and started again with an EMPTY data directory, it finds
//! everything in etcd (pods, their status, the framework id), resubscribes as the
//! same framework and launches nothing twice. Needs etcd (`.ci/install-etcd.sh`):
//! skipped without it, failed under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::restart::{
    framework_id, localmesos, reconciled_as, run_sleepers, running_pods, scheduler,
};

#[test]
fn a_scheduler_on_etcd_restarts_from_etcd_alone() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(etcd) = runtime.block_on(testkit::etcd::Etcd::start(
        "a_scheduler_on_etcd_restarts_from_etcd_alone",
    )) else {
        return;
    };
    let (_master, master) = localmesos();
    let on_etcd = ["--etcd-servers", etcd.url.as_str()];
    let first_dir = tempfile::tempdir().unwrap();
    let (mut first, api) = scheduler(&master, first_dir.path(), &on_etcd);
    let before = run_sleepers(&api, &["keep-a", "keep-b"]);
    let framework_before = framework_id(&api);
    first.kill().unwrap();
    first.wait().unwrap();

    let second_dir = tempfile::tempdir().unwrap();
    let (_second, api) = scheduler(&master, second_dir.path(), &on_etcd);
    assert_eq!(
        running_pods(&api),
        before,
        "pods, status and task ids come back from etcd"
    );
    reconciled_as(&api, &framework_before, "the framework id comes from etcd");
    // Reconciled, nothing relaunched: the same tasks run.
    assert_eq!(running_pods(&api), before);
}
