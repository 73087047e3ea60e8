//! The store on etcd v3 (`--etcd-servers`), as kube-apiserver keeps its state.
//!
//! Reads are served from memory, as from the other stores: a [`View`] that an etcd
//! watch keeps current (kube-apiserver's watch cache), so several processes on one etcd
//! each see all writes, theirs and the others'. A commit is one etcd txn whose compares
//! are the preconditions (`version = 0` for Absent, `mod_revision` for a
//! resourceVersion, `Check` ops alike), and it resolves once the watch has applied
//! its revision: a process reads its own writes.
//!
//! resourceVersion is etcd's revision, so every operation of one transaction shares
//! one resourceVersion. A watch from a revision older than the view's history is
//! served by an etcd watch of its own; below etcd's compaction it is Expired (410).

mod channel;
mod codec;
mod compactor;
mod feed;
mod keys;
mod own;
mod replay;
mod txn;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tls_tests;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Channel, Client};
use serde_json::Value;
use tokio::runtime::Handle;
use tower::util::BoxCloneSyncService;

use super::encryption::Encryption;
use super::engine::HISTORY;
use super::view::View;
use super::watcher::{Subscriber, Watcher};
use super::{Change, ChangeKind, Store, StoreError, StoreFuture, Stored, WriteOp};
use feed::Feed;

/// kube-apiserver's default `--etcd-prefix`.
pub const DEFAULT_PREFIX: &str = "/registry";

/// kube-apiserver's default `--etcd-compaction-interval`.
pub const DEFAULT_COMPACTION_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// kube-apiserver's default `--etcd-healthcheck-timeout`: how long the `etcd` readiness
/// check waits for its read.
pub const HEALTHCHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// How to reach etcd: kube-apiserver's `--etcd-*` flags.
#[derive(Debug, Clone)]
pub struct EtcdConfig {
    /// `--etcd-servers`: client URLs (`http://127.0.0.1:2379`, `https://...`).
    pub servers: Vec<String>,
    /// `--etcd-prefix`: where the objects live.
    pub prefix: String,
    /// `--etcd-cafile`: the CA that signed etcd's serving certificate.
    pub ca_file: Option<PathBuf>,
    /// `--etcd-certfile`: this client's certificate, for etcd's `--client-cert-auth`.
    pub cert_file: Option<PathBuf>,
    /// `--etcd-keyfile`: the key of `cert_file`.
    pub key_file: Option<PathBuf>,
    /// Changes kept in memory for watches that start in the past.
    pub history: usize,
    /// `--etcd-compaction-interval`: how often etcd is compacted to the revision of one
    /// interval earlier (kube-apiserver's default 5m); zero leaves compaction to others.
    pub compaction_interval: Duration,
}

impl EtcdConfig {
    /// Plain settings for `servers` with kube-apiserver's defaults otherwise.
    pub fn new(servers: Vec<String>) -> Self {
        Self {
            servers,
            prefix: DEFAULT_PREFIX.into(),
            ca_file: None,
            cert_file: None,
            key_file: None,
            history: HISTORY,
            compaction_interval: DEFAULT_COMPACTION_INTERVAL,
        }
    }
}

pub(super) fn storage(e: impl std::fmt::Display) -> StoreError {
    StoreError::Storage(e.to_string())
}

/// The store on etcd. See the module documentation.
pub struct EtcdStore {
    feed: Arc<Feed>,
    client: Client,
    /// The store's own runtime: the etcd connection and the watch feed live there, so
    /// they outlive whatever runtime a caller happens to use.
    runtime: Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl EtcdStore {
    /// Connects, loads everything under the prefix, and follows etcd from there.
    /// `encryption` (`--encryption-provider-config`) seals the resources it names.
    pub async fn connect(
        config: EtcdConfig,
        encryption: Option<Arc<Encryption>>,
    ) -> Result<Self, StoreError> {
        let (runtime, stop) = start_runtime()?;
        // Checks the URLs and TLS flags (an empty list among them) before anything is dialled.
        let channel = channel::Direct::new(&config, runtime.clone())?;
        let client = runtime
            .spawn(async move {
                let channel = Channel::Custom(BoxCloneSyncService::new(channel));
                Client::from_channel(channel, None).await
            })
            .await
            .map_err(storage)?
            .map_err(|e| StoreError::Storage(format!("cannot reach etcd: {e}")))?;
        let keys = keys::Keys::new(&config.prefix);
        let mut loader = client.clone();
        let (keys_, enc) = (keys.clone(), encryption.clone());
        let loaded = runtime
            .spawn(async move { feed::load(&mut loader, &keys_, enc.as_deref()).await })
            .await
            .map_err(storage)?
            .map_err(|e| {
                let servers = config.servers.join(",");
                StoreError::Storage(format!("cannot read etcd at {servers}: {e}"))
            })?;
        let rv = loaded.rv;
        let view = Arc::new(View::new(loaded, config.history));
        let feed = Arc::new(Feed::new(view, keys, encryption));
        feed.mark_loaded(rv);
        runtime.spawn(feed::follow(Arc::clone(&feed), client.clone(), rv));
        if !config.compaction_interval.is_zero() {
            let interval = config.compaction_interval;
            runtime.spawn(compactor::run(Arc::clone(&feed), client.clone(), interval));
        }
        Ok(Self {
            feed,
            client,
            runtime,
            stop: Some(stop),
        })
    }

    /// Compacts etcd's history up to `revision` (what kube-apiserver's compactor does
    /// every `--etcd-compaction-interval`); watches from before it are then Expired.
    pub async fn compact(&self, revision: u64) -> Result<(), StoreError> {
        let mut client = self.client.clone();
        let rev = i64::try_from(revision).map_err(storage)?;
        self.runtime
            .spawn(async move { client.compact(rev, None).await })
            .await
            .map_err(storage)?
            .map_err(storage)?;
        self.feed.view.forget_before(revision);
        Ok(())
    }

    async fn commit_ops(&self, mut ops: Vec<WriteOp>) -> Result<Vec<Arc<Change>>, StoreError> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let txn::Planned {
            txn: request,
            checks,
            writes,
            encoded,
        } = txn::plan(&self.feed.keys, self.feed.encryption.as_deref(), &ops)?;
        // Registered before the txn is sent, so the watch cannot deliver it first.
        let sent = self.feed.own.register(&mut ops, encoded);
        // The call runs on the caller's task; the connection it goes through lives on
        // the store's runtime.
        let response = self
            .client
            .kv_client()
            .txn(request)
            .await
            .map_err(storage)?;
        if !response.succeeded() {
            return Err(txn::failure(&checks, &response));
        }
        if !writes {
            return Ok(Vec::new());
        }
        let rev = response
            .header()
            .and_then(|h| u64::try_from(h.revision()).ok())
            .unwrap_or(0);
        match self.feed.applied(rev).await? {
            Some(changes) => Ok(changes),
            None => Ok(describe(&ops, &sent, rev)),
        }
    }
}

/// The changes of `ops` committed at `rev`, when the feed could not hand them over
/// (it reloaded after compaction in between): the puts as they were sent.
fn describe(ops: &[WriteOp], sent: &own::Sent<'_>, rev: u64) -> Vec<Arc<Change>> {
    let mut puts = sent.puts().iter();
    ops.iter()
        .filter_map(|op| {
            let (key, object, kind) = match op {
                WriteOp::Put { .. } => {
                    let (key, encoded) = puts.next()?;
                    (key, encoded.object(key, rev).ok()?, ChangeKind::Modified)
                }
                WriteOp::Delete { key, .. } => {
                    let mut object = Value::Object(Default::default());
                    object["metadata"] = serde_json::json!({});
                    super::engine::stamp(key, &mut object, rev).ok()?;
                    (key, object, ChangeKind::Deleted)
                }
                _ => return None,
            };
            Some(Arc::new(Change {
                rv: rev,
                kind,
                key: key.clone(),
                object: Arc::new(object),
                previous: None,
            }))
        })
        .collect()
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// A current-thread runtime on a thread of its own, ended by the returned sender.
fn start_runtime() -> Result<(Handle, tokio::sync::oneshot::Sender<()>), StoreError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(storage)?;
    let handle = runtime.handle().clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("apiserver-etcd".into())
        .spawn(move || {
            runtime.block_on(async {
                let _ = stopped.await;
            });
        })
        .map_err(storage)?;
    Ok((handle, stop))
}

impl Store for EtcdStore {
    fn commit(&self, ops: Vec<WriteOp>) -> StoreFuture<'_, Vec<Arc<Change>>> {
        Box::pin(self.commit_ops(ops))
    }
    fn get(&self, key: &str) -> Option<Arc<Value>> {
        self.feed.view.get(key)
    }
    fn list(&self, prefix: &str) -> (Vec<Arc<Value>>, u64) {
        self.feed.view.list(prefix)
    }
    fn list_containing(&self, prefix: &str, needle: &str) -> (Vec<Arc<Value>>, u64) {
        self.feed.view.list_containing(prefix, needle)
    }
    fn list_stored(&self, prefix: &str) -> (Vec<Stored>, u64) {
        self.feed.view.list_stored(prefix)
    }
    fn watch(&self, prefix: &str, from: u64) -> Result<Watcher, StoreError> {
        match self.feed.view.watch(prefix, from) {
            Err(StoreError::Expired { .. }) => {
                let live = Subscriber::new(prefix.to_string());
                self.runtime.spawn(replay::replay(
                    Arc::clone(&self.feed),
                    self.client.clone(),
                    prefix.to_string(),
                    from,
                    Arc::clone(&live),
                ));
                Ok(Watcher::new(Default::default(), live, from))
            }
            other => other,
        }
    }
    fn resource_version(&self) -> u64 {
        self.feed.view.resource_version()
    }
    fn get_meta(&self, key: &str) -> Option<Vec<u8>> {
        self.feed.view.get_meta(key)
    }
    fn changes_since(&self, prefix: &str, from: u64) -> Option<Vec<Arc<Change>>> {
        self.feed.view.changes_since(prefix, from)
    }
    fn health_check(&self) -> Option<&'static str> {
        Some("etcd")
    }
    /// kube-apiserver's etcd check: a read of `<prefix>/health` within
    /// [`HEALTHCHECK_TIMEOUT`]. A live connection is not enough (a stopped etcd keeps
    /// it open until the keep-alive gives up), nor is the watch (it is quiet while
    /// nothing is written): only an answer is.
    fn health(&self) -> super::StoreFuture<'_, ()> {
        Box::pin(async move {
            let key = format!("{}health", self.feed.keys.all());
            let mut kv = self.client.kv_client();
            match tokio::time::timeout(HEALTHCHECK_TIMEOUT, kv.get(key, None)).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(StoreError::Storage(format!(
                    "error getting data from etcd: {e}"
                ))),
                Err(_) => Err(StoreError::Storage(
                    "error getting data from etcd: context deadline exceeded".into(),
                )),
            }
        })
    }
}
