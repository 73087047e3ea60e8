//! Per-request limits, as kube-apiserver's filters apply them: the in-flight
//! budgets (429 with `Retry-After`), the request timeout (504) and a cap on
//! each client's long-running requests (watches, followed logs).
//!
//! A request with a body is received whole first, within
//! [`Limits::body_read_timeout`] and before it takes a seat, so a client that
//! sends slowly holds a connection but never a seat another request needs.
//! Seats are then shared fairly between flows ([`super::fair`]): a request
//! that finds its budget full waits in its flow's queue (at most
//! [`Limits::queue_length_limit`] long, at most a quarter of
//! `--request-timeout`, as APF's wait limit) and gets 429 only when its
//! flow's queue is full or its wait runs out.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::Limits;
use super::fair::FairQueue;
use connlimits::GuardedBody;

/// kube-apiserver's 429 text (plain text, not a Status), `http.Error`'s newline included.
pub const TOO_MANY_REQUESTS: &str = "Too many requests, please try again later.\n";

/// kube-apiserver's 504 message for a request past `--request-timeout`.
pub const TIMEOUT_MESSAGE: &str = "Timeout: request did not complete within the allotted timeout";

/// The default [`Limits::client_key`]: the authenticated user
/// ([`crate::auth::RequestUser`], so a user's watches count together from
/// every address), else the client's address ([`peer_address`]).
pub fn user_or_peer(req: &Request) -> String {
    match req.extensions().get::<crate::auth::RequestUser>() {
        Some(crate::auth::RequestUser(user)) => format!("user:{}", user.name),
        None => format!("addr:{}", peer_address(req)),
    }
}

/// The default [`Limits::flow_distinguisher`]: the authenticated user, as
/// APF's `ByUser` distinguishes flows; without one (plain HTTP, where nobody
/// is authenticated), the connection, so each client (a kubectl run keeps
/// one connection) queues apart from a flood on other connections.
pub fn user_or_connection(req: &Request) -> String {
    match req.extensions().get::<crate::auth::RequestUser>() {
        Some(crate::auth::RequestUser(user)) => format!("user:{}", user.name),
        None => match req.extensions().get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(peer)) => format!("conn:{peer}"),
            None => "conn:unknown".to_owned(),
        },
    }
}

/// The default [`Limits::exempt`]: kube-apiserver's, members of
/// `system:masters` skip the in-flight budgets.
pub fn is_system_master(req: &Request) -> bool {
    req.extensions()
        .get::<crate::auth::RequestUser>()
        .is_some_and(|crate::auth::RequestUser(u)| {
            u.groups.iter().any(|g| g == crate::auth::user::MASTERS)
        })
}

/// The client's IP address (the port changes with every connection), or
/// `unknown` when the server did not say.
pub fn peer_address(req: &Request) -> String {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or_else(|| "unknown".to_owned(), |ConnectInfo(a)| a.ip().to_string())
}

/// What a request costs: kube-apiserver counts long-running requests apart,
/// and mutating ones in their own budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A watch or a followed log: not in the in-flight budgets, not timed out,
    /// counted per client.
    LongRunning,
    /// POST, PUT, PATCH, DELETE.
    Mutating,
    /// Everything else.
    ReadOnly,
    /// Health probes (`/healthz`, `/readyz`, `/livez`): never refused, as
    /// kube-apiserver's `probes` flow schema exempts them.
    Exempt,
}

/// The class of a request, from its method, path and query.
pub fn classify(method: &Method, path: &str, query: Option<&str>) -> Class {
    let probe = ["/healthz", "/readyz", "/livez"]
        .iter()
        .any(|p| path == *p || path.strip_prefix(p).is_some_and(|r| r.starts_with('/')));
    if probe {
        return Class::Exempt;
    }
    let flag = |name: &str| {
        query.is_some_and(|q| {
            q.split('&').any(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                k == name && matches!(v, "true" | "1")
            })
        })
    };
    // `/api/v1/watch/...` or `/apis/<group>/<version>/watch/...`; a namespace
    // or object named `watch` elsewhere in the path is not a watch.
    let mut segments = path.trim_start_matches('/').split('/');
    let watch_path = match segments.next() {
        Some("api") => segments.nth(1) == Some("watch"),
        Some("apis") => segments.nth(2) == Some("watch"),
        _ => false,
    };
    if watch_path || flag("watch") || (path.ends_with("/log") && flag("follow")) {
        return Class::LongRunning;
    }
    match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => Class::ReadOnly,
        _ => Class::Mutating,
    }
}

struct Budgets {
    limits: Limits,
    read_only: Option<Arc<FairQueue>>,
    mutating: Option<Arc<FairQueue>>,
    watches: Arc<Mutex<HashMap<String, usize>>>,
    /// [`Limits::max_queued_body_bytes`] in KiB permits.
    queued_bodies: Option<Arc<Semaphore>>,
}

/// Permits of the body budget are KiB, so the largest budget fits a
/// semaphore's count and a body's share is rounded up.
const BODY_BUDGET_UNIT: usize = 1024;

/// One long-running request of a client; gives its place back when the
/// response body ends (or the client goes away).
struct WatchSlot {
    key: String,
    watches: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut map = self.watches.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.key);
            }
        }
    }
}

/// kube-apiserver's APF waits at most a quarter of `--request-timeout`
/// for a seat.
pub fn queue_wait_limit(request_timeout: Duration) -> Duration {
    request_timeout / 4
}

/// The two priority levels' seats and queues of one [`layer`], for whoever
/// wants to see them (metrics, tests).
#[derive(Debug, Clone)]
pub struct PriorityLevels {
    /// Reads' seats (`--max-requests-inflight`); `None` when unlimited.
    pub read_only: Option<Arc<FairQueue>>,
    /// Writes' seats (`--max-mutating-requests-inflight`); `None` when unlimited.
    pub mutating: Option<Arc<FairQueue>>,
}

/// `router` with `limits`' per-request limits in front of every route.
pub fn layer(router: Router, limits: &Limits) -> Router {
    layer_with_levels(router, limits).0
}

/// [`layer`], and the priority levels it shares its seats through.
pub fn layer_with_levels(router: Router, limits: &Limits) -> (Router, PriorityLevels) {
    let level =
        |seats: usize| (seats > 0).then(|| FairQueue::new(seats, limits.queue_length_limit));
    let levels = PriorityLevels {
        read_only: level(limits.max_requests_inflight),
        mutating: level(limits.max_mutating_requests_inflight),
    };
    let budgets = Arc::new(Budgets {
        limits: limits.clone(),
        read_only: levels.read_only.clone(),
        mutating: levels.mutating.clone(),
        watches: Arc::default(),
        queued_bodies: (limits.max_queued_body_bytes > 0).then(|| {
            Arc::new(Semaphore::new(
                (limits.max_queued_body_bytes / BODY_BUDGET_UNIT).clamp(1, Semaphore::MAX_PERMITS),
            ))
        }),
    });
    let router = router.layer(axum::middleware::from_fn_with_state(budgets, limit));
    (router, levels)
}

/// kube-apiserver's 429: plain text and `Retry-After: 1`.
pub fn too_many_requests() -> Response {
    let mut resp = (StatusCode::TOO_MANY_REQUESTS, TOO_MANY_REQUESTS).into_response();
    let h = resp.headers_mut();
    h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    resp
}

fn timeout() -> Response {
    let status = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": TIMEOUT_MESSAGE,
        "reason": "Timeout", "details": {}, "code": 504,
    });
    (StatusCode::GATEWAY_TIMEOUT, axum::Json(status)).into_response()
}

/// `req` with its body received whole, by `deadline`; the 504 of a timed-out
/// request if it is not, the 413 (or 400) the handlers would give if the
/// body is too large (or breaks off). A request without a body (upgrades
/// among them) passes untouched.
async fn receive_body(req: Request, deadline: Instant) -> Result<Request, Response> {
    use axum::body::HttpBody as _;
    if req.body().is_end_stream() || req.body().size_hint().upper() == Some(0) {
        return Ok(req);
    }
    let (parts, body) = req.into_parts();
    match tokio::time::timeout_at(
        deadline,
        crate::http::extract::read_body(&parts.headers, body),
    )
    .await
    {
        Ok(Ok(bytes)) => Ok(Request::from_parts(parts, Body::from(bytes))),
        Ok(Err(e)) => Err(e.into_response()),
        Err(_) => {
            tracing::debug!(path = %parts.uri.path(), "request body not received in time");
            Err(timeout())
        }
    }
}

/// A share of [`Limits::max_queued_body_bytes`] for `req`'s received body,
/// held until it is answered; `Err` when the budget has no room.
/// Exempt users, like for seats, take none.
fn hold_body(b: &Budgets, req: &Request, exempt: bool) -> Result<Option<OwnedSemaphorePermit>, ()> {
    use axum::body::HttpBody as _;
    let Some(budget) = b.queued_bodies.as_ref().filter(|_| !exempt) else {
        return Ok(None);
    };
    let bytes = usize::try_from(req.body().size_hint().exact().unwrap_or(0)).unwrap_or(usize::MAX);
    if bytes == 0 {
        return Ok(None);
    }
    let units = u32::try_from(bytes.div_ceil(BODY_BUDGET_UNIT)).unwrap_or(u32::MAX);
    budget
        .clone()
        .try_acquire_many_owned(units)
        .map(Some)
        .map_err(|_| ())
}

/// `d` after `start`; a duration too long to add (a flag of centuries) is
/// a year, as good as never for one request.
fn later(start: Instant, d: Duration) -> Instant {
    start
        .checked_add(d)
        .unwrap_or_else(|| start + Duration::from_secs(365 * 24 * 3600))
}

async fn limit(State(b): State<Arc<Budgets>>, req: Request, next: Next) -> Response {
    let class = classify(req.method(), req.uri().path(), req.uri().query());
    // Exempt users skip the budgets, not the request timeout.
    let exempt = matches!(class, Class::Mutating | Class::ReadOnly) && (b.limits.exempt)(&req);
    match class {
        Class::Exempt => next.run(req).await,
        Class::LongRunning => {
            let key = (b.limits.client_key)(&req);
            {
                let mut map = b.watches.lock().unwrap_or_else(|p| p.into_inner());
                let n = map.entry(key.clone()).or_insert(0);
                if *n >= b.limits.max_watches_per_user {
                    tracing::debug!(client = %key, "too many watches");
                    return too_many_requests();
                }
                *n += 1;
            }
            let slot = WatchSlot {
                key,
                watches: b.watches.clone(),
            };
            let resp = next.run(req).await;
            resp.map(|body| Body::new(GuardedBody::new(body, slot)))
        }
        Class::Mutating | Class::ReadOnly => {
            // As kube-apiserver's timeout filter, outermost: receiving,
            // waiting and serving all count against `--request-timeout`.
            let started = Instant::now();
            let deadline = later(started, b.limits.request_timeout);
            let body_deadline = deadline.min(later(started, b.limits.body_read_timeout));
            let req = match receive_body(req, body_deadline).await {
                Ok(req) => req,
                Err(resp) => return resp,
            };
            let Ok(_body_bytes) = hold_body(&b, &req, exempt) else {
                tracing::debug!("the bodies held in memory are at their bound");
                return too_many_requests();
            };
            let budget = if exempt {
                None
            } else if class == Class::Mutating {
                b.mutating.as_ref()
            } else {
                b.read_only.as_ref()
            };
            let _seat = match budget {
                None => None,
                Some(level) => {
                    let flow = (b.limits.flow_distinguisher)(&req);
                    let wait = queue_wait_limit(b.limits.request_timeout)
                        .min(deadline.saturating_duration_since(Instant::now()));
                    match level.acquire(&flow, wait).await {
                        Ok(seat) => Some(seat),
                        Err(why) => {
                            tracing::debug!(%flow, ?why, "request refused");
                            return too_many_requests();
                        }
                    }
                }
            };
            match tokio::time::timeout_at(deadline, next.run(req)).await {
                Ok(resp) => resp,
                Err(_) => timeout(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flow_is_the_authenticated_user_else_the_connection() {
        let peer = |port| ConnectInfo(SocketAddr::from(([127, 0, 0, 1], port)));
        let mut a = Request::new(Body::empty());
        a.extensions_mut().insert(peer(40000));
        let mut b = Request::new(Body::empty());
        b.extensions_mut().insert(peer(40001));
        assert_eq!(user_or_connection(&a), "conn:127.0.0.1:40000");
        assert_ne!(
            user_or_connection(&a),
            user_or_connection(&b),
            "two loopback connections are two flows"
        );
        let alice = crate::auth::RequestUser(crate::auth::user::UserInfo {
            name: "alice".into(),
            ..Default::default()
        });
        a.extensions_mut().insert(alice.clone());
        b.extensions_mut().insert(alice);
        assert_eq!(user_or_connection(&a), "user:alice");
        assert_eq!(user_or_connection(&a), user_or_connection(&b));
    }

    #[tokio::test]
    async fn bodies_waiting_to_be_answered_are_bounded_in_bytes() {
        use tower::ServiceExt as _;
        let (release, released) = tokio::sync::watch::channel(false);
        let (entered_tx, mut entered) = tokio::sync::mpsc::unbounded_channel::<usize>();
        let router = Router::new().route(
            "/api/v1/namespaces/a/configmaps",
            axum::routing::post(move |body: axum::body::Bytes| {
                let mut released = released.clone();
                let entered = entered_tx.clone();
                async move {
                    let _ = entered.send(body.len());
                    let _ = released.wait_for(|r| *r).await;
                    body.len().to_string()
                }
            }),
        );
        let limits = Limits {
            max_queued_body_bytes: 3 * BODY_BUDGET_UNIT,
            ..Limits::default()
        };
        let router = layer(router, &limits);
        let post = |bytes: usize| {
            Request::post("/api/v1/namespaces/a/configmaps")
                .header(header::CONTENT_LENGTH, bytes)
                .body(Body::from(vec![b'x'; bytes]))
                .unwrap_or_default()
        };
        // The first request's 2 KiB are held while it is served.
        let first = tokio::spawn(router.clone().oneshot(post(2 * BODY_BUDGET_UNIT)));
        assert_eq!(entered.recv().await, Some(2 * BODY_BUDGET_UNIT));
        let refused = router.clone().oneshot(post(2 * BODY_BUDGET_UNIT)).await;
        let refused = refused.unwrap_or_else(|e| match e {});
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        // Once it is answered, its share is back: the whole budget fits.
        release.send_replace(true);
        let served = first.await.ok().and_then(Result::ok).map(|r| r.status());
        assert_eq!(served, Some(StatusCode::OK));
        let again = router.oneshot(post(3 * BODY_BUDGET_UNIT)).await;
        assert_eq!(again.map(|r| r.status()).ok(), Some(StatusCode::OK));
        assert!(entered.try_recv().is_ok_and(|n| n == 3 * BODY_BUDGET_UNIT));
    }

    #[test]
    fn watches_and_followed_logs_are_long_running_and_writes_mutating() {
        let get = Method::GET;
        assert_eq!(
            classify(&get, "/api/v1/pods", Some("watch=true&resourceVersion=1")),
            Class::LongRunning
        );
        assert_eq!(
            classify(&get, "/api/v1/watch/namespaces/a/pods", None),
            Class::LongRunning
        );
        assert_eq!(
            classify(&get, "/api/v1/namespaces/watch/pods/watch", None),
            Class::ReadOnly
        );
        assert_eq!(
            classify(&get, "/apis/rbac.authorization.k8s.io/v1/watch/roles", None),
            Class::LongRunning
        );
        assert_eq!(
            classify(&get, "/api/v1/namespaces/a/pods/p/log", Some("follow=true")),
            Class::LongRunning
        );
        assert_eq!(
            classify(&get, "/api/v1/namespaces/a/pods/p/log", None),
            Class::ReadOnly
        );
        assert_eq!(
            classify(&get, "/api/v1/pods", Some("watch=false")),
            Class::ReadOnly
        );
        assert_eq!(
            classify(&Method::PATCH, "/api/v1/namespaces/a/pods/p", None),
            Class::Mutating
        );
        assert_eq!(classify(&get, "/healthz", None), Class::Exempt);
        assert_eq!(classify(&get, "/readyz/ping", None), Class::Exempt);
        assert_eq!(classify(&get, "/healthzx", None), Class::ReadOnly);
        assert_eq!(
            classify(&Method::DELETE, "/api/v1/namespaces/a/pods/p", None),
            Class::Mutating
        );
    }
}
