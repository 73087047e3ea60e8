//! `/readyz`, as kube-apiserver's healthz package serves it: one line per check
//! (`[+]etcd ok`, `[-]etcd failed: reason withheld`), `?verbose` to list them on
//! success, `?exclude=NAME` to skip one, `/readyz/NAME` for a single check, and a 500
//! `readyz check failed` when any fails (the reasons go to the log, not to the
//! unauthenticated prober).
//!
//! The checks: `ping` (the process serves), `etcd` (only on `--etcd-servers`: a read
//! answered within `apiserver::store::ETCD_HEALTHCHECK_TIMEOUT`, kube-apiserver's rule, so a
//! replica whose writes would all fail takes itself out of a load balancer), and
//! `mesos-subscription` (the leader is subscribed; a follower passes, since only the
//! leader talks to Mesos). `/livez` checks none of these: an unreachable store is an
//! outage to wait out, never a reason to restart the process.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::DebugState;

type Check = (&'static str, Result<(), String>);

async fn checks(s: &DebugState) -> Vec<Check> {
    let mut checks: Vec<Check> = vec![("ping", Ok(()))];
    if let Some(store) = s.api.store_readiness().await {
        checks.push(store);
    }
    let follows = s
        .elector
        .as_ref()
        .is_some_and(|e| e.leadership() != crate::leader::Leadership::Leader);
    let mesos = if s.term.mesos().is_subscribed() || follows {
        Ok(())
    } else {
        Err("not subscribed to a Mesos master".to_owned())
    };
    checks.push(("mesos-subscription", mesos));
    checks
}

/// `/readyz`.
pub(super) async fn all(
    State(s): State<DebugState>,
    Query(query): Query<Vec<(String, String)>>,
) -> Response {
    let mut excluded: BTreeSet<String> = query
        .iter()
        .filter(|(k, _)| k == "exclude")
        .map(|(_, v)| v.clone())
        .collect();
    let verbose = query.iter().any(|(k, _)| k == "verbose");
    let mut lines = String::new();
    let mut failed = Vec::new();
    let mut reasons = String::new();
    for (name, result) in checks(&s).await {
        if excluded.remove(name) {
            let _ = writeln!(lines, "[+]{name} excluded: ok");
            continue;
        }
        match result {
            Ok(()) => {
                let _ = writeln!(lines, "[+]{name} ok");
            }
            Err(reason) => {
                // Not in the body: the endpoint is public.
                let _ = writeln!(lines, "[-]{name} failed: reason withheld");
                let _ = writeln!(reasons, "[-]{name} failed: {reason}");
                failed.push(name);
            }
        }
    }
    if !excluded.is_empty() {
        let names: Vec<String> = excluded.iter().map(|n| format!("{n:?}")).collect();
        let _ = writeln!(
            lines,
            "warn: some health checks cannot be excluded: no matches for {}",
            names.join(",")
        );
    }
    if !failed.is_empty() {
        tracing::debug!("{} check failed: readyz\n{reasons}", failed.join(","));
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{lines}readyz check failed\n"),
        );
    }
    if verbose {
        text(StatusCode::OK, format!("{lines}readyz check passed\n"))
    } else {
        text(StatusCode::OK, "ok".to_owned())
    }
}

/// `/readyz/NAME`: one check, `ok` or a 500 with its reason (the path is for those
/// allowed to see it, as in kube-apiserver).
pub(super) async fn one(State(s): State<DebugState>, Path(name): Path<String>) -> Response {
    match checks(&s).await.into_iter().find(|(n, _)| *n == name) {
        Some((_, Ok(()))) => text(StatusCode::OK, "ok".to_owned()),
        Some((_, Err(reason))) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("internal server error: {reason}\n"),
        ),
        None => text(StatusCode::NOT_FOUND, "404 page not found\n".to_owned()),
    }
}

fn text(code: StatusCode, body: String) -> Response {
    (
        code,
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}
