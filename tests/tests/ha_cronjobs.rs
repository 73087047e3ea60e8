//! Two `mesopod` replicas on one real etcd, and a CronJob every minute: a tick's Job
//! is made exactly once whatever happens to the leader around the tick. The leader
//! SIGKILLed a moment before a tick (the new leader runs the tick it missed), and
//! the leader SIGSTOPped across a tick and then resumed (it wakes believing it leads,
//! and must not make the tick's Job again). The guard is the Job's name, derived from
//! the tick, created only if absent; the fence stops a deposed leader's writes.
//!
//! The schedule is the wall clock's, so these tests wait for minute boundaries (a
//! tick cannot be injected into other processes); each takes two to three minutes.
//! Needs etcd (`.ci/install-etcd.sh`): skipped without it, failed under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::ha::*;
use rustix::process::Signal;
use serde_json::Value;
use testkit::{ok, wait_until};

const CRONJOB: &str = "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: tick\nspec:\n  schedule: \"* * * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: main\n            image: busybox:1.36\n            command: [\"sleep\", \"600\"]\n            resources:\n              requests: {cpu: 10m, memory: 16Mi}\n";

const SCHEDULED: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// Seconds since the epoch, now.
fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The next minute boundary after now, in seconds since the epoch.
fn next_tick() -> u64 {
    (now_s() / 60 + 1) * 60
}

/// Sleeps until `secs` since the epoch: waiting for the wall clock itself, not for
/// a condition, since the replicas tick by it.
async fn sleep_until(secs: f64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    if secs > now {
        tokio::time::sleep(Duration::from_secs_f64(secs - now)).await;
    }
}

/// The CronJob's Jobs: name → (uid, scheduled timestamp).
async fn jobs(api: &str) -> BTreeMap<String, (String, String)> {
    let list = get_json(&format!("{api}/apis/batch/v1/namespaces/default/jobs")).await;
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            (
                j["metadata"]["name"].as_str().unwrap_or("").to_owned(),
                (
                    j["metadata"]["uid"].as_str().unwrap_or("").to_owned(),
                    j["metadata"]["annotations"][SCHEDULED]
                        .as_str()
                        .unwrap_or("")
                        .to_owned(),
                ),
            )
        })
        .collect()
}

/// The name of the Job of the tick at `secs` (kube's `<cronjob>-<unix minutes>`).
fn job_of(secs: u64) -> String {
    format!("tick-{}", secs / 60)
}

/// Pods per Job, by the Job's name label.
async fn pods_per_job(api: &str) -> BTreeMap<String, usize> {
    let list = get_json(&format!("{api}/api/v1/namespaces/default/pods")).await;
    let mut out = BTreeMap::new();
    for p in list["items"].as_array().into_iter().flatten() {
        if let Some(job) = p["metadata"]["labels"]["batch.kubernetes.io/job-name"].as_str() {
            *out.entry(job.to_owned()).or_default() += 1;
        }
    }
    out
}

/// Every scheduled time has one Job, and every Job one pod; the Jobs of `ticks` exist.
async fn one_job_per_tick(api: &str, ticks: &[u64]) -> BTreeMap<String, (String, String)> {
    let all = wait_until(
        "the ticks' Jobs and their pods",
        T,
        async || (jobs(api).await, pods_per_job(api).await),
        |(jobs, pods)| {
            ticks.iter().all(|t| {
                pods.get(&job_of(*t)).copied().unwrap_or(0) >= 1 && jobs.contains_key(&job_of(*t))
            })
        },
    )
    .await;
    let (jobs, pods) = all;
    let mut by_time: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (name, (_, at)) in &jobs {
        assert!(!at.is_empty(), "{name} has no scheduled timestamp");
        by_time.entry(at.as_str()).or_default().push(name);
    }
    for (at, names) in &by_time {
        assert_eq!(names.len(), 1, "the tick {at} has Jobs {names:?}");
    }
    for (job, n) in &pods {
        assert_eq!(*n, 1, "the Job {job} has {n} pods");
    }
    jobs
}

async fn first_tick(api: &str) -> u64 {
    let jobs = wait_until(
        "the CronJob's first Job",
        Duration::from_secs(150),
        async || jobs(api).await,
        |j| !j.is_empty(),
    )
    .await;
    let name = jobs.keys().next().unwrap();
    let minutes: u64 = name.trim_start_matches("tick-").parse().unwrap();
    minutes * 60
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_leader_killed_before_a_tick_leaves_one_job_for_it() {
    let Some(mut cluster) =
        Cluster::with_replicas("the_leader_killed_before_a_tick_leaves_one_job_for_it", 2).await
    else {
        return;
    };
    let leader = cluster.settled(&[0, 1]).await;
    let follower = 1 - leader;
    let via = cluster.replicas[follower].api.clone();
    let k = cluster.replicas[follower].kubectl();
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(CRONJOB)).await);
    let first = first_tick(&via).await;

    // A moment before the next tick, the leader dies.
    let tick = next_tick();
    sleep_until(tick as f64 - 1.0).await;
    cluster.replicas[leader].proc.kill().unwrap();
    cluster.replicas[leader].proc.wait().unwrap();
    assert!(now_s() < tick + 1, "the SIGKILL came late");
    assert_eq!(cluster.settled(&[follower]).await, follower);

    // The new leader runs the tick it missed, once.
    let jobs = one_job_per_tick(&via, &[first, tick]).await;
    let uid = jobs[&job_of(tick)].0.clone();
    let cj = get_json(&format!(
        "{via}/apis/batch/v1/namespaces/default/cronjobs/tick"
    ))
    .await;
    let last: Value = cj["status"]["lastScheduleTime"].clone();
    assert!(
        last.as_str().is_some_and(|s| !s.is_empty()),
        "no lastScheduleTime: {cj}"
    );
    // The next tick comes from the new leader, and the old Job stays the same Job.
    let after = tick + 60;
    let jobs = one_job_per_tick(&via, &[first, tick, after]).await;
    assert_eq!(jobs[&job_of(tick)].0, uid, "the tick's Job was made again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_leader_stopped_across_a_tick_makes_no_second_job_when_it_resumes() {
    let Some(cluster) = Cluster::with_replicas(
        "the_leader_stopped_across_a_tick_makes_no_second_job_when_it_resumes",
        2,
    )
    .await
    else {
        return;
    };
    let leader = cluster.settled(&[0, 1]).await;
    let follower = 1 - leader;
    let via = cluster.replicas[follower].api.clone();
    let k = cluster.replicas[follower].kubectl();
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(CRONJOB)).await);
    let first = first_tick(&via).await;

    // Stopped two seconds before the tick: it cannot renew, and the other replica
    // takes the lease after it lapses, then runs the tick.
    let tick = next_tick();
    sleep_until(tick as f64 - 2.0).await;
    cluster.replicas[leader].signal(Signal::STOP);
    let jobs = one_job_per_tick(&via, &[first, tick]).await;
    let uid = jobs[&job_of(tick)].0.clone();

    // Woken: it still believes it leads, until it reads the lease again.
    cluster.replicas[leader].signal(Signal::CONT);
    assert_eq!(cluster.settled(&[0, 1]).await, follower);
    let after = tick + 60;
    let jobs = one_job_per_tick(&via, &[first, tick, after]).await;
    assert_eq!(jobs[&job_of(tick)].0, uid, "the tick's Job was made again");
    // Both replicas serve the same Jobs.
    let other = &cluster.replicas[leader].api;
    assert_eq!(self::jobs(other).await, jobs);
}
