//! Inverse offers, as Mesos' hierarchical allocator makes them for
//! maintenance: every agent on a DRAINING machine asks each framework that
//! holds something there (tasks, executors or offers) to give it all back
//! before the machine's unavailability starts.
//!
//! # Rules (Mesos' `generateInverseOffers` and `updateInverseOffer`)
//!
//! - Each allocation round, a connected framework with something on a
//!   draining agent gets one INVERSE_OFFERS event per round for the agents
//!   it has no outstanding inverse offer for, unless a filter holds it back.
//! - ACCEPT_/DECLINE_INVERSE_OFFERS close the inverse offer and record the
//!   answer with its time (what GET_MAINTENANCE_STATUS shows). With
//!   `filters`, no new inverse offer for that agent goes to the framework
//!   for `refuse_seconds` (5 s if unset, 365 days at most, on the master's
//!   clock); without, the next round asks again.
//! - An inverse offer unanswered after [`crate::Timing::offer_timeout`] is
//!   rescinded, as Mesos' `--offer_timeout` does, and asked again later.
//! - A new unavailability for the agent (schedule update or the machine
//!   leaving it), the agent's removal, or the machine going DOWN rescinds
//!   what is outstanding (RESCIND_INVERSE_OFFER) and forgets answers and
//!   filters. A framework that disconnects loses its inverse offers
//!   silently, as its offers.
//! - Answers never change anything else: accepting is a promise, declining
//!   advice.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use mesos::proto::allocator::{InverseOfferStatus, inverse_offer_status};
use mesos::proto::scheduler::{Event, event};
use mesos::proto::{
    AgentId, Filters, FrameworkId, InverseOffer, OfferId, TimeInfo, Unavailability,
};

use super::{Shared, State, allocator};
use crate::agent::AgentStatus;
use crate::validation;

/// Mesos' `Filters.refuse_seconds` default.
const DEFAULT_REFUSE_SECONDS: f64 = 5.0;
/// The longest inverse-offer filter Mesos installs.
const MAX_REFUSE: Duration = Duration::from_secs(365 * 86_400);

/// One agent's drain: the interval, who has an inverse offer outstanding,
/// and the last answer of each framework.
struct Draining {
    unavailability: Unavailability,
    asked: BTreeSet<String>,
    statuses: BTreeMap<String, InverseOfferStatus>,
}

/// An outstanding inverse offer.
struct Outstanding {
    framework_id: String,
    agent_id: String,
}

/// The allocator's maintenance records.
#[derive(Default)]
pub(crate) struct InverseOffers {
    /// By agent id.
    draining: HashMap<String, Draining>,
    /// By inverse offer id.
    outstanding: HashMap<String, Outstanding>,
    /// (framework, agent) → until when, on the master's clock.
    filters: HashMap<(String, String), Duration>,
}

impl InverseOffers {
    /// The frameworks' answers on an agent, for the maintenance status.
    pub(crate) fn statuses(&self, agent_id: &str) -> Vec<InverseOfferStatus> {
        self.draining
            .get(agent_id)
            .map(|d| d.statuses.values().cloned().collect())
            .unwrap_or_default()
    }
}

fn rescind_event(id: &str) -> Event {
    Event {
        r#type: Some(event::Type::RescindInverseOffer as i32),
        rescind_inverse_offer: Some(event::RescindInverseOffer {
            inverse_offer_id: Some(OfferId::new(id)),
        }),
        ..Default::default()
    }
}

/// Rescinds every outstanding inverse offer on the agent.
pub(crate) fn rescind_agent(st: &mut State, agent_id: &str) {
    let inv = &mut st.maintenance.inverse;
    let ids: Vec<String> = inv
        .outstanding
        .iter()
        .filter(|(_, o)| o.agent_id == agent_id)
        .map(|(id, _)| id.clone())
        .collect();
    for id in ids {
        if let Some(o) = inv.outstanding.remove(&id)
            && let Some(fw) = st.frameworks.get(&o.framework_id)
        {
            fw.send(rescind_event(&id));
        }
    }
}

/// Gives the agent a new unavailability (`None`: it no longer drains):
/// outstanding inverse offers are rescinded, answers and filters forgotten.
pub(crate) fn set_unavailability(st: &mut State, agent_id: &str, u: Option<Unavailability>) {
    rescind_agent(st, agent_id);
    let inv = &mut st.maintenance.inverse;
    inv.filters.retain(|(_, a), _| a != agent_id);
    inv.draining.remove(agent_id);
    if let Some(unavailability) = u {
        inv.draining.insert(
            agent_id.to_owned(),
            Draining {
                unavailability,
                asked: BTreeSet::new(),
                statuses: BTreeMap::new(),
            },
        );
    }
}

/// A master restart: the allocator starts afresh (no outstanding inverse
/// offer, answer or filter), while the schedule and the modes, which Mesos
/// keeps in its registry, stay.
pub(crate) fn reset(st: &mut State) {
    let inv = &mut st.maintenance.inverse;
    inv.outstanding.clear();
    inv.filters.clear();
    for d in inv.draining.values_mut() {
        d.asked.clear();
        d.statuses.clear();
    }
}

/// The agent is removed or unreachable: its inverse offers are rescinded
/// and its records dropped.
pub(crate) fn remove_agent(st: &mut State, agent_id: &str) {
    set_unavailability(st, agent_id, None);
}

/// The framework disconnected, failed over or was removed: its inverse
/// offers go without a word, and the next round may ask it again.
pub(crate) fn remove_framework(st: &mut State, framework_id: &str) {
    let inv = &mut st.maintenance.inverse;
    inv.outstanding
        .retain(|_, o| o.framework_id != framework_id);
    for d in inv.draining.values_mut() {
        d.asked.remove(framework_id);
    }
}

/// The frameworks that hold something on the agent: live tasks, executors
/// or outstanding offers (what Mesos' allocator counts as allocated).
fn frameworks_on(st: &State, agent_id: &str) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = st
        .offers
        .values()
        .filter(|o| o.agent_id == agent_id)
        .map(|o| o.framework_id.clone())
        .collect();
    if let Some(agent) = st.agents.get(agent_id) {
        out.extend(agent.executors.keys().map(|(fw, _)| fw.clone()));
    }
    for (id, fw) in &st.frameworks {
        if fw
            .tasks
            .values()
            .any(|t| t.agent_id.value == agent_id && !t.state.is_terminal())
        {
            out.insert(id.clone());
        }
    }
    out
}

/// The allocation round's inverse offers (see the module rules).
pub(crate) fn generate(cx: &Shared, st: &mut State) {
    let now = cx.clock.now();
    let mut due: Vec<(String, String)> = Vec::new();
    let agent_ids: Vec<String> = st.maintenance.inverse.draining.keys().cloned().collect();
    for agent_id in agent_ids {
        let active = st
            .agents
            .get(&agent_id)
            .is_some_and(|a| a.status == AgentStatus::Active && a.silent_since.is_none());
        if !active {
            continue;
        }
        for fw_id in frameworks_on(st, &agent_id) {
            if st.frameworks.get(&fw_id).is_none_or(|f| f.conn.is_none()) {
                continue;
            }
            let inv = &mut st.maintenance.inverse;
            let key = (fw_id.clone(), agent_id.clone());
            match inv.filters.get(&key) {
                Some(until) if *until > now => continue,
                Some(_) => {
                    inv.filters.remove(&key);
                }
                None => {}
            }
            if let Some(d) = inv.draining.get_mut(&agent_id)
                && d.asked.insert(fw_id.clone())
            {
                due.push(key);
            }
        }
    }
    let mut made: BTreeMap<String, Vec<InverseOffer>> = BTreeMap::new();
    for (fw_id, agent_id) in due {
        let id = st.new_offer_id();
        let unavailability = st
            .maintenance
            .inverse
            .draining
            .get(&agent_id)
            .map(|d| d.unavailability);
        st.maintenance.inverse.outstanding.insert(
            id.clone(),
            Outstanding {
                framework_id: fw_id.clone(),
                agent_id: agent_id.clone(),
            },
        );
        tracing::info!(
            framework = fw_id,
            agent = agent_id,
            inverse_offer = id,
            "sending an inverse offer"
        );
        if let Some(timeout) = cx.timing.offer_timeout {
            let (epoch, id) = (st.epoch, id.clone());
            cx.after(timeout, move |_, st| {
                if st.epoch == epoch {
                    expire(st, &id);
                }
            });
        }
        made.entry(fw_id.clone()).or_default().push(InverseOffer {
            id: Some(OfferId::new(id)),
            url: st.agents.get(&agent_id).and_then(allocator::agent_url),
            framework_id: Some(FrameworkId::new(fw_id)),
            agent_id: Some(AgentId::new(agent_id)),
            unavailability,
            resources: Vec::new(),
        });
    }
    for (fw_id, inverse_offers) in made {
        if let Some(fw) = st.frameworks.get(&fw_id) {
            fw.send(Event {
                r#type: Some(event::Type::InverseOffers as i32),
                inverse_offers: Some(event::InverseOffers { inverse_offers }),
                ..Default::default()
            });
        }
    }
}

/// `--offer_timeout` for an inverse offer still unanswered: it is rescinded
/// without an answer recorded, and the next round may ask again.
fn expire(st: &mut State, id: &str) {
    let inv = &mut st.maintenance.inverse;
    let Some(o) = inv.outstanding.remove(id) else {
        return;
    };
    if let Some(d) = inv.draining.get_mut(&o.agent_id) {
        d.asked.remove(&o.framework_id);
    }
    if let Some(fw) = st.frameworks.get(&o.framework_id) {
        fw.send(rescind_event(id));
    }
}

/// How long a filter lasts, as Mesos reads `refuse_seconds`.
fn refusal(filters: &Filters) -> Duration {
    let secs = filters.refuse_seconds.unwrap_or(DEFAULT_REFUSE_SECONDS);
    if !secs.is_finite() || secs < 0.0 {
        return Duration::from_secs_f64(DEFAULT_REFUSE_SECONDS);
    }
    Duration::try_from_secs_f64(secs).map_or(MAX_REFUSE, |d| d.min(MAX_REFUSE))
}

/// ACCEPT_/DECLINE_INVERSE_OFFERS of framework `fw_id`: records the answer
/// and installs the filter (see the module rules). Invalid ids make Mesos
/// ignore the whole call, with a warning in its log; so does this.
pub(crate) fn answer(
    cx: &Shared,
    st: &mut State,
    fw_id: &str,
    ids: &[OfferId],
    filters: Option<&Filters>,
    accept: bool,
) {
    let inv = &mut st.maintenance.inverse;
    let checked = validation::inverse_offer_ids(ids, fw_id, |id| {
        inv.outstanding
            .get(id)
            .map(|o| (o.framework_id.as_str(), o.agent_id.as_str()))
    });
    if let Err(e) = checked {
        let what = if accept { "ACCEPT" } else { "DECLINE" };
        tracing::warn!(framework = fw_id, error = %e, "{what}_INVERSE_OFFERS call used invalid offers");
        return;
    }
    let status = if accept {
        inverse_offer_status::Status::Accept
    } else {
        inverse_offer_status::Status::Decline
    };
    let timestamp = TimeInfo {
        nanoseconds: (cx.clock.wall_secs() * 1e9) as i64,
    };
    let until = filters.map(|f| cx.clock.now() + refusal(f));
    for id in ids {
        let Some(o) = inv.outstanding.remove(&id.value) else {
            continue;
        };
        if let Some(d) = inv.draining.get_mut(&o.agent_id) {
            d.asked.remove(fw_id);
            d.statuses.insert(
                fw_id.to_owned(),
                InverseOfferStatus {
                    status: status as i32,
                    framework_id: Some(FrameworkId::new(fw_id)),
                    timestamp: Some(timestamp),
                },
            );
        }
        if let Some(until) = until {
            inv.filters.insert((fw_id.to_owned(), o.agent_id), until);
        }
    }
}
