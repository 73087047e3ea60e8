//! Which pods go first when a ReplicaSet scales down (KCM's
//! `ActivePodsWithRanks` with LogarithmicScaleDown, on by default since
//! 1.22).
//!
//! Deleted first, criterion by criterion:
//! 1. unscheduled (no `spec.nodeName`) before scheduled;
//! 2. phase Pending < Unknown < Running;
//! 3. not Ready before Ready;
//! 4. lower `controller.kubernetes.io/pod-deletion-cost` first;
//! 5. more active pods of the same owner family on its node first (spreads
//!    what remains);
//! 6. (both Ready) Ready more recently first, compared in log2 buckets of
//!    time-since-ready;
//! 7. more container restarts first (regular containers, then sidecars);
//! 8. newer first, creation time in log2 buckets;
//! 9. then by UID, an arbitrary but stable tiebreak (the randomness
//!    LogarithmicScaleDown wants among pods of similar age).
//!
//! # Deviation
//! KCM compares pairwise and, at step 6, breaks a same-bucket tie by UID at
//! once when the ready times differ, but goes on to steps 7–8 when they are
//! equal. That comparison is not transitive (three pods can rank in a
//! cycle), and Rust's sort may panic on such an order. Here every pod gets
//! a key and keys compare lexicographically, so a same-bucket tie at step 6
//! always goes on to steps 7–9. Whenever KCM's comparison is consistent on
//! a pod set (in particular when pods in one bucket share their ready
//! time), both give the same order.

use std::cmp::Reverse;
use std::collections::HashMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::pod_state::{is_active, is_ready, ready_since};

/// Pod annotation: the cost of deleting this pod relative to its siblings
/// (int32, default 0).
pub const POD_DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";

/// The `count` pods to delete from `pods`, first to go first.
///
/// `related` are the active-or-not pods of every ReplicaSet with the same
/// controller as this one, this one's included (KCM's
/// `getIndirectlyRelatedPods`); the active ones are counted per node for
/// criterion 5. Pass an empty slice for a ReplicaSet without a controller:
/// KCM then ranks every pod 0 on that criterion too.
pub fn pods_to_delete<'a>(
    pods: &[&'a Pod],
    related: &[&Pod],
    count: usize,
    now: Timestamp,
) -> Vec<&'a Pod> {
    // A Job asks on every sync, mostly for none: no need to rank its active pods.
    if count == 0 {
        return Vec::new();
    }
    let mut on_node: HashMap<&str, usize> = HashMap::new();
    for p in related.iter().filter(|p| is_active(p)) {
        *on_node.entry(node_name(p)).or_default() += 1;
    }
    let mut ranked: Vec<(DeletionKey<'a>, &'a Pod)> = pods
        .iter()
        .map(|p| {
            let colocated = on_node.get(node_name(p)).copied().unwrap_or(0);
            (DeletionKey::new(p, colocated, now), *p)
        })
        .collect();
    ranked.sort_by(|a, b| a.0.cmp(&b.0));
    ranked.into_iter().take(count).map(|(_, p)| p).collect()
}

/// A pod's place in the deletion order: smaller goes first. Field order is
/// the criteria order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct DeletionKey<'a> {
    scheduled: bool,
    phase: u8,
    ready: bool,
    deletion_cost: i32,
    colocated: Reverse<usize>,
    ready_bucket: i64,
    restarts: Reverse<i32>,
    sidecar_restarts: Reverse<i32>,
    age_bucket: i64,
    uid: &'a str,
}

impl<'a> DeletionKey<'a> {
    pub(crate) fn new(pod: &'a Pod, colocated: usize, now: Timestamp) -> Self {
        let ready = is_ready(pod);
        let (restarts, sidecar_restarts) = max_restarts(pod);
        DeletionKey {
            scheduled: !node_name(pod).is_empty(),
            phase: phase_ordinal(pod),
            ready,
            deletion_cost: deletion_cost(pod),
            colocated: Reverse(colocated),
            // Only ready pods are compared by ready time; for the others
            // this criterion is a tie.
            ready_bucket: if ready {
                log_bucket(ready_since(pod), now)
            } else {
                0
            },
            restarts: Reverse(restarts),
            sidecar_restarts: Reverse(sidecar_restarts),
            age_bucket: log_bucket(pod.metadata.creation_timestamp.as_ref().map(|t| t.0), now),
            uid: pod.metadata.uid.as_deref().unwrap_or_default(),
        }
    }
}

fn node_name(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
}

/// Pending 0 < Unknown 1 < Running 2; anything else (no phase) ranks as
/// Pending, as Go's map lookup defaults to 0.
fn phase_ordinal(pod: &Pod) -> u8 {
    match pod.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Unknown") => 1,
        Some("Running") => 2,
        _ => 0,
    }
}

/// The pod-deletion-cost annotation as KCM reads it: a plain decimal int32
/// (no `+`, no leading zeros); anything else counts as 0.
pub(crate) fn deletion_cost(pod: &Pod) -> i32 {
    let Some(v) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(POD_DELETION_COST_ANNOTATION))
    else {
        return 0;
    };
    let valid_first = match v.as_bytes().first() {
        Some(b'-') | Some(b'1'..=b'9') => true,
        Some(b'0') => v == "0",
        _ => false,
    };
    if !valid_first {
        return 0;
    }
    v.parse().unwrap_or(0)
}

/// Highest restart count among regular containers, and among sidecars
/// (init containers with `restartPolicy: Always`).
fn max_restarts(pod: &Pod) -> (i32, i32) {
    let Some(status) = pod.status.as_ref() else {
        return (0, 0);
    };
    let regular = status
        .container_statuses
        .iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
        .max(0);
    let sidecars: Vec<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let sidecar = status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|c| sidecars.contains(&c.name.as_str()))
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
        .max(0);
    (regular, sidecar)
}

/// `floor(log2(now - t))` in nanoseconds, -1 when `t` is not in the past,
/// and below every bucket when `t` is unknown (KCM's `afterOrZero` puts
/// the zero time first). Exact integer log2: Go's float64 `math.Log2`
/// differs only within a few nanoseconds of a power of two.
fn log_bucket(t: Option<Timestamp>, now: Timestamp) -> i64 {
    let Some(t) = t else {
        return i64::MIN;
    };
    let nanos = now.as_nanosecond() - t.as_nanosecond();
    if nanos <= 0 {
        return -1;
    }
    i64::from(127 - nanos.leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerStatus, PodCondition, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use std::collections::BTreeMap;

    const NOW: &str = "2024-01-01T12:00:00Z";

    fn ts(s: &str) -> Timestamp {
        s.parse().expect("test timestamp")
    }

    /// A running, ready, scheduled pod created and ready an hour ago.
    fn pod(uid: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(uid.into()),
                uid: Some(uid.into()),
                creation_timestamp: Some(Time(ts("2024-01-01T11:00:00Z"))),
                ..Default::default()
            },
            spec: Some(PodSpec {
                node_name: Some("n1".into()),
                ..Default::default()
            }),
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: Some(Time(ts("2024-01-01T11:00:00Z"))),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    fn first(pods: &[Pod], related: &[Pod]) -> String {
        let refs: Vec<&Pod> = pods.iter().collect();
        let related: Vec<&Pod> = related.iter().collect();
        pods_to_delete(&refs, &related, 1, ts(NOW))
            .first()
            .and_then(|p| p.metadata.uid.clone())
            .unwrap_or_default()
    }

    fn with<F: FnOnce(&mut Pod)>(uid: &str, f: F) -> Pod {
        let mut p = pod(uid);
        f(&mut p);
        p
    }

    fn status(p: &mut Pod) -> &mut PodStatus {
        p.status.get_or_insert_with(Default::default)
    }

    #[test]
    fn unscheduled_goes_before_scheduled() {
        let a = with("a", |p| p.spec = Some(PodSpec::default()));
        assert_eq!(first(&[pod("0"), a], &[]), "a");
    }

    #[test]
    fn pending_before_unknown_before_running() {
        let pending = with("p", |p| status(p).phase = Some("Pending".into()));
        let unknown = with("u", |p| status(p).phase = Some("Unknown".into()));
        assert_eq!(first(&[pod("0"), unknown.clone(), pending], &[]), "p");
        assert_eq!(first(&[pod("0"), unknown], &[]), "u");
    }

    #[test]
    fn not_ready_before_ready() {
        let nr = with("z", |p| status(p).conditions = None);
        assert_eq!(first(&[pod("0"), nr], &[]), "z");
    }

    #[test]
    fn lower_deletion_cost_first_and_malformed_cost_is_zero() {
        let cost = |uid: &str, v: &str| {
            with(uid, |p| {
                p.metadata.annotations = Some(BTreeMap::from([(
                    POD_DELETION_COST_ANNOTATION.to_owned(),
                    v.to_owned(),
                )]))
            })
        };
        assert_eq!(first(&[pod("0"), cost("z", "-5")], &[]), "z");
        assert_eq!(first(&[cost("a", "10"), pod("z")], &[]), "z");
        for bad in ["+10", "007", "abc", "99999999999", ""] {
            assert_eq!(deletion_cost(&cost("x", bad)), 0, "{bad}");
        }
        assert_eq!(deletion_cost(&cost("x", "0")), 0);
        assert_eq!(deletion_cost(&cost("x", "-7")), -7);
    }

    #[test]
    fn more_colocated_family_pods_first() {
        let lonely = with("a", |p| {
            p.spec.get_or_insert_with(Default::default).node_name = Some("n2".into())
        });
        let crowded = pod("z");
        let related = vec![pod("r1"), pod("r2"), lonely.clone()];
        assert_eq!(first(&[lonely.clone(), crowded.clone()], &related), "z");
        // Without related pods (no controller) the criterion is a tie.
        assert_eq!(first(&[lonely, crowded], &[]), "a");
    }

    #[test]
    fn ready_more_recently_first_in_log_buckets() {
        let recent = with("z", |p| {
            status(p).conditions = Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(Time(ts("2024-01-01T11:59:00Z"))),
                ..Default::default()
            }])
        });
        assert_eq!(first(&[pod("a"), recent], &[]), "z");
        // 60 and 61 minutes ago share a bucket: on to restarts, age, UID.
        let close = with("b", |p| {
            status(p).conditions = Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(Time(ts("2024-01-01T10:59:00Z"))),
                ..Default::default()
            }])
        });
        assert_eq!(first(&[pod("c"), close], &[]), "b");
    }

    #[test]
    fn more_restarts_first_then_sidecar_restarts() {
        let restarts = |uid: &str, n: i32| {
            with(uid, |p| {
                status(p).container_statuses = Some(vec![ContainerStatus {
                    name: "c".into(),
                    restart_count: n,
                    ..Default::default()
                }])
            })
        };
        assert_eq!(first(&[restarts("a", 1), restarts("z", 4)], &[]), "z");
        let sidecar = with("z", |p| {
            p.spec.get_or_insert_with(Default::default).init_containers = Some(vec![Container {
                name: "proxy".into(),
                restart_policy: Some("Always".into()),
                ..Default::default()
            }]);
            status(p).init_container_statuses = Some(vec![ContainerStatus {
                name: "proxy".into(),
                restart_count: 2,
                ..Default::default()
            }]);
        });
        assert_eq!(first(&[pod("a"), sidecar], &[]), "z");
    }

    #[test]
    fn newer_first_in_log_buckets_then_uid() {
        let newer = with("z", |p| {
            p.metadata.creation_timestamp = Some(Time(ts("2024-01-01T11:50:00Z")))
        });
        assert_eq!(first(&[pod("a"), newer], &[]), "z");
        let no_time = with("y", |p| p.metadata.creation_timestamp = None);
        assert_eq!(first(&[pod("a"), no_time], &[]), "y");
        assert_eq!(first(&[pod("b"), pod("a")], &[]), "a");
    }

    #[test]
    fn log_bucket_is_floor_log2_of_nanoseconds() {
        let now = ts(NOW);
        assert_eq!(log_bucket(Some(ts("2024-01-01T12:00:01Z")), now), -1);
        assert_eq!(log_bucket(Some(now), now), -1);
        // 1 s = 1e9 ns; 2^29 = 5.4e8 ≤ 1e9 < 2^30.
        assert_eq!(log_bucket(Some(ts("2024-01-01T11:59:59Z")), now), 29);
        assert_eq!(log_bucket(None, now), i64::MIN);
    }

    #[test]
    fn count_past_the_pods_takes_them_all() {
        let pods = [pod("a"), pod("b")];
        let refs: Vec<&Pod> = pods.iter().collect();
        assert_eq!(pods_to_delete(&refs, &[], 5, ts(NOW)).len(), 2);
    }
}
