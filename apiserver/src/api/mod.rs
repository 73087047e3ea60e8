//! The typed in-process API: the one path every write takes, from HTTP handlers and from
//! the framework alike, so both share validation, defaulting and the store.

mod collection;
mod event_aggregate;
mod event_spam;
mod events;
mod eviction;
mod fence;
pub(crate) mod finalizers;
mod kinds;
mod leases;
mod limit_ranger;
mod logs;
mod maintenance;
mod namespaces;
pub(crate) mod node_scope;
mod nodes;
mod objects;
mod pod_defaults;
mod pod_deletion;
mod pod_security;
mod pod_status;
mod pods;
mod preemption;
mod priority;
mod quota_admission;
mod revisions;
pub mod sa_token;
mod scale_targets;
mod watch;
mod workloads;

use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;

use crate::clock::{Clock, SystemClock};
use crate::decode::FieldValidation;
use crate::error::ApiError;
use crate::logs::{LogSource, NoLogs};
use crate::store::{Change, MemoryStore, RedbStore, Store, WriteOp};

pub use collection::MetadataEdit;
pub use events::EVENT_TTL;
pub use fence::{Fence, Renewal};
pub(crate) use kinds::{Deleted, Endpoint, Version, decode_kind_body};
pub use logs::LogOptions;
pub use maintenance::{
    MAINTENANCE_CORDON_ANNOTATION, MAINTENANCE_END_ANNOTATION, MAINTENANCE_START_ANNOTATION,
    MAINTENANCE_TAINT, MaintenanceWindow, under_maintenance,
};
pub use namespaces::SYSTEM_NAMESPACES;
pub(crate) use objects::typed;
pub use objects::{k8s_time, system_time};
pub(crate) use pod_defaults::default_template_spec;
pub use pod_status::{PodHead, StatusWrite};
pub use pods::{Binding, Finalized};
pub use watch::{EventKind, ObjectEvent, ObjectStream, RawStream};

/// A list answer: the items and the resourceVersion to watch from.
#[derive(Debug, Clone)]
pub struct ObjectList<T> {
    /// The items, in key order (namespace, then name).
    pub items: Vec<T>,
    /// The store's resourceVersion at the read.
    pub resource_version: u64,
}

/// Options of a write that arrives over HTTP (the typed API uses the defaults).
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
}

struct Inner {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    logs: Arc<dyn LogSource>,
    /// Flips to true when the server shuts down, ending HTTP watches (which would
    /// otherwise hold a graceful shutdown open for as long as a client watches).
    closing: tokio::sync::watch::Sender<bool>,
    /// Who the embedder's own pod status and binding writes are authorized as, once
    /// authorization is on (`crate::auth::in_process`).
    in_process: std::sync::OnceLock<crate::auth::InProcess>,
    /// The API's CA once ServiceAccount token volumes are on (`sa_token`).
    token_ca: std::sync::OnceLock<String>,
    /// Recorded events' rate limits (`record_event`).
    event_spam: event_spam::SpamFilter,
    /// Events alike but for their message (`record_event`).
    event_aggregator: event_aggregate::Aggregator,
    /// Where `pods/exec`, `attach` and `portforward` go, once the embedder set it.
    streams: std::sync::OnceLock<Arc<dyn crate::streams::ContainerStreams>>,
    /// Pod Security Admission's configuration, once the embedder set one (else
    /// Kubernetes' default: privileged everywhere, no exemptions).
    pod_security: std::sync::OnceLock<crate::pod_security::PodSecurity>,
    /// One quota charge at a time per namespace (`quota_admission`).
    quota_turns: quota_admission::Turns,
    /// The executors' latest resource samples (`crate::metrics`), in memory only.
    metrics: crate::metrics::MetricsStore,
}

/// The handle to the API: cheap to clone, `Send + Sync`.
#[derive(Clone)]
pub struct Api {
    inner: Arc<Inner>,
    /// Set on the scheduler's handle under leader election: its writes need the lease.
    fence: Option<Arc<Fence>>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("resource_version", &self.resource_version())
            .finish()
    }
}

impl Api {
    /// An API over `store`, reading time from `clock` and logs from `logs`. Creates the
    /// namespaces that always exist (`default`, `kube-system`) and the system
    /// PriorityClasses if they are missing.
    pub async fn start(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        logs: Arc<dyn LogSource>,
    ) -> Result<Self, ApiError> {
        let api = Self {
            inner: Arc::new(Inner {
                store,
                clock,
                logs,
                closing: tokio::sync::watch::Sender::new(false),
                in_process: std::sync::OnceLock::new(),
                token_ca: std::sync::OnceLock::new(),
                event_spam: event_spam::SpamFilter::default(),
                event_aggregator: event_aggregate::Aggregator::default(),
                streams: std::sync::OnceLock::new(),
                pod_security: std::sync::OnceLock::new(),
                quota_turns: quota_admission::Turns::default(),
                metrics: crate::metrics::MetricsStore::default(),
            }),
            fence: None,
        };
        api.ensure_system_namespaces().await?;
        api.ensure_system_priority_classes().await?;
        Ok(api)
    }

    /// The default setup: the durable store in `data_dir`, the system clock, `logs`.
    pub async fn open(
        data_dir: impl AsRef<Path>,
        logs: Arc<dyn LogSource>,
    ) -> Result<Self, ApiError> {
        let store = RedbStore::open(data_dir).map_err(ApiError::from_store)?;
        Self::start(Arc::new(store), Arc::new(SystemClock), logs).await
    }

    /// An in-memory API with the system clock and no log source, for tests.
    pub async fn in_memory() -> Result<Self, ApiError> {
        let store = MemoryStore::new().map_err(ApiError::from_store)?;
        Self::start(Arc::new(store), Arc::new(SystemClock), Arc::new(NoLogs)).await
    }

    /// Now, by the injected clock.
    pub fn now(&self) -> SystemTime {
        self.inner.clock.now()
    }

    /// The executors' resource samples behind `metrics.k8s.io`.
    pub fn metrics(&self) -> &crate::metrics::MetricsStore {
        &self.inner.metrics
    }

    /// The store's current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.inner.store.resource_version()
    }

    /// The store's readiness check, as `/readyz` lists it: its name (`etcd`) and
    /// whether the store answered within a bounded time (why not, if not); `None` for a
    /// store inside this process.
    pub async fn store_readiness(&self) -> Option<(&'static str, Result<(), String>)> {
        let name = self.inner.store.health_check()?;
        Some((
            name,
            self.inner.store.health().await.map_err(|e| e.to_string()),
        ))
    }

    /// Stores `value` under `key` in the side key-value space (durable like objects, no
    /// resourceVersion, no watch). For a client's own small state.
    pub async fn put_meta(&self, key: &str, value: Vec<u8>) -> Result<(), ApiError> {
        self.commit(vec![WriteOp::PutMeta {
            key: key.to_string(),
            value,
        }])
        .await
        .map(|_| ())
    }

    /// Reads a value written by [`Api::put_meta`].
    pub fn get_meta(&self, key: &str) -> Option<Vec<u8>> {
        self.inner.store.get_meta(key)
    }

    /// Ends every open HTTP watch (clients reconnect elsewhere or later); called by
    /// [`crate::serve_with_shutdown`] when its shutdown signal fires.
    pub fn close_watches(&self) {
        self.inner.closing.send_replace(true);
    }

    /// Resolves once [`Api::close_watches`] was called.
    pub(crate) async fn watches_closed(&self) {
        let mut rx = self.inner.closing.subscribe();
        let _ = rx.wait_for(|closing| *closing).await;
    }

    pub(crate) fn in_process(&self) -> &std::sync::OnceLock<crate::auth::InProcess> {
        &self.inner.in_process
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub(crate) fn log_source(&self) -> &Arc<dyn LogSource> {
        &self.inner.logs
    }

    /// Serves `pods/exec`, `pods/attach` and `pods/portforward` through `streams` (set
    /// once; without it they answer 503).
    pub fn set_container_streams(&self, streams: Arc<dyn crate::streams::ContainerStreams>) {
        let _ = self.inner.streams.set(streams);
    }

    /// Admits pods by `config` (kube-apiserver's `--admission-control-config-file`
    /// PodSecurity entry); set once, before serving. Without it every namespace
    /// defaults to `privileged`.
    pub fn set_pod_security(&self, config: crate::pod_security::PodSecurity) {
        let _ = self.inner.pod_security.set(config);
    }

    pub(crate) fn pod_security(&self) -> &crate::pod_security::PodSecurity {
        static DEFAULT: std::sync::OnceLock<crate::pod_security::PodSecurity> =
            std::sync::OnceLock::new();
        self.inner
            .pod_security
            .get()
            .unwrap_or_else(|| DEFAULT.get_or_init(Default::default))
    }

    pub(crate) fn container_streams(&self) -> Option<&Arc<dyn crate::streams::ContainerStreams>> {
        self.inner.streams.get()
    }

    pub(crate) async fn commit(&self, ops: Vec<WriteOp>) -> Result<Vec<Arc<Change>>, ApiError> {
        if let Some(fence) = &self.fence {
            return fence.commit(self, ops).await;
        }
        self.inner
            .store
            .commit(ops)
            .await
            .map_err(ApiError::from_store)
    }

    pub(crate) fn get_value(&self, key: &str) -> Option<Arc<Value>> {
        self.inner.store.get(key)
    }
}

/// How often a write whose precondition lost a race with another writer is retried with a
/// fresh read before giving up with 409. Races here are between in-process writers on one
/// object, so a handful of rounds is plenty.
const RETRIES: usize = 8;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn the_api_handle_is_cheap_to_clone_and_shareable_across_tasks() {
        fn shareable<T: Clone + Send + Sync + 'static>() {}
        shareable::<super::Api>();
    }

    #[tokio::test]
    async fn system_namespaces_exist_from_the_start_and_cannot_be_deleted() {
        let api = super::Api::in_memory().await.unwrap();
        let names: Vec<_> = api
            .list_namespaces("", "")
            .unwrap()
            .items
            .into_iter()
            .filter_map(|n| n.metadata.name)
            .collect();
        assert_eq!(names, ["default", "kube-public", "kube-system"]);
        let err = api.delete_namespace("kube-system").await.unwrap_err();
        assert_eq!(err.code_and_reason(), (403, "Forbidden"));
    }
}
