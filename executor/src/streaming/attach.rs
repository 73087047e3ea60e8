//! `attach`: joins a running container's own stdio, as kubelet does.
//!
//! Output comes from the container's live tap ([`crate::logs::attach_io`]):
//! what it writes from the moment of attaching, stdout on channel 1 and
//! stderr on 2 as asked. Sending waits for the shim (bounded frames), and a
//! client so slow that the tap runs over skips output rather than holding
//! the container back. Stdin frames go to the container's stdin when it has
//! one (`stdin: true`); with `stdinOnce` the container's stdin closes when
//! this client sends its end or goes. When the container's output ends the
//! stream ends with a `Success` status, as kubelet's.
//!
//! A `tty: true` container's output is its terminal's, all on stdout;
//! stdin frames are typed at the terminal and resize frames (channel 4) set
//! its size.

use tokio::sync::broadcast::error::RecvError;

use super::{Channels, Frame, OpRequest, Stdio, StreamContext, StreamError, channel};
use crate::logs::attach_io::{Attachments, ContainerIo};
use crate::logs::cri::Stream;

/// The `Status` that ends a stream whose container ended.
const SUCCESS: &str = r#"{"metadata":{},"status":"Success"}"#;

/// Serves an [`OpRequest::Attach`].
///
/// # Errors
///
/// Not found when the container does not run here; bad request for another
/// operation or a tty the container does not have.
pub async fn serve(
    _ctx: &StreamContext,
    req: OpRequest,
    channels: Channels,
) -> Result<(), StreamError> {
    let (io, stdio) = open(&req)?;
    attach(&io, stdio, channels).await
}

/// The container an attach request names, and the stdio it asks for.
fn open(req: &OpRequest) -> Result<(std::sync::Arc<ContainerIo>, Stdio), StreamError> {
    let OpRequest::Attach {
        namespace,
        pod,
        container,
        stdio,
    } = req
    else {
        return Err(StreamError::BadRequest("not an attach request".into()));
    };
    let io = Attachments::global()
        .get(namespace, pod, container)
        .ok_or_else(|| {
            StreamError::NotFound(format!(
                "container {container} is not running in pod {namespace}/{pod}"
            ))
        })?;
    if stdio.tty && !io.has_terminal() {
        return Err(StreamError::BadRequest(format!(
            "tty is not enabled for container {container}"
        )));
    }
    Ok((io, *stdio))
}

/// Relays one attached client's frames to and from `io` until the container's
/// output ends or the client goes.
///
/// # Errors
///
/// None today: a stream that cannot be served further just ends.
pub async fn attach(
    io: &ContainerIo,
    stdio: Stdio,
    mut channels: Channels,
) -> Result<(), StreamError> {
    let mut tap = io.subscribe();
    let uses_stdin = stdio.stdin && io.stdin_open().await;
    let mut stdin_live = uses_stdin;
    loop {
        tokio::select! {
            out = tap.recv() => match out {
                Ok((stream, data)) => {
                    let (ch, wanted) = match stream {
                        Stream::Stdout => (channel::STDOUT, stdio.stdout),
                        Stream::Stderr => (channel::STDERR, stdio.stderr),
                    };
                    if wanted && channels.tx.send(Frame::new(ch, data)).await.is_err() {
                        break;
                    }
                }
                Err(RecvError::Lagged(skipped)) => {
                    tracing::debug!(skipped, "an attached client fell behind; output skipped");
                }
                Err(RecvError::Closed) => {
                    let _ = channels.tx.send(Frame::new(channel::ERROR, SUCCESS)).await;
                    break;
                }
            },
            frame = channels.rx.recv() => match frame {
                None => break,
                Some(f) if f.channel == channel::STDIN && stdin_live => {
                    stdin_live = io.write_stdin(&f.data).await;
                }
                Some(f) if f.channel == channel::CLOSE && f.data.first() == Some(&channel::STDIN) => {
                    if stdin_live {
                        stdin_live = false;
                        io.stdin_session_ended().await;
                    }
                }
                Some(f) if f.channel == channel::RESIZE => {
                    if let Some((w, h)) = super::exec::parse_resize(&f.data) {
                        io.resize(w, h);
                    }
                }
                // Stdin the container does not take.
                Some(_) => {}
            },
        }
    }
    if uses_stdin {
        io.stdin_session_ended().await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use bytes::Bytes;
    use std::io::Read as _;
    use tokio::sync::broadcast;

    fn io_with_stdin(
        once: bool,
    ) -> (
        ContainerIo,
        broadcast::Sender<(Stream, Bytes)>,
        std::io::PipeReader,
    ) {
        let (tap, template) = broadcast::channel(4);
        let (r, w) = std::io::pipe().unwrap();
        let w = tokio::net::unix::pipe::Sender::from_owned_fd(w.into()).unwrap();
        (ContainerIo::new(template, Some(w), once), tap, r)
    }

    fn all() -> Stdio {
        Stdio {
            stdin: true,
            stdout: true,
            stderr: true,
            tty: false,
        }
    }

    #[tokio::test]
    async fn output_is_relayed_by_stream_and_the_end_is_a_success_status() {
        let (io, tap, _stdin) = io_with_stdin(false);
        let (ours, mut theirs) = Channels::pair();
        let only_out = Stdio {
            stderr: false,
            ..all()
        };
        let task = tokio::spawn(async move { attach(&io, only_out, ours).await });
        // Wait for the subscription before sending, as the pump does.
        while tap.receiver_count() < 2 {
            tokio::task::yield_now().await;
        }
        tap.send((Stream::Stderr, Bytes::from_static(b"err\n")))
            .unwrap();
        tap.send((Stream::Stdout, Bytes::from_static(b"out\n")))
            .unwrap();
        drop(tap);
        let first = theirs.rx.recv().await.unwrap();
        assert_eq!(first, Frame::new(channel::STDOUT, &b"out\n"[..]));
        let status = theirs.rx.recv().await.unwrap();
        assert_eq!(status.channel, channel::ERROR);
        assert_eq!(status.data, SUCCESS.as_bytes());
        task.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn stdin_reaches_the_container_and_stdin_once_closes_it_after_the_client() {
        let (io, _tap, mut stdin) = io_with_stdin(true);
        let io = std::sync::Arc::new(io);
        let (ours, theirs) = Channels::pair();
        let session = {
            let io = io.clone();
            tokio::spawn(async move { attach(&io, all(), ours).await })
        };
        theirs
            .tx
            .send(Frame::new(channel::STDIN, &b"hello\n"[..]))
            .await
            .unwrap();
        theirs
            .tx
            .send(Frame::new(channel::CLOSE, vec![channel::STDIN]))
            .await
            .unwrap();
        drop(theirs);
        session.await.unwrap().unwrap();
        assert!(
            !io.stdin_open().await,
            "stdinOnce: closed after the first client"
        );
        // The container reads what was sent, then end of file.
        let mut got = String::new();
        stdin.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hello\n");
    }

    #[tokio::test]
    async fn without_stdin_once_stdin_stays_open_for_the_next_client() {
        let (io, _tap, _stdin) = io_with_stdin(false);
        let (ours, theirs) = Channels::pair();
        drop(theirs);
        attach(&io, all(), ours).await.unwrap();
        assert!(io.stdin_open().await);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_terminal_takes_stdin_and_resizes_and_stdin_once_hangs_it_up() {
        use std::io::{BufRead as _, BufReader};
        let (_tap, template) = broadcast::channel(4);
        let io = std::sync::Arc::new(ContainerIo::new(template, None, true));
        let pty = crate::oci::exec::Pty::open().unwrap();
        let slave = pty.slave().unwrap();
        let master = std::os::fd::OwnedFd::from(pty.file().unwrap());
        let writer =
            tokio::net::unix::pipe::Sender::from_owned_fd_unchecked(master.try_clone().unwrap())
                .unwrap();
        io.set_terminal(master, Some(writer)).await;
        assert!(io.has_terminal() && io.stdin_open().await);
        let (ours, theirs) = Channels::pair();
        let tty = Stdio { tty: true, ..all() };
        let session = {
            let io = io.clone();
            tokio::spawn(async move { attach(&io, tty, ours).await })
        };
        let resize = Frame::new(channel::RESIZE, &br#"{"Width":132,"Height":43}"#[..]);
        theirs.tx.send(resize).await.unwrap();
        theirs
            .tx
            .send(Frame::new(channel::STDIN, &b"typed\n"[..]))
            .await
            .unwrap();
        // The terminal's line discipline hands the slave the line typed.
        let reader = std::fs::File::from(slave.try_clone().unwrap());
        let line = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            BufReader::new(reader).read_line(&mut line).unwrap();
            line
        })
        .await
        .unwrap();
        assert_eq!(line, "typed\n");
        let size = rustix::termios::tcgetwinsize(&slave).unwrap();
        assert_eq!((size.ws_col, size.ws_row), (132, 43));
        drop(theirs);
        session.await.unwrap().unwrap();
        assert!(!io.stdin_open().await, "stdinOnce: closed after the client");
    }

    #[test]
    fn a_container_not_running_here_is_not_found() {
        let req = OpRequest::Attach {
            namespace: "ns".into(),
            pod: "nowhere".into(),
            container: "c".into(),
            stdio: all(),
        };
        let err = open(&req).unwrap_err();
        assert!(matches!(err, StreamError::NotFound(_)), "{err}");
        let exec = OpRequest::PortForward {
            namespace: "ns".into(),
            pod: "p".into(),
            port: 80,
        };
        assert!(matches!(open(&exec), Err(StreamError::BadRequest(_))));
    }
}
