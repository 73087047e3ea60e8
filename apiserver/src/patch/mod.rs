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
        PatchType::Json => json_patch_bounded(live, patch, kind, name),
        PatchType::Strategic => strategic_merge(live, patch, kind),
        PatchType::Apply => apply_config(live, patch, kind),
    }
}

/// Most operations one JSON patch may hold (Kubernetes' own limit).
const MAX_JSON_PATCH_OPS: usize = 10_000;

/// How much `copy` operations may add to an object, in serialized bytes. Copies can
/// double a subtree per operation, so without a bound a small patch could exhaust
/// memory; no real object needs more than the largest body the server accepts.
const MAX_COPIED_BYTES: usize = crate::decode::MAX_BODY_BYTES;

/// Applies a JSON patch one operation at a time, refusing patches whose copies grow the
/// object past [`MAX_COPIED_BYTES`].
fn json_patch_bounded(
    live: &Value,
    patch: &Value,
    kind: &str,
    name: &str,
) -> Result<Value, ApiError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON patch: {e}")))?;
    if ops.0.len() > MAX_JSON_PATCH_OPS {
        return Err(ApiError::TooLarge {
            size: ops.0.len(),
            limit: MAX_JSON_PATCH_OPS,
        });
    }
    let invalid = |message: String| ApiError::Invalid {
        kind: kind.into(),
        name: name.into(),
        causes: vec![crate::error::Cause {
            kind: crate::error::CauseKind::Invalid,
            field: "patch".into(),
            message,
        }],
    };
    let mut out = live.clone();
    let mut copied = 0usize;
    for op in &ops.0 {
        if let json_patch::PatchOperation::Copy(copy) = op {
            let size = out
                .pointer(copy.from.as_str())
                .map(|v| serde_json::to_vec(v).map_or(0, |b| b.len()))
                .unwrap_or(0);
            copied = copied.saturating_add(size);
            if copied > MAX_COPIED_BYTES {
                return Err(invalid(format!(
                    "Invalid value: \"json patch\": copy operations would add more than {MAX_COPIED_BYTES} bytes"
                )));
            }
        }
        json_patch::patch(&mut out, std::slice::from_ref(op))
            .map_err(|e| invalid(format!("Invalid value: \"json patch\": {e}")))?;
    }
    Ok(out)
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_copies_cannot_blow_up_an_object() {
        let live =
            json!({"metadata": {"name": "p"}, "x": ["0123456789012345678901234567890123456789"]});
        let doubling: Vec<Value> = (0..40)
            .map(|_| json!({"op": "copy", "from": "/x", "path": "/x/-"}))
            .collect();
        let err = apply(PatchType::Json, &live, &Value::Array(doubling), "Pod", "p").unwrap_err();
        assert_eq!(err.code_and_reason().0, 422);
        let fine = json!([{"op": "copy", "from": "/x/0", "path": "/x/-"}]);
        let out = apply(PatchType::Json, &live, &fine, "Pod", "p").unwrap();
        assert_eq!(out["x"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn merge_patch_null_removes_and_apply_strips_directives() {
        let live = json!({"metadata": {"name": "p", "labels": {"a": "1"}}});
        let out = apply(
            PatchType::Merge,
            &live,
            &json!({"metadata": {"labels": {"a": null, "b": "2"}}}),
            "Pod",
            "p",
        )
        .unwrap();
        assert_eq!(out["metadata"]["labels"], json!({"b": "2"}));
        let out = apply(
            PatchType::Apply,
            &live,
            &json!({"metadata": {"$patch": "replace", "labels": {"c": "3"}}}),
            "Pod",
            "p",
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["name"], "p",
            "an applied configuration cannot replace whole maps"
        );
        assert_eq!(out["metadata"]["labels"], json!({"a": "1", "c": "3"}));
    }
}
