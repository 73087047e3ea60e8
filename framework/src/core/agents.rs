//! Agents and their executors: the Node each agent gets, and the exact
//! executor info each agent runs (Mesos refuses a task whose executor info
//! differs from the running executor's).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use executor::NodeImages;
use k8s_openapi::api::core::v1::Node;
use mesos::proto::{ExecutorInfo, Offer};
use procurement::{NodeView, Owner, ProcureError, ResourceKind};

use super::Lookup;
use super::effect::Placed;

use crate::objects::{node_for, set_node_images, set_node_ready};

/// What the core remembers of an agent.
#[derive(Debug, Clone)]
struct AgentInfo {
    hostname: String,
    /// The most of each scalar the agent has offered: its capacity, as far
    /// as offers tell.
    capacity: BTreeMap<&'static str, f64>,
    /// Its Node as last written (`None`: not yet).
    node: Option<Node>,
    /// The agent as procurement saw it in its last offer that changed its
    /// Node: what preemption tries a pod on when the agent offers nothing.
    view: Option<NodeView>,
    /// Whether its Node is Ready (its executor, if one is needed, reports).
    ready: bool,
}

/// Every agent seen, and the executor info each runs.
#[derive(Debug, Default)]
pub(crate) struct Agents {
    agents: HashMap<String, AgentInfo>,
    /// The exact `ExecutorInfo` each agent's executor was launched with, so
    /// a reused executor is named identically.
    executors: HashMap<String, Arc<ExecutorInfo>>,
    /// What each agent's executor last said of its image store; kept
    /// apart from `agents`, since it may come before the agent's offers.
    images: HashMap<String, Arc<NodeImages>>,
}

impl Agents {
    /// How many agents have offered anything.
    pub(crate) fn len(&self) -> usize {
        self.agents.len()
    }

    /// Why the pod cannot fit, as far as capacity tells, on each agent that
    /// had no offer out this round (those not in `offered`, by hostname);
    /// `None` when one of them could hold it once its resources come back,
    /// so it is worth looking again soon. `needs` is the pod's cpus, mem,
    /// disk and gpus (`PodResourcesProcurement::pod_needs`).
    pub(crate) fn shortfalls_without_offers(
        &self,
        needs: [f64; 4],
        offered: &HashSet<&str>,
    ) -> Option<Vec<(String, ProcureError)>> {
        // Any agent that could hold the pod answers at once; only when none
        // can are the reasons gathered, in hostname order for the message.
        let mut out = Vec::new();
        for agent in self
            .agents
            .values()
            .filter(|a| !offered.contains(a.hostname.as_str()))
        {
            // `needs` is in `SCALARS`' order.
            let short = ResourceKind::SCALARS
                .into_iter()
                .zip(needs)
                .find_map(|(kind, asked)| {
                    let available = agent.capacity.get(kind.name()).copied().unwrap_or(0.0);
                    (asked > available).then_some(ProcureError::Insufficient {
                        resource: kind,
                        owner: Owner::Pod,
                        asked,
                        available,
                    })
                });
            out.push((agent.hostname.clone(), short?));
        }
        out.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Some(out)
    }

    /// The hostname `agent` offered with, if it has offered.
    pub(crate) fn hostname(&self, agent: &str) -> Option<&str> {
        self.agents.get(agent).map(|a| a.hostname.as_str())
    }

    /// The agent's Node when it is first seen or offers more than ever
    /// before (its capacity as far as offers tell); `None` otherwise.
    pub(crate) fn note(&mut self, offer: &Offer, now: SystemTime) -> Option<Node> {
        let agent_id = offer.agent_id.as_ref()?.value.clone();
        // Summed straight from the wire: this runs for every offer.
        let mut offered: BTreeMap<&str, f64> = BTreeMap::new();
        for r in &offer.resources {
            if let Some(s) = &r.scalar {
                *offered.entry(r.name.as_str()).or_default() += s.value;
            }
        }
        let offered_scalar = |name: &str| offered.get(name).copied().unwrap_or(0.0);
        let entry = self.agents.entry(agent_id).or_insert_with(|| AgentInfo {
            hostname: offer.hostname.clone(),
            capacity: BTreeMap::new(),
            node: None,
            view: None,
            ready: true,
        });
        let mut changed = entry.node.is_none() || entry.hostname != offer.hostname;
        entry.hostname.clone_from(&offer.hostname);
        for name in ["cpus", "mem", "disk", "gpus"] {
            let seen = entry.capacity.entry(name).or_insert(0.0);
            if offered_scalar(name) > *seen {
                *seen = offered_scalar(name);
                changed = true;
            }
        }
        if !changed {
            return None;
        }
        let view = NodeView::from_offer(offer).ok()?;
        let mut node = node_for(&view, &entry.capacity, now);
        if let Some(images) = self.images.get(&view.agent_id().value) {
            let disk = entry.capacity.get("disk").copied().unwrap_or(0.0);
            set_node_images(&mut node, images, disk);
        }
        if !entry.ready {
            set_node_ready(&mut node, false, now);
        }
        entry.node = Some(node.clone());
        entry.view = Some(view);
        Some(node)
    }

    /// Every agent seen, in agent id order: its id, how procurement sees it
    /// and its capacity (cpus, mem, disk, gpus in milli-units).
    pub(crate) fn nodes(&self) -> Vec<(&str, &NodeView, [i64; 4])> {
        let mut out: Vec<_> = self
            .agents
            .iter()
            .filter_map(|(id, a)| {
                let view = a.view.as_ref()?;
                let capacity = ResourceKind::SCALARS.map(|k| {
                    procurement::f64_to_millis(a.capacity.get(k.name()).copied().unwrap_or(0.0))
                });
                Some((id.as_str(), view, capacity))
            })
            .collect();
        out.sort_unstable_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// The agent's Node made Ready or NotReady (see `liveness`); `None`
    /// when it has none yet or is so already.
    pub(crate) fn set_ready(&mut self, agent: &str, ready: bool, now: SystemTime) -> Option<Node> {
        let entry = self.agents.get_mut(agent)?;
        if entry.ready == ready {
            return None;
        }
        entry.ready = ready;
        let node = entry.node.as_mut()?;
        set_node_ready(node, ready, now);
        Some(node.clone())
    }

    /// The agent's Node with what its executor now says of its image store;
    /// `None` when the agent has no Node yet or nothing changed.
    pub(crate) fn set_images(&mut self, agent: &str, images: NodeImages) -> Option<Node> {
        if self
            .images
            .get(agent)
            .is_some_and(|known| **known == images)
        {
            return None;
        }
        let images = Arc::new(images);
        self.images.insert(agent.to_owned(), Arc::clone(&images));
        let entry = self.agents.get_mut(agent)?;
        let disk = entry.capacity.get("disk").copied().unwrap_or(0.0);
        let node = entry.node.as_mut()?;
        set_node_images(node, &images, disk);
        Some(node.clone())
    }

    /// Notes the executor info each placed task launches with on its agent,
    /// and returns the durable writes of the ones that changed (one meta key
    /// per agent), so later pods, and a restarted mesopod, name the
    /// executor identically. They are written with the bindings, before the
    /// ACCEPT. Recording an info whose launch then fails is harmless: it is
    /// consulted only for an agent whose offers show the executor running,
    /// and a fresh launch there overwrites it.
    pub(crate) fn remember_executors(&mut self, placed: &[Placed]) -> BTreeMap<String, Vec<u8>> {
        let mut writes = BTreeMap::new();
        for spec in placed.iter().filter_map(|p| p.task.spec.as_ref()) {
            let Some(info) = spec.executor.as_ref() else {
                continue;
            };
            let agent = &spec.agent_id.value;
            if self
                .executors
                .get(agent)
                .is_some_and(|known| Arc::ptr_eq(known, info) || **known == **info)
            {
                continue;
            }
            match serde_json::to_vec(info.as_ref()) {
                Ok(bytes) => {
                    writes.insert(executor_key(agent), bytes);
                }
                Err(e) => tracing::warn!(error = %e, "could not encode an executor info"),
            }
            self.executors.insert(agent.clone(), Arc::clone(info));
        }
        writes
    }

    /// The info the agent's running executor was launched with: remembered,
    /// or stored by an earlier mesopod.
    pub(crate) fn executor_on(
        &mut self,
        agent: &str,
        lookup: &dyn Lookup,
    ) -> Option<Arc<ExecutorInfo>> {
        if let Some(info) = self.executors.get(agent) {
            return Some(info.clone());
        }
        let raw = lookup.meta(&executor_key(agent))?;
        let info = Arc::new(serde_json::from_slice::<ExecutorInfo>(&raw).ok()?);
        self.executors.insert(agent.to_owned(), info.clone());
        Some(info)
    }
}

/// The meta key of the executor info launched on `agent`.
pub(super) fn executor_key(agent: &str) -> String {
    format!("{}/{agent}", super::EXECUTORS_KEY)
}
