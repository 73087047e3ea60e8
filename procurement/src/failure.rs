//! Typed failure reasons, and their aggregation into Kubernetes' message
//! `0/N agents available: 3 insufficient cpus, 2 node selector mismatch.`

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

use crate::node::Taint;
use crate::pool::ResourceKind;

/// Which procurement a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Node name, selector, affinity, taints.
    Node,
    /// The pod's roles.
    Roles,
    /// cpus, mem, disk, gpus of the pod.
    PodResources,
    /// Host ports.
    Ports,
    /// The executor and its own resources.
    Executor,
    /// A procurement from outside this crate.
    Custom,
}

/// Who resources are taken for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Owner {
    /// The pod's task.
    Pod,
    /// The executor that runs the pod's task.
    Executor,
}

/// Why one pod could not be placed on one offer.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ProcureError {
    /// The pod itself is malformed (bad quantity, annotation or selector);
    /// no offer will ever fit it until it is fixed.
    #[error("invalid pod: {reason}")]
    InvalidPod {
        /// The procurement that found the problem.
        stage: Stage,
        /// What is wrong.
        reason: String,
    },
    /// `spec.nodeName` names another host.
    #[error("pod wants node {wanted:?}, agent is {hostname:?}")]
    NodeNameMismatch {
        /// The pod's `spec.nodeName`.
        wanted: String,
        /// The agent's hostname.
        hostname: String,
    },
    /// A `nodeSelector` entry the agent's labels do not match.
    #[error("node selector {key}={wanted:?} does not match the agent's labels")]
    NodeSelectorMismatch {
        /// The selector key.
        key: String,
        /// The value the pod wants.
        wanted: String,
    },
    /// No required node-affinity term matches the agent.
    #[error("no required node affinity term matches the agent")]
    NodeAffinityMismatch,
    /// The agent has a taint the pod does not tolerate.
    #[error("untolerated taint {}={}:{}", .taint.key, .taint.value, .taint.effect.as_str())]
    UntoleratedTaint {
        /// The taint.
        taint: Taint,
    },
    /// The `mesopod.io/roles` annotation is present but lists nothing.
    #[error("annotation mesopod.io/roles is empty: the pod may use no role")]
    RolesAnnotationEmpty,
    /// None of the pod's roles is one of the framework's.
    #[error("none of the pod's roles {requested:?} is a framework role")]
    NoFrameworkRole {
        /// The roles the pod asked for.
        requested: Vec<String>,
    },
    /// Not enough of a scalar resource in the roles allowed.
    #[error("insufficient {} for the {}: asked {asked}, available {available}", .resource.name(), owner_name(*.owner))]
    Insufficient {
        /// The resource.
        resource: ResourceKind,
        /// For the pod or for its executor.
        owner: Owner,
        /// How much was asked.
        asked: f64,
        /// How much is left in the roles allowed.
        available: f64,
    },
    /// A fixed host port is not in any offered range of the pod's roles.
    #[error("host port {port} is not offered")]
    PortNotOffered {
        /// The port.
        port: u16,
    },
    /// A host port another pod already took from this offer.
    #[error("host port {port} is already taken from this offer")]
    PortTaken {
        /// The port.
        port: u16,
    },
    /// The pod names the same host port and protocol twice.
    #[error("host port {port}/{protocol} is declared twice")]
    DuplicateHostPort {
        /// The port.
        port: u16,
        /// Its protocol.
        protocol: String,
    },
    /// Not enough free offered ports for the wildcard host ports.
    #[error("insufficient ports: asked {asked}, available {available}")]
    NoFreePorts {
        /// How many wildcard ports the pod needs.
        asked: usize,
        /// How many free ports are left in the pod's roles.
        available: usize,
    },
    /// The agent runs more than one of this framework's executors.
    #[error("agent runs {} executors of this framework ({}); expected at most one", .running.len(), .running.join(", "))]
    ExecutorConflict {
        /// Their ids.
        running: Vec<String>,
    },
    /// The agent runs an executor of this framework with another configuration.
    #[error("agent runs executor {running}, this framework's executor is {expected}")]
    ExecutorMismatch {
        /// The id running there.
        running: String,
        /// The id of the configured executor.
        expected: String,
    },
    /// A failure from a procurement outside this crate.
    #[error("{procurement}: {reason}")]
    Custom {
        /// The procurement's name.
        procurement: Cow<'static, str>,
        /// Why it failed.
        reason: String,
    },
}

fn owner_name(o: Owner) -> &'static str {
    match o {
        Owner::Pod => "pod",
        Owner::Executor => "executor",
    }
}

impl ProcureError {
    /// The procurement the failure came from.
    pub fn stage(&self) -> Stage {
        use ProcureError::*;
        match self {
            InvalidPod { stage, .. } => *stage,
            NodeNameMismatch { .. }
            | NodeSelectorMismatch { .. }
            | NodeAffinityMismatch
            | UntoleratedTaint { .. } => Stage::Node,
            RolesAnnotationEmpty | NoFrameworkRole { .. } => Stage::Roles,
            Insufficient {
                owner: Owner::Pod, ..
            } => Stage::PodResources,
            Insufficient {
                owner: Owner::Executor,
                ..
            }
            | ExecutorConflict { .. }
            | ExecutorMismatch { .. } => Stage::Executor,
            PortNotOffered { .. }
            | PortTaken { .. }
            | DuplicateHostPort { .. }
            | NoFreePorts { .. } => Stage::Ports,
            Custom { .. } => Stage::Custom,
        }
    }

    /// The reason as a metric label: [`Self::summary`] without what a pod
    /// spec chooses (an invalid pod's reason, host port numbers, taint
    /// values), so user input cannot make a label's values unbounded.
    pub fn metric_reason(&self) -> Cow<'static, str> {
        use ProcureError::*;
        match self {
            InvalidPod { .. } => "invalid pod".into(),
            UntoleratedTaint { .. } => "untolerated taint".into(),
            PortNotOffered { .. } => "host port not offered".into(),
            PortTaken { .. } => "host port taken".into(),
            _ => self.summary(),
        }
    }

    /// The short reason counted in an aggregate message (no amounts, so
    /// agents failing for the same cause count together).
    pub fn summary(&self) -> Cow<'static, str> {
        use ProcureError::*;
        match self {
            InvalidPod { reason, .. } => format!("invalid pod ({reason})").into(),
            NodeNameMismatch { .. } => "node name mismatch".into(),
            NodeSelectorMismatch { .. } => "node selector mismatch".into(),
            NodeAffinityMismatch => "node affinity mismatch".into(),
            // A cordon is a taint here; kube-scheduler names it apart.
            UntoleratedTaint { taint } if taint.key == crate::node::UNSCHEDULABLE => {
                "unschedulable".into()
            }
            UntoleratedTaint { taint } => {
                format!("untolerated taint {{{}: {}}}", taint.key, taint.value).into()
            }
            RolesAnnotationEmpty => "empty roles annotation".into(),
            NoFrameworkRole { .. } => "no framework role".into(),
            Insufficient {
                resource,
                owner: Owner::Pod,
                ..
            } => format!("insufficient {}", resource.name()).into(),
            Insufficient {
                resource,
                owner: Owner::Executor,
                ..
            } => format!("insufficient {} for the executor", resource.name()).into(),
            PortNotOffered { port } => format!("host port {port} not offered").into(),
            PortTaken { port } => format!("host port {port} taken").into(),
            DuplicateHostPort { .. } => "duplicate host port".into(),
            NoFreePorts { .. } => "insufficient ports".into(),
            ExecutorConflict { .. } => "more than one executor".into(),
            ExecutorMismatch { .. } => "other executor running".into(),
            Custom { procurement, .. } => procurement.clone(),
        }
    }
}

/// Why a pod fits none of the offers, agent by agent.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AggregateFailure {
    /// How many agents (offers) were tried.
    pub agents: usize,
    /// Every agent's failure: its hostname and the reason.
    pub failures: Vec<(String, ProcureError)>,
}

impl AggregateFailure {
    /// Records one agent's failure.
    pub fn push(&mut self, hostname: impl Into<String>, error: ProcureError) {
        self.failures.push((hostname.into(), error));
    }

    /// Reasons with how many agents failed for each, most frequent first,
    /// ties in alphabetical order (so the message is deterministic).
    pub fn counts(&self) -> Vec<(Cow<'static, str>, usize)> {
        let mut by: BTreeMap<Cow<'static, str>, usize> = BTreeMap::new();
        for (_, e) in &self.failures {
            *by.entry(e.summary()).or_default() += 1;
        }
        let mut v: Vec<_> = by.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// [`Self::counts`] by [`ProcureError::metric_reason`]: what the
    /// scheduling attempts metric is labelled with.
    pub fn metric_counts(&self) -> Vec<(Cow<'static, str>, usize)> {
        let mut by: BTreeMap<Cow<'static, str>, usize> = BTreeMap::new();
        for (_, e) in &self.failures {
            *by.entry(e.metric_reason()).or_default() += 1;
        }
        by.into_iter().collect()
    }

    /// Whether the pod itself is malformed (the same on every agent): worth
    /// reporting once instead of retrying.
    pub fn is_invalid_pod(&self) -> bool {
        !self.failures.is_empty()
            && self
                .failures
                .iter()
                .all(|(_, e)| matches!(e, ProcureError::InvalidPod { .. }))
    }
}

impl fmt::Display for AggregateFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0/{} agents available", self.agents)?;
        let counts = self.counts();
        for (i, (reason, n)) in counts.iter().enumerate() {
            f.write_str(if i == 0 { ": " } else { ", " })?;
            write!(f, "{n} {reason}")?;
        }
        f.write_str(".")
    }
}

impl std::error::Error for AggregateFailure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_labels_carry_nothing_a_pod_spec_chose() {
        let mut a = AggregateFailure {
            agents: 3,
            ..Default::default()
        };
        for (h, quantity) in [("a", "9".repeat(400)), ("b", "1Qi".to_owned())] {
            a.push(
                h,
                ProcureError::InvalidPod {
                    stage: Stage::PodResources,
                    reason: format!("bad memory {quantity}"),
                },
            );
        }
        a.push("c", ProcureError::PortTaken { port: 31_337 });
        assert!(a.to_string().contains("31337"), "the message keeps it");
        assert_eq!(
            a.metric_counts(),
            [
                (Cow::Borrowed("host port taken"), 1),
                (Cow::Borrowed("invalid pod"), 2)
            ]
        );
    }

    #[test]
    fn aggregate_message_is_kubernetes_style_sorted_by_count_then_name() {
        let mut a = AggregateFailure {
            agents: 6,
            ..Default::default()
        };
        for h in ["a", "b", "c"] {
            a.push(
                h,
                ProcureError::Insufficient {
                    resource: ResourceKind::Cpus,
                    owner: Owner::Pod,
                    asked: 2.0,
                    available: 1.0,
                },
            );
        }
        a.push(
            "d",
            ProcureError::NodeSelectorMismatch {
                key: "zone".into(),
                wanted: "z1".into(),
            },
        );
        a.push(
            "e",
            ProcureError::NodeSelectorMismatch {
                key: "rack".into(),
                wanted: "r1".into(),
            },
        );
        a.push("f", ProcureError::NodeAffinityMismatch);
        assert_eq!(
            a.to_string(),
            "0/6 agents available: 3 insufficient cpus, 2 node selector mismatch, 1 node affinity mismatch."
        );
        assert!(!a.is_invalid_pod());
        let empty = AggregateFailure::default();
        assert_eq!(empty.to_string(), "0/0 agents available.");
    }

    #[test]
    fn a_resource_failure_says_which_procurement_what_was_asked_and_what_is_available() {
        let e = ProcureError::Insufficient {
            resource: ResourceKind::Mem,
            owner: Owner::Executor,
            asked: 128.0,
            available: 64.5,
        };
        assert_eq!(e.stage(), Stage::Executor);
        assert_eq!(
            e.to_string(),
            "insufficient mem for the executor: asked 128, available 64.5"
        );
    }
}
