//! Pod validation: Kubernetes' own rules for a pod spec, then mesopod's refusals
//! ([`super::support`]) of what the executor cannot honour.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use super::Causes;
use super::names::{
    QUALIFIED_NAME_MSG, check_label_name, check_labels, check_metadata, check_subdomain_name,
    is_qualified_name,
};
use crate::error::{ApiError, CauseKind};

/// Validates a pod for create or update; `Err` is the 422 answer.
pub fn validate_pod(pod: &Pod) -> Result<(), ApiError> {
    let mut causes = Causes::default();
    check_metadata(&mut causes, &pod.metadata, check_subdomain_name);
    match &pod.spec {
        None => causes.required("spec"),
        Some(spec) => {
            // kube-apiserver's ValidateDNS1123Label: the executor sets it as the
            // containers' hostname (an Indexed Job's pods get `<job>-<index>`).
            if let Some(h) = spec.hostname.as_deref()
                && !super::names::is_dns1123_label(h)
            {
                causes.invalid("spec.hostname", h, super::names::DNS1123_LABEL_MSG);
            }
            check_pod_spec(&mut causes, spec);
        }
    }
    causes.into_result("Pod", pod.metadata.name.as_deref().unwrap_or(""))
}

fn check_pod_spec(causes: &mut Causes, spec: &PodSpec) {
    super::support::check_supported(causes, spec);
    super::seccomp::check(causes, spec);
    let mut volumes = HashSet::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let before = causes.0.len();
        super::volumes::check_volume_source(causes, &format!("spec.volumes[{i}]"), v);
        let field = format!("spec.volumes[{i}].name");
        if v.name.is_empty() {
            causes.required(field);
        } else {
            check_label_name(causes, &field, &v.name);
            if volumes.contains(v.name.as_str()) {
                causes.push(
                    CauseKind::Duplicate,
                    field,
                    format!("Duplicate value: \"{}\"", v.name),
                );
            }
        }
        // As in Kubernetes, an invalid volume is not one a mount can name: its mounts
        // are told `Not found` too.
        if causes.0.len() == before {
            volumes.insert(v.name.as_str());
        }
    }
    super::security::check_pod_security_context(causes, spec.security_context.as_ref());
    for (name, q) in spec.overhead.iter().flatten() {
        // validateOverhead reuses the container rules on `limits`, hence the path.
        check_nonnegative(causes, format!("spec.overhead.limits[{name}]"), &q.0);
    }
    if spec.containers.is_empty() {
        causes.required("spec.containers");
    }
    let mut names = HashSet::new();
    let inits = spec.init_containers.as_ref().map_or(0, Vec::len);
    for (n, (path, c)) in super::containers_with_paths(spec).enumerate() {
        check_container(causes, &path, c, &volumes);
        super::probes::check_probes(causes, &path, c, n < inits);
        if !c.name.is_empty() && !names.insert(c.name.as_str()) {
            causes.push(
                CauseKind::Duplicate,
                format!("{path}.name"),
                format!("Duplicate value: \"{}\"", c.name),
            );
        }
    }
    if let Some(p) = spec.restart_policy.as_deref()
        && !matches!(p, "Always" | "OnFailure" | "Never")
    {
        causes.unsupported("spec.restartPolicy", p, &["Always", "OnFailure", "Never"]);
    }
    if let Some(p) = spec.dns_policy.as_deref() {
        const DNS: [&str; 4] = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"];
        if !DNS.contains(&p) {
            causes.unsupported("spec.dnsPolicy", p, &DNS);
        }
    }
    if let Some(g) = spec.termination_grace_period_seconds
        && g < 0
    {
        causes.invalid(
            "spec.terminationGracePeriodSeconds",
            &g.to_string(),
            "must be greater than or equal to 0",
        );
    }
    if let Some(d) = spec.active_deadline_seconds
        && d < 1
    {
        causes.invalid(
            "spec.activeDeadlineSeconds",
            &d.to_string(),
            "must be between 1 and 2147483647, inclusive",
        );
    }
    check_labels(causes, "spec.nodeSelector", spec.node_selector.as_ref());
    if let Some(node) = spec.node_name.as_deref()
        && !node.is_empty()
    {
        check_subdomain_name(causes, "spec.nodeName", node);
    }
    for (i, t) in spec.tolerations.iter().flatten().enumerate() {
        if let Some(op) = t.operator.as_deref()
            && !matches!(op, "Exists" | "Equal")
        {
            causes.unsupported(
                format!("spec.tolerations[{i}].operator"),
                op,
                &["Equal", "Exists"],
            );
        }
        if let Some(e) = t.effect.as_deref()
            && !matches!(e, "" | "NoSchedule" | "PreferNoSchedule" | "NoExecute")
        {
            causes.unsupported(
                format!("spec.tolerations[{i}].effect"),
                e,
                &["NoSchedule", "PreferNoSchedule", "NoExecute"],
            );
        }
    }
}

fn check_container(causes: &mut Causes, path: &str, c: &Container, volumes: &HashSet<&str>) {
    if c.name.is_empty() {
        causes.required(format!("{path}.name"));
    } else {
        check_label_name(causes, &format!("{path}.name"), &c.name);
    }
    if c.image.as_deref().is_none_or(|i| i.trim().is_empty()) {
        causes.required(format!("{path}.image"));
    }
    if let Some(p) = c.image_pull_policy.as_deref()
        && !matches!(p, "Always" | "IfNotPresent" | "Never")
    {
        causes.unsupported(
            format!("{path}.imagePullPolicy"),
            p,
            &["Always", "IfNotPresent", "Never"],
        );
    }
    for (i, port) in c.ports.iter().flatten().enumerate() {
        let field = format!("{path}.ports[{i}]");
        if !(1..=65535).contains(&port.container_port) {
            causes.invalid(
                format!("{field}.containerPort"),
                &port.container_port.to_string(),
                "must be between 1 and 65535, inclusive",
            );
        }
        if let Some(h) = port.host_port
            && !(0..=65535).contains(&h)
        {
            causes.invalid(
                format!("{field}.hostPort"),
                &h.to_string(),
                "must be between 1 and 65535, inclusive",
            );
        }
        if let Some(p) = port.protocol.as_deref()
            && !matches!(p, "TCP" | "UDP" | "SCTP")
        {
            causes.unsupported(format!("{field}.protocol"), p, &["SCTP", "TCP", "UDP"]);
        }
    }
    for (i, e) in c.env.iter().flatten().enumerate() {
        if e.name.is_empty() {
            causes.required(format!("{path}.env[{i}].name"));
        } else if e.name.contains('=') || e.name.chars().any(|ch| !ch.is_ascii_graphic()) {
            causes.invalid(format!("{path}.env[{i}].name"), &e.name, "a valid environment variable name must consist only of printable ASCII characters other than '='");
        }
        if let Some(f) = e.value_from.as_ref().and_then(|v| v.field_ref.as_ref()) {
            check_env_field_path(
                causes,
                &format!("{path}.env[{i}].valueFrom.fieldRef.fieldPath"),
                &f.field_path,
            );
        }
    }
    super::volumes::check_mounts(causes, path, c, volumes);
    super::security::check_security_context(causes, path, c.security_context.as_ref());
    if let Some(r) = &c.resources {
        let mut parsed: BTreeMap<(&str, &str), f64> = BTreeMap::new();
        for (which, map) in [("limits", &r.limits), ("requests", &r.requests)] {
            for (name, q) in map.iter().flatten() {
                let field = format!("{path}.resources.{which}[{name}]");
                match quantity::Quantity::parse(&q.0).map(|q| q.to_f64()) {
                    Err(_) => causes.invalid_quantity(field, &q.0),
                    Ok(v) if v < 0.0 => {
                        causes.invalid(field, &q.0, "must be greater than or equal to 0")
                    }
                    Ok(v) => {
                        parsed.insert((which, name.as_str()), v);
                    }
                }
            }
        }
        for ((which, name), request) in &parsed {
            if *which != "requests" {
                continue;
            }
            if let Some(limit) = parsed.get(&("limits", name))
                && request > limit
            {
                let raw = r
                    .requests
                    .as_ref()
                    .and_then(|m| m.get(*name))
                    .map(|q| q.0.clone())
                    .unwrap_or_default();
                let lim = r
                    .limits
                    .as_ref()
                    .and_then(|m| m.get(*name))
                    .map(|q| q.0.clone())
                    .unwrap_or_default();
                causes.invalid(
                    format!("{path}.resources.requests"),
                    &raw,
                    &format!("must be less than or equal to {name} limit of {lim}"),
                );
            }
        }
    }
}

/// `ValidateNonnegativeQuantity`, after the quantity parsed.
fn check_nonnegative(causes: &mut Causes, field: String, text: &str) {
    match quantity::Quantity::parse(text) {
        Err(_) => causes.invalid_quantity(field, text),
        Ok(q) if q.is_negative() => {
            causes.invalid(field, text, "must be greater than or equal to 0")
        }
        Ok(_) => {}
    }
}

/// The pod fields `env[].valueFrom.fieldRef` may name, as Kubernetes lists them.
const ENV_FIELD_PATHS: [&str; 9] = [
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

fn check_env_field_path(causes: &mut Causes, field: &str, path: &str) {
    // One label or annotation by key is allowed too: `metadata.labels['app']`.
    let subscript = ["metadata.labels['", "metadata.annotations['"]
        .iter()
        .find_map(|p| path.strip_prefix(p))
        .and_then(|rest| rest.strip_suffix("']"));
    match subscript {
        Some(key) if !is_qualified_name(key) => causes.invalid(field, key, QUALIFIED_NAME_MSG),
        Some(_) => {}
        None if ENV_FIELD_PATHS.contains(&path) => {}
        None => causes.unsupported(field, path, &ENV_FIELD_PATHS),
    }
}

/// What a pod update may change in `spec`, quoted from Kubernetes.
const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Refuses spec changes a pod update may not make (everything but images, the active
/// deadline, added tolerations and the grace period). Binding goes through its own path.
pub fn validate_pod_update(old: &Pod, new: &Pod) -> Result<(), ApiError> {
    let mut causes = Causes::default();
    let mask = |spec: &Option<PodSpec>| {
        let mut s = spec.clone().unwrap_or_default();
        for c in s
            .containers
            .iter_mut()
            .chain(s.init_containers.iter_mut().flatten())
        {
            c.image = None;
        }
        s.active_deadline_seconds = None;
        s.tolerations = None;
        s.termination_grace_period_seconds = None;
        s
    };
    if mask(&old.spec) != mask(&new.spec) {
        causes.push(
            CauseKind::Forbidden,
            "spec",
            format!("Forbidden: {POD_UPDATE_FORBIDDEN}"),
        );
    }
    let old_tol = old
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    let new_tol = new
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    if old_tol.iter().any(|t| !new_tol.contains(t)) {
        causes.push(
            CauseKind::Forbidden,
            "spec.tolerations",
            "Forbidden: existing toleration can not be modified except its tolerationSeconds",
        );
    }
    causes.into_result("Pod", old.metadata.name.as_deref().unwrap_or(""))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn fields(p: &Pod) -> Vec<String> {
        match validate_pod(p) {
            Ok(()) => Vec::new(),
            Err(ApiError::Invalid { causes, .. }) => causes
                .into_iter()
                .map(|c| format!("{}|{:?}", c.field, c.kind))
                .collect(),
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn a_minimal_pod_is_valid_and_each_broken_rule_names_its_field() {
        let good = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        );
        assert!(fields(&good).is_empty());

        let bad = pod(
            json!({"metadata": {"name": "P", "labels": {"ok": "not ok"}},
            "spec": {"restartPolicy": "Sometimes", "volumes": [{"name": "v"}, {"name": "v"}],
                "containers": [
                    {"name": "c", "image": "i", "ports": [{"containerPort": 0, "protocol": "ICMP"}],
                     "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1", "memory": "lots"}},
                     "volumeMounts": [{"name": "nope", "mountPath": "/x"}]},
                    {"name": "c"}]}}),
        );
        let got = fields(&bad);
        for want in [
            "metadata.name|Invalid",
            "metadata.labels|Invalid",
            "spec.restartPolicy|NotSupported",
            "spec.volumes[1].name|Duplicate",
            "spec.containers[0].ports[0].containerPort|Invalid",
            "spec.containers[0].ports[0].protocol|NotSupported",
            "spec.containers[0].resources.limits[memory]|Invalid",
            "spec.containers[0].resources.requests|Invalid",
            "spec.containers[0].volumeMounts[0].name|NotFound",
            "spec.containers[1].image|Required",
            "spec.containers[1].name|Duplicate",
        ] {
            assert!(got.iter().any(|g| g == want), "missing {want} in {got:#?}");
        }
        let empty = pod(json!({"metadata": {}, "spec": {"containers": []}}));
        assert_eq!(
            fields(&empty),
            ["metadata.name|Required", "spec.containers|Required"]
        );
    }

    #[test]
    fn a_negative_overhead_is_invalid_under_kubernetes_path() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "overhead": {"cpu": "-1", "memory": "1Mi"},
            "containers": [{"name": "c", "image": "i"}]}}));
        assert_eq!(fields(&p), ["spec.overhead.limits[cpu]|Invalid"]);
    }

    #[test]
    fn updates_may_change_images_and_add_tolerations_but_nothing_else() {
        let old = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}),
        );
        let image = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i:2"}],
            "tolerations": [{"key": "k", "operator": "Exists"}]}}),
        );
        assert!(validate_pod_update(&old, &image).is_ok());
        let port = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i:1", "ports": [{"containerPort": 1}]}]}}),
        );
        assert!(matches!(
            validate_pod_update(&old, &port),
            Err(ApiError::Invalid { .. })
        ));
        assert!(
            validate_pod_update(&image, &old).is_err(),
            "removing a toleration is forbidden"
        );
    }
}
