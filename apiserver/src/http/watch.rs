//! Watch over HTTP: one JSON event per line, in object or Table form, with bookmarks and
//! a 410 Expired ERROR event for a resourceVersion older than the history.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::extract::{Format, Params, negotiate};
use super::served::Served;
use crate::api::{Api, EventKind};
use crate::error::ApiError;
use crate::selectors::Selectors;
use crate::store::object_rv;
use crate::table::{self, Include};

/// How long a watch runs when the client names no `timeoutSeconds`: Kubernetes' default
/// request timeout, after which clients re-establish the watch from their last version.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

/// The longest watch a client may ask for; longer asks are cut to this (and an absurd
/// `timeoutSeconds` cannot overflow the deadline).
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// How often a watch that allows bookmarks gets one, so a client that restarts resumes
/// close to where it was even when nothing it watches changed (Kubernetes sends roughly
/// one a minute).
const BOOKMARK_EVERY: Duration = Duration::from_secs(60);

/// Encoded events a slow client may have queued before the watch waits for it.
const QUEUE: usize = 64;

struct Encoder {
    served: Served,
    format: Format,
    include: Include,
    first: bool,
    api: Api,
}

impl Encoder {
    fn event(&mut self, kind: &str, stored: &Arc<Value>) -> Bytes {
        let obj = &self.served.shared(stored);
        let object = match self.format {
            Format::Table => {
                let rv = object_rv(obj);
                let t = table::table(
                    self.served.resource,
                    std::slice::from_ref(obj),
                    rv,
                    self.api.now(),
                    self.include,
                    self.first,
                );
                self.first = false;
                t
            }
            Format::Metadata => table::partial_metadata(obj),
            Format::Object => obj.as_ref().clone(),
        };
        line(&json!({"type": kind, "object": object}))
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(
            &json!({"type": "BOOKMARK", "object": {"kind": self.served.resource.kind(), "apiVersion": self.served.api_version(), "metadata": meta}}),
        )
    }
}

fn line(v: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(v).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

fn error_event(e: &ApiError) -> Bytes {
    line(&json!({"type": "ERROR", "object": e.to_status()}))
}

/// Starts a watch response.
pub(crate) fn respond(
    api: Api,
    served: Served,
    ns: Option<String>,
    params: &Params,
    headers: &HeaderMap,
    sel: Selectors,
) -> Result<Response, ApiError> {
    let requested = match params.get("resourceVersion") {
        None | Some("0") => None,
        Some(s) => Some(
            s.parse::<u64>()
                .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {s:?}")))?,
        ),
    };
    // The initial-events-end bookmark belongs to the streaming-list protocol, where the
    // client asks for initial events explicitly; a plain watch without resourceVersion
    // just gets the ADDED events.
    let streaming_list = params.flag("sendInitialEvents");
    let send_initial = super::list_options::send_initial_events(params);
    let bookmarks = params.flag("allowWatchBookmarks");
    let timeout = params
        .int("timeoutSeconds")?
        .filter(|s| *s > 0)
        .map_or(DEFAULT_TIMEOUT, |s| Duration::from_secs(s.unsigned_abs()))
        .min(MAX_TIMEOUT);
    let resource = served.resource;
    let mut enc = Encoder {
        served,
        format: negotiate(headers),
        include: Include::parse(params.get("includeObject")),
        first: true,
        api: api.clone(),
    };
    let (initial, from) = if send_initial {
        let (items, rv) = api.list_raw(resource, ns.as_deref(), &sel);
        (items, rv)
    } else {
        // `sendInitialEvents=false` without a resourceVersion: from now on.
        (
            Vec::new(),
            requested.unwrap_or_else(|| api.resource_version()),
        )
    };
    let stream = api.watch_raw(resource, ns.as_deref(), Some(from), sel);
    let (tx, rx) = mpsc::channel::<Bytes>(QUEUE);
    tokio::spawn(async move {
        let mut stream = match stream {
            Ok(s) => s,
            Err(e) => {
                let _ = tx.send(error_event(&e)).await;
                return;
            }
        };
        for obj in &initial {
            if tx
                .send(enc.event(EventKind::Added.as_str(), obj))
                .await
                .is_err()
            {
                return;
            }
        }
        if streaming_list && bookmarks && tx.send(enc.bookmark(from, true)).await.is_err() {
            return;
        }
        let mut last = from;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut tick =
            tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY);
        loop {
            let out = tokio::select! {
                _ = tx.closed() => return,
                _ = enc.api.watches_closed() => return,
                _ = tokio::time::sleep_until(deadline) => return,
                _ = tick.tick(), if bookmarks => enc.bookmark(last, false),
                item = stream.next() => match item {
                    None => return,
                    Some(Ok((kind, obj))) => {
                        last = object_rv(&obj).unwrap_or(last);
                        enc.event(kind.as_str(), &obj)
                    }
                    Some(Err(e)) => {
                        let _ = tx.send(error_event(&e)).await;
                        return;
                    }
                },
            };
            if tx.send(out).await.is_err() {
                return;
            }
        }
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    let mut resp = (StatusCode::OK, Body::from_stream(body)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}
