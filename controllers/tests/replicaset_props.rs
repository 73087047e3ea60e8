//! Properties of one ReplicaSet reconcile over arbitrary pod sets: it
//! creates or deletes exactly |active − replicas| pods, and deletes them in
//! kube-controller-manager's rank order, checked against a transliteration
//! of KCM's pairwise comparison (`ActivePodsWithRanks.Less`).

use std::collections::{BTreeMap, HashMap};

use controllers::replicaset::{ReplicaContext, reconcile};
use controllers::{Action, controller_ref, is_active, is_ready, ready_since};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

const NOW: &str = "2024-06-01T12:00:00Z";
/// Ages in seconds whose log2 buckets all differ, so KCM's comparison is a
/// consistent order on these pods (see `replicaset::rank`).
const AGES: [i64; 7] = [1, 4, 16, 64, 256, 1024, 4096];

fn now() -> Timestamp {
    NOW.parse().expect("now")
}

fn ago(secs: i64) -> Timestamp {
    now()
        .checked_sub(SignedDuration::from_secs(secs))
        .expect("in range")
}

fn web() -> BTreeMap<String, String> {
    BTreeMap::from([("app".to_owned(), "web".to_owned())])
}

fn rs(replicas: i32) -> ReplicaSet {
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("rs-uid".into()),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(web()),
                match_expressions: None,
            },
            template: Some(PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(web()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "c".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            min_ready_seconds: None,
        }),
        status: None,
    }
}

#[derive(Clone, Debug)]
struct PodShape {
    phase: Option<&'static str>,
    ready: bool,
    ready_age: Option<i64>,
    created_age: Option<i64>,
    node: &'static str,
    cost: Option<&'static str>,
    restarts: i32,
    deleting: bool,
    /// 0: ours, 1: orphan, 2: someone else's.
    owner: u8,
    matching: bool,
}

fn pod_shape() -> impl Strategy<Value = PodShape> {
    (
        (
            prop::sample::select(vec![
                Some("Running"),
                Some("Pending"),
                Some("Unknown"),
                Some("Succeeded"),
                Some("Failed"),
                None,
            ]),
            any::<bool>(),
            prop::option::weighted(0.9, prop::sample::select(AGES.to_vec())),
            prop::option::weighted(0.9, prop::sample::select(AGES.to_vec())),
        ),
        (
            prop::sample::select(vec!["", "n1", "n2", "n3"]),
            prop::sample::select(vec![None, Some("-5"), Some("0"), Some("3"), Some("abc")]),
            0..3i32,
            prop::bool::weighted(0.1),
            prop::sample::select(vec![0u8, 0, 0, 1, 2]),
            prop::bool::weighted(0.9),
        ),
    )
        .prop_map(
            |(
                (phase, ready, ready_age, created_age),
                (node, cost, restarts, deleting, owner, matching),
            )| {
                PodShape {
                    phase,
                    ready,
                    ready_age,
                    created_age,
                    node,
                    cost,
                    restarts,
                    deleting,
                    owner,
                    matching,
                }
            },
        )
}

fn build(i: usize, s: &PodShape) -> Pod {
    let owner = match s.owner {
        0 => Some(vec![controller_ref(&rs(0))]),
        1 => None,
        _ => {
            let mut other = controller_ref(&rs(0));
            other.uid = "other-uid".into();
            Some(vec![other])
        }
    };
    Pod {
        metadata: ObjectMeta {
            name: Some(format!("p{i}")),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{i:03}")),
            labels: Some(if s.matching {
                web()
            } else {
                BTreeMap::from([("app".to_owned(), "db".to_owned())])
            }),
            creation_timestamp: s.created_age.map(|a| Time(ago(a))),
            deletion_timestamp: s.deleting.then(|| Time(ago(1))),
            owner_references: owner,
            annotations: s.cost.map(|c| {
                BTreeMap::from([(
                    "controller.kubernetes.io/pod-deletion-cost".to_owned(),
                    c.to_owned(),
                )])
            }),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: (!s.node.is_empty()).then(|| s.node.to_owned()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: s.phase.map(Into::into),
            conditions: s.ready.then(|| {
                vec![PodCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    last_transition_time: s.ready_age.map(|a| Time(ago(a))),
                    ..Default::default()
                }]
            }),
            container_statuses: Some(vec![ContainerStatus {
                name: "c".into(),
                restart_count: s.restarts,
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

/// KCM's `ActivePodsWithRanks.Less`, step by step as in Go.
fn kcm_less(a: &Pod, b: &Pod, rank: &HashMap<&str, usize>) -> bool {
    let node = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default()
    };
    let (na, nb) = (node(a), node(b));
    if na != nb && (na.is_empty() || nb.is_empty()) {
        return na.is_empty();
    }
    let phase = |p: &Pod| match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Unknown") => 1,
        Some("Running") => 2,
        _ => 0,
    };
    if phase(a) != phase(b) {
        return phase(a) < phase(b);
    }
    if is_ready(a) != is_ready(b) {
        return !is_ready(a);
    }
    let cost = |p: &Pod| {
        let v = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|m| m.get("controller.kubernetes.io/pod-deletion-cost"))
            .cloned()
            .unwrap_or_default();
        v.parse::<i32>().unwrap_or(0)
    };
    if cost(a) != cost(b) {
        return cost(a) < cost(b);
    }
    let r = |p: &Pod| rank.get(node(p).as_str()).copied().unwrap_or(0);
    if r(a) != r(b) {
        return r(a) > r(b);
    }
    let log_rank = |t: Timestamp| {
        let d = now().as_nanosecond() - t.as_nanosecond();
        if d > 0 { (d as f64).log2() as i64 } else { -1 }
    };
    if is_ready(a) && is_ready(b) {
        let (ta, tb) = (ready_since(a), ready_since(b));
        if ta != tb {
            return match (ta, tb) {
                (Some(ta), Some(tb)) => {
                    let diff = log_rank(ta) - log_rank(tb);
                    if diff == 0 {
                        a.metadata.uid < b.metadata.uid
                    } else {
                        diff < 0
                    }
                }
                (None, _) => true,
                (_, None) => false,
            };
        }
    }
    let restarts = |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|c| c.iter().map(|c| c.restart_count).max())
            .unwrap_or(0)
    };
    if restarts(a) != restarts(b) {
        return restarts(a) > restarts(b);
    }
    let (ca, cb) = (
        a.metadata.creation_timestamp.as_ref().map(|t| t.0),
        b.metadata.creation_timestamp.as_ref().map(|t| t.0),
    );
    if ca != cb {
        return match (ca, cb) {
            (Some(ca), Some(cb)) => {
                let diff = log_rank(ca) - log_rank(cb);
                if diff == 0 {
                    a.metadata.uid < b.metadata.uid
                } else {
                    diff < 0
                }
            }
            (None, _) => true,
            (_, None) => false,
        };
    }
    false
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn creates_or_deletes_exactly_the_difference_in_rank_order(
        shapes in proptest::collection::vec(pod_shape(), 0..30),
        replicas in 0..30i32,
    ) {
        let pods: Vec<Pod> = shapes.iter().enumerate().map(|(i, s)| build(i, s)).collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let ctx = ReplicaContext { related_pods: &refs, expectations_satisfied: true };
        let r = reconcile(&rs(replicas), &refs, &ctx, now()).expect("reconcile");

        let claimed: Vec<&Pod> = pods
            .iter()
            .zip(&shapes)
            .filter(|(p, s)| is_active(p) && s.matching && s.owner != 2)
            .map(|(p, _)| p)
            .collect();
        let want = usize::try_from(replicas).expect("non-negative");
        prop_assert_eq!(r.pod_creations(), want.saturating_sub(claimed.len()));
        let deleted: Vec<&str> = r.pod_deletions().collect();
        prop_assert_eq!(deleted.len(), claimed.len().saturating_sub(want));

        let mut rank: HashMap<&str, usize> = HashMap::new();
        for p in pods.iter().filter(|p| is_active(p)) {
            let n = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("");
            *rank.entry(n).or_default() += 1;
        }
        let name = |p: &Pod| p.metadata.name.clone().unwrap_or_default();
        for d in &deleted {
            let gone = claimed.iter().find(|p| name(p) == *d);
            prop_assert!(gone.is_some(), "deleted {} is not one of the claimed pods", d);
            for kept in claimed.iter().filter(|p| !deleted.contains(&name(p).as_str())) {
                prop_assert!(
                    !kcm_less(kept, gone.expect("checked"), &rank),
                    "kept {} ranks before deleted {}", name(kept), d
                );
            }
        }
        // Adoptions and releases, then the pod calls, then the status.
        let kinds: Vec<u8> = r.actions.iter().map(|a| match a {
            Action::AdoptPod { .. } | Action::ReleasePod { .. } => 0,
            Action::CreatePod { .. } | Action::DeletePod { .. } => 1,
            _ => 2,
        }).collect();
        prop_assert!(kinds.windows(2).all(|w| w[0] <= w[1]), "{:?}", kinds);
    }
}
