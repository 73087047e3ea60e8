//! kube-apiserver's warnings for pods and pod templates, as the real kubectl prints
//! them (`Warning: <text>` on stderr), on create and dry-run create.

use common::Server;
use testkit::Kubectl;

use super::common;

const SPEC: &str = r#"
      containers:
      - name: c
        image: nginx
        resources:
          requests:
            memory: 1m
        env:
        - name: X
          value: a
        - name: X
          value: b"#;

fn warnings(stderr: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter_map(|l| l.strip_prefix("Warning: ").map(str::to_owned))
        .collect()
}

async fn create(kubectl: &Kubectl, yaml: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["create", "-f", "-"];
    args.extend_from_slice(extra);
    let out = kubectl.run_stdin(&args, Some(yaml)).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    warnings(&out.stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_prints_the_pod_and_template_warnings_on_create_and_dry_run() {
    let server = Server::start().await;
    let kubectl = Kubectl::new(&server.url);
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: default\nspec:{}\n",
        SPEC.replace("\n      ", "\n  ")
    );
    let pod_warnings = [
        "spec.containers[0].resources.requests[memory]: fractional byte value \"1m\" is invalid, must be an integer",
        "spec.containers[0].env[1]: hides previous definition of \"X\", which may be dropped when using apply",
    ];
    assert_eq!(
        create(&kubectl, &pod, &["--dry-run=server"]).await,
        pod_warnings
    );
    assert_eq!(create(&kubectl, &pod, &[]).await, pod_warnings);

    let deployment = format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d.1\n  namespace: default\nspec:\n  selector:\n    matchLabels: {{app: d}}\n  template:\n    metadata:\n      labels: {{app: d}}\n    spec:{SPEC}\n"
    );
    assert_eq!(
        create(&kubectl, &deployment, &[]).await,
        [
            "metadata.name: this is used in Pod names and hostnames, which can result in surprising behavior; a DNS label is recommended: [a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')]",
            "spec.template.spec.containers[0].resources.requests[memory]: fractional byte value \"1m\" is invalid, must be an integer",
            "spec.template.spec.containers[0].env[1]: hides previous definition of \"X\", which may be dropped when using apply",
        ]
    );
    // An update that leaves the spec alone says nothing; one that changes it, again.
    let out = kubectl
        .run(&["label", "deployment", "d.1", "tier=web"])
        .await;
    assert!(out.status.success());
    assert!(warnings(&out.stderr).is_empty(), "{out:?}");
    let out = kubectl
        .run(&["scale", "deployment", "d.1", "--replicas=2"])
        .await;
    assert!(out.status.success());
    let out = kubectl
        .run(&[
            "patch",
            "deployment",
            "d.1",
            "-p",
            r#"{"spec":{"template":{"spec":{"terminationGracePeriodSeconds":5}}}}"#,
        ])
        .await;
    assert!(out.status.success());
    assert_eq!(
        warnings(&out.stderr),
        [
            "spec.template.spec.containers[0].resources.requests[memory]: fractional byte value \"1m\" is invalid, must be an integer",
            "spec.template.spec.containers[0].env[1]: hides previous definition of \"X\", which may be dropped when using apply",
        ]
    );
}
