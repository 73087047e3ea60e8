//! The key/value data of ConfigMaps and Secrets, as bytes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

/// A ConfigMap's `data` and `binaryData` together.
pub(crate) fn config_map_data(cm: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = cm
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    for (k, v) in cm.binary_data.iter().flatten() {
        out.insert(k.clone(), v.0.clone());
    }
    out
}

/// A Secret's `data` (decoded) and `stringData`.
pub(crate) fn secret_data(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut out: BTreeMap<String, Vec<u8>> = s
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect();
    for (k, v) in s.string_data.iter().flatten() {
        out.insert(k.clone(), v.clone().into_bytes());
    }
    out
}

/// Which kind of object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A ConfigMap.
    ConfigMap,
    /// A Secret.
    Secret,
}

impl Kind {
    /// kubelet's word in "… not found" (`configmap`, `secret`).
    pub(crate) fn lower(self) -> &'static str {
        match self {
            Kind::ConfigMap => "configmap",
            Kind::Secret => "secret",
        }
    }
}

/// The data of the object `ns/name`; `Ok(None)` when it does not exist.
pub(crate) async fn fetch(
    objects: &dyn crate::objects::PodObjects,
    kind: Kind,
    ns: &str,
    name: &str,
) -> Result<Option<BTreeMap<String, Vec<u8>>>, String> {
    Ok(match kind {
        Kind::ConfigMap => objects
            .config_map(ns, name)
            .await
            .map_err(|e| e.to_string())?
            .map(|c| config_map_data(&c)),
        Kind::Secret => objects
            .secret(ns, name)
            .await
            .map_err(|e| e.to_string())?
            .map(|s| secret_data(&s)),
    })
}
