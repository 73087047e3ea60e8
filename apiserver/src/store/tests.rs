#![allow(clippy::unwrap_used)]

//! The store suite: every test runs on the memory store and on etcd (a throwaway etcd
//! from testkit; skipped when etcd is not installed, failed under `CI=true`). Tests of
//! redb's own file handling are at the end.

use std::sync::{Arc, Mutex, Weak};

use serde_json::{Value, json};

use super::*;

fn obj(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"n": 1}})
}

fn put(key: &str, pre: Precondition) -> WriteOp {
    WriteOp::Put {
        key: key.into(),
        object: obj(key),
        precondition: pre,
    }
}

/// Where a test's store lives.
enum Backend {
    Memory,
    Etcd {
        etcd: testkit::etcd::Etcd,
        opened: Mutex<Weak<EtcdStore>>,
    },
}

impl Backend {
    async fn etcd(test: &str) -> Option<Self> {
        let etcd = testkit::etcd::Etcd::start(test).await?;
        Some(Self::Etcd {
            etcd,
            opened: Mutex::new(Weak::new()),
        })
    }

    async fn open(&self) -> Arc<dyn Store> {
        self.open_with_history(engine::HISTORY).await
    }

    /// A store keeping only `history` changes in memory for watches from the past.
    async fn open_with_history(&self, history: usize) -> Arc<dyn Store> {
        match self {
            Self::Memory => Arc::new(MemoryStore::with_history(history).unwrap()),
            Self::Etcd { etcd, opened } => {
                let mut config = EtcdConfig::new(vec![etcd.url.clone()]);
                config.history = history;
                let store = Arc::new(EtcdStore::connect(config, None).await.unwrap());
                *opened.lock().unwrap() = Arc::downgrade(&store);
                store
            }
        }
    }

    /// Makes changes up to `rv` unavailable to watches: the memory store forgets them
    /// by its bounded history alone, etcd once compacted (as kube-apiserver does).
    async fn forget_through(&self, rv: u64) {
        if let Self::Etcd { opened, .. } = self {
            let store = opened.lock().unwrap().upgrade().unwrap();
            store.compact(rv).await.unwrap();
        }
    }
}

/// Runs each named test on both backends: `memory::NAME` and `etcd::NAME`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Backend::Memory).await;
            })*
        }
        mod etcd {
            $(#[tokio::test]
            async fn $name() {
                if let Some(b) = super::Backend::etcd(stringify!($name)).await {
                    super::$name(b).await;
                }
            })*
        }
    };
}

on_both_backends!(
    every_write_gets_the_next_global_resource_version_stamped_on_the_object,
    a_failed_precondition_fails_the_whole_transaction_and_changes_nothing,
    checks_guard_other_keys_inside_the_transaction,
    watch_replays_history_after_a_version_then_continues_live_in_order,
    a_watch_older_than_what_the_store_retains_is_expired,
    a_watcher_queues_only_its_prefix_is_cut_off_when_too_far_behind_and_ends_with_the_store,
    a_filtered_list_decodes_only_objects_whose_text_has_the_needle,
    concurrent_writers_share_batches_and_each_gets_a_distinct_version,
    meta_values_are_read_back,
);

async fn every_write_gets_the_next_global_resource_version_stamped_on_the_object(b: Backend) {
    let s = b.open().await;
    let base = s.resource_version();
    let a = s
        .commit(vec![put("pods/d/a", Precondition::Absent)])
        .await
        .unwrap();
    let b = s
        .commit(vec![put("nodes/b", Precondition::Absent)])
        .await
        .unwrap();
    assert_eq!((a[0].rv, b[0].rv), (base + 1, base + 2));
    assert_eq!(object_rv(&s.get("nodes/b").unwrap()), Some(base + 2));
    assert_eq!(s.resource_version(), base + 2);
    let (items, rv) = s.list("pods/");
    assert_eq!((items.len(), rv), (1, base + 2));
}

async fn a_failed_precondition_fails_the_whole_transaction_and_changes_nothing(b: Backend) {
    let s = b.open().await;
    let first = s
        .commit(vec![put("pods/d/a", Precondition::Absent)])
        .await
        .unwrap()[0]
        .rv;
    let err = s
        .commit(vec![
            put("pods/d/b", Precondition::Absent),
            put("pods/d/a", Precondition::Absent),
        ])
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::AlreadyExists("pods/d/a".into()));
    assert!(s.get("pods/d/b").is_none());
    assert_eq!(s.resource_version(), first);

    let err = s
        .commit(vec![put(
            "pods/d/a",
            Precondition::ResourceVersion(first + 7),
        )])
        .await
        .unwrap_err();
    assert_eq!(
        err,
        StoreError::Conflict {
            key: "pods/d/a".into(),
            expected: first + 7,
            actual: first,
        }
    );
    let ok = s
        .commit(vec![put("pods/d/a", Precondition::ResourceVersion(first))])
        .await
        .unwrap();
    assert_eq!(ok[0].kind, ChangeKind::Modified);
}

async fn checks_guard_other_keys_inside_the_transaction(b: Backend) {
    let s = b.open().await;
    let missing_ns = s
        .commit(vec![
            WriteOp::Check {
                key: "namespaces/x".into(),
                precondition: Precondition::Present,
            },
            put("pods/x/a", Precondition::Absent),
        ])
        .await
        .unwrap_err();
    assert_eq!(missing_ns, StoreError::NotFound("namespaces/x".into()));
    s.commit(vec![put("pods/x/a", Precondition::Absent)])
        .await
        .unwrap();
    let not_empty = s
        .commit(vec![WriteOp::CheckEmpty {
            prefix: "pods/x/".into(),
        }])
        .await
        .unwrap_err();
    assert_eq!(not_empty, StoreError::NotEmpty("pods/x/".into()));
    let gone = s
        .commit(vec![WriteOp::Delete {
            key: "pods/x/zz".into(),
            precondition: Precondition::None,
        }])
        .await
        .unwrap_err();
    assert_eq!(gone, StoreError::NotFound("pods/x/zz".into()));
    // A check on another key fences a write, as leader election fences the scheduler.
    let lease = s
        .commit(vec![put(
            "leases/kube-system/mesopod",
            Precondition::Absent,
        )])
        .await
        .unwrap()[0]
        .rv;
    s.commit(vec![put("leases/kube-system/mesopod", Precondition::None)])
        .await
        .unwrap();
    let fenced = s
        .commit(vec![
            WriteOp::Check {
                key: "leases/kube-system/mesopod".into(),
                precondition: Precondition::ResourceVersion(lease),
            },
            put("pods/x/b", Precondition::Absent),
        ])
        .await
        .unwrap_err();
    assert!(matches!(fenced, StoreError::Conflict { expected, .. } if expected == lease));
    assert!(s.get("pods/x/b").is_none());
    // Deleting the last object and checking the prefix is empty: the deletion counts.
    let emptied = s
        .commit(vec![WriteOp::Delete {
            key: "pods/x/a".into(),
            precondition: Precondition::None,
        }])
        .await;
    emptied.unwrap();
    s.commit(vec![WriteOp::CheckEmpty {
        prefix: "pods/x/".into(),
    }])
    .await
    .unwrap();
}

async fn watch_replays_history_after_a_version_then_continues_live_in_order(b: Backend) {
    let s = b.open().await;
    let mut rvs = Vec::new();
    for name in ["a", "b", "c"] {
        let c = s
            .commit(vec![put(&format!("pods/d/{name}"), Precondition::Absent)])
            .await
            .unwrap();
        rvs.push(c[0].rv);
    }
    s.commit(vec![put("nodes/n", Precondition::Absent)])
        .await
        .unwrap();
    let mut w = s.watch("pods/", rvs[0]).unwrap();
    assert_eq!(w.next().await.unwrap().key, "pods/d/b");
    assert_eq!(w.next().await.unwrap().key, "pods/d/c");
    let deletion = s
        .commit(vec![WriteOp::Delete {
            key: "pods/d/a".into(),
            precondition: Precondition::None,
        }])
        .await
        .unwrap()[0]
        .rv;
    let deleted = w.next().await.unwrap();
    assert_eq!((deleted.kind, deleted.rv), (ChangeKind::Deleted, deletion));
    assert_eq!(
        object_rv(&deleted.object),
        Some(deletion),
        "a deletion carries its own resourceVersion"
    );
    // A watch from before what this store instance remembers resumes too, as long as
    // the backend still has the changes (etcd keeps them until compaction).
    if matches!(b, Backend::Etcd { .. }) {
        let fresh = b.open_with_history(1).await;
        let mut w = fresh.watch("pods/", rvs[0]).unwrap();
        let keys = [w.next().await.unwrap(), w.next().await.unwrap()];
        assert_eq!(keys.map(|c| c.key.clone()), ["pods/d/b", "pods/d/c"]);
        assert_eq!(w.next().await.unwrap().kind, ChangeKind::Deleted);
    }
}

async fn a_watch_older_than_what_the_store_retains_is_expired(b: Backend) {
    let s = b.open_with_history(2).await;
    let mut rvs = Vec::new();
    for i in 0..5 {
        let c = s
            .commit(vec![put(&format!("pods/d/{i}"), Precondition::Absent)])
            .await
            .unwrap();
        rvs.push(c[0].rv);
    }
    b.forget_through(rvs[2]).await;
    let expired = match s.watch("pods/", rvs[0]) {
        Err(e) => e,
        Ok(mut w) => w.next().await.unwrap_err(),
    };
    assert!(matches!(expired, StoreError::Expired { .. }), "{expired:?}");
    let mut w = s.watch("pods/", rvs[2]).unwrap();
    assert_eq!(w.next().await.unwrap().rv, rvs[3]);
}

async fn a_watcher_queues_only_its_prefix_is_cut_off_when_too_far_behind_and_ends_with_the_store(
    b: Backend,
) {
    let s = b.open().await;
    let base = s.resource_version();
    let mut pods = s.watch("pods/", base).unwrap();
    let mut behind = s.watch("events/", base).unwrap();
    // Many changes of other kinds queue nothing for a pod watcher.
    let burst = super::watcher::QUEUE_LIMIT + 1;
    let ops: Vec<WriteOp> = (0..burst)
        .map(|i| put(&format!("events/d/{i}"), Precondition::Absent))
        .collect();
    // In transactions of etcd's default `--max-txn-ops` (128).
    for chunk in ops.chunks(128) {
        s.commit(chunk.to_vec()).await.unwrap();
    }
    let pod = s
        .commit(vec![put("pods/d/a", Precondition::Absent)])
        .await
        .unwrap()[0]
        .rv;
    let first = pods.next().await.unwrap();
    assert_eq!((first.key.as_str(), first.rv), ("pods/d/a", pod));
    // The events watcher never read and fell more than the limit behind.
    assert!(matches!(
        behind.next().await,
        Err(StoreError::Expired { .. })
    ));
    // Once the store is gone, a waiting watcher ends instead of hanging.
    let waiting = tokio::spawn(async move { pods.next().await.map(|c| c.rv) });
    drop(s);
    assert!(matches!(waiting.await.unwrap(), Err(StoreError::Closed)));
}

async fn a_filtered_list_decodes_only_objects_whose_text_has_the_needle(b: Backend) {
    let s = b.open().await;
    let c = s
        .commit(vec![
            put("pods/d/a", Precondition::Absent),
            WriteOp::Put {
                key: "pods/d/b".into(),
                object: json!({"metadata": {"name": "b", "deletionTimestamp": "2026-01-01T00:00:00Z"}}),
                precondition: Precondition::Absent,
            },
            put("nodes/n", Precondition::Absent),
        ])
        .await
        .unwrap();
    let (items, rv) = s.list_containing("pods/", "\"deletionTimestamp\"");
    let names: Vec<_> = items
        .iter()
        .filter_map(|v| v.pointer("/metadata/name").and_then(Value::as_str))
        .collect();
    assert_eq!((names, rv), (vec!["b"], c[2].rv));
    assert_eq!(s.list("pods/").0.len(), 2);
}

async fn concurrent_writers_share_batches_and_each_gets_a_distinct_version(b: Backend) {
    let s = b.open().await;
    let base = s.resource_version();
    let mut tasks = Vec::new();
    for i in 0..200 {
        let s = Arc::clone(&s);
        tasks.push(tokio::spawn(async move {
            s.commit(vec![put(&format!("pods/d/{i}"), Precondition::Absent)])
                .await
                .unwrap()[0]
                .rv
        }));
    }
    let mut rvs = Vec::new();
    for t in tasks {
        rvs.push(t.await.unwrap());
    }
    rvs.sort_unstable();
    assert_eq!(rvs, (base + 1..=base + 200).collect::<Vec<u64>>());
}

async fn meta_values_are_read_back(b: Backend) {
    let s = b.open().await;
    s.commit(vec![WriteOp::PutMeta {
        key: "framework-id".into(),
        value: b"abc".to_vec(),
    }])
    .await
    .unwrap();
    assert_eq!(s.get_meta("framework-id").as_deref(), Some(&b"abc"[..]));
    assert!(s.list("").0.is_empty(), "meta values are not objects");
}

#[tokio::test]
async fn the_redb_store_keeps_objects_versions_and_meta_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = RedbStore::open(dir.path()).unwrap();
        s.commit(vec![
            put("pods/d/a", Precondition::Absent),
            put("pods/d/b", Precondition::Absent),
        ])
        .await
        .unwrap();
        s.commit(vec![WriteOp::Delete {
            key: "pods/d/b".into(),
            precondition: Precondition::None,
        }])
        .await
        .unwrap();
        s.commit(vec![WriteOp::PutMeta {
            key: "framework-id".into(),
            value: b"abc".to_vec(),
        }])
        .await
        .unwrap();
    }
    let s = RedbStore::open(dir.path()).unwrap();
    assert_eq!(
        s.resource_version(),
        3,
        "the deletion's version survives though no object carries it"
    );
    assert_eq!(object_rv(&s.get("pods/d/a").unwrap()), Some(1));
    assert!(s.get("pods/d/b").is_none());
    assert_eq!(s.get_meta("framework-id").as_deref(), Some(&b"abc"[..]));
    assert!(
        matches!(s.watch("pods/", 1), Err(StoreError::Expired { .. })),
        "history does not survive a restart"
    );
    let next = s
        .commit(vec![put("pods/d/c", Precondition::Absent)])
        .await
        .unwrap();
    assert_eq!(next[0].rv, 4);
}

#[tokio::test]
async fn a_second_store_on_the_same_directory_is_refused_while_the_first_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let _first = RedbStore::open(dir.path()).unwrap();
    assert!(matches!(
        RedbStore::open(dir.path()),
        Err(StoreError::Storage(_))
    ));
}
