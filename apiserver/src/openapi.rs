//! Just enough OpenAPI v3 for kubectl to leave validation to the server.
//!
//! kubectl validates `create`/`apply`/`replace` input itself unless the OpenAPI document
//! shows that the server takes `fieldValidation` on the kind's PATCH operation. So each
//! served kind gets a PATCH operation carrying its group-version-kind and that parameter.
//! The PATCH request body deliberately does not list strategic merge patch: kubectl then
//! computes `apply` patches from its built-in type metadata instead of looking for
//! schemas this document does not carry.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use crate::discovery::KUBERNETES_VERSION;
use crate::http::respond::json;

/// Changes whenever the document does, so kubectl's cache of it stays right.
const DOC_HASH: &str = "mesopod-core-v1-1";

/// `GET /openapi/v3`.
pub(crate) async fn index() -> Response {
    let mut paths =
        json!({"api/v1": {"serverRelativeURL": format!("/openapi/v3/api/v1?hash={DOC_HASH}")}});
    crate::auth::openapi_index(&mut paths);
    json(StatusCode::OK, &json!({"paths": paths}))
}

fn patch_op(kind: &str) -> Value {
    group_patch_op("", "CoreV1", kind)
}

/// The PATCH operation of `kind` in `group` (`op_prefix` names the group-version in
/// the operation id, e.g. `RbacAuthorizationV1`).
pub(crate) fn group_patch_op(group: &str, op_prefix: &str, kind: &str) -> Value {
    json!({
        "patch": {
            "operationId": format!("patch{op_prefix}{kind}"),
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": {"group": group, "version": "v1", "kind": kind},
            "parameters": [
                {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}},
            ],
            "requestBody": {"content": {
                "application/apply-patch+yaml": {"schema": {"type": "object"}},
                "application/json-patch+json": {"schema": {"type": "object"}},
                "application/merge-patch+json": {"schema": {"type": "object"}},
            }, "required": true},
            "responses": {"200": {"description": "OK"}},
        }
    })
}

/// `GET /openapi/v3/api/v1`.
pub(crate) async fn core_v1() -> Response {
    let (major, minor) = KUBERNETES_VERSION;
    json(
        StatusCode::OK,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": format!("v{major}.{minor}.0")},
            "paths": {
                "/api/v1/namespaces/{namespace}/pods/{name}": patch_op("Pod"),
                "/api/v1/namespaces/{namespace}/events/{name}": patch_op("Event"),
                "/api/v1/namespaces/{name}": patch_op("Namespace"),
                "/api/v1/nodes/{name}": patch_op("Node"),
            },
            "components": {"schemas": {}},
        }),
    )
}
