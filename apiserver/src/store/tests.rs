#![allow(clippy::unwrap_used)]

use std::sync::Arc;

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

#[tokio::test]
async fn every_write_gets_the_next_global_resource_version_stamped_on_the_object() {
    let s = MemoryStore::new().unwrap();
    let a = s
        .commit(vec![put("pods/d/a", Precondition::Absent)])
        .await
        .unwrap();
    let b = s
        .commit(vec![put("nodes/b", Precondition::Absent)])
        .await
        .unwrap();
    assert_eq!((a[0].rv, b[0].rv), (1, 2));
    assert_eq!(object_rv(&s.get("nodes/b").unwrap()), Some(2));
    assert_eq!(s.resource_version(), 2);
    let (items, rv) = s.list("pods/");
    assert_eq!((items.len(), rv), (1, 2));
}

#[tokio::test]
async fn a_failed_precondition_fails_the_whole_transaction_and_changes_nothing() {
    let s = MemoryStore::new().unwrap();
    s.commit(vec![put("pods/d/a", Precondition::Absent)])
        .await
        .unwrap();
    let err = s
        .commit(vec![
            put("pods/d/b", Precondition::Absent),
            put("pods/d/a", Precondition::Absent),
        ])
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::AlreadyExists("pods/d/a".into()));
    assert!(s.get("pods/d/b").is_none());
    assert_eq!(s.resource_version(), 1);

    let err = s
        .commit(vec![put("pods/d/a", Precondition::ResourceVersion(7))])
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        StoreError::Conflict {
            expected: 7,
            actual: 1,
            ..
        }
    ));
    let ok = s
        .commit(vec![put("pods/d/a", Precondition::ResourceVersion(1))])
        .await
        .unwrap();
    assert_eq!(ok[0].kind, ChangeKind::Modified);
}

#[tokio::test]
async fn checks_guard_other_keys_inside_the_transaction() {
    let s = MemoryStore::new().unwrap();
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
    s.commit(vec![
        WriteOp::Delete {
            key: "pods/x/a".into(),
            precondition: Precondition::None,
        },
        WriteOp::CheckEmpty {
            prefix: "pods/x/".into(),
        },
    ])
    .await
    .unwrap();
}

#[tokio::test]
async fn watch_replays_history_after_a_version_then_continues_live_in_order() {
    let s = MemoryStore::new().unwrap();
    for name in ["a", "b", "c"] {
        s.commit(vec![put(&format!("pods/d/{name}"), Precondition::Absent)])
            .await
            .unwrap();
    }
    s.commit(vec![put("nodes/n", Precondition::Absent)])
        .await
        .unwrap();
    let mut w = s.watch("pods/", 1).unwrap();
    assert_eq!(w.next().await.unwrap().key, "pods/d/b");
    assert_eq!(w.next().await.unwrap().key, "pods/d/c");
    s.commit(vec![WriteOp::Delete {
        key: "pods/d/a".into(),
        precondition: Precondition::None,
    }])
    .await
    .unwrap();
    let deleted = w.next().await.unwrap();
    assert_eq!((deleted.kind, deleted.rv), (ChangeKind::Deleted, 5));
    assert_eq!(
        object_rv(&deleted.object),
        Some(5),
        "a deletion carries its own resourceVersion"
    );
}

#[tokio::test]
async fn a_watch_older_than_the_history_is_expired() {
    let s = MemoryStore::with_history(2).unwrap();
    for i in 0..5 {
        s.commit(vec![put(&format!("pods/d/{i}"), Precondition::Absent)])
            .await
            .unwrap();
    }
    assert!(matches!(
        s.watch("pods/", 1),
        Err(StoreError::Expired {
            requested: 1,
            oldest: 3
        })
    ));
    assert!(s.watch("pods/", 3).is_ok());
}

#[tokio::test]
async fn a_watcher_queues_only_its_prefix_is_cut_off_when_too_far_behind_and_ends_with_the_store() {
    let s = MemoryStore::new().unwrap();
    let mut pods = s.watch("pods/", 0).unwrap();
    let mut behind = s.watch("events/", 0).unwrap();
    // Many changes of other kinds queue nothing for a pod watcher.
    let burst = super::watcher::QUEUE_LIMIT + 1;
    let ops: Vec<WriteOp> = (0..burst)
        .map(|i| put(&format!("events/d/{i}"), Precondition::Absent))
        .collect();
    s.commit(ops).await.unwrap();
    s.commit(vec![put("pods/d/a", Precondition::Absent)])
        .await
        .unwrap();
    let first = pods.next().await.unwrap();
    assert_eq!(
        (first.key.as_str(), first.rv),
        ("pods/d/a", burst as u64 + 1)
    );
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

#[tokio::test]
async fn a_filtered_list_decodes_only_objects_whose_text_has_the_needle() {
    let s = MemoryStore::new().unwrap();
    s.commit(vec![
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
    assert_eq!((names, rv), (vec!["b"], 3));
    assert_eq!(s.list("pods/").0.len(), 2);
}

#[tokio::test]
async fn concurrent_writers_share_batches_and_each_gets_a_distinct_version() {
    let s = Arc::new(MemoryStore::new().unwrap());
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
    assert_eq!(rvs, (1..=200).collect::<Vec<u64>>());
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
