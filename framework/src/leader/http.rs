//! `/debug/framework` (leader or follower) and the health probes every replica
//! answers: `/readyz`, `/livez`, `/healthz` are `ok` once the API serves, follower or
//! not, as kube-apiserver's are.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use super::run::{Elector, Leadership};

/// The routes; `elector` is `None` without `--leader-elect` (the one replica leads).
pub fn router(elector: Option<Arc<Elector>>) -> Router {
    let ok = || async { (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], "ok") };
    Router::new()
        .route("/debug/framework", get(framework))
        .route("/readyz", get(ok))
        .route("/livez", get(ok))
        .route("/healthz", get(ok))
        .with_state(elector)
}

async fn framework(State(elector): State<Option<Arc<Elector>>>) -> Response {
    let body = match &elector {
        None => json!({"role": "leader", "leaderElection": false}),
        Some(e) => {
            let cfg = e.config();
            let (role, holder) = match e.leadership() {
                Leadership::Leader => ("leader", Some(e.identity().to_owned())),
                Leadership::Follower { holder } => ("follower", holder),
                Leadership::Lost => ("lost", None),
            };
            json!({
                "role": role,
                "leaderElection": true,
                "identity": e.identity(),
                "holder": holder,
                "lease": format!("{}/{}", cfg.namespace, cfg.name),
                "leaseDurationSeconds": cfg.lease_duration.as_secs_f64(),
                "renewDeadlineSeconds": cfg.renew_deadline.as_secs_f64(),
                "retryPeriodSeconds": cfg.retry_period.as_secs_f64(),
            })
        }
    };
    (StatusCode::OK, axum::Json(body)).into_response()
}
