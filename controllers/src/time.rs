//! Time as the controllers see it: `now` is an input (a
//! [`Timestamp`], the type k8s-openapi's `metav1.Time` wraps), never read
//! from a clock here.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// `now` as a stored `metav1.Time`: whole seconds, because that is all the
/// wire keeps (RFC 3339 without fractions). A condition written with
/// sub-second precision would read back different from what we computed,
/// and every later sync would think the status changed and write it again.
pub(crate) fn wire_time(now: Timestamp) -> Time {
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// `t + secs`, or `None` past the representable range (a malformed
/// duration must not panic; callers treat `None` as "never").
pub(crate) fn add_secs(t: Timestamp, secs: i64) -> Option<Timestamp> {
    t.checked_add(SignedDuration::from_secs(secs)).ok()
}

/// How long from `now` until `at`, zero if `at` is not in the future.
pub(crate) fn until(now: Timestamp, at: Timestamp) -> Duration {
    let d = at.duration_since(now);
    if d.is_negative() {
        Duration::ZERO
    } else {
        d.unsigned_abs()
    }
}

/// A requeue delay for something that happens at `at`, padded by a second
/// as kube-controller-manager does (`enqueueAfter(d, after+time.Second)`),
/// so a timer that fires a little early (or timestamps truncated to the
/// second) does not wake the controller just before the change.
pub(crate) fn requeue_at(now: Timestamp, at: Timestamp) -> Duration {
    until(now, at) + Duration::from_secs(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    #[test]
    fn wire_time_drops_fractions_of_a_second() {
        assert_eq!(
            wire_time(ts("2024-05-01T10:00:00.75Z")).0,
            ts("2024-05-01T10:00:00Z")
        );
    }

    #[test]
    fn until_is_zero_for_the_past_and_padded_requeue_adds_a_second() {
        let now = ts("2024-05-01T10:00:00Z");
        assert_eq!(until(now, ts("2024-05-01T09:00:00Z")), Duration::ZERO);
        assert_eq!(
            requeue_at(now, ts("2024-05-01T10:00:30Z")),
            Duration::from_secs(31)
        );
    }

    #[test]
    fn add_secs_out_of_range_is_none_not_a_panic() {
        assert_eq!(add_secs(Timestamp::MAX, 1), None);
        assert_eq!(add_secs(ts("2024-05-01T10:00:00Z"), i64::MAX), None);
    }
}
