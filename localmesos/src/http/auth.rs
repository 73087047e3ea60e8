//! Authentication, as Mesos' master and agent do it over HTTP:
//!
//! - [`frameworks`]: with framework credentials configured, every
//!   `/api/v1/scheduler` call needs `Authorization: Basic` with a listed
//!   principal and its secret, else `401 Unauthorized.` with
//!   `WWW-Authenticate: Basic realm="mesos-master-scheduler"`, checked before
//!   anything else (leader, recovery, method). A SUBSCRIBE whose
//!   `FrameworkInfo.principal` differs from the authenticated one is a 400
//!   with Mesos' message; one without a principal gets the authenticated one
//!   filled in. Later calls of a framework with another principal are 400 too.
//! - [`readonly`]: with `authenticate_http_readonly`, the read-only
//!   operator endpoints (`/state`, `/files/*`) need `Authorization: Basic`
//!   with a listed principal too, else `401 Unauthorized.` with the realm
//!   `mesos-master-readonly` or `mesos-agent-readonly`, as Mesos'
//!   `--authenticate_http_readonly` does.
//! - [`readwrite`]: with `authenticate_http_readwrite`, the same for the
//!   read-write operator endpoints, realm `mesos-master-readwrite`.
//! - [`executors`]: with `authenticate_http_executors`, every
//!   `/api/v1/executor` call needs `Authorization: Bearer <token>` with a token
//!   the agent minted (`agent::token`), whose `fid`/`eid`/`cid` claims are the
//!   call's framework, executor and the executor's current container.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use mesos::codec::Codec;

use crate::agent::token;
use crate::master::Shared;

/// Bodies are buffered to read the call; Mesos' calls are small, and the
/// handlers themselves take at most axum's default 2 MB.
const MAX_CALL_BYTES: usize = 4 * 1024 * 1024;

fn unauthorized(challenge: &str) -> Response {
    let mut resp = (StatusCode::UNAUTHORIZED, "401 Unauthorized.").into_response();
    if let Ok(v) = HeaderValue::from_str(challenge) {
        resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    resp
}

/// `(principal, secret)` of an `Authorization: Basic` header. Mesos takes
/// exactly the scheme `Basic` and exactly two `:`-separated parts.
fn basic(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let mut parts = text.split(':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(p), Some(s), None) => Some((p.to_owned(), s.to_owned())),
        _ => None,
    }
}

fn bad_request(message: String) -> Response {
    (StatusCode::BAD_REQUEST, message).into_response()
}

/// Buffers the body; `None` if it is larger than [`MAX_CALL_BYTES`].
async fn buffered(req: Request) -> Option<(axum::http::request::Parts, axum::body::Bytes)> {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_CALL_BYTES).await.ok()?;
    Some((parts, bytes))
}

fn codec_of(headers: &HeaderMap) -> Option<Codec> {
    let ct = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    Codec::from_content_type(Some(ct)).ok()
}

fn mismatch(authenticated: &str, declared: &str) -> String {
    format!(
        "Authenticated principal '{authenticated}' does not match principal '{declared}' set in `FrameworkInfo`"
    )
}

/// The scheduler API's authentication (see the module docs).
pub(crate) async fn frameworks(
    State(cx): State<Arc<Shared>>,
    req: Request,
    next: Next,
) -> Response {
    let Some(credentials) = &cx.security().framework_credentials else {
        return next.run(req).await;
    };
    let principal = match basic(req.headers()) {
        Some((p, s)) if credentials.check(&p, &s) => p,
        _ => return unauthorized(r#"Basic realm="mesos-master-scheduler""#),
    };
    let Some((parts, bytes)) = buffered(req).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "Request body is too large").into_response();
    };
    // A call that does not decode is the handler's to refuse, with its message.
    let decoded = codec_of(&parts.headers).and_then(|codec| {
        codec
            .decode::<mesos::proto::scheduler::Call>(&bytes)
            .ok()
            .map(|call| (codec, call))
    });
    let body = match decoded {
        Some((codec, mut call)) => {
            if let Some(info) = call
                .subscribe
                .as_mut()
                .and_then(|s| s.framework_info.as_mut())
            {
                match &info.principal {
                    Some(p) if *p != principal => {
                        return bad_request(format!(
                            "Failed to validate scheduler::Call: {}",
                            mismatch(&principal, p)
                        ));
                    }
                    Some(_) => Body::from(bytes),
                    None => {
                        info.principal = Some(principal);
                        Body::from(codec.encode(&call))
                    }
                }
            } else {
                let fw = call.framework_id.as_ref().map(|f| f.value.as_str());
                let declared = fw.and_then(|fw| {
                    cx.lock()
                        .frameworks
                        .get(fw)
                        .and_then(|f| f.info.principal.clone())
                });
                if let Some(p) = declared
                    && p != principal
                {
                    return bad_request(mismatch(&principal, &p));
                }
                Body::from(bytes)
            }
        }
        None => Body::from(bytes),
    };
    let mut req = Request::from_parts(parts, body);
    req.headers_mut().remove(header::CONTENT_LENGTH);
    next.run(req).await
}

/// The realm of the master's read-only endpoints.
pub(crate) const MASTER_READONLY_REALM: &str = "mesos-master-readonly";
/// The realm of an agent's read-only endpoints.
pub(crate) const AGENT_READONLY_REALM: &str = "mesos-agent-readonly";

/// The read-only operator endpoints' authentication (see the module docs).
pub(crate) async fn readonly(
    State((cx, realm)): State<(Arc<Shared>, &'static str)>,
    req: Request,
    next: Next,
) -> Response {
    let on = cx.security().authenticate_http_readonly;
    operator(&cx, on, realm, req, next).await
}

/// The realm of the master's read-write endpoints.
pub(crate) const MASTER_READWRITE_REALM: &str = "mesos-master-readwrite";

/// The read-write operator endpoints' authentication (see the module docs):
/// Mesos' `--authenticate_http_readwrite`, realm `mesos-master-readwrite`.
pub(crate) async fn readwrite(State(cx): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let on = cx.security().authenticate_http_readwrite;
    operator(&cx, on, MASTER_READWRITE_REALM, req, next).await
}

/// Basic authentication against the credentials when `on`.
async fn operator(cx: &Shared, on: bool, realm: &str, req: Request, next: Next) -> Response {
    let (true, Some(credentials)) = (on, cx.security().framework_credentials.as_ref()) else {
        return next.run(req).await;
    };
    match basic(req.headers()) {
        Some((p, s)) if credentials.check(&p, &s) => next.run(req).await,
        _ => unauthorized(&format!(r#"Basic realm="{realm}""#)),
    }
}

const EXECUTOR_REALM: &str = "mesos-agent-executor";

/// The executor API's authentication on agent `agent_id` (see the module docs).
pub(crate) async fn executors(
    State((cx, agent_id)): State<(Arc<Shared>, String)>,
    req: Request,
    next: Next,
) -> Response {
    let security = cx.security();
    let (true, Some(key)) = (
        security.authenticate_http_executors,
        security.jwt_secret_key.as_ref(),
    ) else {
        return next.run(req).await;
    };
    let bearer = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_owned);
    let Some(bearer) = bearer else {
        return unauthorized(&format!(
            r#"Basic realm="{EXECUTOR_REALM}",Bearer realm="{EXECUTOR_REALM}""#
        ));
    };
    let claims = match token::verify(key, bearer.trim()) {
        Ok(c) => c,
        Err(e) => {
            return unauthorized(&format!(
                r#"Bearer realm="{EXECUTOR_REALM}",error="invalid_token",error_description="{e}""#
            ));
        }
    };
    let Some((parts, bytes)) = buffered(req).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "Request body is too large").into_response();
    };
    if let Some(call) =
        codec_of(&parts.headers).and_then(|c| c.decode::<mesos::proto::executor::Call>(&bytes).ok())
    {
        let fid = call.framework_id.map(|f| f.value).unwrap_or_default();
        let eid = call.executor_id.map(|e| e.value).unwrap_or_default();
        let key = crate::agent::ExecutorRef::new(&agent_id, &fid, &eid).key();
        let cid = cx
            .lock()
            .agents
            .get(&agent_id)
            .and_then(|a| a.executors.get(&key))
            .map(|e| e.container_id.clone());
        let shown = format!("fid={},eid={},cid={}", claims.fid, claims.eid, claims.cid);
        let wrong = if claims.fid != fid {
            Some(("fid", "framework ID", fid))
        } else if claims.eid != eid {
            Some(("eid", "executor ID", eid))
        } else if cid.as_deref().is_some_and(|c| c != claims.cid) {
            Some(("cid", "container ID", cid.unwrap_or_default()))
        } else {
            None
        };
        if let Some((claim, what, value)) = wrong {
            return (
                StatusCode::FORBIDDEN,
                format!(
                    "Authenticated principal '{shown}' does not contain an '{claim}' claim with the {what} '{value}' of this call"
                ),
            )
                .into_response();
        }
    }
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.headers_mut().remove(header::CONTENT_LENGTH);
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_split_into_exactly_two_parts() {
        let header = |text: &str| {
            let mut h = HeaderMap::new();
            let v = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(text)
            );
            h.insert(
                header::AUTHORIZATION,
                HeaderValue::from_str(&v).unwrap_or(HeaderValue::from_static("")),
            );
            h
        };
        assert_eq!(
            basic(&header("mesopod:s3cret")),
            Some(("mesopod".into(), "s3cret".into()))
        );
        assert_eq!(basic(&header("mesopod:s3:cret")), None);
        assert_eq!(basic(&header("mesopod")), None);
        assert_eq!(basic(&HeaderMap::new()), None);
    }
}
