//! client-go's event spam filter: a token bucket per event source and
//! involved object (burst 25, then one event per 5 minutes), so a
//! crash-looping pod cannot flood the store with events.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Event;

/// Events a source may record about one object at once.
pub(super) const BURST: f64 = 25.0;
/// One more token per this long.
pub(super) const REFILL: Duration = Duration::from_secs(300);
/// Buckets kept (client-go's LRU size); full ones go first beyond it.
const KEPT: usize = 4096;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: SystemTime,
}

impl Bucket {
    fn refilled(self, now: SystemTime) -> f64 {
        let elapsed = now.duration_since(self.at).unwrap_or_default();
        (self.tokens + elapsed.as_secs_f64() / REFILL.as_secs_f64()).min(BURST)
    }
}

/// The buckets, by source and involved object.
#[derive(Debug, Default)]
pub(crate) struct SpamFilter {
    buckets: Mutex<HashMap<String, Bucket>>,
}

/// client-go's `getSpamKey`: the source and the involved object.
pub(super) fn spam_key(e: &Event) -> String {
    let s = e.source.clone().unwrap_or_default();
    let o = &e.involved_object;
    [
        s.component.as_deref(),
        s.host.as_deref(),
        o.kind.as_deref(),
        o.namespace.as_deref(),
        o.name.as_deref(),
        o.uid.as_deref(),
        o.api_version.as_deref(),
    ]
    .map(|p| p.unwrap_or(""))
    .join("\u{0}")
}

impl SpamFilter {
    /// Whether `event` may be recorded at `now` (taking a token if so).
    pub(crate) fn allow(&self, event: &Event, now: SystemTime) -> bool {
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() >= KEPT {
            buckets.retain(|_, b| b.refilled(now) < BURST);
        }
        let bucket = buckets.entry(spam_key(event)).or_insert(Bucket {
            tokens: BURST,
            at: now,
        });
        let tokens = bucket.refilled(now);
        if tokens < 1.0 {
            return false;
        }
        *bucket = Bucket {
            tokens: tokens - 1.0,
            at: now,
        };
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_one_per_refill_per_object() {
        let f = SpamFilter::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut a = Event::default();
        a.involved_object.name = Some("a".into());
        let mut b = a.clone();
        b.involved_object.name = Some("b".into());
        let allowed = (0..40).filter(|_| f.allow(&a, t0)).count();
        assert_eq!(allowed, 25);
        assert!(f.allow(&b, t0), "another object has its own bucket");
        assert!(!f.allow(&a, t0 + Duration::from_secs(299)));
        assert!(f.allow(&a, t0 + Duration::from_secs(300)));
        assert!(!f.allow(&a, t0 + Duration::from_secs(301)));
    }
}
