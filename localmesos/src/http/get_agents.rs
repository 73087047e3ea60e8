//! GET_AGENTS of the operator API: the agents the master knows, in Mesos'
//! `Response.GetAgents` shape, with what localmesos can fill honestly
//! (no capabilities, resource providers or re-registration time).

use mesos::proto::master::{Response, response};
use mesos::proto::{AgentInfo, TimeInfo};

use crate::agent::{Agent, AgentStatus};
use crate::master::{MESOS_VERSION, State};

fn time(secs: f64) -> TimeInfo {
    TimeInfo {
        nanoseconds: (secs * 1e9) as i64,
    }
}

/// Mesos' `slave->active`: connected and not deactivated by the operator.
pub(crate) fn active(st: &State, agent: &Agent) -> bool {
    agent.status == AgentStatus::Active && !st.drain.is_deactivated(&agent.id.value)
}

fn agent(st: &State, a: &Agent) -> response::get_agents::Agent {
    let id = &a.id.value;
    let drain_info = st.drain.info(id).cloned();
    response::get_agents::Agent {
        agent_info: Some(a.info()),
        active: active(st, a),
        deactivated: Some(st.drain.is_deactivated(id)),
        version: MESOS_VERSION.to_owned(),
        pid: Some(a.pid()),
        registered_time: Some(time(a.registered_time)),
        total_resources: a.total.to_protos(),
        allocated_resources: a.used.to_protos(),
        offered_resources: a.offered.to_protos(),
        // Mesos shows the start only beside a drain.
        estimated_drain_start_time: drain_info.as_ref().and(st.drain.start_time(id)),
        drain_info,
    }
}

/// The answer: registered agents (unreachable and removed ones are not),
/// and those a restarted master has not heard from again as recovered.
pub(crate) fn response(st: &State) -> Response {
    let agents = st
        .agents
        .values()
        .filter(|a| a.status == AgentStatus::Active)
        .map(|a| agent(st, a))
        .collect();
    let recovered_agents: Vec<AgentInfo> = st
        .agents
        .values()
        .filter(|a| a.status == AgentStatus::Reregistering)
        .map(Agent::info)
        .collect();
    Response {
        r#type: Some(response::Type::GetAgents as i32),
        get_agents: Some(response::GetAgents {
            agents,
            recovered_agents,
        }),
        ..Default::default()
    }
}
