//! What the scheduler and executor APIs check the same way, in Mesos'
//! words: the method, the `Content-Type`, and a body that decodes into a
//! call.

use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mesos::codec::{Codec, MediaTypeError};
use serde::de::DeserializeOwned;

use crate::master::Shared;

/// A plain-text answer, as Mesos gives its errors.
pub(crate) fn text(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, msg.into()).into_response()
}

/// A request refused before it reached the master: a status and Mesos'
/// message (a small value, made a [`Response`] by the handler).
pub(crate) struct Refused(StatusCode, String);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let Refused(status, msg) = self;
        if status == StatusCode::METHOD_NOT_ALLOWED {
            return (status, [(header::ALLOW, "POST")], msg).into_response();
        }
        text(status, msg)
    }
}

/// 405 with `Allow: POST` for anything but POST.
pub(crate) fn post_only(method: &Method) -> Result<(), Refused> {
    if method == Method::POST {
        return Ok(());
    }
    Err(Refused(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("Expecting one of {{ 'POST' }}, but received '{method}'"),
    ))
}

/// What Mesos' master checks before it reads a call to one of its APIs, in
/// its order: POST only (405), the leader's address for a follower (307 to
/// `path` there), and 503 while it recovers. `Some` is the refusal.
pub(crate) fn master_refusal(cx: &Shared, method: &Method, path: &str) -> Option<Response> {
    if let Err(r) = post_only(method) {
        return Some(r.into_response());
    }
    if let Some(leader) = &cx.redirect_to {
        let location = format!("//{leader}{path}");
        return Some(
            (
                StatusCode::TEMPORARY_REDIRECT,
                [(header::LOCATION, location)],
            )
                .into_response(),
        );
    }
    if cx.lock().recovering {
        return Some(text(
            StatusCode::SERVICE_UNAVAILABLE,
            "Master has not finished recovery",
        ));
    }
    None
}

/// How a call is named in Mesos' messages: what its body parses into
/// (`Call protobuf`) and what is validated (`scheduler::Call`).
pub(crate) struct CallNames {
    pub(crate) parsed: &'static str,
    pub(crate) validated: &'static str,
}

/// The body decoded by its `Content-Type` and validated, with the call's
/// type: 400 without a `Content-Type`, 415 for one that is neither protobuf
/// nor JSON, 400 `Failed to parse body into …` when it does not decode and
/// 400 `Failed to validate …` when `validate` refuses it.
pub(crate) fn decode<C, K>(
    headers: &HeaderMap,
    body: &[u8],
    names: &CallNames,
    validate: impl FnOnce(&C) -> Result<K, String>,
) -> Result<(C, K), Refused>
where
    C: prost::Message + DeserializeOwned + Default,
{
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let codec = match Codec::from_content_type(ct) {
        Ok(c) => c,
        Err(e @ MediaTypeError::Missing) => {
            return Err(Refused(StatusCode::BAD_REQUEST, e.to_string()));
        }
        Err(e) => return Err(Refused(StatusCode::UNSUPPORTED_MEDIA_TYPE, e.to_string())),
    };
    let call: C = codec.decode(body).map_err(|e| {
        let what = names.parsed;
        Refused(
            StatusCode::BAD_REQUEST,
            format!("Failed to parse body into {what}: {e}"),
        )
    })?;
    let kind = validate(&call).map_err(|e| {
        let what = names.validated;
        Refused(
            StatusCode::BAD_REQUEST,
            format!("Failed to validate {what}: {e}"),
        )
    })?;
    Ok((call, kind))
}

/// The codec of the events a client accepts: 406 when it accepts neither.
pub(crate) fn accepted_codec(headers: &HeaderMap) -> Result<Codec, Refused> {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    Codec::from_accept(accept).map_err(|e| Refused(StatusCode::NOT_ACCEPTABLE, e.to_string()))
}
