//! Kubernetes' rules for the numbers in a pod's and a container's security context
//! (`validatePodSpecSecurityContext`, `ValidateSecurityContext` with apimachinery's
//! `IsValidUserID` and `IsValidGroupID`), with its messages: user and group ids are
//! libcontainer's, 0 to 2^31-1.

use k8s_openapi::api::core::v1::{PodSecurityContext, SecurityContext};

use super::Causes;

/// `InclusiveRangeError(0, math.MaxInt32)`.
const ID_RANGE_MSG: &str = "must be between 0 and 2147483647, inclusive";

fn check_id(causes: &mut Causes, field: String, id: Option<i64>) {
    if let Some(id) = id
        && !(0..=i64::from(i32::MAX)).contains(&id)
    {
        causes.invalid_number(field, id, ID_RANGE_MSG);
    }
}

/// Checks `spec.securityContext`.
pub(super) fn check_pod_security_context(causes: &mut Causes, sc: Option<&PodSecurityContext>) {
    let Some(sc) = sc else { return };
    let path = "spec.securityContext";
    check_id(causes, format!("{path}.fsGroup"), sc.fs_group);
    check_id(causes, format!("{path}.runAsUser"), sc.run_as_user);
    check_id(causes, format!("{path}.runAsGroup"), sc.run_as_group);
    for (i, gid) in sc.supplemental_groups.iter().flatten().enumerate() {
        check_id(
            causes,
            format!("{path}.supplementalGroups[{i}]"),
            Some(*gid),
        );
    }
}

/// Checks the security context of the container at `path` (`spec.containers[0]`).
pub(super) fn check_security_context(
    causes: &mut Causes,
    path: &str,
    sc: Option<&SecurityContext>,
) {
    let Some(sc) = sc else { return };
    check_id(
        causes,
        format!("{path}.securityContext.runAsUser"),
        sc.run_as_user,
    );
    check_id(
        causes,
        format!("{path}.securityContext.runAsGroup"),
        sc.run_as_group,
    );
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    fn causes(spec: serde_json::Value) -> Vec<String> {
        crate::validation::pod_causes(spec, |c| format!("{}: {}", c.field, c.message))
    }

    #[test]
    fn user_and_group_ids_outside_0_to_2_31_are_invalid_at_pod_and_container_level() {
        let got = causes(json!({
            "securityContext": {"runAsUser": -1, "runAsGroup": 2147483648_i64, "fsGroup": -5,
                "supplementalGroups": [10, -1]},
            "initContainers": [{"name": "i", "image": "i", "securityContext": {"runAsGroup": -1}}],
            "containers": [{"name": "c", "image": "i", "securityContext": {"runAsUser": -1}}]
        }));
        let msg = "must be between 0 and 2147483647, inclusive";
        for want in [
            format!("spec.securityContext.fsGroup: Invalid value: -5: {msg}"),
            format!("spec.securityContext.runAsUser: Invalid value: -1: {msg}"),
            format!("spec.securityContext.runAsGroup: Invalid value: 2147483648: {msg}"),
            format!("spec.securityContext.supplementalGroups[1]: Invalid value: -1: {msg}"),
            format!("spec.initContainers[0].securityContext.runAsGroup: Invalid value: -1: {msg}"),
            format!("spec.containers[0].securityContext.runAsUser: Invalid value: -1: {msg}"),
        ] {
            assert!(got.contains(&want), "missing {want} in {got:#?}");
        }
        assert_eq!(got.len(), 6, "{got:#?}");

        let fine = causes(json!({
            "securityContext": {"runAsUser": 0, "runAsGroup": 2147483647, "fsGroup": 0,
                "supplementalGroups": [0]},
            "containers": [{"name": "c", "image": "i", "securityContext": {"runAsUser": 1000}}]
        }));
        assert!(fine.is_empty(), "{fine:#?}");
    }
}
