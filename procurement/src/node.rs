//! The agent as the pipeline sees it: a Kubernetes-style node built from an offer.
//!
//! # Labels
//! As DESIGN.md states, an agent appears as a node named by its hostname and
//! labelled `kubernetes.io/hostname` and `mesopod.io/agent-id`, with every
//! agent attribute as a label of the same name. Attribute values are written
//! as Mesos prints them: text as is, scalars without trailing zeros (`3`,
//! `1.5`), ranges as `[1-2,4-5]`, sets as `{a,b}`. The two labels of our own
//! win over an attribute of the same name, so an agent cannot pretend to be
//! another host.
//!
//! # Taints
//! Mesos has no taints, so they travel as agent attributes (set with the
//! agent's `--attributes` flag):
//!
//! ```text
//! taint.mesopod.io/<key>:<value>:<Effect>    e.g. taint.mesopod.io/dedicated:gpu:NoSchedule
//! taint.mesopod.io/<key>:<Effect>            a taint with an empty value
//! ```
//!
//! The attribute's name after the prefix is the taint key; its text value
//! splits at its *last* `:` into value and effect, one of `NoSchedule`,
//! `PreferNoSchedule`, `NoExecute`. A malformed taint attribute makes
//! [`NodeView::from_offer`] fail: an operator who meant to repel pods must not
//! have the agent silently accept them.

use std::sync::Arc;

use mesos::proto::{AgentId, Attribute, ExecutorId, ExecutorInfo, Offer};
use mesos::resources::attribute_text;
use thiserror::Error;

/// Label naming the agent's hostname (Kubernetes' well-known label).
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
/// Label naming the Mesos agent id.
pub const AGENT_ID_LABEL: &str = "mesopod.io/agent-id";
/// Attribute-name prefix that marks an attribute as a taint.
pub const TAINT_ATTRIBUTE_PREFIX: &str = "taint.mesopod.io/";

/// An offer that cannot be used for placement at all.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OfferError {
    /// The offer names no agent, so no task could be launched on it.
    #[error("offer {offer} has no agent id")]
    MissingAgentId {
        /// The offer's id ("" when absent too).
        offer: String,
    },
    /// The offer has no id, so it could never be accepted.
    #[error("offer from agent {agent} has no offer id")]
    MissingOfferId {
        /// The agent it came from.
        agent: String,
    },
    /// A resource Mesos itself would reject (negative amount, bad range...).
    #[error("offer {offer}: {why}")]
    InvalidResources {
        /// The offer's id.
        offer: String,
        /// What is wrong.
        why: String,
    },
    /// A `taint.mesopod.io/` attribute that does not follow the convention.
    #[error("agent {agent}: attribute {attribute:?} is not a taint (want <value>:<Effect>): {why}")]
    BadTaint {
        /// The agent's hostname.
        agent: String,
        /// The attribute's name.
        attribute: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// What a taint does to pods that do not tolerate it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaintEffect {
    /// New pods are not placed on the agent.
    NoSchedule,
    /// A preference only: placement is not refused.
    PreferNoSchedule,
    /// New pods are not placed (and running ones would be evicted).
    NoExecute,
}

impl TaintEffect {
    /// Kubernetes' name of the effect.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }
}

/// The taint of a cordoned Node (`kubectl cordon`).
pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";

/// The NoSchedule taint of a Node whose machine Mesos has scheduled for
/// maintenance. Unlike the cordon's, no pod tolerates it unless it names it
/// (or tolerates everything), so a DaemonSet's pod does not land there either.
pub const MAINTENANCE: &str = "mesopod.io/maintenance";

/// A taint carried by an agent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Taint {
    /// The taint's key.
    pub key: String,
    /// Its value (may be empty).
    pub value: String,
    /// What it does.
    pub effect: TaintEffect,
}

/// The agent behind an offer, as the procurements see it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    agent_id: AgentId,
    hostname: String,
    /// Sorted by key, keys unique.
    labels: Vec<(String, String)>,
    taints: Vec<Taint>,
    executor_ids: Vec<ExecutorId>,
    running_executor: Option<Arc<ExecutorInfo>>,
}

impl NodeView {
    /// Builds the view of the agent that made `offer`.
    ///
    /// # Errors
    /// [`OfferError::MissingAgentId`] when the offer names no agent, and
    /// [`OfferError::BadTaint`] for a malformed taint attribute.
    pub fn from_offer(offer: &Offer) -> Result<Self, OfferError> {
        let agent_id = match &offer.agent_id {
            Some(id) if !id.value.is_empty() => id.clone(),
            _ => {
                return Err(OfferError::MissingAgentId {
                    offer: offer
                        .id
                        .as_ref()
                        .map(|i| i.value.clone())
                        .unwrap_or_default(),
                });
            }
        };
        Self::new(
            agent_id,
            offer.hostname.clone(),
            &offer.attributes,
            offer.executor_ids.clone(),
        )
    }

    /// Builds a view from its parts (the agent id, hostname, attributes and
    /// the framework's executors running there).
    ///
    /// # Errors
    /// [`OfferError::BadTaint`] for a malformed taint attribute.
    pub fn new(
        agent_id: AgentId,
        hostname: String,
        attributes: &[Attribute],
        executor_ids: Vec<ExecutorId>,
    ) -> Result<Self, OfferError> {
        let mut labels: Vec<(String, String)> = Vec::with_capacity(attributes.len() + 2);
        let mut taints = Vec::new();
        for a in attributes {
            let text = attribute_text(a);
            if let Some(key) = a.name.strip_prefix(TAINT_ATTRIBUTE_PREFIX) {
                taints.push(parse_taint(&hostname, &a.name, key, &text)?);
            }
            if a.name != HOSTNAME_LABEL && a.name != AGENT_ID_LABEL {
                labels.push((a.name.clone(), text));
            }
        }
        labels.push((HOSTNAME_LABEL.to_owned(), hostname.clone()));
        labels.push((AGENT_ID_LABEL.to_owned(), agent_id.value.clone()));
        // A repeated attribute name keeps its first value, as Mesos' own
        // attribute lookup does.
        labels.sort_by(|a, b| a.0.cmp(&b.0));
        labels.dedup_by(|later, earlier| later.0 == earlier.0);
        Ok(NodeView {
            agent_id,
            hostname,
            labels,
            taints,
            executor_ids,
            running_executor: None,
        })
    }

    /// The Mesos agent id.
    pub fn agent_id(&self) -> &AgentId {
        &self.agent_id
    }

    /// The agent's hostname, which is also the node's name.
    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    /// The value of label `key`, if the node has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .map(|i| self.labels[i].1.as_str())
    }

    /// All labels, sorted by key.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        self.labels.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The agent's taints, in attribute order.
    pub fn taints(&self) -> &[Taint] {
        &self.taints
    }

    /// Ids of this framework's executors running on the agent.
    pub fn executor_ids(&self) -> &[ExecutorId] {
        &self.executor_ids
    }

    /// Records the info our executor on this agent was launched with (the
    /// framework keeps it from the launch). Mesos refuses a task for a
    /// running executor unless its `ExecutorInfo` equals the launch's, so a
    /// reused executor is attached with exactly this info.
    #[must_use]
    pub fn with_running_executor(mut self, info: Arc<ExecutorInfo>) -> Self {
        self.running_executor = Some(info);
        self
    }

    /// The view of this agent while `info`, our executor, runs there, as an
    /// offer from it would list it: for a trial placement made with no
    /// offer in hand (preemption, on an agent where our pods run).
    #[must_use]
    pub fn with_executor_running(mut self, info: Arc<ExecutorInfo>) -> Self {
        if let Some(id) = &info.executor_id
            && !self.executor_ids.contains(id)
        {
            self.executor_ids.push(id.clone());
        }
        self.running_executor = Some(info);
        self
    }

    /// The view of a cordoned agent: with the `node.kubernetes.io/unschedulable`
    /// NoSchedule taint its Node carries, which only pods that tolerate it (a
    /// DaemonSet's) pass.
    #[must_use]
    pub fn cordoned(mut self) -> Self {
        if !self.taints.iter().any(|t| t.key == UNSCHEDULABLE) {
            self.taints.push(Taint {
                key: UNSCHEDULABLE.into(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            });
        }
        self
    }

    /// The agent with its machine under Mesos maintenance: cordoned, and
    /// with the [`MAINTENANCE`] taint as well.
    #[must_use]
    pub fn under_maintenance(self) -> Self {
        let mut node = self.cordoned();
        if !node.taints.iter().any(|t| t.key == MAINTENANCE) {
            node.taints.push(Taint {
                key: MAINTENANCE.into(),
                value: String::new(),
                effect: TaintEffect::NoSchedule,
            });
        }
        node
    }

    /// The info recorded with [`NodeView::with_running_executor`].
    pub fn running_executor(&self) -> Option<&Arc<ExecutorInfo>> {
        self.running_executor.as_ref()
    }
}

fn parse_taint(host: &str, attribute: &str, key: &str, text: &str) -> Result<Taint, OfferError> {
    let bad = |why| OfferError::BadTaint {
        agent: host.to_owned(),
        attribute: attribute.to_owned(),
        why,
    };
    if key.is_empty() {
        return Err(bad("the taint key after the prefix is empty"));
    }
    let (value, effect) = match text.rsplit_once(':') {
        Some((v, e)) => (v, e),
        None => ("", text),
    };
    let effect = TaintEffect::parse(effect)
        .ok_or_else(|| bad("the effect must be NoSchedule, PreferNoSchedule or NoExecute"))?;
    Ok(Taint {
        key: key.to_owned(),
        value: value.to_owned(),
        effect,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use mesos::proto::value;

    fn text(name: &str, v: &str) -> Attribute {
        Attribute {
            name: name.into(),
            r#type: value::Type::Text as i32,
            text: Some(value::Text { value: v.into() }),
            ..Default::default()
        }
    }

    #[test]
    fn labels_are_hostname_agent_id_and_attributes_as_mesos_prints_them() {
        let attrs = vec![
            text("rack", "r1"),
            Attribute {
                name: "level".into(),
                r#type: value::Type::Scalar as i32,
                scalar: Some(value::Scalar { value: 3.0 }),
                ..Default::default()
            },
            Attribute {
                name: "cap".into(),
                r#type: value::Type::Scalar as i32,
                scalar: Some(value::Scalar { value: 1.5 }),
                ..Default::default()
            },
            text(HOSTNAME_LABEL, "impostor"),
        ];
        let n = NodeView::new("a1".into(), "h1".into(), &attrs, vec![]).unwrap();
        assert_eq!(n.label("rack"), Some("r1"));
        assert_eq!(n.label("level"), Some("3"));
        assert_eq!(n.label("cap"), Some("1.5"));
        assert_eq!(n.label(HOSTNAME_LABEL), Some("h1"));
        assert_eq!(n.label(AGENT_ID_LABEL), Some("a1"));
        assert_eq!(n.label("zone"), None);
    }

    #[test]
    fn taint_attributes_follow_the_documented_convention() {
        type Want = Result<(&'static str, TaintEffect), ()>;
        let cases: &[(&str, Want)] = &[
            ("gpu:NoSchedule", Ok(("gpu", TaintEffect::NoSchedule))),
            ("NoExecute", Ok(("", TaintEffect::NoExecute))),
            (
                "a:b:PreferNoSchedule",
                Ok(("a:b", TaintEffect::PreferNoSchedule)),
            ),
            ("gpu:Sometimes", Err(())),
            ("", Err(())),
        ];
        for (v, want) in cases {
            let r = NodeView::new(
                "a".into(),
                "h".into(),
                &[text("taint.mesopod.io/dedicated", v)],
                vec![],
            );
            match (r, want) {
                (Ok(n), Ok((value, effect))) => {
                    assert_eq!(n.taints()[0].key, "dedicated");
                    assert_eq!(n.taints()[0].value, *value, "{v}");
                    assert_eq!(n.taints()[0].effect, *effect, "{v}");
                }
                (Err(OfferError::BadTaint { .. }), Err(())) => {}
                (r, _) => panic!("{v}: {r:?}"),
            }
        }
        let empty_key = NodeView::new(
            "a".into(),
            "h".into(),
            &[text("taint.mesopod.io/", "NoSchedule")],
            vec![],
        );
        assert!(empty_key.is_err());
    }
}
