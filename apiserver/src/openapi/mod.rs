//! OpenAPI v2 (`/openapi/v2`, JSON or gnostic protobuf) and v3 (`/openapi/v3`, one
//! document per group-version: `api/v1`, `apis/rbac.authorization.k8s.io/v1`), with the schemas of every served kind generated from
//! k8s-openapi's types (`schemas.rs`).
//!
//! What kubectl reads here: `explain` walks the v3 schemas (found by their
//! `x-kubernetes-group-version-kind`); `create`/`apply`/`replace` leave validation to the
//! server when the kind's PATCH operation lists the `fieldValidation` parameter, and
//! kubectl 1.27 and 1.28 load the v2 document (as protobuf) before they look. The PATCH
//! request body deliberately does not list strategic merge patch: the generated schemas
//! carry no `x-kubernetes-patch-merge-key`, so kubectl computes `apply` patches from its
//! built-in type metadata instead.

mod gnostic;
mod schemas;

use std::hash::{Hash, Hasher};
use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::discovery::KUBERNETES_VERSION;
use crate::error::ApiError;
use schemas::{Flavour, Served};

/// What client-go asks for, and the two spellings kube-apiserver accepts.
const PROTO_V2_ASKED: [&str; 2] = [
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
];
/// The Content-Type kube-apiserver labels the protobuf with (never the `@` form).
const PROTO_V2_CONTENT_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// One encoded document and its entity tag.
struct Doc {
    bytes: Vec<u8>,
    etag: String,
}

impl Doc {
    fn new(bytes: Vec<u8>) -> Self {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        bytes.hash(&mut h);
        Self {
            etag: format!("{:016X}", h.finish()),
            bytes,
        }
    }
}

struct Docs {
    v2_json: Doc,
    v2_proto: Doc,
    /// Each group-version's v3 document by its path (`api/v1`, `apis/GROUP/VERSION`).
    v3: Vec<(String, Doc)>,
}

/// The documents, built on first use: they depend only on the types compiled in.
fn docs() -> &'static Docs {
    static DOCS: OnceLock<Docs> = OnceLock::new();
    DOCS.get_or_init(|| {
        let v2 = v2_document();
        Docs {
            v2_json: Doc::new(serde_json::to_vec(&v2).unwrap_or_default()),
            v2_proto: Doc::new(gnostic::document(&v2)),
            v3: v3_documents()
                .into_iter()
                .map(|(path, doc)| (path, Doc::new(serde_json::to_vec(&doc).unwrap_or_default())))
                .collect(),
        }
    })
}

fn info() -> Value {
    let (major, minor) = KUBERNETES_VERSION;
    json!({"title": "Kubernetes", "version": format!("v{major}.{minor}.0")})
}

/// The query parameters every write operation takes.
const WRITE_PARAMS: [(&str, &str); 4] = [
    ("dryRun", "string"),
    ("fieldManager", "string"),
    ("fieldValidation", "string"),
    ("force", "boolean"),
];

fn gvk(s: &Served) -> Value {
    json!({"group": s.group, "version": s.version, "kind": s.kind})
}

/// Kubernetes' operation ids: `patchCoreV1Pod`, `patchRbacAuthorizationV1Role`,
/// `readMetricsV1beta1PodMetrics`.
fn operation_id(verb: &str, s: &Served) -> String {
    let group: String = if s.group.is_empty() {
        "Core".into()
    } else {
        s.group
            .trim_end_matches(".k8s.io")
            .split('.')
            .map(capitalised)
            .collect()
    };
    format!("{verb}{group}{}{}", capitalised(s.version), s.kind)
}

/// Where a group-version's v3 document is, relative to `/openapi/v3/`.
fn group_version_path(s: &Served) -> String {
    if s.group.is_empty() {
        format!("api/{}", s.version)
    } else {
        format!("apis/{}/{}", s.group, s.version)
    }
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
        .unwrap_or_default()
}

fn v2_document() -> Value {
    let (served, definitions) = schemas::definitions(Flavour::V2);
    let mut paths = serde_json::Map::new();
    for s in &served {
        if s.read_only {
            let op = json!({
                "operationId": operation_id("read", s),
                "produces": ["application/json", "application/yaml"],
                "responses": {"200": {"description": "OK", "schema": {"$ref": format!("#/definitions/{}", s.schema)}}},
                "x-kubernetes-action": "get",
                "x-kubernetes-group-version-kind": gvk(s),
            });
            paths.insert(s.path.clone(), json!({"get": op}));
            continue;
        }
        let mut params: Vec<Value> = WRITE_PARAMS
            .iter()
            .map(|(name, ty)| json!({"name": name, "in": "query", "type": ty, "uniqueItems": true}))
            .collect();
        params.push(
            json!({"name": "body", "in": "body", "required": true, "schema": {"type": "object"}}),
        );
        let op = json!({
            "operationId": operation_id("patch", s),
            "consumes": ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"],
            "produces": ["application/json", "application/yaml"],
            "parameters": params,
            "responses": {"200": {"description": "OK", "schema": {"$ref": format!("#/definitions/{}", s.schema)}}},
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk(s),
        });
        paths.insert(s.path.clone(), json!({"patch": op}));
    }
    json!({"swagger": "2.0", "info": info(), "paths": paths, "definitions": definitions})
}

/// One v3 document per group-version, each with every schema (kube-apiserver's hold
/// what their kinds reference; all of them is a superset kubectl reads the same way).
fn v3_documents() -> Vec<(String, Value)> {
    let (served, schemas) = schemas::definitions(Flavour::V3);
    let mut docs: Vec<(String, serde_json::Map<String, Value>)> = Vec::new();
    for s in &served {
        let gv = group_version_path(s);
        let at = match docs.iter().position(|(p, _)| *p == gv) {
            Some(at) => at,
            None => {
                docs.push((gv, serde_json::Map::new()));
                docs.len() - 1
            }
        };
        let paths = &mut docs[at].1;
        let response = json!({"200": {"description": "OK", "content": {"application/json": {"schema": {
            "$ref": format!("#/components/schemas/{}", s.schema)
        }}}}});
        if s.read_only {
            let op = json!({
                "operationId": operation_id("read", s),
                "x-kubernetes-action": "get",
                "x-kubernetes-group-version-kind": gvk(s),
                "responses": response,
            });
            paths.insert(s.path.clone(), json!({"get": op}));
            continue;
        }
        let params: Vec<Value> = WRITE_PARAMS
            .iter()
            .map(|(name, ty)| json!({"name": name, "in": "query", "schema": {"type": ty, "uniqueItems": true}}))
            .collect();
        let op = json!({
            "operationId": operation_id("patch", s),
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk(s),
            "parameters": params,
            "requestBody": {"content": {
                "application/apply-patch+yaml": {"schema": {"type": "object"}},
                "application/json-patch+json": {"schema": {"type": "object"}},
                "application/merge-patch+json": {"schema": {"type": "object"}},
            }, "required": true},
            "responses": response,
        });
        paths.insert(s.path.clone(), json!({"patch": op}));
    }
    docs.into_iter()
        .map(|(gv, paths)| {
            let doc = json!({"openapi": "3.0.0", "info": info(), "paths": paths, "components": {"schemas": schemas}});
            (gv, doc)
        })
        .collect()
}

/// A document answered with its ETag; 304 when the client holds it already.
fn serve(doc: &Doc, content_type: &'static str, headers: &HeaderMap, immutable: bool) -> Response {
    let etag = format!("\"{}\"", doc.etag);
    let cached = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut resp = if cached {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, Body::from(doc.bytes.clone())).into_response()
    };
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    if immutable {
        h.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, immutable"),
        );
    }
    resp
}

/// `GET /openapi/v2`: JSON, or gnostic protobuf when asked for; 406 for anything else.
pub(crate) async fn v2(headers: HeaderMap) -> Result<Response, ApiError> {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let ranges: Vec<&str> = accept
        .split(',')
        .map(|r| r.split(';').next().unwrap_or("").trim())
        .collect();
    if ranges.iter().any(|r| PROTO_V2_ASKED.contains(r)) {
        return Ok(serve(
            &docs().v2_proto,
            PROTO_V2_CONTENT_TYPE,
            &headers,
            false,
        ));
    }
    if accept.is_empty()
        || ranges
            .iter()
            .any(|r| matches!(*r, "application/json" | "*/*" | "application/*"))
    {
        return Ok(serve(&docs().v2_json, "application/json", &headers, false));
    }
    Err(ApiError::NotAcceptable(format!(
        "only the following media types are accepted: application/json, {PROTO_V2_CONTENT_TYPE}"
    )))
}

/// `GET /openapi/v3`.
pub(crate) async fn index() -> Response {
    let paths: serde_json::Map<String, Value> = docs()
        .v3
        .iter()
        .map(|(gv, doc)| {
            let url = format!("/openapi/v3/{gv}?hash={}", doc.etag);
            (gv.clone(), json!({"serverRelativeURL": url}))
        })
        .collect();
    crate::http::respond::json(StatusCode::OK, &json!({ "paths": paths }))
}

/// `GET /openapi/v3/api/v1`.
pub(crate) async fn core_v1(query: HashQuery, headers: HeaderMap) -> Response {
    group_version("api/v1", query, headers)
}

/// `GET /openapi/v3/apis/{group}/{version}`.
pub(crate) async fn apis(
    axum::extract::Path((group, version)): axum::extract::Path<(String, String)>,
    query: HashQuery,
    headers: HeaderMap,
) -> Response {
    group_version(&format!("apis/{group}/{version}"), query, headers)
}

type HashQuery = axum::extract::Query<std::collections::HashMap<String, String>>;

/// A group-version's document; with the current `hash` it may be cached for good, with
/// a stale one it moved (301 to the current URL), as kube-apiserver answers.
fn group_version(gv: &str, axum::extract::Query(q): HashQuery, headers: HeaderMap) -> Response {
    let Some((_, doc)) = docs().v3.iter().find(|(p, _)| p == gv) else {
        return ApiError::NoRoute.into_response();
    };
    match q.get("hash") {
        Some(h) if *h != doc.etag => {
            let mut resp = StatusCode::MOVED_PERMANENTLY.into_response();
            let to = format!("/openapi/v3/{gv}?hash={}", doc.etag);
            if let Ok(v) = HeaderValue::from_str(&to) {
                resp.headers_mut().insert(header::LOCATION, v);
            }
            resp
        }
        Some(_) => serve(doc, "application/json", &headers, true),
        None => serve(doc, "application/json", &headers, false),
    }
}
