//! An in-process server on 127.0.0.1:0 with the durable store in a temporary
//! directory, and a test log source. Shared with the end-to-end tests of
//! the `tests` crate, which include this file (kubectl against the shim).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use apiserver::store::MemoryStore;
use apiserver::{Api, LogError, LogRequest, LogSource, ManualClock, NoLogs, SystemClock};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::oneshot;

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
        testkit::init_crypto();
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

/// An in-memory API on a manual clock, started at a fixed time.
pub async fn api_with_clock() -> (Api, Arc<ManualClock>) {
    api_on_with_clock(Arc::new(MemoryStore::new().unwrap())).await
}

/// [`api_with_clock`] on a store in `etcd`, at kube-apiserver's defaults.
pub async fn etcd_api_with_clock(etcd: &testkit::etcd::Etcd) -> (Api, Arc<ManualClock>) {
    let config = apiserver::store::EtcdConfig::new(vec![etcd.url.clone()]);
    let store = apiserver::store::EtcdStore::connect(config, None)
        .await
        .unwrap();
    api_on_with_clock(Arc::new(store)).await
}

async fn api_on_with_clock(store: Arc<dyn apiserver::store::Store>) -> (Api, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
    ));
    let api = Api::start(store, clock.clone(), Arc::new(NoLogs))
        .await
        .unwrap();
    (api, clock)
}

/// A pod with one container of `image`, port 80 and `labels` (`k: v, ...`).
pub fn pod_yaml(name: &str, image: &str, labels: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{{labels}}}\nspec:\n  containers:\n  - name: main\n    image: {image}\n    ports:\n    - containerPort: 80\n"
    )
}

/// A JSON client of one test server: every answer as (code, body).
pub struct Http {
    client: reqwest::Client,
    base: String,
}

impl Http {
    pub fn new(server: &Server) -> Self {
        testkit::init_crypto();
        Self {
            client: reqwest::Client::new(),
            base: server.url.clone(),
        }
    }

    pub async fn send(&self, method: &str, path: &str, ct: &str, body: Vec<u8>) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let resp = self
            .client
            .request(method, format!("{}{path}", self.base))
            .header("content-type", ct)
            .body(body)
            .send()
            .await
            .unwrap();
        let code = resp.status().as_u16();
        let bytes = resp.bytes().await.unwrap();
        (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    pub async fn json(&self, method: &str, path: &str, body: &Value) -> (u16, Value) {
        self.send(
            method,
            path,
            "application/json",
            serde_json::to_vec(body).unwrap(),
        )
        .await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.send("GET", path, "", Vec::new()).await
    }
}

/// An `apps/v1` workload of `kind` selecting and labelling its pods `app: <name>`,
/// with one busybox container; callers add what their kind needs.
pub fn apps_workload(kind: &str, name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}
            }
        }
    })
}

/// A `batch/v1` Job whose one busybox container runs to completion once.
pub fn batch_job(name: &str) -> Value {
    serde_json::json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox:1.36"}]
        }}}
    })
}

/// [`batch_job`] with the fields of `spec` set in its spec.
pub fn batch_job_with(name: &str, spec: Value) -> Value {
    let mut j = batch_job(name);
    for (k, v) in spec.as_object().into_iter().flatten() {
        j["spec"][k] = v.clone();
    }
    j
}

/// The `field: message` of each cause of a 422 Invalid Status.
pub fn causes(status: &Value) -> Vec<String> {
    status["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{}: {}",
                c["field"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect()
}
