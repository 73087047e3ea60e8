//! ACCEPT and DECLINE: offer validation, task validation, resource checks
//! and launching.
//!
//! # Rules (Mesos' `master/validation.cpp`)
//!
//! - Offers must exist, belong to the framework, be distinct and all come
//!   from one agent. Otherwise every task of the call gets TASK_LOST
//!   (TASK_DROPPED when partition aware) with REASON_INVALID_OFFERS, and the
//!   valid offers' resources go back.
//! - Operations apply in order to the pooled resources of the offers. A
//!   task that is malformed or needs more than what is left gets TASK_ERROR
//!   with REASON_TASK_INVALID (REASON_TASK_GROUP_INVALID for a group, where
//!   one bad task fails the whole group); the others launch.
//! - What no operation used is refused to the framework for the call's
//!   `refuse_seconds` (default 5 s).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use mesos::proto::executor_info::Type as ExecType;
use mesos::proto::offer::operation::Type as OpType;
use mesos::proto::scheduler::call;
use mesos::proto::task_status::Reason;
use mesos::proto::{AgentId, ExecutorId, ExecutorInfo, FrameworkId, TaskInfo, TaskState};
use mesos::resources::Resources;

use super::launch::{self, Launch};
use super::task::{Task, master_status};
use super::{Shared, State, allocator};
use crate::clock::now_secs;
use crate::validation;

fn resources_of(protos: &[mesos::proto::Resource]) -> Result<Resources, String> {
    Resources::from_protos(protos.iter().cloned())
        .map(|r| r.unallocated())
        .map_err(|e| e.to_string())
}

fn tasks_of(acc: &call::Accept) -> Vec<&TaskInfo> {
    acc.operations
        .iter()
        .flat_map(|op| {
            let launch = op.launch.iter().flat_map(|l| l.task_infos.iter());
            let group = op
                .launch_group
                .iter()
                .flat_map(|g| g.task_group.iter().flat_map(|tg| tg.tasks.iter()));
            launch.chain(group)
        })
        .collect()
}

/// ACCEPT.
pub(crate) fn accept(cx: &Shared, st: &mut State, fw_id: &str, acc: call::Accept) {
    let aware = st
        .frameworks
        .get(fw_id)
        .is_some_and(|f| f.partition_aware());
    // 1. The offers.
    let mut error: Option<String> = None;
    let mut seen = BTreeSet::new();
    let mut agent: Option<String> = None;
    let mut role = String::from("*");
    let mut valid = Vec::new();
    if acc.offer_ids.is_empty() {
        error = Some("No offers specified".into());
    }
    for id in &acc.offer_ids {
        if !seen.insert(id.value.clone()) {
            error.get_or_insert_with(|| format!("Duplicate offer {id} in the offer list"));
            continue;
        }
        match st.offers.get(&id.value) {
            None => {
                error.get_or_insert_with(|| format!("Offer {id} is no longer valid"));
            }
            Some(rec) if rec.framework_id != fw_id => {
                error.get_or_insert_with(|| format!("Offer {id} is not for this framework"));
            }
            Some(rec) => {
                if agent.as_ref().is_some_and(|a| *a != rec.agent_id) {
                    error.get_or_insert_with(|| {
                        "Aggregated offers must belong to the same agent".into()
                    });
                }
                agent.get_or_insert_with(|| rec.agent_id.clone());
                role = rec.role.clone();
                valid.push(id.value.clone());
            }
        }
    }
    let mut pool = Resources::new();
    for id in &valid {
        if let Some(rec) = allocator::remove_offer(st, id) {
            pool += &rec.resources;
        }
    }
    let agent_id = match (error, agent) {
        (None, Some(a)) => a,
        (err, _) => {
            let msg = err.unwrap_or_else(|| "No offers specified".into());
            let state = if aware {
                TaskState::TaskDropped
            } else {
                TaskState::TaskLost
            };
            if let Some(fw) = st.frameworks.get(fw_id) {
                for t in tasks_of(&acc) {
                    let tid = t.task_id.clone().unwrap_or_default();
                    fw.send_update(master_status(
                        &tid,
                        t.agent_id.as_ref(),
                        state,
                        Reason::ReasonInvalidOffers,
                        msg.clone(),
                    ));
                }
            }
            return;
        }
    };

    // 2. The operations, in order, against the pool.
    let mut launches = Vec::new();
    let mut new_executors: HashMap<String, ExecutorInfo> = HashMap::new();
    for op in &acc.operations {
        let kind = op.r#type.and_then(|t| OpType::try_from(t).ok());
        match kind {
            Some(OpType::Launch) => {
                for task in op.launch.iter().flat_map(|l| l.task_infos.iter()) {
                    match check_task(st, fw_id, &agent_id, task, &pool, &mut new_executors, false) {
                        Ok((need, exec)) => {
                            pool -= &need.total;
                            register(
                                st,
                                fw_id,
                                &agent_id,
                                &role,
                                task,
                                need.task,
                                exec.as_ref(),
                                need.executor,
                            );
                            launches.push(Launch {
                                framework_id: fw_id.to_owned(),
                                agent_id: agent_id.clone(),
                                executor: exec,
                                tasks: vec![task.clone()],
                                group: false,
                            });
                        }
                        Err(msg) => task_error(st, fw_id, task, Reason::ReasonTaskInvalid, msg),
                    }
                }
            }
            Some(OpType::LaunchGroup) => {
                let Some(lg) = &op.launch_group else { continue };
                let tasks: Vec<TaskInfo> = lg
                    .task_group
                    .iter()
                    .flat_map(|g| g.tasks.iter().cloned())
                    .collect();
                match check_group(
                    st,
                    fw_id,
                    &agent_id,
                    lg.executor.as_ref(),
                    &tasks,
                    &pool,
                    &mut new_executors,
                ) {
                    Ok((needs, exec_need, exec)) => {
                        for (task, need) in tasks.iter().zip(needs) {
                            pool -= &need;
                            register(
                                st,
                                fw_id,
                                &agent_id,
                                &role,
                                task,
                                need,
                                Some(&exec),
                                Resources::new(),
                            );
                        }
                        pool -= &exec_need;
                        if let Some(agent) = st.agents.get_mut(&agent_id) {
                            agent.used += &exec_need;
                        }
                        launches.push(Launch {
                            framework_id: fw_id.to_owned(),
                            agent_id: agent_id.clone(),
                            executor: Some(exec),
                            tasks,
                            group: true,
                        });
                    }
                    Err(msg) => {
                        for t in &tasks {
                            task_error(st, fw_id, t, Reason::ReasonTaskGroupInvalid, msg.clone());
                        }
                    }
                }
            }
            other => {
                tracing::warn!(operation = ?other, "localmesos does not apply this offer operation; its resources stay unused");
            }
        }
    }

    // 3. What is left is refused for a while.
    let seconds = acc.filters.unwrap_or_default().effective_refuse_seconds();
    allocator::refuse(st, fw_id, &agent_id, pool, seconds);

    // 4. Start.
    for l in launches {
        launch::launch(cx, st, l);
    }
}

/// What one task needs from the pool.
struct Need {
    task: Resources,
    executor: Resources,
    total: Resources,
}

#[allow(clippy::too_many_arguments)]
fn check_task(
    st: &State,
    fw_id: &str,
    agent_id: &str,
    task: &TaskInfo,
    pool: &Resources,
    new_executors: &mut HashMap<String, ExecutorInfo>,
    in_group: bool,
) -> Result<(Need, Option<ExecutorInfo>), String> {
    let Some(task_id) = &task.task_id else {
        return Err("Task has no 'task_id'".into());
    };
    validation::id("Task ID", &task_id.value)?;
    let fw = st
        .frameworks
        .get(fw_id)
        .ok_or("Framework cannot be found")?;
    if fw.tasks.contains_key(&task_id.value) {
        return Err(format!("Task has duplicate ID: {task_id}"));
    }
    match &task.agent_id {
        Some(a) if a.value == agent_id => {}
        Some(a) => return Err(format!("Task uses invalid agent: {a}")),
        None => return Err("Task has no 'agent_id'".into()),
    }
    if in_group {
        if task.executor.is_some() {
            return Err("The 'TaskInfo.executor' of a task in a group must not be set".into());
        }
    } else if task.executor.is_some() == task.command.is_some() {
        return Err(
            "Task should have at least one (but not both) of CommandInfo or ExecutorInfo present"
                .into(),
        );
    }
    if let Some(cmd) = &task.command
        && cmd.value.as_deref().is_none_or(str::is_empty)
        && !in_group
    {
        return Err("Task's 'CommandInfo.value' must be set".into());
    }
    let task_res = resources_of(&task.resources)?;
    let mut need_exec = Resources::new();
    let mut exec_out = None;
    if let Some(exec) = &task.executor {
        let exec = normalise_executor(exec, fw_id, ExecType::Custom)?;
        need_exec = executor_need(st, fw_id, agent_id, &exec, new_executors)?;
        exec_out = Some(exec);
    }
    let total = &task_res + &need_exec;
    if total.is_empty() {
        return Err("Task and its executor use no resources".into());
    }
    if !pool.contains(&total) {
        return Err(format!(
            "Task {task_id} attempted to use {total} which is more than the offered resources {pool}"
        ));
    }
    Ok((
        Need {
            task: task_res,
            executor: need_exec,
            total,
        },
        exec_out,
    ))
}

/// Sets the executor's framework id and checks its type and id.
fn normalise_executor(
    exec: &ExecutorInfo,
    fw_id: &str,
    default: ExecType,
) -> Result<ExecutorInfo, String> {
    let mut exec = exec.clone();
    let Some(id) = &exec.executor_id else {
        return Err("ExecutorInfo has no 'executor_id'".into());
    };
    validation::id("Executor ID", &id.value)?;
    match &exec.framework_id {
        Some(f) if f.value != fw_id => {
            return Err(format!(
                "ExecutorInfo has an invalid FrameworkID (Actual: {f} vs Expected: {fw_id})"
            ));
        }
        _ => exec.framework_id = Some(FrameworkId::new(fw_id)),
    }
    let kind = exec
        .r#type
        .and_then(|t| ExecType::try_from(t).ok())
        .unwrap_or(default);
    match kind {
        ExecType::Custom | ExecType::Unknown if exec.command.is_none() => {
            Err("'ExecutorInfo.command' must be set for 'CUSTOM' executor".into())
        }
        ExecType::Default if exec.command.is_some() => {
            Err("'ExecutorInfo.command' must not be set for 'DEFAULT' executor".into())
        }
        _ => Ok(exec),
    }
}

/// The executor's resources if it is new on the agent; an error if an
/// executor with this id exists with a different definition.
fn executor_need(
    st: &State,
    fw_id: &str,
    agent_id: &str,
    exec: &ExecutorInfo,
    new_executors: &mut HashMap<String, ExecutorInfo>,
) -> Result<Resources, String> {
    let id = exec.executor_id.clone().unwrap_or_default().value;
    let existing = st
        .agents
        .get(agent_id)
        .and_then(|a| a.executors.get(&(fw_id.to_owned(), id.clone())))
        .filter(|e| !e.shutting_down)
        .map(|e| e.info.clone())
        .or_else(|| new_executors.get(&id).cloned());
    match existing {
        Some(known) => {
            if known.command != exec.command || known.resources != exec.resources {
                return Err(format!(
                    "ExecutorInfo is not compatible with the existing executor '{id}'"
                ));
            }
            Ok(Resources::new())
        }
        None => {
            new_executors.insert(id, exec.clone());
            resources_of(&exec.resources)
        }
    }
}

type GroupNeed = (Vec<Resources>, Resources, ExecutorInfo);

fn check_group(
    st: &State,
    fw_id: &str,
    agent_id: &str,
    exec: Option<&ExecutorInfo>,
    tasks: &[TaskInfo],
    pool: &Resources,
    new_executors: &mut HashMap<String, ExecutorInfo>,
) -> Result<GroupNeed, String> {
    let exec = exec.ok_or("LAUNCH_GROUP needs an 'executor'")?;
    let exec = normalise_executor(exec, fw_id, ExecType::Default)?;
    if tasks.is_empty() {
        return Err("The task group has no tasks".into());
    }
    let exec_need = executor_need(st, fw_id, agent_id, &exec, new_executors)?;
    let mut left = pool.checked_sub(&exec_need).map_err(|e| e.to_string())?;
    let mut ids = BTreeSet::new();
    let mut needs = Vec::new();
    for t in tasks {
        if let Some(id) = &t.task_id
            && !ids.insert(id.value.clone())
        {
            return Err(format!("Task group has duplicate task ID: {id}"));
        }
        let (need, _) = check_task(st, fw_id, agent_id, t, &left, new_executors, true)?;
        left -= &need.total;
        needs.push(need.task);
    }
    Ok((needs, exec_need, exec))
}

/// What the master keeps of a launched task's info, as Mesos' master does:
/// no `data` (the pod, for mesopod), no executor or command (the agent has
/// them), no resources (kept once, in the task's own bag). With thousands of
/// tasks these were most of the master's memory.
fn master_copy(task: &TaskInfo) -> TaskInfo {
    TaskInfo {
        name: task.name.clone(),
        task_id: task.task_id.clone(),
        agent_id: task.agent_id.clone(),
        kill_policy: task.kill_policy,
        labels: task.labels.clone(),
        ..Default::default()
    }
}

#[allow(clippy::too_many_arguments)]
fn register(
    st: &mut State,
    fw_id: &str,
    agent_id: &str,
    role: &str,
    task: &TaskInfo,
    task_res: Resources,
    exec: Option<&ExecutorInfo>,
    exec_res: Resources,
) {
    let task_id = task.task_id.clone().unwrap_or_default();
    let runs_default = exec.is_some_and(|e| e.command.is_none());
    let executor_id = match exec {
        Some(e) if !runs_default => e.executor_id.clone().unwrap_or_default(),
        _ => ExecutorId::new(task_id.value.clone()),
    };
    if let Some(agent) = st.agents.get_mut(agent_id) {
        agent.used += &task_res;
        agent.used += &exec_res;
    }
    let Some(fw) = st.frameworks.get_mut(fw_id) else {
        return;
    };
    fw.tasks.insert(
        task_id.value.clone(),
        Task {
            info: master_copy(task),
            agent_id: AgentId::new(agent_id),
            executor_id,
            custom_executor: exec.is_some() && !runs_default,
            resources: task_res,
            role: role.to_owned(),
            state: TaskState::TaskStaging,
            before_partition: None,
            unreachable_time: None,
            statuses: vec![(TaskState::TaskStaging, now_secs())],
            last_status: None,
            pending: VecDeque::new(),
            backoff: Duration::ZERO,
            kill_requested: false,
        },
    );
}

fn task_error(st: &State, fw_id: &str, task: &TaskInfo, reason: Reason, msg: String) {
    let Some(fw) = st.frameworks.get(fw_id) else {
        return;
    };
    let tid = task.task_id.clone().unwrap_or_default();
    fw.send_update(master_status(
        &tid,
        task.agent_id.as_ref(),
        TaskState::TaskError,
        reason,
        msg,
    ));
}

/// DECLINE: the offers go back, refused for `refuse_seconds`.
pub(crate) fn decline(st: &mut State, fw_id: &str, dec: call::Decline) {
    let seconds = dec.filters.unwrap_or_default().effective_refuse_seconds();
    for id in dec.offer_ids {
        let mine = st
            .offers
            .get(&id.value)
            .is_some_and(|o| o.framework_id == fw_id);
        if mine && let Some(rec) = allocator::remove_offer(st, &id.value) {
            allocator::refuse(st, fw_id, &rec.agent_id, rec.resources, seconds);
        }
    }
}
