//! exec and attach over SPDY/3.1 (kubectl 1.27–1.29, and the fallback of later ones).
//!
//! A placeholder until SPDY framing lands: the upgrade is refused.

use axum::extract::Request;
use axum::response::{IntoResponse as _, Response};

use super::StreamTarget;
use crate::api::Api;
use crate::error::ApiError;

/// Serves `target` over SPDY/3.1: refused for now.
pub(crate) async fn serve(_api: Api, _target: StreamTarget, _req: Request) -> Response {
    ApiError::BadRequest("SPDY is not supported yet".into()).into_response()
}
