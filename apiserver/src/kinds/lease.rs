//! Lease (`coordination.k8s.io/v1`): what leader election is kept in. The shim stores it
//! as given after Kubernetes' checks of the spec; mesopod's own replicas renew one
//! (`kube-system/mesopod`) and fence their writes on its resourceVersion.

use k8s_openapi::api::coordination::v1::Lease;
use serde_json::{Value, json};

use super::{Kind, col, name_and_age};
use crate::CauseKind;
use crate::resource::Resource;
use crate::validation::Causes;

impl Kind for Lease {
    const RESOURCE: Resource = Resource::Leases;

    fn validate(&self, causes: &mut Causes) {
        // ValidateLeaseSpec of kube-apiserver's coordination validation.
        let Some(spec) = &self.spec else { return };
        if let Some(d) = spec.lease_duration_seconds
            && d <= 0
        {
            causes.push(
                CauseKind::Invalid,
                "spec.leaseDurationSeconds",
                format!("Invalid value: {d}: must be greater than 0"),
            );
        }
        if let Some(t) = spec.lease_transitions
            && t < 0
        {
            causes.push(
                CauseKind::Invalid,
                "spec.leaseTransitions",
                format!("Invalid value: {t}: must be greater than or equal to 0"),
            );
        }
        if spec.preferred_holder.is_some() && spec.strategy.is_none() {
            causes.push(
                CauseKind::Forbidden,
                "spec.preferredHolder",
                "Forbidden: preferredHolder can only be set when strategy is set",
            );
        }
    }
}

pub(super) fn columns() -> Vec<Value> {
    let (name, age) = name_and_age();
    vec![
        name,
        col(
            "Holder",
            "",
            "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
        ),
        age,
    ]
}

/// HOLDER: `spec.holderIdentity`, `<none>` without one (kube-apiserver's printer).
pub(super) fn holder(obj: &Value) -> Value {
    json!(
        obj.pointer("/spec/holderIdentity")
            .and_then(Value::as_str)
            .unwrap_or("<none>")
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::kinds::validate;

    fn lease(v: Value) -> Lease {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_lease_with_a_non_positive_duration_or_negative_transitions_is_refused_by_field() {
        assert!(
            validate(
                &lease(json!({"metadata": {"name": "mesopod"},
                    "spec": {"holderIdentity": "a_1", "leaseDurationSeconds": 15, "leaseTransitions": 0}})),
                None
            )
            .is_ok()
        );
        let bad = lease(json!({"metadata": {"name": "mesopod"},
            "spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}}));
        let Err(crate::ApiError::Invalid { causes, .. }) = validate(&bad, None) else {
            panic!("accepted");
        };
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.leaseDurationSeconds", "spec.leaseTransitions"]
        );
    }

    #[test]
    fn the_holder_column_shows_the_holder_or_none() {
        assert_eq!(
            holder(&json!({"spec": {"holderIdentity": "host_1"}})),
            json!("host_1")
        );
        assert_eq!(holder(&json!({"spec": {}})), json!("<none>"));
    }
}
