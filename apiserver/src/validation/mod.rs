//! Validation as Kubernetes does it, for everything the shim supports: names (DNS-1123),
//! labels and annotations, required fields, unique container and volume names, ports,
//! parseable quantities, enumerated values, and which pod fields an update may change.
//! On top, every pod field mesopod cannot honour is refused at create, from one table
//! ([`fields`]) that is also the documented list of what each field does here.
//!
//! Every check appends a [`Cause`] worded as Kubernetes words it; a non-empty list becomes
//! one 422 Invalid answer listing all of them.

use crate::error::{ApiError, Cause, CauseKind};

pub mod fields;
#[cfg(test)]
mod fields_walk;
mod names;
mod pod;
mod pod_warnings;
mod probes;
mod seccomp;
mod security;
mod support;
mod volumes;

pub(crate) use names::{
    DNS1123_LABEL_MSG, DNS1123_SUBDOMAIN_MSG, QUALIFIED_NAME_MSG, check_label_name, check_metadata,
    check_subdomain_name,
};
pub use names::{is_dns1123_label, is_dns1123_subdomain, is_label_value, is_qualified_name};
pub use pod::{validate_pod, validate_pod_update};
pub(crate) use pod_warnings::name_not_dns_label;
pub use pod_warnings::{
    for_pod_create as pod_create_warnings, for_template as pod_template_warnings,
};

/// Every container of `spec`, init containers first, with its field path
/// (`spec.initContainers[i]`, `spec.containers[i]`), as Kubernetes walks them.
pub(crate) fn containers_with_paths(
    spec: &k8s_openapi::api::core::v1::PodSpec,
) -> impl Iterator<Item = (String, &k8s_openapi::api::core::v1::Container)> {
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c));
    let main = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.containers[{i}]"), c));
    init.chain(main)
}

/// The causes [`validate_pod`] gives a pod named `p` with `spec`, each
/// written by `show` (the tests of every validation module share it).
#[cfg(test)]
pub(crate) fn pod_causes(spec: serde_json::Value, show: impl Fn(&Cause) -> String) -> Vec<String> {
    let pod: k8s_openapi::api::core::v1::Pod = match serde_json::from_value(
        serde_json::json!({"metadata": {"name": "p"}, "spec": spec}),
    ) {
        Ok(pod) => pod,
        Err(e) => panic!("not a pod: {e}"),
    };
    match validate_pod(&pod) {
        Ok(()) => Vec::new(),
        Err(ApiError::Invalid { causes, .. }) => causes.iter().map(show).collect(),
        Err(other) => panic!("{other}"),
    }
}

/// Collects causes for one object.
#[derive(Debug, Default)]
pub(crate) struct Causes(pub(crate) Vec<Cause>);

impl Causes {
    pub(crate) fn push(
        &mut self,
        kind: CauseKind,
        field: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.0.push(Cause {
            kind,
            field: field.into(),
            message: message.into(),
        });
    }

    pub(crate) fn required(&mut self, field: impl Into<String>) {
        self.push(CauseKind::Required, field, "Required value");
    }

    pub(crate) fn invalid(&mut self, field: impl Into<String>, value: &str, detail: &str) {
        self.push(
            CauseKind::Invalid,
            field,
            format!("Invalid value: \"{value}\": {detail}"),
        );
    }

    /// An invalid number, which Kubernetes writes without quotes (`Invalid value: -1`).
    pub(crate) fn invalid_number(&mut self, field: impl Into<String>, value: i64, detail: &str) {
        self.push(
            CauseKind::Invalid,
            field,
            format!("Invalid value: {value}: {detail}"),
        );
    }

    /// A quantity that does not parse.
    pub(crate) fn invalid_quantity(&mut self, field: impl Into<String>, value: &str) {
        self.invalid(
            field,
            value,
            &format!(
                "quantities must match the regular expression '{}'",
                quantity::PATTERN
            ),
        );
    }

    pub(crate) fn forbidden(&mut self, field: impl Into<String>, detail: &str) {
        self.push(CauseKind::Forbidden, field, format!("Forbidden: {detail}"));
    }

    pub(crate) fn not_found(&mut self, field: impl Into<String>, value: &str) {
        self.push(
            CauseKind::NotFound,
            field,
            format!("Not found: \"{value}\""),
        );
    }

    pub(crate) fn unsupported(
        &mut self,
        field: impl Into<String>,
        value: &str,
        supported: &[&str],
    ) {
        let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        self.push(
            CauseKind::NotSupported,
            field,
            format!(
                "Unsupported value: \"{value}\": supported values: {}",
                list.join(", ")
            ),
        );
    }

    /// `Ok` if nothing was found, else the 422 for `kind` `name`.
    pub(crate) fn into_result(self, kind: &str, name: &str) -> Result<(), ApiError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ApiError::Invalid {
                kind: kind.into(),
                name: name.into(),
                causes: self.0,
            })
        }
    }
}
