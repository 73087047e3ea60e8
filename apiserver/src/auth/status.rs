//! The answers of a refused request, worded as kube-apiserver words them.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::request_info::Attributes;
use super::user::UserInfo;

/// 401: no valid credential.
pub fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        axum::Json(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Unauthorized", "reason": "Unauthorized", "code": 401,
        })),
    )
        .into_response()
}

/// The message of a 403 on `resource.group "name"` (`resource` empty: a non-resource URL).
pub fn forbidden_message(group: &str, resource: &str, name: &str, msg: &str) -> String {
    let qualified = match (resource, group) {
        ("", _) => String::new(),
        (r, "") => r.to_owned(),
        (r, g) => format!("{r}.{g}"),
    };
    match (qualified.as_str(), name) {
        ("", _) => format!("forbidden: {msg}"),
        (q, "") => format!("{q} is forbidden: {msg}"),
        (q, n) => format!("{q} {n:?} is forbidden: {msg}"),
    }
}

/// 403 on `resource.group "name"` (`resource` empty: a non-resource URL) with `msg`.
pub fn forbidden(group: &str, resource: &str, name: &str, msg: &str) -> Response {
    let message = forbidden_message(group, resource, name, msg);
    let mut details = json!({"kind": resource});
    if !group.is_empty() {
        details["group"] = group.into();
    }
    if !name.is_empty() {
        details["name"] = name.into();
    }
    (
        StatusCode::FORBIDDEN,
        axum::Json(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "Forbidden", "details": details, "code": 403,
        })),
    )
        .into_response()
}

/// What the authorizer denied, as `forbiddenMessage` words it.
pub fn denied_message(user: &UserInfo, a: &Attributes) -> String {
    if !a.resource_request {
        return format!("User {:?} cannot {} path {:?}", user.name, a.verb, a.path);
    }
    let resource = a.combined_resource();
    if a.namespace.is_empty() {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
            user.name, a.verb, resource, a.api_group
        )
    } else {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
            user.name, a.verb, resource, a.api_group, a.namespace
        )
    }
}

/// The 403 of a denied request.
pub fn denied(user: &UserInfo, a: &Attributes) -> Response {
    let msg = denied_message(user, a);
    if a.resource_request {
        forbidden(&a.api_group, &a.resource, &a.name, &msg)
    } else {
        forbidden("", "", "", &msg)
    }
}
