//! A pod's `imagePullSecrets` as registry credentials, read as kubelet
//! reads them: a Secret of type `kubernetes.io/dockerconfigjson` (key
//! `.dockerconfigjson`) or `kubernetes.io/dockercfg` (key `.dockercfg`);
//! Secrets of other types give nothing. A Secret that cannot be read
//! (missing, forbidden, no API credential) is skipped with a warning event
//! and the pull goes on without it; one whose JSON is bad fails the pull.
//! Credentials never leave the executor's memory: no log, no event, no
//! status carries them.

use images::RegistryAuth;
use k8s_openapi::api::core::v1::{Pod, Secret};

use crate::events::ContainerEvent;
use crate::objects::PodObjects;

/// kubelet's Secret type and key for a Docker `config.json`.
const DOCKER_CONFIG_JSON: (&str, &str) = ("kubernetes.io/dockerconfigjson", ".dockerconfigjson");
/// kubelet's Secret type and key for a legacy `.dockercfg`.
const DOCKERCFG: (&str, &str) = ("kubernetes.io/dockercfg", ".dockercfg");

/// kubelet's event reason when some pull secrets cannot be read.
pub(crate) const FAILED_TO_RETRIEVE: &str = "FailedToRetrieveImagePullSecret";

/// The credentials of a pod's `imagePullSecrets`, in their order.
#[derive(Debug, Default)]
pub(crate) struct PullSecrets {
    /// To try before the agent's `--registry-config`.
    pub(crate) creds: Vec<RegistryAuth>,
    /// The pod event saying which Secrets could not be read.
    pub(crate) warning: Option<ContainerEvent>,
}

/// Reads the `imagePullSecrets` of `pod`; an error is a pull failure's
/// message (a Secret whose Docker config is bad).
pub(crate) async fn read(objects: &dyn PodObjects, pod: &Pod) -> Result<PullSecrets, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let names: Vec<String> = pod
        .spec
        .as_ref()
        .and_then(|s| s.image_pull_secrets.as_ref())
        .into_iter()
        .flatten()
        .map(|r| r.name.clone())
        .filter(|n| !n.is_empty())
        .collect();
    let mut out = PullSecrets::default();
    let mut failed = Vec::new();
    for name in names {
        match objects.secret(namespace, &name).await {
            Ok(Some(secret)) => out.creds.extend(credentials(&secret, &name)?),
            Ok(None) => failed.push(name),
            Err(e) => {
                tracing::info!(secret = %name, error = %e, "cannot read an image pull secret; the pull may not succeed");
                failed.push(name);
            }
        }
    }
    if !failed.is_empty() {
        out.warning = Some(ContainerEvent::new(
            "Warning",
            FAILED_TO_RETRIEVE,
            format!(
                "Unable to retrieve some image pull secrets ({}); attempting to pull the image may not succeed.",
                failed.join(", ")
            ),
            String::new(),
        ));
    }
    Ok(out)
}

/// The credentials in one Secret, by its type.
fn credentials(secret: &Secret, name: &str) -> Result<Vec<RegistryAuth>, String> {
    let type_ = secret.type_.as_deref().unwrap_or_default();
    let Some(key) = [DOCKER_CONFIG_JSON, DOCKERCFG]
        .iter()
        .find(|(t, _)| *t == type_)
        .map(|(_, k)| *k)
    else {
        return Ok(Vec::new());
    };
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.clone())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|s| s.clone().into_bytes())
        })
        .unwrap_or_default();
    if bytes.is_empty() {
        return Ok(Vec::new());
    }
    // The error names the Secret, never its content.
    RegistryAuth::from_docker_config(&bytes).map_err(|e| format!("image pull secret {name:?}: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;
    use crate::objects::StaticObjects;

    fn secret(name: &str, type_: &str, key: &str, json: &str) -> Secret {
        Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            type_: Some(type_.into()),
            data: Some(BTreeMap::from([(
                key.to_owned(),
                ByteString(json.as_bytes().to_vec()),
            )])),
            ..Default::default()
        }
    }

    fn pod(secrets: &[&str]) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"containers": [], "imagePullSecrets":
                secrets.iter().map(|s| serde_json::json!({"name": s})).collect::<Vec<_>>()}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn both_secret_types_give_credentials_in_order_and_missing_ones_warn() {
        let objects = StaticObjects::default();
        objects.set_secret(secret(
            "json",
            DOCKER_CONFIG_JSON.0,
            DOCKER_CONFIG_JSON.1,
            r#"{"auths": {"127.0.0.1:5000": {"username": "a", "password": "pw-a"}}}"#,
        ));
        objects.set_secret(secret(
            "cfg",
            DOCKERCFG.0,
            DOCKERCFG.1,
            r#"{"127.0.0.1:5000": {"username": "b", "password": "pw-b"}}"#,
        ));
        objects.set_secret(secret("opaque", "Opaque", DOCKER_CONFIG_JSON.1, "{}"));
        let got = read(&objects, &pod(&["cfg", "gone", "json", "opaque"]))
            .await
            .unwrap();
        assert_eq!(
            got.creds,
            vec![
                RegistryAuth::basic("127.0.0.1:5000", "b", "pw-b"),
                RegistryAuth::basic("127.0.0.1:5000", "a", "pw-a"),
            ]
        );
        let warning = got.warning.unwrap();
        assert_eq!(warning.reason, FAILED_TO_RETRIEVE);
        assert!(
            warning.message.starts_with(
                "Unable to retrieve some image pull secrets (gone); attempting to pull"
            ),
            "{}",
            warning.message
        );
        let none = read(&objects, &pod(&[])).await.unwrap();
        assert!(none.creds.is_empty() && none.warning.is_none());
    }

    #[tokio::test]
    async fn a_bad_docker_config_fails_without_showing_it() {
        let objects = StaticObjects::default();
        objects.set_secret(secret(
            "bad",
            DOCKER_CONFIG_JSON.0,
            DOCKER_CONFIG_JSON.1,
            r#"{"auths": {"h": {"auth": "not-base64-s3cret!"}}}"#,
        ));
        let err = read(&objects, &pod(&["bad"])).await.unwrap_err();
        assert!(err.contains("image pull secret \"bad\""), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
    }
}
