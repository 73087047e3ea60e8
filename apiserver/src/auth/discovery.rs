//! Discovery of the groups this module serves: `rbac.authorization.k8s.io`,
//! `authorization.k8s.io` and `authentication.k8s.io`, all `v1`.

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};

use super::rbac::kinds::{GROUP as RBAC, Kind};
use crate::api::Api;
use crate::http::respond::json;

const AUTHZ: &str = "authorization.k8s.io";
const AUTHN: &str = "authentication.k8s.io";

fn group(name: &str) -> Value {
    let v = json!({"groupVersion": format!("{name}/v1"), "version": "v1"});
    json!({"name": name, "versions": [v], "preferredVersion": v})
}

/// The `APIGroup`s for `/apis`.
pub(super) fn groups() -> Vec<Value> {
    vec![group(RBAC), group(AUTHZ), group(AUTHN)]
}

fn resources(name: &str) -> Vec<Value> {
    let all = [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
    ];
    match name {
        RBAC => Kind::ALL
            .iter()
            .map(|k| {
                json!({"name": k.plural(), "singularName": k.kind().to_lowercase(), "namespaced": k.namespaced(), "kind": k.kind(), "verbs": all})
            })
            .collect(),
        AUTHZ => ["SelfSubjectAccessReview", "SelfSubjectRulesReview"]
            .iter()
            .map(|k| json!({"name": format!("{}s", k.to_lowercase()), "singularName": k.to_lowercase(), "namespaced": false, "kind": k, "verbs": ["create"]}))
            .collect(),
        _ => vec![json!({"name": "selfsubjectreviews", "singularName": "selfsubjectreview", "namespaced": false, "kind": "SelfSubjectReview", "verbs": ["create"]})],
    }
}

pub(super) fn routes() -> Router<Api> {
    let mut r = Router::new().route(&format!("/openapi/v3/apis/{RBAC}/v1"), get(rbac_openapi));
    for name in [RBAC, AUTHZ, AUTHN] {
        r = r
            .route(&format!("/apis/{name}"), get(move || async move {
                let mut g = group(name);
                g["kind"] = "APIGroup".into();
                g["apiVersion"] = "v1".into();
                json(StatusCode::OK, &g)
            }))
            .route(&format!("/apis/{name}/v1"), get(move || async move {
                json(StatusCode::OK, &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{name}/v1"), "resources": resources(name)}))
            }));
    }
    r
}

/// Changes whenever the RBAC document does, so kubectl's cache of it stays right.
const RBAC_DOC_HASH: &str = "mesopod-rbac-v1-1";

pub(super) fn openapi_index(paths: &mut Value) {
    paths[format!("apis/{RBAC}/v1")] =
        json!({"serverRelativeURL": format!("/openapi/v3/apis/{RBAC}/v1?hash={RBAC_DOC_HASH}")});
}

/// The OpenAPI v3 document of the RBAC group: each kind's PATCH operation, which is
/// what kubectl looks for to leave validation to the server (see `crate::openapi`).
async fn rbac_openapi() -> axum::response::Response {
    let mut paths = serde_json::Map::new();
    for k in Kind::ALL {
        let path = if k.namespaced() {
            format!(
                "/apis/{RBAC}/v1/namespaces/{{namespace}}/{}/{{name}}",
                k.plural()
            )
        } else {
            format!("/apis/{RBAC}/v1/{}/{{name}}", k.plural())
        };
        paths.insert(
            path,
            crate::openapi::group_patch_op(RBAC, "RbacAuthorizationV1", k.kind()),
        );
    }
    json(
        StatusCode::OK,
        &json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": paths, "components": {"schemas": {}}}),
    )
}
