//! The durable store: the shared engine over a redb database in a data directory.
//!
//! Layout: table `objects` (key → object JSON), table `meta` (key → bytes), table
//! `system` (`rv` → the global resourceVersion, kept apart from the objects because a
//! deletion advances it without leaving an object behind).

use std::path::Path;
use std::sync::Arc;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;

use super::encryption::Encryption;
use super::engine::{Engine, HISTORY, Loaded, Persist};
use super::memory::delegate_store;
use super::{Change, Store, StoreError, StoreFuture, Stored, Watcher, WriteOp};

const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const SYSTEM: TableDefinition<&str, u64> = TableDefinition::new("system");
const RV_KEY: &str = "rv";

/// redb's page cache. Every object is held in memory by the engine and the file is read
/// only at open, so the cache serves B-tree pages on the write path alone; redb's default
/// (1 GiB) grew with the file and made up most of mesopod's resident memory at scale.
const CACHE_BYTES: usize = 16 * 1024 * 1024;

/// The file inside the data directory.
pub const DB_FILE: &str = "apiserver.redb";

fn storage(e: impl std::fmt::Display) -> StoreError {
    StoreError::Storage(e.to_string())
}

struct Redb {
    db: Database,
    encryption: Option<Arc<Encryption>>,
}

impl Persist for Redb {
    fn write(
        &mut self,
        objects: &[(String, Option<Stored>)],
        meta: &[(String, Vec<u8>)],
        rv: u64,
    ) -> Result<(), StoreError> {
        // In key order: a batch of generated names would otherwise walk the B-tree at
        // random, and redb copies every page a write touches; consecutive keys share
        // their path. The sort is stable, so a key's later write still lands last.
        let mut in_order: Vec<&(String, Option<Stored>)> = objects.iter().collect();
        in_order.sort_by(|a, b| a.0.cmp(&b.0));
        let txn = self.db.begin_write().map_err(storage)?;
        {
            let mut table = txn.open_table(OBJECTS).map_err(storage)?;
            for (key, value) in in_order {
                match value {
                    Some(v) => match &self.encryption {
                        Some(enc) => {
                            let sealed = enc.encrypt(key, v.json()).map_err(storage)?;
                            table
                                .insert(key.as_str(), sealed.as_slice())
                                .map_err(storage)?;
                        }
                        None => {
                            table.insert(key.as_str(), v.json()).map_err(storage)?;
                        }
                    },
                    None => {
                        table.remove(key.as_str()).map_err(storage)?;
                    }
                }
            }
            let mut table = txn.open_table(META).map_err(storage)?;
            for (key, value) in meta {
                table
                    .insert(key.as_str(), value.as_slice())
                    .map_err(storage)?;
            }
            let mut table = txn.open_table(SYSTEM).map_err(storage)?;
            table.insert(RV_KEY, rv).map_err(storage)?;
        }
        // Default durability is Immediate: commit returns once the batch is on disk.
        txn.commit().map_err(storage)
    }
}

/// A durable store in a data directory (created if missing). Everything is loaded into
/// memory at open; writes go to disk in group-committed batches before they are visible.
pub struct RedbStore(Engine);

impl RedbStore {
    /// Opens (or creates) the store in `dir`. Fails if another store holds it open or a
    /// stored object cannot be read back: it never drops what it cannot read.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_encrypted(dir, None)
    }

    /// [`RedbStore::open`] with the values of the resources `encryption`
    /// names encrypted on disk (`--encryption-provider-config`). Fails if a
    /// stored value cannot be decrypted with the configured keys.
    pub fn open_encrypted(
        dir: impl AsRef<Path>,
        encryption: Option<Arc<Encryption>>,
    ) -> Result<Self, StoreError> {
        let dir = dir.as_ref();
        private_file(dir, &dir.join(DB_FILE))?;
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(dir.join(DB_FILE))
            .map_err(storage)?;
        let loaded = load(&db, encryption.as_deref())?;
        Ok(Self(Engine::start(
            loaded,
            Redb { db, encryption },
            HISTORY,
        )?))
    }
}

/// The file holds every Secret (base64, or encrypted where configured),
/// so it is made 0600 in a directory made 0700, as etcd keeps its data
/// dir. A file from an older mesopod is tightened; an existing directory is
/// not changed (it may be the operator's, shared with other things), only
/// warned about, as etcd warns.
fn private_file(dir: &Path, file: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(storage)?;
    if std::fs::metadata(dir)
        .map_err(storage)?
        .permissions()
        .mode()
        & 0o077
        != 0
    {
        tracing::warn!(
            dir = %dir.display(),
            "the store's directory is open to other users; 0700 is recommended, as the store holds Secrets"
        );
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(file)
        .map_err(storage)?;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600)).map_err(storage)
}

fn load(db: &Database, encryption: Option<&Encryption>) -> Result<Loaded, StoreError> {
    // Creating the tables first lets a fresh directory read like an empty store.
    let txn = db.begin_write().map_err(storage)?;
    txn.open_table(OBJECTS).map_err(storage)?;
    txn.open_table(META).map_err(storage)?;
    txn.open_table(SYSTEM).map_err(storage)?;
    txn.commit().map_err(storage)?;

    let mut loaded = Loaded::default();
    let txn = db.begin_read().map_err(storage)?;
    for entry in txn
        .open_table(OBJECTS)
        .map_err(storage)?
        .iter()
        .map_err(storage)?
    {
        let (k, v) = entry.map_err(storage)?;
        let plain = match encryption {
            Some(enc) => {
                std::borrow::Cow::Owned(enc.decrypt(k.value(), v.value()).map_err(storage)?)
            }
            None => std::borrow::Cow::Borrowed(v.value()),
        };
        let stored = Stored::from_json(&plain)
            .map_err(|e| StoreError::Storage(format!("object {}: {e}", k.value())))?;
        loaded.objects.insert(k.value().to_string(), stored);
    }
    for entry in txn
        .open_table(META)
        .map_err(storage)?
        .iter()
        .map_err(storage)?
    {
        let (k, v) = entry.map_err(storage)?;
        loaded
            .meta
            .insert(k.value().to_string(), v.value().to_vec());
    }
    let system = txn.open_table(SYSTEM).map_err(storage)?;
    loaded.rv = system
        .get(RV_KEY)
        .map_err(storage)?
        .map(|v| v.value())
        .unwrap_or(0);
    Ok(loaded)
}

delegate_store!(RedbStore);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn the_store_is_private_to_its_owner() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        drop(RedbStore::open(&dir).unwrap());
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join(DB_FILE)), 0o600);
    }

    #[test]
    fn a_store_file_left_readable_by_an_older_mesopod_is_tightened() {
        let tmp = tempfile::tempdir().unwrap();
        drop(RedbStore::open(tmp.path()).unwrap());
        let file = tmp.path().join(DB_FILE);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        drop(RedbStore::open(tmp.path()).unwrap());
        assert_eq!(mode(&file), 0o600);
    }
}
