//! Which nodes a DaemonSet's pod belongs on (kube's `NodeShouldRunDaemonPod`): the
//! template's `nodeName`, `nodeSelector` and required node affinity must match the
//! node, and its taints must be tolerated (with the tolerations every daemon pod
//! gets). A node whose only untolerated taints are NoSchedule keeps the pod it has
//! but gets no new one; an untolerated NoExecute taint sends the pod away.
//!
//! Also where an unbound daemon pod is headed: the `metadata.name` its required
//! affinity pins it to (kube's `GetTargetNodeName`).
//!
//! Procurement applies the same rules to offers when it places the pod; they are
//! written again here over Node objects because this crate sits beside the
//! scheduler and may not depend on it (nor on anything that knows Mesos).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec, Taint, Toleration,
};

/// The field the node pinning's `matchFields` names.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// What a node is for a DaemonSet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Eligibility {
    /// A daemon pod should be created there if none runs.
    pub should_run: bool,
    /// A daemon pod already there may stay.
    pub should_continue_running: bool,
}

/// kube's `NodeShouldRunDaemonPod` for the template `spec` (its tolerations already
/// completed by [`super::pod::add_daemon_tolerations`]).
pub fn eligibility(spec: &PodSpec, node: &Node) -> Eligibility {
    let no = Eligibility {
        should_run: false,
        should_continue_running: false,
    };
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if spec
        .node_name
        .as_deref()
        .is_some_and(|n| !n.is_empty() && n != name)
    {
        return no;
    }
    if !matches_node_selector(spec.node_selector.as_ref(), node)
        || !matches_required_affinity(spec, node)
    {
        return no;
    }
    let taints: &[Taint] = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default();
    let tolerations: &[Toleration] = spec.tolerations.as_deref().unwrap_or_default();
    let untolerated = |effects: &[&str]| {
        taints
            .iter()
            .filter(|t| effects.contains(&t.effect.as_str()))
            .any(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
    };
    if untolerated(&["NoSchedule", "NoExecute"]) {
        return Eligibility {
            should_run: false,
            should_continue_running: !untolerated(&["NoExecute"]),
        };
    }
    Eligibility {
        should_run: true,
        should_continue_running: true,
    }
}

/// Whether every `nodeSelector` label is on the node.
fn matches_node_selector(selector: Option<&BTreeMap<String, String>>, node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    selector
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.and_then(|l| l.get(k)).is_some_and(|have| have == v))
}

/// Whether the required node affinity (any of its terms) matches the node; no
/// affinity matches every node, and a selector without terms matches none.
fn matches_required_affinity(spec: &PodSpec, node: &Node) -> bool {
    match required_affinity(spec) {
        None => true,
        Some(selector) => selector
            .node_selector_terms
            .iter()
            .any(|term| term_matches(term, node)),
    }
}

fn required_affinity(spec: &PodSpec) -> Option<&NodeSelector> {
    spec.affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()
}

/// A term matches when all its requirements do; an empty term matches nothing (as
/// kube-scheduler's `nodeaffinity` has it).
fn term_matches(term: &NodeSelectorTerm, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.as_ref();
    let name = node.metadata.name.as_deref().unwrap_or_default();
    expressions
        .iter()
        .all(|r| requirement_matches(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str)))
        && fields.iter().all(|r| {
            r.key == NODE_NAME_FIELD
                && matches!(r.operator.as_str(), "In" | "NotIn")
                && requirement_matches(r, Some(name))
        })
}

/// One requirement against the value the node has for its key (`None`: absent).
fn requirement_matches(r: &NodeSelectorRequirement, have: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => have.is_some_and(|h| values.iter().any(|v| v == h)),
        "NotIn" => have.is_none_or(|h| !values.iter().any(|v| v == h)),
        "Exists" => have.is_some(),
        "DoesNotExist" => have.is_none(),
        "Gt" | "Lt" => {
            let (Some(h), [v]) = (have.and_then(number), values) else {
                return false;
            };
            let Some(v) = number(v) else {
                return false;
            };
            if r.operator == "Gt" { h > v } else { h < v }
        }
        _ => false,
    }
}

/// Whether `tol` tolerates `taint` (kube's `Toleration.ToleratesTaint`): same
/// effect unless the toleration names none, same key unless it names none, and
/// Exists, or Equal with the same value.
pub fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    if tol
        .effect
        .as_deref()
        .is_some_and(|e| !e.is_empty() && e != taint.effect)
    {
        return false;
    }
    if tol
        .key
        .as_deref()
        .is_some_and(|k| !k.is_empty() && k != taint.key)
    {
        return false;
    }
    match tol.operator.as_deref() {
        None | Some("" | "Equal") => {
            tol.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default()
        }
        Some("Exists") => true,
        Some(_) => false,
    }
}

/// The node a daemon pod is on or headed for: `spec.nodeName` once bound, else the
/// single node its required affinity's `matchFields metadata.name In` names (kube's
/// `GetTargetNodeName`); `None` for a pod pinned nowhere.
pub fn target_node(pod: &Pod) -> Option<&str> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_deref().filter(|n| !n.is_empty()) {
        return Some(n);
    }
    required_affinity(spec)?
        .node_selector_terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|r| r.key == NODE_NAME_FIELD && r.operator == "In")
        .and_then(|r| match r.values.as_deref() {
            Some([one]) => Some(one.as_str()),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node(name: &str, labels: &[(&str, &str)], taints: &[(&str, &str)]) -> Node {
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
            spec: Some(NodeSpec {
                taints: Some(
                    taints
                        .iter()
                        .map(|(k, e)| Taint {
                            key: (*k).into(),
                            effect: (*e).into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            status: None,
        }
    }

    fn affinity(term: NodeSelectorTerm) -> Option<Affinity> {
        Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![term],
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: Some(values.iter().map(|v| (*v).into()).collect()),
        }
    }

    const YES: Eligibility = Eligibility {
        should_run: true,
        should_continue_running: true,
    };
    const NO: Eligibility = Eligibility {
        should_run: false,
        should_continue_running: false,
    };

    #[test]
    fn node_selector_and_required_affinity_pick_nodes() {
        let mut spec = PodSpec {
            node_selector: Some([("disk".to_owned(), "ssd".to_owned())].into()),
            ..Default::default()
        };
        assert_eq!(eligibility(&spec, &node("a", &[("disk", "ssd")], &[])), YES);
        assert_eq!(eligibility(&spec, &node("b", &[("disk", "hdd")], &[])), NO);
        spec.node_selector = None;
        spec.affinity = affinity(NodeSelectorTerm {
            match_expressions: Some(vec![req("cores", "Gt", &["4"])]),
            match_fields: Some(vec![req(NODE_NAME_FIELD, "NotIn", &["c"])]),
        });
        assert_eq!(eligibility(&spec, &node("a", &[("cores", "8")], &[])), YES);
        assert_eq!(eligibility(&spec, &node("b", &[("cores", "2")], &[])), NO);
        assert_eq!(eligibility(&spec, &node("c", &[("cores", "8")], &[])), NO);
        assert_eq!(eligibility(&spec, &node("d", &[], &[])), NO);
    }

    #[test]
    fn no_schedule_keeps_a_running_pod_and_no_execute_sends_it_away() {
        let spec = PodSpec::default();
        assert_eq!(
            eligibility(&spec, &node("a", &[], &[("dedicated", "NoSchedule")])),
            Eligibility {
                should_run: false,
                should_continue_running: true
            }
        );
        assert_eq!(
            eligibility(&spec, &node("a", &[], &[("dedicated", "NoExecute")])),
            NO
        );
        assert_eq!(
            eligibility(&spec, &node("a", &[], &[("soft", "PreferNoSchedule")])),
            YES
        );
        let tolerant = PodSpec {
            tolerations: Some(vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Exists".into()),
                ..Default::default()
            }]),
            ..Default::default()
        };
        assert_eq!(
            eligibility(&tolerant, &node("a", &[], &[("dedicated", "NoExecute")])),
            YES
        );
    }

    #[test]
    fn tolerations_match_as_kubes() {
        let taint = Taint {
            key: "k".into(),
            value: Some("v".into()),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let tol =
            |key: Option<&str>, op: Option<&str>, value: Option<&str>, effect: Option<&str>| {
                Toleration {
                    key: key.map(Into::into),
                    operator: op.map(Into::into),
                    value: value.map(Into::into),
                    effect: effect.map(Into::into),
                    toleration_seconds: None,
                }
            };
        assert!(tolerates(&tol(Some("k"), None, Some("v"), None), &taint));
        assert!(!tolerates(
            &tol(Some("k"), Some("Equal"), Some("w"), None),
            &taint
        ));
        assert!(tolerates(&tol(None, Some("Exists"), None, None), &taint));
        assert!(!tolerates(
            &tol(Some("k"), Some("Exists"), None, Some("NoExecute")),
            &taint
        ));
    }

    #[test]
    fn an_unbound_pod_is_headed_where_its_affinity_pins_it() {
        let mut pod = Pod {
            spec: Some(PodSpec {
                affinity: affinity(NodeSelectorTerm {
                    match_expressions: None,
                    match_fields: Some(vec![req(NODE_NAME_FIELD, "In", &["agent-1"])]),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(target_node(&pod), Some("agent-1"));
        pod.spec.as_mut().expect("present").node_name = Some("agent-2".into());
        assert_eq!(target_node(&pod), Some("agent-2"));
        assert_eq!(target_node(&Pod::default()), None);
    }
}
