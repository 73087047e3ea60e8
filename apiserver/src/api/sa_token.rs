//! ServiceAccount admission's token volume, and the `kube-root-ca.crt` ConfigMap it
//! projects, as kube-apiserver (and its root-ca-cert-publisher) make them.
//!
//! Off until the embedder calls [`Api::enable_service_account_token_volume`] with the
//! API's CA: it does so only where the shim signs ServiceAccount tokens (HTTPS with a
//! signing key), since the volume is worthless without them. Then:
//! - every namespace, existing and new, holds the ConfigMap `kube-root-ca.crt` with
//!   `ca.crt`;
//! - a pod created without `automountServiceAccountToken: false` (on the pod, or else
//!   on its ServiceAccount) gets the projected volume `kube-api-access-<5 chars>`
//!   (token, `ca.crt`, `namespace`) mounted read-only at [`TOKEN_MOUNT_PATH`] in every
//!   container that mounts nothing there itself.

use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapProjection, DownwardAPIProjection, DownwardAPIVolumeFile,
    ObjectFieldSelector, Pod, ProjectedVolumeSource, ServiceAccountTokenProjection, Volume,
    VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use super::Api;
use super::objects::{stamp_new, to_value};
use crate::error::ApiError;
use crate::resource::Resource;
use crate::store::{Precondition, WriteOp};

/// Where the token volume is mounted.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The ConfigMap holding the API's CA in every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
/// The token volume's name prefix.
pub const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";
/// The projected token's lifetime: kube-apiserver's 3607 s (an hour and 7 s, so that
/// clients that refresh at 80% of a "1 hour" token are told apart).
pub const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

/// The letters Kubernetes' name generator draws from (no vowels, no look-alikes).
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn random_suffix() -> String {
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect()
}

fn token_volume(name: String) -> Volume {
    let namespace = DownwardAPIVolumeFile {
        path: "namespace".into(),
        field_ref: Some(ObjectFieldSelector {
            api_version: Some("v1".into()),
            field_path: "metadata.namespace".into(),
        }),
        ..Default::default()
    };
    let sources = vec![
        VolumeProjection {
            service_account_token: Some(ServiceAccountTokenProjection {
                expiration_seconds: Some(TOKEN_EXPIRATION_SECONDS),
                path: "token".into(),
                audience: None,
            }),
            ..Default::default()
        },
        VolumeProjection {
            config_map: Some(ConfigMapProjection {
                name: ROOT_CA_CONFIGMAP.into(),
                items: Some(vec![k8s_openapi::api::core::v1::KeyToPath {
                    key: "ca.crt".into(),
                    path: "ca.crt".into(),
                    mode: None,
                }]),
                optional: None,
            }),
            ..Default::default()
        },
        VolumeProjection {
            downward_api: Some(DownwardAPIProjection {
                items: Some(vec![namespace]),
            }),
            ..Default::default()
        },
    ];
    Volume {
        name,
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(0o644),
            sources: Some(sources),
        }),
        ..Default::default()
    }
}

impl Api {
    /// Turns the token volume on, with `ca_pem` as `kube-root-ca.crt`'s `ca.crt`, and
    /// publishes that ConfigMap in every namespace that lacks it.
    ///
    /// # Errors
    /// The store failed.
    pub async fn enable_service_account_token_volume(
        &self,
        ca_pem: String,
    ) -> Result<(), ApiError> {
        let _ = self.inner.token_ca.set(ca_pem);
        let (all, _) = self.store().list(&Resource::Namespaces.prefix(None));
        for ns in all {
            let name = ns
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if name.is_empty() || ns.pointer("/metadata/deletionTimestamp").is_some() {
                continue;
            }
            if let Some(op) = self.root_ca_config_map(name)? {
                match self.commit(vec![op]).await {
                    Ok(_)
                    | Err(ApiError::AlreadyExists { .. })
                    | Err(ApiError::Conflict { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// The create of `ns`'s `kube-root-ca.crt`, when the token volume is on and it is missing.
    pub(crate) fn root_ca_config_map(&self, ns: &str) -> Result<Option<WriteOp>, ApiError> {
        let Some(ca) = self.inner.token_ca.get() else {
            return Ok(None);
        };
        let key = Resource::ConfigMaps.key(ns, ROOT_CA_CONFIGMAP);
        if self.get_value(&key).is_some() {
            return Ok(None);
        }
        let mut cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(ROOT_CA_CONFIGMAP.into()),
                namespace: Some(ns.into()),
                annotations: Some(
                    [(
                        "kubernetes.io/description".to_owned(),
                        "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.".to_owned(),
                    )]
                    .into(),
                ),
                ..Default::default()
            },
            data: Some([("ca.crt".to_owned(), ca.clone())].into()),
            ..Default::default()
        };
        stamp_new(&mut cm.metadata, self.now());
        Ok(Some(WriteOp::Put {
            key,
            object: to_value(&cm)?,
            precondition: Precondition::Absent,
        }))
    }

    /// Adds the token volume to a pod being created, unless the volume is off or the
    /// pod (else its ServiceAccount, `account`'s stored JSON) opts out.
    pub(crate) fn add_token_volume(&self, pod: &mut Pod, account: Option<&Value>) {
        if self.inner.token_ca.get().is_none() {
            return;
        }
        let Some(spec) = pod.spec.as_mut() else {
            return;
        };
        let automount = spec.automount_service_account_token.or_else(|| {
            account
                .and_then(|a| a.get("automountServiceAccountToken"))
                .and_then(Value::as_bool)
        });
        if automount == Some(false) {
            return;
        }
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        if volumes
            .iter()
            .any(|v| v.name.starts_with(TOKEN_VOLUME_PREFIX))
        {
            return;
        }
        let name = format!("{TOKEN_VOLUME_PREFIX}{}", random_suffix());
        volumes.push(token_volume(name.clone()));
        let containers = spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten());
        for c in containers {
            let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
            if mounts.iter().any(|m| m.mount_path == TOKEN_MOUNT_PATH) {
                continue;
            }
            mounts.push(VolumeMount {
                name: name.clone(),
                mount_path: TOKEN_MOUNT_PATH.into(),
                read_only: Some(true),
                ..Default::default()
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn pod(extra: Value) -> Pod {
        let mut p = json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "initContainers": [{"name": "i", "image": "i"}]}});
        if let (Some(spec), Value::Object(m)) = (p["spec"].as_object_mut(), extra) {
            spec.extend(m);
        }
        serde_json::from_value(p).unwrap()
    }

    #[tokio::test]
    async fn pods_get_the_token_volume_once_it_is_on_unless_they_opt_out() {
        let api = Api::in_memory().await.unwrap();
        api.create_pod("default", pod(json!({}))).await.unwrap();
        let off = api.get_pod("default", "p").unwrap();
        assert!(
            off.spec.unwrap().volumes.unwrap_or_default().is_empty(),
            "off by default"
        );

        api.enable_service_account_token_volume("-----BEGIN CERTIFICATE-----\n".into())
            .await
            .unwrap();
        let cm = api
            .get_raw(Resource::ConfigMaps, "kube-system", ROOT_CA_CONFIGMAP)
            .unwrap();
        assert_eq!(cm["data"]["ca.crt"], "-----BEGIN CERTIFICATE-----\n");
        let mut p = pod(json!({}));
        p.metadata.name = Some("q".into());
        let created = api.create_pod("default", p).await.unwrap();
        let spec = created.spec.unwrap();
        let volumes = spec.volumes.unwrap();
        assert_eq!(volumes.len(), 1);
        let v = serde_json::to_value(&volumes[0]).unwrap();
        let name = v["name"].as_str().unwrap();
        assert!(
            name.starts_with("kube-api-access-") && name.len() == 21,
            "{name}"
        );
        assert_eq!(
            v["projected"]["sources"],
            json!([
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ])
        );
        for c in spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
        {
            let m = &c.volume_mounts.as_ref().unwrap()[0];
            assert_eq!(
                (m.name.as_str(), m.mount_path.as_str(), m.read_only),
                (name, TOKEN_MOUNT_PATH, Some(true))
            );
        }

        let mut opt_out = pod(json!({"automountServiceAccountToken": false}));
        opt_out.metadata.name = Some("r".into());
        let created = api.create_pod("default", opt_out).await.unwrap();
        assert!(created.spec.unwrap().volumes.unwrap_or_default().is_empty());
    }
}
