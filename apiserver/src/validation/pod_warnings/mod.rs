//! kube-apiserver's warnings for a pod and for a pod template (`GetWarningsForPod`,
//! `GetWarningsForPodTemplate` of Kubernetes 1.33's `pkg/api/pod/warnings.go`): things
//! a valid pod may say that probably do not do what its writer meant. They are only
//! warnings: the write goes through, and kubectl prints each as `Warning: <text>`.
//!
//! # Contract
//!
//! - Pure: each function takes an object (already defaulted and valid) and returns the
//!   texts, in kube's order and words, field paths included. The callers add them to
//!   the request ([`crate::notes::warn`]) once the write is known valid, as
//!   kube-apiserver calls a strategy's `WarningsOnCreate`/`WarningsOnUpdate` after its
//!   `Validate`.
//! - A template's paths are prefixed with the template's own (`spec.template`,
//!   `spec.jobTemplate.spec.template`); a pod's start at `spec` and `metadata`.
//! - Go iterates maps and sets in random order; where kube's result depends on it
//!   (which earlier path an overlapping volume path is reported against), the first
//!   one given wins here, so the texts are stable.
//!
//! # What is left out
//!
//! A warning about a field mesopod refuses at create ([`super::fields`]) could never be
//! shown, so these rules of kube's are not here: deprecated node labels as
//! `topologySpreadConstraints[*].topologyKey` and their null `labelSelector`
//! (`topologySpreadConstraints` is refused), a null `labelSelector` in a *required*
//! pod (anti-)affinity term (refused; the preferred terms are checked), duplicate
//! `hostAliases` ips (refused), the deprecated volume plugins (`gitRepo`,
//! `photonPersistentDisk`, `scaleIO`, `flocker`, `storageos`, `quobyte`, `glusterfs`,
//! `cephfs`, `rbd`: all refused) and the PVC warnings of `ephemeral` volumes (refused),
//! and a negative `terminationGracePeriodSeconds` (refused by validation here).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, NodeSelectorTerm, Pod, PodSpec, PodTemplateSpec,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as Q;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{DNS1123_LABEL_MSG, is_dns1123_label};

/// The warnings on creating `pod`, in kube's order: the AppArmor annotations (the pod
/// strategy's `PrepareForCreate`), then its `WarningsOnCreate`: the name when it is no
/// DNS label, then `GetWarningsForPod`. kube gives none on a pod update.
pub fn for_pod_create(pod: &Pod) -> Vec<String> {
    let default = PodSpec::default();
    let spec = pod.spec.as_ref().unwrap_or(&default);
    let mut out = pod_apparmor_annotations(spec, &pod.metadata);
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    out.extend(name_not_dns_label(name, "the Pod's hostname"));
    out.extend(spec_and_meta(None, spec, &pod.metadata));
    out
}

/// `GetWarningsForPodTemplate`: the warnings for `template` at `path`
/// (`spec.template`).
pub fn for_template(path: &str, template: &PodTemplateSpec) -> Vec<String> {
    let default_spec = PodSpec::default();
    let default_meta = ObjectMeta::default();
    let spec = template.spec.as_ref().unwrap_or(&default_spec);
    let meta = template.metadata.as_ref().unwrap_or(&default_meta);
    spec_and_meta(Some(path), spec, meta)
}

/// kube's warning for a name that is no DNS label when it ends up in `used_in`
/// (`Pod names and hostnames` for the workload kinds, `the Pod's hostname` for a pod).
pub(crate) fn name_not_dns_label(name: &str, used_in: &str) -> Option<String> {
    if is_dns1123_label(name) {
        return None;
    }
    let mut problems = Vec::new();
    if name.len() > 63 {
        problems.push("must be no more than 63 characters");
    }
    let lower = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = name.as_bytes();
    let shaped = b.first().is_some_and(|c| lower(*c))
        && b.last().is_some_and(|c| lower(*c))
        && b.iter().all(|c| lower(*c) || *c == b'-');
    if !shaped {
        problems.push(DNS1123_LABEL_MSG);
    }
    Some(format!(
        "metadata.name: this is used in {used_in}, which can result in surprising behavior; a DNS label is recommended: [{}]",
        problems.join(" ")
    ))
}

const DEPRECATED_NODE_LABELS: &[(&str, &str)] = &[
    (
        "beta.kubernetes.io/arch",
        "deprecated since v1.14; use \"kubernetes.io/arch\" instead",
    ),
    (
        "beta.kubernetes.io/os",
        "deprecated since v1.14; use \"kubernetes.io/os\" instead",
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        "deprecated since v1.17; use \"topology.kubernetes.io/region\" instead",
    ),
    (
        "failure-domain.beta.kubernetes.io/zone",
        "deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead",
    ),
    (
        "beta.kubernetes.io/instance-type",
        "deprecated since v1.17; use \"node.kubernetes.io/instance-type\" instead",
    ),
    ("app.kubernetes.io/created-by", "deprecated since v1.9"),
    (
        "scheduler.alpha.kubernetes.io/preferAvoidPods",
        "deprecated since v1.22; use Taints and Tolerations instead",
    ),
    (
        "node-role.kubernetes.io/master",
        "use \"node-role.kubernetes.io/control-plane\" instead",
    ),
];

/// kube's `GetNodeLabelDeprecatedMessage`.
fn deprecated_node_label(key: &str) -> Option<&'static str> {
    DEPRECATED_NODE_LABELS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, m)| *m)
}

const DEPRECATED_ANNOTATIONS: &[(&str, &str)] = &[
    (
        "scheduler.alpha.kubernetes.io/critical-pod",
        "non-functional in v1.16+; use the \"priorityClassName\" field instead",
    ),
    (
        "security.alpha.kubernetes.io/sysctls",
        "non-functional in v1.11+; use the \"sysctls\" field instead",
    ),
    (
        "security.alpha.kubernetes.io/unsafe-sysctls",
        "non-functional in v1.11+; use the \"sysctls\" field instead",
    ),
];

const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";
const APPARMOR_CONTAINER_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";

/// `warningsForPodSpecAndMeta`, its paths under `template` (`spec.template`) for a
/// template, at the root for a pod.
fn spec_and_meta(template: Option<&str>, spec: &PodSpec, meta: &ObjectMeta) -> Vec<String> {
    let prefix = &template.map(|t| format!("{t}.")).unwrap_or_default();
    let mut out = Vec::new();
    let empty = BTreeMap::new();
    let annotations = meta.annotations.as_ref().unwrap_or(&empty);

    // Deprecated node labels in the node selector and node affinity.
    for key in spec.node_selector.iter().flat_map(BTreeMap::keys) {
        if let Some(msg) = deprecated_node_label(key) {
            out.push(format!("{prefix}spec.nodeSelector[{key}]: {msg}"));
        }
    }
    if let Some(n) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
    {
        let base = format!("{prefix}spec.affinity.nodeAffinity");
        if let Some(required) = &n.required_during_scheduling_ignored_during_execution {
            for (i, term) in required.node_selector_terms.iter().enumerate() {
                let at = format!(
                    "{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]"
                );
                node_selector_term(&mut out, term, &at);
            }
        }
        let preferred = n
            .preferred_during_scheduling_ignored_during_execution
            .iter();
        for (i, term) in preferred.flatten().enumerate() {
            let at =
                format!("{base}.preferredDuringSchedulingIgnoredDuringExecution[{i}].preference");
            node_selector_term(&mut out, &term.preference, &at);
        }
    }

    for (key, msg) in DEPRECATED_ANNOTATIONS {
        if annotations.contains_key(*key) {
            out.push(format!("{prefix}metadata.annotations[{key}]: {msg}"));
        }
    }

    out.extend(overlapping_virtual_paths(
        spec.volumes.as_deref().unwrap_or_default(),
    ));

    // Image pull secrets named twice, or not at all.
    let secrets = spec.image_pull_secrets.as_deref().unwrap_or_default();
    let path = |i: usize| format!("{prefix}spec.imagePullSecrets[{i}].name");
    for (i, s) in secrets.iter().enumerate() {
        if secrets[..i].iter().any(|earlier| earlier.name == s.name) {
            out.push(format!("{}: duplicate name {}", path(i), go_quote(&s.name)));
        }
    }
    for (i, s) in secrets.iter().enumerate() {
        if s.name.is_empty() {
            out.push(format!("{}: invalid empty name \"\"", path(i)));
        }
    }

    // Fractional byte values.
    let no_overhead = BTreeMap::new();
    let overhead = spec.overhead.as_ref().unwrap_or(&no_overhead);
    for resource in ["memory", "ephemeral-storage"] {
        if let Some(text) = overhead.get(resource).and_then(|q| fractional_bytes(&q.0)) {
            out.push(fractional(
                &format!("{prefix}spec.overhead[{resource}]"),
                &text,
            ));
        }
    }

    let pod_seccomp = spec
        .security_context
        .as_ref()
        .is_some_and(|s| s.seccomp_profile.is_some());
    if !pod_seccomp && annotations.contains_key(SECCOMP_POD_ANNOTATION) {
        out.push(seccomp_annotation(prefix, SECCOMP_POD_ANNOTATION));
    }

    let pod_apparmor = spec
        .security_context
        .as_ref()
        .is_some_and(|s| s.app_armor_profile.is_some());
    for (path, c) in super::containers_with_paths(spec) {
        let at = format!("{prefix}{path}");
        container(&mut out, prefix, c, annotations);
        // A pod's are told on create ([`pod_apparmor_annotations`]), a template's here.
        if template.is_some() && !pod_apparmor && !has_apparmor(c) {
            let key = format!("{APPARMOR_CONTAINER_PREFIX}{}", c.name);
            if annotations.contains_key(&key) {
                out.push(apparmor_annotation(prefix, &key));
            }
        }
        container_resources_and_env(&mut out, &at, c);
    }
    ports(&mut out, prefix, spec);

    if let Some(affinity) = &spec.affinity {
        let terms = [
            (
                "podAffinity",
                affinity.pod_affinity.as_ref().and_then(|a| {
                    a.preferred_during_scheduling_ignored_during_execution
                        .as_deref()
                }),
            ),
            (
                "podAntiAffinity",
                affinity.pod_anti_affinity.as_ref().and_then(|a| {
                    a.preferred_during_scheduling_ignored_during_execution
                        .as_deref()
                }),
            ),
        ];
        for (name, preferred) in terms {
            let base = format!(
                "{prefix}spec.affinity.{name}.preferredDuringSchedulingIgnoredDuringExecution"
            );
            null_selectors(&mut out, &base, preferred.unwrap_or_default());
        }
    }
    out
}

/// `GetWarningsForNodeSelectorTerm`: deprecated node labels as expression keys.
fn node_selector_term(out: &mut Vec<String>, term: &NodeSelectorTerm, at: &str) {
    for (i, e) in term.match_expressions.iter().flatten().enumerate() {
        if let Some(msg) = deprecated_node_label(&e.key) {
            out.push(format!(
                "{at}.matchExpressions[{i}].key: {} is {msg}",
                e.key
            ));
        }
    }
}

/// `warningsForWeightedPodAffinityTerms`: a term without a selector selects nothing.
fn null_selectors(out: &mut Vec<String>, base: &str, terms: &[WeightedPodAffinityTerm]) {
    for (i, t) in terms.iter().enumerate() {
        if t.pod_affinity_term.label_selector.is_none() {
            out.push(format!(
                "{base}[{i}].podAffinityTerm.labelSelector: a null labelSelector results in matching no pod"
            ));
        }
    }
}

fn seccomp_annotation(prefix: &str, key: &str) -> String {
    format!(
        "{prefix}metadata.annotations[{key}]: non-functional in v1.27+; use the \"seccompProfile\" field instead"
    )
}

fn fractional(path: &str, canonical: &str) -> String {
    format!("{path}: fractional byte value \"{canonical}\" is invalid, must be an integer")
}

/// A container's seccomp annotation without the field.
fn container(
    out: &mut Vec<String>,
    prefix: &str,
    c: &Container,
    annotations: &BTreeMap<String, String>,
) {
    let has_seccomp = c
        .security_context
        .as_ref()
        .is_some_and(|s| s.seccomp_profile.is_some());
    let key = format!("{SECCOMP_CONTAINER_PREFIX}{}", c.name);
    if !has_seccomp && annotations.contains_key(&key) {
        out.push(seccomp_annotation(prefix, &key));
    }
}

/// A container's fractional byte values, and environment variables that hide an
/// earlier one.
fn container_resources_and_env(out: &mut Vec<String>, path: &str, c: &Container) {
    let resources = c.resources.as_ref();
    let empty: BTreeMap<String, Q> = BTreeMap::new();
    let limits = resources.and_then(|r| r.limits.as_ref()).unwrap_or(&empty);
    let requests = resources
        .and_then(|r| r.requests.as_ref())
        .unwrap_or(&empty);
    for resource in ["memory", "ephemeral-storage"] {
        for (which, map) in [("limits", limits), ("requests", requests)] {
            if let Some(text) = map.get(resource).and_then(|q| fractional_bytes(&q.0)) {
                out.push(fractional(
                    &format!("{path}.resources.{which}[{resource}]"),
                    &text,
                ));
            }
        }
    }

    let env = c.env.as_deref().unwrap_or_default();
    for (i, e) in env.iter().enumerate() {
        if !env[..i].iter().any(|earlier| earlier.name == e.name) {
            continue;
        }
        // A redefinition is fine when it builds on the earlier value (`X=$(X):more`).
        let reference = format!("$({})", e.name);
        let value = e.value.as_deref().unwrap_or_default();
        let hides = e.value_from.is_some() || value == reference || !value.contains(&reference);
        if hides {
            out.push(format!(
                "{path}.env[{i}]: hides previous definition of {}, which may be dropped when using apply",
                go_quote(&e.name)
            ));
        }
    }
}

/// kube's `applyAppArmorVersionSkew` on a pod's create: each container's AppArmor
/// annotation without a profile field. kube copies it into the field; mesopod refuses
/// the field, so here a pod with the annotation runs without the profile.
fn pod_apparmor_annotations(spec: &PodSpec, meta: &ObjectMeta) -> Vec<String> {
    let Some(annotations) = meta.annotations.as_ref() else {
        return Vec::new();
    };
    if spec.os.as_ref().is_some_and(|os| os.name == "windows") {
        return Vec::new();
    }
    super::containers_with_paths(spec)
        .filter(|(_, c)| !has_apparmor(c))
        .map(|(_, c)| format!("{APPARMOR_CONTAINER_PREFIX}{}", c.name))
        .filter(|key| annotations.contains_key(key))
        .map(|key| apparmor_annotation("", &key))
        .collect()
}

fn has_apparmor(c: &Container) -> bool {
    c.security_context
        .as_ref()
        .is_some_and(|s| s.app_armor_profile.is_some())
}

fn apparmor_annotation(prefix: &str, key: &str) -> String {
    format!(
        "{prefix}metadata.annotations[{key}]: deprecated since v1.30; use the \"appArmorProfile\" field instead"
    )
}

/// kube's port checks across all containers: `hostIP` without `hostPort`, and a
/// container port and protocol given twice.
fn ports(out: &mut Vec<String>, prefix: &str, spec: &PodSpec) {
    let mut seen: Vec<(String, &ContainerPort)> = Vec::new();
    for (path, c) in super::containers_with_paths(spec) {
        for (i, port) in c.ports.iter().flatten().enumerate() {
            let here = format!("{prefix}{path}.ports[{i}]");
            let host_ip = port.host_ip.as_deref().unwrap_or_default();
            let host_port = port.host_port.unwrap_or(0);
            if !host_ip.is_empty() && host_port == 0 {
                out.push(format!(
                    "{here}: hostIP set without hostPort: {}",
                    go_port(port)
                ));
            }
            for (other_path, other) in &seen {
                if other.container_port != port.container_port || protocol(other) != protocol(port)
                {
                    continue;
                }
                let other_ip = other.host_ip.as_deref().unwrap_or_default();
                let other_port = other.host_port.unwrap_or(0);
                if host_ip == other_ip && host_port == other_port {
                    out.push(format!(
                        "{here}: duplicate port definition with {other_path}"
                    ));
                } else if host_port == 0 || other_port == 0 {
                    out.push(format!(
                        "{here}: overlapping port definition with {other_path}"
                    ));
                } else if host_port == other_port && (host_ip.is_empty() != other_ip.is_empty()) {
                    out.push(format!(
                        "{here}: dangerously ambiguous port definition with {other_path}"
                    ));
                }
            }
            seen.push((here, port));
        }
    }
}

fn protocol(p: &ContainerPort) -> &str {
    p.protocol.as_deref().unwrap_or("TCP")
}

/// A port as Go's `%+v` prints kube's internal `ContainerPort`.
fn go_port(p: &ContainerPort) -> String {
    format!(
        "{{Name:{} HostPort:{} ContainerPort:{} Protocol:{} HostIP:{}}}",
        p.name.as_deref().unwrap_or_default(),
        p.host_port.unwrap_or(0),
        p.container_port,
        protocol(p),
        p.host_ip.as_deref().unwrap_or_default(),
    )
}

/// A string as Go's `%q` writes it (for the names valid objects carry).
fn go_quote(s: &str) -> String {
    format!("{s:?}")
}

/// The canonical form of a memory or ephemeral-storage quantity that is a fractional
/// number of bytes, as kube tells it (`MilliValue() % 1000 != 0`, then
/// `Quantity.String()`); `None` for a whole number, a negative one (refused by
/// validation) or one too large to be a resource amount.
fn fractional_bytes(text: &str) -> Option<String> {
    let q = quantity::Quantity::parse(text).ok()?;
    if q.is_negative() {
        return None;
    }
    let amount = q.amount()?;
    (amount.millis() % 1000 != 0).then(|| amount.to_string())
}

mod paths;
#[cfg(test)]
mod tests;

use paths::overlapping_virtual_paths;
