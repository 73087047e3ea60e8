//! Real containers: images, OCI bundles, and a runc-compatible runtime
//! driven through its CLI.
//!
//! # Contract
//!
//! - One path for every runtime: the executor writes an OCI bundle
//!   ([`bundle`], [`spec`]) over the image's root filesystem (an overlay
//!   with a fresh writable layer per run) and drives `run --detach` and
//!   `delete` of a runc-compatible CLI ([`runner`]) with `--root` under the
//!   agent's work dir. The default CLI is this binary's own
//!   `mesopod runtime` ([`embedded`]); `--container-runtime PATH` names any
//!   other (runc).
//! - Each container's `run --detach` is run by its shim
//!   ([`crate::shim`]), which leaves the executor's Mesos cgroup first:
//!   container cgroups nest under the shim's anchor ([`cgroup`]), and a
//!   container is its shim's child, so it outlives its executor and a new
//!   executor adopts it. An executor that starts kills whatever dead
//!   executors left under the same root, but the containers of the pods it
//!   may adopt (those named in their checkpoints), before it runs anything.
//! - `--container-runtime process` keeps the old process mode (no
//!   isolation) for development.

pub mod bundle;
pub mod cgroup;
pub(crate) mod console_socket;
pub mod embedded;
pub(crate) mod etc_files;
pub mod exec;
pub(crate) mod gc;
pub mod image;
pub(crate) mod init_layer;
pub(crate) mod inroot;
pub(crate) mod pull_secrets;
pub(crate) mod rootfs;
pub mod rootless;
pub(crate) mod rootless_ids;
pub(crate) mod rootless_ns;
pub(crate) mod runner;
pub mod sandbox;
pub mod seccomp;
pub mod spec;

use std::path::PathBuf;
use std::time::Duration;

use crate::backoff::Backoff;

/// kubelet's image pull back-off: 10 s doubling to 300 s.
pub const IMAGE_PULL_BACKOFF: Backoff = Backoff {
    initial: Duration::from_secs(10),
    max: Duration::from_secs(300),
};

/// Which runtime runs containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeKind {
    /// Host processes, no isolation (`--container-runtime process`).
    Process,
    /// This binary's `mesopod runtime` (the default).
    Embedded,
    /// A runc-compatible CLI at this path.
    Cli(PathBuf),
}

impl RuntimeKind {
    /// `process`, `embedded` (or empty), else a path.
    pub fn parse(s: &str) -> RuntimeKind {
        match s {
            "process" => RuntimeKind::Process,
            "" | "embedded" => RuntimeKind::Embedded,
            path => RuntimeKind::Cli(PathBuf::from(path)),
        }
    }

    /// The Node label value `mesopod.io/container-runtime`.
    pub fn label(&self) -> String {
        match self {
            RuntimeKind::Process => "process".into(),
            RuntimeKind::Embedded => "embedded".into(),
            RuntimeKind::Cli(p) => p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "cli".into()),
        }
    }
}

/// How this executor runs containers.
#[derive(Debug, Clone)]
pub struct ContainerSettings {
    /// The runtime.
    pub runtime: RuntimeKind,
    /// The image store's root (default `<agent work dir>/images`).
    pub image_store: Option<PathBuf>,
    /// The runtime's state root (default `<work>/slaves/<agent>/mesopod-runtime`).
    pub state_root: Option<PathBuf>,
    /// `--allow-privileged`.
    pub allow_privileged: bool,
    /// `--insecure-registry HOST:PORT`: reached over plain HTTP.
    pub insecure_registries: Vec<String>,
    /// `--registry-config FILE`: a Docker `config.json` with credentials.
    pub registry_config: Option<PathBuf>,
    /// `--registry-mirror` and `--registry-config-dir`, read and checked.
    pub registry_hosts: images::RegistryHosts,
    /// Image pull back-off ([`IMAGE_PULL_BACKOFF`] in production).
    pub image_backoff: Backoff,
    /// The mesopod binary whose `mesopod runtime` makes pod sandboxes (and
    /// runs containers on the embedded runtime); this process' own
    /// executable when `None` (tests that host the executor in-process name it).
    pub mesopod_binary: Option<PathBuf>,
    /// Image gc thresholds over the store's filesystem
    /// (`--image-gc-high-threshold`, `--image-gc-low-threshold`).
    pub image_gc: images::ImageGcPolicy,
    /// `--cni-conf-dir`/`--cni-bin-dir`: pods get their own network (`None`:
    /// the agent's).
    pub cni: Option<crate::network::CniSettings>,
    /// Volumes: `--allowed-host-paths`, resync and usage intervals.
    pub volumes: crate::volumes::VolumeSettings,
    /// Container log rotation (`--container-log-max-size`, `--container-log-max-files`).
    pub logs: crate::logs::LogSettings,
    /// `--seccomp-default` and `--root-dir` (Localhost seccomp profiles).
    pub seccomp: seccomp::SeccompSettings,
    /// How long a container whose executor died waits for a new one to
    /// adopt it before its shim kills it (the executor's
    /// `MESOS_RECOVERY_TIMEOUT`, Mesos' `--recovery_timeout`: 15 min).
    pub adoption_timeout: Duration,
}

impl Default for ContainerSettings {
    fn default() -> Self {
        ContainerSettings {
            runtime: RuntimeKind::Process,
            image_store: None,
            state_root: None,
            allow_privileged: false,
            insecure_registries: Vec::new(),
            registry_config: None,
            registry_hosts: images::RegistryHosts::default(),
            image_backoff: IMAGE_PULL_BACKOFF,
            mesopod_binary: None,
            image_gc: images::ImageGcPolicy::default(),
            cni: None,
            volumes: crate::volumes::VolumeSettings::default(),
            logs: crate::logs::LogSettings::default(),
            seccomp: seccomp::SeccompSettings::default(),
            adoption_timeout: crate::env::DEFAULT_RECOVERY_TIMEOUT,
        }
    }
}

/// Why this process' pods cannot run in containers, if they cannot; pods
/// then fail with this reason rather than run unisolated. Without root it
/// is the kernel's refusal of user namespaces (otherwise the executor runs
/// its pods in a user namespace of its own, [`rootless_ns`]).
pub fn unavailable_reason() -> Option<String> {
    if rootless::active() {
        return rootless::kernel_refusal();
    }
    if cgroup::Version::detect().is_none() {
        return Some("no cgroup filesystem is mounted at /sys/fs/cgroup".into());
    }
    None
}

/// The agent's own directory, `<work>/slaves/<agent id>`, from a sandbox
/// laid out as a Mesos agent's: agents of one host (the embedded cluster)
/// share a work dir, and one agent's executor must never touch another's
/// containers.
pub fn agent_dir(sandbox: &std::path::Path) -> PathBuf {
    sandbox
        .ancestors()
        .find(|a| {
            a.parent()
                .and_then(|p| p.file_name())
                .is_some_and(|n| n == "slaves")
        })
        .map(PathBuf::from)
        .unwrap_or_else(|| sandbox.to_path_buf())
}

/// The agent's work dir, from a sandbox laid out as a Mesos agent's
/// (`<work>/slaves/<agent>/frameworks/…/runs/<container>`).
pub fn agent_work_dir(sandbox: &std::path::Path) -> PathBuf {
    sandbox
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "slaves"))
        .and_then(|s| s.parent())
        .map(PathBuf::from)
        .unwrap_or_else(|| sandbox.to_path_buf())
}
