//! A pod's `volumes` and each container's `volumeMounts`, checked before
//! anything runs: what mesopod cannot honour is refused with its field path.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Container, PodSpec, Volume, VolumeMount};

/// The volume kinds the executor sets up.
pub(super) const SUPPORTED: &str = "emptyDir, hostPath, configMap, secret, downwardAPI, projected";

/// One `volumeMounts` entry of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountPlan {
    /// The volume's name.
    pub volume: String,
    /// `mountPath`, inside the container.
    pub mount_path: String,
    /// `readOnly`.
    pub read_only: bool,
    /// `subPath` or `subPathExpr`, if either is set.
    pub sub_path: Option<SubPath>,
}

/// Which part of a volume a mount shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubPath {
    /// `subPath`, as written.
    Plain(String),
    /// `subPathExpr`: `$(VAR)` references to the container's environment.
    Expr(String),
}

/// Checks `spec.volumes`: names unique, kinds supported.
pub fn check_volumes(spec: &PodSpec) -> Result<(), String> {
    let mut names = HashSet::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        if v.name.is_empty() || !names.insert(v.name.as_str()) {
            return Err(format!(
                "spec.volumes[{i}].name: {:?} is empty or used twice",
                v.name
            ));
        }
        if !crate::pod::is_dns_label(&v.name) {
            return Err(format!(
                "spec.volumes[{i}].name: {:?} is not a DNS label",
                v.name
            ));
        }
        kind_of(v).map_err(|kind| {
            format!(
                "spec.volumes[{i}].{kind}: {kind} volumes are not supported by mesopod (supported: {SUPPORTED})"
            )
        })?;
    }
    Ok(())
}

/// The volume's kind, or the name of the unsupported source it uses.
fn kind_of(v: &Volume) -> Result<&'static str, &'static str> {
    let supported = [
        (v.empty_dir.is_some(), "emptyDir"),
        (v.host_path.is_some(), "hostPath"),
        (v.config_map.is_some(), "configMap"),
        (v.secret.is_some(), "secret"),
        (v.downward_api.is_some(), "downwardAPI"),
        (v.projected.is_some(), "projected"),
    ];
    if let Some((_, k)) = supported.iter().find(|(set, _)| *set) {
        return Ok(k);
    }
    let json = serde_json::to_value(v).unwrap_or_default();
    let other = json
        .as_object()
        .and_then(|o| o.keys().find(|k| *k != "name").cloned());
    Err(match other.as_deref() {
        Some("persistentVolumeClaim") => "persistentVolumeClaim",
        Some("csi") => "csi",
        Some("ephemeral") => "ephemeral",
        Some("nfs") => "nfs",
        Some("iscsi") => "iscsi",
        Some("image") => "image",
        Some(_) => "this",
        // A volume with no source is an emptyDir in Kubernetes' defaulting.
        None => return Ok("emptyDir"),
    })
}

/// A container's mounts, checked against the pod's volumes.
pub fn plan_mounts(c: &Container, field: &str, spec: &PodSpec) -> Result<Vec<MountPlan>, String> {
    let volumes: HashSet<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .collect();
    let mut paths = HashSet::new();
    let mut out = Vec::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let at = format!("{field}.volumeMounts[{i}]");
        out.push(plan_mount(m, &at, &volumes)?);
        if !paths.insert(m.mount_path.trim_end_matches('/').to_owned()) {
            return Err(format!("{at}.mountPath: {:?} must be unique", m.mount_path));
        }
    }
    if c.volume_devices.as_ref().is_some_and(|d| !d.is_empty()) {
        return Err(format!(
            "{field}.volumeDevices: block volumes are not supported by mesopod"
        ));
    }
    Ok(out)
}

fn plan_mount(m: &VolumeMount, at: &str, volumes: &HashSet<&str>) -> Result<MountPlan, String> {
    if !volumes.contains(m.name.as_str()) {
        return Err(format!("{at}.name: Not found: {:?}", m.name));
    }
    if m.mount_path.is_empty() {
        return Err(format!("{at}.mountPath: Required value"));
    }
    if m.mount_path.split('/').any(|p| p == "..") {
        return Err(format!("{at}.mountPath: must not contain '..'"));
    }
    match m.mount_propagation.as_deref() {
        None | Some("None") => {}
        Some(other) => {
            return Err(format!(
                "{at}.mountPropagation: {other:?} is not supported by mesopod (only None)"
            ));
        }
    }
    if m.recursive_read_only
        .as_deref()
        .is_some_and(|r| r != "Disabled")
    {
        return Err(format!("{at}.recursiveReadOnly: not supported by mesopod"));
    }
    let plain = m.sub_path.clone().filter(|s| !s.is_empty());
    let expr = m.sub_path_expr.clone().filter(|s| !s.is_empty());
    let sub_path = match (plain, expr) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "{at}.subPathExpr: subPathExpr and subPath are mutually exclusive"
            ));
        }
        (Some(p), None) => {
            check_relative(&p).map_err(|e| format!("{at}.subPath: {e}"))?;
            Some(SubPath::Plain(p))
        }
        (None, Some(e)) => {
            check_relative(&e).map_err(|e| format!("{at}.subPathExpr: {e}"))?;
            Some(SubPath::Expr(e))
        }
        (None, None) => None,
    };
    Ok(MountPlan {
        volume: m.name.clone(),
        mount_path: m.mount_path.clone(),
        read_only: m.read_only.unwrap_or(false),
        sub_path,
    })
}

/// Kubernetes' rule for `subPath` and item paths: relative, no `..`.
pub fn check_relative(p: &str) -> Result<(), String> {
    if p.starts_with('/') {
        return Err(format!("{p:?} must be a relative path"));
    }
    if p.split('/').any(|c| c == "..") {
        return Err(format!("{p:?} must not contain '..'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec(v: serde_json::Value) -> PodSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn unsupported_volumes_and_mounts_name_their_field() {
        let s = spec(serde_json::json!({"containers": [], "volumes": [
            {"name": "a", "emptyDir": {}},
            {"name": "b", "persistentVolumeClaim": {"claimName": "c"}}]}));
        let err = check_volumes(&s).unwrap_err();
        assert!(
            err.starts_with("spec.volumes[1].persistentVolumeClaim:"),
            "{err}"
        );
        let s = spec(
            serde_json::json!({"containers": [{"name": "c", "volumeMounts": [
            {"name": "a", "mountPath": "/a", "mountPropagation": "Bidirectional"}]}],
            "volumes": [{"name": "a", "emptyDir": {}}]}),
        );
        let err = plan_mounts(&s.containers[0], "spec.containers[0]", &s).unwrap_err();
        assert!(
            err.contains("spec.containers[0].volumeMounts[0].mountPropagation"),
            "{err}"
        );
        let s = spec(
            serde_json::json!({"containers": [{"name": "c", "volumeMounts": [
            {"name": "x", "mountPath": "/a"}]}], "volumes": []}),
        );
        let err = plan_mounts(&s.containers[0], "spec.containers[0]", &s).unwrap_err();
        assert!(err.contains("Not found"), "{err}");
        let s = spec(
            serde_json::json!({"containers": [{"name": "c", "volumeMounts": [
            {"name": "a", "mountPath": "/a", "subPath": "../etc"}]}],
            "volumes": [{"name": "a", "emptyDir": {}}]}),
        );
        let err = plan_mounts(&s.containers[0], "spec.containers[0]", &s).unwrap_err();
        assert!(err.contains("subPath") && err.contains(".."), "{err}");
    }

    #[test]
    fn mounts_are_planned() {
        let s = spec(
            serde_json::json!({"containers": [{"name": "c", "volumeMounts": [
            {"name": "a", "mountPath": "/a", "readOnly": true, "subPathExpr": "$(POD)"}]}],
            "volumes": [{"name": "a", "emptyDir": {}}]}),
        );
        check_volumes(&s).unwrap();
        let m = plan_mounts(&s.containers[0], "spec.containers[0]", &s).unwrap();
        assert_eq!(
            m,
            vec![MountPlan {
                volume: "a".into(),
                mount_path: "/a".into(),
                read_only: true,
                sub_path: Some(SubPath::Expr("$(POD)".into()))
            }]
        );
    }
}
