//! The in-memory store, for tests: the shared engine with nothing behind it.

use std::sync::Arc;

use serde_json::Value;

use super::engine::{Engine, HISTORY, Loaded, Persist};
use super::{Change, Store, StoreError, StoreFuture, Watcher, WriteOp};

struct Nothing;

impl Persist for Nothing {
    fn write(
        &mut self,
        _objects: &[(String, Option<super::Stored>)],
        _meta: &[(String, Vec<u8>)],
        _rv: u64,
    ) -> Result<(), StoreError> {
        Ok(())
    }
}

/// A store that keeps everything in memory and forgets it when dropped. Same semantics
/// as [`super::RedbStore`] otherwise (group commit, history, watch).
pub struct MemoryStore(Engine);

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Result<Self, StoreError> {
        Self::with_history(HISTORY)
    }

    /// An empty store keeping only the last `history` changes for watches that start
    /// in the past (tests use a small one to reach 410 Expired quickly).
    pub fn with_history(history: usize) -> Result<Self, StoreError> {
        Ok(Self(Engine::start(Loaded::default(), Nothing, history)?))
    }
}

macro_rules! delegate_store {
    ($t:ty) => {
        impl Store for $t {
            fn commit(&self, ops: Vec<WriteOp>) -> StoreFuture<'_, Vec<Arc<Change>>> {
                self.0.commit(ops)
            }
            fn get(&self, key: &str) -> Option<Arc<Value>> {
                self.0.get(key)
            }
            fn list(&self, prefix: &str) -> (Vec<Arc<Value>>, u64) {
                self.0.list(prefix)
            }
            fn list_containing(&self, prefix: &str, needle: &str) -> (Vec<Arc<Value>>, u64) {
                self.0.list_containing(prefix, needle)
            }
            fn list_stored(&self, prefix: &str) -> (Vec<$crate::store::Stored>, u64) {
                self.0.list_stored(prefix)
            }
            fn watch(&self, prefix: &str, from: u64) -> Result<Watcher, StoreError> {
                self.0.watch(prefix, from)
            }
            fn resource_version(&self) -> u64 {
                self.0.resource_version()
            }
            fn get_meta(&self, key: &str) -> Option<Vec<u8>> {
                self.0.get_meta(key)
            }
            fn changes_since(&self, prefix: &str, from: u64) -> Option<Vec<Arc<Change>>> {
                self.0.changes_since(prefix, from)
            }
        }
    };
}
pub(crate) use delegate_store;

delegate_store!(MemoryStore);
