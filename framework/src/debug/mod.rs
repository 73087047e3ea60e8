//! Debug HTTP handlers, metrics and health, on the API shim's listener.
//!
//! | path | shows |
//! |---|---|
//! | `/debug/` | an HTML page linking everything, with the registry as a table |
//! | `/debug/registry/tasks` | every task (JSON; aligned text with `Accept: text/plain` or `?format=text`); `?state=` and `?pod=` filter |
//! | `/debug/registry/tasks/{id}` | one task: full spec and its last status updates |
//! | `/debug/offers` | live offers: agent, resources, age, TTL left |
//! | `/debug/queue` | pending pods in order: attempts, next try, last reasons |
//! | `/debug/reconciliation` | rounds, tasks waiting for an answer, last implicit run |
//! | `/debug/framework` | framework id, master, subscription, last heartbeat |
//! | `POST /debug/actions/reconcile?kind=explicit\|implicit` | 202, or 503 when not subscribed |
//! | `/healthz`, `/readyz` | up; ready: etcd answers, the leader is subscribed (`readyz.rs`) |
//! | `/metrics` | Prometheus text |
//!
//! Handlers only read: the registry, through a read-only
//! [`registry::RegistryReader`] of the current term, and the core's published snapshot,
//! which may be one loop turn old.

mod page;
mod readyz;
mod tasks;
mod text;

use std::collections::BTreeMap;
use std::sync::Arc;

use apiserver::{Api, Clock};
use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use registry::PodTask;
use serde::Serialize;

use crate::core::Input;
use crate::observe::Observed;

/// What the handlers read.
#[derive(Clone)]
pub struct DebugState {
    /// The current scheduler term: its registry (read-only), whether its subscription
    /// is open, and its core's inputs (to ask for reconciliation).
    pub term: crate::leader::current::Current,
    /// The core's snapshot and metrics.
    pub observed: Arc<Observed>,
    /// To check the store.
    pub api: Api,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The leader election, when on: a follower is ready without a subscription.
    pub elector: Option<Arc<crate::leader::Elector>>,
}

/// The debug, health and metrics routes.
pub fn router(state: DebugState) -> Router {
    Router::new()
        .route("/debug", get(page::index))
        .route("/debug/", get(page::index))
        .route("/debug/registry/tasks", get(tasks::list))
        .route("/debug/registry/tasks/{id}", get(tasks::one))
        .route("/debug/offers", get(offers))
        .route("/debug/queue", get(queue))
        .route("/debug/reconciliation", get(reconciliation))
        .route("/debug/framework", get(framework))
        .route("/debug/actions/reconcile", post(reconcile))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz::all))
        .route("/readyz/{check}", get(readyz::one))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// Whether the client asked for text.
pub(crate) fn wants_text(headers: &HeaderMap, format: Option<&str>) -> bool {
    if let Some(f) = format {
        return f == "text";
    }
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.starts_with("text/plain"))
}

pub(crate) fn json<T: Serialize>(value: &T) -> Response {
    match serde_json::to_vec_pretty(value) {
        Ok(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

pub(crate) fn plain(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

#[derive(serde::Deserialize, Default)]
struct FormatQuery {
    format: Option<String>,
}

/// `rows` as an aligned table under `columns` when the client asked for
/// text (each row's cells from `cells`), else as JSON.
fn table_or_json<R>(
    headers: &HeaderMap,
    q: &FormatQuery,
    rows: &[R],
    columns: &[&str],
    cells: impl Fn(&R) -> Vec<String>,
    as_json: impl FnOnce(&[R]) -> Response,
) -> Response {
    if wants_text(headers, q.format.as_deref()) {
        return plain(text::table(columns, rows.iter().map(cells).collect()));
    }
    as_json(rows)
}

async fn offers(
    State(s): State<DebugState>,
    headers: HeaderMap,
    Query(q): Query<FormatQuery>,
) -> Response {
    table_or_json(
        &headers,
        &q,
        &s.observed.snapshot().offers,
        &["OFFER", "HOST", "AGENT", "AGE", "TTL LEFT", "RESOURCES"],
        |o| {
            vec![
                o.id.clone(),
                o.hostname.clone(),
                o.agent_id.clone(),
                format!("{:.1}s", o.age_seconds),
                format!("{:.1}s", o.ttl_left_seconds),
                o.resources(),
            ]
        },
        |offers| {
            let rows: Vec<serde_json::Value> = offers
                .iter()
                .map(|o| {
                    let mut v = serde_json::to_value(o).unwrap_or_default();
                    v["resources"] = serde_json::Value::String(o.resources());
                    v
                })
                .collect();
            json(&rows)
        },
    )
}

async fn queue(
    State(s): State<DebugState>,
    headers: HeaderMap,
    Query(q): Query<FormatQuery>,
) -> Response {
    table_or_json(
        &headers,
        &q,
        &s.observed.snapshot().queue,
        &[
            "POD",
            "PRIORITY",
            "ATTEMPTS",
            "HOLDS",
            "NEXT TRY",
            "LAST REASON",
        ],
        |e| {
            vec![
                format!("{}/{}", e.namespace, e.name),
                e.priority.to_string(),
                e.attempts.to_string(),
                e.holds.to_string(),
                format!("{:.1}s", e.next_try_in_seconds),
                e.last_reason.clone().unwrap_or_default(),
            ]
        },
        |rows| json(&rows),
    )
}

fn epoch_secs(t: Option<std::time::SystemTime>) -> Option<f64> {
    t.and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64())
}

#[derive(Serialize)]
struct ReconciliationView {
    rounds_completed: u64,
    in_progress: bool,
    waiting: Vec<String>,
    round_started_unix: Option<f64>,
    last_implicit_unix: Option<f64>,
}

async fn reconciliation(State(s): State<DebugState>) -> Response {
    let r =
        s.observed
            .snapshot()
            .reconciliation
            .unwrap_or_else(|| crate::reconcile::ReconcileReport {
                rounds_completed: 0,
                waiting: Vec::new(),
                round_started: None,
                last_implicit: None,
            });
    json(&ReconciliationView {
        rounds_completed: r.rounds_completed,
        in_progress: r.round_started.is_some(),
        waiting: r.waiting,
        round_started_unix: epoch_secs(r.round_started),
        last_implicit_unix: epoch_secs(r.last_implicit),
    })
}

#[derive(Serialize)]
struct FrameworkView {
    framework_id: Option<String>,
    master: Option<String>,
    subscribed: bool,
    suppressed: bool,
    heartbeat_interval_seconds: Option<f64>,
    last_heartbeat_unix: Option<f64>,
    seconds_since_last_heartbeat: Option<f64>,
    /// Leader, follower or lost, and the election's details (`crate::leader::http`).
    #[serde(flatten)]
    leadership: serde_json::Map<String, serde_json::Value>,
}

async fn framework(State(s): State<DebugState>) -> Response {
    let snap = s.observed.snapshot();
    let (master, heartbeat) = s.observed.master();
    let last = s.observed.last_event();
    let now = s.clock.now();
    json(&FrameworkView {
        framework_id: s.term.mesos().framework_id().or(snap.framework_id),
        master,
        subscribed: s.term.mesos().is_subscribed(),
        suppressed: snap.suppressed,
        heartbeat_interval_seconds: heartbeat.map(|h| h.as_secs_f64()),
        last_heartbeat_unix: epoch_secs(last),
        seconds_since_last_heartbeat: last
            .and_then(|l| now.duration_since(l).ok())
            .map(|d| d.as_secs_f64()),
        leadership: crate::leader::http::view(s.elector.as_deref()),
    })
}

#[derive(serde::Deserialize)]
struct ReconcileQuery {
    kind: Option<String>,
}

async fn reconcile(State(s): State<DebugState>, Query(q): Query<ReconcileQuery>) -> Response {
    let explicit = match q.kind.as_deref() {
        Some("explicit") | None => true,
        Some("implicit") => false,
        Some(other) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("kind must be explicit or implicit, not {other:?}\n"),
            )
                .into_response();
        }
    };
    if !s.term.mesos().is_subscribed() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not subscribed to a Mesos master\n",
        )
            .into_response();
    }
    match s.term.inputs().send(Input::Reconcile { explicit }) {
        Ok(()) => (StatusCode::ACCEPTED, "reconciliation requested\n").into_response(),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the scheduler is stopping\n",
        )
            .into_response(),
    }
}

async fn metrics(State(s): State<DebugState>) -> Response {
    let mut by_state: BTreeMap<String, u64> = BTreeMap::new();
    for t in s.term.registry().list(&|_: &PodTask| true) {
        *by_state.entry(t.state.to_string()).or_default() += 1;
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.observed.metrics.render(&by_state),
    )
        .into_response()
}
