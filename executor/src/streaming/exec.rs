//! `exec`: runs a command in a container and relays its stdio as frames, ending with the
//! outcome on the error channel as kubelet words it.

use bytes::Bytes;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;

use super::{Channels, Frame, OpRequest, StreamContext, StreamError, channel};
use crate::oci::exec::{ExecProcess, Pty};

/// How much of the command's output one frame carries.
const FRAME_BYTES: usize = 32 * 1024;

/// Runs the exec `req` names over `channels`. Output frames wait for room in the
/// bounded channel, so a slow reader slows the command down instead of filling memory.
///
/// # Errors
/// The request is not an exec, the container is not running here, or the command could
/// not be started (nothing was sent then).
pub async fn serve(
    ctx: &StreamContext,
    req: OpRequest,
    channels: Channels,
) -> Result<(), StreamError> {
    let OpRequest::Exec {
        namespace,
        pod,
        container,
        command,
        stdio,
    } = req
    else {
        return Err(StreamError::BadRequest("not an exec request".into()));
    };
    if command.is_empty() {
        return Err(StreamError::BadRequest(
            "you must specify at least 1 command".into(),
        ));
    }
    let target = ctx.pods.container(&namespace, &pod, &container)?;
    let mut process = ctx
        .exec
        .spawn(&target.exec_target(), &command, stdio.stdin, stdio.tty)
        .map_err(|e| StreamError::Internal(e.to_string()))?;
    let Channels { tx, rx } = channels;
    let outputs = relay_output(&mut process, &tx, stdio.stdout, stdio.stderr)?;
    let input = relay_input(process.child.stdin.take(), process.pty.take(), rx);
    let exit = tokio::select! {
        status = process.child.wait() => status.map(crate::process::exit_code).ok(),
        // The shim hung up: dropping the child kills the exec.
        () = input => None,
    };
    let Some(code) = exit else {
        return Ok(());
    };
    for o in outputs {
        let _ = o.await;
    }
    let _ = tx
        .send(Frame::new(channel::ERROR, exit_status(&command, code)))
        .await;
    Ok(())
}

/// kubelet's outcome of an exec: Success, or `NonZeroExitCode` with the code as the
/// `ExitCode` cause, which kubectl turns into its own exit code.
pub fn exit_status(command: &[String], code: i32) -> Bytes {
    let v = if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({
            "metadata": {},
            "status": "Failure",
            "message": format!(
                "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
                command.join(" ")
            ),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        })
    };
    Bytes::from(v.to_string())
}

type Join = tokio::task::JoinHandle<()>;

/// Starts the tasks that copy the command's output into frames; they end at EOF.
fn relay_output(
    p: &mut ExecProcess,
    tx: &mpsc::Sender<Frame>,
    stdout: bool,
    stderr: bool,
) -> Result<Vec<Join>, StreamError> {
    let mut joins = Vec::new();
    if let Some(pty) = &p.pty {
        let file = pty
            .file()
            .map_err(|e| StreamError::Internal(format!("pty: {e}")))?;
        let tx = tx.clone();
        joins.push(tokio::task::spawn_blocking(move || {
            pump_blocking(file, &tx, stdout.then_some(channel::STDOUT));
        }));
        return Ok(joins);
    }
    if let Some(out) = p.child.stdout.take() {
        joins.push(tokio::spawn(pump(
            out,
            tx.clone(),
            stdout.then_some(channel::STDOUT),
        )));
    }
    if let Some(err) = p.child.stderr.take() {
        joins.push(tokio::spawn(pump(
            err,
            tx.clone(),
            stderr.then_some(channel::STDERR),
        )));
    }
    Ok(joins)
}

/// Copies `r` into frames on `ch` (read and dropped when the client did not ask for it,
/// so the command never blocks on a full pipe).
async fn pump(mut r: impl AsyncRead + Unpin, tx: mpsc::Sender<Frame>, ch: Option<u8>) {
    let mut buf = vec![0u8; FRAME_BYTES];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Some(ch) = ch
                    && tx
                        .send(Frame::new(ch, Bytes::copy_from_slice(&buf[..n])))
                        .await
                        .is_err()
                {
                    return;
                }
            }
        }
    }
}

/// [`pump`] for a pty master, which is read blocking (it ends with EIO once the
/// command and its children closed the terminal).
fn pump_blocking(mut f: std::fs::File, tx: &mpsc::Sender<Frame>, ch: Option<u8>) {
    use std::io::Read as _;
    let mut buf = vec![0u8; FRAME_BYTES];
    loop {
        match f.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Some(ch) = ch
                    && tx
                        .blocking_send(Frame::new(ch, Bytes::copy_from_slice(&buf[..n])))
                        .is_err()
                {
                    return;
                }
            }
        }
    }
}

/// Feeds stdin and resizes until the shim hangs up (then resolves). stdin's close
/// frame (or, without v5's close frames, nothing: the hang-up) closes its pipe.
async fn relay_input(
    mut stdin: Option<tokio::process::ChildStdin>,
    pty: Option<Pty>,
    mut rx: mpsc::Receiver<Frame>,
) {
    let pty_in = pty.as_ref().and_then(|pty| pty.file().ok());
    let (pty_tx, pty_rx) = std::sync::mpsc::channel::<Bytes>();
    let writer = pty_in.map(|f| tokio::task::spawn_blocking(move || write_pty(f, &pty_rx)));
    while let Some(frame) = rx.recv().await {
        match frame.channel {
            channel::STDIN => {
                if writer.is_some() {
                    let _ = pty_tx.send(frame.data);
                } else if let Some(w) = stdin.as_mut()
                    && w.write_all(&frame.data).await.is_err()
                {
                    stdin = None;
                }
            }
            channel::RESIZE => {
                if let (Some(pty), Some((w, h))) = (&pty, parse_resize(&frame.data)) {
                    pty.resize(w, h);
                }
            }
            channel::CLOSE if frame.data.first() == Some(&channel::STDIN) => stdin = None,
            _ => {}
        }
    }
    drop(pty_tx);
}

fn write_pty(mut f: std::fs::File, rx: &std::sync::mpsc::Receiver<Bytes>) {
    use std::io::Write as _;
    while let Ok(data) = rx.recv() {
        if f.write_all(&data).is_err() {
            return;
        }
    }
}

/// `{"Width":W,"Height":H}`.
pub(super) fn parse_resize(data: &[u8]) -> Option<(u16, u16)> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Size {
        width: u16,
        height: u16,
    }
    let s: Size = serde_json::from_slice(data).ok()?;
    Some((s.width, s.height))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use super::*;
    use crate::oci::ContainerSettings;
    use crate::oci::exec::ContainerExec;
    use crate::streaming::{ContainerRef, PodDirectory, Stdio};

    struct Here(std::path::PathBuf);

    impl PodDirectory for Here {
        fn container(&self, _: &str, _: &str, c: &str) -> Result<ContainerRef, StreamError> {
            if c != "app" {
                return Err(StreamError::NotFound(format!("no container {c}")));
            }
            Ok(ContainerRef {
                id: None,
                bundle: None,
                pid: None,
                dir: self.0.clone(),
            })
        }
    }

    fn ctx() -> StreamContext {
        let dir = std::env::temp_dir();
        StreamContext {
            pods: Arc::new(Here(dir.clone())),
            exec: Arc::new(ContainerExec::new(&ContainerSettings::default(), &dir)),
        }
    }

    fn exec(command: &[&str], stdio: Stdio) -> OpRequest {
        OpRequest::Exec {
            namespace: "default".into(),
            pod: "p".into(),
            container: "app".into(),
            command: command.iter().map(|s| s.to_string()).collect(),
            stdio,
        }
    }

    const PIPES: Stdio = Stdio {
        stdin: true,
        stdout: true,
        stderr: true,
        tty: false,
    };

    /// Runs `req`, sending `input` first; returns every frame received.
    async fn run(req: OpRequest, input: Vec<Frame>) -> Vec<Frame> {
        let (ours, theirs) = Channels::pair();
        let ctx = ctx();
        let server = tokio::spawn(async move { serve(&ctx, req, theirs).await });
        for f in input {
            ours.tx.send(f).await.unwrap();
        }
        let Channels { tx, mut rx } = ours;
        let mut got = Vec::new();
        while let Some(f) = rx.recv().await {
            let last = f.channel == channel::ERROR;
            got.push(f);
            if last {
                break;
            }
        }
        drop(tx);
        server.await.unwrap().unwrap();
        got
    }

    fn text(frames: &[Frame], ch: u8) -> String {
        frames
            .iter()
            .filter(|f| f.channel == ch)
            .map(|f| String::from_utf8_lossy(&f.data).into_owned())
            .collect()
    }

    #[tokio::test]
    async fn output_and_a_nonzero_exit_code_arrive_as_kubelet_sends_them() {
        let got = run(
            exec(&["sh", "-c", "echo hi; echo err >&2; exit 3"], PIPES),
            vec![Frame::new(channel::CLOSE, vec![channel::STDIN])],
        )
        .await;
        assert_eq!(text(&got, channel::STDOUT), "hi\n");
        assert_eq!(text(&got, channel::STDERR), "err\n");
        let status: serde_json::Value = serde_json::from_slice(&got.last().unwrap().data).unwrap();
        assert_eq!(status["reason"], "NonZeroExitCode");
        assert_eq!(status["details"]["causes"][0]["reason"], "ExitCode");
        assert_eq!(status["details"]["causes"][0]["message"], "3");
    }

    #[tokio::test]
    async fn stdin_reaches_the_command_until_its_close_frame() {
        let got = run(
            exec(&["sh", "-c", "tr a-z A-Z"], PIPES),
            vec![
                Frame::new(channel::STDIN, &b"hello "[..]),
                Frame::new(channel::STDIN, &b"world\n"[..]),
                Frame::new(channel::CLOSE, vec![channel::STDIN]),
            ],
        )
        .await;
        assert_eq!(text(&got, channel::STDOUT), "HELLO WORLD\n");
        let status: serde_json::Value = serde_json::from_slice(&got.last().unwrap().data).unwrap();
        assert_eq!(status["status"], "Success");
    }

    #[tokio::test]
    async fn a_tty_exec_is_resized_and_reads_its_input_from_the_terminal() {
        let tty = Stdio {
            stdin: true,
            stdout: true,
            stderr: false,
            tty: true,
        };
        let got = run(
            exec(&["sh", "-c", "read line; stty size; echo got $line"], tty),
            vec![
                Frame::new(channel::RESIZE, &br#"{"Width":120,"Height":33}"#[..]),
                Frame::new(channel::STDIN, &b"x\n"[..]),
            ],
        )
        .await;
        let out = text(&got, channel::STDOUT);
        assert!(out.contains("33 120"), "{out:?}");
        assert!(out.contains("got x"), "{out:?}");
    }

    #[tokio::test]
    async fn an_unknown_container_is_refused_before_anything_runs() {
        let (_ours, theirs) = Channels::pair();
        let mut req = exec(&["true"], PIPES);
        if let OpRequest::Exec { container, .. } = &mut req {
            *container = "nope".into();
        }
        let err = serve(&ctx(), req, theirs).await.unwrap_err();
        assert!(matches!(err, StreamError::NotFound(_)));
    }
}
