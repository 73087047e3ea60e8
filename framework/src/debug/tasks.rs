//! `/debug/registry/tasks` and `/debug/registry/tasks/{id}`.

use std::time::SystemTime;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use mesos::proto::TaskId;
use registry::PodTask;
use serde::{Deserialize, Serialize};

use super::{DebugState, json, plain, text, wants_text};
use crate::observe::StatusRow;

/// One line of the task list.
#[derive(Debug, Serialize)]
pub(crate) struct TaskRow {
    pub(crate) id: String,
    pub(crate) pod: String,
    pub(crate) state: String,
    pub(crate) flags: Vec<String>,
    pub(crate) agent_id: Option<String>,
    pub(crate) hostname: Option<String>,
    pub(crate) offer_id: Option<String>,
    pub(crate) ports: Vec<String>,
    pub(crate) age_seconds: f64,
}

impl TaskRow {
    pub(crate) fn of(t: &PodTask, now: SystemTime) -> TaskRow {
        let key = t.pod_key();
        TaskRow {
            id: t.id.value.clone(),
            pod: format!("{}/{}", key.namespace, key.name),
            state: t.state.to_string(),
            flags: t.flags.iter().map(|f| f.to_string()).collect(),
            agent_id: t.spec.as_ref().map(|s| s.agent_id.value.clone()),
            hostname: t.spec.as_ref().map(|s| s.hostname.clone()),
            offer_id: t.offer_id.as_ref().map(|o| o.value.clone()),
            ports: t
                .spec
                .as_ref()
                .map(|s| {
                    s.port_mappings
                        .iter()
                        .map(|p| {
                            format!(
                                "{}:{}->{}/{}",
                                p.container, p.host_port, p.container_port, p.protocol
                            )
                        })
                        .collect()
                })
                .unwrap_or_default(),
            age_seconds: now
                .duration_since(t.created)
                .unwrap_or_default()
                .as_secs_f64(),
        }
    }
}

#[derive(Deserialize, Default)]
pub(crate) struct ListQuery {
    state: Option<String>,
    pod: Option<String>,
    format: Option<String>,
}

/// Every task, newest last, filtered by `?state=` and `?pod=` (`name` or `namespace/name`).
pub(crate) fn rows(s: &DebugState, state: Option<&str>, pod: Option<&str>) -> Vec<TaskRow> {
    let now = s.clock.now();
    let mut tasks = s.term.registry().list(&|t: &PodTask| {
        state.is_none_or(|st| t.state.as_str() == st)
            && pod.is_none_or(|p| {
                let k = t.pod_key();
                k.name == p || format!("{}/{}", k.namespace, k.name) == p
            })
    });
    tasks.sort_by(|a, b| {
        a.created
            .cmp(&b.created)
            .then_with(|| a.id.value.cmp(&b.id.value))
    });
    tasks.iter().map(|t| TaskRow::of(t, now)).collect()
}

pub(crate) async fn list(
    State(s): State<DebugState>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Response {
    let rows = rows(&s, q.state.as_deref(), q.pod.as_deref());
    if wants_text(&headers, q.format.as_deref()) {
        let cells = rows
            .iter()
            .map(|r| {
                vec![
                    r.id.clone(),
                    r.pod.clone(),
                    r.state.clone(),
                    r.flags.join(","),
                    r.hostname.clone().unwrap_or_default(),
                    r.offer_id.clone().unwrap_or_default(),
                    r.ports.join(","),
                    format!("{:.0}s", r.age_seconds),
                ]
            })
            .collect();
        return plain(text::table(
            &[
                "TASK", "POD", "STATE", "FLAGS", "HOST", "OFFER", "PORTS", "AGE",
            ],
            cells,
        ));
    }
    json(&rows)
}

#[derive(Serialize)]
struct TaskDetail {
    task: TaskRow,
    spec: Option<serde_json::Value>,
    last_status: Option<serde_json::Value>,
    status_history: Vec<StatusRow>,
}

pub(crate) async fn one(State(s): State<DebugState>, Path(id): Path<String>) -> Response {
    let Some(task) = s.term.registry().get(&TaskId::new(id.clone())) else {
        return (
            StatusCode::NOT_FOUND,
            format!("no task {id:?} in the registry\n"),
        )
            .into_response();
    };
    let detail = TaskDetail {
        task: TaskRow::of(&task, s.clock.now()),
        spec: task
            .spec
            .as_ref()
            .and_then(|sp| serde_json::to_value(sp.as_ref()).ok()),
        last_status: task
            .last_status
            .as_ref()
            .and_then(|l| serde_json::to_value(l).ok()),
        status_history: s.observed.history(&id),
    };
    json(&detail)
}
