//! Validation as Kubernetes does it, for everything the shim supports: names (DNS-1123),
//! labels and annotations, required fields, unique container and volume names, ports,
//! parseable quantities, enumerated values, and which pod fields an update may change.
//!
//! Every check appends a [`Cause`] worded as Kubernetes words it; a non-empty list becomes
//! one 422 Invalid answer listing all of them.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::error::{ApiError, Cause, CauseKind};

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Kubernetes' limit on all annotations of one object together.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// Collects causes for one object.
#[derive(Debug, Default)]
pub(crate) struct Causes(pub(crate) Vec<Cause>);

impl Causes {
    pub(crate) fn push(
        &mut self,
        kind: CauseKind,
        field: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.0.push(Cause {
            kind,
            field: field.into(),
            message: message.into(),
        });
    }

    pub(crate) fn required(&mut self, field: impl Into<String>) {
        self.push(CauseKind::Required, field, "Required value");
    }

    pub(crate) fn invalid(&mut self, field: impl Into<String>, value: &str, detail: &str) {
        self.push(
            CauseKind::Invalid,
            field,
            format!("Invalid value: \"{value}\": {detail}"),
        );
    }

    pub(crate) fn unsupported(
        &mut self,
        field: impl Into<String>,
        value: &str,
        supported: &[&str],
    ) {
        let list: Vec<String> = supported.iter().map(|s| format!("\"{s}\"")).collect();
        self.push(
            CauseKind::NotSupported,
            field,
            format!(
                "Unsupported value: \"{value}\": supported values: {}",
                list.join(", ")
            ),
        );
    }

    /// `Ok` if nothing was found, else the 422 for `kind` `name`.
    pub(crate) fn into_result(self, kind: &str, name: &str) -> Result<(), ApiError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ApiError::Invalid {
                kind: kind.into(),
                name: name.into(),
                causes: self.0,
            })
        }
    }
}

fn is_alnum_lower(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// RFC 1123 label: at most 63 of `[a-z0-9-]`, alphanumeric at both ends.
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && is_alnum_lower(b[0])
        && is_alnum_lower(b[b.len() - 1])
        && b.iter().all(|&c| is_alnum_lower(c) || c == b'-')
}

/// RFC 1123 subdomain: at most 253 chars of dot-separated labels.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && is_alnum_lower(b[0])
                && is_alnum_lower(b[b.len() - 1])
                && b.iter().all(|&c| is_alnum_lower(c) || c == b'-')
        })
}

fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// A label or annotation key: `[prefix/]name` with a DNS-1123 subdomain prefix.
pub fn is_qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        Some((prefix, name)) => is_dns1123_subdomain(prefix) && is_name_part(name),
        None => is_name_part(s),
    }
}

/// A label value: empty, or a name part.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_name_part(s)
}

/// Checks an object name against the DNS-1123 subdomain rule.
pub(crate) fn check_subdomain_name(causes: &mut Causes, field: &str, name: &str) {
    if !is_dns1123_subdomain(name) {
        causes.invalid(field, name, DNS1123_SUBDOMAIN_MSG);
    }
}

/// Checks a name against the DNS-1123 label rule.
pub(crate) fn check_label_name(causes: &mut Causes, field: &str, name: &str) {
    if !is_dns1123_label(name) {
        causes.invalid(field, name, DNS1123_LABEL_MSG);
    }
}

fn check_labels(causes: &mut Causes, field: &str, labels: Option<&BTreeMap<String, String>>) {
    for (k, v) in labels.into_iter().flatten() {
        if !is_qualified_name(k) {
            causes.invalid(field, k, QUALIFIED_NAME_MSG);
        }
        if !is_label_value(v) {
            causes.invalid(field.to_string(), v, LABEL_VALUE_MSG);
        }
    }
}

/// Validates the metadata every object has; `name_rule` checks the name itself.
pub(crate) fn check_metadata(
    causes: &mut Causes,
    meta: &ObjectMeta,
    name_rule: fn(&mut Causes, &str, &str),
) {
    match meta.name.as_deref() {
        Some(name) if !name.is_empty() => name_rule(causes, "metadata.name", name),
        _ => causes.push(
            CauseKind::Required,
            "metadata.name",
            "Required value: name or generateName is required",
        ),
    }
    check_labels(causes, "metadata.labels", meta.labels.as_ref());
    let mut size = 0;
    for (k, v) in meta.annotations.iter().flatten() {
        if !is_qualified_name(k) {
            causes.invalid("metadata.annotations", k, QUALIFIED_NAME_MSG);
        }
        size += k.len() + v.len();
    }
    if size > ANNOTATIONS_MAX_BYTES {
        causes.push(
            CauseKind::TooLong,
            "metadata.annotations",
            format!("Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes"),
        );
    }
}

/// Validates a pod for create or update; `Err` is the 422 answer.
pub fn validate_pod(pod: &Pod) -> Result<(), ApiError> {
    let mut causes = Causes::default();
    check_metadata(&mut causes, &pod.metadata, check_subdomain_name);
    match &pod.spec {
        None => causes.required("spec"),
        Some(spec) => check_pod_spec(&mut causes, spec),
    }
    causes.into_result("Pod", pod.metadata.name.as_deref().unwrap_or(""))
}

fn check_pod_spec(causes: &mut Causes, spec: &PodSpec) {
    let mut volumes = HashSet::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let field = format!("spec.volumes[{i}].name");
        if v.name.is_empty() {
            causes.required(field);
        } else {
            check_label_name(causes, &field, &v.name);
            if !volumes.insert(v.name.as_str()) {
                causes.push(
                    CauseKind::Duplicate,
                    field,
                    format!("Duplicate value: \"{}\"", v.name),
                );
            }
        }
    }
    if spec.containers.is_empty() {
        causes.required("spec.containers");
    }
    let mut names = HashSet::new();
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c));
    let main = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.containers[{i}]"), c));
    for (path, c) in init.chain(main) {
        check_container(causes, &path, c, &volumes);
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
    }
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let field = format!("{path}.volumeMounts[{i}]");
        if m.name.is_empty() {
            causes.required(format!("{field}.name"));
        } else if !volumes.contains(m.name.as_str()) {
            causes.push(
                CauseKind::NotFound,
                format!("{field}.name"),
                format!("Not found: \"{}\"", m.name),
            );
        }
        if m.mount_path.is_empty() {
            causes.required(format!("{field}.mountPath"));
        }
    }
    if let Some(r) = &c.resources {
        let mut parsed: BTreeMap<(&str, &str), f64> = BTreeMap::new();
        for (which, map) in [("limits", &r.limits), ("requests", &r.requests)] {
            for (name, q) in map.iter().flatten() {
                let field = format!("{path}.resources.{which}[{name}]");
                match quantity::Quantity::parse(&q.0).map(|q| q.to_f64()) {
                    Err(_) => causes.invalid(
                        field,
                        &q.0,
                        &format!(
                            "quantities must match the regular expression '{}'",
                            quantity::PATTERN
                        ),
                    ),
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
    fn names_follow_rfc_1123() {
        assert!(is_dns1123_subdomain("web-1.example"));
        assert!(!is_dns1123_subdomain("Web"));
        assert!(!is_dns1123_subdomain("-web"));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
        assert!(is_dns1123_label("a-1"));
        assert!(!is_dns1123_label("a.b"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        assert!(is_qualified_name("mesopod.io/task-id"));
        assert!(is_qualified_name("app"));
        assert!(!is_qualified_name("a/b/c"));
        assert!(!is_qualified_name("Bad_Prefix/x"));
        assert!(is_label_value(""));
        assert!(!is_label_value("a b"));
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
