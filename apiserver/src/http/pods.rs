//! Pod writes over HTTP: create, replace, patch, delete, and the status subresource.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;

use super::extract::{ApiPath, Params, content_type, object_content_type, read_body};
use super::respond::{json, json_with_warnings};
use crate::api::{Api, WriteOptions};
use crate::decode::{FieldValidation, decode_typed, parse_body, parse_object};
use crate::error::ApiError;
use crate::patch::{self, PatchType};

async fn decode_pod(
    params: &Params,
    headers: &HeaderMap,
    body: Body,
) -> Result<(Pod, Vec<String>, WriteOptions), ApiError> {
    let opts = params.write_options()?;
    let ct = object_content_type(headers)?.to_string();
    let bytes = read_body(headers, body).await?;
    let value = parse_object(&bytes, &ct)?;
    let (pod, warnings) = decode_typed::<Pod>(&value, opts.field_validation)?;
    Ok((pod, warnings, opts))
}

/// `POST /api/v1/namespaces/NS/pods`.
pub(crate) async fn create(
    State(api): State<Api>,
    ApiPath(ns): ApiPath<String>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (pod, warnings, opts) = decode_pod(&params, &headers, body).await?;
    let pod = api.create_pod_with(&ns, pod, opts).await?;
    Ok(json_with_warnings(StatusCode::CREATED, &pod, &warnings))
}

/// `PUT /api/v1/namespaces/NS/pods/NAME`.
pub(crate) async fn replace(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (pod, warnings, opts) = decode_pod(&params, &headers, body).await?;
    let pod = api.replace_pod_with(&ns, &name, pod, opts).await?;
    Ok(json_with_warnings(StatusCode::OK, &pod, &warnings))
}

/// `PATCH /api/v1/namespaces/NS/pods/NAME` (merge, JSON, strategic, apply).
pub(crate) async fn patch(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let ty = PatchType::from_content_type(content_type(&headers))?;
    let mut opts = params.write_options()?;
    if ty == PatchType::Apply && params.get("fieldManager").is_none() {
        return Err(ApiError::BadRequest(
            "PATCH with apply requires a fieldManager parameter".into(),
        ));
    }
    let bytes = read_body(&headers, body).await?;
    let patch = patch::parse_patch(ty, &bytes)?;
    if ty == PatchType::Apply && params.get("fieldValidation").is_none() {
        // Server-side apply validates strictly unless told otherwise, as in Kubernetes.
        opts.field_validation = FieldValidation::Strict;
    }
    let (pod, warnings) = api.patch_pod_with(&ns, &name, ty, &patch, opts).await?;
    Ok(json_with_warnings(StatusCode::OK, &pod, &warnings))
}

/// `DELETE /api/v1/namespaces/NS/pods/NAME`; the body (`DeleteOptions`) may be empty.
pub(crate) async fn delete(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let opts = delete_options(&params, &headers, body).await?;
    let pod = api.delete_pod(&ns, &name, &opts).await?;
    Ok(json(StatusCode::OK, &pod))
}

/// `DeleteOptions` from the body (if any) overlaid with query parameters.
pub(crate) async fn delete_options(
    params: &Params,
    headers: &HeaderMap,
    body: Body,
) -> Result<DeleteOptions, ApiError> {
    let bytes = read_body(headers, body).await?;
    let mut opts = if bytes.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else {
        let v = parse_body(&bytes, content_type(headers))?;
        decode_typed::<DeleteOptions>(&v, FieldValidation::Ignore)?.0
    };
    if let Some(g) = params.int("gracePeriodSeconds")? {
        opts.grace_period_seconds = Some(g);
    }
    if let Some(d) = params.get("dryRun") {
        opts.dry_run = Some(vec![d.to_string()]);
    }
    Ok(opts)
}

/// `GET /api/v1/namespaces/NS/pods/NAME/status`.
pub(crate) async fn get_status(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    Ok(json(StatusCode::OK, &api.get_pod(&ns, &name)?))
}

/// `PUT /api/v1/namespaces/NS/pods/NAME/status`: only the status is taken.
pub(crate) async fn replace_status(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (pod, warnings, opts) = decode_pod(&params, &headers, body).await?;
    let expected = match pod.metadata.resource_version.as_deref() {
        None | Some("") => None,
        Some(s) => Some(
            s.parse()
                .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {s:?}")))?,
        ),
    };
    let status = pod.status.unwrap_or_default();
    let pod = api
        .write_status(&ns, &name, expected, opts.dry_run, |_| Ok(status.clone()))
        .await?;
    Ok(json_with_warnings(StatusCode::OK, &pod, &warnings))
}

/// `PATCH /api/v1/namespaces/NS/pods/NAME/status`: the patch applies to the whole pod,
/// only the resulting status is kept.
pub(crate) async fn patch_status(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let ty = PatchType::from_content_type(content_type(&headers))?;
    let opts = params.write_options()?;
    let bytes = read_body(&headers, body).await?;
    let patch = patch::parse_patch(ty, &bytes)?;
    let pod = api
        .write_status(&ns, &name, None, opts.dry_run, |old| {
            let live = serde_json::to_value(old).map_err(|e| ApiError::Internal(e.to_string()))?;
            let patched = patch::apply(ty, &live, &patch, "Pod", &name)?;
            let (new, _) = decode_typed::<Pod>(&patched, opts.field_validation)?;
            Ok(new.status.unwrap_or_default())
        })
        .await?;
    Ok(json(StatusCode::OK, &pod))
}
