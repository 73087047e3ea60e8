//! An agent's own HTTP endpoint, on `127.0.0.1:0`: `POST /api/v1/executor`,
//! `GET /state` and the sandbox file routes. What an executor calls is
//! reported to the master as [`Report`]s, as an agent relays its
//! executors' calls to a Mesos master.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State as AxState;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use mesos::codec::Codec;
use mesos::proto::AgentId;
use mesos::proto::executor::{Call, Event, call::Type, event};

use super::request::{self, CallNames, text};
use super::stream::{OnDrop, event_body};
use crate::agent::{Agent, ExecutorRef, Report, files};
use crate::config::AgentConfig;
use crate::error::Error;
use crate::master::maintenance::{self, MachineKey};
use crate::master::{Shared, State, agents, executors, recover, reports};
use crate::validation;

#[derive(Clone)]
struct AgentCx {
    shared: Arc<Shared>,
    agent_id: String,
}

/// Registers a new agent; a real one binds its endpoint first.
///
/// # Errors
/// A bind failure.
pub(crate) async fn add(cx: &Arc<Shared>, config: AgentConfig) -> Result<AgentId, Error> {
    let (index, fresh_id) = agents::next_id(cx);
    let hostname = config
        .hostname
        .clone()
        .unwrap_or_else(|| format!("agent-{index}"));
    // A persistent real agent recovers what it checkpointed, under its old
    // id and on its old port, so its executors find it again.
    let recovered = (cx.persistent && !config.simulated)
        .then(|| recover::find(&cx.work_dir, &hostname))
        .flatten();
    let id = recovered
        .as_ref()
        .and_then(|r| r.info.id.clone())
        .unwrap_or(fresh_id);
    let port = recovered
        .as_ref()
        .and_then(|r| r.info.port)
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(0);
    // Checked again when it registers; here so a refused agent binds nothing.
    agents::refuse_if_down(
        &cx.lock(),
        &hostname,
        &MachineKey::new(&hostname, maintenance::AGENT_IP),
    )?;
    let (endpoint, server) = if config.simulated {
        (None, None)
    } else {
        crate::agent::cgroups::warn_if_unavailable();
        let (addr, handle) = serve(cx, id.clone(), port)
            .await
            .map_err(|e| Error::AgentBind {
                agent: hostname.clone(),
                port,
                source: e,
            })?;
        (Some(addr), Some(handle))
    };
    let agent = Agent::new(id.clone(), index, config, endpoint, server);
    if cx.persistent && !agent.simulated {
        let info = agent.info();
        if let Err(e) = crate::agent::checkpoint::write_agent(&cx.work_dir, &info) {
            tracing::warn!(error = %e, "cannot checkpoint the agent; it will not be recovered");
        }
    }
    agents::register(cx, agent)?;
    if let Some(r) = recovered {
        recover::apply(cx, &id.value, r);
    }
    Ok(id)
}

/// Binds the agent's endpoint (`port` 0: any) and serves it until aborted.
async fn serve(
    shared: &Arc<Shared>,
    agent_id: AgentId,
    port: u16,
) -> std::io::Result<(SocketAddr, tokio::task::AbortHandle)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let cx = AgentCx {
        shared: shared.clone(),
        agent_id: agent_id.value,
    };
    let files_cx = files::FilesCx {
        root: shared.work_dir.clone(),
    };
    let auth = axum::middleware::from_fn_with_state(
        (shared.clone(), cx.agent_id.clone()),
        super::auth::executors,
    );
    let readonly = axum::middleware::from_fn_with_state(
        (shared.clone(), super::auth::AGENT_READONLY_REALM),
        super::auth::readonly,
    );
    let limits = shared.security().conn_limits();
    let operator = Router::new()
        .route("/state", get(agent_state))
        .route("/slave(1)/state", get(agent_state))
        .with_state(cx.clone())
        .merge(files::router(files_cx))
        .route_layer(readonly);
    let router = Router::new()
        .route("/api/v1/executor", any(executor_api).layer(auth))
        .with_state(cx)
        .merge(operator);
    let task = tokio::spawn(async move {
        if let Err(e) =
            connlimits::serve_with_shutdown(listener, router, limits, std::future::pending()).await
        {
            tracing::warn!(error = %e, "agent endpoint stopped");
        }
    });
    Ok((addr, task.abort_handle()))
}

async fn agent_state(AxState(cx): AxState<AgentCx>) -> axum::Json<serde_json::Value> {
    let st = cx.shared.lock();
    axum::Json(super::operator::agent_state_json(
        &cx.shared,
        &st,
        &cx.agent_id,
    ))
}

async fn executor_api(
    AxState(cx): AxState<AgentCx>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = request::post_only(&method) {
        return r.into_response();
    }
    let names = CallNames {
        parsed: "Call",
        validated: "executor::Call",
    };
    let (call, kind) = match request::decode(&headers, &body, &names, validation::executor_call) {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    let fw = call.framework_id.clone().unwrap_or_default().value;
    let exec = call.executor_id.clone().unwrap_or_default().value;
    let executor = ExecutorRef::new(&cx.agent_id, &fw, &exec);
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
        .and_then(|a| a.executors.get(&executor.key()))
    else {
        return text(StatusCode::BAD_REQUEST, "Executor cannot be found");
    };
    if !ex.custom {
        return text(StatusCode::BAD_REQUEST, "Executor cannot be found");
    }
    let agent_recovering = st.agents.get(&cx.agent_id).is_some_and(|a| a.recovering);
    if agent_recovering && !matches!(kind, Type::Subscribe | Type::Heartbeat) {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "Agent has not finished recovery",
        );
    }
    let report = match kind {
        Type::Subscribe => {
            let out = match request::accepted_codec(&headers) {
                Ok(c) => c,
                Err(r) => return r.into_response(),
            };
            return subscribe(&cx, &mut st, executor, out, call);
        }
        _ if ex.sub.is_none() => {
            return text(StatusCode::FORBIDDEN, "Executor is not subscribed");
        }
        Type::Update => Report::Update {
            executor,
            status: call.update.and_then(|u| u.status).unwrap_or_default(),
        },
        Type::Message => Report::Message {
            executor,
            data: call.message.map(|m| m.data).unwrap_or_default(),
        },
        Type::Heartbeat => return StatusCode::ACCEPTED.into_response(),
        Type::Unknown => {
            return text(StatusCode::NOT_IMPLEMENTED, "Received 'UNKNOWN' call");
        }
    };
    reports::apply(&shared, &mut st, report);
    StatusCode::ACCEPTED.into_response()
}

/// SUBSCRIBED and what the executor missed, then its event stream; when
/// the stream ends the agent reports the executor disconnected.
fn subscribe(
    cx: &AgentCx,
    st: &mut State,
    executor: ExecutorRef<'_>,
    codec: Codec,
    call: Call,
) -> Response {
    let known: Vec<String> = call
        .subscribe
        .as_ref()
        .map(|s| {
            s.unacknowledged_tasks
                .iter()
                .filter_map(|t| t.task_id.as_ref().map(|i| i.value.clone()))
                .collect()
        })
        .unwrap_or_default();
    recover::drop_unreceived(&cx.shared, st, executor, &known);
    let replay: Vec<mesos::proto::TaskStatus> = call
        .subscribe
        .map(|s| {
            s.unacknowledged_updates
                .into_iter()
                .filter_map(|u| u.status)
                .collect()
        })
        .unwrap_or_default();
    let (rx, generation) = match executors::subscribe(&cx.shared, st, executor, replay) {
        Ok(sub) => sub,
        Err(msg) => return text(StatusCode::BAD_REQUEST, msg),
    };
    let (weak, agent_id, fw, exec) = (
        Arc::downgrade(&cx.shared),
        executor.agent_id.to_owned(),
        executor.framework_id.to_owned(),
        executor.executor_id.to_owned(),
    );
    let guard = OnDrop::new(move || {
        if let Some(shared) = weak.upgrade() {
            let mut st = shared.lock();
            let executor = ExecutorRef::new(&agent_id, &fw, &exec);
            let report = Report::Disconnected {
                executor,
                generation,
            };
            reports::apply(&shared, &mut st, report);
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
