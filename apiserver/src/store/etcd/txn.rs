//! A store transaction as one etcd txn: the preconditions are its compares, the writes
//! its success branch, and its failure branch reads back what the compares looked at,
//! so a failed transaction is reported as precisely as the in-memory engine does
//! (409 Conflict with the stored version, 404, 409 AlreadyExists).
//!
//! etcd refuses a txn with more than `--max-txn-ops` (default 128) compares, success
//! ops or failure ops, and counts a nested txn's ops against what its parent left
//! (`maxTxnOps - opc`, etcd's `checkTxnRequest`). A transaction stays one etcd txn,
//! so it stays atomic at one revision: more than 128 writes go into nested txns without
//! compares in the success branch (`S` of them, each with up to `128 - S` writes), and
//! the compares, which only work atomically at the top level, are capped at 128. A
//! transaction with more guarded operations than that is refused before it is sent,
//! with a [`StoreError::Storage`] that says so; callers keep theirs under it.

use etcd_client::{Compare, CompareOp, GetOptions, Txn, TxnOp, TxnOpResponse, TxnResponse};

use super::super::encryption::Encryption;
use super::super::{Precondition, StoreError, WriteOp};
use super::codec;
use super::keys::Keys;

/// What the compares guard, in the order the engine checks them.
enum Guard {
    Key {
        key: String,
        precondition: Precondition,
        /// A deletion also needs the key to exist.
        deleting: bool,
    },
    Empty {
        prefix: String,
        /// Keys under it that the transaction deletes first (and may still be there).
        deleted: usize,
    },
}

impl Guard {
    fn key(key: &str, precondition: Precondition, deleting: bool) -> Self {
        Self::Key {
            key: key.to_string(),
            precondition,
            deleting,
        }
    }
}

/// etcd's default `--max-txn-ops`: the most compares, success ops or failure ops one
/// txn (and, together with its parents', one nested txn) may have.
pub(crate) const MAX_TXN_OPS: usize = 128;

/// What a transaction's compares guard, to explain their failure.
pub(crate) struct Checks(Vec<Guard>);

/// A transaction ready to send.
pub(crate) struct Planned {
    pub(crate) txn: Txn,
    pub(crate) checks: Checks,
    /// Whether the transaction writes anything (and so gets a revision of its own).
    pub(crate) writes: bool,
    /// Each `Put`'s object as encoded for etcd, in the order of the operations.
    pub(crate) encoded: Vec<codec::Encoded>,
}

/// Builds the etcd txn for `ops`.
pub(crate) fn plan(
    keys: &Keys,
    encryption: Option<&Encryption>,
    ops: &[WriteOp],
) -> Result<Planned, StoreError> {
    let mut compares = Vec::new();
    let mut then = Vec::new();
    let mut reads = Vec::new();
    let mut guards = Vec::new();
    let mut encoded = Vec::new();
    // Keys this transaction deletes before the op at hand: a `CheckEmpty` after them
    // sees the prefix without them, as the engine applies operations in order, while
    // etcd evaluates every compare before any write.
    let mut deleted: Vec<String> = Vec::new();
    for op in ops {
        match op {
            WriteOp::Put {
                key,
                object,
                precondition,
            } => {
                let value = codec::encode(key, object, encryption)?;
                let etcd_key = keys.object(key);
                if guard(&mut compares, &mut reads, &etcd_key, *precondition, false) {
                    guards.push(Guard::key(key, *precondition, false));
                }
                then.push(TxnOp::put(etcd_key, value.value().to_vec(), None));
                encoded.push(value);
            }
            WriteOp::Delete { key, precondition } => {
                let etcd_key = keys.object(key);
                deleted.push(etcd_key.clone());
                if guard(&mut compares, &mut reads, &etcd_key, *precondition, true) {
                    guards.push(Guard::key(key, *precondition, true));
                }
                then.push(TxnOp::delete(etcd_key, None));
            }
            WriteOp::Check { key, precondition } => {
                let etcd_key = keys.object(key);
                if guard(&mut compares, &mut reads, &etcd_key, *precondition, false) {
                    guards.push(Guard::key(key, *precondition, false));
                }
            }
            WriteOp::CheckEmpty { prefix } => {
                let etcd_prefix = keys.object(prefix);
                let mut ours: Vec<&str> = deleted
                    .iter()
                    .map(String::as_str)
                    .filter(|k| k.starts_with(&etcd_prefix))
                    .collect();
                ours.sort_unstable();
                ours.dedup();
                compares.extend(empty_except(&etcd_prefix, &ours));
                reads.push(TxnOp::get(
                    etcd_prefix,
                    Some(GetOptions::new().with_prefix().with_count_only()),
                ));
                guards.push(Guard::Empty {
                    prefix: prefix.clone(),
                    deleted: ours.len(),
                });
            }
            WriteOp::PutMeta { key, value } => {
                then.push(TxnOp::put(keys.meta(key), value.clone(), None));
            }
        }
    }
    let writes = !then.is_empty();
    let then = fit(then, compares.len().max(reads.len()))?;
    let txn = Txn::new().when(compares).and_then(then).or_else(reads);
    Ok(Planned {
        txn,
        checks: Checks(guards),
        writes,
        encoded,
    })
}

/// The success branch for `then`, as it is when it fits etcd's limit beside `guards`
/// compares and failure reads; otherwise as nested txns of writes. The nested txns
/// have no compares, so they all apply whenever the top-level compares hold: the
/// transaction stays all-or-nothing at one revision.
fn fit(then: Vec<TxnOp>, guards: usize) -> Result<Vec<TxnOp>, StoreError> {
    if guards > MAX_TXN_OPS {
        return Err(StoreError::Storage(format!(
            "a transaction with {guards} preconditions exceeds etcd's {MAX_TXN_OPS} \
             compares per txn (--max-txn-ops); it was not applied"
        )));
    }
    if then.len() <= MAX_TXN_OPS {
        return Ok(then);
    }
    // `width` nested txns at the top level leave `MAX_TXN_OPS - width` ops to each: the
    // narrowest width that holds every write keeps the top level's count lowest.
    let writes = then.len();
    let width = (guards.max(1)..MAX_TXN_OPS)
        .find(|w| w * (MAX_TXN_OPS - w) >= writes)
        .ok_or_else(|| {
            StoreError::Storage(format!(
                "a transaction of {writes} writes beside {guards} preconditions exceeds what \
                 one etcd txn holds at --max-txn-ops {MAX_TXN_OPS}; it was not applied"
            ))
        })?;
    let per = MAX_TXN_OPS - width;
    let mut nested = Vec::with_capacity(writes.div_ceil(per));
    let mut rest = then.into_iter().peekable();
    while rest.peek().is_some() {
        let chunk: Vec<TxnOp> = rest.by_ref().take(per).collect();
        nested.push(TxnOp::txn(Txn::new().and_then(chunk)));
    }
    Ok(nested)
}

/// "Nothing under `prefix` but `ours`" (sorted) as range compares: every gap between
/// the keys the transaction deletes first must be empty. A compare over a range holds
/// when every key in it holds, and an empty range compares as one absent key
/// (version 0).
fn empty_except(prefix: &str, ours: &[&str]) -> Vec<Compare> {
    let mut end = prefix.as_bytes().to_vec();
    // The prefix's range end: its last byte incremented (keys end their prefix in '/').
    if let Some(last) = end.last_mut() {
        *last = last.saturating_add(1);
    }
    let mut compares = Vec::with_capacity(ours.len() + 1);
    let mut from = prefix.as_bytes().to_vec();
    for key in ours {
        if from.as_slice() < key.as_bytes() {
            compares.push(Compare::version(from, CompareOp::Equal, 0).with_range(*key));
        }
        // The first key after `key`.
        from = [key.as_bytes(), b"\0"].concat();
    }
    compares.push(Compare::version(from, CompareOp::Equal, 0).with_range(end));
    compares
}

/// The compare for one key, and the read that explains its failure; false if the
/// operation has nothing to check (a put without precondition), so neither is needed.
fn guard(
    compares: &mut Vec<Compare>,
    reads: &mut Vec<TxnOp>,
    etcd_key: &str,
    precondition: Precondition,
    deleting: bool,
) -> bool {
    let exists = || Compare::version(etcd_key, CompareOp::Greater, 0);
    match precondition {
        Precondition::None if deleting => compares.push(exists()),
        Precondition::None => return false,
        Precondition::Absent => compares.push(Compare::version(etcd_key, CompareOp::Equal, 0)),
        Precondition::Present => compares.push(exists()),
        // An absent key's mod_revision is 0, so for any real revision the one compare
        // also says the key exists: one compare per guarded key leaves more room
        // under --max-txn-ops.
        Precondition::ResourceVersion(0) => {
            compares.push(exists());
            compares.push(Compare::mod_revision(etcd_key, CompareOp::Equal, 0));
        }
        Precondition::ResourceVersion(rv) => {
            compares.push(Compare::mod_revision(
                etcd_key,
                CompareOp::Equal,
                i64::try_from(rv).unwrap_or(i64::MAX),
            ));
        }
    }
    reads.push(TxnOp::get(
        etcd_key,
        Some(GetOptions::new().with_keys_only()),
    ));
    true
}

/// Why a txn whose compares failed failed: the first guard that does not hold against
/// what its failure branch read, as the engine would have found it.
pub(crate) fn failure(checks: &Checks, response: &TxnResponse) -> StoreError {
    let reads = response.op_responses();
    for (guard, read) in checks.0.iter().zip(reads.iter()) {
        let TxnOpResponse::Get(read) = read else {
            continue;
        };
        match guard {
            Guard::Empty { prefix, deleted } => {
                if usize::try_from(read.count()).unwrap_or(usize::MAX) > *deleted {
                    return StoreError::NotEmpty(prefix.clone());
                }
            }
            Guard::Key {
                key,
                precondition,
                deleting,
            } => {
                let actual = read
                    .kvs()
                    .first()
                    .map(|kv| u64::try_from(kv.mod_revision()).unwrap_or(0));
                if let Err(e) = check(key, actual, *precondition, *deleting) {
                    return e;
                }
            }
        }
    }
    StoreError::Storage("etcd refused the transaction's compares, but none fails now".into())
}

fn check(
    key: &str,
    actual: Option<u64>,
    precondition: Precondition,
    deleting: bool,
) -> Result<(), StoreError> {
    match (precondition, actual) {
        (_, None) if deleting => Err(StoreError::NotFound(key.to_string())),
        (Precondition::None, _) | (Precondition::Absent, None) => Ok(()),
        (Precondition::Absent, Some(_)) => Err(StoreError::AlreadyExists(key.to_string())),
        (Precondition::Present | Precondition::ResourceVersion(_), None) => {
            Err(StoreError::NotFound(key.to_string()))
        }
        (Precondition::Present, Some(_)) => Ok(()),
        (Precondition::ResourceVersion(expected), Some(actual)) if expected != actual => {
            Err(StoreError::Conflict {
                key: key.to_string(),
                expected,
                actual,
            })
        }
        (Precondition::ResourceVersion(_), Some(_)) => Ok(()),
    }
}
