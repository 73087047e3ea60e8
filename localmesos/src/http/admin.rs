//! Fault injection over HTTP, under `/admin/`: the same faults as the Rust
//! methods of [`crate::LocalMesos`].
//!
//! | route | body | effect |
//! |---|---|---|
//! | `POST /admin/agents` | `{"resources","attributes","hostname","simulated","task_duration_ms"}` | add an agent → `{"agent_id"}` |
//! | `POST /admin/agents/{id}/partition` | | agent silent; unreachable after its ping timeouts |
//! | `POST /admin/clock/advance` | `{"seconds"}` | the master's clock moves forward |
//! | `POST /admin/agents/{id}/heal` | | partition healed |
//! | `POST /admin/agents/{id}/remove` | | agent gone (by operator) |
//! | `POST /admin/master/restart` | [`RestartOptions`] | streams dropped, 503 while recovering |
//! | `POST /admin/executors/kill` | `{"agent_id","framework_id","executor_id"}` | executor process killed |
//! | `POST /admin/faults/status-updates` | [`UpdateFault`] | drop/duplicate/delay next updates |
//! | `DELETE /admin/faults/status-updates` | | clear those faults |
//!
//! Errors answer 404 (unknown agent or executor) or 409 (wrong agent state)
//! with the message as text; a malformed body answers 400.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State as AxState};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Json, Response};
use axum::routing::post;
use serde::Deserialize;
use serde_json::json;

use super::agent;
use crate::agent::ExecutorRef;
use crate::config::AgentConfig;
use crate::error::Error;
use crate::faults::{RestartOptions, UpdateFault};
use crate::master::{Shared, agents};

/// Whether the fault routes are served: `--enable-faults`, and a loopback
/// master address (a warning says why not otherwise).
pub(crate) fn enabled(cx: &Shared) -> bool {
    let asked = cx.security().enable_faults;
    let loopback = cx.master_addr.ip().is_loopback();
    if asked && !loopback {
        tracing::warn!(addr = %cx.master_addr, "--enable-faults ignored: the fault routes are served only on a loopback address");
    }
    asked && loopback
}

fn err(e: Error) -> Response {
    let code = match e {
        Error::UnknownAgent(_) | Error::UnknownExecutor { .. } => StatusCode::NOT_FOUND,
        Error::AgentState { .. } | Error::MachineDown(_) => StatusCode::CONFLICT,
        Error::Resources(_) => StatusCode::BAD_REQUEST,
        Error::Io(_) | Error::AgentBind { .. } => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (code, e.to_string()).into_response()
}

/// An empty body is the default request; a malformed one is a 400.
fn parse<T: for<'de> Deserialize<'de> + Default>(body: &[u8]) -> Result<T, BadBody> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|e| BadBody(e.to_string()))
}

/// A request body that is not the JSON a route expects.
struct BadBody(String);

impl IntoResponse for BadBody {
    fn into_response(self) -> Response {
        (StatusCode::BAD_REQUEST, format!("invalid body: {}", self.0)).into_response()
    }
}

pub(crate) fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/admin/agents", post(add_agent))
        .route("/admin/agents/{id}/partition", post(partition))
        .route("/admin/agents/{id}/heal", post(heal))
        .route("/admin/agents/{id}/remove", post(remove))
        .route("/admin/clock/advance", post(advance_clock))
        .route("/admin/master/restart", post(restart))
        .route("/admin/executors/kill", post(kill_executor))
        .route(
            "/admin/faults/status-updates",
            post(set_update_fault).delete(clear_update_fault),
        )
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct NewAgent {
    hostname: Option<String>,
    resources: String,
    attributes: String,
    simulated: bool,
    task_duration_ms: Option<u64>,
}

async fn add_agent(AxState(cx): AxState<Arc<Shared>>, body: Bytes) -> Response {
    let req: NewAgent = match parse(&body) {
        Ok(r) => r,
        Err(bad) => return bad.into_response(),
    };
    let index = usize::try_from(cx.lock().next_agent).unwrap_or(usize::MAX);
    let mut config = match AgentConfig::from_flags(&req.resources, &req.attributes, index) {
        Ok(c) => c,
        Err(e) => return err(e.into()),
    };
    config.hostname = req.hostname;
    config.simulated = req.simulated;
    config.task_duration = req.task_duration_ms.map(Duration::from_millis);
    match agent::add(&cx, config).await {
        Ok(id) => Json(json!({"agent_id": id.value})).into_response(),
        Err(e) => err(e),
    }
}

async fn partition(AxState(cx): AxState<Arc<Shared>>, Path(id): Path<String>) -> Response {
    agents::partition(&cx, &id).map_or_else(err, |()| StatusCode::OK.into_response())
}

async fn heal(AxState(cx): AxState<Arc<Shared>>, Path(id): Path<String>) -> Response {
    agents::heal(&cx, &id).map_or_else(err, |()| StatusCode::OK.into_response())
}

async fn remove(AxState(cx): AxState<Arc<Shared>>, Path(id): Path<String>) -> Response {
    agents::remove(&cx, &id).map_or_else(err, |()| StatusCode::OK.into_response())
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct Advance {
    seconds: f64,
}

async fn advance_clock(AxState(cx): AxState<Arc<Shared>>, body: Bytes) -> Response {
    let req: Advance = match parse(&body) {
        Ok(r) => r,
        Err(bad) => return bad.into_response(),
    };
    match Duration::try_from_secs_f64(req.seconds) {
        Ok(by) => {
            crate::master::pings::advance(&cx, by);
            StatusCode::OK.into_response()
        }
        Err(_) => BadBody(format!(
            "seconds must be a finite number >= 0, not {}",
            req.seconds
        ))
        .into_response(),
    }
}

async fn restart(AxState(cx): AxState<Arc<Shared>>, body: Bytes) -> Response {
    let opts: RestartOptions = match parse(&body) {
        Ok(o) => o,
        Err(bad) => return bad.into_response(),
    };
    crate::master::subscribe::restart(&cx, opts);
    StatusCode::OK.into_response()
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
struct ExecutorBody {
    agent_id: String,
    framework_id: String,
    executor_id: String,
}

async fn kill_executor(AxState(cx): AxState<Arc<Shared>>, body: Bytes) -> Response {
    let r: ExecutorBody = match parse(&body) {
        Ok(r) => r,
        Err(bad) => return bad.into_response(),
    };
    let executor = ExecutorRef::new(&r.agent_id, &r.framework_id, &r.executor_id);
    agents::kill_executor(&cx, executor).map_or_else(err, |()| StatusCode::OK.into_response())
}

async fn set_update_fault(AxState(cx): AxState<Arc<Shared>>, body: Bytes) -> Response {
    let f: UpdateFault = match parse(&body) {
        Ok(f) => f,
        Err(bad) => return bad.into_response(),
    };
    cx.lock().update_fault = f;
    StatusCode::OK.into_response()
}

async fn clear_update_fault(AxState(cx): AxState<Arc<Shared>>) -> Response {
    cx.lock().update_fault = UpdateFault::default();
    StatusCode::OK.into_response()
}
