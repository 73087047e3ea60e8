//! The baseline checks (`check_appArmorProfile.go`, `check_capabilities_baseline.go`,
//! `check_hostNamespaces.go`, `check_hostPathVolumes.go`, `check_hostPorts.go`,
//! `check_privileged.go`, `check_procMount.go`, `check_seLinuxOptions.go`,
//! `check_seccompProfile_baseline.go`, `check_sysctls.go`,
//! `check_windowsHostProcess.go`), with their messages word for word.

use k8s_openapi::api::core::v1::{PodSpec, SELinuxOptions};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Violation, containers, containers_named, go_quote, join_quote, plural, sorted};

/// Capabilities a baseline container may add: the container runtime's default set
/// less `NET_RAW`.
const DEFAULT_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

const APPARMOR_ANNOTATION_PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
const SECCOMP_POD_ANNOTATION: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER_ANNOTATION_PREFIX: &str = "container.seccomp.security.alpha.kubernetes.io/";

/// "pod and container \"a\"": who set a forbidden value.
fn setters(pod: bool, containers: &[String]) -> Vec<String> {
    let mut s = Vec::new();
    if pod {
        s.push("pod".to_string());
    }
    if !containers.is_empty() {
        s.push(containers_named(containers));
    }
    s
}

pub(super) fn app_armor_profile(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let allowed = |t: &str| matches!(t, "RuntimeDefault" | "Localhost");
    let mut bad_values = Vec::new();
    let pod_profile = spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.app_armor_profile.as_ref())
        .filter(|p| !allowed(&p.type_));
    if let Some(p) = pod_profile {
        bad_values.push(p.type_.clone());
    }
    let pod_bad = pod_profile.is_some();
    let mut bad_containers = Vec::new();
    for c in containers(spec) {
        if let Some(p) = c
            .security_context
            .as_ref()
            .and_then(|sc| sc.app_armor_profile.as_ref())
            .filter(|p| !allowed(&p.type_))
        {
            bad_containers.push(c.name.clone());
            bad_values.push(p.type_.clone());
        }
    }
    let mut who = setters(pod_bad, &bad_containers);
    let mut values = sorted(bad_values);
    let mut annotations: Vec<String> = meta
        .annotations
        .iter()
        .flatten()
        .filter(|(k, v)| {
            k.starts_with(APPARMOR_ANNOTATION_PREFIX)
                && !(v.is_empty() || *v == "runtime/default" || v.starts_with("localhost/"))
        })
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect();
    if !annotations.is_empty() {
        annotations.sort();
        who.push(plural("annotation", "annotations", annotations.len()).to_string());
        values.extend(annotations);
    }
    if who.is_empty() {
        return None;
    }
    Some(Violation::new(
        plural(
            "forbidden AppArmor profile",
            "forbidden AppArmor profiles",
            values.len(),
        ),
        format!(
            "{} must not set AppArmor profile type to {}",
            who.join(" and "),
            join_quote(&values)
        ),
    ))
}

pub(super) fn capabilities(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let mut bad_containers = Vec::new();
    let mut non_default = Vec::new();
    for c in containers(spec) {
        let Some(caps) = c
            .security_context
            .as_ref()
            .and_then(|sc| sc.capabilities.as_ref())
        else {
            continue;
        };
        let mut valid = true;
        for cap in caps.add.iter().flatten() {
            if !DEFAULT_CAPABILITIES.contains(&cap.as_str()) {
                valid = false;
                non_default.push(cap.clone());
            }
        }
        if !valid {
            bad_containers.push(c.name.clone());
        }
    }
    if bad_containers.is_empty() {
        return None;
    }
    Some(Violation::new(
        "non-default capabilities",
        format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&bad_containers),
            join_quote(&sorted(non_default))
        ),
    ))
}

pub(super) fn host_namespaces(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let mut on = Vec::new();
    if spec.host_network == Some(true) {
        on.push("hostNetwork=true");
    }
    if spec.host_pid == Some(true) {
        on.push("hostPID=true");
    }
    if spec.host_ipc == Some(true) {
        on.push("hostIPC=true");
    }
    (!on.is_empty()).then(|| Violation::new("host namespaces", on.join(", ")))
}

pub(super) fn host_path_volumes(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let names: Vec<String> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| v.host_path.is_some())
        .map(|v| v.name.clone())
        .collect();
    (!names.is_empty()).then(|| {
        Violation::new(
            "hostPath volumes",
            format!(
                "{} {}",
                plural("volume", "volumes", names.len()),
                join_quote(&names)
            ),
        )
    })
}

pub(super) fn host_ports(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let mut bad_containers = Vec::new();
    let mut ports = Vec::new();
    for c in containers(spec) {
        let mut valid = true;
        for p in c.ports.iter().flatten() {
            if let Some(hp) = p.host_port.filter(|hp| *hp != 0) {
                valid = false;
                ports.push(hp.to_string());
            }
        }
        if !valid {
            bad_containers.push(c.name.clone());
        }
    }
    if bad_containers.is_empty() {
        return None;
    }
    // A set of strings: sorted as text, not as numbers.
    let ports = sorted(ports);
    Some(Violation::new(
        "hostPort",
        format!(
            "{} {} {} {}",
            containers_named(&bad_containers),
            plural("uses", "use", bad_containers.len()),
            plural("hostPort", "hostPorts", ports.len()),
            ports.join(", ")
        ),
    ))
}

pub(super) fn privileged(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let bad: Vec<String> = containers(spec)
        .iter()
        .filter(|c| {
            c.security_context
                .as_ref()
                .and_then(|sc| sc.privileged)
                .unwrap_or(false)
        })
        .map(|c| c.name.clone())
        .collect();
    (!bad.is_empty()).then(|| {
        Violation::new(
            "privileged",
            format!(
                "{} must not set securityContext.privileged=true",
                containers_named(&bad)
            ),
        )
    })
}

pub(super) fn proc_mount(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    // The relaxation for pods in a user namespace needs hostUsers=false, which
    // mesopod refuses, and the UserNamespacesPodSecurityStandards gate, off by default.
    let mut bad = Vec::new();
    let mut types = Vec::new();
    for c in containers(spec) {
        if let Some(pm) = c
            .security_context
            .as_ref()
            .and_then(|sc| sc.proc_mount.as_ref())
            && pm != "Default"
        {
            bad.push(c.name.clone());
            types.push(pm.clone());
        }
    }
    (!bad.is_empty()).then(|| {
        Violation::new(
            "procMount",
            format!(
                "{} must not set securityContext.procMount to {}",
                containers_named(&bad),
                join_quote(&sorted(types))
            ),
        )
    })
}

pub(super) fn se_linux_options_1_0(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    se_linux_options(
        meta,
        spec,
        &["", "container_t", "container_init_t", "container_kvm_t"],
    )
}

pub(super) fn se_linux_options_1_31(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    se_linux_options(
        meta,
        spec,
        &[
            "",
            "container_t",
            "container_init_t",
            "container_kvm_t",
            "container_engine_t",
        ],
    )
}

fn se_linux_options(_: &ObjectMeta, spec: &PodSpec, types: &[&str]) -> Option<Violation> {
    let mut bad_types = Vec::new();
    let (mut set_user, mut set_role) = (false, false);
    let mut valid = |o: &SELinuxOptions| {
        let mut ok = true;
        let t = o.type_.as_deref().unwrap_or("");
        if !types.contains(&t) {
            ok = false;
            bad_types.push(t.to_string());
        }
        if o.user.as_deref().is_some_and(|u| !u.is_empty()) {
            ok = false;
            set_user = true;
        }
        if o.role.as_deref().is_some_and(|r| !r.is_empty()) {
            ok = false;
            set_role = true;
        }
        ok
    };
    let pod_bad = spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.se_linux_options.as_ref())
        .is_some_and(|o| !valid(o));
    let mut bad_containers = Vec::new();
    for c in containers(spec) {
        if let Some(o) = c
            .security_context
            .as_ref()
            .and_then(|sc| sc.se_linux_options.as_ref())
            && !valid(o)
        {
            bad_containers.push(c.name.clone());
        }
    }
    let who = setters(pod_bad, &bad_containers);
    if who.is_empty() {
        return None;
    }
    let bad_types = sorted(bad_types);
    let mut data = Vec::new();
    if !bad_types.is_empty() {
        data.push(format!(
            "{} {}",
            plural("type", "types", bad_types.len()),
            join_quote(&bad_types)
        ));
    }
    if set_user {
        data.push("user may not be set".to_string());
    }
    if set_role {
        data.push("role may not be set".to_string());
    }
    Some(Violation::new(
        "seLinuxOptions",
        format!(
            "{} set forbidden securityContext.seLinuxOptions: {}",
            who.join(" and "),
            data.join("; ")
        ),
    ))
}

/// Before 1.19 seccomp was set by annotations.
pub(super) fn seccomp_annotations(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let valid =
        |v: &str| v == "runtime/default" || v == "docker/default" || v.starts_with("localhost/");
    let annotations = meta.annotations.as_ref();
    let get = |k: &str| annotations.and_then(|a| a.get(k));
    let mut forbidden = Vec::new();
    if let Some(v) = get(SECCOMP_POD_ANNOTATION).filter(|v| !valid(v)) {
        forbidden.push(format!("{SECCOMP_POD_ANNOTATION}={}", go_quote(v)));
    }
    for c in containers(spec) {
        let key = format!("{SECCOMP_CONTAINER_ANNOTATION_PREFIX}{}", c.name);
        if let Some(v) = get(&key).filter(|v| !valid(v)) {
            forbidden.push(format!("{key}={}", go_quote(v)));
        }
    }
    let forbidden = sorted(forbidden);
    (!forbidden.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                "forbidden {} {}",
                plural("annotation", "annotations", forbidden.len()),
                forbidden.join(", ")
            ),
        )
    })
}

pub(super) fn valid_seccomp(t: &str) -> bool {
    t == "Localhost" || t == "RuntimeDefault"
}

pub(super) fn seccomp_profile(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let mut bad_values = Vec::new();
    let pod_profile = spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.seccomp_profile.as_ref())
        .filter(|p| !valid_seccomp(&p.type_));
    if let Some(p) = pod_profile {
        bad_values.push(p.type_.clone());
    }
    let pod_bad = pod_profile.is_some();
    let mut bad_containers = Vec::new();
    for c in containers(spec) {
        if let Some(p) = c
            .security_context
            .as_ref()
            .and_then(|sc| sc.seccomp_profile.as_ref())
            .filter(|p| !valid_seccomp(&p.type_))
        {
            bad_containers.push(c.name.clone());
            bad_values.push(p.type_.clone());
        }
    }
    let who = setters(pod_bad, &bad_containers);
    (!who.is_empty()).then(|| {
        Violation::new(
            "seccompProfile",
            format!(
                "{} must not set securityContext.seccompProfile.type to {}",
                who.join(" and "),
                join_quote(&sorted(bad_values))
            ),
        )
    })
}

const SYSCTLS_1_0: [&str; 5] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
];
const SYSCTLS_1_27: [&str; 1] = ["net.ipv4.ip_local_reserved_ports"];
const SYSCTLS_1_29: [&str; 4] = [
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const SYSCTLS_1_32: [&str; 2] = ["net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"];

pub(super) fn sysctls_1_0(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(meta, spec, &[&SYSCTLS_1_0])
}

pub(super) fn sysctls_1_27(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(meta, spec, &[&SYSCTLS_1_0, &SYSCTLS_1_27])
}

pub(super) fn sysctls_1_29(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(meta, spec, &[&SYSCTLS_1_0, &SYSCTLS_1_27, &SYSCTLS_1_29])
}

pub(super) fn sysctls_1_32(meta: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    sysctls(
        meta,
        spec,
        &[&SYSCTLS_1_0, &SYSCTLS_1_27, &SYSCTLS_1_29, &SYSCTLS_1_32],
    )
}

fn sysctls(_: &ObjectMeta, spec: &PodSpec, allowed: &[&[&str]]) -> Option<Violation> {
    let forbidden: Vec<&str> = spec
        .security_context
        .iter()
        .flat_map(|sc| sc.sysctls.iter().flatten())
        .map(|s| s.name.as_str())
        .filter(|n| !allowed.iter().any(|set| set.contains(n)))
        .collect();
    (!forbidden.is_empty()).then(|| Violation::new("forbidden sysctls", forbidden.join(", ")))
}

pub(super) fn windows_host_process(_: &ObjectMeta, spec: &PodSpec) -> Option<Violation> {
    let bad: Vec<String> = containers(spec)
        .iter()
        .filter(|c| {
            c.security_context
                .as_ref()
                .and_then(|sc| sc.windows_options.as_ref())
                .and_then(|w| w.host_process)
                .unwrap_or(false)
        })
        .map(|c| c.name.clone())
        .collect();
    let pod_bad = spec
        .security_context
        .as_ref()
        .and_then(|sc| sc.windows_options.as_ref())
        .and_then(|w| w.host_process)
        .unwrap_or(false);
    let who = setters(pod_bad, &bad);
    (!who.is_empty()).then(|| {
        Violation::new(
            "hostProcess",
            format!(
                "{} must not set securityContext.windowsOptions.hostProcess=true",
                who.join(" and ")
            ),
        )
    })
}
