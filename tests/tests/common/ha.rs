//! Mesopod replicas, each its own process, on one real etcd and one standalone
//! `mesopod localmesos` with simulated agents: what `ha_etcd.rs` and
//! `ha_etcd_outage.rs` share.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;
use testkit::{Kubectl, ProcessGuard, ok, wait_until};

use super::MESOPOD;
use super::cluster::pod_yaml;

pub type Proc = ProcessGuard<Child>;

pub const T: Duration = Duration::from_secs(120);

/// Short, consistent election durations (client-go's rules: 6 > 4 > 1.2 × 1).
pub const LEASE: Duration = Duration::from_secs(6);
pub const RENEW: &str = "4s";
pub const RETRY: Duration = Duration::from_secs(1);

/// Starts `mesopod ARGS`, stderr to `log`; returns it with the URL on its first stdout
/// line naming `marker`.
pub fn spawn(args: &[&str], marker: &str, log: Stdio) -> (Proc, String) {
    let proc = Proc::spawn(
        Command::new(MESOPOD)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(log),
    )
    .expect("mesopod starts")
    .grace(Duration::from_secs(3));
    super::restart::read_url(proc, args, marker)
}

/// One replica: its process, API URL, and the file its log goes to.
pub struct Replica {
    pub proc: Proc,
    pub api: String,
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Replica {
    pub fn start(master: &str, etcd: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("mesopod.log");
        let file = std::fs::File::create(&log).unwrap();
        let data_dir = dir.path().join("data");
        let lease = format!("{}s", LEASE.as_secs());
        let retry = format!("{}s", RETRY.as_secs());
        let (proc, api) = spawn(
            &[
                "scheduler",
                "--master",
                master,
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                data_dir.to_str().unwrap(),
                "--etcd-servers",
                etcd,
                "--leader-elect-lease-duration",
                &lease,
                "--leader-elect-renew-deadline",
                RENEW,
                "--leader-elect-retry-period",
                &retry,
                "--offer-ttl",
                "1h",
                "--container-runtime=process",
            ],
            "Kubernetes API",
            Stdio::from(file),
        );
        Self {
            proc,
            api,
            log,
            _dir: dir,
        }
    }

    pub fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.proc.id()).unwrap()).unwrap();
        kill_process(pid, signal).unwrap();
    }

    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(&self.api).timeout(Duration::from_secs(30))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The cluster: etcd, localmesos with simulated agents (tasks run at once and use no
/// process, so 500 pods cost nothing on two cores) and the replicas.
pub struct Cluster {
    pub replicas: Vec<Replica>,
    pub master: String,
    pub etcd: testkit::etcd::Etcd,
    _mesos: Proc,
}

impl Cluster {
    /// Three replicas; `None` (the test skipped) without etcd outside CI.
    pub async fn start(test: &str) -> Option<Self> {
        Self::with_replicas(test, 3).await
    }

    /// `n` replicas.
    pub async fn with_replicas(test: &str, n: usize) -> Option<Self> {
        testkit::init_crypto();
        let etcd = testkit::etcd::Etcd::start(test).await?;
        let (mesos, master) = spawn(
            &[
                "localmesos",
                "--listen",
                "127.0.0.1:0",
                "--agents",
                "4",
                "--simulate",
                "--resources",
                "cpus:16;mem:65536;ports:[31000-32000]",
                "--allocation-interval",
                "100ms",
            ],
            "http://",
            Stdio::null(),
        );
        let replicas = (0..n).map(|_| Replica::start(&master, &etcd.url)).collect();
        Some(Self {
            replicas,
            master,
            etcd,
            _mesos: mesos,
        })
    }
}

/// A failed test keeps every replica's log: copied under the target's tmp dir, with
/// its warnings and errors printed, since the temp dirs go with the cluster.
impl Drop for Cluster {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("ha_etcd-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        for (i, r) in self.replicas.iter().enumerate() {
            let kept = dir.join(format!("replica-{i}.log"));
            let _ = std::fs::copy(&r.log, &kept);
            eprintln!("replica {i}'s log: {}", kept.display());
            let log = r.log();
            for line in log
                .lines()
                .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                .take(60)
            {
                eprintln!("  replica {i}: {line}");
            }
        }
    }
}

impl Cluster {
    /// Waits until replica `leader` of `live` leads and the others follow it.
    pub async fn settled(&self, live: &[usize]) -> usize {
        let pages = wait_until(
            "one leader, and followers naming it",
            T,
            async || {
                let mut roles = Vec::new();
                for &i in live {
                    roles.push(framework_page(&self.replicas[i].api).await);
                }
                roles
            },
            |pages| {
                let leaders: Vec<&Value> = pages.iter().filter(|p| p["role"] == "leader").collect();
                leaders.len() == 1
                    && leaders[0]["subscribed"] == true
                    && pages.iter().all(|p| {
                        p["role"] == "leader"
                            || (p["role"] == "follower" && p["holder"] == leaders[0]["identity"])
                    })
            },
        )
        .await;
        live[pages.iter().position(|p| p["role"] == "leader").unwrap()]
    }
}

pub async fn get_json(url: &str) -> Value {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    match client.get(url).send().await {
        Ok(r) => r.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

pub async fn framework_page(api: &str) -> Value {
    get_json(&format!("{api}/debug/framework")).await
}

/// One pod as the tests read it.
#[derive(Debug, Clone)]
pub struct PodView {
    pub phase: String,
    pub reason: String,
    pub task: String,
}

/// Every pod `api` lists, by name.
pub async fn pods(api: &str) -> BTreeMap<String, PodView> {
    // Listing hundreds of pods is not free on two cores: look four times a second.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let list = get_json(&format!("{api}/api/v1/namespaces/default/pods")).await;
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let field = |v: &Value| v.as_str().unwrap_or("").to_owned();
            let view = PodView {
                phase: field(&p["status"]["phase"]),
                reason: field(&p["status"]["reason"]),
                task: field(&p["metadata"]["annotations"]["mesopod.io/task-id"]),
            };
            (field(&p["metadata"]["name"]), view)
        })
        .collect()
}

/// `(name, task id)` of every Running pod, as `api` lists them.
pub async fn running(api: &str) -> BTreeMap<String, String> {
    pods(api)
        .await
        .into_iter()
        .filter(|(_, p)| p.phase == "Running")
        .map(|(name, p)| (name, p.task))
        .collect()
}

/// How many pods run, how many failed, and the first few neither: what a timeout
/// shows (not hundreds of pods).
#[derive(Debug)]
pub struct Progress {
    pub running: usize,
    pub failed: usize,
    pub others: Vec<(String, PodView)>,
}

impl Progress {
    pub fn of(all: &BTreeMap<String, PodView>) -> Self {
        let count = |phase: &str| all.values().filter(|p| p.phase == phase).count();
        Self {
            running: count("Running"),
            failed: count("Failed"),
            others: all
                .iter()
                .filter(|(_, p)| p.phase != "Running" && p.phase != "Failed")
                .take(10)
                .map(|(n, p)| (n.clone(), p.clone()))
                .collect(),
        }
    }
}

/// A value a timeout does not print.
pub struct Quiet<T>(pub T);

impl<T> std::fmt::Debug for Quiet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("…")
    }
}

/// Every task Mesos knows of (live and completed), by framework: `(framework, task id)`.
pub async fn mesos_tasks(master: &str) -> Vec<(String, String)> {
    let state = get_json(&format!("{master}/master/state")).await;
    let mut out = Vec::new();
    for f in state["frameworks"].as_array().into_iter().flatten() {
        for t in ["tasks", "completed_tasks"]
            .iter()
            .flat_map(|k| f[*k].as_array().into_iter().flatten())
        {
            out.push((
                f["id"].as_str().unwrap_or("").to_owned(),
                t["id"].as_str().unwrap_or("").to_owned(),
            ));
        }
    }
    out
}

/// etcd's current revision: one more per transaction anyone commits.
pub fn etcd_revision(url: &str) -> u64 {
    let out = Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", url, "endpoint", "status", "-w", "json"])
        .output()
        .expect("etcdctl runs");
    assert!(out.status.success(), "{out:?}");
    let status: Value = serde_json::from_slice(&out.stdout).unwrap();
    status[0]["Status"]["header"]["revision"]
        .as_u64()
        .expect("a revision")
}

pub fn pods_yaml(prefix: &str, n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "---\n{}",
                pod_yaml(&format!("{prefix}-{i:03}"), "", "sleep 600")
            )
        })
        .collect()
}

/// kubectl create and get against `r`: both must answer, whoever leads.
pub async fn kubectl_works(r: &Replica, pod: &str) {
    let yaml = pod_yaml(pod, "", "sleep 600");
    ok(&r
        .kubectl()
        .run_stdin(&["create", "-f", "-"], Some(&yaml))
        .await);
    let out = ok(&r.kubectl().run(&["get", "pod", pod, "-o", "name"]).await);
    assert_eq!(out.trim(), format!("pod/{pod}"));
    let lease = ok(&r
        .kubectl()
        .run(&["get", "lease", "-n", "kube-system"])
        .await);
    assert!(lease.contains("mesopod"), "{lease}");
}
