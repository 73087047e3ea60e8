//! Container flags, shared by `mesopod scheduler` (which hands them to every
//! executor it launches) and `mesopod executor` (which runs containers by
//! them). Names as kubelet's where it has one (`--allow-privileged`).

use std::path::{Path, PathBuf};

use executor::network::{CniSettings, DEFAULT_CNI_BIN_DIR};
use executor::oci::{ContainerSettings, RuntimeKind};

/// How pods' containers run.
#[derive(Debug, Clone, clap::Args)]
pub struct ContainerFlags {
    /// `embedded` (default: this binary's own OCI runtime), `process` (host
    /// processes without isolation, for development), or the path of a
    /// runc-compatible CLI such as `/usr/sbin/runc`.
    #[arg(long, env = "MESOPOD_CONTAINER_RUNTIME")]
    pub container_runtime: Option<String>,
    /// Allow containers with `securityContext.privileged: true`.
    #[arg(long, env = "MESOPOD_ALLOW_PRIVILEGED")]
    pub allow_privileged: bool,
    /// The agents' image store (default `<agent work dir>/images`; the
    /// embedded cluster's agents share `<data-dir>/images`).
    #[arg(long, env = "MESOPOD_IMAGE_STORE")]
    pub image_store: Option<PathBuf>,
    /// A registry (`HOST:PORT`) reached over plain HTTP although it is not
    /// on loopback (repeatable), as Docker's flag of that name.
    #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
    pub insecure_registries: Vec<String>,
    /// A Docker `config.json` whose `auths` the agents pull with.
    #[arg(long, value_name = "FILE")]
    pub registry_config: Option<PathBuf>,
    /// A mirror of Docker Hub (`http(s)://host[:port]`), asked before Docker
    /// Hub (repeatable, tried in order), as dockerd's flag of that name.
    #[arg(long = "registry-mirror", value_name = "URL")]
    pub registry_mirrors: Vec<String>,
    /// containerd's registry host directory (its `config_path`):
    /// `DIR/<registry>/hosts.toml` lists that registry's mirrors and TLS
    /// settings, `DIR/_default/hosts.toml` applies to the rest.
    #[arg(long, value_name = "DIR")]
    pub registry_config_dir: Option<PathBuf>,
    /// Image gc runs once the image store's filesystem is this percent
    /// full (kubelet's flag and default; 100 turns gc off).
    #[arg(long, value_name = "PERCENT", default_value_t = 85)]
    pub image_gc_high_threshold: u8,
    /// Image gc removes unused images until the filesystem is at most
    /// this percent full (kubelet's flag and default).
    #[arg(long, value_name = "PERCENT", default_value_t = 80)]
    pub image_gc_low_threshold: u8,
    /// An unused image younger than this is kept (kubelet's flag; `2m`).
    #[arg(long, value_name = "DURATION", default_value = "2m")]
    pub minimum_image_ttl_duration: String,
    /// Give every pod that is not `hostNetwork` its own network namespace
    /// and IP from the CNI network configured in DIR (its first `.conflist`,
    /// `.conf` or `.json` file), as kubelet's flag of that name.
    #[arg(long, value_name = "DIR", env = "MESOPOD_CNI_CONF_DIR")]
    pub cni_conf_dir: Option<PathBuf>,
    /// Where the CNI plugins are (comma-separated; default /opt/cni/bin,
    /// Debian's containernetworking-plugins install into /usr/lib/cni).
    #[arg(long, value_name = "DIR", value_delimiter = ',')]
    pub cni_bin_dir: Vec<PathBuf>,
    /// Host directories `hostPath` volumes may name (comma-separated or
    /// repeated; none by default, so every hostPath pod is refused).
    #[arg(
        long,
        value_name = "PATH,...",
        value_delimiter = ',',
        env = "MESOPOD_ALLOWED_HOST_PATHS"
    )]
    pub allowed_host_paths: Vec<PathBuf>,
    /// How often executors rewrite configMap, secret and projected volumes
    /// from their objects (kubelet's flag; its default, 1m).
    #[arg(long, value_parser = mesos::duration::parse_flag)]
    pub sync_frequency: Option<std::time::Duration>,
    /// A container's log file is rotated before it grows past this size
    /// (a quantity such as `10Mi`; kubelet's flag and default).
    #[arg(long, value_name = "QUANTITY", default_value = "10Mi")]
    pub container_log_max_size: String,
    /// At most this many log files per run of a container, the live one
    /// included (kubelet's flag and default; at least 2).
    #[arg(long, value_name = "N", default_value_t = executor::logs::DEFAULT_MAX_FILES)]
    pub container_log_max_files: u32,
    /// Containers that set no `seccompProfile` run under the runtime's
    /// default profile (`RuntimeDefault`) instead of none (kubelet's flag).
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value_t = false,
        default_missing_value = "true",
        action = clap::ArgAction::Set
    )]
    pub seccomp_default: bool,
    /// kubelet's root directory: `Localhost` seccomp profiles are read from
    /// its `seccomp` directory (kubelet's flag and default, /var/lib/kubelet;
    /// kubelet's old `--seccomp-profile-root` is gone).
    #[arg(long, value_name = "DIR")]
    pub root_dir: Option<PathBuf>,
}

impl Default for ContainerFlags {
    /// The flags' defaults, as clap gives them.
    fn default() -> Self {
        ContainerFlags {
            container_runtime: None,
            allow_privileged: false,
            image_store: None,
            insecure_registries: Vec::new(),
            registry_config: None,
            registry_mirrors: Vec::new(),
            registry_config_dir: None,
            image_gc_high_threshold: 85,
            image_gc_low_threshold: 80,
            minimum_image_ttl_duration: "2m".into(),
            cni_conf_dir: None,
            cni_bin_dir: Vec::new(),
            allowed_host_paths: Vec::new(),
            sync_frequency: None,
            container_log_max_size: "10Mi".into(),
            container_log_max_files: executor::logs::DEFAULT_MAX_FILES,
            seccomp_default: false,
            root_dir: None,
        }
    }
}

impl ContainerFlags {
    /// The executor's arguments that carry these flags; `embedded_store` is
    /// the embedded cluster's shared store when there is one.
    pub fn executor_args(&self, embedded_store: Option<&Path>) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(rt) = &self.container_runtime {
            args.push(format!("--container-runtime={rt}"));
        }
        if self.allow_privileged {
            args.push("--allow-privileged".into());
        }
        if let Some(store) = self.image_store.as_deref().or(embedded_store) {
            args.push(format!("--image-store={}", store.display()));
        }
        for r in &self.insecure_registries {
            args.push(format!("--insecure-registry={r}"));
        }
        if let Some(c) = &self.registry_config {
            args.push(format!("--registry-config={}", absolute(c).display()));
        }
        for m in &self.registry_mirrors {
            args.push(format!("--registry-mirror={m}"));
        }
        if let Some(d) = &self.registry_config_dir {
            args.push(format!("--registry-config-dir={}", absolute(d).display()));
        }
        let gc = ContainerFlags::default();
        if (
            self.image_gc_high_threshold,
            self.image_gc_low_threshold,
            self.minimum_image_ttl_duration.as_str(),
        ) != (
            gc.image_gc_high_threshold,
            gc.image_gc_low_threshold,
            gc.minimum_image_ttl_duration.as_str(),
        ) {
            args.push(format!(
                "--image-gc-high-threshold={}",
                self.image_gc_high_threshold
            ));
            args.push(format!(
                "--image-gc-low-threshold={}",
                self.image_gc_low_threshold
            ));
            args.push(format!(
                "--minimum-image-ttl-duration={}",
                self.minimum_image_ttl_duration
            ));
        }
        if let Some(cni) = self.cni() {
            args.push(format!("--cni-conf-dir={}", cni.conf_dir.display()));
            let bins: Vec<String> = cni
                .bin_dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect();
            args.push(format!("--cni-bin-dir={}", bins.join(",")));
        }
        for p in &self.allowed_host_paths {
            args.push(format!("--allowed-host-paths={}", absolute(p).display()));
        }
        if let Some(every) = self.sync_frequency {
            args.push(format!("--sync-frequency={}ms", every.as_millis()));
        }
        let defaults = ContainerFlags::default();
        if self.container_log_max_size != defaults.container_log_max_size {
            args.push(format!(
                "--container-log-max-size={}",
                self.container_log_max_size
            ));
        }
        if self.container_log_max_files != defaults.container_log_max_files {
            args.push(format!(
                "--container-log-max-files={}",
                self.container_log_max_files
            ));
        }
        if self.seccomp_default {
            args.push("--seccomp-default".into());
        }
        if let Some(dir) = &self.root_dir {
            args.push(format!("--root-dir={}", absolute(dir).display()));
        }
        args
    }

    /// Container log rotation as the flags give it.
    ///
    /// # Errors
    ///
    /// A size that is not a positive whole number of bytes, or fewer than 2
    /// files (kubelet's rules).
    pub fn log_settings(&self) -> Result<executor::logs::LogSettings, String> {
        let text = &self.container_log_max_size;
        let bytes = quantity::Quantity::parse(text)
            .map_err(|e| format!("--container-log-max-size {text:?}: {e}"))?
            .to_f64();
        if !(1.0..=u64::MAX as f64).contains(&bytes) {
            return Err(format!(
                "--container-log-max-size {text:?}: must be at least one byte"
            ));
        }
        executor::logs::LogSettings::new(bytes as u64, self.container_log_max_files)
    }

    /// The mirrors and host files the flags name, read and checked: a bad
    /// mirror or `hosts.toml` stops the scheduler and the executor at
    /// startup, with the file and line.
    ///
    /// # Errors
    ///
    /// The mirror or file refused, and why.
    pub fn registry_hosts(&self) -> Result<images::RegistryHosts, String> {
        let dir = self.registry_config_dir.as_deref().map(absolute);
        images::RegistryHosts::load(&self.registry_mirrors, dir.as_deref()).map_err(|e| match e {
            images::HostsError::Mirror(_) => format!("--registry-mirror: {e}"),
            _ => format!("--registry-config-dir: {e}"),
        })
    }

    /// The image gc policy the flags give.
    ///
    /// # Errors
    ///
    /// kubelet's messages for thresholds out of range, and a bad duration.
    pub fn image_gc(&self) -> Result<images::ImageGcPolicy, String> {
        let age = mesos::duration::parse_flag(&self.minimum_image_ttl_duration)
            .map_err(|e| format!("--minimum-image-ttl-duration: {e}"))?;
        images::ImageGcPolicy::new(
            self.image_gc_high_threshold,
            self.image_gc_low_threshold,
            age,
        )
    }

    /// What the executor runs containers with.
    ///
    /// # Errors
    ///
    /// As [`ContainerFlags::image_gc`].
    pub fn settings(&self) -> Result<ContainerSettings, String> {
        Ok(ContainerSettings {
            runtime: RuntimeKind::parse(self.container_runtime.as_deref().unwrap_or("embedded")),
            image_store: self.image_store.clone(),
            allow_privileged: self.allow_privileged,
            insecure_registries: self.insecure_registries.clone(),
            registry_config: self.registry_config.clone(),
            registry_hosts: self.registry_hosts()?,
            image_gc: self.image_gc()?,
            logs: self.log_settings()?,
            cni: self.cni(),
            volumes: executor::volumes::VolumeSettings {
                allowed_host_paths: self
                    .allowed_host_paths
                    .iter()
                    .map(|p| absolute(p))
                    .collect(),
                resync_interval: self
                    .sync_frequency
                    .unwrap_or(executor::volumes::RESYNC_INTERVAL),
                ..Default::default()
            },
            seccomp: executor::oci::seccomp::SeccompSettings {
                runtime_default: self.seccomp_default,
                root_dir: self.root_dir.as_deref().map_or_else(
                    || PathBuf::from(executor::oci::seccomp::DEFAULT_ROOT_DIR),
                    absolute,
                ),
            },
            ..ContainerSettings::default()
        })
    }

    /// The CNI network, when `--cni-conf-dir` is given.
    fn cni(&self) -> Option<CniSettings> {
        let bin_dirs = if self.cni_bin_dir.is_empty() {
            vec![PathBuf::from(DEFAULT_CNI_BIN_DIR)]
        } else {
            self.cni_bin_dir.iter().map(|d| absolute(d)).collect()
        };
        Some(CniSettings {
            conf_dir: absolute(self.cni_conf_dir.as_deref()?),
            bin_dirs,
        })
    }
}

impl ContainerFlags {
    /// The embedded cluster's agent attributes (which become Node labels)
    /// with what its agents run containers with: `mesopod.io/container-runtime`,
    /// `mesopod.io/cgroup-version` and `mesopod.io/rootless` (the agents
    /// share this host).
    pub fn agent_attributes(&self, attributes: &str) -> String {
        let runtime = RuntimeKind::parse(self.container_runtime.as_deref().unwrap_or("embedded"));
        let runtime = match (&runtime, unavailable_reason(&runtime)) {
            (_, Some(_)) => "unavailable".to_owned(),
            (kind, None) => kind.label(),
        };
        let cgroup = executor::oci::cgroup::Version::detect().map_or("none", |v| v.label());
        let rootless = executor::oci::rootless::label();
        let ours = format!(
            "mesopod.io/container-runtime:{runtime};mesopod.io/cgroup-version:{cgroup};mesopod.io/rootless:{rootless}"
        );
        if attributes.trim().is_empty() {
            ours
        } else {
            format!("{attributes};{ours}")
        }
    }

    /// Says at startup when this host cannot run containers (and pods will
    /// fail rather than run unisolated), or when they run unisolated.
    pub fn warn_at_startup(&self) {
        let runtime = RuntimeKind::parse(self.container_runtime.as_deref().unwrap_or("embedded"));
        if runtime == RuntimeKind::Process {
            tracing::warn!(
                "--container-runtime=process: pods run as host processes, without isolation"
            );
        } else if let Some(why) = unavailable_reason(&runtime) {
            tracing::error!(
                "containers cannot run on this host ({why}); pods on its agents will fail"
            );
        }
    }
}

/// Why the embedded cluster's agents cannot run containers, if they cannot.
fn unavailable_reason(runtime: &RuntimeKind) -> Option<String> {
    match runtime {
        RuntimeKind::Process => None,
        _ => executor::oci::unavailable_reason(),
    }
}

/// `dir` made absolute against the working directory (an executor runs
/// in its sandbox, so a relative store path would name another place).
pub fn absolute(dir: &Path) -> PathBuf {
    if dir.is_absolute() {
        dir.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|cwd| cwd.join(dir))
            .unwrap_or_else(|_| dir.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scheduler_hands_its_container_flags_to_every_executor() {
        let flags = ContainerFlags {
            container_runtime: Some("/usr/sbin/runc".into()),
            allow_privileged: true,
            image_store: None,
            insecure_registries: vec!["reg.lan:5000".into()],
            registry_config: Some(PathBuf::from("/etc/mesopod/config.json")),
            registry_mirrors: vec!["http://mirror.lan:5000".into(), "https://m2.lan".into()],
            registry_config_dir: Some(PathBuf::from("/etc/containerd/certs.d")),
            image_gc_high_threshold: 90,
            cni_conf_dir: Some(PathBuf::from("/etc/cni/net.d")),
            cni_bin_dir: vec![PathBuf::from("/usr/lib/cni"), PathBuf::from("/opt/cni/bin")],
            allowed_host_paths: vec![PathBuf::from("/srv/data"), PathBuf::from("/var/log")],
            sync_frequency: Some(std::time::Duration::from_secs(5)),
            ..ContainerFlags::default()
        };
        assert_eq!(
            flags.executor_args(Some(Path::new("/data/images"))),
            [
                "--container-runtime=/usr/sbin/runc",
                "--allow-privileged",
                "--image-store=/data/images",
                "--insecure-registry=reg.lan:5000",
                "--registry-config=/etc/mesopod/config.json",
                "--registry-mirror=http://mirror.lan:5000",
                "--registry-mirror=https://m2.lan",
                "--registry-config-dir=/etc/containerd/certs.d",
                "--image-gc-high-threshold=90",
                "--image-gc-low-threshold=80",
                "--minimum-image-ttl-duration=2m",
                "--cni-conf-dir=/etc/cni/net.d",
                "--cni-bin-dir=/usr/lib/cni,/opt/cni/bin",
                "--allowed-host-paths=/srv/data",
                "--allowed-host-paths=/var/log",
                "--sync-frequency=5000ms",
            ]
        );
        assert!(ContainerFlags::default().executor_args(None).is_empty());
        assert!(flags.image_gc().is_ok());
        let bad = ContainerFlags {
            image_gc_low_threshold: 95,
            ..flags
        };
        assert!(
            bad.image_gc()
                .expect_err("a low threshold over the high one")
                .contains("--image-gc-low-threshold")
        );
        let default_bins = ContainerFlags {
            cni_conf_dir: Some(PathBuf::from("/etc/cni/net.d")),
            ..ContainerFlags::default()
        };
        assert_eq!(
            default_bins
                .settings()
                .expect("default flags")
                .cni
                .map(|c| c.bin_dirs),
            Some(vec![PathBuf::from(DEFAULT_CNI_BIN_DIR)])
        );
    }

    #[test]
    fn embedded_agents_say_what_runs_their_containers() {
        let process = ContainerFlags {
            container_runtime: Some("process".into()),
            ..ContainerFlags::default()
        };
        let attrs = process.agent_attributes("rack:r1");
        assert!(
            attrs.starts_with(
                "rack:r1;mesopod.io/container-runtime:process;mesopod.io/cgroup-version:"
            ),
            "{attrs}"
        );
        let euid = std::os::unix::fs::MetadataExt::uid(
            &std::fs::metadata("/proc/self").expect("/proc/self"),
        );
        let rootless = if euid == 0 { "false" } else { "true" };
        assert!(
            attrs.ends_with(&format!(";mesopod.io/rootless:{rootless}")),
            "{attrs}"
        );
        let parsed = mesos::resources::parse_attributes(&attrs).expect("Mesos attributes");
        assert!(
            parsed
                .iter()
                .any(|a| a.name == "mesopod.io/container-runtime"),
            "{parsed:?}"
        );
    }
}

#[cfg(test)]
mod log_flag_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn container_log_flags_parse_as_kubelet_and_reach_the_executor() {
        let defaults = ContainerFlags::default();
        assert_eq!(
            defaults.log_settings().unwrap(),
            executor::logs::LogSettings::default()
        );
        assert!(
            !defaults
                .executor_args(None)
                .iter()
                .any(|a| a.starts_with("--container-log"))
        );
        let flags = ContainerFlags {
            container_log_max_size: "1Ki".into(),
            container_log_max_files: 3,
            ..ContainerFlags::default()
        };
        let s = flags.log_settings().unwrap();
        assert_eq!((s.max_size, s.max_files), (1024, 3));
        assert_eq!(
            flags.executor_args(None),
            [
                "--container-log-max-size=1Ki",
                "--container-log-max-files=3"
            ]
        );
        let one = ContainerFlags {
            container_log_max_files: 1,
            ..ContainerFlags::default()
        };
        assert!(
            one.log_settings()
                .unwrap_err()
                .contains("containerLogMaxFiles (1) must be greater than 1")
        );
        let bad = ContainerFlags {
            container_log_max_size: "ten".into(),
            ..ContainerFlags::default()
        };
        assert!(
            bad.log_settings()
                .unwrap_err()
                .starts_with("--container-log-max-size")
        );
    }
}

#[cfg(test)]
mod seccomp_flag_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        flags: ContainerFlags,
    }

    fn parse(args: &[&str]) -> ContainerFlags {
        Cli::try_parse_from(std::iter::once("mesopod").chain(args.iter().copied()))
            .unwrap()
            .flags
    }

    #[test]
    fn seccomp_flags_parse_as_kubelet_and_reach_the_executor() {
        let defaults = parse(&[]);
        let s = defaults.settings().unwrap().seccomp;
        assert!(!s.runtime_default);
        assert_eq!(s.profile_root(), Path::new("/var/lib/kubelet/seccomp"));
        assert!(defaults.executor_args(None).is_empty());
        assert!(!parse(&["--seccomp-default=false"]).seccomp_default);
        let flags = parse(&["--seccomp-default", "--root-dir=/srv/kubelet"]);
        let s = flags.settings().unwrap().seccomp;
        assert!(s.runtime_default);
        assert_eq!(s.profile_root(), Path::new("/srv/kubelet/seccomp"));
        assert_eq!(
            flags.executor_args(None),
            ["--seccomp-default", "--root-dir=/srv/kubelet"]
        );
        assert!(parse(&["--seccomp-default=true"]).seccomp_default);
    }
}
