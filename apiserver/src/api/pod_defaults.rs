//! The defaults kube-apiserver fills in a pod spec (`pkg/apis/core/v1/defaults.go`),
//! so that what a client reads back is what kube-apiserver would return: kubectl
//! itself dereferences some of them (`kubectl debug` reads `spec.securityContext`).
//!
//! A pod gets all of them. A workload's pod template gets the ones mesopod has
//! always filled in ([`default_template_spec`]) and not the rest: the controllers
//! tell a changed template by comparing it with what they stored (a Deployment with
//! its ReplicaSets', a DaemonSet or StatefulSet by its revisions' hashes), so a
//! template stored by an earlier mesopod that took a new default at its next write
//! would roll all of its pods once, for nothing. The pods made from a template get
//! every default when they are created.
//!
//! One default is left out on purpose: kube gives a `hostNetwork` pod's container
//! ports a `hostPort` equal to the `containerPort`. mesopod procures host ports from
//! Mesos offers, so that default would make such pods ask agents for ports they do not
//! offer; a hostNetwork pod's ports stay as written.

use k8s_openapi::api::core::v1::{
    Container, EnvVar, HTTPGetAction, LifecycleHandler, PodSecurityContext, PodSpec, Probe,
    ResourceRequirements, Volume,
};

use super::pods::DEFAULT_GRACE_SECONDS;

/// A volume file's mode when the volume names none (0644).
const DEFAULT_MODE: i32 = 0o644;

/// A projected token's lifetime when it names none.
const DEFAULT_TOKEN_SECONDS: i64 = 3600;

/// The part of `SetDefaults_PodSpec` a pod template gets (see the module doc).
pub(crate) fn default_template_spec(spec: &mut PodSpec) {
    spec.restart_policy.get_or_insert_with(|| "Always".into());
    spec.dns_policy.get_or_insert_with(|| "ClusterFirst".into());
    spec.scheduler_name
        .get_or_insert_with(|| "default-scheduler".into());
    spec.termination_grace_period_seconds
        .get_or_insert(DEFAULT_GRACE_SECONDS);
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        default_template_container(c);
    }
}

/// `SetDefaults_PodSpec` and what it reaches (containers, probes, handlers, env and
/// volumes), for a pod.
pub(crate) fn default_pod_spec(spec: &mut PodSpec) {
    default_template_spec(spec);
    spec.security_context
        .get_or_insert_with(PodSecurityContext::default);
    spec.enable_service_links.get_or_insert(true);
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        default_container(c);
    }
    for v in spec.volumes.iter_mut().flatten() {
        default_volume(v);
    }
}

/// `SetDefaults_Pod`, for a pod and not a template: a container's limits without
/// requests are its requests too.
pub(crate) fn default_pod_requests(spec: &mut PodSpec) {
    for c in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        let Some(resources) = &mut c.resources else {
            continue;
        };
        if let Some(limits) = &resources.limits {
            let requests = resources.requests.get_or_insert_default();
            for (name, q) in limits {
                requests.entry(name.clone()).or_insert_with(|| q.clone());
            }
        }
    }
}

fn default_template_container(c: &mut Container) {
    if c.image_pull_policy.is_none() {
        c.image_pull_policy = Some(pull_policy(c.image.as_deref().unwrap_or("")).into());
    }
    c.termination_message_path
        .get_or_insert_with(|| "/dev/termination-log".into());
    c.termination_message_policy
        .get_or_insert_with(|| "File".into());
    for p in c.ports.iter_mut().flatten() {
        p.protocol.get_or_insert_with(|| "TCP".into());
    }
}

/// A pod's container, beyond [`default_template_container`].
fn default_container(c: &mut Container) {
    // A struct in Go, so always there (`resources: {}`).
    c.resources
        .get_or_insert_with(ResourceRequirements::default);
    for probe in [
        &mut c.liveness_probe,
        &mut c.readiness_probe,
        &mut c.startup_probe,
    ]
    .into_iter()
    .flatten()
    {
        default_probe(probe);
    }
    if let Some(lifecycle) = &mut c.lifecycle {
        for handler in [&mut lifecycle.post_start, &mut lifecycle.pre_stop]
            .into_iter()
            .flatten()
        {
            default_handler(handler);
        }
    }
    for e in c.env.iter_mut().flatten() {
        default_env(e);
    }
}

/// `Always` for an image with no tag or `:latest` (and no digest), else `IfNotPresent`.
fn pull_policy(image: &str) -> &'static str {
    let last = image.rsplit('/').next().unwrap_or("");
    let latest = !last.contains(':') || last.ends_with(":latest");
    if latest && !image.contains('@') {
        "Always"
    } else {
        "IfNotPresent"
    }
}

/// `SetDefaults_Probe` and its handler's.
fn default_probe(p: &mut Probe) {
    p.timeout_seconds.get_or_insert(1);
    p.period_seconds.get_or_insert(10);
    p.success_threshold.get_or_insert(1);
    p.failure_threshold.get_or_insert(3);
    if let Some(get) = &mut p.http_get {
        default_http_get(get);
    }
}

fn default_handler(h: &mut LifecycleHandler) {
    if let Some(get) = &mut h.http_get {
        default_http_get(get);
    }
}

/// `SetDefaults_HTTPGetAction`.
fn default_http_get(get: &mut HTTPGetAction) {
    if get.path.as_deref().is_none_or(str::is_empty) {
        get.path = Some("/".into());
    }
    get.scheme.get_or_insert_with(|| "HTTP".into());
}

/// `SetDefaults_ObjectFieldSelector` of an env var's source.
fn default_env(e: &mut EnvVar) {
    if let Some(field) = e.value_from.as_mut().and_then(|f| f.field_ref.as_mut())
        && field.api_version.as_deref().is_none_or(str::is_empty)
    {
        field.api_version = Some("v1".into());
    }
}

/// `SetDefaults_Volume` and the defaults of its source.
fn default_volume(v: &mut Volume) {
    let sourced = [
        v.aws_elastic_block_store.is_some(),
        v.azure_disk.is_some(),
        v.azure_file.is_some(),
        v.cephfs.is_some(),
        v.cinder.is_some(),
        v.config_map.is_some(),
        v.csi.is_some(),
        v.downward_api.is_some(),
        v.empty_dir.is_some(),
        v.ephemeral.is_some(),
        v.fc.is_some(),
        v.flex_volume.is_some(),
        v.flocker.is_some(),
        v.gce_persistent_disk.is_some(),
        v.git_repo.is_some(),
        v.glusterfs.is_some(),
        v.host_path.is_some(),
        v.image.is_some(),
        v.iscsi.is_some(),
        v.nfs.is_some(),
        v.persistent_volume_claim.is_some(),
        v.photon_persistent_disk.is_some(),
        v.portworx_volume.is_some(),
        v.projected.is_some(),
        v.quobyte.is_some(),
        v.rbd.is_some(),
        v.scale_io.is_some(),
        v.secret.is_some(),
        v.storageos.is_some(),
        v.vsphere_volume.is_some(),
    ];
    if !sourced.contains(&true) {
        v.empty_dir = Some(Default::default());
    }
    if let Some(s) = &mut v.secret {
        s.default_mode.get_or_insert(DEFAULT_MODE);
    }
    if let Some(cm) = &mut v.config_map {
        cm.default_mode.get_or_insert(DEFAULT_MODE);
    }
    if let Some(host) = &mut v.host_path {
        host.type_.get_or_insert_with(String::new);
    }
    if let Some(d) = &mut v.downward_api {
        d.default_mode.get_or_insert(DEFAULT_MODE);
        for item in d.items.iter_mut().flatten() {
            default_field_ref(item.field_ref.as_mut());
        }
    }
    if let Some(p) = &mut v.projected {
        p.default_mode.get_or_insert(DEFAULT_MODE);
        for source in p.sources.iter_mut().flatten() {
            if let Some(token) = &mut source.service_account_token {
                token
                    .expiration_seconds
                    .get_or_insert(DEFAULT_TOKEN_SECONDS);
            }
            if let Some(d) = &mut source.downward_api {
                for item in d.items.iter_mut().flatten() {
                    default_field_ref(item.field_ref.as_mut());
                }
            }
        }
    }
}

fn default_field_ref(field: Option<&mut k8s_openapi::api::core::v1::ObjectFieldSelector>) {
    if let Some(f) = field
        && f.api_version.as_deref().is_none_or(str::is_empty)
    {
        f.api_version = Some("v1".into());
    }
}

#[cfg(test)]
mod tests;
