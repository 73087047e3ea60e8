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
    Container, ContainerPort, NodeSelectorTerm, Pod, PodSpec, PodTemplateSpec, Volume,
    VolumeProjection, WeightedPodAffinityTerm,
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
    // The value in nanos, rounded up, as kube keeps it.
    let digits = format!("{}{}", q.integer_digits(), q.fraction_digits());
    let mut nanos: u128 = digits.parse().ok()?;
    nanos = nanos.checked_mul(1u128.checked_shl(q.exp2())?)?;
    let shift = q.exp10() + 9 - i32::try_from(q.fraction_digits().len()).ok()?;
    if shift >= 0 {
        nanos = nanos.checked_mul(10u128.checked_pow(shift.unsigned_abs())?)?;
    } else {
        nanos = nanos.div_ceil(10u128.checked_pow(shift.unsigned_abs())?);
    }
    let millis = nanos.div_ceil(1_000_000);
    if millis.is_multiple_of(1000) {
        return None;
    }
    // Canonical: the digits without trailing zeros, the exponent then lowered to a
    // multiple of three. A fraction always ends up in milli, micro or nano.
    let mut exponent: i32 = -9;
    while nanos.is_multiple_of(10) {
        nanos /= 10;
        exponent += 1;
    }
    while exponent % 3 != 0 {
        nanos *= 10;
        exponent -= 1;
    }
    let suffix_start = text
        .trim_start_matches(['+', '-'])
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    let exponent_form = suffix_start.len() > 1 && suffix_start.starts_with(['e', 'E']);
    let suffix = match (exponent_form, exponent) {
        (true, e) => format!("e{e}"),
        (false, -3) => "m".to_owned(),
        (false, -6) => "u".to_owned(),
        (false, -9) => "n".to_owned(),
        (false, _) => return None,
    };
    Some(format!("{nanos}{suffix}"))
}

/// `warningsForOverlappingVirtualPaths`: within one configMap, secret or downwardAPI
/// volume, and across one projected volume's sources, paths that are the same or one
/// inside the other, so one file hides another or cannot be written.
fn overlapping_virtual_paths(volumes: &[Volume]) -> Vec<String> {
    let mut out = Vec::new();
    for v in volumes {
        let name = go_quote(&v.name);
        if let Some(items) = v.config_map.as_ref().and_then(|c| c.items.as_ref()) {
            let cm = go_quote(
                &v.config_map
                    .as_ref()
                    .map(|c| c.name.clone())
                    .unwrap_or_default(),
            );
            let paths: Vec<&str> = items.iter().map(|i| i.path.as_str()).collect();
            overlaps(
                &mut out,
                &paths,
                &format!("volume {name} (ConfigMap {cm}): overlapping paths"),
            );
        }
        if let Some(s) = &v.secret
            && let Some(items) = &s.items
        {
            let secret = go_quote(s.secret_name.as_deref().unwrap_or_default());
            let paths: Vec<&str> = items.iter().map(|i| i.path.as_str()).collect();
            overlaps(
                &mut out,
                &paths,
                &format!("volume {name} (Secret {secret}): overlapping paths"),
            );
        }
        if let Some(items) = v.downward_api.as_ref().and_then(|d| d.items.as_ref()) {
            let paths: Vec<&str> = items.iter().map(|i| i.path.as_str()).collect();
            overlaps(
                &mut out,
                &paths,
                &format!("volume {name} (DownwardAPI): overlapping paths"),
            );
        }
        if let Some(p) = &v.projected {
            projected(&mut out, &name, p.sources.as_deref().unwrap_or_default());
        }
    }
    out
}

/// The projected part of [`overlapping_virtual_paths`]. As in kube, a source none of
/// the cases match checks the previous source's paths again.
fn projected(out: &mut Vec<String>, name: &str, sources: &[VolumeProjection]) {
    let mut source_paths: Vec<String> = Vec::new();
    let mut message = String::new();
    let mut all_paths: Vec<String> = Vec::new();
    for source in sources {
        if *source == VolumeProjection::default() {
            out.push(format!("volume {name} (Projected) has no sources provided"));
            continue;
        }
        if let Some(items) = source.config_map.as_ref().and_then(|c| c.items.as_ref()) {
            let cm = source
                .config_map
                .as_ref()
                .map(|c| c.name.as_str())
                .unwrap_or_default();
            source_paths = items.iter().map(|i| i.path.clone()).collect();
            message = format!(
                "volume {name} (Projected ConfigMap {}): overlapping paths",
                go_quote(cm)
            );
        } else if let Some(items) = source.secret.as_ref().and_then(|s| s.items.as_ref()) {
            let secret = source
                .secret
                .as_ref()
                .map(|s| s.name.as_str())
                .unwrap_or_default();
            source_paths = items.iter().map(|i| i.path.clone()).collect();
            message = format!(
                "volume {name} (Projected Secret {}): overlapping paths",
                go_quote(secret)
            );
        } else if let Some(items) = source.downward_api.as_ref().and_then(|d| d.items.as_ref()) {
            source_paths = items.iter().map(|i| i.path.clone()).collect();
            message = format!("volume {name} (Projected DownwardAPI): overlapping paths");
        } else if let Some(t) = &source.service_account_token {
            source_paths = vec![t.path.clone()];
            message = format!("volume {name} (Projected ServiceAccountToken): overlapping paths");
        } else if let Some(b) = &source.cluster_trust_bundle {
            source_paths = vec![b.path.clone()];
            let id = b
                .name
                .as_deref()
                .or(b.signer_name.as_deref())
                .unwrap_or_default();
            message = format!(
                "volume {name} (Projected ClusterTrustBundle {}): overlapping paths",
                go_quote(id)
            );
        }
        if source_paths.is_empty() {
            continue;
        }
        let refs: Vec<&str> = source_paths.iter().map(String::as_str).collect();
        overlaps(out, &refs, &message);
        let mut unique: Vec<String> = Vec::new();
        for p in &source_paths {
            if !unique.contains(p) {
                unique.push(p.clone());
            }
        }
        let mut ordered: Vec<&str> = unique
            .iter()
            .chain(&all_paths)
            .map(String::as_str)
            .collect();
        ordered.sort_unstable();
        overlaps(out, &ordered, &message);
        for p in unique {
            if !all_paths.contains(&p) {
                all_paths.push(p);
            }
        }
    }
}

/// `checkVolumeMappingForOverlap`: each path (trailing `/` trimmed) against the ones
/// before it.
fn overlaps(out: &mut Vec<String>, paths: &[&str], message: &str) {
    let mut seen: Vec<&str> = Vec::new();
    for path in paths {
        let normalized = path.trim_end_matches('/');
        if let Some(collision) = overlap(&seen, normalized) {
            out.push(format!(
                "{message}: {} with {}",
                go_quote(normalized),
                go_quote(collision)
            ));
        }
        if !seen.contains(&normalized) {
            seen.push(normalized);
        }
    }
}

/// kube's `checkForOverlap`, prefix tests included as written: `"test"` is taken to
/// overlap `"testing"` too.
fn overlap<'a>(seen: &[&'a str], path: &str) -> Option<&'a str> {
    for item in seen {
        if item.is_empty() || path.is_empty() {
            return None;
        }
        if *item == path
            || format!("{item}/").starts_with(path)
            || format!("{path}/").starts_with(item)
        {
            return Some(item);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::{Value, json};

    use super::*;

    /// The warnings on creating a pod named `p` with `spec` and `annotations`.
    fn pod_with(annotations: Value, spec: Value) -> Vec<String> {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": annotations},
            "spec": spec
        }))
        .unwrap();
        for_pod_create(&pod)
    }

    fn pod(spec: Value) -> Vec<String> {
        pod_with(json!({}), spec)
    }

    fn template(annotations: Value, spec: Value) -> Vec<String> {
        let t: PodTemplateSpec =
            serde_json::from_value(json!({"metadata": {"annotations": annotations}, "spec": spec}))
                .unwrap();
        for_template("spec.template", &t)
    }

    fn container(extra: Value) -> Value {
        let mut c = json!({"name": "c", "image": "i"});
        c.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        c
    }

    #[test]
    fn a_plain_pod_gets_no_warning() {
        assert!(pod(json!({"containers": [container(json!({}))]})).is_empty());
    }

    #[test]
    fn a_pod_name_that_is_no_dns_label_is_warned_about() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "a.b"}, "spec": {"containers": [container(json!({}))]}
        }))
        .unwrap();
        assert_eq!(
            for_pod_create(&p),
            [format!(
                "metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [{DNS1123_LABEL_MSG}]"
            )]
        );
    }

    #[test]
    fn fractional_byte_values_are_told_in_canonical_form() {
        let got = pod(json!({
            "overhead": {"memory": "0.5", "ephemeral-storage": "1Ki", "cpu": "0.5"},
            "initContainers": [container(json!({"resources": {"limits": {"ephemeral-storage": "1.5m"}}}))],
            "containers": [container(json!({"resources": {
                "limits": {"memory": "0.1Ki"},
                "requests": {"memory": "1m", "ephemeral-storage": "1e-3", "cpu": "1m"}
            }}))]
        }));
        assert_eq!(
            got,
            [
                "spec.overhead[memory]: fractional byte value \"500m\" is invalid, must be an integer",
                "spec.initContainers[0].resources.limits[ephemeral-storage]: fractional byte value \"1500u\" is invalid, must be an integer",
                "spec.containers[0].resources.limits[memory]: fractional byte value \"102400m\" is invalid, must be an integer",
                "spec.containers[0].resources.requests[memory]: fractional byte value \"1m\" is invalid, must be an integer",
                "spec.containers[0].resources.requests[ephemeral-storage]: fractional byte value \"1e-3\" is invalid, must be an integer",
            ]
        );
    }

    #[test]
    fn fractions_follow_kubes_milli_rounding() {
        assert_eq!(fractional_bytes("1.5Gi"), None);
        assert_eq!(fractional_bytes("128Mi"), None);
        assert_eq!(fractional_bytes("2e3"), None);
        // MilliValue rounds up: 0.9999999 is 1000 milli, a whole byte to kube.
        assert_eq!(fractional_bytes("0.9999999"), None);
        assert_eq!(fractional_bytes("1n").as_deref(), Some("1n"));
        assert_eq!(fractional_bytes("0.0000000001").as_deref(), Some("1n"));
        assert_eq!(fractional_bytes("1.25").as_deref(), Some("1250m"));
        assert_eq!(fractional_bytes("1500u").as_deref(), Some("1500u"));
        assert_eq!(fractional_bytes("-1m"), None);
    }

    #[test]
    fn deprecated_node_labels_in_the_selector_and_node_affinity() {
        let got = template(
            json!({}),
            json!({
                "nodeSelector": {"beta.kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
                "affinity": {"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [
                            {"key": "k", "operator": "Exists"},
                            {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "Exists"}
                        ]}
                    ]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference":
                        {"matchExpressions": [{"key": "node-role.kubernetes.io/master", "operator": "Exists"}]}}]
                }},
                "containers": [container(json!({}))]
            }),
        );
        assert_eq!(
            got,
            [
                "spec.template.spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14; use \"kubernetes.io/arch\" instead",
                "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].key: failure-domain.beta.kubernetes.io/zone is deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead",
                "spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key: node-role.kubernetes.io/master is use \"node-role.kubernetes.io/control-plane\" instead",
            ]
        );
    }

    #[test]
    fn deprecated_seccomp_apparmor_and_other_annotations() {
        let annotations = json!({
            "scheduler.alpha.kubernetes.io/critical-pod": "",
            "security.alpha.kubernetes.io/sysctls": "a=1",
            "seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
            "container.seccomp.security.alpha.kubernetes.io/a": "runtime/default",
            "container.seccomp.security.alpha.kubernetes.io/b": "runtime/default",
            "container.apparmor.security.beta.kubernetes.io/a": "runtime/default"
        });
        let spec = json!({"containers": [
            {"name": "a", "image": "i"},
            {"name": "b", "image": "i", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}
        ]});
        let seccomp = "non-functional in v1.27+; use the \"seccompProfile\" field instead";
        let apparmor = "deprecated since v1.30; use the \"appArmorProfile\" field instead";
        assert_eq!(
            template(annotations.clone(), spec.clone()),
            [
                "spec.template.metadata.annotations[scheduler.alpha.kubernetes.io/critical-pod]: non-functional in v1.16+; use the \"priorityClassName\" field instead".to_owned(),
                "spec.template.metadata.annotations[security.alpha.kubernetes.io/sysctls]: non-functional in v1.11+; use the \"sysctls\" field instead".to_owned(),
                format!("spec.template.metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: {seccomp}"),
                format!("spec.template.metadata.annotations[container.seccomp.security.alpha.kubernetes.io/a]: {seccomp}"),
                format!("spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/a]: {apparmor}"),
            ]
        );
        // A pod's AppArmor warning comes first: kube gives it while preparing the create.
        assert_eq!(
            pod_with(annotations, spec)[0],
            format!(
                "metadata.annotations[container.apparmor.security.beta.kubernetes.io/a]: {apparmor}"
            )
        );
    }

    #[test]
    fn image_pull_secrets_named_twice_or_not_at_all() {
        let got = pod(json!({
            "imagePullSecrets": [{"name": "a"}, {"name": ""}, {"name": "a"}, {"name": ""}],
            "containers": [container(json!({}))]
        }));
        assert_eq!(
            got,
            [
                "spec.imagePullSecrets[2].name: duplicate name \"a\"",
                "spec.imagePullSecrets[3].name: duplicate name \"\"",
                "spec.imagePullSecrets[1].name: invalid empty name \"\"",
                "spec.imagePullSecrets[3].name: invalid empty name \"\"",
            ]
        );
    }

    #[test]
    fn an_env_var_that_hides_an_earlier_one_unless_it_builds_on_it() {
        let got = template(
            json!({}),
            json!({"containers": [container(json!({"env": [
                {"name": "X", "value": "a"},
                {"name": "X", "value": "$(X):b"},
                {"name": "X", "value": "$(X)"},
                {"name": "X", "value": "c"},
                {"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "Y", "value": "y"}
            ]}))]}),
        );
        let hides = "hides previous definition of \"X\", which may be dropped when using apply";
        assert_eq!(
            got,
            [
                format!("spec.template.spec.containers[0].env[2]: {hides}"),
                format!("spec.template.spec.containers[0].env[3]: {hides}"),
                format!("spec.template.spec.containers[0].env[4]: {hides}"),
            ]
        );
    }

    #[test]
    fn ports_given_twice_across_containers() {
        let got = pod(json!({"containers": [
            container(json!({"ports": [
                {"containerPort": 80, "protocol": "TCP"},
                {"name": "h", "containerPort": 81, "hostIP": "10.0.0.1", "protocol": "TCP"},
                {"containerPort": 82, "hostPort": 8082, "hostIP": "10.0.0.1", "protocol": "TCP"}
            ]})),
            {"name": "d", "image": "i", "ports": [
                {"containerPort": 80, "protocol": "TCP"},
                {"containerPort": 80, "hostPort": 8080, "protocol": "TCP"},
                {"containerPort": 82, "hostPort": 8082, "protocol": "TCP"},
                {"containerPort": 80, "protocol": "UDP"}
            ]}
        ]}));
        assert_eq!(
            got,
            [
                "spec.containers[0].ports[1]: hostIP set without hostPort: {Name:h HostPort:0 ContainerPort:81 Protocol:TCP HostIP:10.0.0.1}",
                "spec.containers[1].ports[0]: duplicate port definition with spec.containers[0].ports[0]",
                "spec.containers[1].ports[1]: overlapping port definition with spec.containers[0].ports[0]",
                "spec.containers[1].ports[1]: overlapping port definition with spec.containers[1].ports[0]",
                "spec.containers[1].ports[2]: dangerously ambiguous port definition with spec.containers[0].ports[2]",
            ]
        );
    }

    #[test]
    fn a_null_label_selector_in_a_preferred_pod_affinity_term() {
        let got = pod(json!({
            "affinity": {
                "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": "k", "labelSelector": {}}},
                    {"weight": 1, "podAffinityTerm": {"topologyKey": "k"}}
                ]},
                "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "podAffinityTerm": {"topologyKey": "k"}}
                ]}
            },
            "containers": [container(json!({}))]
        }));
        assert_eq!(
            got,
            [
                "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[1].podAffinityTerm.labelSelector: a null labelSelector results in matching no pod",
                "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector: a null labelSelector results in matching no pod",
            ]
        );
    }

    #[test]
    fn overlapping_paths_within_a_volume() {
        let got = pod(json!({
            "volumes": [
                {"name": "c", "configMap": {"name": "cm", "items": [
                    {"key": "a", "path": "test"}, {"key": "b", "path": "test/app"}]}},
                {"name": "s", "secret": {"secretName": "sec", "items": [
                    {"key": "a", "path": "x"}, {"key": "b", "path": "x/"}]}},
                {"name": "d", "downwardAPI": {"items": [
                    {"path": "n", "fieldRef": {"fieldPath": "metadata.name"}},
                    {"path": "m", "fieldRef": {"fieldPath": "metadata.name"}}]}}
            ],
            "containers": [container(json!({}))]
        }));
        assert_eq!(
            got,
            [
                "volume \"c\" (ConfigMap \"cm\"): overlapping paths: \"test/app\" with \"test\"",
                "volume \"s\" (Secret \"sec\"): overlapping paths: \"x\" with \"x\"",
            ]
        );
    }

    #[test]
    fn overlapping_paths_across_projected_sources() {
        let got = pod(json!({
            "volumes": [{"name": "p", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"configMap": {"name": "cm", "items": [{"key": "k", "path": "token"}]}},
                {}
            ]}}],
            "containers": [container(json!({}))]
        }));
        assert_eq!(
            got,
            [
                "volume \"p\" (Projected ConfigMap \"cm\"): overlapping paths: \"token\" with \"token\"",
                "volume \"p\" (Projected) has no sources provided",
            ]
        );
    }

    #[test]
    fn the_token_volume_serviceaccount_admission_adds_is_quiet() {
        let got = pod(json!({
            "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
            ]}}],
            "containers": [container(json!({}))]
        }));
        assert!(got.is_empty(), "{got:?}");
    }
}
