//! Building responses: JSON objects and lists in the negotiated format, with warnings.

use std::sync::Arc;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Value, json};

use super::extract::Format;
use super::served::Served;
use crate::api::Api;
use crate::error::ApiError;
use crate::table::{self, Include};

/// A JSON response with `Warning` headers (kubectl prints them), e.g. one per unknown
/// field: `299 - "unknown field \"spec.foo\""`.
pub(crate) fn json_with_warnings(
    code: StatusCode,
    body: &impl Serialize,
    warnings: &[String],
) -> Response {
    let mut resp = (code, axum::Json(body)).into_response();
    for w in warnings {
        if let Some(v) = crate::notes::warning_header(w) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    resp
}

/// A JSON response.
pub(crate) fn json(code: StatusCode, body: &impl Serialize) -> Response {
    (code, axum::Json(body)).into_response()
}

/// One object in the negotiated format.
pub(crate) fn object(
    api: &Api,
    served: Served,
    obj: &Value,
    format: Format,
    include: Include,
) -> Response {
    let obj = served.object(obj);
    match format {
        Format::Object => json(StatusCode::OK, &obj),
        Format::Metadata => json(StatusCode::OK, &table::partial_metadata(&obj)),
        Format::Table => {
            let t = table::table(
                served.resource,
                &[Arc::new(obj.into_owned())],
                None,
                api.now(),
                include,
                true,
            );
            json(StatusCode::OK, &t)
        }
    }
}

/// A list in the negotiated format.
pub(crate) fn list(
    api: &Api,
    served: Served,
    items: &[Arc<Value>],
    rv: u64,
    more: Option<(&str, Option<usize>)>,
    format: Format,
    include: Include,
) -> Response {
    let resource = served.resource;
    let items = served.items(items);
    let mut list = match format {
        Format::Table => table::table(resource, &items, Some(rv), api.now(), include, true),
        Format::Metadata => json!({
                "kind": "PartialObjectMetadataList",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": rv.to_string()},
                "items": items.iter().map(|o| table::partial_metadata(o)).collect::<Vec<_>>(),
        }),
        Format::Object => json!({
            "kind": resource.list_kind(),
            "apiVersion": served.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items.iter().map(|o| o.as_ref()).collect::<Vec<_>>(),
        }),
    };
    // A paged list: where the next page starts, and how much is left (kube-apiserver's
    // ListMeta fields).
    if let Some((token, remaining)) = more {
        list["metadata"]["continue"] = json!(token);
        if let Some(n) = remaining {
            list["metadata"]["remainingItemCount"] = json!(n);
        }
    }
    json(StatusCode::OK, &list)
}

/// The answer to paths the shim does not serve.
pub(crate) async fn no_route() -> ApiError {
    ApiError::NoRoute
}

/// The answer to verbs a path does not support.
pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed(
        "the server does not allow this method on the requested resource".into(),
    )
}
