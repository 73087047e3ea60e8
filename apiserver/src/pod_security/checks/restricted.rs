//! The restricted checks (`check_allowPrivilegeEscalation.go`,
//! `check_capabilities_restricted.go`, `check_restrictedVolumes.go`,
//! `check_runAsNonRoot.go`, `check_runAsUser.go`,
//! `check_seccompProfile_restricted.go`), with their messages word for word.

use k8s_openapi::api::core::v1::{PodSpec, Volume};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::baseline::valid_seccomp;
use super::{Violation, containers, containers_named, join_quote, plural, sorted};

/// Windows pods are exempt from the Linux-only checks from 1.25 on (pod validation
/// refuses those fields on them). mesopod refuses Windows pods, but the rule is kept.
fn windows(spec: &PodSpec) -> bool {
    spec.os.as_ref().is_some_and(|os| os.name == "windows")
}

pub(super) fn allow_privilege_escalation(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let bad: Vec<String> = containers(spec)
        .iter()
        .filter(|c| {
            c.security_context
                .as_ref()
                .and_then(|sc| sc.allow_privilege_escalation)
                .unwrap_or(true)
        })
        .map(|c| c.name.clone())
        .collect();
    (!bad.is_empty()).then(|| {
        Violation::new(
            "allowPrivilegeEscalation != false",
            format!(
                "{} must set securityContext.allowPrivilegeEscalation=false",
                containers_named(&bad)
            ),
        )
    })
}

pub(super) fn allow_privilege_escalation_1_25(
    meta: &ObjectMeta,
    spec: &PodSpec,
) -> Option<Violation> {
    if windows(spec) {
        return None;
    }
    allow_privilege_escalation(meta, spec)
}

pub(super) fn capabilities(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let mut missing_drop_all = Vec::new();
    let mut adding = Vec::new();
    let mut forbidden = Vec::new();
    for c in containers(spec) {
        let Some(caps) = c
            .security_context
            .as_ref()
            .and_then(|sc| sc.capabilities.as_ref())
        else {
            missing_drop_all.push(c.name.clone());
            continue;
        };
        if !caps.drop.iter().flatten().any(|d| d == "ALL") {
            missing_drop_all.push(c.name.clone());
        }
        let mut added_forbidden = false;
        for a in caps.add.iter().flatten() {
            if a != "NET_BIND_SERVICE" {
                added_forbidden = true;
                forbidden.push(a.clone());
            }
        }
        if added_forbidden {
            adding.push(c.name.clone());
        }
    }
    let mut details = Vec::new();
    if !missing_drop_all.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_named(&missing_drop_all)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&adding),
            join_quote(&sorted(forbidden))
        ));
    }
    (!details.is_empty()).then(|| Violation::new("unrestricted capabilities", details.join("; ")))
}

pub(super) fn capabilities_1_25(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    if windows(spec) {
        return None;
    }
    capabilities(meta, spec)
}

/// The volume type a restricted pod may not use, or `None` for an allowed one.
fn restricted_type(v: &Volume) -> Option<&'static str> {
    let allowed = v.config_map.is_some()
        || v.csi.is_some()
        || v.downward_api.is_some()
        || v.empty_dir.is_some()
        || v.ephemeral.is_some()
        || v.image.is_some()
        || v.persistent_volume_claim.is_some()
        || v.projected.is_some()
        || v.secret.is_some();
    if allowed {
        return None;
    }
    let kinds = [
        (v.host_path.is_some(), "hostPath"),
        (v.gce_persistent_disk.is_some(), "gcePersistentDisk"),
        (v.aws_elastic_block_store.is_some(), "awsElasticBlockStore"),
        (v.git_repo.is_some(), "gitRepo"),
        (v.nfs.is_some(), "nfs"),
        (v.iscsi.is_some(), "iscsi"),
        (v.glusterfs.is_some(), "glusterfs"),
        (v.rbd.is_some(), "rbd"),
        (v.flex_volume.is_some(), "flexVolume"),
        (v.cinder.is_some(), "cinder"),
        (v.cephfs.is_some(), "cephfs"),
        (v.flocker.is_some(), "flocker"),
        (v.fc.is_some(), "fc"),
        (v.azure_file.is_some(), "azureFile"),
        (v.vsphere_volume.is_some(), "vsphereVolume"),
        (v.quobyte.is_some(), "quobyte"),
        (v.azure_disk.is_some(), "azureDisk"),
        (v.photon_persistent_disk.is_some(), "photonPersistentDisk"),
        (v.portworx_volume.is_some(), "portworxVolume"),
        (v.scale_io.is_some(), "scaleIO"),
        (v.storageos.is_some(), "storageos"),
    ];
    Some(
        kinds
            .iter()
            .find(|(set, _)| *set)
            .map_or("unknown", |(_, name)| *name),
    )
}

pub(super) fn volumes(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let mut bad = Vec::new();
    let mut types = Vec::new();
    for v in spec.volumes.iter().flatten() {
        if let Some(t) = restricted_type(v) {
            bad.push(v.name.clone());
            types.push(t.to_string());
        }
    }
    if bad.is_empty() {
        return None;
    }
    let types = sorted(types);
    Some(Violation::new(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            plural("volume", "volumes", bad.len()),
            join_quote(&bad),
            plural("uses", "use", bad.len()),
            plural(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    ))
}

/// "pod and containers \"a\", \"b\"".
fn who(pod: bool, containers: &[String]) -> String {
    let mut s = Vec::new();
    if pod {
        s.push("pod".to_string());
    }
    if !containers.is_empty() {
        s.push(containers_named(containers));
    }
    s.join(" and ")
}

pub(super) fn run_as_non_root(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    // The relaxation for pods in a user namespace needs hostUsers=false, which
    // mesopod refuses.
    let pod = spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.run_as_non_root);
    let pod_bad = pod == Some(false);
    let pod_non_root = pod == Some(true);
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in containers(spec) {
        match c
            .security_context
            .as_ref()
            .and_then(|sc| sc.run_as_non_root)
        {
            Some(false) => explicit.push(c.name.clone()),
            Some(true) => {}
            None if !pod_non_root => implicit.push(c.name.clone()),
            None => {}
        }
    }
    if pod_bad || !explicit.is_empty() {
        return Some(Violation::new(
            "runAsNonRoot != true",
            format!(
                "{} must not set securityContext.runAsNonRoot=false",
                who(pod_bad, &explicit)
            ),
        ));
    }
    (!implicit.is_empty()).then(|| {
        Violation::new(
            "runAsNonRoot != true",
            format!(
                "pod or {} must set securityContext.runAsNonRoot=true",
                containers_named(&implicit)
            ),
        )
    })
}

pub(super) fn run_as_user(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let pod_bad = spec.security_context.as_ref().and_then(|sc| sc.run_as_user) == Some(0);
    let bad: Vec<String> = containers(spec)
        .iter()
        .filter(|c| c.security_context.as_ref().and_then(|sc| sc.run_as_user) == Some(0))
        .map(|c| c.name.clone())
        .collect();
    (pod_bad || !bad.is_empty()).then(|| {
        Violation::new(
            "runAsUser=0",
            format!("{} must not set runAsUser=0", who(pod_bad, &bad)),
        )
    })
}

pub(super) fn seccomp_profile(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let mut bad_values = Vec::new();
    let mut pod_bad = false;
    let mut pod_set = false;
    if let Some(p) = spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.seccomp_profile.as_ref())
    {
        if valid_seccomp(&p.type_) {
            pod_set = true;
        } else {
            pod_bad = true;
            bad_values.push(p.type_.clone());
        }
    }
    let (mut explicit, mut implicit) = (Vec::new(), Vec::new());
    for c in containers(spec) {
        match c
            .security_context
            .as_ref()
            .and_then(|sc| sc.seccomp_profile.as_ref())
        {
            Some(p) if !valid_seccomp(&p.type_) => {
                explicit.push(c.name.clone());
                bad_values.push(p.type_.clone());
            }
            Some(_) => {}
            None if !pod_set => implicit.push(c.name.clone()),
            None => {}
        }
    }
    if pod_bad || !explicit.is_empty() {
        return Some(Violation::new(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                who(pod_bad, &explicit),
                join_quote(&sorted(bad_values))
            ),
        ));
    }
    (!implicit.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                containers_named(&implicit)
            ),
        )
    })
}

pub(super) fn seccomp_profile_1_25(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    if windows(spec) {
        return None;
    }
    seccomp_profile(meta, spec)
}
