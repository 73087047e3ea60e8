//! Container flags, shared by `mesopod scheduler` (which hands them to every
//! executor it launches) and `mesopod executor` (which runs containers by
//! them). Names as kubelet's where it has one (`--allow-privileged`).

use std::path::{Path, PathBuf};

use executor::oci::{ContainerSettings, RuntimeKind};

/// How pods' containers run.
#[derive(Debug, Clone, Default, clap::Args)]
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
        for p in &self.allowed_host_paths {
            args.push(format!("--allowed-host-paths={}", absolute(p).display()));
        }
        if let Some(every) = self.sync_frequency {
            args.push(format!("--sync-frequency={}ms", every.as_millis()));
        }
        args
    }

    /// What the executor runs containers with.
    pub fn settings(&self) -> ContainerSettings {
        ContainerSettings {
            runtime: RuntimeKind::parse(self.container_runtime.as_deref().unwrap_or("embedded")),
            image_store: self.image_store.clone(),
            allow_privileged: self.allow_privileged,
            insecure_registries: self.insecure_registries.clone(),
            registry_config: self.registry_config.clone(),
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
            ..ContainerSettings::default()
        }
    }
}

impl ContainerFlags {
    /// The embedded cluster's agent attributes (which become Node labels)
    /// with what its agents run containers with: `mesopod.io/container-runtime`
    /// and `mesopod.io/cgroup-version` (the agents share this host).
    pub fn agent_attributes(&self, attributes: &str) -> String {
        let runtime = RuntimeKind::parse(self.container_runtime.as_deref().unwrap_or("embedded"));
        let runtime = match (&runtime, unavailable_reason(&runtime)) {
            (_, Some(_)) => "unavailable".to_owned(),
            (kind, None) => kind.label(),
        };
        let cgroup = executor::oci::cgroup::Version::detect().map_or("none", |v| v.label());
        let ours =
            format!("mesopod.io/container-runtime:{runtime};mesopod.io/cgroup-version:{cgroup}");
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
            allowed_host_paths: vec![PathBuf::from("/srv/data"), PathBuf::from("/var/log")],
            sync_frequency: Some(std::time::Duration::from_secs(5)),
        };
        assert_eq!(
            flags.executor_args(Some(Path::new("/data/images"))),
            [
                "--container-runtime=/usr/sbin/runc",
                "--allow-privileged",
                "--image-store=/data/images",
                "--insecure-registry=reg.lan:5000",
                "--registry-config=/etc/mesopod/config.json",
                "--allowed-host-paths=/srv/data",
                "--allowed-host-paths=/var/log",
                "--sync-frequency=5000ms",
            ]
        );
        assert!(ContainerFlags::default().executor_args(None).is_empty());
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
        let parsed = mesos::resources::parse_attributes(&attrs).expect("Mesos attributes");
        assert!(
            parsed
                .iter()
                .any(|a| a.name == "mesopod.io/container-runtime"),
            "{parsed:?}"
        );
    }
}
