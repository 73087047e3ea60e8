//! `deletecollection`: `DELETE` on a collection URL, for every kind that serves it. The
//! objects that the `labelSelector` and `fieldSelector` select are each deleted as a
//! single delete with the body's `DeleteOptions` would delete them; the answer is the
//! list of them as they were before, as kube-apiserver answers.

use axum::body::Body;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{MethodRouter, delete};

use super::extract::{ApiPath, Params, negotiate};
use super::pods::delete_options;
use super::respond;
use super::served::Served;
use crate::api::Api;
use crate::error::ApiError;
use crate::resource::Resource;
use crate::selectors::Selectors;
use crate::table::Include;

/// `DELETE` of a namespace's collection (`/namespaces/{ns}/<resource>`).
pub(crate) fn in_namespace(served: impl Into<Served>) -> MethodRouter<Api> {
    let served = served.into();
    delete(
        move |State(api): State<Api>,
              ApiPath(ns): ApiPath<String>,
              p: Params,
              h: HeaderMap,
              body: Body| async move {
            delete_collection(api, served, Some(ns), p, h, body).await
        },
    )
}

/// `DELETE` of a cluster-scoped collection (`/<resource>`).
pub(crate) fn cluster_scoped(resource: Resource) -> MethodRouter<Api> {
    delete(
        move |State(api): State<Api>, p: Params, h: HeaderMap, body: Body| async move {
            delete_collection(api, resource.into(), None, p, h, body).await
        },
    )
}

async fn delete_collection(
    api: Api,
    served: Served,
    ns: Option<String>,
    params: Params,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let resource = served.resource;
    let opts = delete_options(&params, &headers, body).await?;
    if let Some(warning) = crate::api::finalizers::default_policy_warning(resource, &opts) {
        crate::notes::warn(warning.to_owned());
    }
    let sel = Selectors::parse(
        params.get("labelSelector").unwrap_or(""),
        params.get("fieldSelector").unwrap_or(""),
        resource,
    )?;
    let (items, rv) = api
        .delete_collection(resource, ns.as_deref(), &sel, &opts)
        .await?;
    Ok(respond::list(
        &api,
        served,
        &items,
        rv,
        None,
        negotiate(&headers),
        Include::parse(params.get("includeObject")),
    ))
}
