//! Maintenance, as Mesos' master keeps it: the schedule an operator posts,
//! the machines it names and their mode (DRAINING, then DOWN, then UP
//! again), and what each transition does to the agents on them. The
//! allocator's side (inverse offers and the frameworks' answers) is
//! [`super::inverse_offers`].
//!
//! # Rules (Mesos' `master/http.cpp` and `master/maintenance.cpp`)
//!
//! - A machine is a hostname (case-insensitive) and an IP; an agent is on
//!   it when both match what the agent advertises ([`MachineKey::of_agent`]).
//! - A schedule replaces the previous one whole. Machines it names that were
//!   UP become DRAINING; DRAINING and DOWN ones keep their mode and take
//!   the new unavailability; DRAINING ones it drops go back UP. A DOWN
//!   machine cannot be dropped (it must be brought up first).
//! - START_MAINTENANCE takes DRAINING machines DOWN: their agents are shut
//!   down and removed, and no agent on them may register while DOWN.
//! - STOP_MAINTENANCE takes DOWN machines UP and out of the schedule.
//! - Mesos never changes a mode by itself: time passing does nothing.

use std::collections::BTreeMap;

use mesos::proto::machine_info::Mode;
use mesos::proto::maintenance::{ClusterStatus, Schedule, cluster_status};
use mesos::proto::{MachineId, Unavailability};

use super::{Shared, State, agents, inverse_offers};
use crate::agent::{Agent, AgentStatus};
use crate::validation;

/// The IP every localmesos agent advertises: real agents bind their
/// endpoint on loopback, and simulated ones live in this process too.
pub(crate) const AGENT_IP: &str = "127.0.0.1";

/// How machines compare: hostname without case, IP as written (Mesos'
/// `MachineID` equality and hash).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct MachineKey {
    hostname: String,
    ip: String,
}

impl MachineKey {
    pub(crate) fn of(id: &MachineId) -> Self {
        Self::new(
            id.hostname.as_deref().unwrap_or_default(),
            id.ip.as_deref().unwrap_or_default(),
        )
    }

    pub(crate) fn new(hostname: &str, ip: &str) -> Self {
        MachineKey {
            hostname: hostname.to_lowercase(),
            ip: ip.to_owned(),
        }
    }

    /// The machine an agent is on: its hostname and the IP of its pid.
    pub(crate) fn of_agent(agent: &Agent) -> Self {
        let ip = agent
            .endpoint
            .map_or_else(|| AGENT_IP.to_owned(), |e| e.ip().to_string());
        Self::new(&agent.hostname, &ip)
    }
}

/// A machine the schedule names (UP machines are not kept).
#[derive(Clone, Debug)]
pub(crate) struct Machine {
    /// As the operator wrote it (Mesos reports it back as given).
    pub(crate) id: MachineId,
    pub(crate) mode: Mode,
    pub(crate) unavailability: Option<Unavailability>,
}

/// The maintenance part of the master's state.
#[derive(Default)]
pub(crate) struct Maintenance {
    /// The schedule as posted, less the machines brought back up.
    pub(crate) schedule: Schedule,
    /// DRAINING and DOWN machines.
    pub(crate) machines: BTreeMap<MachineKey, Machine>,
    /// The allocator's side: inverse offers, answers, filters.
    pub(crate) inverse: inverse_offers::InverseOffers,
}

impl Maintenance {
    /// The unavailability of the machine an agent is on, if it is DRAINING
    /// (what its offers carry).
    pub(crate) fn unavailability_of(&self, agent: &Agent) -> Option<Unavailability> {
        self.machines
            .get(&MachineKey::of_agent(agent))
            .filter(|m| m.mode == Mode::Draining)
            .and_then(|m| m.unavailability)
    }

    /// Whether agents on this machine are refused registration.
    pub(crate) fn is_down(&self, key: &MachineKey) -> bool {
        self.machines.get(key).is_some_and(|m| m.mode == Mode::Down)
    }

    /// `GET_MAINTENANCE_STATUS`: DRAINING machines with the frameworks'
    /// answers to their agents' inverse offers, and DOWN machines.
    pub(crate) fn status(&self, st: &State) -> ClusterStatus {
        let mut status = ClusterStatus::default();
        for (key, machine) in &self.machines {
            match machine.mode {
                Mode::Draining => {
                    let statuses = agents_on(st, key)
                        .iter()
                        .flat_map(|a| self.inverse.statuses(a))
                        .collect();
                    status
                        .draining_machines
                        .push(cluster_status::DrainingMachine {
                            id: Some(machine.id.clone()),
                            statuses,
                        });
                }
                Mode::Down => status.down_machines.push(machine.id.clone()),
                Mode::Up => {}
            }
        }
        status
    }
}

/// The live (not removed) agents on a machine.
pub(crate) fn agents_on(st: &State, key: &MachineKey) -> Vec<String> {
    st.agents
        .values()
        .filter(|a| a.status != AgentStatus::Gone && MachineKey::of_agent(a) == *key)
        .map(|a| a.id.value.clone())
        .collect()
}

/// The DOWN machines, for the schedule check.
fn down_machines(st: &State) -> Vec<MachineId> {
    st.maintenance
        .machines
        .values()
        .filter(|m| m.mode == Mode::Down)
        .map(|m| m.id.clone())
        .collect()
}

/// UPDATE_MAINTENANCE_SCHEDULE (`POST /maintenance/schedule`).
///
/// # Errors
/// Mesos' validation message (HTTP 400); nothing changed.
pub(crate) fn update_schedule(
    cx: &Shared,
    st: &mut State,
    schedule: Schedule,
) -> Result<(), String> {
    validation::schedule(&schedule, MachineKey::of, &down_machines(st))?;
    let mut wanted: BTreeMap<MachineKey, (MachineId, Unavailability)> = BTreeMap::new();
    for window in &schedule.windows {
        for id in &window.machine_ids {
            let u = window.unavailability.unwrap_or_default();
            wanted.insert(MachineKey::of(id), (id.clone(), u));
        }
    }
    let known: Vec<MachineKey> = st.maintenance.machines.keys().cloned().collect();
    for key in known {
        match wanted.get(&key) {
            Some((_, u)) => {
                if let Some(m) = st.maintenance.machines.get_mut(&key) {
                    m.unavailability = Some(*u);
                }
                set_unavailability(cx, st, &key, Some(*u));
            }
            None => {
                // Validation kept every DOWN machine: this one was DRAINING.
                st.maintenance.machines.remove(&key);
                set_unavailability(cx, st, &key, None);
            }
        }
    }
    for (key, (id, u)) in wanted {
        if st.maintenance.machines.contains_key(&key) {
            continue;
        }
        st.maintenance.machines.insert(
            key.clone(),
            Machine {
                id,
                mode: Mode::Draining,
                unavailability: Some(u),
            },
        );
        set_unavailability(cx, st, &key, Some(u));
    }
    tracing::info!(
        windows = schedule.windows.len(),
        "maintenance schedule updated"
    );
    st.maintenance.schedule = schedule;
    cx.allocate_now.notify_one();
    Ok(())
}

/// Gives every agent on the machine its new unavailability: offers and
/// inverse offers on it are rescinded, answers and filters forgotten, and
/// the next allocation offers it again with the new interval.
fn set_unavailability(cx: &Shared, st: &mut State, key: &MachineKey, u: Option<Unavailability>) {
    for agent_id in agents_on(st, key) {
        super::allocator::rescind_agent_offers(st, &agent_id);
        inverse_offers::set_unavailability(st, &agent_id, u);
    }
    cx.allocate_now.notify_one();
}

/// Mesos' answer to a machine that START/STOP cannot take: unknown to the
/// schedule and to every agent, or in another mode.
fn wrong_mode(st: &State, id: &MachineId, key: &MachineKey, want: Mode, verb: &str) -> String {
    let text = validation::machine_text(id);
    let known = st.maintenance.machines.contains_key(key) || !agents_on(st, key).is_empty();
    if !known {
        return format!("Machine '{text}' is not part of a maintenance schedule");
    }
    format!(
        "Machine '{text}' is not in {} mode and cannot be {verb}",
        want.as_str_name()
    )
}

/// START_MAINTENANCE (`POST /machine/down`): every machine must be
/// DRAINING; their agents are shut down and removed (tasks
/// TASK_GONE_BY_OPERATOR, TASK_LOST without PARTITION_AWARE), then they
/// are DOWN.
///
/// # Errors
/// Mesos' message (HTTP 400); nothing changed.
pub(crate) fn start(st: &mut State, ids: &[MachineId]) -> Result<(), String> {
    validation::machines(ids, MachineKey::of)?;
    for id in ids {
        let key = MachineKey::of(id);
        let draining = st
            .maintenance
            .machines
            .get(&key)
            .is_some_and(|m| m.mode == Mode::Draining);
        if !draining {
            return Err(wrong_mode(st, id, &key, Mode::Draining, "brought down"));
        }
    }
    for id in ids {
        let key = MachineKey::of(id);
        for agent_id in agents_on(st, &key) {
            tracing::info!(
                agent = agent_id,
                "shutting the agent down: Operator initiated 'Machine DOWN'"
            );
            agents::remove_locked(st, &agent_id, agents::Removal::MachineDown);
        }
        if let Some(m) = st.maintenance.machines.get_mut(&key) {
            m.mode = Mode::Down;
        }
    }
    Ok(())
}

/// STOP_MAINTENANCE (`POST /machine/up`): every machine must be DOWN; they
/// are UP again, out of the schedule, and their agents may register.
///
/// # Errors
/// Mesos' message (HTTP 400); nothing changed.
pub(crate) fn stop(st: &mut State, ids: &[MachineId]) -> Result<(), String> {
    validation::machines(ids, MachineKey::of)?;
    for id in ids {
        let key = MachineKey::of(id);
        if !st.maintenance.is_down(&key) {
            return Err(wrong_mode(st, id, &key, Mode::Down, "brought up"));
        }
    }
    let up: Vec<MachineKey> = ids.iter().map(MachineKey::of).collect();
    for key in &up {
        st.maintenance.machines.remove(key);
    }
    let schedule = &mut st.maintenance.schedule;
    for window in &mut schedule.windows {
        window
            .machine_ids
            .retain(|id| !up.contains(&MachineKey::of(id)));
    }
    schedule.windows.retain(|w| !w.machine_ids.is_empty());
    Ok(())
}

/// A newly registered agent on a DRAINING machine drains too, as Mesos
/// gives the allocator the machine's unavailability when an agent is added.
pub(crate) fn agent_registered(st: &mut State, agent_id: &str) {
    let u = st
        .agents
        .get(agent_id)
        .and_then(|a| st.maintenance.unavailability_of(a));
    if u.is_some() {
        inverse_offers::set_unavailability(st, agent_id, u);
    }
}
