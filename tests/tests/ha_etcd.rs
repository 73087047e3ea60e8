//! Three `mesopod` replicas, each its own process, on one real etcd and one standalone
//! `mesopod localmesos`: the leader SIGKILLed while 500 pods are being placed is
//! replaced within its lease and every pod runs, launched once; a leader frozen
//! (SIGSTOP) past its lease and resumed (SIGCONT) writes nothing to etcd and steps
//! down; the real kubectl works against every live replica throughout. Needs etcd
//! (`.ci/install-etcd.sh`): skipped without it, failed under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::MESOPOD;
use common::cluster::pod_yaml;
use rustix::process::{Pid, Signal, kill_process};
use serde_json::Value;
use testkit::{Kubectl, ProcessGuard, ok, wait_until};

type Proc = ProcessGuard<Child>;

const T: Duration = Duration::from_secs(120);

/// Short, consistent election durations (client-go's rules: 6 > 4 > 1.2 × 1).
const LEASE: Duration = Duration::from_secs(6);
const RENEW: &str = "4s";
const RETRY: Duration = Duration::from_secs(1);

/// Starts `mesopod ARGS`, stderr to `log`; returns it with the URL on its first stdout
/// line naming `marker`.
fn spawn(args: &[&str], marker: &str, log: Stdio) -> (Proc, String) {
    let proc = Proc::spawn(
        Command::new(MESOPOD)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(log),
    )
    .expect("mesopod starts")
    .grace(Duration::from_secs(3));
    common::restart::read_url(proc, args, marker)
}

/// One replica: its process, API URL, and the file its log goes to.
struct Replica {
    proc: Proc,
    api: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Replica {
    fn start(master: &str, etcd: &str) -> Self {
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

    fn signal(&self, signal: Signal) {
        let pid = Pid::from_raw(i32::try_from(self.proc.id()).unwrap()).unwrap();
        kill_process(pid, signal).unwrap();
    }

    fn kubectl(&self) -> Kubectl {
        Kubectl::new(&self.api).timeout(Duration::from_secs(30))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// The cluster: etcd, localmesos with simulated agents (tasks run at once and use no
/// process, so 500 pods cost nothing on two cores) and three replicas.
struct Cluster {
    replicas: Vec<Replica>,
    master: String,
    etcd: testkit::etcd::Etcd,
    _mesos: Proc,
}

impl Cluster {
    async fn start(test: &str) -> Option<Self> {
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
        let replicas = (0..3).map(|_| Replica::start(&master, &etcd.url)).collect();
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
    async fn settled(&self, live: &[usize]) -> usize {
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

async fn get_json(url: &str) -> Value {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    match client.get(url).send().await {
        Ok(r) => r.json().await.unwrap_or(Value::Null),
        Err(_) => Value::Null,
    }
}

async fn framework_page(api: &str) -> Value {
    get_json(&format!("{api}/debug/framework")).await
}

/// One pod as the tests read it.
#[derive(Debug, Clone)]
struct PodView {
    phase: String,
    reason: String,
    task: String,
}

/// Every pod `api` lists, by name.
async fn pods(api: &str) -> BTreeMap<String, PodView> {
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
async fn running(api: &str) -> BTreeMap<String, String> {
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
struct Progress {
    running: usize,
    failed: usize,
    others: Vec<(String, PodView)>,
}

impl Progress {
    fn of(all: &BTreeMap<String, PodView>) -> Self {
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
struct Quiet<T>(T);

impl<T> std::fmt::Debug for Quiet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("…")
    }
}

/// Every task Mesos knows of (live and completed), by framework: `(framework, task id)`.
async fn mesos_tasks(master: &str) -> Vec<(String, String)> {
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
fn etcd_revision(url: &str) -> u64 {
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

fn pods_yaml(prefix: &str, n: usize) -> String {
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
async fn kubectl_works(r: &Replica, pod: &str) {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_of_the_leader_while_500_pods_are_placed_launches_each_once() {
    let Some(mut cluster) =
        Cluster::start("sigkill_of_the_leader_while_500_pods_are_placed_launches_each_once").await
    else {
        return;
    };
    let leader = cluster.settled(&[0, 1, 2]).await;
    let survivors: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    for r in &cluster.replicas {
        kubectl_works(r, &format!("before-{}", r.proc.id())).await;
    }
    let framework_id = framework_page(&cluster.replicas[leader].api).await["framework_id"].clone();
    assert!(framework_id.is_string(), "{framework_id}");
    // The 500 go in through a follower, in one kubectl that is still creating when
    // the leader dies; the leader places them as they come.
    let via = cluster.replicas[survivors[0]].api.clone();
    let creating = {
        let kubectl = Kubectl::new(&via).timeout(T);
        tokio::spawn(async move {
            kubectl
                .run_stdin(&["create", "-f", "-"], Some(&pods_yaml("load", 500)))
                .await
        })
    };
    // Mid-placement: some pods Running, most not yet.
    let seen = wait_until(
        "the leader to have placed some of the 500",
        T,
        async || running(&via).await.len(),
        |n| *n >= 50,
    )
    .await;
    let killed = Instant::now();
    cluster.replicas[leader].proc.kill().unwrap();
    cluster.replicas[leader].proc.wait().unwrap();

    // kubectl keeps working against both survivors while nobody leads.
    let during = running(&via).await.len();
    assert!(
        during < 500,
        "the SIGKILL came after placement ({during} Running)"
    );
    for &i in &survivors {
        kubectl_works(&cluster.replicas[i], &format!("during-{i}")).await;
    }
    let next = wait_until(
        "a follower to lead",
        T,
        async || {
            let mut pages = Vec::new();
            for &i in &survivors {
                pages.push((i, framework_page(&cluster.replicas[i].api).await));
            }
            pages
        },
        |pages| pages.iter().any(|(_, p)| p["role"] == "leader"),
    )
    .await;
    let took = killed.elapsed();
    // client-go's bound: the Lease is taken once it went unchanged for the lease
    // duration by the follower's clock, which saw the leader's last renewal at most one
    // jittered retry period (×2.2) late, and looks again at most that often.
    let bound = LEASE + RETRY.mul_f64(2.0 * 2.2);
    eprintln!(
        "takeover after SIGKILL: {took:?} (lease duration {LEASE:?}, bound {bound:?}); \
         {seen} Running when killed, {during} just after"
    );
    assert!(
        took <= bound,
        "a follower led {took:?} after the SIGKILL (lease {LEASE:?})"
    );
    // Nor sooner than the lease allows: the last renewal came at most one retry
    // period before the SIGKILL.
    assert!(
        took >= LEASE - RETRY,
        "a follower took a live lease: {took:?} after the SIGKILL (lease {LEASE:?})"
    );
    let new_leader = next
        .iter()
        .find(|(_, p)| p["role"] == "leader")
        .map(|(i, _)| *i)
        .unwrap();
    assert_eq!(cluster.settled(&survivors).await, new_leader);
    ok(&creating.await.unwrap());
    let page = framework_page(&cluster.replicas[new_leader].api).await;
    assert_eq!(
        page["framework_id"], framework_id,
        "the new leader subscribed as the same framework"
    );
    for &i in &survivors {
        kubectl_works(&cluster.replicas[i], &format!("after-{i}")).await;
    }

    // 500 + 3 before + 2 during + 2 after.
    let total = 507;
    let api = cluster.replicas[new_leader].api.clone();
    let (_, all) = wait_until(
        "every pod Running",
        T,
        async || {
            let all = pods(&api).await;
            (Progress::of(&all), Quiet(all))
        },
        |(p, _)| p.failed > 0 || (p.others.is_empty() && p.running == total),
    )
    .await;
    let all = all.0;
    let failed: Vec<(&String, &str)> = all
        .iter()
        .filter(|(_, p)| p.phase == "Failed")
        .map(|(n, p)| (n, p.reason.as_str()))
        .collect();
    assert!(failed.is_empty(), "pods failed (name, reason): {failed:?}");
    assert_eq!(all.len(), total);
    // Each launched once: Mesos knows exactly one task per Running pod, all of one
    // framework, and it is the task the pod names.
    let tasks = mesos_tasks(&cluster.master).await;
    let frameworks: BTreeSet<&str> = tasks.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(frameworks.len(), 1, "{frameworks:?}");
    assert_eq!(
        Some(&Value::from(*frameworks.first().unwrap())),
        Some(&framework_id)
    );
    let ids: BTreeSet<&str> = tasks.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(ids.len(), tasks.len(), "a task id launched twice");
    let running: BTreeSet<&str> = all
        .values()
        .filter(|p| p.phase == "Running")
        .map(|p| p.task.as_str())
        .collect();
    assert_eq!(
        running, ids,
        "each Running pod's task is the one Mesos runs"
    );
    // A pod the killed leader bound, whose ACCEPT it never sent, runs on its node
    // all the same: the master answers its reconciliation TASK_GONE, and the new
    // leader launches it there with a new task (the one it names now, checked above).
    let relaunched = cluster.replicas[new_leader]
        .log()
        .matches("the task never reached Mesos")
        .count();
    eprintln!(
        "{} Running, each launched once; {relaunched} bound by the killed leader before \
         its ACCEPT, launched again on their nodes",
        running.len()
    );
    assert!(
        relaunched <= framework::core::MAX_LAUNCHING,
        "{relaunched} relaunched"
    );
    let _ = &cluster.etcd;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_frozen_past_its_lease_writes_nothing_after_sigcont_and_steps_down() {
    let Some(mut cluster) = Cluster::start(
        "a_leader_frozen_past_its_lease_writes_nothing_after_sigcont_and_steps_down",
    )
    .await
    else {
        return;
    };
    let old = cluster.settled(&[0, 1, 2]).await;
    let api = cluster.replicas[old].api.clone();
    ok(&cluster.replicas[old]
        .kubectl()
        .run_stdin(&["create", "-f", "-"], Some(&pods_yaml("doomed", 5)))
        .await);
    wait_until(
        "five pods Running",
        T,
        async || running(&api).await.len(),
        |n| *n == 5,
    )
    .await;

    // Frozen: another replica takes the lease once it went unchanged for its duration.
    cluster.replicas[old].signal(Signal::STOP);
    let others: Vec<usize> = (0..3).filter(|&i| i != old).collect();
    let next = cluster.settled(&others).await;
    let last = others.into_iter().find(|&i| i != next).unwrap();
    // The new leader freezes too, before it can act on what follows; the last
    // replica (a follower) records five deletions whose grace ends in a second, so
    // that a leader's sweep, were one running, would remove those pods.
    cluster.replicas[next].signal(Signal::STOP);
    let names: Vec<String> = (0..5).map(|i| format!("doomed-{i:03}")).collect();
    let mut delete = vec!["delete", "pod", "--grace-period=1", "--wait=false"];
    delete.extend(names.iter().map(String::as_str));
    ok(&cluster.replicas[last].kubectl().run(&delete).await);
    cluster.replicas[last].signal(Signal::STOP);
    let due = SystemTime::now() + Duration::from_millis(1500);
    // A wall-clock deadline, not a condition: the deletions fall due at that time.
    tokio::time::sleep(due.duration_since(SystemTime::now()).unwrap_or_default()).await;
    // Nobody runs now but etcd: any revision from here on is the old leader's.
    let before = etcd_revision(&cluster.etcd.url);

    cluster.replicas[old].signal(Signal::CONT);
    let status = tokio::time::timeout(T, async {
        loop {
            if let Some(s) = cluster.replicas[old].proc.try_wait().unwrap() {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the old leader steps down and exits");
    let after = etcd_revision(&cluster.etcd.url);
    let log = cluster.replicas[old].log();
    assert!(!status.success(), "{status:?}\n{log}");
    // It stops on whichever it hears first: its elector's next round (the renew
    // deadline passed while it was frozen) or Mesos telling it the framework failed
    // over to the new leader's subscription.
    assert!(
        log.contains("leaderelection lost") || log.contains("took over this framework"),
        "{log}"
    );
    assert_eq!(
        after, before,
        "the resumed old leader wrote to etcd after losing its lease\n{log}"
    );

    // The last replica resumes and takes over; the frozen new leader, resumed after
    // that, finds its lease gone too and steps down the same way.
    cluster.replicas[last].signal(Signal::CONT);
    assert_eq!(cluster.settled(&[last]).await, last);
    cluster.replicas[next].signal(Signal::CONT);
    tokio::time::timeout(T, async {
        while cluster.replicas[next].proc.try_wait().unwrap().is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the second frozen leader steps down too");
    // Restarted as their supervisor would, both follow; kubectl works on all three,
    // and the leader's sweep removes the deleted pods.
    for i in [old, next] {
        cluster.replicas[i] = Replica::start(&cluster.master, &cluster.etcd.url);
    }
    assert_eq!(cluster.settled(&[0, 1, 2]).await, last);
    for (i, r) in cluster.replicas.iter().enumerate() {
        kubectl_works(r, &format!("later-{i}")).await;
    }
    let later = wait_until(
        "the deleted pods gone, the new ones Running",
        T,
        async || running(&cluster.replicas[old].api).await,
        |pods| pods.len() == 3 && pods.keys().all(|p| p.starts_with("later-")),
    )
    .await;
    assert_eq!(later.len(), 3);
}
