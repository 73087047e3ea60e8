//! The real kubectl, always bounded by a timeout.

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

use tempfile::TempDir;
use tokio::io::AsyncWriteExt as _;

/// The kubectl the tests use: the dispatcher, which runs the kubectl
/// matching the server's minor version.
pub const KUBECTL: &str = "/usr/bin/kubectl";

/// How long one kubectl run may take unless told otherwise.
const TIMEOUT: Duration = Duration::from_secs(60);

/// A kubectl pointed at one server.
///
/// Every run gets a fresh cache directory as its home, and no kubeconfig,
/// so runs neither share discovery nor read the user's configuration.
#[derive(Clone, Debug)]
pub struct Kubectl {
    program: PathBuf,
    server: String,
    timeout: Duration,
}

impl Kubectl {
    /// [`KUBECTL`] against `server` (`http://host:port`), bounded by a minute.
    pub fn new(server: &str) -> Self {
        Self {
            program: KUBECTL.into(),
            server: server.to_owned(),
            timeout: TIMEOUT,
        }
    }

    /// The same with another kubectl binary (a versioned one, run directly).
    pub fn program(mut self, program: &str) -> Self {
        self.program = program.into();
        self
    }

    /// The same with another bound on each run.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs `args` to completion and returns the output.
    ///
    /// # Panics
    ///
    /// When kubectl cannot start or does not finish within the timeout.
    pub async fn run(&self, args: &[&str]) -> Output {
        self.run_stdin(args, None).await
    }

    /// Runs `args` with `stdin` as its input (for `-f -`).
    ///
    /// # Panics
    ///
    /// As [`Kubectl::run`].
    pub async fn run_stdin(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = self.spawn(args, Stdio::piped(), Stdio::piped(), stdin.is_some());
        if let Some(input) = stdin {
            let mut pipe = child.child.stdin.take().expect("a stdin pipe");
            pipe.write_all(input.as_bytes())
                .await
                .expect("kubectl reads its input");
        }
        child.output().await
    }

    /// [`Kubectl::run`] for a test with no runtime.
    pub fn run_blocking(&self, args: &[&str]) -> Output {
        self.run_stdin_blocking(args, None)
    }

    /// [`Kubectl::run_stdin`] for a test with no runtime.
    pub fn run_stdin_blocking(&self, args: &[&str], stdin: Option<&str>) -> Output {
        crate::wait::current_thread().block_on(self.run_stdin(args, stdin))
    }

    /// `kubectl apply -f -` of `yaml`; its stdout.
    ///
    /// # Panics
    ///
    /// As [`Kubectl::run`], and when kubectl fails.
    pub async fn apply(&self, yaml: &str) -> String {
        ok(&self.run_stdin(&["apply", "-f", "-"], Some(yaml)).await)
    }

    /// Starts `args` without waiting, for a test that reads kubectl while it
    /// runs (`get -w`) or acts before it returns (`delete` that waits).
    ///
    /// # Panics
    ///
    /// When kubectl cannot start.
    pub fn start(&self, args: &[&str], stdout: Stdio, stderr: Stdio) -> KubectlChild {
        self.spawn(args, stdout, stderr, false)
    }

    fn spawn(&self, args: &[&str], stdout: Stdio, stderr: Stdio, stdin: bool) -> KubectlChild {
        let cache = tempfile::tempdir().expect("a cache directory");
        let child = tokio::process::Command::new(&self.program)
            .arg(format!("--server={}", self.server))
            .arg(format!("--cache-dir={}", cache.path().display()))
            .args(args)
            .env("HOME", cache.path())
            .env("KUBECONFIG", cache.path().join("none"))
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(stdout)
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", self.program.display()));
        KubectlChild {
            child,
            timeout: self.timeout,
            _cache: cache,
        }
    }
}

/// A running kubectl; killed when dropped.
#[derive(Debug)]
pub struct KubectlChild {
    /// The process, for its pipes.
    pub child: tokio::process::Child,
    timeout: Duration,
    _cache: TempDir,
}

impl KubectlChild {
    /// Waits for kubectl to finish and returns its output.
    ///
    /// # Panics
    ///
    /// When it does not finish within the runner's timeout.
    pub async fn output(self) -> Output {
        let timeout = self.timeout;
        let KubectlChild { child, _cache, .. } = self;
        tokio::time::timeout(timeout, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("kubectl did not finish within {timeout:?}"))
            .expect("kubectl's output")
    }

    /// Kills kubectl (for one that would run on, like `get -w`).
    ///
    /// # Errors
    ///
    /// When it cannot be signalled or reaped.
    pub async fn kill(&mut self) -> std::io::Result<()> {
        self.child.kill().await
    }
}

/// kubectl's stdout, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// kubectl's stderr, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts that kubectl succeeded and returns its stdout.
///
/// # Panics
///
/// When it failed, with its stderr and stdout.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "kubectl failed: {}\nstdout: {}",
        stderr(o),
        stdout(o)
    );
    stdout(o)
}
