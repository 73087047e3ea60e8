//! The HTTP layer: the master's routes (the scheduler API, the event
//! streams, operator endpoints and the admin (fault) routes) and each real
//! agent's endpoint (the executor API, its `/state` and sandbox files).
//! Handlers decode and check HTTP-level rules, then call into `master`;
//! they hold no state.

pub(crate) mod admin;
pub(crate) mod agent;
pub(crate) mod auth;
pub(crate) mod get_agents;
pub(crate) mod maintenance;
pub(crate) mod operator;
pub(crate) mod operator_api;
pub(crate) mod request;
pub(crate) mod scheduler;
pub(crate) mod stream;

use std::sync::Arc;

use axum::Router;
use axum::routing::{any, get};

use crate::master::Shared;

/// Every route of the master.
pub(crate) fn router(cx: Arc<Shared>) -> Router {
    let auth = axum::middleware::from_fn_with_state(cx.clone(), auth::frameworks);
    let readonly = axum::middleware::from_fn_with_state(
        (cx.clone(), auth::MASTER_READONLY_REALM),
        auth::readonly,
    );
    // `/version` names no framework or task, and Mesos serves it to anyone.
    let readwrite = axum::middleware::from_fn_with_state(cx.clone(), auth::readwrite);
    let mut operator = Router::new()
        .route("/state", get(operator::state))
        .route("/state.json", get(operator::state))
        .route("/master/state", get(operator::state))
        .route("/master/state.json", get(operator::state))
        .route("/slaves", get(operator::slaves))
        .route("/master/slaves", get(operator::slaves));
    // Mesos serves its endpoints both bare and under the master's process id.
    let mut writes = Router::new().route("/api/v1", any(operator_api::api));
    for prefix in ["", "/master"] {
        operator = operator.route(
            &format!("{prefix}/maintenance/status"),
            any(maintenance::status),
        );
        writes = writes
            .route(
                &format!("{prefix}/maintenance/schedule"),
                any(maintenance::schedule),
            )
            .route(&format!("{prefix}/machine/down"), any(maintenance::down))
            .route(&format!("{prefix}/machine/up"), any(maintenance::up));
    }
    let router = Router::new()
        .route("/api/v1/scheduler", any(scheduler::scheduler).layer(auth))
        .route("/version", get(operator::version))
        .merge(operator.route_layer(readonly))
        .merge(writes.route_layer(readwrite));
    // Fault routes can partition agents: only when asked, and only on loopback.
    let router = if admin::enabled(&cx) {
        router.merge(admin::router())
    } else {
        router
    };
    router.with_state(cx)
}
