//! The routes of `autoscaling/v1` HorizontalPodAutoscalers: the v2 kind's own path with
//! a conversion at each edge (`kinds::autoscaling::v1`). A body is decoded as v1 (its
//! unknown fields refused or warned of as v1's), converted to v2 and written as a v2
//! write is; what comes back is converted to v1. Patches apply to the v1 view of the
//! stored object and are written back under the resourceVersion it was read at.

use axum::Router;
use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use k8s_openapi::api::autoscaling::{v1, v2};
use serde_json::Value;

use super::collection;
use super::extract::{object_content_type, read_body};
use super::kinds::Write;
use super::pods::{delete_options, patch_request};
use super::respond::{json, json_with_warnings};
use super::served::Served;
use super::{get_in_namespace, list_all, list_in_namespace};
use crate::api::{Api, Deleted, Endpoint, Version, WriteOptions};
use crate::decode::{decode_resource, decode_resource_body};
use crate::error::ApiError;
use crate::kinds::apps::WithStatus;
use crate::kinds::autoscaling::v1::{to_v1, to_v2, value_to_v1};

type Hpa = v2::HorizontalPodAutoscaler;

/// The group version's path and the resource's plural.
const BASE: &str = "/apis/autoscaling/v1";
const PLURAL: &str = "horizontalpodautoscalers";

/// Adds the `autoscaling/v1` routes of HorizontalPodAutoscalers to `router`.
pub(crate) fn routes(router: Router<Api>) -> Router<Api> {
    let served = Served::HPA_V1;
    let one = format!("{BASE}/namespaces/{{ns}}/{PLURAL}/{{name}}");
    router
        .route(&format!("{BASE}/{PLURAL}"), list_all(served))
        .route(
            &format!("{BASE}/namespaces/{{ns}}/{PLURAL}"),
            list_in_namespace(served)
                .post(create)
                .merge(collection::in_namespace(served)),
        )
        .route(
            &one,
            get_in_namespace(served)
                .put(replace)
                .patch(patch)
                .delete(delete),
        )
        .route(
            &format!("{one}/status"),
            get_in_namespace(served)
                .put(replace_status)
                .patch(patch_status),
        )
}

/// A v1 object (JSON, as a patch leaves it) decoded under the write's field validation,
/// as the v2 object it stands for.
fn decode_v1(value: &Value, opts: WriteOptions) -> Result<(Hpa, Vec<String>), ApiError> {
    let (obj, warnings) =
        decode_resource::<v1::HorizontalPodAutoscaler>(value, opts.field_validation)?;
    Ok((to_v2(obj), warnings))
}

/// Patches see and give v1.
const V1: Version<Hpa> = Version {
    show: value_to_v1,
    decode: decode_v1,
};

async fn decode_body(w: &Write, body: Body) -> Result<(Hpa, Vec<String>, WriteOptions), ApiError> {
    let opts = w.params.write_options()?;
    let bytes = read_body(&w.headers, body).await?;
    let (obj, warnings) = decode_resource_body::<v1::HorizontalPodAutoscaler>(
        &bytes,
        object_content_type(&w.headers)?,
        opts.field_validation,
    )?;
    Ok((to_v2(obj), warnings, opts))
}

fn answer(code: StatusCode, obj: &Hpa, warnings: &[String]) -> Response {
    json_with_warnings(code, &to_v1(obj), warnings)
}

async fn create(w: Write, body: Body) -> Result<Response, ApiError> {
    let (obj, warnings, opts) = decode_body(&w, body).await?;
    let obj = w
        .api
        .create_object(&w.ns, obj, opts, w.writer.as_ref())
        .await?;
    Ok(answer(StatusCode::CREATED, &obj, &warnings))
}

async fn replace(w: Write, body: Body) -> Result<Response, ApiError> {
    let (obj, warnings, opts) = decode_body(&w, body).await?;
    let obj = w
        .api
        .replace_object(&w.ns, &w.name, obj, opts, w.writer.as_ref())
        .await?;
    Ok(answer(StatusCode::OK, &obj, &warnings))
}

async fn patch(w: Write, body: Body) -> Result<Response, ApiError> {
    let (ty, patch, opts) = patch_request(&w.params, &w.headers, body).await?;
    let (obj, warnings) = w
        .api
        .patch_object_as(
            &w.ns,
            &w.name,
            ty,
            &patch,
            opts,
            w.writer.as_ref(),
            Endpoint::Main,
            V1,
        )
        .await?;
    Ok(answer(StatusCode::OK, &obj, &warnings))
}

async fn replace_status(w: Write, body: Body) -> Result<Response, ApiError> {
    let (obj, warnings, opts) = decode_body(&w, body).await?;
    let obj = w
        .api
        .replace_status(&w.ns, &w.name, obj, opts, w.writer.as_ref())
        .await?;
    Ok(answer(StatusCode::OK, &obj, &warnings))
}

async fn patch_status(w: Write, body: Body) -> Result<Response, ApiError> {
    let (ty, patch, opts) = patch_request(&w.params, &w.headers, body).await?;
    let status = Endpoint::Sub(Hpa::keep_for_status, Hpa::validate_status);
    let (obj, warnings) = w
        .api
        .patch_object_as(
            &w.ns,
            &w.name,
            ty,
            &patch,
            opts,
            w.writer.as_ref(),
            status,
            V1,
        )
        .await?;
    Ok(answer(StatusCode::OK, &obj, &warnings))
}

async fn delete(w: Write, body: Body) -> Result<Response, ApiError> {
    let opts = delete_options(&w.params, &w.headers, body).await?;
    let resource = Served::HPA_V1.resource;
    if let Some(warning) = crate::api::finalizers::default_policy_warning(resource, &opts) {
        crate::notes::warn(warning.to_owned());
    }
    let deleted = w.api.delete_object(resource, &w.ns, &w.name, &opts).await?;
    Ok(match deleted {
        Deleted::Gone(status) => json(StatusCode::OK, &status),
        // As the v2 delete: 202 only when the legacy `orphanDependents: false` asked.
        Deleted::Held(obj) if opts.orphan_dependents == Some(false) => {
            json(StatusCode::ACCEPTED, &value_to_v1(&obj))
        }
        Deleted::Held(obj) => json(StatusCode::OK, &value_to_v1(&obj)),
    })
}
