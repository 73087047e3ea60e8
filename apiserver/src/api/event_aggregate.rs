//! client-go's `EventAggregator` (`tools/record/events_cache.go`): events
//! that differ only in their message (same source, involved object, type,
//! reason, reporting controller and instance) are counted per group; once
//! [`MAX_EVENTS`] distinct messages were seen within a rolling
//! [`INTERVAL`], each further one is recorded as a single event of the
//! group whose message is `(combined from similar events): <latest>`, so a
//! probe whose output changes every time does not write a new event per
//! attempt.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Event;

/// Distinct messages in a group before its events are combined
/// (client-go's `defaultAggregateMaxEvents`).
pub(super) const MAX_EVENTS: usize = 10;
/// A group not seen for longer than this starts afresh
/// (`defaultAggregateIntervalInSeconds`).
pub(super) const INTERVAL: Duration = Duration::from_secs(600);
/// Groups kept (client-go's LRU size); stale ones go first beyond it.
const KEPT: usize = 4096;
/// client-go's `EventAggregatorByReasonMessageFunc` prefix.
pub(super) const COMBINED: &str = "(combined from similar events): ";

#[derive(Debug)]
struct Group {
    messages: HashSet<String>,
    last: SystemTime,
}

/// The groups, by client-go's aggregate key.
#[derive(Debug, Default)]
pub(crate) struct Aggregator {
    groups: Mutex<HashMap<String, Group>>,
}

/// client-go's `EventAggregatorByReasonFunc` key: everything but the
/// message (and the field path).
pub(super) fn aggregate_key(e: &Event) -> String {
    [
        super::event_spam::spam_key(e).as_str(),
        e.type_.as_deref().unwrap_or(""),
        e.reason.as_deref().unwrap_or(""),
        e.reporting_component.as_deref().unwrap_or(""),
        e.reporting_instance.as_deref().unwrap_or(""),
    ]
    .join("\u{0}")
}

impl Aggregator {
    /// Notes `event` at `now`; returns it as it should be recorded:
    /// unchanged, or combined (its message prefixed, its field path
    /// dropped, as client-go's aggregate copy has none).
    pub(crate) fn aggregate(&self, mut event: Event, now: SystemTime) -> (Event, bool) {
        let key = aggregate_key(&event);
        let message = event.message.clone().unwrap_or_default();
        let mut groups = self
            .groups
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let stale = |g: &Group| now.duration_since(g.last).unwrap_or_default() > INTERVAL;
        if groups.len() >= KEPT {
            groups.retain(|_, g| !stale(g));
        }
        let group = groups.entry(key).or_insert_with(|| Group {
            messages: HashSet::new(),
            last: now,
        });
        if stale(group) {
            group.messages.clear();
        }
        group.last = now;
        let fresh = group.messages.insert(message.clone());
        if group.messages.len() < MAX_EVENTS {
            return (event, false);
        }
        // client-go pops an arbitrary key to keep the set below the
        // threshold; popping the one just added is one of its choices, and
        // keeps every further new message combined.
        if fresh {
            group.messages.remove(&message);
        } else if let Some(other) = group.messages.iter().find(|m| **m != message).cloned() {
            group.messages.remove(&other);
        }
        event.message = Some(format!("{COMBINED}{message}"));
        event.involved_object.field_path = None;
        event.count = Some(1);
        (event, true)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ev(reason: &str, message: &str) -> Event {
        let mut e = Event::default();
        e.involved_object.name = Some("p".into());
        e.reason = Some(reason.into());
        e.message = Some(message.into());
        e
    }

    #[test]
    fn the_tenth_distinct_message_within_the_interval_is_combined() {
        let a = Aggregator::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        for i in 0..9 {
            let (e, combined) = a.aggregate(ev("Unhealthy", &format!("m{i}")), t0);
            assert!(!combined);
            assert_eq!(e.message.as_deref(), Some(format!("m{i}").as_str()));
        }
        // A repeat of a message seen is not new.
        assert!(!a.aggregate(ev("Unhealthy", "m3"), t0).1);
        // Another reason is another group.
        assert!(!a.aggregate(ev("Killing", "m9"), t0).1);
        let (e, combined) = a.aggregate(ev("Unhealthy", "m9"), t0);
        assert!(combined);
        assert_eq!(
            e.message.as_deref(),
            Some("(combined from similar events): m9")
        );
        // Every further new message is combined too.
        let (e, combined) = a.aggregate(ev("Unhealthy", "m10"), t0 + Duration::from_secs(1));
        assert!(combined, "{e:?}");
    }

    #[test]
    fn a_group_quiet_for_longer_than_the_interval_starts_afresh() {
        let a = Aggregator::default();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        // Nine messages, each under ten minutes after the one before:
        // the interval is rolling.
        for i in 0..9u64 {
            let at = t0 + Duration::from_secs(590 * i);
            assert!(!a.aggregate(ev("Unhealthy", &format!("m{i}")), at).1);
        }
        let last = t0 + Duration::from_secs(590 * 8);
        assert!(a.aggregate(ev("Unhealthy", "m9"), last).1);
        let later = last + INTERVAL + Duration::from_secs(1);
        let (e, combined) = a.aggregate(ev("Unhealthy", "m10"), later);
        assert!(!combined);
        assert_eq!(e.message.as_deref(), Some("m10"));
    }
}
