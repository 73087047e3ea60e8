//! A ResourceQuota across a SIGKILL of mesopod and a start on the same data directory:
//! what it counted is still what it holds, the new leader's controller counts on from
//! the store (a delete gives back), and the admission refuses what the restored count
//! leaves no room for.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::cluster::pod_yaml;
use common::restart::{get_json, localmesos, run_sleepers, scheduler};
use testkit::{Kubectl, ok, stderr, wait_until_blocking};

const T: Duration = Duration::from_secs(60);

/// The quota `q`'s `status.used` of `name` as the API at `api` shows it.
fn used(api: &str, name: &str) -> String {
    let q = get_json(&format!("{api}/api/v1/namespaces/default/resourcequotas/q"));
    q["status"]["used"][name].as_str().unwrap_or("").to_owned()
}

/// Waits until `used(name)` is `want`: the controller writes across processes, and
/// only the API shows it.
fn wait_used(api: &str, name: &str, want: &str) {
    wait_until_blocking(
        &format!("{name} used {want}"),
        T,
        || used(api, name),
        |u| u == want,
    );
}

#[test]
fn a_quota_stays_true_across_a_restart_and_counts_on_after_it() {
    let data = tempfile::tempdir().unwrap();
    let (_master, master) = localmesos();
    let (mut first, api) = scheduler(&master, data.path(), &[]);
    let k = Kubectl::new(&api);
    ok(&k.run_blocking(&["create", "quota", "q", "--hard=pods=3,count/configmaps=2"]));
    wait_used(&api, "pods", "0");
    run_sleepers(&api, &["keep-a", "keep-b"]);
    ok(&k.run_blocking(&["create", "configmap", "c1"]));
    assert_eq!(
        (used(&api, "pods"), used(&api, "count/configmaps")),
        ("2".to_owned(), "1".to_owned())
    );

    first.kill().unwrap();
    first.wait().unwrap();
    let (_second, api) = scheduler(&master, data.path(), &[]);
    let k = Kubectl::new(&api);
    assert_eq!(
        (used(&api, "pods"), used(&api, "count/configmaps")),
        ("2".to_owned(), "1".to_owned()),
        "the count is what was stored"
    );
    // One more pod fits; the one after is refused on the restored count.
    let third = pod_yaml("third", "", "sleep 300");
    ok(&k.run_stdin_blocking(&["create", "-f", "-"], Some(&third)));
    let fourth = pod_yaml("fourth", "", "sleep 300");
    let out = k.run_stdin_blocking(&["create", "-f", "-"], Some(&fourth));
    assert!(
        stderr(&out).contains(
            "pods \"fourth\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=3, limited: pods=3"
        ),
        "{out:?}"
    );
    // The new leader's controller gives back what deletes free.
    ok(&k.run_blocking(&["delete", "pod", "keep-a", "--wait=false"]));
    ok(&k.run_blocking(&["delete", "configmap", "c1"]));
    wait_used(&api, "pods", "2");
    wait_used(&api, "count/configmaps", "0");
}
