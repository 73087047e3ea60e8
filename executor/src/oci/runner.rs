//! Drives a runc-compatible CLI for the supervisor: pull, root filesystem,
//! bundle, `run --detach` (create and start in one exec) through the
//! container's shim, its exit (the shim's message), `delete`; and the
//! adoption of a container a dead executor started.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use rustix::process::Signal;
use tokio::process::Command;

use super::bundle::{self, BundleContext};
use super::gc::ImageGc;
use super::image::{Image, Images, PullFailure, StoreImages};
use super::rootfs::{RunDirs, assemble, release};
use super::sandbox::{self, PodSandbox};
use super::{ContainerSettings, RuntimeKind};
use crate::logs::LogSettings;

mod orphans;
mod teardown;
use crate::pod::ContainerPlan;
use crate::shim::wire::ExitStatus;
use crate::shim::{Adopted, ContainerEnds, Ended, Shim, Spawn};
pub(crate) use orphans::Adoptable;
pub(crate) use teardown::signal;

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
    /// Its anchor, which holds its pidfd and reports its exit.
    pub(crate) shim: Shim,
    pub(crate) rootfs: PathBuf,
    pub(crate) cgroups_path: String,
    pub(crate) image_id: String,
}

/// A container a dead executor started, as its checkpoint names it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct AdoptRequest {
    pub(crate) id: String,
    pub(crate) bundle: PathBuf,
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
    /// Where the shims' anchor cgroups go: out of the executor's Mesos
    /// container (`crate::shim`).
    anchor_bases: Vec<PathBuf>,
    /// How long a shim waits for a new executor once its own is gone.
    adoption_timeout: std::time::Duration,
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
        // Containers' init processes are their shims' children; what the
        // runtime's other commands leave behind (a sandbox's holder) is
        // this process' to reap, never init's unnoticed.
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))
            .map_err(|e| format!("cannot become a child subreaper: {e}"))?;
        let mut store_config = images::StoreConfig::new(store);
        store_config.insecure_registries = settings.insecure_registries.clone();
        store_config.registry_config = settings.registry_config.clone();
        store_config.hosts = settings.registry_hosts.clone();
        let images = StoreImages::open(store_config)?;
        let sandboxes = PathBuf::from(format!("{}-sandboxes", root.display()));
        let init_layers = PathBuf::from(format!("{}-init", root.display()));
        let gc = ImageGc::new(
            images.store().clone(),
            settings.image_gc,
            init_layers.clone(),
            work.clone(),
        );
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
            anchor_bases: Spawn::anchor_bases(
                &sandbox
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            ),
            // A rootless executor's namespaces die with it: its containers
            // cannot be adopted, and go with it.
            adoption_timeout: match super::rootless::active() {
                true => std::time::Duration::ZERO,
                false => settings.adoption_timeout,
            },
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

    /// Whether a new executor can adopt this one's containers.
    pub(crate) fn adopts(&self) -> bool {
        !self.adoption_timeout.is_zero()
    }

    /// Builds the bundle and runs it (`run --detach`).
    pub(crate) async fn start(&self, req: StartRequest<'_>) -> Result<Running, StartError> {
        let dirs = RunDirs::new(&req.sandbox.dir, &req.dir, &req.id);
        let (bundle_dir, rootfs) = (dirs.bundle.clone(), dirs.rootfs.clone());
        let layers = req.image.layers.clone();
        let read_only = req.plan.security.read_only_root_filesystem;
        let (init_layers, image_id) = (self.init_layers.clone(), req.image.image_id.clone());
        // Once mounted, the init layer is the container's: gc keeps it for
        // the pod that holds its image. Until then, gc waits.
        let no_gc = self.gc.starting().await;
        let assembled = tokio::task::spawn_blocking(move || {
            let init = super::init_layer::ensure(&init_layers, &image_id, &layers);
            let made = assemble(&layers, init.as_deref(), &dirs, read_only);
            if made.is_err() {
                release(&dirs.bundle);
            }
            made
        });
        let assembled = assembled.await;
        drop(no_gc);
        assembled
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
        // `run --detach` (create and start in one exec), run by the
        // container's shim: the container's init is the shim's child, and
        // outlives this executor (`crate::shim`).
        let mut argv: Vec<std::ffi::OsString> = vec![self.program.clone().into()];
        argv.extend(self.prefix.iter().map(Into::into));
        argv.extend([
            "--root".into(),
            self.root.clone().into(),
            "--log".into(),
            log.clone().into(),
            "run".into(),
            "--detach".into(),
        ]);
        if let Some(c) = &console {
            argv.extend(["--console-socket".into(), c.path().into()]);
        }
        argv.extend([
            "--bundle".into(),
            bundle_dir.clone().into(),
            "--pid-file".into(),
            pid_file.clone().into(),
            req.id.clone().into(),
        ]);
        let spawn = Spawn {
            exe: self.exe.clone(),
            bundle: bundle_dir.clone(),
            id: req.id.clone(),
            pid_file,
            cgroups_path: cgroups_path.clone(),
            anchor_bases: self.anchor_bases.clone(),
            adoption_timeout: self.adoption_timeout,
            argv,
            env: super::rootless_ns::pid()
                .map(|pid| (super::rootless_ns::JOIN_ENV.to_owned(), pid.to_string()))
                .into_iter()
                .collect(),
        };
        let ends = ContainerEnds {
            stdout: output.stdout.into(),
            stderr: output.stderr.into(),
            stdin: output.stdin.map(Into::into),
        };
        let ran = spawn.run(ends, output.held).await;
        drop(gate);
        let failed = |what: String| {
            release(&bundle_dir);
            StartError::Runtime(what)
        };
        let shim = match ran {
            Ok(Ok(shim)) => shim,
            Ok(Err(status)) => {
                self.force_delete(&req.id).await;
                // The runtime's own error went to the container's stderr:
                // once the container is deleted the pipe drains.
                let _ = tokio::time::timeout(PUMP_DRAIN, output.done).await;
                let why = runtime_error(&log, &req.log.path, status);
                return Err(failed(why));
            }
            Err(e) => {
                self.force_delete(&req.id).await;
                return Err(failed(format!(
                    "cannot run the container runtime {}: {e}",
                    self.program.display()
                )));
            }
        };
        if let (Some(socket), Some(c)) = (&console, output.console)
            && let Err(e) = super::console_socket::hand_over(socket, c).await
        {
            self.force_delete(&req.id).await;
            return Err(failed(format!("cannot get the container's terminal: {e}")));
        }
        // The runtime keeps the spec it ran, root-only, in its state.json
        // (runc and the embedded one alike). The bundle's copy holds the
        // container's env, Secrets' values among them, and would lie beside
        // the pod's files for the container's whole life.
        if let Err(e) = std::fs::remove_file(bundle_dir.join("config.json")) {
            tracing::warn!(container = %req.id, error = %e, "cannot remove the bundle's config.json");
        }
        Ok(Running {
            id: req.id.clone(),
            pid: shim.pid,
            shim,
            rootfs,
            cgroups_path,
            image_id: req.image.image_id.clone(),
        })
    }

    /// Takes over a container a dead executor started (`crate::shim`):
    /// its shim's pidfd, and its pipes pumped on into `log`. The exit, if
    /// it came while nobody watched, comes back with it.
    pub(crate) async fn adopt(
        &self,
        live: &AdoptRequest,
        log: &crate::logs::RunLog,
    ) -> Result<(Running, Option<ExitStatus>), String> {
        let bundle = live.bundle.clone();
        let adopted = tokio::task::spawn_blocking(move || Shim::adopt(&bundle))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("its shim cannot be reached: {e}"))?;
        let Adopted { shim, exit, held } = adopted;
        if let Err(e) = crate::logs::resume(log, self.logs, held) {
            shim.release();
            return Err(format!("its output cannot be taken over: {e}"));
        }
        let rootfs = live.bundle.join("rootfs");
        Ok((
            Running {
                id: live.id.clone(),
                pid: shim.pid,
                shim,
                rootfs,
                cgroups_path: live.cgroups_path.clone(),
                image_id: live.image_id.clone(),
            },
            exit,
        ))
    }

    /// Waits for the container to exit; returns its exit code and whether
    /// the kernel OOM-killed it (its shim reads both). The container is
    /// deleted afterwards.
    pub(crate) async fn wait(self: Arc<Self>, running: Arc<Running>) -> (i32, bool) {
        // A thread of its own blocks on the shim's socket: the exit is one
        // message, whenever it comes.
        let (tx, rx) = tokio::sync::oneshot::channel();
        let waiting = Arc::clone(&running);
        let spawned = std::thread::Builder::new()
            .name("container-wait".into())
            .spawn(move || {
                let _ = tx.send(waiting.shim.wait());
            });
        let ended = match spawned {
            Ok(_) => rx.await.unwrap_or(Ended::Lost),
            Err(e) => {
                tracing::warn!(error = %e, "cannot start a thread to wait for a container");
                Ended::Lost
            }
        };
        let (code, oom) = match ended {
            Ended::Exited(s) => (s.code, s.oom),
            Ended::Lost => {
                tracing::warn!(container = %running.id, "the container's shim is gone; taking the container as killed");
                // Whatever is left of it goes now.
                signal(&running, Signal::KILL);
                (137, false)
            }
        };
        self.remove(&running).await;
        (code, oom)
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
