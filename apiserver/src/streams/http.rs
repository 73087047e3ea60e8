//! The routes `pods/{name}/exec`, `pods/{name}/attach` and `pods/{name}/portforward`
//! (GET and POST), as kube-apiserver serves them: the pod and container are resolved
//! and the stream opened before the upgrade, so refusals are plain `Status` answers.
//!
//! A WebSocket upgrade offering `v5.channel.k8s.io` or `v4.channel.k8s.io` (the first
//! of them the client lists) goes to [`super::websocket`]; `Upgrade: SPDY/3.1` goes to
//! `spdy_exec`; port-forward always goes to `portforward`. Authorization is the
//! request's (`get` for GET, `create` for POST on the subresource), and a GET upgrade
//! must also be allowed `create`, as kube-apiserver requires since 1.30.

use std::sync::Arc;

use axum::Router;
use axum::extract::{FromRequestParts as _, Query, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::get;
use k8s_openapi::api::core::v1::Pod;

use super::websocket::{self, Protocol};
use super::{StreamOp, StreamTarget};
use crate::api::Api;
use crate::auth::{Attributes, Rbac, UserInfo};
use crate::error::ApiError;
use crate::http::extract::ApiPath;

/// Adds the stream subresources to `router`.
pub(crate) fn routes(router: Router<Api>) -> Router<Api> {
    router
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}/exec",
            get(exec).post(exec),
        )
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}/attach",
            get(attach).post(attach),
        )
        .route(
            "/api/v1/namespaces/{ns}/pods/{name}/portforward",
            get(portforward).post(portforward),
        )
}

type Query2 = Query<Vec<(String, String)>>;

async fn exec(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    Query(q): Query2,
    req: Request,
) -> Response {
    let command: Vec<String> = values(&q, "command");
    let op = |_: &Pod| {
        if command.is_empty() {
            return Err(ApiError::BadRequest(
                "you must specify at least 1 command".into(),
            ));
        }
        let (stdin, stdout, stderr, tty) = stdio(&q);
        Ok(StreamOp::Exec {
            command: command.clone(),
            stdin,
            stdout,
            stderr,
            tty,
        })
    };
    stream(api, &ns, &name, &q, req, "exec", op).await
}

async fn attach(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    Query(q): Query2,
    req: Request,
) -> Response {
    let (stdin, stdout, stderr, tty) = stdio(&q);
    let op = |_: &Pod| {
        Ok(StreamOp::Attach {
            stdin,
            stdout,
            stderr,
            tty,
        })
    };
    stream(api, &ns, &name, &q, req, "attach", op).await
}

async fn portforward(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    Query(q): Query2,
    req: Request,
) -> Response {
    if let Err(r) = authorize_upgrade(&req, "portforward") {
        return r;
    }
    let pod = match running_pod(&api, &ns, &name) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    super::portforward::serve(api, pod, q, req).await
}

/// The shared path of exec and attach.
async fn stream(
    api: Api,
    ns: &str,
    name: &str,
    q: &[(String, String)],
    req: Request,
    subresource: &str,
    op: impl FnOnce(&Pod) -> Result<StreamOp, ApiError>,
) -> Response {
    if let Err(r) = authorize_upgrade(&req, subresource) {
        return r;
    }
    let result = async {
        let pod = running_pod(&api, ns, name)?;
        let container = resolve_container(&pod, name, q.iter().find(|(k, _)| k == "container"))?;
        let op = op(&pod)?;
        Ok::<_, ApiError>(StreamTarget { pod, container, op })
    }
    .await;
    let target = match result {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    if is_spdy(req.headers()) {
        return super::spdy_exec::serve(api, target, req).await;
    }
    let (mut parts, _body) = req.into_parts();
    let Ok(upgrade) =
        axum::extract::ws::WebSocketUpgrade::from_request_parts(&mut parts, &api).await
    else {
        return ApiError::BadRequest("Upgrade request required".into()).into_response();
    };
    let Some(protocol) = upgrade
        .requested_protocols()
        .filter_map(|p| p.to_str().ok())
        .find_map(Protocol::parse)
    else {
        // Refused, so kubectl falls back to SPDY.
        return ApiError::BadRequest(format!(
            "none of the requested stream protocols is supported (supported: {}, {})",
            Protocol::V5.name(),
            Protocol::V4.name()
        ))
        .into_response();
    };
    let Some(streams) = api.container_streams().cloned() else {
        return ApiError::Unavailable("container streams are not served by this API".into())
            .into_response();
    };
    let channels = match streams.open(target).await {
        Ok(c) => c,
        Err(e) => return ApiError::from(e).into_response(),
    };
    upgrade
        .protocols([protocol.name()])
        .on_upgrade(move |socket| websocket::serve(socket, protocol, channels))
}

fn is_spdy(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("spdy/"))
}

/// kube-apiserver's extra check of a GET upgrade: the user needs `create` on the
/// subresource too (the request itself was authorized as `get`).
fn authorize_upgrade(req: &Request, subresource: &str) -> Result<(), Response> {
    if req.method() != Method::GET {
        return Ok(());
    }
    let Some((user, rbac)) = req.extensions().get::<(UserInfo, Arc<Rbac>)>() else {
        return Ok(());
    };
    let attrs = Attributes::from_request(&Method::POST, req.uri().path(), req.uri().query());
    debug_assert_eq!(attrs.subresource, subresource);
    if rbac.authorize(user, &attrs).allowed {
        Ok(())
    } else {
        Err(crate::auth::status::denied(user, &attrs))
    }
}

/// The pod, if it runs on a node (kube-apiserver's words otherwise).
pub(crate) fn running_pod(api: &Api, ns: &str, name: &str) -> Result<Pod, ApiError> {
    let pod = api.get_pod(ns, name)?;
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    if node.is_none_or(str::is_empty) {
        return Err(ApiError::BadRequest(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if let Some(phase @ ("Succeeded" | "Failed")) = phase {
        return Err(ApiError::BadRequest(format!(
            "cannot exec into a container in a completed pod; current phase is {phase}"
        )));
    }
    Ok(pod)
}

/// The `container` parameter, or the pod's only container.
fn resolve_container(
    pod: &Pod,
    name: &str,
    asked: Option<&(String, String)>,
) -> Result<String, ApiError> {
    let spec = pod.spec.as_ref();
    let all = spec.into_iter().flat_map(|s| {
        s.init_containers
            .iter()
            .flatten()
            .chain(s.containers.iter())
    });
    match asked.map(|(_, v)| v.as_str()).filter(|v| !v.is_empty()) {
        Some(c) if all.clone().any(|k| k.name == c) => Ok(c.to_owned()),
        Some(c) => Err(ApiError::BadRequest(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None => {
            let main: Vec<&str> = spec
                .into_iter()
                .flat_map(|s| s.containers.iter().map(|c| c.name.as_str()))
                .collect();
            match main[..] {
                [one] => Ok(one.to_owned()),
                _ => Err(ApiError::BadRequest(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    main.join(" ")
                ))),
            }
        }
    }
}

fn values(q: &[(String, String)], key: &str) -> Vec<String> {
    q.iter()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .collect()
}

/// `stdin`, `stdout`, `stderr`, `tty` (`true` or `1`).
fn stdio(q: &[(String, String)]) -> (bool, bool, bool, bool) {
    let flag = |key: &str| {
        q.iter()
            .any(|(k, v)| k == key && matches!(v.as_str(), "true" | "1"))
    };
    (flag("stdin"), flag("stdout"), flag("stderr"), flag("tty"))
}
