//! Writes on events and namespaces over HTTP (nodes are read-only here).

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use k8s_openapi::api::core::v1::{Event, Namespace};

use super::extract::{ApiPath, Params, object_content_type, read_body};
use super::respond::{json, json_with_warnings};
use crate::api::Api;
use crate::decode::decode_resource_body;
use crate::error::ApiError;

/// `POST /api/v1/namespaces/NS/events`.
pub(crate) async fn create_event(
    State(api): State<Api>,
    ApiPath(ns): ApiPath<String>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let opts = params.write_options()?;
    let ct = object_content_type(&headers)?.to_string();
    let bytes = read_body(&headers, body).await?;
    let (event, warnings) = decode_resource_body::<Event>(&bytes, &ct, opts.field_validation)?;
    let event = api.create_event_with(&ns, event, opts).await?;
    Ok(json_with_warnings(StatusCode::CREATED, &event, &warnings))
}

/// `DELETE /api/v1/namespaces/NS/events/NAME`.
pub(crate) async fn delete_event(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    Ok(json(StatusCode::OK, &api.delete_event(&ns, &name).await?))
}

/// `POST /api/v1/namespaces`.
pub(crate) async fn create_namespace(
    State(api): State<Api>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let opts = params.write_options()?;
    let ct = object_content_type(&headers)?.to_string();
    let bytes = read_body(&headers, body).await?;
    let (ns, warnings) = decode_resource_body::<Namespace>(&bytes, &ct, opts.field_validation)?;
    let ns = api.create_namespace_with(ns, opts).await?;
    Ok(json_with_warnings(StatusCode::CREATED, &ns, &warnings))
}

/// `PUT /api/v1/namespaces/NAME`.
pub(crate) async fn replace_namespace(
    State(api): State<Api>,
    ApiPath(name): ApiPath<String>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let opts = params.write_options()?;
    let ct = object_content_type(&headers)?.to_string();
    let bytes = read_body(&headers, body).await?;
    let (ns, warnings) = decode_resource_body::<Namespace>(&bytes, &ct, opts.field_validation)?;
    let ns = api.replace_namespace_with(&name, ns, opts).await?;
    Ok(json_with_warnings(StatusCode::OK, &ns, &warnings))
}

/// `PATCH /api/v1/namespaces/NAME` (merge, JSON, strategic, apply): what `kubectl
/// label ns` sends.
pub(crate) async fn patch_namespace(
    State(api): State<Api>,
    ApiPath(name): ApiPath<String>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (ty, patch, opts) = super::pods::patch_request(&params, &headers, body).await?;
    let (ns, warnings) = api.patch_namespace_with(&name, ty, &patch, opts).await?;
    Ok(json_with_warnings(StatusCode::OK, &ns, &warnings))
}

/// `DELETE /api/v1/namespaces/NAME` (empty namespaces only).
pub(crate) async fn delete_namespace(
    State(api): State<Api>,
    ApiPath(name): ApiPath<String>,
) -> Result<Response, ApiError> {
    Ok(json(StatusCode::OK, &api.delete_namespace(&name).await?))
}
