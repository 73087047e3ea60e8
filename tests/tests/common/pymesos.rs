//! A pymesos script (PyPI's pymesos, JSON over HTTP) run against localmesos
//! (or another peer program, [`Script::spawn`]):
//! whether pymesos is installed (`.ci/install-pymesos.sh`; required under
//! `CI=true`, else skipped loudly), and the script's stdout read line by line.

use std::process::Stdio;
use std::time::Duration;

use testkit::ProcessGuard;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The interpreter: `$PYTHON`, else `python3`.
pub fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Whether pymesos can run. If not: a failure under `CI=true`, else `false`
/// after saying that `test` is skipped and why.
pub fn available_or_skip(test: &str) -> bool {
    let installed = std::process::Command::new(python())
        .args(["-c", "import pymesos, addict"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if installed {
        return true;
    }
    let msg = "pymesos is not installed (run .ci/install-pymesos.sh)";
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{msg}: required in CI"
    );
    eprintln!("\n!!!!!!!! SKIPPED {test}: {msg} !!!!!!!!\n");
    false
}

/// A script of `tests/tests/` running (its process group ended when this is
/// dropped), its stdout read line by line and its stderr collected.
pub struct Script {
    child: ProcessGuard<Child>,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    stderr: tokio::task::JoinHandle<String>,
    /// Every stdout line read so far.
    pub seen: Vec<String>,
}

impl Script {
    /// Starts `tests/tests/<name>` with `args`.
    pub fn start(name: &str, args: &[String]) -> Script {
        let path = format!("{}/tests/{name}", env!("CARGO_MANIFEST_DIR"));
        Script::spawn(tokio::process::Command::new(python()).arg(path).args(args))
    }

    /// Starts `command` (any peer program, not only a Python script) with
    /// piped stdio.
    pub fn spawn(command: &mut tokio::process::Command) -> Script {
        let mut child = ProcessGuard::spawn(
            command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .unwrap();
        let stdin = child.stdin.take();
        let mut stderr_pipe = child.stderr.take().unwrap();
        let stderr = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text).await;
            text
        });
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Script {
            child,
            stdin,
            lines,
            stderr,
            seen: Vec::new(),
        }
    }

    /// Reads lines until `verdict` gives one for a line (`Some(true)`: done,
    /// `Some(false)`: failed), stdout ends, or `within` passes (`false`).
    pub async fn until(
        &mut self,
        within: Duration,
        verdict: impl Fn(&str) -> Option<bool>,
    ) -> bool {
        let (lines, seen) = (&mut self.lines, &mut self.seen);
        tokio::time::timeout(within, async {
            while let Ok(Some(line)) = lines.next_line().await {
                let v = verdict(&line);
                seen.push(line);
                if let Some(v) = v {
                    return v;
                }
            }
            false
        })
        .await
        .unwrap_or(false)
    }

    /// Closes its stdin (the scripts' signal to stop), reads the rest of its
    /// stdout and waits (at most 30 s) for it to exit: its status, the
    /// lines after those already seen, and its stderr.
    pub async fn finish(mut self) -> (std::process::ExitStatus, Vec<String>, String) {
        drop(self.stdin.take());
        let (lines, child) = (&mut self.lines, &mut self.child);
        let (rest, status) = tokio::time::timeout(Duration::from_secs(30), async {
            let mut rest = Vec::new();
            while let Ok(Some(line)) = lines.next_line().await {
                rest.push(line);
            }
            (rest, child.wait().await)
        })
        .await
        .expect("the peer exits once told to");
        (status.unwrap(), rest, self.stderr.await.unwrap_or_default())
    }
}
