//! Copies a run's two output pipes into its log file, line by line.

use std::path::PathBuf;
use std::time::SystemTime;

use bytes::Bytes;
use tokio::io::AsyncReadExt as _;
use tokio::net::unix::pipe::Receiver;
use tokio::sync::broadcast;

use super::cri::{self, MAX_LINE, Splitter, Stream};
use super::rotate::RotatingFile;

/// Runs until both pipes reach end of file (every writer is gone).
pub(super) async fn run(
    mut out: Receiver,
    mut err: Receiver,
    mut file: RotatingFile,
    tap: broadcast::Sender<(Stream, Bytes)>,
    path: PathBuf,
) {
    let (mut out_buf, mut err_buf) = (vec![0u8; MAX_LINE], vec![0u8; MAX_LINE]);
    let (mut out_split, mut err_split) =
        (Splitter::new(Stream::Stdout), Splitter::new(Stream::Stderr));
    let (mut out_open, mut err_open) = (true, true);
    let mut failed = false;
    let mut lines = Vec::with_capacity(2 * MAX_LINE);
    while out_open || err_open {
        let (read, stream) = tokio::select! {
            r = out.read(&mut out_buf), if out_open => (r, Stream::Stdout),
            r = err.read(&mut err_buf), if err_open => (r, Stream::Stderr),
        };
        let now = SystemTime::now();
        let at = cri::format_time(now);
        let (split, buf, open) = match stream {
            Stream::Stdout => (&mut out_split, &out_buf, &mut out_open),
            Stream::Stderr => (&mut err_split, &err_buf, &mut err_open),
        };
        lines.clear();
        match read {
            Ok(0) | Err(_) => {
                *open = false;
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
