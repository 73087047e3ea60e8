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
use crate::decode::{FieldValidation, decode_resource_body, decode_typed, parse_body};
use crate::error::ApiError;
use crate::patch::{self, PatchType};

/// A body of kind `T` (a Pod, an Eviction) in any content type the endpoint takes,
/// with its warnings and the request's write options.
async fn decode_body<T>(
    params: &Params,
    headers: &HeaderMap,
    body: Body,
) -> Result<(T, Vec<String>, WriteOptions), ApiError>
where
    T: k8s_openapi::Resource + serde::de::DeserializeOwned + serde::Serialize,
{
    let opts = params.write_options()?;
    let ct = object_content_type(headers)?.to_string();
    let bytes = read_body(headers, body).await?;
    let (obj, warnings) = decode_resource_body::<T>(&bytes, &ct, opts.field_validation)?;
    Ok((obj, warnings, opts))
}

/// `POST /api/v1/namespaces/NS/pods`.
pub(crate) async fn create(
    State(api): State<Api>,
    ApiPath(ns): ApiPath<String>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (pod, warnings, opts) = decode_body::<Pod>(&params, &headers, body).await?;
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
    let (pod, warnings, opts) = decode_body::<Pod>(&params, &headers, body).await?;
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
    let (ty, patch, opts) = patch_request(&params, &headers, body).await?;
    let (pod, warnings) = api.patch_pod_with(&ns, &name, ty, &patch, opts).await?;
    Ok(json_with_warnings(StatusCode::OK, &pod, &warnings))
}

/// A PATCH request of any kind: its type, the parsed patch and the write options.
pub(crate) async fn patch_request(
    params: &Params,
    headers: &HeaderMap,
    body: Body,
) -> Result<(PatchType, serde_json::Value, WriteOptions), ApiError> {
    let ty = PatchType::from_content_type(content_type(headers))?;
    let mut opts = params.write_options()?;
    if ty == PatchType::Apply && params.get("fieldManager").is_none() {
        return Err(ApiError::BadRequest(
            "PATCH with apply requires a fieldManager parameter".into(),
        ));
    }
    let bytes = read_body(headers, body).await?;
    let patch = patch::parse_patch(ty, &bytes)?;
    if ty == PatchType::Apply && params.get("fieldValidation").is_none() {
        // Server-side apply validates strictly unless told otherwise, as in Kubernetes.
        opts.field_validation = FieldValidation::Strict;
    }
    Ok((ty, patch, opts))
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
    if let Some(p) = params.get("propagationPolicy") {
        opts.propagation_policy = Some(p.to_owned());
    }
    if let Some(o) = params.get("orphanDependents") {
        opts.orphan_dependents = Some(o.parse().map_err(|_| {
            ApiError::BadRequest(format!("invalid value for orphanDependents: {o:?}"))
        })?);
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

/// Why a client's status write is refused: only the scheduler, inside the process,
/// writes pod status (one writer per status); with authorization on, this becomes the
/// authorizer's 403.
fn status_is_the_schedulers(name: &str) -> ApiError {
    ApiError::Forbidden(format!(
        "pods \"{name}\" is forbidden: the status subresource is written only by the scheduler"
    ))
}

/// `PUT /api/v1/namespaces/NS/pods/NAME/status`: refused (see
/// [`status_is_the_schedulers`]); the in-process path is [`Api::update_pod_status`].
pub(crate) async fn replace_status(
    ApiPath((_ns, name)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    Err(status_is_the_schedulers(&name))
}

/// `PATCH /api/v1/namespaces/NS/pods/NAME/status`: refused as PUT is.
pub(crate) async fn patch_status(
    ApiPath((_ns, name)): ApiPath<(String, String)>,
) -> Result<Response, ApiError> {
    Err(status_is_the_schedulers(&name))
}

/// `POST /api/v1/namespaces/NS/pods/NAME/eviction` (`policy/v1` Eviction): the pod's
/// delete, if its disruption budget allows it; 201 with a `Success` Status, as
/// kube-apiserver answers.
pub(crate) async fn evict(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (eviction, _, opts) =
        decode_body::<k8s_openapi::api::policy::v1::Eviction>(&params, &headers, body).await?;
    api.evict_pod(&ns, &name, eviction, opts.dry_run).await?;
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    });
    Ok(json(StatusCode::CREATED, &status))
}
