//! A DaemonSet's pods as kube's daemon controller builds them
//! (`util.CreatePodTemplate`, `ReplaceDaemonSetPodNodeNameNodeAffinity`): the
//! template, the tolerations every daemon pod gets, the labels that tell its
//! revision, and no `nodeName`: the node is pinned through required node affinity
//! (`matchFields metadata.name In [node]`), so the pod is placed as every pod is.

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod, PodSpec,
    PodTemplateSpec, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::nodes::NODE_NAME_FIELD;
use crate::template::{TemplateError, pod_from_template};

/// The label with the template's hash (the name of the revision would be
/// `<ds>-<hash>`).
pub const CONTROLLER_REVISION_HASH_LABEL: &str = "controller-revision-hash";
/// The label with the DaemonSet's template generation.
pub const POD_TEMPLATE_GENERATION_LABEL: &str = "pod-template-generation";

/// The tolerations every daemon pod carries (`AddOrUpdateDaemonPodTolerations`):
/// node problems do not evict it, and conditions that keep other pods off a node do
/// not keep it off. `network-unavailable` only for a pod on the host's network.
pub fn add_daemon_tolerations(spec: &mut PodSpec) {
    let mut wanted = vec![
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ];
    if spec.host_network == Some(true) {
        wanted.push(("node.kubernetes.io/network-unavailable", "NoSchedule"));
    }
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for (key, effect) in wanted {
        let toleration = Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            effect: Some(effect.into()),
            value: None,
            toleration_seconds: None,
        };
        // `AddOrUpdateTolerationInPodSpec`: one with the same key, operator, value
        // and effect is replaced (its tolerationSeconds dropped), else it is added.
        let same = |t: &Toleration| {
            t.key == toleration.key
                && t.operator.as_deref().unwrap_or("Equal") == "Exists"
                && t.value.as_deref().unwrap_or_default().is_empty()
                && t.effect == toleration.effect
        };
        match tolerations.iter_mut().find(|t| same(t)) {
            Some(t) => *t = toleration,
            None => tolerations.push(toleration),
        }
    }
}

/// The template as every pod of this revision has it: daemon tolerations and the
/// two revision labels.
pub fn daemon_template(
    template: &PodTemplateSpec,
    generation: Option<i64>,
    hash: &str,
) -> PodTemplateSpec {
    let mut t = template.clone();
    add_daemon_tolerations(t.spec.get_or_insert_with(PodSpec::default));
    let labels = t
        .metadata
        .get_or_insert_with(ObjectMeta::default)
        .labels
        .get_or_insert_with(Default::default);
    if let Some(g) = generation {
        labels.insert(POD_TEMPLATE_GENERATION_LABEL.into(), g.to_string());
    }
    if !hash.is_empty() {
        labels.insert(CONTROLLER_REVISION_HASH_LABEL.into(), hash.into());
    }
    t
}

/// The pod for `node`, from [`daemon_template`]'s output: the owner's pod, with its
/// required node affinity replaced by the pinning to `node`.
///
/// # Errors
/// [`TemplateError::NoLabels`] (never for a validated DaemonSet, whose selector
/// matches the template's labels).
pub fn pod_for_node(
    template: &PodTemplateSpec,
    owner: &ObjectMeta,
    owner_ref: OwnerReference,
    node: &str,
) -> Result<Pod, TemplateError> {
    let mut pod = pod_from_template(template, owner, owner_ref)?;
    let spec = pod.spec.get_or_insert_with(PodSpec::default);
    pin(spec, node);
    Ok(pod)
}

/// `ReplaceDaemonSetPodNodeNameNodeAffinity`: the required node affinity becomes
/// the one term `metadata.name In [node]`; preferred terms and pod (anti-)affinity
/// stay.
fn pin(spec: &mut PodSpec, node: &str) {
    let selector = NodeSelector {
        node_selector_terms: vec![NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(vec![NodeSelectorRequirement {
                key: NODE_NAME_FIELD.into(),
                operator: "In".into(),
                values: Some(vec![node.into()]),
            }]),
        }],
    };
    spec.affinity
        .get_or_insert_with(Affinity::default)
        .node_affinity
        .get_or_insert_with(NodeAffinity::default)
        .required_during_scheduling_ignored_during_execution = Some(selector);
}

/// Whether a pod is of the DaemonSet's current template (`util.IsPodUpdated`): its
/// hash label is the template's hash, or its generation label the DaemonSet's
/// template generation.
pub fn is_updated(pod: &Pod, hash: &str, generation: Option<i64>) -> bool {
    let labels = pod.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    let hash_matches = !hash.is_empty() && label(CONTROLLER_REVISION_HASH_LABEL) == Some(hash);
    let generation_matches = generation
        .is_some_and(|g| label(POD_TEMPLATE_GENERATION_LABEL) == Some(g.to_string().as_str()));
    hash_matches || generation_matches
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Container;

    fn template() -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some([("app".to_owned(), "agent".to_owned())].into()),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ..Default::default()
                }],
                tolerations: Some(vec![Toleration {
                    key: Some("node.kubernetes.io/unreachable".into()),
                    operator: Some("Exists".into()),
                    effect: Some("NoExecute".into()),
                    toleration_seconds: Some(30),
                    value: None,
                }]),
                ..Default::default()
            }),
        }
    }

    fn owner() -> (ObjectMeta, OwnerReference) {
        let meta = ObjectMeta {
            name: Some("agent".into()),
            namespace: Some("kube-system".into()),
            uid: Some("ds-uid".into()),
            ..Default::default()
        };
        let r = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "DaemonSet".into(),
            name: "agent".into(),
            uid: "ds-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        (meta, r)
    }

    #[test]
    fn a_daemon_pod_tolerates_node_problems_and_carries_its_revision() {
        let t = daemon_template(&template(), Some(3), "abc");
        let spec = t.spec.as_ref().expect("present");
        let tolerations: Vec<(String, String)> = spec
            .tolerations
            .iter()
            .flatten()
            .map(|t| {
                (
                    t.key.clone().unwrap_or_default(),
                    t.effect.clone().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            tolerations,
            [
                ("node.kubernetes.io/unreachable", "NoExecute"),
                ("node.kubernetes.io/not-ready", "NoExecute"),
                ("node.kubernetes.io/disk-pressure", "NoSchedule"),
                ("node.kubernetes.io/memory-pressure", "NoSchedule"),
                ("node.kubernetes.io/pid-pressure", "NoSchedule"),
                ("node.kubernetes.io/unschedulable", "NoSchedule"),
            ]
            .map(|(k, e)| (k.to_owned(), e.to_owned()))
        );
        // The template's own unreachable toleration is replaced: no eviction after 30 s.
        assert_eq!(
            spec.tolerations.as_ref().expect("present")[0].toleration_seconds,
            None
        );
        let labels = t.metadata.expect("present").labels.expect("present");
        assert_eq!(labels["controller-revision-hash"], "abc");
        assert_eq!(labels["pod-template-generation"], "3");

        let mut host = template();
        host.spec.as_mut().expect("present").host_network = Some(true);
        let t = daemon_template(&host, None, "abc");
        assert!(
            t.spec
                .expect("present")
                .tolerations
                .expect("present")
                .iter()
                .any(|t| {
                    t.key.as_deref() == Some("node.kubernetes.io/network-unavailable")
                        && t.effect.as_deref() == Some("NoSchedule")
                })
        );
    }

    #[test]
    fn the_pod_is_pinned_by_affinity_not_by_node_name() {
        let (meta, r) = owner();
        let pod = pod_for_node(&template(), &meta, r, "agent-7").expect("present");
        let spec = pod.spec.expect("present");
        assert_eq!(spec.node_name, None);
        let required = spec
            .affinity
            .expect("present")
            .node_affinity
            .expect("present")
            .required_during_scheduling_ignored_during_execution
            .expect("present");
        assert_eq!(
            serde_json::to_value(&required).expect("present"),
            serde_json::json!({"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": ["agent-7"]}
            ]}]})
        );
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("agent-"));
    }
}
