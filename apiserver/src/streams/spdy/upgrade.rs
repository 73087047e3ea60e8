//! The HTTP side of a SPDY stream: protocol negotiation as Kubernetes'
//! `httpstream.Handshake` does it (`X-Stream-Protocol-Version`, one header per
//! offered version, the client's order wins), the `101 Switching Protocols` of
//! `spdy.NewResponseUpgrader`, and the WebSocket upgrade of the port-forward tunnel.

use std::future::Future;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, Request, StatusCode, header};
use hyper_util::rt::TokioIo;

use super::Connection;
use super::tunnel::{self, PORTFORWARD_TUNNEL};

/// Kubernetes' protocol negotiation header.
pub(crate) const PROTOCOL_VERSION: &str = "X-Stream-Protocol-Version";
/// The versions a server accepts, sent with a 403.
pub(crate) const ACCEPTED_VERSIONS: &str = "X-Accepted-Stream-Protocol-Versions";
/// The `Upgrade` token of SPDY/3.1.
const SPDY: &str = "SPDY/3.1";

fn plain(code: StatusCode, message: String) -> Response {
    // Go's http.Error: text with a newline.
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{message}\n"),
    )
        .into_response()
}

fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.to_str()
            .map(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
            .unwrap_or(false)
    })
}

/// Whether `headers` ask for SPDY/3.1.
pub(crate) fn is_spdy(headers: &HeaderMap) -> bool {
    has_token(headers, header::UPGRADE, SPDY)
}

/// Whether `headers` ask for the SPDY-in-WebSocket tunnel.
pub(crate) fn is_tunnel(headers: &HeaderMap) -> bool {
    has_token(headers, header::UPGRADE, "websocket")
        && has_token(headers, header::SEC_WEBSOCKET_PROTOCOL, PORTFORWARD_TUNNEL)
}

/// The protocol both sides speak, or the answer kubelet gives when there is none.
// The error is the HTTP answer itself, built once per upgrade request and
// returned straight to the client: boxing it would only add an allocation.
#[allow(clippy::result_large_err)]
pub(crate) fn negotiate(headers: &HeaderMap, ours: &[&'static str]) -> Result<String, Response> {
    let theirs: Vec<&str> = headers
        .get_all(PROTOCOL_VERSION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    if theirs.is_empty() {
        return Err(plain(
            StatusCode::BAD_REQUEST,
            format!("unable to upgrade: {PROTOCOL_VERSION} is required"),
        ));
    }
    if let Some(p) = theirs.iter().find(|p| ours.contains(p)) {
        return Ok((*p).to_owned());
    }
    let mut response = plain(
        StatusCode::FORBIDDEN,
        format!(
            "unable to upgrade: unable to negotiate protocol: client supports {theirs:?}, server accepts {ours:?}"
        ),
    );
    for p in ours {
        response
            .headers_mut()
            .append(ACCEPTED_VERSIONS, HeaderValue::from_static(p));
    }
    Err(response)
}

/// Answers `req` with `101 Switching Protocols` to SPDY/3.1 (speaking
/// `protocol`) and runs `serve` on the connection once hyper hands it over.
pub(crate) fn spdy<F, Fut>(req: &mut Request<Body>, protocol: &str, serve: F) -> Response
where
    F: FnOnce(Connection) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    if !has_token(req.headers(), header::CONNECTION, "upgrade") {
        return plain(
            StatusCode::BAD_REQUEST,
            "unable to upgrade: missing upgrade headers in request".into(),
        );
    }
    let upgrade = hyper::upgrade::on(&mut *req);
    tokio::spawn(async move {
        match upgrade.await {
            Ok(io) => match Connection::serve(TokioIo::new(io)) {
                Ok(conn) => serve(conn).await,
                Err(e) => tracing::warn!(error = %e, "SPDY connection not started"),
            },
            Err(e) => tracing::debug!(error = %e, "SPDY upgrade failed"),
        }
    });
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = response.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static(SPDY));
    if let Ok(v) = HeaderValue::from_str(protocol) {
        h.insert(PROTOCOL_VERSION, v);
    }
    response
}

/// Which of `ours` a WebSocket request asks for: `Some(None)` when it names no
/// subprotocol at all, `None` when it is no WebSocket or wants only others.
pub(crate) fn websocket_protocol(
    headers: &HeaderMap,
    ours: &[&'static str],
) -> Option<Option<&'static str>> {
    if !has_token(headers, header::UPGRADE, "websocket") {
        return None;
    }
    let offered: Vec<&str> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if offered.is_empty() {
        return Some(None);
    }
    offered
        .iter()
        .find_map(|p| ours.iter().find(|o| o == &p))
        .map(|p| Some(*p))
}

/// Answers a WebSocket `req` asking for `SPDY/3.1+portforward.k8s.io` with
/// `101`, and runs `serve` on the SPDY connection inside it.
pub(crate) fn tunnelled<F, Fut>(req: &mut Request<Body>, serve: F) -> Response
where
    F: FnOnce(Connection) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    websocket(req, Some(PORTFORWARD_TUNNEL), move |ws| async move {
        match Connection::serve(tunnel::tunnel(ws)) {
            Ok(conn) => serve(conn).await,
            Err(e) => tracing::warn!(error = %e, "SPDY connection not started"),
        }
    })
}

/// Answers a WebSocket `req` with `101` (speaking `protocol`) and runs `serve`
/// on the raw upgraded connection.
pub(crate) fn websocket<F, Fut>(
    req: &mut Request<Body>,
    protocol: Option<&'static str>,
    serve: F,
) -> Response
where
    F: FnOnce(TokioIo<hyper::upgrade::Upgraded>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let Some(key) = req
        .headers()
        .get(header::SEC_WEBSOCKET_KEY)
        .and_then(|k| k.to_str().ok())
        .map(tunnel::accept_key)
    else {
        return plain(StatusCode::BAD_REQUEST, "missing Sec-WebSocket-Key".into());
    };
    let upgrade = hyper::upgrade::on(&mut *req);
    tokio::spawn(async move {
        match upgrade.await {
            Ok(io) => serve(TokioIo::new(io)).await,
            Err(e) => tracing::debug!(error = %e, "WebSocket upgrade failed"),
        }
    });
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let h = response.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Some(p) = protocol {
        h.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(p));
    }
    if let Ok(v) = HeaderValue::from_str(&key) {
        h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offered(versions: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in versions {
            h.append(PROTOCOL_VERSION, HeaderValue::from_str(v).expect("value"));
        }
        h
    }

    #[test]
    fn the_clients_first_choice_we_speak_wins() {
        let ours = ["v4.channel.k8s.io", "v3.channel.k8s.io"];
        let h = offered(&[
            "v5.channel.k8s.io",
            "v4.channel.k8s.io",
            "v3.channel.k8s.io",
        ]);
        assert_eq!(
            negotiate(&h, &ours).ok().as_deref(),
            Some("v4.channel.k8s.io")
        );
    }

    #[test]
    fn no_common_protocol_is_403_with_ours_listed() {
        let err = negotiate(&offered(&["v9.channel.k8s.io"]), &["portforward.k8s.io"])
            .expect_err("no match");
        assert_eq!(err.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            err.headers().get(ACCEPTED_VERSIONS).map(|v| v.as_bytes()),
            Some(&b"portforward.k8s.io"[..])
        );
        let none = negotiate(&HeaderMap::new(), &["portforward.k8s.io"]).expect_err("none");
        assert_eq!(none.status(), StatusCode::BAD_REQUEST);
    }
}
