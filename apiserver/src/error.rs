//! The shim's errors. Each variant owns its Kubernetes `Status` (HTTP code and reason)
//! here and nowhere else, so no handler can answer the wrong code.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::store::StoreError;

/// Why a field is invalid, as Kubernetes names it in `details.causes[].reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CauseKind {
    /// A required field is missing.
    Required,
    /// A value has the wrong form.
    Invalid,
    /// A value repeats one that must be unique.
    Duplicate,
    /// A value is not one of the supported values.
    NotSupported,
    /// A reference names nothing.
    NotFound,
    /// A change or value is not allowed.
    Forbidden,
    /// A value is too long.
    TooLong,
    /// A list has too many items.
    TooMany,
}

impl CauseKind {
    fn reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Invalid => "FieldValueInvalid",
            Self::Duplicate => "FieldValueDuplicate",
            Self::NotSupported => "FieldValueNotSupported",
            Self::NotFound => "FieldValueNotFound",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
        }
    }
}

/// One invalid field of a 422 answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// What kind of problem.
    pub kind: CauseKind,
    /// The field path, e.g. `spec.containers[0].image`.
    pub field: String,
    /// The error body as Kubernetes words it, e.g. `Required value` or
    /// `Invalid value: "Foo": ...`.
    pub message: String,
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// An error of the API, typed and HTTP alike. Every error leaves the store unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 404: the object (`resource` is the plural, e.g. `pods`) does not exist.
    #[error("{resource} \"{name}\" not found")]
    NotFound {
        /// Plural resource name.
        resource: String,
        /// Object name.
        name: String,
    },
    /// 404: no such path on this server.
    #[error("the server could not find the requested resource")]
    NoRoute,
    /// 409: create found an object of that name.
    #[error("{resource} \"{name}\" already exists")]
    AlreadyExists {
        /// Plural resource name.
        resource: String,
        /// Object name.
        name: String,
    },
    /// 409: a precondition (resourceVersion, uid, state) did not hold.
    #[error("Operation cannot be fulfilled on {resource} \"{name}\": {detail}")]
    Conflict {
        /// Plural resource name.
        resource: String,
        /// Object name.
        name: String,
        /// Why.
        detail: String,
    },
    /// 422: the object is invalid; `kind` is e.g. `Pod`.
    #[error("{kind} \"{name}\" is invalid: {}", summary(.causes))]
    Invalid {
        /// Kind of the object.
        kind: String,
        /// Object name.
        name: String,
        /// The invalid fields.
        causes: Vec<Cause>,
    },
    /// 400: malformed body, bad parameter, unknown field under strict validation.
    #[error("{0}")]
    BadRequest(String),
    /// 403: the operation is never allowed on this object.
    #[error("{0}")]
    Forbidden(String),
    /// 403: a create in a namespace that is being deleted (Kubernetes' NamespaceLifecycle
    /// admission).
    #[error(
        "{resource} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated"
    )]
    NamespaceTerminating {
        /// Plural resource name.
        resource: String,
        /// Object name.
        name: String,
        /// The terminating namespace.
        namespace: String,
    },
    /// 504: a read or watch at a resourceVersion the store has not reached.
    #[error("Timeout: Too large resource version: {requested}, current: {current}")]
    TooLargeResourceVersion {
        /// The resourceVersion asked for.
        requested: u64,
        /// The store's.
        current: u64,
    },
    /// 405: the resource does not support this verb.
    #[error("{0}")]
    MethodNotAllowed(String),
    /// 410: a watch's resourceVersion is older than the history.
    #[error("{0}")]
    Expired(String),
    /// 406: no media type the client accepts can be served.
    #[error("{0}")]
    NotAcceptable(String),
    /// 413: the body is larger than the server accepts.
    /// (kube-apiserver's message.)
    #[error("Request entity too large: limit is {limit}")]
    TooLarge {
        /// Bytes received before giving up.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// 415: a Content-Type the verb does not accept.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 503: a dependency (e.g. the log source) cannot serve now.
    #[error("{0}")]
    Unavailable(String),
    /// 429: refused for now, to be tried again (an eviction its disruption budget does
    /// not allow); `cause` is the budget's reason, `retry_after_seconds` 0 for none.
    #[error("{message}")]
    TooManyRequests {
        /// kube-apiserver's message.
        message: String,
        /// The `DisruptionBudget` cause's message, if any.
        cause: Option<String>,
        /// `details.retryAfterSeconds` (left out when 0).
        retry_after_seconds: u32,
    },
    /// 504: an operation gave up after too many conflicts.
    #[error("{0}")]
    Timeout(String),
    /// 500: the store failed; nothing was changed.
    #[error("{0}")]
    Internal(String),
}

fn summary(causes: &[Cause]) -> String {
    match causes {
        [one] => one.to_string(),
        many => {
            let parts: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

impl ApiError {
    /// The HTTP status code and Kubernetes reason of this error.
    pub fn code_and_reason(&self) -> (u16, &'static str) {
        match self {
            Self::NotFound { .. } | Self::NoRoute => (404, "NotFound"),
            Self::AlreadyExists { .. } => (409, "AlreadyExists"),
            Self::Conflict { .. } => (409, "Conflict"),
            Self::Invalid { .. } => (422, "Invalid"),
            Self::BadRequest(_) => (400, "BadRequest"),
            Self::Forbidden(_) | Self::NamespaceTerminating { .. } => (403, "Forbidden"),
            Self::TooLargeResourceVersion { .. } | Self::Timeout(_) => (504, "Timeout"),
            Self::TooManyRequests { .. } => (429, "TooManyRequests"),
            Self::MethodNotAllowed(_) => (405, "MethodNotAllowed"),
            Self::Expired(_) => (410, "Expired"),
            Self::NotAcceptable(_) => (406, "NotAcceptable"),
            Self::TooLarge { .. } => (413, "RequestEntityTooLarge"),
            Self::UnsupportedMediaType(_) => (415, "UnsupportedMediaType"),
            Self::Unavailable(_) => (503, "ServiceUnavailable"),
            Self::Internal(_) => (500, "InternalError"),
        }
    }

    /// A stale-resourceVersion conflict, worded as Kubernetes words it.
    pub fn stale(resource: &str, name: &str) -> Self {
        Self::Conflict {
            resource: resource.into(),
            name: name.into(),
            detail: "the object has been modified; please apply your changes to the latest version and try again".into(),
        }
    }

    /// The `Status` object (`v1`) for this error.
    pub fn to_status(&self) -> Value {
        let (code, reason) = self.code_and_reason();
        let details = match self {
            Self::NotFound { resource, name }
            | Self::AlreadyExists { resource, name }
            | Self::Conflict { resource, name, .. } => {
                // A resource of a named group (`podmetrics.metrics.k8s.io`) is
                // split as kube's GroupResource is: kind `podmetrics`, its group.
                match resource.split_once('.') {
                    Some((kind, group)) => json!({"name": name, "group": group, "kind": kind}),
                    None => json!({"name": name, "kind": resource}),
                }
            }
            Self::Invalid { kind, name, causes } => {
                // A kind of a named group is qualified in the message
                // (`Deployment.apps "x" is invalid`) and split in the details.
                let (kind, group) = kind.split_once('.').unwrap_or((kind, ""));
                let mut d = json!({
                    "name": name,
                    "kind": kind,
                    "causes": causes.iter().map(|c| json!({
                        "reason": c.kind.reason(),
                        "message": c.message,
                        "field": c.field,
                    })).collect::<Vec<_>>(),
                });
                if !group.is_empty() {
                    d["group"] = group.into();
                }
                d
            }
            Self::NamespaceTerminating {
                resource,
                name,
                namespace,
            } => json!({
                "name": name,
                "kind": resource,
                "causes": [{
                    "reason": "NamespaceTerminating",
                    "message": format!("namespace {namespace} is being terminated"),
                    "field": "metadata.namespace",
                }],
            }),
            Self::TooLargeResourceVersion { .. } => json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            }),
            Self::TooManyRequests {
                cause,
                retry_after_seconds,
                ..
            } => {
                let mut d = json!({});
                if let Some(c) = cause {
                    d["causes"] = json!([{"reason": "DisruptionBudget", "message": c}]);
                }
                if *retry_after_seconds > 0 {
                    d["retryAfterSeconds"] = json!(retry_after_seconds);
                }
                d
            }
            Self::Timeout(_) => json!({"retryAfterSeconds": 10}),
            // kube-apiserver's answer for a path it does not serve carries empty details.
            Self::NoRoute => json!({}),
            _ => Value::Null,
        };
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.to_string(),
            "reason": reason,
            "code": code,
        });
        if !details.is_null() {
            status["details"] = details;
        }
        status
    }

    /// Maps a store failure; the resource and name come from the store key
    /// (`pods/NS/NAME`, `nodes/NAME`).
    pub(crate) fn from_store(e: StoreError) -> Self {
        fn split(key: &str) -> (String, String) {
            let resource = key.split('/').next().unwrap_or("").to_string();
            let name = key.rsplit('/').next().unwrap_or("").to_string();
            (resource, name)
        }
        match e {
            StoreError::NotFound(key) => {
                let (resource, name) = split(&key);
                Self::NotFound { resource, name }
            }
            StoreError::AlreadyExists(key) => {
                let (resource, name) = split(&key);
                Self::AlreadyExists { resource, name }
            }
            StoreError::Conflict { key, .. } => {
                let (resource, name) = split(&key);
                Self::stale(&resource, &name)
            }
            StoreError::Expired { .. } => Self::Expired(e.to_string()),
            StoreError::NotEmpty(prefix) => Self::Conflict {
                resource: "namespaces".into(),
                name: prefix
                    .trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or("")
                    .into(),
                detail: format!("objects remain under {prefix}"),
            },
            StoreError::Malformed(_) | StoreError::Storage(_) | StoreError::Closed => {
                Self::Internal(e.to_string())
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (code, _) = self.code_and_reason();
        let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(self.to_status())).into_response()
    }
}
