//! Properties of the DaemonSet reconcile over arbitrary nodes and pods: syncs
//! repeated (pods becoming ready in between) until nothing is left to do end with exactly one pod of the current
//! template on every node that should run one and none where none may stay; and a
//! rolling update step never leaves more nodes without an available pod than
//! `maxUnavailable` (or than were already without one).

use std::collections::BTreeMap;

use controllers::Action;
use controllers::daemonset::nodes::{eligibility, target_node};
use controllers::daemonset::pod::daemon_template;
use controllers::daemonset::{
    DaemonContext, TEMPLATE_GENERATION_ANNOTATION, reconcile, revision_hash, template_generation,
};
use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, DaemonSetUpdateStrategy, RollingUpdateDaemonSet,
};
use k8s_openapi::api::core::v1::{
    Container, Node, NodeSpec, Pod, PodCondition, PodSpec, PodStatus, PodTemplateSpec, Taint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

fn now() -> Timestamp {
    "2024-06-01T12:00:00Z".parse().expect("now")
}

fn app() -> BTreeMap<String, String> {
    [("app".to_owned(), "d".to_owned())].into()
}

fn daemonset(image: &str, generation: i64, max_unavailable: i32, selective: bool) -> DaemonSet {
    DaemonSet {
        metadata: ObjectMeta {
            name: Some("d".into()),
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
                    node_selector: selective
                        .then(|| [("pick".to_owned(), "yes".to_owned())].into()),
                    ..Default::default()
                }),
            },
            update_strategy: Some(DaemonSetUpdateStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDaemonSet {
                    max_unavailable: Some(IntOrString::Int(max_unavailable)),
                    max_surge: Some(IntOrString::Int(0)),
                }),
            }),
            ..Default::default()
        }),
        status: None,
    }
}

/// A node: picked by the selective DaemonSet's nodeSelector or not, with no taint,
/// a NoSchedule taint or a NoExecute one.
#[derive(Clone, Copy, Debug)]
struct NodeShape {
    picked: bool,
    taint: u8,
}

fn node(i: usize, shape: NodeShape) -> Node {
    let taints = match shape.taint {
        1 => vec![Taint {
            key: "dedicated".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        }],
        2 => vec![Taint {
            key: "dedicated".into(),
            effect: "NoExecute".into(),
            ..Default::default()
        }],
        _ => Vec::new(),
    };
    Node {
        metadata: ObjectMeta {
            name: Some(format!("n{i}")),
            labels: shape
                .picked
                .then(|| [("pick".to_owned(), "yes".to_owned())].into()),
            ..Default::default()
        },
        spec: Some(NodeSpec {
            taints: Some(taints),
            ..Default::default()
        }),
        status: None,
    }
}

/// A pod of `ds`'s template on `node`: running and ready for an hour, or not
/// ready, or failed.
#[derive(Clone, Copy, Debug)]
struct PodShape {
    of_new: bool,
    state: u8,
}

fn pod_of(ds: &DaemonSet, node: &str, name: &str, state: u8) -> Pod {
    let spec = ds.spec.as_ref().expect("spec");
    let template = daemon_template(&spec.template, template_generation(ds), &revision_hash(ds));
    let mut pod = Pod {
        metadata: template.metadata.clone().unwrap_or_default(),
        spec: template.spec.clone(),
        status: None,
    };
    pod.metadata.name = Some(name.into());
    pod.metadata.namespace = Some("ns".into());
    pod.metadata.uid = Some(format!("{name}-uid"));
    pod.metadata.owner_references = Some(vec![controllers::controller_ref(ds)]);
    pod.metadata.creation_timestamp = Some(Time("2024-06-01T10:00:00Z".parse().expect("t")));
    pod.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
    let (phase, ready) = match state {
        0 => ("Running", true),
        1 => ("Running", false),
        _ => ("Failed", false),
    };
    pod.status = Some(PodStatus {
        phase: Some(phase.into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: if ready { "True" } else { "False" }.into(),
            last_transition_time: Some(Time("2024-06-01T11:00:00Z".parse().expect("t"))),
            ..Default::default()
        }]),
        ..Default::default()
    });
    pod
}

fn sync(ds: &DaemonSet, nodes: &[Node], pods: &[Pod]) -> Vec<Action> {
    let nodes: Vec<&Node> = nodes.iter().collect();
    let pods: Vec<&Pod> = pods.iter().collect();
    let backoff = BTreeMap::new();
    let ctx = DaemonContext {
        expectations_satisfied: true,
        failed_pod_backoff: &backoff,
        revisions: &[],
    };
    reconcile(ds, &nodes, &pods, &ctx, now())
        .expect("reconcile")
        .reconciled
        .actions
}

fn is_available(p: &Pod) -> bool {
    controllers::is_available(p, 0, now())
}

fn shapes() -> impl Strategy<Value = Vec<(NodeShape, Vec<PodShape>)>> {
    let node = (any::<bool>(), 0u8..3).prop_map(|(picked, taint)| NodeShape { picked, taint });
    let pod = (any::<bool>(), 0u8..3).prop_map(|(of_new, state)| PodShape { of_new, state });
    prop::collection::vec((node, prop::collection::vec(pod, 0..3)), 1..8)
}

fn world(
    shapes: &[(NodeShape, Vec<PodShape>)],
    old: &DaemonSet,
    new: &DaemonSet,
) -> (Vec<Node>, Vec<Pod>) {
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    for (i, (n, ps)) in shapes.iter().enumerate() {
        nodes.push(node(i, *n));
        for (j, p) in ps.iter().enumerate() {
            let owner = if p.of_new { new } else { old };
            pods.push(pod_of(
                owner,
                &format!("n{i}"),
                &format!("p{i}-{j}"),
                p.state,
            ));
        }
    }
    (nodes, pods)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn repeated_syncs_leave_exactly_one_current_pod_on_every_eligible_node(
        shapes in shapes(),
        selective in any::<bool>(),
        max_unavailable in 1i32..4,
    ) {
        let old = daemonset("a:1", 1, max_unavailable, selective);
        let new = daemonset("a:2", 2, max_unavailable, selective);
        let (nodes, mut pods) = world(&shapes, &old, &new);
        let mut created = 0;
        for _ in 0..64 {
            let actions = sync(&new, &nodes, &pods);
            let mut changed = false;
            for a in actions {
                match a {
                    Action::CreatePod { pod } => {
                        let node = target_node(&pod).expect("pinned").to_owned();
                        created += 1;
                        pods.push(pod_of(&new, &node, &format!("c{created}"), 0));
                        changed = true;
                    }
                    Action::DeletePod { name, .. } => {
                        pods.retain(|p| p.metadata.name.as_deref() != Some(name.as_str()));
                        changed = true;
                    }
                    _ => {}
                }
            }
            // Between syncs every running pod becomes ready (as a kubelet would
            // make it); a rollout waits for that, so without it one never ends. A
            // world may start with a running pod not yet ready, which holds the
            // rollout's one unavailable slot: its readiness is a change too.
            for p in &mut pods {
                let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                if running
                    && let Some(c) = p.status.as_mut().and_then(|s| s.conditions.as_mut())
                    && c[0].status != "True"
                {
                    c[0].status = "True".into();
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let template = new.spec.as_ref().expect("present").template.spec.clone().expect("present");
        let mut with_tolerations = template.clone();
        controllers::daemonset::pod::add_daemon_tolerations(&mut with_tolerations);
        for n in &nodes {
            let name = n.metadata.name.clone().expect("present");
            let here: Vec<&Pod> = pods
                .iter()
                .filter(|p| target_node(p) == Some(name.as_str()))
                .collect();
            let e = eligibility(&with_tolerations, n);
            if e.should_run {
                prop_assert_eq!(here.len(), 1, "node {} pods {:?}", name, here);
                prop_assert_eq!(
                    here[0].metadata.labels.as_ref().expect("present")["pod-template-generation"].as_str(),
                    "2"
                );
            } else if !e.should_continue_running {
                prop_assert!(here.is_empty(), "node {} keeps {:?}", name, here);
            } else {
                prop_assert!(here.len() <= 1);
            }
        }
    }

    #[test]
    fn a_rolling_update_step_never_exceeds_max_unavailable(
        shapes in prop::collection::vec((any::<bool>(), 0u8..2), 1..10),
        max_unavailable in 1i32..4,
    ) {
        // One pod per schedulable node, old or new, ready or not.
        let old = daemonset("a:1", 1, max_unavailable, false);
        let new = daemonset("a:2", 2, max_unavailable, false);
        let nodes: Vec<Node> = (0..shapes.len())
            .map(|i| node(i, NodeShape { picked: true, taint: 0 }))
            .collect();
        let pods: Vec<Pod> = shapes
            .iter()
            .enumerate()
            .map(|(i, (of_new, state))| {
                pod_of(if *of_new { &new } else { &old }, &format!("n{i}"), &format!("p{i}"), *state)
            })
            .collect();
        let unavailable_before = pods.iter().filter(|p| !is_available(p)).count();
        let actions = sync(&new, &nodes, &pods);
        let deleted: Vec<&str> = actions
            .iter()
            .filter_map(|a| match a {
                Action::DeletePod { name, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        let creates = actions
            .iter()
            .filter(|a| matches!(a, Action::CreatePod { .. }))
            .count();
        prop_assert_eq!(creates, 0, "every node has its pod: nothing to create");
        let unavailable_after = pods
            .iter()
            .filter(|p| !is_available(p) || deleted.contains(&p.metadata.name.as_deref().expect("present")))
            .count();
        let limit = usize::try_from(max_unavailable).expect("present").max(unavailable_before);
        prop_assert!(
            unavailable_after <= limit,
            "{} unavailable after deleting {:?} (maxUnavailable {}, {} before)",
            unavailable_after, deleted, max_unavailable, unavailable_before
        );
        // Only old pods go, and only while the budget allows.
        for name in &deleted {
            let p = pods.iter().find(|p| p.metadata.name.as_deref() == Some(*name)).expect("present");
            prop_assert_eq!(
                p.metadata.labels.as_ref().expect("present")["pod-template-generation"].as_str(),
                "1"
            );
        }
    }
}
