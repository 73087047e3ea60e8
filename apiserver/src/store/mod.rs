//! The object store: one global resourceVersion, transactional writes, group commit and a
//! change stream that watches fan out from.
//!
//! Objects are Kubernetes objects as JSON values under string keys (`pods/NS/NAME`,
//! `nodes/NAME`, ...). The store stamps `metadata.resourceVersion` on every object it
//! writes; nothing else in an object means anything to it. It holds them as JSON text
//! ([`Stored`]) and decodes on read; each watch has its own queue of the changes under
//! its prefix, and is cut off with [`StoreError::Expired`] if it lets too many pile up.
//!
//! # Guarantees
//! - Every write gets the next value of one global counter, so a resourceVersion orders
//!   all changes of all kinds.
//! - A transaction ([`Store::commit`]) applies all of its operations or none; a failed
//!   precondition leaves the store exactly as it was.
//! - A write is visible (to `get`, `list` and watchers) only after it is durable, and
//!   watchers see changes in resourceVersion order without gaps: a watcher that falls
//!   behind or asks for a resourceVersion older than the bounded history gets
//!   [`StoreError::Expired`] instead of a silent gap.
//!
//! Both implementations ([`MemoryStore`], [`RedbStore`]) share one engine (state,
//! history, fan-out, group commit); they differ only in what a committed batch is
//! written to.

pub mod encryption;
mod engine;
mod etcd;
mod memory;
mod redb_store;
mod view;
mod watcher;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

pub use etcd::{
    DEFAULT_COMPACTION_INTERVAL as DEFAULT_ETCD_COMPACTION_INTERVAL,
    DEFAULT_PREFIX as DEFAULT_ETCD_PREFIX, EtcdConfig, EtcdStore,
    HEALTHCHECK_TIMEOUT as ETCD_HEALTHCHECK_TIMEOUT,
};
pub use memory::MemoryStore;
pub use redb_store::{DB_FILE, RedbStore};
pub use watcher::Watcher;

/// A boxed future returned by the store's asynchronous methods.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// The store's contract. See the module documentation for the guarantees.
pub trait Store: Send + Sync + 'static {
    /// Applies `ops` atomically and durably; resolves once the batch holding them is
    /// committed. Returns one [`Change`] per object operation, in order.
    fn commit(&self, ops: Vec<WriteOp>) -> StoreFuture<'_, Vec<Arc<Change>>>;
    /// The object under `key`, if any.
    fn get(&self, key: &str) -> Option<Arc<Value>>;
    /// All objects whose key starts with `prefix`, in key order, with the store's
    /// resourceVersion at the moment of the read (where a watch continues from).
    fn list(&self, prefix: &str) -> (Vec<Arc<Value>>, u64);
    /// [`Store::list`] of only the objects whose JSON text contains `needle`: objects
    /// are held encoded, and a sweep looking for a rare field (a deletion timestamp)
    /// should not decode every object to find the few that have it.
    fn list_containing(&self, prefix: &str, needle: &str) -> (Vec<Arc<Value>>, u64);
    /// [`Store::list`] as the store holds the objects: encoded, for a sweep that reads a
    /// few fields of every object and should not build each one's whole JSON tree.
    fn list_stored(&self, prefix: &str) -> (Vec<Stored>, u64);
    /// The changes under `prefix` after resourceVersion `from`: first those still in the
    /// history, then live ones. [`StoreError::Expired`] if `from` is older than the history.
    fn watch(&self, prefix: &str, from: u64) -> Result<Watcher, StoreError>;
    /// The resourceVersion of the last committed change.
    fn resource_version(&self) -> u64;
    /// A value of the side key-value space (see [`WriteOp::PutMeta`]).
    fn get_meta(&self, key: &str) -> Option<Vec<u8>>;
    /// The changes under `prefix` after resourceVersion `from`, if the store still
    /// remembers all of them (a paged list rebuilds its first page's state from them);
    /// `None` if it does not reach back that far.
    fn changes_since(&self, prefix: &str, from: u64) -> Option<Vec<Arc<Change>>> {
        let _ = (prefix, from);
        None
    }
    /// The name of the readiness check [`Store::health`] answers (`etcd`, as
    /// kube-apiserver's `/readyz` names its store's), or `None` for a store inside this
    /// process, which is reachable while the process runs.
    fn health_check(&self) -> Option<&'static str> {
        None
    }
    /// Whether the store answers now, within a bounded time: resolves `Err` when it is
    /// unreachable. Reads are served from memory whatever this says; writes are not.
    fn health(&self) -> StoreFuture<'_, ()> {
        Box::pin(async { Ok(()) })
    }
}

/// What must hold for an operation to apply; checked inside the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Nothing.
    None,
    /// The key must not exist (create).
    Absent,
    /// The key must exist.
    Present,
    /// The key must exist with this resourceVersion (optimistic concurrency).
    ResourceVersion(u64),
}

/// One operation of a transaction.
#[derive(Debug, Clone)]
pub enum WriteOp {
    /// Writes `object` (a JSON object with `metadata`) under `key`.
    Put {
        /// Where.
        key: String,
        /// The object; its `metadata.resourceVersion` is overwritten by the store.
        object: Value,
        /// What must hold first.
        precondition: Precondition,
    },
    /// Removes `key`; the key must exist.
    Delete {
        /// Where.
        key: String,
        /// What must hold first (besides existence).
        precondition: Precondition,
    },
    /// Writes nothing; fails the transaction unless `precondition` holds for `key`
    /// (e.g. "the namespace exists" when creating a pod in it).
    Check {
        /// Where.
        key: String,
        /// What must hold.
        precondition: Precondition,
    },
    /// Writes nothing; fails the transaction with [`StoreError::NotEmpty`] if any object
    /// lives under `prefix` (e.g. "the namespace is empty" when deleting it).
    CheckEmpty {
        /// The key prefix.
        prefix: String,
    },
    /// Writes a value in the side key-value space, which has no resourceVersion and no
    /// watch (for a client's own small durable state).
    PutMeta {
        /// The key.
        key: String,
        /// The bytes.
        value: Vec<u8>,
    },
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// The key did not exist before.
    Added,
    /// The key existed and was overwritten.
    Modified,
    /// The key was removed.
    Deleted,
}

/// One committed change, as watchers receive it.
#[derive(Debug, Clone)]
pub struct Change {
    /// The resourceVersion this change got.
    pub rv: u64,
    /// What happened.
    pub kind: ChangeKind,
    /// The key.
    pub key: String,
    /// The object after the change; for [`ChangeKind::Deleted`] the last object, stamped
    /// with the deletion's resourceVersion.
    pub object: Arc<Value>,
    /// The object before the change, if there was one (encoded: most watchers never
    /// look at it).
    pub previous: Option<Stored>,
}

/// An object as the store keeps it: its JSON text and its resourceVersion.
///
/// Objects stay encoded between writes because a decoded JSON value takes several times
/// the memory of its text (a node of a B-tree per map): at 50,000 pods and their events
/// the decoded values alone were over 400 MB. Readers decode what they read; the
/// committer writes the text to disk as is.
#[derive(Debug, Clone)]
pub struct Stored {
    rv: u64,
    json: Arc<[u8]>,
    /// The decoded object while anything else (the change history, a watcher) still
    /// holds it: a read of a recently written object, the common case for the
    /// scheduler's bind-then-status writes, then costs no decoding.
    hot: std::sync::Weak<Value>,
}

impl Stored {
    /// Encodes `object`, whose resourceVersion is `rv`.
    pub(crate) fn encode(object: &Value, rv: u64) -> Result<Self, StoreError> {
        // About a pod's size: growing from empty cost a dozen copies of every pod
        // written (the text is copied once more into its `Arc` anyway).
        let mut json = Vec::with_capacity(4096);
        serde_json::to_writer(&mut json, object).map_err(|e| StoreError::Storage(e.to_string()))?;
        Ok(Self {
            rv,
            json: json.into(),
            hot: std::sync::Weak::new(),
        })
    }

    /// Takes JSON text the store produced for `object` at `rv` (its resourceVersion
    /// already in it).
    pub(crate) fn from_encoded(json: Vec<u8>, rv: u64) -> Self {
        Self {
            rv,
            json: json.into(),
            hot: std::sync::Weak::new(),
        }
    }

    /// Remembers the decoded form while others keep it alive.
    pub(crate) fn with_hot(mut self, object: &Arc<Value>) -> Self {
        self.hot = Arc::downgrade(object);
        self
    }

    /// The decoded object: the live one if still held, else decoded afresh.
    pub(crate) fn value(&self) -> Result<Arc<Value>, StoreError> {
        match self.hot.upgrade() {
            Some(v) => Ok(v),
            None => self.decode().map(Arc::new),
        }
    }

    /// Takes stored JSON text as it was read back from disk.
    pub(crate) fn from_json(json: &[u8]) -> Result<Self, StoreError> {
        #[derive(serde::Deserialize)]
        struct Head {
            metadata: Meta,
        }
        #[derive(serde::Deserialize)]
        struct Meta {
            #[serde(rename = "resourceVersion", default)]
            resource_version: Option<String>,
        }
        let head: Head =
            serde_json::from_slice(json).map_err(|e| StoreError::Storage(e.to_string()))?;
        let rv = head
            .metadata
            .resource_version
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Ok(Self {
            rv,
            json: json.into(),
            hot: std::sync::Weak::new(),
        })
    }

    /// The object's resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// The object's JSON text.
    pub fn json(&self) -> &[u8] {
        &self.json
    }

    /// The object, decoded. Only text the store encoded itself is ever held, so a failure
    /// means memory corruption: it is reported, never a panic.
    pub fn decode(&self) -> Result<Value, StoreError> {
        serde_json::from_slice(&self.json).map_err(|e| StoreError::Storage(e.to_string()))
    }
}

/// Why a store operation failed. Each leaves the store unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A `Present`, `ResourceVersion` or `Delete` precondition found no object.
    #[error("{0} not found")]
    NotFound(String),
    /// An `Absent` precondition found an object.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// A `ResourceVersion` precondition found another version.
    #[error("{key}: expected resourceVersion {expected}, found {actual}")]
    Conflict {
        /// The key.
        key: String,
        /// What the caller expected.
        expected: u64,
        /// What is stored.
        actual: u64,
    },
    /// A `CheckEmpty` found objects under the prefix.
    #[error("{0} is not empty")]
    NotEmpty(String),
    /// The object is not a JSON object with a `metadata` object.
    #[error("{0}: not a JSON object with metadata")]
    Malformed(String),
    /// The requested resourceVersion is older than the retained history, or the watcher
    /// fell too far behind the live stream.
    #[error("too old resource version: {requested} (oldest retained: {oldest})")]
    Expired {
        /// The resourceVersion asked for (or last delivered).
        requested: u64,
        /// The oldest resourceVersion a watch can start from now.
        oldest: u64,
    },
    /// The durable backend failed; the batch was not committed.
    #[error("storage error: {0}")]
    Storage(String),
    /// The store is shutting down.
    #[error("store closed")]
    Closed,
}

/// The resourceVersion stamped on an object, if it carries a valid one.
pub fn object_rv(object: &Value) -> Option<u64> {
    object
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
}

#[cfg(test)]
mod tests;
