//! Per-rule tests of one DaemonSet sync.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetStatus, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{
    Container, Node, NodeSpec, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::action::Status;
use k8s_openapi::api::apps::v1::ControllerRevision;

pub(crate) fn now() -> Timestamp {
    "2024-06-01T12:00:00Z".parse().expect("now")
}

fn app() -> BTreeMap<String, String> {
    [("app".to_owned(), "agent".to_owned())].into()
}

pub(crate) fn daemonset(image: &str, generation: i64) -> DaemonSet {
    DaemonSet {
        metadata: ObjectMeta {
            name: Some("agent".into()),
            namespace: Some("ns".into()),
            uid: Some("ds-uid".into()),
            generation: Some(generation),
            annotations: Some(
                [(
                    TEMPLATE_GENERATION_ANNOTATION.to_owned(),
                    generation.to_string(),
                )]
                .into(),
            ),
            ..Default::default()
        },
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(app()),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(app()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "c".into(),
                        image: Some(image.into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDaemonSet {
                    max_unavailable: Some(IntOrString::Int(1)),
                    max_surge: Some(IntOrString::Int(0)),
                }),
            }),
            ..Default::default()
        }),
        status: None,
    }
}

pub(crate) fn node(name: &str, labels: &[(&str, &str)]) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A running, ready (for an hour) pod of `ds`'s current template on `node`.
pub(crate) fn pod_on(ds: &DaemonSet, node: &str, name: &str) -> Pod {
    let ctx = DaemonContext {
        expectations_satisfied: true,
        failed_pod_backoff: &BTreeMap::new(),
        revisions: &[],
    };
    let n = self::node(node, &[]);
    let planned = reconcile(ds, &[&n], &[], &ctx, now()).expect("reconcile");
    let mut pod = planned
        .reconciled
        .actions
        .into_iter()
        .find_map(|a| match a {
            Action::CreatePod { pod } => Some(pod),
            _ => None,
        })
        .expect("a pod to create");
    pod.metadata.name = Some(name.into());
    pod.metadata.uid = Some(format!("{name}-uid"));
    pod.metadata.creation_timestamp = Some(Time("2024-06-01T10:00:00Z".parse().expect("t")));
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node.into());
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: Some(Time("2024-06-01T11:00:00Z".parse().expect("t"))),
            ..Default::default()
        }]),
        ..Default::default()
    });
    pod
}

/// A sync of `ds` whose current template's revision exists already (so the sync
/// has no history to write).
pub(crate) fn run(ds: &DaemonSet, nodes: &[Node], pods: &[Pod]) -> DaemonReconciled {
    let nodes: Vec<&Node> = nodes.iter().collect();
    let pods: Vec<&Pod> = pods.iter().collect();
    let revisions = vec![current_revision(ds, 1)];
    let ctx = DaemonContext {
        expectations_satisfied: true,
        failed_pod_backoff: &BTreeMap::new(),
        revisions: &revisions,
    };
    reconcile(ds, &nodes, &pods, &ctx, now()).expect("reconcile")
}

/// The revision a sync of `ds` with no history creates, numbered `revision`.
fn current_revision(ds: &DaemonSet, revision: i64) -> ControllerRevision {
    let created = history::construct(ds, &[], &revision_hash(ds));
    match created.into_iter().next() {
        Some(Action::CreateControllerRevision { revision: mut r }) => {
            r.revision = revision;
            r.metadata.uid = Some(format!(
                "{}-uid",
                r.metadata.name.clone().unwrap_or_default()
            ));
            r
        }
        other => panic!("{other:?}"),
    }
}

fn revision_writes(ds: &DaemonSet, revisions: &[ControllerRevision], pods: &[Pod]) -> Vec<Action> {
    let pods: Vec<&Pod> = pods.iter().collect();
    let ctx = DaemonContext {
        expectations_satisfied: true,
        failed_pod_backoff: &BTreeMap::new(),
        revisions,
    };
    reconcile(ds, &[], &pods, &ctx, now())
        .expect("reconcile")
        .reconciled
        .actions
        .into_iter()
        .filter(|a| {
            matches!(
                a,
                Action::CreateControllerRevision { .. }
                    | Action::UpdateControllerRevision { .. }
                    | Action::DeleteControllerRevision { .. }
            )
        })
        .collect()
}

#[test]
fn each_template_is_recorded_once_numbered_above_the_rest_and_history_is_trimmed() {
    let v1 = daemonset("a:1", 1);
    // No history: the template's revision is made, named by the pods' hash, labelled
    // and owned as KCM makes it.
    let made = current_revision(&v1, 1);
    let hash = revision_hash(&v1);
    assert_eq!(
        made.metadata.name.as_deref(),
        Some(format!("agent-{hash}").as_str())
    );
    let labels = made.metadata.labels.clone().expect("labels");
    assert_eq!(labels["controller-revision-hash"], hash);
    assert_eq!(labels["app"], "agent");
    assert_eq!(
        made.metadata.owner_references.as_ref().expect("owner")[0].kind,
        "DaemonSet"
    );
    assert_eq!(
        crate::history::template_patch(&v1.spec.as_ref().expect("spec").template),
        made.data.clone().expect("data").0
    );
    // A new template gets the next number.
    let v2 = daemonset("a:2", 2);
    match revision_writes(&v2, std::slice::from_ref(&made), &[]).as_slice() {
        [Action::CreateControllerRevision { revision }] => assert_eq!(revision.revision, 2),
        other => panic!("{other:?}"),
    }
    // Back to the first template (`rollout undo`): its revision is renumbered above.
    let second = current_revision(&v2, 2);
    let back = daemonset("a:1", 3);
    match revision_writes(&back, &[made.clone(), second.clone()], &[]).as_slice() {
        [Action::UpdateControllerRevision { revision }] => {
            assert_eq!(revision.metadata.name, made.metadata.name);
            assert_eq!(revision.revision, 3);
        }
        other => panic!("{other:?}"),
    }
    // revisionHistoryLimit 1 keeps one old revision besides the current one; one a
    // live pod still runs is kept and not counted.
    let mut limited = daemonset("a:3", 3);
    limited.spec.as_mut().expect("spec").revision_history_limit = Some(1);
    let current = current_revision(&limited, 3);
    let all = [made.clone(), second.clone(), current];
    let writes = revision_writes(&limited, &all, &[]);
    assert_eq!(
        writes,
        [Action::DeleteControllerRevision {
            name: made.metadata.name.clone().expect("name"),
            uid: made.metadata.uid.clone().expect("uid"),
        }]
    );
    let still_running = pod_on(&v1, "n1", "p1");
    assert_eq!(revision_writes(&limited, &all, &[still_running]), []);
}

fn created_on(r: &DaemonReconciled) -> Vec<String> {
    r.reconciled
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::CreatePod { pod } => nodes::target_node(pod).map(str::to_owned),
            _ => None,
        })
        .collect()
}

fn deleted(r: &DaemonReconciled) -> Vec<String> {
    r.reconciled.pod_deletions().map(str::to_owned).collect()
}

fn status(r: &DaemonReconciled) -> DaemonSetStatus {
    match r.reconciled.status() {
        Some(Status::DaemonSet(s)) => s.clone(),
        other => panic!("no DaemonSet status: {other:?}"),
    }
}

#[test]
fn every_node_gets_one_pod_and_the_status_counts_them() {
    let ds = daemonset("a:1", 1);
    let nodes = [node("n1", &[]), node("n2", &[]), node("n3", &[])];
    let r = run(&ds, &nodes, &[]);
    assert_eq!(created_on(&r), ["n1", "n2", "n3"]);
    let s = status(&r);
    assert_eq!(
        (
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_unavailable
        ),
        (3, 0, Some(3))
    );
    assert_eq!(s.observed_generation, Some(1));

    let pods = [
        pod_on(&ds, "n1", "p1"),
        pod_on(&ds, "n2", "p2"),
        pod_on(&ds, "n3", "p3"),
    ];
    let r = run(&ds, &nodes, &pods);
    assert!(created_on(&r).is_empty() && deleted(&r).is_empty());
    let s = status(&r);
    assert_eq!(
        (
            s.desired_number_scheduled,
            s.current_number_scheduled,
            s.number_ready,
            s.updated_number_scheduled,
            s.number_available,
            s.number_unavailable,
            s.number_misscheduled
        ),
        (3, 3, 3, Some(3), Some(3), None, 0)
    );
    // Steady state: nothing to write.
    let mut settled = ds.clone();
    settled.status = Some(s);
    assert_eq!(run(&settled, &nodes, &pods).reconciled.actions, []);
}

#[test]
fn a_node_selector_excludes_nodes_and_a_pod_there_is_misscheduled_then_deleted() {
    let mut ds = daemonset("a:1", 1);
    ds.spec
        .as_mut()
        .expect("present")
        .template
        .spec
        .as_mut()
        .expect("present")
        .node_selector = Some([("role".to_owned(), "edge".to_owned())].into());
    let nodes = [node("n1", &[("role", "edge")]), node("n2", &[])];
    let r = run(&ds, &nodes, &[]);
    assert_eq!(created_on(&r), ["n1"]);
    assert_eq!(status(&r).desired_number_scheduled, 1);

    // A pod of the DaemonSet on n2 (the label was removed from the node).
    let mut stray = pod_on(&daemonset("a:1", 1), "n2", "stray");
    stray.metadata.owner_references = Some(vec![controller_ref(&ds)]);
    let r = run(&ds, &nodes, &[stray]);
    assert_eq!(deleted(&r), ["stray"]);
    assert_eq!(status(&r).number_misscheduled, 1);
}

#[test]
fn a_tainted_node_gets_no_pod_unless_tolerated_and_node_problems_are_tolerated() {
    let ds = daemonset("a:1", 1);
    let mut tainted = node("n1", &[]);
    tainted.spec = Some(NodeSpec {
        taints: Some(vec![Taint {
            key: "dedicated".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let mut unreachable = node("n2", &[]);
    unreachable.spec = Some(NodeSpec {
        taints: Some(vec![Taint {
            key: "node.kubernetes.io/unreachable".into(),
            effect: "NoExecute".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    let r = run(&ds, &[tainted.clone(), unreachable], &[]);
    assert_eq!(created_on(&r), ["n2"]);
    // The NoSchedule taint keeps the pod that already runs there.
    let r = run(&ds, &[tainted], &[pod_on(&ds, "n1", "p1")]);
    assert!(deleted(&r).is_empty());
}

#[test]
fn a_rolling_update_replaces_at_most_max_unavailable_pods_at_a_time() {
    let old = daemonset("a:1", 1);
    let nodes = [node("n1", &[]), node("n2", &[]), node("n3", &[])];
    let pods = [
        pod_on(&old, "n1", "p1"),
        pod_on(&old, "n2", "p2"),
        pod_on(&old, "n3", "p3"),
    ];
    let new = daemonset("a:2", 2);
    let r = run(&new, &nodes, &pods);
    assert_eq!(deleted(&r), ["p1"], "maxUnavailable 1: one node at a time");
    assert!(created_on(&r).is_empty());
    // p1 is going (deleting): n1 counts as unavailable, nothing more is deleted.
    let mut going = pods.clone();
    going[0].metadata.deletion_timestamp = Some(Time(now()));
    let r = run(&new, &nodes, &going);
    assert!(deleted(&r).is_empty() && created_on(&r).is_empty());
    // Gone: manage recreates it with the new template.
    let r = run(&new, &nodes, &pods[1..]);
    assert_eq!(created_on(&r), ["n1"]);
    let labels = match &r.reconciled.actions[0] {
        Action::CreatePod { pod } => pod.metadata.labels.clone().expect("present"),
        other => panic!("{other:?}"),
    };
    assert_eq!(labels["pod-template-generation"], "2");
    assert_eq!(labels["controller-revision-hash"], revision_hash(&new));
}

#[test]
fn on_delete_waits_for_the_user_to_delete_old_pods() {
    let old = daemonset("a:1", 1);
    let mut new = daemonset("a:2", 2);
    new.spec.as_mut().expect("present").update_strategy = Some(DaemonSetUpdateStrategy {
        type_: Some("OnDelete".into()),
        rolling_update: None,
    });
    let nodes = [node("n1", &[])];
    let r = run(&new, &nodes, &[pod_on(&old, "n1", "p1")]);
    assert!(deleted(&r).is_empty() && created_on(&r).is_empty());
    assert_eq!(status(&r).updated_number_scheduled, None);
}

#[test]
fn with_surge_the_new_pod_starts_beside_the_old_which_goes_once_it_is_available() {
    let old = daemonset("a:1", 1);
    let mut new = daemonset("a:2", 2);
    new.spec.as_mut().expect("present").update_strategy = Some(DaemonSetUpdateStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDaemonSet {
            max_unavailable: Some(IntOrString::Int(0)),
            max_surge: Some(IntOrString::Int(1)),
        }),
    });
    let nodes = [node("n1", &[]), node("n2", &[])];
    let pods = vec![pod_on(&old, "n1", "p1"), pod_on(&old, "n2", "p2")];
    let r = run(&new, &nodes, &pods);
    assert_eq!(created_on(&r), ["n1"]);
    assert!(deleted(&r).is_empty());
    // The new pod on n1, not yet ready: both stay, nothing more surges.
    let mut fresh = pod_on(&new, "n1", "q1");
    fresh.status.as_mut().expect("present").conditions = None;
    let mut with_new = pods.clone();
    with_new.push(fresh);
    let r = run(&new, &nodes, &with_new);
    assert!(deleted(&r).is_empty() && created_on(&r).is_empty());
    // Available: the old one goes.
    let mut with_ready = pods.clone();
    with_ready.push(pod_on(&new, "n1", "q1"));
    let r = run(&new, &nodes, &with_ready);
    assert_eq!(deleted(&r), ["p1"]);
}

#[test]
fn failed_pods_are_killed_with_kubes_warning_and_backed_off_per_node() {
    let ds = daemonset("a:1", 1);
    let mut failed = pod_on(&ds, "n1", "p1");
    failed.status.as_mut().expect("present").phase = Some("Failed".into());
    let nodes = [node("n1", &[])];
    let r = run(&ds, &nodes, std::slice::from_ref(&failed));
    assert_eq!(deleted(&r), ["p1"]);
    assert_eq!(r.failed_pods_killed_on, ["n1"]);
    let messages: Vec<&str> = r.reconciled.events().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        ["Found failed daemon pod ns/p1 on node n1, will try to kill it"]
    );
    let backoff = BTreeMap::from([("n1".to_owned(), now() + std::time::Duration::from_secs(4))]);
    let ctx = DaemonContext {
        expectations_satisfied: true,
        failed_pod_backoff: &backoff,
        revisions: &[],
    };
    let n: Vec<&Node> = nodes.iter().collect();
    let r = reconcile(&ds, &n, &[&failed], &ctx, now()).expect("present");
    assert!(r.reconciled.pod_deletions().next().is_none());
    assert_eq!(
        r.reconciled.requeue_after,
        Some(std::time::Duration::from_secs(5))
    );
}

#[test]
fn an_unbound_pod_pinned_to_a_node_that_is_gone_is_deleted() {
    let ds = daemonset("a:1", 1);
    let mut pending = pod_on(&ds, "gone", "p1");
    pending.spec.as_mut().expect("present").node_name = None;
    let r = run(&ds, &[node("n1", &[])], &[pending]);
    assert_eq!(deleted(&r), ["p1"]);
    assert_eq!(created_on(&r), ["n1"]);
}

#[test]
fn expectations_unsatisfied_only_recount_without_raising_observed_generation() {
    let ds = daemonset("a:1", 3);
    let n = node("n1", &[]);
    let ctx = DaemonContext {
        expectations_satisfied: false,
        failed_pod_backoff: &BTreeMap::new(),
        revisions: &[],
    };
    let r = reconcile(&ds, &[&n], &[], &ctx, now()).expect("present");
    assert!(created_on(&r).is_empty());
    assert_eq!(status(&r).observed_generation, None);
}

#[test]
fn orphans_it_selects_are_adopted_and_count() {
    let ds = daemonset("a:1", 1);
    let mut orphan = pod_on(&ds, "n1", "p1");
    orphan.metadata.owner_references = None;
    let r = run(&ds, &[node("n1", &[])], &[orphan]);
    assert!(matches!(
        r.reconciled.actions.first(),
        Some(Action::AdoptPod { name, .. }) if name == "p1"
    ));
    assert!(created_on(&r).is_empty());
}
