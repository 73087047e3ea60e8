//! Namespace deletion with the real kubectl 1.27, 1.28, 1.30 and 1.33 on a real cluster:
//! the namespace turns Terminating, creates in it are refused, its running pod is
//! stopped with its grace period, its other objects go, then the namespace itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::cluster::*;
use common::{ISSUE_18_KUBECTLS, kubectl, kubectl_version};
use testkit::{ok, stderr, wait_until};

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_namespace_stops_its_running_pods_then_removes_everything_in_it() {
    let app = start(Setup::default()).await;
    let server = app.api_url();
    testkit::init_crypto();
    let http = reqwest::Client::new();
    for k in ISSUE_18_KUBECTLS {
        let v = kubectl_version(k);
        let kc = kubectl(k, &server);
        let ns = format!("doomed-{}", v.replace('.', "-"));
        ok(&kc.run(&["create", "namespace", &ns]).await);
        ok(&kc
            .run(&[
                "create",
                "configmap",
                "settings",
                "-n",
                &ns,
                "--from-literal=a=b",
            ])
            .await);
        ok(&kc
            .run(&[
                "create",
                "secret",
                "generic",
                "creds",
                "-n",
                &ns,
                "--from-literal=p=q",
            ])
            .await);
        // The pod takes a couple of seconds to stop after SIGTERM, which keeps the
        // namespace Terminating long enough to look at.
        let pod = pod_yaml(
            "worker",
            "  terminationGracePeriodSeconds: 30\n",
            "trap 'sleep 2; exit 0' TERM; while true; do sleep 0.1; done",
        );
        ok(&kc
            .run_stdin(&["apply", "-n", &ns, "-f", "-"], Some(&pod))
            .await);
        wait_pod(app.api(), &ns, "worker", T, |p| phase(p) == "Running").await;

        let out = kc.run(&["delete", "namespace", &ns, "--wait=false"]).await;
        assert_eq!(
            ok(&out).trim(),
            format!("namespace \"{ns}\" deleted"),
            "{v}"
        );
        let late = kc.run(&["create", "configmap", "late", "-n", &ns]).await;
        assert!(
            stderr(&late).contains(&format!(
                "configmaps \"late\" is forbidden: unable to create new content in namespace {ns} because it is being terminated"
            )),
            "{v}: {}",
            stderr(&late)
        );
        let phase_now = ok(&kc
            .run(&["get", "namespace", &ns, "-o", "jsonpath={.status.phase}"])
            .await);
        assert_eq!(phase_now, "Terminating", "{v}");

        let stopping = wait_pod(app.api(), &ns, "worker", T, |p| {
            p.metadata.deletion_timestamp.is_some()
        })
        .await;
        assert_eq!(
            stopping.metadata.deletion_grace_period_seconds,
            Some(30),
            "{v}: the pod is deleted with its own grace period"
        );
        wait_gone(app.api(), &ns, "worker", T).await;
        wait_until(
            &format!("namespace {ns} to go"),
            T,
            async || app.api().get_namespace(&ns).is_ok(),
            |exists| !exists,
        )
        .await;
        for (plural, name) in [
            ("configmaps", "settings"),
            ("secrets", "creds"),
            ("serviceaccounts", "default"),
        ] {
            let code = http
                .get(format!("{server}/api/v1/namespaces/{ns}/{plural}/{name}"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            assert_eq!(code, 404, "{v}: {plural}/{name} outlived its namespace");
        }
        let out = kc.run(&["delete", "namespace", "kube-system"]).await;
        assert!(
            stderr(&out).contains(
                "namespaces \"kube-system\" is forbidden: this namespace may not be deleted"
            ),
            "{v}: {}",
            stderr(&out)
        );
    }
    app.shutdown().await;
}
