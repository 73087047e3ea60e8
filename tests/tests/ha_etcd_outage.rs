//! An etcd outage under two `mesopod` replicas (each its own process, on one real etcd
//! and one standalone `mesopod localmesos`): while etcd is down both replicas' `/readyz`
//! fails as kube-apiserver's does (`[-]etcd failed: reason withheld`, 500 `readyz check
//! failed`) and `/livez` passes, reads are still served and writes refused; the leader
//! steps down without exiting. When etcd is back on the same data and port, one
//! replica leads again, a new pod runs, and the pods from before the outage run on,
//! each launched once. Needs etcd (`.ci/install-etcd.sh`): skipped without it, failed
//! under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::cluster::pod_yaml;
use common::ha::*;
use testkit::{ok, wait_until};

/// How soon a replica must report etcd unreachable: one check's timeout
/// (kube-apiserver's `--etcd-healthcheck-timeout`, 2s), with room for a loaded machine.
const UNREADY_WITHIN: Duration = Duration::from_secs(10);

/// `(status, body)` of `GET url`; `(0, error)` when nothing answered.
async fn get(url: &str) -> (u16, String) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    match client.get(url).send().await {
        Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

async fn readyz(r: &Replica) -> (u16, String) {
    get(&format!("{}/readyz?verbose", r.api)).await
}

async fn livez_passes(cluster: &Cluster, when: &str) {
    for (i, r) in cluster.replicas.iter().enumerate() {
        let (code, body) = get(&format!("{}/livez", r.api)).await;
        assert_eq!(code, 200, "replica {i}'s /livez {when}: {body}");
    }
}

fn alive(cluster: &mut Cluster, when: &str) {
    for (i, r) in cluster.replicas.iter_mut().enumerate() {
        let exited = r.proc.try_wait().unwrap();
        assert!(
            exited.is_none(),
            "replica {i} exited {when}: {exited:?}\n{}",
            r.log()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_etcd_outage_unreadies_both_replicas_and_the_leader_steps_down_then_leads_again() {
    let Some(mut cluster) = Cluster::with_replicas(
        "an_etcd_outage_unreadies_both_replicas_and_the_leader_steps_down_then_leads_again",
        2,
    )
    .await
    else {
        return;
    };
    let leader = cluster.settled(&[0, 1]).await;
    for r in &cluster.replicas {
        let (code, body) = readyz(r).await;
        assert_eq!(code, 200, "{body}");
        assert!(
            body.contains("[+]etcd ok\n") && body.ends_with("readyz check passed\n"),
            "{body}"
        );
    }
    let api = cluster.replicas[leader].api.clone();
    ok(&cluster.replicas[leader]
        .kubectl()
        .run_stdin(&["create", "-f", "-"], Some(&pods_yaml("before", 3)))
        .await);
    let before = wait_until(
        "three pods Running",
        T,
        async || running(&api).await,
        |pods| pods.len() == 3,
    )
    .await;

    cluster.etcd.stop();
    let stopped = Instant::now();
    for (i, r) in cluster.replicas.iter().enumerate() {
        let (_, body) = wait_until(
            &format!("replica {i}'s /readyz to fail on etcd"),
            UNREADY_WITHIN,
            async || readyz(r).await,
            |(code, _)| *code == 500,
        )
        .await;
        // kube-apiserver's words: the failing check, its reason kept for the log.
        assert!(
            body.contains("[+]ping ok\n")
                && body.contains("[-]etcd failed: reason withheld\n")
                && body.ends_with("readyz check failed\n"),
            "{body}"
        );
    }
    eprintln!(
        "both replicas unready {:?} after etcd stopped",
        stopped.elapsed()
    );
    livez_passes(&cluster, "with etcd down").await;

    // The leader cannot renew: past the renew deadline it steps down, stops its
    // scheduler, and stays up as a follower (it competes only once that has stopped).
    let page = wait_until(
        "the leader to step down",
        T,
        async || framework_page(&cluster.replicas[leader].api).await,
        |p| p["role"] == "follower",
    )
    .await;
    assert_eq!(page["subscribed"], false, "{page}");
    eprintln!(
        "the leader stepped down {:?} after etcd stopped",
        stopped.elapsed()
    );
    assert!(
        cluster.replicas[leader]
            .log()
            .contains("leaderelection lost"),
        "{}",
        cluster.replicas[leader].log()
    );
    alive(&mut cluster, "with etcd down");
    livez_passes(&cluster, "after the leader stepped down").await;
    // Reads are served from what the replicas hold; writes cannot be made.
    for (i, r) in cluster.replicas.iter().enumerate() {
        let listed = running(&r.api).await;
        assert_eq!(listed, before, "replica {i} lists the pods from before");
        let refused = r
            .kubectl()
            .run_stdin(
                &["create", "-f", "-"],
                Some(&pod_yaml(&format!("refused-{i}"), "", "sleep 600")),
            )
            .await;
        assert!(
            !refused.status.success(),
            "a write with etcd down: {refused:?}"
        );
    }

    cluster.etcd.restart().await;
    for (i, r) in cluster.replicas.iter().enumerate() {
        wait_until(
            &format!("replica {i} ready again"),
            T,
            async || readyz(r).await,
            |(code, _)| *code == 200,
        )
        .await;
    }
    let next = cluster.settled(&[0, 1]).await;
    eprintln!(
        "replica {next} leads again (replica {leader} led before), {:?} after etcd stopped",
        stopped.elapsed()
    );
    alive(&mut cluster, "after etcd came back");
    ok(&cluster.replicas[next]
        .kubectl()
        .run_stdin(&["create", "-f", "-"], Some(&pods_yaml("after", 1)))
        .await);
    let api = cluster.replicas[next].api.clone();
    let now = wait_until(
        "the new pod Running beside the old ones",
        T,
        async || running(&api).await,
        |pods| pods.len() == 4,
    )
    .await;
    // The pods from before run on with the tasks they had.
    let kept: BTreeMap<String, String> = now
        .iter()
        .filter(|(name, _)| name.starts_with("before-"))
        .map(|(n, t)| (n.clone(), t.clone()))
        .collect();
    assert_eq!(kept, before, "the pods from before kept their tasks");
    assert!(now.contains_key("after-000"), "{now:?}");
    // Each launched once: Mesos knows exactly one task per Running pod, of one framework.
    let tasks = mesos_tasks(&cluster.master).await;
    let frameworks: BTreeSet<&str> = tasks.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(frameworks.len(), 1, "{frameworks:?}");
    let ids: BTreeSet<&str> = tasks.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        ids.len(),
        tasks.len(),
        "a task id launched twice: {tasks:?}"
    );
    let running_ids: BTreeSet<&str> = now.values().map(String::as_str).collect();
    assert_eq!(
        running_ids, ids,
        "each Running pod's task is the one Mesos runs"
    );
    livez_passes(&cluster, "at the end").await;
}
