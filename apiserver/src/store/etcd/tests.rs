#![allow(clippy::unwrap_used)]

//! etcd's own limits, against a real etcd (skipped when etcd is not installed, failed
//! under `CI=true`): transactions beyond `--max-txn-ops`, compaction, and the health
//! check through an outage.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::super::{ChangeKind, Precondition, Store, StoreError, WriteOp};
use super::compactor::{self, Round};
use super::{EtcdConfig, EtcdStore};

async fn store(etcd: &testkit::etcd::Etcd) -> EtcdStore {
    EtcdStore::connect(EtcdConfig::new(vec![etcd.url.clone()]), None)
        .await
        .unwrap()
}

fn put(key: &str, precondition: Precondition) -> WriteOp {
    WriteOp::Put {
        key: key.into(),
        object: json!({"metadata": {"name": key}}),
        precondition,
    }
}

/// 100 creates (each a compare) and 300 unconditional writes: over etcd's 128 ops in
/// one txn, yet one transaction.
fn big(ns: &str) -> Vec<WriteOp> {
    let creates = (0..100).map(|i| put(&format!("configmaps/{ns}/c{i}"), Precondition::Absent));
    let writes = (0..300).map(|i| put(&format!("events/{ns}/e{i}"), Precondition::None));
    creates.chain(writes).collect()
}

#[tokio::test]
async fn a_transaction_over_etcds_128_ops_applies_whole_at_one_revision() {
    let Some(etcd) = testkit::etcd::Etcd::start("big transaction").await else {
        return;
    };
    let s = store(&etcd).await;
    let base = s.resource_version();
    let mut w = s.watch("", base).unwrap();
    let changes = s.commit(big("a")).await.unwrap();
    assert_eq!(changes.len(), 400);
    let rv = changes[0].rv;
    assert!(changes.iter().all(|c| c.rv == rv), "one revision for all");
    assert_eq!(s.list("configmaps/a/").0.len(), 100);
    assert_eq!(s.list("events/a/").0.len(), 300);
    for _ in 0..400 {
        let c = w.next().await.unwrap();
        assert_eq!((c.rv, c.kind), (rv, ChangeKind::Added));
    }
    // Another process on the same etcd sees all of it.
    let other = store(&etcd).await;
    assert_eq!(other.list("events/a/").0.len(), 300);
}

#[tokio::test]
async fn a_big_transaction_whose_precondition_fails_writes_nothing() {
    let Some(etcd) = testkit::etcd::Etcd::start("big transaction conflict").await else {
        return;
    };
    let s = store(&etcd).await;
    s.commit(vec![put("configmaps/b/c99", Precondition::Absent)])
        .await
        .unwrap();
    let before = s.resource_version();
    let err = s.commit(big("b")).await.unwrap_err();
    assert_eq!(err, StoreError::AlreadyExists("configmaps/b/c99".into()));
    assert_eq!(s.resource_version(), before);
    assert_eq!(s.list("events/b/").0.len(), 0);
    assert_eq!(s.list("configmaps/b/").0.len(), 1);
}

#[tokio::test]
async fn more_preconditions_than_one_txn_compares_is_refused_before_sending() {
    let Some(etcd) = testkit::etcd::Etcd::start("too many preconditions").await else {
        return;
    };
    let s = Arc::new(store(&etcd).await);
    let before = s.resource_version();
    let ops: Vec<WriteOp> = (0..129)
        .map(|i| put(&format!("configmaps/c/{i}"), Precondition::Absent))
        .collect();
    let err = s.commit(ops).await.unwrap_err();
    let StoreError::Storage(message) = &err else {
        panic!("{err:?}");
    };
    assert!(message.contains("129 preconditions"), "{message}");
    assert!(message.contains("--max-txn-ops"), "{message}");
    assert_eq!(s.resource_version(), before);
    assert!(s.list("configmaps/c/").0.is_empty());
    // 128 of them are one txn.
    let ops: Vec<WriteOp> = (0..128)
        .map(|i| put(&format!("configmaps/c/{i}"), Precondition::Absent))
        .collect();
    assert_eq!(s.commit(ops).await.unwrap().len(), 128);
}

#[tokio::test]
async fn emptiness_is_checked_after_the_transactions_own_deletes_as_the_engine_does() {
    let Some(etcd) = testkit::etcd::Etcd::start("check empty after deletes").await else {
        return;
    };
    let s = store(&etcd).await;
    let ops = ["secrets/d/a", "secrets/d/b", "secrets/d/c", "secrets/e/x"]
        .map(|k| put(k, Precondition::Absent));
    s.commit(ops.to_vec()).await.unwrap();
    let delete = |key: &str| WriteOp::Delete {
        key: key.into(),
        precondition: Precondition::None,
    };
    let check = WriteOp::CheckEmpty {
        prefix: "secrets/d/".into(),
    };
    // b is left: not empty, and nothing is deleted.
    let err = s
        .commit(vec![
            delete("secrets/d/a"),
            delete("secrets/d/c"),
            check.clone(),
        ])
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::NotEmpty("secrets/d/".into()));
    assert_eq!(s.list("secrets/d/").0.len(), 3);
    // A check before the deletes sees them still there.
    let err = s
        .commit(vec![check.clone(), delete("secrets/d/a")])
        .await
        .unwrap_err();
    assert_eq!(err, StoreError::NotEmpty("secrets/d/".into()));
    // All three deleted first: empty, and the neighbouring prefix is untouched.
    let all = ["secrets/d/c", "secrets/d/a", "secrets/d/b"].map(delete);
    let changes = s
        .commit(all.into_iter().chain([check]).collect())
        .await
        .unwrap();
    assert_eq!(changes.len(), 3);
    assert!(s.list("secrets/d/").0.is_empty());
    assert_eq!(s.list("secrets/e/").0.len(), 1);
}

#[tokio::test]
async fn the_store_compacts_etcd_itself_and_a_watch_from_before_is_expired_everywhere() {
    let Some(etcd) = testkit::etcd::Etcd::start("compaction").await else {
        return;
    };
    let mut config = EtcdConfig::new(vec![etcd.url.clone()]);
    config.compaction_interval = Duration::from_millis(200);
    let s = EtcdStore::connect(config, None).await.unwrap();
    let mut rvs = Vec::new();
    for i in 0..3 {
        let c = s
            .commit(vec![put(&format!("pods/d/{i}"), Precondition::Absent)])
            .await
            .unwrap();
        rvs.push(c[0].rv);
    }
    // Served from memory until the store itself compacts (its first round only notes
    // where etcd stands, the next compacts to that): then Expired, which is 410.
    let expired = async |s: &EtcdStore| match s.watch("pods/", rvs[0]) {
        Err(e) => matches!(e, StoreError::Expired { .. }),
        Ok(mut w) => matches!(w.next().await, Err(StoreError::Expired { .. })),
    };
    testkit::wait_until(
        "the store compacts etcd",
        Duration::from_secs(20),
        async || expired(&s).await,
        |gone| *gone,
    )
    .await;
    // etcd itself compacted: a replica that never compacts sees it as well.
    let mut other = EtcdConfig::new(vec![etcd.url.clone()]);
    other.compaction_interval = Duration::ZERO;
    let other = EtcdStore::connect(other, None).await.unwrap();
    assert!(expired(&other).await);
    // What was written after the compacted revision still resumes.
    let latest = s
        .commit(vec![put("pods/d/new", Precondition::Absent)])
        .await
        .unwrap()[0]
        .rv;
    let mut w = s.watch("pods/", latest - 1).unwrap();
    assert_eq!(w.next().await.unwrap().rv, latest);
}

#[tokio::test]
async fn of_two_replicas_one_compacts_each_round_and_the_other_learns_where_to() {
    let Some(etcd) = testkit::etcd::Etcd::start("compaction rounds").await else {
        return;
    };
    let connect = async || {
        etcd_client::Client::connect([etcd.url.clone()], None)
            .await
            .unwrap()
    };
    let (mut a, mut b) = (connect().await, connect().await);
    // Round one: a claims it and only notes the revision; b's claim fails.
    let (a1, none) = compactor::round(&mut a, Round::default()).await.unwrap();
    assert_eq!((a1.time, none), (1, None));
    let (b1, none) = compactor::round(&mut b, Round::default()).await.unwrap();
    assert_eq!((b1.time, none), (1, None));
    // Round two: a compacts to round one's revision; b follows it without compacting.
    let (a2, compacted) = compactor::round(&mut a, a1).await.unwrap();
    assert_eq!((a2.time, compacted), (2, Some(a1.rev)));
    let (b2, learned) = compactor::round(&mut b, b1).await.unwrap();
    assert_eq!((b2.time, learned), (2, Some(a1.rev)));
    // The key is kube-apiserver's, at etcd's root.
    let value = a.get(compactor::COMPACT_REV_KEY, None).await.unwrap();
    assert_eq!(value.kvs()[0].version(), 2);
}

/// A replica's own writes come back from etcd as objects it did not parse again: they
/// must be exactly what another replica parses from the same revision.
#[tokio::test]
async fn a_writer_sees_its_own_objects_exactly_as_another_replica_reads_them() {
    let Some(etcd) = testkit::etcd::Etcd::start("own writes").await else {
        return;
    };
    let (writer, reader) = (store(&etcd).await, store(&etcd).await);
    let object = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "data": {"metadata": "not this one", "quote": "\"}{", "unicode": "ünï ✓", "n": "1e3"},
        "metadata": {"name": "odd", "namespace": "g", "resourceVersion": "999",
                     "labels": {"a": "b"}, "uid": "u-1"},
        "numbers": [0, -1, 1.5, 18446744073709551615u64, null, true]
    });
    let changes = writer
        .commit(vec![WriteOp::Put {
            key: "configmaps/g/odd".into(),
            object,
            precondition: Precondition::Absent,
        }])
        .await
        .unwrap();
    let rv = changes[0].rv;
    assert_eq!(
        changes[0].object["metadata"]["resourceVersion"],
        rv.to_string()
    );
    testkit::wait_until(
        "the reader has the revision",
        Duration::from_secs(10),
        async || reader.resource_version(),
        |seen| *seen >= rv,
    )
    .await;
    let ours = writer.list_stored("configmaps/g/").0;
    let theirs = reader.list_stored("configmaps/g/").0;
    assert_eq!(ours.len(), 1);
    assert_eq!(
        ours[0].json(),
        theirs[0].json(),
        "same text on both replicas"
    );
    assert_eq!(ours[0].rv(), rv);
    assert_eq!(*changes[0].object, *reader.get("configmaps/g/odd").unwrap());
}

/// Many concurrent writes by another replica: the reader sees every one, in order, each
/// with the version before it as its previous (the feed's batching of revisions is
/// pinned down in `feed`'s own tests).
#[tokio::test]
async fn rapid_writes_by_another_replica_arrive_in_order_with_their_previous_versions() {
    const WRITES: usize = 200;
    let Some(etcd) = testkit::etcd::Etcd::start("rapid writes").await else {
        return;
    };
    let (writer, reader) = (Arc::new(store(&etcd).await), store(&etcd).await);
    let mut w = reader
        .watch("configmaps/h/", reader.resource_version())
        .unwrap();
    let writes = (0..WRITES).map(|i| {
        let writer = Arc::clone(&writer);
        async move {
            writer
                .commit(vec![WriteOp::Put {
                    key: "configmaps/h/hot".into(),
                    object: json!({"metadata": {"name": "hot"}, "data": {"i": i.to_string()}}),
                    precondition: Precondition::None,
                }])
                .await
                .unwrap()
        }
    });
    futures::future::join_all(writes).await;
    let mut last: Option<super::super::Change> = None;
    for n in 0..WRITES {
        let c = w.next().await.unwrap();
        match &last {
            None => {
                assert_eq!(c.kind, ChangeKind::Added);
                assert!(c.previous.is_none());
            }
            Some(before) => {
                assert_eq!(c.kind, ChangeKind::Modified, "change {n}");
                assert!(c.rv > before.rv, "change {n}: revisions in order");
                let previous = c.previous.as_ref().unwrap();
                assert_eq!(
                    previous.rv(),
                    before.rv,
                    "change {n}: previous is the last one"
                );
                assert_eq!(previous.decode().unwrap(), *before.object);
            }
        }
        last = Some((*c).clone());
    }
    let last = last.unwrap();
    assert_eq!(*reader.get("configmaps/h/hot").unwrap(), *last.object);
}

/// kube-apiserver's etcd check: passes while etcd answers, fails (within its timeout)
/// while etcd is down, when reads are still served from the view and writes fail, and
/// passes again once etcd is back, where the feed follows on and writes apply.
#[tokio::test]
async fn the_health_check_follows_etcd_down_and_back_and_the_feed_resumes() {
    let Some(mut etcd) = testkit::etcd::Etcd::start("etcd health").await else {
        return;
    };
    let s = store(&etcd).await;
    assert_eq!(s.health_check(), Some("etcd"));
    s.health().await.unwrap();
    s.commit(vec![put("configmaps/a/before", Precondition::Absent)])
        .await
        .unwrap();

    etcd.stop();
    let asked = std::time::Instant::now();
    let down = s.health().await.unwrap_err();
    assert!(
        asked.elapsed() <= super::HEALTHCHECK_TIMEOUT + Duration::from_secs(1),
        "{:?}",
        asked.elapsed()
    );
    assert!(
        down.to_string().contains("error getting data from etcd"),
        "{down}"
    );
    assert!(
        s.get("configmaps/a/before").is_some(),
        "reads come from the view"
    );
    assert!(
        s.commit(vec![put("configmaps/a/down", Precondition::Absent)])
            .await
            .is_err()
    );

    etcd.restart().await;
    s.health().await.unwrap();
    let mut w = s.watch("configmaps/", s.resource_version()).unwrap();
    let changes = s
        .commit(vec![put("configmaps/a/after", Precondition::Absent)])
        .await
        .unwrap();
    assert_eq!(changes[0].key, "configmaps/a/after");
    assert_eq!(w.next().await.unwrap().key, "configmaps/a/after");
    assert!(s.get("configmaps/a/down").is_none());
}
