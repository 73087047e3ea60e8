//! `POST /api/v1/scheduler`, with the status codes of Mesos' master, in the
//! order Mesos checks them:
//!
//! 1. not POST → 405 (with `Allow: POST`);
//! 2. not the leader ([`crate::Config::redirect_to`]) → 307 to the leader;
//!    recovering → 503;
//! 3. no `Content-Type` → 400, another type → 415;
//! 4. undecodable or invalid call → 400;
//! 5. SUBSCRIBE: `Accept` allows neither encoding → 406; a `Mesos-Stream-Id`
//!    header → 400; otherwise 200 and the event stream;
//! 6. other calls: unknown framework → 400, not subscribed → 403, missing
//!    or wrong `Mesos-Stream-Id` → 400; applied → 202.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State as AxState;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use mesos::codec::Codec;
use mesos::proto::scheduler::{Call, Event, call::Type, event};

use super::request::{self, CallNames, text};
use super::stream::{OnDrop, event_body};
use crate::master::Shared;
use crate::master::calls::{self, Outcome};
use crate::master::subscribe::{self, Subscribed};
use crate::validation;

/// The header carrying a subscription's id.
pub(crate) const STREAM_ID: &str = "Mesos-Stream-Id";

pub(crate) async fn scheduler(
    AxState(cx): AxState<Arc<Shared>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = request::master_refusal(&cx, &method, "/api/v1/scheduler") {
        return refused;
    }
    let names = CallNames {
        parsed: "Call protobuf",
        validated: "scheduler::Call",
    };
    let (call, kind) = match request::decode(&headers, &body, &names, validation::scheduler_call) {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    let stream_id = headers.get(STREAM_ID).and_then(|v| v.to_str().ok());
    // Mesos checks `Accept` for every call, before looking at the type.
    let out = match request::accepted_codec(&headers) {
        Ok(c) => c,
        Err(r) => return r.into_response(),
    };
    if kind == Type::Subscribe {
        if stream_id.is_some() {
            return text(
                StatusCode::BAD_REQUEST,
                "Subscribe calls should not include the 'Mesos-Stream-Id' header",
            );
        }
        return subscribe_response(&cx, out, call);
    }
    if kind == Type::Accept {
        // A slow master, when a test asks for one (`LocalMesos::hold_accepts`).
        let mut gate = cx.accept_gate.subscribe();
        let _ = gate.wait_for(|open| *open).await;
    }
    let fw_id = call.framework_id.clone().unwrap_or_default().value;
    let mut st = cx.lock();
    let Some(fw) = st.frameworks.get(&fw_id) else {
        return text(StatusCode::BAD_REQUEST, "Framework cannot be found");
    };
    let Some(conn) = &fw.conn else {
        return text(StatusCode::FORBIDDEN, "Framework is not subscribed");
    };
    let Some(given) = stream_id else {
        return text(
            StatusCode::BAD_REQUEST,
            "All non-subscribe calls should include the 'Mesos-Stream-Id' header",
        );
    };
    if given != conn.stream_id {
        return text(
            StatusCode::BAD_REQUEST,
            format!(
                "The stream ID '{given}' included in this request didn't match the stream ID currently associated with framework ID {fw_id}"
            ),
        );
    }
    match calls::dispatch(&cx, &mut st, &fw_id, kind, call) {
        Outcome::Accepted => StatusCode::ACCEPTED.into_response(),
        Outcome::Ok => StatusCode::OK.into_response(),
        Outcome::NotImplemented => text(
            StatusCode::NOT_IMPLEMENTED,
            "Call not implemented by localmesos",
        ),
    }
}

fn subscribe_response(cx: &Arc<Shared>, codec: Codec, call: Call) -> Response {
    let sub = call.subscribe.unwrap_or_default();
    let outcome = {
        let mut st = cx.lock();
        subscribe::subscribe(cx, &mut st, sub)
    };
    let refused = matches!(outcome, Subscribed::Refused(_));
    let heartbeat = Event {
        r#type: Some(event::Type::Heartbeat as i32),
        ..Default::default()
    };
    let (rx, stream_id, guard) = match outcome {
        Subscribed::Refused(rx) => (
            rx,
            Some(uuid::Uuid::new_v4().to_string()),
            OnDrop::new(|| {}),
        ),
        Subscribed::Stream {
            stream_id,
            rx,
            framework_id,
            generation,
        } => {
            let weak = Arc::downgrade(cx);
            let guard = OnDrop::new(move || {
                if let Some(cx) = weak.upgrade() {
                    let mut st = cx.lock();
                    subscribe::stream_closed(&cx, &mut st, &framework_id, generation);
                }
            });
            (rx, Some(stream_id), guard)
        }
    };
    let hb = (!refused).then(|| (cx.timing.heartbeat_interval, heartbeat));
    let body = event_body(rx, codec, hb, guard);
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(codec.content_type()),
    );
    if let Some(id) = stream_id
        && let Ok(v) = HeaderValue::from_str(&id)
    {
        h.insert(STREAM_ID, v);
    }
    resp
}
