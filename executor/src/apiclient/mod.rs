//! The real [`PodObjects`]: the executor reads the ConfigMaps, Secrets and
//! ServiceAccount tokens its pods reference from the API shim itself, as node
//! `system:node:<agent hostname>`, with a credential that never travels through Mesos.
//!
//! # How the executor gets its credential
//!
//! 1. At start it makes a P-256 key pair in memory ([`identity`]).
//! 2. After every SUBSCRIBED it sends the *public* key to the scheduler in an executor
//!    `MESSAGE` ([`protocol`]). The Mesos master stamps the agent and executor ids on it,
//!    so the scheduler registers the key for that agent's node, and answers with a
//!    scheduler `MESSAGE`: the node name, the API's URL and its CA certificate.
//! 3. Each request carries a JWT the executor signs itself, valid five minutes
//!    ([`identity::TOKEN_LIFETIME`]); the shim checks it against the registered keys and
//!    authorizes it with the Node authorizer: only objects referenced by pods bound to
//!    that node.
//! 4. Mesos messages are best effort, so the executor sends its key until the
//!    scheduler answers ([`resend`]). A scheduler that subscribes (restarted, or a new
//!    leader) asks every executor of its tasks to send it again
//!    ([`protocol::REGISTER_AGAIN_MESSAGE`]): its API and stream key are new, and plain
//!    HTTP never answers an unknown key 401.
//! 5. A 401 (a scheduler that forgot the key), or an API that cannot be reached
//!    (it may now listen elsewhere), sends the key again and retries once.
//!
//! `MESOPOD_API_SERVER` with `MESOPOD_API_CA_FILE` (or `MESOPOD_API_CA`, inline PEM)
//! override the URL and CA the scheduler names, for agents that reach the API by
//! another address.
//!
//! # Contract
//!
//! As [`PodObjects`]'s: `Ok(None)` is a 404; errors never carry object data.

pub mod credential;
mod http;
pub mod identity;
pub mod protocol;
pub mod resend;

use std::sync::Arc;
use std::time::Duration;

use ::http::Method;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

pub use credential::Credential;

use crate::objects::{ObjectsError, ObjectsFuture, PodObjects, ServiceAccountToken};

/// How long a request waits for the scheduler to register the key.
pub const REGISTRATION_WAIT: Duration = Duration::from_secs(20);

/// The API shim as the executor's pods' objects source.
#[derive(Debug, Clone)]
pub struct ApiClient {
    credential: Arc<Credential>,
    /// `MESOPOD_API_SERVER` and its CA, over what the scheduler names.
    fixed: Option<(String, String)>,
    /// How long a request waits for the registration.
    wait: Duration,
}

/// Whether `s` is safe as one path segment: Kubernetes names are DNS labels or subdomains.
fn segment_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// The message of a Kubernetes Status body, or the code.
fn status_message(code: u16, body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("HTTP {code}"))
}

impl ApiClient {
    /// A client authenticating with `credential`; `fixed` (URL, CA PEM) overrides the
    /// API endpoint the scheduler names.
    pub fn new(credential: Arc<Credential>, fixed: Option<(String, String)>) -> Self {
        Self {
            credential,
            fixed,
            wait: REGISTRATION_WAIT,
        }
    }

    /// The same client waiting at most `wait` for the key's registration.
    pub fn with_registration_wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// `method path` as this node: the answer's body, `None` on 404.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        what: &str,
    ) -> Result<Option<bytes::Bytes>, ObjectsError> {
        let unavailable = |message: String| ObjectsError::Unavailable {
            what: what.to_owned(),
            message,
        };
        let body = body.map(|b| b.to_string().into_bytes());
        for attempt in 0..2 {
            let reg = self
                .credential
                .registration(self.wait)
                .await
                .ok_or_else(|| {
                    unavailable("the scheduler has not registered this executor's node key".into())
                })?;
            let (server, ca) = match &self.fixed {
                Some((s, ca)) => (s.as_str(), ca.as_str()),
                None => (reg.server.as_str(), reg.ca_pem.as_str()),
            };
            let endpoint = http::Endpoint::new(server, ca).map_err(unavailable)?;
            let token = self
                .credential
                .token(&reg.node)
                .map_err(|e| unavailable(e.to_string()))?;
            let (code, answer) = match endpoint
                .send(method.clone(), path, &token, body.clone())
                .await
            {
                Ok(answer) => answer,
                // A restarted scheduler may serve the API elsewhere: ask it again.
                Err(e) if attempt == 0 && self.fixed.is_none() => {
                    tracing::info!(error = %e, "the API is unreachable; registering again");
                    self.credential.forget();
                    continue;
                }
                Err(e) => return Err(unavailable(e)),
            };
            match code {
                200 | 201 => return Ok(Some(answer)),
                404 => return Ok(None),
                401 if attempt == 0 => {
                    tracing::info!("the API does not know this executor's key; registering again");
                    self.credential.forget();
                }
                403 => return Err(ObjectsError::Forbidden(status_message(code, &answer))),
                _ => return Err(unavailable(status_message(code, &answer))),
            }
        }
        Err(unavailable(
            "the API refused this executor's node credential (401)".into(),
        ))
    }

    async fn get<T: DeserializeOwned>(
        &self,
        plural: &str,
        ns: &str,
        name: &str,
    ) -> Result<Option<T>, ObjectsError> {
        let what = format!("{} \"{ns}/{name}\"", plural.trim_end_matches('s'));
        if !segment_ok(ns) || !segment_ok(name) {
            return Err(ObjectsError::Unavailable {
                what,
                message: "not a valid object name".into(),
            });
        }
        let path = format!("/api/v1/namespaces/{ns}/{plural}/{name}");
        let Some(body) = self.call(Method::GET, &path, None, &what).await? else {
            return Ok(None);
        };
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| ObjectsError::Unavailable {
                what,
                // serde's message names the field and position, never the value.
                message: format!("cannot decode the answer: {e}"),
            })
    }
}

/// The environment kubelet gives containers for the API server's Service, pointing at
/// the API shim `server` (`https://host:port`): `KUBERNETES_SERVICE_HOST`,
/// `KUBERNETES_SERVICE_PORT`, `KUBERNETES_SERVICE_PORT_HTTPS` and the Docker-link
/// style `KUBERNETES_PORT*` variables. Empty if `server` is no URL with a host.
pub fn kubernetes_service_env(server: &str) -> Vec<(String, String)> {
    let Ok(uri) = server.parse::<::http::Uri>() else {
        return Vec::new();
    };
    let Some(host) = uri
        .host()
        .map(|h| h.trim_start_matches('[').trim_end_matches(']'))
    else {
        return Vec::new();
    };
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let url = if host.contains(':') {
        format!("tcp://[{host}]:{port}")
    } else {
        format!("tcp://{host}:{port}")
    };
    let p = format!("KUBERNETES_PORT_{port}_TCP");
    [
        ("KUBERNETES_SERVICE_HOST".to_owned(), host.to_owned()),
        ("KUBERNETES_SERVICE_PORT".to_owned(), port.to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".to_owned(), port.to_string()),
        ("KUBERNETES_PORT".to_owned(), url.clone()),
        (p.clone(), url),
        (format!("{p}_PROTO"), "tcp".to_owned()),
        (format!("{p}_PORT"), port.to_string()),
        (format!("{p}_ADDR"), host.to_owned()),
    ]
    .into()
}

impl PodObjects for ApiClient {
    fn api_server(&self) -> Option<String> {
        match &self.fixed {
            Some((server, _)) => Some(server.clone()),
            None => self.credential.current().map(|r| r.server),
        }
    }

    fn report_metrics(&self, summary: Value) -> ObjectsFuture<'_, ()> {
        Box::pin(async move {
            let what = "this node's resource metrics".to_owned();
            let reg = self
                .credential
                .registration(self.wait)
                .await
                .ok_or_else(|| ObjectsError::Unavailable {
                    what: what.clone(),
                    message: "the scheduler has not registered this executor's node key".into(),
                })?;
            if !segment_ok(&reg.node) {
                return Err(ObjectsError::Unavailable {
                    what,
                    message: "the node name is no path segment".into(),
                });
            }
            let path = format!("/api/v1/nodes/{}/metrics", reg.node);
            self.call(Method::POST, &path, Some(summary), &what)
                .await
                .map(drop)
        })
    }

    fn config_map<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> ObjectsFuture<'a, Option<ConfigMap>> {
        Box::pin(self.get("configmaps", namespace, name))
    }

    fn secret<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> ObjectsFuture<'a, Option<Secret>> {
        Box::pin(self.get("secrets", namespace, name))
    }

    fn service_account_token<'a>(
        &'a self,
        pod: &'a Pod,
        audience: Option<&'a str>,
        expiration_seconds: i64,
    ) -> ObjectsFuture<'a, ServiceAccountToken> {
        Box::pin(async move {
            let meta = &pod.metadata;
            let ns = meta.namespace.as_deref().unwrap_or("default");
            let pod_name = meta.name.as_deref().unwrap_or_default();
            let account = pod
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.as_deref())
                .unwrap_or("default");
            let what = format!("a token for service account \"{ns}/{account}\"");
            let unavailable = |message: String| ObjectsError::Unavailable {
                what: what.clone(),
                message,
            };
            if !segment_ok(ns) || !segment_ok(account) {
                return Err(unavailable("not a valid object name".into()));
            }
            let mut spec = json!({
                "expirationSeconds": expiration_seconds,
                "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": pod_name,
                                   "uid": meta.uid.as_deref().unwrap_or_default()},
            });
            if let Some(aud) = audience {
                spec["audiences"] = json!([aud]);
            }
            let request = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec});
            let path = format!("/api/v1/namespaces/{ns}/serviceaccounts/{account}/token");
            let body = self
                .call(Method::POST, &path, Some(request), &what)
                .await?
                .ok_or_else(|| unavailable(format!("service account \"{account}\" not found")))?;
            let answer: Value = serde_json::from_slice(&body)
                .map_err(|e| unavailable(format!("cannot decode the answer: {e}")))?;
            let status = &answer["status"];
            match (
                status["token"].as_str(),
                status["expirationTimestamp"].as_str(),
            ) {
                (Some(token), Some(exp)) => Ok(ServiceAccountToken {
                    token: token.to_owned(),
                    expiration_timestamp: exp.to_owned(),
                }),
                _ => Err(unavailable("the answer has no token".into())),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_service_env_points_at_the_shim() {
        let env = kubernetes_service_env("https://127.0.0.1:6443");
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("KUBERNETES_SERVICE_HOST"), Some("127.0.0.1"));
        assert_eq!(get("KUBERNETES_SERVICE_PORT"), Some("6443"));
        assert_eq!(get("KUBERNETES_PORT"), Some("tcp://127.0.0.1:6443"));
        assert_eq!(get("KUBERNETES_PORT_6443_TCP_ADDR"), Some("127.0.0.1"));
        assert_eq!(kubernetes_service_env("https://[::1]")[0].1, "::1");
        assert!(kubernetes_service_env("not a url").is_empty());
    }
}
