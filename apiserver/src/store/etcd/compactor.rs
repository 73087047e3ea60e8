//! kube-apiserver's compactor (`--etcd-compaction-interval`, `storage/etcd3/compact.go`):
//! every interval, compact etcd to the revision seen one interval earlier, so watches
//! can resume from anything written within the last interval or two.
//!
//! Every replica runs it, and a compare-and-swap on the version of one key,
//! `compact_rev_key` (kube-apiserver's, so mesopod and kube-apiserver sharing an etcd
//! take turns too), elects the one that compacts in each round: a replica whose CAS
//! fails learns the time and the revision the winner compacted to, and tries again
//! one interval later. If the winner dies, another takes over within two intervals.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, Txn, TxnOp, TxnOpResponse};

use super::super::StoreError;
use super::feed::Feed;
use super::storage;

/// kube-apiserver's key: its version is the round ("compact time"), its value the
/// revision compacted to.
pub(crate) const COMPACT_REV_KEY: &str = "compact_rev_key";

/// Where the compactor stands between rounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Round {
    /// The version of [`COMPACT_REV_KEY`] this replica expects (0: never written).
    pub(crate) time: i64,
    /// etcd's revision at the previous round: what this round compacts to.
    pub(crate) rev: i64,
}

/// One round: claims it by CAS and compacts to the previous round's revision, or learns
/// from the winner. Returns the next round and the revision etcd is now compacted to, if
/// known (none on the very first round, which only records where etcd stands).
pub(crate) async fn round(
    client: &mut Client,
    at: Round,
) -> Result<(Round, Option<i64>), StoreError> {
    let txn = Txn::new()
        .when([Compare::version(COMPACT_REV_KEY, CompareOp::Equal, at.time)])
        .and_then([TxnOp::put(COMPACT_REV_KEY, at.rev.to_string(), None)])
        .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
    let response = client.txn(txn).await.map_err(storage)?;
    let now = response.header().map_or(0, |h| h.revision());
    if !response.succeeded() {
        // Another replica compacted this round: follow it.
        let kv = response.op_responses().into_iter().find_map(|r| match r {
            TxnOpResponse::Get(get) => get.kvs().first().cloned(),
            _ => None,
        });
        let Some(kv) = kv else {
            return Err(StoreError::Storage(format!(
                "{COMPACT_REV_KEY} changed but cannot be read"
            )));
        };
        let compacted = std::str::from_utf8(kv.value())
            .ok()
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|r| *r > 0);
        let next = Round {
            time: kv.version(),
            rev: now,
        };
        return Ok((next, compacted));
    }
    let next = Round {
        time: at.time + 1,
        rev: now,
    };
    if at.rev == 0 {
        // kube-apiserver does not compact on bootstrap.
        return Ok((next, None));
    }
    client.compact(at.rev, None).await.map_err(storage)?;
    tracing::debug!(revision = at.rev, "compacted etcd");
    Ok((next, Some(at.rev)))
}

/// Runs rounds every `interval` for as long as the store's runtime runs. The view then
/// forgets what etcd no longer has, so a watch from below the compacted revision is 410
/// on every replica, not only where etcd itself answers it.
pub(crate) async fn run(feed: Arc<Feed>, mut client: Client, interval: Duration) {
    let mut at = Round::default();
    loop {
        tokio::time::sleep(interval).await;
        match round(&mut client, at).await {
            Ok((next, compacted)) => {
                at = next;
                if let Some(rev) = compacted.and_then(|r| u64::try_from(r).ok()) {
                    feed.view.forget_before(rev);
                }
            }
            Err(e) => tracing::warn!(error = %e, "etcd compaction failed; retrying next interval"),
        }
    }
}
