//! The admission step's decisions, with kube-apiserver's words.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::*;

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (format!("{PREFIX}{k}"), (*v).to_string()))
        .collect()
}

fn pod(name: &str, spec: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

/// hostNetwork and SYS_ADMIN: violates baseline.
fn host_pod(name: &str) -> Pod {
    pod(
        name,
        json!({"hostNetwork": true, "containers": [{"name": "c", "image": "busybox",
            "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}),
    )
}

fn plain_pod(name: &str) -> Pod {
    pod(
        name,
        json!({"containers": [{"name": "c", "image": "busybox"}]}),
    )
}

fn annotation<'a>(d: &'a PodDecision, key: &str) -> Option<&'a str> {
    d.audit
        .iter()
        .find(|(k, _)| k == &format!("{PREFIX}{key}"))
        .map(|(_, v)| v.as_str())
}

#[test]
fn an_unlabelled_namespace_admits_everything_as_privileged() {
    let d = PodSecurity::default().admit_pod("team", &BTreeMap::new(), None, &host_pod("x"), None);
    assert_eq!(d.refusal, None);
    assert!(d.warnings.is_empty());
    assert_eq!(annotation(&d, "enforce-policy"), Some("privileged:latest"));
}

#[test]
fn enforce_refuses_with_kubernetes_message_and_no_warning() {
    let d = PodSecurity::default().admit_pod(
        "team",
        &labels(&[("enforce", "baseline")]),
        None,
        &host_pod("x"),
        None,
    );
    assert_eq!(
        d.refusal.as_deref(),
        Some(
            "violates PodSecurity \"baseline:latest\": non-default capabilities (container \"c\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add), host namespaces (hostNetwork=true)"
        )
    );
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    assert_eq!(annotation(&d, "enforce-policy"), Some("baseline:latest"));
}

#[test]
fn warn_and_audit_admit_with_a_warning_and_an_annotation() {
    let d = PodSecurity::default().admit_pod(
        "team",
        &labels(&[
            ("warn", "baseline"),
            ("audit", "baseline"),
            ("audit-version", "v1.30"),
        ]),
        None,
        &host_pod("x"),
        None,
    );
    assert_eq!(d.refusal, None);
    let detail = "non-default capabilities (container \"c\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add), host namespaces (hostNetwork=true)";
    assert_eq!(
        d.warnings,
        [format!(
            "would violate PodSecurity \"baseline:latest\": {detail}"
        )]
    );
    assert_eq!(
        annotation(&d, "audit-violations"),
        Some(format!("would violate PodSecurity \"baseline:v1.30\": {detail}").as_str())
    );
    assert_eq!(annotation(&d, "enforce-policy"), Some("privileged:latest"));
}

#[test]
fn exemptions_skip_evaluation_and_say_why() {
    let config = PodSecurity {
        exemptions: Exemptions {
            usernames: vec!["admin".into()],
            namespaces: vec!["kube-system".into()],
            runtime_classes: vec!["kata".into()],
        },
        ..PodSecurity::default()
    };
    let strict = labels(&[("enforce", "restricted")]);
    let d = config.admit_pod("kube-system", &strict, None, &host_pod("x"), None);
    assert_eq!(
        (d.refusal.as_deref(), annotation(&d, "exempt")),
        (None, Some("namespace"))
    );
    let d = config.admit_pod("team", &strict, Some("admin"), &host_pod("x"), None);
    assert_eq!(annotation(&d, "exempt"), Some("user"));
    let mut kata = host_pod("x");
    kata.spec.as_mut().unwrap().runtime_class_name = Some("kata".into());
    let d = config.admit_pod("team", &strict, Some("someone"), &kata, None);
    assert_eq!(
        (d.refusal.as_deref(), annotation(&d, "exempt")),
        (None, Some("runtimeClass"))
    );
    assert!(
        config
            .admit_pod("team", &strict, Some("someone"), &host_pod("x"), None)
            .refusal
            .is_some()
    );
}

#[test]
fn configured_defaults_apply_to_unlabelled_namespaces() {
    let mut config = PodSecurity::default();
    config.defaults.enforce.level = Level::Baseline;
    let d = config.admit_pod("team", &BTreeMap::new(), None, &host_pod("x"), None);
    assert!(d.refusal.is_some());
    let d = config.admit_pod(
        "team",
        &labels(&[("enforce", "privileged")]),
        None,
        &host_pod("x"),
        None,
    );
    assert_eq!(d.refusal, None);
}

#[test]
fn an_invalid_enforce_label_fails_closed_and_is_noted() {
    let d = PodSecurity::default().admit_pod(
        "team",
        &labels(&[("enforce", "strict")]),
        None,
        &plain_pod("x"),
        None,
    );
    assert!(
        d.refusal.as_deref().is_some_and(|r| r.starts_with(
            "violates PodSecurity \"restricted:latest\": allowPrivilegeEscalation != false"
        )),
        "{d:?}"
    );
    assert_eq!(
        annotation(&d, "error"),
        Some(
            "Failed to parse policy: metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted"
        )
    );
}

#[test]
fn updates_are_evaluated_only_when_containers_change() {
    let strict = labels(&[("enforce", "baseline")]);
    let old = host_pod("x");
    let mut relabelled = old.clone();
    relabelled.metadata.labels = Some([("a".to_string(), "b".to_string())].into());
    let d = PodSecurity::default().admit_pod("team", &strict, None, &relabelled, Some(&old));
    assert_eq!(d, PodDecision::default());
    let mut new_image = old.clone();
    new_image.spec.as_mut().unwrap().containers[0].image = Some("busybox:2".into());
    let d = PodSecurity::default().admit_pod("team", &strict, None, &new_image, Some(&old));
    assert!(d.refusal.is_some());
}

#[test]
fn namespace_labels_that_do_not_parse_are_refused_at_create() {
    let config = PodSecurity::default();
    let errs = config
        .admit_namespace_create(
            "team",
            &labels(&[("enforce", "strict"), ("warn-version", "1.30")]),
        )
        .unwrap_err();
    assert_eq!(
        label_errors_message(&errs),
        "[metadata.labels[pod-security.kubernetes.io/enforce]: Invalid value: \"strict\": must be one of privileged, baseline, restricted, metadata.labels[pod-security.kubernetes.io/warn-version]: Invalid value: \"1.30\": must be \"latest\" or \"v1.x\"]"
    );
    assert_eq!(
        config.admit_namespace_create("team", &labels(&[("enforce", "baseline")])),
        Ok(Vec::new())
    );
}

#[test]
fn a_stricter_enforce_level_warns_about_existing_pods() {
    let config = PodSecurity::default();
    let pods = vec![host_pod("b"), host_pod("a"), host_pod("c"), plain_pod("ok")];
    let warnings = config
        .admit_namespace_update(
            "team",
            &BTreeMap::new(),
            &labels(&[("enforce", "baseline")]),
            || pods.clone(),
        )
        .unwrap();
    assert_eq!(
        warnings,
        [
            "existing pods in namespace \"team\" violate the new PodSecurity enforce level \"baseline:latest\"",
            "a (and 2 other pods): non-default capabilities, host namespaces",
        ]
    );
    let restricted = config
        .admit_namespace_update(
            "team",
            &labels(&[("enforce", "baseline")]),
            &labels(&[("enforce", "restricted")]),
            || vec![plain_pod("ok")],
        )
        .unwrap();
    assert_eq!(
        restricted,
        [
            "existing pods in namespace \"team\" violate the new PodSecurity enforce level \"restricted:latest\"",
            "ok: allowPrivilegeEscalation != false, unrestricted capabilities, runAsNonRoot != true, seccompProfile",
        ]
    );
}

#[test]
fn an_unchanged_or_relaxed_enforce_level_checks_no_pods() {
    let config = PodSecurity::default();
    let never = || -> Vec<Pod> { panic!("pods were read") };
    let baseline = labels(&[("enforce", "baseline")]);
    assert_eq!(
        config.admit_namespace_update("team", &baseline, &baseline, never),
        Ok(Vec::new())
    );
    assert_eq!(
        config.admit_namespace_update(
            "team",
            &labels(&[("enforce", "restricted")]),
            &baseline,
            never
        ),
        Ok(Vec::new())
    );
    // A label that already failed, failing alike, does not block other updates.
    let bad = labels(&[("audit", "loud")]);
    assert_eq!(
        config.admit_namespace_update("team", &bad, &bad, never),
        Ok(Vec::new())
    );
    assert!(
        config
            .admit_namespace_update("team", &BTreeMap::new(), &bad, never)
            .is_err()
    );
}

#[test]
fn an_exempt_namespace_is_told_its_policy_is_ignored() {
    let config = PodSecurity {
        exemptions: Exemptions {
            namespaces: vec!["kube-system".into()],
            ..Exemptions::default()
        },
        ..PodSecurity::default()
    };
    assert_eq!(
        config.admit_namespace_create(
            "kube-system",
            &labels(&[("enforce", "baseline"), ("warn", "restricted")])
        ),
        Ok(vec![
            "namespace \"kube-system\" is exempt from Pod Security, and the policy (enforce=baseline:latest, warn=restricted:latest) will be ignored".to_string()
        ])
    );
}
