//! The projected ServiceAccount token end to end: a secure mesopod injects
//! `kube-api-access-*` (ServiceAccount admission), the executor fetches the
//! token with its node credential and mounts it at
//! `/var/run/secrets/kubernetes.io/serviceaccount`, and the API shim accepts
//! that token as the pod's ServiceAccount. `automountServiceAccountToken:
//! false` gets no mount.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::time::Duration;

use common::cluster::{phase, wait_pod};
use containers_support::*;
use testkit::{ok, wait_until};

const T: Duration = Duration::from_secs(90);
const K: &str = common::KUBECTL_133;
const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn pod(name: &str, automount: bool) -> String {
    let script = format!(
        "echo ns=$(cat {SA_DIR}/namespace); echo ca=$(grep -c BEGIN {SA_DIR}/ca.crt); \
         echo host=$KUBERNETES_SERVICE_HOST port=$KUBERNETES_SERVICE_PORT; \
         echo token=$(cat {SA_DIR}/token); ls {SA_DIR} >/dev/null 2>&1 || echo no-mount; \
         echo done; sleep 3600"
    );
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  automountServiceAccountToken: {automount}\n  containers:\n  - name: main\n    image: {IMAGE}\n    command: [\"/bin/sh\", \"-c\", {script:?}]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_reads_its_service_account_token_and_the_api_accepts_it() {
    if !prerequisites(false) {
        return;
    }
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let cluster = common::secure::Secure::embedded(&store, &[]).await;
    let app = &cluster.app;
    let admin =
        async |args: &[&str], stdin: Option<&str>| cluster.admin_stdin(K, args, stdin).await;

    ok(&admin(&["apply", "-f", "-"], Some(&pod("with-token", true))).await);
    ok(&admin(&["apply", "-f", "-"], Some(&pod("without-token", false))).await);
    for name in ["with-token", "without-token"] {
        wait_pod(app.api(), "default", name, T, |p| phase(p) == "Running").await;
    }
    let logs = async |name: &str| {
        String::from_utf8_lossy(&admin(&["logs", name], None).await.stdout).into_owned()
    };

    let with = wait_until(
        "the token pod's lines",
        T,
        async || logs("with-token").await,
        |l| l.contains("done"),
    )
    .await;
    assert!(with.contains("ns=default"), "{with}");
    assert!(with.contains("ca=1"), "the API's CA is mounted: {with}");
    assert!(!with.contains("no-mount"), "{with}");
    let url = reqwest::Url::parse(&app.api_url()).unwrap();
    assert!(
        with.contains(&format!(
            "host={} port={}",
            url.host_str().unwrap(),
            url.port().unwrap()
        )),
        "KUBERNETES_SERVICE_HOST/PORT name the API shim: {with}"
    );
    let token = with
        .lines()
        .find_map(|l| l.strip_prefix("token="))
        .expect("a token line")
        .trim()
        .to_owned();
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");

    // The API shim accepts the mounted token as the pod's ServiceAccount.
    let whoami = cluster
        .user(K, Some(&token), &["auth", "whoami", "-o", "json"])
        .await;
    ok(&whoami);
    let who = String::from_utf8_lossy(&whoami.stdout);
    assert!(
        who.contains("system:serviceaccount:default:default"),
        "{who}"
    );
    assert!(
        who.contains("with-token"),
        "the token is bound to its pod: {who}"
    );

    let without = wait_until(
        "the other pod's lines",
        T,
        async || logs("without-token").await,
        |l| l.contains("done"),
    )
    .await;
    assert!(without.contains("no-mount"), "{without}");
    assert!(
        !without.contains("token=ey"),
        "no token without automount: {without}"
    );

    for name in ["with-token", "without-token"] {
        ok(&admin(&["delete", "pod", name, "--wait=false"], None).await);
    }
}
