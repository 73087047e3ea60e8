//! Node, as users write it: `kubectl cordon` and `uncordon` (`spec.unschedulable`),
//! and annotations. The framework writes the rest from its Mesos agent
//! (`Api::upsert_node`): labels and taints come from the agent's attributes, which is
//! what placement reads, so a user's change to them is refused rather than
//! accepted and ignored. As kube's node lifecycle controller does, an unschedulable
//! Node carries the `node.kubernetes.io/unschedulable:NoSchedule` taint.

use k8s_openapi::api::core::v1::{Node, Taint};

use super::Kind;
use crate::resource::Resource;
use crate::validation::Causes;

/// The taint of a cordoned Node.
pub(crate) const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Why labels and taints are the agent's.
const FROM_AGENT: &str = "mesopod takes a node's labels and taints from its Mesos agent's attributes, which placement reads; set them on the agent";

/// The taints of `node` with the cordon's taint as `spec.unschedulable` says.
pub(crate) fn sync_unschedulable_taint(node: &mut Node) {
    let spec = node.spec.get_or_insert_default();
    let cordoned = spec.unschedulable == Some(true);
    let taints = spec.taints.get_or_insert_default();
    let has = taints.iter().any(|t| t.key == UNSCHEDULABLE_TAINT);
    if cordoned && !has {
        taints.push(Taint {
            key: UNSCHEDULABLE_TAINT.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
    } else if !cordoned && has {
        taints.retain(|t| t.key != UNSCHEDULABLE_TAINT);
    }
    if taints.is_empty() {
        spec.taints = None;
    }
}

/// The taints the agent gave, without the cordon's.
fn agent_taints(node: &Node) -> Vec<&Taint> {
    node.spec
        .iter()
        .flat_map(|s| s.taints.iter().flatten())
        .filter(|t| t.key != UNSCHEDULABLE_TAINT)
        .collect()
}

impl Kind for Node {
    const RESOURCE: Resource = Resource::Nodes;

    fn normalize(&mut self) {
        sync_unschedulable_taint(self);
    }

    fn validate(&self, _causes: &mut Causes) {}

    fn validate_update(old: &Self, new: &Self, causes: &mut Causes) {
        if new.metadata.labels != old.metadata.labels {
            causes.forbidden("metadata.labels", FROM_AGENT);
        }
        if agent_taints(new) != agent_taints(old) {
            causes.forbidden("spec.taints", FROM_AGENT);
        }
        let (o, n) = (
            old.spec.clone().unwrap_or_default(),
            new.spec.clone().unwrap_or_default(),
        );
        if n.provider_id != o.provider_id && o.provider_id.as_deref().is_some_and(|p| !p.is_empty())
        {
            causes.forbidden(
                "spec.providerID",
                "node updates may not change providerID except from \"\" to valid",
            );
        }
        if n.pod_cidr != o.pod_cidr && o.pod_cidr.as_deref().is_some_and(|p| !p.is_empty()) {
            causes.forbidden(
                "spec.podCIDRs",
                "node updates may not change podCIDR except from \"\" to valid",
            );
        }
    }

    /// The main endpoint does not write the status: the agent's offers do.
    fn prepare_update(&mut self, old: &Self) {
        self.status.clone_from(&old.status);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::kinds::validate;
    use serde_json::json;

    fn node(v: serde_json::Value) -> Node {
        let mut n: Node = serde_json::from_value(v).unwrap();
        n.normalize();
        n
    }

    #[test]
    fn a_cordon_brings_its_taint_and_an_uncordon_takes_it_away() {
        let mut n = node(json!({"metadata": {"name": "a"},
            "spec": {"unschedulable": true, "taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}}));
        let keys: Vec<&str> = agent_taints(&n).iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["dedicated"]);
        assert_eq!(n.spec.as_ref().unwrap().taints.as_ref().unwrap().len(), 2);
        n.spec.as_mut().unwrap().unschedulable = Some(false);
        n.normalize();
        let taints = n.spec.unwrap().taints.unwrap();
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0].key, "dedicated");
    }

    #[test]
    fn labels_taints_and_the_provider_are_the_agents() {
        let old = node(json!({"metadata": {"name": "a", "labels": {"zone": "a"}},
            "spec": {"providerID": "mesos://S0"}}));
        let cordoned = node(
            json!({"metadata": {"name": "a", "labels": {"zone": "a"}, "annotations": {"why": "disk"}},
            "spec": {"providerID": "mesos://S0", "unschedulable": true}}),
        );
        assert!(validate(&cordoned, Some(&old)).is_ok());
        let changed = node(json!({"metadata": {"name": "a", "labels": {"zone": "b"}},
            "spec": {"providerID": "mesos://S1", "taints": [{"key": "k", "effect": "NoExecute"}]}}));
        let Err(crate::ApiError::Invalid { causes, .. }) = validate(&changed, Some(&old)) else {
            panic!("accepted");
        };
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["metadata.labels", "spec.taints", "spec.providerID"]
        );
    }
}
