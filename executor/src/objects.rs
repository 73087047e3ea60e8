//! The Kubernetes objects a pod references, as the executor reads them.
//!
//! Volumes (`configMap`, `secret`, `projected`), environment sources
//! (`configMapKeyRef`, `secretKeyRef`, `envFrom`), `imagePullSecrets` and
//! projected ServiceAccount tokens all need objects that live in the API
//! shim. The executor fetches them itself, over HTTPS, with a credential that
//! lets it read only what pods bound to its agent reference (kubelet's Node
//! authorizer is the model). They never travel through Mesos.
//!
//! # Contract
//!
//! - [`PodObjects`] is the one door to those objects. Production uses the
//!   API-shim client; tests may use [`StaticObjects`].
//! - `Ok(None)` means the object does not exist (404), so `optional: true`
//!   can be honoured; every other failure is an [`ObjectsError`] whose
//!   message is safe to show (it never carries secret data).
//! - Implementations are cheap to clone behind an `Arc` and safe to call
//!   from many pods at once.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};

/// A boxed future, so that [`PodObjects`] can be used as `dyn`.
pub type ObjectsFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ObjectsError>> + Send + 'a>>;

/// Why an object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectsError {
    /// The API shim refused the executor's credential for this object
    /// (403: no pod on this node references it).
    #[error("{0}")]
    Forbidden(String),
    /// The API shim could not be reached or answered with an error.
    #[error("cannot read {what} from the API server: {message}")]
    Unavailable {
        /// What was asked for, like `secret "ns/name"`.
        what: String,
        /// The transport or server error.
        message: String,
    },
    /// No API client is configured for this executor.
    #[error("this executor has no API server credential, so it cannot read {0}")]
    NotConfigured(String),
}

/// A projected ServiceAccount token, as TokenRequest returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccountToken {
    /// The signed JWT.
    pub token: String,
    /// When it expires, as RFC 3339 (`status.expirationTimestamp`).
    pub expiration_timestamp: String,
}

/// Reads the objects a pod references.
pub trait PodObjects: Send + Sync + std::fmt::Debug {
    /// The ConfigMap `namespace/name`, or `None` when it does not exist.
    fn config_map<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> ObjectsFuture<'a, Option<ConfigMap>>;

    /// The Secret `namespace/name`, or `None` when it does not exist.
    fn secret<'a>(&'a self, namespace: &'a str, name: &'a str)
    -> ObjectsFuture<'a, Option<Secret>>;

    /// A token for the pod's ServiceAccount, bound to `pod`, for
    /// `audience` (the API server's own when `None`), valid for
    /// `expiration_seconds` (Kubernetes' default is 3607 for projected
    /// volumes).
    fn service_account_token<'a>(
        &'a self,
        pod: &'a Pod,
        audience: Option<&'a str>,
        expiration_seconds: i64,
    ) -> ObjectsFuture<'a, ServiceAccountToken>;

    /// The API server's URL as containers should reach it (for
    /// `KUBERNETES_SERVICE_HOST`/`PORT`, see
    /// [`crate::apiclient::kubernetes_service_env`]), if known.
    fn api_server(&self) -> Option<String> {
        None
    }

    /// Pushes this node's resource samples (`summary`, see [`crate::metrics`])
    /// to the API server, as the node.
    fn report_metrics(&self, summary: serde_json::Value) -> ObjectsFuture<'_, ()> {
        drop(summary);
        Box::pin(async { Err(ObjectsError::NotConfigured("resource metrics".into())) })
    }
}

/// A shared handle to the objects source.
pub type SharedObjects = Arc<dyn PodObjects>;

/// The source for an executor without an API credential: every read fails
/// with [`ObjectsError::NotConfigured`], so a pod that needs objects fails
/// with a clear reason instead of running without them.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObjects;

impl PodObjects for NoObjects {
    fn config_map<'a>(
        &'a self,
        ns: &'a str,
        name: &'a str,
    ) -> ObjectsFuture<'a, Option<ConfigMap>> {
        Box::pin(async move {
            Err(ObjectsError::NotConfigured(format!(
                "configmap \"{ns}/{name}\""
            )))
        })
    }

    fn secret<'a>(&'a self, ns: &'a str, name: &'a str) -> ObjectsFuture<'a, Option<Secret>> {
        Box::pin(async move {
            Err(ObjectsError::NotConfigured(format!(
                "secret \"{ns}/{name}\""
            )))
        })
    }

    fn service_account_token<'a>(
        &'a self,
        _pod: &'a Pod,
        _audience: Option<&'a str>,
        _expiration_seconds: i64,
    ) -> ObjectsFuture<'a, ServiceAccountToken> {
        Box::pin(async move {
            Err(ObjectsError::NotConfigured(
                "a service account token".to_owned(),
            ))
        })
    }
}

/// Objects held in memory, for tests of the executor alone. Changing them
/// with [`StaticObjects::set_config_map`] is how a test shows an update
/// reaching a mounted volume.
#[derive(Debug, Default, Clone)]
pub struct StaticObjects {
    inner: Arc<Mutex<StaticInner>>,
}

#[derive(Debug, Default)]
struct StaticInner {
    config_maps: BTreeMap<(String, String), ConfigMap>,
    secrets: BTreeMap<(String, String), Secret>,
    token: Option<ServiceAccountToken>,
}

impl StaticObjects {
    /// Adds or replaces a ConfigMap (namespace and name from its metadata).
    pub fn set_config_map(&self, cm: ConfigMap) {
        let key = key(&cm.metadata);
        self.lock().config_maps.insert(key, cm);
    }

    /// Adds or replaces a Secret (namespace and name from its metadata).
    pub fn set_secret(&self, secret: Secret) {
        let key = key(&secret.metadata);
        self.lock().secrets.insert(key, secret);
    }

    /// The token every `service_account_token` call returns.
    pub fn set_token(&self, token: ServiceAccountToken) {
        self.lock().token = Some(token);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StaticInner> {
        // A test that panicked while holding the lock has already failed.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned()),
        meta.name.clone().unwrap_or_default(),
    )
}

impl PodObjects for StaticObjects {
    fn config_map<'a>(
        &'a self,
        ns: &'a str,
        name: &'a str,
    ) -> ObjectsFuture<'a, Option<ConfigMap>> {
        let found = self
            .lock()
            .config_maps
            .get(&(ns.to_owned(), name.to_owned()))
            .cloned();
        Box::pin(async move { Ok(found) })
    }

    fn secret<'a>(&'a self, ns: &'a str, name: &'a str) -> ObjectsFuture<'a, Option<Secret>> {
        let found = self
            .lock()
            .secrets
            .get(&(ns.to_owned(), name.to_owned()))
            .cloned();
        Box::pin(async move { Ok(found) })
    }

    fn service_account_token<'a>(
        &'a self,
        _pod: &'a Pod,
        _audience: Option<&'a str>,
        _expiration_seconds: i64,
    ) -> ObjectsFuture<'a, ServiceAccountToken> {
        let token = self.lock().token.clone();
        Box::pin(async move {
            token.ok_or_else(|| ObjectsError::NotConfigured("a service account token".to_owned()))
        })
    }
}
