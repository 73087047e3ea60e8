//! Reads every resource shares: list (or watch) and get.

use axum::http::HeaderMap;
use axum::response::Response;

use super::extract::{Params, negotiate};
use super::list_options::{self, ListAt};
use super::served::Served;
use super::{paging, respond, watch};
use crate::api::Api;
use crate::error::ApiError;
use crate::selectors::Selectors;
use crate::table::Include;

/// `GET` on a collection: a list, or a watch with `watch=true`.
pub(crate) async fn list(
    api: Api,
    served: Served,
    ns: Option<String>,
    params: Params,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let resource = served.resource;
    let sel = Selectors::parse(
        params.get("labelSelector").unwrap_or(""),
        params.get("fieldSelector").unwrap_or(""),
        resource,
    )?;
    let at = list_options::check(&params)?;
    check_not_ahead(&api, &params)?;
    if params.flag("watch") {
        return watch::respond(api, served, ns, &params, &headers, sel);
    }
    let limit = params.int("limit")?.filter(|l| *l > 0);
    let cont = params.get("continue");
    if limit.is_some() || cont.is_some() || at != ListAt::Current {
        let selective =
            params.get("labelSelector").is_some() || params.get("fieldSelector").is_some();
        let limit = limit
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(usize::MAX);
        let exact = match at {
            ListAt::Exact(rv) => Some(rv),
            ListAt::Current => None,
        };
        let page = paging::page(
            &api,
            resource,
            ns.as_deref(),
            &sel,
            paging::Window { limit, cont, exact },
            selective,
        )?;
        let more = page.next.as_deref().map(|t| (t, page.remaining));
        return Ok(respond::list(
            &api,
            served,
            &page.items,
            page.rv,
            more,
            negotiate(&headers),
            Include::parse(params.get("includeObject")),
        ));
    }
    let (items, rv) = api.list_raw(resource, ns.as_deref(), &sel);
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

/// A list or watch at a resourceVersion the store has not reached is refused at once
/// with kube-apiserver's 504 (it waits up to 3 s for its watch cache first; this store
/// has no cache to catch up, so waiting could only delay the same answer).
fn check_not_ahead(api: &Api, params: &Params) -> Result<(), ApiError> {
    let Some(requested) = params.get("resourceVersion") else {
        return Ok(());
    };
    let requested: u64 = requested
        .parse()
        .map_err(|_| ApiError::BadRequest(format!("invalid resourceVersion {requested:?}")))?;
    let current = api.resource_version();
    if requested > current {
        return Err(ApiError::TooLargeResourceVersion { requested, current });
    }
    Ok(())
}

/// `GET` on one object.
pub(crate) fn get(
    api: &Api,
    served: Served,
    ns: &str,
    name: &str,
    params: &Params,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let obj = api.get_raw(served.resource, ns, name)?;
    Ok(respond::object(
        api,
        served,
        &obj,
        negotiate(headers),
        Include::parse(params.get("includeObject")),
    ))
}
