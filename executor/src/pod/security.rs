//! The parts of a container's plan that containers need and process mode
//! ignores: the security context (container over pod) and the resources
//! cgroups enforce.

use k8s_openapi::api::core::v1::{Container, PodSecurityContext};

/// A container's security context, the container's fields over the pod's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Security {
    /// `runAsUser`.
    pub run_as_user: Option<i64>,
    /// `runAsGroup`.
    pub run_as_group: Option<i64>,
    /// The pod's `supplementalGroups`, then its `fsGroup`.
    pub supplemental_groups: Vec<i64>,
    /// `runAsNonRoot`.
    pub run_as_non_root: Option<bool>,
    /// `readOnlyRootFilesystem`.
    pub read_only_root_filesystem: bool,
    /// `capabilities.add`.
    pub caps_add: Vec<String>,
    /// `capabilities.drop`.
    pub caps_drop: Vec<String>,
    /// `allowPrivilegeEscalation`.
    pub allow_privilege_escalation: Option<bool>,
    /// `privileged`.
    pub privileged: bool,
    /// `seccompProfile`, the container's or else the pod's.
    pub seccomp: Option<SeccompProfile>,
}

/// A `seccompProfile` as written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeccompProfile {
    /// `type`: `RuntimeDefault`, `Unconfined` or `Localhost`.
    pub kind: String,
    /// `localhostProfile`.
    pub localhost_profile: Option<String>,
}

/// A container's resources, as cgroups need them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Limits {
    /// `limits.memory` in bytes.
    pub memory_limit_bytes: Option<i64>,
    /// `limits.cpu` in millicores.
    pub cpu_limit_millis: Option<i64>,
    /// `requests.cpu` in millicores.
    pub cpu_request_millis: Option<i64>,
}

pub(super) fn security(c: &Container, pod: Option<&PodSecurityContext>) -> Security {
    let sc = c.security_context.as_ref();
    let caps = sc.and_then(|s| s.capabilities.as_ref());
    Security {
        run_as_user: sc
            .and_then(|s| s.run_as_user)
            .or(pod.and_then(|p| p.run_as_user)),
        run_as_group: sc
            .and_then(|s| s.run_as_group)
            .or(pod.and_then(|p| p.run_as_group)),
        // kubelet adds fsGroup to every container's supplemental groups.
        supplemental_groups: pod
            .and_then(|p| p.supplemental_groups.clone())
            .unwrap_or_default()
            .into_iter()
            .chain(pod.and_then(|p| p.fs_group))
            .collect(),
        run_as_non_root: sc
            .and_then(|s| s.run_as_non_root)
            .or(pod.and_then(|p| p.run_as_non_root)),
        read_only_root_filesystem: sc.and_then(|s| s.read_only_root_filesystem) == Some(true),
        caps_add: caps.and_then(|c| c.add.clone()).unwrap_or_default(),
        caps_drop: caps.and_then(|c| c.drop.clone()).unwrap_or_default(),
        allow_privilege_escalation: sc.and_then(|s| s.allow_privilege_escalation),
        privileged: sc.and_then(|s| s.privileged) == Some(true),
        // kubelet takes the container's field whole, else the pod's.
        seccomp: sc
            .and_then(|s| s.seccomp_profile.as_ref())
            .or(pod.and_then(|p| p.seccomp_profile.as_ref()))
            .map(|p| SeccompProfile {
                kind: p.type_.clone(),
                localhost_profile: p.localhost_profile.clone(),
            }),
    }
}

pub(super) fn limits(c: &Container) -> Result<Limits, String> {
    let r = c.resources.as_ref();
    let get = |which: &str,
               map: Option<
        &std::collections::BTreeMap<
            String,
            k8s_openapi::apimachinery::pkg::api::resource::Quantity,
        >,
    >,
               scale: f64|
     -> Result<Option<i64>, String> {
        match map.and_then(|m| m.get(which)) {
            None => Ok(None),
            Some(q) => {
                let parsed = quantity::Quantity::parse(&q.0)
                    .map_err(|e| format!("resources {which} {:?}: {e}", q.0))?;
                // Rounded up, as Kubernetes rounds CPU to millicores.
                #[allow(clippy::cast_possible_truncation)]
                Ok(Some((parsed.to_f64() * scale).ceil() as i64))
            }
        }
    };
    Ok(Limits {
        memory_limit_bytes: get("memory", r.and_then(|r| r.limits.as_ref()), 1.0)?,
        cpu_limit_millis: get("cpu", r.and_then(|r| r.limits.as_ref()), 1000.0)?,
        cpu_request_millis: get("cpu", r.and_then(|r| r.requests.as_ref()), 1000.0)?,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_containers_seccomp_profile_wins_over_the_pods_whole() {
        let pod: PodSecurityContext = serde_json::from_value(serde_json::json!(
            {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}
        ))
        .unwrap();
        let plain: Container = serde_json::from_value(serde_json::json!({"name": "a"})).unwrap();
        let own: Container = serde_json::from_value(serde_json::json!(
            {"name": "b", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}
        ))
        .unwrap();
        let localhost = SeccompProfile {
            kind: "Localhost".into(),
            localhost_profile: Some("p.json".into()),
        };
        assert_eq!(security(&plain, Some(&pod)).seccomp, Some(localhost));
        assert_eq!(
            security(&own, Some(&pod)).seccomp,
            Some(SeccompProfile {
                kind: "RuntimeDefault".into(),
                localhost_profile: None,
            })
        );
        assert_eq!(security(&plain, None).seccomp, None);
    }
}
