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

pub mod cri;
mod pump;
pub(crate) mod rotate;

use std::io::{self, PipeWriter};
use std::path::Path;

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
    /// Ends once everything written to the pipes is in the log.
    pub(crate) done: tokio::task::JoinHandle<()>,
}

/// Opens the run's log file at `path` and starts pumping a new pair of
/// pipes into it. Must be called inside a tokio runtime.
pub(crate) fn start(path: &Path, settings: LogSettings) -> io::Result<Output> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = rotate::RotatingFile::open(path, settings)?;
    let (out_r, stdout) = io::pipe()?;
    let (err_r, stderr) = io::pipe()?;
    let out_r = tokio::net::unix::pipe::Receiver::from_owned_fd(out_r.into())?;
    let err_r = tokio::net::unix::pipe::Receiver::from_owned_fd(err_r.into())?;
    let done = tokio::spawn(pump::run(out_r, err_r, file, path.to_path_buf()));
    Ok(Output {
        stdout,
        stderr,
        done,
    })
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
