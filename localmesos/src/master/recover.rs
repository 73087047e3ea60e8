//! Agent recovery (`--recover=reconnect`), as Mesos' agent does it
//! (`src/slave/slave.cpp`, `Slave::recover` and `reregisterExecutorTimeout`):
//!
//! 1. A restarted agent reads its checkpoint: its id and endpoint (it binds
//!    the same port, so its executors find it), the frameworks, executors
//!    and tasks, each task's updates and which were acknowledged.
//! 2. Executors whose process still runs are adopted (watched by polling,
//!    as they are no longer our children); the agent re-registers with the
//!    master carrying its tasks and frameworks, so a master that restarted
//!    too learns them (frameworks as disconnected, no failover timer, as
//!    after a Mesos master failover). Unacknowledged updates are resent.
//! 3. For `executor_reregistration_timeout` the agent waits for executors
//!    to re-subscribe; it is not offered meanwhile. Executors that did not
//!    come back are destroyed (process group and cgroup) and their tasks
//!    go TASK_GONE (TASK_LOST without PARTITION_AWARE),
//!    REASON_EXECUTOR_REREGISTRATION_TIMEOUT.
//!
//! A framework whose checkpoint is corrupt is skipped with an error naming
//! the file, and the agent starts fresh for it.

use std::collections::VecDeque;
use std::path::Path;
use std::time::Duration;

use mesos::proto::task_status::{Reason, Source};
use mesos::proto::{AgentId, ExecutorId, FrameworkId, TaskState};
use mesos::resources::Resources;

use super::task::Task;
use super::{Framework, Shared, State, tasks};
use crate::agent::checkpoint::{self, RecoveredAgent, RecoveredExecutor};
use crate::agent::executors::Executor;
use crate::agent::launch::sandbox_for;
use crate::agent::process::{self, Handle};
use crate::agent::{AgentStatus, ExecutorRef, Report, cgroups};

/// What agent `hostname` checkpointed under `work_dir`, if anything usable.
pub(crate) fn find(work_dir: &Path, hostname: &str) -> Option<RecoveredAgent> {
    let latest = match checkpoint::latest(work_dir) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "agent checkpoints unreadable; agents start fresh");
            return None;
        }
    };
    let id = latest.get(hostname)?;
    match checkpoint::recover_agent(work_dir, id) {
        Ok(agent) => {
            for (fw, e) in &agent.skipped {
                tracing::error!(
                    agent = %id, framework = %fw, error = %e,
                    "corrupt checkpoint: starting fresh for this framework (its checkpoint moved to meta/corrupt/)"
                );
            }
            Some(agent)
        }
        Err(e) => {
            tracing::error!(agent = %id, error = %e, "cannot recover the agent; it registers as new");
            None
        }
    }
}

/// Re-registers what a recovered agent checkpointed (step 2) and arms the
/// executor re-registration timeout (step 3). The agent itself is
/// registered, with its old id, already.
pub(crate) fn apply(cx: &Shared, agent_id: &str, recovered: RecoveredAgent) {
    let st = &mut *cx.lock();
    let mut adopted = 0usize;
    for f in recovered.frameworks {
        let Some(fid) = f.info.id.clone() else {
            continue;
        };
        if st.is_removed_framework(&fid.value) {
            for e in &f.executors {
                kill_run(cx, e);
            }
            continue;
        }
        st.frameworks
            .entry(fid.value.clone())
            .or_insert_with(|| Framework::new(fid.clone(), f.info.clone()));
        for e in f.executors {
            adopted += usize::from(adopt(cx, st, agent_id, &fid, e));
        }
    }
    if let Some(agent) = st.agents.get_mut(agent_id) {
        agent.recovering = true;
        agent.status = AgentStatus::Reregistering;
    }
    tracing::info!(
        agent = agent_id,
        executors = adopted,
        "agent recovered; waiting for its executors to re-subscribe"
    );
    let (epoch, id) = (st.epoch, agent_id.to_owned());
    cx.after(cx.timing.executor_reregistration_timeout, move |cx, st| {
        if st.epoch == epoch {
            finish(cx, st, &id);
        }
    });
}

/// Takes one executor run back; returns whether its process still runs.
fn adopt(
    cx: &Shared,
    st: &mut State,
    agent_id: &str,
    fid: &FrameworkId,
    e: RecoveredExecutor,
) -> bool {
    let exec_id = e.info.executor_id.clone().unwrap_or_default().value;
    let executor = ExecutorRef::new(agent_id, &fid.value, &exec_id);
    let live = e.pid.filter(|p| p.alive());
    let resources = Resources::from_protos(e.info.resources.clone())
        .unwrap_or_default()
        .unallocated();
    let sandbox = sandbox_for(&cx.work_dir, executor, &e.container_id);
    let mut ex = Executor::new(
        e.info.clone(),
        true,
        resources.clone(),
        e.container_id.clone(),
        live.map(|p| Handle { pid: Some(p.pid) }),
        Some(sandbox),
    );
    ex.recovered = true;
    let mut used = resources;
    let Some(fw) = st.frameworks.get_mut(&fid.value) else {
        return false;
    };
    let mut resend = Vec::new();
    for t in e.tasks {
        let Some(tid) = t.record.task.task_id.clone() else {
            continue;
        };
        let state = t
            .latest
            .as_ref()
            .and_then(|s| TaskState::try_from(s.state).ok())
            .unwrap_or(TaskState::TaskStaging);
        let task_res = Resources::from_protos(t.record.resources.clone())
            .unwrap_or_default()
            .unallocated();
        if !state.is_terminal() {
            used += &task_res;
            ex.tasks.insert(tid.value.clone());
        }
        if !t.pending.is_empty() {
            resend.push(tid.value.clone());
        }
        let statuses = t
            .latest
            .iter()
            .map(|s| (state, s.timestamp.unwrap_or(0.0)))
            .collect();
        fw.tasks.entry(tid.value.clone()).or_insert(Task {
            info: t.record.task,
            agent_id: AgentId::new(agent_id),
            executor_id: ExecutorId::new(exec_id.clone()),
            custom_executor: true,
            resources: task_res,
            role: t.record.role,
            state,
            before_partition: None,
            unreachable_time: None,
            statuses,
            last_status: t.latest,
            pending: VecDeque::from(t.pending),
            backoff: Duration::ZERO,
            kill_requested: false,
        });
    }
    if let Some(agent) = st.agents.get_mut(agent_id) {
        agent.used += &used;
        agent.executors.insert(executor.key(), ex);
    }
    if let Some(p) = live {
        let (me, agent, fw_id, eid, cid) = (
            cx.weak(),
            agent_id.to_owned(),
            fid.value.clone(),
            exec_id.clone(),
            e.container_id.clone(),
        );
        process::watch_adopted(&cx.rt, p, move |exit| {
            if let Some(cx) = me.upgrade() {
                let mut st = cx.lock();
                let executor = ExecutorRef::new(&agent, &fw_id, &eid);
                let report = Report::Exited {
                    executor,
                    container_id: &cid,
                    exit,
                };
                super::reports::apply(&cx, &mut st, report);
            }
        });
    }
    for tid in resend {
        tasks::forward_head(cx, st, &fid.value, &tid);
    }
    live.is_some()
}

/// The re-registration timeout fired: executors that did not come back
/// are destroyed, their tasks GONE (LOST); the agent is offered again.
fn finish(cx: &Shared, st: &mut State, agent_id: &str) {
    let Some(agent) = st.agents.get_mut(agent_id) else {
        return;
    };
    agent.recovering = false;
    if agent.status == AgentStatus::Reregistering {
        agent.status = AgentStatus::Active;
    }
    let gone: Vec<(String, String)> = agent
        .executors
        .iter()
        .filter(|(_, ex)| ex.recovered)
        .map(|(k, _)| k.clone())
        .collect();
    let message = format!(
        "Executor did not reregister within {}",
        mesos_duration(cx.timing.executor_reregistration_timeout)
    );
    for (fw, eid) in gone {
        let Some(agent) = st.agents.get_mut(agent_id) else {
            return;
        };
        let Some(ex) = agent.executors.remove(&(fw.clone(), eid.clone())) else {
            continue;
        };
        agent.used -= &ex.resources;
        tracing::warn!(agent = agent_id, executor = %eid, "{message}; destroying it");
        if let Some(p) = ex.process {
            p.kill();
        }
        cgroups::destroy(&cx.rt, &ex.container_id);
        super::checkpoints::executor_ended(cx, ExecutorRef::new(agent_id, &fw, &eid));
        let aware = st
            .frameworks
            .get(&fw)
            .is_some_and(Framework::partition_aware);
        let state = if aware {
            TaskState::TaskGone
        } else {
            TaskState::TaskLost
        };
        for t in &ex.tasks {
            tasks::agent_update(
                cx,
                st,
                &fw,
                t,
                state,
                Source::SourceAgent,
                Some(Reason::ReasonExecutorReregistrationTimeout),
                &message,
            );
        }
    }
    cx.allocate_now.notify_one();
}

/// Tasks a recovered executor never received (still STAGING, not among
/// the `unacknowledged_tasks` of its SUBSCRIBE): TASK_DROPPED (TASK_LOST
/// without PARTITION_AWARE), REASON_AGENT_RESTARTED, as Mesos' agent
/// answers tasks launched during its restart.
pub(crate) fn drop_unreceived(
    cx: &Shared,
    st: &mut State,
    executor: ExecutorRef<'_>,
    known: &[String],
) {
    let Some(ex) = st
        .agents
        .get(executor.agent_id)
        .and_then(|a| a.executors.get(&executor.key()))
        .filter(|ex| ex.recovered)
    else {
        return;
    };
    let Some(fw) = st.frameworks.get(executor.framework_id) else {
        return;
    };
    let aware = fw.partition_aware();
    let dropped: Vec<String> = ex
        .tasks
        .iter()
        .filter(|t| !known.contains(t))
        .filter(|t| {
            fw.tasks
                .get(*t)
                .is_some_and(|task| task.state == TaskState::TaskStaging)
        })
        .cloned()
        .collect();
    let state = if aware {
        TaskState::TaskDropped
    } else {
        TaskState::TaskLost
    };
    for t in dropped {
        tasks::agent_update(
            cx,
            st,
            executor.framework_id,
            &t,
            state,
            Source::SourceAgent,
            Some(Reason::ReasonAgentRestarted),
            "Task launched during agent restart",
        );
    }
}

fn kill_run(cx: &Shared, e: &RecoveredExecutor) {
    if let Some(p) = e.pid.filter(|p| p.alive()) {
        Handle { pid: Some(p.pid) }.kill();
    }
    cgroups::destroy(&cx.rt, &e.container_id);
}

/// Mesos' way of printing a duration in messages (`2secs`, `15mins`).
pub(crate) fn mesos_duration(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        m if m % 60_000 == 0 && m > 0 => format!("{}mins", m / 60_000),
        m if m % 1000 == 0 => format!("{}secs", m / 1000),
        m => format!("{m}ms"),
    }
}

/// `--recover=cleanup` and `mesopod --reset`: stops every executor the
/// checkpoints under `work_dir` name (SIGTERM, which they pass on to their
/// pods, then SIGKILL after `grace`, and their cgroups). Returns how many
/// were running.
pub(crate) async fn cleanup(work_dir: &Path, grace: Duration) -> usize {
    let latest = checkpoint::latest(work_dir).unwrap_or_default();
    let mut runs = Vec::new();
    for id in latest.values() {
        if let Ok(agent) = checkpoint::recover_agent(work_dir, id) {
            runs.extend(agent.frameworks.into_iter().flat_map(|f| f.executors));
        }
    }
    let live: Vec<_> = runs
        .iter()
        .filter_map(|r| r.pid.filter(|p| p.alive()).map(|p| (p, r)))
        .collect();
    for (p, _) in &live {
        Handle { pid: Some(p.pid) }.terminate();
    }
    let deadline = tokio::time::Instant::now() + grace;
    while live.iter().any(|(p, _)| p.alive()) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for (p, _) in &live {
        if p.alive() {
            Handle { pid: Some(p.pid) }.kill();
        }
    }
    // Every run's cgroup, also of executors that ended by themselves.
    for r in &runs {
        cgroups::destroy_and_wait(&r.container_id).await;
    }
    live.len()
}
