//! Issue #17: the API refuses at create what the executor cannot do, through the real
//! kubectl, with Kubernetes' 422 `Invalid` Status naming the field; `--dry-run=server`
//! refuses the same and a refused pod is never stored.
//!
//! Issue #39: what kube-apiserver refuses at create (a negative `emptyDir.sizeLimit`,
//! user and group ids outside 0..2^31-1, sub-paths that leave their volume) and on a
//! list (a malformed or unsupported field selector) is refused here with its words.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::shim::*;
use common::*;
use testkit::{ok, stderr};

const PVC_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: claims
spec:
  containers:
  - name: app
    image: busybox
    volumeMounts:
    - {name: data, mountPath: /data}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data}
";

/// One pod asking for one refused field of each class.
const MIXED_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: mixed
spec:
  hostPID: true
  containers:
  - name: app
    image: busybox
    lifecycle:
      preStop: {exec: {command: [sh]}}
    volumeMounts:
    - {name: scratch, mountPath: /s, mountPropagation: Bidirectional}
  volumes:
  - name: scratch
    emptyDir: {}
  - name: share
    nfs: {server: nfs.example, path: /}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pvc_pod_is_refused_at_create_and_in_server_dry_runs_with_the_field_path() {
    let server = Server::start().await;
    let rv_before = server.api.resource_version();
    for k in ALL_KUBECTLS {
        for args in [
            &["create", "-f", "-"][..],
            &["create", "--dry-run=server", "-f", "-"],
            &["apply", "--dry-run=server", "-f", "-"],
            &["apply", "-f", "-"],
        ] {
            let out = kubectl(k, &server.url).run_stdin(args, Some(PVC_POD)).await;
            assert!(!out.status.success(), "{k} {args:?} accepted a PVC pod");
            let err = stderr(&out);
            assert!(
                err.contains(r#"Pod "claims" is invalid: spec.volumes[0].persistentVolumeClaim: Forbidden: not supported by mesopod"#),
                "{k} {args:?}: {err}"
            );
        }
    }
    assert_eq!(
        server.api.resource_version(),
        rv_before,
        "nothing was stored"
    );

    // The Status itself, as clients other than kubectl read it.
    let pod: serde_json::Value = serde_yaml_ng::from_str(PVC_POD).unwrap();
    let (code, status) = Http::new(&server)
        .json("POST", "/api/v1/namespaces/default/pods", &pod)
        .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(status["details"]["kind"], "Pod");
    let cause = &status["details"]["causes"][0];
    assert_eq!(cause["field"], "spec.volumes[0].persistentVolumeClaim");
    assert_eq!(cause["reason"], "FieldValueForbidden");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_refused_field_of_a_pod_is_named_at_once() {
    let server = Server::start().await;
    let out = kubectl(testkit::KUBECTL, &server.url)
        .run_stdin(&["create", "-f", "-"], Some(MIXED_POD))
        .await;
    assert!(!out.status.success());
    let err = stderr(&out);
    for cause in [
        r#"spec.hostPID: Unsupported value: "true": supported values: "false""#,
        "spec.containers[0].lifecycle: Forbidden: not supported by mesopod yet: lifecycle hooks are issue #19",
        r#"spec.containers[0].volumeMounts[0].mountPropagation: Unsupported value: "Bidirectional": supported values: "None""#,
        "spec.volumes[1].nfs: Forbidden: not supported by mesopod",
    ] {
        assert!(err.contains(cause), "missing {cause} in {err}");
    }
    assert!(
        !err.contains("spec.volumes[0]"),
        "emptyDir is accepted: {err}"
    );

    // Without the refused fields the same pod is created.
    let fine = MIXED_POD
        .replace("  hostPID: true\n", "")
        .replace(
            "    lifecycle:\n      preStop: {exec: {command: [sh]}}\n",
            "",
        )
        .replace(", mountPropagation: Bidirectional", "")
        .replace(
            "  - name: share\n    nfs: {server: nfs.example, path: /}\n",
            "",
        );
    let created = kubectl(testkit::KUBECTL, &server.url)
        .run_stdin(&["create", "-f", "-"], Some(&fine))
        .await;
    assert_eq!(ok(&created).trim(), "pod/mixed created");
    server.stop().await;
}

/// `kubectl create -f -` of `yaml` with the stock kubectl: its stderr, after checking
/// the create failed and stored nothing.
async fn refused(server: &Server, yaml: &str) -> String {
    let rv_before = server.api.resource_version();
    let out = kubectl(testkit::KUBECTL, &server.url)
        .run_stdin(&["create", "-f", "-"], Some(yaml))
        .await;
    assert!(!out.status.success(), "accepted:\n{yaml}");
    assert_eq!(
        server.api.resource_version(),
        rv_before,
        "a refused pod was stored"
    );
    stderr(&out)
}

fn has_all(err: &str, causes: &[&str]) {
    for cause in causes {
        assert!(err.contains(cause), "missing {cause:?} in {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_negative_empty_dir_size_limit_is_refused_at_create() {
    let server = Server::start().await;
    let err = refused(
        &server,
        "apiVersion: v1
kind: Pod
metadata: {name: scratch}
spec:
  containers:
  - name: app
    image: busybox
    volumeMounts: [{name: tmp, mountPath: /tmp}]
  volumes:
  - name: tmp
    emptyDir: {sizeLimit: -1Gi}
",
    )
    .await;
    has_all(
        &err,
        &[
            r#"The Pod "scratch" is invalid"#,
            "spec.volumes[0].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity",
            // As kube-apiserver does, a mount of the invalid volume is not found either.
            r#"spec.containers[0].volumeMounts[0].name: Not found: "tmp""#,
        ],
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_user_and_group_ids_are_refused_at_create() {
    let server = Server::start().await;
    let err = refused(
        &server,
        "apiVersion: v1
kind: Pod
metadata: {name: ids}
spec:
  securityContext: {runAsUser: -1, runAsGroup: -1, fsGroup: -1, supplementalGroups: [-1]}
  containers:
  - name: app
    image: busybox
    securityContext: {runAsUser: -1, runAsGroup: 2147483648}
",
    )
    .await;
    let range = "must be between 0 and 2147483647, inclusive";
    has_all(
        &err,
        &[
            r#"The Pod "ids" is invalid"#,
            &format!("spec.securityContext.runAsUser: Invalid value: -1: {range}"),
            &format!("spec.securityContext.runAsGroup: Invalid value: -1: {range}"),
            &format!("spec.securityContext.fsGroup: Invalid value: -1: {range}"),
            &format!("spec.securityContext.supplementalGroups[0]: Invalid value: -1: {range}"),
            &format!("spec.containers[0].securityContext.runAsUser: Invalid value: -1: {range}"),
            &format!(
                "spec.containers[0].securityContext.runAsGroup: Invalid value: 2147483648: {range}"
            ),
        ],
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_paths_that_leave_their_volume_are_refused_at_create() {
    let server = Server::start().await;
    let err = refused(
        &server,
        "apiVersion: v1
kind: Pod
metadata: {name: escape}
spec:
  containers:
  - name: up
    image: busybox
    volumeMounts: [{name: data, mountPath: /d, subPath: ../../etc}]
  - name: abs
    image: busybox
    volumeMounts: [{name: data, mountPath: /d, subPath: /etc}]
  - name: expr
    image: busybox
    volumeMounts: [{name: data, mountPath: /d, subPathExpr: $(POD_NAME)/..}]
  volumes:
  - name: data
    emptyDir: {}
",
    )
    .await;
    // kube-apiserver names `volumeMounts.subPath`, without the mount's index.
    has_all(
        &err,
        &[
            r#"The Pod "escape" is invalid"#,
            r#"spec.containers[0].volumeMounts.subPath: Invalid value: "../../etc": must not contain '..'"#,
            r#"spec.containers[1].volumeMounts.subPath: Invalid value: "/etc": must be a relative path"#,
            r#"spec.containers[2].volumeMounts.subPathExpr: Invalid value: "$(POD_NAME)/..": must not contain '..'"#,
        ],
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_or_unsupported_field_selector_is_a_bad_request() {
    let server = Server::start().await;
    let created = kubectl(testkit::KUBECTL, &server.url)
        .run_stdin(
            &["create", "-f", "-"],
            Some(&pod_yaml("web", "busybox", "app: web")),
        )
        .await;
    ok(&created);
    for (selector, message) in [
        (
            "bad selector",
            "invalid selector: 'bad selector'; can't understand 'bad selector'",
        ),
        (
            "status.phase=Running=x",
            "invalid field selector: unescaped character in value: 61",
        ),
        (
            "spec.containers=x",
            "field label not supported: spec.containers",
        ),
    ] {
        for k in ALL_KUBECTLS {
            for extra in [&[][..], &["--watch"]] {
                let mut args = vec!["get", "pods", "--field-selector", selector];
                args.extend_from_slice(extra);
                let out = kubectl(k, &server.url).run(&args).await;
                assert!(!out.status.success(), "{k} {args:?} succeeded");
                // kubectl prefixes the server's message with what it asked for.
                let want = format!(
                    "Error from server (BadRequest): Unable to find \"/v1, Resource=pods\" that match label selector \"\", field selector \"{selector}\": {message}"
                );
                assert_eq!(stderr(&out).trim(), want, "{k} {args:?}");
            }
        }
        // The Status itself, for a list and for a watch.
        let query: String = url_escape(selector);
        for path in [
            format!("/api/v1/namespaces/default/pods?fieldSelector={query}"),
            format!("/api/v1/pods?watch=true&fieldSelector={query}"),
        ] {
            let (code, status) = Http::new(&server).get(&path).await;
            assert_eq!(code, 400, "{path}: {status}");
            assert_eq!(status["reason"], "BadRequest");
            assert_eq!(status["message"], message);
        }
    }
    // A well-formed selector still selects.
    let out = kubectl(testkit::KUBECTL, &server.url)
        .run(&[
            "get",
            "pods",
            "--field-selector",
            "metadata.name=web",
            "-o",
            "name",
        ])
        .await;
    assert_eq!(ok(&out).trim(), "pod/web");
    server.stop().await;
}

/// Percent-encodes everything but unreserved characters.
fn url_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
