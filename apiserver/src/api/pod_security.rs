//! Pod Security Admission (`crate::pod_security`) on the write paths: pods at create
//! and update, namespaces' labels at create and update. Its warnings and audit
//! annotations go to the request's notes (`crate::notes`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Pod};
use serde::Deserialize as _;

use super::Api;
use crate::error::{ApiError, Cause, CauseKind};
use crate::notes;
use crate::pod_security::LabelError;
use crate::resource::Resource;

/// The 422 of a namespace whose Pod Security labels do not parse.
fn invalid_labels(name: &str, errors: Vec<LabelError>) -> ApiError {
    ApiError::Invalid {
        kind: "Namespace".into(),
        name: name.into(),
        causes: errors
            .into_iter()
            .map(|e| Cause {
                kind: CauseKind::Invalid,
                field: e.field(),
                message: format!("Invalid value: \"{}\": {}", e.value, e.detail),
            })
            .collect(),
    }
}

fn labels_of(ns: &Namespace) -> BTreeMap<String, String> {
    ns.metadata.labels.clone().unwrap_or_default()
}

impl Api {
    /// The labels of the stored namespace `ns` (none if it is missing).
    fn namespace_labels(&self, ns: &str) -> BTreeMap<String, String> {
        self.get_value(&Resource::Namespaces.key("", ns))
            .and_then(|v| v.pointer("/metadata/labels").cloned())
            .and_then(|l| serde_json::from_value(l).ok())
            .unwrap_or_default()
    }

    /// Admits the pod `name` created (`old` `None`) or updated in `ns`: 403 if it
    /// violates the namespace's enforce level; warnings and audit annotations noted.
    pub(crate) fn admit_pod_security(
        &self,
        ns: &str,
        name: &str,
        pod: &Pod,
        old: Option<&Pod>,
    ) -> Result<(), ApiError> {
        let labels = self.namespace_labels(ns);
        let user = notes::user();
        let d = self
            .pod_security()
            .admit_pod(ns, &labels, user.as_deref(), pod, old);
        for (k, v) in d.audit {
            notes::annotate(k, v);
        }
        if let Some(why) = d.refusal {
            return Err(ApiError::Forbidden(format!(
                "pods \"{name}\" is forbidden: {why}"
            )));
        }
        for w in d.warnings {
            notes::warn(w);
        }
        Ok(())
    }

    /// Admits a namespace's Pod Security labels at its create.
    pub(crate) fn admit_namespace_create(&self, ns: &Namespace) -> Result<(), ApiError> {
        let name = ns.metadata.name.as_deref().unwrap_or("");
        let warnings = self
            .pod_security()
            .admit_namespace_create(name, &labels_of(ns))
            .map_err(|e| invalid_labels(name, e))?;
        warnings.into_iter().for_each(notes::warn);
        Ok(())
    }

    /// Admits a namespace's Pod Security labels at an update; a stricter enforce level
    /// is checked against the pods in it, answered as warnings.
    pub(crate) fn admit_namespace_update(
        &self,
        old: &Namespace,
        new: &Namespace,
    ) -> Result<(), ApiError> {
        let name = new.metadata.name.as_deref().unwrap_or("");
        let pods = || -> Vec<Pod> {
            self.store()
                .list(&Resource::Pods.prefix(Some(name)))
                .0
                .into_iter()
                .filter_map(|v| Pod::deserialize(&*v).ok())
                .collect()
        };
        let warnings = self
            .pod_security()
            .admit_namespace_update(name, &labels_of(old), &labels_of(new), pods)
            .map_err(|e| invalid_labels(name, e))?;
        warnings.into_iter().for_each(notes::warn);
        Ok(())
    }
}
