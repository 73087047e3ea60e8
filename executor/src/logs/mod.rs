//! Container output as kubelet keeps it: a container's stdout and stderr are
//! pipes this executor reads (as containerd's shim does), and every line is
//! written in the CRI log format ([`cri`]) to one file per run,
//! `<container>/<restartCount>.log` ([`crate::layout::run_log`]), rotated by
//! size ([`LogSettings`], kubelet's `--container-log-max-size` and
//! `--container-log-max-files`).
//!
//! Backpressure: the pump reads one bounded buffer per stream and writes it
//! before reading again, so a container that writes faster than its log can
//! be written blocks in `write(2)` on a full pipe; nothing is queued without
//! bound. A run's file outlives the run (and the container), which is what
//! `kubectl logs --previous` reads.
//!
//! A `tty: true` container has a terminal instead ([`console`]): the pipes
//! then carry only what the runtime itself prints, and the pty's master,
//! once the runtime hands it over, everything the container writes.

pub mod attach_io;
pub(crate) mod console;
pub mod cri;
mod pump;
pub(crate) mod rotate;

use std::io::{self, PipeReader, PipeWriter};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::pod::PodKey;
use crate::shim::wire::Held;
use attach_io::{Attachments, ContainerIo, TAP_CHUNKS};

/// kubelet's default `--container-log-max-size`: 10Mi.
pub const DEFAULT_MAX_SIZE: u64 = 10 * 1024 * 1024;
/// kubelet's default `--container-log-max-files`.
pub const DEFAULT_MAX_FILES: u32 = 5;

/// How container logs rotate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogSettings {
    /// A log file is rotated before it grows past this many bytes.
    pub max_size: u64,
    /// At most this many files per run: the live one and the rotated ones.
    pub max_files: u32,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            max_size: DEFAULT_MAX_SIZE,
            max_files: DEFAULT_MAX_FILES,
        }
    }
}

impl LogSettings {
    /// Checks the flags' values with kubelet's rules and words.
    pub fn new(max_size: u64, max_files: u32) -> Result<Self, String> {
        if max_files < 2 {
            return Err(format!(
                "invalid configuration: containerLogMaxFiles ({max_files}) must be greater than 1"
            ));
        }
        if max_size == 0 {
            return Err("invalid configuration: containerLogMaxSize must be positive".into());
        }
        Ok(LogSettings {
            max_size,
            max_files,
        })
    }
}

/// The write ends of one run's output pipes, to hand to the container (or
/// the runtime CLI whose child it becomes). Dropping them after the start
/// leaves the container as their only writer, so the pump sees end of file
/// when the container (and every process that inherited them) is gone.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) stdout: PipeWriter,
    pub(crate) stderr: PipeWriter,
    /// The read end of the container's stdin (`stdin: true` without a
    /// tty), else none.
    pub(crate) stdin: Option<PipeReader>,
    /// With `tty: true`: where the terminal's master goes.
    pub(crate) console: Option<console::Console>,
    /// Ends once everything written to the pipes is in the log.
    pub(crate) done: tokio::task::JoinHandle<()>,
    /// Copies of this executor's ends of the pipes, for a shim to hold
    /// ([`crate::shim`]).
    pub(crate) held: Vec<(Held, OwnedFd)>,
}

/// One run of a container: where its log goes and what attach may reach.
#[derive(Debug, Clone)]
pub(crate) struct RunLog {
    /// `<container dir>/<restartCount>.log`.
    pub(crate) path: PathBuf,
    namespace: String,
    pod: String,
    container: String,
    stdin: bool,
    stdin_once: bool,
    tty: bool,
}

impl RunLog {
    /// The run numbered `restart_count` of `container` in the pod `key`
    /// names, whose directory is `dir`.
    pub(crate) fn new(
        dir: &Path,
        key: &PodKey,
        pod: &Pod,
        container: &str,
        restart_count: i32,
    ) -> Self {
        let spec = pod.spec.iter().flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        });
        let c = spec.into_iter().find(|c| c.name == container);
        RunLog {
            path: dir.join(crate::layout::run_log_name(restart_count)),
            namespace: key.namespace.clone(),
            pod: key.name.clone(),
            container: container.to_owned(),
            stdin: c.and_then(|c| c.stdin).unwrap_or(false),
            stdin_once: c.and_then(|c| c.stdin_once).unwrap_or(false),
            tty: c.and_then(|c| c.tty).unwrap_or(false),
        }
    }

    /// Whether the container has a terminal (`tty: true`).
    pub(crate) fn tty(&self) -> bool {
        self.tty
    }
}

/// Opens the run's log file and starts pumping a new pair of output pipes
/// into it (and into the attach tap); with `stdin: true` makes the stdin
/// pipe too. The run is registered in [`Attachments::global`]. Must be
/// called inside a tokio runtime.
pub(crate) fn start(run: &RunLog, settings: LogSettings) -> io::Result<Output> {
    if let Some(dir) = run.path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let (out_r, stdout) = io::pipe()?;
    let (err_r, stderr) = io::pipe()?;
    let (stdin, stdin_w) = match run.stdin && !run.tty {
        true => {
            let (r, w) = io::pipe()?;
            (Some(r), Some(OwnedFd::from(w)))
        }
        false => (None, None),
    };
    let (out_r, err_r) = (OwnedFd::from(out_r), OwnedFd::from(err_r));
    let mut held = vec![
        (Held::Stdout, out_r.try_clone()?),
        (Held::Stderr, err_r.try_clone()?),
    ];
    // With `stdinOnce` the executor closes stdin after the first attach,
    // and the container must see that EOF: a copy in the shim would keep
    // the pipe open. Such a stdin ends with its executor instead.
    if let Some(w) = stdin_w.as_ref().filter(|_| !run.stdin_once) {
        held.push((Held::Stdin, w.try_clone()?));
    }
    let (console, done) = pump_from(run, settings, out_r, err_r, stdin_w)?;
    Ok(Output {
        stdout,
        stderr,
        stdin,
        console,
        done,
        held,
    })
}

/// Pumps on, into the same log, the pipes of a container a dead executor
/// started: its shim kept the read ends (and stdin's write end), so what
/// the container wrote meanwhile is still in them. A terminal's master
/// is not among them: a `tty: true` container cannot be resumed.
pub(crate) fn resume(
    run: &RunLog,
    settings: LogSettings,
    held: Vec<(Held, OwnedFd)>,
) -> io::Result<tokio::task::JoinHandle<()>> {
    let (mut out, mut err, mut stdin) = (None, None, None);
    for (kind, fd) in held {
        match kind {
            Held::Stdout => out = Some(fd),
            Held::Stderr => err = Some(fd),
            Held::Stdin => stdin = Some(fd),
        }
    }
    let (Some(out), Some(err)) = (out, err) else {
        return Err(io::Error::other("the shim holds no stdout and stderr"));
    };
    if run.tty {
        return Err(io::Error::other(
            "a container with a terminal cannot be resumed",
        ));
    }
    pump_from(run, settings, out, err, stdin).map(|(_, done)| done)
}

/// Starts the pump over the executor's ends of a run's pipes, and makes
/// them what attach reaches.
fn pump_from(
    run: &RunLog,
    settings: LogSettings,
    out_r: OwnedFd,
    err_r: OwnedFd,
    stdin_w: Option<OwnedFd>,
) -> io::Result<(Option<console::Console>, tokio::task::JoinHandle<()>)> {
    let path = &run.path;
    let file = rotate::RotatingFile::open(path, settings)?;
    let stdin_w = stdin_w
        .map(tokio::net::unix::pipe::Sender::from_owned_fd)
        .transpose()?;
    let out_r = tokio::net::unix::pipe::Receiver::from_owned_fd(out_r)?;
    let err_r = tokio::net::unix::pipe::Receiver::from_owned_fd(err_r)?;
    let (tap, template) = tokio::sync::broadcast::channel(TAP_CHUNKS);
    let io = Arc::new(ContainerIo::new(template, stdin_w, run.stdin_once));
    Attachments::global().insert(&run.namespace, &run.pod, &run.container, io.clone());
    let (console, terminal) = match run.tty {
        true => {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let c = console::Console {
                pump: tx,
                io,
                stdin: run.stdin,
            };
            (Some(c), Some(rx))
        }
        false => (None, None),
    };
    let sources = pump::Sources {
        out: out_r,
        err: err_r,
        terminal,
    };
    let done = tokio::spawn(pump::run(sources, file, tap, path.to_path_buf()));
    Ok((console, done))
}

/// The last line of a run's log that mention `needle`, as text: how a
/// runtime failure printed to the container's stderr is found again.
pub(crate) fn last_line_with(path: &Path, needle: &str) -> Option<String> {
    let text = std::fs::read(path).ok()?;
    text.split(|b| *b == b'\n')
        .rev()
        .filter_map(cri::parse_line)
        .map(|l| String::from_utf8_lossy(l.text).trim().to_owned())
        .find(|t| t.contains(needle))
}
