//! Patches: JSON merge patch, JSON patch, strategic merge patch and server-side apply
//! (common case), each turning the live object and a patch body into the new object.

mod strategic;

use serde_json::Value;

use crate::decode;
use crate::error::ApiError;

pub use strategic::strategic_merge;

/// The patch formats the shim accepts, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// The patch type a Content-Type names; 415 for anything else.
    pub fn from_content_type(ct: &str) -> Result<Self, ApiError> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/json-patch+json" => Ok(Self::Json),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(Self::Apply),
            other => Err(ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {other:?})"
            ))),
        }
    }
}

/// Parses a patch body of type `ty` (400 on malformed input).
pub fn parse_patch(ty: PatchType, body: &[u8]) -> Result<Value, ApiError> {
    let ct = if ty == PatchType::Apply {
        "application/apply-patch+yaml"
    } else {
        "application/json"
    };
    let v = decode::parse_body(body, ct)?;
    match ty {
        PatchType::Json if !v.is_array() => Err(ApiError::BadRequest(
            "a JSON patch must be an array of operations".into(),
        )),
        PatchType::Json => Ok(v),
        _ if !v.is_object() => Err(ApiError::BadRequest(
            "the patch must be a JSON object".into(),
        )),
        _ => Ok(v),
    }
}

/// Applies `patch` (already parsed) to `live`; 422-free: validation of the result is the
/// caller's job. JSON patch failures (a failed `test`, a missing path) are 422 in
/// Kubernetes; here they are reported as [`ApiError::Invalid`] on the patch itself.
pub fn apply(
    ty: PatchType,
    live: &Value,
    patch: &Value,
    kind: &str,
    name: &str,
) -> Result<Value, ApiError> {
    match ty {
        PatchType::Merge => {
            let mut out = live.clone();
            json_patch::merge(&mut out, patch);
            Ok(out)
        }
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::BadRequest(format!("invalid JSON patch: {e}")))?;
            let mut out = live.clone();
            json_patch::patch(&mut out, &ops).map_err(|e| ApiError::Invalid {
                kind: kind.into(),
                name: name.into(),
                causes: vec![crate::error::Cause {
                    kind: crate::error::CauseKind::Invalid,
                    field: "patch".into(),
                    message: format!("Invalid value: \"json patch\": {e}"),
                }],
            })?;
            Ok(out)
        }
        PatchType::Strategic => strategic_merge(live, patch, kind),
        PatchType::Apply => apply_config(live, patch, kind),
    }
}

/// Server-side apply, common case: the applied configuration is merged onto the live
/// object field by field, lists by their Kubernetes merge keys. Field ownership
/// (`managedFields`) is not tracked, so a field dropped from the configuration stays.
fn apply_config(live: &Value, applied: &Value, kind: &str) -> Result<Value, ApiError> {
    let mut applied = applied.clone();
    strip_directives(&mut applied);
    strategic_merge(live, &applied, kind)
}

/// Removes `$`-keys so an applied configuration cannot smuggle patch directives.
fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}
