//! `kubectl exec` on a secure mesopod (TLS, tokens, `Node,RBAC`): the admin execs; a
//! user bound to `view` is forbidden (`pods/exec` is not in it), and bound to `edit`
//! may (it grants `get` and `create` on `pods/exec`, both of which a WebSocket exec
//! needs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;
use crate::containers_support;

use std::time::Duration;

use common::cluster::{phase, wait_pod};
use containers_support::*;
use testkit::ok;

const T: Duration = Duration::from_secs(90);
const K: &str = common::KUBECTL_133;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_needs_a_role_that_grants_pods_exec() {
    if !prerequisites(false) {
        return;
    }
    let (_keep, store) = store();
    load_image(&store, IMAGE).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let app = common::secure::with_embedded_agent(dir.path(), &store, &[]).await;
    let k = common::kubectl(K, &app.api_url());
    let kc = format!("--kubeconfig={}", data.join("kubeconfig").display());
    let admin = async |args: &[&str], stdin: Option<&str>| {
        let mut all = vec![kc.as_str()];
        all.extend_from_slice(args);
        k.run_stdin(&all, stdin).await
    };
    let ca = format!(
        "--certificate-authority={}",
        data.join("pki/ca.crt").display()
    );
    let nobody = async |args: &[&str]| {
        let mut all = vec![ca.as_str(), "--token=nobody-token"];
        all.extend_from_slice(args);
        k.run(&all).await
    };
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: shell\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: {IMAGE}\n    command: [\"sleep\", \"3600\"]\n"
    );
    ok(&admin(&["apply", "-f", "-"], Some(&pod)).await);
    wait_pod(app.api(), "default", "shell", T, |p| phase(p) == "Running").await;

    let out = admin(
        &["exec", "shell", "--", "sh", "-c", "echo admin; exit 2"],
        None,
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "admin\n", "{out:?}");
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    let bind = |role: &str| {
        [
            "create".to_owned(),
            "rolebinding".to_owned(),
            format!("nobody-{role}"),
            format!("--clusterrole={role}"),
            "--user=nobody".to_owned(),
        ]
    };
    let args = bind("view");
    ok(&admin(&args.iter().map(String::as_str).collect::<Vec<_>>(), None).await);
    assert!(nobody(&["get", "pod", "shell"]).await.status.success());
    let out = nobody(&["exec", "shell", "--", "echo", "viewer"]).await;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(err.contains("forbidden"), "{err}");
    assert!(err.contains("pods/exec"), "{err}");

    let args = bind("edit");
    ok(&admin(&args.iter().map(String::as_str).collect::<Vec<_>>(), None).await);
    let out = nobody(&["exec", "shell", "--", "echo", "editor"]).await;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "editor\n", "{out:?}");
    assert!(out.status.success(), "{out:?}");
}
