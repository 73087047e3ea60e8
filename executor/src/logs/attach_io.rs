//! What `kubectl attach` reaches of a running container: a live, bounded
//! tap of its output and, for a container with `stdin: true`, the write end
//! of its stdin pipe.
//!
//! The tap is a broadcast channel the pump feeds only while someone is
//! attached, [`TAP_CHUNKS`] chunks deep: an attacher that falls behind loses
//! output (the log still has it) rather than holding the container back.
//! Stdin follows Kubernetes: open from the container's start; with
//! `stdinOnce` closed when the first attached client that used it goes, and
//! closed for good until the container restarts.
//!
//! A `tty: true` container's stdin is its terminal ([`super::console`]):
//! writes go to the pty's master, resizes set its size, and closing stdin
//! hangs the terminal up (`SIGHUP` to its foreground process group), as a
//! terminal whose master closes does.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use tokio::net::unix::pipe;
use tokio::sync::broadcast;

use super::cri::Stream;

/// Chunks (of at most [`super::cri::MAX_LINE`] bytes) the tap holds for a
/// slow attacher before it skips.
pub const TAP_CHUNKS: usize = 16;

/// One run's attachable I/O.
#[derive(Debug)]
pub struct ContainerIo {
    /// Kept only to subscribe from; it is never read.
    tap: broadcast::Receiver<(Stream, Bytes)>,
    stdin: tokio::sync::Mutex<Option<pipe::Sender>>,
    stdin_once: bool,
    /// The pty's master, once a `tty: true` container has one.
    terminal: Mutex<Option<OwnedFd>>,
}

impl ContainerIo {
    pub(crate) fn new(
        tap: broadcast::Receiver<(Stream, Bytes)>,
        stdin: Option<pipe::Sender>,
        stdin_once: bool,
    ) -> Self {
        ContainerIo {
            tap,
            stdin: tokio::sync::Mutex::new(stdin),
            stdin_once,
            terminal: Mutex::new(None),
        }
    }

    /// The container's terminal is up: `master` to resize it (and hang it
    /// up), `stdin` to write to it (`stdin: true`).
    pub(crate) async fn set_terminal(&self, master: OwnedFd, stdin: Option<pipe::Sender>) {
        if let Ok(mut t) = self.terminal.lock() {
            *t = Some(master);
        }
        *self.stdin.lock().await = stdin;
    }

    /// Whether the container has a terminal (`tty: true`, running).
    pub fn has_terminal(&self) -> bool {
        self.terminal.lock().is_ok_and(|t| t.is_some())
    }

    /// Sets the terminal's size (`TIOCSWINSZ`: its foreground process
    /// group gets `SIGWINCH`); nothing without a terminal.
    pub fn resize(&self, width: u16, height: u16) {
        let Ok(t) = self.terminal.lock() else { return };
        if let Some(master) = t.as_ref() {
            super::console::resize(master, width, height);
        }
    }

    /// Output from now on; ends (`Closed`) when the container's output does.
    pub fn subscribe(&self) -> broadcast::Receiver<(Stream, Bytes)> {
        self.tap.resubscribe()
    }

    /// Whether the container has a stdin that is still open.
    pub async fn stdin_open(&self) -> bool {
        self.stdin.lock().await.is_some()
    }

    /// Writes to the container's stdin; false once it is closed (or never
    /// was open, or the container stopped reading for good).
    pub async fn write_stdin(&self, data: &[u8]) -> bool {
        use tokio::io::AsyncWriteExt as _;
        let mut slot = self.stdin.lock().await;
        let Some(pipe) = slot.as_mut() else {
            return false;
        };
        if pipe.write_all(data).await.is_err() {
            *slot = None;
            return false;
        }
        true
    }

    /// An attached client that used stdin is gone (or sent its end):
    /// with `stdinOnce` the container's stdin closes for good.
    pub async fn stdin_session_ended(&self) {
        if self.stdin_once && self.stdin.lock().await.take().is_some() {
            let Ok(t) = self.terminal.lock() else { return };
            if let Some(master) = t.as_ref() {
                super::console::hang_up(master);
            }
        }
    }
}

/// The attachable containers of this process, by namespace, pod and container.
#[derive(Debug, Default)]
pub struct Attachments {
    runs: Mutex<HashMap<(String, String, String), Arc<ContainerIo>>>,
}

impl Attachments {
    /// The process' registry: every supervisor registers its containers'
    /// runs here and the streaming server looks them up.
    pub fn global() -> &'static Attachments {
        static ALL: OnceLock<Attachments> = OnceLock::new();
        ALL.get_or_init(Attachments::default)
    }

    /// Records a new run of a container (replacing the one before).
    pub(crate) fn insert(&self, namespace: &str, pod: &str, container: &str, io: Arc<ContainerIo>) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.retain(|_, io| !io.tap.is_closed());
            runs.insert((namespace.into(), pod.into(), container.into()), io);
        }
    }

    /// The current run of a container, if it was started here.
    pub fn get(&self, namespace: &str, pod: &str, container: &str) -> Option<Arc<ContainerIo>> {
        let runs = self.runs.lock().ok()?;
        runs.get(&(namespace.into(), pod.into(), container.into()))
            .cloned()
    }
}
