//! Kubernetes' rules for a pod's volume sources and a container's volume mounts
//! (`validateVolumeSource`, `validateKeyToPath`, `validateProjectionSources` and
//! `ValidateVolumeMounts` in `pkg/apis/core/validation`), with its messages and its field
//! paths, quirks included: a mount's `subPath` errors name `volumeMounts.subPath` without
//! the mount's index, and a downward API item's path errors name `downwardAPI.path`
//! without the item's, as kube-apiserver's do.
//!
//! These matter beyond parity: the executor writes item files and mounts sub-paths
//! inside the volume, so a path that climbs out of it (`..`, absolute) is refused here.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{
    Container, DownwardAPIVolumeFile, KeyToPath, ProjectedVolumeSource, Volume,
};

use super::Causes;

/// `fileModeErrorMsg`.
const FILE_MODE_MSG: &str = "must be a number between 0 and 0777 (octal), both inclusive";

/// Checks the source of volume `v` at `path` (`spec.volumes[0]`).
pub(super) fn check_volume_source(causes: &mut Causes, path: &str, v: &Volume) {
    if let Some(size) = v.empty_dir.as_ref().and_then(|e| e.size_limit.as_ref()) {
        let field = format!("{path}.emptyDir.sizeLimit");
        match quantity::Quantity::parse(&size.0) {
            Err(_) => causes.invalid_quantity(field, &size.0),
            Ok(q) if q.is_negative() => {
                causes.forbidden(field, "SizeLimit field must be a valid resource quantity")
            }
            Ok(_) => {}
        }
    }
    if let Some(h) = &v.host_path {
        let field = format!("{path}.hostPath.path");
        if h.path.is_empty() {
            causes.required(field);
        } else {
            check_no_backsteps(causes, &field, &h.path);
        }
    }
    if let Some(s) = &v.secret {
        let field = format!("{path}.secret");
        if s.secret_name.as_deref().is_none_or(str::is_empty) {
            causes.required(format!("{field}.secretName"));
        }
        check_mode(causes, &format!("{field}.defaultMode"), s.default_mode);
        check_items(causes, &format!("{field}.items"), s.items.as_deref());
    }
    if let Some(c) = &v.config_map {
        let field = format!("{path}.configMap");
        if c.name.is_empty() {
            causes.required(format!("{field}.name"));
        }
        check_mode(causes, &format!("{field}.defaultMode"), c.default_mode);
        check_items(causes, &format!("{field}.items"), c.items.as_deref());
    }
    if let Some(d) = &v.downward_api {
        let field = format!("{path}.downwardAPI");
        check_mode(causes, &format!("{field}.defaultMode"), d.default_mode);
        for file in d.items.iter().flatten() {
            check_downward_file(causes, &field, file);
        }
    }
    if let Some(p) = &v.projected {
        check_projected(causes, &format!("{path}.projected"), p);
    }
}

fn check_projected(causes: &mut Causes, path: &str, p: &ProjectedVolumeSource) {
    check_mode(causes, &format!("{path}.defaultMode"), p.default_mode);
    for (i, source) in p.sources.iter().flatten().enumerate() {
        let src = format!("{path}.sources[{i}]");
        if let Some(s) = &source.secret {
            check_items(causes, &format!("{src}.secret.items"), s.items.as_deref());
        }
        if let Some(c) = &source.config_map {
            check_items(
                causes,
                &format!("{src}.configMap.items"),
                c.items.as_deref(),
            );
        }
        if let Some(d) = &source.downward_api {
            for file in d.items.iter().flatten() {
                check_downward_file(causes, &format!("{src}.downwardAPI"), file);
            }
        }
        if let Some(t) = &source.service_account_token {
            // Unset is defaulted to an hour, as Kubernetes does.
            if let Some(secs) = t.expiration_seconds {
                let field = format!("{src}.serviceAccountToken.expirationSeconds");
                if secs < 10 * 60 {
                    causes.invalid_number(
                        field,
                        secs,
                        "may not specify a duration less than 10 minutes",
                    );
                } else if secs > 1 << 32 {
                    causes.invalid_number(
                        field,
                        secs,
                        "may not specify a duration larger than 2^32 seconds",
                    );
                }
            }
            // Kubernetes names the projection's `path` here, not the source's.
            let field = format!("{path}.path");
            if t.path.is_empty() {
                causes.required(field);
            } else {
                check_local_non_reserved(causes, &field, &t.path);
            }
        }
    }
}

/// `validateKeyToPath` for each item of a secret or config map projection.
fn check_items(causes: &mut Causes, path: &str, items: Option<&[KeyToPath]>) {
    for (i, item) in items.into_iter().flatten().enumerate() {
        let field = format!("{path}[{i}]");
        if item.key.is_empty() {
            causes.required(format!("{field}.key"));
        }
        if item.path.is_empty() {
            causes.required(format!("{field}.path"));
        }
        check_local_non_reserved(causes, &format!("{field}.path"), &item.path);
        check_mode(causes, &format!("{field}.mode"), item.mode);
    }
}

/// `validateDownwardAPIVolumeFile`'s path and mode rules; `path` is the source's own.
fn check_downward_file(causes: &mut Causes, path: &str, file: &DownwardAPIVolumeFile) {
    let field = format!("{path}.path");
    if file.path.is_empty() {
        causes.required(field.clone());
    }
    check_local_non_reserved(causes, &field, &file.path);
    check_mode(causes, &format!("{path}.mode"), file.mode);
}

fn check_mode(causes: &mut Causes, field: &str, mode: Option<i32>) {
    if let Some(m) = mode
        && !(0..=0o777).contains(&m)
    {
        causes.invalid_number(field, m.into(), FILE_MODE_MSG);
    }
}

/// `validatePathNoBacksteps`: no `..` element (one error, however many there are).
fn check_no_backsteps(causes: &mut Causes, field: &str, target: &str) {
    if target.split('/').any(|part| part == "..") {
        causes.invalid(field, target, "must not contain '..'");
    }
}

/// `validateLocalDescendingPath`: relative, and no `..` element.
fn check_local_descending(causes: &mut Causes, field: &str, target: &str) {
    if target.starts_with('/') {
        causes.invalid(field, target, "must be a relative path");
    }
    check_no_backsteps(causes, field, target);
}

/// `ValidateLocalNonReservedPath`: a local descending path that does not start with
/// `..` either (`..data` is where the atomic writer keeps its files).
fn check_local_non_reserved(causes: &mut Causes, field: &str, target: &str) {
    check_local_descending(causes, field, target);
    if target.starts_with("..") && !target.starts_with("../") {
        causes.invalid(field, target, "must not start with '..'");
    }
}

/// `ValidateVolumeMounts` for container `c` at `path` (`spec.containers[0]`); `volumes`
/// are the pod's volume names.
pub(super) fn check_mounts(
    causes: &mut Causes,
    path: &str,
    c: &Container,
    volumes: &HashSet<&str>,
) {
    let mounts = format!("{path}.volumeMounts");
    let mut mount_points = HashSet::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let field = format!("{mounts}[{i}]");
        if m.name.is_empty() {
            causes.required(format!("{field}.name"));
        } else if !volumes.contains(m.name.as_str()) {
            causes.not_found(format!("{field}.name"), &m.name);
        }
        if m.mount_path.is_empty() {
            causes.required(format!("{field}.mountPath"));
        }
        if !mount_points.insert(m.mount_path.as_str()) {
            causes.invalid(
                format!("{field}.mountPath"),
                &m.mount_path,
                "must be unique",
            );
        }
        let sub_path = m.sub_path.as_deref().unwrap_or("");
        if !sub_path.is_empty() {
            check_local_descending(causes, &format!("{mounts}.subPath"), sub_path);
        }
        let expr = m.sub_path_expr.as_deref().unwrap_or("");
        if !expr.is_empty() {
            if !sub_path.is_empty() {
                causes.invalid(
                    format!("{field}.subPathExpr"),
                    expr,
                    "subPathExpr and subPath are mutually exclusive",
                );
            }
            check_local_descending(causes, &format!("{mounts}.subPathExpr"), expr);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    /// `field: message` of every cause for a pod with `spec`.
    fn causes(spec: serde_json::Value) -> Vec<String> {
        crate::validation::pod_causes(spec, |c| format!("{}: {}", c.field, c.message))
    }

    fn with_volume(volume: serde_json::Value) -> Vec<String> {
        causes(json!({"volumes": [volume], "containers": [{"name": "c", "image": "i"}]}))
    }

    fn with_mounts(mounts: serde_json::Value) -> Vec<String> {
        causes(json!({
            "volumes": [{"name": "v", "emptyDir": {}}],
            "containers": [{"name": "c", "image": "i", "volumeMounts": mounts}]
        }))
    }

    #[test]
    fn a_negative_empty_dir_size_limit_is_forbidden() {
        assert_eq!(
            with_volume(json!({"name": "v", "emptyDir": {"sizeLimit": "-1Gi"}})),
            [
                "spec.volumes[0].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity"
            ]
        );
        assert!(with_volume(json!({"name": "v", "emptyDir": {"sizeLimit": "0"}})).is_empty());
        let bad = with_volume(json!({"name": "v", "emptyDir": {"sizeLimit": "lots"}}));
        assert!(
            bad[0].starts_with(
                "spec.volumes[0].emptyDir.sizeLimit: Invalid value: \"lots\": quantities must match"
            ),
            "{bad:?}"
        );
    }

    #[test]
    fn sub_paths_must_descend_into_the_volume() {
        assert_eq!(
            with_mounts(json!([{"name": "v", "mountPath": "/a", "subPath": "../etc"}])),
            [
                r#"spec.containers[0].volumeMounts.subPath: Invalid value: "../etc": must not contain '..'"#
            ]
        );
        assert_eq!(
            with_mounts(json!([{"name": "v", "mountPath": "/a", "subPath": "/etc"}])),
            [
                r#"spec.containers[0].volumeMounts.subPath: Invalid value: "/etc": must be a relative path"#
            ]
        );
        assert_eq!(
            with_mounts(json!([{"name": "v", "mountPath": "/a", "subPathExpr": "$(POD)/../.."}])),
            [
                r#"spec.containers[0].volumeMounts.subPathExpr: Invalid value: "$(POD)/../..": must not contain '..'"#
            ]
        );
        assert_eq!(
            with_mounts(
                json!([{"name": "v", "mountPath": "/a", "subPath": "x", "subPathExpr": "y"}])
            ),
            [
                r#"spec.containers[0].volumeMounts[0].subPathExpr: Invalid value: "y": subPathExpr and subPath are mutually exclusive"#
            ]
        );
        // `..` inside a name is not a backstep.
        assert!(
            with_mounts(json!([{"name": "v", "mountPath": "/a", "subPath": "a..b/c"}])).is_empty()
        );
    }

    #[test]
    fn mount_paths_are_unique_within_a_container() {
        assert_eq!(
            with_mounts(
                json!([{"name": "v", "mountPath": "/a"}, {"name": "v", "mountPath": "/a"}])
            ),
            [
                r#"spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/a": must be unique"#
            ]
        );
    }

    #[test]
    fn item_paths_and_modes_stay_inside_the_volume() {
        assert_eq!(
            with_volume(
                json!({"name": "v", "configMap": {"name": "cm", "defaultMode": 512,
                "items": [{"key": "k", "path": "../x"}, {"key": "", "path": "..data", "mode": -1}]}})
            ),
            [
                "spec.volumes[0].configMap.defaultMode: Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive",
                r#"spec.volumes[0].configMap.items[0].path: Invalid value: "../x": must not contain '..'"#,
                "spec.volumes[0].configMap.items[1].key: Required value",
                r#"spec.volumes[0].configMap.items[1].path: Invalid value: "..data": must not start with '..'"#,
                "spec.volumes[0].configMap.items[1].mode: Invalid value: -1: must be a number between 0 and 0777 (octal), both inclusive",
            ]
        );
        assert_eq!(
            with_volume(json!({"name": "v", "secret": {"items": [{"key": "k", "path": "/abs"}]}})),
            [
                "spec.volumes[0].secret.secretName: Required value",
                r#"spec.volumes[0].secret.items[0].path: Invalid value: "/abs": must be a relative path"#,
            ]
        );
        assert_eq!(
            with_volume(json!({"name": "v", "downwardAPI": {"items": [
                {"path": "a/../../b", "fieldRef": {"fieldPath": "metadata.name"}}]}})),
            [
                r#"spec.volumes[0].downwardAPI.path: Invalid value: "a/../../b": must not contain '..'"#
            ]
        );
        assert_eq!(
            with_volume(json!({"name": "v", "hostPath": {"path": "/srv/../etc"}})),
            [
                r#"spec.volumes[0].hostPath.path: Invalid value: "/srv/../etc": must not contain '..'"#
            ]
        );
    }

    #[test]
    fn projected_sources_follow_the_same_rules() {
        assert_eq!(
            with_volume(json!({"name": "v", "projected": {"sources": [
                {"serviceAccountToken": {"path": "../t", "expirationSeconds": 60}},
                {"secret": {"name": "s", "items": [{"key": "k", "path": "/x"}]}}
            ]}})),
            [
                "spec.volumes[0].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes",
                r#"spec.volumes[0].projected.path: Invalid value: "../t": must not contain '..'"#,
                r#"spec.volumes[0].projected.sources[1].secret.items[0].path: Invalid value: "/x": must be a relative path"#,
            ]
        );
    }
}
