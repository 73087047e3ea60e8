//! The routes and writes of the plain kinds (`crate::kinds`), generic over the kind:
//! `/api/v1/<plural>`, `/api/v1/namespaces/{ns}/<plural>[/{name}]` (`/apis/<group>/v1/...`
//! for a kind of a named group).

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::extract::{ApiPath, Params, content_type, object_content_type, read_body};
use super::pods::{delete_options, patch_request};
use super::respond::{json, json_with_warnings};
use super::{get_in_namespace, list_all, list_in_namespace};
use crate::api::{Api, WriteOptions, decode_kind, decode_kind_body};
use crate::error::ApiError;
use crate::kinds::Kind;

/// Adds the routes of kind `K` to `router`.
pub(crate) fn routes<K: Kind>(router: Router<Api>) -> Router<Api> {
    let r = K::RESOURCE;
    let plural = r.plural();
    let base = r.base_path();
    router
        .route(&format!("{base}/{plural}"), list_all(r))
        .route(
            &format!("{base}/namespaces/{{ns}}/{plural}"),
            list_in_namespace(r).post(create::<K>),
        )
        .route(
            &format!("{base}/namespaces/{{ns}}/{plural}/{{name}}"),
            get_in_namespace(r)
                .put(replace::<K>)
                .patch(patch::<K>)
                .delete(delete::<K>),
        )
}

async fn decode<K: Kind>(
    params: &Params,
    headers: &HeaderMap,
    body: Body,
) -> Result<(K, Vec<String>, WriteOptions), ApiError> {
    let opts = params.write_options()?;
    let bytes = read_body(headers, body).await?;
    let (obj, warnings) = if content_type(headers).starts_with(crate::protobuf::PROTOBUF) {
        decode_kind::<K>(&crate::protobuf::decode_object(&bytes, K::KIND)?, opts)?
    } else {
        decode_kind_body::<K>(&bytes, object_content_type(headers)?, opts)?
    };
    Ok((obj, warnings, opts))
}

async fn create<K: Kind>(
    State(api): State<Api>,
    ApiPath(ns): ApiPath<String>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (obj, warnings, opts) = decode::<K>(&params, &headers, body).await?;
    let obj = api.create_object(&ns, obj, opts).await?;
    Ok(json_with_warnings(StatusCode::CREATED, &obj, &warnings))
}

async fn replace<K: Kind>(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (obj, warnings, opts) = decode::<K>(&params, &headers, body).await?;
    let obj = api.replace_object(&ns, &name, obj, opts).await?;
    Ok(json_with_warnings(StatusCode::OK, &obj, &warnings))
}

async fn patch<K: Kind>(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (ty, patch, opts) = patch_request(&params, &headers, body).await?;
    let (obj, warnings) = api.patch_object::<K>(&ns, &name, ty, &patch, opts).await?;
    Ok(json_with_warnings(StatusCode::OK, &obj, &warnings))
}

async fn delete<K: Kind>(
    State(api): State<Api>,
    ApiPath((ns, name)): ApiPath<(String, String)>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let opts = delete_options(&params, &headers, body).await?;
    let dry_run = opts.dry_run.iter().flatten().any(|d| d == "All");
    let status = api.delete_object(K::RESOURCE, &ns, &name, dry_run).await?;
    Ok(json(StatusCode::OK, &status))
}
