//! The master's view of agents: registering them, and the agent and
//! executor faults (partition, heal, operator removal, a killed or
//! disconnected executor). The master decides what each does to tasks;
//! what happens to the agent's processes comes back as
//! [`crate::agent::Report`]s.

use mesos::proto::task_status::Reason;
use mesos::proto::{AgentId, TaskState, TimeInfo};
use mesos::resources::Resources;

use super::maintenance::MachineKey;
use super::task::master_status;
use super::{Shared, State, allocator, inverse_offers, reports, tasks};
use crate::agent::executors::Executor;
use crate::agent::{Agent, AgentStatus, ExecutorRef, Report};
use crate::error::Error;

/// The index and id the next agent gets: `<master id>-S<index>`.
pub(crate) fn next_id(cx: &Shared) -> (u64, AgentId) {
    let mut st = cx.lock();
    let i = st.next_agent;
    st.next_agent += 1;
    (i, AgentId::new(format!("{}-S{i}", st.master_id)))
}

/// Registers an agent; it is offered at the next allocation (with the
/// unavailability of its machine, if that is DRAINING).
///
/// # Errors
/// [`Error::MachineDown`]: its machine is in maintenance, and Mesos refuses
/// (re)registration from a DOWN machine.
pub(crate) fn register(cx: &Shared, mut agent: Agent) -> Result<(), Error> {
    let mut st = cx.lock();
    if let Err(e) = refuse_if_down(&st, &agent.hostname, &MachineKey::of_agent(&agent)) {
        if let Some(server) = agent.server.take() {
            server.abort();
        }
        return Err(e);
    }
    let id = agent.id.value.clone();
    st.agents.insert(id.clone(), agent);
    super::maintenance::agent_registered(&mut st, &id);
    cx.allocate_now.notify_one();
    Ok(())
}

/// [`Error::MachineDown`] when the machine `key` of agent `hostname` is DOWN.
pub(crate) fn refuse_if_down(st: &State, hostname: &str, key: &MachineKey) -> Result<(), Error> {
    if st.maintenance.is_down(key) {
        tracing::warn!(
            hostname,
            "refusing registration of an agent: its machine is DOWN"
        );
        return Err(Error::MachineDown(hostname.to_owned()));
    }
    Ok(())
}

fn agent_mut<'a>(st: &'a mut State, id: &str) -> Result<&'a mut Agent, Error> {
    st.agents
        .get_mut(id)
        .ok_or_else(|| Error::UnknownAgent(id.to_owned()))
}

/// Partitions an agent: from now on it answers no ping and nothing it
/// reports reaches the master (its updates wait, its offers are rescinded,
/// it is offered no more). The master notices only once the ping budget
/// has run out on its clock (`master::pings`), and then marks it
/// unreachable ([`mark_unreachable`]). Processes keep running.
pub(crate) fn partition(cx: &Shared, id: &str) -> Result<(), Error> {
    let st = &mut *cx.lock();
    let now = cx.clock.now();
    let agent = agent_mut(st, id)?;
    let connected = matches!(
        agent.status,
        AgentStatus::Active | AgentStatus::Reregistering
    );
    if !connected || agent.silent_since.is_some() {
        return Err(Error::AgentState {
            agent: id.to_owned(),
            state: if connected {
                "partitioned"
            } else {
                agent.status.name()
            },
            what: "partition",
        });
    }
    agent.silent_since = Some(now);
    allocator::rescind_agent_offers(st, id);
    // A zero ping budget marks it at once.
    super::pings::check(cx, st);
    Ok(())
}

/// Marks a silent agent unreachable, as Mesos' master does after
/// `--max_agent_ping_timeouts`: its tasks become TASK_UNREACHABLE for
/// partition-aware frameworks and TASK_LOST for the others
/// (master-generated, REASON_AGENT_REMOVED... as Mesos marks unreachable
/// agents).
pub(crate) fn mark_unreachable(cx: &Shared, st: &mut State, id: &str) {
    let since = TimeInfo {
        nanoseconds: (cx.clock.wall_secs() * 1e9) as i64,
    };
    let Some(agent) = st.agents.get_mut(id) else {
        return;
    };
    agent.status = AgentStatus::Unreachable(since);
    allocator::rescind_agent_offers(st, id);
    inverse_offers::remove_agent(st, id);
    let agent_id = AgentId::new(id);
    for fw in st.frameworks.values_mut() {
        let aware = fw.partition_aware();
        let mut updates = Vec::new();
        for task in fw.tasks.values_mut() {
            if task.agent_id.value != id || task.state.is_terminal() {
                continue;
            }
            task.before_partition = Some(task.state);
            task.state = TaskState::TaskUnreachable;
            task.unreachable_time = Some(since);
            let state = if aware {
                TaskState::TaskUnreachable
            } else {
                TaskState::TaskLost
            };
            let mut status = master_status(
                task.info.task_id.as_ref().unwrap_or(&Default::default()),
                Some(&agent_id),
                state,
                Reason::ReasonAgentRemoved,
                format!("Agent {id} is unreachable"),
            );
            status.unreachable_time = Some(since);
            updates.push(status);
        }
        for u in updates {
            fw.send_update(u);
        }
    }
}

/// Heals a partition. An agent the master has not yet marked unreachable
/// just answers again: nothing happened to its tasks, and updates it held
/// go out. An unreachable one re-registers and every task on it resumes
/// the state it had, as since Mesos 1.5 for every framework, partition
/// aware or not (1.1 to 1.4 killed the others' tasks).
pub(crate) fn heal(cx: &Shared, id: &str) -> Result<(), Error> {
    let st = &mut *cx.lock();
    let agent = agent_mut(st, id)?;
    let was_silent = agent.silent_since.take().is_some();
    if was_silent && !matches!(agent.status, AgentStatus::Unreachable(_)) {
        resend_held(st, id);
        super::drain::reregistered(cx, st, id);
        cx.allocate_now.notify_one();
        return Ok(());
    }
    if !matches!(agent.status, AgentStatus::Unreachable(_)) {
        return Err(Error::AgentState {
            agent: id.to_owned(),
            state: agent.status.name(),
            what: "heal",
        });
    }
    agent.status = AgentStatus::Active;
    for fw in st.frameworks.values_mut() {
        for task in fw.tasks.values_mut() {
            if task.agent_id.value != id {
                continue;
            }
            if let Some(before) = task.before_partition.take() {
                task.unreachable_time = None;
                // A task that ended while partitioned keeps that update.
                if task.state == TaskState::TaskUnreachable {
                    task.state = before;
                }
            }
        }
    }
    // Since Mesos 1.5 every connected framework, partition-aware or not,
    // learns each recovered task's state at once (SOURCE_MASTER,
    // REASON_AGENT_REREGISTERED, no uuid), instead of at its next
    // reconciliation. Then updates held during the partition go out.
    let agent_id = AgentId::new(id);
    for fw in st.frameworks.values() {
        for task in fw.tasks.values() {
            if task.agent_id.value != id || task.state.is_terminal() {
                continue;
            }
            let mut status = master_status(
                task.info.task_id.as_ref().unwrap_or(&Default::default()),
                Some(&agent_id),
                task.state,
                Reason::ReasonAgentReregistered,
                "Unreachable agent re-reregistered",
            );
            if task.custom_executor {
                status.executor_id = Some(task.executor_id.clone());
            }
            fw.send_update(status);
        }
    }
    resend_held(st, id);
    super::drain::reregistered(cx, st, id);
    cx.allocate_now.notify_one();
    Ok(())
}

/// Sends the head of each of the agent's tasks' update queues: what it
/// held while cut off reaches the frameworks now, not at the next retry.
fn resend_held(st: &State, id: &str) {
    for fw in st.frameworks.values() {
        for task in fw.tasks.values() {
            if task.agent_id.value == id
                && let Some(head) = task.pending.front()
            {
                fw.send_update(head.clone());
            }
        }
    }
}

/// Why an agent is removed for good: what its tasks are told.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Removal {
    /// Operator removal (`LocalMesos::remove_agent`).
    Operator,
    /// Its machine went DOWN (START_MAINTENANCE). Mesos' `removeSlave`:
    /// TASK_GONE_BY_OPERATOR with REASON_AGENT_REMOVED_BY_OPERATOR for
    /// PARTITION_AWARE frameworks, TASK_LOST with REASON_AGENT_REMOVED for
    /// the others.
    MachineDown,
}

/// Removes an agent for good (operator removal): its tasks become
/// TASK_GONE_BY_OPERATOR (TASK_LOST without PARTITION_AWARE), its processes
/// are killed and its resources leave the cluster.
pub(crate) fn remove(cx: &Shared, id: &str) -> Result<(), Error> {
    let st = &mut *cx.lock();
    let agent = agent_mut(st, id)?;
    if agent.status == AgentStatus::Gone {
        return Err(Error::AgentState {
            agent: id.to_owned(),
            state: "gone",
            what: "remove",
        });
    }
    remove_locked(st, id, Removal::Operator);
    Ok(())
}

/// [`remove`] under the lock, of an agent known not to be gone.
pub(crate) fn remove_locked(st: &mut State, id: &str, why: Removal) {
    let Some(agent) = st.agents.get_mut(id) else {
        return;
    };
    agent.status = AgentStatus::Gone;
    st.drain.forget(id);
    let Some(agent) = st.agents.get_mut(id) else {
        return;
    };
    if let Some(server) = agent.server.take() {
        server.abort();
    }
    allocator::rescind_agent_offers(st, id);
    inverse_offers::remove_agent(st, id);
    let agent_id = AgentId::new(id);
    if let Some(agent) = st.agents.get_mut(id) {
        // The exits find no record, so they report nothing: the tasks are
        // answered below.
        for ex in agent.executors.values() {
            if let Some(p) = ex.process {
                p.kill();
            }
        }
        agent.executors.clear();
        agent.used = Resources::new();
    }
    let fw_ids: Vec<String> = st.frameworks.keys().cloned().collect();
    for fw_id in fw_ids {
        let Some(fw) = st.frameworks.get_mut(&fw_id) else {
            continue;
        };
        let aware = fw.partition_aware();
        let on_agent: Vec<String> = fw
            .tasks
            .iter()
            .filter(|(_, t)| t.agent_id.value == id)
            .map(|(k, _)| k.clone())
            .collect();
        for task_id in on_agent {
            let Some(task) = fw.tasks.get_mut(&task_id) else {
                continue;
            };
            let was_terminal = task.state.is_terminal();
            task.state = TaskState::TaskGoneByOperator;
            task.pending.clear();
            if !was_terminal {
                let (state, reason) = match (aware, why) {
                    (true, _) => (
                        TaskState::TaskGoneByOperator,
                        Reason::ReasonAgentRemovedByOperator,
                    ),
                    (false, Removal::Operator) => {
                        (TaskState::TaskLost, Reason::ReasonAgentRemovedByOperator)
                    }
                    (false, Removal::MachineDown) => {
                        (TaskState::TaskLost, Reason::ReasonAgentRemoved)
                    }
                };
                let message = match why {
                    Removal::Operator => format!("Agent {id} was removed by the operator"),
                    Removal::MachineDown => "Operator initiated 'Machine DOWN'".to_owned(),
                };
                let status = master_status(
                    task.info.task_id.as_ref().unwrap_or(&Default::default()),
                    Some(&agent_id),
                    state,
                    reason,
                    message,
                );
                fw.send_update(status);
            }
        }
        let ids: Vec<String> = fw.tasks.keys().cloned().collect();
        for t in ids {
            tasks::complete_if_done(st, &fw_id, &t);
        }
    }
}

/// Executor `exec` of framework `fw` on the agent, or which of them is unknown.
fn executor_mut<'a>(
    st: &'a mut State,
    executor: ExecutorRef<'_>,
) -> Result<&'a mut Executor, Error> {
    st.agents
        .get_mut(executor.agent_id)
        .ok_or_else(|| Error::UnknownAgent(executor.agent_id.to_owned()))?
        .executors
        .get_mut(&executor.key())
        .ok_or_else(|| Error::UnknownExecutor {
            agent: executor.agent_id.to_owned(),
            framework: executor.framework_id.to_owned(),
            executor: executor.executor_id.to_owned(),
        })
}

/// Kills an executor (or a command task's process) with SIGKILL; the agent
/// then reports its end as it does for any executor that dies.
pub(crate) fn kill_executor(cx: &Shared, executor: ExecutorRef<'_>) -> Result<(), Error> {
    let mut st = cx.lock();
    match executor_mut(&mut st, executor)?.process {
        Some(p) => p.kill(),
        None => reports::apply(cx, &mut st, Report::Killed { executor }),
    }
    Ok(())
}

/// Drops an executor's event stream, as a broken agent connection would:
/// the executor sees its subscription end, and (with checkpointing)
/// re-subscribes with its unacknowledged tasks and updates.
pub(crate) fn disconnect_executor(cx: &Shared, executor: ExecutorRef<'_>) -> Result<(), Error> {
    let mut st = cx.lock();
    // Dropping the sender ends the HTTP stream.
    executor_mut(&mut st, executor)?.sub = None;
    Ok(())
}

/// Whether an executor stays when this process stops: a checkpointing
/// framework's custom executor on a persistent work dir, which the next
/// start recovers (as a Mesos agent's restart leaves them running).
fn survives(cx: &Shared, st: &State, framework_id: &str, ex: &Executor) -> bool {
    cx.persistent
        && ex.custom
        && st
            .frameworks
            .get(framework_id)
            .is_some_and(super::Framework::checkpoints)
}

/// Asks every executor process that does not survive a stop to stop
/// (SIGTERM); returns their pids.
pub(crate) fn terminate_processes(cx: &Shared, st: &State) -> Vec<u32> {
    st.agents
        .values()
        .flat_map(|a| a.executors.iter())
        .filter(|((fw, _), ex)| !survives(cx, st, fw, ex))
        .filter_map(|(_, ex)| {
            ex.process.and_then(|p| {
                p.terminate();
                p.pid
            })
        })
        .collect()
}

/// Stops everything: timers of this epoch, agent endpoints, child
/// processes (SIGKILL; checkpointed executors are left running) and
/// scheduler streams.
pub(crate) fn stop_all(cx: &Shared, st: &mut State) {
    st.epoch += 1;
    let doomed: Vec<(String, (String, String))> = st
        .agents
        .iter()
        .flat_map(|(a, agent)| {
            agent
                .executors
                .iter()
                .filter(|((fw, _), ex)| !survives(cx, st, fw, ex))
                .map(|(k, _)| (a.clone(), k.clone()))
        })
        .collect();
    for (a, key) in doomed {
        if let Some(ex) = st.agents.get(&a).and_then(|ag| ag.executors.get(&key)) {
            if let Some(p) = ex.process {
                p.kill();
            }
            super::checkpoints::executor_ended(cx, ExecutorRef::new(&a, &key.0, &key.1));
            crate::agent::cgroups::destroy(&cx.rt, &ex.container_id);
        }
    }
    for agent in st.agents.values_mut() {
        if let Some(server) = agent.server.take() {
            server.abort();
        }
        agent.executors.clear();
    }
    for fw in st.frameworks.values_mut() {
        fw.conn = None;
    }
}
