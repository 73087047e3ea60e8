//! `POST /api/v1`, the master's v1 operator API, for the maintenance calls
//! (GET_MAINTENANCE_SCHEDULE, GET_MAINTENANCE_STATUS,
//! UPDATE_MAINTENANCE_SCHEDULE, START_MAINTENANCE, STOP_MAINTENANCE), agent
//! draining and deactivation (DRAIN_AGENT, DEACTIVATE_AGENT,
//! REACTIVATE_AGENT) and GET_AGENTS.
//!
//! Checked in the order of Mesos' `Master::Http::api`: not POST → 405; not
//! the leader → 307; recovering → 503; no `Content-Type` → 400, another
//! type → 415; a body that does not decode or a call that fails validation
//! → 400; `Accept` allowing neither encoding → 406. Then UNKNOWN gets 501
//! as in Mesos, and every call type Mesos has but localmesos does not serve
//! gets 501 with a message naming it (never a pretend success). Answers:
//! the GET calls a `Response` in the `Accept` encoding, the others 200
//! with an empty body or 400 (409 for REACTIVATE_AGENT of an agent that is
//! not registered) with Mesos' message.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State as AxState;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mesos::codec::Codec;
use mesos::proto::json::WireEnum as _;
use mesos::proto::master::{Call, Response as OpResponse, call::Type, response};

use super::maintenance::done;
use super::request::{self, CallNames, text};
use crate::master::drain::{self, Refusal};
use crate::master::{Shared, maintenance};
use crate::validation;

/// 200 with an empty body, or Mesos' status and message.
fn drained(result: Result<(), Refusal>) -> Response {
    match result {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e @ Refusal::BadRequest(_)) => text(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e @ Refusal::Conflict(_)) => text(StatusCode::CONFLICT, e.to_string()),
    }
}

/// The agent a call names (validation made sure there is one).
fn agent_id(id: Option<&mesos::proto::AgentId>) -> &str {
    id.map_or("", |a| a.value.as_str())
}

fn encoded(codec: Codec, msg: &OpResponse) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, codec.content_type())],
        codec.encode(msg),
    )
        .into_response()
}

pub(crate) async fn api(
    AxState(cx): AxState<Arc<Shared>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = request::master_refusal(&cx, &method, "/api/v1") {
        return refused;
    }
    let names = CallNames {
        parsed: "Call protobuf",
        validated: "master::Call",
    };
    let (call, kind): (Call, Type) =
        match request::decode(&headers, &body, &names, validation::operator_call) {
            Ok(c) => c,
            Err(r) => return r.into_response(),
        };
    let codec = match request::accepted_codec(&headers) {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    tracing::info!(call = kind.wire_name(), "processing operator call");
    match kind {
        Type::GetMaintenanceSchedule => {
            let schedule = cx.lock().maintenance.schedule.clone();
            encoded(
                codec,
                &OpResponse {
                    r#type: Some(response::Type::GetMaintenanceSchedule as i32),
                    get_maintenance_schedule: Some(response::GetMaintenanceSchedule {
                        schedule: Some(schedule),
                    }),
                    ..Default::default()
                },
            )
        }
        Type::GetMaintenanceStatus => {
            let status = {
                let st = cx.lock();
                st.maintenance.status(&st)
            };
            encoded(
                codec,
                &OpResponse {
                    r#type: Some(response::Type::GetMaintenanceStatus as i32),
                    get_maintenance_status: Some(response::GetMaintenanceStatus {
                        status: Some(status),
                    }),
                    ..Default::default()
                },
            )
        }
        Type::UpdateMaintenanceSchedule => {
            let schedule = call
                .update_maintenance_schedule
                .and_then(|u| u.schedule)
                .unwrap_or_default();
            let mut st = cx.lock();
            done(maintenance::update_schedule(&cx, &mut st, schedule))
        }
        Type::StartMaintenance => {
            let ids = call
                .start_maintenance
                .map(|s| s.machines)
                .unwrap_or_default();
            let mut st = cx.lock();
            done(maintenance::start(&mut st, &ids))
        }
        Type::StopMaintenance => {
            let ids = call
                .stop_maintenance
                .map(|s| s.machines)
                .unwrap_or_default();
            done(maintenance::stop(&mut cx.lock(), &ids))
        }
        Type::GetAgents => encoded(codec, &super::get_agents::response(&cx.lock())),
        Type::DrainAgent => {
            let c = call.drain_agent.unwrap_or_default();
            let max = c.max_grace_period.as_ref().map(drain::duration_info);
            let mark_gone = c.mark_gone.unwrap_or(false);
            let mut st = cx.lock();
            drained(drain::drain(
                &cx,
                &mut st,
                agent_id(c.agent_id.as_ref()),
                max,
                mark_gone,
            ))
        }
        Type::DeactivateAgent => {
            let c = call.deactivate_agent.unwrap_or_default();
            let mut st = cx.lock();
            drained(drain::deactivate(
                &cx,
                &mut st,
                agent_id(c.agent_id.as_ref()),
            ))
        }
        Type::ReactivateAgent => {
            let c = call.reactivate_agent.unwrap_or_default();
            let mut st = cx.lock();
            drained(drain::reactivate(
                &cx,
                &mut st,
                agent_id(c.agent_id.as_ref()),
            ))
        }
        // Mesos' own answer to UNKNOWN: 501 with an empty body.
        Type::Unknown => StatusCode::NOT_IMPLEMENTED.into_response(),
        other => text(
            StatusCode::NOT_IMPLEMENTED,
            format!(
                "localmesos serves only the maintenance, agent draining and GET_AGENTS calls of the operator API; {} is not implemented",
                other.wire_name()
            ),
        ),
    }
}
