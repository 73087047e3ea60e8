//! The RBAC kinds through the plain kinds' path, with the real kubectl 1.27 and 1.33
//! against a mesopod with TLS, authentication and RBAC: `get` prints kube-apiserver's
//! Tables (roles NAME, CREATED AT; bindings NAME, ROLE, AGE, and USERS, GROUPS,
//! SERVICEACCOUNTS with `-o wide`), `--chunk-size` pages, `-w` watches, `apply` and
//! `edit` update, strict field validation refuses unknown fields, and a binding's
//! roleRef stays as written. Escalation prevention is `security_api_kubectl`'s.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::secure::Secure;
use common::*;
use testkit::{ok, stderr};
use tokio::io::{AsyncBufReadExt, BufReader};

const KUBECTLS: [&str; 2] = [
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.27",
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.33",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_kinds_print_page_watch_apply_and_edit_as_kube_apiserver_does() {
    let s = Secure::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = format!("--kubeconfig={}", s.kubeconfig().display());
    for k in KUBECTLS {
        let v = kubectl_version(k);
        let tag = v.replace('.', "-");
        let (role, binding) = (format!("reader-{tag}"), format!("readers-{tag}"));

        let table = ok(&s.admin(k, &["get", "clusterroles"]).await);
        let (header, cells) = row(&table, "cluster-admin");
        assert_eq!(header, ["NAME", "CREATED AT"], "{v}: {table}");
        assert!(
            cells[1].len() == 20 && cells[1].ends_with('Z') && cells[1].contains('T'),
            "{v}: CREATED AT is RFC 3339: {table}"
        );

        let watch = common::kubectl(k, &s.app.api_url()).start(
            &[&kubeconfig, "get", "roles", "-n", "default", "-w"],
            Stdio::piped(),
            Stdio::null(),
        );
        let mut watch = watch;
        let mut lines = BufReader::new(watch.child.stdout.take().unwrap()).lines();

        let create = [
            "create",
            "role",
            &role,
            "--verb=get",
            "--resource=pods",
            "-n",
            "default",
        ];
        ok(&s.admin(k, &create).await);
        let seen = tokio::time::timeout(Duration::from_secs(30), async {
            let mut seen = Vec::new();
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.split_whitespace().next() == Some(role.as_str()) {
                    return (true, seen);
                }
                seen.push(line);
            }
            (false, seen)
        })
        .await;
        assert!(
            matches!(seen, Ok((true, _))),
            "{v}: the watch did not show {role}: {seen:?}"
        );
        watch.kill().await.unwrap();

        let table = ok(&s.admin(k, &["get", "roles", "-n", "default"]).await);
        assert_eq!(row(&table, &role).0, ["NAME", "CREATED AT"], "{v}");

        let user = "--user=alice";
        let sa = "--serviceaccount=default:robot";
        let role_flag = format!("--role={role}");
        let bind = [
            "create",
            "rolebinding",
            &binding,
            &role_flag,
            user,
            sa,
            "-n",
            "default",
        ];
        ok(&s.admin(k, &bind).await);
        let table = ok(&s.admin(k, &["get", "rolebindings", "-n", "default"]).await);
        let (header, cells) = row(&table, &binding);
        assert_eq!(header, ["NAME", "ROLE", "AGE"], "{v}: {table}");
        assert_eq!(cells[1], format!("Role/{role}"), "{v}: {table}");
        let wide = ok(&s
            .admin(k, &["get", "rolebindings", "-n", "default", "-o", "wide"])
            .await);
        let (header, cells) = row(&wide, &binding);
        assert_eq!(
            header,
            ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"],
            "{v}: {wide}"
        );
        assert_eq!(cells[3], "alice", "{v}: {wide}");
        assert_eq!(cells.last().unwrap(), "default/robot", "{v}: {wide}");
        let table = ok(&s.admin(k, &["get", "clusterrolebindings"]).await);
        assert_eq!(
            row(&table, "cluster-admin").1[1],
            "ClusterRole/cluster-admin",
            "{v}"
        );

        // Pages of one: the same names as one list.
        let all = ok(&s.admin(k, &["get", "clusterroles", "-o", "name"]).await);
        let paged = ok(&s
            .admin(k, &["get", "clusterroles", "-o", "name", "--chunk-size=1"])
            .await);
        assert!(all.lines().count() > 3, "{v}: {all}");
        assert_eq!(paged, all, "{v}");

        // apply: created, then configured with one more verb.
        let applied = format!("applied-{tag}");
        let yaml = |verbs: &str| {
            format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: {applied}\nrules:\n- apiGroups: [\"\"]\n  resources: [configmaps]\n  verbs: [{verbs}]\n"
            )
        };
        let kc = common::kubectl(k, &s.app.api_url());
        let out = kc
            .run_stdin(&[&kubeconfig, "apply", "-f", "-"], Some(&yaml("get")))
            .await;
        assert_eq!(
            ok(&out).trim(),
            format!("clusterrole.rbac.authorization.k8s.io/{applied} created"),
            "{v}"
        );
        let out = kc
            .run_stdin(&[&kubeconfig, "apply", "-f", "-"], Some(&yaml("get, list")))
            .await;
        assert_eq!(
            ok(&out).trim(),
            format!("clusterrole.rbac.authorization.k8s.io/{applied} configured"),
            "{v}"
        );
        let verbs = ok(&s
            .admin(
                k,
                &[
                    "get",
                    "clusterrole",
                    &applied,
                    "-o",
                    "jsonpath={.rules[0].verbs}",
                ],
            )
            .await);
        assert_eq!(verbs, r#"["get","list"]"#, "{v}");

        // edit: the role grants list too.
        let editor = editing_kubectl(dir.path(), k, &s.app.api_url(), "s/- get/- list/");
        let out = editor
            .run(&[&kubeconfig, "edit", "role", &role, "-n", "default"])
            .await;
        assert_eq!(
            ok(&out).trim(),
            format!("role.rbac.authorization.k8s.io/{role} edited"),
            "{v}"
        );
        let verbs = ok(&s
            .admin(
                k,
                &[
                    "get",
                    "role",
                    &role,
                    "-n",
                    "default",
                    "-o",
                    "jsonpath={.rules[0].verbs}",
                ],
            )
            .await);
        assert_eq!(verbs, r#"["list"]"#, "{v}");

        // Strict field validation, and a roleRef that may not change.
        let bad = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: bad-{tag}\n  namespace: default\nrulez: []\n"
        );
        let out = kc
            .run_stdin(
                &[&kubeconfig, "create", "--validate=strict", "-f", "-"],
                Some(&bad),
            )
            .await;
        assert!(
            stderr(&out).contains("strict decoding error: unknown field \"rulez\""),
            "{v}: {}",
            stderr(&out)
        );
        let repoint = format!(r#"{{"roleRef":{{"name":"{applied}","kind":"ClusterRole"}}}}"#);
        let out = s
            .admin(
                k,
                &[
                    "patch",
                    "rolebinding",
                    &binding,
                    "-n",
                    "default",
                    "-p",
                    &repoint,
                ],
            )
            .await;
        assert!(
            stderr(&out).contains("roleRef: Invalid value")
                && stderr(&out).contains("cannot change roleRef"),
            "{v}: {}",
            stderr(&out)
        );

        let out = s.admin(k, &["delete", "clusterrole", &applied]).await;
        assert_eq!(
            ok(&out).trim(),
            format!("clusterrole.rbac.authorization.k8s.io \"{applied}\" deleted"),
            "{v}"
        );
        let out = s.admin(k, &["get", "clusterrole", &applied]).await;
        assert!(
            stderr(&out).contains(&format!(
                "clusterroles.rbac.authorization.k8s.io \"{applied}\" not found"
            )),
            "{v}: {}",
            stderr(&out)
        );
    }
    s.app.shutdown().await;
}
