//! Drives a runc-compatible CLI for the supervisor: pull, root filesystem,
//! bundle, `run --detach` (create and start in one exec), exit (through a pidfd: the container's init
//! is the executor's child, the executor being a subreaper), `delete`.

use std::os::fd::{AsFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions};
use tokio::process::Command;

use super::bundle::{self, BundleContext};
use super::gc::ImageGc;
use super::image::{Image, Images, PullFailure, StoreImages};
use super::rootfs::{RunDirs, assemble, release};
use super::sandbox::{self, PodSandbox};
use super::{ContainerSettings, RuntimeKind, cgroup};
use crate::logs::LogSettings;
use crate::pod::ContainerPlan;

/// How long a failed start waits for the runtime's error to reach the log.
const PUMP_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// How a start went wrong.
#[derive(Debug)]
pub(crate) enum StartError {
    /// The image could not be had (the container waits, pull back-off).
    Pull(PullFailure),
    /// The config cannot be built (`CreateContainerConfigError`).
    Config(String),
    /// A pod volume cannot be set up (kubelet's `FailedMount`: the pod
    /// waits in `ContainerCreating`, retried).
    Mount(String),
    /// The container cannot be created (`CreateContainerError`: it
    /// waits, retried), e.g. its seccomp profile cannot be read.
    Create(String),
    /// The runtime refused (`StartError`, exit 128).
    Runtime(String),
}

/// A started container.
#[derive(Debug)]
pub(crate) struct Running {
    pub(crate) id: String,
    pub(crate) pid: u32,
    pub(crate) pidfd: OwnedFd,
    pub(crate) rootfs: PathBuf,
    pub(crate) cgroups_path: String,
    pub(crate) image_id: String,
}

/// One container to start.
pub(crate) struct StartRequest<'a> {
    pub(crate) id: String,
    pub(crate) plan: &'a ContainerPlan,
    pub(crate) image: &'a Image,
    /// The container's sandbox directory.
    pub(crate) dir: PathBuf,
    /// This run's CRI log ([`crate::logs`]).
    pub(crate) log: crate::logs::RunLog,
    pub(crate) hostname: String,
    pub(crate) pod_ref: String,
    pub(crate) env: Vec<(String, String)>,
    /// The pod's shared namespaces.
    pub(crate) sandbox: &'a PodSandbox,
    /// The pod's volumes, as this container mounts them.
    pub(crate) mounts: Vec<super::spec::Mount>,
}

/// The runtime CLI and the image store.
#[derive(Debug)]
pub(crate) struct Oci {
    program: PathBuf,
    prefix: Vec<String>,
    root: PathBuf,
    /// This binary, which makes pod sandboxes whatever the runtime.
    exe: PathBuf,
    /// Where pod sandboxes live (`<root>-sandboxes`).
    sandboxes: PathBuf,
    /// Images' init layers (`<root>-init`, [`super::init_layer`]).
    init_layers: PathBuf,
    /// The runtime is `mesopod runtime`, whose `init` makes a pod's
    /// sandbox with its first container.
    embedded: bool,
    pub(crate) images: Arc<dyn Images>,
    /// Image gc: pods hold their images while they live.
    pub(crate) gc: Arc<ImageGc>,
    allow_privileged: bool,
    /// The pods' own network, on a CNI agent (records in `<root>-cni`).
    cni: Option<crate::network::Cni>,
    logs: LogSettings,
    seccomp: super::seccomp::SeccompSettings,
}

impl Oci {
    /// `None` in process mode.
    pub(crate) fn new(settings: &ContainerSettings, sandbox: &Path) -> Result<Option<Oci>, String> {
        if settings.runtime == RuntimeKind::Process {
            return Ok(None);
        }
        let exe = match &settings.mesopod_binary {
            Some(path) => path.clone(),
            None => std::env::current_exe()
                .map_err(|e| format!("cannot find the mesopod binary: {e}"))?,
        };
        let (program, prefix) = match &settings.runtime {
            RuntimeKind::Cli(p) => (p.clone(), Vec::new()),
            _ => (exe.clone(), vec!["runtime".to_owned()]),
        };
        if let Some(why) = super::unavailable_reason() {
            return Err(why);
        }
        if super::rootless::active() {
            super::rootless_ns::check(&settings.runtime, settings.cni.is_some())?;
            super::rootless_ns::start(&exe)?;
        }
        let work = super::agent_work_dir(sandbox);
        let root = settings
            .state_root
            .clone()
            .unwrap_or_else(|| super::agent_dir(sandbox).join("mesopod-runtime"));
        let store = settings
            .image_store
            .clone()
            .unwrap_or_else(|| work.join("images"));
        // Containers' init processes become this process' children once
        // `create` exits, so their exits are seen and none is inherited by
        // init unnoticed.
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
            .map_err(|e| format!("cannot become a child subreaper: {e}"))?;
        let mut store_config = images::StoreConfig::new(store);
        store_config.insecure_registries = settings.insecure_registries.clone();
        store_config.registry_config = settings.registry_config.clone();
        let images = StoreImages::open(store_config)?;
        let gc = ImageGc::new(images.store().clone(), settings.image_gc);
        let sandboxes = PathBuf::from(format!("{}-sandboxes", root.display()));
        let init_layers = PathBuf::from(format!("{}-init", root.display()));
        let cni = settings
            .cni
            .clone()
            .map(|s| crate::network::Cni::new(s, PathBuf::from(format!("{}-cni", root.display()))));
        Ok(Some(Oci {
            program,
            prefix,
            root,
            exe,
            sandboxes,
            init_layers,
            embedded: settings.runtime == RuntimeKind::Embedded,
            images: Arc::new(images),
            gc,
            allow_privileged: settings.allow_privileged,
            cni,
            logs: settings.logs,
            seccomp: settings.seccomp.clone(),
        }))
    }

    fn cli(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.prefix).arg("--root").arg(&self.root);
        cmd.stdin(Stdio::null()).kill_on_drop(true);
        if let Some(pid) = super::rootless_ns::pid() {
            cmd.env(super::rootless_ns::JOIN_ENV, pid.to_string());
        }
        cmd
    }

    fn cli_sync(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.prefix).arg("--root").arg(&self.root);
        cmd.stdin(Stdio::null());
        if let Some(pid) = super::rootless_ns::pid() {
            cmd.env(super::rootless_ns::JOIN_ENV, pid.to_string());
        }
        cmd
    }

    /// Makes the sandbox of the pod whose task is `task`, with a network of
    /// its own on a CNI agent unless the pod is `hostNetwork`.
    pub(crate) async fn sandbox(
        &self,
        task: &str,
        hostname: &str,
        pod: &k8s_openapi::api::core::v1::Pod,
    ) -> Result<PodSandbox, String> {
        let dir = self.sandboxes.join(sandbox::dir_name(task));
        let mut sb = if self.embedded {
            sandbox::deferred(&dir)?
        } else {
            sandbox::create(&self.exe, &dir, hostname).await?
        };
        let Some(cni) = self
            .cni
            .clone()
            .filter(|_| !crate::network::host_network(pod))
        else {
            return Ok(sb);
        };
        let (id, netns, ports) = (
            sandbox::dir_name(task),
            dir.join("net"),
            crate::network::host_ports(pod),
        );
        let attached = tokio::task::spawn_blocking(move || cni.attach(&id, &netns, &ports))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        match attached {
            Ok(a) => {
                sb.net = Some(a.netns);
                sb.ip = Some(a.ip);
                Ok(sb)
            }
            Err(e) => {
                sandbox::remove(&dir);
                Err(e)
            }
        }
    }

    /// Releases a pod's sandbox: its network first (CNI DEL frees the IP).
    pub(crate) async fn remove_sandbox(&self, sb: &PodSandbox) {
        if let (Some(cni), Some(_)) = (self.cni.clone(), &sb.net) {
            let id = sb
                .dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let done = tokio::task::spawn_blocking(move || cni.detach(&id)).await;
            if let Ok(Err(e)) = done {
                tracing::warn!(error = %e, "releasing a pod's network");
            }
        }
        sandbox::remove(&sb.dir);
    }

    /// Kills and deletes every container an earlier executor left under
    /// this root, and removes its pods' sandboxes; returns the containers'
    /// ids. Run before anything is launched.
    pub(crate) fn clean_orphans(&self) -> Vec<String> {
        let ids = sandbox::subdirs(&self.root);
        for id in &ids {
            let bundle = self.bundle_of(id);
            let out = self.cli_sync().args(["delete", "--force", id]).output();
            if let Err(e) = out {
                tracing::warn!(container = %id, error = %e, "cannot delete a leftover container");
            }
            // The dead executor mounted its containers' root filesystems
            // in the agent's mount namespace: unmounted here, or they stay
            // until reboot (and every later mount namespace copies them).
            if let Some(bundle) = bundle {
                release(&bundle);
            }
        }
        // Networks first: DEL needs the namespaces the sandboxes hold.
        for (pod, done) in self.cni.iter().flat_map(|c| c.release_orphans(|_| false)) {
            match done {
                Ok(()) => tracing::warn!(%pod, "released the network an earlier executor left"),
                Err(e) => tracing::warn!(%pod, error = %e, "cannot release a leftover network"),
            }
        }
        let sandboxes = sandbox::remove_leftovers(&self.sandboxes);
        if !sandboxes.is_empty() {
            tracing::warn!(
                ?sandboxes,
                "removed the pod sandboxes an earlier executor left"
            );
        }
        ids
    }

    /// The bundle of container `id`, from the runtime's `state` (OCI's
    /// state JSON, which runc and the embedded runtime both print).
    fn bundle_of(&self, id: &str) -> Option<PathBuf> {
        let out = self.cli_sync().args(["state", id]).output().ok()?;
        let state: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let bundle = PathBuf::from(state.get("bundle")?.as_str()?);
        // Only a bundle this executor's layout names (`.bundle-<id>`).
        bundle
            .file_name()
            .is_some_and(|n| n.to_string_lossy() == format!(".bundle-{id}"))
            .then_some(bundle)
    }

    /// Builds the bundle and runs it (`run --detach`).
    pub(crate) async fn start(&self, req: StartRequest<'_>) -> Result<Running, StartError> {
        let dirs = RunDirs::new(&req.sandbox.dir, &req.dir, &req.id);
        let (bundle_dir, rootfs) = (dirs.bundle.clone(), dirs.rootfs.clone());
        let layers = req.image.layers.clone();
        let read_only = req.plan.security.read_only_root_filesystem;
        let (init_layers, image_id) = (self.init_layers.clone(), req.image.image_id.clone());
        let assembled = tokio::task::spawn_blocking(move || {
            let init = super::init_layer::ensure(&init_layers, &image_id, &layers);
            let made = assemble(&layers, init.as_deref(), &dirs, read_only);
            if made.is_err() {
                release(&dirs.bundle);
            }
            made
        });
        assembled
            .await
            .map_err(|e| StartError::Runtime(e.to_string()))?
            .map_err(StartError::Runtime)?;
        // The first container of a pod on the embedded runtime makes the
        // sandbox; the pod's other starts wait for it here.
        let gate = match &req.sandbox.deferred {
            Some(g) => Some(Arc::clone(g).lock_owned().await),
            None => None,
        };
        let make_sandbox = gate.is_some() && !req.sandbox.made();
        let gate = gate.filter(|_| make_sandbox);
        let cgroups_path = format!("mesopod/{}", req.id);
        let joins = req.sandbox.joins();
        // kubelet's /etc/hosts, /etc/hostname and /etc/resolv.conf, once per pod.
        if !req.sandbox.dir.join("etc-hosts").is_file() {
            super::etc_files::write(req.sandbox, &req.hostname).map_err(StartError::Runtime)?;
        }
        let mut mounts = req.mounts.clone();
        mounts.extend(super::etc_files::mounts(req.sandbox, &req.mounts));
        let seccomp = match super::seccomp::resolve(&req.plan.security, &self.seccomp, &req.id) {
            Ok(s) => s,
            Err(e) => {
                release(&bundle_dir);
                return Err(StartError::Create(e));
            }
        };
        let cx = BundleContext {
            hostname: &req.hostname,
            pod_ref: req.pod_ref.clone(),
            rootfs: &rootfs,
            cgroups_path: cgroups_path.clone(),
            allow_privileged: self.allow_privileged,
            env: &req.env,
            join: &joins,
            mounts: &mounts,
            seccomp: &seccomp,
        };
        let built = bundle::build(req.plan, &req.image.config, &cx).and_then(|spec| {
            let u = &spec.process.user;
            match super::rootless_ns::unmapped(u.uid, u.gid, &u.additional_gids) {
                Some(why) => Err(why),
                None => Ok(spec),
            }
        });
        let mut spec = match built {
            Ok(s) => s,
            Err(e) => {
                release(&bundle_dir);
                return Err(StartError::Config(e));
            }
        };
        // What the embedded runtime's `init` would fail to compile fails
        // here, before anything runs, as runc's libseccomp would refuse it.
        if let Some(profile) = spec.linux.seccomp.as_ref().filter(|_| self.embedded)
            && let Err(e) = super::seccomp::compile::compile(profile)
        {
            release(&bundle_dir);
            return Err(StartError::Create(e.to_string()));
        }
        // `tty: true`: the runtime makes the container's terminal and sends
        // its master to the console socket below.
        spec.process.terminal = req.log.tty();
        if make_sandbox {
            spec.annotations.insert(
                sandbox::MAKE_ANNOTATION.into(),
                req.sandbox.dir.display().to_string(),
            );
        }
        let json = serde_json::to_vec(&spec).map_err(|e| StartError::Runtime(e.to_string()))?;
        std::fs::write(bundle_dir.join("config.json"), json)
            .map_err(|e| StartError::Runtime(format!("cannot write config.json: {e}")))?;
        // The container inherits the runtime's stdio (`run --detach`
        // without a terminal passes it through).
        let output = match crate::logs::start(&req.log, self.logs) {
            Ok(o) => o,
            Err(e) => {
                release(&bundle_dir);
                return Err(StartError::Runtime(format!("cannot open the log: {e}")));
            }
        };
        let console = match req.log.tty() {
            true => match super::console_socket::ConsoleSocket::bind() {
                Ok(c) => Some(c),
                Err(e) => {
                    release(&bundle_dir);
                    return Err(StartError::Runtime(format!(
                        "cannot make a console socket: {e}"
                    )));
                }
            },
            false => None,
        };
        let pid_file = bundle_dir.join("pid");
        let log = bundle_dir.join("runtime.log");
        // `run --detach` (create and start in one exec): the container's
        // process is exec'd before the pidfd below is opened, but it is
        // this process' child by then (a subreaper), so even a quick exit
        // leaves a zombie the pidfd still names.
        let ran = self
            .cli()
            .arg("--log")
            .arg(&log)
            .arg("run")
            .arg("--detach")
            .args(console.iter().flat_map(|c| {
                [
                    std::ffi::OsString::from("--console-socket"),
                    c.path().into(),
                ]
            }))
            .arg("--bundle")
            .arg(&bundle_dir)
            .arg("--pid-file")
            .arg(&pid_file)
            .arg(&req.id)
            .stdin(output.stdin.map_or_else(Stdio::null, Stdio::from))
            .stdout(output.stdout)
            .stderr(output.stderr)
            .status()
            .await;
        drop(gate);
        let failed = |what: String| {
            release(&bundle_dir);
            StartError::Runtime(what)
        };
        match ran {
            Ok(s) if s.success() => {}
            Ok(s) => {
                let _ = self
                    .cli()
                    .args(["delete", "--force"])
                    .arg(&req.id)
                    .output()
                    .await;
                // The runtime's own error went to the container's stderr:
                // once the container is deleted the pipe drains.
                let _ = tokio::time::timeout(PUMP_DRAIN, output.done).await;
                let why = runtime_error(&log, &req.log.path, s.to_string());
                return Err(failed(why));
            }
            Err(e) => {
                return Err(failed(format!(
                    "cannot run the container runtime {}: {e}",
                    self.program.display()
                )));
            }
        }
        if let (Some(socket), Some(c)) = (&console, output.console)
            && let Err(e) = super::console_socket::hand_over(socket, c).await
        {
            let _ = self
                .cli()
                .args(["delete", "--force"])
                .arg(&req.id)
                .output()
                .await;
            return Err(failed(format!("cannot get the container's terminal: {e}")));
        }
        // The runtime keeps the spec it ran, root-only, in its state.json
        // (runc and the embedded one alike). The bundle's copy holds the
        // container's env, Secrets' values among them, and would lie beside
        // the pod's files for the container's whole life.
        if let Err(e) = std::fs::remove_file(bundle_dir.join("config.json")) {
            tracing::warn!(container = %req.id, error = %e, "cannot remove the bundle's config.json");
        }
        let pid = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|p| p.trim().parse::<u32>().ok())
            .ok_or_else(|| failed("the runtime wrote no pid file".into()))?;
        let pidfd = Pid::from_raw(i32::try_from(pid).unwrap_or(0))
            .ok_or_else(|| failed("bad pid".into()))
            .and_then(|p| {
                rustix::process::pidfd_open(p, PidfdFlags::empty())
                    .map_err(|e| failed(format!("pidfd_open: {e}")))
            })?;
        Ok(Running {
            id: req.id.clone(),
            pid,
            pidfd,
            rootfs,
            cgroups_path,
            image_id: req.image.image_id.clone(),
        })
    }

    /// Waits for the container to exit; returns its exit code and whether
    /// the kernel OOM-killed it. The container is deleted afterwards.
    pub(crate) async fn wait(self: Arc<Self>, running: Arc<Running>) -> (i32, bool) {
        // A thread of its own blocks in waitid: tokio's AsyncFd wants
        // unsafe to register a pidfd, and the blocking pool is for file work.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let waiting = Arc::clone(&running);
        let spawned = std::thread::Builder::new()
            .name("container-wait".into())
            .spawn(move || {
                let _ = tx.send(wait_pidfd(&waiting.pidfd));
            });
        let code = match spawned {
            Ok(_) => rx.await.unwrap_or(128),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start a thread to wait for a container");
                128
            }
        };
        let oom = code == 137
            && cgroup::memory_dir(&running.cgroups_path).is_some_and(|d| cgroup::oom_killed(&d));
        self.remove(&running).await;
        (code, oom)
    }

    async fn remove(&self, running: &Running) {
        let out = self
            .cli()
            .args(["delete", "--force"])
            .arg(&running.id)
            .output()
            .await;
        if let Ok(o) = &out
            && !o.status.success()
        {
            tracing::warn!(container = %running.id, stderr = %String::from_utf8_lossy(&o.stderr), "runtime delete failed");
        }
        let rootfs = running.rootfs.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(bundle) = rootfs.parent() {
                release(bundle);
            }
        })
        .await;
    }
}

/// Sends `signal` to a container's init.
pub(crate) fn signal(running: &Running, sig: Signal) {
    match rustix::process::pidfd_send_signal(&running.pidfd, sig) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => tracing::warn!(container = %running.id, error = %e, "cannot signal container"),
    }
}

fn wait_pidfd(fd: &OwnedFd) -> i32 {
    let status = loop {
        match rustix::process::waitid(WaitId::PidFd(fd.as_fd()), WaitIdOptions::EXITED) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other,
        }
    };
    match status {
        Ok(Some(s)) => s
            .exit_status()
            .or_else(|| s.terminating_signal().map(|n| 128 + n))
            .unwrap_or(128),
        Ok(None) => 128,
        Err(e) => {
            tracing::warn!(error = %e, "cannot wait for a container");
            128
        }
    }
}

fn runtime_error(log: &Path, run_log: &Path, status: String) -> String {
    // runc logs JSON lines with a "msg"; the embedded runtime prints one line to stderr.
    let from_log = std::fs::read_to_string(log).ok().and_then(|t| {
        t.lines().rev().find_map(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .and_then(|v| v.get("msg").and_then(|m| m.as_str()).map(str::to_owned))
                .or_else(|| (!l.trim().is_empty()).then(|| l.trim().to_owned()))
        })
    });
    let from_stderr = || crate::logs::last_line_with(run_log, "runtime");
    from_log
        .or_else(from_stderr)
        .unwrap_or_else(|| format!("the container runtime failed ({status})"))
}
