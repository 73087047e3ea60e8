//! This process's writes in flight: what it sent to etcd, so the feed, when the watch
//! delivers the very bytes back, takes the object instead of parsing etcd's copy.
//!
//! A match is by key and by the bytes etcd holds, so it is right whoever wrote them:
//! equal bytes decode to an equal object. A write the watch never delivers (its txn
//! failed, or the feed reloaded) is withdrawn when its [`Sent`] guard drops, so nothing
//! is left behind, even when the writer's future is cancelled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;

use super::super::WriteOp;
use super::codec::Encoded;

/// A write as sent: its encoding and the object it was made from.
pub(crate) struct Pending {
    pub(crate) encoded: Arc<Encoded>,
    pub(crate) object: Value,
}

type Entries = HashMap<String, Vec<(u64, Pending)>>;

/// The writes in flight, by store key.
#[derive(Default)]
pub(crate) struct InFlight {
    by_key: Mutex<Entries>,
    next: AtomicU64,
}

impl InFlight {
    fn entries(&self) -> MutexGuard<'_, Entries> {
        self.by_key.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers the puts of `ops` (their objects move here; `encoded` holds one
    /// encoding per put, in order) until the returned guard drops.
    pub(crate) fn register(&self, ops: &mut [WriteOp], encoded: Vec<Encoded>) -> Sent<'_> {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let mut sent = Vec::with_capacity(encoded.len());
        let puts = ops.iter_mut().filter_map(|op| match op {
            WriteOp::Put { key, object, .. } => Some((key, object)),
            _ => None,
        });
        let mut entries = self.entries();
        for ((key, object), encoded) in puts.zip(encoded) {
            let encoded = Arc::new(encoded);
            sent.push((key.clone(), Arc::clone(&encoded)));
            let object = std::mem::take(object);
            entries
                .entry(key.clone())
                .or_default()
                .push((token, Pending { encoded, object }));
        }
        drop(entries);
        Sent {
            inflight: self,
            token,
            sent,
        }
    }

    /// The write of `key` in flight whose bytes are `value`, if this process sent one.
    pub(crate) fn take(&self, key: &str, value: &[u8]) -> Option<Pending> {
        let mut entries = self.entries();
        let list = entries.get_mut(key)?;
        let i = list.iter().position(|(_, p)| p.encoded.value() == value)?;
        let (_, pending) = list.remove(i);
        if list.is_empty() {
            entries.remove(key);
        }
        Some(pending)
    }

    fn withdraw(&self, token: u64, keys: &[(String, Arc<Encoded>)]) {
        let mut entries = self.entries();
        for (key, _) in keys {
            if let Some(list) = entries.get_mut(key) {
                list.retain(|(t, _)| *t != token);
                if list.is_empty() {
                    entries.remove(key);
                }
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries().values().map(Vec::len).sum()
    }
}

/// One transaction's puts in flight; dropping it withdraws what the feed did not take.
pub(crate) struct Sent<'a> {
    inflight: &'a InFlight,
    token: u64,
    /// Each put's key and encoding, in order.
    sent: Vec<(String, Arc<Encoded>)>,
}

impl Sent<'_> {
    /// The puts' keys and encodings, in the order of the operations.
    pub(crate) fn puts(&self) -> &[(String, Arc<Encoded>)] {
        &self.sent
    }
}

impl Drop for Sent<'_> {
    fn drop(&mut self) {
        self.inflight.withdraw(self.token, &self.sent);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::super::codec;
    use super::*;
    use crate::store::Precondition;

    fn put(key: &str, name: &str) -> WriteOp {
        WriteOp::Put {
            key: key.into(),
            object: json!({"metadata": {"name": name}}),
            precondition: Precondition::None,
        }
    }

    fn encoded(ops: &[WriteOp]) -> Vec<Encoded> {
        ops.iter()
            .filter_map(|op| match op {
                WriteOp::Put { key, object, .. } => Some(codec::encode(key, object, None).unwrap()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn the_feed_takes_a_write_by_its_bytes_and_a_dropped_guard_withdraws_the_rest() {
        let inflight = InFlight::default();
        let mut ops = vec![
            put("pods/a", "a"),
            WriteOp::Delete {
                key: "pods/b".into(),
                precondition: Precondition::None,
            },
            put("pods/c", "c"),
        ];
        let enc = encoded(&ops);
        let bytes_a = enc[0].value().to_vec();
        let sent = inflight.register(&mut ops, enc);
        assert_eq!(sent.puts().len(), 2);
        assert_eq!(inflight.len(), 2);
        // Other bytes under the key are someone else's write: not ours to take.
        assert!(inflight.take("pods/a", b"{\"metadata\":{}}").is_none());
        let taken = inflight.take("pods/a", &bytes_a).unwrap();
        assert_eq!(taken.object, json!({"metadata": {"name": "a"}}));
        assert!(inflight.take("pods/a", &bytes_a).is_none(), "taken once");
        drop(sent);
        assert_eq!(inflight.len(), 0, "the undelivered put is withdrawn");
    }

    #[test]
    fn a_guard_withdraws_only_its_own_writes() {
        let inflight = InFlight::default();
        let mut first = vec![put("pods/a", "a")];
        let mut second = vec![put("pods/a", "a")];
        let (e1, e2) = (encoded(&first), encoded(&second));
        let bytes = e1[0].value().to_vec();
        let one = inflight.register(&mut first, e1);
        let two = inflight.register(&mut second, e2);
        drop(one);
        assert_eq!(inflight.len(), 1);
        assert!(inflight.take("pods/a", &bytes).is_some());
        drop(two);
        assert_eq!(inflight.len(), 0);
    }
}
