//! ServiceAccount: stored as given; every namespace has one named `default`.

use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::{Value, json};

use super::{Kind, col, name_and_age};
use crate::resource::Resource;
use crate::validation::Causes;

/// The account every namespace gets, and pods without `serviceAccountName` run as.
pub(crate) const DEFAULT_SERVICE_ACCOUNT: &str = "default";

impl Kind for ServiceAccount {
    const RESOURCE: Resource = Resource::ServiceAccounts;

    fn validate(&self, _causes: &mut Causes) {
        // Kubernetes checks nothing beyond the metadata: `secrets` and
        // `imagePullSecrets` are references that may name objects yet to exist.
    }
}

pub(super) fn columns() -> Vec<Value> {
    let (name, age) = name_and_age();
    vec![
        name,
        col(
            "Secrets",
            "",
            "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
        ),
        age,
    ]
}

/// SECRETS: how many secrets the account lists.
pub(super) fn secret_count(obj: &Value) -> Value {
    json!(
        obj.get("secrets")
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    )
}
