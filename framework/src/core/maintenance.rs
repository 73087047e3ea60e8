//! Mesos maintenance: a machine the operator schedules for maintenance is
//! emptied of mesopod's pods before its window, the Kubernetes way.
//!
//! The master says a machine is DRAINING in two ways: every offer from its
//! agents carries `unavailability`, and each framework with resources there
//! gets an inverse offer. Either starts the same drain (they may come in any
//! order, and a framework with nothing there gets only the first):
//!
//! 1. The agent's Node is marked ([`Write::NodeMaintenance`]): cordoned and
//!    tainted `mesopod.io/maintenance:NoSchedule`, with the window in its
//!    annotations. From then on no pod is placed there, not even a
//!    DaemonSet's, which tolerates only the cordon.
//! 2. Its pods are evicted ([`Write::Evict`]) through the Eviction API, so a
//!    PodDisruptionBudget holds them back as it holds `kubectl drain`: a
//!    refused eviction is tried again every [`EVICTION_RETRY`], as kubectl
//!    drain does. Their controllers make replacements elsewhere.
//! 3. Once no task of ours is live there, the inverse offers are accepted:
//!    mesopod holds nothing the maintenance would take. One that comes
//!    later, while the agent stays empty, is accepted at once.
//!
//! An offer from the machine without `unavailability` says the schedule no
//! longer names it (or it is back up after its window): the drain stops and
//! the mark comes off. The mark is on the Node, so a new leader learns it
//! from the Node watch ([`Core::node_marked`]) and lifts it the same way.
//!
//! The operator's own `machine/down` stops whatever still runs (PDBs or not);
//! mesopod never forces a pod past its budget to meet a window. So does an
//! agent drain (DRAIN_AGENT), which Mesos carries out itself: the first of our
//! tasks it kills marks the Node the same way ([`Core::on_agent_draining`]),
//! and the agent's first offer after its reactivation lifts the mark.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use apiserver::MaintenanceWindow;
use mesos::proto::scheduler::{Call, call};
use mesos::proto::{InverseOffer, OfferId, Unavailability};
use registry::{Flag, PodTask, Registry};

use super::Core;
use super::effect::{Effect, Reply, Write};
use crate::objects::node_event;

/// How long after an eviction its pod is evicted again if it is still
/// there: kubectl drain's retry interval after a 429.
pub const EVICTION_RETRY: Duration = Duration::from_secs(5);

/// What the core knows of machines under maintenance.
#[derive(Debug, Default)]
pub(crate) struct Maintenance {
    /// Agents being drained, by agent id.
    draining: HashMap<String, Draining>,
    /// Hostnames whose Node carries the mark: written by this core, or seen
    /// on the Node (a mark an earlier leader wrote).
    marked: HashSet<String>,
}

#[derive(Debug)]
struct Draining {
    hostname: Option<String>,
    window: MaintenanceWindow,
    /// Inverse offers not answered yet.
    inverse_offers: Vec<OfferId>,
    /// When the pods still there are evicted (again).
    next_evictions: SystemTime,
}

impl Maintenance {
    /// Whether `agent` (on `hostname`) is fenced off for maintenance: it
    /// takes no pod at all, whatever the pod tolerates, since mesopod is
    /// giving it back (a pod that tolerates every taint, as some
    /// DaemonSets' do, would otherwise be evicted and put back forever).
    pub(crate) fn fences(&self, agent: &str, hostname: &str) -> bool {
        self.draining.contains_key(agent) || self.marked.contains(hostname)
    }

    /// Drops every inverse offer: a new subscription has none outstanding.
    pub(crate) fn forget_inverse_offers(&mut self) {
        for d in self.draining.values_mut() {
            d.inverse_offers.clear();
        }
    }

    /// Whether any agent is being drained.
    pub(crate) fn is_draining(&self) -> bool {
        !self.draining.is_empty()
    }
}

/// The window an `Unavailability` describes; a start before the epoch is
/// taken as the epoch.
fn window_of(u: &Unavailability) -> MaintenanceWindow {
    let at = |nanos: i64| {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
    };
    let start = at(u.start.as_ref().map_or(0, |t| t.nanoseconds));
    let end = u
        .duration
        .as_ref()
        .map(|d| start + Duration::from_nanos(u64::try_from(d.nanoseconds).unwrap_or(0)));
    MaintenanceWindow { start, end }
}

impl Core {
    /// The master's INVERSE_OFFERS: each starts (or joins) its agent's drain.
    pub(super) fn on_inverse_offers(&mut self, offers: Vec<InverseOffer>, now: SystemTime) {
        for offer in offers {
            let Some(id) = offer.id else { continue };
            let Some(agent) = offer.agent_id.map(|a| a.value) else {
                // Maintenance always names the agent; a request for all of a
                // framework's resources is one mesopod cannot meet.
                tracing::warn!(inverse_offer = %id.value, "declining an inverse offer for no particular agent");
                self.answer_inverse_offers(vec![id], false, 0.0);
                continue;
            };
            let window = offer.unavailability.as_ref().map(window_of);
            let hostname = self.agents.hostname(&agent).map(str::to_owned);
            self.drain(&agent, hostname, window, now);
            if let Some(d) = self.maintenance.draining.get_mut(&agent) {
                d.inverse_offers.push(id);
            }
            tracing::info!(%agent, "Mesos asks for the agent back (inverse offer)");
        }
        self.drain_sweep(now);
    }

    /// The master withdrew an inverse offer: it needs no answer now.
    pub(super) fn on_rescind_inverse_offer(&mut self, id: &OfferId) {
        for d in self.maintenance.draining.values_mut() {
            d.inverse_offers.retain(|o| o != id);
        }
    }

    /// An offer's `unavailability` (or its absence) from `agent` on `hostname`.
    pub(super) fn offer_unavailability(
        &mut self,
        agent: &str,
        hostname: &str,
        unavailability: Option<&Unavailability>,
        now: SystemTime,
    ) {
        match unavailability {
            Some(u) => self.drain(agent, Some(hostname.to_owned()), Some(window_of(u)), now),
            None => {
                let drained = self.maintenance.draining.remove(agent).is_some();
                if drained || self.maintenance.marked.contains(hostname) {
                    self.end_maintenance(hostname, now);
                }
            }
        }
    }

    /// What the Node watch saw of a Node's mark.
    pub(super) fn node_marked(&mut self, hostname: String, marked: bool) {
        if marked {
            self.maintenance.marked.insert(hostname);
        } else {
            self.maintenance.marked.remove(&hostname);
        }
    }

    /// A task of ours was killed because the operator drains its agent
    /// (DRAIN_AGENT, Mesos 1.9+). Mesos deactivated the agent first, so it
    /// offers nothing until REACTIVATE_AGENT, and it kills every task there
    /// itself: mesopod has nothing to evict, only the Node to mark, so that
    /// `kubectl get nodes` says what Mesos decided and no DaemonSet waits on
    /// an agent that will not offer. The first offer after the reactivation
    /// carries no `unavailability`, and lifts the mark as it ends a
    /// maintenance. mesopod learns of a drain only through its own tasks.
    pub(super) fn on_agent_draining(&mut self, agent: &str, now: SystemTime) {
        let Some(host) = self
            .agents
            .hostname(agent)
            .map(str::to_owned)
            .or_else(|| self.hostname_of_tasks_on(agent))
        else {
            return;
        };
        if !self.maintenance.marked.insert(host.clone()) {
            return;
        }
        let message = "The Mesos operator drains this agent (DRAIN_AGENT): its tasks are killed, it offers nothing until it is reactivated, and the node is cordoned".to_owned();
        tracing::info!(node = %host, %agent, "the operator drains the agent");
        let event = node_event(&host, "Warning", "AgentDraining", message, now);
        self.emit(Effect::Store(vec![
            Write::NodeMaintenance {
                node: host,
                window: Some(MaintenanceWindow {
                    start: now,
                    end: None,
                }),
            },
            Write::Event(Box::new(event)),
        ]));
    }

    /// Starts draining `agent`, or brings its window up to date.
    fn drain(
        &mut self,
        agent: &str,
        hostname: Option<String>,
        window: Option<MaintenanceWindow>,
        now: SystemTime,
    ) {
        let hostname = hostname.or_else(|| self.hostname_of_tasks_on(agent));
        let entry = self.maintenance.draining.get_mut(agent);
        let changed = match entry {
            Some(d) => {
                if d.hostname.is_none() {
                    d.hostname.clone_from(&hostname);
                }
                let moved = window.is_some_and(|w| w != d.window);
                if let Some(w) = window {
                    d.window = w;
                }
                moved
            }
            None => {
                self.maintenance.draining.insert(
                    agent.to_owned(),
                    Draining {
                        hostname: hostname.clone(),
                        window: window.unwrap_or(MaintenanceWindow {
                            start: now,
                            end: None,
                        }),
                        inverse_offers: Vec::new(),
                        next_evictions: now,
                    },
                );
                true
            }
        };
        let Some(host) = self.maintenance.draining[agent].hostname.clone() else {
            return;
        };
        if !changed && self.maintenance.marked.contains(&host) {
            return;
        }
        let window = self.maintenance.draining[agent].window;
        self.maintenance.marked.insert(host.clone());
        let until = window.end.map_or_else(
            || "with no end".to_owned(),
            |end| format!("until {}", apiserver::k8s_time(end).0),
        );
        let message = format!(
            "Mesos scheduled this machine for maintenance from {} {until}: the node is cordoned and its pods are evicted",
            apiserver::k8s_time(window.start).0
        );
        tracing::info!(node = %host, %message, "maintenance scheduled");
        let event = node_event(&host, "Normal", "MaintenanceScheduled", message, now);
        self.emit(Effect::Store(vec![
            Write::NodeMaintenance {
                node: host,
                window: Some(window),
            },
            Write::Event(Box::new(event)),
        ]));
    }

    fn end_maintenance(&mut self, hostname: &str, now: SystemTime) {
        self.maintenance.marked.remove(hostname);
        tracing::info!(node = %hostname, "maintenance over: the node takes pods again");
        let event = node_event(
            hostname,
            "Normal",
            "MaintenanceEnded",
            "Mesos no longer schedules this machine for maintenance: the node is uncordoned".into(),
            now,
        );
        self.emit(Effect::Store(vec![
            Write::NodeMaintenance {
                node: hostname.to_owned(),
                window: None,
            },
            Write::Event(Box::new(event)),
        ]));
    }

    /// The hostname our tasks on `agent` name, for an agent that has not
    /// offered anything to this core yet.
    fn hostname_of_tasks_on(&self, agent: &str) -> Option<String> {
        self.registry
            .list(&|t: &PodTask| t.spec.as_ref().is_some_and(|s| s.agent_id.value == agent))
            .into_iter()
            .find_map(|t| t.spec.as_ref().map(|s| s.hostname.clone()))
    }

    /// Evicts what still runs on draining agents (at most every
    /// [`EVICTION_RETRY`] per agent), and accepts the inverse offers of the
    /// agents that hold nothing of ours any more.
    pub(super) fn drain_sweep(&mut self, now: SystemTime) {
        if !self.maintenance.is_draining() {
            return;
        }
        let draining = &self.maintenance.draining;
        let mut live: HashMap<String, Vec<PodTask>> = HashMap::new();
        for task in self.registry.list(&|t: &PodTask| {
            t.is_live()
                && t.spec
                    .as_ref()
                    .is_some_and(|s| draining.contains_key(&s.agent_id.value))
        }) {
            if let Some(spec) = &task.spec {
                live.entry(spec.agent_id.value.clone())
                    .or_default()
                    .push(task);
            }
        }
        let agents: Vec<String> = self.maintenance.draining.keys().cloned().collect();
        for agent in agents {
            let tasks = live.remove(&agent).unwrap_or_default();
            if tasks.is_empty() {
                self.vacated(&agent, now);
                continue;
            }
            let Some(d) = self.maintenance.draining.get_mut(&agent) else {
                continue;
            };
            if now < d.next_evictions {
                continue;
            }
            d.next_evictions = now + EVICTION_RETRY;
            let node = d.hostname.clone().unwrap_or_default();
            let writes: Vec<Write> = tasks
                .iter()
                .filter(|t| !t.has(Flag::Deleted))
                .map(|t| Write::Evict {
                    key: t.pod_key(),
                    node: node.clone(),
                })
                .collect();
            if !writes.is_empty() {
                self.emit(Effect::Store(writes));
            }
        }
    }

    /// `agent` holds nothing of ours: its inverse offers are accepted,
    /// refusing more until the window starts (they would ask for what is
    /// already given).
    fn vacated(&mut self, agent: &str, now: SystemTime) {
        let Some(d) = self.maintenance.draining.get_mut(agent) else {
            return;
        };
        if d.inverse_offers.is_empty() {
            return;
        }
        let ids = std::mem::take(&mut d.inverse_offers);
        let refuse = d
            .window
            .start
            .duration_since(now)
            .unwrap_or_default()
            .as_secs_f64()
            .max(5.0);
        let host = d.hostname.clone();
        tracing::info!(%agent, "agent vacated: accepting Mesos' inverse offers");
        self.answer_inverse_offers(ids, true, refuse);
        if let Some(host) = host {
            let event = node_event(
                &host,
                "Normal",
                "InverseOfferAccepted",
                "mesopod holds nothing on this machine any more: it accepted Mesos' inverse offer"
                    .into(),
                now,
            );
            self.emit(Effect::Store(vec![Write::Event(Box::new(event))]));
        }
    }

    fn answer_inverse_offers(&mut self, ids: Vec<OfferId>, accept: bool, refuse_seconds: f64) {
        let filters = Some(mesos::proto::Filters {
            refuse_seconds: Some(refuse_seconds),
        });
        let call = if accept {
            Call {
                r#type: Some(call::Type::AcceptInverseOffers as i32),
                accept_inverse_offers: Some(call::AcceptInverseOffers {
                    inverse_offer_ids: ids,
                    filters,
                }),
                ..Default::default()
            }
        } else {
            Call {
                r#type: Some(call::Type::DeclineInverseOffers as i32),
                decline_inverse_offers: Some(call::DeclineInverseOffers {
                    inverse_offer_ids: ids,
                    filters,
                }),
                ..Default::default()
            }
        };
        self.emit(Effect::Call(call, Reply::None));
    }
}
