//! Pod Security Admission with the real kubectl against the shim: a namespace labelled
//! `enforce=baseline` refuses a pod with hostNetwork and SYS_ADMIN in kube-apiserver's
//! words (and labelling it warns about the pods already there), a `warn=restricted`
//! namespace admits a pod and kubectl prints the warning, an `enforce=restricted`
//! namespace admits a pod that meets it (seccomp included), an unlabelled namespace
//! admits everything (privileged), and a label that does not parse is refused.
//! Admission happens before scheduling, so no cluster is needed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use apiserver::pod_security::{Exemptions, Level, PodSecurity};
use common::shim::*;
use common::*;
use testkit::{ok, stderr, stdout};

/// A pod with hostNetwork and a container adding SYS_ADMIN.
fn host_pod(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  hostNetwork: true
  containers:
  - name: c
    image: busybox
    securityContext:
      capabilities:
        add: [SYS_ADMIN]
"
    )
}

fn plain_pod(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  containers:
  - name: c
    image: busybox
"
    )
}

/// The `Warning: ` lines kubectl printed.
/// Creates namespace `ns` with the Pod Security `label` (`mode=level`).
async fn labelled_namespace(kc: &testkit::Kubectl, ns: &str, label: &str) {
    ok(&kc.run(&["create", "namespace", ns]).await);
    let label = format!("pod-security.kubernetes.io/{label}");
    ok(&kc.run(&["label", "ns", ns, &label]).await);
}

/// Creates `yaml` in namespace `ns`.
async fn create_in(kc: &testkit::Kubectl, ns: &str, yaml: &str) -> std::process::Output {
    kc.run_stdin(&["create", "-n", ns, "-f", "-"], Some(yaml))
        .await
}

fn warnings(out: &std::process::Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter_map(|l| l.strip_prefix("Warning: "))
        .map(str::to_string)
        .collect()
}

const HOST_POD_VIOLATIONS: &str = "non-default capabilities (container \"c\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add), host namespaces (hostNetwork=true)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_labelled_with_pod_security_levels_enforce_and_warn() {
    let server = Server::start().await;
    for (i, k) in ALL_KUBECTLS.iter().enumerate() {
        let kc = kubectl(k, &server.url);
        let team = format!("team-{i}");
        ok(&kc.run(&["create", "namespace", &team]).await);

        // Unlabelled: privileged, as in Kubernetes.
        let out = create_in(&kc, &team, &host_pod("early")).await;
        assert_eq!(ok(&out).trim(), "pod/early created", "{k}");
        assert!(warnings(&out).is_empty(), "{k}: {}", stderr(&out));

        // Enforcing baseline warns about the pod already there.
        let out = kc
            .run(&[
                "label",
                "ns",
                &team,
                "pod-security.kubernetes.io/enforce=baseline",
            ])
            .await;
        assert_eq!(ok(&out).trim(), format!("namespace/{team} labeled"), "{k}");
        assert_eq!(
            warnings(&out),
            [
                format!(
                    "existing pods in namespace \"{team}\" violate the new PodSecurity enforce level \"baseline:latest\""
                ),
                "early: non-default capabilities, host namespaces".to_string(),
            ],
            "{k}"
        );

        // ... and refuses a new one in kube-apiserver's words.
        let out = create_in(&kc, &team, &host_pod("late")).await;
        assert!(!out.status.success(), "{k}");
        assert_eq!(
            stderr(&out).trim(),
            format!(
                "Error from server (Forbidden): error when creating \"STDIN\": pods \"late\" is forbidden: violates PodSecurity \"baseline:latest\": {HOST_POD_VIOLATIONS}"
            ),
            "{k}"
        );
        let got = kc.run(&["get", "pod", "late", "-n", &team]).await;
        assert!(!got.status.success(), "{k}: the refused pod was stored");
        // A plain pod meets baseline.
        let out = create_in(&kc, &team, &plain_pod("fine")).await;
        assert_eq!(ok(&out).trim(), "pod/fine created", "{k}");

        // A level that does not exist is refused on the namespace.
        let out = kc
            .run(&[
                "label",
                "ns",
                &team,
                "--overwrite",
                "pod-security.kubernetes.io/enforce=strict",
            ])
            .await;
        assert_eq!(
            stderr(&out).trim(),
            format!(
                "The Namespace \"{team}\" is invalid: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
            ),
            "{k}"
        );
        let out = kc
            .run(&[
                "label",
                "ns",
                &team,
                "--overwrite",
                "pod-security.kubernetes.io/enforce-version=v1.30",
            ])
            .await;
        assert_eq!(ok(&out).trim(), format!("namespace/{team} labeled"), "{k}");
        let out = create_in(&kc, &team, &host_pod("later")).await;
        assert!(
            stderr(&out).contains("violates PodSecurity \"baseline:v1.30\": "),
            "{k}: {}",
            stderr(&out)
        );

        // warn=restricted admits the pod and kubectl prints why it would not be.
        let watched = format!("watched-{i}");
        labelled_namespace(&kc, &watched, "warn=restricted").await;
        let out = create_in(&kc, &watched, &plain_pod("p")).await;
        assert_eq!(ok(&out).trim(), "pod/p created", "{k}");
        assert_eq!(
            warnings(&out),
            [
                "would violate PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
            ],
            "{k}"
        );
        let got = ok(&kc
            .run(&["get", "pod", "p", "-n", &watched, "-o", "name"])
            .await);
        assert_eq!(got.trim(), "pod/p", "{k}");

        // enforce=restricted admits a pod that meets it: seccomp profiles
        // are honoured, so the level is reachable.
        let strict = format!("strict-{i}");
        labelled_namespace(&kc, &strict, "enforce=restricted").await;
        let out = create_in(&kc, &strict, &restricted_pod("r")).await;
        assert_eq!(ok(&out).trim(), "pod/r created", "{k}: {}", stderr(&out));
        assert!(warnings(&out).is_empty(), "{k}: {:?}", warnings(&out));
        let out = create_in(&kc, &strict, &plain_pod("p")).await;
        assert!(
            stderr(&out).contains("violates PodSecurity \"restricted:latest\": "),
            "{k}: {}",
            stderr(&out)
        );
    }
}

/// A pod that meets `restricted`.
fn restricted_pod(name: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  securityContext:
    runAsNonRoot: true
    runAsUser: 1000
    seccompProfile:
      type: RuntimeDefault
  containers:
  - name: c
    image: busybox
    securityContext:
      allowPrivilegeEscalation: false
      capabilities:
        drop: [ALL]
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_defaults_and_exempt_namespaces() {
    let api = apiserver::Api::in_memory().await.unwrap();
    let mut config = PodSecurity {
        exemptions: Exemptions {
            namespaces: vec!["kube-system".into()],
            ..Exemptions::default()
        },
        ..PodSecurity::default()
    };
    config.defaults.enforce.level = Level::Baseline;
    api.set_pod_security(config);
    let server = Server::serve(api).await;
    let kc = kubectl(testkit::KUBECTL, &server.url);

    let out = kc
        .run_stdin(
            &["create", "-n", "default", "-f", "-"],
            Some(&host_pod("x")),
        )
        .await;
    assert!(
        stderr(&out).contains(&format!(
            "pods \"x\" is forbidden: violates PodSecurity \"baseline:latest\": {HOST_POD_VIOLATIONS}"
        )),
        "{}",
        stderr(&out)
    );
    let out = kc
        .run_stdin(
            &["create", "-n", "kube-system", "-f", "-"],
            Some(&host_pod("x")),
        )
        .await;
    assert_eq!(ok(&out).trim(), "pod/x created");
    // A namespace may still lower its own level below the default.
    ok(&kc.run(&["create", "namespace", "infra"]).await);
    ok(&kc
        .run(&[
            "label",
            "ns",
            "infra",
            "pod-security.kubernetes.io/enforce=privileged",
        ])
        .await);
    let out = kc
        .run_stdin(&["create", "-n", "infra", "-f", "-"], Some(&host_pod("x")))
        .await;
    assert_eq!(stdout(&out).trim(), "pod/x created", "{}", stderr(&out));
}

/// The audit log's events of pod creates (`verb` create on pods), in order.
fn pod_creates(log: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|e| e["verb"] == "create" && e["objectRef"]["resource"] == "pods")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_config_file_and_audit_annotations() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("admission.yaml");
    std::fs::write(
        &config,
        "apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      audit: baseline
    exemptions:
      namespaces: [kube-system]
",
    )
    .unwrap();
    let log = tmp.path().join("audit.log");
    let mut cfg = common::cluster::app_config(common::cluster::Setup {
        agents: vec![],
        ..Default::default()
    });
    cfg.hardening.audit_log_path = Some(log.clone());
    cfg.hardening.pod_security = Some(apiserver::pod_security::config::load(&config).unwrap());
    let app = framework::app::App::start(cfg).await.unwrap();
    let kc = kubectl(testkit::KUBECTL, &app.api_url());

    let out = kc
        .run_stdin(
            &["create", "-n", "default", "-f", "-"],
            Some(&host_pod("x")),
        )
        .await;
    assert_eq!(ok(&out).trim(), "pod/x created");
    let out = kc
        .run_stdin(
            &["create", "-n", "kube-system", "-f", "-"],
            Some(&host_pod("x")),
        )
        .await;
    assert_eq!(ok(&out).trim(), "pod/x created");
    let events = testkit::wait_until(
        "both pod creates audited",
        std::time::Duration::from_secs(10),
        async || pod_creates(&log),
        |e| e.len() >= 2,
    )
    .await;
    assert_eq!(
        events[0]["annotations"],
        serde_json::json!({
            "pod-security.kubernetes.io/enforce-policy": "privileged:latest",
            "pod-security.kubernetes.io/audit-violations": format!("would violate PodSecurity \"baseline:latest\": {HOST_POD_VIOLATIONS}"),
        }),
        "{}",
        events[0]
    );
    assert_eq!(
        events[1]["annotations"],
        serde_json::json!({"pod-security.kubernetes.io/exempt": "namespace"}),
        "{}",
        events[1]
    );
    app.shutdown().await;
}
