//! Copies a run's output (two pipes, and a tty's master once it comes) into
//! its log file, line by line.

use std::path::PathBuf;
use std::time::SystemTime;

use bytes::Bytes;
use tokio::io::AsyncReadExt as _;
use tokio::net::unix::pipe::Receiver;
use tokio::sync::{broadcast, oneshot};

use super::cri::{self, MAX_LINE, Splitter, Stream};
use super::rotate::RotatingFile;

/// What one run writes to.
pub(super) struct Sources {
    pub(super) out: Receiver,
    pub(super) err: Receiver,
    /// A `tty: true` run's terminal master, once the runtime handed it over
    /// ([`super::console::Console`]); its output is `stdout`.
    pub(super) terminal: Option<oneshot::Receiver<Receiver>>,
}

/// Runs until every source reaches end of file (every writer is gone; a
/// terminal's master reads EIO then) and no terminal is still to come.
pub(super) async fn run(
    sources: Sources,
    mut file: RotatingFile,
    tap: broadcast::Sender<(Stream, Bytes)>,
    path: PathBuf,
) {
    let Sources {
        mut out,
        mut err,
        mut terminal,
    } = sources;
    let mut master: Option<Receiver> = None;
    let (mut out_buf, mut err_buf) = (vec![0u8; MAX_LINE], vec![0u8; MAX_LINE]);
    let mut tty_buf = vec![0u8; MAX_LINE];
    let (mut out_split, mut err_split) =
        (Splitter::new(Stream::Stdout), Splitter::new(Stream::Stderr));
    let mut tty_split = Splitter::new(Stream::Stdout);
    let (mut out_open, mut err_open) = (true, true);
    let mut failed = false;
    let mut lines = Vec::with_capacity(2 * MAX_LINE);
    while out_open || err_open || terminal.is_some() || master.is_some() {
        // Which source: 0 stdout, 1 stderr, 2 the terminal.
        let (read, which) = tokio::select! {
            r = out.read(&mut out_buf), if out_open => (r, 0),
            r = err.read(&mut err_buf), if err_open => (r, 1),
            r = async { master.as_mut()?.read(&mut tty_buf).await.ok() }, if master.is_some() => {
                (r.ok_or_else(|| std::io::Error::other("terminal closed")), 2)
            }
            m = async { terminal.as_mut()?.await.ok() }, if terminal.is_some() => {
                terminal = None;
                master = m;
                continue;
            }
        };
        let now = SystemTime::now();
        let at = cri::format_time(now);
        let (split, buf, stream) = match which {
            0 => (&mut out_split, &out_buf, Stream::Stdout),
            1 => (&mut err_split, &err_buf, Stream::Stderr),
            _ => (&mut tty_split, &tty_buf, Stream::Stdout),
        };
        lines.clear();
        match read {
            Ok(0) | Err(_) => {
                match which {
                    0 => out_open = false,
                    1 => err_open = false,
                    _ => master = None,
                }
                split.finish(&at, &mut lines);
            }
            Ok(n) => {
                split.feed(&buf[..n], &at, &mut lines);
                // The registry's own receiver is one; more are attachers.
                if tap.receiver_count() > 1 {
                    let _ = tap.send((stream, Bytes::copy_from_slice(&buf[..n])));
                }
            }
        }
        // A plain write: the log is local and the pipe waits meanwhile,
        // which is the backpressure. A failing disk drops output rather
        // than blocking the container forever.
        if let Err(e) = file.write(&lines, now)
            && !failed
        {
            failed = true;
            tracing::warn!(path = %path.display(), error = %e, "cannot write a container log; its output is dropped");
        }
    }
}
