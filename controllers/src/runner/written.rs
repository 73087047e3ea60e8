//! The objects a controller last wrote, by key: a status write is visible to the
//! writer's next sync even when the watch that feeds the cache has not delivered it
//! yet. A Job whose cached status lags its own last write would see a pod it just
//! counted as neither counted nor pending, and run its index again; a CronJob would
//! call the Job it just recorded unexpected.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::queue::Key;

/// The last write per key; read through [`Written::newest`].
pub(super) struct Written<K>(Mutex<HashMap<Key, Arc<K>>>);

impl<K> Default for Written<K> {
    fn default() -> Self {
        Self(Mutex::default())
    }
}

fn resource_version<K: Metadata<Ty = ObjectMeta>>(k: &K) -> u64 {
    k.metadata()
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

impl<K: Metadata<Ty = ObjectMeta>> Written<K> {
    /// The newer of `cached` and this controller's last write of the same object
    /// (same uid); a write the cache has caught up with is dropped.
    pub(super) fn newest(&self, key: &Key, cached: Arc<K>) -> Arc<K> {
        let mut map = self.lock();
        match map.get(key) {
            Some(w)
                if w.metadata().uid == cached.metadata().uid
                    && resource_version(w.as_ref()) > resource_version(cached.as_ref()) =>
            {
                Arc::clone(w)
            }
            _ => {
                map.remove(key);
                cached
            }
        }
    }

    /// Records what the API answered to a write.
    pub(super) fn store(&self, key: Key, written: K) {
        self.lock().insert(key, Arc::new(written));
    }

    /// The object is gone.
    pub(super) fn forget(&self, key: &Key) {
        self.lock().remove(key);
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Key, Arc<K>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
