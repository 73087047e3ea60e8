//! Properties of one Deployment reconcile over arbitrary observed states:
//! a rollout never runs more than `replicas + maxSurge` pods, and never
//! retires old pods below `replicas - maxUnavailable` available.

mod common;

use common::*;
use controllers::deployment::{
    DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, reconcile, resolve_fenceposts,
    templates_equal_ignoring_hash,
};
use controllers::{Action, ReconcileError};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use proptest::prelude::*;

/// One observed ReplicaSet: its template's image, size, pods, and the
/// annotations its last scale left.
#[derive(Clone, Debug)]
struct ObservedRs {
    image: u8,
    replicas: i32,
    status_replicas: i32,
    ready: i32,
    available: i32,
    desired: Option<i32>,
    max: Option<i32>,
}

#[derive(Clone, Debug)]
struct Observed {
    replicas: i32,
    surge: IntOrString,
    unavailable: IntOrString,
    /// The Deployment's image: one of the ReplicaSets' (it is the new one)
    /// or another (a rollout to start).
    image: u8,
    paused: bool,
    rses: Vec<ObservedRs>,
}

fn fencepost() -> impl Strategy<Value = IntOrString> {
    prop_oneof![
        (0..10i32).prop_map(IntOrString::Int),
        (0..=100i32).prop_map(|p| IntOrString::String(format!("{p}%"))),
    ]
}

fn observed_rs(replicas: i32, in_step: bool) -> impl Strategy<Value = ObservedRs> {
    (
        0u8..6,
        0..30i32,
        0..30i32,
        0..30i32,
        0..30i32,
        0..60i32,
        0..4u8,
    )
        .prop_map(move |(image, spec, st, ready, avail, max, annotations)| {
            let ready = ready.min(st);
            ObservedRs {
                image,
                replicas: spec,
                status_replicas: st,
                ready,
                available: avail.min(ready),
                // Mostly sized for the current replicas (a rollout, not a
                // scaling event), sometimes not, sometimes unannotated.
                desired: match annotations {
                    0 if !in_step => Some(max % 50),
                    1 => None,
                    _ => Some(replicas),
                },
                max: (annotations != 1).then_some(max),
            }
        })
}

fn observed(in_step: bool) -> impl Strategy<Value = Observed> {
    (0..50i32, fencepost(), fencepost(), 0u8..8, any::<bool>()).prop_flat_map(
        move |(replicas, surge, unavailable, image, paused)| {
            proptest::collection::vec(observed_rs(replicas, in_step), 1..5).prop_map(move |rses| {
                Observed {
                    replicas,
                    surge: surge.clone(),
                    unavailable: unavailable.clone(),
                    image,
                    paused: paused && !in_step,
                    rses,
                }
            })
        },
    )
}

/// The Deployment and its ReplicaSets (one per distinct image, oldest
/// first).
fn build(o: &Observed) -> (Deployment, Vec<ReplicaSet>) {
    let mut rses: Vec<ReplicaSet> = Vec::new();
    let mut seen = Vec::new();
    for (i, r) in o.rses.iter().enumerate() {
        if seen.contains(&r.image) {
            continue;
        }
        seen.push(r.image);
        let mut shape = deployment(o.replicas, &format!("img-{}", r.image));
        set_rolling(&mut shape, o.surge.clone(), o.unavailable.clone());
        let age = 10_000 - 100 * i64::try_from(i).unwrap_or(0);
        let mut rs = rs_for(
            &shape,
            i64::try_from(i).unwrap_or(0) + 1,
            r.replicas,
            r.available,
            age,
        );
        let status = rs.status.get_or_insert_with(Default::default);
        status.replicas = r.status_replicas;
        status.ready_replicas = Some(r.ready);
        status.available_replicas = Some(r.available);
        let ann = rs.metadata.annotations.get_or_insert_with(Default::default);
        ann.remove(DESIRED_REPLICAS_ANNOTATION);
        ann.remove(MAX_REPLICAS_ANNOTATION);
        if let Some(v) = r.desired {
            ann.insert(DESIRED_REPLICAS_ANNOTATION.into(), v.to_string());
        }
        if let Some(v) = r.max {
            ann.insert(MAX_REPLICAS_ANNOTATION.into(), v.to_string());
        }
        rses.push(rs);
    }
    let mut d = deployment(o.replicas, &format!("img-{}", o.image));
    set_rolling(&mut d, o.surge.clone(), o.unavailable.clone());
    spec(&mut d).paused = Some(o.paused);
    (d, rses)
}

/// The ReplicaSets after the reconcile's creates, updates and deletes.
fn apply(before: &[ReplicaSet], actions: &[Action]) -> Vec<ReplicaSet> {
    let mut after = before.to_vec();
    for a in actions {
        match a {
            Action::CreateReplicaSet { rs } => after.push(rs.clone()),
            Action::UpdateReplicaSet { rs } => {
                for r in after
                    .iter_mut()
                    .filter(|r| r.metadata.name == rs.metadata.name)
                {
                    *r = rs.clone();
                }
            }
            Action::DeleteReplicaSet { name, .. } => {
                after.retain(|r| r.metadata.name.as_deref() != Some(name.as_str()));
            }
            _ => {}
        }
    }
    after
}

fn fenceposts(o: &Observed) -> (i32, i32) {
    let (surge, unavailable) =
        resolve_fenceposts(Some(&o.surge), Some(&o.unavailable), o.replicas).expect("valid");
    let unavailable = if o.replicas == 0 {
        0
    } else {
        unavailable.min(o.replicas)
    };
    (surge, unavailable)
}

fn total(rses: &[ReplicaSet]) -> i64 {
    rses.iter().map(|r| i64::from(rs_replicas(r))).sum()
}

/// Available pods that will stay: per ReplicaSet, its available pods, but
/// no more than it is now asked to keep (its controller deletes the
/// unavailable ones first).
fn known_available(rses: &[ReplicaSet]) -> i64 {
    rses.iter()
        .map(|r| {
            let avail = r
                .status
                .as_ref()
                .and_then(|s| s.available_replicas)
                .unwrap_or(0);
            i64::from(avail.min(rs_replicas(r)).max(0))
        })
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn one_reconcile_never_exceeds_replicas_plus_max_surge(o in observed(false)) {
        let (d, before) = build(&o);
        let r = reconcile(&d, &before, &[], at(0)).expect("valid spec");
        let after = apply(&before, &r.actions);
        let (surge, _) = fenceposts(&o);
        let limit = i64::from(o.replicas + surge);
        prop_assert!(
            total(&after) <= total(&before).max(limit),
            "{} -> {} with limit {limit}: {:?}", total(&before), total(&after), r.actions
        );
    }

    #[test]
    fn a_rollout_never_retires_old_pods_below_min_available(o in observed(true)) {
        let (d, before) = build(&o);
        let r = reconcile(&d, &before, &[], at(0)).expect("valid spec");
        let after = apply(&before, &r.actions);
        let (_, unavailable) = fenceposts(&o);
        let min_available = i64::from(o.replicas - unavailable);
        let old_scaled_down = before.iter().any(|b| {
            let is_new = match (b.spec.as_ref().and_then(|s| s.template.as_ref()), d.spec.as_ref()) {
                (Some(t), Some(s)) => templates_equal_ignoring_hash(t, &s.template),
                _ => false,
            };
            !is_new
                && after
                    .iter()
                    .any(|a| a.metadata.name == b.metadata.name && rs_replicas(a) < rs_replicas(b))
        });
        if old_scaled_down {
            let floor = known_available(&before).min(min_available);
            prop_assert!(
                known_available(&after) >= floor,
                "available {} -> {} below {floor}: {:?}",
                known_available(&before), known_available(&after), r.actions
            );
        }
    }

    #[test]
    fn extreme_counts_and_annotations_never_panic(
        replicas in any::<i32>(),
        rses in proptest::collection::vec(
            (any::<i32>(), any::<i32>(), any::<i32>(), any::<i32>(), ".{0,4}", ".{0,4}", 0u8..3),
            0..4,
        ),
        collision in proptest::option::of(any::<i32>()),
        recreate in any::<bool>(),
    ) {
        let mut d = deployment(replicas, "img-new");
        if recreate {
            set_recreate(&mut d);
        }
        d.status = Some(k8s_openapi::api::apps::v1::DeploymentStatus {
            collision_count: collision,
            replicas: Some(replicas),
            ..Default::default()
        });
        let built: Vec<ReplicaSet> = rses
            .iter()
            .enumerate()
            .map(|(i, (spec, st, avail, generation, desired, max, image))| {
                let shape = deployment(1, &format!("img-{image}"));
                let mut rs = rs_for(&shape, i64::try_from(i).unwrap_or(0), *spec, *avail, 10);
                rs.metadata.name = Some(format!("rs-{i}"));
                rs.metadata.generation = Some(i64::from(*generation));
                if let Some(s) = rs.status.as_mut() {
                    s.replicas = *st;
                }
                let ann = rs.metadata.annotations.get_or_insert_with(Default::default);
                ann.insert(DESIRED_REPLICAS_ANNOTATION.into(), desired.clone());
                ann.insert(MAX_REPLICAS_ANNOTATION.into(), max.clone());
                rs
            })
            .collect();
        let _ = reconcile(&d, &built, &[], at(0));
    }

    #[test]
    fn any_fencepost_string_gives_a_result_or_an_error_never_a_panic(
        surge in ".{0,6}", unavailable in ".{0,6}", replicas in -5..100i32,
    ) {
        let mut d = deployment(replicas, "img");
        set_rolling(&mut d, IntOrString::String(surge), IntOrString::String(unavailable));
        match reconcile(&d, &[], &[], at(0)) {
            Ok(_) | Err(ReconcileError::IntOrPercent { .. }) => {}
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}
