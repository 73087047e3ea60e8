//! The API over HTTPS with real kubectl 1.30 and 1.33: the admin kubeconfig mesopod
//! writes, a token user who may edit namespace `a` only, a `view` user, no credentials,
//! escalation prevention, and the scheduler's identity.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::secure::Secure;
use testkit::{ok, stderr, stdout};

const KUBECTL_130: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.30";
const VERSIONS: [&str; 2] = [KUBECTL_130, common::KUBECTL_133];

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    command: [sleep, \"30\"]\n"
    )
}

async fn setup(s: &Secure) {
    s.tenants(&[
        ("victor-view", "view", "victor"),
        ("ada-admin", "admin", "ada"),
    ])
    .await;
}

async fn create_pod(
    s: &Secure,
    k: &str,
    token: &str,
    ns: &str,
    name: &str,
) -> std::process::Output {
    let ca = s.ca();
    let t = format!("--token={token}");
    common::kubectl(k, &s.app.api_url())
        .run_stdin(
            &[ca.as_str(), t.as_str(), "-n", ns, "create", "-f", "-"],
            Some(&pod(name)),
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_over_tls_is_authenticated_and_authorized_by_rbac() {
    let s = Secure::start().await;
    assert!(
        s.app.api_url().starts_with("https://127.0.0.1:"),
        "{}",
        s.app.api_url()
    );
    setup(&s).await;
    for k in VERSIONS {
        let v = k.rsplit('.').next().unwrap_or("");
        // The admin kubeconfig: a client certificate in system:masters.
        let who = ok(&s.admin(k, &["auth", "whoami", "-o", "json"]).await);
        let who: serde_json::Value = serde_json::from_str(&who).unwrap();
        assert_eq!(
            who["status"]["userInfo"]["username"], "kubernetes-admin",
            "{k}"
        );
        assert!(
            who["status"]["userInfo"]["groups"]
                .to_string()
                .contains("system:masters"),
            "{k}: {who}"
        );
        assert!(
            ok(&s.admin(k, &["get", "namespaces"]).await).contains("kube-system"),
            "{k}"
        );

        // A token user who may edit namespace a.
        let name = format!("alice-{v}");
        ok(&create_pod(&s, k, "alice-token", "a", &name).await);
        let refused = create_pod(&s, k, "alice-token", "b", &name).await;
        assert!(!refused.status.success(), "{k}");
        assert!(
            stderr(&refused).contains(r#"pods is forbidden: User "alice" cannot create resource "pods" in API group "" in the namespace "b""#),
            "{k}: {}",
            stderr(&refused)
        );
        let yes = s
            .user(
                k,
                Some("alice-token"),
                &["auth", "can-i", "create", "pods", "-n", "a"],
            )
            .await;
        assert_eq!(
            (yes.status.code(), stdout(&yes).trim()),
            (Some(0), "yes"),
            "{k}: {}",
            stderr(&yes)
        );
        let no = s
            .user(
                k,
                Some("alice-token"),
                &["auth", "can-i", "create", "pods", "-n", "b"],
            )
            .await;
        assert_eq!(
            (no.status.code(), stdout(&no).trim()),
            (Some(1), "no"),
            "{k}: {}",
            stderr(&no)
        );
        let whoami = ok(&s.user(k, Some("alice-token"), &["auth", "whoami"]).await);
        assert!(
            whoami.contains("alice") && whoami.contains("system:authenticated"),
            "{k}: {whoami}"
        );
        // edit reads pods/status but does not write it: only the scheduler does.
        let status = s
            .user(
                k,
                Some("alice-token"),
                &[
                    "-n",
                    "a",
                    "patch",
                    "pod",
                    &name,
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    r#"{"status":{"phase":"Failed"}}"#,
                ],
            )
            .await;
        assert!(
            stderr(&status).contains(
                r#"cannot patch resource "pods/status" in API group "" in the namespace "a""#
            ),
            "{k}: {}",
            stderr(&status)
        );

        // No credentials: 401.
        // (kubectl answers a 401 to a client without credentials by asking for a user
        // name, as it does against kube-apiserver, and fails on its empty input; the
        // 401 itself is checked with curl in `unauthenticated_requests_get_401_over_h2_and_http1`.)
        let anon = s.user(k, None, &["get", "pods", "-n", "a"]).await;
        assert!(!anon.status.success(), "{k}");
        assert!(
            stderr(&anon).contains("Unauthorized") || stderr(&anon).contains("error: EOF"),
            "{k}: {}",
            stderr(&anon)
        );
        let bad = s
            .user(k, Some("not-a-token"), &["get", "pods", "-n", "a"])
            .await;
        assert!(
            stderr(&bad).contains("You must be logged in to the server"),
            "{k}: a wrong token is 401, never anonymous: {}",
            stderr(&bad)
        );

        // A view user reads but does not write, and may not read secrets.
        let list = ok(&s
            .user(
                k,
                Some("victor-token"),
                &["get", "pods", "-n", "a", "-o", "name"],
            )
            .await);
        assert!(list.contains(&format!("pod/{name}")), "{k}: {list}");
        let write = create_pod(&s, k, "victor-token", "a", &format!("victor-{v}")).await;
        assert!(
            stderr(&write).contains(r#"User "victor" cannot create resource "pods""#),
            "{k}: {}",
            stderr(&write)
        );
        let status = s
            .user(
                k,
                Some("victor-token"),
                &[
                    "-n",
                    "a",
                    "patch",
                    "pod",
                    &name,
                    "--subresource=status",
                    "--type=merge",
                    "-p",
                    r#"{"status":{"phase":"Failed"}}"#,
                ],
            )
            .await;
        assert!(
            stderr(&status).contains(r#"User "victor" cannot patch resource "pods/status""#),
            "{k}: {}",
            stderr(&status)
        );
        let secrets = s
            .user(
                k,
                Some("victor-token"),
                &["auth", "can-i", "get", "secrets", "-n", "a"],
            )
            .await;
        assert_eq!(
            stdout(&secrets).trim(),
            "no",
            "{k}: view does not read secrets"
        );
        let secrets = s
            .user(
                k,
                Some("alice-token"),
                &["auth", "can-i", "get", "secrets", "-n", "a"],
            )
            .await;
        assert_eq!(stdout(&secrets).trim(), "yes", "{k}: edit does");
        let rbac = s
            .user(k, Some("victor-token"), &["get", "rolebindings", "-n", "a"])
            .await;
        assert!(
            stderr(&rbac).contains("rolebindings.rbac.authorization.k8s.io is forbidden"),
            "{k}: {}",
            stderr(&rbac)
        );

        // A list across namespaces needs cluster-wide permission: 403, not a filtered list.
        let all = s.user(k, Some("alice-token"), &["get", "pods", "-A"]).await;
        assert!(
            stderr(&all)
                .contains(r#"cannot list resource "pods" in API group "" at the cluster scope"#),
            "{k}: {}",
            stderr(&all)
        );
    }
    s.app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nobody_grants_what_they_do_not_hold() {
    let s = Secure::start().await;
    setup(&s).await;
    let k = common::KUBECTL_133;
    // ada administers namespace a: she may hand out edit there, not cluster-admin.
    ok(&s
        .user(
            k,
            Some("ada-token"),
            &[
                "create",
                "rolebinding",
                "nobody-edit",
                "--clusterrole=edit",
                "--user=nobody",
                "-n",
                "a",
            ],
        )
        .await);
    let yes = s
        .user(
            k,
            Some("nobody-token"),
            &["auth", "can-i", "delete", "pods", "-n", "a"],
        )
        .await;
    assert_eq!(stdout(&yes).trim(), "yes");
    let escalate = s
        .user(
            k,
            Some("ada-token"),
            &[
                "create",
                "rolebinding",
                "ada-root",
                "--clusterrole=cluster-admin",
                "--user=ada",
                "-n",
                "a",
            ],
        )
        .await;
    assert!(!escalate.status.success());
    let err = stderr(&escalate);
    assert!(
        err.contains(r#"rolebindings.rbac.authorization.k8s.io "ada-root" is forbidden: user "ada" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:"#),
        "{err}"
    );
    // A Role with more than she holds is refused too; one within her rights is not.
    let role = |verbs: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r-{}\n  namespace: a\nrules:\n- apiGroups: [\"\"]\n  resources: [\"nodes\", \"pods\"]\n  verbs: [{verbs}]\n",
            verbs.len()
        )
    };
    let ca = s.ca();
    let ada = common::kubectl(k, &s.app.api_url());
    let out = ada
        .run_stdin(
            &[ca.as_str(), "--token=ada-token", "create", "-f", "-"],
            Some(&role("get, escalate")),
        )
        .await;
    assert!(
        stderr(&out).contains(r#"{APIGroups:[""], Resources:["nodes"], Verbs:["get"]}"#),
        "{}",
        stderr(&out)
    );
    let mut pods_only = role("get, list");
    pods_only = pods_only.replace("\"nodes\", ", "");
    ok(&ada
        .run_stdin(
            &[ca.as_str(), "--token=ada-token", "create", "-f", "-"],
            Some(&pods_only),
        )
        .await);
    let listed = ok(&s
        .user(
            k,
            Some("ada-token"),
            &["get", "roles", "-n", "a", "-o", "name"],
        )
        .await);
    assert!(
        listed.contains("role.rbac.authorization.k8s.io/r-9"),
        "{listed}"
    );
    // The bootstrap roles are there for everyone to see (as admin).
    let roles = ok(&s.admin(k, &["get", "clusterroles", "-o", "name"]).await);
    for r in [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:kube-scheduler",
    ] {
        assert!(
            roles.contains(&format!("clusterrole.rbac.authorization.k8s.io/{r}\n")),
            "{r}: {roles}"
        );
    }
    s.app.shutdown().await;
}

/// `curl` over HTTP/2 or HTTP/1.1: the protocol version, the code and the body.
async fn curl(s: &Secure, http: &str, extra: &[&str], path: &str) -> (String, String) {
    let ca = s.data_dir().join("pki/ca.crt");
    let out = tokio::process::Command::new("curl")
        .args(["-s", http, "--cacert"])
        .arg(&ca)
        .args(extra)
        .args(["-w", "\n%{http_version} %{http_code}"])
        .arg(format!("{}{path}", s.app.api_url()))
        .output()
        .await
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.to_owned(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_requests_get_401_over_h2_and_http1() {
    let s = Secure::start().await;
    let status: serde_json::Value = serde_json::from_str(
        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#,
    )
    .unwrap();
    for (http, version) in [("--http2", "2"), ("--http1.1", "1.1")] {
        for extra in [&[][..], &["-H", "Authorization: Bearer wrong"]] {
            let (code, body) = curl(&s, http, extra, "/api/v1/namespaces/default/pods").await;
            assert_eq!(code, format!("{version} 401"), "{http} {extra:?}: {body}");
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&body).unwrap(),
                status
            );
        }
        let (code, body) = curl(
            &s,
            http,
            &["-H", "Authorization: Bearer alice-token"],
            "/api/v1/namespaces/default/pods",
        )
        .await;
        assert_eq!(code, format!("{version} 403"), "{body}");
        assert!(body.contains(r#"pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""#), "{body}");
        let (code, _) = curl(
            &s,
            http,
            &["-H", "Authorization: Bearer alice-token"],
            "/version",
        )
        .await;
        assert_eq!(
            code,
            format!("{version} 200"),
            "system:public-info-viewer lets anyone authenticated read /version"
        );
    }
    s.app.shutdown().await;
}
