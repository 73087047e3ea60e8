//! What `/debug/framework` says of leadership (leader, follower or lost, and the
//! election's settings), and `/livez`, which kube-apiserver answers besides `/healthz`
//! and `/readyz` (served by `crate::debug`, ready on followers too).

use axum::Router;
use axum::http::{StatusCode, header};
use axum::routing::get;
use serde_json::{Map, Value, json};

use super::run::{Elector, Leadership};

/// `/livez`.
pub fn router() -> Router {
    Router::new().route(
        "/livez",
        get(|| async {
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "text/plain")],
                "ok\n",
            )
        }),
    )
}

/// The fields `/debug/framework` adds: `role` (`leader`, `follower`, `lost`) and, with
/// leader election, `identity`, `holder`, `lease` and the durations.
pub fn view(elector: Option<&Elector>) -> Map<String, Value> {
    let body = match elector {
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
    match body {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}
