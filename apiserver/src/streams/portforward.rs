//! port-forward: SPDY/3.1, and SPDY inside WebSocket (`SPDY/3.1+portforward.k8s.io`).
//!
//! A placeholder until SPDY framing lands: every request is refused.

use axum::extract::Request;
use axum::response::{IntoResponse as _, Response};
use k8s_openapi::api::core::v1::Pod;

use crate::api::Api;
use crate::error::ApiError;

/// Serves a port-forward to `pod` (`query` holds `ports`): refused for now.
pub(crate) async fn serve(
    _api: Api,
    _pod: Pod,
    _query: Vec<(String, String)>,
    _req: Request,
) -> Response {
    ApiError::BadRequest("SPDY is not supported yet".into()).into_response()
}
