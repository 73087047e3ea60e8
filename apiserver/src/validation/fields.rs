//! # What mesopod does with each pod field
//!
//! Every field of the pod types below is **honoured** (works as in Kubernetes),
//! **ignored** (accepted and without effect, with the reason that is harmless), or
//! **refused** at create (and in `--dry-run=server`) with a 422 `Invalid` Status that
//! names the field. [`FIELDS`] is the one table: pod validation refuses from it
//! ([`super::support`]), this page is rendered from it, and a test walks k8s-openapi's
//! schemas so that a field k8s-openapi adds fails the build's tests until it is
//! classified here.
//!
//! "Not yet" fields are refused today because the work that makes them work is
//! still open (lifecycle hooks and ephemeral containers: issue #19).
//!
#![doc = include_str!("fields.md")]

/// What mesopod does with one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Works as in Kubernetes.
    Honoured,
    /// Honoured; its own fields are classified under the named type.
    Nested(&'static str),
    /// Accepted and without effect.
    Ignored,
    /// Refused at create, whatever its value.
    Refused,
    /// Refused at create because the work that makes it work is still open.
    NotYet,
    /// Only these values are accepted (scalars rendered as JSON text without quotes).
    Only(&'static [&'static str]),
    /// A map whose keys may only be these.
    Keys(&'static [&'static str]),
}

/// One classified field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// The k8s-openapi type (`PodSpec`, `Container`, ...).
    pub ty: &'static str,
    /// The field's JSON name.
    pub name: &'static str,
    /// What mesopod does with it.
    pub rule: Rule,
    /// Why, in a few words (part of the refusal message when refused).
    pub why: &'static str,
}

const fn f(ty: &'static str, name: &'static str, rule: Rule, why: &'static str) -> Field {
    Field {
        ty,
        name,
        rule,
        why,
    }
}

use Rule::{Honoured, Ignored, Keys, Nested, NotYet, Only, Refused};

const FALSE: &[&str] = &["false"];
const LIFECYCLE: &str = "lifecycle hooks are issue #19";
const NO_VOLUME: &str = "this volume type needs storage the executor cannot attach";
const NO_SELINUX: &str = "the executor applies no SELinux labels";
const SECCOMP: &str =
    "RuntimeDefault is containerd's profile; Localhost a file under --root-dir/seccomp";
const NO_APPARMOR: &str = "the executor loads no AppArmor profiles";
const WINDOWS: &str = "Linux pods: Kubernetes ignores it on Linux too";
const SOFT: &str = "a soft preference: procurement takes the first offer that fits";
const VOLUMES: &str = "mounted by the executor (#17)";

/// Every classified field; the order is the order of the rendered list.
pub const FIELDS: &[Field] = &[
    // PodSpec
    f(
        "PodSpec",
        "activeDeadlineSeconds",
        Honoured,
        "the executor fails the pod past it (DeadlineExceeded)",
    ),
    f("PodSpec", "affinity", Nested("Affinity"), ""),
    f(
        "PodSpec",
        "automountServiceAccountToken",
        Honoured,
        "ServiceAccount admission adds the token volume or not",
    ),
    f("PodSpec", "containers", Nested("Container"), ""),
    f(
        "PodSpec",
        "dnsConfig",
        Refused,
        "the executor writes no resolv.conf: pods resolve with the agent's",
    ),
    f(
        "PodSpec",
        "dnsPolicy",
        Only(&["ClusterFirst", "ClusterFirstWithHostNet", "Default"]),
        "there is no cluster DNS: every policy resolves with the agent's resolv.conf",
    ),
    f(
        "PodSpec",
        "enableServiceLinks",
        Ignored,
        "there are no Services, so there are no service variables to inject",
    ),
    f(
        "PodSpec",
        "ephemeralContainers",
        NotYet,
        "ephemeral containers are issue #19",
    ),
    f(
        "PodSpec",
        "hostAliases",
        Refused,
        "the executor writes no /etc/hosts",
    ),
    f(
        "PodSpec",
        "hostIPC",
        Only(FALSE),
        "the pod's containers share their own IPC namespace",
    ),
    f(
        "PodSpec",
        "hostNetwork",
        Honoured,
        "the agent's network; on a CNI agent other pods get their own",
    ),
    f(
        "PodSpec",
        "hostPID",
        Only(FALSE),
        "containers get their own PID namespace",
    ),
    f(
        "PodSpec",
        "hostUsers",
        Only(&["true"]),
        "user namespaces are not built",
    ),
    f(
        "PodSpec",
        "hostname",
        Honoured,
        "the UTS hostname of the pod's containers (a DNS-1123 label; the pod's name when unset)",
    ),
    f(
        "PodSpec",
        "imagePullSecrets",
        Honoured,
        "dockerconfigjson Secrets the executor pulls with",
    ),
    f("PodSpec", "initContainers", Nested("Container"), ""),
    f(
        "PodSpec",
        "nodeName",
        Honoured,
        "procurement only takes that agent's offers",
    ),
    f(
        "PodSpec",
        "nodeSelector",
        Honoured,
        "matched against the agent's attributes",
    ),
    f("PodSpec", "os", Nested("PodOS"), ""),
    f(
        "PodSpec",
        "overhead",
        Honoured,
        "added to the resources procured",
    ),
    f(
        "PodSpec",
        "preemptionPolicy",
        Ignored,
        "priority admission sets it from the class; mesopod never preempts pods",
    ),
    f(
        "PodSpec",
        "priority",
        Honoured,
        "procurement orders pods by it",
    ),
    f(
        "PodSpec",
        "priorityClassName",
        Honoured,
        "admission resolves it to a priority",
    ),
    f(
        "PodSpec",
        "readinessGates",
        Honoured,
        "Ready waits for the gates' conditions",
    ),
    f(
        "PodSpec",
        "resourceClaims",
        Refused,
        "dynamic resource allocation is not built",
    ),
    f(
        "PodSpec",
        "resources",
        Refused,
        "pod-level limits are not enforced by the executor",
    ),
    f(
        "PodSpec",
        "restartPolicy",
        Honoured,
        "the executor restarts containers by it",
    ),
    f(
        "PodSpec",
        "runtimeClassName",
        Refused,
        "the agent has one runtime (--container-runtime)",
    ),
    f(
        "PodSpec",
        "schedulerName",
        Honoured,
        "mesopod schedules its own names and default-scheduler; others are left Pending for their scheduler",
    ),
    f(
        "PodSpec",
        "schedulingGates",
        Refused,
        "procurement does not hold gated pods",
    ),
    f(
        "PodSpec",
        "securityContext",
        Nested("PodSecurityContext"),
        "",
    ),
    f(
        "PodSpec",
        "serviceAccount",
        Honoured,
        "the deprecated alias of serviceAccountName",
    ),
    f(
        "PodSpec",
        "serviceAccountName",
        Honoured,
        "ServiceAccount admission",
    ),
    f(
        "PodSpec",
        "setHostnameAsFQDN",
        Only(FALSE),
        "pods have no FQDN without cluster DNS",
    ),
    f(
        "PodSpec",
        "shareProcessNamespace",
        Only(FALSE),
        "each container has its own PID namespace",
    ),
    f(
        "PodSpec",
        "subdomain",
        Refused,
        "there is no cluster DNS to give the pod a name under",
    ),
    f(
        "PodSpec",
        "terminationGracePeriodSeconds",
        Honoured,
        "SIGTERM, then SIGKILL after it",
    ),
    f(
        "PodSpec",
        "tolerations",
        Honoured,
        "matched against the agent's taints",
    ),
    f(
        "PodSpec",
        "topologySpreadConstraints",
        Refused,
        "procurement does not spread pods",
    ),
    f("PodSpec", "volumes", Nested("Volume"), ""),
    // Affinity
    f("Affinity", "nodeAffinity", Nested("NodeAffinity"), ""),
    f("Affinity", "podAffinity", Nested("PodAffinity"), ""),
    f("Affinity", "podAntiAffinity", Nested("PodAntiAffinity"), ""),
    f(
        "NodeAffinity",
        "preferredDuringSchedulingIgnoredDuringExecution",
        Ignored,
        SOFT,
    ),
    f(
        "NodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        Honoured,
        "matched against the agent's attributes",
    ),
    f(
        "PodAffinity",
        "preferredDuringSchedulingIgnoredDuringExecution",
        Ignored,
        SOFT,
    ),
    f(
        "PodAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        Refused,
        "procurement does not place pods by other pods",
    ),
    f(
        "PodAntiAffinity",
        "preferredDuringSchedulingIgnoredDuringExecution",
        Ignored,
        SOFT,
    ),
    f(
        "PodAntiAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        Refused,
        "procurement does not place pods by other pods",
    ),
    f("PodOS", "name", Only(&["linux"]), "agents are Linux"),
    // Container (init containers too)
    f(
        "Container",
        "args",
        Honoured,
        "over the image's Cmd, $(VAR) expanded",
    ),
    f(
        "Container",
        "command",
        Honoured,
        "over the image's Entrypoint, $(VAR) expanded",
    ),
    f("Container", "env", Nested("EnvVar"), ""),
    f(
        "Container",
        "envFrom",
        Honoured,
        "ConfigMaps and Secrets read through the API shim (#17)",
    ),
    f(
        "Container",
        "image",
        Honoured,
        "pulled into the agent's image store; changed on a running pod, the container restarts with it",
    ),
    f(
        "Container",
        "imagePullPolicy",
        Honoured,
        "Always, IfNotPresent, Never",
    ),
    f("Container", "lifecycle", NotYet, LIFECYCLE),
    f("Container", "livenessProbe", Nested("Probe"), ""),
    f("Container", "name", Honoured, ""),
    f(
        "Container",
        "ports",
        Honoured,
        "hostPort comes from the offer's ports (with CNI: portmap)",
    ),
    f("Container", "readinessProbe", Nested("Probe"), ""),
    f(
        "Container",
        "resizePolicy",
        Ignored,
        "resources cannot change in place (pod updates refuse it), so no policy applies",
    ),
    f("Container", "resources", Nested("ResourceRequirements"), ""),
    f(
        "Container",
        "restartPolicy",
        Refused,
        "sidecar init containers are not run",
    ),
    f(
        "Container",
        "securityContext",
        Nested("SecurityContext"),
        "",
    ),
    f("Container", "startupProbe", Nested("Probe"), ""),
    f("Container", "stdin", Honoured, ""),
    f("Container", "stdinOnce", Honoured, ""),
    f(
        "Container",
        "terminationMessagePath",
        Ignored,
        "defaulted by the API; no termination message is read yet",
    ),
    f(
        "Container",
        "terminationMessagePolicy",
        Ignored,
        "defaulted by the API; no termination message is read yet",
    ),
    f("Container", "tty", Honoured, ""),
    f(
        "Container",
        "volumeDevices",
        Refused,
        "block devices need persistent volumes",
    ),
    f("Container", "volumeMounts", Nested("VolumeMount"), ""),
    f(
        "Container",
        "workingDir",
        Honoured,
        "over the image's WorkingDir",
    ),
    // ResourceRequirements
    f(
        "ResourceRequirements",
        "claims",
        Refused,
        "dynamic resource allocation is not built",
    ),
    f(
        "ResourceRequirements",
        "limits",
        Keys(&["cpu", "memory"]),
        "only cpu and memory limits are enforced (cgroups)",
    ),
    f(
        "ResourceRequirements",
        "requests",
        Keys(&["cpu", "memory", "ephemeral-storage"]),
        "only cpu, memory and ephemeral-storage (Mesos disk) are procured and given to the container",
    ),
    // EnvVar and its sources
    f("EnvVar", "name", Honoured, ""),
    f("EnvVar", "value", Honoured, "$(VAR) expanded"),
    f("EnvVar", "valueFrom", Nested("EnvVarSource"), ""),
    f("EnvVarSource", "configMapKeyRef", Honoured, VOLUMES),
    f(
        "EnvVarSource",
        "fieldRef",
        Honoured,
        "Kubernetes' downward API paths",
    ),
    f("EnvVarSource", "resourceFieldRef", Honoured, VOLUMES),
    f("EnvVarSource", "secretKeyRef", Honoured, VOLUMES),
    // PodSecurityContext
    f(
        "PodSecurityContext",
        "appArmorProfile",
        Refused,
        NO_APPARMOR,
    ),
    f(
        "PodSecurityContext",
        "fsGroup",
        Honoured,
        "volumes but hostPath are given the group, which joins the supplemental groups",
    ),
    f(
        "PodSecurityContext",
        "fsGroupChangePolicy",
        Only(&["Always", "OnRootMismatch"]),
        "Kubernetes' two policies; OnRootMismatch skips a volume whose root already matches",
    ),
    f("PodSecurityContext", "runAsGroup", Honoured, ""),
    f(
        "PodSecurityContext",
        "runAsNonRoot",
        Honoured,
        "CreateContainerConfigError for a root user",
    ),
    f("PodSecurityContext", "runAsUser", Honoured, ""),
    f(
        "PodSecurityContext",
        "seLinuxChangePolicy",
        Refused,
        NO_SELINUX,
    ),
    f("PodSecurityContext", "seLinuxOptions", Refused, NO_SELINUX),
    f("PodSecurityContext", "seccompProfile", Honoured, SECCOMP),
    f("PodSecurityContext", "supplementalGroups", Honoured, ""),
    f(
        "PodSecurityContext",
        "supplementalGroupsPolicy",
        Only(&["Merge"]),
        "the image's groups are merged in",
    ),
    f(
        "PodSecurityContext",
        "sysctls",
        Refused,
        "the executor sets no sysctls",
    ),
    f("PodSecurityContext", "windowsOptions", Ignored, WINDOWS),
    // SecurityContext
    f(
        "SecurityContext",
        "allowPrivilegeEscalation",
        Honoured,
        "no_new_privs",
    ),
    f("SecurityContext", "appArmorProfile", Refused, NO_APPARMOR),
    f(
        "SecurityContext",
        "capabilities",
        Honoured,
        "over containerd's default set",
    ),
    f(
        "SecurityContext",
        "privileged",
        Honoured,
        "only on agents started with --allow-privileged",
    ),
    f(
        "SecurityContext",
        "procMount",
        Only(&["Default"]),
        "/proc is always masked as Default",
    ),
    f("SecurityContext", "readOnlyRootFilesystem", Honoured, ""),
    f("SecurityContext", "runAsGroup", Honoured, ""),
    f(
        "SecurityContext",
        "runAsNonRoot",
        Honoured,
        "CreateContainerConfigError for a root user",
    ),
    f("SecurityContext", "runAsUser", Honoured, ""),
    f("SecurityContext", "seLinuxOptions", Refused, NO_SELINUX),
    f("SecurityContext", "seccompProfile", Honoured, SECCOMP),
    f("SecurityContext", "windowsOptions", Ignored, WINDOWS),
    // VolumeMount
    f("VolumeMount", "mountPath", Honoured, ""),
    f(
        "VolumeMount",
        "mountPropagation",
        Only(&["None"]),
        "mounts are private to the container",
    ),
    f("VolumeMount", "name", Honoured, ""),
    f("VolumeMount", "readOnly", Honoured, ""),
    f(
        "VolumeMount",
        "recursiveReadOnly",
        Only(&["Disabled"]),
        "read-only mounts are not made recursively read-only",
    ),
    f("VolumeMount", "subPath", Honoured, VOLUMES),
    f("VolumeMount", "subPathExpr", Honoured, VOLUMES),
    // Volume kinds
    f("Volume", "awsElasticBlockStore", Refused, NO_VOLUME),
    f("Volume", "azureDisk", Refused, NO_VOLUME),
    f("Volume", "azureFile", Refused, NO_VOLUME),
    f("Volume", "cephfs", Refused, NO_VOLUME),
    f("Volume", "cinder", Refused, NO_VOLUME),
    f("Volume", "configMap", Honoured, VOLUMES),
    f("Volume", "csi", Refused, "there are no CSI drivers"),
    f("Volume", "downwardAPI", Honoured, VOLUMES),
    f("Volume", "emptyDir", Honoured, VOLUMES),
    f(
        "Volume",
        "ephemeral",
        Refused,
        "ephemeral volumes need persistent volume claims",
    ),
    f("Volume", "fc", Refused, NO_VOLUME),
    f("Volume", "flexVolume", Refused, NO_VOLUME),
    f("Volume", "flocker", Refused, NO_VOLUME),
    f("Volume", "gcePersistentDisk", Refused, NO_VOLUME),
    f(
        "Volume",
        "gitRepo",
        Refused,
        "deprecated in Kubernetes; clone in an init container",
    ),
    f("Volume", "glusterfs", Refused, NO_VOLUME),
    f(
        "Volume",
        "hostPath",
        Honoured,
        "only under the agent's --allowed-host-paths (#17)",
    ),
    f("Volume", "image", Refused, "image volumes are not built"),
    f("Volume", "iscsi", Refused, NO_VOLUME),
    f("Volume", "name", Honoured, ""),
    f("Volume", "nfs", Refused, NO_VOLUME),
    f(
        "Volume",
        "persistentVolumeClaim",
        Refused,
        "there are no persistent volumes",
    ),
    f("Volume", "photonPersistentDisk", Refused, NO_VOLUME),
    f("Volume", "portworxVolume", Refused, NO_VOLUME),
    f("Volume", "projected", Honoured, VOLUMES),
    f("Volume", "quobyte", Refused, NO_VOLUME),
    f("Volume", "rbd", Refused, NO_VOLUME),
    f("Volume", "scaleIO", Refused, NO_VOLUME),
    f("Volume", "secret", Honoured, VOLUMES),
    f("Volume", "storageos", Refused, NO_VOLUME),
    f("Volume", "vsphereVolume", Refused, NO_VOLUME),
    // Probe: run by the executor (`executor::probe`) with kubelet's semantics.
    f(
        "Probe",
        "exec",
        Honoured,
        "the command runs in the container; exit 0 passes",
    ),
    f("Probe", "failureThreshold", Honoured, ""),
    f(
        "Probe",
        "grpc",
        Honoured,
        "grpc.health.v1.Health/Check, plaintext",
    ),
    f(
        "Probe",
        "httpGet",
        Honoured,
        "scheme, host (default the pod IP), path, port by number or name, httpHeaders",
    ),
    f("Probe", "initialDelaySeconds", Honoured, ""),
    f("Probe", "periodSeconds", Honoured, ""),
    f(
        "Probe",
        "successThreshold",
        Honoured,
        "must be 1 for liveness and startup",
    ),
    f(
        "Probe",
        "tcpSocket",
        Honoured,
        "host (default the pod IP), port by number or name",
    ),
    f(
        "Probe",
        "terminationGracePeriodSeconds",
        Honoured,
        "the grace period of the kill a liveness or startup failure causes",
    ),
    f("Probe", "timeoutSeconds", Honoured, ""),
];

/// The entry for `ty`'s field `name`.
pub fn lookup(ty: &str, name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.ty == ty && f.name == name)
}

/// The list as Markdown, one section per type (what `fields.md` holds).
pub fn render() -> String {
    let mut out = String::new();
    let mut current = "";
    for f in FIELDS {
        if f.ty != current {
            current = f.ty;
            out.push_str(&format!(
                "\n## `{current}`\n\n| field | mesopod | why |\n|---|---|---|\n"
            ));
        }
        let what = match f.rule {
            Honoured => "honoured".to_owned(),
            Nested(t) => format!("honoured, see `{t}`"),
            Ignored => "ignored".to_owned(),
            Refused => "refused".to_owned(),
            NotYet => "refused (not yet)".to_owned(),
            Only(v) => format!("only {}", quoted(v)),
            Keys(k) => format!("keys {} only", quoted(k)),
        };
        out.push_str(&format!("| `{}` | {what} | {} |\n", f.name, f.why));
    }
    out
}

fn quoted(values: &[&str]) -> String {
    values
        .iter()
        .map(|v| format!("`{v}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
