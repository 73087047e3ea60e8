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
    // Exactly the verbs the routes serve.
    let all = crate::discovery::ALL_VERBS;
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
    let mut r = Router::new();
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
