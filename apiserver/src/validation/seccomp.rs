//! `seccompProfile`, pod and container, by Kubernetes' rules
//! (`validateSeccompProfileField`): a known type, and `localhostProfile`
//! exactly when the type is `Localhost`, as a descending relative path.

use k8s_openapi::api::core::v1::{PodSpec, SeccompProfile};

use super::Causes;
use crate::error::CauseKind;

const TYPES: &[&str] = &["Localhost", "RuntimeDefault", "Unconfined"];

/// Checks the pod's profile and every container's.
pub(super) fn check(causes: &mut Causes, spec: &PodSpec) {
    if let Some(p) = spec
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
    {
        check_profile(causes, "spec.securityContext.seccompProfile", p);
    }
    for (path, c) in super::containers_with_paths(spec) {
        if let Some(p) = c
            .security_context
            .as_ref()
            .and_then(|s| s.seccomp_profile.as_ref())
        {
            check_profile(causes, &format!("{path}.securityContext.seccompProfile"), p);
        }
    }
}

fn check_profile(causes: &mut Causes, path: &str, p: &SeccompProfile) {
    match p.type_.as_str() {
        "" => causes.push(
            CauseKind::Required,
            format!("{path}.type"),
            "Required value: type is required when seccompProfile is set",
        ),
        t if !TYPES.contains(&t) => causes.unsupported(format!("{path}.type"), t, TYPES),
        _ => {}
    }
    let field = format!("{path}.localhostProfile");
    match (p.type_.as_str(), p.localhost_profile.as_deref()) {
        ("Localhost", None) => causes.push(
            CauseKind::Required,
            field,
            "Required value: must be set when seccomp type is Localhost",
        ),
        ("Localhost", Some(local)) => {
            if local.starts_with('/') {
                causes.invalid(field.clone(), local, "must be a relative path");
            }
            if local.split('/').any(|part| part == "..") {
                causes.invalid(field, local, "must not contain '..'");
            }
        }
        (_, Some(local)) => causes.invalid(
            field,
            local,
            "can only be set when seccomp type is Localhost",
        ),
        (_, None) => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn causes(spec: serde_json::Value) -> Vec<String> {
        let spec: PodSpec = serde_json::from_value(spec).unwrap();
        let mut c = Causes::default();
        check(&mut c, &spec);
        c.0.into_iter()
            .map(|c| format!("{}|{}", c.field, c.message))
            .collect()
    }

    #[test]
    fn profiles_are_checked_in_kubernetes_words() {
        let ok = causes(serde_json::json!({
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {"name": "a", "securityContext": {"seccompProfile": {"type": "Unconfined"}}},
                {"name": "b", "securityContext": {"seccompProfile":
                    {"type": "Localhost", "localhostProfile": "profiles/audit.json"}}}
            ]
        }));
        assert!(ok.is_empty(), "{ok:?}");
        let bad = causes(serde_json::json!({
            "securityContext": {"seccompProfile": {"type": "Localhost"}},
            "initContainers": [
                {"name": "i", "securityContext": {"seccompProfile": {"type": "docker/default"}}}
            ],
            "containers": [
                {"name": "a", "securityContext": {"seccompProfile":
                    {"type": "RuntimeDefault", "localhostProfile": "x.json"}}},
                {"name": "b", "securityContext": {"seccompProfile":
                    {"type": "Localhost", "localhostProfile": "/etc/../x.json"}}},
                {"name": "c", "securityContext": {"seccompProfile": {"type": ""}}}
            ]
        }));
        assert_eq!(
            bad,
            [
                "spec.securityContext.seccompProfile.localhostProfile|Required value: must be set when seccomp type is Localhost",
                "spec.initContainers[0].securityContext.seccompProfile.type|Unsupported value: \"docker/default\": supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\"",
                "spec.containers[0].securityContext.seccompProfile.localhostProfile|Invalid value: \"x.json\": can only be set when seccomp type is Localhost",
                "spec.containers[1].securityContext.seccompProfile.localhostProfile|Invalid value: \"/etc/../x.json\": must be a relative path",
                "spec.containers[1].securityContext.seccompProfile.localhostProfile|Invalid value: \"/etc/../x.json\": must not contain '..'",
                "spec.containers[2].securityContext.seccompProfile.type|Required value: type is required when seccompProfile is set",
            ]
        );
    }
}
