//! The routes and writes of the plain kinds (`crate::kinds`), generic over the kind:
//! `/api/v1/<plural>`, `/api/v1/namespaces/{ns}/<plural>[/{name}]` for a namespaced
//! kind, `/api/v1/<plural>[/{name}]` for a cluster-scoped one (`/apis/<group>/v1/...`
//! for a kind of a named group).

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::{Router, routing::MethodRouter};

use super::collection;
use super::extract::{ApiPath, Params, object_content_type, read_body};
use super::pods::{delete_options, patch_request};
use super::respond::{json, json_with_warnings};
use super::{get_cluster_scoped, get_in_namespace, list_all, list_in_namespace};
use crate::api::{Api, Deleted, WriteOptions, decode_kind_body};
use crate::auth::rbac::Writer;
use crate::error::ApiError;
use crate::kinds::Kind;
use crate::kinds::apps::{WithStatus, Workload};

/// Adds the routes of kind `K` to `router`.
pub(crate) fn routes<K: Kind>(router: Router<Api>) -> Router<Api> {
    let r = K::RESOURCE;
    let plural = r.plural();
    let base = r.base_path();
    let writes =
        |one: MethodRouter<Api>| one.put(replace::<K>).patch(patch::<K>).delete(delete::<K>);
    if !r.namespaced() {
        return router
            .route(
                &format!("{base}/{plural}"),
                list_all(r)
                    .post(create::<K>)
                    .merge(collection::cluster_scoped(r)),
            )
            .route(
                &format!("{base}/{plural}/{{name}}"),
                writes(get_cluster_scoped(r)),
            );
    }
    router
        .route(&format!("{base}/{plural}"), list_all(r))
        .route(
            &format!("{base}/namespaces/{{ns}}/{plural}"),
            list_in_namespace(r)
                .post(create::<K>)
                .merge(collection::in_namespace(r)),
        )
        .route(
            &format!("{base}/namespaces/{{ns}}/{plural}/{{name}}"),
            writes(get_in_namespace(r)),
        )
}

/// Adds the routes of cluster-scoped kind `K` that users may read and update but
/// neither create nor delete (Node: the agents' own).
pub(crate) fn update_routes<K: Kind>(router: Router<Api>) -> Router<Api> {
    let r = K::RESOURCE;
    let (base, plural) = (r.base_path(), r.plural());
    router
        .route(&format!("{base}/{plural}"), list_all(r))
        .route(
            &format!("{base}/{plural}/{{name}}"),
            get_cluster_scoped(r).put(replace::<K>).patch(patch::<K>),
        )
}

/// What every write takes from its request's head: the API, the writer (put in the
/// extensions by the authorization layer when authentication and RBAC are on), the
/// namespace (`""` for a cluster-scoped kind) and name in the path, the query and the
/// headers.
pub(super) struct Write {
    pub(super) api: Api,
    pub(super) writer: Option<Writer>,
    pub(super) ns: String,
    pub(super) name: String,
    pub(super) params: Params,
    pub(super) headers: HeaderMap,
}

impl FromRequestParts<Api> for Write {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, api: &Api) -> Result<Self, ApiError> {
        let ApiPath(path) =
            ApiPath::<HashMap<String, String>>::from_request_parts(parts, api).await?;
        let params = Params::from_request_parts(parts, api).await?;
        let part = |k: &str| path.get(k).cloned().unwrap_or_default();
        Ok(Self {
            api: api.clone(),
            writer: parts.extensions.get::<Writer>().cloned(),
            ns: part("ns"),
            name: part("name"),
            params,
            headers: parts.headers.clone(),
        })
    }
}

async fn decode<K: Kind>(
    params: &Params,
    headers: &HeaderMap,
    body: Body,
) -> Result<(K, Vec<String>, WriteOptions), ApiError> {
    let opts = params.write_options()?;
    let bytes = read_body(headers, body).await?;
    let (obj, warnings) = decode_kind_body::<K>(&bytes, object_content_type(headers)?, opts)?;
    Ok((obj, warnings, opts))
}

async fn create<K: Kind>(w: Write, body: Body) -> Result<Response, ApiError> {
    let (obj, warnings, opts) = decode::<K>(&w.params, &w.headers, body).await?;
    let obj = w
        .api
        .create_object(&w.ns, obj, opts, w.writer.as_ref())
        .await?;
    Ok(json_with_warnings(StatusCode::CREATED, &obj, &warnings))
}

async fn replace<K: Kind>(w: Write, body: Body) -> Result<Response, ApiError> {
    let (obj, warnings, opts) = decode::<K>(&w.params, &w.headers, body).await?;
    let obj = w
        .api
        .replace_object(&w.ns, &w.name, obj, opts, w.writer.as_ref())
        .await?;
    Ok(json_with_warnings(StatusCode::OK, &obj, &warnings))
}

async fn patch<K: Kind>(w: Write, body: Body) -> Result<Response, ApiError> {
    let (ty, patch, opts) = patch_request(&w.params, &w.headers, body).await?;
    let (obj, warnings) = w
        .api
        .patch_object::<K>(&w.ns, &w.name, ty, &patch, opts, w.writer.as_ref())
        .await?;
    Ok(json_with_warnings(StatusCode::OK, &obj, &warnings))
}

async fn delete<K: Kind>(w: Write, body: Body) -> Result<Response, ApiError> {
    let opts = delete_options(&w.params, &w.headers, body).await?;
    if let Some(warning) = crate::api::finalizers::default_policy_warning(K::RESOURCE, &opts) {
        crate::notes::warn(warning.to_owned());
    }
    let deleted = w
        .api
        .delete_object(K::RESOURCE, &w.ns, &w.name, &opts)
        .await?;
    Ok(match deleted {
        Deleted::Gone(status) => json(StatusCode::OK, &status),
        // kube-apiserver answers 202 to a delete held for its dependents only when the
        // legacy `orphanDependents: false` asked for it, and 200 otherwise.
        Deleted::Held(obj) if opts.orphan_dependents == Some(false) => {
            json(StatusCode::ACCEPTED, &obj)
        }
        Deleted::Held(obj) => json(StatusCode::OK, &obj),
    })
}

/// The path of one object of namespaced `r`, with `{ns}` and `{name}` placeholders.
fn one_path(r: crate::resource::Resource) -> String {
    format!(
        "{}/namespaces/{{ns}}/{}/{{name}}",
        r.base_path(),
        r.plural()
    )
}

/// Adds the `status` subresource of kind `K` (its main routes come from [`routes`]).
pub(crate) fn status_routes<K: WithStatus>(router: Router<Api>) -> Router<Api> {
    let r = K::RESOURCE;
    router.route(
        &format!("{}/status", one_path(r)),
        get_in_namespace(r)
            .put(replace_status::<K>)
            .patch(patch_status::<K>),
    )
}

/// Adds the `status` and `scale` subresources of workload kind `K` (its main routes come
/// from [`routes`]).
pub(crate) fn workload_routes<K: Workload>(router: Router<Api>) -> Router<Api> {
    let one = one_path(K::RESOURCE);
    status_routes::<K>(router).route(
        &format!("{one}/scale"),
        axum::routing::get(get_scale::<K>)
            .put(replace_scale::<K>)
            .patch(patch_scale::<K>),
    )
}

async fn replace_status<K: WithStatus>(w: Write, body: Body) -> Result<Response, ApiError> {
    let (obj, warnings, opts) = decode::<K>(&w.params, &w.headers, body).await?;
    let obj = w
        .api
        .replace_status(&w.ns, &w.name, obj, opts, w.writer.as_ref())
        .await?;
    Ok(json_with_warnings(StatusCode::OK, &obj, &warnings))
}

async fn patch_status<K: WithStatus>(w: Write, body: Body) -> Result<Response, ApiError> {
    let (ty, patch, opts) = patch_request(&w.params, &w.headers, body).await?;
    let (obj, warnings) = w
        .api
        .patch_status::<K>(&w.ns, &w.name, ty, &patch, opts, w.writer.as_ref())
        .await?;
    Ok(json_with_warnings(StatusCode::OK, &obj, &warnings))
}

async fn get_scale<K: Workload>(w: Write) -> Result<Response, ApiError> {
    Ok(json(StatusCode::OK, &w.api.get_scale::<K>(&w.ns, &w.name)?))
}

async fn replace_scale<K: Workload>(w: Write, body: Body) -> Result<Response, ApiError> {
    let opts = w.params.write_options()?;
    let bytes = read_body(&w.headers, body).await?;
    let value = crate::decode::parse_object(&bytes, object_content_type(&w.headers)?)?;
    let scale = w
        .api
        .replace_scale::<K>(&w.ns, &w.name, &value, opts, w.writer.as_ref())
        .await?;
    Ok(json(StatusCode::OK, &scale))
}

async fn patch_scale<K: Workload>(w: Write, body: Body) -> Result<Response, ApiError> {
    let (ty, patch, opts) = patch_request(&w.params, &w.headers, body).await?;
    let scale = w
        .api
        .patch_scale::<K>(&w.ns, &w.name, ty, &patch, opts, w.writer.as_ref())
        .await?;
    Ok(json(StatusCode::OK, &scale))
}
