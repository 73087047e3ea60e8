//! `exec` probes: run a command in the container to completion within the
//! timeout; exit 0 succeeds, otherwise the combined output is the message.
//!
//! [`ProbeExec`] is the one thing a probe needs of a runtime. Process mode
//! implements it here ([`ProcessExec`]: a host process with the
//! container's environment and working directory); containers implement
//! it over the runtime's exec ([`crate::oci`]).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::AsyncReadExt;

use super::{MAX_OUTPUT, Outcome};

/// How a command run to completion ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecResult {
    /// It exited with this code; stdout and stderr interleaved, at most
    /// [`MAX_OUTPUT`] bytes.
    Exited {
        /// The exit code.
        code: i32,
        /// The combined output.
        output: Vec<u8>,
    },
    /// It was still running at the timeout (and was killed).
    TimedOut,
}

/// Runs a command inside a container, to completion.
pub trait ProbeExec: Send + Sync {
    /// Runs `command` (not through a shell) for at most `timeout`. `Err`
    /// is a prober error (the command could not be started at all).
    fn exec<'a>(
        &'a self,
        command: &'a [String],
        timeout: Duration,
    ) -> BoxFuture<'a, Result<ExecResult, String>>;
}

/// One exec attempt in kubelet's terms.
pub async fn probe(exec: &dyn ProbeExec, command: &[String], timeout: Duration) -> Outcome {
    match exec.exec(command, timeout).await {
        Ok(ExecResult::Exited { code: 0, .. }) => Outcome::Success,
        Ok(ExecResult::Exited { output, .. }) => {
            Outcome::Failure(String::from_utf8_lossy(&output).into_owned())
        }
        Ok(ExecResult::TimedOut) => {
            Outcome::Failure(format!("command {:?} timed out", command.join(" ")))
        }
        Err(e) => Outcome::Error(e),
    }
}

/// Process mode: the command runs on the host, as the container's own
/// process does, with its environment and working directory.
#[derive(Debug, Clone)]
pub struct ProcessExec {
    /// The container's environment (what `process::spawn` gives it).
    pub env: Vec<(String, String)>,
    /// Its working directory.
    pub workdir: PathBuf,
}

impl ProcessExec {
    /// What `process::spawn` gives the container in `dir`: its `PATH`,
    /// `HOME`, `HOSTNAME` and environment, and its working directory.
    pub(crate) fn for_container(
        plan: &crate::pod::ContainerPlan,
        dir: &std::path::Path,
        hostname: &str,
        env: &[(String, String)],
    ) -> ProcessExec {
        let mut all = vec![
            (
                "PATH".to_owned(),
                crate::process::path().to_string_lossy().into_owned(),
            ),
            ("HOME".to_owned(), dir.to_string_lossy().into_owned()),
            ("HOSTNAME".to_owned(), hostname.to_owned()),
        ];
        all.extend(env.iter().cloned());
        ProcessExec {
            env: all,
            workdir: crate::process::workdir(plan, dir),
        }
    }
}

impl ProbeExec for ProcessExec {
    fn exec<'a>(
        &'a self,
        command: &'a [String],
        timeout: Duration,
    ) -> BoxFuture<'a, Result<ExecResult, String>> {
        Box::pin(async move {
            let Some((program, args)) = command.split_first() else {
                return Err("exec probe has no command".into());
            };
            let (reader, writer) = std::io::pipe().map_err(|e| e.to_string())?;
            let err_writer = writer.try_clone().map_err(|e| e.to_string())?;
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args)
                .env_clear()
                .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .current_dir(&self.workdir)
                .stdin(Stdio::null())
                .stdout(writer)
                .stderr(err_writer)
                .process_group(0)
                .kill_on_drop(true);
            let mut child = cmd
                .spawn()
                .map_err(|e| format!("cannot run {program:?}: {e}"))?;
            // The write ends now live only in the child: EOF comes when it exits.
            drop(cmd);
            let pgid = child.id();
            let reader = std::os::fd::OwnedFd::from(reader);
            let mut reader = tokio::fs::File::from_std(std::fs::File::from(reader));
            let run = async {
                let mut output = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    match reader.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) if output.len() < MAX_OUTPUT => output.extend_from_slice(&chunk[..n]),
                        Ok(_) => {}
                    }
                }
                output.truncate(MAX_OUTPUT);
                let status = child.wait().await;
                (status, output)
            };
            match tokio::time::timeout(timeout, run).await {
                Ok((Ok(status), output)) => Ok(ExecResult::Exited {
                    code: crate::process::exit_code(status),
                    output,
                }),
                Ok((Err(e), _)) => Err(format!("cannot wait for {program:?}: {e}")),
                Err(_) => {
                    // The command and whatever it started go, as kubelet's runtime kills them.
                    if let Some(pgid) = pgid {
                        crate::process::signal_group(pgid, crate::process::KILL);
                    }
                    Ok(ExecResult::TimedOut)
                }
            }
        })
    }
}

/// A runtime without exec: every attempt is a prober error, which kubelet
/// discards (the container keeps its last result), with the reason in the
/// event.
#[derive(Debug, Clone)]
pub struct NoExec(pub String);

impl ProbeExec for NoExec {
    fn exec<'a>(
        &'a self,
        _command: &'a [String],
        _timeout: Duration,
    ) -> BoxFuture<'a, Result<ExecResult, String>> {
        Box::pin(async move { Err(self.0.clone()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), script.into()]
    }

    fn local() -> ProcessExec {
        ProcessExec {
            env: vec![
                ("PATH".into(), "/usr/bin:/bin".into()),
                ("WHO".into(), "probe".into()),
            ],
            workdir: std::env::temp_dir(),
        }
    }

    #[tokio::test]
    async fn exit_zero_passes_and_otherwise_the_output_is_the_message() {
        let t = Duration::from_secs(5);
        assert_eq!(probe(&local(), &sh("exit 0"), t).await, Outcome::Success);
        assert_eq!(
            probe(&local(), &sh("echo out $WHO; echo err >&2; exit 1"), t).await,
            Outcome::Failure("out probe\nerr\n".into())
        );
        assert_eq!(
            probe(&local(), &sh("sleep 5"), Duration::from_millis(200)).await,
            Outcome::Failure("command \"sh -c sleep 5\" timed out".into())
        );
        assert!(matches!(
            probe(&local(), &["/nonexistent/x".to_owned()], t).await,
            Outcome::Error(_)
        ));
    }
}
