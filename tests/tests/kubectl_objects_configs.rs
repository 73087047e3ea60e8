//! ConfigMaps, Secrets and ServiceAccounts with the real kubectl 1.27, 1.28, 1.30 and
//! 1.33: every way `kubectl create` builds them, get (the server's columns), describe,
//! edit, apply, delete, and Kubernetes' validation messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::shim::*;
use common::*;
use testkit::{ok, stderr};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_maps_from_literals_files_and_env_files_get_describe_edit_apply_delete() {
    let server = Server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("settings.conf");
    std::fs::write(&file, "verbose = true\n").unwrap();
    let env = dir.path().join("app.env");
    std::fs::write(&env, "MODE=fast\n# a comment\nLEVEL=3\n").unwrap();
    for k in ISSUE_18_KUBECTLS {
        let v = kubectl_version(k);
        let kc = kubectl(k, &server.url);
        let name = format!("cm-{}", v.replace('.', "-"));
        let from_file = format!("--from-file={}", file.display());
        let out = kc
            .run(&[
                "create",
                "configmap",
                &name,
                "--from-literal=greeting=hello",
                &from_file,
            ])
            .await;
        assert_eq!(ok(&out).trim(), format!("configmap/{name} created"), "{v}");
        let env_name = format!("{name}-env");
        let from_env = format!("--from-env-file={}", env.display());
        ok(&kc.run(&["create", "configmap", &env_name, &from_env]).await);

        let table = ok(&kc.run(&["get", "configmaps"]).await);
        let (header, cells) = row(&table, &name);
        assert_eq!(header, ["NAME", "DATA", "AGE"], "{v}: {table}");
        assert_eq!(cells[1], "2", "{v}: {table}");
        assert_eq!(
            row(&table, &env_name).1[1],
            "2",
            "{v}: env files give one key a line"
        );
        let short = ok(&kc
            .run(&["get", "cm", &env_name, "-o", "jsonpath={.data.LEVEL}"])
            .await);
        assert_eq!(short, "3", "{v}: the short name cm works");

        let described = ok(&kc.run(&["describe", "configmap", &name]).await);
        for part in ["greeting", "hello", "settings.conf", "verbose = true"] {
            assert!(described.contains(part), "{v}: {described}");
        }

        let editor = editing_kubectl(
            dir.path(),
            k,
            &server.url,
            "s/greeting: hello/greeting: edited/",
        );
        let out = editor.run(&["edit", "configmap", &name]).await;
        assert_eq!(ok(&out).trim(), format!("configmap/{name} edited"), "{v}");
        let edited = ok(&kc
            .run(&["get", "cm", &name, "-o", "jsonpath={.data.greeting}"])
            .await);
        assert_eq!(edited, "edited", "{v}");

        let frozen = format!("{name}-frozen");
        let yaml = |value: &str| {
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {frozen}\nimmutable: true\ndata:\n  key: {value}\n"
            )
        };
        assert_eq!(
            kc.apply(&yaml("one")).await.trim(),
            format!("configmap/{frozen} created")
        );
        assert_eq!(
            kc.apply(&yaml("one")).await.trim(),
            format!("configmap/{frozen} unchanged")
        );
        let out = kc
            .run_stdin(&["apply", "-f", "-"], Some(&yaml("two")))
            .await;
        assert!(!out.status.success(), "{v}: an immutable ConfigMap changed");
        assert!(
            stderr(&out).contains("data: Forbidden: field is immutable when `immutable` is set"),
            "{v}: {}",
            stderr(&out)
        );

        for n in [&name, &env_name, &frozen] {
            let out = kc.run(&["delete", "configmap", n]).await;
            assert_eq!(ok(&out).trim(), format!("configmap \"{n}\" deleted"), "{v}");
        }
        let out = kc.run(&["get", "configmap", &name]).await;
        assert!(
            stderr(&out).contains(&format!("configmaps \"{name}\" not found")),
            "{v}: {}",
            stderr(&out)
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_of_each_type_show_sizes_never_values_and_are_validated_by_type() {
    let server = Server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    // kubectl checks that the pair parses: a throwaway self-signed one.
    let made = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=test",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    for k in ISSUE_18_KUBECTLS {
        let v = kubectl_version(k);
        let kc = kubectl(k, &server.url);
        let s = |kind: &str| format!("{kind}-{}", v.replace('.', "-"));
        let generic = s("generic");
        ok(&kc
            .run(&[
                "create",
                "secret",
                "generic",
                &generic,
                "--from-literal=password=hunter2",
            ])
            .await);
        let docker = s("docker");
        ok(&kc
            .run(&[
                "create",
                "secret",
                "docker-registry",
                &docker,
                "--docker-server=registry.example",
                "--docker-username=u",
                "--docker-password=p",
            ])
            .await);
        let tls = s("tls");
        let (c, kf) = (
            format!("--cert={}", cert.display()),
            format!("--key={}", key.display()),
        );
        ok(&kc.run(&["create", "secret", "tls", &tls, &c, &kf]).await);
        let basic = s("basic");
        let yaml = format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {basic}\ntype: kubernetes.io/basic-auth\nstringData:\n  username: admin\n  password: s3cret\n"
        );
        assert_eq!(
            kc.apply(&yaml).await.trim(),
            format!("secret/{basic} created"),
            "{v}"
        );

        let table = ok(&kc.run(&["get", "secrets"]).await);
        let (header, _) = row(&table, &generic);
        assert_eq!(header, ["NAME", "TYPE", "DATA", "AGE"], "{v}: {table}");
        for (name, ty, data) in [
            (&generic, "Opaque", "1"),
            (&docker, "kubernetes.io/dockerconfigjson", "1"),
            (&tls, "kubernetes.io/tls", "2"),
            (&basic, "kubernetes.io/basic-auth", "2"),
        ] {
            assert_eq!(row(&table, name).1[1..3], [ty, data], "{v}: {table}");
        }
        assert!(!table.contains("hunter2"));

        let described = ok(&kc.run(&["describe", "secret", &generic]).await);
        assert!(described.contains("password:  7 bytes"), "{v}: {described}");
        assert!(
            !described.contains("hunter2"),
            "{v}: describe shows a value"
        );
        let stored = ok(&kc
            .run(&["get", "secret", &basic, "-o", "jsonpath={.data.password}"])
            .await);
        assert_eq!(
            stored, "czNjcmV0",
            "{v}: stringData is stored in data, base64"
        );

        let bad_tls = format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bad-{tls}\ntype: kubernetes.io/tls\ndata: {{}}\n"
        );
        let out = kc.run_stdin(&["create", "-f", "-"], Some(&bad_tls)).await;
        // kubectl lays the causes out one a line itself.
        let err = stderr(&out);
        for part in [
            format!("The Secret \"bad-{tls}\" is invalid"),
            "data[tls.crt]: Required value".into(),
            "data[tls.key]: Required value".into(),
        ] {
            assert!(err.contains(&part), "{v}: {err}");
        }
        let bad_docker = format!(
            "apiVersion: v1\nkind: Secret\nmetadata:\n  name: bad-{docker}\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '{{\"auths\": topsecretvalue'\n"
        );
        let out = kc
            .run_stdin(&["create", "-f", "-"], Some(&bad_docker))
            .await;
        let err = stderr(&out);
        assert!(
            err.contains("data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\""),
            "{v}: {err}"
        );
        assert!(
            !err.contains("topsecretvalue"),
            "{v}: an error quoted a secret: {err}"
        );

        for name in [&generic, &docker, &tls, &basic] {
            let out = kc.run(&["delete", "secret", name]).await;
            assert_eq!(ok(&out).trim(), format!("secret \"{name}\" deleted"), "{v}");
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_accounts_exist_per_namespace_and_pods_must_name_one_that_exists() {
    let server = Server::start().await;
    for k in ISSUE_18_KUBECTLS {
        let v = kubectl_version(k);
        let kc = kubectl(k, &server.url);
        let ns = format!("team-{}", v.replace('.', "-"));
        ok(&kc.run(&["create", "namespace", &ns]).await);
        let table = ok(&kc.run(&["get", "serviceaccounts", "-n", &ns]).await);
        let (header, cells) = row(&table, "default");
        assert_eq!(header, ["NAME", "SECRETS", "AGE"], "{v}: {table}");
        assert_eq!(cells[1], "0", "{v}");

        let out = kc
            .run(&["create", "serviceaccount", "robot", "-n", &ns])
            .await;
        assert_eq!(ok(&out).trim(), "serviceaccount/robot created", "{v}");
        let sa = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: quiet\nautomountServiceAccountToken: false\n";
        ok(&kc
            .run_stdin(&["apply", "-n", &ns, "-f", "-"], Some(sa))
            .await);
        let stored = ok(&kc
            .run(&[
                "get",
                "sa",
                "quiet",
                "-n",
                &ns,
                "-o",
                "jsonpath={.automountServiceAccountToken}",
            ])
            .await);
        assert_eq!(stored, "false", "{v}");
        let described = ok(&kc.run(&["describe", "sa", "robot", "-n", &ns]).await);
        assert!(
            described.contains("Name:") && described.contains("robot"),
            "{v}: {described}"
        );

        let pod = |name: &str, account: &str| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  serviceAccountName: {account}\n  containers:\n  - name: main\n    image: busybox\n"
            )
        };
        let out = kc
            .run_stdin(
                &["create", "-n", &ns, "-f", "-"],
                Some(&pod("ghostly", "ghost")),
            )
            .await;
        assert!(
            stderr(&out).contains(&format!(
                "pods \"ghostly\" is forbidden: error looking up service account {ns}/ghost: serviceaccount \"ghost\" not found"
            )),
            "{v}: {}",
            stderr(&out)
        );
        ok(&kc
            .run_stdin(
                &["create", "-n", &ns, "-f", "-"],
                Some(&pod("robotic", "robot")),
            )
            .await);
        let plain = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: plain\nspec:\n  containers:\n  - name: main\n    image: busybox\n";
        ok(&kc
            .run_stdin(&["create", "-n", &ns, "-f", "-"], Some(plain))
            .await);
        let account = ok(&kc
            .run(&[
                "get",
                "pod",
                "plain",
                "-n",
                &ns,
                "-o",
                "jsonpath={.spec.serviceAccountName}",
            ])
            .await);
        assert_eq!(
            account, "default",
            "{v}: admission names the default account"
        );

        let out = kc
            .run(&["delete", "serviceaccount", "robot", "-n", &ns])
            .await;
        assert_eq!(ok(&out).trim(), "serviceaccount \"robot\" deleted", "{v}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_resources_lists_exactly_what_is_served_with_short_names_and_verbs() {
    let server = Server::start().await;
    for k in ISSUE_18_KUBECTLS {
        let v = kubectl_version(k);
        let out = ok(&kubectl(k, &server.url)
            .run(&["api-resources", "-o", "wide"])
            .await);
        let names: Vec<&str> = out
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert_eq!(
            names,
            [
                "configmaps",
                "events",
                "limitranges",
                "namespaces",
                "nodes",
                "pods",
                "replicationcontrollers",
                "resourcequotas",
                "secrets",
                "serviceaccounts",
                "controllerrevisions",
                "daemonsets",
                "deployments",
                "replicasets",
                "statefulsets",
                "selfsubjectreviews",
                "selfsubjectaccessreviews",
                "selfsubjectrulesreviews",
                "horizontalpodautoscalers",
                "cronjobs",
                "jobs",
                "leases",
                // metrics.k8s.io's PodMetrics and NodeMetrics.
                "nodes",
                "pods",
                "poddisruptionbudgets",
                "clusterrolebindings",
                "clusterroles",
                "rolebindings",
                "roles",
                "priorityclasses"
            ],
            "{v}: {out}"
        );
        let (_, cm) = row(&out, "configmaps");
        assert_eq!(cm[1], "cm", "{v}: {out}");
        assert!(
            cm.last()
                .unwrap()
                .contains("create,delete,deletecollection,get,list,patch,update,watch"),
            "{v}: {out}"
        );
        assert_eq!(row(&out, "serviceaccounts").1[1], "sa", "{v}: {out}");
        assert_eq!(row(&out, "deployments").1[1], "deploy", "{v}: {out}");
        assert_eq!(row(&out, "replicasets").1[1], "rs", "{v}: {out}");
        assert_eq!(row(&out, "statefulsets").1[1], "sts", "{v}: {out}");
        assert_eq!(row(&out, "daemonsets").1[1], "ds", "{v}: {out}");
        assert_eq!(row(&out, "cronjobs").1[1], "cj", "{v}: {out}");
        assert_eq!(row(&out, "priorityclasses").1[1], "pc", "{v}: {out}");
        assert_eq!(row(&out, "poddisruptionbudgets").1[1], "pdb", "{v}: {out}");
        assert_eq!(
            row(&out, "horizontalpodautoscalers").1[1],
            "hpa",
            "{v}: {out}"
        );
        assert_eq!(row(&out, "limitranges").1[1], "limits", "{v}: {out}");
        assert_eq!(row(&out, "resourcequotas").1[1], "quota", "{v}: {out}");
        let out = kubectl(k, &server.url).run(&["get", "widgets"]).await;
        assert!(
            stderr(&out).contains("the server doesn't have a resource type \"widgets\""),
            "{v}: {}",
            stderr(&out)
        );
    }
    server.stop().await;
}
