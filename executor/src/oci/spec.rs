//! The part of the OCI runtime spec's `config.json` that mesopod writes and
//! its embedded runtime reads. Field names are the spec's, so runc (or any
//! runc-compatible runtime) reads the same file.
//!
//! A hand-written subset rather than the `oci-spec` crate: it is a dozen
//! plain structs, and `oci-spec`'s builders and derive macros would be most
//! of the executor's build time on a 2-core machine.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The OCI runtime spec version these files follow.
pub const OCI_VERSION: &str = "1.0.2";

/// `config.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Spec {
    /// `ociVersion`.
    pub oci_version: String,
    /// The container's process.
    pub process: Process,
    /// Its root filesystem.
    pub root: Root,
    /// The UTS namespace's hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Mounts, in order.
    #[serde(default)]
    pub mounts: Vec<Mount>,
    /// Linux specifics.
    pub linux: Linux,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `process`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Process {
    /// Always false: output goes to the log files.
    #[serde(default)]
    pub terminal: bool,
    /// Who runs it.
    pub user: User,
    /// argv.
    pub args: Vec<String>,
    /// `KEY=value` entries.
    #[serde(default)]
    pub env: Vec<String>,
    /// Working directory inside the root filesystem.
    pub cwd: String,
    /// Capability sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    /// `no_new_privs`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_new_privileges: bool,
}

/// `process.user`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct User {
    /// uid.
    pub uid: u32,
    /// gid.
    pub gid: u32,
    /// Supplementary groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub additional_gids: Vec<u32>,
}

/// `process.capabilities`: `CAP_*` names per set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capabilities {
    /// Bounding set.
    #[serde(default)]
    pub bounding: Vec<String>,
    /// Effective set.
    #[serde(default)]
    pub effective: Vec<String>,
    /// Inheritable set.
    #[serde(default)]
    pub inheritable: Vec<String>,
    /// Permitted set.
    #[serde(default)]
    pub permitted: Vec<String>,
    /// Ambient set.
    #[serde(default)]
    pub ambient: Vec<String>,
}

/// `root`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Root {
    /// Path of the root filesystem (absolute, or relative to the bundle).
    pub path: String,
    /// Mounted read-only.
    #[serde(default)]
    pub readonly: bool,
}

/// One `mounts` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// Where, inside the container.
    pub destination: String,
    /// Filesystem type (`proc`, `tmpfs`, `bind`, ...).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Options (`ro`, `nosuid`, `bind`, `mode=755`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// `linux`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Linux {
    /// Namespaces to create (no path) or join (path).
    #[serde(default)]
    pub namespaces: Vec<Namespace>,
    /// The container's cgroup, relative to the runtime's own cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroups_path: Option<String>,
    /// cgroup limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Paths hidden from the container.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masked_paths: Vec<String>,
    /// Paths made read-only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub readonly_paths: Vec<String>,
    /// The syscall filter (`None`: unconfined).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seccomp: Option<Seccomp>,
}

/// `linux.seccomp`, in libseccomp's words (`SCMP_ACT_ERRNO`,
/// `SCMP_ARCH_X86_64`, `SCMP_CMP_EQ`), which runc hands to libseccomp and
/// the embedded runtime compiles itself (`oci::seccomp`). Also the format of
/// a `Localhost` profile file, read as containerd reads it: fields it does
/// not know are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Seccomp {
    /// What a syscall no rule matches gets.
    pub default_action: String,
    /// The errno of an `SCMP_ACT_ERRNO` default (EPERM when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_errno_ret: Option<u32>,
    /// The ABIs the rules apply to (`SCMP_ARCH_*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub architectures: Vec<String>,
    /// `SECCOMP_FILTER_FLAG_*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// A seccomp agent's socket (`SCMP_ACT_NOTIFY`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_path: Option<String>,
    /// Opaque data for that agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_metadata: Option<String>,
    /// The rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub syscalls: Vec<Syscall>,
}

/// One `linux.seccomp.syscalls` rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Syscall {
    /// The syscalls it applies to.
    #[serde(default)]
    pub names: Vec<String>,
    /// `SCMP_ACT_*`.
    pub action: String,
    /// The errno of `SCMP_ACT_ERRNO` (EPERM when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno_ret: Option<u32>,
    /// Conditions on the arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<SeccompArg>,
}

/// One condition on a syscall argument.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeccompArg {
    /// Which argument (0 to 5).
    pub index: u32,
    /// The value compared with (the mask of `SCMP_CMP_MASKED_EQ`).
    pub value: u64,
    /// The masked value `SCMP_CMP_MASKED_EQ` compares with.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub value_two: u64,
    /// `SCMP_CMP_*`.
    pub op: String,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One `linux.namespaces` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Namespace {
    /// `pid`, `mount`, `uts`, `ipc`, `network`, `user`, `cgroup`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A namespace file to join instead of creating one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// `linux.resources`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Resources {
    /// Device cgroup rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceRule>,
    /// Memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Memory>,
    /// CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Cpu>,
}

/// One device cgroup rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRule {
    /// Allow or deny.
    pub allow: bool,
    /// `rwm` subset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access: Option<String>,
}

/// `linux.resources.memory`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    /// Limit in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
}

/// `linux.resources.cpu`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cpu {
    /// Relative weight (v1 `cpu.shares`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shares: Option<u64>,
    /// CFS quota in µs per period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<i64>,
    /// CFS period in µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
}

/// The `state` command's output (the spec's state, plus nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct State {
    /// `ociVersion`.
    pub oci_version: String,
    /// Container id.
    pub id: String,
    /// `creating`, `created`, `running` or `stopped`.
    pub status: String,
    /// The init process' pid on the host (0 once stopped).
    #[serde(default)]
    pub pid: i32,
    /// The bundle.
    pub bundle: String,
}

/// The capabilities containerd and Docker give a container by default.
pub const DEFAULT_CAPABILITIES: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// Every capability Linux knows, by number (`CAP_CHOWN` is 0).
pub const ALL_CAPABILITIES: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// A capability's number, from `CAP_X` or `X` (Kubernetes writes `NET_ADMIN`).
pub fn capability_number(name: &str) -> Option<u32> {
    let upper = name.to_ascii_uppercase();
    let full = if upper.starts_with("CAP_") {
        upper
    } else {
        format!("CAP_{upper}")
    };
    ALL_CAPABILITIES
        .iter()
        .position(|c| *c == full)
        .and_then(|i| u32::try_from(i).ok())
}
