//! Mesos' maintenance endpoints, JSON only, at `/maintenance/schedule`
//! (GET the schedule, POST a new one), `/maintenance/status` (GET),
//! `/machine/down` and `/machine/up` (POST a JSON array of machines), each
//! also under `/master/`. Status codes as Mesos' `master/http.cpp`: 405
//! for another method, 400 with Mesos' message for a body that does not
//! parse or a request that validation refuses, 200 with an empty body when
//! done. The v1 operator API's maintenance calls
//! ([`super::operator_api`]) share the master's code.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State as AxState;
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mesos::proto::MachineId;
use mesos::proto::maintenance::Schedule;

use super::request::text;
use crate::master::{Shared, maintenance};

/// 405 listing the methods the endpoint takes, in Mesos' words.
fn method_not_allowed(allowed: &[&str], method: &Method) -> Response {
    let list = allowed
        .iter()
        .map(|m| format!("'{m}'"))
        .collect::<Vec<_>>()
        .join(", ");
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, allowed.join(", "))],
        format!("Expecting one of {{ {list} }}, but received '{method}'"),
    )
        .into_response()
}

/// 200 with a message as JSON.
pub(crate) fn json_ok<M: serde::Serialize>(msg: &M) -> Response {
    match serde_json::to_vec(msg) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// 200 with an empty body, or 400 with the master's message.
pub(crate) fn done(result: Result<(), String>) -> Response {
    match result {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => text(StatusCode::BAD_REQUEST, e),
    }
}

/// `GET|POST /maintenance/schedule`.
pub(crate) async fn schedule(
    AxState(cx): AxState<Arc<Shared>>,
    method: Method,
    body: Bytes,
) -> Response {
    match method {
        Method::GET => json_ok(&cx.lock().maintenance.schedule),
        Method::POST => {
            // Mesos parses the body as a JSON object first, then as a Schedule.
            let object: serde_json::Map<String, serde_json::Value> =
                match serde_json::from_slice(&body) {
                    Ok(o) => o,
                    Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
                };
            let schedule: Schedule = match serde_json::from_value(object.into()) {
                Ok(s) => s,
                Err(e) => return text(StatusCode::BAD_REQUEST, e.to_string()),
            };
            let mut st = cx.lock();
            done(maintenance::update_schedule(&cx, &mut st, schedule))
        }
        other => method_not_allowed(&["GET", "POST"], &other),
    }
}

/// `GET /maintenance/status`.
pub(crate) async fn status(AxState(cx): AxState<Arc<Shared>>, method: Method) -> Response {
    if method != Method::GET {
        return method_not_allowed(&["GET"], &method);
    }
    let st = cx.lock();
    json_ok(&st.maintenance.status(&st))
}

/// The JSON array of machines `/machine/down` and `/machine/up` take
/// (Mesos parses a JSON array, then the machines): the parse error if not.
fn machines(body: &[u8]) -> Result<Vec<MachineId>, String> {
    let array: Vec<serde_json::Value> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    serde_json::from_value(array.into()).map_err(|e| e.to_string())
}

/// `POST /machine/down`: START_MAINTENANCE.
pub(crate) async fn down(
    AxState(cx): AxState<Arc<Shared>>,
    method: Method,
    body: Bytes,
) -> Response {
    if method != Method::POST {
        return method_not_allowed(&["POST"], &method);
    }
    done(machines(&body).and_then(|ids| maintenance::start(&mut cx.lock(), &ids)))
}

/// `POST /machine/up`: STOP_MAINTENANCE.
pub(crate) async fn up(AxState(cx): AxState<Arc<Shared>>, method: Method, body: Bytes) -> Response {
    if method != Method::POST {
        return method_not_allowed(&["POST"], &method);
    }
    done(machines(&body).and_then(|ids| maintenance::stop(&mut cx.lock(), &ids)))
}
