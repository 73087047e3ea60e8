//! The core's record of preemption: which pod is nominated to which agent
//! and for which victims, which nominees wait for their agent's next offer,
//! the disruption budgets victims are weighed by, and the floor of running
//! priorities.

use std::collections::HashMap;
use std::time::SystemTime;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use mesos::proto::TaskId;
use registry::PodKey;

use super::plan::Budget;

/// A pod's claim on an agent whose pods are being preempted for it.
#[derive(Debug, Clone)]
pub(crate) struct Nomination {
    pub(super) agent: String,
    pub(super) hostname: String,
    pub(super) priority: i32,
    pub(super) victims: Vec<TaskId>,
    /// The victims not yet ended.
    pub(super) remaining: usize,
    pub(super) expires: SystemTime,
    /// Its victims have all ended and the offers the agent had out then
    /// were declined: an offer from the agent now carries what they freed.
    pub(super) regrouped: bool,
}

/// The nominations, and what the core knows to weigh victims by.
#[derive(Debug, Default)]
pub(crate) struct Preemption {
    pub(super) nominations: HashMap<PodKey, Nomination>,
    /// Each victim's preemptor.
    pub(super) victim_of: HashMap<TaskId, PodKey>,
    /// The nominees whose victims have all ended, by agent: an offer from
    /// the agent is what they wait for.
    pub(super) freed: HashMap<String, Vec<PodKey>>,
    /// Disruption budgets, by namespace and name.
    pub(super) budgets: HashMap<(String, String), Budget>,
    /// Where the next scan of the agents starts, so that plans spread.
    pub(super) cursor: usize,
    /// The lowest priority of a running task, and when it was worked out.
    pub(super) floor: Option<(i32, SystemTime)>,
}

impl Preemption {
    /// The agent `key` is nominated to, if it is.
    pub(crate) fn nominated(&self, key: &PodKey) -> Option<&str> {
        self.nominations.get(key).map(|n| n.hostname.as_str())
    }

    /// When the pod's nomination ends, if it has one.
    pub(crate) fn expires(&self, key: &PodKey) -> Option<SystemTime> {
        self.nominations.get(key).map(|n| n.expires)
    }

    /// The pod was placed or is gone: its claim ends.
    pub(crate) fn forget(&mut self, key: &PodKey) {
        // Every placed pod comes here: with no nomination, no key is hashed.
        if self.nominations.is_empty() {
            return;
        }
        if let Some(n) = self.nominations.remove(key) {
            for id in &n.victims {
                self.victim_of.remove(id);
            }
            if let Some(waiting) = self.freed.get_mut(&n.agent) {
                waiting.retain(|k| k != key);
                if waiting.is_empty() {
                    self.freed.remove(&n.agent);
                }
            }
        }
    }

    /// Drops the nominations whose time is up.
    pub(crate) fn expire(&mut self, now: SystemTime) {
        let expired: Vec<PodKey> = self
            .nominations
            .iter()
            .filter(|(_, n)| n.expires <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            self.forget(&key);
        }
    }

    /// A task ended: when it was a nomination's last victim, the agent it
    /// freed, whose offers out now predate the freed room.
    pub(crate) fn victim_ended(&mut self, task: &TaskId) -> Option<String> {
        let key = self.victim_of.remove(task)?;
        let n = self.nominations.get_mut(&key)?;
        n.remaining = n.remaining.saturating_sub(1);
        if n.remaining > 0 || n.regrouped {
            return None;
        }
        n.regrouped = true;
        self.freed.entry(n.agent.clone()).or_default().push(key);
        Some(n.agent.clone())
    }

    /// A task of this priority now runs.
    pub(crate) fn running(&mut self, priority: i32) {
        if let Some((floor, _)) = &mut self.floor {
            *floor = (*floor).min(priority);
        }
    }

    /// Whether some nominee waits for its agent's next offer.
    pub(crate) fn nominee_waits_for_offers(&self) -> bool {
        !self.freed.is_empty()
    }

    /// Whether some agent is held for its nominees.
    pub(crate) fn holds(&self) -> bool {
        !self.nominations.is_empty()
    }

    /// The held agents: for each, the highest priority nominated to it and
    /// its nominees.
    pub(crate) fn held(&self) -> HashMap<&str, (i32, Vec<&PodKey>)> {
        let mut held: HashMap<&str, (i32, Vec<&PodKey>)> = HashMap::new();
        for (key, n) in &self.nominations {
            let entry = held
                .entry(n.agent.as_str())
                .or_insert((n.priority, Vec::new()));
            entry.0 = entry.0.max(n.priority);
            entry.1.push(key);
        }
        held
    }

    /// A budget was written or deleted.
    pub(crate) fn budget(&mut self, budget: &PodDisruptionBudget, deleted: bool) {
        let key = (
            budget.metadata.namespace.clone().unwrap_or_default(),
            budget.metadata.name.clone().unwrap_or_default(),
        );
        let selector = budget
            .spec
            .as_ref()
            .and_then(|s| s.selector.as_ref())
            .and_then(|s| controllers::Selector::new(s).ok());
        match selector {
            // A budget whose selector cannot be read protects nothing, as in
            // kube-scheduler.
            Some(selector) if !deleted => {
                let status = budget.status.clone().unwrap_or_default();
                self.budgets.insert(
                    key.clone(),
                    Budget {
                        namespace: key.0,
                        selector,
                        allowed: status.disruptions_allowed,
                        disrupted: status
                            .disrupted_pods
                            .unwrap_or_default()
                            .into_keys()
                            .collect(),
                    },
                );
            }
            _ => {
                self.budgets.remove(&key);
            }
        }
    }
}
