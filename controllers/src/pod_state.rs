//! What a controller reads from a pod: active, ready, available (KCM's
//! `IsPodActive`, `podutil.IsPodReady`, `podutil.IsPodAvailable`).

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::time::add_secs;

/// Not Succeeded, not Failed, and not being deleted: a pod that counts
/// towards `spec.replicas`. A terminating pod does not count, so its
/// replacement starts at once.
pub fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed")) && pod.metadata.deletion_timestamp.is_none()
}

/// The pod's `Ready` condition is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// When the pod last became Ready: the `Ready=True` condition's
/// lastTransitionTime (`None` if not ready or not recorded).
pub fn ready_since(pod: &Pod) -> Option<Timestamp> {
    ready_condition(pod)
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// Ready, and ready for longer than `min_ready_seconds` at `now`.
///
/// As in KCM the comparison is strict (`lastTransitionTime + minReady`
/// must be *before* now), and with minReadySeconds > 0 a Ready condition
/// without a lastTransitionTime never counts as available (it cannot be
/// shown to have lasted). minReadySeconds ≤ 0 means ready is available.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !is_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    becomes_available_at(pod, min_ready_seconds).is_some_and(|at| at < now)
}

/// For a ready pod with minReadySeconds > 0: the instant after which it
/// counts as available (`lastTransitionTime + minReadySeconds`), so a
/// controller can requeue for it. `None` when not ready, when ready
/// counts at once, or when it never will (no lastTransitionTime).
pub fn becomes_available_at(pod: &Pod, min_ready_seconds: i32) -> Option<Timestamp> {
    if min_ready_seconds <= 0 {
        return None;
    }
    add_secs(ready_since(pod)?, i64::from(min_ready_seconds))
}

fn ready_condition(pod: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    fn pod(phase: &str, ready: Option<(&str, Option<&str>)>) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                conditions: ready.map(|(status, ltt)| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: status.into(),
                        last_transition_time: ltt.map(|t| Time(ts(t))),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn active_excludes_finished_and_terminating_pods() {
        assert!(is_active(&pod("Running", None)));
        assert!(is_active(&pod("Pending", None)));
        assert!(is_active(&Pod::default()));
        assert!(!is_active(&pod("Succeeded", None)));
        assert!(!is_active(&pod("Failed", None)));
        let mut deleting = pod("Running", None);
        deleting.metadata.deletion_timestamp = Some(Time(ts("2024-01-01T00:00:00Z")));
        assert!(!is_active(&deleting));
    }

    #[test]
    fn ready_is_the_ready_condition_true() {
        assert!(is_ready(&pod("Running", Some(("True", None)))));
        assert!(!is_ready(&pod("Running", Some(("False", None)))));
        assert!(!is_ready(&pod("Running", None)));
    }

    #[test]
    fn available_needs_min_ready_seconds_strictly_passed() {
        let p = pod("Running", Some(("True", Some("2024-01-01T00:00:00Z"))));
        assert!(is_available(&p, 0, ts("2024-01-01T00:00:00Z")));
        assert!(!is_available(&p, 10, ts("2024-01-01T00:00:09Z")));
        assert!(!is_available(&p, 10, ts("2024-01-01T00:00:10Z")));
        assert!(is_available(&p, 10, ts("2024-01-01T00:00:10.001Z")));
        assert_eq!(
            becomes_available_at(&p, 10),
            Some(ts("2024-01-01T00:00:10Z"))
        );
        assert_eq!(becomes_available_at(&p, 0), None);
    }

    #[test]
    fn ready_without_transition_time_is_never_available_with_min_ready() {
        let p = pod("Running", Some(("True", None)));
        assert!(is_available(&p, 0, ts("2024-01-01T00:00:00Z")));
        assert!(!is_available(&p, 5, ts("2030-01-01T00:00:00Z")));
        assert_eq!(becomes_available_at(&p, 5), None);
    }
}
