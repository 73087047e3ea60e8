//! Refuses, from the [`fields`] table, every pod field mesopod cannot honour.
//!
//! The spec is walked as JSON, the shape users wrote it in, so the field paths are
//! Kubernetes' own (`spec.volumes[0].persistentVolumeClaim`). A field the table does not
//! know is left alone: the schema walk test keeps the table complete.

use k8s_openapi::api::core::v1::PodSpec;
use serde_json::Value;

use super::Causes;
use super::fields::{self, Rule};
use crate::error::CauseKind;

/// Appends a cause for every field of `spec` that [`fields::FIELDS`] refuses.
pub(super) fn check_supported(causes: &mut Causes, spec: &PodSpec) {
    // A typed PodSpec always serialises; a failure would only drop refusals.
    if let Ok(value) = serde_json::to_value(spec) {
        walk(causes, "PodSpec", &value, "spec");
    }
}

fn walk(causes: &mut Causes, ty: &str, value: &Value, path: &str) {
    let Value::Object(map) = value else { return };
    for (name, v) in map {
        if absent(v) {
            continue;
        }
        let Some(field) = fields::lookup(ty, name) else {
            continue;
        };
        let here = format!("{path}.{name}");
        match field.rule {
            Rule::Honoured | Rule::Ignored => {}
            Rule::Nested(inner) => match v {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        walk(causes, inner, item, &format!("{here}[{i}]"));
                    }
                }
                _ => walk(causes, inner, v, &here),
            },
            Rule::Refused => causes.push(
                CauseKind::Forbidden,
                here,
                format!("Forbidden: not supported by mesopod: {}", field.why),
            ),
            Rule::NotYet => causes.push(
                CauseKind::Forbidden,
                here,
                format!("Forbidden: not supported by mesopod yet: {}", field.why),
            ),
            Rule::Only(allowed) => {
                let text = scalar(v);
                if !allowed.contains(&text.as_str()) {
                    causes.unsupported(here, &text, allowed);
                }
            }
            Rule::Keys(allowed) => {
                let Value::Object(entries) = v else { continue };
                for key in entries.keys() {
                    if !allowed.contains(&key.as_str()) {
                        causes.push(
                            CauseKind::Forbidden,
                            format!("{here}[{key}]"),
                            format!("Forbidden: not supported by mesopod: {}", field.why),
                        );
                    }
                }
            }
        }
    }
}

/// Unset, or an empty list: nothing is asked for. (An empty object still asks: `nfs: {}`
/// is an NFS volume.)
fn absent(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
