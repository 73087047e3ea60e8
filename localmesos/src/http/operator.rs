//! Operator endpoints: `GET /version`, `GET /state` (also
//! `/master/state`, `/state.json`) and `GET /slaves` (also
//! `/master/slaves`), in the JSON shape of a Mesos master.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State as AxState;
use axum::response::Json;
use mesos::proto::json::WireEnum as _;
use mesos::resources::{Resources, attribute_text};
use serde_json::{Map, Value, json};

use crate::agent::{Agent, AgentStatus};
use crate::master::task::Task;
use crate::master::{MESOS_VERSION, Shared, State};

pub(crate) async fn version() -> Json<Value> {
    Json(json!({
        "version": MESOS_VERSION,
        "build_date": "localmesos",
        "build_time": 0.0,
        "build_user": "localmesos",
        "git_sha": "",
        "git_tag": MESOS_VERSION,
    }))
}

pub(crate) async fn state(AxState(cx): AxState<Arc<Shared>>) -> Json<Value> {
    let st = cx.lock();
    Json(state_json(&cx, &st))
}

/// `GET /slaves`: the agents as `/state` shows them, and (as Mesos) the
/// ones a restarted master has not heard from again.
pub(crate) async fn slaves(AxState(cx): AxState<Arc<Shared>>) -> Json<Value> {
    let st = cx.lock();
    let recovered: Vec<Value> = st
        .agents
        .values()
        .filter(|a| a.status == AgentStatus::Reregistering)
        .map(|a| json!({"id": a.id.value, "hostname": a.hostname, "port": a.endpoint.map(|e| e.port())}))
        .collect();
    Json(json!({"slaves": agents_json(&st), "recovered_slaves": recovered}))
}

/// One agent of `/state` and `/slaves` (Mesos' `SlaveWriter`).
fn agent_json(st: &State, a: &Agent) -> Value {
    let attributes: BTreeMap<String, String> = a
        .attributes
        .iter()
        .map(|at| (at.name.clone(), attribute_text(at)))
        .collect();
    let mut v = json!({
        "id": a.id.value,
        "pid": a.pid(),
        "hostname": a.hostname,
        "port": a.endpoint.map(|e| e.port()),
        "registered_time": a.registered_time,
        "active": super::get_agents::active(st, a),
        "deactivated": st.drain.is_deactivated(&a.id.value),
        "version": MESOS_VERSION,
        "status": a.status.name(),
        "simulated": a.simulated,
        "resources": resources_json(&a.total),
        "used_resources": resources_json(&a.used),
        "offered_resources": resources_json(&a.offered),
        "unreserved_resources": resources_json(&a.total.unreserved()),
        "reserved_resources": reserved_json(&a.total),
        "attributes": attributes,
    });
    // Mesos writes the drain (and its start) only for a drained agent.
    if let (Some(info), Some(obj)) = (st.drain.info(&a.id.value), v.as_object_mut()) {
        obj.insert("drain_info".into(), json!(info));
        if let Some(t) = st.drain.start_time(&a.id.value) {
            obj.insert(
                "estimated_drain_start_time_seconds".into(),
                json!(t.nanoseconds as f64 / 1e9),
            );
        }
    }
    v
}

fn agents_json(st: &State) -> Vec<Value> {
    st.agents
        .values()
        .filter(|a| a.status != AgentStatus::Gone)
        .map(|a| agent_json(st, a))
        .collect()
}

/// Mesos' resource map: scalars as numbers, ranges as `"[a-b, c-d]"`, sets
/// as `"{a,b}"`.
pub(crate) fn resources_json(r: &Resources) -> Value {
    let mut names: Vec<&str> = r.iter().map(|x| x.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let mut out = Map::new();
    for name in ["cpus", "mem", "disk", "gpus"] {
        out.insert(name.into(), json!(r.scalar(name)));
    }
    for name in names {
        let ranges = r.ranges(name);
        let set = r.set(name);
        let v = if !ranges.is_empty() {
            let parts: Vec<String> = ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
            json!(format!("[{}]", parts.join(", ")))
        } else if !set.is_empty() {
            json!(format!(
                "{{{}}}",
                set.into_iter().collect::<Vec<_>>().join(",")
            ))
        } else {
            json!(r.scalar(name))
        };
        out.insert(name.into(), v);
    }
    Value::Object(out)
}

fn reserved_json(r: &Resources) -> Value {
    let mut out = Map::new();
    for role in r.roles() {
        if role != "*" {
            out.insert(role.clone(), resources_json(&r.filter_role(&role)));
        }
    }
    Value::Object(out)
}

fn task_json(t: &Task, fw_id: &str) -> Value {
    let statuses: Vec<Value> = t
        .statuses
        .iter()
        .map(|(s, ts)| json!({"state": s.wire_name(), "timestamp": ts}))
        .collect();
    json!({
        "id": t.id(),
        "name": t.info.name,
        "framework_id": fw_id,
        "executor_id": if t.custom_executor { t.executor_id.value.as_str() } else { "" },
        "slave_id": t.agent_id.value,
        "agent_id": t.agent_id.value,
        "state": t.state.wire_name(),
        "resources": resources_json(&t.resources),
        "role": t.role,
        "statuses": statuses,
        "labels": t.info.labels.as_ref().map(|l| &l.labels),
    })
}

pub(crate) fn state_json(cx: &Shared, st: &State) -> Value {
    let pid = format!("master@{}", cx.master_addr);
    let agents = agents_json(st);
    let mut fw_ids: Vec<&String> = st.frameworks.keys().collect();
    fw_ids.sort();
    let frameworks: Vec<Value> = fw_ids
        .into_iter()
        .filter_map(|id| st.frameworks.get(id))
        .map(|f| {
            let mut used = Resources::new();
            let mut tasks: Vec<Value> = Vec::new();
            let mut unreachable: Vec<Value> = Vec::new();
            for t in f.tasks.values() {
                if t.state == mesos::proto::TaskState::TaskUnreachable {
                    unreachable.push(task_json(t, &f.id.value));
                } else {
                    if !t.state.is_terminal() {
                        used += &t.resources;
                    }
                    tasks.push(task_json(t, &f.id.value));
                }
            }
            let mut offered = Resources::new();
            let offers: Vec<Value> = st
                .offers
                .iter()
                .filter(|(_, o)| o.framework_id == f.id.value)
                .map(|(id, o)| {
                    offered += &o.resources;
                    json!({
                        "id": id,
                        "framework_id": o.framework_id,
                        "slave_id": o.agent_id,
                        "agent_id": o.agent_id,
                        "resources": resources_json(&o.resources),
                        "allocation_info": {"role": o.role},
                    })
                })
                .collect();
            let capabilities: Vec<&str> = f
                .info
                .capabilities
                .iter()
                .filter_map(|c| c.r#type)
                .filter_map(|t| mesos::proto::framework_info::capability::Type::try_from(t).ok())
                .map(|t| t.wire_name())
                .collect();
            json!({
                "id": f.id.value,
                "name": f.info.name,
                "user": f.info.user,
                "principal": f.info.principal,
                "role": f.info.role.clone().unwrap_or_else(|| "*".into()),
                "roles": f.roles(),
                "suppressed_roles": f.suppressed,
                "active": f.conn.is_some(),
                "connected": f.conn.is_some(),
                "recovered": false,
                "checkpoint": f.info.checkpoint.unwrap_or(false),
                "failover_timeout": f.info.failover_timeout.unwrap_or(0.0),
                "capabilities": capabilities,
                "registered_time": f.registered_time,
                "resources": resources_json(&(&used + &offered)),
                "used_resources": resources_json(&used),
                "offered_resources": resources_json(&offered),
                "tasks": tasks,
                "unreachable_tasks": unreachable,
                "completed_tasks": f.completed.iter().map(|t| task_json(t, &f.id.value)).collect::<Vec<_>>(),
                "offers": offers,
                "executors": [],
            })
        })
        .collect();
    let completed: Vec<Value> = st
        .removed_frameworks
        .iter()
        .map(|f| json!({"id": f.id, "name": f.name, "active": false, "connected": false}))
        .collect();
    json!({
        "version": MESOS_VERSION,
        "id": st.master_id,
        "pid": pid,
        "leader": pid,
        "hostname": cx.master_addr.ip().to_string(),
        "activated_slaves": st.agents.values().filter(|a| super::get_agents::active(st, a)).count(),
        // Mesos counts registered agents that are not active.
        "deactivated_slaves": st.agents.values().filter(|a| a.status == AgentStatus::Active && st.drain.is_deactivated(&a.id.value)).count(),
        "unreachable_slaves": st.agents.values().filter(|a| matches!(a.status, AgentStatus::Unreachable(_))).count(),
        "slaves": agents,
        "frameworks": frameworks,
        "completed_frameworks": completed,
        "unregistered_frameworks": [],
    })
}

/// An agent's own `/state`, in the shape of a Mesos agent: its frameworks'
/// executors with their sandbox `directory` and tasks (how a client finds
/// the path to give `/files/read`).
pub(crate) fn agent_state_json(cx: &Shared, st: &State, agent_id: &str) -> Value {
    let Some(agent) = st.agents.get(agent_id) else {
        return json!({});
    };
    let mut by_fw: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for ((fw_id, exec_id), ex) in &agent.executors {
        let tasks: Vec<Value> = st
            .frameworks
            .get(fw_id)
            .map(|f| {
                ex.tasks
                    .iter()
                    .filter_map(|t| f.tasks.get(t))
                    .map(|t| task_json(t, fw_id))
                    .collect()
            })
            .unwrap_or_default();
        by_fw.entry(fw_id.as_str()).or_default().push(json!({
            "id": exec_id,
            "name": ex.info.name.clone().unwrap_or_default(),
            "source": "",
            "container": ex.container_id,
            "directory": ex.sandbox.as_ref().map(|d| d.display().to_string()).unwrap_or_default(),
            "resources": resources_json(&ex.resources),
            "type": if ex.custom { "CUSTOM" } else { "COMMAND" },
            "tasks": tasks,
            "queued_tasks": [],
            "completed_tasks": [],
        }));
    }
    let frameworks: Vec<Value> = by_fw
        .into_iter()
        .map(|(fw_id, executors)| {
            let f = st.frameworks.get(fw_id);
            json!({
                "id": fw_id,
                "name": f.map(|f| f.info.name.clone()).unwrap_or_default(),
                "executors": executors,
                "completed_executors": [],
            })
        })
        .collect();
    let attributes: BTreeMap<String, String> = agent
        .attributes
        .iter()
        .map(|at| (at.name.clone(), attribute_text(at)))
        .collect();
    json!({
        "version": MESOS_VERSION,
        "id": agent.id.value,
        "pid": agent.pid(),
        "hostname": agent.hostname,
        "resources": resources_json(&agent.total),
        "attributes": attributes,
        "master_hostname": cx.master_addr.ip().to_string(),
        "frameworks": frameworks,
        "completed_frameworks": [],
    })
}
