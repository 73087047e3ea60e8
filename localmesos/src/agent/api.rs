//! An agent's own HTTP endpoint: `POST /api/v1/executor` and the sandbox
//! file routes, on `127.0.0.1:0`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State as AxState;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use mesos::codec::{Codec, MediaTypeError};
use mesos::proto::executor::{Call, Event, call::Type, event};
use tokio::sync::mpsc;

use super::executors::{self, ExecSub};
use crate::http::stream::{OnDrop, event_body};
use crate::master::{Shared, State};
use crate::validation;

#[derive(Clone)]
struct AgentCx {
    shared: Arc<Shared>,
    agent_id: String,
}

/// Binds the agent's endpoint and serves it until aborted.
pub(crate) async fn serve(
    shared: &Arc<Shared>,
    agent_id: mesos::proto::AgentId,
) -> std::io::Result<(SocketAddr, tokio::task::AbortHandle)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let cx = AgentCx {
        shared: shared.clone(),
        agent_id: agent_id.value,
    };
    let files_cx = super::files::FilesCx {
        root: shared.work_dir.clone(),
    };
    let router = Router::new()
        .route("/api/v1/executor", any(executor_api))
        .route("/state", get(agent_state))
        .route("/slave(1)/state", get(agent_state))
        .with_state(cx)
        .merge(super::files::router(files_cx));
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            tracing::warn!(error = %e, "agent endpoint stopped");
        }
    });
    Ok((addr, task.abort_handle()))
}

async fn agent_state(AxState(cx): AxState<AgentCx>) -> axum::Json<serde_json::Value> {
    let st = cx.shared.lock();
    axum::Json(crate::http::operator::agent_state_json(
        &cx.shared,
        &st,
        &cx.agent_id,
    ))
}

fn text(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, msg.into()).into_response()
}

async fn executor_api(
    AxState(cx): AxState<AgentCx>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if method != Method::POST {
        return (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "POST")],
            format!("Expecting one of {{ 'POST' }}, but received '{method}'"),
        )
            .into_response();
    }
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let codec = match Codec::from_content_type(ct) {
        Ok(c) => c,
        Err(e @ MediaTypeError::Missing) => return text(StatusCode::BAD_REQUEST, e.to_string()),
        Err(e) => return text(StatusCode::UNSUPPORTED_MEDIA_TYPE, e.to_string()),
    };
    let call: Call = match codec.decode(&body) {
        Ok(c) => c,
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("Failed to parse body into Call: {e}"),
            );
        }
    };
    let kind = match validation::executor_call(&call) {
        Ok(k) => k,
        Err(e) => {
            return text(
                StatusCode::BAD_REQUEST,
                format!("Failed to validate executor::Call: {e}"),
            );
        }
    };
    let fw = call.framework_id.clone().unwrap_or_default().value;
    let exec = call.executor_id.clone().unwrap_or_default().value;
    let shared = cx.shared.clone();
    let mut st = shared.lock();
    if st.recovering {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "Agent has not finished recovery",
        );
    }
    if !st.frameworks.contains_key(&fw) {
        return text(StatusCode::BAD_REQUEST, "Framework cannot be found");
    }
    let Some(ex) = st
        .agents
        .get(&cx.agent_id)
        .and_then(|a| a.executors.get(&(fw.clone(), exec.clone())))
    else {
        return text(StatusCode::BAD_REQUEST, "Executor cannot be found");
    };
    if !ex.custom {
        return text(StatusCode::BAD_REQUEST, "Executor cannot be found");
    }
    match kind {
        Type::Subscribe => {
            let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
            let out = match Codec::from_accept(accept) {
                Ok(c) => c,
                Err(e) => return text(StatusCode::NOT_ACCEPTABLE, e.to_string()),
            };
            subscribe(&cx, &mut st, &fw, &exec, out, call)
        }
        _ if ex.sub.is_none() => text(StatusCode::FORBIDDEN, "Executor is not subscribed"),
        Type::Update => {
            let status = call.update.and_then(|u| u.status).unwrap_or_default();
            executors::executor_update(&shared, &mut st, &cx.agent_id, &fw, &exec, status);
            StatusCode::ACCEPTED.into_response()
        }
        Type::Message => {
            let data = call.message.map(|m| m.data).unwrap_or_default();
            if let Some(f) = st.frameworks.get(&fw) {
                f.send(mesos::proto::scheduler::Event {
                    r#type: Some(mesos::proto::scheduler::event::Type::Message as i32),
                    message: Some(mesos::proto::scheduler::event::Message {
                        agent_id: Some(mesos::proto::AgentId::new(cx.agent_id.clone())),
                        executor_id: Some(mesos::proto::ExecutorId::new(exec)),
                        data,
                    }),
                    ..Default::default()
                });
            }
            StatusCode::ACCEPTED.into_response()
        }
        Type::Heartbeat => StatusCode::ACCEPTED.into_response(),
        Type::Unknown => text(StatusCode::NOT_IMPLEMENTED, "Received 'UNKNOWN' call"),
    }
}

/// SUBSCRIBED, then the LAUNCH events queued before the executor came.
fn subscribe(
    cx: &AgentCx,
    st: &mut State,
    fw: &str,
    exec: &str,
    codec: Codec,
    call: Call,
) -> Response {
    let framework_info = st.frameworks.get(fw).map(|f| f.info.clone());
    let Some(agent) = st.agents.get_mut(&cx.agent_id) else {
        return text(StatusCode::BAD_REQUEST, "Agent cannot be found");
    };
    let agent_info = agent.info();
    let Some(ex) = agent.executors.get_mut(&(fw.to_owned(), exec.to_owned())) else {
        return text(StatusCode::BAD_REQUEST, "Executor cannot be found");
    };
    let (tx, rx) = mpsc::unbounded_channel();
    ex.generation += 1;
    let generation = ex.generation;
    let mut subscribed_exec = ex.info.clone();
    if subscribed_exec.framework_id.is_none() {
        subscribed_exec.framework_id = Some(mesos::proto::FrameworkId::new(fw));
    }
    let _ = tx.send(Event {
        r#type: Some(event::Type::Subscribed as i32),
        subscribed: Some(event::Subscribed {
            executor_info: Some(subscribed_exec),
            framework_info,
            agent_info: Some(agent_info),
            container_id: Some(mesos::proto::ContainerId {
                value: ex.container_id.clone(),
                parent: None,
            }),
        }),
        ..Default::default()
    });
    // Updates the executor says it sent but we never stored are replayed;
    // unacknowledged tasks we already launched need nothing more.
    let replay: Vec<mesos::proto::TaskStatus> = call
        .subscribe
        .map(|s| {
            s.unacknowledged_updates
                .into_iter()
                .filter_map(|u| u.status)
                .collect()
        })
        .unwrap_or_default();
    for ev in ex.queued.drain(..) {
        let _ = tx.send(ev);
    }
    ex.sub = Some(ExecSub { tx, generation });
    for status in replay {
        executors::executor_update(&cx.shared, st, &cx.agent_id, fw, exec, status);
    }
    let (weak, agent_id, fw_s, exec_s) = (
        Arc::downgrade(&cx.shared),
        cx.agent_id.clone(),
        fw.to_owned(),
        exec.to_owned(),
    );
    let guard = OnDrop::new(move || {
        if let Some(shared) = weak.upgrade() {
            let mut st = shared.lock();
            if let Some(ex) = st
                .agents
                .get_mut(&agent_id)
                .and_then(|a| a.executors.get_mut(&(fw_s, exec_s)))
                && ex.sub.as_ref().is_some_and(|s| s.generation == generation)
            {
                ex.sub = None;
            }
        }
    });
    let heartbeat = Event {
        r#type: Some(event::Type::Heartbeat as i32),
        ..Default::default()
    };
    let body = event_body(
        rx,
        codec,
        Some((cx.shared.timing.heartbeat_interval, heartbeat)),
        guard,
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, codec.content_type())
        .body(body)
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}
