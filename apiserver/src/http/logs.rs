//! `GET /api/v1/namespaces/NS/pods/NAME/log`: resolves the container, then streams what
//! the log source yields as `text/plain`.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::extract::{ApiPath, Params};
use crate::api::{Api, LogOptions};
use crate::error::ApiError;

/// The log handler.
pub(crate) async fn get(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    params: Params,
) -> Result<Response, ApiError> {
    let opts = LogOptions {
        container: params.get("container").map(str::to_string),
        follow: params.flag("follow"),
        tail_lines: params.int("tailLines")?,
        limit_bytes: params.int("limitBytes")?,
        previous: params.flag("previous"),
        timestamps: params.flag("timestamps"),
        since_seconds: params.int("sinceSeconds")?,
        since_time: params.get("sinceTime").map(str::to_string),
    };
    let stream = api.pod_logs(&ns, &name, opts).await?;
    let mut resp = (StatusCode::OK, Body::from_stream(stream)).into_response();
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    Ok(resp)
}
