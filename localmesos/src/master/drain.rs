//! Agent deactivation and draining (Mesos 1.9+): the operator API's
//! DEACTIVATE_AGENT, DRAIN_AGENT and REACTIVATE_AGENT, the drain state the
//! master keeps per agent, and what draining does to the agent's tasks.
//!
//! # Rules (Mesos' `master/http.cpp` `_drainAgent`, `_deactivateAgent`,
//! `_reactivateAgent`; `master/master.cpp` `checkAndTransitionDrainingAgent`;
//! `slave/slave.cpp` `Slave::drain` and `Slave::statusUpdate`)
//!
//! - A deactivated agent is offered no more: its outstanding offers and
//!   inverse offers are rescinded. Its tasks keep running.
//! - DRAIN_AGENT deactivates the agent and sets it DRAINING with its
//!   config; the agent kills every task, each with its kill policy's grace
//!   period capped by `max_grace_period`. Draining again replaces the
//!   config and starts over from DRAINING.
//! - While the agent drains, its TASK_KILLING and TASK_KILLED updates carry
//!   REASON_AGENT_DRAINING, and with `mark_gone` a PARTITION_AWARE
//!   framework sees TASK_GONE_BY_OPERATOR instead of TASK_KILLED.
//! - Once no task is left on the agent (all terminal, every terminal update
//!   acknowledged) it is DRAINED, or, with `mark_gone`, marked gone.
//! - REACTIVATE_AGENT needs a deactivated agent that is not DRAINING; it
//!   clears both, and the agent is offered again.
//! - Drain state and deactivation are kept by agent id, like Mesos'
//!   registry, so they outlive a partition and a master restart; an agent
//!   that comes back while draining is told to drain again.

use std::collections::{BTreeMap, BTreeSet};

use mesos::proto::master::call::Duration as ProtoDuration;
use mesos::proto::{
    DrainConfig, DrainInfo, DrainState, DurationInfo, KillPolicy, MachineId, TaskState, TaskStatus,
    TimeInfo, task_status,
};

use super::maintenance::MachineKey;
use super::{Shared, State, agents, allocator, executors, inverse_offers};
use crate::agent::AgentStatus;

/// Why a call was refused: Mesos' status code and message.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum Refusal {
    /// HTTP 400.
    #[error("{0}")]
    BadRequest(String),
    /// HTTP 409.
    #[error("{0}")]
    Conflict(String),
}

/// The drain part of the master's state, by agent id.
#[derive(Default)]
pub(crate) struct Drains {
    deactivated: BTreeSet<String>,
    draining: BTreeMap<String, DrainInfo>,
    /// When the current drain was sent to the agent (Mesos'
    /// `estimatedDrainStartTime`), cleared on reactivation.
    started: BTreeMap<String, TimeInfo>,
}

impl Drains {
    pub(crate) fn is_deactivated(&self, agent_id: &str) -> bool {
        self.deactivated.contains(agent_id)
    }

    pub(crate) fn info(&self, agent_id: &str) -> Option<&DrainInfo> {
        self.draining.get(agent_id)
    }

    pub(crate) fn start_time(&self, agent_id: &str) -> Option<TimeInfo> {
        self.started.get(agent_id).copied()
    }

    /// The agent left the cluster for good: Mesos forgets both.
    pub(crate) fn forget(&mut self, agent_id: &str) {
        self.deactivated.remove(agent_id);
        self.draining.remove(agent_id);
        self.started.remove(agent_id);
    }

    fn config(&self, agent_id: &str) -> Option<&DrainConfig> {
        self.draining.get(agent_id).and_then(|d| d.config.as_ref())
    }
}

/// Mesos' devolve of `google.protobuf.Duration` into a `DurationInfo`
/// (unset fields count as zero).
pub(crate) fn duration_info(d: &ProtoDuration) -> DurationInfo {
    let seconds = d.seconds.unwrap_or(0);
    let nanos = i64::from(d.nanos.unwrap_or(0));
    DurationInfo {
        nanoseconds: seconds.saturating_mul(1_000_000_000).saturating_add(nanos),
    }
}

/// Whether Mesos' master knows the agent (recovered, registered or
/// unreachable): a removed agent is not.
fn known(st: &State, agent_id: &str) -> bool {
    st.agents
        .get(agent_id)
        .is_some_and(|a| a.status != AgentStatus::Gone)
}

/// Whether the master can talk to the agent now (Mesos'
/// `slaves.registered` with a connection that delivers).
fn connected(st: &State, agent_id: &str) -> bool {
    st.agents
        .get(agent_id)
        .is_some_and(|a| a.status == AgentStatus::Active && a.silent_since.is_none())
}

/// What Mesos' `Master::deactivate` does to a registered agent.
fn withdraw_offers(cx: &Shared, st: &mut State, agent_id: &str) {
    allocator::rescind_agent_offers(st, agent_id);
    inverse_offers::rescind_agent(st, agent_id);
    cx.allocate_now.notify_one();
}

/// DEACTIVATE_AGENT.
///
/// # Errors
/// 400 `Unknown agent` for an agent the master does not know.
pub(crate) fn deactivate(cx: &Shared, st: &mut State, agent_id: &str) -> Result<(), Refusal> {
    if !known(st, agent_id) {
        return Err(Refusal::BadRequest("Unknown agent".into()));
    }
    st.drain.deactivated.insert(agent_id.to_owned());
    tracing::info!(agent = agent_id, "deactivating agent");
    withdraw_offers(cx, st, agent_id);
    Ok(())
}

/// The schedule's machine an agent is on, as Mesos prints it
/// (`hostname (ip)`), if the schedule names it.
fn scheduled_machine(st: &State, agent_id: &str) -> Option<String> {
    let agent = st.agents.get(agent_id)?;
    let key = MachineKey::of_agent(agent);
    st.maintenance
        .schedule
        .windows
        .iter()
        .flat_map(|w| w.machine_ids.iter())
        .find(|m| MachineKey::of(m) == key)
        .map(machine_text)
}

/// Mesos' `operator<<` of a `MachineID`.
fn machine_text(m: &MachineId) -> String {
    match (m.hostname.as_deref(), m.ip.as_deref()) {
        (Some(h), Some(ip)) => format!("{h} ({ip})"),
        (Some(h), None) => h.to_owned(),
        (None, Some(ip)) => format!("({ip})"),
        (None, None) => String::new(),
    }
}

/// DRAIN_AGENT.
///
/// # Errors
/// 400 with Mesos' message: the agent is on a machine of the maintenance
/// schedule, or unknown.
pub(crate) fn drain(
    cx: &Shared,
    st: &mut State,
    agent_id: &str,
    max_grace_period: Option<DurationInfo>,
    mark_gone: bool,
) -> Result<(), Refusal> {
    // Mesos makes this check only on registered agents: the machine of an
    // unreachable one is not known until it comes back.
    if st
        .agents
        .get(agent_id)
        .is_some_and(|a| a.status == AgentStatus::Active)
        && let Some(machine) = scheduled_machine(st, agent_id)
    {
        return Err(Refusal::BadRequest(format!(
            "Agent {agent_id} is part of a maintenance schedule under Machine {machine}"
        )));
    }
    if !known(st, agent_id) {
        return Err(Refusal::BadRequest("Unknown agent".into()));
    }
    let info = DrainInfo {
        state: Some(DrainState::Draining as i32),
        config: Some(DrainConfig {
            max_grace_period,
            mark_gone: Some(mark_gone),
        }),
    };
    st.drain.draining.insert(agent_id.to_owned(), info);
    st.drain.deactivated.insert(agent_id.to_owned());
    tracing::info!(
        agent = agent_id,
        mark_gone,
        "transitioning agent to DRAINING"
    );
    if st
        .agents
        .get(agent_id)
        .is_some_and(|a| a.status == AgentStatus::Active)
    {
        withdraw_offers(cx, st, agent_id);
        let now = cx.clock.wall_secs();
        st.drain.started.insert(
            agent_id.to_owned(),
            TimeInfo {
                nanoseconds: (now * 1e9) as i64,
            },
        );
        // A partitioned agent does not hear the drain: it is sent again
        // when the partition heals (`reregistered`).
        if connected(st, agent_id) {
            kill_tasks(cx, st, agent_id);
        }
        check(cx, st, agent_id);
    }
    Ok(())
}

/// REACTIVATE_AGENT.
///
/// # Errors
/// 400 when the agent is not deactivated or still DRAINING; 409 when it is
/// not registered (Mesos clears its state all the same).
pub(crate) fn reactivate(cx: &Shared, st: &mut State, agent_id: &str) -> Result<(), Refusal> {
    if !st.drain.deactivated.contains(agent_id) {
        return Err(Refusal::BadRequest("Agent is not deactivated".into()));
    }
    if st
        .drain
        .info(agent_id)
        .is_some_and(|d| d.state == Some(DrainState::Draining as i32))
    {
        return Err(Refusal::BadRequest(
            "Agent is still in the DRAINING state".into(),
        ));
    }
    st.drain.forget(agent_id);
    let registered = st
        .agents
        .get(agent_id)
        .is_some_and(|a| a.status == AgentStatus::Active);
    if !registered {
        return Err(Refusal::Conflict(
            "Agent removed while processing the call".into(),
        ));
    }
    tracing::info!(agent = agent_id, "reactivating agent");
    cx.allocate_now.notify_one();
    Ok(())
}

/// The kill policy the agent gives a task it drains (Mesos'
/// `calculateKillPolicy` in `Slave::drain`): `None` keeps the task's own.
fn capped_policy(max: Option<DurationInfo>, own: Option<&KillPolicy>) -> Option<KillPolicy> {
    let max = max?;
    let capped = KillPolicy {
        grace_period: Some(max),
    };
    match own.and_then(|p| p.grace_period) {
        Some(g) if max.nanoseconds >= g.nanoseconds => None,
        _ => Some(capped),
    }
}

/// What the agent does on a drain message: kill every live task on it.
fn kill_tasks(cx: &Shared, st: &mut State, agent_id: &str) {
    let max = st.drain.config(agent_id).and_then(|c| c.max_grace_period);
    let mut doomed: Vec<(String, String, Option<KillPolicy>)> = Vec::new();
    for (fw_id, fw) in &st.frameworks {
        for (task_id, task) in &fw.tasks {
            if task.agent_id.value == agent_id && !task.state.is_terminal() {
                let policy = capped_policy(max, task.info.kill_policy.as_ref());
                doomed.push((fw_id.clone(), task_id.clone(), policy));
            }
        }
    }
    for (fw_id, task_id, policy) in doomed {
        executors::kill_task(cx, st, &fw_id, &task_id, policy);
    }
}

/// What the agent adds to its updates while it drains (Mesos'
/// `Slave::statusUpdate`): KILLING and KILLED carry REASON_AGENT_DRAINING,
/// and KILLED becomes TASK_GONE_BY_OPERATOR for a PARTITION_AWARE
/// framework when the agent is to be marked gone.
pub(crate) fn decorate(st: &State, framework_id: &str, status: &mut TaskStatus) {
    if status.source == Some(task_status::Source::SourceMaster as i32) {
        return;
    }
    let Some(fw) = st.frameworks.get(framework_id) else {
        return;
    };
    let Some(task) = status.task_id.as_ref().and_then(|t| fw.tasks.get(&t.value)) else {
        return;
    };
    let Some(config) = st.drain.config(&task.agent_id.value) else {
        return;
    };
    let killing = [TaskState::TaskKilling as i32, TaskState::TaskKilled as i32];
    if !killing.contains(&status.state) {
        return;
    }
    status.reason = Some(task_status::Reason::ReasonAgentDraining as i32);
    if config.mark_gone == Some(true) && fw.partition_aware() {
        status.state = TaskState::TaskGoneByOperator as i32;
    }
}

/// Mesos' `checkAndTransitionDrainingAgent`: a DRAINING agent with no task
/// left becomes DRAINED, or is marked gone when its config says so.
pub(crate) fn check(cx: &Shared, st: &mut State, agent_id: &str) {
    let Some(info) = st.drain.info(agent_id) else {
        return;
    };
    if info.state == Some(DrainState::Drained as i32) {
        return;
    }
    let mark_gone = info
        .config
        .as_ref()
        .and_then(|c| c.mark_gone)
        .unwrap_or(false);
    if !connected(st, agent_id) {
        return;
    }
    let left = st
        .frameworks
        .values()
        .any(|f| f.tasks.values().any(|t| t.agent_id.value == agent_id));
    if left {
        return;
    }
    if mark_gone {
        tracing::info!(
            agent = agent_id,
            "marking agent in the DRAINED state as gone"
        );
        agents::remove_locked(st, agent_id, agents::Removal::Operator);
        cx.allocate_now.notify_one();
        return;
    }
    tracing::info!(agent = agent_id, "transitioning agent to the DRAINED state");
    if let Some(info) = st.drain.draining.get_mut(agent_id) {
        info.state = Some(DrainState::Drained as i32);
    }
}

/// The agent is back (a healed partition, a re-registration after a
/// master restart): a draining one is told to drain again, whatever its
/// state, and may be drained already.
pub(crate) fn reregistered(cx: &Shared, st: &mut State, agent_id: &str) {
    if st.drain.is_deactivated(agent_id) {
        withdraw_offers(cx, st, agent_id);
    }
    if st.drain.info(agent_id).is_none() || !connected(st, agent_id) {
        return;
    }
    if !st.drain.started.contains_key(agent_id) {
        let now = cx.clock.wall_secs();
        st.drain.started.insert(
            agent_id.to_owned(),
            TimeInfo {
                nanoseconds: (now * 1e9) as i64,
            },
        );
    }
    kill_tasks(cx, st, agent_id);
    check(cx, st, agent_id);
}

/// The agent of a task, for callers that hold only the task's ids.
pub(crate) fn agent_of(st: &State, framework_id: &str, task_id: &str) -> Option<String> {
    st.frameworks
        .get(framework_id)
        .and_then(|f| f.tasks.get(task_id))
        .map(|t| t.agent_id.value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: i64) -> DurationInfo {
        DurationInfo {
            nanoseconds: s * 1_000_000_000,
        }
    }

    fn policy(s: i64) -> KillPolicy {
        KillPolicy {
            grace_period: Some(secs(s)),
        }
    }

    #[test]
    fn the_drain_caps_only_longer_or_missing_grace_periods() {
        assert_eq!(capped_policy(None, Some(&policy(30))), None);
        assert_eq!(
            capped_policy(Some(secs(10)), Some(&policy(30))),
            Some(policy(10))
        );
        assert_eq!(capped_policy(Some(secs(10)), Some(&policy(5))), None);
        assert_eq!(capped_policy(Some(secs(10)), None), Some(policy(10)));
    }

    #[test]
    fn durations_devolve_as_mesos_does() {
        let d = ProtoDuration {
            seconds: Some(2),
            nanos: Some(5),
        };
        assert_eq!(duration_info(&d).nanoseconds, 2_000_000_005);
        let huge = ProtoDuration {
            seconds: Some(i64::MAX),
            nanos: None,
        };
        assert_eq!(duration_info(&huge).nanoseconds, i64::MAX);
    }

    #[test]
    fn machines_print_as_mesos_prints_them() {
        let m = MachineId {
            hostname: Some("agent-0".into()),
            ip: Some("127.0.0.1".into()),
        };
        assert_eq!(machine_text(&m), "agent-0 (127.0.0.1)");
    }
}
