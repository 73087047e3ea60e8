//! Node: `spec.nodeName`, `nodeSelector`, required node affinity, taints.

use registry::PodTask;

use crate::demand::{Op, Requirement, Term, Toleration};
use crate::failure::ProcureError;
use crate::node::{NodeView, Taint, TaintEffect};
use crate::pipeline::Procurement;
use crate::state::ProcureState;

/// Checks that the pod may run on the agent. Takes no resources.
///
/// Rules, as Kubernetes applies them:
/// - `spec.nodeName`, if set, must be the agent's hostname;
/// - every `nodeSelector` entry must equal the node's label;
/// - required node affinity: at least one term matches, a term matching when
///   all its expressions do (In, NotIn, Exists, DoesNotExist, Gt, Lt; NotIn and
///   DoesNotExist match an absent label; Gt/Lt compare integers); a term
///   with no requirement matches nothing;
/// - every `NoSchedule` and `NoExecute` taint must be tolerated
///   (`PreferNoSchedule` never refuses).
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeProcurement;

impl Procurement for NodeProcurement {
    fn procure(
        &self,
        task: &mut PodTask,
        node: &NodeView,
        state: &mut ProcureState,
    ) -> Result<(), ProcureError> {
        let d = state
            .ensure_demand(task)
            .node
            .as_ref()
            .map_err(Clone::clone)?;
        if let Some(wanted) = &d.node_name
            && wanted != node.hostname()
        {
            return Err(ProcureError::NodeNameMismatch {
                wanted: wanted.clone(),
                hostname: node.hostname().to_owned(),
            });
        }
        for (key, wanted) in &d.selector {
            if node.label(key) != Some(wanted.as_str()) {
                return Err(ProcureError::NodeSelectorMismatch {
                    key: key.clone(),
                    wanted: wanted.clone(),
                });
            }
        }
        if let Some(terms) = &d.affinity
            && !terms.iter().any(|t| term_matches(t, node))
        {
            return Err(ProcureError::NodeAffinityMismatch);
        }
        for taint in node.taints() {
            if taint.effect != TaintEffect::PreferNoSchedule
                && !d.tolerations.iter().any(|t| tolerates(t, taint))
            {
                return Err(ProcureError::UntoleratedTaint {
                    taint: taint.clone(),
                });
            }
        }
        Ok(())
    }

    fn modifies_task(&self) -> bool {
        false
    }

    fn enforces_node_selector(&self) -> bool {
        true
    }
}

fn term_matches(t: &Term, node: &NodeView) -> bool {
    if t.labels.is_empty() && t.name.is_empty() {
        return false;
    }
    t.labels
        .iter()
        .all(|r| requirement_matches(r, node.label(&r.key)))
        && t.name
            .iter()
            .all(|r| requirement_matches(r, Some(node.hostname())))
}

fn requirement_matches(r: &Requirement, value: Option<&str>) -> bool {
    match (&r.op, value) {
        (Op::In(vs), Some(v)) => vs.iter().any(|x| x == v),
        (Op::In(_), None) => false,
        (Op::NotIn(vs), Some(v)) => !vs.iter().any(|x| x == v),
        (Op::NotIn(_), None) => true,
        (Op::Exists, v) => v.is_some(),
        (Op::DoesNotExist, v) => v.is_none(),
        (Op::Gt(n), Some(v)) => v.trim().parse::<i64>().is_ok_and(|x| x > *n),
        (Op::Lt(n), Some(v)) => v.trim().parse::<i64>().is_ok_and(|x| x < *n),
        (Op::Gt(_) | Op::Lt(_), None) => false,
    }
}

fn tolerates(t: &Toleration, taint: &Taint) -> bool {
    if t.effect.is_some_and(|e| e != taint.effect) {
        return false;
    }
    match &t.key {
        Some(k) if *k != taint.key => false,
        None if !t.exists => false,
        _ => t.exists || t.value == taint.value,
    }
}
