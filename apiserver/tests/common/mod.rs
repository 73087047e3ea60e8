//! Shared by the end-to-end tests: an in-process server on 127.0.0.1:0 with the durable
//! store in a temporary directory, a test log source, and a real kubectl runner.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use apiserver::{Api, LogError, LogRequest, LogSource, SystemClock};
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::oneshot;

/// The dispatcher, which runs kubectl.1.<server minor>.
pub const KUBECTL: &str = "/usr/bin/kubectl";
/// An older and the matching kubectl, run directly.
pub const KUBECTL_131: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.31";
pub const KUBECTL_133: &str = "/usr/lib/google-cloud-sdk/bin/kubectl.1.33";

/// Every kubectl the tests exercise.
pub const ALL_KUBECTLS: [&str; 3] = [KUBECTL, KUBECTL_131, KUBECTL_133];

/// Serves "line 1".."line N" for every container; follow adds two more lines later.
pub struct TestLogs;

pub const LOG_LINES: usize = 5;

impl LogSource for TestLogs {
    fn logs(&self, req: LogRequest) -> apiserver::logs::LogFuture<'_> {
        Box::pin(async move {
            if req.container == "not-started" {
                return Err(LogError::NotReady(format!(
                    "container \"{}\" in pod \"{}\" is waiting to start: ContainerCreating",
                    req.container, req.name
                )));
            }
            let mut lines: Vec<String> = (1..=LOG_LINES)
                .map(|i| format!("{} line {i}\n", req.container))
                .collect();
            if let Some(n) = req.tail_lines {
                let n = usize::try_from(n).unwrap_or(0);
                lines = lines.split_off(lines.len().saturating_sub(n));
            }
            let first = futures::stream::iter(lines.into_iter().map(|l| Ok(Bytes::from(l))));
            if req.follow {
                let later =
                    futures::stream::iter(["followed 1\n", "followed 2\n"]).then(|l| async move {
                        tokio::task::yield_now().await;
                        Ok(Bytes::from(l))
                    });
                Ok(first.chain(later).boxed())
            } else {
                Ok(first.boxed())
            }
        })
    }
}

pub struct Server {
    pub api: Api,
    pub url: String,
    pub dir: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    /// A server on a fresh data directory.
    pub async fn start() -> Server {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let mut s = Self::start_on(&dir).await;
        s._tmp = Some(tmp);
        s
    }

    /// A server on `dir` (reopened if it holds a store).
    pub async fn start_on(dir: &Path) -> Server {
        let store = apiserver::store::RedbStore::open(dir).unwrap();
        let api = Api::start(Arc::new(store), Arc::new(SystemClock), Arc::new(TestLogs))
            .await
            .unwrap();
        let mut s = Self::serve(api).await;
        s.dir = dir.to_path_buf();
        s
    }

    /// A server for an API built by the test.
    pub async fn serve(api: Api) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(apiserver::serve_with_shutdown(
            listener,
            api.clone(),
            async move {
                let _ = rx.await;
            },
        ));
        Server {
            api,
            url,
            dir: PathBuf::new(),
            shutdown: Some(tx),
            task: Some(task),
            _tmp: None,
        }
    }

    /// Stops serving and releases the store (the data directory stays while `self` lives
    /// on in the returned tempdir, if any).
    pub async fn stop(mut self) -> Option<tempfile::TempDir> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(20), task)
                .await
                .unwrap()
                .unwrap()
                .unwrap();
        }
        self._tmp.take()
    }
}

/// The kubectl command line with the server and a fresh cache directory.
pub fn command(kubectl: &str, server: &str, args: &[&str]) -> tokio::process::Command {
    let cache = tempfile::tempdir().unwrap().keep();
    let mut cmd = tokio::process::Command::new(kubectl);
    cmd.arg(format!("--server={server}"))
        .arg(format!("--cache-dir={}", cache.display()))
        .args(args)
        .env("HOME", &cache)
        .env("KUBECONFIG", cache.join("none"))
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// Runs kubectl to completion (bounded) and returns its output.
pub async fn kubectl(kubectl: &str, server: &str, args: &[&str]) -> Output {
    kubectl_stdin(kubectl, server, args, None).await
}

/// Runs kubectl with `stdin` as its input (for `-f -`).
pub async fn kubectl_stdin(
    kubectl: &str,
    server: &str,
    args: &[&str],
    stdin: Option<&str>,
) -> Output {
    use tokio::io::AsyncWriteExt;
    let mut cmd = command(kubectl, server, args);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if stdin.is_some() {
        cmd.stdin(std::process::Stdio::piped());
    }
    let mut child = cmd.spawn().unwrap();
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.as_bytes()).await.unwrap();
        drop(pipe);
    }
    tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("kubectl did not finish within 60s")
        .unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts success and returns stdout.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "kubectl failed: {}\nstdout: {}",
        stderr(o),
        stdout(o)
    );
    stdout(o)
}

pub fn pod_yaml(name: &str, image: &str, labels: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\nspec:\n  containers:\n  - name: main\n    image: {image}\n    ports:\n    - containerPort: 80\n"
    )
}

/// Polls `cond` every 20 ms until it holds or `limit` passes.
pub async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}
