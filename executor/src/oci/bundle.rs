//! From a container's plan and its image to an OCI `config.json`, by
//! Kubernetes' rules: command/args over Entrypoint/Cmd, image env under the
//! container's, `workingDir` and user from the pod over the image, the
//! security context, and cgroup limits from the container's resources.

use std::path::Path;

use crate::oci::image::ImageConfig;
use crate::oci::spec::{
    self, Capabilities, Cpu, DeviceRule, Linux, Memory, Mount, Namespace, Process, Resources, Root,
    Spec, User,
};
use crate::pod::ContainerPlan;

/// Kubelet's waiting reason when a container's config cannot be built.
pub const CREATE_CONTAINER_CONFIG_ERROR: &str = "CreateContainerConfigError";

/// `PATH` when neither the image nor the pod sets one (containerd's default).
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// CFS period kubelet uses (100 ms).
const CFS_PERIOD_US: u64 = 100_000;

/// What the executor knows beyond the plan and the image.
#[derive(Debug, Clone)]
pub struct BundleContext<'a> {
    /// The pod's name: the hostname.
    pub hostname: &'a str,
    /// `podname_namespace(uid)` for runAsNonRoot messages.
    pub pod_ref: String,
    /// The assembled root filesystem.
    pub rootfs: &'a Path,
    /// The container's cgroup, relative to the runtime's own.
    pub cgroups_path: String,
    /// `--allow-privileged`.
    pub allow_privileged: bool,
    /// Resolved environment of the container (pod's `env`, in order).
    pub env: &'a [(String, String)],
    /// Namespaces to join rather than create (the pod sandbox's `ipc`,
    /// `uts`, and `network` when the pod has its own).
    pub join: &'a [(String, String)],
    /// The pod's volumes as this container mounts them (after the defaults).
    pub mounts: &'a [Mount],
    /// Its seccomp filter, chosen and read ([`crate::oci::seccomp::resolve`]).
    pub seccomp: &'a crate::oci::seccomp::Choice,
}

/// Builds the container's `config.json`; an error is a
/// `CreateContainerConfigError` message.
pub fn build(
    plan: &ContainerPlan,
    image: &ImageConfig,
    cx: &BundleContext<'_>,
) -> Result<Spec, String> {
    let args = argv(plan, image)?;
    let sec = &plan.security;
    if sec.privileged && !cx.allow_privileged {
        return Err(format!(
            "container {:?} is privileged, and this agent does not allow privileged containers (--allow-privileged)",
            plan.name
        ));
    }
    let user = resolve_user(plan, image, cx)?;
    let mut env: Vec<String> = Vec::new();
    fn set(env: &mut Vec<String>, k: &str, v: &str) {
        let prefix = format!("{k}=");
        env.retain(|e| !e.starts_with(&prefix));
        env.push(format!("{k}={v}"));
    }
    for e in image.env.iter().flatten() {
        if let Some((k, v)) = e.split_once('=') {
            set(&mut env, k, v);
        }
    }
    if !env_has(&env, "PATH") && !cx.env.iter().any(|(k, _)| k == "PATH") {
        set(&mut env, "PATH", DEFAULT_PATH);
    }
    set(&mut env, "HOSTNAME", cx.hostname);
    for (k, v) in cx.env {
        set(&mut env, k, v);
    }
    if !env_has(&env, "HOME") {
        set(&mut env, "HOME", if user.uid == 0 { "/root" } else { "/" });
    }
    let cwd = plan
        .working_dir
        .as_ref()
        .map(|w| w.display().to_string())
        .or_else(|| image.working_dir.clone().filter(|w| !w.is_empty()))
        .unwrap_or_else(|| "/".into());
    if !cwd.starts_with('/') {
        return Err(format!("workingDir {cwd:?} is not an absolute path"));
    }
    let capabilities = capabilities(plan)?;
    let mut linux = Linux {
        namespaces: ["pid", "mount", "ipc", "uts"]
            .into_iter()
            // The pod's own network namespace, when it has one (CNI).
            .chain(
                cx.join
                    .iter()
                    .any(|(k, _)| k == "network")
                    .then_some("network"),
            )
            .map(|kind| Namespace {
                kind: kind.into(),
                path: cx
                    .join
                    .iter()
                    .find(|(k, _)| k == kind)
                    .map(|(_, p)| p.clone()),
            })
            .collect(),
        cgroups_path: Some(cx.cgroups_path.clone()),
        resources: Some(resources(plan)),
        masked_paths: Vec::new(),
        readonly_paths: Vec::new(),
        seccomp: cx.seccomp.to_spec(&capabilities.bounding),
    };
    if !sec.privileged {
        linux.masked_paths = [
            "/proc/acpi",
            "/proc/asound",
            "/proc/kcore",
            "/proc/keys",
            "/proc/latency_stats",
            "/proc/timer_list",
            "/proc/timer_stats",
            "/proc/sched_debug",
            "/proc/scsi",
            "/sys/firmware",
        ]
        .map(String::from)
        .to_vec();
        linux.readonly_paths = [
            "/proc/bus",
            "/proc/fs",
            "/proc/irq",
            "/proc/sys",
            "/proc/sysrq-trigger",
        ]
        .map(String::from)
        .to_vec();
    }
    Ok(Spec {
        oci_version: spec::OCI_VERSION.into(),
        process: Process {
            terminal: false,
            user,
            args,
            env,
            cwd,
            capabilities: Some(capabilities),
            no_new_privileges: sec.allow_privilege_escalation == Some(false) && !sec.privileged,
        },
        root: Root {
            path: cx.rootfs.display().to_string(),
            readonly: sec.read_only_root_filesystem,
        },
        hostname: Some(cx.hostname.to_owned()),
        mounts: default_mounts(sec.privileged)
            .into_iter()
            .chain(cx.mounts.iter().cloned())
            .collect(),
        linux,
        annotations: Default::default(),
    })
}

fn env_has(env: &[String], key: &str) -> bool {
    env.iter()
        .any(|e| e.split_once('=').is_some_and(|(k, _)| k == key))
}

/// Kubernetes' command table: command replaces Entrypoint (and drops Cmd),
/// args replace Cmd.
pub fn argv(plan: &ContainerPlan, image: &ImageConfig) -> Result<Vec<String>, String> {
    let entrypoint: Vec<String> = match image.entrypoint.as_deref() {
        Some([only]) if only.is_empty() => Vec::new(),
        Some(e) => e.to_vec(),
        None => Vec::new(),
    };
    let cmd = image.cmd.clone().unwrap_or_default();
    let argv = match (&plan.command, &plan.args) {
        (Some(c), Some(a)) => c.iter().chain(a).cloned().collect(),
        (Some(c), None) => c.clone(),
        (None, Some(a)) => entrypoint.into_iter().chain(a.iter().cloned()).collect(),
        (None, None) => entrypoint.into_iter().chain(cmd).collect(),
    };
    if argv.is_empty() {
        return Err("no command specified".into());
    }
    Ok(argv)
}

fn resolve_user(
    plan: &ContainerPlan,
    image: &ImageConfig,
    cx: &BundleContext<'_>,
) -> Result<User, String> {
    let sec = &plan.security;
    let suffix = format!("(pod: {:?}, container: {})", cx.pod_ref, plan.name);
    let image_user = image.user.clone().unwrap_or_default();
    let (name_part, group_part) = match image_user.split_once(':') {
        Some((u, g)) => (u.to_owned(), Some(g.to_owned())),
        None => (image_user.clone(), None),
    };
    let passwd = read_etc(cx.rootfs, "passwd");
    let group = read_etc(cx.rootfs, "group");
    let uid: u32 = match sec.run_as_user {
        Some(u) => u32::try_from(u).map_err(|_| format!("runAsUser {u} is out of range"))?,
        None if name_part.is_empty() => 0,
        None => match name_part.parse::<u32>() {
            Ok(n) => n,
            Err(_) => {
                if sec.run_as_non_root == Some(true) {
                    return Err(format!(
                        "container has runAsNonRoot and image has non-numeric user ({name_part}), cannot verify user is non-root {suffix}"
                    ));
                }
                lookup(&passwd, &name_part, 2).ok_or_else(|| {
                    format!("unable to find user {name_part}: no matching entries in passwd file")
                })?
            }
        },
    };
    if sec.run_as_non_root == Some(true) && uid == 0 {
        return Err(if sec.run_as_user.is_some() {
            format!("container's runAsUser breaks non-root policy {suffix}")
        } else {
            format!("container has runAsNonRoot and image will run as root {suffix}")
        });
    }
    let gid: u32 = match (sec.run_as_group, &group_part) {
        (Some(g), _) => u32::try_from(g).map_err(|_| format!("runAsGroup {g} is out of range"))?,
        (None, Some(g)) => match g.parse::<u32>() {
            Ok(n) => n,
            Err(_) => lookup(&group, g, 2).ok_or_else(|| {
                format!("unable to find group {g}: no matching entries in group file")
            })?,
        },
        (None, None) => passwd
            .lines()
            .map(|l| l.split(':').collect::<Vec<_>>())
            .find(|f| f.len() > 3 && f[2].parse::<u32>().ok() == Some(uid))
            .and_then(|f| f[3].parse().ok())
            .unwrap_or(0),
    };
    let mut additional_gids = Vec::new();
    for g in &sec.supplemental_groups {
        additional_gids.push(
            u32::try_from(*g).map_err(|_| format!("supplementalGroups {g} is out of range"))?,
        );
    }
    Ok(User {
        uid,
        gid,
        additional_gids,
    })
}

/// A file under the image's `/etc` (missing reads as empty).
fn read_etc(rootfs: &Path, file: &str) -> String {
    // A rootless executor's root filesystems are mounted only in its holder's namespace.
    let rootfs = crate::oci::rootless_ns::view(rootfs);
    std::fs::read_to_string(rootfs.join("etc").join(file)).unwrap_or_default()
}

/// The numeric field `index` of the line of `db` (passwd or group) named `name`.
fn lookup(db: &str, name: &str, index: usize) -> Option<u32> {
    db.lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.first() == Some(&name))
        .and_then(|f| f.get(index).and_then(|v| v.parse().ok()))
}

fn capabilities(plan: &ContainerPlan) -> Result<Capabilities, String> {
    let sec = &plan.security;
    let mut caps: Vec<String> = if sec.privileged {
        spec::ALL_CAPABILITIES
            .iter()
            .map(|c| (*c).to_owned())
            .collect()
    } else {
        spec::DEFAULT_CAPABILITIES
            .iter()
            .map(|c| (*c).to_owned())
            .collect()
    };
    let full = |c: &str| -> Result<String, String> {
        spec::capability_number(c)
            .and_then(|n| spec::ALL_CAPABILITIES.get(n as usize))
            .map(|s| (*s).to_owned())
            .ok_or_else(|| format!("unknown capability {c:?}"))
    };
    if !sec.privileged {
        for c in &sec.caps_add {
            if c.eq_ignore_ascii_case("ALL") {
                caps = spec::ALL_CAPABILITIES
                    .iter()
                    .map(|c| (*c).to_owned())
                    .collect();
                continue;
            }
            let c = full(c)?;
            if !caps.contains(&c) {
                caps.push(c);
            }
        }
        for c in &sec.caps_drop {
            if c.eq_ignore_ascii_case("ALL") {
                caps.clear();
                continue;
            }
            let c = full(c)?;
            caps.retain(|x| *x != c);
        }
    }
    Ok(Capabilities {
        bounding: caps.clone(),
        effective: caps.clone(),
        inheritable: Vec::new(),
        permitted: caps,
        ambient: Vec::new(),
    })
}

fn resources(plan: &ContainerPlan) -> Resources {
    let r = &plan.resources;
    let shares = r
        .cpu_request_millis
        .or(r.cpu_limit_millis)
        .map(|m| u64::try_from(m * 1024 / 1000).unwrap_or(2).max(2))
        .unwrap_or(2);
    let quota = r
        .cpu_limit_millis
        .map(|m| (m * i64::try_from(CFS_PERIOD_US).unwrap_or(100_000) / 1000).max(1000));
    Resources {
        devices: vec![DeviceRule {
            allow: false,
            access: Some("rwm".into()),
        }],
        memory: r.memory_limit_bytes.map(|b| Memory { limit: Some(b) }),
        cpu: Some(Cpu {
            shares: Some(shares),
            quota,
            period: quota.map(|_| CFS_PERIOD_US),
        }),
    }
}

/// runc's default mounts, which is what containerd gives a container.
fn default_mounts(privileged: bool) -> Vec<Mount> {
    let m = |dest: &str, kind: &str, src: &str, opts: &[&str]| Mount {
        destination: dest.into(),
        kind: Some(kind.into()),
        source: Some(src.into()),
        options: opts.iter().map(|o| (*o).to_owned()).collect(),
    };
    let sys_opts: &[&str] = if privileged {
        &["nosuid", "noexec", "nodev"]
    } else {
        &["nosuid", "noexec", "nodev", "ro"]
    };
    vec![
        m("/proc", "proc", "proc", &[]),
        m(
            "/dev",
            "tmpfs",
            "tmpfs",
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        ),
        m(
            "/dev/pts",
            "devpts",
            "devpts",
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
            ],
        ),
        m(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        ),
        m(
            "/dev/mqueue",
            "mqueue",
            "mqueue",
            &["nosuid", "noexec", "nodev"],
        ),
        m("/sys", "sysfs", "sysfs", sys_opts),
    ]
}

#[cfg(test)]
mod tests;
