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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    /// `field|reason|message` of every cause for a pod with `spec`.
    fn causes(spec: serde_json::Value) -> Vec<String> {
        crate::validation::pod_causes(spec, |c| format!("{}|{:?}|{}", c.field, c.kind, c.message))
    }

    fn has(got: &[String], prefix: &str) {
        assert!(
            got.iter().any(|g| g.starts_with(prefix)),
            "no {prefix:?} in {got:#?}"
        );
    }

    #[test]
    fn one_refusal_per_class_names_the_field_in_kubernetes_words() {
        let got = causes(json!({
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}],
            "hostPID": true,
            "securityContext": {"sysctls": [{"name": "net.ipv4.ip_forward", "value": "1"}]},
            "volumes": [
                {"name": "ok", "emptyDir": {}},
                {"name": "pvc", "persistentVolumeClaim": {"claimName": "c"}},
                {"name": "nfs", "nfs": {"server": "s", "path": "/"}}
            ],
            "containers": [{
                "name": "c", "image": "i",
                "lifecycle": {"preStop": {"exec": {"command": ["true"]}}},
                "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}},
                "volumeMounts": [{"name": "ok", "mountPath": "/d", "mountPropagation": "HostToContainer"}],
                "env": [{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}]
            }]
        }));
        for want in [
            "spec.hostAliases|Forbidden|Forbidden: not supported by mesopod: ",
            "spec.hostPID|NotSupported|Unsupported value: \"true\": supported values: \"false\"",
            "spec.securityContext.sysctls|Forbidden|",
            "spec.volumes[1].persistentVolumeClaim|Forbidden|Forbidden: not supported by mesopod: there are no persistent volumes",
            "spec.volumes[2].nfs|Forbidden|",
            "spec.containers[0].lifecycle|Forbidden|Forbidden: not supported by mesopod yet: lifecycle hooks are issue #19",
            "spec.containers[0].resources.limits[nvidia.com/gpu]|Forbidden|",
            "spec.containers[0].volumeMounts[0].mountPropagation|NotSupported|Unsupported value: \"HostToContainer\": supported values: \"None\"",
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath|NotSupported|",
        ] {
            has(&got, want);
        }
        assert!(
            !got.iter().any(|g| g.starts_with("spec.volumes[0]")),
            "{got:#?}"
        );
        assert!(!got.iter().any(|g| g.contains("limits[cpu]")), "{got:#?}");
        assert_eq!(got.len(), 9, "{got:#?}");
    }

    #[test]
    fn what_the_executor_honours_is_accepted() {
        let got = causes(json!({
            "hostNetwork": true, "hostPID": false, "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": true,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]}},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": "k"}}]}},
            "securityContext": {"runAsUser": 1000, "windowsOptions": {"runAsUserName": "x"},
                "seccompProfile": {"type": "RuntimeDefault"}},
            "volumes": [
                {"name": "e", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
                {"name": "h", "hostPath": {"path": "/srv"}},
                {"name": "c", "configMap": {"name": "cm"}},
                {"name": "s", "secret": {"secretName": "s"}},
                {"name": "d", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                {"name": "p", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}
            ],
            "containers": [{
                "name": "c", "image": "i", "stdin": false,
                "resources": {"requests": {"cpu": "1", "memory": "1Mi", "ephemeral-storage": "1Gi"}, "limits": {"memory": "2Mi"}},
                "volumeMounts": [{"name": "e", "mountPath": "/e", "mountPropagation": "None", "subPath": "x"}],
                "envFrom": [{"configMapRef": {"name": "cm"}}],
                "env": [
                    {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                    {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                    {"name": "C", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
                ]
            }]
        }));
        assert!(got.is_empty(), "{got:#?}");
    }
}
